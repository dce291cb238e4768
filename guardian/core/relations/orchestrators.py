"""Who else owns a container: the orchestrators that recreate their containers themselves.

One table, label -> orchestrator; a container carrying one of these labels belongs to that
orchestrator, and Guardian observes it instead of restarting it (core.policy.decide()).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from guardian.core.redaction import untrusted

NAME_MAX = 80  # characters of a label value shown in a decision (labels are hostile input)


@dataclass(frozen=True)
class Orchestrator:
    name: str  # as people call it
    marker: str  # the label every container it owns carries
    handle: str  # the label that names what people manage there
    what: str  # what that is called there: a service, a pod, a job


# Extend here: the first row whose marker a container carries is its owner.
ORCHESTRATORS: tuple[Orchestrator, ...] = (
    Orchestrator(
        "Docker Swarm", "com.docker.swarm.task.id", "com.docker.swarm.service.name", "service"
    ),
    Orchestrator("Kubernetes", "io.kubernetes.pod.name", "io.kubernetes.pod.name", "pod"),
    Orchestrator("Nomad", "com.hashicorp.nomad.alloc_id", "com.hashicorp.nomad.job_name", "job"),
)


def owner(labels: Mapping[str, str]) -> str:
    """Who owns a container, in words ("Docker Swarm (service web)"); "" when nobody does."""
    for o in ORCHESTRATORS:
        if o.marker in labels:
            raw = labels.get(o.handle, "")
            handle = untrusted(raw, NAME_MAX)
            return f"{o.name} ({o.what} {handle})" if handle else o.name
    return ""
