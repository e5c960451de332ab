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

__all__ = ["PrimalNewtonState", "KernelNewtonState"]


class _SolverOptions:
    def __init__(self, loss, C, tol, max_iter, callback=None):
        self.loss, self.C, self.tol, self.max_iter, self.callback = loss, C, tol, max_iter, callback


class PrimalNewtonState:
    """β for explicit features, re-solved with warm-started Newton after each change."""

    def __init__(self, opts):
        self.opts = opts

    def solve(self, Phi, y, coef0=None):
        o = self.opts
        res = newton_primal(Phi, y, o.loss, o.C, coef0=coef0, tol=o.tol,
                            max_iter=o.max_iter, callback=o.callback)
        return res

    def fit(self, Phi, y, coef0=None):
        res = self.solve(Phi, y, coef0)
        self.commit(res)
        return self

    def commit(self, res):
        self.beta, self.result = res.coef, res


def grown(a, cap):
    """``a`` zero-padded to length ``cap`` (unchanged when long enough)."""
    if cap <= a.shape[0]:
        return a
    out = np.zeros(cap)
    out[: a.shape[0]] = a
    return out


def taken(a, keep, capacity):
    """``a[keep]`` moved to the front of a zero array of length ``capacity``."""
    out = np.zeros(capacity)
    out[: len(keep)] = a[keep]
    return out


def warm_values(a, A, add):
    """``a`` over slots ``A``, with 0 for the newly added slots ``add``."""
    a = a.copy()
    if add is not None:
        a[add] = 0.0
    return a[A]


class KernelNewtonState:
    """α over ledger slots, re-solved with warm-started kernel Newton after each change."""

    def __init__(self, opts):
        self.opts = opts

    def fit(self, K, y, capacity, coef0=None):
        self.gram = GramCache(K, capacity)
        self.alpha = np.zeros(capacity)
        n = K.shape[0]
        res = self.solve(np.arange(n), y, coef0)
        self.commit(np.arange(n), res)
        return self

    @property
    def capacity(self):
        return self.alpha.shape[0]

    def solve(self, A, y, coef0=None):
        o = self.opts
        return newton_kernel(self.gram.sub(A), y, o.loss, o.C, coef0=coef0, tol=o.tol,
                             max_iter=o.max_iter, callback=o.callback)

    def commit(self, A, res):
        alpha = np.zeros(self.capacity)
        alpha[A] = res.coef
        self.alpha, self.result = alpha, res

    def warm_start(self, A, add):
        """The coefficients to start a re-solve over slots ``A`` from (0 for new samples)."""
        return warm_values(self.alpha, A, add)

    def ensure_capacity(self, cap):
        if cap > self.capacity:
            self.gram.ensure_capacity(cap)
            self.alpha = grown(self.alpha, cap)

    def take(self, keep, capacity):
        self.gram.take(keep, capacity)
        self.alpha = taken(self.alpha, keep, capacity)
