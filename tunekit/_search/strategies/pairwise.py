"""A surrogate that learns interactions: ridge regression on parameter values and value pairs.

Kernel parameters interact: on one GPU, turning shared memory off is 100x slower with most
block widths and the fastest choice with a power of two. An additive model averages such an
effect away; one weight per *pair* of values keeps it. Fitting is done in the dual form, where
the kernel of two configurations is ``1 + m + m(m-1)/2`` for ``m`` agreeing parameters (the
number of values and value pairs they share), so its cost grows with the observations, not
with the hundreds of pair features; the fitted weights are then folded back into one table
per parameter pair, so predicting a configuration is a few dozen table look-ups.
"""

from __future__ import annotations

import itertools

import numpy as np

__all__ = ["PairwiseModel"]

_ONE_HOT_PER_PARAMETER = 16
"""Mean values per parameter up to which agreements are counted by a one-hot product."""


class PairwiseModel:
    """Ridge regression on one-hot parameter values plus one-hot pairs of values."""

    def __init__(self, widths: tuple[int, ...], *, ridge: float = 1.0) -> None:
        self._widths = widths
        # Parameters with a single value agree everywhere: they would only add a constant.
        self._active = [k for k, w in enumerate(widths) if w > 1]
        self._pairs = list(itertools.combinations(self._active, 2))
        self._ridge = ridge
        active_widths = [widths[k] for k in self._active]
        self._offsets = np.concatenate([[0], np.cumsum(active_widths)[:-1]]).astype(np.intp)
        self._features = int(sum(active_widths))
        self._mean = 0.0
        self._singles: dict[int, np.ndarray] = {}
        self._tables: dict[tuple[int, int], np.ndarray] = {}
        # Where each single's and each pair's table starts in the weights laid end to end (see encode).
        sizes = [widths[k] for k in self._active] + [widths[i] * widths[j] for i, j in self._pairs]
        self._starts = np.concatenate([[0], np.cumsum(sizes)[:-1]]).astype(np.intp)
        self._weights = np.zeros(int(sum(sizes)))

    def fit(self, positions: np.ndarray, targets: np.ndarray) -> None:
        """Fit to ``targets`` (log times) at ``positions`` (n x parameters)."""
        agree = self._agreements(positions)
        gram = 1.0 + agree + agree * (agree - 1.0) / 2.0
        gram[np.diag_indices(len(positions))] += self._ridge
        self._mean = float(targets.mean())
        alpha = np.linalg.solve(gram, targets - self._mean)
        # The primal weight of a feature is the sum of the dual weights of the rows that have it.
        self._mean += float(alpha.sum())  # the constant feature
        # Every weight is written into the one array allocated at construction, and the per-parameter and
        # per-pair tables are views of it: on four parameters of 1000 values the pair tables are 48 MB, and
        # a fit that built them and then laid them end to end would hold them twice.
        starts = self._starts.tolist()
        self._singles = {}
        for n, k in enumerate(self._active):
            view = self._weights[starts[n] : starts[n] + self._widths[k]]
            view[:] = np.bincount(positions[:, k], weights=alpha, minlength=self._widths[k])
            self._singles[k] = view
        self._tables = {}
        for n, (i, j) in enumerate(self._pairs, start=len(self._active)):
            cells = self._widths[i] * self._widths[j]
            view = self._weights[starts[n] : starts[n] + cells]
            view[:] = np.bincount(positions[:, i] * self._widths[j] + positions[:, j], weights=alpha, minlength=cells)
            self._tables[(i, j)] = view.reshape(self._widths[i], self._widths[j])

    def _agreements(self, positions: np.ndarray) -> np.ndarray:
        """How many parameter values each pair of rows shares (exact small integers, as floats)."""
        x = positions[:, self._active]
        if self._features > _ONE_HOT_PER_PARAMETER * len(self._active):
            # Wide domains (range(1000)): a one-hot product would cost a thousand times the comparisons.
            return np.asarray((x[:, None, :] == x[None, :, :]).sum(axis=2), dtype=float)
        # One product of one-hot rows: a tenth of the cost of comparing every pair of rows parameter by
        # parameter (384 rows of 14 parameters of a few values each).
        onehot = np.zeros((len(positions), self._features))
        onehot[np.arange(len(positions))[:, None], x + self._offsets] = 1.0
        return np.asarray(onehot @ onehot.T)

    def encode(self, positions: np.ndarray) -> np.ndarray:
        """Each row's weight indices, one row per single and pair (for :meth:`predict_encoded`).

        A fixed pool is ranked at every exploitation step: on a sparse file of 20,000 keys,
        computing its pairs' cells anew each time would take 60 % of the search's CPU.
        """
        columns = [positions[:, k] for k in self._active]
        columns += [positions[:, i] * self._widths[j] + positions[:, j] for i, j in self._pairs]
        if not columns:  # every parameter has one value: nothing to weigh but the mean
            return np.zeros((0, len(positions)), dtype=np.intp)
        return np.asarray(np.stack(columns) + self._starts[:, None], dtype=np.intp)

    def predict_encoded(self, codes: np.ndarray) -> np.ndarray:
        """Predicted log times of rows encoded by :meth:`encode`: the sums of :meth:`predict`, in its order."""
        out = np.full(codes.shape[1], self._mean)
        for column in codes:
            out += self._weights.take(column)  # take: a third of the time of indexing with the column
        return out

    def predict(self, positions: np.ndarray) -> np.ndarray:
        """Predicted log times."""
        out = np.full(len(positions), self._mean)
        for k, table in self._singles.items():
            out += table[positions[:, k]]
        for (i, j), table in self._tables.items():
            out += table[positions[:, i], positions[:, j]]
        return out
