"""The one secret reader: notification credentials and the API token come from an environment
variable or a file named in the config (never from the YAML itself), and are registered for
redaction as soon as they are read. Used by bootstrap only.
"""

from __future__ import annotations

import os
import stat
from collections.abc import Mapping
from pathlib import Path

from guardian.config.settings import ConfigError, Settings
from guardian.core.redaction import Redactor

MAX_SECRET_FILE = 64 * 1024  # a token, a password or a URL: far below this
# A guess of a token this long never comes right, whatever the rate: 32 hex characters are
# 128 bits. Shorter tokens are refused at load.
MIN_TOKEN = 32
MIN_DISTINCT = 8  # a token of few characters repeated is a guess away, whatever its length


def read_secret(
    key: str, var: str, path: str, env: Mapping[str, str], var_optional: bool = False
) -> str | None:
    """The secret `key` from the file `path` if one is named, else from the variable `var`;
    None when neither is configured (or the variable is unset and `var_optional`). Raises
    ConfigError naming the key and where it looked, never the value."""
    if path:
        try:
            with Path(path).open("rb") as f:
                mode = os.fstat(f.fileno()).st_mode
                raw = f.read(MAX_SECRET_FILE + 1)
            value = raw.decode("utf-8").strip()
        except (OSError, UnicodeDecodeError) as exc:
            why = getattr(exc, "strerror", None) or "not readable text"
            raise ConfigError(f"{key}_file = {path!r}: cannot read: {why}") from None
        if mode & 0o007:
            # Anyone on the host could read the secret, or swap it for one of their own.
            raise ConfigError(
                f"{key}_file = {path!r}: other users may read or write it (mode "
                f"{stat.S_IMODE(mode):04o}); chmod 600 it (640 if a group needs it)"
            )
        if len(raw) > MAX_SECRET_FILE:
            raise ConfigError(f"{key}_file = {path!r}: larger than {MAX_SECRET_FILE} bytes")
        if not value:
            raise ConfigError(f"{key}_file = {path!r}: the file is empty")
        return value
    if not var:
        return None
    value = env.get(var, "").strip()
    if not value and not var_optional:
        raise ConfigError(f"{key}_env = {var!r}: that environment variable is not set or empty")
    return value or None


def resolve_secret(
    settings: Settings,
    name: str,
    redact: Redactor,
    env: Mapping[str, str] | None = None,
) -> str | None:
    """The secret `notify.<name>` (or `<section>.<name>` when `name` is dotted) from the env
    var named by `<name>_env` or the file named by `<name>_file` (set only one); None when
    neither is configured."""
    key = name if "." in name else f"notify.{name}"
    var, path = settings[f"{key}_env"], settings[f"{key}_file"]
    if var and path:
        raise ConfigError(f"{key}_env and {key}_file: set only one of them")
    value = read_secret(key, var, path, os.environ if env is None else env)
    if value:
        redact.add(value)
    return value


def load_token(settings: Settings, env: Mapping[str, str] | None = None) -> str | None:
    """The API token from api.token_file, else from the variable named by api.token_env (unset:
    the endpoints that change state are off). Raises ConfigError for one shorter than
    MIN_TOKEN characters or of fewer than MIN_DISTINCT distinct ones, naming where it came
    from and its length, never its value."""
    env = os.environ if env is None else env
    var, path = settings["api.token_env"], settings["api.token_file"]
    token = read_secret("api.token", var, path, env, var_optional=True)
    if token is None:
        return None
    where = f"api.token_file = {path!r}" if path else f"api.token_env = {var!r}"
    make = "(make one with `guardian token new` or `openssl rand -hex 32`)"
    if len(token) < MIN_TOKEN:
        raise ConfigError(
            f"{where}: the token is {len(token)} characters; expected at least {MIN_TOKEN} {make}"
        )
    if len(set(token)) < MIN_DISTINCT:
        # Long but guessable: 40 times the same character, a word repeated.
        raise ConfigError(
            f"{where}: the token has {len(set(token))} distinct characters; expected at least "
            f"{MIN_DISTINCT} {make}"
        )
    return token
