"""Timing calls in process, for the in-process benchmarks (bench/idle_sweep.py,
bench/reaction.py): each call timed on its own, optionally under cProfile."""

from __future__ import annotations

import cProfile
import pstats
import time
from collections.abc import Callable, Iterable


def timed(calls: Iterable[Callable[[], object]], profile: bool) -> tuple[list[float], Profile]:
    """Each call's wall time in ms, in order; what runs between the calls (the iterable's own
    steps: a fake clock advanced) is neither timed nor profiled."""
    profiler = Profile(cProfile.Profile() if profile else None)
    took = []
    for call in calls:
        with profiler:
            start = time.perf_counter()
            call()
            took.append((time.perf_counter() - start) * 1000)
    return took, profiler


class Profile:
    """cProfile around the timed calls only, when asked for."""

    def __init__(self, profile: cProfile.Profile | None) -> None:
        self.profile = profile

    def __enter__(self) -> None:
        if self.profile is not None:
            self.profile.enable()

    def __exit__(self, *_: object) -> None:
        if self.profile is not None:
            self.profile.disable()

    def print_top(self, n: int) -> None:
        """The `n` functions of most cumulative time, when profiled."""
        if self.profile is not None:
            pstats.Stats(self.profile).sort_stats("cumulative").print_stats(n)
