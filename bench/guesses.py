"""Wrong API tokens from one address against a real `guardian run`: `python -m bench.guesses
[SECONDS]` sends wrong bearer tokens from 127.0.0.2 on one kept-alive connection for SECONDS
(default 5) and prints the answers per second by status, then asks once with the right token
from the same address. The store is in a temporary directory; the engine is the default one,
with a scope that matches no container and dry_run on, so nothing is touched.
"""

from __future__ import annotations

import http.client
import os
import re
import secrets
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from tests.helpers import wait_until


def guesses(seconds: float) -> str:
    token = secrets.token_hex(32)
    with tempfile.TemporaryDirectory() as tmp:
        config = Path(tmp, "config.yaml")
        config.write_text(
            f"watch: {{scope: bench.guesses={os.getpid()}, interval: 1h}}\n"
            f"restart: {{dry_run: true}}\nstore: {{path: {tmp}/g.db}}\n"
            "http: {listen: '127.0.0.1:0'}\n"
        )
        log = Path(tmp, "guardian.log")
        with log.open("wb") as out:
            run = [sys.executable, "-m", "guardian.entrypoints.cli", "run", "-c", str(config)]
            env = {**os.environ, "GUARDIAN_API_TOKEN": token}
            proc = subprocess.Popen(run, stdout=out, stderr=subprocess.STDOUT, env=env)
        try:
            found = wait_until(
                lambda: re.search(r'listening" address=\S+:(\d+)', log.read_text()), 20
            )
            conn = http.client.HTTPConnection(
                "127.0.0.1", int(found.group(1)), timeout=10, source_address=("127.0.0.2", 0)
            )

            def ask(given: str) -> int:
                conn.request(
                    "GET", "/api/v1/incidents", headers={"Authorization": f"Bearer {given}"}
                )
                answer = conn.getresponse()
                answer.read()
                return answer.status

            counts: dict[int, int] = {}
            sent, t0 = 0, time.monotonic()
            while time.monotonic() - t0 < seconds:
                status = ask(f"guess-{sent:058d}")
                counts[status] = counts.get(status, 0) + 1
                sent += 1
            took = time.monotonic() - t0
            right = ask(token)
        finally:
            proc.terminate()
            proc.wait(10)
    by_status = ", ".join(f"{s}: {n} ({n / took:.1f}/s)" for s, n in sorted(counts.items()))
    return (
        f"{sent} wrong tokens in {took:.1f} s from one address = {sent / took:.0f}/s answered "
        f"({by_status}); then the right token from that address: {right}"
    )


if __name__ == "__main__":
    print(guesses(float(sys.argv[1]) if len(sys.argv) > 1 else 5.0))
