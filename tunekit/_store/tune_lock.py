"""One process at a time tunes a key: the others wait, then read its winner from the cache.

Eight serving processes started together on a fresh machine would otherwise all tune the same
key at once: eight times the start-up time, each process's timings skewed by the other seven
running on the same device, and eight possibly different winners stored one over another.
With this lock the first one tunes; each of the others, once the lock is free, finds the winner
in the persistent cache. The lock is an OS file lock (``flock``): a process killed while it
holds it releases it, so a waiter never waits on a dead owner.

The lock file is removed when the tune ends, so ``locks/`` holds one file per tune running now
(plus those of processes killed while tuning, which the next tune of the key, the next process
to read the key's stored winner, or ``tunekit cache clear`` removes), not one per key ever
tuned. Removing a locked path is unsafe done naively (``filelock`` keeps its Unix files for that
reason, tox-dev/filelock#574): a process that opened the file before it was removed can lock the
removed file while a third process creates and locks a new one at the same path, and both would
tune. So the holder removes the path *before* it unlocks, and a process that has just locked a
file checks that the path still names that very file (same device and inode); when it does not,
it tries again on the file the path names now. Only a holder ever removes the path, so a
verified holder is the only one. Waiting polls a non-blocking lock, opening the path anew each
time, rather than blocking on a file that may be removed under it. On Windows, where an open
file cannot be removed, ``filelock`` does the same job (it removes the file on release when no
other process has it open).

A cache directory a group shares (group-writable) gets a group-writable ``locks/`` and lock files
its group can open read-write; elsewhere the umask decides, as for any file. A lock file this
process may read but not write (another user's, made by a tunekit that did not share lock files)
is locked read-only: ``flock`` needs no write access on a local file system. One it cannot open
at all, or a ``locks/`` it cannot create files in, is warned about, naming the path and the fix,
and the key is tuned without the lock.
"""

from __future__ import annotations

import errno
import hashlib
import logging
import os
import stat
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager, suppress
from contextvars import ContextVar
from pathlib import Path
from typing import Literal

from tunekit._base.group_share import permission_fix, share_with_group
from tunekit._base.self_call import locked_by_parent
from tunekit._store.cache import PersistentCache

__all__ = ["drop_stale_lock", "free_lock", "lock_path", "sweep_lock_files", "tune_lock"]

_log = logging.getLogger("tunekit.tuner")

_POLL_S = 0.05
"""How often a waiter tries the lock again (filelock's default poll interval)."""

_held: ContextVar[frozenset[Path]] = ContextVar("tunekit_held_tune_locks", default=frozenset())
"""Lock paths the running code's tunes hold: a tune nested inside a tune of the same key must not wait on itself.

A context variable, not a thread-local, so that the prepare hooks a tuning thread runs on a
thread pool (each in a copy of its context) see its locks too."""

Release = Callable[[], None]

_warned: set[Path] = set()
"""Lock directories already warned about: the advice is the same for every key tuned there."""


class LockDenied(OSError):
    """The lock file cannot be opened or created by this process (permissions), so the key cannot be locked."""


@contextmanager
def tune_lock(cache: PersistentCache, device_id: str, tuner: str, key_json: str, timeout_s: float) -> Iterator[bool]:
    """Hold the lock on (device, tuner, key) while the block runs; yields whether it is held.

    Not held (False) when the cache directory takes no lock file, or after ``timeout_s`` of
    waiting: the caller then tunes without it, as it would have without this lock. Code that
    runs for the tune holding it (a candidate or prepare hook that tunes the same key through
    another tunable set of the same tuner name) goes on at once, in a spawned worker of the
    process holding it too.
    """
    path = lock_path(cache.directory, device_id, tuner, key_json)
    if path in _held.get() or locked_by_parent(device_id, tuner, key_json):
        yield True
        return
    release = _acquire(path, tuner, key_json, device_id, timeout_s)
    if release is None:
        yield False
        return
    token = _held.set(_held.get() | {path})
    try:
        yield True
    finally:
        _held.reset(token)
        release()


def lock_directory(cache_directory: Path) -> Path:
    """Where the tune locks of a cache directory live."""
    return cache_directory / "locks"


def lock_path(cache_directory: Path, device_id: str, tuner: str, key_json: str) -> Path:
    """The lock file of (device, tuner, key) in a cache directory."""
    digest = hashlib.sha256("\x00".join((device_id, tuner, key_json)).encode()).hexdigest()[:40]
    return lock_directory(cache_directory) / f"{digest}.lock"


def _make_lock_directory(directory: Path) -> None:
    """``locks/``, as group-writable as its cache directory: in a cache a group shares, all of it makes lock files.

    A ``locks/`` this process owns is given that access when it lacks it, not only when made here:
    one made by a tunekit that did not share lock files (0755) would keep every other member of
    the group out of the locks for good, warned about at each start.
    """
    with suppress(FileExistsError):
        directory.mkdir()
    shared = stat.S_IMODE(os.stat(directory.parent).st_mode) & stat.S_IRWXG
    if shared & stat.S_IWGRP:
        info = os.stat(directory)
        wanted = stat.S_IMODE(info.st_mode) | shared
        if info.st_uid == os.geteuid() and stat.S_IMODE(info.st_mode) != wanted:
            with suppress(OSError):
                os.chmod(directory, wanted)


def sweep_lock_files(cache_directory: Path) -> int:
    """Remove the lock files no process holds (left by processes killed while tuning); how many.

    A file some process holds is left alone: taking it without waiting fails. The ``locks``
    directory itself stays: a process that has just made it would otherwise fail to create its
    lock file there and tune without one.
    """
    directory = lock_directory(cache_directory)
    if not directory.is_dir():
        return 0
    removed = 0
    for path in sorted(directory.glob("*.lock")):
        try:
            release = _try_lock(path, create=False)
        except OSError as exc:
            _log.warning("cannot remove the lock file %s: %s", path, exc)
            continue
        if release is not None:
            release()
            removed += 1
    return removed


def drop_stale_lock(cache: PersistentCache, device_id: str, tuner: str, key_json: str) -> None:
    """Remove the lock file of a key whose winner was just read from the cache, when no process holds it.

    A process killed after storing its winner, before its release removed the file, leaves one
    that no later tune removes: every later process finds the winner stored and never takes
    the lock. One ``stat`` when there is none, the usual case; a file another process holds (a
    waiter that gave up waiting and tunes the key again) is left alone.
    """
    path = lock_path(cache.directory, device_id, tuner, key_json)
    if not os.path.exists(path):
        return
    try:
        release = _try_lock(path, create=False)
    except OSError:
        return  # one this process may not lock: the next `tunekit cache clear` says so
    if release is not None:
        release()


@contextmanager
def free_lock(cache: PersistentCache, device_id: str, tuner: str, key_json: str) -> Iterator[bool]:
    """Hold the key's tune lock while the block runs when no process holds it; yields whether held.

    Not waited for: a lock held means the key is being tuned (or its winner stored) now.
    """
    path = lock_path(cache.directory, device_id, tuner, key_json)
    try:
        _make_lock_directory(path.parent)
        release = _try_lock(path)
    except OSError:
        release = None
    if release is None:
        yield False
        return
    try:
        yield True
    finally:
        release()


def _acquire(path: Path, tuner: str, key_json: str, device_id: str, timeout_s: float) -> Release | None:
    """The lock, taken (its release function); None when it cannot be made or stays held past ``timeout_s``."""
    try:
        _make_lock_directory(path.parent)
        release = _try_lock(path)
        if release is not None:
            return release
        _log.info("%s: another process is tuning key %s on %s; waiting for its winner", tuner, key_json, device_id)
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            time.sleep(min(_POLL_S, max(deadline - time.monotonic(), 0.0)))
            release = _try_lock(path)
            if release is not None:
                return release
        _log.warning(
            "%s: waited %.0f s for another process tuning key %s on %s; tuning it here too",
            tuner,
            timeout_s,
            key_json,
            device_id,
        )
    except LockDenied as exc:
        # A cache directory this process cannot write is memory-only here (the cache warns about
        # that): no winner of this process's reaches the others, so the lock would guard nothing.
        first = path.parent not in _warned and os.access(path.parent.parent, os.W_OK)
        _warned.add(path.parent)
        _log.log(
            logging.WARNING if first else logging.INFO,
            "%s: cannot take the tune lock %s (%s); tuning key %s without it, so other processes sharing this cache "
            "may tune it at the same time. Every user of a shared cache must be able to write %s and its lock "
            "files: %s (and a group-writable cache directory gives new ones that access)",
            tuner,
            path,
            exc.strerror or exc,
            key_json,
            path.parent,
            permission_fix(path.parent.parent),
        )
    except OSError as exc:
        _log.info("%s: no cross-process tune lock (%s); tuning without it", tuner, exc)
    return None


if sys.platform == "win32":  # pragma: no cover - tested on POSIX only
    import filelock

    def _try_lock(path: Path, *, create: bool = True) -> Release | None:
        """Take the lock without waiting; None while another process holds it."""
        if not create and not path.exists():
            return None
        lock = filelock.FileLock(str(path))
        try:
            lock.acquire(timeout=0)
        except filelock.Timeout:
            return None
        return lock.release  # removes the file when no other process has it open

else:
    import fcntl

    _CONTENDED = frozenset({errno.EACCES, errno.EAGAIN, errno.EWOULDBLOCK})
    _REOPENS = 100

    def _try_lock(path: Path, *, create: bool = True) -> Release | None:
        """Take the lock without waiting; None while another process holds it (or, unless ``create``, no file)."""
        # Bounded: on a file system whose stat and fstat disagree, every lock would look removed
        # and the loop would spin past tune_lock_timeout_s; as busy, the caller's wait applies.
        for _ in range(_REOPENS):
            fd = _open(path, create=create)
            if fd is None:
                return None
            match _lock_opened(path, fd):
                case "held":
                    share_with_group(path, fd)
                    return lambda: _release(path, fd)
                case "busy":
                    return None
                case "removed":
                    if not create:
                        return None
        return None

    def _open(path: Path, *, create: bool) -> int | None:
        """``path`` opened to be locked (created when ``create``); None when it is not there and not ``create``.

        Read-write when allowed (an exclusive lock over NFS needs it), else read-only: another user's
        lock file that is not group-writable (an older tunekit's) is still a lock on a local file system.
        """
        try:
            # 0o666: the umask decides, as for any file; share_with_group adds what a shared cache needs.
            return os.open(path, os.O_RDWR | os.O_CLOEXEC | (os.O_CREAT if create else 0), 0o666)
        except FileNotFoundError:
            if create:
                raise
            return None
        except PermissionError as denied:
            try:
                return os.open(path, os.O_RDONLY | os.O_CLOEXEC)
            except FileNotFoundError:
                if create:  # it was not there, and this process may not create files in locks/
                    raise LockDenied(denied.errno, denied.strerror, str(path)) from None
                return None
            except PermissionError:
                raise LockDenied(denied.errno, denied.strerror, str(path)) from None

    def _lock_opened(path: Path, fd: int) -> Literal["held", "busy", "removed"]:
        """Lock ``fd``, opened from ``path``: held, busy (another process holds it) or removed; closed unless held.

        Removed: the holder before this process removed the file as it released it, after this
        process had opened it. Its lock is worth nothing (whoever opens the path now creates a
        new file and locks that one), so the caller opens the path again.
        """
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError as exc:
            os.close(fd)
            if exc.errno in _CONTENDED:
                return "busy"
            if exc.errno == errno.EBADF:  # NFS emulates flock with locks that need the file open for writing
                raise LockDenied(errno.EACCES, "open read-only, which cannot lock it here", str(path)) from exc
            raise
        try:
            held = _names(path, fd)
        except BaseException:
            os.close(fd)  # an unexpected stat error must not leave the key locked for the process's life
            raise
        if held:
            return "held"
        os.close(fd)
        return "removed"

    def _names(path: Path, fd: int) -> bool:
        """Whether ``path`` still names the file open as ``fd``."""
        try:
            at_path = os.stat(path)
        except FileNotFoundError:
            return False
        opened = os.fstat(fd)
        return (at_path.st_dev, at_path.st_ino) == (opened.st_dev, opened.st_ino)

    def _release(path: Path, fd: int) -> None:
        # Remove the path while still holding the lock: a process that opens it from now on
        # creates a new file, and one that locks this file afterwards sees it is no longer at the path.
        with suppress(OSError):
            path.unlink()
        try:
            fcntl.flock(fd, fcntl.LOCK_UN)  # a forked child holding a copy of fd must not keep it locked
        finally:
            os.close(fd)
