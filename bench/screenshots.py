"""`python -m bench.screenshots`: the pictures of the status page, light and dark, taken
in the real headless Chromium (bench.browser) from a page served over a fake engine after a
day of it (a fake clock, real sweeps): restarts that healed during the day, an exit, an hour
Guardian was not running, and now one container unhealthy with its incident, one silenced,
one in its maintenance window and one with a nightly window.
"""

from __future__ import annotations

import logging
import re
import sys
import tempfile
from datetime import timedelta
from pathlib import Path
from typing import Any

from bench.browser import Browser, chromium_path

OUT = Path(__file__).resolve().parents[1] / "docs"
TOKEN = "screenshot-token-0123456789abcdef"
VIEWPORT = {"width": 1360, "height": 820}
HOST = "edge-01"


def a_day(tmp: Path) -> Any:
    """Guardian over a fake engine from 23 hours before noon (T0) to noon, a sweep every
    10 minutes: what the strips show."""
    from tests.app import make_app
    from tests.fakes import T0, FakeClock

    backup = {"containers": "db", "cron": "30 11 * * *", "duration": "1h"}  # T0 is noon
    g = make_app(
        tmp,
        clock=FakeClock(T0 - timedelta(hours=23)),
        host=HOST,
        restart={"cooldown": "5m"},
        maintenance={"windows": [backup]},
    )
    for name in ("api", "cache", "db", "proxy", "queue", "worker"):
        g.engine.add(name)
    nightly = "0 2 * * * 1h Europe/Berlin"
    g.engine.add("web", labels={"guardian.enable": "true", "guardian.maintenance": nightly})
    # (minutes before noon, what happens then)
    script: dict[int, Any] = {
        1080: lambda: g.engine.set("api", health="unhealthy"),
        840: lambda: g.engine.set("cache", state="exited", exit_code=1),
        420: lambda: g.engine.set("proxy", health="unhealthy"),
        400: lambda: g.engine.set("api", health="unhealthy"),
        150: lambda: g.engine.set("proxy", health="unhealthy"),
    }
    down = range(600, 530, -10)  # Guardian not running for most of two slots
    for before in range(1380, 0, -10):
        if before in script:
            script[before]()
        if before == down.stop:
            g = make_app(  # a new Guardian over the same store, engine and clock
                tmp, engine=g.engine, clock=g.clock, sqlite=g.store, settings=g.settings, host=HOST
            )
        if before not in down:
            g.healer.sweep()
            g.healer.mark_running(g.clock.now())  # as the daemon does after each sweep
            g.clock.advance(seconds=25)
            g.app.verifier.verify()
            g.clock.advance(minutes=10, seconds=-25)
        else:
            g.clock.advance(minutes=10)
    g.app.operator.silence("queue", timedelta(hours=2), "broker upgrade", "alice")
    g.engine.after_restart_health = "unhealthy"
    g.engine.set("worker", health="unhealthy")
    g.healer.sweep()  # worker: incident, a restart that did not heal it
    g.clock.advance(seconds=25)
    g.app.verifier.verify()
    g.clock.advance(seconds=20)
    g.healer.sweep()  # held back by the cooldown
    g.healer.mark_running(g.clock.now())
    return g


def main() -> int:
    logging.disable(logging.WARNING)
    from guardian.entrypoints.http_server import HttpServer, Routes
    from guardian.entrypoints.page.handler import StatusPage
    from guardian.entrypoints.page.sessions import Sessions
    from guardian.readside.page import PageReader
    from guardian.runtime.http_limits import Limits

    path = chromium_path()
    if path is None:
        print("chromium-headless-shell is not installed", file=sys.stderr)
        return 1
    with tempfile.TemporaryDirectory() as tmp:
        g = a_day(Path(tmp))
        page = StatusPage(
            PageReader(g.healer, g.app.operator, g.app.changes),
            g.app.operator,
            Sessions(TOKEN, 3600),
            g.app.changes,
        )
        routes = Routes()
        page.mount(routes)
        http = HttpServer("127.0.0.1:0", routes, Limits(streams=4))
        http.start()
        url = f"http://127.0.0.1:{http.address[1]}"
        browser = Browser(path)
        try:
            OUT.mkdir(exist_ok=True)
            for scheme in ("light", "dark"):
                tab = browser.page(url, dark=scheme == "dark", viewport=VIEWPORT)
                tab.goto(url + "/")
                tab.fill("#token", TOKEN)
                tab.fill("#name", "alice")
                tab.click("button[type=submit]")
                # A locator, not wait_for_function: its polling evaluates a string, which the
                # page's Content-Security-Policy refuses.
                tab.locator("#live", has_text=re.compile("^live$")).wait_for()
                target = OUT / f"status-page-{scheme}.png"
                tab.screenshot(path=str(target))
                print(target)
        finally:
            browser.close()
            http.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
