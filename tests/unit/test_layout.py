"""The house's size rules (issue 54, docs/architecture.md "The wings"): no package of guardian/
holds more than 15 modules of its own, and every function is at most 60 lines or says why on
the line above its `def` (`# Long: ...`). `python -m guardian.wings` prints what is checked."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from guardian import wings

GUARDIAN = Path(wings.__file__).parent
MAX_LINES = 60


def long_functions(root: Path) -> list[str]:
    """Every function over MAX_LINES (def to last line) without a `# Long:` line above it."""
    found = []
    for path in sorted(root.rglob("*.py")):
        lines = path.read_text(encoding="utf-8").splitlines()
        for node in ast.walk(ast.parse("\n".join(lines))):
            if not isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                continue
            length = (node.end_lineno or node.lineno) - node.lineno + 1
            first = min([node.lineno, *(d.lineno for d in node.decorator_list)])
            above = lines[first - 2].strip() if first > 1 else ""
            if length > MAX_LINES and not above.startswith("# Long: "):
                found.append(f"{path.relative_to(root.parent)}:{node.lineno} {node.name} {length}")
    return found


def test_no_package_holds_more_than_fifteen_modules_of_its_own() -> None:
    crowded = {
        p.relative_to(GUARDIAN.parent).as_posix(): len(wings.modules(p))
        for p in wings.packages(GUARDIAN)
        if len(wings.modules(p)) > wings.LIMIT
    }
    assert crowded == {}


def test_every_function_is_at_most_sixty_lines_or_says_why() -> None:
    assert long_functions(GUARDIAN) == []


def test_the_size_rule_finds_a_long_function_and_takes_a_reason(tmp_path: Path) -> None:
    body = "".join(f"    x{i} = {i}\n" for i in range(MAX_LINES))
    (tmp_path / "pkg").mkdir()
    (tmp_path / "pkg" / "m.py").write_text(f"def long():\n{body}")
    assert long_functions(tmp_path / "pkg") == [f"pkg/m.py:1 long {MAX_LINES + 1}"]
    (tmp_path / "pkg" / "m.py").write_text(f"# Long: one row per metric\ndef long():\n{body}")
    assert long_functions(tmp_path / "pkg") == []


def test_every_package_says_what_lives_there() -> None:
    silent = [
        p.relative_to(GUARDIAN.parent).as_posix()
        for p in wings.packages(GUARDIAN)
        if not wings.first_sentence(p / "__init__.py")
    ]
    assert silent == []


@pytest.mark.parametrize("wing", ["service/healing", "service/watchers", "service/state"])
def test_the_map_names_each_wing_with_its_modules(wing: str) -> None:
    text = wings.describe(GUARDIAN)
    assert f"guardian/{wing}/" in text
    for module in wings.modules(GUARDIAN / wing):
        assert module in text


def test_every_file_a_comment_cites_is_in_the_repository() -> None:
    """A comment that cites a document (`docs/design.md rule 12`) cites one the repository has;
    a bare `DESIGN n` names none."""
    import re

    repo = GUARDIAN.parent
    cited = re.compile(r"(?<![\w/])((?:docs|bench|monitoring|systemd|examples)/[\w./-]+\.\w+)")
    missing, bare = [], []
    for path in sorted([*GUARDIAN.rglob("*.py"), *(repo / "tests").rglob("*.py")]):
        text = path.read_text(encoding="utf-8")
        where = path.relative_to(repo)
        bare += [f"{where}: {m}" for m in re.findall(r"\bDESIGN \d+", text)]
        missing += [
            f"{where}: {m}" for m in cited.findall(text) if not (repo / m.rstrip(".")).exists()
        ]
    assert bare == []
    assert missing == []
