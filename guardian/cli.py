"""The `guardian` command line: run, check, healthcheck, config validate; the operator
commands (status, incidents, actions, silences, config show) live in cli_incidents.py and
cli_ops.py.

Exit codes: 0 success, 1 any other failure, 2 bad configuration.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from collections.abc import Sequence
from typing import Any

from guardian import __version__, cli_incidents, cli_notify, cli_ops
from guardian.config import ConfigError, Settings, load_settings
from guardian.core.durations import format_duration
from guardian.healer import Assessment
from guardian.logs import setup_logging
from guardian.ports import EngineUnavailable, StoreError

EXIT_OK, EXIT_FAILURE, EXIT_CONFIG = 0, 1, 2


class CliError(Exception):
    """A failure to report as one line `guardian: ...` with exit code 1."""


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="guardian", description="Keeps the containers of a Docker host healthy."
    )
    p.add_argument("--version", action="version", version=f"guardian {__version__}")
    sub = p.add_subparsers(dest="command", required=True, metavar="COMMAND")

    def with_config(sp: argparse.ArgumentParser) -> argparse.ArgumentParser:
        sp.add_argument(
            "--config",
            "-c",
            metavar="PATH",
            default=os.environ.get("GUARDIAN_CONFIG"),
            help="YAML config file (default: $GUARDIAN_CONFIG, else built-in defaults)",
        )
        return sp

    with_config(sub.add_parser("run", help="run the daemon"))
    check = with_config(
        sub.add_parser("check", help="one sweep; a table of findings and decisions")
    )
    check.add_argument("--apply", action="store_true", help="really restart (default: dry run)")
    check.add_argument("--json", action="store_true", help="machine-readable output")
    health = with_config(
        sub.add_parser("healthcheck", help="exit 0 if a running Guardian's /healthz is ok")
    )
    health.add_argument("--timeout", type=float, default=5.0, help="seconds (default 5)")
    config = sub.add_parser("config", help="configuration")
    config_sub = config.add_subparsers(dest="config_command", required=True, metavar="ACTION")
    with_config(config_sub.add_parser("validate", help="check the config and exit"))
    cli_incidents.register(sub, with_config)
    cli_ops.register(sub, config_sub, with_config)
    cli_notify.register(sub, with_config)
    return p


def _load(args: argparse.Namespace, **overrides: Any) -> Settings:
    settings = load_settings(args.config)
    setup_logging(settings["log.level"], settings["log.format"])
    return settings


def cmd_run(args: argparse.Namespace) -> int:
    from guardian.bootstrap import build
    from guardian.daemon import Daemon

    settings = _load(args)
    Daemon(build(settings)).run_forever()
    return EXIT_OK


def _row(a: Assessment) -> dict[str, Any]:
    r, d = a.result, a.decision
    finding = str(r.problem) if r.problem else (f"skipped: {r.skipped}" if r.skipped else "ok")
    decision = "-"
    if d is not None:
        decision = (
            "would restart (dry run)" if d.reason == "dry_run" else f"{d.verdict}: {d.reason}"
        )
    return {
        "container": a.snapshot.name,
        "state": a.snapshot.state,
        "health": a.snapshot.health or "none",
        "finding": finding,
        "detail": r.detail,
        "decision": decision,
        "retry_at": d.retry_at.isoformat() if d is not None and d.retry_at else None,
    }


def cmd_check(args: argparse.Namespace) -> int:
    import dataclasses

    from guardian.bootstrap import build
    from guardian.verify import verify_pending

    settings = _load(args)
    if not args.apply:
        values = {k: dict(v) for k, v in settings.values.items()}
        values["restart"]["dry_run"] = True
        settings = dataclasses.replace(settings, values=values)
    app = build(settings)
    try:
        app.engine.ping()
        report = app.healer.sweep(apply=args.apply)
        if report.engine_error:
            raise CliError(report.engine_error)
        deadline = time.monotonic() + settings["restart.verify_timeout"].total_seconds() + 5
        while args.apply and app.healer.pending and time.monotonic() < deadline:
            time.sleep(1)
            verify_pending(app.healer)
    except EngineUnavailable as exc:
        raise CliError(str(exc)) from None
    finally:
        app.close()
    rows = [_row(a) for a in report.rows]
    if args.json:
        print(json.dumps({"dry_run": not args.apply, "containers": rows}, indent=2))
    else:
        _table(rows, ["container", "state", "health", "finding", "decision"])
        if not rows:
            print("no watched containers (label: {})".format(settings["watch.label"]))
    return EXIT_OK


def _table(rows: list[dict[str, Any]], columns: Sequence[str]) -> None:
    widths = {c: max([len(c)] + [len(str(r[c])) for r in rows]) for c in columns}
    print("  ".join(c.upper().ljust(widths[c]) for c in columns).rstrip())
    for r in rows:
        print("  ".join(str(r[c]).ljust(widths[c]) for c in columns).rstrip())


def cmd_healthcheck(args: argparse.Namespace) -> int:
    from guardian.healthcheck import healthz_url, probe

    try:
        settings = load_settings(args.config)
    except ConfigError as exc:  # Docker reserves exit code 2: unhealthy is 1
        print(f"guardian: config error: {exc}", file=sys.stderr)
        return EXIT_FAILURE
    healthy, why = probe(healthz_url(settings["http.listen"]), args.timeout)
    if healthy:
        print(why)
        return EXIT_OK
    print(f"guardian: {why}", file=sys.stderr)
    return EXIT_FAILURE


def cmd_config_validate(args: argparse.Namespace) -> int:
    settings = load_settings(args.config)
    r = settings.values["restart"]
    print(
        f"config ok ({settings.source}): watching label {settings['watch.label']!r} every "
        f"{format_duration(settings['watch.interval'])}, "
        f"cooldown {format_duration(r['cooldown'])}, max_attempts {r['max_attempts']}"
    )
    return EXIT_OK


def main(argv: Sequence[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    handlers = {"run": cmd_run, "check": cmd_check, "healthcheck": cmd_healthcheck}
    try:
        if hasattr(args, "handler"):  # the operator commands (cli_incidents, cli_ops)
            return int(args.handler(args))
        if args.command == "config":
            return cmd_config_validate(args)
        return handlers[args.command](args)
    except ConfigError as exc:
        print(f"guardian: config error: {exc}", file=sys.stderr)
        return EXIT_CONFIG
    except (CliError, StoreError) as exc:
        print(f"guardian: {exc}", file=sys.stderr)
        return EXIT_FAILURE
    except KeyboardInterrupt:
        return EXIT_FAILURE


if __name__ == "__main__":
    sys.exit(main())
