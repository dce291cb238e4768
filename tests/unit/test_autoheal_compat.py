"""docker-autoheal's variables and labels read as Guardian's own (issue 31): each variable maps
to one key, parsed and bounded by it, with one log line; what Guardian cannot honour is said."""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path

import pytest
import yaml

from guardian.config import ConfigError, load_settings
from guardian.core.detection.restart_policy import RestartPolicy
from guardian.core.labels import opted_in, rules_for

AUTOHEAL = {
    "AUTOHEAL_CONTAINER_LABEL": "all",
    "AUTOHEAL_INTERVAL": "5",
    "AUTOHEAL_START_PERIOD": "30",
    "AUTOHEAL_DEFAULT_STOP_TIMEOUT": "20",
    "AUTOHEAL_ONLY_MONITOR_RUNNING": "true",
    "DOCKER_SOCK": "tcp://127.0.0.1:2375",
    "CURL_TIMEOUT": "15",
    "WEBHOOK_URL": "https://hooks.example/secret-path-0123",
    "WEBHOOK_JSON_KEY": "text",
    "APPRISE_URL": "json://127.0.0.1:9/secret-apprise",
    "POST_RESTART_SCRIPT": "/bin/true",
}


def test_every_autoheal_variable_maps_to_a_key_and_is_logged() -> None:
    s = load_settings(None, env=AUTOHEAL)
    assert s["watch.label"] == "all"
    assert s["watch.interval"] == timedelta(seconds=5)
    assert s["watch.start_grace"] == timedelta(seconds=30)
    assert s["restart.stop_timeout"] == timedelta(seconds=20)
    assert s["restart.ignore_exit_codes"] == tuple(range(256))
    assert s["docker.url"] == "tcp://127.0.0.1:2375"
    assert s["docker.timeout"] == timedelta(seconds=15)
    assert s["notify.webhook_url_env"] == "WEBHOOK_URL"
    assert s["notify.webhook_json_key"] == "text"
    assert s["notify.apprise_urls_env"] == "APPRISE_URL"
    assert [tuple(h.argv) for h in s["remediation.hooks"]] == [("/bin/true",)]
    text = "\n".join(s.notes)
    assert "compat autoheal is on" in s.notes[0]
    for name in AUTOHEAL:
        assert f"compat autoheal: {name}=" in text, name
    assert "AUTOHEAL_INTERVAL=5 -> watch.interval=5s" in text
    assert "secret-path" not in text and "secret-apprise" not in text  # URLs never logged


def test_a_socket_path_becomes_a_unix_url_and_the_default_label_is_autoheals() -> None:
    s = load_settings(None, env={"DOCKER_SOCK": "/run/docker.sock", "AUTOHEAL_INTERVAL": "10"})
    assert s["docker.url"] == "unix:///run/docker.sock"
    assert s["watch.label"] == "autoheal"


def test_guardians_own_variables_and_compat_none_win(tmp_path: Path) -> None:
    env = {"AUTOHEAL_INTERVAL": "5", "GUARDIAN_WATCH_INTERVAL": "7s"}
    assert load_settings(None, env=env)["watch.interval"] == timedelta(seconds=7)
    path = tmp_path / "c.yaml"
    path.write_text(yaml.safe_dump({"compat": "none", "watch": {"label": "guardian.enable"}}))
    s = load_settings(path, env={"AUTOHEAL_INTERVAL": "5"})
    assert s["watch.interval"] == timedelta(seconds=10) and s.notes == ()
    path.write_text(yaml.safe_dump({"compat": "autoheal", "watch": {"label": "mine"}}))
    assert load_settings(path, env={})["watch.label"] == "mine"  # autoheal's default loses


@pytest.mark.parametrize(
    ("env", "named"),
    [
        ({"AUTOHEAL_INTERVAL": "soon"}, "watch.interval (from AUTOHEAL_INTERVAL)"),
        ({"AUTOHEAL_DEFAULT_STOP_TIMEOUT": "99999"}, "restart.stop_timeout (from AUTOHEAL_"),
        ({"GUARDIAN_COMPAT": "autoheel"}, "compat (from GUARDIAN_COMPAT)"),
    ],
)
def test_a_bad_autoheal_value_is_one_line_naming_the_variable(
    env: dict[str, str], named: str
) -> None:
    with pytest.raises(ConfigError) as exc:
        load_settings(None, env=env)
    assert named in str(exc.value) and "\n" not in str(exc.value)


def test_an_unknown_autoheal_variable_is_said_once() -> None:
    s = load_settings(None, env={"AUTOHEAL_FANCY": "1"})
    assert any("AUTOHEAL_FANCY is not a docker-autoheal variable" in n for n in s.notes)


@pytest.mark.parametrize("value", ["false", "FALSE", "False", "no"])
def test_autoheal_false_opts_out_in_all_mode_in_any_case(value: str) -> None:
    assert not opted_in({"autoheal": value}, "all")
    assert opted_in({"autoheal": "true"}, "all") and opted_in({}, "all")
    assert opted_in({"autoheal": "true"}, "autoheal")
    assert not opted_in({"autoheal": value}, "autoheal")


def test_autoheal_stop_timeout_label_is_read_as_guardians_and_bounded() -> None:
    base = RestartPolicy()
    rules = rules_for({"autoheal.stop.timeout": "20"}, base, timedelta(seconds=10), "all")
    assert rules.stop_timeout == timedelta(seconds=20) and not rules.warnings
    both = rules_for(
        {"autoheal.stop.timeout": "20", "guardian.stop_timeout": "5"},
        base,
        timedelta(seconds=10),
        "all",
    )
    assert both.stop_timeout == timedelta(seconds=5)  # Guardian's own label wins
    hostile = rules_for({"autoheal.stop.timeout": "9" * 50}, base, timedelta(seconds=10), "all")
    assert hostile.stop_timeout == timedelta(seconds=10)
    assert hostile.warnings and "autoheal.stop.timeout" in hostile.warnings[0]
