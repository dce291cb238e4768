"""What watches beside Docker's health: probes, resource and log rules, crash loops, OOM events,
a person's stops beyond the event stream, and clock steps. Each turns what it sees into a
judgement the healing loop acts on; a watcher never imports the healing wing (no watcher
restarts anything itself).
"""
