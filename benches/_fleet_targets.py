"""The operation benches/fleet.py tunes on its Ray workers: row sums of real size on the CPU."""

from __future__ import annotations

from typing import Any

import numpy as np

import tunekit as tk
from tunekit_backends.cpu import CpuClient


@tk.autotune_key
class FleetKey:
    rows: int
    n: int


TUNER: tk.LocalTuner[FleetKey, Any] = tk.LocalTuner("fleet_row_sum")

ROW_SUM = tk.CampaignTarget(
    tuner=TUNER,
    tunables=lambda client: (
        tk.TunableSet(key=lambda x: FleetKey(rows=x.shape[0], n=x.shape[1]))
        .with_tunable(tk.Tunable("np_sum", lambda x: x.sum(axis=1)))
        .with_tunable(tk.Tunable("einsum", lambda x: np.einsum("ij->i", x)))
        .with_tunable(tk.Tunable("matvec", lambda x: x @ np.ones(x.shape[1], dtype=x.dtype)))
    ),
    inputs=lambda client, shape: (
        np.random.default_rng(0).random((int(shape["rows"]), int(shape["n"]))).astype(np.float32),
    ),
    clients={"cpu-numpy": CpuClient},
    shape=("rows", "n"),
)
