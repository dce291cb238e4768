"""The checks: what counts as a problem, and what is never judged."""

from __future__ import annotations

from datetime import timedelta

import pytest

from guardian.core.checks import CheckSettings, evaluate, needs_inspect
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
