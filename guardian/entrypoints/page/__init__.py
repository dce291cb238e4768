"""Guardian's status page at / on http.listen: server-rendered, signed in, live (README "Status
page")."""
