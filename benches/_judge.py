"""How the strategy benches judge versions: geometric means, and the held-out choice between strategies.

``benches/strategies.py`` and ``benches/strategy_replay.py`` both choose, for each fold of files
left out, the strategy with the lowest geometric mean on the other files; one rule, written once,
so the two benches cannot disagree on a tie.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence

TIE = " (tie)"
"""Said after a pick whose other files gave another strategy the same figure."""


def geo(values: Sequence[float]) -> float:
    """The geometric mean."""
    return math.exp(sum(map(math.log, values)) / len(values))


def choose(scores: Mapping[str, float]) -> tuple[str, bool]:
    """The name of lowest score and whether another tied it (``scores`` in the order the names were listed).

    A tie is no evidence either way: it keeps the first listed, so a run that lists the version
    before first keeps it wherever the other files cannot tell the versions apart.
    """
    pick = min(scores, key=scores.__getitem__)
    return pick, list(scores.values()).count(scores[pick]) > 1
