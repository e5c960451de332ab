"""Reference solvers and data for the tests, independent of the code under test.

* ``ridge_reference`` / ``kernel_ridge_reference`` / ``logistic_reference``: scikit-learn's
  Ridge, KernelRidge and LogisticRegression(solver="newton-cholesky") on the mapping of
  DESIGN.md §1 (intercept = a regularised constant column of value s).
* ``squared_hinge_reference``: an exact active-set solver for the L2-SVM primal
  ``C Σ max(0, 1 − y_i x_iᵀβ)² + ½‖β‖²`` (a different algorithm from deltafit's damped Newton):
  starting from LinearSVC's solution, solve the linear system of the current margin-violating set
  in closed form, move to the exact minimiser along the segment (a 1-D piecewise quadratic), and
  repeat until the set is stable; the result satisfies the optimality conditions to rounding.
* ``kernel_features``: an explicit factor F with F Fᵀ = K, so that any kernel model can be
  checked on its training points against a linear reference on F.
"""

from __future__ import annotations

import warnings

import numpy as np
from sklearn.exceptions import ConvergenceWarning
from sklearn.kernel_ridge import KernelRidge
from sklearn.linear_model import LogisticRegression, Ridge
from sklearn.svm import LinearSVC


def augment(X, s):
    """[X, s] (the regularised intercept column), or X when s == 0."""
    return X if not s else np.hstack([X, np.full((X.shape[0], 1), float(s))])


def pm1(y, positive):
    return np.where(np.asarray(y) == positive, 1.0, -1.0)


def ridge_reference(X, t, C, s):
    """β of C Σ (t − xβ)² + ½‖β‖² on [X, s] via sklearn Ridge(alpha=1/(2C))."""
    r = Ridge(alpha=1.0 / (2.0 * C), fit_intercept=False, solver="cholesky")
    return r.fit(augment(X, s), t).coef_.ravel()


def kernel_ridge_reference(K_train, t, C):
    """α of (K + ρI) α = t via sklearn KernelRidge(alpha=ρ, kernel="precomputed")."""
    return KernelRidge(alpha=1.0 / (2.0 * C), kernel="precomputed").fit(K_train, t).dual_coef_.ravel()


def logistic_reference(F, t, C):
    """β of C Σ log(1 + exp(−t Fβ)) + ½‖β‖² via LogisticRegression(newton-cholesky)."""
    lr = LogisticRegression(C=C, fit_intercept=False, solver="newton-cholesky", tol=1e-14,
                            max_iter=1000)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        lr.fit(F, t)
    return lr.coef_.ravel()


def _sqhinge_objective(F, t, C, b):
    m = np.maximum(0.0, 1.0 - t * (F @ b))
    return C * (m @ m) + 0.5 * b @ b


def squared_hinge_reference(F, t, C, max_rounds=100):
    """Exact minimiser of C Σ max(0, 1 − t_i f_iᵀβ)² + ½‖β‖² (active-set, see module doc)."""
    p = F.shape[1]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        svc = LinearSVC(C=C, loss="squared_hinge", fit_intercept=False, dual=True, tol=1e-8,
                        max_iter=100000).fit(F, t)
    beta = svc.coef_.ravel().copy()
    for _ in range(max_rounds):
        act = t * (F @ beta) < 1.0
        Fa, ta = F[act], t[act]
        # closed form on the current active set: (I + 2C FaᵀFa) β = 2C Faᵀ ta
        A = np.eye(p) + 2.0 * C * Fa.T @ Fa
        target = np.linalg.solve(A, 2.0 * C * Fa.T @ ta)
        d = target - beta
        # exact line minimisation of the convex piecewise quadratic along d
        lo, hi = 0.0, 1.0
        for _ in range(200):
            mid = 0.5 * (lo + hi)
            m = np.maximum(0.0, 1.0 - t * (F @ (beta + mid * d)))
            deriv = -2.0 * C * (m * t) @ (F @ d) + (beta + mid * d) @ d
            if deriv < 0:
                lo = mid
            else:
                hi = mid
        step = 1.0 if _sqhinge_objective(F, t, C, target) <= _sqhinge_objective(
            F, t, C, beta + lo * d) else lo
        beta = beta + step * d
        if np.array_equal(t * (F @ beta) < 1.0, act) and step == 1.0:
            break
    m = np.maximum(0.0, 1.0 - t * (F @ beta))
    grad = -2.0 * C * F.T @ (m * t) + beta
    assert np.linalg.norm(grad) <= 1e-8 * max(1.0, np.linalg.norm(2 * C * F.T @ t)), \
        "reference squared-hinge solver did not converge"
    return beta


def kernel_features(K):
    """F with F Fᵀ = K (symmetric square root through an eigendecomposition)."""
    lam, V = np.linalg.eigh(0.5 * (K + K.T))
    lam = np.clip(lam, 0.0, None)
    return V * np.sqrt(lam)


def rel_err(a, b):
    """max |a − b| / max(1, max |b|)."""
    a, b = np.asarray(a, dtype=float), np.asarray(b, dtype=float)
    return float(np.max(np.abs(a - b)) / max(1.0, float(np.max(np.abs(b)))))
