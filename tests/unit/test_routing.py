"""Receivers and routes: who hears what (core.outbound.routing, a table), the config that names them
(one-line errors naming the receiver and key), the flat keys mapped to receivers with a note,
the guardian.notify label, `config show`, and delivery through the worker."""

from __future__ import annotations

import logging
from dataclasses import replace
from pathlib import Path

import pytest
import yaml
from prometheus_client import CollectorRegistry

from guardian.adapters.prometheus import PrometheusMetrics
from guardian.adapters.sqlite.outbox import SqliteOutbox
from guardian.adapters.sqlite.store import SqliteStore
from guardian.bootstrap import build_delivery
from guardian.config import ConfigError, load_settings
from guardian.core.detection.restart_policy import RestartPolicy
from guardian.core.labels import rules_for
from guardian.core.outbound.delivery import Result, Status
from guardian.core.outbound.notifications import Kind, Notification
from guardian.core.outbound.receivers import ROUTED_KINDS
from guardian.core.outbound.routing import Route, Routing, route_of, severity
from guardian.entrypoints.cli.status import effective_config
from guardian.service.outbound.delivery import DeliveryWorker, WorkerSettings
from tests.fakes import T0, FakeClock, FakeNotifier
from tests.samples import S

RECEIVERS = {"team-a": ("team-a",), "team-b": ("team-b",), "pager": ("pager",), "ops": ("ops",)}
ESCALATE = Route(("pager",), severities=frozenset({"critical"}), proceed=True)
ROUTING = Routing(RECEIVERS, (ESCALATE,), ("ops",))


def note(kind=Kind.OPENED, container="web", receivers=(), escalated=False):
    return Notification(
        kind,
        1,
        "vm1",
        container,
        "unhealthy",
        "active",
        T0,
        receivers=receivers,
        escalated=escalated,
    )


@pytest.mark.parametrize(
    ("routing", "n", "heard"),
    [
        # A container's label names its receivers: only they hear its news ...
        (ROUTING, note(receivers=("team-a",)), ["team-a"]),
        # ... and the escalation route adds the pager, the label's receivers still hear it.
        (ROUTING, note(Kind.GAVE_UP, receivers=("team-a",)), ["pager", "team-a"]),
        (ROUTING, note(Kind.RESOLVED, receivers=("team-a",), escalated=True), ["pager", "team-a"]),
        (ROUTING, note(Kind.RESOLVED, receivers=("team-a",)), ["team-a"]),
        # No label: the default.
        (ROUTING, note(), ["ops"]),
        (ROUTING, note(Kind.REMINDER), ["pager", "ops"]),
        # A label naming no receiver that exists: the default hears it.
        (ROUTING, note(receivers=("nobody",)), ["ops"]),
        (ROUTING, note(receivers=("nobody", "team-b")), ["team-b"]),
        # No default: every receiver.
        (Routing(RECEIVERS), note(), ["team-a", "team-b", "pager", "ops"]),
        # A route without continue decides alone; the first that matches wins.
        (
            Routing(
                RECEIVERS,
                (Route(("team-b",), containers=("db-*",)), Route(("pager",))),
                ("ops",),
            ),
            note(container="db-main", receivers=("team-a",)),
            ["team-b"],
        ),
        (
            Routing(RECEIVERS, (Route(("team-b",), kinds=frozenset({"attempt"})),), ("ops",)),
            note(Kind.OPENED),
            ["ops"],
        ),
        (
            Routing(RECEIVERS, (Route(("team-b",), kinds=frozenset({"started"})),), ("ops",)),
            note(Kind.STARTED, container=""),
            ["team-b"],
        ),
    ],
)
def test_who_hears_what(routing, n, heard):
    assert routing.receivers_of(n) == heard


def test_an_apprise_receiver_is_all_its_urls():
    routing = Routing({"chat": ("chat", "chat:2"), "ops": ("ops",)}, default=("chat",))
    assert routing.channels_of(note()) == ["chat", "chat:2"]


@pytest.mark.parametrize(
    ("n", "level"),
    [
        (note(Kind.OPENED), "warning"),
        (note(Kind.ATTEMPT), "warning"),
        (note(Kind.GAVE_UP), "critical"),
        (note(Kind.REMINDER), "critical"),
        (note(Kind.ACKNOWLEDGED, escalated=True), "critical"),
        (note(Kind.RESOLVED), "info"),
        (note(Kind.STARTED), "info"),
    ],
)
def test_severity(n, level):
    assert severity(n) == level


def test_the_routed_kinds_are_every_kind_but_the_test_and_a_channel_failure():
    assert set(ROUTED_KINDS) == {str(k) for k in Kind} - {"test", "channel_failed"}


# -- config -----------------------------------------------------------------------------------


def load(tmp_path: Path, notify: dict, env: dict | None = None):
    path = tmp_path / "config.yaml"
    path.write_text(yaml.safe_dump({"notify": notify}))
    return load_settings(path, env=env or {})


TEAM = {"name": "team-a", "type": "slack", "url_env": "TEAM_A_URL"}
PAGER = {"name": "pager", "type": "pagerduty", "routing_key_file": "/run/secrets/pd"}


def test_receivers_routes_and_default_parse_into_plain_values(tmp_path):
    s = load(
        tmp_path,
        {
            "channels": [TEAM, PAGER],
            "routes": [{"receivers": ["pager"], "severity": ["critical"], "continue": True}],
            "default": ["team-a"],
        },
    )
    team, pager = s["notify.channels"]
    assert dict(team) == {"name": "team-a", "type": "slack", **TEAM, "url_file": None}
    assert pager["events"] == "escalations" and pager["url"].startswith("https://events")
    [route] = s["notify.routes"]
    assert route["receivers"] == ("pager",) and route["continue"] is True
    assert s["notify.default"] == ("team-a",)


@pytest.mark.parametrize(
    ("notify", "error"),
    [
        ({"channels": {"name": "x"}}, "notify.channels = {'name': 'x'}: expected a list of at"),
        ({"channels": ["slack"]}, "notify.channels[0] = 'slack': expected a mapping"),
        ({"channels": [{"type": "slack"}]}, "notify.channels[0].name = None: expected a name"),
        (
            {"channels": [{"name": "Team A", "type": "slack"}]},
            "notify.channels[0].name = 'Team A': expected a name (lower-case letters",
        ),
        (
            {"channels": [{"name": "t", "type": "teams"}]},
            "notify.channels[0] (t).type = 'teams': expected one of slack, slack_bot, discord",
        ),
        (
            {"channels": [{**TEAM, "webhook_url": "https://gdtSecret"}]},
            "notify.channels[0] (team-a): unknown key 'webhook_url'; a slack has name, type, "
            "url_env, url_file",
        ),
        (
            {"channels": [{"name": "t", "type": "slack"}]},
            "notify.channels[0] (t): a slack needs url_env or url_file",
        ),
        (
            {"channels": [{**TEAM, "url_file": "/run/s"}]},
            "notify.channels[0] (team-a): url_env and url_file: set only one of them",
        ),
        (
            {"channels": [{**TEAM, "url_env": "not a name"}]},
            "notify.channels[0] (team-a).url_env = 'not a name': expected the NAME of an",
        ),
        (
            {
                "channels": [
                    {
                        "name": "m",
                        "type": "email",
                        "smtp_host": "h",
                        "from": "a@b",
                        "to": "c@d",
                        "smtp_port": 70000,
                    }
                ]
            },
            "notify.channels[0] (m).smtp_port = 70000: expected an integer from 1 to 65535",
        ),
        ({"channels": [TEAM, TEAM]}, "notify.channels[1] (team-a).name: another receiver"),
        ({"channels": [TEAM] * 33}, "expected a list of at most 32 receivers"),
        (
            {"channels": [TEAM], "routes": [{"receivers": ["pager"]}]},
            "notify.routes[0].receivers: no receiver 'pager'; receivers: team-a",
        ),
        (
            {"channels": [TEAM], "routes": [{"receivers": []}]},
            "notify.routes[0].receivers: at least one receiver name",
        ),
        (
            {"channels": [TEAM], "routes": [{"receivers": ["team-a"], "kinds": ["gaveup"]}]},
            "notify.routes[0].kinds: 'gaveup': expected any of opened, attempt, resolved,",
        ),
        (
            {"channels": [TEAM], "routes": [{"receivers": ["team-a"], "severity": ["high"]}]},
            "notify.routes[0].severity: 'high': expected any of info, warning, critical",
        ),
        (
            {"channels": [TEAM], "routes": [{"receivers": ["team-a"], "match": {}}]},
            "notify.routes[0]: unknown key 'match'; a route has receivers, kinds, severity,",
        ),
        (
            {"channels": [TEAM], "routes": [{"receivers": ["team-a"], "continue": "yes"}]},
            "notify.routes[0].continue = 'yes': expected true or false",
        ),
        (
            {"channels": [TEAM], "routes": [{"receivers": ["team-a"], "containers": ["x" * 300]}]},
            "notify.routes[0].containers: 'xxxx",
        ),
        ({"channels": [TEAM], "default": ["ops"]}, "notify.default: no receiver 'ops'"),
        (
            {"channels": [{**TEAM, "name": "slack"}], "slack_webhook_url_env": "OLD"},
            "notify.channels: the name 'slack' is taken by the flat notify.slack_* keys",
        ),
    ],
)
def test_a_bad_receiver_or_route_is_one_line_naming_it(tmp_path, notify, error):
    with pytest.raises(ConfigError) as exc:
        load(tmp_path, notify)
    message = str(exc.value)
    assert error in message, message
    assert "\n" not in message and "gdtSecret" not in message and len(message) < 400


def test_receivers_from_the_environment_as_json():
    env = {"GUARDIAN_NOTIFY_CHANNELS": '[{"name": "t", "type": "slack", "url_env": "T_URL"}]'}
    assert load_settings(None, env=env)["notify.channels"][0]["url_env"] == "T_URL"
    with pytest.raises(ConfigError, match="GUARDIAN_NOTIFY_CHANNELS"):
        load_settings(None, env={"GUARDIAN_NOTIFY_CHANNELS": "[{"})


def test_config_show_prints_the_receivers_without_secrets(tmp_path):
    alert = {"name": "am", "type": "alertmanager", "url": "http://u:gdtSecretPw@127.0.0.1:9093"}
    s = load(tmp_path, {"channels": [TEAM, alert], "routes": [{"receivers": ["am"]}]})
    shown = effective_config(s)["notify"]
    assert shown["channels"][0] == {**TEAM, "url_file": None}
    assert "gdtSecretPw" not in yaml.safe_dump(shown)
    assert shown["routes"][0]["receivers"] == ["am"]


# -- the label ----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("value", "receivers", "notify", "warned"),
    [
        ("team-a", ("team-a",), True, False),
        ("team-a, pager", ("team-a", "pager"), True, False),
        ("false", (), False, False),
        ("true", (), True, False),
        ("Team A!", (), True, True),
        ("a " * 9, (), True, True),
        ("<!channel>", (), True, True),
    ],
)
def test_the_notify_label_names_receivers_or_mutes(value, receivers, notify, warned):
    rules = rules_for({"guardian.notify": value}, RestartPolicy(), 10 * S, "guardian.enable")
    assert (rules.receivers, rules.notify, bool(rules.warnings)) == (receivers, notify, warned)
    assert all(len(w) < 200 for w in rules.warnings)


# -- bootstrap and the worker ---------------------------------------------------------------


def test_the_flat_keys_become_receivers_with_a_note_naming_the_entry_to_write(tmp_path, caplog):
    env = {"GUARDIAN_NOTIFY_SLACK_WEBHOOK_URL_ENV": "SLACK_URL", "SLACK_URL": "http://h/gdtSecretX"}
    store = SqliteStore(tmp_path / "g.db")
    with caplog.at_level(logging.WARNING):
        worker = build_delivery(
            load_settings(None, env=env),
            store,
            FakeClock(),
            PrometheusMetrics(CollectorRegistry()),
            "vm1",
            env,
        )
    store.close()
    assert [c.name for c in worker.channels] == ["slack"]
    [line] = [r.getMessage() for r in caplog.records if "deprecated" in r.getMessage()]
    assert line == (
        "notify.slack_* keys are deprecated; write under notify.channels: "
        "{name: slack, type: slack, url_env: SLACK_URL}"
    )
    assert "gdtSecretX" not in caplog.text


def test_a_receiver_secret_missing_names_the_receiver(tmp_path):
    env = {"GUARDIAN_NOTIFY_CHANNELS": '[{"name": "t", "type": "slack", "url_env": "T_URL"}]'}
    store = SqliteStore(tmp_path / "g.db")
    with pytest.raises(ConfigError) as exc:
        build_delivery(
            load_settings(None, env=env),
            store,
            FakeClock(),
            PrometheusMetrics(CollectorRegistry()),
            "vm1",
            env,
        )
    store.close()
    assert str(exc.value) == (
        "notify.channels (t).url_env = 'T_URL': that environment variable is not set or empty"
    )


def test_each_receiver_hears_only_what_is_routed_to_it_with_its_own_retries(tmp_path):
    store = SqliteStore(tmp_path / "g.db")
    team_a, team_b, pager = FakeNotifier("team-a"), FakeNotifier("team-b"), FakeNotifier("pager")
    team_b.results = [Result(Status.TRANSIENT, "500")]
    clock = FakeClock()
    worker = DeliveryWorker(
        SqliteOutbox(store.db),
        [team_a, team_b, pager],
        clock,
        PrometheusMetrics(CollectorRegistry()),
        WorkerSettings("vm1", 0 * S),
        routing=Routing(
            {"team-a": ("team-a",), "team-b": ("team-b",), "pager": ("pager",)},
            (ESCALATE,),
            ("team-b",),
        ),
    )
    outbox = SqliteOutbox(store.db)
    outbox.enqueue([replace(note(container="db", receivers=("team-a",)), incident_id=None)])
    outbox.enqueue([replace(note(Kind.GAVE_UP, container="web"), incident_id=None)])
    for _ in range(3):
        worker.tick()
        clock.advance(5)
    store.close()
    assert [(n.container, str(n.kind)) for [n] in team_a.sent] == [("db", "opened")]
    assert [(n.container, str(n.kind)) for [n] in pager.sent] == [("web", "gave_up")]
    assert [(n.container, str(n.kind)) for [n] in team_b.sent] == [("web", "gave_up")] * 2


def test_the_documented_worked_example_routes_as_it_says(tmp_path):
    doc = (Path(__file__).resolve().parents[2] / "docs" / "notifications.md").read_text()
    block = doc.split("A worked example", 1)[1].split("```yaml\n", 1)[1].split("```", 1)[0]
    path = tmp_path / "config.yaml"
    path.write_text(block)
    s = load_settings(path, env={})
    names = {r["name"]: (r["name"],) for r in s["notify.channels"]}
    routes = tuple(route_of(r) for r in s["notify.routes"])
    routing = Routing(names, routes, s["notify.default"])
    assert routing.receivers_of(note(container="db", receivers=("db-team",))) == ["db-team"]
    assert routing.receivers_of(note(container="web")) == ["team"]
    assert routing.receivers_of(note(Kind.GAVE_UP, receivers=("db-team",))) == ["pager", "db-team"]
    assert routing.receivers_of(note(Kind.STARTED, container="")) == ["mail"]
    assert s["notify.on_start"] is True
