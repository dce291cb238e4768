"""notify.channels, notify.routes and notify.default: named receivers and the routes between
them, parsed into plain values with one-line errors naming the receiver and key.

A receiver is `{name, type, ...}` with the keys of its type: the flat `notify.<type>_*` keys
without their prefix (a Slack webhook's `url_env`, an email's `smtp_host`), each parsed and
bounded like that flat key. The flat keys still configure one receiver per channel type, named
for the type, with a deprecation note (legacy()). Nothing here reads a secret: `*_env` names a
variable and `*_file` a path, read by credentials.py when Guardian starts.
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import timedelta
from types import MappingProxyType
from typing import Any

from guardian.core.durations import format_duration
from guardian.core.outbound.receivers import (
    RECEIVER_NAME,
    RECEIVER_NAME_ALLOWED,
    ROUTED_KINDS,
    SEVERITIES,
)

MAX_RECEIVERS, MAX_ROUTES, MAX_PATTERNS = 32, 64, 32

# Per type: the receiver's key -> the flat notify key it mirrors (its parser, bound, default).
TYPES: dict[str, dict[str, str]] = {
    "slack": {"url_env": "slack_webhook_url_env", "url_file": "slack_webhook_url_file"},
    "slack_bot": {
        "token_env": "slack_bot_token_env",
        "token_file": "slack_bot_token_file",
        "channel": "slack_bot_channel",
        "api_url": "slack_api_url",
    },
    "discord": {"url_env": "discord_webhook_url_env", "url_file": "discord_webhook_url_file"},
    "email": {
        "smtp_host": "email_smtp_host",
        "smtp_port": "email_smtp_port",
        "security": "email_security",
        "username": "email_username",
        "password_env": "email_password_env",
        "password_file": "email_password_file",
        "from": "email_from",
        "to": "email_to",
    },
    "webhook": {
        "url_env": "webhook_url_env",
        "url_file": "webhook_url_file",
        "secret_env": "webhook_secret_env",
        "secret_file": "webhook_secret_file",
        "json_key": "webhook_json_key",
    },
    "alertmanager": {
        "url": "alertmanager_url",
        "resend_interval": "alertmanager_resend_interval",
    },
    "pagerduty": {
        "routing_key_env": "pagerduty_routing_key_env",
        "routing_key_file": "pagerduty_routing_key_file",
        "url": "pagerduty_url",
        "events": "pagerduty_events",
    },
    "apprise": {"urls_env": "apprise_urls_env", "urls_file": "apprise_urls_file"},
}
# What a receiver of each type cannot do without: one of these keys (a secret's _env or _file).
_REQUIRED: dict[str, tuple[tuple[str, ...], ...]] = {
    "slack": (("url_env", "url_file"),),
    "slack_bot": (("token_env", "token_file"), ("channel",)),
    "discord": (("url_env", "url_file"),),
    "email": (("smtp_host",), ("from",), ("to",)),
    "webhook": (("url_env", "url_file"),),
    "alertmanager": (("url",),),
    "pagerduty": (("routing_key_env", "routing_key_file"),),
    "apprise": (("urls_env", "urls_file"),),
}
_ROUTE_KEYS = ("receivers", "kinds", "severity", "containers", "continue")


class ReceiverError(ValueError):
    """A bad receiver or route; str() is the rest of the line after the key's name."""


def _shown(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


def _list(raw: Any, what: str, limit: int) -> list[Any]:
    if raw is None:
        return []
    if isinstance(raw, str):
        if raw.strip().startswith("["):
            import json  # the GUARDIAN_NOTIFY_* variable form: loaded only when one is set

            try:
                raw = json.loads(raw)
            except ValueError:
                raise ReceiverError(f" = {_shown(raw)}: expected {what} (JSON)") from None
        else:
            raw = raw.replace(",", " ").split()
    if not isinstance(raw, list) or len(raw) > limit:
        raise ReceiverError(f" = {_shown(raw)}: expected a list of at most {limit} {what}")
    return raw


def _name(raw: Any, where: str) -> str:
    if not isinstance(raw, str) or not RECEIVER_NAME.fullmatch(raw):
        raise ReceiverError(f"{where} = {_shown(raw)}: expected a name ({RECEIVER_NAME_ALLOWED})")
    return raw


def parse_channels(raw: Any, flat: Mapping[str, Any]) -> tuple[Mapping[str, Any], ...]:
    """notify.channels: each receiver as a read-only mapping of name, type and every key of
    its type (defaults filled in)."""
    out: list[Mapping[str, Any]] = []
    for i, entry in enumerate(_list(raw, "receivers {name, type, ...}", MAX_RECEIVERS)):
        where = f"[{i}]"
        if not isinstance(entry, dict):
            raise ReceiverError(
                f"{where} = {_shown(entry)}: expected a mapping {{name, type, ...}}"
            )
        name = _name(entry.get("name"), f"{where}.name")
        where = f"[{i}] ({name})"
        kind = entry.get("type")
        if kind not in TYPES:
            raise ReceiverError(
                f"{where}.type = {_shown(kind)}: expected one of {', '.join(TYPES)}"
            )
        keys = TYPES[kind]
        spec: dict[str, Any] = {"name": name, "type": kind}
        for key in entry:
            if key not in keys and key not in ("name", "type"):
                allowed = ", ".join(["name", "type", *keys])
                raise ReceiverError(f"{where}: unknown key {_shown(key)}; a {kind} has {allowed}")
        for key, flat_key in keys.items():
            spec_key = flat[flat_key]
            if key not in entry:
                spec[key] = spec_key.default
                continue
            try:
                spec[key] = spec_key.parse(entry[key])
            except (ValueError, TypeError, OverflowError):
                shown = _shown(entry[key])
                raise ReceiverError(
                    f"{where}.{key} = {shown}: expected {spec_key.allowed}"
                ) from None
        for options in _REQUIRED[kind]:
            set_ = [k for k in options if spec[k]]
            if not set_:
                raise ReceiverError(f"{where}: a {kind} needs {' or '.join(options)}")
            if len(set_) > 1:
                raise ReceiverError(f"{where}: {' and '.join(set_)}: set only one of them")
        if any(r["name"] == name for r in out):
            raise ReceiverError(f"{where}.name: another receiver has that name")
        out.append(MappingProxyType(spec))
    return tuple(out)


def parse_routes(raw: Any) -> tuple[Mapping[str, Any], ...]:
    """notify.routes: each route as a read-only mapping of receivers, kinds, severity,
    containers and continue."""
    out: list[Mapping[str, Any]] = []
    for i, entry in enumerate(_list(raw, "routes {receivers, ...}", MAX_ROUTES)):
        where = f"[{i}]"
        if not isinstance(entry, dict):
            raise ReceiverError(f"{where} = {_shown(entry)}: expected a mapping {{receivers, ...}}")
        for key in entry:
            if key not in _ROUTE_KEYS:
                raise ReceiverError(
                    f"{where}: unknown key {_shown(key)}; a route has {', '.join(_ROUTE_KEYS)}"
                )
        try:
            receivers = [
                _name(r, f"{where}.receivers") for r in _list(entry.get("receivers"), "names", 16)
            ]
            kinds = _list(entry.get("kinds"), "kinds", len(ROUTED_KINDS))
            severities = _list(entry.get("severity"), "severities", len(SEVERITIES))
            containers = _list(entry.get("containers"), "patterns", MAX_PATTERNS)
        except ReceiverError as exc:
            message = str(exc)
            raise ReceiverError(message if message.startswith(where) else where + message) from None
        if not receivers:
            raise ReceiverError(f"{where}.receivers: at least one receiver name")
        for kind in kinds:
            if kind not in ROUTED_KINDS:
                raise ReceiverError(
                    f"{where}.kinds: {_shown(kind)}: expected any of {', '.join(ROUTED_KINDS)}"
                )
        for level in severities:
            if level not in SEVERITIES:
                raise ReceiverError(
                    f"{where}.severity: {_shown(level)}: expected any of {', '.join(SEVERITIES)}"
                )
        for pattern in containers:
            if not isinstance(pattern, str) or not pattern or len(pattern) > 256:
                raise ReceiverError(
                    f"{where}.containers: {_shown(pattern)}: expected container name patterns"
                    " (web-*) of at most 256 characters"
                )
        proceed = entry.get("continue", False)
        if not isinstance(proceed, bool):
            raise ReceiverError(f"{where}.continue = {_shown(proceed)}: expected true or false")
        out.append(
            MappingProxyType(
                {
                    "receivers": tuple(receivers),
                    "kinds": tuple(kinds),
                    "severity": tuple(severities),
                    "containers": tuple(containers),
                    "continue": proceed,
                }
            )
        )
    return tuple(out)


def parse_default(raw: Any) -> tuple[str, ...]:
    """notify.default: receiver names (empty: every receiver)."""
    return tuple(_name(r, "") for r in _list(raw, "receiver names", MAX_RECEIVERS))


def legacy(notify: Mapping[str, Any]) -> list[Mapping[str, Any]]:
    """The receivers the flat notify.<type>_* keys configure, one per type, named for it."""
    out: list[Mapping[str, Any]] = []
    for kind, keys in TYPES.items():
        spec = {key: notify[flat] for key, flat in keys.items()}
        if any(spec[k] for options in _REQUIRED[kind][:1] for k in options):
            out.append(MappingProxyType({"name": kind, "type": kind, **spec}))
    return out


def new_config(spec: Mapping[str, Any], flat: Mapping[str, Any]) -> str:
    """The notify.channels entry to write instead of a legacy receiver's flat keys (one line;
    `flat` is the notify section's schema, for the defaults left out)."""
    keys = TYPES[str(spec["type"])]
    given = [
        f"{key}: {_yaml(spec[key])}"
        for key in keys
        if spec[key] not in (None, "") and spec[key] != flat[keys[key]].default
    ]
    return "{" + ", ".join([f"name: {spec['name']}", f"type: {spec['type']}", *given]) + "}"


def _yaml(value: Any) -> str:
    if isinstance(value, timedelta):
        return format_duration(value)
    return str(value)


def check_names(notify: Mapping[str, Any]) -> None:
    """Every name a route or notify.default uses is a receiver's; a named receiver and a
    legacy one never share a name."""
    names = [r["name"] for r in notify["channels"]]
    for old in legacy(notify):
        if old["name"] in names:
            raise ReceiverError(
                f"channels: the name {old['name']!r} is taken by the flat notify.{old['type']}_*"
                " keys' receiver; rename it or remove those keys"
            )
        names.append(old["name"])
    for i, route in enumerate(notify["routes"]):
        for name in route["receivers"]:
            if name not in names:
                known = ", ".join(names) or "none is configured"
                raise ReceiverError(
                    f"routes[{i}].receivers: no receiver {name!r}; receivers: {known}"
                )
    for name in notify["default"]:
        if name not in names:
            known = ", ".join(names) or "none is configured"
            raise ReceiverError(f"default: no receiver {name!r}; receivers: {known}")
