"""The words of routing that config and labels check before anything else loads: a receiver's
name, the severities and the kinds a route may name (core.outbound.routing applies them)."""

from __future__ import annotations

import re

RECEIVER_NAME = re.compile(r"[a-z0-9][a-z0-9_.-]{0,62}")
RECEIVER_NAME_ALLOWED = "lower-case letters, digits, '-', '_', '.'; at most 63 characters"
SEVERITIES = ("info", "warning", "critical")
# notifications.Kind's values but "test" and "channel_failed" (never routed: a test goes to
# the channel tested, a failure to every other channel); tests hold the two equal.
ROUTED_KINDS = (
    "opened",
    "attempt",
    "resolved",
    "gave_up",
    "acknowledged",
    "reminder",
    "started",
    "approval",
)
