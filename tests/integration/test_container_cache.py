"""The container cache with a real engine (issue 44): an unhealthy event for a container the loop
already knows is acted on without an inspect; a cut event stream makes every entry doubtful, and
the entries are read again once the stream is back. Every request Guardian sends the engine goes
through a counting proxy (tests/proxy.py); what happened is judged by the engine's own events."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from tests.helpers import wait_until
from tests.integration.see_more import HEALTH, incidents
from tests.proxy import DockerProxy

# The cache takes an event as news once it is this far past the inspect at most (core.cache_entry
# ORDER_MARGIN, while the engine's answers do not bound its clock yet; far less once they do).
ORDER_MARGIN = 2.0


@pytest.fixture
def proxy(tmp_path: Path):
    p = DockerProxy(tmp_path / "engine.sock").start()
    yield p
    p.stop()


def inspects_of(proxy: DockerProxy, cid: str, start: int = 0, end: int | None = None) -> int:
    return sum(
        1
        for method, target in proxy.targets[start:end]
        if method == "GET" and target.partition("?")[0].endswith(f"/containers/{cid}/json")
    )


def restart_request(proxy: DockerProxy, cid: str, start: int) -> int | None:
    """The index in the proxy's record of the first restart request for `cid` from `start`."""
    for i, (method, target) in enumerate(proxy.targets[start:], start):
        if method == "POST" and target.partition("?")[0].endswith(f"/containers/{cid}/restart"):
            return i
    return None


def warm(g, proxy: DockerProxy, cid: str) -> None:
    """Guardian has swept and inspected the container, its event stream is open, and an event
    from now on is news to the cache's entry. The entry takes an event as news only once it
    is ORDER_MARGIN past the inspect, on the engine's clock: a rule in real time, waited out
    once here (the unit tests step a fake clock through it)."""
    wait_until(lambda: g.lines("sweep done"), 20, message="first sweep")
    wait_until(lambda: inspects_of(proxy, cid) >= 1, 20, message="the first sweep's inspect")
    wait_until(lambda: proxy.subscriptions() >= 1, 20, message="the event stream")
    past = time.monotonic() + ORDER_MARGIN
    wait_until(lambda: time.monotonic() >= past, ORDER_MARGIN + 1, message="the cache's margin")


def settled(events, name: str) -> None:
    """Until ORDER_MARGIN has passed since `name` turned healthy: a Guardian started from now on
    inspects it after that event by more than the margin, so the event, replayed by a stream
    that opens after the inspect, is one the inspect already shows (else the entry could not
    tell whether it was news, and would be doubtful)."""
    healthy = events.first(name, "health_status: healthy")
    margin = ORDER_MARGIN + 0.1
    wait_until(lambda: time.time() >= healthy + margin, margin + 1, message="the event's margin")


def after(events, name: str, action: str, since: float) -> float:
    """The engine's time of `name`'s first `action` event at or after `since`."""
    return wait_until(
        lambda: next((t for a, t in events.of(name) if a == action and t >= since), None),
        20,
        message=f"{name} {action}",
    )


# The standard health check, saying why it fails (Docker keeps that output across a restart).
SAID = "sick: /run/sick is there"
HEALTH_SAYS = f"if [ -f /run/sick ]; then echo '{SAID}'; exit 1; fi"


def test_an_unhealthy_event_is_acted_on_without_an_inspect_between_it_and_the_restart(
    containers, guardian, engine_events, proxy
):
    name = containers.run("cached", health_cmd=HEALTH_SAYS)
    containers.wait_health(name, "healthy")
    cid = containers.inspect(name)["Id"]
    settled(engine_events, name)
    # A long sweep interval: only the first sweep reads the container; nothing else would.
    g = guardian(watch={"interval": "60s"}, docker={"url": proxy.url})
    warm(g, proxy, cid)
    flipped = len(proxy.targets)
    containers.make_unhealthy(name)
    unhealthy = engine_events.first(name, "health_status: unhealthy")
    after(engine_events, name, "kill", unhealthy)
    asked = wait_until(lambda: restart_request(proxy, cid, flipped), 10, message="restart")
    assert inspects_of(proxy, cid, flipped, asked) == 0
    assert g.lines("judged from the cache")
    wait_until(lambda: g.lines("restart verified"), 20, message="verified")
    # The probe's output, read once after the restart call: the probe before it, not the new
    # run's.
    [incident] = incidents(g.store_path, name)
    assert incident["detail"] == SAID
    assert g.stop() == 0


def test_a_cut_event_stream_has_every_entry_read_again_and_healing_goes_on(
    containers, guardian, engine_events, proxy
):
    name = containers.run("cut", health_cmd=HEALTH)
    containers.wait_health(name, "healthy")
    cid = containers.inspect(name)["Id"]
    g = guardian(watch={"interval": "2s"}, docker={"url": proxy.url})
    warm(g, proxy, cid)
    before = len(proxy.targets)
    proxy.stop()  # the engine "goes away": the stream and every connection are cut
    proxy.start()
    # The stream comes back, and the container is inspected again (its entry was doubtful).
    wait_until(lambda: proxy.subscriptions() >= 2, 20, message="the stream reconnected")
    wait_until(lambda: inspects_of(proxy, cid, before) >= 1, 20, message="read again")
    containers.make_unhealthy(name)
    unhealthy = engine_events.first(name, "health_status: unhealthy")
    after(engine_events, name, "kill", unhealthy)
    wait_until(lambda: g.lines("restart verified"), 20, message="verified")
    assert g.stop() == 0


def test_a_container_recreated_under_the_same_name_is_inspected_and_healed(
    containers, guardian, engine_events, proxy
):
    name = containers.run("again", health_cmd=HEALTH)
    containers.wait_health(name, "healthy")
    first = containers.inspect(name)["Id"]
    g = guardian(watch={"interval": "60s"}, docker={"url": proxy.url})
    warm(g, proxy, first)
    containers.api.remove_container(first, force=True)
    short = name.removeprefix(containers.name(""))
    again = containers.run(short, health_cmd=HEALTH)
    containers.wait_health(again, "healthy")
    second = containers.inspect(again)["Id"]
    assert second != first
    flipped = len(proxy.targets)
    containers.make_unhealthy(again)
    unhealthy = engine_events.first(again, "health_status: unhealthy")
    after(engine_events, again, "kill", unhealthy)
    asked = wait_until(lambda: restart_request(proxy, second, flipped), 10, message="restart")
    # A new id has no entry of the old one's: what was decided on it was an inspect of the new
    # container (at the flip, or at its first health event before it).
    assert inspects_of(proxy, second, 0, asked) >= 1
    assert restart_request(proxy, first, 0) is None, proxy.targets
    assert g.stop() == 0
