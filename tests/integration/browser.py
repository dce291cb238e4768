"""The browser tier's fixtures: one Chromium per session (bench.browser), failing rather than
skipping under CI when the browser or Playwright is missing; axe-core's verdict; the request log.
"""

from __future__ import annotations

import os
from typing import Any
from urllib.parse import urlsplit

import pytest

from bench import browser as chromium

SERIOUS = ("serious", "critical")


class Browser(chromium.Browser):
    def assert_accessible(self, page: Any, dark: bool = False) -> None:
        """axe-core (shipped offline by axe-playwright-python) finds nothing serious or critical,
        in the light scheme and, with `dark`, the dark one."""
        from axe_playwright_python.sync_playwright import Axe

        page.emulate_media(color_scheme="dark" if dark else "light")
        results = Axe().run(page)
        assert results.response["passes"], "axe-core checked nothing"
        bad = [v for v in results.response["violations"] if v.get("impact") in SERIOUS]
        page.emulate_media(color_scheme="light")
        assert not bad, "\n".join(
            f"{v['id']} ({v['impact']}): {v['help']}: {[n['target'] for n in v['nodes']][:5]}"
            for v in bad
        )

    def assert_only_guardian(self, page: Any, url: str, also: str = "") -> None:
        """Every request of every page so far went to Guardian (or the test's own `also`)."""
        allowed = {urlsplit(url).netloc} | ({urlsplit(also).netloc} if also else set())
        elsewhere = [
            r
            for r in self.requests
            if urlsplit(r).scheme != "data" and urlsplit(r).netloc not in allowed
        ]
        assert not elsewhere, f"requests that left Guardian's host: {elsewhere[:10]}"


def browser_or_fail() -> Browser:
    required = bool(os.environ.get("CI"))
    path = chromium.chromium_path()
    problem = "" if path else "chromium-headless-shell is not installed (scripts/test.sh)"
    if not problem:
        try:
            import axe_playwright_python  # noqa: F401
            import playwright  # noqa: F401
        except ImportError as exc:
            problem = f"the test extra is not installed: {exc}"
    if problem:
        if required:
            pytest.fail(f"the browser tests need a browser (CI is set): {problem}")
        pytest.skip(problem)
    assert path is not None
    return Browser(path)
