"""What leaves Guardian without holding up healing: the outbox's delivery worker, the channel
check, the heartbeat and operator-written hooks. Imports the state and the facts, never the
healing wing.
"""
