"""Matrix multiply: BLAS against blocked and einsum formulations, tuned per shape bucket."""

from __future__ import annotations

from typing import Annotated

import numpy as np

import tunekit as tk
from tunekit_backends.cpu import CpuClient


@tk.autotune_key
class MatmulKey:
    m: Annotated[int, tk.Anchor(max=2048)]
    n: Annotated[int, tk.Anchor(max=2048)]
    k: Annotated[int, tk.Anchor(max=2048)]
    dtype: np.dtype  # takes x.dtype; stored by name


TUNER: tk.LocalTuner[MatmulKey, np.ndarray] = tk.LocalTuner("matmul")


def _blocked(block: int) -> tk.Tunable[np.ndarray]:
    def run(a: np.ndarray, b: np.ndarray) -> np.ndarray:
        out = np.zeros((a.shape[0], b.shape[1]), dtype=np.result_type(a, b))
        for start in range(0, a.shape[1], block):
            out += a[:, start : start + block] @ b[start : start + block, :]
        return out

    return tk.Tunable(f"blocked[K={block}]", run)


def _inputs(key: MatmulKey, a: np.ndarray, b: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(0)
    return rng.random((key.m, key.k)).astype(key.dtype), rng.random((key.k, key.n)).astype(key.dtype)


def matmul(client: CpuClient, a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """``a @ b`` by the formulation that measured fastest for this shape bucket."""
    tunables = TUNER.init(
        lambda: (
            tk.TunableSet(
                key=lambda a, b: MatmulKey(m=a.shape[0], n=b.shape[1], k=a.shape[1], dtype=a.dtype),
                inputs=_inputs,
            )
            .with_tunable(tk.Tunable("matmul", np.matmul))
            .with_tunable(tk.Tunable("einsum", lambda a, b: np.einsum("ik,kj->ij", a, b)))
            .with_tunables([_blocked(64), _blocked(256)])
        )
    )
    return TUNER.execute(client.device_id, client, tunables, (a, b))


if __name__ == "__main__":
    client = CpuClient()
    rng = np.random.default_rng(1)
    a, b = rng.random((200, 300)), rng.random((300, 100))
    np.testing.assert_allclose(matmul(client, a, b), a @ b, rtol=1e-9)
    print("matmul ok on", client.device_id)
