"""The `guardian` command line: one module per command group (run, status, incidents,
notifications, healthz, token); this one parses and maps failures to exit codes.

Exit codes: 0 success, 1 any other failure, 2 bad configuration, 3 `run` cannot open its store.
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Sequence

from guardian import DISTRIBUTION, __version__
from guardian.entrypoints.cli import healthz, incidents, notifications, run, status, token
from guardian.entrypoints.cli.tables import EXIT_FAILURE, CliError

EXIT_CONFIG = 2


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="guardian", description="Keeps the containers of a Docker host healthy."
    )
    p.add_argument("--version", action="version", version=f"{DISTRIBUTION} {__version__}")
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

    run.register(sub, with_config)
    healthz.register(sub, with_config)
    status.register(sub, with_config)
    incidents.register(sub, with_config)
    notifications.register(sub, with_config)
    notifications.register_notify(sub, with_config)
    token.register(sub, with_config)
    return p


def main(argv: Sequence[str] | None = None) -> int:
    args = _parser().parse_args(argv)  # --version and --help end here
    try:
        return int(args.handler(args))
    except KeyboardInterrupt:
        return EXIT_FAILURE
    except Exception as exc:  # noqa: BLE001 - _failure re-raises what it does not report
        return _failure(exc)


def _failure(exc: Exception) -> int:
    """The exit code for a failure reported as one line; anything else propagates. The error
    types are imported here so a command that succeeds never loads the modules defining them."""
    from guardian.config import ConfigError
    from guardian.ports import InstanceConflict, StoreError

    if isinstance(exc, ConfigError):
        print(f"guardian: config error: {exc}", file=sys.stderr)
        return EXIT_CONFIG
    if isinstance(exc, CliError | StoreError | InstanceConflict):
        print(f"guardian: {exc}", file=sys.stderr)
        return EXIT_FAILURE
    raise exc


if __name__ == "__main__":
    sys.exit(main())
