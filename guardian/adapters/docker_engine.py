"""DockerEngine: the Engine port over the Docker SDK's low-level API.

One list request per sweep (the SDK's high-level `containers.list()` would inspect every
container), one inspect per candidate, and every SDK error translated here into EngineUnavailable
or a typed ActionOutcome.
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from typing import Any

import docker
import docker.errors
import requests

from guardian.adapters.engine_errors import causes, permission_denied, socket_denied
from guardian.core.labels import ALL
from guardian.core.model import ActionOutcome, ContainerSnapshot, Outcome
from guardian.core.probes import NO_ADDRESS
from guardian.core.redaction import redact_patterns, scrub_url
from guardian.ports import EngineEvent, EngineUnavailable

# Bounds on what a container says through the engine (Docker keeps 4096 bytes of health output);
# the checks and the crash-loop judge clean and cut it further.
MAX_HEALTH_OUTPUT = 4096
MAX_LOG_BYTES = 64 * 1024
EVENT_ACTIONS = ("health_status", "die", "oom", "stop", "start", "restart", "kill", "destroy")


def parse_time(value: str | None) -> datetime | None:
    """Docker's RFC 3339 nanosecond timestamps; the zero time means "never"."""
    if not value or value.startswith("0001-01-01"):
        return None
    head, _, rest = value.partition(".")
    if rest:
        digits = "".join(ch for ch in rest if ch.isdigit())
        zone = rest[len(digits) :]
        value = f"{head}.{digits[:6].ljust(6, '0')}{zone}"
    try:
        parsed = datetime.fromisoformat(value.replace("Z", "+00:00"))
    except ValueError:
        return None
    return parsed if parsed.tzinfo else parsed.replace(tzinfo=UTC)


def health_from_status(status: str) -> str | None:
    """The health shown in the list call's Status text, e.g. 'Up 5 minutes (unhealthy)'."""
    if "(unhealthy)" in status:
        return "unhealthy"
    if "(healthy)" in status:
        return "healthy"
    if "(health: starting)" in status:
        return "starting"
    return None


def addresses(network_settings: dict[str, Any] | None, network_mode: str) -> tuple[str, ...]:
    """Every address the container has, first network first; a host-network container shares
    the host's loopback (NO_ADDRESS)."""
    if network_mode == "host":
        return (NO_ADDRESS,)
    networks = (network_settings or {}).get("Networks") or {}
    out: dict[str, None] = {}
    for name in sorted(networks):
        for key in ("IPAddress", "GlobalIPv6Address"):
            ip = (networks[name] or {}).get(key) or ""
            if ip:
                out[str(ip)] = None
    ip = (network_settings or {}).get("IPAddress") or ""
    if ip:
        out[str(ip)] = None
    return tuple(out)


def summary_snapshot(item: dict[str, Any]) -> ContainerSnapshot:
    names = item.get("Names") or [""]
    mode = (item.get("HostConfig") or {}).get("NetworkMode", "")
    return ContainerSnapshot(
        id=item["Id"],
        name=names[0].lstrip("/"),
        labels=dict(item.get("Labels") or {}),
        state=item.get("State", ""),
        health=health_from_status(item.get("Status", "")),
        addresses=addresses(item.get("NetworkSettings"), mode),
    )


def inspect_snapshot(data: dict[str, Any]) -> ContainerSnapshot:
    state = data.get("State") or {}
    config = data.get("Config") or {}
    host_config = data.get("HostConfig") or {}
    health = state.get("Health") or {}
    log = health.get("Log") or []
    policy = host_config.get("RestartPolicy") or {}
    start_period_ns = (config.get("Healthcheck") or {}).get("StartPeriod") or 0
    return ContainerSnapshot(
        id=data["Id"],
        name=(data.get("Name") or "").lstrip("/"),
        labels=dict(config.get("Labels") or {}),
        state=state.get("Status", ""),
        health=health.get("Status") or None,
        inspected=True,
        exit_code=state.get("ExitCode"),
        oom_killed=bool(state.get("OOMKilled")),
        started_at=parse_time(state.get("StartedAt")),
        finished_at=parse_time(state.get("FinishedAt")),
        restart_count=int(data.get("RestartCount") or 0),
        restart_policy=policy.get("Name") or "",
        restart_policy_max_retries=int(policy.get("MaximumRetryCount") or 0),
        health_start_period=timedelta(microseconds=start_period_ns / 1000),
        health_output=str(log[-1].get("Output") or "")[:MAX_HEALTH_OUTPUT] if log else "",
        health_log_at=parse_time(log[-1].get("End")) if log else None,
        addresses=addresses(data.get("NetworkSettings"), host_config.get("NetworkMode", "")),
        memory_limit=int(host_config.get("Memory") or 0),
        unhealthy_since=unhealthy_since(health, config.get("Healthcheck") or {}),
    )


def unhealthy_since(health: dict[str, Any], check: dict[str, Any]) -> datetime | None:
    """When Docker turned the container unhealthy: the probe whose failure made the failing
    streak reach `retries`. Docker keeps only the last 5 probes; when that one is gone, the
    oldest kept one is the best (latest possible) answer."""
    log = health.get("Log") or []
    streak = int(health.get("FailingStreak") or 0)
    if health.get("Status") != "unhealthy" or not log or streak <= 0:
        return None
    retries = int(check.get("Retries") or 0) or 3  # Docker's default when unset
    index = max(len(log) - streak + min(retries, streak) - 1, 0)
    return parse_time(log[min(index, len(log) - 1)].get("End"))


def _not_sent(exc: BaseException) -> bool:
    """True when a connection error happened before the request reached the engine."""
    return any(
        isinstance(e, FileNotFoundError | ConnectionRefusedError)
        or type(e).__name__ in ("NewConnectionError", "ConnectTimeoutError", "ConnectTimeout")
        for e in causes(exc)
    )


def classify(exc: BaseException) -> ActionOutcome:
    """Translate an SDK/transport error from a state-changing call into a typed outcome."""
    if isinstance(exc, docker.errors.NotFound):
        return ActionOutcome(Outcome.PERMANENT_FAILURE, "container no longer exists (404)")
    if isinstance(exc, docker.errors.APIError):
        code = exc.status_code or 0
        explanation = str(exc.explanation or "")[:200]
        if code == 403:
            return ActionOutcome(
                Outcome.POLICY_DENIED, f"engine refused the restart (403) {explanation}"
            )
        if code >= 500 or code == 409:
            return ActionOutcome(
                Outcome.TRANSIENT_FAILURE, f"engine error {code}: {explanation}", True
            )
        return ActionOutcome(Outcome.PERMANENT_FAILURE, f"engine error {code}: {explanation}")
    if isinstance(exc, requests.exceptions.ConnectTimeout):
        return ActionOutcome(
            Outcome.TRANSIENT_FAILURE, "engine unreachable (connect timeout)", True
        )
    if isinstance(exc, requests.exceptions.Timeout):
        return ActionOutcome(Outcome.UNKNOWN, "timed out after the request was sent")
    if isinstance(
        exc, requests.exceptions.ConnectionError | docker.errors.DockerException | OSError
    ):
        if _not_sent(exc):
            return ActionOutcome(
                Outcome.TRANSIENT_FAILURE, "engine unreachable (connection refused)", True
            )
        return ActionOutcome(Outcome.UNKNOWN, "connection lost after the request was sent")
    raise exc


class DockerEngine:
    """The Engine port for a Docker (or Docker-API compatible) engine at `url`."""

    def __init__(self, url: str, timeout: timedelta) -> None:
        self.url = url
        self.shown_url = scrub_url(url)  # the URL in messages: no userinfo or query values
        self.timeout = timeout
        self._api: docker.APIClient | None = None
        self._stream: Any = None
        self._lock = threading.Lock()

    @property
    def subscribed(self) -> bool:
        """Whether an events() iteration holds an open stream."""
        return self._stream is not None

    @property
    def reads_proxy_env(self) -> bool:
        """Whether each request looks up the HTTP proxy variables (never for a Unix socket)."""
        return bool(self._client().trust_env)

    def _client(self) -> docker.APIClient:
        with self._lock:
            if self._api is None:
                try:
                    # "auto" asks the engine for its API version: works from 20.10 to today's.
                    self._api = docker.APIClient(
                        base_url=self.url, version="auto", timeout=self.timeout.total_seconds()
                    )
                    if self.url.startswith("unix://"):
                        # No HTTP proxy applies to a Unix socket; skipping requests' lookup of
                        # proxy variables saves ~0.5 ms per request (bench/RESULTS.md).
                        self._api.trust_env = False
                except (docker.errors.DockerException, requests.RequestException, OSError) as exc:
                    raise EngineUnavailable(self._reason(exc)) from None
            return self._api

    def _reason(self, exc: BaseException) -> str:
        text = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
        if permission_denied(exc) and self.url.startswith("unix://"):
            return f"docker engine at {self.url} unreachable: {socket_denied(self.url[7:])}"
        if _not_sent(exc):
            text = "connection refused or socket missing"
        return redact_patterns(f"docker engine at {self.shown_url} unreachable: {text[:200]}")

    def _drop(self) -> None:
        with self._lock:
            if self._api is not None:
                self._api.close()
            self._api = None

    def _call(self, fn: Any, *args: Any, **kwargs: Any) -> Any:
        """Run a read-only call; transport failures become EngineUnavailable."""
        try:
            return fn(self._client(), *args, **kwargs)
        except docker.errors.APIError:
            raise
        except (docker.errors.DockerException, requests.RequestException, OSError) as exc:
            self._drop()
            raise EngineUnavailable(self._reason(exc)) from None

    def ping(self) -> None:
        self._call(lambda api: api.ping())

    def list_containers(self, label: str, scope: str = "") -> list[ContainerSnapshot]:
        # Docker ANDs label filters, so the engine does the selecting.
        selectors = [s for s in (None if label == ALL else label, scope) if s]
        filters = {"label": selectors} if selectors else {}
        try:
            items = self._call(lambda api: api.containers(all=True, filters=filters))
        except docker.errors.APIError as exc:
            raise EngineUnavailable(
                f"docker engine refused to list containers: {exc.explanation}"
            ) from None
        return [summary_snapshot(item) for item in items]

    def inspect(self, container_id: str) -> ContainerSnapshot | None:
        try:
            return inspect_snapshot(self._call(lambda api: api.inspect_container(container_id)))
        except docker.errors.NotFound:
            return None
        except docker.errors.APIError as exc:
            raise EngineUnavailable(
                f"docker engine refused to inspect: {exc.explanation}"
            ) from None

    def logs(self, container_id: str, tail: int) -> str:
        """The last `tail` lines of the container's output; "" when it has none or is gone."""
        try:
            raw = self._call(
                lambda api: api.logs(container_id, stdout=True, stderr=True, tail=tail)
            )
        except docker.errors.APIError:
            return ""  # removed, or a logging driver that cannot be read back
        return bytes(raw)[-MAX_LOG_BYTES:].decode("utf-8", errors="replace")

    def restart(
        self,
        container_id: str,
        stop_timeout: timedelta,
        previous_started_at: datetime | None = None,
    ) -> ActionOutcome:
        try:
            api = self._client()
        except EngineUnavailable as exc:
            return ActionOutcome(Outcome.TRANSIENT_FAILURE, str(exc), True)
        try:
            api.restart(container_id, timeout=int(stop_timeout.total_seconds()))
            return ActionOutcome(Outcome.RESTARTED, "restart request completed")
        except (docker.errors.DockerException, requests.RequestException, OSError) as exc:
            result = classify(exc)
        if result.outcome is Outcome.UNKNOWN:
            result = self._settle_unknown(container_id, previous_started_at, result)
        elif result.outcome is Outcome.TRANSIENT_FAILURE:
            self._drop()
        return result

    def _settle_unknown(
        self, container_id: str, previous: datetime | None, result: ActionOutcome
    ) -> ActionOutcome:
        """A timeout after sending: learn from State.StartedAt whether it restarted."""
        try:
            snap = self.inspect(container_id)
        except EngineUnavailable:
            return result
        if snap is None:
            return ActionOutcome(Outcome.PERMANENT_FAILURE, "container no longer exists")
        if previous is not None and snap.started_at is not None and snap.started_at > previous:
            return ActionOutcome(
                Outcome.RESTARTED, f"{result.detail}; State.StartedAt shows it restarted"
            )
        return ActionOutcome(Outcome.UNKNOWN, f"{result.detail}; State.StartedAt unchanged")

    def events(self, since: datetime | None) -> Iterator[EngineEvent]:
        filters = {"type": ["container"], "event": list(EVENT_ACTIONS)}
        kwargs: dict[str, Any] = {"filters": filters, "decode": True}
        if since is not None:
            kwargs["since"] = since.timestamp()
        stream = self._call(lambda api: api.events(**kwargs))
        self._stream = stream
        try:
            for raw in stream:
                event = self._event(raw)
                if event is not None:
                    yield event
        except (requests.RequestException, docker.errors.DockerException, OSError) as exc:
            raise EngineUnavailable(self._reason(exc)) from None
        finally:
            close = getattr(stream, "close", None)
            if close is not None:
                close()

    @staticmethod
    def _event(raw: dict[str, Any]) -> EngineEvent | None:
        action = str(raw.get("Action") or raw.get("status") or "")
        actor = raw.get("Actor") or {}
        attributes = {k: str(v) for k, v in (actor.get("Attributes") or {}).items()}
        if action.startswith("health_status"):
            attributes["health_status"] = action.partition(":")[2].strip()
            action = "health_status"
        if action.startswith("exec_"):
            return None
        ns = raw.get("timeNano") or int(raw.get("time", 0)) * 1_000_000_000
        return EngineEvent(
            action=action,
            container_id=str(actor.get("ID") or raw.get("id") or ""),
            container_name=attributes.get("name", ""),
            at=datetime.fromtimestamp(ns / 1e9, UTC),
            attributes=attributes,
        )

    def close(self) -> None:
        self.stop_events()
        self._drop()

    def stop_events(self) -> None:
        stream, self._stream = self._stream, None
        if stream is not None:
            # Unblocks a listener waiting on the stream; closing a dead stream may fail any way.
            with contextlib.suppress(Exception):
                stream.close()
