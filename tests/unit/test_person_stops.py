"""PersonStops: what a person stopped or removed is held; the removed are held within a bound."""

from __future__ import annotations

from guardian.service.state.state import PersonStops


def test_a_stop_is_held_until_the_container_starts_and_a_removal_is_held_after() -> None:
    stops = PersonStops()
    stops.stopped("a")
    assert stops.holds("a")
    stops.forget("a")
    assert not stops.holds("a")
    stops.stopped("b")
    stops.removed("b")
    assert stops.holds("b")


def test_only_the_last_removed_are_held_however_many_containers_a_host_removes() -> None:
    stops = PersonStops()
    total = PersonStops.MAX_REMOVED + 10
    for i in range(total):
        stops.removed(f"c{i}")
    assert not any(stops.holds(f"c{i}") for i in range(10))
    assert all(stops.holds(f"c{i}") for i in range(10, total))
