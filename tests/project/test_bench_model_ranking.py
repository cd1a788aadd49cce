"""benches/model_ranking.py: where the pairwise model, fitted to a share of random measurements, ranks the best."""

from __future__ import annotations

from pathlib import Path

import pytest
from bench_module import load_bench
from kt_cache import BEST, PARAMS, write_cache


@pytest.mark.parametrize("share", [1.0, 0.65])
def test_on_a_landscape_of_multiplied_effects_the_best_is_the_first_guess(tmp_path: Path, share: float) -> None:
    # The test file's times multiply one factor per parameter value: log-additive, which the model fits
    # exactly, and its best is the only configuration within 5 % of it.
    ranking = load_bench("model_ranking.py")
    path = write_cache(tmp_path / "tiny.json")
    xs, _, _ = ranking.landscape(path)
    best = [list(PARAMS[name]).index(value) for name, value in zip(PARAMS, BEST, strict=True)]
    ranks = []
    for seed in range(12):
        drawn = xs[ranking.np.random.default_rng(seed).choice(len(xs), size=24, replace=False)].tolist()
        rank = ranking.first_hit_rank(path, 24, share, seed)
        assert rank == (None if best in drawn else 1), (seed, rank)
        ranks.append(rank)
    assert None in ranks and 1 in ranks, "every draw held the best, or none did: this tests half of it"


def test_the_table_has_a_row_per_file_and_a_column_per_size_and_share(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    ranking = load_bench("model_ranking.py")
    files = [write_cache(tmp_path / f"{gpu}.json") for gpu in ("A", "B")]
    args = ["--sizes", "10,20", "--shares", "1,0.5", "--draws", "3", *map(str, files)]
    assert ranking.main(args) == 0
    rows = [line.split() for line in capsys.readouterr().out.splitlines()[2:]]
    assert [row[0] for row in rows] == [f"{tmp_path.name}/A.json", f"{tmp_path.name}/B.json"]
    assert all(len(row) == 5 and all(v.isdigit() for v in row[1:]) for row in rows), rows


def test_no_file_anywhere_is_an_error_that_says_where_it_looked(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    ranking = load_bench("model_ranking.py")
    ranking.SHARED = tmp_path
    assert ranking.main([]) == 2
    assert str(tmp_path) in capsys.readouterr().err
