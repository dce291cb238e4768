"""Who is asking, decided once for every path before any handler: the Host names the port
answers (DNS rebinding), the client behind a trusted reverse proxy, and the headers every
answer carries.
"""

from __future__ import annotations

import ipaddress
from collections.abc import Iterable
from dataclasses import dataclass

Network = ipaddress.IPv4Network | ipaddress.IPv6Network

# Every answer, whatever made it: no type guessing, and nothing of it runs as a page. The
# status page sets a CSP of its own (its scripts and styles come from this port).
HEADERS = {
    "X-Content-Type-Options": "nosniff",
    "Content-Security-Policy": (
        "default-src 'none'; frame-ancestors 'none'; base-uri 'none'; form-action 'none'"
    ),
}
ALWAYS_ALLOWED = ("localhost",)
MAX_FORWARDED = 32  # X-Forwarded-For entries looked at, from the right


def host_name(header: str) -> str:
    """The name in a Host header, without its port, lower-case ("" when there is none)."""
    header = header.strip().lower()
    if header.startswith("["):
        return header[: header.find("]") + 1] if "]" in header else header
    name, sep, port = header.rpartition(":")
    return (name if sep and port.isdigit() else header).rstrip(".")


def is_address(name: str) -> bool:
    try:
        ipaddress.ip_address(name.removeprefix("[").removesuffix("]"))
    except ValueError:
        return False
    return True


@dataclass(frozen=True)
class Front:
    """The port's answer to who is asking.

    `allowed_hosts`: the names (beside every IP address and localhost) a Host header may
    carry; "*" allows any. Ports are not compared: a published or proxied port changes the
    one the client sees, and rebinding changes the name. `trusted_proxies`: the addresses of
    reverse proxies whose X-Forwarded-For names the client."""

    allowed_hosts: frozenset[str] = frozenset()
    trusted_proxies: tuple[Network, ...] = ()

    @classmethod
    def of(
        cls,
        listen: str,
        allowed_hosts: Iterable[str] = (),
        trusted_proxies: Iterable[str] = (),
        hostname: str = "",
    ) -> Front:
        """The front of a server on `listen` (host:port): its host, and the machine's
        `hostname`, are allowed too."""
        own = (listen.rpartition(":")[0], hostname, *ALWAYS_ALLOWED)
        names = {host_name(n) for n in (*allowed_hosts, *own)}
        proxies = tuple(ipaddress.ip_network(p, strict=False) for p in trusted_proxies)
        return cls(frozenset(n for n in names if n), proxies)

    def host_allowed(self, header: str | None) -> bool:
        """Whether a request with this Host header (None: none sent) is for this Guardian.

        An IP address is never a rebinding: a browser that loaded a page from an address
        only sends it to that address. A request without Host is no browser's (an HTTP/1.1
        one is refused before this is asked: entrypoints/http_server.py)."""
        if header is None or "*" in self.allowed_hosts:
            return True
        name = host_name(header)
        return name in self.allowed_hosts or is_address(name)

    def client(self, peer: str, forwarded_for: str) -> str:
        """The client's address: the peer's, or, when the peer is a trusted proxy, the
        right-most X-Forwarded-For address that is not one (proxies append what they saw)."""
        client = peer
        if not self._trusted(client):
            return client
        for entry in reversed(forwarded_for.split(",")[-MAX_FORWARDED:]):
            entry = entry.strip()
            if not is_address(entry):
                break  # what a proxy would not write: the client wrote it, trust stops
            client = entry.removeprefix("[").removesuffix("]")
            if not self._trusted(client):
                break
        return client

    def _trusted(self, address: str) -> bool:
        if not self.trusted_proxies:
            return False
        try:
            ip = ipaddress.ip_address(address)
        except ValueError:
            return False
        return any(ip in net for net in self.trusted_proxies)
