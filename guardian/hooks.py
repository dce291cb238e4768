"""Hook points in one pass of the loop, for the extensions bootstrap wires in.

Probes and crash loops judge results; dependencies and the storm breaker feed inputs to decide();
host incidents follow what the sweep saw. With no hooks set, the healer behaves as without them.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from guardian.core.model import ContainerSnapshot, HealthCheckResult
from guardian.ports import EngineEvent

if TYPE_CHECKING:
    from guardian.healer import Assessment

Judge = Callable[[ContainerSnapshot, HealthCheckResult], HealthCheckResult]


@dataclass
class Hooks:
    """Optional extensions wired by bootstrap. Each list runs in order; None means unused."""

    judges: list[Judge] = field(default_factory=list)
    unhealthy_dependencies: Callable[[str], tuple[str, ...]] | None = None
    storm: Callable[[], bool] | None = None
    storm_open: Callable[[], bool] | None = None  # a storm incident open, acknowledged or not
    listed: list[Callable[[list[ContainerSnapshot]], None]] = field(default_factory=list)
    assessed: list[Callable[[list[Assessment]], None]] = field(default_factory=list)
    detected: list[Callable[[HealthCheckResult], None]] = field(default_factory=list)
    recovered: list[Callable[[str], None]] = field(default_factory=list)
    healed: list[Callable[[str], None]] = field(default_factory=list)  # verified after a restart
    engine_state: list[Callable[[bool, str], None]] = field(default_factory=list)
    events: list[Callable[[EngineEvent], None]] = field(default_factory=list)
