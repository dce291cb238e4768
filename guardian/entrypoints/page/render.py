"""The page's HTML, from Jinja2 templates with autoescape on: whatever a container wrote is
text in the page, never markup (docs/design.md rule 13). The live stream sends the same parts
the page shows.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from itertools import compress, count
from operator import is_not
from typing import Any

from jinja2 import Environment, PackageLoader, select_autoescape
from markupsafe import Markup

from guardian.readside.page import PageData

# The parts drawn from one list of PageData alone: the same list, the same HTML.
PART_INPUT = {
    "incidents": "incidents",
    "silences": "silences",
    "actions": "actions",
    "dead_letters": "dead_letters",
}
# The parts drawn from a few values alone: equal values, the same HTML.
PART_VALUES: dict[str, Callable[[PageData], tuple[Any, ...]]] = {
    "meta": lambda d: (d.version, d.host, d.uptime),
    "summary": lambda d: (
        *(v for k, v in d.summary.items() if k != "updated"),  # the time is not in it
        d.engine_error,
    ),
}
MAX_KEPT_ENTRIES = 5000  # timeline entries' HTML kept by their content
# DOM id -> macro of parts.html (and whether it takes `signed`).
PARTS = {
    "part-meta": ("meta", False),
    "part-summary": ("summary", False),
    "part-incidents": ("incidents", True),
    "part-silences": ("silences", True),
    "part-actions": ("actions", False),
    "part-dead": ("dead_letters", False),
}


def human(iso: str | None) -> str:
    """An ISO time of the views (UTC) as people read it: 2026-12-01 13:45:02 UTC."""
    if not iso:
        return ""
    return str(iso).replace("T", " ").removesuffix("+00:00") + (" UTC" if "+00:00" in iso else "")


@dataclass(frozen=True)
class _Rows:
    """The rows' HTML as last made: `rows` the row dicts it was made from (kept alive, so
    their ids stay theirs), `html` each row's, `by_name` by `row:<container>`, `body` joined."""

    rows: list[dict[str, Any]]
    html: list[str]
    by_name: dict[str, str]
    order: str
    body: str


class Renderer:
    def __init__(self) -> None:
        self.env = Environment(
            loader=PackageLoader("guardian.entrypoints.page", "templates"),
            autoescape=select_autoescape(default=True, default_for_string=True),
            trim_blocks=True,
            lstrip_blocks=True,
        )
        self.env.filters["human"] = human
        self._parts: Any = self.env.get_template("parts.html").module
        self._kept: dict[tuple[str, bool | None], tuple[object, str]] = {}
        self._last: dict[bool, tuple[PageData, dict[str, str]]] = {}
        self._rows: _Rows | None = None
        # An incident's HTML by its view, per audience (an unchanged incident keeps its view),
        # and a timeline entry's by what it shows, so a growing timeline renders only the new.
        self._articles: dict[bool, dict[int, tuple[dict[str, Any], Markup]]] = {}
        self._entries: dict[tuple[Any, ...], Markup] = {}
        # A strip's HTML by its row's container and its view (StripViews shares a view among
        # containers and keeps it for a strip that comes back; the HTML names the container).
        self._strips: dict[tuple[str, int], tuple[dict[str, Any], Markup]] = {}

    def page(self, name: str, **context: Any) -> bytes:
        return self.env.get_template(name).render(**context).encode()

    def _part(self, macro: str, d: PageData, signed: bool | None) -> str:
        """A part's HTML; again the last one when its input is the very same list (a read
        that kept the store's part, see PageReader.read) or its values are equal."""
        source, values = PART_INPUT.get(macro), PART_VALUES.get(macro)
        kept = getattr(d, source) if source else values(d) if values else None
        key = (macro, signed)
        if kept is not None:
            last = self._kept.get(key)
            if last is not None and (last[0] is kept if source else last[0] == kept):
                return last[1]
        if macro == "incidents":
            html = str(self._parts.incidents(d, self._incidents(d, bool(signed))))
        else:
            render = getattr(self._parts, macro)
            html = str(render(d, signed) if signed is not None else render(d))
        if kept is not None:
            self._kept[key] = (kept, html)
        return html

    def _incidents(self, d: PageData, signed: bool) -> list[Markup]:
        """Each open incident's HTML: the last one for the very same view."""
        last, made = self._articles.get(signed, {}), {}
        for i in d.incidents:
            kept = last.get(id(i))
            if kept is None or kept[0] is not i:
                entries = [self._entry(e) for e in i["timeline"]]
                kept = (i, Markup(self._parts.incident(i, signed, entries)))
            made[id(i)] = kept
        self._articles[signed] = made
        return [html for _, html in made.values()]

    def _entry(self, e: dict[str, Any]) -> Markup:
        key = tuple(e.items())
        html = self._entries.get(key)
        if html is None:
            if len(self._entries) >= MAX_KEPT_ENTRIES:
                self._entries.clear()
            html = self._entries[key] = Markup(self._parts.timeline_entry(e))
        return html

    def parts(self, d: PageData, signed: bool) -> dict[str, str]:
        """Every part the page shows and the stream may replace, by DOM id (`part-rows`: the
        whole table body, replaced when the set of containers changes); a row by
        `row:<container>`, and the `order` of the rows. Made once per read: the page and
        every stream share them."""
        last = self._last.get(signed)
        if last is not None and last[0] is d:
            return last[1]
        out: dict[str, str] = {}
        for dom_id, (macro, takes_signed) in PARTS.items():
            out[dom_id] = self._part(macro, d, signed if takes_signed else None)
        rows = self._rows_parts(d.rows)
        out.update(rows.by_name)
        out["order"] = rows.order
        # The macro's text for an empty table.
        out["part-rows"] = rows.body if rows.rows else str(self._parts.rows(d))
        self._last[signed] = (d, out)
        return out

    def _row(self, row: dict[str, Any]) -> str:
        """A row's HTML; its strip's the one made for the very same strip view of the same
        container (the reader hands the same view for a strip that shows the same)."""
        view = row["strip"]
        key = (row["name"], id(view))
        kept = self._strips.get(key)
        if kept is None or kept[0] is not view:
            if len(self._strips) >= MAX_KEPT_ENTRIES:
                self._strips.clear()
            kept = self._strips[key] = (view, Markup(self._parts.strip(row)))
        return str(self._parts.row(row, kept[1]))

    def _rows_parts(self, rows: list[dict[str, Any]]) -> _Rows:
        """The rows' HTML. The reader hands over the very row it handed last time for a
        container whose row did not change (PageReader): its HTML is the last one, found by
        identity; when the set and order stayed, only the changed rows are visited twice."""
        last = self._rows
        if last is not None and len(rows) == len(last.rows):
            changed = list(compress(count(), map(is_not, rows, last.rows)))  # in C
            if not changed:
                return last
            if all(rows[i]["name"] == last.rows[i]["name"] for i in changed):
                html, by_name = list(last.html), dict(last.by_name)
                for i in changed:
                    row = html[i] = self._row(rows[i])
                    by_name[f"row:{rows[i]['name']}"] = row
                self._rows = _Rows(list(rows), html, by_name, last.order, "\n".join(html))
                return self._rows
        kept = {}
        if last is not None:
            kept = {id(r): h for r, h in zip(last.rows, last.html, strict=True)}
        html = [kept.get(id(r)) or self._row(r) for r in rows]
        by_name = {f"row:{r['name']}": h for r, h in zip(rows, html, strict=True)}
        order = "\n".join(r["name"] for r in rows)
        self._rows = _Rows(list(rows), html, by_name, order, "\n".join(html))
        return self._rows
