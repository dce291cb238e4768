"""The promises about Guardian's record, read from its store after each step: nothing reported
healed that the engine did not show well then, one open incident per (container, problem), one
"opened" notification per incident and recurrence; a person's stop kept only when a person made
it; once delivery drains, nothing left queued.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime, timedelta

from guardian.adapters.sqlite.schema import to_text
from guardian.adapters.sqlite.store import SqliteStore
from guardian.core.engine_record import EARLY, LATE
from guardian.core.incidents import GUARDIAN
from guardian.core.model import HOST_PROBLEMS, Outcome
from guardian.service.watchers.stop_records import MARK
from tests.sim.oracle import Oracle, Promise

# A resolution that tells of no health: the container went away or another took its name.
NOT_HEALED = ("container removed", "container replaced")
# A restart's verdicts: it was verified, nothing awaits it.
VERDICTS = (str(Outcome.SUCCEEDED), str(Outcome.UNHEALTHY_AFTER_RESTART))
STOP_TIMEOUT = timedelta(seconds=10)  # every container's under simulation


@dataclass(repr=False)
class Records:
    """Reads the store's feed of events (GET /api/v1/events) from where it left off."""

    oracle: Oracle
    cursor: int = 0  # the store's events read
    outbox_cursor: int = 0  # the outbox's rows read
    marks: dict[str, str] = field(default_factory=dict)  # a person's stops kept, as last read

    def after_step(self, store: SqliteStore, host: str) -> None:
        self._healed(store, host)
        self._one_incident(store)
        self._one_opening(store)
        self._kept_stops(store, host)

    def _kept_stops(self, store: SqliteStore, host: str) -> None:
        """Each person's stop the store began to keep since the last look (a mark written or
        moved): a person made it (Oracle.kept)."""
        rows = store.db.query(
            "SELECT name, at FROM marks WHERE host=? AND substr(name, 1, ?)=?",
            (host, len(MARK), MARK),
        )
        for r in rows:
            if self.marks.get(r["name"]) != r["at"]:
                self.marks[r["name"]] = r["at"]
                name, at = r["name"][len(MARK) :], datetime.fromisoformat(r["at"])
                self.oracle.kept(name, at, self._judged(store, host, name, at))

    @staticmethod
    def _judged(store: SqliteStore, host: str, name: str, at: datetime) -> bool:
        """Whether the store holds a restart of `name` whose call may have made a stop at `at`
        (asked from EARLY after it back to its stop timeout and LATE before it) with its verdict
        written: nothing in memory (a claim, a verification) tells Guardian it was its own."""
        rows = store.db.query(
            "SELECT outcome FROM actions WHERE host=? AND container=? AND kind='restart'"
            " AND requested_at>=? AND requested_at<=?",
            (host, name, to_text(at - STOP_TIMEOUT - LATE), to_text(at + EARLY)),
        )
        return any(r["outcome"] in VERDICTS for r in rows)

    def _healed(self, store: SqliteStore, host: str) -> None:
        """Each resolution Guardian made and each restart it called succeeded: the engine
        showed that container well at that wall time (within some step)."""
        while True:
            events = store.events_after(host, self.cursor, 500)
            for e in events:
                self.cursor = e.cursor
                claim = self._claim(store, e.kind, e.incident_id, e.fields)
                if claim is None:
                    continue
                container_id, what = claim
                self.oracle.checked += 1
                if not self.oracle.was_well(container_id, e.at):
                    self.oracle.violated(
                        Promise.HEALED, f"{what} of {e.container} at {e.at.isoformat()}"
                    )
            if len(events) < 500:
                return

    @staticmethod
    def _claim(
        store: SqliteStore, kind: str, incident_id: int | None, fields: object
    ) -> tuple[str, str] | None:
        """(container id, what was claimed) when the event says Guardian found it healed."""
        assert isinstance(fields, dict)
        if kind == "action.outcome" and fields.get("outcome") == "succeeded":
            rows = store.db.query(
                "SELECT container_id FROM actions WHERE id=?", (fields["action"],)
            )
            return str(rows[0]["container_id"]), "restart succeeded"
        if kind != "incident.changed" or fields.get("to") != "resolved":
            return None
        if fields.get("actor") != GUARDIAN or str(fields.get("reason")).startswith(NOT_HEALED):
            return None
        incident = store.get_incident(incident_id or 0)
        assert incident is not None
        if incident.type in HOST_PROBLEMS:
            return None  # about the host (the engine answers again, a storm is over)
        return incident.container_id, f"incident {incident_id} resolved ({fields.get('reason')})"

    def _one_incident(self, store: SqliteStore) -> None:
        rows = store.db.query(
            "SELECT container, type, COUNT(*) AS n FROM incidents WHERE state != 'closed'"
            " GROUP BY host, container, type HAVING n > 1"
        )
        self.oracle.checked += 1
        for r in rows:
            self.oracle.violated(
                Promise.ONE_INCIDENT, f"{r['n']} open {r['type']} incidents of {r['container']}"
            )

    def _one_opening(self, store: SqliteStore) -> None:
        """Each incident an opening was queued for since the last look: its openings are at
        most one more than its recurrences."""
        fresh = store.db.query(
            "SELECT id, incident_id FROM outbox WHERE id > ? AND kind='opened' ORDER BY id",
            (self.outbox_cursor,),
        )
        self.oracle.checked += 1
        for incident in sorted({r["incident_id"] for r in fresh if r["incident_id"] is not None}):
            n = store.db.query(
                "SELECT COUNT(*) FROM outbox WHERE kind='opened' AND incident_id=?", (incident,)
            )[0][0]
            again = store.db.query(
                "SELECT COUNT(*) FROM transitions WHERE incident_id=?"
                " AND from_state='resolved' AND to_state='active'",
                (incident,),
            )[0][0]
            if n > 1 + again:
                self.oracle.violated(
                    Promise.ONE_OPENING,
                    f"incident {incident}: {n} openings queued, {again} recurrences",
                )
        if fresh:
            self.outbox_cursor = fresh[-1]["id"]

    @staticmethod
    def queued(store: SqliteStore) -> int:
        """Notifications not yet fanned out, and deliveries still pending."""
        left = store.db.query("SELECT COUNT(*) FROM outbox WHERE dispatched != 1")[0][0]
        pending = store.db.query("SELECT COUNT(*) FROM deliveries WHERE state='pending'")[0][0]
        return int(left) + int(pending)

    def drained(self, store: SqliteStore) -> None:
        """After delivery drained: every notification fanned out, and each delivery delivered,
        dead-lettered or (sent without an answer to a channel that cannot deduplicate) unknown,
        which is never resent (docs/design.md rule 6)."""
        left = store.db.query("SELECT COUNT(*) FROM outbox WHERE dispatched != 1")[0][0]
        pending = store.db.query("SELECT COUNT(*) FROM deliveries WHERE state='pending'")[0][0]
        self.oracle.checked += 1
        if left or pending:
            self.oracle.violated(
                Promise.DRAINED,
                f"{left} notifications not fanned out, {pending} deliveries pending",
            )
