"""States for the smooth non-quadratic losses: exact warm-started re-solves.

For the logistic and squared-hinge losses no finite closed-form update exists; the exact model
after a data change is obtained by re-solving the canonical problem with Newton's method,
warm-started from the current solution (new samples start at α = 0).  Because the old solution is
close to the new one when the change is small, this takes few Newton iterations.  The training
rows (or the kernel matrix over them) are kept for that purpose.
"""

from __future__ import annotations

import numpy as np

from ..solvers import newton_kernel, newton_primal
from ._gram import GramCache
from ._state import (ModelState, check_symmetric, checked, grown, needs_result, padded,
                     saved_coef, taken)

__all__ = ["PrimalNewtonState", "KernelNewtonState"]


class PrimalNewtonState(ModelState):
    """β for explicit features, re-solved with warm-started Newton after each change."""

    kind, kernel, loss_names = "primal_newton", False, ("logistic", "squared_hinge")
    warm_per_sample = False

    def solve(self, Phi, y, coef0=None, w=None):
        o = self.opts
        return newton_primal(Phi, y, o.loss, o.C, sample_weight=w, coef0=coef0, tol=o.tol,
                             max_iter=o.max_iter, callback=o.callback)

    def fit(self, Phi, y, capacity=None, coef0=None, w=None):
        self.commit(self.solve(Phi, y, coef0, w))
        return self

    def commit(self, res):
        self.beta, self.result = res.coef, res

    def apply_change(self, change):
        slots, Phi, t = change.rows_after()
        self.commit(self.solve(Phi, t, self.beta, change.weights_at(slots)))

    def warm_coef(self, slots):
        return self.beta.copy()

    def to_arrays(self, keep):
        return {"state_beta": self.beta}

    @classmethod
    def saved_shapes(cls, n, p):
        return {"state_beta": (p,)}

    @classmethod
    def from_arrays(cls, arrays, opts, *, y, capacity, max_rank=64, result=None):
        needs_result(result, cls.kind)
        st = cls(opts, max_rank)
        st.beta = saved_coef(arrays)
        result.coef = st.beta
        st.result = result
        return st


class KernelNewtonState(ModelState):
    """α over ledger slots, re-solved with warm-started kernel Newton after each change."""

    kind, kernel, loss_names = "kernel_newton", True, ("logistic", "squared_hinge")
    warm_per_sample = True

    def fit(self, K, y, capacity, coef0=None, w=None):
        self.gram = GramCache(K, capacity)
        self._init_slots(capacity)
        n = K.shape[0]
        self.commit(np.arange(n), self.solve(np.arange(n), y, coef0, w))
        return self

    def _init_slots(self, capacity):
        self.alpha = np.zeros(capacity)

    @property
    def capacity(self):
        return self.alpha.shape[0]

    def solve(self, A, y, coef0=None, w=None):
        o = self.opts
        return newton_kernel(self.gram.sub(A), y, o.loss, o.C, sample_weight=w, coef0=coef0,
                             tol=o.tol, max_iter=o.max_iter, callback=o.callback)

    def commit(self, A, res):
        self.alpha, self.result = padded_at(A, res.coef, self.capacity), res

    def _warm_source(self):
        """The per-slot values a re-solve warm-starts from."""
        return self.alpha

    def apply_change(self, change):
        if change.add_slots is not None:
            self.ensure_capacity(change.ledger.capacity)
            self.gram.write(change.add_slots, change.K_cross, change.K_new)
        A, t = change.slots_after()
        start = self._warm_source().copy()
        if change.add_slots is not None:
            start[change.add_slots] = 0.0  # new samples start at 0
        self.commit(A, self.solve(A, t, start[A], change.weights_at(A)))

    def warm_coef(self, slots):
        return self._warm_source()[slots].copy()

    def ensure_capacity(self, cap):
        if cap > self.capacity:
            self.gram.ensure_capacity(cap)
            self.alpha = grown(self.alpha, cap)

    def take(self, keep, capacity):
        self.gram.take(keep, capacity)
        self.alpha = taken(self.alpha, keep, capacity)

    def to_arrays(self, keep):
        return {"state_K": self.gram.sub(keep), "state_alpha": self.alpha[keep]}

    @classmethod
    def saved_shapes(cls, n, p):
        return {"state_K": (n, n), "state_alpha": (n,)}

    @classmethod
    def from_arrays(cls, arrays, opts, *, y, capacity, max_rank=64, result=None):
        needs_result(result, cls.kind)
        n = y.shape[0]
        K, alpha = checked(arrays, KernelNewtonState.saved_shapes(n, None), "kernel state")
        check_symmetric(K, "kernel matrix")
        st = cls(opts, max_rank)
        st.gram = GramCache(K, capacity)
        st.alpha = padded(alpha, capacity)
        result.coef = alpha
        st.result = result
        return st


def padded_at(slots, values, capacity):
    """A length-``capacity`` zero array holding ``values`` at ``slots``."""
    out = np.zeros(capacity)
    out[slots] = values
    return out
