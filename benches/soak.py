"""Soak: does anything get lost when processes are killed, files move under them, the disk fills or fork fails?

Run: ``.venv/bin/python benches/soak.py --quick`` (about 30 s), or without ``--quick`` for the
longer soak (``--seconds`` per attack, ``--workers`` processes). Each attack runs real forked
processes tuning fresh keys into one cache directory (and appending their records to one
``JsonlSink`` file) while the attack happens; afterwards a fresh ``PersistentCache`` looks up
every key a worker was told was stored (its record said ``stored=True``). Per attack it prints:

- runs: ``execute`` calls made (tunes started);
- stored: keys whose record said stored; found: those of them the cache holds afterwards;
- lost: stored but not found (must be 0; for the failed fork also the keys the process that can
  fork was refused);
- records / read / bad: records the sink said it kept, valid lines read back, bad lines;
- warnings: WARNING lines tunekit logged in all workers (one per process and cause is the aim).

The attacks:

- kill storm: SIGKILL a random worker every 0.05-0.25 s, start another in its place;
- concurrent writers: every worker tunes the same keys at once (one tunes, the others wait);
- cache dir removed: the cache directory is deleted twice while workers tune (keys counted are
  those whose tune started after the last removal: the earlier ones were deleted by the attack);
- file quarantined: the cache file is moved aside mid-run as tunekit moves a corrupt one
  (``tunekit-cache.sqlite3.corrupt-*``, journal first), counted likewise;
- full disk: cache and records on a 1 MiB tmpfs (root only) that fills, then frees;
- failed fork: a process that cannot fork (RLIMIT_NPROC, as ``nobody`` when run as root) tunes
  under process isolation, then one that can tunes the same keys: none may be refused.

The exit status is 1 when anything was lost or a bad line read. Host CPU; candidates are trivial
Python functions: what is exercised is tunekit, SQLite and the operating system, not a device.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import logging
import os
import pwd
import random
import resource
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from rich.console import Console
from rich.table import Table

import tunekit as tk
from tunekit._keys.key import key_to_json
from tunekit._measure import worker as _worker_module
from tunekit._observe.reader import BadLine, read_records
from tunekit_backends.cpu import CpuClient

CLIENT = CpuClient()
SETTINGS: dict[str, object] = {"samples": 3, "warmup": 1, "adaptive": False, "progress": False}
KEY_SPAN = 10**7  # each worker's keys start at its serial times this: no two workers share one by accident


@tk.autotune_key
class IKey:
    i: int


def _tunables() -> tk.TunableSet[IKey, int]:
    return tk.TunableSet(key=lambda i: IKey(i=i)).with_tunables(
        [tk.Tunable("double", lambda i: 2 * i), tk.Tunable("twice", lambda i: i + i)]
    )


# -- the worker processes ---------------------------------------------------------------------


class _Report:
    """A worker's events, one JSON line each, appended to its own file (a kill leaves at most one torn line)."""

    def __init__(self, path: Path) -> None:
        self._fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o666)

    def __call__(self, **event: object) -> None:
        with contextlib.suppress(OSError):  # a full disk must not stop the worker: its reports live elsewhere
            os.write(self._fd, (json.dumps(event) + "\n").encode())


class _Warnings(logging.Handler):
    def __init__(self, report: _Report) -> None:
        super().__init__(logging.WARNING)
        self.report = report

    def emit(self, record: logging.LogRecord) -> None:
        self.report(warning=f"{record.name}: {record.getMessage()}"[:300])


@dataclass
class Work:
    """What one worker does: tune keys ``first``, ``first + 1``, ... under ``tuner`` until ``deadline``."""

    tuner: str
    first: int
    deadline: float
    records: Path
    count: int | None = None  # at most this many keys
    isolation: str = "none"
    starve_as: pwd.struct_passwd | None = None  # make fork fail first (as this user, when root)


def _tune_keys(work: Work, report: _Report) -> None:
    logging.getLogger("tunekit").addHandler(_Warnings(report))
    logging.getLogger("tunekit").setLevel(logging.INFO)
    sink = tk.JsonlSink(work.records)
    started = [0.0]

    def on_record(record: tk.AutotuneRecord) -> None:
        before = getattr(sink, "lost", 0)  # a tunekit before the sink counted its losses: taken as kept
        sink.emit(record)
        report(
            record=getattr(sink, "lost", 0) == before, stored=record.key["i"] if record.stored else None, t=started[0]
        )

    tuner: tk.LocalTuner[IKey, int] = tk.LocalTuner(work.tuner, sinks=[on_record])
    tunables = tuner.init(_tunables).with_isolation(work.isolation)  # type: ignore[arg-type]
    i = work.first
    while time.time() < work.deadline and (work.count is None or i < work.first + work.count):
        started[0] = time.time()
        report(start=i, t=started[0])
        try:
            tuner.execute(CLIENT.device_id, CLIENT, tunables, (i,))
        except Exception as exc:
            report(error=type(exc).__name__, i=i, message=str(exc).splitlines()[0][:200])
        i += 1


def _starve(user: pwd.struct_passwd | None) -> None:
    """From here on this process can start no process (nor thread: the worker starter is made first)."""
    _worker_module._from_lasting_thread(lambda: None)
    if user is not None and os.geteuid() == 0:
        os.setgroups([])
        os.setgid(user.pw_gid)
        os.setuid(user.pw_uid)
    resource.setrlimit(resource.RLIMIT_NPROC, (1, 1))


def _start(work: Work, report_path: Path) -> int:
    pid = os.fork()
    if pid == 0:  # the worker: never returns into the parent's code
        code = 0
        try:
            report = _Report(report_path)
            if work.starve_as is not None or work.isolation == "starved":
                _starve(work.starve_as)
                work.isolation = "process"
            _tune_keys(work, report)
        except BaseException:
            code = 1
        finally:
            os._exit(code)
    return pid


def _reap(pids: list[int], by: float) -> None:
    """Wait for the workers to finish their last tune; kill what is still running at ``by``."""
    for pid in pids:
        while True:
            done, _ = os.waitpid(pid, os.WNOHANG)
            if done:
                break
            if time.time() > by:
                with contextlib.suppress(ProcessLookupError):
                    os.kill(pid, signal.SIGKILL)
                os.waitpid(pid, 0)
                break
            time.sleep(0.02)


# -- one attack -------------------------------------------------------------------------------


@dataclass
class Outcome:
    attack: str
    runs: int = 0
    stored: int = 0
    found: int = 0
    lost: int = 0
    records: int = 0
    read: int = 0
    bad: int = 0
    warnings: Counter[str] = field(default_factory=Counter)
    errors: Counter[str] = field(default_factory=Counter)
    skipped: str = ""
    note: str = ""


@dataclass
class Arena:
    """An attack's directory: the cache, the records file and the workers' reports."""

    root: Path
    tuner: str
    reports: Path
    """Outside ``root``: on the full disk, reports that could not be written would hide what was stored."""

    @property
    def cache_dir(self) -> Path:
        return self.root / "cache"

    @property
    def records(self) -> Path:
        return self.root / "records.jsonl"

    def report(self, serial: int) -> Path:
        return self.reports / f"{serial}.jsonl"


def _events(arena: Arena) -> list[dict[str, object]]:
    events = []
    for path in sorted(arena.reports.glob("*.jsonl")):
        for line in path.read_text(errors="replace").splitlines():
            with contextlib.suppress(ValueError):
                events.append(json.loads(line))
    return events


def _tally(attack: str, arena: Arena, *, counted_from: float = 0.0, refused_is_lost: bool = False) -> Outcome:
    """Read what the workers reported, then look every stored key up in a fresh cache."""
    outcome = Outcome(attack)
    stored: set[int] = set()
    for event in _events(arena):
        if "start" in event:
            outcome.runs += 1
        if "warning" in event:
            outcome.warnings[str(event["warning"])[:90]] += 1
        if "error" in event:
            outcome.errors[str(event["error"])] += 1
        if "record" in event:
            outcome.records += bool(event["record"])
            if event.get("stored") is not None and float(event["t"]) >= counted_from:  # type: ignore[arg-type]
                stored.add(int(event["stored"]))  # type: ignore[call-overload]
    cache = tk.PersistentCache(arena.cache_dir)
    found = {i for i in stored if isinstance(cache.get(CLIENT.device_id, arena.tuner, key_to_json(IKey(i=i))), tuple)}
    outcome.stored, outcome.found = len(stored), len(found)
    outcome.lost = len(stored - found)
    if refused_is_lost:
        outcome.lost += outcome.errors.get("NoValidKernelFound", 0)
    if arena.records.exists():
        for line in read_records(arena.records):
            if isinstance(line, BadLine):
                outcome.bad += 1
            else:
                outcome.read += 1
    return outcome


def _arena(base: Path, name: str, reports_under: Path | None = None) -> Arena:
    slug = name.replace(" ", "-")
    root = base / slug
    reports = (reports_under or base) / f"{slug}-reports"
    for made in (root, reports):
        made.mkdir(mode=0o777)
        made.chmod(0o777)  # the failed fork's worker runs as nobody
    arena = Arena(root, f"soak-{slug}", reports)
    tk.configure(**SETTINGS, cache_dir=arena.cache_dir)
    return arena


def _workers(arena: Arena, count: int, seconds: float, **work: object) -> tuple[list[int], float]:
    deadline = time.time() + seconds
    pids = [
        _start(Work(arena.tuner, serial * KEY_SPAN, deadline, arena.records, **work), arena.report(serial))  # type: ignore[arg-type]
        for serial in range(count)
    ]
    return pids, deadline


def kill_storm(base: Path, workers: int, seconds: float) -> Outcome:
    arena = _arena(base, "kill storm")
    deadline = time.time() + seconds
    live: dict[int, int] = {}
    serial = 0
    for serial in range(workers):
        live[serial] = _start(Work(arena.tuner, serial * KEY_SPAN, deadline, arena.records), arena.report(serial))
    kills = 0
    while time.time() < deadline - 0.3:
        time.sleep(random.uniform(0.05, 0.25))
        victim = random.choice(list(live))
        os.kill(live[victim], signal.SIGKILL)
        os.waitpid(live.pop(victim), 0)
        kills += 1
        serial += 1
        live[serial] = _start(Work(arena.tuner, serial * KEY_SPAN, deadline, arena.records), arena.report(serial))
    _reap(list(live.values()), deadline + 30)
    outcome = _tally("kill storm", arena)
    outcome.note = f"{kills} SIGKILLs"
    return outcome


def concurrent_writers(base: Path, workers: int, seconds: float) -> Outcome:
    arena = _arena(base, "concurrent writers")
    deadline = time.time() + seconds
    # Every worker on the same keys: each key is tuned by one of them while the others wait on its lock.
    pids = [_start(Work(arena.tuner, 0, deadline, arena.records), arena.report(serial)) for serial in range(workers)]
    _reap(pids, deadline + 60)
    return _tally("concurrent writers", arena)


def cache_dir_removed(base: Path, workers: int, seconds: float) -> Outcome:
    arena = _arena(base, "cache dir removed")
    pids, deadline = _workers(arena, workers, seconds)
    removed = 0.0
    for fraction in (1 / 3, 2 / 3):
        time.sleep(max(0.0, deadline - seconds * (1 - fraction) - time.time()))
        shutil.rmtree(arena.cache_dir, ignore_errors=True)
        removed = time.time()
    _reap(pids, deadline + 60)
    outcome = _tally("cache dir removed", arena, counted_from=removed)
    outcome.note = "keys tuned after the last removal"
    return outcome


def file_quarantined(base: Path, workers: int, seconds: float) -> Outcome:
    arena = _arena(base, "file quarantined")
    pids, deadline = _workers(arena, workers, seconds)
    time.sleep(seconds / 2)
    path = arena.cache_dir / tk.PersistentCache.FILENAME
    target = path.with_name(f"{path.name}.corrupt-{time.strftime('%Y%m%d-%H%M%S')}-{os.getpid()}")
    for suffix in ("-wal", "-shm", ""):  # as PersistentCache._quarantine moves a corrupt file: the journal first
        with contextlib.suppress(FileNotFoundError):
            Path(str(path) + suffix).replace(Path(str(target) + suffix))
    moved = time.time()
    _reap(pids, deadline + 60)
    outcome = _tally("file quarantined", arena, counted_from=moved)
    outcome.note = "keys tuned after the move"
    return outcome


def full_disk(base: Path, workers: int, seconds: float) -> Outcome:
    if os.geteuid() != 0:
        return Outcome("full disk", skipped="needs root to mount a small tmpfs")
    mount = base / "full-disk-mount"
    mount.mkdir()
    done = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", "size=1m", "tmpfs", str(mount)], capture_output=True, text=True, check=False
    )
    if done.returncode != 0:
        return Outcome("full disk", skipped=f"cannot mount a tmpfs: {done.stderr.strip()}")
    try:
        arena = _arena(mount, "full disk", reports_under=base)
        filler = mount / "filler"
        with contextlib.suppress(OSError), open(filler, "wb") as file:  # all but 128 KiB
            file.write(b"\0" * (1024 - 128) * 1024)
        pids, deadline = _workers(arena, workers, seconds)
        time.sleep(seconds / 2)
        filler.unlink()  # room again
        _reap(pids, deadline + 60)
        outcome = _tally("full disk", arena)
        outcome.note = "1 MiB tmpfs, full, then 900 KiB freed"
        return outcome
    finally:
        subprocess.run(["umount", "-l", str(mount)], check=False)


def failed_fork(base: Path, workers: int, seconds: float) -> Outcome:
    user = None
    if os.geteuid() == 0:
        try:
            user = pwd.getpwnam("nobody")
        except KeyError:
            return Outcome(
                "failed fork", skipped="running as root without a 'nobody' user: RLIMIT_NPROC would not apply"
            )
    arena = _arena(base, "failed fork")
    arena.cache_dir.mkdir(mode=0o777)
    arena.cache_dir.chmod(0o777)
    keys = max(4, workers * 2)
    deadline = time.time() + seconds
    starved = Work(arena.tuner, 0, deadline, arena.records, count=keys, isolation="starved", starve_as=user)
    pid = _start(starved, arena.report(0))
    _reap([pid], deadline + 60)
    able = Work(arena.tuner, 0, time.time() + seconds, arena.records, count=keys, isolation="process")
    pid = _start(able, arena.report(1))
    _reap([pid], time.time() + seconds + 60)
    outcome = _tally("failed fork", arena, refused_is_lost=True)
    outcome.note = f"{keys} keys: first by a process that cannot fork, then by one that can"
    return outcome


ATTACKS: dict[str, Callable[[Path, int, float], Outcome]] = {
    "kill storm": kill_storm,
    "concurrent writers": concurrent_writers,
    "cache dir removed": cache_dir_removed,
    "file quarantined": file_quarantined,
    "full disk": full_disk,
    "failed fork": failed_fork,
}


def _warm_up(base: Path) -> None:
    """Import everything a worker needs, here: the failed fork's worker may not read the interpreter's files."""
    tk.configure(**SETTINGS, cache_dir=base / "warm-up")
    tuner: tk.LocalTuner[IKey, int] = tk.LocalTuner("soak-warm-up", sinks=[tk.JsonlSink(base / "warm-up.jsonl")])
    for isolation in ("none", "process"):
        tunables = tuner.init(_tunables).with_isolation(isolation)
        tuner.execute(CLIENT.device_id, CLIENT, tunables, (len(isolation),))
    with contextlib.suppress(Exception):  # its class and message formatting (absent from a tunekit before it)
        raise tk.WorkerStartFailed("warm-up")
    list(read_records(base / "warm-up.jsonl"))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="2 workers, 3 s per attack (about 30 s in all)")
    parser.add_argument("--seconds", type=float, default=20.0, help="duration of each attack")
    parser.add_argument("--workers", type=int, default=4, help="worker processes per attack")
    parser.add_argument("--only", choices=sorted(ATTACKS), action="append", help="run only this attack (repeatable)")
    args = parser.parse_args()
    seconds, workers = (3.0, 2) if args.quick else (args.seconds, args.workers)
    random.seed(24)
    outcomes = []
    with tempfile.TemporaryDirectory(prefix="tunekit-soak-") as name:
        base = Path(name)
        base.chmod(0o777)
        _warm_up(base)
        for attack, run in ATTACKS.items():
            if args.only and attack not in args.only:
                continue
            print(f"{attack} ...", file=sys.stderr, flush=True)
            outcomes.append(run(base, workers, seconds))
    tk.configure()
    title = f"tunekit soak: {workers} workers, {seconds:g} s per attack, {os.cpu_count()} CPUs (host)"
    table = Table(title=title)
    for column in ("attack", "runs", "stored", "found", "lost", "records", "read", "bad", "warnings", "errors"):
        table.add_column(column, justify="left" if column in ("attack", "errors") else "right")
    for o in outcomes:
        if o.skipped:
            table.add_row(o.attack, *["-"] * 8, f"skipped: {o.skipped}")
            continue
        errors = ", ".join(f"{n} {kind}" for kind, n in o.errors.most_common())
        table.add_row(
            o.attack,
            str(o.runs),
            str(o.stored),
            str(o.found),
            f"[bold red]{o.lost}[/]" if o.lost else "0",
            str(o.records),
            str(o.read),
            f"[bold red]{o.bad}[/]" if o.bad else "0",
            str(sum(o.warnings.values())),
            errors or "-",
        )
    Console(width=max(120, shutil.get_terminal_size().columns)).print(table)
    for o in outcomes:
        if o.note or o.warnings:
            print(f"\n{o.attack}: {o.note}")
        for message, n in o.warnings.most_common(4):
            print(f"  {n} x {message}")
    return 1 if any(o.lost or o.bad for o in outcomes) else 0


if __name__ == "__main__":
    sys.exit(main())
