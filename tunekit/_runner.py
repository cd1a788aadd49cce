"""Candidate runners: the primitive operations a schedule performs on one candidate.

The schedule decides *what* to run (which candidate, how many samples, in which order);
a runner decides *where*: in this process, or in an isolated worker process. Keeping the
two apart lets every schedule run under every isolation mode.
"""

from __future__ import annotations

import math
import numbers
from typing import Any, Protocol, runtime_checkable

from tunekit._client import Client, SupportsCacheFlush
from tunekit._tunable_set import TunableSet

__all__ = ["CandidateRunner", "InProcessRunner"]


@runtime_checkable
class CandidateRunner(Protocol):
    """Runs candidates of one tunable set on one set of benchmark inputs."""

    def warmup(self, index: int) -> None:
        """Run candidate ``index`` untimed, and wait for the device; raises what the candidate raises."""
        ...

    def sample(self, index: int, *, flush: bool = True) -> int:
        """One timed run of candidate ``index`` in ns (the cache flushed first when ``flush``)."""
        ...


class InProcessRunner:
    """Runs candidates in the calling process, timed by the client's clock."""

    def __init__(self, client: Client, tunables: TunableSet[Any, Any], inputs: tuple[Any, ...]) -> None:
        self.client = client
        self.tunables = tunables
        self.inputs = inputs
        self._flusher = client if isinstance(client, SupportsCacheFlush) else None

    def warmup(self, index: int) -> None:
        """Run candidate ``index`` once, untimed."""
        self.tunables.tunables[index].fn(*self.inputs)
        self.client.sync()

    def sample(self, index: int, *, flush: bool = True) -> int:
        """Time one run of candidate ``index``."""
        if flush and self._flusher is not None:
            self._flusher.flush_cache()
        fn = self.tunables.tunables[index].fn
        inputs = self.inputs
        _, duration_ns = self.client.profile(lambda: fn(*inputs))
        # A client's bug, not the candidate's, but caught here it fails the candidate with a reason
        # instead of a negative median failing the record's validation after the whole tune.
        if (
            not isinstance(duration_ns, numbers.Real)
            or isinstance(duration_ns, bool)
            or not math.isfinite(duration_ns)
            or duration_ns < 0
        ):
            raise ValueError(
                f"{type(self.client).__name__}.profile() returned a duration of {duration_ns!r}; "
                "it must be a finite number of nanoseconds >= 0"
            )
        return int(duration_ns)
