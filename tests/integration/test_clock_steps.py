"""A real `guardian run` whose wall clock steps, and whose clock is not the engine's.

Only Guardian's CLOCK_REALTIME moves: a small LD_PRELOAD shim (clock_shim.c, built here with
gcc) offsets clock_gettime(CLOCK_REALTIME), gettimeofday() and time() by the seconds written in
a file, which the test changes while Guardian runs. CLOCK_MONOTONIC and CLOCK_BOOTTIME are left
alone, as on a host whose clock NTP or a person steps (libfaketime moves them too, or with
FAKETIME_DONT_FAKE_MONOTONIC=1 makes Python's time.sleep fail).
"""

from __future__ import annotations

import os
import re
import subprocess
import urllib.error
import urllib.request
from pathlib import Path

import pytest

from tests.helpers import require_tool, wait_until
from tests.integration.see_more import HEALTH, gave_up, incidents, rows
from tests.proxy import DockerProxy

SHIM = Path(__file__).with_name("clock_shim.c")
DAY = 86400
LIST = r"^/containers/json$"


class ShiftedClock:
    """The offset file the shim reads, and the environment that puts the shim on Guardian."""

    def __init__(self, library: Path, directory: Path) -> None:
        self.path = directory / "clock-offset"
        self.set(0)
        self.env = {"LD_PRELOAD": str(library), "CLOCK_SHIM_FILE": str(self.path)}

    def set(self, seconds: int) -> None:
        """Step Guardian's wall clock to `seconds` off the real one (the shim sees it within
        50 ms of monotonic time)."""
        partial = self.path.with_suffix(".partial")
        partial.write_text(str(seconds))
        os.replace(partial, self.path)


@pytest.fixture(scope="session")
def shim_library(tmp_path_factory: pytest.TempPathFactory) -> Path:
    gcc = require_tool("gcc", "gcc")
    library = tmp_path_factory.mktemp("shim") / "clock_shim.so"
    subprocess.run(
        [gcc, "-shared", "-fPIC", "-O2", "-Wall", "-o", str(library), str(SHIM), "-ldl"],
        check=True,
    )
    return library


@pytest.fixture
def shifted(shim_library: Path, tmp_path: Path) -> ShiftedClock:
    return ShiftedClock(shim_library, tmp_path)


@pytest.fixture
def proxy(tmp_path: Path):
    p = DockerProxy(tmp_path / "engine.sock").start()
    yield p
    p.stop()


def get(url: str) -> tuple[int, str]:
    try:
        with urllib.request.urlopen(url, timeout=5) as response:
            return response.status, response.read().decode()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read().decode()


def sample(base_url: str, name: str, **labels: str) -> float | None:
    selector = ",".join(f'{k}="{v}"' for k, v in sorted(labels.items()))
    pattern = re.escape(f"{name}{{{selector}}}" if selector else name) + r" (\S+)$"
    found = re.search(pattern, get(base_url + "/metrics")[1], re.MULTILINE)
    return float(found.group(1)) if found else None


def healthz_age(base_url: str) -> float:
    """The age /healthz gives the last sweep; it must be 200 and never negative."""
    status, body = get(base_url + "/healthz")
    assert status == 200, body
    found = re.match(r"ok: last sweep (-?[0-9.]+)s ago", body)
    assert found, body
    return float(found.group(1))


def test_the_cap_holds_across_a_corrected_clock_a_step_back_and_sweeps_go_on(
    containers, guardian, engine_events, shifted, proxy
):
    """A clock a day ahead: 3 restarts, then Guardian gives up. Corrected, Guardian starts
    again on the same store: the attempts stamped a day ahead count as now, no restart. The
    clock steps back an hour under the running Guardian: still none, and the sweeps keep
    their 2 s cadence (APScheduler alone waited the hour: 0 list requests in 19 s), /healthz
    stays truthful, the step is logged once and counted. A step forward by a day: no burst of
    sweeps, no restart either."""
    shifted.set(DAY)
    name = containers.run("bad", health_cmd="false")
    g = guardian(
        env=shifted.env,
        docker={"url": proxy.url},
        restart={"cooldown": "2s", "max_attempts": 3, "window": "1h", "verify_timeout": "4s"},
    )
    db = g.store_path
    gave_up(db)
    assert engine_events.count(name, "restart") == 3
    assert g.stop() == 0

    shifted.set(0)  # NTP corrects the clock; Guardian starts again (a reboot, an upgrade)
    g.start()
    start = proxy.count("GET", LIST)
    wait_until(lambda: proxy.count("GET", LIST) >= start + 4, 20, message="sweeps after restart")
    assert engine_events.count(name, "restart") == 3

    shifted.set(-3600)  # an hour back, under the running Guardian
    before = proxy.count("GET", LIST)
    wait_until(lambda: proxy.count("GET", LIST) >= before + 5, 19, message="sweeps go on")
    assert 0 <= healthz_age(g.http_url) < 4
    assert engine_events.count(name, "restart") == 3
    assert sample(g.http_url, "guardian_clock_steps_total", direction="back") == 1
    assert len(g.lines("wall clock stepped")) == 1

    shifted.set(DAY)  # and a day forward: the sweeps keep their cadence, no burst
    wait_until(lambda: sample(g.http_url, "guardian_clock_steps_total", direction="forward"), 5)
    before = proxy.count("GET", LIST)
    wait_until(lambda: proxy.count("GET", LIST) >= before + 3, 15, message="sweeps go on")
    assert proxy.count("GET", LIST) <= before + 5  # not one per missed interval (43,200)
    assert 0 <= healthz_age(g.http_url) < 4
    assert engine_events.count(name, "restart") == 3
    assert g.stop() == 0


@pytest.mark.parametrize("skew", [600, -600], ids=["guardian-10m-ahead", "guardian-10m-behind"])
def test_a_skew_of_ten_minutes_between_guardian_and_the_engine_changes_no_verdict(
    containers, guardian, engine_events, shifted, skew
):
    """Guardian's clock 10 minutes off the engine's (the shim on Guardian: the engine's clock
    is the real one, so the two differ as with a remote engine). Heal: restarted and verified
    healthy, resolved. Grace: a container unhealthy from its start is left alone for
    start_grace after its State.StartedAt, then restarted (measured on the engine's clock).
    Crash loop: Docker's restarts are seen as one within its window (a window Guardian
    measures on its own observations)."""
    shifted.set(skew)
    healable = containers.run("heal", health_cmd=HEALTH)
    containers.wait_health(healable, "healthy")
    crasher = containers.run("crash", ["sh", "-c", "exit 3"], restart_policy={"Name": "always"})
    g = guardian(
        env=shifted.env,
        watch={"start_grace": "8s"},
        restart={"cooldown": "2s", "verify_timeout": "20s"},
        crash_loop={"restarts": 3, "window": "60s"},
    )
    db = g.store_path
    wait_until(lambda: incidents(db, crasher, "crash_loop"), 40, message="crash loop seen")
    assert not engine_events.count(crasher, "kill")  # left to Docker's policy

    before = containers.started_at(healable)
    containers.make_unhealthy(healable)
    wait_until(lambda: containers.started_at(healable) != before, 30, message="healed")
    containers.wait_health(healable, "healthy")
    wait_until(
        lambda: incidents(db, healable) and incidents(db, healable)[0]["state"] == "resolved",
        30,
        message="resolved",
    )
    outcomes = [a["outcome"] for a in rows(db, "SELECT * FROM actions WHERE kind='restart'")]
    assert outcomes == ["succeeded"]

    late = containers.run("late", health_cmd="false")  # unhealthy from its first check on
    wait_until(lambda: engine_events.count(late, "restart"), 40, message="restart after grace")
    events = engine_events.of(late)
    began = next(t for a, t in events if a == "start")
    restarted = next(t for a, t in events if a in ("kill", "restart"))
    # Untranslated, the grace would end at once (ahead) or after 10 minutes (behind); the
    # engine's clock is known to about a tenth of a second from the Date of its answers.
    assert 8 - 0.5 <= restarted - began < 8 + 15, events
    assert g.stop() == 0
