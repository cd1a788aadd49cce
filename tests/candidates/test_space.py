"""Declared spaces: size, lazy enumeration, restriction, sampling, stable hashing."""

from __future__ import annotations

import itertools
import json
import pickle
import re
import subprocess
import sys
import tracemalloc
from typing import Annotated, Any

import numpy as np
import pytest

import tunekit as tk
from tunekit_backends.cpu import CpuClient


def small() -> tk.Space:
    return tk.Space(
        BLOCK=tk.pow2(64, 1024), VEC=[1, 2, 4], UNROLL=range(1, 5), restrict=lambda c: c.BLOCK * c.VEC <= 1024
    )


def test_pow2_is_an_inclusive_doubling_range() -> None:
    assert tk.pow2(64, 1024) == (64, 128, 256, 512, 1024)
    assert tk.pow2(1, 1) == (1,)
    assert tk.pow2(64, 1000) == (64, 128, 256, 512), "hi only bounds the range"
    with pytest.raises(ValueError, match="lo <= hi"):
        tk.pow2(8, 4)
    with pytest.raises(TypeError):
        tk.pow2(1.5, 4)  # type: ignore[arg-type]


def test_pow2_refuses_a_lower_bound_that_is_not_a_power_of_two() -> None:
    """tk.pow2(48, 1000) gave 48, 96, 192, 384, 768: a "pow2" range without a single power of two."""
    with pytest.raises(
        ValueError, match=r"tk\.pow2\(48, 1000\): 48 is not a power of two, so doubling it gives 48, 96"
    ):
        tk.pow2(48, 1000)
    with pytest.raises(
        ValueError, match=r"within the bounds: tk\.pow2\(64, 512\); .*as a list: \[48, 96, 192, 384, 768\]"
    ):
        tk.pow2(48, 1000)
    with pytest.raises(ValueError, match=r"none lie between 3 and 3; .*as a list: \[3\]"):
        tk.pow2(3, 3)


def test_enumeration_equals_the_filtered_cartesian_product_in_order() -> None:
    space = small()
    expected = [(b, v, u) for b, v, u in itertools.product(tk.pow2(64, 1024), [1, 2, 4], range(1, 5)) if b * v <= 1024]
    assert [c.values_tuple for c in space] == expected
    assert space.size == len(expected) == 48
    assert space.cartesian_size == 5 * 3 * 4
    assert next(iter(space)) == {"BLOCK": 64, "VEC": 1, "UNROLL": 1}


def test_a_list_of_restrictions_must_all_hold() -> None:
    space = tk.Space(A=range(10), B=range(10), restrict=[lambda c: c.A < 5, lambda c: c["B"] % 2 == 0])
    assert space.size == 25
    assert all(c.A < 5 and c.B % 2 == 0 for c in space)


def test_enumeration_is_lazy_on_a_million_point_space() -> None:
    calls = 0

    def restrict(c: tk.Config) -> bool:
        nonlocal calls
        calls += 1
        return bool(c.C % 3 != 0)

    space = tk.Space(A=range(100), B=range(100), C=range(100), restrict=restrict)
    assert space.cartesian_size == 10**6
    first = list(itertools.islice(iter(space), 5))
    assert len(first) == 5
    picked = space.sample(50, np.random.default_rng(0))
    assert len(set(picked)) == 50
    assert all(c in space for c in picked)
    assert calls < 1000, "sampling must not walk the whole space"


def test_sampling_a_sparse_space_finishes_by_rejection_rather_than_walking_it() -> None:
    """At 1 % valid, 500 samples gave up on rejection and walked all 10^5 points."""
    calls = 0

    def restrict(c: tk.Config) -> bool:
        nonlocal calls
        calls += 1
        return bool((c.A * 1000 + c.B) % 100 == 0)

    space = tk.Space(A=range(100), B=range(1000), restrict=restrict)
    picked = space.sample(500, np.random.default_rng(0))
    assert len(set(picked)) == 500
    assert calls < space.cartesian_size


def test_one_rare_valid_point_is_found_by_rejection_not_a_walk() -> None:
    """With 225 valid points in 10^6, sample(1) gave up on rejection after ~1,000 tries and walked everything."""
    calls = 0

    def restrict(c: tk.Config) -> bool:
        nonlocal calls
        calls += 1
        return bool(c.A % 70 == 0 and c.B % 70 == 0)

    space = tk.Space(A=range(1000), B=range(1000), restrict=restrict)
    assert len(space.sample(1, np.random.default_rng(0))) == 1
    assert calls < space.cartesian_size // 2


def test_sampling_covers_a_heavily_restricted_space_exactly() -> None:
    space = tk.Space(A=range(100), B=range(100), restrict=lambda c: c.A == 7 and c.B < 3)
    picked = space.sample(10, np.random.default_rng(1))
    assert sorted(c.values_tuple for c in picked) == [(7, 0), (7, 1), (7, 2)]


def test_sampling_is_reproducible_from_the_seed() -> None:
    space = small()
    a = space.sample(10, np.random.default_rng(42))
    b = space.sample(10, np.random.default_rng(42))
    c = space.sample(10, np.random.default_rng(43))
    assert a == b
    assert a != c


def test_hash_is_stable_and_tracks_values_types_and_restrictions() -> None:
    assert small().hash == small().hash
    assert tk.Space(A=[1, 2]).hash != tk.Space(A=[1, 2, 3]).hash
    assert tk.Space(A=[1, 2]).hash != tk.Space(A=[1.0, 2.0]).hash
    assert tk.Space(A=[1, 2]).hash != tk.Space(B=[1, 2]).hash
    assert tk.Space(A=[1, 2]).hash != tk.Space(A=[1, 2], restrict=lambda c: c.A > 1).hash
    assert tk.Space(A=[1, 2], restrict=lambda c: c.A > 1).hash != tk.Space(A=[1, 2], restrict=lambda c: c.A > 0).hash


@pytest.mark.subprocess
def test_hash_is_the_same_in_another_process() -> None:
    code = "import tunekit as tk; print(tk.Space(A=tk.pow2(1, 8), B=['x', 'y']).hash)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.strip()
    assert out == tk.Space(A=tk.pow2(1, 8), B=["x", "y"]).hash


def test_config_checks_names_values_and_restrictions() -> None:
    space = small()
    assert space.config(BLOCK=128, VEC=2, UNROLL=3).name == "BLOCK=128,VEC=2,UNROLL=3"
    with pytest.raises(ValueError, match="unknown parameters"):
        space.config(BLOCK=128, VEC=2, UNROLL=3, X=1)
    with pytest.raises(ValueError, match="lacks parameters"):
        space.config(BLOCK=128)
    with pytest.raises(ValueError, match="is not one of"):
        space.config(BLOCK=100, VEC=2, UNROLL=3)
    with pytest.raises(ValueError, match="restriction #1 of 1"):
        space.config(BLOCK=1024, VEC=4, UNROLL=3)
    assert {"BLOCK": 1024, "VEC": 4, "UNROLL": 3} not in space
    assert {"BLOCK": 64, "VEC": 4, "UNROLL": 3} in space


def _even_unroll(c: tk.Config) -> bool:
    return bool(c.UNROLL % 2 == 0)


def test_a_rejected_configuration_names_the_restriction_that_rejects_it() -> None:
    # space.config() said only "excluded by the space's restrictions": not which one, nor its text.
    space = tk.Space(
        BLOCK=tk.pow2(64, 1024),
        VEC=[1, 2, 4],
        UNROLL=range(1, 5),
        restrict=[lambda c: c.VEC <= 4, lambda c: c.BLOCK * c.VEC <= 1024, _even_unroll],
    )
    with pytest.raises(ValueError) as by_lambda:
        space.config(BLOCK=1024, VEC=4, UNROLL=2)
    message = str(by_lambda.value)
    assert "restriction #2 of 3" in message and "lambda c: c.BLOCK * c.VEC <= 1024" in message
    assert "{'BLOCK': 1024, 'VEC': 4, 'UNROLL': 2}" in message
    with pytest.raises(ValueError, match=r"'UNROLL': 3}.*restriction #3 of 3 in restrict= \('_even_unroll'\)"):
        space.config(BLOCK=64, VEC=1, UNROLL=3)


def test_bad_declarations_are_refused_at_definition() -> None:
    with pytest.raises(ValueError, match="at least one parameter"):
        tk.Space()
    with pytest.raises(ValueError, match="no values"):
        tk.Space(A=[])
    with pytest.raises(ValueError, match="repeats"):
        tk.Space(A=[1, 1])
    with pytest.raises(TypeError, match="not an int"):
        tk.Space(A=[None])  # type: ignore[list-item]
    with pytest.raises(TypeError, match="list, tuple or range"):
        tk.Space(A="abc")
    with pytest.raises(TypeError, match="takes a predicate"):
        tk.Space(A=[1], restrict=[3])  # type: ignore[list-item]


def test_a_raising_restriction_is_reported_with_the_configuration() -> None:
    space = tk.Space(A=[0, 1], restrict=lambda c: 1 / c.A > 0)
    with pytest.raises(ValueError, match="ZeroDivisionError"):
        list(space)


def test_a_restriction_reading_a_misspelt_parameter_is_told_to_fix_the_name() -> None:
    """c.BLCK for c.BLOCK was reported with "make it return False instead", advice that hides the typo."""
    space = tk.Space(BLOCK=[64, 128], restrict=lambda c: c.BLCK <= 64)
    with pytest.raises(ValueError, match=r"reads c.BLCK, which is no parameter of the space \(it has \['BLOCK'\]\)"):
        list(space)
    with pytest.raises(ValueError, match="make it return False instead"):  # another AttributeError: as before
        list(tk.Space(A=[1], restrict=lambda c: c.A.real.nope > 0))
    assert tk.Space(A=[1]).config(A=1).get("B") is None  # a Mapping still: get() reads a missing name as None


def test_positions_and_cartesian_index_round_trip() -> None:
    space = small()
    for config in space:
        assert space.at(space.index(config)) == config
        assert space.from_positions(space.positions(config)) == config


def test_neighbours_differ_in_one_parameter_and_stay_valid() -> None:
    space = small()
    config = space.config(BLOCK=256, VEC=2, UNROLL=2)
    near = space.neighbours(config)
    assert {c.name for c in near} == {
        "BLOCK=128,VEC=2,UNROLL=2",
        "BLOCK=512,VEC=2,UNROLL=2",
        "BLOCK=256,VEC=1,UNROLL=2",
        "BLOCK=256,VEC=4,UNROLL=2",
        "BLOCK=256,VEC=2,UNROLL=1",
        "BLOCK=256,VEC=2,UNROLL=3",
    }
    assert len(space.neighbours(config, adjacent=False)) == 3 + 2 + 3
    assert all(c in space for c in space.neighbours(space.config(BLOCK=1024, VEC=1, UNROLL=4)))


def test_describe_is_a_versioned_json_model() -> None:
    model = small().describe()
    assert model.schema_version == 1
    assert model.params["BLOCK"] == [64, 128, 256, 512, 1024]
    assert "c.BLOCK * c.VEC <= 1024" in model.restrictions[0]
    assert tk.SpaceModel.model_validate_json(model.model_dump_json()) == model


@tk.autotune_key
class AxpyKey:
    n: Annotated[int, tk.Anchor()]


def test_from_space_builds_lazily_and_tunes_to_a_valid_configuration() -> None:
    space = tk.Space(CHUNK=tk.pow2(1, 64), MODE=["slice", "bad"])
    built: list[str] = []

    def build(config: tk.Config) -> Any:
        built.append(config.name)
        if config.MODE == "bad":
            raise RuntimeError("this variant does not compile")
        chunk = config.CHUNK

        def run(x: np.ndarray) -> np.ndarray:
            return np.concatenate([x[i : i + chunk] * 2 for i in range(0, len(x), chunk)])

        return run

    tunables = tk.TunableSet.from_space(space, build, key=lambda x: AxpyKey(n=len(x)))
    assert built == [], "building must wait for a candidate's first run"
    assert len(tunables.tunables) == space.size
    assert tunables.extras["checksum:space"] == space.hash
    tuner: tk.LocalTuner[AxpyKey, np.ndarray] = tk.LocalTuner("from_space")
    client = CpuClient()
    out = tuner.execute(client.device_id, client, tunables, (np.arange(256.0),))
    np.testing.assert_array_equal(out, np.arange(256.0) * 2)
    winner = tuner.tuner(client.device_id).winners[tunables][AxpyKey(n=256)]
    assert "MODE=slice" in winner.config.name  # type: ignore[attr-defined]


@pytest.mark.parametrize("values", [{"a", "b", "c"}, frozenset({1, 2}), {1: "a"}, {1: "a"}.keys(), {1: "a"}.values()])
def test_unordered_values_are_refused(values: Any) -> None:
    """A set was accepted, so the space's order and hash changed with PYTHONHASHSEED."""
    with pytest.raises(TypeError, match="as a list in the order you want"):
        tk.Space(X=values)


@pytest.mark.parametrize("values", [[0, 1, True], [1, 1.0], [0, False], [2, 2.0]])
def test_values_that_compare_equal_across_types_are_refused(values: list[Any]) -> None:
    """1 and True were both accepted, then an exhaustive search proposed X=True twice."""
    with pytest.raises(ValueError, match="compare equal"):
        tk.Space(X=values)


@pytest.mark.parametrize("values", [[1, "1"], [True, "True"], [1.5, "1.5"]])
def test_values_with_the_same_name_are_refused(values: list[Any]) -> None:
    """Two values printing alike gave two configurations one name, a duplicate tunable."""
    with pytest.raises(ValueError, match="both be named"):
        tk.Space(X=values)


@pytest.mark.parametrize("restrict", [5, True, "c.X > 1", (f for f in [lambda c: True]), [lambda c: True, "x"]])
def test_a_restrict_that_is_no_predicate_is_refused(restrict: Any) -> None:
    """restrict=5 said "'int' object is not iterable" and restrict="c.X>1" blamed the character 'c'."""
    with pytest.raises(TypeError, match=r"takes a predicate \(config -> bool\) or a list of them, got"):
        tk.Space(X=[1, 2], restrict=restrict)


@pytest.mark.parametrize(
    ("restrict", "fix"),
    [
        ("block_size_x*block_size_y<=256", "lambda c: c.block_size_x*c.block_size_y<=256"),
        (
            ["block_size_x*block_size_y<=256", "block_size_x >= block_size_y"],
            "[lambda c: c.block_size_x*c.block_size_y<=256, lambda c: c.block_size_x >= c.block_size_y]",
        ),
    ],
    ids=["one", "list"],
)
def test_a_kernel_tuner_string_restriction_is_refused_with_the_lambda_that_means_it(restrict: Any, fix: str) -> None:
    """Regression: Kernel Tuner's restrictions=["block_size_x*block_size_y<=1024"] was refused with a generic
    example (c.BLOCK * c.VEC) that left the user to translate each string by hand."""
    with pytest.raises(TypeError) as raised:
        tk.Space(block_size_x=[16, 32], block_size_y=[8, 16], restrict=restrict)
    message = str(raised.value)
    assert "not an expression in a string (as Kernel Tuner's are): restrict=" + fix in message
    # The lambda it spells out is the restriction meant: pasted back, it makes the space.
    space = tk.Space(
        block_size_x=[16, 32], block_size_y=[8, 16], restrict=eval(message.rsplit("restrict=", maxsplit=1)[-1])
    )
    assert [(c.block_size_x, c.block_size_y) for c in space] == [(16, 8), (16, 16), (32, 8)]


@pytest.mark.parametrize("name", ["not id", "1x", "class", "a,b", "_private"])
def test_parameter_names_that_are_no_identifier_are_refused(name: str) -> None:
    """Names no restriction can read as c.<name> were accepted."""
    with pytest.raises(ValueError, match="Python identifier"):
        tk.Space(**{name: [1, 2]})


@pytest.mark.parametrize("name", ["name", "values", "keys", "items", "get", "to_dict", "values_tuple"])
def test_parameter_names_that_shadow_config_attributes_are_refused(name: str) -> None:
    """A parameter called `values` was shadowed: c.values in a restriction was a bound method."""
    with pytest.raises(ValueError, match="rename it") as raised:
        tk.Space(**{name: [1, 2]})
    config = tk.Config(["A"], [1])
    # dict's update, pop, copy... are hidden on a Config (it has none as a Mapping): they are no attributes.
    public = sorted(n for n in dir(tk.Config) if not n.startswith("_") and hasattr(config, n))
    assert all(attribute in str(raised.value) for attribute in public)


@pytest.mark.parametrize("value", ["1,B=2", "a=b", "x,y"])
def test_string_values_with_separators_are_refused(value: str) -> None:
    """'1,B=2' made configuration names ambiguous, so from_space failed on a duplicate tunable name."""
    with pytest.raises(ValueError, match=re.escape(f"parameter 'A': value {value!r} contains ',' or '='")):
        tk.Space(A=[value, "1"], B=["3"])


@pytest.mark.parametrize(
    ("value", "fix"),
    [
        ((1, 2), "split (1, 2) into one parameter per element, or name it with a str"),
        ([1, 2], "split [1, 2] into one parameter per element"),
        (None, "name an absent setting with a str (such as 'none') or add a bool parameter"),
        (float("inf"), "give finite floats: JSON, which trial logs and records are written in, has no inf or nan"),
        (b"x", "give one of those (its name as a str, say) and map it back in build"),
    ],
)
def test_a_value_no_configuration_can_hold_is_refused_saying_what_to_give(value: object, fix: str) -> None:
    """A tuple of block sizes, None for "no unroll": the error said only "is not an int, finite float, str or bool"."""
    with pytest.raises(TypeError) as raised:
        tk.Space(A=[value, 3])  # type: ignore[list-item]
    assert str(raised.value).startswith(
        f"tk.Space parameter 'A': value {value!r} is not an int, finite float, str or bool; "
    )
    assert fix in str(raised.value)


def test_configuration_names_are_unique() -> None:
    """What the checks above guarantee: every configuration of a space has its own name."""
    space = tk.Space(A=[2, 2.5, "x", True], B=["1", "y:z", "a b"], C=[0.1, 10])
    names = [c.name for c in space]
    assert len(set(names)) == len(names) == space.size


def test_numpy_values_are_taken_as_the_python_values_they_hold() -> None:
    """np.arange values were refused as 'not an int', though they are the first thing many users write."""
    space = tk.Space(B=np.arange(1, 5), F=np.array([0.5, 1.0]), S=np.array(["a", "b"]), T=np.array([True, False]))
    plain = tk.Space(B=[1, 2, 3, 4], F=[0.5, 1.0], S=["a", "b"], T=[True, False])
    assert space.hash == plain.hash
    assert all(type(v) in (int, float, str, bool) for vs in space.domains.values() for v in vs)
    assert next(iter(space)).name == "B=1,F=0.5,S=a,T=True"


def test_a_configuration_given_with_numpy_values_is_the_python_one() -> None:
    """space.config(B=np.int64(2)) was refused: "B=np.int64(2) is not one of [1, 2, 3, 4]" (so was such a require=)."""
    space = tk.Space(B=np.arange(1, 5), S=["a", "b"])
    assert space.config(B=np.int64(2), S=np.str_("b")) == space.config(B=2, S="b")
    assert {"B": np.int32(3), "S": "a"} in space
    with pytest.raises(ValueError, match=r"B=7 is not one of \[1, 2, 3, 4\]"):
        space.config(B=np.int64(7), S="a")


def test_sample_takes_an_int_seed_and_refuses_what_is_neither_a_generator_nor_a_seed() -> None:
    """Space.sample(n, 0) failed with AttributeError: 'int' object has no attribute 'integers'."""
    space = tk.Space(A=range(10), B=range(10), restrict=lambda c: c.A != c.B)
    assert space.sample(5, 3) == space.sample(5, np.random.default_rng(3))
    assert len(set(space.sample(5, 3))) == 5
    with pytest.raises(TypeError, match=r"rng must be a numpy Generator or an int seed, got str"):
        space.sample(5, "3")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match=r"n must be an int >= 0, got -1"):
        space.sample(-1, 0)


def test_a_restriction_taking_one_argument_per_parameter_is_refused_where_the_space_is_declared() -> None:
    """lambda BLOCK, VEC: ... failed at the first walk as "raised TypeError ...; make it return False instead"."""
    with pytest.raises(
        TypeError, match=r"restriction '.*<lambda>' cannot be called as restriction\(config\) \(missing"
    ):
        tk.Space(BLOCK=[64, 128], VEC=[1, 2], restrict=lambda BLOCK, VEC: BLOCK * VEC <= 128)  # noqa: N803
    with pytest.raises(TypeError, match=r"\(#2 of 2 in restrict=\) cannot be called as restriction\(config\)"):
        tk.Space(BLOCK=[64, 128], restrict=[lambda c: c.BLOCK > 0, lambda: True])
    assert tk.Space(BLOCK=[64, 128], restrict=lambda c, limit=64: limit < c.BLOCK).size == 1


@pytest.mark.parametrize(
    ("result", "type_name"),
    [
        ("no", "builtins.str"),
        (None, "builtins.NoneType"),
        (np.array([True, False]), "numpy.ndarray"),
        (1, "builtins.int"),
    ],
)
def test_a_restriction_returning_no_bool_is_refused_at_its_first_evaluation(result: Any, type_name: str) -> None:
    """A restriction returning "no", None or an array counted as true and kept every configuration."""
    space = tk.Space(A=[1, 2], restrict=lambda c: result)
    with pytest.raises(TypeError, match=rf"restriction '.*<lambda>' returned {type_name} .* on Config\(A=1\)"):
        list(space)
    with pytest.raises(TypeError, match="must return a bool"):
        space.sample(1, rng=0)


def test_a_non_bool_restriction_in_a_list_is_named_by_its_position() -> None:
    """The error names which of several lambdas returned the non-bool."""

    def fits(c: tk.Config) -> bool:
        return bool(c.A < 3)

    space = tk.Space(A=[1, 2], restrict=[fits, lambda c: "no"])  # type: ignore[list-item]
    with pytest.raises(TypeError, match=r"<lambda>' \(#2 of 2 in restrict=\) returned builtins\.str 'no'"):
        space.config(A=1)


def test_numpy_bool_restrictions_are_accepted() -> None:
    space = tk.Space(A=np.arange(4), restrict=lambda c: np.int64(c.A) % 2 == 0)
    assert [c.A for c in space] == [0, 2]


def test_a_value_of_the_wrong_type_is_named_with_the_value_to_pass() -> None:
    """require=[{"BLOCK": 256.0}] said "BLOCK=256.0 is not one of [64, 128, 256]", a list that shows 256."""
    space = tk.Space(BLOCK=[64, 128, 256], F=[0.5, 1.0], S=["a", "1"])
    with pytest.raises(ValueError, match=r"BLOCK=256.0 is a float, the space's is the int 256: pass BLOCK=256\)"):
        space.config(BLOCK=256.0, F=0.5, S="a")
    with pytest.raises(ValueError, match=r"F=1 is an int, the space's is the float 1.0: pass F=1.0\)"):
        space.config(BLOCK=256, F=1, S="a")
    with pytest.raises(ValueError, match=r"S=1 is an int, the space's is the str '1': pass S='1'\)$"):
        space.config(BLOCK=256, F=0.5, S=1)
    with pytest.raises(ValueError, match=r"BLOCK=7 is not one of \[64, 128, 256\]$"):
        space.config(BLOCK=7, F=0.5, S="a")


def test_a_space_past_2_to_the_63_points_is_sampled_and_searched() -> None:
    """Space.sample on 20 parameters of 10 values (10^20 points) raised numpy's "high is out of bounds for int64",
    and so did strategy="auto" (model_ils samples the space) on such a space."""
    space = tk.Space(**{f"P{i}": range(10) for i in range(20)}, restrict=lambda c: c.P0 != 3)
    picked = space.sample(50, 0)
    assert len(set(picked)) == 50 and all(c in space for c in picked)
    assert len({c.P19 for c in picked}) > 5 and len({c.P0 for c in picked}) > 5  # spread over every parameter
    assert picked == space.sample(50, 0)

    class Sum:
        def __init__(self) -> None:
            self.space = space

        def measure(self, config: tk.Config) -> tk.Outcome:
            return tk.Measured(tk.BenchmarkDurations((sum(config.values_tuple) + 1,)))

        def remaining(self) -> int | None:
            return None

    result = tk.tune_objective(Sum(), tuner="huge", device_id="d", max_evals=30)
    assert result.strategy == "model_ils" and result.evaluations == 30


def test_size_up_to_walks_only_until_it_passes_the_limit_and_remembers_the_answer() -> None:
    calls = 0

    def restrict(c: tk.Config) -> bool:
        nonlocal calls
        calls += 1
        return bool(c.B % 2 == 0)

    space = tk.Space(A=range(100), B=range(100), restrict=restrict)
    assert space.size_up_to(10) is None
    assert calls == 21, "11 valid points are 21 Cartesian ones: the walk stops there"
    assert space.size_up_to(5) is None and calls == 21, "a smaller limit is answered from the remembered lower bound"
    assert space.size_up_to(5000) == 5000
    assert space.size == 5000 and space.size_up_to(4999) is None and calls == 21 + 10_000
    with pytest.raises(ValueError, match=r"limit must be an int >= 0, got -1"):
        space.size_up_to(-1)


def test_enumeration_keeps_the_cartesian_order_of_at() -> None:
    space = tk.Space(A=[1, 2, 3], B=["x", "y"], C=[True, False], restrict=lambda c: c.A != 2 or c.C)
    assert list(space) == [c for c in map(space.at, range(space.cartesian_size)) if space.allows(c)]


@pytest.mark.slow
def test_sampling_a_sparse_space_keeps_a_bounded_number_of_rejected_draws(monkeypatch: pytest.MonkeyPatch) -> None:
    """Space.sample kept every rejected index: at 0.1 % valid, a 4096-point sample held 300 MiB of them."""
    space = tk.Space(
        A=range(1000), B=range(1000), C=range(1000), D=range(1000), restrict=lambda c: c.A % 10 == 0 == c.B % 10
    )
    monkeypatch.setattr("tunekit._candidates.space._MAX_REMEMBERED", 1000)
    space.sample(1, 0)  # what a first call allocates once
    tracemalloc.start()
    try:
        picked = space.sample(200, 1)  # some 20,000 rejected draws: 1.5 MiB kept in full
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert len(picked) == 200 and peak < 500_000, peak


@pytest.mark.parametrize("seed", range(4))
def test_a_sample_past_the_rejected_draws_it_keeps_is_the_same_sample(
    seed: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Forgetting rejected draws past a bound changes neither the draws nor the answer, down to a full walk."""
    space = tk.Space(A=range(100), B=range(100), restrict=lambda c: c.A % 10 == 3 and c.B % 10 == 7)
    expected = [space.sample(n, seed) for n in (5, 60, 100, 150)]
    monkeypatch.setattr("tunekit._candidates.space._MAX_REMEMBERED", 8)
    assert [space.sample(n, seed) for n in (5, 60, 100, 150)] == expected


def test_counted_size_is_known_without_walking_the_space() -> None:
    calls = 0

    def below(c: tk.Config) -> bool:
        nonlocal calls
        calls += 1
        return bool(c.A < c.B)

    space = tk.Space(A=range(10), B=range(10), restrict=below)
    assert space.counted_size() is None and calls == 0
    assert space.size_up_to(5) is None and space.counted_size() is None
    assert space.size == 45 and space.counted_size() == 45
    assert tk.Space(A=range(10), B=["x", "y"]).counted_size() == 20


@pytest.mark.slow
def test_sampling_a_space_too_big_to_walk_that_allows_nothing_is_an_error() -> None:
    """sample() of 10^12 points whose restriction rejects everything drew at random for weeks."""
    space = tk.Space(restrict=lambda c: c.A < 0, **{name: range(1000) for name in "ABCD"})
    with pytest.raises(
        ValueError, match=r"in 500,000 random draws .*restrict= rejects everything.*Check the restrictions"
    ):
        space.sample(3, 0)


def test_a_config_is_logged_by_json_dumps_and_stays_immutable_and_hashable() -> None:
    """Regression: json.dumps(config) raised "Object of type Config is not JSON serializable" (it was a Mapping)."""
    space = tk.Space(BLOCK=[64, 128], DTYPE=["float32"], update=[True], copy=[1])
    config = next(iter(space))
    assert json.dumps(config) == '{"BLOCK": 64, "DTYPE": "float32", "update": true, "copy": 1}'
    assert json.loads(json.dumps({"config": config, "ms": 1.5})) == {"config": config.to_dict(), "ms": 1.5}
    with pytest.raises(TypeError, match="Config is immutable"):
        config["BLOCK"] = 128
    with pytest.raises(TypeError, match="Config is immutable"):
        del config["BLOCK"]
    with pytest.raises(TypeError, match="Config is immutable"):
        config |= {"BLOCK": 128}
    with pytest.raises(AttributeError, match="immutable"):
        config.BLOCK = 128
    # dict's own mutators are hidden: parameters of their names are read, others are no attributes.
    assert (config.update, config.copy) == (True, 1)
    with pytest.raises(AttributeError, match=r"has no parameter 'pop' \(Config is immutable; config.to_dict\(\) gives"):
        config.pop("BLOCK")
    assert config == {"BLOCK": 64, "DTYPE": "float32", "update": True, "copy": 1}
    assert {config: "kept"}[space.config(BLOCK=64, DTYPE="float32", update=True, copy=1)] == "kept"
    assert pickle.loads(pickle.dumps(config)) == config and hash(pickle.loads(pickle.dumps(config))) == hash(config)
    swapped = tk.Config(["DTYPE", "BLOCK", "update", "copy"], ["float32", 64, True, 1])
    assert (swapped == config, swapped != config) == (False, True), "another order differs, both ways"
