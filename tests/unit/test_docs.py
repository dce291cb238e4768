"""The documentation is a checked artefact: README.md and docs/*.md link only to files and
headings that exist, and docs/ documents every config key and every label Guardian reads.

A new key in the schema or a new label constant under guardian/ without a line in docs/ fails
here, and so does a heading renamed under a link that points at it."""

from __future__ import annotations

import ast
import importlib.util
import re
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml

from guardian.config import SCHEMA
from guardian.core.labels import AUTOHEAL
from guardian.core.relations.orchestrators import ORCHESTRATORS

REPO = Path(__file__).resolve().parents[2]
DOCS = REPO / "docs"

# Fenced code blocks: nothing in them is a heading or a link.
FENCE = re.compile(r"^(```|~~~).*?^\1[^\n]*$", re.M | re.S)
HEADING = re.compile(r"^(#{1,6})[ \t]+(.+?)[ \t]*#*[ \t]*$", re.M)
# [text](target) and ![alt](target); a target ends at whitespace or ")".
LINK = re.compile(r"!?\[[^\]]*\]\(\s*<?([^)\s>]+)>?(?:\s+\"[^\"]*\")?\s*\)")
INLINE_CODE = re.compile(r"`[^`\n]*`")
EXTERNAL = re.compile(r"^[a-z][a-z0-9+.-]*:", re.I)  # https:, mailto:, ...
# Documents linked before they exist: none (a link to a missing file is a dead link).
PENDING: set[Path] = set()


def documents() -> list[Path]:
    return [REPO / "README.md", *sorted(DOCS.glob("*.md"))]


def prose(text: str) -> str:
    """The text outside fenced code blocks."""
    return FENCE.sub("", text)


def slug(heading: str) -> str:
    """GitHub's anchor for a heading: its rendered text lower-cased, punctuation dropped
    (letters, digits, spaces, '-' and '_' stay), each space a '-'."""
    text = re.sub(r"!?\[([^\]]*)\]\([^)]*\)", r"\1", heading)  # a link keeps its text
    text = re.sub(r"<[^>]+>", "", text)  # inline HTML
    text = text.strip().lower()
    text = "".join(ch for ch in text if ch.isalnum() or ch in " -_")
    return text.replace(" ", "-")


def anchors(text: str) -> set[str]:
    """Every anchor of a Markdown text, duplicates numbered -1, -2, ... as GitHub does."""
    seen: dict[str, int] = {}
    found: set[str] = set()
    for match in HEADING.finditer(prose(text)):
        base = slug(match.group(2))
        count = seen.get(base, 0)
        seen[base] = count + 1
        found.add(base if count == 0 else f"{base}-{count}")
    found |= set(re.findall(r"<a\s+(?:id|name)=\"([^\"]+)\"", text))
    return found


def links(text: str) -> Iterator[str]:
    for match in LINK.finditer(INLINE_CODE.sub("", prose(text))):
        yield match.group(1)


def dead_links(path: Path) -> list[str]:
    """The links of one document that lead nowhere: a missing file or a missing heading."""
    dead = []
    for target in links(path.read_text()):
        if EXTERNAL.match(target):
            continue
        file_part, _, anchor = target.partition("#")
        dest = (path.parent / file_part).resolve() if file_part else path
        if not dest.exists() and dest in PENDING:
            continue
        if not dest.exists():
            dead.append(f"{target}: no file {dest.relative_to(REPO)}")
            continue
        if anchor and dest.suffix == ".md" and anchor not in anchors(dest.read_text()):
            dead.append(f"{target}: no heading #{anchor} in {dest.relative_to(REPO)}")
    return dead


def docs_text() -> str:
    return "\n".join(p.read_text() for p in sorted(DOCS.glob("*.md")))


def config_keys() -> set[str]:
    """Every `section.key`: the schema's and config.yaml's (which documents each with its
    default)."""
    keys = {f"{section}.{key}" for section, entries in SCHEMA.items() for key in entries}
    shipped = yaml.safe_load((REPO / "config.yaml").read_text())
    for section, entries in shipped.items():
        keys |= {f"{section}.{key}" for key in (entries or {})}
    return keys


# Strings under guardian/ shaped like a label that are none: file names.
NOT_LABELS = {"guardian.db"}
LABEL_SHAPE = re.compile(r"(guardian|com\.docker\.compose|autoheal)(\.[a-z_]+)+")


def label_constants() -> set[str]:
    """Every label Guardian reads: each string literal under guardian/ shaped like a
    "guardian.*" or Compose label that is no logger's or module's name, and the labels by which
    orchestrators are told apart."""
    labels = set()
    for path in (REPO / "guardian").rglob("*.py"):
        tree = ast.parse(path.read_text())
        loggers = {
            id(arg)
            for call in ast.walk(tree)
            if isinstance(call, ast.Call)
            and getattr(call.func, "attr", getattr(call.func, "id", None)) == "getLogger"
            for arg in call.args
        }
        for node in ast.walk(tree):
            value = node.value if isinstance(node, ast.Constant) else None
            if (
                isinstance(value, str)
                and LABEL_SHAPE.fullmatch(value)
                and id(node) not in loggers
                and value not in NOT_LABELS
                and not is_module(value)
            ):
                labels.add(value)
    labels |= {label for o in ORCHESTRATORS for label in (o.marker, o.handle)}
    labels |= {AUTOHEAL}  # docker-autoheal's own opt-in and opt-out label
    return labels


def is_module(name: str) -> bool:
    try:
        return importlib.util.find_spec(name) is not None
    except ModuleNotFoundError:
        return False


def is_documented(name: str, text: str) -> bool:
    """`name` appears in backticks on its own (`x.y`, `x.y=...`, `x.y: ...`), not only as the
    start of a longer name."""
    return re.search(r"`" + re.escape(name) + r"(?![A-Za-z0-9_.])", text) is not None


@pytest.mark.parametrize("path", documents(), ids=lambda p: str(p.relative_to(REPO)))
def test_every_relative_link_and_anchor_resolves(path: Path) -> None:
    assert dead_links(path) == []


def test_the_documents_exist_and_the_index_lists_every_one() -> None:
    index = (DOCS / "index.md").read_text()
    others = {p.name for p in DOCS.glob("*.md")} - {"index.md"}
    assert others, "docs/ holds no documents"
    assert sorted(n for n in others if f"({n}" not in index) == []


def test_every_config_key_is_documented() -> None:
    text = docs_text()
    assert sorted(k for k in config_keys() if not is_documented(k, text)) == []


def test_every_label_guardian_reads_is_documented() -> None:
    labels = label_constants()
    assert {"guardian.enable", "guardian.scope", "guardian.probe.http"} <= labels
    assert {"com.docker.compose.depends_on", "com.docker.swarm.task.id"} <= labels
    assert not labels & {"guardian.healer", "guardian.entrypoints.page", "guardian.db"}
    text = docs_text()
    assert sorted(label for label in labels if not is_documented(label, text)) == []


# The checks themselves must be able to fail.
def test_the_anchor_rules_are_githubs() -> None:
    assert slug("Security: who can see what") == "security-who-can-see-what"
    assert slug("Checking the channels: `guardian notify test`") == (
        "checking-the-channels-guardian-notify-test"
    )
    assert slug("Apprise (ntfy, Gotify, Telegram, Teams, Matrix, ...)") == (
        "apprise-ntfy-gotify-telegram-teams-matrix-"
    )
    assert anchors("# Limits\n## Limits\n```\n# not a heading\n```\n## Limits\n") == {
        "limits", "limits-1", "limits-2"
    }  # fmt: skip


def test_a_dead_link_or_anchor_is_found(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(f"{__name__}.REPO", tmp_path)
    (tmp_path / "a.md").write_text(
        "# Here\n[ok](#here) [gone](#there) [file](b.md#x) `[x](no.md)`\n"
    )
    (tmp_path / "b.md").write_text("# Y\n")
    assert dead_links(tmp_path / "a.md") == [
        "#there: no heading #there in a.md",
        "b.md#x: no heading #x in b.md",
    ]


def test_an_undocumented_name_is_found() -> None:
    assert is_documented("restart.cooldown", "| `restart.cooldown` | `300s` |")
    assert is_documented("guardian.probe.http", "`guardian.probe.http=http://:8080/`")
    assert not is_documented("guardian.probe", "`guardian.probe.http=...`")
    assert not is_documented("notify.timeout", "`notify.timeouts` and notify.timeout")
