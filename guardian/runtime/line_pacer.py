"""At most one log line per client per minute for the lines a client's requests can cause (a
handler that fails): a flood writes one line a minute per address, and each line says how many
it held back. Measured on a monotonic clock; the clients remembered are bounded.
"""

from __future__ import annotations

import threading
import time
from collections import OrderedDict
from collections.abc import Callable

PERIOD = 60.0  # seconds between two lines about one client
MAX_CLIENTS = 1024  # clients remembered; past it, the one whose last line is oldest is forgotten


class LinePacer:
    """Says whether a line about a client may be written now. Thread-safe."""

    def __init__(
        self,
        period: float = PERIOD,
        max_clients: int = MAX_CLIENTS,
        now: Callable[[], float] = time.monotonic,
    ) -> None:
        self.period = period
        self.max_clients = max_clients
        self._now = now
        self._lock = threading.Lock()
        # client -> (when its last line was written, lines held back since), oldest line first
        self._clients: OrderedDict[str, tuple[float, int]] = OrderedDict()

    def __len__(self) -> int:
        """How many clients it remembers."""
        with self._lock:
            return len(self._clients)

    def admit(self, client: str) -> int | None:
        """None: hold this line back (it is counted). Otherwise write it, with the number
        returned: the lines about `client` held back since its last one was written."""
        with self._lock:
            now = self._now()
            last = self._clients.get(client)
            if last is not None and now - last[0] < self.period:
                self._clients[client] = (last[0], last[1] + 1)
                return None
            self._clients[client] = (now, 0)
            self._clients.move_to_end(client)
            while len(self._clients) > self.max_clients:
                self._clients.popitem(last=False)
            return last[1] if last is not None else 0
