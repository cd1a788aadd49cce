"""The OpenCL backend on a real device (PoCL's CPU device without a GPU): gate, compile, cache."""

from __future__ import annotations

import os
import re
import subprocess
import sys
import textwrap
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Annotated, Any

import numpy as np
import pytest
from _broken_opencl import broken_device

import tunekit as tk
from tunekit.backend import SupportsLocator
from tunekit_backends.opencl import CompileError, Geometry, KernelTemplate, OpenCLClient
from tunekit_backends.opencl._buffers import argument_hint

cla = pytest.importorskip("pyopencl.array", reason="pip install 'tunekit[opencl]'")
cl = pytest.importorskip("pyopencl")

SCALE = """
__kernel void scale(__global const float* x, __global float* y, const float a, const int n) {
    int i = get_global_id(0);
    if (i >= n) return;
#if MODE == 3
    this is not OpenCL C;
#endif
    float v = a * x[i];
#if MODE == 2
    if (i == 7) v += 0.5f;   /* a wrong result at one element */
#endif
    y[i] = v;
#if MODE == 1
    if (i == n - 1) y[n] = 0.0f;   /* off-by-one: writes one element past the end */
#endif
}
"""


@tk.autotune_key
class ScaleKey:
    n: Annotated[int, tk.Anchor()]


def _key(x: Any, y: Any, a: np.float32, n: np.int32) -> ScaleKey:
    return ScaleKey(n=int(n))


def _geometry(config: tk.Config, key: ScaleKey) -> tuple[tuple[int], tuple[int]]:
    block = int(config.BLOCK)
    return ((key.n + block - 1) // block * block,), (block,)


TEMPLATE = KernelTemplate(
    SCALE,
    "scale",
    {"MODE": [0, 1, 2, 3], "BLOCK": [64, 1 << 16]},
    restrict=lambda c: c.MODE == 0 or c.BLOCK == 64,
    geometry=_geometry,
)


@pytest.fixture(scope="module")
def client() -> Iterator[OpenCLClient]:
    client = OpenCLClient(flush_cache=False)
    yield client
    client.close()


def _tunables(client: OpenCLClient, template: KernelTemplate = TEMPLATE) -> tk.TunableSet[ScaleKey, Any]:
    def inputs(key: ScaleKey, *args: object) -> tuple[object, ...]:
        x = np.random.default_rng(0).random(key.n, dtype=np.float32)
        return (
            cla.to_device(client.queue, x),
            cla.empty(client.queue, key.n, np.float32),
            np.float32(3),
            np.int32(key.n),
        )

    return template.tunable_set(client, key=_key, inputs=inputs, reference=lambda x, y, a, n: a * x, outputs=[1])


def _run(
    client: OpenCLClient, n: int = 1000, template: KernelTemplate = TEMPLATE
) -> tuple[tk.AutotuneRecord | None, Any, Any]:
    records: list[tk.AutotuneRecord] = []
    sink = tk.add_record_sink(records.append)
    try:
        tuner: tk.LocalTuner[ScaleKey, Any] = tk.LocalTuner("opencl-scale")
        x = cla.to_device(client.queue, np.linspace(0, 1, n, dtype=np.float32))
        y = cla.zeros(client.queue, n, np.float32)
        tunables = _tunables(client, template)
        tuner.execute(client.device_id, client, tunables, (x, y, np.float32(3), np.int32(n))).wait()
    finally:
        tk.remove_record_sink(sink)
    return (records[-1] if records else None), x, y


@pytest.mark.slow
@pytest.mark.opencl
@pytest.mark.subprocess
def test_gate_rejects_overrun_wrong_result_and_broken_variants_and_the_winner_is_right(client: OpenCLClient) -> None:
    record, x, y = _run(client)
    assert record is not None
    by_name = {c.name: c for c in record.candidates}
    overrun = by_name["scale[MODE=1,BLOCK=64]"]
    if client.compile_in == "process":  # its first launch, in a compile worker, finds the canary changed
        assert overrun.stage == "compile" and "wrote past the end of argument 1" in (overrun.error or "")
    else:
        assert overrun.stage == "check" and overrun.error is not None and "canary overwritten" in overrun.error
    wrong = by_name["scale[MODE=2,BLOCK=64]"]
    assert wrong.stage == "check" and wrong.error is not None
    assert "1 of 1024 elements differ" in wrong.error and "max abs error 0.5 at (7,)" in wrong.error
    broken = by_name["scale[MODE=3,BLOCK=64]"]
    assert broken.stage == "compile" and broken.error is not None and "error" in broken.error
    too_wide = by_name["scale[MODE=0,BLOCK=65536]"]
    assert too_wide.stage == "compile" and too_wide.error is not None and "refused by the device" in too_wide.error
    assert record.winner == "scale[MODE=0,BLOCK=64]"
    assert by_name[record.winner].status == "measured"
    # The winner ran on the caller's buffers: its output equals the reference exactly.
    np.testing.assert_array_equal(y.get(), np.float32(3) * x.get())
    checks = {e.name: e for e in record.events if e.kind == "check"}  # type: ignore[union-attr]
    assert checks[record.winner].passed and checks["scale[MODE=2,BLOCK=64]"].max_abs_error == pytest.approx(0.5)  # type: ignore[union-attr]


@pytest.mark.slow
@pytest.mark.opencl
@pytest.mark.subprocess
def test_a_second_process_reuses_the_winner_without_compiling_the_losers(
    client: OpenCLClient, isolated_settings: Path, tmp_path: Path
) -> None:
    record, _, _ = _run(client)
    assert record is not None and record.decision == "tuned"
    script = tmp_path / "second.py"
    script.write_text(
        textwrap.dedent(
            f"""
            import sys
            sys.path[:0] = [{str(Path(__file__).parent)!r}, {str(Path(__file__).parents[1])!r}]
            import tunekit as tk
            import test_opencl as t
            records = []
            tk.add_record_sink(records.append)
            client = t.OpenCLClient(flush_cache=False)
            t._run(client)
            print("decisions", [r.decision for r in records])
            print("compiled", t.TEMPLATE.compiled())
            """
        )
    )
    env = dict(os.environ, TUNEKIT_CACHE_DIR=str(isolated_settings))
    done = subprocess.run(
        [sys.executable, str(script)], capture_output=True, text=True, env=env, timeout=300, check=False
    )
    assert done.returncode == 0, done.stderr
    assert "decisions []" in done.stdout
    assert f"compiled {[record.winner]!r}" in done.stdout


@pytest.mark.opencl
def test_editing_the_source_changes_the_checksum(client: OpenCLClient) -> None:
    edited = KernelTemplate(SCALE + "\n// edited\n", "scale", TEMPLATE.space, geometry=_geometry)
    assert _tunables(client).checksum() != _tunables(client, edited).checksum()
    assert _tunables(client).checksum() == _tunables(client).checksum()


def _rounded_up_to(groups_per_block: int) -> Geometry[ScaleKey]:
    def geometry(config: tk.Config, key: ScaleKey) -> tuple[tuple[int], tuple[int]]:
        span = int(config.BLOCK) * groups_per_block
        return ((key.n + span - 1) // span * span,), (int(config.BLOCK),)

    return geometry


@pytest.mark.opencl
def test_the_geometry_and_applies_enter_the_checksum_with_the_data_they_read(client: OpenCLClient) -> None:
    """Regression: a template whose geometry changed (a grid divisor fixed, as Kernel Tuner's grid_div_x is edited)
    kept the winner measured under the old launch shape, in this process and in every later one."""
    space = {"MODE": [0], "BLOCK": [32, 64]}
    base = _tunables(client, KernelTemplate(SCALE, "scale", space, geometry=_rounded_up_to(1))).checksum()
    assert _tunables(client, KernelTemplate(SCALE, "scale", space, geometry=_rounded_up_to(1))).checksum() == base
    assert _tunables(client, KernelTemplate(SCALE, "scale", space, geometry=_rounded_up_to(2))).checksum() != base
    assert _tunables(client, KernelTemplate(SCALE, "scale", space, geometry=_geometry)).checksum() != base
    applies = KernelTemplate(SCALE, "scale", space, geometry=_rounded_up_to(1), applies=lambda c, key: key.n > 0)
    assert _tunables(client, applies).checksum() != base


@pytest.mark.opencl
def test_a_committed_record_of_another_geometry_is_refused_naming_it(client: OpenCLClient, tmp_path: Path) -> None:
    space = {"MODE": [0], "BLOCK": [32, 64]}
    made = _tunables(client, KernelTemplate(SCALE, "scale", space, geometry=_rounded_up_to(1)))
    tk.Record.for_tunables("opencl-scale", client, made).save(tmp_path / "scale.json")
    changed = _tunables(client, KernelTemplate(SCALE, "scale", space, geometry=_rounded_up_to(2)))
    with pytest.raises(tk.RecordMismatch, match="an OpenCL template's source, options, geometry or applies changed"):
        tk.Record.load_verified(tmp_path / "scale.json", changed, client, tuner="opencl-scale")


@pytest.mark.opencl
@pytest.mark.subprocess
def test_a_template_whose_geometry_changed_is_tuned_again_not_served_the_old_winner(client: OpenCLClient) -> None:
    space = {"MODE": [0], "BLOCK": [32, 64]}
    first, _, _ = _run(client, template=KernelTemplate(SCALE, "scale", space, geometry=_rounded_up_to(1)))
    assert first is not None and first.decision == "tuned"
    again, _, _ = _run(client, template=KernelTemplate(SCALE, "scale", space, geometry=_rounded_up_to(1)))
    assert again is None  # the same launch shape: served from the cache
    fixed, x, y = _run(client, template=KernelTemplate(SCALE, "scale", space, geometry=_rounded_up_to(2)))
    assert fixed is not None and fixed.decision == "tuned"
    np.testing.assert_array_equal(y.get(), np.float32(3) * x.get())


@pytest.mark.opencl
@pytest.mark.subprocess
def test_a_global_size_no_multiple_of_the_local_size_fails_saying_the_rounded_size_to_give(
    client: OpenCLClient,
) -> None:
    """Regression: the error said only "fix the template's geometry" to a Kernel Tuner user, whose grid is rounded up
    to whole blocks by Kernel Tuner itself."""
    with pytest.raises(tk.NoValidKernelFound) as raised:
        _run(client, n=1000, template=KernelTemplate(SCALE, "scale", {"MODE": [0], "BLOCK": [64]}, geometry=_odd))
    (reason,) = [reason for _, reason in raised.value.failures]
    assert "global size (1025,) is not a multiple of local size (64,)" in reason
    assert "round it up in the template's geometry, to (1088,) here" in reason and "applies=" in reason


@pytest.mark.opencl
@pytest.mark.subprocess
def test_a_geometry_giving_work_groups_not_work_items_fails_saying_the_elements_never_written(
    client: OpenCLClient,
) -> None:
    """Regression: a global size given as the number of work-groups (Kernel Tuner's grid) ran 1/64 of the kernel; the
    check said only "1008 of 1024 elements differ" and the error figures."""
    groups = KernelTemplate(
        SCALE, "scale", {"MODE": [0], "BLOCK": [16]}, geometry=lambda c, key: ((key.n // 64,), (c.BLOCK,))
    )
    n = 1024
    x = cla.to_device(client.queue, np.linspace(1, 2, n, dtype=np.float32))
    y = cla.to_device(client.queue, np.full(n, np.nan, np.float32))  # as cla.empty may hold: NaN != NaN
    args = (x, y, np.float32(3), np.int32(n))
    tunables = groups.tunable_set(client, key=_key, reference=lambda x, y, a, n: a * x, outputs=[1])
    with pytest.raises(tk.NoValidKernelFound) as raised:
        tk.LocalTuner[ScaleKey, Any]("opencl-groups").execute(client.device_id, client, tunables, args)
    (reason,) = [reason for _, reason in raised.value.failures]
    assert "1008 elements that the reference changes still hold the value they had before the launch" in reason
    assert "(the first at (16,)), as if never written: is the launch too small" in reason


def _odd(config: tk.Config, key: ScaleKey) -> tuple[tuple[int], tuple[int]]:
    return ((key.n + 1,), (64,))


MISSING_MACRO = """
__kernel void scale(__global const float* x, __global float* y, const float a, const int n) {
    int i = get_global_id(0) * TILE;
    if (i < n) y[i] = a * x[i];
}
"""


@pytest.mark.opencl
@pytest.mark.subprocess
def test_a_compile_error_names_the_line_of_the_source_and_is_said_once_for_every_variant(
    client: OpenCLClient,
) -> None:
    """Regression: each variant's error named PoCL's temporary copy of the source
    (/root/.cache/pocl/kcache/tempfile_oKpUvN.cl:3:47), a new name each time, so the same mistake (a macro the space
    does not define, such as Kernel Tuner's implicit block_size_y) was printed once per variant."""
    template = KernelTemplate(MISSING_MACRO, "scale", {"BLOCK": [32, 64, 128]}, geometry=_geometry)
    with pytest.raises(tk.NoValidKernelFound) as raised:
        _run(client, template=template)
    message = str(raised.value)
    assert "tempfile" not in message, message
    assert "line 3, column 32 of the kernel source: use of undeclared identifier 'TILE'" in message, message
    assert "the same for 2 more" in message, message


def test_names_options_and_space_come_from_the_template() -> None:
    assert len(TEMPLATE.configs) == 5
    config = TEMPLATE.space.config(MODE=0, BLOCK=64)
    assert TEMPLATE.name_of(config) == "scale[MODE=0,BLOCK=64]"
    assert TEMPLATE.build_options(config) == ["-DMODE=0", "-DBLOCK=64"]
    space = tk.Space(MODE=[0], BLOCK=[32, 64])
    assert [c.name for c in KernelTemplate(SCALE, "scale", space, geometry=_geometry).configs] == [
        "MODE=0,BLOCK=32",
        "MODE=0,BLOCK=64",
    ]


def test_template_mistakes_are_refused_at_definition() -> None:
    with pytest.raises(ValueError, match="defines no '__kernel void nope"):
        KernelTemplate(SCALE, "nope", {"MODE": [0]}, geometry=_geometry)
    with pytest.raises(ValueError, match="not a C identifier"):
        KernelTemplate(SCALE, "scale", {"MODE-2": [0]}, geometry=_geometry)
    with pytest.raises(ValueError, match="restrict= to tk.Space"):
        KernelTemplate(SCALE, "scale", tk.Space(MODE=[0]), geometry=_geometry, restrict=lambda c: True)
    # Regression: -Dn=64 rewrote the kernel's `const int n`, and every variant failed as "expected ')'".
    with pytest.raises(ValueError, match=r"parameter 'n' is also the name of the kernel's parameter `int n`"):
        KernelTemplate(SCALE, "scale", {"MODE": [0], "n": [64]}, geometry=_geometry)
    # Regression: these failed every variant at its compile as "<lambda>() takes 1 positional argument but 2 ...".
    with pytest.raises(TypeError, match=r"'scale': geometry= cannot be called as geometry\(config, key\) \(too many"):
        KernelTemplate(SCALE, "scale", {"MODE": [0]}, geometry=lambda key: ((key.n,), (64,)))
    with pytest.raises(TypeError, match=r"applies= cannot be called as applies\(config, key\) \(missing a required"):
        KernelTemplate(SCALE, "scale", {"MODE": [0]}, geometry=_geometry, applies=lambda c, key, x: True)
    KernelTemplate(SCALE, "scale", {"MODE": [0]}, geometry=lambda *args: ((64,), None))  # takes (config, key): fine


def test_options_and_values_a_build_cannot_take_are_refused_at_definition() -> None:
    """Regression: options="-cl-fast-relaxed-math" became one option per character; options defining a parameter
    made every variant the same kernel; a value with a space ("unsigned int") failed at every build as "Invalid
    build option: int"; a kernel named only in a comment was accepted and failed at every build."""
    with pytest.raises(TypeError, match=r"takes a list of str.*e.g. options=\["):
        KernelTemplate(SCALE, "scale", {"MODE": [0]}, geometry=_geometry, options="-cl-fast-relaxed-math")
    for options in (["-DMODE=1"], ["-D", "MODE"], ["-cl-mad-enable", "-D MODE=2"]):
        with pytest.raises(ValueError, match="defines MODE, a parameter of the space"):
            KernelTemplate(SCALE, "scale", {"MODE": [0, 1]}, geometry=_geometry, options=options)
    KernelTemplate(SCALE, "scale", {"MODE": [0]}, geometry=_geometry, options=["-DMODES=1"])  # another name: fine
    with pytest.raises(ValueError, match=r"value 'unsigned int', which -DT=... cannot carry.*e.g. a typedef"):
        KernelTemplate(SCALE, "scale", {"MODE": [0], "T": ["float", "unsigned int"]}, geometry=_geometry)
    with pytest.raises(ValueError, match="defines no '__kernel void nope.*its kernels: scale"):
        KernelTemplate("/* __kernel void nope(int x) */\n" + SCALE, "nope", {"MODE": [0]}, geometry=_geometry)


def test_a_file_name_given_as_the_source_is_refused_saying_to_pass_its_text(tmp_path: Path) -> None:
    """Regression: KernelTemplate("scale.cl", ...) (Kernel Tuner reads a file name given as kernel_source) said the
    source "defines no kernel outside comments", as if the file were empty."""
    path = tmp_path / "scale.cl"
    path.write_text(SCALE)
    for given in ("scale.cl", str(path)):
        with pytest.raises(ValueError, match=rf"{re.escape(repr(given))} is a file name: pass its text, e.g. pathlib"):
            KernelTemplate(given, "scale", {"MODE": [0]}, geometry=_geometry)
    template = KernelTemplate(path.read_text(), "scale", {"MODE": [0]}, geometry=_geometry)  # the fix it gives
    assert template.kernel_name == "scale"


@pytest.mark.opencl
def test_template_definitions_a_build_takes_are_accepted(client: OpenCLClient) -> None:
    """Regression of the definition-time checks: an empty value (-DQUAL= defines QUAL as nothing), a char literal,
    options given as a generator (used up by the check, then built without them) and a kernel with an
    attribute before void were refused or mangled."""
    cl = pytest.importorskip("pyopencl")
    source = (
        "__kernel __attribute__((reqd_work_group_size(1, 1, 1))) void k(__global int* o) { QUAL int c = CH; o[0] = c; }"
    )
    template = KernelTemplate(
        source,
        "k",
        {"QUAL": ["", "const"], "CH": ["'a'"]},
        geometry=lambda c, k: ((1,), (1,)),
        options=(o for o in ["-cl-mad-enable"]),
    )
    assert template.options == ("-cl-mad-enable",)
    for config in template.configs:
        program = cl.Program(client.context, source).build(options=[*template.build_options(config), *template.options])
        out = cl.array.zeros(client.queue, 1, np.int32)
        program.k(client.queue, (1,), (1,), out.data)
        assert int(out.get()[0]) == ord("a"), config
    with pytest.raises(ValueError, match="cannot carry"):
        KernelTemplate(source, "k", {"QUAL": [""], "CH": ['"a"[0]']}, geometry=lambda c, k: ((1,), (1,)))


def test_the_argument_hint_takes_numpy_scalars() -> None:
    """np.float64 is a float subclass: a valid double argument was blamed as a Python float on any launch error."""

    assert argument_hint((np.float64(1.5), np.int32(3))) == ""
    assert "argument 0 is a Python float" in argument_hint((1.5,))


@pytest.mark.opencl
def test_a_template_whose_space_is_empty_or_no_mapping_is_refused(client: OpenCLClient) -> None:
    """A restriction rejecting every variant gave an empty set ("add some with .with_tunable"); a list as the space
    failed as "expected string or bytes-like object"."""
    empty = KernelTemplate(SCALE, "scale", {"MODE": [0], "BLOCK": [64]}, geometry=_geometry, restrict=lambda c: False)
    with pytest.raises(ValueError, match=r"KernelTemplate 'scale': the space has no valid configuration.*all 1 points"):
        _tunables(client, empty)
    with pytest.raises(ValueError, match=r"KernelTemplate\('scale'\) makes one tunable per valid configuration"):
        # Refused where it is defined: its set walked 10^8 configurations, building a variant for each.
        KernelTemplate(SCALE, "scale", {"MODE": range(10_000), "BLOCK": range(10_000)}, geometry=_geometry)
    with pytest.raises(
        TypeError, match=r"KernelTemplate\(space=...\) takes a tk.Space or a dict name -> values, got list"
    ):
        KernelTemplate(SCALE, "scale", [64, 128], geometry=_geometry)  # type: ignore[arg-type]


@pytest.mark.opencl
def test_a_template_set_with_a_reference_but_no_outputs_is_refused_when_built(client: OpenCLClient) -> None:
    """Regression: reference= without outputs= compared each variant's return value, its launch's event, with the
    reference's array, and every variant failed with "output 0: shape () differs from the expected (1000,)"."""
    with pytest.raises(ValueError, match=r"KernelTemplate 'scale': tunable_set\(reference=...\) needs outputs=\[...\]"):
        TEMPLATE.tunable_set(client, key=_key, reference=lambda x, y, a, n: a * x)


@pytest.mark.opencl
@pytest.mark.subprocess
@pytest.mark.parametrize("with_fn", [True, False], ids=["reference", "first_candidate"])
def test_raw_buffers_in_a_checked_set_stop_the_tune_naming_the_fix(client: OpenCLClient, with_fn: bool) -> None:
    """A raw cl.Buffer was read as uint8 bytes: the reference computed on bytes and every variant failed the check
    with figures that meant nothing ("16384 of 32768 elements differ ... got 64, expected 384")."""
    cl = pytest.importorskip("pyopencl")
    template = KernelTemplate(SCALE, "scale", {"MODE": [0], "BLOCK": [64]}, geometry=_geometry)

    def buffers(*_: object) -> tuple[object, ...]:
        flags = cl.mem_flags.READ_WRITE | cl.mem_flags.COPY_HOST_PTR
        x = cl.Buffer(client.context, flags, hostbuf=np.ones(256, np.float32))
        y = cl.Buffer(client.context, flags, hostbuf=np.zeros(256, np.float32))
        return x, y, np.float32(3), np.int32(256)

    reference = (lambda x, y, a, n: a * x) if with_fn else None
    tunables = template.tunable_set(client, key=_key, inputs=buffers, reference=reference, outputs=[1])
    tuner: tk.LocalTuner[ScaleKey, Any] = tk.LocalTuner("opencl-raw-buffers")
    position = 0 if with_fn else 1  # a reference reads every argument; a comparison only the outputs
    with pytest.raises(tk.TunekitError, match=rf"tuner 'opencl-raw-buffers': argument {position} is a pyopencl Buffer"):
        tuner.execute(client.device_id, client, tunables, buffers())


@pytest.mark.opencl
def test_a_client_opens_the_device_a_device_id_names(client: OpenCLClient) -> None:
    # What a process-isolation worker factory does with the device_id it is told to build for.
    again = OpenCLClient(flush_cache=False, device_id=client.device_id, compile_in="thread")
    try:
        assert again.device.int_ptr == client.device.int_ptr
    finally:
        again.close()
    with pytest.raises(RuntimeError, match=r"no OpenCL device matches .*device_id='opencl:no such device'"):
        OpenCLClient(flush_cache=False, device_id="opencl:no such device", compile_in="thread")


@pytest.mark.opencl
def test_a_client_opens_exactly_the_device_its_locator_names(client: OpenCLClient) -> None:
    """Regression: a client had only its device id, which identical devices share, so no worker could find its GPU."""
    assert isinstance(client, SupportsLocator)
    assert re.fullmatch(r"opencl:platform=\d+,device=\d+", client.locator)
    again = OpenCLClient(flush_cache=False, locator=client.locator, device_id=client.device_id, compile_in="thread")
    try:
        assert again.device.int_ptr == client.device.int_ptr and again.locator == client.locator
    finally:
        again.close()
    # Every device of this machine has its own locator, which opens that device and no other: one whose compiler
    # fails here is refused by name rather than replaced by a working one.
    cl = pytest.importorskip("pyopencl")
    seen = set()
    for p, platform in enumerate(cl.get_platforms()):
        for d, device in enumerate(platform.get_devices()):
            locator = f"opencl:platform={p},device={d}"
            try:
                located = OpenCLClient(flush_cache=False, locator=locator, compile_in="thread")
            except RuntimeError as exc:
                assert f"no OpenCL device matching platform={p}, device={d} can build a trivial kernel" in str(exc)
                continue
            try:
                assert located.device.int_ptr == device.int_ptr and located.locator == locator
                seen.add(located.locator)
            finally:
                located.close()
    assert client.locator in seen


@pytest.mark.opencl
@pytest.mark.parametrize(
    ("kwargs", "error", "says"),
    [
        ({"locator": "gpu1"}, ValueError, r"takes a client's locator, 'opencl:platform=P,device=D' .* got 'gpu1'"),
        ({"locator": "opencl:platform=0,device=0", "device": 0}, ValueError, "without platform= and device="),
        ({"locator": "opencl:platform=99,device=0"}, RuntimeError, r"no OpenCL device matches platform=99, device=0"),
        (
            {"locator": "opencl:platform=0,device=0", "device_id": "opencl:another model"},
            RuntimeError,
            r"no OpenCL device matches platform=0, device=0, device_id='opencl:another model'",
        ),
    ],
)
def test_a_locator_that_names_no_device_is_refused(kwargs: dict[str, Any], error: type[Exception], says: str) -> None:
    with pytest.raises(error, match=says):
        OpenCLClient(flush_cache=False, compile_in="thread", **kwargs)


@pytest.mark.opencl
def test_client_names_the_driver_times_on_the_device_and_flushes() -> None:
    client = OpenCLClient(compile_in="thread")  # the default flush, which the module's shared client turns off
    device = client.device
    for part in (device.platform.name, device.name, device.driver_version, device.version):
        assert part in client.device_id
    x = cla.to_device(client.queue, np.ones(1 << 16, np.float32))
    cl = pytest.importorskip("pyopencl")
    event, ns = client.profile(lambda: cl.enqueue_fill_buffer(client.queue, x.data, np.float32(2), 0, x.nbytes))
    assert ns == event.profile.end - event.profile.start > 0
    np.testing.assert_array_equal(x.get(), 2)
    with pytest.raises(TypeError, match="must return the cl.Event"):
        client.profile(lambda: 42)
    client.flush_cache()
    assert client._flush_buffer is not None and client._flush_buffer.size >= 2 * device.global_mem_cache_size
    client.close()


@pytest.mark.opencl
def test_a_variant_that_fails_to_build_raises_the_compiler_message(client: OpenCLClient) -> None:
    (broken,) = [t for t in TEMPLATE.tunables(client, _key) if t.name == "scale[MODE=3,BLOCK=64]"]
    with pytest.raises(CompileError, match="build failed: .*error"):
        broken.fn.kernel()  # type: ignore[attr-defined]


@pytest.mark.slow
@pytest.mark.opencl
@pytest.mark.subprocess
def test_compiling_in_worker_processes_reports_build_errors_and_tunes(isolated_settings: Path) -> None:
    pooled = OpenCLClient(flush_cache=False, compile_in="process", compile_workers=2)
    try:
        template = KernelTemplate(
            SCALE + "\n// process pool\n",
            "scale",
            {"MODE": [0, 3], "BLOCK": [32]},
            geometry=_geometry,
        )
        records: list[tk.AutotuneRecord] = []
        sink = tk.add_record_sink(records.append)
        try:
            tuner: tk.LocalTuner[ScaleKey, Any] = tk.LocalTuner("opencl-pool")
            x = cla.to_device(pooled.queue, np.ones(100, np.float32))
            y = cla.zeros(pooled.queue, 100, np.float32)
            tunables = _tunables(pooled, template)
            tuner.execute(pooled.device_id, pooled, tunables, (x, y, np.float32(3), np.int32(100))).wait()
        finally:
            tk.remove_record_sink(sink)
        by_name = {c.name: c for c in records[-1].candidates}
        broken = by_name["scale[MODE=3,BLOCK=32]"]
        assert broken.stage == "compile" and broken.error is not None
        assert "failed in a compile worker" in broken.error and "error" in broken.error.split("worker:")[1]
        assert records[-1].winner == "scale[MODE=0,BLOCK=32]"
        np.testing.assert_array_equal(y.get(), 3)
    finally:
        pooled.close()
    with pytest.raises(ValueError, match="'thread' or 'process'"):
        OpenCLClient(flush_cache=False, compile_in="fork")  # type: ignore[arg-type]


@pytest.mark.opencl
def test_flush_cache_takes_only_a_bool() -> None:
    """OpenCLClient(flush_cache="false") kept flushing: bool("false") is True."""
    with pytest.raises(TypeError, match=r"flush_cache=...\) takes True or False, got 'false'"):
        OpenCLClient(flush_cache="false")  # type: ignore[arg-type]


@pytest.mark.opencl
def test_selecting_a_device_whose_compiler_is_broken_fails_when_the_client_is_made() -> None:
    """Regression: an explicit platform=/device= skipped the compiler probe: the client was made, and every
    variant of every tune then failed with the compiler's error, naming no device and no way out.

    With workers started as it opens, the probe settles after the client returns: the error then comes at the
    first compile (test_opencl_selection.py)."""
    broken = broken_device()
    if broken is None:
        pytest.skip("every OpenCL device here compiles (PoCL's LLVM 14 wheel on a CPU it does not know has one)")
    platform, device = broken
    with pytest.raises(RuntimeError, match=rf"platform={platform}, device={device} can build a trivial kernel: .*"):
        OpenCLClient(flush_cache=False, platform=platform, device=device, start_workers="first_compile")
    try:
        OpenCLClient(flush_cache=False, platform=platform, device=device, start_workers="first_compile")
    except RuntimeError as exc:
        assert "select another device (`tunekit devices` lists them" in str(exc) and "\n" not in str(exc)


PLAIN = KernelTemplate(SCALE, "scale", {"MODE": [0], "BLOCK": [64, 128]}, geometry=_geometry)


@pytest.mark.slow
@pytest.mark.opencl
@pytest.mark.subprocess
@pytest.mark.parametrize(
    ("wrong", "says"),
    [
        (
            "python_int",
            "argument 3 (n) is a Python int (1024), but the kernel declares `int n`: pass np.int32(1024)",
        ),
        ("host_array", "argument 0 (x) is a numpy array in host memory, but the kernel declares `__global float* x`"),
        ("extra_arg", "the kernel takes 4 arguments and was given 5; make the inputs"),
    ],
)
def test_arguments_a_kernel_cannot_take_are_named_with_what_to_pass(
    client: OpenCLClient, wrong: str, says: str
) -> None:
    """Regression: the driver's words alone ('invalid kernel argument', 'INVALID_ARG_SIZE', "'numpy.int32' object is
    not iterable", which also took down a compile worker) named neither the argument's mistake nor its fix."""

    def inputs(key: ScaleKey, *args: object) -> tuple[object, ...]:
        x = np.ones(key.n, np.float32)
        y = cla.empty(client.queue, key.n, np.float32)
        if wrong == "python_int":
            return cla.to_device(client.queue, x), y, np.float32(3), key.n
        if wrong == "host_array":
            return x, y, np.float32(3), np.int32(key.n)
        return cla.to_device(client.queue, x), y, np.float32(3), np.int32(key.n), np.int32(0)

    tunables = PLAIN.tunable_set(client, key=lambda *a: ScaleKey(n=int(a[3])), inputs=inputs)
    x = cla.to_device(client.queue, np.ones(1000, np.float32))
    args = (x, cla.empty(client.queue, 1000, np.float32), np.float32(3), np.int32(1000))
    with pytest.raises(tk.NoValidKernelFound) as raised:
        tk.LocalTuner[ScaleKey, Any](f"wrong-{wrong}").execute(client.device_id, client, tunables, args)
    failures = raised.value.failures  # each variant, in the same words (said once in the message)
    assert len(failures) == 2 and all(says in reason for _, reason in failures), str(raised.value)
    assert str(raised.value).count(says) == 1 and "\n    the same for 1 more: " in str(raised.value)


@pytest.mark.slow
@pytest.mark.opencl
@pytest.mark.subprocess
def test_a_template_set_without_inputs_times_device_copies_of_the_callers_arguments(client: OpenCLClient) -> None:
    """Regression: without inputs=, the tune deep-copied the caller's pyopencl arrays and stopped ("cannot pickle
    'CommandQueue' object; give the TunableSet an inputs= generator") although a device copy does the job."""
    tunables = PLAIN.tunable_set(client, key=_key, reference=lambda x, y, a, n: a * x, outputs=[1])
    x = cla.to_device(client.queue, np.linspace(0, 1, 1000, dtype=np.float32))
    y = cla.zeros(client.queue, 1000, np.float32)
    records: list[tk.AutotuneRecord] = []
    sink = tk.add_record_sink(records.append)
    try:
        tk.LocalTuner[ScaleKey, Any]("no-inputs").execute(
            client.device_id, client, tunables, (x, y, np.float32(3), np.int32(1000))
        ).wait()
    finally:
        tk.remove_record_sink(sink)
    assert [c.status for c in records[-1].candidates] == ["measured", "measured"]
    np.testing.assert_allclose(y.get(), 3 * x.get(), rtol=1e-6)


@pytest.mark.opencl
@pytest.mark.parametrize(
    ("geometry", "says"),
    [
        (lambda c, k: ((k.n, 1), (64,)), r"global size \(1024, 1\) and local size \(64,\): give 1 to 3 dimensions"),
        (lambda c, k: (k.n, 64), r"must return \(global sizes, local sizes or None\).*it returned \(1024, 64\)"),
        (lambda c, k: ((k.n + 0.5,), (64,)), r"each a tuple of whole numbers.*it returned \(\(1024.5,\), \(64,\)\)"),
        (lambda c, k: ((0,), (64,)), r"global size \(0,\) and local size \(64,\): every size must be at least 1"),
    ],
    ids=["dimensions", "not-a-pair", "fraction", "zero"],
)
def test_a_geometry_that_is_no_launch_shape_says_what_is_wrong(
    client: OpenCLClient, geometry: Geometry, says: str
) -> None:
    """Regression: these failed as "zip() argument 2 is shorter than argument 1", "'int' object is not iterable", a
    size silently truncated, and a zero-sized launch that only the check noticed (its output untouched)."""
    template = KernelTemplate(SCALE, "scale", {"MODE": [0]}, geometry=geometry)
    tunables = template.tunable_set(client, key=_key, reference=lambda x, y, a, n: a * x, outputs=[1])
    x = cla.to_device(client.queue, np.ones(1000, np.float32))
    args = (x, cla.empty(client.queue, 1000, np.float32), np.float32(3), np.int32(1000))
    with pytest.raises(tk.NoValidKernelFound, match=rf"scale\[MODE=0\]: (Type|Value)Error: scale\[MODE=0\]: .*{says}"):
        tk.LocalTuner[ScaleKey, Any](f"geometry-{says[:12]}").execute(client.device_id, client, tunables, args)


def _other_device(first: OpenCLClient) -> tuple[int, int] | None:
    """(platform, device) indices of another OpenCL device whose compiler works, if this machine has one."""
    cl = pytest.importorskip("pyopencl")
    for p, platform in enumerate(cl.get_platforms()):
        for d, device in enumerate(platform.get_devices()):
            if device.int_ptr == first.device.int_ptr:
                continue
            try:
                cl.Program(cl.Context([device]), "__kernel void probe(void) {}").build()
            except cl.Error:  # e.g. a PoCL whose LLVM does not know this CPU
                continue
            return p, d
    return None


@pytest.mark.slow
@pytest.mark.opencl
@pytest.mark.parametrize("where", ["two contexts on one device", "two devices"])
def test_one_init_call_site_gives_each_client_its_own_kernels(where: str) -> None:
    # Regression: init kept the set by its factory's code alone, so a second client got the first one's kernels.
    first = OpenCLClient(flush_cache=False, compile_in="thread")
    if where == "two devices":
        other = _other_device(first)
        if other is None:
            first.close()
            pytest.skip("this machine has one OpenCL device whose compiler works")
        second = OpenCLClient(flush_cache=False, platform=other[0], device=other[1], compile_in="thread")
    else:
        second = OpenCLClient(flush_cache=False, compile_in="thread")
    template = KernelTemplate(SCALE, "scale", {"MODE": [0], "BLOCK": [32, 64]}, geometry=_geometry)
    tuner: tk.LocalTuner[ScaleKey, Any] = tk.LocalTuner("opencl-two-clients")

    def scale(client: OpenCLClient, x: Any, y: Any) -> Any:
        tunables = tuner.init(lambda: _tunables(client, template))
        return tuner.execute(client.device_id, client, tunables, (x, y, np.float32(3), np.int32(x.size)))

    try:
        for client in (first, second, first, second):
            x = cla.to_device(client.queue, np.arange(100, dtype=np.float32))
            y = cla.zeros(client.queue, 100, np.float32)
            event = scale(client, x, y)
            event.wait()
            # Launched on the caller's queue: another client's queue is another context, or another device.
            assert event.command_queue == client.queue
            np.testing.assert_array_equal(y.get(), np.float32(3) * x.get())
    finally:
        first.close()
        second.close()


@pytest.mark.parametrize(("name", "wanted"), [("device", True), ("platform", ""), ("device", -1), ("platform", 0.0)])
def test_a_selection_that_names_no_device_is_refused(name: str, wanted: object) -> None:
    """Regression: device=True selected device 1 (a bool is an int) and platform="" matched every platform."""
    with pytest.raises(TypeError, match=rf"OpenCLClient\({name}=...\) takes an index .* got {wanted!r}"):
        OpenCLClient(**{name: wanted})  # type: ignore[arg-type]


@pytest.mark.slow
@pytest.mark.opencl
@pytest.mark.subprocess
def test_variants_applies_drops_are_reported_as_not_applying_to_the_key(
    client: OpenCLClient, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Regression: a variant the template's applies= dropped for a key was reported as "negative priority for this
    key", a priority the user never gave."""
    template = KernelTemplate(
        SCALE, "scale", {"MODE": [0], "BLOCK": [64, 128]}, geometry=_geometry, applies=lambda c, k: c.BLOCK == 64
    )
    says = "does not apply to this key (the KernelTemplate's applies= returned False for this variant)"
    record, _, _ = _run(client, template=template)
    assert record is not None
    dropped = {c.name: c for c in record.candidates}["scale[MODE=0,BLOCK=128]"]
    assert (dropped.status, dropped.error) == ("skipped", says)
    nothing = KernelTemplate(SCALE, "scale", {"MODE": [0]}, geometry=_geometry, applies=lambda c, k: False)
    with pytest.raises(tk.NoValidKernelFound, match=rf"scale\[MODE=0\]: {re.escape(says)}"):
        _run(client, template=nothing)
    monkeypatch.setenv("TUNEKIT_AUTOTUNE", "0")  # the untuned path lists every candidate the same way
    tk.configure()
    with pytest.raises(tk.NoValidKernelFound, match=rf"scale\[MODE=0\]: {re.escape(says)}"):
        _run(client, template=nothing)


@pytest.mark.opencl
@pytest.mark.parametrize(
    ("applies", "returned"),
    [(lambda c, k: k.n % c.BLOCK, "int 0"), (lambda c, k: None, "NoneType None")],
    ids=["modulo-without-comparison", "no-return"],
)
def test_an_applies_that_returns_no_bool_is_refused_naming_what_it_returned(
    client: OpenCLClient, applies: Callable[[tk.Config, ScaleKey], bool], returned: str
) -> None:
    """Regression: `key.n % c.BLOCK` (meant `== 0`) skipped every variant that applies and was reported as
    "applies= returned False"; a branch without `return` skipped silently."""
    template = KernelTemplate(SCALE, "scale", {"MODE": [0], "BLOCK": [64]}, geometry=_geometry, applies=applies)
    with pytest.raises(TypeError, match=rf"applies= returned {returned} for scale\[MODE=0,BLOCK=64\] and key "):
        _run(client, n=1024, template=template)
    assert template.compiled() == []


@pytest.mark.slow
@pytest.mark.opencl
@pytest.mark.subprocess
def test_variants_with_the_same_output_bits_keep_their_own_check_events_and_verdicts(client: OpenCLClient) -> None:
    """The gate compares each distinct output once; every variant still has its check event and its own failure."""
    template = KernelTemplate(SCALE, "scale", {"MODE": [0, 2], "BLOCK": [32, 64, 128]}, geometry=_geometry)
    record, _, _ = _run(client, template=template)
    assert record is not None
    by_name = {c.name: c for c in record.candidates}
    checks = {e.name: e for e in record.events if e.kind == "check"}  # type: ignore[union-attr]
    assert set(checks) == set(by_name)
    for mode in (0, 2):
        names = [f"scale[MODE={mode},BLOCK={block}]" for block in (32, 64, 128)]
        events = [checks[name].model_dump(exclude={"name"}) for name in names]
        assert events[1:] == events[:1] * 2
        assert events[0]["passed"] is (mode == 0)
    for block in (32, 64, 128):
        wrong = by_name[f"scale[MODE=2,BLOCK={block}]"]
        assert wrong.stage == "check" and "1 of 1024 elements differ" in (wrong.error or "")
        assert "max abs error 0.5 at (7,)" in (wrong.error or "")
    assert record.winner is not None and "MODE=0" in record.winner


UNGUARDED = """
__kernel void scale(__global const float* x, __global float* y, const float a, const int n) {
    const int i = get_global_id(0);
    y[i] = a * x[i];
}
"""


@pytest.mark.opencl
@pytest.mark.subprocess
def test_an_unguarded_kernel_on_an_anchored_key_fails_saying_to_guard_its_bounds(client: OpenCLClient) -> None:
    """Regression: a kernel without a bounds guard, launched on the bucket's 1024 items over the caller's 1000
    (no inputs=), failed every variant with "check the sizes the inputs= generator allocates", a generator the
    caller never gave."""
    template = KernelTemplate(UNGUARDED, "scale", {"BLOCK": [32, 64]}, geometry=lambda c, k: ((k.n,), (c.BLOCK,)))
    tunables = template.tunable_set(client, key=_key, reference=lambda x, y, a, n: a * x, outputs=[1])
    x = cla.to_device(client.queue, np.ones(1000, np.float32))
    with pytest.raises(tk.NoValidKernelFound) as raised:
        tk.LocalTuner[ScaleKey, Any]("unguarded").execute(
            client.device_id, client, tunables, (x, cla.empty_like(x), np.float32(2), np.int32(1000))
        )
    assert "inputs= generator allocates" not in str(raised.value)
    if client.compile_in == "process":  # the first launch, in a compile worker, finds the canary changed
        says = "wrote past the end of argument 1 (a buffer of 4000 bytes) at its first launch: the launch covers more"
        assert all(says in reason for _, reason in raised.value.failures) and len(raised.value.failures) == 2
        assert "guard the kernel's bounds (if (i < n))" in str(raised.value)
    else:
        assert [("canary overwritten" in reason) for _, reason in raised.value.failures] == [True, True]
