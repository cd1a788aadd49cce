"""A search's record keeps how its finalists' batch decided, so its decision reads among the finalists."""

from __future__ import annotations

from collections.abc import Callable

import tunekit as tk
from tunekit_backends.simulated import NoiseModel, SimulatedClient


def test_the_record_of_a_search_keeps_the_finalists_comparison() -> None:
    """Regression: a searched winner was summarised at 37.2 ms against a runner-up at 36.2 ms, "margin -2.7%"."""
    client = SimulatedClient(NoiseModel(noise=0.05), seed=4)
    kernels = {x: client.kernel(100_000 + 3_000 * x) for x in range(8)}

    def build(config: tk.Config) -> Callable[[], None]:
        return kernels[int(config.X)]

    records: list[tk.AutotuneRecord] = []
    sink = tk.add_record_sink(records.append)
    try:
        result = tk.search(
            tk.Space(X=list(range(8))), build, client, (), tuner="searched", strategy="random", max_evals=8, seed=0
        )
    finally:
        tk.remove_record_sink(sink)
    (record,) = records
    finalists = {t.config.name for t in result.finalists}
    rounds = [e for e in record.events if isinstance(e, tk.Round)]
    assert rounds and {name for e in rounds for name in e.samples_ns} <= {f"X={x}" for x in range(8)}
    assert record.events[1:] == list(result.final_events) and len(finalists) >= 2
    decision = tk.decision_of(record)
    assert decision is not None and decision.search and decision.stage_text.startswith("search finalists")
    assert decision.runner_up is not None and decision.margin is not None
    assert decision.margin >= 0 or decision.why() is not None  # never an unexplained negative margin
