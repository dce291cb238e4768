"""`python -m guardian.wings`: the packages of guardian/ and their wings, each with the first
sentence of its docstring and its modules, read from the files (nothing is imported).
"""

from __future__ import annotations

import ast
import sys
from pathlib import Path

ROOT = Path(__file__).parent
LIMIT = 15  # modules of its own a package may hold (docs/architecture.md "The wings")


def first_sentence(path: Path) -> str:
    """The docstring's first sentence, on one line; "" when the file has none."""
    doc = ast.get_docstring(ast.parse(path.read_text(encoding="utf-8"))) or ""
    text = " ".join(doc.split())
    end = text.find(". ")
    return text if end < 0 else text[: end + 1]


def modules(package: Path) -> list[str]:
    """The package's own modules, without __init__ and without its subpackages' modules."""
    return sorted(p.stem for p in package.glob("*.py") if p.stem not in {"__init__", "__main__"})


def packages(root: Path = ROOT) -> list[Path]:
    """Every package under `root`, parents before their wings."""
    found = [p.parent for p in root.rglob("__init__.py") if "__pycache__" not in p.parts]
    return sorted(found, key=lambda p: p.relative_to(root.parent).parts)


def describe(root: Path = ROOT) -> str:
    lines = []
    for package in packages(root):
        name = package.relative_to(root.parent).as_posix() + "/"
        depth = len(package.relative_to(root).parts)
        own = modules(package)
        lines.append(f"{'  ' * depth}{name}  ({len(own)} modules)")
        lines.append(f"{'  ' * depth}  {first_sentence(package / '__init__.py')}")
        if own:
            lines.append(f"{'  ' * depth}  " + ", ".join(own))
    return "\n".join(lines)


if __name__ == "__main__":
    sys.stdout.write(describe() + "\n")
