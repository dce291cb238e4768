"""The status page's forms as operator actions: the same operator service and incident state
machine as `guardian incidents ack|resolve` and `guardian silence|unsilence`.
"""

from __future__ import annotations

from datetime import timedelta
from urllib.parse import parse_qs

from guardian.core.durations import parse_duration
from guardian.service.operator import BadRequest, Operator

MAX_FORM_FIELDS = 10
VERBS = ("ack", "resolve", "approve", "deny", "silence", "unsilence")


def form(body: bytes) -> dict[str, str]:
    """A urlencoded form's fields (the last value of each); {} for one that is not."""
    try:
        fields = parse_qs(
            body.decode("utf-8"), max_num_fields=MAX_FORM_FIELDS, keep_blank_values=True
        )
    except (UnicodeDecodeError, ValueError):
        return {}
    return {key: values[-1] for key, values in fields.items()}


def act(op: Operator, verb: str, fields: dict[str, str], by: str) -> str:
    """Do what the form asks; the notice for the person. Raises what the operator service
    raises (InvalidTransition, BadRequest, NotFound), with the CLI's messages."""
    if verb in ("ack", "resolve", "approve", "deny"):
        text = fields.get("incident", "")
        if not (text.isascii() and text.isdigit()) or len(text) > 18:
            raise BadRequest(f"incident {text[:40]!r} not found")
        if verb in ("approve", "deny"):
            # guardian incidents approve|deny: one restart of this incident, through decide().
            answer = op.answer(int(text), verb == "approve", by, fields.get("reason", ""))
            done = "one restart approved" if answer.approved else "restarts denied"
            return f"Incident #{answer.incident_id}: {done}."
        incident = op.change(int(text), verb, by, fields.get("reason", ""))
        done = "acknowledged" if verb == "ack" else "resolved"
        return f"Incident #{incident.id} {done}."
    container = fields.get("container", "")
    if verb == "unsilence":
        op.unsilence(container, by)
        return f"Silence of {container} lifted."
    try:
        duration = parse_duration(fields.get("for", ""))
    except ValueError as exc:
        raise BadRequest(f"for {fields.get('for', '')[:40]!r}: {exc}") from None
    if duration <= timedelta(0):
        raise BadRequest("a silence lasts more than 0s and at most 30d")
    s = op.silence(container, duration, fields.get("reason", ""), by)
    return f"{s.container} silenced until {s.until:%Y-%m-%d %H:%M:%S} UTC."
