"""The prepare phase: every candidate of a batch compiles before any is timed, concurrently.

Compiling inside the timed loop would serialise compiles and mix compile time into the
first samples; doing it up front lets a slow compiler work on all variants at once and
drops a variant that fails to build before it costs a single timed run.
"""

from __future__ import annotations

import logging
import os
import time
from collections.abc import Callable, Hashable, Sequence
from concurrent.futures import ThreadPoolExecutor, as_completed
from typing import Any, Protocol, runtime_checkable

from tunekit._outcome import Failed
from tunekit._schedule import describe_error
from tunekit._tunable_set import TunableSet

__all__ = ["PreparesTogether", "prepare_batch"]

_log = logging.getLogger("tunekit.tuner")


@runtime_checkable
class PreparesTogether(Protocol):
    """A prepare hook that can do the costly part of its work for many candidates at once.

    Before the per-candidate hooks of a batch run, the tuner groups the hooks that share a
    ``together`` value and calls ``prepare_together`` once per group with all of them: a
    backend can then compile many kernel variants as one program, or spread them over
    worker processes. It should not raise for one candidate's failure; it leaves that for
    the candidate's own hook to raise, so the failure is recorded against that candidate.
    """

    @property
    def together(self) -> Hashable:
        """Hooks with equal values are prepared together."""
        ...

    def prepare_together(self, hooks: Sequence[object], inputs: tuple[Any, ...]) -> None:
        """Do the shared work for ``hooks`` (all with this hook's ``together``) on ``inputs``."""
        ...

    def __call__(self, *inputs: Any) -> object:
        """This candidate's own preparation; it runs after the shared work."""
        ...


def prepare_batch(
    tunables: TunableSet[Any, Any],
    batch: Sequence[int],
    inputs: tuple[Any, ...],
    workers: int | None,
    *,
    on_compiled: Callable[[int, str], None] = lambda index, name: None,
) -> tuple[dict[int, Failed], int, int, float]:
    """Run the ``prepare`` hook of every candidate in ``batch`` on a thread pool.

    Returns the failures (stage ``compile``), how many hooks ran, the pool size and the wall time.
    ``on_compiled(index, name)`` is called on this thread as each hook succeeds, in completion
    order, so a progress display advances while the slow ones are still compiling.
    The hooks run in threads because compilers release the GIL; a backend whose compiler
    serialises inside one process fans out to processes itself, from inside its hook.
    """
    hooks = {i: hook for i in batch if (hook := tunables.tunables[i].prepare) is not None}
    if not hooks:
        return {}, 0, 1, 0.0
    size = max(1, min(workers or os.cpu_count() or 1, len(hooks)))
    started = time.perf_counter()
    failures: dict[int, Failed] = {}
    groups: dict[Hashable, list[PreparesTogether]] = {}
    for hook in hooks.values():
        if isinstance(hook, PreparesTogether):
            groups.setdefault(hook.together, []).append(hook)
    with ThreadPoolExecutor(max_workers=size, thread_name_prefix="tunekit-prepare") as pool:
        for shared in [pool.submit(_prepare_group, members, inputs) for members in groups.values()]:
            shared.result()
        futures = {pool.submit(hook, *inputs): i for i, hook in hooks.items()}
        for future in as_completed(futures):
            index = futures[future]
            error = future.exception()
            if error is not None:
                failures[index] = Failed(describe_error(error), "compile")
            else:
                on_compiled(index, tunables.tunables[index].name)
    return failures, len(hooks), size, time.perf_counter() - started


def _prepare_group(hooks: list[PreparesTogether], inputs: tuple[Any, ...]) -> None:
    """The shared step; if it fails, every hook still runs on its own and reports its own error."""
    try:
        hooks[0].prepare_together(hooks, inputs)
    except Exception:
        _log.warning("preparing %d candidates together failed; each prepares alone", len(hooks), exc_info=True)
