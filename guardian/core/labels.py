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
from guardian.core.detection.restart_policy import ACTIONS, RestartPolicy
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


def _action(raw: str, base: str) -> tuple[str, str | None]:
    """The action a `guardian.action` label asks for, or the operator's with a warning: a label
    may only ask Guardian to do less on its own than restart.action says (DESIGN 14)."""
    value = raw.strip().lower()
    if value not in ACTIONS:
        return base, f"label {ACTION}={raw[:40]!r}: expected one of {', '.join(ACTIONS)}"
    if ACTIONS.index(value) < ACTIONS.index(base):
        return base, (
            f"label {ACTION}={value}: does more than restart.action={base}; the operator's"
            " value applies"
        )
    return value, None


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


def _loosens(label: str, raw: str, allowed: str) -> str:
    """The warning for a label that asks for more than the operator configured."""
    key = label.removeprefix("guardian.")
    return (
        f"label {label}={raw[:40]!r}: expected {allowed} (restart.{key}); a label may only "
        f"tighten it unless labels.allow_loosen lists {key}"
    )


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
    warnings: list[str] = []
    policy = base
    # Bounded like the config keys they override (core.limits): a bad value is a warning.
    if MAX_ATTEMPTS in labels:
        attempts, warning = from_label(MAX_ATTEMPTS, labels[MAX_ATTEMPTS])
        if isinstance(attempts, int):
            if attempts <= base.max_attempts or "max_attempts" in may_loosen:
                policy = replace(policy, max_attempts=attempts)
            else:
                warning = _loosens(
                    MAX_ATTEMPTS, labels[MAX_ATTEMPTS], f"at most {base.max_attempts}"
                )
        warnings += [warning] if warning else []
    if COOLDOWN in labels:
        cooldown, warning = from_label(COOLDOWN, labels[COOLDOWN])
        if isinstance(cooldown, timedelta):
            if cooldown >= base.cooldown or "cooldown" in may_loosen:
                policy = replace(
                    policy, cooldown=cooldown, max_cooldown=max(cooldown, base.max_cooldown)
                )
            else:
                least = f"at least {format_duration(base.cooldown)}"
                warning = _loosens(COOLDOWN, labels[COOLDOWN], least)
        warnings += [warning] if warning else []
    stop_label = STOP_TIMEOUT if STOP_TIMEOUT in labels else AUTOHEAL_STOP_TIMEOUT
    if stop_label in labels:
        # autoheal.stop.timeout (seconds) is read as guardian.stop_timeout, bounded alike.
        stop, warning = from_label(STOP_TIMEOUT, labels[stop_label])
        if isinstance(stop, timedelta):
            stop_timeout = stop
        if warning and stop_label != STOP_TIMEOUT:
            warning = warning.replace(f"label {STOP_TIMEOUT}=", f"label {stop_label}=", 1)
        warnings += [warning] if warning else []
    if ACTION in labels:
        action, warning = _action(labels[ACTION], base.action)
        policy = replace(policy, action=action)
        warnings += [warning] if warning else []
    if ACT_AFTER in labels:
        wait, warning = from_label(ACT_AFTER, labels[ACT_AFTER])
        if isinstance(wait, timedelta):
            if wait >= base.act_after:
                policy = replace(policy, act_after=wait)
            else:  # labels only ask for more patience than the operator's (DESIGN 14)
                warning = (
                    f"label {ACT_AFTER}={labels[ACT_AFTER][:40]!r}: shorter than"
                    " restart.act_after; the operator's value applies"
                )
        warnings += [warning] if warning else []
    notify = _flag(labels.get(NOTIFY))
    receivers: tuple[str, ...] = ()
    if labels.get(NOTIFY) is not None and notify is None:
        receivers = receiver_names(labels[NOTIFY]) or ()
        if not receivers:
            warnings.append(
                f"label {NOTIFY}={labels[NOTIFY][:40]!r}: expected true, false or up to "
                f"{MAX_LABEL_RECEIVERS} receiver names ({RECEIVER_NAME_ALLOWED})"
            )
    maintenance: tuple[MaintenanceWindow, ...] = ()
    if MAINTENANCE in labels:
        try:  # the label holds its own container: the glob matches whatever its name
            maintenance = (window_from_label("*", labels[MAINTENANCE]),)
        except WindowError as exc:
            warnings.append(str(exc))
    resources: tuple[Limit, ...] = ()
    if any(label in labels for label in RESOURCE_LABELS):
        resources, resource_warnings = limits_from_labels(labels)
        warnings.extend(resource_warnings)
    log_rules: tuple[LogRule, ...] = ()
    if LOGS_MATCH in labels:
        try:  # the label adds detection for its own container; decide() still decides
            log_rules = (log_rule_from_label(labels[LOGS_MATCH]),)
        except LogRuleError as exc:
            warnings.append(str(exc))
    is_self = _flag(labels.get(SELF)) is True or (
        bool(self_id) and bool(container_id) and container_id.startswith(self_id or "")
    )
    return ContainerRules(
        opted_in=opted_in(labels, watch_label),
        is_self=is_self,
        policy=policy,
        stop_timeout=stop_timeout,
        notify=notify is not False,
        receivers=receivers,
        warnings=tuple(warnings),
        orchestrator=owner(labels),
        maintenance=maintenance,
        resources=resources,
        log_rules=log_rules,
    )
