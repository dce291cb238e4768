"""The oracle can fail: with a bug planted in Guardian (tests/sim/plants.py), a handful of seeds
finds it, and the failure names the promise broken and the command that replays it, the bug
planted again.
"""

from __future__ import annotations

import pytest

from tests.sim import driver
from tests.sim.driver import Report, simulate
from tests.sim.oracle import Promise

BUDGET = {
    Promise.ONE_IN_FLIGHT,
    Promise.COOLDOWN,
    Promise.MAX_ATTEMPTS,
    Promise.HOST_BUDGET,
    Promise.AT_ONCE,
}
HANDFUL = 30  # seeds tried at most; each plant is found within the first few


def first_found(plant: str) -> Report:
    """The first seed whose run breaks a promise by no known bug, with `plant` planted."""
    for seed in range(HANDFUL):
        report = simulate(seed, 1.0, plant)
        if report.failed:
            return report
    pytest.fail(f"{HANDFUL} seeds with {plant} planted broke no promise: the oracle is blind")


@pytest.mark.parametrize(
    ("plant", "promises"),
    [
        # (a) a second restart while one is in flight or awaits its verdict, budgets ignored
        ("always_allow", BUDGET),
        # (b) the cooldown ignored (the oracle holds the configured one)
        ("no_cooldown", {Promise.COOLDOWN}),
        # (c) a person's stop undone: the person-stop check patched away
        ("forget_person_stops", {Promise.PERSON_STOP}),
        # and the other promises' own: an orchestrator's container touched, healed unseen
        ("ignore_owners", {Promise.SCOPE}),
        ("healed_anyway", {Promise.HEALED}),
        # the host's restarts at once: only restart calls in flight together show it
        ("ignore_max_concurrent", {Promise.AT_ONCE}),
    ],
)
def test_a_planted_bug_is_found_named_and_replayable(plant: str, promises: set[Promise]) -> None:
    report = first_found(plant)
    violation = report.failed[0]
    assert violation.promise in promises, report.explain()
    said = report.explain()
    assert violation.promise.name in said and violation.promise.value in said
    assert f"replay: python -m tests.sim --seed {report.seed} --hours 1 --plant {plant}" in said
    # The command replays it: the same seed, the same plant, the same promise broken there.
    again = simulate(report.seed, 1.0, plant)
    assert again.failed == report.failed


def test_restarts_at_once_over_the_budget_need_calls_in_flight_together(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The seed that finds the host's budget of restarts at once ignored finds nothing when
    no step runs beside a restart call in flight (as before the work queue was simulated:
    each call ran alone, inline)."""
    report = first_found("ignore_max_concurrent")
    monkeypatch.setattr(driver, "MAX_IN_FLIGHT", 0)
    alone = simulate(report.seed, 1.0, "ignore_max_concurrent")
    assert Promise.AT_ONCE not in alone.broken(), alone.explain()


def test_without_the_plant_the_same_seeds_keep_the_promise() -> None:
    """The plants' own seeds break no promise when nothing is planted (known bugs aside)."""
    for seed in range(3):
        report = simulate(seed, 1.0)
        assert not report.failed, report.explain()
