"""Exact warm re-solves of the smooth losses that reuse the stored Hessian factorisation.

After a small data change the Hessian of J (ARCHITECTURE.md, "The problem") at the old solution,
factorised by the last Newton step, is nearly the Hessian at the new solution.
:func:`chord_solve` keeps that matrix ``M = I + Σ_s d_s φ_s φ_sᵀ`` (:class:`Curvature`, ``d``
by ledger slot), corrects it by a low-rank term for the rows whose curvature it must change —
the removed, added, relabelled and reweighted samples, and the rows that enter or leave the
squared hinge's margin set — and iterates chord steps ``β ← β − t M⁻¹ ∇J(β)`` (Ortega &
Rheinboldt, "Iterative solution of nonlinear equations in several variables", 1970, §7.1;
Kelley, "Iterative methods for linear and nonlinear equations", 1995, §5.4), with limited-memory
BFGS pairs on top of M (Nocedal 1980), each step costing one fused pass over the rows (the
scores ``X β`` and the gradient ``Xᵀ c`` of a cache-sized chunk at a time) plus O(p²); the first
step needs no pass (the scores, J and ∇J at β are kept from the previous solve and moved by the
changed rows).  A step that halves ‖∇J‖ is taken whole; any other passes Armijo's test on J
(evaluated from the scores, no pass).  The low-rank
term is applied by the Sherman–Morrison–Woodbury identity on the stored Cholesky factor (Hager,
"Updating the inverse of a matrix", SIAM Review 1989, eq. (1.1)) and folded into a fresh
factor once its rank passes p/4.  With the margin set corrected, a squared-hinge step is the
exact finite Newton step of Keerthi & DeCoste ("A modified finite Newton method for fast
solution of large scale linear SVMs", JMLR 2005).  The full Hessian (O(n p²)) is recomputed only
when the observed contraction ``‖∇J_{k+1}‖ / ‖∇J_k‖`` exceeds :data:`REFRESH_RATIO` (a Newton
step is then taken), or when a chord step fails its line search.

Exactness is that of :func:`deltafit.solvers.newton_primal`: the solve stops on the same rule,
``‖∇J(β)‖₂ ≤ tol · ‖∇J(0)‖₂``, with ∇J computed from scores ``X β`` computed afresh (never
accumulated), so ``grad_norm`` certifies ``‖β − β*‖ ≤ grad_norm`` (Okumura et al., KDD'15,
Thm 6) as a cold solve's does.  M only decides how fast the iteration gets there.  A solve that
stalls (a line search that fails on a fresh Hessian, or ``max_iter`` chord steps) returns None
and the caller re-solves with :func:`~deltafit.solvers.newton_primal`.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, cast

import numpy as np
import scipy.sparse as sp
from scipy import linalg
from scipy.linalg import lapack

from deltafit.losses import Loss
from deltafit.solvers._convergence import curvature_failure
from deltafit.solvers._results import SolverResult

__all__ = [
    "Curvature",
    "RowBlock",
    "Point",
    "chord_solve",
    "fresh_point",
    "point_by_slot",
    "REFRESH_RATIO",
    "Secants",
]

#: A chord step that reduces ‖∇J‖ by less than this factor triggers a fresh Hessian.
REFRESH_RATIO = 0.25
#: Below this decrease J cannot be resolved in floating point (as in ``solvers``).
_FLOOR = 1e-12
#: Bytes of dense rows a pass takes at a time (fits a core's L2 cache with room to spare).
CHUNK_BYTES = 1 << 20
#: Correction weights smaller than this are not applied (their reciprocal would overflow).
_TINY = 1e-280


def _cholesky(H: np.ndarray) -> np.ndarray:
    """The lower Cholesky factor of the SPD matrix ``H`` (LinAlgError when it is not)."""
    return linalg.cholesky(H, lower=True, check_finite=False)


def _dense(rows: Any) -> np.ndarray:
    return rows.toarray() if sp.issparse(rows) else np.asarray(rows, dtype=np.float64)


class Curvature:
    """``M = I + Σ_s d_s φ_s φ_sᵀ + U diag(δ) Uᵀ``: a Cholesky factor of the base matrix
    ``H`` and a pending low-rank correction applied by the Woodbury identity.

    Instances are never changed in place (an update that fails leaves the state's one as it
    was): :meth:`corrected` returns a new one, sharing the unchanged arrays.

    Parameters
    ----------
    H : ndarray of shape (p, p)
        The base matrix, identity included (symmetric positive definite).
    d : ndarray of shape (capacity,)
        The curvature weight of every ledger slot in M (pending corrections included).
    """

    def __init__(
        self,
        H: np.ndarray,
        d: np.ndarray,
        *,
        factor: np.ndarray | None = None,
        U: np.ndarray | None = None,
        delta: np.ndarray | None = None,
    ) -> None:
        self.H = H
        self.d = d
        self.factor = factor if factor is not None else _cholesky(H)
        p = H.shape[0]
        self.U = np.zeros((p, 0)) if U is None else U
        self.delta = np.zeros(0) if delta is None else delta
        self._woodbury()

    @property
    def p(self) -> int:
        return self.H.shape[0]

    @property
    def rank(self) -> int:
        """Rank of the pending correction."""
        return self.delta.size

    def _woodbury(self):
        if not self.rank:
            self.W = self.cap = None
            return
        self.W = linalg.cho_solve((self.factor, True), self.U, check_finite=False)
        cap = self.U.T @ self.W
        cap.flat[:: self.rank + 1] += 1.0 / self.delta
        self.cap = linalg.lu_factor(cap, check_finite=False)

    def solve(self, g: np.ndarray) -> np.ndarray:
        """``M⁻¹ g``."""
        y, info = lapack.dpotrs(self.factor, g, lower=1)  # cho_solve, without its checks
        if info:
            raise ValueError(f"dpotrs failed (info={info})")
        if self.rank:
            y -= self.W @ linalg.lu_solve(self.cap, self.U.T @ y, check_finite=False)
        return y

    def folded(self) -> Curvature:
        """The same M with the pending correction written into ``H`` (a new factor)."""
        if not self.rank:
            return self
        return Curvature(self.H + (self.U * self.delta) @ self.U.T, self.d)

    def grown(self, capacity: int) -> Curvature:
        """The same M with ``d`` padded to ``capacity`` slots."""
        if self.d.shape[0] >= capacity:
            return self
        d = np.zeros(capacity)
        d[: self.d.shape[0]] = self.d
        return Curvature(self.H, d, factor=self.factor, U=self.U, delta=self.delta)

    def taken(self, keep: np.ndarray, capacity: int) -> Curvature:
        """The same M after a ledger compaction kept the slots ``keep``."""
        d = np.zeros(capacity)
        d[: len(keep)] = self.d[keep]
        return Curvature(self.H, d, factor=self.factor, U=self.U, delta=self.delta)

    def corrected(self, rows: Any, delta: np.ndarray, slots: np.ndarray) -> Curvature:
        """M plus ``Σ_j δ_j r_j r_jᵀ`` for the rows ``rows`` at ledger slots ``slots``.

        Kept pending (Woodbury) while the total rank stays within p/4; folded into a new
        Cholesky factor of ``H`` beyond (O(k p² + p³/3)).
        """
        rows, delta, slots = _dense(rows), np.asarray(delta, float), np.asarray(slots)
        ok = np.abs(delta) > _TINY
        rows, delta, slots = rows[ok], delta[ok], slots[ok]
        if not delta.size:
            return self
        d = self.d.copy()
        np.add.at(d, slots, delta)
        U = np.hstack([self.U, rows.T])
        dl = np.concatenate([self.delta, delta])
        if dl.size <= max(4, self.p // 4):
            try:
                return Curvature(self.H, d, factor=self.factor, U=U, delta=dl)
            except (linalg.LinAlgError, ValueError):
                pass  # a singular capacitance matrix: fold instead
        H = self.H + (U * dl) @ U.T
        return Curvature(H, d)

    @classmethod
    def at(
        cls,
        blocks: Sequence[RowBlock],
        beta_scores: Sequence[np.ndarray],
        loss: Loss,
        capacity: int,
    ) -> Curvature:
        """The exact (generalised) Hessian at the point whose scores are ``beta_scores`` (one
        array per block): ``I + Σ_rows cw ℓ'' φ φᵀ``, O(n p²)."""
        p = blocks[0].X.shape[1]
        H = np.zeros((p, p))
        d = np.zeros(capacity)
        for b, z in zip(blocks, beta_scores):
            D = b.curvature(z, loss)
            rows = np.flatnonzero(D > 0.0)
            if not rows.size:
                continue
            Xa, Da = b.X[rows], D[rows]
            H += (Xa.T @ sp.diags(Da) @ Xa).toarray() if sp.issparse(Xa) else (Xa.T * Da) @ Xa
            d[b.slots[rows]] = Da
        H.flat[:: p + 1] += 1.0
        try:
            return cls(H, d)
        except linalg.LinAlgError as exc:
            kd = [
                b.curvature(z, loss) * _sq_norms(b.X)
                for b, z in zip(blocks, beta_scores)
                if b.X.shape[0]
            ]
            kappa = (
                max((float(np.max(k)) for k in kd), default=0.0),
                sum(float(np.sum(k)) for k in kd),
            )
            raise curvature_failure(exc, kappa) from exc


def _sq_norms(X: Any) -> np.ndarray:
    if sp.issparse(X):
        return np.asarray(X.multiply(X).sum(axis=1)).ravel()
    return np.einsum("ij,ij->i", X, X)


@dataclass
class RowBlock:
    """Rows of the problem after a change: ``X`` (dense or CSR), targets ``t``, ``cw = C w``
    (0: not in the problem) and the ledger slot of each row.

    ``t_before`` / ``cw_before`` are the targets and ``C w`` of the same rows before the change
    (``cw_before`` 0 for added rows); ``stored`` tells whether the rows' scores at the current
    β are known from the previous solve (stored rows) or must be computed (added rows).
    Rows outside the problem are computed with, at ``cw = 0``: their values are finite (stored
    or free rows of checked data), so they add exact zeros and no row gathering is needed.
    """

    X: Any
    t: np.ndarray
    cw: np.ndarray
    slots: np.ndarray
    t_before: np.ndarray | None = None
    cw_before: np.ndarray | None = None
    stored: bool = True

    def __post_init__(self) -> None:
        s = np.asarray(self.slots)
        run = s.size and s[-1] - s[0] + 1 == s.size and np.all(np.diff(s) == 1)
        self._at = slice(int(s[0]), int(s[-1]) + 1) if run else s

    def at(self, by_slot: np.ndarray) -> np.ndarray:
        """``by_slot[slots]`` (a view when the slots are a run)."""
        return by_slot[self._at]

    def scores(self, beta: np.ndarray) -> np.ndarray:
        return self.X @ beta

    def evaluate(
        self, beta: np.ndarray, loss: Loss, with_g0: bool = False, with_value: bool = True
    ) -> tuple[np.ndarray, float | None, np.ndarray, np.ndarray | None]:
        """Scores ``X β``, the data term ``Σ cw ℓ`` (``with_value``; else None), ``Xᵀ (cw ℓ')``
        and (``with_g0``) ``Xᵀ (cw ℓ'(t, 0))`` in one pass over the rows: dense rows are taken
        a cache-sized chunk at a time, so that the gradient product reads them from the
        cache."""
        X, t, cw = self.X, self.t, self.cw
        n, p = X.shape
        step = n if sp.issparse(X) else max(64, CHUNK_BYTES // (8 * max(p, 1)))
        z = np.empty(n)
        val = 0.0
        G = np.zeros((p, 2 if with_g0 else 1))
        for a in range(0, n, step):
            b = min(n, a + step)
            Xc = X if b - a == n else X[a:b]
            zc = Xc @ beta
            z[a:b] = zc
            tc, wc = t[a:b], cw[a:b]
            if with_value:
                val += float(wc @ loss.value(tc, zc))
            if with_g0:
                C = np.empty((b - a, 2))
                C[:, 0] = wc * loss.d1(tc, zc)
                C[:, 1] = wc * loss.d1(tc, np.zeros(b - a))
                G += Xc.T @ C
            else:
                G[:, 0] += Xc.T @ (wc * loss.d1(tc, zc))
        return z, (val if with_value else None), G[:, 0], (G[:, 1] if with_g0 else None)

    def _targets(self, before: bool) -> tuple[np.ndarray, np.ndarray]:
        """``(t, cw)``, or those before the change (set on the blocks asked for them)."""
        if before:
            return cast(np.ndarray, self.t_before), cast(np.ndarray, self.cw_before)
        return self.t, self.cw

    def value(self, z: np.ndarray, loss: Loss, before: bool = False) -> float:
        t, cw = self._targets(before)
        return float(cw @ loss.value(t, z))

    def coefficients(self, z: np.ndarray, loss: Loss, before: bool = False) -> np.ndarray:
        """``cw ℓ'(t, z)`` for every row (0 outside the problem)."""
        t, cw = self._targets(before)
        return cw * loss.d1(t, z)

    def curvature(self, z: np.ndarray, loss: Loss) -> np.ndarray:
        """``cw ℓ''(t, z)`` for every row (0 outside the problem)."""
        return self.cw * loss.d2(self.t, z)

    def restricted(self, j: np.ndarray) -> RowBlock:
        """The rows ``j`` as a block (dense rows)."""
        return RowBlock(
            _dense(self.X[j]),
            self.t[j],
            self.cw[j],
            self.slots[j],
            None if self.t_before is None else self.t_before[j],
            None if self.cw_before is None else self.cw_before[j],
            self.stored,
        )


@dataclass
class Point:
    """β with its scores by ledger slot, J, ∇J and ∇J(0) (the latter as a vector: it is
    updated for the changed rows like ∇J), for the problem they were computed on."""

    z: np.ndarray
    f: float
    grad: np.ndarray
    grad0: np.ndarray

    def grown(self, capacity: int) -> Point:
        if self.z.shape[0] >= capacity:
            return self
        z = np.zeros(capacity)
        z[: self.z.shape[0]] = self.z
        return Point(z, self.f, self.grad, self.grad0)

    def taken(self, keep: np.ndarray, capacity: int) -> Point:
        z = np.zeros(capacity)
        z[: len(keep)] = self.z[keep]
        return Point(z, self.f, self.grad, self.grad0)


def fresh_point(
    blocks: Sequence[RowBlock],
    beta: np.ndarray,
    loss: Loss,
    capacity: int | None = None,
    with_g0: bool = True,
    with_value: bool = True,
) -> tuple[list[np.ndarray], float | None, np.ndarray, np.ndarray | None]:
    """Scores (one array per block), J (``with_value``; else None), ∇J and (``with_g0``) the
    vector ∇J(0) at β computed afresh from the rows, in one pass over them."""
    Z: list[np.ndarray] = []
    f: float | None = 0.5 * float(beta @ beta)
    grad = beta.copy()
    g0 = np.zeros_like(beta) if with_g0 else None
    for b in blocks:
        z, val, g, g0b = b.evaluate(beta, loss, with_g0, with_value)
        Z.append(z)
        f = None if val is None or f is None else f + val  # None throughout without a value
        grad += g
        if g0 is not None and g0b is not None:  # with_g0
            g0 += g0b
    return Z, f, grad, g0


def point_by_slot(
    blocks: Sequence[RowBlock],
    Z: Sequence[np.ndarray],
    f: float,
    grad: np.ndarray,
    g0: np.ndarray,
    capacity: int,
) -> Point:
    """A :class:`Point` holding the scores Z at their ledger slots."""
    z = np.zeros(capacity)
    for b, zb in zip(blocks, Z):
        z[b._at] = zb
    return Point(z, float(f), grad, g0)


def _objective(blocks, beta, Z, loss):
    return sum(b.value(z, loss) for b, z in zip(blocks, Z)) + 0.5 * float(beta @ beta)


def _moved(blocks, beta, start, loss, changed):
    """Scores, J, ∇J and ∇J(0) at β for the problem after the change, from ``start`` (the
    same for the problem before it) and the changed rows only: O(k p)."""
    Z, f = [], start.f
    grad, g0 = start.grad.copy(), start.grad0.copy()
    for b, ch in zip(blocks, changed):
        z = b.at(start.z) if b.stored else b.scores(beta)
        Z.append(z)
        j = np.flatnonzero(ch)
        if not j.size:
            continue
        r = b.restricted(j)
        zj, zero = z[j], np.zeros(j.size)
        f += r.value(zj, loss) - r.value(zj, loss, before=True)
        G = r.X.T @ np.column_stack(
            [
                r.coefficients(zj, loss) - r.coefficients(zj, loss, before=True),
                r.coefficients(zero, loss) - r.coefficients(zero, loss, before=True),
            ]
        )
        grad += G[:, 0]
        g0 += G[:, 1]
    return Z, f, grad, g0


def curvature_switches(loss: Loss) -> bool:
    """Whether ℓ'' vanishes beyond the margin (the squared hinge's generalised Hessian): rows
    then enter and leave M as the margin set moves, and every chord step checks them.  With
    ℓ'' > 0 (logistic) only the changed rows are corrected (M stays a chord matrix)."""
    return float(loss.d2(np.ones(1), np.full(1, 2.0))[0]) == 0.0


def _corrections(blocks, Z, curv, loss, changed, exact=False, switches=True):
    """The rows whose weight in M must change at the scores Z: the ``changed`` rows of each
    block (a boolean mask or None) and, when the loss's curvature ``switches``, the rows whose
    curvature switched on or off (every row whose curvature differs from M's, with ``exact``).

    Returns ``(rows, delta, slots)`` stacked over the blocks, None when there are none, or
    ``"rebuild"`` when they are more than half of the rows in the problem (``exact`` only).
    """
    if not (exact or switches):
        if all(ch is None for ch in changed):
            return None
        found = []
        for b, z, ch in zip(blocks, Z, changed):
            j = np.flatnonzero(ch) if ch is not None else np.zeros(0, dtype=np.intp)
            if j.size:
                now = b.cw[j] * loss.d2(b.t[j], z[j])
                found.append((b, j, now - curv.d[b.slots[j]]))
        if not found:
            return None
        return (
            np.vstack([_dense(b.X[j]) for b, j, _ in found]),
            np.concatenate([dl for _, _, dl in found]),
            np.concatenate([b.slots[j] for b, j, _ in found]),
        )
    found, n_rows = [], 0
    for b, z, ch in zip(blocks, Z, changed):
        now = b.curvature(z, loss)
        had = b.at(curv.d)
        fix = (now != had) if exact else ((had > 0.0) != (now > 0.0))
        # a row outside the problem is corrected only when the change removed it: a free slot
        # that an added row reuses is the added row's in M (its own block holds it)
        fix &= b.cw > 0.0
        if ch is not None:
            fix |= ch
        j = np.flatnonzero(fix)
        n_rows += int(np.count_nonzero(b.cw))
        if j.size:
            found.append((b, j, now[j] - had[j]))
    n_fix = sum(j.size for _, j, _ in found)
    if not n_fix:
        return None
    if exact and 2 * n_fix > n_rows:
        return "rebuild"
    return (
        np.vstack([_dense(b.X[j]) for b, j, _ in found]),
        np.concatenate([dl for _, _, dl in found]),
        np.concatenate([b.slots[j] for b, j, _ in found]),
    )


def _updated(blocks, Z, curv, loss, capacity, changed, exact, switches=True):
    """M corrected at the scores Z (made the exact Hessian there, with ``exact``)."""
    if curv is None:
        return Curvature.at(blocks, Z, loss, capacity)
    fix = _corrections(blocks, Z, curv, loss, changed, exact, switches)
    if fix is None:
        return curv
    if isinstance(fix, str):
        return Curvature.at(blocks, Z, loss, capacity)
    try:
        return curv.corrected(*fix)
    except linalg.LinAlgError:
        # folding the correction into H cancelled to an indefinite matrix (a large row's term
        # removed again): the exact Hessian at Z, formed from the rows, has no cancellation
        return Curvature.at(blocks, Z, loss, capacity)


class Secants:
    """Limited-memory BFGS pairs on top of M (Nocedal, "Updating quasi-Newton matrices with
    limited storage", Math. Comp. 1980: the two-loop recursion with ``M⁻¹`` as the initial
    inverse): they make the model exact along the last steps, which turns the chord's linear
    rate into a superlinear one."""

    def __init__(self, size: int = 8) -> None:
        self.size = size
        self.pairs: list[tuple[np.ndarray, np.ndarray, float]] = []

    def clear(self) -> None:
        self.pairs = []

    def add(self, s: np.ndarray, y: np.ndarray) -> None:
        sy = float(s @ y)
        if sy > 1e-16 * float(np.linalg.norm(s) * np.linalg.norm(y)):  # curvature condition
            self.pairs = self.pairs[-(self.size - 1) :] + [(s, y, 1.0 / sy)]

    def direction(self, curv: Curvature, grad: np.ndarray) -> np.ndarray:
        """``−B⁻¹ ∇J`` for the L-BFGS matrix B built on M."""
        q = grad.copy()
        a = []
        for s, y, rho in reversed(self.pairs):
            ai = rho * float(s @ q)
            q -= ai * y
            a.append(ai)
        r = curv.solve(q)
        for (s, y, rho), ai in zip(self.pairs, reversed(a)):
            r += (ai - rho * float(y @ r)) * s
        return -r

    def descent(self, curv: Curvature, grad: np.ndarray) -> tuple[np.ndarray, float]:
        """``(step, slope)``: :meth:`direction` with its slope ``∇Jᵀ step``, or the plain chord
        step ``−M⁻¹ ∇J`` (pairs dropped) when the L-BFGS direction does not descend."""
        step = self.direction(curv, grad)
        slope = float(grad @ step)
        if not slope < 0.0:
            self.clear()
            step = -curv.solve(grad)
            slope = float(grad @ step)
        return step, slope


def chord_solve(
    blocks,
    beta,
    curv,
    loss,
    *,
    tol,
    max_iter,
    callback=None,
    capacity,
    changed=None,
    start=None,
    refresh_ratio=REFRESH_RATIO,
):
    """Minimise J over ``blocks`` from ``beta`` by chord steps on a corrected stored Hessian.

    Parameters
    ----------
    blocks : list of RowBlock
        The rows of the problem (those of weight 0 are ignored).
    beta : ndarray of shape (p,)
        The start (the solution before the change).
    curv : Curvature or None
        The stored matrix (None: start from the exact Hessian at ``beta``).
    loss : deltafit.losses.Loss
    tol, max_iter, callback
        As in :func:`deltafit.solvers.newton_primal` (``max_iter`` bounds the chord steps).
    capacity : int
        The ledger's capacity (the length of ``Curvature.d``).
    changed : list of (ndarray of bool or None), optional
        Per block, the rows whose target or weight changed (removed, added, relabelled,
        reweighted): M is corrected for them before the first step.
    start : Point, optional
        Scores, J, ∇J and ∇J(0) at ``beta`` for the problem before the change (what the
        previous solve left): the first step then needs no pass over the rows.  None: they
        are computed afresh.
    refresh_ratio : float
        Recompute the exact Hessian after a step that reduced ‖∇J‖ by less than this factor.

    Returns
    -------
    (SolverResult, Curvature, Point) or None
        None when the iteration stalled (the caller then re-solves with Newton's method).
        The result is certified from scores and gradient computed afresh at its β.
    """
    beta = np.array(beta, dtype=np.float64, copy=True)
    changed = [None] * len(blocks) if changed is None else changed
    if start is None:
        Z, f, grad, g0 = fresh_point(blocks, beta, loss)
        is_fresh = True
    else:
        Z, f, grad, g0 = _moved(blocks, beta, start.grown(capacity), loss, changed)
        is_fresh = False  # exact up to the rounding of the update: recomputed before it ends
    thr = tol * max(float(np.linalg.norm(g0)), np.finfo(float).tiny)
    gnorm = float(np.linalg.norm(grad))
    it = 0
    stopped = bool(callback(it, beta, gnorm, f, grad)) if callback is not None else False

    def value(f, x, Zx):  # J, computed from the scores when not known yet: O(n), no pass
        return _objective(blocks, x, Zx, loss) if f is None else f

    curv = None if curv is None else curv.grown(capacity)
    refresh = curv is None
    exact_m = False  # whether curv is the exact Hessian at the current β
    secants = Secants()
    switches = curvature_switches(loss)
    while not stopped:
        if gnorm <= thr:
            if is_fresh:
                break
            Z, f, grad, g0 = fresh_point(blocks, beta, loss)
            thr = tol * max(float(np.linalg.norm(g0)), np.finfo(float).tiny)
            gnorm, is_fresh = float(np.linalg.norm(grad)), True
            continue
        if it >= max_iter:
            break
        before = curv
        curv = _updated(blocks, Z, curv, loss, capacity, changed, refresh, switches)
        if curv is not before:
            secants.clear()  # pairs measured against another M
        exact_m, refresh, changed = refresh, False, [None] * len(blocks)
        it += 1
        step, slope = secants.descent(curv, grad)
        new = beta + step
        Zn, fn, gnew, _ = fresh_point(blocks, new, loss, with_g0=False, with_value=False)
        # a step that halves ‖∇J‖ is taken as it is (J is evaluated only when needed: the
        # other steps pass Armijo's test on J; max_iter and the fallback bound any cycling)
        if float(np.linalg.norm(gnew)) <= 0.5 * gnorm:
            pass
        elif not (
            (fn := value(fn, new, Zn)) <= (f := value(f, beta, Z)) + 1e-4 * slope
            or -slope <= _FLOOR * (abs(f) + 1.0)
        ):
            # backtrack along the step (Armijo), then recompute the scores at the point taken
            Zs = [zn - z for zn, z in zip(Zn, Z)]
            t = 0.5
            while t > 1e-18:
                ft = _objective(blocks, beta + t * step, [z + t * zs for z, zs in zip(Z, Zs)], loss)
                if ft <= f + 1e-4 * t * slope:
                    break
                t *= 0.5
            else:
                if exact_m:
                    return None  # a Newton step on the exact Hessian did not descend
                refresh = True
                continue
            new = beta + t * step
            Zn, fn, gnew, _ = fresh_point(blocks, new, loss, with_g0=False, with_value=False)
        secants.add(new - beta, gnew - grad)
        beta, Z, f, grad, is_fresh = new, Zn, fn, gnew, True
        gprev, gnorm = gnorm, float(np.linalg.norm(grad))
        refresh = gnorm > refresh_ratio * gprev
        if callback is not None:
            f = value(f, beta, Z)
            stopped = bool(callback(it, beta, gnorm, f, grad))
    converged = gnorm <= thr and is_fresh
    f = value(f, beta, Z)
    if not converged and not stopped:
        return None
    res = SolverResult(beta, gnorm, it, bool(converged), bool(stopped), float(f))
    return res, curv, point_by_slot(blocks, Z, f, grad, g0, capacity)
