"""What a container's state means: health checks, probes, resource, log and maintenance rules,
and Docker's own restart policy. Pure, like all of the core.
"""
