"""Guardian's status page at / on http.listen, the transport only: routes and sessions
(handler, sessions, actions), rendering (render, templates, static) and the live stream's writer
(feed, stream, slots). What the page shows is read in guardian/readside/page.py
(docs/status-page.md)."""
