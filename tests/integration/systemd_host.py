"""A container on the host's engine that boots a real systemd as PID 1, with Guardian installed
in it by the install lines of docs/deployment.md; used by test_systemd_boot.py.

The Guardian inside talks to the host's engine through the mounted socket, so its config must
scope it (`watch.scope`) to this run's containers.
"""

from __future__ import annotations

import hashlib
import os
import re
import shlex
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import yaml

from tests.helpers import require_tool, wait_until
from tests.integration.conftest import PREFIX, REPO, RUN_ID

BUILD_SCRIPT = REPO / "tests/images/build-systemd.sh"
SOCKET = "/run/docker.sock"  # /var/run is a link to /run inside the image
# A bind of the engine's socket kept aside, so a test can take the socket away and give it back.
SAVED_SOCKET = "/run/gdt-engine/docker.sock"
SCOPE_LABEL = "guardian.test.scope"
SCOPE_VALUE = f"{PREFIX}systemd"
CHECKOUT = "/root/guardian"  # where the staged checkout lands inside the container
UNIT = "guardian"
# What a fresh checkout does not hold: left out of the copy that the documented lines run in.
NOT_CHECKOUT = (".git", ".venv", ".ci", "__pycache__", "*.egg-info", "build", "dist", ".*_cache")

# The command of issue 16: `--privileged` fails on hosts without CAP_SYS_RESOURCE.
RUN_OPTIONS = [
    "--cap-add", "ALL", "--cap-drop", "SYS_RESOURCE",
    "--security-opt", "seccomp=unconfined", "--security-opt", "apparmor=unconfined",
    "--cgroupns=host", "-v", "/sys/fs/cgroup:/sys/fs/cgroup:ro",
    "--tmpfs", "/run", "--tmpfs", "/run/lock",
    "-v", "/var/run/docker.sock:/var/run/docker.sock",
]  # fmt: skip


def image_tag() -> str:
    """The image's tag is a hash of its build script: a changed script builds a new image."""
    digest = hashlib.sha256(BUILD_SCRIPT.read_bytes()).hexdigest()[:12]
    return f"guardian-test-systemd:{digest}"


def build_image() -> str:
    """Build the systemd image unless this tag exists already (about a minute: debootstrap)."""
    tag = image_tag()
    cached = subprocess.run(["docker", "image", "inspect", tag], capture_output=True, check=False)
    if cached.returncode != 0:
        require_tool("debootstrap", "debootstrap")
        subprocess.run([str(BUILD_SCRIPT), tag], check=True)
    return tag


def guardian_config() -> dict[str, Any]:
    """The config the test installs: fast sweeps and cooldowns, scoped to this run."""
    return {
        "watch": {"interval": "2s", "events": True, "scope": f"{SCOPE_LABEL}={SCOPE_VALUE}"},
        "restart": {"cooldown": "2s", "stop_timeout": "1s", "verify_timeout": "20s"},
        "log": {"level": "info"},
    }


def readme_install_lines() -> list[str]:
    """The shell lines of the systemd install block (docs/deployment.md), as a user would paste
    them."""
    doc = (REPO / "docs" / "deployment.md").read_text()
    section = doc.split("## As a systemd service", 1)[1].split("\n## ", 1)[0]
    match = re.search(r"```sh\n(.*?)```", section, re.S)
    assert match, "docs/deployment.md's systemd section has no ```sh install block"
    return [line for line in match.group(1).splitlines() if line.strip()]


def stage_checkout(dest: Path, config: dict[str, Any]) -> list[str]:
    """Copy the checkout to `dest` with the test's config.yaml, run the documented `pip wheel`
    line(s) there on the host (the container reaches no package index), and return the lines
    left to run inside the container."""
    shutil.copytree(REPO, dest, dirs_exist_ok=True, ignore=shutil.ignore_patterns(*NOT_CHECKOUT))
    (dest / "config.yaml").write_text(yaml.safe_dump(config))
    lines = readme_install_lines()
    host = [line for line in lines if line.startswith("pip wheel")]
    assert host, "docs/deployment.md's install block builds no wheels (`pip wheel`)"
    # `pip` of the interpreter running the tests; wheels for its Python, like the image's.
    env = {**os.environ, "PATH": f"{Path(sys.executable).parent}:{os.environ['PATH']}"}
    for line in host:
        result = subprocess.run(
            ["bash", "-euo", "pipefail", "-c", line],
            cwd=dest, env=env, capture_output=True, text=True, check=False,
        )  # fmt: skip
        assert result.returncode == 0, f"{line}\n{result.stderr[-3000:]}"
    return [line for line in lines if line not in host]


class SystemdHost:
    """One booted container: run commands in it, ask its systemd and journald."""

    def __init__(self, name: str) -> None:
        self.name = name
        self.changed = False  # a test changed the unit's setup: restore() puts it back

    @classmethod
    def boot(cls, image: str, short: str) -> SystemdHost:
        name = f"{PREFIX}{short}"
        subprocess.run(
            [
                "docker", "run", "-d", "--name", name, "--label", f"guardian.test.run={RUN_ID}",
                *RUN_OPTIONS, image, "/lib/systemd/systemd",
            ],
            capture_output=True, check=True,
        )  # fmt: skip
        host = cls(name)
        try:
            wait_until(
                lambda: (
                    host.sh("systemctl is-system-running", check=False).stdout.strip()
                    in ("running", "degraded")
                ),
                30,
                0.2,
                f"{name}: systemd booted",
            )
        except AssertionError:
            host.remove()
            raise
        return host

    def remove(self) -> None:
        subprocess.run(["docker", "rm", "-f", "-v", self.name], capture_output=True, check=False)

    def sh(
        self, script: str, check: bool = True, timeout: float = 120
    ) -> subprocess.CompletedProcess[str]:
        """Run `script` with bash as root in the container."""
        result = subprocess.run(
            ["docker", "exec", self.name, "bash", "-euo", "pipefail", "-c", script],
            capture_output=True, text=True, timeout=timeout, check=False,
        )  # fmt: skip
        if check and result.returncode != 0:
            raise AssertionError(f"{script!r} exited {result.returncode}:\n{result.stderr}")
        return result

    def install(self, checkout: Path, lines: list[str]) -> None:
        """Copy the staged checkout in and run the documented install lines in it."""
        subprocess.run(["docker", "cp", f"{checkout}/.", f"{self.name}:{CHECKOUT}"], check=True)
        self.sh(f"cd {CHECKOUT}\n" + "\n".join(lines))

    def systemctl(self, *args: str) -> subprocess.CompletedProcess[str]:
        return self.sh(shlex.join(["systemctl", *args]), check=False)

    def show(self, *properties: str) -> dict[str, str]:
        out = self.sh(shlex.join(["systemctl", "show", UNIT, *(f"-p{p}" for p in properties)]))
        return dict(line.split("=", 1) for line in out.stdout.splitlines() if "=" in line)

    def state(self) -> str:
        return self.show("ActiveState")["ActiveState"]

    def main_pid(self) -> int:
        return int(self.show("MainPID")["MainPID"])

    def wait_active(self, timeout: float = 30) -> None:
        wait_until(lambda: self.state() == "active", timeout, 0.2, f"{UNIT} active")

    def journal_cursor(self) -> str:
        out = self.sh(f"journalctl -u {UNIT} -n 0 --show-cursor --no-pager").stdout
        return out.rsplit("-- cursor: ", 1)[1].strip()

    def journal(self, after: str | None = None, pid: int | None = None) -> str:
        """The unit's journal (messages only), after a cursor, from one process if `pid`."""
        args = ["journalctl", "-u", UNIT, "-o", "cat", "--no-pager"]
        if after:
            args.append(f"--after-cursor={after}")
        if pid:
            args.append(f"_PID={pid}")
        return self.sh(shlex.join(args)).stdout

    def write_config(self, text: str) -> None:
        self.changed = True
        self.sh(f"cat > /etc/guardian/config.yaml <<'EOF'\n{text}\nEOF")

    def drop_in(self, text: str) -> None:
        """A drop-in, as `systemctl edit guardian` makes one; daemon-reload included."""
        self.changed = True
        self.sh(
            f"mkdir -p /etc/systemd/system/{UNIT}.service.d\n"
            f"cat > /etc/systemd/system/{UNIT}.service.d/test.conf <<'EOF'\n{text}\nEOF\n"
            "systemctl daemon-reload"
        )

    def remove_socket(self) -> None:
        """Take the engine's socket away, as if it was never mounted (a bind is kept aside)."""
        self.changed = True
        self.sh(
            f"mkdir -p {Path(SAVED_SOCKET).parent}\n"
            f"mountpoint -q {SAVED_SOCKET} || {{ touch {SAVED_SOCKET}; "
            f"mount --bind {SOCKET} {SAVED_SOCKET}; }}\n"
            f"umount {SOCKET}\nrm -f {SOCKET}"
        )

    def restore_socket(self) -> None:
        """Give the socket back: a link in /run is seen at once inside the unit's namespace."""
        self.sh(f"test -S {SOCKET} || ln -sfn {SAVED_SOCKET} {SOCKET}")

    def restore(self, config: dict[str, Any]) -> None:
        """Put back what tests change (config, drop-in, group, socket); restart on it."""
        if not self.changed:
            return
        self.restore_socket()
        self.write_config(yaml.safe_dump(config))
        gid = "$(stat -L -c %g /var/run/docker.sock)"
        self.sh(
            f"rm -rf /etc/systemd/system/{UNIT}.service.d\nsystemctl daemon-reload\n"
            f'if getent group docker >/dev/null; then groupmod --gid "{gid}" docker\n'
            f'else groupadd --system --gid "{gid}" docker; fi\n'
            f"systemctl reset-failed {UNIT} || true\nsystemctl restart {UNIT}"
        )
        self.wait_active()
        self.changed = False
