"""The rules in force: the loop's settings, and per-container rules from labels worked out once
per container (labels are fixed when a container is created, so a sweep does not parse them again,
and a bad label is reported once). A reload retunes the settings and forgets the worked-out rules.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field, replace

from guardian.core.detection.log_rules import rules_for as log_rules_for
from guardian.core.detection.resources import limits_for
from guardian.core.detection.windows import windows_for
from guardian.core.labels import ContainerRules, rules_for
from guardian.core.model import ContainerSnapshot
from guardian.logs import kv
from guardian.service.settings import HealerSettings
from guardian.service.state.state import NotificationRouting

log = logging.getLogger("guardian.labels")


@dataclass(frozen=True)
class _Book:
    """The settings and what was worked out under them: replaced whole by a reload."""

    settings: HealerSettings
    # By container id: the labels and name the rules were worked out from.
    rules: dict[str, tuple[dict[str, str], str, ContainerRules]] = field(default_factory=dict)
    # (container name, warning) -> the call that logged it (dict.setdefault: only one does).
    warned: dict[tuple[str, str], object] = field(default_factory=dict)


class RuleBook:
    """No lock: the settings and the rules worked out under them are one _Book, published by
    one assignment (retune) and taken once per call, so a rule worked out under settings a
    reload replaced meanwhile lands in the book the reload dropped, never in the new one.
    Within a book each step is one dict operation, atomic in CPython: two threads that both
    miss a container's rules (its worker, a status read, a watcher) both work out the same
    rules from the same labels, and the later assignment keeps them; which of them logs a
    bad label is settled by one setdefault."""

    def __init__(self, settings: HealerSettings, routing: NotificationRouting) -> None:
        self.routing = routing
        self._book = _Book(settings)

    @property
    def settings(self) -> HealerSettings:
        return self._book.settings

    def observed(self, snap: ContainerSnapshot) -> ContainerRules:
        """The rules of a container the loop observes now (sweep, event, restart_with): its
        `guardian.notify` label mutes or unmutes its notifications too."""
        rules = self.of(snap)
        self.routing.update(snap.name, not rules.notify, rules.receivers)
        return rules

    def of(self, snap: ContainerSnapshot) -> ContainerRules:
        """The rules of `snap` from its labels, worked out once per container; a bad label is
        logged once. Changes no loop state (status and the API ask this)."""
        book = self._book
        cached = book.rules.get(snap.id)
        if cached is not None and cached[0] == snap.labels and cached[1] == snap.name:
            return cached[2]
        s = book.settings
        rules = rules_for(
            snap.labels,
            s.policy,
            s.stop_timeout,
            s.watch_label,
            s.self_id,
            snap.id,
            s.labels_may_loosen,
        )
        # The operator's windows that match its name, beside its label's own.
        windows = windows_for(snap.name, s.maintenance)
        if windows:
            rules = replace(rules, maintenance=windows + rules.maintenance)
        # The operator's resource limits that match its name, beside its labels' own.
        limits = limits_for(snap.name, s.resources)
        if limits:
            rules = replace(rules, resources=limits + rules.resources)
        # The operator's log rules that match its name, beside its label's own.
        log_rules = log_rules_for(snap.name, s.log_rules)
        if log_rules:
            rules = replace(rules, log_rules=rules.log_rules + log_rules)
        book.rules[snap.id] = (dict(snap.labels), snap.name, rules)
        mine = object()
        fresh = [w for w in rules.warnings if book.warned.setdefault((snap.name, w), mine) is mine]
        for warning in fresh:
            log.warning("bad label ignored", extra=kv(container=snap.name, problem=warning))
        return rules

    def retune(self, settings: HealerSettings) -> None:
        """New settings from a reload: every container's labels are judged again against them
        (and a bad label is reported again). Restarts and verifications in flight keep theirs."""
        self._book = _Book(settings)

    def keep_only(self, container_ids: set[str]) -> None:
        """Forget the rules of containers the engine no longer lists (from the book in force,
        in place: a reload meanwhile is never undone)."""
        rules = self._book.rules
        for gone in rules.keys() - container_ids:
            rules.pop(gone, None)
