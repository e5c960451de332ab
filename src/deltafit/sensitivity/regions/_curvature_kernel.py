"""The curvature-aware region of a kernel model's what-if, in the expansion coefficients.

The theorem, the valid curvature, the Newton ball and the schedule are those of
:mod:`deltafit.sensitivity.regions._curvature` (Okumura et al., "Quick sensitivity analysis for
incremental data modification and its application to leave-one-out CV in linear
classification problems", Theorem 1 generalised; Sivan et al., "Incremental sensitivity analysis
for kernelized models", Theorem 1 and eq. 3 for the expansion).  Here every vector of the region
lies in the span of the feature vectors of the points ``T`` = the live training samples and the
hypothetical additions, with kernel matrix ``K``: ``β₁ = Σ α_j Φ_j``, ``g₀ = Σ γ_j Φ_j`` with
``γ = (1 − ρ) α + C₂ c`` (``c`` the Δg coefficients of the changed samples), and every
curvature matrix is ``H = I + Σ_j D_j Φ_jΦ_jᵀ`` with ``D ≥ 0``.  By the push-through identity
``H Φ b = Φ (I + D K) b``, so with ``M = I + D^{½} K D^{½}`` (SPD, ``⪰ I``):

    H⁻¹ Φ γ = Φ (γ − D^{½} M⁻¹ D^{½} K γ),
    ‖Φ(x)‖²_{H⁻¹} = k(x, x) − ‖L⁻¹ D^{½} k_T(x)‖²          (M = L Lᵀ),

exact for any x (the part of Φ(x) outside the span sees ``H = I``).  A region costs
``O(|T|³)`` per step (a Cholesky factorisation of M and a triangular solve with ``D^{½}K``);
beyond 2,500 points :func:`~deltafit.sensitivity.regions._curvature.curvature_region` returns
the ball.
"""

from __future__ import annotations

import copy
from typing import Any

import numpy as np
from scipy import linalg

from deltafit.kernels import kernel_diagonal, kernel_rows
from deltafit.sensitivity.regions._curvature_schedule import (
    _SAFE,
    CURVATURE_LOSSES,
    _ExactSchedule,
    newton_radius,
)
from deltafit.sensitivity.regions._protocol import Region

__all__ = ["KernelCurvatureRegion"]

_MAX_POINTS = 2500  # |T| beyond which the region is the ball (O(|T|³) per step)


class _KernelExact(_ExactSchedule):
    """The points T, their scores, D₂ labels and weights, and the region's building blocks.

    Parameters
    ----------
    loss, C1, C2, eps, z, t, u
        As for :class:`~deltafit.sensitivity.regions._curvature_schedule._ExactSchedule`.
    K : ndarray of shape (n, n)
        The kernel matrix of the points T.
    alpha, gamma : ndarray of shape (n,)
        The coefficients of β₁ and of ``g₀ = ∇P₂(β₁)`` (without the residual) over T.
    rnorm : float, optional
        ``‖r‖`` of the Theorem 1 ball; default ``½‖g₀‖`` from ``gamma``.
    kw : dict, optional
        The kernel's parameters (:func:`deltafit.kernels.kernel_rows`), for queries.
    rows : ndarray, optional
        The points' rows, for queries.
    """

    def __init__(
        self, *, loss, C1, C2, eps, z, t, u, K, alpha, gamma, rnorm=None, kw=None, rows=None
    ):
        self.K, self.alpha, self.gamma, self.kw, self.rows = K, alpha, gamma, kw, rows
        self.kdiag = np.diag(K).copy()
        self.Kg = K @ gamma
        self.g_sq = max(float(gamma @ self.Kg), 0.0)
        if rnorm is None:
            rnorm = 0.5 * np.sqrt(self.g_sq)
        super().__init__(loss=loss, C1=C1, C2=C2, eps=eps, z=z, t=t, u=u, rnorm=rnorm)

    @classmethod
    def from_sensitivity(cls, sens):
        """T = the live training samples and the hypothetical additions of a what-if."""
        prob, store = sens._prob, sens._store
        C1, C2 = sens._C1, sens._C2(sens.n_new)
        rho = C2 / C1
        kw = prob.kernel_params
        live = np.asarray(prob.live)
        n = live.size
        K = prob.gram(live)
        z, _ = prob.scores(live)
        t = np.array(prob.targets[live], dtype=np.float64)
        w = prob.sample_weights(live)
        u = np.ones(n) if w is None else w.astype(np.float64)
        alpha = np.array(prob.alpha[live], dtype=np.float64)
        idx = np.flatnonzero(store.live[: sens._m])
        ids = sens._ids[idx]
        y = sens._y[idx]
        hyp = ids >= sens._first_hid
        coef = np.zeros(n)
        # model samples among the entries: their D₂ label / weight, their Δg coefficient
        if (~hyp).any():
            pos = np.full(prob.capacity, -1, dtype=np.intp)
            pos[live] = np.arange(n)
            at = pos[prob.handles_unchecked(ids[~hyp])]
            ym = y[~hyp]
            t[at] = np.where(ym == ym, ym, 0.0)
            u[at] = np.where(ym == ym, sens._w[idx[~hyp]], 0.0)
            coef[at] = store.c[idx[~hyp]]
        rows = prob.rows[live]
        if hyp.any():  # hypothetical additions: appended to T
            ia = idx[hyp]
            pts = store.pts[ia]
            Kx = kernel_rows(pts, rows, **kw)
            K = np.block([[K, Kx.T], [Kx, store.G[np.ix_(ia, ia)]]])
            ya = y[hyp]
            z = np.concatenate([z, store.z[ia]])
            t = np.concatenate([t, np.where(ya == ya, ya, 0.0)])
            u = np.concatenate([u, np.where(ya == ya, sens._w[ia], 0.0)])
            alpha = np.concatenate([alpha, np.zeros(ia.size)])
            coef = np.concatenate([coef, store.c[ia]])
            rows = np.vstack([rows, pts])
        gamma = (1.0 - rho) * alpha + C2 * coef  # g₀ = Φ γ
        _, rnorm = store.half_gradient(C1, C2)
        return cls(
            loss=sens._loss,
            C1=C1,
            C2=C2,
            eps=sens._eps,
            z=z,
            t=t,
            u=u,
            K=K,
            alpha=alpha,
            gamma=gamma,
            rnorm=rnorm,
            kw=kw,
            rows=rows,
        )

    @classmethod
    def from_arrays(cls, z, t, u, coef, grad, C, loss, K):
        """The exact intervals of a change given by arrays (:func:`removal_intervals`):
        ``coef`` and ``grad`` are β₁'s and ``∇P₂(β₁)``'s coefficients over the n samples of
        kernel matrix ``K`` (no residual, ``C₁ = C₂ = C``)."""
        return cls(
            loss=loss,
            C1=float(C),
            C2=float(C),
            eps=0.0,
            z=np.asarray(z, dtype=np.float64),
            t=np.asarray(t, dtype=np.float64),
            u=np.asarray(u, dtype=np.float64),
            K=np.asarray(K, dtype=np.float64),
            alpha=np.asarray(coef, dtype=np.float64),
            gamma=np.asarray(grad, dtype=np.float64),
        )

    def recentered(self, d0):
        """This problem expanded at ``β̃ = Φ(α − d₀)`` with its exact gradient (coefficients
        ``α − d₀ + C₂ w' ℓ'(t, z̃)``), the rounding of that sum as the residual allowance."""
        rc = copy.copy(self)
        rc.z = self.z - self.K @ d0
        rc.alpha = self.alpha - d0
        d1 = self.C2 * self.u * self.loss.d1(self.t, rc.z)
        rc.gamma = rc.alpha + d1
        rc.Kg = self.K @ rc.gamma
        rc.g_sq = max(float(rc.gamma @ rc.Kg), 0.0)
        a_norm = np.sqrt(max(float(rc.alpha @ (self.K @ rc.alpha)), 0.0))
        delta = 1e-13 * (a_norm + float(np.abs(d1) @ np.sqrt(np.maximum(self.kdiag, 0.0)))) + 1e-300
        rc.rnorm = 0.5 * np.sqrt(rc.g_sq)
        rc.eps, rc.rho = delta, 1.0
        rc.R_ball = rc.rnorm + delta
        return rc

    # ----------------------------------------------------------------- regions
    def _factor(self, D):
        """``(L, d½, W = L⁻¹ d½ K)`` for ``M = I + d½ K d½``; None if M is not numerically
        positive definite."""
        dh = np.sqrt(np.maximum(D, 0.0))
        M = self.K * dh[:, None] * dh[None, :]
        M[np.diag_indices_from(M)] += 1.0
        try:
            L = linalg.cholesky(M, lower=True, check_finite=False)
        except linalg.LinAlgError:
            return None
        W = linalg.solve_triangular(L, self.K * dh[:, None], lower=True, check_finite=False)
        return L, dh, W

    def _solve(self, fac):
        """Coefficients of ``H⁻¹ g₀`` and ``‖g₀‖²_{H⁻¹}``."""
        L, dh, _ = fac
        v = linalg.solve_triangular(L, dh * self.Kg, lower=True, check_finite=False)
        x = self.gamma - dh * linalg.solve_triangular(L.T, v, lower=False, check_finite=False)
        return x, max(self.g_sq - float(v @ v), 0.0)

    def build_ell(self, iv):
        lo, _ = self.curvature(iv)
        fac = self._factor(self.C2 * self.u * lo)
        if fac is None:
            return None
        x, gh = self._solve(fac)
        RH = (0.5 * np.sqrt(gh) + self.rho * self.eps) * (1.0 + _SAFE) + 1e-300
        qh = np.sqrt(np.maximum(self.kdiag - np.einsum("ij,ij->j", fac[2], fac[2]), 0.0))
        return fac, x, RH, qh

    def ell_iv(self, ell):
        _, x, RH, qh = ell
        return self._region(-0.5 * (self.K @ x), RH * qh)

    def ball_iv(self):
        return self._region(-0.5 * self.Kg, self.R_ball * np.sqrt(np.maximum(self.kdiag, 0.0)))

    def newton(self, iv, ell):
        """The Newton ball (see :mod:`deltafit.sensitivity.regions._curvature`) in coefficients:
        ``(coefficients of d₀, radius, intervals)``."""
        fac_lo, _, _, qh = ell
        lo, hi = self.curvature(iv)
        mid, half = 0.5 * (lo + hi), 0.5 * (hi - lo)
        fac = self._factor(self.C2 * self.u * mid)
        if fac is None:
            return None
        d0, _ = self._solve(fac)
        s = self.K @ d0
        err = self.C2 * self.u * half * np.abs(s)
        W = fac_lo[2]

        def gram(idx):
            return self.K[np.ix_(idx, idx)] - W[:, idx].T @ W[:, idx]

        part = newton_radius(err, self.C2 * self.u * lo, qh, gram)
        rad = (part + self.rho * self.eps) * (1.0 + _SAFE) + 1e-300
        return d0, rad, self._region(-s, rad * qh)


class _TooLarge(Exception):
    """More points than the kernel form handles at a what-if's cost."""


class KernelCurvatureRegion(Region):
    """The curvature-aware region of a kernel model's what-if: ellipsoid and Newton ball in
    the expansion over the training and added points, intersected with the ball of Theorem 1
    (see :mod:`deltafit.sensitivity.regions._curvature`)."""

    kind = "curvature"
    losses = CURVATURE_LOSSES

    def __init__(self, sens: Any, recenter: bool = True) -> None:
        self._store = sens._store
        prob = sens._prob
        if prob.n_samples + sens.n_added > _MAX_POINTS:
            raise _TooLarge
        kp0 = _KernelExact.from_sensitivity(sens)
        self._alpha1, self._K = kp0.alpha, kp0.K
        self._C1, self._C2, self._R = kp0.C1, kp0.C2, kp0.R_ball
        self._ball_dist = kp0.rnorm + kp0.R_ball
        self._kp, (self._ell, self._newton) = kp0.solve(recenter)

    def _ball(self, X):
        st = self._store
        s = st.center_scores(X, self._C1, self._C2)
        e = np.sqrt(np.maximum(st.sq_norms(X), 0.0)) * self._R
        return s - e, s + e, s

    def _parts(self, X):
        kp = self._kp
        kx = kernel_rows(X, kp.rows, **kp.kw)
        fac, x, RH, _ = self._ell
        L, dh, _ = fac
        u = linalg.solve_triangular(L, (kx * dh).T, lower=True, check_finite=False)
        qn = np.sqrt(np.maximum(kernel_diagonal(X, **kp.kw) - np.einsum("ij,ij->j", u, u), 0.0)) * (
            1.0 + _SAFE
        )
        return kx, qn

    def decision_bounds(self, X: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """``lo ≤ ⟨Φ(x), β₂⟩ ≤ hi`` for validated raw rows X."""
        X = np.asarray(X, dtype=np.float64)
        lo, hi, _ = self._ball(X)
        if self._ell is None:
            return lo, hi
        kp = self._kp
        kx, qn = self._parts(X)
        _, x, RH, _ = self._ell
        s = kx @ (kp.alpha - 0.5 * x)
        w = RH * qn + 1e-15 * np.abs(s)
        lo, hi = np.maximum(lo, s - w), np.minimum(hi, s + w)
        if self._newton is not None:
            d0, rad = self._newton
            s = kx @ (kp.alpha - d0)
            w = rad * qn + 1e-15 * np.abs(s)
            lo, hi = np.maximum(lo, s - w), np.minimum(hi, s + w)
        return lo, hi

    def center_decision(self, X: np.ndarray) -> np.ndarray:
        """Scores of the Newton ball's center (else the ellipsoid's, else the ball's)."""
        X = np.asarray(X, dtype=np.float64)
        if self._ell is None:
            return self._ball(X)[2]
        kp = self._kp
        kx = kernel_rows(X, kp.rows, **kp.kw)
        if self._newton is not None:
            return kx @ (kp.alpha - self._newton[0])
        return kx @ (kp.alpha - 0.5 * self._ell[1])

    def distance_bound(self) -> float:
        """Upper bound of the RKHS distance ``‖β₂ − β₁‖``."""
        kp, K = self._kp, self._K
        out = self._ball_dist
        if self._ell is None:
            return out

        def dist(coef):  # ‖Φ coef − β₁‖ in the RKHS
            v = coef - self._alpha1
            return np.sqrt(max(float(v @ K @ v), 0.0))

        _, x, RH, _ = self._ell
        out = min(out, dist(kp.alpha - 0.5 * x) + RH)
        if self._newton is not None:
            d0, rad = self._newton
            out = min(out, dist(kp.alpha - d0) + rad)
        return float(out)

    def coef_bounds(self) -> tuple[np.ndarray, np.ndarray]:
        raise ValueError(
            "coef_bounds needs a linear model (explicit coefficients); for kernel "
            "models use decision_bounds"
        )
