"""A followed container's output off the wire: the engine's HTTP chunks and its stdout/stderr
frames taken off in bulk, so a container that logs ten thousand lines a second costs a few reads
of the socket, not a Python call per line (docker-py's own log stream reads each frame's header
and payload with a system call of its own).

Everything is bounded by the caller's `limit` per read: no frame, chunk or line is ever held
whole, whatever size it claims.
"""

from __future__ import annotations

import contextlib
import socket
import struct
import threading
from collections.abc import Callable, Iterator
from datetime import datetime
from typing import Any

from guardian.adapters.engine.engine_clock import EngineClock
from guardian.ports import EngineUnavailable

FRAME_HEADER = struct.Struct(">BxxxL")  # stream (0 stdin, 1 stdout, 2 stderr), 3 pad, size
MAX_SIZE_LINE = 64  # bytes of an HTTP chunk's size line (hex digits and extensions)
MAX_STAMP = 40  # bytes of a frame's RFC 3339 time ("2026-12-04T17:07:05.123456789Z")


class WireError(Exception):
    """The stream does not follow its framing (one line for the log)."""


class Dechunker:
    """HTTP/1.1 chunked transfer coding, decoded across arbitrary splits of the bytes."""

    def __init__(self) -> None:
        self._size_line = b""  # an incomplete size line from the last feed
        self._left = 0  # bytes of the current chunk's data still to come
        self._crlf = 0  # bytes of the CRLF after a chunk's data still to skip
        self.ended = False  # the last chunk (size 0) was read

    def feed(self, data: bytes) -> bytes:
        out: list[bytes] = []
        if self._size_line:
            data, self._size_line = self._size_line + data, b""
        i, n = 0, len(data)
        while i < n and not self.ended:
            if self._left:
                take = min(self._left, n - i)
                out.append(data[i : i + take])
                i += take
                self._left -= take
                if not self._left:
                    self._crlf = 2
            elif self._crlf:
                skip = min(self._crlf, n - i)
                i += skip
                self._crlf -= skip
            else:
                j = data.find(b"\r\n", i, i + MAX_SIZE_LINE)
                if j < 0:
                    if n - i >= MAX_SIZE_LINE:
                        raise WireError("an HTTP chunk size line too long")
                    self._size_line = data[i:]
                    break
                try:
                    size = int(data[i:j].split(b";", 1)[0], 16)
                except ValueError:
                    raise WireError("an HTTP chunk size that is not hexadecimal") from None
                i = j + 2
                if size == 0:
                    self.ended = True
                elif i + size + 2 <= n:  # the whole chunk is here: taken in one step
                    out.append(data[i : i + size])
                    i += size + 2
                    continue
                self._left = size
        return b"".join(out)


class Demultiplexer:
    """Docker's stdout/stderr frames (a non-TTY container's logs): the payloads, merged.
    `stamped`: each frame's payload opens with the engine's time of it and a space (the logs'
    `timestamps`), taken off here and the last one kept (`stamp`): how far behind a reader
    is, told at one look per frame, not a pass over every line."""

    def __init__(self, stamped: bool = False) -> None:
        self._header = b""  # an incomplete frame header from the last feed
        self._left = 0  # bytes of the current frame's payload still to come
        self._stamped = stamped
        self._in_stamp = False  # the current frame's time is still being read
        self._stamp = b""  # the part of it read so far
        self.stamp = b""  # the engine's time of the last frame read (RFC 3339), b"": none yet

    def feed(self, data: bytes) -> bytes:
        out: list[bytes] = []
        if self._header:
            data, self._header = self._header + data, b""
        i, n = 0, len(data)
        size = FRAME_HEADER.size
        while i < n:
            if self._left and self._in_stamp:
                take = min(self._left, n - i)
                space = data.find(b" ", i, i + take)
                end = i + take if space < 0 else space + 1
                self._stamp += data[i : end if space < 0 else space]
                if len(self._stamp) > MAX_STAMP:
                    raise WireError("a log frame's time too long")
                self._left -= end - i
                i = end
                if space >= 0:
                    self.stamp, self._stamp, self._in_stamp = self._stamp, b"", False
            elif self._left:
                take = min(self._left, n - i)
                out.append(data[i : i + take])
                i += take
                self._left -= take
            elif n - i < size:
                self._header = data[i:]
                break
            else:
                kind, self._left = FRAME_HEADER.unpack_from(data, i)
                if kind > 2:
                    raise WireError(f"a log frame of unknown stream {kind}")
                i += size
                end = i + self._left
                if end <= n:  # the whole frame is here: taken in one step
                    if self._stamped:
                        space = data.find(b" ", i, min(end, i + MAX_STAMP + 1))
                        if space < 0:
                            raise WireError("a log frame without its time")
                        self.stamp, i = data[i:space], space + 1
                    out.append(data[i:end])
                    i, self._left = end, 0
                    continue
                self._in_stamp = self._stamped
        return b"".join(out)


def _identity(data: bytes) -> bytes:
    return data


class FollowedLogs:
    """The LogStream port over one streaming response of the engine's logs endpoint.

    `read1(limit)` returns what the connection has (at most `limit` bytes, at most one read of
    the socket; b"" at its end); `chunked`: the body is in HTTP chunks (read1 gives them raw);
    `multiplexed`: stdout/stderr frames (a container without a TTY). `release` ends a read
    waiting on the connection, from any thread (shuts its socket down); `finish` closes the
    response, on the reading thread once the stream ended."""

    def __init__(
        self,
        read1: Callable[[int], bytes],
        release: Callable[[], None],
        finish: Callable[[], None],
        *,
        chunked: bool,
        multiplexed: bool,
        stamped: bool = False,
    ) -> None:
        self._read1 = read1
        self._release = release
        self._finish = finish
        self._chunks = Dechunker() if chunked else None
        self._demux = Demultiplexer(stamped) if multiplexed else None
        self._frames = self._demux.feed if self._demux is not None else _identity
        self._closed = threading.Event()

    def read(self, limit: int) -> bytes:
        try:
            while not self._closed.is_set():
                raw = self._read1(limit)
                if not raw:
                    break
                if self._chunks is not None:
                    raw = self._chunks.feed(raw)
                    if self._chunks.ended and not raw:
                        break
                payload = self._frames(raw)
                if payload:
                    return payload
        except BaseException:
            self._end()
            raise
        self._end()
        return b""

    def _end(self) -> None:
        with contextlib.suppress(Exception):  # a stream already cut may fail to close
            self._finish()

    @property
    def closed(self) -> bool:
        return self._closed.is_set()

    @property
    def stamp(self) -> bytes:
        """The engine's time of the last frame read (b"": unknown)."""
        return self._demux.stamp if self._demux is not None else b""

    def close(self) -> None:
        if not self._closed.is_set():
            self._closed.set()
            with contextlib.suppress(Exception):  # a stream already cut may fail to close
                self._release()


class EndedLogs:
    """A stream with nothing in it (the container is gone)."""

    written_at = None

    def read(self, limit: int) -> bytes:
        return b""

    def close(self) -> None:
        return None


class StampedLogs:
    """A followed stream whose engine times read in Guardian's frame (EngineClock)."""

    def __init__(self, stream: FollowedLogs, clock: EngineClock) -> None:
        self._stream = stream
        self._clock = clock

    @property
    def closed(self) -> bool:
        return self._stream.closed

    @property
    def written_at(self) -> datetime | None:
        at = stamp_time(self._stream.stamp) if self._stream.stamp else None
        return self._clock.ours(at) if at is not None else None

    def read(self, limit: int) -> bytes:
        try:
            return self._stream.read(limit)
        except WireError as exc:
            raise EngineUnavailable(f"a followed log broke its framing: {exc}") from None

    def close(self) -> None:
        self._stream.close()


def raw_reader(response: Any) -> tuple[Callable[[int], bytes], bool]:
    """How to read `response`'s body in bulk: (read1, whether what it returns is still
    chunk-coded). The buffered file under urllib3 and http.client gives the socket's bytes as
    they come (docker-py reaches the same object for its attach sockets); else requests' own
    iteration, which decodes the chunks itself."""
    chunked = "chunked" in response.headers.get("Transfer-Encoding", "").lower()
    fp = getattr(getattr(getattr(response, "raw", None), "_fp", None), "fp", None)
    if fp is not None and hasattr(fp, "read1"):
        return fp.read1, chunked
    chunks: Iterator[bytes] = response.iter_content(chunk_size=None)

    def read1(limit: int) -> bytes:
        return next(chunks, b"")

    return read1, False


def stamp_time(stamp: bytes) -> datetime | None:
    """An RFC 3339 time as the engine writes it (nanoseconds, Z), to the microsecond."""
    text = stamp.decode("ascii", errors="replace").rstrip("Z")
    head, _, fraction = text.partition(".")
    try:
        return datetime.fromisoformat(f"{head}.{fraction[:6]:0<6}+00:00")
    except ValueError:
        return None


def shut_down(response: Any) -> None:
    """End a read waiting on `response`'s connection, from another thread: its socket shut
    down (closing the file under a blocked read would wait for the read), found as docker-py's
    CancellableStream finds it; a connection without one (SSH) is closed."""
    fp = getattr(getattr(getattr(response, "raw", None), "_fp", None), "fp", None)
    raw = getattr(fp, "raw", None)
    sock = getattr(raw, "_sock", None) or getattr(raw, "sock", None)
    sock = getattr(sock, "socket", sock)  # pyOpenSSL's wrapper
    if isinstance(sock, socket.socket):
        sock.shutdown(socket.SHUT_RDWR)
    else:
        response.close()
