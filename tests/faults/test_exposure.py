"""Exposure: secrets handed to Guardian the ways an attacker or an unlucky operator would.

A crash-looping container prints a password and a bearer token, an unhealthy one prints a token
wrapped in terminal escape sequences, the channel URLs carry secrets in their path and query and
the Slack receiver echoes its request path back in a 400, and a second Guardian is given a Docker
URL with a password. Then everything a person or a scraper can see goes to the secrets check (the
`exposure` fixture): every log line, every API answer without and with the token, the CLI's output,
every store column, every notification received and /metrics. No escape sequence may reach the CLI
or the API's decoded text either.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import requests

from tests.faults.conftest import Factory, run_cli, scrape
from tests.faults.exposure import SECRET_SOURCES, Exposure
from tests.faults.notify_check import SLACK_PATH, expose_received, notify_channels
from tests.helpers import wait_until
from tests.integration.conftest import Containers
from tests.integration.see_more import WATCH, incidents, rows, watched
from tests.receiver import Answer, FakeReceiver, Recorded, free_port

TOKEN = SECRET_SOURCES["api token"]
READS = ["/incidents", "/actions?since=1h", "/containers", "/silences?all=true"]
CONTROLS = ("\x1b", "\x07", "\x9b")


def echo_path(rec: Recorded) -> Answer:
    """The Slack receiver refuses with its request path in the answer, as some proxies do; the
    webhook receiver takes everything (so the notifications' bodies are there to scan)."""
    if rec.path.startswith(SLACK_PATH):
        return Answer(400, f"invalid_payload: no hook at {rec.path} (token rejected)")
    return Answer(200, "ok")


def read_api(exposure: Exposure, base: str, engine_up: bool = True) -> list[dict[str, Any]]:
    """Every read endpoint without the token (refused) and with it; the incidents it lists.
    /containers asks the engine: 503 while it is unreachable."""
    auth = {"Authorization": f"Bearer {TOKEN}"}
    listed: list[dict[str, Any]] = []
    for path in READS:
        bare = requests.get(f"{base}/api/v1{path}", timeout=10)
        exposure.add(f"GET {path} without token", bare.content)
        assert bare.status_code == 401, (path, bare.text)
        full = requests.get(f"{base}/api/v1{path}", headers=auth, timeout=10)
        exposure.add(f"GET {path} with token", full.content)
        expected = 503 if path == "/containers" and not engine_up else 200
        assert full.status_code == expected, (path, full.text)
        assert not any(c in json.dumps(full.json(), ensure_ascii=False) for c in CONTROLS)
        if path == "/incidents":
            listed = full.json()["incidents"]
    for incident in listed:
        one = requests.get(f"{base}/api/v1/incidents/{incident['id']}", headers=auth, timeout=10)
        exposure.add(f"GET /incidents/{incident['id']} with token", one.content)
        assert not any(c in json.dumps(one.json(), ensure_ascii=False) for c in CONTROLS)
    return listed


def read_cli(exposure: Exposure, config: Path, incident_ids: list[int]) -> str:
    """What an operator's terminal gets from every command that shows stored text."""
    shown = []
    commands = [
        ["incidents", "list"],
        ["incidents", "list", "--json"],
        ["actions"],
        ["notifications"],
        ["notifications", "--json"],
        ["config", "show"],
    ] + [["incidents", "show", str(i)] for i in incident_ids]
    for args in commands:
        proc = run_cli(exposure, *args, "--config", str(config))
        assert proc.returncode == 0, (args, proc.stderr)
        assert not any(c in proc.stdout + proc.stderr for c in CONTROLS), args
        shown.append(proc.stdout)
    return "\n".join(shown)


def test_secrets_in_container_output_urls_and_echoed_errors_are_shown_nowhere(
    guardian: Factory, containers: Containers, exposure: Exposure
) -> None:
    health = SECRET_SOURCES["health output"]
    crasher = containers.run(
        "leaky-crasher",
        [
            "sh",
            "-c",
            f"echo DB_PASSWORD={SECRET_SOURCES['container log']}; "
            f"echo 'Authorization: Bearer {SECRET_SOURCES['container log bearer']}'; exit 3",
        ],
        enable=None,
        labels=watched(),
        restart_policy={"Name": "always"},
    )
    sick = containers.run(
        "leaky-health",
        enable=None,
        labels=watched(),
        health_cmd=f"printf '\\033[2J\\033[1;31mALL-CLEAR API_TOKEN=%s\\n' {health}; exit 1",
    )
    rx = FakeReceiver()
    rx.respond = echo_path
    try:
        env, notify = notify_channels(rx, SECRET_SOURCES["channel url query"])
        env["GUARDIAN_API_TOKEN"] = TOKEN
        g = guardian(
            env=env,
            watch={"label": WATCH, "interval": "1s"},
            restart={"dry_run": True},
            crash_loop={"restarts": 3, "window": "60s"},
            notify=notify,
        )
        db = g.store_path
        wait_until(lambda: incidents(db, crasher, "crash_loop"), 60, message="crash loop")
        wait_until(lambda: incidents(db, sick, "unhealthy"), 60, message="unhealthy incident")
        wait_until(
            lambda: rows(db, "SELECT * FROM deliveries WHERE channel='slack' AND state='dead'"),
            60,
            message="a Slack delivery dead-lettered on the echoing 400",
        )
        wait_until(lambda: rx.answered(200), 30, message="a webhook notification received")
        [loop] = incidents(db, crasher)
        assert "DB_PASSWORD=*** | Authorization: Bearer ***" in loop["detail"]
        [unhealthy] = incidents(db, sick)
        assert unhealthy["detail"] == "ALL-CLEAR API_TOKEN=***"
        [dead] = rows(db, "SELECT last_error FROM deliveries WHERE state='dead' LIMIT 1")
        assert dead["last_error"].startswith("400 invalid_payload: no hook at ***")

        listed = read_api(exposure, g.http_url)
        assert {i["container"] for i in listed} >= {crasher, sick}
        scrape(g.http_url, exposure)
        read_cli(exposure, g.config_path, [i["id"] for i in listed])
        assert g.stop() == 0
        exposure.add_store(db)

        # A Docker URL with a password: unreachable, so the host incident, its log lines, its
        # notification and the API all quote the engine's error.
        password = SECRET_SOURCES["docker url password"]
        url = f"tcp://admin:{password}@127.0.0.1:{free_port()}"
        down = guardian(
            env=env,
            docker={"url": url, "timeout": "1s"},
            watch={"label": WATCH, "interval": "1s"},
            notify=notify,
        )
        wait_until(
            lambda: incidents(down.store_path, None, "engine_unreachable"), 60, message="down"
        )
        [host] = incidents(down.store_path, None, "engine_unreachable")
        assert "tcp://***@127.0.0.1:" in host["detail"]
        read_api(exposure, down.http_url, engine_up=False)
        scrape(down.http_url, exposure)
        read_cli(exposure, down.config_path, [host["id"]])
        assert down.stop() == 0
        exposure.add_store(down.store_path)
    finally:
        rx.stop()
        expose_received(exposure, rx)
    # Every secret of this test was shown to Guardian, so the check had something to find.
    assert rx.requests and exposure.texts
