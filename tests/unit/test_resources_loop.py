"""Resource rules through the loop, built through bootstrap with fakes: a breach held for its
whole `for` opens memory_high or cpu_high and is restarted through decide(); a clock step never
shortens it; a container without a rule is never read; config rules by name, from the file or
the environment, reloadable."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from guardian.config import ConfigError, load_settings, reloadable
from guardian.core.detection.usage import Usage
from guardian.core.model import ProblemType
from guardian.entrypoints.daemon import Daemon
from guardian.entrypoints.reloader import rebuild
from tests.app import TestApp, make_app, settings_for
from tests.fakes import FakeResourceReader

MiB = 1024 * 1024
RESTART = {"cooldown": "1m", "max_attempts": 3, "verify_timeout": "30s"}
RULE = {"guardian.enable": "true", "guardian.memory.max": "256MiB", "guardian.memory.for": "2m"}


def world(tmp: Path, **sections: object) -> tuple[TestApp, FakeResourceReader]:
    reader = FakeResourceReader()
    t = make_app(
        tmp,
        resource_reader=reader,
        restart=RESTART,
        **sections,  # type: ignore[arg-type]
    )
    return t, reader


def tick(t: TestApp) -> None:
    t.healer.resource_tick(t.app.resources)


def incidents(t: TestApp, name: str) -> list[tuple[ProblemType, str]]:
    return [(i.type, i.detail) for i in t.store.open_incidents(t.host, name) if i.is_open]


def test_memory_above_its_label_for_the_whole_for_is_restarted_then_and_not_before(
    tmp_path: Path,
):
    t, reader = world(tmp_path)
    leak = t.engine.add("leak", labels=RULE, health=None)
    reader.usage[leak.id] = Usage(301 * MiB, 0)
    t.healer.sweep()
    tick(t)  # the breach begins
    for _ in range(11):  # 110 s: every sample above, still short of 2m
        t.clock.advance(10)
        tick(t)
    t.healer.sweep()
    assert t.restarted() == [] and incidents(t, "leak") == []
    t.clock.advance(10)  # 120 s
    tick(t)
    assert t.restarted() == ["leak"]
    [(kind, text)] = [(a.type, a.detail) for a in t.store.list_incidents(t.host)]
    assert kind is ProblemType.MEMORY_HIGH
    assert text.startswith("memory 301 MiB above guardian.memory.max 256 MiB for 2m (held 2m0s")


def test_after_the_restart_the_breach_begins_from_zero(tmp_path: Path):
    t, reader = world(tmp_path)
    leak = t.engine.add("leak", labels=RULE, health=None)
    reader.usage[leak.id] = Usage(301 * MiB, 0)
    t.healer.sweep()
    tick(t)
    t.clock.advance(120)
    tick(t)
    assert t.restarted() == ["leak"]
    t.clock.advance(15)  # running and stable: healed
    t.verify()
    assert incidents(t, "leak") == []
    tick(t)  # the new container leaks at once: a new breach, from zero
    for _ in range(11):
        t.clock.advance(10)
        tick(t)
    t.healer.sweep()
    assert t.restarted() == ["leak"]
    t.clock.advance(10)
    tick(t)
    assert t.restarted() == ["leak", "leak"]  # the cooldown (1m) is long past; decide() allowed


@pytest.mark.parametrize("hours", [1, -1, 24])
def test_a_clock_step_never_shortens_a_breach(tmp_path: Path, hours: int):
    t, reader = world(tmp_path)
    leak = t.engine.add("leak", labels=RULE, health=None)
    reader.usage[leak.id] = Usage(301 * MiB, 0)
    t.healer.sweep()
    tick(t)
    t.clock.advance(60)
    t.clock.step(hours=hours)  # the wall clock jumps; no time passes
    tick(t)
    t.healer.sweep()
    assert t.restarted() == []
    t.clock.advance(59)
    tick(t)
    assert t.restarted() == []
    t.clock.advance(1)
    tick(t)
    assert t.restarted() == ["leak"]


def test_a_container_without_a_rule_is_never_read(tmp_path: Path):
    t, reader = world(tmp_path)
    plain = t.engine.add("plain")
    leak = t.engine.add("leak", labels=RULE)
    reader.usage[leak.id] = Usage(10 * MiB, 0)
    for _ in range(5):
        t.healer.sweep()
        tick(t)
        t.clock.advance(5)
    assert plain.id not in reader.reads and plain.id not in t.engine.stats_calls
    assert reader.reads == [leak.id] * 5


def test_with_no_rule_anywhere_nothing_is_read_and_the_job_has_no_work(tmp_path: Path):
    t, reader = world(tmp_path)
    t.engine.add("plain")
    t.healer.sweep()
    assert not t.app.resources.has_targets()
    tick(t)
    assert reader.reads == [] and t.engine.stats_calls == []


def test_without_cgroup_files_one_stats_call_per_container_per_tick(tmp_path: Path):
    t, _reader = world(tmp_path)
    hot = t.engine.add("hot", labels={"guardian.enable": "true", "guardian.cpu.max": "90%"})
    t.engine.usage[hot.id] = Usage(10 * MiB, 0)
    t.healer.sweep()
    tick(t)
    for second in range(1, 306, 5):  # a whole core busy for five minutes past the first figure
        t.clock.advance(5)
        t.engine.usage[hot.id] = Usage(10 * MiB, second * 1_000_000 + 4_000_000)
        tick(t)
    assert t.engine.stats_calls == [hot.id] * 62
    [incident] = t.store.list_incidents(t.host)
    assert incident.type is ProblemType.CPU_HIGH
    assert incident.detail.startswith("cpu 100% of a core above guardian.cpu.max 90% for 5m")


def test_an_unhealthy_container_keeps_its_own_problem(tmp_path: Path):
    t, reader = world(tmp_path)
    leak = t.engine.add("leak", labels=RULE, health="unhealthy")
    reader.usage[leak.id] = Usage(301 * MiB, 0)
    t.healer.sweep()
    assert [i.type for i in t.store.list_incidents(t.host)] == [ProblemType.UNHEALTHY]


def test_a_config_rule_applies_to_the_containers_its_glob_matches(tmp_path: Path):
    rule = {"containers": "db-*", "memory_max": "256MiB", "memory_for": "30s"}
    t, reader = world(tmp_path, resources={"rules": [rule]})
    db = t.engine.add("db-main", health=None)
    web = t.engine.add("web", health=None)
    reader.usage.update({db.id: Usage(300 * MiB, 0), web.id: Usage(900 * MiB, 0)})
    t.healer.sweep()
    tick(t)
    t.clock.advance(30)
    tick(t)
    assert t.restarted() == ["db-main"]
    assert web.id not in reader.reads
    [incident] = t.store.list_incidents(t.host)
    assert "above resources.rules[0].memory_max 256 MiB for 30s" in incident.detail


def test_a_label_adds_a_limit_beside_the_operators_and_never_lifts_it(tmp_path: Path):
    rule = {"containers": "db-*", "memory_max": "256MiB", "memory_for": "30s"}
    t, reader = world(tmp_path, resources={"rules": [rule]})
    labels = {"guardian.enable": "true", "guardian.memory.max": "1GiB"}  # looser: adds nothing
    db = t.engine.add("db-main", labels=labels, health=None)
    reader.usage[db.id] = Usage(300 * MiB, 0)
    t.healer.sweep()
    tick(t)
    t.clock.advance(30)
    tick(t)
    assert t.restarted() == ["db-main"]


def test_the_decision_still_decides_a_dry_run_restarts_nothing(tmp_path: Path):
    reader = FakeResourceReader()
    t = make_app(tmp_path, resource_reader=reader, restart={"dry_run": True})
    leak = t.engine.add("leak", labels={**RULE, "guardian.memory.for": "0s"}, health=None)
    reader.usage[leak.id] = Usage(301 * MiB, 0)
    t.healer.sweep()
    tick(t)
    assert t.restarted() == []
    assert [a.reason for a in t.actions("leak")] == ["dry_run"]


def test_config_rules_are_bounded_and_come_from_the_environment_as_json(tmp_path: Path):
    env = {"GUARDIAN_RESOURCES_RULES": '[{"containers": "db-*", "cpu_max": "250%"}]'}
    rules = load_settings(None, env=env)["resources.rules"]
    assert rules[0].limits[0].max == 250.0
    with pytest.raises(ConfigError, match=r"GUARDIAN_RESOURCES_RULES\)\[0\]\.cpu_max: expected"):
        load_settings(
            None, env={"GUARDIAN_RESOURCES_RULES": '[{"containers": "a", "cpu_max": "9"}]'}
        )
    too_many = [{"containers": "a", "cpu_max": "90%"}] * 51
    path = tmp_path / "c.yaml"
    path.write_text(yaml.safe_dump({"resources": {"rules": too_many}}))
    with pytest.raises(ConfigError, match=r"resources\.rules: expected a list of at most 50 rules"):
        load_settings(path, env={})
    assert reloadable("resources.rules") and not reloadable("resources.cgroup_root")


def test_the_resources_job_runs_only_while_a_container_has_a_limit(tmp_path: Path) -> None:
    """Idle cost unchanged: with no limit anywhere the job stays paused and nothing is read."""
    reader = FakeResourceReader()
    t = make_app(tmp_path, daemon=True, resource_reader=reader)
    d = Daemon(t.app)
    d.schedule()
    d.scheduler.start(paused=True)  # jobs are kept and judged, none runs
    try:
        job = lambda: d.scheduler.get_job("resources").next_run_time  # noqa: E731
        t.engine.add("web")
        d.sweep_job()
        d.follow_work()  # the main loop's tick
        assert job() is None
        t.engine.set("web", labels=RULE)
        d.sweep_job()
        d.follow_work()
        assert job() is not None
        d.sample_resources()
        assert reader.reads == [t.engine.id_of("web")]
        t.engine.set("web", labels={"guardian.enable": "true"})
        d.sweep_job()
        d.follow_work()
        assert job() is None
    finally:
        d.scheduler.shutdown(wait=False)
        t.store.close()


def test_a_reload_puts_new_config_rules_in_force_at_the_next_sweep(tmp_path: Path) -> None:
    t, reader = world(tmp_path)
    db = t.engine.add("db-main", health=None)
    reader.usage[db.id] = Usage(300 * MiB, 0)
    t.healer.sweep()
    assert not t.app.resources.has_targets()
    rule = {"containers": "db-*", "memory_max": "256MiB", "memory_for": "0s"}
    new = settings_for(tmp_path / "new", {"restart": RESTART, "resources": {"rules": [rule]}})
    assert rebuild(t.app, new).applied == ("resources.rules",)
    t.healer.sweep()
    tick(t)
    assert t.restarted() == ["db-main"]
