"""A set's declared isolation: where its candidates run, their limit, and the factory a spawned worker builds from."""

from __future__ import annotations

import importlib
import inspect
import numbers
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Protocol, TypeVar

from tunekit._base.settings import IsolationMode

__all__ = [
    "DeviceLocatorWorkerFactory",
    "DeviceWorkerFactory",
    "Isolation",
    "LocatorWorkerFactory",
    "WorkerFactory",
    "factory_keywords",
    "resolve_reference",
    "worker_reference",
]

S = TypeVar("S")
S_co = TypeVar("S_co", covariant=True)
"""The tunable set a worker factory builds (generic here: this module sits below ``TunableSet``)."""


@dataclass(frozen=True, slots=True)
class Isolation:
    """A tunable set's own isolation, overriding the global settings (see ``TunableSet.with_isolation``).

    ``timeout_s`` None takes ``candidate_timeout_s`` from the settings; ``math.inf`` means
    no limit for this set. ``worker`` is the ``module:qualname`` of a factory a fresh worker
    interpreter builds its client, candidates and inputs with (for devices that do not
    survive ``fork()``); None forks the caller. ``worker_device_id``: the factory is called
    with ``device_id=`` the tune's device id too, so it can build for that device;
    ``worker_locator``: with ``locator=`` the calling client's locator, so it can build on
    that very device when several identical ones share the id.
    """

    mode: IsolationMode
    timeout_s: float | None = None
    worker: str | None = None
    worker_device_id: bool = False
    worker_locator: bool = False

    def __post_init__(self) -> None:
        if self.mode not in ("none", "process"):
            raise ValueError(f"isolation mode must be 'none' or 'process', got {self.mode!r}")
        if self.timeout_s is not None and (
            # "5" would fail comparing str with int, and True would be taken as one second
            not isinstance(self.timeout_s, numbers.Real) or isinstance(self.timeout_s, bool) or not self.timeout_s > 0
        ):
            raise ValueError(f"timeout_s must be a number > 0 (math.inf for no limit), got {self.timeout_s!r}")
        if self.worker is not None and self.mode != "process":
            raise ValueError("a worker factory needs isolation mode 'process'")
        if (self.worker_device_id or self.worker_locator) and self.worker is None:
            raise ValueError("worker_device_id=True and worker_locator=True need a worker factory")


WorkerFactory = Callable[[dict[str, Any]], tuple[Any, S, tuple[Any, ...]]]
"""Builds, in a spawned worker, ``(client, tunable set, benchmark inputs)`` from the key's fields."""


class DeviceWorkerFactory(Protocol[S_co]):
    """A worker factory that is also told the device id of the tune it builds for.

    The key's fields alone cannot say which device: on a machine with several devices a
    factory that only sees them can build only its default one.
    """

    def __call__(self, key: dict[str, Any], /, *, device_id: str) -> tuple[Any, S_co, tuple[Any, ...]]: ...


class LocatorWorkerFactory(Protocol[S_co]):
    """A worker factory told the locator of the client that called ``execute`` (None: it has none).

    Identical devices share a device id; the locator (``tunekit.backend.SupportsLocator``) says which of
    them, e.g. ``OpenCLClient(locator=locator)``.
    """

    def __call__(self, key: dict[str, Any], /, *, locator: str | None) -> tuple[Any, S_co, tuple[Any, ...]]: ...


class DeviceLocatorWorkerFactory(Protocol[S_co]):
    """A worker factory told both the tune's device id and the calling client's locator."""

    def __call__(
        self, key: dict[str, Any], /, *, device_id: str, locator: str | None
    ) -> tuple[Any, S_co, tuple[Any, ...]]: ...


def worker_reference(factory: Callable[..., Any]) -> str:
    """``module:qualname`` of a module-level function, checked to import back to the same object."""
    module, qualname = getattr(factory, "__module__", None), getattr(factory, "__qualname__", "")
    if not module or "<" in qualname or module == "__main__":
        # The script being run is __main__: the usual way to meet this, with the doc's snippet pasted into it.
        where = (
            f"; {qualname} is defined in the script being run (__main__): move it to a module of its own beside "
            f"the script (e.g. workers.py) and import it from there (from workers import {qualname})"
            if module == "__main__" and "<" not in qualname
            else ""
        )
        raise ValueError(
            f"worker={factory!r} must be a function defined at the top level of an importable module "
            f"(not a lambda, a nested function or __main__): the worker process imports it by name{where}"
        )
    reference = f"{module}:{qualname}"
    if resolve_reference(reference) is not factory:
        raise ValueError(f"worker={factory!r} does not import back as {reference}")
    return reference


_FACTORY_KEYWORDS = ("device_id", "locator")


def factory_keywords(factory: Callable[..., Any]) -> frozenset[str]:
    """Which of ``device_id`` and ``locator`` the worker passes ``factory`` as keywords, after the key's fields.

    Decided once, when the set is built, so a factory the worker could not call fails there.
    """
    try:
        signature = inspect.signature(factory)
    except (TypeError, ValueError):  # no signature to read (some C callables): build(key_fields) alone
        return frozenset()
    # Named, not **kwargs: a wrapper forwarding **kwargs to a plain build(key_fields) would take them too.
    by_keyword = (inspect.Parameter.POSITIONAL_OR_KEYWORD, inspect.Parameter.KEYWORD_ONLY)
    taken = {
        name
        for name in _FACTORY_KEYWORDS
        if name in signature.parameters and signature.parameters[name].kind in by_keyword
    }
    try:
        signature.bind({}, **dict.fromkeys(taken, ""))
    except TypeError:
        raise ValueError(
            f"worker={factory!r} takes {signature}, but the worker calls it build(key_fields), optionally with "
            "device_id= (the tune's device id) and locator= (the calling client's locator) as keywords: take the "
            "key's fields as the one positional argument"
        ) from None
    return frozenset(taken)


def resolve_reference(reference: str) -> Any:
    """The object ``module:qualname`` names."""
    module, _, qualname = reference.partition(":")
    target: Any = importlib.import_module(module)
    for part in qualname.split("."):
        target = getattr(target, part)
    return target
