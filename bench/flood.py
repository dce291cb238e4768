"""A connection flood as an attacker on the same network sends it: idle connections that never
send a byte and endless header lines, while /healthz is asked as a supervisor asks it.

Used by the benchmark (answers per second and p99 of /healthz, RSS) and by
tests/faults/test_http_flood.py.
"""

from __future__ import annotations

import contextlib
import http.client
import math
import socket
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

from bench.engine import Fleet
from bench.probes import GuardianRun, peak_rss_mb, rss_mb


@dataclass
class Answer:
    """One /healthz request: its status (0: no answer) and how long it took, in seconds."""

    status: int
    seconds: float
    error: str = ""


class Flood:
    """`idle` connections opened and left silent, plus `streams` connections each sending one
    header line that never ends (`chunk` bytes every `pace` seconds), reconnecting whenever the
    server closes it. Start it, then stop() it; every socket it opened is closed."""

    def __init__(
        self,
        host: str,
        port: int,
        idle: int = 1000,
        streams: int = 20,
        chunk: int = 1024,
        pace: float = 0.01,
    ) -> None:
        self.address = (host, port)
        self.idle, self.streams, self.chunk, self.pace = idle, streams, chunk, pace
        self.sockets: list[socket.socket] = []
        self.connected = 0  # idle connections the kernel accepted
        self.refused = 0
        self.streamed = 0  # header bytes sent by the streams
        self.reconnects = 0  # times the server closed a stream and it came back
        self._stop = threading.Event()
        self._threads: list[threading.Thread] = []
        self._lock = threading.Lock()

    def start(self) -> Flood:
        for _ in range(self.idle):
            s = socket.socket()
            s.settimeout(2)
            try:
                s.connect(self.address)
            except OSError:
                self.refused += 1
                s.close()
                continue
            self.sockets.append(s)
            self.connected += 1
        for n in range(self.streams):
            t = threading.Thread(target=self._stream, name=f"flood-stream-{n}", daemon=True)
            t.start()
            self._threads.append(t)
        return self

    def _stream(self) -> None:
        payload = b"a" * self.chunk
        while not self._stop.is_set():
            try:
                with socket.create_connection(self.address, timeout=2) as s:
                    s.sendall(b"GET /healthz HTTP/1.1\r\nHost: localhost\r\nX-Flood: ")
                    while not self._stop.wait(self.pace):
                        s.sendall(payload)
                        with self._lock:
                            self.streamed += len(payload)
            except OSError:
                pass  # closed by the server (a size limit) or refused: come back
            with self._lock:
                self.reconnects += 1
            self._stop.wait(self.pace)

    def stop(self) -> None:
        self._stop.set()
        for t in self._threads:
            t.join(10)
        for s in self.sockets:
            with contextlib.suppress(OSError):
                s.close()
        self.sockets.clear()


def ask_healthz(host: str, port: int, timeout: float = 5.0) -> Answer:
    """GET /healthz on a new connection, as `guardian healthcheck` or a load balancer does."""
    started = time.monotonic()
    conn = http.client.HTTPConnection(host, port, timeout=timeout)
    try:
        conn.request("GET", "/healthz")
        status = conn.getresponse().status
    except OSError as exc:
        return Answer(0, time.monotonic() - started, f"{type(exc).__name__}: {exc}")
    finally:
        conn.close()
    return Answer(status, time.monotonic() - started)


@dataclass
class Hammer:
    """/healthz asked back to back for `seconds`: answers per second and latency quantiles."""

    answers: list[Answer] = field(default_factory=list)
    seconds: float = 0.0

    @classmethod
    def run(cls, host: str, port: int, seconds: float) -> Hammer:
        result = cls()
        started = time.monotonic()
        while time.monotonic() - started < seconds:
            result.answers.append(ask_healthz(host, port))
        result.seconds = time.monotonic() - started
        return result

    @property
    def per_second(self) -> float:
        ok = sum(1 for a in self.answers if a.status == 200)
        return ok / self.seconds if self.seconds else 0.0

    def quantile(self, q: float) -> float:
        times = sorted(a.seconds for a in self.answers)
        return times[max(0, math.ceil(q * len(times)) - 1)] if times else float("nan")

    @property
    def failed(self) -> int:
        return sum(1 for a in self.answers if a.status != 200)


@dataclass
class FloodResult:
    idle: int
    streams: int
    seconds: float
    nofile: int
    calm: Hammer
    flooded: Hammer
    connected: int
    streamed_mb: float
    rss_mb: float  # the highest VmRSS sampled during the flood
    peak_rss_mb: float  # VmHWM at the end: start-up included


def measure(
    fleet: Fleet, tmp: Path, seconds: float, idle: int = 1000, streams: int = 20
) -> FloodResult:
    """/healthz asked back to back for `seconds` on a calm port, then under the flood, against
    a `guardian run` with systemd's default open-file limit."""
    nofile = 1024
    wrapper = ["prlimit", f"--nofile={nofile}:{nofile}", "--"]
    with GuardianRun(tmp / "flood", fleet.url, fleet.scope, wrapper=wrapper) as g:
        host, _, port = g.base_url.removeprefix("http://").rpartition(":")
        calm = Hammer.run(host, int(port), seconds)
        flood = Flood(host, int(port), idle=idle, streams=streams).start()
        rss: list[float] = []
        sampling = threading.Event()

        def sample() -> None:
            while not sampling.wait(0.2):
                rss.append(rss_mb(g.pid))

        sampler = threading.Thread(target=sample, daemon=True)
        sampler.start()
        try:
            flooded = Hammer.run(host, int(port), seconds)
        finally:
            sampling.set()
            sampler.join()
            flood.stop()
        return FloodResult(
            idle=idle,
            streams=streams,
            seconds=seconds,
            nofile=nofile,
            calm=calm,
            flooded=flooded,
            connected=flood.connected,
            streamed_mb=flood.streamed / 2**20,
            rss_mb=max(rss, default=rss_mb(g.pid)),
            peak_rss_mb=peak_rss_mb(g.pid),
        )
