"""remediation.hooks: which hooks run after which verdict, what they are given, the config's
one-line errors, and how runs are recorded, queued, refused and stopped (a FakeHookRunner built
through bootstrap, a FakeClock, a real store)."""

from __future__ import annotations

import os
import sys
import time
from datetime import timedelta
from pathlib import Path

import pytest

from guardian.config import ConfigError
from guardian.core.model import ActionKind, ActionOutcome, Outcome, RemediationAction
from guardian.core.outbound.hook_specs import HOOK_VERDICTS, HookSpec
from guardian.core.outbound.hooks import (
    OUTPUT_LIMIT,
    ActionVerdict,
    HookEnd,
    HookRun,
    hook_environment,
    hooks_for,
)
from guardian.entrypoints.cli.status import effective_config
from guardian.readside.views import action_view, timeline_view
from guardian.service.outbound.hooks import Hooks
from tests.app import TestApp, make_app, settings_for
from tests.fakes import FakeHookRunner
from tests.helpers import wait_until

SLACK = "https://hooks.slack.com/services/T0000/B0000/hooksecretXXXXXXXXXXXX"
TOKEN = "api-token-0123456789abcdef0123456789"
ENV = {"SLACK_URL": SLACK, "GUARDIAN_API_TOKEN": TOKEN}
PY = sys.executable


def verdict(outcome: Outcome, incident: int | None = 7) -> ActionVerdict:
    return ActionVerdict("app", "a" * 64, "restart", outcome, incident)


def spec(*after: str, name: str = "h") -> HookSpec:
    return HookSpec(name, (PY,), tuple(after) or HOOK_VERDICTS)


# -- the rule ----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("outcome", "after", "runs"),
    [
        (Outcome.SUCCEEDED, (), True),  # no filter: every verdict
        (Outcome.RETRY_EXHAUSTED, (), True),
        (Outcome.SUCCEEDED, ("succeeded",), True),
        (Outcome.UNHEALTHY_AFTER_RESTART, ("succeeded",), False),
        (Outcome.UNHEALTHY_AFTER_RESTART, ("unhealthy_after_restart", "retry_exhausted"), True),
        (Outcome.PERMANENT_FAILURE, ("permanent_failure",), True),
        (Outcome.POLICY_DENIED, ("policy_denied",), True),
        # No verdict: a restart still being verified, or interrupted by Guardian's own stop.
        (Outcome.RESTARTED, (), False),
        (Outcome.INTERRUPTED, (), False),
        (Outcome.TIMED_OUT, (), False),
    ],
)
def test_a_hook_runs_after_the_verdicts_it_lists(outcome: Outcome, after: tuple[str], runs: bool):
    hooks = (spec(*after),)
    assert hooks_for(verdict(outcome), hooks) == (hooks if runs else ())


def test_hooks_run_in_the_order_the_operator_listed_them():
    hooks = (spec(name="b"), spec("retry_exhausted", name="x"), spec(name="a"))
    assert [h.name for h in hooks_for(verdict(Outcome.SUCCEEDED), hooks)] == ["b", "a"]


def test_every_verdict_is_an_outcome_of_the_history():
    assert set(HOOK_VERDICTS) <= {str(o) for o in Outcome}


def test_the_environment_is_the_verdict_a_path_and_a_locale_only():
    env = hook_environment(verdict(Outcome.SUCCEEDED), "/usr/bin:/bin")
    assert env == {
        "PATH": "/usr/bin:/bin",
        "LANG": "C.UTF-8",
        "GUARDIAN_CONTAINER": "app",
        "GUARDIAN_CONTAINER_ID": "a" * 64,
        "GUARDIAN_ACTION": "restart",
        "GUARDIAN_OUTCOME": "succeeded",
        "GUARDIAN_INCIDENT": "7",
    }
    assert hook_environment(verdict(Outcome.SUCCEEDED, None), "/bin")["GUARDIAN_INCIDENT"] == ""


# -- the config --------------------------------------------------------------------------------


def test_hooks_load_with_their_defaults_and_a_program_found_on_path(tmp_path: Path):
    program = tmp_path / "bin" / "tell-ops"
    program.parent.mkdir()
    program.write_text("#!/bin/sh\n")
    program.chmod(0o755)
    (tmp_path / "c.yaml").write_text(
        "remediation:\n  hooks:\n    - argv: [tell-ops, --now]\n"
        "    - {name: cache, argv: [/bin/sh, -c, 'exit 0'], after: succeeded, timeout: 2s}\n"
    )
    from guardian.config import load_settings

    s = load_settings(tmp_path / "c.yaml", env={"PATH": str(program.parent)})
    first, second = s["remediation.hooks"]
    assert first == HookSpec("tell-ops", (str(program), "--now"), HOOK_VERDICTS)
    assert first.timeout == timedelta(seconds=30)
    two = timedelta(seconds=2)
    assert second == HookSpec("cache", ("/bin/sh", "-c", "exit 0"), ("succeeded",), two)
    assert s["remediation.hooks_max_concurrent"] == 2 and s["remediation.hooks_max_queued"] == 32


@pytest.mark.parametrize(
    ("hooks", "message"),
    [
        ("hooks: run-me", "remediation.hooks = 'run-me': expected a list of hooks"),
        ("hooks: {argv: [/bin/sh]}", "remediation.hooks = {'argv': ['/bin/sh']}: expected a list"),
        ("hooks: [/bin/true]", "remediation.hooks[0] = '/bin/true': expected a mapping with argv"),
        ("hooks: [{argv: []}]", "remediation.hooks[0].argv = []: expected a non-empty list"),
        ("hooks: [{argv: /bin/true}]", "remediation.hooks[0].argv = '/bin/true': expected a"),
        ("hooks: [{argv: [/bin/sh, 3]}]", "remediation.hooks[0].argv[1] = 3: expected a non-"),
        ("hooks: [{name: x}]", "remediation.hooks[0].argv: required"),
        ("hooks: [{argv: [/bin/sh], shell: yes}]", "remediation.hooks[0].'shell': unknown field"),
        (
            "hooks: [{argv: [/bin/sh], after: [healed]}]",
            "remediation.hooks[0].after: 'healed' is no verdict; expected a list of succeeded,",
        ),
        (
            "hooks: [{argv: [/bin/sh], timeout: 11m}]",
            "remediation.hooks[0].timeout = '11m': expected a duration from 1s to 10m",
        ),
        ("hooks: [{argv: [/bin/sh], name: 'a b'}]", "remediation.hooks[0].name = 'a b': expected"),
        (
            "hooks: [{argv: [no-such-hook-program]}]",
            "remediation.hooks[0].argv[0] = 'no-such-hook-program': not found on PATH (/nowhere)",
        ),
        (
            "hooks: [{argv: [/etc/passwd]}]",
            "remediation.hooks[0].argv[0] = '/etc/passwd': not found an executable file",
        ),
        ("hooks_max_concurrent: 0", "remediation.hooks_max_concurrent = 0: expected an integer"),
        ("hooks_max_queued: -1", "remediation.hooks_max_queued = -1: expected an integer"),
    ],
)
def test_a_bad_hook_is_one_line_naming_the_key_the_value_and_what_is_allowed(
    tmp_path: Path, hooks: str, message: str
):
    from guardian.config import load_settings

    (tmp_path / "c.yaml").write_text(f"remediation:\n  {hooks}\n")
    with pytest.raises(ConfigError) as err:
        load_settings(tmp_path / "c.yaml", env={"PATH": "/nowhere"})
    assert message in str(err.value) and "\n" not in str(err.value)


def test_hooks_come_from_the_environment_as_json():
    from guardian.config import load_settings

    env = {"GUARDIAN_REMEDIATION_HOOKS": '[{"argv": ["/bin/sh", "-c", "true"]}]'}
    [hook] = load_settings(None, env=env)["remediation.hooks"]
    assert hook.argv == ("/bin/sh", "-c", "true") and hook.name == "sh"
    with pytest.raises(ConfigError, match="from GUARDIAN_REMEDIATION_HOOKS"):
        load_settings(None, env={"GUARDIAN_REMEDIATION_HOOKS": "[oops"})


def test_config_show_lists_hooks_with_their_arguments_redacted(tmp_path: Path):
    s = settings_for(
        tmp_path, {"remediation": {"hooks": [{"argv": ["/bin/sh", f"--token={TOKEN}"]}]}}
    )
    [shown] = effective_config(s)["remediation"]["hooks"]
    assert shown == {
        "name": "sh",
        "argv": ["/bin/sh", "--token=***"],
        "after": list(HOOK_VERDICTS),
        "timeout": "30s",
    }


# -- runs, recorded ----------------------------------------------------------------------------


def hooked(
    tmp_path: Path,
    runner: FakeHookRunner,
    *hooks: dict[str, object],
    again: TestApp | None = None,
    **remediation: object,
) -> TestApp:
    """Guardian as `guardian run` builds it, with `hooks`; `again`: a restart of that one."""
    return make_app(
        tmp_path,
        engine=again.engine if again else None,
        clock=again.clock if again else None,
        sqlite=again.store if again else None,
        daemon=True,
        env=ENV,
        hook_runner=runner,
        notify={"slack_webhook_url_env": "SLACK_URL"},
        restart={"cooldown": "2s", "stop_timeout": "1s", "verify_timeout": "30s"},
        remediation={"hooks": list(hooks) or [{"argv": [PY], "name": "tell"}], **remediation},
    )


def hook_rows(w: TestApp, ended: int = 1) -> list[RemediationAction]:
    def rows() -> list[RemediationAction]:
        found = [a for a in w.actions() if a.kind == ActionKind.HOOK]
        done = [a for a in found if a.outcome is not None]
        return found if len(done) >= ended else []

    return wait_until(rows, timeout=5, message=f"{ended} hook rows with an outcome")


def heal(w: TestApp, name: str = "app") -> None:
    w.engine.add(name, health="unhealthy")
    w.healer.sweep()
    w.clock.advance(2)
    w.verify()


def test_a_verified_restart_runs_the_hook_and_its_end_is_in_the_incident_timeline(tmp_path):
    runner = FakeHookRunner(results=[HookRun(HookEnd.EXITED, 0.2, 0, b"cache cleared\n", 14)])
    w = hooked(tmp_path, runner)
    heal(w)
    [row] = hook_rows(w)
    [incident] = w.store.open_incidents(w.host)
    assert row.incident_id == incident.id and row.outcome is Outcome.SUCCEEDED
    assert row.detail == "exit 0 after 0.2s; output: cache cleared"
    [(argv, env)] = runner.runs
    assert argv == (PY,)
    assert env["GUARDIAN_OUTCOME"] == "succeeded" and env["GUARDIAN_INCIDENT"] == str(incident.id)
    assert env["GUARDIAN_CONTAINER"] == "app" and env["GUARDIAN_CONTAINER_ID"] == w.engine.id_of(
        "app"
    )
    assert not set(env) & set(ENV)  # nothing of Guardian's own environment
    timeline = timeline_view(w.app.operator.timeline(incident))
    [entry] = [e for e in timeline if e["event"].startswith("hook")]
    assert entry["event"] == "hook: succeeded" and entry["reason"] == "tell after restart succeeded"
    assert action_view(row)["kind"] == "hook" and action_view(row)["outcome"] == "succeeded"
    assert w.metric("guardian_hook_runs_total", outcome="succeeded") == 1
    # A hook row is no restart: it costs no attempt of the budget.
    assert len(w.restarts()) == 1


def test_hostile_output_is_stored_bounded_stripped_and_redacted(tmp_path: Path):
    hostile = (
        b"\x1b[2J\x1b]0;owned\x07\x1b[31mred\x1b[0m "
        + SLACK.encode()
        + b" token="
        + TOKEN.encode()
        + b"\n\x00\x07"
    )
    cut = b"x" * (OUTPUT_LIMIT - 20) + SLACK.encode()  # the secret cut at the limit
    runner = FakeHookRunner(
        results=[
            HookRun(HookEnd.EXITED, 1.0, 3, hostile + b"y" * OUTPUT_LIMIT, 10_000_000),
            HookRun(HookEnd.EXITED, 1.0, 0, cut[:OUTPUT_LIMIT], 10_000_000),
        ]
    )
    w = hooked(tmp_path, runner, {"argv": [PY], "name": "a"}, {"argv": [PY], "name": "b"})
    heal(w)
    first, second = hook_rows(w, ended=2)
    for row in (first, second):
        assert SLACK not in row.detail and "hooksecret" not in row.detail
        assert not any(ord(c) < 32 or 0x7F <= ord(c) < 0xA0 for c in row.detail)
        assert len(row.detail) < OUTPUT_LIMIT + 200
        assert f"output cut to its first {OUTPUT_LIMIT} of 10000000 bytes" in row.detail
    assert TOKEN not in first.detail and "owned" not in first.detail
    assert first.outcome is Outcome.FAILED and first.detail.startswith("exit 3 after 1.0s")
    assert "red" in first.detail
    assert second.detail.rstrip("…").endswith("***")


def test_a_hook_runs_after_giving_up_once(tmp_path: Path):
    runner = FakeHookRunner()
    w = hooked(tmp_path, runner, {"argv": [PY], "after": ["retry_exhausted"]})
    w.engine.add("bad", health="unhealthy")
    w.engine.after_restart_health = "unhealthy"
    for _ in range(12):
        w.healer.sweep()
        w.clock.advance(1)
        w.verify()
        w.clock.advance(2)
    [row] = hook_rows(w)
    assert [env["GUARDIAN_OUTCOME"] for _, env in runner.runs] == ["retry_exhausted"]
    assert row.reason.endswith("after restart retry_exhausted")


def test_a_failed_restart_call_is_a_verdict_too(tmp_path: Path):
    runner = FakeHookRunner()
    w = hooked(tmp_path, runner)
    w.engine.restart_outcomes = [ActionOutcome(Outcome.PERMANENT_FAILURE, "no such container")]
    w.engine.add("app", health="unhealthy")
    w.healer.sweep()
    hook_rows(w)
    assert [env["GUARDIAN_OUTCOME"] for _, env in runner.runs] == ["permanent_failure"]


def test_beyond_the_concurrency_hooks_queue_and_beyond_the_queue_they_are_refused(tmp_path):
    runner = FakeHookRunner(hold=True)
    w = hooked(tmp_path, runner, hooks_max_concurrent=1, hooks_max_queued=1)
    hooks = w.app.hooks
    assert hooks is not None
    started = time.monotonic()
    for _ in range(3):
        hooks.reached(verdict(Outcome.SUCCEEDED, None))
    assert time.monotonic() - started < 1  # the verdict's thread never waits for a hook
    wait_until(lambda: runner.running == 1, timeout=5)
    [refused] = [a for a in w.actions() if a.outcome is not None]
    assert refused.outcome is Outcome.POLICY_DENIED and refused.detail.startswith("refused: 1 hook")
    assert w.metric("guardian_hook_runs_total", outcome="policy_denied") == 1
    runner.release()
    rows = hook_rows(w, ended=3)
    assert [a.outcome for a in rows] == [
        Outcome.SUCCEEDED,
        Outcome.SUCCEEDED,
        Outcome.POLICY_DENIED,
    ]
    assert len(runner.runs) == 2


def test_a_stop_interrupts_running_and_queued_hooks_without_waiting_for_them(tmp_path: Path):
    runner = FakeHookRunner(hold=True)
    w = hooked(tmp_path, runner, hooks_max_concurrent=1)
    hooks = w.app.hooks
    assert hooks is not None
    hooks.reached(verdict(Outcome.SUCCEEDED, None))
    hooks.reached(verdict(Outcome.SUCCEEDED, None))
    wait_until(lambda: runner.running == 1, timeout=5)
    started = time.monotonic()
    hooks.stop()
    assert time.monotonic() - started < 1
    rows = hook_rows(w, ended=2)
    assert [a.outcome for a in rows] == [Outcome.INTERRUPTED, Outcome.INTERRUPTED]
    assert rows[1].detail == "not run: Guardian stopped"
    hooks.reached(verdict(Outcome.SUCCEEDED, None))  # a verdict during the stop: not run
    assert hook_rows(w, ended=3)[2].outcome is Outcome.INTERRUPTED
    assert len(runner.runs) == 1


def test_a_hook_row_left_by_a_crash_is_interrupted_at_the_next_start(tmp_path: Path):
    runner = FakeHookRunner(hold=True)
    w = hooked(tmp_path, runner)
    heal(w)
    wait_until(lambda: runner.running == 1, timeout=5)
    w = hooked(tmp_path, FakeHookRunner(), again=w)  # the first one died with its hook running
    w.verify()
    w.app.verifier.reconcile()
    [row] = hook_rows(w)
    assert row.outcome is Outcome.INTERRUPTED
    runner.release()


class BrokenRunner(FakeHookRunner):
    def run(self, *args: object, **kwargs: object) -> HookRun:
        raise RuntimeError("boom")


def test_a_broken_runner_never_reaches_the_loop(tmp_path: Path):
    w = hooked(tmp_path, BrokenRunner())
    heal(w)  # no exception from the verification
    [row] = hook_rows(w)
    assert row.outcome is Outcome.FAILED and row.detail == "not run: RuntimeError"
    [incident] = w.store.open_incidents(w.host)
    assert incident.resolved_by == "guardian"


def test_only_guardian_run_runs_hooks(tmp_path: Path):
    w = make_app(tmp_path, remediation={"hooks": [{"argv": [PY]}]})  # guardian check, status
    assert w.app.hooks is None and w.healer.ctx.pipeline.verdicts == ()
    assert isinstance(hooked(tmp_path / "d", FakeHookRunner()).app.hooks, Hooks)
    assert os.path.isabs(PY)


def test_an_unconfirmed_restart_seen_healthy_runs_its_hooks_once_across_a_restart_of_guardian(
    tmp_path: Path,
) -> None:
    """The call timed out after sending and the container turned healthy without a start the
    engine shows: the verdict is `unknown` ("observed healthy, but the restart was not
    confirmed"), and its hooks run. A Guardian started again while the engine might still have
    carried the call out took the same outcome for a call still unanswered, verified it again
    and ran the hooks a second time."""
    runner = FakeHookRunner()
    w = hooked(tmp_path, runner)
    w.engine.add("app", health="unhealthy")
    w.engine.restart_outcomes = [ActionOutcome(Outcome.UNKNOWN, "timed out after sending")]
    w.healer.sweep()
    w.engine.set("app", health="healthy")  # no start since the request
    w.clock.advance(1)
    w.verify()
    [intent] = w.restarts()
    assert intent.outcome is Outcome.UNKNOWN
    assert len([a for a in w.actions() if a.kind == ActionKind.HOOK]) == 1
    again = hooked(tmp_path, runner, again=w)  # within the stop timeout and verify_timeout
    again.app.verifier.reconcile()
    again.verify()
    assert len([a for a in again.actions() if a.kind == ActionKind.HOOK]) == 1, "hooks ran twice"
