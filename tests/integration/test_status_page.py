"""The status page in a real headless Chromium (Debian's chromium-headless-shell, driven by
Playwright) against a real `guardian run` and real containers: sign-in, the live page, actions,
cross-site refusals, public reads, accessibility, and no request leaving Guardian's host.
"""

from __future__ import annotations

import http.server
import json
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from datetime import datetime
from typing import Any
from zoneinfo import ZoneInfo

import pytest
import requests

from tests.helpers import wait_until
from tests.integration.browser import Browser, browser_or_fail
from tests.integration.conftest import RUN_ID

HEALTH = "test ! -f /run/sick"
WATCH = {"label": f"gdt.{RUN_ID}.watch"}
OPT_IN = {"enable": None, "labels": {WATCH["label"]: "true"}}
TOKEN = "page-integration-token-0123456789"
OUTPUT_MARKER = "CONTAINER-SAID-7f3a"


@pytest.fixture(scope="session")
def browser() -> Iterator[Browser]:
    b = browser_or_fail()
    yield b
    b.close()


def cli(g: Any, *args: str) -> str:
    done = subprocess.run(
        [sys.executable, "-m", "guardian.entrypoints.cli", *args, "--config", str(g.config_path)],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr
    return done.stdout


def row(page: Any, name: str) -> dict[str, str]:
    return page.evaluate(
        """name => {
            for (const tr of document.querySelectorAll('tr[data-container]')) {
                if (tr.dataset.container === name) {
                    return {state: tr.dataset.state, incident: tr.dataset.incident};
                }
            }
            return null;
        }""",
        name,
    )


# A function, not an expression: Playwright evaluates a function's source once, while the call
# that starts the wait is exempt from the page's Content-Security-Policy, then calls it at each
# poll; an expression is evaluated again at each poll, which the policy (no 'unsafe-eval')
# refuses once the first look did not find it true.
LIVE = "() => document.getElementById('live').textContent === 'live'"


def wait_row(page: Any, name: str, condition: str, timeout: float) -> float:
    """Wait (in the page, no reload) for the row of `name` to satisfy `condition` (JS over
    `r`, the row's dataset); returns the wall-clock time it did."""
    page.wait_for_function(
        f"""name => {{
            for (const tr of document.querySelectorAll('tr[data-container]')) {{
                if (tr.dataset.container === name) {{ const r = tr.dataset; return {condition}; }}
            }}
            return false;
        }}""",
        arg=name,
        timeout=timeout * 1000,
        polling=50,
    )
    return time.time()


def event_time(events: Any, name: str, action: str, after: float) -> float:
    return wait_until(
        lambda: next((t for a, t in events.of(name) if a == action and t >= after), None),
        20,
        message=f"{name} {action}",
    )


def sign_in(page: Any, url: str, token: str = TOKEN) -> None:
    page.goto(url + "/")
    page.fill("#token", token)
    page.fill("#name", "alice")
    page.click("button[type=submit]")


def test_sign_in_then_a_broken_container_shows_live_and_heals_without_reload(
    browser, containers, guardian, engine_events
):
    name = containers.run("page-live", health_cmd=HEALTH, **OPT_IN)
    containers.wait_health(name, "healthy")
    g = guardian(env={"GUARDIAN_API_TOKEN": TOKEN}, watch={**WATCH, "interval": "30s"})
    url = g.http_url
    page = browser.page(url)

    # Signed out: a sign-in form naming no container; a wrong token is refused.
    page.goto(url + "/")
    assert page.locator("input[type=password]").count() == 1
    assert name not in page.content()
    browser.assert_accessible(page)
    sign_in(page, url, "not-the-token")
    assert "not Guardian's API token" in page.inner_text("main")
    assert not [c for c in page.context.cookies() if c["name"] == "guardian_session"]
    assert name not in page.content()

    sign_in(page, url)
    [cookie] = [c for c in page.context.cookies() if c["name"] == "guardian_session"]
    assert cookie["httpOnly"] and cookie["sameSite"] == "Strict"
    assert TOKEN not in page.url
    wait_row(page, name, "r.state === 'healthy' && r.incident === ''", 10)
    page.wait_for_function(LIVE)
    page.evaluate("window.notReloaded = true")

    broken_at = containers.make_unhealthy(name)
    unhealthy = event_time(engine_events, name, "health_status: unhealthy", broken_at - 1)
    shown = wait_row(page, name, "r.incident !== ''", 10)
    assert shown - unhealthy <= 2.0, f"incident shown {shown - unhealthy:.2f}s after the event"
    incident = row(page, name)["incident"]
    assert page.locator(f"#incident-{incident}").count() == 1
    browser.assert_accessible(page)
    browser.assert_accessible(page, dark=True)

    healed = event_time(engine_events, name, "health_status: healthy", unhealthy)
    done = wait_row(page, name, "r.state === 'healthy' && r.incident === ''", 20)
    assert done - healed <= 5.0, f"healthy shown {done - healed:.2f}s after the engine's"
    assert page.evaluate("window.notReloaded") is True
    browser.assert_only_guardian(page, url)


def strip_of(page: Any, name: str) -> dict[str, Any]:
    """The strip of `name`'s row: its slots' shades and fills, its marks' names, tab stops."""
    return page.evaluate(
        """name => {
            for (const tr of document.querySelectorAll('tr[data-container]')) {
                if (tr.dataset.container !== name) { continue; }
                const svg = tr.querySelector('svg.strip');
                const named = sel => Array.from(svg.querySelectorAll(sel)).map(e => ({
                    cls: e.getAttribute('class'),
                    fill: getComputedStyle(e).fill,
                    title: e.querySelector('title').textContent,
                    tab: e.tabIndex,
                    role: e.getAttribute('role'),
                }));
                return {slots: named('rect.slot'), marks: named('rect.mark'),
                        bad: getComputedStyle(document.documentElement).getPropertyValue('--bad')};
            }
            return null;
        }""",
        name,
    )


def rgb(hex_colour: str) -> str:
    h = hex_colour.strip().lstrip("#")
    return "rgb({}, {}, {})".format(*(int(h[i : i + 2], 16) for i in (0, 2, 4)))


def test_a_restart_reaches_the_strip_of_the_open_page_and_a_healthy_twin_shows_none(
    browser, containers, guardian, engine_events
):
    sick = containers.run("page-strip", health_cmd=HEALTH, **OPT_IN)
    twin = containers.run("page-twin", health_cmd=HEALTH, **OPT_IN)
    containers.wait_health(sick, "healthy")
    containers.wait_health(twin, "healthy")
    g = guardian(env={"GUARDIAN_API_TOKEN": TOKEN}, watch={**WATCH, "interval": "30s"})
    url = g.http_url
    page = browser.page(url)
    sign_in(page, url)
    wait_row(page, sick, "r.state === 'healthy'", 10)
    page.wait_for_function(LIVE)
    page.evaluate("window.notReloaded = true")
    assert not strip_of(page, sick)["marks"]

    broken_at = containers.make_unhealthy(sick)
    restarted = event_time(engine_events, sick, "restart", broken_at - 1)
    page.wait_for_function(
        """name => Array.from(document.querySelectorAll('tr[data-container]')).some(
            tr => tr.dataset.container === name && tr.querySelector('rect.mark-restart'))""",
        arg=sick,
        timeout=10_000,
        polling=50,
    )
    shown = time.time()
    assert shown - restarted <= 2.0, f"restart mark shown {shown - restarted:.2f}s after it"
    assert page.evaluate("window.notReloaded") is True

    # Its outcome follows (the restart's verdict written).
    page.wait_for_function(
        """name => Array.from(document.querySelectorAll('tr[data-container]')).some(
            tr => tr.dataset.container === name && Array.from(
                tr.querySelectorAll('rect.mark-restart title')
            ).some(t => !t.textContent.endsWith('pending')))""",
        arg=sick,
        timeout=20_000,
    )
    strip = strip_of(page, sick)
    unhealthy = [s for s in strip["slots"] if "slot-unhealthy" in s["cls"]]
    assert unhealthy and unhealthy[0]["fill"] == rgb(strip["bad"])
    [mark] = strip["marks"]
    assert mark["tab"] == 0 and mark["role"] == "img"
    # Its name gives the restart's time (Guardian asks just before the engine's restart).
    when, _outcome = mark["title"].rsplit(": ", 1)
    said = datetime.strptime(when, "restart at %d %b %H:%M:%S UTC")
    engine = datetime.fromtimestamp(restarted, tz=ZoneInfo("UTC"))
    asked = engine.replace(day=said.day, hour=said.hour, minute=said.minute, second=said.second)
    assert -1 <= (engine - asked.replace(microsecond=0)).total_seconds() <= 10, mark["title"]
    assert page.get_by_role("img", name=mark["title"]).count() == 1  # its accessible name

    calm = strip_of(page, twin)
    assert not calm["marks"] and not [s for s in calm["slots"] if "slot-unhealthy" in s["cls"]]
    browser.assert_accessible(page)
    browser.assert_accessible(page, dark=True)
    browser.assert_only_guardian(page, url)


def test_acknowledge_and_silence_from_the_page_reach_the_store_and_cross_site_posts_fail(
    browser, containers, guardian
):
    name = containers.run("page-act", health_cmd=HEALTH, **OPT_IN)
    containers.wait_health(name, "healthy")
    g = guardian(
        env={"GUARDIAN_API_TOKEN": TOKEN},
        watch={**WATCH, "interval": "30s"},
        restart={"dry_run": True},  # the incident stays open for the person
    )
    url = g.http_url
    page = browser.page(url)
    sign_in(page, url)
    containers.make_unhealthy(name)
    wait_row(page, name, "r.incident !== ''", 20)
    incident = row(page, name)["incident"]

    # A page on another origin posts to Guardian with the session cookie (same site: SameSite
    # lets it through, the Origin check does not).
    evil = EvilSite(f"{url}/actions/ack", incident)
    try:
        responses: list[int] = []
        page.on("response", lambda r: responses.append(r.status) if "/actions/" in r.url else None)
        page.goto(evil.url)
        wait_until(lambda: responses, 10, message="the cross-site post answered")
        assert responses == [403]
    finally:
        evil.close()
    assert json.loads(cli(g, "incidents", "show", incident, "--json"))["incident"]["state"] == (
        "active"
    )

    page.goto(url + "/")
    page.click(f"text=Acknowledge #{incident}")
    assert f"Incident #{incident} acknowledged." in page.inner_text("main")
    shown = json.loads(cli(g, "incidents", "show", incident, "--json"))
    assert shown["incident"]["state"] == "acknowledged"
    assert any(e["actor"] == "alice" for e in shown["timeline"])

    page.fill("#silence-container", name)
    page.fill("#silence-for", "2h")
    page.fill("#silence-reason", "maintenance window")
    page.click("fieldset button[type=submit]")
    assert f"{name} silenced until" in page.inner_text("main")
    [silence] = json.loads(cli(g, "silences", "--json"))["silences"]
    assert silence["container"] == name and silence["reason"] == "maintenance window"
    wait_row(page, name, "true", 5)
    page.click(f"text=Unsilence {name}")
    assert json.loads(cli(g, "silences", "--json"))["silences"] == []
    browser.assert_only_guardian(page, url, also=evil.url)

    # Guardian stops while the page streams: the stream ends, Guardian exits at once.
    page.goto(url + "/")
    page.wait_for_function(LIVE)
    started = time.monotonic()
    assert g.stop() == 0
    assert time.monotonic() - started < 8


def test_public_reads_show_the_page_without_what_containers_printed(browser, containers, guardian):
    name = containers.run(
        "page-public", health_cmd=f"echo {OUTPUT_MARKER}; test ! -f /run/sick", **OPT_IN
    )
    containers.wait_health(name, "healthy")
    g = guardian(
        env={"GUARDIAN_API_TOKEN": TOKEN},
        watch={**WATCH, "interval": "30s"},
        restart={"dry_run": True},
        api={"public_reads": True},
    )
    url = g.http_url
    containers.make_unhealthy(name)
    [incident] = wait_until(
        lambda: requests.get(
            f"{url}/api/v1/incidents",
            params={"container": name},
            headers={"Authorization": f"Bearer {TOKEN}"},
            timeout=10,
        ).json()["incidents"],
        20,
        0.3,
        "an incident",
    )
    detail = requests.get(
        f"{url}/api/v1/incidents/{incident['id']}",
        headers={"Authorization": f"Bearer {TOKEN}"},
        timeout=10,
    ).json()
    assert OUTPUT_MARKER in json.dumps(detail)  # the container did print it

    page = browser.page(url)
    page.goto(url + "/")
    wait_row(page, name, "r.incident !== ''", 10)
    assert OUTPUT_MARKER not in page.content()
    assert page.locator("form[action='/actions/ack']").count() == 0
    browser.assert_accessible(page)
    browser.assert_only_guardian(page, url)


def window_cell(page: Any, name: str) -> str:
    """The maintenance cell of `name`'s row, as its text."""
    return page.evaluate(  # type: ignore[no-any-return]
        """name => {
            for (const tr of document.querySelectorAll('tr[data-container]')) {
                if (tr.dataset.container === name) {
                    return tr.querySelector('[data-col="maintenance"]').textContent;
                }
            }
            return null;
        }""",
        name,
    )


def wait_window(page: Any, name: str, condition: str, timeout: float) -> None:
    """Wait (in the page, no reload) for the maintenance cell of `name` to satisfy `condition`
    (JS over `c`, the cell's text)."""
    page.wait_for_function(
        f"""name => {{
            for (const tr of document.querySelectorAll('tr[data-container]')) {{
                if (tr.dataset.container === name) {{
                    const c = tr.querySelector('[data-col="maintenance"]').textContent;
                    return {condition};
                }}
            }}
            return false;
        }}""",
        arg=name,
        timeout=timeout * 1000,
        polling=100,
    )


def test_maintenance_windows_show_on_the_page_and_follow_the_clock_without_reload(
    browser, containers, guardian
):
    """A window every minute for 50 s is in force, ends and comes into force again on the open
    page by itself (no reload, no engine event); a nightly one shows its next start, the same as
    `guardian status`. The nightly one starts twelve hours from now in its zone: never in force
    while this runs. (50 s of each minute: the page most often opens inside the window, and the
    test waits for one end and one start, about 40 s, not for a whole minute more.)"""
    labels = {WATCH["label"]: "true"}
    hour = (datetime.now(ZoneInfo("Europe/Berlin")).hour + 12) % 24
    flipping = containers.run(
        "page-window",
        health_cmd=HEALTH,
        enable=None,
        labels={**labels, "guardian.maintenance": "* * * * * 50s"},
    )
    nightly = containers.run(
        "page-nightly",
        health_cmd=HEALTH,
        enable=None,
        labels={**labels, "guardian.maintenance": f"0 {hour} * * * 1h Europe/Berlin"},
    )
    containers.wait_health(flipping, "healthy")
    containers.wait_health(nightly, "healthy")
    g = guardian(env={"GUARDIAN_API_TOKEN": TOKEN}, watch={**WATCH, "interval": "30s"})
    url = g.http_url
    page = browser.page(url)
    sign_in(page, url)
    wait_row(page, nightly, "r.state === 'healthy'", 10)
    page.wait_for_function(LIVE)
    page.evaluate("window.notReloaded = true")

    windows = json.loads(cli(g, "status", "--json"))["maintenance"]
    [shown] = [w for w in windows if w["container"] == nightly]
    assert shown["in_force_until"] is None
    cell = window_cell(page, nightly)
    assert "in force" not in cell and f"(0 {hour} * * * for 1h (Europe/Berlin)" in cell
    starts = page.locator(f'tr[data-container="{nightly}"] [data-col="maintenance"] time')
    assert starts.first.get_attribute("datetime") == shown["next_start"]

    wait_window(page, flipping, "c.includes('in force until')", 65)
    browser.assert_accessible(page)
    browser.assert_accessible(page, dark=True)
    wait_window(page, flipping, "!c.includes('in force') && c.includes('next')", 65)
    wait_window(page, flipping, "c.includes('in force until')", 15)
    assert page.evaluate("window.notReloaded") is True
    browser.assert_only_guardian(page, url)


class EvilSite:
    """A page on another origin (127.0.0.1, another port) that posts a form to Guardian."""

    def __init__(self, target: str, incident: str) -> None:
        body = (
            "<!doctype html><title>x</title>"
            f'<form id="f" method="post" action="{target}">'
            f'<input name="incident" value="{incident}"></form>'
            "<script>document.getElementById('f').submit()</script>"
        ).encode()

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                self.send_response(200)
                self.send_header("Content-Type", "text/html")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *args: Any) -> None:
                pass

        self.server = http.server.HTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_port}/"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()
