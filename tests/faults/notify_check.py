"""The crash test's notification check: the store's outbox compared with what a fake receiver got.

Three channels point at one FakeReceiver: a Slack incoming webhook and an Apprise json:// URL
(neither idempotent: Slack and Apprise's services do not deduplicate) and the generic webhook
(idempotent: receivers deduplicate on Idempotency-Key).

- None lost: every outbox row has, on each channel, a delivery row that is delivered or
  dead-lettered; every row delivered to the webhook arrived there (by notification id), and every
  row delivered to Slack or Apprise arrived there (by headline: their messages carry no id).
- Never twice to Slack or Apprise, except the one documented window: Guardian records a send's
  outcome after the channel answered, so a kill -9 between the answer and the record leaves the
  row pending and the next run sends it again. A duplicate is therefore allowed only if it was
  carried by the last message of that channel a run received before that run was killed: at most
  one message per kill and channel.
"""

from __future__ import annotations

import json
import re
import sqlite3
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from guardian.core.outbound.notifications import from_dict
from tests.faults.exposure import SECRET_SOURCES, Exposure
from tests.receiver import FakeReceiver, Recorded

SLACK_PATH = "/slack/"
HOOK_PATH = "/hook/"
APPRISE_PATH = "/apprise/"
APPRISE_CHANNEL = "apprise:json"
_BATCH = re.compile(r"^\d+ Guardian events on ")
_MARKDOWN_ESCAPE = re.compile(r"\\([\\`*_\[\]()#!|~>])")


def slack_headlines(body: bytes) -> list[str]:
    """The headline of every notification one Slack webhook message carries."""
    doc = json.loads(body)
    if not _BATCH.match(doc["text"]):
        return [doc["text"].split("\n", 1)[0]]  # one notification: its text() starts so
    # A batch: one section per notification, "<emoji> *<headline>*\n<next step>".
    sections = [b["text"]["text"] for b in doc["blocks"] if b["type"] == "section"]
    return [s.split(" *", 1)[1].split("*\n", 1)[0] for s in sections]


def apprise_headlines(body: bytes) -> list[str]:
    """The headline of every notification one Apprise json:// message carries."""
    doc = json.loads(body)
    if not _BATCH.match(doc["title"]):
        return [doc["title"]]  # one notification: its headline is the title
    # A batch: one Markdown line per notification, "- **<escaped headline>** — <next step>".
    lines = [x for x in doc["message"].splitlines() if x.startswith("- **")]
    heads = [x[4:].split("** — ", 1)[0] for x in lines]
    return [_MARKDOWN_ESCAPE.sub(r"\1", h).replace("&lt;", "<") for h in heads]


# The channels that cannot deduplicate: (request path, headlines of one message).
TOLD: dict[str, tuple[str, Callable[[bytes], list[str]]]] = {
    "slack": (SLACK_PATH, slack_headlines),
    APPRISE_CHANNEL: (APPRISE_PATH, apprise_headlines),
}


def expose_received(exposure: Exposure, rx: FakeReceiver) -> None:
    """Hand every notification the receiver got (headers and body) to the secrets check. The
    request path is where the channel URL's secret lives by design, so it is not scanned."""
    for i, r in enumerate(rx.requests):
        headers = "\n".join(f"{k}: {v}" for k, v in r.headers.items())
        exposure.add(f"notification {i} received ({r.path[:6]}...)", f"{headers}\n\n{r.body!r}")


def notify_channels(rx: FakeReceiver, query: str = "") -> tuple[dict[str, str], dict[str, Any]]:
    """(environment, notify section): a Slack webhook and an Apprise json:// URL (neither
    idempotent) and the generic webhook (idempotent, HMAC-signed), all on `rx`, retried fast and
    never grouped for long; `query` (a secret) goes into the two webhook URLs' query when given."""
    tail = f"?token={query}" if query else ""
    env = {
        "GDT_SLACK_URL": rx.url(SLACK_PATH + SECRET_SOURCES["slack webhook url"] + tail),
        "GDT_HOOK_URL": rx.url(HOOK_PATH + SECRET_SOURCES["webhook url"] + tail),
        "GDT_HOOK_HMAC": SECRET_SOURCES["webhook hmac"],
        "GDT_APPRISE_URLS": rx.url(APPRISE_PATH + SECRET_SOURCES["apprise url"]).replace(
            "http://", "json://", 1
        ),
    }
    notify = {
        "slack_webhook_url_env": "GDT_SLACK_URL",
        "webhook_url_env": "GDT_HOOK_URL",
        "webhook_secret_env": "GDT_HOOK_HMAC",
        "apprise_urls_env": "GDT_APPRISE_URLS",
        "group_wait": "0s",
        "pacing": "0s",
        "retry_backoff": "200ms",
        "max_backoff": "1s",
        "max_attempts": 100,
    }
    return env, notify


@dataclass
class NotifyFigures:
    notifications: int = 0
    states: dict[str, int] = field(default_factory=dict)
    slack_messages: int = 0
    webhook_messages: int = 0
    apprise_messages: int = 0
    slack_duplicates: int = 0
    apprise_duplicates: int = 0
    duplicates_at_kills: int = 0
    lost: int = 0  # (notification, channel) pairs not delivered or not received
    problems: list[str] = field(default_factory=list)


def _run_of(at: float, starts: list[float]) -> int:
    """Index of the Guardian run a request arrived in (the last start before it)."""
    return max(i for i, s in enumerate(starts) if s <= at)


def check_notifications(
    store: Path,
    rx: FakeReceiver,
    starts: list[float],
    killed_runs: int,
    channels: tuple[str, ...] = ("slack", "webhook"),
) -> NotifyFigures:
    """Compare the store with the receiver; `starts` are time.monotonic() before each start,
    runs 0..killed_runs-1 ended with a kill -9."""
    db = sqlite3.connect(f"file:{store}?mode=ro", uri=True)
    try:
        outbox = {i: json.loads(p) for i, p in db.execute("SELECT id, payload FROM outbox")}
        undispatched = db.execute("SELECT count(*) FROM outbox WHERE dispatched=0").fetchone()[0]
        deliveries = list(db.execute("SELECT outbox_id, channel, state FROM deliveries"))
    finally:
        db.close()
    fig = NotifyFigures(notifications=len(outbox))
    fig.states = dict(Counter(f"{channel}:{state}" for _, channel, state in deliveries))
    if undispatched:
        fig.problems.append(f"{undispatched} outbox rows never fanned out to the channels")
    by_channel: dict[str, dict[int, str]] = {c: {} for c in channels}
    for oid, channel, state in deliveries:
        by_channel.setdefault(channel, {})[oid] = state
    for channel, states in by_channel.items():
        missing = sorted(set(outbox) - set(states))
        fig.lost += len(missing)
        if missing:
            fig.problems.append(f"{channel}: no delivery row for outbox ids {missing[:10]}")
        open_rows = sorted(oid for oid, s in states.items() if s not in ("delivered", "dead"))
        fig.lost += len(open_rows)
        if open_rows:
            fig.problems.append(f"{channel}: neither delivered nor dead: ids {open_rows[:10]}")

    # Every request counts, answered or not: a real Slack posts what it got even if the sender
    # died before reading the answer.
    hook = [r for r in rx.requests if r.path.startswith(HOOK_PATH)]
    fig.webhook_messages = len(hook)

    # The webhook: exact, by notification id.
    got_ids = {n["id"] for r in hook for n in r.json["notifications"]}
    lost = sorted(
        oid
        for oid, s in by_channel.get("webhook", {}).items()
        if s == "delivered" and oid not in got_ids
    )
    fig.lost += len(lost)
    if lost:
        fig.problems.append(f"webhook: recorded delivered but never received: ids {lost[:10]}")

    for channel in TOLD.keys() & set(channels):
        messages, duplicates = _check_told(
            fig, channel, rx, by_channel, outbox, starts, killed_runs
        )
        if channel == "slack":
            fig.slack_messages, fig.slack_duplicates = messages, duplicates
        else:
            fig.apprise_messages, fig.apprise_duplicates = messages, duplicates
    return fig


def _check_told(
    fig: NotifyFigures,
    channel: str,
    rx: FakeReceiver,
    by_channel: dict[str, dict[int, str]],
    outbox: dict[int, Any],
    starts: list[float],
    killed_runs: int,
) -> tuple[int, int]:
    """A channel without deduplication, by headline as a multiset: (messages, duplicates)."""
    path, headlines = TOLD[channel]
    got = [r for r in rx.requests if r.path.startswith(path)]
    expected = Counter(
        from_dict(outbox[oid]).headline
        for oid, s in by_channel[channel].items()
        if s == "delivered"
    )
    received = Counter(h for r in got for h in headlines(r.body))
    short = expected - received
    fig.lost += sum(short.values())
    if short:
        fig.problems.append(f"{channel}: recorded delivered but never received: {dict(short)}")
    surplus = received - expected
    # The window: the last message of this channel in each killed run.
    last_of_run: dict[int, Recorded] = {}
    for r in sorted(got, key=lambda r: r.at):
        last_of_run[_run_of(r.at, starts)] = r
    in_flight = Counter(
        h for run, r in last_of_run.items() if run < killed_runs for h in headlines(r.body)
    )
    fig.duplicates_at_kills += sum((surplus & in_flight).values())
    outside = surplus - in_flight
    if outside:
        fig.problems.append(
            f"{channel}: sent twice outside the kill window (not the last send of a killed run):"
            f" {dict(outside)}"
        )
    return len(got), sum(surplus.values())


def as_report(fig: NotifyFigures) -> dict[str, Any]:
    return {
        "notifications": fig.notifications,
        "delivery_states": fig.states,
        "slack_messages": fig.slack_messages,
        "webhook_messages": fig.webhook_messages,
        "apprise_messages": fig.apprise_messages,
        "slack_duplicates": fig.slack_duplicates,
        "apprise_duplicates": fig.apprise_duplicates,
        "duplicates_in_kill_window": fig.duplicates_at_kills,  # Slack and Apprise
        "notifications_lost": fig.lost,
    }
