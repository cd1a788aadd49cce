"""Live progress: drawn for tunes that take a while on a terminal, silent otherwise."""

from __future__ import annotations

import io
import os
import pty
import subprocess
import sys
import time
from pathlib import Path
from typing import Annotated

import pytest
from _tunables import sleeping as _sleep
from rich.console import Console

import tunekit as tk
from tunekit._base.units import format_duration_ns
from tunekit._observe.progress import TerminalProgress
from tunekit_backends.cpu import CpuClient
from tunekit_backends.simulated import NoiseModel, SimulatedClient

CLIENT = CpuClient()

SCRIPT = """
import logging
import sys
import time
from typing import Annotated
import tunekit as tk
from tunekit_backends.cpu import CpuClient

# tunekit's log (the doubt warning a busy machine brings) to stdout: stderr is the progress display's alone.
logging.basicConfig(stream=sys.stdout)

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
    # The live line was drawn, naming its phase, before the summary replaced it.
    assert any(phase in text for phase in ("compile ", "warm-up ", "first samples ", "round ", "runoff "))


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
    assert f"winner {decision.winner} {format_duration_ns(decision.winner_ns)} ({decision.stage_text})" in line
    # It ends with the margin over the runner-up, as the deciding stage measured them.
    runner_up = f"{decision.runner_up} {format_duration_ns(decision.runner_up_ns or 0.0)}"
    doubt = "" if decision.trusted else "(not trusted: the spread is wider) "
    assert line.rstrip().endswith(f"margin {doubt}{decision.margin_text} over {runner_up}")


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


class _Snapshots:
    """After each event (the display observes it first), what the display's line says and how full its bar is."""

    def __init__(self, progress: TerminalProgress) -> None:
        self.progress = progress
        self.ids: list[int] = []
        self.seen: list[tuple[str, float]] = []

    def observe(self, event: tk.TuneEvent) -> None:
        match event:
            case tk.TuneStarted(tune_id=tune_id) | tk.SearchStarted(search_id=tune_id):
                self.ids.append(tune_id)
        if self.ids and (now := self.progress.describe(self.ids[0])) is not None:
            self.seen.append(now)


def _observed(progress: TerminalProgress) -> tuple[_Snapshots, list[tk.TuneObserver]]:
    snapshots = _Snapshots(progress)
    return snapshots, [tk.add_observer(progress), tk.add_observer(snapshots)]


def _phases(seen: list[tuple[str, float]]) -> list[str]:
    order: list[str] = []
    for text, _ in seen:
        for phase in ("compile", "warm-up", "first samples", "round", "runoff", "finalists"):
            if phase in text and (not order or order[-1] != phase):
                order.append(phase)
    return order


def test_the_line_names_each_phase_in_turn_and_the_bar_is_full_only_when_the_tune_ends() -> None:
    """Regression: the bar read "15/15 timed", full, while rounds and the runoff went on for seconds."""
    # A speed factor no noise reaches: the twins go on to the runoff, the slow one is out by separation.
    # On the simulated device (a virtual clock, seeded noise): with sleeps, a loaded machine's noise told
    # the twins apart in the rounds now and then, and the runoff this test is about never ran.
    tk.configure(runoff_pairs=12, max_samples=5, speed_factor=1000)
    device = SimulatedClient(NoiseModel(noise=0.01), seed=3)
    out = io.StringIO()
    progress = TerminalProgress(console=Console(file=out, force_terminal=True, color_system=None, width=1000))
    progress.delay_s = 0.0
    snapshots, observers = _observed(progress)
    records: list[tk.AutotuneRecord] = []
    sink = tk.add_record_sink(records.append)
    # Two equal candidates, never told apart: rounds to max_samples, then a runoff; the slow one is eliminated.
    twin = device.kernel(2e6)
    tunables = tk.TunableSet(key=lambda n: NKey(n=n)).with_tunables(
        [tk.Tunable("slow", device.kernel(30e6)), tk.Tunable("twin1", twin), tk.Tunable("twin2", twin)]
    )
    try:
        tk.LocalTuner[NKey, None]("phases").execute(device.device_id, device, tunables, (9,))
    finally:
        tk.remove_record_sink(sink)
        for observer in observers:
            tk.remove_observer(observer)
    phases = _phases(snapshots.seen)
    assert phases[0] == "compile" and phases[-2:] == ["round", "runoff"], phases
    assert phases.index("first samples") < phases.index("round")
    texts = [text for text, _ in snapshots.seen]
    assert any("round 2 of <=5: 3 of 3 left" in t for t in texts)
    assert any("runoff of 2: 1/12 pairs" in t for t in texts)  # the runoff may stop before its 12
    # Never full while the tune runs, and never going back within it.
    fractions = [fraction for _, fraction in snapshots.seen]
    assert max(fractions) < 1.0 and fractions == sorted(fractions)
    assert not any("0/3" in t and "3/3" in t for t in texts), "two counts on one line read as one"
    decision = tk.decision_of(records[-1])
    assert decision is not None and decision.stage_text.startswith("paired runoff")
    line = next(line for line in out.getvalue().splitlines() if "tuned phases" in line)
    line = line.rstrip().replace("(not trusted: the spread is wider) ", "")  # the twins are one speed
    assert line.endswith(
        f"margin {decision.margin_text} over {decision.runner_up} {format_duration_ns(decision.runner_up_ns or 0.0)}"
    )


def _build(config: tk.Config) -> object:
    def run(n: int) -> int:
        time.sleep(config.MS / 1000)
        return n

    return run


def test_a_search_shows_its_budget_its_best_and_its_finalists_and_ends_with_the_margin() -> None:
    tk.configure(runoff_pairs=10, max_samples=4)
    out = io.StringIO()
    # Wide: when a loaded machine makes the runoff overrule a median, the line says why, and at 300 columns
    # the margin wrapped onto a line of its own.
    progress = TerminalProgress(console=Console(file=out, force_terminal=True, color_system=None, width=1000))
    progress.delay_s = 0.0
    snapshots, observers = _observed(progress)
    try:
        result = tk.search(
            tk.Space(MS=[1, 2, 3, 4, 5, 6, 7, 8]),
            _build,
            CLIENT,
            (3,),
            tuner="searched_progress",
            max_evals=4,
            batch=2,
            finalists=2,
            strategy="random",
        )
    finally:
        for observer in observers:
            tk.remove_observer(observer)
    texts = [text for text, _ in snapshots.seen]
    assert any("evaluated 2/4 of 8" in t for t in texts) and any("evaluated 4/4 of 8" in t for t in texts)
    assert any("best so far MS=" in t for t in texts)
    assert _phases(snapshots.seen)[-1] == "finalists" or any("finalists (2" in t for t in texts)
    fractions = [fraction for _, fraction in snapshots.seen]
    assert max(fractions) < 1.0
    line = next(line for line in out.getvalue().splitlines() if "searched searched_progress" in line)
    assert f": 4 of 8 configurations in {result.search_seconds:.1f} s (stopped by max_evals), then 2 finalists" in line
    assert f"winner {result.best.config.name} " in line and " margin " in line


def _shown(space: tk.Space, tuner: str) -> tuple[list[str], str]:
    """A random search of ``space`` with 2 evaluations: its progress lines and the display's output."""
    out = io.StringIO()
    progress = TerminalProgress(console=Console(file=out, force_terminal=True, color_system=None, width=1000))
    progress.delay_s = 0.0
    snapshots, observers = _observed(progress)
    try:
        tk.search(space, _build, CLIENT, (3,), tuner=tuner, max_evals=2, batch=2, finalists=0, strategy="random")
    finally:
        for observer in observers:
            tk.remove_observer(observer)
    return [text for text, _ in snapshots.seen], out.getvalue()


def test_an_uncounted_restricted_space_is_shown_as_a_bound() -> None:
    """A random search of a space with 4 valid points of 8 showed "evaluated 2/2 of 8" and "2 of 8 configurations"."""
    space = tk.Space(MS=[1, 2, 3, 4, 5, 6, 7, 8], restrict=lambda c: c.MS % 2 == 0)
    texts, out = _shown(space, "bounded")
    assert space.counted_size() is None  # random never walked it
    assert any("evaluated 2/2 of up to 8" in t for t in texts)
    assert "searched bounded: 2 of up to 8 configurations in " in out
    assert space.size == 4  # counts it
    texts, out = _shown(space, "counted")
    assert any("evaluated 2/2 of 4" in t for t in texts) and "searched counted: 2 of 4 configurations in " in out


def test_a_search_inside_a_tune_shows_on_the_tunes_line() -> None:
    tk.configure(runoff_pairs=10, max_samples=4)
    out = io.StringIO()
    progress = TerminalProgress(console=Console(file=out, force_terminal=True, color_system=None, width=300))
    progress.delay_s = 0.0
    snapshots, observers = _observed(progress)
    tunables = tk.TunableSet.from_space(tk.Space(MS=[1, 2, 3, 4, 5, 6]), _build, key=lambda n: NKey(n=n)).with_search(
        max_evals=3, batch=3, finalists=2, strategy="random"
    )
    try:
        tk.LocalTuner[NKey, int]("searched_tune").execute(CLIENT.device_id, CLIENT, tunables, (5,))
    finally:
        for observer in observers:
            tk.remove_observer(observer)
    texts = [text for text, _ in snapshots.seen]
    assert any("evaluated 3/3 of 6" in t for t in texts) and any("finalists (2" in t for t in texts)
    line = next(line for line in out.getvalue().splitlines() if "tuned searched_tune" in line)
    assert ": 3 of 6 configurations searched in " in line and "winner MS=" in line
