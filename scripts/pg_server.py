"""A throwaway PostgreSQL server from the distribution's packages, for tests and benches.

``PgServer.start()`` runs ``initdb`` and ``pg_ctl start`` in a fresh temporary directory that
listens on a unix socket only (no port to collide on), and ``stop()`` stops it and removes the
directory. PostgreSQL refuses to run as root: as root, the directory is given to the ``postgres``
user (which the ``postgresql`` package creates) and the server runs as that user (``runuser``).
The binaries are found by glob (``/usr/lib/postgresql/*/bin``, newest first), then on PATH.

A server outlives the process that started it (``pg_ctl`` detaches it), so each one has a
watchdog: this script run with ``--watch``, in a session of its own, which waits for the starting
process to end and then stops the server and removes its directory if ``stop()`` did not. A test
process killed with SIGKILL (a CI timeout, an OOM kill, pytest-xdist losing a worker) leaves no
server behind.

Run it to get a server for a manual try: ``python scripts/pg_server.py`` prints the URL to set
as ``TUNEKIT_CACHE_URL`` and serves until Ctrl-C.
"""

from __future__ import annotations

import contextlib
import os
import pwd
import re
import select
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import uuid
from dataclasses import dataclass
from pathlib import Path

try:
    import psycopg
except ImportError:  # PgServer.start says what is missing
    psycopg = None  # type: ignore[assignment]

__all__ = ["PgServer", "ServerUnavailable", "find_binaries"]

SUPERUSER = "tunekit"


class ServerUnavailable(RuntimeError):
    """No PostgreSQL server could be started here; the message says why and how to get one."""


def find_binaries() -> Path | None:
    """The directory holding ``initdb`` and ``pg_ctl``: the newest /usr/lib/postgresql/N/bin, or PATH's."""

    def version(path: Path) -> tuple[int, ...]:
        return tuple(int(part) for part in re.findall(r"\d+", path.parent.parent.name))

    found = sorted(Path("/usr/lib/postgresql").glob("*/bin/initdb"), key=version, reverse=True)
    if found:
        return found[0].parent
    on_path = shutil.which("initdb")
    return Path(on_path).resolve().parent if on_path else None


def _as_server_user() -> tuple[list[str], int | None, int | None]:
    """The command prefix that runs a program as the server's user, and that user's uid and gid (None: this one)."""
    if os.geteuid() != 0:
        return [], None, None
    try:
        user = pwd.getpwnam("postgres")
    except KeyError:
        raise ServerUnavailable(
            "running as root, and there is no 'postgres' user for the server to run as "
            "(PostgreSQL refuses root): apt-get install -y postgresql creates it"
        ) from None
    return ["runuser", "-u", "postgres", "--"], user.pw_uid, user.pw_gid


@dataclass
class PgServer:
    """A running server: its temporary root (data, socket, log), and how to reach it."""

    root: Path
    binaries: Path
    prefix: list[str]
    watchdog: subprocess.Popen[bytes] | None = None

    @property
    def data(self) -> Path:
        return self.root / "data"

    @property
    def log(self) -> Path:
        return self.root / "server.log"

    @classmethod
    def start(cls) -> PgServer:
        """initdb + pg_ctl start in a new temporary directory; raises ServerUnavailable with the reason."""
        if psycopg is None:
            raise ServerUnavailable("psycopg is not installed: pip install 'tunekit[postgres]'")
        binaries = find_binaries()
        if binaries is None:
            raise ServerUnavailable("no initdb found (apt-get install -y postgresql)")
        prefix, uid, gid = _as_server_user()
        root = Path(tempfile.mkdtemp(prefix="tunekit-pg-"))
        if uid is not None and gid is not None:
            os.chown(root, uid, gid)
        # Before anything is started in the directory: a kill from here on leaves nothing behind.
        watchdog = subprocess.Popen(
            [sys.executable, __file__, "--watch", str(os.getpid()), str(root), str(binaries)],
            # No pipe of the starter's: a reader of its output would wait for the watchdog's end too.
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            start_new_session=True,  # a signal to the starter's process group (Ctrl-C, a timeout) spares it
        )
        server = cls(root, binaries, prefix, watchdog)
        try:
            server._run(
                "initdb", "-D", str(server.data), "-U", SUPERUSER, "--auth=trust", "-E", "UTF8", "--no-sync", "-N"
            )
            server.restart()
        except BaseException:
            server.stop()
            raise
        return server

    def _run(self, program: str, *args: str) -> None:
        done = subprocess.run(
            [*self.prefix, str(self.binaries / program), *args], capture_output=True, text=True, check=False
        )
        if done.returncode != 0:
            log = self.log.read_text(errors="replace")[-2000:] if self.log.exists() else ""
            raise ServerUnavailable(f"{program} failed ({done.returncode}): {done.stderr.strip()[-2000:]}\n{log}")

    def url(self, database: str = "postgres") -> str:
        """The URL of a database on this server (a unix socket: the host is the socket's directory)."""
        return f"postgresql://{SUPERUSER}@/{database}?host={self.root}"

    def create_database(self) -> str:
        """A new, empty database; its URL. Advisory locks are per database: a test's locks meet no other test's."""
        name = f"t_{uuid.uuid4().hex[:16]}"
        self.sql(f"CREATE DATABASE {name}")
        return self.url(name)

    def drop_database(self, url: str) -> None:
        name = url.split("@/", 1)[1].split("?", 1)[0]
        self.sql(f"DROP DATABASE IF EXISTS {name} WITH (FORCE)")

    def sql(self, statement: str) -> None:
        """Run one statement as the superuser (in this process: a test's fixture may start no process)."""
        with psycopg.connect(self.url(), autocommit=True) as connection:
            connection.execute(statement.encode())

    def kill(self) -> None:
        """Stop the server at once (``immediate``): a database that goes away under its clients."""
        self._run("pg_ctl", "-D", str(self.data), "-m", "immediate", "-w", "stop")

    def restart(self) -> None:
        """Start it (again, after :meth:`kill`), on the same socket and data.

        ``fsync=off``: what a killed server committed is kept (only an OS crash would lose it), and a
        test's commits do not wait for the disk. Every commit is synchronous: a test kills servers.
        """
        options = (
            f"-c listen_addresses='' -c unix_socket_directories={self.root} -c fsync=off "
            "-c full_page_writes=off -c shared_buffers=16MB -c max_connections=120"
        )
        self._run("pg_ctl", "-D", str(self.data), "-l", str(self.log), "-w", "-t", "60", "-o", options, "start")

    def stop(self) -> None:
        """Stop the server (when running) and remove its directory, then its watchdog."""
        if (self.data / "postmaster.pid").exists():
            with contextlib.suppress(ServerUnavailable):
                self._run("pg_ctl", "-D", str(self.data), "-m", "fast", "-w", "stop")
        shutil.rmtree(self.root, ignore_errors=True)
        if self.watchdog is not None:  # last: a kill before this point still leaves the cleaning to it
            self.watchdog.terminate()
            self.watchdog.wait()


def _wait_for_exit(pid: int) -> None:
    """Return once the process ``pid`` has ended (a pidfd where Linux has them, else a poll)."""
    try:
        descriptor = os.pidfd_open(pid)
    except ProcessLookupError:
        return
    except (AttributeError, OSError):  # no pidfd_open (not Linux, or before 5.3)
        while True:
            try:
                os.kill(pid, 0)
            except ProcessLookupError:
                return
            except PermissionError:
                pass
            time.sleep(0.5)
    try:
        select.select([descriptor], [], [])  # readable once the process has ended
    finally:
        os.close(descriptor)


def _watch(starter: int, root: Path, binaries: Path) -> None:
    """Wait for ``starter`` to end, then stop the server in ``root`` and remove it, unless stop() did.

    A starter killed while ``pg_ctl start`` ran leaves it running on its own: the server can come
    up just after, so the directory is looked at again for a moment before it is removed.
    """
    signal.signal(signal.SIGTERM, lambda number, frame: sys.exit(0))  # stop() is done: nothing to clean
    _wait_for_exit(starter)
    signal.signal(signal.SIGTERM, signal.SIG_IGN)  # the cleaning is not to be cut short now
    if not root.exists():
        return
    prefix, _, _ = _as_server_user()
    server = PgServer(root, binaries, prefix)
    deadline = time.monotonic() + 2.0
    while time.monotonic() < deadline:
        if (server.data / "postmaster.pid").exists():
            with contextlib.suppress(ServerUnavailable):
                server.kill()
        time.sleep(0.2)
    shutil.rmtree(root, ignore_errors=True)


def main() -> None:
    server = PgServer.start()
    # `kill`, a closed terminal or a CI step's timeout sends SIGTERM or SIGHUP, not Ctrl-C: each stops the server
    # too, where before the server went on running and its directory stayed behind. Installed before the URL
    # is printed: a caller may signal as soon as it has read it.
    for stop_signal in (signal.SIGTERM, signal.SIGHUP):
        signal.signal(stop_signal, _interrupt)
    try:
        # Inside the try: a caller that signals as soon as it has read the line interrupts what follows the
        # print, and the server must be stopped then too (outside, the script died with the server running).
        print(f"TUNEKIT_CACHE_URL={server.url()}  (Ctrl-C stops it and removes {server.root})", flush=True)
        signal.pause()
    except KeyboardInterrupt:
        pass
    finally:
        server.stop()


def _interrupt(number: int, frame: object) -> None:
    raise KeyboardInterrupt


if __name__ == "__main__":
    if sys.argv[1:2] == ["--watch"]:
        _watch(int(sys.argv[2]), Path(sys.argv[3]), Path(sys.argv[4]))
    else:
        main()
