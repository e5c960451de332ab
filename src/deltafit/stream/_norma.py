"""NORMA: truncated kernel stochastic gradient descent (the ISGD baseline of Sivan et al. §4.4)."""

from __future__ import annotations

import math
from collections.abc import Callable
from numbers import Integral, Real
from typing import Any, TypeVar

import numpy as np
from numpy.typing import ArrayLike, NDArray
from sklearn.base import BaseEstimator, ClassifierMixin, RegressorMixin, is_classifier
from sklearn.exceptions import NotFittedError
from sklearn.metrics.pairwise import PAIRWISE_KERNEL_FUNCTIONS
from sklearn.utils._param_validation import StrOptions
from sklearn.utils.validation import check_is_fitted

from deltafit.kernels import kernel_rows
from deltafit.stream._base import validate_rows
from deltafit.stream._features import as_row, pad
from deltafit.utils._labels import BinaryLabels, LabelMessages
from deltafit.utils._params import Number
from deltafit.utils._transaction import atomic
from deltafit.utils._validation import check_rows

__all__ = ["NORMA", "NORMARegressor"]

_T = TypeVar("_T", bound="_NORMABase")

_RENORM = 1e-100  # the global decay factor is folded into the coefficients below this
_GAMMA_KERNELS = ("rbf", "laplacian", "poly", "polynomial", "sigmoid")
_LABELS = LabelMessages(name="NORMA")
# the kernels pairwise_kernels evaluates from two row sets (deltafit.kernels.validate_kernel)
_KERNEL_NAMES = set(PAIRWISE_KERNEL_FUNCTIONS) - {"precomputed", "additive_chi2", "chi2"}


class _NORMABase(BaseEstimator):
    """State and update shared by :class:`NORMA` and :class:`NORMARegressor`.

    The expansion ``f(x) = scale · Σ_i a_i k(x_i, x) + b`` keeps its support points ``x_i`` in a
    ring buffer of at most ``budget`` rows (grown geometrically until full) and the decay
    ``Π (1 − η_t λ)`` in the single factor ``scale``, so one update costs O(budget · d).
    """

    # ------------------------------------------------------------ parameters
    #: NORMARegressor's parameters; NORMA adds its loss and margin
    _parameter_constraints: dict = {
        "kernel": [StrOptions(_KERNEL_NAMES), callable],
        "gamma": [None, Number(Real, 0, np.inf, closed="neither")],
        "degree": [Number(Integral, 0, None, closed="left")],
        "coef0": [Number(Real, -np.inf, np.inf, closed="neither")],
        "lam": [Number(Real, 0, np.inf, closed="left")],
        "eta": [Number(Real, 0, np.inf, closed="neither")],
        "learning_rate": [StrOptions({"constant", "invscaling"})],
        "budget": [Number(Integral, 1, None, closed="left")],
        "fit_intercept": ["boolean"],
    }

    def __init__(
        self,
        kernel: str | Callable[..., Any] = "rbf",
        gamma: float | None = None,
        degree: int = 3,
        coef0: float = 1.0,
        lam: float = 1e-4,
        eta: float = 0.1,
        learning_rate: str = "constant",
        budget: int = 500,
        fit_intercept: bool = True,
    ) -> None:
        # NORMARegressor's parameters, documented in _DOC_PARAMS and its docstring; NORMA
        # adds its loss and margin
        self.kernel = kernel
        self.gamma = gamma
        self.degree = degree
        self.coef0 = coef0
        self.lam = lam
        self.eta = eta
        self.learning_rate = learning_rate
        self.budget = budget
        self.fit_intercept = fit_intercept

    def _check_params(self):
        """Validate the parameters (scikit-learn's ``_validate_params``, then the rule between
        ``eta`` and ``lam``) and return the kernel's parameters."""
        self._validate_params()
        eta, lam = float(self.eta), float(self.lam)
        if eta * lam >= 1.0:
            raise ValueError(
                f"eta * lam must be < 1 (the decay 1 - eta*lam must stay positive), "
                f"got eta={eta!r}, lam={lam!r}"
            )
        return dict(kernel=self.kernel, gamma=self.gamma, degree=self.degree, coef0=self.coef0)

    def _resolved(self, kw):
        """The kernel parameters with ``gamma=None`` fixed at 1 / (first sample's width): the
        value scikit-learn would use, kept when dict samples grow the feature space."""
        if (
            kw["gamma"] is None
            and isinstance(kw["kernel"], str)
            and kw["kernel"] in _GAMMA_KERNELS
            and "_gamma_width" in self.__dict__
        ):
            kw = dict(kw, gamma=1.0 / self._gamma_width)
        return kw

    def _grow(self, d):
        """A dict sample brought new features: the support points get zero columns up to
        ``d`` (they had those features at 0; gamma stays as resolved at the first sample)."""
        sv = self._sv
        self._sv = np.hstack([sv, np.zeros((sv.shape[0], d - sv.shape[1]))])
        self.n_features_in_ = d

    # ------------------------------------------------------------------ state
    def _reset(self, d):
        self._gamma_width = d  # gamma=None is 1 / (the width of the first sample), for good
        self._kw = self._resolved(self._check_params())
        self.n_features_in_ = d
        self._sv = np.zeros((min(int(self.budget), 16), d))
        self._a = np.zeros(self._sv.shape[0])
        self._start = 0  # ring position of the oldest support point
        self._count = 0  # support points stored
        self._scale = 1.0
        self.intercept_ = 0.0
        self.n_samples_seen_ = 0
        self.n_model_computations_ = 0

    def _f(self, X):
        """Decision values of the current expansion for validated rows ``X``."""
        z = np.full(X.shape[0], self.intercept_)
        if self._count:
            pos = self._positions()
            z += self._scale * (kernel_rows(X, self._sv[pos], **self._kw) @ self._a[pos])
        return z

    def _positions(self):
        return (self._start + np.arange(self._count)) % self._sv.shape[0]

    def _step(self, row, t):
        """One NORMA step on the validated (1, d) row with target t (±1 or a real)."""
        self.n_samples_seen_ += 1
        n = self.n_samples_seen_
        eta = float(self.eta)
        if self.learning_rate == "invscaling":
            eta /= math.sqrt(n)
        f = float(self._f(row)[0])
        g = self._gradient(f, t)  # −l'(f, y): the step direction
        self._scale *= 1.0 - eta * float(self.lam)  # f ← (1 − η λ) f  (all old alphas)
        if self._scale < _RENORM:
            self._a *= self._scale
            self._scale = 1.0
        if g == 0.0:
            return
        if self.fit_intercept:
            self.intercept_ += eta * g
        budget = int(self.budget)
        cap = self._sv.shape[0]
        if self._count < budget:
            if self._count == cap:  # grow (no wrap-around before full)
                new = min(budget, 2 * cap)
                self._sv = np.concatenate([self._sv, np.zeros((new - cap, self._sv.shape[1]))])
                self._a = np.concatenate([self._a, np.zeros(new - cap)])
            pos = self._count
            self._count += 1
        else:  # truncation: drop the oldest term
            pos = self._start
            self._start = (self._start + 1) % cap
        self._sv[pos] = row[0]
        self._a[pos] = eta * g / self._scale

    # ----------------------------------------------------------------- input
    def _validate_X(self, X):
        check_is_fitted(self, "_sv")
        return validate_rows(self, X, reset=False)

    def _row(self, x):
        """A row to predict (features not learned from are ignored)."""
        return self._check_row(as_row(self, x, learn=False))

    def _check_row(self, row, grows=False):
        d = None if grows else self.__dict__.get("n_features_in_")
        return check_rows(row, d, "x", type(self).__name__)

    def _targets(self, y, first, classes=None):
        raise NotImplementedError

    # -------------------------------------------------------------- learning
    def fit(self: _T, X: ArrayLike, y: ArrayLike) -> _T:
        """Start afresh and learn the rows of ``X`` in order (one NORMA step each).

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)
        y : array-like of shape (n_samples,)

        Returns
        -------
        self
        """
        with atomic(self):
            for a in (
                "_sv",
                "_pending",
                "_dict_keys",
                "classes_",
                "n_features_in_",
                "feature_names_in_",
            ):
                self.__dict__.pop(a, None)
            return self.partial_fit(X, y)

    def partial_fit(self: _T, X: ArrayLike, y: ArrayLike, classes: ArrayLike | None = None) -> _T:
        """Learn the rows of ``X`` in order (``learn_one`` for each); nothing changes on error.

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)
        y : array-like of shape (n_samples,)
        classes : array-like of shape (2,), optional
            Classifier: both labels, needed on the first call unless ``y`` shows both.

        Returns
        -------
        self
        """
        first = not hasattr(self, "_sv")
        kw = self._check_params()
        with atomic(self):
            X, y = validate_rows(self, X, y, reset=first)
            t = self._targets(y, first, classes)
        if first:
            d = X.shape[1]
            feats = self.__dict__.get("feature_names_in_")
            self._reset(d)
            if feats is not None:
                self.feature_names_in_ = feats
        self._kw = self._resolved(kw)
        for i in range(X.shape[0]):
            self._step(X[i : i + 1], t[i])
        return self

    def learn_one(self: _T, x: dict | ArrayLike, y: Any) -> _T:
        """Learn one sample (river's spelling); ``x`` is a 1-d array or a dict.

        A dict has integer column keys ``{j: x_j}`` or feature names; missing features read as
        0 and new ones grow the feature space (``stream/_features.py``: the learner fed
        zero-filled rows from the start, to rounding).  A classifier's first samples wait
        until both labels have been seen and are then learned in their order.
        """
        if not isinstance(x, dict):
            return self._learn_row(self._check_row(as_row(self, x)), y, False)
        with atomic(self, attrs=("_dict_keys",)):  # a rejected sample adds no feature
            return self._learn_row(self._check_row(as_row(self, x), grows=True), y, True)

    def _learn_row(self, row, y, grows):
        if not hasattr(self, "_sv"):
            if is_classifier(self):
                self._check_params()
                if not np.isfinite(row).all():
                    raise ValueError("x contains NaN or infinity")
                self._check_label(y)
                pending = self.__dict__.get("_pending", [])
                if pending and pending[0][0].shape[1] != row.shape[1]:
                    if not grows:
                        raise ValueError(
                            f"x has {row.shape[1]} features, but the earlier "
                            f"samples have {pending[0][0].shape[1]}"
                        )
                    d = row.shape[1]  # a dict grew the space: earlier rows had 0 there
                    pending = [(pad(r, d), label) for r, label in pending]
                pending = pending + [(row, y)]
                labels = np.unique(np.asarray([p[1] for p in pending]))
                if labels.size > 2:
                    raise ValueError(
                        f"Only binary classification is supported: labels "
                        f"{labels.tolist()} (NORMA is binary)"
                    )
                if labels.size < 2:
                    self._pending = pending
                    return self
                self.__dict__.pop("_pending", None)
                return self.partial_fit(
                    np.vstack([p[0] for p in pending]),
                    np.asarray([p[1] for p in pending]),
                    classes=labels,
                )
            return self.partial_fit(row, [y])
        kw = self._check_params()
        t = self._targets(np.asarray([y]), False)
        if grows and row.shape[1] > self.n_features_in_:
            self._grow(row.shape[1])
        elif row.shape[1] != self.n_features_in_:
            self._check_row(row)  # the width error
        self._kw = self._resolved(kw)
        self._step(row, t[0])
        return self

    @staticmethod
    def _check_label(y):
        if isinstance(y, (float, np.floating)) and not np.isfinite(y):
            raise ValueError("y is NaN or infinite")

    # ------------------------------------------------------------ attributes
    @property
    def n_support_(self) -> int:
        """Number of support points in the expansion (at most ``budget``)."""
        check_is_fitted(self, "_sv")
        return int(self._count)

    @property
    def support_vectors_(self) -> NDArray[np.float64]:
        """Support points, oldest first, shape ``(n_support_, n_features)``."""
        check_is_fitted(self, "_sv")
        return self._sv[self._positions()].copy()

    @property
    def dual_coef_(self) -> NDArray[np.float64]:
        """Expansion coefficients α_i of :attr:`support_vectors_`, shape ``(n_support_,)``."""
        check_is_fitted(self, "_sv")
        return self._scale * self._a[self._positions()]

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.input_tags.sparse = False
        tags.non_deterministic = False
        return tags


_DOC_PARAMS = """
    kernel : str or callable, default="rbf"
        Kernel, as in :func:`deltafit.kernels.kernel_matrix`.
    gamma : float or None, default=None
        Kernel coefficient (None: ``1 / n_features``).
    degree : int, default=3
    coef0 : float, default=1.0
    lam : float, default=1e-4
        Regularisation λ >= 0 (``eta * lam < 1``).
    eta : float, default=0.1
        Learning rate η > 0.
    learning_rate : {"constant", "invscaling"}, default="constant"
        ``η_t = η`` or ``η_t = η / sqrt(t)``.
    budget : int, default=500
        Most support points kept (the truncation τ); the oldest is dropped beyond it.
"""


class NORMA(ClassifierMixin, _NORMABase):
    (
        """Kernel SVM by NORMA, truncated kernel SGD (Kivinen, Smola and Williamson 2004).

    The ISGD baseline of Sivan, Gabel and Schuster, "Incremental Sensitivity Analysis for
    Kernelized Models", §4.4: stochastic gradient descent in the RKHS on the regularised hinge
    loss with margin ρ, keeping the last ``budget`` support points.  Binary: any two labels,
    ``classes_[1]`` is +1.

    Parameters
    ----------
    loss : {"hinge"}, default="hinge"
        The soft-margin loss ``max(0, ρ − y f(x))`` (use :class:`NORMARegressor` for squared).
    margin : float, default=1.0
        The fixed margin ρ >= 0.
    fit_intercept : bool, default=True
        Learn the unregularised offset b.
    """
        + _DOC_PARAMS
        + """
    Attributes
    ----------
    classes_ : ndarray of shape (2,)
    support_vectors_ : ndarray of shape (n_support_, n_features)
    dual_coef_ : ndarray of shape (n_support_,)
    intercept_ : float
    n_support_ : int
    n_samples_seen_ : int
    n_model_computations_ : int
        Always 0: NORMA computes no batch model.
    n_features_in_ : int

    Notes
    -----
    Kivinen et al. (2004), NORMA_λ for classification (stochastic gradient descent in the
    RKHS on ``λ/2 ‖f‖² + max(0, ρ − y f(x))`` with a fixed margin ρ): with
    ``σ_t = 1`` if ``y_t f_t(x_t) < ρ`` else 0,

        f_{t+1} = (1 − η_t λ) f_t + η_t σ_t y_t k(x_t, ·),   b_{t+1} = b_t + η_t σ_t y_t,

    so ``α_t = η_t σ_t y_t`` and the older α_i shrink by ``(1 − η_t λ)``; the expansion is
    truncated to its last τ = ``budget`` terms (the paper's truncation).  Only nonzero terms
    (σ_t = 1) enter the expansion, so ``budget`` bounds the support vectors, as in Sivan et al.
    §4.4.  The decay is kept as one global factor, renormalised below 1e-100.
    """
    )

    _parameter_constraints: dict = {
        **_NORMABase._parameter_constraints,
        "loss": [StrOptions({"hinge"})],  # NORMARegressor: the squared loss
        "margin": [Number(Real, 0, np.inf, closed="left")],
    }

    def __init__(
        self,
        kernel: str | Callable[..., Any] = "rbf",
        gamma: float | None = None,
        degree: int = 3,
        coef0: float = 1.0,
        lam: float = 1e-4,
        eta: float = 0.1,
        learning_rate: str = "constant",
        budget: int = 500,
        loss: str = "hinge",
        margin: float = 1.0,
        fit_intercept: bool = True,
    ) -> None:
        super().__init__(
            kernel=kernel,
            gamma=gamma,
            degree=degree,
            coef0=coef0,
            lam=lam,
            eta=eta,
            learning_rate=learning_rate,
            budget=budget,
            fit_intercept=fit_intercept,
        )
        self.loss = loss
        self.margin = margin

    def _gradient(self, f, t):
        return t if t * f < float(self.margin) else 0.0

    def _targets(self, y, first, classes=None):
        labels = BinaryLabels(None if first else self.classes_, _LABELS).partial_fit(y, classes)
        self.classes_ = labels.classes_
        return labels.encode(y)

    def decision_function(self, X: ArrayLike) -> NDArray[np.float64]:
        """``f(x) = Σ_i α_i k(x_i, x) + b``; positive means ``classes_[1]``."""
        return self._f(self._validate_X(X))

    def predict(self, X: ArrayLike) -> NDArray[Any]:
        """``classes_[1]`` where the decision value is positive, else ``classes_[0]``."""
        z = self.decision_function(X)
        return BinaryLabels(self.classes_).decode(z)

    def predict_one(self, x: dict | ArrayLike) -> Any:
        """The prediction for one sample (river's spelling)."""
        if not hasattr(self, "_sv"):
            raise NotFittedError("this NORMA has not seen both labels yet")
        row = self._row(x)
        return self.classes_[int(self._f(row)[0] > 0)]

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.classifier_tags.multi_class = False
        return tags


class NORMARegressor(RegressorMixin, _NORMABase):
    (
        """Kernel least squares by NORMA, truncated kernel SGD (Kivinen, Smola and Williamson 2004).

    The regression twin of :class:`NORMA` (Sivan et al. §4.4's ISGD baseline for regression).

    Parameters
    ----------
    fit_intercept : bool, default=True
        Learn the unregularised offset b.
    """
        + _DOC_PARAMS
        + """
    Attributes
    ----------
    support_vectors_, dual_coef_, intercept_, n_support_, n_samples_seen_, n_features_in_
        As in :class:`NORMA`.
    n_model_computations_ : int
        Always 0.

    Notes
    -----
    Kivinen et al. (2004), NORMA for regression with the squared loss ``½ (y − f(x))²``:

        f_{t+1} = (1 − η_t λ) f_t + η_t (y_t − f_t(x_t)) k(x_t, ·),
        b_{t+1} = b_t + η_t (y_t − f_t(x_t)),

    truncated to the last ``budget`` terms.
    """
    )

    # no __init__ of its own: its parameters are those of _NORMABase.__init__

    @staticmethod
    def _gradient(f, t):
        return t - f

    def _targets(self, y, first, classes=None):
        y = np.asarray(y, dtype=np.float64)
        if not np.all(np.isfinite(y)):
            raise ValueError("y contains NaN or infinity")
        return y

    def predict(self, X: ArrayLike) -> NDArray[np.float64]:
        """``f(x) = Σ_i α_i k(x_i, x) + b``."""
        return self._f(self._validate_X(X))

    def predict_one(self, x: dict | ArrayLike) -> float:
        """The prediction for one sample (river's spelling)."""
        check_is_fitted(self, "_sv")
        return float(self._f(self._row(x))[0])
