"""The operator CLI against the store of a running Guardian, with real containers."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from datetime import UTC, datetime
from typing import Any

import yaml

from guardian.adapters.sqlite.store import SqliteStore
from guardian.entrypoints.cli.tables import cell
from tests.helpers import wait_until
from tests.integration.conftest import REPO, RUN_ID
from tests.live import LiveStream, sign_in

HEALTH = "test ! -f /run/sick"
# Other test sessions may run Guardians on the same engine watching `guardian.enable`: opt in
# with a label of this run only, so no other Guardian touches these containers.
WATCH = {"label": f"gdt.{RUN_ID}.watch"}
OPT_IN = {"enable": None, "labels": {WATCH["label"]: "true"}}
TOKEN = "operator-cli-token-0123456789abcdef"


def cli(g: Any, *args: str) -> subprocess.CompletedProcess[str]:
    """Run `guardian ARGS --config <the daemon's config>` as a separate process."""
    return subprocess.run(
        [sys.executable, "-m", "guardian.entrypoints.cli", *args, "--config", str(g.config_path)],
        capture_output=True,
        text=True,
        timeout=60,
        cwd=REPO,
    )


def ok(g: Any, *args: str) -> str:
    result = cli(g, *args)
    assert result.returncode == 0, result.stderr
    assert "Traceback" not in result.stderr
    return result.stdout


def listing(g: Any, key: str, *args: str) -> list[dict[str, Any]]:
    rows: list[dict[str, Any]] = json.loads(ok(g, *args, "--json"))[key]
    return rows


def parse_table(text: str) -> list[dict[str, str]]:
    """The first table in `text`: columns start where their upper-case header starts."""
    lines = text.split("\n\n")[0].strip("\n").splitlines()
    header = lines[0]
    names = header.split()
    starts = [header.index(n) for n in names]
    ends = [*starts[1:], None]
    return [
        {n.lower(): line[s:e].strip() for n, s, e in zip(names, starts, ends, strict=True)}
        for line in lines[1:]
    ]


def assert_same_rows(g: Any, key: str, *args: str) -> list[dict[str, Any]]:
    """`--json` parses and carries exactly the rows the table shows (Done-when 4)."""
    rows = listing(g, key, *args)
    table = parse_table(ok(g, *args))
    assert rows, f"no rows to compare for {args}"
    columns = list(table[0])
    assert [{c: cell(r[c]) for c in columns} for r in rows] == table
    return rows


def test_people_steer_an_incident_while_guardian_runs(containers, guardian):
    name = containers.run("app", health_cmd=HEALTH, **OPT_IN)
    containers.wait_health(name, "healthy")
    # Dry run keeps the incident `active`; a long interval leaves it to the health event alone.
    g = guardian(watch={**WATCH, "interval": "1h"}, restart={"dry_run": True})
    containers.make_unhealthy(name)
    [incident] = wait_until(
        lambda: listing(g, "incidents", "incidents", "list", "--container", name),
        20,
        0.5,
        "incident",
    )
    iid = str(incident["id"])
    assert incident["state"] == "active"

    [row] = [r for r in listing(g, "containers", "status") if r["container"] == name]
    assert (row["health"], row["incidents"], row["held_back"]) == (
        "unhealthy",
        f"#{iid}:active",
        "dry_run",
    )
    assert_same_rows(g, "containers", "status")

    refused = cli(g, "incidents", "close", iid, "--by", "alice")
    assert refused.returncode == 1
    assert refused.stderr.strip() == (
        f"guardian: cannot close incident {iid}: it is active; resolve it first"
    )

    assert f"incident {iid} ({name}) is now acknowledged" in ok(
        g, "incidents", "ack", iid, "--by", "alice"
    )
    [acked] = listing(g, "incidents", "incidents", "list", "--state", "acknowledged")
    assert acked["id"] == int(iid)
    shown = json.loads(ok(g, "incidents", "show", iid, "--json"))
    assert shown["incident"]["state"] == "acknowledged"
    ack = shown["timeline"][-1]
    assert (ack["actor"], ack["event"]) == ("alice", "active -> acknowledged")
    assert "alice" in ok(g, "incidents", "show", iid)

    no_reason = cli(g, "incidents", "resolve", iid, "--by", "alice")
    assert no_reason.returncode == 1
    assert (
        no_reason.stderr.strip() == f"guardian: cannot resolve incident {iid}: a reason is required"
    )
    ok(g, "incidents", "resolve", iid, "--by", "alice", "--reason", "fixed the disk by hand")
    [resolved] = listing(g, "incidents", "incidents", "list", "--container", name)
    assert (resolved["state"], resolved["resolved_by"]) == ("resolved", "alice")

    ok(g, "incidents", "close", iid, "--by", "bob")
    assert listing(g, "incidents", "incidents", "list", "--state", "active") == []
    rows = assert_same_rows(g, "incidents", "incidents", "list")
    assert [r["state"] for r in rows] == ["closed"]
    timeline = json.loads(ok(g, "incidents", "show", iid, "--json"))["timeline"]
    assert [(e["actor"], e["event"]) for e in timeline if "->" in e["event"]] == [
        ("guardian", "opened -> active"),
        ("alice", "active -> acknowledged"),
        ("alice", "acknowledged -> resolved"),
        ("bob", "resolved -> closed"),
    ]
    assert ("guardian", "decision") in [(e["actor"], e["event"]) for e in timeline]

    missing = cli(g, "incidents", "ack", "999", "--by", "alice")
    assert (missing.returncode, missing.stderr.strip()) == (1, "guardian: incident 999 not found")
    assert g.stop() == 0


def arrived(stream: LiveStream, text: bytes) -> float | None:
    """When (monotonic) the stream's bytes first held `text`: the chunk that completed it."""
    received = b""
    for at, chunk in list(stream.received):
        received += chunk
        if text in received:
            return at
    return None


def test_an_acknowledgement_from_the_cli_reaches_the_live_page_at_once(containers, guardian):
    """A sweep an hour apart: only the store's own change feed, heard as the CLI writes it,
    can bring `guardian incidents ack` to an open page's live stream within seconds (without
    the store watch, this waits for the sweep: it fails)."""
    name = containers.run("ack-live", health_cmd=HEALTH, **OPT_IN)
    containers.wait_health(name, "healthy")
    g = guardian(
        env={"GUARDIAN_API_TOKEN": TOKEN},
        watch={**WATCH, "interval": "1h"},
        restart={"dry_run": True},  # the incident stays open, nothing restarts it
    )
    host, port = g.http_url.removeprefix("http://").rsplit(":", 1)
    stream = LiveStream((host, int(port)), sign_in(g.http_url, TOKEN))
    try:
        stream.wait_events(1)
        containers.make_unhealthy(name)  # the health event opens the incident
        [incident] = wait_until(
            lambda: listing(g, "incidents", "incidents", "list", "--container", name),
            20,
            0.5,
            "incident",
        )
        iid = incident["id"]
        active = f"#{iid} unhealthy, active".encode()
        wait_until(lambda: arrived(stream, active), 10, 0.05, "the incident on the page")
        acknowledged = f"#{iid} unhealthy, acknowledged".encode()
        assert arrived(stream, acknowledged) is None

        ok(g, "incidents", "ack", str(iid), "--by", "alice")  # another process
        done = time.monotonic()
        shown = wait_until(lambda: arrived(stream, acknowledged), 10, 0.01, "the ack on the page")
        # The write lands before the command's exit: the page may show it before it returns.
        assert shown - done < 2.0, f"shown {shown - done:.2f}s after the CLI returned"
    finally:
        stream.close()
    assert "store not watched" not in g.log()
    assert g.stop() == 0


def test_a_silence_holds_restarts_back_until_it_expires(containers, guardian):
    name = containers.run("svc", health_cmd=HEALTH, **OPT_IN)
    containers.wait_health(name, "healthy")
    g = guardian(watch=WATCH)
    before = containers.started_at(name)
    ok(g, "silence", name, "--for", "10s", "--reason", "maintenance", "--by", "alice")
    [silence] = listing(g, "silences", "silences")
    until = datetime.fromisoformat(silence["until"])
    assert (silence["container"], silence["by"], silence["active"]) == (name, "alice", True)

    containers.make_unhealthy(name)
    wait_until(
        lambda: [a for a in listing(g, "actions", "actions", "--container", name)],
        15,
        0.5,
        "a decision",
    )
    assert datetime.now(UTC) < until, "the test machine was too slow to see the silence act"
    [held] = listing(g, "actions", "actions", "--container", name)
    assert (held["kind"], held["reason"], held["outcome"]) == (
        "decision",
        "silenced",
        "policy_denied",
    )
    assert containers.started_at(name) == before

    wait_until(lambda: containers.started_at(name) != before, 25, 0.2, "restart after expiry")
    containers.wait_health(name, "healthy")
    actions = listing(g, "actions", "actions", "--container", name, "--since", "1h")
    restart = next(a for a in actions if a["kind"] == "restart")
    assert restart["reason"] == "allowed"
    assert datetime.fromisoformat(restart["requested_at"]) >= until
    assert listing(g, "silences", "silences") == []  # expired
    assert_same_rows(g, "actions", "actions", "--container", name)
    assert g.stop() == 0


def test_unsilence_lets_guardian_heal_at_once(containers, guardian):
    name = containers.run("lift", health_cmd=HEALTH, **OPT_IN)
    containers.wait_health(name, "healthy")
    g = guardian(watch=WATCH)
    before = containers.started_at(name)
    ok(g, "silence", name, "--for", "1h", "--reason", "upgrade")
    assert_same_rows(g, "silences", "silences")
    containers.make_unhealthy(name)
    wait_until(
        lambda: [r for r in listing(g, "containers", "status") if r["held_back"] == "silenced"],
        15,
        0.5,
        "held back by the silence",
    )
    assert containers.started_at(name) == before

    assert f"{name}: silence lifted" in ok(g, "unsilence", name, "--by", "bob")
    wait_until(lambda: containers.started_at(name) != before, 15, 0.2, "restart after unsilence")
    again = cli(g, "unsilence", name)
    assert (again.returncode, again.stderr.strip()) == (
        1,
        f"guardian: no silence in force for {name}",
    )
    [lifted] = listing(g, "silences", "silences", "--all")
    assert lifted["ended_by"] == "bob"
    assert g.stop() == 0


def test_config_show_prints_the_daemons_effective_config(guardian):
    g = guardian(start=False)
    g.write_config()
    out = ok(g, "config", "show")
    assert "cooldown: 2s" in out and "token_env: GUARDIAN_API_TOKEN" in out


def test_operator_commands_need_no_notification_secrets(tmp_path):
    """Only `guardian run` sends notifications: an operator's shell without the Slack variable
    can still ask for status, incidents, actions and silences."""
    store = tmp_path / "guardian.db"
    SqliteStore(store).close()  # what a daemon leaves behind
    config = tmp_path / "config.yaml"
    config.write_text(
        yaml.safe_dump(
            {
                "store": {"path": str(store)},
                "watch": WATCH,
                "notify": {"slack_webhook_url_env": "GDT_UNSET_SLACK_WEBHOOK_URL"},
            }
        )
    )
    env = {k: v for k, v in os.environ.items() if k != "GDT_UNSET_SLACK_WEBHOOK_URL"}
    for args in (["status"], ["incidents", "list"], ["actions"], ["silences"]):
        result = subprocess.run(
            [sys.executable, "-m", "guardian.entrypoints.cli", *args, "--config", str(config)],
            capture_output=True,
            text=True,
            timeout=60,
            cwd=REPO,
            env=env,
        )
        assert result.returncode == 0, (args, result.stderr)
        assert "slack" not in result.stderr.lower()
