"""LSQSGD: least squares by robust stochastic approximation (averaged SGD in a ball)."""

from __future__ import annotations

from numbers import Real

import numpy as np
from numpy.typing import ArrayLike, NDArray
from sklearn.base import RegressorMixin

from deltafit.solvers._sgd import LSQSGD as _LSQSGD_KIND
from deltafit.stream._base import StreamLinearModel
from deltafit.utils._params import Number

__all__ = ["LSQSGD"]


class LSQSGD(RegressorMixin, StreamLinearModel):
    """Least-squares regression by robust stochastic approximation, one pass, averaged.

    Nemirovski, Juditsky, Lan and Shapiro (2009), §2.2 (Euclidean setup): minimise
    ``E ½ (⟨w, x⟩ − y)²`` over ``‖w‖ ≤ radius`` by projected stochastic gradient steps and predict
    with the γ-weighted average of the iterates — the least-squares learner of Joulani et al.
    (2015) §5 (step size ``n^{-1/2}``, unit ball), for which
    :func:`deltafit.model_selection.treecv` runs the whole TreeCV recursion compiled.

    Parameters
    ----------
    alpha : float or None, default=None
        Constant step size γ (the paper: ``1/sqrt(n)``); None: ``γ_t = 1/sqrt(t)``, which needs
        no n in advance and equals ``n^{-1/2}`` at the end of a pass over n samples.
    radius : float, default=1.0
        Radius of the feasible ball (``np.inf``: no projection).
    fit_intercept : bool, default=True
        Add a constant feature of value ``intercept_scaling`` (constrained and averaged like the
        other coordinates).
    intercept_scaling : float, default=1.0
    shuffle : bool, default=False
        ``fit`` visits the rows in a random order.
    random_state : int, RandomState or None

    Attributes
    ----------
    coef_ : ndarray of shape (n_features,)
        The averaged weights (the model that predicts).
    intercept_ : float
    t_ : int
    n_features_in_ : int

    Notes
    -----
    Step ``t``: ``w̄ ← w̄ + (γ_t / Σ_{s≤t} γ_s)(w_t − w̄)`` (the average over the points where the
    gradients are taken, ``w_1 = 0``), then
    ``w_{t+1} = Π(w_t − γ_t (⟨w_t, x_t⟩ − y_t) x_t)``.  Compiled with numba.

    Examples
    --------
    >>> import numpy as np
    >>> from deltafit.stream import LSQSGD
    >>> rng = np.random.default_rng(0)
    >>> X = rng.normal(size=(2000, 3)) / np.sqrt(3)
    >>> w = np.array([0.5, -0.3, 0.2])
    >>> y = X @ w + 0.01 * rng.normal(size=2000)
    >>> reg = LSQSGD(fit_intercept=False).fit(X, y)          # one pass, averaged iterates
    >>> bool(np.linalg.norm(reg.coef_ - w) < 0.1), bool(np.linalg.norm(reg.coef_) <= 1.0)
    (True, True)
    """

    _kind = _LSQSGD_KIND

    _parameter_constraints: dict = {
        **StreamLinearModel._parameter_constraints,
        "alpha": [None, Number(Real, 0, np.inf, closed="neither")],
        "radius": [Number(Real, 0, np.inf, closed="right")],  # inf: no projection
    }

    def __init__(
        self,
        alpha: float | None = None,
        radius: float = 1.0,
        fit_intercept: bool = True,
        intercept_scaling: float = 1.0,
        shuffle: bool = False,
        random_state: int | np.random.RandomState | None = None,
    ) -> None:
        super().__init__(
            fit_intercept=fit_intercept,
            intercept_scaling=intercept_scaling,
            shuffle=shuffle,
            random_state=random_state,
        )
        self.alpha = alpha
        self.radius = radius

    def _step_param(self):
        return 0.0 if self.alpha is None else float(self.alpha)

    def _radius(self):
        return float(self.radius)

    def _t_index(self):
        return 2 * (self.n_features_in_ + 1)

    def _encode(self, y, fitting=False, classes=None):
        y = np.asarray(y, dtype=np.float64)
        if not np.all(np.isfinite(y)):
            raise ValueError("y contains NaN or infinity")
        return y

    def _tree_targets(self, y):
        """TreeCV: targets as floats (no classes)."""
        try:
            t = np.asarray(y, dtype=np.float64)
        except (TypeError, ValueError) as exc:
            raise ValueError(f"LSQSGD needs numeric targets: {exc}") from exc
        if not np.all(np.isfinite(t)):
            raise ValueError("y contains NaN or infinity")
        return t, None

    @staticmethod
    def _tree_predict(decision, classes):
        """TreeCV: the decision value is the prediction."""
        return np.asarray(decision, dtype=np.float64)

    def predict(self, X: ArrayLike) -> NDArray[np.float64]:
        """``⟨w̄, x⟩ + intercept_``."""
        return self._decision(X)
