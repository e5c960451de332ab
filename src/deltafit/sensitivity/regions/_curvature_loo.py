"""Curvature-aware leave-one-out bounds: every left-out score at once, for logistic and
squared-hinge models.

The leave-one-out ball (Okumura et al., "Quick sensitivity analysis for incremental data
modification and its application to leave-one-out CV in linear classification problems",
Corollary 5; Sivan et al., "Incremental sensitivity analysis for kernelized models", §4.2) uses
only the regulariser's curvature.  With C unchanged, leaving t out gives
``g = ∇P₂(β₁) = e + C γ_t Φ_t`` (``γ_t = −w_t ℓ'(t_t, z_t)``, ``e = ∇P₁(β₁)``,
``‖e‖ ≤ ε``), and with the secant Hessian ``H̄ = I + C Σ_{i≠t} w_i c̄_i Φ_iΦ_iᵀ`` of the
problem without t between β₁ and its optimum β₂ (``c̄_i`` the secant slope of ``ℓ'`` between
``z_i(β₁)`` and ``z_i(β₂)``; see
:mod:`deltafit.sensitivity.regions._curvature`), ``∇P₂(β₁) − ∇P₂(β₂) = H̄(β₁ − β₂)`` gives exactly

    z_t(β₂) = z_t − C γ_t Φ_tᵀH̄⁻¹Φ_t − Φ_tᵀH̄⁻¹e,     |Φ_tᵀH̄⁻¹e| ≤ ε ‖Φ_t‖_{H̄⁻¹}.

If every ``c̄_i ∈ [c_lo,i, c_hi,i]``, ``H_lo,t ⪯ H̄ ⪯ H_hi,t`` and ``Φ_tᵀH̄⁻¹Φ_t`` lies in
``[s_lo, s_hi] = [Φ_tᵀH_hi,t⁻¹Φ_t, Φ_tᵀH_lo,t⁻¹Φ_t]``.  One curvature pair serves every t:
``B = I + C Σ_i w_i c_i Φ_iΦ_iᵀ`` over all samples, and t's own term is taken out by
Sherman–Morrison, ``Φ_tᵀ(B − a Φ_tΦ_tᵀ)⁻¹Φ_t = q_t / (1 − a q_t)``, ``q_t = Φ_tᵀB⁻¹Φ_t``.

The intervals that give ``c_lo, c_hi`` are ``z_i ± Δ_i`` with ``Δ_i = τ ‖Φ_i‖_{B₀⁻¹}`` (B₀ the
curvature at β₁); they are verified per t by the homotopy argument of
:mod:`deltafit.sensitivity.regions._curvature`: with ``g_s = s g`` (s ∈ [0, 1]) every score
moves by at most ``s ‖Φ_i‖_{H_lo,t⁻¹} ‖g‖_{H_lo,t⁻¹} ≤ s ‖Φ_i‖_{B_lo⁻¹} T_t``,
``T_t = (C|γ_t| sqrt(s_hi) + ε) / sqrt(1 − C w_t c_lo,t q_t)``, so t is certified when
``‖Φ_i‖_{B_lo⁻¹} T_t < Δ_i`` for every ``i ≠ t``.  A few levels τ are tried (one pair of
factorisations each); samples no level certifies keep the ball's interval, and every interval
is intersected with the ball's.  Beyond ``n³ = 3·10¹⁰`` (kernel) or ``n p² = 3·10¹⁰`` (linear)
the balls are kept.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np
from numpy.typing import ArrayLike
from scipy import linalg

from deltafit.sensitivity.regions._curvature_schedule import _SAFE, secant_range

if TYPE_CHECKING:
    from deltafit.losses import Loss

__all__ = ["KernelSpace", "LinearSpace", "curvature_loo_bounds"]

_MAX_WORK = 3e10  # n³ (kernel) or n p² (linear) beyond which the balls are kept
_LEVELS = (0.5, 0.9, 1.0)  # quantiles of the first guess of T_t over the changing samples
_MARGIN = 0.5


class LinearSpace:
    """Explicit features ``Φ`` (n, p): ``q_i = Φ_iᵀ(I + Φᵀ diag(D) Φ)⁻¹Φ_i``.

    Parameters
    ----------
    Phi : array-like of shape (n, p)
        The samples' feature rows (a linear model's with the constant feature).

    Examples
    --------
    >>> import numpy as np
    >>> from deltafit.sensitivity.regions import LinearSpace
    >>> Phi = np.random.default_rng(0).standard_normal((5, 2))
    >>> D = np.full(5, 0.5)                                # curvature weights C w_i c_i
    >>> q = LinearSpace(Phi).qnorms(D)
    >>> B = np.eye(2) + Phi.T @ (D[:, None] * Phi)
    >>> bool(np.allclose(q, np.diag(Phi @ np.linalg.solve(B, Phi.T))))
    True
    """

    def __init__(self, Phi: ArrayLike) -> None:
        self.Phi = np.asarray(Phi, dtype=np.float64)
        self.work = float(self.Phi.shape[0]) * self.Phi.shape[1] ** 2

    def qnorms(self, D: np.ndarray) -> np.ndarray | None:
        Phi = self.Phi
        B = (Phi.T * D) @ Phi
        B[np.diag_indices_from(B)] += 1.0
        try:
            L = linalg.cholesky(B, lower=True, check_finite=False)
        except linalg.LinAlgError:
            return None
        W = linalg.solve_triangular(L, Phi.T, lower=True, check_finite=False)
        return np.einsum("ij,ij->j", W, W)


class KernelSpace:
    """A kernel matrix ``K`` (n, n): ``q_i = K_ii − ‖L⁻¹ D^{½} K_{:,i}‖²``,
    ``LLᵀ = I + D^{½} K D^{½}`` (push-through identity).

    Parameters
    ----------
    K : array-like of shape (n, n)
        The samples' kernel matrix.

    Examples
    --------
    With the linear kernel ``K = ΦΦᵀ`` the norms are those of :class:`LinearSpace`:

    >>> import numpy as np
    >>> from deltafit.sensitivity.regions import KernelSpace, LinearSpace
    >>> Phi = np.random.default_rng(0).standard_normal((5, 2))
    >>> D = np.full(5, 0.5)
    >>> q = KernelSpace(Phi @ Phi.T).qnorms(D)
    >>> bool(np.allclose(q, LinearSpace(Phi).qnorms(D)))
    True
    """

    def __init__(self, K: ArrayLike) -> None:
        self.K = np.asarray(K, dtype=np.float64)
        self.work = float(self.K.shape[0]) ** 3

    def qnorms(self, D: np.ndarray) -> np.ndarray | None:
        K = self.K
        dh = np.sqrt(np.maximum(D, 0.0))
        M = K * dh[:, None] * dh[None, :]
        M[np.diag_indices_from(M)] += 1.0
        try:
            L = linalg.cholesky(M, lower=True, check_finite=False)
        except linalg.LinAlgError:
            return None
        W = linalg.solve_triangular(L, K * dh[:, None], lower=True, check_finite=False)
        return np.maximum(np.diag(K) - np.einsum("ij,ij->j", W, W), 0.0)


def _without_own(q, a):
    """``q / (1 − a q)`` (Sherman–Morrison downdate of the sample's own term); NaN where the
    denominator is not safely positive."""
    den = 1.0 - a * q
    ok = den > 1e-9
    return np.where(ok, q / np.where(ok, den, 1.0), np.nan), np.where(ok, den, np.nan)


def curvature_loo_bounds(
    space: LinearSpace | KernelSpace,
    z: np.ndarray,
    t: np.ndarray,
    w: np.ndarray,
    gamma: np.ndarray,
    C: float,
    eps: float,
    loss: Loss,
) -> tuple[np.ndarray, np.ndarray]:
    """Bounds of every leave-one-out score ``z_t(β_{−t})`` (C unchanged), NaN where no level
    certifies (the caller keeps the ball's bounds there).

    Parameters
    ----------
    space : LinearSpace or KernelSpace
        The samples' features.
    z, t, w : ndarray of shape (n,)
        Scores under β₁, encoded targets, weights.
    gamma : ndarray of shape (n,)
        ``−w_t ℓ'(t_t, z_t)``.
    C : float
    eps : float
        Bound of ``‖∇P₁(β₁)‖`` (the certified residual, or the exact gradient's norm).
    loss : deltafit.losses.Loss

    Returns
    -------
    lo, hi : ndarray of shape (n,)

    Examples
    --------
    Every left-out score of a logistic model, mostly far tighter than the leave-one-out balls,
    and holding the score of a model refitted without sample 0:

    >>> from deltafit.sensitivity import loo_bounds
    >>> from deltafit.sensitivity.regions import LinearSpace, curvature_loo_bounds
    >>> import numpy as np
    >>> from sklearn.datasets import load_breast_cancer
    >>> from sklearn.preprocessing import StandardScaler
    >>> import deltafit
    >>> from deltafit.losses import Logistic
    >>> X, y = load_breast_cancer(return_X_y=True)
    >>> X = StandardScaler().fit_transform(X)
    >>> model = deltafit.LinearClassifier(loss="logistic", C=0.1).fit(X, y)
    >>> Phi = np.hstack([X, np.ones((len(X), 1))])         # the constant feature last
    >>> beta = np.append(model.coef_, model.intercept_)
    >>> t = np.where(y == 1, 1.0, -1.0)                    # targets in {-1, +1}
    >>> z = Phi @ beta                                     # the training scores
    >>> d1 = Logistic().d1(t, z)
    >>> w = np.ones(len(X))
    >>> lo, hi = curvature_loo_bounds(
    ...     LinearSpace(Phi), z, t, w, -w * d1, 0.1, model.grad_norm_, Logistic())
    >>> bool(np.isfinite(lo).all())                         # every sample certified
    True
    >>> lo_s, hi_s = loo_bounds(model, method="sphere")
    >>> bool(np.median((hi - lo) / (hi_s - lo_s)) < 0.1)
    True
    >>> d0 = (deltafit.LinearClassifier(loss="logistic", C=0.1)
    ...       .fit(X[1:], y[1:]).decision_function(X[:1])[0])
    >>> bool(lo[0] <= d0 <= hi[0])
    True
    """
    n = z.shape[0]
    lo_out = np.full(n, np.nan)
    hi_out = np.full(n, np.nan)
    if space.work > _MAX_WORK:  # a few factorisations would cost more than the refits saved
        return lo_out, hi_out
    h0 = loss.d2(t, z)
    q0 = space.qnorms(C * w * h0)
    if q0 is None:
        return lo_out, hi_out
    cg = C * np.abs(gamma)
    s0, den0 = _without_own(q0, C * w * h0)
    T0 = (cg * np.sqrt(s0) + eps) / np.sqrt(den0)
    moving = np.flatnonzero((gamma != 0.0) & np.isfinite(T0))
    levels = np.quantile(T0[moving], _LEVELS) if moving.size else np.array([0.0])
    base = np.sqrt(q0)
    used = w > 0
    for tau in np.unique((1.0 + _MARGIN) * levels + 1e-12 * (1.0 + levels)):
        dev = base * tau * (1.0 + _SAFE) + 1e-15 * (1.0 + np.abs(z))
        c_lo, c_hi = secant_range(loss, t, z, z - dev, z + dev)
        q_lo = space.qnorms(C * w * c_lo)
        q_hi = space.qnorms(C * w * c_hi)
        if q_lo is None or q_hi is None:
            continue
        s_hi, den = _without_own(q_lo * (1.0 + _SAFE), C * w * c_lo)
        s_lo, _ = _without_own(q_hi * (1.0 - _SAFE), C * w * c_hi)
        s_lo = np.where(np.isfinite(s_lo), s_lo, q_hi * (1.0 - _SAFE))  # H_hi,t ⪯ B_hi
        T = (cg * np.sqrt(s_hi) + eps) / np.sqrt(den) * (1.0 + _SAFE)
        # certified when sqrt(q_lo,i) T_t < dev_i for every other used sample i
        ratio = np.where(used, dev / np.sqrt(np.maximum(q_lo, 1e-300)), np.inf)
        order = np.argsort(ratio)
        first, second = order[0], order[1] if n > 1 else order[0]
        limit = np.full(n, ratio[first])
        limit[first] = ratio[second]
        ok = np.isfinite(T) & (T < limit)
        if not ok.any():
            continue
        # z_t − C γ_t [s_lo, s_hi] ∓ ε sqrt(s_hi)
        a = z - C * gamma * s_hi
        b = z - C * gamma * s_lo
        e = eps * np.sqrt(s_hi) * (1.0 + _SAFE) + 1e-15 * (1.0 + np.abs(z))
        lo_t, hi_t = np.minimum(a, b) - e, np.maximum(a, b) + e
        lo_out = np.where(ok, np.fmax(lo_out, lo_t), lo_out)
        hi_out = np.where(ok, np.fmin(hi_out, hi_t), hi_out)
    return lo_out, hi_out
