"""Curvature-aware certified regions: an ellipsoid and a Newton ball that use the loss's
curvature.

The published ball (Okumura et al., "Quick sensitivity analysis for incremental data
modification and its application to leave-one-out CV in linear classification problems",
Theorem 1; Sivan et al., "Incremental sensitivity analysis for kernelized models", Theorem 1) uses
only the 1-strong convexity of the regulariser of ``P₂(β) = C₂ Σ_{D₂} w'_i ℓ_i(β) + ½‖β‖²``.  For
the logistic and squared-hinge losses the data term is curved too, and this module certifies the
smaller region that curvature gives.

Theorem (the generalisation of Theorem 1).  Let ``H`` be symmetric positive definite with
``⟨∇P₂(a) − ∇P₂(b), a − b⟩ ≥ ‖a − b‖²_H`` for all ``a, b`` on the segment ``[β₁, β₂]``
(``β₂`` the minimiser of ``P₂``, ``β₁`` any point, here the stored solution).  With
``g = ∇P₂(β₁)`` and ``d = β₁ − β₂``, ``∇P₂(β₂) = 0`` gives ``⟨g, d⟩ ≥ ‖d‖²_H``; completing
the square, ``‖d − ½H⁻¹g‖²_H = ‖d‖²_H − ⟨g, d⟩ + ¼‖g‖²_{H⁻¹} ≤ ¼‖g‖²_{H⁻¹}``:

    β₂ ∈ E = { β : ‖β − (β₁ − ½H⁻¹g)‖_H ≤ ½‖g‖_{H⁻¹} }            (H = I: the ball of Theorem 1).

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

Secant form (the exact-interval regions).  Sharper than the minimum of ``ℓ''`` over the hull:
``∇P₂(β₁) − ∇P₂(β₂) = H̄ (β₁ − β₂)`` holds exactly with the secant matrix
``H̄ = I + C₂ Σ w'_i c̄_i Φ_iΦ_iᵀ``, ``c̄_i`` the secant slope of ``ℓ'`` between ``z_i(β₁)`` and
``z_i(β₂)`` (:func:`secant_range` bounds it from an interval for ``z_i(β₂)`` alone).  Any
``H ⪯ H̄`` gives E (``⟨g, d⟩ = dᵀH̄d ≥ ‖d‖²_H``).

Newton ball (a second-order certificate).  With ``c̄_i ∈ [lo_i, hi_i]``, ``M = I + C₂ Σ w'_i
m_i Φ_iΦ_iᵀ`` (``m_i`` the midpoint), ``H_lo ⪯ H̄`` (the lower ends) and ``d₀ = M⁻¹g``:
``H̄(d − d₀) = (M − H̄) d₀ = Σ_i C₂ w'_i (m_i − c̄_i) s_i Φ_i`` with ``s_i = ⟨Φ_i, d₀⟩``, so
``‖d − d₀‖_{H_lo} ≤ ‖d − d₀‖_{H̄} ≤ ‖Σ_i e_i Φ_i‖_{H_lo⁻¹}``, ``|e_i| ≤ C₂ w'_i (hi_i − lo_i)/2
|s_i|`` (bounded by :func:`newton_radius`): β₂ lies in a ball of radius quadratic in the change
around the Newton point ``β₁ − d₀``.

Iteration.  Start from the ball of Theorem 1 (it contains β₂): its score intervals give the
curvature bounds, hence E₁ and N₁ ∋ β₂; their narrower intervals give better bounds, and so on;
every interval kept is the intersection of all valid ones.  Re-centring (exact intervals): at
the Newton point β̃ the exact gradient ``∇P₂(β̃)`` (every D₂ sample is at hand, O(n p)) gives
Okumura et al.'s Theorem 6 ball around β̃ and the same regions expanded at β̃ (``z_i(β̃)`` for
``z_i(β₁)``, rounding of the gradient as the residual).

Guess and verify (how the iteration gets off the ground when the ball is too wide for any
curvature).  Let ``K = {β : |z_i(β) − z_i(β₁)| ≤ Δ_i}`` for any ``Δ ≥ 0`` (convex, ∋ β₁), ``H``
valid on K as above (``c_i`` from ``z_i(β₁) ± Δ_i``) and E its ellipsoid.  If E lies in the
interior of K (every score deviation over E is strictly below its ``Δ_i``), then β₂ ∈ E:
``β̂ = argmin_K P₂`` satisfies ``⟨∇P₂(β̂), β₁ − β̂⟩ ≥ 0`` (optimality over K ∋ β₁) and
``⟨∇P₂(β₁) − ∇P₂(β̂), β₁ − β̂⟩ ≥ ‖β₁ − β̂‖²_H`` (K convex), so ``⟨g, β₁ − β̂⟩ ≥ ‖β₁ − β̂‖²_H``
and β̂ ∈ E ⊂ int K; a minimiser of the convex P₂ over K in K's interior is its global
minimiser, β̂ = β₂.  The Newton ball is verified by a homotopy: the problems
``P^s = P₂ − (1 − s)⟨g, ·⟩`` (s ∈ [0, 1]) have ``∇P^s(β₁) = s g``, minimisers β^s continuous
in s with β⁰ = β₁, and the same secant matrices; their Newton balls, whose score deviations
are s times those of N₁, lie in int K whenever N₁ does (K's intervals contain ``z_i(β₁)``).
The set of s with β^s ∈ K is closed, contains 0, and is open (β^s ∈ K puts β^s in its Newton
ball, inside int K), so it is [0, 1]: β₂ ∈ N₁.  The guess is the region of the curvature at
β₁ widened by a margin; if the check fails the iteration starts from the ball.

Solver residual.  The stored β₁ is not the exact optimum of P₁: ``∇P₂(β₁) = g₀ + ρ e`` with
``g₀ = (1 − ρ)β₁ + C₂ Δg`` known and ``e = ∇P₁(β₁)``, ``‖e‖ ≤ ε`` (the certified residual).
Since ``H ⪰ I``, ``‖e‖_{H⁻¹} ≤ ε``, and E(g₀ + ρe) lies in the ellipsoid of center
``β₁ − ½H⁻¹g₀`` and H-radius ``½‖g₀‖_{H⁻¹} + ρε`` (the ball's own allowance, in the H norm).

Every region is intersected with the ball: the bounds returned are never wider than Theorem 1's.
Linear models work in the eigenbasis of the stored Hessian ``H₀ = VΛVᵀ`` (computed once per
model version, :meth:`deltafit.models.FittedProblem.cached`).  Small problems
(``n ≤ 1500``, ``n p² ≤ 4·10⁶``) take every sample's exact interval; large ones take the cheap intervals of
the H₀-ball ``K_τ = {‖β − β₁‖_{H₀} ≤ τ}``: ``Δ_i = q_i τ`` with ``q_i = ‖Φ_i‖_{H₀⁻¹}`` (cached),
a scalar κ for the bulk of the samples and per-sample corrections only for the changed
samples and the few whose interval breaks κ — a what-if then costs ``O(k p² + p³)``, not
``O(n p²)``.  Kernel models work in the expansion coefficients over the training and changed
points.
"""

from __future__ import annotations

import copy

import numpy as np
from scipy import linalg
from scipy.special import expit

from deltafit.sensitivity.regions import _ball

__all__ = ["CurvatureRegion", "curvature_region", "removal_intervals", "CURVATURE_LOSSES"]

CURVATURE_LOSSES = ("logistic", "squared_hinge")
_EXACT_WORK = 4e6        # n p² up to which every training sample's interval is exact ...
_EXACT_N = 1500          # ... and n up to which (beyond, the cached-Hessian intervals)
_GUESS_MARGINS = (0.25, 1.0, 3.0)
_BLOCK_EIG = 150         # largest block of curvature-free samples bounded by its eigenvalue
_RECENTER = 2            # re-centrings of the exact-interval regions at their Newton point
_MODES = ("auto", "exact", "cheap", "solve")
_MAX_REFINE = 8
_REFINE_GAIN = 0.02      # stop refining when the H-radius shrinks by less than this
_SAFE = 1e-10            # relative cushion on computed radii (rounding)


def _small(prob):
    """Whether a linear problem takes the small-problem regions (exact intervals, solve)."""
    n, p = prob.n_samples, prob.coef.shape[0]
    return n <= _EXACT_N and n * p * p <= _EXACT_WORK


def _check_loss(loss):
    if loss.name not in CURVATURE_LOSSES:
        raise ValueError(
            f"the curvature region needs a logistic or squared-hinge loss; loss={loss.name!r} "
            "has no curvature to use (use method='sphere', or 'exact' for the squared loss)"
        )


def _logistic_d2(z):
    return expit(z) * expit(-z)


def curvature_range(loss, t, A, B):
    """``(min, max)`` of ``ℓ''(t, ·)`` over the score interval ``[A, B]``.

    Logistic (``ℓ'' = σ(z)σ(−z)``, decreasing in ``|z|``): the minimum at the endpoint farther
    from 0, the maximum ¼ if the interval holds 0, else at the nearer endpoint.  Squared hinge
    (2 where ``t z < 1``, 0 beyond the margin; the kink is a single point): the minimum is 2 if
    the whole interval lies on the active side, the maximum 2 if any of it does.
    """
    if loss.name == "logistic":
        hA, hB = _logistic_d2(A), _logistic_d2(B)
        lo = np.minimum(hA, hB)
        hi = np.where((A <= 0.0) & (B >= 0.0), 0.25, np.maximum(hA, hB))
        return lo, hi
    mA, mB = t * A, t * B
    lo = np.where(np.maximum(mA, mB) <= 1.0, 2.0, 0.0)
    hi = np.where(np.minimum(mA, mB) < 1.0, 2.0, 0.0)
    return lo, hi


def secant_range(loss, t, z1, A, B):
    """Bounds ``(lo, hi)`` of the secant slope ``(ℓ'(t, z₂) − ℓ'(t, z₁)) / (z₂ − z₁)`` over
    ``z₂ ∈ [A, B]`` (the derivative at ``z₁`` where ``z₂ = z₁``).

    Logistic: the slope is the mean of ``h = ℓ'' = σ(z)σ(−z)`` over ``[z₁, z₂]``, i.e.
    ``(σ(z₂) − σ(z₁)) / (z₂ − z₁)``.  As a function of ``z₂`` on either side of ``z₁`` it has
    no interior local minimum (at a critical point the mean equals ``h(z₂)``, and its second
    derivative has the sign of ``h'(z₂)(z₂ − z₁)``; a local minimum would need ``h`` to rise
    towards ``z₂`` on the whole of ``[z₁, z₂]`` — ``h`` is unimodal — and then ``h(z₂)``
    exceeds the mean), so its minimum over ``[A, B]`` is at ``A``, ``B`` or ``z₁``; the
    maximum is bounded by the maximum of ``h`` over the hull.  Squared hinge: in margin units
    ``m = t z`` the slope is ``2 (f(m₁) − f(m₂)) / (m₂ − m₁)`` with ``f(m) = max(0, 1 − m)``
    convex, so it does not increase with ``m₂``: its extremes are at the ends of the margin
    interval.  Rounding is allowed for (``4·10⁻¹⁶ / |z₂ − z₁|``), and near ``z₁`` the
    bounds fall back to the extremes of ``ℓ''`` over the hull.
    """
    z1 = np.asarray(z1, dtype=np.float64)
    if loss.name == "logistic":
        h1 = _logistic_d2(z1)
        s1 = expit(z1)
        ends = []
        for E in (A, B):
            gap = E - z1
            safe = np.minimum(h1, _logistic_d2(E))  # min of h over [z₁, E] ≤ the mean
            big = np.abs(gap) > 1e-6
            g = np.where(big, gap, 1.0)
            q = (expit(E) - s1) / g - 4e-16 / np.abs(g)
            ends.append(np.where(big, np.maximum(safe, q), safe))
        lo = np.minimum(ends[0], ends[1])
        lo = np.where((A <= z1) & (z1 <= B), np.minimum(lo, h1), lo)
        lo_h, hi_h = np.minimum(A, z1), np.maximum(B, z1)
        hi = np.where((lo_h <= 0.0) & (hi_h >= 0.0), 0.25,
                      np.maximum(_logistic_d2(lo_h), _logistic_d2(hi_h)))
        return np.clip(lo, 0.0, 0.25), hi
    m1 = t * z1
    mA, mB = np.minimum(t * A, t * B), np.maximum(t * A, t * B)
    f1 = np.maximum(0.0, 1.0 - m1)

    def slope(m2, lower):
        gap = m2 - m1
        near = np.abs(gap) <= 1e-9 * (1.0 + np.abs(m1))
        g = np.where(near, 1.0, gap)
        q = 2.0 * (f1 - np.maximum(0.0, 1.0 - m2)) / g
        tol = 1e-15 * (2.0 + np.abs(m1) + np.abs(m2)) / np.abs(g)
        q = q - tol if lower else q + tol
        # at (or very near) m₁: the one-sided derivatives, 2 on the active side, 0 beyond
        if lower:
            limit = np.where(m1 < 1.0 - 1e-9, 2.0, 0.0)
        else:
            limit = np.where(m1 <= 1.0 + 1e-9, 2.0, 0.0)
        return np.clip(np.where(near, limit, q), 0.0, 2.0)

    return slope(mB, True), slope(mA, False)


def newton_radius(err, w_lo, qh, block_gram):
    """``ρ₂ ≥ ‖Σ_i e_i s_i Φ_i‖_{H_lo⁻¹}`` for ``|e_i s_i| ≤ err_i`` (the Newton ball).

    A sample with curvature (``w_lo_i = C₂ w'_i c_lo,i > 0``) enters through
    ``Σ w_lo,i Φ_iΦ_iᵀ ⪯ H_lo``: ``‖H_lo^{-½} Σ_P Φ_i v_i‖ ≤ ‖v / sqrt(w_lo)‖``; one without
    (or with little) through the triangle inequality, ``Σ err_i ‖Φ_i‖_{H_lo⁻¹}``, or the
    largest eigenvalue of its block's Gram matrix ``block_gram(idx)`` of ``H_lo^{-½}Φ_i``.
    """
    pos = (err > 0) & (w_lo * qh ** 2 >= 1.0)
    part = float(np.sqrt(np.sum(err[pos] ** 2 / w_lo[pos])))
    unc = np.flatnonzero((err > 0) & ~pos)
    if unc.size:
        tri = float(err[unc] @ qh[unc])
        if unc.size <= _BLOCK_EIG:
            G = block_gram(unc)
            top = float(linalg.eigvalsh(G, subset_by_index=[unc.size - 1] * 2,
                                        check_finite=False)[0])
            tri = min(tri, np.sqrt(max(top, 0.0) * (1.0 + 1e-9)) * float(np.linalg.norm(err[unc])))
        part += tri
    return part


# ============================================================================ linear models
class _ClusterKey:
    """The order key of the samples the cheap intervals correct one by one, for rows on a
    Dask cluster (picklable: it travels to the workers): logistic ``−q_i`` (the largest
    ``q_i = ‖Φ_i‖_{H₀⁻¹}`` first), squared hinge ``(1 − t_i z_i) / q_i`` over the active
    samples (inf elsewhere); ``q_i`` kept with it."""

    def __init__(self, V, lam, loss):
        self.V, self.lam, self.loss = V, lam, loss

    def __call__(self, Phi, t, w, z):
        psi = Phi @ self.V
        q = np.sqrt(np.einsum("ij,ij->i", psi, psi / self.lam))
        if self.loss.name == "logistic":
            key = -q
        else:
            act = self.loss.d2(t, z) > 0
            key = np.full(q.size, np.inf)
            key[act] = (1.0 - t[act] * z[act]) / np.maximum(q[act], 1e-300)
        return np.column_stack([key, q])


def _cluster_cache(prob, loss, k=None):
    """:func:`_linear_cache` of a model whose rows live on a Dask cluster, over the samples
    the cheap intervals read: the stored Hessian (M, or one pass), then one pass that brings
    back, per row block, the ``k`` samples first in the order of :class:`_ClusterKey` — the
    ``p + 1`` largest ``q_i`` (logistic: κ and the ``p`` corrected samples are those of the
    whole model), or the active squared-hinge samples of smallest ratio, with ``cut`` the
    smallest ratio left on the cluster (:meth:`_LinearCheap._extra` asks for more past it)."""
    H = prob.hessian()
    lam, V = linalg.eigh(H)
    lam = np.maximum(lam, 1.0)
    p = lam.size
    if k is None:
        k = max(p + 1, 16) if loss.name == "logistic" else max(4 * p, 64)
    got = prob.select_rows(_ClusterKey(V, lam, loss), k)
    live, rows = np.asarray(got["handles"], dtype=np.intp), got["rows"]
    t, z, q = got["targets"], got["z"], got["key"][:, 1]
    order = np.argsort(live, kind="stable")
    c = {"live": live, "z": z, "t": t, "w": got["weights"], "h": loss.d2(t, z), "lam": lam,
         "V": V, "q": q, "sorted": (live[order], order), "k": k}
    if loss.name == "logistic":
        c["order"] = np.argsort(-q, kind="stable")
        c["order_psi"] = rows[c["order"]] @ V
    else:
        act = np.flatnonzero(c["h"] > 0)
        ratio = got["key"][act, 0]
        o = np.argsort(ratio, kind="stable")
        c["act"], c["act_ratio"] = act[o], ratio[o]
        c["act_psi"] = rows[act[o]] @ V
        c["act_cut"] = got["cut"]
    return c


def _positions(cache, handles):
    """Positions in the cache's samples of ``handles`` (−1: not among them)."""
    handles = np.asarray(handles, dtype=np.intp)
    if "pos" in cache:
        return cache["pos"][handles]
    srt, order = cache["sorted"]
    at = np.minimum(np.searchsorted(srt, handles), max(srt.size - 1, 0))
    hit = (srt.size > 0) & (srt[at] == handles) if srt.size else np.zeros(handles.size, bool)
    return np.where(hit, order[at] if srt.size else -1, -1)


def _linear_cache(prob, loss):
    """What every curvature region of this model version reuses: the stored Hessian's
    eigendecomposition, the training scores and curvatures, ``q_i = ‖Φ_i‖_{H₀⁻¹}``."""
    if getattr(prob, "rows_on_cluster", False):
        return _cluster_cache(prob, loss)
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


def _hnorms(L, psi):
    """``‖ψ_i‖_{H⁻¹}`` of the rows of ``psi`` for ``H = L Lᵀ``."""
    if not psi.shape[0]:
        return np.zeros(0)
    W = linalg.solve_triangular(L, psi.T, lower=True, check_finite=False)
    return np.sqrt(np.einsum("ij,ij->j", W, W))


class _LinearBase:
    """What both schedules of a linear model share: the pending change, in the eigenbasis
    ``V`` of the stored Hessian ``H₀ = VΛVᵀ``."""

    def __init__(self, sens):
        prob, loss = sens._prob, sens._loss
        self.loss, self.prob = loss, prob
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
        idx = np.flatnonzero(store.live[:sens._m])
        src = store.src[idx]
        y0, y = sens._y0[idx], sens._y[idx]
        self.e_z = store.z[idx]
        self.e_t = np.where(y == y, y, 0.0)                       # label in D₂
        self.e_u = np.where(y == y, sens._w[idx], 0.0)            # weight in D₂ (0: absent)
        model = y0 == y0
        self.e_h0w = np.where(model, sens._w0[idx] * loss.d2(np.where(model, y0, 0.0),
                                                             self.e_z), 0.0)
        self.e_w0 = np.where(model, sens._w0[idx], 0.0)
        self._store, self._idx = store, idx
        in_entries = np.zeros(cache["z"].size, dtype=bool)
        self._src = src[src >= 0]
        if getattr(prob, "rows_on_cluster", False):  # rows copied, not referenced: by id
            mine = sens._y0[idx] == sens._y0[idx]
            self._src = np.asarray(prob.handles_unchecked(sens._ids[idx][mine]), dtype=np.intp)
        ep = _positions(cache, self._src)
        in_entries[ep[ep >= 0]] = True
        self.in_entries = in_entries
        self.newton_ball = None

    def entry_psi(self, sel):
        """``VᵀΦ_i`` of the entries ``sel``."""
        if not sel.size:
            return np.zeros((0, self.lam.size))
        return self._store.rows_of(self._idx[sel]) @ self.V

    def ellipsoid(self, a, psi, d):
        """The ellipsoid of ``H̃ = diag(a) + Ψᵀ diag(d) Ψ`` (see :meth:`factor`)."""
        Ht = (psi.T * d) @ psi if d.size else np.zeros((a.size, a.size))
        Ht[np.diag_indices_from(Ht)] += a
        return self.factor(Ht)

    def factor(self, Ht):
        """``(L, x, R_H, H̃)`` of ``H̃ = VᵀHV``: its Cholesky factor, ``x = H̃⁻¹ g̃`` (center
        ``β₁ − ½Vx``) and the H-radius ``½‖g₀‖_{H⁻¹} + ρε``; None if H̃ is not numerically
        positive definite."""
        try:
            L = linalg.cholesky(Ht, lower=True, check_finite=False)
        except linalg.LinAlgError:
            return None
        x = linalg.cho_solve((L, True), self.g, check_finite=False)
        RH = 0.5 * np.sqrt(max(float(self.g @ x), 0.0)) + self.rho * self.eps
        return L, x, RH * (1.0 + _SAFE) + 1e-300, Ht


class _ExactSchedule:
    """The schedule of the exact-interval regions (linear and kernel): guess and verify, then
    refine; a subclass gives ``z, t, u, used`` (scores under β₁, D₂ labels and weights of the
    D₂ samples), ``_region``, ``curvature``, ``build_ell``, ``ell_iv``, ``newton``,
    ``ball_iv``.  A region is held as the intervals ``(A, B)`` it gives for every
    ``z_i(β₂)``."""

    def _region(self, shift, width):
        """The intervals ``z_i + shift_i ± width_i`` (with a rounding cushion)."""
        w = width * (1.0 + _SAFE) + 1e-15 * (np.abs(self.z) + np.abs(shift))
        return self.z + shift - w, self.z + shift + w

    def _hull(self, iv):
        return np.minimum(iv[0], self.z), np.maximum(iv[1], self.z)

    def curvature(self, iv):
        return secant_range(self.loss, self.t, self.z, iv[0], iv[1])

    @staticmethod
    def _meet(u, v):
        return np.maximum(u[0], v[0]), np.minimum(u[1], v[1])

    def _trial(self, iv, margin):
        """The hull of ``z_i`` and ``iv``, widened by ``margin`` of its deviations."""
        A, B = self._hull(iv)
        top = max(float(np.max(self.z - A, initial=0.0)), float(np.max(B - self.z, initial=0.0)))
        f = 1e-9 * top + 1e-12 * (1.0 + np.abs(self.z))
        return (self.z - (1.0 + margin) * (self.z - A) - f,
                self.z + (1.0 + margin) * (B - self.z) + f)

    def _inside(self, new, trial):
        A, B = self._hull(new)
        ok = (A > trial[0]) & (B < trial[1])
        return bool(np.all(ok[self.used]))

    def _size(self, iv):
        return float(np.sum((iv[1] - iv[0])[self.used]))

    def _guess(self, newton):
        """Guess and verify (module docstring): intervals around ``z_i(β₁)`` whose region
        (Newton ball: the homotopy argument; ellipsoid: the argument over K) lies strictly
        inside them.  The verified region's intervals, or None."""
        guess = (self.z, self.z)
        first = True
        for margin in (0.0,) + _GUESS_MARGINS:
            trial = guess if first else self._trial(guess, margin)
            ell = self.build_ell(trial)
            if ell is None:
                return None
            if newton:
                nb = self.newton(trial, ell)
                if nb is None:
                    return None
                new = nb[2]
            else:
                new = self.ell_iv(ell)
            if not first and self._inside(new, trial):
                return new
            guess, first = new, False
        return None

    def _refine(self, valid):
        """Regions from valid intervals (each contains β₂), until they stop shrinking:
        ``((ellipsoid, Newton ball), size, intervals)``."""
        best, best_size = (None, None), np.inf
        last = np.inf
        for _ in range(_MAX_REFINE):
            ell = self.build_ell(valid)
            if ell is None:
                break
            iv = self.ell_iv(ell)
            nb = self.newton(valid, ell)
            if nb is not None:
                iv = self._meet(iv, nb[2])
            iv = self._meet(iv, valid)
            size = self._size(iv)
            if size < best_size:
                best, best_size = (ell, None if nb is None else nb[:2]), size
            valid = iv
            if size > (1.0 - _REFINE_GAIN) * last:
                break
            last = size
        return best, best_size, valid

    def solve(self, recenter=True):
        """``(expansion point, (ellipsoid, Newton ball))`` of the last valid intervals (either
        region may be None); the expansion point is this object or a re-centred copy."""
        valid = self.ball_iv()
        for newton in (True, False):
            got = self._guess(newton)
            if got is not None:
                valid = self._meet(valid, got)
                break
        best, size, valid = self._refine(valid)
        here = self
        # re-centre at the Newton ball's center β̃ (Okumura et al. Thm 6 around β̃, with
        # the exact gradient ∇P₂(β̃)), while that shrinks the intervals
        for _ in range(_RECENTER if recenter else 0):
            if best[1] is None:
                break
            rc = here.recentered(best[1][0])
            start = here._meet(valid, rc.ball_iv())
            b2, s2, v2 = rc._refine(start)
            valid = here._meet(valid, v2)
            if b2[0] is None or s2 >= (1.0 - _REFINE_GAIN) * size:
                break
            here, best, size = rc, b2, s2
        self.final_iv = valid
        return here, best


class _LinearExact(_ExactSchedule, _LinearBase):
    """Every sample's exact score interval (small problems): a region is represented by the
    intervals ``[A_i, B_i]`` it gives for ``z_i(β₂)``, and the curvature by the secant slopes
    of ``ℓ'`` between ``z_i(β₁)`` and those intervals (:func:`secant_range`)."""

    exact = True

    def __init__(self, sens):
        super().__init__(sens)
        c = self.cache
        rest = np.flatnonzero(~self.in_entries)
        live = c["live"]
        self.psi = np.vstack([self.entry_psi(np.arange(self.e_z.size)),
                              self.prob.rows[live[rest]] @ self.V])
        self.z = np.concatenate([self.e_z, c["z"][rest]])
        self.t = np.concatenate([self.e_t, c["t"][rest]])
        self.u = np.concatenate([self.e_u, c["w"][rest]])
        self.used = self.u > 0

    def build(self, iv):
        lo, _ = self.curvature(iv)
        return np.ones(self.lam.size), self.psi, self.C2 * self.u * lo

    def ell_iv(self, ell):
        L, x, RH, _ = ell
        return self._region(-0.5 * (self.psi @ x), RH * _hnorms(L, self.psi))

    def ball_iv(self):
        norms = np.sqrt(np.einsum("ij,ij->i", self.psi, self.psi))
        return self._region(-(self.psi @ (self.V.T @ self.r)), self.R_ball * norms)

    def newton(self, iv, ell):
        """The Newton ball ``‖β − (β₁ − V M⁻¹g̃)‖_{H_lo} ≤ ρ₂ + ρε`` (module docstring) for
        the secant bounds of the intervals ``iv``, ``H_lo = LLᵀ`` their lower bounds:
        ``(d₀, radius, intervals)``."""
        L = ell[0]
        C2, u, psi = self.C2, self.u, self.psi
        lo, hi = self.curvature(iv)
        mid, half = 0.5 * (lo + hi), 0.5 * (hi - lo)
        M = (psi.T * (C2 * u * mid)) @ psi
        M[np.diag_indices_from(M)] += 1.0
        try:
            d0 = linalg.cho_solve(linalg.cho_factor(M, lower=True, check_finite=False),
                                  self.g, check_finite=False)
        except linalg.LinAlgError:
            return None
        s = psi @ d0                                      # z_i(β₁ − d₀) = z_i − s_i
        err = C2 * u * half * np.abs(s)                   # |(m_i − c̄_i) s_i| ≤ err_i
        W = linalg.solve_triangular(L, psi.T, lower=True, check_finite=False)
        qh = np.sqrt(np.einsum("ij,ij->j", W, W))         # ‖Φ_i‖_{H_lo⁻¹}
        part = newton_radius(err, C2 * u * lo, qh, lambda idx: W[:, idx].T @ W[:, idx])
        rad = (part + self.rho * self.eps) * (1.0 + _SAFE) + 1e-300
        return d0, rad, self._region(-s, rad * qh)

    def build_ell(self, iv):
        return self.ellipsoid(*self.build(iv))

    def recentered(self, d0):
        """This problem expanded at ``β̃ = β₁ − V d₀`` with its exact gradient
        ``∇P₂(β̃) = β̃ + C₂ Σ w'_i ℓ'(t_i, z̃_i) Φ_i`` (every D₂ sample is held here), the
        rounding of that sum as the residual allowance."""
        rc = copy.copy(self)
        rc.z = self.z - self.psi @ d0
        b = self.V.T @ self.beta - d0
        d1 = self.C2 * self.u * self.loss.d1(self.t, rc.z)
        rc.g = b + self.psi.T @ d1
        norms = np.sqrt(np.einsum("ij,ij->i", self.psi, self.psi))
        delta = 1e-13 * (float(np.linalg.norm(b)) + float(np.abs(d1) @ norms)) + 1e-300
        rc.beta = self.V @ b
        rc.r = self.V @ (0.5 * rc.g)
        rc.rnorm = 0.5 * float(np.linalg.norm(rc.g))
        rc.eps, rc.rho = delta, 1.0
        rc.R_ball = rc.rnorm + delta
        return rc


class _LinearCheap(_LinearBase):
    """The cheap intervals of the H₀-ball ``K_τ = {‖β − β₁‖_{H₀} ≤ τ}`` (large problems).

    On ``K_τ`` every score moves by at most ``q_i τ``, ``q_i = ‖Φ_i‖_{H₀⁻¹}`` (cached), so
    ``c_i ≥ κ ℓ''_i(β₁)`` for all samples but a few (logistic: ``κ = e^{−q τ}`` over the
    samples outside the ``p`` largest ``q_i``, which are corrected one by one; squared hinge:
    ``κ = 1`` and the active samples with ``1 − t_i z_i < q_i τ`` corrected).  Hence

        H = (1 − κρ) I + κρ H₀ − κ C₂ Σ_{changed model samples} w_i ℓ''_i Φ_iΦ_iᵀ
            + Σ_{staying changed samples} C₂ w'_i c_i Φ_iΦ_iᵀ + Σ_{corrected} C₂ w_i (c_i − κℓ''_i) Φ_iΦ_iᵀ

    (hypothetical additions are dropped), diagonal up to ``O(p)`` rank-one terms in the
    eigenbasis of H₀ once the changed samples' part is formed: ``O(k p² + p³)`` per region.
    """

    exact = False

    def __init__(self, sens):
        super().__init__(sens)
        model = self.e_w0 > 0  # changed model samples (additions are dropped from H)
        sel = np.flatnonzero(model)
        p = self.lam.size
        psi = self.entry_psi(sel)
        self.m_q = np.sqrt(np.einsum("ij,ij->i", psi, psi / self.lam))
        h0w = self.e_h0w[sel]
        self.S_minus = self.C2 * ((psi.T * h0w) @ psi) if sel.size else np.zeros((p, p))
        self.neg_trace = self.C2 * float(h0w @ self.m_q ** 2)  # Σ of its q-weighted terms
        stay = self.e_u[sel] > 0  # reweighted / relabelled: their D₂ term is added back
        self.s_psi, self.s_q = psi[stay], self.m_q[stay]
        st = sel[stay]
        self.s_z, self.s_t, self.s_u = self.e_z[st], self.e_t[st], self.e_u[st]

    def _prefix_psi(self, name, ordering, k):
        """``VᵀΦ_i`` of the first ``k`` samples of a fixed ordering (kept with the model's
        cache: the same samples serve every region)."""
        c = self.cache
        have = c.get(name)
        if have is None or have.shape[0] < k:
            live = c["live"]
            k2 = min(ordering.size, max(k, 2 * (0 if have is None else have.shape[0]), 16))
            have = self.prob.rows[live[ordering[:k2]]] @ self.V
            c[name] = have
        return have[:k]

    def _more(self, lim):
        """Rows on a Dask cluster: the cache regathered (``k`` doubled, one pass each) until
        every active squared-hinge sample of ratio up to ``lim`` is in it; the cached entries
        are replaced by the larger ones (same samples first: the order is a total one)."""
        c = self.cache
        k = c["k"]
        while c.get("act_cut", np.inf) <= lim:
            k *= 2
            c.update(_cluster_cache(self.prob, self.loss, k))
        self.in_entries = np.zeros(c["z"].size, dtype=bool)
        ep = _positions(c, self._src)
        self.in_entries[ep[ep >= 0]] = True
        return c

    def _extra(self, tau):
        """(κ, positions of the samples corrected one by one, their VᵀΦ) for τ."""
        c = self.cache
        if self.loss.name == "logistic":
            ordering, name = c["order"], "order_psi"
            k = min(ordering.size, self.lam.size)
            kappa = float(np.exp(-c["q"][ordering[k]] * tau)) if k < ordering.size else 0.0
        else:
            lim = tau * (1.0 + 1e-9) + 1e-300
            if c.get("act_cut", np.inf) <= lim:  # rows on a cluster: bring back more
                c = self._more(lim)
            ordering, name = c["act"], "act_psi"
            k = int(np.searchsorted(c["act_ratio"], lim, side="right"))
            kappa = 1.0
        keep = ~self.in_entries[ordering[:k]]
        return kappa, ordering[:k][keep], self._prefix_psi(name, ordering, k)[keep]

    def build(self, tau):
        """``(H̃, κ, Weyl's lower bound of λ_min(Λ^{-½}H̃Λ^{-½}))`` valid on ``K_τ``."""
        C2, loss, c = self.C2, self.loss, self.cache
        kappa, extra, x_psi = self._extra(tau)
        a = 1.0 + kappa * self.rho * (self.lam - 1.0)
        Ht = -kappa * self.S_minus
        Ht[np.diag_indices_from(Ht)] += a
        neg = kappa * self.neg_trace
        parts_psi, parts_d = [], []
        if self.s_z.size:
            dq = self.s_q * tau
            lo, _ = curvature_range(loss, self.s_t, self.s_z - dq, self.s_z + dq)
            parts_psi.append(self.s_psi)
            parts_d.append(C2 * self.s_u * lo)
        if extra.size:
            dx = c["q"][extra] * tau
            zx = c["z"][extra]
            lx, _ = curvature_range(loss, c["t"][extra], zx - dx, zx + dx)
            d = C2 * c["w"][extra] * (lx - kappa * c["h"][extra])
            parts_psi.append(x_psi)
            parts_d.append(d)
            neg += float(np.sum(np.minimum(d, 0.0) * -c["q"][extra] ** 2))
        if parts_psi:
            P, d = np.vstack(parts_psi), np.concatenate(parts_d)
            Ht += (P.T * d) @ P
        return Ht, float(np.min(a / self.lam)) - neg

    def ell_dev(self, ell, low):
        """``sup_E ‖β − β₁‖_{H₀} ≤ ‖c − β₁‖_{H₀} + R_H / sqrt(λ_min(Λ^{-½}H̃Λ^{-½}))``
        (Weyl's bound, or the eigenvalue when that bound is poor)."""
        L, x, RH, Ht = ell
        lam = self.lam
        off = 0.5 * float(np.sqrt(np.sum(lam * x * x)))
        if low < 0.25 * float(np.min(np.diag(Ht) / lam)):
            s = 1.0 / np.sqrt(lam)
            low = float(linalg.eigvalsh(Ht * s[:, None] * s[None, :], subset_by_index=[0, 0],
                                        check_finite=False)[0]) * (1.0 - 1e-9)
        if low <= 0.0:
            return np.inf
        return (off + RH / np.sqrt(low)) * (1.0 + _SAFE)

    def ball_dev(self):
        rv = self.V.T @ self.r
        return (float(np.sqrt(np.sum(self.lam * rv * rv)))
                + self.R_ball * float(np.sqrt(self.lam[-1]))) * (1.0 + _SAFE)

    def _region(self, tau):
        Ht, low = self.build(tau)
        ell = self.factor(Ht)
        return ell, (None if ell is None else self.ell_dev(ell, low))

    def solve(self, recenter=True):
        valid = self.ball_dev()
        # guess and verify with the ellipsoid of the curvature at β₁
        ell, guess = self._region(0.0)
        if ell is not None:
            for margin in _GUESS_MARGINS:
                trial = (1.0 + margin) * guess + 1e-300
                ell, dev = self._region(trial)
                if ell is None:
                    break
                if dev < trial:
                    valid = min(valid, dev)
                    break
                guess = dev
        best, last = None, np.inf
        for _ in range(_MAX_REFINE):
            ell, dev = self._region(valid)
            if ell is None:
                break
            if best is None or ell[2] < best[2]:
                best = ell
            valid = min(valid, dev)
            if ell[2] > (1.0 - _REFINE_GAIN) * last:
                break
            last = ell[2]
        return self, (best, None)


class CurvatureRegion:
    """The curvature-aware region of a linear model's what-if: an ellipsoid
    ``‖β − c‖_H ≤ R_H`` intersected with the ball of Theorem 1 (see the module).

    Attributes
    ----------
    kind : str
        ``"curvature"``.
    """

    kind = "curvature"

    def __init__(self, sens, mode="auto", recenter=True):
        self._sens = sens
        if mode not in _MODES:
            raise ValueError(f"mode must be one of {list(_MODES)}, got {mode!r}")
        prob = sens._prob
        exact = mode in ("exact", "solve") or (mode == "auto" and _small(prob)
                                                and not getattr(prob, "rows_on_cluster", False))
        lp0 = (_LinearExact if exact else _LinearCheap)(sens)
        self._store = sens._store
        self._beta1 = lp0.beta
        lp, (self._ell, newton) = lp0.solve(recenter)
        self._lp = lp
        if self._ell is not None:
            L, x, RH, _ = self._ell
            self._L, self._RH = L, RH
            self._center = lp.beta - 0.5 * (lp.V @ x)
        self._newton = None
        if self._ell is not None and newton is not None:
            d0, rad = newton
            self._newton = (lp.beta - lp.V @ d0, rad)
        self._C1, self._C2, self._R = lp0.C1, lp0.C2, lp0.R_ball
        self._ball_dist = lp0.rnorm + lp0.R_ball

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
        qn = self._hnorms(P)
        s, w = P @ self._center, self._RH * qn
        lo, hi = np.maximum(lo, s - w), np.minimum(hi, s + w)
        if self._newton is not None:
            c, rad = self._newton
            s, w = P @ c, rad * qn
            lo, hi = np.maximum(lo, s - w), np.minimum(hi, s + w)
        return lo, hi

    def _hnorms(self, P):
        """``‖Φ(x)‖_{H⁻¹}`` (with a rounding cushion)."""
        psi = P @ self._lp.V
        u = linalg.solve_triangular(self._L, psi.T, lower=True, check_finite=False)
        return np.sqrt(np.einsum("ij,ij->j", u, u)) * (1.0 + _SAFE)

    def center_decision(self, X):
        """Scores of the best point estimate: the Newton ball's center, else the ellipsoid's,
        else the ball's."""
        P = self._map(X)
        if self._ell is None:
            return self._ball(P)[2]
        if self._newton is not None:
            return P @ self._newton[0]
        return P @ self._center

    def distance_bound(self):
        """Upper bound of ``‖β₂ − β₁‖``: ``‖c − β₁‖ + R_H`` (H ⪰ I), or the ball's."""
        b1 = self._beta1
        out = self._ball_dist
        if self._ell is None:
            return out
        out = min(out, float(np.linalg.norm(self._center - b1)) + self._RH)
        if self._newton is not None:
            c, rad = self._newton
            out = min(out, float(np.linalg.norm(c - b1)) + rad)
        return out

    def coef_bounds(self):
        """Bounds of every coordinate of β₂ (the constant feature last when fitted with an
        intercept): ``c_j ± R_H sqrt((H⁻¹)_jj)``, intersected with the ball's."""
        lp = self._lp
        m = lp.beta - lp.r
        lo, hi = m - lp.R_ball, m + lp.R_ball
        if self._ell is None:
            return lo, hi
        M = linalg.solve_triangular(self._L, lp.V.T, lower=True, check_finite=False)
        qn = np.sqrt(np.einsum("ij,ij->j", M, M)) * (1.0 + _SAFE)
        w = self._RH * qn
        lo, hi = np.maximum(lo, self._center - w), np.minimum(hi, self._center + w)
        if self._newton is not None:
            c, rad = self._newton
            lo, hi = np.maximum(lo, c - rad * qn), np.minimum(hi, c + rad * qn)
        return lo, hi


class BallRegion:
    """The ball of Theorem 1 in the region interface, computed from the what-if's store (a kernel
    what-if too large for the kernel form of the curvature region)."""

    kind = "curvature"

    def __init__(self, sens):
        self._store = sens._store
        self._C1, self._C2 = sens._C1, sens._C2(sens.n_new)
        _, rnorm = self._store.half_gradient(self._C1, self._C2)
        self._rnorm = rnorm
        self._R = _ball.certified_radius(rnorm, C1=self._C1, C2=self._C2, residual=sens._eps)

    def center_decision(self, X):
        return self._store.center_scores(np.asarray(X, dtype=np.float64), self._C1, self._C2)

    def decision_bounds(self, X):
        X = np.asarray(X, dtype=np.float64)
        s = self._store.center_scores(X, self._C1, self._C2)
        e = np.sqrt(np.maximum(self._store.sq_norms(X), 0.0)) * self._R
        return s - e, s + e

    def distance_bound(self):
        return self._rnorm + self._R

    def coef_bounds(self):
        raise ValueError("coef_bounds needs a linear model (explicit coefficients); for kernel "
                         "models use decision_bounds")


def removal_intervals(z, t, u, coef, grad, C, loss, *, Phi=None, K=None):
    """Certified intervals of every sample's score after a change, from arrays (the
    exact-gradient form used by cross-validation).

    Parameters
    ----------
    z, t, u : ndarray of shape (n,)
        Scores under β₁, encoded targets, weights in the changed problem (0: removed).
    coef : ndarray
        β₁ (shape (p,)) or its expansion coefficients over the n samples (kernel).
    grad : ndarray, shaped like ``coef``
        ``∇P₂(β₁)``, exactly (vector or coefficients).
    C : float
    loss : deltafit.losses.Loss
    Phi, K : ndarray
        The samples' feature rows (n, p), or their kernel matrix (n, n).

    Returns
    -------
    lo, hi : ndarray of shape (n,)
    """
    _check_loss(loss)
    if K is None:
        ex = _LinearExact.__new__(_LinearExact)
        p = Phi.shape[1]
        ex.V, ex.lam, ex.psi = np.eye(p), np.ones(p), np.asarray(Phi, dtype=np.float64)
        ex.beta = np.asarray(coef, dtype=np.float64)
        ex.g = np.asarray(grad, dtype=np.float64)
        ex.r = 0.5 * ex.g
        ex.rnorm = float(np.linalg.norm(ex.r))
    else:
        from deltafit.sensitivity.regions._curvature_kernel import _KernelExact

        ex = _KernelExact.__new__(_KernelExact)
        ex.K = np.asarray(K, dtype=np.float64)
        ex.alpha = np.asarray(coef, dtype=np.float64)
        ex.kdiag = np.diag(ex.K).copy()
        ex.gamma = np.asarray(grad, dtype=np.float64)
        ex.Kg = ex.K @ ex.gamma
        ex.g_sq = max(float(ex.gamma @ ex.Kg), 0.0)
        ex.rnorm = 0.5 * np.sqrt(ex.g_sq)
    ex.loss, ex.C1, ex.C2, ex.rho, ex.eps = loss, float(C), float(C), 1.0, 0.0
    ex.R_ball = ex.rnorm
    ex.z, ex.t = np.asarray(z, dtype=np.float64), np.asarray(t, dtype=np.float64)
    ex.u = np.asarray(u, dtype=np.float64)
    ex.used = ex.u > 0
    ex.solve()
    return ex.final_iv


def curvature_region(sens, mode="auto", recenter=True):
    """The curvature-aware region of a :class:`~deltafit.sensitivity.Sensitivity`'s pending
    change (logistic or squared-hinge loss; ValueError otherwise).

    Parameters
    ----------
    sens : Sensitivity
    mode : {"auto", "exact", "cheap", "solve"}
        Linear models: every training sample's exact score interval (``"exact"``), the cheap
        intervals of the stored Hessian's norm (``"cheap"``), the certified ball around a
        solution of the changed problem (``"solve"``, :mod:`~deltafit.sensitivity.regions._curvature_solve`:
        ``β₂ ∈ B(β̂ − ½∇P₂(β̂), ½‖∇P₂(β̂)‖)`` by 1-strong convexity; the exact intervals if
        its iteration does not converge), or by problem size (``n ≤ 1500`` and
        ``n p² ≤ 4·10⁶``: ``"solve"`` when ``recenter``, else ``"exact"``; larger: ``"cheap"``).
        A model whose rows live on a Dask cluster takes ``"cheap"`` (``"auto"``): its stored
        Hessian is p × p and the few samples the intervals correct come back from one pass.
    recenter : bool
        Exact intervals: re-centre (at most twice) at the Newton ball's center with the exact
        gradient there (Theorem 6 of Okumura et al. (2015)) — an O(n p) (kernel O(n²)) gradient
        each, after which the region is nearly the exact retrained model; False stops at the
        regions around β₁.  With ``mode="auto"`` a small linear problem is then answered by
        ``"solve"`` (the same certificate, Theorem 6 at a converged point, for a fraction of
        the cost).
    """
    _check_loss(sens._loss)
    if mode not in _MODES:
        raise ValueError(f"mode must be one of {list(_MODES)}, got {mode!r}")
    sens._check_model()
    prob = sens._prob
    if getattr(prob, "rows_on_cluster", False) and mode in ("exact", "solve"):
        raise ValueError(f"mode={mode!r} reads every training row on the client; this model's "
                         "rows live on a Dask cluster: use mode='cheap' or 'auto' (the cheap "
                         "intervals: the stored Hessian and a few rows gathered by one pass)")
    if not prob.kernel and prob.keeps_rows and (
            mode == "solve" or (mode == "auto" and recenter and _small(prob))):
        from deltafit.sensitivity.regions._curvature_solve import solved_region

        reg = solved_region(sens)
        if reg is not None:
            return reg
        mode = "exact"  # the iteration did not reach its rounding floor: exact intervals
    if prob.kernel:
        from deltafit.sensitivity.regions._curvature_kernel import KernelCurvatureRegion, _TooLarge

        try:
            return KernelCurvatureRegion(sens, recenter)
        except _TooLarge:
            return BallRegion(sens)
    return CurvatureRegion(sens, mode, recenter)
