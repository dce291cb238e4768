"""The status page reads after every change only what the change was about, and still shows
exactly what a whole read shows (`guardian status`'s answer): containers a change names are
listed again, the store's parts are read after a write, an incident's timeline after a write
about it."""

from __future__ import annotations

import contextlib
import sqlite3
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from guardian.adapters.sqlite.store import SqliteStore
from guardian.bootstrap import build_operator
from guardian.core.facts import ContainerInspected, EngineEventSeen, InspectAsked
from guardian.core.incidents import InvalidTransition
from guardian.core.model import Incident, IncidentState, ProblemType, Silence
from guardian.entrypoints.daemon import Daemon
from guardian.entrypoints.page.feed import delta
from guardian.entrypoints.page.render import Renderer
from guardian.ports import EngineEvent, Record
from guardian.readside.changes import EVERYTHING, LOG, NOTHING, Changes, Since
from guardian.readside.page import MAX_TIMELINE, PageData, PageReader
from guardian.readside.status import Statuses, container_status
from guardian.readside.views import timeline_view
from tests.app import TestApp, make_app

WATCHED = {"guardian.enable": "true"}
NAMES = ["api", "db", "web", "queue", "cache", "notify-only", "unwatched"]
LABELS = {
    "api": {**WATCHED, "guardian.depends_on": "db,cache"},  # held back while they are sick
    "notify-only": {**WATCHED, "guardian.action": "notify"},
    # In maintenance the first 30 s of every minute: the clock alone starts and ends it.
    "queue": {**WATCHED, "guardian.maintenance": "* * * * * 30s"},
    "unwatched": {},
}


def fleet(tmp: Path, **sections: Any) -> TestApp:
    g = make_app(
        tmp,
        # Two restarts a minute for the host: the others wait for the budget.
        restart={"cooldown": "30s", "max_attempts": 2, "max_concurrent": 100, "max_per_minute": 2},
        storm={"min_containers": 1000},
        watch={"start_grace": "20s"},  # unhealthy soon after a start: not judged yet
        **sections,
    )
    for name in NAMES:
        g.engine.add(name, health="healthy", labels=LABELS.get(name, WATCHED))
    g.healer.sweep()
    return g


def tell(g: TestApp, action: str, name: str) -> None:
    """The engine's event for `name`, through the loop as the event listener hands it over."""
    snap = next((c for c in g.engine.containers.values() if c.name == name), None)
    cid, labels = (snap.id, snap.labels) if snap is not None else ("gone", WATCHED)
    event = EngineEvent(action, cid, name, g.clock.now(), dict(labels))
    if g.healer.on_event(event) and snap is not None:
        g.healer.react(cid)


def restarts_told(g: TestApp, seen: int) -> int:
    """The start event of every restart the engine carried out since `seen`."""
    names = {c.id: c.name for c in g.engine.containers.values()}
    for cid in g.engine.restarts[seen:]:
        if cid in names:
            tell(g, "start", names[cid])
    return len(g.engine.restarts)


STEPS = st.one_of(
    st.tuples(st.just("unhealthy"), st.sampled_from(NAMES)),
    st.tuples(st.just("healthy"), st.sampled_from(NAMES)),
    st.tuples(st.just("exit"), st.sampled_from(NAMES)),
    st.tuples(st.just("race"), st.sampled_from(NAMES)),
    st.tuples(st.just("silence"), st.sampled_from(NAMES)),
    st.tuples(st.just("unsilence"), st.sampled_from(NAMES)),
    st.tuples(st.just("remove"), st.sampled_from(NAMES)),
    st.tuples(st.just("recreate"), st.sampled_from(NAMES)),
    st.tuples(st.just("ack"), st.sampled_from(NAMES)),
    st.tuples(st.just("resolve"), st.sampled_from(NAMES)),
    st.tuples(st.just("tick"), st.sampled_from([1, 10, 31, 50, 120, 700])),
    st.tuples(st.just("sweep"), st.just("")),
    st.tuples(st.just("verify"), st.just("")),
)


def step(g: TestApp, what: str, arg: Any) -> None:
    present = {c.name for c in g.engine.containers.values()}
    if what in ("unhealthy", "healthy") and arg in present:
        g.engine.set(arg, health=what, state="running")
        tell(g, "health_status", arg)
    elif what == "race" and arg in present:
        # An inspect asked before the health changed, answered after the loop's own.
        g.app.changes.on_fact(InspectAsked(-1))
        old = g.engine.containers[g.engine.id_of(arg)]
        g.engine.set(arg, health="unhealthy" if old.health == "healthy" else "healthy")
        tell(g, "health_status", arg)
        g.app.changes.on_fact(ContainerInspected(-1, old))
    elif what == "exit" and arg in present:
        g.engine.set(arg, state="exited", exit_code=1, finished_at=g.clock.now())
        tell(g, "die", arg)
    elif what == "silence":
        g.app.operator.silence(arg, timedelta(seconds=45), "maintenance", "alice")
    elif what == "unsilence" and g.store.active_silence(g.host, arg, g.clock.now()):
        g.app.operator.unsilence(arg, "alice")
    elif what == "remove" and arg in present:
        g.engine.remove(arg)
        tell(g, "destroy", arg)
    elif what == "recreate":
        if arg in present:
            g.engine.recreate(arg, health="healthy", state="running")
        else:
            g.engine.add(arg, health="starting", labels=LABELS.get(arg, WATCHED))
        tell(g, "start", arg)
    elif what in ("ack", "resolve"):
        for incident in g.store.open_incidents(g.host, arg):
            with contextlib.suppress(InvalidTransition):  # refused as the CLI refuses it
                g.app.operator.change(incident.id or 0, what, "alice", "seen")
    elif what == "tick":
        g.clock.advance(arg)
    elif what == "sweep":
        g.healer.sweep()
    elif what == "verify":
        g.verify()


def whole_delta(sent: dict[str, str], parts: dict[str, str]) -> dict[str, str]:
    """What the stream sends a page that shows `sent`, spelled out part by part."""
    if sent.get("order") != parts.get("order"):
        rest = {k: v for k, v in parts.items() if not k.startswith("row:") and k != "order"}
        return {k: v for k, v in rest.items() if k == "part-rows" or sent.get(k) != v}
    return {k: v for k, v in parts.items() if k not in ("order", "part-rows") and sent.get(k) != v}


def shown(d: PageData) -> tuple[Any, ...]:
    return (
        d.rows,
        d.summary,
        d.incidents,
        d.incidents_hidden,
        d.actions,
        d.dead_letters,
        d.silences,
    )


@settings(
    max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(steps=st.lists(STEPS, min_size=1, max_size=25))
# What the clock alone moves: a cooldown ends, a silence ends, a start grace passes.
@example(steps=[("unhealthy", "api"), ("unhealthy", "api"), ("tick", 31)])
@example(steps=[("unhealthy", "web"), ("silence", "web"), ("unhealthy", "web"), ("tick", 50)])
@example(steps=[("exit", "db"), ("tick", 10), ("verify", ""), ("tick", 31), ("sweep", "")])
# The host's budget: a third container waits for a minute's restarts to age.
@example(steps=[("exit", "db"), ("exit", "web"), ("exit", "queue"), ("tick", 50), ("tick", 10)])
# A maintenance window ends, then the next starts: nothing but the clock says so.
@example(steps=[("tick", 31), ("tick", 31)])
@example(steps=[("unhealthy", "queue"), ("tick", 31), ("sweep", "")])
@example(steps=[("unhealthy", "queue"), ("tick", 31), ("tick", 31)])
# A healthy container's silence runs out: nothing but the clock says so.
@example(steps=[("silence", "db"), ("tick", 50)])
# A start grace ends: unhealthy again right after its restart, judged 20 s later.
@example(steps=[("unhealthy", "web"), ("unhealthy", "web"), ("tick", 21)])
# A person resolves the dependency's incident: api is no longer held back by it.
@example(steps=[("exit", "db"), ("exit", "db"), ("unhealthy", "api"), ("resolve", "db")])
# A silence set, set again and lifted (each write told): the page shows none.
@example(steps=[("silence", "db"), ("silence", "db"), ("unsilence", "db")])
# A recreated container's incident is resolved and closed (two writes told): it leaves.
@example(steps=[("exit", "db"), ("recreate", "db"), ("sweep", "")])
# A dependency: api waits while db is sick, then goes.
@example(steps=[("exit", "db"), ("unhealthy", "api"), ("healthy", "db"), ("verify", "")])
def test_after_any_changes_the_page_shows_what_a_whole_read_shows(
    tmp_path_factory: Any, steps: list[tuple[str, Any]]
) -> None:
    g = fleet(tmp_path_factory.mktemp("fleet"))
    # Read whole only at first: what is kept must be exact.
    kept = Statuses(g.healer, g.app.operator, g.app.changes)
    page = PageReader(
        g.healer,
        g.app.operator,
        g.app.changes,
        monotonic=lambda: 0.0,
    )
    page.read(True), page.read(False), kept.read()
    # `afresh` renders only whole reads: new objects each time, none of its HTML kept by them.
    renderer, afresh = Renderer(), Renderer()
    sent = {signed: renderer.parts(page.read(signed), signed) for signed in (True, False)}
    seen = len(g.engine.restarts)
    for what, arg in steps:
        step(g, what, arg)
        seen = restarts_told(g, seen)
        assert kept.read() == container_status(g.healer, g.app.operator), (what, arg)
        for signed in (True, False):
            whole = PageReader(g.healer, g.app.operator, Changes(), monotonic=lambda: 0.0)
            d, fresh = page.read(signed), whole.read(signed)
            assert shown(d) == shown(fresh), (what, arg, signed)
            # The HTML kept from read to read is the HTML made afresh, and so is each step.
            parts = renderer.parts(d, signed)
            assert parts == afresh.parts(fresh, signed), (what, arg, signed)
            assert delta(sent[signed], parts) == whole_delta(sent[signed], parts)
            sent[signed] = parts
    assert kept.whole_reads == 1  # every read after the first brought the answer up to date


def counted(g: TestApp) -> list[list[str]]:
    """The names of each list request the engine gets from now on."""
    listed: list[list[str]] = []
    real = g.engine.list_containers
    g.engine.list_containers = lambda label, scope="", names=(): (  # type: ignore[method-assign]
        listed.append(sorted(names)) or real(label, scope, names)
    )
    return listed


def hundred(tmp: Path, **sections: Any) -> tuple[TestApp, PageReader, list[list[str]]]:
    """A hundred healthy containers, a page that read them, and the list requests after."""
    g = make_app(tmp, **sections)
    for n in range(100):
        g.engine.add(f"app-{n:03d}", health="healthy", labels=WATCHED)
    page = PageReader(g.healer, g.app.operator, g.app.changes)
    page.read(True)
    return g, page, counted(g)


def test_a_change_naming_one_container_lists_that_one_alone(tmp_path: Path) -> None:
    g, page, listed = hundred(tmp_path)
    g.engine.set("app-042", state="paused")
    tell(g, "pause", "app-042")  # the loop does not inspect a paused container
    lists, inspects = g.engine.list_calls, g.engine.inspect_calls
    rows = {r["name"]: r for r in page.read(True).rows}
    assert rows["app-042"]["state"] == "paused"
    assert listed == [["app-042"]]
    assert (g.engine.list_calls - lists, g.engine.inspect_calls - inspects) == (1, 0)
    assert page.statuses.whole_reads == 1


def test_a_container_the_loop_inspected_after_its_change_costs_the_page_no_request(
    tmp_path: Path,
) -> None:
    g, page, listed = hundred(tmp_path, restart={"action": "notify"})
    g.engine.set("app-042", health="unhealthy")
    inspects = g.engine.inspect_calls
    tell(g, "health_status", "app-042")  # the loop inspects it, opens its incident
    assert g.engine.inspect_calls - inspects == 1
    data = page.read(True)
    rows = {r["name"]: r for r in data.rows}
    assert rows["app-042"]["state"] == "unhealthy" and rows["app-042"]["incident"]
    assert [i["container"] for i in data.incidents] == ["app-042"]
    assert (listed, g.engine.inspect_calls - inspects) == ([], 1)
    assert page.statuses.whole_reads == 1


def test_an_inspect_asked_before_a_change_is_never_taken_for_after_it(tmp_path: Path) -> None:
    """The loop's inspect of a container races the engine: asked before the container changed
    and answered after the change was announced, it shows the old state; the page asks again."""
    g = make_app(tmp_path, restart={"action": "notify"})
    g.engine.add("web", health="healthy", labels=WATCHED)
    page = PageReader(g.healer, g.app.operator, g.app.changes)
    page.read(True)
    listed = counted(g)
    g.app.changes.on_fact(InspectAsked(1))
    before = g.engine.inspect(g.engine.id_of("web"))
    assert before is not None
    g.engine.set("web", health="unhealthy")
    g.app.changes.on_fact(EngineEventSeen("web", "health_status"))
    g.app.changes.on_fact(ContainerInspected(1, before))  # its answer arrives after the change
    assert [r["state"] for r in page.read(True).rows] == ["unhealthy"]
    assert listed == [["web"]]
    # Asked after the change, an answer stands until the next change names the container.
    g.app.changes.on_fact(InspectAsked(2))
    after = g.engine.inspect(g.engine.id_of("web"))
    assert after is not None
    g.app.changes.on_fact(ContainerInspected(2, after))
    g.engine.set("web", health="healthy")
    g.app.changes.changed(["web"])
    assert [r["state"] for r in page.read(True).rows] == ["healthy"]
    assert listed == [["web"], ["web"]]


def test_a_write_of_another_process_reaches_the_page_after_the_next_sweep(tmp_path: Path) -> None:
    """`guardian silence` writes the store from another process, which tells the daemon
    nothing: the sweep looks for such writes and the page then reads everything again."""
    g = make_app(tmp_path, daemon=True)
    g.engine.add("web", health="healthy", labels=WATCHED)
    daemon = Daemon(g.app)
    daemon.sweep_job()
    page = PageReader(g.healer, g.app.operator, g.app.changes)
    assert [r["silenced_until"] for r in page.read(True).rows] == [""]
    cli = SqliteStore(g.app.settings["store.path"])  # the CLI's own connection
    try:
        operator = build_operator(g.app.settings, store=cli, clock=g.clock, host=g.host)
        operator.silence("web", timedelta(hours=1), "maintenance", "alice")
    finally:
        cli.close()
    assert page.read(True).silences == []  # nothing told the daemon yet
    daemon.sweep_job()
    data = page.read(True)
    assert [s["container"] for s in data.silences] == ["web"]
    assert [r["silenced_until"] != "" for r in data.rows] == [True]


@contextmanager
def statements(g: TestApp) -> Iterator[list[str]]:
    """Every SQL statement the store runs meanwhile."""
    ran: list[str] = []
    conn: sqlite3.Connection = g.store.db._conn  # noqa: SLF001 -- a test's view of the queries
    conn.set_trace_callback(ran.append)
    try:
        yield ran
    finally:
        conn.set_trace_callback(None)


def test_a_write_about_one_incident_reads_its_timeline_alone_of_a_hundred(tmp_path: Path) -> None:
    g = make_app(tmp_path, restart={"action": "notify"})
    for n in range(100):
        g.engine.add(f"app-{n:03d}", health="unhealthy", labels=WATCHED)
    g.healer.sweep()  # a hundred open incidents (notify: none restarted)
    page = PageReader(g.healer, g.app.operator, g.app.changes)
    assert len(page.read(True).incidents) == 100
    incident = g.store.open_incidents(g.host, "app-007")[0]
    with statements(g) as ran:
        g.app.operator.change(incident.id or 0, "ack", "alice", "looking")
        data = page.read(True)
    timelines = [s for s in ran if "FROM transitions" in s]
    assert len(timelines) == 1 and str(incident.id) in timelines[0]
    acked = next(i for i in data.incidents if i["id"] == incident.id)
    assert acked["state"] == "acknowledged"
    assert any("looking" in str(e) for e in acked["timeline"])


def test_a_long_timeline_is_read_and_shown_as_its_newest_entries(tmp_path: Path) -> None:
    """A container flapping all day reopens its incident hundreds of times: the page reads the
    newest entries only, and shows what the whole timeline ends with."""
    g = make_app(tmp_path, restart={"action": "notify"})
    g.engine.add("flap", health="healthy", labels=WATCHED)
    page = PageReader(g.healer, g.app.operator, g.app.changes)
    for n in range(151):  # ends unhealthy: the incident open
        g.engine.set("flap", health="unhealthy" if n % 2 == 0 else "healthy")
        tell(g, "health_status", "flap")
        g.clock.advance(1)
    [incident] = g.store.open_incidents(g.host, "flap")
    whole = timeline_view(g.app.operator.timeline(incident))
    assert len(whole) > 150
    with statements(g) as ran:
        [shown] = page.read(True).incidents
    assert shown["timeline"] == whole[-MAX_TIMELINE:] and shown["timeline_more"]
    [transitions] = [s for s in ran if "FROM transitions" in s]
    assert transitions.endswith(f"LIMIT {MAX_TIMELINE + 1}")
    # A transition is never changed: the next read reads on from the last one it has.
    last = g.store.transitions(incident.id or 0)[-1].id
    with statements(g) as ran:
        g.app.operator.change(incident.id or 0, "ack", "alice", "looking")
        [shown] = page.read(True).incidents
    whole = timeline_view(g.app.operator.timeline(incident))
    assert shown["timeline"] == whole[-MAX_TIMELINE:] and shown["timeline"][-1]["actor"] == "alice"
    [transitions] = [s for s in ran if "FROM transitions" in s]
    assert f"AND id>{last} " in transitions
    # Resolved (no longer shown), then reopened: still read on from the last one read.
    last = g.store.transitions(incident.id or 0)[-1].id
    for health in ("healthy", "unhealthy"):
        g.engine.set("flap", health=health)
        tell(g, "health_status", "flap")
        g.clock.advance(1)
        with statements(g) as ran:
            shown_now = page.read(True).incidents
    assert [i["id"] for i in shown_now] == [incident.id]
    [transitions] = [s for s in ran if "FROM transitions" in s]
    assert f"AND id>{last} " in transitions


def test_since_names_what_changed_and_everything_when_it_cannot() -> None:
    changes = Changes()
    changes.changed(["web"])
    changes.wrote("db", 7, kind=Record.INCIDENTS)
    changes.delivery_ended()
    version, since = changes.since(0)
    assert version == 3
    wrote = frozenset({Record.INCIDENTS, Record.DELIVERIES})
    assert since == Since(
        frozenset({"web"}),
        frozenset({"db"}),
        frozenset({7}),
        wrote,
        True,
        incidents_written={"db": None},  # the incident written untold: read it again
    )
    changes.wrote("db")  # what it wrote untold: maybe anything
    assert changes.since(3)[1].wrote == frozenset(Record)
    version = changes.version
    assert changes.since(1)[1].engine == frozenset()
    assert changes.since(version) == (version, NOTHING)
    changes.wrote()  # about anything
    assert changes.since(version)[1] == EVERYTHING
    for _ in range(LOG + 1):
        changes.changed(["web"])
    assert changes.since(version + 1)[1] == EVERYTHING  # further behind than the log reaches
    assert changes.since(changes.version - 1)[1] == replace(NOTHING, engine=frozenset({"web"}))


def test_the_incidents_writes_told_are_the_latest_of_each_and_none_if_one_was_untold() -> None:
    at = datetime(2026, 1, 1, tzinfo=UTC)
    active, resolved, other = (
        Incident(n, "h", "db", "id", ProblemType.UNHEALTHY, state, at, at)
        for n, state in (
            (7, IncidentState.ACTIVE),
            (7, IncidentState.RESOLVED),
            (8, IncidentState.ACTIVE),
        )
    )
    changes = Changes()
    for written in (active, other, resolved):
        changes.wrote("db", written.id, kind=Record.INCIDENTS, written=written)
    changes.wrote("web", None, False, Record.SILENCES)
    assert changes.since(0)[1].incidents_written == {"db": {7: resolved, 8: other}}
    assert changes.since(2)[1].incidents_written == {"db": {7: resolved}}
    changes.wrote("db", 9, kind=Record.INCIDENTS)  # a write that did not tell it
    assert changes.since(0)[1].incidents_written == {"db": None}


def test_the_silences_writes_told_are_the_latest_of_each_and_none_if_one_was_untold() -> None:
    at = datetime(2026, 1, 1, tzinfo=UTC)
    first, second, other = (
        Silence(n, "h", name, at, at + timedelta(hours=1), "", "alice")
        for n, name in ((1, "db"), (2, "db"), (3, "web"))
    )
    lifted = replace(second, ended_at=at, ended_by="alice")
    changes = Changes()
    for written in (first, other, second, lifted):
        changes.wrote(written.container, None, False, Record.SILENCES, written)
    changes.wrote("db", 9, kind=Record.INCIDENTS)  # not about silences
    assert changes.since(0)[1].silences_written == {"db": lifted, "web": other}
    assert changes.since(3)[1].silences_written == {"db": lifted}
    changes.wrote("web", None, False, Record.SILENCES)  # a write that did not tell it
    assert changes.since(0)[1].silences_written is None


def test_a_sweep_names_the_containers_that_came_went_or_changed() -> None:
    from tests.fakes import FakeClock, FakeEngine

    engine = FakeEngine(FakeClock())
    for name in ("a", "b", "c"):
        engine.add(name, health="healthy", labels=WATCHED)
    changes = Changes()
    changes.listed(engine.list_containers("guardian.enable"))
    version = changes.version
    changes.listed(engine.list_containers("guardian.enable"))
    assert changes.version == version  # nothing differs: no change
    engine.set("a", health="unhealthy")
    engine.remove("b")
    engine.recreate("c")  # the same state and health under a new id
    engine.add("d", health="healthy", labels=WATCHED)
    changes.listed(engine.list_containers("guardian.enable"))
    assert changes.since(version)[1].engine == frozenset({"a", "b", "c", "d"})


def test_a_step_of_the_wall_clock_is_news_about_every_container(tmp_path: Path) -> None:
    g = fleet(tmp_path)
    version = g.app.changes.version
    g.app.loop.follow_step(timedelta(hours=-1))
    assert g.app.changes.since(version)[1] == EVERYTHING


def test_a_write_landing_between_the_rows_and_the_lists_reaches_both(tmp_path: Path) -> None:
    """The rows are read, then the store's lists: a write landing between the two is in the
    lists the next time, never stamped as seen by a read that did not see it."""
    g = make_app(tmp_path, restart={"action": "notify"})
    g.engine.add("web", health="healthy", labels=WATCHED)
    page = PageReader(g.healer, g.app.operator, g.app.changes)
    page.read(True)
    g.engine.set("web", health="unhealthy")
    rows_of = page.statuses.read_changed

    def rows_then_a_write() -> Any:
        rows = rows_of()
        page.statuses.read_changed = rows_of  # once
        tell(g, "health_status", "web")  # the loop opens the incident meanwhile
        return rows

    page.statuses.read_changed = rows_then_a_write  # type: ignore[method-assign]
    page.read(True)
    data = page.read(True)
    [row] = data.rows
    assert row["incident"] and [i["id"] for i in data.incidents] == [row["incident"]]


def test_a_write_reads_again_only_the_lists_of_its_kind(tmp_path: Path) -> None:
    """An incident and the decision about it written: the recent actions are read again (the
    incident as its write told it), not the silences or the dead letters; a silence written:
    nothing (the silence as its write told it)."""
    g = make_app(tmp_path, restart={"action": "notify"})
    g.engine.add("web", health="healthy", labels=WATCHED)
    asked: list[int] = []  # the outbox asked for its dead letters
    page = PageReader(g.healer, g.app.operator, g.app.changes, lambda n: asked.append(n) or [])
    page.read(True)

    def tables(ran: list[str]) -> set[str]:
        """The page's lists read (a decision's own reads name the container)."""
        lists = {
            "incidents": "SELECT * FROM incidents WHERE",
            "silences": "SELECT * FROM silences WHERE host",
            "actions": "SELECT * FROM actions WHERE host",
            "dead letters": "FROM dead_letters",
        }
        return {
            name
            for name, start in lists.items()
            for q in ran
            if start in q and "container=" not in q and "incident_id=" not in q
        }

    g.engine.set("web", health="unhealthy")
    tell(g, "health_status", "web")  # notify: an incident and the decision recorded
    with statements(g) as ran:
        shown = page.read(True)
    assert [i["container"] for i in shown.incidents] == ["web"]
    assert [a["container"] for a in shown.actions] == ["web"]
    assert tables(ran) == {"actions"}
    # The incident as its write left it in the store: no open incidents read again.
    assert not [q for q in ran if "FROM incidents WHERE host='h' AND container='web'" in q]
    # A silence set, then lifted: each as its write told it, no silences read again.
    g.app.operator.silence("web", timedelta(hours=1), "maintenance", "alice")
    with statements(g) as ran:
        shown = page.read(True)
    assert [s["container"] for s in shown.silences] == ["web"]
    assert [r["silenced_until"] != "" for r in shown.rows] == [True]
    assert tables(ran) == set()
    g.app.operator.unsilence("web", "alice")
    with statements(g) as ran:
        shown = page.read(True)
    assert shown.silences == [] and [r["silenced_until"] for r in shown.rows] == [""]
    assert tables(ran) == set()
    assert len(asked) == 1  # the first read's
    g.app.changes.delivery_ended()
    page.read(True)
    assert len(asked) == 2
