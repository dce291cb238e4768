"""Between two whole lists (service/state/listing.py, issues 44 and 57): while the event stream
stays open, a sweep asks the engine only for the containers heard of and those not settled; at
each `watch.resync` it lists the containers that do not run well and asks by id for those last
shown unwell that are no longer among them; and each way that could miss a change lists every
container again: no stream, a cut or new stream, Podman, a reload, a clock step, an outage, too
many heard of, every tenth resync. Over the fake engine, which records the ids each list call
asked for.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import replace
from datetime import timedelta
from pathlib import Path

import pytest

from guardian.ports import EngineEvent
from guardian.service.state.listing import MAX_IDS, WHOLE_EVERY
from tests.app import TestApp, make_app


@pytest.fixture
def s(w: TestApp) -> TestApp:
    return w.following()


@pytest.fixture
def judged(s: TestApp, monkeypatch: pytest.MonkeyPatch) -> Counter[str]:
    return s.count_judged(monkeypatch)


Asked = set[str] | tuple[str, set[str]] | None


def sweep(w: TestApp, every: float = 10) -> Asked:
    """One sweep `every` seconds after the last: the ids its list asked for, None for the whole
    list, an empty set for a ping; at a resync, ("unwell", the ids it asked for besides)."""
    w.clock.advance(every)
    lists, pings, unwell = w.engine.list_calls, w.engine.pings, w.engine.unwell_calls
    w.healer.sweep()
    by_list = w.engine.list_calls - lists
    if w.engine.unwell_calls > unwell:
        assert w.engine.unwell_calls - unwell == 1 and w.engine.pings == pings
        assert by_list <= 1  # and at most one list by id
        return ("unwell", w.engine.listed_ids[-1] if by_list else set())
    assert by_list + (w.engine.pings - pings) == 1  # one request
    if w.engine.pings > pings:
        return set()
    asked = w.engine.listed_ids[-1]
    return asked or None


def settled(w: TestApp, judged: Counter[str], *names: str, healthy: bool = True) -> None:
    """`names` running (healthy), swept until quiet, the counts started afresh."""
    for name in names:
        w.engine.add(name, health="healthy" if healthy else None)
    assert sweep(w) is None  # the first: whole
    asked = sweep(w)  # the next: none of them asked for
    assert isinstance(asked, set) and not asked & {w.engine.id_of(name) for name in names}
    judged.clear()


def event(w: TestApp, action: str, name: str, **extra: str) -> EngineEvent:
    snap = next(c for c in w.engine.containers.values() if c.name == name)
    attributes = {**snap.labels, "name": name, "image": "busybox", **extra}
    return EngineEvent(action, snap.id, name, w.clock.now(), attributes)


def test_an_idle_sweep_of_1000_quiet_containers_pings_and_judges_none(
    s: TestApp, judged: Counter[str]
) -> None:
    for i in range(1000):
        s.engine.add(f"ok{i}")
    s.engine.add("bare", health=None)
    settled(s, judged)
    assert [sweep(s) for _ in range(4)] == [set()] * 4
    assert judged == Counter()
    report = s.healer.sweep()
    assert len(report.rows) == 1001  # each still counts
    assert s.metric("guardian_containers_watched") == 1001
    # Once watch.resync (1 min) has passed: the unwell ones (none), and no container asked for.
    assert sweep(s, every=60) == ("unwell", set())
    assert judged == Counter()


def test_every_tenth_resync_lists_every_container_and_judges_none_again(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    w = make_app(tmp_path, watch={"resync": "30s"}).following()  # before any reset check is due
    judged = w.count_judged(monkeypatch)
    for i in range(100):
        w.engine.add(f"ok{i}")
    settled(w, judged)
    asked = [sweep(w, every=30) for _ in range(WHOLE_EVERY)]
    assert asked == [("unwell", set())] * (WHOLE_EVERY - 1) + [None]
    assert judged == Counter()  # the same listings: still quiet


def test_a_container_created_since_is_asked_for_and_judged(
    s: TestApp, judged: Counter[str]
) -> None:
    settled(s, judged, "a", "b")
    s.engine.add("new", health="unhealthy")
    s.healer.on_event(event(s, "create", "new"))
    assert sweep(s) == {s.engine.id_of("new")}
    assert judged == Counter({"new": 1})
    assert s.restarted() == ["new"]
    assert s.metric("guardian_containers_watched") == 3


def test_a_destroyed_container_leaves_the_sweep(s: TestApp, judged: Counter[str]) -> None:
    settled(s, judged, "a", "gone")
    ev = event(s, "destroy", "gone")
    s.engine.remove("gone")
    s.healer.on_event(ev)
    assert sweep(s) == {ev.container_id}
    assert s.metric("guardian_containers_watched") == 1
    assert [row.snapshot.name for row in s.healer.sweep().rows] == ["a"]


def test_a_container_not_settled_is_asked_for_at_every_sweep(
    s: TestApp, judged: Counter[str]
) -> None:
    s.engine.add("job", state="exited", health=None, exit_code=0)  # not quiet: never settled
    settled(s, judged, "a", "b")
    job = s.engine.id_of("job")
    assert [sweep(s) for _ in range(3)] == [{job}] * 3
    assert judged == Counter({"job": 3})


@pytest.mark.parametrize("action", ["die", "start", "oom", "health_status", "pause", "rename"])
def test_an_event_has_its_container_asked_for_at_the_next_sweep(
    s: TestApp, judged: Counter[str], action: str
) -> None:
    settled(s, judged, "app", "other")
    s.engine.set("app", health="unhealthy")
    s.healer.on_event(event(s, action, "app", health_status="unhealthy"))  # not reacted to
    assert sweep(s) == {s.engine.id_of("app")}
    assert judged == Counter({"app": 1})
    assert s.restarted() == ["app"]


def test_a_change_no_event_told_of_is_found_at_the_resync(s: TestApp, judged: Counter[str]) -> None:
    settled(s, judged, "app", "ok")
    s.engine.set("app", health="unhealthy")  # a stream that lost it, while it stayed open
    assert [sweep(s) for _ in range(4)] == [set()] * 4
    assert s.restarted() == []
    assert sweep(s) == ("unwell", set())  # 60 s since the whole list: shown unwell
    assert s.restarted() == ["app"]
    assert judged == Counter({"app": 1})  # "ok" taken as the last list showed it


@pytest.mark.parametrize(
    "change",
    [{"state": "exited", "health": None}, {"state": "paused"}, {"health": "starting"}],
)
def test_each_way_of_not_running_well_unheard_is_found_at_the_resync(
    s: TestApp, judged: Counter[str], change: dict[str, object]
) -> None:
    settled(s, judged, "app", "ok")
    s.engine.set("app", **change)
    assert sweep(s, every=60) == ("unwell", set())
    assert set(judged) == {"app"}


def test_a_recovery_or_removal_unheard_is_asked_for_and_the_still_unwell_shown(
    s: TestApp, judged: Counter[str]
) -> None:
    for name in ("job", "gone", "still"):
        s.engine.add(name, state="exited", health=None, exit_code=0)
    settled(s, judged, "ok")
    job, gone = s.engine.id_of("job"), s.engine.id_of("gone")
    s.engine.set("job", state="running")  # started, and the stream lost it
    s.engine.remove("gone")
    # Not settled, so asked for at every sweep; at a resync, the still unwell are shown instead.
    assert sweep(s, every=60) == ("unwell", {job, gone})
    assert s.metric("guardian_containers_watched") == 3
    rows = {r.snapshot.name: r.snapshot.state for r in s.healer.sweep().rows}
    assert rows == {"job": "running", "still": "exited", "ok": "running"}


def test_an_unwatched_container_shown_unwell_and_recovered_unheard_is_asked_for_at_the_resync(
    s: TestApp,
) -> None:
    s.engine.add("off", labels={"guardian.enable": "false"}, state="exited", health=None)
    s.engine.add("ok")
    assert sweep(s) is None
    assert sweep(s) == set()  # listed, not watched: never asked for
    s.engine.set("off", state="running")
    assert sweep(s, every=60) == ("unwell", {s.engine.id_of("off")})
    assert sweep(s) == set()


def test_a_container_created_or_renamed_unheard_running_well_waits_for_the_whole_list(
    s: TestApp, judged: Counter[str]
) -> None:
    settled(s, judged, "ok")
    s.engine.add("new")
    s.engine.add("sick", health="unhealthy")
    ok = s.engine.id_of("ok")
    s.engine.containers[ok] = replace(s.engine.containers[ok], name="renamed")
    assert sweep(s, every=60) == ("unwell", set())
    assert s.restarted() == ["sick"]  # unwell: found at the resync
    names = {r.snapshot.name for r in s.healer.sweep().rows}
    assert names == {"ok", "sick"}
    between = [sweep(s, every=60) for _ in range(WHOLE_EVERY - 2)]
    assert all(isinstance(a, tuple) for a in between)  # resyncs, none of them a whole list
    assert sweep(s, every=60) is None  # the tenth resync: the whole list
    assert {r.snapshot.name for r in s.healer.sweep().rows} == {"renamed", "new", "sick"}


def test_more_than_max_ids_to_ask_at_a_resync_list_every_container(
    s: TestApp, judged: Counter[str]
) -> None:
    for i in range(MAX_IDS + 1):
        s.engine.add(f"job{i}", state="exited", health=None, exit_code=0)
    s.engine.add("ok")
    assert sweep(s) is None
    for i in range(MAX_IDS + 1):
        s.engine.remove(f"job{i}")  # all gone unheard
    assert sweep(s, every=60) is None
    assert s.metric("guardian_containers_watched") == 1


def test_a_quiet_row_whose_reset_check_falls_due_is_asked_for(tmp_path: Path) -> None:
    s = make_app(tmp_path, watch={"resync": "2m"}).following()  # no whole list at 600 s
    s.engine.add("app")
    assert sweep(s) is None  # first seen healthy: its reset check is due 600 s on
    assert sweep(s, every=550) == ("unwell", set())  # the resync passed
    assert sweep(s, every=40) == set()  # healthy for 590 s
    assert s.store.last_reset(s.host, "app") is None
    assert sweep(s, every=15) == {s.engine.id_of("app")}  # 605 s: asked for, reset recorded
    assert s.store.last_reset(s.host, "app") == s.clock.now()


def test_many_heard_of_list_every_container(s: TestApp, judged: Counter[str]) -> None:
    settled(s, judged, "a")
    for i in range(MAX_IDS + 1):
        s.healer.quiet.heard(f"{i:064x}")  # hostile: ids created and destroyed at once
    assert sweep(s) is None
    assert sweep(s) == set()  # and the next is quiet again


def test_without_an_open_stream_every_sweep_lists_every_container(w: TestApp) -> None:
    w.engine.add("a")
    assert [sweep(w) for _ in range(3)] == [None] * 3  # no stream was ever opened
    w.following()
    assert sweep(w) is None  # opened after the last whole list
    assert sweep(w) == set()


def test_a_cut_or_a_new_stream_lists_every_container(s: TestApp, judged: Counter[str]) -> None:
    settled(s, judged, "a")
    s.app.loop.stream_lost()
    assert sweep(s) is None  # no stream
    s.app.loop.stream_opening(s.clock.now() - timedelta(seconds=5), s.clock.now())
    assert sweep(s) is None  # a stream other than the one open at the last whole list
    assert sweep(s) == set()
    s.app.loop.stream_lost()
    s.app.loop.stream_opening(s.clock.now() - timedelta(seconds=5), s.clock.now())
    assert sweep(s) is None  # cut and opened again between two sweeps


def test_a_reload_a_clock_step_and_an_outage_list_every_container(
    s: TestApp, judged: Counter[str]
) -> None:
    settled(s, judged, "a")
    rules = s.healer.ctx.rules
    rules.retune(replace(rules.settings, stop_timeout=timedelta(seconds=3)))
    assert sweep(s) is None
    assert sweep(s) == set()
    s.healer.follow_step(timedelta(hours=1))
    assert sweep(s) is None
    assert sweep(s) == set()
    s.engine.reachable = False
    s.clock.advance(10)
    report = s.healer.sweep()  # the ping finds the engine gone, as a list would
    assert report.engine_error is not None
    assert s.metric("guardian_docker_engine_up") == 0
    s.engine.reachable = True
    assert sweep(s) is None


def test_on_podman_every_sweep_lists_every_container(s: TestApp, judged: Counter[str]) -> None:
    s.engine.kind = "podman"
    s.engine.add("a")
    assert [sweep(s) for _ in range(3)] == [None] * 3


def test_resync_0s_lists_every_container_at_every_sweep(tmp_path: Path) -> None:
    w = make_app(tmp_path, watch={"resync": "0s"}).following()
    w.engine.add("a")
    assert [sweep(w) for _ in range(3)] == [None] * 3


def test_an_idle_sweep_reads_no_probe_or_limit_label_again_and_a_changed_container_is_read(
    s: TestApp, judged: Counter[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """The probes' and resource rules' followers skip the very list they followed last (the page's:
    the same snapshots); after a reload, or a container the engine tells changed, they follow
    the list anew."""
    import guardian.service.watchers.prober as prober_module

    limit = {"guardian.enable": "true", "guardian.memory.max": "256MiB"}
    s.engine.add("leak", labels=limit, health=None)
    settled(s, judged, *(f"ok{i}" for i in range(50)))
    probed, limited = Counter[str](), Counter[str]()
    parse_probe, limits_of = prober_module.parse_probe, s.app.resources.limits_of

    def counting_probe(labels, defaults):  # type: ignore[no-untyped-def]
        probed["read"] += 1
        return parse_probe(labels, defaults)

    def counting_limits(snap):  # type: ignore[no-untyped-def]
        limited[snap.name] += 1
        return limits_of(snap)

    monkeypatch.setattr(prober_module, "parse_probe", counting_probe)
    monkeypatch.setattr(s.app.resources, "limits_of", counting_limits)
    assert [sweep(s) for _ in range(3)] == [set()] * 3
    assert probed == Counter() and limited == Counter()
    assert s.app.resources.has_targets()  # still followed: "leak" keeps its limit

    rules = s.healer.ctx.rules
    rules.retune(replace(rules.settings, stop_timeout=timedelta(seconds=3)))  # a reload
    assert sweep(s) is None
    assert probed["read"] == 51 and len(limited) == 51 and set(limited.values()) == {1}
    assert sweep(s) == set()
    probed.clear(), limited.clear()

    s.engine.set("ok7", labels=limit)  # recreated with a limit, as its events tell
    s.healer.on_event(event(s, "destroy", "ok7"))
    s.healer.on_event(event(s, "create", "ok7"))
    assert sweep(s) == {s.engine.id_of("ok7")}
    # The new list is followed: each of the 51 watched containers read once.
    assert probed["read"] == 51 and len(limited) == 51 and set(limited.values()) == {1}
