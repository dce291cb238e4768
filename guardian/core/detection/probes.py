"""Probes a container asks for by label: HTTP and TCP specs with thresholds, parsed and bounded.

`guardian.probe.http=http://:8080/healthz` (the container's address fills in an empty host) or
`guardian.probe.tcp=:5432`. A probe turns a container `probe_failed` after failure_threshold
failures in a row and healthy again after success_threshold successes in a row (kubelet-style).
A probe may aim only at the container's own addresses, or at hosts the operator allowed.
"""

from __future__ import annotations

import ipaddress
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from datetime import timedelta
from typing import Any
from urllib.parse import urlsplit

from guardian.core.limits import from_label

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
            if any(c <= " " or c == "\x7f" for c in path) or len(path) > 1024:
                raise ValueError  # it is written into the request line as it is
            spec = replace(defaults, kind="http", host=url.hostname or "", port=url.port, path=path)
            spec = replace(spec, scheme=url.scheme)
        except ValueError:
            warnings.append(f"label {HTTP}={raw[:60]!r}: expected a URL like http://:8080/healthz")
    elif TCP in labels:
        raw = labels[TCP].strip()
        host, _, port = raw.rpartition(":")
        if port.isdigit() and 0 < int(port) < 65536:
            spec = replace(defaults, kind="tcp", host=host.strip("[]"), port=int(port))
        else:
            warnings.append(f"label {TCP}={raw[:60]!r}: expected [host]:port, e.g. :5432")
    if spec is None:
        return None, warnings
    # Bounded like the probe.* config keys (core.limits).
    for label, field_name in (
        (PERIOD, "period"),
        (TIMEOUT, "timeout"),
        (FAILURE_THRESHOLD, "failure_threshold"),
        (SUCCESS_THRESHOLD, "success_threshold"),
    ):
        if label in labels:
            value, warning = from_label(label, labels[label])
            if value is not None:
                changes: dict[str, Any] = {field_name: value}
                spec = replace(spec, **changes)
            warnings += [warning] if warning else []
    if EXPECT in labels:
        try:
            spec = replace(spec, expect=_expect(labels[EXPECT].strip()))
        except ValueError:
            warnings.append(
                f"label {EXPECT}={labels[EXPECT][:40]!r}: "
                "expected status codes such as 200 or 200-399,401"
            )
    return spec, warnings


def probe_host(
    spec: ProbeSpec, addresses: Sequence[str], allow_hosts: Sequence[str]
) -> tuple[str | None, str]:
    """(the host to probe, "") or (None, why not): the container's own address when the label
    names none; a named host must be one of the container's addresses or allowed by the
    operator (`probe.allow_hosts`), else a container could scan whatever Guardian can reach."""
    if not spec.host:
        if addresses:
            return addresses[0], ""
        return None, "the container has no network address to probe"
    if spec.host in addresses or any(_matches(spec.host, entry) for entry in allow_hosts):
        return spec.host, ""
    return None, (
        f"probe target {spec.host[:60]!r} is not the container's own address; "
        "the operator must list it in probe.allow_hosts"
    )


def _matches(host: str, entry: str) -> bool:
    """`entry` is a host name (exact, any case), an address or a network such as 10.0.0.0/8."""
    if host.lower() == entry.lower():
        return True
    try:
        return ipaddress.ip_address(host) in ipaddress.ip_network(entry, strict=False)
    except ValueError:
        return False
