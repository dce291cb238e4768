"""Shared namespaces: a container started with `--network container:<leader>` (Compose:
`network_mode: service:vpn`), `--pid container:` or `--ipc container:` keeps the namespace the
leader had then. Docker stores the leader's id there. What the engine says is hostile input: a
reference is bounded and checked here, and the next step for an orphan names only what passed.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from guardian.core.relations.dependencies import COMPOSE_PROJECT, COMPOSE_SERVICE

CONTAINER_PREFIX = "container:"
# HostConfig keys, in the order a follower's namespaces are named.
KINDS = {"NetworkMode": "network", "PidMode": "pid", "IpcMode": "ipc"}
MAX_REF = 255  # a 64-hex id, or a name (Docker allows no longer ones)
# A container id or name, as Docker allows them (`[a-zA-Z0-9][a-zA-Z0-9_.-]+`).
_REF = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]*")
# Compose project and service names, as Compose allows them: nothing a shell would read.
_COMPOSE_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,62}")
NEXT_STEP = "next step: "  # where an orphan's detail names what a person should run


@dataclass(frozen=True)
class Shared:
    """One namespace a container joined: its kind (network, pid, ipc) and the leader's id or
    name as the engine stored it."""

    kind: str
    leader: str


def raw_modes(host_config: Mapping[str, object]) -> tuple[tuple[str, str], ...]:
    """The `container:` modes of one HostConfig, cut to a bound (for the adapters): a value just
    over MAX_REF stays too long, so `shared` still refuses it."""
    out = []
    for key, kind in KINDS.items():
        value = host_config.get(key)
        if isinstance(value, str) and value.startswith(CONTAINER_PREFIX):
            out.append((kind, value[len(CONTAINER_PREFIX) : len(CONTAINER_PREFIX) + MAX_REF + 1]))
    return tuple(out)


def shared(container_id: str, modes: Iterable[tuple[str, str]]) -> tuple[tuple[Shared, ...], str]:
    """The namespaces a container joined, and why any of them was refused ("" when none was):
    a reference too long, with characters no id or name has, or naming the container itself."""
    out: list[Shared] = []
    refused: list[str] = []
    for kind, ref in modes:
        if kind not in KINDS.values():
            continue
        if len(ref) > MAX_REF:
            refused.append(f"{kind}: longer than {MAX_REF} characters")
        elif not _REF.fullmatch(ref):
            refused.append(f"{kind}: not a container id or name")
        elif ref == container_id or (len(ref) >= 12 and container_id.startswith(ref)):
            refused.append(f"{kind}: names the container itself")
        else:
            out.append(Shared(kind, ref))
    return tuple(out), "; ".join(refused)


def kinds(joined: Iterable[Shared]) -> str:
    """`network,pid`: the namespaces named, each once, in KINDS order."""
    have = {s.kind for s in joined}
    return ",".join(k for k in KINDS.values() if k in have)


def recreate_step(labels: Mapping[str, str]) -> str:
    """What a person runs to recreate an orphaned container: Compose's command when its labels
    say which service (and the names are ones Compose allows), else plain words. A restart
    cannot help: the engine would join the namespace of a container that no longer exists."""
    project = labels.get(COMPOSE_PROJECT, "")
    service = labels.get(COMPOSE_SERVICE, "")
    if _COMPOSE_NAME.fullmatch(service):
        # --force-recreate: the follower's own configuration did not change, so a plain `up`
        # may keep the orphan as it is.
        where = f" in the Compose project {project}" if _COMPOSE_NAME.fullmatch(project) else ""
        return f"docker compose up -d --force-recreate {service}{where}"
    return "recreate it (docker rm, then create it again joining the new leader)"


def orphan_detail(gone: Iterable[Shared], labels: Mapping[str, str]) -> str:
    """An orphan's incident detail: which namespaces it lost, and the command that fixes it."""
    leaders = sorted({s.leader[:12] for s in gone})
    return (
        f"its {kinds(gone)} namespace belongs to container {', '.join(leaders)}, which no "
        "longer exists (recreated?): a restart cannot reconnect it and Guardian never "
        f"recreates a container; {NEXT_STEP}{recreate_step(labels)}"
    )


def next_step_of(detail: str) -> str:
    """The step an orphan's detail names ("" for any other detail)."""
    return detail.rpartition(NEXT_STEP)[2] if NEXT_STEP in detail else ""
