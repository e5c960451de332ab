"""States for the hinge loss (L1-SVM): exact warm-started re-solves of the dual box QP.

The hinge problem ``C Σ max(0, 1 − y_i z_i) + ½‖β‖²`` is solved through its dual
``max Σα_i − ½ Σ α_i α_j y_i y_j k_ij, 0 ≤ α_i ≤ C`` (:func:`deltafit.solvers.hinge_primal`,
:func:`~deltafit.solvers.hinge_kernel`).  After a data change the QP is re-solved on the stored
rows (or kernel matrix), warm-started from the current dual variables (new samples start at
α = 0; a relabelled sample keeps its α, which stays feasible); with the right active sets one
exact face solve finishes it.

Where the dual variables live (what approximate leave-one-out for SVMs needs):

* :class:`PrimalHingeState` (``LinearClassifier(loss="hinge")``): ``dual`` holds α_i ∈ [0, C]
  by ledger slot; the estimator exposes ``dual_coef_ = y_i α_i`` in the order of
  ``sample_ids_``.
* :class:`KernelHingeState` (``KernelClassifier(loss="hinge")``): ``alpha`` holds the
  expansion coefficients ``y_i α_i`` (``β = Σ alpha_i Φ(x_i)``, like every kernel state, and
  ``dual_coef_``), ``dual`` the α_i ∈ [0, C] themselves, both by slot.
"""

from __future__ import annotations

import numpy as np

from ..solvers import hinge_kernel, hinge_primal
from ._warm_newton import KernelNewtonState, grown, taken, warm_values

__all__ = ["PrimalHingeState", "KernelHingeState"]


class PrimalHingeState:
    """β over explicit features and the dual variables α by ledger slot, re-solved exactly
    (warm-started dual QP) after each change."""

    def __init__(self, opts):
        self.opts = opts

    def solve(self, Phi, y, alpha0=None):
        o = self.opts
        return hinge_primal(Phi, y, o.C, alpha0=alpha0, tol=o.tol, max_iter=o.max_iter,
                            callback=o.callback)

    def fit(self, Phi, y, capacity, alpha0=None):
        res = self.solve(Phi, y, alpha0)
        self.dual = np.zeros(capacity)
        self.commit(np.arange(Phi.shape[0]), res)
        return self

    @property
    def capacity(self):
        return self.dual.shape[0]

    def commit(self, slots, res):
        dual = np.zeros(self.capacity)
        dual[slots] = res.alpha
        self.dual, self.beta, self.result = dual, res.coef, res

    def ensure_capacity(self, cap):
        self.dual = grown(self.dual, cap)

    def take(self, keep, capacity):
        self.dual = taken(self.dual, keep, capacity)


class KernelHingeState(KernelNewtonState):
    """Expansion coefficients ``alpha = y ∘ dual`` and the dual variables ``dual`` by ledger
    slot, re-solved exactly (warm-started dual QP) after each change."""

    def fit(self, K, y, capacity, coef0=None):
        self.dual = np.zeros(capacity)
        return super().fit(K, y, capacity, coef0)

    def solve(self, A, y, coef0=None):
        o = self.opts
        return hinge_kernel(self.gram.sub(A), y, o.C, alpha0=coef0, tol=o.tol,
                            max_iter=o.max_iter, callback=o.callback)

    def commit(self, A, res):
        dual = np.zeros(self.capacity)
        dual[A] = res.alpha
        super().commit(A, res)
        self.dual = dual

    def warm_start(self, A, add):
        """The dual variables to start a re-solve over slots ``A`` from (0 for new samples)."""
        return warm_values(self.dual, A, add)

    def ensure_capacity(self, cap):
        super().ensure_capacity(cap)
        self.dual = grown(self.dual, cap)

    def take(self, keep, capacity):
        super().take(keep, capacity)
        self.dual = taken(self.dual, keep, capacity)
