"""Where a tune is shown, the figures that decided it are: cache show, records summary, the report, the warning.

Tuned through the real tuner on the simulated device, whose virtual clock makes the timings
what the test asks for: two close candidates (a paired runoff decides) or a busy device.
"""

from __future__ import annotations

import json
import logging
from pathlib import Path
from typing import Annotated

import pytest
from _command import run

import tunekit as tk
import tunekit._observe.doubt
from tunekit_backends.simulated import NoiseModel, SimulatedClient


@tk.autotune_key
class NKey:
    n: Annotated[int, tk.Anchor()]


def _tune(
    name: str, noise: float, seed: int, times: tuple[int, ...], sizes: tuple[int, ...] = (8,)
) -> list[tk.AutotuneRecord]:
    """Tune ``sizes`` keys of candidates k0, k1, ... of those true times; the records of the tunes."""
    client = SimulatedClient(NoiseModel(noise=noise), seed=seed)
    tunables = tk.TunableSet(key=lambda n: NKey(n=n))
    for index, true_ns in enumerate(times):
        tunables = tunables.with_tunable(tk.Tunable(f"k{index}", client.kernel(true_ns)))
    tuner: tk.LocalTuner[NKey, None] = tk.LocalTuner(name)
    records: list[tk.AutotuneRecord] = []
    sink = tk.add_record_sink(records.append)
    try:
        for n in sizes:
            tuner.execute(client.device_id, client, tunables, (n,))
    finally:
        tk.remove_record_sink(sink)
    return records


@pytest.fixture
def close_call(tmp_path: Path) -> tuple[Path, tk.TuneDecision]:
    """Two candidates 1% apart and a slower third on a quiet device: the paired runoff decides."""
    path = tmp_path / "records.jsonl"
    tk.configure(record=str(path))
    (record,) = _tune("close", 0.02, 1, (100_000, 101_000, 150_000))
    decision = tk.decision_of(record)
    assert decision is not None and decision.stage == "runoff"
    return path, decision


def test_cache_show_gives_the_deciding_figures_and_stage(close_call: tuple[Path, tk.TuneDecision]) -> None:
    _, decision = close_call
    out = run("cache", "show", "close").stdout
    assert f"decided:  {decision.text()}" in out
    assert decision.runner_up is not None and decision.margin_text in out
    winner_line = next(line for line in out.splitlines() if line.strip().startswith(decision.winner + " "))
    assert "winner: paired runoff" in winner_line and decision.margin_text in winner_line
    runner_line = next(line for line in out.splitlines() if line.strip().startswith(decision.runner_up + " "))
    assert "runner-up" in runner_line
    listed = run("cache", "list").stdout
    assert decision.margin_text in listed


def test_records_summary_gives_the_deciding_figures_and_stage(close_call: tuple[Path, tk.TuneDecision]) -> None:
    path, decision = close_call
    out = run("records", "summary", str(path)).stdout
    row = next(line for line in out.splitlines() if line.startswith("close "))
    assert decision.runner_up is not None
    for figure in (decision.winner, decision.runner_up, decision.margin_text, decision.stage_text):
        assert figure in row
    (summary,) = json.loads(run("records", "summary", "--json", str(path)).stdout)["keys"]
    assert summary["decision"]["stage"] == "runoff" and summary["margin"] == decision.margin


def test_the_report_gives_the_deciding_figures_and_stage(
    close_call: tuple[Path, tk.TuneDecision], tmp_path: Path
) -> None:
    path, decision = close_call
    html = tk.write_report(path, tmp_path / "report.html").read_text()
    section = html.split('<section class="key-section">')[1]
    assert "margin [95%]<b>" + decision.margin_text in section
    assert "decided by<b>" + decision.stage_text in section
    assert decision.runner_up is not None and decision.runner_up in section


@pytest.fixture
def warned_afresh(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(tunekit._observe.doubt, "_warned", False)


def test_a_busy_device_gets_one_warning_saying_what_to_do(
    warned_afresh: None, caplog: pytest.LogCaptureFixture, tmp_path: Path
) -> None:
    """Three runs of a comparison on a busy machine differed 100-fold, and nothing warned."""
    tk.configure(record=str(tmp_path / "records.jsonl"))
    with caplog.at_level(logging.INFO, logger="tunekit.doubt"):
        records = _tune("busy", 0.5, 8, (100_000, 103_000), sizes=(8, 64))
    decisions = [tk.decision_of(r) for r in records]
    assert all(d is not None and d.margin is not None and d.spread > d.margin for d in decisions)
    warnings = [r for r in caplog.records if r.levelno == logging.WARNING]
    assert len(warnings) == 1  # two untrusted tunes, one warning
    assert "busy" in warnings[0].getMessage() and "tunekit cache clear --tuner busy" in warnings[0].getMessage()
    assert sum("busy NKey" in r.getMessage() for r in caplog.records if r.levelno == logging.INFO) == 1
    summary = run("records", "summary", str(tmp_path / "records.jsonl")).stdout
    doubts = summary.split("not trusted (spread wider than the margin):\n")[1].splitlines()
    assert [line.split(": ")[0] for line in doubts[:2]] == ['  busy {"n":8}', '  busy {"n":64}']


def test_with_the_cache_off_the_warning_says_to_run_again_not_to_clear_a_cache(
    warned_afresh: None, caplog: pytest.LogCaptureFixture
) -> None:
    """With TUNEKIT_CACHE=0 the warning said `tunekit cache clear --tuner NAME`, of a cache that holds nothing."""
    tk.configure(cache=False)
    with caplog.at_level(logging.WARNING, logger="tunekit.doubt"):
        (record,) = _tune("busy_in_memory", 0.5, 8, (100_000, 103_000))
    assert record.stored is False
    (warning,) = [r.getMessage() for r in caplog.records]
    assert "tunekit cache clear" not in warning
    assert "Re-tune when it is quiet (run again: this winner is in this process's memory only" in warning


def test_a_quiet_clear_decision_warns_nothing(warned_afresh: None, caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.INFO, logger="tunekit.doubt"):
        (record,) = _tune("quiet", 0.01, 2, (100_000, 150_000))
    decision = tk.decision_of(record)
    assert decision is not None and decision.trusted
    assert not [r for r in caplog.records if "busy" in r.getMessage()]
