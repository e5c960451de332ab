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
(``n ≤ 1500``, ``n p² ≤ 4·10⁶``) take every sample's exact interval; large ones take the cheap
intervals of the H₀-ball ``K_τ = {‖β − β₁‖_{H₀} ≤ τ}``: ``Δ_i = q_i τ`` with
``q_i = ‖Φ_i‖_{H₀⁻¹}`` (cached),
a scalar κ for the bulk of the samples and per-sample corrections only for the changed
samples and the few whose interval breaks κ — a what-if then costs ``O(k p² + p³)``, not
``O(n p²)``.  H₀ need only lie below the Hessian at β₁ (the corrections subtract the changed
samples' exact terms from it, and any SPD H₀ defines ``K_τ``), and ``q_i`` need only be
upper bounds: a large logistic problem takes ``H₀ = I + κ₀(M − I) + (exact terms) − eI`` from
the Newton state's chord matrix M (no Hessian pass; ``_curvature_linear._chord_bound``) and
``q_i`` from a single-precision product with a rigorous error bound, and ``mode="quick"``
takes ``q_i ≤ ‖Φ_i‖ / sqrt(λ_min(H₀))`` (no ``O(n p²)`` pass at all; looser).  Kernel models
work in the expansion coefficients over the training and changed points.

Where it lives.  This module holds the regions (:class:`CurvatureRegion`, registered as
``method="curvature"``, and :class:`BallRegion`), :func:`curvature_region` (which picks the
form) and :func:`removal_intervals` (the array form of cross-validation).  The curvature of a
loss over an interval, the Newton radius and the guess-verify-refine schedule are in
``_curvature_schedule``; the linear schedules (exact intervals, cheap intervals) in
``_curvature_linear``; the kernel form in ``_curvature_kernel``; the small-problem solve in
``_curvature_solve``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np
from scipy import linalg

from deltafit.sensitivity.regions import _ball
from deltafit.sensitivity.regions._curvature_kernel import (
    KernelCurvatureRegion,
    _KernelExact,
    _TooLarge,
)
from deltafit.sensitivity.regions._curvature_linear import (
    _LinearCheap,
    _LinearExact,
    small_problem,
)
from deltafit.sensitivity.regions._curvature_schedule import (
    _SAFE,
    CURVATURE_LOSSES,
    check_curvature_loss,
    secant_range,
)
from deltafit.sensitivity.regions._curvature_solve import solved_region
from deltafit.sensitivity.regions._protocol import Region

if TYPE_CHECKING:
    from deltafit.losses import Loss

__all__ = [
    "CurvatureRegion",
    "curvature_region",
    "removal_intervals",
    "CURVATURE_LOSSES",
    "secant_range",
]

_MODES = ("auto", "exact", "cheap", "solve", "quick")


class CurvatureRegion(Region):
    """The curvature-aware region of a linear model's what-if: an ellipsoid
    ``‖β − c‖_H ≤ R_H`` intersected with the ball of Theorem 1 (see the module).

    The class registered as ``method="curvature"``: :meth:`build` is :func:`curvature_region`
    (a kernel model's region is a :class:`KernelCurvatureRegion`, a small linear problem's a
    :class:`~deltafit.sensitivity.regions._curvature_solve.SolvedRegion`).

    Attributes
    ----------
    kind : str
        ``"curvature"``.
    """

    kind = "curvature"
    losses = CURVATURE_LOSSES
    auto_losses = CURVATURE_LOSSES
    requirement = f"loss in {list(CURVATURE_LOSSES)}"
    alternatives = "use method='exact' or 'sphere'"

    @classmethod
    def build(cls, sens: Any) -> Region:
        """:func:`curvature_region` of ``sens`` (mode ``"auto"``)."""
        return curvature_region(sens)

    @classmethod
    def auto_applies(cls, problem: Any) -> bool:
        """The region reads the stored rows (or the rows on a Dask cluster): a model that
        keeps none gets the ball from ``method="auto"``."""
        return bool(problem.keeps_rows or getattr(problem, "rows_on_cluster", False))

    def __init__(self, sens: Any, mode: str = "auto", recenter: bool = True) -> None:
        self._sens = sens
        if mode not in _MODES:
            raise ValueError(f"mode must be one of {list(_MODES)}, got {mode!r}")
        prob = sens._prob
        exact = mode in ("exact", "solve") or (
            mode == "auto" and small_problem(prob) and not getattr(prob, "rows_on_cluster", False)
        )
        lp0 = _LinearExact.from_sensitivity(sens) if exact else _LinearCheap(sens, mode == "quick")
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
    def radius(self) -> float | None:
        """The ellipsoid's H-radius (None: the ball alone)."""
        return None if self._ell is None else self._RH

    def _ball(self, P):
        st = self._store
        s = st.center_scores(P, self._C1, self._C2)
        e = np.sqrt(np.maximum(st.sq_norms(P), 0.0)) * self._R
        return s - e, s + e, s

    def _map(self, X):
        return self._store.map(np.asarray(X, dtype=np.float64))

    def decision_bounds(self, X: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
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

    def center_decision(self, X: np.ndarray) -> np.ndarray:
        """Scores of the best point estimate: the Newton ball's center, else the ellipsoid's,
        else the ball's."""
        P = self._map(X)
        if self._ell is None:
            return self._ball(P)[2]
        if self._newton is not None:
            return P @ self._newton[0]
        return P @ self._center

    def distance_bound(self) -> float:
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

    def coef_bounds(self) -> tuple[np.ndarray, np.ndarray]:
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


class BallRegion(Region):
    """The ball of Theorem 1 in the region interface, computed from the what-if's store (a kernel
    what-if too large for the kernel form of the curvature region)."""

    kind = "curvature"

    def __init__(self, sens: Any) -> None:
        self._store = sens._store
        self._C1, self._C2 = sens._C1, sens._C2(sens.n_new)
        _, rnorm = self._store.half_gradient(self._C1, self._C2)
        self._rnorm = rnorm
        self._R = _ball.certified_radius(rnorm, C1=self._C1, C2=self._C2, residual=sens._eps)

    def center_decision(self, X: np.ndarray) -> np.ndarray:
        return self._store.center_scores(np.asarray(X, dtype=np.float64), self._C1, self._C2)

    def decision_bounds(self, X: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        X = np.asarray(X, dtype=np.float64)
        s = self._store.center_scores(X, self._C1, self._C2)
        e = np.sqrt(np.maximum(self._store.sq_norms(X), 0.0)) * self._R
        return s - e, s + e

    def distance_bound(self) -> float:
        return self._rnorm + self._R

    def coef_bounds(self) -> tuple[np.ndarray, np.ndarray]:
        raise ValueError(
            "coef_bounds needs a linear model (explicit coefficients); for kernel "
            "models use decision_bounds"
        )


def removal_intervals(
    z: np.ndarray,
    t: np.ndarray,
    u: np.ndarray,
    coef: np.ndarray,
    grad: np.ndarray,
    C: float,
    loss: Loss,
    *,
    Phi: np.ndarray | None = None,
    K: np.ndarray | None = None,
) -> tuple[np.ndarray, np.ndarray]:
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

    Examples
    --------
    Removing samples 0, 1, 2 (weight 0): the intervals hold the scores of the retrained model,
    and here they are of rounding width:

    >>> import copy
    >>> from deltafit.sensitivity.regions import removal_intervals
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
    >>> u = np.ones(len(X))
    >>> u[:3] = 0.0
    >>> grad = beta + 0.1 * Phi.T @ (u * d1)                # ∇P₂(β₁)
    >>> lo, hi = removal_intervals(z, t, u, beta, grad, 0.1, Logistic(), Phi=Phi)
    >>> refit = copy.deepcopy(model)
    >>> _ = refit.remove([0, 1, 2])
    >>> d = refit.decision_function(X)
    >>> slack = 1e-9   # they hold for the exact optimum; the update is solved to a tolerance
    >>> bool(np.all((lo - slack <= d) & (d <= hi + slack)))
    True
    >>> bool(np.max(hi - lo) < 1e-6)
    True
    """
    check_curvature_loss(loss)
    if K is None:
        ex = _LinearExact.from_arrays(z, t, u, coef, grad, C, loss, Phi)
    else:
        ex = _KernelExact.from_arrays(z, t, u, coef, grad, C, loss, K)
    ex.solve()
    return ex.final_iv


def curvature_region(sens: Any, mode: str = "auto", recenter: bool = True) -> Region:
    """The curvature-aware region of a :class:`~deltafit.sensitivity.Sensitivity`'s pending
    change (logistic or squared-hinge loss; ValueError otherwise).

    Parameters
    ----------
    sens : Sensitivity
    mode : {"auto", "exact", "cheap", "solve", "quick"}
        Linear models: every training sample's exact score interval (``"exact"``), the cheap
        intervals of the stored Hessian's norm (``"cheap"``), the same with
        ``q_i ≤ ‖Φ_i‖ / sqrt(λ_min(H₀))`` from the row norms for a logistic Newton state
        (``"quick"``: the first what-if of a model version reads the rows once, no
        ``O(n p²)`` pass; looser, as ``λ_min`` is below the typical eigenvalue; ``"cheap"``
        where the state keeps no chord matrix), the certified ball around a
        solution of the changed problem (``"solve"``,
        :mod:`~deltafit.sensitivity.regions._curvature_solve`:
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
    check_curvature_loss(sens._loss)
    if mode not in _MODES:
        raise ValueError(f"mode must be one of {list(_MODES)}, got {mode!r}")
    sens._check_model()
    prob = sens._prob
    if getattr(prob, "rows_on_cluster", False) and mode in ("exact", "solve"):
        raise ValueError(
            f"mode={mode!r} reads every training row on the client; this model's "
            "rows live on a Dask cluster: use mode='cheap' or 'auto' (the cheap "
            "intervals: the stored Hessian and a few rows gathered by one pass)"
        )
    if (
        not prob.kernel
        and prob.keeps_rows
        and (mode == "solve" or (mode == "auto" and recenter and small_problem(prob)))
    ):
        reg = solved_region(sens)
        if reg is not None:
            return reg
        mode = "exact"  # the iteration did not reach its rounding floor: exact intervals
    if prob.kernel:
        try:
            return KernelCurvatureRegion(sens, recenter)
        except _TooLarge:
            return BallRegion(sens)
    return CurvatureRegion(sens, mode, recenter)
