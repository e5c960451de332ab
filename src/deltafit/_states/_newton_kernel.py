"""The exact state of the kernel model for the smooth losses (logistic, squared hinge):
``KernelNewtonState``, warm-started re-solves.

For the logistic and squared-hinge losses no finite closed-form update exists; the exact model
after a data change is obtained by re-solving the canonical problem, warm-started from the
current solution (new samples start at α = 0).  The kernel matrix over the training rows is
kept for that purpose, with the factor of the last kernel Newton system: chord steps on it
(:mod:`~deltafit.solvers._kernel_chord`) re-solve after a change, stopping on the same
certified gradient norm as a fit.  The kernel hinge state
(:class:`~deltafit._states._hinge.KernelHingeState`) builds on this one.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import ClassVar

import numpy as np
from scipy import linalg

from deltafit._linalg._gram import GramCache
from deltafit._states._newton_common import check_change_curvature, padded_at
from deltafit._states._protocol import (
    ModelState,
    check_symmetric,
    checked,
    grown,
    needs_result,
    padded,
    taken,
)
from deltafit._states._saved_checks import check_kernel_rows, check_residual
from deltafit.solvers import newton_kernel
from deltafit.solvers._kernel_chord import (
    KernelCurvature,
    KernelPoint,
    fresh_kernel_point,
    kernel_chord_solve,
)

__all__ = ["KernelNewtonState"]


class KernelNewtonState(ModelState):
    """α over ledger slots, re-solved after each change by chord steps on the stored factor
    of the last kernel Newton system (:mod:`~deltafit.solvers._kernel_chord`).

    The factor of ``I + S K S`` that the last Newton step built is kept with pending
    rank-one corrections (removed, added, relabelled, reweighted samples; squared-hinge
    margin flips) applied by the Woodbury identity; each chord step costs two products with
    K and one triangular solve pair.  A stalled chord iteration falls back to
    :func:`~deltafit.solvers.newton_kernel` from where it is.  A subclass for a non-smooth
    loss (the hinge's dual QP) re-solves warm-started with its own :meth:`solve` instead.

    Attributes
    ----------
    curv : KernelCurvature or None
        The chord operator (None: not formed yet, e.g. after loading a model file: the next
        update starts from the exact one at α).
    point : KernelPoint or None
        ``K α``, ``K h`` and ``K h₀`` by slot at α (None: computed at the next update).
    n_factorizations : int
        Full factorisations of the kernel Newton system made by updates since the fit
        (chord refreshes and the Newton iterations of fallbacks).
    """

    kind, kernel = "kernel_newton", True
    loss_names: ClassVar[tuple[str, ...]] = ("logistic", "squared_hinge")
    warm_per_sample = True
    curv = point = None
    n_factorizations = 0

    def fit(self, K, y, capacity, coef0=None, w=None):
        self.gram = GramCache(K, capacity)
        self._init_slots(capacity)
        n = K.shape[0]
        A = np.arange(n)
        if not self._chord:
            self.commit(A, self.solve(A, y, coef0, w))
            return self
        self._solve_keeping(A, np.asarray(y, dtype=np.float64), coef0, w)
        return self

    @property
    def _chord(self):
        """Whether updates take chord steps (the smooth losses' Newton systems)."""
        return bool(self.loss.smooth)

    def _init_slots(self, capacity):
        self.alpha = np.zeros(capacity)

    @property
    def capacity(self):
        return self.alpha.shape[0]

    def solve(self, A, y, coef0=None, w=None):
        o = self.opts
        return newton_kernel(
            self.gram.sub(A),
            y,
            o.loss,
            o.C,
            sample_weight=w,
            coef0=coef0,
            tol=o.tol,
            max_iter=o.max_iter,
            callback=o.callback,
        )

    def _solve_keeping(self, A, t, coef0, w):
        """Newton on the samples at slots ``A``; keeps its last factor and the point."""
        o = self.opts
        res, fac = newton_kernel(
            self.gram.sub(A),
            t,
            o.loss,
            o.C,
            sample_weight=w,
            coef0=coef0,
            tol=o.tol,
            max_iter=o.max_iter,
            callback=o.callback,
            keep_factor=True,
        )
        self.commit(A, res)
        cap = self.capacity
        self.curv = self.point = None
        if fac is not None:
            act, s, L = fac
            d = np.zeros(cap)
            d[A[act]] = s * s
            self.curv = KernelCurvature(A[act], s, L, d)
        end = int(A[-1]) + 1 if A.size else 0
        tt, cw = np.zeros(end), np.zeros(end)
        tt[A] = t
        cw[A] = self.C * (1.0 if w is None else np.asarray(w, dtype=np.float64))
        pt = fresh_kernel_point(self.gram.K[:end, :end], self.alpha[:end], tt, cw, self.loss)
        self.point = pt.grown(cap)
        return res

    def commit(self, A, res):
        self.alpha, self.result = padded_at(A, res.coef, self.capacity), res

    def _warm_source(self):
        """The per-slot values a re-solve warm-starts from."""
        return self.alpha

    def counters(self):
        if not self._chord:
            return super().counters()
        return {
            "n_refactor": int(self.n_factorizations),
            "n_folds": -1,
            "pending_rank": -1 if self.curv is None else int(self.curv.rank),
        }

    def reusable_slots(self):
        """Removed slots not referred to by the stored factor (None: all of them)."""
        if self.curv is None:
            return None
        return np.setdiff1d(np.arange(self.capacity), self.curv.held)

    def apply_change(self, change):
        if self._chord:
            self._check_curvature(change)
        if change.add_slots is not None:
            self.ensure_capacity(change.ledger.capacity)
            self.gram.write(change.add_slots, change.K_cross, change.K_new)
        A, t = change.slots_after()
        start = self._warm_source().copy()
        if change.add_slots is not None:
            start[change.add_slots] = 0.0  # new samples start at 0
        if not self._chord:
            self.commit(A, self.solve(A, t, start[A], change.weights_at(A)))
            return
        self._chord_change(change, A, t, start)

    def _check_curvature(self, change):
        """Refuse added or reweighted samples whose ``C·w·ℓ''·k(x, x)`` is beyond double
        precision (see :func:`check_change_curvature`)."""
        sq_add = sq_rw = None
        if change.add_slots is not None and len(change.add_slots):
            sq_add = np.diagonal(np.asarray(change.K_new))
        if change.reweight_slots is not None and len(change.reweight_slots):
            sl = np.asarray(change.reweight_slots, dtype=np.intp)
            sq_rw = np.asarray(self.gram.K[sl, sl], dtype=np.float64)
        if sq_add is not None or sq_rw is not None:
            check_change_curvature(change, self.C, self.loss, sq_add, sq_rw)

    def _chord_change(self, change, A, t_after, start):
        o, led = self.opts, change.ledger
        loss = o.loss
        end = max(int(led.end), int(A[-1]) + 1 if A.size else 0)
        K = self.gram.K[:end, :end]
        t = np.zeros(end)
        t[A] = t_after
        w = change.weights_at(A)
        cw = np.zeros(end)
        cw[A] = self.C * (1.0 if w is None else w)
        alpha = np.zeros(end)
        alpha[A] = start[A]
        if change.remove_slots is not None:
            # a removed sample keeps its coefficient at the start (β unchanged: ∇J is just its
            # term, small); the first step sets it to 0 exactly (C w = 0 there)
            alpha[change.remove_slots] = self.alpha[change.remove_slots]
        adds = (
            np.zeros(0, dtype=np.intp)
            if change.add_slots is None
            else np.asarray(change.add_slots, dtype=np.intp)
        )
        rem = (
            np.zeros(0, dtype=np.intp)
            if change.remove_slots is None
            else np.asarray(change.remove_slots, dtype=np.intp)
        )
        changed = [adds, rem]
        for sl in (change.relabel_slots, change.reweight_slots):
            if sl is not None:
                changed.append(np.asarray(sl, dtype=np.intp))
        changed = np.unique(np.concatenate(changed))
        point = self._moved_point(K, change, alpha, t, cw, end, adds, rem, changed)
        curv = None if self.curv is None else self.curv.grown(self.capacity).with_rows(K, adds)
        max_rank = max(self.max_rank, end // 8)
        out = kernel_chord_solve(
            K,
            t,
            cw,
            alpha,
            loss,
            curv=curv,
            start=point,
            changed=changed,
            problem=A,
            tol=o.tol,
            max_iter=o.max_iter,
            callback=o.callback,
            max_rank=max_rank,
        )
        if out is None:  # the chord iteration stalled: Newton from where it is
            res = self._solve_keeping(A, t_after, start[A], w)
            self.n_factorizations += int(res.n_iter)
            return
        res, curv, pt, n_factor = out
        self.commit(A, res)
        self.curv = None if curv is None else curv.grown(self.capacity)
        self.point = pt.grown(self.capacity)
        self.n_factorizations += n_factor

    def _moved_point(self, K, change, alpha, t, cw, end, adds, rem, changed):
        """``K α``, ``K h``, ``K h₀`` at the start for the problem after the change: from the
        stored point and the changed samples' kernel columns (O(n k)); afresh (two products
        with K) without a stored point."""
        loss = self.loss
        if self.point is None:
            return fresh_kernel_point(K, alpha, t, cw, loss)
        led = change.ledger
        pt = self.point.grown(self.capacity)
        z, Kh, Kh0 = pt.z[:end].copy(), pt.Kh[:end].copy(), pt.Kh0[:end].copy()
        if adds.size:
            z[adds] = K[:, adds].T @ alpha
        # the targets and C w of the changed samples before the change (added ones: absent)
        old = changed[~np.isin(changed, adds)]
        t_old = np.array(led.y[old], dtype=np.float64)
        cw_old = self.C * np.where(led.active[old], led.w[old], 0.0)
        zero = np.zeros(changed.size)
        h0_new = cw[changed] * loss.d1(t[changed], zero)
        h0_old = np.zeros(changed.size)
        io = np.searchsorted(changed, old)
        h0_old[io] = cw_old * loss.d1(t_old, zero[io])
        Kh0 += K[:, changed] @ (h0_new - h0_old)
        if adds.size:
            Kh0[adds] = K[:, adds].T @ (cw * loss.d1(t, np.zeros(end)))
        # β is unchanged (removed samples keep their coefficients): the stored samples'
        # scores did not move
        h_new = cw[changed] * loss.d1(t[changed], z[changed])
        h_old = np.zeros(changed.size)
        h_old[io] = cw_old * loss.d1(t_old, z[old])
        Kh += K[:, changed] @ (h_new - h_old)
        if adds.size:
            Kh[adds] = K[:, adds].T @ (cw * loss.d1(t, z))
        return KernelPoint(z, Kh, Kh0)

    def warm_coef(self, slots):
        return self._warm_source()[slots].copy()

    def ensure_capacity(self, cap):
        if cap > self.capacity:
            self.gram.ensure_capacity(cap)
            self.alpha = grown(self.alpha, cap)
            if self.curv is not None:
                self.curv = self.curv.grown(cap)
            if self.point is not None:
                self.point = self.point.grown(cap)

    def take(self, keep, capacity):
        self.gram.take(keep, capacity)
        self.alpha = taken(self.alpha, keep, capacity)
        if self.curv is not None:
            self.curv = self.curv.taken(keep, capacity)
        if self.point is not None:
            self.point = self.point.taken(keep, capacity)

    def to_arrays(self, keep):
        out = {"state_K": self.gram.sub(keep), "state_alpha": self.alpha[keep]}
        if self._chord and self.curv is not None and self.point is not None:
            out.update(self._chord_arrays(np.asarray(keep, dtype=np.intp)))
        return out

    def _chord_arrays(self, keep):
        """The operator and the point over the live samples ``keep``: the factor embedded at
        their positions and, per sample, its factor position, ``s``, weight in D, pending
        position and δ, ``z``, ``K h``, ``K h₀``.  A factor that still holds removed samples
        (cancelled by pending terms) is written as the factor of the same base matrix over
        the live ones (O(m³), paid only by such a save)."""
        cv, pt = self.curv, self.point
        n = keep.size
        pos = np.full(self.capacity, -1, dtype=np.intp)
        pos[keep] = np.arange(n)
        slots, s, L = cv.slots, cv.s, cv.L
        live = pos[slots] >= 0
        if not np.all(live):
            slots, s = slots[live], s[live]
            M = self.gram.sub(slots) * np.outer(s, s)
            M.flat[:: slots.size + 1] += 1.0
            L = linalg.cholesky(M, lower=True, overwrite_a=True, check_finite=False)
        pending = pos[cv.J] >= 0  # removed samples' terms cancel their base weight: dropped
        F = np.zeros((n, n))
        pb = pos[slots]
        F[np.ix_(pb, pb)] = L
        C = np.zeros((n, 8))
        C[pb, 0] = np.arange(1, slots.size + 1)
        C[pb, 1] = s
        C[:, 2] = cv.d[keep]
        pj = pos[cv.J[pending]]
        C[pj, 3] = np.arange(1, pj.size + 1)
        C[pj, 4] = cv.delta[pending]
        C[:, 5], C[:, 6], C[:, 7] = pt.z[keep], pt.Kh[keep], pt.Kh0[keep]
        return {"state_factor": F, "state_chord": C}

    @classmethod
    def saved_shapes(cls, n, p):
        return {"state_K": (n, n), "state_alpha": (n,)}

    @classmethod
    def optional_shapes(cls, n, p):
        """The kept factor (embedded over the live samples) and the per-sample chord data
        (a file without them, or a hinge state's, loads; the next update then factorises)."""
        return {"state_factor": (n, n), "state_chord": (n, 8)}

    @classmethod
    def from_arrays(cls, arrays, opts, *, y, capacity, max_rank=64, result=None):
        """The state of a model file, with its stored factor and point when the file holds
        them (else the first update computes them: one factorisation)."""
        needs_result(result, cls.kind)
        n = y.shape[0]
        K, alpha = checked(arrays, KernelNewtonState.saved_shapes(n, None), "kernel state")
        check_symmetric(K, "kernel matrix")
        st = cls(opts, max_rank)
        st.gram = GramCache(K, capacity)
        st.alpha = padded(alpha, capacity)
        result.coef = alpha
        st.result = result
        shapes = cls.optional_shapes(n, None)
        if st._chord and all(name in arrays for name in shapes):
            F, C = checked(arrays, shapes, "stored kernel factor")
            st.curv, st.point = _chord_from_arrays(st, K, F, C, capacity)
        return st

    # ------------------------------------------------------- load-time checks
    def check_saved_solution(self, arrays: dict, solver: dict | None = None) -> None:
        """The gradient ``α + C w ∘ ℓ'(y, Kα)`` at the saved α has the RKHS norm
        (``sqrt(gᵀKg)``) the saved certificate ``solver["grad_norm"]`` states (to ``1e-6`` of
        ``sqrt(αᵀKα) + grad_norm``).  See :meth:`ModelState.check_saved_solution`."""
        if solver is None:
            raise ValueError(
                f"corrupt model file: the {self.kind} state's solver diagnostics are missing"
            )
        y, C, saved = arrays["ledger_y"], self.C, float(solver["grad_norm"])
        w = arrays.get("ledger_w", 1.0)  # C·w_i per sample
        K, alpha = arrays["state_K"], arrays["state_alpha"]
        g = alpha + C * w * self.loss.d1(y, K @ alpha)
        size = math.sqrt(max(float(alpha @ K @ alpha), 0.0))
        gnorm = math.sqrt(max(float(g @ K @ g), 0.0))
        check_residual(max(gnorm - saved, 0.0), size + saved)

    def check_saved_rows(
        self,
        arrays: dict,
        *,
        first: bool = True,
        hinge: dict | None = None,
        kernel: Callable | None = None,
    ) -> None:
        """The stored kernel matrix against the fitted ``kernel`` of the stored rows
        (:func:`~deltafit._states._saved_checks.check_kernel_rows`).  See
        :meth:`ModelState.check_saved_rows`."""
        if kernel is None:
            raise TypeError(
                "a kernel state's stored rows are checked against its fitted kernel: pass kernel"
            )
        if arrays.get("ledger_X") is not None:
            check_kernel_rows(arrays, kernel, first)


def _positions(col, what):
    """Sample positions ordered by the 1-based order numbers in ``col`` (0: none)."""
    at = np.flatnonzero(col)
    order = col[at]
    if not np.array_equal(np.sort(order), np.arange(1, at.size + 1)):
        raise ValueError(f"corrupt model file: the {what} order is not a permutation")
    return at[np.argsort(order)]


def _chord_from_arrays(st, K, F, C, capacity):
    """The operator and point of :meth:`KernelNewtonState._chord_arrays`, checked."""
    if not (np.all(np.isfinite(F)) and np.all(np.isfinite(C))):
        raise ValueError("corrupt model file: the stored kernel factor is not finite")
    B = _positions(C[:, 0], "factor")
    J = _positions(C[:, 3], "pending correction")
    s, d = C[B, 1].copy(), C[:, 2]
    L = np.asfortranarray(F[np.ix_(B, B)])
    if np.any(s <= 0.0) or np.any(d < 0.0) or np.any(np.triu(L, 1)) or np.any(np.diag(L) <= 0.0):
        raise ValueError(
            "corrupt model file: the stored kernel factor is not a Cholesky "
            "factor of positive weights"
        )
    M = K[np.ix_(B, B)] * np.outer(s, s)
    M.flat[:: B.size + 1] += 1.0
    v = np.random.default_rng(0).standard_normal(B.size)  # a probe: O(m²), not L Lᵀ (O(m³))
    Mv = M @ v
    if B.size and not np.allclose(
        L @ (L.T @ v), Mv, rtol=0.0, atol=1e-8 * float(np.abs(M).sum(axis=1).max())
    ):
        raise ValueError(
            "corrupt model file: the stored kernel factor does not match the kernel matrix"
        )
    dd = padded(d, capacity)
    curv = KernelCurvature(B, s, L, dd)
    if J.size:
        delta = C[J, 4]
        base = np.zeros(capacity)
        base[B] = s * s
        target = base[J] + delta
        # the pending terms, re-applied in their order: the same operator
        curv = KernelCurvature(B, s, L, base.copy()).corrected(K, J, target, max_rank=J.size)
        if curv is None or not np.array_equal(curv.J, J):
            raise ValueError("corrupt model file: the stored pending corrections are invalid")
        curv = KernelCurvature(B, s, L, dd, curv.J, curv.delta, curv.Y, curv.KJ)
    point = KernelPoint(
        padded(C[:, 5], capacity), padded(C[:, 6], capacity), padded(C[:, 7], capacity)
    )
    return curv, point
