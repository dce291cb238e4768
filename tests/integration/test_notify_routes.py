"""Named receivers and routes end to end: real containers, a real `guardian run`, three fake
receivers on 127.0.0.1. A container labelled guardian.notify=team-a is heard by team-a only; the
others by the default; every escalation by the pager as well."""

from __future__ import annotations

import requests

from tests.helpers import wait_until
from tests.integration.notify_helpers import WATCH, notifying, run
from tests.receiver import Answer, receiver

SECRET = "gdtSecretRoutes0123456789"
NO_STORM_BREAKER = {"threshold": "100%"}


def test_a_containers_incident_reaches_its_receiver_only_and_escalations_the_pager(
    containers, guardian
):
    labels = {WATCH: "true", "guardian.notify": "team-a"}
    db = containers.run("db", health_cmd="echo db-marker; false", labels=labels)
    web = run(containers, "web", health_cmd="echo web-marker; false")
    with receiver() as rx:
        env = {
            "GDT_TEAM_A": rx.url(f"/team-a/{SECRET}"),
            "GDT_TEAM_B": rx.url(f"/team-b/{SECRET}"),
            "GDT_PAGER": rx.url(f"/pager/{SECRET}"),
        }
        notify = {
            "group_wait": "0s",
            "pacing": "0s",
            "channels": [
                {"name": "team-a", "type": "slack", "url_env": "GDT_TEAM_A"},
                {"name": "team-b", "type": "slack", "url_env": "GDT_TEAM_B"},
                {"name": "pager", "type": "webhook", "url_env": "GDT_PAGER"},
            ],
            "routes": [{"receivers": ["pager"], "severity": ["critical"], "continue": True}],
            "default": ["team-b"],
        }

        def heard(name: str) -> list[str]:
            return [r.body.decode() for r in rx.answered() if r.path.startswith(f"/{name}/")]

        def paged() -> list[dict]:  # both give-ups may come in one request
            return [
                n
                for r in rx.answered()
                if r.path.startswith("/pager/")
                for n in r.json["notifications"]
            ]

        with notifying(guardian, notify, env, absent=(SECRET,)) as make:
            make(restart={"max_attempts": 1, "cooldown": "1s"}, storm=NO_STORM_BREAKER)
            wait_until(
                lambda: (
                    len(paged()) >= 2
                    and sum("Gave up" in b for b in heard("team-a")) == 1
                    and sum("Gave up" in b for b in heard("team-b")) == 1
                ),
                60,
                message="both give-ups told",
            )
    team_a, team_b = heard("team-a"), heard("team-b")
    assert team_a and all(db in b and web not in b for b in team_a)
    assert team_b and all(web in b and db not in b for b in team_b)
    kinds = {n["container"]: n["kind"] for n in paged()}
    assert kinds == {db: "gave_up", web: "gave_up"}  # the pager hears escalations only
    assert any("Incident opened" in b for b in team_a) and any(
        "Incident opened" in b for b in team_b
    )


def test_a_dead_lettering_receiver_is_reported_through_another(containers, guardian):
    name = run(containers, "app", health_cmd="false")
    with receiver() as rx:
        rx.respond = lambda rec: (
            Answer(404, "no_service") if rec.path.startswith("/slack/") else Answer(200)
        )
        env = {"GDT_SLACK": rx.url(f"/slack/{SECRET}"), "GDT_HOOK": rx.url(f"/hook/{SECRET}")}
        notify = {
            "group_wait": "0s",
            "channels": [
                {"name": "team", "type": "slack", "url_env": "GDT_SLACK"},
                {"name": "ops-hook", "type": "webhook", "url_env": "GDT_HOOK"},
            ],
        }

        def told() -> list[dict]:
            return [
                n
                for r in rx.answered()
                if r.path.startswith("/hook/")
                for n in r.json["notifications"]
            ]

        with notifying(guardian, notify, env, absent=(SECRET,)) as make:
            g = make(restart={"dry_run": True})
            wait_until(
                lambda: any(n["kind"] == "channel_failed" for n in told()), 30, message="told"
            )
            metrics = requests.get(g.http_url + "/metrics", timeout=5).text
    [failed] = [n for n in told() if n["kind"] == "channel_failed"]
    assert failed["channel"] == "team" and "404 no_service" in failed["detail"]
    assert any(n["kind"] == "opened" and n["container"] == name for n in told())
    assert 'guardian_notification_channel_up{channel="team"} 0.0' in metrics
    assert 'guardian_notification_channel_up{channel="ops-hook"} 1.0' in metrics
    slack = [r for r in rx.requests if r.path.startswith("/slack/")]
    assert len(slack) == 1  # refused once, not retried; never told of its own failure
