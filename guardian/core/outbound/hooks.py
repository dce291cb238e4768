"""Operator-written hooks after a verdict: which hooks (core.outbound.hook_specs) run for which
verdict, the environment they get, and how a run's end reads in the history. Pure: the spawning is
an adapter's (adapters/hook_runner.py), the queue the service's (service/outbound/hooks.py).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import timedelta
from enum import StrEnum

from guardian.core.durations import format_duration
from guardian.core.model import Outcome
from guardian.core.outbound.hook_specs import HOOK_VERDICTS, HookSpec
from guardian.core.redaction import strip_controls

# How a hook's run is recorded (the history's outcome, guardian_hook_runs_total's label):
# succeeded (exit 0), failed (another exit status, a signal, or it could not start), timed_out
# (killed at its timeout), interrupted (killed by Guardian's stop, or never run because of it),
# policy_denied (refused: the queue was full).
HOOK_OUTCOMES: tuple[Outcome, ...] = (
    Outcome.SUCCEEDED,
    Outcome.FAILED,
    Outcome.TIMED_OUT,
    Outcome.INTERRUPTED,
    Outcome.POLICY_DENIED,
)

OUTPUT_LIMIT = 4096  # bytes of a run's output (stdout and stderr) kept for the history


@dataclass(frozen=True)
class ActionVerdict:
    """An action reached its verdict: what the hooks are told."""

    container: str
    container_id: str
    action: str  # restart
    outcome: Outcome
    incident_id: int | None  # None: a restart without an incident of its own


class HookEnd(StrEnum):
    """How a hook's process ended, as the runner saw it."""

    EXITED = "exited"
    TIMED_OUT = "timed_out"
    INTERRUPTED = "interrupted"  # Guardian stopped
    NOT_STARTED = "not_started"


@dataclass(frozen=True)
class HookRun:
    """What a runner reports of one run: how it ended, its exit status (negative: the signal
    that ended it), the first OUTPUT_LIMIT bytes of its output and how many it wrote in all."""

    end: HookEnd
    seconds: float
    exit_code: int | None = None
    output: bytes = b""
    output_size: int = 0
    error: str = ""  # why it did not start (also: interrupted before it started)


def hooks_for(verdict: ActionVerdict, hooks: Sequence[HookSpec]) -> tuple[HookSpec, ...]:
    """The hooks that run after `verdict`, in the order the operator listed them."""
    outcome = str(verdict.outcome)
    if outcome not in HOOK_VERDICTS:
        return ()
    return tuple(h for h in hooks if outcome in h.after)


def hook_environment(verdict: ActionVerdict, path: str) -> dict[str, str]:
    """A hook's whole environment: the verdict, a PATH and a locale. Nothing of Guardian's own
    environment, which holds the notification secrets."""
    return {
        "PATH": path,
        "LANG": "C.UTF-8",
        "GUARDIAN_CONTAINER": verdict.container,
        "GUARDIAN_CONTAINER_ID": verdict.container_id,
        "GUARDIAN_ACTION": verdict.action,
        "GUARDIAN_OUTCOME": str(verdict.outcome),
        "GUARDIAN_INCIDENT": str(verdict.incident_id) if verdict.incident_id is not None else "",
    }


def run_outcome(run: HookRun) -> Outcome:
    """The history's outcome of a run (one of HOOK_OUTCOMES)."""
    match run.end:
        case HookEnd.EXITED:
            return Outcome.SUCCEEDED if run.exit_code == 0 else Outcome.FAILED
        case HookEnd.TIMED_OUT:
            return Outcome.TIMED_OUT
        case HookEnd.INTERRUPTED:
            return Outcome.INTERRUPTED
        case HookEnd.NOT_STARTED:
            return Outcome.FAILED


def shown_output(run: HookRun) -> str:
    """The run's output fit to store: no control sequences, on one line, the first OUTPUT_LIMIT
    bytes. Known secrets are the caller's to mask (a Redactor masks a secret cut at the end)."""
    text = run.output[:OUTPUT_LIMIT].decode("utf-8", errors="replace")
    text = " ".join(strip_controls(text).split())
    return text + "…" if run.output_size > OUTPUT_LIMIT else text


def run_detail(run: HookRun, timeout: timedelta, output: str) -> str:
    """What the history says of a run: how it ended, after how long, and its output."""
    took = f"{run.seconds:.1f}s"
    match run.end:
        case HookEnd.NOT_STARTED:
            return f"not started: {run.error}"
        case HookEnd.TIMED_OUT:
            head = f"killed at its timeout ({format_duration(timeout)}) with its process group"
        case HookEnd.INTERRUPTED if run.error:
            return f"not run: {run.error}"
        case HookEnd.INTERRUPTED:
            head = f"killed with its process group after {took}: Guardian stopped"
        case HookEnd.EXITED if run.exit_code is not None and run.exit_code < 0:
            head = f"ended by signal {-run.exit_code} after {took}"
        case _:
            head = f"exit {run.exit_code} after {took}"
    if run.output_size > OUTPUT_LIMIT:
        head += f"; output cut to its first {OUTPUT_LIMIT} of {run.output_size} bytes"
    return f"{head}; output: {output}" if output else head
