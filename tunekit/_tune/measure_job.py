"""Measuring one tune: the plan's batches (or a search), each compiled, checked and timed, until one has a winner."""

from __future__ import annotations

import copy
import logging
import threading
import time
from collections.abc import Callable, Container, Iterator, Sequence
from typing import Any, NamedTuple

from tunekit._base.errors import ClientClosed, InputTypeError, TunekitError, describe_error
from tunekit._candidates.arguments import unbindable
from tunekit._candidates.plan import plan_batches, skip_reason
from tunekit._candidates.tunable_set import TunableSet
from tunekit._measure.bounds import time_limit_ns
from tunekit._measure.check import CheckOutcome, Gate, ReferenceFailed
from tunekit._measure.isolation import check_each, open_runner, refuse_unforkable
from tunekit._measure.prepare import FirstRunReport, prepare_batch
from tunekit._measure.runner import CandidateRunner
from tunekit._measure.schedule import BatchResult, measure_batch
from tunekit._measure.worker import ProcessRunner
from tunekit._observe.observers import TuneObservation
from tunekit._tune.search_tune import search_tune
from tunekit._tune.tune_job import TuneJob
from tunekit._values.outcome import Failed, Outcome, Skipped
from tunekit._values.records import CheckResult, FallbackBatch, Prepared

__all__ = ["Measurement", "measure"]

_log = logging.getLogger("tunekit.tuner")


class Measurement(NamedTuple):
    """What a tune measured: every candidate's outcome, the batch each ran in, and the ranking (empty: no winner)."""

    outcomes: dict[int, Outcome]
    batch_of: dict[int, int]
    ranking: tuple[int, ...]


def measure(job: TuneJob, observation: TuneObservation) -> Measurement:
    """Measure the plan's batches until one yields a measured candidate (or search the set's space)."""
    tunables, key, settings = job.tunables, job.key, job.settings
    refuse_unforkable(job.client, tunables.isolation, settings, where=job.where)  # before inputs, peaks or compiles
    bench_inputs = _benchmark_inputs(job)
    gate = Gate(job.client, bench_inputs, tunables.reference) if tunables.reference is not None else None
    batches = plan_batches(key, tunables.tunables)
    limit_ns = None
    if tunables.short_circuit:
        limit_ns = time_limit_ns(
            tunables.bounds, key, bench_inputs, job.client, settings.short_circuit_threshold, job.tuner
        )
    outcomes: dict[int, Outcome] = {}
    batch_of: dict[int, int] = {}
    ranking: tuple[int, ...] = ()
    # Batches hold an index at most once: when they hold as many as the set, every index is planned, and a range
    # says so without a set of them all (270 MiB at a searched space set's first execute of 5*10^6).
    count = len(tunables.tunables)
    planned: Container[int] = range(count)
    if sum(map(len, batches)) < count:
        planned = {i for batch in batches for i in batch}
        for index in range(count):
            if index not in planned:
                outcomes[index] = Skipped(skip_reason(key, tunables.tunables[index]))
    # Compiling and checking run in this process, before the runner times anything.
    with open_runner(job.client, tunables, bench_inputs, settings, key=key, where=job.where, gate=gate) as opened:
        runner = observation.runner(opened, tunables.names)

        def run_batch(
            batch: list[int], number: int, deadline: float | None = None
        ) -> tuple[dict[int, Outcome], BatchResult]:
            """Compile, check and time one batch; every outcome, and the schedule's result."""
            results: dict[int, Outcome] = dict(
                _prepare_and_check(job, batch, number, bench_inputs, gate, opened, observation)
            )
            measured = measure_batch(
                runner,
                [i for i in batch if i not in results],
                settings,
                client=job.client,
                limit_ns=limit_ns,
                names=tunables.names,
                lone_samples=settings.min_samples if tunables.search is not None else 1,
                deadline=deadline,
            )
            results.update(measured)
            job.events.extend(measured.events)
            for phase, seconds in measured.phase_s.items():
                job.add_phase(phase, seconds)
            observation.outcomes(results, tunables.names)
            return results, measured

        if tunables.search is not None:
            return Measurement(
                *search_tune(
                    tuner=job.tuner,
                    device_id=job.device_id,
                    tunables=tunables,
                    key=key,
                    spec=tunables.search,
                    planned=planned,
                    run_batch=run_batch,
                    events=job.events,
                    observation=observation,
                )
            )
        for number, batch in enumerate(batches):
            if number > 0:
                job.events.append(FallbackBatch(batch=number))
            observation.batch(number, [tunables.tunables[i].name for i in batch])
            results, measured = run_batch(batch, number)
            ranking = measured.ranking
            for index in batch:
                batch_of[index] = number
                outcomes[index] = results.get(index, Skipped("not measured"))
            if ranking:
                break
    return Measurement(outcomes, batch_of, ranking)


def _prepare_and_check(
    job: TuneJob,
    batch: list[int],
    number: int,
    inputs: tuple[Any, ...],
    gate: Gate | None,
    runner: CandidateRunner,
    observation: TuneObservation,
) -> dict[int, Failed]:
    """Compile every candidate of the batch (concurrently), then check each once where the runner runs it."""
    tunables = job.tunables
    first_runs = _first_runs(job, gate, runner)
    phase = prepare_batch(
        tunables,
        batch,
        inputs,
        job.settings.compile_workers,
        on_compiled=observation.compiled,
        first_runs=first_runs[0] if first_runs is not None else None,
    )
    failures = phase.failures
    job.add_phase("compile", phase.wall_time_s)
    if phase.hooks:
        job.events.append(
            Prepared(
                batch=number,
                candidates=phase.hooks,
                failed=len(failures),
                workers=phase.threads,
                wall_time_s=phase.wall_time_s,
                compiled_in_process=phase.slower_path,
            )
        )
    if gate is None:
        return failures
    agreed: list[str] = []
    disagreed: list[str] = []
    started = time.perf_counter()
    try:
        # Each check's event is kept as its check ends: a reference that fails later stops the tune with them.
        judged = first_runs[1] if first_runs is not None else {}
        for index, check in _checks(runner, gate, [i for i in batch if i not in failures], tunables, judged):
            if isinstance(check, Failed):
                failures[index] = check
                continue
            name = tunables.tunables[index].name
            job.events.append(
                CheckResult(
                    name=name,
                    passed=check.passed,
                    against=gate.against,
                    detail=check.detail,
                    max_abs_error=check.max_abs_error,
                    max_rel_error=check.max_rel_error,
                )
            )
            if not check.passed:
                failures[index] = Failed(check.detail, "check")
                disagreed.append(name)
            else:
                observation.checked(name)
                if name != gate.against:
                    agreed.append(name)
    except ReferenceFailed as exc:
        raise ReferenceFailed(f"{job.where}: {exc}") from exc.__cause__
    finally:
        job.add_phase("check", time.perf_counter() - started)
    if disagreed and tunables.reference is not None and tunables.reference.fn is None:
        _warn_baseline_contradicted(job, gate.against, agreed, disagreed)
    return failures


def _first_runs(
    job: TuneJob, gate: Gate | None, runner: CandidateRunner
) -> tuple[tuple[Sequence[int], FirstRunReport], dict[int, CheckOutcome]] | None:
    """Where to report the outputs of the candidates' first runs in their prepare hooks, and the verdicts on them.

    A backend's prepare hook may run each candidate once on a copy of the inputs, canaries and
    all (OpenCL's compile workers do, to compile it): judged here as they come, those outputs
    spare the check a run of each candidate in this process (0.24-0.37 s a tune on the suite's
    kernels). Only where that run is what the check's own would be: the first batch to check
    (its inputs untouched by any timed run), a reference function with outputs= (without one,
    the first candidate in the batch's order is the baseline), candidates run in this process.
    Each candidate not reported is checked here as before.
    """
    if gate is None or not gate.untouched or isinstance(runner, ProcessRunner):
        return None
    reference = gate.reference
    if reference.fn is None or reference.outputs is None:
        return None
    try:
        gate.prime()  # the check's own first step, taken before the compile so that outputs can be judged as they come
    except ReferenceFailed as exc:
        raise ReferenceFailed(f"{job.where}: {exc}") from exc.__cause__
    gate.keep_first_inputs()
    verdicts: dict[int, CheckOutcome] = {}
    lock = threading.Lock()  # reports come on the compile threads, and the gate keeps what it judged

    def report(index: int, outputs: tuple[Any, ...]) -> None:
        try:
            with lock:
                verdicts[index] = gate.judge(outputs)
        except Exception:  # checked in this process instead, where a failure is said in its own words
            _log.debug(
                "the first run of candidate %d could not be judged; it is checked as usual", index, exc_info=True
            )

    return (reference.outputs, report), verdicts


def _checks(
    runner: CandidateRunner,
    gate: Gate,
    indices: list[int],
    tunables: TunableSet[Any, Any],
    judged: dict[int, CheckOutcome],
) -> Iterator[tuple[int, CheckOutcome | Failed]]:
    """Each candidate's check, in order: the verdict on its first run where one was judged, else its check here."""
    for index in indices:
        if index in judged:
            yield index, judged[index]
        else:
            yield from check_each(runner, gate, [index], tunables)


def _warn_baseline_contradicted(job: TuneJob, baseline: str, agreed: list[str], disagreed: list[str]) -> None:
    """Say that candidates disagreed with the first one, which a reference without a function makes the answer.

    Whichever side is wrong, the first candidate stays eligible: told nothing, a user whose first candidate
    is the wrong one would see it win, its correct rivals disqualified.
    """
    checked = len(agreed) + len(disagreed)
    if not agreed:
        verdict = f"every other candidate checked ({checked}) disagrees with it, so it is more likely the wrong one"
    else:
        verdict = f"{len(disagreed)} of {checked} other candidates checked disagree with it ({', '.join(disagreed)})"
    _log.warning(
        "%s key %s: with_reference() has no reference function, so the first candidate to run, %r, is the answer "
        "the others are held to; %s. Those are disqualified, and if %r is the wrong one it may win: give "
        "with_reference() a function computing the expected outputs (a plain, slow version will do)",
        job.where,
        job.key_json,
        baseline,
        verdict,
        baseline,
    )


def _benchmark_inputs(job: TuneJob) -> tuple[Any, ...]:
    """Inputs candidates are timed on: generated, or deep copies of the caller's."""
    generator = job.tunables.inputs
    if generator is None:
        try:
            return copy.deepcopy(job.inputs)
        except Exception as exc:
            raise TunekitError(
                f"{job.where}: cannot deep-copy the inputs for benchmarking ({describe_error(exc)}); "
                "give the TunableSet an inputs= generator"
            ) from exc
    try:
        generated = generator(job.key, *job.inputs)
    except ClientClosed:  # allocating on a closed client is not the generator's mistake
        raise
    except InputTypeError as exc:  # the caller's arguments, named by what copies them (an OpenCL set's default)
        raise InputTypeError(f"{job.where}: {exc}") from exc
    except Exception as exc:
        hint = _call_hint(generator, job.key, job.inputs)
        raise TunekitError(
            f"{job.where}: the input generator raised {describe_error(exc)}{hint} ({job.tunables!r})"
        ) from exc
    if not isinstance(generated, tuple):
        raise TunekitError(
            f"{job.where}: the input generator returned {type(generated).__name__}; "
            "it must return a tuple of the arguments every candidate is called with"
        )
    return generated


def _call_hint(generator: Callable[..., Any], key: object, inputs: tuple[Any, ...]) -> str:
    """How the generator is called, when its signature cannot take that call (``lambda key: ...``), else ''."""
    if unbindable(generator, 1 + len(inputs)) is None:
        return ""
    given = f"{len(inputs)} argument{'' if len(inputs) == 1 else 's'}"
    return (
        f"; it is called as inputs(key, *arguments), with the key and the {given} given to execute: "
        "e.g. def inputs(key, *args), or one parameter per argument after the key"
    )
