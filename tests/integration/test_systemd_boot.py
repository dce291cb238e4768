"""Guardian's unit started by a real systemd as PID 1 (issue 16), checked as an operator would:
with systemctl and journalctl.

One container boots systemd for the whole module; Guardian is installed in it by the
docs/deployment.md install lines from wheels built on the host, and heals this run's containers
on the host's engine through the mounted socket. A test that changes the unit's setup marks
it, and the `unit` fixture puts it back.
"""

from __future__ import annotations

import re
import subprocess
from collections.abc import Iterator

import docker
import pytest
import yaml

from tests.helpers import wait_until
from tests.integration.conftest import Containers
from tests.integration.systemd_host import (
    SCOPE_LABEL,
    SCOPE_VALUE,
    UNIT,
    SystemdHost,
    build_image,
    guardian_config,
    stage_checkout,
)

HEALTH = "test ! -f /run/sick"
STATUS = re.compile(r"^watching \d+ containers?, \d+ open incidents?$")
BAD_CONFIG = "restart:\n  cooldown: soon\n"


@pytest.fixture(scope="module")
def systemd_host(
    docker_api: docker.APIClient, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[SystemdHost]:
    """systemd booted in a container, Guardian installed and enabled as docs/deployment.md says."""
    image = build_image()
    checkout = tmp_path_factory.mktemp("checkout")
    lines = stage_checkout(checkout, guardian_config())
    host = SystemdHost.boot(image, "systemd")
    try:
        host.install(checkout, lines)
        host.wait_active()
        yield host
    finally:
        host.remove()


@pytest.fixture
def unit(systemd_host: SystemdHost) -> Iterator[SystemdHost]:
    """The running unit with the installed config; whatever a test changed is put back."""
    systemd_host.restore(guardian_config())
    yield systemd_host
    systemd_host.restore(guardian_config())


def in_scope(containers: Containers, short: str) -> str:
    """A busybox container the Guardian inside watches (scope label and opt-in)."""
    return containers.run(short, health_cmd=HEALTH, labels={SCOPE_LABEL: SCOPE_VALUE})


def test_is_active_with_the_engine_reachable(unit: SystemdHost) -> None:
    assert unit.systemctl("is-active", "guardian").stdout.strip() == "active"
    assert unit.systemctl("is-enabled", "guardian").stdout.strip() == "enabled"
    shown = unit.show("SubState", "Result", "NRestarts", "StatusText")
    assert shown["SubState"] == "running" and shown["Result"] == "success"
    assert shown["NRestarts"] == "0"
    assert "unreachable" not in shown["StatusText"]
    assert 'msg="docker engine reachable"' in unit.journal(pid=unit.main_pid())


def test_status_text_carries_guardians_status_line(
    unit: SystemdHost, containers: Containers
) -> None:
    assert STATUS.match(unit.show("StatusText")["StatusText"])
    in_scope(containers, "status")

    # STATUS follows the sweeps: the new container is counted.
    wait_until(
        lambda: unit.show("StatusText")["StatusText"].startswith("watching 1 container,"),
        15,
        0.2,
        "StatusText counts the new container",
    )


def test_journal_shows_guardians_log_lines(unit: SystemdHost) -> None:
    lines = unit.journal(pid=unit.main_pid()).splitlines()

    started = [line for line in lines if 'msg="guardian started"' in line]
    assert len(started) == 1, lines
    assert started[0].startswith("ts=") and "level=info" in started[0]
    assert any('msg="http server listening"' in line for line in lines)
    # The unit's hardening (MemoryDenyWriteExecute, SystemCallFilter) lets ctypes and inotify
    # make the store watch: a CLI write reaches the page at once, not after a sweep.
    assert not any("store not watched" in line for line in lines), lines


def test_serves_http_within_the_units_open_file_limit(unit: SystemdHost) -> None:
    pid = unit.main_pid()
    limits = unit.sh(f"cat /proc/{pid}/limits").stdout.splitlines()
    [files] = [line for line in limits if line.startswith("Max open files")]
    assert files.split()[3:5] == ["4096", "4096"]
    # The limit was readable under the unit's system call filter: the connection cap fits it.
    [listening] = [
        line for line in unit.journal(pid=pid).splitlines() if 'msg="http server listening"' in line
    ]
    assert "connections=256" in listening


def test_heals_an_unhealthy_container_through_the_unit(
    unit: SystemdHost, containers: Containers
) -> None:
    name = in_scope(containers, "sick")
    containers.wait_health(name, "healthy")
    before = containers.started_at(name)
    cursor = unit.journal_cursor()

    containers.make_unhealthy(name)

    wait_until(lambda: containers.started_at(name) != before, 30, 0.2, "restarted by Guardian")
    containers.wait_health(name, "healthy")
    journal = wait_until(
        lambda: [ln for ln in unit.journal(after=cursor).splitlines() if f"container={name}" in ln],
        10,
        0.2,
        "the restart in the journal",
    )
    assert any('msg="restarting container"' in line for line in journal), journal


def test_a_frozen_guardian_is_killed_by_the_watchdog_and_restarted(unit: SystemdHost) -> None:
    unit.drop_in("[Service]\nWatchdogSec=3s")
    unit.systemctl("restart", "guardian")
    unit.wait_active()
    before = unit.show("MainPID", "NRestarts")
    cursor = unit.journal_cursor()

    unit.sh(f"kill -STOP {before['MainPID']}")

    after = wait_until(
        lambda: (
            (s := unit.show("MainPID", "NRestarts", "ActiveState"))["ActiveState"] == "active"
            and s["MainPID"] not in ("0", before["MainPID"])
            and s
        ),
        30,
        0.2,
        "a new Guardian after the watchdog kill",
    )
    assert int(after["NRestarts"]) == int(before["NRestarts"]) + 1
    assert "Watchdog timeout" in unit.journal(after=cursor)  # systemd's own line on the unit


def test_stop_is_clean(unit: SystemdHost) -> None:
    pid = unit.main_pid()
    unit.changed = True

    result = unit.systemctl("stop", "guardian")

    assert result.returncode == 0, result.stderr
    shown = unit.show("ActiveState", "Result", "ExecMainStatus")
    assert shown == {"ActiveState": "inactive", "Result": "success", "ExecMainStatus": "0"}
    assert unit.systemctl("is-failed", "guardian").stdout.strip() == "inactive"
    assert 'msg="guardian stopped"' in unit.journal(pid=pid)


def test_a_bad_config_ends_failed_without_restarting(unit: SystemdHost) -> None:
    cursor = unit.journal_cursor()
    unit.write_config(BAD_CONFIG)

    result = unit.systemctl("restart", "guardian")

    assert result.returncode != 0
    shown = unit.show("ActiveState", "SubState", "Result", "ExecMainStatus", "NRestarts")
    assert shown == {
        "ActiveState": "failed",
        "SubState": "failed",
        "Result": "exit-code",
        "ExecMainStatus": "2",
        "NRestarts": "0",
    }
    assert "restart.cooldown" in unit.journal(after=cursor)


def test_is_active_without_the_engine_and_heals_once_it_is_back(unit: SystemdHost) -> None:
    unit.remove_socket()
    invocation = unit.show("InvocationID")["InvocationID"]
    unit.systemctl("restart", "--no-block", "guardian")

    # A new invocation that is no longer starting: READY=1 came, or the start failed.
    wait_until(
        lambda: (
            (s := unit.show("InvocationID", "ActiveState"))["InvocationID"] != invocation
            and s["ActiveState"] not in ("activating", "deactivating")
        ),
        15,
        0.2,
        "the start to complete",
    )
    assert unit.state() == "active"
    status = wait_until(
        lambda: "unreachable" in (t := unit.show("StatusText")["StatusText"]) and t,
        10,
        0.2,
        "STATUS saying the engine is unreachable",
    )
    assert "/run/docker.sock" in status, status
    assert unit.show("NRestarts")["NRestarts"] == "0"

    unit.restore_socket()
    wait_until(lambda: STATUS.match(unit.show("StatusText")["StatusText"]), 20, 0.2, "engine back")


def test_a_missing_docker_group_ends_failed_without_restarting(unit: SystemdHost) -> None:
    unit.changed = True
    unit.sh("groupdel docker")
    cursor = unit.journal_cursor()

    unit.systemctl("restart", "--no-block", "guardian")

    shown = wait_until(
        lambda: (
            (s := unit.show("ActiveState", "SubState", "NRestarts"))
            and (
                s["ActiveState"] == "failed"
                or s["SubState"] == "auto-restart"
                or s["NRestarts"] != "0"
            )
            and s
        ),
        20,
        0.2,
        "the start to fail",
    )
    assert shown == {"ActiveState": "failed", "SubState": "failed", "NRestarts": "0"}
    # systemd's own line: no Guardian process can start without the group.
    assert "status=216/GROUP" in unit.journal(after=cursor)


def test_a_docker_group_with_the_wrong_gid_is_named_in_status_and_journal(
    unit: SystemdHost,
) -> None:
    unit.changed = True
    unit.sh("groupmod --gid 4242 docker")
    cursor = unit.journal_cursor()

    unit.systemctl("restart", "guardian")

    assert unit.state() == "active"  # serving; the socket's group is the operator's to fix
    status = wait_until(
        lambda: "permission denied" in (t := unit.show("StatusText")["StatusText"]) and t,
        10,
        0.2,
        "STATUS naming the refused socket",
    )
    gid = unit.sh("stat -L -c %g /var/run/docker.sock").stdout.strip()
    for needle in ("/var/run/docker.sock", f"gid {gid}", "mode 0660", "guardian runs as"):
        assert needle in status, (needle, status)
    [line] = [ln for ln in unit.journal(after=cursor).splitlines() if "permission denied" in ln]
    assert 'msg="docker engine unreachable; will retry"' in line and "docker (gid 4242)" in line


def test_a_store_that_cannot_be_opened_ends_failed_without_restarting(unit: SystemdHost) -> None:
    config = guardian_config()
    config["store"] = {"path": "/etc/guardian/guardian.db"}  # read-only under ProtectSystem
    cursor = unit.journal_cursor()
    unit.write_config(yaml.safe_dump(config))

    result = unit.systemctl("restart", "guardian")

    assert result.returncode != 0
    shown = unit.show("ActiveState", "Result", "ExecMainStatus", "NRestarts")
    assert shown == {
        "ActiveState": "failed",
        "Result": "exit-code",
        "ExecMainStatus": "3",
        "NRestarts": "0",
    }
    [line] = [ln for ln in unit.journal(after=cursor).splitlines() if "cannot start" in ln]
    assert "/etc/guardian/guardian.db" in line


def test_reload_applies_a_changed_config_in_the_same_process(unit: SystemdHost) -> None:
    before = unit.show("MainPID", "NRestarts")
    cursor = unit.journal_cursor()
    config = guardian_config()
    config["log"]["level"] = "debug"
    unit.write_config(yaml.safe_dump(config))

    result = unit.systemctl("reload", "guardian")

    assert result.returncode == 0, result.stderr
    wait_until(
        lambda: "level=debug" in unit.journal(after=cursor, pid=int(before["MainPID"])),
        10,
        0.2,
        "debug lines after the reload",
    )
    assert unit.show("MainPID", "NRestarts") == before
    assert unit.state() == "active"


def test_reload_refuses_a_broken_config_and_keeps_the_old_one(unit: SystemdHost) -> None:
    before = unit.show("MainPID", "NRestarts")
    cursor = unit.journal_cursor()
    unit.write_config(BAD_CONFIG)

    result = unit.systemctl("reload", "guardian")

    assert result.returncode != 0  # `systemctl reload` says it failed
    wait_until(
        lambda: "restart.cooldown" in unit.journal(after=cursor),
        5,
        0.2,
        "a journal line refusing the config",
    )
    assert unit.show("MainPID", "NRestarts") == before
    assert unit.state() == "active"
    assert STATUS.match(unit.show("StatusText")["StatusText"])


def test_reload_names_the_changed_keys_that_need_a_restart(unit: SystemdHost) -> None:
    before = unit.show("MainPID", "NRestarts")
    cursor = unit.journal_cursor()
    config = guardian_config()
    config["http"] = {"listen": "127.0.0.1:9399"}
    config["restart"]["cooldown"] = "3s"
    unit.write_config(yaml.safe_dump(config))

    result = unit.systemctl("reload", "guardian")

    assert result.returncode == 0, result.stderr
    line = wait_until(
        lambda: [ln for ln in unit.journal(after=cursor).splitlines() if "config reloaded" in ln],
        10,
        0.2,
        "the reload's journal line",
    )[0]
    assert "applied=restart.cooldown" in line and "restart_needed=http.listen" in line, line
    assert unit.show("MainPID", "NRestarts") == before
    # The old listener still serves: http.listen waits for a restart.
    unit.sh("python3 -c 'import urllib.request as u; u.urlopen(\"http://127.0.0.1:9321/healthz\")'")


# Binds every name of the unit's engine lock that a squatter can know (the bare one, and
# names under it) as `nobody`, outside the docker group; holds them until stdin closes.
SQUAT = """
import os, socket, sys
from guardian.adapters.host_lock import engine_key, lock_address
prefix = lock_address(engine_key("unix:///var/run/docker.sock"), sys.argv[1])
os.setgroups([]); os.setgid(65534); os.setuid(65534)
held = []
for name in [prefix, *(f"{prefix}-{n}-{n:016x}" for n in range(1, 51))]:
    s = socket.socket(socket.AF_UNIX); s.bind(name); s.listen(1); held.append(s)
print("held", len(held), flush=True)
sys.stdin.read()
"""


def test_a_second_guardian_beside_the_unit_is_refused_naming_the_units_process(
    unit: SystemdHost,
) -> None:
    """Whoever started it (root, from a shell), a Guardian with a store of its own finds the
    unit's lock held by a process that reaches the engine (its dynamic user is in `docker`)."""
    pid = unit.main_pid()
    second = unit.sh(
        "GUARDIAN_STORE_PATH=/root/second.db timeout 60 /opt/guardian/bin/guardian run "
        "--config /etc/guardian/config.yaml",
        check=False,
    )
    assert second.returncode == 1, second.stderr
    scope = f"{SCOPE_LABEL}={SCOPE_VALUE}"
    last = second.stderr.strip().splitlines()[-1]
    assert last.startswith(
        f"guardian: another Guardian watches this engine (watch.scope {scope}): pid {pid} ("
    ), second.stderr
    assert unit.state() == "active" and unit.main_pid() == pid


def test_the_unit_restarts_and_heals_while_nobody_holds_every_name_of_its_lock(
    unit: SystemdHost, containers: Containers
) -> None:
    squatter = subprocess.Popen(
        ["docker", "exec", "-i", unit.name, "/opt/guardian/bin/python", "-I", "-c", SQUAT,
         f"{SCOPE_LABEL}={SCOPE_VALUE}"],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
    )  # fmt: skip
    try:
        assert squatter.stdout is not None and squatter.stdout.readline().strip() == "held 51"
        cursor = unit.journal_cursor()
        assert unit.systemctl("restart", UNIT).returncode == 0
        unit.wait_active()
        warned = wait_until(
            lambda: [
                ln for ln in unit.journal(after=cursor).splitlines() if "names of the engine" in ln
            ],
            20,
            0.2,
            "the squatter named in the journal",
        )
        assert "uid 65534" in warned[0], warned
        name = in_scope(containers, "squatted")
        containers.wait_health(name, "healthy")
        before = containers.started_at(name)
        containers.make_unhealthy(name)
        wait_until(lambda: containers.started_at(name) != before, 30, 0.2, "restarted")
    finally:
        squatter.kill()
        squatter.wait(10)
