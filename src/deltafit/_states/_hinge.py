"""States for the hinge loss (L1-SVM): exact warm-started re-solves of the dual box QP.

The hinge problem ``C Σ max(0, 1 − y_i z_i) + ½‖β‖²`` is solved through its dual
``max Σα_i − ½ Σ α_i α_j y_i y_j k_ij, 0 ≤ α_i ≤ C`` (:func:`deltafit.solvers.hinge_primal`,
:func:`~deltafit.solvers.hinge_kernel`).  After a data change the QP is re-solved on the stored
rows (or kernel matrix), warm-started from the current dual variables (new samples start at
α = 0; a relabelled sample keeps its α, which stays feasible) by working sets: the samples the
change moved (added, relabelled, reweighted), the free set and the samples nearest to the
margin under the solution before the change first, the other variables held at their bounds,
widened through full gradient checks until every variable meets the cold solve's stopping
rule (the solvers' ``working_set`` and ``margin0``; shrinking, as LIBLINEAR and LIBSVM do).
The kernel state reads its matrix by slot in place (no n × n copy) and keeps ``K alpha`` by
slot (:class:`~deltafit.solvers._kernel_values.KernelValues`): an update moves it by the
columns of the coefficients it changes (O(n · #changed), the way LIBSVM keeps its gradient),
so that no step reads the whole matrix; the rounding those sums accumulate is bounded and
enters the certificates, and a fresh product replaces them once that bound reaches a fresh
product's.  The kernel values of the last free set and the Cholesky factor of the last face
factorised are kept with them: the next update's first face solve (the free set re-solved
exactly, :func:`~deltafit.solvers._hinge_active_set.active_face`) reads no column of the
matrix and factorises nothing (the removed samples are dropped from the factor by
multipliers; a relabel drops the factor).  The result's ``n_touched`` counts the coordinate
visits.

Where the dual variables live (what approximate leave-one-out for SVMs needs):

* :class:`PrimalHingeState` (``LinearClassifier(loss="hinge")``): ``dual`` holds α_i ∈ [0, C]
  by ledger slot; the estimator exposes ``dual_coef_ = y_i α_i`` in the order of
  ``sample_ids_``.
* :class:`KernelHingeState` (``KernelClassifier(loss="hinge")``): ``alpha`` holds the
  expansion coefficients ``y_i α_i`` (``β = Σ alpha_i Φ(x_i)``, like every kernel state, and
  ``dual_coef_``), ``dual`` the α_i ∈ [0, C] themselves, both by slot.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from deltafit._states._newton_common import padded_at
from deltafit._states._newton_kernel import KernelNewtonState
from deltafit._states._protocol import ModelState, grown, needs_result, padded, saved_coef, taken
from deltafit._states._saved_checks import EPS, abs_rows, refuse_rows, row_blocks
from deltafit.solvers import hinge_kernel, hinge_kernel_slots, hinge_primal
from deltafit.solvers._kernel_values import KernelValues

__all__ = ["PrimalHingeState", "KernelHingeState"]


def _checked_dual(arrays, n, C):
    """The saved dual variables, checked: n values in the box [0, C·w_i] of the fitted C and
    the samples' weights (``ledger_w`` when saved, else 1)."""
    dual = np.asarray(arrays["state_dual"], dtype=np.float64)
    w = np.asarray(arrays.get("ledger_w", np.ones(n)), dtype=np.float64)
    if (
        dual.shape != (n,)
        or w.shape != (n,)
        or dual.min(initial=0.0) < 0.0
        or np.any(dual > C * w * (1.0 + 1e-9))
    ):
        raise ValueError(
            "corrupt model file: the hinge dual variables do not match the ledger "
            "or lie outside [0, C·w]"
        )
    return dual


def _in_box(alpha0, C, w):
    """A warm start moved into the box ``[0, C·w_i]`` of the (new) weights."""
    if alpha0 is None or w is None:
        return alpha0
    return np.minimum(alpha0, C * np.asarray(w))


def _moved(change, slots, n_sorted):
    """Positions in ``slots`` of the samples ``change`` moves: the added ones, the relabelled
    and the reweighted ones (``slots[:n_sorted]`` is sorted; slots beyond it are added)."""
    head = slots[:n_sorted]
    out = [np.arange(n_sorted, slots.size)]
    for moved in (change.add_slots, change.relabel_slots, change.reweight_slots):
        if moved is None or not len(moved) or not head.size:
            continue
        moved = np.asarray(moved, dtype=np.intp)
        pos = np.minimum(np.searchsorted(head, moved), head.size - 1)
        out.append(pos[head[pos] == moved])
    return np.unique(np.concatenate(out))


class PrimalHingeState(ModelState):
    """β over explicit features and the dual variables α by ledger slot, re-solved exactly
    (warm-started dual QP over working sets) after each change."""

    kind, kernel, loss_names = "primal_hinge", False, ("hinge",)
    warm_per_sample = True
    #: re-solve by working sets (False: the full warm-started solve, as before; benchmarks
    #: switch it off to time that)
    active_set = True

    def solve(self, Phi, y, alpha0=None, w=None, working_set=None):
        o = self.opts
        margin0 = None
        if working_set is not None and self.active_set and o.callback is None:
            margin0 = y * (Phi @ self.beta)  # under the solution before the change
        else:
            working_set = None
        return hinge_primal(
            Phi,
            y,
            o.C,
            sample_weight=w,
            alpha0=_in_box(alpha0, o.C, w),
            tol=o.tol,
            max_iter=o.max_iter,
            callback=o.callback,
            working_set=working_set,
            margin0=margin0,
        )

    def fit(self, Phi, y, capacity=None, coef0=None, w=None):
        self.dual = np.zeros(Phi.shape[0] if capacity is None else capacity)
        self.commit(np.arange(Phi.shape[0]), self.solve(Phi, y, coef0, w))
        return self

    @property
    def capacity(self):
        return self.dual.shape[0]

    def commit(self, slots, res):
        self.dual, self.beta, self.result = (
            padded_at(slots, res.alpha, self.capacity),
            res.coef,
            res,
        )

    def apply_change(self, change):
        # warm start from the dual variables (0 for new rows; a relabelled row keeps its α,
        # which stays feasible)
        self.ensure_capacity(change.ledger.capacity)
        slots, Phi, t = change.rows_after()
        alpha0 = self.dual[slots].copy()
        n_kept = slots.size
        if change.add_slots is not None:
            n_kept -= change.add_slots.size
            alpha0[n_kept:] = 0.0
        self.commit(
            slots,
            self.solve(Phi, t, alpha0, change.weights_at(slots), _moved(change, slots, n_kept)),
        )

    def warm_coef(self, slots):
        return self.dual[slots].copy()

    def ensure_capacity(self, cap):
        self.dual = grown(self.dual, cap)

    def take(self, keep, capacity):
        self.dual = taken(self.dual, keep, capacity)

    def to_arrays(self, keep):
        return {"state_beta": self.beta, "state_dual": self.dual[keep]}

    @classmethod
    def saved_shapes(cls, n, p):
        return {"state_beta": (p,), "state_dual": (n,)}

    @classmethod
    def from_arrays(cls, arrays, opts, *, y, capacity, max_rank=64, result=None):
        needs_result(result, cls.kind)
        st = cls(opts, max_rank)
        st.beta = saved_coef(arrays)
        dual = _checked_dual(arrays, y.shape[0], st.C)
        st.dual = padded(dual, capacity)
        result.coef, result.alpha = st.beta, dual
        st.result = result
        return st

    # ------------------------------------------------------- load-time checks
    def check_saved_rows(
        self,
        arrays: dict,
        *,
        first: bool = True,
        hinge: dict | None = None,
        kernel: Callable | None = None,
    ) -> None:
        """β against ``Φᵀ(α∘t)`` from the stored rows (the dual's primal point), and the KKT
        conditions at the margins ``t_i φ_iᵀβ`` against the saved certificate
        ``hinge["kkt_violation"]`` (which already includes the solve's rounding bound; no
        KKT test without it).  A changed row whose dual variable is 0 and which stays outside
        the margin leaves β the exact fit of the changed rows, and is not told apart.  See
        :meth:`ModelState.check_saved_rows`."""
        Phi = arrays.get("ledger_X")
        if Phi is None:
            return
        n, p = Phi.shape
        w = arrays.get("ledger_w")
        w = np.ones(n) if w is None else np.asarray(w, dtype=np.float64)
        t = arrays["ledger_y"]
        beta, dual = arrays["state_beta"], arrays["state_dual"]
        kkt = None if hinge is None else float(hinge["kkt_violation"]) * (1.0 + 1e-9)
        bt, S, ab, box = np.zeros(p), np.abs(beta), np.abs(beta), float(self.C) * w
        for rows in row_blocks(n):
            B, a, tb = Phi[rows], dual[rows], t[rows]
            A = abs_rows(B)
            bt = bt + np.asarray(B.T @ (a * tb)).ravel()
            S = S + np.asarray(A.T @ a).ravel()
            if kkt is None:
                continue
            g = tb * np.asarray(B @ beta).ravel() - 1.0  # the dual gradient ∇_i, projected
            P = np.where(
                a <= 0.0,
                np.minimum(g, 0.0),  # as the certificate projects it
                np.where(a >= box[rows], np.maximum(g, 0.0), g),
            )
            P[w[rows] <= 0.0] = 0.0  # samples of weight 0 are out of the problem
            slack = 4.0 * EPS * (p + 4) * (np.asarray(A @ ab).ravel() + 1.0)
            bad = np.flatnonzero(np.abs(P) > kkt + slack)
            if bad.size:
                refuse_rows(
                    "margins of the dual solution (KKT conditions beyond the saved kkt_violation)",
                    f"rows {(bad[:5] + rows.start).tolist()}",
                )
        bad = np.flatnonzero(np.abs(beta - bt) > 4.0 * EPS * (n + 4) * S)
        if bad.size:
            refuse_rows("coefficients Φᵀ(α∘t) of the dual solution", f"features {bad[:5].tolist()}")


class KernelHingeState(KernelNewtonState):
    """Expansion coefficients ``alpha = y ∘ dual`` and the dual variables ``dual`` by ledger
    slot, re-solved exactly (warm-started dual QP) after each change."""

    kind, kernel, loss_names = "kernel_hinge", True, ("hinge",)
    warm_per_sample = True
    #: as :attr:`PrimalHingeState.active_set`
    active_set = True
    #: whether the kernel matrix has no negative entry over the live slots (then ``|K| = K``
    #: in the rounding bounds); None: not known yet
    nonneg = None
    #: ``K alpha`` by slot, kept current by the columns of the coefficients an update moves
    #: (:class:`~deltafit.solvers._kernel_values.KernelValues`); None: computed by the next
    #: update (one pass over the matrix)
    values = None

    def fit(self, K, y, capacity, coef0=None, w=None):
        super().fit(K, y, capacity, coef0, w)
        self.nonneg = bool(np.min(K, initial=0.0) >= 0.0)
        self.values = KernelValues(self.gram.K, self.alpha, self.nonneg)
        # the kernel values of the free set: where the first update's face solve starts
        ub = self.C * (1.0 if w is None else np.asarray(w, dtype=np.float64))
        d = self.dual[: K.shape[0]]
        self.values.cache_face(self.gram.K, np.flatnonzero((d > 0.0) & (d < ub)), y)
        return self

    def _init_slots(self, capacity):
        super()._init_slots(capacity)
        self.dual = np.zeros(capacity)

    def apply_change(self, change):
        o = self.opts
        if not self.active_set or o.callback is not None:
            self.values = None  # the full solve does not keep them
            super().apply_change(change)  # the full warm-started solve
            return
        led = change.ledger
        if self.nonneg is None:
            live = np.flatnonzero(led.active)
            self.nonneg = bool(np.min(self.gram.sub(live), initial=0.0) >= 0.0)
        vals = self.values
        if change.add_slots is not None:
            self.ensure_capacity(led.capacity)
            vals = self.values  # grown with the slots
            self.gram.write(change.add_slots, change.K_cross, change.K_new)
            self.nonneg = self.nonneg and bool(
                np.min(change.K_cross, initial=0.0) >= 0.0
                and np.min(change.K_new, initial=0.0) >= 0.0
            )
        A, t = change.slots_after()
        # the expansion before the change over the slots (an added slot's coefficient is 0)
        coef = np.zeros(self.gram.capacity)
        coef[: self.alpha.shape[0]] = self.alpha
        if change.add_slots is not None:
            coef[change.add_slots] = 0.0
        # its values K coef by slot: kept from the last update (moved by the columns of the
        # coefficients each update changes; a copy, so that a failed update leaves them), or
        # one fresh pass when there are none or their rounding bound has grown
        if (
            vals is None
            or vals.capacity != self.gram.capacity
            or vals.nonneg != bool(self.nonneg)
            or not np.array_equal(vals.coef, coef)
            or vals.stale()
        ):
            vals = KernelValues(self.gram.K, coef, bool(self.nonneg))
        else:
            vals = vals.copy()
            if change.add_slots is not None:
                vals.set_rows(change.add_slots, change.K_cross)
            if change.relabel_slots is not None and len(change.relabel_slots):
                vals.drop_factor()  # y_i y_j k_ij changed sign
        # the margins under the solution before the change
        margin0 = t * vals.f[A]
        start = self.dual.copy()
        if change.add_slots is not None:
            start[change.add_slots] = 0.0  # new samples start at 0
        w = change.weights_at(A)
        res = hinge_kernel_slots(
            self.gram.K,
            A,
            t,
            o.C,
            sample_weight=w,
            alpha0=_in_box(start[A], o.C, w),
            working_set=_moved(change, A, A.size),
            margin0=margin0,
            nonneg=self.nonneg,
            tol=o.tol,
            max_iter=o.max_iter,
            values=vals,
        )
        self.commit(A, res)
        vals.move_to(self.gram.K, self.alpha)  # a no-op unless the solve ended elsewhere
        self.values = vals

    def solve(self, A, y, coef0=None, w=None):
        o = self.opts
        return hinge_kernel(
            self.gram.sub(A),
            y,
            o.C,
            sample_weight=w,
            alpha0=_in_box(coef0, o.C, w),
            tol=o.tol,
            max_iter=o.max_iter,
            callback=o.callback,
        )

    def commit(self, A, res):
        dual = padded_at(A, res.alpha, self.capacity)
        super().commit(A, res)
        self.dual = dual

    def _warm_source(self):
        return self.dual

    def ensure_capacity(self, cap):
        super().ensure_capacity(cap)
        self.dual = grown(self.dual, cap)
        if self.values is not None:
            self.values = self.values.grown(cap)

    def take(self, keep, capacity):
        super().take(keep, capacity)
        self.dual = taken(self.dual, keep, capacity)
        if self.values is not None:
            self.values = self.values.taken(keep, capacity)

    def to_arrays(self, keep):
        keep = np.asarray(keep, dtype=np.intp)
        out = dict(
            super().to_arrays(keep), state_dual=self.dual[keep], state_face=self._face_marks(keep)
        )
        if self.values is not None:
            v = self.values
            out["state_values"] = np.column_stack([v.f[keep], v.s[keep], v.err[keep]])
        return out

    def _face_marks(self, keep):
        """The kept values and face by saved row: 1 where the face's kernel values are cached,
        2 where its factor is kept too (the factor's set equal to the cached one), 0 elsewhere;
        −1 everywhere: no kept values (the next update computes them)."""
        vals = self.values
        if vals is None:
            return np.full(keep.size, -1.0)
        marks = np.zeros(keep.size)
        pos = np.full(self.gram.capacity, -1, dtype=np.intp)
        pos[keep] = np.arange(keep.size)
        if not vals.face_slots.size or np.any(pos[vals.face_slots] < 0):
            return marks
        marks[pos[vals.face_slots]] = 1.0
        fl = vals.face_L_slots
        if fl.size and np.array_equal(np.sort(fl), vals.face_slots):
            marks[pos[vals.face_slots]] = 2.0
        return marks

    @classmethod
    def saved_shapes(cls, n, p):
        return dict(super().saved_shapes(n, p), state_dual=(n,))

    @classmethod
    def optional_shapes(cls, n, p):
        """The kernel Newton state's, and the kept face (:meth:`_face_marks`): a file
        without it caches the free set of its dual variables, as a fit does."""
        return dict(super().optional_shapes(n, p), state_face=(n,), state_values=(n, 3))

    @classmethod
    def from_arrays(cls, arrays, opts, *, y, capacity, max_rank=64, result=None):
        st = super().from_arrays(
            arrays, opts, y=y, capacity=capacity, max_rank=max_rank, result=result
        )
        dual = _checked_dual(arrays, y.shape[0], st.C)
        if not np.array_equal(st.alpha[: y.shape[0]], y * dual + 0.0):
            raise ValueError(
                "corrupt model file: the kernel state's coefficients do not match "
                "its dual variables"
            )
        st.dual = padded(dual, capacity)
        result.alpha = dual
        st.nonneg = bool(np.min(st.gram.K, initial=0.0) >= 0.0)  # the free slots hold 0
        # the kept values and face as the saved model held them (the face's kernel values
        # and factor recomputed from K), so that the loaded model's next update takes the
        # saved one's path
        n = y.shape[0]
        marks = arrays.get("state_face")
        if marks is None:  # as a fit leaves them: the free set of the dual variables
            ub = st.C * np.asarray(arrays.get("ledger_w", np.ones(n)), dtype=np.float64)
            free = (dual > 0.0) & (dual < ub)
            marks = np.where(free, 2.0, 0.0)
        marks = np.asarray(marks, dtype=np.float64)
        if marks.shape != (n,) or not (
            np.all(marks == -1.0) or np.all(np.isin(marks, (0.0, 1.0, 2.0)))
        ):
            raise ValueError(
                "corrupt model file: state_face is not one mark 0, 1 or 2 per sample (or −1)"
            )
        if n and marks[0] == -1.0:
            return st  # the saved model kept no values: its next update computes them
        face = np.flatnonzero(marks)
        st.values = KernelValues(st.gram.K, st.alpha, st.nonneg)
        kept = arrays.get("state_values")
        if kept is not None:  # the saved values (moved by updates), checked against fresh ones
            kept = np.asarray(kept, dtype=np.float64)
            v = st.values
            f, s, err = (kept[:, j] for j in range(3)) if kept.shape == (n, 3) else (None,) * 3
            if (
                f is None
                or not np.all(np.isfinite(kept))
                or np.any(err < 0.0)
                or np.any(np.abs(s - v.s[:n]) > err + 4.0 * v.gamma() * np.maximum(v.s[:n], 1.0))
                or np.any(np.abs(f - v.f[:n]) > err + 4.0 * v.gamma() * np.maximum(v.s[:n], 1.0))
            ):
                raise ValueError(
                    "corrupt model file: state_values do not match the kernel matrix and "
                    "coefficients"
                )
            v.f[:n], v.s[:n], v.err[:n] = f, s, err
        factored = face.size and bool(np.all(marks[face] == 2.0))
        st.values.cache_face(st.gram.K, face, y if factored else None)
        return st

    # ------------------------------------------------------- load-time checks
    def check_saved_solution(self, arrays: dict, solver: dict | None = None) -> None:
        """Nothing beyond :meth:`from_arrays` (the dual variables in their box): the hinge's
        certificate is a duality gap, not the gradient norm :class:`KernelNewtonState` checks.
        The stored kernel matrix is checked as that state's (:meth:`check_saved_rows`)."""
