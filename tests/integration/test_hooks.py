"""remediation.hooks end to end: real hook processes run by a real `guardian run` after restarts
of real containers; hanging, hostile and interrupted hooks."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from tests.helpers import wait_until
from tests.integration.conftest import REPO, SECRET_MARKER
from tests.integration.hook_helpers import group_gone, live_members, read_pid, script
from tests.integration.see_more import HEALTH, rows


def hook_rows(db: Path, container: str) -> list[dict[str, Any]]:
    sql = "SELECT * FROM actions WHERE kind='hook' AND container=? ORDER BY id"
    return rows(db, sql, container)


def ended(db: Path, container: str) -> dict[str, Any] | None:
    done = [r for r in hook_rows(db, container) if r["outcome"] is not None]
    return done[0] if done else None


def cli(g: Any, *args: str) -> str:
    result = subprocess.run(
        [sys.executable, "-m", "guardian.entrypoints.cli", *args, "--config", str(g.config_path)],
        capture_output=True,
        text=True,
        timeout=60,
        cwd=REPO,
    )
    assert result.returncode == 0 and "Traceback" not in result.stderr, result.stderr
    return result.stdout


def test_a_hanging_hook_never_delays_another_restart_and_is_killed_at_its_timeout(
    containers, guardian, engine_events, tmp_path
):
    marks = tmp_path / "marks"
    marks.mkdir()
    hang = script(
        tmp_path,
        "hang.sh",
        f'echo $$ > "{marks}/$GUARDIAN_CONTAINER.pid"\n'
        f'sleep 600 &\necho $! > "{marks}/$GUARDIAN_CONTAINER.child"\nsleep 600\n',
    )
    a = containers.run("a", health_cmd=HEALTH)
    b = containers.run("b", health_cmd=HEALTH)
    containers.wait_health(a, "healthy")
    containers.wait_health(b, "healthy")
    g = guardian(
        remediation={
            "hooks": [{"name": "hang", "argv": [hang], "after": ["succeeded"], "timeout": "12s"}],
            "hooks_max_concurrent": 1,  # the one slot is the hanging hook's
        }
    )
    containers.make_unhealthy(a)
    pgid = read_pid(marks / f"{a}.pid")
    child = read_pid(marks / f"{a}.child")
    hook_started = time.monotonic()
    assert live_members(pgid), "the hook runs"
    # b falls ill while a's hook hangs (12 s leave the engine's health check time to tell).

    before = containers.started_at(b)
    sick_at = containers.make_unhealthy(b)
    wait_until(lambda: containers.started_at(b) != before, 15, 0.05, "b restarted")
    assert ended(g.store_path, a) is None, "b's restart came after the hook's end"
    events = engine_events.of(b)
    unhealthy = next(t for e, t in events if e.startswith("health_status") and t >= sick_at)
    restart = next(t for e, t in events if e in ("kill", "restart") and t >= unhealthy)
    assert restart - unhealthy < 2.0

    row = wait_until(lambda: ended(g.store_path, a), 20, 0.05, "the hook's end")
    took = time.monotonic() - hook_started
    assert row["outcome"] == "timed_out" and 11.5 <= took < 15, took
    assert row["detail"].startswith("killed at its timeout (12s) with its process group")
    assert group_gone(pgid) and child not in live_members(pgid)
    assert not Path(f"/proc/{child}").exists() or "Z" in Path(f"/proc/{child}/stat").read_text()

    [incident] = json.loads(cli(g, "incidents", "list", "--container", a, "--json"))["incidents"]
    timeline = json.loads(cli(g, "incidents", "show", str(incident["id"]), "--json"))["timeline"]
    hooks = [e for e in timeline if e["event"].startswith("hook")]
    assert [e["event"] for e in hooks] == ["hook: timed_out"]
    assert hooks[0]["reason"] == "hang after restart succeeded"
    listed = json.loads(cli(g, "actions", "--container", a, "--json"))["actions"]
    assert [x["outcome"] for x in listed if x["kind"] == "hook"] == ["timed_out"]
    assert g.stop() == 0


def test_a_hostile_hooks_output_is_bounded_stripped_and_redacted_and_it_gets_no_secret(
    containers, guardian, tmp_path
):
    webhook = f"http://127.0.0.1:9/{SECRET_MARKER}-hook-webhook-path"
    token = f"{SECRET_MARKER}-api-token-4242-0123456789abcdef"
    envfile = tmp_path / "hook-env.txt"
    hostile = script(
        tmp_path,
        "hostile.sh",
        f"printf '\\033[2J\\033]0;owned\\007\\033[31mred\\033[0m {webhook} {token}\\n'\n"
        f'env > "{envfile}"\n'
        "head -c 10000000 /dev/zero | tr '\\0' x\n"
        "exit 3\n",
    )
    name = containers.run("app", health_cmd=HEALTH)
    containers.wait_health(name, "healthy")
    g = guardian(
        env={"HOOK_TEST_WEBHOOK": webhook, "GUARDIAN_API_TOKEN": token},
        notify={"webhook_url_env": "HOOK_TEST_WEBHOOK"},
        remediation={"hooks": [{"argv": [hostile], "after": ["succeeded"]}]},
    )
    containers.make_unhealthy(name)
    row = wait_until(lambda: ended(g.store_path, name), 40, 0.1, "the hook's end")
    detail = row["detail"]
    assert row["outcome"] == "failed" and detail.startswith("exit 3 after")
    assert "output cut to its first 4096 of" in detail and len(detail) < 4400
    assert SECRET_MARKER not in detail and "\x1b" not in detail and "owned" not in detail
    assert "red" in detail

    hook_env = dict(line.split("=", 1) for line in envfile.read_text().splitlines() if "=" in line)
    assert hook_env["GUARDIAN_CONTAINER"] == name and hook_env["GUARDIAN_OUTCOME"] == "succeeded"
    assert hook_env["GUARDIAN_ACTION"] == "restart" and len(hook_env["GUARDIAN_CONTAINER_ID"]) == 64
    assert hook_env["GUARDIAN_INCIDENT"].isdigit()
    assert SECRET_MARKER not in envfile.read_text()
    assert not {"HOOK_TEST_WEBHOOK", "GUARDIAN_API_TOKEN", "HOME", "USER"} & set(hook_env)
    # sh adds PWD, SHLVL and _ of its own: nothing else came from Guardian.
    assert set(hook_env) - {"PWD", "SHLVL", "_"} == {
        "PATH",
        "LANG",
        "GUARDIAN_CONTAINER",
        "GUARDIAN_CONTAINER_ID",
        "GUARDIAN_ACTION",
        "GUARDIAN_OUTCOME",
        "GUARDIAN_INCIDENT",
    }
    shown = cli(g, "incidents", "show", hook_env["GUARDIAN_INCIDENT"])
    assert "hook: failed" in shown and SECRET_MARKER not in shown
    assert g.stop() == 0
    assert SECRET_MARKER not in g.full_log()


def test_sigterm_while_a_hook_hangs_stops_guardian_at_once_and_kills_the_hook(
    containers, guardian, tmp_path
):
    pidfile = tmp_path / "hook.pid"
    hang = script(tmp_path, "hang.sh", f'echo $$ > "{pidfile}"\nsleep 600\n')
    name = containers.run("app", health_cmd=HEALTH)
    containers.wait_health(name, "healthy")
    g = guardian(remediation={"hooks": [{"argv": [hang], "timeout": "10m"}]})
    containers.make_unhealthy(name)
    pgid = read_pid(pidfile)
    assert live_members(pgid)

    started = time.monotonic()
    assert g.stop() == 0
    assert time.monotonic() - started < 5
    assert group_gone(pgid)
    [row] = hook_rows(g.store_path, name)
    assert row["outcome"] == "interrupted"
    assert "Guardian stopped" in row["detail"]
