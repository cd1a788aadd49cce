"""A cache hit runs the stored winner whatever the key's style: the held-out styles of benches/dispatch.py."""

from __future__ import annotations

import enum
from collections.abc import Callable
from typing import Annotated, Any, Literal

import numpy as np
import pytest

import tunekit as tk
from tunekit_backends.cpu import CpuClient


class Layout(enum.Enum):
    ROW = "row"
    COL = "col"


@tk.autotune_key
class StyleKey:
    n: Annotated[int, tk.Anchor()]
    rows: Annotated[int, tk.Anchor(base=4, max=4096)]
    k: int
    layout: Layout
    order: Literal["C", "F"]
    transpose: bool
    dtype: np.dtype
    out_dtype: np.dtype


def _key(x: np.ndarray, k: Any, layout: Any, order: Any, transpose: Any, out: np.ndarray) -> StyleKey:
    return StyleKey(
        n=x.shape[1], rows=x.shape[0], k=k, layout=layout, order=order, transpose=transpose, dtype=x.dtype,
        out_dtype=out.dtype,
    )  # fmt: skip


def _candidate(tag: str) -> Callable[..., str]:
    return lambda *inputs: tag


def _set(context: object) -> tk.TunableSet[StyleKey, str]:
    return (
        tk.TunableSet(key=_key)
        .with_tunable(tk.Tunable("a", _candidate("a")))
        .with_tunable(tk.Tunable("b", _candidate("b")))
    )


@pytest.mark.parametrize("factory_style", ["plain", "capturing"])
def test_every_style_of_the_same_key_hits_the_one_stored_winner(factory_style: str) -> None:
    """Values that build one key (np.int64 for an int, a member's value, 1000 for bucket 1024) tune it once."""
    records: list[tk.AutotuneRecord] = []
    tuner: tk.LocalTuner[StyleKey, str] = tk.LocalTuner(f"hit_styles_{factory_style}", sinks=[records.append])
    client = CpuClient()
    context = object()

    def op(*inputs: Any) -> str:
        # A lambda capturing nothing, or one capturing an object (as docs/concepts.md's captures the client).
        tunables = tuner.init(lambda: _set(None)) if factory_style == "plain" else tuner.init(lambda: _set(context))
        return tuner.execute(client.device_id, client, tunables, inputs)

    x, out = np.ones((60, 1000), dtype=np.float32), np.empty(1, dtype=np.float64)
    first = op(x, 7, Layout.ROW, "C", True, out)
    tunables = tuner.init(lambda: _set(None)) if factory_style == "plain" else None
    assert len(records) == 1 and first == records[0].winner
    ks = np.array([7, 8])
    same_key = [
        (x, ks[0], Layout.ROW, "C", True, out),  # np.int64 for the int field
        (x, 7, "row", "C", True, out),  # the Enum member's value
        (x, np.int32(7), "row", np.str_("C"), np.True_, out),  # numpy scalars throughout
        (np.ones((64, 1024), dtype=np.float32), 7, Layout.ROW, "C", True, out),  # the same buckets
    ]
    for _ in range(3):
        for inputs in same_key:
            assert op(*inputs) == first
    assert len(records) == 1  # every one of them was a hit
    op(x, ks[1], Layout.ROW, "C", True, out)  # another k: another key, tuned
    op(x, 7, Layout.COL, "F", False, np.empty(1, dtype=np.float32))
    assert len(records) == 3
    if tunables is not None:
        winner = tuner.winner(client.device_id, tunables, inputs=(x, 7, "row", "C", True, out))
        assert winner is not None and winner.name == first
