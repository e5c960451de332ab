"""The exact state of the linear model for the smooth losses (logistic, squared hinge):
``PrimalNewtonState``, warm-started re-solves.

For the logistic and squared-hinge losses no finite closed-form update exists; the exact model
after a data change is obtained by re-solving the canonical problem, warm-started from the
current solution.  The training rows are kept for that purpose.

The re-solve reuses the Hessian factorised by the last Newton step
(:mod:`~deltafit.solvers._chord`): corrected by a low-rank term for the changed rows, it
drives chord steps of one gradient pass each, stopping on the same certified gradient norm as
a fit.  Sparse rows beyond ``solvers.HESSIAN_FREE_FEATURES`` features form no Hessian: there the
re-solve is warm-started Newton with conjugate-gradient steps, as in a fit.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import scipy.sparse as sp
from scipy import linalg

from deltafit._linalg._spd import _symmetric
from deltafit._states._newton_common import check_change_curvature
from deltafit._states._protocol import (
    ModelState,
    check_symmetric,
    checked,
    needs_result,
    padded,
    saved_coef,
)
from deltafit._states._saved_checks import EPS, abs_rows, check_residual, refuse_rows, row_blocks
from deltafit.solvers import CHORD_FEATURES, HESSIAN_FREE_FEATURES, NewtonRows, newton_primal
from deltafit.solvers._chord import (
    Curvature,
    Point,
    RowBlock,
    chord_solve,
    fresh_point,
    point_by_slot,
)

__all__ = ["PrimalNewtonState"]


class PrimalNewtonState(ModelState):
    """β for explicit features, re-solved after each change by chord steps on the stored
    Hessian (warm-started Newton where no Hessian is formed).

    Attributes
    ----------
    curv : Curvature or None
        The matrix the chord steps use, with its Cholesky factor (None: not formed yet, e.g.
        after loading a model file or for Hessian-free sparse rows; the next update starts
        from the exact Hessian at β).
    point : Point or None
        Scores by slot, J, ∇J and ∇J(0) at β (computed afresh by the last solve), from which
        the next update's first step is computed for the changed rows alone; None: computed
        from the rows at the next update.
    """

    kind, kernel, loss_names = "primal_newton", False, ("logistic", "squared_hinge")
    warm_per_sample = False
    curv = point = None

    def solve(self, Phi, y, coef0=None, w=None, rows=None):
        """Newton on ``Phi`` (rows in slot order) from ``coef0``: ``(result, curvature)``;
        ``rows``: ``Phi`` prepared for several solves (:meth:`shared_rows`)."""
        o = self.opts
        return newton_primal(
            Phi,
            y,
            o.loss,
            o.C,
            sample_weight=w,
            coef0=coef0,
            tol=o.tol,
            max_iter=o.max_iter,
            callback=o.callback,
            keep_hessian=True,
            rows=rows,
        )

    @staticmethod
    def shared_rows(Phi, w=None):
        """What the fits of several problems over the same rows ``Phi`` and weights ``w``
        share (the K one-vs-rest classes): the dense rows prepared for their Newton Hessians
        (:class:`~deltafit.solvers.NewtonRows`), passed to :meth:`fit` as ``rows``; None for
        sparse rows and for fewer than ``solvers.CHORD_FEATURES`` features (plain Newton)."""
        if sp.issparse(Phi) or Phi.shape[1] < CHORD_FEATURES:
            return None
        keep = None
        if w is not None:
            keep = np.flatnonzero(np.asarray(w, dtype=np.float64) > 0)
            if keep.size == len(w):
                keep = None
        return NewtonRows.of(Phi, keep)

    def fit(self, Phi, y, capacity=None, coef0=None, w=None, rows=None):
        res, nc = self.solve(Phi, y, coef0, w, rows)
        n = Phi.shape[0]
        capacity = max(capacity or n, n)
        self.commit(res)
        self.curv = _curvature(nc, np.arange(n), capacity)
        self.point = None
        if not _hessian_free(Phi):
            cw = self.C * (np.ones(n) if w is None else np.asarray(w, dtype=np.float64))
            block = RowBlock(Phi, np.asarray(y, dtype=np.float64), cw, np.arange(n))
            Z, _, grad, g0 = fresh_point([block], self.beta, self.loss)
            self.point = point_by_slot([block], Z, res.objective, grad, g0, capacity)
        return self

    def commit(self, res):
        self.beta, self.result = res.coef, res

    def apply_change(self, change):
        led = change.ledger
        check_change_curvature(change, self.C, self.loss)
        if led.sparse_rows and led.n_features > HESSIAN_FREE_FEATURES:
            # Hessian-free CG steps: no factorisation to reuse
            slots, Phi, t = change.rows_after()
            self.commit(self.solve(Phi, t, self.beta, change.weights_at(slots))[0])
            return
        o = self.opts
        blocks, changed = change_blocks(change, self.C)
        out = chord_solve(
            blocks,
            self.beta,
            self.curv,
            o.loss,
            tol=o.tol,
            max_iter=o.max_iter,
            callback=o.callback,
            capacity=led.capacity,
            changed=changed,
            start=self.point,
        )
        if out is None:  # the chord iteration stalled: Newton from where it is
            slots, Phi, t = change.rows_after()
            res, nc = self.solve(Phi, t, self.beta, change.weights_at(slots))
            self.commit(res)
            self.curv, self.point = _curvature(nc, slots, led.capacity), None
            return
        res, curv, self.point = out
        try:
            self.curv = curv.folded()  # one factor: what a model file restores exactly
        except linalg.LinAlgError:
            self.curv = None  # the fold lost definiteness: the next update starts afresh
        self.commit(res)

    def warm_coef(self, slots):
        return self.beta.copy()

    def ensure_capacity(self, capacity):
        if self.curv is not None:
            self.curv = self.curv.grown(capacity)
        if self.point is not None:
            self.point = self.point.grown(capacity)

    def take(self, keep, capacity):
        if self.curv is not None:
            self.curv = self.curv.taken(keep, capacity)
        if self.point is not None:
            self.point = self.point.taken(keep, capacity)

    def to_arrays(self, keep):
        out = {"state_beta": self.beta}
        cv, pt = self.curv, self.point
        if cv is not None and pt is not None:  # what the next update starts from
            # the Hessian as its Cholesky factor reads it (the lower triangle), mirrored: the
            # rounding asymmetry the folded corrections leave in the upper triangle is the
            # residue of every earlier, possibly far larger, Hessian (a fit at weight 1 later
            # reweighted to 1e-12), which a load-time symmetry test cannot tell from damage;
            # the loaded factor is bitwise the one this state holds
            H = _symmetric(cv.folded().H)
            out["state_hessian"] = np.column_stack([H, pt.grad, pt.grad0])
            out["state_scores"] = np.column_stack([pt.z[keep], cv.d[keep]])
        return out

    @classmethod
    def saved_shapes(cls, n, p):
        return {"state_beta": (p,)}

    @classmethod
    def optional_shapes(cls, n, p):
        """The stored Hessian with ∇J and ∇J(0) as two more columns, and the scores and
        curvature weights of the live samples (a file without them rebuilds them)."""
        return {"state_hessian": (p, p + 2), "state_scores": (n, 2)}

    @classmethod
    def from_arrays(cls, arrays, opts, *, y, capacity, max_rank=64, result=None):
        needs_result(result, cls.kind)
        st = cls(opts, max_rank)
        st.beta = saved_coef(arrays)
        result.coef = st.beta
        st.result = result
        shapes = cls.optional_shapes(np.shape(y)[0], st.beta.shape[0])
        if all(name in arrays for name in shapes):  # else rebuilt at the next update
            HG, zd = checked(arrays, shapes, "stored Hessian")
            if not (np.all(np.isfinite(HG)) and np.all(np.isfinite(zd))):
                raise ValueError("corrupt model file: the stored Hessian or scores are not finite")
            H = np.ascontiguousarray(HG[:, :-2])
            check_symmetric(H, "stored Hessian")
            try:
                st.curv = Curvature(H, padded(zd[:, 1], capacity))
            except (linalg.LinAlgError, ValueError) as exc:
                raise ValueError(
                    "corrupt model file: the stored Hessian is not positive definite"
                ) from exc
            st.point = Point(
                padded(zd[:, 0], capacity),
                float(result.objective),
                HG[:, -2].copy(),
                HG[:, -1].copy(),
            )
        return st

    # ------------------------------------------------------- load-time checks
    def check_saved_solution(self, arrays: dict, solver: dict | None = None) -> None:
        """The gradient ``β + C Φᵀ(w ∘ ℓ'(y, Φβ))`` at the saved β, from the stored rows, has
        the norm the saved certificate ``solver["grad_norm"]`` states (to ``1e-6`` of
        ``‖β‖ + grad_norm``: the sensitivity bounds rely on it).  See
        :meth:`ModelState.check_saved_solution`."""
        norm = np.linalg.norm
        if solver is None:
            raise ValueError(
                f"corrupt model file: the {self.kind} state's solver diagnostics are missing"
            )
        y, C, saved = arrays["ledger_y"], self.C, float(solver["grad_norm"])
        w = arrays.get("ledger_w", 1.0)  # C·w_i per sample
        Phi, beta = arrays["ledger_X"], arrays["state_beta"]
        g = beta + C * (Phi.T @ (w * self.loss.d1(y, Phi @ beta)))
        size, gnorm = norm(beta), norm(g)
        check_residual(max(gnorm - saved, 0.0), size + saved)

    def check_saved_rows(
        self,
        arrays: dict,
        *,
        first: bool = True,
        hinge: dict | None = None,
        kernel: Callable | None = None,
    ) -> None:
        """The stored scores ``z_i`` (``state_scores``, when saved) against ``φ_iᵀβ`` from
        the stored rows, within their rounding bound.  See
        :meth:`ModelState.check_saved_rows`."""
        Phi = arrays.get("ledger_X")
        zd = arrays.get("state_scores")
        if Phi is None or zd is None:
            return
        n, p = Phi.shape
        beta = arrays["state_beta"]
        ab = np.abs(beta)
        for rows in row_blocks(n):
            B, z = Phi[rows], zd[rows, 0]
            S = np.asarray(abs_rows(B) @ ab).ravel() + np.abs(z)
            bad = np.flatnonzero(np.abs(z - np.asarray(B @ beta).ravel()) > 4.0 * EPS * (p + 4) * S)
            if bad.size:
                refuse_rows("scores Φβ", f"rows {(bad[:5] + rows.start).tolist()}")


def _hessian_free(Phi):
    """Whether Newton solves over ``Phi`` by Hessian-free CG steps (no matrix to reuse)."""
    return sp.issparse(Phi) and Phi.shape[1] > HESSIAN_FREE_FEATURES


def _curvature(nc, slots, capacity):
    """The :class:`Curvature` of a Newton solve's last Hessian over rows at ``slots``."""
    if nc is None:
        return None
    d = np.zeros(capacity)
    d[slots] = nc.d
    try:
        return Curvature(nc.hessian, d, factor=nc.factor)
    except (linalg.LinAlgError, ValueError):
        return None


def change_blocks(change, C):
    """The problem after ``change`` as row blocks for :func:`chord_solve`, without copying the
    stored rows: the ledger's slots (removed and free ones at weight 0) and the added rows.

    Returns
    -------
    blocks : list of RowBlock
    changed : list of ndarray of bool
        Per block, the rows whose target or weight the change sets.
    """
    led = change.ledger
    end = led.end
    if led.sparse_rows:
        S = np.flatnonzero(led.active[:end])
        X, at = led.X[S], S
    else:
        S = np.arange(end)
        X, at = led.X[:end], slice(0, end)
    t_before = np.array(led.y[at], dtype=np.float64)
    t = t_before.copy()
    w_before = np.where(led.active[at], led.w[at], 0.0)
    w = w_before.copy()
    changed = np.zeros(S.size, dtype=bool)

    def at(slots):
        return np.searchsorted(S, np.asarray(slots, dtype=np.intp))

    if change.relabel_slots is not None and len(change.relabel_slots):
        i = at(change.relabel_slots)
        t[i] = change.relabel_t
        changed[i] = True
    if change.reweight_slots is not None and len(change.reweight_slots):
        i = at(change.reweight_slots)
        w[i] = change.reweight_w
        changed[i] = True
    if change.remove_slots is not None and len(change.remove_slots):
        i = at(change.remove_slots)
        w[i] = 0.0
        changed[i] = True
    blocks, masks = [RowBlock(X, t, C * w, S, t_before, C * w_before)], [changed]
    if change.add_slots is not None and len(change.add_slots):
        k = len(change.add_slots)
        wa = np.ones(k) if change.w_add is None else np.asarray(change.w_add, dtype=np.float64)
        ta = np.asarray(change.t_add, dtype=np.float64)
        blocks.append(
            RowBlock(
                change.rows_add,
                ta,
                C * wa,
                np.asarray(change.add_slots),
                ta,
                np.zeros(k),
                stored=False,
            )
        )
        masks.append(np.ones(k, dtype=bool))
    return blocks, masks
