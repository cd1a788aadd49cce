"""A set made by TunableSet.from_space: its tunables made when asked for, named and hashed as the tuple was."""

from __future__ import annotations

import gc
import hashlib
import itertools
import tracemalloc
from collections.abc import Callable
from typing import Any

import numpy as np
import pytest

import tunekit as tk
from tunekit._candidates.space_tunables import SpaceNames, SpaceTunables
from tunekit_backends.cpu import CpuClient
from tunekit_backends.replay import ReplaySpace, _KnownKeys


@tk.autotune_key
class Key:
    n: int


def _key(x: np.ndarray) -> Key:
    return Key(n=int(x.shape[0]))


def _build(config: tk.Config) -> Callable[[np.ndarray], None]:
    return lambda x: None


def _fits(c: tk.Config) -> bool:
    return bool(c.D * c.A > 1)


DOMAINS: dict[str, list[Any]] = {"A": [1, 2.5, -3], "B": ["x", "y"], "C": [True, False], "D": [1, 2, 4, 8]}

# What the eager from_space (main at d3bc516, one Tunable per configuration) gave this set: a cache
# row or committed record made then holds it, and must still match.
CHECKSUM_BEFORE = "d453286b9bc3a7137413b0053c6e44e6"


def _space() -> tk.Space:
    return tk.Space(**DOMAINS, restrict=_fits)


def _expected_names() -> list[str]:
    """The valid names in Cartesian order (last parameter fastest), worked out here from the domains."""
    names = []
    for a, b, c, d in itertools.product(*DOMAINS.values()):
        if d * a > 1:
            names.append(f"A={a},B={b},C={c},D={d}")
    return names


def _tunables_alive() -> int:
    gc.collect()
    return sum(1 for o in gc.get_objects() if isinstance(o, tk.Tunable))


def test_a_restricted_space_gives_the_names_order_and_checksum_of_the_eager_set() -> None:
    tunables = tk.TunableSet.from_space(_space(), _build, key=_key, version="2")
    expected = _expected_names()
    assert len(expected) == 28 and len(tunables.tunables) == len(expected)
    assert tunables.names == tuple(expected) and tuple(expected) == tunables.names
    assert list(tunables.names) == expected and [t.name for t in tunables.tunables] == expected
    assert [tunables.tunables[i].name for i in range(len(expected))] == expected
    assert [t.fn.config.name for t in tunables.tunables] == expected  # type: ignore[attr-defined]
    assert {t.version for t in tunables.tunables} == {"2"}
    digest = hashlib.sha256()
    for name in expected:
        digest.update(f"{name}\x00{2}\x01".encode())
    for extra in ("checksum:build", "checksum:space"):
        digest.update(f"{extra}={tunables.extras[extra]}\x02".encode())
    assert tunables.checksum() == digest.hexdigest()[:32]


def test_the_checksum_is_the_one_the_eager_set_stored() -> None:
    """Cache rows and committed records made by the eager from_space still match."""
    assert tk.TunableSet.from_space(_space(), _build, key=_key).checksum() == CHECKSUM_BEFORE


def test_names_are_found_first_last_and_between_and_others_are_not() -> None:
    tunables = tk.TunableSet.from_space(_space(), _build, key=_key)
    expected = _expected_names()
    for at in (0, len(expected) // 2, len(expected) - 1):
        assert tunables.index_of(expected[at]) == at
        assert tunables.tunables[at].name == expected[at] and tunables.names[at] == expected[at]
    assert tunables.tunables[-1].name == expected[-1] and tunables.names[-2] == expected[-2]
    assert [t.name for t in tunables.tunables[1:4]] == expected[1:4] and tunables.names[::9] == tuple(expected[::9])
    for stranger in (
        "A=1,B=x,C=True,D=1",  # in the product, restricted out (1 * 1 > 1 fails)
        "A=2.5,B=x,C=True,D=16",  # a value not in the domain
        "B=x,A=2.5,C=True,D=2",  # the parameters in another order
        "A=2.5,B=x,C=True",  # one parameter short
        "A=2.5,B=x,C=True,D=2,E=1",  # one too many
        "A=2.50,B=x,C=True,D=2",  # the value's text written otherwise
        "",
    ):
        assert tunables.index_of(stranger) is None, stranger
        assert stranger not in tunables.names
    assert tunables.index_of(3) is None  # type: ignore[arg-type]
    with pytest.raises(IndexError, match="out of range"):
        tunables.tunables[len(expected)]
    with pytest.raises(IndexError, match="out of range"):
        tunables.names[-len(expected) - 1]


def test_a_tunable_is_one_object_built_once_however_it_is_reached() -> None:
    builds: list[str] = []

    def counted(config: tk.Config) -> Callable[[], str]:
        builds.append(config.name)
        return lambda: config.name

    tunables = tk.TunableSet.from_space(_space(), counted, key=_key)
    middle = len(tunables.tunables) // 2
    first = tunables.tunables[middle]
    assert first is tunables.tunables[middle] is list(tunables.tunables)[middle]
    assert first is tunables.with_reference().tunables[middle]  # a derived set shares its tunables
    assert first in tunables.tunables and tk.Tunable(first.name, lambda: None) not in tunables.tunables
    first.fn()
    tunables.tunables[middle].fn()
    assert builds == [first.name]


def test_a_version_that_is_no_str_is_refused_when_the_set_is_made() -> None:
    # Each eager Tunable refused it; made lazily, the first tunable asked for would have.
    with pytest.raises(TypeError, match=r"from_space\(version=...\) must be a str, got 3; pass version='3'"):
        tk.TunableSet.from_space(_space(), _build, key=_key, version=3)  # type: ignore[arg-type]


def test_tunables_appended_to_a_space_set_follow_it_and_share_its_names() -> None:
    base = tk.TunableSet.from_space(_space(), _build, key=_key)
    count = len(base.tunables)
    grown = base.with_tunables([tk.Tunable("extra", lambda x: None), tk.Tunable("more", lambda x: None)])
    assert grown.names == (*_expected_names(), "extra", "more")
    assert grown.index_of("more") == count + 1 and base.index_of("more") is None
    assert grown.tunables[count].name == "extra" and grown.tunables[-1].name == "more"
    assert grown.tunables[0] is base.tunables[0]
    assert grown.checksum() != base.checksum()
    with pytest.raises(ValueError, match="duplicate tunable name 'A=2.5,B=x,C=True,D=2'"):
        grown.with_tunable(tk.Tunable("A=2.5,B=x,C=True,D=2", lambda x: None))
    with pytest.raises(ValueError, match="duplicate tunable name 'extra'"):
        grown.with_tunable(tk.Tunable("extra", lambda x: None))


@pytest.mark.slow
def test_building_a_large_set_makes_no_tunable_per_configuration() -> None:
    """from_space held a Config, a LazyBuild and a Tunable per configuration: 0.6 GiB for 10^6 points."""
    space = tk.Space(A=range(10), B=range(100), C=range(100), restrict=lambda c: (c.A + c.B) % 3 == 0)
    alive = _tunables_alive()
    tracemalloc.start()
    try:
        tunables = tk.TunableSet.from_space(space, _build, key=_key)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert len(tunables.tunables) == 33_400 == space.size
    # Eager, 33,400 tunables took about 20 MiB; the valid points are 4 bytes each, the walk's mask 1 per point.
    assert peak < 2 * 2**20, peak
    assert _tunables_alive() == alive
    assert tunables.index_of("A=9,B=99,C=99") == 33_399 and tunables.names[-1] == "A=9,B=99,C=99"
    tunables.checksum()
    repr(tunables)
    assert tk.plan_batches(Key(n=1), tunables) == [list(range(33_400))]
    assert _tunables_alive() == alive
    assert tunables.tunables[33_399].fn.config == tk.Config(["A", "B", "C"], [9, 99, 99])  # type: ignore[attr-defined]
    assert _tunables_alive() == alive + 1


def test_the_first_execute_of_a_searched_set_makes_only_the_candidates_it_measures() -> None:
    """The plan made every tunable of the set to read its groups: a search of 10^6 points made 10^6 of them."""
    space = tk.Space(A=range(20), B=range(100), C=range(100))
    searched = tk.TunableSet.from_space(space, _build, key=_key).with_search(strategy="random", max_evals=6, seed=0)
    client = CpuClient()
    alive = _tunables_alive()
    tk.LocalTuner("space_tunables_search").execute(client.device_id, client, searched, (np.ones(4),))
    assert alive < _tunables_alive() <= alive + 6


def test_a_replayed_sparse_space_is_not_walked_through_its_product() -> None:
    """from_space tested every point of a replayed file's product against its keys: 10^10 points never ended."""
    params = {name: list(range(100)) for name in "ABCDE"}
    keys = frozenset({(0, 0, 0, 0, 1), (3, 1, 4, 1, 5), (99, 99, 99, 99, 99)})
    space = ReplaySpace(_KnownKeys(keys, "fingerprint", "test.json"), params)
    tunables = tk.TunableSet.from_space(space, _build, key=_key)
    expected = ["A=0,B=0,C=0,D=0,E=1", "A=3,B=1,C=4,D=1,E=5", "A=99,B=99,C=99,D=99,E=99"]
    assert tunables.names == tuple(expected) == tuple(c.name for c in space)
    assert [tunables.index_of(n) for n in expected] == [0, 1, 2] and tunables.index_of("A=0,B=0,C=0,D=0,E=0") is None
    assert tunables.tunables[2].fn.config == tk.Config(list("ABCDE"), [99] * 5)  # type: ignore[attr-defined]


def test_a_space_sets_sequences_are_what_users_were_promised() -> None:
    tunables = tk.TunableSet.from_space(_space(), _build, key=_key)
    assert isinstance(tunables.tunables, SpaceTunables) and isinstance(tunables.names, SpaceNames)
    assert "28 tunables" in repr(tunables.tunables) and "28 names: 'A=1,B=x,C=True,D=2'" in repr(tunables.names)
    assert repr(tunables) == f"TunableSet({', '.join(_expected_names()[:8])}, ... 20 more)"
    assert tunables.names.index("A=2.5,B=y,C=False,D=8") == 27
    assert list(reversed(tunables.names)) == _expected_names()[::-1]
