"""The page's HTML, from Jinja2 templates with autoescape on: whatever a container wrote is
text in the page, never markup (DESIGN 13). The live stream sends the same parts the page shows.
"""

from __future__ import annotations

from typing import Any

from jinja2 import Environment, PackageLoader, select_autoescape

from guardian.entrypoints.page.model import PageData

# DOM id -> macro of parts.html (and whether it takes `signed`).
PARTS = {
    "part-meta": ("meta", False),
    "part-summary": ("summary", False),
    "part-incidents": ("incidents", True),
    "part-silences": ("silences", True),
    "part-actions": ("actions", False),
    "part-dead": ("dead_letters", False),
}


class Renderer:
    def __init__(self) -> None:
        self.env = Environment(
            loader=PackageLoader("guardian.entrypoints.page", "templates"),
            autoescape=select_autoescape(default=True, default_for_string=True),
            trim_blocks=True,
            lstrip_blocks=True,
        )
        self._parts: Any = self.env.get_template("parts.html").module

    def page(self, name: str, **context: Any) -> bytes:
        return self.env.get_template(name).render(**context).encode()

    def parts(self, d: PageData, signed: bool) -> dict[str, str]:
        """Every part the stream may replace, by DOM id; a row by `row:<container>`, and the
        order of the rows (`rows`: the whole table body, replaced when the set changes)."""
        out: dict[str, str] = {}
        for dom_id, (macro, takes_signed) in PARTS.items():
            render = getattr(self._parts, macro)
            out[dom_id] = str(render(d, signed) if takes_signed else render(d))
        for r in d.rows:
            out[f"row:{r['name']}"] = str(self._parts.row(r))
        out["order"] = "\n".join(r["name"] for r in d.rows)
        out["part-rows"] = str(self._parts.rows(d))
        return out
