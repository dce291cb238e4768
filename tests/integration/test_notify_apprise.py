"""The apprise channel end to end: a real `guardian run`, real containers, real Apprise URLs
(json:// and ntfy://) pointed at fake receivers on 127.0.0.1, through the durable outbox."""

from __future__ import annotations

import socket
import urllib.request

import pytest

from tests.helpers import wait_until
from tests.integration.notify_helpers import notifying, run
from tests.integration.see_more import rows
from tests.receiver import Answer, FakeReceiver, free_port

HEALTH = "test ! -f /run/sick || (echo disk-full-marker; exit 1)"
TOPIC = "gdtSecretTopic0123"  # an ntfy topic is its password on a public server
HOOK = "/gdtSecretHook0123"
ENV = "GDT_APPRISE_URLS"
FAST = {"group_wait": "0s", "retry_backoff": "200ms", "max_backoff": "1s"}
NO_STORM_BREAKER = {"threshold": "100%"}  # several containers fail at once, on purpose


def json_url(rx: FakeReceiver, path: str = HOOK) -> str:
    return rx.url(path).replace("http://", "json://", 1)


def ntfy_url(rx: FakeReceiver) -> str:
    return rx.url("/").replace("http://", "ntfy://", 1) + TOPIC


@pytest.fixture
def receivers():
    made: list[FakeReceiver] = []

    def make() -> FakeReceiver:
        made.append(FakeReceiver())
        return made[-1]

    yield make
    for r in made:
        r.stop()


@pytest.fixture
def with_apprise(guardian, tmp_path):
    """guardian(urls, ...) with the Apprise URLs in a file (apprise_urls_file); at teardown no
    secret part of them may appear in Guardian's log."""
    path = tmp_path / "apprise-urls"
    with notifying(guardian, {"apprise_urls_file": str(path), **FAST}) as make:

        def with_urls(urls: list[str], **sections):
            path.write_text("# the ops chats\n" + "\n".join(urls) + "\n")
            path.chmod(0o600)  # a secret file others may read is refused
            return make(**sections)

        yield with_urls


def titles(rx: FakeReceiver) -> list[str]:
    return [r.json["title"] for r in rx.answered(200)]


def metric(g, channel: str, outcome: str) -> float:
    text = urllib.request.urlopen(g.http_url + "/metrics", timeout=10).read().decode()
    line = f'guardian_notifications_total{{channel="{channel}",outcome="{outcome}"}} '
    found = [x for x in text.splitlines() if x.startswith(line)]
    return float(found[0].split()[-1]) if found else 0.0


def test_opened_attempt_resolved_arrive_in_order_on_json_and_ntfy(
    containers, with_apprise, receivers
):
    hook, ntfy = receivers(), receivers()
    name = run(containers, "app", health_cmd=HEALTH)
    containers.wait_health(name, "healthy")
    g = with_apprise([json_url(hook), ntfy_url(ntfy)], watch={"interval": "30s"})
    assert "channels=apprise:json,apprise:ntfy" in g.log()
    containers.make_unhealthy(name)

    for rx in (hook, ntfy):
        wait_until(lambda rx=rx: len(rx.answered()) >= 3, 40, message="three messages")
        heads = titles(rx)
        assert heads[0] == f"Incident opened: {name} on {socket.gethostname()}: unhealthy"
        assert heads[1].startswith(f"Restart attempt 1 of 3: {name}") and "restarted" in heads[1]
        assert heads[2].startswith(f"Resolved: {name}")
        assert len(rx.requests) == 3  # one message per state change, none per check
    opened = hook.answered()[0].json["message"]  # json:// takes Markdown
    assert "**Container:** `" + name + "`" in opened and "`disk-full-marker`" in opened
    assert "**Next:**" in opened
    assert {r.json["topic"] for r in ntfy.requests} == {TOPIC}
    assert "Attempt: 1 of 3" in ntfy.answered()[1].json["message"]  # ntfy: plain text


def test_gave_up_is_told_with_what_happens_next(containers, with_apprise, receivers):
    hook = receivers()
    name = run(containers, "stuck", health_cmd="echo db-unreachable-marker; false")
    with_apprise([json_url(hook)], restart={"max_attempts": 1, "cooldown": "1s"})
    wait_until(lambda: any("Gave up" in t for t in titles(hook)), 60, message="give-up")
    heads = titles(hook)
    assert heads[0].startswith(f"Incident opened: {name}")
    assert [h for h in heads if h.startswith("Gave up")] == [heads[-1]]
    gave_up = hook.answered()[-1].json
    assert gave_up["type"] == "failure" and "a human must look at it" in gave_up["message"]
    assert "db-unreachable-marker" in gave_up["message"]


def test_a_burst_is_grouped_into_one_message(containers, with_apprise, receivers, tmp_path):
    shared = tmp_path / "shared"
    shared.mkdir()
    binds = {str(shared): {"bind": "/shared", "mode": "ro"}}
    sick = "test ! -f /shared/sick"
    names = [run(containers, f"b{i}", health_cmd=sick, binds=binds) for i in range(3)]
    for name in names:
        containers.wait_health(name, "healthy")
    hook = receivers()
    g = with_apprise(
        [json_url(hook)],
        restart={"dry_run": True},
        storm=NO_STORM_BREAKER,
        notify={"group_wait": "6s"},
    )
    (shared / "sick").touch()
    delivered = "SELECT * FROM deliveries WHERE state='delivered'"
    wait_until(lambda: len(rows(g.store_path, delivered)) == 3, 40, message="three delivered")
    assert len(hook.requests) == 1
    doc = hook.requests[0].json
    assert doc["title"].startswith("3 Guardian events on ")
    assert all(name in doc["message"] for name in names)


def test_500_then_200_is_delivered_once_after_a_retry(containers, with_apprise, receivers):
    hook = receivers()
    hook.script = [Answer(500, "try later")]
    run(containers, "flaky", health_cmd="false")
    g = with_apprise([json_url(hook)], restart={"dry_run": True})
    wait_until(lambda: hook.answered(200), 30, message="delivered after a 500")
    wait_until(
        lambda: rows(g.store_path, "SELECT * FROM deliveries WHERE state='delivered'"),
        10,
        message="delivery recorded",
    )
    assert [r.status for r in hook.requests] == [500, 200]
    assert hook.requests[0].body == hook.requests[1].body  # the same message, once delivered
    assert metric(g, "apprise:json", "transient_failure") == 1
    assert metric(g, "apprise:json", "delivered") == 1


def test_a_dead_target_is_dead_lettered_while_the_other_keeps_receiving(
    containers, with_apprise, receivers
):
    live = receivers()
    dead = f"json://127.0.0.1:{free_port()}{HOOK}"  # nothing listens there
    first = run(containers, "one", health_cmd="false")
    g = with_apprise([dead, json_url(live)], restart={"dry_run": True}, notify={"max_attempts": 3})
    db = g.store_path
    wait_until(
        lambda: rows(db, "SELECT * FROM deliveries WHERE channel='apprise:json' AND state='dead'"),
        30,
        message="the dead target's delivery dead-lettered",
    )
    assert any(first in t for t in titles(live))
    second = run(containers, "two", health_cmd="false")
    wait_until(lambda: any(second in t for t in titles(live)), 30, message="live target still fed")
    [letter] = rows(db, "SELECT * FROM deliveries WHERE channel='apprise:json' AND state='dead'")
    assert letter["attempts"] == 3 and "connection failed" in letter["last_error"]
    assert metric(g, "apprise:json", "dead_letter") == 1
    assert metric(g, "apprise:json:2", "dead_letter") == 0
    assert len(live.requests) == len(live.answered(200))  # the live one never waited or failed
