"""Runtime machinery the daemon runs on: restart threads, the scheduler, the main loop's wake-ups,
the systemd watchdog link, and the HTTP port's front and limits. No entry point lives here."""
