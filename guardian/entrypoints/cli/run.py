"""`guardian run` (the daemon) and `guardian check` (one sweep; a dry run unless --apply)."""

from __future__ import annotations

import argparse
import dataclasses
import gc
import sys
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from guardian.entrypoints.cli.tables import EXIT_OK, CliError, print_json, settings_for, table

if TYPE_CHECKING:
    from guardian.core.assessment import Assessment

WithConfig = Callable[[argparse.ArgumentParser], argparse.ArgumentParser]
EXIT_STORE = 3
CHECK_COLUMNS = ("container", "state", "health", "finding", "decision")


def cmd_run(args: argparse.Namespace) -> int:
    """Exit 3 when the store cannot be opened: a restart cannot fix that (the unit's
    RestartPreventExitStatus), unlike a crash."""
    # Adapters (Docker SDK, Prometheus, HTTP server) load only for the command that uses them.
    from guardian.bootstrap import build_daemon, claim_instance
    from guardian.config import load_settings
    from guardian.entrypoints.daemon import Daemon
    from guardian.entrypoints.http_server import ListenError
    from guardian.ports import StoreError

    settings = settings_for(args)
    try:
        lock = claim_instance(settings)  # one Guardian per engine: refuse before opening anything
    except StoreError as exc:  # the store's file or directory cannot be had
        print(f"guardian: cannot start: {exc}", file=sys.stderr)
        return EXIT_STORE
    try:
        app = build_daemon(settings, lock=lock)
    except StoreError as exc:
        lock.release()
        print(f"guardian: cannot start: {exc}", file=sys.stderr)
        return EXIT_STORE
    except BaseException:
        lock.release()
        raise
    daemon = Daemon(app, reread=lambda: load_settings(args.config))
    freeze_startup()
    try:
        daemon.run_forever()  # closing the app releases the lock
    except ListenError as exc:
        raise CliError(str(exc)) from None
    if daemon.refused:
        raise CliError(daemon.refused)
    return EXIT_OK


def freeze_startup() -> None:
    """Leave what was built to start (most of the heap, alive as long as Guardian) out of the
    garbage collector's full collections, so they walk only what came later (bench/RESULTS.md).
    Cost: what the first reload replaces of it is never freed if it holds reference cycles."""
    gc.collect()
    gc.freeze()


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
    from guardian.bootstrap import build_status
    from guardian.ports import EngineUnavailable

    settings = settings_for(args)
    if not args.apply:
        values = {k: dict(v) for k, v in settings.values.items()}
        values["restart"]["dry_run"] = True
        settings = dataclasses.replace(settings, values=values)
    app = build_status(settings)
    try:
        app.engine.ping()
        report = app.healer.sweep(apply=args.apply)
        if report.engine_error:
            raise CliError(report.engine_error)
        deadline = time.monotonic() + settings["restart.verify_timeout"].total_seconds() + 5
        while args.apply and app.loop.verifying() and time.monotonic() < deadline:
            time.sleep(1)
            app.verifier.verify()
    except EngineUnavailable as exc:
        raise CliError(str(exc)) from None
    finally:
        app.edges.close()
    rows = [_row(a) for a in report.rows]
    if args.json:
        print_json({"dry_run": not args.apply, "containers": rows})
    else:
        table(
            rows, CHECK_COLUMNS, "no watched containers (label: {})".format(settings["watch.label"])
        )
    return EXIT_OK


def register(sub: Any, cfg: WithConfig) -> None:
    cfg(sub.add_parser("run", help="run the daemon")).set_defaults(handler=cmd_run)
    check = cfg(sub.add_parser("check", help="one sweep; a table of findings and decisions"))
    check.add_argument("--apply", action="store_true", help="really restart (default: dry run)")
    check.add_argument("--json", action="store_true", help="machine-readable output")
    check.set_defaults(handler=cmd_check)
