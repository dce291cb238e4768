"""Configuration: defaults, env overrides, labels, and one-line errors for bad input."""

from __future__ import annotations

import subprocess
import sys
from datetime import timedelta
from pathlib import Path

import pytest

from guardian.config import SCHEMA, ConfigError, load_settings
from guardian.core.detection.restart_policy import RestartPolicy
from guardian.core.durations import format_duration, parse_duration
from guardian.core.labels import in_scope, rules_for

REPO = Path(__file__).resolve().parents[2]


def write(tmp_path: Path, text: str | bytes) -> Path:
    p = tmp_path / "config.yaml"
    p.write_bytes(text.encode() if isinstance(text, str) else text)
    return p


def test_built_in_defaults_match_the_contract() -> None:
    s = load_settings(None, env={})
    assert s["docker.url"] == "unix:///var/run/docker.sock"
    assert s["watch.interval"] == timedelta(seconds=10) and s["watch.events"] is True
    p = s.restart_policy()
    assert (p.cooldown, p.max_attempts, p.window) == (timedelta(seconds=300), 3, timedelta(hours=1))
    assert (p.max_per_minute, p.max_concurrent, p.dry_run) == (10, 2, False)
    assert s["restart.ignore_exit_codes"] == (0,)
    assert s["store.path"] == "/var/lib/guardian/guardian.db"


def test_the_shipped_config_yaml_documents_every_key_with_its_default() -> None:
    s = load_settings(REPO / "config.yaml", env={})
    defaults = load_settings(None, env={})
    text = (REPO / "config.yaml").read_text()
    for section, keys in SCHEMA.items():
        for key in keys:
            assert f"  {key}:" in text, f"config.yaml does not document {section}.{key}"
            assert s[f"{section}.{key}"] == defaults[f"{section}.{key}"], f"{section}.{key}"


def test_environment_overrides_the_file(tmp_path: Path) -> None:
    path = write(tmp_path, "restart:\n  cooldown: 10s\n")
    s = load_settings(
        path, env={"GUARDIAN_RESTART_COOLDOWN": "60s", "GUARDIAN_STORE_PATH": "/tmp/x.db"}
    )
    assert s["restart.cooldown"] == timedelta(seconds=60)
    assert s["store.path"] == "/tmp/x.db" and s.store_path_explicit


def test_docker_host_is_honoured_when_url_is_not_set() -> None:
    s = load_settings(None, env={"DOCKER_HOST": "tcp://127.0.0.1:2375"})
    assert s["docker.url"] == "tcp://127.0.0.1:2375"


@pytest.mark.parametrize(
    ("text", "message"),
    [
        (
            "restart:\n  max_attempts: -1\n",
            "restart.max_attempts = -1: expected an integer from 1 to 1000",
        ),
        ("restart:\n  cooldown: soon\n", "restart.cooldown = 'soon': expected a duration"),
        ("restart:\n  coldown: 5s\n", "unknown key restart.'coldown'; allowed: cooldown,"),
        ("restrat:\n  cooldown: 5s\n", "unknown section 'restrat'; allowed: docker, watch"),
        ("watch:\n  events: maybe\n", "watch.events = 'maybe': expected true or false"),
        ("restart:\n  ignore_exit_codes: [0, 300]\n", "restart.ignore_exit_codes"),
        ("restart: 5\n", "restart: expected a mapping of keys, got 5"),
        ("- a\n- b\n", "expected a mapping of sections"),
        ("restart:\n  cooldown: [1\n", "invalid YAML at line"),
        (
            "restart:\n  cooldown: 10m\n  max_cooldown: 1m\n",
            "restart.max_cooldown = 1m: expected at least restart.cooldown (10m)",
        ),
        (
            "storm:\n  hold: 2h\n  max_hold: 1h\n",
            "storm.max_hold = 1h: expected at least storm.hold (2h)",
        ),
        (
            "storm:\n  hold: 5s\n",
            "storm.hold = '5s': expected a duration from 10s to 1d",
        ),
        (
            "storm:\n  count: tier core\n",
            "storm.count = 'tier core': expected empty, or one label selector \"key\" or "
            '"key=value"',
        ),
        ("storm:\n  count: [tier, core]\n", "storm.count = ['tier', 'core']: expected empty, or"),
        ("storm:\n  count: =core\n", "storm.count = '=core': expected empty, or one label"),
        (
            "log:\n  level: loud\n",
            "log.level = 'loud': expected one of debug, info, warning, error",
        ),
        ("http:\n  listen: 9321\n", "http.listen = 9321: expected host:port"),
        (
            "http:\n  allowed_hosts: [guardian.lan:9321]\n",
            "http.allowed_hosts = ['guardian.lan:9321']: expected a list of host names without "
            'ports (e.g. [guardian.lan]), or "*"',
        ),
        (
            "http:\n  trusted_proxies: [proxy.lan]\n",
            "http.trusted_proxies = ['proxy.lan']: expected a list of addresses or networks",
        ),
    ],
)
def test_bad_values_give_one_line_naming_key_value_and_allowed(tmp_path, text, message) -> None:
    with pytest.raises(ConfigError) as err:
        load_settings(write(tmp_path, text), env={})
    assert message in str(err.value)
    assert "\n" not in str(err.value)


def test_bad_environment_value_names_the_variable() -> None:
    with pytest.raises(
        ConfigError, match=r"restart.max_attempts \(from GUARDIAN_RESTART_MAX_ATTEMPTS\) = 'x'"
    ):
        load_settings(None, env={"GUARDIAN_RESTART_MAX_ATTEMPTS": "x"})


def test_non_utf8_file_is_a_clear_error(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="not valid UTF-8"):
        load_settings(write(tmp_path, b"restart:\n  cooldown: \xff\xfe\n"), env={})


DEFAULTS_VALIDATED = (
    "config ok (built-in defaults): watching label 'guardian.enable' every 10s, cooldown 5m,"
    " max_attempts 3\n"
)


@pytest.mark.parametrize(
    ("argv", "stderr_start"),
    [
        (["config", "validate"], None),
        (
            ["config", "validate", "--config", "BAD"],
            "guardian: config error: restart.max_attempts = 0",
        ),
        (["check", "--config", "BAD"], "guardian: config error: restart.max_attempts = 0"),
        (["run", "--config", "BAD"], "guardian: config error: restart.max_attempts = 0"),
        (["config", "validate", "--config", "MISSING"], "guardian: config error: "),
    ],
)
def test_cli_exits_2_with_one_line_and_no_traceback(tmp_path, argv, stderr_start) -> None:
    bad = write(tmp_path, "restart:\n  max_attempts: 0\n")
    argv = [
        str(bad) if a == "BAD" else str(tmp_path / "nope.yaml") if a == "MISSING" else a
        for a in argv
    ]
    proc = subprocess.run(
        [sys.executable, "-m", "guardian.entrypoints.cli", *argv],
        capture_output=True,
        text=True,
        timeout=60,
        cwd=REPO,
        env={"PATH": "/usr/bin:/bin"},
    )
    if stderr_start is None:  # what was loaded: the built-in defaults
        assert (proc.returncode, proc.stdout) == (0, DEFAULTS_VALIDATED)
        return
    assert proc.returncode == 2
    assert proc.stderr.startswith(stderr_start)
    assert len(proc.stderr.strip().splitlines()) == 1
    assert "Traceback" not in proc.stderr


@pytest.mark.parametrize(
    ("text", "seconds"),
    [
        ("500ms", 0.5),
        ("30s", 30),
        ("5m", 300),
        ("1h", 3600),
        ("2d", 172800),
        (15, 15),
        ("1.5s", 1.5),
    ],
)
def test_durations(text, seconds) -> None:
    assert parse_duration(text) == timedelta(seconds=seconds)


@pytest.mark.parametrize("bad", ["", "5 minutes", "-1s", "1y", None, True, [1], "nan", "400d"])
def test_bad_durations_are_refused(bad) -> None:
    with pytest.raises(ValueError):
        parse_duration(bad)


def test_format_duration_round_trips() -> None:
    for text in ["500ms", "30s", "5m", "1h", "1500ms"]:
        assert format_duration(parse_duration(text)) == text


BASE = RestartPolicy()


def test_labels_override_the_policy_per_container() -> None:
    rules = rules_for(
        {
            "guardian.enable": "true",
            "guardian.max_attempts": "2",
            "guardian.cooldown": "10m",
            "guardian.stop_timeout": "20",
        },
        BASE,
        timedelta(seconds=10),
        "guardian.enable",
    )
    assert rules.opted_in and not rules.warnings
    assert rules.policy.max_attempts == 2 and rules.policy.cooldown == timedelta(minutes=10)
    assert rules.stop_timeout == timedelta(seconds=20)


def test_a_bad_label_is_a_warning_and_the_default_applies() -> None:
    rules = rules_for(
        {
            "guardian.enable": "true",
            "guardian.max_attempts": "many; rm -rf /",
            "guardian.cooldown": "🙂",
        },
        BASE,
        timedelta(seconds=10),
        "guardian.enable",
    )
    assert rules.policy.max_attempts == 3 and rules.policy.cooldown == BASE.cooldown
    assert len(rules.warnings) == 2 and "guardian.max_attempts" in rules.warnings[0]


@pytest.mark.parametrize(
    ("labels", "mode", "watched"),
    [
        ({}, "guardian.enable", False),
        ({"guardian.enable": "true"}, "guardian.enable", True),
        ({"guardian.enable": "false"}, "guardian.enable", False),
        ({}, "all", True),
        ({"guardian.enable": "false"}, "all", False),
        ({"guardian.enable": "FALSE"}, "all", False),
    ],
)
def test_opt_in(labels, mode, watched) -> None:
    assert rules_for(labels, BASE, timedelta(0), mode).opted_in is watched


def test_guardian_recognises_itself_by_label_or_id() -> None:
    assert rules_for({"guardian.self": "true"}, BASE, timedelta(0), "all").is_self
    assert rules_for({}, BASE, timedelta(0), "all", self_id="abc", container_id="abc123").is_self
    assert not rules_for({}, BASE, timedelta(0), "all", self_id="abc", container_id="def").is_self


@pytest.mark.parametrize(
    ("labels", "scope", "inside"),
    [
        ({}, "", True),
        ({"com.docker.compose.project": "shop"}, "com.docker.compose.project=shop", True),
        ({"com.docker.compose.project": "blog"}, "com.docker.compose.project=shop", False),
        ({"team": "x"}, "team", True),
        ({}, "team", False),
    ],
)
def test_watch_scope_limits_what_guardian_considers(labels, scope, inside) -> None:
    assert in_scope(labels, scope) is inside


def test_storm_count_is_a_label_selector_every_watched_container_by_default() -> None:
    assert load_settings(None, env={})["storm.count"] == ""
    chosen = load_settings(None, env={"GUARDIAN_STORM_COUNT": "com.docker.compose.project=shop"})
    assert chosen["storm.count"] == "com.docker.compose.project=shop"


def test_bad_scope_is_refused() -> None:
    with pytest.raises(ConfigError) as err:
        load_settings(None, env={"GUARDIAN_WATCH_SCOPE": "a b"})
    assert "watch.scope (from GUARDIAN_WATCH_SCOPE) = 'a b': expected empty, or one" in str(
        err.value
    )


def test_an_unknown_key_of_a_long_section_names_the_closest_keys_in_one_short_line(
    tmp_path: Path,
) -> None:
    for key, hint in (
        ("slack_webhok_url_env", "did you mean slack_webhook_url_env"),
        ("", f"the {len(SCHEMA['notify'])} keys of notify are listed"),
    ):
        path = tmp_path / "guardian.yaml"
        path.write_text(f"notify:\n  '{key}': x\n")
        with pytest.raises(ConfigError) as err:
            load_settings(path, env={})
        message = str(err.value)
        assert hint in message and "docs/" in message
        assert len(message) < 200 and "\\n" not in message


def test_a_misspelt_environment_variable_is_an_error_naming_the_closest_key() -> None:
    with pytest.raises(ConfigError) as typo:
        load_settings(None, env={"GUARDIAN_RESTART_DRYRUN": "true"})
    assert str(typo.value) == (
        "unknown environment variable 'GUARDIAN_RESTART_DRYRUN'; did you mean "
        "GUARDIAN_RESTART_DRY_RUN (restart.dry_run)?"
    )
    with pytest.raises(ConfigError, match=r"'GUARDIAN_LOG_X'; allowed: GUARDIAN_LOG_LEVEL, "):
        load_settings(None, env={"GUARDIAN_LOG_X": "1"})


@pytest.mark.parametrize(
    ("env", "token_env"),
    [
        ({"GUARDIAN_API_TOKEN": "t"}, "GUARDIAN_API_TOKEN"),  # named by api.token_env
        (
            {"GUARDIAN_API_TOKEN_ENV": "GUARDIAN_OPS_TOKEN", "GUARDIAN_OPS_TOKEN": "t"},
            "GUARDIAN_OPS_TOKEN",
        ),
        ({"GUARDIAN_CONFIG": "/etc/guardian/config.yaml"}, "GUARDIAN_API_TOKEN"),  # the CLI's
        # another program's: no section, near no key
        ({"GUARDIAN_REQUIRE_DOCKER": "1"}, "GUARDIAN_API_TOKEN"),
    ],
)
def test_variables_that_are_not_config_keys_but_not_typos_either_are_left_alone(
    env, token_env
) -> None:
    loaded = load_settings(None, env=env)
    assert loaded["api.token_env"] == token_env
    defaults = load_settings(None, env={}).values
    assert {**loaded.values, "api": defaults["api"]} == defaults  # nothing else changed


def test_the_cli_refuses_a_misspelt_variable_as_it_refuses_the_same_typo_in_the_file(
    tmp_path: Path,
) -> None:
    proc = subprocess.run(
        [sys.executable, "-m", "guardian.entrypoints.cli", "config", "validate"],
        capture_output=True,
        text=True,
        timeout=60,
        cwd=REPO,
        env={"PATH": "/usr/bin:/bin", "GUARDIAN_RESTART_DRYRUN": "true"},
    )
    assert (proc.returncode, proc.stdout) == (2, "")
    assert proc.stderr == (
        "guardian: config error: unknown environment variable 'GUARDIAN_RESTART_DRYRUN'; "
        "did you mean GUARDIAN_RESTART_DRY_RUN (restart.dry_run)?\n"
    )


def alias_bomb(levels: int = 10) -> str:
    """The "billion laughs" under a known key: 9**levels strings from a file of 1 KB."""
    rows = [f"    - &a0 [{','.join(['lol'] * 9)}]"]
    rows += [f"    - &a{i} [{','.join([f'*a{i - 1}'] * 9)}]" for i in range(1, levels)]
    return "docker:\n  url:\n" + "\n".join(rows) + "\n"


def test_an_alias_bomb_is_refused_before_it_expands(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match=r"aliases expand to more than 10000 values$"):
        load_settings(write(tmp_path, alias_bomb()), env={})
    recursive = "restart:\n  ignore_exit_codes: &loop [1, *loop]\n"
    with pytest.raises(ConfigError, match="an alias refers to a node that contains it"):
        load_settings(write(tmp_path, recursive), env={})
    # Aliases within the bound are YAML like any other.
    fine = load_settings(write(tmp_path, "probe:\n  period: &t 5s\n  timeout: *t\n"), env={})
    assert fine["probe.period"] == fine["probe.timeout"] == timedelta(seconds=5)


def test_a_file_over_1_mib_is_refused_without_reading_it(tmp_path: Path) -> None:
    big = tmp_path / "config.yaml"
    with big.open("wb") as f:
        f.write(b"restart:\n  max_attempts: 3\n")
        f.truncate(200 * 1024 * 1024)  # sparse: 200 MB to read, nothing on disk
    with pytest.raises(ConfigError) as refused:
        load_settings(big, env={})
    assert str(refused.value) == f"{big}: larger than 1 MiB (1048576 bytes); a config is a few KiB"


def test_allowed_hosts_and_trusted_proxies_come_from_the_file_or_the_environment(
    tmp_path: Path,
) -> None:
    path = write(tmp_path, "http:\n  allowed_hosts: [Guardian.LAN, '*']\n")
    assert load_settings(path, env={})["http.allowed_hosts"] == ("guardian.lan", "*")
    env = {"GUARDIAN_HTTP_TRUSTED_PROXIES": "127.0.0.1, 172.16.0.0/12"}
    assert load_settings(None, env=env)["http.trusted_proxies"] == (
        "127.0.0.1/32",
        "172.16.0.0/12",
    )
