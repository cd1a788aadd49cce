"""Files in a cache directory a group shares: made so that every member can write them.

A team shares one cache by making its directory group-writable (often setgid, so that new files
get the directory's group). A new file's mode is still the umask's choice, and the usual 022
leaves it writable by its creator alone (SQLite even creates a database 0644 whatever the
umask), so the group's other users could read winners but not store theirs. In a group-writable
directory, tunekit therefore adds group read-write to the files it makes there; only a file's
owner may change its mode, so each process fixes its own files, and a user who meets another's
unwritable file is told the command that fixes it.
"""

from __future__ import annotations

import contextlib
import os
import stat
import sys
from pathlib import Path

if sys.platform != "win32":
    import pwd

__all__ = ["describe_denied", "group_shares", "permission_fix", "share_with_group", "unwritable"]

_GROUP_RW = stat.S_IRGRP | stat.S_IWGRP


def group_shares(directory: Path) -> bool:
    """Whether ``directory`` is group-writable: the sign that a group shares it."""
    try:
        return bool(os.stat(directory).st_mode & stat.S_IWGRP)
    except OSError:
        return False


def share_with_group(path: Path, fd: int | None = None) -> None:
    """Let the group read and write ``path`` when its directory is group-writable and this process owns it.

    ``fd``, when given, is ``path`` opened: its mode is read and changed through it, so the file
    changed is the one opened even if ``path`` was replaced meanwhile (a lock file). Best effort:
    a file that is gone, or that another user owns, is left as it is.
    """
    with contextlib.suppress(OSError):
        if not group_shares(path.parent):
            return
        found = os.stat(path) if fd is None else os.fstat(fd)
        mode = stat.S_IMODE(found.st_mode)
        if found.st_uid == os.geteuid() and mode & _GROUP_RW != _GROUP_RW:
            if fd is None:
                os.chmod(path, mode | _GROUP_RW)
            else:
                os.fchmod(fd, mode | _GROUP_RW)


def unwritable(paths: list[Path]) -> Path | None:
    """The first of ``paths`` (existing files, then their directory) that permissions keep this process from writing.

    None on a file system mounted read-only, where no ``chmod`` would help.
    """
    directory = paths[0].parent
    with contextlib.suppress(OSError, AttributeError):  # no statvfs on Windows
        if os.statvfs(directory).f_flag & os.ST_RDONLY:
            return None
    for path in paths:
        if path.exists() and not os.access(path, os.W_OK):
            return path
    if directory.exists() and not os.access(directory, os.W_OK | os.X_OK):
        return directory
    return None


def describe_denied(path: Path) -> str:
    """``path`` with its mode and owner, as a user needs them to see why it cannot be written."""
    try:
        found = os.stat(path)
    except OSError:
        return str(path)
    owner: str = str(found.st_uid)
    if sys.platform != "win32":
        with contextlib.suppress(KeyError):  # a uid with no name
            owner = pwd.getpwuid(found.st_uid).pw_name
    return f"{path} (mode {stat.S_IMODE(found.st_mode):04o}, owner {owner})"


def permission_fix(directory: Path) -> str:
    """The command that lets a group write everything in a cache directory it shares."""
    return f"chmod -R g+rwX {directory}"
