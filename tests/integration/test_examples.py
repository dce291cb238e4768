"""examples/: the compose files are valid and use exactly the labels and settings Guardian reads."""

from __future__ import annotations

import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml

from guardian.config import load_settings
from guardian.core import labels as guardian_labels
from tests.helpers import require_tool
from tests.integration.conftest import REPO

EXAMPLES = REPO / "examples"
SOCKET = "/var/run/docker.sock"
KNOWN_LABELS = {
    guardian_labels.ENABLE,
    guardian_labels.SELF,
    guardian_labels.MAX_ATTEMPTS,
    guardian_labels.COOLDOWN,
    guardian_labels.STOP_TIMEOUT,
    guardian_labels.NOTIFY,
}


def compose_config(path: Path) -> subprocess.CompletedProcess[str]:
    """`docker compose config` (the plugin) or `docker-compose config` (Debian's package)."""
    if subprocess.run(["docker", "compose", "version"], capture_output=True).returncode == 0:
        cmd = ["docker", "compose"]
    else:
        cmd = [require_tool("docker-compose", "docker-compose")]
    return subprocess.run(
        [*cmd, "-f", str(path), "config", "-q"], capture_output=True, text=True, check=False
    )


def as_dict(value: Any) -> dict[str, str]:
    """Compose accepts a mapping or a list of KEY=value for labels and environment."""
    if isinstance(value, list):
        return dict(item.split("=", 1) for item in value)
    return {str(k): str(v) for k, v in (value or {}).items()}


def load(name: str) -> dict[str, Any]:
    return yaml.safe_load((EXAMPLES / name).read_text())  # type: ignore[no-any-return]


def is_guardian(service: dict[str, Any]) -> bool:
    return any(str(v).startswith(f"{SOCKET}:") for v in service.get("volumes", []))


def check_guardian_service(service: dict[str, Any]) -> None:
    assert f"{SOCKET}:{SOCKET}" in service["volumes"]
    assert any(str(v).endswith(":/var/lib/guardian") for v in service["volumes"])
    env = as_dict(service.get("environment"))
    assert env and all(k.startswith("GUARDIAN_") for k in env)
    load_settings(None, env=env)  # raises ConfigError on a key or value Guardian does not take


@pytest.mark.parametrize("name", ["docker-compose.yml", "swarm-stack.yml"])
def test_example_is_a_valid_compose_file(name: str) -> None:
    result = compose_config(EXAMPLES / name)
    assert result.returncode == 0, result.stderr


def test_compose_example_runs_guardian_next_to_an_opted_in_app_with_a_healthcheck() -> None:
    services = load("docker-compose.yml")["services"]
    guardians = [s for s in services.values() if is_guardian(s)]
    apps = [s for s in services.values() if not is_guardian(s)]
    assert len(guardians) == 1 and apps
    check_guardian_service(guardians[0])
    assert guardians[0]["group_add"]  # the socket's group

    defaults = load_settings(None, env={})
    watch_label = defaults["watch.label"]
    for app in apps:
        labels = as_dict(app["labels"])
        assert app["healthcheck"]["test"]
        assert {k for k in labels if k.startswith("guardian.")} <= KNOWN_LABELS
        assert guardian_labels.opted_in(labels, watch_label)
        rules = guardian_labels.rules_for(
            labels, defaults.restart_policy(), defaults["restart.stop_timeout"], watch_label
        )
        assert rules.warnings == ()  # every override parses


def test_swarm_stack_runs_one_guardian_per_node() -> None:
    service = load("swarm-stack.yml")["services"]["guardian"]
    assert service["deploy"]["mode"] == "global"
    check_guardian_service(service)
    labels = as_dict(service["deploy"].get("labels"))
    assert {k for k in labels if k.startswith("guardian.")} <= KNOWN_LABELS
