"""The storm breaker and the engine_unreachable incident, over fakes and a fake clock."""

from __future__ import annotations

import logging

from guardian.adapters.sqlite.outbox import SqliteOutbox
from guardian.core import incidents
from guardian.core.model import HOST_SUBJECT, IncidentState, ProblemType
from guardian.core.outbound.delivery import Next, RowState
from guardian.core.storm import StormSettings, counts, storm_size
from tests.app import make_app


def six_with_five_unhealthy(loop):
    for i in range(6):
        loop.engine.add(f"c{i}", health="unhealthy" if i < 5 else "healthy")


def storm(loop):
    return loop.store.current_incident(loop.host, HOST_SUBJECT, ProblemType.STORM)


def notifications(caplog):
    return [r for r in caplog.records if r.getMessage() == "notification"]


def outbox(loop):
    return [
        (r["incident_id"], r["kind"])
        for r in loop.store.db.query("SELECT incident_id, kind FROM outbox ORDER BY id")
    ]


def test_storm_size_is_more_than_threshold_and_at_least_min():
    s = StormSettings(threshold=50, min_containers=3)
    assert [storm_size(n, s) for n in (1, 4, 6, 7, 10)] == [3, 3, 4, 4, 6]
    # 100% can never be exceeded: the breaker is off.
    assert storm_size(6, StormSettings(threshold=100)) == 7


def test_five_of_six_unhealthy_open_one_host_incident_and_hold_restarts(tmp_path, caplog):
    caplog.set_level(logging.INFO)
    loop = make_app(tmp_path, restart={"cooldown": "60s"})
    six_with_five_unhealthy(loop)
    for _ in range(3):
        loop.healer.sweep()
        loop.clock.advance(10)
    incident = storm(loop)
    assert incident is not None and incident.state is IncidentState.ACTIVE
    assert incident.detail.startswith("5 of 6 watched containers unhealthy within 60s")
    assert loop.restarted() == []
    held = [a for a in loop.actions() if a.kind == "decision"]
    assert sorted(a.container for a in held) == ["c0", "c1", "c2", "c3", "c4"]
    assert {a.reason for a in held} == {"storm"}
    assert len(notifications(caplog)) == 1
    queued = outbox(loop)
    assert queued == [(incident.id, "opened")]


def test_storm_resolves_when_the_host_recovers_and_restarts_resume(tmp_path):
    loop = make_app(tmp_path, restart={"cooldown": "60s"})
    six_with_five_unhealthy(loop)
    loop.healer.sweep()
    for i in range(4):
        loop.engine.set(f"c{i}", health="healthy")
    loop.clock.advance(10)
    loop.healer.sweep()
    incident = loop.store.get_incident(storm(loop).id)
    assert incident.state is IncidentState.RESOLVED
    assert incident.resolved_by == "guardian"
    loop.clock.advance(10)
    loop.healer.sweep()
    assert loop.restarted() == ["c4"]


def test_an_acknowledged_storm_lets_restarts_through(tmp_path):
    loop = make_app(tmp_path, restart={"cooldown": "60s"})
    six_with_five_unhealthy(loop)
    loop.healer.sweep()
    acked, t = incidents.transition(
        storm(loop), IncidentState.ACKNOWLEDGED, "alice", "NFS server down", loop.clock.now()
    )
    loop.store.save_incident(incidents.IncidentChange(acked, (t,)))
    loop.clock.advance(1)
    loop.healer.sweep()
    assert sorted(loop.restarted()) == ["c0", "c1", "c2", "c3", "c4"]


def test_two_of_six_unhealthy_is_no_storm(tmp_path):
    loop = make_app(tmp_path, restart={"cooldown": "60s"})
    for i in range(6):
        loop.engine.add(f"c{i}", health="unhealthy" if i < 2 else "healthy")
    loop.healer.sweep()
    assert storm(loop) is None
    assert sorted(loop.restarted()) == ["c0", "c1"]


def test_engine_unreachable_longer_than_timeout_is_a_host_incident(tmp_path):
    loop = make_app(tmp_path, docker={"timeout": "30s"}, restart={"cooldown": "60s"})
    loop.engine.add("web")
    loop.healer.sweep()
    loop.engine.reachable = False
    kind = ProblemType.ENGINE_UNREACHABLE
    loop.healer.sweep()
    loop.clock.advance(20)
    loop.healer.sweep()
    assert loop.store.current_incident(loop.host, HOST_SUBJECT, kind) is None
    loop.clock.advance(11)
    loop.healer.sweep()
    incident = loop.store.current_incident(loop.host, HOST_SUBJECT, kind)
    assert incident is not None and incident.state is IncidentState.ACTIVE
    assert "unreachable since 2" in incident.detail
    assert "(31s when this incident opened)" in incident.detail
    loop.engine.reachable = True
    loop.clock.advance(5)
    loop.healer.sweep()
    incident = loop.store.get_incident(incident.id)
    assert incident.state is IncidentState.RESOLVED
    # A container sweep never closes a host incident as "container gone".
    assert incident.close_reason is None


def test_a_storm_speaks_for_the_incidents_nobody_was_told_of_yet(tmp_path):
    # c0 fails alone and its opening is delivered; c5 fails and its opening still waits in the
    # outbox (notify.group_wait); then four more fail at once: a storm, which withdraws c5's
    # waiting news. After the storm is acknowledged and everything restarted and healthy, the
    # receiver has heard the whole of c0's incident and of the storm's, nothing of the others.
    loop = make_app(tmp_path, restart={"cooldown": "60s", "max_concurrent": 6})
    outbox_ = SqliteOutbox(loop.store.db)
    for i in range(8):
        loop.engine.add(f"c{i}", health="unhealthy" if i == 0 else "healthy")
    loop.engine.after_restart_health = "unhealthy"  # until the shared cause is fixed
    loop.healer.sweep()
    [first] = loop.store.open_incidents(loop.host, "c0")
    outbox_.fan_out(["webhook"])
    sent = [q.pending.row_id for q in outbox_.pending("webhook")]
    outbox_.record(sent, Next(RowState.DELIVERED), "", loop.clock.now())
    loop.engine.set("c5", health="unhealthy")
    loop.clock.advance(10)
    loop.healer.sweep()
    outbox_.fan_out(["webhook"])
    assert {i for i, _ in outbox(loop)} == {
        first.id,
        loop.store.open_incidents(loop.host, "c5")[0].id,
    }
    for i in range(1, 5):
        loop.engine.set(f"c{i}", health="unhealthy")
    loop.clock.advance(10)
    loop.healer.sweep()
    held = storm(loop)
    acked, t = incidents.transition(
        held, IncidentState.ACKNOWLEDGED, "alice", "NFS server down", loop.clock.now()
    )
    loop.store.save_incident(incidents.IncidentChange(acked, (t,)))
    loop.engine.after_restart_health = "healthy"  # the cause is fixed: restarts heal
    for _ in range(8):
        loop.clock.advance(30)
        loop.healer.sweep()
        loop.healer.verifier.verify()

    assert set(loop.restarted()) == {f"c{i}" for i in range(6)}
    assert {i.state for i in loop.store.list_incidents(loop.host)} == {IncidentState.RESOLVED}
    queued = outbox(loop)
    assert {i for i, _ in queued} == {first.id, held.id}
    told = [k for i, k in queued if i == first.id]
    assert (told[0], told[-1]) == ("opened", "resolved")
    assert [k for i, k in queued if i == held.id] == ["opened", "resolved"]


def test_an_escalation_is_sent_even_for_an_incident_the_storm_spoke_for(tmp_path):
    loop = make_app(tmp_path, restart={"cooldown": "60s", "max_attempts": 1})
    six_with_five_unhealthy(loop)
    loop.healer.sweep()
    held = storm(loop)
    acked, t = incidents.transition(held, IncidentState.ACKNOWLEDGED, "alice", "", loop.clock.now())
    loop.store.save_incident(incidents.IncidentChange(acked, (t,)))
    loop.engine.after_restart_health = "unhealthy"  # restarts do not help: attempts run out
    for _ in range(4):
        loop.clock.advance(61)
        loop.healer.sweep()
        loop.healer.verifier.verify()
    kinds = [k for i, k in outbox(loop) if i != held.id]
    assert kinds and set(kinds) == {"gave_up"}


def test_quick_separate_failures_each_healed_before_the_next_are_no_storm(tmp_path):
    # Four containers fail one after another within a second each, driven by engine events;
    # each restart is verified healthy before the next fails. Never were three unhealthy at
    # once: no storm, and every one of them restarted at once, not at the next sweep.
    loop = make_app(tmp_path, restart={"cooldown": "0s"})
    names = [f"c{i}" for i in range(4)]
    for name in names:
        loop.engine.add(name, health="healthy")
    loop.healer.sweep()
    for name in names:
        snap = loop.engine.set(name, health="unhealthy")
        loop.healer.react(snap.id, loop.clock.now())
        loop.clock.advance(0.5)
        loop.healer.verifier.verify(only=name)  # the `healthy` event after the restart
        loop.clock.advance(0.5)
    assert storm(loop) is None
    assert loop.restarted() == names


def test_storm_count_selects_by_label_and_counts_everyone_when_empty():
    shop = {"com.docker.compose.project": "shop"}
    assert counts({}, StormSettings())
    assert counts(shop, StormSettings(count="com.docker.compose.project=shop"))
    assert not counts({}, StormSettings(count="com.docker.compose.project=shop"))
    assert counts(shop, StormSettings(count="com.docker.compose.project"))
    assert not counts(shop, StormSettings(count="com.docker.compose.project=blog"))
