"""Runtime machinery the daemon runs on: the keyed work queue and where restart calls run, the
scheduler, the main loop's wake-ups, the systemd watchdog link, the HTTP port's front and
limits, and the edges a built Guardian releases at close. No entry point lives here."""
