"""A custom comparison (with_reference(compare=...)) on host candidates: its verdict, its reason, its relaxed shapes."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

import tunekit as tk
from tunekit._measure.check import ReferenceFailed
from tunekit_backends.cpu import CpuClient

CLIENT = CpuClient()


@tk.autotune_key
class NKey:
    n: int


def _key(x: np.ndarray, *rest: object) -> NKey:
    return NKey(n=x.size)


def _partial_sums(config: tk.Config) -> Any:
    """Per-block partial sums: as many as the block size makes, as a work-group reduction leaves them."""
    block, drop_last = int(config.BLOCK), bool(config.DROP)

    def run(x: np.ndarray) -> np.ndarray:
        sums: np.ndarray = x.reshape(-1, block).sum(axis=1)
        return sums[:-1] if drop_last else sums  # DROP: a bound check that loses the last block

    return run


def _total_matches(expected: Any, got: Any) -> bool:
    return bool(np.isclose(np.sum(got), np.sum(expected), rtol=1e-9))  # expected: a total, or a baseline's partial sums


def _tune(tunables: tk.TunableSet[NKey, Any], *inputs: Any) -> tuple[Any, tk.AutotuneRecord]:
    records: list[tk.AutotuneRecord] = []
    sink = tk.add_record_sink(records.append)
    try:
        tuner: tk.LocalTuner[NKey, Any] = tk.LocalTuner(f"compare-{id(tunables)}")
        out = tuner.execute(CLIENT.device_id, CLIENT, tunables, inputs)
    finally:
        tk.remove_record_sink(sink)
    return out, records[-1]


SPACE = tk.Space(BLOCK=[4, 8, 16], DROP=[0, 1])
X = np.random.default_rng(0).random(64)


def test_a_variant_dependent_output_size_passes_when_its_total_matches_and_a_lost_block_fails() -> None:
    tunables = tk.TunableSet.from_space(SPACE, _partial_sums, key=_key).with_reference(
        lambda x: x.sum(), compare=_total_matches
    )
    out, record = _tune(tunables, X)
    by_name = {c.name: c for c in record.candidates}
    for block in (4, 8, 16):  # 16, 8 and 4 partial sums: the built-in check would refuse two of three shapes
        assert by_name[f"BLOCK={block},DROP=0"].status == "measured"
        dropped = by_name[f"BLOCK={block},DROP=1"]
        assert dropped.stage == "check"
        assert dropped.error == "output 0: compare=_total_matches returned False"
    assert record.winner is not None and record.winner.endswith("DROP=0")
    assert np.isclose(out.sum(), X.sum())


def test_without_compare_the_same_set_fails_the_variants_whose_shape_differs() -> None:
    """The control: elementwise, partial sums of other block sizes cannot match the reference's."""
    tunables = tk.TunableSet.from_space(tk.Space(BLOCK=[4, 8], DROP=[0]), _partial_sums, key=_key).with_reference(
        lambda x: x.reshape(-1, 4).sum(axis=1)
    )
    _, record = _tune(tunables, X)
    by_name = {c.name: c for c in record.candidates}
    assert by_name["BLOCK=4,DROP=0"].status == "measured"
    assert "shape (8,) differs from the expected (16,)" in (by_name["BLOCK=8,DROP=0"].error or "")


def test_a_raised_reason_is_the_failure_reason_and_reaches_no_valid_kernel_found() -> None:
    def close_totals(expected: Any, got: Any) -> bool:
        np.testing.assert_allclose(np.sum(got), expected, rtol=1e-9, err_msg="totals differ")
        return True

    space = tk.Space(BLOCK=[4, 8], DROP=[1])  # every variant loses its last block
    tunables = tk.TunableSet.from_space(space, _partial_sums, key=_key).with_reference(
        lambda x: x.sum(), compare=close_totals
    )
    with pytest.raises(tk.NoValidKernelFound) as caught:
        _tune(tunables, X)
    message = str(caught.value)
    assert "compare=test_a_raised_reason_is_the_failure_reason_and_reaches_no_valid_kernel_found.<locals>" in message
    assert "raised AssertionError" in message and "totals differ" in message
    assert "check the reference and the compare= function" in " ".join(getattr(caught.value, "__notes__", []))


def test_a_compare_returning_none_fails_rather_than_passing_everything() -> None:
    def forgot_return(expected: Any, got: Any) -> bool:
        assert np.isclose(np.sum(got), expected)
        return None  # type: ignore[return-value]

    tunables = tk.TunableSet.from_space(tk.Space(BLOCK=[4], DROP=[0]), _partial_sums, key=_key).with_reference(
        lambda x: x.sum(), compare=forgot_return
    )
    with pytest.raises(tk.NoValidKernelFound, match="returned NoneType, not a bool: return True when"):
        _tune(tunables, X)


def test_an_in_place_output_may_be_expected_as_a_value_of_another_shape_with_compare() -> None:
    """Sorted in place: the reference gives the multiset; compare checks order and content, not positions."""

    def sort_in_place(x: np.ndarray, out: np.ndarray) -> None:
        out[:] = np.sort(x)

    def reversed_twice(x: np.ndarray, out: np.ndarray) -> None:
        out[:] = np.sort(x)[::-1]

    def sorted_and_same(expected: Any, got: Any) -> bool:
        if not bool(np.all(np.diff(got) >= 0)):
            raise ValueError(f"not ascending at index {int(np.argmin(np.diff(got) >= 0))}")
        return bool(np.array_equal(np.sort(got), np.sort(expected)))

    tunables = (
        tk.TunableSet(key=_key)
        .with_tunables([tk.Tunable("sort", sort_in_place), tk.Tunable("descending", reversed_twice)])
        .with_reference(lambda x, out: (np.sort(x)[::-1],), outputs=[1], compare=sorted_and_same)
    )
    _, record = _tune(tunables, X, np.zeros_like(X))
    by_name = {c.name: c for c in record.candidates}
    assert by_name["sort"].status == "measured"
    assert (by_name["descending"].error or "").startswith(
        "argument 1: compare=test_an_in_place_output_may_be_expected_as_a_value_of_another_shape_with_compare."
    )
    assert "raised ValueError: not ascending at index 0" in (by_name["descending"].error or "")

    # Without compare=, an expected value that no in-place output could match is the reference's mistake.
    plain = tunables.with_reference(lambda x, out: np.sum(x), outputs=[1])
    with pytest.raises(ReferenceFailed, match="returned float64 of shape"):
        _tune(plain, X, np.zeros_like(X))


def test_the_baseline_without_a_reference_function_is_judged_by_compare() -> None:
    tunables = tk.TunableSet.from_space(tk.Space(BLOCK=[16, 4], DROP=[0, 1]), _partial_sums, key=_key).with_reference(
        compare=_total_matches
    )
    _, record = _tune(tunables, X)
    failed = sorted(c.name for c in record.candidates if c.stage == "check")
    assert failed == ["BLOCK=16,DROP=1", "BLOCK=4,DROP=1"]


def _one(expected: Any) -> bool:
    return True


@pytest.mark.parametrize(
    ("compare", "words"),
    [
        (_one, r"is called as compare\(expected, got\), once per output, but _one\(expected: 'Any'\) -> 'bool' cannot"),
        (lambda e, g, tol: True, r"cannot take those two arguments: define it as def compare\(expected, got\)"),
        ("allclose", r"takes a function \(expected, got\) -> bool, got str"),
    ],
)
def test_a_compare_of_the_wrong_arity_is_refused_at_definition(compare: Any, words: str) -> None:
    with pytest.raises(TypeError, match=words):
        tk.TunableSet(key=_key).with_reference(lambda x: x, compare=compare)


def test_compare_with_rtol_is_refused_as_the_tolerance_would_be_ignored() -> None:
    with pytest.raises(TypeError, match=r"apply your tolerance inside compare"):
        tk.TunableSet(key=_key).with_reference(lambda x: x, compare=_total_matches, atol=1e-3)

    # Extra keyword-only parameters with defaults are fine.
    def with_tolerance(expected: Any, got: Any, *, tol: float = 1e-3) -> bool:
        return True

    tk.TunableSet(key=_key).with_reference(lambda x: x, compare=with_tolerance)
    tk.TunableSet(key=_key).with_reference(lambda x: x, compare=np.allclose)


@pytest.mark.slow
@pytest.mark.subprocess
def test_an_isolated_tune_judges_each_candidate_with_compare_in_its_worker() -> None:
    tunables = (
        tk.TunableSet.from_space(tk.Space(BLOCK=[4, 8], DROP=[0, 1]), _partial_sums, key=_key)
        .with_reference(lambda x: x.sum(), compare=_total_matches)
        .with_isolation("process")
    )
    _, record = _tune(tunables, X)
    by_name = {c.name: c for c in record.candidates}
    assert {n for n, c in by_name.items() if c.status == "measured"} == {"BLOCK=4,DROP=0", "BLOCK=8,DROP=0"}
    assert by_name["BLOCK=8,DROP=1"].error == "output 0: compare=_total_matches returned False"


def test_tk_search_takes_compare_and_its_failures_are_the_trials_reasons() -> None:
    result = tk.search(
        tk.Space(BLOCK=[4, 8], DROP=[0, 1]),
        _partial_sums,
        CLIENT,
        (X,),
        tuner="compare-search",
        strategy="exhaustive",
        reference=lambda x: x.sum(),
        compare=_total_matches,
    )
    assert result.best.config.DROP == 0
    failed = {t.config.name: t.outcome.reason for t in result.trials if isinstance(t.outcome, tk.Failed)}
    assert failed == {
        "BLOCK=4,DROP=1": "output 0: compare=_total_matches returned False",
        "BLOCK=8,DROP=1": "output 0: compare=_total_matches returned False",
    }
    with pytest.raises(TypeError, match=r"tk.search\(outputs=, rtol=, atol=, compare=\) tune the correctness check"):
        tk.search(tk.Space(BLOCK=[4]), _partial_sums, CLIENT, (X,), tuner="compare-search", compare=_total_matches)
