"""The host's recent history as the status page's strip reads it: every container's problem
spans, silences and actions since a time, and Guardian's runs, in four queries whatever the
number of containers (the actions by the index on host, kind and time)."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Collection
from datetime import datetime

from guardian.adapters.sqlite.db import Database
from guardian.adapters.sqlite.schema import from_text, to_text
from guardian.core.history import RUN_MARK, ContainerHistory, History, Mark, Shade, Span
from guardian.core.model import HOST_SUBJECT, ActionKind, ProblemType

MARKED = tuple(
    str(k) for k in (ActionKind.RESTART, ActionKind.STOP, ActionKind.RECREATE, ActionKind.ROLLBACK)
)
_OPEN = ("active", "acknowledged", "in_progress")


def _among(containers: Collection[str] | None) -> tuple[str, tuple[str, ...]]:
    if containers is None:
        return "", ()
    names = tuple(containers)
    return f" AND container IN ({','.join('?' * len(names))})", names


def read_history(
    db: Database, host: str, since: datetime, containers: Collection[str] | None = None
) -> History:
    """What happened to `containers` (None: every one) of `host` since `since`; Guardian's
    runs only with every container (a read of some is to bring theirs up to date)."""
    among, names = _among(containers)
    cut = to_text(since)
    spans: dict[str, list[Span]] = defaultdict(list)
    for row in db.query(
        "SELECT id, container, type, state, COALESCE(problem_since, opened_at) AS start,"
        " COALESCE(resolved_at, closed_at) AS ended FROM incidents WHERE host=? AND"
        f" container != ? AND (state IN {_OPEN} OR COALESCE(resolved_at, closed_at) >= ?)"
        f"{among} ORDER BY id",
        (host, HOST_SUBJECT, cut, *names),
    ):
        shade = Shade.STOPPED if row["type"] == ProblemType.EXITED else Shade.UNHEALTHY
        ended = None if row["state"] in _OPEN else from_text(row["ended"])
        start = datetime.fromisoformat(row["start"])
        spans[row["container"]].append(Span(shade, start, ended, row["id"]))
    silenced: dict[str, list[tuple[datetime, datetime]]] = defaultdict(list)
    for row in db.query(
        "SELECT container, created_at, COALESCE(ended_at, until) AS ended FROM silences"
        f" WHERE host=? AND until>=? AND (ended_at IS NULL OR ended_at>=?){among}"
        " ORDER BY created_at",
        (host, cut, cut, *names),
    ):
        start, ended = _at(row["created_at"]), _at(row["ended"])
        held = silenced[row["container"]]
        if held and start <= held[-1][1]:  # a silence set again: one span
            held[-1] = (held[-1][0], max(held[-1][1], ended))
        else:
            held.append((start, ended))
    for name, held in silenced.items():
        spans[name].extend(Span(Shade.MAINTENANCE, start, ended) for start, ended in held)
    marks: dict[str, list[Mark]] = defaultdict(list)
    for row in db.query(
        "SELECT container, kind, requested_at, outcome FROM actions WHERE host=? AND kind IN"
        f" ({','.join('?' * len(MARKED))}) AND requested_at>=?{among} ORDER BY requested_at",
        (host, *MARKED, cut, *names),
    ):
        at = datetime.fromisoformat(row["requested_at"])
        marks[row["container"]].append(Mark(row["kind"], at, row["outcome"]))
    runs = (
        db.query(
            "SELECT name, at FROM marks WHERE host=? AND name>=? AND name<? AND at>=?",
            (host, RUN_MARK, RUN_MARK[:-1] + ";", cut),
        )
        if containers is None
        else ()  # the runs are the host's, read with every container
    )
    first = len(RUN_MARK)
    return History(
        {
            name: ContainerHistory(tuple(spans.get(name, ())), tuple(marks.get(name, ())))
            for name in spans.keys() | marks.keys()
        },
        tuple(sorted((_at(r["name"][first:]), _at(r["at"])) for r in runs)),
    )


def _at(text: str) -> datetime:
    return datetime.fromisoformat(text)
