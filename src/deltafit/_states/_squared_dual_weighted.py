"""The weighted updates of the kernel squared-loss state, and what its two modules share.

With sample weights (the data term ``C Σ w_i (t_i − z_i)²``, ``w_i ≥ 0``) the dual state of
:mod:`~deltafit._states._squared_dual` solves ``(K + ρW⁻¹) α = t`` over the samples of
positive weight (diagonal ``ρ/w_i`` per slot).  A sample of weight 0 is inactive in the state
(``α_i = 0``, zero row and column in the tracked inverse) but stays in the ledger, its kernel
values and target kept; a reweight between positive weights is a diagonal Woodbury correction
(Lee et al., "Exact incremental and decremental learning for LS-SVM", Thm 1 and Cor. 1–4 with
the diagonal per slot), 0 → w borders the system and w → 0 deletes the slot from it.

:class:`WeightedDualUpdates` holds those updates as methods of
:class:`~deltafit._states._squared_dual.DualSquaredState` (a mixin: it works on that state's
attributes); :class:`_WeightedPlan` is a weighted change in slot terms.  The tolerances, the
``_Unreliable`` signal and the finiteness and drift tests are shared with the unweighted code.
"""

from __future__ import annotations

import numpy as np

from deltafit._linalg._compensated import _EPS
from deltafit._linalg._spd import _CORE_RTOL, _correction_error, _spd_core
from deltafit._states._squared_stats import _DRIFT_RTOL, _masked, _norms

__all__ = ["WeightedDualUpdates"]

# A Schur complement of added samples within this factor of its rounding noise has lost too many
# digits to cancellation; the addition is then redone from the exact kernel matrix.
_SCHUR_MARGIN = 1e3
# Above this ratio of the largest kernel value to ρ, the dual state refines α after every update
# (an O(n²) product with the stored kernel matrix) instead of only at folds.
_REFINE_COND = 1e3
# Bound (relative, ``‖A‖·e_H``) on the error the dual state's Woodbury corrections may leave in
# its tracked inverse ``H ≈ A⁻¹`` (``A = K + ρW⁻¹``) before it is refactorised from the stored
# kernel matrix, unless that error stays within _FRESH_FACTOR of a fresh factorisation's.
_INV_RTOL = 1e-10


def _check_finite_alpha(alpha):
    """ValueError unless the dual coefficients are finite (the magnitude cap of
    :mod:`deltafit.utils._validation` keeps the residual finite then)."""
    if not np.all(np.isfinite(alpha)):
        raise ValueError(
            "the solution overflowed (non-finite coefficients): the kernel values are too large "
            "for float64; rescale X (or use a smaller C)"
        )


def _drifted(d, alpha):
    """Whether a refinement step ``d`` moved ``alpha`` (already including ``d``) by more than
    ``_DRIFT_RTOL`` (relative, per column); True when either is not finite.  The norms are
    taken after scaling by the largest magnitude, so they do not overflow."""
    if not (np.all(np.isfinite(d)) and np.all(np.isfinite(alpha))):
        return True
    s = max(float(np.max(np.abs(d), initial=0.0)), float(np.max(np.abs(alpha), initial=0.0)))
    if s == 0.0:
        return False
    return bool(np.any(_norms(d / s) > _DRIFT_RTOL * np.maximum(_norms(alpha / s), 1e-300 / s)))


class _Unreliable(Exception):
    """A block Woodbury core was numerically unreliable; refactorise from the exact data."""


class _WeightedPlan:
    """A weighted change of the dual state by slot: relabels ``rel`` by ``dy``; removals
    ``rem_all`` (``rem`` active, ``rem_quiet`` of weight 0); weights set to 0 (``mute``),
    changed between positive values (``diag`` to ``diag_w``) or made positive (``unmute`` to
    ``unmute_w``); additions ``add`` of weights ``add_w``, targets ``y_add`` and kernel blocks
    ``K_cross``, ``K_new``."""

    def __init__(self):
        empty = np.zeros(0, dtype=np.intp)
        self.rel = self.rem_all = self.rem = self.rem_quiet = self.mute = empty
        self.diag = self.unmute = self.add = empty
        self.diag_w = self.unmute_w = self.add_w = np.zeros(0)
        self.dy = self.y_add = self.K_cross = self.K_new = None

    @property
    def rank(self):
        """The rank of the Woodbury corrections."""
        return (
            self.rem.size
            + self.mute.size
            + self.diag.size
            + self.unmute.size
            + int(np.count_nonzero(self.add_w > 0))
        )


class WeightedDualUpdates:
    """The weighted changes of :class:`~deltafit._states._squared_dual.DualSquaredState` (a
    mixin: ``gram``, ``inv``, ``alpha``, ``y``, ``active``, ``w`` and the slot lists are that
    state's)."""

    def _apply_weighted(self, change):
        """A change with sample weights: relabels, removals, weight changes and additions as
        Woodbury corrections of ``H = (K + ρW⁻¹)⁻¹`` over the active slots; all or nothing.

        With ``D = ρW⁻¹`` (Lee et al., Thm 1 and Cor. 1–4, with the diagonal per slot):

        * a removal, or a weight set to 0, deletes the slot from the system (the rank-k
          downdate ``H − H[:, R] H[R, R]⁻¹ H[R, :]``); a sample of weight 0 stays in the
          ledger (its target and kernel values are kept) with ``α_i = 0``;
        * a weight change ``w → w'`` (both positive) changes one diagonal entry by
          ``δ = ρ/w' − ρ/w``: ``H' = H − H[:, S] (Δ⁻¹ + H[S, S])⁻¹ H[S, :]`` with
          ``Δ = diag(δ)``, computed as ``(I + Δ H[S, S])⁻¹ Δ`` (no ``1/δ``); and
          ``α' = α − H[:, S] (I + ΔH[S,S])⁻¹ Δ α_S``.  ``I + ΔH[S, S]`` has determinant
          ``det(A')/det(A) > 0``; it comes near 0 only when a weight grows by orders of
          magnitude, and a core too close to its rounding noise is not used (the update then
          refactorises);
        * an addition of weight ``w > 0``, or a weight 0 made positive, borders the system:
          the Schur complement ``k_ii + ρ/w_i − bᵀHb`` (≥ ρ/w_i exactly);
        * a relabel moves α by ``H[:, i] Δt_i`` (nothing for a sample of weight 0).

        On ValueError the state is exactly as before (α padded to the new capacity).
        """
        alpha0, w0 = self.alpha, self.w
        lists = (list(self._dirty), list(self._clean), list(self._muted))
        try:
            self.ensure_capacity(change.ledger.capacity)
            if self.w is None:  # the first weighted change: every live weight was 1
                self.w = self.active.astype(np.float64)
            plan = self._weighted_plan(change)
            if plan.unmute.size and np.intersect1d(plan.unmute, self._muted).size:
                self.fold()  # their rows and columns of H must be exactly zero first
            k = plan.rank
            if k > self.max_rank:
                before = (
                    self.y.copy(),
                    self.active.copy(),
                    self.w.copy(),
                    list(self._dirty),
                    list(self._muted),
                    list(self._clean),
                )
                try:
                    return self._woodbury_weighted(None, plan)
                except _Unreliable:
                    self._put_back(before)
                    try:
                        return self._refactor_weighted(plan)
                    except ValueError:
                        self._put_back(before)
                        self._refactor()
                        raise
                except ValueError:
                    self._put_back(before)
                    self._refactor()
                    raise
            if not self.inv.room(k):
                self.fold()
            mark = self.inv.mark()
            try:
                return self._woodbury_weighted(mark, plan)
            except _Unreliable:
                self.inv.rollback(mark)
                self._dirty, self._clean, self._muted = (list(a) for a in lists)
                return self._refactor_weighted(plan)
            except ValueError:
                self.inv.rollback(mark)
                raise
        except ValueError:
            alpha = np.zeros((self.capacity,) + alpha0.shape[1:])
            alpha[: alpha0.shape[0]] = alpha0
            self.alpha = alpha
            if w0 is None:
                self.w = None
            else:
                w = np.zeros(self.capacity)
                w[: w0.shape[0]] = w0
                self.w = w
            self._dirty, self._clean, self._muted = (list(a) for a in lists)
            raise

    def _put_back(self, before):
        """Restore targets, active set, weights and the slot lists saved before a block."""
        y, active, w, dirty, muted, clean = before
        self.y, self.active, self.w = y.copy(), active.copy(), w.copy()
        self._dirty, self._muted, self._clean = list(dirty), list(muted), list(clean)

    def _weighted_plan(self, change):
        """The change in slot terms, split by what each part does to the system."""
        w, active = self.w, self.active
        P = _WeightedPlan()
        if change.relabel_slots is not None and len(change.relabel_slots):
            P.rel = np.asarray(change.relabel_slots, dtype=np.intp)
            P.dy = np.asarray(change.target_shift, dtype=np.float64)
        if change.remove_slots is not None and len(change.remove_slots):
            rem = np.asarray(change.remove_slots, dtype=np.intp)
            P.rem_all = rem
            P.rem = rem[active[rem]]
            P.rem_quiet = rem[~active[rem]]  # weight 0: already out of the system
        if change.reweight_slots is not None and len(change.reweight_slots):
            rs = np.asarray(change.reweight_slots, dtype=np.intp)
            wn = np.broadcast_to(np.asarray(change.reweight_w, dtype=np.float64), rs.shape)
            on = active[rs]
            P.mute = rs[on & (wn == 0)]
            moved = on & (wn > 0) & (wn != w[rs])
            P.diag, P.diag_w = rs[moved], wn[moved]
            up = ~on & (wn > 0)
            P.unmute, P.unmute_w = rs[up], wn[up]
        if change.add_slots is not None and len(change.add_slots):
            P.add = np.asarray(change.add_slots, dtype=np.intp)
            P.add_w = (
                np.ones(P.add.size)
                if change.w_add is None
                else np.asarray(change.w_add, dtype=np.float64)
            )
            P.K_cross, P.K_new = change.K_cross, change.K_new
            P.y_add = np.asarray(change.t_add, dtype=np.float64)
        return P

    def _woodbury_weighted(self, mark, P):
        """The Woodbury corrections of :meth:`_apply_weighted` (``mark``: the rollback token
        for pending corrections, or None to apply them to the base at once); raises
        :class:`_Unreliable` when a core is numerically unreliable."""
        direct = mark is None
        put = self.inv.apply_now if direct else self.inv.add
        rho = self.rho
        alpha, y = self.alpha.copy(), self.y.copy()
        active, w = self.active.copy(), self.w.copy()
        dirty, muted, clean = list(self._dirty), list(self._muted), list(self._clean)
        err = getattr(self, "_err", 0.0)
        if P.rel.size:
            y[P.rel] += P.dy
            on = active[P.rel]
            if on.any():
                alpha += self.inv.columns(P.rel[on]) @ P.dy[on]
        out = np.concatenate([P.rem, P.mute])
        if out.size:
            HR = self.inv.columns(out)
            if not np.all(np.isfinite(HR)):
                raise _Unreliable()
            core = self._removal_core(HR[out], err)  # = -H_RR⁻¹; H_RR is SPD
            if core is None:
                raise _Unreliable()
            alpha += HR @ (core @ alpha[out])
            put(HR, core)
            err += _correction_error(HR, core)
            alpha[out] = 0.0
            active[out] = False
            w[out] = 0.0
            dirty += P.rem.tolist()
            muted += P.mute.tolist()
        if P.rem_all.size:
            y[P.rem_all] = 0.0
            w[P.rem_all] = 0.0
            pending = set(muted)
            for slot in P.rem_quiet.tolist():  # zero rows already, or once the muted are
                (dirty if slot in pending else clean).append(slot)
        trace = float(np.sum(np.diagonal(self.gram.K)[active]))
        if P.diag.size:
            S = P.diag
            delta = rho / P.diag_w - rho / w[S]
            HS = self.inv.columns(S)
            Hss = 0.5 * (HS[S] + HS[S].T)
            G = np.eye(S.size) + delta[:, None] * Hss  # I + ΔH_SS
            if not np.all(np.isfinite(G)):
                raise _Unreliable()
            sv = np.linalg.svd(G, compute_uv=False)
            dmin = min(self._diag_min(w, active), float(np.min(rho / P.diag_w)))
            noise = (
                _EPS
                * (trace / dmin + 1.0)
                * float(np.max(np.abs(delta)))
                * float(np.max(np.abs(np.diagonal(Hss)), initial=0.0))
                * S.size
            )
            noise += float(np.max(np.abs(delta))) * err  # H_SS's error from the corrections
            if not (sv[-1] > _CORE_RTOL * max(1.0, sv[0]) and sv[-1] > _SCHUR_MARGIN * noise):
                raise _Unreliable()
            core = -np.linalg.solve(G, np.diag(delta))  # -(Δ⁻¹ + H_SS)⁻¹
            core = 0.5 * (core + core.T)
            alpha += HS @ (core @ alpha[S])
            put(HS, core)
            err += _correction_error(HS, core)
            w[S] = P.diag_w
        if P.add.size:
            self.gram.write(P.add, P.K_cross, P.K_new)
            y[P.add] = P.y_add
            w[P.add] = P.add_w
        grow = P.add[P.add_w > 0] if P.add.size else P.add
        grow_w = P.add_w[P.add_w > 0] if P.add.size else P.add_w
        Bs = np.concatenate([grow, P.unmute])
        if Bs.size:
            m = Bs.size
            wb = np.concatenate([grow_w, P.unmute_w])
            B = self.gram.K[:, Bs] * active[:, None]
            K_new = self.gram.sub(Bs)
            HB = self.inv.matvec(B)
            Sc = K_new - B.T @ HB
            Sc.flat[:: m + 1] += rho / wb
            if not np.all(np.isfinite(Sc)):
                raise _Unreliable()
            # Sc ⪰ ρW_B⁻¹ in exact arithmetic; H is accurate to about ε·cond(K + ρW⁻¹) (cond
            # bounded by trace(K)/min(ρ/w) + 1): as for the unweighted addition
            lam = np.linalg.eigvalsh(0.5 * (Sc + Sc.T))[0]
            dmin = min(self._diag_min(w, active), float(np.min(rho / wb)))
            noise = _EPS * (trace / dmin + 1.0) * float(np.max(np.diag(K_new)))
            noise += err * float(np.sum(B * B))  # BᵀHB's error from the corrections
            ok = lam > 0.5 * float(np.min(rho / wb)) and lam > _SCHUR_MARGIN * noise
            core = _spd_core(Sc) if ok else None  # = -Sc⁻¹
            if core is None:
                raise _Unreliable()
            core = -core
            U = -HB
            U[Bs] = np.eye(m)
            active[Bs] = True
            w[P.unmute] = P.unmute_w
            alpha += U @ (core @ (y[Bs] - B.T @ alpha))
            put(U, core)
            err += _correction_error(U, core)
        if self._inverse_drifted(err, w, active):
            raise _Unreliable()  # too many digits of H lost: the caller refactorises
        if self.refine_each_for(w, active) and not direct:
            a = _masked(alpha, active)
            r = _masked(y - (self.gram.K @ a + self._diag_times(a, w, active)), active)
            alpha = alpha + _masked(self.inv.matvec(r), active)
        _check_finite_alpha(alpha)
        self.alpha, self.y, self.active, self.w = alpha, y, active, w
        self._dirty, self._muted, self._clean = dirty, muted, clean
        self._err = err
        if direct:
            self._refine_once()

    def refine_each_for(self, w, active):
        """:attr:`refine_each` for the weights ``w`` on the slots ``active``."""
        return float(np.max(np.diagonal(self.gram.K))) > _REFINE_COND * self._diag_min(w, active)

    def _refactor_weighted(self, P):
        """The weighted change applied to the targets, weights and active set, then one
        refactorisation of ``K + ρW⁻¹`` (an unreliable or too large Woodbury step)."""
        saved = (
            self.y.copy(),
            self.active.copy(),
            self.w.copy(),
            self.alpha,
            self.inv.H0,
            self.inv.rank,
            list(self._dirty),
            list(self._muted),
            list(self._clean),
        )
        try:
            y, active, w = self.y.copy(), self.active.copy(), self.w.copy()
            if P.rel.size:
                y[P.rel] += P.dy
            if P.rem_all.size:
                y[P.rem_all] = 0.0
                w[P.rem_all] = 0.0
                active[P.rem_all] = False
            if P.mute.size:
                w[P.mute] = 0.0
                active[P.mute] = False
            if P.diag.size:
                w[P.diag] = P.diag_w
            if P.add.size:
                self.gram.write(P.add, P.K_cross, P.K_new)
                y[P.add] = P.y_add
                w[P.add] = P.add_w
                active[P.add] = P.add_w > 0
            if P.unmute.size:
                w[P.unmute] = P.unmute_w
                active[P.unmute] = True
            self.y, self.active, self.w = y, active, w
            self._dirty = list(self._dirty) + P.rem_all.tolist()  # zeroed by the refactor
            self._refactor()
            self.n_folds += 1
        except ValueError:
            (
                self.y,
                self.active,
                self.w,
                self.alpha,
                H0,
                rank,
                self._dirty,
                self._muted,
                self._clean,
            ) = saved
            self.inv.H0 = H0
            self.inv.rank = rank
            raise
