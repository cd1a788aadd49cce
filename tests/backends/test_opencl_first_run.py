"""The check judges the compile workers' first launches (real PoCL): the same verdicts and records as a check here."""

from __future__ import annotations

import os
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Annotated, Any

import numpy as np
import pytest

import tunekit as tk
from tunekit._measure import check
from tunekit._measure.prepare import prepare_batch
from tunekit_backends.opencl import KernelTemplate, OpenCLClient, _together

cla = pytest.importorskip("pyopencl.array", reason="pip install 'tunekit[opencl]'")

pytestmark = [pytest.mark.slow, pytest.mark.opencl, pytest.mark.subprocess]

SOURCE = """
__kernel void axpy(__global const float* x, __global float* y, const float a, const int n) {
    int i = get_global_id(0);
    if (i >= n) return;
    float v = a * x[i] + y[i];
#if MODE == 1
    if (i == 7) v += 0.5f;   /* wrong at one element */
#elif MODE == 2
    if (i == 5) v = NAN;
#elif MODE == 3
    v = a * x[i];            /* ignores what y held: wrong wherever y was not zero */
#endif
    y[i] = v;
}
"""


@tk.autotune_key
class AxpyKey:
    n: Annotated[int, tk.Anchor()]


def _geometry(config: tk.Config, key: AxpyKey) -> tuple[tuple[int], tuple[int]]:
    block = int(config.BLOCK)
    return ((key.n + block - 1) // block * block,), (block,)


def _tune(client: OpenCLClient, tuner: str, *, reference: bool = True) -> tk.AutotuneRecord:
    template = KernelTemplate(
        SOURCE, "axpy", {"MODE": [0, 1, 2, 3], "BLOCK": [32, 64]}, geometry=_geometry
    )  # one source for both clients: PoCL's kernel cache may serve either

    def inputs(key: AxpyKey, *args: object) -> tuple[object, ...]:
        rng = np.random.default_rng(0)
        return (
            cla.to_device(client.queue, rng.random(key.n, dtype=np.float32)),
            cla.to_device(client.queue, rng.random(key.n, dtype=np.float32)),  # in place: y += a * x
            np.float32(3),
            np.int32(key.n),
        )

    tunables = template.tunable_set(
        client,
        key=lambda x, y, a, n: AxpyKey(n=int(n)),
        inputs=inputs,
        reference=(lambda x, y, a, n: a * x + y) if reference else None,
        outputs=[1],
    )
    records: list[tk.AutotuneRecord] = []
    sink = tk.add_record_sink(records.append)
    try:
        n = 3000
        args = (
            cla.zeros(client.queue, n, np.float32),
            cla.zeros(client.queue, n, np.float32),
            np.float32(3),
            np.int32(n),
        )
        tk.LocalTuner[AxpyKey, Any](tuner).execute(client.device_id, client, tunables, args).wait()
    finally:
        tk.remove_record_sink(sink)
    return records[-1]


def _checked_here(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The names of the candidates the gate runs in this process (the real check runs on)."""
    names: list[str] = []
    real: Callable[..., check.CheckOutcome] = check.Gate.check

    def counted(gate: check.Gate, name: str, fn: Callable[..., Any]) -> check.CheckOutcome:
        names.append(name)
        return real(gate, name, fn)

    monkeypatch.setattr(check.Gate, "check", counted)
    return names


def _verdicts(record: tk.AutotuneRecord) -> dict[str, tuple[object, ...]]:
    checks = {e.name: e.model_dump(exclude={"name"}) for e in record.events if e.kind == "check"}  # type: ignore[union-attr]
    return {c.name: (c.status, c.stage, c.error, checks.get(c.name)) for c in record.candidates}


def test_the_first_launches_in_compile_workers_are_judged_as_a_check_here_would(
    isolated_settings: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Wrong, NaN and in-place-ignoring variants fail with the same words and figures whether the check ran
    them here (compiling in this process) or judged their first launch in a compile worker."""
    here = _checked_here(monkeypatch)
    in_thread = OpenCLClient(flush_cache=False, compile_in="thread")
    try:
        expected = _tune(in_thread, "first-run-thread")
    finally:
        in_thread.close()
    assert len(here) == 8  # every variant builds and is checked here
    here.clear()
    pooled = OpenCLClient(flush_cache=False, compile_in="process", compile_workers=2)
    try:
        judged = _tune(pooled, "first-run-process")
    finally:
        pooled.close()
    assert here == []  # none ran for its check in this process: the workers' launches were judged
    assert not list(Path(tempfile.gettempdir()).glob(f"tunekit-inputs-{os.getpid()}-*.out"))  # read and deleted
    assert _verdicts(judged) == _verdicts(expected)
    verdicts = _verdicts(judged)
    for block in (32, 64):
        wrong, nan, ignores = (verdicts[f"axpy[MODE={mode},BLOCK={block}]"] for mode in (1, 2, 3))
        assert wrong[1] == "check" and "max abs error 0.5 at (7,)" in str(wrong[2])
        assert nan[1] == "check" and "at (5,) (got nan" in str(nan[2])
        assert ignores[1] == "check" and "elements differ" in str(ignores[2])
        right = verdicts[f"axpy[MODE=0,BLOCK={block}]"]
        assert right[0] == "measured" and right[3] is not None and right[3]["passed"]  # type: ignore[index]
    assert judged.winner is not None and "MODE=0" in judged.winner


def test_without_a_reference_function_the_first_candidate_is_still_the_baseline_checked_here(
    isolated_settings: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """No reference function: the baseline is the first candidate in the batch's order, so each runs here."""
    here = _checked_here(monkeypatch)
    pooled = OpenCLClient(flush_cache=False, compile_in="process", compile_workers=2)
    try:
        record = _tune(pooled, "first-run-baseline", reference=False)
    finally:
        pooled.close()
    assert len(here) == 8
    checks = {e.name: e for e in record.events if e.kind == "check"}  # type: ignore[union-attr]
    assert checks["axpy[MODE=0,BLOCK=64]"].against == "axpy[MODE=0,BLOCK=32]"  # type: ignore[union-attr]
    assert not checks["axpy[MODE=1,BLOCK=32]"].passed  # type: ignore[union-attr]


def test_a_first_run_reports_only_to_the_tune_whose_inputs_it_ran_on(isolated_settings: Path) -> None:
    """A variant shared by two tunes reports its worker's launch to the one that registered those inputs only."""
    pooled = OpenCLClient(flush_cache=False, compile_in="process", compile_workers=2)
    try:
        template = KernelTemplate(SOURCE + "\n// shared\n", "axpy", {"MODE": [0, 1], "BLOCK": [32]}, geometry=_geometry)
        tunables = template.tunable_set(pooled, key=lambda x, y, a, n: AxpyKey(n=int(n)), outputs=[1])

        def inputs(n: int) -> tuple[object, ...]:
            x = cla.to_device(pooled.queue, np.arange(n, dtype=np.float32))
            return (x, cla.zeros(pooled.queue, n, np.float32), np.float32(2), np.int32(n))

        mine, theirs = inputs(64), inputs(64)
        reported: dict[int, tuple[object, ...]] = {}
        for tunable in tunables.tunables:  # another tune's registration, on its own inputs
            tunable.prepare.report_first_run(theirs, [1], lambda outputs: reported.setdefault(-1, outputs))  # type: ignore[union-attr]
        assert prepare_batch(tunables, [0, 1], mine, 2).failures == {}
        assert reported == {}
        # Another launch shape (96 items), so each variant is first-launched again, now for a tune that asks.
        assert prepare_batch(tunables, [0, 1], inputs(96), 2, first_runs=([1], reported.__setitem__)).failures == {}
        assert sorted(reported) == [0, 1]
        right = 2 * np.arange(96, dtype=np.float32)
        np.testing.assert_array_equal(reported[0][0], right)
        right[7] += 0.5
        np.testing.assert_array_equal(reported[1][0], right)
    finally:
        pooled.close()


def test_outputs_a_worker_sent_before_are_named_by_their_digest_and_not_sent_again(
    isolated_settings: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """One worker, three variants with the same output bits: one outputs file is read, all three are reported."""
    read: list[str] = []
    real = _together._outputs_read

    def counted(launch: Any, inputs: tuple[Any, ...]) -> tuple[Any, ...]:
        read.append(launch.kernel)
        return real(launch, inputs)

    monkeypatch.setattr(_together, "_outputs_read", counted)
    pooled = OpenCLClient(flush_cache=False, compile_in="process", compile_workers=1)
    try:
        template = KernelTemplate(
            SOURCE + "\n// digests\n", "axpy", {"MODE": [0], "BLOCK": [16, 32, 64]}, geometry=_geometry
        )
        tunables = template.tunable_set(pooled, key=lambda x, y, a, n: AxpyKey(n=int(n)), outputs=[1])
        x = cla.to_device(pooled.queue, np.arange(128, dtype=np.float32))
        inputs = (x, cla.zeros(pooled.queue, 128, np.float32), np.float32(2), np.int32(128))
        reported: dict[int, tuple[Any, ...]] = {}
        assert prepare_batch(tunables, [0, 1, 2], inputs, 1, first_runs=([1], reported.__setitem__)).failures == {}
    finally:
        pooled.close()
    assert sorted(reported) == [0, 1, 2]
    for outputs in reported.values():
        np.testing.assert_array_equal(outputs[0], 2 * np.arange(128, dtype=np.float32))
    assert len(read) == 1
