"""The exact state of the kernel squared-loss model (kernel ridge): ``DualSquaredState``.

Lee et al. ("Exact incremental and decremental learning for LS-SVM"), Theorem 1 and
Corollaries 1–4, update the solution of ``(K + ρI) α = y`` by the Woodbury identity when
samples are added and removed.  This state keeps the exact kernel matrix
(:class:`~deltafit._linalg._gram.GramCache`) and tracks the inverse ``H = (K + ρI)⁻¹`` as a
base plus pending Woodbury corrections (:class:`~deltafit._linalg._lowrank.LowRankInverse`):
one sample costs O(n) plus O(n·r), a batch of ``k`` O(n²k); every ``max_rank`` corrections the
inverse is folded and α refined against the kernel matrix, and refactorised when that shows
drift.  Adding samples borders the system (a Schur complement), removing samples deletes rows
and columns (the rank-k downdate ``H − H[:, R] H[R, R]⁻¹ H[R, :]``).

The state bounds the error of its tracked inverse ``H ≈ A⁻¹`` (``A = K + ρW⁻¹``): each
Woodbury correction ``U core Uᵀ`` adds about ``ε ‖U‖² ‖core‖`` (2-norm, at the scale of the H
it corrects), and the sum since the last factorisation is ``e_H``.  A correction that shrinks
H by orders of magnitude (weights made tiny, ``ρ/w`` huge) cancels the new, small H against the
old one: ``‖A‖ e_H`` (a bound on ``‖I − AH‖``) then exceeds ``_INV_RTOL`` and the error of a
fresh factorisation (``ε n κ²``, κ the condition number of the diagonally scaled A), and the
update is redone from the stored kernel matrix.  ``e_H`` also enters the cores' noise: a
removal's ``H_RR``, the reweight core ``I + ΔH_SS`` and the Schur complement
``K_BB + ρW_B⁻¹ − BᵀHB`` of an addition are not used within their margins of it (the way back
from a tiny weight divides by what is left of those digits).

Targets of shape (n, K) give K outputs sharing the kernel matrix and tracked inverse (see
:mod:`~deltafit._states._squared_stats`).  Sample weights make the system
``(K + ρW⁻¹) α = t`` over the samples of positive weight
(:mod:`~deltafit._states._squared_dual_weighted`); the certified residual is then
``2C sqrt((w∘r)ᵀK(w∘r))`` (:meth:`DualSquaredState.gradient_norm`).  Without weights every
update runs the unweighted code, bitwise as before weights existed.

``ρ = 1/(2C)`` maps Lee et al.'s ρ onto the canonical objective of ARCHITECTURE.md, "The
problem".
"""

from __future__ import annotations

import math
from collections.abc import Callable

import numpy as np
from scipy import linalg

from deltafit._linalg._compensated import _EPS
from deltafit._linalg._gram import GramCache
from deltafit._linalg._lowrank import LowRankInverse
from deltafit._linalg._spd import _correction_error, _spd_core, _spd_inverse, _symmetrized
from deltafit._states._protocol import ModelState, check_symmetric, checked
from deltafit._states._saved_checks import check_kernel_rows, check_residual
from deltafit._states._squared_dual_weighted import (
    _INV_RTOL,
    _REFINE_COND,
    _SCHUR_MARGIN,
    WeightedDualUpdates,
    _check_finite_alpha,
    _drifted,
    _Unreliable,
)
from deltafit._states._squared_stats import (
    _CORE_MARGIN,
    _FRESH_FACTOR,
    _inv_err,
    _is_weighted,
    _masked,
    _n_outputs,
    _out_shape,
    _padded,
    _scaled_rows,
)

__all__ = ["DualSquaredState"]


class DualSquaredState(WeightedDualUpdates, ModelState):
    """Exact state of ``(K + ρI) α = y`` over the ledger's slots (kernel ridge / LS-SVM dual);
    with sample weights ``(K + ρW⁻¹) α = y`` over the slots of positive weight.

    Adding samples borders the system (Schur complement), removing samples deletes rows and
    columns (the rank-k downdate ``H − H[:, R] H[R, R]⁻¹ H[R, :]``), relabelling changes only
    ``y`` and costs ``O(n k)``.  Inactive slots have zero rows and columns in ``H`` once folded.

    Several outputs share the state: fitted on targets of shape (n, K), :attr:`y` and
    :attr:`alpha` have shape (capacity, K), one column per output, and the one kernel matrix
    and tracked inverse serve every column.  An update costs the single-output update plus
    O(n·K·k) for ``k`` changed samples; refinement and drift tests are per column.

    Parameters
    ----------
    opts : SolverOptions
        The fitted problem; ``ρ = 1/(2C)``.
    max_rank : int
        Pending Woodbury rank before a fold; larger blocks are applied to the base at once.

    Attributes
    ----------
    alpha : ndarray of shape (capacity,) or (capacity, K)
        The solution by slot (zero at inactive slots).
    y : ndarray of shape (capacity,) or (capacity, K)
        The targets by slot (zero at inactive slots).
    active : ndarray of bool, shape (capacity,)
        The slots in the system: the live samples (of positive weight, when weighted).
    w : ndarray of shape (capacity,) or None
        The weights by slot (0 at free slots and at samples of weight 0); None while every
        weight is 1.
    """

    kind, kernel, loss_names = "dual_squared", True, ("squared",)
    warm_per_sample = True
    closed_form = True

    def __init__(self, opts, max_rank=64):
        super().__init__(opts, max_rank)
        self.rho = float(opts.rho)

    def fit(self, K, y, capacity, coef0=None, w=None):
        """Solve ``(K + ρI) α = y`` (with weights: ``(K + ρW⁻¹) α = y``) from scratch.

        Parameters
        ----------
        K : ndarray of shape (n, n)
            The kernel matrix of the samples, stored at slots ``0..n-1``.
        y : ndarray of shape (n,) or (n, K)
            The encoded targets; K columns give K outputs sharing the factorisation.
        capacity : int
            The ledger's capacity (≥ n).
        coef0 : ignored
        w : ndarray of shape (n,) or None, default=None
            Non-negative sample weights.  The system is then ``(K + ρW⁻¹)α = y`` over the
            samples of positive weight (diagonal ``ρ/w_i``); a sample of weight 0 has
            ``α_i = 0`` and stays out of the system (inactive in the state, its kernel values
            and target kept for a later reweight).  None: every weight is 1 (bitwise the
            unweighted state).

        Returns
        -------
        self
        """
        y = np.asarray(y, dtype=np.float64)
        n = K.shape[0]
        self.gram = GramCache(K, capacity)
        self.y = np.zeros((capacity,) + _out_shape(_n_outputs(y)))
        self.y[:n] = y
        self.active = np.zeros(capacity, dtype=bool)
        self.active[:n] = True
        self.w = None
        if w is not None:
            self.w = np.zeros(capacity)
            self.w[:n] = w
            self.active[:n] = self.w[:n] > 0
        self.alpha = np.zeros(self.y.shape)
        self.inv = LowRankInverse(np.zeros((capacity, capacity)), self.max_rank)
        self.n_refactor = 0
        self.n_folds = 0
        self._dirty, self._clean = [], []  # removed slots before / after exact zeroing
        self._muted = []  # slots of weight 0 (still in the ledger) to zero exactly
        self._refactor()
        return self

    # ----------------------------------------------------------------- weights
    # ``w`` is None while every weight is 1 (the diagonal is the scalar ρ: the unweighted
    # code, bitwise); else the weight by slot, 0 at free slots and at samples of weight 0,
    # which are inactive: ``active`` is ``w > 0`` over the ledger's live slots.
    def _diag_at(self, slots):
        """The diagonal ``ρ/w_i`` of the system at (active) ``slots``; the scalar ρ when
        unweighted."""
        return self.rho if self.w is None else self.rho / self.w[slots]

    def _diag_times(self, a, w=None, active=None):
        """``D a`` for the diagonal ``D = ρW⁻¹`` on the active slots (0 elsewhere): ``ρ a``
        when unweighted.  ``w``, ``active``: the weights and active set to use (default: the
        state's)."""
        w = self.w if w is None else w
        if w is None:
            return self.rho * a
        active = self.active if active is None else active
        d = np.zeros(w.shape[0])
        d[active] = self.rho / w[active]
        return _scaled_rows(d, a)

    def _diag_min(self, w=None, active=None):
        """The smallest diagonal entry ``ρ / max w`` over the active slots (ρ unweighted)."""
        w = self.w if w is None else w
        if w is None:
            return self.rho
        active = self.active if active is None else active
        top = float(np.max(w[active], initial=0.0))
        return self.rho / top if top > 0 else self.rho

    @property
    def capacity(self):
        return self.y.shape[0]

    @property
    def n_outputs(self):
        """None when fitted on targets of shape (n,), K when fitted on shape (n, K)."""
        return None if self.y.ndim == 1 else self.y.shape[1]

    @property
    def refine_each(self):
        """Whether the system is ill-conditioned enough to refine α after every update."""
        return float(np.max(np.diagonal(self.gram.K))) > _REFINE_COND * self._diag_min()

    def _inverse_drifted(self, err, w, active):
        """Whether a tracked inverse whose corrections carry the error bound ``err`` (2-norm)
        must be refactorised for the system with weights ``w`` on the slots ``active``.

        ``‖I − A H‖ ≤ ‖A‖ err`` bounds the relative error of H as the inverse of
        ``A = K + ρW⁻¹`` and, through it, the relative error of the α a Woodbury step computes
        (``‖A‖ ≤ trace(K_A) + max ρ/w``).  Above ``_INV_RTOL`` the inverse is refactorised,
        unless it stays within ``_FRESH_FACTOR`` of the same bound for a fresh factorisation,
        ``ε n κ²`` with κ the condition number of the diagonally scaled matrix
        ``diag(A)^-½ A diag(A)^-½`` (Cholesky's accuracy does not depend on the diagonal's
        spread), ``κ ≤ n max_i (1 + K_ii w_i / ρ)``: ill-conditioned systems are refined after
        every update instead (see :attr:`refine_each`).  A correction that shrinks H by orders
        of magnitude (weights made tiny: ``ρ/w`` huge) cancels the digits of the new, small H
        against the old, large one: its error, ``ε ‖U‖² ‖core‖`` at the old scale, is then far
        above both bounds."""
        if not math.isfinite(err):
            return True
        A = np.flatnonzero(active)
        if A.size == 0 or err == 0.0:
            return False
        kd = np.diagonal(self.gram.K)[A]
        trace = float(np.sum(kd))
        d = np.full(A.size, self.rho) if w is None else self.rho / w[A]
        rel = err * (trace + float(np.max(d)))
        if not rel > _INV_RTOL:
            return False
        kappa = A.size * (1.0 + float(np.max(kd / d)))
        return not rel <= _FRESH_FACTOR * _EPS * A.size * kappa * kappa

    @staticmethod
    def _removal_core(H_RR, err):
        """``-H_RR⁻¹`` for a removal (H_RR SPD), or None when it is not numerically SPD or
        its smallest eigenvalue is within ``_CORE_MARGIN`` of the tracked inverse's error bound
        ``err`` (the downdate would then cancel the digits H still has)."""
        if err > 0.0:
            if not np.all(np.isfinite(H_RR)):
                return None
            lam = float(np.linalg.eigvalsh(0.5 * (H_RR + H_RR.T))[0])
            if not lam > _CORE_MARGIN * err:
                return None
        return _spd_core(H_RR)

    def _refactor(self):
        A = np.flatnonzero(self.active)
        n = A.size
        dense = n == 0 or A[-1] == n - 1  # the active slots are 0..n-1: slices, no gathers
        G = np.array(self.gram.K[:n, :n], order="F") if dense else self.gram.sub(A)
        G.flat[:: n + 1] += self._diag_at(A)
        HA, c = _spd_inverse(G, "K + ρI")
        if dense and n == self.capacity:
            H0 = HA
        else:
            H0 = np.zeros((self.capacity, self.capacity), order="F")
            if dense:
                H0[:n, :n] = HA
            else:
                H0[np.ix_(A, A)] = HA
        self.inv.reset(H0)
        alpha = np.zeros(self.y.shape)
        alpha[A] = linalg.cho_solve(c, self.y[A], check_finite=False)
        _check_finite_alpha(alpha)
        self.alpha = alpha
        self._err = 0.0  # the corrections' error bound (see _inverse_drifted)
        self._clean.extend(getattr(self, "_dirty", []))
        self._dirty = []
        self._muted = []  # H0 was rebuilt with zeros there
        self.n_refactor += 1

    def residual(self):
        """``y − (K + ρI) α`` (weighted: ``y − (K + ρW⁻¹) α``) on the active slots (zero
        elsewhere), without copying K; (capacity,) or (capacity, K)."""
        a = _masked(self.alpha, self.active)
        return _masked(self.y - (self.gram.K @ a + self._diag_times(a)), self.active)

    def _gradient_coefs(self):
        """The active slots and the coefficients ``w ∘ r`` of ``∇J = −2C Σ w_i r_i Φ(x_i)``
        (``r`` the residual; ``w = 1`` unweighted)."""
        A = np.flatnonzero(self.active)
        r = self.residual()[A]
        if self.w is not None:
            r = _scaled_rows(self.w[A], r)
        return A, r

    def gradient_norms(self):
        """RKHS norm of each output's ∇J_k at the stored α_k, ``2C sqrt(r_kᵀ K r_k)`` (see
        :meth:`gradient_norm`), O(n²·K).

        Returns
        -------
        ndarray of shape (K,)
            One norm per column; shape (1,) for a state fitted on targets of shape (n,).
            ``‖β_k − β_k*‖ ≤ gradient_norms()[k]`` in the RKHS.
        """
        if self.y.ndim == 1:
            return np.array([self.gradient_norm()])
        A, r = self._gradient_coefs()
        q = np.einsum("ij,ij->j", r, self.gram.K[np.ix_(A, A)] @ r)
        return np.sqrt(np.maximum(q, 0.0)) / self.rho

    def gradient_norm(self):
        """RKHS norm of ∇J at the stored α, ``2C sqrt(rᵀ K r)`` with r = y − (K + ρI)α the
        residual on the active slots (∇J = Σ g_i Φ(x_i), g = −2C r), O(n²).  With K outputs:
        the largest of :meth:`gradient_norms`, which bounds every column's ‖β_k − β_k*‖.

        With sample weights, J(β) = C Σ w_i (t_i − z_i)² + ½‖β‖² with β = Σ α_i Φ(x_i) and
        z = Kα; writing ``t − Kα = r + ρW⁻¹α`` (r = y − (K + ρW⁻¹)α, ρ = 1/(2C)),
        ∇J = β − 2C Σ w_i (t_i − z_i) Φ(x_i) = −2C Σ w_i r_i Φ(x_i): the norm is
        ``2C sqrt((w∘r)ᵀ K (w∘r))``, and J being 1-strongly convex, ‖β − β*‖ ≤ it (samples
        of weight 0 contribute nothing to ∇J)."""
        if self.y.ndim == 2:
            return float(np.max(self.gradient_norms(), initial=0.0))
        A, r = self._gradient_coefs()
        return float(np.sqrt(max(r @ (self.gram.K[np.ix_(A, A)] @ r), 0.0))) / self.rho

    def fold(self, refine=True):
        """Fold corrections, zero inactive rows/columns exactly; with ``refine``, refine α
        (and re-invert if that shows drift).  Without ``refine`` α is untouched."""
        self.n_folds += 1
        if self.inv.rank == 0:
            return
        self.inv.fold()
        self._zero_dirty()
        if not refine:
            return
        d = self.inv.H0 @ self.residual()
        self.alpha = self.alpha + d
        if _drifted(d, self.alpha):
            self._refactor()

    def _zero_dirty(self):
        """Zero, exactly, the rows and columns of the slots removed (or given weight 0) since
        the last fold; the removed ones become reusable."""
        dead = np.array(sorted(set(self._dirty)), dtype=np.intp)
        muted = np.array(sorted(set(getattr(self, "_muted", []))), dtype=np.intp)
        for z in (dead, muted):
            if z.size:
                self.inv.H0[z, :] = 0.0
                self.inv.H0[:, z] = 0.0
        self._clean.extend(dead.tolist())
        self._dirty = []
        self._muted = []

    def tracked_inverse(self):
        return self.inv.matvec

    def counters(self):
        return {
            "n_refactor": int(self.n_refactor),
            "n_folds": int(self.n_folds),
            "pending_rank": int(self.inv.rank),
        }

    def reusable_slots(self):
        """Removed slots whose rows and columns are now exactly zero: safe to reuse."""
        clean, self._clean = self._clean, []
        return clean

    def apply_change(self, change):
        """Apply a :class:`~deltafit._states._protocol.DataChange`; with sample weights (the
        ledger's or the change's), through :meth:`_apply_weighted`."""
        if _is_weighted(change) or self.w is not None:
            return self._apply_weighted(change)
        self.apply(
            rem=change.remove_slots,
            add=change.add_slots,
            K_cross=change.K_cross,
            K_new=change.K_new,
            y_add=change.t_add,
            rel=change.relabel_slots,
            dy=change.target_shift,
            capacity=change.ledger.capacity,
        )

    def warm_coef(self, slots):
        """``α`` at ``slots``: (len(slots),) or (len(slots), K)."""
        return self.alpha[slots].copy()

    def ensure_capacity(self, cap):
        if cap <= self.capacity:
            return
        self.fold()
        old = self.capacity
        self.gram.ensure_capacity(cap)
        for name in ("y", "alpha", "active") + (() if self.w is None else ("w",)):
            a = getattr(self, name)
            b = np.zeros((cap,) + a.shape[1:], dtype=a.dtype)
            b[:old] = a
            setattr(self, name, b)
        self.inv.resize(cap)

    def take(self, keep, capacity):
        self.fold()
        self._dirty, self._clean, self._muted = [], [], []
        n = len(keep)
        self.gram.take(keep, capacity)
        for name in ("y", "alpha", "active") + (() if self.w is None else ("w",)):
            a = getattr(self, name)
            b = np.zeros((capacity,) + a.shape[1:], dtype=a.dtype)
            b[:n] = a[keep]
            setattr(self, name, b)
        self.inv.take(keep)
        self.inv.resize(capacity)

    def apply(
        self,
        rem=None,
        add=None,
        K_cross=None,
        K_new=None,
        y_add=None,
        rel=None,
        dy=None,
        capacity=None,
    ):
        """Relabel ``rel`` by ``dy``, remove slots ``rem``, add slots ``add``; all or nothing.

        ``y_add`` and ``dy`` are (k,) or, with K outputs, (k, K).  ``capacity``: the ledger's
        capacity, which the state grows to first.  On ValueError α is exactly as before (padded
        to the new capacity).
        """
        alpha0 = self.alpha
        try:
            if capacity is not None:
                self.ensure_capacity(capacity)
            return self._apply(rem, add, K_cross, K_new, y_add, rel, dy)
        except ValueError:
            alpha = np.zeros((self.capacity,) + alpha0.shape[1:])
            alpha[: alpha0.shape[0]] = alpha0
            self.alpha = alpha
            raise

    def _apply(self, rem, add, K_cross, K_new, y_add, rel, dy):
        k_rem = 0 if rem is None else len(rem)
        k_add = 0 if add is None else len(add)
        if k_rem + k_add > self.max_rank:
            # a large block: Woodbury applied to the base at once (BLAS-3, O(n² k)).  The base
            # cannot be rolled back, so on any failure it is rebuilt exactly: for the new data
            # when the block formula was merely unreliable, for the unchanged model otherwise.
            before = (self.y.copy(), self.active.copy(), list(self._dirty))
            try:
                return self._woodbury(None, rem, add, K_cross, K_new, y_add, rel, dy, k_rem, k_add)
            except _Unreliable:
                self.y, self.active, self._dirty = (
                    before[0].copy(),
                    before[1].copy(),
                    list(before[2]),
                )
                try:
                    return self._apply_refactor(rem, add, K_cross, K_new, y_add, rel, dy)
                except ValueError:
                    self._rebuild(before)
                    raise
            except ValueError:
                self._rebuild(before)
                raise
        if not self.inv.room(k_rem + k_add):
            self.fold()
        mark = self.inv.mark()
        dirty0 = list(self._dirty)
        try:
            return self._woodbury(mark, rem, add, K_cross, K_new, y_add, rel, dy, k_rem, k_add)
        except ValueError:
            self.inv.rollback(mark)
            self._dirty = dirty0
            raise

    def _rebuild(self, before):
        """Restore labels / active set and recompute the inverse exactly for them."""
        self.y, self.active, self._dirty = before
        self._refactor()

    def _woodbury(self, mark, rem, add, K_cross, K_new, y_add, rel, dy, k_rem, k_add):
        """Sherman–Morrison–Woodbury for a relabel, a removal block and an addition block.

        ``mark`` is the rollback token for pending corrections, or None to apply the blocks to
        the base at once (large batches).
        """
        direct = mark is None
        put = self.inv.apply_now if direct else self.inv.add
        alpha = self.alpha.copy()
        y = self.y.copy()
        active = self.active.copy()
        err = getattr(self, "_err", 0.0)
        dirty0 = list(self._dirty)
        if rel is not None and len(rel):
            alpha += self.inv.columns(rel) @ dy
            y[rel] += dy
        if k_rem:
            HR = self.inv.columns(rem)
            core = self._removal_core(HR[rem], err)  # = -H_RR⁻¹; H_RR is SPD
            if core is None:
                if direct:
                    raise _Unreliable()
                self.inv.rollback(mark)
                return self._apply_refactor(rem, add, K_cross, K_new, y_add, rel, dy)
            alpha += HR @ (core @ alpha[rem])
            put(HR, core)
            err += _correction_error(HR, core)
            self._dirty.extend(np.asarray(rem).tolist())
            alpha[rem] = 0.0
            y[rem] = 0.0
            active[rem] = False
        if k_add:
            self.gram.write(add, K_cross, K_new)
            B = K_cross * active[:, None]
            HB = self.inv.matvec(B)
            S = K_new - B.T @ HB
            S.flat[:: k_add + 1] += self.rho
            # S ⪰ ρI in exact arithmetic; far below that, the tracked inverse has drifted.  And
            # S = K_new + ρ − BᵀHB cancels: H is accurate to about ε·cond(K + ρI) (cond bounded
            # by trace(K)/ρ), so BᵀHB carries an error of that size times the kernel values;
            # an S within _SCHUR_MARGIN of it is unreliable and the addition is redone exactly.
            lam = np.linalg.eigvalsh(0.5 * (S + S.T))[0]
            trace = float(np.sum(np.diagonal(self.gram.K)[active]))
            noise = np.finfo(float).eps * (trace / self.rho + 1.0) * float(np.max(np.diag(K_new)))
            noise += err * float(np.sum(B * B))  # BᵀHB's error from the corrections
            ok = lam > 0.5 * self.rho and lam > _SCHUR_MARGIN * noise
            core = _spd_core(S) if ok else None  # = -S⁻¹
            if core is not None:
                core = -core  # = S⁻¹
            else:
                if direct:
                    raise _Unreliable()
                self.inv.rollback(mark)
                return self._apply_refactor(rem, add, K_cross, K_new, y_add, rel, dy)
            U = -HB
            U[add] = np.eye(k_add)
            y[add] = y_add
            active[add] = True
            alpha += U @ (core @ (y_add - B.T @ alpha))
            put(U, core)
            err += _correction_error(U, core)
        if self._inverse_drifted(err, None, active):
            # the corrections may have lost too many digits of H: redo the update exactly
            if direct:
                raise _Unreliable()
            self.inv.rollback(mark)
            self._dirty = dirty0
            return self._apply_refactor(rem, add, K_cross, K_new, y_add, rel, dy)
        if self.refine_each and not direct:
            # ill-conditioned system (ρ small next to the kernel values): one step of
            # iterative refinement against the exact kernel matrix after every update
            a = _masked(alpha, active)
            r = _masked(y - (self.gram.K @ a + self.rho * a), active)
            alpha = alpha + _masked(self.inv.matvec(r), active)
        _check_finite_alpha(alpha)
        self.alpha, self.y, self.active = alpha, y, active
        self._err = err
        if direct:
            self._refine_once()

    def _refine_once(self):
        """One refinement step against the exact kernel matrix, as in a fold; refactorise
        when it moves α beyond the drift tolerance."""
        self._zero_dirty()
        d = self.inv.H0 @ self.residual()
        self.alpha = self.alpha + d
        if _drifted(d, self.alpha):
            self._refactor()

    def _apply_refactor(self, rem, add, K_cross, K_new, y_add, rel, dy):
        saved = (self.y.copy(), self.active.copy(), self.alpha, self.inv.H0, self.inv.rank)
        dirty0 = list(self._dirty)
        try:
            if rel is not None and len(rel):
                self.y[rel] += dy
            if rem is not None and len(rem):
                self.y[rem] = 0.0
                self.active[rem] = False
            if add is not None and len(add):
                self.gram.write(add, K_cross, K_new)
                self.y[add] = y_add
                self.active[add] = True
            if rem is not None and len(rem):
                self._dirty.extend(np.asarray(rem).tolist())  # zero after the refactorisation
            self._refactor()
            self.n_folds += 1
        except ValueError:
            self.y, self.active, self.alpha, H0, rank = saved
            self._dirty = dirty0
            self.inv.H0 = H0
            self.inv.rank = rank
            raise

    # ------------------------------------------------------------ persistence
    def to_arrays(self, keep):
        """``state_K`` (n, n), ``state_H`` (n, n) and ``state_alpha`` ((n,) or (n, K)) over the
        live slots ``keep``, and ``state_inv_err`` (1,): the error bound of the tracked
        inverse (see :meth:`_inverse_drifted`), carried on by the loaded state."""
        self.fold(refine=False)
        self.inv.H0 = _symmetrized(self.inv.H0)
        return {
            "state_K": self.gram.sub(keep),
            "state_alpha": self.alpha[keep],
            "state_H": self.inv.H0[np.ix_(keep, keep)],
            "state_inv_err": np.array([getattr(self, "_err", 0.0)]),
        }

    @classmethod
    def saved_shapes(cls, n, p, n_outputs=None):
        """``{name: shape}`` of the arrays :meth:`to_arrays` writes for ``n`` live samples
        (``p`` unused); ``n_outputs``: None for targets of shape (n,) (``state_alpha``: (n,)),
        K for targets of shape (n, K) (``state_alpha``: (n, K))."""
        return {"state_K": (n, n), "state_alpha": (n,) + _out_shape(n_outputs), "state_H": (n, n)}

    @classmethod
    def optional_shapes(cls, n, p, n_outputs=None):
        """``{name: shape}`` of the optional arrays: ``state_inv_err`` (1,), the tracked
        inverse's error bound (files written before it was kept lack it; ``n_outputs`` as in
        :meth:`saved_shapes`)."""
        return {"state_inv_err": (1,)}

    @classmethod
    def from_arrays(cls, arrays, opts, *, y, capacity, max_rank=64, result=None):
        """The state written by :meth:`to_arrays`; the number of outputs is taken from ``y``
        (the live targets, (n,) or (n, K)).  ValueError on arrays of inconsistent shapes."""
        st = cls(opts, max_rank)
        y = np.asarray(y, dtype=np.float64)
        n = y.shape[0]
        n_outputs = _n_outputs(y) if y.ndim in (1, 2) else -1
        K, alpha, H = checked(arrays, cls.saved_shapes(n, None, n_outputs), "kernel state")
        check_symmetric(K, "kernel matrix")
        check_symmetric(H, "tracked inverse")
        st.gram = GramCache(K, capacity)
        st.y = _padded(y, capacity)
        st.active = np.zeros(capacity, dtype=bool)
        st.active[:n] = True
        st.alpha = _padded(alpha, capacity)
        H0 = np.zeros((capacity, capacity), order="F")
        H0[:n, :n] = H
        st.w = None
        if "ledger_w" in arrays:  # the ledger's weights (checked by the ledger)
            w = np.asarray(arrays["ledger_w"], dtype=np.float64)
            if w.shape != (n,):
                raise ValueError(
                    "corrupt model file: the sample weights do not match the kernel state"
                )
            st.w = np.zeros(capacity)
            st.w[:n] = w
            st.active[:n] = w > 0
            off = np.flatnonzero(~st.active[:n])
            H0[off, :] = 0.0  # samples of weight 0 are out of the system
            H0[:, off] = 0.0
        st.inv = LowRankInverse(H0, max_rank)
        st._dirty, st._clean, st._muted = [], [], []
        if "state_inv_err" in arrays:  # the saved inverse carries the corrections' error
            st._err = _inv_err(checked(arrays, {"state_inv_err": (1,)}, "kernel state")[0])
        else:  # an older file: a fresh factorisation's error at the saved inverse's scale
            st._err = _EPS * max(n, 1) * float(np.trace(H)) if n else 0.0
        st.n_refactor = 0
        st.n_folds = 0
        return st

    # ------------------------------------------------------- load-time checks
    def check_saved_solution(self, arrays: dict, solver: dict | None = None) -> None:
        """``(K + ρI) α = y`` (weighted: ``W(Kα − y) + ρα = 0``, which states both
        ``(K + ρW⁻¹)α = y`` over the samples of positive weight and ``α_i = 0`` where
        ``w_i = 0``) to ``1e-6`` of its scale.  See :meth:`ModelState.check_saved_solution`."""
        norm = np.linalg.norm
        K, alpha, y = arrays["state_K"], arrays["state_alpha"], arrays["ledger_y"]
        w = arrays.get("ledger_w")
        if w is None:
            residual = norm(K @ alpha + self.rho * alpha - y)
            scale = (norm(K) + self.rho) * norm(alpha) + norm(y)
        else:
            w = np.asarray(w, dtype=np.float64)
            wmax = float(np.max(w, initial=0.0))
            if np.ndim(alpha) == 2:
                w = w[:, None]
            residual = norm(w * (K @ alpha - y) + self.rho * alpha)
            scale = (wmax * norm(K) + self.rho) * norm(alpha) + wmax * norm(y)
        check_residual(float(residual), float(scale))

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
