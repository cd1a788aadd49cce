"""Cache-hit overhead of ``TUNER.init`` + ``TUNER.execute`` against calling the winner directly.

Run: ``.venv/bin/python benches/dispatch.py`` (or ``make bench``). The operations are written as
user code writes them. The first rows are the ones the 1 µs target was set on: the README's first
example (``SumKey``: an anchored size and the array's dtype, ``dtype=x.dtype``), a three-field key
(two anchored sizes and the dtype), and the first on a tuner with the hit counter on
(``count_hits``; every other row runs with it off, its default, and with no record sink unless it
says so). The rows after them are a held-out suite of what a new user plausibly writes following
the README and the docs: other key styles (shape entries, bool/str/Literal/Enum flags, a numpy
integer for an int field, two dtypes, a named ``def`` as the key function, positional arguments,
a base-4 anchor), other call shapes (several inputs, two operations alternating, 1,000 hot keys
called in a shuffled order) and the docs' other ways to get the set (a named factory, a factory
capturing the client, a set built once at module level).

Their candidates return the input, so the winner costs what a no-op Python call costs and the
overhead is plain to see. Each path runs ``CALLS`` calls per round, the paths interleaved, over
``ROUNDS`` rounds; the table reports medians over rounds of the process's CPU time per call
(``time.process_time_ns``: time spent waiting for a shared CPU is not counted). Each path's
overhead is over the winner called directly in the same loop with the same arguments (its
"direct" twin, timed in the same rounds), and also given as a multiple of a no-op Python call, a
ratio that moves less than nanoseconds with the machine's load. Figures are host CPU figures:
dispatch is pure Python, no device is involved.
"""

from __future__ import annotations

import enum
import os
import random
import statistics
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from typing import Annotated, Any, Literal

import numpy as np
from rich.console import Console
from rich.table import Table

import tunekit as tk
from tunekit_backends.cpu import CpuClient

CALLS = 20_000
ROUNDS = 15
TARGET_NS = 1000
"""The issue's target: a cache hit costs at most this much over the direct call."""
MANY_KEYS = 1000


@tk.autotune_key
class SumKey:
    n: Annotated[int, tk.Anchor()]  # 1000 -> 1024: nearby sizes share one winner
    dtype: np.dtype  # x.dtype as it is: stored by name ("float32")


@tk.autotune_key
class RowsKey:
    n: Annotated[int, tk.Anchor()]
    rows: Annotated[int, tk.Anchor(max=4096)]
    dtype: np.dtype


TUNER: tk.LocalTuner[SumKey, np.ndarray] = tk.LocalTuner("dispatch_bench")
ROWS_TUNER: tk.LocalTuner[RowsKey, np.ndarray] = tk.LocalTuner("dispatch_bench_rows")
COUNTED_TUNER: tk.LocalTuner[SumKey, np.ndarray] = tk.LocalTuner("dispatch_bench_counted")


def _first(x: np.ndarray) -> np.ndarray:
    return x


def _second(x: np.ndarray) -> np.ndarray:
    return x


def row_sum(client: CpuClient, x: np.ndarray) -> np.ndarray:
    """The README's first example, with candidates that cost a no-op call."""
    tunables = TUNER.init(
        lambda: (
            tk.TunableSet(key=lambda x: SumKey(n=x.shape[1], dtype=x.dtype))
            .with_tunable(tk.Tunable("first", _first))
            .with_tunable(tk.Tunable("second", _second))
        )
    )
    return TUNER.execute(client.device_id, client, tunables, (x,))


def rows_op(client: CpuClient, x: np.ndarray) -> np.ndarray:
    """A three-field key: two anchored sizes and the dtype."""
    tunables = ROWS_TUNER.init(
        lambda: (
            tk.TunableSet(key=lambda x: RowsKey(n=x.shape[1], rows=x.shape[0], dtype=x.dtype))
            .with_tunable(tk.Tunable("first", _first))
            .with_tunable(tk.Tunable("second", _second))
        )
    )
    return ROWS_TUNER.execute(client.device_id, client, tunables, (x,))


def counted_sum(client: CpuClient, x: np.ndarray) -> np.ndarray:
    """The README's first example on a tuner that counts its hits (``count_hits`` on at its first call)."""
    tunables = COUNTED_TUNER.init(
        lambda: (
            tk.TunableSet(key=lambda x: SumKey(n=x.shape[1], dtype=x.dtype))
            .with_tunable(tk.Tunable("first", _first))
            .with_tunable(tk.Tunable("second", _second))
        )
    )
    return COUNTED_TUNER.execute(client.device_id, client, tunables, (x,))


def _noop(client: CpuClient, x: np.ndarray) -> np.ndarray:
    return x


def _winner(client: CpuClient, x: np.ndarray) -> np.ndarray:
    return _first(x)


# --- The held-out suite: key styles and call shapes the target was not set on. ---------------------


@tk.autotune_key
class ShapeKey:
    batch: Annotated[int, tk.Anchor()]
    m: Annotated[int, tk.Anchor()]
    n: Annotated[int, tk.Anchor()]
    dtype: np.dtype


SHAPE_TUNER: tk.LocalTuner[ShapeKey, np.ndarray] = tk.LocalTuner("dispatch_bench_shape")


def shape_op(client: CpuClient, x: np.ndarray) -> np.ndarray:
    """A key from three entries of ``x.shape``, each anchored."""
    tunables = SHAPE_TUNER.init(
        lambda: (
            tk.TunableSet(key=lambda x: ShapeKey(batch=x.shape[0], m=x.shape[1], n=x.shape[2], dtype=x.dtype))
            .with_tunable(tk.Tunable("first", _first))
            .with_tunable(tk.Tunable("second", _second))
        )
    )
    return SHAPE_TUNER.execute(client.device_id, client, tunables, (x,))


def shape_key(x: np.ndarray) -> ShapeKey:
    """A named key function that unpacks the shape."""
    batch, m, n = x.shape
    return ShapeKey(batch=batch, m=m, n=n, dtype=x.dtype)


SHAPE_DEF_TUNER: tk.LocalTuner[ShapeKey, np.ndarray] = tk.LocalTuner("dispatch_bench_shape_def")


def shape_def_op(client: CpuClient, x: np.ndarray) -> np.ndarray:
    """The shape key from a named ``def`` that unpacks ``x.shape``."""
    tunables = SHAPE_DEF_TUNER.init(
        lambda: (
            tk.TunableSet(key=shape_key)
            .with_tunable(tk.Tunable("first", _first))
            .with_tunable(tk.Tunable("second", _second))
        )
    )
    return SHAPE_DEF_TUNER.execute(client.device_id, client, tunables, (x,))


def sum_key(x: np.ndarray) -> SumKey:
    """The README's key, as a named function."""
    return SumKey(n=x.shape[1], dtype=x.dtype)


DEF_TUNER: tk.LocalTuner[SumKey, np.ndarray] = tk.LocalTuner("dispatch_bench_def")


def def_key_op(client: CpuClient, x: np.ndarray) -> np.ndarray:
    """The README's example with a named ``def`` as its key function."""
    tunables = DEF_TUNER.init(
        lambda: (
            tk.TunableSet(key=sum_key)
            .with_tunable(tk.Tunable("first", _first))
            .with_tunable(tk.Tunable("second", _second))
        )
    )
    return DEF_TUNER.execute(client.device_id, client, tunables, (x,))


POSITIONAL_TUNER: tk.LocalTuner[SumKey, np.ndarray] = tk.LocalTuner("dispatch_bench_positional")


def positional_op(client: CpuClient, x: np.ndarray) -> np.ndarray:
    """The README's key built with positional arguments."""
    tunables = POSITIONAL_TUNER.init(
        lambda: (
            tk.TunableSet(key=lambda x: SumKey(x.shape[1], x.dtype))
            .with_tunable(tk.Tunable("first", _first))
            .with_tunable(tk.Tunable("second", _second))
        )
    )
    return POSITIONAL_TUNER.execute(client.device_id, client, tunables, (x,))


@tk.autotune_key
class FlagKey:
    n: Annotated[int, tk.Anchor()]
    transpose: bool
    layout: str
    dtype: np.dtype


def _first3(x: np.ndarray, transpose: bool, layout: str) -> np.ndarray:
    return x


def _second3(x: np.ndarray, transpose: bool, layout: str) -> np.ndarray:
    return x


FLAG_TUNER: tk.LocalTuner[FlagKey, np.ndarray] = tk.LocalTuner("dispatch_bench_flags")


def flag_op(client: CpuClient, x: np.ndarray, transpose: bool, layout: str) -> np.ndarray:
    """Three inputs: the array and two flags, a bool and a str, both key fields."""
    tunables = FLAG_TUNER.init(
        lambda: (
            tk.TunableSet(
                key=lambda x, transpose, layout: FlagKey(
                    n=x.shape[1], transpose=transpose, layout=layout, dtype=x.dtype
                )
            )
            .with_tunable(tk.Tunable("first", _first3))
            .with_tunable(tk.Tunable("second", _second3))
        )
    )
    return FLAG_TUNER.execute(client.device_id, client, tunables, (x, transpose, layout))


def _direct3(client: CpuClient, x: np.ndarray, transpose: bool, layout: str) -> np.ndarray:
    return _first3(x, transpose, layout)


@tk.autotune_key
class LiteralKey:
    n: Annotated[int, tk.Anchor()]
    layout: Literal["row", "col"]
    dtype: np.dtype


def _first2(x: np.ndarray, other: Any) -> np.ndarray:
    return x


def _second2(x: np.ndarray, other: Any) -> np.ndarray:
    return x


def _direct2(client: CpuClient, x: np.ndarray, other: Any) -> np.ndarray:
    return _first2(x, other)


LITERAL_TUNER: tk.LocalTuner[LiteralKey, np.ndarray] = tk.LocalTuner("dispatch_bench_literal")


def literal_op(client: CpuClient, x: np.ndarray, layout: Literal["row", "col"]) -> np.ndarray:
    """A ``Literal["row", "col"]`` field given a str input."""
    tunables = LITERAL_TUNER.init(
        lambda: (
            tk.TunableSet(key=lambda x, layout: LiteralKey(n=x.shape[1], layout=layout, dtype=x.dtype))
            .with_tunable(tk.Tunable("first", _first2))
            .with_tunable(tk.Tunable("second", _second2))
        )
    )
    return LITERAL_TUNER.execute(client.device_id, client, tunables, (x, layout))


class Layout(enum.Enum):
    ROW = "row"
    COL = "col"


@tk.autotune_key
class EnumKey:
    n: Annotated[int, tk.Anchor()]
    layout: Layout
    dtype: np.dtype


ENUM_TUNER: tk.LocalTuner[EnumKey, np.ndarray] = tk.LocalTuner("dispatch_bench_enum")
ENUM_VALUE_TUNER: tk.LocalTuner[EnumKey, np.ndarray] = tk.LocalTuner("dispatch_bench_enum_value")


def enum_op(client: CpuClient, x: np.ndarray, layout: Layout) -> np.ndarray:
    """An Enum field given a member."""
    tunables = ENUM_TUNER.init(
        lambda: (
            tk.TunableSet(key=lambda x, layout: EnumKey(n=x.shape[1], layout=layout, dtype=x.dtype))
            .with_tunable(tk.Tunable("first", _first2))
            .with_tunable(tk.Tunable("second", _second2))
        )
    )
    return ENUM_TUNER.execute(client.device_id, client, tunables, (x, layout))


def enum_value_op(client: CpuClient, x: np.ndarray, layout: str) -> np.ndarray:
    """An Enum field given a member's value (a str), which the key takes as the member."""
    tunables = ENUM_VALUE_TUNER.init(
        lambda: (
            tk.TunableSet(key=lambda x, layout: EnumKey(n=x.shape[1], layout=layout, dtype=x.dtype))
            .with_tunable(tk.Tunable("first", _first2))
            .with_tunable(tk.Tunable("second", _second2))
        )
    )
    return ENUM_VALUE_TUNER.execute(client.device_id, client, tunables, (x, layout))


@tk.autotune_key
class SplitKey:
    n: Annotated[int, tk.Anchor()]
    k: Annotated[int, tk.Anchor()]
    dtype: np.dtype


NP_INT_TUNER: tk.LocalTuner[SplitKey, np.ndarray] = tk.LocalTuner("dispatch_bench_np_int")


def np_int_op(client: CpuClient, x: np.ndarray, k: Any) -> np.ndarray:
    """An anchored int field given a numpy integer (``np.int64``, as indexing an int array gives)."""
    tunables = NP_INT_TUNER.init(
        lambda: (
            tk.TunableSet(key=lambda x, k: SplitKey(n=x.shape[1], k=k, dtype=x.dtype))
            .with_tunable(tk.Tunable("first", _first2))
            .with_tunable(tk.Tunable("second", _second2))
        )
    )
    return NP_INT_TUNER.execute(client.device_id, client, tunables, (x, k))


PY_INT_TUNER: tk.LocalTuner[SplitKey, np.ndarray] = tk.LocalTuner("dispatch_bench_py_int")


def py_int_op(client: CpuClient, x: np.ndarray, k: int) -> np.ndarray:
    """The same key given a Python int: the numpy row's reference."""
    tunables = PY_INT_TUNER.init(
        lambda: (
            tk.TunableSet(key=lambda x, k: SplitKey(n=x.shape[1], k=k, dtype=x.dtype))
            .with_tunable(tk.Tunable("first", _first2))
            .with_tunable(tk.Tunable("second", _second2))
        )
    )
    return PY_INT_TUNER.execute(client.device_id, client, tunables, (x, k))


@tk.autotune_key
class CastKey:
    n: Annotated[int, tk.Anchor()]
    in_dtype: np.dtype
    out_dtype: np.dtype


CAST_TUNER: tk.LocalTuner[CastKey, np.ndarray] = tk.LocalTuner("dispatch_bench_cast")


def cast_op(client: CpuClient, x: np.ndarray, out: np.ndarray) -> np.ndarray:
    """Two dtypes in the key: the input's and the output buffer's."""
    tunables = CAST_TUNER.init(
        lambda: (
            tk.TunableSet(key=lambda x, out: CastKey(n=x.shape[1], in_dtype=x.dtype, out_dtype=out.dtype))
            .with_tunable(tk.Tunable("first", _first2))
            .with_tunable(tk.Tunable("second", _second2))
        )
    )
    return CAST_TUNER.execute(client.device_id, client, tunables, (x, out))


@tk.autotune_key
class QuickRowsKey:
    n: Annotated[int, tk.Anchor()]
    rows: Annotated[int, tk.Anchor(base=4, max=4096)]
    dtype: np.dtype


BASE4_TUNER: tk.LocalTuner[QuickRowsKey, np.ndarray] = tk.LocalTuner("dispatch_bench_base4")


def base4_op(client: CpuClient, x: np.ndarray) -> np.ndarray:
    """docs/quickstart.md's ``RowsKey``: its ``rows`` anchored to powers of 4."""
    tunables = BASE4_TUNER.init(
        lambda: (
            tk.TunableSet(key=lambda x: QuickRowsKey(n=x.shape[1], rows=x.shape[0], dtype=x.dtype))
            .with_tunable(tk.Tunable("first", _first))
            .with_tunable(tk.Tunable("second", _second))
        )
    )
    return BASE4_TUNER.execute(client.device_id, client, tunables, (x,))


SHARED_TUNER: tk.LocalTuner[Any, np.ndarray] = tk.LocalTuner("dispatch_bench_shared")


def shared_sum(client: CpuClient, x: np.ndarray) -> np.ndarray:
    """One of two operations on one tuner (two sets), called alternately."""
    tunables = SHARED_TUNER.init(
        lambda: (
            tk.TunableSet(key=lambda x: SumKey(n=x.shape[1], dtype=x.dtype))
            .with_tunable(tk.Tunable("first", _first))
            .with_tunable(tk.Tunable("second", _second))
        )
    )
    return SHARED_TUNER.execute(client.device_id, client, tunables, (x,))


def shared_rows(client: CpuClient, x: np.ndarray) -> np.ndarray:
    """The other operation on the shared tuner."""
    tunables = SHARED_TUNER.init(
        lambda: (
            tk.TunableSet(key=lambda x: RowsKey(n=x.shape[1], rows=x.shape[0], dtype=x.dtype))
            .with_tunable(tk.Tunable("first", _first))
            .with_tunable(tk.Tunable("second", _second))
        )
    )
    return SHARED_TUNER.execute(client.device_id, client, tunables, (x,))


@tk.autotune_key
class ExactKey:
    n: int  # unanchored: every size its own key
    dtype: np.dtype


MANY_TUNER: tk.LocalTuner[ExactKey, np.ndarray] = tk.LocalTuner("dispatch_bench_many")


def many_op(client: CpuClient, x: np.ndarray) -> np.ndarray:
    """A tuner holding ``MANY_KEYS`` keys, called in a shuffled order."""
    tunables = MANY_TUNER.init(
        lambda: (
            tk.TunableSet(key=lambda x: ExactKey(n=x.shape[1], dtype=x.dtype))
            .with_tunable(tk.Tunable("first", _first))
            .with_tunable(tk.Tunable("second", _second))
        )
    )
    return MANY_TUNER.execute(client.device_id, client, tunables, (x,))


NAMED_TUNER: tk.LocalTuner[SumKey, np.ndarray] = tk.LocalTuner("dispatch_bench_named_factory")


def _candidates() -> tk.TunableSet[SumKey, np.ndarray]:
    return (
        tk.TunableSet(key=lambda x: SumKey(n=x.shape[1], dtype=x.dtype))
        .with_tunable(tk.Tunable("first", _first))
        .with_tunable(tk.Tunable("second", _second))
    )


def named_factory_op(client: CpuClient, x: np.ndarray) -> np.ndarray:
    """docs/libraries.md's style: ``TUNER.init(_candidates)``, a named module-level factory."""
    tunables = NAMED_TUNER.init(_candidates)
    return NAMED_TUNER.execute(client.device_id, client, tunables, (x,))


CAPTURE_TUNER: tk.LocalTuner[SumKey, np.ndarray] = tk.LocalTuner("dispatch_bench_capture")


def tunable_set(client: CpuClient) -> tk.TunableSet[SumKey, np.ndarray]:
    return (
        tk.TunableSet(key=lambda x: SumKey(n=x.shape[1], dtype=x.dtype))
        .with_tunable(tk.Tunable("first", _first))
        .with_tunable(tk.Tunable("second", _second))
    )


def capture_op(client: CpuClient, x: np.ndarray) -> np.ndarray:
    """docs/concepts.md's style: ``TUNER.init(lambda: tunable_set(client))``, one set per client."""
    tunables = CAPTURE_TUNER.init(lambda: tunable_set(client))
    return CAPTURE_TUNER.execute(client.device_id, client, tunables, (x,))


MODULE_TUNER: tk.LocalTuner[SumKey, np.ndarray] = tk.LocalTuner("dispatch_bench_module_set")
MODULE_SET = _candidates()


def module_set_op(client: CpuClient, x: np.ndarray) -> np.ndarray:
    """docs/concepts.md's first snippet: a set built once at module level, passed to ``execute`` (no ``init``)."""
    return MODULE_TUNER.execute(client.device_id, client, MODULE_SET, (x,))


SINK_RECORDS: list[tk.AutotuneRecord] = []
SINK_TUNER: tk.LocalTuner[SumKey, np.ndarray] = tk.LocalTuner("dispatch_bench_sink", sinks=[SINK_RECORDS.append])


def sink_op(client: CpuClient, x: np.ndarray) -> np.ndarray:
    """The README's example on a tuner with a record sink (a hit writes no record)."""
    tunables = SINK_TUNER.init(
        lambda: (
            tk.TunableSet(key=lambda x: SumKey(n=x.shape[1], dtype=x.dtype))
            .with_tunable(tk.Tunable("first", _first))
            .with_tunable(tk.Tunable("second", _second))
        )
    )
    return SINK_TUNER.execute(client.device_id, client, tunables, (x,))


def _per_call_ns(fn: Callable[[CpuClient, np.ndarray], Any], client: CpuClient, x: np.ndarray, calls: int) -> float:
    start = time.process_time_ns()
    for _ in range(calls):
        fn(client, x)
    return (time.process_time_ns() - start) / calls


Call = tuple[Callable[..., Any], tuple[Any, ...]]
"""One call of a held-out path: the function, and the arguments after the client."""


def _per_call_ns_seq(calls: Sequence[Call], client: CpuClient) -> float:
    """CPU time per call over ``calls``, which may vary the function and the inputs from call to call."""
    start = time.process_time_ns()
    for fn, args in calls:
        fn(client, *args)
    return (time.process_time_ns() - start) / len(calls)


def _held_out(client: CpuClient, calls: int) -> dict[str, tuple[list[Call], list[Call]]]:
    """Each held-out path's calls and its direct twin's (the winner called with the same arguments)."""
    x = np.ones((64, 1000), dtype=np.float32)
    x3 = np.ones((4, 64, 1000), dtype=np.float32)
    out = np.empty((64, 1000), dtype=np.float64)
    ks = np.array([100, 200, 300])
    one = {
        "shape key: 3 anchored dims + dtype, x.shape[i] in a lambda": (shape_op, x3),
        "shape key from a def unpacking x.shape": (shape_def_op, x3),
        "README key from a named def": (def_key_op, x),
        "README key, positional arguments": (positional_op, x),
        "quickstart RowsKey: Anchor(base=4, max=4096)": (base4_op, x),
        "factory: named def (docs/libraries.md)": (named_factory_op, x),
        "factory: lambda capturing the client (docs/concepts.md)": (capture_op, x),
        "set built at module level, no init (docs/concepts.md)": (module_set_op, x),
        "README example, record sink on the tuner": (sink_op, x),
    }
    paths: dict[str, tuple[list[Call], list[Call]]] = {
        name: ([(fn, (arg,))] * calls, [(_winner, (arg,))] * calls) for name, (fn, arg) in one.items()
    }
    two: dict[str, tuple[Callable[..., Any], Any, Any]] = {
        "Literal['row', 'col'] field, given 'row'": (literal_op, x, "row"),
        "Enum field, given a member": (enum_op, x, Layout.ROW),
        "Enum field, given its value 'row'": (enum_value_op, x, "row"),
        "anchored int field, given a Python int": (py_int_op, x, 200),
        "anchored int field, given np.int64 (ks[1])": (np_int_op, x, ks[1]),
        "two dtypes (x.dtype, out.dtype)": (cast_op, x, out),
    }
    for name, (fn, first, second) in two.items():
        paths[name] = ([(fn, (first, second))] * calls, [(_direct2, (first, second))] * calls)
    paths["bool + str flag fields (x, transpose=True, layout='row')"] = (
        [(flag_op, (x, True, "row"))] * calls,
        [(_direct3, (x, True, "row"))] * calls,
    )
    alternating = [(shared_sum, (x,)), (shared_rows, (x,))] * (calls // 2)
    paths["two operations on one tuner, alternating"] = (alternating, [(_winner, (x,))] * len(alternating))
    sizes = [np.ones((1, n), dtype=np.float32) for n in range(1, MANY_KEYS + 1)]
    order = [sizes[i % MANY_KEYS] for i in range(calls)]
    random.Random(0).shuffle(order)
    paths[f"{MANY_KEYS:,} keys hot, hits spread (shuffled)"] = (
        [(many_op, (a,)) for a in order],
        [(_winner, (a,)) for a in order],
    )
    # Every key's winner installed once, without measuring (autotuning off: the first candidate wins, and
    # stays the winner while autotuning is off), so that 1,000 keys take a second, not minutes; a hit
    # reads the same table either way. Autotuning stays off for the rest of the run.
    tk.configure(autotune=False)
    for path, _ in paths.values():
        for fn, args in path[:2]:
            fn(client, *args)
    for a in sizes:
        many_op(client, a)
    return paths


def main() -> None:
    """Print the overhead table."""
    calls = int(sys.argv[1]) if len(sys.argv) > 1 else CALLS
    client = CpuClient()
    with tempfile.TemporaryDirectory() as cache_dir:
        os.environ["TUNEKIT_CACHE_DIR"] = cache_dir
        tk.configure()
        x = np.ones((64, 1000), dtype=np.float32)
        row_sum(client, x)  # tune once; every later call is a cache hit
        rows_op(client, x)
        # The hit counter is chosen when a tuner first runs on a device: on for this tuner alone.
        tk.configure(count_hits=True)
        counted_sum(client, x)
        tk.configure()
        held_out = _held_out(client, calls)
        paths: dict[str, Callable[[CpuClient, np.ndarray], Any]] = {
            "no-op Python call": _noop,
            "winner called directly": _winner,
            "README example (SumKey: n, dtype)": row_sum,
            "three-field key (n, rows, dtype)": rows_op,
            "README example, count_hits on": counted_sum,
        }
        times: dict[str, list[float]] = {name: [] for name in paths}
        twin_times: dict[str, list[float]] = {name: [] for name in held_out}
        times.update({name: [] for name in held_out})
        for _ in range(ROUNDS):
            for name, fn in paths.items():
                times[name].append(_per_call_ns(fn, client, x, calls))
            for name, (path, direct_path) in held_out.items():
                times[name].append(_per_call_ns_seq(path, client))
                twin_times[name].append(_per_call_ns_seq(direct_path, client))
        median = {name: statistics.median(t) for name, t in times.items()}
        twin = {name: statistics.median(t) for name, t in twin_times.items()}
        noop, direct = median["no-op Python call"], median["winner called directly"]
        table = Table(
            title=f"cache-hit dispatch on {client.device_id}: median of {ROUNDS} rounds x {calls} calls, CPU time"
        )
        for column in ("path", "ns / call", "overhead ns / call", "overhead in no-op calls", f"<= {TARGET_NS} ns"):
            table.add_column(column, justify="right")
        for name, ns in median.items():
            through = name not in ("no-op Python call", "winner called directly")
            overhead = ns - twin.get(name, direct)
            table.add_row(
                name,
                f"{ns:.0f}",
                f"{overhead:.0f}" if through else "-",
                f"{overhead / noop:.1f}x" if through else "-",
                ("yes" if overhead <= TARGET_NS else "NO") if through else "-",
            )
            if name == "README example, count_hits on":
                table.add_section()
        Console(width=140).print(table)


if __name__ == "__main__":
    main()
