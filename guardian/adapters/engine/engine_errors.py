"""Reading a transport error's chain of causes, and saying why the engine's Unix socket refused
Guardian in words an operator can act on: the socket's owner, group and mode, and who Guardian is.
"""

from __future__ import annotations

import grp
import os
import pwd
import stat
from collections.abc import Iterator


def causes(exc: BaseException) -> Iterator[BaseException]:
    """`exc` and everything it was caused by or wraps (urllib3 and requests nest them deeply)."""
    seen: set[int] = set()
    stack: list[BaseException | None] = [exc]
    while stack:
        e = stack.pop()
        if e is None or id(e) in seen:
            continue
        seen.add(id(e))
        yield e
        stack += [e.__cause__, e.__context__, *[a for a in e.args if isinstance(a, BaseException)]]
        reason = getattr(e, "reason", None)
        if isinstance(reason, BaseException):
            stack.append(reason)


def permission_denied(exc: BaseException) -> bool:
    return any(isinstance(e, PermissionError) for e in causes(exc))


def _user(uid: int) -> str:
    try:
        return f"{pwd.getpwuid(uid).pw_name} (uid {uid})"
    except KeyError:
        return f"uid {uid}"


def _group(gid: int, unknown: str = "") -> str:
    try:
        return f"{grp.getgrgid(gid).gr_name} (gid {gid})"
    except KeyError:
        return f"gid {gid}{unknown}"


def socket_denied(path: str) -> str:
    """One line for a permission error on the socket at `path`: what it asks for, who asked,
    and the fix (groups are fixed when a process starts, so the fix needs a restart)."""
    try:
        st = os.stat(path)
    except OSError as exc:
        return f"permission denied on {path} ({exc.strerror or exc})"
    groups = sorted(set(os.getgroups()) | {os.getegid()})
    return (
        f"permission denied on {path} (owner {_user(st.st_uid)}, "
        f"group {_group(st.st_gid, ', which no group here has')}, "
        f"mode {stat.S_IMODE(st.st_mode):04o}); guardian runs as {_user(os.geteuid())} in "
        f"groups {', '.join(_group(g) for g in groups)}: give it the socket's group (gid "
        f"{st.st_gid}: SupplementaryGroups= of the unit, --group-add of a container) and restart it"
    )
