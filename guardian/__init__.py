"""Guardian: keeps the containers of a Docker host healthy."""

__version__ = "0.1.0"
