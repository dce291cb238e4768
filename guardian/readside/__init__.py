"""The read side: what the status page, its feed, `guardian status` and the API read, kept
current by the stream of facts (core.facts). It reads the core and the ports; the service and
the adapters never import it."""
