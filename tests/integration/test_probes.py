"""Guardian-run probes against real containers: busybox httpd (HTTP) and nc (TCP)."""

from __future__ import annotations

from tests.helpers import wait_until
from tests.integration.see_more import WATCH, actions, exec_in, incidents, watched

HTTPD = "mkdir -p /run/www && echo ok > /run/www/healthz && exec httpd -f -p 8080 -h /run/www"
# nc -l serves one connection, so loop; /run/sick (a tmpfs a restart empties) stops listening.
NC = "while :; do if [ -f /run/sick ]; then sleep 0.2; else nc -l -p 5432 </dev/null; fi; done"


def http_labels(**extra: str) -> dict[str, str]:
    return watched(
        **{
            "guardian.probe.http": "http://:8080/healthz",
            "guardian.probe.period": "1s",
            "guardian.probe.timeout": "1s",
            **extra,
        }
    )


def test_http_probe_failing_threshold_times_restarts_and_resolves(containers, guardian):
    name = containers.run("web", ["sh", "-c", HTTPD], enable=None, labels=http_labels())
    g = guardian(watch={"label": WATCH}, probe={"failure_threshold": 3})
    before = containers.started_at(name)
    wait_until(lambda: g.lines("sweep done") or g.lines("probe"), 10, message="first sweep")

    exec_in(containers, name, "rm", "/run/www/healthz")
    wait_until(lambda: containers.started_at(name) != before, 20, message="restart")
    failed = [line for line in g.lines('msg="probe failed"') if name in line]
    assert "failures=3" in failed[-1] and "answered 404" in failed[-1]

    db = g.store_path
    wait_until(
        lambda: incidents(db, name, "probe_failed")[0]["state"] == "resolved", 30, message="ok"
    )
    [incident] = incidents(db, name)
    assert "probe failed 3 times in a row" in incident["detail"]
    restarts = [a for a in actions(db, name) if a["kind"] == "restart"]
    assert [a["outcome"] for a in restarts] == ["succeeded"]
    assert g.stop() == 0


def test_fewer_failures_than_the_threshold_do_nothing(containers, guardian):
    name = containers.run("web", ["sh", "-c", HTTPD], enable=None, labels=http_labels())
    g = guardian(watch={"label": WATCH}, probe={"failure_threshold": 4})
    before = containers.started_at(name)
    mine = lambda needle: [line for line in g.lines(needle) if name in line]  # noqa: E731

    exec_in(containers, name, "rm", "/run/www/healthz")
    wait_until(lambda: any("failures=2" in line for line in mine('msg="probe failed"')), 15)
    exec_in(containers, name, "sh", "-c", "echo ok > /run/www/healthz")
    wait_until(lambda: mine("probe passed again below threshold"), 10, message="streak ended")

    assert incidents(g.store_path) == []
    assert containers.started_at(name) == before
    assert not any("failures=4" in line for line in mine('msg="probe failed"'))
    assert g.stop() == 0


def test_tcp_probe_opens_an_incident_and_success_threshold_resolves_it(containers, guardian):
    labels = watched(
        **{
            "guardian.probe.tcp": ":5432",
            "guardian.probe.period": "1s",
            "guardian.probe.failure_threshold": "2",
            "guardian.probe.success_threshold": "2",
        }
    )
    name = containers.run("db", ["sh", "-c", NC], enable=None, labels=labels)
    # Dry run: the incident must be resolved by the probe's successes, not by a restart.
    g = guardian(watch={"label": WATCH}, restart={"dry_run": True})
    db = g.store_path

    exec_in(containers, name, "touch", "/run/sick")
    wait_until(lambda: incidents(db, name, "probe_failed"), 20, message="incident")
    [incident] = incidents(db, name)
    assert incident["state"] == "active"
    assert "probe failed 2 times in a row: tcp://" in incident["detail"]
    assert [a["reason"] for a in actions(db, name)] == ["dry_run"]

    exec_in(containers, name, "rm", "/run/sick")
    wait_until(lambda: incidents(db, name)[0]["state"] == "resolved", 20, message="resolved")
    passing = [line for line in g.lines('msg="probe passing again"') if name in line]
    assert len(passing) == 1
    assert g.stop() == 0
