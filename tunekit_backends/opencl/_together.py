"""Compiling a batch of one template's variants together: few programs, in parallel where it pays.

The tuner hands every variant of a batch to :func:`compile_together` before the per-variant
prepare hooks run. Variants are dealt round-robin into programs of at most ``_MAX_PER_PROGRAM``
(see ``_batch.py`` for why one program beats many). With a compile pool, each program is built
and each kernel first-launched in a worker process, programs in parallel, and the parent then
builds the same programs from the driver's kernel cache; without one, the parent builds them.
Either way the per-variant hook afterwards finds its kernel built, checks the device's limits
and launches it once, so only its error, if any, is reported against it.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import TYPE_CHECKING, Any

from tunekit_backends.opencl._batch import Batch, batchable, batched_program
from tunekit_backends.opencl._cl import pyopencl
from tunekit_backends.opencl._compile import CompilePool, WorkerDied, describe_launch
from tunekit_backends.opencl._compile_wire import ProgramReply, ProgramRequest

if TYPE_CHECKING:
    from tunekit_backends.opencl._template import _Variant

__all__ = ["compile_one_in_worker", "compile_together"]

_MAX_PER_PROGRAM = 32
"""A program that fails to build is retried variant by variant: keep that retry bounded."""


def compile_together(variants: Sequence[_Variant[Any]], inputs: tuple[Any, ...]) -> None:
    """Build every not-yet-built variant in few programs; failures are left on each variant."""
    todo = [v for v in variants if v.unbuilt()]
    if not todo:
        return
    template, client = todo[0].template, todo[0].client
    pool = client.compile_pool
    if len(todo) == 1 or not batchable(template.source):
        if pool is not None:
            _each_in_workers(pool, todo, inputs)
        return
    count = math.ceil(len(todo) / _MAX_PER_PROGRAM)
    groups = [todo[start::count] for start in range(count)]
    if pool is not None:
        _in_workers(pool, groups, inputs)
    else:
        for group in groups:
            _build_here(group, _program_of(group))


def _program_of(group: Sequence[_Variant[Any]]) -> Batch:
    template = group[0].template
    defines = [[(name, template.define_value(value)) for name, value in v.config.items()] for v in group]
    return batched_program(template.source, template.kernel_name, defines, template.options)


def _in_workers(pool: CompilePool, groups: list[list[_Variant[Any]]], inputs: tuple[Any, ...]) -> None:
    """Every kernel of every program first-launched in whichever worker is free, then each program built here.

    One request per kernel, not per program: compile times differ by 5x between variants, so
    handing out whole programs leaves a worker idle at the end. Each worker builds a program
    the first time one of its kernels reaches it (a duplicated build is cheap next to the
    first launches), and the first launch compiles only that kernel.
    """
    jobs: list[tuple[_Variant[Any], ProgramRequest | None, list[_Variant[Any]]]] = []
    batches = [_program_of(group) for group in groups]
    for group, batch in zip(groups, batches, strict=True):
        options = list(group[0].template.options)
        for variant, name in zip(group, batch.kernel_names, strict=True):
            jobs.append((variant, _request([variant], batch.source, options, [name], inputs), group))
    broken: set[int] = set()

    def one(job: tuple[_Variant[Any], ProgramRequest | None, list[_Variant[Any]]]) -> None:
        variant, request, group = job
        if request is None or id(group) in broken:
            return
        try:
            reply = pool.run(request)
        except WorkerDied:
            reply = ProgramReply(build_error="worker died")
        if reply.build_error is not None:
            broken.add(id(group))
        elif reply.launch_errors and reply.launch_errors[0] is not None:
            variant.fail(f"refused by the device at launch in a compile worker: {reply.launch_errors[0]}")
        else:
            variant.launched_in_worker = True

    _on_threads(pool, one, jobs)
    # A program that failed as a whole (one variant does not compile, or crashes the compiler)
    # is retried one variant per program, so each failure is found and costs only itself.
    retry = [v for group in groups if id(group) in broken for v in group]
    if retry:
        _each_in_workers(pool, retry, inputs)
    for group, batch in zip(groups, batches, strict=True):
        if id(group) not in broken:
            _build_here(group, batch)


def _each_in_workers(pool: CompilePool, variants: Sequence[_Variant[Any]], inputs: tuple[Any, ...]) -> None:
    _on_threads(pool, lambda variant: compile_one_in_worker(pool, variant, inputs), list(variants))


def _on_threads(pool: CompilePool, work: Callable[[Any], None], items: list[Any]) -> None:
    """``work`` on every item, as many at once as the pool has workers."""
    with ThreadPoolExecutor(max_workers=pool.workers, thread_name_prefix="tunekit-compile") as threads:
        for future in [threads.submit(work, item) for item in items]:
            future.result()


def compile_one_in_worker(pool: CompilePool, variant: _Variant[Any], inputs: tuple[Any, ...]) -> None:
    """One variant alone in a worker, built exactly as its own lazy build will be (so that is a cache hit)."""
    template = variant.template
    request = _request(
        [variant], template.source, template.build_options(variant.config), [template.kernel_name], inputs
    )
    if request is None:
        return
    try:
        reply = pool.run(request)
    except WorkerDied as exc:
        variant.fail(f"crashed a compile worker while building or first launching it: {exc}")
        return
    if reply.build_error is not None:
        variant.fail(f"build failed in a compile worker: {reply.build_error}")
    elif reply.launch_errors and reply.launch_errors[0] is not None:
        variant.fail(f"refused by the device at launch in a compile worker: {reply.launch_errors[0]}")
    else:
        variant.launched_in_worker = True


def _request(
    group: Sequence[_Variant[Any]],
    source: str,
    options: list[str],
    kernel_names: Sequence[str],
    inputs: tuple[Any, ...],
) -> ProgramRequest | None:
    """The worker request for ``group``, or None when an argument cannot be described to a worker."""
    client = group[0].client
    try:
        launches = []
        for variant, name in zip(group, kernel_names, strict=True):
            global_size, local_size = variant.shape(inputs)
            launches.append(describe_launch(name, global_size, local_size, inputs))
    except Exception:  # the variant's own hook reports a bad geometry or argument, in its own words
        return None
    return ProgramRequest(
        platform=client.device.platform.name,
        device=client.device.name,
        source=source,
        options=tuple(options),
        launches=tuple(launches),
    )


def _build_here(group: Sequence[_Variant[Any]], batch: Batch) -> None:
    """Build ``batch`` (made of ``group``, in order) here; each variant not failed yet adopts its kernel.

    When this build fails, the variants stay unbuilt: each then builds alone in its own hook
    and reports its own compiler error.
    """
    cl = pyopencl()
    try:
        program = cl.Program(group[0].client.context, batch.source).build(options=list(group[0].template.options))
    except cl.Error:
        return
    for variant, name in zip(group, batch.kernel_names, strict=True):
        if variant.failure is None:
            variant.adopt(cl.Kernel(program, name))
