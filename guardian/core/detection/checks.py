"""The health checks: turn a container snapshot into a HealthCheckResult.

Pure functions over snapshots. What is never judged: paused containers, containers Docker is
restarting itself, containers a person stopped, and anything inside its grace period.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from datetime import datetime, timedelta

from guardian.core.model import ContainerSnapshot, HealthCheckResult, ProblemType
from guardian.core.redaction import untrusted

# Exit codes of a container ended by a signal from outside (SIGINT, SIGKILL, SIGTERM): what
# `docker stop` and `docker kill` leave behind. Without an OOM kill, that is a person's doing.
SIGNAL_EXIT_CODES = frozenset({130, 137, 143})
DOCKER_OWNED_POLICIES = frozenset({"always", "unless-stopped"})
MAX_OUTPUT = 300


@dataclass(frozen=True)
class CheckSettings:
    ignore_exit_codes: frozenset[int] = frozenset({0})
    start_grace: timedelta = timedelta(0)


def needs_inspect(summary: ContainerSnapshot) -> bool:
    """Whether a container from the list call is a candidate worth one inspect."""
    # "restarting": the inspect shows RestartCount, which reveals crash loops.
    return summary.health == "unhealthy" or summary.state in ("exited", "dead", "restarting")


def reported_at(snap: ContainerSnapshot) -> datetime | None:
    """When Docker reported the problem of an inspected candidate: the container's exit, or the
    health probe that turned it unhealthy. The start of guardian_detection_to_restart_seconds.
    The exit time the engine keeps for as long as the container; the probe only while it is
    among the five Docker keeps, then the oldest kept one (later than the turn: the histogram
    shows less than the truth, never more) or the last one."""
    if snap.state in ("exited", "dead"):
        return snap.finished_at
    return snap.unhealthy_since or snap.unhealthy_by or snap.health_log_at


def heard(
    result: HealthCheckResult, at: datetime | None, snap: ContainerSnapshot
) -> HealthCheckResult:
    """`result` with the time of the engine event that reported its problem (an unhealthy
    health status): earlier evidence of the start when the engine's own record of it
    is gone (the turning probe rotated out of the five kept). An exact start stays as it is;
    an event from before the container's current start tells of another life."""
    if at is None or result.problem is None or result.since_exact:
        return result
    if snap.state == "running" and snap.started_at is not None and at < snap.started_at:
        return result
    if result.since is not None and result.since <= at:
        return result
    return replace(result, since=at)


def probe_before(snap: ContainerSnapshot, at: datetime) -> str:
    """What the container's last health probe said, bounded as a detail, when that probe ended
    before `at` (a restart's request, in Guardian's frame) and before the container's current
    start (the engine's own stamps, so no skew between the clocks blurs it): the run a restart
    ended, never the run it began. Docker keeps the health log across a restart. "" when no
    probe qualifies (or it said nothing)."""
    ended = snap.health_log_at
    if not snap.health_output or ended is None or ended >= at:
        return ""
    if snap.started_at is not None and ended >= snap.started_at:
        return ""  # probed since the current start: the new run's, or no restart happened
    return untrusted(snap.health_output, MAX_OUTPUT)


def mebibytes(n: int) -> str:
    return f"{n / 1024 / 1024:.1f} MiB"


def memory_detail(snap: ContainerSnapshot) -> str:
    """Memory limit and usage of an OOM-killed container. The kernel kills inside a cgroup only
    when usage reaches its limit; without a limit the whole host ran out of memory."""
    if snap.memory_limit > 0:
        limit = mebibytes(snap.memory_limit)
        return f"memory limit {limit}, usage reached the limit ({limit})"
    return "no memory limit: the host ran out of memory"


def skip(snap: ContainerSnapshot, now: datetime, why: str, source: str) -> HealthCheckResult:
    """Not judged, and why (`guardian check` shows it): neither a problem nor a recovery."""
    return HealthCheckResult(snap.id, snap.name, now, skipped=why, source=source)


def _problem(
    snap: ContainerSnapshot,
    now: datetime,
    kind: ProblemType,
    detail: str,
    source: str,
    since: datetime | None = None,
    exact: bool = False,
) -> HealthCheckResult:
    # The detail may quote the container's own health output: hostile text (docs/design.md
    # rule 9).
    return HealthCheckResult(
        snap.id,
        snap.name,
        now,
        kind,
        untrusted(detail, MAX_OUTPUT),
        source=source,
        since=since,
        since_exact=exact,
    )


def evaluate(
    snap: ContainerSnapshot,
    now: datetime,
    settings: CheckSettings,
    stopped_by_person: bool = False,
    source: str = "sweep",
) -> HealthCheckResult:
    """Judge one container. Candidates must be inspected snapshots (see needs_inspect)."""

    state = snap.state
    if state == "paused":
        return skip(snap, now, "paused", source)
    if state == "restarting":
        return skip(snap, now, "restarting_by_docker", source)
    if state in ("exited", "dead"):
        return _judge_stopped(snap, now, settings, stopped_by_person, source)
    if state != "running":
        return skip(snap, now, state or "unknown_state", source)
    if snap.health == "starting":
        return skip(snap, now, "starting", source)
    if snap.health == "unhealthy":
        grace = max(settings.start_grace, snap.health_start_period)
        if snap.started_at is not None and grace and now - snap.started_at < grace:
            return skip(snap, now, "in_grace", source)
        # Docker keeps only its last five probes: once the turning one rotates out, `since` is a
        # lower bound. The incident keeps the first it saw, so patience never restarts with it.
        exact = snap.unhealthy_since is not None
        since = snap.unhealthy_since or snap.unhealthy_by or snap.health_log_at
        detail = snap.health_output or "health check failing"
        return _problem(snap, now, ProblemType.UNHEALTHY, detail, source, since, exact)
    return HealthCheckResult(snap.id, snap.name, now, source=source)


def _judge_stopped(
    snap: ContainerSnapshot,
    now: datetime,
    settings: CheckSettings,
    stopped_by_person: bool,
    source: str,
) -> HealthCheckResult:
    code = snap.exit_code
    if snap.oom_killed:
        detail = f"killed by the kernel OOM killer (exit {code}); {memory_detail(snap)}"
        # FinishedAt: the engine keeps it as long as the container, until its next start.
        exact = snap.finished_at is not None
        return _problem(snap, now, ProblemType.OOM_KILLED, detail, source, snap.finished_at, exact)
    if stopped_by_person:
        return skip(snap, now, "stopped_by_person", source)
    docker_retries = snap.restart_policy == "on-failure" and (
        snap.restart_policy_max_retries == 0 or snap.restart_count < snap.restart_policy_max_retries
    )
    if snap.restart_policy in DOCKER_OWNED_POLICIES or docker_retries:
        return skip(snap, now, "restart_policy_owned_by_docker", source)
    if code is None or code in settings.ignore_exit_codes:
        return skip(snap, now, "exit_code_ignored", source)
    if code in SIGNAL_EXIT_CODES:
        return skip(snap, now, "stopped_by_signal", source)
    detail, exact = f"{snap.state} with exit code {code}", snap.finished_at is not None
    return _problem(snap, now, ProblemType.EXITED, detail, source, snap.finished_at, exact)
