"""An exclusive, non-blocking lock on a file itself, not on a lock file beside it.

A lock file beside the real path is not enough: a symlink can be followed to the real path,
but a hard link is a second real path to the same file, so two searches naming one log by its
two links would take two locks and write it at once. A lock taken on the file (``flock`` on a
descriptor of it) belongs to the file, whatever path opened it: symlinks, hard links, bind
mounts and ``..`` spellings all meet on it. It also leaves nothing beside the file, where a
lock file would stay after every search (and beside every file refused as no trial log).

``flock`` is advisory: readers (``tunekit records``, an editor) are not kept out, only another
locker. It is released when the holder's process dies, so a killed search never leaves its log
locked. On Windows, which has no ``flock`` and whose byte-range locks would keep readers out,
the lock is a ``filelock`` file beside the real file (removed on release there);
hard links to one log are not told apart on Windows.
"""

from __future__ import annotations

import contextlib
import errno
import os
import sys
from collections.abc import Callable, Iterator
from pathlib import Path

import filelock

__all__ = ["Release", "lock_file", "locked_directory"]

Release = Callable[[], None]


if sys.platform == "win32":  # pragma: no cover - tested on POSIX only
    import filelock

    @contextlib.contextmanager
    def locked_directory(path: Path, name: str) -> Iterator[None]:
        """Hold an exclusive lock for ``name`` in directory ``path``, waiting for it: a lock file beside ``name``."""
        with filelock.FileLock(os.path.join(os.path.realpath(path), f".{name}.lock")):
            yield

    def lock_file(path: Path) -> Release | None:
        """Lock the file at ``path`` (created when missing) without waiting; None while another holder has it."""
        lock = filelock.FileLock(os.path.realpath(path) + ".lock")
        try:
            lock.acquire(timeout=0)
        except filelock.Timeout:
            return None
        return lock.release

else:
    import fcntl

    _CONTENDED = frozenset({errno.EACCES, errno.EAGAIN, errno.EWOULDBLOCK})

    @contextlib.contextmanager
    def locked_directory(path: Path, name: str) -> Iterator[None]:
        """Hold an exclusive lock on the directory ``path`` (for its file ``name``), waiting for it.

        For a file replaced by renaming (a committed record): a lock on the file itself stays
        with the inode the rename unlinks, so the directory, which outlives every rename, is
        locked instead. Nothing is created in it, except where directories cannot be locked (NFS).
        """
        fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
        try:
            held: contextlib.AbstractContextManager[object] = contextlib.nullcontext()
            try:
                fcntl.flock(fd, fcntl.LOCK_EX)
            except OSError:
                # NFS emulates flock with byte-range locks, which a descriptor of a directory (open
                # read-only) cannot take: a lock file beside the file is the lock there.
                held = filelock.FileLock(os.path.join(path, f".{name}.lock"))
            with held:
                yield
        finally:
            with contextlib.suppress(OSError):
                fcntl.flock(fd, fcntl.LOCK_UN)  # explicitly: a child forked meanwhile shares the descriptor's lock
            os.close(fd)

    def lock_file(path: Path) -> Release | None:
        """Lock the file at ``path`` (created when missing) without waiting; None while another holder has it."""
        # Read-write: NFS emulates flock with byte-range locks, and an exclusive one needs a descriptor open
        # for writing. 0o666: the umask decides, as for open(path, "a").
        fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o666)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError as exc:
            os.close(fd)
            if exc.errno in _CONTENDED:
                return None
            raise

        released = False

        def release() -> None:
            nonlocal released
            if released:  # a second close would unlock and close whatever file has the number since
                return
            released = True
            try:
                # Unlocked explicitly: a child forked while the lock was held (a process-isolated
                # worker) shares this descriptor's lock, and closing ours alone would leave it held.
                fcntl.flock(fd, fcntl.LOCK_UN)
            finally:
                os.close(fd)

        return release
