"""The container cache (issue 44): an unhealthy event for a container whose entry is fresh is
acted on without an inspect (anything else it decides is inspected: the probe's output is not
kept), and every guard still holds when the cache is stale in the way that
would fool it. The engine's events are delivered by hand, in the stream's order, over a fake
clock; the fake engine counts its inspects."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from dataclasses import replace
from datetime import datetime, timedelta
from pathlib import Path

import pytest

from guardian.adapters.sqlite.outbox import SqliteOutbox
from guardian.core.cache_entry import (
    LABELS_UNBOUNDED,
    MAX_LABELS,
    ORDER_MARGIN,
    applied,
    entry_of,
    order_margin,
    same_listing,
)
from guardian.core.model import ActionOutcome, ContainerSnapshot
from guardian.entrypoints.event_listener import EventListener
from guardian.ports import EngineEvent, EngineUnavailable
from guardian.service.healing.healer import RESYNC_READS
from guardian.service.state.container_cache import CUT, DURING, LISTED_OTHERWISE, UNCOVERED
from tests.app import TestApp, make_app, make_world
from tests.fakes import T0

WATCHED = {"guardian.enable": "true"}
SWARM = {**WATCHED, "com.docker.swarm.task.id": "t1", "com.docker.swarm.service.name": "web"}


# -- one entry (core.cache_entry) ---------------------------------------------------------------


def inspected(**fields: object) -> ContainerSnapshot:
    base: dict[str, object] = {
        "id": "c1",
        "name": "app",
        "labels": dict(WATCHED),
        "state": "running",
        "health": "healthy",
        "inspected": True,
        "started_at": T0 - timedelta(hours=1),
    }
    return ContainerSnapshot(**{**base, **fields})  # type: ignore[arg-type]


LATER = T0 + timedelta(seconds=10)


def health(status: str, **attributes: str) -> dict[str, str]:
    return {**WATCHED, "name": "app", "image": "busybox", "health_status": status, **attributes}


def test_an_entry_takes_in_a_health_status() -> None:
    entry = entry_of(inspected(), T0, T0)
    after = applied(entry, "health_status", "app", LATER, health("unhealthy"))
    assert after is not None and after.fresh and after.snapshot.health == "unhealthy"


OTHER_EVENTS = ("die", "stop", "kill", "start", "restart", "oom", "pause", "unpause", "update")
UNKNOWN_EVENTS = ("rename", "create", "exec_start", "something_new")


@pytest.mark.parametrize("action", [*OTHER_EVENTS, *UNKNOWN_EVENTS])
def test_every_other_event_makes_the_entry_doubtful(action: str) -> None:
    entry = entry_of(inspected(), T0, T0)
    after = applied(entry, action, "app", LATER, {**WATCHED, "name": "app"})
    assert after is not None and not after.fresh and after.doubt == f"{action} event"
    # Doubtful it stays, whatever comes next, until an inspect fills it again.
    again = applied(after, "health_status", "app", LATER, health("unhealthy"))
    assert again is not None and not again.fresh and again.snapshot.health == "healthy"


def test_a_destroy_forgets_the_entry() -> None:
    assert applied(entry_of(inspected(), T0, T0), "destroy", "app", LATER, {}) is None


@pytest.mark.parametrize(
    ("snapshot", "name", "at", "attributes", "why"),
    [
        # The inspect may already show what an event this close to it tells: no order.
        ({}, "app", T0 + ORDER_MARGIN / 2, health("unhealthy"), "close to the inspect"),
        ({}, "app", LATER, health("sick"), "without a known status"),
        ({"state": "exited"}, "app", LATER, health("unhealthy"), "while not running"),
        ({}, "web", LATER, health("unhealthy", name="web"), "under another name"),
        ({}, "app", LATER, health("unhealthy", **{"guardian.enable": "false"}), "other labels"),
        ({}, "app", LATER, {"name": "app", "health_status": "unhealthy"}, "other labels"),
    ],
)
def test_a_health_event_the_entry_cannot_take_in_makes_it_doubtful(
    snapshot: dict[str, object], name: str, at: datetime, attributes: dict[str, str], why: str
) -> None:
    entry = entry_of(inspected(**snapshot), T0, T0)
    after = applied(entry, "health_status", name, at, attributes)
    assert after is not None and why in after.doubt


@pytest.mark.parametrize("action", ["create", "start", "health_status", "exec_start"])
def test_an_event_well_before_the_inspect_was_asked_leaves_the_entry_as_the_inspect_showed(
    action: str,
) -> None:
    # A stream that replays from before the inspect delivers what the inspect already shows.
    entry = entry_of(inspected(), T0, T0)
    before = T0 - ORDER_MARGIN
    after = applied(entry, action, "app", before, health("unhealthy"))
    assert after == entry
    # Any closer to the inspect, and it may be news the inspect missed.
    closer = applied(entry, action, "app", before + timedelta(milliseconds=1), health("unhealthy"))
    assert closer is not None and not closer.fresh


def test_an_entry_orders_events_within_the_engine_clocks_known_uncertainty() -> None:
    # A local engine's Date answers bound its stamps to milliseconds: an event half a second
    # after the inspect is news, not a doubt (a fixed 2 s had the next flip inspected).
    margin = order_margin(timedelta(milliseconds=8))
    assert margin == timedelta(milliseconds=258) and order_margin(None) == ORDER_MARGIN
    entry = entry_of(inspected(), T0, T0, margin)
    soon = applied(entry, "health_status", "app", T0 + timedelta(seconds=0.5), health("unhealthy"))
    assert soon is not None and soon.fresh and soon.snapshot.health == "unhealthy"
    close = applied(entry, "health_status", "app", T0 + timedelta(seconds=0.2), health("unhealthy"))
    assert close is not None and "close to the inspect" in close.doubt
    before = applied(entry, "start", "app", T0 - timedelta(seconds=0.3), health("healthy"))
    assert before == entry  # the inspect shows it


def test_labels_beyond_the_bounds_are_not_kept_and_the_entry_stays_doubtful() -> None:
    many = {f"k{i}": "v" for i in range(MAX_LABELS + 1)}
    long = {"guardian.enable": "true", "x": "y" * 20_000}
    for labels in (many, long):
        entry = entry_of(inspected(labels=labels), T0, T0)
        assert entry.doubt == LABELS_UNBOUNDED and entry.snapshot.labels == {}


def test_an_entry_keeps_nothing_that_only_the_inspects_moment_tells() -> None:
    snap = inspected(health_output="x" * 4096, health_log_at=T0, command=("a",) * 64, pid=7)
    kept = entry_of(snap, T0, T0).snapshot
    assert (kept.health_output, kept.health_log_at, kept.command, kept.pid) == ("", None, (), 0)
    assert not entry_of(replace(snap, inspected=False), T0, T0).fresh


@pytest.mark.parametrize(
    ("listed", "same"),
    [
        ({}, True),
        ({"state": "exited", "health": None}, False),
        ({"health": "unhealthy"}, False),
        ({"labels": {"guardian.enable": "false"}}, False),
        ({"name": "web"}, False),
    ],
)
def test_the_sweep_compares_an_entry_with_the_list(listed: dict[str, object], same: bool) -> None:
    snap = inspected()
    assert same_listing(snap, replace(snap.as_listed(), **listed)) is same  # type: ignore[arg-type]


# -- the loop over the cache ---------------------------------------------------------------------


@pytest.fixture
def c(w: TestApp) -> TestApp:
    return w.following()


def event(w: TestApp, action: str, name: str, at: datetime | None = None, **extra: str):
    """An event as Docker sends it: the container's labels, its name and image among the
    attributes."""
    snap = next(s for s in w.engine.containers.values() if s.name == name)
    attributes = {**snap.labels, "name": name, "image": "busybox", **extra}
    return EngineEvent(action, snap.id, name, at or w.clock.now(), attributes)


def turns_unhealthy(w: TestApp, name: str) -> EngineEvent:
    """The engine turns `name` unhealthy and says so; the event is seen (not reacted to)."""
    w.engine.set(name, health="unhealthy")
    ev = event(w, "health_status", name, health_status="unhealthy")
    assert w.healer.on_event(ev)
    return ev


def react(w: TestApp, ev: EngineEvent) -> int:
    """The daemon's reaction to `ev`; returns the inspects it cost before the engine was asked
    to restart the container (all of them when it was not: a read after the restart call, for
    the probe's output, keeps no restart waiting)."""
    before, restarts = w.engine.inspect_calls, len(w.engine.restarts)
    w.healer.react(ev.container_id, w.healer.reported_at(ev))
    asked = w.engine.inspects_at_restart[restarts:]
    return (asked[0] if asked else w.engine.inspect_calls) - before


def queued(w: TestApp, kind: str) -> list[dict[str, object]]:
    """The notifications of `kind` in the outbox, oldest first."""
    rows = w.store.db.query("SELECT payload FROM outbox WHERE kind=? ORDER BY id", (kind,))
    return [json.loads(r["payload"]) for r in rows]


def fan_out(w: TestApp, channels: list[str]) -> int:
    """The delivery worker's fan-out: how many queued notifications its channels may take now."""
    return SqliteOutbox(w.store.db).fan_out(channels)


def warm(w: TestApp) -> None:
    """A sweep fills the cache; time passes beyond what an event could be ordered against."""
    w.healer.sweep()
    w.clock.advance(10)


def test_an_unhealthy_event_on_a_fresh_entry_restarts_without_an_inspect(c: TestApp) -> None:
    c.engine.add("app")
    warm(c)
    assert c.healer.ctx.state.cache.doubt_of(c.engine.id_of("app")) == ""
    ev = turns_unhealthy(c, "app")
    assert react(c, ev) == 0
    assert c.restarted() == ["app"]
    [incident] = c.store.open_incidents(c.host)
    assert incident.problem_since == ev.at  # the event's time is the evidence of the start


def test_a_hold_judged_from_the_cache_is_inspected_and_tells_the_probes_output(
    tmp_path: Path,
) -> None:
    # The cache serves an action only: a container it would not act on at once (dry run)
    # is inspected, so its incident and the people told read what the probe said.
    c = make_world(tmp_path, dry_run=True).following()
    c.engine.add("app")
    warm(c)
    c.engine.set("app", health_output="GET /ready: 503", health_log_at=c.clock.now())
    assert react(c, turns_unhealthy(c, "app")) == 1
    assert c.restarted() == []
    [incident] = c.store.open_incidents(c.host)
    assert incident.detail == "GET /ready: 503"
    [opened] = queued(c, "opened")
    assert opened["detail"] == "GET /ready: 503"
    assert [a.reason for a in c.actions()] == ["dry_run"]  # decided once, on the inspect


def test_a_restart_judged_from_the_cache_tells_what_the_last_probe_before_it_said(
    c: TestApp,
) -> None:
    c.engine.add("app")
    warm(c)
    probed = c.clock.now() - timedelta(milliseconds=10)  # the probe that sent the event
    c.engine.set("app", health_output="db: connection refused", health_log_at=probed)
    inspects = c.engine.inspect_calls
    restart, fanned_out = c.engine.restart, []

    def restart_seen(cid: str, stop_timeout: timedelta, previous: datetime | None) -> ActionOutcome:
        fanned_out.append(fan_out(c, ["slack"]))  # what a channel could take now
        return restart(cid, stop_timeout, previous)

    c.engine.restart = restart_seen  # type: ignore[method-assign]
    assert react(c, turns_unhealthy(c, "app")) == 0  # none on the way to the restart
    assert c.restarted() == ["app"]
    assert fanned_out == [0]  # the opening was held while the engine restarted it
    assert c.engine.inspect_calls - inspects == 1  # one, after the restart call returned
    [incident] = c.store.open_incidents(c.host)
    assert incident.detail == "db: connection refused"
    # The opening tells what the probe said, and comes before the attempt.
    assert [k for (k,) in c.store.db.query("SELECT kind FROM outbox ORDER BY id")] == [
        "opened",
        "attempt",
    ]
    [opened] = queued(c, "opened")
    assert opened["detail"] == "db: connection refused" and not opened["held"]
    assert fan_out(c, ["slack"]) == 2
    [attempt] = queued(c, "attempt")
    assert attempt["detail"] == (
        "restart request completed; the last probe before the restart said: db: connection refused"
    )
    [action] = c.restarts()
    assert action.detail == "restart request completed"  # the engine's answer, as it was


def test_an_opening_held_for_a_restart_that_was_not_called_goes_as_it_is(c: TestApp) -> None:
    """Judged from the cache to restart, then not restarted (a person's kill heard meanwhile):
    no probe is read, and the opening is not kept back."""
    c.engine.add("app")
    warm(c)
    ev = turns_unhealthy(c, "app")
    c.healer.on_event(event(c, "kill", "app", signal="15"))
    c.healer.react(ev.container_id, c.healer.reported_at(ev))
    assert c.restarted() == []
    [opened] = queued(c, "opened")
    assert not opened["held"] and opened["detail"] == "health check failing"
    assert fan_out(c, ["slack"]) == 1


def test_an_opening_a_stop_left_held_goes_at_the_next_start(c: TestApp) -> None:
    c.engine.add("app")
    warm(c)

    def dies(*args: object) -> ActionOutcome:
        raise KeyboardInterrupt

    c.engine.restart = dies  # type: ignore[method-assign]
    with pytest.raises(KeyboardInterrupt):  # Guardian dies in the restart call
        react(c, turns_unhealthy(c, "app"))
    assert fan_out(c, ["slack"]) == 0
    c.healer.verifier.reconcile()  # the next start
    [opened] = queued(c, "opened")
    assert not opened["held"] and opened["detail"] == "health check failing"
    assert fan_out(c, ["slack"]) == 1


def test_a_probe_that_ended_after_the_restart_was_asked_is_not_told(
    c: TestApp, monkeypatch: pytest.MonkeyPatch
) -> None:
    c.engine.add("app")
    warm(c)
    c.engine.set("app", health_output="old run: failing", health_log_at=c.clock.now())
    restart = c.engine.restart

    def restarted_and_probed(
        cid: str, stop_timeout: timedelta, previous: datetime | None
    ) -> ActionOutcome:
        outcome = restart(cid, stop_timeout, previous)
        # The new run's first probe ends before Guardian reads the container.
        c.clock.advance(1)
        c.engine.set("app", health_output="new run: warming up", health_log_at=c.clock.now())
        return outcome

    monkeypatch.setattr(c.engine, "restart", restarted_and_probed)
    c.clock.advance(0.5)
    assert react(c, turns_unhealthy(c, "app")) == 0
    assert c.restarted() == ["app"]
    [incident] = c.store.open_incidents(c.host)
    assert incident.detail == "health check failing"
    [attempt] = queued(c, "attempt")
    assert attempt["detail"] == "restart request completed"


def test_an_idle_sweep_of_a_warm_cache_costs_one_list_and_no_inspect(c: TestApp) -> None:
    for i in range(1100):
        c.engine.add(f"ok{i}")
    warm(c)
    assert c.engine.inspect_calls == RESYNC_READS == 1024  # a sweep's resync reads at most these
    for _ in range(3):
        c.healer.sweep()
        c.clock.advance(10)
    assert c.engine.inspect_calls == 1100  # each container read once, over two sweeps
    c.clock.advance(60)
    c.healer.sweep()  # watch.resync: the unwell ones listed (none)
    lists, inspects, pings = c.engine.list_calls, c.engine.inspect_calls, c.engine.pings
    for _ in range(3):
        c.clock.advance(10)
        c.healer.sweep()
    # One request each: with the stream open and nothing heard, a ping (service/state/listing.py).
    assert (c.engine.list_calls - lists, c.engine.pings - pings) == (0, 3)
    c.clock.advance(600)  # every tenth watch.resync: the whole list again
    c.healer.sweep()
    assert (c.engine.list_calls - lists, c.engine.inspect_calls - inspects) == (1, 0)


def test_the_sweep_reads_again_what_the_list_shows_otherwise(c: TestApp) -> None:
    c.engine.add("app")
    warm(c)
    cid = c.engine.id_of("app")
    c.engine.set("app", health="starting")  # an event the stream never delivered
    inspects = c.engine.inspect_calls
    c.healer.sweep()  # between two whole lists: taken as the last list showed it
    assert c.engine.inspect_calls == inspects
    c.clock.advance(60)  # watch.resync
    c.healer.sweep()
    assert c.engine.inspect_calls - inspects == 1
    assert c.healer.ctx.state.cache.doubt_of(cid) == ""  # read again: fresh
    paused = c.engine.as_listed(c.engine.set("app", state="paused"))
    c.healer.ctx.state.cache.resync([paused], [paused])
    assert c.healer.ctx.state.cache.doubt_of(cid) == LISTED_OTHERWISE


def test_an_idle_sweeps_very_list_wants_nothing_until_the_cache_changes(c: TestApp) -> None:
    """The same lists given again with no write to the cache since want no inspect (an idle
    sweep's, not walked again); any write since (an event, a cut stream, a new stream) has them
    walked as before."""
    for name in ("a", "b"):
        c.engine.add(name)
    warm(c)
    cache = c.healer.ctx.state.cache
    listed = [c.engine.as_listed(s) for s in c.engine.containers.values()]
    assert cache.resync(listed, listed) == []
    assert cache.resync(listed, listed) == []
    a = c.engine.id_of("a")
    cache.saw(event(c, "pause", "a"))
    assert cache.resync(listed, listed) == [a]
    assert cache.resync(listed, listed) == [a]  # still wanted: nothing read it meanwhile
    c.healer.sweep()  # reads it again (fresh), and the next walk wants nothing
    assert cache.doubt_of(a) == ""
    assert cache.resync(listed, listed) == []
    cache.lost()
    cache.opening(None, c.clock.now())
    assert sorted(cache.resync(listed, listed)) == sorted([a, c.engine.id_of("b")])
    c.healer.sweep()
    assert cache.resync(listed, listed) == [] and len(cache) == 2
    # Another list, though of the same watched list: the container it no longer shows is
    # forgotten.
    only_a = [s for s in listed if s.id == a]
    assert cache.resync(only_a, only_a) == [] and len(cache) == 1


def test_a_container_an_inspect_cannot_cache_is_not_read_again_at_every_sweep(
    c: TestApp,
) -> None:
    c.engine.add("app", labels={**WATCHED, **{f"k{i}": "v" for i in range(MAX_LABELS)}})
    warm(c)
    assert c.healer.ctx.state.cache.doubt_of(c.engine.id_of("app")) == LABELS_UNBOUNDED
    inspects = c.engine.inspect_calls
    c.healer.sweep()
    assert c.engine.inspect_calls == inspects
    assert react(c, turns_unhealthy(c, "app")) == 1  # judged as before: inspected


def test_a_persons_stop_after_the_unhealthy_event_is_never_undone(c: TestApp) -> None:
    c.engine.add("app")
    warm(c)
    ev = turns_unhealthy(c, "app")
    # Before the reaction runs, a person stops it: the stream says so first.
    c.engine.set("app", state="exited", exit_code=143, finished_at=c.clock.now())
    for action in ("kill", "die", "stop"):
        c.healer.on_event(event(c, action, "app"))
    assert react(c, ev) == 1
    assert c.restarted() == []


def test_a_persons_kill_heard_while_the_container_still_runs_unhealthy_is_never_undone(
    c: TestApp,
) -> None:
    """`docker stop` or `docker rm -f` while a probe runs: the killed probe fails, so Docker may
    say unhealthy just as the person's kill lands, and an inspect may still show the container
    running and unhealthy. The kill was heard: nothing restarts it."""
    c.engine.add("app")
    warm(c)
    ev = turns_unhealthy(c, "app")
    c.healer.on_event(event(c, "kill", "app", signal="15"))
    react(c, ev)
    assert c.restarted() == []


def test_a_container_a_person_removed_is_never_restarted_by_a_reaction_that_read_it_before(
    c: TestApp,
) -> None:
    """`docker rm -f`: kill, die, destroy. A reaction whose inspect answered before the removal
    (the engine shows it running and unhealthy) comes after the destroy: not restarted, though
    the destroy ended the person's stop."""
    c.engine.add("app")
    warm(c)
    ev = turns_unhealthy(c, "app")
    for action in ("kill", "die", "destroy"):
        c.healer.on_event(event(c, action, "app"))
    react(c, ev)
    assert c.restarted() == []


def test_a_paused_container_is_left_alone(c: TestApp) -> None:
    c.engine.add("app")
    warm(c)
    ev = turns_unhealthy(c, "app")
    c.engine.set("app", state="paused")
    c.healer.on_event(event(c, "pause", "app"))
    assert react(c, ev) == 1
    assert c.restarted() == []


def test_labels_changed_under_the_cache_are_read_again(c: TestApp) -> None:
    c.engine.add("app")
    c.engine.add("db")
    warm(c)
    # After an `update` the entry may hold what no longer is (here: a label asking for less).
    c.engine.set("app", labels={**WATCHED, "guardian.action": "notify"})
    c.healer.on_event(event(c, "update", "app"))
    assert react(c, turns_unhealthy(c, "app")) == 1
    # A health event whose labels are not the entry's (here: an owner's): the same.
    c.engine.set("db", labels=SWARM)
    assert react(c, turns_unhealthy(c, "db")) == 1
    assert c.restarted() == []
    assert [a.reason for a in c.actions()] == ["notify_only", "orchestrator_managed"]


def test_a_container_recreated_under_the_same_name_between_two_events_is_inspected(
    c: TestApp,
) -> None:
    old = c.engine.add("app")
    warm(c)
    cache = c.healer.ctx.state.cache
    assert cache.doubt_of(old.id) == ""
    c.healer.on_event(event(c, "destroy", "app"))
    new = c.engine.recreate("app")
    for action in ("create", "start"):
        c.healer.on_event(event(c, action, "app"))
    assert cache.doubt_of(old.id) is None  # the old container's entry is gone
    # A late unhealthy event of the old container: nothing of it is decided on.
    stale = EngineEvent("health_status", old.id, "app", c.clock.now(), health("unhealthy"))
    assert react(c, stale) == 1 and c.restarted() == []
    # The new one has no entry yet: inspected, and restarted as a container of its own.
    c.clock.advance(10)
    assert react(c, turns_unhealthy(c, "app")) == 1
    assert c.engine.restarts == [new.id]


def rename(w: TestApp, old: str, new: str) -> None:
    cid = w.engine.id_of(old)
    w.engine.containers[cid] = replace(w.engine.containers[cid], name=new)


def test_a_container_renamed_between_two_events_is_inspected(c: TestApp) -> None:
    c.engine.add("app")
    c.engine.add("db")
    warm(c)
    rename(c, "app", "web")
    c.healer.on_event(event(c, "rename", "web", oldName="app"))
    assert react(c, turns_unhealthy(c, "web")) == 1
    # A rename the stream did not deliver: the health event names the container otherwise.
    rename(c, "db", "store")
    assert react(c, turns_unhealthy(c, "store")) == 1
    assert c.restarted() == ["web", "store"]  # under the names the engine shows now


def test_a_cut_stream_makes_every_entry_doubtful_until_read_again(c: TestApp) -> None:
    for name in ("a", "b", "c"):
        c.engine.add(name)
    warm(c)
    cache = c.healer.ctx.state.cache
    c.app.loop.stream_lost()
    assert {cache.doubt_of(c.engine.id_of(n)) for n in "abc"} == {CUT}
    # Reconnected, replaying from the last event seen.
    c.app.loop.stream_opening(c.clock.now() - timedelta(seconds=5), c.clock.now())
    c.clock.advance(10)
    assert react(c, turns_unhealthy(c, "a")) == 1  # doubtful: inspected as before
    inspects = c.engine.inspect_calls
    c.healer.sweep()  # the resync reads the other two again
    assert c.engine.inspect_calls - inspects == 2
    c.clock.advance(10)
    assert react(c, turns_unhealthy(c, "b")) == 0
    assert sorted(c.restarted()) == ["a", "b"]


def test_nothing_inspected_before_the_stream_covers_it_is_fresh(w: TestApp) -> None:
    w.engine.add("app")
    w.healer.sweep()  # the daemon does not follow events: no entry, no extra inspect
    assert w.engine.inspect_calls == 0
    w.clock.advance(10)
    react(w, turns_unhealthy(w, "app"))  # inspected; fills an entry that nothing keeps true
    cid = w.engine.id_of("app")
    assert w.healer.ctx.state.cache.doubt_of(cid) == UNCOVERED
    # A stream replaying from after an inspect leaves that inspect doubtful too.
    w.app.loop.follows_events(w.clock.now())
    w.healer.sweep()
    w.app.loop.stream_opening(w.clock.now() + timedelta(seconds=1), w.clock.now())
    assert w.healer.ctx.state.cache.doubt_of(cid) == UNCOVERED


def test_an_event_during_the_inspect_leaves_the_entry_doubtful(
    c: TestApp, monkeypatch: pytest.MonkeyPatch
) -> None:
    c.engine.add("app")
    c.clock.advance(10)
    real = c.engine.inspect

    def inspect(cid: str) -> ContainerSnapshot | None:
        snap = real(cid)
        # The engine answered; before its answer is read, the stream delivers news.
        c.healer.on_event(event(c, "health_status", "app", health_status="unhealthy"))
        return snap

    monkeypatch.setattr(c.engine, "inspect", inspect)
    c.healer.sweep()
    assert c.healer.ctx.state.cache.doubt_of(c.engine.id_of("app")) == DURING


def test_an_event_soon_after_the_inspect_is_judged_from_the_cache_when_the_engines_clock_is_known(
    c: TestApp,
) -> None:
    c.engine.uncertainty = timedelta(milliseconds=5)  # the engine's answers bound its stamps
    c.engine.add("app")
    c.healer.sweep()
    c.clock.advance(0.5)  # half a second after the inspect: within the fixed 2 s margin
    assert react(c, turns_unhealthy(c, "app")) == 0
    assert c.restarted() == ["app"]


def test_while_the_engines_clock_is_not_known_an_event_soon_after_the_inspect_is_inspected(
    c: TestApp,
) -> None:
    c.engine.add("app")
    c.healer.sweep()
    c.clock.advance(0.5)
    assert react(c, turns_unhealthy(c, "app")) == 1
    assert c.restarted() == ["app"]


def test_an_unhealthy_event_from_before_the_inspect_is_checked_by_an_inspect(c: TestApp) -> None:
    c.engine.add("app")
    c.healer.sweep()  # the inspect shows it healthy
    # The stream lags: an older event says unhealthy; it may be older than that inspect.
    earlier = c.clock.now() - timedelta(seconds=1)
    ev = event(c, "health_status", "app", earlier, health_status="unhealthy")
    assert c.healer.on_event(ev)
    assert react(c, ev) == 1
    assert c.restarted() == []


def test_a_step_of_the_wall_clock_makes_every_entry_doubtful(c: TestApp) -> None:
    c.engine.add("app")
    warm(c)
    c.healer.follow_step(timedelta(minutes=-5))
    assert react(c, turns_unhealthy(c, "app")) == 1


def test_an_orchestrators_container_is_left_to_it_on_the_cached_path(c: TestApp) -> None:
    c.engine.add("web", labels=SWARM)
    warm(c)
    assert react(c, turns_unhealthy(c, "web")) == 1  # a refusal is told with the probe's output
    assert c.restarted() == []
    [held] = [a for a in c.actions("web")]
    assert held.reason == "orchestrator_managed"


def test_a_container_docker_is_restarting_itself_is_left_to_docker(c: TestApp) -> None:
    c.engine.add("app", restart_policy="always")
    warm(c)
    ev = turns_unhealthy(c, "app")
    # Its process dies meanwhile and Docker's restart policy is at it.
    c.engine.set("app", state="restarting", exit_code=1)
    c.healer.on_event(event(c, "die", "app", exitCode="1"))
    assert react(c, ev) == 1
    assert c.restarted() == []


def test_labels_only_tighten_on_the_cached_path(tmp_path: Path) -> None:
    c = make_app(tmp_path, restart={"max_attempts": 1, "cooldown": "2s"}).following()
    c.engine.add("app", labels={**WATCHED, "guardian.max_attempts": "5"})
    warm(c)
    assert react(c, turns_unhealthy(c, "app")) == 0
    c.clock.advance(2)
    c.verify()  # healthy again after the restart
    # The restart's own events leave the entry doubtful until the sweep reads it again.
    for action in ("kill", "die", "stop", "start", "restart"):
        c.healer.on_event(event(c, action, "app"))
    warm(c)
    assert c.healer.ctx.state.cache.doubt_of(c.engine.id_of("app")) == ""
    assert react(c, turns_unhealthy(c, "app")) == 1  # a give-up is told with the probe's output
    assert c.restarted() == ["app"]  # the label asked for 5 attempts; the operator allows 1
    assert c.actions("app")[-1].reason == "max_attempts"


def test_the_verifiers_look_leaves_a_fresh_entry_for_the_next_unhealthy_event(
    tmp_path: Path,
) -> None:
    # The restart's own events make the entry doubtful; the verification's inspect, after
    # them, is the loop's own and fills it again, so a relapse needs no inspect either.
    c = make_app(tmp_path, restart={"cooldown": "2s"}).following()
    c.engine.add("app")
    warm(c)
    assert react(c, turns_unhealthy(c, "app")) == 0
    for action in ("kill", "die", "start", "restart"):
        c.healer.on_event(event(c, action, "app"))
    c.clock.advance(2)
    c.verify()  # healthy again after the restart: the incident resolved
    assert c.healer.ctx.state.cache.doubt_of(c.engine.id_of("app")) == ""
    c.clock.advance(10)
    assert react(c, turns_unhealthy(c, "app")) == 0
    assert c.restarted() == ["app", "app"]


def test_a_storm_holds_a_restart_on_the_cached_path(tmp_path: Path) -> None:
    c = make_app(tmp_path, restart={"cooldown": "60s"}, storm={"hold": "5m"}).following()
    for i in range(10):
        c.engine.add(f"c{i}", health="unhealthy" if i < 8 else "healthy")
    warm(c)  # eight unhealthy at once: a storm, held
    assert c.restarted() == []
    assert react(c, turns_unhealthy(c, "c8")) == 1  # a hold is told with the probe's output
    assert c.restarted() == []
    assert c.actions("c8")[-1].reason == "storm"


def test_unhealthy_events_read_before_a_reaction_decides_make_a_storm_on_the_cached_path(
    tmp_path: Path,
) -> None:
    # Without an inspect, the first reaction could decide before the others are judged: the
    # stream's thread counts each unhealthy event before any reaction to it runs.
    c = make_app(tmp_path, storm={"threshold": "50%", "window": "60s"}).following()
    for i in range(6):
        c.engine.add(f"s{i}")
    warm(c)
    events = [turns_unhealthy(c, f"s{i}") for i in range(5)]
    assert react(c, events[0]) == 1  # a hold is told with the probe's output
    assert c.restarted() == []
    assert c.actions("s0")[-1].reason == "storm"
    [storm] = c.store.open_incidents(c.host, "(host)")
    assert storm.detail.startswith("5 of 6 watched containers unhealthy within 60s")


def test_an_unwatched_containers_unhealthy_event_is_not_counted_for_a_storm(
    tmp_path: Path,
) -> None:
    c = make_app(tmp_path, storm={"threshold": "50%", "window": "60s"}).following()
    for i in range(2):
        c.engine.add(f"s{i}")
    for i in range(4):
        c.engine.add(f"other{i}", labels={})
    warm(c)
    for i in range(4):
        c.engine.set(f"other{i}", health="unhealthy")
        c.healer.on_event(event(c, "health_status", f"other{i}", health_status="unhealthy"))
    assert react(c, turns_unhealthy(c, "s0")) == 0
    assert c.restarted() == ["s0"]
    assert c.store.open_incidents(c.host, "(host)") == []


def test_podman_has_no_cached_path(c: TestApp) -> None:
    c.engine.kind = "podman"
    c.engine.add("app")
    warm(c)
    assert c.engine.inspect_calls == 0  # no resync reads either
    assert react(c, turns_unhealthy(c, "app")) == 1
    assert len(c.healer.ctx.state.cache) == 0


# -- the event listener opens and cuts the stream the cache counts on ---------------------------


def test_the_listener_replays_from_when_the_daemon_began_and_a_cut_doubts_the_cache(
    w: TestApp,
) -> None:
    w.engine.add("app")
    began = w.clock.now()
    w.app.loop.follows_events(began)
    w.healer.sweep()
    w.clock.advance(10)
    stopping = threading.Event()
    asked: list[datetime | None] = []
    reacted: list[tuple[str, datetime | None]] = []

    def events(since: datetime | None) -> Iterator[EngineEvent]:
        asked.append(since)
        w.engine.set("app", health="unhealthy")
        yield event(w, "health_status", "app", health_status="unhealthy")
        stopping.set()  # the test ends with this connection: no wait for a reconnect
        raise EngineUnavailable("stream cut")

    w.engine.events = events  # type: ignore[method-assign]
    listener = EventListener(
        w.app, stopping, lambda cid, at: reacted.append((cid, at)), lambda: None
    )
    listener.run()
    assert asked == [began - ORDER_MARGIN]
    cid = w.engine.id_of("app")
    assert reacted == [(cid, w.clock.now())]
    assert w.healer.ctx.state.cache.doubt_of(cid) == CUT


def test_without_a_mark_what_the_stream_replays_from_before_it_opened_is_not_judged(
    w: TestApp,
) -> None:
    # The replay from when the daemon began is the cache's: the first sweep judges the host as
    # a whole (a storm counted before any restart), as it does without a cache.
    w.engine.add("app")
    w.app.loop.follows_events(w.clock.now())
    w.clock.advance(1)
    stopping = threading.Event()
    reacted: list[str] = []
    replayed = event(w, "health_status", "app", w.clock.now() - timedelta(seconds=1),
                     health_status="unhealthy")  # fmt: skip

    def events(since: datetime | None) -> Iterator[EngineEvent]:
        yield replayed
        stopping.set()
        raise EngineUnavailable("stream cut")

    w.engine.events = events  # type: ignore[method-assign]
    EventListener(w.app, stopping, lambda cid, at: reacted.append(cid), lambda: None).run()
    assert reacted == []
