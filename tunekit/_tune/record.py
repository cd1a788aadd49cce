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

import dataclasses
import errno
import json
import os
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from importlib.resources.abc import Traversable
from pathlib import Path
from typing import Any, Generic

from pydantic import ValidationError
from typing_extensions import TypeVar

from tunekit._base import settings as _settings
from tunekit._base.atomic import write_atomic
from tunekit._base.errors import RecordMismatch
from tunekit._base.file_lock import locked_directory
from tunekit._base.paths import file_in_the_way
from tunekit._base.persisted import STORED, known_versions
from tunekit._base.settings import AutotuneLevel
from tunekit._base.validation_text import validation_text
from tunekit._base.version import __version__
from tunekit._candidates.config import Config
from tunekit._candidates.search_spec import check_search_names, config_name
from tunekit._candidates.space_model import SpaceModel
from tunekit._candidates.tunable_set import TunableSet, build_name, declared_key_class
from tunekit._keys.key import anchored_fields, is_autotune_key, key_from_dict, key_to_json, off_buckets
from tunekit._measure.client import Client
from tunekit._observe.reader import BadLine, RecordLine
from tunekit._search.result import SearchResult
from tunekit._store.file_kind import other_kind, other_kind_name
from tunekit._tune.local import LocalTuner
from tunekit._tune.record_checks import (
    check_tunables,
    described,
    drift,
    level_mismatch,
    not_candidates,
    not_this_tuner,
    refusals,
    tuner_name,
)
from tunekit._tune.record_device import RunningDevice, running_device, stack_drift
from tunekit._tune.record_entries import from_search, from_tune
from tunekit._tune.tuner import Tuner
from tunekit._values.record_file import RecordEntry, RecordFile, entry_key
from tunekit._values.records import AutotuneRecord

__all__ = ["Record"]


# The key class of the record's entries: Any after a plain load (which knows no set), so `tk.Record`
# bare reads as before; for_tunables and load_verified take it from the set.
K = TypeVar("K", default=Any)
K2 = TypeVar("K2")
Out = TypeVar("Out")


@dataclass
class Record(Generic[K]):
    """Committed winners of one tuner on one device: ``add`` search results, ``save``, ``load_verified``.

    Typed by its set's key class (``Record[SumKey]`` from ``for_tunables`` or ``load_verified``), so
    ``add``, ``add_tune`` and ``get`` with a key of another class are type errors.
    """

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
    """The hardware part of ``device_id`` (``tunekit.backend.SupportsDeviceModel``).

    None: its client did not say, or an old file.
    """
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
    then writes only such names (checked at every name of every ``add``, it would read every entry each time)."""

    @classmethod
    def for_tunables(
        cls, tuner: str | LocalTuner[K2, Any] | Tuner, device_id: str | Client, tunables: TunableSet[K2, Any]
    ) -> Record[K2]:
        """An empty record for winners chosen among ``tunables``, measured on ``device_id``.

        ``tuner``: the tuner's name, or the ``tk.LocalTuner`` the record serves. ``device_id``: the
        client the winners are measured on, or its ``device_id``. Given the client, the record also
        keeps its ``device_model`` (``tunekit.backend.SupportsDeviceModel``), so that it is used on the same
        hardware under another driver or numpy (with a warning) instead of being refused there.
        """
        where = "tk.Record.for_tunables"
        # The tk.LocalTuner the record serves is taken as its name, as load_verified(tuner=) and seed take it.
        if isinstance(tuner, LocalTuner | Tuner):
            tuner = tuner.name
        # A record with an empty tuner or device id would match no tuner that can run.
        device = RunningDevice(device_id, None) if isinstance(device_id, str) else running_device(where, device_id)
        check_search_names(where, tuner=tuner, device_id=device.id)
        if not isinstance(tunables, TunableSet):
            raise TypeError(f"tk.Record.for_tunables() takes a tk.TunableSet, got {type(tunables).__name__}")
        space_hash = tunables.extras.get("checksum:space")
        # Typed by the set's key: cls(...) alone reads as the class's own (unbound) key type.
        record: Record[Any] = cls(
            tuner,
            device.id,
            tunables.checksum(),
            space_hash if isinstance(space_hash, str) else None,
            autotune_level=_settings.current().autotune_level,
            tunables=tunables,
            space=described(tunables),
            device_model=device.model,
        )
        return record

    def add(self, key: K, result: SearchResult[K], *, runners_up: int = 4) -> RecordEntry:
        """Record ``result``'s winner for ``key``'s bucket (replacing an earlier one)."""
        if not is_autotune_key(key):
            raise TypeError(f"Record.add() takes an @tk.autotune_key instance, got {type(key).__name__}")
        if isinstance(result, AutotuneRecord):
            raise TypeError(
                "Record.add() takes the tk.SearchResult of tk.search or tk.tune_objective; the tk.AutotuneRecord "
                "of a tune execute ran is added with record.add_tune(tune, KeyClass)"
            )
        if not isinstance(result, SearchResult):  # a Trial (result.best, say) has no tuner or device to check
            raise TypeError(
                f"Record.add() takes the tk.SearchResult that tk.search or tk.tune_objective returned, "
                f"got {type(result).__name__}"
            )
        self._check_build(result)
        entry = self._add(key, from_search(self, key, result, runners_up, self._name_of))
        if self.space is None and result.space.hash == self.space_hash:  # a record of an older file learns it
            self.space = result.space.describe()
        return entry

    def _check_build(self, result: SearchResult) -> None:
        """Refuse a search whose ``build`` is not the one of the record's set (``TunableSet.from_space``).

        Its configurations have the names of the set's candidates, and the same space hash, but it timed
        the kernels another function builds: committed, that winner would seed the set's candidate of
        that name, never measured. Without the set (a plain ``load``), or a build to compare
        (``tk.tune_objective``, a set not made by ``from_space``), there is nothing to check.
        """
        ours = self.tunables.extras.get("checksum:build") if self.tunables is not None else None
        if not isinstance(ours, str) or result.build_id is None or result.build_id == ours:
            return
        assert self.tunables is not None
        made = self.tunables.extras.get("build")
        our_name = build_name(made) if callable(made) else "its build"
        edited = " (the same function, edited since the set was made)" if our_name == result.build_name else ""
        raise RecordMismatch(
            f"the search built its candidates with {result.build_name} (code {result.build_id}), but this record's "
            f"set builds them with {our_name} (code {ours}){edited}: its winner is another kernel than the "
            "record's candidate of that name; search with the set's build, or make the record for this build's set "
            "(tk.Record.for_tunables(tuner, device, tk.TunableSet.from_space(space, build, key=...)))"
        )

    def add_tune(self, tune: AutotuneRecord, key_type: type[K], *, runners_up: int = 4) -> RecordEntry:
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
                + (
                    "; tk.read_records yields lines: pass a tk.RecordLine's .record, and skip its tk.BadLines"
                    if isinstance(tune, RecordLine | BadLine)
                    else ""
                )
            )
        if not (isinstance(key_type, type) and getattr(key_type, "__tunekit_key__", False)):
            raise TypeError(
                f"Record.add_tune(key_type=...) takes the @tk.autotune_key class the tune's key is made of, "
                f"got {key_type.__qualname__ if isinstance(key_type, type) else repr(key_type)}"
            )
        try:
            key = key_from_dict(key_type, tune.key)
        except TypeError as exc:
            raise RecordMismatch(_not_this_key_class(f"the tune's key {tune.key}", tune.key, key_type, exc)) from None
        return self._add(key, from_tune(self, self.tunables, key, tune, runners_up))

    def _add(self, key: object, made: dict[str, Any]) -> RecordEntry:
        """Check ``key`` against the record's set, key class and level, then store the entry ``made``."""
        names: list[str] = made["ranking"]
        if self.tunables is not None and (strangers := [n for n in names if self.tunables.index_of(n) is None]):
            raise RecordMismatch(
                f"the search's {strangers} are not candidates of the record's {self.tunables!r}: it searched "
                "another space or kernel than the set the record was made for"
            )
        self._check_key_class(key)
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

    def _check_key_class(self, key: object) -> None:
        """Refuse a key of another class than the record's: its entries, else its set's declared key class.

        Without it, a record of SumKey(n) entries took an OtherKey(m) entry (the anchored fields, the
        only thing compared, were [] for both), and seed refused the committed file in production.
        """
        fields = sorted(f.name for f in dataclasses.fields(key))  # type: ignore[arg-type]
        if self.entries:
            stored = sorted(next(iter(self.entries.values())).key)
            if stored != fields:
                raise RecordMismatch(
                    f"{key!r} has fields {fields}, but this record holds keys with fields {stored}: one record "
                    "holds the keys of one key class; add keys of that class, or make a record for each"
                )
            return
        declared = None if self.tunables is None else declared_key_class(self.tunables.key)
        if declared is not None and not isinstance(key, declared):
            raise RecordMismatch(
                f"{key!r} is no {declared.__name__}, the key class of the record's set (its key generator "
                f"{self.tunables.describe_key_fn() if self.tunables is not None else ''} returns {declared.__name__}): "
                "add the keys that set's tunes run under, or make the record for the set whose keys these are"
            )

    def get(self, key: K) -> RecordEntry | None:
        """The entry of ``key``'s bucket (the key as built: anchored), or None when the record has none."""
        if not is_autotune_key(key):
            raise TypeError(f"Record.get() takes an @tk.autotune_key instance, got {type(key).__name__}")
        found = self.entries.get(key_to_json(key))
        if found is None and self.entries:
            # A key of another class finds no entry: production would take its defaults for every
            # key, silently, as if the record lacked them all.
            stored = next(iter(self.entries.values())).key
            fields = sorted(f.name for f in dataclasses.fields(key))  # type: ignore[arg-type]
            if sorted(stored) != fields:
                raise RecordMismatch(_not_this_key_class(f"record key {stored}", stored, type(key), None))
        return found

    def __contains__(self, key: K) -> bool:
        """Whether the record holds ``key``'s bucket (``Shape(n=1000) in record``).

        Typed by the record's key, as ``get`` is: ``OtherKey(...) in record`` is a type error; at run
        time it is False, as for any key the record lacks.
        """
        return is_autotune_key(key) and key_to_json(key) in self.entries

    def _name_of(self, config: Config) -> str:
        """The candidate name of ``config`` in the record's set.

        A set names a configuration's candidate its own way (an OpenCL ``KernelTemplate``
        calls it ``kernel[BLOCK=64]``, ``from_space`` ``BLOCK=64``); named ``config.name``
        regardless, a record's winners would name no candidate, and ``load_verified`` would refuse it.
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
        path = Path(path).expanduser()  # "~/gemm.json" means the home directory, not a directory named "~"
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
        except (FileExistsError, NotADirectoryError):  # name the file in the way, not only the errno
            blocking = file_in_the_way(path) or path.parent
            raise NotADirectoryError(
                errno.ENOTDIR,
                f"cannot save the record: {blocking} is a file, not a directory; give a path in a directory",
                str(path),
            ) from None
        try:
            # Read, merge and write as one step: of several processes saving at once, each keeps the
            # keys the others wrote, instead of the last writer's record replacing theirs.
            with locked_directory(Path(os.path.realpath(path)).parent, path.name):
                self._merge_saved(path)
                write_atomic(path, self.model().model_dump_json(indent=2) + "\n")
            self._added.clear()
            self._held = set(self.entries)
        except (IsADirectoryError, FileExistsError):  # their messages say what to give
            raise
        except OSError as exc:
            # Name the record and what to do, not the temporary file written first beside it
            # ('.gemm.json.86305799eca6.tmp'), which the caller never asked for.
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
                # A trial log, a Kernel Tuner cache or a source file given as the path by mistake
                # holds what the record would destroy: hours of measurements, or code.
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
    def load(cls, path: str | os.PathLike[str] | Traversable) -> Record[Any]:
        """Read a record file (validated; nothing in it is executed).

        ``path`` may be a package resource (``importlib.resources.files("mylib") / "tuning/gemm.json"``),
        so a library reads the winners it ships from its package data, in a zip as on disk.
        """
        path = _source(path)
        try:
            data = RecordFile.model_validate_json(path.read_bytes(), context=STORED)
        except FileNotFoundError:
            raise FileNotFoundError(
                f"no committed record at {path}; create one with tk.Record.for_tunables(tuner, client, tunables), "
                "record.add(key, search_result) (or record.add_tune(tune, KeyClass)) and record.save(path)"
            ) from None
        except IsADirectoryError:  # say what to give, as save() does
            raise IsADirectoryError(
                errno.EISDIR,
                f"{os.strerror(errno.EISDIR)}; give the record's file path in it (e.g. gemm.json)",
                str(path),
            ) from None
        except ValidationError as exc:
            # A trial log or cache bundle given here is no broken record: say what the file is.
            if kind := other_kind(path, "committed record"):
                raise RecordMismatch(f"{path} is {kind}, not a committed record (tk.Record.save)") from None
            known = known_versions(RecordFile)
            if (version := _schema_version(path)) not in (None, *known):
                # Another version's record is no invalid file: say which versions this tunekit reads.
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
        path: str | os.PathLike[str] | Traversable,
        tunables: TunableSet[K2, Any],
        device_id: str | Client,
        *,
        tuner: str | LocalTuner[K2, Any] | Tuner | None = None,
    ) -> Record[K2]:
        """Load ``path`` and check its provenance against ``tunables``, ``device_id`` and ``tuner``.

        Raises RecordMismatch when the device, the tuner, the candidates (checksum), the space or
        tunekit's major version differ, or a winner or runner-up is not a candidate. Drift that
        only shifts timings is returned in ``record.warnings``. ``device_id``: the running
        client, or its ``device_id``. Given a client that says its ``device_model``
        (``tunekit.backend.SupportsDeviceModel``), a record of the same model measured under another
        software stack (driver, numpy) is used, with a warning naming both, and :meth:`seed`
        installs it for the running device; another model is refused. Given a device id, or
        for a record that does not say its model, the device ids must be equal. ``tuner``: the
        name, or the ``tk.LocalTuner``, the record is to serve; a record made for another
        tuner's keys is refused here, as :meth:`seed` refuses it (None: checked only by
        ``seed``, so a caller that reads winners with ``get`` should pass it).
        """
        # Checked first: a tk.Space given as tunables would fail later, on an attribute it lacks.
        check_tunables("tk.Record.load_verified", tunables)
        here = running_device("tk.Record.load_verified", device_id)
        expected = tuner_name("tk.Record.load_verified", tuner)
        path = _source(path)
        record = cls.load(path)
        if problems := refusals(record, tunables, here, expected):
            raise RecordMismatch(
                f"{path} does not apply here: " + "; ".join(problems) + "; re-tune and commit a new record"
            )
        stack = stack_drift(record.device_id, here)
        record.warnings = tuple([f"{path}: {stack}"] if stack else []) + tuple(drift(record, path))
        record.tunables = tunables
        record.running_device_id = here.id
        if record.device_id == here.id and record.device_model is None:  # a record of an older file learns it
            record.device_model = here.model
        return record

    def seed(self, tuner: Tuner | LocalTuner[K2, Out], tunables: TunableSet[K2, Out], key_type: type[K2]) -> int:
        """Install every winner into ``tuner`` so those keys are never tuned; returns how many.

        The winners serve one device id: the running client's that ``load_verified`` accepted the
        record for, or, after a plain ``load``, the ``device_id`` the record was measured on. A
        ``tk.LocalTuner`` seeded from a plain ``load`` that then runs on another device id tunes
        there, and logs a warning at its first call on it saying why (and that ``load_verified``
        with the client moves a record of the same device model to it); one that had already run
        there says it at the first key it does not find in memory.

        Typed like ``LocalTuner.execute``: a key class or set of another key than the tuner's is
        a type error (taking any tuner, set and class, it would let ``seed(T, tunables, OtherKey)`` pass mypy).
        """
        if not isinstance(tuner, Tuner | LocalTuner):
            raise TypeError(f"Record.seed() takes the tk.LocalTuner (or Tuner) to seed, got {type(tuner).__name__}")
        check_tunables("Record.seed", tunables)
        # A class that is no key (dict, the key's module) would be built from each entry and fail deep in the tuner.
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
            raise RecordMismatch(not_this_tuner(self, tuner))
        if strangers := not_candidates(self.entries.values(), tunables):
            raise RecordMismatch(
                f"{strangers} in this record's rankings are not candidates of {tunables!r}; "
                "re-tune and commit a new record"
            )
        if (level := level_mismatch(self, anchored_fields(key_type))) is not None:
            raise RecordMismatch(f"this record does not apply here: {level}; or re-tune and commit a new record")
        keys = []
        moved = []
        for stored, entry in self.entries.items():
            try:
                key = key_from_dict(key_type, entry.key)
            except TypeError as exc:
                raise RecordMismatch(_not_this_key_class(f"record key {entry.key}", entry.key, key_type, exc)) from None
            # Building the key anchors it again at the running level: a stored bucket that moves is
            # no bucket here, and seeding it would serve sizes it was not measured for (and land
            # two entries on one bucket, the last silently winning).
            if key_to_json(key) != stored:
                moved.append(f"{entry.key} -> {json.loads(key_to_json(key))}")
            keys.append((key, entry))
        if moved:
            level = _settings.current().autotune_level
            # A record that keeps its level passed the level check above: its keys moved for another
            # reason than the level, which only an old file (one that predates records keeping it) leaves open.
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
            # Unverified, the record serves only the device it names: noted, so that the operation run on
            # another device id says why it tunes its keys there (naming load_verified), not silently.
            local.seeded_unverified.add(self.device_id, self.device_model)
        return len(self.entries)


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


def _source(path: str | os.PathLike[str] | Traversable) -> Path | Traversable:
    """Where a record is read from: a file path, or a package resource (on disk or in a zip) as it is."""
    if isinstance(path, str | os.PathLike):
        return Path(path).expanduser()
    if not isinstance(path, Traversable):  # checked here: a wrong argument would otherwise fail deep in the read
        raise TypeError(
            "tk.Record.load() takes the record's file path or a package resource "
            f"(importlib.resources.files('mylib') / 'tuning/gemm.json'), got {type(path).__name__}"
        )
    return path


def _schema_version(path: Path | Traversable) -> object:
    """The ``schema_version`` a record file of any version declares; None for a file that is no record."""
    try:
        data = json.loads(path.read_bytes())
    except (OSError, ValueError):
        return None
    # Only a file with a record's fields is taken for another version's record.
    is_record = isinstance(data, dict) and {"tuner", "device_id", "entries"} <= data.keys()
    return data.get("schema_version") if is_record else None


def _not_this_key_class(what: str, stored: Mapping[str, object], key_type: type, exc: TypeError | None) -> str:
    """Why a stored key does not build ``key_type``: both sets of field names when they differ, the error otherwise."""
    fields = sorted(f.name for f in dataclasses.fields(key_type))
    if sorted(stored) == fields:
        return f"{what} does not build a {key_type.__name__}: {exc}"
    return (
        f"{what} does not build a {key_type.__name__}: the key has fields {sorted(stored)}, "
        f"{key_type.__name__} has {fields}; pass the key class the record's keys were made with, "
        "or re-tune with this one and commit a new record"
    )
