"""Kernel updatable estimators: β = Σ α_i Φ(x_i) through a kernel, dual state over slots."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import scipy.sparse as sp
from sklearn.base import BaseEstimator, ClassifierMixin, RegressorMixin
from sklearn.utils.validation import check_is_fitted

from deltafit._ledger import Ledger
from deltafit._states._protocol import DataChange
from deltafit.kernels import kernel_matrix
from deltafit.models._base import UpdatableMixin
from deltafit.models._guard import guarded_read
from deltafit.models._params import KERNEL, constraints
from deltafit.models._predict import ClassifierOutputMixin, RegressorTags

__all__ = ["KernelClassifier", "KernelRegressor"]


class _KernelModel(UpdatableMixin, BaseEstimator):
    _kernel = True

    def __init__(
        self,
        loss: str = "squared",
        C: float = 1.0,
        *,
        kernel: str | Callable[..., Any] = "rbf",
        gamma: str | float | None = "scale",
        degree: int = 3,
        coef0: float = 1.0,
        kernel_params: dict | None = None,
        fit_intercept: bool = True,
        intercept_scaling: float = 1.0,
        tol: float = 1e-10,
        max_iter: int = 100,
        warm_start: bool = False,
        callback: Callable[..., Any] | None = None,
    ) -> None:
        self.loss = loss
        self.C = C
        self.kernel = kernel
        self.gamma = gamma
        self.degree = degree
        self.coef0 = coef0
        self.kernel_params = kernel_params
        self.fit_intercept = fit_intercept
        self.intercept_scaling = intercept_scaling
        self.tol = tol
        self.max_iter = max_iter
        self.warm_start = warm_start
        self.callback = callback

    _parameter_constraints: dict = constraints(UpdatableMixin._losses, KERNEL)

    #: the kernels :func:`sklearn.metrics.pairwise.pairwise_kernels` evaluates on sparse rows
    _SPARSE_KERNELS = ("linear", "rbf", "poly", "sigmoid", "cosine", "laplacian")

    def _sparse_refusal(self, fitting=True):
        kernel = self.kernel if fitting or not self._is_fitted() else self._fitted("kernel")
        if callable(kernel) or kernel not in self._SPARSE_KERNELS:
            name = "a callable kernel" if callable(kernel) else f"kernel={kernel!r}"
            return (
                f"{name} is not evaluated on sparse rows; sparse X needs one of "
                f"{list(self._SPARSE_KERNELS)}"
            )
        return None

    def _k(self, X, Y):
        return kernel_matrix(X, Y, **self._kernel_spec())

    _SPEC_KERNEL = ("kernel", "gamma", "degree", "coef0", "kernel_params")

    def _take_spec(self, X=None, w=None):
        super()._take_spec(X, w)
        self._spec["gamma"] = _resolve_gamma(
            self.gamma, X, getattr(self, "n_features_in_", None), w
        )

    def _kernel_spec(self):
        """Keyword arguments of :func:`~deltafit.kernels.kernel_matrix` for the kernel the
        model was fitted with (intercept term included)."""
        kw = {k: self._fitted(k) for k in self._SPEC_KERNEL}
        kw["intercept_scaling"] = self._s
        return kw

    def _warm_coef(self):
        if self._is_fitted() and self._ledger.n_samples != self.n_samples_fit_:
            return None  # updated since the fit: the coefficients are of other samples
        return super()._warm_coef()

    def _build(self, X, t, previous, w=None):
        n = X.shape[0]
        K = self._k(X, X)
        # the state is O(capacity²): leave room for a batch of additions, grow gently
        led = Ledger(
            X.shape[1],
            keep_rows=True,
            capacity=Ledger.fit_capacity(n),
            growth=1.25,
            n_outputs=self._n_outputs_fitted,
            sparse_rows=sp.issparse(X),
        )
        self._state = self._new_state(K, t, led.capacity, previous, w)
        led.insert(led.allocate(n), X, t, w=w)
        self._ledger = led
        self.n_samples_fit_ = n

    def _stored_rows(self, X):
        return X

    def _apply(self, plan):
        led = self._ledger
        change = DataChange(
            led,
            remove_slots=plan.remove_slots,
            relabel_slots=plan.relabel_slots,
            relabel_t=plan.relabel_t,
            w_add=plan.w_add,
            reweight_slots=plan.reweight_slots,
            reweight_w=plan.reweight_w,
        )
        if plan.adds:
            Xa = plan.X_add
            add = change.add_slots = led.allocate(Xa.shape[0])
            change.t_add = plan.t_add
            change.K_cross = np.zeros((led.capacity, add.size))
            A = np.flatnonzero(led.active)
            rows = (
                sp.vstack([led.X[A], Xa], format="csr")
                if sp.issparse(Xa)
                else np.vstack([led.X[A], Xa])
            )
            both = self._k(rows, Xa)  # one kernel call: k([X_A; Xa], Xa)
            change.K_cross[A] = both[: A.size]
            change.K_new = both[A.size :]
        self._apply_change(change)
        return change.add_slots

    def _decision_checked(self, X):
        led = self._ledger
        A = led.active_slots()
        return self._k(X, led.X[A]) @ self._state.alpha[A]

    # ------------------------------------------------------------ attributes
    @property
    @guarded_read
    def dual_coef_(self) -> np.ndarray:
        """α of the training samples (the expansion ``β = Σ α_i Φ(x_i)``), in the order of
        ``sample_ids_``.  For ``loss="hinge"`` these are ``y_i α_i`` with α_i ∈ [0, C] the SVM
        dual variables (scikit-learn's ``SVC.dual_coef_`` convention): 0 outside the margin,
        ``±C`` for margin violators, in between for free support vectors."""
        check_is_fitted(self, "_state")
        alpha = self._state.alpha[self._ledger.active_slots()]
        # classifiers: one row per class (SVC's layout); regressors: one column per output
        # (KernelRidge's)
        return alpha.T.copy() if alpha.ndim == 2 and self._classifier else alpha.copy()

    @property
    def gamma_(self) -> float:
        """The kernel coefficient the model was fitted with (``gamma="scale"`` or ``"auto"``
        resolved on the training rows of ``fit``).  Every update keeps it: an updated model
        equals a fresh fit with ``gamma=gamma_``."""
        check_is_fitted(self, "_state")
        return float(self._spec["gamma"])

    @property
    @guarded_read
    def X_fit_(self) -> Any:
        """Training rows, in the order of ``sample_ids_``."""
        check_is_fitted(self, "_state")
        return self._ledger.X[self._ledger.active_slots()].copy()

    @property
    @guarded_read
    def intercept_(self) -> float | np.ndarray:
        """``intercept_scaling² · Σ α_i`` (the regularised constant feature's contribution)."""
        check_is_fitted(self, "_state")
        alpha = self._state.alpha[self._ledger.active_slots()]
        return (
            self._s**2 * alpha.sum(axis=0) if alpha.ndim == 2 else float(self._s**2 * alpha.sum())
        )


def _resolve_gamma(gamma, X, n_features=None, w=None):
    """The numeric kernel coefficient for training rows ``X``, as :class:`sklearn.svm.SVC`
    resolves it: ``"scale"`` is ``1 / (n_features · X.var())`` (1 when X is constant),
    ``"auto"`` (or None) ``1 / n_features``.  With sample weights ``w`` the variance is the
    weighted one (a sample of weight 2 counts as two copies)."""
    if gamma == "scale":
        if X is None:
            raise ValueError("gamma='scale' is resolved from the training rows at fit")
        if sp.issparse(X):  # E[x²] − E[x]², over every entry (the zeros included)
            sq = np.asarray(X.multiply(X).mean(axis=1), dtype=np.float64).ravel()
            mu = np.asarray(X.mean(axis=1), dtype=np.float64).ravel()
            if w is None:
                m = float(mu.mean())
                var = float(sq.mean()) - m * m
            else:
                m = float(w @ mu) / float(w.sum())
                var = float(w @ (sq - 2.0 * m * mu + m * m)) / float(w.sum())
            var = max(var, 0.0)
        elif w is None:
            var = float(X.var())
        else:
            mean = float(w @ X.mean(axis=1)) / float(w.sum())
            var = float(w @ ((X - mean) ** 2).mean(axis=1)) / float(w.sum())
        return 1.0 / (X.shape[1] * var) if var > 0.0 else 1.0
    if gamma is None or gamma == "auto":
        return 1.0 / (X.shape[1] if X is not None else n_features)
    return float(gamma)


_KERNEL_DOC_PARAMS = """
    C : float, default=1.0
        Weight of the data term in ``C Σ ℓ(y_i, z_i) + ½‖β‖²``.
    kernel : {"rbf", "linear", "poly", "sigmoid", "laplacian", "cosine"} or callable
        Evaluated by :func:`sklearn.metrics.pairwise.pairwise_kernels`; a callable is called as
        ``kernel(X, Y)`` and returns the kernel matrix (scikit-learn's SVC convention).
    gamma : {"scale", "auto"} or float, default="scale"
        Kernel coefficient, as in :class:`sklearn.svm.SVC`: ``"scale"`` is
        ``1 / (n_features · X.var())`` of the training rows, ``"auto"`` (or None)
        ``1 / n_features``.  Resolved at ``fit`` and kept: updates, predictions and saved
        files use the value of the fit.
    degree : int, default=3
    coef0 : float, default=1.0
    kernel_params : dict or None
        Extra keyword arguments for the kernel.
    fit_intercept : bool, default=True
        Add ``intercept_scaling²`` to the kernel (a regularised constant feature).
    intercept_scaling : float, default=1.0
    tol : float, default=1e-10
        Newton stops when the RKHS gradient norm ``‖∇J‖ ≤ tol · ‖∇J(0)‖``; the hinge QP when
        the KKT violation (margin units) is at most ``tol`` (or at the rounding floor).
    max_iter : int, default=100
    warm_start : bool, default=False
    callback : callable or None
        ``callback(iteration, alpha, grad_norm, objective, grad)`` with ``grad`` the expansion
        coefficients of ∇J (see :func:`deltafit.solvers.newton_kernel`; for the hinge, of a
        subgradient, see :func:`deltafit.solvers.hinge_kernel`); returning True stops the
        solver.
"""


class KernelClassifier(ClassifierOutputMixin, ClassifierMixin, _KernelModel):
    __doc__ = (
        """Kernel classifier with exact add / remove / relabel (LS-SVM, logistic, L2-SVM,
    L1-SVM), for two classes or more.

    With K ≥ 3 classes it solves the K one-vs-rest problems (class k against the rest, same C)
    over one ledger and one kernel matrix, evaluated once and shared by the classes; the
    predicted class is that of the largest score.

    Parameters
    ----------
    loss : {"squared", "logistic", "squared_hinge", "hinge"}, default="squared"
        ``"squared"`` is the kernel LS-SVM (``(K + ρI) α = y``, ρ = 1/(2C)); its updates border
        or shrink the system exactly (Lee et al., "Exact incremental and decremental
        learning for LS-SVM").  ``"logistic"`` and
        ``"squared_hinge"`` re-solve with Newton, warm-started from the current α.
        ``"hinge"`` is the L1-SVM (an SVC whose intercept is the regularised constant in the
        kernel), solved exactly through its dual box QP
        (:func:`deltafit.solvers.hinge_kernel`) and re-solved warm after each change; its
        ``tol`` bounds the KKT violation, and it offers no ``predict_proba``.
    """
        + _KERNEL_DOC_PARAMS
        + """
    Attributes
    ----------
    classes_ : ndarray of shape (n_classes,)
    dual_coef_ : ndarray of shape (n_samples,) or (n_classes, n_samples)
        The expansion coefficients α (one row per class for K ≥ 3 classes).
    intercept_ : float or ndarray of shape (n_classes,)
    X_fit_, sample_ids_, n_features_in_

    Examples
    --------
    >>> import numpy as np
    >>> import deltafit
    >>> from deltafit.datasets import load_breast_cancer
    >>> X, y = load_breast_cancer()
    >>> X = (X - X.mean(axis=0)) / X.std(axis=0)
    >>> m = deltafit.KernelClassifier(C=1.0).fit(X[:150], y[:150])
    >>> new = m.add(X[150:200], y[150:200])        # exact: the kernel system is bordered
    >>> _ = m.remove([0, 1])
    >>> fresh = deltafit.KernelClassifier(C=1.0, gamma=m.gamma_).fit(X[2:200], y[2:200])
    >>> bool(np.allclose(m.decision_function(X), fresh.decision_function(X)))
    True
    """
    )

    _classifier = True
    _losses = ("squared", "logistic", "squared_hinge", "hinge")
    _parameter_constraints: dict = constraints(_losses, KERNEL)


class KernelRegressor(RegressorTags, RegressorMixin, _KernelModel):
    __doc__ = (
        """Kernel ridge regression with exact add / remove / relabel.

    ``(K + ρI) α = y`` with ``ρ = 1/(2C)``: ``KernelRidge(alpha=1/(2C))`` when
    ``fit_intercept=False``.  A 2-D ``y`` of K outputs shares one factorisation (K right-hand
    sides; ``dual_coef_`` then has one column per output, as ``KernelRidge``'s).

    Parameters
    ----------
    loss : {"squared"}, default="squared"
    """
        + _KERNEL_DOC_PARAMS
        + """
    Attributes
    ----------
    dual_coef_, X_fit_, intercept_, sample_ids_, n_features_in_

    Examples
    --------
    >>> import numpy as np
    >>> import deltafit
    >>> from sklearn.datasets import load_diabetes
    >>> X, y = load_diabetes(return_X_y=True)
    >>> m = deltafit.KernelRegressor(C=10.0, gamma=0.5).fit(X[:300], y[:300])
    >>> _ = m.remove([5, 6, 7])
    >>> _ = m.relabel([8], [150.0])
    >>> y2 = y[:300].copy()
    >>> y2[8] = 150.0
    >>> keep = np.setdiff1d(np.arange(300), [5, 6, 7])
    >>> fresh = deltafit.KernelRegressor(C=10.0, gamma=0.5).fit(X[keep], y2[keep])
    >>> bool(np.allclose(m.predict(X), fresh.predict(X)))
    True
    """
    )
