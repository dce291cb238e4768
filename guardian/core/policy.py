"""decide(): the single point that says whether a container may be restarted now.

Pure: the clock and every piece of history come in as arguments, so the function can be tested
exhaustively. decide() is a table: `RULES`, named rules asked in order, each a small pure
function that refuses (a Decision with its reason) or lets the request through (None); the
container's action gives the verdict of a request that every rule let through. Every new guard
(silences, dependencies, storms) is a row of `RULES`, at its place in the order, and lives
nowhere else; docs/restarts.md lists the same rules in the same order.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace
from datetime import datetime, timedelta
from typing import NamedTuple

from guardian.core.detection.restart_policy import RestartPolicy
from guardian.core.model import (
    Approval,
    Decision,
    ProblemType,
    Reason,
    RollbackRequest,
    Silence,
    Verdict,
)
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
    # The ladder's rungs taken (restart.escalate), with their request times, any age.
    rungs: tuple[tuple[str, datetime], ...] = ()


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


def taken_rungs(history: AttemptHistory, policy: RestartPolicy, now: datetime) -> tuple[str, ...]:
    """The ladder's rungs taken inside the window and after the last reset, as the attempts
    are counted (counted_attempts): a reset gives the ladder back with the restarts."""
    start = now - policy.window
    reset = history.reset_at
    if reset is not None and not ahead(reset, now):
        start = max(start, reset)
    return tuple(rung for rung, at in history.rungs if no_later_than(at, now) > start)


@dataclass(frozen=True)
class Case:
    """One restart request as the rules read it: decide()'s inputs, and what is derived from
    them once, before any rule runs."""

    target: Target
    history: AttemptHistory
    host: HostLoad
    policy: RestartPolicy
    now: datetime
    silence: Silence | None
    approval: Approval | None
    counted: tuple[datetime, ...]  # counted_attempts(): the attempts against max_attempts
    # The storm's hold is over, no canary runs and this container is not the last one that
    # failed: if every rule lets it through, this restart is the storm's canary.
    canary: bool
    # The ladder's next rung (restart.escalate) should the restarts be spent; None: give up.
    rung: str | None = None
    # A person's rollback of this container (guardian rollback), asked in place of a restart.
    request: RollbackRequest | None = None

    @property
    def used(self) -> int:
        """How many attempts count against max_attempts now."""
        return len(self.counted)

    def numbered(
        self,
        verdict: Verdict,
        reason: Reason,
        retry_at: datetime | None = None,
        *,
        detail: str = "",
        approval: Approval | None = None,
    ) -> Decision:
        """A decision about the next attempt: it would be attempt `used + 1` of max_attempts."""
        return Decision(
            verdict,
            reason,
            retry_at,
            attempt=self.used + 1,
            max_attempts=self.policy.max_attempts,
            detail=detail,
            approval=approval,
        )


def _is_canary(target: Target, host: HostLoad, now: datetime) -> bool:
    """Whether a restart of `target` now would be the storm's canary (see `_storm_hold`)."""
    hold = host.storm
    return (
        hold is not None
        and hold.bystander_since is None
        and not now < hold.until
        and hold.canary is None
        and hold.failed != target.name
    )


def _self(case: Case) -> Decision | None:
    return Decision(Verdict.DENY, Reason.SELF) if case.target.is_self else None


def _not_opted_in(case: Case) -> Decision | None:
    return None if case.target.opted_in else Decision(Verdict.DENY, Reason.NOT_OPTED_IN)


def _orchestrated(case: Case) -> Decision | None:
    # Its orchestrator replaces it already: a restart of ours would fight that replacement.
    if not case.target.orchestrator or case.policy.act_on_orchestrated:
        return None
    return Decision(
        Verdict.DENY,
        Reason.ORCHESTRATOR_MANAGED,
        detail=f"{case.target.orchestrator} owns it; Guardian only reports it",
    )


def _report_only(case: Case) -> Decision | None:
    problem = case.target.problem
    if problem not in REPORT_ONLY:
        return None
    return Decision(Verdict.DENY, Reason.REPORT_ONLY, detail=REPORT_ONLY[problem])


def _notify_only(case: Case) -> Decision | None:
    if case.policy.action != "notify":
        return None
    return Decision(
        Verdict.DENY,
        Reason.NOTIFY_ONLY,
        detail="guardian.action=notify: people are told, a person acts",
    )


def _silenced(case: Case) -> Decision | None:
    # A person said "hands off" until then; this also keeps give-up from escalating.
    silence = case.silence
    if silence is None or not silence.active(case.now):
        return None
    return Decision(Verdict.WAIT, Reason.SILENCED, silence.until)


def _engine_denied(case: Case) -> Decision | None:
    # A 403 does not change by asking again: never retried for the same problem.
    return Decision(Verdict.DENY, Reason.ENGINE_DENIED) if case.history.engine_denied else None


def _approval_denied(case: Case) -> Decision | None:
    approval = case.approval
    if approval is None or approval.approved:
        return None
    return Decision(Verdict.DENY, Reason.APPROVAL_DENIED, detail=f"denied by {approval.by}")


def _in_flight(case: Case) -> Decision | None:
    return Decision(Verdict.WAIT, Reason.IN_FLIGHT) if case.history.in_flight else None


def _verifying(case: Case) -> Decision | None:
    # A restart is judged by its verification, not by a second restart.
    if not case.history.verifying:
        return None
    return Decision(
        Verdict.WAIT, Reason.VERIFYING, detail="its last restart awaits the verification"
    )


def _storm_bystander(case: Case) -> Decision | None:
    # Whoever can start containers can make a storm: a container that did not make it is held
    # one cooldown at most (a stamp ahead of the clock counts as now), never a canary.
    hold, now = case.host.storm, case.now
    if hold is None or hold.bystander_since is None:
        return None
    limit = no_later_than(hold.bystander_since, now) + case.policy.cooldown
    if not now < limit:
        return None
    return Decision(
        Verdict.WAIT,
        Reason.STORM,
        limit,
        detail="host-level storm it did not make: held one cooldown at most",
    )


def _storm_hold(case: Case) -> Decision | None:
    # One shared cause is likelier than many sick containers: restarts wait for the host, then
    # one container (the canary, see Case.canary) tries whether a restart heals now.
    hold = case.host.storm
    if hold is None or hold.bystander_since is not None:
        return None
    if case.now < hold.until:
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
    if hold.failed == case.target.name:
        return Decision(
            Verdict.WAIT,
            Reason.STORM,
            detail="host-level storm: its canary restart did not heal; another container "
            "is the next canary",
        )
    return None


def _dependencies(case: Case) -> Decision | None:
    unhealthy = case.target.unhealthy_dependencies
    if not unhealthy:
        return None
    return Decision(
        Verdict.WAIT, Reason.DEPENDENCY_UNHEALTHY, detail="waiting for " + ", ".join(unhealthy)
    )


def _max_attempts(case: Case) -> Decision | None:
    n, cap = case.used, case.policy.max_attempts
    if n < cap or case.rung is not None:
        return None  # spent restarts with a rung left: the rung is the next decision
    # The window frees a slot when the oldest attempt that keeps us at the cap expires.
    retry_at = case.counted[n - cap] + case.policy.window
    return Decision(Verdict.GIVE_UP, Reason.MAX_ATTEMPTS, retry_at, attempt=n, max_attempts=cap)


def _act_after(case: Case) -> Decision | None:
    policy, began, now = case.policy, case.target.problem_since, case.now
    if not policy.act_after or began is None:
        return None
    # A stamp ahead of the clock counts as now: patience never shrinks with a step.
    since = min(began, now)
    if not now < since + policy.act_after:
        return None
    return case.numbered(
        Verdict.WAIT,
        Reason.ACT_AFTER,
        since + policy.act_after,
        detail=f"act_after: acts once the problem has lasted {policy.act_after}",
    )


def _cooldown(case: Case) -> Decision | None:
    # Cooldown runs from the last attempt of any age, so a reset never allows a quick repeat;
    # one stamped ahead of the clock was made "now" at the latest.
    # A rung of the ladder is an attempt too: the next waits its cooldown as well.
    attempts = case.history.attempts + tuple(at for _, at in case.history.rungs)
    now = case.now
    if not attempts:
        return None
    ready_at = no_later_than(max(attempts), now) + case.policy.cooldown_after(max(case.used, 1))
    return case.numbered(Verdict.WAIT, Reason.COOLDOWN, ready_at) if now < ready_at else None


def _rate_limit(case: Case) -> Decision | None:
    now, cap = case.now, case.policy.max_per_minute
    recent = sorted(
        t
        for t in (no_later_than(r, now) for r in case.host.recent_restarts)
        if now - RATE_WINDOW < t
    )
    if len(recent) < cap:
        return None
    # A slot frees when the oldest restart that keeps the host at the cap leaves the minute.
    return case.numbered(Verdict.WAIT, Reason.RATE_LIMITED, recent[len(recent) - cap] + RATE_WINDOW)


def _concurrency(case: Case) -> Decision | None:
    host = case.host
    if host.in_flight < case.policy.max_concurrent:
        return None
    return case.numbered(Verdict.WAIT, Reason.CONCURRENCY, host.slot_free_at)


def _dry_run(case: Case) -> Decision | None:
    return case.numbered(Verdict.DENY, Reason.DRY_RUN) if case.policy.dry_run else None


class Rule(NamedTuple):
    name: str  # as in docs/restarts.md's table of rules
    check: Callable[[Case], Decision | None]  # the refusal, or None to let the request through
    refuses: str  # one line: what it refuses


# The order is the policy: decide() asks each rule in turn and the first refusal is the
# decision. docs/restarts.md ("The rules of decide(), in order") lists the same names in the
# same order (tests/unit/test_policy_rules.py holds them equal).
RULES: tuple[Rule, ...] = (
    Rule("self", _self, "Guardian itself"),
    Rule("not_opted_in", _not_opted_in, "a container that is not opted in"),
    Rule("orchestrated", _orchestrated, "an orchestrator's container, unless the operator acts"),
    Rule("report_only", _report_only, "a problem only reported (crash loop, orphaned namespace)"),
    Rule("notify_only", _notify_only, "a container whose action is notify"),
    Rule("silenced", _silenced, "anything while a silence or maintenance window holds it"),
    Rule("engine_denied", _engine_denied, "a problem whose restart the engine refused (403)"),
    Rule("approval_denied", _approval_denied, "an incident a person denied (action ask)"),
    Rule("in_flight", _in_flight, "a second restart while its restart call runs"),
    Rule("verifying", _verifying, "a second restart while the last one awaits its verdict"),
    Rule("storm_bystander", _storm_bystander, "a storm's bystander, for one cooldown at most"),
    Rule("storm_hold", _storm_hold, "a storm's container until its hold ends, one canary at once"),
    Rule("dependencies", _dependencies, "a container while a dependency is unhealthy"),
    Rule("max_attempts", _max_attempts, "more than max_attempts and no rung left: give up"),
    Rule("act_after", _act_after, "a problem younger than act_after"),
    Rule("cooldown", _cooldown, "a restart within the cooldown of the last attempt"),
    Rule("rate_limit", _rate_limit, "more than the host's restarts per minute"),
    Rule("concurrency", _concurrency, "more than the host's concurrent restarts"),
    Rule("dry_run", _dry_run, "every action, in a dry run"),
)


def _climb(case: Case, rung: str) -> Decision:
    """The ladder's next rung, its restarts spent: rollback, recreate or stop,
    Reason.ESCALATED; with a person's usable approval first when the container asks (`ask`) or
    the operator asks for this rung (restart.escalate_ask)."""
    policy, approval = case.policy, case.approval
    verdict = {"rollback": Verdict.ROLLBACK, "recreate": Verdict.RECREATE}.get(rung, Verdict.STOP)
    place = f"rung {policy.escalate.index(rung) + 2} of {len(policy.escalate) + 1}"
    why = f"{case.used} restarts did not help: {rung}, the ladder's {place}"

    def said(
        verdict: Verdict, reason: Reason, detail: str, used: Approval | None = None
    ) -> Decision:
        return Decision(
            verdict,
            reason,
            attempt=case.used,
            max_attempts=policy.max_attempts,
            detail=detail,
            approval=used,
            rung=rung,
        )

    if policy.action != "ask" and rung not in policy.escalate_ask:
        return said(verdict, Reason.ESCALATED, why)
    if approval is None or not approval.usable(case.now):
        return said(Verdict.WAIT, Reason.AWAITING_APPROVAL, f"{why}; a person approves it first")
    return said(verdict, Reason.APPROVED, f"{why}; approved by {approval.by}", approval)


def _requested(case: Case, request: RollbackRequest | None) -> Decision:
    """A person's rollback that every rule let through: once, while the request is usable (it
    is a person's own decision: no approval asked on top, whatever the container's action)."""
    if request is None or not request.usable(case.now):
        return Decision(
            Verdict.DENY, Reason.REQUESTED, detail="the rollback request expired or was used"
        )
    said = f"requested by {request.by}" + (f": {request.reason}" if request.reason else "")
    return replace(case.numbered(Verdict.ROLLBACK, Reason.REQUESTED, detail=said), request=request)


def _act(case: Case) -> Decision:
    """The verdict for the container's action, once every rule let the request through: a
    restart (the storm's canary says so), a stop, or for `ask` a restart only with a usable
    approval of a person, once; the ladder's next rung once the restarts are spent."""
    policy, approval = case.policy, case.approval
    if case.request is not None or case.target.problem is ProblemType.ROLLBACK_REQUESTED:
        return _requested(case, case.request)
    if case.rung is not None and case.used >= policy.max_attempts:
        return _climb(case, case.rung)
    if policy.action == "stop":
        return case.numbered(Verdict.STOP, Reason.ALLOWED)
    if policy.action == "ask":
        if approval is None or not approval.usable(case.now):
            return case.numbered(
                Verdict.WAIT,
                Reason.AWAITING_APPROVAL,
                detail="guardian.action=ask: a person approves each restart",
            )
        return case.numbered(
            Verdict.RESTART,
            Reason.STORM_CANARY if case.canary else Reason.APPROVED,
            detail=f"approved by {approval.by}"
            + (f": {approval.reason}" if approval.reason else ""),
            approval=approval,
        )
    return case.numbered(Verdict.RESTART, Reason.STORM_CANARY if case.canary else Reason.ALLOWED)


def decide(
    target: Target,
    history: AttemptHistory,
    host: HostLoad,
    policy: RestartPolicy,
    now: datetime,
    silence: Silence | None = None,
    approval: Approval | None = None,
    request: RollbackRequest | None = None,
) -> Decision:
    """Say whether `target` may be restarted at `now`, and if not, why and until when.

    The rules in `RULES` are asked in their order and the first refusal is the decision (the
    table in docs/restarts.md lists them); a request that every rule lets through gets the
    verdict of the container's action (`_act`): restart, stop, or for `ask` a restart only
    with a person's usable approval; with a person's `request`, that rollback (Reason.REQUESTED).
    """
    counted = tuple(counted_attempts(history, policy, now))
    canary = _is_canary(target, host, now)
    # The ladder follows restarts: a container whose action is stop is stopped already.
    rung = policy.next_rung(taken_rungs(history, policy, now)) if policy.action != "stop" else None
    case = Case(
        target, history, host, policy, now, silence, approval, counted, canary, rung, request
    )
    for rule in RULES:
        refusal = rule.check(case)
        if refusal is not None:
            return refusal
    return _act(case)


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
