"""What the parent and a compile worker say to each other: a ready line, then one JSON line each way per request.

A worker process is started with ``python -m tunekit_backends.opencl._compile_worker`` (not
``multiprocessing``), so it never re-imports the user's ``__main__``: a script without an
``if __name__ == "__main__":`` guard compiles in processes as safely as one with it.

The worker's first line is :class:`WorkerReady`, sent once its device is open and its compiler
loaded: a worker that dies before it is no fault of the request it was sent, while one that dies
after it died on that request (a compiler crash on that source is real evidence).
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

__all__ = ["WIRE_VERSION", "KernelArg", "Launch", "ProgramReply", "ProgramRequest", "WorkerReady"]

WIRE_VERSION: Literal[4] = 4
"""2: the worker announces itself with a WorkerReady line before its first reply. 3: the parent sends each
buffer's canary (size and value), so the worker need not import tunekit to know them. 4: a launch may ask
for its outputs, written to a file, for the tune's check."""


class _Wire(BaseModel):
    # A scalar argument may be a clamp bound of -inf, or NaN: JSON has no word for them.
    model_config = ConfigDict(extra="forbid", frozen=True, ser_json_inf_nan="constants")


class KernelArg(_Wire):
    """One kernel argument: a buffer, or a scalar of a numpy dtype.

    A buffer's contents are ``nbytes`` at ``offset`` of the request's ``data_file`` (a copy of
    the caller's benchmark inputs), so the worker's first launch runs on the data the tune
    runs on: a kernel whose loops follow its data (a linked list ended by -1) must not meet
    zeros it would never see. ``canary`` bytes of ``canary_value`` follow, as in the parent's own first launch.
    """

    kind: Literal["buffer", "scalar"]
    nbytes: int = Field(0, ge=0)
    offset: int = Field(0, ge=0)
    canary: int = Field(0, ge=0)
    canary_value: int = Field(0, ge=0, le=255)
    value: int | float = 0
    dtype: str = ""


class Launch(_Wire):
    """One kernel of the program, launched once so that lazily compiling drivers compile it now."""

    kernel: str
    global_size: tuple[int, ...]
    local_size: tuple[int, ...] | None
    args: tuple[KernelArg, ...]
    read_back: tuple[int, ...] = ()
    """Positions of buffer arguments whose bytes (the canaries left out), one after the other, the worker writes
    to ``read_back_file`` after a launch that went well: the tune's check judges them instead of running the
    variant once more."""
    read_back_file: str = ""
    known: tuple[str, ...] = ()
    """SHA-256 digests of outputs the parent already holds: outputs with one of them are not written again."""


class ProgramRequest(_Wire):
    """Build ``source`` with ``options`` on the named device, then run each launch once."""

    schema_version: Literal[4] = WIRE_VERSION
    platform: str
    device: str
    source: str
    options: tuple[str, ...]
    data_file: str = ""
    launches: tuple[Launch, ...]


class ProgramReply(_Wire):
    """The build's error (then no launch ran), else one error or None per launch, in order.

    ``retire``: a launch wrote past the end of a buffer, so the worker's memory may be corrupt; it
    exits after this reply, and the parent must not send it anything more (a later crash there
    would blame an innocent variant).
    """

    schema_version: Literal[4] = WIRE_VERSION
    build_error: str | None = None
    launch_errors: tuple[str | None, ...] = ()
    read_back: tuple[bool, ...] = ()
    """Per launch: whether its ``read_back`` outputs were written (an empty tuple: none asked for)."""
    read_back_digests: tuple[str, ...] = ()
    """Per launch: the SHA-256 of its ``read_back`` outputs, written or known ("": not read)."""
    retire: bool = False


class WorkerReady(_Wire):
    """The worker's first line: its device is open and a first build went through its compiler.

    ``kernel_cache`` says why the worker's builds will not reach the parent through the driver's
    on-disk kernel cache (off, or not writable there); None when they will or the driver has none.
    """

    schema_version: Literal[4] = WIRE_VERSION
    ready: Literal[True] = True
    kernel_cache: str | None = None
