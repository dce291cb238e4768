"""One Guardian per engine: a lock on the store, a host-wide lock per engine and scope, and a
look at the engine for another running Guardian container.

Every lock dies with its process (flock, an abstract Unix socket), so a Guardian restarted by
systemd or Docker takes over from its dead predecessor without anything to clean up.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import os
import socket
import struct
from pathlib import Path

from guardian.adapters.private_files import open_private
from guardian.core.labels import ALL, SELF
from guardian.ports import Engine, InstanceConflict, StoreError

_PEERCRED = struct.Struct("3i")  # struct ucred: pid, uid, gid
SCOPE_LABEL = "guardian.scope"  # a Guardian container's watch.scope, for other Guardians


def engine_key(url: str) -> str:
    """What identifies an engine on this host: its socket's inode for a unix:// URL (so
    /var/run/docker.sock and /run/docker.sock are one engine), else the URL."""
    if url.startswith("unix://"):
        with contextlib.suppress(OSError):
            st = os.stat(url.removeprefix("unix://"))
            return f"socket {st.st_dev}:{st.st_ino}"
    return url


def describe_pid(pid: int, proc: Path = Path("/proc")) -> str:
    """`pid 123 (guardian run --config x)`: how a person finds a process."""
    try:
        argv = (proc / str(pid) / "cmdline").read_bytes().split(b"\0")
        command = " ".join(a.decode(errors="replace") for a in argv if a)[:200]
    except OSError:
        command = ""
    return f"pid {pid} ({command})" if command else f"pid {pid}"


def engine_taken(scope: str, holder: str) -> str:
    """The one line that refuses a second Guardian of an engine (and scope)."""
    scoped = f" (watch.scope {scope})" if scope else ""
    return f"another Guardian watches this engine{scoped}: {holder}"


def flock_holder(st: os.stat_result, proc: Path = Path("/proc")) -> str:
    """The process holding a flock on the file `st` describes, from the kernel's lock table."""
    inode = f"{os.major(st.st_dev):02x}:{os.minor(st.st_dev):02x}:{st.st_ino}"
    with contextlib.suppress(OSError):
        for line in (proc / "locks").read_text().splitlines():
            fields = line.split()
            # "1: FLOCK  ADVISORY  WRITE 1234 08:01:5678 0 EOF" (a blocked waiter has "->")
            if "FLOCK" in fields and "->" not in fields and inode in fields:
                pid = int(fields[fields.index(inode) - 1])
                if pid > 0:
                    return describe_pid(pid, proc)
    return "a process this one cannot see"


class HostLock:
    """Held for the daemon's life: a flock on the store file, and an abstract Unix socket named
    after the engine and the watch scope (two Guardians of this host on one engine, whatever
    their stores). acquire() raises InstanceConflict naming the holder."""

    def __init__(self, store: Path, engine: str, scope: str, proc: Path = Path("/proc")) -> None:
        self.store = store
        self.proc = proc
        digest = hashlib.sha256(f"{engine}\n{scope}".encode()).hexdigest()[:32]
        self.address = f"\0guardian-{digest}"
        self.scope = scope
        self._fd: int | None = None
        self._socket: socket.socket | None = None

    def acquire(self) -> None:
        created = not self.store.exists()
        self._lock_store()
        try:
            self._bind()
        except InstanceConflict:
            if created and self.store.stat().st_size == 0:
                self.store.unlink()  # refused: leave no empty store behind
            self.release()
            raise

    def _lock_store(self) -> None:
        """flock the store file itself (SQLite's own locks are fcntl locks, which flock never
        meets on Linux), so nothing new appears in the state directory."""
        try:
            # Created private here when the lock is first to touch the path: 0644 would stay.
            fd = open_private(self.store)
        except OSError as exc:
            raise StoreError(f"store {self.store}: cannot open: {exc.strerror or exc}") from None
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = flock_holder(os.fstat(fd), self.proc)
            os.close(fd)
            raise InstanceConflict(
                f"another Guardian is using the store {self.store}: {holder}"
            ) from None
        self._fd = fd

    def _bind(self) -> None:
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            sock.bind(self.address)
            sock.listen(1)
        except OSError:
            sock.close()
            raise InstanceConflict(engine_taken(self.scope, self._holder())) from None
        self._socket = sock

    def _holder(self) -> str:
        """The holder's pid, from the kernel: a connection to its socket carries its creds."""
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as probe:
            try:
                probe.connect(self.address)
                creds = probe.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, _PEERCRED.size)
            except OSError:
                return "unknown process"
        return describe_pid(_PEERCRED.unpack(creds)[0], self.proc)

    def release(self) -> None:
        if self._socket is not None:
            self._socket.close()
            self._socket = None
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None


def rival_container(engine: Engine, self_ids: set[str], scope: str) -> str:
    """Another running Guardian container on the engine (label guardian.self=true) with the
    same watch scope (its label guardian.scope, none: the whole engine); "" when there is none.

    `self_ids`: what this process knows of its own container id (from the cgroup, the hostname
    Docker gives a container), so a sidecar restarted by Docker never sees itself as a rival.
    Reads only the container list, so it works behind a read-only socket proxy."""
    mine = {i for i in self_ids if len(i) >= 12}
    for c in engine.list_containers(ALL, f"{SELF}=true"):
        if c.state != "running" or any(c.id.startswith(i) for i in mine):
            continue
        if c.labels.get(SCOPE_LABEL, "") == scope:
            return f"container {c.name} ({c.id[:12]})"
    return ""
