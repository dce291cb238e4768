"""The dependency graph over random label sets (up to 500 containers): a valid act order, every
cycle reported, nobody in a cycle held back by it. The time it takes is the benchmark's
(`python -m bench --only graph`), never asserted here."""

from __future__ import annotations

import logging

from hypothesis import given, settings
from hypothesis import strategies as st

from guardian.core.relations.dependencies import DEPENDS_ON, DependencyGraph
from tests.app import make_app

ON = {"guardian.enable": "true"}


@st.composite
def graphs(draw: st.DrawFn) -> dict[str, list[str]]:
    n = draw(st.integers(min_value=1, max_value=500))
    names = [f"c{i}" for i in range(n)]
    degree = draw(st.integers(min_value=0, max_value=4))
    index = st.integers(min_value=0, max_value=n - 1)
    return {name: [names[j] for j in draw(st.lists(index, max_size=degree))] for name in names}


def reaches(edges: dict[str, list[str]], start: str) -> set[str]:
    seen, todo = set(), [start]
    while todo:
        for nxt in edges[todo.pop()]:
            if nxt not in seen:
                seen.add(nxt)
                todo.append(nxt)
    return seen


@settings(max_examples=150, deadline=None)
@given(edges=graphs())
def test_act_order_puts_dependencies_first_and_every_cycle_is_reported(edges):
    graph = DependencyGraph({n: {DEPENDS_ON: ",".join(deps)} for n, deps in edges.items()})
    reach = {n: reaches(edges, n) for n in edges}
    in_cycle = {(a, b) for a in edges for b in reach[a] if a != b and a in reach[b]}
    cycles = {n: set(c) for c in graph.cycles for n in c}
    for a, deps in edges.items():
        for b in deps:
            if a == b:
                continue  # a container naming itself is no dependency
            if (a, b) in in_cycle:
                assert graph.same_cycle(a, b) and b in cycles[a]
                assert graph.depth(a) == graph.depth(b)  # no order inside a cycle
            else:
                assert graph.depth(a) > graph.depth(b), (a, b)
    # A reported cycle is really one: each of its members reaches every other.
    for cycle in graph.cycles:
        assert len(cycle) > 1
        for a in cycle:
            assert set(cycle) - {a} <= reach[a]
    assert sum(len(c) for c in graph.cycles) == len({a for a, _ in in_cycle})


def test_a_chain_of_ten_thousand_needs_no_recursion():
    n = 10_000
    graph = DependencyGraph({f"c{i}": {DEPENDS_ON: f"c{i - 1}" if i else ""} for i in range(n)})
    assert graph.depth(f"c{n - 1}") == n - 1 and graph.cycles == ()


def test_containers_in_a_cycle_are_healed_and_the_cycle_is_reported_once(tmp_path, caplog):
    loop = make_app(
        tmp_path, restart={"cooldown": "60s", "max_concurrent": 10}, storm={"threshold": 100}
    )
    loop.engine.add("a", health="unhealthy", labels={**ON, DEPENDS_ON: "b"})
    loop.engine.add("b", health="unhealthy", labels={**ON, DEPENDS_ON: "a"})
    loop.engine.add("c", health="unhealthy", labels={**ON, DEPENDS_ON: "a"})
    with caplog.at_level(logging.WARNING, "guardian.dependencies"):
        loop.healer.sweep()
        loop.clock.advance(1)
        loop.healer.sweep()
    # a and b wait for nobody; c waits for a, which is in a cycle but still a dependency.
    assert sorted(loop.restarted()) == ["a", "b"]
    [warning] = [r for r in caplog.records if "dependency cycle" in r.getMessage()]
    assert warning.guardian_fields["cycle"] == "a,b"  # type: ignore[attr-defined]
