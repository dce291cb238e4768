"""Probes a container asks for by label: HTTP and TCP specs with thresholds, parsed and bounded.

`guardian.probe.http=http://:8080/healthz` (the container's address fills in an empty host) or
`guardian.probe.tcp=:5432`. A probe turns a container `probe_failed` after failure_threshold
failures in a row and healthy again after success_threshold successes in a row (kubelet-style).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, replace
from datetime import timedelta
from typing import Any
from urllib.parse import urlsplit

from guardian.core.durations import parse_duration

HTTP = "guardian.probe.http"
TCP = "guardian.probe.tcp"
PERIOD = "guardian.probe.period"
TIMEOUT = "guardian.probe.timeout"
FAILURE_THRESHOLD = "guardian.probe.failure_threshold"
SUCCESS_THRESHOLD = "guardian.probe.success_threshold"
EXPECT = "guardian.probe.expect"
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
