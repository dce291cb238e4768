"""A container awaits at most one approval, for the container seen last, and no longer once a
decision stops waiting for one, its problem ends or it is gone."""

from __future__ import annotations

from pathlib import Path

from guardian.service.state.state import Approvals
from tests.app import make_app


def test_a_container_awaits_one_approval_for_the_container_seen_last() -> None:
    approvals = Approvals()
    approvals.awaiting("db", "old-id")
    approvals.awaiting("db", "new-id")  # recreated under the same name
    approvals.awaiting("web", "web-id")
    assert approvals.awaited() == {"db": "new-id", "web": "web-id"}
    approvals.awaiting("web", None)
    approvals.keep_only({"web"})
    assert approvals.awaited() == {}


def test_an_approval_is_awaited_once_while_asked_and_not_after_the_restart_or_removal(
    tmp_path: Path,
) -> None:
    w = make_app(tmp_path, restart={"cooldown": "2s", "action": "ask", "approval_ttl": "10m"})
    w.engine.add("db", health="unhealthy")
    w.engine.add("cache", health="unhealthy")
    approvals = w.healer.ctx.state.approvals
    for _ in range(3):
        w.healer.sweep()
        w.clock.advance(60)
    assert approvals.awaited() == {"db": w.engine.id_of("db"), "cache": w.engine.id_of("cache")}
    [incident] = w.store.open_incidents(w.host, "db")
    w.app.operator.answer(incident.id or 0, True, "ana")
    w.healer.sweep()
    assert w.restarted() == ["db"] and approvals.awaited() == {"cache": w.engine.id_of("cache")}
    w.engine.remove("cache")
    w.healer.sweep()
    assert approvals.awaited() == {}
