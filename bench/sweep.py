"""Sweep cost at scale: Guardian's sweep (in-process: bootstrap.build_status + Healer.sweep)
against one raw `GET /containers/json` at the same size, and the Engine API requests a sweep makes,
counted through tests.proxy.DockerProxy on a Unix socket."""

from __future__ import annotations

import http.client
import json
import re
import socket
import time
import urllib.parse
from dataclasses import dataclass
from pathlib import Path

from bench.engine import Fleet
from bench.probes import median, wait_for
from guardian.adapters.engine.engine_payloads import summary_snapshot
from guardian.bootstrap import App, build_status
from guardian.config import load_settings
from guardian.core.detection.checks import needs_inspect
from tests.proxy import DockerProxy

INSPECT = re.compile(r"/containers/[0-9a-f]{12,64}/json")
EXITED = 2  # exited (code 0) containers in each fleet: candidates that get exactly one inspect


class UnixHTTPConnection(http.client.HTTPConnection):
    def __init__(self, path: str) -> None:
        super().__init__("localhost", timeout=120)
        self.socket_path = path

    def connect(self) -> None:
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        sock.connect(self.socket_path)
        self.sock = sock


@dataclass
class SweepResult:
    size: int
    candidates: int
    lists: int
    inspects: int
    other: int
    sweep_s: float
    raw_list_s: float
    ratio: float  # the median of sweep / raw list over back-to-back pairs
    with_candidates_s: float  # a sweep once the 2 exited candidates joined

    @property
    def exact(self) -> bool:
        return self.lists == 1 and self.inspects == self.candidates and self.other == 0


def app_for(url: str, scope: str, store: Path) -> App:
    env = {
        "GUARDIAN_DOCKER_URL": url,
        "GUARDIAN_WATCH_SCOPE": scope,
        "GUARDIAN_STORE_PATH": str(store),
    }
    return build_status(load_settings(None, env))


def raw_list(conn: UnixHTTPConnection, api_version: str, scope: str) -> float:
    """Time one GET /containers/json with the filters Guardian's sweep sends; body read."""
    filters = json.dumps({"label": ["guardian.enable", scope]})
    query = urllib.parse.urlencode({"all": "1", "filters": filters})
    t0 = time.perf_counter()
    conn.request("GET", f"/v{api_version}/containers/json?{query}")
    resp = conn.getresponse()
    resp.read()
    elapsed = time.perf_counter() - t0
    if resp.status != 200:
        raise RuntimeError(f"GET /containers/json answered {resp.status}")
    return elapsed


def measure(fleet: Fleet, tmp: Path, sizes: list[int], trials: int) -> list[SweepResult]:
    """Grow one fleet of running `sleep` containers through `sizes`; measure at each size."""
    socket_path = fleet.url.removeprefix("unix://")
    api_version = str(fleet.api.version().get("ApiVersion", "1.41"))
    results: list[SweepResult] = []
    running = 0
    try:
        for size in sizes:
            fleet.create(size - running, "sweep")
            running = size
            results.append(_at_size(fleet, tmp, socket_path, api_version, size, trials))
    finally:
        fleet.remove("sweep")
    return results


def _at_size(
    fleet: Fleet, tmp: Path, socket_path: str, api_version: str, size: int, trials: int
) -> SweepResult:
    tmp.mkdir(parents=True, exist_ok=True)
    app = app_for(fleet.url, fleet.scope, tmp / f"sweep-{size}.db")
    proxy = DockerProxy(tmp / f"proxy-{size}.sock", upstream=socket_path).start()
    counted = app_for(proxy.url, fleet.scope, tmp / f"counted-{size}.db")
    conn = UnixHTTPConnection(socket_path)
    try:
        # Timed on `size` running containers, as the floor states them.
        app.healer.sweep()  # warm up: API version negotiation, first sweep's store writes
        raw_list(conn, api_version, fleet.scope)
        sweeps, raws = _pairs(app, conn, api_version, fleet.scope, trials)
        # Then 2 exited containers join: candidates, each worth exactly one inspect.
        fleet.create(EXITED, "sweep-exited", command=["true"])
        wait_for(
            lambda: _candidates(conn, api_version, fleet.scope) == EXITED, 30, "exited containers"
        )
        counted.healer.sweep()
        proxy.requests.clear()
        report = counted.healer.sweep()
        if report.engine_error:
            raise RuntimeError(f"sweep failed: {report.engine_error}")
        seen = list(proxy.requests)
        candidates = _candidates(conn, api_version, fleet.scope)
        lists = sum(1 for m, p in seen if m == "GET" and p == "/containers/json")
        inspects = sum(1 for m, p in seen if m == "GET" and INSPECT.fullmatch(p))
        other = len(seen) - lists - inspects
        app.healer.sweep()
        with_candidates, _ = _pairs(app, conn, api_version, fleet.scope, max(1, trials // 2))
        return SweepResult(
            size=size,
            candidates=candidates,
            lists=lists,
            inspects=inspects,
            other=other,
            sweep_s=median(sweeps),
            raw_list_s=median(raws),
            ratio=median([s / r for s, r in zip(sweeps, raws, strict=True)]),
            with_candidates_s=median(with_candidates),
        )
    finally:
        fleet.remove("sweep-exited")
        conn.close()
        app.edges.close()
        counted.edges.close()
        proxy.stop()


def _pairs(
    app: App, conn: UnixHTTPConnection, api_version: str, scope: str, trials: int
) -> tuple[list[float], list[float]]:
    """`trials` back-to-back (sweep, raw list) timings."""
    sweeps, raws = [], []
    for _ in range(trials):
        raws.append(raw_list(conn, api_version, scope))
        t0 = time.perf_counter()
        app.healer.sweep()
        sweeps.append(time.perf_counter() - t0)
    return sweeps, raws


def _candidates(conn: UnixHTTPConnection, api_version: str, scope: str) -> int:
    """How many listed containers Guardian should inspect, judged from a list of our own."""
    filters = json.dumps({"label": ["guardian.enable", scope]})
    query = urllib.parse.urlencode({"all": "1", "filters": filters})
    conn.request("GET", f"/v{api_version}/containers/json?{query}")
    items = json.loads(conn.getresponse().read())
    return sum(1 for item in items if needs_inspect(summary_snapshot(item)))
