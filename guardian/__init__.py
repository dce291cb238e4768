"""Guardian: keeps the containers of a Docker host healthy."""

__version__ = "0.1.0"
DISTRIBUTION = "container-guardian"  # its name on PyPI; `guardian` there is another project
