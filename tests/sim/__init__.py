"""A deterministic simulator of Guardian (docs/design.md rule 22): the real loop, store and
operator over a simulated engine and a FakeClock, on one thread; faults and interleavings drawn
from a seed; the promises checked after every step; a failing seed replayed by one command
(`python -m tests.sim --seed N --hours H`). See tests/sim/driver.py.
"""
