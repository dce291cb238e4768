"""StoreWatch: the daemon hears at once that the store was written, by any process, rather than
after its next sweep. An inotify watch (Linux, through the C library by ctypes: no dependency)
on the store's write-ahead log, which every commit of every connection appends to, whoever
makes it (a `guardian` command, an older one, the sqlite3 shell) and from wherever the file is
shared (a `docker exec`, the host beside a container).

One thread sleeps in poll() until the kernel says the log was written, or the sweep pokes it;
it looks once, then waits PACE before it listens again, however many writes came meanwhile
(the kernel holds them as one readable descriptor, read whole at the next turn): a flood of
writes costs at most one look per PACE, and a store nobody writes costs nothing. Where inotify
is missing (not Linux, no watch left, the file not there) there is no watch, and the daemon's
sweep looks itself.
"""

from __future__ import annotations

import contextlib
import logging
import os
import select
import struct
from collections.abc import Callable
from pathlib import Path

from guardian.logs import kv

log = logging.getLogger("guardian.store_watch")

PACE = 0.2  # seconds: at most one look per this, however many writes come
_IN_MODIFY = 0x00000002
_IN_IGNORED = 0x00008000  # the watch is gone (the file was removed, its file system unmounted)
_EVENT = struct.Struct("iIII")  # struct inotify_event: wd, mask, cookie, len (then the name)
_CHUNK = 64 * 1024
_CHUNKS = 4  # read per turn at most: what is left is read at the next (a PACE later)


def _watch(path: Path) -> tuple[int, str]:
    """An inotify descriptor watching `path` for writes (non-blocking), or (-1, why not)."""
    try:
        import ctypes  # only where the watch is made: the commands never load it

        libc = ctypes.CDLL(None, use_errno=True)
        init, add = libc.inotify_init1, libc.inotify_add_watch
    except Exception as exc:  # noqa: BLE001 - not Linux, no C library, a sandbox refusing it
        return -1, f"no inotify here ({exc.__class__.__name__}: {exc})"
    add.argtypes = [ctypes.c_int, ctypes.c_char_p, ctypes.c_uint32]
    fd = int(init(os.O_NONBLOCK | os.O_CLOEXEC))
    if fd < 0:
        return -1, f"inotify: {os.strerror(ctypes.get_errno())}"
    if int(add(fd, os.fsencode(path), _IN_MODIFY)) < 0:
        reason = f"{path}: {os.strerror(ctypes.get_errno())}"
        os.close(fd)
        return -1, reason
    return fd, ""


class StoreWatch:
    """Built by `of`; `run(look)` on a thread of its own until `stop()`, then `close()`."""

    def __init__(self, fd: int, path: Path) -> None:
        self.path = path
        self._fd = fd
        self._stopping = False
        self._wake_read, self._wake_write = os.pipe()
        for end in (self._wake_read, self._wake_write):
            os.set_blocking(end, False)
        self._either = select.poll()  # a write to the store, or a poke
        self._either.register(self._fd, select.POLLIN)
        self._either.register(self._wake_read, select.POLLIN)
        self._poked = select.poll()  # a poke (a stop) alone: while pacing
        self._poked.register(self._wake_read, select.POLLIN)
        self.looks = 0  # how many looks it made (tests, the log at its end)

    @classmethod
    def of(cls, store: Path) -> tuple[StoreWatch | None, str]:
        """A watch on the write-ahead log of the SQLite store at `store`, or (None, why not)."""
        wal = store.with_name(store.name + "-wal")
        fd, reason = _watch(wal)
        return (cls(fd, wal), "") if fd >= 0 else (None, reason)

    def poke(self) -> None:
        """Look now (any thread), as after a write: the sweep's look, in case one was missed."""
        with contextlib.suppress(BlockingIOError, OSError):  # a full pipe is a poke already
            os.write(self._wake_write, b"\0")

    def stop(self) -> None:
        """End run() (any thread): a look under way ends first."""
        self._stopping = True
        self.poke()

    def run(self, look: Callable[[], object], pace: float = PACE) -> None:
        """Until stop(): asleep until the store is written or a poke, then `look()` once, then
        `pace` seconds without listening to writes (a poke or a stop ends it)."""
        watching = True
        while not self._stopping:
            self._either.poll()
            if self._stopping:
                break
            self._drain(self._wake_read)
            if watching and self._drain(self._fd):
                watching = False  # the log went away: pokes alone from now on
                self._either.unregister(self._fd)
                log.warning(
                    "store watch ended; other processes' writes are found after each sweep",
                    extra=kv(file=str(self.path)),
                )
            self.looks += 1
            try:
                look()
            except Exception:
                log.exception("looking at the store's writes failed")
            self._poked.poll(pace * 1000)

    def _drain(self, fd: int) -> bool:
        """Read what waits on `fd` (at most _CHUNKS reads); whether inotify said the watch is
        gone."""
        gone = False
        for _ in range(_CHUNKS):
            try:
                data = os.read(fd, _CHUNK)
            except (BlockingIOError, InterruptedError):
                break
            except OSError:
                return fd == self._fd  # the descriptor broke: as good as gone
            if not data:
                break
            gone = gone or (fd == self._fd and _ignored(data))
        return gone

    def close(self) -> None:
        """Release the descriptors (after run() ended)."""
        for fd in (self._fd, self._wake_read, self._wake_write):
            with contextlib.suppress(OSError):
                os.close(fd)


def _ignored(data: bytes) -> bool:
    """Whether a read of inotify events holds IN_IGNORED (the watch was removed)."""
    at = 0
    while at + _EVENT.size <= len(data):
        _, mask, _, length = _EVENT.unpack_from(data, at)
        if mask & _IN_IGNORED:
            return True
        at += _EVENT.size + length
    return False
