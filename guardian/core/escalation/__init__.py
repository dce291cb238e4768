"""What Guardian does when restarts do not help: the rungs after a restart (issue 55), built
from the container's own record. Pure, like all of the core.
"""
