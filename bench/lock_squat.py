"""The engine lock's start beside a squatter: `python -P -m bench.lock_squat 10000` (as root)
starts a process of uid 65534 that holds the bare name of the lock and N names under it, then
times HostLock.acquire (median of 5): what a local user outside `docker` can cost a start.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path

from guardian.adapters.host_lock import EngineAccess, HostLock, lock_address

SQUAT = r"""
import resource, socket, sys
resource.setrlimit(resource.RLIMIT_NOFILE, (int(sys.argv[2]) + 64,) * 2)
prefix = bytes.fromhex(sys.argv[1])
held = []
for n in range(int(sys.argv[2]) + 1):
    s = socket.socket(socket.AF_UNIX)
    s.bind(prefix + (f"-{n}-{n:016x}".encode() if n else b""))
    s.listen(1)
    held.append(s)
print("held", len(held), flush=True)
sys.stdin.read()
"""


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("names", type=int, nargs="?", default=10_000)
    args = parser.parse_args()
    engine = f"tcp://bench-{uuid.uuid4().hex}:2375"
    prefix = lock_address(engine, "").encode()
    squatter = subprocess.Popen(
        ["/usr/bin/python3", "-I", "-c", SQUAT, prefix.hex(), str(args.names)],
        user=65534, group=65534, extra_groups=[], stdin=subprocess.PIPE,
        stdout=subprocess.PIPE, text=True, cwd="/",
    )  # fmt: skip
    try:
        assert squatter.stdout is not None
        print(squatter.stdout.readline().strip(), file=sys.stderr)
        times: list[float] = []
        judged: list[int] = []
        with tempfile.TemporaryDirectory() as tmp:
            for n in range(5):
                lock = HostLock(Path(tmp) / f"{n}.db", engine, "", EngineAccess(os.geteuid()))
                started = time.perf_counter()
                lock.acquire()
                times.append(time.perf_counter() - started)
                # A squatter that never accepts fills its backlog after two probes: later
                # starts find no one listening there (EAGAIN), which costs less still.
                judged.append(lock.squatted)
                lock.release()
        print(
            f"acquire beside {args.names + 1} squatted names: median "
            f"{statistics.median(times) * 1000:.1f} ms "
            f"(of {', '.join(f'{t * 1000:.1f}' for t in times)}; squatters named {judged})"
        )
    finally:
        squatter.kill()
        squatter.wait(10)


if __name__ == "__main__":
    main()
