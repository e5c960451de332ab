"""Exact what-ifs for the squared loss: the retrained model itself, from the stored factorisation.

For the squared loss the objective of the changed data is quadratic, so the retrained optimum is
one Newton step from the stored one:

    β₂ = β₁ − H₂⁻¹ ∇J₂(β₁),   H₂ = ∇²J₂ = I + 2C₂ Σ_{D₂} w'_i Φ_i Φ_iᵀ,
    ∇J₂(β₁) = (1 − C₂/C₁) β₁ + C₂ Δg + (C₂/C₁) ∇J₁(β₁),

with ``Δg`` the change of the data gradient over the changed samples (the vector whose half,
scaled, is ``r`` of Okumura et al., "Quick sensitivity analysis for incremental data
modification and its application to leave-one-out CV in linear classification problems",
Theorem 1; Sivan et al., "Incremental sensitivity analysis for kernelized models", Theorem 1 and
eq. 4).  The stored solution's gradient ``∇J₁(β₁)`` is not known exactly, only bounded by the
certified residual ``ε₁`` (``grad_norm_``); dropping it moves the answer by at most ``(C₂/C₁) ε₁``
(H₂ ⪰ I).  For ``C₂ = C₁`` the Hessian changes only by the changed samples,
``H₂ = H₁ + Φ_Jᵀ E Φ_J`` (``E = 2C diag(w'_j − w_j)``, a relabel changes no weight), which the
Woodbury identity (Lee et al., "Exact incremental and decremental learning for LS-SVM",
Theorem 1 / Corollaries 3–4, the identity the exact updates use) turns into a k × k system on the
stored factorisation:

* **linear models** (:class:`LinearExactRegion`): with ``M = ΦᵀWΦ + ρI = H/(2C)`` and the
  tracked ``M₁⁻¹``, ``M₂⁻¹ v = M₁⁻¹v − Z (D⁻¹ + Φ_J Z)⁻¹ Zᵀ v``, ``Z = M₁⁻¹Φ_Jᵀ``
  (``D = diag(w'_j − w_j)``): O(k·p²) for k changed samples, then O(p) per query row.
  ``C₂ ≠ C₁`` or k > p/2: one Cholesky factorisation of ``M₂`` formed from the exact
  statistics, O(p³);
* **kernel models** (:class:`KernelExactRegion`): ``H₁⁻¹Φ(x) = Φ(x) − Σ_l [G⁻¹ k(x)]_l Φ(x_l)``
  (push-through, ``G = K + ρW⁻¹`` over the stored samples of positive weight).  For a stored
  sample ``G⁻¹K[:, j] = e_j − (ρ/w_j) G⁻¹e_j``, a column of the tracked inverse: O(n) each,
  O(n²) for a hypothetical addition.  With ``U`` the coefficients of ``H₁⁻¹Φ_j`` and
  ``S = Φ_E H₁⁻¹ Φ_Eᵀ = K_{P,E}ᵀ U``, ``H₂⁻¹ Σ_j v_j Φ_j = U (v − E s)``,
  ``(I + S E) s = S v`` (a Schur complement of the bordered system): O(n·k + k³) plus
  O(n²) per addition; ``C₂ ≠ C₁`` or k > n/2: the dual system of the new data
  ``(K₂ + ρ₂W₂⁻¹) α = t₂``, O(n³).

Every answer is then refined against the exact statistics (iterative refinement: primal
``M₂ x = f`` from ``ΦᵀWΦ + ρI``, kernel the gradient of ``J₂`` from the stored kernel matrix,
O(n²)) and certified: J₂ is 1-strongly convex, so ``‖β̂₂ − β₂*‖ ≤ ‖∇J₂(β̂₂)‖``; the computed
gradient's own rounding is bounded (componentwise for linear models) and added, and so is
``4 (N + 1) ε κ ‖β̂₂‖`` (κ a bound on the condition number of H₂, N the system's size), the
error a backward-stable refit of the same data may make — so a refit lies in the reported
interval too.  The intervals are ``center ± ‖Φ(x)‖ τ`` with τ that sum: at rounding level.

A linear model whose features have very different sizes (raw units: ``diag(H₂)`` spread over
more than a factor 4) has a κ of 1e8 or more, and the Euclidean τ above then spans 1e-2 of the
decision values although the answer is accurate to 1e-14.  Its certificate follows the problem
actually solved instead, in the scaled norm ``‖S⁻¹·‖``, ``S = diag(H₂)^{-1/2}``: with a verified
``λ`` such that ``S H₂ S ⪰ λ I`` (a shifted Cholesky factorisation that runs to completion,
Rump, "Verification of positive definiteness", BIT 46 (2006)),

    |φᵀ(β̂₂ − β₂*)| ≤ ‖Sφ‖ ‖S ∇J₂(β̂₂)‖ / λ,

where ``S ∇J₂(β̂₂)`` is bounded by the computed residual plus its componentwise rounding, the
stored solution's own gradient measured the same way, and the move of a refit refined to a
componentwise backward error ``γ|H₂|`` (Skeel, "Iterative refinement implies numerical stability
for Gaussian elimination", Math. Comp. 35 (1980)), ``2γ ‖S |H₂| |β̂₂|‖``.  Coordinates that
H₂ decouples exactly (a feature that is 0 in every sample of the changed data but not in a
query row) are bounded on their own, ``|g_j| / H₂_jj``, not through λ.  At each query each of
these three parts takes the smaller of its Euclidean and scaled bounds, so an interval is
never wider than the Euclidean one; on raw features (digits restricted to 6 classes with
pixels 0–160, 0–1600 or 0–16000; wine) it is 2e-9–2e-8 of the largest decision value wide
instead of 1e-2 to 1e4.  The stored solution's componentwise gradient costs a pass over the
rows in extended precision per class; it is summed only where it can narrow an interval by
more than 1/64 (:func:`_cheap_excess`: otherwise that part is bounded by its norm ``ε₁``).
The query rows' features and norms, Euclidean and scaled, are kept for the last rows asked and
shared by the K classes of a multiclass model (one factor, so one scaling).

Nothing here writes to the model: the inverse is read through
:meth:`deltafit.models.FittedProblem.apply_inverse` / ``inverse_columns``, the statistics
through ``normal_matrix`` and ``gram``.  The parts that depend only on the changed samples and
their weights (not on the targets) are shared between the K one-vs-rest classes of a
multiclass model (one factorisation, K right-hand sides): those factorisations are in
:mod:`deltafit.sensitivity.regions._exact_factor`, the regions and their certificates here.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from deltafit.kernels import kernel_diagonal, kernel_rows
from deltafit.sensitivity.regions._exact_factor import (
    EPS,
    REFINE_STEPS,
    KernelFactor,
    LinearFactor,
)
from deltafit.sensitivity.regions._protocol import Region

__all__ = ["ExactRegion", "KernelExactRegion", "LinearExactRegion", "exact_region"]

_EPS = EPS


class ExactRegion(Region):
    """The exact retrained model of a squared-loss what-if (``method="exact"``): the class
    registered under that name; :meth:`build` gives a :class:`LinearExactRegion` or a
    :class:`KernelExactRegion`."""

    kind = "exact"
    losses = ("squared",)
    auto_losses = ("squared",)
    requirement = "loss='squared' (the retrained model in closed form)"
    alternatives = "use method='curvature' or 'sphere'"

    @classmethod
    def build(cls, sens: Any) -> Region:
        """:func:`exact_region` of ``sens``."""
        return exact_region(sens)


def exact_region(sens: Any) -> Region:
    """The exact region of a squared-loss what-if object (linear or kernel model)."""
    if sens._loss.name != "squared":
        raise ValueError("exact what-ifs need loss='squared'")
    return KernelExactRegion(sens) if sens._prob.kernel else LinearExactRegion(sens)


def _entries(sens):
    """``(slots, w0, w, c)`` of the store's entries: D₁ weight (0 when absent from D₁),
    D₂ weight (0 when absent from D₂), and the coefficient in Δg."""
    store = sens._store
    slots = np.flatnonzero(store.live[: sens._m])
    y0, y = sens._y0[slots], sens._y[slots]
    w0 = np.where(y0 == y0, sens._w0[slots], 0.0)
    w = np.where(y == y, sens._w[slots], 0.0)
    return slots, w0, w, np.array(store.c[slots])


def _shared(sens, key, build):
    """``build()``, reused from the what-if objects of the other classes of the same model
    when ``key`` (the changed samples, their weights and C₂) is the same."""
    box = getattr(sens, "_shared", None)
    if box is None:
        return build()
    hit = box.get("factor")
    if hit is not None and hit[0] == key:
        return hit[1]
    out = build()
    box["factor"] = (key, out)
    return out


def _key(*parts):
    return tuple(p.tobytes() if isinstance(p, np.ndarray) else p for p in parts)


# ------------------------------------------------------------------------ linear models
_CHUNK = 1024
# The stored solution's gradient is summed in extended precision where the platform has it (x87
# 80-bit: ε = 2⁻⁶⁴); where np.longdouble is float64 the bound below uses float64's ε instead.
_LONG = np.longdouble


def _stored_gradient(prob, beta, M1, C1):
    """A componentwise bound ``|∇J₁(β₁)| + (its rounding)`` of the stored solution's gradient
    (a vector of shape (p,)), or None where it cannot be computed here (rows on a cluster).

    With the rows: ``∇J₁ = β + 2C Φᵀ(w∘(Φβ − t))`` summed in chunks in ``np.longdouble``, its
    rounding at most ``γ (|β| + 2C |Φ|ᵀ(w∘(2|Φ||β| + 2|t|)))`` with γ in that format's ε;
    without: ``(M₁β − b₁)/ρ`` from the exact statistics
    (:meth:`~deltafit.models.FittedProblem.gradient`), its rounding at most
    ``γ (2|M₁||β| + ρ|g|)/ρ`` (``|b₁| ≤ |M₁||β| + ρ|g|``).  Kept per model version."""

    def compute():
        try:
            if prob.keeps_rows and not getattr(prob, "rows_on_cluster", False):
                A = np.asarray(prob.live)
                t = np.asarray(prob.targets, dtype=np.float64)[A].astype(_LONG)
                w = prob.sample_weights(A)
                w = None if w is None else w.astype(_LONG)
                rows = prob.rows
                bl = beta.astype(_LONG)
                g = np.zeros(beta.shape, dtype=_LONG)
                r = np.zeros_like(beta)
                ab = np.abs(beta)
                for i in range(0, A.size, _CHUNK):
                    P = np.asarray(rows[A[i : i + _CHUNK]], dtype=np.float64)
                    ti = t[i : i + _CHUNK]
                    wi = 1.0 if w is None else w[i : i + _CHUNK]
                    PL = P.astype(_LONG)
                    g += PL.T @ (wi * (PL @ bl - ti))
                    aP = np.abs(P)
                    r += aP.T @ (
                        (1.0 if w is None else w[i : i + _CHUNK].astype(np.float64))
                        * (2.0 * (aP @ ab) + 2.0 * np.abs(ti.astype(np.float64)))
                    )
                g = np.abs((bl + 2.0 * C1 * g).astype(np.float64))
                # extended-precision sums: their rounding is γ in the long format's ε, and the
                # float64 sums of the bound itself at most double it
                gam = 4.0 * (A.size + beta.size + 8) * float(np.finfo(_LONG).eps)
                out = g * (1.0 + 2.0 * _EPS) + gam * (ab + 2.0 * C1 * r)
            else:
                g = np.asarray(prob.gradient(), dtype=np.float64).reshape(-1)
                rho = 0.5 / C1
                gam = 2.0 * (beta.size + 8) * _EPS
                out = np.abs(g) + gam * (2.0 * (np.abs(M1) @ np.abs(beta)) + rho * np.abs(g)) / rho
        except (AttributeError, ValueError, TypeError):
            return None
        return out if out.shape == beta.shape and np.all(np.isfinite(out)) else None

    def guarded():
        with np.errstate(all="ignore"):
            return compute()

    return prob.cached(("whatif_stored_gradient",), guarded)


# The stored solution's componentwise gradient (an O(n·p) pass in extended precision per class)
# is summed only where it can narrow an interval by more than this fraction
_GAIN = 1.0 / 64.0


def _cheap_excess(parts, tol_s, wdec, s_rest):
    """``ρ``: a half-width (decision or coefficient bound) computed without the stored
    solution's componentwise gradient is at most ``1 + ρ`` times the one computed with it.

    Without it, that part of a row's half-width is at most ``‖φ‖ ε₁`` (``parts[0]``), and each
    other part ``i`` is at least ``‖φ‖ min(parts[i], min_j wdec_ij, min(s_R) τ_S,i)``
    (``‖Sφ‖ ≥ min(s_R) ‖φ_R‖``, ``Σ_dec |φ_j| w_j ≥ min(w) ‖φ_dec‖``); ``ρ`` is the ratio of
    the first to the largest of these lower bounds (``inf`` where it is 0)."""
    lows = []
    for i in (1, 2):
        low = float(parts[i])
        if s_rest.size:
            low = min(low, float(np.min(s_rest)) * float(tol_s[i]))
        if wdec.shape[1]:
            low = min(low, float(np.min(wdec[i])))
        lows.append(low)
    floor = max(lows)
    if not (math.isfinite(floor) and floor > 0.0 and math.isfinite(float(parts[0]))):
        return math.inf
    return float(parts[0]) / floor


def _wants_stored_gradient(parts, tol_s, wdec, s_rest):
    """Whether the stored solution's componentwise gradient may narrow a bound by more than
    ``_GAIN`` of it (:func:`_cheap_excess`)."""
    return not _cheap_excess(parts, tol_s, wdec, s_rest) <= _GAIN


class LinearExactRegion(ExactRegion):
    """The exact retrained linear model: ``β̂₂`` and a certified ``‖β̂₂ − β₂*‖ ≤ τ``.

    Built by :func:`exact_region` from a what-if object (see the module).  Cost O(k·p²) for
    ``k ≤ p/2`` changed samples with ``C₂ = C₁`` (the Woodbury capacitance on the tracked
    inverse), otherwise O(p³) (one Cholesky factorisation of the new ``ΦᵀWΦ + ρI``); a query
    row costs O(p).

    Attributes
    ----------
    kind : str
        ``"exact"``.
    coef : ndarray of shape (p,)
        ``β̂₂`` over Φ (constant feature last when fitted with an intercept).
    tol : float
        Certified bound of ``‖β̂₂ − β₂*‖``.
    solver : str
        ``"woodbury"``, ``"inverse"`` (no weight changed) or ``"cholesky"``.

    Notes
    -----
    On badly scaled features (see the module) the decision and coefficient bounds also use the
    scaled certificate ``|φᵀ(β̂₂ − β₂*)| ≤ ‖Sφ‖ τ_S``, whichever is smaller, at O(k·p² + p³)
    more once per change (p ≤ 2000; shared by the classes of a multiclass model).
    """

    kind = "exact"

    def __init__(self, sens: Any) -> None:
        prob, store = sens._prob, sens._store
        C1, C2 = sens._C1, sens._C2(sens.n_new)
        rho1, rho2 = 0.5 / C1, 0.5 / C2
        self._store = store
        beta1 = np.array(store.beta, dtype=np.float64)
        slots, w0, w, c = _entries(sens)
        Phi = store.rows_of(slots) if slots.size else np.zeros((0, beta1.size))
        Phi = np.asarray(Phi, dtype=np.float64)
        delta = w - w0
        J = delta != 0.0
        PJ, dJ = np.ascontiguousarray(Phi[J]), delta[J]
        shift = rho2 - rho1
        factor = _shared(sens, _key(C2, dJ, PJ), lambda: LinearFactor(prob, PJ, dJ, shift))
        dg = c @ Phi if slots.size else np.zeros_like(beta1)
        f = -shift * beta1 - 0.5 * dg
        p, k = beta1.size, slots.size
        gamma = 2.0 * (p + k + 8) * _EPS
        x, en = factor.refined(f, gamma)
        if not np.all(np.isfinite(x)):
            raise ValueError("exact what-if: the solution overflowed; use method='sphere'")
        self.coef = beta1 + x
        self.step = x
        self.solver = factor.kind
        self._factor = factor
        # the residual of the answer from the exact statistics, with a componentwise bound on
        # its rounding and on that of f (Δg from the scores z_j = φ_jᵀβ₁: |δz_j| ≤ γ|φ_j|ᵀ|β₁|,
        # c_j = Σ ±2w(z_j − t) over the entry's old and new sample)
        e, u = factor.residual(x, f, gamma)
        if slots.size:
            aPhi = np.abs(Phi)
            zb = aPhi @ np.abs(beta1)
            t0 = np.nan_to_num(np.abs(sens._y0[slots]))
            t1 = np.nan_to_num(np.abs(sens._y[slots]))
            uc = np.abs(c) + 2.0 * (w + w0) * (2.0 * zb + t0 + t1)
            u = u + gamma * (aPhi.T @ uc)
        u = u + gamma * abs(shift) * np.abs(beta1)
        en, un = float(np.linalg.norm(e)), float(np.linalg.norm(u))
        eps1 = (C2 / C1) * sens._eps
        kappa = factor.norm / rho2  # ≥ cond(H₂): H₂ = 2C₂ M₂ ⪰ I
        # three parts: the stored solution's gradient, this answer's residual, a refit's move
        parts = (
            eps1,
            2.0 * C2 * (en + un) * (1.0 + 4.0 * p * _EPS),
            4.0 * (p + 1) * _EPS * kappa * float(np.linalg.norm(self.coef)),
        )
        self._parts = np.array(parts, dtype=np.float64)
        self.tol = float(sum(parts))
        # the same in the scaled norm (features of very different sizes): with S = diag(s),
        # S H₂ S ⪰ λI, |φᵀ(β̂₂ − β₂*)| ≤ ‖Sφ‖ ‖S⁻¹(β̂₂ − β₂*)‖ ≤ ‖Sφ‖ ‖S ∇J₂(β̂₂)‖ / λ; a refit
        # with backward error |δH| ≤ γ|H₂|, |δb| ≤ γ|b₂| moves by at most
        # ‖Sφ‖ γ ‖S(|H₂||β| + |b₂|)‖ / λ ≤ ‖Sφ‖ 2γ ‖S |H₂||β|‖ / λ.  Each of the three parts
        # takes the smaller of its two bounds at each query (triangle inequality).
        self._pending = (prob, beta1, e, u, eps1, C1, C2)
        self._scale_cache = None
        box = getattr(sens, "_shared", None)
        self._box = {} if box is None else box

    @property
    def _scale(self):
        """``(s, τ_S)`` of the scaled certificate (τ_S: its three parts), or None; computed at
        the first query that needs it (not for :meth:`distance_bound`)."""
        if self._pending is not None:
            self._scale_cache = self._scaled_certificate(*self._pending)
            self._pending = None
        return self._scale_cache

    def _scaled_certificate(self, prob, beta1, e, u, eps1, C1, C2):
        factor, p = self._factor, self.coef.size
        floor = factor.scaled_floor(C2)
        if floor is None:
            return None
        sv, lam, dec, h = floor
        rest = ~dec
        with np.errstate(over="ignore", invalid="ignore"):
            # componentwise bounds of the three parts of ∇J₂(β̂₂) (and of a refit's move): the
            # stored solution's gradient, the residual, a refit refined to a componentwise
            # backward error γ|H₂| (Skeel)
            G = [
                None,
                2.0 * C2 * (np.abs(e) + u),
                8.0 * (p + 1) * _EPS * 2.0 * C2 * factor.abs_matvec(self.coef),
            ]
            tol_s, wdec = self._scaled_parts(G, sv, lam, dec, h, eps1)
            if _wants_stored_gradient(self._parts, tol_s, wdec, sv[rest]):
                G[0] = _stored_gradient(prob, beta1, factor.M1, C1)
                if G[0] is not None:
                    G[0] = (C2 / C1) * G[0]
                    tol_s, wdec = self._scaled_parts(G, sv, lam, dec, h, eps1)
        if not (np.all(np.isfinite(tol_s)) and np.all(np.isfinite(wdec))):
            return None
        return sv, tol_s, dec, wdec

    def _scaled_parts(self, G, sv, lam, dec, h, eps1):
        """``(τ_S, wdec)`` of the three parts: each part's scaled bound through λ and its
        decoupled coordinates' bounds ``|G_j| / H_jj`` (a part whose ``G`` is None: only its
        norm ``ε₁`` is known)."""
        rest = ~dec
        wdec, tol_s = np.empty((3, int(dec.sum()))), np.empty(3)
        with np.errstate(over="ignore", invalid="ignore"):
            for i, Gi in enumerate(G):
                if Gi is None:  # only ‖·‖ ≤ ε₁ known: ‖Sφ‖ ≤ ‖S_Rφ_R‖ + Σ_dec s_j |φ_j|
                    tol_s[i] = eps1 / lam
                    wdec[i] = sv[dec] * tol_s[i]
                else:  # decoupled coordinates exactly, the rest through λ
                    tol_s[i] = float(np.linalg.norm(sv[rest] * Gi[rest])) / lam
                    wdec[i] = Gi[dec] / h[dec]
            grow = 1.0 + 4.0 * self.coef.size * _EPS
            return tol_s * grow, wdec * grow

    def __getstate__(self):
        # computed before the region travels (to the tasks of lazy dask bounds): once, here
        _ = self._scale
        state = self.__dict__.copy()
        state["_box"] = {}  # the query rows kept for the other classes stay here
        return state

    def center_decision(self, X: np.ndarray) -> np.ndarray:
        P = self._store.map(X)
        return P @ self.coef

    def _rows_of_query(self, X):
        """``(P, ‖φ‖, scaled)`` of the query rows: their features, Euclidean norms and the
        class-independent parts of the scaled bound (``(‖S_Rφ_R‖, |φ_dec|)`` or None), kept
        for the last query rows asked and shared by the classes of a multiclass model (their
        factor, so ``S`` and ``dec``, is one) and by the queries of one region."""
        box = self._box
        hit = box.get("query")
        if hit is not None and isinstance(X, np.ndarray):
            X0, P, nE, scaled = hit
            if X0.shape == X.shape and X0.dtype == X.dtype and np.array_equal(X0, X):
                return P, nE, scaled
        P = self._store.map(X)
        nE = np.sqrt(np.maximum(self._store.sq_norms(P), 0.0))
        scaled = {}
        if isinstance(X, np.ndarray) and isinstance(P, np.ndarray):
            box["query"] = (X.copy(), P, nE, scaled)
        return P, nE, scaled

    def _scaled_norms(self, P, scaled, sv, dec):
        """``(‖S_Rφ_R‖, |φ_dec|)`` of the rows, through ``scaled`` (keyed by the factor)."""
        hit = scaled.get("factor")
        if hit is not None and hit[0] is self._factor:
            return hit[1], hit[2]
        Q = P * sv
        aPd = None
        if dec.any():
            Q[:, dec] = 0.0
            aPd = np.abs(P[:, dec])
        nS = np.sqrt(np.maximum(np.einsum("ij,ij->i", Q, Q), 0.0))
        scaled["factor"] = (self._factor, nS, aPd)
        return nS, aPd

    def _half_widths(self, P, nE=None, scaled=None):
        if nE is None:
            nE = np.sqrt(np.maximum(self._store.sq_norms(P), 0.0))
        e = nE * self.tol
        scale = self._scale
        if scale is not None:
            sv, tol_s, dec, wdec = scale
            nS, aPd = self._scaled_norms(P, {} if scaled is None else scaled, sv, dec)
            aD = np.zeros((P.shape[0], 3)) if aPd is None else aPd @ wdec.T
            mixed = sum(np.minimum(nE * self._parts[i], aD[:, i] + nS * tol_s[i]) for i in range(3))
            e = np.minimum(e, mixed * (1.0 + 4.0 * _EPS))
        return e

    def center_and_bounds(self, X: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        P, nE, scaled = self._rows_of_query(X)
        s = P @ self.coef
        e = self._half_widths(P, nE, scaled)
        return s, s - e, s + e

    def decision_bounds(self, X: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        _, lo, hi = self.center_and_bounds(X)
        return lo, hi

    def distance_bound(self) -> float:
        return float(np.linalg.norm(self.step)) * (1.0 + 4.0 * self.step.size * _EPS) + self.tol

    def coef_bounds(self) -> tuple[np.ndarray, np.ndarray]:
        e = np.full(self.coef.shape, self.tol)
        scale = self._scale
        if scale is not None:  # |β̂_j − β*_j| ≤ s_j τ_S (decoupled: G_j / H_jj), part by part
            sv, tol_s, dec, wdec = scale
            mixed = 0.0
            for i in range(3):
                b = sv * tol_s[i]
                b[dec] = wdec[i]
                mixed = mixed + np.minimum(self._parts[i], b)
            e = np.minimum(e, mixed * (1.0 + 4.0 * _EPS))
        return self.coef - e, self.coef + e


class KernelExactRegion(ExactRegion):
    """The exact retrained kernel model: its expansion ``β̂₂ = Σ_P a_i Φ(x_i)`` over the stored
    samples and the changed ones, and a certified RKHS bound ``‖β̂₂ − β₂*‖ ≤ τ``.

    Built by :func:`exact_region` (see the module).  Cost O(n·k + k³) for k ≤ n/2 changed
    stored samples with ``C₂ = C₁``, O(n²) more per hypothetical addition, O(n²) for the
    certificate (the gradient of J₂ from the stored kernel matrix); otherwise O(n³) (the new
    dual system).  A query row costs O(n) kernel evaluations.

    Attributes
    ----------
    kind : str
        ``"exact"``.
    tol : float
    solver : str
        ``"woodbury"`` or ``"dual"``.
    """

    kind = "exact"

    def __init__(self, sens: Any) -> None:
        prob, store = sens._prob, sens._store
        C1, C2 = sens._C1, sens._C2(sens.n_new)
        slots, w0, w, c = _entries(sens)
        ids = sens._ids[slots]
        y0, y = sens._y0[slots], sens._y[slots]
        model = y0 == y0
        pts = store.pts[slots]
        factor = _shared(
            sens,
            _key(C2, slots, ids, w0, w, pts),
            lambda: KernelFactor(prob, store, slots, w0, w, ids, model, C1, C2),
        )
        self.solver = factor.kind
        self._f = self._factor = factor
        L, nL = factor.L, factor.L.size
        alphaL = np.asarray(prob.alpha, dtype=np.float64)[L]
        t2 = np.zeros(factor.nP)
        t2[:nL] = np.asarray(prob.targets, dtype=np.float64)[L]
        t2[factor.posE] = np.where(y == y, y, 0.0)
        a = factor.first(alphaL, t2, c)
        best, prev = None, None
        for _ in range(REFINE_STEPS):
            g, gn, floor, z = self._gradient(a, t2)
            if not (math.isfinite(gn) and math.isfinite(floor)):
                break
            if best is None or gn < best[1]:
                best = (a, gn, floor, z)
            if gn <= floor or (prev is not None and gn >= 0.5 * prev):
                break
            prev = gn
            a = factor.newton(a, g, t2)
        if best is None:
            raise ValueError("exact what-if: the solution overflowed; use method='sphere'")
        a, gn, floor, z = best
        self.a = a
        bn = math.sqrt(max(float(a @ z), 0.0))
        self.tol = float(gn + floor + 4.0 * (factor.nP + 1) * _EPS * factor.kappa * bn)
        d = a.copy()
        d[:nL] -= alphaL
        self._step = math.sqrt(max(float(d @ (factor.KPP @ d)), 0.0))

    def _gradient(self, a, t2):
        """Coefficients of ∇J₂ at ``Σ a_i Φ_i``, its RKHS norm, a bound on that norm's
        rounding error, and the scores ``K a``."""
        f = self._f
        n = f.nP
        z = f.KPP @ a
        twoC = 2.0 * f.C2
        g = a + twoC * f.w2 * (z - t2)
        gn = math.sqrt(max(float(g @ (f.KPP @ g)), 0.0))
        gam = 2.0 * (n + 8) * _EPS
        # |K_ij| ≤ √(K_ii K_jj): the rounding of g and of gᵀKg, in the RKHS norm
        ka = f.sdiag * float(f.sdiag @ np.abs(a))
        dg = gam * (np.abs(a) + twoC * f.w2 * (ka + np.abs(t2) + np.abs(z)))
        floor = float(f.sdiag @ dg) + math.sqrt(gam) * float(f.sdiag @ np.abs(g))
        return g, gn, floor, z

    def center_decision(self, X: np.ndarray) -> np.ndarray:
        return kernel_rows(X, self._f.points, **self._f.kw) @ self.a

    def center_and_bounds(self, X: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        s = self.center_decision(X)
        e = np.sqrt(np.maximum(kernel_diagonal(X, **self._f.kw), 0.0)) * self.tol
        return s, s - e, s + e

    def decision_bounds(self, X: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        _, lo, hi = self.center_and_bounds(X)
        return lo, hi

    def distance_bound(self) -> float:
        return self._step * (1.0 + 4.0 * self._f.nP * _EPS) + self.tol

    def coef_bounds(self) -> tuple[np.ndarray, np.ndarray]:
        raise ValueError("coef_bounds needs a linear model (explicit coefficients)")
