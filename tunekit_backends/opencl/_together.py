"""Compiling a batch of one template's variants together: few programs, in parallel where it pays.

The tuner hands every variant of a batch to :func:`compile_together` before the per-variant
prepare hooks run. Variants go into programs of at most ``_MAX_PER_PROGRAM`` (see ``_batch.py``
for why one program beats many). With a compile pool, each program is built and each kernel
first-launched (on a copy of the benchmark inputs) in a worker process, one kernel per request
to whichever worker is free, and the parent then builds the same programs from the driver's
kernel cache; without one, the parent builds them. Either way the per-variant hook afterwards
finds its kernel built, checks the device's limits and launches it once unless a worker already
did at that launch shape, so each failure is reported against its own variant.

When the tune's check asked for them (``FirstRun``, from ``ReportsFirstRun``), a worker's first
launch also reads back the outputs: it sends their SHA-256, and writes them to a file beside the
inputs file unless the parent already holds outputs with that digest for this batch. The parent
reports them to the tune, which judges them instead of running the variant once more.

When workers cannot be used at all (the temporary directory cannot take the copy of the
inputs, or no worker can start), the batch compiles here exactly as without a pool, and the
pool warns once, saying what failed and what to do; the tune goes on either way, and the
reason goes on the tune's record (the ``compiled_in_process`` of its ``prepare`` event).
"""

from __future__ import annotations

import contextlib
import glob
import itertools
import logging
import math
import os
import threading
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any, NamedTuple, Protocol, TypeVar

import numpy as np

import tunekit as tk
from tunekit.backend import current_run_policy
from tunekit_backends.opencl._batch import Batch, batchable, batched_program
from tunekit_backends.opencl._cl import pyopencl
from tunekit_backends.opencl._client import OpenCLClient
from tunekit_backends.opencl._compile import CompilePool, InputsFile, WorkerDied, launch_of
from tunekit_backends.opencl._compile_wire import Launch, ProgramReply, ProgramRequest

__all__ = ["FirstRun", "compile_together"]

_log = logging.getLogger("tunekit.opencl")

T = TypeVar("T")


class _Template(Protocol):
    """What compiling together reads of a variant's ``KernelTemplate``."""

    @property
    def source(self) -> str: ...
    @property
    def kernel_name(self) -> str: ...
    @property
    def options(self) -> tuple[str, ...]: ...
    def build_options(self, config: tk.Config) -> list[str]: ...
    def define_value(self, value: tk.ParamValue) -> str: ...


class FirstRun(NamedTuple):
    """What a tune's check wants from a variant's first launch in a worker: on these inputs (these very objects,
    so that another tune's compile of the same variant reports nothing to this one), these outputs, reported there."""

    inputs: tuple[Any, ...]
    outputs: tuple[int, ...]
    report: Callable[[tuple[Any, ...]], None]


class _Variant(Protocol):
    """One configuration of a template bound to a client, as compiling together builds and adopts it."""

    @property
    def template(self) -> _Template: ...
    @property
    def client(self) -> OpenCLClient: ...
    @property
    def config(self) -> tk.Config: ...
    @property
    def name(self) -> str: ...
    @property
    def failure(self) -> str | None: ...
    def unbuilt(self) -> bool: ...
    def needs_first_launch(self, inputs: tuple[Any, ...]) -> bool: ...
    def offered(self, inputs: tuple[Any, ...]) -> None: ...
    def fail(self, reason: str) -> None: ...
    @property
    def first_run(self) -> FirstRun | None: ...
    def worker_launched(self, inputs: tuple[Any, ...], error: str | None, *, fatal: bool = False) -> None: ...
    def adopt(self, kernel: Any) -> None: ...
    def shape(self, args: tuple[Any, ...]) -> tuple[tuple[int, ...], tuple[int, ...] | None]: ...


_MAX_PER_PROGRAM = 32
"""A program that fails to build is retried variant by variant: keep that retry bounded."""


def compile_together(variants: Sequence[_Variant], inputs: tuple[Any, ...]) -> str | None:
    """Build, and where a pool exists first-launch, every variant not yet launched at its shape for ``inputs``.

    Returns why some or all of them compiled in this process although the client has compile
    workers (for the tune's record); None when they did not.
    """
    todo = [v for v in variants if v.needs_first_launch(inputs)]
    for variant in todo:
        variant.offered(inputs)
    if not todo:
        return None
    template, client = todo[0].template, todo[0].client
    pool = client.compile_pool
    if pool is None:
        _build_all_here(todo)
        return None
    try:
        files = InputsFile(inputs)
    except OSError as exc:  # a full, missing or read-only temporary directory
        pool.warn_once(
            "inputs",
            f"{template}: compile workers need a copy of the benchmark inputs in the temporary directory, which "
            f"cannot be written ({exc}); compiling in this process instead (slower on PoCL). Free space there or "
            "point TMPDIR at a writable directory, or pass OpenCLClient(compile_in='thread') to compile here.",
        )
        _build_all_here(todo)
        return f"the temporary directory cannot take the compile workers' copy of the inputs ({exc})"
    _SEEN[files.path] = _Seen()
    try:
        if files.args is None:
            _log.info("%s: an argument cannot be sent to a compile worker; compiling in this process", template)
            _build_all_here(todo)
            return "an argument cannot be sent to a compile worker (local memory, say)"
        # A variant's build and first launch in a worker are held to the same limit as one of the tune's runs:
        # the set's with_isolation(timeout_s=) when it has one, else the setting (a 5 s limit must not wait 60 s here).
        limit = current_run_policy().timeout_s
        timeout_s = math.inf if limit is None else limit
        if len(todo) > 1 and batchable(template.source):
            count = math.ceil(len(todo) / _MAX_PER_PROGRAM)
            return _in_workers(pool, [todo[start::count] for start in range(count)], inputs, files, timeout_s)
        notes = _on_threads(pool, lambda v: compile_one_in_worker(pool, v, inputs, files, timeout_s), todo)
        return _first(notes)
    finally:
        _SEEN.pop(files.path, None)
        files.close()
        for left in glob.glob(f"{glob.escape(files.path)}.*.out"):  # outputs of a launch whose reply never came
            with contextlib.suppress(OSError):
                os.unlink(left)


def _first(notes: list[str | None]) -> str | None:
    return next((note for note in notes if note is not None), None)


def _build_all_here(variants: Sequence[_Variant]) -> None:
    """Build the unbuilt ones here as few programs, where the source allows (else each builds in its own hook)."""
    unbuilt = [v for v in variants if v.unbuilt()]
    if len(unbuilt) > 1 and batchable(unbuilt[0].template.source):
        count = math.ceil(len(unbuilt) / _MAX_PER_PROGRAM)
        for group in (unbuilt[start::count] for start in range(count)):
            _build_here(group, _program_of(group))


def _cannot_start(pool: CompilePool, exc: WorkerDied) -> str:
    pool.warn_once(
        "start",
        f"{exc}; compiling in this process instead (slower on PoCL). A worker runs "
        "`sys.executable -m tunekit_backends.opencl._compile_worker`: make that a Python that imports tunekit and "
        "pyopencl, or pass OpenCLClient(compile_in='thread') to compile here.",
    )
    return f"no compile worker could start: {exc}"


def _program_of(group: Sequence[_Variant]) -> Batch:
    template = group[0].template
    defines = [[(name, template.define_value(value)) for name, value in v.config.items()] for v in group]
    return batched_program(template.source, template.kernel_name, defines)


Job = tuple["_Variant", ProgramRequest | None, list["_Variant"]]


def _in_workers(
    pool: CompilePool,
    groups: list[list[_Variant]],
    inputs: tuple[Any, ...],
    files: InputsFile,
    timeout_s: float,
) -> str | None:
    """Every kernel of every program first-launched in whichever worker is free, then each program built here.

    One request per kernel, not per program: compile times differ by 5x between variants, so
    handing out whole programs leaves a worker idle at the end. A worker builds a program the
    first time one of its kernels reaches it, and the first launch compiles only that kernel.
    """
    per_program: list[list[Job]] = []
    batches = [_program_of(group) for group in groups]
    for group, batch in zip(groups, batches, strict=True):
        options = list(group[0].template.options)
        per_program.append(
            [
                (variant, _request(variant, batch.source, options, name, inputs, files), group)
                for variant, name in zip(group, batch.kernel_names, strict=True)
            ]
        )
    jobs = [job for round_ in itertools.zip_longest(*per_program) for job in round_ if job is not None]
    broken: set[int] = set()
    built: set[int] = set()  # programs a worker built and first-launched a kernel of
    lost: list[tuple[_Variant, list[_Variant], WorkerDied]] = []
    unstarted: list[WorkerDied] = []

    def one(job: Job) -> None:
        variant, request, group = job
        if request is None or id(group) in broken or unstarted:
            return
        try:
            reply = pool.run(_asking(request), timeout_s)
        except WorkerDied as exc:
            if not exc.started:  # no fault of this program's: the rest builds here, below
                unstarted.append(exc)
            elif exc.crashed or exc.timed_out:
                lost.append((variant, group, exc))  # judged below, once the program's other kernels have run
            else:
                broken.add(id(group))  # which variant did it is found one by one below
            return
        if reply.build_error is not None:
            _log.debug("%s: the batched program failed (%s); one program per variant", variant.name, reply.build_error)
            broken.add(id(group))
        else:
            built.add(id(group))
            _worker_launched(variant, inputs, reply, request)

    _on_threads(pool, one, jobs)
    for variant, group, exc in lost:
        if id(group) in built and id(group) not in broken:
            # Its program built, and another of its kernels launched, within the limit: the first launch of this
            # kernel is what crashed or hung. Sent alone to a fresh worker, it would hang a second time: a kernel
            # that never ends cost twice candidate_timeout_s (120 s by default) before it was told.
            how = "crashed" if exc.crashed else "hung"
            variant.worker_launched(
                inputs, f"{how} a compile worker at its first launch (its program built): {exc}", fatal=True
            )
        else:
            broken.add(id(group))  # which variant did it is found one by one below
    note = _cannot_start(pool, unstarted[0]) if unstarted else None
    retry = [v for group in groups if id(group) in broken for v in group]
    notes = _on_threads(pool, lambda v: compile_one_in_worker(pool, v, inputs, files, timeout_s), retry)
    for group, batch in zip(groups, batches, strict=True):
        if id(group) not in broken:
            _build_here(group, batch)
    return note or _first(notes)


def _on_threads(pool: CompilePool, work: Callable[[Any], T], items: list[Any]) -> list[T]:
    """``work`` on every item, as many at once as the pool has workers; the results in order."""
    if not items:
        return []
    with ThreadPoolExecutor(max_workers=pool.workers, thread_name_prefix="tunekit-compile") as threads:
        return [future.result() for future in [threads.submit(work, item) for item in items]]


def compile_one_in_worker(
    pool: CompilePool, variant: _Variant, inputs: tuple[Any, ...], files: InputsFile, timeout_s: float
) -> str | None:
    """One variant alone in a worker, built exactly as its own lazy build will be (so that is a cache hit).

    A ready worker killed by a signal or past its deadline fails the variant at that launch shape;
    any other trouble with the worker leaves the variant to compile in this process (its own hook),
    and returns why (for the tune's record).
    """
    template = variant.template
    request = _request(
        variant, template.source, template.build_options(variant.config), template.kernel_name, inputs, files
    )
    if request is None:
        return None
    try:
        reply = pool.run(_asking(request), timeout_s)
    except WorkerDied as exc:
        if not exc.started:
            return _cannot_start(pool, exc)
        if exc.crashed:
            message = f"crashed a compile worker while building or first launching it: {exc}"
            variant.worker_launched(inputs, message, fatal=True)
        elif exc.timed_out:
            variant.worker_launched(
                inputs, f"hung a compile worker while building or first launching it: {exc}", fatal=True
            )
        else:
            pool.warn_once("exited", f"{variant.name}: compiling in this process instead: {exc}")
            return f"{variant.name}: {exc}"
        return None
    if reply.build_error is not None:
        variant.fail(f"build failed in a compile worker: {reply.build_error}")
    else:
        _worker_launched(variant, inputs, reply, request)
    return None


def _worker_launched(variant: _Variant, inputs: tuple[Any, ...], reply: ProgramReply, request: ProgramRequest) -> None:
    """Tell ``variant`` how its first launch in a worker went; one that wrote out of bounds never runs here.

    A launch that went well and wrote the outputs the tune's check asked for reports them.
    """
    error = reply.launch_errors[0] if reply.launch_errors else None
    variant.worker_launched(inputs, error, fatal=reply.retire)
    launch = request.launches[0]
    if not launch.read_back_file:
        return
    try:
        wanted = variant.first_run
        digest = reply.read_back_digests[0] if reply.read_back_digests else ""
        if (
            error is None
            and digest
            and wanted is not None
            and _same(wanted.inputs, inputs)
            and wanted.outputs == launch.read_back
        ):
            seen = _SEEN.get(request.data_file)
            outputs = seen.get(digest) if seen is not None else None
            if outputs is None and reply.read_back[:1] == (True,):
                outputs = _outputs_read(launch, inputs)
                if seen is not None:
                    seen.keep(digest, outputs)
            if outputs is not None:
                wanted.report(outputs)
    except (OSError, ValueError) as exc:  # the check then runs the variant here, as without a worker
        _log.debug("%s: the outputs of its first launch cannot be read (%s)", variant.name, exc)
    finally:
        with contextlib.suppress(OSError):
            os.unlink(launch.read_back_file)


class _Seen:
    """The outputs read back while one batch compiles, by their SHA-256: a launch whose outputs have one of these
    digests sends the digest alone, and its variant is judged on the outputs kept here (the same bits)."""

    _KEEP = 8

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._outputs: dict[str, tuple[Any, ...]] = {}

    def known(self) -> tuple[str, ...]:
        with self._lock:
            return tuple(self._outputs)

    def get(self, digest: str) -> tuple[Any, ...] | None:
        with self._lock:
            return self._outputs.get(digest)

    def keep(self, digest: str, outputs: tuple[Any, ...]) -> None:
        with self._lock:
            if len(self._outputs) < self._KEEP:
                self._outputs[digest] = outputs


_SEEN: dict[str, _Seen] = {}
"""By inputs file (one per batch compiling), while the batch compiles."""


def _asking(request: ProgramRequest) -> ProgramRequest:
    """``request`` naming the digests of the outputs already read back for its batch (as it is sent, not built)."""
    launch = request.launches[0]
    seen = _SEEN.get(request.data_file)
    known = seen.known() if seen is not None and launch.read_back else ()
    if not known:
        return request
    return request.model_copy(update={"launches": (launch.model_copy(update={"known": known}),)})


def _same(registered: tuple[Any, ...], inputs: tuple[Any, ...]) -> bool:
    """The same arguments, object for object (a variant's own hook unpacks and repacks the tune's tuple)."""
    return len(registered) == len(inputs) and all(a is b for a, b in zip(registered, inputs, strict=True))


def _outputs_read(launch: Launch, inputs: tuple[Any, ...]) -> tuple[Any, ...]:
    """The read-back outputs as the check reads them from the device: arrays of their dtype and shape."""
    raw = np.fromfile(launch.read_back_file, np.uint8)
    outputs = []
    offset = 0
    for position in launch.read_back:
        array, nbytes = inputs[position], launch.args[position].nbytes
        if raw.size < offset + nbytes:
            raise ValueError(f"{launch.read_back_file} holds {raw.size} bytes, fewer than its outputs")
        outputs.append(raw[offset : offset + nbytes].view(array.dtype).reshape(array.shape))
        offset += nbytes
    return tuple(outputs)


def _read_back(variant: _Variant, inputs: tuple[Any, ...], files: InputsFile) -> tuple[int, ...]:
    """The positions of the outputs the tune's check wants from this launch; () when none or they cannot be read.

    Only C-contiguous pyopencl arrays: their bytes, read with the array's dtype and shape, are
    what the check's ``.get()`` gives. A raw Buffer is left to the check, which says why it cannot read one.
    """
    wanted = variant.first_run
    if wanted is None or not _same(wanted.inputs, inputs) or files.args is None:
        return ()
    cl = pyopencl()
    for position in wanted.outputs:
        if not 0 <= position < len(inputs):
            return ()
        value = inputs[position]
        if not (isinstance(value, cl.array.Array) and value.flags.c_contiguous):
            return ()
        if files.args[position].nbytes != value.nbytes:
            return ()
    return wanted.outputs


def _request(
    variant: _Variant, source: str, options: list[str], kernel: str, inputs: tuple[Any, ...], files: InputsFile
) -> ProgramRequest | None:
    """The worker request for one kernel, or None when the variant's own hook should report its launch shape."""
    try:
        global_size, local_size = variant.shape(inputs)
    except Exception:  # the variant's own hook reports a bad geometry, in its own words
        return None
    if local_size is not None and (
        len(local_size) != len(global_size) or any(g % max(x, 1) for g, x in zip(global_size, local_size, strict=True))
    ):
        return None
    client = variant.client
    launch = launch_of(kernel, global_size, local_size, files)
    read_back = _read_back(variant, inputs, files)
    if read_back:
        path = f"{files.path}.{next(_outputs_files)}.out"  # removed by _worker_launched, or with the inputs file
        launch = launch.model_copy(update={"read_back": read_back, "read_back_file": path})
    return ProgramRequest(
        platform=client.device.platform.name,
        device=client.device.name,
        source=source,
        options=tuple(options),
        data_file=files.path,
        launches=(launch,),
    )


_outputs_files = itertools.count()


def _build_here(group: Sequence[_Variant], batch: Batch) -> None:
    """Build ``batch`` (made of ``group``, in order) here; each variant not failed yet adopts its kernel.

    When this build fails, the variants stay unbuilt: each then builds alone in its own hook
    and reports its own compiler error.
    """
    cl = pyopencl()
    try:
        program = cl.Program(group[0].client.context, batch.source).build(options=list(group[0].template.options))
    except cl.Error as exc:
        _log.debug("%s: the batched program failed to build here (%s)", group[0].template, str(exc)[:200])
        return
    for variant, name in zip(group, batch.kernel_names, strict=True):
        if variant.failure is None:
            variant.adopt(cl.Kernel(program, name))
