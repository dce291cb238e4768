"""DockerEngine: the Engine port over the Docker SDK's low-level API, for Docker and for
Podman's Docker-compatible service (told apart by /version once per connection).

One list request per sweep on Docker, four on Podman (the SDK's high-level `containers.list()`
would inspect every container), one inspect per candidate, and every SDK error translated here
into EngineUnavailable or a typed ActionOutcome.
"""

from __future__ import annotations

import contextlib
import http.client
import json
import os
from collections.abc import Collection, Generator, Iterator
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from typing import Any
from urllib.parse import quote, urlencode

import docker
import docker.errors
import requests

from guardian.adapters.clock import SystemClock
from guardian.adapters.engine.engine_clock import EngineClock, http_date
from guardian.adapters.engine.engine_errors import causes, permission_denied, socket_denied
from guardian.adapters.engine.engine_payloads import (
    CACHE_EVENTS,
    EVENT_FILTER,
    ListedSnapshots,
    identify,
    inspect_snapshot,
    parse_event,
    stats_usage,
)
from guardian.adapters.engine.light_http import AnswerTooLarge, LightHttp, PingFailed
from guardian.adapters.engine.log_stream import (
    EndedLogs,
    FollowedLogs,
    StampedLogs,
    raw_reader,
    shut_down,
)
from guardian.adapters.engine.recreator import DockerRecreator, Failed, Failure
from guardian.core.detection.usage import Usage
from guardian.core.escalation.recreate import RecreateSpec
from guardian.core.labels import ALL
from guardian.core.model import ActionOutcome, ContainerSnapshot, Outcome
from guardian.core.redaction import redact_patterns, scrub_url
from guardian.ports import (
    Clock,
    EngineEvent,
    EngineHistory,
    EngineIdentity,
    EngineStep,
    EngineUnavailable,
    LogStream,
)

MAX_LOG_BYTES = 64 * 1024
# The most events one history() reads: Docker keeps 256, Podman's journal may keep many more.
MAX_HISTORY = 5000
# Podman's list leaves the health out of Status ("Up 5 minutes"); its health filter works.
HEALTH_STATES = ("unhealthy", "starting", "healthy")
# The containers that do not run well (ContainerSnapshot.runs_well), as two of Docker's list
# filters (values of one filter are ORed, filters ANDed): every state but running, and a health
# of unhealthy or starting.
UNWELL_FILTERS: tuple[dict[str, list[str]], ...] = (
    {"status": ["created", "restarting", "removing", "paused", "exited", "dead"]},
    {"health": ["unhealthy", "starting"]},
)
# The largest inspect read (light_http.py): a container's record is kilobytes, tens with many
# labels, mounts and variables; far more is an engine or a proxy gone wrong, not held.
MAX_RECORD = 64 * 1024 * 1024
# The largest list read: about a kilobyte a container, ten with many labels; the SDK's list
# read without a bound (an engine or a proxy gone wrong grew memory without end).
MAX_LIST = 256 * 1024 * 1024
MAX_EXPLANATION = 200  # characters of an engine's refusal repeated in Guardian's messages


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


def _step(result: str | Failed | None) -> EngineStep:
    """A recreator's answer as the port's EngineStep: None or a new id is done."""
    if result is None or isinstance(result, str):
        return EngineStep(True, container_id=result or "")
    return EngineStep(
        False, result.reason, result.container_id, sent=result.failure is not Failure.UNREACHABLE
    )


CONNECTED = "connected"  # the key of DockerEngine's connection


class DockerEngine:
    """The Engine port for a Docker (or Docker-API compatible) engine at `url`. Its stamps come
    back in Guardian's frame (`clock`'s), whatever the engine's clock says (EngineClock)."""

    def __init__(self, url: str, timeout: timedelta, clock: Clock | None = None) -> None:
        self.url = url
        self.engine_clock = EngineClock(clock or SystemClock())
        self.shown_url = scrub_url(url)  # the URL in messages: no userinfo or query values
        self.timeout = timeout
        # The connection and the identity of the engine behind it, kept as one pair under
        # CONNECTED: claimed by setdefault, dropped by pop (_client, _drop), no lock.
        self._held: dict[str, tuple[docker.APIClient, EngineIdentity]] = {}
        self._stream: Any = None
        self._listed = ListedSnapshots()  # an unchanged container listed again: the same snapshot
        # The idle sweep's ping and the inspects, a fraction of the SDK's CPU (light_http.py);
        # Unix sockets only.
        self._light = (
            LightHttp(url[len("unix://") :], timeout.total_seconds(), self.engine_clock.saw_date)
            if url.startswith("unix://")
            else None
        )

    @property
    def subscribed(self) -> bool:
        """Whether an events() iteration holds an open stream."""
        return self._stream is not None

    @property
    def reads_proxy_env(self) -> bool:
        """Whether each request looks up the HTTP proxy variables (never for a Unix socket)."""
        return bool(self._client().trust_env)

    def _client(self) -> docker.APIClient:
        """The connection, made when there is none. No lock: connecting asks the engine its
        version (I/O), outside any lock; threads that find no connection at once each make
        one, the first kept (one setdefault, atomic in CPython) and every other closed by the
        thread that made it before anyone else saw it, so none leaks and none handed out was
        closed by a connect (only a drop closes a kept one, as a failed call would have)."""
        held = self._held.get(CONNECTED)
        if held is None:
            mine = self._connect()
            held = self._held.setdefault(CONNECTED, mine)
            if held is not mine:
                mine[0].close()  # another thread's connection was kept first
        return held[0]

    def _connect(self) -> tuple[docker.APIClient, EngineIdentity]:
        """A new connection and the engine behind it; EngineUnavailable when it fails."""
        api = None
        try:
            # "auto" asks the engine for its API version: works from 20.10 to today's.
            api = docker.APIClient(
                base_url=self.url, version="auto", timeout=self.timeout.total_seconds()
            )
            api.hooks["response"].append(self._saw_response)
            if self.url.startswith("unix://"):
                # No HTTP proxy applies to a Unix socket, so requests need not look up
                # proxy variables on every call (bench/RESULTS.md).
                api.trust_env = False
            # Docker or Podman: asked once per connection, not once per sweep.
            return api, identify(api.version())
        except (docker.errors.DockerException, requests.RequestException, OSError) as exc:
            if api is not None:
                api.close()
            raise EngineUnavailable(self._reason(exc)) from None

    def _saw_response(self, response: requests.Response, *_args: Any, **_kwargs: Any) -> None:
        """Every response carries the engine's time (EngineClock)."""
        self.engine_clock.saw_date(response.headers.get("Date"), response.elapsed.total_seconds())

    def _reason(self, exc: BaseException) -> str:
        text = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
        if permission_denied(exc) and self.url.startswith("unix://"):
            return f"docker engine at {self.url} unreachable: {socket_denied(self.url[7:])}"
        if self.url.startswith("unix://") and not os.path.exists(self.url[7:]):
            return (
                f"docker engine at {self.url} unreachable: no socket at {self.url[7:]} (is the"
                " engine running here? To use another, set docker.url or DOCKER_HOST, e.g."
                " unix:///run/docker.sock, unix:///run/podman/podman.sock or tcp://127.0.0.1:2375)"
            )
        if _not_sent(exc):
            text = "connection refused or socket missing"
        return redact_patterns(f"docker engine at {self.shown_url} unreachable: {text[:200]}")

    def _drop(self) -> None:
        if self._light is not None:
            self._light.close()
        # The pair goes whole: a new connection may reach another engine, with its identity.
        held = self._held.pop(CONNECTED, None)
        if held is not None:
            held[0].close()

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
        light = self._light
        if light is None or CONNECTED not in self._held:
            self._call(lambda api: api.ping())  # connects (and identifies) when not connected
            return
        try:
            light.ping()
        except (OSError, http.client.HTTPException, PingFailed, AnswerTooLarge) as exc:
            self._drop()
            raise EngineUnavailable(self._reason(exc)) from None

    def identity(self) -> EngineIdentity:
        self._call(lambda api: None)  # connects, and so identifies, when not connected yet
        held = self._held.get(CONNECTED)
        if held is None:  # dropped by another thread in between
            raise EngineUnavailable(f"docker engine at {self.shown_url} went away")
        return held[1]

    def list_containers(
        self,
        label: str,
        scope: str = "",
        names: Collection[str] = (),
        ids: Collection[str] = (),
    ) -> list[ContainerSnapshot]:
        filters = label_filters(label, scope)
        # The engine's name and id filters match a pattern (web matches web-2): exact below.
        if names:
            filters["name"] = sorted(names)
        if ids:
            filters["id"] = sorted(ids)
        items = self._list(filters)
        snaps = self._listed.snapshots(items, complete=not names and not ids, ids=ids)
        if names:
            snaps = [s for s in snaps if s.name in names]
        if ids:
            snaps = [s for s in snaps if s.id in ids]
        if self.identity().kind == "podman":
            # One filtered list per health state: the same endpoint (and socket-proxy rule) as
            # the list itself, so an unhealthy container is a candidate as on Docker.
            health = {
                item["Id"]: state
                for state in HEALTH_STATES
                for item in self._list({**filters, "health": [state]})
            }
            # As Docker's list does: a health only for a running container (a paused or exited
            # one's is stale).
            snaps = [
                replace(s, health=health.get(s.id))
                if s.health is None and s.state == "running"
                else s
                for s in snaps
            ]
        return snaps

    def list_unwell(self, label: str, scope: str = "") -> list[ContainerSnapshot]:
        if self.identity().kind == "podman":
            # Podman tells health by one list per state (list_containers): its whole list.
            return [s for s in self.list_containers(label, scope) if not s.runs_well]
        filters = label_filters(label, scope)
        items: dict[str, dict[str, Any]] = {}
        for unwell in UNWELL_FILTERS:
            for item in self._list({**filters, **unwell}):
                items.setdefault(item["Id"], item)
        # Each shown replaces its container's listing as a list by id would.
        return self._listed.snapshots(list(items.values()), complete=False, ids=set(items))

    def stamp_uncertainty(self) -> timedelta | None:
        return self.engine_clock.uncertainty

    def as_listed(self, snap: ContainerSnapshot) -> ContainerSnapshot:
        listed = snap.as_listed()
        held = self._held.get(CONNECTED)
        if held is not None and held[1].kind == "podman":
            # Podman's list carries no HostConfig: it names no joined namespace.
            return replace(listed, namespaces=())
        return listed

    def _list(self, filters: dict[str, Any]) -> list[dict[str, Any]]:
        if self._light is not None:
            return self._light_list(self._light, filters)
        try:
            items = self._call(lambda api: api.containers(all=True, filters=filters))
        except docker.errors.APIError as exc:
            raise EngineUnavailable(
                f"docker engine refused to list containers: {exc.explanation}"
            ) from None
        return list(items)

    def inspect(self, container_id: str) -> ContainerSnapshot | None:
        data = self.record(container_id)
        return None if data is None else self.engine_clock.snapshot(inspect_snapshot(data))

    def record(self, container_id: str) -> dict[str, Any] | None:
        if self._light is not None:
            return self._light_record(self._light, container_id)
        try:
            data = self._call(lambda api: api.inspect_container(container_id))
        except docker.errors.NotFound:
            return None
        except docker.errors.APIError as exc:
            raise EngineUnavailable(
                f"docker engine refused to inspect: {exc.explanation}"
            ) from None
        return data if isinstance(data, dict) else None

    def _light_get(
        self, light: LightHttp, path: str, limit: int, what: str, doing: str, gone: bool = False
    ) -> Any:
        """The body as JSON of `GET path` through a kept connection (`gone`: None for a 404), with
        the SDK's failures: transport errors and a body that is not JSON drop the connection
        (EngineUnavailable with the reason); a body beyond `limit` is refused, the engine's
        fault (`what`: "an inspect of <id>"). Any other refusal raises
        EngineUnavailable as the SDK's path does ("docker engine refused `doing`: <the engine's
        message>")."""
        try:
            answer = light.get(path, limit)
            data = answer.json() if answer.status == 200 else None
        except AnswerTooLarge as exc:
            raise EngineUnavailable(
                f"docker engine at {self.shown_url} answered {what} with {exc}: refused"
            ) from None
        except (OSError, http.client.HTTPException, ValueError) as exc:
            self._drop()
            raise EngineUnavailable(self._reason(exc)) from None
        if answer.status == 404 and gone:
            return None  # the container is gone
        if answer.status != 200:
            explanation = answer.explanation(MAX_EXPLANATION)
            raise EngineUnavailable(f"docker engine refused {doing}: {explanation}")
        return data

    def _light_record(self, light: LightHttp, container_id: str) -> dict[str, Any] | None:
        """record() through a kept connection, with the SDK's answers and failures: the SDK's
        inspect URL (quoted as its _url() does) at the API version it negotiated."""
        quoted = quote(container_id, safe="/:")
        path = f"/v{self._client().api_version}/containers/{quoted}/json"
        data = self._light_get(
            light, path, MAX_RECORD, f"an inspect of {container_id[:12]}", "to inspect", gone=True
        )
        return data if isinstance(data, dict) else None

    def _light_list(self, light: LightHttp, filters: dict[str, Any]) -> list[dict[str, Any]]:
        """_list() through a kept connection, with the SDK's answers and failures: the query
        its containers(all=True, filters=...) sends, at the API version it negotiated. A whole
        list of 1,000 containers is about a megabyte of JSON (service/state/listing.py: at the
        first sweep, then at every tenth `watch.resync`)."""
        params: dict[str, Any] = {"limit": -1, "all": 1, "size": 0, "trunc_cmd": 0}
        if filters:
            params["filters"] = json.dumps(filters)
        path = f"/v{self._client().api_version}/containers/json?{urlencode(params)}"
        items = self._light_get(light, path, MAX_LIST, "a list of containers", "to list containers")
        if not isinstance(items, list):
            raise EngineUnavailable(
                f"docker engine at {self.shown_url} answered a list of containers that is not a"
                " list"
            )
        return [item for item in items if isinstance(item, dict) and "Id" in item]

    def remove_container(self, container_id: str, stop_timeout: timedelta) -> EngineStep:
        try:
            api = self._client()
        except EngineUnavailable as exc:
            return EngineStep(False, str(exc), sent=False)
        seconds = int(stop_timeout.total_seconds())
        return _step(DockerRecreator(api).remove(container_id, seconds))

    def create_container(self, spec: RecreateSpec) -> EngineStep:
        try:
            api = self._client()
        except EngineUnavailable as exc:
            return EngineStep(False, str(exc), sent=False)
        return _step(DockerRecreator(api).create(spec))

    def has_image(self, image_id: str) -> bool:
        try:
            self._call(lambda api: api.inspect_image(image_id))
        except docker.errors.NotFound:
            return False
        except docker.errors.APIError as exc:
            raise EngineUnavailable(
                f"docker engine refused to inspect an image: {exc.explanation}"
            ) from None
        return True

    def logs(self, container_id: str, tail: int) -> str:
        """The last `tail` lines of the container's output; "" when it has none or is gone."""
        try:
            raw = self._call(
                lambda api: api.logs(container_id, stdout=True, stderr=True, tail=tail)
            )
        except docker.errors.APIError:
            return ""  # removed, or a logging driver that cannot be read back
        return bytes(raw)[-MAX_LOG_BYTES:].decode("utf-8", errors="replace")

    def stats(self, container_id: str) -> Usage | None:
        """One stats reading (`one_shot`: no second sample for a CPU figure Guardian works out
        itself, where the engine's API is 1.41 or later); None when gone or not running."""

        def ask(api: Any) -> Any:
            try:
                return api.stats(container_id, stream=False, one_shot=True)
            except docker.errors.InvalidVersion:  # an API before 1.41: the engine samples twice
                return api.stats(container_id, stream=False)

        try:
            raw = self._call(ask)
        except docker.errors.APIError:
            return None  # removed meanwhile, or an engine that keeps no stats for it
        return stats_usage(raw)

    def follow_logs(self, container_id: str, since: datetime, tail: int) -> LogStream:
        """The container's output from `since` (engine.follow_logs in log_stream.py's reader);
        errors translated here: a gone container's stream has ended, a cut one raises
        EngineUnavailable."""
        try:
            data = self._call(lambda api: api.inspect_container(container_id))
        except docker.errors.NotFound:
            return EndedLogs()
        except docker.errors.APIError as exc:
            raise EngineUnavailable(
                f"docker engine refused to inspect: {exc.explanation}"
            ) from None
        multiplexed = not (data.get("Config") or {}).get("Tty")
        params = {
            "follow": 1,
            "stdout": 1,
            "stderr": 1,
            "tail": max(0, tail),
            # Each message's time, taken off by the reader (log_stream.Demultiplexer): how far
            # behind a follower is. A TTY's output is not framed: no time is asked of it.
            "timestamps": int(multiplexed),
            "since": f"{self.engine_clock.theirs(since).timestamp():.6f}",
        }
        response = self._open_logs(container_id, params)
        if response is None:
            return EndedLogs()
        read1, chunked = raw_reader(response)

        def translated(limit: int) -> bytes:
            try:
                return read1(limit)
            except (requests.RequestException, docker.errors.DockerException, OSError, ValueError):
                if stream.closed:
                    return b""  # close() shut the socket under the read
                raise EngineUnavailable(
                    f"docker engine at {self.shown_url} cut the logs of {container_id[:12]}"
                ) from None

        stream = FollowedLogs(
            translated,
            lambda: shut_down(response),
            response.close,
            chunked=chunked,
            multiplexed=multiplexed,
            stamped=multiplexed,
        )
        return StampedLogs(stream, self.engine_clock)

    def _open_logs(self, container_id: str, params: dict[str, Any]) -> requests.Response | None:
        """The open response of the container's logs; None when the container is gone. Raises
        EngineUnavailable when the engine answers with anything but the stream."""

        def get(api: docker.APIClient) -> requests.Response:
            path = f"/containers/{quote(container_id, safe='')}/logs"
            url = f"{api.base_url}/v{api.api_version}{path}"
            # No read timeout: the stream waits for output as long as the container runs.
            return api.get(url, params=params, stream=True, timeout=None)  # type: ignore[no-any-return]

        response: requests.Response = self._call(get)
        if response.status_code == 404:
            response.close()
            return None
        if response.status_code != 200:
            text = response.text[:200] if not response.raw.closed else ""
            response.close()
            raise EngineUnavailable(
                f"docker engine refused the logs of {container_id[:12]}: "
                f"{response.status_code} {redact_patterns(text)}".strip()
            )
        return response

    def restart(
        self,
        container_id: str,
        stop_timeout: timedelta,
        previous_started_at: datetime | None = None,
    ) -> ActionOutcome:
        seconds = int(stop_timeout.total_seconds())
        done = ActionOutcome(Outcome.RESTARTED, "restart request completed")
        result = self._act(lambda api: api.restart(container_id, timeout=seconds), done)
        if result.outcome is Outcome.UNKNOWN:
            result = self._settle_unknown(container_id, previous_started_at, result)
        return result

    def stop(self, container_id: str, stop_timeout: timedelta) -> ActionOutcome:
        seconds = int(stop_timeout.total_seconds())
        done = ActionOutcome(Outcome.STOPPED, "stop request completed")
        result = self._act(lambda api: api.stop(container_id, timeout=seconds), done)
        if result.outcome is Outcome.UNKNOWN:
            # Sent, no answer: the container's state tells whether it stopped.
            try:
                snap = self.inspect(container_id)
            except EngineUnavailable:
                return result
            if snap is None:
                return ActionOutcome(Outcome.PERMANENT_FAILURE, "container no longer exists")
            if snap.state != "running":
                return ActionOutcome(Outcome.STOPPED, f"{result.detail}; it is {snap.state}")
        return result

    def _act(self, call: Any, done: ActionOutcome) -> ActionOutcome:
        """One request that changes a container: `done` when it returns, else its failure
        classified (a transient one drops the connection; an unknown one is the caller's to
        settle by evidence)."""
        try:
            api = self._client()
        except EngineUnavailable as exc:
            return ActionOutcome(Outcome.TRANSIENT_FAILURE, str(exc), True)
        try:
            call(api)
            return done
        except (docker.errors.DockerException, requests.RequestException, OSError) as exc:
            result = classify(exc)
        if result.outcome is Outcome.TRANSIENT_FAILURE:
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
        names = EVENT_FILTER if self.identity().kind == "podman" else EVENT_FILTER + CACHE_EVENTS
        filters = {"type": ["container"], "event": list(names)}
        kwargs: dict[str, Any] = {"filters": filters, "decode": True}
        if since is not None:
            kwargs["since"] = self.engine_clock.theirs(since).timestamp()
        stream = self._call(lambda api: api.events(**kwargs))
        self._stream = stream
        for raw in self._read(stream):
            event = parse_event(raw)
            if event is not None:
                yield replace(event, at=self.engine_clock.ours(event.at))

    def _read(self, stream: Any) -> Generator[dict[str, Any], None, None]:
        """The raw events of `stream`, closed when done; a transport failure raises
        EngineUnavailable."""
        try:
            yield from stream
        except (requests.RequestException, docker.errors.DockerException, OSError) as exc:
            raise EngineUnavailable(self._reason(exc)) from None
        finally:
            close = getattr(stream, "close", None)
            if close is not None:
                close()

    def history(self, since: datetime, until: datetime) -> EngineHistory:
        # An `until` in the engine's future keeps the stream open until then (for ever, to a
        # Guardian whose clock runs ahead and has not learnt the skew yet): the engine's own
        # Date, whole seconds and so never ahead of it, bounds it.
        end = self.engine_clock.theirs(until)
        ping = self._call(lambda api: api.get(f"{api.base_url}/_ping", timeout=10))
        engine_now = http_date(ping.headers.get("Date"))
        if engine_now is not None:
            end = min(end, engine_now)
        kwargs: dict[str, Any] = {
            "filters": {"type": ["container"]},
            "decode": True,
            "since": min(self.engine_clock.theirs(since), end).timestamp(),
            "until": end.timestamp(),
        }
        events: list[EngineEvent] = []
        oldest: datetime | None = None
        stream = self._call(lambda api: api.events(**kwargs))
        raws = self._read(stream)
        try:
            for count, raw in enumerate(raws):
                if count >= MAX_HISTORY:
                    break
                ns = raw.get("timeNano") or int(raw.get("time", 0)) * 1_000_000_000
                at = self.engine_clock.ours(datetime.fromtimestamp(ns / 1e9, UTC))
                oldest = at if oldest is None else min(oldest, at)
                event = parse_event(raw)
                if event is not None:
                    events.append(replace(event, at=at))
        finally:
            raws.close()  # closes the stream, also after MAX_HISTORY
        return EngineHistory(tuple(events), oldest)

    def close(self) -> None:
        self.stop_events()
        self._drop()

    def stop_events(self) -> None:
        stream, self._stream = self._stream, None
        if stream is not None:
            # Unblocks a listener waiting on the stream; closing a dead stream may fail any way.
            with contextlib.suppress(Exception):
                stream.close()


def label_filters(label: str, scope: str) -> dict[str, Any]:
    """The list filters for containers carrying `label` ("all": any) and matching the `scope`
    selector: Docker and Podman AND label filters, so the engine does the selecting."""
    selectors = [s for s in (None if label == ALL else label, scope) if s]
    return {"label": selectors} if selectors else {}
