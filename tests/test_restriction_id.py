"""A restriction's part of the space hash: what decides its answers, not how its source is laid out."""

from __future__ import annotations

import functools
import subprocess
import sys
import textwrap
from pathlib import Path

import tunekit as tk

LIMIT = 1024


def bounded(limit: int) -> tk.Space:
    return tk.Space(B=tk.pow2(64, 4096), restrict=lambda c: limit >= c.B)


def test_a_bound_held_in_a_closure_variable_enters_the_hash() -> None:
    """Spaces restricted to B <= 1024 and B <= 2048 through a variable had one hash, so caches mixed them."""
    assert bounded(1024).hash == bounded(1024).hash
    assert bounded(1024).hash != bounded(2048).hash
    assert bounded(1024).size != bounded(2048).size


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
