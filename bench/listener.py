"""The floor for a burst on this machine: a bare listener that restarts every container the engine
reports unhealthy, each in its own thread, the moment the event arrives; no decision, no store.
With `--inspect` it first inspects the container, as any healer that checks before it acts
(Guardian does) must: the floor for those.

`python -m bench.listener URL SCOPE OUT [--inspect]`; writes "listening" to OUT once subscribed,
then "<unix time> <name>" as each restart is requested, and runs until terminated."""

from __future__ import annotations

import signal
import sys
import threading
import time

import docker


def main(url: str, scope: str, out: str, inspect: bool = False) -> None:
    api = docker.APIClient(base_url=url, version="auto", timeout=60)
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
    filters = {"event": "health_status", "label": scope}
    with open(out, "a", buffering=1) as log:
        events = api.events(filters=filters, decode=True)  # subscribed when this returns
        log.write("listening\n")

        def restart(cid: str, name: str) -> None:
            if inspect:
                api.inspect_container(cid)
            log.write(f"{time.time()} {name}\n")
            api.restart(cid)

        for event in events:
            if event.get("status", "").endswith(": unhealthy"):
                name = event["Actor"]["Attributes"].get("name", "")
                threading.Thread(target=restart, args=(event["id"], name), daemon=True).start()


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2], sys.argv[3], "--inspect" in sys.argv[4:])
