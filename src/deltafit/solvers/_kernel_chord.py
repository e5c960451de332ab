"""Exact warm re-solves of the smooth losses in kernel form, reusing the last Newton factor.

The kernel Newton step of :func:`deltafit.solvers.newton_kernel` at the expansion ``α`` (scores
``z = K α``, gradient coefficients ``g = C w ∘ ℓ'(z) + α``, curvature weights
``d = C w ∘ ℓ''(z)``) solves ``(I + D K) p = −g``.  With ``S = D^{1/2}`` over the samples B of
positive curvature,

    (I + D K)⁻¹ = I − S_B (I + S K_BB S)⁻¹ S_B K,                                  (1)

so one Cholesky factor ``L`` of the SPD matrix ``M = I + S K_BB S`` (eigenvalues ≥ 1: always
well conditioned) gives the step for a triangular solve pair and the product ``K g``.  In
feature space ``(I + D K)⁻¹ g`` are the coefficients of ``H_D⁻¹ ∇J`` with
``H_D = I + Σ_i d_i φ_i φ_iᵀ`` (push-through identity), so a stale ``D`` gives a *chord*
step of the same kind as the primal one of :mod:`deltafit.solvers._chord` (Ortega &
Rheinboldt, 1970, §7.1; Kelley, 1995, §5.4): a descent direction for any ``D ≥ 0``.

:class:`KernelCurvature` keeps ``L`` (the factor the last Newton step built) and, for every
sample whose weight in ``D`` must change since — removed (``d → 0``), added (``0 → d``),
relabelled, reweighted, or, for the squared hinge, entering or leaving the margin set — a
pending rank-one term: ``D' = D + Σ_j δ_j e_j e_jᵀ`` makes ``I + D' K = (I + D K) + E Δ K_J``,
applied by the Sherman–Morrison–Woodbury identity (Hager, "Updating the inverse of a matrix",
SIAM Review 1989, eq. (1.1)) with the columns ``Y = (I + D K)⁻¹ E`` (one triangular solve
pair each, O(m²)) and the capacitance ``Δ⁻¹ + K_J Y`` (k × k).  This formulation was chosen
over deleting rows and columns of ``L`` (a sequence of rank-one Cholesky updates, O(m²) each
but sequential, not BLAS-3) and over bordering ``L`` for added samples (the trailing block's
factor would have to be recomputed whenever a sample inside the factor changes): removals,
additions, relabels and margin flips are one kind of correction, each costs one triangular solve
pair when it appears and O(n) per chord step afterwards, and ``L`` is never modified (an update
that fails leaves the state's factor as it was).  ``L`` is recomputed — the exact Hessian at
the current point, O(m³/3) — only when the pending rank passes a limit or a chord step reduces
‖∇J‖ by less than :data:`REFRESH_RATIO` (the convergence rate then says a fresh matrix pays).

Exactness is that of :func:`~deltafit.solvers.newton_kernel`: the iteration stops on the same
rule, ``sqrt(gᵀ K g) ≤ tol · sqrt(g₀ᵀ K g₀)`` (``g₀ = C w ∘ ℓ'(0)``), with ``z = K α`` and
``K g`` computed afresh (two products with K per step), so ``grad_norm`` certifies
``‖β − β*‖ ≤ grad_norm`` (Okumura et al., KDD'15, Thm 6) as a cold solve's does.  A chord
iteration that stalls returns None and the caller re-solves with Newton's method.

Everything is indexed by ledger slot (vectors over the slots ``0 … end−1``; samples outside the
problem have ``C w = 0`` and ``α = 0``), so that the kernel matrix is used in place.  The
factor refers to the kernel values of its slots: its slots (and those of the pending terms)
must not be handed to new samples while it is kept (``KernelNewtonState.reusable_slots``).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
from scipy import linalg
from scipy.linalg import lapack

from deltafit.losses import Loss
from deltafit.solvers._convergence import curvature_failure
from deltafit.solvers._results import SolverResult

__all__ = ["KernelCurvature", "KernelPoint", "kernel_chord_solve", "REFRESH_RATIO"]

#: A chord step that reduces ‖∇J‖ by less than this factor triggers a fresh factorisation.
REFRESH_RATIO = 0.25
#: Below this decrease J cannot be resolved in floating point (as in ``solvers``).
_FLOOR = 1e-12
#: Correction weights smaller than this are not applied (their reciprocal would overflow).
_TINY = 1e-280


def _cholesky(M):
    """The lower Cholesky factor of ``M`` (overwritten); ValueError when it is not SPD."""
    try:
        return linalg.cholesky(M, lower=True, overwrite_a=True, check_finite=False)
    except linalg.LinAlgError as exc:
        raise curvature_failure(exc, what="the kernel Newton system I + S K S") from exc


def _potrs(L, b):
    """``(L Lᵀ)⁻¹ b`` for the lower factor ``L`` (LAPACK's potrs, without scipy's checks)."""
    x, info = lapack.dpotrs(L, b, lower=1)
    if info:
        raise ValueError(f"dpotrs failed (info={info})")
    return x


def _grown_rows(a, capacity):
    if a.shape[0] >= capacity:
        return a
    out = np.zeros((capacity,) + a.shape[1:])
    out[: a.shape[0]] = a
    return out


class KernelCurvature:
    """The chord operator ``(I + D K)⁻¹`` of the module docstring: the Cholesky factor of
    ``I + S K_BB S`` over the slots B and pending rank-one corrections of ``D``.

    Instances are never changed in place: :meth:`corrected` returns a new one that shares
    the factor.

    Parameters
    ----------
    slots : ndarray of int, shape (m,)
        The ledger slots B of the factor, in its order.
    s : ndarray of shape (m,)
        ``sqrt(d)`` on B when the factor was computed.
    L : ndarray of shape (m, m)
        Lower Cholesky factor of ``I + S K[B, B] S``.
    d : ndarray of shape (capacity,)
        The current weight of every slot in D (pending corrections included).
    J, delta, Y, KJ : pending corrections: their slots, weights ``δ``, the columns
        ``(I + D_B K)⁻¹ e_j`` and the kernel columns ``K[:, j]`` (capacity rows each).
    """

    def __init__(
        self,
        slots: np.ndarray,
        s: np.ndarray,
        L: np.ndarray,
        d: np.ndarray,
        J: np.ndarray | None = None,
        delta: np.ndarray | None = None,
        Y: np.ndarray | None = None,
        KJ: np.ndarray | None = None,
    ) -> None:
        self.slots, self.s, self.L, self.d = slots, s, L, d
        cap = d.shape[0]
        self.J = np.zeros(0, dtype=np.intp) if J is None else J
        self.delta = np.zeros(0) if delta is None else delta
        self.Y = np.zeros((cap, 0)) if Y is None else Y
        self.KJ = np.zeros((cap, 0)) if KJ is None else KJ
        self.cap: Any = None
        if self.rank:
            C = self.KJ.T @ self.Y
            C = 0.5 * (C + C.T)  # symmetric in exact arithmetic: K (I + D K)⁻¹ is
            C.flat[:: self.rank + 1] += 1.0 / self.delta
            self.cap = linalg.lu_factor(C, check_finite=False)

    @property
    def rank(self) -> int:
        """Number of pending corrections."""
        return self.delta.size

    @property
    def held(self) -> np.ndarray:
        """The slots whose kernel values the operator refers to."""
        return np.union1d(self.slots, self.J)

    @classmethod
    def at(cls, K: np.ndarray, d: np.ndarray) -> KernelCurvature:
        """The exact operator for the weights ``d`` (by slot; O(m³/3), m = #{d > 0})."""
        B = np.flatnonzero(d > 0.0)
        s = np.sqrt(d[B])
        M = K[:, B][B] * np.outer(s, s)
        M.flat[:: B.size + 1] += 1.0
        return cls(B, s, _cholesky(M), d.copy())

    def _base_solve(self, x: np.ndarray, Kx_B: np.ndarray) -> np.ndarray:
        """``(I + D_B K)⁻¹ x`` given ``(K x)[B]`` (columns: several right-hand sides)."""
        out = np.array(x, dtype=np.float64, copy=True)
        if self.slots.size:
            s = self.s if x.ndim == 1 else self.s[:, None]
            out[self.slots] -= s * _potrs(self.L, s * Kx_B)
        return out

    def apply(self, x: np.ndarray, Kx: np.ndarray) -> np.ndarray:
        """``(I + D K)⁻¹ x`` for a vector ``x`` over slots ``0 … end−1`` and ``Kx = K x``."""
        v = self._base_solve(x, Kx[self.slots])
        if self.rank:
            end = x.shape[0]
            c = linalg.lu_solve(self.cap, self.KJ[:end].T @ v, check_finite=False)
            v -= self.Y[:end] @ c
        return v

    def corrected(
        self, K: np.ndarray, slots: Any, d_new: Any, max_rank: int
    ) -> KernelCurvature | None:
        """The operator with the weights ``d_new`` at ``slots`` (None when the pending rank
        would pass ``max_rank``: the caller then builds a fresh one)."""
        slots = np.asarray(slots, dtype=np.intp)
        d_new = np.asarray(d_new, dtype=np.float64)
        moved = d_new != self.d[slots]
        slots, d_new = slots[moved], d_new[moved]
        if not slots.size:
            return self
        d = self.d.copy()
        d[slots] = d_new
        base = np.zeros(d.shape[0])  # the factor's weights by slot (its slots in any order)
        base[self.slots] = self.s**2
        delta_new = d_new - base[slots]
        # merge with the pending terms: one column per slot (Y and K[:, j] do not depend on δ)
        J, delta = self.J, self.delta.copy()
        pos = {int(j): i for i, j in enumerate(J)}
        fresh = []
        for j, dl in zip(slots, delta_new):
            i = pos.get(int(j))
            if i is None:
                fresh.append((int(j), dl))
            else:
                delta[i] = dl
        keep = np.abs(delta) > _TINY
        fresh = [(j, dl) for j, dl in fresh if abs(dl) > _TINY]
        if int(np.count_nonzero(keep)) + len(fresh) > max_rank:
            return None
        J, delta, Y, KJ = J[keep], delta[keep], self.Y[:, keep], self.KJ[:, keep]
        if fresh:
            Jf = np.array([j for j, _ in fresh], dtype=np.intp)
            cap = d.shape[0]
            Kf = np.zeros((cap, Jf.size))
            Kf[: K.shape[0]] = K[:, Jf]
            Yf = self._base_solve(_unit_columns(Jf, cap), Kf[self.slots])
            J = np.concatenate([J, Jf])
            delta = np.concatenate([delta, [dl for _, dl in fresh]])
            Y, KJ = np.hstack([Y, Yf]), np.hstack([KJ, Kf])
        try:
            return KernelCurvature(self.slots, self.s, self.L, d, J, delta, Y, KJ)
        except (linalg.LinAlgError, ValueError):
            return None

    def with_rows(self, K: np.ndarray, rows: Any) -> KernelCurvature:
        """The same operator after the kernel values of the slots ``rows`` were (re)written
        (new samples): their rows of ``K[:, J]`` are read again.  Their rows of ``Y`` are 0
        (they are neither in B nor in J), so nothing else changes."""
        rows = np.asarray(rows, dtype=np.intp)
        if not (self.rank and rows.size):
            return self
        KJ = self.KJ.copy()
        KJ[rows] = K[:, self.J][rows]
        return KernelCurvature(self.slots, self.s, self.L, self.d, self.J, self.delta, self.Y, KJ)

    def grown(self, capacity: int) -> KernelCurvature:
        """The same operator with per-slot arrays padded to ``capacity``."""
        if self.d.shape[0] >= capacity:
            return self
        return KernelCurvature(
            self.slots,
            self.s,
            self.L,
            _grown_rows(self.d, capacity),
            self.J,
            self.delta,
            _grown_rows(self.Y, capacity),
            _grown_rows(self.KJ, capacity),
        )

    def taken(self, keep: Any, capacity: int) -> KernelCurvature | None:
        """The operator after a ledger compaction kept the slots ``keep`` (None when it
        refers to a slot not kept)."""
        keep = np.asarray(keep, dtype=np.intp)
        if not np.all(np.isin(self.held, keep)):
            return None
        where = np.full(self.d.shape[0], -1, dtype=np.intp)
        where[keep] = np.arange(keep.size)  # keep is in id order, not necessarily slot order

        def rows(a: np.ndarray) -> np.ndarray:
            out = np.zeros((capacity,) + a.shape[1:])
            out[: keep.size] = a[keep]
            return out

        return KernelCurvature(
            where[self.slots],
            self.s,
            self.L,
            rows(self.d),
            where[self.J],
            self.delta,
            rows(self.Y),
            rows(self.KJ),
        )


def _unit_columns(J: np.ndarray, n: int) -> np.ndarray:
    E = np.zeros((n, J.size))
    E[J, np.arange(J.size)] = 1.0
    return E


@dataclass
class KernelPoint:
    """The scores ``z = K α``, ``K h`` (``h = C w ∘ ℓ'(z)``) and ``K h₀`` (``h₀ = C w ∘ ℓ'(0)``)
    by slot at the current α, for the problem they were computed on."""

    z: np.ndarray
    Kh: np.ndarray
    Kh0: np.ndarray

    def grown(self, capacity: int) -> KernelPoint:
        if self.z.shape[0] >= capacity:
            return self
        return KernelPoint(*(_grown_rows(a, capacity) for a in (self.z, self.Kh, self.Kh0)))

    def taken(self, keep: np.ndarray, capacity: int) -> KernelPoint:
        out = []
        for a in (self.z, self.Kh, self.Kh0):
            b = np.zeros(capacity)
            b[: len(keep)] = a[keep]
            out.append(b)
        return KernelPoint(*out)


def fresh_kernel_point(
    K: np.ndarray, alpha: np.ndarray, t: np.ndarray, cw: np.ndarray, loss: Loss
) -> KernelPoint:
    """:class:`KernelPoint` computed from K (two products with it)."""
    zz = K @ np.column_stack([alpha, cw * loss.d1(t, np.zeros_like(t))])
    z = np.ascontiguousarray(zz[:, 0])
    return KernelPoint(z, K @ (cw * loss.d1(t, z)), np.ascontiguousarray(zz[:, 1]))


def _objective(
    alpha: np.ndarray, z: np.ndarray, t: np.ndarray, cw: np.ndarray, loss: Loss
) -> float:
    return float(cw @ loss.value(t, z)) + 0.5 * float(alpha @ z)


def curvature_switches(loss: Loss) -> bool:
    """Whether ℓ'' vanishes beyond the margin (squared hinge): samples then enter and leave D
    as the margin set moves, and every step corrects them (the step is then Newton's own)."""
    return float(loss.d2(np.ones(1), np.full(1, 2.0))[0]) == 0.0


class _Secants:
    """Limited-memory BFGS pairs on top of the chord operator, in the RKHS (Nocedal,
    "Updating quasi-Newton matrices with limited storage", Math. Comp. 1980: the two-loop
    recursion with ``(I + D K)⁻¹`` as the initial inverse), as in the primal chord solve.  A
    pair is a step ``s`` and the change ``y`` of the gradient coefficients; the inner
    products ``⟨s, q⟩ = (K s)ᵀ q`` need no product with K (``K s`` is the change of the scores,
    ``K y`` that of ``K g``)."""

    def __init__(self, size=8):
        self.size = size
        self.pairs = []

    def clear(self):
        self.pairs = []

    def add(self, s, Ks, y, Ky):
        sy = float(Ks @ y)
        if sy > 1e-16 * float(np.sqrt(max(Ks @ s, 0.0) * max(Ky @ y, 0.0))):
            self.pairs = self.pairs[-(self.size - 1) :] + [(s, Ks, y, Ky, 1.0 / sy)]

    def direction(self, curv, g, Kg):
        """``−B⁻¹ ∇J`` (coefficients) for the L-BFGS operator B built on the chord one."""
        q, Kq = g.copy(), Kg.copy()
        a = []
        for _s, Ks, y, Ky, rho in reversed(self.pairs):
            ai = rho * float(Ks @ q)
            q -= ai * y
            Kq -= ai * Ky
            a.append(ai)
        r = curv.apply(q, Kq)
        for (s, _Ks, _y, Ky, rho), ai in zip(self.pairs, reversed(a)):
            r += (ai - rho * float(Ky @ r)) * s
        return -r


def kernel_chord_solve(
    K,
    t,
    cw,
    alpha,
    loss,
    *,
    curv,
    start,
    changed,
    problem,
    tol,
    max_iter,
    callback=None,
    max_rank=64,
    refresh_ratio=REFRESH_RATIO,
):
    """Minimise ``J(α) = Σ cw ℓ(t, K α) + ½ αᵀ K α`` over slots ``0 … end−1`` by chord steps.

    Parameters
    ----------
    K : ndarray of shape (end, end)
        The kernel matrix over the slots (a view of the state's; read only).
    t, cw : ndarray of shape (end,)
        Targets and ``C w`` after the change (``cw = 0``: not in the problem; α stays 0).
    alpha : ndarray of shape (end,)
        The start: 0 for added samples; removed samples may keep their coefficients (the
        solution before the change, a point of small gradient): the first full step sets
        every coefficient outside the problem to 0, and the solve does not end before.
    loss : deltafit.losses.Loss
    curv : KernelCurvature or None
        The stored operator (None: start from the exact one at ``alpha``).
    start : KernelPoint
        ``z``, ``K h`` and ``K h₀`` at ``alpha`` for the problem after the change.
    changed : ndarray of int
        Slots whose weight in D must be corrected before the first step.
    problem : ndarray of int
        The slots of the problem in order (what the callback's vectors are indexed by).
    tol, max_iter, callback
        As in :func:`deltafit.solvers.newton_kernel`.
    max_rank : int
        Most pending corrections before a fresh factorisation.

    Returns
    -------
    (SolverResult, KernelCurvature, KernelPoint, int) or None
        The result (``coef``: α over ``problem``), the operator, the point at the solution and
        the number of fresh factorisations made; None when the iteration stalled.
    """
    alpha = np.array(alpha, dtype=np.float64, copy=True)
    out_of = cw <= 0.0
    z, Kh, Kh0 = start.z, start.Kh, start.Kh0
    h = cw * loss.d1(t, z)
    h0 = cw * loss.d1(t, np.zeros_like(t))
    thr = tol * max(float(np.sqrt(max(h0 @ Kh0, 0.0))), np.finfo(float).tiny)
    g, Kg = h + alpha, Kh + z
    gnorm = float(np.sqrt(max(g @ Kg, 0.0)))
    is_fresh = False  # start was moved by the change: recomputed before the solve ends
    n_factor = 0
    it = 0

    def report(it):
        if callback is None:
            return False
        return bool(
            callback(it, alpha[problem], gnorm, _objective(alpha, z, t, cw, loss), g[problem])
        )

    stopped = report(it)
    refresh = curv is None
    exact_m = False
    switches = curvature_switches(loss)
    secants = _Secants()
    first = True
    while not stopped:
        if gnorm <= thr and not np.any(alpha[out_of]):
            if is_fresh:
                break
            pt = fresh_kernel_point(K, alpha, t, cw, loss)
            z, Kh, Kh0 = pt.z, pt.Kh, pt.Kh0
            h = cw * loss.d1(t, z)
            thr = tol * max(float(np.sqrt(max(h0 @ Kh0, 0.0))), np.finfo(float).tiny)
            g, Kg = h + alpha, Kh + z
            gnorm, is_fresh = float(np.sqrt(max(g @ Kg, 0.0))), True
            continue
        if it >= max_iter:
            break
        d_now = cw * loss.d2(t, z)
        if not refresh:
            fix = changed if first else np.zeros(0, dtype=np.intp)
            if switches:
                flips = np.flatnonzero(((d_now > 0.0) != (curv.d[: t.size] > 0.0)) & ~out_of)
                fix = np.union1d(fix, flips)
            if fix.size:
                before = curv
                curv = curv.corrected(K, fix, d_now[fix], max_rank)
                refresh = curv is None
                if curv is not before:
                    secants.clear()  # pairs measured against another operator
        if refresh:
            d = np.zeros(max(t.size, 0 if curv is None else curv.d.shape[0]))
            d[: t.size] = d_now
            curv = KernelCurvature.at(K, d)  # eigenvalues >= 1: fails only on non-finite data
            n_factor += 1
            secants.clear()
        exact_m, refresh, first = refresh, False, False
        it += 1
        step = secants.direction(curv, g, Kg)
        # outside the problem D = 0 and g = α: the step is −α there, exactly
        step[out_of] = -alpha[out_of]
        slope = float(Kg @ step)
        if not slope < 0.0 and secants.pairs:
            secants.clear()
            step = -curv.apply(g, Kg)
            step[out_of] = -alpha[out_of]
            slope = float(Kg @ step)
        if not slope < 0.0:
            if exact_m:
                return None
            refresh = True
            continue
        new = alpha + step
        zn = K @ new
        hn = cw * loss.d1(t, zn)
        Khn = K @ hn
        gn, Kgn = hn + new, Khn + zn
        gnn = float(np.sqrt(max(gn @ Kgn, 0.0)))
        if gnn > 0.5 * gnorm:
            f = _objective(alpha, z, t, cw, loss)
            fn = _objective(new, zn, t, cw, loss)
            if not (fn <= f + 1e-4 * slope or -slope <= _FLOOR * (abs(f) + 1.0)):
                dz = zn - z
                s = 0.5
                while s > 1e-18:
                    if (
                        _objective(alpha + s * step, z + s * dz, t, cw, loss)
                        <= f + 1e-4 * s * slope
                    ):
                        break
                    s *= 0.5
                else:
                    if exact_m:
                        return None  # a Newton step on the exact matrix did not descend
                    refresh = True
                    continue
                new = alpha + s * step
                zn = K @ new
                hn = cw * loss.d1(t, zn)
                Khn = K @ hn
                gn, Kgn = hn + new, Khn + zn
                gnn = float(np.sqrt(max(gn @ Kgn, 0.0)))
        if not np.any(alpha[out_of]):  # a step that drops removed samples measures no curvature
            secants.add(new - alpha, zn - z, gn - g, Kgn - Kg)
        alpha, z, h, Kh, g, Kg, is_fresh = new, zn, hn, Khn, gn, Kgn, True
        gprev, gnorm = gnorm, gnn
        # with the margin flips corrected the squared hinge's matrix is its exact generalised
        # Hessian already: a fresh one would be the same
        refresh = gnorm > refresh_ratio * gprev and not switches
        stopped = report(it)
    converged = gnorm <= thr and is_fresh and not np.any(alpha[out_of])
    if not converged and not stopped:
        return None
    f = _objective(alpha, z, t, cw, loss)
    res = SolverResult(alpha[problem], gnorm, it, bool(converged), bool(stopped), f)
    return res, curv, KernelPoint(z, Kh, Kh0), n_factor
