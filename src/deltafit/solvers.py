"""Exact solvers for the canonical problem of DESIGN.md §1.

    minimise_β  J(β) = C · Σ_i ℓ(y_i, ⟨Φ(x_i), β⟩) + ½‖β‖²

* squared loss: closed form, ``(ΦᵀΦ + ρI) β = Φᵀy`` with ``ρ = 1/(2C)`` (primal) or
  ``(K + ρI) α = y`` (dual); the incremental machinery lives in :mod:`deltafit.models`.
* smooth losses (logistic, squared hinge): damped Newton with an Armijo line search, in the
  primal (:func:`newton_primal`) or in the kernel expansion ``β = Σ α_i Φ(x_i)``
  (:func:`newton_kernel`).  Both warm-start from any point and stop on the norm of the
  gradient of J in model space, ``‖∇J(β)‖₂ ≤ tol · ‖∇J(0)‖₂``.

Because J is 1-strongly convex, the returned ``grad_norm`` certifies
``‖β − β*‖₂ ≤ grad_norm`` (Okumura et al., KDD'15, Thm 6), which is what a caller needs to
turn the solver's tolerance into a bound.
"""

from __future__ import annotations

import warnings
from dataclasses import dataclass

import numpy as np
from scipy import linalg
from sklearn.exceptions import ConvergenceWarning

__all__ = ["SolverResult", "newton_primal", "newton_kernel", "solve_spd"]

# Below this decrease J cannot be resolved in floating point; a Newton step is then taken whole.
_FLOOR = 1e-12


@dataclass
class SolverResult:
    """What a solver returns.

    Attributes
    ----------
    coef : ndarray
        β (primal) or α (kernel expansion coefficients).
    grad_norm : float
        ‖∇J‖₂ in model space at ``coef``; certifies ‖coef − optimum‖ ≤ grad_norm.
    n_iter : int
        Newton iterations performed.
    converged : bool
        Whether ``grad_norm ≤ tol · grad_norm_at_zero`` was reached.
    stopped_by_callback : bool
        Whether the callback asked to stop.
    objective : float
        J at ``coef``.
    """

    coef: np.ndarray
    grad_norm: float
    n_iter: int
    converged: bool
    stopped_by_callback: bool
    objective: float


def solve_spd(A, b):
    """Solve ``A x = b`` for a symmetric positive definite ``A`` by Cholesky.

    Raises ValueError (not LinAlgError) when ``A`` is not numerically positive definite.
    """
    try:
        c = linalg.cho_factor(A, lower=True, check_finite=False)
    except linalg.LinAlgError as exc:
        raise ValueError(f"ill-conditioned system: Cholesky factorization failed ({exc})") from exc
    return linalg.cho_solve(c, b, check_finite=False)


def _check_callback(callback, it, coef, grad_norm, objective, grad):
    if callback is None:
        return False
    return bool(callback(it, coef, grad_norm, objective, grad))


def _armijo(obj_at, f0, slope, max_halvings=60):
    """Backtracking line search: largest t in {1, ½, ¼, …} with f(t) ≤ f0 + 1e-4 t slope."""
    t = 1.0
    for _ in range(max_halvings):
        f = obj_at(t)
        if f <= f0 + 1e-4 * t * slope:
            return t, f
        t *= 0.5
    return 0.0, f0


def newton_primal(X, y, loss, C, *, coef0=None, tol=1e-10, max_iter=100, callback=None):
    """Damped Newton for ``C Σ ℓ(y_i, x_iᵀβ) + ½‖β‖²`` over explicit features.

    Parameters
    ----------
    X : ndarray of shape (n, p)
        Features, the intercept column included when the model has one.
    y : ndarray of shape (n,)
        Targets (±1 for classification losses).
    loss : :class:`deltafit.losses.Loss`
    C : float
    coef0 : ndarray of shape (p,), optional
        Warm start (zeros by default).
    tol : float
        Stop when ``‖∇J(β)‖ ≤ tol · ‖∇J(0)‖``.
    max_iter : int
    callback : callable, optional
        ``callback(iteration, coef, grad_norm, objective, grad)`` after every iteration (and
        once at the start), with ``grad`` the full gradient ∇J(coef); returning True stops the
        solver (``stopped_by_callback``).  ``coef`` and ``grad`` are the solver's own arrays:
        copy them to keep them.  :class:`deltafit.sensitivity.CertainSigns` is such a callback
        (stop once the signs of given scores are certified, Okumura et al. Thm 6).

    Returns
    -------
    SolverResult

    Notes
    -----
    Newton direction from ``(C Xᵀ D X + I) Δ = −∇J`` with D the (generalised) second
    derivative of the loss, then an Armijo backtracking line search.  For the squared hinge
    the generalised Hessian makes this the finite Newton method of Keerthi & DeCoste (2005).
    """
    n, p = X.shape
    beta = np.zeros(p) if coef0 is None else np.array(coef0, dtype=np.float64, copy=True)
    z = X @ beta
    g0 = np.linalg.norm(C * (X.T @ loss.d1(y, np.zeros(n))))
    threshold = tol * max(g0, np.finfo(float).tiny)

    def objective(b, zz):
        return C * loss.value(y, zz).sum() + 0.5 * b @ b

    f = objective(beta, z)
    grad = C * (X.T @ loss.d1(y, z)) + beta
    gnorm = np.linalg.norm(grad)
    it = 0
    stopped = _check_callback(callback, it, beta, gnorm, f, grad)
    while gnorm > threshold and not stopped and it < max_iter:
        it += 1
        d2 = loss.d2(y, z)
        act = d2 > 0
        Xa = X[act] if not act.all() else X
        H = (Xa.T * (C * d2[act])) @ Xa
        H.flat[:: p + 1] += 1.0
        step = -solve_spd(H, grad)
        xs = X @ step
        slope = grad @ step
        if -slope <= _FLOOR * (abs(f) + 1.0):
            t = 1.0  # the decrease is below the rounding of J: take the Newton step whole
        else:
            t, _ = _armijo(lambda t: objective(beta + t * step, z + t * xs), f, slope)
            if t == 0.0:
                break  # a genuine failure to decrease
        beta += t * step
        z = X @ beta  # recomputed, not accumulated: keeps z and J consistent with β
        f = objective(beta, z)
        grad = C * (X.T @ loss.d1(y, z)) + beta
        gnorm = np.linalg.norm(grad)
        stopped = _check_callback(callback, it, beta, gnorm, f, grad)
    converged = gnorm <= threshold
    if not converged and not stopped:
        warnings.warn(
            f"Newton did not reach ‖∇J‖ ≤ {threshold:.3g} in {it} iterations "
            f"(‖∇J‖ = {gnorm:.3g}); increase max_iter or tol",
            ConvergenceWarning,
            stacklevel=3,
        )
    return SolverResult(beta, float(gnorm), it, bool(converged), bool(stopped), float(f))


def newton_kernel(K, y, loss, C, *, coef0=None, tol=1e-10, max_iter=100, callback=None):
    """Damped Newton in the kernel expansion β = Σ α_i Φ(x_i).

    Parameters
    ----------
    K : ndarray of shape (n, n)
        Kernel matrix (intercept term included).
    y, loss, C, tol, max_iter, callback
        As in :func:`newton_primal`; ``callback`` receives α and, as ``grad``, the expansion
        coefficients ``g = C ℓ'(z) + α`` of ∇J = Σ g_i Φ(x_i) (``grad_norm = sqrt(gᵀKg)``).
    coef0 : ndarray of shape (n,), optional
        Warm start for α.

    Returns
    -------
    SolverResult
        ``coef`` is α; ``grad_norm`` is the RKHS norm of ∇J, ``sqrt(gᵀ K g)`` with
        ``g = C ℓ'(z) + α``.

    Notes
    -----
    With ``W = C·diag(ℓ'')`` the Newton step in function space solves ``(I + W K) Δ = −g``.
    Writing ``S = W^{1/2}``, ``(I + WK)^{-1} = I − S (I + S K S)^{-1} S K``, so the step costs one
    Cholesky factorisation of the SPD matrix ``I + SKS`` restricted to the samples with ℓ'' > 0.
    At the optimum ``α = −C ℓ'(z)``, the representer coefficients, unique even when K is
    singular.
    """
    n = K.shape[0]
    alpha = np.zeros(n) if coef0 is None else np.array(coef0, dtype=np.float64, copy=True)
    z = K @ alpha
    g_zero = C * loss.d1(y, np.zeros(n))
    g0 = np.sqrt(max(g_zero @ (K @ g_zero), 0.0))
    threshold = tol * max(g0, np.finfo(float).tiny)

    def objective(a, zz):
        return C * loss.value(y, zz).sum() + 0.5 * a @ zz

    f = objective(alpha, z)
    g = C * loss.d1(y, z) + alpha
    Kg = K @ g
    gnorm = np.sqrt(max(g @ Kg, 0.0))
    it = 0
    stopped = _check_callback(callback, it, alpha, gnorm, f, g)
    while gnorm > threshold and not stopped and it < max_iter:
        it += 1
        w = C * loss.d2(y, z)
        act = np.flatnonzero(w > 0)
        step = -g
        if act.size:
            s = np.sqrt(w[act])
            A = K[np.ix_(act, act)] * np.outer(s, s)
            A.flat[:: act.size + 1] += 1.0
            step = step.copy()
            step[act] += s * solve_spd(A, s * Kg[act])
        Ks = K @ step
        slope = Kg @ step
        if -slope <= _FLOOR * (abs(f) + 1.0):
            t = 1.0
        else:
            t, _ = _armijo(lambda t: objective(alpha + t * step, z + t * Ks), f, slope)
            if t == 0.0:
                break
        alpha += t * step
        z = K @ alpha  # recomputed, not accumulated
        f = objective(alpha, z)
        g = C * loss.d1(y, z) + alpha
        Kg = K @ g
        gnorm = np.sqrt(max(g @ Kg, 0.0))
        stopped = _check_callback(callback, it, alpha, gnorm, f, g)
    converged = gnorm <= threshold
    if not converged and not stopped:
        warnings.warn(
            f"kernel Newton did not reach ‖∇J‖ ≤ {threshold:.3g} in {it} iterations "
            f"(‖∇J‖ = {gnorm:.3g}); increase max_iter or tol",
            ConvergenceWarning,
            stacklevel=3,
        )
    return SolverResult(alpha, float(gnorm), it, bool(converged), bool(stopped), float(f))
