from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import pytest

import tunekit as tk
from tunekit._candidates.plan import skip_reason


@tk.autotune_key
class Key:
    n: int


KEY = Key(n=1)


def _noop(*_: Any) -> None:
    return None


def _t(name: str) -> tk.Tunable[None]:
    return tk.Tunable(name, _noop)


def _names(tunables: list[tk.Tunable[None]], key: object) -> list[list[str]]:
    return [[tunables[i].name for i in batch] for batch in tk.plan_batches(key, tunables)]


def _const(value: int) -> Callable[[object], int]:
    return lambda _key: value


def test_ungrouped_only_is_one_batch() -> None:
    assert _names([_t("a"), _t("b")], KEY) == [["a", "b"]]


def test_first_batch_is_ungrouped_plus_top_tier_of_top_group() -> None:
    hi, lo = tk.TuneGroup("hi", _const(2)), tk.TuneGroup("lo", _const(1))
    tunables = [
        _t("plain"),
        _t("hi_top").group(hi, _const(5)),
        _t("hi_low").group(hi, _const(1)),
        _t("lo_top").group(lo, _const(9)),
        _t("hi_top2").group(hi, _const(5)),
    ]
    assert _names(tunables, KEY) == [["plain", "hi_top", "hi_top2"], ["hi_low"], ["lo_top"]]


def test_negative_priority_skips() -> None:
    skip = tk.TuneGroup("skip", _const(-1))
    keep = tk.TuneGroup("keep", _const(0))
    tunables = [_t("a").group(skip, _const(3)), _t("b").group(keep, _const(-2)), _t("c").group(keep, _const(0))]
    assert _names(tunables, KEY) == [["c"]]


def test_priority_depends_on_key() -> None:
    fast = tk.TuneGroup("fast", lambda key: 2 if key.n >= 4096 else -1)
    tunables = [_t("base"), _t("wide").group(fast, _const(1))]
    assert _names(tunables, Key(n=8192)) == [["base", "wide"]]
    assert _names(tunables, Key(n=64)) == [["base"]]


def test_tunable_in_two_groups_is_planned_once() -> None:
    g1, g2 = tk.TuneGroup("g1", _const(2)), tk.TuneGroup("g2", _const(1))
    tunables = [_t("both").group(g1, _const(0)).group(g2, _const(0)), _t("only2").group(g2, _const(0))]
    assert _names(tunables, KEY) == [["both"], ["only2"]]


@pytest.mark.parametrize("returned", [-0.5, "5", "high", None, False, 1.0])
def test_a_priority_that_is_not_an_int_is_refused_naming_the_group(returned: object) -> None:
    # int() converted it: -0.5 became 0, so a candidate meant to be skipped ran; "high" failed naming no group.
    grouped = _t("g").group(tk.TuneGroup("wide", _const(1)), lambda _key: returned)  # type: ignore[arg-type,return-value]
    with pytest.raises(
        TypeError, match=r"tunable 'g'.*group 'wide' returned .*not an int.*negative one \(-1\) to skip"
    ):
        tk.plan_batches(KEY, [grouped])
    lost = _t("h").group(tk.TuneGroup("lost", lambda _key: returned), _const(0))  # type: ignore[arg-type,return-value]
    with pytest.raises(TypeError, match=r"the priority of TuneGroup 'lost' returned"):
        tk.plan_batches(KEY, [lost])


def test_a_numpy_integer_priority_is_an_int() -> None:
    grouped = _t("g").group(tk.TuneGroup("np", lambda _key: np.int64(-1)), _const(0))
    assert _names([_t("a"), grouped], KEY) == [["a"]]


def test_the_plan_of_a_tunable_set_is_the_plan_of_its_tunables() -> None:
    """tk.plan_batches(key, tunable_set), as the docs write it, failed: "'TunableSet' object is not iterable"."""
    late = _t("late").group(tk.TuneGroup("later", _const(0)), _const(0))
    tunables = tk.TunableSet(key=lambda: KEY).with_tunables([_t("a"), late])
    assert tk.plan_batches(KEY, tunables) == tk.plan_batches(KEY, tunables.tunables) == [[0, 1]]


def test_a_priority_function_that_raises_is_named_with_the_key() -> None:
    # Regression: its exception came out bare, naming neither the group nor the key.
    lost = _t("h").group(tk.TuneGroup("lost", lambda key: {}["missing"]), _const(0))
    with pytest.raises(KeyError) as raised:
        tk.plan_batches(KEY, [lost])
    assert raised.value.__notes__ == [f"tunekit: raised by the priority of TuneGroup 'lost' for key {KEY!r}"]
    within = _t("w").group(tk.TuneGroup("wide", _const(1)), lambda key: 1 // (key.n - 1))
    with pytest.raises(ZeroDivisionError) as divided:
        tk.plan_batches(KEY, [within])
    assert f"tunable 'w''s priority within group 'wide' for key {KEY!r}" in divided.value.__notes__[0]


def test_a_group_name_that_is_no_str_is_refused() -> None:
    # Regression: TuneGroup(3, fn) was accepted, and messages then named "TuneGroup 3".
    for name in (3, "", None):
        with pytest.raises(ValueError, match=rf"TuneGroup needs a non-empty str name, got {name!r}"):
            tk.TuneGroup(name, _const(0))  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("given", "said"),
    [
        (1024, r"got int 1024, not an @tk.autotune_key instance"),
        ({"n": 1}, r"got dict \{'n': 1\}, not an @tk.autotune_key instance"),
        (None, r"got NoneType None, not an @tk.autotune_key instance"),
        (Key, r"got the class Key itself, not an instance of it \(Key\(n=...\)\)"),
    ],
)
def test_a_key_that_is_no_autotune_key_is_refused_saying_what_to_pass(given: object, said: str) -> None:
    """Regression: plan_batches took any object as its key and planned for a key no tune ever sees."""
    with pytest.raises(TypeError, match=said + r".*e\.g\. tk\.plan_batches\(tunables\.key\(\*inputs\), tunables\)"):
        tk.plan_batches(given, [_t("a")])


def test_the_set_passed_as_the_key_is_refused_saying_the_key_comes_first() -> None:
    tunables = tk.TunableSet(key=lambda: KEY).with_tunable(_t("a"))
    with pytest.raises(TypeError, match=r"got the TunableSet as its key: the key comes first"):
        tk.plan_batches(tunables, tunables)


class _EvenOnly:
    """A priority function that says why it skips, as KernelTemplate's applies= does."""

    def __call__(self, key: Key) -> int:
        return 0 if key.n % 2 == 0 else -1

    def why_skipped(self, key: Key) -> str:
        return f"{key.n} is odd"


def test_a_skip_is_explained_by_the_priority_function_that_skipped_it() -> None:
    group = tk.TuneGroup("g", _const(0))
    explained, plain = _t("even").group(group, _EvenOnly()), _t("plain").group(group, _const(-1))
    assert skip_reason(Key(n=3), explained) == "3 is odd"
    assert skip_reason(Key(n=3), plain) == "negative priority for this key"
    assert _names([explained, plain], Key(n=3)) == [] and _names([explained, plain], Key(n=2)) == [["even"]]


def test_a_tunable_in_two_groups_of_one_tier_is_planned_once() -> None:
    """It was listed twice in its batch, so the batch held more indices than the set had candidates."""
    first, second = tk.TuneGroup("first", _const(1)), tk.TuneGroup("second", _const(1))
    both = _t("both").group(first, _const(0)).group(second, _const(0))
    assert tk.plan_batches(KEY, [both, _t("plain")]) == [[1, 0]]
