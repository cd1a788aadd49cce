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
from contextvars import copy_context
from dataclasses import dataclass
from functools import partial
from typing import Any, Protocol, runtime_checkable

from tunekit._base.errors import ClientClosed, describe_error
from tunekit._candidates.tunable_set import TunableSet
from tunekit._values.outcome import Failed

__all__ = ["FirstRunReport", "PreparedBatch", "PreparesTogether", "ReportsFirstRun", "prepare_batch"]

_log = logging.getLogger("tunekit.tuner")


@runtime_checkable
class PreparesTogether(Protocol):
    """A prepare hook that can do the costly part of its work for many candidates at once.

    Before the per-candidate hooks of a batch run, the tuner groups the hooks that share a
    ``together`` value and calls ``prepare_together`` once per group with all of them: a
    backend can then compile many kernel variants as one program, or spread them over
    worker processes. It should not raise for one candidate's failure; it leaves that for
    the candidate's own hook to raise, so the failure is recorded against that candidate.
    It returns None, or one line saying why it took a slower path than it could have (worker
    processes unusable, say), which goes on the tune's record; the tune goes on either way.
    """

    @property
    def together(self) -> Hashable:
        """Hooks with equal values are prepared together."""
        ...

    def prepare_together(self, hooks: Sequence[object], inputs: tuple[Any, ...]) -> str | None:
        """Do the shared work for ``hooks`` (all with this ``together``) on ``inputs``; why it was slow, or None."""
        ...

    def __call__(self, *inputs: Any) -> object:
        """This candidate's own preparation; it runs after the shared work."""
        ...


@runtime_checkable
class ReportsFirstRun(Protocol):
    """A prepare hook that runs its candidate once on copies of the benchmark inputs, and can report that run.

    A backend whose preparation launches each candidate anyway (to compile it, on a copy of the
    inputs with canaries after every buffer) can hand the tune the outputs of that launch: the
    check then judges them instead of running the candidate once more. The outputs are reported
    only from a launch that went well (no error, no canary overwritten), as host values in the
    form the check reads them; a candidate whose outputs are not reported is checked as usual.
    """

    def report_first_run(
        self, inputs: tuple[Any, ...], outputs: Sequence[int], report: Callable[[tuple[Any, ...]], None] | None
    ) -> None:
        """Report the arguments at ``outputs`` after a first run on ``inputs`` (this tuple, not another tune's)
        to ``report``, on any thread; None: report nothing any more."""
        ...


FirstRunReport = Callable[[int, tuple[Any, ...]], None]
"""Called with a candidate's index and the outputs of its first run, on the thread that learnt them."""


@dataclass(frozen=True, slots=True)
class PreparedBatch:
    """What the prepare phase of a batch did: its failures (stage ``compile``), how many hooks ran, on how many
    threads, in what wall time, and why a shared step took a slower path (None when none did)."""

    failures: dict[int, Failed]
    hooks: int
    threads: int
    wall_time_s: float
    slower_path: str | None = None


def prepare_batch(
    tunables: TunableSet[Any, Any],
    batch: Sequence[int],
    inputs: tuple[Any, ...],
    workers: int | None,
    *,
    on_compiled: Callable[[int, str], None] = lambda index, name: None,
    first_runs: tuple[Sequence[int], FirstRunReport] | None = None,
) -> PreparedBatch:
    """Run the ``prepare`` hook of every candidate in ``batch`` on a thread pool.

    ``on_compiled(index, name)`` is called on this thread as each hook succeeds, in completion
    order, so a progress display advances while the slow ones are still compiling.
    The hooks run in threads because compilers release the GIL; a backend whose compiler
    serialises inside one process fans out to processes itself, from inside its hook.

    ``first_runs``: the output positions and where to report them, for hooks that can report the
    outputs of the run their preparation makes (:class:`ReportsFirstRun`).
    """
    hooks = {i: hook for i in batch if (hook := tunables.tunables[i].prepare) is not None}
    if not hooks:
        return PreparedBatch({}, 0, 1, 0.0)
    size = max(1, min(workers or os.cpu_count() or 1, len(hooks)))
    started = time.perf_counter()
    failures: dict[int, Failed] = {}
    groups: dict[Hashable, list[PreparesTogether]] = {}
    for hook in hooks.values():
        if isinstance(hook, PreparesTogether):
            groups.setdefault(hook.together, []).append(hook)
    reporting: list[tuple[int, ReportsFirstRun]] = []
    if first_runs is not None:
        positions, report = first_runs
        for i, hook in hooks.items():
            if isinstance(hook, ReportsFirstRun):
                reporting.append((i, hook))
    try:
        for index, reporter in reporting:
            reporter.report_first_run(inputs, positions, partial(report, index))
        with ThreadPoolExecutor(max_workers=size, thread_name_prefix="tunekit-prepare") as pool:
            # Each hook runs in a copy of this context: it works for this tune (see tunekit._base.self_call).
            shared = [pool.submit(copy_context().run, _prepare_group, members, inputs) for members in groups.values()]
            notes = [note for note in (future.result() for future in shared) if note is not None]
            futures = {pool.submit(copy_context().run, hook, *inputs): i for i, hook in hooks.items()}
            for future in as_completed(futures):
                index = futures[future]
                error = future.exception()
                if isinstance(error, ClientClosed):  # no candidate's fault: the tune stops, nothing is stored
                    raise error
                if error is not None:
                    failures[index] = Failed(describe_error(error), "compile")
                else:
                    on_compiled(index, tunables.tunables[index].name)
    finally:
        for _, reporter in reporting:  # a later batch, or tune, must not report to this one
            reporter.report_first_run(inputs, (), None)
    wall_s = time.perf_counter() - started
    return PreparedBatch(failures, len(hooks), size, wall_s, "; ".join(notes) if notes else None)


def _prepare_group(hooks: list[PreparesTogether], inputs: tuple[Any, ...]) -> str | None:
    """The shared step; if it fails, every hook still runs on its own and reports its own error."""
    try:
        note = hooks[0].prepare_together(hooks, inputs)
    except ClientClosed:
        raise
    except Exception:
        _log.warning("preparing %d candidates together failed; each prepares alone", len(hooks), exc_info=True)
        return None
    return note if isinstance(note, str) and note else None
