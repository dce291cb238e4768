"""The daemon: an APScheduler sweep, the engine event listener, verify ticks, reload on SIGHUP,
clean shutdown.

Events make Guardian react to one container at once; the interval sweep reconciles everything
and catches whatever the event stream missed. Guardian serves (and tells systemd it is ready)
whether or not the engine answers; the sweep starts healing as soon as it does.
"""

from __future__ import annotations

import contextlib
import logging
import signal
import socket
import threading
from collections.abc import Callable
from datetime import UTC, datetime, timedelta

from apscheduler.executors.pool import ThreadPoolExecutor

from guardian.adapters.instance import CLAIMS_SHOWN, rivals_of
from guardian.bootstrap import App
from guardian.config import Settings
from guardian.core.assessment import SweepReport
from guardian.entrypoints import health
from guardian.entrypoints.event_listener import EventListener
from guardian.entrypoints.http_server import HttpServer, ListenError, Routes
from guardian.entrypoints.reloader import Reloader
from guardian.logs import kv
from guardian.ports import EngineUnavailable, StoreError
from guardian.runtime.http_front import Front
from guardian.runtime.http_limits import Limits
from guardian.runtime.restart_calls import MAX_RESTART_THREADS
from guardian.runtime.scheduling import SteadyScheduler
from guardian.runtime.store_watch import StoreWatch
from guardian.runtime.wakeup import Wakeup, WakingEvent
from guardian.runtime.watchdog import STARTING, SupervisorLink, SweepLiveness, stall_limit
from guardian.runtime.work_queue import KeyedQueue, Work
from guardian.service.watchers.clock_steps import StepWatch

log = logging.getLogger("guardian.daemon")

VERIFY_TICK = timedelta(seconds=1)
# While a restart awaits a person's approval, how often the store is asked for one (the CLI
# writes it from another process): the only wait a person's answer has.
APPROVAL_TICK = timedelta(seconds=1)
PROBE_TICK = timedelta(milliseconds=500)
JOBS_FOLLOWED = ("probes", "verify", "approvals", "resources")  # paused while idle
RETENTION_TICK = timedelta(days=1)
# The sweep, verify, probe, approvals, resources and retention jobs; the containers' looks and
# restart calls have the work queue's workers.
JOB_THREADS = 10
# How long a stop waits for restart calls in flight to record their outcomes; a call still
# waiting out a container's stop timeout is left to the engine and reconciled at the next start.
STOP_GRACE = timedelta(seconds=3)
# How long a stop waits for looks under way (an inspect, the writes before a restart call):
# longer than the engine's own answer may take, as the scheduler waits for its jobs.
REACTION_GRACE = timedelta(seconds=60)


def status_line(app: App, engine_error: str | None = None) -> str:
    """One line for `systemctl status`: what Guardian watches and what is open, or why the
    engine is unreachable (`engine_error`, e.g. the socket's permissions)."""
    loop = app.loop
    if loop.engine_up is False:
        return f"{engine_error or 'docker engine unreachable'}; retrying"
    try:
        incidents = app.store.open_incidents(loop.host)
    except Exception:  # noqa: BLE001 - a status line must never break the sweep job
        return "store unavailable; retrying"
    opened = sum(1 for i in incidents if i.is_open)
    watched = loop.watched
    return f"watching {_count(watched, 'container')}, {_count(opened, 'open incident')}"


def _count(n: float, noun: str) -> str:
    return f"{n:.0f} {noun}" + ("" if n == 1 else "s")


def job_threads(settings: Settings) -> int:
    """Threads for the jobs, and for the looks at containers: a look holds its worker while it
    inspects, so a burst proceeds at once with a worker for each of `restart.max_concurrent`
    containers, plus one for each job. Threads start only when needed."""
    return JOB_THREADS + min(int(settings["restart.max_concurrent"]), MAX_RESTART_THREADS)


class Daemon:
    """`reread` returns the config anew for a reload (SIGHUP: see Reloader)."""

    def __init__(
        self,
        app: App,
        monotonic: Callable[[], float] | None = None,
        reread: Callable[[], Settings] | None = None,
    ) -> None:
        self.app = app
        monotonic = monotonic or app.clock.monotonic
        self.wakeup = Wakeup()  # the main loop sleeps on it: no timer unless systemd's watchdog
        self.stopping = WakingEvent(self.wakeup)
        self._signalled: list[int] = []  # signal handlers only append: no locks in a handler
        # JOBS_FOLLOWED as the main loop last set them (running or paused)
        self._following = (False, False, False, False)
        self.first_sweep_done = threading.Event()
        self.last_turn_at: datetime | None = None  # the last sweep that completed or found the
        # engine unreachable: either way the loop turned
        self.engine_error: str | None = None  # why the engine did not answer the last sweep
        self._reconciled = False
        self.refused: str | None = None  # another Guardian watches this engine: why we stopped
        self.claimed = ""  # containers that claimed at start to be a Guardian, by label alone
        # Processes that hold names of the engine lock but cannot reach the engine
        # (docs/design.md rule 19).
        self.squatted = app.lock.warning() if app.lock is not None else ""
        if self.squatted:
            assert app.lock is not None
            log.warning(
                "names of the engine lock are held by processes that cannot reach the engine; "
                "not rivals",
                extra=kv(names=app.lock.squatted, holders="; ".join(app.lock.squatters)),
            )
        self._listener: threading.Thread | None = None
        # What other processes write to the store, heard at once (None: after each sweep).
        self.store_watch: StoreWatch | None = None
        self._store_watcher: threading.Thread | None = None
        self.events: EventListener | None = None  # once watch.events starts it
        self.http: HttpServer | None = None
        liveness = SweepLiveness(stall_limit(app.settings), monotonic, app.loop.longest_stop)
        self.systemd = SupervisorLink(app.supervisor, liveness, monotonic)
        self.reloader = Reloader(app, reread, self.systemd, self.reschedule_sweep)
        self.scheduler = SteadyScheduler(
            StepWatch(app.clock, app.metrics, app.loop.follow_step),
            executors={"default": ThreadPoolExecutor(max_workers=job_threads(app.settings))},
            job_defaults={"coalesce": True, "max_instances": 1, "misfire_grace_time": None},
            timezone=UTC,
        )
        # The keyed work queue: every look at a container (an event, a recheck a decision named,
        # an approval, a freed restart slot) and every restart call runs on its container's
        # worker, one at a time per container. An event is judged at once, without a turn of the
        # scheduler's thread between (bench/RESULTS.md: the single restart beside the bare
        # listener); a restart call holds its worker until the engine is done with it.
        self.reactions = KeyedQueue(self.reconcile, job_threads(app.settings) + MAX_RESTART_THREADS)

    # -- jobs -------------------------------------------------------------------------------

    def sweep_job(self) -> None:
        """The scheduled sweep, reported to systemd (READY, STATUS, watchdog liveness)."""
        self.systemd.sweep_started()
        try:
            self.sweep()
        finally:
            self.systemd.sweep_finished(status_line(self.app, self.engine_error))
            self.work_changed()
            if self.app.heartbeat is not None and self.refused is None:
                self.app.heartbeat.swept(engine_reached=self.engine_error is None)

    def wanted_jobs(self) -> tuple[bool, bool, bool, bool]:
        """For each of JOBS_FOLLOWED, whether it has work."""
        awaited = bool(self.app.loop.approvals_awaited())
        return (
            self.app.prober.has_targets(),
            self.app.verifier.awaiting(),
            awaited,
            self.app.resources.has_targets(),
        )

    def work_changed(self) -> None:
        """After a job that may have given the probe or verify job work, or taken the last of it
        away: wake the main loop to resume or pause them (any thread)."""
        if self.wanted_jobs() != self._following:
            self.wakeup.wake()

    def follow_work(self) -> None:
        """Run the probe tick only while a container has a probe (targets come from sweeps),
        and the verify tick only while a restart awaits verification: a tick with nothing to do
        still costs CPU while Guardian idles (bench/RESULTS.md); the resources tick only while
        a container has a resource limit.

        Called from the main loop, never from a job: scheduler.shutdown() holds the job store
        lock while it waits for running jobs, so a job touching the scheduler would deadlock
        a stop. Jobs wake the main loop for it (work_changed)."""
        self._following = self.wanted_jobs()
        for job_id, wanted in zip(JOBS_FOLLOWED, self._following, strict=True):
            self._follow(job_id, wanted)

    def _follow(self, job_id: str, wanted: bool) -> None:
        job = self.scheduler.get_job(job_id)
        if job is None:
            return
        running = job.next_run_time is not None
        if wanted and not running:
            job.resume()
        elif running and not wanted:
            job.pause()

    def sweep(self) -> None:
        healer = self.app.healer
        started, swept_at = self.app.clock.monotonic(), self.app.clock.now()
        try:
            if not self._reconciled and not self._reconcile():
                return
            healer.read_engine_record()  # at start-up, and after the store recovered
            report = healer.sweep()
        except EngineUnavailable as exc:
            healer.engine_state(False, str(exc))
            self.engine_error, self.last_turn_at = str(exc), self.app.clock.now()
            return
        except StoreError as exc:
            self._store_failed("sweep", exc)
            return
        except Exception:
            log.exception("sweep failed")
            return
        self._swept(report, started, swept_at)

    def _reconcile(self) -> bool:
        """The first sweep's look at the engine: no other Guardian watches it (False: one
        does, and this one stops), and the actions a previous run left unfinished are
        reconciled. Raises EngineUnavailable or StoreError: the next sweep looks again."""
        app = self.app
        app.engine.ping()
        rivals = rivals_of(
            app.engine,
            app.healer.ctx.settings.self_id,
            app.settings["watch.scope"],
            app.settings["docker.url"],
        )
        if rivals.proven:
            # One Guardian per engine: a Guardian container already watches it.
            log.error("refusing to run", extra=kv(reason=rivals.proven))
            self.refused = rivals.proven
            self.stopping.set()
            return False
        # A label is no proof (docs/design.md rule 19): a warning, a line each for the first few.
        for claim in rivals.claims[:CLAIMS_SHOWN]:
            log.warning(
                "container claims to be a Guardian by label alone; not a rival",
                extra=kv(container=claim.name, container_id=claim.id[:12]),
            )
        if len(rivals.claims) > CLAIMS_SHOWN:
            log.warning(
                "more containers claim to be a Guardian by label alone; not rivals",
                extra=kv(count=len(rivals.claims) - CLAIMS_SHOWN),
            )
        self.claimed = rivals.warning()
        count = app.verifier.reconcile()
        app.healer.requested.look_for()  # a person's rollbacks asked while Guardian was down
        self._reconciled = True
        if count:
            log.info("reconciled unfinished actions", extra=kv(count=count))
        return True

    def _swept(self, report: SweepReport, started: float, swept_at: datetime) -> None:
        """After a sweep that ran (whether or not the engine answered it all): its duration,
        the loop's turn, the marks a next start reads, and a look for other processes' writes
        (on the store watch's thread where there is one: in case it missed a write)."""
        finished = self.app.clock.now()
        completed = report.engine_error is None
        self.app.metrics.sweep_finished(
            self.app.clock.monotonic() - started, finished if completed else None
        )
        # An unreachable engine is no stall: the loop turned, and will heal once it answers.
        self.engine_error, self.last_turn_at = report.engine_error, finished
        self.app.healer.mark_running(swept_at)
        if completed:
            self.first_sweep_done.set()
            handled = self.events.handled_through() if self.events is not None else None
            self.app.healer.mark_swept(swept_at, handled)
        if self.store_watch is not None:
            self.store_watch.poke()
        else:
            self.look_elsewhere()
        problems = [r for r in report.rows if r.result.problem is not None]
        log.debug("sweep done", extra=kv(watched=len(report.rows), problems=len(problems)))

    def look_elsewhere(self) -> None:
        """What other processes (a `guardian` command) wrote to the store since the last look:
        the readers told what the store's change feed names (service/elsewhere.py), the
        delivery worker woken for the notifications they queued. On the store watch's thread
        as soon as the store is written, and after each sweep; on the sweep's thread where
        there is no watch. One look at a time."""
        if self.app.elsewhere is None:
            return
        try:
            if self.app.elsewhere.look() and self.app.delivery is not None:
                self.app.delivery.written_elsewhere()
        except StoreError as exc:
            self._store_failed("writes elsewhere", exc)

    def run_probes(self) -> None:
        try:
            if self.first_sweep_done.is_set():
                self.app.healer.probe_tick(self.app.prober)
        except Exception:
            log.exception("probes failed")
        finally:
            self.work_changed()

    def sample_resources(self) -> None:
        try:
            if self.first_sweep_done.is_set():
                self.app.healer.resource_tick(self.app.resources)
        except Exception:
            log.exception("resource sampling failed")
        finally:
            self.work_changed()

    def verify(self) -> None:
        try:
            self.app.verifier.verify()
        except StoreError as exc:
            self._store_failed("verify", exc)
        except Exception:
            log.exception("verification failed")
        finally:
            self.work_changed()

    def look_for_approvals(self) -> None:
        """A restart awaits approval: judge each such container again once a person approved
        (the CLI writes approvals from another process; decide() still holds the restart)."""
        loop = self.app.loop
        try:
            awaited = loop.approvals_awaited()
            found = self.app.store.unused_approvals(loop.host, self.app.clock.now())
            for container in sorted({a.container for a in found if a.container in awaited}):
                self.react_soon(awaited[container], None)
        except StoreError as exc:
            self._store_failed("approvals", exc)
        except Exception:
            log.exception("approvals failed")
        finally:
            self.work_changed()

    def prune(self) -> None:
        """Forget incidents that ended longer than store.retention ago (daily, and at start)."""
        if self.app.prune is None:
            return
        before = self.app.clock.now() - self.app.settings["store.retention"]
        try:
            pruned = self.app.prune(before)
        except StoreError as exc:
            self._store_failed("retention", exc)
            return
        if pruned:
            log.info(
                "store pruned",
                extra=kv(
                    incidents=pruned.incidents,
                    silences=pruned.silences,
                    events=pruned.events,
                    ended_before=before.isoformat(timespec="seconds"),
                ),
            )

    def _store_failed(self, job: str, exc: StoreError) -> None:
        self.app.metrics.store_failed()
        log.error("store error; job abandoned until its next run", extra=kv(job=job, reason=exc))

    def slot_freed(self) -> None:
        """A restart slot is free (a call ended or gave its slot up; on a worker): the
        container held back longest for one is looked at again."""
        waiter = self.app.loop.next_slot_waiter()
        if waiter is not None and not self.stopping.is_set():
            self.react_soon(waiter, None)

    def reconcile(self, container_id: str, work: Work) -> None:
        """One turn of a container's worker: the restart calls decided for it, then a look."""
        for call in work.calls:
            call()  # RestartRunner.carry: its failures logged there
        if work.look:
            self.react(container_id, work.detected_at, work.source)

    def react(self, container_id: str, detected_at: datetime | None, source: str) -> None:
        try:
            self.app.healer.react(container_id, detected_at, source)
        except StoreError as exc:
            self._store_failed("event check", exc)
        except Exception:
            log.exception("event check failed", extra=kv(container_id=container_id[:12]))
        finally:
            self.work_changed()

    # -- the event listener (entrypoints/event_listener.py) ----------------------------------

    def listen(self) -> None:
        self.events = EventListener(self.app, self.stopping, self.react_soon, self.kick_sweep)
        self.events.run()

    def react_soon(self, container_id: str, at: datetime | None) -> None:
        """Look at a container (an event named it) on its worker; the caller goes on."""
        with contextlib.suppress(RuntimeError):  # Guardian is stopping: the next start judges
            self.reactions.add(container_id, at)

    def kick_sweep(self) -> None:
        """Run the sweep now (after a reconnect), instead of waiting for the interval."""
        # JobLookupError or SchedulerNotRunningError: the scheduler is shutting down.
        with contextlib.suppress(Exception):
            self.scheduler.modify_job("sweep", next_run_time=datetime.now(UTC))

    # -- health and routes (entrypoints/health.py) -------------------------------------------

    def healthz(self) -> tuple[bool, str]:
        ok, reason = health.healthz(self.systemd.liveness, self.last_turn_at, self.engine_error)
        # Still alive: a restart of Guardian would lose what the store holds in memory.
        degraded = self.app.store_degraded()
        reason = f"{reason}; {degraded}" if degraded else reason
        return ok, "; ".join(r for r in (reason, self.squatted, self.claimed) if r)

    def readyz(self) -> tuple[bool, str]:
        return health.readyz(self.app)

    def routes(self) -> Routes:
        return health.routes(self.app, self.healthz, self.readyz)

    # -- lifecycle --------------------------------------------------------------------------

    def schedule(self) -> None:
        """Add the jobs: the sweep, verification and probes (paused until needed), retention."""
        self.scheduler.add_job(
            self.sweep_job,
            "interval",
            id="sweep",
            seconds=self.app.settings["watch.interval"].total_seconds(),
            next_run_time=datetime.now(UTC),
        )
        self.scheduler.add_job(
            self.verify,
            "interval",
            id="verify",
            seconds=VERIFY_TICK.total_seconds(),
            next_run_time=None,  # paused until a restart awaits verification
        )
        self.scheduler.add_job(
            self.look_for_approvals,
            "interval",
            id="approvals",
            seconds=APPROVAL_TICK.total_seconds(),
            next_run_time=None,  # paused until a restart awaits a person's approval
        )
        self.scheduler.add_job(
            self.run_probes,
            "interval",
            id="probes",
            seconds=PROBE_TICK.total_seconds(),
            next_run_time=None,  # paused until a sweep finds a container with a probe
        )
        self.scheduler.add_job(
            self.sample_resources,
            "interval",
            id="resources",
            seconds=self.app.settings["resources.interval"].total_seconds(),
            next_run_time=None,  # paused until a sweep finds a container with a resource limit
        )
        self.scheduler.add_job(
            self.prune,
            "interval",
            id="retention",
            seconds=RETENTION_TICK.total_seconds(),
            next_run_time=datetime.now(UTC),
        )

    def start(self) -> None:
        settings = self.app.settings
        if settings["watch.events"]:
            # Before the first sweep: what it inspects may fill the container cache, as the
            # event listener replays the engine's events from now (docs/design.md rule 18).
            self.app.loop.follows_events(self.app.clock.now())
        self.schedule()
        limits = Limits(streams=settings["page.streams"])
        front = Front.of(
            settings["http.listen"],
            settings["http.allowed_hosts"],
            settings["http.trusted_proxies"],
            # Prometheus scraping host-a:9321 names the host as it calls itself.
            hostname=socket.gethostname(),
        )
        self.http = HttpServer(settings["http.listen"], self.routes(), limits, front)
        try:
            self.http.start()
        except ListenError:
            self.app.edges.close()
            raise
        # Restart calls now run on their containers' workers (each holds one until the engine
        # has stopped and started its container), and rechecks are delayed looks.
        self.app.restarts.start(self.reactions, self.slot_freed)
        self.app.logs.start()  # log rules: followed from the first sweep on
        self.watch_store()  # before the first sweep: its look is the watch's, one at a time
        self.scheduler.start()
        if self.app.delivery is not None:
            self.app.delivery.start()
        if settings["watch.events"]:
            self._listener = threading.Thread(target=self.listen, name="events", daemon=True)
            self._listener.start()
        log.info(
            "guardian started",
            extra=kv(
                interval=settings["watch.interval"].total_seconds(),
                label=settings["watch.label"],
                events=settings["watch.events"],
                dry_run=settings["restart.dry_run"],
                store=str(getattr(self.app.store, "path", "")),
            ),
        )
        self.systemd.serving(STARTING)

    def watch_store(self) -> None:
        """Hear other processes' writes to the store as they land (runtime/store_watch.py): a
        person's command reaches the page and the channels at once; where the store cannot be
        watched, after the next sweep."""
        path = self.app.store_file
        if self.app.elsewhere is None or path is None:
            return
        self.store_watch, reason = StoreWatch.of(path)
        if self.store_watch is None:
            log.info(
                "store not watched; other processes' writes are found after each sweep",
                extra=kv(reason=reason),
            )
            return
        self._store_watcher = threading.Thread(
            target=self.store_watch.run,
            args=(self.look_elsewhere,),
            name="store-watch",
            daemon=True,  # a look held up by the store never holds up the process's end
        )
        self._store_watcher.start()

    def unwatch_store(self) -> None:
        """Stop the store watch's thread (a look under way ends first) and release the watch."""
        watch, thread = self.store_watch, self._store_watcher
        if watch is None or thread is None:
            return
        watch.stop()
        thread.join(timeout=5)
        if not thread.is_alive():  # else its descriptors go with the process
            watch.close()

    def reschedule_sweep(self) -> None:
        """A reload changed watch.interval: the sweep job, and what counts as a stall."""
        self.systemd.liveness.set_limit(stall_limit(self.app.settings))
        seconds = self.app.settings["watch.interval"].total_seconds()
        with contextlib.suppress(Exception):  # the scheduler is shutting down
            self.scheduler.reschedule_job("sweep", trigger="interval", seconds=seconds)

    def stop(self) -> None:
        """Stop the jobs, give restart calls in flight STOP_GRACE to record their outcomes (the
        rest are left to the engine), close the store."""
        self.stopping.set()
        log.info("guardian stopping")
        self.systemd.stopping()
        self.app.engine.stop_events()  # ends a blocked event stream; in-flight calls go on
        self.app.logs.stop()  # ends the log followers' streams
        if self.app.hooks is not None:
            self.app.hooks.stop()  # kills running hooks now, whatever their timeouts
        self.scheduler.shutdown(wait=True)
        left = self.reactions.close(REACTION_GRACE.total_seconds(), STOP_GRACE.total_seconds())
        if left:
            log.warning(
                "restarts left to the engine; the next start reconciles them",
                extra=kv(count=left),
            )
        self.app.loop.leave_calls_to_engine()  # what they return is the next start's to reconcile
        if self.http is not None:
            self.http.stop()
        if self._listener is not None:
            self._listener.join(timeout=5)
        self.unwatch_store()
        if self.app.delivery is not None:
            self.app.delivery.stop()
        self.app.edges.close()
        log.info("guardian stopped")

    def run_forever(self) -> None:
        """The main thread: asleep until a signal, a job with news for it, or a watchdog ping
        falls due; then it stops, reloads, pings, and resumes or pauses the probe and verify
        jobs."""
        signal.set_wakeup_fd(self.wakeup.signal_fd, warn_on_full_buffer=False)
        for signum in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
            signal.signal(signum, lambda signum, _frame: self._signalled.append(signum))
        self.start()
        try:
            while not self.stopping.is_set():
                self._handle_signals()
                if self.stopping.is_set():
                    break
                self.systemd.tick()
                self.follow_work()
                self.wakeup.wait(self.systemd.next_tick_in())
        finally:
            self.stop()
            signal.set_wakeup_fd(-1)
            self.wakeup.close()

    def _handle_signals(self) -> None:
        while self._signalled:
            signum = self._signalled.pop(0)
            if signum == signal.SIGHUP:
                self.reloader.reload()
                continue
            log.info("signal received", extra=kv(signal=signal.Signals(signum).name))
            self.stopping.set()
