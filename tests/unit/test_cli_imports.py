"""The CLI imports only what a command uses: `--version`, `--help` and `config validate` never
load the Docker SDK, requests, the Prometheus client, APScheduler or the HTTP server.

Measured with `python -X importtime` in a fresh interpreter, the way `guardian` starts; how long
the imports take is a figure for bench/ (`python -m bench imports`), not for a unit test.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.helpers import python

HEAVY = ("docker", "requests", "prometheus_client", "apscheduler", "waitress", "sqlite3")


def imported_modules(*argv: str) -> set[str]:
    """Every module `python -X importtime *argv` imports (read from stderr), after checking
    that the command succeeded."""
    done = python("-X", "importtime", *argv)
    assert done.returncode == 0, done.stderr[-2000:]
    return {
        line.rsplit("|", 1)[1].strip()
        for line in done.stderr.splitlines()
        if line.startswith("import time:") and line.count("|") == 2
    }


def cli_modules(*args: str) -> set[str]:
    return imported_modules("-m", "guardian.entrypoints.cli", *args)


def heavy_among(modules: set[str]) -> list[str]:
    return sorted(m for m in modules if m.split(".")[0] in HEAVY)


@pytest.mark.parametrize("args", [("--version",), ("--help",), ("config", "validate", "--help")])
def test_version_and_help_import_no_adapter_library(args: tuple[str, ...]) -> None:
    modules = cli_modules(*args)
    assert "guardian.entrypoints.cli" in modules  # the parse really ran in this interpreter
    assert heavy_among(modules) == []
    assert not any(m.startswith("guardian.adapters") for m in modules)


def test_config_validate_imports_no_adapter_library(tmp_path: Path) -> None:
    config = tmp_path / "config.yaml"
    config.write_text("watch:\n  interval: 30s\nrestart:\n  max_attempts: 4\n")
    modules = cli_modules("config", "validate", "--config", str(config))
    assert "guardian.config" in modules
    assert heavy_among(modules) == []
    # Nor the model and the decision point: reading a config needs only its rules (~10 ms of
    # dataclass creation saved on every `guardian config validate`, ExecReload's check).
    assert "guardian.core.model" not in modules and "guardian.core.policy" not in modules
    # Nor what only other commands or an error need: the user's name (silence --by), JSON
    # output, "did you mean" (~4 ms; config validate is also the unit's ExecStartPre).
    assert {"getpass", "json", "difflib"} & modules == set()


def test_the_reader_sees_a_heavy_import_when_a_command_makes_one() -> None:
    # `status` needs the engine: the same reader must see the Docker SDK there, so the tests
    # above cannot pass by reading nothing.
    modules = imported_modules("-c", "import guardian.bootstrap")
    assert "docker" in heavy_among(modules)
    assert "prometheus_client" in heavy_among(modules)


def test_config_validate_with_a_log_rule_loads_re2_and_still_not_the_model(
    tmp_path: Path,
) -> None:
    config = tmp_path / "config.yaml"
    config.write_text('logs:\n  - {containers: "api-*", match: "FATAL|OutOfMemoryError"}\n')
    modules = cli_modules("config", "validate", "--config", str(config))
    assert "re2" in modules  # each pattern compiled as the daemon will
    assert heavy_among(modules) == []
    assert "guardian.core.model" not in modules and "guardian.ports" not in modules


def test_config_validate_without_a_log_rule_never_loads_re2(tmp_path: Path) -> None:
    config = tmp_path / "config.yaml"
    config.write_text("watch:\n  interval: 30s\n")
    assert "re2" not in cli_modules("config", "validate", "--config", str(config))
