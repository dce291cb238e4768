"""Output and error handling shared by the operator commands: tables for people, JSON for scripts.

A table cell is the JSON value rendered by `cell()`, so `--json` carries exactly the table's rows.
"""

from __future__ import annotations

import argparse
import functools
import sys
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

from guardian.core.redaction import strip_controls

if TYPE_CHECKING:
    from guardian.config import Settings

EXIT_OK, EXIT_FAILURE = 0, 1


class CliError(Exception):
    """A failure to report as one line `guardian: ...` with exit code 1."""


Command = Callable[[argparse.Namespace], int]


def cell(value: Any) -> str:
    """How a JSON value is shown in a table: None as "-", booleans as yes/no."""
    if value is None or value == "":
        return "-"
    if isinstance(value, bool):
        return "yes" if value else "no"
    # One line per row, and nothing a terminal would act on, whatever the text holds.
    return " ".join(strip_controls(str(value)).split())


def table(rows: list[dict[str, Any]], columns: Sequence[str], empty: str) -> None:
    if not rows:
        print(empty)
        return
    cells = [[cell(r[c]) for c in columns] for r in rows]
    widths = [max([len(c)] + [len(row[n]) for row in cells]) for n, c in enumerate(columns)]
    print("  ".join(c.upper().ljust(w) for c, w in zip(columns, widths, strict=True)).rstrip())
    for row in cells:
        print("  ".join(v.ljust(w) for v, w in zip(row, widths, strict=True)).rstrip())


def emit(
    args: argparse.Namespace, key: str, rows: list[dict[str, Any]], columns: Sequence[str]
) -> None:
    """Print a listing: `{key: rows}` as JSON with --json, else a table of `columns`."""
    if getattr(args, "json", False):
        print_json({key: rows})
    else:
        table(rows, columns, f"no {key.replace('_', ' ')}")


def one_line_errors(command: Command) -> Command:
    """Refusals and missing things become `guardian: <message>` and exit 1, never a traceback."""

    @functools.wraps(command)
    def run(args: argparse.Namespace) -> int:
        # Imported when a command runs: `--version` and `--help` load none of the service.
        from guardian.core.incidents import InvalidTransition
        from guardian.ports import EngineUnavailable
        from guardian.service.operator import BadRequest, NotFound, Refused

        try:
            return command(args)
        except (InvalidTransition, NotFound, BadRequest, Refused, EngineUnavailable) as exc:
            print(f"guardian: {exc}", file=sys.stderr)
            return EXIT_FAILURE

    return run


def print_json(doc: object) -> None:
    """A command's --json output. The json module loads when a command prints it, not with the
    parser (`config validate` starts without it: bench/imports.py)."""
    import json

    print(json.dumps(doc, indent=2))


def add_json(parser: argparse.ArgumentParser) -> argparse.ArgumentParser:
    parser.add_argument("--json", action="store_true", help="machine-readable output")
    return parser


def settings_for(args: argparse.Namespace) -> Settings:
    from guardian.config import load_settings
    from guardian.logs import setup_logging

    settings = load_settings(args.config)
    setup_logging(settings["log.level"], settings["log.format"])
    return settings
