"""GET /badge/<name>.svg: a container's condition as a small SVG in the shields.io shape (flat,
two boxes: its name and its state), for a README or a wiki. No token: only the containers
`page.badges` names have one, and any other name is the very 404 of a path that does not exist.

The path is hostile: only a name Docker could give a container is looked up, and the SVG
carries it as escaped text. Text widths are estimated from the characters; no font is loaded.
"""

from __future__ import annotations

import hashlib
import re
from html import escape

from guardian.entrypoints.http_server import Handler, Request, Response, Routes
from guardian.readside import badges
from guardian.readside.badges import Badges

PREFIX = "/badge/"
SUFFIX = ".svg"
# Docker's rule for a container name ([a-zA-Z0-9][a-zA-Z0-9_.-]+), bounded.
NAME = re.compile(r"[a-zA-Z0-9][a-zA-Z0-9_.-]{0,254}")
SVG = "image/svg+xml"
# A README's viewer (GitHub's image proxy, a browser) keeps it a minute, as the page's reads.
CACHE = "max-age=60, s-maxage=60"
LABEL_COLOUR = "#555"
# White text on each reaches 4.5:1 (WCAG AA).
COLOURS = {
    badges.HEALTHY: "#2e7d32",
    badges.UNHEALTHY: "#c62828",
    badges.RESTARTING: "#8a5a00",
    badges.STARTING: "#0e7490",
    badges.STOPPED: "#616161",
    badges.MAINTENANCE: "#1565c0",
    badges.HELD_BACK: "#b45309",
    badges.UNKNOWN: "#616161",
}
# Widths at Verdana 11px, in pixels, by kind of character: a close estimate, not a measure.
NARROW, WIDE, CAPITAL, OTHER = frozenset("fijlrt.,:;!|'-_ "), frozenset("mwMW"), 7.5, 6.5
PADDING = 10


def text_width(text: str) -> int:
    """The estimated width of `text` in the badge's font."""
    total = 0.0
    for ch in text:
        if ch in NARROW:
            total += 3.8
        elif ch in WIDE:
            total += 10.0
        elif ch.isupper():
            total += CAPITAL
        else:
            total += OTHER
    return round(total)


def _text(x: float, escaped: str) -> str:
    """Text centred on x with its shadow one pixel below (the shadow hidden from readers)."""
    shadow = 'fill="#010101" fill-opacity=".3" aria-hidden="true"'
    return f'<text x="{x}" y="15" {shadow}>{escaped}</text><text x="{x}" y="14">{escaped}</text>'


def render(label: str, state: str) -> bytes:
    """The badge: `label` (escaped, whatever it holds) beside `state` on its colour."""
    lw, sw = text_width(label) + PADDING, text_width(state) + PADDING
    width = lw + sw
    colour = COLOURS.get(state, COLOURS[badges.UNKNOWN])
    lab, st = escape(label, quote=True), escape(state, quote=True)
    return (
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="20" role="img" '
        f'aria-label="{lab}: {st}"><title>{lab}: {st}</title>'
        '<linearGradient id="s" x2="0" y2="100%"><stop offset="0" stop-color="#bbb" '
        'stop-opacity=".1"/><stop offset="1" stop-opacity=".1"/></linearGradient>'
        f'<clipPath id="r"><rect width="{width}" height="20" rx="3" fill="#fff"/></clipPath>'
        f'<g clip-path="url(#r)"><rect width="{lw}" height="20" fill="{LABEL_COLOUR}"/>'
        f'<rect x="{lw}" width="{sw}" height="20" fill="{colour}"/>'
        f'<rect width="{width}" height="20" fill="url(#s)"/></g>'
        '<g fill="#fff" text-anchor="middle" font-family="Verdana,Geneva,DejaVu Sans,sans-serif" '
        'font-size="11">'
        f"{_text(lw / 2, lab)}{_text(lw + sw / 2, st)}</g></svg>"
    ).encode()


def name_of(path: str) -> str | None:
    """The container name a badge's path asks for; None for anything Docker could not name."""
    if not path.startswith(PREFIX) or not path.endswith(SUFFIX):
        return None
    name = path[len(PREFIX) : -len(SUFFIX)]
    return name if NAME.fullmatch(name) else None


def not_found() -> Response:
    """The one answer for a path that is no badge: the router's own for a path it lacks."""
    return Response.error(404, "no such path")


def badge_handler(reader: Badges) -> Handler:
    def handle(request: Request) -> Response:
        if request.method not in ("GET", "HEAD"):
            return Response.error(405, "method not allowed; use GET", {"Allow": "GET, HEAD"})
        name = name_of(request.path)
        state = reader.state(name) if name is not None else None
        if name is None or state is None:
            return not_found()
        body = render(name, state)
        etag = '"' + hashlib.sha256(body).hexdigest()[:20] + '"'
        headers = {"Cache-Control": CACHE, "ETag": etag}
        if etag in request.headers.get("if-none-match", ""):
            return Response(304, b"", SVG, headers)
        return Response(200, body, SVG, headers)

    return handle


def mount_badges(routes: Routes, reader: Badges) -> None:
    routes.mount(PREFIX, badge_handler(reader))
