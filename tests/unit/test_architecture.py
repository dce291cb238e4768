"""The layout's rules that import-linter cannot state: no import cycle anywhere in guardian/ and
no import up or across the layers, imports under `if TYPE_CHECKING:` included (grimp reads
every import statement)."""

from __future__ import annotations

import grimp


def import_cycles(graph: grimp.ImportGraph, package: str) -> list[list[str]]:
    """Every strongly connected group of two or more modules of `package` (Tarjan)."""
    modules = sorted(m for m in graph.modules if m == package or m.startswith(package + "."))
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    cycles: list[list[str]] = []

    def visit(module: str) -> None:
        index[module] = low[module] = len(index)
        stack.append(module)
        on_stack.add(module)
        for imported in sorted(graph.find_modules_directly_imported_by(module)):
            if imported not in modules:
                continue
            if imported not in index:
                visit(imported)
                low[module] = min(low[module], low[imported])
            elif imported in on_stack:
                low[module] = min(low[module], index[imported])
        if low[module] == index[module]:
            group = []
            while True:
                member = stack.pop()
                on_stack.discard(member)
                group.append(member)
                if member == module:
                    break
            if len(group) > 1:
                cycles.append(sorted(group))

    for module in modules:
        if module not in index:
            visit(module)
    return cycles


def test_guardian_has_no_import_cycle_type_checking_imports_included() -> None:
    graph = grimp.build_graph("guardian", exclude_type_checking_imports=False)
    assert import_cycles(graph, "guardian") == []


def test_the_cycle_finder_sees_a_cycle_hidden_behind_type_checking() -> None:
    graph = grimp.ImportGraph()
    for module in ("pkg", "pkg.store", "pkg.outbox", "pkg.core"):
        graph.add_module(module)
    graph.add_import(importer="pkg.store", imported="pkg.outbox")
    graph.add_import(importer="pkg.outbox", imported="pkg.store")  # the TYPE_CHECKING one
    graph.add_import(importer="pkg.store", imported="pkg.core")
    assert import_cycles(graph, "pkg") == [["pkg.outbox", "pkg.store"]]


def test_no_test_module_imports_another() -> None:
    """Shared test helpers live in helper modules (tests/app.py, fakes.py, see_more.py, ...)."""
    graph = grimp.build_graph("tests")

    def is_test(module: str) -> bool:
        return module.rsplit(".", 1)[-1].startswith("test_")

    imports = sorted(
        (m, imported)
        for m in graph.modules
        if is_test(m)
        for imported in graph.find_modules_directly_imported_by(m)
        if is_test(imported)
    )
    assert imports == []


# The folders are the layers, highest first (pyproject.toml's layers contract): a module may
# import its own layer's or lower ones', never a higher one's. Layers in one tuple must not
# import each other.
LAYERS: tuple[tuple[str, ...], ...] = (
    ("entrypoints",),
    ("bootstrap",),
    ("runtime",),
    ("readside",),
    ("config",),
    ("service", "adapters"),
    ("ports",),
    ("logs",),
    ("core",),
)


def upward_imports(
    graph: grimp.ImportGraph, package: str, layers: tuple[tuple[str, ...], ...]
) -> list[tuple[str, str]]:
    """(importer, imported) for each import of `package` that goes up a layer or across one."""
    rank = {f"{package}.{name}": (i, name) for i, row in enumerate(layers) for name in row}

    def layer(module: str) -> tuple[int, str] | None:
        parts = module.split(".")
        return rank.get(".".join(parts[:2]))

    found = []
    for module in sorted(graph.modules):
        mine = layer(module)
        if mine is None:
            continue
        for imported in sorted(graph.find_modules_directly_imported_by(module)):
            theirs = layer(imported)
            if theirs is None or theirs[1] == mine[1]:
                continue
            if theirs[0] <= mine[0]:  # a higher layer, or a sibling of the same row
                found.append((module, imported))
    return found


def test_guardian_imports_only_down_the_layers_type_checking_imports_included() -> None:
    graph = grimp.build_graph("guardian", exclude_type_checking_imports=False)
    assert upward_imports(graph, "guardian", LAYERS) == []


def test_the_layer_walk_sees_an_upward_and_a_sideways_import() -> None:
    graph = grimp.ImportGraph()
    for module in ("pkg.readside.changes", "pkg.service.healer", "pkg.adapters.store"):
        graph.add_module(module)
    graph.add_import(importer="pkg.service.healer", imported="pkg.readside.changes")
    graph.add_import(importer="pkg.adapters.store", imported="pkg.service.healer")
    graph.add_import(importer="pkg.readside.changes", imported="pkg.service.healer")  # down: fine
    layers = (("readside",), ("service", "adapters"))
    assert upward_imports(graph, "pkg", layers) == [
        ("pkg.adapters.store", "pkg.service.healer"),
        ("pkg.service.healer", "pkg.readside.changes"),
    ]
