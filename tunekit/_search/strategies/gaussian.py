"""A Gaussian process over parameter positions, ranking candidates by expected improvement.

The pairwise model (:mod:`.pairwise`) sees single values and pairs of values; a best basin that
needs three parameters set together (a W6600 convolution: ``use_shmem=0``, ``block_size_y=1`` and
``tile_size_y=4``) is invisible to it, and its best guesses sit on whatever plateau it fitted. A
Gaussian process with a Matérn 5/2 kernel over the positions (each parameter's value index scaled
to 0..1, one length scale per parameter) models any interaction between nearby points, and its
posterior spread says where too little was measured to tell. Expected improvement weighs both, so
its guesses go where a better time is likely *or* still possible: on dedispersion MI250X
`model_ils` reaches 5 % of the best in a median of 35-40 evaluations with two of its four guesses
from the process, 90-118 without (direct replay, 120 seeds; benches/README.md, "Guesses from a
Gaussian process").

Length scales are fitted by the marginal likelihood, a coordinate search over halvings and
doublings redone when the observations have grown by a quarter; the noise is a fixed fraction of
the (standardised) variance. Only the ``fit_max`` best observations are fitted, so the cost stays
that of a few 200 x 200 factorisations however long the search.
"""

from __future__ import annotations

import math

import numpy as np

__all__ = ["GaussianProcess"]

# Abramowitz and Stegun 7.1.26: the normal CDF to 1.5e-7 without scipy (tunekit does not depend on it).
_P = 0.3275911
_A = (0.254829592, -0.284496736, 1.421413741, -1.453152027, 1.061405429)
_SQRT2 = math.sqrt(2.0)
_SQRT2PI = math.sqrt(2.0 * math.pi)

_SCALE_BOUNDS = (0.05, 20.0)
"""Length scales in units of a whole parameter range: shorter sees every value alone, longer ignores the parameter."""


def _normal_cdf(z: np.ndarray) -> np.ndarray:
    x = np.abs(z) / _SQRT2
    t = 1.0 / (1.0 + _P * x)
    poly = t * (_A[0] + t * (_A[1] + t * (_A[2] + t * (_A[3] + t * _A[4]))))
    erf = 1.0 - poly * np.exp(-x * x)
    return np.asarray(0.5 * (1.0 + np.sign(z) * erf))


class GaussianProcess:
    """Gaussian-process regression of log times over parameter positions, for expected improvement."""

    def __init__(
        self, widths: tuple[int, ...], *, noise: float = 0.03, length_scale: float = 0.5, refit_growth: float = 1.25
    ) -> None:
        # Parameters with one value are the same everywhere: they would only cost distance computations.
        self._active = [k for k, w in enumerate(widths) if w > 1]
        self._span = np.array([max(1, widths[k] - 1) for k in self._active], dtype=float)
        self._scales = np.full(len(self._active), length_scale)
        self._noise = noise
        self._refit_growth = refit_growth
        self._scaled_at = 0
        self._x = np.zeros((0, len(self._active)))
        self._inverse_factor = np.zeros((0, 0))
        self._alpha = np.zeros(0)
        self._best = 0.0

    def encode(self, positions: np.ndarray) -> np.ndarray:
        """Positions as coordinates in 0..1 per varying parameter (for :meth:`expected_improvement`)."""
        return np.asarray(np.asarray(positions, dtype=float)[:, self._active] / self._span)

    def _kernel(self, a: np.ndarray, b: np.ndarray, scales: np.ndarray) -> np.ndarray:
        a, b = a / scales, b / scales
        # In place, one matrix product for the distances: a step computes thousands of rows against
        # hundreds, and each temporary of that size costs as much as the product.
        k = a @ b.T
        k *= -2.0
        k += (a * a).sum(axis=1)[:, None]
        k += (b * b).sum(axis=1)[None, :]
        np.maximum(k, 0.0, out=k)
        k *= 5.0
        r = np.sqrt(k, out=k)
        decay = np.exp(-r)
        r *= 1.0 / 3.0  # now r/3: (1 + r + r^2/3) = 1 + r (1 + r/3), evaluated as (r/3 + 1) * 3(r/3) + 1
        poly = r + 1.0
        poly *= r
        poly *= 3.0
        poly += 1.0
        poly *= decay
        return np.asarray(poly)

    def _factor(self, x: np.ndarray, scales: np.ndarray) -> np.ndarray | None:
        gram = self._kernel(x, x, scales)
        gram[np.diag_indices_from(gram)] += self._noise
        try:
            return np.asarray(np.linalg.cholesky(gram))
        except np.linalg.LinAlgError:
            return None

    def _evidence(self, x: np.ndarray, y: np.ndarray, scales: np.ndarray) -> float:
        """The log marginal likelihood (up to a constant) of ``y`` under these length scales."""
        factor = self._factor(x, scales)
        if factor is None:
            return -math.inf
        z = np.linalg.solve(factor, y)
        return float(-0.5 * z @ z - np.log(np.diag(factor)).sum())

    def _fit_scales(self, x: np.ndarray, y: np.ndarray) -> None:
        low, high = _SCALE_BOUNDS
        best = self._scales.copy()
        evidence = self._evidence(x, y, best)
        for factor in (0.5, 2.0):
            trial = np.clip(best * factor, low, high)
            value = self._evidence(x, y, trial)
            if value > evidence:
                evidence, best = value, trial
        for k in range(len(best)):
            for factor in (0.5, 2.0):
                trial = best.copy()
                trial[k] = min(high, max(low, trial[k] * factor))
                value = self._evidence(x, y, trial)
                if value > evidence:
                    evidence, best = value, trial
        self._scales = best

    def fit(self, positions: np.ndarray, log_times: np.ndarray) -> None:
        """Fit to ``log_times`` at ``positions`` (n x parameters); standardised, so only the ranking matters."""
        spread = float(log_times.std()) or 1.0
        y = (log_times - log_times.mean()) / spread
        x = self.encode(positions)
        if len(y) >= self._scaled_at * self._refit_growth + 4:
            self._fit_scales(x, y)
            self._scaled_at = len(y)
        factor = self._factor(x, self._scales)
        if factor is None:  # duplicate rows with the noise floor cannot make this singular; a NaN can
            raise ValueError("the Gaussian process could not be fitted: a log time is not finite")
        self._inverse_factor = np.linalg.inv(factor)
        self._alpha = self._inverse_factor.T @ (self._inverse_factor @ y)
        self._x = x
        self._best = float(y.min())

    def expected_improvement(self, encoded: np.ndarray) -> np.ndarray:
        """Expected improvement over the best fitted time at each row encoded by :meth:`encode`."""
        cross = self._kernel(encoded, self._x, self._scales)
        mean = cross @ self._alpha
        # The variance term is most of a step's cost; single precision halves it, and a spread known to
        # six digits ranks the same as one known to fifteen.
        projected = cross.astype(np.float32) @ self._inverse_factor.T.astype(np.float32)
        sd = np.sqrt(np.maximum(1e-12, 1.0 - (projected * projected).sum(axis=1)))
        z = (self._best - mean) / sd
        return np.asarray(sd * (z * _normal_cdf(z) + np.exp(-0.5 * z * z) / _SQRT2PI))

    def similarity(self, encoded: np.ndarray, row: np.ndarray) -> np.ndarray:
        """The kernel between each encoded row and one of them (1 at itself): how much measuring it tells of each."""
        return self._kernel(encoded, row[None, :], self._scales)[:, 0]
