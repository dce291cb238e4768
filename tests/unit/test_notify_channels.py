"""Each channel against the fake receiver on 127.0.0.1: rendering and typed outcomes."""

from __future__ import annotations

import hashlib
import hmac
from dataclasses import replace

import pytest

from guardian.adapters.notify.discord import DiscordNotifier
from guardian.adapters.notify.pagerduty import PagerDutyNotifier
from guardian.adapters.notify.slack_bot import SlackBotNotifier
from guardian.adapters.notify.slack_webhook import SlackWebhookNotifier
from guardian.adapters.notify.webhook import WebhookNotifier, idempotency_key
from guardian.adapters.sqlite.outbox import SqliteOutbox
from guardian.adapters.sqlite.store import SqliteStore
from guardian.core.model import Outcome
from guardian.core.outbound import notifications
from guardian.core.outbound.delivery import Status
from tests.fakes import T0
from tests.receiver import HANG, Answer, FakeReceiver, free_port
from tests.samples import INCIDENT, S, opened


@pytest.fixture
def rx():
    r = FakeReceiver()
    yield r
    r.stop()


def test_slack_webhook_sends_block_kit_with_a_text_fallback(rx):
    result = SlackWebhookNotifier(rx.url("/s"), 2 * S, S).send([opened()])
    assert result.ok
    doc = rx.requests[0].json
    assert doc["text"].startswith("Incident opened: web on vm1: unhealthy")
    assert "Failed to connect to localhost port 80" in doc["text"]  # whitespace trimmed
    assert doc["blocks"][0]["type"] == "header"
    fields = [f["text"] for f in doc["blocks"][1]["fields"]]
    assert fields[:4] == [
        "*Container*\nweb",
        "*Host*\nvm1",
        "*Incident type*\nunhealthy",
        "*State*\nactive",
    ]


@pytest.mark.parametrize(
    ("answer", "status", "retry_after"),
    [
        (Answer(200), Status.DELIVERED, None),
        (Answer(429, "", {"Retry-After": "2"}), Status.RATE_LIMITED, 2 * S),
        (Answer(500, "rollup_error"), Status.TRANSIENT, None),
        (Answer(400, "invalid_payload"), Status.PERMANENT, None),
        (Answer(404, "no_service"), Status.PERMANENT, None),
        (Answer(410, "channel_is_archived"), Status.PERMANENT, None),
    ],
)
def test_slack_webhook_answers_are_typed(rx, answer, status, retry_after):
    rx.default = answer
    result = SlackWebhookNotifier(rx.url("/s"), 2 * S, S).send([opened()])
    assert result.status is status
    assert result.retry_after == retry_after
    if status is Status.PERMANENT:
        assert answer.body in result.reason


def test_refused_is_transient_and_a_hang_is_unknown(rx):
    refused = SlackWebhookNotifier(f"http://127.0.0.1:{free_port()}/s", S, S).send([opened()])
    assert refused.status is Status.TRANSIENT and refused.reason == "connection refused"
    rx.default = HANG
    hung = SlackWebhookNotifier(rx.url("/s/secret-path"), 0.3 * S, S).send([opened()])
    assert hung.status is Status.UNKNOWN
    assert "secret-path" not in hung.reason and "127.0.0.1" not in hung.reason


def test_discord_reads_retry_after_from_its_json(rx):
    rx.default = Answer.json({"message": "rate limited", "retry_after": 1.5}, 429)
    result = DiscordNotifier(rx.url("/d"), 2 * S, S).send([opened()])
    assert result.status is Status.RATE_LIMITED and result.retry_after == 1.5 * S
    assert rx.requests[0].json["embeds"][0]["title"].startswith("Incident opened")


def test_webhook_is_signed_and_carries_an_idempotency_key(rx):
    batch = [opened(nid=1), opened(nid=2)]
    assert WebhookNotifier(rx.url("/h"), "k3y-secret", 2 * S).send(batch).ok
    req = rx.requests[0]
    expected = hmac.new(b"k3y-secret", req.body, hashlib.sha256).hexdigest()
    assert req.headers["x-guardian-signature"] == f"sha256={expected}"
    assert req.headers["idempotency-key"] == idempotency_key(batch)
    assert idempotency_key(batch) != idempotency_key(batch[:1])
    doc = req.json
    assert doc["version"] == 1 and [n["id"] for n in doc["notifications"]] == [1, 2]
    # Schema version 1 as it was: what routed and held it is the outbox's, not the receiver's.
    assert not {"receivers", "held"} & set(doc["notifications"][0])


def test_pagerduty_pages_escalations_and_resolves_with_the_incident_as_dedup_key(rx):
    rx.default = Answer(202, '{"status":"success"}')
    pd = PagerDutyNotifier("routing-key", rx.url("/v2/enqueue"), 2 * S)
    assert pd.send([opened()]).ok and rx.requests == []  # self-healing does not page
    from guardian.core.model import Decision, Reason, Verdict

    gave_up = notifications.gave_up(INCIDENT, Decision(Verdict.GIVE_UP, Reason.MAX_ATTEMPTS), T0)
    pd.send([gave_up])
    pd.send([notifications.resolved(INCIDENT, "healthy", T0)])
    actions = [(r.json["event_action"], r.json["dedup_key"]) for r in rx.requests]
    assert actions == [("trigger", "guardian/vm1/7"), ("resolve", "guardian/vm1/7")]
    assert rx.requests[0].json["routing_key"] == "routing-key"


def test_slack_bot_threads_replies_and_types_api_errors(rx, tmp_path):
    store = SqliteStore(tmp_path / "g.db")
    outbox = SqliteOutbox(store.db)
    from guardian.core.incidents import IncidentChange

    incident = store.save_incident(IncidentChange(replace(INCIDENT, id=None)))
    rx.respond = lambda rec: Answer.json({"ok": True, "ts": "1.000001", "channel": "C1"})
    bot = SlackBotNotifier("xoxb-t", "#ops", rx.url("/api"), outbox, 2 * S, S)
    assert bot.send([opened(incident)]).ok
    attempt = notifications.attempt(incident, 1, 3, Outcome.RESTARTED, "", T0)
    assert bot.send([attempt]).ok
    assert rx.requests[1].json["thread_ts"] == "1.000001"
    rx.respond = lambda rec: Answer.json({"ok": False, "error": "channel_not_found"})
    refused = bot.send([attempt])
    assert refused.status is Status.PERMANENT and "channel_not_found" in refused.reason
    rx.respond = lambda rec: Answer.json({"ok": False, "error": "ratelimited"})
    assert bot.send([attempt]).status is Status.RATE_LIMITED
    store.close()


def test_alertmanager_keeps_firing_alerts_alive_and_ends_closed_ones(rx, tmp_path):
    from guardian.adapters.notify.alertmanager import AlertmanagerNotifier
    from guardian.core import incidents as inc
    from guardian.core.incidents import IncidentChange
    from tests.fakes import FakeClock

    clock = FakeClock()
    store = SqliteStore(tmp_path / "g.db")
    incident = store.save_incident(IncidentChange(replace(INCIDENT, id=None)))
    am = AlertmanagerNotifier(rx.url(), SqliteOutbox(store.db), clock, 2 * S, 60 * S)
    assert am.send([opened(incident)]).ok
    [fired] = rx.requests[0].json
    assert fired["labels"]["container"] == "web" and fired["endsAt"] > clock.now().isoformat()
    am.refresh()  # the first refresh (e.g. after a restart) re-sends at once
    am.refresh()  # within the interval: nothing
    assert len(rx.requests) == 2
    clock.advance(60)
    am.refresh()
    [resent] = rx.requests[2].json
    assert resent["endsAt"] == (clock.now() + 240 * S).isoformat()
    assert resent["startsAt"] == fired["startsAt"]
    resolved = store.save_incident(inc.record_recovery(incident, "healthy", clock.now()))
    assert not resolved.is_open
    clock.advance(60)
    am.refresh()  # resolved without a message to this channel: the alert is ended
    [ended] = rx.requests[3].json
    assert ended["endsAt"] == clock.now().isoformat()
    clock.advance(60)
    am.refresh()
    assert len(rx.requests) == 4
    store.close()
