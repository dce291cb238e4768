"""Adapters: the ports filled with real technology (Docker, SQLite, the system clock)."""
