"""``tunekit cache ...``: look into, clear, move and verify the persistent cache of winners.

``list``, ``show``, ``clear``, ``export`` and ``import`` work on either store of winners through
the Store protocol: this host's own SQLite cache (``--store local``) or the fleet's PostgreSQL
database that ``TUNEKIT_CACHE_URL`` names (``--store fleet``, the default when it is set).
"""

from __future__ import annotations

import argparse
import json
import sqlite3
import sys
from collections import Counter
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Literal, Protocol

from pydantic import ValidationError

from tunekit._base.atomic import write_atomic
from tunekit._base.counted import counted, plural
from tunekit._base.persisted import STORED, other_version
from tunekit._base.settings import current
from tunekit._base.short_id import short_device_id
from tunekit._base.units import format_duration_ns
from tunekit._base.validation_text import validation_text
from tunekit._base.version import MAJOR
from tunekit._cli.age import tuned_before
from tunekit._cli.devices import found_clients
from tunekit._cli.error import CliError
from tunekit._cli.key_match import held_values_hint, key_filter as _key_filter, key_matches as _key_matches
from tunekit._cli.listings import CacheCandidate, CacheEntry, CacheList, CacheShow, CacheWinner
from tunekit._cli.table import Output, fixed, print_json
from tunekit._store.cache import PersistentCache, default_cache_dir
from tunekit._store.cache_file import has_no_tables, header_problem, is_corrupt, is_unwritable
from tunekit._store.file_kind import other_kind
from tunekit._store.pg_store import PostgresStore
from tunekit._store.sqlite_store import SqliteStore
from tunekit._store.store_protocol import Store
from tunekit._store.tune_lock import sweep_lock_files
from tunekit._values.bundle import BundleEntry, CacheBundle
from tunekit._values.cache_row import CacheRow, CacheValue, CandidateResult

__all__ = ["STORES", "clear", "export", "import_bundle", "list_rows", "path", "show", "verify"]

StoreName = Literal["fleet", "local"]
STORES: tuple[StoreName, ...] = ("fleet", "local")


def _cache_file() -> Path:
    settings = current()
    directory = (settings.cache_dir or default_cache_dir()).expanduser()
    return directory / PersistentCache.FILENAME


def _open_existing(*, write: bool = False) -> PersistentCache | None:
    """The cache, or None when nothing was ever stored (so that reading never creates one).

    Opened read-only unless ``write``: a command that only reads changes no file, not even a
    damaged one, which it reports instead of moving aside as a tuning process does.
    """
    file = _cache_file()
    if not file.exists():
        return None
    cache = PersistentCache(file.parent, read_only=not write)
    if not cache.available:
        raise CliError(
            f"cannot read the tuning cache {file}: {cache.write_refused}. `tunekit cache verify` reports what is "
            "wrong; the next process that tunes with this cache moves a damaged file aside and keeps the winners "
            "it can read from it",
            1,
        )
    return cache


class _Browsable(Store, Protocol):
    def owners(self) -> set[tuple[str, str]]:
        """(device id, tuner) of every row, readable or not."""
        ...


class _Importable(Protocol):
    """A store a bundle is imported into: its rows read, and replaced whatever they hold."""

    def get(self, device_id: str, tuner: str, key: str) -> tuple[str, CacheValue] | str | None: ...

    def put(self, device_id: str, tuner: str, key: str, checksum: str, value: CacheValue) -> bool: ...


@dataclass(frozen=True, slots=True)
class _Shown:
    """The store a command looks into, with what only this host's own cache has (failed tunes, lock files)."""

    name: StoreName
    where: str
    """The cache file's path, or the fleet's URL without its password."""
    store: _Browsable | None
    """None: no local cache file yet (reading never creates one)."""
    cache: PersistentCache | None = None

    @property
    def place(self) -> str:
        """Where the winners are, in a sentence: a local cache's path (as before there was a fleet), or the fleet's."""
        return self.where if self.name == "local" else f"the fleet store {self.where}"

    @property
    def header(self) -> str:
        return f"store: local cache {self.where}" if self.name == "local" else f"store: fleet {self.where}"

    def rows(self, device_id: str | None = None, tuner: str | None = None) -> Iterator[CacheRow | str]:
        if self.store is None:
            return iter(())
        rows = list(self.store.rows(device_id, tuner))
        self._answered()
        return iter(rows)

    def owners(self) -> set[tuple[str, str]]:
        if self.store is None:
            return set()
        owners = self.store.owners()
        self._answered()
        return owners

    def _answered(self) -> None:
        """An error (exit 1) when the fleet's database went away during the command, after answering at its start.

        The store then reports nothing (or its outage as an unreadable row), as a tuning process
        that carries on without it wants; a listing would show an empty or partial store instead.
        """
        if self.name == "fleet" and self.store is not None and not self.store.available:
            raise CliError(f"the fleet store {self.where} stopped answering (TUNEKIT_CACHE_URL): try again", 1)

    def failed_keys(self, device_id: str | None = None, tuner: str | None = None) -> list[tuple[str, str, str]]:
        """Recorded failed tunes: a host's own (the fleet store keeps winners only)."""
        return [] if self.cache is None else self.cache.failed_keys(device_id=device_id, tuner=tuner)


def _store_name(args: argparse.Namespace) -> StoreName:
    """``--store``, else the fleet's where ``TUNEKIT_CACHE_URL`` names one: the winners this host's tuner uses."""
    given: StoreName | None = getattr(args, "store", None)
    if given is not None:
        return given
    return "fleet" if current().cache_url is not None else "local"


@contextmanager
def _opened(args: argparse.Namespace, *, write: bool = False) -> Iterator[_Shown]:
    """The store ``--store`` names, open for the command (the fleet's connection closed after it)."""
    if _store_name(args) == "local":
        cache = _open_existing(write=write)
        file = cache.path if cache is not None else _cache_file()
        yield _Shown("local", str(file), SqliteStore(cache) if cache is not None else None, cache)
        return
    url = current().cache_url
    if url is None:
        raise CliError(
            "--store fleet reads the fleet's database that TUNEKIT_CACHE_URL names, and TUNEKIT_CACHE_URL is not set: "
            "set it (TUNEKIT_CACHE_URL=postgresql://USER@HOST:PORT/DBNAME) or use --store local for this host's cache"
        )
    try:
        store = PostgresStore(url)
    except ImportError as exc:  # the postgres extra is missing: the message has the install command
        raise CliError(str(exc), 1) from None
    try:
        if (problem := store.problem()) is not None:
            raise CliError(
                f"cannot reach the fleet store {store.where} (TUNEKIT_CACHE_URL): {problem}. Check that the "
                "database is up and reachable from this host, or use --store local for this host's own cache",
                1,
            )
        yield _Shown("fleet", store.where, store)
    finally:
        store.close()


@dataclass(frozen=True, slots=True)
class _Selection:
    """What ``_select`` read: the rows matching every filter, unreadable rows' reasons, and the
    readable rows of the tuner and device (whatever their key; None without a cache), kept for
    :func:`_stored_values_hint`, which would otherwise read them all a second time."""

    rows: list[CacheRow]
    bad: list[str]
    stored: list[CacheRow] | None


def _select(
    shown: _Shown,
    tuner: str | None,
    device: str | None,
    keys: list[str],
    *,
    failed: Sequence[tuple[str, str, str]] = (),
    tuned_before: datetime | None = None,
) -> _Selection:
    """Rows matching the filters, and unreadable rows' reasons; an unknown tuner or device is a usage error.

    The tuners and devices of ``failed`` (recorded failed tunes, as (device, tuner, key)) count as known,
    and so do those of unreadable rows: else such a tuner would be reported absent from "the cache is empty".
    """
    wanted = _key_filter(keys)
    rows: list[CacheRow] = []
    bad: list[str] = []
    _check_owners(shown, tuner, device, failed)
    everything = list(shown.rows(device, tuner))
    valid = [r for r in everything if not isinstance(r, str)]
    if wanted and valid:  # rows() filtered them by tuner and device
        fields = sorted({name for r in valid for name in _key_fields(r.key)})
        unknown = [name for name in wanted if name not in fields]
        if unknown:  # a misspelt field would match nothing and list an empty table, exit 0
            raise CliError(
                f"no stored key has a field named {unknown[0]!r} (key fields there: {', '.join(fields) or 'none'})"
            )
    for row in everything:
        if isinstance(row, str):
            bad.append(row)
        elif _key_matches(row.key, wanted) and (tuned_before is None or row.value.tuned_at < tuned_before):
            rows.append(row)
    return _Selection(rows, bad, valid if shown.store is not None else None)


def _check_owners(shown: _Shown, tuner: str | None, device: str | None, failed: Sequence[tuple[str, str, str]]) -> None:
    """A usage error for a tuner or device that neither a stored winner nor a failed tune in ``failed`` has."""
    owners = shown.owners()
    for label, value, present in (
        ("tuner", tuner, sorted({o[1] for o in owners} | {f[1] for f in failed})),
        ("device", device, sorted({o[0] for o in owners} | {f[0] for f in failed})),
    ):
        if value is not None and value not in present:
            known = (
                ", ".join(present) if present else f"none: the {'store' if shown.name == 'fleet' else 'cache'} is empty"
            )
            at = f"the cache at {shown.where}" if shown.name == "local" else shown.place
            raise CliError(f"no {label} named {value!r} in {at} ({label}s there: {known})")


def _stored_values_hint(selection: _Selection, keys: list[str]) -> str:
    """What the ``--key`` fields do hold, for a filter that matched nothing (see :func:`held_values_hint`).

    From the rows ``_select`` already read (unreadable ones are reported on their own).
    """
    held = held_values_hint("stored", (_key_dict(row.key) for row in selection.stored or ()), _key_filter(keys))
    return f" ({held})" if held else ""


def _failed_note(failed: Sequence[tuple[str, str, str]], tuner: str | None, device: str | None, keys: list[str]) -> str:
    """The recorded failed tunes the filters match, for a listing that found no winner: they are why."""
    wanted = _key_filter(keys)
    matched = [
        f
        for f in failed
        if (tuner is None or f[1] == tuner) and (device is None or f[0] == device) and _key_matches(f[2], wanted)
    ]
    if not matched:
        return ""
    named = ", ".join(f"{name} {key}" for _, name, key in matched[:3]) + (", ..." if len(matched) > 3 else "")
    # The filters given, so the command forgets these and no winner stored beside them.
    scope = (f" --tuner {tuner}" if tuner else "") + "".join(f" --key {pair}" for pair in keys)
    return (
        f"; {counted(len(matched), 'recorded failed tune')} ({named}): no candidate was valid for "
        f"{'that key' if len(matched) == 1 else 'those keys'}, and other processes repeat the error for "
        f"failed_tune_retry_s; `tunekit cache clear{scope}` forgets {'it' if len(matched) == 1 else 'them'}"
    )


def _key_dict(key_json: str) -> dict[str, object]:
    """The stored key's fields; none for a hand-edited key that is no JSON object."""
    try:
        fields = json.loads(key_json)
    except json.JSONDecodeError:
        return {}
    return fields if isinstance(fields, dict) else {}


def _key_fields(key_json: str) -> list[str]:
    return list(_key_dict(key_json))


def path(_: argparse.Namespace) -> int:
    """Print the cache file's path (whether or not it exists yet)."""
    print(_cache_file())
    return 0


def list_rows(args: argparse.Namespace) -> int:
    """One line per stored winner, a table per device (``--json``: :class:`~tunekit._cli.listings.CacheList`)."""
    with _opened(args) as shown:
        return _list_rows(args, shown)


def _list_rows(args: argparse.Namespace, shown: _Shown) -> int:
    out = Output.of(args)
    before = tuned_before(args.older_than)
    if shown.store is None:
        if args.json:
            print_json(CacheList(cache=shown.where, store=shown.name, winners=[], unreadable=[]))
        print(f"no tuning cache at {shown.where} (nothing tuned with this cache directory yet)", file=sys.stderr)
        return 0
    failed = shown.failed_keys()  # a tuner whose every key failed to tune is known, not "absent"
    device = _device(shown, args.device, failed)
    selection = _select(shown, args.tuner, device, args.key, failed=failed, tuned_before=before)
    rows, bad = selection.rows, selection.bad
    if args.json:
        winners = [_winner_entry(r) for r in rows]
        print_json(CacheList(cache=shown.where, store=shown.name, winners=winners, unreadable=bad))
        return _report_unreadable(bad)
    if not rows and not bad:  # a header over nothing (after `cache clear`) reads as a broken listing
        matching = " matching the filters" if args.tuner or args.device or args.key or args.older_than else ""
        hint = _stored_values_hint(selection, args.key) + _failed_note(failed, args.tuner, device, args.key)
        print(f"no stored winners{matching} in {shown.place}{hint}", file=sys.stderr)
        return 0
    out.line(shown.header)
    for device_id, group in _by_device(rows):
        out.line()
        out.line(f"device {out.device(device_id)}")
        out.table(
            ("tuner", "key", "winner", fixed("time"), "margin [95%]", fixed("tuned at")),
            [
                (
                    r.tuner,
                    r.key,
                    r.value.winner,
                    format_duration_ns(_winner_ns(r.value)),
                    r.value.decision.margin_text if r.value.decision is not None else "-",
                    r.value.tuned_at.strftime("%Y-%m-%d %H:%M"),
                )
                for r in group
            ],
        )
    return _report_unreadable(bad)


def _by_device(rows: list[CacheRow]) -> list[tuple[str, list[CacheRow]]]:
    """The rows grouped by device, devices in the order they first come: one table each, its id above it."""
    groups: dict[str, list[CacheRow]] = {}
    for row in rows:
        groups.setdefault(row.device_id, []).append(row)
    return list(groups.items())


def _device(shown: _Shown, given: str | None, failed: Sequence[tuple[str, str, str]] = ()) -> str | None:
    """The full device id ``--device`` names: the id itself, or the short form a table shows for it."""
    if given is None or shown.store is None:
        return given
    known = {owner[0] for owner in shown.owners()} | {f[0] for f in failed}
    if given in known:
        return given
    matches = [device_id for device_id in known if short_device_id(device_id) == given]
    return matches[0] if len(matches) == 1 else given  # an unknown one is reported by _check_owners


def _winner_entry(row: CacheRow) -> CacheWinner:
    return CacheWinner(
        device_id=row.device_id,
        device_short=short_device_id(row.device_id),
        tuner=row.tuner,
        key=_key_dict(row.key),
        key_text=row.key,
        winner=row.value.winner,
        winner_ns=_winner_ns(row.value),
        decision=row.value.decision,
        tuned_at=row.value.tuned_at,
    )


def _report_unreadable(bad: list[str], verb: str = "unreadable row") -> int:
    """Name each unreadable row on stderr; exit code 1 when there is one (a problem in the data)."""
    for reason in bad:
        print(f"{verb}: {reason}", file=sys.stderr)
    if bad:
        print(
            "(`tunekit cache verify` checks every row; a key whose row is unreadable is re-tuned at its next use)",
            file=sys.stderr,
        )
    return 1 if bad else 0


def _median(value: CacheValue, name: str) -> float | None:
    return next((r.median_ns for r in value.results if r.name == name), None)


def _winner_ns(value: CacheValue) -> float | None:
    """The winner's time as the deciding stage measured it, else (a row stored without it) its median."""
    decision = value.decision
    if decision is not None and decision.winner == value.winner:
        return decision.winner_ns
    return _median(value, value.winner)


def _note(value: CacheValue, name: str, error: str | None) -> str:
    """What `cache show` says beside a candidate: the winner and how it won, the runner-up, why a lower median lost."""
    decision = value.decision if value.decision is not None and value.decision.winner == value.winner else None
    if name == value.winner:
        if value.decision is None:
            return "winner (how it won is not kept in this row)"
        if decision is None:
            return f"winner (replaced {value.decision.winner}, which failed on real inputs)"
        return f"winner: {decision.stage_text}" + (f", {decision.margin_text}" if decision.margin is not None else "")
    note = error or ""
    if decision is not None and name == decision.runner_up:
        note = "runner-up"
    if decision is not None and name == decision.faster and (why := decision.why()):
        note = f"{note}; {why}" if note else why
    return note


def show(args: argparse.Namespace) -> int:
    """Every candidate's result for the keys of one tuner (``--json``: :class:`~tunekit._cli.listings.CacheShow`)."""
    with _opened(args) as shown:
        return _show(args, shown)


def _show(args: argparse.Namespace, shown: _Shown) -> int:
    out = Output.of(args)
    failed = shown.failed_keys()  # a tuner whose every key failed to tune is known, not "absent"
    device = _device(shown, args.device, failed)
    selection = _select(shown, args.tuner, device, args.key, failed=failed)
    rows, bad = selection.rows, selection.bad
    if not rows and not bad:
        hint = _stored_values_hint(selection, args.key) + _failed_note(failed, args.tuner, device, args.key)
        matching = f" matching {' '.join(args.key)}" if args.key else ""
        raise CliError(f"tuner {args.tuner!r} has no stored key{matching}{hint}")
    if args.json:
        entries = [_show_entry(row) for row in rows]
        print_json(CacheShow(cache=shown.where, store=shown.name, entries=entries, unreadable=bad))
        return _report_unreadable(bad)
    out.line(shown.header)
    for row in rows:
        out.line()
        out.line(f"{row.tuner} {row.key}")
        fields = [("device", out.device(row.device_id)), ("checksum", row.checksum)]
        if row.value.origin is not None:
            fields.append(("set", row.value.origin.describe()))
        fields.append(("tuned at", f"{row.value.tuned_at.isoformat()} by tunekit {row.value.tunekit_version}"))
        fields.append(("ranking", " > ".join(row.value.ranking)))
        decision = row.value.decision
        if decision is not None and decision.winner == row.value.winner:
            fields.append(("decided", decision.text()))
            if warning := decision.warning(row.tuner):
                fields.append(("warning", warning))
        elif decision is not None:
            fields.append(
                ("decided", f"{row.value.winner} replaced {decision.winner}, which failed on real inputs (demoted)")
            )
        out.fields(fields, indent=2)
        out.table(
            ("candidate", "status", fixed("median"), fixed("samples"), "note"),
            [
                (r.name, r.status, format_duration_ns(r.median_ns), str(r.samples), _note(row.value, r.name, r.error))
                for r in _ranked(row.value)
            ],
            indent=2,
        )
    return _report_unreadable(bad)


def _ranked(value: CacheValue) -> list[CandidateResult]:
    """The candidates' results, in the row's ranking, then those it does not rank by name."""
    ranked = {name: i for i, name in enumerate(value.ranking)}
    return sorted(value.results, key=lambda r: (ranked.get(r.name, len(ranked)), r.name))


def _show_entry(row: CacheRow) -> CacheEntry:
    return CacheEntry(
        **_winner_entry(row).model_dump(),
        checksum=row.checksum,
        tunekit_version=row.value.tunekit_version,
        ranking=list(row.value.ranking),
        candidates=[
            CacheCandidate(
                name=r.name,
                status=r.status,
                median_ns=r.median_ns,
                samples=r.samples,
                note=_note(row.value, r.name, r.error),
            )
            for r in _ranked(row.value)
        ],
    )


def clear(args: argparse.Namespace) -> int:
    """Delete stored winners and recorded failed tunes: all of them, or those matching the filters.

    Asks first on a terminal, saying how many winners go; elsewhere it takes ``--yes`` or refuses:
    a script that meant to clear one tuner's winners must not lose everyone's by a typo.
    Lock files left by processes killed while tuning go too, whatever the filters: they hold no
    data, and the one of a tune running now is held, so it stays.
    """
    with _opened(args, write=True) as shown:
        return _clear(args, shown)


def _clear(args: argparse.Namespace, shown: _Shown) -> int:
    # Lock files are this host's (the fleet's tune locks are the database's): swept with a local clear only.
    sweep = _sweep if shown.name == "local" else lambda: None
    before = tuned_before(args.older_than)  # a bad age is refused before anything is looked at
    if shown.store is None:
        sweep()
        print(f"no tuning cache at {shown.where}: nothing to clear")
        return 0
    # A tuner whose every key failed to tune has only failed tunes: clearing them is the point.
    failed = shown.failed_keys()
    device = _device(shown, args.device, failed)
    _check_owners(shown, args.tuner, device, failed)
    wanted = _key_filter(args.key)
    hint = ""
    if wanted or before is not None:
        selection = _select(shown, args.tuner, device, args.key, failed=failed, tuned_before=before)
        hint = _stored_values_hint(selection, args.key) if wanted else ""
        targets = {(r.device_id, r.tuner, r.key) for r in selection.rows}
        winners = len(targets)
        # A failed tune is forgotten on its own after failed_tune_retry_s: an age says nothing more about it.
        failures = (
            [f for f in shown.failed_keys(device, args.tuner) if _key_matches(f[2], wanted)] if before is None else []
        )
        targets |= set(failures)
    else:
        winners = sum(1 for _ in shown.rows(device, args.tuner))  # unreadable rows go too
        failures = shown.failed_keys(device, args.tuner)
    scope = _scope(args.tuner, device, args.key) + (f" tuned over {args.older_than} ago" if before else "")
    if not winners and not failures:
        sweep()
        print(f"nothing to clear: no stored winners{scope} in {shown.place}{hint}")
        return 0
    also = f" and {counted(len(failures), 'recorded failed tune')}" if failures else ""
    what = f"{counted(winners, 'stored winner')}{also}{scope} from {shown.place}"
    if not args.yes and not _confirmed(f"remove {what}?"):
        print("nothing removed", file=sys.stderr)
        return 1
    sweep()
    if wanted or before is not None:
        counts = [shown.store.delete(device_id, tuner, key) for device_id, tuner, key in sorted(targets)]
        removed = None if None in counts else sum(c or 0 for c in counts)
    else:
        removed = shown.store.delete(device, args.tuner)
    if removed is None:
        why = shown.cache.write_refused if shown.cache is not None else "the database did not answer"
        raise CliError(f"could not clear {shown.place}: {why}", 1)
    print(f"removed {counted(removed, 'stored winner')}{also}{scope} from {shown.place}")
    if isinstance(shown.store, PostgresStore):
        print(_fleet_clear_note(shown.store))
    return 0


def _fleet_clear_note(store: PostgresStore) -> str:
    """What a clear of the fleet's store does to the hosts, which keep copies of the winners they used."""
    if store.clears_recorded:
        return (
            "the fleet tunes these keys again: a host's own copy of a winner tuned before now is not offered back, "
            "and the first process to miss each key tunes it, once for all (running processes keep the winners "
            "they hold in memory until they restart)"
        )
    return (
        "this database has no table tunekit_clears, and this user may not create it: hosts that kept copies of "
        "these winners offer them back at their next miss instead of tuning; connect once as a user that may "
        "create tables (or clear each host's cache too: tunekit cache clear --store local)"
    )


def _scope(tuner: str | None, device: str | None, keys: list[str]) -> str:
    """Which part a filtered clear is of, in words: `` of tuner 'x' on device y with n=1024``."""
    parts = [f" of tuner {tuner!r}" if tuner else "", f" on device {short_device_id(device)}" if device else ""]
    if keys:
        parts.append(f" with {' '.join(keys)}")
    return "".join(parts)


def _confirmed(question: str) -> bool:
    """The user's yes on a terminal; a refusal naming ``--yes`` where there is no one to ask."""
    if not sys.stdin.isatty():
        raise CliError(
            f"cache clear would {question.rstrip('?')}; pass --yes to clear without being asked "
            "(standard input is not a terminal to ask on)"
        )
    sys.stderr.write(f"{question} [y/N] ")
    sys.stderr.flush()
    answer = sys.stdin.readline()
    return answer.strip().lower() in ("y", "yes")


def _sweep() -> None:
    swept = sweep_lock_files(_cache_file().parent)
    if swept:
        print(f"removed {counted(swept, 'lock file')} left by killed processes")


def export(args: argparse.Namespace) -> int:
    """Write the selected winners of the store ``--store`` names as a JSON bundle."""
    with _opened(args) as shown:
        if shown.store is None:
            raise CliError(f"no tuning cache at {shown.where}: nothing to export")
        selection = _select(shown, args.tuner, _device(shown, args.device), args.key)
    rows, bad = selection.rows, selection.bad
    bundle, left_out = CacheBundle.of(rows)
    bad.extend(left_out)
    if not rows and not bad and (args.tuner or args.device or args.key):
        # A filter that matches nothing (a call's size where the bucket is stored) would otherwise
        # write an empty bundle without a word, to be committed and imported as if it held winners.
        hint = _stored_values_hint(selection, args.key)
        print(f"no stored winners matching the filters in {shown.place}{hint}: the bundle is empty", file=sys.stderr)
    text = bundle.model_dump_json(indent=2) + "\n"
    if args.output is None:
        sys.stdout.write(text)
    else:
        target = Path(args.output)
        try:
            write_atomic(target, text)  # a reader never sees half a bundle
        except OSError as exc:
            raise CliError(f"cannot write {target}: {exc.strerror or exc}") from exc
        print(f"exported {counted(len(bundle.entries), 'winner')} to {target}", file=sys.stderr)
    return _report_unreadable(bad, "skipped unreadable row")


def import_bundle(args: argparse.Namespace) -> int:
    """Store a bundle's winners in the store ``--store`` names (the local cache is made when there is none)."""
    bundle = _read_bundle(Path(args.bundle))
    if _store_name(args) == "fleet":
        with _opened(args, write=True) as shown:
            assert isinstance(shown.store, PostgresStore)  # what _opened gives for the fleet
            return _import(args, bundle, shown.store, shown.place)
    file = _cache_file()
    cache = PersistentCache(file.parent)
    if not cache.available:
        raise CliError(f"cannot open the tuning cache {file}", 1)
    return _import(args, bundle, SqliteStore(cache), str(file))


def _read_bundle(source: Path) -> CacheBundle:
    """The bundle in ``source``, checked whole: a usage error naming what is wrong with it."""
    try:
        raw = source.read_bytes()
    except OSError as exc:
        raise CliError(f"cannot read {source}: {exc.strerror or exc}") from exc
    try:
        bundle = CacheBundle.model_validate_json(raw, context=STORED)
    except ValidationError as exc:
        if kind := other_kind(source, "cache bundle"):
            raise CliError(f"{source} is {kind}, not a cache bundle") from exc
        if other := other_version(raw, CacheBundle):
            raise CliError(
                f"{source} is a cache bundle this tunekit cannot import: {other}; import it with that version"
            ) from exc
        raise CliError(f"{source} is not a tunekit cache bundle: {validation_text(exc, whole='the file')}") from exc
    # Every field has a default (for export), so "{}" would validate as an empty bundle and import nothing.
    missing = sorted({"schema_version", "tunekit_major", "entries"} - bundle.model_fields_set)
    if missing:
        if kind := other_kind(source, "cache bundle"):  # a JSON document with other fields validates as an empty bundle
            raise CliError(f"{source} is {kind}, not a cache bundle")
        raise CliError(f"{source} is not a tunekit cache bundle: it lacks {', '.join(missing)}")
    if bundle.tunekit_major != MAJOR:
        raise CliError(
            f"{source} was exported by tunekit {bundle.tunekit_version}; its rows only load into tunekit "
            f"{bundle.tunekit_major}.x (this is {MAJOR}.x)"
        )
    return bundle


def _import(args: argparse.Namespace, bundle: CacheBundle, store: _Importable, place: str) -> int:
    stored = replaced = same = kept = 0
    for entry in bundle.entries:
        existing = store.get(entry.device_id, entry.tuner, entry.key)
        if isinstance(existing, tuple):
            if args.keep_existing:
                kept += 1
                continue
            checksum, value = existing
            # A bundle imported twice changes nothing, and says so rather than "imported N" again.
            if checksum == entry.checksum and value.model_dump(mode="json") == entry.value.model_dump(mode="json"):
                same += 1
                continue
            replaced += 1
        if not store.put(entry.device_id, entry.tuner, entry.key, entry.checksum, entry.value):
            raise CliError(f"could not write to {place}", 1)
        stored += 1
    notes = [
        f"{replaced} replaced the winner stored for {'its' if replaced == 1 else 'their'} key" if replaced else "",
        f"{same} already stored, unchanged" if same else "",
        f"{kept} already stored, kept" if kept else "",
    ]
    said = "; ".join(note for note in notes if note)
    print(f"imported {counted(stored, 'winner')} into {place}" + (f" ({said})" if said else ""))
    _warn_other_devices(Path(args.bundle), Counter(entry.device_id for entry in bundle.entries))
    return 0


def _warn_other_devices(source: Path, bundled: Counter[str]) -> None:
    """Say on stderr which of the bundle's device ids no backend finds here: their rows are stored, never served here.

    Still imported: a cache directory may serve another machine (shared, or copied on), and a device id
    changes with a driver or library version (the CPU client's with numpy's and its BLAS's), so an
    import that refused would block the one fix, exporting again there. The backends are asked one by
    one until every id is found: a bundle of this machine's CPU winners starts no OpenCL client.
    """
    missing = set(bundled)
    here: list[str] = []
    for _, client in found_clients() if missing else ():
        if isinstance(client, str):
            continue
        here.append(client.device_id)
        missing.discard(client.device_id)
        if not missing:
            return
    if not missing:
        return
    others = "\n".join(f"  {device_id} ({counted(bundled[device_id], 'winner')})" for device_id in sorted(missing))
    found = "\n".join(f"  {device_id}" for device_id in here) or "  none"
    print(
        f"tunekit: warning: {source} holds winners for {plural(len(missing), 'a device', 'devices')} "
        f"no backend finds on this machine:\n{others}\nthis machine's devices (`tunekit devices`):\n{found}\n"
        "They are imported, but a tuner serves a row only to its own device id, so tunes here measure "
        "those keys again; the rows serve a machine that has that device and uses this cache directory. "
        "A device id changes with its driver or library version (the CPU client's with numpy's and its "
        "BLAS's): to use them here, tune here or export again on a machine whose device id is this one's.",
        file=sys.stderr,
    )


def verify(_: argparse.Namespace) -> int:
    """Check the database's integrity and every row against the schema; exit 1 on any problem."""
    file = _cache_file()
    if not file.exists():
        print(f"no tuning cache at {file}: nothing to verify")
        return 0
    # as_uri() refuses a relative path, and TUNEKIT_CACHE_DIR=cache (relative) is a fine setting.
    uri = f"{file.absolute().as_uri()}?mode=ro"
    try:
        try:
            integrity, rows = _read_to_verify(uri)
        except sqlite3.OperationalError as exc:
            if is_corrupt(exc, file) or not is_unwritable(exc):
                raise
            # A WAL database is read through its -shm file, which SQLite cannot make in a directory this
            # process may not write (a read-only mount, another user's cache): read the file as it is on
            # disk, as a tuning process does there, since no process can be writing it either.
            integrity, rows = _read_to_verify(f"{uri}&immutable=1")
    except sqlite3.DatabaseError as exc:
        print(f"{file}: not a readable tuning cache: {exc}")
        return 1
    problems = [f"database: {line}" for line in integrity if line != "ok"]
    if header := header_problem(file):  # a read-only version byte passes integrity_check, yet refuses every write
        problems.insert(0, f"database {header}")
    other_major = 0
    for major, device_id, tuner, key, checksum, value in rows:
        if major != MAJOR:
            other_major += 1
            continue
        label = f"{tuner}/{key} on {device_id}"
        reason = _row_problem(device_id, tuner, key, checksum, value)
        if reason is not None:
            problems.append(f"{label}: {reason}")
    for problem in problems:
        print(problem)
    checked = len(rows) - other_major
    note = f" ({counted(other_major, 'row')} of other tunekit major versions ignored)" if other_major else ""
    print(f"{file}: {counted(checked, 'row')} checked, {counted(len(problems), 'problem')}{note}")
    return 1 if problems else 0


def _read_to_verify(uri: str) -> tuple[list[str], list[tuple[object, ...]]]:
    """SQLite's integrity check of the database at ``uri`` and its raw rows of winners."""
    connection = sqlite3.connect(uri, uri=True, timeout=30.0)
    try:
        integrity = [str(r[0]) for r in connection.execute("PRAGMA integrity_check").fetchall()]
        if has_no_tables(connection):  # made by a process stopped before it created them: an empty cache
            return integrity, []
        rows = connection.execute(
            "SELECT tunekit_major, device_id, tuner, key, checksum, value FROM winners"
        ).fetchall()
    finally:
        connection.close()
    return integrity, rows


def _row_problem(device_id: object, tuner: object, key: object, checksum: object, value: object) -> str | None:
    """Why a raw row would not load, or None when it is valid."""
    try:
        parsed = json.loads(value) if isinstance(value, str | bytes) else value
    except ValueError as exc:
        return f"value is not JSON: {exc}"
    try:
        BundleEntry.model_validate(
            {"device_id": device_id, "tuner": tuner, "key": key, "checksum": checksum, "value": parsed},
            context=STORED,
        )
    except ValidationError as exc:
        return validation_text(exc, limit=1)
    return None
