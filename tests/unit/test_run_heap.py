"""`guardian run` leaves what it built to start out of the garbage collector's full
collections: they walk only what came later (bench/RESULTS.md, the status page's change cost:
a full collection of the whole heap made the costliest rounds)."""

from __future__ import annotations

from pathlib import Path

from tests.helpers import python

# `guardian run` up to the daemon's run, which reports instead what the collector sees.
PROBE = """
import gc, sys
from guardian.entrypoints import daemon
from guardian.entrypoints.cli import main

def report(self):
    print(gc.get_freeze_count(), len(gc.get_objects()), flush=True)

daemon.Daemon.run_forever = report
sys.exit(main(["run", "--config", sys.argv[1]]))
"""


def test_guardian_run_freezes_its_startup_heap_before_it_runs(tmp_path: Path) -> None:
    config = tmp_path / "config.yaml"
    config.write_text(
        f"docker: {{url: 'unix://{tmp_path}/no-engine.sock'}}\n"
        f"store: {{path: '{tmp_path}/guardian.db'}}\n"
        "http: {listen: '127.0.0.1:0'}\n"
    )
    done = python("-c", PROBE, str(config))
    assert done.returncode == 0, done.stderr[-2000:]
    frozen, tracked = map(int, done.stdout.split())
    # The modules, configuration and clients built: thousands, none left to walk but those
    # made since the freeze.
    assert frozen > 10_000
    assert tracked < frozen / 10
