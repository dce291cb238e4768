"""decide(): the single point that says whether a container may be restarted now.

Pure: the clock and every piece of history come in as arguments, so the function can be tested
exhaustively. Every new guard (silences, dependencies, storms) belongs here and nowhere else.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta

from guardian.core.detection.restart_policy import RestartPolicy
from guardian.core.model import Approval, Decision, ProblemType, Reason, Silence, Verdict
from guardian.core.stamps import ahead, no_later_than
from guardian.core.storm import StormHold

RATE_WINDOW = timedelta(minutes=1)

# Problems Guardian reports but never restarts for, and why.
REPORT_ONLY: dict[ProblemType, str] = {
    ProblemType.CRASH_LOOP: "Docker's restart policy is restarting it; Guardian only reports it",
    ProblemType.ORPHANED_NAMESPACE: "the namespace it joined belongs to a container that no"
    " longer exists: a restart cannot help; recreate it",
}


@dataclass(frozen=True)
class Target:
    """The container a restart is asked for."""

    name: str
    opted_in: bool = True
    is_self: bool = False
    # Descriptions of this container's dependencies that are unhealthy now, e.g. "db (incident 4)".
    unhealthy_dependencies: tuple[str, ...] = ()
    # Who else owns it, e.g. "Docker Swarm (service web)" (core.relations.orchestrators); "":
    # nobody.
    orchestrator: str = ""
    # Since when its problem lasts, for restart.act_after (Incident.began, which never moves
    # later); None: unknown, no patience applies.
    problem_since: datetime | None = None
    problem: ProblemType | None = None  # what its checks found (None: asked without one)


@dataclass(frozen=True)
class AttemptHistory:
    """This container's restart requests, as read from the store.

    `attempts` are request times (any age; decide() applies the window). `reset_at` is the last
    time the counter was reset after `reset_after` of continuous health. `in_flight` is True
    while Guardian's restart call for this container runs, `verifying` while its last restart
    awaits the verification's verdict.
    """

    attempts: tuple[datetime, ...] = ()
    reset_at: datetime | None = None
    in_flight: bool = False
    verifying: bool = False
    engine_denied: bool = False  # the engine refused this problem's last restart (403)


@dataclass(frozen=True)
class HostLoad:
    """Host-wide restart activity: request times of recent restarts, how many running restarts
    hold a restart.max_concurrent slot, and when the next one gives its slot up by time (a
    restart past the operator's stop timeout only waits out a container's own, longer one)."""

    recent_restarts: tuple[datetime, ...] = ()
    in_flight: int = 0
    slot_free_at: datetime | None = None
    storm: StormHold | None = None  # a host-level storm incident open and not acknowledged


def counted_attempts(
    history: AttemptHistory, policy: RestartPolicy, now: datetime
) -> list[datetime]:
    """The attempts that count against max_attempts: inside the window and after the last reset.

    An attempt stamped ahead of `now` counts as made now; a reset stamped ahead of `now` is not
    trusted to order the attempts (the clock stepped back in between), so every attempt in the
    window counts. Either way a step back never hands the budget back.
    """
    start = now - policy.window
    counted = [no_later_than(a, now) for a in history.attempts]
    reset = history.reset_at
    if reset is not None and not ahead(reset, now):
        return sorted(a for a in counted if a > max(start, reset))
    return sorted(a for a in counted if a > start)


def decide(
    target: Target,
    history: AttemptHistory,
    host: HostLoad,
    policy: RestartPolicy,
    now: datetime,
    silence: Silence | None = None,
    approval: Approval | None = None,
) -> Decision:
    """Say whether `target` may be restarted at `now`, and if not, why and until when.

    Guards in order: never Guardian itself; never a container that is not opted in; never a
    container an orchestrator owns unless the operator opted in to acting on those; never for a
    problem that is only reported (a crash loop: Docker's restart policy is at it; a follower
    whose leader is gone: no restart can help); never one whose action is `notify`; not while a
    maintenance silence is active (wait until it ends); never again after the engine refused
    this problem's restart (403), nor after a person denied it (action `ask`); one restart at a
    time per container (its call running, then its verification until the verdict: a restart
    is judged by its verification, not by a second restart); a host storm holds every restart
    until its hold ends, then lets one canary through (the other guards still apply to it; the
    last canary that did not heal waits for another) and holds the rest until the canary's
    verdict, but holds a bystander (a container that did not make the storm) one cooldown at
    most; an unhealthy dependency holds its dependents; max_attempts within the window (give
    up); patience (act only once the problem has lasted `act_after`); cooldown since the last
    attempt (exponential with a cap); the host budget (per minute, then concurrent); dry run.
    Then the container's action: `restart`; `stop` (the verdict STOP, within the same guards);
    `ask`, where only a usable approval of a person (`approval`, for the open incident) lets the
    restart through, once.
    """
    if target.is_self:
        return Decision(Verdict.DENY, Reason.SELF)
    if not target.opted_in:
        return Decision(Verdict.DENY, Reason.NOT_OPTED_IN)
    if target.orchestrator and not policy.act_on_orchestrated:
        # Its orchestrator replaces it already: a restart of ours would fight that replacement.
        return Decision(
            Verdict.DENY,
            Reason.ORCHESTRATOR_MANAGED,
            detail=f"{target.orchestrator} owns it; Guardian only reports it",
        )
    if target.problem in REPORT_ONLY:
        return Decision(Verdict.DENY, Reason.REPORT_ONLY, detail=REPORT_ONLY[target.problem])
    if policy.action == "notify":
        return Decision(
            Verdict.DENY,
            Reason.NOTIFY_ONLY,
            detail="guardian.action=notify: people are told, a person acts",
        )
    if silence is not None and silence.active(now):
        # A person said "hands off" until then; this also keeps give-up from escalating.
        return Decision(Verdict.WAIT, Reason.SILENCED, silence.until)
    if history.engine_denied:
        # A 403 does not change by asking again: never retried for the same problem.
        return Decision(Verdict.DENY, Reason.ENGINE_DENIED)
    if approval is not None and not approval.approved:
        return Decision(Verdict.DENY, Reason.APPROVAL_DENIED, detail=f"denied by {approval.by}")
    if history.in_flight:
        return Decision(Verdict.WAIT, Reason.IN_FLIGHT)
    if history.verifying:
        return Decision(
            Verdict.WAIT, Reason.VERIFYING, detail="its last restart awaits the verification"
        )
    canary = False
    hold = host.storm
    if hold is not None and hold.bystander_since is not None:
        # Whoever can start containers can make a storm: a container that did not make it is
        # held one cooldown at most (a stamp ahead of the clock counts as now), never a canary.
        limit = no_later_than(hold.bystander_since, now) + policy.cooldown
        if now < limit:
            return Decision(
                Verdict.WAIT,
                Reason.STORM,
                limit,
                detail="host-level storm it did not make: held one cooldown at most",
            )
    elif hold is not None:
        # One shared cause is likelier than many sick containers: restarts wait for the host,
        # then one container tries whether a restart heals now.
        if now < hold.until:
            return Decision(
                Verdict.WAIT,
                Reason.STORM,
                hold.until,
                detail="host-level storm: restarts held, then one canary restart",
            )
        if hold.canary is not None:
            return Decision(
                Verdict.WAIT,
                Reason.STORM,
                detail=f"host-level storm: waiting for the canary {hold.canary} to heal",
            )
        if hold.failed == target.name:
            return Decision(
                Verdict.WAIT,
                Reason.STORM,
                detail="host-level storm: its canary restart did not heal; another container "
                "is the next canary",
            )
        canary = True
    if target.unhealthy_dependencies:
        return Decision(
            Verdict.WAIT,
            Reason.DEPENDENCY_UNHEALTHY,
            detail="waiting for " + ", ".join(target.unhealthy_dependencies),
        )

    counted = counted_attempts(history, policy, now)
    n = len(counted)
    if n >= policy.max_attempts:
        # The window frees a slot when the oldest attempt that keeps us at the cap expires.
        retry_at = counted[n - policy.max_attempts] + policy.window
        return Decision(
            Verdict.GIVE_UP,
            Reason.MAX_ATTEMPTS,
            retry_at,
            attempt=n,
            max_attempts=policy.max_attempts,
        )

    if policy.act_after and target.problem_since is not None:
        # A stamp ahead of the clock counts as now: patience never shrinks with a step.
        since = min(target.problem_since, now)
        if now < since + policy.act_after:
            return Decision(
                Verdict.WAIT,
                Reason.ACT_AFTER,
                since + policy.act_after,
                attempt=n + 1,
                max_attempts=policy.max_attempts,
                detail=f"act_after: acts once the problem has lasted {policy.act_after}",
            )

    # Cooldown runs from the last attempt of any age, so a reset never allows a quick repeat;
    # one stamped ahead of the clock was made "now" at the latest.
    if history.attempts:
        ready_at = no_later_than(max(history.attempts), now) + policy.cooldown_after(max(n, 1))
        if now < ready_at:
            return Decision(
                Verdict.WAIT,
                Reason.COOLDOWN,
                ready_at,
                attempt=n + 1,
                max_attempts=policy.max_attempts,
            )

    recent = sorted(
        t for t in (no_later_than(r, now) for r in host.recent_restarts) if now - RATE_WINDOW < t
    )
    if len(recent) >= policy.max_per_minute:
        retry_at = recent[len(recent) - policy.max_per_minute] + RATE_WINDOW
        return Decision(
            Verdict.WAIT,
            Reason.RATE_LIMITED,
            retry_at,
            attempt=n + 1,
            max_attempts=policy.max_attempts,
        )
    if host.in_flight >= policy.max_concurrent:
        return Decision(
            Verdict.WAIT,
            Reason.CONCURRENCY,
            host.slot_free_at,
            attempt=n + 1,
            max_attempts=policy.max_attempts,
        )

    if policy.dry_run:
        return Decision(
            Verdict.DENY, Reason.DRY_RUN, attempt=n + 1, max_attempts=policy.max_attempts
        )
    if policy.action == "stop":
        return Decision(
            Verdict.STOP, Reason.ALLOWED, attempt=n + 1, max_attempts=policy.max_attempts
        )
    if policy.action == "ask":
        if approval is None or not approval.usable(now):
            return Decision(
                Verdict.WAIT,
                Reason.AWAITING_APPROVAL,
                attempt=n + 1,
                max_attempts=policy.max_attempts,
                detail="guardian.action=ask: a person approves each restart",
            )
        return Decision(
            Verdict.RESTART,
            Reason.STORM_CANARY if canary else Reason.APPROVED,
            attempt=n + 1,
            max_attempts=policy.max_attempts,
            detail=f"approved by {approval.by}"
            + (f": {approval.reason}" if approval.reason else ""),
            approval=approval,
        )
    return Decision(
        Verdict.RESTART,
        Reason.STORM_CANARY if canary else Reason.ALLOWED,
        attempt=n + 1,
        max_attempts=policy.max_attempts,
    )


def reset_due(
    healthy_since: datetime | None,
    last_reset: datetime | None,
    policy: RestartPolicy,
    now: datetime,
) -> bool:
    """True when a container has been healthy for `reset_after` without a reset since.

    Only continuous health counts: a reset on the first healthy check would let a flapping
    container restart for ever.
    """
    if healthy_since is None or now - healthy_since < policy.reset_after:
        return False
    return last_reset is None or last_reset < healthy_since
