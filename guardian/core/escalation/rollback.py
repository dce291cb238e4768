"""The ladder's rollback rung: a new record that failed early is replaced, under its name, by the
last record of that name that ran healthy (what Swarm's `update_config.failure_action:
rollback` does for a service, here for a Compose host's containers).

What is kept (`Kept`): for each container name, the records Guardian saw run healthy, each the
container's whole inspect with its image by ID, and the records a rollback left, marked failed.
A record is told apart from another by its `digest`: the image ID and the configuration, not
what the engine made up for one container (its id, its generated hostname). The record is
hostile input (docs/design.md rule 9) and private as a recreate's (it may hold secrets in its
environment): it is stored, never shown.

`judge` says whether the rung applies, and to which record, or why not (a Refusal with the
command a person would run, core.escalation.recreate): the running record is new and failed
early (never seen healthy, or first unhealthy within `restart.rollback_monitor` of its
creation), an earlier record of the name ran healthy, the running one is not itself a
rollback's, and it was not rolled back from within `restart.window` already.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from guardian.core.durations import format_duration, format_elapsed
from guardian.core.escalation.record_bounds import oversize
from guardian.core.escalation.recreate import Refusal
from guardian.core.redaction import untrusted
from guardian.core.relations.dependencies import COMPOSE_PROJECT, COMPOSE_SERVICE

MAX_KEPT = 4  # records kept per name (healthy or failed); the oldest go first
# A record kept is at most this long as JSON (a busy Compose service's inspect is ~15 KB): one
# beyond is not kept, so a container's owner cannot fill the store with one huge environment.
MAX_RECORD_CHARS = 256_000
MAX_KEPT_BYTES = 64 * 1024 * 1024  # all names' records together; the least recently seen go
SHOWN = 80  # characters of a tag shown in a reason
_IMAGE_ID = re.compile(r"sha256:[0-9a-f]{64}")
_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,254}")


@dataclass(frozen=True)
class Kept:
    """A record of a name Guardian kept: seen healthy (`healthy_at`), or left by a rollback
    (`failed_at`). `created`: when its first container was created, as the engine said."""

    name: str
    digest: str
    image_id: str
    image_ref: str  # Config.Image as it was: the tag it had, for people
    container_id: str
    created: datetime | None
    seen_at: datetime  # written, or last seen healthy on a new run
    healthy_at: datetime | None = None
    failed_at: datetime | None = None
    project: str = ""
    service: str = ""
    record: str = ""  # the container's inspect as JSON: private
    id: int | None = None

    @property
    def short(self) -> str:
        return short(self.image_id)

    @property
    def told(self) -> str:
        """The image for people: its tag and short ID."""
        ref = untrusted(self.image_ref, SHOWN) if self.image_ref else "an untagged image"
        return f"{ref} ({self.short})"


def short(image_id: str) -> str:
    """An image ID as people read it: sha256:1a7e2b3c4d5e…"""
    return image_id[:19] + "…" if image_id.startswith("sha256:") else image_id[:12]


def digest(record: Mapping[str, Any]) -> str:
    """What tells one record from another: its image ID and its configuration (Config and
    HostConfig), without what the engine made up for its container (the hostname from its
    short id, a MAC address). "" for what is not a container's inspect."""
    config, host, cid = record.get("Config"), record.get("HostConfig"), record.get("Id")
    image = record.get("Image")
    if not isinstance(config, Mapping) or not isinstance(host, Mapping) or not isinstance(cid, str):
        return ""
    if not isinstance(image, str) or not _IMAGE_ID.fullmatch(image):
        return ""
    mine = {k: v for k, v in config.items() if k not in ("Hostname", "MacAddress")}
    if config.get("Hostname") != cid[:12]:
        mine["Hostname"] = config.get("Hostname")
    text = json.dumps(
        {"Image": image, "Config": mine, "HostConfig": host}, sort_keys=True, default=str
    )
    return "sha256:" + hashlib.sha256(text.encode()).hexdigest()


def kept_from(
    record: Mapping[str, Any], name: str, created: datetime | None, now: datetime
) -> Kept | None:
    """The record a container runs healthy on, as kept; None when the record is not one a
    container could be created from again (no image ID, not an inspect, beyond the record's
    bounds or MAX_RECORD_CHARS)."""
    found = digest(record)
    if not found or oversize(record):
        return None
    text = json.dumps(record, sort_keys=True, default=str)
    if len(text) > MAX_RECORD_CHARS:
        return None
    config = record.get("Config")
    labels = config.get("Labels") if isinstance(config, Mapping) else None
    labels = labels if isinstance(labels, Mapping) else {}
    ref = config.get("Image") if isinstance(config, Mapping) else ""
    return Kept(
        name=name,
        digest=found,
        image_id=str(record["Image"]),
        image_ref=ref if isinstance(ref, str) else "",
        container_id=str(record["Id"]),
        created=created,
        seen_at=now,
        healthy_at=now,
        project=str(labels.get(COMPOSE_PROJECT, "")),
        service=str(labels.get(COMPOSE_SERVICE, "")),
        record=text,
    )


@dataclass(frozen=True)
class Running:
    """The record the container runs on now, and its problem."""

    name: str
    digest: str
    image_id: str
    image_ref: str
    created: datetime | None  # the container's creation, as the engine said
    began: datetime  # since when its problem lasts
    labels: Mapping[str, str]
    from_rollback: bool  # a rollback made it (or one of the containers it was recreated from)


def running_of(
    record: Mapping[str, Any],
    name: str,
    created: datetime | None,
    began: datetime,
    from_rollback: bool,
) -> Running:
    config = record.get("Config")
    config = config if isinstance(config, Mapping) else {}
    labels = config.get("Labels")
    ref = config.get("Image")
    image = record.get("Image")
    return Running(
        name=name,
        digest=digest(record),
        image_id=image if isinstance(image, str) else "",
        image_ref=ref if isinstance(ref, str) else "",
        created=created,
        began=began,
        labels=labels if isinstance(labels, Mapping) else {},
        from_rollback=from_rollback,
    )


def judge(
    now_running: Running,
    kept: Sequence[Kept],
    monitor: timedelta,
    window: timedelta,
    now: datetime,
) -> Kept | Refusal:
    """The record to roll `now_running` back to, or why not. `kept`: the name's, any order."""
    r = now_running
    command = person_command(r.labels, r.name)
    if r.from_rollback:
        return Refusal("a rollback made it, and a rollback is never rolled back", command)
    if not r.digest:
        return Refusal("its record names no image ID, so it cannot be told apart", command)
    failed = [
        k
        for k in kept
        if k.failed_at is not None
        and (k.digest == r.digest or k.image_id == r.image_id)
        and now - k.failed_at < window
    ]
    if failed:
        at = max(k.failed_at for k in failed if k.failed_at is not None)
        return Refusal(
            f"{_image(r)} failed and was rolled back from at {at.isoformat(timespec='seconds')},"
            " within restart.window: it is not rolled back a second time",
            command,
        )
    mine = [k for k in kept if k.digest == r.digest and k.healthy_at is not None]
    since = min((k.created for k in mine if k.created is not None), default=r.created)
    if mine and since is not None and r.began - since > monitor:
        return Refusal(
            f"it ran healthy on this record and first turned unhealthy "
            f"{format_elapsed(r.began - since)} after it was created, beyond "
            f"restart.rollback_monitor ({format_duration(monitor)}): the update did not fail early",
            command,
        )
    earlier = sorted(
        (
            k
            for k in kept
            if k.healthy_at is not None and k.failed_at is None and k.digest != r.digest
        ),
        key=lambda k: k.healthy_at or now,
    )
    if not earlier:
        return Refusal(
            f"no earlier record of {untrusted(r.name, SHOWN)} ran healthy while Guardian watched",
            command,
        )
    return earlier[-1]


def why(r: Running, to: Kept, replaced_at: datetime | None) -> str:
    """The rollback in words: what failed, how early, and what it goes back to."""
    if r.created is None:
        failed = f"unhealthy on {_image(r)}"
    else:
        failed = (
            f"first unhealthy {format_elapsed(r.began - r.created)} after it"
            f" was created from {_image(r)}"
        )
    ran = f"which ran healthy from {(to.healthy_at or to.seen_at).isoformat(timespec='seconds')}"
    if replaced_at is not None:
        ran += f" until it was replaced at {replaced_at.isoformat(timespec='seconds')}"
    return f"{failed}; rolled back to {to.told}, {ran}"


def _image(r: Running) -> str:
    ref = untrusted(r.image_ref, SHOWN) if r.image_ref else "an untagged image"
    return f"{ref} ({short(r.image_id)})"


def person_command(labels: Mapping[str, str], name: str) -> str:
    """What a person runs to go back by hand: pin the version that ran healthy and recreate."""
    project, service = labels.get(COMPOSE_PROJECT, ""), labels.get(COMPOSE_SERVICE, "")
    if _NAME.fullmatch(service) and _NAME.fullmatch(project):
        return (
            f"pin the image that ran healthy in the compose file (image: <repo>@sha256:...), then"
            f" docker compose -p {project} up -d {service}"
        )
    it = name if _NAME.fullmatch(name) else "<container>"
    return (
        f"docker rm -f {it}, then docker run --name {it} with the image and options that ran"
        " healthy"
    )


def image_gone_command(to: Kept, labels: Mapping[str, str], name: str) -> str:
    """What a person runs when the image that ran healthy is no longer on the host."""
    ref = untrusted(to.image_ref, SHOWN) if to.image_ref else "<image>"
    return f"docker pull the version of {ref} that ran healthy ({to.short}); " + person_command(
        labels, name
    )


def for_person(now_running: Running, kept: Sequence[Kept], wanted: str = "") -> Kept | Refusal:
    """The record a person's rollback goes back to (guardian rollback NAME), or why there is
    none: the latest record of the name that ran healthy on another image than the running
    one (not one a rollback left as failed), whatever the running one's health and age: a
    person decides that it failed. Another image, not only another record: a container a
    rollback created names its image by ID, so its record differs from the one it restored
    while it runs the very same thing (a change of configuration alone is undone by hand:
    `docker compose up -d` with the old file). `wanted`: the digest the person was told when
    asking (""): that record, or a refusal if it is no longer kept."""
    r = now_running
    command = person_command(r.labels, r.name)
    if not r.digest:
        return Refusal("its record names no image ID, so it cannot be told apart", command)
    earlier = sorted(
        (
            k
            for k in kept
            if k.healthy_at is not None
            and k.failed_at is None
            and k.digest != r.digest
            and k.image_id != r.image_id
        ),
        key=lambda k: k.healthy_at or k.seen_at,
    )
    if wanted:
        earlier = [k for k in earlier if k.digest == wanted]
        if not earlier:
            return Refusal("the record asked for is no longer kept, or runs now", command)
    if not earlier:
        return Refusal(
            f"nothing to roll back to: no earlier record of {untrusted(r.name, SHOWN)} ran"
            " healthy on another image while Guardian watched",
            command,
        )
    return earlier[-1]


def why_person(r: Running, to: Kept, by: str) -> str:
    """A person's rollback in words: who asked, from what, to what."""
    ran = f"which ran healthy from {(to.healthy_at or to.seen_at).isoformat(timespec='seconds')}"
    return f"rolled back at the request of {by} from {_image(r)} to {to.told}, {ran}"


def requested(container: str, to: Kept) -> str:
    """What a person's rollback request answers (the CLI, the API), in one line."""
    since = (to.healthy_at or to.seen_at).isoformat(timespec="seconds")
    return (
        f"rollback of {untrusted(container, SHOWN)} requested: back to {to.told}, which ran"
        f" healthy from {since}; Guardian acts at its next look (through decide(): a silence,"
        " storm or the budget may hold it)"
    )
