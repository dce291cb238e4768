"""The ladder's rollback rung through the loop, over fakes: a new record that failed early is
replaced under its name by the last record of the name that ran healthy (its image by ID, its
configuration as a whole); what does not apply is refused with the reason, the ladder moving on;
a rollback is never rolled back, nor the same failed image twice within the window."""

from __future__ import annotations

import json
from datetime import timedelta
from pathlib import Path
from typing import Any

from guardian.core.escalation.rollback import Kept, digest
from guardian.core.model import ActionKind, ContainerSnapshot, Outcome, RemediationAction
from tests.app import TestApp, make_app
from tests.fakes import fake_record
from tests.rollbacks import LABELS, V1, V2, rollbacks, rolling, version, web


def ran_v1_then_v2_failed(w: TestApp) -> None:
    """v1 seen healthy and kept; then v2 in its place, never healthy, its one restart spent."""
    version(w, 1)
    w.healer.sweep()
    [kept] = w.store.kept_records(w.host, "web")
    assert kept.image_id == V1 and kept.healthy_at is not None
    w.clock.advance(60)
    version(w, 2, health="unhealthy")
    w.engine.after_restart_health = "unhealthy"  # restarts do not help v2
    w.healer.sweep()
    assert w.engine.steps == [("restart", "web")]
    w.engine.after_restart_health = "healthy"  # what the rollback creates runs healthy


def test_a_new_record_that_failed_is_rolled_back_to_the_last_that_ran_healthy(
    tmp_path: Path,
) -> None:
    w = rolling(tmp_path)
    ran_v1_then_v2_failed(w)
    w.climb(20)
    assert w.engine.steps == [("restart", "web"), ("remove", "web"), ("create", "web")]
    record = w.engine.record(web(w).id)
    assert record is not None
    assert record["Image"] == V1
    config = record["Config"]
    assert isinstance(config, dict)
    assert config["Env"] == ["VERSION=1"] and config["Cmd"] == ["serve-v1"]  # v1's, whole
    assert config["Labels"] == LABELS  # Compose still owns it
    [rollback] = rollbacks(w)
    assert rollback.successor == web(w).id and rollback.outcome is Outcome.SUCCEEDED
    assert json.loads(rollback.record)["Image"] == V1  # what was created, stored first
    assert json.loads(rollback.replaced)["Image"] == V2  # what was removed, stored first
    [told] = [n["detail"] for n in w.queued() if "rolled back to" in n["detail"]]
    assert "first unhealthy 0s after it was created from app:latest (sha256:2222" in told
    assert "rolled back to app:latest (sha256:1111" in told
    [incident] = w.store.list_incidents(w.host, container="web")
    assert incident.resolved_by == "guardian"  # verified healthy, as a restart is
    rollbacks_decided = w.metric(
        "guardian_restart_decisions_total", decision="rollback", reason="escalated"
    )
    assert rollbacks_decided == 1
    [failed] = [k for k in w.store.kept_records(w.host, "web") if k.image_id == V2]
    assert failed.failed_at is not None and failed.healthy_at is None


def test_a_container_that_never_ran_healthy_on_any_record_is_not_rolled_back(
    tmp_path: Path,
) -> None:
    w = rolling(tmp_path)
    version(w, 2, health="unhealthy")
    w.engine.after_restart_health = "unhealthy"
    w.climb(20)
    assert w.engine.steps == [("restart", "web"), ("stop", "web")]  # the ladder went on
    assert (w.engine.record(web(w).id) or {})["Image"] == V2  # its image unchanged
    [refused] = rollbacks(w)
    assert refused.outcome is Outcome.POLICY_DENIED
    assert "rollback refused: no earlier record of web ran healthy" in refused.detail
    assert "docker compose -p shop up -d web" in refused.detail  # what a person would run


def test_a_record_that_ran_healthy_beyond_the_monitor_is_not_rolled_back(tmp_path: Path) -> None:
    w = rolling(tmp_path, rollback_monitor="5m")
    version(w, 1)
    w.healer.sweep()
    w.clock.advance(60)
    version(w, 2)  # v2 runs healthy ...
    w.healer.sweep()
    w.clock.advance(600)  # ... for ten minutes, then fails
    w.engine.containers[web(w).id] = ContainerSnapshot(**{**web(w).__dict__, "health": "unhealthy"})
    w.engine.after_restart_health = "unhealthy"
    w.climb(20)
    assert w.engine.steps == [("restart", "web"), ("stop", "web")]
    [refused] = rollbacks(w)
    assert "beyond restart.rollback_monitor (5m): the update did not fail early" in refused.detail


def test_a_rollback_whose_image_was_removed_is_refused_with_the_command(tmp_path: Path) -> None:
    w = rolling(tmp_path)
    ran_v1_then_v2_failed(w)
    w.engine.images = {V2}  # v1's image was pruned since
    w.climb(20)
    assert ("remove", "web") not in w.engine.steps  # nothing removed
    [refused] = rollbacks(w)
    assert "no longer on the host and Guardian pulls nothing" in refused.detail
    assert "docker pull the version of app:latest that ran healthy" in refused.detail
    assert ("stop", "web") in w.engine.steps  # the ladder moved on


def test_a_second_update_to_the_same_failed_image_is_not_rolled_back_again(
    tmp_path: Path,
) -> None:
    w = rolling(tmp_path)
    ran_v1_then_v2_failed(w)
    w.climb(20)
    assert len(rollbacks(w)) == 1
    w.clock.advance(120)
    version(w, 2, health="unhealthy")  # Watchtower's next run updates it again
    w.engine.after_restart_health = "unhealthy"
    w.climb(20)
    assert [s for s, _ in w.engine.steps[-2:]] == ["restart", "stop"]  # not removed again
    done, refused = rollbacks(w)
    assert done.outcome is Outcome.SUCCEEDED
    assert refused.outcome is Outcome.POLICY_DENIED
    assert "failed and was rolled back from at" in refused.detail
    assert "not rolled back a second time" in refused.detail


def test_what_a_rollback_made_is_never_rolled_back(tmp_path: Path) -> None:
    w = rolling(tmp_path, max_attempts=1, reset_after="1h")
    ran_v1_then_v2_failed(w)
    w.climb(20)
    w.clock.advance(30)
    restored = web(w)
    w.engine.containers[restored.id] = ContainerSnapshot(
        **{**restored.__dict__, "health": "unhealthy"}
    )
    w.engine.after_restart_health = "unhealthy"
    w.climb(20)
    assert len(rollbacks(w)) == 1  # its rung was taken: the ladder goes on to stop
    assert w.engine.steps[-1] == ("stop", "web")


def test_a_crash_between_the_removal_and_the_create_creates_the_old_record_once(
    tmp_path: Path,
) -> None:
    """The store as a Guardian killed after a rollback's removal leaves it: the intent with
    both records, no outcome, no container of the name. The next start creates the container
    from the record that ran healthy, once, and keeps the one it replaced as failed."""
    w = rolling(tmp_path)
    ran_v1_then_v2_failed(w)
    [kept] = w.store.kept_records(w.host, "web")
    v2 = web(w)
    w.store.record_intent(
        RemediationAction(
            None,
            None,
            w.host,
            "web",
            v2.id,
            ActionKind.ROLLBACK,
            w.clock.now(),
            "escalated",
            record=kept.record,
            replaced=json.dumps(w.engine.record(v2.id)),
        )
    )
    w.engine.remove_container(v2.id, timedelta(seconds=1))
    w = w.restart_guardian()
    w.app.verifier.reconcile()
    w = w.restart_guardian()  # and again: never a second create
    w.app.verifier.reconcile()
    assert [s for s, _ in w.engine.steps] == ["restart", "remove", "create"]
    assert (w.engine.record(web(w).id) or {})["Image"] == V1
    [rollback] = rollbacks(w)
    assert rollback.successor == web(w).id
    assert [k.image_id for k in w.store.kept_records(w.host, "web") if k.failed_at] == [V2]


def test_nothing_is_kept_or_inspected_without_the_rung(tmp_path: Path) -> None:
    w = make_app(tmp_path, restart={"escalate": ["recreate", "stop"]})
    version(w, 1)
    w.healer.sweep()
    w.healer.sweep()
    assert w.store.kept_records(w.host, "web") == []


def test_a_container_seen_healthy_again_costs_no_inspect_and_one_record(tmp_path: Path) -> None:
    w = rolling(tmp_path)
    version(w, 1)
    w.healer.sweep()
    inspects = w.engine.inspect_calls
    w = w.restart_guardian()  # a new run: the store has the record, touched, not read again
    w.healer.sweep()
    assert w.engine.inspect_calls - inspects <= 1  # the sweep's own, not the record's
    assert len(w.store.kept_records(w.host, "web")) == 1


def test_the_digest_tells_records_apart_by_image_and_configuration_only() -> None:
    one = fake_record(
        ContainerSnapshot(id="a" * 64, name="web", labels={}, state="running", health=None)
    )
    other_container = {**one, "Id": "b" * 64, "Config": {**one["Config"], "Hostname": "b" * 12}}  # type: ignore[dict-item]
    assert digest(one) == digest(other_container)  # the engine's own hostname is not config
    new_image = {**one, "Image": V2}
    new_env = {**one, "Config": {**one["Config"], "Env": ["A=1"]}}  # type: ignore[dict-item]
    assert len({digest(one), digest(new_image), digest(new_env)}) == 3
    assert digest({"Id": "x"}) == ""  # not an inspect: no record to go back to


def test_a_kept_record_is_private_to_the_store(tmp_path: Path) -> None:
    """The record may hold secrets in its environment: the API's and page's views of actions
    never carry it."""
    from guardian.readside.views import action_view

    w = rolling(tmp_path)
    ran_v1_then_v2_failed(w)
    w.climb(20)
    [rollback] = rollbacks(w)
    shown = json.dumps(action_view(rollback))
    assert "VERSION=1" not in shown and "VERSION=2" not in shown
    assert isinstance(w.store.kept_records(w.host, "web")[0], Kept)


def test_a_record_still_run_is_seen_daily_so_retention_keeps_it(tmp_path: Path) -> None:
    w = rolling(tmp_path)
    version(w, 1)
    w.healer.sweep()
    [first] = w.store.kept_records(w.host, "web")
    w.clock.advance(86_400 + 60)
    w.healer.sweep()
    [later] = w.store.kept_records(w.host, "web")
    assert later.seen_at - first.seen_at >= timedelta(days=1)
    w.store.prune(first.seen_at + timedelta(hours=1))
    assert w.store.kept_records(w.host, "web") == [later]  # seen since the cut-off: kept
    w.store.prune(later.seen_at + timedelta(hours=1))
    assert w.store.kept_records(w.host, "web") == []  # a name not seen since: forgotten


def test_containers_whose_owners_fill_their_records_cannot_fill_the_store(
    tmp_path: Path, monkeypatch: Any
) -> None:
    """Whoever runs a container writes its environment and labels: a record beyond
    MAX_RECORD_CHARS is not kept, and all names' records stay within the store's budget, the
    least recently seen going first."""
    from guardian.adapters.sqlite import kept as kept_table
    from guardian.core.escalation.rollback import MAX_RECORD_CHARS

    w = rolling(tmp_path)
    huge = w.engine.add("huge", labels=LABELS)
    w.engine.record_extra["huge"] = {"Config": {"Env": ["X=" + "x" * MAX_RECORD_CHARS]}}
    w.healer.sweep()
    assert w.store.kept_records(w.host, "huge") == []
    del w.engine.containers[huge.id]
    monkeypatch.setattr(kept_table, "MAX_KEPT_BYTES", 3_000)  # about three small records
    for n in range(12):
        w.engine.add(f"app{n}", labels=LABELS)
        w.healer.sweep()
        w.clock.advance(1)
    sizes = w.store.db.query("SELECT name, size FROM kept_records ORDER BY seen_at")
    assert sum(r["size"] for r in sizes) <= 3_000
    assert sizes[-1]["name"] == "app11"  # the latest kept; the least recently seen went


def test_the_page_says_rolled_back(tmp_path: Path) -> None:
    from guardian.entrypoints.page.render import Renderer
    from guardian.readside.page import PageReader

    w = rolling(tmp_path)
    ran_v1_then_v2_failed(w)
    w.climb(20)
    reader = PageReader(w.healer, w.app.operator, w.app.changes)
    page = Renderer().parts(reader.read(with_output=True), signed=True)["part-actions"]
    assert "<td>rolled back (incident #1)</td><td>succeeded</td>" in page
    assert "VERSION=" not in page  # the records stay in the store
