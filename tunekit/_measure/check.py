"""The correctness gate: every candidate must compute the right answer before it is timed.

Each candidate runs once on fresh copies of the benchmark inputs, with canary bytes after
every output buffer the client allocates, and its outputs are compared with a reference:
the user's numpy function, or, without one, the first candidate that runs. Integers must
match exactly; floats within a tolerance derived from the dtype's rounding; or, where the set
gives ``compare=``, as that function judges each output. A fast wrong
kernel is the worst outcome a tuner can produce, so a rejected candidate is never timed.
"""

from __future__ import annotations

import copy
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Protocol, runtime_checkable

import numpy as np

from tunekit._base.counted import counted
from tunekit._base.errors import ClientClosed, TunekitError
from tunekit._candidates.reference import Compare, Reference

__all__ = [
    "CANARY_BYTES",
    "CheckBuffers",
    "CheckOutcome",
    "Gate",
    "HostCheckBuffers",
    "SupportsCheckBuffers",
    "compare",
    "default_tolerance",
    "precision_floor",
]

CANARY_BYTES = 64
"""Bytes of canary pattern after each output buffer: one cache line catches off-by-one-vector writes."""

CANARY_VALUE = 0xA5

_RETURN_VALUES = (
    "with_reference() without outputs= compares return values: return the output, or name the "
    "arguments written in place with with_reference(..., outputs=[positions])"
)


@dataclass(frozen=True, slots=True)
class CheckOutcome:
    """One candidate's check: passed or not, and the figures that say by how much."""

    passed: bool
    detail: str
    max_abs_error: float | None = None
    max_rel_error: float | None = None


class CheckBuffers(Protocol):
    """Fresh copies of the inputs for one checked run, with canaries after the outputs."""

    @property
    def args(self) -> tuple[Any, ...]:
        """The arguments the candidate is called with."""
        ...

    def read(self, position: int) -> Any:
        """Argument ``position`` as a host value: a numpy array for a buffer (canaries excluded)."""
        ...

    def damaged(self) -> list[int]:
        """Positions of output buffers whose canary bytes were overwritten."""
        ...


@runtime_checkable
class SupportsCheckBuffers(Protocol):
    """Optional client capability: copies device buffers for a checked run, canaries included."""

    def check_buffers(self, inputs: tuple[Any, ...], outputs: Sequence[int]) -> CheckBuffers:
        """Copies of ``inputs``; each output position gets a canary region after its data."""
        ...


class HostCheckBuffers:
    """Host (numpy) inputs: deep copies, and each output ndarray a view into a larger canaried block."""

    def __init__(self, inputs: tuple[Any, ...], outputs: Sequence[int]) -> None:
        args = list(copy.deepcopy(inputs))
        self._blocks: dict[int, np.ndarray] = {}
        for position in outputs:
            original = args[position]
            if isinstance(original, np.ndarray):
                flat = np.ascontiguousarray(original).reshape(-1)
                block = np.full(flat.nbytes + CANARY_BYTES, CANARY_VALUE, dtype=np.uint8)
                data = block[: flat.nbytes].view(original.dtype)
                data[:] = flat
                self._blocks[position] = block
                args[position] = data.reshape(original.shape)
        self._args = tuple(args)

    @property
    def args(self) -> tuple[Any, ...]:
        """The copied arguments."""
        return self._args

    def read(self, position: int) -> Any:
        """Argument ``position`` as it is now."""
        return self._args[position]

    def damaged(self) -> list[int]:
        """Outputs whose canary block changed."""
        return [p for p, block in self._blocks.items() if not np.all(block[-CANARY_BYTES:] == CANARY_VALUE)]


def default_tolerance(dtype: np.dtype[Any]) -> tuple[float, float] | None:
    """(rtol, atol scale) for ``dtype``'s rounding, or None when values must match exactly.

    ``sqrt(eps)`` leaves room for a different summation order over long reductions (whose
    error grows with sqrt(n) * eps) while still catching any indexing mistake, which is off
    by the data's own magnitude. atol is this times the largest expected magnitude, so
    values that cancel to near zero do not demand impossible relative accuracy.
    """
    if dtype.kind in "fc":
        eps = _eps(dtype)
        return math.sqrt(eps), math.sqrt(eps)
    return None


def _eps(dtype: np.dtype[Any]) -> float:
    return float(np.finfo(dtype).eps)


def _num(value: Any) -> str:
    return f"{complex(value):.6g}" if isinstance(value, complex | np.complexfloating) else f"{float(value):.6g}"


def _where(index: int, shape: tuple[int, ...]) -> str:
    return str(tuple(int(i) for i in np.unravel_index(index, shape))) if shape else "()"


def precision_floor(inputs: Sequence[Any]) -> np.dtype[Any] | None:
    """The finest float dtype among the array inputs (not scalars), or None when no input is a float array."""
    dtypes = [
        np.dtype(value.dtype)
        for value in inputs
        if getattr(value, "ndim", 0) > 0 and getattr(getattr(value, "dtype", None), "kind", "") in ("f", "c")
    ]
    return min(dtypes, key=_eps, default=None)


class _Expected:
    """One expected float output, prepared once for every candidate a gate compares with it.

    A tune compares every candidate's output with the same expected value: what depends on that
    value alone (it as float64, its magnitudes, whether it is finite, the tolerance each element
    gets) is computed here once. The checks then make a few passes over each candidate's output
    instead of some twenty (a 1024x1024 float32 output: 27 ms a candidate before, measured here).
    """

    def __init__(self, expected: np.ndarray) -> None:
        self.e = expected.astype(np.float64).reshape(-1)
        self.magnitude = np.abs(self.e)
        self.usable = bool(np.isfinite(self.e).all())
        self.zeros = np.flatnonzero(self.magnitude == 0)  # where an error's relative size is 0 or infinite
        self.scale = float(np.max(self.magnitude, initial=0.0))
        self._allowed: dict[tuple[float, float], np.ndarray] = {}

    def allowed(self, rtol: float, atol: float) -> np.ndarray:
        if (rtol, atol) not in self._allowed:
            self._allowed[rtol, atol] = atol + rtol * self.magnitude
        return self._allowed[rtol, atol]


def _prepared(expected: Any) -> _Expected | None:
    """``expected`` prepared for repeated float comparisons, or None when the fast path cannot serve it."""
    arr = np.asarray(expected)
    if arr.dtype.kind != "f" or arr.size == 0:
        return None
    prepared = _Expected(arr)
    # Non-finite expected values take the full path, which handles them element by element.
    return prepared if prepared.usable else None


def _fast(
    got_arr: np.ndarray, expected_arr: np.ndarray, prepared: _Expected, rtol: float, atol: float, label: str
) -> CheckOutcome | None:
    """The outcome of a passing float output, in few passes; None (take the full path) when any element fails.

    The same figures as the full path: a pass needs every element within the same tolerance, and a
    NaN or infinity in the output fails ``diff <= allowed`` as it fails there. A failing output is
    judged again by the full path, which names the worst element in its own words.
    """
    tolerance = default_tolerance(
        max((a.dtype for a in (got_arr, expected_arr) if a.dtype.kind in "fc"), key=_eps, default=expected_arr.dtype)
    )
    if tolerance is None:
        return None
    base_rtol, atol_scale = tolerance
    use_rtol, use_atol = max(base_rtol, rtol), max(atol_scale * prepared.scale, atol)
    diff = np.subtract(got_arr.reshape(-1), prepared.e, dtype=np.float64)
    np.abs(diff, out=diff)
    if not bool(np.less_equal(diff, prepared.allowed(use_rtol, use_atol)).all()):
        return None
    worst = int(np.argmax(diff))
    max_abs = float(diff[worst])
    at_zeros = diff[prepared.zeros]
    with np.errstate(divide="ignore", invalid="ignore"):
        rel = np.divide(diff, prepared.magnitude, out=diff)
    rel[prepared.zeros] = np.where(at_zeros == 0, 0.0, np.inf)  # as the full path: 0 / 0 is no error
    max_rel = float(np.max(rel))
    kind = f"rtol {use_rtol:.3g}, atol {use_atol:.3g}"
    return CheckOutcome(True, f"{label}: within {kind}; max abs error {max_abs:.3g}", max_abs, max_rel)


def compare(
    got: Any,
    expected: Any,
    *,
    rtol: float = 0.0,
    atol: float = 0.0,
    label: str = "output",
    floor: np.dtype[Any] | None = None,
    prepared: _Expected | None = None,
) -> CheckOutcome:
    """Compare one output with its expected value; the outcome names the worst element.

    ``floor`` is the finest float dtype of the inputs (:func:`precision_floor`): a float output
    coarser than both it and the expected value threw away precision the inputs carried, and
    fails, instead of being held to its own, looser rounding. When the user gave ``rtol`` or
    ``atol``, they said how close is close enough: such an output is then held to the rounding
    of the dtype it should have had, widened by them, rather than refused outright.

    ``prepared``: ``expected`` prepared once (``_prepared``) by a caller comparing many outputs with it.
    """
    expected_arr = np.asarray(expected)
    try:
        got_arr = np.asarray(got)
    except ClientClosed:  # a device array read back from a client closed meanwhile: no candidate's fault
        raise
    except Exception as exc:
        return CheckOutcome(False, f"{label}: cannot be read as an array ({type(exc).__name__}: {exc})")
    if got_arr.shape != expected_arr.shape:
        return CheckOutcome(False, f"{label}: shape {got_arr.shape} differs from the expected {expected_arr.shape}")
    if expected_arr.size == 0:
        return CheckOutcome(True, f"{label}: empty")
    # A float32 kernel of float32 inputs checked against a float64 reference is held to float32's rounding.
    coarser = max(
        (a.dtype for a in (got_arr, expected_arr) if a.dtype.kind in "fc"),
        key=_eps,
        default=expected_arr.dtype,
    )
    if (
        floor is not None
        and got_arr.dtype.kind in "fc"
        and expected_arr.dtype.kind in "fc"
        and _eps(got_arr.dtype) > max(_eps(expected_arr.dtype), _eps(floor))
    ):
        # Held to float16's rounding, a float16 result of float64 inputs would pass and could win.
        enough = max(expected_arr.dtype, floor, key=_eps)
        if rtol == 0 and atol == 0:
            return CheckOutcome(
                False,
                f"{label}: {got_arr.dtype} values where the expected value is {expected_arr.dtype} and the inputs "
                f"hold {floor}: the candidate loses precision its inputs carry (return {enough} or finer, or give "
                "with_reference(rtol=..., atol=...) the error you accept)",
            )
        coarser = enough  # not the output's own, looser rounding: the user's rtol/atol say how much more to allow
    elif prepared is not None and got_arr.dtype.kind in "fiu":
        fast = _fast(got_arr, expected_arr, prepared, rtol, atol, label)
        if fast is not None:
            return fast
    tolerance = default_tolerance(coarser)
    if tolerance is None and expected_arr.dtype.kind not in "biu":
        # Objects, strings: only equality means anything.
        try:
            same = bool(np.array_equal(got_arr, expected_arr))
        except ClientClosed:
            raise
        except Exception as exc:  # a dict of arrays: its == is an array, whose truth value numpy refuses
            return CheckOutcome(
                False,
                f"{label}: a {type(expected).__name__} cannot be compared ({type(exc).__name__}: {exc}); "
                "return numpy arrays or scalars, or a tuple of them (one per output)",
            )
        return CheckOutcome(same, f"{label}: {'equal' if same else 'not equal to the expected value'}")
    wide = np.float64 if expected_arr.dtype.kind != "c" else np.complex128
    try:
        e = expected_arr.astype(wide).reshape(-1)
        g = got_arr.astype(wide).reshape(-1)
    except (TypeError, ValueError) as exc:
        return CheckOutcome(False, f"{label}: a {got_arr.dtype} value where numbers were expected ({exc})")
    magnitude = np.abs(e)
    # Finite values everywhere (the usual case) need none of the NaN and infinity handling below:
    # skipping it keeps checking a large output to a few passes over it.
    finite = bool(np.isfinite(e).all() and np.isfinite(g).all())
    with np.errstate(divide="ignore", over="ignore", invalid="ignore"):  # inf - inf: handled below
        diff = np.abs(g - e)
    if finite:
        both_nan = infinite = np.zeros(0, bool)
    else:
        both_nan = np.isnan(e) & np.isnan(g)  # NaN where NaN is expected is a match
        diff = np.where(both_nan, 0.0, diff)
        # An infinite expected value is met only by the same infinity: its tolerance (rtol * inf) would let
        # any finite value, NaN or the other infinity pass.
        infinite = np.isinf(e)
        diff = np.where(infinite, np.where(g == e, 0.0, np.inf), diff)
        diff = np.where(np.isnan(diff), np.inf, diff)
    with np.errstate(divide="ignore", over="ignore", invalid="ignore"):
        rel = np.where(diff == 0, 0.0, diff / magnitude if finite else np.where(infinite, np.inf, diff / magnitude))
    if tolerance is None:
        allowed: Any = atol
        kind = "exact" if atol == 0 else f"atol {atol:g}"
    else:
        base_rtol, atol_scale = tolerance
        scale = float(np.max(magnitude if finite else magnitude[np.isfinite(e)], initial=0.0))
        use_rtol = max(base_rtol, rtol)
        use_atol = max(atol_scale * scale, atol)
        if finite:
            allowed = use_atol + use_rtol * magnitude
        else:
            allowed = np.where(infinite, 0.0, use_atol + use_rtol * np.abs(np.where(infinite, 0.0, e)))
        kind = f"rtol {use_rtol:.3g}, atol {use_atol:.3g}"
    bad = ~(diff <= allowed) if finite else ~(diff <= allowed) & ~both_nan
    worst = int(np.argmax(diff))
    max_abs = float(diff[worst])
    max_rel = float(np.max(rel))
    if not bad.any():
        return CheckOutcome(True, f"{label}: within {kind}; max abs error {max_abs:.3g}", max_abs, max_rel)
    shape = expected_arr.shape
    return CheckOutcome(
        False,
        f"{label}: {int(bad.sum())} of {bad.size} elements differ ({kind}); max abs error {max_abs:.3g} at "
        f"{_where(worst, shape)} (got {_num(g[worst])}, expected {_num(e[worst])}); max rel error {max_rel:.3g} at "
        f"{_where(int(np.argmax(rel)), shape)}",
        max_abs,
        max_rel,
    )


def as_outputs(value: Any, count: int, what: str) -> tuple[Any, ...]:
    """``value`` as a tuple of ``count`` outputs (a single output may be given bare)."""
    if count == 1 and not isinstance(value, tuple):
        return (value,)
    if not isinstance(value, tuple) or len(value) != count:
        raise TypeError(f"{what} must give {count} outputs (a tuple, one per output position), got {value!r:.80}")
    return value


def _is_scalar(value: Any) -> bool:
    return value is None or isinstance(value, np.generic | int | float | complex | str | bytes)


def _check_expected_fits(position: int, expected: Any, argument: Any, shape: object) -> None:
    """Refuse a reference's value for an in-place output that no candidate's output could match.

    A candidate cannot change the shape of an argument it writes: a reference value of another shape
    (or None, a dict) would fail every candidate with "shape (n,) differs from the expected ...",
    blaming the kernels for the reference's mistake.
    """
    if not isinstance(shape, tuple) or isinstance(argument, np.generic):
        return
    try:
        expected_shape = None if expected is None or isinstance(expected, dict) else np.shape(expected)
    except Exception as exc:  # a ragged list: no array of the argument's shape, so no candidate could match it
        raise ReferenceFailed(
            f"the reference function of with_reference() returned a {type(expected).__name__} for argument "
            f"{position}, an array of shape {shape}, that numpy cannot read as one array ({exc}): return the values "
            "a correct candidate leaves in it, an array of that shape (one value per position of outputs=, in its "
            "order)"
        ) from None
    if expected_shape != shape:
        returned = (
            "None"
            if expected is None
            else type(expected).__name__ + ("" if expected_shape is None else f" of shape {expected_shape}")
        )
        raise ReferenceFailed(
            f"the reference function of with_reference() returned {returned} for argument {position}, an array "
            f"of shape {shape}: return the values a correct candidate leaves in it, an array of that shape (one "
            "value per position of outputs=, in its order)"
        )


def _refuse_one_value_per_argument(expected: Any, outputs: Sequence[int], arguments: int) -> None:
    """Refuse a value per argument with None for the unchecked ones, as Kernel Tuner's ``answer=`` list is.

    Read as the outputs' values it fails every candidate with numpy's "inhomogeneous shape",
    blaming the kernels for the reference's mistake.
    """
    if not isinstance(expected, list | tuple) or len(expected) != arguments or len(outputs) == arguments:
        return
    if any(expected[p] is not None for p in range(arguments) if p not in outputs) or all(v is None for v in expected):
        return
    wanted = (
        f"the array for argument {outputs[0]} alone (return answer[{outputs[0]}])"
        if len(outputs) == 1
        else "a tuple of one array per position, in that order (return "
        + ", ".join(f"answer[{p}]" for p in outputs)
        + ")"
    )
    raise ReferenceFailed(
        f"the reference function of with_reference() returned a {type(expected).__name__} of {arguments} values, one "
        f"per argument with None for those not checked, as Kernel Tuner's answer= takes; return only the values of "
        f"the outputs={list(outputs)} arguments: {wanted}"
    )


class ReferenceFailed(TunekitError):
    """The set's check cannot run (its reference function failed, or an output cannot be read as numbers).

    The tune stops instead of blaming every candidate for the set's mistake.
    """


class Gate:
    """The check of one tune: computes the expected outputs once, then judges each candidate.

    Without a reference function, the first candidate that runs becomes the baseline.
    """

    def __init__(self, client: object, inputs: tuple[Any, ...], reference: Reference) -> None:
        self.client = client
        self.inputs = inputs
        self.reference = reference
        self._expected: tuple[Any, ...] | None = None
        self.against = "reference" if reference.fn is not None else ""
        self._floor = precision_floor(inputs)
        self._first: tuple[Any, ...] | None = None
        self._prepared: dict[int, _Expected | None] = {}  # by output, for the expected outputs now held
        self._judged = _Judged()
        self._before: tuple[np.ndarray | None, ...] = ()  # each output as the candidates find it, with a reference

    def _buffers(self) -> CheckBuffers:
        outputs = self.reference.outputs or ()
        if any(p >= len(self.inputs) for p in outputs):
            raise ReferenceFailed(
                f"with_reference(outputs={list(outputs)}) names an argument position beyond the "
                f"{len(self.inputs)} inputs"
            )
        scalars = [p for p in outputs if _is_scalar(self.inputs[p])]
        if scalars:  # nothing a candidate does can change it: every candidate would fail, blamed for it
            p = scalars[0]
            raise ReferenceFailed(
                f"with_reference(outputs={list(outputs)}) names argument {p}, a {type(self.inputs[p]).__name__} "
                f"({self.inputs[p]!r:.40}), which a candidate cannot write in place; name the positions of the "
                "arrays or buffers it writes"
            )
        # The timed runs of a candidate that writes in place (outputs=) change the benchmark
        # inputs, and a search checks each batch after the earlier ones were timed: copied as
        # they are by then, every correct candidate of a later batch would fail against outputs
        # expected from the inputs as they were at the first check. So every check copies that
        # first state, kept here (taken before anything is timed: the first check precedes it).
        first = self.keep_first_inputs()
        return self._copies(first, outputs)

    def _copies(self, inputs: tuple[Any, ...], outputs: Sequence[int]) -> CheckBuffers:
        client = self.client
        if isinstance(client, SupportsCheckBuffers):
            return client.check_buffers(inputs, outputs)
        return HostCheckBuffers(inputs, outputs)

    def _run(self, fn: Callable[..., Any]) -> tuple[tuple[Any, ...], list[int]]:
        """Run ``fn`` on fresh copies; its outputs as host values and the damaged canaries."""
        buffers = self._buffers()
        result = fn(*buffers.args)
        _sync(self.client)
        outputs = self.reference.outputs
        if outputs is None:
            return (result,) if not isinstance(result, tuple) else result, []
        return tuple(buffers.read(p) for p in outputs), buffers.damaged()

    def _reference_outputs(self, fn: Callable[..., Any]) -> tuple[Any, ...]:
        """The reference runs on host copies of every argument and returns the expected outputs."""
        buffers = self._buffers()
        host = [buffers.read(p) for p in range(len(buffers.args))]
        shapes = [getattr(value, "shape", None) for value in host]  # before the reference may rebind or resize them
        if self.reference.outputs is not None:  # copied: a reference may write its outputs in place
            self._before = tuple(_host_copy(host[p]) for p in self.reference.outputs)
        expected = fn(*host)
        if self.reference.outputs is not None:
            _refuse_one_value_per_argument(expected, self.reference.outputs, len(host))
            values = as_outputs(expected, len(self.reference.outputs), "the reference")
            if self.reference.compare is None:  # a custom compare may expect anything: a total, a sorted copy
                for position, value in zip(self.reference.outputs, values, strict=True):
                    _check_expected_fits(position, value, host[position], shapes[position])
            return values
        if expected is None:
            raise TypeError(f"the reference returned None; {_RETURN_VALUES}")
        return expected if isinstance(expected, tuple) else (expected,)

    def prime(self) -> None:
        """Compute the reference's expected outputs now, in this process (a no-op without a reference function).

        An isolated tune primes the gate in the caller, so worker processes inherit (or are sent)
        the expected outputs instead of re-running the reference, and a crash cannot lose them.
        The reference runs once; its exception becomes ReferenceFailed, which blames no one.
        """
        if self._expected is None and self.reference.fn is not None:
            try:
                self._expected = self._reference_outputs(self.reference.fn)
            except (ClientClosed, ReferenceFailed):  # neither is the reference's fault: the tune stops with it
                raise
            except Exception as exc:
                # The reference is the user's, not a candidate's: no candidate is to blame.
                raise ReferenceFailed(
                    f"the reference function of with_reference() raised {type(exc).__name__}: {exc}"
                ) from exc

    @property
    def baseline(self) -> tuple[tuple[Any, ...], str] | None:
        """The expected outputs and what they came from, once known."""
        return None if self._expected is None else (self._expected, self.against)

    def adopt(self, expected: tuple[Any, ...], against: str) -> None:
        """Take expected outputs computed in another process (an isolated worker's first candidate)."""
        self._expected, self.against = expected, against
        self._prepared.clear()
        self._judged = _Judged()

    @property
    def untouched(self) -> bool:
        """No candidate was checked yet, so none was timed: the inputs are as the tune began with them."""
        return self._first is None

    def keep_first_inputs(self) -> tuple[Any, ...]:
        """The copy of the inputs as the first check found them, taken now if not yet (see ``_buffers``)."""
        if self._first is None:
            self._first = self._copies(self.inputs, ()).args
        return self._first

    def judge(self, got: tuple[Any, ...]) -> CheckOutcome:
        """Judge outputs computed elsewhere: a candidate's first run on a copy of the inputs as they are at the
        first check (a compile worker's launch), with its canaries found intact. Needs a primed reference."""
        if self._expected is None or self.reference.fn is None or self.reference.outputs is None:
            raise TypeError("Gate.judge() needs a reference function, its outputs= and a primed gate")
        return self._verdict(self.against, got, [])

    def check(self, name: str, fn: Callable[..., Any]) -> CheckOutcome:
        """Run candidate ``name`` once and judge it; an exception from the candidate propagates."""
        self.prime()
        got, damaged = self._run(fn)
        return self._verdict(name, got, damaged)

    def _verdict(self, name: str, got: tuple[Any, ...], damaged: list[int]) -> CheckOutcome:
        if self.reference.outputs is None and any(value is None for value in got):
            return CheckOutcome(False, f"returned None where an output was expected; {_RETURN_VALUES}")
        if damaged:
            positions = ", ".join(f"argument {p}" for p in damaged)
            return CheckOutcome(False, f"wrote past the end of its output buffer ({positions}): canary overwritten")
        if self._expected is None:
            self._expected = got
            self.against = name
            return CheckOutcome(True, "first candidate to run: the baseline the others are compared with")
        if len(got) != len(self._expected):
            return CheckOutcome(False, f"returned {counted(len(got), 'output')}, expected {len(self._expected)}")
        judged = self._judged.get(got)
        if judged is None:
            judged = self._judge(got, self._expected)
            self._judged.keep(got, judged)
        return judged

    def _judge(self, got: tuple[Any, ...], expected: tuple[Any, ...]) -> CheckOutcome:
        """Compare each output with its expected value: the first that fails, else every output's figures."""
        worst = CheckOutcome(True, "")
        details = []
        labels = self.reference.outputs or range(len(got))
        custom = self.reference.compare
        for number, (label, g, e) in enumerate(zip(labels, got, expected, strict=True)):
            what = f"argument {label}" if self.reference.outputs is not None else f"output {label}"
            if custom is not None:
                outcome = _custom(custom, e, g, what)
                details.append(outcome.detail)
                if not outcome.passed:
                    return outcome
                continue
            if number not in self._prepared:
                self._prepared[number] = _prepared(e)
            outcome = compare(
                g,
                e,
                rtol=self.reference.rtol,
                atol=self.reference.atol,
                label=what,
                floor=self._floor,
                prepared=self._prepared[number],
            )
            details.append(outcome.detail)
            if not outcome.passed:
                before = self._before[number] if number < len(self._before) else None
                return _with_unwritten(outcome, g, e, before)
            if (outcome.max_abs_error or 0.0) >= (worst.max_abs_error or 0.0):
                worst = outcome
        return CheckOutcome(True, "; ".join(details), worst.max_abs_error, worst.max_rel_error)


def _custom(compare: Compare, expected: Any, got: Any, label: str) -> CheckOutcome:
    """One output judged by the user's ``compare(expected, got)``: True passes; False or an exception fails.

    An exception is the likeliest way to say why (``np.testing.assert_allclose`` names the worst
    element), so its message becomes the failure's reason, as the built-in comparison's words do.
    """
    name = getattr(compare, "__qualname__", type(compare).__name__)
    try:
        verdict = compare(expected, got)
    except ClientClosed:  # a device array read after its client closed: no candidate's fault
        raise
    except Exception as exc:
        message = str(exc).strip() or "no message"
        return CheckOutcome(False, f"{label}: compare={name} raised {type(exc).__name__}: {message}")
    if isinstance(verdict, bool | np.bool_):
        if verdict:
            return CheckOutcome(True, f"{label}: compare={name} passed it")
        return CheckOutcome(False, f"{label}: compare={name} returned False")
    # None (a function that only asserts, or forgot its return) passing would make a check that cannot fail.
    return CheckOutcome(
        False,
        f"{label}: compare={name} returned {type(verdict).__name__}, not a bool: return True when the output "
        "is right and False (or raise, saying why) when it is not",
    )


def _host_copy(value: Any) -> np.ndarray | None:
    """A numeric array's copy, to tell later which elements a candidate left as they were; None for others."""
    if not isinstance(value, np.ndarray) or value.dtype.kind not in "biufc":
        return None
    return value.copy()


def _with_unwritten(outcome: CheckOutcome, got: Any, expected: Any, before: np.ndarray | None) -> CheckOutcome:
    """A failed outcome, saying how many elements the candidate never wrote, where it left some.

    Elements that should change but hold their value from before the launch, bit for bit, are
    the mark of a launch too small (a global size given in work-groups rather than work-items,
    a grid rounded down) or a bounds check too strict; the error figures alone do not say so.
    """
    if before is None:
        return outcome
    try:
        g, e = np.asarray(got), np.asarray(expected)
        if g.shape != before.shape or e.shape != before.shape or g.dtype != before.dtype:
            return outcome
        with np.errstate(invalid="ignore"):
            # Bit for bit: an uninitialised output (pyopencl.array.empty) holds NaNs, which == never matches.
            same = _bits(g) == _bits(before) if g.dtype.itemsize in (1, 2, 4, 8) else g == before
            unwritten = (same & (e != before)).reshape(-1)
    except Exception:  # what compare() could read but this cannot: the figures stand alone
        return outcome
    count = int(unwritten.sum())
    if count == 0:
        return outcome
    first = int(np.argmax(unwritten))
    return CheckOutcome(
        False,
        f"{outcome.detail}; {count} elements that the reference changes still hold the value they had before "
        f"the launch (the first at {_where(first, before.shape)}), as if never written: is the launch too small "
        "(an OpenCL global size counts work-items, not work-groups; a grid rounded down) or a bounds check too "
        "strict?",
        outcome.max_abs_error,
        outcome.max_rel_error,
    )


def _bits(values: np.ndarray) -> np.ndarray:
    """The array's elements as unsigned integers of their bits."""
    return np.ascontiguousarray(values).view(f"u{values.dtype.itemsize}")


class _Judged:
    """The verdicts on the last few distinct outputs, by their bits: a candidate whose outputs are bit for bit
    those of one judged before gets that verdict, figures and words included, without comparing again.

    Variants of one kernel mostly compute each element the same way, so their outputs are
    identical: on a 1024x1024 float32 output the comparison costs 4.3 ms and the bitwise
    equality 0.1 ms (measured here). Only numeric numpy arrays are remembered, as copies: a
    candidate may return one array object again, rewritten, and a view would vouch for new bits.
    """

    _KEEP = 4
    _MAX_BYTES = 256 << 20

    def __init__(self) -> None:
        self._seen: list[tuple[tuple[np.ndarray, ...], CheckOutcome]] = []

    def get(self, got: tuple[Any, ...]) -> CheckOutcome | None:
        arrays = _numeric(got)
        if arrays is None:
            return None
        for kept, outcome in self._seen:
            if all(_same_bits(a, k) for a, k in zip(arrays, kept, strict=True)):
                return outcome
        return None

    def keep(self, got: tuple[Any, ...], outcome: CheckOutcome) -> None:
        arrays = _numeric(got)
        if arrays is None or sum(a.nbytes for a in arrays) > self._MAX_BYTES // self._KEEP:
            return
        self._seen.insert(0, (tuple(np.array(a, copy=True, order="C") for a in arrays), outcome))
        del self._seen[self._KEEP :]


def _numeric(got: tuple[Any, ...]) -> tuple[np.ndarray, ...] | None:
    """``got`` when every output is a numpy array of numbers (not objects), else None."""
    if all(isinstance(g, np.ndarray) and g.dtype.kind in "biufc" for g in got):
        return got
    return None


def _same_bits(got: np.ndarray, kept: np.ndarray) -> bool:
    """Whether ``got`` holds exactly the bits of ``kept`` (NaN payloads and signed zeros included)."""
    if got.dtype != kept.dtype or got.shape != kept.shape:
        return False
    flat = np.ascontiguousarray(got).reshape(-1).view(np.uint8)
    word = np.uint64 if flat.size % 8 == 0 else np.uint8
    return bool(np.array_equal(flat.view(word), kept.reshape(-1).view(np.uint8).view(word)))


def _sync(client: object) -> None:
    sync = getattr(client, "sync", None)
    if callable(sync):
        sync()
