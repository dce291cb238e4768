"""`python -m bench.screenshots`: the pictures of the status page, light and dark, taken
in the real headless Chromium (bench.browser) from a page served over a fake engine: a few
containers, one unhealthy with its incident, one silenced, one healed earlier, one in its
maintenance window and one with a nightly window.
"""

from __future__ import annotations

import logging
import sys
import tempfile
from datetime import timedelta
from pathlib import Path

from bench.browser import Browser, chromium_path

OUT = Path(__file__).resolve().parents[1] / "docs"
TOKEN = "screenshot-token-0123456789abcdef"
VIEWPORT = {"width": 1200, "height": 820}


def main() -> int:
    logging.disable(logging.WARNING)
    from guardian.entrypoints.http_server import HttpServer, Routes
    from guardian.entrypoints.page.handler import StatusPage
    from guardian.entrypoints.page.sessions import Sessions
    from guardian.readside.page import PageReader
    from guardian.runtime.http_limits import Limits
    from tests.app import make_app

    path = chromium_path()
    if path is None:
        print("chromium-headless-shell is not installed", file=sys.stderr)
        return 1
    with tempfile.TemporaryDirectory() as tmp:
        backup = {"containers": "db", "cron": "30 11 * * *", "duration": "1h"}  # T0 is noon
        g = make_app(
            Path(tmp),
            host="edge-01",
            restart={"cooldown": "5m"},
            maintenance={"windows": [backup]},
        )
        g.engine.after_restart_health = "unhealthy"
        for name in ("api", "cache", "db", "proxy", "queue", "worker"):
            g.engine.add(name)
        nightly = "0 2 * * * 1h Europe/Berlin"
        g.engine.add("web", labels={"guardian.enable": "true", "guardian.maintenance": nightly})
        g.engine.set("worker", health="unhealthy")
        g.healer.sweep()  # worker: incident, a restart that did not heal it
        g.clock.advance(seconds=25)
        g.app.verifier.verify()
        g.clock.advance(seconds=20)
        g.healer.sweep()  # held back by the cooldown
        g.app.operator.silence("queue", timedelta(hours=2), "broker upgrade", "alice")
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
                tab.wait_for_function("document.getElementById('live').textContent === 'live'")
                target = OUT / f"status-page-{scheme}.png"
                tab.screenshot(path=str(target))
                print(target)
        finally:
            browser.close()
            http.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
