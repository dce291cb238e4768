"""The HTTP API under /api/v1/: read incidents, actions, containers and silences; steer them.

Every request needs `Authorization: Bearer <token>` (compared in constant time): incidents,
timelines and actions quote what containers print. Wrong tokens go through the one
CredentialLimiter the sign-in form shares: a client that keeps guessing gets 429.
`api.public_reads: true` opens the reads (GET) to anyone who reaches the port; /metrics,
/healthz and /readyz stay open regardless.
With no token configured, what needs one is off.
Errors are JSON `{"error": "..."}` with a message for people; bodies are validated strictly.
"""

from __future__ import annotations

import hmac
import json
import logging
from collections.abc import Callable
from datetime import datetime, timedelta
from typing import Any

from guardian.core.durations import parse_duration, parse_rfc3339
from guardian.core.escalation.rollback import requested
from guardian.core.incidents import InvalidTransition
from guardian.core.model import IncidentState
from guardian.entrypoints.credential_limiter import CredentialLimiter
from guardian.entrypoints.http_server import Handler, Request, Response
from guardian.logs import kv
from guardian.ports import EngineUnavailable
from guardian.readside.status import container_status
from guardian.readside.views import (
    action_view,
    approval_view,
    container_view,
    event_view,
    incident_view,
    silence_view,
    timeline_view,
)
from guardian.service.healing.healer import Healer
from guardian.service.operator import BadRequest, Gone, NotFound, Operator, Refused

log = logging.getLogger("guardian.api")

PREFIX = "/api/v1"
EVENTS_LIMIT = 100  # events per answer unless the client asks for fewer or more
EVENTS_MAX = 1000
MUTATING = frozenset({"POST", "PUT", "PATCH", "DELETE"})


_json = Response.json
_error = Response.error


class _Refused(Exception):
    """Ends a request early with this response."""

    def __init__(self, response: Response) -> None:
        self.response = response


def _body(request: Request, required: set[str], optional: set[str] | None = None) -> dict[str, str]:
    """The request's JSON object, with exactly the fields allowed, all strings."""
    if not request.body.strip():
        doc: Any = {}
    else:
        try:
            doc = json.loads(request.body)
        except (ValueError, UnicodeDecodeError) as exc:
            raise _Refused(_error(400, f"malformed JSON body: {exc}")) from None
    if not isinstance(doc, dict):
        raise _Refused(_error(400, "the body must be a JSON object"))
    allowed = required | (optional or set())
    unknown = sorted(set(doc) - allowed)
    if unknown:
        raise _Refused(
            _error(
                400, f"unknown field(s) {', '.join(unknown)}; allowed: {', '.join(sorted(allowed))}"
            )
        )
    missing = sorted(required - set(doc))
    if missing:
        raise _Refused(_error(400, f"missing field(s): {', '.join(missing)}"))
    for key, value in doc.items():
        if not isinstance(value, str):
            raise _Refused(_error(400, f"field {key} must be a string"))
    return doc


def _query(request: Request, name: str) -> str | None:
    values = request.query.get(name)
    return values[-1] if values else None


def _duration(name: str, text: str) -> timedelta:
    try:
        return parse_duration(text)
    except ValueError as exc:
        # What the client wrote is not repeated: an answer carries no text the asker wrote.
        raise _Refused(_error(400, f"{name}: {exc}")) from None


def _since(text: str | None) -> int | datetime | None:
    """The events feed's `since`: a cursor (a number) or an RFC 3339 time, in UTC."""
    if text is None:
        return None
    if text.isascii() and text.isdigit() and len(text) <= 18:
        return int(text)
    try:
        return parse_rfc3339(text)
    except ValueError as exc:
        reason = str(exc).replace("expected an", "expected a cursor (a number) or an", 1)
        raise _Refused(_error(400, f"since: {reason}")) from None


def _limit(text: str | None) -> int:
    if text is None:
        return EVENTS_LIMIT
    if (
        not (text.isascii() and text.isdigit() and len(text) <= 4)
        or not 1 <= int(text) <= EVENTS_MAX
    ):
        raise _Refused(_error(400, f"limit: expected a number from 1 to {EVENTS_MAX}"))
    return int(text)


class Api:
    """The /api/v1/ handler over the daemon's healer, the operator actions and the token."""

    def __init__(
        self,
        healer: Healer,
        operator: Operator,
        token: str | None,
        public_reads: bool = False,
        limiter: CredentialLimiter | None = None,
    ) -> None:
        self.healer = healer
        self.op = operator
        self.public_reads = public_reads
        self._token = token.encode() if token else None
        self.limiter = limiter or CredentialLimiter()

    def __call__(self, request: Request) -> Response:
        # The server hands over the path already percent-decoded.
        parts = [p for p in request.path[len(PREFIX) :].split("/") if p]
        route = self._route(request.method, parts)
        if route is None:
            return _error(404, "no such endpoint")
        try:
            if request.method in MUTATING:
                self._authorize(request, "endpoints that change state are off")
            elif not self.public_reads:
                self._authorize(request, "reads of incidents, actions and containers are off")
            return route(request)
        except _Refused as refused:
            return refused.response
        except BadRequest as exc:
            return _error(400, str(exc))
        except NotFound as exc:
            return _error(404, str(exc))
        except (InvalidTransition, Refused) as exc:
            return _error(409, str(exc))
        except EngineUnavailable as exc:
            return _error(503, str(exc))

    def _authorize(self, request: Request, off: str) -> None:
        if self._token is None:
            hint = "" if request.method in MUTATING else ", or api.public_reads: true"
            raise _Refused(
                _error(
                    403,
                    f"{off}: no API token is configured (set api.token_env or api.token_file"
                    f"{hint})",
                )
            )
        scheme, _, given = request.headers.get("authorization", "").partition(" ")
        if scheme.lower() != "bearer" or not given.strip():
            raise _Refused(
                _error(
                    401,
                    "this endpoint needs an `Authorization: Bearer <token>` header",
                    {"WWW-Authenticate": 'Bearer realm="guardian"'},
                )
            )
        right = hmac.compare_digest(given.strip().encode(), self._token)
        wait = self.limiter.attempt(request.client, right)
        if wait:
            raise _Refused(
                _error(
                    429,
                    f"too many wrong tokens from this address; try again in {wait} seconds",
                    {"Retry-After": str(wait)},
                )
            )
        if not right:
            log.warning("api token refused", extra=kv(client=request.client))
            raise _Refused(_error(403, "the bearer token is not valid"))

    def _route(self, method: str, parts: list[str]) -> Callable[[Request], Response] | None:
        match (method, parts):
            case ("GET", ["incidents"]):
                return self.list_incidents
            case ("GET", ["incidents", incident_id]):
                return lambda r: self.show_incident(incident_id)
            case ("POST", ["incidents", incident_id, ("ack" | "resolve" | "close") as verb]):
                return lambda r: self.change(r, incident_id, verb)
            case ("POST", ["incidents", incident_id, ("approve" | "deny") as verb]):
                return lambda r: self.answer(r, incident_id, verb == "approve")
            case ("GET", ["actions"]):
                return self.list_actions
            case ("GET", ["events"]):
                return self.list_events
            case ("GET", ["containers"]):
                return lambda r: _json(
                    200,
                    {
                        "containers": [
                            container_view(c) for c in container_status(self.healer, self.op)
                        ]
                    },
                )
            case ("GET", ["silences"]):
                return self.list_silences
            case ("POST", ["silences"]):
                return self.silence
            case ("DELETE", ["silences", container]):
                return lambda r: self.unsilence(r, container)
            case ("POST", ["containers", container, "rollback"]):
                return lambda r: self.rollback(r, container)
        return None

    # -- endpoints --------------------------------------------------------------------------

    def list_incidents(self, request: Request) -> Response:
        state_text = _query(request, "state")
        try:
            state = IncidentState(state_text) if state_text else None
        except ValueError:
            allowed = ", ".join(str(s) for s in IncidentState)
            return _error(400, f"state: expected one of {allowed}")
        incidents = self.op.store.list_incidents(self.op.host, state, _query(request, "container"))
        return _json(200, {"incidents": [incident_view(i) for i in incidents]})

    def _id(self, text: str) -> int:
        # isdigit() alone admits "²" and other digits int() refuses.
        if not (text.isascii() and text.isdigit()) or len(text) > 18:
            # What the path said is not repeated: an answer carries no text the asker wrote.
            raise _Refused(_error(404, "no such incident: an incident id is a number"))
        return int(text)

    def show_incident(self, incident_id: str) -> Response:
        incident = self.op.incident(self._id(incident_id))
        return _json(
            200,
            {
                "incident": incident_view(incident),
                "timeline": timeline_view(self.op.timeline(incident), incident.container),
            },
        )

    def change(self, request: Request, incident_id: str, verb: str) -> Response:
        number = self._id(incident_id)
        required = {"by", "reason"} if verb == "resolve" else {"by"}
        body = _body(request, required, {"reason"})
        incident = self.op.change(number, verb, body["by"], body.get("reason", ""))
        return _json(200, {"incident": incident_view(incident)})

    def answer(self, request: Request, incident_id: str, approve: bool) -> Response:
        number = self._id(incident_id)
        body = _body(request, {"by"}, {"reason"})
        answer = self.op.answer(number, approve, body["by"], body.get("reason", ""))
        return _json(200, {"approval": approval_view(answer)})

    def list_actions(self, request: Request) -> Response:
        since_text = _query(request, "since")
        since = self.op.clock.now() - _duration("since", since_text) if since_text else None
        actions = self.op.store.actions(self.op.host, _query(request, "container"), since)
        return _json(200, {"actions": [action_view(a) for a in actions]})

    def list_events(self, request: Request) -> Response:
        limit = _limit(_query(request, "limit"))
        since = _since(_query(request, "since"))
        try:
            page = self.op.events(since, limit)
        except Gone as gone:
            return _json(410, {"error": str(gone), "oldest": gone.oldest})
        return _json(200, {"events": [event_view(e) for e in page.events], "next": page.next})

    def list_silences(self, request: Request) -> Response:
        now = self.op.clock.now()
        everything = _query(request, "all") in ("1", "true", "yes")
        silences = self.op.store.silences(self.op.host, now, everything)
        return _json(200, {"silences": [silence_view(s, now) for s in silences]})

    def silence(self, request: Request) -> Response:
        body = _body(request, {"container", "for", "reason", "by"})
        duration = _duration("for", body["for"])
        s = self.op.silence(body["container"], duration, body["reason"], body["by"])
        return _json(201, {"silence": silence_view(s, self.op.clock.now())})

    def unsilence(self, request: Request, container: str) -> Response:
        body = _body(request, set(), {"by"})
        s = self.op.unsilence(container, body.get("by", "api"))
        return _json(200, {"silence": silence_view(s, self.op.clock.now())})

    def rollback(self, request: Request, container: str) -> Response:
        """A person's rollback of `container` (guardian rollback NAME): refused at once (409)
        when there is nothing to roll back to; else requested, and the daemon acts at its next
        look, through decide()."""
        body = _body(request, {"by"}, {"reason"})
        asked, to = self.op.request_rollback(container, body["by"], body.get("reason", ""))
        return _json(
            202,
            {
                "rollback": {
                    "container": asked.container,
                    "to": to.told,
                    "by": asked.by,
                    "expires_at": asked.expires_at.isoformat(timespec="seconds"),
                },
                "message": requested(asked.container, to),
            },
        )


def api_handler(
    healer: Healer,
    operator: Operator,
    token: str | None,
    public_reads: bool = False,
    limiter: CredentialLimiter | None = None,
) -> Handler:
    """The handler to mount at /api/v1; reads need the token unless `public_reads`; wrong
    tokens are counted by `limiter` (the one the sign-in form uses)."""
    return Api(healer, operator, token, public_reads, limiter)
