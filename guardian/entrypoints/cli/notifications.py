"""`guardian notifications`: the outbox as operators see it — dead letters and what is queued;
`guardian notify test`: a test message through every channel, now."""

from __future__ import annotations

import argparse
from collections.abc import Callable
from typing import Any

from guardian.entrypoints.cli.tables import (
    EXIT_FAILURE,
    EXIT_OK,
    CliError,
    add_json,
    one_line_errors,
    print_json,
    settings_for,
    table,
)

DEAD_COLUMNS = ("id", "channel", "kind", "incident", "container", "attempts", "error", "at")

WithConfig = Callable[[argparse.ArgumentParser], argparse.ArgumentParser]


def _dead_view(row: dict[str, Any]) -> dict[str, Any]:
    import json  # loaded by the command that reads payloads (see tables.print_json)

    from guardian.readside.views import text  # the model loads only for this command

    payload = json.loads(row["payload"])
    return {
        "id": row["id"],
        "channel": row["channel"],
        "kind": row["kind"],
        "incident": row["incident_id"],
        "container": payload.get("container", ""),
        "attempts": row["attempts"],
        "error": text(row["last_error"]),
        "at": row["finished_at"],
    }


@one_line_errors
def cmd_notifications(args: argparse.Namespace) -> int:
    from guardian.bootstrap import build_outbox  # adapters load only for the command that uses them

    outbox = build_outbox(settings_for(args))
    try:
        dead = [_dead_view(r) for r in outbox.dead_letters()]
        queued = outbox.queue_depth()
    finally:
        outbox.db.close()
    if args.json:
        print_json({"queued": queued, "dead_letters": dead})
        return EXIT_OK
    print(f"queued for delivery: {queued}")
    print()
    table(dead, DEAD_COLUMNS, "no dead letters")
    return EXIT_OK


def register(sub: Any, with_config: WithConfig) -> None:
    p = sub.add_parser(
        "notifications", help="dead letters (deliveries given up on) and the queue depth"
    )
    add_json(with_config(p)).set_defaults(handler=cmd_notifications)


TEST_COLUMNS = ("channel", "delivered", "status", "error", "seconds")


@one_line_errors
def cmd_notify_test(args: argparse.Namespace) -> int:
    from guardian.bootstrap import build_channel_check  # adapters load only for this command
    from guardian.service.outbound.channel_check import UnknownChannel

    check = build_channel_check(settings_for(args))
    if not check.channels:
        raise CliError("no notification channel is configured (notify: in the config)")
    try:
        reports = check.run(args.channel)
    except UnknownChannel as exc:
        raise CliError(str(exc)) from None
    rows = [
        {
            "channel": r.channel,
            "delivered": r.delivered,
            "status": r.status,
            "error": r.error,
            "seconds": r.seconds,
        }
        for r in reports
    ]
    if args.json:
        print_json({"channels": rows})
    else:
        table(rows, TEST_COLUMNS, "no channel")
    return EXIT_OK if all(r.delivered for r in reports) else EXIT_FAILURE


def register_notify(sub: Any, with_config: WithConfig) -> None:
    p = sub.add_parser("notify", help="check the notification channels")
    verbs = p.add_subparsers(dest="verb", required=True, metavar="VERB")
    t = verbs.add_parser(
        "test",
        help="send one test message through each configured channel now; exit 1 if any failed",
    )
    t.add_argument("--channel", metavar="NAME", help="only this channel (e.g. slack, email)")
    add_json(with_config(t)).set_defaults(handler=cmd_notify_test)
