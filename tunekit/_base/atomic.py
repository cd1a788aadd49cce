"""Atomic file replacement that leaves the file with the mode a plain write would give it."""

from __future__ import annotations

import contextlib
import errno
import os
import secrets
import stat
from pathlib import Path

__all__ = ["write_atomic"]


def write_atomic(path: str | os.PathLike[str], text: str) -> None:
    """Replace ``path`` with ``text`` (UTF-8): a crash leaves the old file or the new, never half.

    The file is written beside ``path``, synced, then renamed over it. It gets the mode the
    file it replaces had, or for a new file the mode ``open(path, "w")`` would give (0666
    less the umask): ``tempfile.mkstemp`` would leave it 0600, unreadable to the CI container
    or the colleague a committed file is for.
    """
    # Through a symlink, as open(path, "w") writes: renaming over the link would replace it with a file.
    path = Path(os.path.realpath(path))
    if path.is_dir():  # else a temporary file is written in its parent and the rename fails naming it
        raise IsADirectoryError(errno.EISDIR, f"{os.strerror(errno.EISDIR)}; give a file path in it", str(path))
    tmp, fd = _create_beside(path)
    try:
        with os.fdopen(fd, "wb") as f:
            with contextlib.suppress(FileNotFoundError):
                os.chmod(tmp, stat.S_IMODE(os.stat(path).st_mode))
            f.write(text.encode("utf-8"))
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise


def _create_beside(path: Path) -> tuple[Path, int]:
    """A new, exclusively created temporary file in ``path``'s directory, and its descriptor.

    Created with mode 0666 so that the kernel applies the umask (and any default ACL of the
    directory) exactly as it does for ``open(path, "w")``; reading the umask would mean
    setting it, which races with other threads.
    """
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_BINARY", 0)
    while True:
        tmp = path.with_name(f".{path.name}.{secrets.token_hex(6)}.tmp")
        try:
            return tmp, os.open(tmp, flags, 0o666)
        except FileExistsError:  # a name another writer holds: draw another
            continue
