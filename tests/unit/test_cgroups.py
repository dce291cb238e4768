"""CgroupReader over a cgroup tree laid out in a temp dir (v2 systemd and cgroupfs, v1), and the
engine's stats payload read as `docker stats` counts it."""

from __future__ import annotations

from pathlib import Path

import pytest

from guardian.adapters.cgroups import CgroupReader
from guardian.adapters.engine.engine_payloads import stats_usage
from guardian.core.detection.usage import Usage

CID = "ab" * 32
MiB = 1024 * 1024


def write(d: Path, files: dict[str, str]) -> None:
    d.mkdir(parents=True, exist_ok=True)
    for name, text in files.items():
        (d / name).write_text(text)


V2 = {
    "memory.current": f"{300 * MiB}\n",
    "memory.stat": f"anon {200 * MiB}\nfile {100 * MiB}\ninactive_file {40 * MiB}\n",
    "cpu.stat": "usage_usec 123456\nuser_usec 100000\n",
}


@pytest.mark.parametrize("where", [f"system.slice/docker-{CID}.scope", f"docker/{CID}"])
def test_cgroup_v2_memory_is_current_less_inactive_file(tmp_path: Path, where: str):
    write(tmp_path / where, V2)
    assert CgroupReader(tmp_path).read(CID) == Usage(260 * MiB, 123456, "cgroup v2")


def test_cgroup_v1_memory_is_usage_less_total_inactive_file_and_cpu_from_cpuacct(tmp_path: Path):
    write(
        tmp_path / "memory/docker" / CID,
        {
            "memory.usage_in_bytes": f"{300 * MiB}\n",
            "memory.stat": f"inactive_file 1\ntotal_inactive_file {40 * MiB}\n",
        },
    )
    write(tmp_path / "cpuacct/docker" / CID, {"cpuacct.usage": "123456789\n"})
    assert CgroupReader(tmp_path).read(CID) == Usage(260 * MiB, 123456, "cgroup v1")


def test_nothing_visible_is_none_and_the_layout_found_is_read_again(tmp_path: Path):
    reader = CgroupReader(tmp_path)
    assert reader.read(CID) is None
    write(tmp_path / "docker" / CID, V2)
    assert reader.read(CID) is not None
    (tmp_path / "docker" / CID / "memory.current").write_text(f"{10 * MiB}\n")
    assert reader.read(CID) == Usage(10 * MiB, 123456, "cgroup v2")  # cache above usage: none


@pytest.mark.parametrize("cid", ["../../etc", "AB" * 32, CID + "/..", ""])
def test_an_id_that_is_not_an_engine_id_is_never_made_a_path(tmp_path: Path, cid: str):
    write(tmp_path / "docker" / cid, V2)
    assert CgroupReader(tmp_path).read(cid) is None


def test_a_garbled_file_reads_as_nothing(tmp_path: Path):
    write(tmp_path / "docker" / CID, {**V2, "memory.current": "max\x00" * 50_000})
    assert CgroupReader(tmp_path).read(CID) is None


@pytest.mark.parametrize(
    ("raw", "usage"),
    [
        (  # cgroup v2
            {
                "memory_stats": {"usage": 300 * MiB, "stats": {"inactive_file": 40 * MiB}},
                "cpu_stats": {"cpu_usage": {"total_usage": 5_000_000_000}},
            },
            Usage(260 * MiB, 5_000_000, "stats"),
        ),
        (  # cgroup v1
            {
                "memory_stats": {"usage": 300 * MiB, "stats": {"total_inactive_file": 40 * MiB}},
                "cpu_stats": {"cpu_usage": {"total_usage": 7000}},
            },
            Usage(260 * MiB, 7, "stats"),
        ),
        ({"memory_stats": {}, "cpu_stats": {}}, None),  # not running
        ({"memory_stats": {"usage": 10, "stats": {"inactive_file": 99}}}, Usage(10, None, "stats")),
        ({"memory_stats": {"usage": True}}, None),
        ({"memory_stats": "x", "cpu_stats": {"cpu_usage": "x"}}, None),
        ("garbage", None),
    ],
)
def test_a_stats_payload_is_read_as_docker_stats_counts_it(raw: object, usage: Usage | None):
    assert stats_usage(raw) == usage
