"""What the engine's JSON means: list and inspect items as snapshots, events, and which engine
answers (/version). Docker's shapes, and where Podman's Docker-compatible API says the same thing
another way (its event names, health events and version components).
"""

from __future__ import annotations

from collections.abc import Collection
from datetime import UTC, datetime, timedelta
from typing import Any

from guardian.core.detection.probes import NO_ADDRESS
from guardian.core.detection.usage import Usage
from guardian.core.model import ContainerSnapshot
from guardian.core.relations.namespaces import raw_modes
from guardian.ports import EngineEvent, EngineIdentity

# Bounds on what a container says through the engine (Docker keeps 4096 bytes of health output);
# the checks and the crash-loop judge clean and cut it further.
MAX_HEALTH_OUTPUT = 4096
# Bounds on a container's command line and mounts (evidence of a Guardian container only).
MAX_ARGS, MAX_MOUNTS, MAX_PATH = 64, 64, 4096
# The events Guardian subscribes to. Podman 4.3 filters `die` as `died` and names a removal
# `remove`; Docker ignores names it does not know, so one filter serves both engines.
EVENT_ACTIONS = ("health_status", "die", "oom", "stop", "start", "restart", "kill", "destroy")
EVENT_FILTER = (*EVENT_ACTIONS, "died", "remove")
# On Docker, the events that only the container cache needs (each makes an entry doubtful, core.
# cache_entry) and a sweep between two whole lists (a new container is listed: service/listing).
# Podman has neither: its filter stays as it was.
CACHE_EVENTS = ("pause", "unpause", "rename", "update", "create")
# Podman's names for the actions Guardian knows by Docker's.
_ACTION_ALIASES = {"died": "die", "remove": "destroy"}
PODMAN_COMPONENT = "Podman Engine"


def parse_time(value: str | None) -> datetime | None:
    """Docker's RFC 3339 nanosecond timestamps; the zero time means "never"."""
    if not value or value.startswith("0001-01-01"):
        return None
    head, _, rest = value.partition(".")
    if rest:
        digits = "".join(ch for ch in rest if ch.isdigit())
        zone = rest[len(digits) :]
        value = f"{head}.{digits[:6].ljust(6, '0')}{zone}"
    try:
        parsed = datetime.fromisoformat(value.replace("Z", "+00:00"))
    except ValueError:
        return None
    return parsed if parsed.tzinfo else parsed.replace(tzinfo=UTC)


def health_from_status(status: str) -> str | None:
    """The health shown in the list call's Status text, e.g. 'Up 5 minutes (unhealthy)'."""
    if "(unhealthy)" in status:
        return "unhealthy"
    if "(healthy)" in status:
        return "healthy"
    if "(health: starting)" in status:
        return "starting"
    return None


def addresses(network_settings: dict[str, Any] | None, network_mode: str) -> tuple[str, ...]:
    """Every address the container has, first network first; a host-network container shares
    the host's loopback (NO_ADDRESS)."""
    if network_mode == "host":
        return (NO_ADDRESS,)
    networks = (network_settings or {}).get("Networks") or {}
    out: dict[str, None] = {}
    for name in sorted(networks):
        for key in ("IPAddress", "GlobalIPv6Address"):
            ip = (networks[name] or {}).get(key) or ""
            if ip:
                out[str(ip)] = None
    ip = (network_settings or {}).get("IPAddress") or ""
    if ip:
        out[str(ip)] = None
    return tuple(out)


def summary_snapshot(item: dict[str, Any]) -> ContainerSnapshot:
    names = item.get("Names") or [""]
    host_config = item.get("HostConfig") or {}
    mode = host_config.get("NetworkMode", "")
    return ContainerSnapshot(
        id=item["Id"],
        name=names[0].lstrip("/"),
        labels=dict(item.get("Labels") or {}),
        state=item.get("State", ""),
        health=health_from_status(item.get("Status", "")),
        addresses=addresses(item.get("NetworkSettings"), mode),
        # The list shows HostConfig.NetworkMode only; PidMode and IpcMode need an inspect.
        namespaces=raw_modes({"NetworkMode": mode}),
    )


class ListedSnapshots:
    """The list call's snapshots, the same object for a container the list shows as before:
    an unchanged container costs a comparison, not a new snapshot, and the loop can tell it
    unchanged by identity (service/state/quiet.py). What a snapshot is made of is compared (the
    Status text only for its health: "Up 5 minutes" moves with the clock); the last complete
    list's are kept, no more, moved on by the lists of some containers by id.

    No lock: what is kept is a dict never changed once published, replaced whole by one
    assignment, and a list takes the reference once. Two lists at once (the sweep, a worker's
    list by id) may each publish theirs, the later one winning; what the other kept is then
    made anew on the next list: a snapshot of the same content, never a wrong one, since a
    kept snapshot is reused only for an item that shows exactly what it was made of."""

    def __init__(self) -> None:
        self._last: dict[str, tuple[tuple[Any, ...], ContainerSnapshot]] = {}

    def snapshots(
        self, items: list[dict[str, Any]], complete: bool, ids: Collection[str] = ()
    ) -> list[ContainerSnapshot]:
        """`items` as snapshots; `complete`: the list shows every container (kept for the next);
        `ids`: it shows those of these ids that exist (they replace theirs in what is kept)."""
        last = self._last
        seen: dict[str, tuple[tuple[Any, ...], ContainerSnapshot]] = {}
        out = []
        for item in items:
            key = (
                item.get("Names"),
                item.get("Labels"),
                item.get("State"),
                health_from_status(item.get("Status") or ""),
                item.get("HostConfig"),
                item.get("NetworkSettings"),
            )
            before = last.get(item["Id"])
            snap = before[1] if before is not None and before[0] == key else summary_snapshot(item)
            seen[snap.id] = (key, snap)
            out.append(snap)
        if complete:
            self._last = seen
        elif ids:
            kept = {k: v for k, v in self._last.items() if k not in ids}
            self._last = {**kept, **seen}
        return out


def inspect_snapshot(data: dict[str, Any]) -> ContainerSnapshot:
    state = data.get("State") or {}
    config = data.get("Config") or {}
    host_config = data.get("HostConfig") or {}
    health = state.get("Health") or {}
    log = health.get("Log") or []
    policy = host_config.get("RestartPolicy") or {}
    start_period_ns = (config.get("Healthcheck") or {}).get("StartPeriod") or 0
    since, by = unhealthy_since(health, config.get("Healthcheck") or {})
    return ContainerSnapshot(
        id=data["Id"],
        name=(data.get("Name") or "").lstrip("/"),
        labels=dict(config.get("Labels") or {}),
        state=state.get("Status", ""),
        health=health.get("Status") or None,
        inspected=True,
        exit_code=state.get("ExitCode"),
        oom_killed=bool(state.get("OOMKilled")),
        started_at=parse_time(state.get("StartedAt")),
        finished_at=parse_time(state.get("FinishedAt")),
        created=parse_time(data.get("Created")),
        restart_count=int(data.get("RestartCount") or 0),
        restart_policy=policy.get("Name") or "",
        restart_policy_max_retries=int(policy.get("MaximumRetryCount") or 0),
        health_start_period=timedelta(microseconds=start_period_ns / 1000),
        # The newest probe, always among the five Docker keeps.
        health_output=str(log[-1].get("Output") or "")[:MAX_HEALTH_OUTPUT] if log else "",
        health_log_at=parse_time(log[-1].get("End")) if log else None,
        addresses=addresses(data.get("NetworkSettings"), host_config.get("NetworkMode", "")),
        memory_limit=int(host_config.get("Memory") or 0),
        unhealthy_since=since,
        unhealthy_by=by,
        namespaces=raw_modes(host_config),
        pid=int(state.get("Pid") or 0),
        command=command_line(data),
        mounts=mounts(data.get("Mounts")),
    )


def command_line(data: dict[str, Any]) -> tuple[str, ...]:
    """What the container's first process was started with: Path, then Args (bounded)."""
    args = data.get("Args")
    words = [data.get("Path"), *(args[:MAX_ARGS] if isinstance(args, list) else [])]
    return tuple(str(w)[:MAX_PATH] for w in words if isinstance(w, str) and w)


def mounts(raw: Any) -> tuple[tuple[str, str], ...]:
    """(host source, destination) of each mount that has a source (bounded)."""
    if not isinstance(raw, list):
        return ()
    out = []
    for m in raw[:MAX_MOUNTS]:
        if isinstance(m, dict) and m.get("Source") and m.get("Destination"):
            out.append((str(m["Source"])[:MAX_PATH], str(m["Destination"])[:MAX_PATH]))
    return tuple(out)


def unhealthy_since(
    health: dict[str, Any], check: dict[str, Any]
) -> tuple[datetime | None, datetime | None]:
    """When Docker turned the container unhealthy, as (exactly, at the latest).

    Exactly: the probe whose failure made the failing streak reach `retries`. Docker keeps only
    the last five probes (maxLogEntries): with probes every second that one is gone five seconds
    later. Then the oldest kept probe, a failure of the same streak, is all the log still says:
    unhealthy at least since then, the turn came earlier. The caller remembers what it saw first
    with the incident (Incident.problem_since) instead of reading this again: taken as the start,
    it would keep every patience longer than five probes waiting for ever."""
    log = health.get("Log") or []
    streak = int(health.get("FailingStreak") or 0)
    if health.get("Status") != "unhealthy" or not log or streak <= 0:
        return None, None
    retries = int(check.get("Retries") or 0) or 3  # Docker's default when unset
    index = len(log) - streak + min(retries, streak) - 1
    if index < 0:
        return None, parse_time(log[0].get("End"))
    return parse_time(log[min(index, len(log) - 1)].get("End")), None


def parse_event(raw: dict[str, Any]) -> EngineEvent | None:
    """One event of the stream; None for the ones Guardian has no use for (exec_*).

    A health event carries its status in the action on Docker ("health_status: unhealthy") and
    in a HealthStatus field on Podman, where it is the status before the check that sent it: the
    healer treats every health event as "inspect now", never as the verdict."""
    action = str(raw.get("Action") or raw.get("status") or "")
    actor = raw.get("Actor") or {}
    attributes = {k: str(v) for k, v in (actor.get("Attributes") or {}).items()}
    if action.startswith("health_status"):
        status = action.partition(":")[2].strip() or str(raw.get("HealthStatus") or "")
        attributes["health_status"] = status
        action = "health_status"
    if action.startswith("exec_"):
        return None
    if "containerExitCode" in attributes:  # Podman's name for Docker's exitCode
        attributes.setdefault("exitCode", attributes["containerExitCode"])
    action = _ACTION_ALIASES.get(action, action)
    ns = raw.get("timeNano") or int(raw.get("time", 0)) * 1_000_000_000
    return EngineEvent(
        action=action,
        container_id=str(actor.get("ID") or raw.get("id") or ""),
        container_name=attributes.get("name", ""),
        at=datetime.fromtimestamp(ns / 1e9, UTC),
        attributes=attributes,
    )


def identify(version: dict[str, Any]) -> EngineIdentity:
    """Which engine answered /version: Podman lists a component named "Podman Engine"."""
    components = {str(c.get("Name")): c for c in version.get("Components") or [] if c}
    podman = components.get(PODMAN_COMPONENT)
    return EngineIdentity(
        kind="podman" if podman is not None else "docker",
        version=str((podman or version).get("Version") or "unknown")[:40],
        api_version=str(version.get("ApiVersion") or "unknown")[:20],
    )


def stats_usage(raw: Any) -> Usage | None:
    """A stats reading as `docker stats` counts memory: the usage less the inactive file cache
    (`inactive_file` on cgroup v2, `total_inactive_file` on v1); CPU as the cumulative time in
    microseconds. None when the engine reports no memory figure (the container is not running)."""
    if not isinstance(raw, dict):
        return None
    memory = raw.get("memory_stats")
    cpu = raw.get("cpu_stats")
    usage = memory.get("usage") if isinstance(memory, dict) else None
    if not isinstance(usage, int) or isinstance(usage, bool) or usage < 0:
        return None
    stats = memory.get("stats") if isinstance(memory, dict) else None
    cache = 0
    if isinstance(stats, dict):
        for key in ("inactive_file", "total_inactive_file"):
            value = stats.get(key)
            if isinstance(value, int) and not isinstance(value, bool) and 0 <= value <= usage:
                cache = value
                break
    counted = cpu.get("cpu_usage") if isinstance(cpu, dict) else None
    total = counted.get("total_usage") if isinstance(counted, dict) else None
    cpu_usec = total // 1000 if isinstance(total, int) and total >= 0 else None  # from ns
    return Usage(usage - cache, cpu_usec, "stats")
