"""The rules in force: the loop's settings, and per-container rules from labels worked out once
per container (labels are fixed when a container is created, so a sweep does not parse them again,
and a bad label is reported once). A reload retunes the settings and forgets the worked-out rules.
"""

from __future__ import annotations

import logging
import threading
from dataclasses import replace

from guardian.core.detection.log_rules import rules_for as log_rules_for
from guardian.core.detection.resources import limits_for
from guardian.core.detection.windows import windows_for
from guardian.core.labels import ContainerRules, rules_for
from guardian.core.model import ContainerSnapshot
from guardian.logs import kv
from guardian.service.settings import HealerSettings
from guardian.service.state.present import only_present
from guardian.service.state.state import NotificationRouting

log = logging.getLogger("guardian.labels")


class RuleBook:
    def __init__(self, settings: HealerSettings, routing: NotificationRouting) -> None:
        self.settings = settings
        self.routing = routing
        self._lock = threading.Lock()
        # By container id: the labels and name the rules were worked out from.
        self._rules: dict[str, tuple[dict[str, str], str, ContainerRules]] = {}
        self._warned: set[tuple[str, str]] = set()

    def observed(self, snap: ContainerSnapshot) -> ContainerRules:
        """The rules of a container the loop observes now (sweep, event, restart_with): its
        `guardian.notify` label mutes or unmutes its notifications too."""
        rules = self.of(snap)
        self.routing.update(snap.name, not rules.notify, rules.receivers)
        return rules

    def of(self, snap: ContainerSnapshot) -> ContainerRules:
        """The rules of `snap` from its labels, worked out once per container; a bad label is
        logged once. Changes no loop state (status and the API ask this)."""
        with self._lock:
            cached = self._rules.get(snap.id)
        if cached is not None and cached[0] == snap.labels and cached[1] == snap.name:
            return cached[2]
        s = self.settings
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
        with self._lock:
            if self.settings is s:  # not retuned meanwhile: these rules are still the ones
                self._rules[snap.id] = (dict(snap.labels), snap.name, rules)
            fresh = [w for w in rules.warnings if (snap.name, w) not in self._warned]
            self._warned.update((snap.name, w) for w in fresh)
        for warning in fresh:
            log.warning("bad label ignored", extra=kv(container=snap.name, problem=warning))
        return rules

    def retune(self, settings: HealerSettings) -> None:
        """New settings from a reload: every container's labels are judged again against them
        (and a bad label is reported again). Restarts and verifications in flight keep theirs."""
        with self._lock:
            self.settings = settings
            self._rules.clear()
            self._warned.clear()

    def keep_only(self, container_ids: set[str]) -> None:
        """Forget the rules of containers the engine no longer lists."""
        with self._lock:
            self._rules = only_present(self._rules, container_ids)
