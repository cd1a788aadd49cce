"""OpenTelemetry export of a real tune, read back through the SDK's in-memory exporters."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Iterator
from typing import Annotated, Any

import pytest
from _tunables import sleeping as _sleep
from opentelemetry import trace
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import InMemoryMetricReader
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

import tunekit as tk
from tunekit_backends.cpu import CpuClient

CLIENT = CpuClient()


@tk.autotune_key
class NKey:
    n: Annotated[int, tk.Anchor()]
    layout: str


class Telemetry:
    def __init__(self) -> None:
        self.spans = InMemorySpanExporter()
        self.tracer_provider = TracerProvider()
        self.tracer_provider.add_span_processor(SimpleSpanProcessor(self.spans))
        self.metrics = InMemoryMetricReader()
        self.meter_provider = MeterProvider(metric_readers=[self.metrics])

    def counts(self, name: str) -> dict[tuple[tuple[str, Any], ...], int]:
        data = self.metrics.get_metrics_data()
        assert data is not None
        found: dict[tuple[tuple[str, Any], ...], int] = {}
        for resource in data.resource_metrics:
            for scope in resource.scope_metrics:
                for metric in scope.metrics:
                    if metric.name == name:
                        for point in metric.data.data_points:
                            found[tuple(sorted(point.attributes.items()))] = point.value  # type: ignore[union-attr]
        return found


@pytest.fixture
def telemetry() -> Iterator[Telemetry]:
    collected = Telemetry()
    observer = tk.instrument_opentelemetry(
        tracer_provider=collected.tracer_provider, meter_provider=collected.meter_provider
    )
    yield collected
    tk.remove_observer(observer)


def _boom(n: int) -> int:
    raise RuntimeError("kernel exploded")


def _nested(n: int) -> int:
    with trace.get_tracer("user-code", tracer_provider=NESTED_PROVIDER[0]).start_as_current_span("inside-candidate"):
        return n


NESTED_PROVIDER: list[TracerProvider] = []


def _set() -> tk.TunableSet[NKey, int]:
    return tk.TunableSet(key=lambda n: NKey(n=n, layout="row")).with_tunables(
        [_sleep(0.003), _sleep(0.0005), tk.Tunable("boom", _boom)]
    )


def test_a_tune_is_one_span_with_an_event_per_candidate(telemetry: Telemetry) -> None:
    records: list[tk.AutotuneRecord] = []
    sink = tk.add_record_sink(records.append)
    try:
        tk.LocalTuner[NKey, int]("otel_tuner").execute(CLIENT.device_id, CLIENT, _set(), (100,))
    finally:
        tk.remove_record_sink(sink)
    (record,) = records
    (span,) = telemetry.spans.get_finished_spans()
    assert span.name == "tunekit.tune"
    attributes = dict(span.attributes or {})
    assert attributes["tunekit.tuner"] == "otel_tuner"
    assert attributes["tunekit.device_id"] == CLIENT.device_id
    assert json.loads(str(attributes["tunekit.key"])) == {"n": 128, "layout": "row"}
    assert attributes["tunekit.key.n"] == 128 and attributes["tunekit.key.layout"] == "row"
    assert attributes["tunekit.winner"] == record.winner and attributes["tunekit.decision"] == "tuned"
    events = {
        e.attributes["tunekit.candidate"]: dict(e.attributes)
        for e in span.events
        if e.name == "tunekit.candidate" and e.attributes
    }
    assert set(events) == {"sleep0.003", "sleep0.0005", "boom"}
    assert events["sleep0.0005"]["tunekit.status"] == "measured"
    for candidate in record.candidates:
        if candidate.stats is not None:
            assert events[candidate.name]["tunekit.median_ns"] == candidate.stats.median_ns
            assert events[candidate.name]["tunekit.samples"] == candidate.stats.count
    assert float(events["sleep0.0005"]["tunekit.median_ns"]) >= 0.0005e9
    assert events["boom"]["tunekit.status"] == "failed"
    assert events["boom"]["tunekit.error"] == "RuntimeError: kernel exploded"
    assert span.status.is_ok


def test_cache_lookups_and_tunes_are_counted(telemetry: Telemetry) -> None:
    tk.LocalTuner[NKey, int]("otel_counted").execute(CLIENT.device_id, CLIENT, _set(), (100,))
    tk.LocalTuner[NKey, int]("otel_counted").execute(CLIENT.device_id, CLIENT, _set(), (100,))
    lookups = {dict(k)["tunekit.result"]: v for k, v in telemetry.counts("tunekit.cache.lookups").items()}
    assert lookups == {"miss": 1, "hit": 1}
    tunes = {dict(k)["tunekit.decision"]: v for k, v in telemetry.counts("tunekit.tunes").items()}
    assert tunes == {"tuned": 1}


def test_spans_opened_by_a_candidate_nest_under_the_tune(telemetry: Telemetry) -> None:
    NESTED_PROVIDER[:] = [telemetry.tracer_provider]
    tunables = tk.TunableSet(key=lambda n: NKey(n=n, layout="col")).with_tunable(tk.Tunable("nested", _nested))
    records: list[tk.AutotuneRecord] = []
    sink = tk.add_record_sink(records.append)
    try:
        tk.LocalTuner[NKey, int]("otel_nested").execute(CLIENT.device_id, CLIENT, tunables, (7,))
    finally:
        tk.remove_record_sink(sink)
    spans = telemetry.spans.get_finished_spans()
    tune = next(s for s in spans if s.name == "tunekit.tune")
    inner = [s for s in spans if s.name == "inside-candidate"]
    nested = [s for s in inner if s.parent is not None and s.parent.span_id == tune.context.span_id]
    (record,) = records
    (candidate,) = record.candidates
    assert len(nested) == max(tk.settings().warmup - 1, 0) + len(candidate.samples_ns) + len(candidate.discarded_ns)
    assert len(inner) == len(nested) + 1  # the call on the caller's inputs, after the tune
    assert trace.get_current_span() is trace.INVALID_SPAN  # the tune's context was detached again


def test_a_tune_without_a_valid_candidate_is_an_error_span(telemetry: Telemetry) -> None:
    tunables = tk.TunableSet(key=lambda n: NKey(n=n, layout="bad")).with_tunable(tk.Tunable("boom", _boom))
    with pytest.raises(tk.NoValidKernelFound):
        tk.LocalTuner[NKey, int]("otel_failing").execute(CLIENT.device_id, CLIENT, tunables, (7,))
    (span,) = telemetry.spans.get_finished_spans()
    assert not span.status.is_ok and span.status.description == "no valid candidate"


@pytest.mark.subprocess
def test_opentelemetry_and_the_live_display_load_only_when_used() -> None:
    heavy = ("opentelemetry", "rich.live", "rich.progress")
    code = f"import sys, tunekit; print(sorted(m for m in {heavy!r} if m in sys.modules))"
    done = subprocess.run([sys.executable, "-c", code], check=True, capture_output=True, text=True, timeout=120)
    assert done.stdout.strip() == "[]"


@pytest.mark.subprocess
def test_a_missing_otel_extra_names_the_install_command() -> None:
    code = (
        "import sys; sys.modules['opentelemetry'] = None\n"
        "import tunekit as tk\n"
        "try:\n    tk.instrument_opentelemetry()\nexcept tk.TunekitError as exc:\n    print(exc)\n"
    )
    done = subprocess.run([sys.executable, "-c", code], check=True, capture_output=True, text=True, timeout=120)
    assert done.stdout.strip() == "OpenTelemetry export needs the otel extra: pip install 'tunekit[otel]'"
