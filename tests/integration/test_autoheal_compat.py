"""A Guardian started with docker-autoheal's variables only (issue 31): containers labelled
`autoheal=true` are healed, `autoheal=FALSE` ones are left alone in `all` mode, the webhook gets
the story under WEBHOOK_JSON_KEY, and the start-up log maps every variable."""

from __future__ import annotations

from pathlib import Path

from tests.helpers import wait_until
from tests.integration.conftest import RUN_ID, Containers, EventRecorder, GuardianProcess
from tests.receiver import receiver

HEALTH = "test ! -f /run/sick"


def autoheal_guardian(tmp: Path, env: dict[str, str]) -> GuardianProcess:
    """No Guardian key but what the shared engine and the test need (its own store, port and
    scope: never another run's containers; debug lines to count sweeps)."""
    tmp.mkdir(parents=True, exist_ok=True)
    g = GuardianProcess(
        tmp,
        {
            "watch": {"scope": f"guardian.test.run={RUN_ID}"},
            "store": {"path": str(tmp / "guardian.db")},
            "http": {"listen": "127.0.0.1:0"},
            "log": {"level": "debug"},  # the test counts sweeps
        },
        env,
    )
    return g


def test_autoheals_variables_and_labels_alone_heal_notify_and_log_each_mapping(
    containers: Containers, engine_events: EventRecorder, tmp_path: Path
) -> None:
    healed = containers.run("healed", health_cmd=HEALTH, enable=None, labels={"autoheal": "true"})
    plain = containers.run("plain", health_cmd=HEALTH, enable=None)
    for name in (healed, plain):
        containers.wait_health(name, "healthy")
    with receiver() as hook:
        env = {
            "AUTOHEAL_CONTAINER_LABEL": "autoheal",
            "AUTOHEAL_INTERVAL": "5",
            "AUTOHEAL_DEFAULT_STOP_TIMEOUT": "1",
            "WEBHOOK_URL": hook.url("/autoheal"),
            "WEBHOOK_JSON_KEY": "text",
        }
        g = autoheal_guardian(tmp_path / "label", env).start()
        try:
            log = g.log()
            for name in (*env, "AUTOHEAL_CONTAINER_LABEL"):
                assert f"compat autoheal: {name}=" in log, name
            assert "AUTOHEAL_INTERVAL=5 -> watch.interval=5s" in log
            assert "/autoheal" not in log  # the webhook URL is never logged
            for name in (healed, plain):
                containers.make_unhealthy(name)
            wait_until(lambda: engine_events.count(healed, "restart") >= 1, 30, message="healed")
            containers.wait_health(healed, "healthy")
            wait_until(
                lambda: any("Resolved" in r.json.get("text", "") for r in hook.answered()),
                30,
                message="the story under WEBHOOK_JSON_KEY",
            )
            assert all(set(r.json) == {"text"} for r in hook.answered())
            assert engine_events.count(plain, "restart") == 0  # not labelled autoheal=true
        finally:
            g.stop()


def test_in_all_mode_autoheal_false_in_any_case_is_left_alone(
    containers: Containers, engine_events: EventRecorder, tmp_path: Path
) -> None:
    kept = containers.run("kept", health_cmd="false", enable=None, labels={"autoheal": "FALSE"})
    other = containers.run("other", health_cmd=HEALTH, enable=None)
    containers.wait_health(other, "healthy")
    containers.wait_health(kept, "unhealthy")
    env = {"AUTOHEAL_CONTAINER_LABEL": "all", "AUTOHEAL_INTERVAL": "1"}
    g = autoheal_guardian(tmp_path / "all", env).start()
    try:
        containers.make_unhealthy(other)
        wait_until(lambda: engine_events.count(other, "restart") >= 1, 30, message="healed")
        swept = len(g.lines('msg="sweep done"'))
        wait_until(lambda: len(g.lines('msg="sweep done"')) >= swept + 2, 20, message="sweeps")
        assert engine_events.count(kept, "restart") == 0
    finally:
        g.stop()
