"""The Ray side of a campaign: connecting, checking that workers have each device kind, fanning jobs out.

Ray is imported here only, at a campaign's first use (``tunekit[ray]``). Each job is one Ray
task that asks for one unit of the Ray resource named after its device kind, so it runs only
on a worker that declared that device (``ray start --resources '{"opencl:a100": 1}'``), as
many at once per host as it declared units. A worker that dies mid-task has the task retried
elsewhere by Ray (``max_retries``); an exception the job itself raises is not retried.
"""

from __future__ import annotations

import socket
from collections.abc import Callable, Iterable, Mapping, Sequence
from types import ModuleType
from typing import Any

from tunekit._base.errors import describe_error
from tunekit._base.extras import import_extra
from tunekit._campaign.job import CampaignJob
from tunekit._campaign.spec import CampaignError

__all__ = ["TASK_NAME", "run_on_ray"]

TASK_NAME = "tunekit_campaign_job"
"""The Ray task's name, which Ray also gives the worker process while it runs one (``ray::tunekit_campaign_job``)."""

Finished = Callable[[CampaignJob, "str | BaseException"], None]


def _ray() -> ModuleType:
    return import_extra("ray", "ray", "tunekit campaigns run their jobs on a Ray cluster")


_CONNECT_TIMEOUT_S = 10.0
"""How long the head's port may take to accept a connection before the address is called wrong."""


def _check_reachable(address: str | None) -> None:
    """Refuse a ``HOST:PORT`` nothing listens on, at once.

    Given one, ``ray.init`` retries its connection to the head for many minutes, printing a warning
    every few seconds, before it gives up: a mistyped address or a head not started yet looked hung.
    Other forms (None, ``auto``, ``ray://...``) are left to Ray.
    """
    if address is None or "://" in address or address.count(":") != 1:
        return
    host, _, port = address.rpartition(":")
    if not host or not port.isdigit():
        return
    try:
        socket.create_connection((host, int(port)), timeout=_CONNECT_TIMEOUT_S).close()
    except OSError as error:
        raise CampaignError(
            f"no Ray cluster answers at {address} ({error.strerror or error}): start its head there "
            f"(ray start --head --port {port}) or give the head's address with --address"
        ) from None


def run_on_ray(
    jobs: Sequence[CampaignJob],
    finished: Finished,
    *,
    address: str | None,
    env: Mapping[str, str],
    max_retries: int,
) -> None:
    """Run ``jobs`` on the cluster at ``address``, calling ``finished(job, result JSON or error)`` as each ends.

    ``address``: None connects as ``ray.init()`` does (``RAY_ADDRESS``, else a cluster started
    on this machine, else a new local one). A Ray already initialised in this process is used as it is.
    """
    ray = _ray()
    # The worker side (the tuner, the store, measurement) loads here, not with the `tunekit` command: every
    # other sub-command would pay its ~0.8 s at start-up.
    from tunekit._campaign.worker import tune_job  # noqa: PLC0415 - see above

    started = not ray.is_initialized()
    if started:
        _check_reachable(address)
        ray.init(address=address, log_to_driver=False)
    try:
        _check_kinds(ray, jobs)
        remote = ray.remote(tune_job)
        runtime_env = {"env_vars": dict(env)} if env else None
        pending: dict[Any, CampaignJob] = {}
        for job in jobs:
            task = remote.options(
                name=TASK_NAME,
                num_cpus=0,  # the device kind's units, not CPUs, say how many jobs a host runs at once
                resources={job.device: 1},
                max_retries=max_retries,
                retry_exceptions=False,
                runtime_env=runtime_env,
            )
            pending[task.remote(job.model_dump_json())] = job
        try:
            while pending:
                ready, _ = ray.wait(list(pending), num_returns=1)
                for ref in ready:
                    job = pending.pop(ref)
                    try:
                        outcome: str | BaseException = ray.get(ref)
                    except Exception as exc:
                        outcome = _cause(exc)
                    finished(job, outcome)
        finally:
            for ref in pending:  # interrupted: the journal has every finished job, the rest run again next time
                ray.cancel(ref, force=True)
    finally:
        if started:
            ray.shutdown()


def _check_kinds(ray: ModuleType, jobs: Iterable[CampaignJob]) -> None:
    """Refuse, before any job starts, a device kind no node of the cluster declares: its jobs would wait forever."""
    have = ray.cluster_resources()
    missing: dict[str, int] = {}
    for job in jobs:
        if not have.get(job.device):
            missing[job.device] = missing.get(job.device, 0) + 1
    if missing:
        kinds = ", ".join(f"{kind!r} ({count} job{'s' * (count > 1)})" for kind, count in sorted(missing.items()))
        example = next(iter(sorted(missing)))
        raise CampaignError(
            f"no worker of the Ray cluster has the device kind {kinds}; start a worker on each host with that "
            f"device declaring it, e.g. ray start --address=HEAD:6379 --resources '{{\"{example}\": 1}}' "
            f"(the cluster has: {', '.join(sorted(k for k in have if not k.startswith('node:')))})"
        )


def _cause(exc: Exception) -> BaseException:
    """The job's own exception out of Ray's wrapper (RayTaskError), or Ray's (a worker that died every retry)."""
    cause = getattr(exc, "cause", None)
    return cause if isinstance(cause, BaseException) else RuntimeError(describe_error(exc))
