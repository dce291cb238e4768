"""`guardian incidents|actions|silence|unsilence|silences|rollback`: read and steer what the daemon
records.

These commands open the same SQLite store as a running daemon (WAL, busy timeout), so they work
while it runs. Incident changes are judged by the core state machine; a refusal is one line.
"""

from __future__ import annotations

import argparse
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from datetime import timedelta
from typing import TYPE_CHECKING

from guardian.core.durations import parse_duration
from guardian.entrypoints.cli.tables import (
    EXIT_OK,
    add_json,
    cell,
    emit,
    one_line_errors,
    print_json,
    settings_for,
    table,
)

if TYPE_CHECKING:
    from guardian.core.model import IncidentState
    from guardian.service.operator import Operator

# The model and the views load only for the command that uses them: `guardian --version` and
# `guardian config validate` start without them (bench/imports.py).

INCIDENT_COLUMNS = (
    "id",
    "container",
    "type",
    "state",
    "escalated",
    "opened_at",
    "occurrences",
    "resolved_by",
)
ACTION_COLUMNS = ("requested_at", "container", "kind", "attempt", "reason", "outcome", "incident")
SILENCE_COLUMNS = ("container", "until", "by", "reason", "active")
TIMELINE_COLUMNS = ("at", "actor", "event", "reason", "detail")

WithConfig = Callable[[argparse.ArgumentParser], argparse.ArgumentParser]


def _user() -> str:
    try:
        import getpass  # asked when a silence is set, not when the parser is built

        return getpass.getuser()
    except (KeyError, OSError):
        return "operator"


def _duration(option: str, text: str) -> timedelta:
    from guardian.service.operator import BadRequest

    try:
        return parse_duration(text)
    except ValueError as exc:
        raise BadRequest(f"{option} {text!r}: {exc}") from None


@contextmanager
def _operator(args: argparse.Namespace) -> Iterator[Operator]:
    """The operator actions over the daemon's store, closed when the command is done."""
    from guardian.bootstrap import build_operator  # the store and its adapters: only when used

    op = build_operator(settings_for(args))
    try:
        yield op
    finally:
        op.store.close()


@one_line_errors
def cmd_list(args: argparse.Namespace) -> int:
    from guardian.readside.views import incident_view

    with _operator(args) as op:
        found = op.store.list_incidents(op.host, args.state, args.container)
        rows = [incident_view(i) for i in found]
    emit(args, "incidents", rows, INCIDENT_COLUMNS)
    return EXIT_OK


@one_line_errors
def cmd_show(args: argparse.Namespace) -> int:
    from guardian.readside.views import incident_view, timeline_view

    with _operator(args) as op:
        incident = op.incident(args.id)
        view, timeline = (
            incident_view(incident),
            timeline_view(op.timeline(incident), incident.container),
        )
    if args.json:
        print_json({"incident": view, "timeline": timeline})
        return EXIT_OK
    for key, value in view.items():
        if value not in (None, ""):
            print(f"{key + ':':14}{cell(value)}")
    print()
    table(timeline, TIMELINE_COLUMNS, "no timeline")
    return EXIT_OK


def _change(verb: str) -> Callable[[argparse.Namespace], int]:
    @one_line_errors
    def run(args: argparse.Namespace) -> int:
        with _operator(args) as op:
            incident = op.change(args.id, verb, args.by, args.reason or "")
        print(f"incident {incident.id} ({incident.container}) is now {incident.state}")
        return EXIT_OK

    return run


def _answer(approve: bool) -> Callable[[argparse.Namespace], int]:
    @one_line_errors
    def run(args: argparse.Namespace) -> int:
        with _operator(args) as op:
            answer = op.answer(args.id, approve, args.by, args.reason or "")
        if approve:
            until = answer.expires_at.isoformat(timespec="seconds")
            print(
                f"incident {answer.incident_id} ({answer.container}): one restart approved"
                f" until {until}; Guardian restarts it when decide() allows"
            )
        else:
            print(f"incident {answer.incident_id} ({answer.container}): restarts denied")
        return EXIT_OK

    return run


@one_line_errors
def cmd_rollback(args: argparse.Namespace) -> int:
    from guardian.bootstrap import build_operator
    from guardian.core.escalation.rollback import requested

    op = build_operator(settings_for(args), engine=True)
    try:
        request, to = op.request_rollback(args.container, args.by or _user(), args.reason or "")
    finally:
        op.store.close()
        if op.engine is not None:
            op.engine.close()
    print(requested(request.container, to))
    return EXIT_OK


@one_line_errors
def cmd_actions(args: argparse.Namespace) -> int:
    from guardian.readside.views import action_view

    with _operator(args) as op:
        since = op.clock.now() - _duration("--since", args.since) if args.since else None
        rows = [action_view(a) for a in op.store.actions(op.host, args.container, since)]
    emit(args, "actions", rows, ACTION_COLUMNS)
    return EXIT_OK


@one_line_errors
def cmd_silence(args: argparse.Namespace) -> int:
    with _operator(args) as op:
        duration = _duration("--for", args.duration)
        s = op.silence(args.container, duration, args.reason or "", args.by or _user())
    print(f"{s.container} silenced until {s.until.isoformat(timespec='seconds')}: {s.reason}")
    return EXIT_OK


@one_line_errors
def cmd_unsilence(args: argparse.Namespace) -> int:
    with _operator(args) as op:
        s = op.unsilence(args.container, args.by or _user())
    print(f"{s.container}: silence lifted")
    return EXIT_OK


@one_line_errors
def cmd_silences(args: argparse.Namespace) -> int:
    from guardian.readside.views import silence_view

    with _operator(args) as op:
        now = op.clock.now()
        rows = [silence_view(s, now) for s in op.store.silences(op.host, now, args.all)]
    emit(args, "silences", rows, SILENCE_COLUMNS)
    return EXIT_OK


def _state(value: str) -> IncidentState:
    from guardian.core.model import IncidentState

    try:
        return IncidentState(value)
    except ValueError:
        allowed = ", ".join(str(s) for s in IncidentState)
        raise argparse.ArgumentTypeError(f"{value!r} is not one of {allowed}") from None


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser], cfg: WithConfig) -> None:
    """Add the incident, action and silence commands to the `guardian` parser."""
    inc = sub.add_parser("incidents", help="list, show and steer incidents")
    isub = inc.add_subparsers(dest="incidents_command", required=True, metavar="ACTION")
    lst = add_json(cfg(isub.add_parser("list", help="incidents, oldest first")))
    lst.add_argument("--state", type=_state, metavar="STATE", help="e.g. active, resolved")
    lst.add_argument("--container", metavar="NAME")
    lst.set_defaults(handler=cmd_list)
    show = add_json(cfg(isub.add_parser("show", help="one incident with its timeline")))
    show.add_argument("id", type=int)
    show.set_defaults(handler=cmd_show)
    for verb, text in (("ack", "acknowledge"), ("resolve", "resolve"), ("close", "close")):
        p = cfg(isub.add_parser(verb, help=f"{text} an incident"))
        p.add_argument("id", type=int)
        p.add_argument("--by", required=True, metavar="NAME", help="who does it (audit trail)")
        p.add_argument(
            "--reason", metavar="TEXT", help="why" + (" (required)" if verb == "resolve" else "")
        )
        p.set_defaults(handler=_change(verb))
    for verb, text in (
        ("approve", "approve one restart of an incident awaiting approval (guardian.action=ask)"),
        ("deny", "refuse the restarts of an incident awaiting approval"),
    ):
        p = cfg(isub.add_parser(verb, help=text))
        p.add_argument("id", type=int)
        p.add_argument("--by", required=True, metavar="NAME", help="who does it (audit trail)")
        p.add_argument("--reason", metavar="TEXT", help="why")
        p.set_defaults(handler=_answer(verb == "approve"))

    rb = cfg(
        sub.add_parser(
            "rollback",
            help="roll a container back to the last record of its name that ran healthy",
        )
    )
    rb.add_argument("container")
    rb.add_argument("--by", metavar="NAME", help="default: the current user")
    rb.add_argument("--reason", metavar="TEXT", help="why")
    rb.set_defaults(handler=cmd_rollback)

    act = add_json(cfg(sub.add_parser("actions", help="remediation history with outcomes")))
    act.add_argument("--container", metavar="NAME")
    act.add_argument("--since", metavar="DURATION", help="e.g. 30m, 1h, 7d")
    act.set_defaults(handler=cmd_actions)

    sil = cfg(sub.add_parser("silence", help="hold back restarts of a container for a while"))
    sil.add_argument("container")
    sil.add_argument("--for", dest="duration", required=True, metavar="DURATION")
    sil.add_argument("--reason", required=True, metavar="TEXT")
    sil.add_argument("--by", metavar="NAME", help="default: the current user")
    sil.set_defaults(handler=cmd_silence)
    uns = cfg(sub.add_parser("unsilence", help="lift a container's silence"))
    uns.add_argument("container")
    uns.add_argument("--by", metavar="NAME", help="default: the current user")
    uns.set_defaults(handler=cmd_unsilence)
    sls = add_json(cfg(sub.add_parser("silences", help="silences in force")))
    sls.add_argument("--all", action="store_true", help="also ended and expired ones")
    sls.set_defaults(handler=cmd_silences)
