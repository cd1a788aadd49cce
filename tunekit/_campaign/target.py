"""CampaignTarget: what a campaign job names by import path, and how that path is loaded."""

from __future__ import annotations

import importlib
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Generic, TypeVar

from tunekit._candidates.config import ParamValue
from tunekit._candidates.tunable_set import TunableSet
from tunekit._measure.client import Client
from tunekit._tune.local import LocalTuner

__all__ = ["CampaignTarget", "load_target"]

K = TypeVar("K")
Out = TypeVar("Out")

Shape = Mapping[str, ParamValue]
"""One job's shape: the values ``CampaignTarget.inputs`` builds a call's inputs from (``{"rows": 64, "n": 1000}``)."""


@dataclass(frozen=True)
class CampaignTarget(Generic[K, Out]):
    """An operation a campaign can tune on a worker, named by a job as ``"package.module:NAME"``.

    The worker tunes it exactly as the operation's own call would: ``tuner.execute`` with the
    set ``tunables(client)`` builds and inputs that ``inputs(client, shape)`` makes, so the
    winner lands in the worker's cache under the key production computes.

    Args:
        tuner: the operation's ``tk.LocalTuner`` (its name names the winners in caches and records).
        tunables: builds the operation's ``tk.TunableSet`` for the worker's client.
        inputs: builds one call's inputs from the client and a job's shape.
        clients: each device kind this target runs on, with a function that opens its client on a
            worker. A kind is also the Ray resource a worker declares to receive its jobs
            (``ray start --resources '{"opencl:a100": 1}'``).
        shape: the fields every job's shape must give; checked before the campaign starts.
    """

    tuner: LocalTuner[K, Out]
    tunables: Callable[[Client], TunableSet[K, Out]]
    inputs: Callable[[Client, Shape], tuple[Any, ...]]
    clients: Mapping[str, Callable[[], Client]]
    shape: tuple[str, ...] = field(default=())

    def __post_init__(self) -> None:
        if not isinstance(self.tuner, LocalTuner):
            raise TypeError(f"CampaignTarget(tuner=...) takes the operation's tk.LocalTuner, got {self.tuner!r}")
        for name in ("tunables", "inputs"):
            if not callable(getattr(self, name)):
                raise TypeError(
                    f"CampaignTarget({name}=...) takes a function of the client, got {getattr(self, name)!r}"
                )
        if not self.clients or not all(isinstance(k, str) and k and callable(v) for k, v in self.clients.items()):
            raise TypeError(
                "CampaignTarget(clients=...) takes a non-empty mapping of device kind -> function opening its client, "
                'e.g. {"cpu-numpy": CpuClient}'
            )


def load_target(path: str) -> CampaignTarget[Any, Any]:
    """The CampaignTarget at ``"package.module:NAME"``; ValueError saying what is wrong with the path otherwise."""
    module_name, sep, name = path.partition(":")
    if not sep or not module_name or not name:
        raise ValueError(f"target {path!r} is no import path; write it as 'package.module:NAME'")
    try:
        module = importlib.import_module(module_name)
    except Exception as exc:
        # The worker imports it the same way: an error there would fail every job of the target, one by one.
        raise ValueError(
            f"target {path!r}: importing {module_name} failed ({type(exc).__name__}: {exc}); is its package "
            "installed (or on PYTHONPATH) here and on every worker?"
        ) from None
    try:
        found = getattr(module, name)
    except AttributeError:
        raise ValueError(f"target {path!r}: module {module_name} has no {name}") from None
    if not isinstance(found, CampaignTarget):
        raise ValueError(f"target {path!r} is a {type(found).__name__}, not a tk.CampaignTarget")
    return found
