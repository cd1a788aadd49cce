"""Declared search spaces: named parameters, their values, and restrictions.

A space is never materialised: enumeration is a generator over the Cartesian product
(last parameter fastest, as ``itertools.product``), and sampling draws Cartesian indices
and rejects restricted-out ones, so a 10^6-point space costs nothing until it is walked.
"""

from __future__ import annotations

import hashlib
import inspect
import itertools
import json
import math
import numbers
import re
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence, Set as AbstractSet, ValuesView
from typing import TYPE_CHECKING, Any

import numpy as np
import numpy.typing as npt

from tunekit._base.code_identity import restriction_identity
from tunekit._candidates.config import (
    _DICT_ONLY,
    SCALARS,
    Config,
    ParamValue,
    _hidden,
    check_name,
)

if TYPE_CHECKING:
    from tunekit._candidates.space_model import SpaceModel

__all__ = ["ParamValues", "Restriction", "Space", "pow2"]


ParamValues = Sequence[ParamValue] | Iterator[ParamValue] | npt.NDArray[Any]
"""A parameter's values in the order given: a list, tuple, range, ``tk.pow2(...)``, numpy array or iterator.

Not ``Iterable``, which would let a type checker pass a ``set`` or a ``dict``: a set has no
stable order (the space's hash would change between runs) and a dict is ambiguous (keys or
values?), so both are refused at run time, and a type checker says so first. A ``str`` is a
``Sequence`` that typing cannot leave out; it is refused at run time.
"""

Restriction = Callable[["Config"], "bool | np.bool_"]
"""A predicate over a configuration: True keeps it in the space (a bool or numpy.bool_; anything else is refused)."""

_INT64_MAX = int(np.iinfo(np.int64).max)
_INT32_MAX = int(np.iinfo(np.int32).max)
_MAX_REMEMBERED = 1 << 20
_HOPELESS_DRAWS = 500_000
"""Random draws that found no valid point, past which a space too big to walk is refused."""


def pow2(lo: int, hi: int) -> tuple[int, ...]:
    """The powers of two from ``lo`` up to ``hi``: ``lo, 2*lo, 4*lo, ...``, each at most ``hi``.

    ``tk.pow2(64, 1024) == (64, 128, 256, 512, 1024)``; ``hi`` is only a bound:
    ``tk.pow2(64, 1000) == (64, 128, 256, 512)``. ``lo`` must be a power of two, or the range
    would hold none (``48, 96, 192, ...``): that is refused, naming the call that gives powers
    of two within the bounds and the list that gives the doubled values.
    """
    if isinstance(lo, bool) or isinstance(hi, bool) or not isinstance(lo, int) or not isinstance(hi, int):
        raise TypeError(f"tk.pow2(lo, hi) takes two ints, got {lo!r}, {hi!r}")
    if lo < 1 or hi < lo:
        raise ValueError(f"tk.pow2(lo, hi) needs 1 <= lo <= hi, got lo={lo}, hi={hi}")
    values = []
    value = lo
    while value <= hi:
        values.append(value)
        value *= 2
    if lo & (lo - 1):
        # A "pow2" parameter of 48, 96, 192 reads as powers of two in the code and the docs, and
        # kernels written for powers of two would get none of them.
        first, last = 1 << (lo - 1).bit_length(), 1 << (hi.bit_length() - 1)
        within = f"tk.pow2({first}, {last})" if first <= last else f"none lie between {lo} and {hi}"
        raise ValueError(
            f"tk.pow2({lo}, {hi}): {lo} is not a power of two, so doubling it gives {', '.join(map(str, values))}, "
            f"none of them powers of two; for the powers of two within the bounds: {within}; "
            f"for the doubled values, give them as a list: {list(values)}"
        )
    return tuple(values)


for _name in _DICT_ONLY:
    setattr(Config, _name, _hidden(_name))


def _scalar_hint(value: object) -> str:
    """What to give instead of a value no configuration can hold, by what the value is."""
    if isinstance(value, tuple | list):
        return (
            f"a value is one scalar: split {value!r} into one parameter per element, or name it with a str "
            "and decode that in build"
        )
    if value is None:
        return "name an absent setting with a str (such as 'none') or add a bool parameter"
    if isinstance(value, float):
        return "give finite floats: JSON, which trial logs and records are written in, has no inf or nan"
    return "give one of those (its name as a str, say) and map it back in build"


def _domain(name: str, values: ParamValues) -> tuple[ParamValue, ...]:
    """A parameter's values, checked: ordered, scalar, distinct and distinctly named."""
    if isinstance(values, str | bytes) or not isinstance(values, Iterable):
        raise TypeError(f"tk.Space parameter {name!r}: give its values as a list, tuple or range, got {values!r}")
    if isinstance(values, AbstractSet):
        # A set's iteration order changes with PYTHONHASHSEED, and with it the space's hash,
        # its enumeration order and every neighbourhood.
        raise TypeError(
            f"tk.Space parameter {name!r}: a {type(values).__name__} has no stable order (it changes between runs); "
            "give its values as a list in the order you want"
        )
    if isinstance(values, Mapping | ValuesView):
        raise TypeError(
            f"tk.Space parameter {name!r}: a {type(values).__name__} is ambiguous here (its keys or its values?); "
            "give its values as a list in the order you want"
        )
    # numpy scalars (np.arange, np.linspace) become Python ones: the same values, names and hash as a list.
    domain = tuple(v.item() if isinstance(v, np.generic) else v for v in values)
    if not domain:
        raise ValueError(f"tk.Space parameter {name!r} has no values")
    by_value: dict[ParamValue, ParamValue] = {}
    by_text: dict[str, ParamValue] = {}
    for value in domain:
        if not isinstance(value, SCALARS) or (isinstance(value, float) and not math.isfinite(value)):
            raise TypeError(
                f"tk.Space parameter {name!r}: value {value!r} is not an int, finite float, str or bool; "
                + _scalar_hint(value)
            )
        if isinstance(value, str) and ("," in value or "=" in value):
            raise ValueError(
                f"tk.Space parameter {name!r}: value {value!r} contains ',' or '=', which would make configuration "
                f"names ({name}=...,...) ambiguous; use another character, such as ':' or '_'"
            )
        if value in by_value:
            # 1, 1.0 and True are equal (and hash alike), so their Configs would be one configuration.
            other = by_value[value]
            if type(other) is type(value):
                raise ValueError(f"tk.Space parameter {name!r} repeats a value: {list(domain)}")
            raise ValueError(
                f"tk.Space parameter {name!r}: values {other!r} and {value!r} compare equal in Python, so their "
                "configurations would be the same one; keep one of them, or use distinct values of one type"
            )
        if str(value) in by_text:
            raise ValueError(
                f"tk.Space parameter {name!r}: values {by_text[str(value)]!r} and {value!r} would both be named "
                f"{name}={value}, and names identify candidates; keep values of one type"
            )
        by_value[value] = value
        by_text[str(value)] = value
    return domain


def _restrictions(
    restrict: Restriction | Sequence[Restriction] | None, names: Sequence[str]
) -> tuple[Restriction, ...]:
    """The restriction predicates, refusing anything else (a string, a bool, a generator)."""
    if restrict is None:
        return ()
    if callable(restrict):
        _check_one_argument(restrict, 0, 1)
        return (restrict,)
    bad: object = restrict
    if isinstance(restrict, list | tuple):
        bad = next((fn for fn in restrict if not callable(fn)), None)
        if bad is None:
            restrictions = tuple(restrict)
            for position, fn in enumerate(restrictions):
                _check_one_argument(fn, position, len(restrictions))
            return restrictions
    if isinstance(bad, str):
        strings = [restrict] if isinstance(restrict, str) else list(restrict)
        lambdas = [_as_lambda(r, names) if isinstance(r, str) else "..." for r in strings]
        fix = lambdas[0] if isinstance(restrict, str) else f"[{', '.join(lambdas)}]"
        raise TypeError(
            f"tk.Space(restrict=...) takes a predicate (config -> bool) or a list of them, got the string {bad!r}; "
            f"a restriction is a Python function of one configuration, not an expression in a string (as Kernel "
            f"Tuner's are): restrict={fix}"
        )
    raise TypeError(
        f"tk.Space(restrict=...) takes a predicate (config -> bool) or a list of them, got {bad!r}; "
        "e.g. restrict=lambda c: c.BLOCK * c.VEC <= 1024"
    )


def _as_lambda(expression: str, names: Sequence[str]) -> str:
    """A string restriction as the lambda that means it: each parameter name read from the configuration."""
    known = set(names)
    body = re.sub(r"(?<![\w.])[A-Za-z_]\w*", lambda m: f"c.{m[0]}" if m[0] in known else m[0], expression)
    return f"lambda c: {body}"


def _check_one_argument(fn: Restriction, position: int, count: int) -> None:
    """Refuse, where the space is declared, a restriction that cannot be called with one configuration.

    ``lambda BLOCK, VEC: BLOCK * VEC <= 1024`` (one argument per parameter, as Optuna or Kernel
    Tuner users write them) would fail at the first walk as "raised TypeError ... make it return
    False instead", which points at the wrong fix.
    """
    try:
        signature = inspect.signature(fn)
    except (TypeError, ValueError):  # a builtin or C callable without one: its first call will tell
        return
    try:
        signature.bind(None)
    except TypeError as exc:
        raise TypeError(
            f"{_restriction_label(fn, position, count)} cannot be called as restriction(config) ({exc}): a "
            "restriction takes one configuration and reads the parameters from it, "
            "e.g. restrict=lambda c: c.BLOCK * c.VEC <= 1024"
        ) from None


def _restriction_label(fn: Restriction, position: int, count: int) -> str:
    """``restriction 'fits' (#2 of 3)``: the name finds a def, the position finds a lambda in a list."""
    where = f" (#{position + 1} of {count} in restrict=)" if count > 1 else ""
    return f"restriction {getattr(fn, '__qualname__', type(fn).__qualname__)!r}{where}"


def _a(noun: str) -> str:
    return f"{'an' if noun[:1] in 'aeiou' else 'a'} {noun}"


def _short_repr(value: object) -> str:
    text = repr(value)
    return text if len(text) <= 80 else text[:77] + "..."


class Space:
    """A declared search space: ``tk.Space(BLOCK=tk.pow2(64, 1024), VEC=[1, 2, 4], restrict=...)``.

    Parameters keep their keyword order; values keep their given order (neighbourhoods
    follow it, so give ordered values in order). ``restrict`` is a predicate over a
    :class:`Config`, or a list of them, all of which must hold.
    """

    __slots__ = (
        "_at_least",
        "_cartesian",
        "_domain_list",
        "_domains",
        "_hash",
        "_names",
        "_restrictions",
        "_size",
        "_strides",
    )

    def __init__(
        self,
        *,
        restrict: Restriction | Sequence[Restriction] | None = None,
        **params: ParamValues,
    ) -> None:
        if not params:
            raise ValueError("tk.Space needs at least one parameter, e.g. tk.Space(BLOCK=tk.pow2(64, 1024))")
        domains = {check_name(name): _domain(name, values) for name, values in params.items()}
        restrictions = _restrictions(restrict, tuple(domains))
        self._names = tuple(domains)
        self._domains = domains
        # In parameter order: a strategy converts positions and configurations thousands of times a search.
        self._domain_list = tuple(domains[name] for name in self._names)
        self._restrictions = restrictions
        strides = []
        stride = 1
        for name in reversed(self._names):
            strides.append(stride)
            stride *= len(domains[name])
        self._strides = tuple(reversed(strides))
        self._cartesian = stride
        self._size: int | None = None if restrictions else self.cartesian_size
        self._at_least = 0  # valid configurations an earlier partial count found (size_up_to)
        self._hash = self._compute_hash()

    # -- structure -----------------------------------------------------------------

    @property
    def names(self) -> tuple[str, ...]:
        """Parameter names in declaration order."""
        return self._names

    @property
    def domains(self) -> Mapping[str, tuple[ParamValue, ...]]:
        """Each parameter's values, in declaration order."""
        return dict(self._domains)

    @property
    def restrictions(self) -> tuple[Restriction, ...]:
        """The restriction predicates."""
        return self._restrictions

    @property
    def cartesian_size(self) -> int:
        """Number of points before restrictions (free to compute)."""
        return self._cartesian

    @property
    def walk_cost(self) -> int:
        """Points a walk of the space (``iter``, ``size``) visits: its Cartesian product.

        A subclass that knows its valid points without testing the product (a replayed
        cache file) walks only those and says so here, so that drawing at random is weighed
        against the walk it really costs.
        """
        return self._cartesian

    def _draws_outcost_walk(self, tries: int, found: int, wanted: int) -> bool:
        """Whether drawing the ``wanted - found`` points still missing would cost more than half a walk.

        The expected draws left at the rate so far (none found yet counts as one, so a rare valid
        point is still looked for by rejection up to half a walk). One rule for ``sample`` and the
        strategies' walker, so both weigh ``walk_cost``: weighing the Cartesian product instead,
        the walker would draw for hours on a replayed sparse cache.
        """
        return (wanted - found) * tries > max(found, 1) * (self.walk_cost // 2)

    def _hopeless(self, tries: int, found: int) -> bool:
        """Whether ``tries`` draws that found nothing valid mean drawing cannot go on: no walk could settle it.

        A restriction that rejects everything (a typo: ``c.A < 0``) on 10^12 points would keep every
        search and ``sample`` drawing forever: half a walk of draws is weeks there.
        """
        return found == 0 and tries >= _HOPELESS_DRAWS and self.walk_cost > 2 * _HOPELESS_DRAWS

    def _hopeless_error(self, tries: int) -> ValueError:
        return ValueError(
            f"no configuration passed the space's restrictions in {tries:,} random draws of its "
            f"{self._cartesian:,} points: restrict= rejects everything, or so nearly everything that "
            "drawing at random cannot find what it allows. Check the restrictions; to search a space "
            "this sparse, declare the parameters they tie together as one parameter whose values are "
            "the allowed combinations"
        )

    @property
    def size(self) -> int:
        """Number of valid configurations; with restrictions, counted once by walking the space."""
        if self._size is None:
            self._size = sum(1 for _ in self)
        return self._size

    def counted_size(self) -> int | None:
        """The number of valid configurations when it is known without a walk, else None.

        Known for a space without restrictions, and once :attr:`size` (or a ``size_up_to``
        that reached the end) counted it.
        """
        return self._size

    def size_up_to(self, limit: int) -> int | None:
        """The number of valid configurations when it is at most ``limit``, else None.

        Walks the space only until ``limit + 1`` valid configurations are found, so the work is
        bounded by the answer asked for rather than by the space (``search``'s ``auto`` asks
        whether its budget covers the space). Both outcomes are remembered: a full walk as
        :attr:`size`, a cut one as a lower bound that later calls answer without walking.
        """
        if not isinstance(limit, numbers.Integral) or isinstance(limit, bool) or limit < 0:
            raise ValueError(f"Space.size_up_to(limit): limit must be an int >= 0, got {limit!r}")
        limit = int(limit)
        if self._size is not None:
            return self._size if self._size <= limit else None
        if self._at_least > limit:
            return None
        count = 0
        for _ in self:
            count += 1
            if count > limit:
                self._at_least = max(self._at_least, count)
                return None
        self._size = count
        return count

    @property
    def hash(self) -> str:
        """Stable hash of names, values (with their types) and restriction sources."""
        return self._hash

    def _compute_hash(self) -> str:
        payload = {
            "params": [[n, [[type(v).__name__, v] for v in self._domains[n]]] for n in self._names],
            "restrictions": [restriction_identity(fn) for fn in self._restrictions],
        }
        return hashlib.sha256(json.dumps(payload, sort_keys=True).encode()).hexdigest()[:32]

    def describe(self) -> SpaceModel:
        """The space as a pydantic model (restrictions by their source text)."""
        # Here, not at the top: a TunableSet imports this module, and pydantic would add ~60 ms
        # to every `import tunekit` for a model only a search's trial log and report ask for.
        from tunekit._candidates.space_model import SpaceModel  # noqa: PLC0415 - see above

        return SpaceModel(
            params={n: list(d) for n, d in self._domains.items()},
            restrictions=[restriction_identity(fn) for fn in self._restrictions],
            hash=self._hash,
        )

    # -- points --------------------------------------------------------------------

    def at(self, index: int) -> Config:
        """The configuration at Cartesian ``index`` (it may be restricted out)."""
        if not 0 <= index < self.cartesian_size:
            raise IndexError(f"Cartesian index {index} outside 0..{self.cartesian_size - 1}")
        return self.from_positions(
            tuple((index // s) % len(self._domains[n]) for n, s in zip(self._names, self._strides, strict=True))
        )

    def from_positions(self, positions: Sequence[int]) -> Config:
        """The configuration whose values sit at ``positions`` in each parameter's domain."""
        return Config(self._names, [domain[p] for domain, p in zip(self._domain_list, positions, strict=True)])

    def positions(self, config: Config) -> tuple[int, ...]:
        """Each value's position in its parameter's domain (a strategy's coordinates)."""
        if isinstance(config, Config) and config._names == self._names:
            return tuple([domain.index(v) for domain, v in zip(self._domain_list, config._values, strict=True)])
        return tuple(self._domains[n].index(config[n]) for n in self._names)

    def index(self, config: Config) -> int:
        """The Cartesian index of ``config``."""
        return sum(p * s for p, s in zip(self.positions(config), self._strides, strict=True))

    def allows(self, config: Config) -> bool:
        """Whether every restriction holds for ``config``.

        Raises TypeError when a restriction returns anything but a bool: ``"no"``, ``None`` (a
        branch without ``return``) or a numpy array would otherwise count as true, silently
        keeping configurations the user meant to exclude.
        """
        return self._rejecting(config) is None

    def _rejecting(self, config: Config) -> int | None:
        """The position of the first restriction that returns False for ``config``; None when all hold."""
        for position, fn in enumerate(self._restrictions):
            try:
                ok = fn(config)
            except Exception as exc:
                label = _restriction_label(fn, position, len(self._restrictions))
                if isinstance(exc, AttributeError) and exc.obj is config:
                    # A misspelt c.BLCK: "make it return False" would have it hide the typo.
                    raise ValueError(
                        f"{label} reads c.{exc.name}, which is no parameter of the space (it has "
                        f"{list(self._names)}); fix the name in the restriction"
                    ) from exc
                raise ValueError(
                    f"{label} raised {type(exc).__name__}: {exc} on {config!r}; make it return False instead"
                ) from exc
            if not isinstance(ok, bool | np.bool_):
                raise TypeError(
                    f"{_restriction_label(fn, position, len(self._restrictions))} returned "
                    f"{type(ok).__module__}.{type(ok).__qualname__} {_short_repr(ok)} on {config!r}; a restriction "
                    "must return a bool (True keeps the configuration): compare explicitly, e.g. "
                    "`c.BLOCK * c.VEC <= 1024`, return False on every path, and reduce an array with bool(...all())"
                )
            if not ok:
                return position
        return None

    def config(self, values: Mapping[str, Any] | None = None, /, **kw: Any) -> Config:
        """Check a user-given configuration against the space and return it as a :class:`Config`.

        Raises ValueError naming the missing or unknown parameter, the value outside its
        domain, or the restriction that excludes it.
        """
        # As when the space is declared: a numpy scalar (from np.arange, a DataFrame row) is the value it holds.
        given = {n: v.item() if isinstance(v, np.generic) else v for n, v in dict(values or {}, **kw).items()}
        unknown = sorted(set(given) - set(self._names))
        if unknown:
            raise ValueError(f"configuration {given!r} names unknown parameters {unknown}; the space has {self._names}")
        missing = [n for n in self._names if n not in given]
        if missing:
            raise ValueError(f"configuration {given!r} lacks parameters {missing}")
        for name in self._names:
            value, domain = given[name], self._domains[name]
            if not any(type(v) is type(value) and v == value for v in domain):
                # 256.0 or "256" against [64, 128, 256]: the list shows the value, so say the type is what differs.
                scalar = isinstance(value, SCALARS)
                alike = next((v for v in domain if str(v) == str(value) or v == value), None) if scalar else None
                hint = (
                    f" ({name}={value!r} is {_a(type(value).__name__)}, the space's is the "
                    f"{type(alike).__name__} {alike!r}: pass {name}={alike!r})"
                    if alike is not None
                    else ""
                )
                raise ValueError(f"configuration {given!r}: {name}={value!r} is not one of {list(domain)}{hint}")
        config = Config(self._names, [given[n] for n in self._names])
        rejecting = self._rejecting(config)
        if rejecting is not None:
            fn = self._restrictions[rejecting]
            # A lambda's name says nothing, so its source text names it (as describe() shows it).
            text = getattr(fn, "__qualname__", None)
            if not isinstance(text, str) or text.endswith("<lambda>"):
                text = restriction_identity(fn)
            raise ValueError(
                f"configuration {given!r} is excluded by the space's restriction #{rejecting + 1} of "
                f"{len(self._restrictions)} in restrict= ({_short_repr(text)}), which returned False for it; "
                "pick values that restriction allows"
            )
        return config

    def __contains__(self, item: object) -> bool:
        if not isinstance(item, Mapping):
            return False
        try:
            self.config(item)
        except ValueError:
            return False
        return True

    def __iter__(self) -> Iterator[Config]:
        """Valid configurations in Cartesian order, generated lazily."""
        # itertools.product has the order of at() (last parameter fastest) for a quarter of its
        # cost per point, which a walk (size, size_up_to, from_space) pays up to a million times.
        names = self._names
        if not self._restrictions:
            for values in itertools.product(*self._domain_list):
                yield Config(names, values)
            return
        for values in itertools.product(*self._domain_list):
            config = Config(names, values)
            if self._rejecting(config) is None:
                yield config

    def _valid_indices(self) -> npt.NDArray[Any] | None:
        """The Cartesian indices of the valid configurations, ascending (the order of ``iter``); None when all are.

        For ``TunableSet.from_space``, which keeps them instead of a tunable per configuration:
        4 bytes a point where a Config, a LazyBuild, a Tunable and a name take 600. The walk
        calls each restriction on each point, as ``size`` does, and counts the size on the way.
        """
        if not self._restrictions:
            return None
        names, rejecting = self._names, self._rejecting
        kept = np.fromiter(
            (rejecting(Config(names, values)) is None for values in itertools.product(*self._domain_list)),
            dtype=np.bool_,
            count=self._cartesian,
        )
        valid = np.flatnonzero(kept).astype(np.int32 if self._cartesian <= _INT32_MAX else np.int64)
        self._size = len(valid)
        return valid

    def sample(self, n: int, rng: np.random.Generator | int) -> list[Config]:
        """Up to ``n`` distinct valid configurations drawn uniformly at random.

        ``rng`` is a numpy Generator, or an int seed for one. Rejection sampling over Cartesian
        indices: nothing is materialised. When the restrictions reject so much that finishing
        by rejection would cost more than half a walk of the space, the space is walked once
        instead. Raises ValueError when 500,000 draws of a space too big to walk found nothing
        its restrictions allow.
        """
        if isinstance(rng, numbers.Integral) and not isinstance(rng, bool):
            rng = np.random.default_rng(int(rng))
        if not isinstance(rng, np.random.Generator):
            raise TypeError(
                f"Space.sample(n, rng): rng must be a numpy Generator or an int seed, got {type(rng).__name__}"
            )
        if not isinstance(n, numbers.Integral) or isinstance(n, bool) or n < 0:
            raise ValueError(f"Space.sample(n, rng): n must be an int >= 0, got {n!r}")
        return self._sample(int(n), rng)

    def _sample(self, n: int, rng: np.random.Generator, max_draws: int | None = None) -> list[Config]:
        """``sample``; with ``max_draws``, what that many draws found, unless a walk costs less than going on.

        A strategy's pool of guesses wants many points but not at any price: on a 10^12-point
        space at 0.1 % valid, 4096 of them cost four million restriction calls (20 s).
        """
        total = self._cartesian
        # numpy draws one index only below 2**63: past that (20 parameters of 10 values), each
        # parameter's position is drawn instead, which is as uniform over the Cartesian product.
        widths = None if total <= _INT64_MAX else np.array([len(self._domains[name]) for name in self._names])
        picked: dict[int, Config] = {}
        rejected: set[int] = set()
        tries = 0
        while len(picked) < n and len(picked) + len(rejected) < total:
            if max_draws is not None and tries >= max_draws:
                if not self._draws_outcost_walk(tries, len(picked), n):
                    return list(picked.values())
                break  # a walk costs less than the draws still wanted: a replayed sparse cache walks its keys
            if self._hopeless(tries, len(picked)):
                raise self._hopeless_error(tries)
            if tries >= 64 * n + 1024 and self._draws_outcost_walk(tries, len(picked), n):
                break
            tries += 1
            if widths is None:
                index = int(rng.integers(total))
            else:
                index = sum(int(p) * stride for p, stride in zip(rng.integers(0, widths), self._strides, strict=True))
            if index in picked or index in rejected:
                continue
            config = self.at(index)
            if self.allows(config):
                picked[index] = config
            elif len(rejected) < _MAX_REMEMBERED:
                # Past that, a rejected index is not kept (at 0.1 % valid, 4096 draws would keep 4 million
                # of them, 300 MiB): a repeat costs one more restriction call, and the count stays low, which
                # at worst walks the space for what rejection already found (same draws, same answer).
                rejected.add(index)
        if len(picked) < n and len(picked) + len(rejected) < total:
            rest = [c for c in self if self.index(c) not in picked]
            order = rng.permutation(len(rest))
            for i in order[: n - len(picked)]:
                picked[self.index(rest[int(i)])] = rest[int(i)]
        return list(picked.values())

    def neighbours(self, config: Config, *, adjacent: bool = True) -> list[Config]:
        """Valid configurations that differ from ``config`` in one parameter.

        ``adjacent``: only to the next or previous value of that parameter; otherwise to any value.
        """
        here = self.positions(config)
        out = []
        for k, name in enumerate(self._names):
            width = len(self._domains[name])
            targets = [here[k] - 1, here[k] + 1] if adjacent else range(width)
            for p in targets:
                if 0 <= p < width and p != here[k]:
                    candidate = self.from_positions((*here[:k], p, *here[k + 1 :]))
                    if self.allows(candidate):
                        out.append(candidate)
        return out

    def __repr__(self) -> str:
        params = ", ".join(f"{n}={list(d)}" for n, d in self._domains.items())
        more = f", {len(self._restrictions)} restriction(s)" if self._restrictions else ""
        return f"Space({params}{more})"

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Space) and other._hash == self._hash

    def __hash__(self) -> int:
        return hash(self._hash)
