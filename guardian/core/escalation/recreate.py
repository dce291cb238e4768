"""A recreate from the container's own record: what `docker compose up -d --force-recreate` does,
built from the engine's inspect taken before the container is removed. The recreate destroys
the writable layer, so the result is a faithful RecreateSpec or a Refusal with the reason and
the command a person would run instead (docs/design.md rule 20). The record is hostile input
(docs/design.md rule 9).
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from guardian.core.escalation.record_bounds import oversize
from guardian.core.redaction import untrusted
from guardian.core.relations.dependencies import COMPOSE_PROJECT, COMPOSE_SERVICE
from guardian.core.relations.namespaces import CONTAINER_PREFIX, raw_modes, shared
from guardian.core.relations.orchestrators import owner

SHOWN = 80  # characters of a name or path from the record shown in a reason
MAX_FOLLOWERS_SHOWN = 5
MAX_NETWORKS = 64
MAX_ALIASES = 64
MAX_MOUNTS = 256
# A container name as Docker allows it; also what may appear unquoted in a command for people.
_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,254}")
_HEX64 = re.compile(r"[0-9a-f]{64}")
_IMAGE_ID = re.compile(r"sha256:[0-9a-f]{64}")
# Labels of an orchestrator that core.relations.orchestrators' markers may miss (a task's
# other labels): any of them means someone else created the container.
_ORCHESTRATOR_PREFIXES = ("com.docker.swarm.", "io.kubernetes.", "com.hashicorp.nomad.")
# What a person asks an owner for instead (core.relations.orchestrators' names).
_OWNER_COMMANDS = {
    "Docker Swarm": "docker service update --force <service>",
    "Kubernetes": "kubectl delete pod <pod> (its controller makes a new one)",
    "Nomad": "nomad alloc restart <alloc id>",
}


@dataclass(frozen=True)
class Endpoint:
    """One network to attach, as the record has it: the engine's own aliases (the old short
    id, the hostname it re-adds) and the MAC it derived are left out."""

    network: str
    aliases: tuple[str, ...] = ()
    ipv4: str = ""
    ipv6: str = ""
    link_local_ips: tuple[str, ...] = ()
    links: tuple[str, ...] = ()
    driver_opts: tuple[tuple[str, str], ...] = ()

    def settings(self) -> dict[str, Any]:
        """EndpointSettings as the create call (NetworkingConfig.EndpointsConfig) takes them."""
        out: dict[str, Any] = {"Aliases": list(self.aliases) or None}
        given: dict[str, Any] = {"IPv4Address": self.ipv4, "IPv6Address": self.ipv6}
        ipam = {k: v for k, v in given.items() if v}
        if self.link_local_ips:
            ipam["LinkLocalIPs"] = list(self.link_local_ips)
        out["IPAMConfig"] = ipam or None
        out["Links"] = list(self.links) or None
        out["DriverOpts"] = dict(self.driver_opts) or None
        return out


@dataclass(frozen=True)
class RecreateSpec:
    """What a create needs: the name, the body (Config with Image set to the image ID, and
    HostConfig) as canonical JSON, the network that goes in the create call and the ones
    connected after it (an engine before API 1.44 takes one endpoint in the create)."""

    name: str
    image_id: str
    image_ref: str  # Config.Image as it was (a tag, for people); the create uses image_id
    config: str  # json: the create body without NetworkingConfig
    create_endpoint: Endpoint | None
    connect_after: tuple[Endpoint, ...] = ()

    def body(self) -> dict[str, Any]:
        """A fresh create body (containers/create), NetworkingConfig included."""
        body: dict[str, Any] = json.loads(self.config)
        if self.create_endpoint is not None:
            ep = self.create_endpoint
            body["NetworkingConfig"] = {"EndpointsConfig": {ep.network: ep.settings()}}
        return body


@dataclass(frozen=True)
class Refusal:
    """Why a container is not recreated, in one line for people, and what they would run."""

    reason: str
    command: str


class _Refused(Exception):
    """Raised inside this module only; build() turns it into a Refusal."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


def build(
    record: Mapping[str, Any],
    followers: Sequence[str] = (),
    leaders: Mapping[str, str] | None = None,
) -> RecreateSpec | Refusal:
    """The spec to recreate the container `record` (its `docker inspect`) describes, or why not.

    `followers`: the names of the containers that joined its namespaces (`container:<it>`);
    their namespaces would be cut, so any of them refuses it. `leaders`: container id -> name,
    so that a `container:<id>` mode or a `--volumes-from <id>` of its own names its leader by
    name (a recreated leader gets a new id); an id without a name is kept as it is.
    """
    too_big = oversize(record)
    if too_big:
        return Refusal(f"its record is beyond what Guardian recreates from ({too_big})", _command())
    try:
        labels = _labels(record)
    except _Refused as refused:
        return Refusal(refused.reason, _command())
    try:
        return _spec(record, labels, followers, leaders or {})
    except _Refused as refused:
        name = str(record.get("Name") or "").removeprefix("/")
        return Refusal(refused.reason, _command(labels, name))


def _spec(
    record: Mapping[str, Any],
    labels: Mapping[str, str],
    followers: Sequence[str],
    leaders: Mapping[str, str],
) -> RecreateSpec:
    name, cid = _name_of(record), _text(record, "Id")
    config, host = dict(_mapping(record, "Config")), dict(_mapping(record, "HostConfig"))
    _refuse_owned(labels)
    if host.get("AutoRemove") is True:
        raise _Refused("it runs with --rm (AutoRemove): a one-off container is not recreated")
    image_id = record.get("Image")
    if not isinstance(image_id, str) or not _IMAGE_ID.fullmatch(image_id):
        raise _Refused("its record names no image ID, so the same image cannot be asked for")
    if host.get("ContainerIDFile"):
        raise _Refused("it was created with --cidfile, which the docker CLI writes, not the engine")
    _refuse_anonymous(record, host)
    _refuse_followers(followers, name)
    networks = _mapping(_mapping(record, "NetworkSettings"), "Networks", allow_none=True)
    if len(networks) > MAX_NETWORKS:
        raise _Refused(f"it is attached to more than {MAX_NETWORKS} networks")
    if not all(isinstance(s, Mapping) for s in networks.values()):
        raise _Refused("its record's networks are not all network settings")
    image_ref = config.get("Image")
    _set_namespaces(host, cid, leaders)
    _fix_links(host, leaders)
    _drop_generated(config, host, cid, networks)
    create, after = _endpoints(host, networks, cid, str(config.get("Hostname") or ""))
    config["Image"] = image_id
    config["HostConfig"] = host
    return RecreateSpec(
        name=name,
        image_id=image_id,
        image_ref=image_ref if isinstance(image_ref, str) else "",
        config=json.dumps(config, sort_keys=True, allow_nan=False),
        create_endpoint=create,
        connect_after=after,
    )


def _mapping(parent: Mapping[str, Any], key: str, allow_none: bool = False) -> Mapping[str, Any]:
    value = parent.get(key)
    if value is None and allow_none:
        return {}
    if not isinstance(value, Mapping):
        raise _Refused(f"its record has no {key}: it is not a container's inspect")
    return value


def _text(parent: Mapping[str, Any], key: str) -> str:
    value = parent.get(key)
    if not isinstance(value, str):
        raise _Refused(f"its record has no {key}: it is not a container's inspect")
    return value


def _strings(value: object, what: str) -> tuple[str, ...]:
    """A list of text from the record (None is empty); anything else refuses it."""
    if value is None:
        return ()
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise _Refused(f"its record's {what} is not a list of text")
    return tuple(value)


def _name_of(record: Mapping[str, Any]) -> str:
    name = _text(record, "Name").removeprefix("/")
    if not _NAME.fullmatch(name):
        raise _Refused(f"its name {untrusted(name, SHOWN)!r} is not one Docker allows")
    return name


def _labels(record: Mapping[str, Any]) -> Mapping[str, str]:
    labels = _mapping(_mapping(record, "Config"), "Labels", allow_none=True)
    if not all(isinstance(v, str) for v in labels.values()):
        raise _Refused("its labels are not all text")
    return labels


def _refuse_owned(labels: Mapping[str, str]) -> None:
    who = owner(labels)
    if not who:
        stray = sorted(k for k in labels if k.startswith(_ORCHESTRATOR_PREFIXES))
        who = f"an orchestrator (label {untrusted(stray[0], SHOWN)})" if stray else ""
    if who:
        raise _Refused(f"{who} owns it and recreates its containers itself")


def _refuse_anonymous(record: Mapping[str, Any], host: Mapping[str, Any]) -> None:
    """An anonymous volume (a 64-hex name that no `-v name:/path` or `--mount` names) would be
    left behind by the remove and a new empty one made by the create: its data would be lost."""
    mounts = record.get("Mounts") or []
    if not isinstance(mounts, list) or len(mounts) > MAX_MOUNTS:
        raise _Refused(f"its record's Mounts is not a list of at most {MAX_MOUNTS}")
    named = {b.split(":", 1)[0] for b in _strings(host.get("Binds"), "HostConfig.Binds")}
    declared = host.get("Mounts") or []
    for m in declared if isinstance(declared, list) else []:
        if isinstance(m, Mapping) and m.get("Type") == "volume":
            named.add(str(m.get("Source") or ""))
    lost = [
        str(m.get("Destination") or "?")
        for m in mounts
        if isinstance(m, Mapping)
        and m.get("Type") == "volume"
        and _HEX64.fullmatch(str(m.get("Name") or ""))
        and m.get("Name") not in named
    ]
    if lost:
        where = untrusted(", ".join(sorted(lost)), SHOWN)
        via = " (or one of --volumes-from's)" if host.get("VolumesFrom") else ""
        raise _Refused(f"an anonymous volume{via} at {where} would be lost with the container")


def _refuse_followers(followers: Sequence[str], name: str) -> None:
    if not followers:
        return
    shown = ", ".join(untrusted(f, SHOWN) for f in followers[:MAX_FOLLOWERS_SHOWN])
    more = len(followers) - MAX_FOLLOWERS_SHOWN
    shown += f" and {more} more" if more > 0 else ""
    raise _Refused(
        f"{shown} joined its namespaces (container:{name}): a recreate would cut them off"
    )


def _set_namespaces(host: dict[str, Any], cid: str, leaders: Mapping[str, str]) -> None:
    """A `container:` mode is kept, naming its leader by name when the caller knows it."""
    joined, refused = shared(cid, raw_modes(host))
    if refused:
        raise _Refused(f"its namespace modes are not ones it can join again ({refused})")
    keys = {"network": "NetworkMode", "pid": "PidMode", "ipc": "IpcMode"}
    for s in joined:
        host[keys[s.kind]] = CONTAINER_PREFIX + leaders.get(s.leader, s.leader)


def _fix_links(host: dict[str, Any], leaders: Mapping[str, str]) -> None:
    """Legacy links come back from inspect as `/db:/web/alias`; create takes `db:alias`.
    `--volumes-from <id>` names its source by name when the caller knows it."""
    links = []
    for link in _strings(host.get("Links"), "HostConfig.Links"):
        target, _, alias = link.partition(":")
        if not target.startswith("/") or not alias.startswith("/"):
            raise _Refused(f"its link {untrusted(link, SHOWN)!r} is not one the engine writes")
        links.append(f"{target[1:]}:{alias.rsplit('/', 1)[-1]}")
    host["Links"] = links or None
    sources = []
    for source in _strings(host.get("VolumesFrom"), "HostConfig.VolumesFrom"):
        ref, sep, mode = source.partition(":")
        sources.append(leaders.get(ref, ref) + sep + mode)
    host["VolumesFrom"] = sources or None


def _drop_generated(
    config: dict[str, Any], host: Mapping[str, Any], cid: str, networks: Mapping[str, Any]
) -> None:
    """Leave out what the engine made up for the old container, so the new one gets its own."""
    mode = str(host.get("NetworkMode") or "")
    # The engine names a container's host after its short id when it was given no hostname;
    # in host and `container:` modes the hostname is the host's or the leader's.
    if config.get("Hostname") == cid[:12] or mode == "host" or mode.startswith(CONTAINER_PREFIX):
        config.pop("Hostname", None)
    # A MAC a person set is in Config.MacAddress; the one the engine generated lives only on
    # the endpoints, derived from the address (02:42 then the IPv4 bytes). One equal to that
    # derivation is the engine's (API 1.44+ reports the endpoint's MAC here too) and is dropped.
    mac = str(config.get("MacAddress") or "").lower()
    derived = {_derived_mac(str(n.get("IPAddress") or "")) for n in networks.values()}
    if not mac or mac in derived or mode == "host" or mode.startswith(CONTAINER_PREFIX):
        config.pop("MacAddress", None)


def _derived_mac(ipv4: str) -> str:
    parts = ipv4.split(".")
    if len(parts) != 4 or not all(p.isdigit() and int(p) < 256 for p in parts):
        return ""
    return "02:42:" + ":".join(f"{int(p):02x}" for p in parts)


def _endpoints(
    host: dict[str, Any], networks: Mapping[str, Any], cid: str, hostname: str
) -> tuple[Endpoint | None, tuple[Endpoint, ...]]:
    """The network the create call attaches (HostConfig.NetworkMode's) and the others, which
    are connected after it, by name (a network recreated since has a new id)."""
    mode = str(host.get("NetworkMode") or "")
    if mode in ("host", "none") or mode.startswith(CONTAINER_PREFIX):
        return None, ()
    primary = "bridge" if mode in ("", "default") else mode
    if primary not in networks:
        by_id = [n for n, s in networks.items() if str(s.get("NetworkID", "")).startswith(mode)]
        if not by_id:
            raise _Refused(
                f"it is no longer attached to the network it was created on "
                f"({untrusted(mode, SHOWN)}): the record cannot replay that"
            )
        primary = host["NetworkMode"] = by_id[0]
    drop = {cid[:12], hostname}
    ends = {n: _endpoint(n, s, drop) for n, s in networks.items()}
    return ends.pop(primary), tuple(ends[n] for n in sorted(ends))


def _endpoint(network: str, settings: Mapping[str, Any], drop: set[str]) -> Endpoint:
    aliases = _strings(settings.get("Aliases"), "Aliases")
    if len(aliases) > MAX_ALIASES:
        raise _Refused(f"it has more than {MAX_ALIASES} aliases on one network")
    ipam = settings.get("IPAMConfig") or {}
    opts = settings.get("DriverOpts") or {}
    if not isinstance(ipam, Mapping) or not isinstance(opts, Mapping):
        raise _Refused(f"its record's network {untrusted(network, SHOWN)!r} is malformed")
    return Endpoint(
        network=network,
        # The engine adds the container's short id and its hostname to every user-defined
        # network's aliases at start; the new container gets its own.
        aliases=tuple(dict.fromkeys(a for a in aliases if a not in drop)),
        ipv4=str(ipam.get("IPv4Address") or ""),
        ipv6=str(ipam.get("IPv6Address") or ""),
        link_local_ips=_strings(ipam.get("LinkLocalIPs"), "LinkLocalIPs"),
        links=_strings(settings.get("Links"), "Links"),
        driver_opts=tuple(sorted((str(k), str(v)) for k, v in opts.items())),
    )


def _command(labels: Mapping[str, str] | None = None, name: str = "") -> str:
    """What a person runs instead: Compose's recreate when its labels say which service (and
    the names are ones a shell reads as they are), else a recreate by hand."""
    labels = labels or {}
    who = owner(labels)
    for orchestrator, command in _OWNER_COMMANDS.items():
        if who.startswith(orchestrator):
            return command
    project, service = labels.get(COMPOSE_PROJECT, ""), labels.get(COMPOSE_SERVICE, "")
    if _NAME.fullmatch(service) and _NAME.fullmatch(project):
        return f"docker compose -p {project} up -d --force-recreate {service}"
    it = name if _NAME.fullmatch(name) else "<container>"
    return f"docker rm -f {it}, then docker run --name {it} with the options it was created with"
