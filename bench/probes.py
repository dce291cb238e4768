"""What the benchmark measures with: a real `guardian run` process, its /metrics, the engine's
live event stream, /proc accounting, and small statistics helpers."""

from __future__ import annotations

import contextlib
import json
import math
import os
import statistics
import subprocess
import sys
import threading
import time
import urllib.request
from collections.abc import Callable
from pathlib import Path
from typing import Any

import docker
import yaml

from bench.engine import REPO

CLK_TCK = os.sysconf("SC_CLK_TCK")


def wait_for(condition: Callable[[], Any], timeout: float, what: str, every: float = 0.1) -> Any:
    deadline = time.monotonic() + timeout
    while True:
        value = condition()
        if value:
            return value
        if time.monotonic() > deadline:
            raise TimeoutError(f"timed out after {timeout:.0f}s waiting for {what}")
        time.sleep(every)


def stop_process(proc: subprocess.Popen[bytes], grace: float = 30) -> None:
    """SIGTERM, then SIGKILL after `grace` seconds."""
    proc.terminate()
    try:
        proc.wait(grace)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait(10)


class GuardianRun:
    """A `guardian run` subprocess with a config of the benchmark's choosing."""

    def __init__(
        self,
        tmp: Path,
        url: str,
        scope: str,
        env: dict[str, str] | None = None,
        wrapper: list[str] | None = None,
        **sections: dict[str, Any],
    ) -> None:
        tmp.mkdir(parents=True, exist_ok=True)
        self.tmp = tmp
        self.env = env or {}
        self.wrapper = wrapper or []  # e.g. prlimit: a command that execs Guardian
        self.config: dict[str, Any] = {
            "docker": {"url": url},
            "watch": {"label": "guardian.enable", "scope": scope},
            "store": {"path": str(tmp / "guardian.db")},
            "http": {"listen": "127.0.0.1:0"},
            "log": {"level": "info"},
        }
        for section, values in sections.items():
            self.config.setdefault(section, {}).update(values)
        self.log_path = tmp / "guardian.log"
        self.proc: subprocess.Popen[bytes] | None = None
        self.base_url = ""

    def __enter__(self) -> GuardianRun:
        cfg = self.tmp / "config.yaml"
        cfg.write_text(yaml.safe_dump(self.config))
        env = {k: v for k, v in os.environ.items() if not k.startswith("GUARDIAN_")}
        run = ["run", "--config", str(cfg)]
        with open(self.log_path, "wb") as log:
            self.proc = subprocess.Popen(
                [*self.wrapper, sys.executable, "-m", "guardian.entrypoints.cli", *run],
                stdout=log,
                stderr=subprocess.STDOUT,
                env={**env, **self.env, "PYTHONUNBUFFERED": "1"},
                cwd=REPO,
            )
        line = wait_for(self._listening, 30, "guardian to start")
        self.base_url = "http://" + line.split("address=")[1].split()[0]
        wait_for(lambda: self.metric("guardian_last_sweep_timestamp_seconds"), 60, "first sweep")
        return self

    def _listening(self) -> str | None:
        if self.proc is not None and self.proc.poll() is not None:
            raise RuntimeError(f"guardian exited: {self.log()[-2000:]}")
        return next((ln for ln in self.log().splitlines() if "http server listening" in ln), None)

    def log(self) -> str:
        return self.log_path.read_text(errors="replace") if self.log_path.exists() else ""

    def __exit__(self, *exc: object) -> None:
        if self.proc is not None and self.proc.poll() is None:
            stop_process(self.proc)

    @property
    def pid(self) -> int:
        assert self.proc is not None
        return self.proc.pid

    def scrape(self) -> dict[str, float]:
        """Every sample of /metrics as {'name{labels}': value}."""
        with urllib.request.urlopen(self.base_url + "/metrics", timeout=10) as resp:
            text = resp.read().decode()
        samples: dict[str, float] = {}
        for line in text.splitlines():
            if line and not line.startswith("#"):
                key, _, value = line.rpartition(" ")
                with contextlib.suppress(ValueError):
                    samples[key] = float(value)
        return samples

    def api(self, method: str, path: str, body: Any = None, token: str = "") -> Any:
        """One call to the HTTP API under /api/v1; the decoded JSON answer."""
        data = None if body is None else json.dumps(body).encode()
        req = urllib.request.Request(self.base_url + "/api/v1" + path, data, method=method)
        req.add_header("Content-Type", "application/json")
        if token:
            req.add_header("Authorization", f"Bearer {token}")
        with urllib.request.urlopen(req, timeout=10) as resp:
            return json.loads(resp.read())

    def metric(self, name: str) -> float:
        """The sum of every series of one metric (0 when it has none)."""
        return sum(v for k, v in self.scrape().items() if k == name or k.startswith(name + "{"))


def histogram(samples: dict[str, float], name: str) -> dict[str, Any]:
    """count, mean and bucket-based p50/p95 upper bounds of a Prometheus histogram."""
    buckets = sorted(
        (float(k.split('le="')[1].split('"')[0]), v)
        for k, v in samples.items()
        if k.startswith(name + "_bucket{")
    )
    count = samples.get(name + "_count", 0.0)
    total = samples.get(name + "_sum", 0.0)

    def bound(q: float) -> float | None:
        return next((le for le, n in buckets if count and n >= q * count), None)

    return {
        "count": int(count),
        "mean": total / count if count else None,
        "p50_le": bound(0.5),
        "p95_le": bound(0.95),
    }


class EventLog:
    """A live subscription to one run's container events (no replay from the ring buffer)."""

    def __init__(self, url: str, scope: str) -> None:
        self.api = docker.APIClient(base_url=url, version="auto", timeout=None)
        self.events: list[dict[str, Any]] = []
        self._stream = self.api.events(filters={"type": "container", "label": scope}, decode=True)
        self._thread = threading.Thread(target=self._read, daemon=True, name="bench-events")
        self._thread.start()

    def _read(self) -> None:
        with contextlib.suppress(Exception):  # the stream ends with an error when closed
            for event in self._stream:
                self.events.append(event)

    def of(self, name: str, since: float = 0.0) -> list[tuple[str, float]]:
        """(action, unix time) of the events of container `name` at or after `since`."""
        out = []
        for e in list(self.events):
            if (e.get("Actor") or {}).get("Attributes", {}).get("name") != name:
                continue
            at = e["timeNano"] / 1e9
            if at >= since:
                out.append((str(e["Action"]), at))
        return out

    def first(self, name: str, actions: tuple[str, ...], since: float = 0.0) -> float | None:
        return next((t for a, t in self.of(name, since) if a in actions), None)

    def close(self) -> None:
        with contextlib.suppress(Exception):
            self._stream.close()
        self.api.close()


def cpu_seconds(pid: int) -> float:
    """utime + stime of a process (all its threads), in seconds."""
    fields = Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()
    return (int(fields[11]) + int(fields[12])) / CLK_TCK


def _status_mb(pid: int, field: str) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1]) / 1024
    return float("nan")


def peak_rss_mb(pid: int) -> float:
    return _status_mb(pid, "VmHWM")


def rss_mb(pid: int) -> float:
    return _status_mb(pid, "VmRSS")


def percentile(values: list[float], q: float) -> float:
    """Nearest-rank percentile (q in 0..1): an observed value, no interpolation."""
    ordered = sorted(values)
    rank = max(1, min(len(ordered), math.ceil(q * len(ordered))))
    return ordered[rank - 1]


def median(values: list[float]) -> float:
    return statistics.median(values)
