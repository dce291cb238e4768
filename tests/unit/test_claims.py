"""A restart claim ends exactly once on every path: released, or handed over to verification,
whether the engine call returns, fails or raises, here or on a restart thread, and whatever
fails before the call is handed over."""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Callable
from datetime import datetime, timedelta
from pathlib import Path

import pytest

from guardian.adapters.sqlite.store import SqliteStore
from guardian.core.model import ActionOutcome, Outcome
from guardian.service.state.state import LoopState
from tests.app import make_app
from tests.fakes import FakeClock

Call = Callable[[], None]


class IntentsRefused(SqliteStore):
    """A store that cannot write a restart's intent (a full disk), and answers everything else."""

    def record_intent(self, *args, **kwargs):  # type: ignore[no-untyped-def]
        raise OSError("disk full")


class OnThreads:
    """Restart calls on threads other than the deciding one (the sweep's, in the daemon)."""

    def __init__(self) -> None:
        self.threads: list[threading.Thread] = []

    def run(self, call: Call, slot_until: datetime | None, key: str) -> None:
        def quietly() -> None:
            with contextlib.suppress(RuntimeError):  # the daemon logs it
                call()

        self.threads.append(threading.Thread(target=quietly))
        self.threads[-1].start()


class Refused:
    """Restart threads that refuse every call: Guardian is stopping."""

    def run(self, call: Call, slot_until: datetime | None, key: str) -> None:
        raise RuntimeError("restart threads closed: Guardian is stopping")


# (what happens, what the restart call raises out of react, verifying afterwards)
PATHS = [
    ("the engine call raises", RuntimeError, False),
    ("the engine call raises on a restart thread", None, False),
    ("the intent cannot be written", OSError, False),
    ("the restart threads refuse the call", RuntimeError, False),
    ("the call returns after Guardian stopped", None, False),
    ("the engine refuses the restart", None, False),
    ("the engine restarts it", None, True),
]


@pytest.mark.parametrize(("path", "raises", "verifying"), PATHS, ids=[p[0] for p in PATHS])
def test_a_claim_ends_exactly_once_on_every_path(
    tmp_path: Path, path: str, raises: type[BaseException] | None, verifying: bool
) -> None:
    sqlite = IntentsRefused(str(tmp_path / "guardian.db")) if "intent" in path else None
    on_threads = OnThreads()
    calls = Refused() if "refuse the call" in path else on_threads if "thread" in path else None
    w = make_app(tmp_path, restart={"cooldown": "1s"}, sqlite=sqlite, restart_calls=calls)
    w.engine.add("web", health="unhealthy")
    state = w.healer.ctx.state
    if "raises" in path:
        w.engine.restart_raises = RuntimeError("the engine call broke")
    if "stopped" in path:
        state.claims.stop_recording()
    if "refuses the restart" in path:
        w.engine.restart_outcomes.append(ActionOutcome(Outcome.POLICY_DENIED, "403"))
    before = state.epoch_of("web")
    if raises is not None:
        with pytest.raises(raises):
            w.healer.react(w.engine.id_of("web"))
    else:
        w.healer.react(w.engine.id_of("web"))
    for thread in on_threads.threads:
        thread.join(10)
    # Claimed, then ended once: one step each (a second end would be a third).
    assert state.epoch_of("web") == before + 2
    assert not state.claims.running("web") and state.claims.slots_held(w.clock.now()) == 0
    assert state.verifications.verifying("web") is verifying
    assert state.claims.longest_stop() == timedelta(0)


def test_a_restart_claimed_again_after_an_engine_error_is_restarted(tmp_path: Path) -> None:
    w = make_app(tmp_path, restart={"cooldown": "1s"})
    w.engine.add("web", health="unhealthy")
    w.engine.restart_raises = RuntimeError("the engine call broke")
    with pytest.raises(RuntimeError):
        w.healer.react(w.engine.id_of("web"))
    w.engine.restart_raises = None
    w.clock.advance(2)  # past the cooldown the broken attempt counts for
    w.healer.react(w.engine.id_of("web"))
    assert w.restarted() == ["web", "web"]


def test_ending_a_claim_twice_ends_it_once_and_never_a_newer_claim() -> None:
    claims = LoopState(FakeClock()).claims
    first = claims.claim("web", timedelta(seconds=10))
    assert first.release() and not first.release()
    second = claims.claim("web")
    assert not first.release()  # late, from the first call's thread
    assert claims.running("web") and second.release() and not claims.running("web")


def test_a_block_that_raises_releases_its_claim() -> None:
    claims = LoopState(FakeClock()).claims
    with pytest.raises(OSError), claims.claim("web"):
        raise OSError("the store failed before the call was handed over")
    assert not claims.running("web")


def test_a_claim_passed_on_with_its_call_is_ended_by_the_call_on_its_thread() -> None:
    claims = LoopState(FakeClock()).claims
    started, go = threading.Event(), threading.Event()

    def call() -> None:
        started.set()
        go.wait(10)
        raise RuntimeError("the engine call broke")

    with claims.claim("web") as claim:
        carried = claim.carried_by(call)

        def run() -> None:
            with contextlib.suppress(RuntimeError):  # the daemon logs it
                carried()

        thread = threading.Thread(target=run)
        thread.start()
    started.wait(10)
    assert claims.running("web")  # the block ended; the call still holds it
    go.set()
    thread.join(10)
    assert not claims.running("web") and claim.ended
