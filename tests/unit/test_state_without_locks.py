"""The loop's per-container parts that keep no lock (issue 65: state touched on its container's
turn, one operation at a time): what each access promises when another thread's write falls
between two of its steps, written as the interleaving a thread switch can make."""

from __future__ import annotations

import contextlib
import itertools
import logging
import re
import subprocess
import sys
import threading
import time
from collections import Counter, deque
from collections.abc import Callable, Iterator
from dataclasses import replace
from datetime import datetime, timedelta
from email.utils import format_datetime
from pathlib import Path
from typing import Any, cast

import pytest
from prometheus_client import CollectorRegistry

from guardian.adapters import hook_runner
from guardian.adapters.engine.docker_engine import CONNECTED, DockerEngine
from guardian.adapters.engine.engine_clock import ANSWERS, EngineClock
from guardian.adapters.engine.light_http import LightHttp, _UnixConnection
from guardian.adapters.hook_runner import SubprocessHookRunner
from guardian.adapters.prometheus import PrometheusMetrics
from guardian.adapters.run_stamps import RunStamps
from guardian.core.detection.probes import ProbeSpec
from guardian.core.detection.resources import MEMORY, Limit
from guardian.core.detection.usage import Usage
from guardian.core.detection.windows import MaintenanceWindow, from_label
from guardian.core.facts import Fact, SilenceLifted, SilenceSet
from guardian.core.model import (
    ContainerSnapshot,
    HealthCheckResult,
    ProblemType,
    RemediationAction,
    Silence,
)
from guardian.core.outbound.hooks import HookEnd, HookRun
from guardian.entrypoints.page.feed import Feed
from guardian.entrypoints.page.slots import StreamSlots
from guardian.entrypoints.page.stream import Stream
from guardian.ports import Engine, EngineEvent, EngineIdentity, Store
from guardian.readside.changes import Changes
from guardian.service.facts import FactStream
from guardian.service.healing.dependencies import Dependencies
from guardian.service.healing.namespaces import Namespaces
from guardian.service.healing.written import LoopStore
from guardian.service.operator import NotFound, Operator
from guardian.service.state import quiet
from guardian.service.state.listing import Listed
from guardian.service.state.person_stops import PersonStops
from guardian.service.state.present import drop_absent
from guardian.service.state.quiet import FOREVER, QuietRow, QuietRows
from guardian.service.state.state import (
    Approvals,
    HealthyStreaks,
    LoopState,
    NotificationRouting,
)
from guardian.service.watchers.crash_loops import CrashLoops, CrashLoopSettings
from guardian.service.watchers.prober import Prober
from guardian.service.watchers.prober import _Target as ProbeTarget
from guardian.service.watchers.resources import ResourceWatch
from guardian.service.watchers.resources import _Target as ResourceTarget
from tests.fakes import T0, FakeClock
from tests.helpers import wait_until
from tests.integration.hook_helpers import group_gone


@pytest.fixture
def fast_switches() -> Iterator[None]:
    """Threads switch between almost any two bytecodes (CPython's default: every 5 ms)."""
    was = sys.getswitchinterval()
    sys.setswitchinterval(1e-6)
    try:
        yield
    finally:
        sys.setswitchinterval(was)


# -- narrowing in place -----------------------------------------------------------------------


def test_drop_absent_narrows_in_place_and_keeps_what_is_present() -> None:
    entries = {"a": 1, "gone": 2, "b": 3}
    drop_absent(entries, {"a", "b", "c"})
    assert entries == {"a": 1, "b": 3}


class SetsDuringCopy(dict[str, str]):
    """A dict whose keys are copied while another thread sets one (the moment a narrowing by
    rebuild would lose it)."""

    def __iter__(self) -> Any:
        keys = list(super().__iter__())
        self["db"] = "new-id"  # the worker's write, between the sweep's two steps
        return iter(keys)


def test_an_approval_set_while_the_sweep_narrows_is_kept() -> None:
    approvals = Approvals()
    approvals._awaited = SetsDuringCopy(web="web-id", gone="gone-id")  # noqa: SLF001
    approvals.keep_only({"web", "db"})
    assert approvals.awaited() == {"web": "web-id", "db": "new-id"}


# -- healthy streaks --------------------------------------------------------------------------


def test_a_streak_begins_once_and_its_reset_check_is_taken_once() -> None:
    clock = FakeClock()
    streaks = HealthyStreaks(clock)
    began = streaks.seen_healthy("web", clock.now())
    clock.advance(30)
    assert streaks.seen_healthy("web", clock.now()) == began  # the streak goes on
    assert streaks.first_reset_check("web", began)
    assert not streaks.first_reset_check("web", began)  # a second thread's ask: already taken
    assert streaks.quiet_until("web", timedelta(minutes=10)) is not None
    streaks.ended("web")
    again = streaks.seen_healthy("web", clock.now())
    assert again > began and streaks.first_reset_check("web", again)  # a new streak, a new check


def test_narrowing_the_streaks_drops_only_the_absent() -> None:
    clock = FakeClock()
    streaks = HealthyStreaks(clock)
    for name in ("web", "gone"):
        streaks.first_reset_check(name, streaks.seen_healthy(name, clock.now()))
    streaks.keep_only({"web"})
    assert streaks.quiet_until("gone", timedelta(minutes=10)) is None
    assert streaks.quiet_until("web", timedelta(minutes=10)) is not None


# -- routing ----------------------------------------------------------------------------------


def test_a_containers_routing_is_one_pair_set_whole() -> None:
    routing = NotificationRouting()
    routing.update("web", muted=False, receivers=("team-a",))
    routing.update("web", muted=True, receivers=())
    assert routing.muted("web") and routing.receivers_of("web") == ()
    routing.update("web", muted=False, receivers=())
    assert not routing.muted("web") and routing.receivers_of("web") == ()


# -- a person's stops -------------------------------------------------------------------------


class WatchesHolds(set[str]):
    """The stopped ids; on the discard, asks holds() as a worker between the event thread's
    two writes would."""

    def __init__(self, stops: PersonStops, seen: list[bool]) -> None:
        super().__init__()
        self.stops, self.seen = stops, seen

    def discard(self, item: object) -> None:
        super().discard(item)
        self.seen.append(self.stops.holds(str(item)))


def test_a_removed_container_is_held_at_every_moment_of_its_removal() -> None:
    stops = PersonStops()
    seen: list[bool] = []
    stops._ids = WatchesHolds(stops, seen)  # noqa: SLF001
    stops.stopped("c1")
    stops.removed("c1")
    assert seen == [True] and stops.holds("c1")


def test_an_unkept_stop_is_new_once_and_holds_its_latest_time() -> None:
    stops = PersonStops()
    assert stops.unkept("c1", "web", T0)
    assert not stops.unkept("c1", "web", T0 + timedelta(seconds=5))
    assert stops.to_keep() == [("c1", "web", T0 + timedelta(seconds=5))]
    stops.kept("c1")
    assert stops.to_keep() == []


def test_the_crashes_keep_the_newest() -> None:
    stops = PersonStops()
    stops.MAX_CRASHES = 2
    for i, cid in enumerate(("a", "b", "a", "c")):
        stops.crashed(cid, T0 + timedelta(seconds=i))
    assert stops.read_as_crash("a", T0 + timedelta(seconds=2))
    assert stops.read_as_crash("c", T0 + timedelta(seconds=3))
    assert not stops.read_as_crash("b", T0 + timedelta(seconds=1))  # the oldest, evicted


# -- dependencies -----------------------------------------------------------------------------


def container(name: str, **labels: str) -> ContainerSnapshot:
    return ContainerSnapshot(
        id=f"{name}-id", name=name, labels=labels, state="running", health="healthy"
    )


class Taught:
    """Namespaces as Dependencies asks them: what an inspect taught (None: nothing) stays
    until a sweep's follow takes it."""

    def __init__(self) -> None:
        self.edges: dict[str, list[tuple[str, str]]] | None = None

    def told_more(self) -> bool:
        return self.edges is not None

    def learned(self) -> dict[str, list[tuple[str, str]]] | None:
        return self.edges

    def follow(self, _snapshots: list[ContainerSnapshot]) -> dict[str, list[tuple[str, str]]]:
        edges, self.edges = self.edges or {}, None
        return edges

    def orphaned(self, _container_id: str) -> bool:
        return False


def test_a_graph_rebuilt_from_a_replaced_view_is_not_used_and_nothing_taught_is_lost() -> None:
    ns = Taught()
    deps = Dependencies(None, None, "h", ns)  # type: ignore[arg-type]
    vpn, app = container("vpn"), container("app")
    deps.follow(Listed([vpn, app], [vpn, app], True))
    assert deps.followers("vpn", "vpn") == ()
    ns.edges = {"app": [("vpn", "network")]}  # an inspect of app taught its network's leader
    assert deps.followers("vpn", "vpn") == (("app-id", "network"),)
    assert deps.graph.depends_on("app") == ["vpn"]
    # A sweep swaps another view in: the pair rebuilt from the old one is no longer used, and
    # the new view was built with what was taught.
    db = container("db")
    deps.follow(Listed([vpn, app, db], [vpn, app, db], True))
    assert deps.graph.depends_on("app") == ["vpn"]
    assert deps.followers("vpn", "vpn") == (("app-id", "network"),)


# -- probes -----------------------------------------------------------------------------------

PROBE = ProbeSpec("http", "", 0, period=timedelta(seconds=10), timeout=timedelta(seconds=2))
PROBED = {"guardian.enable": "true", "guardian.probe.tcp": ":80"}


def probed(name: str, **labels: str) -> ContainerSnapshot:
    return ContainerSnapshot(
        f"{name}-id", name, {**PROBED, **labels}, "running", None, addresses=("10.0.0.7",)
    )


class Scripted:
    """A probe runner that answers from a script, at once."""

    def __init__(self, *answers: tuple[bool, str]) -> None:
        self.answers = list(answers)

    def run(self, _spec: ProbeSpec, _address: str) -> tuple[bool, str]:
        return self.answers.pop(0)


class JudgedAtEachWrite(ProbeTarget):
    """A target that asks `hook` (a worker's judge) after every single write made to it: the
    moments a thread switch can put a judge between two of the tick's writes."""

    hook: Callable[[], None] | None = None

    def __setattr__(self, name: str, value: object) -> None:
        super().__setattr__(name, value)
        if self.hook is not None:
            self.hook()


def probe_round(prober: Prober, clock: FakeClock) -> list[str]:
    """A tick that starts the due probe, its answer, the tick that takes it; then a period."""
    assert prober.tick() == []
    wait_until(lambda: prober.in_flight() == 0, 10, 0.01, "the probe answered")
    flips = prober.tick()
    clock.advance(PROBE.period.total_seconds())
    return flips


def test_a_judge_between_any_two_writes_of_the_tick_sees_one_verdict_whole() -> None:
    clock = FakeClock()
    runner = Scripted((False, "refused"), (True, "200 OK"), (False, "reset"), (True, "200 OK"))
    prober = Prober(clock, runner, PROBE)
    web = probed("web", **{"guardian.probe.failure_threshold": "1"})
    prober.update([web])
    kept = prober._targets["web"]  # noqa: SLF001
    target = JudgedAtEachWrite(kept.spec, kept.container_id, kept.address, kept.next_due)
    prober._targets = {"web": target}  # noqa: SLF001
    fine = HealthCheckResult(web.id, web.name, clock.now())
    seen: list[HealthCheckResult] = []
    target.hook = lambda: seen.append(prober.judge(web, fine))
    flips = [probe_round(prober, clock) for _ in range(4)]
    assert flips == [["web-id"]] * 4
    failing = [r for r in seen if r.problem is ProblemType.PROBE_FAILED]
    assert failing and len(failing) < len(seen)  # both verdicts were seen
    assert all(r.detail.startswith("probe failed 1 times in a row: ") for r in failing)


def test_an_answer_is_taken_once_and_a_late_one_after_its_timeout_never() -> None:
    clock = FakeClock()
    prober = Prober(clock, Scripted((False, "refused"), (False, "refused")), PROBE)
    prober.update([probed("web", **{"guardian.probe.failure_threshold": "2"})])
    assert probe_round(prober, clock) == []  # one failure of two
    assert prober.tick() == []  # the answer was taken: a second tick counts it no more
    wait_until(lambda: prober.in_flight() == 0, 10, 0.01, "the probe answered")
    # The second probe is judged failed at its timeout; its own answer, come meanwhile (the
    # thread's one write), is dropped: the tick that took the timeout took that run.
    target = prober._targets["web"]  # noqa: SLF001
    target.done = None  # as if its thread had not answered yet when the tick looked
    clock.advance(PROBE.timeout.total_seconds() + 3)
    assert prober.tick() == ["web-id"]  # the second failure: the timeout's
    target.done = (target.run, (True, "200 OK"))  # the thread's late answer lands now
    assert prober.tick() == []  # dropped: still failing
    fine = HealthCheckResult("web-id", "web", clock.now())
    assert prober.judge(probed("web"), fine).problem is ProblemType.PROBE_FAILED


def test_a_target_the_sweep_keeps_keeps_what_the_tick_wrote_to_it_meanwhile() -> None:
    clock = FakeClock()
    prober = Prober(clock, Scripted((False, "refused")), PROBE)
    web = probed("web", **{"guardian.probe.failure_threshold": "1"})
    prober.update([web])
    before = prober._targets  # noqa: SLF001
    assert prober.tick() == []
    wait_until(lambda: prober.in_flight() == 0, 10, 0.01, "the probe answered")
    # The sweep builds the next dict from `before` while the tick records on its targets.
    assert prober.tick() == ["web-id"]
    prober.update([web])
    assert prober._targets is not before  # noqa: SLF001
    assert prober._targets["web"] is before["web"]  # noqa: SLF001
    fine = HealthCheckResult(web.id, web.name, clock.now())
    assert prober.judge(web, fine).problem is ProblemType.PROBE_FAILED


# -- resource limits --------------------------------------------------------------------------

MiB = 1024 * 1024
LIMIT = Limit(MEMORY, 256 * MiB, timedelta(0), "guardian.memory.max")


class Reads:
    """A resource reader: 301 MiB for every container; `during` runs inside a read (what
    another thread does while the tick waits for the cgroup file)."""

    def __init__(self) -> None:
        self.during: Callable[[], None] | None = None

    def read(self, _container_id: str) -> Usage | None:
        if self.during is not None:
            during, self.during = self.during, None
            during()
        return Usage(301 * MiB, 0)


def limited() -> tuple[ResourceWatch, Reads, ContainerSnapshot]:
    reads = Reads()
    watch = ResourceWatch(FakeClock(), reads, None, lambda _snap: (LIMIT,))  # type: ignore[arg-type]
    web = container("web")
    watch.update([web])
    return watch, reads, web


def judged(watch: ResourceWatch, snap: ContainerSnapshot) -> ProblemType | None:
    return watch.judge(snap, HealthCheckResult(snap.id, snap.name, T0)).problem


def test_a_reset_while_the_tick_reads_voids_its_verdict_and_the_next_tick_samples_anew() -> None:
    watch, reads, web = limited()
    assert watch.tick() == ["web-id"] and judged(watch, web) is ProblemType.MEMORY_HIGH
    # Guardian's restart of web ends on a worker while the tick reads web's usage.
    reads.during = lambda: watch.restart_ended("web", "healed")
    watch.tick()
    assert judged(watch, web) is None  # the verdict made from samples before the reset: void
    target = watch._targets["web"]  # noqa: SLF001
    before = target.sampled
    assert watch.tick() == ["web-id"]  # breached again, from new samples
    assert target.sampled is not before and judged(watch, web) is ProblemType.MEMORY_HIGH


def test_a_reset_from_an_event_is_seen_by_the_next_judge_at_once() -> None:
    watch, _, web = limited()
    watch.tick()
    watch.on_event(EngineEvent("start", web.id, web.name, T0, {}))
    assert judged(watch, web) is None
    # From new samples: the breach begins again, and is a flip (the reset voided the last).
    assert watch.tick() == ["web-id"] and judged(watch, web) is ProblemType.MEMORY_HIGH


class ResourceJudgedAtEachWrite(ResourceTarget):
    hook: Callable[[], None] | None = None

    def __setattr__(self, name: str, value: object) -> None:
        super().__setattr__(name, value)
        if self.hook is not None:
            self.hook()


def test_a_judge_between_any_two_writes_to_a_resource_target_sees_one_verdict() -> None:
    watch, reads, web = limited()
    target = ResourceJudgedAtEachWrite(web.id, (LIMIT,))
    watch._targets = {"web": target}  # noqa: SLF001
    seen: list[HealthCheckResult] = []
    target.hook = lambda: seen.append(watch.judge(web, HealthCheckResult(web.id, web.name, T0)))
    watch.tick()
    reads.during = lambda: watch.restart_ended("web", "healed")
    watch.tick()
    watch.tick()
    assert {r.problem for r in seen} == {None, ProblemType.MEMORY_HIGH}
    breached = [r for r in seen if r.problem is not None]
    assert all(r.detail.startswith("memory 301 MiB above guardian.memory.max") for r in breached)


# -- the page's feed: one lock for its reads and its streams ---------------------------------


def test_streams_open_join_and_end_while_pages_are_read_and_changes_come() -> None:
    """The feed's streams and its reads share one lock: hammered from every side at once
    (streams opened, written, ended; pages read; changes; a sign-out), nothing waits for
    ever, every slot comes back and each page gets its events in order."""
    changes = Changes()

    def read(_signed: bool) -> tuple[str, dict[str, str]]:
        version = changes.version
        time.sleep(0.0005)  # a read takes a while: bookkeeping comes meanwhile
        return str(version), {"part-summary": f"<p>{version}</p>"}

    feed = Feed(changes, read, StreamSlots(64), settle=0.0)
    failures: list[str] = []
    written: list[int] = []  # events each page got
    running = threading.Event()
    running.set()

    def serve(stream: Stream) -> None:
        """What the HTTP server's thread does with a stream: write it out, then close it."""
        try:
            for _ in stream:
                pass
        finally:
            stream.close()

    def page(i: int) -> None:
        for _ in range(15):
            stream = feed.stream(feed.claim(False, f"10.0.0.{i}"), None, "")
            got: list[bytes] = []
            stream.attach(got.append, None)
            served = threading.Thread(target=serve, args=(stream,), daemon=True)
            served.start()
            for _ in range(3):
                changes.changed()
                time.sleep(0.005)
            stream.end()  # as a sign-out ends it; its server thread then closes it
            served.join(5)
            versions = [int(v) for v in re.findall(rb"^id: \w+p-(\d+)$", b"".join(got), re.M)]
            written.append(len(versions))
            if served.is_alive() or versions != sorted(set(versions)):
                failures.append(f"page {i}: {versions}")

    def reader() -> None:
        while running.is_set():
            feed.snapshot(True)
            feed.end_session("nobody")

    pages = [threading.Thread(target=page, args=(i,), daemon=True) for i in range(8)]
    others = [threading.Thread(target=reader, daemon=True) for _ in range(2)]
    for t in (*pages, *others):
        t.start()
    for t in pages:
        t.join(30)
    running.clear()
    for t in others:
        t.join(5)
    assert not any(t.is_alive() for t in (*pages, *others)), "a thread waits for ever"
    assert failures == []
    assert max(written) > 1  # the pump wrote changes to pages past their first event
    wait_until(lambda: feed.open == 0 and feed.joined == 0, 5, 0.01, "every slot back")
    feed.close()


# -- the engine's clock -----------------------------------------------------------------------


def engine_date(clock: FakeClock, skew: float) -> str:
    return format_datetime(clock.now() + timedelta(seconds=skew), usegmt=True)


def test_an_answer_that_lands_while_the_skew_is_worked_out_is_used_at_the_next_read() -> None:
    clock = FakeClock()
    engine = EngineClock(clock)
    engine.saw_date(engine_date(clock, 600.3), elapsed=0.002)
    wide = engine.uncertainty
    assert wide is not None
    frame = engine._frame  # noqa: SLF001
    # A reader worked out the frame of the first answer; before it stores it, another
    # thread's answer lands, and the stale frame is stored after it.
    clock.advance(2.37)
    engine.saw_date(engine_date(clock, 600.3), elapsed=0.002)
    engine._frame = frame  # noqa: SLF001
    narrowed = engine.uncertainty
    assert narrowed is not None and narrowed < wide  # worked out again: no answer is lost


def test_answers_from_many_threads_at_once_narrow_as_the_same_answers_one_by_one() -> None:
    """Threads that each got an engine's answer at once: none of their bounds is lost (an
    update by read-modify-write would keep one thread's and drop the others'), and a reader
    meanwhile never sees bounds that leave out the true skew."""
    clock, skew = FakeClock(), 600.3
    dates = []
    for _ in range(ANSWERS):
        clock.advance(0.37)
        dates.append((engine_date(clock, skew), clock.now()))
    one_by_one, at_once = EngineClock(FakeClock()), EngineClock(FakeClock())
    for date, now in dates:
        one_by_one.clock = FakeClock(now)
        one_by_one.saw_date(date, elapsed=0.0)
    wrong: list[tuple[float, float]] = []
    go = threading.Barrier(9)

    def answer(part: list[tuple[str, datetime]]) -> None:
        go.wait()
        for date, now in part:
            # Every thread sees the engine's answer at its own moment: a clock per answer.
            placed = EngineClock(FakeClock(now))
            placed._answers = at_once._answers  # noqa: SLF001 - one deque, as one engine's
            placed.saw_date(date, elapsed=0.0)

    def read() -> None:
        go.wait()
        for _ in range(2000):
            bounds = at_once._now().bounds  # noqa: SLF001 - one frame: its bounds and skew
            if bounds is not None and not bounds[0] <= skew <= bounds[1]:
                wrong.append(bounds)

    threads = [threading.Thread(target=answer, args=(dates[i::8],)) for i in range(8)]
    threads.append(threading.Thread(target=read))
    for t in threads:
        t.start()
    for t in threads:
        t.join(10)
    assert wrong == []
    assert at_once.uncertainty == one_by_one.uncertainty
    assert at_once.skew == one_by_one.skew


# -- hooks as processes -----------------------------------------------------------------------


def test_a_hook_started_as_stop_comes_is_killed_at_once_by_its_own_thread(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """run() saw no stop; stop() comes whole before the hook's process is made (the moment
    the old lock closed): the hook's first wait finds the stop pipe readable, and its group is
    killed before its leader is reaped."""
    runner = SubprocessHookRunner()
    popen = subprocess.Popen
    pids = tmp_path / "pids"

    def stopped_first(*args: Any, **kwargs: Any) -> subprocess.Popen[bytes]:
        runner.stop()  # Guardian's stop, on another thread, between the check and the start
        return popen(*args, **kwargs)

    monkeypatch.setattr(hook_runner.subprocess, "Popen", stopped_first)
    started = time.monotonic()
    run = runner.run(["/bin/sh", "-c", f"echo $$ > {pids}; sleep 600"], {}, timedelta(minutes=10))
    assert run.end is HookEnd.INTERRUPTED and time.monotonic() - started < 5
    if pids.exists() and pids.read_text().strip():  # the shell got as far as writing it
        assert group_gone(int(pids.read_text()))
    monkeypatch.undo()
    assert runner.run(["/bin/sh", "-c", "exit 0"], {}, timedelta(seconds=1)).error == (
        "Guardian stopped"
    )


def test_stop_wakes_every_running_hook_and_each_kills_its_own_group(tmp_path: Path) -> None:
    runner = SubprocessHookRunner()
    runs: list[HookRun] = []
    files = [tmp_path / f"pid{i}" for i in range(4)]
    threads = [
        threading.Thread(
            target=lambda f=f: runs.append(
                runner.run(["/bin/sh", "-c", f"echo $$ > {f}; sleep 600"], {}, timedelta(hours=1))
            )
        )
        for f in files
    ]
    for t in threads:
        t.start()
    groups = [int(wait_until(lambda f=f: f.exists() and f.read_text().strip(), 10)) for f in files]
    runner.stop()
    for t in threads:
        t.join(5)
    assert [r.end for r in runs] == [HookEnd.INTERRUPTED] * 4
    assert all(group_gone(g) for g in groups)


# -- crash loops ------------------------------------------------------------------------------

LOOPING = CrashLoopSettings(restarts=3, window=timedelta(minutes=5), log_lines=0)


def restarted(count: int, state: str = "restarting") -> ContainerSnapshot:
    return ContainerSnapshot(
        "worker-id",
        "worker",
        {},
        state,
        None,
        inspected=True,
        restart_count=count,
        restart_policy="always",
        exit_code=2,
    )


def judge_at(loops: CrashLoops, clock: FakeClock, count: int) -> ProblemType | None:
    snap = restarted(count)
    return loops.judge(snap, HealthCheckResult(snap.id, snap.name, clock.now())).problem


class CopiedThenAppended(deque[tuple[float, int]]):
    """A track's observations: when a judge first copies them, another judge (the sweep's
    beside the worker's) records its own before the first one appends."""

    def __init__(self, other: Callable[[], object]) -> None:
        super().__init__()
        self.other: Callable[[], object] | None = other

    def __iter__(self) -> Any:
        other, self.other = self.other, None
        if other is not None:
            items = list(super().__iter__())
            other()
            return iter(items)
        return super().__iter__()


def test_two_judges_at_once_keep_both_observations() -> None:
    clock = FakeClock()
    loops = CrashLoops(None, LOOPING, clock)  # type: ignore[arg-type]
    judge_at(loops, clock, 0)
    track = loops._tracks["worker-id"]  # noqa: SLF001
    seen = CopiedThenAppended(lambda: judge_at(loops, clock, 2))
    seen.extend(track.seen)
    track.seen = seen
    clock.advance(1)
    judge_at(loops, clock, 3)  # copies, the other judge records 2, then this one records 3
    assert sorted(c for _, c in track.seen) == [0, 2, 3]
    assert judge_at(loops, clock, 3) is ProblemType.CRASH_LOOP


def test_judges_pop_nothing_and_the_sweep_keeps_one_baseline_before_the_window() -> None:
    """Judges only append (two at once never pop one observation twice, which would move the
    baseline and let a loop look over for a moment); the sweep prunes, keeping the baseline,
    and a judgement is the same before and after its pruning."""
    clock = FakeClock()
    loops = CrashLoops(None, LOOPING, clock)  # type: ignore[arg-type]
    found = []
    for count in range(8):
        clock.advance(LOOPING.window.total_seconds() / 3 if count else 0)
        found.append(judge_at(loops, clock, count))
    track = loops._tracks["worker-id"]  # noqa: SLF001
    assert len(track.seen) == 8  # the judges popped none
    before = loops.look(restarted(7), HealthCheckResult("worker-id", "worker", clock.now()))
    loops.follow([restarted(7)])
    start = clock.monotonic() - LOOPING.window.total_seconds()
    assert [t <= start for t, _ in track.seen] == [True, False, False, False]
    after = loops.look(restarted(7), HealthCheckResult("worker-id", "worker", clock.now()))
    assert before == after and after.problem is ProblemType.CRASH_LOOP
    assert found[3:] == [ProblemType.CRASH_LOOP] * 5


# -- maintenance holds: under the host lock ----------------------------------------------------


def test_a_maintenance_hold_is_kept_under_the_host_lock_decide_reads_under() -> None:
    clock = FakeClock()
    state = LoopState(clock)
    window = from_label("db", "* * * * * 1h")
    got: list[Silence | None] = []

    def status_read() -> None:
        got.append(state.maintenance.silence("host", "db", [window], clock.now()))

    with state.lock:  # a decision reading the host
        reader = threading.Thread(target=status_read)
        reader.start()
        reader.join(0.2)
        assert reader.is_alive() and not got  # the status read waits for the decision
    reader.join(5)
    assert got and got[0] is not None


def test_holds_kept_from_many_threads_at_once_keep_the_later_end() -> None:
    clock = FakeClock()
    state = LoopState(clock)
    short, long = from_label("db", "* * * * * 1h"), from_label("db", "* * * * * 2h")
    now = clock.now()

    def hold(windows: list[MaintenanceWindow]) -> None:
        for _ in range(300):
            state.maintenance.silence("host", "db", windows, now)
            state.maintenance.keep_only({"db"})

    threads = [threading.Thread(target=hold, args=([w],)) for w in (short, long) * 4]
    for t in threads:
        t.start()
    for t in threads:
        t.join(10)
    # The long window was seen last by some thread: its end is the hold's, not the short's.
    held = state.maintenance.silence("host", "db", [short], now)
    alone = LoopState(FakeClock()).maintenance.silence("host", "db", [long], now)
    assert held is not None and alone is not None and held.until == alone.until


# -- quiet rows: told through an inbox the sweep alone takes ----------------------------------

SETTINGS = object()  # the settings in force
QUIET = QuietRow(None, FOREVER)  # type: ignore[arg-type]  # a row as kept: its content unread


def kept_quiet(*ids: str) -> QuietRows:
    rows = QuietRows()
    rows.begin(SETTINGS)
    rows.keep(dict.fromkeys(ids, QUIET))
    return rows


def test_a_container_heard_of_while_the_sweep_runs_is_not_kept() -> None:
    rows = QuietRows()
    rows.begin(SETTINGS)
    events = threading.Thread(target=rows.heard, args=("a",))
    events.start()
    events.join(5)
    rows.keep({"a": QUIET, "b": QUIET})
    assert set(rows.begin(SETTINGS)) == {"b"}


class TellsAfterTaking(deque[str | None]):
    """The inbox: once the sweep pops what was told, another thread tells of `told` (after the
    sweep took the inbox's length, before the sweep writes its rows)."""

    def __init__(self, rows: QuietRows, told: str) -> None:
        super().__init__()
        self.rows, self.told = rows, told

    def popleft(self) -> str | None:
        first = super().popleft()
        if self.told:
            told, self.told = self.told, ""
            other = threading.Thread(target=self.rows.heard, args=(told,))
            other.start()
            other.join(5)
        return first


def test_a_container_heard_of_after_keep_took_the_inbox_is_judged_again() -> None:
    rows = kept_quiet("a", "b")
    rows._inbox = TellsAfterTaking(rows, "a")  # noqa: SLF001
    assert rows.news() is None  # the first sweep's: every container
    rows.begin(SETTINGS)
    rows.heard("c")  # what keep() pops, and meanwhile "a" is heard of
    rows.keep({"a": QUIET, "b": QUIET})  # the sweep kept "a": told after its keep took
    assert rows.news() == {"c", "a"}  # news for the next sweep
    assert set(rows.begin(SETTINGS)) == {"b"}  # and no row of "a" is taken


class SweepsAfterLooking(deque[str | None]):
    """The inbox: a thread that tells looks at the last told, then the sweep takes the inbox
    before that thread goes on."""

    def __init__(self, rows: QuietRows) -> None:
        super().__init__()
        self.rows = rows
        self.taken: list[dict[str, QuietRow]] = []

    def __getitem__(self, index: Any) -> Any:
        last = super().__getitem__(index)
        if not self.taken:
            sweep = threading.Thread(target=lambda: self.taken.append(self.rows.begin(SETTINGS)))
            sweep.start()
            sweep.join(5)
        return last


def test_a_container_heard_of_again_before_the_last_telling_was_taken_is_judged_again() -> None:
    rows = kept_quiet("a", "b")
    inbox = SweepsAfterLooking(rows)
    rows._inbox = inbox  # noqa: SLF001
    inbox.append("a")  # heard of, not taken yet
    rows.heard("a")  # sees "a" last: not told twice; the sweep takes the first meanwhile
    assert inbox.taken == [{"b": QUIET}]  # the sweep after it judges "a" again
    assert not inbox


def test_more_told_than_the_inbox_holds_judges_every_container_again(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(quiet, "MAX_INBOX", 3)
    rows = kept_quiet("a", "b", "quiet")
    for cid in ("a", "b", "c", "d"):
        rows.heard(cid)
    assert rows.news() is None  # too many to name: the next sweep lists every container
    assert rows.begin(SETTINGS) == {}
    for cid in ("a", "b", "c", "d"):
        rows.heard(cid)
    rows.keep({"quiet": QUIET})  # a flood while the sweep ran: none kept
    assert rows.begin(SETTINGS) == {}


@pytest.mark.usefixtures("fast_switches")
def test_no_telling_is_lost_when_many_threads_tell_while_the_sweep_takes(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(quiet, "MAX_NEWS", 1_000_000)
    monkeypatch.setattr(quiet, "MAX_INBOX", 1_000_000)
    rows = QuietRows()
    rows.news()
    told = [[f"t{t}-{i}" for i in range(3000)] for t in range(6)]
    heard: set[str] = set()
    done = threading.Event()

    def sweep() -> None:
        while not done.is_set():
            news = rows.news()
            assert news is not None
            heard.update(news)

    sweeper = threading.Thread(target=sweep)
    tellers = [
        threading.Thread(target=lambda ids=ids: [rows.heard(c) for c in ids]) for ids in told
    ]
    sweeper.start()
    for t in tellers:
        t.start()
    for t in tellers:
        t.join(30)
    done.set()
    sweeper.join(30)
    heard.update(rows.news() or ())
    assert heard == {c for ids in told for c in ids}


# -- namespaces -------------------------------------------------------------------------------

LEADER, FOLLOWER = "1" * 64, "2" * 64


def with_modes(cid: str, name: str, *modes: tuple[str, str], inspected: bool = False) -> Any:
    return ContainerSnapshot(cid, name, {}, "running", None, inspected=inspected, namespaces=modes)


class JudgedWhileRead(dict[str, Any]):
    """The inspected modes: at the sweep's `at`-th read of them, a worker's judge learns the
    follower's pid leader (an inspect the sweep's list did not have)."""

    def __init__(self, at: int, judge: Callable[[], object]) -> None:
        super().__init__()
        self.at, self.judge = at, judge

    def get(self, key: str, default: Any = None) -> Any:
        self.at -= 1
        if self.at == 0:
            worker = threading.Thread(target=self.judge)
            worker.start()
            worker.join(5)
        return super().get(key, default)


@pytest.mark.parametrize("at", [1, 2, 3, 4])
def test_a_leader_learned_while_the_sweep_reads_the_edges_is_in_them_or_learned(at: int) -> None:
    ns = Namespaces(cast(Engine, None))
    listed = [with_modes(LEADER, "vpn"), with_modes(FOLLOWER, "app")]
    assert ns.follow(listed) == {}
    inspected = with_modes(FOLLOWER, "app", ("pid", LEADER), inspected=True)
    ns._full = JudgedWhileRead(  # noqa: SLF001
        at, lambda: ns.judge(inspected, HealthCheckResult(FOLLOWER, "app", T0))
    )
    edges = ns.follow(listed)
    pid = [("vpn", "pid")]
    assert edges.get("app") == pid or (ns.learned() or {}).get("app") == pid


@pytest.mark.usefixtures("fast_switches")
def test_a_refused_mode_judged_by_many_threads_at_once_is_warned_once(
    caplog: pytest.LogCaptureFixture,
) -> None:
    ns = Namespaces(cast(Engine, None))
    hostile = with_modes(FOLLOWER, "app", ("network", "$(reboot)"), inspected=True)
    start = threading.Barrier(8)

    def judge() -> None:
        start.wait(5)
        ns.judge(hostile, HealthCheckResult(FOLLOWER, "app", T0))

    with caplog.at_level(logging.WARNING, "guardian.namespaces"):
        judges = [threading.Thread(target=judge) for _ in range(8)]
        for t in judges:
            t.start()
        for t in judges:
            t.join(5)
    assert len([r for r in caplog.records if "namespace mode refused" in r.getMessage()]) == 1


class FollowsWhileAsked(dict[str, str]):
    """The listed names a judge asks about: as it asks, the sweep lists the follower too and
    reads its edges."""

    def __init__(self, names: dict[str, str], follow: Callable[[], object]) -> None:
        super().__init__(names)
        self.follow: Callable[[], object] | None = follow

    def __contains__(self, key: object) -> bool:
        found = super().__contains__(key)
        if self.follow is not None:
            follow, self.follow = self.follow, None
            sweep = threading.Thread(target=follow)
            sweep.start()
            sweep.join(5)
        return found


def test_a_leader_learned_as_the_sweep_lists_its_follower_is_in_the_edges_or_learned() -> None:
    ns = Namespaces(cast(Engine, None))
    leader, follower = with_modes(LEADER, "vpn"), with_modes(FOLLOWER, "app")
    ns.follow([leader])  # the follower is not listed yet
    edges: list[dict[str, list[tuple[str, str]]]] = []
    ns._listed = replace(  # noqa: SLF001
        ns._listed,  # noqa: SLF001
        names=FollowsWhileAsked(
            ns._listed.names,  # noqa: SLF001
            lambda: edges.append(ns.follow([leader, follower])),
        ),
    )
    inspected = with_modes(FOLLOWER, "app", ("pid", LEADER), inspected=True)
    ns.judge(inspected, HealthCheckResult(FOLLOWER, "app", T0))
    pid = [("vpn", "pid")]
    assert edges[0].get("app") == pid or (ns.learned() or {}).get("app") == pid


# -- run stamps: written one at a time under the loop store's lock, read from one value -------


def test_a_restart_stamped_while_a_read_asks_the_store_is_counted_once() -> None:
    clock = FakeClock()
    stamps = RunStamps(clock)
    first = clock.now()
    stamps.wrote_restart("h", "web", "web-id", first)
    clock.advance(10)
    second = clock.now()

    def store_read(_after: datetime) -> tuple[datetime, ...]:
        writer = threading.Thread(target=stamps.wrote_restart, args=("h", "web", "web-id", second))
        writer.start()  # the worker's next restart lands while the store is read
        writer.join(5)
        return (first, second)  # the store has both rows by then

    times = stamps.restart_times("h", first - timedelta(minutes=1), store_read, "web", "web-id")
    assert sorted(times) == [first, second]  # the first as this run's, the second as stored


class Rows:
    """An inner store that takes every write: ids in order, no restart read back."""

    def __init__(self) -> None:
        self.ids = itertools.count(1)

    def record_intent(self, _action: RemediationAction, _notifications: object = ()) -> int:
        return next(self.ids)

    def record_reset(self, _host: str, _container: str, _at: datetime) -> None:
        return None

    def restart_times(self, *_args: object) -> tuple[datetime, ...]:
        return ()

    def last_reset(self, *_args: object) -> datetime | None:
        return None


@pytest.mark.usefixtures("fast_switches")
def test_stamps_written_by_many_workers_at_once_are_all_kept_and_reads_never_see_them_torn() -> (
    None
):
    clock = FakeClock()
    stamps = RunStamps(clock)
    store = LoopStore(
        cast(Store, Rows()), PrometheusMetrics(CollectorRegistry()), FactStream(), stamps
    )
    per_worker, workers = 150, 4
    start = threading.Barrier(workers * 2 + 2, timeout=5)
    seen: list[int] = []
    failures: list[BaseException] = []

    def restarts(w: int) -> None:
        start.wait()
        for i in range(per_worker):
            at = T0 + timedelta(seconds=w * per_worker + i)
            store.record_intent(
                RemediationAction(None, None, "h", f"c{w}", f"c{w}-id", "restart", at, "allowed")
            )

    def resets(w: int) -> None:
        start.wait()
        for i in range(per_worker):
            store.record_reset("h", f"c{w}", T0 + timedelta(seconds=i))

    def reads() -> None:
        start.wait()
        try:
            for _ in range(300):
                seen.append(len(store.restart_times("h", T0 - timedelta(days=1))))
                store.last_reset("h", "c0")
        except (RuntimeError, KeyError, ValueError) as exc:  # a walk over stamps changing
            failures.append(exc)

    threads = [threading.Thread(target=restarts, args=(w,)) for w in range(workers)]
    threads += [threading.Thread(target=resets, args=(w,)) for w in range(workers)]
    threads += [threading.Thread(target=reads) for _ in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(30)
    total = per_worker * workers
    assert failures == []
    assert all(0 <= n <= total for n in seen)
    assert len(store.restart_times("h", T0 - timedelta(days=1))) == total  # none lost
    record = stamps._record  # noqa: SLF001
    assert (record.count, len(record.restarts), len(record.resets)) == (total, total, total)
    assert sum(n for k, n in record.written.items() if len(k) == 2) == total
    assert sum(len(s) for s in record.reset_at.values()) == total


# -- the engine's idle connections ------------------------------------------------------------


class Conn(_UnixConnection):
    """A connection never connected, that counts its close() calls."""

    def __init__(self) -> None:
        super().__init__("/nonexistent.sock", 1.0)
        self.closes = 0

    def close(self) -> None:
        self.closes += 1
        super().close()


class ClosesWhileClaimed(dict[int, Any]):
    """The idle slots: as a connection claims one, the engine is closed on another thread
    (the connection's generation was checked before; close() drew a fresh one)."""

    def __init__(self, light: LightHttp) -> None:
        super().__init__()
        self.light: LightHttp | None = light

    def setdefault(self, key: int, default: Any = None) -> Any:
        light, self.light = self.light, None
        if light is not None:
            closing = threading.Thread(target=light.close)
            closing.start()
            closing.join(5)
        return super().setdefault(key, default)


def test_a_connection_given_back_while_the_engine_is_closed_is_closed_not_kept() -> None:
    light = LightHttp("/nonexistent.sock", 1.0, lambda *_: None)
    light._idle = ClosesWhileClaimed(light)  # noqa: SLF001
    conn = Conn()
    light._give_back(conn, light._generation)  # noqa: SLF001
    assert conn.closes == 1 and not light._idle  # noqa: SLF001


@pytest.mark.usefixtures("fast_switches")
def test_connections_given_back_and_taken_by_many_threads_at_once_stay_within_keep() -> None:
    light = LightHttp("/nonexistent.sock", 1.0, lambda *_: None, keep=4)
    conns = [Conn() for _ in range(16)]
    start = threading.Barrier(len(conns), timeout=5)

    def give_back(conn: Conn) -> None:
        start.wait()
        light._give_back(conn, light._generation)  # noqa: SLF001

    threads = [threading.Thread(target=give_back, args=(c,)) for c in conns]
    for t in threads:
        t.start()
    for t in threads:
        t.join(5)
    kept = {id(c) for _, c in light._idle.values()}  # noqa: SLF001
    assert len(kept) == 4  # every slot taken, none twice
    assert all(c.closes == (id(c) not in kept) for c in conns)  # the others closed, once
    light.close()
    assert all(c.closes == 1 for c in conns) and not light._idle  # noqa: SLF001


# -- the engine's liveness: under the host lock ------------------------------------------------


def test_an_answer_of_the_engine_waits_while_a_decision_holds_the_host_lock() -> None:
    state = LoopState(FakeClock())
    got: list[bool | None] = []
    with state.lock:  # a decision reading the host
        sweep = threading.Thread(target=lambda: got.append(state.engine.answered(False)))
        sweep.start()
        sweep.join(0.2)
        assert sweep.is_alive() and not got
        assert state.engine.up is None  # read without the lock: the value as it stands
    sweep.join(5)
    assert got == [None] and state.engine.up is False


@pytest.mark.usefixtures("fast_switches")
def test_every_answer_takes_the_one_before_it_so_each_change_is_told_once() -> None:
    state = LoopState(FakeClock())
    told: list[tuple[bool | None, bool]] = []  # (before, up), list.append is atomic
    start = threading.Barrier(8, timeout=5)

    def answer(n: int) -> None:
        start.wait()
        for i in range(400):
            up = (n + i) % 3 != 0
            told.append((state.engine.answered(up), up))

    threads = [threading.Thread(target=answer, args=(n,)) for n in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(10)
    assert len(told) == 8 * 400
    # One chain: each value written is the `before` of exactly one later answer (the first
    # answer's is None, the last one's is still held), so no change is told twice or missed.
    befores = Counter(before for before, _ in told)
    written = Counter([None, *(up for _, up in told)])
    written[state.engine.up] -= 1
    assert befores == +written
    assert befores[None] == 1


# -- a person's silences: their facts under the loop store's lock -------------------------------


class Silences:
    """A store of silences whose writes land at once and return a moment later (a commit's
    latency), the order they landed in kept in `landed`."""

    def __init__(self) -> None:
        self.ids = itertools.count(1)
        self.in_force: dict[str, Silence] = {}
        self.landed: list[tuple[str, int | None]] = []

    def add_silence(self, silence: Silence) -> Silence:
        silence = replace(silence, id=next(self.ids))
        self.in_force[silence.container] = silence
        self.landed.append(("set", silence.id))
        time.sleep(0.0001)
        return silence

    def end_silence(self, host: str, container: str, by: str, at: datetime) -> Silence | None:
        ended = self.in_force.pop(container, None)
        self.landed.append(("lifted", ended.id if ended else None))
        time.sleep(0.0001)
        return ended


def told(fact: Fact) -> tuple[str, int | None] | None:
    match fact:
        case SilenceSet(silence):
            return ("set", silence.id)
        case SilenceLifted(_, ended):
            return ("lifted", ended.id if ended else None)
    return None


def silencing() -> tuple[Operator, LoopStore, Silences, list[tuple[str, int | None]]]:
    clock, facts, silences = FakeClock(), FactStream(), Silences()
    store = LoopStore(
        cast(Store, silences), PrometheusMetrics(CollectorRegistry()), facts, RunStamps(clock)
    )
    heard: list[tuple[str, int | None]] = []
    facts.subscribe(lambda fact: heard.append(t) if (t := told(fact)) else None)
    operator = Operator(store, clock, "h", facts=facts, in_order=store.in_order)
    return operator, store, silences, heard


def test_a_persons_silence_waits_while_the_loop_writes_and_tells_its_facts() -> None:
    operator, store, silences, heard = silencing()
    with store.in_order:  # a loop write and its fact
        person = threading.Thread(
            target=lambda: operator.silence("db", timedelta(hours=1), "upgrade", "ann")
        )
        person.start()
        person.join(0.2)
        assert person.is_alive() and not silences.landed
    person.join(5)
    assert heard == silences.landed == [("set", 1)]


def test_silences_set_and_lifted_by_many_people_at_once_are_told_in_the_order_they_landed() -> None:
    operator, _, silences, heard = silencing()
    start = threading.Barrier(6, timeout=5)

    def person(n: int) -> None:
        start.wait()
        for i in range(40):
            if (n + i) % 2:
                operator.silence("db", timedelta(minutes=n + 1), "upgrade", f"p{n}")
            else:
                with contextlib.suppress(NotFound):
                    operator.unsilence("db", f"p{n}")

    people = [threading.Thread(target=person, args=(n,)) for n in range(6)]
    for t in people:
        t.start()
    for t in people:
        t.join(10)
    assert len(silences.landed) == 6 * 40
    assert heard == silences.landed  # the last fact a reader keeps is the store's own state


# -- the engine's connection: claimed by setdefault ---------------------------------------------


class Api:
    """A connection never connected, that counts its close() calls."""

    def __init__(self) -> None:
        self.closes = 0

    def close(self) -> None:
        self.closes += 1


class Connects(DockerEngine):
    """DockerEngine whose connect makes an Api after a moment of I/O (`during` runs then),
    every one kept in `made`."""

    def __init__(self, during: Callable[[], None] = lambda: None) -> None:
        super().__init__("tcp://127.0.0.1:1", timedelta(seconds=1), FakeClock())
        self.made: list[Api] = []
        self.during = during

    def _connect(self) -> tuple[Any, EngineIdentity]:
        api = Api()
        self.made.append(api)
        time.sleep(0.001)  # the version() call
        self.during()
        return api, EngineIdentity("docker", "27.0", "1.47")


@pytest.mark.usefixtures("fast_switches")
def test_threads_that_connect_at_once_share_one_connection_and_the_others_are_closed() -> None:
    engine = Connects()
    start = threading.Barrier(8, timeout=5)
    got: list[Any] = []

    def connect() -> None:
        start.wait()
        got.append(engine._client())  # noqa: SLF001

    threads = [threading.Thread(target=connect) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(5)
    kept = got[0]
    assert len(got) == 8 and all(api is kept for api in got) and kept.closes == 0
    assert all(api.closes == 1 for api in engine.made if api is not kept)  # none leaks
    assert engine.identity() == EngineIdentity("docker", "27.0", "1.47")
    engine.close()
    assert kept.closes == 1 and CONNECTED not in engine._held  # noqa: SLF001


def test_a_connection_made_across_anothers_connect_and_drop_is_kept_and_the_dropped_closed() -> (
    None
):
    engine = Connects()
    others: list[Any] = []

    def meanwhile() -> None:  # while this thread asks the engine its version
        engine.during = lambda: None
        others.append(engine._client())  # noqa: SLF001  another thread connects
        engine._drop()  # noqa: SLF001  a third's call fails

    engine.during = meanwhile
    mine = engine._client()  # noqa: SLF001
    assert others[0].closes == 1  # the dropped one, closed once
    assert mine.closes == 0 and engine._client() is mine  # noqa: SLF001  kept, handed out open
