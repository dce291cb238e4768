"""The bugs in Guardian the simulator found and that are not fixed yet, by id: a violation the
oracle can trace to one of them names it (tests/sim/oracle.py), the run goes on past it, and
tests/sim/test_sim.py and test_scenarios.py keep a seed or a scenario of each, expected to fail
until the bug is fixed. Fixing one: its kept tests then pass (strict xfail fails), so drop its
entry here, its explanation in the oracle, and the xfail marks.
"""

from __future__ import annotations

KNOWN = {
    "F6": "a restart the store lost (a full disk, then a crash) is not recovered from the"
    " engine's record (rule 16) in every case: a run in between writes the recorded_through"
    " mark past it (vouching for a record that lacks it) once the engine's ring no longer holds"
    " its start, and a start stamped ahead of the clock (a step back) is outside the record read",
    "F7": "a restart the store lost (a full disk, then a crash) of a container that was not"
    " running (exited, OOM killed) while the engine still carries it out (it timed out after"
    " sending) is invisible to the next run: the engine's record has no kill of it and no start"
    " yet, so it restarts the container a second time (a running container's kill is read:"
    " EngineMemory.under_way)",
    "F10": "a person's stop no run of Guardian could keep is restarted like a crash when its"
    " process answered docker stop with exit code 1: made while no Guardian listened (the"
    " stream cut, Guardian down), then dropped from the engine's ring (256 events) before a run"
    " heard it or read it in the engine's record; or learnt only by a run whose store refused"
    " writes until it ended (the stop's mark, service.watchers.stop_records, was never written)",
    "F18": "a stop of Guardian's own restart is kept as a person's (its mark then holds the"
    " container's next exit as left alone until it starts again: healing stalls) where the run"
    " that keeps it cannot tell it from a person's: the run that asked for the restart, when a"
    " step of the wall clock fell between the look that showed the restart's start and the"
    " hearing of its stop; a restart whose intent the store refused (a full disk); a person's"
    " start between a restart that timed out and the engine carrying it out; the restart's die"
    " or stop heard again while a person's later stop is held; stamps out of order after a step"
    " back of the wall clock (the OWN_STOP promise, tests/sim/oracle.py)",
}
