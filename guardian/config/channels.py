"""The receivers of `notify:` as the channel factory takes them: each one's keys, a reader of
its secrets (from the environment or files, registered for redaction) and how its keys are
named in errors. The flat keys' receivers come first, each with a deprecation note."""

from __future__ import annotations

import logging
import os
from collections.abc import Callable, Iterator, Mapping
from typing import Any

from guardian.config.credentials import read_secret, resolve_secret
from guardian.config.receivers import TYPES, legacy, new_config
from guardian.config.settings import SCHEMA, Settings
from guardian.core.redaction import Redactor

log = logging.getLogger("guardian")

# A receiver's keys, the reader of its secrets (by key: "url", "token", ...), where its keys live.
ReceiverSpec = tuple[Mapping[str, Any], Callable[[str], str | None], str]


def receiver_specs(
    settings: Settings, redact: Redactor, env: Mapping[str, str] | None = None
) -> Iterator[ReceiverSpec]:
    """Every receiver, in order: the flat keys' (notify.<type>_*), then notify.channels. A
    secret is read when the factory asks for it; reading raises ConfigError."""
    n = settings.values["notify"]
    for spec in legacy(n):
        log.warning(
            f"notify.{spec['type']}_* keys are deprecated; write under notify.channels: "
            + new_config(spec, SCHEMA["notify"])
        )
        flat = TYPES[str(spec["type"])]

        def old_secret(key: str, flat: dict[str, str] = flat) -> str | None:
            return resolve_secret(settings, flat[f"{key}_env"].removesuffix("_env"), redact, env)

        yield spec, old_secret, "notify."
    for spec in n["channels"]:
        where = f"notify.channels ({spec['name']})."

        def new_secret(key: str, spec: Mapping[str, Any] = spec, where: str = where) -> str | None:
            var, path = spec[f"{key}_env"], spec[f"{key}_file"]
            value = read_secret(
                where + key, var or "", path or "", os.environ if env is None else env
            )
            if value:
                redact.add(value)
            return value

        yield spec, new_secret, where
