"""`systemctl reload guardian` (SIGHUP): re-read the config, put a valid one in force without
losing in-flight work, refuse an invalid one in one line, and name the changes that need a restart.
"""

from __future__ import annotations

import logging
from collections.abc import Callable

from guardian.bootstrap import App, rebuild
from guardian.config import ConfigError, Settings
from guardian.logs import kv
from guardian.runtime.watchdog import SupervisorLink

log = logging.getLogger("guardian.daemon")


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
        """Build and validate the new settings, then swap what can be swapped (bootstrap.rebuild):
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
            self.app.changes.changed()  # every container's answer may rest on what changed
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
