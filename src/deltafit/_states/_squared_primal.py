"""The exact state of the linear squared-loss model (ridge, LS-SVM primal): ``PrimalSquaredState``.

Lee et al. ("Exact incremental and decremental learning for LS-SVM"), Theorem 1 and
Corollaries 1–4, update ``w`` and the auxiliary matrix ``C = Φ[ΦᵀΦ + ρI]⁻¹Φᵀ`` by the Woodbury
identity when samples are added ``(Φ_a, y_a)`` and removed ``(Φ_r, y_r)``.  This state does the
same algebra in a numerically stabler arrangement:

* the exact sufficient statistics ``M = ΦᵀΦ + ρI`` and ``b = Φᵀy`` are kept
  (:class:`~deltafit._states._squared_stats._Statistics`), so the solution can always be
  recomputed;
* the inverse ``H = M⁻¹`` is tracked as a base plus pending Woodbury corrections
  (:class:`~deltafit._linalg._lowrank.LowRankInverse`): one sample costs O(p²) (Cor. 1, 2:
  one pass over ``H``, in scalar arithmetic by :meth:`PrimalSquaredState._apply_one`), a
  batch of ``k`` costs O(p²k) (Cor. 3, 4);
* every ``max_rank`` corrections the inverse is folded and the solution refined against the
  exact statistics (one step of iterative refinement); if the refinement shows drift the
  inverse is recomputed from scratch.  Large batches go straight to a refactorisation of the
  updated exact statistics (a symmetric rank-k product plus one Cholesky factorisation; the
  removed rows are read once, their cancellation measured as they stream through syrk).

Removing a sample of high leverage cancels digits twice, and the state guards both:

* the Woodbury core ``vᵀHv − 1`` of a removal cancels as the leverage ``vᵀM⁻¹v`` approaches 1.
  An inverse formed from a factorisation has a backward error ``E`` (``‖E‖ ≲ √p ε ‖M‖``), which
  gives ``vᵀHv`` an error ``(Hv)ᵀE(Hv) ≲ √p ε cond(M) vᵀHv``; each Woodbury correction
  ``W G⁻¹ Wᵀ`` adds an absolute error of about ``ε ‖W‖² / min|λ(G)|`` (large after adding a
  sample of large norm), which gives ``vᵀHv`` one of that times ``‖v‖²``.  The core's rounding
  noise is estimated as ``√p ε ((1 + cond(M)) Σ vᵀHv + ‖H‖ Σ‖v‖²) + e_W Σ‖v‖²``, with ``e_W``
  the corrections' errors since the last factorisation and bounds on ``‖M‖`` and ``‖M⁻¹‖``
  kept as the data change (LAPACK's condition estimate pocon at each factorisation, 1-norms at
  each fold; ``+ ‖v‖²`` for an addition, ``+ ‖W‖² / min|λ(G)|`` for a removal).  A removal's
  core within ``_CORE_MARGIN`` of its noise is not used (the update refactorises the exact
  statistics instead); after any update whose core's relative noise ``r`` could move β by
  more than ``_REFINE_RTOL`` of its norm (a certified O(p k) bound: the correction
  ``W core (V t)`` moves by at most ``‖W‖ ‖core‖ r ‖V t‖``), β is refined against the exact
  statistics (a few steps, then a refactorisation if they do not settle; two p × p passes
  that a single-sample update otherwise does not pay); and once the bound on ``cond(M)``
  passes ``_MAX_COND`` every update refactorises, so that data a fresh fit cannot factorise
  are refused alike.  A removal (or weight decrease) whose core has an eigenvalue below
  ``_AMP_RTOL`` refactorises as well: in the norm of M the downdate multiplies the tracked
  inverse's relative error by up to the inverse of that eigenvalue, and a row of large weight
  w left rounding of about ``ε w‖φ‖²`` when it entered, so that its leaving would otherwise
  leave the inverse off by ``~ε (w‖φ‖²)²`` (β is refined against the statistics, but a later
  relabel uses the inverse alone: 1e-5 relative after weights 1e5 left);
* the statistics themselves cancel: ``M + vvᵀ − vvᵀ`` keeps the rounding error of the first
  sum, ``ε‖v‖²``, for good, and ordinary rows summed into an ``M`` that holds a large one are
  rounded at its scale.  Rows whose squared norm (or product with their target) stands far
  above the median at the fit are therefore kept in a separate part of ``M`` and ``b``, summed
  through error-free transformations (Dekker's split product and Knuth's TwoSum; Ogita, Rump &
  Oishi, "Accurate sum and dot product") as unevaluated sums ``hi + lo`` that lose about 26
  bits fewer.  What cancellation still costs is bounded as it happens; once it could move β by
  more than ``_LOST_RTOL`` (relative; and more than the rounding of a fresh computation), the
  statistics are recomputed from the stored rows (``keep_data=True``) or, for a model that
  keeps no rows, the removal is refused with a ValueError.

Targets of shape (n, K) give K outputs sharing ``M``, its factor and its tracked inverse (see
:mod:`~deltafit._states._squared_stats`); sample weights make the statistics those of the rows
``√w_i φ_i`` and targets ``√w_i t_i``, and a reweight a signed Woodbury row (a decrease is a
partial removal, with its safeguards and refusals).  Without weights every update runs the
unweighted code, bitwise as before weights existed.

``ρ = 1/(2C)`` maps Lee et al.'s ρ onto the canonical objective of ARCHITECTURE.md, "The
problem".
"""

from __future__ import annotations

import math

import numpy as np
from scipy import linalg

from deltafit._linalg._compensated import _EPS
from deltafit._linalg._lowrank import LowRankInverse
from deltafit._linalg._spd import (
    _CORE_RTOL,
    _cholesky,
    _inverse_from_cholesky,
    _sym_norm1,
    _symmetric,
    _symmetrized,
    _woodbury_core,
)
from deltafit._states._protocol import ModelState, check_symmetric, checked
from deltafit._states._squared_primal_checks import PrimalSavedChecks
from deltafit._states._squared_stats import (
    _BIG_RATIO,
    _CORE_MARGIN,
    _DRIFT_RTOL,
    _FRESH_FACTOR,
    _PLAIN_ERR,
    _dense,
    _dots,
    _inv_err,
    _is_weighted,
    _n_outputs,
    _norms,
    _out_shape,
    _Reweight,
    _row_sq,
    _scaled_rows,
    _Statistics,
    _target_size,
    _weighted_rows,
    as_rows,
)

__all__ = ["PrimalSquaredState"]

# Relative error in β that the digits cancelled from the primal statistics may cause before
# they are recomputed from the rows (or, without rows, the removal is refused), unless they
# stay within _FRESH_FACTOR of the rounding of a fresh computation of the statistics (ε tr(M)).
_LOST_RTOL = 1e-10
# Above this error of β (relative, per column) that a Woodbury core's rounding noise can cause,
# β is refined against the exact statistics after the update, for at most _REFINE_STEPS steps
# before a refactorisation.
_REFINE_RTOL = 1e-11
_REFINE_STEPS = 3
# Above this bound on cond(M) the Woodbury step is not trusted at all: the update refactorises
# (and, like a fresh fit, refuses the data once the Cholesky factorisation fails).
_MAX_COND = 1e14
# A removal (or weight decrease) whose Woodbury core has an eigenvalue below this (the removed
# rows' leverage within it of 1) is applied by refactorising the exact statistics: the
# downdate would amplify the tracked inverse's relative error by up to its inverse, and the
# rounding a large-weight row left in the inverse when it entered by about as much again.
_AMP_RTOL = 1e-3
# A fit of at least this many rows per feature forms the explicit inverse at once (LAPACK
# potri, 2p³/3 flops: at most a sixth of the Gram matrix's n·p² the fit has just paid) rather
# than at the first one-sample update, which would otherwise cost O(p³) instead of O(p²).
_EAGER_INVERSE_ROWS = 4


class PrimalSquaredState(PrimalSavedChecks, ModelState):
    """Exact state of ``(ΦᵀΦ + ρI) β = Φᵀy`` under row additions, removals, relabels and
    reweights (with sample weights ``(ΦᵀWΦ + ρI) β = ΦᵀWy``, see the module docstring).

    ``M = ΦᵀΦ + ρI`` and ``b = Φᵀy`` are kept exactly (:class:`_Statistics`: BLAS syrk, large
    rows in double-double), together with the Cholesky factor from the last refactorisation;
    the explicit inverse that the one-sample Woodbury updates need is formed from that factor
    by a :meth:`fit` of at least ``_EAGER_INVERSE_ROWS`` rows per feature (where it costs a
    small share of the fit), else only when an update first asks for it.  See the module
    docstring for how a removal of high leverage is kept exact.

    Several outputs share the state: fitted on targets of shape (n, K) (say ±1 one-vs-rest
    codes of K classes, or K regression targets), ``b`` and :attr:`beta` have shape (p, K),
    one column per output, and the one matrix ``M``, its factor and its tracked inverse serve
    every column.  An update then costs the single-output update plus O(p·K·k) for ``k``
    changed rows (the Woodbury vectors ``W = H Vᵀ`` are formed once); a refactorisation is one
    Cholesky factorisation and a K-column solve.  Each column is kept and checked as a single
    output would be (double-double statistics, refinement and drift tests per column).

    Parameters
    ----------
    opts : SolverOptions
        The fitted problem; ``ρ = 1/(2C)``.
    max_rank : int
        Pending Woodbury rank before a fold; batches larger than this refactorise instead.

    Attributes
    ----------
    beta : ndarray of shape (p,) or (p, K)
        The solution, shaped like one row of the targets it was fitted on.
    stats : _Statistics
        The exact statistics ``M = ΦᵀΦ + ρI`` and ``b = Φᵀy``.
    """

    kind, kernel, loss_names = "primal_squared", False, ("squared",)
    warm_per_sample = False
    closed_form = keeps_no_rows = True

    def __init__(self, opts, max_rank=64):
        super().__init__(opts, max_rank)
        self.rho = float(opts.rho)

    # ------------------------------------------------------------------ build
    def fit(self, Phi, y, capacity=None, coef0=None, w=None):
        """Solve ``(ΦᵀWΦ + ρI) β = ΦᵀWy`` from scratch (``W = diag(w)``, ``I`` without ``w``).

        Parameters
        ----------
        Phi : ndarray of shape (n, p)
        y : ndarray of shape (n,) or (n, K)
            The encoded targets; K columns give K outputs sharing the factorisation.
        capacity, coef0 : ignored
            (per-slot storage and warm starts mean nothing to the closed form).
        w : ndarray of shape (n,) or None, default=None
            Non-negative sample weights: the statistics are those of the rows ``√w_i φ_i`` and
            targets ``√w_i y_i`` (rows of weight 0 are left out).  None: every weight is 1
            (the unweighted statistics, bitwise as before weights existed).

        Returns
        -------
        self
        """
        y = np.asarray(y, dtype=np.float64)
        _n_outputs(y)  # ValueError unless (n,) or (n, K)
        if w is not None:
            p, out = Phi.shape[1], y.shape[1:]
            Phi, y = _weighted_rows(Phi, y, w)
            if Phi is None:  # every weight 0: β = 0
                Phi, y = np.zeros((0, p)), np.zeros((0,) + out)
        self.stats = _Statistics.of_rows(Phi, y, self.rho)
        self._init_buffers(Phi.shape[1])
        self._refactor()
        self._check_finite(self.beta, self.stats.b)
        if Phi.shape[0] >= _EAGER_INVERSE_ROWS * Phi.shape[1]:
            self._ensure_inverse()  # β is untouched: only the inverse the updates need
        return self

    def fit_statistics(self, stats):
        """Solve from statistics summed elsewhere (the row blocks of a Dask collection, see
        :mod:`~deltafit._dask._stats`): ``stats`` is a :class:`_Statistics` holding
        ``M = ΦᵀWΦ + ρI`` and ``b = ΦᵀWy`` with its limits set.  Then as :meth:`fit`."""
        self.stats = stats
        self._init_buffers(stats.p)
        self._refactor()
        self._check_finite(self.beta, self.stats.b)
        return self

    def _init_buffers(self, p):
        # pending rows of the statistics: one per Woodbury rank, two for a reweight (its row
        # leaves with the old weight and comes back with the new one)
        self._P = np.zeros((2 * self.max_rank, p))
        self._s = np.zeros(2 * self.max_rank)
        self._sq = np.zeros(2 * self.max_rank)
        self._np = 0  # pending rows not yet written into M
        self.inv = LowRankInverse(np.zeros((p, p)), self.max_rank)
        self._chol = None  # Cholesky factor of M at the last refactorisation
        self._inv_ready = True  # whether inv.H0 is the inverse (else: form it from _chol)
        self.n_refactor = 0
        self.n_rebuild = 0  # recomputations of the statistics from the stored rows
        self._nM = self._nH = np.inf  # bounds on ‖M‖ and ‖M⁻¹‖ (see _core_noise)
        self._eW = 0.0  # error the Woodbury corrections added to the inverse since a factorisation

    @property
    def p(self):
        return self.stats.p

    @property
    def n_outputs(self):
        """None when fitted on targets of shape (n,), K when fitted on shape (n, K)."""
        return self.stats.n_outputs

    @property
    def b(self):
        """``b = Φᵀy`` (the parts summed and rounded): (p,) or (p, K)."""
        return self.stats.b

    def _fold_rows(self):
        r = self._np
        if r:
            P, sg = self._P[:r], self._s[:r]
            self.stats.gram(as_rows(P[sg > 0]), 1.0)
            self.stats.gram(as_rows(P[sg < 0]), -1.0)
            self._np = 0

    def _refactor(self):
        """Recompute the factor and β from the exact statistics (O(p³)); the explicit inverse
        is formed later, on demand."""
        self._fold_rows()
        c = _cholesky(self.stats.matrix(), "ΦᵀΦ + ρI")
        self.beta = linalg.cho_solve(c, self.b, check_finite=False)
        self._chol = c
        self._inv_ready = False
        self.inv.rank = 0
        self.n_refactor += 1
        rcond, self._nH = self._condition()
        self._nM = 1.0 / (rcond * self._nH) if rcond > 0.0 else np.inf
        self._eW = 0.0

    def _condition(self):
        """``(1/cond₁(M), ‖M⁻¹‖₁)`` estimated from the held Cholesky factor (LAPACK pocon,
        O(p²))."""
        anorm = _sym_norm1(self.stats.matrix())
        rcond, info = linalg.lapack.dpocon(self._chol[0], anorm, uplo="L")
        if info != 0 or not rcond > 0.0:
            return 0.0, np.inf
        return float(rcond), 1.0 / (float(rcond) * anorm)

    def _ensure_inverse(self):
        if not self._inv_ready:
            self.inv.reset(_inverse_from_cholesky(self._chol, "ΦᵀΦ + ρI"))
            self._inv_ready = True

    def _residual(self, beta):
        """``b − Mβ`` from the exact statistics, the pending rows included."""
        res = self.stats.residual(beta)
        r = self._np
        if r:
            P = self._P[:r]
            res -= P.T @ _scaled_rows(self._s[:r], P @ beta)
        return res

    def _energy(self, d):
        """``dᵀMd`` from the exact statistics, the pending rows included (per column of a
        matrix ``d``)."""
        Md = self.stats.matvec(d)
        r = self._np
        if r:
            P = self._P[:r]
            Md += P.T @ _scaled_rows(self._s[:r], P @ d)
        return np.abs(_dots(d, Md))

    def _trace_M(self):
        r = self._np
        return self.stats.trace() + float(self._s[:r] @ self._sq[:r])

    def fold(self, refine=True):
        """Write pending corrections into the base; with ``refine``, refine β against ``M β = b``.

        Without ``refine`` the model (β) is untouched: only its representation changes.
        """
        if self.inv.rank == 0 and self._np == 0:
            return
        self._fold_rows()
        if self.inv.rank:
            self.inv.fold()
            # fresh bounds on ‖M‖ and ‖M⁻¹‖ (1-norms, O(p²)), for the next cores' noise
            self._nM = _sym_norm1(self.stats.matrix())
            self._nH = float(np.max(np.sum(np.abs(self.inv.H0), axis=0)))
            self._eW += _EPS * self._nH  # H0 + U C Uᵀ rounded into H0
        if not refine:
            return
        d = self.inv.matvec(self._residual(self.beta))
        self.beta = self.beta + d
        if np.any(_norms(d) > _DRIFT_RTOL * np.maximum(_norms(self.beta), 1e-300)):
            self._refactor()

    def gradient_norms(self):
        """‖∇J_k(β_k)‖ = ‖2C (M β_k − b_k)‖ of each output, from the exact statistics (the
        pending rows included), O(p²·K).

        Returns
        -------
        ndarray of shape (K,)
            One norm per column; shape (1,) for a state fitted on targets of shape (n,).
            Since J_k is 1-strongly convex, ``‖β_k − β_k*‖ ≤ gradient_norms()[k]``.
        """
        res = self._residual(self.beta)
        if res.ndim == 1:
            return np.array([float(np.linalg.norm(res)) / self.rho])
        return np.linalg.norm(res, axis=0) / self.rho  # 2C = 1/ρ

    def gradient_norm(self):
        """‖∇J(β)‖ = ‖2C (M β − b)‖ of the stored β, from the exact statistics (the pending rows
        included), O(p²): it certifies ‖β − β*‖ and covers rounding and the drift of the
        tracked inverse between refinements.  With K outputs: the largest of
        :meth:`gradient_norms`, which bounds every column's ‖β_k − β_k*‖."""
        res = self._residual(self.beta)
        if res.ndim == 1:
            return float(np.linalg.norm(res)) / self.rho  # 2C = 1/ρ
        return float(np.max(np.linalg.norm(res, axis=0), initial=0.0)) / self.rho

    # ------------------------------------------------------------ safeguards
    def _check_finite(self, beta, b):
        """ValueError unless β, b and a bound on the residual ``b − Mβ`` are finite."""
        # ‖Mβ − b‖ ≤ tr(M) ‖β‖ + ‖b‖ ≤ √p (tr(M) max|β| + max|b|); max and abs do not overflow
        bound = math.sqrt(self.p) * (self._trace_M() * float(abs(beta).max()) + float(abs(b).max()))
        if not math.isfinite(bound):
            raise ValueError(
                "the solution overflowed (non-finite coefficients or residual): the data's "
                "magnitudes are too large for float64; rescale X (or use a smaller C)"
            )

    def _core_noise(self, h, sq):
        """Rounding noise of the Woodbury core ``V H Vᵀ ± I`` for rows of total leverage
        ``h = Σ |vᵀHv|`` and total squared norm ``sq`` (see the module docstring)."""
        return (
            math.sqrt(self.p) * _EPS * ((1.0 + self._nM * self._nH) * h + self._nH * sq)
            + self._eW * sq
        )

    def _excess(self, lost, inv_norm):
        """Whether an error ``lost`` (2-norm) in M could move β by more than ``_LOST_RTOL``
        (relative, ``‖M⁻¹‖·lost``) and exceeds the rounding of a fresh computation of M.
        ``inv_norm``: a callable estimating ‖M⁻¹‖ (called only when ``1/ρ`` does not settle
        it)."""
        if lost <= _FRESH_FACTOR * _EPS * self._trace_M() or lost / self.rho <= _LOST_RTOL:
            return False
        return lost * inv_norm() > _LOST_RTOL

    def _inv_norm_from_factor(self):
        """‖M⁻¹‖₁ estimated from the held Cholesky factor."""
        return self._condition()[1]

    def _save(self):
        return (
            self.stats.copy(),
            self._np,
            self.inv.H0,
            self.inv.rank,
            self._chol,
            self._inv_ready,
            self.beta,
            self.n_refactor,
            self.n_rebuild,
            self._nM,
            self._nH,
            self._eW,
        )

    def _restore(self, saved):
        (
            self.stats,
            self._np,
            self.inv.H0,
            self.inv.rank,
            self._chol,
            self._inv_ready,
            self.beta,
            self.n_refactor,
            self.n_rebuild,
            self._nM,
            self._nH,
            self._eW,
        ) = saved

    # ---------------------------------------------------------------- update
    def apply(self, Pa=None, ya=None, Pr=None, yr=None, Pl=None, dy=None, rows_after=None, rw=None):
        """Add rows ``(Pa, ya)``, remove rows ``(Pr, yr)``, change labels of rows ``Pl`` by ``dy``.

        ``rows_after``: a callable returning ``(slots, Φ, t)`` of the data after the change
        (models that keep their rows), from which the statistics are recomputed when a removal
        has cancelled too many of their digits; None for a model without rows, which then
        refuses such a removal.  ``rw``: the reweights (a :class:`_Reweight`: rows whose weight
        changes, as rank-one Woodbury corrections with a signed weight), or None.  On
        ValueError the model is exactly as before (a fold done on the way only changed the
        representation of the same matrices).
        """
        st = self.stats
        saved = (self.beta, st.rhs, st.lost, self._nM, self._nH, self._eW)
        try:
            return self._apply(Pa, ya, Pr, yr, Pl, dy, rows_after, rw)
        except ValueError:
            (self.beta, self.stats.rhs, self.stats.lost, self._nM, self._nH, self._eW) = saved
            raise

    def _apply(self, Pa, ya, Pr, yr, Pl, dy, rows_after, rw=None):
        Pa, Pr, Pl = as_rows(Pa), as_rows(Pr), as_rows(Pl)
        if Pl is not None:
            Pl = Pl.array()
        k = (0 if Pa is None else len(Pa)) + (0 if Pr is None else len(Pr))
        if rw is not None:
            k += rw.U.shape[0]
        if k > self.max_rank:
            if rw is not None:  # the statistics see a reweight as a removal and an addition
                (Pa, ya), (Pr, yr) = rw.merged(Pa, ya, 1), rw.merged(Pr, yr, -1)
            return self._apply_refactor(Pa, ya, Pr, yr, Pl, dy, None, rows_after)
        Pa = None if Pa is None else Pa.array()
        Pr = None if Pr is None else Pr.array()
        if k == 1 and rw is None and Pl is None:
            B, yy, sg = (Pa, ya, 1.0) if Pr is None else (Pr, yr, -1.0)
            if isinstance(B, np.ndarray) and self._apply_one(B, yy, sg):
                return
        rel = None if Pl is None else Pl.T @ dy
        n_stat = k if rw is None else k - rw.U.shape[0] + rw.n_stat
        if not self.inv.room(k) or self._np + n_stat > self._P.shape[0]:
            self.fold()
        self._ensure_inverse()  # after the fold, which may have refactorised
        if rel is None:
            t = self.beta + 0.0
        elif rel.ndim == 2 and Pl.shape[0] < rel.shape[1]:
            # fewer relabelled rows than outputs: H (Plᵀ dy) = (H Plᵀ) dy, O(p² l + p l K)
            t = self.beta + self.inv.matvec(np.ascontiguousarray(Pl.T)) @ dy
        else:
            t = self.beta + self.inv.matvec(rel)
        parts = [(B, yy, sg) for B, yy, sg in ((Pa, ya, 1.0), (Pr, yr, -1.0)) if B is not None]
        if k == 0:
            rhs = self._rhs(parts, Pl, dy)
            self._check_finite(t, sum(rhs))
            self.beta, self.stats.rhs = t, rhs
            return
        if rw is None:
            V = parts[0][0] if len(parts) == 1 else np.vstack([B for B, _, _ in parts])
            sqV = _row_sq(V)
            n_add = 0 if Pa is None else Pa.shape[0]
            sqs = [sqV[:n_add], sqV[n_add:]] if n_add and Pr is not None else [sqV]
            sq_all = float(sqV.sum())
            sq_add = float(sqs[0].sum()) if n_add else 0.0
            q = 0.0 if Pr is None else self.stats.cancellation_of(sqs[-1])
            s = np.concatenate([np.full(B.shape[0], sg) for B, _, sg in parts])
            yv = np.concatenate([yy for _, yy, _ in parts])
            removing = Pr is not None
            stat = None
        else:
            # the Woodbury rows: the additions, the removals and, for each reweight, √|Δw| φ
            # with the sign of Δw; the statistics' rows: the additions and removals, and each
            # reweighted row leaving with √w_old and coming back with √w_new (so that M and b
            # stay sums of the same rounded rows that a later removal subtracts)
            cparts = parts + [(rw.U, rw.cu, rw.su)]
            V = np.vstack([B for B, _, _ in cparts])
            sqV = _row_sq(V)
            s = np.concatenate(
                [
                    np.broadcast_to(np.asarray(sg, dtype=np.float64), B.shape[:1])
                    for B, _, sg in cparts
                ]
            )
            yv = np.concatenate([yy for _, yy, _ in cparts])
            sq_all = float(sqV.sum())
            sq_add = float(sqV[s > 0].sum())
            removing = bool(np.any(s < 0))
            sparts = parts + [
                (B, c, sg)
                for B, c, sg in ((rw.Sa, rw.ca, 1.0), (rw.Sr, rw.cr, -1.0))
                if B is not None
            ]
            S = np.vstack([B for B, _, _ in sparts])
            sqS = _row_sq(S)
            sS = np.concatenate([np.full(B.shape[0], sg) for B, _, sg in sparts])
            q = self.stats.cancellation_of(sqS[sS < 0]) if np.any(sS < 0) else 0.0
            stat = (sparts, S, sS, sqS)
        W = self.inv.matvec(np.ascontiguousarray(V.T)) if k > 1 else self.inv.matvec(V[0])[:, None]
        G = V @ W
        G.flat[:: k + 1] += s
        core = _woodbury_core(G)
        refine = 0.0
        if core is not None:
            lam = (
                abs(float(G[0, 0]))
                if k == 1
                else float(np.min(np.abs(np.linalg.eigvalsh(0.5 * (G + G.T)))))
            )
            w2 = float(W.ravel() @ W.ravel()) / lam  # ≥ ‖W G⁻¹ Wᵀ‖: the correction's size
            # a removal's core cancels as the leverage approaches 1; an addition's does not
            # (G ⪰ I), but a large one carries the tracked inverse's error into β
            noise = self._core_noise(float(np.abs(np.diagonal(G) - s).sum()), sq_all)
            if removing and lam <= _CORE_MARGIN * noise:
                core = None
            elif removing and lam < _AMP_RTOL:
                # the downdate multiplies the tracked inverse's relative error (in the norm of
                # M) by up to 1/lam: rows of large weight leaving (leverage ≈ 1) would leave
                # it with the rounding of the larger system blown up to ~ε/lam² — refactorise
                # the exact statistics instead
                core = None
            else:
                # the core's relative error (lam > _CORE_MARGIN·noise here): β is refined when
                # it can move β by more than _REFINE_RTOL of its norm (see below)
                refine = noise / (lam - noise) if noise > _REFINE_RTOL * lam else 0.0
            n_M = self._nM + sq_add
            n_H = self._nH + (w2 if removing else 0.0)
            if n_M * n_H > _MAX_COND:  # nearly singular: as a fresh fit would, factorise
                core = None
        if core is None or (q and self._excess(self.stats.lost + q, lambda: self._nH + w2)):
            # leverage ≈ 1: Woodbury is unreliable, use the exact statistics; or the removal
            # cancels too many digits of the statistics: recompute them
            Pa, Pr = as_rows(Pa), as_rows(Pr)
            if rw is not None:
                (Pa, ya), (Pr, yr) = rw.merged(Pa, ya, 1), rw.merged(Pr, yr, -1)
            return self._apply_refactor(Pa, ya, Pr, yr, Pl, dy, q, rows_after)
        t = t + W @ _scaled_rows(s, yv)
        u = V @ t
        beta = t + W @ (core @ u)
        if refine:
            # the core's relative error ``refine`` moves the correction W·core·(V t) by at
            # most ‖W‖·‖core‖·refine·‖V t‖ (‖core‖ = 1/lam): a certified bound, O(p k K), that
            # spares the two p × p passes of a refinement unless it could exceed
            # _REFINE_RTOL·‖β‖ in some column
            err = math.sqrt(w2 * lam) / lam * refine * _norms(u)
            refine = bool(np.any(err > _REFINE_RTOL * _norms(beta)))
        r = self._np
        if stat is None:
            rhs = self._rhs(parts, Pl, dy, sqs)
            self._check_finite(beta, sum(rhs))
            self._P[r : r + k] = V
            self._s[r : r + k] = s
            self._sq[r : r + k] = sqV
            self._np = r + k
        else:
            sparts, S, sS, sqS = stat
            rhs = self._rhs(sparts, Pl, dy)
            self._check_finite(beta, sum(rhs))
            m = S.shape[0]
            self._P[r : r + m] = S
            self._s[r : r + m] = sS
            self._sq[r : r + m] = sqS
            self._np = r + m
        mark = self.inv.mark()
        self.inv.add(W, core)
        self._nM, self._nH = n_M, n_H  # ‖H − W G⁻¹ Wᵀ‖ ≤ ‖H‖ + ‖W‖² / min|λ(G)|
        self._eW += _EPS * w2
        self.beta = beta
        self.stats.rhs = rhs
        self.stats.lost += q
        if refine:
            self._refine(r, mark)

    def _apply_one(self, B, yy, sg):
        """One row ``B`` (shape (1, p)) added (``sg`` = 1.0) or removed (−1.0) with its
        targets ``yy`` ((1,) or (1, K)): the Woodbury step of :meth:`_apply` for k = 1 in
        scalar arithmetic wherever it can be (one pass over the tracked inverse and a few
        dozen NumPy calls, the tests and bounds of the general step unchanged).

        Returns False, having changed nothing but the representation (a fold, the explicit
        inverse formed), when the step is not the plain one: the general path then decides
        (refactorisation, recomputed statistics, large rows); True once applied."""
        inv, st = self.inv, self.stats
        if inv.rank >= inv.max_rank or self._np >= self._P.shape[0]:
            self.fold()
        self._ensure_inverse()  # after the fold, which may have refactorised
        v = B[0]
        cy = sg * np.asarray(yy, dtype=np.float64)
        sq = float(v @ v)
        if sq > st.big_sq or math.sqrt(sq) * float(abs(cy).max()) > st.big_b:
            return False  # a large row: its statistics in double-double (the general path)
        W = inv.matvec(v)
        g = float(v @ W) + sg
        lam = abs(g)
        if not (math.isfinite(g) and lam >= _CORE_RTOL * max(1.0, lam)):
            return False  # _woodbury_core would refuse it
        removing = sg < 0.0
        # _apply's tests and bounds with k = 1 (cancellation_of, _core_noise of |G − s|)
        q = 2.0 * _PLAIN_ERR * sq if removing else 0.0
        w2 = float(W @ W) / lam
        noise = self._core_noise(abs(g - sg), sq)
        if removing and (lam <= _CORE_MARGIN * noise or lam < _AMP_RTOL):
            return False
        n_M = self._nM + (0.0 if removing else sq)
        n_H = self._nH + (w2 if removing else 0.0)
        if n_M * n_H > _MAX_COND or (q and self._excess(st.lost + q, lambda: self._nH + w2)):
            return False
        core = -1.0 / g
        Wc = W if cy.ndim == 1 else W[:, None]
        t = self.beta + Wc * cy  # β + W (s y), the targets' term
        u = v @ t
        beta = t + Wc * (core * u)
        refine = noise > _REFINE_RTOL * lam
        if refine:  # as in _apply: ‖W‖·|core|·(rel. error of the core)·|vᵀt| against ‖β‖
            err = math.sqrt(w2 * lam) / lam * (noise / (lam - noise)) * np.abs(u)
            refine = bool(np.any(err > _REFINE_RTOL * _norms(beta)))
        b, bbig, blo = st.rhs
        rhs = (b + (v * cy[0] if cy.ndim == 1 else np.multiply.outer(v, cy[0])), bbig, blo)
        self._check_finite(beta, sum(rhs))
        r = self._np
        self._P[r] = v
        self._s[r] = sg
        self._sq[r] = sq
        self._np = r + 1
        mark = inv.mark()
        inv.add_one(W, core)
        self._nM, self._nH = n_M, n_H
        self._eW += _EPS * w2
        self.beta = beta
        st.rhs = rhs
        st.lost += q
        if refine:
            self._refine(r, mark)
        return True

    def _rhs(self, parts, Pl, dy, sqs=None):
        """The statistics' ``rhs`` after the additions and removals ``parts`` (rows of squared
        norms ``sqs``, when known) and the relabels."""
        st = self.stats
        rhs = st.rhs
        for i, (B, yy, sg) in enumerate(parts):
            rhs = st.plus(
                B, sg * np.asarray(yy, dtype=np.float64), None if sqs is None else sqs[i], base=rhs
            )
        if Pl is not None:
            rhs = st.plus(Pl, dy, base=rhs)
        return rhs

    def _refine(self, r, mark):
        """Iterative refinement of β against the exact statistics, after an update whose core
        was close to its rounding noise; refactorise if a few steps do not settle it (on
        failure the update is undone: ``r`` and ``mark`` are the pending rows and corrections
        before it).

        Settled means a step below ``_DRIFT_RTOL`` relative to β, or, once the steps stop
        shrinking (the rounding floor of an ill-conditioned M), below it in the norm of M,
        which weighs a step as the scores of the data do (``dᵀMd`` against ``βᵀMβ = βᵀb``):
        along the directions the data hardly span a fresh solve is no more accurate.  With K
        outputs every column is refined (one K-column step) until each has settled.
        """
        prev = np.inf
        settled = False
        for _ in range(_REFINE_STEPS):
            d = self.inv.matvec(self._residual(self.beta))
            self.beta = self.beta + d
            size = _norms(d)
            small = size <= _DRIFT_RTOL * np.maximum(_norms(self.beta), 1e-300)
            settled = settled | small
            if np.all(settled):
                return
            energy_ok = self._energy(d) <= _DRIFT_RTOL**2 * np.maximum(
                np.abs(_dots(self.beta, self.b)), 1e-300
            )
            settled = settled | (energy_ok & (size > 0.25 * prev))
            if np.all(settled):
                return
            prev = size
        if np.all(settled | energy_ok):
            return
        saved = self._save()
        try:
            self._refactor()
            self._check_finite(self.beta, self.stats.b)
        except ValueError:
            self._restore(saved)
            self._np = r
            self.inv.rank = mark
            raise

    def _apply_refactor(self, Pa, ya, Pr, yr, Pl, dy, q, rows_after):
        """Large batch (or an unreliable Woodbury step): ``M ± ΦᵀΦ`` by streamed syrk products
        (rows read once), then one Cholesky factorisation; the statistics are recomputed from
        ``rows_after`` when the removal cancelled too many of their digits.  ``Pa``, ``Pr``:
        ``Rows`` or None; ``Pl``: relabelled rows (array) or None; ``q``: the removal's
        cancellation (None: measured as its rows stream through the statistics, read once)."""
        saved = self._save()
        try:
            self._fold_rows()
            st = self.stats
            st.gram(Pa, 1.0, ya)
            lost = st.gram(Pr, -1.0, yr)
            if q is None:
                q = lost
            if Pl is not None:
                st.rhs = st.plus(Pl, dy)
            st.lost += q
            try:
                self._refactor()
            except ValueError as exc:
                # cancellation may have cost M its definiteness
                if not q or q / self.rho <= _LOST_RTOL:
                    raise
                if rows_after is None:
                    raise ValueError(self._refusal(Pr, q / self.rho)) from exc
                self._rebuild(rows_after)
                q = 0.0
            if q:
                memo = []

                def inv_norm():
                    if not memo:
                        memo.append(self._inv_norm_from_factor())
                    return memo[0]

                if self._excess(st.lost, inv_norm):
                    if rows_after is not None:
                        self._rebuild(rows_after)
                    elif self._excess(q, inv_norm):
                        raise ValueError(self._refusal(Pr, q * inv_norm()))
            self._check_finite(self.beta, self.stats.b)
        except ValueError:
            self._restore(saved)
            raise

    def _rebuild(self, rows_after):
        """Recompute the statistics from the rows of the data after the change, and refactorise."""
        _, Phi, t = rows_after()
        st = self.stats
        self.stats = _Statistics.of_rows(Phi, t, self.rho, (st.big_sq, st.big_b))
        self._np = 0
        self.n_rebuild += 1
        self._refactor()

    def _refusal(self, Pr, err):
        top = max(float(np.max(_row_sq(block))) for _, block in Pr.chunks())
        return (
            f"removing these samples or lowering their weights (weighted squared feature norm "
            f"up to {top:.3g}, against a model "
            f"of trace(ΦᵀΦ + ρI) = {self._trace_M():.3g}) would cancel so many digits of the "
            f"model's statistics ΦᵀΦ + ρI that its coefficients could be off by up to {err:.1e} "
            "(relative) from a fresh fit; this model keeps no training rows (keep_data=False) "
            "to recompute them from: refit it on the remaining data (or use keep_data=True)"
        )

    def tracked_inverse(self):
        self._ensure_inverse()  # forms the explicit inverse from the held factor: β is untouched
        return self.inv.matvec

    def counters(self):
        return {
            "n_refactor": int(self.n_refactor),
            "n_folds": -1,  # folds are not counted
            "pending_rank": int(self.inv.rank),
        }

    def exact_matrix(self):
        """``ΦᵀΦ + ρI`` from the exact statistics, pending rows included (no fold), full."""
        M = self.stats.full()
        r = self._np
        if r:
            P = self._P[:r]
            M = M + (P.T * self._s[:r]) @ P
        return M

    def apply_change(self, change):
        """Apply a :class:`~deltafit._states._protocol.DataChange`; with sample weights (the
        ledger's or the change's), through :meth:`_apply_weighted`."""
        if _is_weighted(change):
            return self._apply_weighted(change)
        rows_after = change.rows_after if change.ledger.keep_rows else None
        rows_add, rows_relabel = change.rows_add, change.rows_relabel
        self.apply(
            None if rows_add is None else _dense(rows_add),
            change.t_add,
            change.rows_remove,
            change.removed_targets,
            None if rows_relabel is None else _dense(rows_relabel),
            change.target_shift,
            rows_after,
        )

    def _apply_weighted(self, change):
        """The weighted change as the unweighted one of rows ``√w_i φ_i``, targets ``√w_i t_i``.

        An added row enters with its weight, a removed or relabelled one with its stored
        weight (``ledger.w``, kept by ``keep_data=False`` models too); a reweight
        ``w_old → w_new`` is the rank-one change ``(w_new − w_old) φφᵀ`` of ``M`` and
        ``(w_new − w_old) φ t`` of ``b`` (a relabel in the same change comes first, at the old
        weight): one Woodbury row ``√|Δw| φ`` of sign ``sign(Δw)`` (Lee et al., Cor. 1 and 2
        with a signed weight), so that a decrease is refused or refactorised like a removal of
        high leverage.  Rows of weight 0 contribute nothing and are left out.
        """
        led = change.ledger

        def weighted_rows_after():
            slots, Phi, t = change.rows_after()
            Phi, t = _weighted_rows(Phi, t, change.weights_at(slots))
            if Phi is None:  # every weight 0: the statistics of no rows
                Phi, t = np.zeros((0, self.p)), np.zeros((0,) + _out_shape(self.n_outputs))
            return slots, Phi, t

        rows_after = weighted_rows_after if led.keep_rows else None
        Pa = ya = Pr = yr = Pl = dy = None
        if change.add_slots is not None and len(change.add_slots):
            wa = (
                np.ones(len(change.add_slots))
                if change.w_add is None
                else np.asarray(change.w_add, dtype=np.float64)
            )
            Pa, ya = _weighted_rows(as_rows(change.rows_add).array(), change.t_add, wa)
        if change.remove_slots is not None and len(change.remove_slots):
            Pr, yr = _weighted_rows(
                as_rows(change.rows_remove).array(),
                change.removed_targets,
                led.w[change.remove_slots],
            )
        if change.relabel_slots is not None and len(change.relabel_slots):
            Pl, dy = _weighted_rows(
                np.asarray(_dense(change.rows_relabel)),
                change.target_shift,
                led.w[change.relabel_slots],
            )
        rw = _Reweight.of_change(change) if change.reweight_slots is not None else None
        if Pa is None and Pr is None and Pl is None and rw is None:
            return  # only rows of weight 0 (or unchanged weights): the problem is the same
        self.apply(Pa, ya, Pr, yr, Pl, dy, rows_after, rw)

    def warm_coef(self, slots):
        """A copy of β, (p,) or (p, K)."""
        return self.beta.copy()

    # ------------------------------------------------------------ persistence
    def to_arrays(self, keep=None):
        """``state_M`` (p, p), ``state_H`` (p, p), ``state_b`` and ``state_beta`` ((p,) or
        (p, K)), ``state_limits`` (3,) and, when large rows are kept apart, ``state_M_parts``
        (3, p, p) and ``state_b_parts`` ((3, p) or (3, p, K)), and ``state_inv_err`` (1,): the
        error bound of the tracked inverse (2-norm), carried on by the loaded state."""
        self._ensure_inverse()
        self.fold(refine=False)
        self.inv.H0 = _symmetrized(self.inv.H0)
        st = self.stats
        out = {
            "state_M": st.full(),
            "state_b": st.b,
            "state_beta": self.beta,
            "state_H": np.ascontiguousarray(self.inv.H0),
            "state_limits": np.array([st.big_sq, st.big_b, st.lost]),
            "state_inv_err": np.array([min(self._eW, np.finfo(np.float64).max)]),
        }
        if st.Mbig is not None:  # the parts, as kept (state_M is their rounded sum)
            out["state_M_parts"] = np.stack([_symmetric(A) for A in (st.M, st.Mbig, st.Mlo)])
            out["state_b_parts"] = np.stack(st.rhs)
        return out

    @classmethod
    def saved_shapes(cls, n, p, n_outputs=None):
        """``{name: shape}`` of the arrays :meth:`to_arrays` always writes.

        Parameters
        ----------
        n : int
            Live samples (unused: the primal state is per feature).
        p : int
            Width of Φ.
        n_outputs : int or None, default=None
            None: a state fitted on targets of shape (n,) (``state_b``, ``state_beta``: (p,));
            K: on targets of shape (n, K) (they are (p, K)).
        """
        out = (p,) + _out_shape(n_outputs)
        return {"state_M": (p, p), "state_b": out, "state_beta": out, "state_H": (p, p)}

    @classmethod
    def optional_shapes(cls, n, p, n_outputs=None):
        """``{name: shape}`` of the arrays :meth:`to_arrays` writes when it needs them (the
        large rows' shares of the statistics, kept apart, see :class:`_Statistics`);
        ``n_outputs`` as in :meth:`saved_shapes`."""
        return {
            "state_M_parts": (3, p, p),
            "state_b_parts": (3, p) + _out_shape(n_outputs),
            "state_limits": (3,),
            "state_inv_err": (1,),
        }

    @classmethod
    def from_arrays(cls, arrays, opts, *, y=None, capacity=None, max_rank=64, result=None):
        """The state written by :meth:`to_arrays`.

        The number of outputs is taken from ``y`` (the live targets: shape (n,) or (n, K));
        without ``y``, from ``state_b``.  ValueError on arrays of inconsistent shapes.
        """
        st = cls(opts, max_rank)
        b_shape = np.shape(arrays["state_b"])
        p = b_shape[0] if len(b_shape) in (1, 2) else -1
        if y is not None:
            y = np.asarray(y, dtype=np.float64)
            n_outputs = _n_outputs(y) if y.ndim in (1, 2) else -1
        else:
            n_outputs = b_shape[1] if len(b_shape) == 2 else None
        M, b, beta, H = checked(arrays, cls.saved_shapes(None, p, n_outputs), "squared-loss state")
        check_symmetric(M, "matrix ΦᵀΦ + ρI")
        # every inverse this one was tracked through inverted some ΦᵀWΦ + ρI ⪰ ρI, so had norm
        # ≤ 1/ρ whatever the updates were: the rounding asymmetry of the corrections is a
        # multiple of ε/ρ even when the current inverse is far smaller (files written before
        # save symmetrised it, after updates that shrank the problem)
        check_symmetric(H, "tracked inverse", scale=1.0 / st.rho)
        d = np.diag(M)
        if d.size and float(d.min()) < st.rho - 1e-8 * float(np.max(np.abs(d))):
            raise ValueError("corrupt model file: the diagonal of ΦᵀΦ + ρI is below ρ = 1/(2C)")
        optional = {
            name: shape
            for name, shape in cls.optional_shapes(None, p, n_outputs).items()
            if name in arrays
        }
        extra = dict(zip(optional, checked(arrays, optional, "squared-loss state")))
        if "state_limits" in extra:
            big_sq, big_b, lost = (float(v) for v in extra["state_limits"])
        else:  # a file from before the limits were kept: from the mean row of M
            n = max(1 if y is None else int(np.size(y)), 1)
            mean_sq = max(float(np.trace(M)) - p * st.rho, 0.0) / n
            big_sq = _BIG_RATIO * (mean_sq + st.rho)
            big_b = _BIG_RATIO * max(
                np.sqrt(mean_sq) * float(np.median(_target_size(y)))
                if y is not None and np.size(y)
                else 0.0,
                np.finfo(np.float64).tiny,
            )
            lost = 0.0
        stats = _Statistics(p, st.rho, big_sq, big_b, n_outputs)
        if "state_M_parts" in extra and "state_b_parts" in extra:
            stats.M, stats.Mbig, stats.Mlo = (np.asfortranarray(A) for A in extra["state_M_parts"])
            stats.rhs = tuple(np.array(v) for v in extra["state_b_parts"])
        else:
            stats.M = np.asfortranarray(M)
            stats.rhs = (b, np.zeros(b.shape), np.zeros(b.shape))
        stats.lost = lost
        st.stats = stats
        st._init_buffers(p)
        st.beta = beta
        st.inv = LowRankInverse(H, st.max_rank)
        st._nM, st._nH = stats.trace(), st.inv.trace()  # ‖M‖ ≤ tr(M), ‖M⁻¹‖ ≤ tr(H)
        if "state_inv_err" in extra:
            st._eW = _inv_err(extra["state_inv_err"])
        else:  # a file from before the bound was kept: measure it, ‖H − M⁻¹‖ ≤ ‖H‖ r / (1 − r)
            r = float(np.linalg.norm(np.eye(p) - st.stats.full() @ H)) if p else 0.0
            if r < 0.5:
                st._eW = st._nH * r / (1.0 - r)
            else:  # the saved inverse has lost its digits: form a fresh one from M (β kept)
                st._chol = _cholesky(st.stats.matrix(), "the saved ΦᵀΦ + ρI")
                st._inv_ready = False
                st._nH = st._condition()[1]
        return st
