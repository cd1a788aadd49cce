"""Row sums: the README example, three numpy formulations tuned per shape bucket."""

from __future__ import annotations

from typing import Annotated

import numpy as np

import tunekit as tk
from tunekit_backends.cpu import CpuClient


@tk.autotune_key
class SumKey:
    n: Annotated[int, tk.Anchor()]
    rows: Annotated[int, tk.Anchor(base=4, max=4096)]
    dtype: np.dtype  # takes x.dtype; stored by name


TUNER: tk.LocalTuner[SumKey, np.ndarray] = tk.LocalTuner("row_sum")
FAST = tk.TuneGroup("fast", lambda key: 2 if key.n >= 4096 else 0)


def _matvec(x: np.ndarray) -> np.ndarray:
    return x @ np.ones(x.shape[1], dtype=x.dtype)


def row_sum(client: CpuClient, x: np.ndarray) -> np.ndarray:
    """Sum each row of ``x`` with the fastest formulation for its shape on this CPU."""
    tunables = TUNER.init(
        lambda: (
            tk.TunableSet(
                key=lambda x: SumKey(n=x.shape[1], rows=x.shape[0], dtype=x.dtype),
                inputs=lambda key, x: (np.random.default_rng(0).random((key.rows, key.n)).astype(key.dtype),),
            )
            .with_tunable(tk.Tunable("np_sum", lambda x: x.sum(axis=1)))
            .with_tunable(tk.Tunable("einsum", lambda x: np.einsum("ij->i", x)).group(FAST, lambda key: 1))
            .with_tunable(tk.Tunable("matvec", _matvec).group(FAST, lambda key: 1))
        )
    )
    return TUNER.execute(client.device_id, client, tunables, (x,))


if __name__ == "__main__":
    client = CpuClient()
    data = np.random.default_rng(1).random((300, 5000)).astype(np.float32)
    np.testing.assert_allclose(row_sum(client, data), data.sum(axis=1), rtol=1e-4)
    print("row_sum ok on", client.device_id)
