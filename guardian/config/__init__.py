"""Configuration: YAML file + GUARDIAN_* environment (+ autoheal's variables, named receivers)
-> frozen Settings. The names callers import from `guardian.config` live in settings.py."""

from guardian.config.settings import (
    DEFAULT_STORE_PATH,
    SCHEMA,
    ConfigError,
    Settings,
    changed_keys,
    load_settings,
    reloadable,
    reloaded,
)

__all__ = [
    "DEFAULT_STORE_PATH",
    "SCHEMA",
    "ConfigError",
    "Settings",
    "changed_keys",
    "load_settings",
    "reloadable",
    "reloaded",
]
