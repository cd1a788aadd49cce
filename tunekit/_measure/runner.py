"""Candidate runners: the primitive operations a schedule performs on one candidate.

The schedule decides *what* to run (which candidate, how many samples, in which order);
a runner decides *where*: in this process, or in an isolated worker process. Keeping the
two apart lets every schedule run under every isolation mode.
"""

from __future__ import annotations

import math
import numbers
from collections.abc import Callable, Sequence
from typing import Any, Protocol, runtime_checkable

from tunekit._candidates.tunable_set import TunableSet, tuned_function
from tunekit._measure.client import Client, SupportsCacheFlush, SupportsColdInputs

__all__ = ["CandidateRunner", "InProcessRunner", "SupportsPhases", "timed_run"]


def timed_run(client: Client, run: Callable[[], object]) -> int:
    """One ``client.profile(run)``: its duration in ns, or a ValueError naming the client.

    A client's bug, not the candidate's, but caught here it fails the candidate with a reason:
    a result that is not a pair would fail as "too many values to unpack (expected 2)", naming
    neither the client nor what profile() must return, and a negative duration would fail the
    record's validation after the whole tune.
    """
    result = client.profile(run)
    if not (isinstance(result, tuple | list) and len(result) == 2):
        raise ValueError(
            f"{type(client).__name__}.profile() returned {type(result).__name__} {result!r:.60}; "
            "it must return a pair (the output of run(), the duration in ns)"
        )
    duration_ns = result[1]
    if (
        not isinstance(duration_ns, numbers.Real)
        or isinstance(duration_ns, bool)
        or not math.isfinite(duration_ns)
        or duration_ns < 0
    ):
        raise ValueError(
            f"{type(client).__name__}.profile() returned a duration of {duration_ns!r}; "
            "it must be a finite number of nanoseconds >= 0"
        )
    return int(duration_ns)


@runtime_checkable
class CandidateRunner(Protocol):
    """Runs candidates of one tunable set on one set of benchmark inputs."""

    def warmup(self, index: int) -> None:
        """Run candidate ``index`` untimed, and wait for the device; raises what the candidate raises."""
        ...

    def sample(self, index: int, *, flush: bool = True) -> int:
        """One timed run of candidate ``index`` in ns (the cache flushed first when ``flush``)."""
        ...


@runtime_checkable
class SupportsPhases(Protocol):
    """A runner told which phase the schedule is in (a progress display's runner); the others are not told."""

    def phase(self, name: str, indices: Sequence[int], *, number: int = 0, limit: int | None = None) -> None:
        """The schedule entered phase ``name`` with candidates ``indices``; see ``tk.PhaseStarted``."""
        ...


class InProcessRunner:
    """Runs candidates in the calling process, timed by the client's clock."""

    def __init__(self, client: Client, tunables: TunableSet[Any, Any], inputs: tuple[Any, ...]) -> None:
        self.client = client
        self.tunables = tunables
        self.inputs = inputs
        self._flusher = client if isinstance(client, SupportsCacheFlush) else None
        self._cold: Callable[[], tuple[Any, ...]] | None = None
        self._cold_asked = False

    def warmup(self, index: int) -> None:
        """Run candidate ``index`` once, untimed."""
        tuned_function(self.tunables.tunables[index].fn)(*self.inputs)
        self.client.sync()

    def sample(self, index: int, *, flush: bool = True) -> int:
        """Time one run of candidate ``index``: on cold inputs when ``flush`` (see ``SupportsColdInputs``)."""
        return self.timed(index, self.sample_inputs(flush))

    def sample_inputs(self, flush: bool) -> tuple[Any, ...]:
        """The inputs of the next sample: cold ones when ``flush`` (the next cold copy, or the inputs after a flush).

        Apart from :meth:`timed` so that a per-run limit can leave it out: making the copies or
        flushing is no candidate's time.
        """
        return self._cold_inputs() if flush else self.inputs

    def timed(self, index: int, inputs: tuple[Any, ...]) -> int:
        """One timed run of candidate ``index`` on ``inputs``."""
        fn = tuned_function(self.tunables.tunables[index].fn)  # built outside the timed run
        return timed_run(self.client, lambda: fn(*inputs))

    def _cold_inputs(self) -> tuple[Any, ...]:
        """The inputs of the next flushed sample: the next cold copy, or the inputs after a flush."""
        if not self._cold_asked:
            self._cold_asked = True
            # Copies are made at the first flushed sample, not before: a tune all of whose candidates fail makes none.
            # Only where the client flushes at all: a client told not to (flush_cache=False) times warm inputs.
            if self._flusher is not None and isinstance(self.client, SupportsColdInputs):
                self._cold = self.client.cold_inputs(self.inputs)
        if self._cold is not None:
            return self._cold()
        if self._flusher is not None:
            self._flusher.flush_cache()
        return self.inputs
