"""`guardian status` and `guardian config validate|show`: what Guardian sees now, and how it is
configured.

`status` asks the real decision point when the next restart is allowed and why it is held back,
and lists the sweep's own containers, so it can never disagree with what the daemon would do.
It needs no notification secrets: it builds no channel.
"""

from __future__ import annotations

import argparse
from collections.abc import Callable, Mapping
from datetime import timedelta
from typing import TYPE_CHECKING, Any

from guardian.core.detection.log_rules import LogRule
from guardian.core.durations import format_duration
from guardian.core.outbound.hook_specs import HookSpec
from guardian.core.redaction import redact_patterns, scrub_url
from guardian.entrypoints.cli.tables import (
    EXIT_OK,
    add_json,
    one_line_errors,
    print_json,
    settings_for,
    table,
)

if TYPE_CHECKING:
    from guardian.config import Settings

STATUS_COLUMNS = ("container", "state", "health", "incidents", "next_restart", "held_back")
OPEN_COLUMNS = ("id", "container", "type", "state", "escalated", "opened_at", "occurrences")
SILENCE_COLUMNS = ("container", "until", "by", "reason")
MAINTENANCE_COLUMNS = ("container", "window", "from", "in_force_until", "next_start")
REDACTED = "<redacted>"
# Key names that hold a secret themselves; `*_env` and `*_file` only say where one is kept.
_SECRET_WORDS = ("token", "password", "secret", "webhook", "api_key", "apikey", "credential")

WithConfig = Callable[[argparse.ArgumentParser], argparse.ArgumentParser]


@one_line_errors
def cmd_status(args: argparse.Namespace) -> int:
    # The adapters load only for the command that uses them: `config validate` stays light.
    from guardian.bootstrap import build_status
    from guardian.config.store import existing_store_path
    from guardian.readside.status import container_status
    from guardian.readside.views import (
        container_view,
        engine_view,
        incident_view,
        maintenance_view,
        silence_view,
    )

    settings = settings_for(args)
    existing_store_path(settings)
    app = build_status(settings)
    try:
        app.engine.ping()
        engine = engine_view(app.engine.identity(), settings["docker.url"])
        host = app.loop.host
        now = app.clock.now()
        statuses = container_status(app.healer, app.operator)
        containers = [container_view(c) for c in statuses]
        maintenance = maintenance_view(statuses, now)
        open_incidents = [incident_view(i) for i in app.store.open_incidents(host) if i.is_open]
        silences = [silence_view(s, now) for s in app.store.silences(host, now)]
    finally:
        app.edges.close()
    if args.json:
        doc = {
            "engine": engine,
            "containers": containers,
            "open_incidents": open_incidents,
            "silences": silences,
            "maintenance": maintenance,
        }
        print_json(doc)
        return EXIT_OK
    table(containers, STATUS_COLUMNS, f"no watched containers (label: {settings['watch.label']})")
    print()
    table(open_incidents, OPEN_COLUMNS, "no open incidents")
    if silences:
        print()
        table(silences, SILENCE_COLUMNS, "no silences")
    if maintenance:
        print()
        table(maintenance, MAINTENANCE_COLUMNS, "no maintenance windows")
    notes = [f"{c['container']}: {note}" for c in containers for note in c["notes"]]
    if notes:
        print()
        print("\n".join(notes))
    print(
        f"\nengine: {engine['kind']} {engine['version']} (Docker API {engine['api_version']}) "
        f"at {engine['url']}"
    )
    return EXIT_OK


def is_secret(key: str) -> bool:
    key = key.lower()
    if key.endswith(("_env", "_file")):
        return False
    return any(word in key for word in _SECRET_WORDS)


def _plain(key: str, value: Any) -> Any:
    if value is None:
        return None
    if is_secret(key):
        return REDACTED
    if isinstance(value, timedelta):
        return format_duration(value) if value else "0s"
    if isinstance(value, Mapping):  # a receiver or a route (notify.channels, notify.routes)
        return {k: _plain(k, v) for k, v in value.items()}
    if isinstance(value, HookSpec):  # an argument may carry a token: shown redacted
        argv = [redact_patterns(scrub_url(a)) for a in value.argv]
        return {
            "name": value.name,
            "argv": argv,
            "after": list(value.after),
            "timeout": _plain("timeout", value.timeout),
        }
    if isinstance(value, LogRule):  # logs.rules
        return {"containers": value.containers, "match": value.match}
    if isinstance(value, tuple | list):
        return [_plain(key, v) for v in value]
    if isinstance(value, str) and "://" in value:
        return scrub_url(value)
    return value


def effective_config(settings: Settings) -> dict[str, dict[str, Any]]:
    """Every key with the value in force (file, environment or default), secrets redacted."""
    return {
        section: {key: _plain(key, value) for key, value in keys.items()}
        for section, keys in settings.values.items()
    }


def cmd_config_show(args: argparse.Namespace) -> int:
    import yaml

    settings = settings_for(args)
    print(f"# effective configuration ({settings.source} + environment); secrets redacted")
    print(yaml.safe_dump(effective_config(settings), sort_keys=False).rstrip())
    return EXIT_OK


def refusals_at_load(settings: Settings) -> None:
    """What `guardian run` refuses at load beyond the file itself, with its words (the same
    functions raise them): the API token, the heartbeat's URLs and every receiver's keys and
    secrets. The channels' adapters load only when a receiver is configured."""
    from guardian.config.credentials import load_token
    from guardian.config.heartbeat import heartbeat_urls
    from guardian.config.receivers import legacy
    from guardian.core.redaction import Redactor

    n = settings.values["notify"]  # in build_daemon's order, so the first refusal is the same
    if n["channels"] or any(True for _ in legacy(n)):
        from guardian.bootstrap import build_channel_check

        build_channel_check(settings)
    load_token(settings)
    heartbeat_urls(settings, Redactor())


def cmd_config_validate(args: argparse.Namespace) -> int:
    """Exit 2 with `guardian run`'s words for whatever it would refuse at load."""
    from guardian.config import load_settings

    settings = load_settings(args.config)
    refusals_at_load(settings)
    r = settings.values["restart"]
    print(
        f"config ok ({settings.source}): watching label {settings['watch.label']!r} every "
        f"{format_duration(settings['watch.interval'])}, "
        f"cooldown {format_duration(r['cooldown'])}, max_attempts {r['max_attempts']}"
    )
    return EXIT_OK


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser], cfg: WithConfig) -> None:
    """Add `status` and `config validate|show` to the `guardian` parser."""
    status = add_json(cfg(sub.add_parser("status", help="containers, incidents, held restarts")))
    status.set_defaults(handler=cmd_status)
    config = sub.add_parser("config", help="configuration")
    config_sub = config.add_subparsers(dest="config_command", required=True, metavar="ACTION")
    validate = cfg(config_sub.add_parser("validate", help="check the config and exit"))
    validate.set_defaults(handler=cmd_config_validate)
    show = cfg(config_sub.add_parser("show", help="the effective config, secrets redacted"))
    show.set_defaults(handler=cmd_config_show)
