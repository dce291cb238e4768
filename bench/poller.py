"""The lean polling baseline: docker-autoheal's request from one Python process (Docker SDK, one
kept connection) instead of a shell spawning curl and jq (bench/autoheal.sh). Every `interval`
seconds, list the opted-in containers the engine reports unhealthy and restart them.

`python -m bench.poller URL SCOPE INTERVAL`; runs until terminated."""

from __future__ import annotations

import signal
import sys
import threading

import docker


def main(url: str, scope: str, interval: float) -> None:
    api = docker.APIClient(base_url=url, version="auto", timeout=60)
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    filters = {"health": "unhealthy", "label": ["guardian.enable=true", scope]}
    while not stop.wait(interval):
        for c in api.containers(filters=filters):
            try:
                api.restart(c["Id"], timeout=10)
            except docker.errors.APIError as exc:  # removed meanwhile: as autoheal, go on
                print(f"restart {c['Id'][:12]} failed: {exc}", file=sys.stderr)


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2], float(sys.argv[3]))
