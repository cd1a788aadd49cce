"""NoValidKernelFound's message: one line per reason, however many candidates share it."""

from __future__ import annotations

import pickle

import tunekit as tk


def _refused(name: str) -> tuple[str, str]:
    return name, f"InputTypeError: {name}: argument 0 (x) is a pyopencl array of float64, but the kernel reads float32"


def test_candidates_failing_for_one_reason_share_one_line_naming_the_others() -> None:
    failures = [_refused(f"blur[TX={t}]") for t in (1, 2, 4, 8, 16, 32, 64, 128, 256)]
    failures.insert(3, ("np_sum", "ValueError: too small"))
    error = tk.NoValidKernelFound("blur", None, failures)
    lines = str(error).splitlines()
    assert lines[1] == f"  - {failures[0][0]}: {failures[0][1]}"
    assert lines[2] == (
        "    the same for 8 more: blur[TX=2], blur[TX=4], blur[TX=8], blur[TX=16], blur[TX=32], blur[TX=64] and 2 more"
    )
    assert lines[3] == "  - np_sum: ValueError: too small"  # a different reason keeps its own line, in order
    assert len(lines) == 4
    assert error.failures == tuple(failures)  # every one is still there to read


def test_reasons_that_differ_beyond_the_name_are_not_grouped() -> None:
    failures = [("a", "ValueError: n=1"), ("b", "ValueError: n=2"), ("c", "ValueError: n=1")]
    lines = str(tk.NoValidKernelFound("t", None, failures)).splitlines()[1:]
    assert lines == ["  - a: ValueError: n=1", "    the same for 1 more: c", "  - b: ValueError: n=2"]


def test_the_cap_counts_candidates_not_groups_and_the_error_pickles() -> None:
    failures = [(f"c{i}", f"ValueError: {i}") for i in range(tk.NoValidKernelFound.SHOWN + 5)]
    failures += [_refused(f"v{i}") for i in range(3)]
    error = tk.NoValidKernelFound("t", None, failures)
    assert str(error).splitlines()[-1] == "  ... and 8 more (all of them in the error's .failures)"
    assert str(pickle.loads(pickle.dumps(error))) == str(error)
