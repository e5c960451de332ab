"""Exact incremental / decremental states for the squared loss (LS-SVM, ridge, kernel ridge).

Lee et al. ("Exact incremental and decremental learning for LS-SVM"), Theorem 1 and Corollaries 1–4, update ``w`` and the auxiliary matrix
``C = Φ[ΦᵀΦ + ρI]⁻¹Φᵀ = I − ρ(ΦΦᵀ + ρI)⁻¹`` by the Woodbury identity when samples are added
``(Φ_a, y_a)`` and removed ``(Φ_r, y_r)``.  The states below do the same algebra in a numerically
stabler arrangement:

* the exact sufficient statistics are kept (primal: ``M = ΦᵀΦ + ρI`` and ``b = Φᵀy``;
  dual: the kernel matrix and the labels), so the solution can always be recomputed;
* the inverse ``H = M⁻¹`` (or ``(K + ρI)⁻¹``) is tracked as a base plus pending Woodbury
  corrections (:class:`~deltafit._linalg._lowrank.LowRankInverse`): one sample costs O(p²) in the
  primal (Cor. 1, 2) and O(n) plus O(n·r) in the dual, a batch of ``k`` costs O(p²k) (Cor. 3, 4);
* every ``max_rank`` corrections the inverse is folded and the solution refined against the exact
  statistics (one step of iterative refinement); if the refinement shows drift the inverse is
  recomputed from scratch.  Large batches go straight to a refactorisation of the updated exact
  statistics (a symmetric rank-k product plus one Cholesky factorisation).

Removing a sample of high leverage cancels digits twice, and the primal state guards both:

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
  statistics instead); after any update whose core's relative noise exceeds ``_REFINE_RTOL``,
  β is refined against the exact statistics (a few steps, then a refactorisation if they do
  not settle); and once the bound on ``cond(M)`` passes ``_MAX_COND`` every update
  refactorises, so that data a fresh fit cannot factorise are refused alike.  A removal (or
  weight decrease) whose core has an eigenvalue below ``_AMP_RTOL`` refactorises as well: in
  the norm of M the downdate multiplies the tracked inverse's relative error by up to the
  inverse of that eigenvalue, and a row of large weight w left rounding of about ``ε w‖φ‖²``
  when it entered, so that its leaving would otherwise leave the inverse off by
  ``~ε (w‖φ‖²)²`` (β is refined against the statistics, but a later relabel uses the
  inverse alone: 1e-5 relative after weights 1e5 left);
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

Both states also take targets of shape (n, K): K right-hand sides (the ±1 one-vs-rest codes of
K classes, or K regression outputs) that share the one matrix, factorisation and tracked inverse.
The solution is then ``beta`` (p, K) / ``alpha`` (capacity, K), and an update costs what a
single-output one does plus O(p·K) (primal) or O(n·K) (dual) per changed sample; only the
refinement against the exact statistics (at folds, or after every update of an ill-conditioned
system) is a K-column product.  Every column is kept, refined and checked as a single output
would be; :meth:`~PrimalSquaredState.gradient_norms` certifies each column, ``gradient_norm``
is their maximum.  Targets of shape (n,) give exactly (bitwise) the single-output behaviour.

Sample weights (the data term ``C Σ w_i (t_i − z_i)²``, ``w_i ≥ 0``):

* primal: the weighted problem is the unweighted one on rows ``√w_i φ_i`` and targets
  ``√w_i t_i``, so ``M = ΦᵀWΦ + ρI`` and ``b = ΦᵀWt``.  The statistics are kept as sums of
  those scaled rows (the same plain / error-free machinery): each scaled entry is rounded once,
  so they are the exact statistics of the data with weights perturbed by about 2ε (relative),
  and a row leaves them (removal, or a reweight's old weight) as exactly as it entered.  An
  added row enters with its weight, a removed or relabelled one with its stored weight; a
  reweight ``w → w'`` is one Woodbury row ``√|w' − w| φ`` of sign ``sign(w' − w)`` (a decrease
  is a partial removal, with its safeguards and refusals), while the statistics see the row
  leave with ``√w`` and come back with ``√w'``.  Weight 0 rows contribute nothing;
* dual: ``(K + ρW⁻¹) α = t`` over the samples of positive weight (diagonal ``ρ/w_i`` per
  slot).  A sample of weight 0 is inactive in the state (``α_i = 0``, zero row and column in
  the tracked inverse) but stays in the ledger, its kernel values and target kept; a reweight
  between positive weights is a diagonal Woodbury correction, 0 → w borders the system and
  w → 0 deletes the slot from it.  The certified residual is ``2C sqrt((w∘r)ᵀK(w∘r))``
  (:meth:`DualSquaredState.gradient_norm`).

The dual state bounds the error of its tracked inverse ``H ≈ A⁻¹`` (``A = K + ρW⁻¹``) as the
primal one does: each Woodbury correction ``U core Uᵀ`` adds about ``ε ‖U‖² ‖core‖`` (2-norm,
at the scale of the H it corrects), and the sum since the last factorisation is ``e_H``.  A
correction that shrinks H by orders of magnitude (weights made tiny, ``ρ/w`` huge) cancels the
new, small H against the old one: ``‖A‖ e_H`` (a bound on ``‖I − AH‖``) then exceeds
``_INV_RTOL`` and the error of a fresh factorisation (``ε n κ²``, κ the condition number of the
diagonally scaled A), and the update is redone from the stored kernel matrix.  ``e_H`` also
enters the cores' noise: a removal's ``H_RR``, the reweight core ``I + ΔH_SS`` and the Schur
complement ``K_BB + ρW_B⁻¹ − BᵀHB`` of an addition are not used within their margins of it
(the way back from a tiny weight divides by what is left of those digits).

Without weights (a change and a ledger that never saw a weight other than 1) every update runs
the unweighted code, bitwise as before weights existed.

``ρ = 1/(2C)`` maps Lee et al.'s ρ onto the canonical objective of ARCHITECTURE.md, "The problem".
"""

from __future__ import annotations

import math

import numpy as np
import scipy.sparse as sp
from scipy import linalg
from scipy.linalg import blas

from deltafit._linalg._gram import GramCache
from deltafit._linalg._lowrank import LowRankInverse
from deltafit._states._protocol import ModelState, check_symmetric, checked

__all__ = ["PrimalSquaredState", "DualSquaredState"]

# A Woodbury core whose smallest |eigenvalue| falls below this fraction of its largest (for a
# removal: a sample of leverage ≈ 1) is not trusted; the update is then redone by refactorising
# the exact statistics.
_CORE_RTOL = 1e-8
# Iterative-refinement correction (relative) above which the tracked inverse is recomputed.
_DRIFT_RTOL = 1e-9
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
# Rows per chunk when streaming a large batch through syrk (bounds the gathered copy's memory).
_CHUNK = 512

_EPS = np.finfo(np.float64).eps
# Dekker's splitting constant 2**27 + 1: the high part of a split double has at most 26
# significant bits, so the product of two high parts is exact.
_SPLIT = 134217729.0
# A row whose squared norm (or |target|·norm) exceeds this multiple of the median at the fit
# enters the primal statistics through error-free transformations: its removal would cancel
# digits that a plain sum loses.
_BIG_RATIO = 256.0
# Error (2-norm, in units of ‖v‖²) one rank-one update of M leaves behind: plain (BLAS syrk:
# the products and the sums are rounded) and compensated (only the low-order products, at most
# 2⁻²⁶‖v‖², are rounded, once more when they are added up).
_PLAIN_ERR = 2.0 * _EPS
_COMPENSATED_ERR = 8.0 * 2.0 ** -26 * _EPS
# Relative error in β that the digits cancelled from the primal statistics may cause before
# they are recomputed from the rows (or, without rows, the removal is refused) ...
_LOST_RTOL = 1e-10
# ... unless the cancelled digits stay within this multiple of the rounding of a fresh
# computation of the statistics (ε tr(M)), which a fresh fit suffers as well.
_FRESH_FACTOR = 8.0
# A removal's Woodbury core within this factor of its estimated rounding noise is not used (the
# estimate is an upper bound; iterative refinement measures the actual error below it) ...
_CORE_MARGIN = 1e2
# ... and above this relative noise β is refined against the exact statistics after the update,
# for at most _REFINE_STEPS steps before a refactorisation.
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


# ------------------------------------------------------------------ error-free transformations
def _split(a):
    """Dekker's split ``a = hi + lo`` (elementwise), ``hi`` with at most 26 significant bits."""
    c = _SPLIT * a
    hi = c - (c - a)
    return hi, a - hi


def _two_sum(a, b):
    """Knuth's TwoSum: ``s + e = a + b`` exactly, ``s = fl(a + b)`` (elementwise)."""
    s = a + b
    bb = s - a
    return s, (a - (s - bb)) + (b - bb)


def _two_prod(a, b):
    """Dekker's TwoProduct: ``p + e = a·b`` exactly, ``p = fl(a·b)`` (elementwise)."""
    p = a * b
    ah, al = _split(a)
    bh, bl = _split(b)
    return p, ((ah * bh - p) + ah * bl + al * bh) + al * bl


def _dot2(V, c):
    """``Vᵀc`` as ``hi + lo``, as accurate as if computed in twice the working precision.

    Ogita, Rump & Oishi's Dot2 ("Accurate sum and dot product") with the summation done as a
    pairwise cascade of TwoSums (vectorised over the columns of ``V`` and, for a matrix ``c``
    of shape (k, K), over its K columns: then ``hi`` and ``lo`` have shape (p, K)).
    """
    c = np.asarray(c, dtype=np.float64)
    if c.ndim == 1:
        P, E = _two_prod(V, c[:, None])
    else:
        P, E = _two_prod(V[:, :, None], c[:, None, :])
    lo = E.sum(axis=0)
    while P.shape[0] > 1:
        m = P.shape[0] // 2
        s, e = _two_sum(P[:m], P[m:2 * m])
        lo += e.sum(axis=0)
        P = s if P.shape[0] == 2 * m else np.vstack([s, P[2 * m:]])
    return P[0], lo


def _row_sq(V):
    """Squared norms of the rows of ``V`` (an array or a sparse matrix)."""
    if sp.issparse(V):
        return np.asarray(V.multiply(V).sum(axis=1), dtype=np.float64).ravel()
    return np.einsum("ij,ij->i", V, V)


def _dense(V):
    """``V`` as an array (a sparse matrix densified: the few rows of an update)."""
    if isinstance(V, Rows):
        return V.array()
    return V.toarray() if sp.issparse(V) else V


# ------------------------------------------------------ one or several right-hand sides
# Targets are a vector (n,) or a matrix (n, K) of K right-hand sides that share one matrix
# and one tracked inverse; the helpers below act on a vector exactly as the single-output code
# always did (same operations, bitwise the same results) and column by column on a matrix.
def _norms(x):
    """``‖x‖`` of a vector (a float), or the norms of the columns of a matrix (shape (K,))."""
    return np.linalg.norm(x) if x.ndim == 1 else np.linalg.norm(x, axis=0)


def _dots(a, b):
    """``aᵀb`` of two vectors (a float), or of each pair of columns of two matrices (K,)."""
    return float(a @ b) if a.ndim == 1 else np.einsum("ij,ij->j", a, b)


def _scaled_rows(s, x):
    """Row ``i`` of ``x`` (or entry ``i`` of a vector) times ``s[i]``."""
    return s * x if x.ndim == 1 else s[:, None] * x


def _target_size(c):
    """``|c_i|`` of a vector of targets, ``max_k |c_ik|`` of a matrix (one value per row)."""
    c = np.abs(c)
    return c if c.ndim == 1 else c.max(axis=1, initial=0.0)


def _out_shape(n_outputs):
    """The trailing shape of targets: ``()`` for a vector, ``(K,)`` for K columns."""
    return () if n_outputs is None else (int(n_outputs),)


def _n_outputs(t):
    """None for targets of shape (n,), ``K`` for shape (n, K)."""
    t = np.asarray(t)
    if t.ndim not in (1, 2):
        raise ValueError(f"targets must have shape (n,) or (n, K), got {t.shape}")
    return None if t.ndim == 1 else int(t.shape[1])


def _padded(a, capacity):
    """A zero array of ``capacity`` rows (a's trailing shape) with ``a`` at the front."""
    out = np.zeros((capacity,) + a.shape[1:])
    out[: a.shape[0]] = a
    return out


def _masked(x, mask):
    """``x`` with the rows (entries) outside the boolean ``mask`` set to zero."""
    return x * mask if x.ndim == 1 else x * mask[:, None]


def _symmetric(A):
    """The full symmetric matrix whose lower triangle is ``A``."""
    L = np.tril(A)
    return L + np.tril(L, -1).T


def _symmetrized(H):
    """``(H + Hᵀ) / 2``, exactly symmetric: what a saved tracked inverse becomes.

    The tracked inverse is a sum of symmetric corrections whose products round asymmetrically
    (:meth:`LowRankInverse.fold`), each by ~ε times the size of the inverse *when it was
    made*: after updates that shrink the problem by many orders (every weight to 1e-6, or C
    small) the residue of the earlier, larger inverses is no longer small against the
    current one, and a load-time symmetry test relative to the current matrix cannot tell
    it from damage.  Projecting onto the symmetric matrices removes it and never moves the
    tracked inverse away from the true one (which is symmetric: in the Frobenius norm
    ``‖sym(H) − A⁻¹‖ ≤ ‖H − A⁻¹‖``), so ``save`` writes — and keeps using — the projection,
    and ``load`` can test symmetry to rounding.  β is not touched.

    In place when ``H`` is a writable float64 array (a tracked inverse of n × n: block by
    block, so the extra memory is two blocks, not two copies of H); the mirrored entries are
    bitwise equal (IEEE addition commutes).
    """
    if not (isinstance(H, np.ndarray) and H.dtype == np.float64 and H.flags.writeable):
        H = np.array(H, dtype=np.float64, order="F")
    n = H.shape[0]
    step = 512
    for i in range(0, n, step):
        i2 = min(i + step, n)
        D = H[i:i2, i:i2]
        D[...] = (D + D.T) * 0.5
        for j in range(i2, n, step):
            j2 = min(j + step, n)
            avg = (H[i:i2, j:j2] + H[j:j2, i:i2].T) * 0.5
            H[i:i2, j:j2] = avg
            H[j:j2, i:i2] = avg.T
    return H


def _sym_norm1(M):
    """1-norm of the symmetric matrix whose lower triangle is ``M`` (≥ its 2-norm)."""
    A = np.abs(np.tril(M))
    return float(np.max(A.sum(axis=0) + A.sum(axis=1) - np.diagonal(A)))


def _cholesky(A, what):
    """Lower Cholesky factor of the SPD matrix whose lower triangle is ``A``."""
    try:
        return linalg.cho_factor(A, lower=True, check_finite=False)
    except linalg.LinAlgError as exc:
        raise ValueError(
            f"ill-conditioned update: {what} is not numerically positive definite ({exc})"
        ) from exc


def _inverse_from_cholesky(c, what):
    """Full symmetric inverse from a lower Cholesky factor (LAPACK potri)."""
    H, info = linalg.lapack.dpotri(c[0], lower=1)
    if info != 0:
        raise ValueError(f"ill-conditioned update: inverting {what} failed (info={info})")
    H = np.asfortranarray(H)
    iu = np.triu_indices_from(H, 1)
    H[iu] = H.T[iu]
    return H


def _spd_inverse(A, what):
    """Inverse of an SPD matrix by Cholesky (ValueError naming ``what`` if not SPD)."""
    c = _cholesky(A, what)
    return _inverse_from_cholesky(c, what), c


def _woodbury_core(G):
    """``-G⁻¹`` for a small symmetric (possibly indefinite) ``G``, or None if near singular."""
    if G.shape == (1, 1):
        g = float(G[0, 0])
        if not np.isfinite(g) or abs(g) < _CORE_RTOL * max(1.0, abs(g)):
            return None
        return np.array([[-1.0 / g]])
    lam, Q = np.linalg.eigh(0.5 * (G + G.T))
    if not np.all(np.isfinite(lam)):
        return None
    scale = max(1.0, float(np.max(np.abs(lam))))
    if np.min(np.abs(lam)) < _CORE_RTOL * scale:
        return None
    return -(Q / lam) @ Q.T


def _spd_core(A):
    """``-A⁻¹`` for a small SPD ``A`` (by Cholesky), or None if it is not numerically SPD."""
    try:
        c = linalg.cho_factor(A, lower=True, check_finite=False)
    except linalg.LinAlgError:
        return None
    return -linalg.cho_solve(c, np.eye(A.shape[0]), check_finite=False)


class Rows:
    """Rows ``source[index]`` of a matrix, gathered only when (and as) they are needed.

    Large batches stream through :meth:`_Statistics.gram` in chunks, so that the rows of a removal
    are gathered from the ledger's storage once and a bounded amount at a time.  ``transform``
    (a function of a block of rows, or None) maps each block as it is read: a model that keeps
    no rows gives its caller's raw rows and its feature map, so that Φ of a large removal is
    formed a chunk at a time (cache-sized) rather than as one fresh n × p array.
    """

    def __init__(self, source, index=None, transform=None):
        self.source = source
        self.index = None if index is None else np.asarray(index)
        self.transform = transform

    def __len__(self):
        return self.source.shape[0] if self.index is None else self.index.size

    def array(self):
        """The rows as one array (sparse rows densified)."""
        block = self.source if self.index is None else self.source[self.index]
        if self.transform is not None:
            block = self.transform(block)
        return block.toarray() if sp.issparse(block) else block

    def chunks(self, size=None):
        size = size or _CHUNK
        n = len(self)
        for i in range(0, n, size):
            if self.index is None:
                block = self.source[i:i + size]
            else:
                block = self.source[self.index[i:i + size]]
            if self.transform is not None:
                block = self.transform(block)
            # sparse rows enter the statistics a dense chunk at a time: the double-double
            # machinery (and BLAS) sees exactly what dense rows would give it
            yield i, np.ascontiguousarray(block.toarray() if sp.issparse(block) else block)


def as_rows(x):
    """``Rows`` from an array, a ``Rows`` or None (None for no rows)."""
    if x is None:
        return None
    rows = x if isinstance(x, Rows) else Rows(x)
    return rows if len(rows) else None


def _sym_matvec(M, x):
    """``M x`` for a symmetric ``M`` of which only the lower triangle is maintained (``x`` a
    vector, or a matrix of K columns)."""
    if x.ndim == 1:
        return blas.dsymv(1.0, M, x, lower=1)
    return blas.dsymm(1.0, M, x, side=0, lower=1)


class _Statistics:
    """The primal state's exact statistics ``M = ΦᵀΦ + ρI`` and ``b = Φᵀy``, in two parts.

    Ordinary rows enter ``M`` (Fortran order, lower triangle maintained) and ``b`` by BLAS
    (syrk, gemv), as plain sums.  Large rows, whose later removal would cancel digits (squared
    norm above ``big_sq`` or ``|coefficient|·norm`` above ``big_b``, both a multiple
    ``_BIG_RATIO`` of the median at the fit), enter a separate part ``Mbig + Mlo``, ``bbig +
    blo`` through error-free transformations (``lo`` holds what the rounding of ``big`` lost):
    kept apart, they neither cancel digits when they leave nor make the ordinary rows' sums round
    at their scale while they are there.  ``lost`` bounds the error (2-norm) that cancellation
    has left in ``M`` since it was last computed from the rows.

    The targets' part ``rhs = (b, bbig, blo)`` is replaced, never changed in place (an update
    restores it by reference); ``M``, ``Mbig`` and ``Mlo`` are changed in place (take a
    :meth:`copy` to roll back).

    With K right-hand sides (targets of shape (n, K)) each part of ``rhs`` has shape (p, K)
    and every column is kept as exactly as a single one: a row is large (enters ``bbig +
    blo`` by error-free transformations) when ``|c_ik|·norm`` exceeds ``big_b`` for any k.

    Parameters
    ----------
    p : int
        Width of Φ.
    rho : float
        ``ρ``, the ridge added to the diagonal.
    big_sq, big_b : float
        The limits above which a row is large.
    n_outputs : int or None, default=None
        None: one right-hand side, ``b`` of shape (p,); K: K of them, ``b`` of shape (p, K).
    """

    def __init__(self, p, rho, big_sq, big_b, n_outputs=None):
        self.M = np.zeros((p, p), order="F")
        self.M.flat[:: p + 1] = rho
        self.Mbig = self.Mlo = None
        shape = (p,) + _out_shape(n_outputs)
        self.rhs = (np.zeros(shape), np.zeros(shape), np.zeros(shape))
        self.big_sq, self.big_b, self.lost = float(big_sq), float(big_b), 0.0
        self._trace = None  # trace(M), computed when asked

    @classmethod
    def of_rows(cls, Phi, y, rho, limits=None):
        """The statistics of rows ``Phi`` and targets ``y`` (shape (n,) or (n, K));
        ``limits``: ``(big_sq, big_b)`` (None: from the medians of these rows, a row's target
        size being ``max_k |y_ik|`` for K columns)."""
        if limits is None:
            sq = _row_sq(Phi)
            med_b = float(np.median(np.sqrt(sq) * _target_size(y))) if y.size else 0.0
            limits = (_BIG_RATIO * (float(np.median(sq) if sq.size else 0.0) + rho),
                      _BIG_RATIO * max(med_b, np.finfo(np.float64).tiny))
        st = cls(Phi.shape[1], rho, *limits, n_outputs=_n_outputs(y))
        st.gram(Rows(Phi), 1.0, y)
        return st

    def copy(self):
        """An independent copy (for a rollback)."""
        out = _Statistics.__new__(_Statistics)
        out.__dict__.update(self.__dict__)
        out.M = self.M.copy(order="F")
        if self.Mbig is not None:
            out.Mbig = self.Mbig.copy(order="F")
            out.Mlo = self.Mlo.copy(order="F")
        return out

    @property
    def p(self):
        return self.M.shape[0]

    @property
    def n_outputs(self):
        """None for one right-hand side, K for K of them."""
        b = self.rhs[0]
        return None if b.ndim == 1 else b.shape[1]

    @property
    def b(self):
        """``b`` (the parts summed and rounded)."""
        b, bbig, blo = self.rhs
        return b + bbig + blo

    def _hot(self, sq, c=None):
        hot = sq > self.big_sq
        if c is not None:
            hot |= np.sqrt(sq) * _target_size(c) > self.big_b
        return hot

    def gram(self, rows, sign, y=None):
        """``M += sign·VᵀV`` and, with ``y`` (one target per row, or a row of K), ``b +=
        sign·Vᵀy`` for the rows ``V`` (``Rows`` or None), streamed in chunks; large rows through
        error-free transformations."""
        if rows is None:
            return
        self._trace = None
        for i, block in rows.chunks():
            sq = _row_sq(block)
            hot = self._hot(sq)
            if hot.any():
                for v in block[hot]:
                    self._exact_rank_one(v, sign)
                cold = block[~hot]
            else:
                cold = block
            if cold.shape[0]:
                # cold.T is a Fortran-ordered (p, k) view: C += sign · A Aᵀ, no transposed copy
                self.M = blas.dsyrk(float(sign), cold.T, beta=1.0, c=self.M, trans=0, lower=1,
                                    overwrite_c=1)
            if y is not None:
                self.rhs = self.plus(block, sign * y[i:i + block.shape[0]], sq)

    def _exact_rank_one(self, v, sign):
        """``Mbig + Mlo += sign·vvᵀ``, the rounding error kept in ``Mlo``."""
        h, l = _split(v)
        P = np.multiply.outer(h, h).T  # exact products; .T: Fortran order, like M
        if sign < 0:
            P = -P
        if self.Mbig is None:
            self.Mbig = np.zeros_like(self.M, order="F")
            self.Mlo = np.zeros_like(self.M, order="F")
        self.Mbig, e = _two_sum(self.Mbig, P)
        low = np.multiply.outer(h, l)
        low = low + low.T
        low += np.multiply.outer(l, l)  # the exact products h·l, l·h, l·l, rounded when summed
        self.Mlo += e
        if sign < 0:
            self.Mlo -= low
        else:
            self.Mlo += low

    def plus(self, V, c, sq=None, base=None):
        """``rhs`` after ``b += Vᵀc`` (``c``: (k,) or (k, K)), starting from ``base`` (default:
        the current one); new arrays, the statistics are not changed."""
        V = np.asarray(V)
        c = np.asarray(c, dtype=np.float64)
        b, bbig, blo = self.rhs if base is None else base
        if not c.size:
            return b, bbig, blo
        hot = self._hot(_row_sq(V) if sq is None else sq, c)
        if not hot.any():
            return b + V.T @ c, bbig, blo
        if not hot.all():
            b = b + V[~hot].T @ c[~hot]
        hi, lo = _dot2(V[hot], c[hot])
        bbig, e = _two_sum(bbig, hi)
        return b, bbig, blo + (e + lo)

    def cancellation(self, rows):
        """The error (2-norm) that removing ``rows`` leaves in ``M``: the rounding of their
        addition and of their removal, which no longer cancel against the data."""
        if rows is None:
            return 0.0
        return sum(self.cancellation_of(_row_sq(block)) for _, block in rows.chunks())

    def cancellation_of(self, sq):
        """:meth:`cancellation` of rows of squared norms ``sq``."""
        total = float(sq.sum())
        hot = sq > self.big_sq
        big = float(sq[hot].sum()) if hot.any() else 0.0
        return 2.0 * (_PLAIN_ERR * (total - big) + _COMPENSATED_ERR * big)

    def matrix(self):
        """``M`` (lower triangle) for a factorisation: the parts summed."""
        return self.M if self.Mbig is None else self.M + self.Mbig + self.Mlo

    def matvec(self, x):
        """``Mx`` from the parts (``x``: (p,) or (p, K))."""
        out = _sym_matvec(self.M, x)
        if self.Mbig is not None:
            out += _sym_matvec(self.Mbig, x) + _sym_matvec(self.Mlo, x)
        return out

    def residual(self, beta):
        """``b − Mβ`` from the parts (each part's difference first); (p,) or (p, K)."""
        b, bbig, blo = self.rhs
        r = b - _sym_matvec(self.M, beta)
        if self.Mbig is not None:
            r += (bbig - _sym_matvec(self.Mbig, beta)) + (blo - _sym_matvec(self.Mlo, beta))
        else:
            r += bbig + blo
        return r

    def trace(self):
        """trace(M), O(p) (kept until M changes)."""
        if self._trace is None:
            t = float(np.trace(self.M))
            if self.Mbig is not None:
                t += float(np.trace(self.Mbig)) + float(np.trace(self.Mlo))
            self._trace = t
        return self._trace

    def full(self):
        """``M`` as a full symmetric matrix (the parts summed and rounded)."""
        M = np.tril(self.matrix())
        return M + np.tril(M, -1).T


def _is_weighted(change):
    """Whether a change (or its ledger) carries sample weights: ``DataChange.weighted``, read
    so that a ledger without weights (a test's stand-in) counts as unweighted."""
    return bool(getattr(change.ledger, "weighted", False) or change.w_add is not None
                or change.reweight_slots is not None)


def _weighted_rows(V, c, w):
    """``(√w_i v_i, √w_i c_i)`` of the rows of positive weight: the weighted least-squares
    problem as an unweighted one (``(√w v)(√w v)ᵀ = w vvᵀ`` up to one rounding of each
    entry of the scaled row; rows of weight 0 are left out).  ``(None, None)`` when no
    weight is positive.  ``c``: (n,) or (n, K)."""
    V = sp.csr_matrix(V, dtype=np.float64) if sp.issparse(V) else np.asarray(V, dtype=np.float64)
    c = np.asarray(c, dtype=np.float64)
    w = np.asarray(w, dtype=np.float64)
    pos = w > 0
    if not pos.any():
        return None, None
    if not pos.all():
        V, c, w = V[np.flatnonzero(pos)], c[pos], w[pos]
    sw = np.sqrt(w)
    if sp.issparse(V):  # the same products as the dense rows', on the stored entries
        return sp.csr_matrix(V.multiply(sw[:, None])), _scaled_rows(sw, c)
    return sw[:, None] * V, _scaled_rows(sw, c)


def _reweight_data(change, slots):
    """Rows ``φ`` and targets (after the change's relabels) of the reweighted samples at
    ``slots``: from the ledger, or, for a ledger that keeps no rows or labels, from the
    change's ``rows_reweight`` / ``reweight_t`` (ValueError when it has none)."""
    led = change.ledger
    rows = led.X[slots] if led.keep_rows else getattr(change, "rows_reweight", None)
    if getattr(led, "keeps_labels", True):
        t = np.array(led.y[slots], dtype=np.float64)
        if change.relabel_slots is not None and len(change.relabel_slots):
            where = {int(r): i for i, r in enumerate(change.relabel_slots)}
            for j, slot in enumerate(np.asarray(slots).tolist()):
                if slot in where:
                    t[j] = change.relabel_t[where[slot]]
    else:
        t = getattr(change, "reweight_t", None)
    if rows is None or t is None:
        raise ValueError(
            "reweighting samples of a model that keeps no training rows (keep_data=False) "
            "needs their rows and labels, which this change does not carry: remove them "
            "(remove(X=..., y=...)) and add them back with the new weights, or refit"
        )
    return np.asarray(_dense(rows), dtype=np.float64), np.asarray(t, dtype=np.float64)


class _Reweight:
    """The reweights of one change in the primal state's terms.

    Attributes
    ----------
    U, cu, su : ndarray
        The Woodbury rows ``√|Δw| φ``, their targets ``√|Δw| t`` and signs ``sign(Δw)``
        (``Δw = w_new − w_old ≠ 0``).
    Sa, ca, Sr, cr : ndarray or None
        The statistics' rows: ``√w_new φ`` entering, ``√w_old φ`` leaving (None when every
        such weight is 0), and their targets.
    """

    def __init__(self, rows, t, w_old, w_new):
        dw = w_new - w_old
        self.U, self.cu = _weighted_rows(rows, t, np.abs(dw))
        self.su = np.sign(dw)
        self.Sa, self.ca = _weighted_rows(rows, t, w_new)
        self.Sr, self.cr = _weighted_rows(rows, t, w_old)

    @classmethod
    def of_change(cls, change):
        """The reweights of ``change`` whose weight moves (None when none does)."""
        slots = np.asarray(change.reweight_slots, dtype=np.intp)
        w_new = np.asarray(change.reweight_w, dtype=np.float64)
        w_old = np.asarray(change.ledger.w[slots], dtype=np.float64)
        moved = w_new != w_old
        if not moved.any():
            return None
        rows, t = _reweight_data(change, slots)
        if not moved.all():
            slots, rows, t, w_old, w_new = (a[moved] for a in (slots, rows, t, w_old, w_new))
        return cls(rows, t, w_old, w_new)

    @property
    def n_stat(self):
        """Rows the statistics take (one or two per reweighted row)."""
        return sum(0 if B is None else B.shape[0] for B in (self.Sa, self.Sr))

    def merged(self, rows, c, sign):
        """``(Rows, targets)`` of ``rows`` (``Rows`` or None) and this reweight's entering
        (``sign`` > 0) or leaving statistics rows, for a refactorisation."""
        B, cb = (self.Sa, self.ca) if sign > 0 else (self.Sr, self.cr)
        if B is None:
            return rows, c
        if rows is None:
            return Rows(B), cb
        return Rows(np.vstack([rows.array(), B])), np.concatenate([np.asarray(c), cb])


class PrimalSquaredState(ModelState):
    """Exact state of ``(ΦᵀΦ + ρI) β = Φᵀy`` under row additions, removals, relabels and
    reweights (with sample weights ``(ΦᵀWΦ + ρI) β = ΦᵀWy``, see the module docstring).

    ``M = ΦᵀΦ + ρI`` and ``b = Φᵀy`` are kept exactly (:class:`_Statistics`: BLAS syrk, large
    rows in double-double), together with the Cholesky factor from the last refactorisation;
    the explicit inverse that the one-sample Woodbury updates need is formed from that factor
    only when an update first asks for it.  See the module docstring for how a removal of high
    leverage is kept exact.

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
        self._chol = None      # Cholesky factor of M at the last refactorisation
        self._inv_ready = True  # whether inv.H0 is the inverse (else: form it from _chol)
        self.n_refactor = 0
        self.n_rebuild = 0     # recomputations of the statistics from the stored rows
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
        """``(1/cond₁(M), ‖M⁻¹‖₁)`` estimated from the held Cholesky factor (LAPACK pocon, O(p²))."""
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
        bound = math.sqrt(self.p) * (self._trace_M() * float(abs(beta).max()) +
                                     float(abs(b).max()))
        if not math.isfinite(bound):
            raise ValueError(
                "the solution overflowed (non-finite coefficients or residual): the data's "
                "magnitudes are too large for float64; rescale X (or use a smaller C)"
            )

    def _core_noise(self, h, sq):
        """Rounding noise of the Woodbury core ``V H Vᵀ ± I`` for rows of total leverage
        ``h = Σ |vᵀHv|`` and total squared norm ``sq`` (see the module docstring)."""
        return math.sqrt(self.p) * _EPS * ((1.0 + self._nM * self._nH) * h + self._nH * sq) + \
            self._eW * sq

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
        return (self.stats.copy(), self._np, self.inv.H0, self.inv.rank, self._chol,
                self._inv_ready, self.beta, self.n_refactor, self.n_rebuild, self._nM,
                self._nH, self._eW)

    def _restore(self, saved):
        (self.stats, self._np, self.inv.H0, self.inv.rank, self._chol, self._inv_ready,
         self.beta, self.n_refactor, self.n_rebuild, self._nM, self._nH, self._eW) = saved

    # ---------------------------------------------------------------- update
    def apply(self, Pa=None, ya=None, Pr=None, yr=None, Pl=None, dy=None, rows_after=None,
              rw=None):
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
            (self.beta, self.stats.rhs, self.stats.lost, self._nM, self._nH,
             self._eW) = saved
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
            return self._apply_refactor(Pa, ya, Pr, yr, Pl, dy, self.stats.cancellation(Pr),
                                        rows_after)
        Pa = None if Pa is None else Pa.array()
        Pr = None if Pr is None else Pr.array()
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
            s = np.concatenate([np.broadcast_to(np.asarray(sg, dtype=np.float64), B.shape[:1])
                                for B, _, sg in cparts])
            yv = np.concatenate([yy for _, yy, _ in cparts])
            sq_all = float(sqV.sum())
            sq_add = float(sqV[s > 0].sum())
            removing = bool(np.any(s < 0))
            sparts = parts + [(B, c, sg) for B, c, sg in ((rw.Sa, rw.ca, 1.0),
                                                          (rw.Sr, rw.cr, -1.0)) if B is not None]
            S = np.vstack([B for B, _, _ in sparts])
            sqS = _row_sq(S)
            sS = np.concatenate([np.full(B.shape[0], sg) for B, _, sg in sparts])
            q = self.stats.cancellation_of(sqS[sS < 0]) if np.any(sS < 0) else 0.0
            stat = (sparts, S, sS, sqS)
        W = self.inv.matvec(np.ascontiguousarray(V.T)) if k > 1 else \
            self.inv.matvec(V[0])[:, None]
        G = V @ W
        G.flat[:: k + 1] += s
        core = _woodbury_core(G)
        refine = False
        if core is not None:
            lam = abs(float(G[0, 0])) if k == 1 else \
                float(np.min(np.abs(np.linalg.eigvalsh(0.5 * (G + G.T)))))
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
                refine = noise > _REFINE_RTOL * lam
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
        beta = t + W @ (core @ (V @ t))
        r = self._np
        if stat is None:
            rhs = self._rhs(parts, Pl, dy, sqs)
            self._check_finite(beta, sum(rhs))
            self._P[r:r + k] = V
            self._s[r:r + k] = s
            self._sq[r:r + k] = sqV
            self._np = r + k
        else:
            sparts, S, sS, sqS = stat
            rhs = self._rhs(sparts, Pl, dy)
            self._check_finite(beta, sum(rhs))
            m = S.shape[0]
            self._P[r:r + m] = S
            self._s[r:r + m] = sS
            self._sq[r:r + m] = sqS
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

    def _rhs(self, parts, Pl, dy, sqs=None):
        """The statistics' ``rhs`` after the additions and removals ``parts`` (rows of squared
        norms ``sqs``, when known) and the relabels."""
        st = self.stats
        rhs = st.rhs
        for i, (B, yy, sg) in enumerate(parts):
            rhs = st.plus(B, sg * np.asarray(yy, dtype=np.float64),
                          None if sqs is None else sqs[i], base=rhs)
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
            energy_ok = self._energy(d) <= _DRIFT_RTOL ** 2 * np.maximum(
                np.abs(_dots(self.beta, self.b)), 1e-300)
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
        ``Rows`` or None; ``Pl``: relabelled rows (array) or None."""
        saved = self._save()
        try:
            self._fold_rows()
            st = self.stats
            st.gram(Pa, 1.0, ya)
            st.gram(Pr, -1.0, yr)
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
        return {"n_refactor": int(self.n_refactor), "n_folds": -1,  # folds are not counted
                "pending_rank": int(self.inv.rank)}

    def exact_matrix(self):
        """``ΦᵀΦ + ρI`` from the exact statistics, pending rows included (no fold), full."""
        M = self.stats.full()
        r = self._np
        if r:
            P = self._P[:r]
            M = M + (P.T * self._s[:r]) @ P
        return M

    def apply_change(self, change):
        """Apply a :class:`~deltafit._states._protocol.DataChange`; with sample weights (the ledger's
        or the change's), through :meth:`_apply_weighted`."""
        if _is_weighted(change):
            return self._apply_weighted(change)
        rows_after = change.rows_after if change.ledger.keep_rows else None
        rows_add, rows_relabel = change.rows_add, change.rows_relabel
        self.apply(None if rows_add is None else _dense(rows_add), change.t_add,
                   change.rows_remove, change.removed_targets,
                   None if rows_relabel is None else _dense(rows_relabel), change.target_shift,
                   rows_after)

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
            wa = (np.ones(len(change.add_slots)) if change.w_add is None
                  else np.asarray(change.w_add, dtype=np.float64))
            Pa, ya = _weighted_rows(as_rows(change.rows_add).array(), change.t_add, wa)
        if change.remove_slots is not None and len(change.remove_slots):
            Pr, yr = _weighted_rows(as_rows(change.rows_remove).array(),
                                    change.removed_targets, led.w[change.remove_slots])
        if change.relabel_slots is not None and len(change.relabel_slots):
            Pl, dy = _weighted_rows(np.asarray(_dense(change.rows_relabel)), change.target_shift,
                                    led.w[change.relabel_slots])
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
        out = {"state_M": st.full(), "state_b": st.b, "state_beta": self.beta,
               "state_H": np.ascontiguousarray(self.inv.H0),
               "state_limits": np.array([st.big_sq, st.big_b, st.lost]),
               "state_inv_err": np.array([min(self._eW, np.finfo(np.float64).max)])}
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
        return {"state_M_parts": (3, p, p), "state_b_parts": (3, p) + _out_shape(n_outputs),
                "state_limits": (3,), "state_inv_err": (1,)}

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
        M, b, beta, H = checked(arrays, cls.saved_shapes(None, p, n_outputs),
                                "squared-loss state")
        check_symmetric(M, "matrix ΦᵀΦ + ρI")
        # every inverse this one was tracked through inverted some ΦᵀWΦ + ρI ⪰ ρI, so had norm
        # ≤ 1/ρ whatever the updates were: the rounding asymmetry of the corrections is a
        # multiple of ε/ρ even when the current inverse is far smaller (files written before
        # save symmetrised it, after updates that shrank the problem)
        check_symmetric(H, "tracked inverse", scale=1.0 / st.rho)
        d = np.diag(M)
        if d.size and float(d.min()) < st.rho - 1e-8 * float(np.max(np.abs(d))):
            raise ValueError("corrupt model file: the diagonal of ΦᵀΦ + ρI is below ρ = 1/(2C)")
        optional = {name: shape for name, shape in
                    cls.optional_shapes(None, p, n_outputs).items() if name in arrays}
        extra = dict(zip(optional, checked(arrays, optional, "squared-loss state")))
        if "state_limits" in extra:
            big_sq, big_b, lost = (float(v) for v in extra["state_limits"])
        else:  # a file from before the limits were kept: from the mean row of M
            n = max(1 if y is None else int(np.size(y)), 1)
            mean_sq = max(float(np.trace(M)) - p * st.rho, 0.0) / n
            big_sq = _BIG_RATIO * (mean_sq + st.rho)
            big_b = _BIG_RATIO * max(np.sqrt(mean_sq) * float(np.median(_target_size(y)))
                                     if y is not None and np.size(y) else 0.0,
                                     np.finfo(np.float64).tiny)
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


def _inv_err(a):
    """The tracked inverse's error bound from a file's ``state_inv_err`` (ValueError unless
    it is one finite number ≥ 0)."""
    e = float(np.asarray(a, dtype=np.float64).reshape(-1)[0])
    if not (math.isfinite(e) and e >= 0.0):
        raise ValueError("corrupt model file: the tracked inverse's error bound "
                         "(state_inv_err) must be a finite number ≥ 0")
    return e


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


def _correction_error(U, core):
    """Rounding error (a 2-norm bound, up to a small constant) that forming and applying the
    Woodbury correction ``U core Uᵀ`` adds to a tracked inverse: ``ε ‖U‖_F² ‖core‖_F``."""
    return _EPS * float(np.sum(U * U)) * float(np.linalg.norm(core))


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
        return (self.rem.size + self.mute.size + self.diag.size + self.unmute.size
                + int(np.count_nonzero(self.add_w > 0)))


class DualSquaredState(ModelState):
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
        return {"n_refactor": int(self.n_refactor), "n_folds": int(self.n_folds),
                "pending_rank": int(self.inv.rank)}

    def reusable_slots(self):
        """Removed slots whose rows and columns are now exactly zero: safe to reuse."""
        clean, self._clean = self._clean, []
        return clean

    def apply_change(self, change):
        """Apply a :class:`~deltafit._states._protocol.DataChange`; with sample weights (the
        ledger's or the change's), through :meth:`_apply_weighted`."""
        if _is_weighted(change) or self.w is not None:
            return self._apply_weighted(change)
        self.apply(rem=change.remove_slots, add=change.add_slots, K_cross=change.K_cross,
                   K_new=change.K_new, y_add=change.t_add, rel=change.relabel_slots,
                   dy=change.target_shift, capacity=change.ledger.capacity)

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

    def apply(self, rem=None, add=None, K_cross=None, K_new=None, y_add=None,
              rel=None, dy=None, capacity=None):
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
                return self._woodbury(None, rem, add, K_cross, K_new, y_add, rel, dy, k_rem,
                                      k_add)
            except _Unreliable:
                self.y, self.active, self._dirty = before[0].copy(), before[1].copy(), \
                    list(before[2])
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

    # ------------------------------------------------------------ weighted update
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
                before = (self.y.copy(), self.active.copy(), self.w.copy(), list(self._dirty),
                          list(self._muted), list(self._clean))
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
            P.add_w = (np.ones(P.add.size) if change.w_add is None
                       else np.asarray(change.w_add, dtype=np.float64))
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
            noise = _EPS * (trace / dmin + 1.0) * float(np.max(np.abs(delta))) * \
                float(np.max(np.abs(np.diagonal(Hss)), initial=0.0)) * S.size
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

    def _refine_once(self):
        """One refinement step against the exact kernel matrix, as in a fold; refactorise
        when it moves α beyond the drift tolerance."""
        self._zero_dirty()
        d = self.inv.H0 @ self.residual()
        self.alpha = self.alpha + d
        if _drifted(d, self.alpha):
            self._refactor()

    def refine_each_for(self, w, active):
        """:attr:`refine_each` for the weights ``w`` on the slots ``active``."""
        return float(np.max(np.diagonal(self.gram.K))) > \
            _REFINE_COND * self._diag_min(w, active)

    def _refactor_weighted(self, P):
        """The weighted change applied to the targets, weights and active set, then one
        refactorisation of ``K + ρW⁻¹`` (an unreliable or too large Woodbury step)."""
        saved = (self.y.copy(), self.active.copy(), self.w.copy(), self.alpha, self.inv.H0,
                 self.inv.rank, list(self._dirty), list(self._muted), list(self._clean))
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
            (self.y, self.active, self.w, self.alpha, H0, rank, self._dirty, self._muted,
             self._clean) = saved
            self.inv.H0 = H0
            self.inv.rank = rank
            raise

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
        return {"state_K": self.gram.sub(keep), "state_alpha": self.alpha[keep],
                "state_H": self.inv.H0[np.ix_(keep, keep)],
                "state_inv_err": np.array([getattr(self, "_err", 0.0)])}

    @classmethod
    def saved_shapes(cls, n, p, n_outputs=None):
        """``{name: shape}`` of the arrays :meth:`to_arrays` writes for ``n`` live samples
        (``p`` unused); ``n_outputs``: None for targets of shape (n,) (``state_alpha``: (n,)),
        K for targets of shape (n, K) (``state_alpha``: (n, K))."""
        return {"state_K": (n, n), "state_alpha": (n,) + _out_shape(n_outputs),
                "state_H": (n, n)}

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
                raise ValueError("corrupt model file: the sample weights do not match the "
                                 "kernel state")
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
