"""DockerRecreator: removes a container and creates it again from a RecreateSpec
(core.escalation.recreate) over the SDK's low-level API, every SDK error translated here, in
`classify`, into a typed Failed with one line for people.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum

import docker
import docker.errors
import requests

from guardian.adapters.engine.engine_errors import causes
from guardian.core.escalation.recreate import Endpoint, RecreateSpec

EXPLAINED = 200  # characters of the engine's explanation kept in a reason


class Failure(StrEnum):
    NAME_TAKEN = "name taken"  # another container holds the name
    PORT_TAKEN = "port taken"  # a published host port is held by something else
    ADDRESS_TAKEN = "address taken"  # a fixed IP address is held on its network
    IMAGE_GONE = "image gone"  # the image ID was removed since
    NETWORK_GONE = "network gone"  # a network it was attached to was removed since
    CONTAINER_GONE = "container gone"  # the container to connect or start was removed meanwhile
    REFUSED = "refused"  # any other refusal by the engine (a 403 from a socket proxy, a 400)
    UNREACHABLE = "engine unreachable"  # nothing was sent: the same step may be tried again
    UNKNOWN = "unknown outcome"  # sent, then the answer was lost: inspect by name to learn


@dataclass(frozen=True)
class Failed:
    """A step the engine did not do, or may not have done (UNKNOWN). `container_id` is the new
    container when the create worked and a later step (connect, start) did not: it is left
    there, created and not started, for the caller to keep or remove."""

    failure: Failure
    reason: str
    container_id: str = ""


def classify(exc: BaseException, step: str) -> Failed:
    """Translate an SDK/transport error from `step` ("remove", "create", "connect", "start")
    into a Failed; anything else is a bug and raised."""
    if isinstance(exc, docker.errors.APIError):
        code = exc.status_code or 0
        text = " ".join(str(exc.explanation or "").split())[:EXPLAINED]
        lower = text.lower()
        if isinstance(exc, docker.errors.ImageNotFound) or "no such image" in lower:
            return Failed(Failure.IMAGE_GONE, f"{step}: the image is gone ({text})")
        if code == 404 and "network" in lower:
            return Failed(Failure.NETWORK_GONE, f"{step}: a network is gone ({text})")
        if code == 404:
            return Failed(Failure.CONTAINER_GONE, f"{step}: the container is gone ({text})")
        if code == 409 and "already in use" in lower and "name" in lower:
            return Failed(Failure.NAME_TAKEN, f"{step}: the name is taken ({text})")
        if "port is already allocated" in lower or "bind for" in lower or "bind:" in lower:
            return Failed(Failure.PORT_TAKEN, f"{step}: a published port is taken ({text})")
        if "address already in use" in lower:
            return Failed(Failure.ADDRESS_TAKEN, f"{step}: a fixed address is taken ({text})")
        return Failed(Failure.REFUSED, f"{step}: engine error {code}: {text}")
    if isinstance(exc, requests.exceptions.ConnectTimeout) or _not_sent(exc):
        return Failed(Failure.UNREACHABLE, f"{step}: engine unreachable (nothing was sent)")
    if isinstance(exc, requests.exceptions.Timeout):
        return Failed(Failure.UNKNOWN, f"{step}: timed out after the request was sent")
    if isinstance(exc, requests.exceptions.ConnectionError | docker.errors.DockerException):
        return Failed(Failure.UNKNOWN, f"{step}: connection lost after the request was sent")
    if isinstance(exc, OSError):
        return Failed(Failure.UNKNOWN, f"{step}: connection lost after the request was sent")
    raise exc


def _not_sent(exc: BaseException) -> bool:
    """True when a connection error happened before the request reached the engine."""
    return any(
        isinstance(e, FileNotFoundError | ConnectionRefusedError)
        or type(e).__name__ in ("NewConnectionError", "ConnectTimeoutError", "ConnectTimeout")
        for e in causes(exc)
    )


class DockerRecreator:
    """The two steps of a recreate, over one low-level client (whose timeout bounds each call;
    a stop's wait is added to it by the SDK)."""

    def __init__(self, api: docker.APIClient) -> None:
        self.api = api

    def remove(self, container_id: str, stop_timeout: int = 10) -> Failed | None:
        """Stop (its stop signal, then SIGKILL after `stop_timeout` s) and remove the container,
        keeping its named volumes (never `v=True`). None when it is gone afterwards, removed now
        or before (a retry after a crash finds it so)."""
        try:
            try:
                self.api.stop(container_id, timeout=stop_timeout)
            except docker.errors.NotFound:
                return None
            self.api.remove_container(container_id, force=True, v=False)
        except docker.errors.NotFound:
            return None
        except (docker.errors.DockerException, requests.RequestException, OSError) as exc:
            return classify(exc, "remove")
        return None

    def create(self, spec: RecreateSpec) -> str | Failed:
        """Create the container from `spec` under its name, connect the other networks with
        their aliases and addresses, and start it: the new container's id, or why not."""
        step, new_id = "create", ""
        try:
            created = self.api.create_container_from_config(spec.body(), spec.name)
            new_id = str(created["Id"])
            step = "connect"
            for endpoint in spec.connect_after:
                self._connect(new_id, endpoint)
            step = "start"
            self.api.start(new_id)
        except (docker.errors.DockerException, requests.RequestException, OSError) as exc:
            failed = classify(exc, step)
            return Failed(failed.failure, failed.reason, new_id)
        return new_id

    def _connect(self, container_id: str, endpoint: Endpoint) -> None:
        links = [
            tuple(link.split(":", 1)) if ":" in link else (link, None) for link in endpoint.links
        ]
        self.api.connect_container_to_network(
            container_id,
            endpoint.network,
            ipv4_address=endpoint.ipv4 or None,
            ipv6_address=endpoint.ipv6 or None,
            aliases=list(endpoint.aliases) or None,
            links=links or None,
            link_local_ips=list(endpoint.link_local_ips) or None,
            driver_opt=dict(endpoint.driver_opts) or None,
        )
