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
# The routing tree docs/monitoring.md shows: one tree for Guardian's alerts and the rule alerts.
CONFIG = """
route:
  receiver: chat
  group_by: [alertname, instance]
  routes:
    - matchers: ['severity="critical"']
      receiver: pager
    - matchers: ['severity="warning"']
      receiver: chat
inhibit_rules:
  - source_matchers: ['alertname="GuardianIncidentEscalated"']
    target_matchers: ['alertname="GuardianIncident"']
    equal: [instance, container, incident_type]
receivers:
  - name: chat
  - name: pager
"""


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


def guardian_labels(container: str, alertname: str, severity: str) -> dict[str, str]:
    """The labels of Guardian's alert about an unhealthy container on this host."""
    return {
        "alertname": alertname,
        "severity": severity,
        "instance": socket.gethostname(),
        "container": container,
        "incident_type": "unhealthy",
    }


def our_alerts(url: str, container: str) -> list[dict]:
    alerts = requests.get(f"{url}/api/v2/alerts", timeout=5).json()
    return [a for a in alerts if a["labels"].get("container") == container]


def watched_app(containers, guardian, url: str, health_cmd: str, **restart: object):
    """A healthy watched container and a Guardian that alerts `url` at once, re-sent every 1s."""
    name = run(containers, "app", health_cmd=health_cmd)
    containers.wait_health(name, "healthy")
    g = guardian(
        watch={"label": WATCH, "interval": "2s"},
        restart=restart,
        notify={"alertmanager_url": url, "alertmanager_resend_interval": "1s", "group_wait": "0s"},
    )
    return name, g


def test_an_incident_fires_an_alert_that_is_kept_alive_and_resolved(
    containers, guardian, alertmanager
):
    # Dry run: the incident stays open until the test heals it.
    name, g = watched_app(containers, guardian, alertmanager, "test ! -f /run/sick", dry_run=True)
    containers.make_unhealthy(name)
    [alert] = wait_until(lambda: our_alerts(alertmanager, name), 20, message="firing alert")
    assert alert["status"]["state"] == "active"
    assert alert["labels"] == guardian_labels(name, "GuardianIncident", "warning")
    assert [r["name"] for r in alert["receivers"]] == ["chat"]
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


def test_giving_up_escalates_the_alert_to_critical_and_ends_the_warning(
    containers, guardian, alertmanager
):
    # /tmp survives a restart: restarts do not heal it, Guardian gives up after two attempts.
    name, g = watched_app(
        containers, guardian, alertmanager, "test ! -f /tmp/sick", max_attempts=2, cooldown="10s"
    )
    api = containers.api
    api.exec_start(api.exec_create(name, ["touch", "/tmp/sick"]))
    [warning] = wait_until(lambda: our_alerts(alertmanager, name), 20, message="warning alert")
    assert warning["labels"] == guardian_labels(name, "GuardianIncident", "warning")
    escalated = lambda: [  # noqa: E731
        a for a in our_alerts(alertmanager, name) if a["labels"]["severity"] == "critical"
    ]
    [critical] = wait_until(escalated, 60, message="escalated alert")
    assert critical["labels"] == guardian_labels(name, "GuardianIncidentEscalated", "critical")
    assert [r["name"] for r in critical["receivers"]] == ["pager"]
    assert critical["annotations"]["state"] == "in_progress (escalated)"
    assert critical["annotations"]["summary"].startswith("Gave up, needs a human")
    # The warning ended: one alert per incident, the escalated one.
    wait_until(lambda: our_alerts(alertmanager, name) == escalated(), 10, message="warning ended")

    api.exec_start(api.exec_create(name, ["rm", "-f", "/tmp/sick"]))
    wait_until(lambda: not our_alerts(alertmanager, name), 30, message="alert resolved")
    assert g.stop() == 0
