"""remediation.hooks as the operator writes it: one HookSpec per hook, parsed with one-line errors.
Apart from core.outbound.hooks (which needs the model) so that reading a config loads no more than
this."""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import timedelta

from guardian.core.durations import format_duration, parse_duration
from guardian.core.redaction import redact_patterns

# The restart verdicts a hook can run after (core.model.Outcome's values, explained there).
# Never after a restart that Guardian's own stop interrupted: that restart has no verdict.
HOOK_VERDICTS: tuple[str, ...] = (
    "succeeded",
    "unhealthy_after_restart",
    "unknown",
    "permanent_failure",
    "transient_failure",
    "policy_denied",
    "retry_exhausted",
)
DEFAULT_TIMEOUT = timedelta(seconds=30)
MIN_TIMEOUT = timedelta(seconds=1)
MAX_TIMEOUT = timedelta(minutes=10)
MAX_HOOKS = 32
MAX_ARGS = 256
MAX_ARG_LEN = 4096
_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,63}")
_FIELDS = ("name", "argv", "after", "timeout")


class HookConfigError(ValueError):
    """A bad remediation.hooks entry; str() is what follows the key in the one-line error, e.g.
    "[0].argv = []: expected a non-empty list of strings"."""


@dataclass(frozen=True)
class HookSpec:
    """One hook as the operator wrote it: argv (no shell; argv[0] resolved at load), the
    verdicts it runs after (HOOK_VERDICTS' values), and how long it may run before its process
    group is killed."""

    name: str
    argv: tuple[str, ...]
    after: tuple[str, ...] = HOOK_VERDICTS
    timeout: timedelta = DEFAULT_TIMEOUT


def _shown(value: object) -> str:
    text = redact_patterns(repr(value))
    return text if len(text) <= 60 else text[:57] + "..."


def _argv(raw: object, where: str) -> tuple[str, ...]:
    allowed = (
        f"a non-empty list of at most {MAX_ARGS} strings (no shell: one item per argument, "
        f"each at most {MAX_ARG_LEN} characters)"
    )
    if not isinstance(raw, list) or not raw or len(raw) > MAX_ARGS:
        raise HookConfigError(f"{where}.argv = {_shown(raw)}: expected {allowed}")
    for i, arg in enumerate(raw):
        if not isinstance(arg, str) or len(arg) > MAX_ARG_LEN or "\x00" in arg:
            raise HookConfigError(f"{where}.argv[{i}] = {_shown(arg)}: expected {allowed}")
    if not raw[0].strip():
        raise HookConfigError(f"{where}.argv[0] = {_shown(raw[0])}: expected a program")
    return tuple(raw)


def _after(raw: object, where: str) -> tuple[str, ...]:
    allowed = "a list of " + ", ".join(HOOK_VERDICTS)
    items = [raw] if isinstance(raw, str) else raw
    if not isinstance(items, list) or not items:
        raise HookConfigError(f"{where}.after = {_shown(raw)}: expected {allowed}")
    for item in items:
        if not isinstance(item, str) or item.strip().lower() not in HOOK_VERDICTS:
            raise HookConfigError(
                f"{where}.after: {_shown(item)} is no verdict; expected {allowed}"
            )
    chosen = {str(i).strip().lower() for i in items}
    return tuple(v for v in HOOK_VERDICTS if v in chosen)


def _timeout(raw: object, where: str) -> timedelta:
    lo, hi = format_duration(MIN_TIMEOUT), format_duration(MAX_TIMEOUT)
    try:
        value = parse_duration(raw)
    except (ValueError, TypeError):
        value = None
    if value is None or not MIN_TIMEOUT <= value <= MAX_TIMEOUT:
        raise HookConfigError(
            f"{where}.timeout = {_shown(raw)}: expected a duration from {lo} to {hi} (e.g. 30s)"
        )
    return value


def _name(raw: object, argv: tuple[str, ...], where: str) -> str:
    if raw is None:
        base = argv[0].rstrip("/").rsplit("/", 1)[-1]
        cleaned = re.sub(r"[^A-Za-z0-9_.-]", "_", base)[:64].lstrip("_.-")
        return cleaned or "hook"
    if not isinstance(raw, str) or not _NAME.fullmatch(raw):
        raise HookConfigError(
            f"{where}.name = {_shown(raw)}: expected 1 to 64 letters, digits, '_', '.' or '-'"
        )
    return raw


def parse_hooks(raw: object) -> tuple[HookSpec, ...]:
    """remediation.hooks: a list of {argv, name?, after?, timeout?}. Raises HookConfigError naming
    the entry, the field, the value and what is allowed. argv[0] is resolved by the config."""
    if raw is None:
        return ()
    if not isinstance(raw, list) or len(raw) > MAX_HOOKS:
        raise HookConfigError(
            f" = {_shown(raw)}: expected a list of at most {MAX_HOOKS} hooks, each a mapping "
            "with argv (a list of strings) and optionally name, after, timeout"
        )
    hooks = []
    for i, entry in enumerate(raw):
        where = f"[{i}]"
        if not isinstance(entry, Mapping):
            raise HookConfigError(
                f"{where} = {_shown(entry)}: expected a mapping with argv (a list of strings) "
                "and optionally name, after, timeout"
            )
        for field in entry:
            if field not in _FIELDS:
                # YAML 1.1 reads an unquoted on/off/yes/no key as a boolean.
                why = (
                    " (YAML reads on, off, yes, no as booleans)" if isinstance(field, bool) else ""
                )
                raise HookConfigError(
                    f"{where}.{_shown(field)}: unknown field{why}; allowed: {', '.join(_FIELDS)}"
                )
        if "argv" not in entry:
            raise HookConfigError(f"{where}.argv: required (a non-empty list of strings)")
        argv = _argv(entry["argv"], where)
        hooks.append(
            HookSpec(
                _name(entry.get("name"), argv, where),
                argv,
                _after(entry["after"], where) if "after" in entry else HOOK_VERDICTS,
                _timeout(entry["timeout"], where) if "timeout" in entry else DEFAULT_TIMEOUT,
            )
        )
    return tuple(hooks)
