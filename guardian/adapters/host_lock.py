"""One Guardian per engine on this host: a flock on the store, and a name in the abstract Unix
namespace that each Guardian of an engine and scope binds, judged by who holds it.

An abstract name carries no permissions: any local user can bind one. So holding a name proves
nothing by itself. Each Guardian binds a name of its own under the engine and scope's prefix,
then asks the kernel who holds every other name under it (SO_PEERCRED, SO_PEERGROUPS: what a
process cannot fake). A holder that could reach the engine (root, this user, or one the socket's
permissions let in) is another Guardian, and this one refuses; any other holder is a squatter,
named in a warning and otherwise ignored (docs/design.md rule 19). Every lock dies with its
process, so a Guardian restarted by systemd or Docker takes over from its dead predecessor at
once.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import hashlib
import os
import secrets
import socket
import stat
import struct
import threading
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from guardian.adapters.private_files import open_private
from guardian.ports import InstanceConflict, StoreError

_PEERCRED = struct.Struct("3i")  # struct ucred: pid, uid, gid
# SO_PEERGROUPS (Linux 4.13): the peer's supplementary groups; Python names it from 3.13 on.
_PEERGROUPS = getattr(socket, "SO_PEERGROUPS", 59)
_MAX_GROUPS = 65536  # NGROUPS_MAX
COMMAND_SHOWN = 120  # characters of a holder's command line in a message
SQUATTERS_SHOWN = 3  # holders named in the warning; the rest are counted


def engine_key(url: str) -> str:
    """What identifies an engine on this host: its socket's inode for a unix:// URL (so
    /var/run/docker.sock and /run/docker.sock are one engine), else the URL."""
    if url.startswith("unix://"):
        with contextlib.suppress(OSError):
            st = os.stat(url.removeprefix("unix://"))
            return f"socket {st.st_dev}:{st.st_ino}"
    return url


def lock_address(engine: str, scope: str) -> str:
    """The abstract name under which Guardians of `engine` (engine_key) and `scope` bind, each
    with a suffix of its own (a Guardian before these held the bare name)."""
    digest = hashlib.sha256(f"{engine}\n{scope}".encode()).hexdigest()[:32]
    return f"\0guardian-{digest}"


def printable(text: str, limit: int = COMMAND_SHOWN) -> str:
    """`text` safe in a log line: control and other unprintable characters escaped (`\\n`,
    `\\x1b`), at most `limit` characters."""
    out = "".join(c if c.isprintable() else repr(c)[1:-1] for c in text[: limit * 4])
    return out if len(out) <= limit else out[: limit - 1] + "…"


def describe_pid(pid: int, proc: Path = Path("/proc")) -> str:
    """`pid 123 (guardian run --config x)`: how a person finds a process. The command line is
    whatever that process set: escaped and bounded, never copied raw."""
    try:
        argv = (proc / str(pid) / "cmdline").read_bytes()[: COMMAND_SHOWN * 4].split(b"\0")
        command = printable(" ".join(a.decode(errors="replace") for a in argv if a))
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


@dataclass(frozen=True)
class Peer:
    """Who holds a listening socket, as the kernel recorded it when it began to listen."""

    pid: int
    uid: int
    gid: int
    groups: frozenset[int] = frozenset()


@dataclass(frozen=True)
class EngineAccess:
    """Who can reach the engine, and so is root-equivalent on it: root, this process's own
    user, and for a unix:// engine whoever the socket's owner and mode let connect (its owner,
    its group: Docker's `docker`). For a TCP engine only root and this user count: nothing on
    this host shows who else can reach it."""

    uid: int
    socket: tuple[int, int, int] | None = None  # the engine socket's (uid, gid, mode)

    @classmethod
    def of(cls, url: str, uid: int | None = None) -> EngineAccess:
        found = None
        if url.startswith("unix://"):
            with contextlib.suppress(OSError):
                st = os.stat(url.removeprefix("unix://"))
                found = (st.st_uid, st.st_gid, stat.S_IMODE(st.st_mode))
        return cls(os.geteuid() if uid is None else uid, found)

    def reaches(self, peer: Peer) -> bool:
        if peer.uid in (0, self.uid):
            return True
        if self.socket is None:
            return False
        owner, group, mode = self.socket
        return bool(
            (peer.uid == owner and mode & 0o200)
            or ((group == peer.gid or group in peer.groups) and mode & 0o020)
            or mode & 0o002
        )


def peer_at(address: str) -> Peer | None:
    """The holder of the listening socket `address`, from the kernel; None when nothing there
    listens or its backlog is full (a squatter that never accepts): nothing is proven then."""
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as probe:
        probe.setblocking(False)  # a full backlog answers EAGAIN at once, never a wait
        try:
            probe.connect(address)
            pid, uid, gid = _PEERCRED.unpack(
                probe.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, _PEERCRED.size)
            )
        except OSError:
            return None
        return Peer(pid, uid, gid, _groups(probe))


def _groups(sock: socket.socket) -> frozenset[int]:
    for size in (256, _MAX_GROUPS):
        try:
            raw = sock.getsockopt(socket.SOL_SOCKET, _PEERGROUPS, 4 * size)
        except OSError as exc:
            if exc.errno == errno.ERANGE:
                continue
            return frozenset()
        return frozenset(struct.unpack(f"{len(raw) // 4}I", raw[: len(raw) // 4 * 4]))
    return frozenset()


def names_under(prefix: str, proc: Path = Path("/proc")) -> Iterator[str]:
    """The abstract names in this network namespace that are `prefix` or `prefix-…`, from the
    kernel's table of Unix sockets (where an abstract name shows after '@'). The bare prefix is
    always among them: a Guardian before these held it, and the table may be hidden."""
    shown = "@" + prefix.removeprefix("\0")
    yield prefix
    with (
        contextlib.suppress(OSError),
        (proc / "self" / "net" / "unix").open(errors="replace") as table,
    ):
        for line in table:
            name = line.rsplit(None, 1)[-1] if line.strip() else ""
            if name.startswith(shown + "-"):
                yield "\0" + name[1:]


def describe_peer(peer: Peer, proc: Path = Path("/proc")) -> str:
    return f"uid {peer.uid}, {describe_pid(peer.pid, proc)}" if peer.pid else f"uid {peer.uid}"


class HostLock:
    """Held for the daemon's life: a flock on the store file, and an abstract Unix name of this
    Guardian's own under the engine and scope's prefix. acquire() raises InstanceConflict naming
    another Guardian of the engine and scope (a holder that can reach the engine); names held
    by those that cannot reach it are counted (`squatted`, the first few in `squatters`) for
    a warning (`warning()`)."""

    def __init__(
        self,
        store: Path,
        engine: str,
        scope: str,
        access: EngineAccess | None = None,
        proc: Path = Path("/proc"),
    ) -> None:
        self.store = store
        self.proc = proc
        self.prefix = lock_address(engine, scope)
        self.scope = scope
        self.access = access or EngineAccess(os.geteuid())
        self.address = ""  # this Guardian's own name, once bound
        self.squatters: tuple[str, ...] = ()  # the first few holders that cannot reach it
        self.squatted = 0  # how many names they hold
        self._fd: int | None = None
        self._socket: socket.socket | None = None
        self._dropper: threading.Thread | None = None

    def acquire(self) -> None:
        created = not self.store.exists()
        self._lock_store()
        try:
            self._bind()
            self._judge_others()
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
        """Bind a name no one else has: the pid and 64 random bits after the prefix."""
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        for _ in range(8):  # a squatter can only guess the random part
            address = f"{self.prefix}-{os.getpid()}-{secrets.token_hex(8)}"
            try:
                sock.bind(address)
                break
            except OSError:
                continue
        else:
            sock.close()
            raise InstanceConflict("cannot bind a name for the engine lock")
        # A deep backlog and a thread that accepts and drops every connection, so it never
        # fills: a Guardian starting after this one always reads this one's credentials, however
        # many probe it and however late the dropping thread gets a turn on a loaded host.
        sock.listen(4096)
        self._socket, self.address = sock, address
        self._dropper = threading.Thread(
            target=_drop_connections, args=(sock,), name="lock", daemon=True
        )
        self._dropper.start()

    def _judge_others(self) -> None:
        """Refuse beside a holder that can reach the engine. Two Guardians starting at the same
        instant may both see the other and both refuse: the safe side (one restarts later)."""
        squatters: list[str] = []
        count = 0
        for name in dict.fromkeys(names_under(self.prefix, self.proc)):
            if name == self.address:
                continue
            peer = peer_at(name)
            if peer is None:
                continue  # nothing listens there, or it never accepts: no Guardian
            if self.access.reaches(peer):
                raise InstanceConflict(engine_taken(self.scope, describe_pid(peer.pid, self.proc)))
            count += 1
            if len(squatters) < SQUATTERS_SHOWN:  # a squatter may hold thousands: a few named
                squatters.append(describe_peer(peer, self.proc))
        self.squatters, self.squatted = tuple(squatters), count

    def warning(self) -> str:
        """One line for the log and /healthz ("" when none): squatters warn, never refuse."""
        if not self.squatters:
            return ""
        shown = "; ".join(self.squatters)
        left = self.squatted - len(self.squatters)
        more = f" and {left} more" if left > 0 else ""
        return (
            f"warning: processes that cannot reach the engine hold names of Guardian's engine "
            f"lock ({shown}{more}): not rivals"
        )

    def release(self) -> None:
        if self._socket is not None:
            # shutdown wakes the thread blocked in accept(); close alone would not.
            with contextlib.suppress(OSError):
                self._socket.shutdown(socket.SHUT_RDWR)
            if self._dropper is not None:
                # Its accept() holds the socket until it returns: joined, the name is gone
                # once release() returns, not a moment later.
                self._dropper.join(timeout=1.0)
                self._dropper = None
            self._socket.close()
            self._socket = None
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None


def _drop_connections(sock: socket.socket) -> None:
    while True:
        try:
            conn, _ = sock.accept()
        except OSError:
            return  # released
        conn.close()
