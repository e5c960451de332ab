"""The ball of a pending change as a what-if region (``method="sphere"``).

Theorem 1 of Okumura et al., "Quick sensitivity analysis for incremental data modification and
its application to leave-one-out CV in linear classification problems" (= Theorem 1 of Sivan et
al., "Incremental sensitivity analysis for kernelized models"): the retrained model lies in the
ball of center ``β₁ − r`` and radius ``‖r‖`` plus the certified solver allowance, ``r = ½
∇P₂(β₁)``.  The ball's parts are those the what-if object computes (``Sensitivity._parts``,
:mod:`deltafit.sensitivity.regions._ball`); this module answers the queries from them.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from deltafit.sensitivity.regions._protocol import Region

__all__ = ["SphereRegion"]


class SphereRegion(Region):
    """The ball of Theorem 1 of Okumura et al. (2015) = Theorem 1 of Sivan et al. (2020) as a
    region (``method="sphere"``): center ``β₁ − r``, radius ``‖r‖`` plus the certified solver
    allowance.  It covers every loss and model.

    Attributes
    ----------
    kind : str
        ``"sphere"``.
    r, rnorm, radius : ndarray or None, float, float
        ``r`` (linear models; None for kernels), ``‖r‖`` and the ball's radius.
    """

    kind = "sphere"

    def __init__(self, sens: Any) -> None:
        self._sens = sens
        self._C2, _, _, self.rnorm, self.radius = sens._parts()
        self.r = sens._r

    def center_and_bounds(self, X: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        store, R = self._sens._store, self.radius
        P = store.map(X)
        s = store.center_scores(P, self._sens._C1, self._C2)
        e = np.sqrt(np.maximum(store.sq_norms(P), 0.0))
        return s, s - e * R, s + e * R

    def center_decision(self, X: np.ndarray) -> np.ndarray:
        return self.center_and_bounds(X)[0]

    def decision_bounds(self, X: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        _, lo, hi = self.center_and_bounds(X)
        return lo, hi

    def tightness(self, X: np.ndarray) -> np.ndarray:
        """``2 ‖Φ(x)‖ R`` (Okumura et al. eq. 11)."""
        store = self._sens._store
        return 2.0 * np.sqrt(np.maximum(store.sq_norms(store.map(X)), 0.0)) * self.radius

    def distance_bound(self) -> float:
        return self.rnorm + self.radius

    def coef_bounds(self) -> tuple[np.ndarray, np.ndarray]:
        m = self._sens._store.beta - self.r
        return m - self.radius, m + self.radius
