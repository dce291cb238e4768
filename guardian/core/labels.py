"""Per-container rules from Docker labels: opt-in, overrides of the restart policy, self-marking.

A bad label is reported as a warning for that container and the global value is used instead;
one container's typo never stops Guardian from watching the others. Labels only tighten the
operator's policy (fewer attempts, a longer cooldown) unless the operator allows loosening a key.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping
from dataclasses import dataclass, replace
from datetime import timedelta

from guardian.core.detection.log_rules import LABEL as LOG_MATCH_LABEL
from guardian.core.detection.log_rules import LogRule, LogRuleError
from guardian.core.detection.log_rules import from_label as log_rule_from_label
from guardian.core.detection.resources import LABELS as RESOURCE_LABELS
from guardian.core.detection.resources import Limit
from guardian.core.detection.resources import from_labels as limits_from_labels
from guardian.core.detection.restart_policy import ACTIONS, RUNGS, RestartPolicy
from guardian.core.detection.windows import LABEL as MAINTENANCE_LABEL
from guardian.core.detection.windows import MaintenanceWindow, WindowError
from guardian.core.detection.windows import from_label as window_from_label
from guardian.core.durations import format_duration
from guardian.core.limits import from_label
from guardian.core.outbound.receivers import RECEIVER_NAME, RECEIVER_NAME_ALLOWED
from guardian.core.relations.orchestrators import owner

ALL = "all"
ENABLE = "guardian.enable"
SELF = "guardian.self"
MAX_ATTEMPTS = "guardian.max_attempts"
COOLDOWN = "guardian.cooldown"
STOP_TIMEOUT = "guardian.stop_timeout"
NOTIFY = "guardian.notify"
# docker-autoheal's labels (docs/migrating-from-autoheal.md): its opt-out in `watch.label: all`
# (in any case: autoheal itself reads only lower-case) and its per-container stop timeout.
AUTOHEAL = "autoheal"
AUTOHEAL_STOP_TIMEOUT = "autoheal.stop.timeout"
ACTION = "guardian.action"
ACT_AFTER = "guardian.act_after"
ESCALATE = "guardian.escalate"  # the ladder's rungs, only those restart.escalate allows
MAINTENANCE = MAINTENANCE_LABEL  # core.detection.windows: "0 2 * * * 1h [tz]"
LOGS_MATCH = LOG_MATCH_LABEL  # core.detection.log_rules: an RE2 pattern on the container's output

# The keys whose labels may ask for more than the operator configured, when the operator lists
# them in labels.allow_loosen: a label's own name without the "guardian." prefix.
LOOSENABLE = ("max_attempts", "cooldown")
MAX_LABEL_RECEIVERS = 8

_TRUE = frozenset({"true", "yes", "on", "1"})
_FALSE = frozenset({"false", "no", "off", "0"})


@dataclass(frozen=True)
class ContainerRules:
    """What applies to one container once its labels are read."""

    opted_in: bool
    is_self: bool
    policy: RestartPolicy
    stop_timeout: timedelta
    notify: bool = True
    receivers: tuple[str, ...] = ()  # guardian.notify=<receiver names>: who hears of it
    warnings: tuple[str, ...] = ()
    orchestrator: str = ""  # who else owns it (core.relations.orchestrators); "": nobody
    # guardian.maintenance: the container's own window on a calendar (it only holds it back).
    maintenance: tuple[MaintenanceWindow, ...] = ()
    # guardian.memory.* / guardian.cpu.* and the operator's resources.rules that match its
    # name (core.detection.resources): each only adds detection; decide() still decides.
    resources: tuple[Limit, ...] = ()
    # guardian.logs.match and the operator's logs.rules that apply: patterns on its output.
    log_rules: tuple[LogRule, ...] = ()


def _flag(value: str | None) -> bool | None:
    if value is None:
        return None
    v = value.strip().lower()
    return True if v in _TRUE else False if v in _FALSE else None


def receiver_names(value: str) -> tuple[str, ...] | None:
    """The receiver names of a guardian.notify label ("db-team,pager"); None when it is not a
    list of at most MAX_LABEL_RECEIVERS names."""
    names = value.replace(",", " ").split()
    if not names or len(names) > MAX_LABEL_RECEIVERS or len(value) > 600:
        return None
    if not all(RECEIVER_NAME.fullmatch(n) for n in names):
        return None
    return tuple(dict.fromkeys(names))


def opted_in(labels: Mapping[str, str], watch_label: str) -> bool:
    """`watch.label` names the opt-in label; the value "all" watches everything not opted out."""
    if watch_label == ALL:
        return _flag(labels.get(ENABLE)) is not False and _flag(labels.get(AUTOHEAL)) is not False
    return _flag(labels.get(watch_label)) is True


def in_scope(labels: Mapping[str, str], scope: str) -> bool:
    """`watch.scope` ("key" or "key=value", empty: everything) limits what Guardian considers."""
    if not scope:
        return True
    key, sep, value = scope.partition("=")
    return key in labels and (not sep or labels[key] == value)


def watched(labels: Mapping[str, str], watch_label: str, scope: str) -> bool:
    """The one "does Guardian watch this container" predicate: in scope and opted in."""
    return in_scope(labels, scope) and opted_in(labels, watch_label)


def _tightens(
    key: str, asked: RestartPolicy, base: RestartPolicy, may_loosen: Collection[str]
) -> bool:
    """Labels only tighten (docs/design.md rule 14), the whole rule: what a label asks for in
    `key` applies when it asks Guardian for no more than the operator's `base` does (fewer
    attempts, a longer cooldown, more patience, an action that does less on its own), or when
    `key` is one the operator lets labels loosen (labels.allow_loosen, among LOOSENABLE)."""
    match key:
        case "max_attempts":
            tighter = asked.max_attempts <= base.max_attempts
        case "cooldown":
            tighter = asked.cooldown >= base.cooldown
        case "act_after":
            tighter = asked.act_after >= base.act_after
        case "action":  # ACTIONS runs from the most to the least Guardian does on its own
            tighter = ACTIONS.index(asked.action) >= ACTIONS.index(base.action)
        case "escalate":  # fewer rungs, each one the operator allows
            tighter = set(asked.escalate) <= set(base.escalate)
        case _:
            raise KeyError(key)
    return tighter or (key in LOOSENABLE and key in may_loosen)


def _loosens(label: str, raw: str, allowed: str) -> str:
    """The warning for a label that asks for more than the operator configured."""
    key = label.removeprefix("guardian.")
    return (
        f"label {label}={raw[:40]!r}: expected {allowed} (restart.{key}); a label may only "
        f"tighten it unless labels.allow_loosen lists {key}"
    )


def _one(warning: str | None) -> tuple[str, ...]:
    return (warning,) if warning else ()


# Each override below reads one label over `policy` (the labels read so far over `base`, the
# operator's) and returns the policy it leaves with its warnings. Bounded like the config keys
# they override (core.limits): a bad value is a warning.


def _max_attempts(
    labels: Mapping[str, str], policy: RestartPolicy, base: RestartPolicy, may: Collection[str]
) -> tuple[RestartPolicy, tuple[str, ...]]:
    if MAX_ATTEMPTS not in labels:
        return policy, ()
    attempts, warning = from_label(MAX_ATTEMPTS, labels[MAX_ATTEMPTS])
    if not isinstance(attempts, int):
        return policy, _one(warning)
    asked = replace(policy, max_attempts=attempts)
    if _tightens("max_attempts", asked, base, may):
        return asked, _one(warning)
    most = f"at most {base.max_attempts}"
    return policy, _one(_loosens(MAX_ATTEMPTS, labels[MAX_ATTEMPTS], most))


def _cooldown(
    labels: Mapping[str, str], policy: RestartPolicy, base: RestartPolicy, may: Collection[str]
) -> tuple[RestartPolicy, tuple[str, ...]]:
    if COOLDOWN not in labels:
        return policy, ()
    cooldown, warning = from_label(COOLDOWN, labels[COOLDOWN])
    if not isinstance(cooldown, timedelta):
        return policy, _one(warning)
    asked = replace(policy, cooldown=cooldown, max_cooldown=max(cooldown, base.max_cooldown))
    if _tightens("cooldown", asked, base, may):
        return asked, _one(warning)
    least = f"at least {format_duration(base.cooldown)}"
    return policy, _one(_loosens(COOLDOWN, labels[COOLDOWN], least))


def _action(
    labels: Mapping[str, str], policy: RestartPolicy, base: RestartPolicy, may: Collection[str]
) -> tuple[RestartPolicy, tuple[str, ...]]:
    """A label may only ask Guardian to do less on its own than restart.action says."""
    if ACTION not in labels:
        return policy, ()
    raw = labels[ACTION]
    value = raw.strip().lower()
    if value not in ACTIONS:
        expected = f"expected one of {', '.join(ACTIONS)}"
        return replace(policy, action=base.action), (f"label {ACTION}={raw[:40]!r}: {expected}",)
    asked = replace(policy, action=value)
    if _tightens("action", asked, base, may):
        return asked, ()
    return replace(policy, action=base.action), (
        f"label {ACTION}={value}: does more than restart.action={base.action}; the operator's"
        " value applies",
    )


def _act_after(
    labels: Mapping[str, str], policy: RestartPolicy, base: RestartPolicy, may: Collection[str]
) -> tuple[RestartPolicy, tuple[str, ...]]:
    """A label may only ask for more patience than the operator's."""
    if ACT_AFTER not in labels:
        return policy, ()
    wait, warning = from_label(ACT_AFTER, labels[ACT_AFTER])
    if not isinstance(wait, timedelta):
        return policy, _one(warning)
    asked = replace(policy, act_after=wait)
    if _tightens("act_after", asked, base, may):
        return asked, _one(warning)
    return policy, (
        f"label {ACT_AFTER}={labels[ACT_AFTER][:40]!r}: shorter than"
        " restart.act_after; the operator's value applies",
    )


def _stop_timeout(
    labels: Mapping[str, str], stop_timeout: timedelta
) -> tuple[timedelta, tuple[str, ...]]:
    """autoheal.stop.timeout (seconds) is read as guardian.stop_timeout, bounded alike."""
    stop_label = STOP_TIMEOUT if STOP_TIMEOUT in labels else AUTOHEAL_STOP_TIMEOUT
    if stop_label not in labels:
        return stop_timeout, ()
    stop, warning = from_label(STOP_TIMEOUT, labels[stop_label])
    if warning and stop_label != STOP_TIMEOUT:
        warning = warning.replace(f"label {STOP_TIMEOUT}=", f"label {stop_label}=", 1)
    return (stop if isinstance(stop, timedelta) else stop_timeout), _one(warning)


def _notify(labels: Mapping[str, str]) -> tuple[bool, tuple[str, ...], tuple[str, ...]]:
    """guardian.notify: a flag, or the receivers that hear of this container."""
    notify = _flag(labels.get(NOTIFY))
    receivers: tuple[str, ...] = ()
    if labels.get(NOTIFY) is not None and notify is None:
        receivers = receiver_names(labels[NOTIFY]) or ()
        if not receivers:
            return (
                True,
                (),
                (
                    f"label {NOTIFY}={labels[NOTIFY][:40]!r}: expected true, false or up to "
                    f"{MAX_LABEL_RECEIVERS} receiver names ({RECEIVER_NAME_ALLOWED})",
                ),
            )
    return notify is not False, receivers, ()


def _maintenance(
    labels: Mapping[str, str],
) -> tuple[tuple[MaintenanceWindow, ...], tuple[str, ...]]:
    if MAINTENANCE not in labels:
        return (), ()
    try:  # the label holds its own container: the glob matches whatever its name
        return (window_from_label("*", labels[MAINTENANCE]),), ()
    except WindowError as exc:
        return (), (str(exc),)


def _resources(labels: Mapping[str, str]) -> tuple[tuple[Limit, ...], tuple[str, ...]]:
    if any(label in labels for label in RESOURCE_LABELS):
        return limits_from_labels(labels)
    return (), ()


def _log_rules(labels: Mapping[str, str]) -> tuple[tuple[LogRule, ...], tuple[str, ...]]:
    if LOGS_MATCH not in labels:
        return (), ()
    try:  # the label adds detection for its own container; decide() still decides
        return (log_rule_from_label(labels[LOGS_MATCH]),), ()
    except LogRuleError as exc:
        return (), (str(exc),)


def _escalate(
    labels: Mapping[str, str], policy: RestartPolicy, base: RestartPolicy, may: Collection[str]
) -> tuple[RestartPolicy, tuple[str, ...]]:
    """A label may only shorten the ladder or leave rungs out (`none`: give up after the
    restarts), never add a rung restart.escalate does not allow: such a rung is ignored."""
    if ESCALATE not in labels:
        return policy, ()
    raw = labels[ESCALATE]
    words = raw.replace(",", " ").lower().split()[: len(RUNGS) + 1]
    if words == ["none"]:
        return replace(policy, escalate=()), ()
    unknown = [w for w in words if w not in RUNGS]
    allowed = [r for r in RUNGS if r in words and r in base.escalate]
    asked = replace(policy, escalate=tuple(allowed))
    assert _tightens("escalate", asked, base, may)
    if unknown:
        expected = f"expected rungs among {', '.join(RUNGS)}, or none"
        return asked, (f"label {ESCALATE}={raw[:40]!r}: {expected}",)
    added = [r for r in RUNGS if r in words and r not in base.escalate]
    if added:
        given = ", ".join(base.escalate) or "none"
        return asked, (
            f"label {ESCALATE}={raw[:40]!r}: {', '.join(added)} ignored: restart.escalate "
            f"allows {given}; a label may only leave rungs out",
        )
    return asked, ()


def rules_for(
    labels: Mapping[str, str],
    base: RestartPolicy,
    stop_timeout: timedelta,
    watch_label: str,
    self_id: str | None = None,
    container_id: str = "",
    may_loosen: Collection[str] = (),
) -> ContainerRules:
    """Apply the container's labels to the global policy; collect a warning per bad label.

    A label may ask for fewer attempts or a longer cooldown than `base`; more attempts or a
    shorter cooldown only for the keys in `may_loosen` (the operator's labels.allow_loosen).
    Whoever starts a container writes its labels, not the operator."""
    policy, attempts_warning = _max_attempts(labels, base, base, may_loosen)
    policy, cooldown_warning = _cooldown(labels, policy, base, may_loosen)
    stop_timeout, stop_warning = _stop_timeout(labels, stop_timeout)
    policy, action_warning = _action(labels, policy, base, may_loosen)
    policy, act_after_warning = _act_after(labels, policy, base, may_loosen)
    policy, escalate_warning = _escalate(labels, policy, base, may_loosen)
    notify, receivers, notify_warning = _notify(labels)
    maintenance, maintenance_warning = _maintenance(labels)
    resources, resource_warnings = _resources(labels)
    log_rules, log_rules_warning = _log_rules(labels)
    warnings = attempts_warning + cooldown_warning + stop_warning + action_warning
    warnings += act_after_warning + escalate_warning + notify_warning + maintenance_warning
    warnings += resource_warnings + log_rules_warning
    is_self = _flag(labels.get(SELF)) is True or (
        bool(self_id) and bool(container_id) and container_id.startswith(self_id or "")
    )
    return ContainerRules(
        opted_in=opted_in(labels, watch_label),
        is_self=is_self,
        policy=policy,
        stop_timeout=stop_timeout,
        notify=notify,
        receivers=receivers,
        warnings=warnings,
        orchestrator=owner(labels),
        maintenance=maintenance,
        resources=resources,
        log_rules=log_rules,
    )
