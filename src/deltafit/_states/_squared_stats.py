"""What the two squared-loss states share: rows, targets, tolerances and the exact statistics.

The closed-form states (:mod:`~deltafit._states._squared_primal`, Lee et al., "Exact
incremental and decremental learning for LS-SVM", Theorem 1 and Corollaries 1–4, and
:mod:`~deltafit._states._squared_dual`) keep exact sufficient statistics next to a tracked
inverse.  This module holds:

* :class:`Rows`: rows of a matrix gathered (and feature-mapped) a chunk at a time, so that a
  large removal streams through BLAS syrk without one fresh n × p copy;
* the helpers that make one code path serve targets of shape (n,) and (n, K): K right-hand
  sides (the ±1 one-vs-rest codes of K classes, or K regression outputs) share the one matrix,
  factorisation and tracked inverse, every column kept, refined and checked as a single
  output would be; a vector gives exactly (bitwise) the single-output operations;
* :class:`_Statistics`, the primal state's ``M = ΦᵀΦ + ρI`` and ``b = Φᵀy``.  The statistics
  themselves cancel: ``M + vvᵀ − vvᵀ`` keeps the rounding error of the first sum, ``ε‖v‖²``,
  for good, and ordinary rows summed into an ``M`` that holds a large one are rounded at its
  scale.  Rows whose squared norm (or product with their target) stands far above the median
  at the fit are therefore kept in a separate part of ``M`` and ``b``, summed through
  error-free transformations (:mod:`~deltafit._linalg._compensated`: Dekker's split product
  and Knuth's TwoSum; Ogita, Rump & Oishi, "Accurate sum and dot product") as unevaluated sums
  ``hi + lo`` that lose about 26 bits fewer; what cancellation still costs is bounded as it
  happens (``lost``);
* sample weights in the primal state's terms (the data term ``C Σ w_i (t_i − z_i)²``): the
  weighted problem is the unweighted one on rows ``√w_i φ_i`` and targets ``√w_i t_i``
  (:func:`_weighted_rows`), a reweight ``w → w'`` one Woodbury row ``√|w' − w| φ`` of sign
  ``sign(w' − w)`` while the statistics see the row leave with ``√w`` and come back with
  ``√w'`` (:class:`_Reweight`);
* the tolerances both states apply, and the check of a saved inverse's error bound.
"""

from __future__ import annotations

import math

import numpy as np
import scipy.sparse as sp
from scipy.linalg import blas

from deltafit._linalg._compensated import _EPS, _dot2, _split, _two_sum
from deltafit._linalg._spd import _sym_matvec, _symmetric

__all__ = ["Rows", "as_rows"]

# Iterative-refinement correction (relative) above which the tracked inverse is recomputed.
_DRIFT_RTOL = 1e-9
# Rows per chunk when streaming a large batch through syrk: at least _CHUNK, else as many as
# _CHUNK_BYTES of float64 hold (bounds the gathered copy's memory; few, large syrk calls: with
# several BLAS threads each call pays their synchronisation).
_CHUNK = 512
_CHUNK_BYTES = 1 << 25
# A row whose squared norm (or |target|·norm) exceeds this multiple of the median at the fit
# enters the primal statistics through error-free transformations: its removal would cancel
# digits that a plain sum loses.
_BIG_RATIO = 256.0
# Error (2-norm, in units of ‖v‖²) one rank-one update of M leaves behind: plain (BLAS syrk:
# the products and the sums are rounded) and compensated (only the low-order products, at most
# 2⁻²⁶‖v‖², are rounded, once more when they are added up).
_PLAIN_ERR = 2.0 * _EPS
_COMPENSATED_ERR = 8.0 * 2.0**-26 * _EPS
# An error (the cancelled digits of the primal statistics, or the dual state's tracked inverse)
# within this multiple of the rounding of a fresh computation is accepted: a fresh fit suffers
# it as well.
_FRESH_FACTOR = 8.0
# A removal's Woodbury core within this factor of its estimated rounding noise is not used (the
# estimate is an upper bound; iterative refinement measures the actual error below it).
_CORE_MARGIN = 1e2


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
        """``(start, block)`` of the rows, ``size`` at a time (None: the default chunk, see
        ``_CHUNK_BYTES``), each block a C-contiguous dense array, valid until the next one is
        asked for (rows gathered from a dense float64 array share one buffer: a large removal
        does not fault in fresh pages for every chunk)."""
        shape = getattr(self.source, "shape", ())
        if not size:
            width = shape[1] if len(shape) == 2 else 1
            size = max(_CHUNK, _CHUNK_BYTES // (8 * max(int(width), 1)))
        n = len(self)
        buf = None
        if (
            self.index is not None
            and self.transform is None
            and n > 1
            and isinstance(self.source, np.ndarray)
            and self.source.ndim == 2
            and self.source.dtype == np.float64
            and 0 <= int(self.index.min())
            and int(self.index.max()) < shape[0]
        ):  # (indices checked here: take then need not buffer its output, see mode below)
            buf = np.empty((min(size, n), shape[1]))
        for i in range(0, n, size):
            if self.index is None:
                block = self.source[i : i + size]
            elif buf is not None:
                j = self.index[i : i + size]
                block = np.take(self.source, j, axis=0, out=buf[: j.size], mode="clip")
            else:
                block = self.source[self.index[i : i + size]]
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
            limits = (
                _BIG_RATIO * (float(np.median(sq) if sq.size else 0.0) + rho),
                _BIG_RATIO * max(med_b, np.finfo(np.float64).tiny),
            )
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
        error-free transformations.

        Returns
        -------
        float
            :meth:`cancellation` of the rows (0.0 for None), measured as they stream by: a
            removal reads its rows once."""
        if rows is None:
            return 0.0
        self._trace = None
        lost = 0.0
        for i, block in rows.chunks():
            sq = _row_sq(block)
            lost += self.cancellation_of(sq)
            hot = self._hot(sq)
            if hot.any():
                for v in block[hot]:
                    self._exact_rank_one(v, sign)
                cold = block[~hot]
            else:
                cold = block
            if cold.shape[0]:
                # cold.T is a Fortran-ordered (p, k) view: C += sign · A Aᵀ, no transposed copy
                self.M = blas.dsyrk(
                    float(sign), cold.T, beta=1.0, c=self.M, trans=0, lower=1, overwrite_c=1
                )
            if y is not None:
                self.rhs = self.plus(block, sign * y[i : i + block.shape[0]], sq)
        return lost

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
        return _symmetric(self.matrix())


def _is_weighted(change):
    """Whether a change (or its ledger) carries sample weights: ``DataChange.weighted``, read
    so that a ledger without weights (a test's stand-in) counts as unweighted."""
    return bool(
        getattr(change.ledger, "weighted", False)
        or change.w_add is not None
        or change.reweight_slots is not None
    )


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


def _inv_err(a):
    """The tracked inverse's error bound from a file's ``state_inv_err`` (ValueError unless
    it is one finite number ≥ 0)."""
    e = float(np.asarray(a, dtype=np.float64).reshape(-1)[0])
    if not (math.isfinite(e) and e >= 0.0):
        raise ValueError(
            "corrupt model file: the tracked inverse's error bound "
            "(state_inv_err) must be a finite number ≥ 0"
        )
    return e
