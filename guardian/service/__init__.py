"""The loop over the ports, in wings by concern (docs/architecture.md "The wings").

healing/ the healing loop (the one restart path); watchers/ what watches beside health;
outbound/ what leaves Guardian (notifications, hooks, the heartbeat); state/ the loop's state in
parts with their own invariants. The modules here join them: the settings, the rules in force,
the pipeline's table, the shared context, the stream of facts, the loop's face and the operator.
"""
