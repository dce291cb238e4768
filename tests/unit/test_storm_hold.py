"""A storm ends without a person: the hold, the canary, the doubling, over a fake clock."""

from __future__ import annotations

import itertools
import json
from datetime import timedelta

from guardian.core.model import HOST_SUBJECT, IncidentState, ProblemType
from guardian.core.outbound.notifications import from_dict
from tests.app import make_app
from tests.fakes import T0


def storm(loop):
    return loop.store.current_incident(loop.host, HOST_SUBJECT, ProblemType.STORM)


def storm_news(loop, incident_id):
    """The kinds of the storm's queued notifications, in order."""
    rows = loop.store.db.query(
        "SELECT kind, payload FROM outbox WHERE incident_id=? ORDER BY id", (incident_id,)
    )
    return [r["kind"] for r in rows]


def queued_kinds(loop):
    return [
        (r["incident_id"], r["kind"])
        for r in loop.store.db.query("SELECT incident_id, kind FROM outbox ORDER BY id")
    ]


def eight_of_ten_unhealthy(loop):
    for i in range(10):
        loop.engine.add(f"c{i}", health="unhealthy" if i < 8 else "healthy")


def step(loop, seconds=30):
    """One sweep interval: the clock moves, the sweep runs, verifications are judged."""
    loop.clock.advance(seconds)
    loop.healer.sweep()
    loop.healer.verifier.verify()


def restart_offsets(loop):
    """When each restart was requested, in seconds after T0."""
    return [int((a.requested_at - T0).total_seconds()) for a in loop.restarts()]


def test_a_storm_holds_for_storm_hold_then_a_canary_heals_and_the_rest_follow_in_budget(tmp_path):
    loop = make_app(
        tmp_path,
        restart={"cooldown": "60s", "max_per_minute": 3},
        storm={"hold": "5m"},
    )
    eight_of_ten_unhealthy(loop)
    loop.healer.sweep()
    held = storm(loop)
    assert held is not None and held.state is IncidentState.ACTIVE
    for _ in range(9):  # 4.5 minutes of sweeps: nobody acts, nothing is restarted
        step(loop)
    assert loop.restarted() == []

    step(loop)  # 5 minutes: the hold is over
    [canary] = loop.restarts()
    assert canary.reason == "storm_canary"
    assert restart_offsets(loop) == [300]
    held = loop.store.get_incident(held.id)
    assert held.state is IncidentState.IN_PROGRESS
    [t] = [t for t in loop.store.transitions(held.id) if t.to_state is IncidentState.IN_PROGRESS]
    assert t.reason == (
        f"canary {canary.container} healthy after restart: restarts resume within the budget"
    )

    for _ in range(10):
        step(loop)
    assert sorted(loop.restarted()) == [f"c{i}" for i in range(8)]
    offsets = restart_offsets(loop)
    for start in offsets:  # never more than max_per_minute (3) in any minute
        assert sum(1 for o in offsets if start <= o < start + 60) <= 3
    assert max(offsets) <= 300 + 3 * 60  # the other seven within three minutes
    assert loop.store.get_incident(held.id).state is IncidentState.RESOLVED
    # Three messages tell the whole story; none per container.
    assert queued_kinds(loop) == [(held.id, "opened"), (held.id, "attempt"), (held.id, "resolved")]


def test_a_canary_that_does_not_heal_doubles_the_hold_and_escalates_once(tmp_path):
    loop = make_app(
        tmp_path,
        restart={"cooldown": "60s"},
        storm={"hold": "5m", "max_hold": "20m"},
    )
    eight_of_ten_unhealthy(loop)
    loop.engine.after_restart_health = "unhealthy"  # the shared cause is still there
    loop.healer.sweep()
    held = storm(loop)
    for _ in range(2 * 60):  # one hour of sweeps, 30 s apart
        step(loop)
    # One canary at 5m, then holds of 10m, 20m, 20m (max_hold): four restarts in an hour.
    assert restart_offsets(loop) == [300, 900, 2100, 3300]
    assert {a.reason for a in loop.restarts()} == {"storm_canary"}
    canaries = [a.container for a in loop.restarts()]
    assert all(a != b for a, b in itertools.pairwise(canaries))  # a new one each time
    held = loop.store.get_incident(held.id)
    assert held.state is IncidentState.ACTIVE and held.escalated
    assert storm_news(loop, held.id) == ["opened", "gave_up"]
    assert {i for i, _ in queued_kinds(loop)} == {held.id}


def test_the_escalation_says_what_happened_and_when_the_next_canary_comes(tmp_path):
    loop = make_app(tmp_path, storm={"hold": "5m"})
    eight_of_ten_unhealthy(loop)
    loop.engine.after_restart_health = "unhealthy"
    loop.healer.sweep()
    loop.clock.advance(minutes=5)
    loop.healer.sweep()
    loop.healer.verifier.verify()
    [row] = loop.store.db.query("SELECT payload FROM outbox WHERE kind='gave_up'")
    note = from_dict(json.loads(row["payload"]))
    [canary] = loop.restarted()
    next_at = (T0 + timedelta(minutes=15)).isoformat(timespec="seconds")
    assert note.headline == "Storm escalated, canary not healed, needs a human: (host) on h: storm"
    assert note.detail == (
        f"canary {canary} not healed (unhealthy_after_restart): restarts held for 10m, "
        f"next canary at {next_at}"
    )


def test_an_acknowledgement_releases_the_hold_at_once(tmp_path):
    loop = make_app(tmp_path, storm={"hold": "1h"}, restart={"max_concurrent": 8})
    eight_of_ten_unhealthy(loop)
    loop.healer.sweep()
    loop.app.operator.change(storm(loop).id, "ack", "alice", "NFS server down")
    step(loop)
    assert sorted(loop.restarted()) == [f"c{i}" for i in range(8)]


def test_three_containers_failing_together_on_a_small_host_are_no_storm(tmp_path):
    loop = make_app(tmp_path)  # the defaults
    names = ["web", "db", "cache"]
    for name in names:
        loop.engine.add(name)
    loop.healer.sweep()
    for name in names:  # 0.2 s apart, each reported by its own engine event
        snap = loop.engine.set(name, health="unhealthy")
        loop.healer.react(snap.id, loop.clock.now())
        loop.clock.advance(0.2)
    assert storm(loop) is None
    assert loop.restarted() == names


def test_after_a_guardian_restart_an_open_storm_holds_afresh(tmp_path):
    loop = make_app(tmp_path, storm={"hold": "5m"})
    eight_of_ten_unhealthy(loop)
    loop.healer.sweep()
    loop.clock.advance(minutes=4)
    again = loop.restart_guardian()
    again.healer.sweep()
    for _ in range(9):
        step(again)
    assert again.restarted() == []  # 4m + 4.5m: the new process holds for its own 5m
    step(again)
    assert len(again.restarted()) == 1


def test_fresh_containers_failing_together_hold_themselves_not_an_older_one(tmp_path):
    # Whoever can start opted-in containers starts six that fail at once: their storm holds
    # them for its hour (and one more that fails within storm.window, as a shared cause's
    # would); an older container that turns unhealthy later waits one cooldown, as it would
    # after a restart of its own.
    loop = make_app(tmp_path, restart={"cooldown": "60s"}, storm={"hold": "1h", "max_hold": "1h"})
    for i in range(4):
        loop.engine.add(f"old{i}")
    loop.healer.sweep()
    for i in range(6):
        loop.engine.add(f"fresh{i}", health="unhealthy")
    step(loop, 10)  # 12:00:10
    held = storm(loop)
    assert held is not None and held.detail.startswith("6 of 10 watched containers unhealthy")
    step(loop, 50)
    loop.engine.add("fresh6", health="unhealthy")
    step(loop, 10)  # 12:01:10, storm.window after the opening: one of the storm's own

    loop.engine.set("old0", health="unhealthy")
    step(loop, 10)  # detected at 12:01:20
    for _ in range(5):
        step(loop, 10)
    assert loop.restarted() == []
    [bystander] = {a.detail for a in loop.actions("old0") if a.reason == "storm"}
    assert bystander.endswith("host-level storm it did not make: held one cooldown at most")
    assert "retry at 2026-01-01T12:02:20" in bystander
    step(loop, 10)  # one cooldown after its detection
    assert loop.restarted() == ["old0"]
    assert loop.restarts()[0].reason == "allowed"

    for _ in range(50):  # the storm still holds its own for its hour
        step(loop, 60)
    assert loop.restarted() == ["old0"]
    assert loop.store.get_incident(held.id).state is IncidentState.ACTIVE


def test_after_a_guardian_restart_a_container_failing_later_is_a_bystander(tmp_path):
    loop = make_app(tmp_path, restart={"cooldown": "60s"}, storm={"hold": "1h"})
    eight_of_ten_unhealthy(loop)
    loop.healer.sweep()
    again = loop.restart_guardian()
    again.healer.sweep()  # the eight found unhealthy: the storm's own
    step(again, 90)  # past storm.window
    again.engine.set("c8", health="unhealthy")
    step(again, 10)
    for _ in range(5):
        step(again, 10)
    assert again.restarted() == []
    step(again, 10)
    assert again.restarted() == ["c8"]
    for _ in range(30):
        step(again, 60)
    assert again.restarted() == ["c8"]


CORE = {"guardian.enable": "true", "tier": "core"}


def test_storm_count_keeps_other_containers_out_of_storms_and_their_holds(tmp_path):
    loop = make_app(
        tmp_path,
        restart={"cooldown": "60s", "max_per_minute": 100, "max_concurrent": 100},
        storm={"count": "tier=core", "min_containers": 3, "hold": "1h"},
    )
    for i in range(4):
        loop.engine.add(f"core{i}", labels=CORE)
    for i in range(6):  # six of ten unhealthy, none of them counted: no storm
        loop.engine.add(f"ci{i}", health="unhealthy")
    loop.healer.sweep()
    assert storm(loop) is None
    assert sorted(loop.restarted()) == [f"ci{i}" for i in range(6)]

    for i in range(3):  # three of the four counted: a storm, which holds them
        loop.engine.set(f"core{i}", health="unhealthy")
    step(loop, 120)
    held = storm(loop)
    assert held is not None
    assert held.detail.startswith(
        "3 of 4 watched containers matching storm.count tier=core unhealthy within 60s"
    )
    loop.engine.set("ci0", health="unhealthy")  # one it does not count is never held
    step(loop, 10)
    assert sorted(loop.restarted()) == sorted([f"ci{i}" for i in range(6)] + ["ci0"])
    for _ in range(30):
        step(loop, 60)
    assert not any(n.startswith("core") for n in loop.restarted())


def test_a_storm_speaks_only_for_its_own_a_bystander_is_told_of_as_ever(tmp_path):
    # The storm's one notification names the containers that made it; an older container that
    # fails later is no part of it, and people hear of its incident and its restart.
    loop = make_app(tmp_path, restart={"cooldown": "60s"}, storm={"hold": "1h"})
    for i in range(4):
        loop.engine.add(f"old{i}")
    loop.healer.sweep()
    for i in range(6):
        loop.engine.add(f"fresh{i}", health="unhealthy")
    step(loop, 10)
    held = storm(loop)
    step(loop, 60)
    loop.engine.set("old0", health="unhealthy")
    for _ in range(8):
        step(loop, 10)
    assert loop.restarted() == ["old0"]
    [old] = loop.store.db.query("SELECT id FROM incidents WHERE container='old0'")
    told = [k for i, k in queued_kinds(loop) if i == old["id"]]
    assert told[0] == "opened" and told[-1] == "resolved", told
    # The storm's own are spoken for by its one notification.
    fresh = [i.id for i in loop.store.open_incidents(loop.host) if i.container.startswith("f")]
    assert fresh and not [k for i, k in queued_kinds(loop) if i in fresh]
    assert [k for i, k in queued_kinds(loop) if i == held.id] == ["opened"]


def test_two_containers_decided_at_once_when_the_hold_ends_make_one_canary(tmp_path, monkeypatch):
    """Two workers: c1's history is read, then c0 is decided and claimed as the canary, then
    c1 is decided. c1 must see that canary: one container tries whether the storm is over."""
    from guardian.core.model import ProblemType, Reason

    loop = make_app(
        tmp_path,
        restart={"cooldown": "60s", "max_per_minute": 10, "max_concurrent": 10},
        storm={"hold": "5m"},
    )
    eight_of_ten_unhealthy(loop)
    loop.healer.sweep()
    assert storm(loop) is not None
    loop.clock.advance(301)  # the hold is over: the next restart is the canary
    remediator = loop.healer.remediator
    point = remediator.decisions
    snaps = {c.name: c for c in loop.engine.containers.values()}
    rules = {n: loop.healer.ctx.rules.observed(s) for n, s in snaps.items()}
    read = point._read  # noqa: SLF001 -- the history read, outside the loop lock
    first = []

    def c0_decided_meanwhile(snap, *args):
        got = read(snap, *args)
        if snap.name == "c1" and not first:
            with remediator.decided(snaps["c0"], rules["c0"], ProblemType.UNHEALTHY) as (d, _):
                first.append(d)
        return got

    monkeypatch.setattr(point, "_read", c0_decided_meanwhile)
    with remediator.decided(snaps["c1"], rules["c1"], ProblemType.UNHEALTHY) as (second, _):
        pass
    assert first[0].reason is Reason.STORM_CANARY
    assert second.reason is not Reason.STORM_CANARY and not second.acts
