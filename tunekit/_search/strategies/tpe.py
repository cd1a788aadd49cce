"""Optuna's TPE sampler as a strategy (optional extra: ``pip install 'tunekit[optuna]'``)."""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from tunekit._base.extras import import_extra
from tunekit._candidates.config import Config
from tunekit._candidates.space import Space
from tunekit._search.strategies.base import Walker

__all__ = ["OptunaTPE"]

_MISSES = 32  # asks in a row that land outside the space or on a measured point before a random one is enqueued


_NEEDS = "the 'optuna_tpe' strategy needs Optuna"


def _optuna() -> Any:
    optuna = import_extra("optuna", "optuna", _NEEDS)
    optuna.logging.set_verbosity(optuna.logging.WARNING)
    return optuna


class OptunaTPE:
    """Optuna's TPE over the space's parameters as categorical choices.

    TPE knows nothing of restrictions or of points already measured: a proposal outside
    the space is told as failed, one already measured is told its known score, and after
    a run of such misses a random fresh point is enqueued so the search always advances.
    """

    def __init__(self, space: Space, rng: np.random.Generator) -> None:
        optuna = _optuna()
        self._optuna = optuna
        self._w = Walker(space, rng)
        seed = int(rng.integers(2**31))
        self._study = optuna.create_study(sampler=optuna.samplers.TPESampler(seed=seed, multivariate=True))
        self._dists = {
            name: optuna.distributions.CategoricalDistribution(list(range(len(values))))
            for name, values in space.domains.items()
        }
        self._pending: dict[Config, Any] = {}

    def propose(self, n: int) -> list[Config]:
        """Ask TPE for up to ``n`` fresh configurations."""
        w = self._w
        out: list[Config] = []
        misses = 0
        state = self._optuna.trial.TrialState
        while len(out) < n:
            if misses >= _MISSES:
                fresh = w.random_fresh(1)
                if not fresh:
                    break
                self._study.enqueue_trial(dict(zip(w.space.names, fresh[0], strict=True)))
                misses = 0
            trial = self._study.ask(self._dists)
            p = tuple(int(trial.params[name]) for name in w.space.names)
            if not w.valid(p):
                self._study.tell(trial, state=state.FAIL)
                misses += 1
                continue
            if p in w.seen:
                # Proposed but not scored yet (earlier in this batch), or failed: told as failed.
                # Telling None instead would make Optuna warn "The value None could not be cast to float"
                # on every search, and tell a measured 0 (the best possible) as a failure too.
                known = w.scores.get(p)
                if known is None:
                    self._study.tell(trial, state=state.FAIL)
                else:
                    self._study.tell(trial, math.log(max(known, 1e-300)))
                misses += 1
                continue
            (config,) = w.take([p])
            self._pending[config] = trial
            out.append(config)
        return out

    def observe(self, config: Config, score: float | None) -> None:
        """Tell TPE the log time, or a failure."""
        p = self._w.record(config, score)
        trial = self._pending.pop(config, None)
        if trial is None:
            # Not asked of TPE (an incumbent, a resumed search's logged trial): added as a finished
            # trial, so the sampler models it too rather than only steering away from it.
            state = self._optuna.trial.TrialState
            self._study.add_trial(
                self._optuna.trial.create_trial(
                    params=dict(zip(self._w.space.names, p, strict=True)),
                    distributions=self._dists,
                    value=None if score is None else math.log(max(score, 1e-300)),
                    state=state.FAIL if score is None else state.COMPLETE,
                )
            )
            return
        if score is None:
            self._study.tell(trial, state=self._optuna.trial.TrialState.FAIL)
        else:
            self._study.tell(trial, math.log(max(score, 1e-300)))
