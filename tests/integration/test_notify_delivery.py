"""Durable delivery across kill -9, grouping of bursts, and Slack bot threads, end to end."""

from __future__ import annotations

import itertools

from tests.helpers import wait_until
from tests.integration.notify_helpers import WATCH, run
from tests.integration.see_more import rows
from tests.receiver import Answer, FakeReceiver, Recorded, free_port, receiver

HOOK_SECRET = "gdtSecretHookPath0123456789"
HMAC_SECRET = "gdtSecretHmac0123456789"
BOT_TOKEN = "xoxb-gdtSecret-bot-0123456789"
FAST_RETRY = {"group_wait": "0s", "retry_backoff": "200ms", "max_backoff": "1s"}


def no_secrets(g, *secrets):
    text = g.log()
    for secret in secrets:
        assert secret not in text


# All of these containers fail at once: the storm breaker would rightly send one host-level
# notification instead; these tests are about per-container delivery and grouping.
NO_STORM_BREAKER = {"threshold": "100%"}


def test_kill9_with_ten_queued_then_all_ten_delivered_once(containers, guardian, tmp_path):
    port = free_port()  # nothing listens there yet: the receiver is down
    url = f"http://127.0.0.1:{port}/hook/{HOOK_SECRET}"
    secret_file = tmp_path / "hmac"
    secret_file.write_text(HMAC_SECRET + "\n")
    secret_file.chmod(0o600)
    for i in range(10):
        run(containers, f"q{i}", health_cmd="false")
    g = guardian(
        env={"GDT_HOOK_URL": url},
        watch={"label": WATCH},
        restart={"dry_run": True},
        storm=NO_STORM_BREAKER,
        notify={
            "webhook_url_env": "GDT_HOOK_URL",
            "webhook_secret_file": str(secret_file),
            "max_attempts": 100,
            **FAST_RETRY,
        },
    )
    db = g.store_path
    wait_until(
        lambda: len(rows(db, "SELECT * FROM deliveries WHERE attempts >= 1")) == 10,
        30,
        message="ten notifications queued and tried",
    )
    assert rows(db, "SELECT * FROM deliveries WHERE state != 'pending'") == []
    g.kill9()

    with receiver(port) as hook:
        g.start()

        def delivered() -> list[int]:
            return [n["id"] for r in hook.answered() for n in r.json["notifications"]]

        wait_until(lambda: len(delivered()) >= 10, 20, message="ten delivered")
        wait_until(
            lambda: len(rows(db, "SELECT * FROM deliveries WHERE state='delivered'")) == 10,
            5,
            message="deliveries recorded",
        )
        assert g.stop() == 0
        ids = delivered()
        assert len(ids) == 10 and len(set(ids)) == 10
        kinds = {n["kind"] for r in hook.answered() for n in r.json["notifications"]}
        assert kinds == {"opened"}
        for r in hook.answered():
            assert r.headers["idempotency-key"].startswith("guardian-")
            assert r.headers["x-guardian-signature"].startswith("sha256=")
    no_secrets(g, HOOK_SECRET, HMAC_SECRET)


def test_twenty_containers_unhealthy_within_a_second_make_one_message_per_channel(
    containers, guardian, tmp_path
):
    # One file on the host, bind-mounted into all twenty: touching it makes every one of them
    # fail its next health check (1 s interval), so they all turn unhealthy within a second.
    shared = tmp_path / "shared"
    shared.mkdir()
    binds = {str(shared): {"bind": "/shared", "mode": "ro"}}
    names = [
        run(containers, f"b{i:02d}", health_cmd="test ! -f /shared/sick", binds=binds)
        for i in range(20)
    ]
    for name in names:
        containers.wait_health(name, "healthy")
    with receiver() as rx:
        env = {
            "GDT_SLACK": rx.url(f"/slack/{HOOK_SECRET}"),
            "GDT_DISCORD": rx.url(f"/discord/{HOOK_SECRET}"),
            "GDT_HOOK": rx.url(f"/hook/{HOOK_SECRET}"),
        }
        g = guardian(
            env=env,
            watch={"label": WATCH, "interval": "2s"},
            restart={"dry_run": True},
            storm=NO_STORM_BREAKER,
            notify={
                "slack_webhook_url_env": "GDT_SLACK",
                "discord_webhook_url_env": "GDT_DISCORD",
                "webhook_url_env": "GDT_HOOK",
                "group_wait": "6s",
            },
        )
        (shared / "sick").touch()
        db = g.store_path
        wait_until(
            lambda: len(rows(db, "SELECT * FROM deliveries WHERE state='delivered'")) == 60,
            40,
            message="twenty notifications delivered to three channels",
        )
        assert g.stop() == 0
        by_channel = {
            key: [r for r in rx.requests if r.path.startswith(f"/{key}/")]
            for key in ("slack", "discord", "hook")
        }
        for key, requests in by_channel.items():
            assert len(requests) == 1, key
            body = requests[0].body.decode()
            assert all(name in body for name in names), key
        assert by_channel["slack"][0].json["text"].startswith("20 Guardian events")
        assert len(by_channel["hook"][0].json["notifications"]) == 20
    no_secrets(g, HOOK_SECRET)


def slack_api() -> tuple[FakeReceiver, list[Recorded]]:
    api = FakeReceiver()
    counter = itertools.count(1)

    def respond(rec: Recorded) -> Answer:
        if rec.path.endswith("/chat.postMessage"):
            return Answer.json(
                {"ok": True, "channel": "C0GDT", "ts": f"1700000000.{next(counter):06d}"}
            )
        if rec.path.endswith("/chat.update"):
            return Answer.json({"ok": True, "channel": "C0GDT", "ts": rec.json["ts"]})
        return Answer.json({"ok": False, "error": "unknown_method"})

    api.respond = respond
    return api, api.requests


def test_bot_mode_keeps_one_thread_per_incident(containers, guardian):
    name = run(containers, "app", health_cmd="test ! -f /run/sick || (echo bot-marker; exit 1)")
    containers.wait_health(name, "healthy")
    api, calls = slack_api()
    try:
        g = guardian(
            env={"GDT_BOT_TOKEN": BOT_TOKEN},
            watch={"label": WATCH, "interval": "30s"},
            notify={
                "slack_bot_token_env": "GDT_BOT_TOKEN",
                "slack_bot_channel": "#ops",
                "slack_api_url": api.url("/api"),
                **FAST_RETRY,
            },
        )
        containers.make_unhealthy(name)
        wait_until(
            lambda: any(c.path.endswith("chat.update") for c in calls), 30, message="root update"
        )
        wait_until(lambda: len(calls) >= 4, 10, message="resolved reply")
        assert g.stop() == 0
    finally:
        api.stop()
    methods = [c.path.rsplit("/", 1)[1] for c in calls]
    assert methods == ["chat.postMessage", "chat.postMessage", "chat.update", "chat.postMessage"]
    root, attempt, update, resolved = (c.json for c in calls)
    assert "thread_ts" not in root and root["channel"] == "#ops"
    assert "Incident opened" in root["text"] and "bot-marker" in root["text"]
    assert attempt["thread_ts"] == "1700000000.000001" and "Restart attempt 1" in attempt["text"]
    assert update["ts"] == "1700000000.000001" and update["channel"] == "C0GDT"
    assert update["text"].startswith("Resolved")
    assert resolved["thread_ts"] == "1700000000.000001" and "Resolved" in resolved["text"]
    assert all(c.headers["authorization"] == f"Bearer {BOT_TOKEN}" for c in calls)
    no_secrets(g, BOT_TOKEN)
