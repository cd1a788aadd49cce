"""Whether a committed record applies here: the refusals that stop it, and the drift it is used with.

A record measured for other candidates, another space, another device model or another tuner
answers another question, so it is refused; drift that can only shift timings (another tunekit
version, another level of the same buckets, old or thinly sampled measurements) is a warning.
The checks read a record through ``Provenance``, the fields ``tk.Record`` keeps.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from datetime import UTC, datetime, timedelta
from importlib.resources.abc import Traversable
from pathlib import Path
from typing import Any, Protocol

from tunekit._base import settings as _settings
from tunekit._base.counted import counted
from tunekit._base.settings import AutotuneLevel
from tunekit._base.settings_model import Settings
from tunekit._base.version import MAJOR, __version__
from tunekit._candidates.config import Config
from tunekit._candidates.search_spec import config_name
from tunekit._candidates.space import Space
from tunekit._candidates.space_model import SpaceModel, space_difference
from tunekit._candidates.tunable_set import TunableSet
from tunekit._tune.local import LocalTuner
from tunekit._tune.record_device import RunningDevice, device_refusal
from tunekit._tune.tuner import Tuner
from tunekit._values.record_file import RecordEntry

__all__ = [
    "Provenance",
    "check_tunables",
    "described",
    "drift",
    "level_mismatch",
    "not_candidates",
    "not_this_tuner",
    "refusals",
    "tuner_name",
]

_STALE_AFTER = timedelta(days=365)
_CLOCK_SLACK = timedelta(days=1)


class Provenance(Protocol):
    """What the checks read of a record: where, for which candidates and at which level its winners were measured."""

    @property
    def tuner(self) -> str: ...
    @property
    def device_id(self) -> str: ...
    @property
    def device_model(self) -> str | None: ...
    @property
    def running_device_id(self) -> str | None: ...
    @property
    def checksum(self) -> str: ...
    @property
    def space_hash(self) -> str | None: ...
    @property
    def space(self) -> SpaceModel | None: ...
    @property
    def tunekit_version(self) -> str: ...
    @property
    def autotune_level(self) -> AutotuneLevel | None: ...
    @property
    def anchored_fields(self) -> tuple[str, ...] | None: ...
    @property
    def entries(self) -> Mapping[str, RecordEntry]: ...


def refusals(record: Provenance, tunables: TunableSet[Any, Any], here: RunningDevice, tuner: str | None) -> list[str]:
    """Why ``record`` does not apply to ``tunables`` on ``here`` (for ``tuner``, when given); empty when it does."""
    problems = []
    if (device := device_refusal(record.device_id, record.device_model, here)) is not None:
        problems.append(device)
    if tuner is not None and record.tuner != tuner:
        problems.append(f"it was made for tuner {record.tuner!r}, this is tuner {tuner!r}")
    if record.checksum != tunables.checksum():
        problems.append(
            f"its candidates had checksum {record.checksum}, the running TunableSet has {tunables.checksum()} "
            "(a tunable, its version, from_space's build code, the space, or an OpenCL template's source, options, "
            "geometry or applies changed)"
        )
    space_hash = tunables.extras.get("checksum:space")
    if record.space_hash is not None and space_hash is not None and record.space_hash != space_hash:
        running = described(tunables)
        changed = f" ({space_difference(record.space, running)})" if record.space and running else ""
        problems.append(f"it was searched over space {record.space_hash}, the running space is {space_hash}{changed}")
    major = record.tunekit_version.split(".")[0]
    if major != str(MAJOR):
        problems.append(f"it was written by tunekit {record.tunekit_version}, this is {__version__}")
    if strangers := not_candidates(record.entries.values(), tunables):
        problems.append(f"{strangers} in its rankings are not candidates of the running TunableSet")
    problems.extend(_configs_not_winners(record.entries.values(), tunables))
    if (level := level_mismatch(record, record.anchored_fields)) is not None:
        problems.append(level)
    return problems


def described(tunables: TunableSet[Any, Any]) -> SpaceModel | None:
    """The space ``tunables`` was made from (``from_space``, a template), described; None without one."""
    space = tunables.extras.get("space")
    return space.describe() if isinstance(space, Space) else None


def tuner_name(where: str, tuner: object) -> str | None:
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


def not_this_tuner(record: Provenance, tuner: Tuner) -> str:
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


def check_tunables(where: str, tunables: object) -> None:
    """Refuse what is no TunableSet (a ``tk.Space``, say), naming what to give."""
    if not isinstance(tunables, TunableSet):
        raise TypeError(
            f"{where}() takes the running tk.TunableSet (its checksum is checked), got {type(tunables).__name__}; "
            "e.g. tk.TunableSet.from_space(space, build, key=...)"
        )


def level_mismatch(record: Provenance, anchored: tuple[str, ...] | None) -> str | None:
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


def not_candidates(entries: Iterable[RecordEntry], tunables: TunableSet[Any, Any]) -> list[str]:
    """Names in the entries' rankings (winners included) that ``tunables`` does not hold."""
    return sorted({name for e in entries for name in e.ranking if tunables.index_of(name) is None})


def _configs_not_winners(entries: Iterable[RecordEntry], tunables: TunableSet[Any, Any]) -> list[str]:
    """Entries whose ``config`` names another candidate than their winner (a hand edit of one of the two).

    ``seed`` installs the ranking's names, so such an entry would run its winner while the
    committed file, read in a review, shows another configuration.
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


def _required_samples(settings: Settings) -> tuple[int, str]:
    """The kept samples the schedule in force gives a winner, and the setting that says so.

    Only the fixed schedule takes ``samples``; the adaptive one keeps between ``min_samples``
    and ``max_samples``, so its records are compared with ``min_samples``.
    """
    if settings.adaptive:
        return settings.min_samples, "the adaptive schedule's min_samples"
    return settings.samples, "the fixed schedule's samples"


def drift(record: Provenance, path: Path | Traversable) -> list[str]:
    """The warnings a record that applies here comes with: what can shift its timings, or leave keys to tune."""
    out = []
    if not record.entries:  # seeded without a word, it would leave production to tune every key
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
    entries = list(record.entries.values())
    # One warning per kind of drift, not per entry: a library's record of a hundred keys would
    # otherwise print a hundred lines in every process of every user it ships to.
    thin = [f"{e.key} with {counted(e.samples, 'sample')}" for e in entries if e.samples < samples]
    old = [f"{e.key} on {e.measured_at:%Y-%m-%d}" for e in entries if now - e.measured_at > _STALE_AFTER]
    ahead = [f"{e.key} on {e.measured_at:%Y-%m-%d}" for e in entries if e.measured_at - now > _CLOCK_SLACK]
    if thin:
        out.append(
            f"{path}: {_some(thin, len(entries))} measured with fewer samples than {samples} ({setting}): "
            + _listed(thin)
        )
    if old:
        out.append(f"{path}: {_some(old, len(entries))} measured over a year ago: {_listed(old)}")
    if ahead:
        # Taken as fresh, it would never be found stale: a wrong clock where it was measured, or a hand edit.
        out.append(
            f"{path}: {_some(ahead, len(entries))} measured in the future here: {_listed(ahead)}; the clock of the "
            "machine that measured it (or this one's) was wrong, or the entry was edited"
        )
    return out


def _some(found: list[str], total: int) -> str:
    """How many of a record's entries a warning is about, in words."""
    if total == 1:
        return "its entry was"
    if len(found) == total:
        return f"all {total} of its entries were"
    return f"{len(found)} of its {total} entries {'was' if len(found) == 1 else 'were'}"


def _listed(found: list[str], shown: int = 3) -> str:
    """The first few entries a warning is about, and how many more."""
    more = f", and {len(found) - shown} more" if len(found) > shown else ""
    return ", ".join(found[:shown]) + more
