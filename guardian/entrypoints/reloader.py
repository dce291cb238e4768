"""`systemctl reload guardian` (SIGHUP): re-read the config, put a valid one in force without
losing in-flight work, refuse an invalid one in one line, and name the changes that need a restart.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass

from guardian.bootstrap import App, healer_settings
from guardian.config import ConfigError, Settings, changed_keys, reloadable, reloaded
from guardian.core.facts import SettingsReloaded
from guardian.logs import kv, reconfigure_logging
from guardian.runtime.watchdog import SupervisorLink

log = logging.getLogger("guardian.daemon")


@dataclass(frozen=True)
class Reloaded:
    """What a reload did: the changed keys now in force, and those that wait for a restart."""

    applied: tuple[str, ...]
    need_restart: tuple[str, ...]


def rebuild(app: App, new: Settings) -> Reloaded:
    """Put `new` (already validated) in force where that is safe in a running Guardian: the
    loop's settings and label rules, store retention, logging. Restarts and verifications in
    flight, incidents, the store, the engine client, the channels and the HTTP listener are left
    as they are; changed keys that only a restart applies keep their old values and are named."""
    changed = changed_keys(app.settings, new)
    settings = reloaded(app.settings, new)
    hs = app.healer.ctx.settings
    app.healer.ctx.rules.retune(healer_settings(settings, hs.self_id, hs.host))
    app.settings = settings
    reconfigure_logging(settings["log.level"], settings["log.format"])
    return Reloaded(
        tuple(k for k in changed if reloadable(k)),
        tuple(k for k in changed if not reloadable(k)),
    )


class Reloader:
    """`reread` returns the config anew (raising ConfigError); `reschedule` follows a changed
    watch.interval. Without `reread` (no config file to re-read) a reload changes nothing."""

    def __init__(
        self,
        app: App,
        reread: Callable[[], Settings] | None,
        systemd: SupervisorLink,
        reschedule: Callable[[], None],
    ) -> None:
        self.app = app
        self.reread = reread
        self.systemd = systemd
        self.reschedule = reschedule

    def reload(self) -> None:
        """Build and validate the new settings, then swap what can be swapped (rebuild):
        restarts, verifications, incidents and the outbox carry on as they were."""
        self.systemd.reloading()
        try:
            try:
                new = self.reread() if self.reread is not None else self.app.settings
            except ConfigError as exc:
                log.error(
                    "config reload refused; the running config stays in force",
                    extra=kv(reason=str(exc)),
                )
                return
            interval = self.app.settings["watch.interval"]
            done = rebuild(self.app, new)
            self.app.healer.ctx.facts.publish(SettingsReloaded())
            if self.app.settings["watch.interval"] != interval:
                self.reschedule()
            applied = ",".join(done.applied) or "-"
            if done.need_restart:
                log.warning(
                    "config reloaded; some changes wait for a restart",
                    extra=kv(applied=applied, restart_needed=",".join(done.need_restart)),
                )
            else:
                log.info("config reloaded", extra=kv(applied=applied))
        finally:
            self.systemd.reloaded()
