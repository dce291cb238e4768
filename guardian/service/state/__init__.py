"""The loop's mutable state in parts, each with its own invariant: restart claims,
verifications, quiet rows, the event-kept container cache, listings, maintenance in force, a
person's stops, whose a stop is and the engine's memory of starts. State imports no wing above it.
"""
