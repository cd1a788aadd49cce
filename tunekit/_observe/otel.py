"""OpenTelemetry export: each tuning decision a span, cache lookups and tunes as metrics.

Needs the ``otel`` extra; nothing here imports OpenTelemetry until
:func:`instrument_opentelemetry` is called, so ``import tunekit`` stays cheap.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING, Any

from tunekit._base.errors import TunekitError
from tunekit._base.version import __version__
from tunekit._observe.events import CacheLookup, TuneEvent, TuneFinished, TuneObserver, TuneStarted
from tunekit._observe.hit_count import current_counter
from tunekit._observe.observers import add_observer
from tunekit._values.records import AutotuneRecord, CandidateRecord

if TYPE_CHECKING:
    from contextvars import Token

    from opentelemetry.context import Context
    from opentelemetry.metrics import CallbackOptions, MeterProvider, Observation
    from opentelemetry.trace import Span, TracerProvider

__all__ = ["OpenTelemetryObserver", "instrument_opentelemetry"]

_INSTALL = "pip install 'tunekit[otel]'"


def _key_attributes(key: Mapping[str, object]) -> dict[str, str | int | float | bool]:
    attributes: dict[str, str | int | float | bool] = {
        "tunekit.key": json.dumps(dict(key), sort_keys=True, separators=(",", ":"))
    }
    for name, value in key.items():
        if isinstance(value, str | int | float | bool):  # OpenTelemetry attributes cannot hold null
            attributes[f"tunekit.key.{name}"] = value
    return attributes


def _candidate_attributes(candidate: CandidateRecord) -> dict[str, str | int | float | bool]:
    attributes: dict[str, str | int | float | bool] = {
        "tunekit.candidate": candidate.name,
        "tunekit.status": candidate.status,
        "tunekit.batch": candidate.batch,
    }
    if candidate.stats is not None:
        attributes["tunekit.median_ns"] = candidate.stats.median_ns
        attributes["tunekit.min_ns"] = candidate.stats.min_ns
        attributes["tunekit.samples"] = candidate.stats.count
    if candidate.stage is not None:
        attributes["tunekit.stage"] = candidate.stage
    if candidate.error is not None:
        attributes["tunekit.error"] = candidate.error
    return attributes


def _hit_observations(options: CallbackOptions) -> Iterable[Observation]:
    """The cumulative hits of each bucket, for the ``tunekit.cache.hits`` observable counter."""
    from opentelemetry.metrics import Observation  # noqa: PLC0415 - the optional otel extra

    counter = current_counter()
    if counter is None:
        return []
    return [
        Observation(
            hits,
            {"tunekit.tuner": tuner, "tunekit.device_id": device, "tunekit.key": key, "tunekit.source": source},
        )
        for (tuner, device, key, source), hits in counter.totals().items()
    ]


class OpenTelemetryObserver:
    """Turns tune events into spans and metrics; see :func:`instrument_opentelemetry`.

    The span of a tune is current while the tune runs, so spans that candidates open
    themselves nest under it.
    """

    def __init__(
        self, *, tracer_provider: TracerProvider | None = None, meter_provider: MeterProvider | None = None
    ) -> None:
        try:
            from opentelemetry import context, metrics, trace  # noqa: PLC0415 - the optional otel extra
        except ImportError as exc:
            raise TunekitError(f"OpenTelemetry export needs the otel extra: {_INSTALL}") from exc
        self._context = context
        self._trace = trace
        self._tracer = trace.get_tracer("tunekit", __version__, tracer_provider=tracer_provider)
        meter = metrics.get_meter("tunekit", __version__, meter_provider=meter_provider)
        self._lookups = meter.create_counter(
            "tunekit.cache.lookups", unit="{lookup}", description="Persistent-cache lookups by result."
        )
        self._tunes = meter.create_counter(
            "tunekit.tunes", unit="{decision}", description="Tuning decisions by kind (tuned, disabled, demoted)."
        )
        self._duration = meter.create_histogram(
            "tunekit.tune.duration", unit="s", description="Wall time of each tune, from start to decision."
        )
        # Read at each collection from the hit counter (count_hits), so a hit costs the metric nothing.
        meter.create_observable_counter(
            "tunekit.cache.hits",
            callbacks=[_hit_observations],
            unit="{hit}",
            description="Calls served by a cached winner, by tuner, key and source (count_hits must be on).",
        )
        self._lock = threading.Lock()
        self._open: dict[int, tuple[Span, Token[Context]]] = {}

    def observe(self, event: TuneEvent) -> None:
        """Start, annotate and end spans; count lookups and decisions."""
        match event:
            case CacheLookup(tuner, device_id, _, result):
                self._lookups.add(1, {"tunekit.tuner": tuner, "tunekit.device_id": device_id, "tunekit.result": result})
            case TuneStarted(tune_id, tuner, device_id, key, candidates):
                span = self._tracer.start_span(
                    "tunekit.tune",
                    attributes={
                        "tunekit.tuner": tuner,
                        "tunekit.device_id": device_id,
                        "tunekit.candidates": len(candidates),
                        **_key_attributes(key),
                    },
                )
                token = self._context.attach(self._trace.set_span_in_context(span))
                with self._lock:
                    self._open[tune_id] = (span, token)
            case TuneFinished(tune_id, record, error):
                with self._lock:
                    opened = self._open.pop(tune_id, None) if tune_id is not None else None
                if opened is None:
                    if record is not None:
                        self._decision_span(record)
                    return
                span, token = opened
                self._context.detach(token)
                self._end(span, record, error)
            case _:
                pass

    def _decision_span(self, record: AutotuneRecord) -> None:
        """A decision that measured nothing still gets its (instant) span."""
        span = self._tracer.start_span(
            "tunekit.tune",
            attributes={
                "tunekit.tuner": record.tuner,
                "tunekit.device_id": record.device_id,
                **_key_attributes(record.key),
            },
        )
        self._end(span, record, None)

    def _end(self, span: Span, record: AutotuneRecord | None, error: str | None) -> None:
        from opentelemetry.trace import Status, StatusCode  # noqa: PLC0415 - the optional otel extra

        if record is not None:
            span.set_attribute("tunekit.decision", record.decision)
            span.set_attribute("tunekit.checksum", record.checksum)
            span.set_attribute("tunekit.stored", record.stored)
            if record.winner is not None:
                span.set_attribute("tunekit.winner", record.winner)
            for candidate in record.candidates:
                span.add_event("tunekit.candidate", _candidate_attributes(candidate))
            for event in record.events:
                span.add_event(f"tunekit.{event.kind}", {"tunekit.detail": event.model_dump_json()})
            labels = {"tunekit.tuner": record.tuner, "tunekit.device_id": record.device_id}
            self._tunes.add(1, {**labels, "tunekit.decision": record.decision})
            if record.decision == "tuned":
                self._duration.record(record.wall_time_s, labels)
        if error is not None:
            span.set_status(Status(StatusCode.ERROR, error))
        elif record is not None and record.winner is None:
            span.set_status(Status(StatusCode.ERROR, "no valid candidate"))
        span.end()


def instrument_opentelemetry(*, tracer_provider: Any | None = None, meter_provider: Any | None = None) -> TuneObserver:
    """Export every tune to OpenTelemetry from now on; returns the observer (for ``tk.remove_observer``).

    Spans are named ``tunekit.tune`` with ``tunekit.tuner``, ``tunekit.device_id`` and
    ``tunekit.key`` (plus ``tunekit.key.<field>``) attributes and one ``tunekit.candidate``
    event per candidate (median, status, error). Metrics: ``tunekit.cache.lookups``
    (by ``tunekit.result``: hit, miss, stale), ``tunekit.tunes`` (by ``tunekit.decision``),
    the ``tunekit.tune.duration`` histogram and, with ``count_hits`` on, the cumulative
    ``tunekit.cache.hits`` (by ``tunekit.tuner``, ``tunekit.key`` and ``tunekit.source``: memory
    or persistent). The global providers are used unless given.
    """
    return add_observer(OpenTelemetryObserver(tracer_provider=tracer_provider, meter_provider=meter_provider))
