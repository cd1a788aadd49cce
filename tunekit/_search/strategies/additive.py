"""The cheap surrogate: ridge regression of log(time) on one weight per parameter value.

Each value multiplies the time by a learned factor, which is how kernel parameters mostly act;
fitting and querying cost microseconds, so the model-guided search refits it as observations
grow and asks it to order every climb's moves (:mod:`.pairwise` learns the interactions it misses).
"""

from __future__ import annotations

import numpy as np

__all__ = ["AdditiveModel"]


class AdditiveModel:
    """Ridge regression on one-hot parameter values (solved in the smaller of primal and dual form)."""

    def __init__(self, widths: tuple[int, ...], *, ridge: float = 1.0) -> None:
        self._offsets = np.concatenate([[0], np.cumsum(widths)[:-1]]).astype(np.intp)
        self._features = int(sum(widths))
        self._ridge = ridge
        self._weights: np.ndarray = np.zeros(self._features)
        self._mean = 0.0

    def fit(self, positions: np.ndarray, targets: np.ndarray) -> None:
        """Fit to ``targets`` (log times) at ``positions`` (n x parameters)."""
        n = len(positions)
        x = np.zeros((n, self._features))
        x[np.arange(n)[:, None], positions + self._offsets] = 1.0
        self._mean = float(targets.mean())
        centred = targets - self._mean
        if n < self._features:
            gram = x @ x.T
            gram[np.diag_indices(n)] += self._ridge
            self._weights = x.T @ np.linalg.solve(gram, centred)
        else:
            gram = x.T @ x
            gram[np.diag_indices(self._features)] += self._ridge
            self._weights = np.linalg.solve(gram, x.T @ centred)

    def predict(self, positions: np.ndarray) -> np.ndarray:
        """Predicted log times."""
        return np.asarray(self._mean + self._weights[positions + self._offsets].sum(axis=1))
