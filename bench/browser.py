"""A real headless Chromium for the status page's tests, benches and screenshots: Debian's
chromium-headless-shell driven by Playwright (no browser download), every request logged.
"""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

# Debian's package installs a wrapper in /usr/bin and the binary under /usr/lib/chromium.
CANDIDATES = ("chromium-headless-shell", "/usr/lib/chromium/chromium-headless-shell")
# Nothing of its own on the network: no updates, no sync, no first-run fetches.
ARGS = [
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
    "--disable-default-apps",
    "--disable-domain-reliability",
    "--no-pings",
]


def chromium_path() -> str | None:
    for candidate in CANDIDATES:
        found = shutil.which(candidate) or (candidate if Path(candidate).is_file() else None)
        if found:
            return found
    return None


class Browser:
    """One Chromium for a whole session; `page(url)` opens a fresh context (no cookies) whose
    every request is kept in `requests`. Opening a page closes those opened before (their
    streams reconnecting to a stopped Guardian are no request of the new page's)."""

    def __init__(self, executable: str) -> None:
        from playwright.sync_api import sync_playwright

        self._pw = sync_playwright().start()
        self.chromium = self._pw.chromium.launch(executable_path=executable, args=ARGS)
        self.requests: list[str] = []
        self._contexts: list[Any] = []

    def page(self, url: str = "", dark: bool = False, **context: Any) -> Any:
        for old in self._contexts:
            old.close()
        self._contexts.clear()
        self.requests.clear()
        ctx = self.chromium.new_context(color_scheme="dark" if dark else "light", **context)
        self._contexts.append(ctx)
        ctx.on("request", lambda r: self.requests.append(r.url))
        return ctx.new_page()

    def close(self) -> None:
        self.chromium.close()
        self._pw.stop()
