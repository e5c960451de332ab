"""The ball around the optimum from any approximate solution and its gradient.

For the 1-strongly convex canonical objective J (ARCHITECTURE.md, "The problem") and any point β̂,
``⟨∇J(β̂), β̂ − β*⟩ ≥ ‖β̂ − β*‖²``, so β* lies in the ball of center ``β̂ − ∇J(β̂)/2`` and
radius ``‖∇J(β̂)‖/2`` (Theorem 6 of Okumura et al. (2015) with λ = 1 in our scaling).  Its bounds
tighten as a solver converges, which makes it a stopping rule: :class:`CertainSigns` stops a
solver once the signs of given scores are certified.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, cast

import numpy as np
from numpy.typing import ArrayLike

from deltafit.sensitivity._model_access import check_model, kernel_functions
from deltafit.sensitivity.regions._sphere import (
    KernelSphere,
    PrimalSphere,
    _as_float_rows,
    _Features,
)

__all__ = ["gradient_sphere", "model_gradient_sphere", "CertainSigns"]


def gradient_sphere(
    coef: ArrayLike,
    grad: ArrayLike,
    *,
    points: ArrayLike | None = None,
    kernel: Any = None,
    diagonal: Callable[..., Any] | None = None,
    grad_norm: float | None = None,
    features: Callable[..., Any] | None = None,
) -> PrimalSphere | KernelSphere:
    """The ball ``(coef − grad/2, ‖grad‖/2)`` that contains the optimum.

    Theorem 6 of Okumura et al. (2015), "Quick sensitivity analysis for incremental data
    modification and its application to leave-one-out CV in linear classification problems".

    Parameters
    ----------
    coef : ndarray of shape (p,) or (n,)
        The approximate solution: β over explicit features, or the expansion coefficients α
        over ``points`` for a kernel model.
    grad : ndarray, same shape as ``coef``
        The full gradient ∇J(coef) of the canonical objective: a vector, or its expansion
        coefficients over ``points`` (``g = α + C ℓ'(z)``, what the kernel solver's callback
        receives).
    points : ndarray of shape (n, n_features), optional
        Kernel form: the points of the expansion.
    kernel : callable or fitted deltafit kernel estimator, optional
        Kernel form: ``kernel(A, B)`` (intercept term included), or a kernel model whose
        kernel (and ``intercept_scaling``) is used.
    diagonal : callable, optional
        ``diagonal(A)``, the kernel's diagonal (taken from the model when ``kernel`` is one).
    grad_norm : float, optional
        ‖∇J‖ when already known (the RKHS norm ``sqrt(gᵀKg)`` for the kernel form).
    features : callable, optional
        Primal form: the feature map used by ``decision_bounds``.

    Returns
    -------
    PrimalSphere or KernelSphere

    Examples
    --------
    A ball around an approximate solution of ``J(β) = C Σ (y_i − ⟨x_i, β⟩)² + ½‖β‖²`` (ridge,
    gradient ``β + 2C Xᵀ(Xβ − y)``) contains the exact one:

    >>> import numpy as np
    >>> from deltafit.sensitivity import gradient_sphere
    >>> rng = np.random.default_rng(0)
    >>> X, y, C = rng.normal(size=(50, 3)), rng.normal(size=50), 0.1
    >>> exact = np.linalg.solve(np.eye(3) + 2 * C * X.T @ X, 2 * C * X.T @ y)
    >>> beta = exact + 0.01                      # an iterate of some solver
    >>> ball = gradient_sphere(beta, beta + 2 * C * X.T @ (X @ beta - y))
    >>> ball.contains(exact)
    True
    >>> lo, hi = ball.decision_bounds(X)
    >>> bool(np.all((lo <= X @ exact) & (X @ exact <= hi)))
    True
    """
    coef = np.asarray(coef, dtype=np.float64).ravel()
    grad = np.asarray(grad, dtype=np.float64).ravel()
    if coef.shape != grad.shape:
        raise ValueError(f"coef has shape {coef.shape} but grad has shape {grad.shape}")
    if not (np.all(np.isfinite(coef)) and np.all(np.isfinite(grad))):
        raise ValueError("coef or grad contains NaN or infinity")
    if points is None:
        if kernel is not None:
            raise ValueError("a kernel needs the points of the expansion")
        gn = float(np.linalg.norm(grad)) if grad_norm is None else float(grad_norm)
        return PrimalSphere(coef - 0.5 * grad, 0.5 * gn, features=features)
    points = cast(np.ndarray, _as_float_rows(points, "points"))
    if points.shape[0] != coef.shape[0]:
        raise ValueError(f"{coef.shape[0]} coefficients but {points.shape[0]} points")
    if kernel is None:
        raise ValueError("the kernel form needs kernel=callable or a fitted kernel model")
    if not callable(kernel):
        check_model(kernel, "a gradient sphere")
        if not kernel.problem_.kernel:
            raise ValueError("kernel must be a callable or a fitted deltafit kernel model")
        kernel, model_diagonal = kernel_functions(kernel)
        diagonal = model_diagonal if diagonal is None else diagonal
    if grad_norm is None:
        grad_norm = float(np.sqrt(max(grad @ kernel(points, points) @ grad, 0.0)))
    return KernelSphere(coef - 0.5 * grad, points, 0.5 * float(grad_norm), kernel, diagonal)


def model_gradient_sphere(model: Any) -> PrimalSphere | KernelSphere:
    """The ball around a fitted model's own solution, from its full gradient.

    The ball of :func:`gradient_sphere` (Theorem 6 of Okumura et al. (2015)) at the model's
    coefficients.

    Useful for a model whose solver was stopped early (small ``max_iter``, a callback): the
    ball certifies where the exact optimum lies.  Costs one pass over the training data
    (O(n p) linear, O(n²) kernel from the stored kernel matrix).

    Parameters
    ----------
    model : fitted deltafit estimator (rows kept)

    Returns
    -------
    PrimalSphere or KernelSphere

    Examples
    --------
    >>> import numpy as np
    >>> from sklearn.datasets import load_breast_cancer
    >>> from sklearn.preprocessing import StandardScaler
    >>> import deltafit
    >>> from deltafit.sensitivity import model_gradient_sphere
    >>> X, y = load_breast_cancer(return_X_y=True)
    >>> X = StandardScaler().fit_transform(X)
    >>> import warnings
    >>> with warnings.catch_warnings():           # stopped early: ConvergenceWarning
    ...     warnings.simplefilter("ignore")
    ...     early = deltafit.LinearClassifier(loss="logistic", max_iter=2).fit(X, y)
    >>> ball = model_gradient_sphere(early)
    >>> exact = deltafit.LinearClassifier(loss="logistic").fit(X, y)
    >>> lo, hi = ball.decision_bounds(X)
    >>> d = exact.decision_function(X)
    >>> bool(np.all((lo <= d) & (d <= hi)))
    True
    """
    check_model(model, "a gradient sphere")
    prob = model.problem_
    A = prob.live
    if prob.kernel:
        alpha = np.array(prob.alpha[A])
        K = prob.gram(A)
        g = prob.gradient()
        kfun, kdiag = prob.kernel_functions()
        return KernelSphere(
            alpha - 0.5 * g, prob.rows[A], 0.5 * np.sqrt(max(g @ K @ g, 0.0)), kfun, kdiag
        )
    if not prob.keeps_rows:
        raise ValueError(
            "this model keeps no training rows (keep_data=False); the gradient ball needs them"
        )
    beta = np.array(prob.coef)
    g = prob.gradient()
    return PrimalSphere(beta - 0.5 * g, 0.5 * np.linalg.norm(g), features=_Features(prob))


class CertainSigns:
    """Solver callback: stop once the signs of given scores of the optimum are certified.

    At each iterate the callback forms the ball of Theorem 6 of Okumura et al. (2015) from the
    gradient the solver passes, bounds every score, and returns True (stop) when each score's sign
    is decided.  Pass it as ``callback=`` to :func:`deltafit.solvers.newton_primal` /
    :func:`~deltafit.solvers.newton_kernel` or to a deltafit estimator.

    Parameters
    ----------
    eta : ndarray of shape (k, p), optional
        Primal form: the score vectors (e.g. test rows Φ(x), the constant feature last).
    cross_kernel : ndarray of shape (k, n), optional
        Kernel form: ``⟨η_i, Φ(x_j)⟩`` against the solver's samples in its order, with the
        model's kernel *including its intercept term* ``intercept_scaling²`` (e.g.
        ``deltafit.kernels.kernel_matrix(X_test, X_train, kernel="rbf", gamma=g,
        intercept_scaling=s)``; a plain ``rbf_kernel`` misses the ``s²`` and certifies wrongly).
    sq_norms : ndarray of shape (k,), optional
        Kernel form: ``‖η_i‖²`` (e.g. ``k(x, x) + s²``).

    Attributes
    ----------
    lo_, hi_ : ndarray of shape (k,)
        Bounds at the last iterate seen.
    certain_ : ndarray of bool
        ``lo_ > 0`` or ``hi_ ≤ 0``.
    n_calls_ : int

    Examples
    --------
    Stop the solver as soon as the labels of five test rows are certified:

    >>> import numpy as np
    >>> from sklearn.datasets import load_breast_cancer
    >>> from sklearn.preprocessing import StandardScaler
    >>> import deltafit
    >>> from deltafit.sensitivity import CertainSigns
    >>> X, y = load_breast_cancer(return_X_y=True)
    >>> X = StandardScaler().fit_transform(X)
    >>> X_test = X[:5]
    >>> stop = CertainSigns(np.c_[X_test, np.ones(5)])   # rows Φ(x), constant feature last
    >>> early = deltafit.LinearClassifier(loss="logistic", callback=stop).fit(X, y)
    >>> exact = deltafit.LinearClassifier(loss="logistic").fit(X, y)
    >>> bool(np.all(stop.certain_))
    True
    >>> bool(np.all(early.predict(X_test) == exact.predict(X_test)))
    True
    """

    def __init__(
        self,
        eta: ArrayLike | None = None,
        *,
        cross_kernel: ArrayLike | None = None,
        sq_norms: ArrayLike | None = None,
    ) -> None:
        if (eta is None) == (cross_kernel is None):
            raise ValueError("give either eta (primal form) or cross_kernel and sq_norms")
        if eta is not None:
            self._E = _as_float_rows(eta, "eta")
            self._e = np.linalg.norm(self._E, axis=1)
        else:
            if sq_norms is None:
                raise ValueError("the kernel form needs sq_norms (‖η_i‖², e.g. k(x, x))")
            self._E = _as_float_rows(cross_kernel, "cross_kernel")
            sq = np.asarray(sq_norms, dtype=np.float64).ravel()
            if sq.shape[0] != self._E.shape[0] or not np.all(np.isfinite(sq)):
                raise ValueError("sq_norms must hold one finite value per row of cross_kernel")
            self._e = np.sqrt(np.maximum(sq, 0.0))
        self.n_calls_ = 0

    def __call__(self, iteration, coef, grad_norm, objective, grad):
        self.n_calls_ += 1
        center = coef - 0.5 * grad
        if self._E.shape[1] != center.shape[0]:
            raise ValueError(
                f"the scores have {self._E.shape[1]} columns but the solver has "
                f"{center.shape[0]} coefficients"
            )
        s = self._E @ center
        half = 0.5 * grad_norm
        self.lo_, self.hi_ = s - self._e * half, s + self._e * half
        self.certain_ = (self.lo_ > 0) | (self.hi_ <= 0)
        return bool(np.all(self.certain_))
