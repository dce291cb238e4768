"""A deterministic simulator of Guardian (docs/design.md rule 22): the real loop, store and
operator over a simulated engine and a FakeClock, on one thread; faults and interleavings drawn
from a seed; the promises checked after every step (oracle.py, records.py); a failing seed
replayed by one command (`python -m tests.sim --seed N --hours H`). driver.py runs a seed,
steps.py is what a step may be, subject.py the one place that knows how today's loop is driven,
workers.py the daemon's work queue on one thread.

Modelled: containers falling ill, recovering, exiting (OOM too); the event stream as the events
thread reads it (in order, lagging behind other steps within an instant, cut and replayed from
the last event, duplicated at the replay's edge, lost when the engine's ring rolled over); the
daemon's keyed work queue under the real RestartRunner: every event's look, recheck (run when
due), approval found and freed slot waits under its container's key, and so does a restart call
the sweep decided, until the seeded scheduler hands the key to a worker (looks may lag behind
other steps within a few seconds; calls run before the clock moves); a job's turn of a key (the
sweep, a verify tick) taken as KeyedQueue.turn takes it; a restart call in flight at the engine
(sent and under way, or carried out with its answer on the way) with other steps beside its
worker: other workers' calls (up to three at once), sweeps, events, a person's acts, a clock
step, kill -9 (the call ends there; the engine carries it out); sweeps, verify ticks (each
second while a restart awaits its verdict), delivery ticks against a channel that fails at
times; a restart refused before it was sent, timed out after it (done at once, or within the
stop timeout), a socket proxy's 403, an engine that stops answering; a person's docker stop
(exit 143, 0 or 1), kill, rm -f, start and run again, ack, approval, silence; the wall clock
stepping forward and back; a disk that refuses writes; kill -9 (what waits in the queue is
lost) and a start from the store.

Not modelled yet: a worker suspended anywhere but in a restart call (an inspect, a store read:
where only the key's turn keeps a sweep from judging a container its worker is judging), a
follower's restart (`later` turns), probes, log and resource rules, the escalation ladder and
guardian.action=stop, dependencies and shared namespaces, maintenance windows, hooks, a reload,
a graceful stop (SIGTERM: calls left to the engine), Podman, Docker's own restart policies, the
engine restarting (its ring and its containers), clock skew between engine and Guardian, a
store another process holds, slow engine calls other than a restart.
"""
