"""Small linear what-ifs answered by solving the changed problem: a certified ball around a
Newton point (the curvature region of small problems).

For a small linear problem the cheapest certificate of the retrained model β₂ (the minimiser of
``P₂(β) = C₂ Σ_{D₂} w'_i ℓ(t_i, ⟨Φ_i, β⟩) + ½‖β‖²``) is a point β̂ near β₂ and the gradient
there.  ``P₂`` is 1-strongly convex, so for any β̂

    ‖β₂ − β̂‖ ≤ ‖∇P₂(β̂)‖,   and sharper   β₂ ∈ B(β̂ − ½∇P₂(β̂), ½‖∇P₂(β̂)‖)

(Okumura et al., "Quick sensitivity analysis for incremental data modification and its
application to leave-one-out CV in linear classification problems", Theorem 1 / Theorem 6 with
β̂ as the expansion point: ``⟨∇P₂(β̂) − ∇P₂(β₂), β̂ − β₂⟩ ≥ ‖β̂ − β₂‖²`` with ``∇P₂(β₂) = 0``
is ``‖β̂ − β₂ − ½g‖ ≤ ½‖g‖`` for ``g = ∇P₂(β̂)``).  The certificate does not depend on how β̂
was found: only the gradient at β̂ enters, computed from every D₂ sample (the stored rows of
the untouched samples and the what-if's changed samples), O(n p).

β̂ comes from a chord (then Newton) iteration of the changed problem started at the stored β₁
and run on scratch arrays (the model is read through ``problem_`` only and never changed):
the first matrix is the exact Hessian of ``P₂`` at β₁, formed from the cached stored
data-part ``S₀ = Σ_{D₁} w_i ℓ''_i(β₁) Φ_iΦ_iᵀ`` and the changed samples' terms
(``I + C₂ S₀ − C₂ Σ_{changed, D₁} w_i ℓ''_i Φ_iΦ_iᵀ + C₂ Σ_{changed, D₂} w'_i ℓ''_i Φ_iΦ_iᵀ``,
O(k p² + p³)); the Hessian is re-formed at the current point, O(n p²), only when a chord
step contracts the gradient by less than a factor 20 (then the iteration is Newton's, damped
by halving the step until ``P₂`` decreases).  Iteration stops once the gradient
reaches its rounding floor.  When it does not get there (a change too large for a few steps)
the exact-interval schedule of :mod:`deltafit.sensitivity.regions._curvature` answers instead.

Rounding.  The computed gradient ``ĝ`` differs from ``∇P₂(β̂)`` by at most
``δ = 2γ (‖β̂‖ + Σ_i C₂ w'_i ‖Φ_i‖ (|ℓ'_i| + 1 + |z_i| + L ‖Φ_i‖ ‖β̂‖))`` with
``γ = (n + p + 8) u`` (u the unit roundoff; ``L`` the largest ``ℓ''``: ¼ logistic, 2 squared
hinge): the scores are off by at most ``γ_p ‖Φ_i‖ ‖β̂‖``, which moves ``ℓ'`` by ``L`` times that,
``ℓ'`` itself is evaluated to a few ulps of ``|ℓ'| + 1 + |z|``, and the sum over n terms adds
``γ_n Σ |c_i| ‖Φ_i‖``.  The ball of the exact gradient lies in the ball of center
``β̂ − ½ĝ`` and radius ``½‖ĝ‖ + δ`` (centers ½δ apart, radii differ by ≤ ½δ); forming that
center adds ``u (‖β̂‖ + ‖ĝ‖)``.  Query scores ``⟨Φ(x), c⟩`` are widened by their own
rounding, ``2γ_p ‖Φ(x)‖ ‖c‖``.  The region is intersected with the ball of Theorem 1 around β₁.

Cost.  Per what-if O(k p² + p³) plus O(n p) per step (one to six steps on breast cancer),
O(n p²) per re-formed Hessian; the p × p factorisations and solves call LAPACK directly
(``dpotrf`` / ``dpotrs``: no triangular solves with many right-hand sides, which threaded
BLAS makes cost milliseconds on a loaded machine).  At 398 × 31 this is below the cost of the
model's exact warm update, at one BLAS thread and at the default thread count
(``benchmarks/bench_bounds.py --part curvature-small``).
"""

from __future__ import annotations

from typing import Any

import numpy as np
from scipy.linalg import lapack

from deltafit.sensitivity.regions import _ball
from deltafit.sensitivity.regions._protocol import Region

__all__ = ["SolvedRegion", "solved_region"]

_U = 2.0**-53
_SAFE = 1e-10  # relative cushion on computed radii
_MAX_STEPS = 30
_CHORD_GAIN = 0.05  # a chord step that contracts the gradient less re-forms the Hessian
_D2_MAX = {"logistic": 0.25, "squared_hinge": 2.0}  # the largest ℓ''
_CONVERGED = 64.0  # accept β̂ when ‖ĝ‖ ≤ this × δ (else the exact-interval schedule)


def _solve_cache(prob, loss):
    """Per model version: the stored rows of the live samples (C-contiguous), their norms,
    scores, targets and weights, and the data part ``S₀`` of the stored Hessian."""
    live = np.asarray(prob.live)
    X = np.ascontiguousarray(prob.rows[live], dtype=np.float64)
    beta = np.asarray(prob.coef, dtype=np.float64)
    z = np.einsum("ij,j->i", X, beta)
    t = np.asarray(prob.targets[live], dtype=np.float64)
    w = prob.sample_weights(live)
    w = np.ones(live.size) if w is None else np.asarray(w, dtype=np.float64)
    h = w * loss.d2(t, z)
    S0 = (X.T * h) @ X
    pos = np.full(prob.capacity, -1, dtype=np.intp)
    pos[live] = np.arange(live.size)
    return {
        "X": X,
        "nrm": np.sqrt(np.einsum("ij,ij->i", X, X)),
        "z": z,
        "t": t,
        "w": w,
        "S0": S0,
        "pos": pos,
    }


def _cholesky(H):
    """Lower Cholesky factor of a small SPD matrix, or None."""
    L, info = lapack.dpotrf(H, lower=1, clean=1, overwrite_a=0)
    return L if info == 0 else None


class _NotConverged(Exception):
    pass


class _Problem:
    """``P₂`` of a what-if over scratch arrays: rows ``X``, targets ``t``, coefficients
    ``u = C₂ w'`` (0 for the removed samples), row norms."""

    def __init__(self, sens: Any, cache: Any) -> None:
        loss = sens._loss
        store = sens._store
        self.loss = loss
        C2 = sens._C2(sens.n_new)
        idx = np.flatnonzero(store.live[: sens._m])
        y0, y = sens._y0[idx], sens._y[idx]
        w0, w = sens._w0[idx], sens._w[idx]
        in1, in2 = y0 == y0, y == y
        Pe = np.asarray(store.rows_of(idx), dtype=np.float64)
        ze = store.z[idx]
        u = C2 * cache["w"]
        src = store.src[idx]
        model = src >= 0
        if model.any():
            u = u.copy()
            u[cache["pos"][src[model]]] = 0.0  # changed model samples: their D₂ terms below
        pos2 = in2 & (w > 0)  # a weight-0 sample is absent (reweight to 0 = removal)
        P2 = Pe[pos2]
        t2 = y[pos2]
        u2 = C2 * w[pos2]
        ne = np.sqrt(np.einsum("ij,ij->i", P2, P2))
        self.X = np.concatenate([cache["X"], P2]) if P2.shape[0] else cache["X"]
        self.t = np.concatenate([cache["t"], t2])
        self.u = np.concatenate([u, u2])
        self.z1 = np.concatenate([cache["z"], ze[pos2]])
        nrm = np.concatenate([cache["nrm"], ne])
        self.a = self.u * nrm  # C₂ w'_i ‖Φ_i‖
        self.a_sum = float(np.sum(self.a))
        self.a2 = float(self.a @ nrm)  # Σ C₂ w'_i ‖Φ_i‖²
        n, p = self.X.shape
        self.gamma = (n + p + 8) * _U
        self.L2 = _D2_MAX[loss.name]
        # the exact Hessian of P₂ at β₁ from the cached data part and the changed samples
        d = np.zeros(idx.size)
        d[in2] += C2 * w[in2] * loss.d2(np.where(in2, y, 0.0), store.z[idx])[in2]
        d[in1] -= C2 * w0[in1] * loss.d2(np.where(in1, y0, 0.0), store.z[idx])[in1]
        H = C2 * cache["S0"]
        if idx.size:
            H = H + (Pe.T * d) @ Pe
        H.flat[:: H.shape[0] + 1] += 1.0
        self.H1 = H

    def gradient(self, beta: np.ndarray, z: np.ndarray) -> tuple[np.ndarray, float]:
        """``(ĝ, δ)``: the computed ``∇P₂(β)`` (scores ``z = Xβ``) and its rounding bound."""
        d1 = self.loss.d1(self.t, z)
        c = self.u * d1
        g = beta + c @ self.X
        bn = float(np.sqrt(beta @ beta))
        delta = (
            2.0
            * self.gamma
            * (
                bn * (1.0 + self.L2 * self.a2)
                + self.a_sum
                + float(self.a @ (np.abs(d1) + np.abs(z)))
            )
        )
        return g, delta

    def hessian(self, z: np.ndarray) -> np.ndarray:
        """``∇²P₂`` at the point of scores z (O(n p²))."""
        v = self.u * self.loss.d2(self.t, z)
        H = (self.X.T * v) @ self.X
        H.flat[:: H.shape[0] + 1] += 1.0
        return H

    def objective(self, beta: np.ndarray, z: np.ndarray) -> float:
        """``P₂(β)`` at the point of scores ``z = Xβ``."""
        return 0.5 * float(beta @ beta) + float(self.u @ self.loss.value(self.t, z))

    def solve(self, beta1: np.ndarray) -> tuple[np.ndarray, np.ndarray, float]:
        """``(β̂, ĝ, δ)`` with ``‖ĝ‖ ≤ _CONVERGED δ``; raises _NotConverged otherwise.

        Damped Newton from β₁: the step solves with the current matrix (first the Hessian
        at β₁, re-formed at the current point when a step contracts the gradient by less
        than ``1 / _CHORD_GAIN``), accepted when the gradient halves, else halved until ``P₂``
        decreases (Armijo; near the optimum the objective's decrease is below its rounding,
        the gradient's is not)."""
        L = _cholesky(self.H1)
        if L is None:
            L = _cholesky(self.hessian(self.z1))
            if L is None:
                raise _NotConverged
        beta, z = beta1, self.z1
        g, delta = self.gradient(beta, z)
        gn = float(np.sqrt(g @ g))
        f = None  # P₂ at the current point, computed when a step needs it
        best = (gn, beta, g, delta)
        for _ in range(_MAX_STEPS):
            if gn <= 2.0 * delta:
                break
            step, info = lapack.dpotrs(L, g, lower=1)
            if info != 0 or not np.all(np.isfinite(step)):
                break
            slope = float(g @ step)
            alpha = 1.0
            while alpha > 1e-8:
                b_new = beta - alpha * step
                z_new = self.X @ b_new
                g_new, d_new = self.gradient(b_new, z_new)
                if float(np.sqrt(g_new @ g_new)) <= 0.5 * gn:
                    f_new = None
                    break
                if f is None:
                    f = self.objective(beta, z)
                f_new = self.objective(b_new, z_new)
                if f_new <= f - 1e-4 * alpha * slope:
                    break
                alpha *= 0.5
            else:
                break
            gn_new = float(np.sqrt(g_new @ g_new))
            if not np.isfinite(gn_new):
                break
            if gn_new < best[0]:
                best = (gn_new, b_new, g_new, d_new)
            if gn_new > _CHORD_GAIN * gn:  # a slow chord step: the Hessian at the new point
                Lh = _cholesky(self.hessian(z_new))
                if Lh is None:
                    break
                L = Lh
            beta, z, g, gn, f, delta = b_new, z_new, g_new, gn_new, f_new, d_new
        gn, beta, g, delta = best
        if not gn <= _CONVERGED * delta:
            raise _NotConverged
        return beta, g, delta


class SolvedRegion(Region):
    """The ball ``B(β̂ − ½ĝ, ½‖ĝ‖ + δ + u(‖β̂‖ + ‖ĝ‖))`` around a solution β̂ of the changed
    problem (module docstring), intersected with the ball of Theorem 1 around β₁.

    Attributes
    ----------
    kind : str
        ``"curvature"``.
    radius : float
        The ball's radius (certified, rounding included).
    center : ndarray of shape (p,)
        Its center ``β̂ − ½ĝ``.
    """

    kind = "curvature"

    def __init__(self, sens: Any, beta_hat: np.ndarray, g: np.ndarray, delta: float) -> None:
        store = sens._store
        self._store = store
        self._C1, self._C2 = sens._C1, sens._C2(sens.n_new)
        r, rnorm = store.half_gradient(self._C1, self._C2)
        self._r = r
        self._R = _ball.certified_radius(rnorm, C1=self._C1, C2=self._C2, residual=sens._eps)
        self._ball_dist = rnorm + self._R
        self._beta1 = store.beta
        c = beta_hat - 0.5 * g
        gn = float(np.sqrt(g @ g))
        bn = float(np.sqrt(beta_hat @ beta_hat))
        self.center = c
        self._cnorm = float(np.sqrt(c @ c))
        self.radius = (0.5 * gn + delta + _U * (bn + gn)) * (1.0 + _SAFE) + 1e-300
        self._gamma_p = 2.0 * (c.size + 2) * _U

    def center_and_bounds(self, X: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """``(center scores, lo, hi)`` at validated raw rows X."""
        st = self._store
        P = st.map(np.asarray(X, dtype=np.float64))
        sb = st.center_scores(P, self._C1, self._C2)
        e = np.sqrt(np.maximum(st.sq_norms(P), 0.0))
        lo, hi = sb - e * self._R, sb + e * self._R
        s = P @ self.center
        w = e * (self.radius * (1.0 + _SAFE) + self._gamma_p * self._cnorm)
        return s, np.maximum(lo, s - w), np.minimum(hi, s + w)

    def decision_bounds(self, X: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        _, lo, hi = self.center_and_bounds(X)
        return lo, hi

    def center_decision(self, X: np.ndarray) -> np.ndarray:
        return self.center_and_bounds(X)[0]

    def distance_bound(self) -> float:
        """Upper bound of ``‖β₂ − β₁‖``: ``‖c − β₁‖ + R``, or the ball's."""
        d = float(np.linalg.norm(self.center - self._beta1))
        return min(self._ball_dist, (d + self.radius) * (1.0 + _SAFE))

    def coef_bounds(self) -> tuple[np.ndarray, np.ndarray]:
        """Every coordinate of β₂: ``c_j ± R``, intersected with the ball's."""
        m = self._beta1 - self._r
        w = self.radius + 2.0 * _U * np.abs(self.center)
        return (np.maximum(m - self._R, self.center - w), np.minimum(m + self._R, self.center + w))


def solved_region(sens: Any) -> SolvedRegion | None:
    """The :class:`SolvedRegion` of a linear what-if whose model keeps its rows, or None when
    the iteration does not reach the rounding floor (the caller then uses another region)."""
    prob = sens._prob
    cache = prob.cached(
        ("curvature-solve", sens._loss.name), lambda: _solve_cache(prob, sens._loss)
    )
    pb = _Problem(sens, cache)
    try:
        beta, g, delta = pb.solve(np.asarray(sens._store.beta, dtype=np.float64))
    except _NotConverged:
        return None
    return SolvedRegion(sens, beta, g, delta)
