"""Guardian's SQLite store: one Database (db.py) shared by the store, its outbox and retention."""
