"""Search arguments are checked where they are given, before anything is built or measured."""

from __future__ import annotations

import subprocess
import sys

import pytest

pytestmark = pytest.mark.subprocess


def test_optuna_tpe_without_optuna_is_refused_where_the_set_is_built() -> None:
    """with_search(strategy="optuna_tpe") was accepted without Optuna installed; the missing extra surfaced only
    at the first key's tune, inside execute."""
    script = (
        "import sys\n"
        "sys.modules['optuna'] = None  # as without the extra: importing it raises ImportError\n"
        "import tunekit as tk\n"
        "@tk.autotune_key\n"
        "class Key:\n"
        "    n: int\n"
        "base = tk.TunableSet.from_space(tk.Space(A=[1, 2]), lambda c: lambda n: n, key=lambda n: Key(n=n))\n"
        "try:\n"
        "    base.with_search(strategy='optuna_tpe', max_evals=2)\n"
        "except ImportError as exc:\n"
        "    print(exc)\n"
        "base.with_search(strategy='random', max_evals=2)\n"
    )
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, check=False, timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout == (
        "TunableSet.with_search(strategy='optuna_tpe'): the 'optuna_tpe' strategy needs Optuna: "
        "pip install 'tunekit[optuna]'\n"
    )
