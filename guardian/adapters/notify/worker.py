"""DeliveryWorker: drains the outbox on its own thread, so healing never waits on delivery.

Each tick: fan new events out to every channel, queue reminders for escalated incidents, then
send at most one message per channel whose pacing allows it (grouping bursts within
group_wait), and record each typed outcome. Time comes from the Clock; tests call tick().
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta

from guardian.adapters.sqlite.outbox import QueuedDelivery, SqliteOutbox
from guardian.core.delivery import Result, RetryPolicy, RowState, Status, next_state, pick_batch
from guardian.core.notifications import reminder
from guardian.logs import kv
from guardian.metrics import Metrics
from guardian.ports import Clock, Notifier
from guardian.secrets import Redactor

log = logging.getLogger("guardian.notify")
REMINDER_CHECK = timedelta(seconds=30)  # how often to look for reminders that are due


@dataclass(frozen=True)
class WorkerSettings:
    host: str
    group_wait: timedelta = timedelta(seconds=10)
    repeat_interval: timedelta = timedelta(hours=4)
    retry: RetryPolicy = field(default_factory=RetryPolicy)
    poll: timedelta = timedelta(milliseconds=250)  # while anything waits in the outbox
    idle_poll: timedelta = timedelta(seconds=1)  # while it is empty (idle CPU, bench/RESULTS.md)


def _outcome(result: Result, state: RowState) -> str:
    """The metric's outcome label (metrics.NOTIFICATION_OUTCOMES) for one send."""
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
        outbox: SqliteOutbox,
        channels: Sequence[Notifier],
        clock: Clock,
        metrics: Metrics,
        settings: WorkerSettings,
        redact: Redactor | None = None,
    ) -> None:
        self.outbox = outbox
        self.channels = list(channels)
        self.clock = clock
        self.metrics = metrics
        self.settings = settings
        self.redact = redact or Redactor()
        self._next_send: dict[str, datetime] = {}
        self._reminders_checked: datetime | None = None
        self._depth = 0
        for channel in self.channels:
            metrics.add_notification_channel(channel.name)
        self._stopping = threading.Event()
        self._thread: threading.Thread | None = None

    # -- one pass ---------------------------------------------------------------------------

    def tick(self) -> int:
        """Do what is due now; returns how many messages were sent (whatever their outcome)."""
        now = self.clock.now()
        self.outbox.fan_out([c.name for c in self.channels])
        self._remind(now)
        sent = 0
        for channel in self.channels:
            if self._stopping.is_set():
                break
            sent += self._deliver(channel, now)
            refresh = getattr(channel, "refresh", None)
            if refresh is not None:
                refresh()
        self._depth = self.outbox.queue_depth()
        self.metrics.notification_queue_depth.set(self._depth)
        return sent

    def _remind(self, now: datetime) -> None:
        last = self._reminders_checked
        if not self.channels or (last is not None and now - last < REMINDER_CHECK):
            return
        self._reminders_checked = now
        due = self.outbox.reminders_due(self.settings.host, self.settings.repeat_interval, now)
        for incident, opened_at in due:
            self.outbox.enqueue([reminder(incident, now - opened_at, now)])
            log.info(
                "reminder queued", extra=kv(incident=incident.id, container=incident.container)
            )

    def _deliver(self, channel: Notifier, now: datetime) -> int:
        if now < self._next_send.get(channel.name, now):
            return 0
        queued = self.outbox.pending(channel.name)
        if not queued:
            return 0
        batch = pick_batch(
            [q.pending for q in queued], self.settings.group_wait, channel.max_batch, now
        )
        if not batch:
            return 0
        chosen = {p.row_id for p in batch}
        rows = [q for q in queued if q.pending.row_id in chosen]
        try:
            result = channel.send([q.notification for q in rows])
        except Exception as exc:  # noqa: BLE001 - a channel bug must not stop the worker
            result = Result(Status.TRANSIENT, f"channel error: {type(exc).__name__}")
        done = self.clock.now()
        reason = self.redact(result.reason)
        attempts = max(q.attempts for q in rows) + 1
        nxt = next_state(result, attempts, self.settings.retry, channel.idempotent, done)
        self.outbox.record([q.pending.row_id for q in rows], nxt, reason, done)
        self._next_send[channel.name] = done + channel.min_interval
        if result.status is Status.RATE_LIMITED and nxt.at is not None:
            self._next_send[channel.name] = max(self._next_send[channel.name], nxt.at)
        for _ in rows:
            self.metrics.count_notification(channel.name, _outcome(result, nxt.state))
        self._log(channel, rows, result, nxt.state, nxt.at, reason)
        return 1

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

    # -- the thread -------------------------------------------------------------------------

    def run(self) -> None:
        while not self._stopping.is_set():
            try:
                self.tick()
            except Exception:
                log.exception("notification delivery failed")
            poll = self.settings.poll if self._depth else self.settings.idle_poll
            self._stopping.wait(poll.total_seconds())

    def start(self) -> None:
        if self._thread is None:
            names = ",".join(c.name for c in self.channels) or "none"
            log.info("notification worker started", extra=kv(channels=names))
            self._thread = threading.Thread(target=self.run, name="notify", daemon=True)
            self._thread.start()

    def stop(self, timeout: float = 5.0) -> None:
        """Stop after the send in flight, waiting at most `timeout`: a send still hanging then
        stays pending in the outbox and is judged again after the next start."""
        self._stopping.set()
        if self._thread is not None:
            self._thread.join(timeout)
            self._thread = None
