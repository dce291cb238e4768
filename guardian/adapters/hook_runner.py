"""Hooks as processes: argv without a shell, exactly the environment given, a session and process
group of their own that is killed whole at the timeout or at Guardian's stop, output read bounded.
"""

from __future__ import annotations

import contextlib
import os
import selectors
import signal
import subprocess
import time
import weakref
from collections.abc import Callable, Mapping, Sequence
from datetime import timedelta

from guardian.core.outbound.hooks import OUTPUT_LIMIT, HookEnd, HookRun

READ_CHUNK = 64 * 1024
POLL = 0.1  # seconds between looks at the process where the kernel has no pidfd_open (< 5.3)
REAP_WAIT = 5.0  # seconds to reap a killed leader (a process in uninterruptible sleep lingers)
DRAIN_READS = 16  # reads of what is left in the pipe once the hook has exited


def _kill_group(pgid: int) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pgid, signal.SIGKILL)


class SubprocessHookRunner:
    """The HookRunner port over subprocess. A hook's group is killed by the hook's own thread,
    while its leader is not yet reaped, so the group id cannot have been reused by an unrelated
    process meanwhile.

    Keeps no lock: stop() sets a flag and writes once to a pipe that every hook's wait selects
    on, readable from then on; each hook's thread then ends its own hook (killed, reaped, said
    interrupted). A hook started as stop() comes finds the pipe readable at its first wait and
    is killed at once; one asked for after it never starts."""

    def __init__(
        self, output_limit: int = OUTPUT_LIMIT, monotonic: Callable[[], float] = time.monotonic
    ) -> None:
        self.output_limit = output_limit
        self._monotonic = monotonic
        self._stopped = False
        # Readable once stop() wrote to it; never read, so it stays readable for every wait.
        self._stop_r, self._stop_w = os.pipe()
        weakref.finalize(self, _close, self._stop_r, self._stop_w)

    def stop(self) -> None:
        if self._stopped:
            return
        self._stopped = True
        with contextlib.suppress(OSError):
            os.write(self._stop_w, b"x")

    def run(self, argv: Sequence[str], env: Mapping[str, str], timeout: timedelta) -> HookRun:
        started = self._monotonic()
        if self._stopped:
            return HookRun(HookEnd.INTERRUPTED, 0.0, error="Guardian stopped")
        try:
            proc = subprocess.Popen(
                list(argv),
                env=dict(env),
                cwd="/",
                stdin=subprocess.DEVNULL,
                stdout=subprocess.PIPE,
                stderr=subprocess.STDOUT,
                start_new_session=True,
                close_fds=True,
            )
        except (OSError, ValueError, subprocess.SubprocessError) as exc:
            error = " ".join(str(exc).split())[:300]
            return HookRun(HookEnd.NOT_STARTED, self._monotonic() - started, error=error)
        try:
            end, output, size = self._follow(proc, started + timeout.total_seconds())
        finally:
            # What the hook left running in its group ends with it; the timed-out or
            # interrupted hook itself too. On this thread, before the leader is reaped.
            _kill_group(proc.pid)
            with contextlib.suppress(subprocess.TimeoutExpired):
                proc.wait(REAP_WAIT)
            if proc.stdout is not None:
                proc.stdout.close()
        return HookRun(
            end,
            self._monotonic() - started,
            exit_code=proc.returncode if end is HookEnd.EXITED else None,
            output=bytes(output),
            output_size=size,
        )

    def _follow(
        self, proc: subprocess.Popen[bytes], deadline: float
    ) -> tuple[HookEnd, bytearray, int]:
        """Read the output until the leader exits, the deadline passes or stop() kills it."""
        assert proc.stdout is not None
        out = proc.stdout.fileno()
        os.set_blocking(out, False)
        kept, size = bytearray(), 0

        def read() -> bool:
            """Read what the pipe holds now; False at its end."""
            nonlocal size
            try:
                chunk = os.read(out, READ_CHUNK)
            except BlockingIOError:
                return True
            if not chunk:
                return False
            size += len(chunk)
            if len(kept) < self.output_limit:
                kept.extend(chunk[: self.output_limit - len(kept)])
            return True

        pidfd = _pidfd(proc.pid)
        try:
            with selectors.DefaultSelector() as sel:
                sel.register(out, selectors.EVENT_READ, "out")
                sel.register(self._stop_r, selectors.EVENT_READ, "stop")
                if pidfd is not None:
                    sel.register(pidfd, selectors.EVENT_READ, "exit")
                while True:
                    remaining = deadline - self._monotonic()
                    if remaining <= 0:
                        return HookEnd.TIMED_OUT, kept, size
                    wait = remaining if pidfd is not None else min(remaining, POLL)
                    exited = False
                    for key, _ in sel.select(wait):
                        if key.data == "out" and not read():
                            sel.unregister(out)
                        elif key.data == "exit":
                            exited = True
                        elif key.data == "stop":
                            return HookEnd.INTERRUPTED, kept, size  # run() kills its group
                    if exited or (pidfd is None and _exited(proc.pid)):
                        # A child that escaped the group may hold the pipe: read what is
                        # there, wait for nothing more.
                        for _ in range(DRAIN_READS):
                            if not read():
                                break
                        end = HookEnd.INTERRUPTED if self._stopped else HookEnd.EXITED
                        return end, kept, size
        finally:
            if pidfd is not None:
                os.close(pidfd)


def _close(*fds: int) -> None:
    for fd in fds:
        with contextlib.suppress(OSError):
            os.close(fd)


def _pidfd(pid: int) -> int | None:
    """A descriptor readable once `pid` exits (Linux 5.3+), or None: then poll."""
    try:
        return os.pidfd_open(pid)
    except (AttributeError, OSError):
        return None


def _exited(pid: int) -> bool:
    """Whether `pid` has exited, without reaping it (its group id stays reserved)."""
    try:
        status = os.waitid(os.P_PID, pid, os.WEXITED | os.WNOHANG | os.WNOWAIT)
    except ChildProcessError:
        return True
    return status is not None
