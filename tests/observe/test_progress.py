"""Live progress: drawn for tunes that take a while on a terminal, silent otherwise."""

from __future__ import annotations

import io
import os
import pty
import subprocess
import sys
from pathlib import Path
from typing import Annotated

import pytest
from _tunables import sleeping as _sleep
from rich.console import Console

import tunekit as tk
from tunekit._observe.progress import TerminalProgress
from tunekit_backends.cpu import CpuClient

CLIENT = CpuClient()

SCRIPT = """
import time
from typing import Annotated
import tunekit as tk
from tunekit_backends.cpu import CpuClient

@tk.autotune_key
class K:
    n: Annotated[int, tk.Anchor()]

def sleeper(seconds):
    def run(n):
        time.sleep(seconds)
        return n
    return tk.Tunable(f"sleep{seconds}", run)

client = CpuClient()
tunables = tk.TunableSet(key=lambda n: K(n=n)).with_tunables([sleeper(0.01), sleeper(0.002)])
print("result", tk.LocalTuner("progress_script").execute(client.device_id, client, tunables, (5,)))
"""


@tk.autotune_key
class NKey:
    n: Annotated[int, tk.Anchor()]


def _tune_with(progress: TerminalProgress, name: str) -> None:
    observer = tk.add_observer(progress)
    try:
        tunables = tk.TunableSet(key=lambda n: NKey(n=n)).with_tunables([_sleep(0.02), _sleep(0.005)])
        tk.LocalTuner[NKey, int](name).execute(CLIENT.device_id, CLIENT, tunables, (9,))
    finally:
        tk.remove_observer(observer)


def test_a_shown_tune_ends_with_a_summary_line_naming_the_winner() -> None:
    out = io.StringIO()
    console = Console(file=out, force_terminal=True, color_system=None, width=200)
    _tune_with(TerminalProgress(console=console, delay_s=0.0), "shown")
    text = out.getvalue()
    assert "tuned shown n=16: 2 candidates" in text
    assert "winner sleep0.0" in text
    assert "compiled " in text and "timed " in text  # the live line was drawn before the summary replaced it


def test_the_summary_line_gives_the_figures_that_decided() -> None:
    """The line ended with the winner's median alone, though a runoff may have decided against a lower one."""
    out = io.StringIO()
    console = Console(file=out, force_terminal=True, color_system=None, width=300)
    progress = TerminalProgress(console=console, delay_s=0.0)
    records: list[tk.AutotuneRecord] = []
    sink = tk.add_record_sink(records.append)
    try:
        _tune_with(progress, "decided")
    finally:
        tk.remove_record_sink(sink)
    decision = tk.decision_of(records[-1])
    assert decision is not None and decision.runner_up is not None
    line = next(line for line in out.getvalue().splitlines() if "tuned decided" in line)
    assert f"winner {decision.text()}" in line and decision.margin_text in line


def test_a_tune_shorter_than_the_delay_prints_nothing() -> None:
    out = io.StringIO()
    _tune_with(TerminalProgress(console=Console(file=out, force_terminal=True, width=200), delay_s=60.0), "quiet")
    assert out.getvalue() == ""


def _run_script(tmp_path: Path, *, terminal: bool, progress: str) -> str:
    env = {
        **os.environ,
        "TUNEKIT_PROGRESS": progress,
        "TUNEKIT_PROGRESS_DELAY_S": "0",
        "TUNEKIT_CACHE_DIR": str(tmp_path / f"cache-{terminal}-{progress}"),
    }
    if not terminal:
        done = subprocess.run(
            [sys.executable, "-c", SCRIPT], check=False, capture_output=True, text=True, env=env, timeout=120
        )
        assert "result 5" in done.stdout
        return done.stderr
    leader, follower = pty.openpty()
    with subprocess.Popen(
        [sys.executable, "-c", SCRIPT], stdin=follower, stdout=follower, stderr=follower, env=env
    ) as process:
        os.close(follower)
        chunks = []
        while True:
            try:
                chunk = os.read(leader, 65536)
            except OSError:  # the child closed the terminal
                break
            if not chunk:
                break
            chunks.append(chunk)
        process.wait(timeout=120)
    os.close(leader)
    output = b"".join(chunks).decode("utf-8", "replace")
    assert "result 5" in output
    return output


@pytest.mark.subprocess
def test_progress_appears_on_a_terminal(tmp_path: Path) -> None:
    output = _run_script(tmp_path, terminal=True, progress="1")
    assert "tuned progress_script n=8: 2 candidates" in output and "winner" in output


@pytest.mark.slow
@pytest.mark.subprocess
def test_progress_is_silent_off_a_terminal_or_when_disabled(tmp_path: Path) -> None:
    assert _run_script(tmp_path, terminal=False, progress="1") == ""
    assert "tuned progress_script" not in _run_script(tmp_path, terminal=True, progress="0")
