"""Namespace followers over fakes: a container that joined another's namespace
(`container:<leader>`) is restarted after its leader healed; one whose leader is gone is an
orphan, reported and never restarted. What the engine stores there is hostile input."""

from __future__ import annotations

import json
import logging
import time
from datetime import timedelta

import pytest

from guardian.adapters.engine.engine_payloads import inspect_snapshot, summary_snapshot
from guardian.core.model import ProblemType
from guardian.core.relations.dependencies import DEPENDS_ON, DependencyGraph
from guardian.core.relations.namespaces import MAX_REF, raw_modes, recreate_step, shared
from guardian.ports import EngineEvent
from guardian.readside.views import timeline_view
from tests.app import TestApp, make_app

ON = {"guardian.enable": "true"}
COMPOSE = {
    **ON,
    "com.docker.compose.project": "media",
    "com.docker.compose.service": "app",
}


def told(loop: TestApp) -> list[dict[str, object]]:
    rows = loop.store.db.query("SELECT payload FROM outbox ORDER BY id")
    return [json.loads(r["payload"]) for r in rows]


def vpn_and_app(loop: TestApp, *kinds: str, app_labels: dict[str, str] | None = None) -> str:
    vpn = loop.engine.add("vpn", health="unhealthy")
    loop.engine.add(
        "app",
        labels=app_labels or ON,
        namespaces=tuple((kind, vpn.id) for kind in kinds or ("network",)),
    )
    return vpn.id


# -- what the engine says -------------------------------------------------------------------


def test_the_list_tells_the_network_mode_and_an_inspect_all_three():
    leader = "a" * 64
    item = {
        "Id": "b" * 64,
        "Names": ["/app"],
        "State": "running",
        "Status": "Up",
        "HostConfig": {"NetworkMode": f"container:{leader}"},
    }
    assert summary_snapshot(item).namespaces == (("network", leader),)
    inspected = {
        "Id": "b" * 64,
        "Name": "/app",
        "State": {"Status": "running"},
        "HostConfig": {
            "NetworkMode": f"container:{leader}",
            "PidMode": f"container:{leader}",
            "IpcMode": "private",
        },
    }
    assert inspect_snapshot(inspected).namespaces == (("network", leader), ("pid", leader))
    assert inspect_snapshot({**inspected, "HostConfig": {"NetworkMode": "bridge"}}).namespaces == ()


@pytest.mark.parametrize(
    ("mode", "why"),
    [
        ("container:" + "x" * 1_000_000, "longer than"),
        ("container:$(reboot)", "not a container id or name"),
        ("container:", "not a container id or name"),
        ("container:" + "c" * 64, "names the container itself"),
        ("container:" + "c" * 12, "names the container itself"),
    ],
)
def test_a_hostile_mode_is_refused_with_its_reason(mode, why):
    t0 = time.perf_counter()
    joined, refused = shared("c" * 64, raw_modes({"NetworkMode": mode}))
    assert joined == () and why in refused
    assert time.perf_counter() - t0 < 0.05  # cut before it is looked at: a megabyte costs nothing


def test_raw_modes_ignores_what_is_not_a_container_mode():
    assert raw_modes({"NetworkMode": 7, "PidMode": None, "IpcMode": "host"}) == ()


@pytest.mark.parametrize(
    ("labels", "step"),
    [
        (COMPOSE, "docker compose up -d --force-recreate app in the Compose project media"),
        ({"com.docker.compose.service": "app"}, "docker compose up -d --force-recreate app"),
        ({"com.docker.compose.service": "app; rm -rf /"}, "recreate it"),
        ({"com.docker.compose.service": "$(reboot)"}, "recreate it"),
        ({"com.docker.compose.service": "x" * 500}, "recreate it"),
        ({}, "recreate it"),
    ],
)
def test_the_next_step_names_only_a_service_compose_allows(labels, step):
    assert recreate_step(labels).startswith(step)


# -- the graph ------------------------------------------------------------------------------


def test_namespace_followers_are_merged_with_restart_with_and_ordered_by_dependencies():
    labels = {
        "vpn": {},
        "app": {DEPENDS_ON: "db"},
        "db": {},
        "web": {"guardian.restart_with": "vpn"},
    }
    graph = DependencyGraph(
        labels,
        {"app": [("vpn", "network"), ("vpn", "pid")], "db": [("vpn", "network")]},
    )
    # A namespace follower needs its leader; db before app (app depends on db as well).
    assert graph.followers("vpn") == ["web", "db", "app"]
    assert graph.depends_on("app") == ["db", "vpn"] and graph.depends_on("web") == []
    assert graph.via("vpn", "app") == "network,pid"
    assert graph.via("vpn", "web") == "restart_with"


def test_a_wave_ends_on_a_cycle_and_reaches_each_container_once():
    labels = {n: {} for n in ("a", "b", "c")}
    graph = DependencyGraph(
        labels, {"b": [("a", "network")], "c": [("b", "network")], "a": [("c", "network")]}
    )
    assert graph.followers_after("a", "a") == [("b", "network")]
    assert graph.followers_after("a", "b") == [("c", "network")]
    assert graph.followers_after("a", "c") == []  # a began the wave: never again


def test_a_chain_of_ten_thousand_followers_is_linear():
    n = 10_000
    labels = {f"c{i}": {} for i in range(n)}
    edges = {f"c{i}": [(f"c{i - 1}", "network")] for i in range(1, n)}
    t0 = time.perf_counter()
    graph = DependencyGraph(labels, edges)
    steps = [graph.followers_after("c0", f"c{i}") for i in range(n)]
    assert time.perf_counter() - t0 < 5  # quadratic would take minutes
    assert steps[0] == [("c1", "network")] and steps[-1] == []


# -- followers ------------------------------------------------------------------------------


def test_a_network_follower_is_restarted_after_its_leader_is_healthy(tmp_path):
    loop = make_app(tmp_path, restart={"cooldown": "60s"})
    vpn_and_app(loop)
    loop.healer.sweep()
    assert loop.restarted() == ["vpn"]  # not yet: the vpn is not healthy again
    loop.verify()
    assert loop.restarted() == ["vpn", "app"]
    vpn_incident = loop.store.open_incidents(loop.host, "vpn")[0]
    [follow] = [a for a in loop.actions("app") if a.kind == "restart"]
    assert follow.reason == "namespace_follower"
    assert follow.extra["namespace_of"] == "vpn" and follow.extra["namespaces"] == "network"
    assert follow.incident_id == vpn_incident.id
    # In the vpn's timeline, and told once, under the vpn's incident.
    timeline = timeline_view(loop.app.operator.timeline(vpn_incident), "vpn")
    [row] = [e for e in timeline if e["reason"] == "namespace_follower"]
    assert row["event"] == "restart #1: restarted (app)"
    about_app = [n for n in told(loop) if n["container"] == "app"]
    assert [(n["kind"], n["incident_id"]) for n in about_app] == [("attempt", vpn_incident.id)]
    # Verified like any restart; app opened no incident of its own.
    loop.clock.advance(1)
    loop.verify()
    assert loop.metric("guardian_restarts_total", container="app", outcome="succeeded") == 1
    assert loop.store.open_incidents(loop.host, "app") == []
    assert loop.restarted() == ["vpn", "app"]


def test_an_unhealthy_follower_waits_for_its_leader_then_restarts_once_as_its_follower(tmp_path):
    """Cut off by the vpn's restart, the app turns unhealthy too: its own restart waits for
    the vpn (a follower needs its leader), and its restart as the follower is the one."""
    loop = make_app(tmp_path, restart={"cooldown": "60s"})
    vpn_and_app(loop)
    loop.engine.set("app", health="unhealthy")
    loop.healer.sweep()
    assert loop.restarted() == ["vpn"]
    [held] = [a for a in loop.actions("app") if a.kind == "decision"]
    assert held.reason == "dependency_unhealthy" and "vpn" in held.detail
    loop.verify()
    assert loop.restarted() == ["vpn", "app"]
    loop.clock.advance(1)
    loop.verify()
    loop.clock.advance(1)
    loop.healer.sweep()
    assert loop.restarted() == ["vpn", "app"]
    [incident] = [i for i in loop.store.open_incidents(loop.host, "app")]
    assert incident.state == "resolved"


def test_a_follower_verified_after_a_restart_of_guardian_never_ends_its_leaders_incident(
    tmp_path,
):
    loop = make_app(tmp_path, restart={"cooldown": "60s"})
    vpn_and_app(loop)
    loop.healer.sweep()
    loop.verify()
    assert loop.restarted() == ["vpn", "app"]  # app's restart awaits its verification
    again = loop.restart_guardian()
    assert again.app.verifier.reconcile() == 1
    again.engine.remove("app")  # gone while verified: its own news, not the vpn's
    again.clock.advance(1)
    again.verify()
    [vpn_incident] = again.store.open_incidents(again.host, "vpn")
    assert vpn_incident.state == "resolved" and vpn_incident.close_reason is None


def test_a_follower_goes_through_decide_with_its_own_budget(tmp_path):
    loop = make_app(tmp_path, restart={"max_attempts": 1, "cooldown": "0s"})
    vpn_and_app(loop)
    for _ in range(2):
        loop.engine.set("vpn", health="unhealthy")
        loop.clock.advance(1)
        loop.healer.sweep()
        loop.verify()
        loop.verify()
    assert loop.restarted() == ["vpn", "app"]
    held = [a for a in loop.actions("app") if a.kind == "decision"]
    assert held == []  # the vpn's own budget stopped the second round before app was asked


def test_a_silenced_follower_is_held_back_and_the_reason_recorded(tmp_path):
    loop = make_app(tmp_path, restart={"cooldown": "60s"})
    vpn_and_app(loop)
    loop.app.operator.silence("app", timedelta(hours=1), "maintenance", "ops")
    loop.healer.sweep()
    loop.verify()
    assert loop.restarted() == ["vpn"]
    [held] = [a for a in loop.actions("app") if a.kind == "decision"]
    assert held.reason == "silenced" and "namespace_follower" in held.detail


def test_a_follower_of_a_follower_waits_for_the_one_it_joined(tmp_path):
    loop = make_app(tmp_path, restart={"cooldown": "60s"})
    vpn_and_app(loop)
    loop.engine.add("sidecar", namespaces=(("network", loop.engine.id_of("app")),))
    loop.healer.sweep()
    loop.verify()
    assert loop.restarted() == ["vpn", "app"]  # sidecar joined app's: app first
    loop.clock.advance(1)
    loop.verify()
    assert loop.restarted() == ["vpn", "app", "sidecar"]
    [follow] = [a for a in loop.actions("sidecar") if a.kind == "restart"]
    vpn_incident = loop.store.open_incidents(loop.host, "vpn")[0]
    assert follow.incident_id == vpn_incident.id and follow.extra["wave_of"] == "vpn"
    loop.clock.advance(1)
    loop.verify()
    assert loop.restarted() == ["vpn", "app", "sidecar"]  # the wave ended


def test_a_cut_off_follower_healed_as_a_follower_lets_its_own_follower_follow(tmp_path):
    """app turned unhealthy once cut off (its own incident); healed by its restart as the vpn's
    follower, that incident no longer holds sidecar (which joined app's namespace) back."""
    loop = make_app(tmp_path, restart={"cooldown": "60s"})
    vpn_and_app(loop)
    loop.engine.add("sidecar", health=None, namespaces=(("network", loop.engine.id_of("app")),))
    loop.engine.set("app", health="unhealthy")
    loop.healer.sweep()
    loop.verify()
    assert loop.restarted() == ["vpn", "app"]
    loop.clock.advance(1)
    loop.verify()
    [own] = loop.store.open_incidents(loop.host, "app")
    assert own.state == "resolved" and own.resolved_by == "guardian"
    assert loop.restarted() == ["vpn", "app", "sidecar"]


def test_a_cycle_of_namespaces_restarts_each_once(tmp_path):
    loop = make_app(tmp_path, restart={"cooldown": "0s"})
    a = loop.engine.add("a", health="unhealthy")
    b = loop.engine.add("b", namespaces=(("network", a.id),))
    loop.engine.set("a", namespaces=(("network", b.id),))
    for _ in range(4):
        loop.healer.sweep()
        loop.clock.advance(1)
        loop.verify()
    assert loop.restarted() == ["a", "b"]


def test_a_pid_follower_is_known_from_the_inspect_of_its_exit(tmp_path):
    """A pid follower dies with its leader (the kernel ends the namespace): the inspect of its
    exit tells Guardian its PidMode, which the list does not."""
    loop = make_app(tmp_path, restart={"cooldown": "60s"})
    vpn = vpn_and_app(loop, "pid")
    loop.engine.set("app", state="exited", exit_code=137)
    loop.healer.sweep()  # app's exit is a candidate: inspected, skipped (a signal)
    assert loop.restarted() == ["vpn"]
    loop.verify()
    assert loop.restarted() == ["vpn", "app"]
    [follow] = [a for a in loop.actions("app") if a.kind == "restart"]
    assert follow.extra["namespaces"] == "pid" and vpn in loop.engine.containers


def test_followers_cost_no_inspect_while_nothing_is_wrong(tmp_path):
    loop = make_app(tmp_path)
    vpn = loop.engine.add("vpn")
    for i in range(50):
        loop.engine.add(f"app{i}", namespaces=(("network", vpn.id),))
    for _ in range(3):
        loop.clock.advance(30)
        loop.healer.sweep()
    assert loop.engine.inspect_calls == 0


# -- orphans --------------------------------------------------------------------------------


def test_an_orphan_gets_one_incident_naming_the_command_and_is_never_restarted(tmp_path):
    loop = make_app(tmp_path, restart={"cooldown": "0s"})
    vpn_and_app(loop, app_labels=COMPOSE)
    loop.engine.set("vpn", health="healthy")
    loop.engine.recreate("vpn")  # docker compose up replaced it
    for _ in range(5):
        loop.clock.advance(30)
        loop.healer.sweep()
        loop.verify()
    [incident] = loop.store.open_incidents(loop.host, "app")
    assert incident.type is ProblemType.ORPHANED_NAMESPACE
    assert "docker compose up -d --force-recreate app" in incident.detail
    assert "vpn-id000000"[:12] in incident.detail  # the old leader's short id
    assert loop.engine.restarts == []
    [opened] = [n for n in told(loop) if n["container"] == "app"]
    assert opened["kind"] == "opened"
    assert opened["next_step"].startswith("docker compose up -d --force-recreate app")


def test_an_orphan_is_not_a_follower_of_the_new_leader(tmp_path):
    loop = make_app(tmp_path, restart={"cooldown": "60s"})
    vpn_and_app(loop)
    loop.engine.recreate("vpn", health="unhealthy")
    loop.healer.sweep()
    loop.verify()
    assert loop.restarted() == ["vpn"]
    [incident] = loop.store.open_incidents(loop.host, "app")
    assert incident.type is ProblemType.ORPHANED_NAMESPACE
    assert "next step: recreate it" in incident.detail


def test_an_unlisted_leader_is_looked_up_once_and_its_removal_makes_an_orphan(tmp_path):
    loop = make_app(tmp_path)
    vpn = loop.engine.add("vpn", labels={})  # not watched: the sweep does not list it
    loop.engine.add("app", namespaces=(("network", vpn.id),))
    for _ in range(3):
        loop.clock.advance(30)
        loop.healer.sweep()
    assert loop.engine.inspect_calls == 1 and loop.store.open_incidents(loop.host) == []
    loop.engine.remove("vpn")
    loop.healer.on_event(EngineEvent("destroy", vpn.id, "vpn", loop.clock.now(), {}))
    loop.clock.advance(30)
    loop.healer.sweep()
    [incident] = loop.store.open_incidents(loop.host, "app")
    assert incident.type is ProblemType.ORPHANED_NAMESPACE
    assert loop.engine.inspect_calls == 1  # the event told, no inspect needed


def test_a_recreated_orphan_starts_fresh(tmp_path):
    loop = make_app(tmp_path)
    vpn_and_app(loop)
    loop.engine.set("vpn", health="healthy")
    new_vpn = loop.engine.recreate("vpn")
    loop.healer.sweep()
    assert loop.store.open_incidents(loop.host, "app")
    loop.engine.recreate("app", namespaces=(("network", new_vpn.id),))
    loop.clock.advance(30)
    loop.healer.sweep()
    assert loop.store.open_incidents(loop.host, "app") == []


# -- hostile modes --------------------------------------------------------------------------


@pytest.mark.parametrize(
    "ref",
    ["x" * (MAX_REF + 1), "$(reboot)", "app-id".ljust(64, "0")],
    ids=["too-long", "not-a-name", "itself"],
)
def test_a_hostile_mode_is_warned_once_and_never_followed(tmp_path, caplog, ref):
    loop = make_app(tmp_path, restart={"cooldown": "60s"})
    loop.engine.add("vpn", health="unhealthy")
    loop.engine.add("app", namespaces=(("network", ref),))
    with caplog.at_level(logging.WARNING, "guardian.namespaces"):
        for _ in range(3):
            loop.healer.sweep()
            loop.clock.advance(1)
            loop.verify()
    [warning] = [r for r in caplog.records if "namespace mode refused" in r.getMessage()]
    assert warning.guardian_fields["container"] == "app"
    assert loop.restarted() == ["vpn"]
    assert loop.store.open_incidents(loop.host, "app") == []
