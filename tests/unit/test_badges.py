"""Badges (GET /badge/<name>.svg) through the port's own routes and WSGI front, over a fake
engine: the state `guardian status` reads, no oracle for names, hostile text kept as text."""

from __future__ import annotations

import io
import xml.etree.ElementTree as ET
from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest

from guardian.config import ConfigError, load_settings
from guardian.core.facts import EngineEventSeen
from guardian.entrypoints.badge import render, text_width
from guardian.entrypoints.health import routes
from guardian.entrypoints.http_server import wsgi_app
from guardian.readside.badges import MAX_AGE, Badges
from guardian.runtime.http_front import Front
from tests.app import TestApp, make_app, settings_for

SVG_NS = "{http://www.w3.org/2000/svg}"
LISTEN = "127.0.0.1:9321"


@pytest.fixture
def g(tmp_path: Path) -> Iterator[TestApp]:
    t = make_app(tmp_path, page={"badges": ["web", "api-*"]})
    t.engine.add("web")
    t.engine.add("api-1")
    t.engine.add("db")  # watched, but page.badges does not name it
    yield t
    t.store.close()


def serve(g: TestApp) -> Any:
    ok = lambda: (True, "ok")  # noqa: E731 - the checks do not matter here
    return wsgi_app(routes(g.app, ok, ok), Front.of(LISTEN))


def call(
    app: Any, path: str, host: str = LISTEN, method: str = "GET", **extra: str
) -> tuple[int, dict[str, str], bytes]:
    seen: dict[str, Any] = {}

    def start_response(status: str, headers: list[tuple[str, str]]) -> None:
        seen["status"], seen["headers"] = int(status.split()[0]), dict(headers)

    environ = {
        "REQUEST_METHOD": method,
        "PATH_INFO": path,
        "QUERY_STRING": "",
        "REMOTE_ADDR": "127.0.0.1",
        "HTTP_HOST": host,
        "wsgi.input": io.BytesIO(),
        **extra,
    }
    body = b"".join(app(environ, start_response))
    return seen["status"], seen["headers"], body


def texts(svg: bytes) -> list[str]:
    root = ET.fromstring(svg)
    return [t.text or "" for t in root.iter(f"{SVG_NS}text")]


def test_a_listed_badge_is_an_svg_naming_its_state_healthy_then_unhealthy(g: TestApp) -> None:
    app = serve(g)
    status, headers, body = call(app, "/badge/web.svg")
    assert status == 200
    assert headers["Content-Type"] == "image/svg+xml"
    assert headers["Cache-Control"] == "max-age=60, s-maxage=60"
    assert headers["X-Content-Type-Options"] == "nosniff"
    assert "default-src 'none'" in headers["Content-Security-Policy"]
    assert texts(body) == ["web", "web", "healthy", "healthy"]

    g.engine.set("web", health="unhealthy")
    g.app.changes.on_fact(EngineEventSeen("web", "health_status"))  # the event the loop reads
    status, _, body = call(app, "/badge/web.svg")
    assert status == 200
    assert texts(body)[2:] == ["unhealthy", "unhealthy"]
    assert g.restarted() == []  # a badge reads; it never acts


def test_a_glob_lists_badges_and_an_unchanged_badge_answers_304_to_its_etag(g: TestApp) -> None:
    app = serve(g)
    status, headers, body = call(app, "/badge/api-1.svg")
    assert status == 200 and texts(body)[0] == "api-1"
    again = call(app, "/badge/api-1.svg", HTTP_IF_NONE_MATCH=headers["ETag"])
    assert again[0] == 304 and again[2] == b""


@pytest.mark.parametrize(
    "path",
    [
        "/badge/db.svg",  # exists and is watched, but not listed
        "/badge/api-9.svg",  # listed by the glob, but no such container
        "/badge/nothere.svg",
        "/badge/web",  # not a badge's path
        "/badge/evil<script>&\"'.svg",  # no container is named so
        "/badge/../metrics.svg",
        "/badge/web/../../etc/passwd.svg",
        "/badge/" + "a" * 300 + ".svg",
        "/badge/.svg",
    ],
)
def test_an_unlisted_unknown_or_impossible_name_is_the_same_404(g: TestApp, path: str) -> None:
    app = serve(g)
    reference = call(app, "/no-such-path")
    answer = call(app, path)
    assert answer[0] == 404
    assert answer[2] == reference[2]  # byte for byte: nothing tells one name from another
    assert answer[1] == reference[1]


def test_an_unlisted_name_costs_the_engine_nothing(g: TestApp) -> None:
    app = serve(g)
    before = g.engine.list_calls
    for n in range(50):
        assert call(app, f"/badge/db{n}.svg")[0] == 404
    assert g.engine.list_calls == before


def test_many_reads_of_listed_names_cost_one_listing_until_something_changes(g: TestApp) -> None:
    t = [1000.0]
    badges = Badges(g.healer, g.app.operator, g.app.changes, ["*"], monotonic=lambda: t[0])
    before = g.engine.list_calls
    for n in range(20):
        assert badges.state("web") == "healthy"
        assert badges.state(f"gone-{n}") is None
    assert g.engine.list_calls == before + 1
    t[0] += MAX_AGE  # the clock alone may change an answer (a window starts): read again
    assert badges.state("web") == "healthy"
    assert g.engine.list_calls == before + 2


def test_a_listed_name_is_unknown_while_the_engine_does_not_answer(g: TestApp) -> None:
    badges = Badges(g.healer, g.app.operator, g.app.changes, ["web", "ghost"])
    g.engine.reachable = False
    # Whether the container exists is not known either: both listed names say the same.
    assert badges.state("web") == badges.state("ghost") == "unknown"
    assert badges.state("db") is None


def test_a_name_that_needs_escaping_stays_text_in_the_svg() -> None:
    hostile = "evil<script>alert(1)</script>&amp;\"'"
    svg = render(hostile, "healthy")
    root = ET.fromstring(svg)
    assert texts(svg) == [hostile, hostile, "healthy", "healthy"]
    assert root.find(f"{SVG_NS}title") is not None
    assert root.findtext(f"{SVG_NS}title") == f"{hostile}: healthy"
    assert root.get("aria-label") == f"{hostile}: healthy"
    assert not [e for e in root.iter() if e.tag.endswith("script")]


def test_the_badge_grows_with_its_text() -> None:
    short, long = ET.fromstring(render("a", "healthy")), ET.fromstring(render("a" * 40, "healthy"))
    assert int(long.get("width", "0")) - int(short.get("width", "0")) == text_width("a" * 39)


def test_a_badge_for_another_host_name_is_misdirected(g: TestApp) -> None:
    status, headers, _ = call(serve(g), "/badge/web.svg", host="rebind.attacker.example:9321")
    assert status == 421
    assert headers["X-Content-Type-Options"] == "nosniff"


def test_a_badge_is_read_only(g: TestApp) -> None:
    status, headers, _ = call(serve(g), "/badge/web.svg", method="POST")
    assert status == 405 and headers["Allow"] == "GET, HEAD"
    status, headers, body = call(serve(g), "/badge/web.svg", method="HEAD")
    assert status == 200 and body == b"" and int(headers["Content-Length"]) > 0


def badge_of(t: TestApp, name: str) -> str | None:
    return Badges(t.healer, t.app.operator, t.app.changes, ["*"]).state(name)


def test_each_condition_has_its_word(tmp_path: Path) -> None:
    t = make_app(tmp_path, restart={"dry_run": True})
    for name in ("ok", "down", "held", "quiet", "busy", "new"):
        t.engine.add(name)
    t.engine.set("down", state="exited", health=None, exit_code=1)
    t.engine.set("held", health="unhealthy")  # dry run: decide() holds the restart back
    t.engine.set("quiet", health="unhealthy")
    t.app.operator.silence("quiet", timedelta(hours=1), "disk swap", "ops")
    t.engine.set("busy", state="restarting")
    t.engine.set("new", health="starting")
    said = {n: badge_of(t, n) for n in ("ok", "down", "held", "quiet", "busy", "new")}
    assert said == {
        "ok": "healthy",
        "down": "stopped",
        "held": "held back",
        "quiet": "in maintenance",
        "busy": "restarting",
        "new": "starting",
    }
    t.store.close()


def test_page_badges_takes_name_globs_from_the_file_and_the_environment(tmp_path: Path) -> None:
    assert load_settings(None, env={})["page.badges"] == ()
    env = {"GUARDIAN_PAGE_BADGES": "web, api-*"}
    assert load_settings(None, env=env)["page.badges"] == ("web", "api-*")
    with pytest.raises(ConfigError, match=r"page.badges .*container name globs"):
        settings_for(tmp_path, {"page": {"badges": ["web/../db"]}})
