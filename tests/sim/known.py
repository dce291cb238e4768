"""The bugs in Guardian the simulator found and that are not fixed yet, by id: a violation the
oracle can trace to one of them names it (tests/sim/oracle.py), the run goes on past it, and
tests/sim/test_sim.py and test_scenarios.py keep a seed or a scenario of each, expected to fail
until the bug is fixed. Fixing one: its kept tests then pass (strict xfail fails), so drop its
entry here, its explanation in the oracle, and the xfail marks.
"""

from __future__ import annotations

KNOWN = {
    "F1": "the host's per-minute budget forgets a restart the store lost (a full disk, then a"
    " crash) until that container is decided again: EngineMemory.recent() counts only the"
    " containers decided since the engine's record was read",
    "F2": "after the wall clock steps back, a queued notification waits for the clock to pass"
    " its stamps: pick_batch() takes a queueing stamp ahead of the clock as queued now at every"
    " tick (group_wait never ends), and compares a next attempt ahead of the clock (a step not"
    " followed: Guardian was down) with the clock as it is",
    "F5": "a restart the store lost (a full disk, then a crash) and the next run counts from the"
    " engine's record stays at its wall time when the clock steps forward: EngineMemory keeps"
    " its attempts unmoved by the steps (rule 12), so the window and cooldown end early",
    "F6": "a restart the store lost (a full disk, then a crash) is not recovered from the"
    " engine's record (rule 16) in every case: a run in between writes the recorded_through"
    " mark past it (vouching for a record that lacks it) once the engine's ring no longer holds"
    " its start, and a start stamped ahead of the clock (a step back) is outside the record read",
    "F7": "a restart the store lost (a full disk, then a crash) while the engine still carries it"
    " out (it timed out after sending; the stop takes up to stop_timeout) is invisible to the"
    " next run: no start event yet, so it restarts the container a second time",
    "F8": "after the wall clock stepped back within a run, the next run orders the store's stamps"
    " wrongly: a counter reset written before the step looks later than the restarts made after"
    " it, and they stop counting against max_attempts",
    "F10": "a person's stop no run of Guardian could keep is restarted like a crash when its"
    " process answered docker stop with exit code 1: made while no Guardian listened (the"
    " stream cut, Guardian down), then dropped from the engine's ring (256 events) before a run"
    " heard it or read it in the engine's record; or learnt only by a run whose store refused"
    " writes until it ended (the stop's mark, service.watchers.stop_records, was never written)",
    "F11": "a restart the engine still carries out (its call timed out after sending), asked"
    " again by the next run when the wall clock stepped forward after it:"
    " Verifier._may_still_stop compares the request's stamp with the stepped clock",
}
