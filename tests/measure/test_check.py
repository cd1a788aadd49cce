"""The correctness gate on host (numpy) candidates: reference, baseline, canaries, tolerances, prepare."""

from __future__ import annotations

import ctypes
import threading
import warnings
from typing import Annotated

import numpy as np
import pytest

import tunekit as tk
from tunekit._measure import check
from tunekit._measure.check import ReferenceFailed, compare, default_tolerance
from tunekit_backends.cpu import CpuClient

CLIENT = CpuClient()


@tk.autotune_key
class NKey:
    n: Annotated[int, tk.Anchor()]


def _key(x: np.ndarray, *rest: object) -> NKey:
    return NKey(n=x.size)


def _tune(tunables: tk.TunableSet[NKey, object], inputs: tuple[object, ...]) -> tuple[object, tk.AutotuneRecord]:
    records: list[tk.AutotuneRecord] = []
    sink = tk.add_record_sink(records.append)
    try:
        tuner: tk.LocalTuner[NKey, object] = tk.LocalTuner(f"check-{id(tunables)}")
        out = tuner.execute(CLIENT.device_id, CLIENT, tunables, inputs)
    finally:
        tk.remove_record_sink(sink)
    return out, records[-1]


def _candidates(record: tk.AutotuneRecord) -> dict[str, tk.CandidateRecord]:
    return {c.name: c for c in record.candidates}


def _checks(record: tk.AutotuneRecord) -> dict[str, object]:
    return {e.name: e for e in record.events if e.kind == "check"}  # type: ignore[union-attr]


def test_integers_must_match_exactly() -> None:
    expected = np.arange(10, dtype=np.int64)
    assert compare(expected.copy(), expected).passed
    off = expected.copy()
    off[7] += 1
    outcome = compare(off, expected)
    assert not outcome.passed
    assert "1 of 10 elements differ" in outcome.detail and "(7,)" in outcome.detail
    assert outcome.max_abs_error == 1.0


def test_float_tolerance_follows_the_dtype_rounding() -> None:
    rng = np.random.default_rng(0)
    x = rng.random(1000).astype(np.float32)
    # Reordered float32 summation: tiny differences pass.
    assert compare(np.cumsum(x[::-1])[::-1].astype(np.float32)[:1], np.sum(x, dtype=np.float64)[None]).passed
    rtol32 = default_tolerance(np.dtype(np.float32))
    rtol64 = default_tolerance(np.dtype(np.float64))
    assert rtol32 is not None and rtol64 is not None and rtol32[0] > rtol64[0]
    assert default_tolerance(np.dtype(np.int32)) is None
    # A relative error of 1e-3 is a bug in float32 and float64 unless the caller widens the tolerance.
    assert not compare(x * (1 + 1e-3), x).passed
    assert compare(x * (1 + 1e-3), x, rtol=2e-3).passed


def test_shape_and_nan_mismatches_are_reported() -> None:
    assert "shape (3,) differs" in compare(np.zeros(3), np.zeros(4)).detail
    assert compare(np.array([np.nan, 1.0]), np.array([np.nan, 1.0])).passed
    outcome = compare(np.array([np.nan, 1.0]), np.array([0.0, 1.0]))
    assert not outcome.passed and "(0,)" in outcome.detail


def test_wrong_result_is_rejected_with_the_error_figure_and_never_timed() -> None:
    timed: list[str] = []

    def good(x: np.ndarray) -> np.ndarray:
        timed.append("good")
        return x * 2

    def wrong(x: np.ndarray) -> np.ndarray:
        timed.append("wrong")
        y = x * 2
        y[3] += 0.5
        return y

    tunables = (
        tk.TunableSet(key=_key)
        .with_tunables([tk.Tunable("wrong", wrong), tk.Tunable("good", good)])
        .with_reference(lambda x: x * 2)
    )
    x = np.linspace(0, 1, 64)
    out, record = _tune(tunables, (x,))
    np.testing.assert_array_equal(out, x * 2)
    assert record.winner == "good"
    failed = _candidates(record)["wrong"]
    assert failed.status == "failed" and failed.stage == "check"
    assert failed.error is not None and "max abs error 0.5 at (3,)" in failed.error
    checks = _checks(record)
    assert checks["good"].passed and checks["good"].against == "reference"  # type: ignore[attr-defined]
    assert checks["wrong"].max_abs_error == pytest.approx(0.5)  # type: ignore[attr-defined]
    # "wrong" ran only for its check; "good" for its check, warm-up, samples and the real call.
    assert timed.count("wrong") == 1
    good_record = _candidates(record)["good"]
    tuning_runs = max(tk.settings().warmup - 1, 0) + len(good_record.samples_ns) + len(good_record.discarded_ns)
    assert timed.count("good") == 1 + tuning_runs + 1


def test_without_reference_the_first_candidate_is_the_baseline() -> None:
    tunables = (
        tk.TunableSet(key=_key)
        .with_tunables(
            [
                tk.Tunable("sum", lambda x: x.sum(axis=1)),
                tk.Tunable("einsum", lambda x: np.einsum("ij->i", x)),
                tk.Tunable("first_col", lambda x: x[:, 0].copy()),
            ]
        )
        .with_reference()
    )
    x = np.random.default_rng(1).random((8, 100)).astype(np.float32)
    _, record = _tune(tunables, (x,))
    assert _candidates(record)["first_col"].stage == "check"
    assert _checks(record)["einsum"].against == "sum"  # type: ignore[attr-defined]
    assert record.winner in {"sum", "einsum"}


def test_a_candidate_returning_less_precision_than_its_inputs_fails_the_check() -> None:
    # Regression: a float16 result of float64 inputs was held to float16's rounding, passed, and could win.
    x = np.random.default_rng(2).random(64)
    tunables = (
        tk.TunableSet(key=_key)
        .with_tunables([tk.Tunable("half", lambda x: (x * 2).astype(np.float16)), tk.Tunable("full", lambda x: x * 2)])
        .with_reference(lambda x: x * 2)
    )
    _, record = _tune(tunables, (x,))
    half = _candidates(record)["half"]
    assert half.stage == "check" and half.error is not None
    assert "float16 values where the expected value is float64 and the inputs hold float64" in half.error
    assert "(return float64 or finer, or give with_reference(rtol=..., atol=...)" in half.error
    assert record.winner == "full"
    # A float32 kernel of float32 inputs against a float64 reference keeps float32's rounding.
    x32 = x.astype(np.float32)
    assert compare(x32 * 2, x32.astype(np.float64) * 2, floor=np.dtype(np.float32)).passed
    assert not compare(x32.astype(np.float16), x32.astype(np.float64), floor=np.dtype(np.float32)).passed
    # Without float array inputs (a sqrt of ints, a float64 reference), a float32 result stays fine.
    assert compare(np.sqrt(np.arange(9)).astype(np.float32), np.sqrt(np.arange(9))).passed


def test_explicit_tolerances_accept_a_coarser_output_that_is_close_enough() -> None:
    """with_reference(rtol=1e-2, atol=1e-2) still refused a float32 result of float64 inputs as losing precision."""
    x = np.random.default_rng(3).random(64)
    tunables = (
        tk.TunableSet(key=_key)
        .with_tunable(tk.Tunable("single", lambda x: (x * 2).astype(np.float32)))
        .with_reference(lambda x: x * 2, rtol=1e-2, atol=1e-2)
    )
    _, record = _tune(tunables, (x,))
    assert _candidates(record)["single"].stage is None and record.winner == "single"
    floor = np.dtype(np.float64)
    # Held to float64's rounding widened by the user's figures, not to float32's own: too tight a figure still fails.
    assert compare((x * 2).astype(np.float32), x * 2, rtol=1e-2, floor=floor).passed
    tight = compare((x * 2).astype(np.float32), x * 2, rtol=1e-12, floor=floor)
    assert not tight.passed and "elements differ (rtol 1.49e-08" in tight.detail
    assert not compare((x * 2 + 1).astype(np.float32), x * 2, rtol=1e-2, atol=1e-2, floor=floor).passed


def test_in_place_output_written_past_its_end_is_caught_by_the_canary() -> None:
    def in_place(x: np.ndarray, out: np.ndarray) -> None:
        np.multiply(x, 3, out=out)

    def overrun(x: np.ndarray, out: np.ndarray) -> None:
        np.multiply(x, 3, out=out)
        # What a native kernel with an off-by-one bound does: one element past the end.
        ctypes.memset(out.ctypes.data + out.nbytes, 0, out.itemsize)

    tunables = (
        tk.TunableSet(key=_key)
        .with_tunables([tk.Tunable("overrun", overrun), tk.Tunable("in_place", in_place)])
        .with_reference(lambda x, out: x * 3, outputs=[1])
    )
    x = np.arange(32, dtype=np.float32)
    out = np.zeros_like(x)
    _, record = _tune(tunables, (x, out))
    np.testing.assert_array_equal(out, x * 3)
    failed = _candidates(record)["overrun"]
    assert failed.stage == "check" and failed.error is not None and "canary overwritten" in failed.error
    assert "argument 1" in failed.error
    assert record.winner == "in_place"


def test_failed_prepare_is_recorded_at_compile_stage_and_skipped() -> None:
    prepared: list[str] = []
    lock = threading.Lock()

    def prepare_ok(x: np.ndarray) -> None:
        with lock:
            prepared.append("ok")

    def prepare_bad(x: np.ndarray) -> None:
        raise RuntimeError("build failed: error: use of undeclared identifier 'BLOK'")

    def never(x: np.ndarray) -> np.ndarray:
        raise AssertionError("a candidate whose prepare failed must never run")

    tunables = tk.TunableSet(key=_key).with_tunables(
        [
            tk.Tunable("broken", never, prepare=prepare_bad),
            tk.Tunable("fine", lambda x: x + 1, prepare=prepare_ok),
        ]
    )
    out, record = _tune(tunables, (np.zeros(4),))
    np.testing.assert_array_equal(out, np.ones(4))
    broken = _candidates(record)["broken"]
    assert broken.stage == "compile" and broken.error is not None and "undeclared identifier 'BLOK'" in broken.error
    assert prepared == ["ok"]
    (phase,) = [e for e in record.events if e.kind == "prepare"]
    assert phase.candidates == 2 and phase.failed == 1  # type: ignore[union-attr]


def test_group_keeps_the_prepare_hook() -> None:
    group = tk.TuneGroup("g", lambda key: 0)
    hook = lambda x: None  # noqa: E731
    assert tk.Tunable("a", lambda x: x, prepare=hook).group(group, lambda key: 1).prepare is hook


def test_reference_options_are_validated_at_definition() -> None:
    base = tk.TunableSet(key=_key)
    with pytest.raises(ValueError, match="argument positions"):
        base.with_reference(lambda x: x, outputs=[-1])
    # Regression: outputs=1 (one output, written bare) failed as "'int' object is not iterable".
    for bare in (1, "1"):
        with pytest.raises(TypeError, match=r"outputs=...\) takes a list of argument positions, e.g. outputs=\[1\]"):
            base.with_reference(lambda x: x, outputs=bare)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="rtol"):
        base.with_reference(lambda x: x, rtol=-1)
    with pytest.raises(TypeError, match="callable"):
        base.with_reference(42)  # type: ignore[arg-type]
    # float() took "1e-3" as a number and failed on "tight" naming neither argument.
    for name in ("rtol", "atol"):
        for bad in ("1e-3", "tight", None):
            with pytest.raises(TypeError, match=rf"with_reference\({name}=...\) takes a number, got {bad!r}"):
                base.with_reference(lambda x: x, **{name: bad})


@pytest.mark.parametrize("isolated", [False, True])
def test_a_failing_reference_stops_the_tune_instead_of_blaming_candidates(isolated: bool) -> None:
    """Regression (isolated): the reference ran unguarded before the first isolated check, so its error was
    blamed on every candidate (NoValidKernelFound, remembered as a failed tune) instead of stopping the tune."""

    def broken_reference(x: np.ndarray) -> np.ndarray:
        raise ZeroDivisionError("bad reference")

    tunables = tk.TunableSet(key=_key).with_tunable(tk.Tunable("ok", lambda x: x)).with_reference(broken_reference)
    if isolated:
        tunables = tunables.with_isolation("process")
    with pytest.raises(ReferenceFailed, match="reference function .* raised ZeroDivisionError: bad reference"):
        _tune(tunables, (np.zeros(3),))


def test_an_infinite_expected_value_is_met_only_by_the_same_infinity() -> None:
    # Regression: the tolerance rtol * inf let 5, NaN and -inf pass where +inf was expected.
    expected = np.array([np.inf, 1.0, -np.inf])
    assert compare(expected.copy(), expected).passed
    for wrong in (5.0, np.nan, -np.inf):
        got = expected.copy()
        got[0] = wrong
        outcome = compare(got, expected)
        assert not outcome.passed and "1 of 3 elements differ" in outcome.detail and "at (0,)" in outcome.detail
        assert outcome.max_rel_error == np.inf
    assert not compare(np.array([1.0 + 0j]), np.array([complex(1.0, np.inf)])).passed


def test_comparing_infinities_warns_nothing() -> None:
    # Regression: inf - inf leaked "RuntimeWarning: invalid value encountered in subtract" to the user.
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert compare(np.array([np.inf, -np.inf]), np.array([np.inf, -np.inf])).passed


def test_outputs_numpy_cannot_compare_fail_the_check_saying_what_to_return() -> None:
    # Regression: a dict of arrays failed the candidate with numpy's "truth value of an array is ambiguous".
    outcome = compare({"a": np.ones(3)}, {"a": np.ones(3)})
    assert not outcome.passed and "a dict cannot be compared" in outcome.detail and "tuple" in outcome.detail
    text = compare(np.array(["a"]), np.array([1.0]))
    assert not text.passed and "where numbers were expected" in text.detail


class _ClosableCpuClient(CpuClient):
    """A CPU client holding something ``close()`` (from any thread) takes away; using it then raises ClientClosed.

    ``profile`` times the host callable alone, so only the correctness check, which syncs the client, notices.
    """

    def __init__(self) -> None:
        self.closed = threading.Event()

    def close(self) -> None:
        self.closed.set()

    def use(self) -> None:
        if self.closed.is_set():
            raise tk.ClientClosed("the test's CPU client was closed")

    def sync(self) -> None:
        self.use()


@pytest.mark.parametrize("closed", ["before the check", "while b is checked", "in the reference"])
def test_a_client_closed_at_the_check_stops_the_tune_and_stores_nothing(closed: str, isolated_settings: object) -> None:
    """Regression: the check counted ClientClosed as the candidate failing it, so the tune stored the others' winner,
    or a failed tune (NoValidKernelFound), or blamed the reference (ReferenceFailed)."""
    client = _ClosableCpuClient()

    def closing(x: np.ndarray) -> np.ndarray:  # stands for another thread closing the client while it runs
        client.close()
        return x * 2

    def reference(x: np.ndarray) -> np.ndarray:
        if closed == "in the reference":
            closing(x)
        client.use()
        return x * 2

    b = closing if closed == "while b is checked" else lambda x: x + x
    tunables = tk.TunableSet(key=_key).with_tunables([tk.Tunable("a", lambda x: x * 2), tk.Tunable("b", b)])
    tunables = tunables.with_reference(reference)
    if closed == "before the check":
        closer = threading.Thread(target=client.close)
        closer.start()
        closer.join()
    tuner: tk.LocalTuner[NKey, object] = tk.LocalTuner("closed-at-check")
    with pytest.raises(tk.ClientClosed, match="the test's CPU client was closed"):
        tuner.execute(client.device_id, client, tunables, (np.arange(8.0),))
    cache = tk.PersistentCache(isolated_settings)  # type: ignore[arg-type]
    assert list(cache.rows()) == []
    assert cache.failed_keys() == []


@pytest.mark.parametrize("with_fn", [True, False], ids=["reference", "first_candidate"])
def test_outputs_beyond_the_inputs_stop_the_tune_storing_nothing(with_fn: bool, isolated_settings: object) -> None:
    """Regression: outputs=[5] for 2 inputs failed every candidate (and stored a failed tune that other processes
    repeated after the fix), or, with a reference, said the reference function raised."""
    tunables = tk.TunableSet(key=lambda x, out: NKey(n=x.size)).with_tunables(
        [tk.Tunable("a", lambda x, out: np.multiply(x, 2, out=out)), tk.Tunable("b", lambda x, out: None)]
    )
    tunables = tunables.with_reference((lambda x, out: x * 2) if with_fn else None, outputs=[5])
    tuner: tk.LocalTuner[NKey, object] = tk.LocalTuner("outputs-beyond")
    with pytest.raises(tk.TunekitError, match=r"^tuner 'outputs-beyond': with_reference\(outputs=\[5\]\) names an"):
        tuner.execute(CLIENT.device_id, CLIENT, tunables, (np.ones(4), np.zeros(4)))
    cache = tk.PersistentCache(isolated_settings)  # type: ignore[arg-type]
    assert cache.failed_keys() == []


@pytest.mark.parametrize(
    ("reference", "says"),
    [
        (lambda x, out: (x * 2)[:2], r"returned ndarray of shape \(2,\) for argument 1, an array of shape \(4,\)"),
        (lambda x, out: None, r"returned None for argument 1, an array of shape \(4,\)"),
        (lambda x, out: {1: x * 2}, r"returned dict for argument 1, an array of shape \(4,\)"),
    ],
    ids=["shape", "none", "dict"],
)
def test_a_reference_value_no_in_place_output_can_match_stops_the_tune_blaming_no_candidate(
    reference: object, says: str, isolated_settings: object
) -> None:
    """Regression: a reference returning the wrong shape (or None) for an output argument failed every candidate
    with "argument 1: shape (4,) differs from the expected (2,)", as if each kernel were wrong, and stored the key's
    failure for other processes to repeat."""
    tunables = (
        tk.TunableSet(key=lambda x, out: NKey(n=x.size))
        .with_tunable(tk.Tunable("a", lambda x, out: np.multiply(x, 2, out=out)))
        .with_reference(reference, outputs=[1])  # type: ignore[arg-type]
    )
    tuner: tk.LocalTuner[NKey, object] = tk.LocalTuner("reference-shape")
    with pytest.raises(ReferenceFailed, match=says + r": return the values a correct candidate leaves in it"):
        tuner.execute(CLIENT.device_id, CLIENT, tunables, (np.ones(4), np.zeros(4)))
    cache = tk.PersistentCache(isolated_settings)  # type: ignore[arg-type]
    assert cache.failed_keys() == []


@pytest.mark.parametrize(
    ("outputs", "reference", "says"),
    [
        (
            [1],
            lambda x, out, n: [None, x * 2, None],
            r"returned a list of 3 values, one per argument with None for those not checked, as Kernel Tuner's "
            r"answer= takes; return only the values of the outputs=\[1\] arguments: the array for argument 1 alone "
            r"\(return answer\[1\]\)",
        ),
        (
            [0, 1],
            lambda x, out, n: [x, x * 2, None],
            r"returned a list of 3 values, .* outputs=\[0, 1\] arguments: a tuple of one array per position, in "
            r"that order \(return answer\[0\], answer\[1\]\)",
        ),
        (
            [1],
            lambda x, out, n: [x * 2, x[:2]],
            r"returned a list for argument 1, an array of shape \(4,\), that numpy cannot read as one array",
        ),
    ],
    ids=["kernel-tuner-answer", "kernel-tuner-answer-two-outputs", "ragged"],
)
def test_a_reference_returning_a_value_per_argument_stops_the_tune_saying_what_to_return(
    outputs: list[int], reference: object, says: str, isolated_settings: object
) -> None:
    """Regression: a reference returning Kernel Tuner's answer= list ([None, expected, None]) failed every candidate
    with numpy's "setting an array element with a sequence ... inhomogeneous shape", as if each kernel were wrong."""
    tunables = (
        tk.TunableSet(key=lambda x, out, n: NKey(n=x.size))
        .with_tunable(tk.Tunable("a", lambda x, out, n: np.multiply(x, 2, out=out)))
        .with_reference(reference, outputs=outputs)  # type: ignore[arg-type]
    )
    tuner: tk.LocalTuner[NKey, object] = tk.LocalTuner(f"reference-per-argument-{len(outputs)}")
    with pytest.raises(ReferenceFailed, match=says):
        tuner.execute(CLIENT.device_id, CLIENT, tunables, (np.ones(4), np.zeros(4), np.int32(4)))
    cache = tk.PersistentCache(isolated_settings)  # type: ignore[arg-type]
    assert cache.failed_keys() == []


def test_a_candidate_that_leaves_part_of_its_output_unwritten_is_told_so_with_the_first_element() -> None:
    """Regression: a kernel launched over too few work-items (a global size given in work-groups, as Kernel Tuner's
    grid counts them) failed with the error figures alone, which do not say that most elements were never written."""
    tunables = (
        tk.TunableSet(key=lambda x, out: NKey(n=x.size))
        .with_tunable(tk.Tunable("whole", lambda x, out: np.multiply(x, 2, out=out)))
        .with_tunable(tk.Tunable("quarter", lambda x, out: np.multiply(x[:16], 2, out=out[:16])))
        .with_tunable(tk.Tunable("wrong", lambda x, out: np.multiply(x, 3, out=out)))
        .with_reference(lambda x, out: x * 2, outputs=[1])
    )
    _, record = _tune(tunables, (np.arange(1.0, 65.0), np.zeros(64)))
    assert record.winner == "whole"
    quarter = _candidates(record)["quarter"].error or ""
    assert "argument 1: 48 of 64 elements differ" in quarter
    says = "48 elements that the reference changes still hold the value they had before the launch (the first at (16,))"
    assert says + ", as if never written" in quarter
    assert "still hold" not in (_candidates(record)["wrong"].error or "")  # written, only wrong


def test_outputs_naming_a_scalar_argument_stop_the_tune_blaming_no_candidate(isolated_settings: object) -> None:
    """Regression: outputs=[1] naming a scalar failed every candidate with "argument 1: shape () differs from the
    expected (4,)"; no candidate can write a scalar argument in place."""
    tunables = (
        tk.TunableSet(key=lambda x, n: NKey(n=x.size))
        .with_tunable(tk.Tunable("a", lambda x, n: x * 2))
        .with_reference(lambda x, n: x * 2, outputs=[1])
    )
    tuner: tk.LocalTuner[NKey, object] = tk.LocalTuner("outputs-scalar")
    with pytest.raises(ReferenceFailed, match=r"outputs=\[1\]\) names argument 1, a int32 .* cannot write in place"):
        tuner.execute(CLIENT.device_id, CLIENT, tunables, (np.ones(4), np.int32(4)))
    cache = tk.PersistentCache(isolated_settings)  # type: ignore[arg-type]
    assert cache.failed_keys() == []


def test_an_expected_output_prepared_once_judges_every_output_as_the_full_comparison_does() -> None:
    """A prepared expected value (the gate's, for every candidate) gives exactly the outcome compare() gives alone."""
    rng = np.random.default_rng(3)
    expected = rng.random(4096).astype(np.float32)
    expected[[5, 9]] = 0.0  # an error's relative size there is 0 or infinite
    prepared = check._prepared(expected)
    assert prepared is not None
    close = (expected + rng.normal(0, 1e-6, expected.size)).astype(np.float32)
    off_by_one = np.roll(expected, 1)
    nan = close.copy()
    nan[17] = np.nan
    at_zero = close.copy()
    at_zero[9] = 1e-7
    cases = [close, expected.copy(), off_by_one, nan, at_zero, close.astype(np.float64), close.astype(np.float16)]
    floors = [None, np.dtype(np.float32)]
    for got in cases:
        for floor in floors:
            for rtol, atol in ((0.0, 0.0), (0.0, 1e-3), (1e-2, 0.0)):
                alone = compare(got, expected, rtol=rtol, atol=atol, floor=floor)
                assert compare(got, expected, rtol=rtol, atol=atol, floor=floor, prepared=prepared) == alone
    # Non-finite expected values take the full comparison: nothing is prepared for them.
    assert check._prepared(np.array([1.0, np.inf])) is None and check._prepared(np.arange(3)) is None


def test_the_gate_prepares_each_expected_output_once_per_tune_not_once_per_candidate(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Regression: every check converted the expected output to float64 and took its magnitudes again, some
    twenty passes over it per candidate (27 ms for a 1024x1024 float32 output, 1.1 s of a 42-variant tune)."""
    prepared: list[object] = []

    class Counted(check._Expected):
        def __init__(self, expected: np.ndarray) -> None:
            prepared.append(expected)
            super().__init__(expected)

    monkeypatch.setattr(check, "_Expected", Counted)
    tunables = (
        tk.TunableSet(key=_key)
        .with_tunables([tk.Tunable(f"c{i}", lambda x, i=i: x * 2 + 0.0 * i) for i in range(4)])
        .with_reference(lambda x: x * 2)
    )
    _, record = _tune(tunables, (np.linspace(0, 1, 256),))
    assert all(c.status == "measured" for c in record.candidates)
    assert len(prepared) == 1


def test_candidates_with_the_same_output_bits_get_the_verdict_of_the_first_compared_once(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Outputs bit for bit equal to one judged before take its verdict, words and figures included."""
    compared: list[object] = []
    real = check.compare

    def counted(got: object, expected: object, **kwargs: object) -> check.CheckOutcome:
        compared.append(got)
        return real(got, expected, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(check, "compare", counted)

    def off(x: np.ndarray) -> np.ndarray:
        y = x * 2
        y[3] += 0.5
        return y

    def nan(x: np.ndarray) -> np.ndarray:
        y = x * 2
        y[5] = np.nan
        return y

    tunables = (
        tk.TunableSet(key=_key)
        .with_tunables(
            [
                tk.Tunable("off_a", off),
                tk.Tunable("off_b", lambda x: off(x.copy())),
                tk.Tunable("nan_a", nan),
                tk.Tunable("nan_b", lambda x: nan(x)[:]),
                tk.Tunable("good_a", lambda x: x * 2),
                tk.Tunable("good_b", lambda x: x + x),
            ]
        )
        .with_reference(lambda x: x * 2)
    )
    _, record = _tune(tunables, (np.linspace(0, 1, 64),))
    checks = _checks(record)
    candidates = _candidates(record)
    for first, second in (("off_a", "off_b"), ("nan_a", "nan_b"), ("good_a", "good_b")):
        assert checks[second].model_dump(exclude={"name"}) == checks[first].model_dump(exclude={"name"})  # type: ignore[attr-defined]
        assert candidates[second].stage == candidates[first].stage
        assert candidates[second].error == candidates[first].error
    assert "max abs error 0.5 at (3,)" in (candidates["off_b"].error or "")
    assert "at (5,) (got nan" in (candidates["nan_b"].error or "")
    assert candidates["good_b"].status == "measured"
    assert len(compared) == 3  # one comparison per distinct output


def test_an_output_array_rewritten_by_a_later_candidate_is_judged_on_its_new_bits() -> None:
    """The verdicts are kept against copies: a candidate returning the same array object, rewritten, is judged anew."""
    shared = np.empty(64)

    def wrong(x: np.ndarray) -> np.ndarray:
        np.multiply(x, 3, out=shared)
        return shared

    def right(x: np.ndarray) -> np.ndarray:
        np.multiply(x, 2, out=shared)
        return shared

    tunables = (
        tk.TunableSet(key=_key)
        .with_tunables([tk.Tunable("wrong", wrong), tk.Tunable("right", right)])
        .with_reference(lambda x: x * 2)
    )
    _, record = _tune(tunables, (np.linspace(0, 1, 64),))
    assert _candidates(record)["wrong"].stage == "check"
    assert _candidates(record)["right"].status == "measured" and record.winner == "right"
    assert not _checks(record)["wrong"].passed and _checks(record)["right"].passed  # type: ignore[attr-defined]


def test_outputs_that_differ_only_in_the_sign_of_zero_or_dtype_are_judged_apart() -> None:
    """Bitwise, not numeric, equality decides whether a verdict is reused."""
    judged = check._Judged()
    zero = np.zeros(8)
    verdict = check.CheckOutcome(True, "output 0: within rtol 1, atol 1; max abs error 0", 0.0, 0.0)
    judged.keep((zero,), verdict)
    assert judged.get((np.zeros(8),)) is verdict
    assert judged.get((-np.zeros(8),)) is None
    assert judged.get((np.zeros(8, np.float32),)) is None
    assert judged.get((np.zeros((2, 4)),)) is None
    assert judged.get((np.zeros(8)[::-1].copy(),)) is verdict
    assert judged.get((np.zeros(16)[::2],)) is verdict  # a strided view holds the same values
    assert judged.get(([0.0] * 8,)) is None  # not a numpy array: compared as usual
