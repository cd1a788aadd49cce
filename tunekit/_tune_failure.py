"""A key whose tune failed is not tuned again by other processes for a while: they repeat its error.

Eight processes missing one key wait on the tune lock (``_tune_lock.py``) while the first one
tunes it. When that tune found no valid candidate, each waiter then tuned the key again in turn:
eight doomed tunes, one after another, before the last process got its error. Now the failure is
recorded in the persistent cache with each candidate's reason and the tunable set's checksum, and
for ``failed_tune_retry_s`` any other process that would tune the key raises the same
``NoValidKernelFound`` at once instead.

The process whose tune failed is not bound by its own record: it tunes again on its next call,
as it always did, since its failure may have come from its own inputs (or from a candidate it
has just fixed). Every process tunes again once the record is older than the setting (or dated
further ahead than that, by a clock that was wrong), or as soon as the set's checksum differs (a
candidate added, removed or given a new ``version``). A key that then tunes successfully has its
record removed.
"""

from __future__ import annotations

import logging
import os
import socket
from collections.abc import Sequence
from datetime import UTC, datetime
from typing import Literal

from pydantic import AwareDatetime, Field, ValidationError

from tunekit._cache import PersistentCache
from tunekit._errors import NoValidKernelFound
from tunekit._persisted import STORED, Persisted
from tunekit._settings import Settings
from tunekit._version import __version__

__all__ = ["FailedCandidate", "FailedTune", "forget_failure", "record_failure", "repeat_failure"]

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


def _this_process() -> str:
    # Read at each use, not at import: a forked worker is another process with its own pid.
    return f"{socket.gethostname()}:{os.getpid()}"


def record_failure(
    cache: PersistentCache,
    device_id: str,
    tuner: str,
    key_json: str,
    checksum: str,
    failures: Sequence[tuple[str, str]],
    settings: Settings,
) -> None:
    """Record that tuning ``key_json`` with the set of ``checksum`` found no valid candidate."""
    if settings.failed_tune_retry_s <= 0:
        return
    value = FailedTune(
        failures=[FailedCandidate(name=name[:1000], reason=reason[:10_000]) for name, reason in failures],
        process=_this_process(),
        failed_at=datetime.now(UTC),
    )
    cache.put_failure(device_id, tuner, key_json, checksum, value.model_dump_json())


def forget_failure(cache: PersistentCache, device_id: str, tuner: str, key_json: str) -> None:
    """Remove the key's failure record (it has a winner now)."""
    cache.put_failure(device_id, tuner, key_json, "", None)


def repeat_failure(
    cache: PersistentCache,
    device_id: str,
    tuner: str,
    key: object,
    key_json: str,
    checksum: str,
    settings: Settings,
) -> NoValidKernelFound | None:
    """The error of another process's recent failed tune of this key and set; None: tune it."""
    retry_s = settings.failed_tune_retry_s
    if retry_s <= 0:
        return None
    got = cache.get_failure(device_id, tuner, key_json)
    if got is None or got[0] != checksum:
        return None
    try:
        failed = FailedTune.model_validate_json(got[1], context=STORED)
    except (ValidationError, ValueError) as exc:
        _log.warning("%s: unreadable failed-tune record for key %s, tuning it again: %s", tuner, key_json, exc)
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
        "after it (TUNEKIT_FAILED_TUNE_RETRY_S) or until the tunable set changes; `tunekit cache clear` forgets it.)"
    )
    return NoValidKernelFound(tuner, key, [(c.name, c.reason) for c in failed.failures], recorded=recorded)
