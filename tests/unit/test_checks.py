"""The checks: what counts as a problem, and what is never judged."""

from __future__ import annotations

from datetime import timedelta

import pytest

from guardian.core.detection.checks import (
    CheckSettings,
    evaluate,
    heard,
    needs_inspect,
    probe_before,
)
from guardian.core.model import ContainerSnapshot, ProblemType
from tests.fakes import T0

SETTINGS = CheckSettings(ignore_exit_codes=frozenset({0}), start_grace=timedelta(seconds=30))


def snap(**fields: object) -> ContainerSnapshot:
    base: dict[str, object] = {
        "id": "c" * 64,
        "name": "app",
        "labels": {},
        "state": "running",
        "health": "healthy",
        "inspected": True,
        "started_at": T0 - timedelta(hours=1),
    }
    base.update(fields)
    return ContainerSnapshot(**base)  # type: ignore[arg-type]


CASES = [
    ("healthy", {}, None, None),
    ("no healthcheck, running", {"health": None}, None, None),
    (
        "unhealthy",
        {"health": "unhealthy", "health_output": "curl: refused"},
        ProblemType.UNHEALTHY,
        None,
    ),
    (
        "unhealthy in start_grace",
        {"health": "unhealthy", "started_at": T0 - timedelta(seconds=5)},
        None,
        "in_grace",
    ),
    (
        "unhealthy inside its own start period",
        {
            "health": "unhealthy",
            "started_at": T0 - timedelta(seconds=50),
            "health_start_period": timedelta(seconds=60),
        },
        None,
        "in_grace",
    ),
    ("health starting", {"health": "starting"}, None, "starting"),
    ("paused", {"state": "paused", "health": "unhealthy"}, None, "paused"),
    ("docker is restarting it", {"state": "restarting"}, None, "restarting_by_docker"),
    ("exited 1", {"state": "exited", "exit_code": 1}, ProblemType.EXITED, None),
    ("dead 3", {"state": "dead", "exit_code": 3}, ProblemType.EXITED, None),
    ("exited 0 is ignored", {"state": "exited", "exit_code": 0}, None, "exit_code_ignored"),
    (
        "oom killed",
        {"state": "exited", "exit_code": 137, "oom_killed": True},
        ProblemType.OOM_KILLED,
        None,
    ),
    ("docker stop (SIGTERM)", {"state": "exited", "exit_code": 143}, None, "stopped_by_signal"),
    (
        "docker kill / stop timeout (SIGKILL)",
        {"state": "exited", "exit_code": 137},
        None,
        "stopped_by_signal",
    ),
    (
        "restart policy always owns it",
        {"state": "exited", "exit_code": 1, "restart_policy": "always"},
        None,
        "restart_policy_owned_by_docker",
    ),
    (
        "on-failure with retries left",
        {
            "state": "exited",
            "exit_code": 1,
            "restart_policy": "on-failure",
            "restart_policy_max_retries": 5,
            "restart_count": 2,
        },
        None,
        "restart_policy_owned_by_docker",
    ),
    (
        "on-failure gave up",
        {
            "state": "exited",
            "exit_code": 1,
            "restart_policy": "on-failure",
            "restart_policy_max_retries": 5,
            "restart_count": 5,
        },
        ProblemType.EXITED,
        None,
    ),
    ("created, never started", {"state": "created", "health": None}, None, "created"),
]


@pytest.mark.parametrize(("name", "fields", "problem", "skipped"), CASES, ids=[c[0] for c in CASES])
def test_evaluate(name, fields, problem, skipped) -> None:
    result = evaluate(snap(**fields), T0, SETTINGS)
    assert result.problem == problem
    assert result.skipped == skipped


def test_a_person_stopping_a_container_is_never_undone() -> None:
    result = evaluate(snap(state="exited", exit_code=2), T0, SETTINGS, stopped_by_person=True)
    assert result.skipped == "stopped_by_person" and result.problem is None


def test_health_output_is_trimmed_to_one_short_line() -> None:
    result = evaluate(snap(health="unhealthy", health_output="x\n" * 1000), T0, SETTINGS)
    assert len(result.detail) <= 300 and "\n" not in result.detail


@pytest.mark.parametrize(
    ("fields", "candidate"),
    [
        ({}, False),
        ({"health": "unhealthy"}, True),
        ({"state": "exited"}, True),
        ({"state": "dead"}, True),
        ({"state": "paused"}, False),
    ],
)
def test_only_candidates_are_inspected(fields, candidate) -> None:
    assert needs_inspect(snap(**fields)) is candidate


def at(seconds: float):
    return T0 + timedelta(seconds=seconds)


EXITED = {"state": "exited", "exit_code": 1, "finished_at": at(-30)}
# (case, snapshot fields, an event's time) -> the problem's start as the checks tell it, exact?
STARTS = [
    ("the turning probe, kept", {"unhealthy_since": at(-20)}, None, at(-20), True),
    (
        "an event tells nothing over an exact turn",
        {"unhealthy_since": at(-20)},
        at(-25),
        at(-20),
        True,
    ),
    ("rotated out: the oldest kept failure", {"unhealthy_by": at(-4)}, None, at(-4), False),
    ("rotated out: the unhealthy event's time", {"unhealthy_by": at(-4)}, at(-30), at(-30), False),
    ("an event after the bound adds nothing", {"unhealthy_by": at(-4)}, at(-2), at(-4), False),
    ("an event before its start: another life", {"unhealthy_by": at(-4)}, at(-7200), at(-4), False),
    ("only the last probe", {"health_log_at": at(-1)}, None, at(-1), False),
    ("an exit: its FinishedAt", EXITED, at(-29), at(-30), True),
]


@pytest.mark.parametrize(
    ("case", "fields", "event", "since", "exact"), STARTS, ids=[r[0] for r in STARTS]
)
def test_the_checks_tell_since_when_a_problem_lasts(case, fields, event, since, exact) -> None:
    s = snap(**{"health": "unhealthy", **fields})
    result = heard(evaluate(s, T0, SETTINGS), event, s)
    assert (result.since, result.since_exact) == (since, exact)


# A restart asked at T0 of a container the engine started again at T0 + 1 s.
RESTARTED = T0 + timedelta(seconds=1)
BEFORE, LATER = T0 - timedelta(seconds=1), T0 + timedelta(seconds=2)
OLD_RUN = T0 - timedelta(hours=1)
# (case, the last probe's output, when it ended, the container's start) -> what is told.
LAST_PROBES = [
    ("the probe before the request", "db down", BEFORE, RESTARTED, "db down"),
    ("a probe at the request itself", "db down", T0, RESTARTED, ""),
    ("the new run's first probe", "warming up", LATER, RESTARTED, ""),
    # Before the request in Guardian's frame, after the start in the engine's: the clocks
    # disagree, and the engine's own order says it is the new run's.
    ("after the start, by the engine", "warming up", BEFORE, BEFORE - timedelta(seconds=1), ""),
    ("no restart seen: probed since its start", "db down", BEFORE, OLD_RUN, ""),
    ("no probe time", "db down", None, RESTARTED, ""),
    ("a probe that said nothing", "", BEFORE, RESTARTED, ""),
    ("hostile output made fit to show", "\x1b[2Jtoken=abc\nx", BEFORE, RESTARTED, "token=*** x"),
]


@pytest.mark.parametrize(
    ("case", "output", "ended", "started", "told"), LAST_PROBES, ids=[r[0] for r in LAST_PROBES]
)
def test_only_a_probe_of_the_run_a_restart_ended_is_told(case, output, ended, started, told):
    s = snap(health="healthy", health_output=output, health_log_at=ended, started_at=started)
    assert probe_before(s, T0) == told
