"""Curvature-aware certified regions: an ellipsoid that uses the loss's curvature.

The published ball (Okumura et al., "Quick sensitivity analysis for incremental data
modification and its application to leave-one-out CV in linear classification problems",
Thm 1; Sivan et al., "Sensitivity analysis for kernel models", Thm 1) uses only the
1-strong convexity of the regulariser of ``P₂(β) = C₂ Σ_{D₂} w'_i ℓ_i(β) + ½‖β‖²``.  For the
logistic and squared-hinge losses the data term is curved too, and this module certifies the
smaller region that curvature gives.

Theorem (the generalisation of Thm 1).  Let ``H`` be symmetric positive definite with
``⟨∇P₂(a) − ∇P₂(b), a − b⟩ ≥ ‖a − b‖²_H`` for all ``a, b`` on the segment ``[β₁, β₂]``
(``β₂`` the minimiser of ``P₂``, ``β₁`` any point, here the stored solution).  With
``g = ∇P₂(β₁)`` and ``d = β₁ − β₂``, ``∇P₂(β₂) = 0`` gives ``⟨g, d⟩ ≥ ‖d‖²_H``; completing
the square, ``‖d − ½H⁻¹g‖²_H = ‖d‖²_H − ⟨g, d⟩ + ¼‖g‖²_{H⁻¹} ≤ ¼‖g‖²_{H⁻¹}``:

    β₂ ∈ E = { β : ‖β − (β₁ − ½H⁻¹g)‖_H ≤ ½‖g‖_{H⁻¹} }            (H = I: the ball of Thm 1).

A valid H.  Write ``z_i(β) = ⟨Φ_i, β⟩``.  ``ℓ'`` is Lipschitz (absolutely continuous), so for
scores a, b: ``(ℓ'(a) − ℓ'(b))(a − b) ≥ c_i (a − b)²`` whenever ``ℓ'' ≥ c_i`` almost everywhere
between a and b; hence ``H = I + C₂ Σ_{D₂} w'_i c_i Φ_i Φ_iᵀ`` is valid if ``c_i`` is the
minimum of ``ℓ''`` over an interval ``I_i`` that contains ``z_i(β)`` for every β on the segment.
As ``z_i`` is linear, that is the interval between ``z_i(β₁)`` and ``z_i(β₂)``: any region that
contains β₂ gives ``I_i = z_i(β₁) ± Δ_i`` with ``Δ_i ≥ sup_{β∈region} |z_i(β) − z_i(β₁)|`` (the
region need not contain β₁: the segment's other end is β₁ itself, so the interval is the hull
of ``z_i(β₁)`` and the region's scores).  Logistic: ``ℓ''(z) = σ(z)σ(−z)``, decreasing in
``|z|``: its minimum over an interval is at the endpoint farther from 0.  Squared hinge:
``ℓ'' = 2`` where ``y z < 1`` and 0 beyond the margin: ``c_i = 2`` if the whole interval lies
on the active side, else 0.  Any ``H' ⪯ H`` is valid too: additions may be dropped, a
sample's term may be scaled down, and the stored Hessian ``H₀ = I + C₁ Σ_{D₁} w_i ℓ''_i Φ_iΦ_iᵀ``
at β₁ gives ``I + κρ(H₀ − I) − (low-rank corrections)`` (ρ = C₂/C₁) when ``c_i ≥ κ ℓ''_i(β₁)``
for every sample outside the corrections: removed samples (and lowered weights) are
downdates, samples whose interval breaks the ratio are corrected one by one.  For the
logistic loss ``log ℓ''`` is 1-Lipschitz (``|(log σ(z)σ(−z))'| = |σ(−z) − σ(z)| < 1``), so
``c_i ≥ ℓ''_i e^{−Δ_i}``.

Iteration.  Start from the ball of Thm 1 (it contains β₂): its score intervals give ``c_i`` and
an ellipsoid E₁ ∋ β₂; E₁'s narrower intervals give larger ``c_i`` and E₂ ∋ β₂, and so on; every
``Δ_i`` kept is the smallest any valid region gave.

Guess and verify (how the iteration gets off the ground when the ball is too wide for any
curvature).  Let ``K = {β : |z_i(β) − z_i(β₁)| ≤ Δ_i}`` for any ``Δ ≥ 0`` (convex, ∋ β₁), ``H``
valid on K as above (``c_i`` from ``z_i(β₁) ± Δ_i``) and E its ellipsoid.  If E lies in the
interior of K (every score deviation over E is strictly below its ``Δ_i``), then β₂ ∈ E:
``β̂ = argmin_K P₂`` satisfies ``⟨∇P₂(β̂), β₁ − β̂⟩ ≥ 0`` (optimality over K ∋ β₁) and
``⟨∇P₂(β₁) − ∇P₂(β̂), β₁ − β̂⟩ ≥ ‖β₁ − β̂‖²_H`` (K convex), so ``⟨g, β₁ − β̂⟩ ≥ ‖β₁ − β̂‖²_H``
and β̂ ∈ E ⊂ int K; a minimiser of the convex P₂ over K in K's interior is its global
minimiser, β̂ = β₂.  The guess is the ellipsoid of ``H`` with ``c_i = ℓ''_i(β₁)`` widened by a
margin; if the check fails the iteration starts from the ball.

Solver residual.  The stored β₁ is not the exact optimum of P₁: ``∇P₂(β₁) = g₀ + ρ e`` with
``g₀ = (1 − ρ)β₁ + C₂ Δg`` known and ``e = ∇P₁(β₁)``, ``‖e‖ ≤ ε`` (the certified residual).
Since ``H ⪰ I``, ``‖e‖_{H⁻¹} ≤ ε``, and E(g₀ + ρe) lies in the ellipsoid of center
``β₁ − ½H⁻¹g₀`` and H-radius ``½‖g₀‖_{H⁻¹} + ρε`` (the ball's own allowance, in the H norm).

Every region is intersected with the ball: the bounds returned are never wider than Thm 1's.
Linear models work in the eigenbasis of the stored Hessian ``H₀ = VΛVᵀ`` (computed once per
model version, :meth:`deltafit.models.FittedProblem.cached`).  Small problems
(``n p² ≤ 4·10⁶``) take every sample's exact interval; large ones take the cheap intervals of
the H₀-ball ``K_τ = {‖β − β₁‖_{H₀} ≤ τ}``: ``Δ_i = q_i τ`` with ``q_i = ‖Φ_i‖_{H₀⁻¹}`` (cached),
a scalar κ for the bulk of the samples and per-sample corrections only for the changed
samples and the few whose interval breaks κ — a what-if then costs ``O(k p² + p³)``, not
``O(n p²)``.  Kernel models work in the expansion coefficients over the training and changed
points.
"""

from __future__ import annotations

import numpy as np
from scipy import linalg
from scipy.special import expit

from . import _ball

__all__ = ["CurvatureRegion", "curvature_region", "CURVATURE_LOSSES"]

CURVATURE_LOSSES = ("logistic", "squared_hinge")
_EXACT_WORK = 4e6        # n p² up to which every training sample's interval is exact
_GUESS_MARGINS = (0.5, 2.0)
_MAX_REFINE = 8
_REFINE_GAIN = 0.02      # stop refining when the H-radius shrinks by less than this
_SAFE = 1e-10            # relative cushion on computed radii (rounding)


def _check_loss(loss):
    if loss.name not in CURVATURE_LOSSES:
        raise ValueError(
            f"the curvature region needs a logistic or squared-hinge loss; loss={loss.name!r} "
            "has no curvature to use (use method='sphere', or 'exact' for the squared loss)"
        )


def _logistic_d2(z):
    return expit(z) * expit(-z)


def min_d2(loss, t, z, dev):
    """``min ℓ''(t, ·)`` over ``[z − dev, z + dev]`` (the curvature lower bound ``c_i``).

    Logistic: the endpoint farther from 0.  Squared hinge: 2 if ``t·z' < 1`` on the whole
    interval (up to its endpoint), else 0.
    """
    if loss.name == "logistic":
        return _logistic_d2(np.abs(z) + dev)
    return np.where(t * z + dev <= 1.0, 2.0, 0.0)


# ============================================================================ linear models
def _linear_cache(prob, loss):
    """What every curvature region of this model version reuses: the stored Hessian's
    eigendecomposition, the training scores and curvatures, ``q_i = ‖Φ_i‖_{H₀⁻¹}``."""
    live = np.asarray(prob.live)
    z, _ = prob.scores(live)
    t = np.asarray(prob.targets[live], dtype=np.float64)
    w = prob.sample_weights(live)
    h = loss.d2(t, z)
    lam, V = linalg.eigh(prob.hessian())
    lam = np.maximum(lam, 1.0)  # H₀ ⪰ I exactly; rounding only
    rows = prob.rows[live]
    psi = rows @ V
    q = np.sqrt(np.einsum("ij,ij->i", psi, psi / lam))
    pos = np.full(prob.capacity, -1, dtype=np.intp)
    pos[live] = np.arange(live.size)
    c = {"live": live, "z": z, "t": t, "w": np.ones(live.size) if w is None else w, "h": h,
         "lam": lam, "V": V, "q": q, "pos": pos}
    if loss.name == "logistic":
        c["order"] = np.argsort(-q, kind="stable")
    else:
        act = np.flatnonzero(h > 0)
        ratio = (1.0 - t[act] * z[act]) / np.maximum(q[act], 1e-300)
        o = np.argsort(ratio, kind="stable")
        c["act"], c["act_ratio"] = act[o], ratio[o]
    return c


class _LinearProblem:
    """The data of one curvature region of a linear model, in the eigenbasis of H₀."""

    def __init__(self, sens, mode):
        prob, loss = sens._prob, sens._loss
        self.loss, self.prob = loss, prob
        self._psi_prefix = None
        self.cache = cache = prob.cached(("curvature", loss.name),
                                         lambda: _linear_cache(prob, loss))
        store = sens._store
        self.C1, self.C2 = sens._C1, sens._C2(sens.n_new)
        self.rho = self.C2 / self.C1
        self.eps = sens._eps
        self.beta = store.beta
        self.V, self.lam = cache["V"], cache["lam"]
        r, rnorm = store.half_gradient(self.C1, self.C2)
        self.r, self.rnorm = r, rnorm
        self.R_ball = _ball.certified_radius(rnorm, C1=self.C1, C2=self.C2, residual=self.eps)
        self.g = self.V.T @ (2.0 * r)  # g₀ in the eigenbasis
        # the entries: every sample the change touches (model samples and additions)
        m = sens._m
        idx = np.flatnonzero(store.live[:m])
        src = store.src[idx]
        y0, y = sens._y0[idx], sens._y[idx]
        self.e_z = store.z[idx]
        self.e_t = np.where(y == y, y, 0.0)                       # label in D₂
        self.e_u = np.where(y == y, sens._w[idx], 0.0)            # weight in D₂ (0: absent)
        model = y0 == y0
        self.e_h0w = np.where(model, sens._w0[idx] * loss.d2(np.where(model, y0, 0.0),
                                                             self.e_z), 0.0)
        self.e_psi = store.rows_of(idx) @ self.V if idx.size else np.zeros((0, self.lam.size))
        self.e_q = np.sqrt(np.einsum("ij,ij->i", self.e_psi, self.e_psi / self.lam))
        n = cache["z"].size
        in_entries = np.zeros(n, dtype=bool)
        ep = cache["pos"][src[src >= 0]]
        in_entries[ep[ep >= 0]] = True
        self.in_entries = in_entries
        self.exact = mode == "exact" or (mode == "auto" and n * self.lam.size ** 2 <= _EXACT_WORK)
        if self.exact:
            rest = np.flatnonzero(~in_entries)
            self.rest = rest
            live = cache["live"]
            self.r_psi = prob.rows[live[rest]] @ self.V
            self.r_z, self.r_t = cache["z"][rest], cache["t"][rest]
            self.r_w = cache["w"][rest]

    # ------------------------------------------------------------------ H from Δ
    def _extra(self, tau):
        """Cheap mode: (κ, positions of non-entry samples corrected one by one) for τ."""
        c = self.cache
        if self.loss.name == "logistic":
            ordering = c["order"]
            k = min(ordering.size, self.lam.size)
            kappa = float(np.exp(-c["q"][ordering[k]] * tau)) if k < ordering.size else 0.0
        else:
            ordering = c["act"]
            k = int(np.searchsorted(c["act_ratio"], tau * (1.0 + 1e-9) + 1e-300, side="right"))
            kappa = 1.0
        keep = ~self.in_entries[ordering[:k]]
        return kappa, ordering[:k][keep], self._prefix_psi(ordering, k)[keep]

    def build(self, dev):
        """H̃ = VᵀHV for the deviation bounds ``dev`` (cheap: the scalar τ; exact: a pair of
        arrays (entries, other samples)), as ``(diag a, Ψ, d)`` with ``H̃ = diag(a) + Ψᵀ diag(d) Ψ``."""
        C2, loss = self.C2, self.loss
        if self.exact:
            dev_e, dev_r = dev
            kappa = 0.0
            d_e = C2 * self.e_u * min_d2(loss, self.e_t, self.e_z, dev_e)
            d_r = C2 * self.r_w * min_d2(loss, self.r_t, self.r_z, dev_r)
            psi = np.vstack([self.e_psi, self.r_psi])
            d = np.concatenate([d_e, d_r])
        else:
            tau = dev
            kappa, extra, rows_psi = self._extra(tau)
            c = self.cache
            d_e = C2 * (self.e_u * min_d2(loss, self.e_t, self.e_z, self.e_q * tau)
                        - kappa * self.e_h0w)
            if extra.size:
                cx = min_d2(loss, c["t"][extra], c["z"][extra], c["q"][extra] * tau)
                d_x = C2 * c["w"][extra] * (cx - kappa * c["h"][extra])
                psi = np.vstack([self.e_psi, rows_psi])
                d = np.concatenate([d_e, d_x])
                qq = np.concatenate([self.e_q, c["q"][extra]])
            else:
                psi, d, qq = self.e_psi, d_e, self.e_q
            self._qq = qq
        a = 1.0 + kappa * self.rho * (self.lam - 1.0)
        return kappa, a, psi, d

    def _prefix_psi(self, ordering, k):
        """``VᵀΦ_i`` of the first ``k`` samples of a fixed ordering (kept between calls)."""
        have = self._psi_prefix
        if have is None or have[0] is not ordering or have[1].shape[0] < k:
            live = self.cache["live"]
            rows = self.prob.rows[live[ordering[:k]]]
            self._psi_prefix = (ordering, rows @ self.V)
        return self._psi_prefix[1][:k]

    def ellipsoid(self, kappa, a, psi, d):
        """``(L, x, R_H)``: Cholesky factor of H̃, ``x = H̃⁻¹ g̃`` (center ``β₁ − ½Vx``) and
        the H-radius ``½‖g₀‖_{H⁻¹} + ρε``; None if H̃ is not numerically positive definite."""
        Ht = (psi.T * d) @ psi if d.size else np.zeros((a.size, a.size))
        Ht[np.diag_indices_from(Ht)] += a
        try:
            L = linalg.cholesky(Ht, lower=True, check_finite=False)
        except linalg.LinAlgError:
            return None
        x = linalg.cho_solve((L, True), self.g, check_finite=False)
        RH = 0.5 * np.sqrt(max(float(self.g @ x), 0.0)) + self.rho * self.eps
        return L, x, RH * (1.0 + _SAFE) + 1e-300, Ht

    def deviation(self, ell, kappa, a, d):
        """Bounds of ``|z_i(β) − z_i(β₁)|`` over the ellipsoid: (entries, others) arrays in
        exact mode, the H₀-radius τ in cheap mode."""
        L, x, RH, Ht = ell
        if self.exact:
            out = []
            for psi in (self.e_psi, self.r_psi):
                if not psi.shape[0]:
                    out.append(np.zeros(0))
                    continue
                s = linalg.solve_triangular(L, psi.T, lower=True, check_finite=False)
                out.append((np.abs(psi @ x) * 0.5 + RH * np.sqrt(np.einsum("ij,ij->j", s, s)))
                           * (1.0 + _SAFE))
            return tuple(out)
        lam = self.lam
        off = 0.5 * float(np.sqrt(np.sum(lam * x * x)))  # ‖c − β₁‖_{H₀}
        # λ_max(H̃⁻¹Λ) = 1 / λ_min(Λ^{-½} H̃ Λ^{-½}); Weyl: ≥ min(a/λ) + Σ_{d<0} d q²
        base = float(np.min(a / lam))
        neg = d < 0
        low = base + float(np.sum(d[neg] * self._qq[neg] ** 2)) if neg.any() else base
        if low < 0.5 * base:
            s = 1.0 / np.sqrt(lam)
            M = Ht * s[:, None] * s[None, :]
            low = float(linalg.eigvalsh(M, subset_by_index=[0, 0], check_finite=False)[0])
            low *= 1.0 - 1e-9
        if low <= 0.0:
            return np.inf
        return (off + RH / np.sqrt(low)) * (1.0 + _SAFE)

    def ball_deviation(self):
        """The deviation bounds of the ball of Thm 1 (valid without any check)."""
        if self.exact:
            r_e = self.V.T @ self.r
            out = []
            for psi in (self.e_psi, self.r_psi):
                norms = np.sqrt(np.einsum("ij,ij->i", psi, psi))
                out.append((np.abs(psi @ r_e) + self.R_ball * norms) * (1.0 + _SAFE))
            return tuple(out)
        rv = self.V.T @ self.r
        return (float(np.sqrt(np.sum(self.lam * rv * rv)))
                + self.R_ball * float(np.sqrt(self.lam[-1]))) * (1.0 + _SAFE)

    # ----------------------------------------------------------------- schedule
    def _scaled(self, dev, f):
        return tuple(v * f for v in dev) if self.exact else dev * f

    def _inside(self, dev_new, dev, kappa, a, d):
        """E strictly inside K (the check of the guess); samples without curvature have no
        constraint."""
        if self.exact:
            used = d > 0
            new = np.concatenate(dev_new)
            old = np.concatenate(dev)
            return bool(np.all(new[used] < old[used]))
        return dev_new < dev

    def _min(self, u, v):
        if self.exact:
            return tuple(np.minimum(a, b) for a, b in zip(u, v))
        return min(u, v)

    def solve(self):
        """The final (valid) ellipsoid, or None (the ball alone)."""
        zero = (np.zeros(self.e_z.size), np.zeros(self.r_z.size)) if self.exact else 0.0
        valid = self.ball_deviation()
        # guess and verify: the ellipsoid of the curvature at β₁, widened by a margin
        parts = self.build(zero)
        ell = self.ellipsoid(*parts)
        if ell is not None:
            guess = self.deviation(ell, parts[0], parts[1], parts[3])
            for margin in _GUESS_MARGINS:
                trial = self._scaled(guess, 1.0 + margin)
                parts = self.build(trial)
                ell = self.ellipsoid(*parts)
                if ell is None:
                    break
                dev = self.deviation(ell, parts[0], parts[1], parts[3])
                if self._inside(dev, trial, parts[0], parts[1], parts[3]):
                    valid = self._min(valid, dev)
                    break
                guess = self._scaled(dev, 1.0)
        # refine from the valid deviations (each step's ellipsoid contains β₂)
        best, last_R = None, np.inf
        for _ in range(_MAX_REFINE):
            parts = self.build(valid)
            ell = self.ellipsoid(*parts)
            if ell is None:
                break
            R = ell[2]
            if best is None or R < best[2]:
                best = ell
            valid = self._min(valid, self.deviation(ell, parts[0], parts[1], parts[3]))
            if R > (1.0 - _REFINE_GAIN) * last_R:
                break
            last_R = R
        return best


class CurvatureRegion:
    """The curvature-aware region of a linear model's what-if: an ellipsoid
    ``‖β − c‖_H ≤ R_H`` intersected with the ball of Thm 1 (see the module).

    Attributes
    ----------
    kind : str
        ``"curvature"``.
    """

    kind = "curvature"

    def __init__(self, sens, mode="auto"):
        self._sens = sens
        lp = _LinearProblem(sens, mode)
        self._lp = lp
        self._store = sens._store
        self._ell = lp.solve()
        if self._ell is not None:
            L, x, RH, _ = self._ell
            self._L, self._RH = L, RH
            self._center = lp.beta - 0.5 * (lp.V @ x)
        self._C1, self._C2, self._R = lp.C1, lp.C2, lp.R_ball

    @property
    def radius(self):
        """The ellipsoid's H-radius (None: the ball alone)."""
        return None if self._ell is None else self._RH

    def _ball(self, P):
        st = self._store
        s = st.center_scores(P, self._C1, self._C2)
        e = np.sqrt(np.maximum(st.sq_norms(P), 0.0)) * self._R
        return s - e, s + e, s

    def _map(self, X):
        return self._store.map(np.asarray(X, dtype=np.float64))

    def decision_bounds(self, X):
        """``lo ≤ ⟨Φ(x), β₂⟩ ≤ hi`` for validated raw rows X: the ellipsoid's
        ``⟨Φ, c⟩ ± R_H ‖Φ‖_{H⁻¹}`` intersected with the ball's interval."""
        P = self._map(X)
        lo, hi, _ = self._ball(P)
        if self._ell is None:
            return lo, hi
        s, w = self._ell_scores(P)
        return np.maximum(lo, s - w), np.minimum(hi, s + w)

    def _ell_scores(self, P):
        psi = P @ self._lp.V
        u = linalg.solve_triangular(self._L, psi.T, lower=True, check_finite=False)
        return P @ self._center, self._RH * np.sqrt(np.einsum("ij,ij->j", u, u)) * (1.0 + _SAFE)

    def center_decision(self, X):
        """The ellipsoid center's scores (the ball's without an ellipsoid)."""
        P = self._map(X)
        if self._ell is None:
            return self._ball(P)[2]
        return P @ self._center

    def distance_bound(self):
        """Upper bound of ``‖β₂ − β₁‖``: ``‖c − β₁‖ + R_H`` (H ⪰ I), or the ball's."""
        lp = self._lp
        ball = lp.rnorm + lp.R_ball
        if self._ell is None:
            return ball
        return min(ball, float(np.linalg.norm(self._center - lp.beta)) + self._RH)

    def coef_bounds(self):
        """Bounds of every coordinate of β₂ (the constant feature last when fitted with an
        intercept): ``c_j ± R_H sqrt((H⁻¹)_jj)``, intersected with the ball's."""
        lp = self._lp
        m = lp.beta - lp.r
        lo, hi = m - lp.R_ball, m + lp.R_ball
        if self._ell is None:
            return lo, hi
        M = linalg.solve_triangular(self._L, lp.V.T, lower=True, check_finite=False)
        w = self._RH * np.sqrt(np.einsum("ij,ij->j", M, M)) * (1.0 + _SAFE)
        return np.maximum(lo, self._center - w), np.minimum(hi, self._center + w)


def curvature_region(sens, mode="auto"):
    """The curvature-aware region of a :class:`~deltafit.sensitivity.Sensitivity`'s pending
    change (logistic or squared-hinge loss; ValueError otherwise).

    Parameters
    ----------
    sens : Sensitivity
    mode : {"auto", "exact", "cheap"}
        Linear models: every training sample's exact score interval (``"exact"``), the cheap
        intervals of the stored Hessian's norm (``"cheap"``), or by problem size.
    """
    _check_loss(sens._loss)
    sens._check_model()
    if sens._kernel:
        from ._curvature_kernel import KernelCurvatureRegion

        return KernelCurvatureRegion(sens)
    return CurvatureRegion(sens, mode)
