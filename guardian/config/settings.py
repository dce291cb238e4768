"""Configuration: YAML file + GUARDIAN_* environment -> frozen Settings, with one-line errors.

Every key is declared once in SCHEMA with its default and what is allowed; the file, the
environment and `config show` all go through it. Per-container label overrides live in labels.py.
"""

from __future__ import annotations

import ipaddress
import os
import re
import shutil
from collections.abc import Callable, Mapping
from dataclasses import dataclass, replace
from datetime import timedelta
from pathlib import Path
from typing import Any

from guardian.config.autoheal import MODES as COMPAT_MODES
from guardian.config.autoheal import Compat, Mapped, autoheal
from guardian.config.autoheal import detected as autoheal_detected
from guardian.config.receivers import (
    ReceiverError,
    check_names,
    parse_channels,
    parse_default,
    parse_routes,
)
from guardian.config.yaml_file import YamlError, read_yaml
from guardian.core.detection.log_rules import MAX_RULES as MAX_LOG_RULES
from guardian.core.detection.log_rules import LogRule, LogRuleError, PatternError
from guardian.core.detection.log_rules import from_config as log_rule_from_config
from guardian.core.detection.resources import CONFIG_KEYS as RESOURCE_KEYS
from guardian.core.detection.resources import ResourceError, ResourceRule
from guardian.core.detection.resources import from_config as resource_rule_from_config
from guardian.core.detection.restart_policy import RUNGS, RestartPolicy
from guardian.core.detection.windows import CONFIG_KEYS, MaintenanceWindow, WindowError
from guardian.core.detection.windows import from_config as window_from_config
from guardian.core.durations import format_duration, parse_duration
from guardian.core.labels import LOOSENABLE
from guardian.core.limits import BY_KEY
from guardian.core.outbound.hook_specs import HookConfigError, HookSpec, parse_hooks
from guardian.core.redaction import redact_patterns

DEFAULT_STORE_PATH = "/var/lib/guardian/guardian.db"
MAX_WINDOWS = 100  # maintenance.windows
MAX_RESOURCE_RULES = 50  # resources.rules
ENV_PREFIX = "GUARDIAN_"
CONFIG_ENV = "GUARDIAN_CONFIG"  # the config file's path, read by the CLI
COMPAT_ENV = "GUARDIAN_COMPAT"  # compat: autoheal | none


class ConfigError(Exception):
    """Invalid configuration; str() is the one line shown after `guardian: config error:`."""


@dataclass(frozen=True)
class Key:
    """One config key: its default, how to parse a value, and what is allowed (for errors)."""

    default: Any
    parse: Callable[[Any], Any]
    allowed: str


def _int(lo: int, hi: int) -> Key:
    def parse(v: Any) -> int:
        if isinstance(v, str) and v.strip().lstrip("-").isdigit():
            v = int(v)
        if isinstance(v, bool) or not isinstance(v, int) or not lo <= v <= hi:
            raise ValueError
        return v

    return Key(None, parse, f"an integer from {lo} to {hi}")


def _float(lo: float, hi: float) -> Key:
    def parse(v: Any) -> float:
        if isinstance(v, str):
            v = float(v)
        if isinstance(v, bool) or not isinstance(v, int | float) or not lo <= v <= hi:
            raise ValueError
        return float(v)

    return Key(None, parse, f"a number from {lo} to {hi}")


def _duration(lo: timedelta, hi: timedelta) -> Key:
    def parse(v: Any) -> timedelta:
        d = parse_duration(v)
        if not lo <= d <= hi:
            raise ValueError
        return d

    return Key(None, parse, f"a duration from {_fmt(lo)} to {_fmt(hi)} (e.g. 500ms, 30s, 5m, 1h)")


def _limited(key: str) -> Key:
    """A key that a label can override: its bounds come from the one table (core.limits)."""
    bounds = BY_KEY[key].range
    return Key(None, bounds.parse, bounds.allowed)


def _fmt(d: timedelta) -> str:
    return format_duration(d)


def _bool() -> Key:
    words = {"true": True, "yes": True, "on": True, "1": True}
    words |= {"false": False, "no": False, "off": False, "0": False}

    def parse(v: Any) -> bool:
        if isinstance(v, bool):
            return v
        if isinstance(v, str) and v.strip().lower() in words:
            return words[v.strip().lower()]
        raise ValueError

    return Key(None, parse, "true or false")


def _choice(*choices: str) -> Key:
    def parse(v: Any) -> str:
        if not isinstance(v, str) or v.strip().lower() not in choices:
            raise ValueError
        return v.strip().lower()

    return Key(None, parse, "one of " + ", ".join(choices))


def _text(max_len: int = 4096) -> Key:
    def parse(v: Any) -> str:
        if not isinstance(v, str) or not v.strip() or len(v) > max_len or "\x00" in v:
            raise ValueError
        return v.strip()

    return Key(None, parse, f"a non-empty string of at most {max_len} characters")


def _optional_text() -> Key:
    """Like _text(), but empty or null means "not set" (None)."""
    text = _text()

    def parse(v: Any) -> str | None:
        if v is None or (isinstance(v, str) and not v.strip()):
            return None
        return str(text.parse(v))

    return Key(None, parse, "empty, or " + text.allowed)


def _exit_codes() -> Key:
    def parse(v: Any) -> tuple[int, ...]:
        if isinstance(v, str):
            v = [p for p in v.replace(",", " ").split()]
        if not isinstance(v, list):
            raise ValueError
        codes = tuple(_int(0, 255).parse(c) for c in v)
        return tuple(sorted(set(codes)))

    return Key(None, parse, "a list of exit codes from 0 to 255")


def _hosts() -> Key:
    def parse(v: Any) -> tuple[str, ...]:
        if v is None:
            return ()
        if isinstance(v, str):
            v = v.replace(",", " ").split()
        if not isinstance(v, list) or len(v) > 256:
            raise ValueError
        out = []
        for entry in v:
            if not isinstance(entry, str) or not entry.strip():
                raise ValueError
            entry = entry.strip()
            try:
                ipaddress.ip_network(entry, strict=False)
            except ValueError:
                if not _HOST_NAME.fullmatch(entry):
                    raise
            out.append(entry)
        return tuple(out)

    return Key(None, parse, "a list of host names, addresses or networks such as 10.0.0.0/8")


def _keys_of(allowed: tuple[str, ...]) -> Key:
    def parse(v: Any) -> tuple[str, ...]:
        if v is None:
            return ()
        if isinstance(v, str):
            v = v.replace(",", " ").split()
        if not isinstance(v, list) or not all(isinstance(k, str) for k in v):
            raise ValueError
        keys = {k.strip() for k in v}
        if not keys <= set(allowed):
            raise ValueError
        return tuple(k for k in allowed if k in keys)

    return Key(None, parse, "a list of " + ", ".join(allowed) + " (or empty)")


_HOST_NAME = re.compile(r"[A-Za-z0-9]([A-Za-z0-9.-]{0,251}[A-Za-z0-9])?")


def _list(v: Any) -> list[Any]:
    """A list from the file, or from the environment as words separated by commas or spaces."""
    if v is None:
        return []
    if isinstance(v, str):
        v = v.replace(",", " ").split()
    if not isinstance(v, list) or len(v) > 256:
        raise ValueError
    return v


def _host_names() -> Key:
    def parse(v: Any) -> tuple[str, ...]:
        out = []
        for entry in _list(v):
            if not isinstance(entry, str):
                raise ValueError
            name = entry.strip().lower()
            if name != "*" and not _HOST_NAME.fullmatch(name):
                raise ValueError
            out.append(name)
        return tuple(out)

    return Key(None, parse, 'a list of host names without ports (e.g. [guardian.lan]), or "*"')


_NAME_GLOB = re.compile(r"[A-Za-z0-9_.*?\[\]!-]{1,255}")


def _name_globs() -> Key:
    def parse(v: Any) -> tuple[str, ...]:
        out = []
        for entry in _list(v):
            if not isinstance(entry, str) or not _NAME_GLOB.fullmatch(entry.strip()):
                raise ValueError
            out.append(entry.strip())
        return tuple(out)

    return Key(None, parse, 'a list of container name globs (e.g. [web, "api-*"]), or empty')


def _networks() -> Key:
    def parse(v: Any) -> tuple[str, ...]:
        out = []
        for entry in _list(v):
            if not isinstance(entry, str):
                raise ValueError
            out.append(str(ipaddress.ip_network(entry.strip(), strict=False)))
        return tuple(out)

    return Key(None, parse, "a list of addresses or networks, e.g. [127.0.0.1, 172.16.0.0/12]")


def _listen() -> Key:
    def parse(v: Any) -> str:
        if not isinstance(v, str):
            raise ValueError
        host, sep, port = v.strip().rpartition(":")
        if not sep or not host or not port.isdigit() or not 0 <= int(port) <= 65535:
            raise ValueError
        return f"{host}:{int(port)}"

    return Key(None, parse, "host:port, e.g. 127.0.0.1:9321 or 0.0.0.0:9321")


def _percent() -> Key:
    def parse(v: Any) -> float:
        if isinstance(v, str):
            v = float(v.strip().removesuffix("%").strip())
        if isinstance(v, bool) or not isinstance(v, int | float) or not 1 <= v <= 100:
            raise ValueError
        return float(v)

    return Key(None, parse, "a percentage from 1% to 100%, e.g. 50%")


def _optional(key: Key) -> Key:
    """An optional value: absent, null or "" mean "not set" (None)."""

    def parse(v: Any) -> Any:
        return None if v is None or (isinstance(v, str) and not v.strip()) else key.parse(v)

    return Key(None, parse, key.allowed + " (or empty)")


def _env_name() -> Key:
    def parse(v: Any) -> str:
        if not isinstance(v, str) or not v.strip().replace("_", "").isalnum():
            raise ValueError
        return v.strip()

    return Key(None, parse, "the NAME of an environment variable (letters, digits, _)")


def _selector() -> Key:
    def parse(v: Any) -> str:
        if v is None:
            return ""
        if not isinstance(v, str) or len(v) > 512 or any(c.isspace() or c == "," for c in v):
            raise ValueError
        if v.startswith("="):
            raise ValueError
        return v

    return Key(None, parse, 'empty, or one label selector "key" or "key=value"')


def _hooks() -> Key:
    def parse(v: Any) -> tuple[HookSpec, ...]:
        if isinstance(v, str):  # from the environment: the list as JSON
            import json  # loaded only then (bench/imports: `config validate` stays light)

            v = json.loads(v) if v.strip() else None
        return parse_hooks(v)

    return Key(None, parse, "a list of hooks (docs/hooks.md), each {argv: [...], after, timeout}")


def _mappings(
    v: Any, most: int, what: str, keys: tuple[str, ...], error: type[Exception]
) -> list[dict[str, Any]]:
    """A list of at most `most` mappings from the file, or from the environment as JSON (none:
    empty); else `error` naming where and what is allowed."""
    if isinstance(v, str):  # from the environment: the list as JSON
        import json  # loaded only then (bench/imports: `config validate` stays light)

        v = json.loads(v) if v.strip() else None
    if v is None:
        return []
    if not isinstance(v, list) or len(v) > most:
        raise error(f": expected a list of at most {most} {what}")
    for i, entry in enumerate(v):
        if not isinstance(entry, dict):
            raise error(f"[{i}]: expected a mapping {{{', '.join(keys)}}}")
    return v


def _windows() -> Key:
    def parse(v: Any) -> tuple[MaintenanceWindow, ...]:
        v = _mappings(v, MAX_WINDOWS, "windows", CONFIG_KEYS, WindowError)
        return tuple(
            replace(window_from_config(entry, f"[{i}]"), origin=f"maintenance.windows[{i}]")
            for i, entry in enumerate(v)
        )

    return Key(
        None, parse, "a list of windows {containers, cron, duration, tz} (docs/configuration.md)"
    )


def _resource_rules() -> Key:
    def parse(v: Any) -> tuple[ResourceRule, ...]:
        v = _mappings(v, MAX_RESOURCE_RULES, "rules", RESOURCE_KEYS, ResourceError)
        return tuple(
            resource_rule_from_config(entry, f"[{i}]", f"resources.rules[{i}]")
            for i, entry in enumerate(v)
        )

    return Key(
        None,
        parse,
        "a list of rules {containers, memory_max, memory_for, cpu_max, cpu_for}"
        " (docs/configuration.md)",
    )


def _log_rules() -> Key:
    def parse(v: Any) -> tuple[LogRule, ...]:
        v = _mappings(v, MAX_LOG_RULES, "rules", ("containers", "match"), LogRuleError)
        rules = [log_rule_from_config(entry, f"[{i}]") for i, entry in enumerate(v)]
        if rules:
            # Compiled as the daemon will (RE2, adapters/re2_patterns.py), loaded only now.
            from guardian.adapters.re2_patterns import Re2Patterns

            patterns = Re2Patterns()
            for i, rule in enumerate(rules):
                try:
                    patterns.compile(rule.match)
                except PatternError as exc:
                    raise LogRuleError(f"[{i}].match: {exc}") from None
        return tuple(replace(r, origin=f"logs.rules{r.origin}") for r in rules)

    return Key(None, parse, "a list of rules {containers, match} (docs/configuration.md)")


def _resolve_programs(hooks: tuple[HookSpec, ...], path: str) -> tuple[HookSpec, ...]:
    """Each hook's program as an absolute path: found on PATH now, not wherever PATH points
    when the hook runs. Raises ConfigError for one that is missing or not executable."""
    resolved = []
    for i, hook in enumerate(hooks):
        program = hook.argv[0]
        found = shutil.which(program, path=path) if "/" not in program else None
        if os.path.isabs(program) and os.path.isfile(program) and os.access(program, os.X_OK):
            found = program
        if found is None:
            where = "an executable file" if os.path.isabs(program) else f"on PATH ({path})"
            raise ConfigError(
                f"remediation.hooks[{i}].argv[0] = {_shown(program)}: not found {where}; "
                "expected an absolute path to an executable, or a program on PATH"
            )
        resolved.append(replace(hook, argv=(os.path.abspath(found), *hook.argv[1:])))
    return tuple(resolved)


def _with(key: Key, default: Any) -> Key:
    return Key(default, key.parse, key.allowed)


S, M, H = timedelta(seconds=1), timedelta(minutes=1), timedelta(hours=1)
ZERO, DAY, YEAR = timedelta(0), timedelta(days=1), timedelta(days=365)

SCHEMA: dict[str, dict[str, Key]] = {
    "docker": {
        "url": _with(_text(), "unix:///var/run/docker.sock"),
        "timeout": _with(_duration(S, 10 * M), 30 * S),
    },
    "watch": {
        "label": _with(_text(256), "guardian.enable"),
        "interval": _with(_duration(timedelta(milliseconds=500), DAY), 10 * S),
        # While the event stream is open, the longest between two sweeps that list every
        # container (service.state.listing); 0: every sweep does.
        "resync": _with(_duration(ZERO, DAY), M),
        "events": _with(_bool(), True),
        "start_grace": _with(_duration(ZERO, DAY), ZERO),
        "scope": _with(_selector(), ""),
        # Containers an orchestrator owns (Swarm, Kubernetes, Nomad): observe or act.
        "orchestrated": _with(_choice("observe", "act"), "observe"),
    },
    "restart": {
        "cooldown": _with(_limited("restart.cooldown"), 300 * S),
        "max_attempts": _with(_limited("restart.max_attempts"), 3),
        "window": _with(_duration(S, YEAR), H),
        "backoff_factor": _with(_float(1.0, 10.0), 1.0),
        "max_cooldown": _with(_duration(ZERO, YEAR), H),
        "reset_after": _with(_duration(ZERO, YEAR), 600 * S),
        "stop_timeout": _with(_limited("restart.stop_timeout"), 10 * S),
        "verify_timeout": _with(_duration(S, DAY), 120 * S),
        "max_per_minute": _with(_int(1, 10_000), 10),
        "max_concurrent": _with(_int(1, 1000), 2),
        "ignore_exit_codes": _with(_exit_codes(), (0,)),
        "dry_run": _with(_bool(), False),
        # What Guardian does once decide() allows it (core.detection.restart_policy.ACTIONS).
        "action": _with(_choice("restart", "stop", "ask", "notify"), "restart"),
        "act_after": _with(_limited("restart.act_after"), ZERO),
        # An approval (action ask) allows one restart of its incident until it expires.
        "approval_ttl": _with(_duration(M, 7 * DAY), H),
        # The ladder once max_attempts restarts did not help (core.detection.restart_policy.RUNGS):
        # roll a new record back to the last one that ran healthy, recreate from the
        # container's own record, then stop and page. [] gives up as ever.
        "escalate": _with(_keys_of(RUNGS), ()),
        # The rungs a person approves first, on every container (guardian.action=ask: all).
        "escalate_ask": _with(_keys_of(RUNGS), ()),
        # The rollback rung's monitor: a record first unhealthy within this long of its
        # creation failed early (Swarm's update_config.monitor).
        "rollback_monitor": _with(_duration(S, DAY), 5 * M),
    },
    # Labels may only tighten the restart policy; the keys listed here may ask for more too
    # (more attempts, a shorter cooldown). Whoever starts a container writes its labels.
    "labels": {"allow_loosen": _with(_keys_of(LOOSENABLE), ())},
    "probe": {
        "period": _with(_limited("probe.period"), 10 * S),
        "timeout": _with(_limited("probe.timeout"), 2 * S),
        "failure_threshold": _with(_limited("probe.failure_threshold"), 3),
        "success_threshold": _with(_limited("probe.success_threshold"), 1),
        # Probes aim at the container's own addresses only; anything else must be listed here.
        "allow_hosts": _with(_hosts(), ()),
    },
    "crash_loop": {
        "restarts": _with(_int(2, 1000), 3),
        "window": _with(_duration(S, DAY), 5 * M),
        "log_lines": _with(_int(0, 200), 20),
    },
    "storm": {
        "threshold": _with(_percent(), 50.0),
        "window": _with(_duration(S, DAY), M),
        "min_containers": _with(_int(1, 10_000), 5),
        "hold": _with(_duration(10 * S, DAY), 5 * M),
        "max_hold": _with(_duration(10 * S, DAY), H),
        # Which watched containers count toward a storm and may be held by it (a label
        # selector like watch.scope); empty: every watched container.
        "count": _with(_selector(), ""),
    },
    "store": {
        "path": _with(_text(), DEFAULT_STORE_PATH),
        # Incidents closed longer ago than this are deleted with their history, once a day.
        "retention": _with(_duration(DAY, 10 * YEAR), 90 * DAY),
    },
    "http": {
        "listen": _with(_listen(), "127.0.0.1:9321"),
        # The names a request's Host may carry besides every IP address, localhost and the
        # listen host (a web page that rebinds a name of its own to this address gets 421).
        "allowed_hosts": _with(_host_names(), ()),
        # Reverse proxies whose X-Forwarded-For names the client (the limiter of wrong tokens
        # counts per client).
        "trusted_proxies": _with(_networks(), ()),
    },
    # Operator-written programs run after each verdict (docs/hooks.md); never from labels.
    # Recurring maintenance windows (core.detection.windows): no restart of the containers they
    # match while one is in force. `maintenance: [...]` in the file is read as
    # `maintenance.windows`.
    "maintenance": {"windows": _with(_windows(), ())},
    # Resource rules (core.detection.resources): memory or CPU above a limit for a duration opens
    # memory_high / cpu_high. Containers with a limit are read every `interval`, from the cgroup
    # files under `cgroup_root` (the host's tree, mounted read-only in a sidecar) or else one
    # stats call each; with no limit anywhere nothing is read.
    "resources": {
        "rules": _with(_resource_rules(), ()),
        "interval": _with(_duration(S, 5 * M), 5 * S),
        "cgroup_root": _with(_text(), "/sys/fs/cgroup"),
    },
    # Log rules (core.detection.log_rules): an RE2 pattern on the output of the containers they
    # match opens a log_match incident. `logs: [...]` in the file is read as `logs.rules`.
    "logs": {"rules": _with(_log_rules(), ())},
    "remediation": {
        "hooks": _with(_hooks(), ()),
        "hooks_max_concurrent": _with(_int(1, 64), 2),
        "hooks_max_queued": _with(_int(0, 10_000), 32),
    },
    "notify": {
        # Delivery: the outbox worker's pacing, grouping, reminders and retries.
        "group_wait": _with(_duration(ZERO, H), 10 * S),
        "repeat_interval": _with(_duration(M, 30 * DAY), 4 * H),
        "max_attempts": _with(_int(1, 100), 5),
        "retry_backoff": _with(_duration(timedelta(milliseconds=50), H), 2 * S),
        "max_backoff": _with(_duration(S, DAY), 5 * M),
        "max_retry_after": _with(_duration(S, DAY), 5 * M),
        "timeout": _with(_duration(timedelta(milliseconds=100), 5 * M), 10 * S),
        "pacing": _with(_duration(ZERO, M), S),
        # A message through every channel when Guardian starts: host, version, what it watches.
        "on_start": _with(_bool(), False),
        # Channels: a channel is on when its secret (or address) is configured. Secrets only
        # through *_env (the NAME of an environment variable) or *_file (a path).
        "slack_webhook_url_env": _optional(_env_name()),
        "slack_webhook_url_file": _optional(_text()),
        "slack_bot_token_env": _optional(_env_name()),
        "slack_bot_token_file": _optional(_text()),
        "slack_bot_channel": _optional(_text(256)),
        "slack_api_url": _with(_text(), "https://slack.com/api"),
        "discord_webhook_url_env": _optional(_env_name()),
        "discord_webhook_url_file": _optional(_text()),
        "email_smtp_host": _optional(_text(256)),
        "email_smtp_port": _with(_int(1, 65535), 587),
        "email_security": _with(_choice("starttls", "tls", "none"), "starttls"),
        "email_username": _optional(_text(256)),
        "email_password_env": _optional(_env_name()),
        "email_password_file": _optional(_text()),
        "email_from": _optional(_text(256)),
        "email_to": _optional(_text()),
        "webhook_url_env": _optional(_env_name()),
        "webhook_url_file": _optional(_text()),
        "webhook_secret_env": _optional(_env_name()),
        "webhook_secret_file": _optional(_text()),
        # Set: the webhook posts {"<json_key>": "<the message as text>"} (docker-autoheal's
        # WEBHOOK_JSON_KEY) instead of Guardian's JSON document.
        "webhook_json_key": _optional(_text(64)),
        "alertmanager_url": _optional(_text()),
        "alertmanager_resend_interval": _with(_duration(S, H), M),
        "pagerduty_routing_key_env": _optional(_env_name()),
        "pagerduty_routing_key_file": _optional(_text()),
        "pagerduty_url": _with(_text(), "https://events.pagerduty.com/v2/enqueue"),
        "pagerduty_events": _with(_choice("escalations", "all"), "escalations"),
        "apprise_urls_env": _optional(_env_name()),
        "apprise_urls_file": _optional(_text()),
        # Named receivers ({name, type, ...}: receivers.py), routes between them, and the
        # receivers of what no route claims (empty: every receiver). docs/notifications.md.
        "channels": Key((), lambda v: parse_channels(v, SCHEMA["notify"]), "receivers"),
        "routes": Key((), parse_routes, "routes"),
        "default": Key((), parse_default, "receiver names"),
    },
    # A push monitor (healthchecks.io, Uptime Kuma) pinged after sweeps that reached the engine,
    # at most once per interval; the failure URL while the engine is unreachable. The URLs are
    # secrets: *_env (a variable's NAME) or *_file (a path). No URL: no heartbeat.
    "heartbeat": {
        "url_env": _optional(_env_name()),
        "url_file": _optional(_text()),
        "fail_url_env": _optional(_env_name()),
        "fail_url_file": _optional(_text()),
        "interval": _with(_duration(S, DAY), M),
        "timeout": _with(_duration(timedelta(milliseconds=100), M), 10 * S),
    },
    # The bearer token of the API: read from this environment variable, or from token_file when
    # that is set. No token: the API is off (its reads too, unless public_reads).
    "api": {
        "token_env": _with(_text(256), "GUARDIAN_API_TOKEN"),
        "token_file": _with(_optional_text(), None),
        # true: anyone who reaches the port reads incidents (details, log tails), timelines,
        # actions, containers and silences without the token. Changes always need it.
        "public_reads": _with(_bool(), False),
    },
    # The status page at / (docs/status-page.md).
    "page": {
        # Live streams open at once, each on an HTTP thread of its own beyond http's four.
        "streams": _with(_int(1, 64), 8),
        # Anonymous streams (public reads) one client address may hold at once.
        "streams_per_address": _with(_int(1, 64), 3),
        "session_ttl": _with(_duration(5 * M, 30 * DAY), 12 * H),
        # true: a reverse proxy in front sets X-Forwarded-Proto (https: the cookie is Secure).
        "trust_forwarded_proto": _with(_bool(), False),
        # The containers whose badge /badge/<name>.svg serves to anyone (fnmatch globs): a
        # badge tells whoever reaches the port that the container exists, so none by default.
        "badges": _with(_name_globs(), ()),
    },
    "log": {
        "level": _with(_choice("debug", "info", "warning", "error"), "info"),
        "format": _with(_choice("text", "json"), "text"),
    },
}


# What `systemctl reload` (SIGHUP) can change in a running Guardian: a key listed here, or any
# key of a section ending in ".". Every other key keeps its value until a restart
# (docs/configuration.md).
RELOADABLE = (
    "watch.label",
    "watch.interval",
    "watch.resync",
    "watch.scope",
    "watch.start_grace",
    "restart.",
    "labels.",
    "maintenance.",
    "resources.rules",
    "logs.",
    "store.retention",
    "log.",
)


def reloadable(key: str) -> bool:
    """Whether a change of `key` ("section.key") takes effect on reload, not only on restart."""
    return any(key == r or (r.endswith(".") and key.startswith(r)) for r in RELOADABLE)


@dataclass(frozen=True)
class Settings:
    """The effective configuration. `values[section][key]` holds every parsed value."""

    values: Mapping[str, Mapping[str, Any]]
    source: str = "built-in defaults"
    store_path_explicit: bool = False
    notes: tuple[str, ...] = ()  # lines for the start-up log (compat autoheal's mappings)

    def __getitem__(self, dotted: str) -> Any:
        section, key = dotted.split(".", 1)
        return self.values[section][key]

    def restart_policy(self) -> RestartPolicy:
        r = self.values["restart"]
        return RestartPolicy(
            cooldown=r["cooldown"],
            max_attempts=r["max_attempts"],
            window=r["window"],
            backoff_factor=r["backoff_factor"],
            max_cooldown=r["max_cooldown"],
            reset_after=r["reset_after"],
            max_per_minute=r["max_per_minute"],
            max_concurrent=r["max_concurrent"],
            dry_run=r["dry_run"],
            act_on_orchestrated=self.values["watch"]["orchestrated"] == "act",
            action=r["action"],
            act_after=r["act_after"],
            escalate=r["escalate"],
            escalate_ask=r["escalate_ask"],
            rollback_monitor=r["rollback_monitor"],
        )


def changed_keys(old: Settings, new: Settings) -> list[str]:
    """The keys ("section.key") whose values differ between `old` and `new`, in SCHEMA order."""
    return [
        f"{section}.{key}"
        for section, keys in SCHEMA.items()
        for key in keys
        if old.values[section][key] != new.values[section][key]
    ]


def reloaded(old: Settings, new: Settings) -> Settings:
    """The settings in force after a reload: `new`'s reloadable values, `old`'s for the rest."""
    values = {
        section: {
            key: new.values[section][key] if reloadable(f"{section}.{key}") else value
            for key, value in keys.items()
        }
        for section, keys in old.values.items()
    }
    return Settings(values, new.source, old.store_path_explicit)


def _unknown_key(section: str, key: Any, keys: list[str]) -> str:
    """The one-line error for an unknown key: every allowed key while that stays short (the
    notify section has too many to read in one line: the closest ones, and where the rest are)."""
    listed = ", ".join(keys)
    if len(listed) <= 300:
        return f"unknown key {section}.{_shown(key)}; allowed: {listed}"
    import difflib  # loaded for an error only (CLI start-up, bench/imports)

    close = difflib.get_close_matches(str(key), keys, n=3)
    hint = f"did you mean {' or '.join(close)}? " if close else ""
    where = f"the {len(keys)} keys of {section} are listed in docs/"
    return f"unknown key {section}.{_shown(key)}; {hint}{where}"


def _check_environment(env: Mapping[str, str], values: Mapping[str, Mapping[str, Any]]) -> None:
    """A GUARDIAN_* variable that looks meant for Guardian but maps to no key is an error, as
    the same typo in the file is. Looks meant: it starts with a section's name, or is close to
    a key's variable. Others (another program's GUARDIAN_REQUIRE_DOCKER) are not Guardian's,
    nor are the variables that `*_env` keys name (GUARDIAN_API_TOKEN) or GUARDIAN_CONFIG."""
    known = {f"{s}_{k}".upper(): f"{s}.{k}" for s, keys in SCHEMA.items() for k in keys}
    named = {v for keys in values.values() for k, v in keys.items() if k.endswith("_env") and v}
    for name in sorted(env):
        rest = name.removeprefix(ENV_PREFIX)
        if rest == name or rest in known or name in named or name in (CONFIG_ENV, COMPAT_ENV):
            continue
        import difflib  # loaded for an error only

        close = difflib.get_close_matches(rest, list(known), n=1, cutoff=0.75)
        section = next((s for s in SCHEMA if rest.startswith(s.upper() + "_")), None)
        if close:
            hint = f"did you mean {ENV_PREFIX}{close[0]} ({known[close[0]]})?"
        elif section is not None:
            names = ", ".join(f"{ENV_PREFIX}{section}_{k}".upper() for k in SCHEMA[section])
            hint = f"allowed: {names}" if len(names) <= 300 else "see the list of keys in docs/"
        else:
            continue
        raise ConfigError(f"unknown environment variable {_shown(name)}; {hint}")


def _shown(value: Any) -> str:
    text = redact_patterns(repr(value))  # a bad docker.url may still carry a password
    return text if len(text) <= 60 else text[:57] + "..."


def _read_file(path: Path) -> dict[str, Any]:
    try:
        data = read_yaml(path)
    except YamlError as exc:
        raise ConfigError(str(exc)) from None
    if data is None:
        return {}
    if not isinstance(data, dict):
        raise ConfigError(f"{path}: expected a mapping of sections ({', '.join(SCHEMA)})")
    return data


def _compat(given: Any, env: Mapping[str, str]) -> Compat:
    """docker-autoheal compatibility: `compat: autoheal` in the file (or GUARDIAN_COMPAT), or
    found from AUTOHEAL_* variables unless `compat: none` says otherwise."""
    raw = env.get(COMPAT_ENV, given)
    where = f"compat (from {COMPAT_ENV})" if COMPAT_ENV in env else "compat"
    if raw is None:
        if not autoheal_detected(env):
            return Compat()
        found = autoheal(env)
        line = (
            "docker-autoheal variables found (AUTOHEAL_*): compat autoheal is on"
            " (compat: none turns it off)"
        )
        return Compat(found.values, (line, *found.lines))
    if not isinstance(raw, str) or raw.strip().lower() not in COMPAT_MODES:
        raise ConfigError(f"{where} = {_shown(raw)}: expected one of {', '.join(COMPAT_MODES)}")
    return autoheal(env) if raw.strip().lower() == "autoheal" else Compat()


def _check_sections(data: Mapping[str, Any]) -> None:
    """Every section the file names is known and holds a mapping (or nothing)."""
    for section in data:
        if section not in SCHEMA:
            allowed = ", ".join(SCHEMA)
            raise ConfigError(f"unknown section {_shown(section)}; allowed: {allowed}")
        if data[section] is not None and not isinstance(data[section], dict):
            raise ConfigError(f"{section}: expected a mapping of keys, got {_shown(data[section])}")


def _given(
    section: str,
    key: str,
    given: Mapping[str, Any],
    env: Mapping[str, str],
    mapped: Mapping[str, Mapped],
) -> tuple[Any, str] | None:
    """(the raw value of section.key, where it came from for errors), the first found of: its
    GUARDIAN_* variable, a compat mapping (autoheal's default only where the file is silent),
    the file, DOCKER_HOST for docker.url; None: the key's default applies."""
    env_name = f"GUARDIAN_{section}_{key}".upper()
    m = mapped.get(f"{section}.{key}")
    if env_name in env:
        return env[env_name], f"{section}.{key} (from {env_name})"
    if m is not None and not (m.default and key in given):
        return m.raw, f"{section}.{key} (from {m.source})"
    if key in given:
        return given[key], f"{section}.{key}"
    if (section, key) == ("docker", "url") and env.get("DOCKER_HOST"):
        return env["DOCKER_HOST"], "docker.url (from DOCKER_HOST)"
    return None


def _parsed(spec: Key, raw: Any, where: str) -> Any:
    """`raw` parsed by `spec`; a ConfigError that starts with `where` when it is refused."""
    try:
        return spec.parse(raw)
    except (
        ReceiverError,
        HookConfigError,
        WindowError,
        ResourceError,
        LogRuleError,
    ) as exc:  # named
        raise ConfigError(f"{where}{exc}") from None
    except (ValueError, TypeError, OverflowError):
        raise ConfigError(f"{where} = {_shown(raw)}: expected {spec.allowed}") from None


def _values(
    data: Mapping[str, Any], env: Mapping[str, str], mapped: Mapping[str, Mapped]
) -> tuple[dict[str, dict[str, Any]], bool]:
    """Every key of SCHEMA parsed, section by section in SCHEMA order, and whether store.path
    was given rather than defaulted."""
    values: dict[str, dict[str, Any]] = {}
    store_explicit = False
    for section, keys in SCHEMA.items():
        given = data.get(section) or {}
        for key in given:
            if key not in keys:
                raise ConfigError(_unknown_key(section, key, list(keys)))
        values[section] = {}
        for key, spec in keys.items():
            found = _given(section, key, given, env, mapped)
            if found is None:
                values[section][key] = spec.default
                continue
            values[section][key] = _parsed(spec, *found)
            if (section, key) == ("store", "path"):
                store_explicit = True
    return values, store_explicit


def _check_across(values: Mapping[str, Mapping[str, Any]]) -> None:
    """The rules between keys: unique receiver names, each cap at least its base."""
    try:
        check_names(values["notify"])
    except ReceiverError as exc:
        raise ConfigError(f"notify.{exc}") from None
    r = values["restart"]
    if r["max_cooldown"] < r["cooldown"]:
        raise ConfigError(
            f"restart.max_cooldown = {_fmt(r['max_cooldown'])}: expected at least "
            f"restart.cooldown ({_fmt(r['cooldown'])})"
        )
    unclimbed = [rung for rung in r["escalate_ask"] if rung not in r["escalate"]]
    if unclimbed:
        raise ConfigError(
            f"restart.escalate_ask = {', '.join(r['escalate_ask'])}: {', '.join(unclimbed)} is "
            f"not a rung of restart.escalate ({', '.join(r['escalate']) or 'none'})"
        )
    storm = values["storm"]
    if storm["max_hold"] < storm["hold"]:
        raise ConfigError(
            f"storm.max_hold = {_fmt(storm['max_hold'])}: expected at least "
            f"storm.hold ({_fmt(storm['hold'])})"
        )


def load_settings(path: str | Path | None, env: Mapping[str, str] | None = None) -> Settings:
    """Build Settings from the file at `path` (None: built-in defaults) and the environment.

    Raises ConfigError naming the key, the value and what is allowed.
    """
    env = os.environ if env is None else env
    data = dict(_read_file(Path(path))) if path is not None else {}
    compat = _compat(data.pop("compat", None), env)
    if isinstance(data.get("maintenance"), list):  # the short form: the list of windows itself
        data["maintenance"] = {"windows": data["maintenance"]}
    if isinstance(data.get("logs"), list):  # the short form: the list of rules itself
        data["logs"] = {"rules": data["logs"]}
    _check_sections(data)
    values, store_explicit = _values(data, env, {m.key: m for m in compat.values})
    _check_environment(env, values)
    _check_across(values)
    hooks = values["remediation"]
    hooks["hooks"] = _resolve_programs(hooks["hooks"], env.get("PATH", os.defpath))
    source = str(path) if path else "built-in defaults"
    return Settings(values, source, store_explicit, compat.lines)
