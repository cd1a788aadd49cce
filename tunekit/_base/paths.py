"""What stands in the way of creating a user-named path, so the error can name it.

``mkdir(parents=True)`` under a regular file fails with "[Errno 17] File exists: '<the file>'"
(or ENOTDIR), which names neither the path being created nor what to do: every writer of a
path the user gives (records, trial logs, committed records, the cache directory) says instead
which file is in the way.
"""

from __future__ import annotations

import os
from pathlib import Path

__all__ = ["file_in_the_way"]


def file_in_the_way(path: str | os.PathLike[str]) -> Path | None:
    """The existing non-directory among ``path``'s parents that keeps ``path`` from being created, else None.

    The one nearest the root: below it nothing can exist. None as well where a parent cannot
    be looked at (EACCES): then the write itself reports what it meets.
    """
    for parent in reversed(Path(path).parents):
        try:
            if parent.exists() and not parent.is_dir():
                return parent
        except OSError:
            return None
    return None
