"""The surrogates' small solves run on one BLAS thread.

numpy's OpenBLAS splits even a 384 x 384 solve across every core, and its threads spin while
they wait: unlimited, on the 2-core development VM ``model_ils`` spends ten times the CPU time on
pnpoly (0.63 s against 0.07 s per run through ``benches/strategies.py``) and finishes no sooner.

The limit is process-wide while it lasts (microseconds to milliseconds, between batches: the
search driver never measures while its strategy proposes). A numpy candidate timed in another
thread at that moment would run on one BLAS thread, which only two searches running side by side
in one process could cause.
"""

from __future__ import annotations

import contextlib
import functools
from collections.abc import Iterator
from typing import Any

from threadpoolctl import ThreadpoolController

__all__ = ["one_blas_thread"]


@functools.cache
def _controller() -> Any:
    # Made at first use: making it scans the process's shared libraries, which importing tunekit must not.
    return ThreadpoolController()


@contextlib.contextmanager
def one_blas_thread() -> Iterator[None]:
    """BLAS limited to one thread inside the block, as it was after it."""
    with _controller().limit(limits=1, user_api="blas"):
        yield
