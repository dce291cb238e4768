"""DeliveryWorker: drains the outbox on its own thread, so healing never waits on delivery.

Each tick: fan new events out to every channel, queue reminders for escalated incidents, then
send at most one message per channel whose pacing allows it (grouping bursts within
group_wait), and record each typed outcome. Between ticks the thread sleeps until woken (a row
was queued: wake()) or until the next send falls due. Time comes from the Clock; tests call tick().
A channel's pacing and the worker's waits run on the monotonic clock; the outbox's stamps (queued,
retry at, reminded) are the store's, on the wall clock (docs/design.md rule 12).
"""

from __future__ import annotations

import logging
import threading
from collections import deque
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta

from guardian.core.facts import DeliveryGivenUp, Fact, NotificationsNotQueued
from guardian.core.outbound.delivery import (
    Result,
    RetryPolicy,
    RowState,
    Status,
    next_batch_at,
    next_state,
    pick_batch,
)
from guardian.core.outbound.notifications import (
    Kind,
    Notification,
    channel_failed,
    reminder,
    unrecorded,
)
from guardian.core.outbound.routing import Routing
from guardian.core.redaction import Redactor
from guardian.core.stamps import Reading
from guardian.logs import kv
from guardian.ports import Clock, Facts, Metrics, Notifier, Outbox, QueuedDelivery
from guardian.service.facts import FactStream

log = logging.getLogger("guardian.notify")
FAILING = "failing:"  # the outbox ref marking a channel whose failure the others were told
# Notifications the store could not queue, held per channel until sent once: a bound, so a long
# outage of both the disk and a channel cannot grow memory (the oldest go first).
DIRECT_MAX = 100


@dataclass(frozen=True)
class WorkerSettings:
    host: str
    group_wait: timedelta = timedelta(seconds=10)
    repeat_interval: timedelta = timedelta(hours=4)
    retry: RetryPolicy = field(default_factory=RetryPolicy)
    # The shortest pause between two ticks, so a channel failing at once cannot spin the thread.
    min_pause: timedelta = timedelta(milliseconds=250)
    on_start: Notification | None = None  # queued when the worker starts (notify.on_start)


def _outcome(result: Result, state: RowState) -> str:
    """The metric's outcome label (prometheus.NOTIFICATION_OUTCOMES) for one send."""
    if state is RowState.DELIVERED:
        return "delivered"
    if result.status is Status.PERMANENT:
        return "permanent_failure"
    if state is RowState.DEAD:
        return "dead_letter"
    if result.status is Status.UNKNOWN:
        return "unknown"
    return "transient_failure"  # 5xx, refused, 429: retried


class DeliveryWorker:
    def __init__(
        self,
        outbox: Outbox,
        channels: Sequence[Notifier],
        clock: Clock,
        metrics: Metrics,
        settings: WorkerSettings,
        redact: Redactor | None = None,
        routing: Routing | None = None,
        facts: Facts | None = None,
    ) -> None:
        self.outbox = outbox
        self.channels = list(channels)
        # Who hears what (None: every channel hears everything).
        self.routing = routing
        self._unknown_warned: set[str] = set()
        self.clock = clock
        self.metrics = metrics
        self.settings = settings
        self.redact = redact or Redactor()
        # Told once a send's rows are recorded as dead letters: the status page lists them.
        self.facts: Facts = facts if facts is not None else FactStream()
        # Moments of the monotonic clock, as every wait held here.
        self._next_send: dict[str, float] = {}
        self._next_reminder: float | None = None
        self._depth = 0
        for channel in self.channels:
            metrics.notification_channel(channel.name)
        self._stopping = threading.Event()
        self._woken = threading.Event()  # set by wake(): rows were queued
        self._due: float | None = None  # the next time a tick has something to send
        # Whether the outbox's stamps were brought behind the clock (Outbox.catch_up) since the
        # run began, and since a step the store refused to follow: only a step no run followed
        # puts one ahead of it.
        self._caught_up = False
        self._thread: threading.Thread | None = None
        # By channel: notifications to send directly, once (the store could not queue them).
        self._unqueued: deque[Notification] = deque(maxlen=DIRECT_MAX)  # not yet routed
        self._direct: dict[str, deque[Notification]] = {
            c.name: deque(maxlen=DIRECT_MAX) for c in self.channels
        }

    def on_fact(self, fact: Fact) -> None:
        """A subscriber of the facts, on the writer's (the loop's) thread: notifications a
        refused store write would have queued are kept for the worker's thread, which routes
        and sends them directly at its next tick, marked, best effort."""
        if isinstance(fact, NotificationsNotQueued):
            dropped = len(self._unqueued) + len(fact.notifications) - DIRECT_MAX
            if dropped > 0:
                log.warning(
                    "notifications not queued and not sent: too many held",
                    extra=kv(dropped=dropped),
                )
            self._unqueued.extend(fact.notifications)  # deque: bounded, thread-safe
            self.wake()

    def _hold_unqueued(self) -> None:
        """Route what the store could not queue to each channel's held messages."""
        while self._unqueued:
            n = self._unqueued.popleft()
            for name in self._select(n):
                held = self._direct.get(name)
                if held is None:
                    continue
                if len(held) == held.maxlen:
                    log.warning(
                        "notification not queued and not sent: too many held for the channel",
                        extra=kv(channel=name, held=len(held)),
                    )
                held.append(unrecorded(n))

    # -- one pass ---------------------------------------------------------------------------

    def tick(self) -> int:
        """Do what is due now; returns how many messages were sent (whatever their outcome)."""
        clocks = Reading(self.clock.now(), self.clock.monotonic())
        self._due = None
        if not self._caught_up:
            # Before fanning out, which copies the queueing stamps into the first tries.
            self.outbox.catch_up(clocks.wall, self.settings.retry.longest)
            self._caught_up = True
        self.outbox.fan_out([c.name for c in self.channels], self._select)
        self._hold_unqueued()
        self._remind(clocks)
        sent = 0
        for channel in self.channels:
            if self._stopping.is_set():
                break
            sent += self._deliver(channel, clocks)
            refresh = getattr(channel, "refresh", None)
            if refresh is not None:
                refresh()
        self._depth = self.outbox.queue_depth()
        self.metrics.notification_queue(self._depth)
        return sent

    def _select(self, n: Notification) -> list[str]:
        """The channels that deliver `n` (the routing's choice, every one without routing);
        a channel's failure goes to every other channel."""
        if n.kind is Kind.CHANNEL_FAILED:
            return [c.name for c in self.channels if c.name != n.channel]
        if self.routing is None:
            return [c.name for c in self.channels]
        for name in self.routing.unknown(n.receivers or ()):
            if name not in self._unknown_warned and len(self._unknown_warned) < 100:
                self._unknown_warned.add(name)
                log.warning(
                    "label guardian.notify names no receiver; its routes and default hear it",
                    extra=kv(container=n.container, receiver=name),
                )
        return self.routing.channels_of(n)

    def _remind(self, clocks: Reading) -> None:
        """Queue the reminders due, and note when the next one will be (the worker wakes then)."""
        if not self.channels:
            return
        now, host, repeat = clocks.wall, self.settings.host, self.settings.repeat_interval
        for incident, opened_at in self.outbox.reminders_due(host, repeat, now):
            self.outbox.enqueue([reminder(incident, now - opened_at, now)])
            log.info(
                "reminder queued", extra=kv(incident=incident.id, container=incident.container)
            )
        at = self.outbox.next_reminder_at(host, repeat)
        self._next_reminder = clocks.mono_of(at) if at is not None else None

    def _due_at(self, at: float | None) -> None:
        """The next tick has something to send at `at` (monotonic), or sooner."""
        if at is not None and (self._due is None or at < self._due):
            self._due = at

    def _deliver(self, channel: Notifier, clocks: Reading) -> int:
        now = clocks.wall
        paced_until = self._next_send.get(channel.name, clocks.mono)
        if clocks.mono < paced_until:
            self._due_at(paced_until)
            return 0
        if self._direct.get(channel.name):
            return self._send_directly(channel)
        queued = self.outbox.pending(channel.name)
        if not queued:
            return 0
        pending = [q.pending for q in queued]
        batch = pick_batch(pending, self.settings.group_wait, channel.max_batch, now)
        if not batch:
            at = next_batch_at(pending, self.settings.group_wait, now)
            self._due_at(clocks.mono_of(at) if at is not None else None)
            return 0
        chosen = {p.row_id for p in batch}
        rows = [q for q in queued if q.pending.row_id in chosen]
        try:
            result = channel.send([q.notification for q in rows])
        except Exception as exc:  # noqa: BLE001 - a channel bug must not stop the worker
            result = Result(Status.TRANSIENT, f"channel error: {type(exc).__name__}")
        after = Reading(self.clock.now(), self.clock.monotonic())
        done = after.wall
        reason = self.redact(result.reason)
        attempts = max(q.attempts for q in rows) + 1
        nxt = next_state(result, attempts, self.settings.retry, channel.idempotent, done)
        self.outbox.record([q.pending.row_id for q in rows], nxt, reason, done)
        paced = after.mono + channel.min_interval.total_seconds()
        if result.status is Status.RATE_LIMITED and nxt.at is not None:
            paced = max(paced, after.mono_of(nxt.at))
        self._next_send[channel.name] = paced
        self._due_at(paced)  # what is left goes out then, at the soonest
        for _ in rows:
            self.metrics.notification_sent(channel.name, _outcome(result, nxt.state))
        self._log(channel, rows, result, nxt.state, nxt.at, reason)
        if nxt.state is RowState.DEAD:
            self.facts.publish(DeliveryGivenUp())
            self._failing(channel, reason, done)
        elif nxt.state is RowState.DELIVERED:
            self._delivering(channel)
        return 1

    def _send_directly(self, channel: Notifier) -> int:
        """One message of what the store could not queue, paced like any send and never
        retried: its outcome is logged and counted, nowhere recorded."""
        held = self._direct[channel.name]
        batch = [held.popleft() for _ in range(min(len(held), max(channel.max_batch, 1)))]
        try:
            result = channel.send(batch)
        except Exception as exc:  # noqa: BLE001 - a channel bug must not stop the worker
            result = Result(Status.TRANSIENT, f"channel error: {type(exc).__name__}")
        paced = self.clock.monotonic() + channel.min_interval.total_seconds()
        self._next_send[channel.name] = paced
        self._due_at(paced)
        state = RowState.DELIVERED if result.ok else RowState.DEAD
        for _ in batch:
            self.metrics.notification_sent(channel.name, _outcome(result, state))
        fields = kv(
            channel=channel.name,
            notifications=len(batch),
            kinds=",".join(sorted({str(n.kind) for n in batch})),
            reason=self.redact(result.reason) or None,
        )
        if result.ok:
            log.info("notification sent directly; the store could not queue it", extra=fields)
        else:
            log.warning("notification the store could not queue was not delivered", extra=fields)
        return 1

    def _failing(self, channel: Notifier, reason: str, now: datetime) -> None:
        """A send to `channel` dead-lettered: the other channels hear it, once until it
        delivers again (the mark is in the store: a restart does not tell them twice)."""
        self.metrics.notification_channel_up(channel.name, False)
        mark = FAILING + channel.name
        if self.outbox.ref(mark, 0) is not None:
            return
        self.outbox.set_ref(mark, 0, now.isoformat())
        if len(self.channels) > 1:
            self.outbox.enqueue([channel_failed(self.settings.host, channel.name, reason, now)])
            log.warning(
                "channel failing; the other channels are told", extra=kv(channel=channel.name)
            )

    def _delivering(self, channel: Notifier) -> None:
        self.metrics.notification_channel_up(channel.name, True)
        if self.outbox.ref(FAILING + channel.name, 0) is not None:
            self.outbox.drop_ref(FAILING + channel.name, 0)
            log.info("channel delivers again", extra=kv(channel=channel.name))

    def _log(
        self,
        channel: Notifier,
        rows: list[QueuedDelivery],
        result: Result,
        state: RowState,
        retry_at: datetime | None,
        reason: str,
    ) -> None:
        fields = kv(
            channel=channel.name,
            notifications=len(rows),
            kinds=",".join(sorted({str(q.notification.kind) for q in rows})),
            reason=reason or None,
            retry_at=retry_at.isoformat() if state is RowState.PENDING and retry_at else None,
        )
        if state is RowState.DELIVERED:
            log.info("notification delivered", extra=fields)
        elif state is RowState.PENDING:
            log.info(f"notification not delivered ({result.status}); will retry", extra=fields)
        elif state is RowState.UNKNOWN:
            log.warning("notification outcome unknown; not resent to this channel", extra=fields)
        elif result.status is Status.PERMANENT:
            log.warning("notification refused by the channel; not retried", extra=fields)
        else:
            log.warning("notification dead-lettered after retries", extra=fields)

    def follow_step(self, step: timedelta) -> None:
        """The wall clock stepped: the outbox's retry times (the store's stamps) move with it
        (Outbox.follow_step), and the worker looks again at once; a channel's pacing and its
        waits run on the monotonic clock and keep their length."""
        try:
            self.outbox.follow_step(step)
        except Exception:
            # Refused (a full disk): what the step left ahead of the clock is brought back by
            # the next tick's catch_up instead, once the store takes it.
            self._caught_up = False
            raise
        finally:
            self.wake()

    # -- the thread -------------------------------------------------------------------------

    def wake(self) -> None:
        """Rows were queued: tick now rather than at the next due time (any thread)."""
        self._woken.set()

    def written_elsewhere(self) -> None:
        """Another process wrote the store (the CLI acknowledging an incident queues its
        notification there, unseen by this process's commits): tick now. The daemon tells it
        as soon as it sees the write, rather than the worker waking on a timer of its own."""
        if self.channels:
            self.wake()

    def pause(self) -> float | None:
        """Seconds the thread may sleep after a tick unless woken (None: until woken): until the
        next send falls due, the next reminder or a channel's next refresh, at least
        min_pause."""
        clocks = Reading(self.clock.now(), self.clock.monotonic())
        wakes = [at for at in (self._due, self._next_reminder) if at is not None]
        for channel in self.channels:
            # A channel that keeps something alive (Alertmanager's firing alerts) says when, on
            # the wall clock.
            next_refresh_at = getattr(channel, "next_refresh_at", None)
            at = next_refresh_at() if next_refresh_at is not None else None
            if at is not None:
                wakes.append(clocks.mono_of(at))
        if not wakes:
            return None
        wait = min(wakes) - clocks.mono
        return max(wait, self.settings.min_pause.total_seconds())

    def run(self) -> None:
        while not self._stopping.is_set():
            self._woken.clear()  # before the tick: a row queued during it wakes the next wait
            try:
                self.tick()
            except Exception:
                log.exception("notification delivery failed")
                self._due = self.clock.monotonic() + self.settings.min_pause.total_seconds()
            if self._stopping.is_set():
                return
            self._woken.wait(self.pause())

    def start(self) -> None:
        if self._thread is None:
            names = ",".join(c.name for c in self.channels) or "none"
            log.info("notification worker started", extra=kv(channels=names))
            if self.settings.on_start is not None and self.channels:
                self.outbox.enqueue([self.settings.on_start])
            self._thread = threading.Thread(target=self.run, name="notify", daemon=True)
            self._thread.start()

    def stop(self, timeout: float = 5.0) -> None:
        """Stop after the send in flight, waiting at most `timeout`: a send still hanging then
        stays pending in the outbox and is judged again after the next start."""
        self._stopping.set()
        self._woken.set()
        if self._thread is not None:
            self._thread.join(timeout)
            self._thread = None
