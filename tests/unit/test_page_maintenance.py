"""The status page shows each container's maintenance windows as `guardian status` words them:
in force until when, the next start; for healthy containers too, bounded per row, and brought
up to date when a window starts or ends with nothing else changing."""

from __future__ import annotations

import re
from pathlib import Path

from guardian.entrypoints.page.render import Renderer
from guardian.readside.changes import Changes
from guardian.readside.page import MAX_WINDOWS_SHOWN, PageReader
from guardian.readside.status import container_status
from guardian.readside.views import maintenance_view
from tests.app import make_app

# T0 is 2026-01-01 12:00 UTC: a window from 11:30 for an hour holds until 12:30.
NOON_WINDOW = {"containers": "db-*", "cron": "30 11 * * *", "duration": "1h"}
BERLIN_LABEL = {"guardian.enable": "true", "guardian.maintenance": "0 2 * * * 1h Europe/Berlin"}


class Monotonic:
    def __init__(self) -> None:
        self.t = 0.0

    def __call__(self) -> float:
        return self.t


def cell(html: str, container: str) -> str:
    """The maintenance cell of `container`'s row, as HTML."""
    row = re.search(rf'<tr data-container="{re.escape(container)}".*?</tr>', html, re.S)
    assert row is not None, f"no row for {container}"
    found = re.search(r'<td data-col="maintenance">(.*?)</td>', row.group(0), re.S)
    assert found is not None
    return found.group(1)


def rows_html(reader: PageReader) -> str:
    return Renderer().parts(reader.read(False), False)["part-rows"]


def test_a_container_in_its_window_shows_it_in_force_until_its_end_and_the_next_start(
    tmp_path: Path,
) -> None:
    g = make_app(tmp_path, maintenance={"windows": [NOON_WINDOW]})
    g.engine.add("db-main", health="healthy")
    html = cell(rows_html(PageReader(g.healer, g.app.operator, g.app.changes)), "db-main")
    assert "in force</span> until" in html
    assert '<time datetime="2026-01-01T12:30:00+00:00">2026-01-01 12:30:00 UTC</time>' in html
    assert 'next <time datetime="2026-01-02T11:30:00+00:00">2026-01-02 11:30:00 UTC</time>' in html
    assert "(30 11 * * * for 1h (UTC), maintenance.windows[0])" in html


def test_a_healthy_container_outside_its_window_shows_the_next_start_as_guardian_status_does(
    tmp_path: Path,
) -> None:
    g = make_app(tmp_path)
    g.engine.add("web", health="healthy", labels=BERLIN_LABEL)
    g.engine.add("plain", health="healthy", labels={"guardian.enable": "true"})
    html = rows_html(PageReader(g.healer, g.app.operator, g.app.changes))
    [status] = maintenance_view(container_status(g.healer, g.app.operator), g.clock.now())
    assert status["in_force_until"] is None
    assert status["next_start"] == "2026-01-02T01:00:00+00:00"  # 02:00 in Berlin's winter
    web = cell(html, "web")
    assert "in force" not in web
    assert f'next <time datetime="{status["next_start"]}">2026-01-02 01:00:00 UTC</time>' in web
    assert "(0 2 * * * for 1h (Europe/Berlin), label guardian.maintenance)" in web
    assert cell(html, "plain") == "–"


def test_a_row_shows_a_bounded_number_of_windows_those_in_force_first(tmp_path: Path) -> None:
    later = [
        {"containers": "*", "cron": f"0 {h} * * *", "duration": "1h"} for h in (20, 18, 16, 14)
    ]
    g = make_app(tmp_path, maintenance={"windows": [*later, NOON_WINDOW]})
    g.engine.add("db-main", health="healthy")
    html = cell(rows_html(PageReader(g.healer, g.app.operator, g.app.changes)), "db-main")
    assert html.count("<br>") == MAX_WINDOWS_SHOWN  # three windows and the line of the rest
    assert html.index("in force") < html.index("0 14 * * *") < html.index("0 16 * * *")
    assert "0 18 * * *" not in html and "0 20 * * *" not in html
    assert "and 2 more: <code>guardian status</code>" in html


def test_a_window_that_ends_with_nothing_else_changing_wakes_the_page_and_leaves_its_row(
    tmp_path: Path,
) -> None:
    # A window that ends at 12:20, between two slides of the rows' strips (every 30 minutes, when
    # every row is made again).
    window = {**NOON_WINDOW, "cron": "20 11 * * *"}
    g = make_app(tmp_path, maintenance={"windows": [window]})
    g.engine.add("db-main", health="healthy")
    g.engine.add("web", health="healthy", labels={"guardian.enable": "true"})
    monotonic = Monotonic()
    changes = Changes(monotonic=monotonic)
    reader = PageReader(g.healer, g.app.operator, changes)
    renderer = Renderer()
    first = renderer.parts(reader.read(False), False)
    assert "in force" in cell(first["row:db-main"], "db-main")
    version = changes.version
    assert changes.wait(version, 0.01) == version  # nothing until the window's end

    g.clock.advance(minutes=20)  # 12:20: the window ends
    monotonic.t += 20 * 60
    assert changes.wait(version, 1.0) == version + 1  # the clock alone changed the page
    then = renderer.parts(reader.read(False), False)
    assert "in force" not in cell(then["row:db-main"], "db-main")
    assert "next <time" in cell(then["row:db-main"], "db-main")
    assert then["row:web"] is first["row:web"]  # the other rows were not made again


def test_a_window_due_reaches_a_page_that_is_not_waiting_at_the_next_sweep() -> None:
    monotonic = Monotonic()
    changes = Changes(monotonic=monotonic)
    changes.due(60.0)
    changes.listed([])
    assert changes.version == 0
    monotonic.t = 60.0
    changes.listed([])
    assert changes.version == 1
    changes.listed([])
    assert changes.version == 1  # once


def test_a_hostile_name_or_label_never_becomes_markup_in_the_window_cell(tmp_path: Path) -> None:
    hostile = 'evil<script>alert(1)</script>"'
    g = make_app(tmp_path, maintenance={"windows": [{**NOON_WINDOW, "containers": "evil*"}]})
    g.engine.add(hostile, health="healthy", labels={"guardian.enable": "true"})
    g.engine.add(
        "web",
        health="healthy",
        labels={"guardian.enable": "true", "guardian.maintenance": "0 2 * * * 1h <b>x</b>"},
    )
    html = rows_html(PageReader(g.healer, g.app.operator, g.app.changes))
    assert "<script>" not in html and "<b>" not in html
    assert "evil&lt;script&gt;alert(1)&lt;/script&gt;&#34;" in html
    assert "in force" in cell(html, "evil&lt;script&gt;alert(1)&lt;/script&gt;&#34;")
    assert cell(html, "web") == "–"  # a label that is no window is refused, not shown
