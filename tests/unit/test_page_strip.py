"""The status page's strip: a container's last 24 hours in 48 slots of 30 minutes, each the
worst shade seen in it, the actions as marks, an open incident as a bar; read for every
container at once and drawn as inline SVG whose names are text."""

from __future__ import annotations

import re
from datetime import UTC, datetime, timedelta
from pathlib import Path

from guardian.core.history import ContainerHistory, Mark, Shade, Span
from guardian.entrypoints.page.render import Renderer
from guardian.readside.changes import Changes
from guardian.readside.page import PageReader
from guardian.readside.strip import SLOT, SLOTS, coverage, first_slot, strip, strip_view
from tests.app import make_app

NOW = datetime(2026, 1, 1, 12, 10, tzinfo=UTC)  # in the slot 12:00 to 12:30, the last
START = first_slot(NOW)  # 2025-12-31 12:30
ALWAYS = ((START - timedelta(days=1), NOW),)  # Guardian ran all day


def at(hh: int, mm: int, ss: int = 0) -> datetime:
    return datetime(2026, 1, 1, hh, mm, ss, tzinfo=UTC)


def slot_of(t: datetime) -> int:
    return (t - START) // SLOT


def test_the_strip_is_the_last_day_in_48_slots_ending_with_the_one_now_runs_in() -> None:
    s = strip(coverage(ALWAYS, NOW), ContainerHistory(), NOW)
    assert datetime(2025, 12, 31, 12, 30, tzinfo=UTC) == START and len(s.slots) == SLOTS
    assert set(s.slots) == {Shade.HEALTHY} and s.marks == () and s.open_since is None
    [run] = strip_view(s)["runs"]
    assert run["label"] == "31 Dec 12:30 to 12:30 UTC: healthy" and run["w"] == 480


def test_each_slot_shows_the_worst_it_saw() -> None:
    history = ContainerHistory(
        spans=(
            Span(Shade.MAINTENANCE, at(9, 0), at(11, 0)),  # a silence
            Span(Shade.UNHEALTHY, at(10, 5), at(10, 7), incident=3),  # two minutes of it
            Span(Shade.STOPPED, at(10, 20), at(10, 50), incident=4),
        )
    )
    s = strip(coverage(ALWAYS, NOW), history, NOW)
    assert s.slots[slot_of(at(9, 0))] is Shade.MAINTENANCE
    assert s.slots[slot_of(at(10, 0))] is Shade.UNHEALTHY  # worse than stopped and maintenance
    assert s.slots[slot_of(at(10, 30))] is Shade.STOPPED
    assert s.slots[slot_of(at(11, 0))] is Shade.HEALTHY


def test_a_span_ending_on_a_slots_boundary_leaves_the_next_slot_alone() -> None:
    history = ContainerHistory(spans=(Span(Shade.UNHEALTHY, at(8, 0), at(8, 30), incident=1),))
    s = strip(coverage(ALWAYS, NOW), history, NOW)
    assert s.slots[slot_of(at(8, 0))] is Shade.UNHEALTHY
    assert s.slots[slot_of(at(8, 30))] is Shade.HEALTHY
    assert s.slots[slot_of(at(7, 30))] is Shade.HEALTHY
    labels = [r["label"] for r in strip_view(s)["runs"]]
    assert "01 Jan 08:00 to 08:30 UTC: unhealthy" in labels


def test_slots_guardian_did_not_run_for_most_of_are_unknown_but_never_the_present() -> None:
    # Ran from 06:00 to 06:40, then again from 11:50 (and not for this minute, as read).
    runs = ((at(6, 0), at(6, 40)), (at(11, 50), at(11, 55)))
    s = strip(coverage(runs, NOW), ContainerHistory(), NOW)
    assert s.slots[slot_of(at(6, 0))] is Shade.HEALTHY  # all of it
    assert s.slots[slot_of(at(6, 30))] is Shade.UNKNOWN  # ten minutes of thirty
    assert s.slots[slot_of(at(11, 30))] is Shade.UNKNOWN
    assert s.slots[0] is Shade.UNKNOWN and s.slots[-1] is Shade.HEALTHY
    # A problem seen while it ran is worse than not knowing the rest.
    seen = ContainerHistory(spans=(Span(Shade.UNHEALTHY, at(6, 35), at(6, 38), incident=9),))
    assert strip(coverage(runs, NOW), seen, NOW).slots[slot_of(at(6, 30))] is Shade.UNHEALTHY
    assert "unknown (Guardian not running)" in strip_view(s)["runs"][0]["label"]


def test_actions_are_marks_named_by_their_time_and_an_open_incident_is_a_bar() -> None:
    history = ContainerHistory(
        spans=(Span(Shade.UNHEALTHY, at(11, 40), None, incident=12),),
        marks=(
            Mark("restart", at(11, 45, 7), "succeeded"),
            Mark("stop", at(11, 58, 30), None),
            Mark("restart", START - timedelta(minutes=1), "succeeded"),  # before the strip
        ),
    )
    s = strip(coverage(ALWAYS, NOW), history, NOW, live=Shade.UNHEALTHY)
    assert s.open_since == at(11, 40) and s.open_incident == 12
    assert s.slots[slot_of(at(11, 30))] is Shade.UNHEALTHY and s.slots[-1] is Shade.UNHEALTHY
    view = strip_view(s)
    assert [m["label"] for m in view["marks"]] == [
        "restart at 01 Jan 11:45:07 UTC: succeeded",
        "stop at 01 Jan 11:58:30 UTC: pending",
    ]
    assert view["open"]["label"] == "incident #12 open since 01 Jan 11:40 UTC"
    assert 0 < view["marks"][0]["x"] < 480 and view["open"]["x"] + view["open"]["w"] == 480


def test_the_live_condition_shades_the_slot_now_runs_in() -> None:
    s = strip(coverage(ALWAYS, NOW), ContainerHistory(), NOW, live=Shade.STOPPED)
    assert s.slots[-1] is Shade.STOPPED and s.slots[-2] is Shade.HEALTHY


HOSTILE = 'x"><script>alert(1)</script>'


def test_a_restart_reaches_the_strip_read_for_every_container_at_once(tmp_path: Path) -> None:
    g = make_app(tmp_path)
    g.engine.add("web", health="healthy", labels={"guardian.enable": "true"})
    g.engine.add("db", health="healthy", labels={"guardian.enable": "true"})
    g.engine.add(HOSTILE, health="healthy", labels={"guardian.enable": "true"})
    changes = g.app.changes
    reader, renderer = PageReader(g.healer, g.app.operator, changes), Renderer()
    first = renderer.parts(reader.read(True), True)
    assert 'class="mark' not in first["part-rows"]
    g.engine.set("web", health="unhealthy")
    g.healer.sweep()
    g.verify()
    assert g.restarted() == ["web"]
    parts = renderer.parts(reader.read(True), True)
    web, db = parts["row:web"], parts["row:db"]
    assert 'class="mark mark-restart"' in web and "slot-unhealthy" in web
    restart = g.restarts()[0].requested_at
    assert f"restart at {restart:%d %b %H:%M:%S} UTC" in web
    assert "mark" not in db.replace("aria-", "") and "slot-unhealthy" not in db
    assert parts["row:db"] is first["row:db"]  # the healthy twin's row was not made again
    # A name that needs escaping stays text: in the row, the strip's name and its cells.
    hostile = parts[f"row:{HOSTILE}"]
    assert "<script>" not in hostile and "&lt;script&gt;" in hostile
    assert re.search(r'<svg class="strip"[^>]*aria-label="x&#34;&gt;&lt;script&gt;', hostile)
    # A whole read shows the very same.
    whole = PageReader(g.healer, g.app.operator, Changes()).read(True)
    assert [r["strip"] for r in whole.rows] == [r["strip"] for r in reader.read(True).rows]


def test_the_condition_is_one_phrase_for_the_row(tmp_path: Path) -> None:
    g = make_app(tmp_path)
    notify = {"guardian.enable": "true", "guardian.action": "notify"}
    g.engine.add("web", health="unhealthy", labels=notify)
    g.engine.add("api", health="unhealthy", labels={"guardian.enable": "true"})
    g.engine.add("db", health="healthy", labels={"guardian.enable": "true"})
    g.engine.add("job", state="exited", labels={"guardian.enable": "true"})
    g.healer.sweep()
    g.clock.advance(minutes=3)
    rows = {r["name"]: r for r in PageReader(g.healer, g.app.operator, Changes()).read(True).rows}
    assert rows["db"]["condition"] == "healthy"
    assert rows["job"]["condition"] == "stopped; held back (skipped: exit_code_ignored)"
    assert rows["web"]["condition"].startswith("unhealthy for 3 min; held back")
    assert rows["api"]["condition"] == "restarting"  # its restart is being verified


def test_a_silence_set_replaced_or_lifted_draws_the_strip_a_whole_read_draws(
    tmp_path: Path,
) -> None:
    """The page brings a strip up to date from the silence written, without a read of the
    store; whatever the sequence, the strips are those of a page that reads everything."""
    g = make_app(tmp_path)
    for name in ("web", "db"):
        g.engine.add(name, health="healthy", labels={"guardian.enable": "true"})
    reader = PageReader(g.healer, g.app.operator, g.app.changes)
    reader.read(True)
    op = g.app.operator
    steps = [
        lambda: op.silence("web", timedelta(hours=1), "deploy", "ops"),
        dict(minutes=40),
        lambda: op.silence("web", timedelta(minutes=10), "again", "ops"),  # replaces, shorter
        dict(minutes=5),
        lambda: op.unsilence("web", "ops"),
        dict(hours=2),
        lambda: op.silence("web", timedelta(hours=3), "later", "ops"),
        dict(minutes=1),
        lambda: op.unsilence("web", "ops"),
        lambda: op.silence("web", timedelta(hours=1), "same moment", "ops"),
        dict(minutes=50),
    ]
    statements: list[str] = []
    g.store.db.trace(statements.append)
    for step in steps:
        statements.clear()
        if isinstance(step, dict):  # the clock moves (the strip may slide: a whole read)
            g.clock.advance(**step)
        else:
            step()
        shown = [r["strip"] for r in reader.read(True).rows]
        wrote = not isinstance(step, dict)
        assert not (wrote and [s for s in statements if "FROM actions" in s])  # no history read
        whole = PageReader(g.healer, g.app.operator, Changes()).read(True)
        assert shown == [r["strip"] for r in whole.rows]
    g.store.db.trace(None)
    # Two writes between reads: the page reads the container's history again.
    op.silence("db", timedelta(hours=1), "one", "ops")
    g.clock.advance(minutes=45)
    op.unsilence("db", "ops")
    g.clock.advance(minutes=45)
    op.silence("db", timedelta(hours=1), "two", "ops")
    shown = [r["strip"] for r in reader.read(True).rows]
    whole = PageReader(g.healer, g.app.operator, Changes()).read(True)
    assert shown == [r["strip"] for r in whole.rows]
    assert all("'maintenance'" in str(strip) for strip in shown)
