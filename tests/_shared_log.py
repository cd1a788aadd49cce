"""A set searched inside execute with a trial log, run as a process: ``python _shared_log.py LOG GATE``.

test_trials.py starts two of these on one new key with the cache off (no tune lock between them):
the first holds the log while it measures, stopped at its first candidate run until ``GATE/go``
exists (it makes ``GATE/started`` there), and the second must wait for it, then resume its trials.
Prints the search's SearchEnded event of the one tune as JSON; logs the tunekit INFO lines on stderr.
"""

from __future__ import annotations

import logging
import sys
import time
from pathlib import Path
from typing import Annotated, Any

import numpy as np

import tunekit as tk
from tunekit_backends.cpu import CpuClient

MAX_EVALS = 3


@tk.autotune_key
class RowKey:
    n: Annotated[int, tk.Anchor()]


def main(log: str, gate: Path) -> None:
    logging.basicConfig(level=logging.INFO, stream=sys.stderr, format="%(name)s %(levelname)s %(message)s")

    def build(config: tk.Config) -> Any:
        def row_sum(x: np.ndarray) -> np.ndarray:
            if not (gate / "go").exists():
                (gate / "started").touch()
                deadline = time.monotonic() + 120
                while not (gate / "go").exists() and time.monotonic() < deadline:
                    time.sleep(0.01)
            return np.asarray(x[:, :: config.STEP].sum(axis=1))

        return row_sum

    space = tk.Space(STEP=[1, 2, 3, 4])
    records: list[tk.AutotuneRecord] = []
    tuner: tk.LocalTuner[RowKey, Any] = tk.LocalTuner("rows", sinks=[records.append])
    client = CpuClient()
    tunables = tuner.init(
        lambda: tk.TunableSet.from_space(space, build, key=lambda x: RowKey(n=x.shape[1])).with_search(
            max_evals=MAX_EVALS, seed=0, log=log
        )
    )
    tuner.execute(client.device_id, client, tunables, (np.ones((4, 1000)),))
    (record,) = records
    (ended,) = [event for event in record.events if event.kind == "search"]
    print(ended.model_dump_json())


if __name__ == "__main__":
    main(sys.argv[1], Path(sys.argv[2]))
