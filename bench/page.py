"""The status page's cost: `python -m bench.page` prints the figures for bench/RESULTS.md.

- size and server time of the full page (signed in) at 10, 100 and 500 containers, over a fake
  engine (a tenth of them unhealthy, healed by a real sweep: incidents, timelines, actions);
- CPU one change costs with 0, 1 and 8 live pages open, and the pages' share (k pages less
  none): a page server in a subprocess over the fake engine, its CPU from every thread's
  schedstat (ns), each change awaited on every stream;
- the same against a real `guardian run` and real containers (`real`, also part of `all`): one
  container's health changes, as the engine announces it, with the incident Guardian writes;
  the rows measured in turn over several rounds, with no sweep among them (bench/page_real.py);
- idle CPU of a real `guardian run` (the real engine, a few healthy containers) with 5 live
  pages open against none.
"""

from __future__ import annotations

import argparse
import logging
import os
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from datetime import timedelta
from pathlib import Path
from typing import Any

from bench.idle import schedstat
from bench.probes import GuardianRun

FLOOR_MS = 100.0  # the full page at 500 containers
FLOOR_KB = 300.0
FLOOR_CHANGE_MS = 2.0  # one change reaching 8 pages
FLOOR_IDLE_PCT = 5.0  # 5 idle pages, added to Guardian's idle CPU
FAKE_CHANGES = 200  # per row of change_cost


def fake_page(tmp: Path, containers: int, public: bool = False) -> tuple[Any, Any, Any]:
    """A StatusPage over Guardian built with a fake engine; (test app, page, signed-in cookie)."""
    from guardian.entrypoints.page.handler import StatusPage
    from guardian.entrypoints.page.sessions import Sessions, set_cookie
    from guardian.readside.page import PageReader
    from tests.app import make_app

    g = make_app(tmp, restart={"max_concurrent": 1000}, storm={"min_containers": 10_000})
    for n in range(containers):
        g.engine.add(f"app-{n:04d}", health="unhealthy" if n % 10 == 0 else "healthy")
    g.healer.sweep()  # opens incidents and restarts the unhealthy tenth
    sessions = Sessions("bench-token", 3600)
    page = StatusPage(
        PageReader(g.healer, g.app.operator, g.app.changes),
        g.app.operator,
        sessions,
        g.app.changes,
        public_reads=public,
    )
    session = sessions.sign_in("bench-token", "bench", "127.0.0.1")
    return g, page, set_cookie(session, 3600, False).split(";")[0]


def flip(g: Any, name: str, health: str) -> None:
    """The container's health changes, and its engine event reaches the page as the Healer
    publishes it (the fact EngineEventSeen): a change naming it."""
    from guardian.core.facts import EngineEventSeen

    g.engine.set(name, health=health)
    g.healer.ctx.facts.publish(EngineEventSeen(name, "health_status"))


def size_and_time(sizes: list[int], runs: int) -> list[tuple[int, float, float, float, float, int]]:
    """(containers, median ms after a change, max ms after a change, median CPU ms after a
    change, median ms unchanged, bytes) of GET / signed in. After a change in the store the
    page reads everything again (the containers through container_status); unchanged, a
    reload within READ_MAX_AGE renders the last read."""
    from guardian.entrypoints.http_server import Request

    out = []
    for size in sizes:
        with tempfile.TemporaryDirectory() as tmp:
            g, page, cookie = fake_page(Path(tmp), size)
            request = Request("GET", "/", {}, {"cookie": cookie, "host": "bench"}, b"", "")
            page.index(request)  # templates compiled
            fresh, cpu, cached, body = [], [], [], b""
            for _ in range(runs):
                g.app.changes.wrote()  # as after a store write: everything is read again
                started, cpu_started = time.perf_counter(), time.process_time()
                body = page.index(request).body
                fresh.append((time.perf_counter() - started) * 1000)
                cpu.append((time.process_time() - cpu_started) * 1000)
                started = time.perf_counter()
                page.index(request)
                cached.append((time.perf_counter() - started) * 1000)
            out.append(
                (
                    size,
                    statistics.median(fresh),
                    max(fresh),
                    statistics.median(cpu),
                    statistics.median(cached),
                    len(body),
                )
            )
    return out


# -- the change cost: a page server in a subprocess ---------------------------------------------


def serve(containers: int) -> None:
    """`python -m bench.page serve N`: print the port, then flip container 0's health on every
    line read from stdin (one change each)."""
    from guardian.entrypoints.http_server import HttpServer, Routes
    from guardian.entrypoints.page.slots import StreamSlots
    from guardian.runtime.http_limits import Limits

    with tempfile.TemporaryDirectory() as tmp:
        g, page, _ = fake_page(Path(tmp), containers, public=True)
        routes = Routes()
        page.mount(routes)
        http = HttpServer("127.0.0.1:0", routes, Limits(streams=16))
        page.feed.slots = StreamSlots(16)  # every page from this one address
        http.start()
        print(http.address[1], flush=True)
        health, silenced = "healthy", False
        for line in sys.stdin:
            if line.strip() == "silence":  # a change in the store: a silence set or lifted
                if silenced:
                    g.app.operator.unsilence("app-0002", "bench")
                else:
                    g.app.operator.silence("app-0002", timedelta(hours=1), "bench", "bench")
                silenced = not silenced
                continue
            health = "unhealthy" if health == "healthy" else "healthy"
            flip(g, "app-0001", health)
        http.stop()


class StreamClient:
    """One live page's stream, read raw on its own thread: the ids of the change events."""

    def __init__(self, port: int) -> None:
        self.sock = socket.create_connection(("127.0.0.1", port))
        self.sock.sendall(b"GET /events HTTP/1.1\r\nHost: localhost\r\n\r\n")
        self.ids: list[str] = []
        self.thread = threading.Thread(target=self._read, daemon=True)
        self.thread.start()

    @property
    def events(self) -> int:
        return len(self.ids)

    def _read(self) -> None:
        buffered = b""
        while True:
            try:
                chunk = self.sock.recv(65536)
            except OSError:
                return  # closed by close()
            if not chunk:
                return
            *lines, buffered = (buffered + chunk).split(b"\n")
            self.ids += [line[4:].decode() for line in lines if line.startswith(b"id: ")]

    def close(self) -> None:
        self.sock.close()


def cpu_since(pid: int, before: dict[int, tuple[int, int]]) -> float:
    """Seconds on a CPU of the threads of `pid` since `before` (its schedstat then): a thread
    begun since counts in full; one that ended since counts nothing more (its last moments are
    lost, never its whole time taken off)."""
    now = schedstat(pid)
    return sum(ns - before.get(tid, (0, 0))[0] for tid, (ns, _) in now.items()) / 1e9


def wait(condition: Any, timeout: float = 10.0) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            raise TimeoutError("no event")
        time.sleep(0.002)


def change_cost(
    containers: int, pages: list[int], changes: int, kind: str = "flip"
) -> list[tuple[int, float]]:
    """(pages open, ms of the server's CPU per change). `kind`: flip (a container's health, as
    an engine event announces it) or silence (a write in the store)."""
    proc = subprocess.Popen(
        [sys.executable, "-m", "bench.page", "serve", str(containers)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
        cwd=Path(__file__).resolve().parents[1],
    )
    assert proc.stdin is not None and proc.stdout is not None
    port = int(proc.stdout.readline())
    out = []
    try:
        for k in pages:
            clients = [StreamClient(port) for _ in range(k)]
            wait(lambda cs=clients: all(c.events >= 1 for c in cs))
            # A warm-up change, then the measured ones, each awaited on every stream.
            for measured in (False, True):
                before = schedstat(proc.pid)
                for _ in range(changes if measured else 3):
                    seen = [c.events for c in clients]
                    proc.stdin.write(kind + "\n")
                    proc.stdin.flush()
                    if clients:
                        wait(
                            lambda s=seen, cs=clients: all(
                                c.events > n for c, n in zip(cs, s, strict=True)
                            )
                        )
                    else:
                        time.sleep(0.02)
                spent = cpu_since(proc.pid, before)
            out.append((k, spent / changes * 1000))
            for c in clients:
                c.close()
            time.sleep(0.5)
    finally:
        proc.stdin.close()
        proc.wait(20)
    return out


# -- idle: a real guardian run -------------------------------------------------------------------


def idle_cost(seconds: float, containers: int) -> tuple[float, float]:
    """(% of one CPU without pages, with 5 pages open) of a real `guardian run`."""
    import uuid

    import docker

    run = uuid.uuid4().hex[:8]
    api = docker.APIClient(version="auto")
    made = []
    try:
        for n in range(containers):
            c = api.create_container(
                "guardian-test-busybox:latest",
                ["sleep", "86400"],
                name=f"gpb-{run}-{n}",
                labels={"guardian.enable": "true", "guardian.bench": run},
                healthcheck={"test": ["CMD-SHELL", "true"], "interval": int(30e9)},
            )
            made.append(c["Id"])
            api.start(c["Id"])
        with tempfile.TemporaryDirectory() as tmp:
            url = os.environ.get("DOCKER_HOST", "unix:///var/run/docker.sock")
            g = GuardianRun(
                Path(tmp),
                url,
                f"guardian.bench={run}",
                api={"public_reads": True},
                page={"streams_per_address": 8},  # every page from this one address
            )
            with g:
                port = int(g.base_url.rsplit(":", 1)[1])
                time.sleep(5)  # the first sweeps settle
                before = schedstat(g.pid)
                time.sleep(seconds)
                alone = cpu_since(g.pid, before) / seconds * 100
                clients = [StreamClient(port) for _ in range(5)]
                wait(lambda: all(c.events >= 1 for c in clients))
                before = schedstat(g.pid)
                time.sleep(seconds)
                with_pages = cpu_since(g.pid, before) / seconds * 100
                for c in clients:
                    c.close()
        return alone, with_pages
    finally:
        for cid in made:
            api.remove_container(cid, force=True)


def read_share(containers: int, changes: int = 100) -> tuple[float, float]:
    """(ms of CPU per change of the page's read and render, of a whole read through
    container_status as `guardian status` makes it), in process: the page reads only what the
    change names (a container's health here)."""
    from guardian.readside.status import container_status

    with tempfile.TemporaryDirectory() as tmp:
        g, page, _ = fake_page(Path(tmp), containers, public=True)
        health, whole, status = "healthy", [], []
        for _ in range(changes):
            health = "unhealthy" if health == "healthy" else "healthy"
            flip(g, "app-0001", health)
            started = time.process_time()
            page.feed.snapshot(False)
            whole.append(time.process_time() - started)
            started = time.process_time()
            container_status(g.healer, g.app.operator)
            status.append(time.process_time() - started)
        return statistics.median(whole) * 1000, statistics.median(status) * 1000


def main(argv: list[str] | None = None) -> int:
    from bench import page_real

    p = argparse.ArgumentParser(prog="python -m bench.page", description=__doc__)
    p.add_argument("mode", nargs="?", default="all", choices=["all", "serve", "real"])
    p.add_argument("containers", nargs="?", type=int, default=100)
    p.add_argument("--runs", type=int, default=15)
    p.add_argument(
        "--changes",
        type=int,
        help="changes per row: default 200 over the fake engine, 40 against the real one",
    )
    p.add_argument(
        "--containers",
        dest="real_containers",
        metavar="N",
        type=int,
        default=100,
        help="real containers of the real-engine rows (default 100)",
    )
    p.add_argument("--change-containers", default="10,100")
    p.add_argument("--idle-seconds", type=float, default=60.0)
    p.add_argument("--idle-containers", type=int, default=5)
    args = p.parse_args(argv)
    logging.disable(logging.WARNING)  # the fake fleet's sweep reports its problems
    if args.mode == "serve":
        serve(args.containers)
        return 0
    if args.mode == "real":
        page_real.print_rows(args.real_containers, args.changes or page_real.CHANGES)
        return 0
    print(
        "| containers | after a store write: median | max | its CPU, median "
        "| nothing changed: median | size |"
    )
    print("|---:|---:|---:|---:|---:|---:|")
    for size, med, worst, cpu, same, size_b in size_and_time([10, 100, 500], args.runs):
        print(
            f"| {size} | {med:.1f} ms | {worst:.1f} ms | {cpu:.1f} ms | {same:.1f} ms "
            f"| {size_b / 1024:.0f} KB |"
        )
    print()
    # The share of the pages: what the server spends with k pages open less what it spends
    # with none (the driving and the change itself: the fake engine's change, or the silence
    # written in the store).
    print("| containers | change | pages open | server CPU per change | pages' share |")
    print("|---:|---|---:|---:|---:|")
    for n in [int(x) for x in args.change_containers.split(",")]:
        for kind in ("flip", "silence"):
            rows = change_cost(n, [0, 1, 8], args.changes or FAKE_CHANGES, kind)
            for k, ms in rows:
                what = "a container's health" if kind == "flip" else "a silence (store)"
                share = f"{ms - rows[0][1]:+.2f} ms" if k else "-"
                print(f"| {n} | {what} | {k} | {ms:.2f} ms | {share} |")
    print()
    page_real.print_rows(args.real_containers, args.changes or page_real.CHANGES)
    print()
    print(
        "| containers | the page's read and render per change (in process) "
        "| a whole read (container_status) |"
    )
    print("|---:|---:|---:|")
    for n in [int(x) for x in args.change_containers.split(",")]:
        whole, status = read_share(n)
        print(f"| {n} | {whole:.2f} ms | {status:.2f} ms |")
    print()
    alone, with_pages = idle_cost(args.idle_seconds, args.idle_containers)
    print("| guardian run, idle | CPU (% of one core) |")
    print("|---|---:|")
    print(f"| no page open | {alone:.3f} % |")
    print(f"| 5 pages open | {with_pages:.3f} % |")
    print(f"| added by 5 pages | {with_pages - alone:+.3f} % |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
