"""Guardian's entry points: the command line, the daemon, the event listener and the HTTP port (the
API, the health endpoints, the status page's transport). The only layer that may import bootstrap.
"""
