"""Candidates shared by the tests: real functions whose speed the test chooses."""

from __future__ import annotations

import time

import tunekit as tk


def sleeping(seconds: float) -> tk.Tunable[int]:
    """A candidate named ``sleep<seconds>`` that sleeps, then returns its input."""

    def run(n: int) -> int:
        time.sleep(seconds)
        return n

    return tk.Tunable(f"sleep{seconds}", run)
