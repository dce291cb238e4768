"""decide()'s table of rules: the code's `RULES` and the table in docs/restarts.md are the same
list in the same order, and every rule is a small pure function that refuses or lets through."""

from __future__ import annotations

import re
from pathlib import Path

from guardian.core import policy

DOCS = Path(__file__).resolve().parents[2] / "docs" / "restarts.md"
HEADING = "## The rules of `decide()`, in order"


def documented_rules(text: str) -> list[str]:
    """The first column of the first Markdown table under HEADING, backticks stripped."""
    lines = text.splitlines()
    start = lines.index(HEADING)
    names: list[str] = []
    for line in lines[start + 1 :]:
        if line.startswith("#"):
            break
        if not line.startswith("|"):
            if names:
                break  # the table has ended
            continue
        first = line.split("|")[1].strip()
        if first == "rule" or re.fullmatch(r"-+", first):
            continue  # the header and its rule line
        names.append(first.strip("`"))
    return names


def test_the_rules_table_and_the_docs_table_are_the_same_list() -> None:
    code = [rule.name for rule in policy.RULES]
    docs = documented_rules(DOCS.read_text(encoding="utf-8"))
    assert code == docs


def test_rule_names_are_unique_and_each_rule_says_what_it_refuses() -> None:
    names = [rule.name for rule in policy.RULES]
    assert len(names) == len(set(names))
    assert all(rule.refuses and "\n" not in rule.refuses for rule in policy.RULES)


def test_documented_rules_reads_the_first_column_in_order() -> None:
    text = "\n".join(
        [
            "# x",
            HEADING,
            "",
            "prose | with a bar",
            "",
            "| rule | what | verdict |",
            "|---|---|---|",
            "| `b` | refuses b | `deny` / `b` |",
            "| `a` | refuses a | `wait` / `a` |",
            "",
            "| `later` | another table | |",
            "## next",
        ]
    )
    assert documented_rules(text) == ["b", "a"]
