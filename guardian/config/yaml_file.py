"""The config file read as YAML, within bounds: at most 1 MiB, and no alias that expands a small
file into a huge document. Errors are one line, naming the file.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml


class YamlError(Exception):
    """The file cannot be read as a bounded YAML document; str() is one line."""


MAX_CONFIG_BYTES = 1024 * 1024
# Nodes of the document with every alias expanded: a real config has a few hundred, an alias
# bomb ("billion laughs") billions, which repr() and the key checks would walk one by one.
MAX_CONFIG_NODES = 10_000


class _BoundedLoader(yaml.SafeLoader):
    """SafeLoader that refuses a document whose aliases expand beyond MAX_CONFIG_NODES, before
    anything is constructed from it."""

    def get_single_node(self) -> yaml.Node | None:
        node = super().get_single_node()
        if node is not None:
            _expanded_size(node, {}, set())
        return node


def _expanded_size(node: yaml.Node, sizes: dict[int, int], open_: set[int]) -> int:
    """How many nodes `node` stands for with its aliases expanded; each distinct node is
    counted once (`sizes`), so this costs what the file holds, not what it expands to."""
    key = id(node)
    if key in sizes:
        return sizes[key]
    if key in open_:
        raise YamlError("invalid YAML: an alias refers to a node that contains it")
    open_.add(key)
    size = 1
    if isinstance(node, yaml.SequenceNode):
        size += sum(_expanded_size(child, sizes, open_) for child in node.value)
    elif isinstance(node, yaml.MappingNode):
        for k, v in node.value:
            size += _expanded_size(k, sizes, open_) + _expanded_size(v, sizes, open_)
    open_.discard(key)
    if size > MAX_CONFIG_NODES:
        raise YamlError(f"invalid YAML: its aliases expand to more than {MAX_CONFIG_NODES} values")
    sizes[key] = size
    return size


def read_yaml(path: Path) -> Any:
    """The document in the file at `path` (None when empty). Raises YamlError."""
    try:
        with path.open("rb") as f:
            raw = f.read(MAX_CONFIG_BYTES + 1)
    except OSError as exc:
        raise YamlError(f"{path}: cannot read: {exc.strerror or exc}") from None
    if len(raw) > MAX_CONFIG_BYTES:
        raise YamlError(
            f"{path}: larger than 1 MiB ({MAX_CONFIG_BYTES} bytes); a config is a few KiB"
        )
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise YamlError(f"{path}: not valid UTF-8 at byte {exc.start}") from None
    loader: _BoundedLoader | None = None
    try:
        loader = _BoundedLoader(text)  # its reader refuses some characters at once
        data = loader.get_single_data()
    except YamlError as exc:
        raise YamlError(f"{path}: {exc}") from None
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f" at line {mark.line + 1}" if mark is not None else ""
        problem = getattr(exc, "problem", None) or "cannot be parsed"
        raise YamlError(f"{path}: invalid YAML{where}: {problem}") from None
    except RecursionError:
        raise YamlError(f"{path}: invalid YAML: nested too deeply") from None
    except (ValueError, OverflowError):
        # PyYAML's scanner lets these escape, e.g. for an escape "\U01000000" out of range.
        raise YamlError(f"{path}: invalid YAML: an escape sequence is out of range") from None
    finally:
        if loader is not None:
            loader.dispose()
    return data
