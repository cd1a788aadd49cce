"""A restriction's part of the space hash: what decides its answers, not how its source is laid out."""

from __future__ import annotations

import functools
import os
import subprocess
import sys
import textwrap
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest

import tunekit as tk

LIMIT = 1024


def bounded(limit: int) -> tk.Space:
    return tk.Space(B=tk.pow2(64, 4096), restrict=lambda c: limit >= c.B)


def bounded_reflowed(limit: int) -> tk.Space:
    space = tk.Space(
        B=tk.pow2(64, 4096),
        restrict=lambda c: (
            limit  # the largest block
            >= c.B
        ),
    )
    return space


def test_a_bound_held_in_a_closure_variable_enters_the_hash() -> None:
    """Spaces restricted to B <= 1024 and B <= 2048 through a variable had one hash, so caches mixed them."""
    assert bounded(1024).hash == bounded(1024).hash
    assert bounded(1024).hash != bounded(2048).hash
    assert bounded(1024).size != bounded(2048).size
    # Compiled on its own a closure lambda reads `limit` as a global: it must still be found, not
    # fall back to its whole source line (which made reflowing change the hash).
    assert bounded_reflowed(1024).hash == bounded(1024).hash
    assert bounded(1024).describe().restrictions == ["lambda c: limit >= c.B with limit=1024"]


@pytest.mark.slow
@pytest.mark.subprocess
def test_a_bound_held_in_a_module_constant_enters_the_hash(tmp_path: Path) -> None:
    """Editing a module-level LIMIT kept the hash while the space changed."""
    script = tmp_path / "space_def.py"
    template = textwrap.dedent(
        """
        import tunekit as tk
        LIMIT = {limit}
        space = tk.Space(B=tk.pow2(64, 4096), restrict=lambda c: c.B <= LIMIT)
        print(space.hash, space.size)
        """
    )
    out = []
    for limit in (1024, 2048, 1024):
        script.write_text(template.format(limit=limit))
        run = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, check=True)
        out.append(run.stdout.split())
    assert out[0] == out[2]
    assert out[0][0] != out[1][0] and out[0][1] != out[1][1]


def test_comments_spacing_line_breaks_and_the_statement_around_a_lambda_keep_the_hash() -> None:
    """A trailing comment, the variable's name or a reflowed call changed the hash and forced a re-tune."""
    s = tk.Space(B=tk.pow2(64, 4096), restrict=lambda c: c.B <= 1024)
    space = tk.Space(B=tk.pow2(64, 4096), restrict=lambda c: c.B<=1024)  # fmt: skip
    reflowed = tk.Space(
        B=tk.pow2(64, 4096),
        restrict=lambda c: (
            c.B  # the block width
            <= 1024
        ),
    )
    assert s.hash == space.hash == reflowed.hash
    assert s.describe().restrictions == ["lambda c: c.B <= 1024"]


def test_two_lambdas_on_one_line_are_told_apart() -> None:
    one = tk.Space(A=range(8), B=range(3), restrict=[lambda c: c.A > 1, lambda c: c.B < 2])
    other = tk.Space(A=range(8), B=range(3), restrict=[lambda c: c.A > 2, lambda c: c.B < 2])
    assert one.describe().restrictions == ["lambda c: c.A > 1", "lambda c: c.B < 2"]
    assert one.hash != other.hash


def test_a_function_restriction_is_hashed_by_its_code_not_its_comments() -> None:
    def first(c: tk.Config) -> bool:
        # a comment
        return bool(c.A > 2)

    def second(c: tk.Config) -> bool:
        return bool(c.A > 3)

    assert "comment" not in tk.Space(A=range(8), restrict=first).describe().restrictions[0]
    assert tk.Space(A=range(8), restrict=first).hash != tk.Space(A=range(8), restrict=second).hash


def test_partial_arguments_and_default_arguments_enter_the_hash() -> None:
    def below(c: tk.Config, n: int) -> bool:
        return bool(n > c.A)

    assert (
        tk.Space(A=range(8), restrict=functools.partial(below, n=3)).hash
        != tk.Space(A=range(8), restrict=functools.partial(below, n=4)).hash
    )
    assert (
        tk.Space(A=range(8), restrict=lambda c, n=3: n > c.A).hash
        != tk.Space(A=range(8), restrict=lambda c, n=4: n > c.A).hash
    )


@pytest.mark.slow
@pytest.mark.subprocess
def test_restrictions_without_source_text_are_told_apart_by_their_code() -> None:
    """Under `python -c` the two comparisons had one hash: only the names and constants were kept."""
    code = (
        "import tunekit as tk\n"
        "a = tk.Space(A=range(8), restrict=lambda c: c.A <= 4)\n"
        "b = tk.Space(A=range(8), restrict=lambda c: c.A >= 4)\n"
        "print(a.hash != b.hash, a.size, b.size)\n"
    )
    run = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert run.stdout.split() == ["True", "5", "4"]


def test_module_constant_in_this_file_is_shown_with_its_value() -> None:
    space = tk.Space(B=tk.pow2(64, 4096), restrict=lambda c: c.B <= LIMIT)
    assert space.describe().restrictions == ["lambda c: c.B <= LIMIT with LIMIT=1024"]


@pytest.mark.slow
@pytest.mark.subprocess
def test_the_hash_does_not_depend_on_the_hash_seed(tmp_path: Path) -> None:
    """A set literal in a closure lambda gave a different hash under each PYTHONHASHSEED."""
    module = tmp_path / "seeded.py"
    module.write_text(
        "import tunekit as tk\n"
        "def space(limit):\n"
        "    return tk.Space(M=['ab', 'cd', 'ef'], A=[1, 2], restrict=lambda c: c.M in {'ab', 'cd'} and c.A <= limit)\n"
        "print(space(2).hash)\n"
    )
    hashes = {
        subprocess.run(
            [sys.executable, str(module)],
            capture_output=True,
            text=True,
            check=True,
            env={**os.environ, "PYTHONHASHSEED": seed},
        ).stdout
        for seed in ("1", "2", "3")
    }
    assert len(hashes) == 1, hashes


def test_alike_lambdas_on_one_line_are_told_apart_by_their_code() -> None:
    """c.A < c.B and c.A > c.B on one line had one hash: names and constants alone are equal."""
    below, above = (lambda c: c.A < c.B), (lambda c: c.A > c.B)
    one = tk.Space(A=range(4), B=range(4), restrict=below)
    other = tk.Space(A=range(4), B=range(4), restrict=above)
    assert one.hash != other.hash
    assert one.hash == tk.Space(A=range(4), B=range(4), restrict=below).hash


BLOCK = 128


def test_a_global_named_like_a_parameter_is_not_read_data() -> None:
    """c.BLOCK put the unrelated global BLOCK into the hash: attribute names share co_names with globals."""
    space = tk.Space(BLOCK=tk.pow2(64, 512), restrict=lambda c: c.BLOCK <= 256)
    assert space.describe().restrictions == ["lambda c: c.BLOCK <= 256"]


def _below_limit(c: tk.Config) -> bool:
    return bool(c.A < LIMIT // 256)


class Limit:
    def __init__(self, n: int) -> None:
        self.n = n

    def check(self, c: tk.Config) -> bool:
        return bool(self.n > c.A)


def test_helpers_bound_objects_decorators_and_arrays_enter_the_hash(monkeypatch: pytest.MonkeyPatch) -> None:
    """A helper's global, a bound method's object, a decorated function's global and a numpy table were not seen."""
    # A lambda that calls a helper is the case under test, not a lambda to inline.
    via_helper = tk.Space(A=range(8), restrict=lambda c: _below_limit(c))  # noqa: PLW0108
    monkeypatch.setattr(sys.modules[__name__], "LIMIT", 2048)
    assert tk.Space(A=range(8), restrict=lambda c: _below_limit(c)).hash != via_helper.hash  # noqa: PLW0108
    assert tk.Space(A=range(8), restrict=Limit(1).check).hash != tk.Space(A=range(8), restrict=Limit(4).check).hash

    def decorate(fn: Callable[[tk.Config], bool]) -> Callable[[tk.Config], bool]:
        @functools.wraps(fn)
        def wrapper(c: tk.Config) -> bool:
            return fn(c)

        return wrapper

    def make(table: np.ndarray) -> tk.Space:
        @decorate
        def allowed(c: tk.Config) -> bool:
            return bool(table[c.A])

        return tk.Space(A=range(4), restrict=allowed)

    assert make(np.array([1, 1, 0, 0])).hash != make(np.array([1, 0, 1, 0])).hash
    assert make(np.array([1, 1, 0, 0])).hash == make(np.array([1, 1, 0, 0])).hash


def test_a_huge_table_enters_as_a_digest() -> None:
    """A global set of a million entries was copied into describe() and every trial-log header."""
    table = set(range(10**5))
    one = tk.Space(A=range(8), restrict=lambda c: c.A in table)
    assert len(one.describe().restrictions[0]) < 200
    table.add(-1)
    assert tk.Space(A=range(8), restrict=lambda c: c.A in table).hash != one.hash
