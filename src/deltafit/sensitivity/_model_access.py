"""What the bounds need from a fitted deltafit estimator, in one place.

The sensitivity layer reads the model's solution (β for linear models, α over the ledger's
slots for kernel models), its feature map or kernel, and the training rows of samples named by
id.  Keeping those reads here keeps the bound code free of the estimators' internals.
"""

from __future__ import annotations

import functools

import numpy as np
from sklearn.exceptions import NotFittedError

from ..kernels import kernel_diagonal, kernel_matrix, kernel_rows
from ..losses import get_loss
from ..models._base import UpdatableMixin

__all__ = ["COVERED_LOSSES", "ScoreFunction", "certified_residual", "check_model", "fitted_C",
           "fitted_loss", "kernel_functions", "kernel_params", "training_scores", "solution_sq_norm"]

COVERED_LOSSES = ("squared", "logistic", "squared_hinge")


def check_model(model, what="sensitivity bounds"):
    """ValueError/NotFittedError unless ``model`` is a fitted deltafit estimator whose loss is
    convex and differentiable (the condition of Okumura Thm 1 / Sivan Thm 1)."""
    if not isinstance(model, UpdatableMixin):
        raise ValueError(
            f"{what} need a fitted deltafit estimator (LinearClassifier, LinearRegressor, "
            f"KernelClassifier, KernelRegressor), got {type(model).__name__}"
        )
    if not hasattr(model, "_ledger"):
        raise NotFittedError(
            f"this {type(model).__name__} is not fitted yet; call fit before asking for {what}"
        )
    opts = getattr(model._state, "opts", None)
    if opts is not None and opts.loss.name in COVERED_LOSSES:
        return opts.loss  # the loss object the solution was computed with
    loss = fitted_loss(model)
    if loss not in COVERED_LOSSES:
        raise ValueError(
            f"{what} need a convex differentiable loss {list(COVERED_LOSSES)}; "
            f"loss={loss!r} is not covered"
        )
    return get_loss(loss)


def certified_residual(model):
    """``grad_norm_`` without scikit-learn's fitted check: the certified ‖β − β*‖ of the
    stored solution (computed from the exact statistics for the closed form, cached per
    model version)."""
    return model._certified_residual()


def fitted_loss(model):
    """The loss the stored solution minimises (not the ``loss`` parameter, which
    ``set_params`` may have changed since the fit)."""
    opts = getattr(model._state, "opts", None)
    return "squared" if opts is None else opts.loss.name


def fitted_C(model):
    """The C the stored solution was computed with (``set_params`` may have changed the
    parameter since the fit; the state keeps the fitted value)."""
    st = model._state
    opts = getattr(st, "opts", None)
    return float(opts.C) if opts is not None else 1.0 / (2.0 * st.rho)


def kernel_params(model):
    """Keyword arguments of :func:`~deltafit.kernels.kernel_matrix` / ``kernel_rows`` for a
    kernel model, frozen at its current parameters (the intercept term included)."""
    return dict(kernel=model.kernel, gamma=model.gamma, degree=model.degree, coef0=model.coef0,
                kernel_params=model.kernel_params, intercept_scaling=model._s)


def kernel_functions(model):
    """``(k(A, B), diag(A))`` of a kernel model, frozen at its current parameters (the
    regularised intercept term ``intercept_scaling²`` included)."""
    kw = kernel_params(model)
    return functools.partial(kernel_matrix, **kw), functools.partial(kernel_diagonal, **kw)


class ScoreFunction:
    """``⟨Φ(x), β⟩`` of a fitted model's current solution for validated float rows, without
    per-call checks: the kernel expansion over the active training rows (``kernel_rows``), or
    the linear score.  Used by the per-sample loops of the stream and active learners.

    Attributes
    ----------
    kernel : bool
    kw : dict
        :func:`kernel_params` (kernel models).
    """

    def __init__(self, model):
        self.kernel = bool(model._kernel)
        if self.kernel:
            A = model._ledger.active_slots()
            self.points, self.alpha = model._ledger.X[A], model._state.alpha[A]
            self.kw = kernel_params(model)
        else:
            self.beta = model._state.beta.copy()
            self.features = model._features

    def mapped(self, P):
        """Scores of points already mapped (raw rows for kernels, Φ rows for linear models)."""
        if self.kernel:
            return kernel_rows(P, self.points, **self.kw) @ self.alpha
        return P @ self.beta

    def __call__(self, X):
        """Scores of raw rows."""
        return self.mapped(X if self.kernel else self.features(X))


def training_scores(model, slots):
    """``z = ⟨Φ(x_s), β⟩`` and ``‖Φ(x_s)‖²`` of stored training samples (by slot).

    Linear models use the stored feature rows; kernel models the stored kernel matrix
    (O(n) per sample, no kernel evaluation).
    """
    led, st = model._ledger, model._state
    if model._kernel:
        A = np.flatnonzero(led.active)
        K = st.gram.K
        z = K[np.ix_(slots, A)] @ st.alpha[A]
        return z, K[slots, slots].copy()
    if not led.keep_rows:
        raise ValueError(
            "this model keeps no training rows (keep_data=False); these bounds need them"
        )
    rows = led.X[slots]
    return rows @ st.beta, np.einsum("ij,ij->i", rows, rows)


def solution_sq_norm(model):
    """``‖β‖²`` of the model's current solution (RKHS norm for kernel models)."""
    st = model._state
    if not model._kernel:
        return float(st.beta @ st.beta)
    A = np.flatnonzero(model._ledger.active)
    a = st.alpha[A]
    return float(a @ (st.gram.K[np.ix_(A, A)] @ a))
