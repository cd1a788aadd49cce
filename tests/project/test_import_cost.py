"""Importing tunekit for the README's first example loads no search, OpenCL, OpenTelemetry or Optuna module,
and none of the miss path (pydantic, pydantic-settings, the store, measurement): they load at the first miss.

Structural, not a timing: the time is measured by benches/import_time.py.
"""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

pytestmark = pytest.mark.subprocess

# Each loads only when used: a set that searches, an OpenCL client, instrument_opentelemetry, the optuna_tpe strategy.
LOADED_WHEN_USED = (
    "tunekit._search",
    "tunekit._observe.otel",
    "tunekit_backends.opencl",
    "pyopencl",
    "opentelemetry",
    "optuna",
    "threadpoolctl",
    "matplotlib",  # the report's plots: tunekit._observe.report_plots
)


def _loaded_after(statement: str) -> list[str]:
    probe = textwrap.dedent(
        f"""
        import json, sys
        {statement}
        print(json.dumps(sorted(sys.modules)))
        """
    )
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True)
    modules: list[str] = json.loads(done.stdout)
    return modules


# What only a miss needs: the settings model, the records, the persistent store, the tuner and its
# measurement. The hit path keeps the winners in LocalTuner and reads the settings through the light
# tunekit._base.settings. (tunekit._measure.client, the Client protocol execute checks, is light and stays.)
LOADED_AT_FIRST_MISS = (
    "pydantic",
    "pydantic_core",
    "pydantic_settings",
    "tunekit._base.settings_model",
    "tunekit._values.records",
    "tunekit._store",
    "tunekit._measure.runner",
    "tunekit._measure.benchmark",
    "tunekit._tune.tuner",
    "tunekit._tune.measure_job",
    "tunekit._observe.observers",
    "rich",
    "platformdirs",
    "filelock",
)


def _heavy(modules: list[str], heavy: tuple[str, ...] = LOADED_WHEN_USED) -> list[str]:
    return [m for m in modules if any(m == h or m.startswith(h + ".") for h in heavy)]


def test_the_readme_names_load_no_search_opencl_otel_or_optuna_module() -> None:
    # Regression: TunableSet and LocalTuner pulled in the whole search layer (strategies, threadpoolctl).
    modules = _loaded_after(
        "import tunekit as tk; tk.LocalTuner, tk.TunableSet, tk.Tunable, tk.autotune_key, tk.Anchor, tk.configure"
    )
    assert "tunekit._tune.local" in modules  # the names were loaded, not just the package
    assert _heavy(modules) == []


def test_the_readme_example_loads_none_of_the_miss_path_before_its_first_call() -> None:
    # Regression: LocalTuner imported the Tuner (store, measurement, observers), TunableSet the
    # settings model and tunekit.backend (for CpuClient) the runners, so the README paid ~300 ms
    # for pydantic-settings and the rest before its first call.
    modules = _loaded_after(
        textwrap.dedent(
            """
            from typing import Annotated
            import numpy as np
            import tunekit as tk
            from tunekit_backends.cpu import CpuClient

            @tk.autotune_key
            class SumKey:
                n: Annotated[int, tk.Anchor()]
                dtype: np.dtype

            TUNER: tk.LocalTuner[SumKey, np.ndarray] = tk.LocalTuner("row_sum")
            tunables = TUNER.init(
                lambda: tk.TunableSet(key=lambda x: SumKey(n=x.shape[1], dtype=x.dtype))
                .with_tunable(tk.Tunable("np_sum", lambda x: x.sum(axis=1)))
                .with_tunable(tk.Tunable("einsum", lambda x: np.einsum("ij->i", x)))
            )
            client = CpuClient()
            tk.configure, tk.settings
            """
        ).replace("\n", "\n        ")
    )
    assert "tunekit._tune.local" in modules
    assert "tunekit_backends.cpu" in modules
    assert _heavy(modules, LOADED_AT_FIRST_MISS) == []


def test_a_tune_that_measures_every_candidate_loads_no_search_module(tmp_path: Path) -> None:
    modules = _loaded_after(
        textwrap.dedent(
            f"""
            import os
            os.environ["TUNEKIT_CACHE_DIR"] = {str(tmp_path)!r}
            from typing import Annotated
            import numpy as np
            import tunekit as tk
            from tunekit_backends.cpu import CpuClient

            @tk.autotune_key
            class SumKey:
                n: Annotated[int, tk.Anchor()]
                dtype: np.dtype

            TUNER = tk.LocalTuner("import_cost")
            client = CpuClient()
            tunables = TUNER.init(
                lambda: tk.TunableSet(key=lambda x: SumKey(n=x.shape[0], dtype=x.dtype))
                .with_tunable(tk.Tunable("sum", lambda x: x.sum()))
                .with_tunable(tk.Tunable("add", lambda x: np.add.reduce(x)))
            )
            TUNER.execute(client.device_id, client, tunables, (np.ones(100, np.float32),))
            """
        ).replace("\n", "\n        ")
    )
    assert "tunekit._tune.tuner" in modules
    assert _heavy(modules) == []
