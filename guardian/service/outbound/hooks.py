"""Operator-written hooks after each verdict, off the loop's threads: a verdict queues the hooks
core.outbound.hooks picks for it, at most `max_concurrent` run at once on threads of their own, at
most `max_queued` wait (past that a hook is refused, counted and logged), and each run's end is a
row of the incident's timeline with its output, redacted. A stop kills what runs and joins nothing
that could wait for a hook.
"""

from __future__ import annotations

import logging
import threading
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass
from datetime import timedelta

from guardian.core.model import ActionKind, Outcome, RemediationAction
from guardian.core.outbound.hook_specs import HookSpec
from guardian.core.outbound.hooks import (
    ActionVerdict,
    hook_environment,
    hooks_for,
    run_detail,
    run_outcome,
    shown_output,
)
from guardian.logs import kv
from guardian.ports import Clock, HookRunner, Metrics, Store

log = logging.getLogger("guardian.hooks")

# How long a stop waits for the hooks it killed to record how they ended; a row still without
# an outcome then is recorded interrupted at the next start (Verifier.reconcile).
STOP_GRACE = timedelta(seconds=1)
HOOK_KEY = "hook"  # an action's extra: the hook's name


@dataclass(frozen=True)
class HookSettings:
    hooks: tuple[HookSpec, ...]
    max_concurrent: int
    max_queued: int
    path: str  # the PATH a hook gets (the one its program was found on at load)


@dataclass(frozen=True)
class _Job:
    verdict: ActionVerdict
    spec: HookSpec
    action_id: int


def _start_thread(target: Callable[[], None]) -> None:
    # A daemon thread: nothing ever waits for a hook to end, a stop least of all.
    threading.Thread(target=target, name="hook", daemon=True).start()


class Hooks:
    def __init__(
        self,
        store: Store,
        clock: Clock,
        metrics: Metrics,
        host: str,
        runner: HookRunner,
        settings: HookSettings,
        redact: Callable[[str], str],
    ) -> None:
        self.store = store
        self.clock = clock
        self.metrics = metrics
        self.host = host
        self.runner = runner
        self.settings = settings
        self.redact = redact
        # The queue, the threads running and the stop, and the stop's wait for the threads.
        self._idle = threading.Condition()
        self._queue: deque[_Job] = deque()
        self._running = 0  # threads taking jobs from the queue
        self._stopped = False

    def reached(self, verdict: ActionVerdict) -> None:
        """An action reached `verdict`: queue its hooks and return at once. Never raises: a
        hook's trouble is never the loop's."""
        try:
            for spec in hooks_for(verdict, self.settings.hooks):
                self._accept(verdict, spec)
        except Exception:
            log.exception("hook not run", extra=kv(container=verdict.container))

    def _accept(self, verdict: ActionVerdict, spec: HookSpec) -> None:
        action_id = self.store.record_intent(self._row(verdict, spec))
        job, start, refusal = _Job(verdict, spec, action_id), False, ""
        with self._idle:
            if self._stopped:
                refusal = "interrupted"
            elif self._running < self.settings.max_concurrent:
                self._running += 1
                start = True
            elif len(self._queue) < self.settings.max_queued:
                self._queue.append(job)
            else:
                refusal = "refused"
        if start:
            _start_thread(lambda: self._work(job))
        elif refusal == "interrupted":
            self._end(job, Outcome.INTERRUPTED, "not run: Guardian stopped")
        elif refusal:
            s = self.settings
            why = (
                f"refused: {s.max_concurrent} hooks running and {s.max_queued} queued "
                "(remediation.hooks_max_concurrent, remediation.hooks_max_queued)"
            )
            self._end(job, Outcome.POLICY_DENIED, why)

    def _row(self, verdict: ActionVerdict, spec: HookSpec) -> RemediationAction:
        return RemediationAction(
            None,
            verdict.incident_id,
            self.host,
            verdict.container,
            verdict.container_id,
            ActionKind.HOOK,
            self.clock.now(),
            f"{spec.name} after {verdict.action} {verdict.outcome}",
            extra={HOOK_KEY: spec.name},
        )

    def _work(self, job: _Job | None) -> None:
        """One hook thread: run jobs until the queue is empty."""
        while job is not None:
            try:
                self._run(job)
            except Exception as exc:
                log.exception("hook failed", extra=kv(hook=job.spec.name))
                self._try_end(job, Outcome.FAILED, f"not run: {type(exc).__name__}")
            with self._idle:
                job = self._queue.popleft() if self._queue and not self._stopped else None
                if job is None:
                    self._running -= 1
                    self._idle.notify_all()

    def _run(self, job: _Job) -> None:
        spec = job.spec
        env = hook_environment(job.verdict, self.settings.path)
        run = self.runner.run(spec.argv, env, spec.timeout)
        outcome = run_outcome(run)
        # Redacted whole: a secret cut at the end of the kept output is masked too.
        detail = self.redact(run_detail(run, spec.timeout, shown_output(run)))
        self._end(job, outcome, detail, run.exit_code, run.seconds)

    def _end(
        self,
        job: _Job,
        outcome: Outcome,
        detail: str,
        exit_code: int | None = None,
        seconds: float = 0.0,
    ) -> None:
        self.store.record_outcome(job.action_id, outcome, detail, self.clock.now())
        self.metrics.hook_ran(str(outcome))
        level = logging.INFO if outcome is Outcome.SUCCEEDED else logging.WARNING
        log.log(
            level,
            "hook ended",
            extra=kv(
                hook=job.spec.name,
                container=job.verdict.container,
                verdict=job.verdict.outcome,
                outcome=outcome,
                exit_code=exit_code,
                seconds=round(seconds, 1),
            ),
        )

    def _try_end(self, job: _Job, outcome: Outcome, detail: str) -> None:
        try:
            self._end(job, outcome, detail)
        except Exception:
            log.exception("hook not recorded", extra=kv(hook=job.spec.name))

    def stop(self) -> None:
        """Kill every running hook's process group now (their rows say interrupted), record the
        queued ones interrupted, and wait at most STOP_GRACE for the killed ones' rows."""
        with self._idle:
            self._stopped = True
            queued = list(self._queue)
            self._queue.clear()
        self.runner.stop()
        for job in queued:
            self._try_end(job, Outcome.INTERRUPTED, "not run: Guardian stopped")
        with self._idle:
            self._idle.wait_for(lambda: self._running == 0, STOP_GRACE.total_seconds())
