"""Resource rules parsed strictly (core.detection.resources), and one sample judged against them
(core.detection.usage): a breach lasts while every sample is above, measured on monotonic
seconds."""

from __future__ import annotations

from datetime import timedelta

import pytest

from guardian.core.detection.resources import (
    CPU,
    MEMORY,
    Limit,
    ResourceError,
    format_size,
    from_config,
    from_labels,
    parse_for,
    parse_percent,
    parse_size,
)
from guardian.core.detection.restart_policy import RestartPolicy
from guardian.core.detection.usage import Sampled, Usage, breached, detail, figure, observe
from guardian.core.labels import rules_for

MiB = 1024 * 1024


@pytest.mark.parametrize(
    ("raw", "size"),
    [
        ("256MiB", 256 * MiB),
        ("256 MiB", 256 * MiB),
        ("256mib", 256 * MiB),
        ("1.5GiB", int(1.5 * 1024 * MiB)),
        ("500MB", 500_000_000),
        ("2048KiB", 2 * MiB),
        ("1TiB", 1024**4),
    ],
)
def test_sizes_are_read_with_their_unit(raw: str, size: int):
    assert parse_size(raw) == size


@pytest.mark.parametrize(
    "raw",
    ["256", "256M", "256 m", "-1MiB", "0MiB", "1KiB", "1e9MiB", "2PiB", "MiB", "", " ", "9" * 50],
)
def test_a_size_without_a_unit_or_out_of_bounds_is_refused(raw: str):
    with pytest.raises(ValueError, match="such as 256MiB"):
        parse_size(raw)


@pytest.mark.parametrize(("raw", "percent"), [("90%", 90.0), ("250%", 250.0), ("12.5 %", 12.5)])
def test_percents_are_a_share_of_one_core(raw: str, percent: float):
    assert parse_percent(raw) == percent


@pytest.mark.parametrize("raw", ["90", "0%", "-5%", "99999%", "nan%", "1e3%", "%", "ninety%"])
def test_a_percent_without_its_sign_or_out_of_bounds_is_refused(raw: str):
    with pytest.raises(ValueError, match="share of one core"):
        parse_percent(raw)


@pytest.mark.parametrize("raw", ["2 minutes", "-1s", "2d", "x" * 100, ""])
def test_a_bad_for_is_refused(raw: str):
    with pytest.raises(ValueError, match="duration of at most 1d"):
        parse_for(raw)


def test_labels_give_a_memory_and_a_cpu_limit():
    limits, warnings = from_labels(
        {
            "guardian.memory.max": "256MiB",
            "guardian.memory.for": "2m",
            "guardian.cpu.max": "90%",
            "guardian.cpu.for": "5m",
        }
    )
    assert warnings == ()
    assert limits == (
        Limit(MEMORY, 256.0 * MiB, timedelta(minutes=2), "guardian.memory.max"),
        Limit(CPU, 90.0, timedelta(minutes=5), "guardian.cpu.max"),
    )


def test_a_bad_label_ignores_its_own_rule_only_with_one_line_naming_it():
    limits, warnings = from_labels(
        {"guardian.memory.max": "lots", "guardian.cpu.max": "90%", "guardian.cpu.for": "soon"}
    )
    assert limits == ()
    assert warnings == (
        "label guardian.memory.max='lots': expected a size from 1MiB to 1PiB such as 256MiB,"
        " 2GiB or 500MB; rule ignored",
        "label guardian.cpu.for='soon': expected a duration of at most 1d such as 30s, 2m or"
        " 1h; rule ignored",
    )
    assert all("\n" not in w for w in warnings)


def test_a_for_without_a_max_is_a_warning_and_a_max_alone_takes_the_default_for():
    limits, warnings = from_labels({"guardian.memory.for": "2m", "guardian.cpu.max": "150%"})
    assert warnings == ("label guardian.memory.for: ignored without guardian.memory.max",)
    assert limits == (Limit(CPU, 150.0, timedelta(minutes=5), "guardian.cpu.max"),)


def test_bad_labels_reach_the_containers_warnings_and_a_hostile_value_is_cut():
    rules = rules_for(
        {"guardian.enable": "true", "guardian.memory.max": "\x1b[31m" + "9" * 5000},
        RestartPolicy(),
        timedelta(seconds=10),
        "guardian.enable",
    )
    assert rules.resources == ()
    assert len(rules.warnings) == 1 and len(rules.warnings[0]) < 200


def test_a_config_rule_names_the_key_that_is_wrong():
    rule = from_config({"containers": "db-*", "memory_max": "256MiB"}, "[0]", "resources.rules[0]")
    assert rule.applies_to("db-main") and not rule.applies_to("web")
    assert rule.limits[0].origin == "resources.rules[0].memory_max"
    assert rule.limits[0].held == timedelta(minutes=1)
    for entry, message in [
        ({"containers": "db-*"}, r"\[0\]: expected memory_max, cpu_max or both"),
        ({"containers": "db-*", "memory_max": "256"}, r"\[0\]\.memory_max: expected a size"),
        ({"containers": "db-*", "cpu_max": "90%", "cpu_for": "x"}, r"\[0\]\.cpu_for: expected"),
        ({"containers": "db-*", "cpu_for": "5m"}, r"\[0\]\.cpu_for: given without cpu_max"),
        ({"memory_max": "1GiB"}, r"\[0\]\.containers: expected a container name or glob"),
        ({"containers": "a", "memory": "1GiB"}, r"\[0\]\.memory: unknown key"),
    ]:
        with pytest.raises(ResourceError, match=message):
            from_config(entry, "[0]")


MEM = Limit(MEMORY, 256.0 * MiB, timedelta(minutes=2), "guardian.memory.max")
CPU90 = Limit(CPU, 90.0, timedelta(minutes=5), "guardian.cpu.max")


def test_a_breach_is_held_only_after_every_sample_for_the_whole_for():
    s = Sampled()
    limits = (MEM,)
    for at in (0, 60, 119):
        observe(s, limits, Usage(300 * MiB, None), at)
        assert breached(s, limits, at) is None
    observe(s, limits, Usage(300 * MiB, None), 120)
    assert breached(s, limits, 120) == 0


def test_one_sample_at_or_below_the_limit_or_a_failed_read_starts_it_from_zero():
    s = Sampled()
    limits = (MEM,)
    observe(s, limits, Usage(300 * MiB, None), 0)
    observe(s, limits, Usage(256 * MiB, None), 60)  # at the limit: not above
    observe(s, limits, Usage(300 * MiB, None), 61)
    observe(s, limits, None, 100)  # unread: nothing is known of that moment
    observe(s, limits, Usage(300 * MiB, None), 101)
    assert breached(s, limits, 220) is None
    assert breached(s, limits, 221) == 0


def test_cpu_is_the_time_used_over_the_monotonic_time_between_samples():
    assert figure(CPU, Usage(0, 1_000_000), 10.0, Usage(0, 2_500_000), 11.0) == pytest.approx(150)
    assert figure(CPU, None, 0.0, Usage(0, 5), 1.0) is None  # the first sample
    assert figure(CPU, Usage(0, 9_000_000), 10.0, Usage(0, 10), 11.0) is None  # a new cgroup
    s = Sampled()
    observe(s, (CPU90,), Usage(0, 0), 0)
    observe(s, (CPU90,), Usage(0, 950_000), 1)  # 95% of a core
    observe(s, (CPU90,), Usage(0, 950_000 + 300_000_000), 301)  # 100%
    assert breached(s, (CPU90,), 301) == 0
    assert s.since == [1]


def test_the_detail_states_the_figures():
    assert detail(MEM, 301 * MiB, 125) == (
        "memory 301 MiB above guardian.memory.max 256 MiB for 2m (held 2m5s; inactive file"
        " cache excluded)"
    )
    assert (
        detail(CPU90, 97.4, 300)
        == "cpu 97% of a core above guardian.cpu.max 90% for 5m (held 5m0s)"
    )
    assert format_size(3 * 1024**3 // 2) == "1.5 GiB"
