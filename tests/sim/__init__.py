"""A deterministic simulator of Guardian (docs/design.md rule 22): the real loop, store and
operator over a simulated engine and a FakeClock, on one thread; faults and interleavings drawn
from a seed; the promises checked after every step (oracle.py, records.py); a failing seed
replayed by one command (`python -m tests.sim --seed N --hours H`). driver.py runs a seed,
steps.py is what a step may be, subject.py the one place that knows how today's loop is driven.

Modelled: containers falling ill, recovering, exiting (OOM too); the event stream as the events
thread reads it (in order, lagging behind other steps within an instant, cut and replayed from
the last event, duplicated at the replay's edge, lost when the engine's ring rolled over) and
the reactions it schedules (in any order, late, twice, lost in a crash); sweeps, verify ticks
(each second while a restart awaits its verdict), delivery ticks against a channel that fails
at times; a restart refused before it was sent, timed out after it (done at once, or within the
stop timeout), a socket proxy's 403, an engine that stops answering; a person's docker stop
(exit 143, 0 or 1), kill, rm -f, start and run again, ack, approval, silence; the wall clock
stepping forward and back; a disk that refuses writes; kill -9 and a start from the store.

Not modelled yet: restart calls running on threads while other steps happen (build_status runs
them inline), rechecks a decision asks for (build_status drops them; sweeps find them), probes,
log and resource rules, the escalation ladder and guardian.action=stop, dependencies and shared
namespaces, maintenance windows, hooks, a reload, Podman, Docker's own restart policies, the
engine restarting (its ring and its containers), clock skew between engine and Guardian, a store
another process holds, slow engine calls (each takes no time but a timed-out restart).
"""
