"""RestartEpochs: a number per container that grows whenever a restart of it starts, is handed to
verification or ends, so a thread that read the store outside the restart lock can tell whether
what it read went stale meanwhile."""

from __future__ import annotations

from guardian.service.state.present import only_present


class RestartEpochs:
    """Invariant: a container's epoch only grows, by one at each claim, hand-over and end of its
    restart. No lock of its own: Claims and Verifications change it under the restart lock they
    share, and readers read it under that lock too."""

    def __init__(self) -> None:
        self._epochs: dict[str, int] = {}
        self._claimed = 0  # restarts claimed so far, host-wide

    def of(self, container: str) -> int:
        return self._epochs.get(container, 0)

    @property
    def claimed(self) -> int:
        """How many restarts were claimed on the host so far."""
        return self._claimed

    def advance(self, container: str, claimed: bool = False) -> None:
        """A restart of `container` started (`claimed`), was handed to verification or ended."""
        self._epochs[container] = self._epochs.get(container, 0) + 1
        if claimed:
            self._claimed += 1

    def forget_except(self, keep: set[str]) -> None:
        """Forget the containers not in `keep` (gone, and no restart of theirs under way)."""
        self._epochs = only_present(self._epochs, keep)
