"""Arrays whose dtype is not what the kernel declares are refused by name, on PoCL; correct launches are not."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Annotated, Any

import numpy as np
import pytest

import tunekit as tk
from tunekit._keys.key import key_to_json
from tunekit_backends.opencl import KernelTemplate, OpenCLClient
from tunekit_backends.opencl._kernel_args import (
    Param,
    argument_mismatch,
    declared_dtypes,
    kernel_params,
    source_aliases,
)

cla = pytest.importorskip("pyopencl.array", reason="pip install 'tunekit[opencl]'")
cl = pytest.importorskip("pyopencl")
cltypes = pytest.importorskip("pyopencl.cltypes")

SCALE = """
__kernel void scale(__global const float* restrict x, __global T* y, const float a, const int n) {
    int i = get_global_id(0);
    if (i < n) y[i] = a * x[i];
}
"""


@tk.autotune_key
class Key:
    n: Annotated[int, tk.Anchor()]


def _key(x: Any, y: Any, a: np.float32, n: np.int32) -> Key:
    return Key(n=int(n))


def _geometry(config: tk.Config, key: Key) -> tuple[tuple[int], tuple[int]]:
    return ((key.n + 63) // 64 * 64,), (64,)


@pytest.fixture(scope="module", params=["thread", "process"])
def client(request: pytest.FixtureRequest) -> Iterator[OpenCLClient]:
    client = OpenCLClient(flush_cache=False, compile_in=request.param, compile_workers=1)
    yield client
    client.close()


def _args(client: OpenCLClient, n: int, x_dtype: Any, y_dtype: Any) -> tuple[Any, ...]:
    x = cla.to_device(client.queue, np.linspace(0, 1, n).astype(x_dtype))
    return x, cla.zeros(client.queue, n, y_dtype), np.float32(3), np.int32(n)


def _tune(client: OpenCLClient, template: KernelTemplate, name: str, args: tuple[Any, ...]) -> tk.AutotuneRecord:
    records: list[tk.AutotuneRecord] = []
    sink = tk.add_record_sink(records.append)
    try:
        tunables = template.tunable_set(client, key=_key, inputs=lambda key, *a: a)
        tk.LocalTuner[Key, Any](name).execute(client.device_id, client, tunables, args).wait()
    finally:
        tk.remove_record_sink(sink)
    return records[-1]


@pytest.mark.opencl
@pytest.mark.subprocess
def test_a_float64_array_for_a_float_pointer_fails_the_variant_naming_argument_types_and_fix(
    client: OpenCLClient,
) -> None:
    """Regression: a float64 array passed to `__global float* x` launched, and the kernel read its bytes as floats;
    without a reference the tune even picked a winner that computed garbage."""
    template = KernelTemplate(SCALE, "scale", {"BLOCK": [1, 2]}, geometry=_geometry, options=["-DT=float"])
    with pytest.raises(tk.NoValidKernelFound) as raised:
        _tune(client, template, f"f64-{client.compile_in}", _args(client, 1000, np.float64, np.float32))
    says = (
        "argument 0 (x) is a pyopencl array of float64, but the kernel declares `__global float* x`, which reads it "
        "as float32 (4 bytes per element)"
    )
    assert [says in reason for _, reason in raised.value.failures] == [True, True], str(raised.value)  # each variant
    assert "scale[BLOCK=1]" in str(raised.value) and "Pass an array of float32" in str(raised.value)
    assert "\n    the same for 1 more: scale[BLOCK=2]" in str(raised.value)  # said once in the message


@pytest.mark.slow
@pytest.mark.opencl
@pytest.mark.subprocess
def test_a_float32_output_for_a_double_pointer_is_a_dtype_error_not_an_out_of_bounds_write(
    client: OpenCLClient,
) -> None:
    """Regression: a float32 array passed to `__global double* y` crashed a compile worker (SIGSEGV, reported as a
    crash) or, compiling in this process, wrote past the canary bytes and aborted the tuning process."""
    template = KernelTemplate(SCALE, "scale", {"T": ["float", "double"]}, geometry=_geometry)
    record = _tune(client, template, f"f32-{client.compile_in}", _args(client, 1000, np.float32, np.float32))
    by_name = {c.name: c for c in record.candidates}
    assert record.winner == "scale[T=float]"
    double = by_name["scale[T=double]"]
    assert double.status == "failed" and double.error is not None
    says = (
        "argument 1 (y) is a pyopencl array of float32, but the kernel declares `__global T* y`, which reads it as "
        "float64 (8 bytes per element)"
    )
    assert says in double.error, double.error
    assert "wrote past the end" not in double.error


@pytest.mark.opencl
@pytest.mark.subprocess
def test_a_cached_winner_called_with_the_wrong_dtype_raises_and_right_calls_run(client: OpenCLClient) -> None:
    """Regression: a winner tuned on float32 inputs ran on the caller's int32 array without a word."""
    template = KernelTemplate(SCALE, "scale", {"BLOCK": [1]}, geometry=_geometry, options=["-DT=float"])
    good = _args(client, 256, np.float32, np.float32)
    _tune(client, template, f"cached-{client.compile_in}", good)
    np.testing.assert_allclose(good[1].get(), 3 * good[0].get(), rtol=1e-6)
    tunables = template.tunable_set(client, key=_key, inputs=lambda key, *a: a)
    tuner = tk.LocalTuner[Key, Any](f"cached-{client.compile_in}")
    x, y, a, n = _args(client, 256, np.int32, np.float32)
    with pytest.raises(TypeError, match=r"argument 0 \(x\) is a pyopencl array of int32"):
        tuner.execute(client.device_id, client, tunables, (x, y, a, n))
    # A raw buffer has no dtype: passed as bytes, unchecked, as before.
    tuner.execute(client.device_id, client, tunables, (good[0].data, y.data, a, n)).wait()
    np.testing.assert_allclose(y.get(), 3 * good[0].get(), rtol=1e-6)


@pytest.mark.slow
@pytest.mark.opencl
@pytest.mark.subprocess
def test_a_cached_winner_refuses_the_wrong_dtype_before_any_variant_compiles(client: OpenCLClient) -> None:
    """Regression: the winner read from disk compiled before checking, then recover compiled every next-ranked one."""
    space = {"BLOCK": [1, 2, 3]}
    name = f"nocompile-{client.compile_in}"
    _tune(client, KernelTemplate(SCALE, "scale", space, geometry=_geometry, options=["-DT=float"]), name, _good(client))
    fresh = KernelTemplate(SCALE, "scale", space, geometry=_geometry, options=["-DT=float"])
    tunables = fresh.tunable_set(client, key=_key, inputs=lambda key, *a: a)
    tuner = tk.LocalTuner[Key, Any](name)
    records: list[tk.AutotuneRecord] = []
    sink = tk.add_record_sink(records.append)
    try:
        with pytest.raises(tk.InputTypeError, match=r"argument 0 \(x\) is a pyopencl array of float64"):
            tuner.execute(client.device_id, client, tunables, _args(client, 256, np.float64, np.float32))
        assert fresh.compiled() == []
        assert records == []  # the caller's error: no candidate demoted
        tuner.execute(client.device_id, client, tunables, _good(client)).wait()
    finally:
        tk.remove_record_sink(sink)
    assert len(fresh.compiled()) == 1  # only the winner, still the winner


@pytest.mark.opencl
@pytest.mark.subprocess
def test_the_dtypes_are_checked_again_at_a_key_that_already_launched(client: OpenCLClient) -> None:
    """Regression: after one launch at a key, a float64 array at that key launched and was read as float32 bytes."""
    tuner, tunables, good = _launched_once(client, "relaunch")
    x64, y, a, n = _args(client, 256, np.float64, np.float32)
    with pytest.raises(tk.InputTypeError, match=r"argument 0 \(x\) is a pyopencl array of float64"):
        tuner.execute(client.device_id, client, tunables, (x64, y, a, n))
    tuner.execute(client.device_id, client, tunables, (good[0].data, y, a, n)).wait()  # a raw buffer: unchecked
    with pytest.raises(tk.InputTypeError, match=r"argument 0 \(x\)"):  # numpy: dtype('float64') == None is True
        tuner.execute(client.device_id, client, tunables, (x64, y, a, n))
    tuner.execute(client.device_id, client, tunables, (good[0], y, a, n)).wait()
    np.testing.assert_allclose(y.get(), 3 * good[0].get(), rtol=1e-6)


@pytest.mark.opencl
@pytest.mark.subprocess
def test_a_refused_host_array_does_not_vouch_for_a_device_array_of_its_dtype(client: OpenCLClient) -> None:
    """Regression: a refused host float64 array left float64 in the table; a device float64 array then ran."""
    tuner, tunables, _ = _launched_once(client, "host-then-device")
    x64, y, a, n = _args(client, 256, np.float64, np.float32)
    with pytest.raises(Exception):  # whatever the launch says of a host array, it must not run
        tuner.execute(client.device_id, client, tunables, (x64.get(), y, a, n))
    with pytest.raises(tk.InputTypeError, match=r"argument 0 \(x\) is a pyopencl array of float64"):
        tuner.execute(client.device_id, client, tunables, (x64, y, a, n))


def _launched_once(
    client: OpenCLClient, name: str
) -> tuple[tk.LocalTuner[Key, Any], tk.TunableSet[Key, Any], tuple[Any, ...]]:
    """A one-variant scale template tuned and launched once at n=256 with float32 arrays (those arrays)."""
    template = KernelTemplate(SCALE, "scale", {"BLOCK": [1]}, geometry=_geometry, options=["-DT=float"])
    tunables = template.tunable_set(client, key=_key, inputs=lambda key, *a: a)
    tuner = tk.LocalTuner[Key, Any](f"{name}-{client.compile_in}")
    good = _good(client)
    tuner.execute(client.device_id, client, tunables, good).wait()
    return tuner, tunables, good


def _good(client: OpenCLClient) -> tuple[Any, ...]:
    return _args(client, 256, np.float32, np.float32)


def test_types_the_source_resolves_and_those_it_leaves_unchecked() -> None:
    source = """
    typedef float real;
    #define WIDE double
    typedef uint count_t;
    #if ALT
    typedef int alt;
    #else
    typedef short alt;
    #endif
    __kernel __attribute__((reqd_work_group_size(64, 1, 1)))
    void k(__global real* __restrict__ a, global WIDE *b, __constant unsigned int* c, __local float* d, __global alt* e,
           __global uchar* f, __global float4* g, const count_t h, __global struct S* i, read_only image2d_t j) {}
    """
    params = kernel_params(source, "k")
    assert params is not None and [p.name for p in params] == list("abcdefghij")
    dtypes = declared_dtypes(params, _aliases(source), {})
    assert dict(zip("abcdefghij", dtypes, strict=True)) == {
        "a": np.float32,
        "b": np.float64,
        "c": np.uint32,
        "d": None,  # local memory: a LocalMemory, no dtype
        "e": None,  # defined two ways under #if: which one builds depends on the defines
        "f": None,  # a byte pointer views any memory on purpose
        "g": np.float32,
        "h": np.uint32,
        "i": None,
        "j": None,
    }
    # The parameter list depends on the defines, or the kernel is defined twice: nothing is checked.
    assert kernel_params("__kernel void k(__global float* a\n#if X\n, int b\n#endif\n) {}", "k") is None
    assert kernel_params("#if X\n__kernel void k(int a) {}\n#else\n__kernel void k(float a) {}\n#endif", "k") is None
    assert kernel_params("__kernel void k(void) {}", "k") == ()


def _aliases(source: str) -> dict[str, str | None]:
    return source_aliases(source, [])


@pytest.mark.opencl
def test_vector_pointers_take_scalar_or_vector_arrays_and_scalars_are_checked(client: OpenCLClient) -> None:
    params = (
        Param("v", "float4", "global", True),
        Param("n", "int", "private", False),
    )
    dtypes = declared_dtypes(params, {}, {})
    q = client.queue
    for ok in (cla.empty(q, 16, np.float32), cla.empty(q, 4, cltypes.float4)):
        assert argument_mismatch("k", params, dtypes, (ok, np.int32(1))) is None
    wrong = argument_mismatch("k", params, dtypes, (cla.empty(q, 16, np.float32), np.uint32(1)))
    assert wrong is not None and "argument 1 (n) is a numpy scalar of uint32" in wrong and "np.int32(value)" in wrong


@pytest.mark.opencl
@pytest.mark.subprocess
def test_a_callers_wrong_dtype_with_the_default_device_copies_is_not_remembered_for_the_key(
    client: OpenCLClient,
) -> None:
    """Regression: a template set without inputs= (its variants timed on device copies of the caller's arrays)
    stored the float64 call's failure, and another process's correct float32 call at that key got its
    NoValidKernelFound for failed_tune_retry_s."""
    template = KernelTemplate(SCALE, "scale", {"BLOCK": [1, 2]}, geometry=_geometry, options=["-DT=float"])
    tunables = template.tunable_set(client, key=_key)  # no inputs=: the default device copies
    name = f"copies-f64-{client.compile_in}"
    with pytest.raises(tk.NoValidKernelFound, match=r"argument 0 \(x\) is a pyopencl array of float64"):
        tk.LocalTuner[Key, Any](name).execute(
            client.device_id, client, tunables, _args(client, 256, np.float64, np.float32)
        )
    cache = tk.persistent_cache()
    assert cache is not None
    assert cache.get_failure(client.device_id, name, key_to_json(Key(n=256))) is None


@pytest.mark.opencl
@pytest.mark.subprocess
@pytest.mark.parametrize(
    ("position", "wrong", "says", "builds"),
    [
        (
            3,
            256,
            r"argument 3 \(n\) is a Python int \(256\), but the kernel declares `int n`: pass np\.int32\(256\)",
            0,
        ),
        (2, 3, r"argument 2 \(a\) is a Python int \(3\), but the kernel declares `float a`: pass np\.float32\(3\)", 0),
        (
            0,
            "host",
            r"argument 0 \(x\) is a numpy array in host memory, but the kernel declares `__global float\* x`, a "
            r"pointer to device memory: copy it to the device, e\.g\. pyopencl\.array\.to_device\(client\.queue, "
            r"array\)",
            0,
        ),
        (4, "extra", r"the kernel takes 4 arguments and was given 5; pass execute the kernel's arguments", 1),
    ],
    ids=["python-int", "python-int-for-float", "host-array", "extra-argument"],
)
def test_a_cached_winner_given_arguments_no_launch_takes_names_the_argument_and_the_fix(
    client: OpenCLClient, position: int, wrong: object, says: str, builds: int
) -> None:
    """Regression: the winner launched on the caller's arguments (the tune's came from inputs=) raised the driver's
    bare "Kernel.set_arg failed: INVALID_VALUE - when processing arg#4 (1-based)", after every next-ranked variant
    was tried on them too."""
    template = KernelTemplate(SCALE, "scale", {"BLOCK": [1, 2]}, geometry=_geometry, options=["-DT=float"])
    name = f"winner-{position}-{client.compile_in}"
    _tune(client, template, name, _good(client))
    # A fresh template, as in the next process: the winner read from the cache is built only if it launches.
    fresh = KernelTemplate(SCALE, "scale", {"BLOCK": [1, 2]}, geometry=_geometry, options=["-DT=float"])
    tunables = fresh.tunable_set(client, key=lambda *a: Key(n=256), inputs=lambda key, *a: _good(client))
    args: list[Any] = list(_good(client))
    if wrong == "host":
        args[0] = args[0].get()
    elif wrong == "extra":
        args.append(np.int32(0))
    else:
        args[position] = wrong
    records: list[tk.AutotuneRecord] = []
    sink = tk.add_record_sink(records.append)
    try:
        with pytest.raises(tk.InputTypeError, match=says):
            tk.LocalTuner[Key, Any](name).execute(client.device_id, client, tunables, tuple(args))
    finally:
        tk.remove_record_sink(sink)
    assert records == []  # the caller's error: no variant demoted
    # A Python number or a host array is refused before the winner builds (its parameter's type is read from
    # the source); an extra argument at its launch. Either way no next-ranked variant is built to try them.
    assert len(fresh.compiled()) == builds


@pytest.mark.opencl
def test_arrays_of_another_context_are_refused_naming_the_argument_and_where_to_make_them(
    client: OpenCLClient,
) -> None:
    """Regression: a caller's arrays made on its own context (pyopencl.create_some_context()) stopped the tune with
    "the input generator raised LogicError: clEnqueueCopyBuffer failed: INVALID_CONTEXT", naming a generator the
    caller never wrote, and neither the argument nor the fix."""
    template = KernelTemplate(SCALE, "scale", {"BLOCK": [1, 2]}, geometry=_geometry, options=["-DT=float"])
    tunables = template.tunable_set(client, key=_key)  # no inputs=: device copies of the caller's arrays
    other = cl.CommandQueue(cl.Context([client.device]))
    x = cla.to_device(other, np.ones(256, np.float32))
    y = cla.zeros(client.queue, 256, np.float32)
    tuner = tk.LocalTuner[Key, Any](f"other-context-{client.compile_in}")
    says = r"argument 0 is a pyopencl array of another OpenCL context than the client's.*to_device\(client\.queue"
    with pytest.raises(tk.InputTypeError, match=rf"^tuner 'other-context-{client.compile_in}': {says}"):
        tuner.execute(client.device_id, client, tunables, (x, y, np.float32(3), np.int32(256)))
    with pytest.raises(tk.InputTypeError, match=r"argument 1 is a pyopencl Buffer of another OpenCL context"):
        tuner.execute(client.device_id, client, tunables, (y, x.data, np.float32(3), np.int32(256)))
    assert template.compiled() == []  # refused before any variant was built
    tuner.execute(client.device_id, client, tunables, (y, cla.zeros_like(y), np.float32(3), np.int32(256))).wait()


@pytest.mark.opencl
@pytest.mark.subprocess
def test_arguments_in_another_order_fail_each_variant_naming_the_argument_and_the_kernels_order(
    client: OpenCLClient,
) -> None:
    """Regression: the scalar `a` passed first (to `__global const float* x`) failed every variant with the driver's
    bare "clSetKernelArg failed: INVALID_ARG_SIZE - when processing arg#1 (1-based):", naming neither the argument
    nor the fix."""
    template = KernelTemplate(SCALE, "scale", {"BLOCK": [1, 2]}, geometry=_geometry, options=["-DT=float"])
    x, y, a, n = _args(client, 256, np.float32, np.float32)
    records: list[tk.AutotuneRecord] = []
    sink = tk.add_record_sink(records.append)
    try:
        tunables = template.tunable_set(client, key=lambda a, x, y, n: Key(n=int(n)))
        with pytest.raises(tk.NoValidKernelFound) as raised:
            tuner = tk.LocalTuner[Key, Any](f"order-{client.compile_in}")
            tuner.execute(client.device_id, client, tunables, (a, x, y, n))
    finally:
        tk.remove_record_sink(sink)
    says = (
        "argument 0 (x) is a numpy scalar of float32 (np.float32(3.0)), but the kernel declares `__global float* x`, "
        "a pointer to device memory: pass a pyopencl array made on the client's queue"
    )
    assert [says in reason for _, reason in raised.value.failures] == [True, True], str(raised.value)
    assert "The kernel's parameters, in order: x, y, a, n" in str(raised.value)
    assert "INVALID_ARG_SIZE" not in str(raised.value)  # refused before any launch


@pytest.mark.opencl
def test_an_array_for_a_scalar_parameter_names_the_argument_and_the_numpy_scalar_to_pass(client: OpenCLClient) -> None:
    params = kernel_params(SCALE, "scale")
    assert params is not None
    dtypes = declared_dtypes(params, _aliases(SCALE), {"T": "float"})
    x, y, a, n = _args(client, 16, np.float32, np.float32)
    assert argument_mismatch("k", params, dtypes, (x, y, a, n)) is None
    wrong = argument_mismatch("k", params, dtypes, (x, y, y, n))
    assert wrong is not None
    assert "argument 2 (a) is a pyopencl array, but the kernel declares `float a`, a scalar" in wrong
    assert "np.float32(value)" in wrong
    buffer = argument_mismatch("k", params, dtypes, (x, y, a, y.data))
    assert buffer is not None and "argument 3 (n) is a pyopencl buffer" in buffer and "np.int32(value)" in buffer
    # A Python number for a pointer is named the same way, whatever the pointee type.
    number = argument_mismatch("k", params, dtypes, (2.5, y, a, n))
    assert number is not None and "argument 0 (x) is a Python float (2.5)" in number
