"""Alertmanager API v2 end to end: Debian's prometheus-alertmanager, started by the test."""

from __future__ import annotations

import shutil
import socket
import subprocess
from collections.abc import Iterator

import pytest
import requests

from tests.helpers import wait_until
from tests.integration.notify_helpers import WATCH, run
from tests.receiver import free_port

BINARY = "prometheus-alertmanager"
CONFIG = 'route:\n  receiver: "null"\nreceivers:\n  - name: "null"\n'


@pytest.fixture
def alertmanager(tmp_path) -> Iterator[str]:
    binary = shutil.which(BINARY) or f"/usr/bin/{BINARY}"
    if not shutil.which(binary):
        pytest.fail(f"{BINARY} is required (scripts/test-packages.txt installs it)")
    (tmp_path / "am.yml").write_text(CONFIG)
    port = free_port()
    log = open(tmp_path / "alertmanager.log", "wb")  # noqa: SIM115 - closed below
    proc = subprocess.Popen(
        [
            binary,
            f"--config.file={tmp_path / 'am.yml'}",
            f"--storage.path={tmp_path / 'am-data'}",
            f"--web.listen-address=127.0.0.1:{port}",
            "--cluster.listen-address=",
        ],
        stdout=log,
        stderr=subprocess.STDOUT,
    )
    url = f"http://127.0.0.1:{port}"

    def ready() -> bool:
        try:
            return requests.get(f"{url}/-/ready", timeout=1).status_code == 200
        except requests.RequestException:
            return False

    try:
        wait_until(ready, 20, message="alertmanager ready")
        yield url
    finally:
        proc.terminate()
        proc.wait(10)
        log.close()


def our_alerts(url: str, container: str) -> list[dict]:
    alerts = requests.get(f"{url}/api/v2/alerts", timeout=5).json()
    return [a for a in alerts if a["labels"].get("container") == container]


def test_an_incident_fires_an_alert_that_is_kept_alive_and_resolved(
    containers, guardian, alertmanager
):
    name = run(containers, "app", health_cmd="test ! -f /run/sick")
    containers.wait_health(name, "healthy")
    g = guardian(
        watch={"label": WATCH, "interval": "2s"},
        restart={"dry_run": True},  # the incident stays open until the test heals it
        notify={
            "alertmanager_url": alertmanager,
            "alertmanager_resend_interval": "1s",
            "group_wait": "0s",
        },
    )
    containers.make_unhealthy(name)
    [alert] = wait_until(lambda: our_alerts(alertmanager, name), 20, message="firing alert")
    assert alert["status"]["state"] == "active"
    assert alert["labels"] == {
        "alertname": "GuardianIncident",
        "host": socket.gethostname(),
        "container": name,
        "incident_type": "unhealthy",
    }
    assert "Incident opened" in alert["annotations"]["summary"]
    # Re-sent with a fresh endsAt in the future, so it expires by itself if Guardian dies.
    wait_until(
        lambda: our_alerts(alertmanager, name)[0]["endsAt"] != alert["endsAt"],
        10,
        message="alert re-sent with a later endsAt",
    )

    api = containers.api
    api.exec_start(api.exec_create(name, ["rm", "-f", "/run/sick"]))
    wait_until(lambda: not our_alerts(alertmanager, name), 20, message="alert resolved")
    assert g.stop() == 0
    assert g.lines("notification delivered")
