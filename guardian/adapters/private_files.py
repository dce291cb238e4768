"""Files only Guardian's user reads: the store quotes what containers printed (health output,
logs), so the store and the directories made for it are private from the first byte, whichever
component touches the path first (the instance lock, the database, a command).
"""

from __future__ import annotations

import contextlib
import logging
import os
import stat
from pathlib import Path

from guardian.logs import kv

log = logging.getLogger("guardian")

DIR_MODE = 0o700
FILE_MODE = 0o600


def private_dirs(directory: Path) -> None:
    """Create the directories missing up to `directory`, each 0700 whatever the umask.
    Directories that exist are the operator's business and keep their mode."""
    missing = [p for p in (directory, *directory.parents) if not p.exists()]
    for d in reversed(missing):
        with contextlib.suppress(FileExistsError):  # another process made it meanwhile
            d.mkdir(mode=DIR_MODE)
            d.chmod(DIR_MODE)


def open_private(path: Path, flags: int = os.O_RDWR) -> int:
    """Open `path` (a file descriptor), creating it and its missing directories private
    (0600 in 0700) whatever the umask; an existing file keeps its mode (the operator's choice).
    Raises OSError."""
    private_dirs(path.parent)
    try:
        fd = os.open(path, flags | os.O_CREAT | os.O_EXCL, FILE_MODE)
    except FileExistsError:
        return os.open(path, flags)
    try:
        os.fchmod(fd, FILE_MODE)  # O_CREAT's mode passes through the umask, which only narrows
    except OSError:
        os.close(fd)
        raise
    return fd


def private_file(path: Path) -> None:
    """Create `path` empty and private unless it exists. SQLite gives its -wal and -shm files
    the database file's mode."""
    os.close(open_private(path, os.O_WRONLY))


def readable_by_others(path: Path) -> str:
    """`0644` when group or others may read or write `path`, else "" (also when it is absent)."""
    try:
        mode = stat.S_IMODE(path.stat().st_mode)
    except OSError:
        return ""
    return f"{mode:04o}" if mode & (stat.S_IRWXG | stat.S_IRWXO) else ""


def warn_if_readable(path: Path) -> None:
    """Once at start: an existing store keeps the mode its operator gave it, but it quotes what
    containers printed, so a mode that lets others read it is said."""
    if mode := readable_by_others(path):
        log.warning(
            "store readable by other users",
            extra=kv(store=str(path), mode=mode, fix=f"chmod 600 {path}"),
        )
