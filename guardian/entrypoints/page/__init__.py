"""Guardian's status page at / on http.listen: server-rendered, signed in, live
(docs/status-page.md)."""
