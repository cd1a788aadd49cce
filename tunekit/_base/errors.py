"""Errors raised by tunekit."""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any, Literal

__all__ = [
    "AutotuneDisabled",
    "CandidateFailed",
    "ClientClosed",
    "InputTypeError",
    "NoValidKernelFound",
    "SettingsError",
    "TuneRecursionError",
    "TunekitError",
    "WorkerStartFailed",
    "describe_error",
]

FailureStage = Literal["compile", "check", "run", "timeout", "crash"]
"""Where a candidate failed: the stages a ``tk.Failed`` outcome and a ``tunekit.backend.CandidateFailed`` name."""


def describe_error(exc: BaseException) -> str:
    """One line naming the exception type and its message."""
    message = str(exc).strip().splitlines()
    return f"{type(exc).__name__}: {message[0]}" if message else type(exc).__name__


class TunekitError(Exception):
    """Base class of tunekit's own errors."""


class AutotuneDisabled(TunekitError, RuntimeError):
    """An explicit search (``tk.search``, ``tk.tune_objective``) was called with autotuning off.

    ``TUNEKIT_AUTOTUNE=0`` means "measure and write nothing": ``execute`` then takes the first
    candidate in plan order, but a search has no such candidate to fall back on, and measuring
    anyway would break the promise (a production process set to never tune would spend its
    device on a search). Raised before anything is built, measured or written.
    """


class NoValidKernelFound(TunekitError):
    """Every candidate failed or was skipped for a key (or every configuration a search evaluated); lists them and why.

    ``failures`` holds every (name, reason); the message shows the first ``SHOWN`` reasons, each
    once: candidates that fail alike (the same words but for their own names) share its line.
    ``recorded`` is what else to know: empty when this process tuned the key; for a repeated
    failure, which process's failed tune this error repeats, when, and when the key will be tuned
    again; for ``tk.search`` and ``tk.tune_objective``, how the search ended and where its trials
    are kept. ``key`` is None for a search run without one.
    """

    SHOWN = 20

    def __init__(self, tuner: str, key: object, failures: Sequence[tuple[str, str]], recorded: str = "") -> None:
        self.tuner = tuner
        self.key = key
        self.failures = tuple(failures)
        self.recorded = recorded
        groups = _alike(self.failures)
        shown = [_group_lines(group) for group in groups[: self.SHOWN]]
        if len(groups) > self.SHOWN:  # a search of 500 failed configurations would print 500 lines
            rest = sum(len(group) for group in groups[self.SHOWN :])
            shown.append(f"  ... and {rest} more (all of them in the error's .failures)")
        lines = "\n".join(shown) or "  (no candidate was planned)"
        after = f"\n{recorded}" if recorded else ""
        for_key = f" for key {key!r}" if key is not None else ""
        super().__init__(f"tuner {tuner!r}: no valid candidate{for_key}:\n{lines}{after}")

    def __reduce__(self) -> tuple[type[NoValidKernelFound], tuple[str, object, tuple[tuple[str, str], ...], str]]:
        return (type(self), (self.tuner, self.key, self.failures, self.recorded))


def _alike(failures: Sequence[tuple[str, str]]) -> list[list[tuple[str, str]]]:
    """``failures`` grouped by reason, each reason read with its own candidate's name left out, in order of first sight.

    Fifteen variants refusing the caller's float64 array for one reason would otherwise repeat that
    reason fifteen times, each with a name of its own in it, hiding any failure that differs.
    """
    groups: dict[str, list[tuple[str, str]]] = {}
    for name, reason in failures:
        alone = re.sub(rf"(?<!\w){re.escape(name)}(?!\w)", "\0", reason) if name else reason
        groups.setdefault(alone, []).append((name, reason))
    return list(groups.values())


def _group_lines(group: list[tuple[str, str]]) -> str:
    (name, reason), rest = group[0], group[1:]
    line = f"  - {name}: {reason}"
    if rest:
        names = ", ".join(other for other, _ in rest[:GROUP_NAMES])
        more = f" and {len(rest) - GROUP_NAMES} more" if len(rest) > GROUP_NAMES else ""
        line += f"\n    the same for {len(rest)} more: {names}{more}"
    return line


GROUP_NAMES = 6
"""Names listed beside a reason that many candidates share; the rest are counted (every one is in ``.failures``)."""


class ClientClosed(TunekitError, RuntimeError):
    """The client a tune runs on was closed, or lost what it runs on, during the tune.

    No candidate is to blame, so a client raises this (say, from a prepare hook whose compile
    workers ``close()`` stopped) instead of failing the candidate it was working on: the tune
    stops, its caller gets this error, and nothing is stored, neither a winner that left that
    candidate out nor a failed tune. The next call for the key tunes it again. Every stage lets
    it through: prepare, the correctness check and its reference, warm-up, measuring, the
    runoff, an objective's ``measure``, and the launch of a cached winner (not demoted for it).
    """


class WorkerStartFailed(TunekitError, RuntimeError):
    """The isolated worker process (``isolation="process"``) could not be started: no candidate ran, none is to blame.

    ``fork()`` or the spawn of a fresh interpreter failed (``EAGAIN`` at the process limit,
    ``ENOMEM``, no file descriptor left for its pipe). Like :class:`ClientClosed`, it stops the
    tune and reaches the caller as it is: no candidate is recorded as failed, and the key does
    not go into the failure memory, so another process (one that can start workers) tunes it
    at once, and this process tunes it again at its next call. ``__cause__`` is the ``OSError``.
    """


NOT_A_CANDIDATE: tuple[type[TunekitError], ...] = (ClientClosed, WorkerStartFailed)
"""Errors that stop a tune without blaming the candidate that was running: every stage lets them through."""


class InputTypeError(TunekitError, TypeError):
    """The caller's inputs do not have the types the operation takes (an array of the wrong dtype, say).

    The caller is at fault, not a candidate: raised by a cached winner at launch, it reaches the
    caller as it is, without trying the next-ranked candidates and without demoting the winner in
    memory or on disk (a later call with the right inputs still runs it). Raised during a tune, it
    fails the candidate like any error (candidates may declare different types).
    """


class CandidateFailed(TunekitError):
    """A runner's verdict on one candidate, with the stage it failed at.

    Runners raise it when they know more than "the candidate raised": the worker process
    crashed (``crash``), the run went past its time limit (``timeout``), or the candidate
    raised in another process (``run``, with the original error as ``reason``). The
    schedule turns it into ``Failed(reason, stage)``.
    """

    def __init__(self, reason: str, stage: FailureStage) -> None:
        self.reason = reason
        self.stage: FailureStage = stage
        super().__init__(reason)

    def __reduce__(self) -> tuple[type[CandidateFailed], tuple[str, FailureStage]]:
        return (type(self), (self.reason, self.stage))


class TuneRecursionError(TunekitError, RuntimeError):
    """A candidate executed its own operation for the key being tuned, from inside that tune.

    From the tuning thread, one of its prepare hooks, or a worker process running its
    candidates: that call would wait for the very tune that is running it, forever (or, in a
    worker, until the candidate's time limit). It raises instead, so the candidate fails like
    any candidate that raises and the tune goes on with the others.
    """

    def __init__(self, tuner: str, key: object, *, where: str = "by the tune running this candidate") -> None:
        self.tuner = tuner
        self.key = key
        self.where = where
        # One line: a failed candidate's reason is the first line of what it raised.
        super().__init__(
            f"tuner {tuner!r}: a candidate executed this operation for key {key!r} while that key is being tuned "
            f"{where}; a candidate must not execute its own operation for the key being tuned "
            "(it would wait on its own tune forever): call the kernel directly instead"
        )

    def __reduce__(self) -> tuple[Any, ...]:
        return (_rebuild_recursion_error, (self.tuner, self.key, self.where))


def _rebuild_recursion_error(tuner: str, key: object, where: str) -> TuneRecursionError:
    return TuneRecursionError(tuner, key, where=where)


class SettingsError(TunekitError, ValueError):
    """A setting (``TUNEKIT_*`` variable, ``tunekit.toml``, ``[tool.tunekit]`` or ``tk.configure``) is invalid.

    Names each bad setting, where it came from, its value and what it accepts.
    """


class TrialLogError(TunekitError):
    """A trial log that cannot be resumed: written for another search, corrupt, or in use."""


class RecordMismatch(TunekitError):
    """A committed record whose provenance does not match the running code or device."""
