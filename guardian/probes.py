"""Probes run by Guardian: HTTP and TCP checks from labels, with failure/success thresholds.

`guardian.probe.http=http://:8080/healthz` (the container's address fills in an empty host) or
`guardian.probe.tcp=:5432`. A probe turns a container `probe_failed` after failure_threshold
failures in a row and healthy again after success_threshold successes in a row (kubelet-style);
the verdict is a HealthCheckResult that takes the healer's usual incident and decision path.
"""

from __future__ import annotations

import http.client
import logging
import socket
import ssl
import threading
from collections.abc import Callable, Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, replace
from datetime import datetime, timedelta
from typing import Any
from urllib.parse import urlsplit

from guardian.core.durations import parse_duration
from guardian.core.model import ContainerSnapshot, HealthCheckResult, ProblemType
from guardian.healer import Healer
from guardian.logs import kv
from guardian.ports import EngineUnavailable

log = logging.getLogger("guardian.probes")

HTTP = "guardian.probe.http"
TCP = "guardian.probe.tcp"
PERIOD = "guardian.probe.period"
TIMEOUT = "guardian.probe.timeout"
FAILURE_THRESHOLD = "guardian.probe.failure_threshold"
SUCCESS_THRESHOLD = "guardian.probe.success_threshold"
EXPECT = "guardian.probe.expect"
MAX_PARALLEL = 8  # probes running at once
NO_ADDRESS = "127.0.0.1"  # host-network containers have no address of their own


@dataclass(frozen=True)
class ProbeSpec:
    kind: str  # http | tcp
    host: str  # "" : the container's address
    port: int
    path: str = "/"
    scheme: str = "http"
    expect: tuple[tuple[int, int], ...] = ((200, 399),)
    period: timedelta = timedelta(seconds=10)
    timeout: timedelta = timedelta(seconds=2)
    failure_threshold: int = 3
    success_threshold: int = 1

    def describe(self, address: str) -> str:
        host = self.host or address
        if self.kind == "tcp":
            return f"tcp://{host}:{self.port}"
        return f"{self.scheme}://{host}:{self.port}{self.path}"


def _expect(raw: str) -> tuple[tuple[int, int], ...]:
    """'200', '200,204', '200-399' -> ranges of accepted status codes."""
    out = []
    for part in raw.replace(" ", "").split(","):
        lo, _, hi = part.partition("-")
        a, b = int(lo), int(hi or lo)
        if not 100 <= a <= b <= 599:
            raise ValueError
        out.append((a, b))
    if not out:
        raise ValueError
    return tuple(out)


def parse_probe(
    labels: Mapping[str, str], defaults: ProbeSpec
) -> tuple[ProbeSpec | None, list[str]]:
    """The probe a container's labels ask for (None: none), and a warning per bad label."""
    warnings: list[str] = []
    spec: ProbeSpec | None = None
    if HTTP in labels:
        raw = labels[HTTP].strip()
        try:
            url = urlsplit(raw)
            if url.scheme not in ("http", "https") or url.port is None:
                raise ValueError
            path = url.path or "/"
            if url.query:
                path += "?" + url.query
            spec = replace(defaults, kind="http", host=url.hostname or "", port=url.port, path=path)
            spec = replace(spec, scheme=url.scheme)
        except ValueError:
            warnings.append(f"label {HTTP}={raw[:60]!r}: expected a URL like http://:8080/healthz")
    elif TCP in labels:
        raw = labels[TCP].strip()
        host, _, port = raw.rpartition(":")
        if port.isdigit() and 0 < int(port) < 65536:
            spec = replace(defaults, kind="tcp", host=host, port=int(port))
        else:
            warnings.append(f"label {TCP}={raw[:60]!r}: expected [host]:port, e.g. :5432")
    if spec is None:
        return None, warnings
    parsers: tuple[tuple[str, str, Callable[[str], Any], str], ...] = (
        (PERIOD, "period", parse_duration, "a duration such as 5s"),
        (TIMEOUT, "timeout", parse_duration, "a duration such as 2s"),
        (FAILURE_THRESHOLD, "failure_threshold", int, "an integer from 1 to 100"),
        (SUCCESS_THRESHOLD, "success_threshold", int, "an integer from 1 to 100"),
        (EXPECT, "expect", _expect, "status codes such as 200 or 200-399,401"),
    )
    for label, field_name, parse, allowed in parsers:
        if label not in labels:
            continue
        try:
            value = parse(labels[label].strip())
            if isinstance(value, int) and not 1 <= value <= 100:
                raise ValueError
            if isinstance(value, timedelta) and value < timedelta(milliseconds=100):
                raise ValueError
            spec = replace(spec, **{field_name: value})
        except ValueError:
            warnings.append(f"label {label}={labels[label][:40]!r}: expected {allowed}")
    return spec, warnings


def run_probe(spec: ProbeSpec, address: str) -> tuple[bool, str]:
    """Run one probe: (passed, what was seen). Never raises for network errors."""
    host = spec.host or address or NO_ADDRESS
    where = spec.describe(address or NO_ADDRESS)
    timeout = spec.timeout.total_seconds()
    try:
        if spec.kind == "tcp":
            with socket.create_connection((host, spec.port), timeout=timeout):
                return True, f"{where} accepted a connection"
        conn: http.client.HTTPConnection
        if spec.scheme == "https":
            # The container's own address never matches its certificate: check liveness only.
            conn = http.client.HTTPSConnection(
                host, spec.port, timeout=timeout, context=ssl._create_unverified_context()
            )
        else:
            conn = http.client.HTTPConnection(host, spec.port, timeout=timeout)
        try:
            conn.request("GET", spec.path, headers={"User-Agent": "guardian-probe"})
            response = conn.getresponse()
            response.read(4096)
            status = response.status
        finally:
            conn.close()
    except (OSError, http.client.HTTPException) as exc:
        return False, f"{where}: {str(exc) or type(exc).__name__}"[:200]
    if any(lo <= status <= hi for lo, hi in spec.expect):
        return True, f"{where} answered {status}"
    return False, f"{where} answered {status}"


@dataclass
class _Target:
    spec: ProbeSpec
    container_id: str
    address: str
    next_due: datetime
    failures: int = 0
    successes: int = 0
    failing: bool = False
    detail: str = ""


class Prober:
    """Runs due probes (a daemon job ticks it) and judges containers from their probe state."""

    def __init__(self, healer: Healer, defaults: ProbeSpec) -> None:
        self.healer = healer
        self.defaults = defaults
        self._lock = threading.Lock()
        self._targets: dict[str, _Target] = {}  # container name -> target
        self._warned: set[tuple[str, str]] = set()

    def attach(self) -> None:
        self.healer.hooks.listed.append(self.update)
        self.healer.hooks.judges.append(self.judge)

    def has_targets(self) -> bool:
        with self._lock:
            return bool(self._targets)

    def update(self, snapshots: list[ContainerSnapshot]) -> None:
        """Follow the containers of the last sweep: running ones with a probe label are probed."""
        now = self.healer.clock.now()
        seen = set()
        for snap in snapshots:
            spec, warnings = parse_probe(snap.labels, self.defaults)
            for w in warnings:
                if (snap.name, w) not in self._warned:
                    self._warned.add((snap.name, w))
                    log.warning("bad label ignored", extra=kv(container=snap.name, problem=w))
            if spec is None or snap.state != "running":
                continue
            seen.add(snap.name)
            with self._lock:
                t = self._targets.get(snap.name)
                if t is None or t.container_id != snap.id or t.spec != spec:
                    self._targets[snap.name] = _Target(spec, snap.id, snap.ip_address, now)
                else:
                    t.address = snap.ip_address or t.address
        with self._lock:
            for name in set(self._targets) - seen:
                del self._targets[name]

    def judge(self, snap: ContainerSnapshot, result: HealthCheckResult) -> HealthCheckResult:
        with self._lock:
            t = self._targets.get(snap.name)
            failing = t is not None and t.failing and t.container_id == snap.id
            detail = t.detail if t is not None else ""
        if not failing or result.problem is not None or result.skipped is not None:
            return result
        return HealthCheckResult(
            snap.id, snap.name, result.observed_at, ProblemType.PROBE_FAILED, detail,
            source=result.source,
        )  # fmt: skip

    def tick(self) -> None:
        """Run every probe that is due, in parallel; a verdict that flips is applied at once."""
        now = self.healer.clock.now()
        with self._lock:
            due = [(n, t) for n, t in self._targets.items() if t.next_due <= now]
        if not due:
            return
        # One slow target (up to its timeout) must not delay the others' periods.
        with ThreadPoolExecutor(max_workers=min(MAX_PARALLEL, len(due))) as pool:
            results = list(pool.map(lambda item: run_probe(item[1].spec, item[1].address), due))
        for (name, t), (passed, seen) in zip(due, results, strict=True):
            with self._lock:
                t.next_due = now + t.spec.period
                streak = t.failures
                flipped = self._record(t, passed, seen)
            if passed and streak and not t.failing:
                log.debug(
                    "probe passed again below threshold", extra=kv(container=name, failures=streak)
                )
            if not passed:
                log.debug(
                    "probe failed",
                    extra=kv(container=name, failures=t.failures, detail=seen),
                )
            if flipped:
                log.info(
                    "probe failing" if t.failing else "probe passing again",
                    extra=kv(container=name, detail=t.detail),
                )
                self._recheck(t.container_id)

    @staticmethod
    def _record(t: _Target, passed: bool, seen: str) -> bool:
        if passed:
            t.failures, t.successes = 0, t.successes + 1
            if t.failing and t.successes >= t.spec.success_threshold:
                t.failing, t.detail = False, seen
                return True
            return False
        t.successes, t.failures = 0, t.failures + 1
        if not t.failing and t.failures >= t.spec.failure_threshold:
            t.failing = True
            t.detail = f"probe failed {t.failures} times in a row: {seen}"
            return True
        return False

    def _recheck(self, container_id: str) -> None:
        healer = self.healer
        try:
            snap = healer.engine.inspect(container_id)
            if snap is not None:
                healer.apply(healer.assess(snap, "probe"))
        except EngineUnavailable as exc:
            healer._engine_state(False, str(exc))
