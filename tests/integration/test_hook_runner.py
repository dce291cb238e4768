"""SubprocessHookRunner with real processes: exit statuses, bounded output, the process group
killed at the timeout, at stop() and when the hook exits, with and without pidfd_open."""

from __future__ import annotations

import threading
import time
from datetime import timedelta
from pathlib import Path

import pytest

from guardian.adapters import hook_runner
from guardian.adapters.hook_runner import SubprocessHookRunner
from guardian.core.outbound.hooks import OUTPUT_LIMIT, HookEnd
from tests.helpers import wait_until
from tests.integration.hook_helpers import group_gone, read_pid

SH = "/bin/sh"
SECOND = timedelta(seconds=1)


@pytest.fixture(params=["pidfd", "poll"])
def runner(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> SubprocessHookRunner:
    if request.param == "poll":  # kernels before 5.3 have no pidfd_open
        monkeypatch.setattr(hook_runner, "_pidfd", lambda pid: None)
    return SubprocessHookRunner()


def test_exit_status_output_and_nothing_but_the_given_environment(runner):
    run = runner.run([SH, "-c", "echo out; echo err >&2; env; exit 3"], {"A": "1"}, 5 * SECOND)
    assert run.end is HookEnd.EXITED and run.exit_code == 3
    lines = run.output.decode().splitlines()
    assert lines[:2] == ["out", "err"] and "A=1" in lines
    assert not [x for x in lines[2:] if x.split("=")[0] not in ("A", "PWD", "SHLVL", "_")]


def test_a_signal_ends_a_hook_with_a_negative_status(runner):
    run = runner.run([SH, "-c", "kill -9 $$"], {}, 5 * SECOND)
    assert run.end is HookEnd.EXITED and run.exit_code == -9


def test_output_is_kept_to_its_first_bytes_and_the_rest_drained(runner):
    run = runner.run([SH, "-c", "head -c 10000000 /dev/zero | tr '\\0' x"], {}, 10 * SECOND)
    assert run.end is HookEnd.EXITED and run.exit_code == 0
    assert run.output == b"x" * OUTPUT_LIMIT and run.output_size == 10_000_000
    assert run.seconds < 5


def test_at_its_timeout_the_whole_group_is_killed(runner, tmp_path: Path):
    pids = tmp_path / "pids"
    started = time.monotonic()
    run = runner.run([SH, "-c", f"sleep 600 & echo $$ > {pids}; sleep 600"], {}, 2 * SECOND)
    assert run.end is HookEnd.TIMED_OUT and 2 <= time.monotonic() - started < 3.5
    assert group_gone(read_pid(pids))


def test_a_hook_that_closes_its_output_still_ends_at_its_timeout(runner):
    run = runner.run([SH, "-c", "exec >&- 2>&-; sleep 600"], {}, SECOND)
    assert run.end is HookEnd.TIMED_OUT and run.seconds < 3


def test_what_a_hook_leaves_running_in_its_group_ends_with_it(runner, tmp_path: Path):
    pids = tmp_path / "pids"
    run = runner.run(
        [SH, "-c", f"sleep 600 >/dev/null 2>&1 & echo $$ > {pids}; exit 0"], {}, 5 * SECOND
    )
    assert run.end is HookEnd.EXITED and run.exit_code == 0 and run.seconds < 3
    assert group_gone(read_pid(pids))


def test_stop_kills_running_hooks_at_once_and_refuses_new_ones(runner, tmp_path: Path):
    pids = tmp_path / "pids"
    results = []
    thread = threading.Thread(
        target=lambda: results.append(
            runner.run([SH, "-c", f"echo $$ > {pids}; sleep 600"], {}, timedelta(minutes=10))
        )
    )
    thread.start()
    pgid = read_pid(pids)
    started = time.monotonic()
    runner.stop()
    thread.join(5)
    assert time.monotonic() - started < 1
    [run] = results
    assert run.end is HookEnd.INTERRUPTED and group_gone(pgid)
    later = runner.run([SH, "-c", "exit 0"], {}, SECOND)
    assert later.end is HookEnd.INTERRUPTED and later.error == "Guardian stopped"


@pytest.mark.parametrize("argv", [["/nonexistent/hook"], ["/etc/passwd"]])
def test_a_program_that_cannot_start_is_not_started(runner, argv: list[str]):
    run = runner.run(argv, {}, SECOND)
    assert run.end is HookEnd.NOT_STARTED and run.error and "\n" not in run.error


def test_many_hooks_at_once_each_end_on_their_own(runner):
    results: list[object] = []
    threads = [
        threading.Thread(
            target=lambda i=i: results.append(runner.run([SH, "-c", f"exit {i}"], {}, 5 * SECOND))
        )
        for i in range(8)
    ]
    for t in threads:
        t.start()
    for t in threads:
        t.join(10)
    wait_until(lambda: len(results) == 8, 5)
    assert sorted(r.exit_code for r in results) == list(range(8))  # type: ignore[attr-defined]
