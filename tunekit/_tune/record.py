"""Committed records: winners per key bucket in one JSON file, kept next to the code.

A record says where each winner came from (tuner, tunable-set checksum, space hash,
device, tunekit version, measured median and sample count). Loading it for production
checks that provenance against the running code and device: a record measured for other
candidates, another space or another device is refused, because its winners answer
another question; drift that can only shift timings (another tunekit version, old or
thinly sampled measurements) is reported as warnings. A verified record seeds the tuner,
so production never re-tunes those keys.
"""

from __future__ import annotations

import errno
import json
import os
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any, TypeVar

from pydantic import ValidationError

from tunekit._base import settings as _settings
from tunekit._base.atomic import write_atomic
from tunekit._base.errors import RecordMismatch
from tunekit._base.file_lock import locked_directory
from tunekit._base.paths import file_in_the_way
from tunekit._base.persisted import STORED, known_versions
from tunekit._base.settings import AutotuneLevel
from tunekit._base.validation_text import validation_text
from tunekit._base.version import MAJOR, __version__
from tunekit._candidates.search_spec import check_search_names, config_name
from tunekit._candidates.space import Config, Space, SpaceModel, space_difference
from tunekit._candidates.tunable_set import TunableSet
from tunekit._keys.key import anchored_fields, is_autotune_key, key_to_json, off_buckets
from tunekit._measure.client import Client
from tunekit._search.result import SearchResult
from tunekit._store.file_kind import other_kind, other_kind_name
from tunekit._tune.local import LocalTuner
from tunekit._tune.record_device import RunningDevice, device_refusal, running_device, stack_drift
from tunekit._tune.tuner import Tuner
from tunekit._values.outcome import Measured
from tunekit._values.record_file import RecordEntry, RecordFile, entry_key
from tunekit._values.records import AutotuneRecord, SearchEnded

__all__ = ["Record"]


_STALE_AFTER = timedelta(days=365)
_CLOCK_SLACK = timedelta(days=1)


K = TypeVar("K")
Out = TypeVar("Out")


@dataclass
class Record:
    """Committed winners of one tuner on one device: ``add`` search results, ``save``, ``load_verified``."""

    tuner: str
    device_id: str
    checksum: str
    space_hash: str | None = None
    tunekit_version: str = __version__
    entries: dict[str, RecordEntry] = field(default_factory=dict)
    warnings: tuple[str, ...] = ()
    autotune_level: AutotuneLevel | None = None
    """The level whose anchor buckets the keys are (``minimal`` squares every anchor base, so
    ``n=2048`` is a bucket at ``balanced`` and none at ``minimal``); None: not known (an older file)."""
    newer_fields: dict[str, Any] = field(default_factory=dict, repr=False)
    """Top-level fields of the file that a newer tunekit wrote and this one does not know: saved back as read."""
    anchored_fields: tuple[str, ...] | None = None
    """The anchored fields of the entries' key class: with none, the keys are buckets at every level
    and the record applies at any ``autotune_level``. None: no entry yet, or an older file."""
    tunables: TunableSet[Any, Any] | None = field(default=None, repr=False, compare=False)
    """The set the record was made for (``for_tunables``) or verified against (``load_verified``):
    ``add`` names winners as its candidates. None after a plain ``load``: names are ``config.name``."""
    space: SpaceModel | None = field(default=None, repr=False)
    """The space of ``space_hash``, described (``Space.describe()``); None: no space, or an older file."""
    device_model: str | None = None
    """The hardware part of ``device_id`` (``tk.SupportsDeviceModel``); None: its client did not say, or an old file."""
    running_device_id: str | None = field(default=None, compare=False)
    """The running device ``load_verified`` accepted the record for: ``device_id``, or another stack's id on the
    same model. ``seed`` installs the winners there; ``device_id`` stays where they were measured, and is what
    ``save`` writes. None after a plain ``load``: ``seed`` installs into ``device_id``'s tuner."""
    _added: set[str] = field(default_factory=set, init=False, repr=False, compare=False)
    """Keys added (``add``, ``add_tune``) since the record was made, loaded or last saved: ``save``
    writes these over the file's entries and keeps the file's others."""
    _held: set[str] = field(default_factory=set, init=False, repr=False, compare=False)
    """Keys the record held when it was loaded or last saved: one of them no longer in ``entries``
    was removed by the caller (``del record.entries[k]``), and ``save`` drops it from the file too."""
    _config_named: bool = field(default=False, init=False, repr=False, compare=False)
    """Without a set: the entries were found named ``config.name``. Checked once, since ``add``
    then writes only such names (checked at every name of every ``add``, it read every entry each time)."""

    @classmethod
    def for_tunables(
        cls, tuner: str | LocalTuner[Any, Any] | Tuner, device_id: str | Client, tunables: TunableSet[Any, Any]
    ) -> Record:
        """An empty record for winners chosen among ``tunables``, measured on ``device_id``.

        ``tuner``: the tuner's name, or the ``tk.LocalTuner`` the record serves. ``device_id``: the
        client the winners are measured on, or its ``device_id``. Given the client, the record also
        keeps its ``device_model`` (``tk.SupportsDeviceModel``), so that it is used on the same
        hardware under another driver or numpy (with a warning) instead of being refused there.
        """
        where = "tk.Record.for_tunables"
        # The tk.LocalTuner the record serves, as load_verified(tuner=) and seed take it: it was refused
        # as "must be a non-empty str, got <tunekit._tune.local.LocalTuner object at 0x...>".
        if isinstance(tuner, LocalTuner | Tuner):
            tuner = tuner.name
        # An empty tuner or device id was saved, and such a record matches no tuner that can run.
        device = RunningDevice(device_id, None) if isinstance(device_id, str) else running_device(where, device_id)
        check_search_names(where, tuner=tuner, device_id=device.id)
        if not isinstance(tunables, TunableSet):
            raise TypeError(f"tk.Record.for_tunables() takes a tk.TunableSet, got {type(tunables).__name__}")
        space_hash = tunables.extras.get("checksum:space")
        return cls(
            tuner,
            device.id,
            tunables.checksum(),
            space_hash if isinstance(space_hash, str) else None,
            autotune_level=_settings.current().autotune_level,
            tunables=tunables,
            space=_described(tunables),
            device_model=device.model,
        )

    def add(self, key: object, result: SearchResult, *, runners_up: int = 4) -> RecordEntry:
        """Record ``result``'s winner for ``key``'s bucket (replacing an earlier one)."""
        if not is_autotune_key(key):
            raise TypeError(f"Record.add() takes an @tk.autotune_key instance, got {type(key).__name__}")
        if isinstance(result, AutotuneRecord):
            raise TypeError(
                "Record.add() takes the tk.SearchResult of tk.search or tk.tune_objective; the tk.AutotuneRecord "
                "of a tune execute ran is added with record.add_tune(tune, KeyClass)"
            )
        if not isinstance(result, SearchResult):  # result.best (a Trial) failed as "no attribute 'tuner'"
            raise TypeError(
                f"Record.add() takes the tk.SearchResult that tk.search or tk.tune_objective returned, "
                f"got {type(result).__name__}"
            )
        entry = self._add(key, self._of_search(key, result, runners_up))
        if self.space is None and result.space.hash == self.space_hash:  # a record of an older file learns it
            self.space = result.space.describe()
        return entry

    def add_tune(self, tune: AutotuneRecord, key_type: type[Any], *, runners_up: int = 4) -> RecordEntry:
        """Record the winner of a tune ``execute`` ran for its key's bucket (replacing an earlier one).

        ``tune`` is the ``tk.AutotuneRecord`` the tune emitted: a set searched inside ``execute``
        (``with_search``) has no search result to ``add``, so its winners are committed from
        these. Collect them with ``tk.LocalTuner(name, sinks=[tunes.append])``, or read them
        back from a ``TUNEKIT_RECORD`` file with ``tk.read_records``. ``key_type`` is the
        ``@tk.autotune_key`` class the key is built from, as for ``seed``.
        """
        if not isinstance(tune, AutotuneRecord):
            raise TypeError(
                f"Record.add_tune() takes the tk.AutotuneRecord of a tune execute ran, got {type(tune).__name__}"
                + ("; a search result is added with record.add(key, result)" if isinstance(tune, SearchResult) else "")
            )
        if not (isinstance(key_type, type) and getattr(key_type, "__tunekit_key__", False)):
            raise TypeError(
                f"Record.add_tune(key_type=...) takes the @tk.autotune_key class the tune's key is made of, "
                f"got {key_type.__qualname__ if isinstance(key_type, type) else repr(key_type)}"
            )
        try:
            key = key_type(**tune.key)
        except TypeError as exc:
            raise RecordMismatch(f"the tune's key {tune.key} does not build a {key_type.__name__}: {exc}") from None
        return self._add(key, self._of_tune(key, tune, runners_up))

    def _add(self, key: object, made: dict[str, Any]) -> RecordEntry:
        """Check ``key`` against the record's set, key class and level, then store the entry ``made``."""
        names: list[str] = made["ranking"]
        if self.tunables is not None and (strangers := [n for n in names if self.tunables.index_of(n) is None]):
            raise RecordMismatch(
                f"the search's {strangers} are not candidates of the record's {self.tunables!r}: it searched "
                "another space or kernel than the set the record was made for"
            )
        anchored = anchored_fields(type(key))
        if self.entries and self.anchored_fields is not None and self.anchored_fields != anchored:
            raise RecordMismatch(
                f"this record holds keys anchored on {list(self.anchored_fields)}, but {type(key).__name__} anchors "
                f"{list(anchored)}; one record holds the keys of one key class"
            )
        if self.autotune_level is None and not self.entries:
            self.autotune_level = _settings.current().autotune_level
        # The key was anchored when it was built, at the level then in force: whether it is a bucket
        # of the record's level is a question about its values, not about the level in force now.
        level = self.autotune_level
        if level is not None and (moved := off_buckets(key, _settings.level_anchor_exponent(level))):
            buckets = ", ".join(
                f"{name}={getattr(key, name)} falls in bucket {bucket}" for name, bucket in moved.items()
            )
            raise RecordMismatch(
                f"{key!r} is no key bucket of autotune_level={level!r}, whose buckets this record holds ({buckets} "
                f"there): it was built at another level; build the keys at {level!r} "
                f"(tk.configure(autotune_level={level!r})), or start a new record at the level they were built at"
            )
        entry = RecordEntry(key=dict(json.loads(key_to_json(key))), winner=names[0], **made)
        if not self.entries:
            self.anchored_fields = anchored
        self.entries[key_to_json(key)] = entry
        self._added.add(key_to_json(key))
        return entry

    def _of_search(self, key: object, result: SearchResult, runners_up: int) -> dict[str, Any]:
        """The entry fields of a search's result."""
        if result.tuner != self.tuner or result.device_id != self.device_id:
            raise RecordMismatch(self._not_measured_here("search", result.tuner, result.device_id))
        if result.key is not None and result.key != key:
            # A loop that searched one key and added another committed a winner for a size it was
            # never measured at, which load_verified cannot see.
            raise RecordMismatch(
                f"the search ran for key {result.key!r}, not {key!r}; add it under its own key: "
                "record.add(result.key, result)"
            )
        if self.space_hash is not None and result.space.hash != self.space_hash:
            changed = f" ({space_difference(self.space, result.space.describe())})" if self.space is not None else ""
            raise RecordMismatch(
                f"the search ran over space {result.space.hash}; this record is for {self.space_hash}{changed}"
            )
        ranking = result.ranking
        if not ranking:
            raise ValueError(f"the search for {key!r} measured nothing successfully; there is no winner to record")
        best = ranking[0]
        if not isinstance(best.outcome, Measured):
            raise AssertionError("ranking holds measured trials only")
        durations = best.outcome.durations
        return dict(
            ranking=[self._name_of(t.config) for t in ranking[: 1 + runners_up]],
            config=best.config.to_dict(),
            median_ns=durations.score,
            samples=len(durations.samples_ns),
            strategy=result.strategy,
            evaluations=result.evaluations,
            stopped_by=result.stopped_by,
        )

    def _of_tune(self, key: object, tune: AutotuneRecord, runners_up: int) -> dict[str, Any]:
        """The entry fields of the record of a tune ``execute`` ran (a search inside it, or a plain tune)."""
        if tune.tuner != self.tuner or tune.device_id != self.device_id:
            raise RecordMismatch(self._not_measured_here("tune", tune.tuner, tune.device_id))
        if tune.key != json.loads(key_to_json(key)):
            # Built again here, the key anchors at the running level: a tune at another one lands elsewhere.
            raise RecordMismatch(
                f"the tune's key {tune.key} is no key bucket here, where it builds {key!r}: it was tuned at another "
                "autotune level, or the key's anchors changed; tune again at this level"
            )
        if tune.checksum != self.checksum:
            # A tk.search record carries its space's hash here: it is added as its SearchResult.
            raise RecordMismatch(
                f"the tune measured a set of checksum {tune.checksum}, this record's candidates have {self.checksum}: "
                "add tunes of the set the record was made for (tk.Record.for_tunables(tuner, device_id, tunables)); "
                "a tk.search is added as the SearchResult it returned"
            )
        measured = {c.name: c for c in tune.candidates if c.status == "measured" and c.stats is not None}
        winner = measured.get(tune.winner) if tune.decision == "tuned" and tune.winner is not None else None
        if winner is None or winner.stats is None:
            raise ValueError(
                f"the {tune.decision!r} record of {tune.key} has no measured winner to commit "
                f"(winner {tune.winner!r}); add the record of a tune that measured its candidates"
            )
        rest = sorted(
            (c for c in measured.values() if c is not winner), key=lambda c: c.stats.median_ns if c.stats else 0
        )
        ended = next((e for e in tune.events if isinstance(e, SearchEnded)), None)
        fn = (
            self.tunables.tunables[i].fn
            if self.tunables and (i := self.tunables.index_of(winner.name)) is not None
            else None
        )
        config = getattr(fn, "config", None)
        return dict(
            ranking=[winner.name, *(c.name for c in rest[:runners_up])],
            config=config.to_dict() if isinstance(config, Config) else None,
            median_ns=winner.stats.median_ns,
            samples=len(winner.samples_ns),
            strategy=ended.strategy if ended else None,
            evaluations=ended.evaluations if ended else None,
            stopped_by=ended.stopped_by if ended else None,
            measured_at=tune.timestamp,
        )

    def _not_measured_here(self, what: str, tuner: str, device_id: str) -> str:
        """Why a search or tune of ``tuner`` on ``device_id`` is not added to this record."""
        said = f"the {what} ran for tuner {tuner!r} on {device_id!r}; this record is for tuner {self.tuner!r} on "
        said += repr(self.device_id)
        if tuner == self.tuner and device_id == self.running_device_id:
            # Added, its winner would be saved as measured under the record's stack: a record names one stack for all.
            said += (
                ", the same device model under another software stack: one record holds winners measured under one "
                "stack, so re-tune its keys here into a new record (tk.Record.for_tunables(tuner, client, tunables)) "
                "to refresh it"
            )
        return said

    def get(self, key: object) -> RecordEntry | None:
        """The entry of ``key``'s bucket (the key as built: anchored), or None when the record has none."""
        if not is_autotune_key(key):
            raise TypeError(f"Record.get() takes an @tk.autotune_key instance, got {type(key).__name__}")
        return self.entries.get(key_to_json(key))

    def __contains__(self, key: object) -> bool:
        """Whether the record holds ``key``'s bucket (``Shape(n=1000) in record``)."""
        return is_autotune_key(key) and key_to_json(key) in self.entries

    def _name_of(self, config: Config) -> str:
        """The candidate name of ``config`` in the record's set.

        A set names a configuration's candidate its own way (an OpenCL ``KernelTemplate``
        calls it ``kernel[BLOCK=64]``, ``from_space`` ``BLOCK=64``); naming it ``config.name``
        regardless wrote records that ``load_verified`` then refused as naming no candidate.
        """
        if self.tunables is not None:
            name_of: Callable[[Config], str] = self.tunables.extras.get("space_name_of", config_name)
            return name_of(config)
        if self._config_named:
            return config.name
        # A plain load() knows no set: its entries show whether the set names candidates config.name.
        for entry in self.entries.values():
            if entry.config is None:
                continue
            named = Config(list(entry.config), list(entry.config.values())).name
            if entry.winner != named:
                raise RecordMismatch(
                    f"this record's set names its candidates its own way ({entry.winner!r} for {named!r}), which "
                    "tk.Record.load() cannot know; read the record with "
                    "tk.Record.load_verified(path, tunables, client) to add to it"
                )
        self._config_named = True
        return config.name

    def model(self) -> RecordFile:
        """The record as its pydantic model, entries in a stable order (diff-friendly)."""
        known = RecordFile(
            tuner=self.tuner,
            device_id=self.device_id,
            device_model=self.device_model,
            checksum=self.checksum,
            space_hash=self.space_hash,
            space=self.space,
            tunekit_version=self.tunekit_version,
            autotune_level=self.autotune_level,
            anchored_fields=None if self.anchored_fields is None else list(self.anchored_fields),
            entries=[self.entries[k] for k in sorted(self.entries)],
        )
        # The newer fields were read back from disk: built into the model in code, they would be
        # refused as unknown (Persisted), so they are carried over as the extras they were read as.
        return known.model_copy(update=self.newer_fields) if self.newer_fields else known

    def save(self, path: str | Path) -> None:
        """Write atomically (temp file + rename): a crash leaves the old file or the new, never half.

        A record of the same tuner, device, candidates, space and autotune level already at
        ``path`` is added to, not replaced: its entries for keys this record did not add since
        it was made or loaded are kept (but for those deleted from ``entries`` after a load),
        so processes that each add their keys to one file (one run per shape, in parallel) lose
        none of them. Read, merge and write happen under a lock on the directory. This record
        then holds the merged entries. A record of another provenance is replaced; a file
        holding anything else (a trial log, a Kernel Tuner cache, a record of another schema
        version) raises FileExistsError and is left as it is. The file keeps the mode of the
        one it replaces; a new one gets the mode of a plain
        ``open(path, "w")``, so a committed record is readable wherever it is checked out.
        """
        path = Path(path).expanduser()  # else "~/gemm.json" was saved under a directory named "~"
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
        except (FileExistsError, NotADirectoryError):  # it said only "[Errno 17] File exists: 'r1.py'"
            blocking = file_in_the_way(path) or path.parent
            raise NotADirectoryError(
                errno.ENOTDIR,
                f"cannot save the record: {blocking} is a file, not a directory; give a path in a directory",
                str(path),
            ) from None
        try:
            # Each process read the file, added its key and wrote the file whole: of several run at
            # once, the last writer's record replaced the others', whose keys were lost unnoticed.
            with locked_directory(Path(os.path.realpath(path)).parent, path.name):
                self._merge_saved(path)
                write_atomic(path, self.model().model_dump_json(indent=2) + "\n")
            self._added.clear()
            self._held = set(self.entries)
        except (IsADirectoryError, FileExistsError):  # their messages say what to give
            raise
        except OSError as exc:
            # It named the temporary file written first beside the record ('.gemm.json.86305799eca6.tmp'),
            # a file the caller never asked for, instead of the record and what to do.
            raise type(exc)(
                exc.errno,
                f"cannot save the record {path}: {exc.strerror or exc}; give a path in a directory this process can "
                "write",
                str(path),
            ) from None

    def _merge_saved(self, path: Path) -> None:
        """Take in the entries of the record at ``path`` that this one did not add, when it is of the same provenance.

        A record of other candidates, device or level is replaced as it stands: its entries
        answer another question. A file that holds something else is refused (FileExistsError).
        """
        try:
            data = path.read_bytes()
        except OSError:  # none there (or a directory, which write_atomic names)
            return
        try:
            saved = RecordFile.model_validate_json(data, context=STORED)
        except ValidationError:
            if data.strip():
                # A trial log, a Kernel Tuner cache or a source file given as the path was replaced
                # without a word: hours of measurements lost to a wrong argument.
                raise FileExistsError(errno.EEXIST, _not_replaced(path), str(path)) from None
            return
        same = (saved.tuner, saved.device_id, saved.checksum, saved.space_hash, saved.autotune_level) == (
            self.tuner,
            self.device_id,
            self.checksum,
            self.space_hash,
            self.autotune_level,
        )
        fields = None if saved.anchored_fields is None else tuple(saved.anchored_fields)
        if not same or (self.anchored_fields is not None and fields is not None and fields != self.anchored_fields):
            return
        # An entry removed from a loaded record stays removed: merged back from the file, it could not be dropped.
        removed = self._held - set(self.entries)
        merged = {k: e for e in saved.entries if (k := entry_key(e)) not in removed}
        # A loaded entry that another process has since re-tuned is not put back over the newer one.
        merged.update({k: e for k, e in self.entries.items() if k in self._added or k not in merged})
        self.entries = merged
        if self.anchored_fields is None:
            self.anchored_fields = fields
        if self.space is None:
            self.space = saved.space
        if self.device_model is None:
            self.device_model = saved.device_model

    @classmethod
    def load(cls, path: str | Path) -> Record:
        """Read a record file (validated; nothing in it is executed)."""
        path = Path(path).expanduser()
        try:
            data = RecordFile.model_validate_json(path.read_bytes(), context=STORED)
        except FileNotFoundError:
            raise FileNotFoundError(
                f"no committed record at {path}; create one with tk.Record.for_tunables(tuner, client, tunables), "
                "record.add(key, search_result) (or record.add_tune(tune, KeyClass)) and record.save(path)"
            ) from None
        except IsADirectoryError:  # said only "[Errno 21] Is a directory", where save() says what to give
            raise IsADirectoryError(
                errno.EISDIR,
                f"{os.strerror(errno.EISDIR)}; give the record's file path in it (e.g. gemm.json)",
                str(path),
            ) from None
        except ValidationError as exc:
            # A trial log or cache bundle given here listed their fields as wrong; say what the file is.
            if kind := other_kind(path, "committed record"):
                raise RecordMismatch(f"{path} is {kind}, not a committed record (tk.Record.save)") from None
            known = known_versions(RecordFile)
            if (version := _schema_version(path)) not in (None, *known):
                # It said only "schema_version: Input should be 1", as for a file that is no record at all.
                raise RecordMismatch(
                    f"{path} is a committed record of schema_version {version!r}, written by another tunekit "
                    f"version; this tunekit ({__version__}) reads schema_version {' and '.join(map(str, known))}: use "
                    "that version, or re-tune and commit a new record"
                ) from None
            raise RecordMismatch(
                f"{path} is not a valid tunekit record file (schema_version {' and '.join(map(str, known))}): "
                f"{validation_text(exc, whole='file')}"
            ) from None
        record = cls(
            tuner=data.tuner,
            device_id=data.device_id,
            device_model=data.device_model,
            checksum=data.checksum,
            space_hash=data.space_hash,
            space=data.space,
            tunekit_version=data.tunekit_version,
            entries={entry_key(e): e for e in data.entries},
            autotune_level=data.autotune_level,
            anchored_fields=None if data.anchored_fields is None else tuple(data.anchored_fields),
            newer_fields=dict(data.model_extra or {}),
        )
        record._held = set(record.entries)
        return record

    @classmethod
    def load_verified(
        cls,
        path: str | Path,
        tunables: TunableSet[Any, Any],
        device_id: str | Client,
        *,
        tuner: str | LocalTuner[Any, Any] | Tuner | None = None,
    ) -> Record:
        """Load ``path`` and check its provenance against ``tunables``, ``device_id`` and ``tuner``.

        Raises RecordMismatch when the device, the tuner, the candidates (checksum), the space or
        tunekit's major version differ, or a winner or runner-up is not a candidate. Drift that
        only shifts timings is returned in ``record.warnings``. ``device_id``: the running
        client, or its ``device_id``. Given a client that says its ``device_model``
        (``tk.SupportsDeviceModel``), a record of the same model measured under another
        software stack (driver, numpy) is used, with a warning naming both, and :meth:`seed`
        installs it for the running device; another model is refused. Given a device id, or
        for a record that does not say its model, the device ids must be equal. ``tuner``: the
        name, or the ``tk.LocalTuner``, the record is to serve; a record made for another
        tuner's keys is refused here, as :meth:`seed` refuses it (None: checked only by
        ``seed``, so a caller that reads winners with ``get`` should pass it).
        """
        # A tk.Space given as tunables failed as "'Space' object has no attribute 'checksum'".
        _check_tunables("tk.Record.load_verified", tunables)
        here = running_device("tk.Record.load_verified", device_id)
        expected = _tuner_name("tk.Record.load_verified", tuner)
        record = cls.load(path)
        problems = []
        if (device := device_refusal(record.device_id, record.device_model, here)) is not None:
            problems.append(device)
        if expected is not None and record.tuner != expected:
            problems.append(f"it was made for tuner {record.tuner!r}, this is tuner {expected!r}")
        if record.checksum != tunables.checksum():
            problems.append(
                f"its candidates had checksum {record.checksum}, the running TunableSet has {tunables.checksum()} "
                "(a tunable, its version, from_space's build code, or the space changed)"
            )
        space_hash = tunables.extras.get("checksum:space")
        if record.space_hash is not None and space_hash is not None and record.space_hash != space_hash:
            running = _described(tunables)
            changed = f" ({space_difference(record.space, running)})" if record.space and running else ""
            problems.append(
                f"it was searched over space {record.space_hash}, the running space is {space_hash}{changed}"
            )
        major = record.tunekit_version.split(".")[0]
        if major != str(MAJOR):
            problems.append(f"it was written by tunekit {record.tunekit_version}, this is {__version__}")
        if strangers := _not_candidates(record.entries.values(), tunables):
            problems.append(f"{strangers} in its rankings are not candidates of the running TunableSet")
        problems.extend(_configs_not_winners(record.entries.values(), tunables))
        if (level := _level_mismatch(record, record.anchored_fields)) is not None:
            problems.append(level)
        if problems:
            raise RecordMismatch(
                f"{path} does not apply here: " + "; ".join(problems) + "; re-tune and commit a new record"
            )
        stack = stack_drift(record.device_id, here)
        record.warnings = tuple([f"{path}: {stack}"] if stack else []) + tuple(_drift(record, Path(path)))
        record.tunables = tunables
        record.running_device_id = here.id
        if record.device_id == here.id and record.device_model is None:  # a record of an older file learns it
            record.device_model = here.model
        return record

    def seed(self, tuner: Tuner | LocalTuner[K, Out], tunables: TunableSet[K, Out], key_type: type[K]) -> int:
        """Install every winner into ``tuner`` so those keys are never tuned; returns how many.

        The winners serve one device id: the running client's that ``load_verified`` accepted the
        record for, or, after a plain ``load``, the ``device_id`` the record was measured on. A
        ``tk.LocalTuner`` seeded from a plain ``load`` that then runs on another device id tunes
        there, and logs a warning at its first call on it saying why (and that ``load_verified``
        with the client moves a record of the same device model to it); one that had already run
        there says it at the first key it does not find in memory.

        Typed like ``LocalTuner.execute``: a key class or set of another key than the tuner's is
        a type error (it took any tuner, set and class, so mypy let ``seed(T, tunables, OtherKey)`` by).
        """
        if not isinstance(tuner, Tuner | LocalTuner):
            raise TypeError(f"Record.seed() takes the tk.LocalTuner (or Tuner) to seed, got {type(tuner).__name__}")
        _check_tunables("Record.seed", tunables)
        # A class that is no key (dict, the key's module) built from the entry and failed deep in the tuner.
        if not (isinstance(key_type, type) and getattr(key_type, "__tunekit_key__", False)):
            raise TypeError(
                f"Record.seed(key_type=...) takes the @tk.autotune_key class the operation's keys are made of, "
                f"got {key_type.__qualname__ if isinstance(key_type, type) else repr(key_type)}"
            )
        # Verified for the same model under another stack, the winners serve the running device's tuner:
        # execute looks them up by the running client's device_id.
        serves = self.running_device_id or self.device_id
        local = tuner if isinstance(tuner, LocalTuner) else None
        if isinstance(tuner, LocalTuner):
            tuner = tuner.tuner(serves)
        if tuner.name != self.tuner or tuner.device_id not in (serves, self.device_id):
            raise RecordMismatch(_not_this_tuner(self, tuner))
        if strangers := _not_candidates(self.entries.values(), tunables):
            raise RecordMismatch(
                f"{strangers} in this record's rankings are not candidates of {tunables!r}; "
                "re-tune and commit a new record"
            )
        if (level := _level_mismatch(self, anchored_fields(key_type))) is not None:
            raise RecordMismatch(f"this record does not apply here: {level}; or re-tune and commit a new record")
        keys = []
        moved = []
        for stored, entry in self.entries.items():
            try:
                key = key_type(**entry.key)
            except TypeError as exc:
                raise RecordMismatch(f"record key {entry.key} does not build a {key_type.__name__}: {exc}") from None
            # Building the key anchors it again at the running level: a stored bucket that moves is
            # no bucket here, and seeding it would serve sizes it was not measured for (and land
            # two entries on one bucket, the last silently winning).
            if key_to_json(key) != stored:
                moved.append(f"{entry.key} -> {json.loads(key_to_json(key))}")
            keys.append((key, entry))
        if moved:
            level = _settings.current().autotune_level
            # A record that keeps its level passed the level check above: its keys moved for another
            # reason, which the message named as "it predates records keeping theirs", true only of old files.
            why = (
                "the record was made at another autotune level (it predates records keeping theirs) or the key's "
                "anchors changed; seed it at the level it was made at, or re-tune and commit a new record"
                if self.autotune_level is None
                else f"the record was made at {self.autotune_level!r} too, so the key class's anchors changed since "
                "it was made, or its keys were edited by hand; re-tune and commit a new record"
            )
            raise RecordMismatch(
                f"{len(moved)} of this record's keys are not key buckets of {key_type.__name__} at "
                f"autotune_level={level!r} ({', '.join(moved[:3])}{', ...' if len(moved) > 3 else ''}): {why}"
            )
        for key, entry in keys:  # nothing installed before every key is known to be sound
            tuner.seed(tunables, key, entry.ranking)
        if local is not None and self.running_device_id is None:
            # Unverified, the record serves only the device it names: the operation run on another
            # device id tuned its keys without a word; it now warns there, naming load_verified.
            local._seeded_unverified(self.device_id, self.device_model)
        return len(self.entries)


def _described(tunables: TunableSet[Any, Any]) -> SpaceModel | None:
    """The space ``tunables`` was made from (``from_space``, a template), described; None without one."""
    space = tunables.extras.get("space")
    return space.describe() if isinstance(space, Space) else None


def _tuner_name(where: str, tuner: object) -> str | None:
    """The tuner name ``tuner`` (a name, a ``LocalTuner`` or a ``Tuner``) stands for; None for None."""
    if tuner is None:
        return None
    if isinstance(tuner, LocalTuner | Tuner):
        return tuner.name
    if isinstance(tuner, str) and tuner:
        return tuner
    raise TypeError(
        f"{where}(tuner=...) takes the tuner the record serves: its name (a non-empty str) or the tk.LocalTuner, "
        f"got {tuner!r}"
    )


def _not_this_tuner(record: Record, tuner: Tuner) -> str:
    """Why ``record`` cannot seed ``tuner`` (another tuner's or device's winners), and what to do."""
    problems, remedies = [], []
    if tuner.name != record.tuner:
        problems.append(f"it is for tuner {record.tuner!r}, this is tuner {tuner.name!r}")
        remedies.append(
            f"seed the tuner it was made for (tk.LocalTuner({record.tuner!r})), or the record committed for "
            f"{tuner.name!r} into this one"
        )
    if tuner.device_id not in (record.device_id, record.running_device_id):
        problems.append(f"it was measured on device {record.device_id!r}, this tuner runs on {tuner.device_id!r}")
        remedies.append(
            f"seed the record committed for {tuner.device_id!r}"
            + (
                f", or, for the same device model ({record.device_model!r}) under another software stack, verify "
                "this one with the running client first"
                if record.device_model is not None and record.running_device_id is None
                else ""
            )
        )
    return (
        "this record does not apply here: "
        + "; ".join(problems)
        + "; "
        + "; ".join(remedies)
        + " (tk.Record.load_verified(path, tunables, client, tuner=...) checks both at load), "
        "or re-tune and commit a new record"
    )


def _check_tunables(where: str, tunables: object) -> None:
    if not isinstance(tunables, TunableSet):
        raise TypeError(
            f"{where}() takes the running tk.TunableSet (its checksum is checked), got {type(tunables).__name__}; "
            "e.g. tk.TunableSet.from_space(space, build, key=...)"
        )


def _level_mismatch(record: Record, anchored: tuple[str, ...] | None) -> str | None:
    """Why ``record``'s keys are no buckets of the running autotune level, or None when they are (or are unknown).

    Only ``minimal`` changes the buckets; ``balanced``, ``extensive`` and ``full`` share theirs
    (another level there is drift, a warning). Keys of a class with no ``anchored`` field are
    the same at every level.
    """
    level = _settings.current().autotune_level
    if record.autotune_level is None or anchored == () or _same_buckets(record.autotune_level, level):
        return None
    return (
        f"its keys are anchor buckets of autotune_level={record.autotune_level!r} and this process runs at "
        f"{level!r}, whose buckets differ (entries would serve sizes they were not measured for, or leave "
        f"buckets to be tuned in production); run at {record.autotune_level!r} to use it "
        f"(TUNEKIT_AUTOTUNE_LEVEL={record.autotune_level} or tk.configure(autotune_level={record.autotune_level!r}))"
    )


def _same_buckets(made: AutotuneLevel, running: AutotuneLevel) -> bool:
    return _settings.level_anchor_exponent(made) == _settings.level_anchor_exponent(running)


def _not_replaced(path: Path) -> str:
    """Why ``save`` leaves the file at ``path`` alone: what it holds, and what to do."""
    known = known_versions(RecordFile)
    if (version := _schema_version(path)) is not None and version not in known:
        what = f"a committed record of schema_version {version!r}, written by another tunekit version"
    elif version is not None:
        # This version's record that does not validate (a hand-merged file with a key twice): not another version's.
        what = "a committed record that does not validate (tk.Record.load says why; fix or delete it)"
    elif kind := other_kind_name(path, "committed record"):
        what = kind
    else:
        what = "a file that is no committed record"
    return (
        f"not saving the record over {path}: it holds {what}, which the record would replace; give the record "
        "its own path (e.g. tuning/gemm.json), or delete that file first"
    )


def _schema_version(path: Path) -> object:
    """The ``schema_version`` a record file of any version declares; None for a file that is no record."""
    try:
        data = json.loads(path.read_bytes())
    except (OSError, ValueError):
        return None
    # Only a file with a record's fields is taken for another version's record.
    is_record = isinstance(data, dict) and {"tuner", "device_id", "entries"} <= data.keys()
    return data.get("schema_version") if is_record else None


def _not_candidates(entries: Iterable[RecordEntry], tunables: TunableSet[Any, Any]) -> list[str]:
    """Names in the entries' rankings (winners included) that ``tunables`` does not hold."""
    return sorted({name for e in entries for name in e.ranking if tunables.index_of(name) is None})


def _configs_not_winners(entries: Iterable[RecordEntry], tunables: TunableSet[Any, Any]) -> list[str]:
    """Entries whose ``config`` names another candidate than their winner (a hand edit of one of the two).

    ``seed`` installs the ranking's names, so such an entry ran its winner while the committed
    file, read in a review, showed another configuration.
    """
    name_of: Callable[[Config], str] = tunables.extras.get("space_name_of", config_name)
    out = []
    for entry in entries:
        if entry.config is None:
            continue
        named = name_of(Config(list(entry.config), list(entry.config.values())))
        if named != entry.winner:
            out.append(
                f"entry {entry.key}: its config {entry.config} is candidate {named!r}, not its winner {entry.winner!r}"
            )
    return out


def _required_samples(settings: _settings.Settings) -> tuple[int, str]:
    """The kept samples the schedule in force gives a winner, and the setting that says so.

    Only the fixed schedule takes ``samples``; the adaptive one keeps between ``min_samples``
    and ``max_samples``, so comparing its records with ``samples`` warned on every one.
    """
    if settings.adaptive:
        return settings.min_samples, "the adaptive schedule's min_samples"
    return settings.samples, "the fixed schedule's samples"


def _drift(record: Record, path: Path) -> list[str]:
    out = []
    if not record.entries:  # loaded and seeded without a word, it left production to tune every key
        out.append(f"{path}: holds no entries, so every key is tuned here; add search results (record.add) and save")
    if record.tunekit_version != __version__:
        out.append(f"{path}: written by tunekit {record.tunekit_version}, running {__version__}")
    level = _settings.current().autotune_level
    if record.autotune_level is not None and record.autotune_level != level:
        # Same buckets (else load_verified refused it), but another short-circuit threshold chose the winners.
        out.append(
            f"{path}: tuned at autotune_level={record.autotune_level!r}, running at {level!r}: the same key "
            "buckets, but the winners were chosen under that level's roofline short-circuit threshold"
        )
    if record.autotune_level is None:
        out.append(
            f"{path}: written before records kept their autotune level, so its keys are taken as buckets of "
            f"autotune_level={_settings.current().autotune_level!r}; seed() refuses keys that are no buckets at "
            "this level, but cannot tell a record of another level whose keys all happen to be: save it again "
            "from a tune at the level it is used at"
        )
    samples, setting = _required_samples(_settings.current())
    now = datetime.now(UTC)
    for entry in record.entries.values():
        if entry.samples < samples:
            out.append(f"{path}: {entry.key} was measured with {entry.samples} samples (< {samples}, {setting})")
        if now - entry.measured_at > _STALE_AFTER:
            out.append(f"{path}: {entry.key} was measured on {entry.measured_at:%Y-%m-%d}, over a year ago")
        elif entry.measured_at - now > _CLOCK_SLACK:
            # Taken as fresh, it would never be found stale: a wrong clock where it was measured, or a hand edit.
            out.append(
                f"{path}: {entry.key} was measured on {entry.measured_at:%Y-%m-%d}, which is in the future here: "
                "the clock of the machine that measured it (or this one's) was wrong, or the entry was edited"
            )
    return out
