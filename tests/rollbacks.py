"""What the rollback's unit tests share: `web` on version n of app:latest over the fake engine,
and the rollback actions of it (tests/unit/test_rollback.py, test_rollback_person.py)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from guardian.core.model import ActionKind, ContainerSnapshot, RemediationAction
from tests.app import TestApp, make_app

LABELS = {
    "guardian.enable": "true",
    "com.docker.compose.project": "shop",
    "com.docker.compose.service": "web",
}
V1 = "sha256:" + "1" * 64
V2 = "sha256:" + "2" * 64


def rolling(tmp: Path, **restart: Any) -> TestApp:
    """Guardian with a ladder of rollback then stop, one restart first."""
    return make_app(
        tmp,
        restart={
            "cooldown": "2s",
            "max_attempts": 1,
            "window": "1h",
            "stop_timeout": "1s",
            "verify_timeout": "10s",
            "escalate": ["rollback", "stop"],
            **restart,
        },
    )


def version(w: TestApp, n: int, health: str = "healthy", **fields: Any) -> ContainerSnapshot:
    """`web` on version n of app:latest (image V1 or V2, VERSION=n in its environment), as
    `docker compose up -d` leaves it: any container of the name before is gone."""
    for cid in [c.id for c in w.engine.containers.values() if c.name == "web"]:
        del w.engine.containers[cid]
    image = V1 if n == 1 else V2
    snap = w.engine.add(
        "web",
        id=f"web-v{n}-{len(w.engine.steps)}".ljust(64, "0"),
        health=health,
        labels=LABELS,
        created=w.clock.now(),
        started_at=w.clock.now(),
    )
    w.engine.record_extra["web"] = {
        "Image": image,
        "Config": {
            "Image": "app:latest",
            "Labels": dict(LABELS),
            "Env": [f"VERSION={n}"],
            "Cmd": [f"serve-v{n}"],
            "Hostname": snap.id[:12],
        },
    }
    return snap


def web(w: TestApp) -> ContainerSnapshot:
    [now] = [c for c in w.engine.containers.values() if c.name == "web"]
    return now


def rollbacks(w: TestApp) -> list[RemediationAction]:
    return [a for a in w.actions("web") if a.kind == ActionKind.ROLLBACK]
