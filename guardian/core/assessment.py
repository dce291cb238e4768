"""What one pass of the loop found for a container and would do: a row of `guardian check`."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime

from guardian.core.labels import ContainerRules
from guardian.core.model import ContainerSnapshot, Decision, HealthCheckResult


@dataclass
class Assessment:
    snapshot: ContainerSnapshot
    rules: ContainerRules
    result: HealthCheckResult
    decision: Decision | None = None
    detected_at: datetime | None = None  # when the engine reported the problem
    # Judged from the container cache, without an inspect: the snapshot has no probe output.
    cached: bool = False


@dataclass
class SweepReport:
    rows: list[Assessment] = field(default_factory=list)
    engine_error: str | None = None
