"""The client conformance suite: what every ``tunekit.backend.Client`` must do for the tuner to trust it."""

from __future__ import annotations

from collections.abc import Callable
from typing import Annotated, Any

import tunekit as tk
from tunekit._measure.client import require_client
from tunekit.backend import Client, SupportsCacheFlush, SupportsDeviceModel, SupportsPeaks, SupportsWarmup

__all__ = ["ClientConformance", "ConformanceKey"]


@tk.autotune_key
class ConformanceKey:
    """The key of the suite's one operation: a vector of ``n`` elements."""

    n: Annotated[int, tk.Anchor()]


Candidates = tuple[list[tk.Tunable[Any]], Callable[[ConformanceKey], tuple[Any, ...]]]
"""Two candidates computing the same thing, and the inputs they run on for a key."""


class ClientConformance:
    """The contract of a client as the tuner relies on it; subclass it in a test module.

    ``make`` returns a fresh client; ``candidates`` two real candidates of one operation on it
    and an input generator. The end-to-end check tunes through ``LocalTuner`` under the
    settings in force: give the test session its own cache (``TUNEKIT_CACHE_DIR`` or
    ``TUNEKIT_CACHE=0``) so it stores nothing in the user's.
    """

    size = 1 << 12
    """The ``n`` of the key every check runs at."""

    def make(self) -> Client:
        """A new client of the backend under test."""
        raise NotImplementedError

    def candidates(self, client: Any) -> Candidates:
        """Two real candidates computing the same thing on ``client``, and an input generator."""
        raise NotImplementedError

    def test_is_a_client_with_a_stable_specific_id(self) -> None:
        client = self.make()
        assert isinstance(client, Client)
        assert isinstance(client.device_id, str) and len(client.device_id) > 8
        assert self.make().device_id == client.device_id

    def test_a_device_model_is_a_stable_non_empty_str_when_supported(self) -> None:
        client = self.make()
        if isinstance(client, SupportsDeviceModel):
            # Compared with a committed record's: an empty or unstable one would match other models' records, or none.
            assert isinstance(client.device_model, str) and client.device_model
            again = self.make()
            assert isinstance(again, SupportsDeviceModel) and again.device_model == client.device_model

    def test_passes_the_up_front_client_check_of_execute(self) -> None:
        require_client(self.make(), "conformance")  # raises TypeError naming what a client lacks

    def test_profile_returns_the_output_and_a_device_duration(self) -> None:
        client = self.make()
        (tunable, *_), inputs = self.candidates(client)
        args = inputs(ConformanceKey(n=self.size))
        output, ns = client.profile(lambda: tunable.fn(*args))
        client.sync()
        assert output is not None
        # A number of ns, as the protocol says: an int from perf_counter_ns, a float from an event timer in ms
        assert isinstance(ns, int | float) and not isinstance(ns, bool) and ns > 0

    def test_flush_runs_outside_timing_when_supported(self) -> None:
        client = self.make()
        if isinstance(client, SupportsCacheFlush):
            client.flush_cache()
            client.sync()

    def test_warm_up_and_peaks_when_supported(self) -> None:
        client = self.make()
        if isinstance(client, SupportsWarmup):
            client.warm_up(1_000_000)  # what the schedule does before the first timed sample
            client.sync()
        if isinstance(client, SupportsPeaks):
            peaks = client.measure_peaks()
            assert peaks.ops_per_s > 0 and peaks.bytes_per_s > 0 and peaks.launch_overhead_ns >= 0

    def test_tunes_end_to_end_and_records_its_device(self) -> None:
        client = self.make()
        tunables, inputs = self.candidates(client)
        key = ConformanceKey(n=self.size)
        records: list[tk.AutotuneRecord] = []
        sink = tk.add_record_sink(records.append)
        try:
            tuner: tk.LocalTuner[ConformanceKey, Any] = tk.LocalTuner(f"conformance-{type(self).__name__}")
            tunable_set: tk.TunableSet[ConformanceKey, Any] = tk.TunableSet(
                key=lambda *args: key, inputs=lambda key, *a: inputs(key)
            )
            tuner.execute(client.device_id, client, tunable_set.with_tunables(tunables), inputs(key))
        finally:
            tk.remove_record_sink(sink)
        assert records[-1].device_id == client.device_id
        assert {c.status for c in records[-1].candidates} == {"measured"}
