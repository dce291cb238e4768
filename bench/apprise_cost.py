"""What the apprise extra costs a Guardian: memory and time to build two Apprise channels.

Run: .venv/bin/python bench/apprise_cost.py (with `guardian[apprise]` installed); one process
per trial, since an import happens once per process.
"""

from __future__ import annotations

import subprocess
import sys

TRIAL = """
import resource, time
import guardian.bootstrap
from datetime import timedelta
from guardian.adapters.notify.apprise import apprise_channels
from guardian.core.redaction import Redactor
before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
t0 = time.perf_counter()
urls = "ntfy://127.0.0.1:1/topic\\njson://127.0.0.1:1/x"
apprise_channels(urls, timedelta(seconds=10), timedelta(seconds=1), Redactor())
seconds = time.perf_counter() - t0
after = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
print(f"{seconds:.3f} s, peak RSS {before:.1f} -> {after:.1f} MB")
"""

if __name__ == "__main__":
    for _ in range(int(sys.argv[1]) if len(sys.argv) > 1 else 3):
        subprocess.run([sys.executable, "-c", TRIAL], check=True)
