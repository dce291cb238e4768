"""RestartPolicy: one container's restart rules, apart from decide() so that reading the config
needs neither the model nor the policy (`guardian config validate` starts faster)."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import timedelta

# What Guardian does once decide() allows it, from most to least it does on its own: restart;
# stop it and leave it to a person; ask a person to approve each restart; only notify.
ACTIONS = ("restart", "stop", "ask", "notify")
# The escalation ladder's rungs past restarts, in the only order they may be climbed: roll a
# new record back to the last one that ran healthy, recreate the container from its own record,
# then stop it and page (restart.escalate).
RUNGS = ("rollback", "recreate", "stop")


@dataclass(frozen=True)
class RestartPolicy:
    """The restart rules for one container (global settings with its labels applied)."""

    cooldown: timedelta = timedelta(seconds=300)
    max_attempts: int = 3
    window: timedelta = timedelta(hours=1)
    backoff_factor: float = 1.0
    max_cooldown: timedelta = timedelta(hours=1)
    reset_after: timedelta = timedelta(seconds=600)
    max_per_minute: int = 10
    max_concurrent: int = 2
    dry_run: bool = False
    # watch.orchestrated: act. Off by default: an orchestrator replaces its own containers, and
    # a restart by Guardian alongside gives one replica two containers.
    act_on_orchestrated: bool = False
    action: str = "restart"  # one of ACTIONS
    # Patience: act only once the problem has lasted this long (the incident opens at once).
    act_after: timedelta = timedelta(0)
    # The ladder once max_attempts restarts did not help (RUNGS, in order; () gives up as
    # ever), and the rungs a person approves before Guardian takes them.
    escalate: tuple[str, ...] = ()
    escalate_ask: tuple[str, ...] = ()
    # The rollback rung's monitor (restart.rollback_monitor, Swarm's update_config.monitor): a
    # record first unhealthy within this long of its creation failed early.
    rollback_monitor: timedelta = timedelta(minutes=5)

    def next_rung(self, taken: tuple[str, ...]) -> str | None:
        """The ladder's next rung once the restarts are spent: the one above the highest taken
        (a lower rung that left the window before a higher one is not climbed again)."""
        highest = max((self.escalate.index(r) for r in taken if r in self.escalate), default=-1)
        return self.escalate[highest + 1] if highest + 1 < len(self.escalate) else None

    def cooldown_after(self, attempts: int) -> timedelta:
        """The wait after the n-th attempt: exponential with a cap, never below cooldown."""
        if attempts <= 1 or self.backoff_factor <= 1.0:
            return self.cooldown
        # Cap the exponent: beyond ~60 doublings every cap is reached anyway.
        grown = self.cooldown.total_seconds() * self.backoff_factor ** min(attempts - 1, 64)
        capped = min(grown, self.max_cooldown.total_seconds())
        return max(self.cooldown, timedelta(seconds=capped))
