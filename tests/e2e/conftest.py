"""The operator's tier: `guardian run`, `guardian check` and `guardian status` started the way
the documentation says (a config file of their own, the real engine, the usual umask), so a promise
broken by any component shows here even when each component's own tests pass.

The fixtures are the integration tier's (a per-run prefix and scope: only the test's own
containers are ever touched)."""

from tests.integration.conftest import (  # noqa: F401 - fixtures, found by name
    _remove_leftovers,
    containers,
    docker_api,
    engine,
    engine_events,
    guardian,
)
