"""Where the store lives: the configured path, or the user's state directory when the default
one cannot be written (Guardian run by a user, not as a service)."""

from __future__ import annotations

import logging
import os
from collections.abc import Mapping
from pathlib import Path

from guardian.config.settings import DEFAULT_STORE_PATH, Settings
from guardian.logs import kv
from guardian.ports import StoreError

log = logging.getLogger("guardian")


def store_path(settings: Settings, env: Mapping[str, str] | None = None) -> Path:
    """The configured store path; the default falls back to the XDG state dir when unwritable."""
    path = Path(settings["store.path"])
    if settings.store_path_explicit or settings["store.path"] != DEFAULT_STORE_PATH:
        return path
    parent = path.parent
    if (parent.is_dir() and os.access(parent, os.W_OK)) or (
        not parent.exists() and os.access(parent.parent, os.W_OK)
    ):
        return path
    env = os.environ if env is None else env
    base = Path(
        env.get("XDG_STATE_HOME") or Path(env.get("HOME", "~")).expanduser() / ".local/state"
    )
    fallback = base / "guardian" / "guardian.db"
    log.warning(
        "default store directory not writable; using the user state directory",
        extra=kv(default=str(path), store=str(fallback)),
    )
    return fallback


def existing_store_path(settings: Settings) -> Path:
    """The store path for commands that read what a daemon wrote: it must exist already."""
    path = store_path(settings)
    if not path.exists():
        raise StoreError(
            f"store {path}: no such file; is `guardian run` using this config? (pass --config)"
        )
    return path
