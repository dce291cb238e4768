"""The shipped systemd unit: `systemd-analyze verify` is clean and the hardening scores <= 2.5."""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

from tests.helpers import require_tool
from tests.integration.conftest import REPO

UNIT = REPO / "systemd" / "guardian.service"
MAX_EXPOSURE = 2.5


def analyze(*args: str) -> subprocess.CompletedProcess[str]:
    require_tool("systemd-analyze", "systemd")
    return subprocess.run(
        ["systemd-analyze", *args], capture_output=True, text=True, timeout=60, check=False
    )


def directives(unit: Path) -> dict[str, list[str]]:
    """Key -> every value it is given (systemd allows repeating a key)."""
    out: dict[str, list[str]] = {}
    for line in unit.read_text().splitlines():
        if "=" in line and not line.startswith(("#", ";", "[")):
            key, _, value = line.partition("=")
            out.setdefault(key.strip(), []).append(value.strip())
    return out


def test_unit_passes_systemd_analyze_verify(tmp_path: Path) -> None:
    # verify checks that ExecStart's binary exists, so give it a root holding the installed
    # layout: the unit, the binary the install steps create, and systemd's own units.
    executable = Path(directives(UNIT)["ExecStart"][0].split()[0])
    fake = tmp_path / executable.relative_to("/")
    fake.parent.mkdir(parents=True)
    fake.write_text("#!/bin/sh\n")
    fake.chmod(0o755)
    (tmp_path / "etc/systemd/system").mkdir(parents=True)
    shutil.copy(UNIT, tmp_path / "etc/systemd/system/guardian.service")
    shutil.copytree("/usr/lib/systemd/system", tmp_path / "usr/lib/systemd/system", symlinks=True)

    result = analyze("verify", f"--root={tmp_path}", "guardian.service")

    # verify exits 0 even for unknown keys or bad values: it only prints them.
    assert result.returncode == 0, result.stderr
    assert (result.stdout + result.stderr).strip() == ""


def test_unit_hardening_exposure_is_at_most_2_5() -> None:
    result = analyze("security", "--offline=yes", str(UNIT))

    match = re.search(r"Overall exposure level for guardian\.service: ([0-9.]+)", result.stdout)
    assert match, result.stdout + result.stderr
    assert float(match.group(1)) <= MAX_EXPOSURE, result.stdout


def test_unit_is_a_notify_service_with_watchdog_state_and_socket_access() -> None:
    d = directives(UNIT)
    assert d["Type"] == ["notify"]
    assert d["WatchdogSec"] and d["Restart"] == ["on-failure"]
    assert d["StateDirectory"] == ["guardian"] and d["ConfigurationDirectory"] == ["guardian"]
    assert d["SupplementaryGroups"] == ["docker"]
    assert d["LimitNOFILE"] == ["4096"]
    assert "/etc/guardian/config.yaml" in d["ExecStart"][0]
