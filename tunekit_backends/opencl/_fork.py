"""OpenCL across ``fork()``: a forked child fails at once, naming the fix, where its driver would hang.

A driver's state does not survive ``fork()``: its threads are not copied, so the child's first
launch waits on them for ever. PoCL hangs so even on a context the child makes for itself once
the parent has listed the platforms. A worker pool forked from a process that holds an
``OpenCLClient`` (multiprocessing's default on Linux before Python 3.14, a DataLoader's workers)
is the usual way to get there; the pool is fine as long as its workers leave OpenCL alone.
"""

from __future__ import annotations

import os
import weakref
from typing import Any

__all__ = ["FORK_FIX", "forked_from", "opening"]

FORK_FIX = (
    "start worker processes with multiprocessing's 'spawn' or 'forkserver' context (a torch DataLoader: "
    "multiprocessing_context='spawn') and open a client in each, or fork them before this process opens OpenCL"
)

_opened_in: int | None = None
"""The process that first opened an OpenCL client here: this one, or the one this process was forked from."""

_clients: weakref.WeakSet[Any] = weakref.WeakSet()


def opening(client: Any) -> None:
    """A client opens in this process: refused in a fork of a process that opened OpenCL, else remembered."""
    global _opened_in  # one value per process, inherited by its forks: what is checked
    if _opened_in is not None and _opened_in != os.getpid():
        raise RuntimeError(
            f"cannot open an OpenCL client in process {os.getpid()}: it is a fork of process {_opened_in}, which "
            "had opened OpenCL, and a driver's state does not survive fork() (PoCL hangs at the first launch, even "
            f"on a context of the child's own); {FORK_FIX}"
        )
    _opened_in = os.getpid()
    _clients.add(client)


def forked_from() -> int | None:
    """The process this one was forked from, when that one opened OpenCL; None in the process that did."""
    return _opened_in if _opened_in is not None and _opened_in != os.getpid() else None


def _in_child() -> None:
    for client in list(_clients):
        client._forget_device()  # the client's own reset, called from its module's fork hook


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_in_child)
