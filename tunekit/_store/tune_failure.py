"""A key whose tune failed is not tuned again by other processes for a while: they repeat its error.

Eight processes missing one key wait on the tune lock (``tunekit._store.tune_lock``) while the
first one tunes it. When that tune finds no valid candidate, each waiter would then tune the key
again in turn: eight doomed tunes, one after another, before the last process gets its error. So
the failure is recorded in the persistent cache with each candidate's reason and the tunable set's
checksum, and for ``failed_tune_retry_s`` any other process that would tune the key raises the
same ``NoValidKernelFound`` at once instead.

The process whose tune failed is not bound by its own record: it tunes again on its next call,
since its failure may have come from its own inputs (or from a candidate it has just fixed).
Every process tunes again once the record is older than the setting (or dated further ahead
than that, by a clock that was wrong), as soon as the set's checksum differs (a candidate added,
removed or given a new ``version``), or as soon as its ``inputs=`` generator or its reference
(``with_reference``) differs. Neither enters the checksum (a winner does not
depend on them), but a failure does: candidates fail on what the generator made, or against
what the reference expected, so the record holds a digest of both (their code, the data they
capture, the reference's tolerances), and a corrected generator or reference is tuned at once
instead of repeating the old error for a minute. A key that then tunes successfully has its
record removed.
"""

from __future__ import annotations

import hashlib
import logging
import os
import secrets
import socket
import threading
import weakref
from collections.abc import Callable, Sequence
from datetime import UTC, datetime
from typing import Any, Literal

from pydantic import AwareDatetime, Field, ValidationError

from tunekit._base.code_identity import restriction_identity
from tunekit._base.errors import NoValidKernelFound
from tunekit._base.persisted import STORED, Persisted
from tunekit._base.settings_model import Settings
from tunekit._base.version import __version__
from tunekit._candidates.tunable_set import TunableSet
from tunekit._store.cache import PersistentCache

__all__ = [
    "FailedCandidate",
    "FailedTune",
    "failure_dependencies",
    "forget_failure",
    "record_failure",
    "repeat_failure",
]

_log = logging.getLogger("tunekit.tuner")


class FailedCandidate(Persisted):
    """One candidate of a failed tune and why it failed or was skipped."""

    name: str = Field(max_length=1000)
    reason: str = Field(max_length=10_000)


class FailedTune(Persisted):
    """The JSON stored for a key whose tune found no valid candidate.

    ``process`` (host and pid) lets the process that failed tell its own record from another's.
    """

    schema_version: Literal[1] = 1
    failures: list[FailedCandidate] = Field(max_length=100_000)
    process: str = Field(max_length=1000)
    failed_at: AwareDatetime
    """With its time zone: a time without one cannot be compared with this process's clock."""
    tunekit_version: str = __version__
    depends_on: str = Field("", max_length=1000)
    """``failure_dependencies`` of the set that failed: its inputs generator and reference, which
    the checksum leaves out. Empty for a set with neither (and in records of a tunekit that did not keep it)."""


def _this_process() -> str:
    # Read at each use, not at import: a forked worker is another process with its own pid.
    return f"{socket.gethostname()}:{os.getpid()}"


_digests: weakref.WeakKeyDictionary[TunableSet[Any, Any], str] = weakref.WeakKeyDictionary()
_digests_lock = threading.Lock()


def failure_dependencies(tunables: TunableSet[Any, Any]) -> str:
    """A digest of what a failed tune depended on beyond the candidates: the inputs generator and the reference.

    Empty when the set has neither. A generator or reference whose identity cannot be worked
    out gets a digest of its own, unlike any other, so its failures are never repeated.
    Worked out once per set, as its checksum is: hashing the data they capture takes time in
    proportion to it (seconds for an array of a few hundred MB, or a list of millions), and a
    process repeating another's failure would pay it at each call, holding the key's tune lock.
    """
    with _digests_lock:
        known = _digests.get(tunables)
    if known is None:
        known = _dependencies(tunables)
        with _digests_lock:
            _digests[tunables] = known
    return known


def _dependencies(tunables: TunableSet[Any, Any]) -> str:
    parts: list[str] = []
    if tunables.inputs is not None:
        parts.append(f"inputs: {_code_identity(tunables.inputs)}")
    reference = tunables.reference
    if reference is not None:
        function = "the first candidate" if reference.fn is None else _code_identity(reference.fn)
        tolerances = f"outputs={reference.outputs}, rtol={reference.rtol}, atol={reference.atol}"
        if reference.compare is not None:  # a fixed compare= may pass what the failure was recorded for
            tolerances += f", compare={_code_identity(reference.compare)}"
        parts.append(f"reference: {function}, {tolerances}")
    if not parts:
        return ""
    return hashlib.sha256("\x00".join(parts).encode()).hexdigest()[:32]


def _code_identity(fn: Callable[..., Any]) -> str:
    """``fn``'s normalised source and captured data, the same in every process running the same code."""
    try:
        return restriction_identity(fn)
    except Exception:  # an object that defeats inspection is simply never the same twice
        return f"unidentified {secrets.token_hex(16)}"


def record_failure(
    cache: PersistentCache,
    device_id: str,
    tuner: str,
    key_json: str,
    tunables: TunableSet[Any, Any],
    failures: Sequence[tuple[str, str]],
    settings: Settings,
) -> None:
    """Record that tuning ``key_json`` with ``tunables`` found no valid candidate."""
    if settings.failed_tune_retry_s <= 0:
        return
    value = FailedTune(
        failures=[FailedCandidate(name=name[:1000], reason=reason[:10_000]) for name, reason in failures],
        process=_this_process(),
        failed_at=datetime.now(UTC),
        depends_on=failure_dependencies(tunables),
    )
    cache.put_failure(device_id, tuner, key_json, tunables.checksum(), value.model_dump_json())


def forget_failure(cache: PersistentCache, device_id: str, tuner: str, key_json: str) -> None:
    """Remove the key's failure record (it has a winner now)."""
    cache.put_failure(device_id, tuner, key_json, "", None)


def repeat_failure(
    cache: PersistentCache,
    device_id: str,
    tuner: str,
    key: object,
    key_json: str,
    tunables: TunableSet[Any, Any],
    settings: Settings,
) -> NoValidKernelFound | None:
    """The error of another process's recent failed tune of this key and set; None: tune it."""
    retry_s = settings.failed_tune_retry_s
    if retry_s <= 0:
        return None
    got = cache.get_failure(device_id, tuner, key_json)
    if got is None or got[0] != tunables.checksum():
        return None
    try:
        failed = FailedTune.model_validate_json(got[1], context=STORED)
    except (ValidationError, ValueError) as exc:
        _log.warning("%s: unreadable failed-tune record for key %s, tuning it again: %s", tuner, key_json, exc)
        return None
    if failed.depends_on != failure_dependencies(tunables):
        _log.info("%s: key %s failed with another inputs generator or reference; tuning it again", tuner, key)
        return None
    age_s = (datetime.now(UTC) - failed.failed_at).total_seconds()
    # A record dated further ahead than the retry time comes from a clock that was (or is) wrong:
    # trusting it would refuse the key until that clock's future, so its age counts as unknown.
    if failed.process == _this_process() or not -retry_s < age_s < retry_s:
        return None
    _log.info("%s: process %s failed to tune key %s %.0f s ago; repeating its error", tuner, failed.process, key, age_s)
    recorded = (
        f"(not tuned again here: process {failed.process} tuned this key {max(age_s, 0):.0f} s ago on this device "
        f"and found no valid candidate. Other processes repeat that error until failed_tune_retry_s = {retry_s:g} s "
        "after it (TUNEKIT_FAILED_TUNE_RETRY_S) or until the tunable set, its inputs= generator or its reference "
        "changes; `tunekit cache clear` forgets it.)"
    )
    return NoValidKernelFound(tuner, key, [(c.name, c.reason) for c in failed.failures], recorded=recorded)
