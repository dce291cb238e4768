"""One Guardian per engine: another running Guardian container on the engine, proven by what
a label cannot fake (the host's own lock is host_lock.HostLock).

A container is another Guardian of this engine and scope only when it holds the engine's socket
(whoever can start one that mounts it controls the engine already) and shows it is a Guardian:
its network namespace holds this engine and scope's lock, or it runs `guardian run` labelled
with this scope. Anything less is a claim: a warning, never a refusal (docs/design.md rule 19).
"""

from __future__ import annotations

import os
import re
import socket
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path, PurePosixPath

from guardian.adapters.host_lock import engine_key, engine_taken, lock_address
from guardian.core.labels import ALL, SELF
from guardian.core.model import ContainerSnapshot
from guardian.ports import Engine

SCOPE_LABEL = "guardian.scope"  # a Guardian container's watch.scope, for other Guardians
# Containers labelled guardian.self inspected at start for evidence: anyone can start more, so
# the look is bounded; the rest of those claiming this scope are warned about unexamined.
MAX_INSPECTED = 32
CLAIMS_SHOWN = 3  # claims named in a warning; the rest are counted
_CONTAINER_ID = re.compile(r"[0-9a-f]{64}")  # a hostname may also name another container


# Where /proc/self/cgroup or mountinfo name the container a process runs in.
_OWN_CONTAINER = re.compile(r"(?:docker[-/]|/containers/)([0-9a-f]{64})")


def detect_self_id(proc: Path = Path("/proc/self")) -> str | None:
    """Guardian's own container id when it runs in a container, so it never heals itself."""
    for name in ("cgroup", "mountinfo"):
        try:
            text = (proc / name).read_text(errors="replace")
        except OSError:
            continue
        match = _OWN_CONTAINER.search(text)
        if match:
            return match.group(1)
    return None


@dataclass(frozen=True)
class Claim:
    """A running container labelled as a Guardian of this scope that showed no proof of it."""

    name: str
    id: str

    def __str__(self) -> str:
        return f"container {self.name} ({self.id[:12]})"


@dataclass(frozen=True)
class Rivals:
    """What the engine shows of other Guardians: `proven`, a Guardian container that holds this
    engine and scope ("" when none), and `claims`, containers that say so by label alone."""

    proven: str = ""
    claims: tuple[Claim, ...] = ()

    def warning(self) -> str:
        """One line for /healthz ("" when nothing claims): claims warn, they never refuse."""
        if not self.claims:
            return ""
        shown = ", ".join(str(c) for c in self.claims[:CLAIMS_SHOWN])
        left = len(self.claims) - CLAIMS_SHOWN
        more = f" and {left} more" if left > 0 else ""
        verb = "claims" if len(self.claims) == 1 else "claim"
        return (
            f"warning: {shown}{more} {verb} to be a Guardian by label alone (no proof: not a rival)"
        )


def rivals_of(engine: Engine, self_id: str | None, scope: str, docker_url: str) -> Rivals:
    """Another Guardian container on the engine with the same scope, proven (its `proven`
    says why this Guardian must not run), and the containers that only claim to be one by
    their labels (never this container, restarted by Docker). Raises EngineUnavailable."""
    own = {i for i in (self_id, socket.gethostname()) if i}
    found = find_rivals(engine, own, scope, docker_url)
    return Rivals(engine_taken(scope, found.proven), ()) if found.proven else found


def find_rivals(
    engine: Engine, self_ids: Iterable[str], scope: str, url: str, proc: Path = Path("/proc")
) -> Rivals:
    """Running containers labelled guardian.self=true (never this one, restarted by Docker),
    judged by evidence (docs/design.md rule 19). A container is a Guardian of this engine and scope
    when it mounts the engine's socket and either its network namespace holds this engine and
    scope's lock (seen where its processes are: a Guardian on the engine's host) or it runs
    `guardian run` with the label guardian.scope equal to `scope`. A name in a namespace can be
    bound by anyone; only the socket needs the engine. One that shows less is a claim, and so
    is every container when docker.url is TCP (a socket proxy): nothing it mounts proves it.

    `self_ids`: what this process knows of its own container id (the cgroup, the hostname
    Docker gives a container). `url`: this Guardian's docker.url. Reads the container list and
    inspects (the socket proxy's read-only endpoints)."""
    mine = {i for i in self_ids if len(i) >= 12}
    labelled = [c for c in engine.list_containers(ALL, f"{SELF}=true") if c.state == "running"]
    own = next((c for c in labelled if any(c.id.startswith(i) for i in mine)), None)
    others = [c for c in labelled if c is not own and not any(c.id.startswith(i) for i in mine)]
    if not others:
        return Rivals()
    if own is not None:
        own_snap = engine.inspect(own.id)
    else:  # its own container carries no guardian.self label: found by the cgroup's full id
        ids = sorted(i for i in mine if _CONTAINER_ID.fullmatch(i))
        own_snap = next((s for i in ids if (s := engine.inspect(i))), None)
    address = lock_address(engine_key(url), scope)
    sockets = engine_sockets(url, own_snap)
    claims: list[Claim] = []
    # Those that claim this scope first: they are the ones whose evidence matters most.
    others.sort(key=lambda c: c.labels.get(SCOPE_LABEL, "") != scope)
    for n, listed in enumerate(others):
        claimed = listed.labels.get(SCOPE_LABEL, "") == scope
        snap = engine.inspect(listed.id) if n < MAX_INSPECTED else None
        if snap is not None and snap.state == "running":
            shows = holds_lock(snap.pid, address, proc) or (claimed and runs_guardian(snap.command))
            if shows and mounts_engine(snap.mounts, sockets):
                return Rivals(proven=f"container {snap.name} ({snap.id[:12]})")
        elif n < MAX_INSPECTED:
            continue  # gone or stopped since the list
        if claimed:
            claims.append(Claim(listed.name, listed.id))
    return Rivals(claims=tuple(claims))


def holds_lock(pid: int, address: str, proc: Path = Path("/proc")) -> bool:
    """Whether the network namespace of process `pid` holds the lock `address` (lock_address:
    the bare name, or one under it): the kernel's table of its Unix sockets
    (/proc/<pid>/net/unix) shows an abstract name after '@'.
    False when the process is not visible from here (another pid namespace, systemd's
    ProtectProc=invisible), or shares this process's network namespace (where the lock held is
    this one's own: a rival there was refused by HostLock already)."""
    if pid <= 0:
        return False
    try:
        if (proc / str(pid) / "ns" / "net").stat().st_ino == (
            proc / "self" / "ns" / "net"
        ).stat().st_ino:
            return False
        with (proc / str(pid) / "net" / "unix").open(errors="replace") as table:
            name = "@" + address.removeprefix("\0")
            return any(
                word == name or word.startswith(name + "-")
                for line in table
                for word in line.split()[-1:]
            )
    except OSError:
        return False


def runs_guardian(command: Sequence[str]) -> bool:
    """Whether a command line runs the daemon: `guardian run` (the image's entrypoint and
    command, or a path to the script) or `python -m guardian.entrypoints.cli run`, perhaps
    behind an init such as tini."""
    for i, word in enumerate(command[:-1]):
        if PurePosixPath(word).name == "guardian" or word == "guardian.entrypoints.cli":
            return command[i + 1] == "run"
    return False


def canonical(path: str) -> str:
    """A host path with its links resolved (/var/run/docker.sock is /run/docker.sock on most
    hosts). In a container the links resolve in its own files, which follow the same layout.
    A path the system refuses (a NUL byte, from whoever started the container) stays as it is."""
    try:
        return os.path.realpath(path)
    except ValueError:
        return path


def engine_sockets(url: str, own: ContainerSnapshot | None) -> set[str]:
    """Where the engine's socket is on the engine's host: for a unix:// docker.url, its path,
    or, in a container (`own`, inspected), the host source of the mount that holds that path.
    Empty for a TCP engine (a socket proxy): no container is proven by its mounts then."""
    if not url.startswith("unix://"):
        return set()
    path = canonical(url.removeprefix("unix://"))
    if own is None:
        return {path}
    found = set()
    for source, destination in own.mounts:
        dest = canonical(destination)
        if path == dest:
            found.add(canonical(source))
        elif path.startswith(top := dest.rstrip("/") + "/"):
            found.add(canonical(source.rstrip("/") + "/" + path[len(top) :]))
    return found


def mounts_engine(mounts: Iterable[tuple[str, str]], sockets: set[str]) -> bool:
    """Whether a container's mounts include the engine's socket (or a directory above it).
    Docker gives every source as an absolute host path: any other proves nothing."""
    for source, _destination in mounts:
        if not source.startswith("/"):
            continue
        top = canonical(source).rstrip("/") + "/"
        if any(s == canonical(source) or s.startswith(top) for s in sockets):
            return True
    return False
