"""Raw HTTP/1.1 on one socket, for the tests that send what no client library would: requests
pipelined, framed twice, or cut short, and the replies parsed back as they came."""

from __future__ import annotations

import json
import socket
from dataclasses import dataclass
from typing import Any


@dataclass
class Reply:
    status: int
    headers: dict[str, str]
    body: bytes

    def json(self) -> Any:
        return json.loads(self.body)


def _parse(data: bytes) -> list[Reply]:
    replies = []
    while data:
        head, sep, rest = data.partition(b"\r\n\r\n")
        assert sep, f"incomplete response: {data[:200]!r}"
        status_line, *lines = head.decode("latin-1").split("\r\n")
        headers = {k.strip().lower(): v.strip() for k, _, v in (x.partition(":") for x in lines)}
        length = int(headers.get("content-length", "0"))
        replies.append(Reply(int(status_line.split()[1]), headers, rest[:length]))
        data = rest[length:]
    return replies


def exchange(url: str, raw: bytes, quiet: float = 3.0) -> tuple[list[Reply], bool]:
    """Send `raw` on one connection; the replies, and whether the server closed it (else it was
    still open after `quiet` seconds of silence)."""
    host, _, port = url.removeprefix("http://").rpartition(":")
    received = b""
    with socket.create_connection((host, int(port)), timeout=quiet) as s:
        s.sendall(raw)
        closed = False
        try:
            while chunk := s.recv(65536):
                received += chunk
            closed = True
        except TimeoutError:
            pass
        except ConnectionResetError:
            closed = True
    return _parse(received), closed


def request(method: str, target: str, body: bytes = b"", **headers: str) -> bytes:
    lines = [f"{method} {target} HTTP/1.1", "Host: localhost"]
    lines += [f"{k.replace('_', '-')}: {v}" for k, v in headers.items()]
    if body and "Transfer_Encoding" not in headers and "Content_Length" not in headers:
        lines.append(f"Content-Length: {len(body)}")
    return ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1") + body
