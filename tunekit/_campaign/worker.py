"""What runs on a Ray worker: one job tuned with the normal machinery, its winner read back as a record entry.

Nothing here imports Ray: the driver wraps :func:`tune_job` as a Ray task, and a test or a
single machine can call it directly. Jobs travel as JSON and results come back as JSON.
"""

from __future__ import annotations

import os
import socket
import threading
import time
from collections.abc import Callable
from typing import Any

from tunekit._base import settings as _settings
from tunekit._base.persisted import STORED
from tunekit._campaign.job import CampaignJob
from tunekit._campaign.result import JobResult
from tunekit._campaign.target import CampaignTarget, load_target
from tunekit._candidates.config import Config
from tunekit._candidates.tunable_set import TunableSet
from tunekit._keys.key import anchored_fields, key_to_dict, key_to_json
from tunekit._measure.client import Client
from tunekit._observe.sinks import add_record_sink, remove_record_sink
from tunekit._store.cache_dirs import persistent_cache
from tunekit._tune.record import Record
from tunekit._values.cache_row import CacheValue
from tunekit._values.record_file import RecordEntry
from tunekit._values.records import AutotuneRecord

__all__ = ["tune_job"]

# A worker process runs many jobs: one client per device kind and factory (an OpenCL context and its
# compile pool are slow to open), so the set each target builds for it is built once too (LocalTuner.init).
_clients: dict[tuple[str, Callable[[], Client]], Client] = {}
_lock = threading.Lock()


def tune_job(job_json: str) -> str:
    """Tune one job (``CampaignJob`` JSON) here; the ``JobResult`` JSON.

    The tune is the operation's own ``execute``: a winner already in this worker's cache (or the
    shared store it points at) is taken from there, measured nothing; one being tuned by another
    process is waited for; a new one is measured and stored before this returns.
    """
    started = time.perf_counter()
    job = CampaignJob.model_validate_json(job_json)
    if not _settings.current().autotune:
        # execute would take the first candidate unmeasured, and the campaign would commit no winner.
        raise RuntimeError(
            f"autotuning is off on this worker (TUNEKIT_AUTOTUNE=0), so {job.describe()} would measure nothing: "
            "unset it in the worker's environment (or in the campaign's env)"
        )
    target = load_target(job.target)
    client = _client(target, job.device)
    tunables = target.tuner.init(_builder(target, client))
    inputs = target.inputs(client, job.shape)
    key = tunables.key(*inputs)
    key_dict = key_to_dict(key)
    tunes: list[AutotuneRecord] = []
    # Process-wide, but a Ray worker runs one task at a time; only this job's key is taken from it.
    sink = add_record_sink(tunes.append)
    try:
        target.tuner.execute(client.device_id, client, tunables, inputs)
    finally:
        remove_record_sink(sink)
    record = Record.for_tunables(target.tuner, client, tunables)
    tuned = next(
        (t for t in tunes if t.tuner == target.tuner.name and t.key == key_dict and t.decision == "tuned"), None
    )
    if tuned is not None:
        record.add_tune(tuned, type(key))
        made = record.model()
    else:
        entry = _stored_entry(target, client, tunables, key)
        made = record.model().model_copy(
            update={"entries": [entry], "anchored_fields": list(anchored_fields(type(key)))}
        )
    return JobResult(
        job_id=job.id,
        decision="tuned" if tuned is not None else "stored",
        record=made,
        host=socket.gethostname(),
        pid=os.getpid(),
        seconds=time.perf_counter() - started,
    ).model_dump_json()


def _builder(target: CampaignTarget[Any, Any], client: Client) -> Callable[[], TunableSet[Any, Any]]:
    """The factory ``LocalTuner.init`` builds the set with: it captures the target and the client, so the set is
    built once per client of this worker."""
    return lambda: target.tunables(client)


def _client(target: CampaignTarget[Any, Any], kind: str) -> Client:
    factory = target.clients.get(kind)
    if factory is None:
        raise ValueError(f"the target has no client for device kind {kind!r}; it knows {sorted(target.clients)}")
    with _lock:
        client = _clients.get((kind, factory))
        if client is None:
            client = _clients[(kind, factory)] = factory()
    return client


def _stored_entry(
    target: CampaignTarget[Any, Any], client: Client, tunables: TunableSet[Any, Any], key: object
) -> RecordEntry:
    """The record entry of the winner the cache held (no tune ran for it in this job)."""
    cache = persistent_cache(_settings.current())
    found = cache.get(client.device_id, target.tuner.name, key_to_json(key)) if cache is not None else None
    if not isinstance(found, tuple) or found[0] != tunables.checksum():
        # execute found it in this worker's memory, with no cache to read its measurements from.
        raise RuntimeError(
            f"{target.tuner.name} {key!r}: the winner is known but no cache row holds its measurements "
            f"({found or 'no row'}); campaigns read winners back from the workers' cache: leave TUNEKIT_CACHE on"
        )
    value: CacheValue = CacheValue.model_validate(found[1], context=STORED)
    winner = next((r for r in value.results if r.name == value.winner and r.median_ns is not None), None)
    if winner is None or winner.median_ns is None:
        raise RuntimeError(
            f"{target.tuner.name} {key!r}: the stored winner {value.winner!r} has no measurement to commit (a row "
            "stored with autotuning off?); clear it (`tunekit cache clear --tuner ...`) and run the campaign again"
        )
    # Ordered as Record.add_tune orders a tune's candidates, so a job's entry is the same whether it tuned or not.
    rest = sorted(
        (r for r in value.results if r is not winner and r.status == "measured" and r.median_ns is not None),
        key=lambda r: r.median_ns or 0.0,
    )
    index = tunables.index_of(value.winner)
    config = getattr(tunables.tunables[index].fn, "config", None) if index is not None else None
    return RecordEntry(
        key=key_to_dict(key),
        winner=value.winner,
        config=config.to_dict() if isinstance(config, Config) else None,
        ranking=[winner.name, *(r.name for r in rest[:4])],
        median_ns=winner.median_ns,
        samples=winner.samples,
        measured_at=value.tuned_at,
    )
