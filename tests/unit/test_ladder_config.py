"""The escalation ladder as the operator writes it (restart.escalate, restart.escalate_ask) and as
a container's label may narrow it (guardian.escalate): labels only leave rungs out
(docs/design.md rule 14)."""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path

import pytest

from guardian.config.settings import ConfigError, load_settings
from guardian.core import labels as L
from guardian.core.detection.restart_policy import RestartPolicy

BASE = RestartPolicy(escalate=("recreate", "stop"))


def rules(value: str, base: RestartPolicy = BASE) -> L.ContainerRules:
    labels = {"guardian.enable": "true", L.ESCALATE: value}
    return L.rules_for(labels, base, timedelta(seconds=10), "guardian.enable")


def test_the_ladder_is_off_unless_the_operator_configures_it() -> None:
    assert load_settings(None, env={}).restart_policy().escalate == ()


def test_the_operators_ladder_is_read_in_the_ladders_order(tmp_path: Path) -> None:
    path = tmp_path / "config.yaml"
    path.write_text("restart:\n  escalate: [stop, recreate]\n  escalate_ask: [recreate]\n")
    policy = load_settings(path, env={}).restart_policy()
    assert (policy.escalate, policy.escalate_ask) == (("recreate", "stop"), ("recreate",))


@pytest.mark.parametrize(
    ("body", "error"),
    [
        (
            "restart:\n  escalate: [reboot]\n",
            "restart.escalate = ['reboot']: expected a list of rollback, recreate, stop (or empty)",
        ),
        (
            "restart:\n  escalate: [stop]\n  escalate_ask: [recreate]\n",
            "restart.escalate_ask = recreate: recreate is not a rung of restart.escalate (stop)",
        ),
    ],
)
def test_a_ladder_guardian_cannot_climb_is_one_line_naming_the_key(
    tmp_path: Path, body: str, error: str
) -> None:
    path = tmp_path / "config.yaml"
    path.write_text(body)
    with pytest.raises(ConfigError) as refused:
        load_settings(path, env={})
    assert str(refused.value) == error


@pytest.mark.parametrize(
    ("value", "ladder"),
    [
        ("recreate", ("recreate",)),
        ("stop", ("stop",)),
        ("none", ()),
        ("stop, recreate", BASE.escalate),
    ],
)
def test_a_label_may_leave_rungs_out(value: str, ladder: tuple[str, ...]) -> None:
    r = rules(value)
    assert (r.policy.escalate, r.warnings) == (ladder, ())


def test_a_label_that_adds_a_rung_is_ignored_with_a_warning() -> None:
    r = rules("recreate,stop", RestartPolicy(escalate=("stop",)))
    assert r.policy.escalate == ("stop",)
    assert r.warnings == (
        "label guardian.escalate='recreate,stop': recreate ignored: restart.escalate allows "
        "stop; a label may only leave rungs out",
    )


def test_a_label_cannot_turn_on_a_ladder_the_operator_left_off() -> None:
    r = rules("recreate", RestartPolicy())
    assert r.policy.escalate == ()
    assert "recreate ignored: restart.escalate allows none" in r.warnings[0]


def test_a_label_of_unknown_rungs_is_one_bounded_warning() -> None:
    r = rules("reboot " + "x" * 5000)
    assert r.policy.escalate == ()
    assert r.warnings == (
        f"label guardian.escalate={('reboot ' + 'x' * 33)!r}: expected rungs among rollback, "
        "recreate, stop, or none",
    )
