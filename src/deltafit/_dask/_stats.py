"""The squared loss's sufficient statistics of a Dask-backed X, reduced on the cluster.

``M = ΦᵀWΦ + ρI`` and ``b = ΦᵀWt`` (ARCHITECTURE.md, "The problem"; Lee et al., "Exact
incremental and decremental learning for LS-SVM", the statistics behind Thm 1 and Cor. 1–4)
are sums over the rows: each row block computes its own share on a worker, with the NumPy
path's accumulation (:meth:`~deltafit._states._squared_stats._Statistics.of_rows`: BLAS syrk in
chunks, rows of large norm through error-free transformations), and the shares are added in a
tree (fan-in 8), the double-double parts through Knuth's TwoSum (Ogita, Rump & Oishi,
"Accurate sum and dot product").  The same block task validates its rows and labels, encodes
the labels and computes the keyed digests of its samples (16 bytes each, :mod:`._digest`:
what recognises a sample of a ``keep_data=False`` model later), split by the top bits of
their key into the segments of :class:`~.SortedDigests`; one task per segment then
gathers that segment's pieces of every block and sorts them.  Only p × p and p-sized arrays
and the sorted segments (20 bytes a sample) reach the client, which builds no n-sized array.

The NumPy path sets the limit above which a row is *large* from the median squared norm of all
rows; here it is the median of the blocks' medians, known only after the pass.  The first pass
therefore sums every row plainly and reports the largest norm; when some row passes the limit
(data with outlying rows), a second pass recomputes the blocks' shares with large rows kept
apart, as the NumPy path keeps them.  Data without such rows are read once.
"""

from __future__ import annotations

import numpy as np

from deltafit._dask._rows import FAN_IN, compute_on_cluster
from deltafit._ledger import SEGMENT_BITS, digest_array, digest_keys, sorted_segment
from deltafit._linalg._compensated import _two_sum
from deltafit._states._one_vs_rest import one_hot_codes
from deltafit._states._squared_stats import (
    _BIG_RATIO,
    _row_sq,
    _Statistics,
    _target_size,
    _weighted_rows,
)
from deltafit.utils._validation import check_magnitude, check_scale

__all__ = ["BlockProblem", "FitStatistics", "reduce_statistics"]


class BlockProblem:
    """What each block task needs, shipped to the workers (picklable).

    Parameters
    ----------
    featurize : callable
        ``Φ(x)`` of a NumPy block of rows (the fitted feature map and the constant column).
    n_features : int
        Columns of X.
    labels : BinaryLabels or None
        The classifier's label encoder (targets ±1); None for a regressor.
    n_outputs : int
        K ≥ 2 outputs of a multi-output regressor, else 0.
    C : float
    key : bytes or None
        The ledger's digest key (None: no digests).
    scheme : str
        The ledger's digest scheme.
    n_classes : int, default=0
        K ≥ 3 for a one-vs-rest classifier: the targets are class indices (what the digests
        and the row store keep), and the statistics are those of the K columns of ±1 codes
        (``ΦᵀWT``, p × K: one right-hand side per class).
    """

    def __init__(
        self, featurize, n_features, labels, n_outputs, C, key, scheme="nh-sip", n_classes=0
    ):
        self.featurize, self.n_features = featurize, int(n_features)
        self.labels, self.n_outputs, self.C, self.key = labels, int(n_outputs), float(C), key
        self.scheme, self.n_classes = scheme, int(n_classes)

    def codes(self, t):
        """The targets the statistics sum: ``t`` itself, or (K classes) its K columns of ±1
        codes."""
        return one_hot_codes(t, self.n_classes) if self.n_classes else t

    def targets(self, y):
        """Encoded targets of a block of labels (ValueError naming a bad label or value)."""
        y = np.asarray(y)
        if self.labels is not None:
            if y.ndim == 2 and y.shape[1] == 1:
                y = y.ravel()
            return self.labels.encode(y, "y")
        try:
            y = np.asarray(y, dtype=np.float64)
        except (TypeError, ValueError) as exc:
            raise ValueError(f"y must be numeric for a regressor: {exc}") from exc
        if self.n_outputs:
            if y.ndim != 2 or y.shape[1] != self.n_outputs:
                raise ValueError(
                    f"y must have shape (n_samples, {self.n_outputs}), got a "
                    f"block of shape {y.shape}"
                )
        elif y.ndim == 2 and y.shape[1] == 1:
            y = y.ravel()
        if not np.all(np.isfinite(y)):
            raise ValueError("y contains NaN or infinity")
        top = float(np.max(np.abs(y))) if y.size else 0.0
        check_magnitude(top * top, self.C, "y: the squared target", "rescale y")
        return y

    def rows(self, x):
        """A validated float64 block of rows, C-contiguous and aligned (a block received on a
        worker inside a graph may start at an address that is no multiple of 8, which sends
        NumPy to its unaligned loops in every later pass: then it is copied once here)."""
        try:
            x = np.require(x, dtype=np.float64, requirements=["C", "A"])
        except (TypeError, ValueError) as exc:
            raise ValueError(f"X must be numeric: {exc}") from exc
        if x.ndim != 2 or x.shape[1] != self.n_features:
            raise ValueError(f"X block of shape {x.shape}: expected {self.n_features} columns")
        if not np.all(np.isfinite(x)):
            raise ValueError("X contains NaN or infinity")
        return x

    def weights(self, w, k):
        """Validated weights of a block (None: every weight 1)."""
        if w is None:
            return None
        w = np.asarray(w, dtype=np.float64).reshape(-1)
        if w.shape != (k,):
            raise ValueError(f"sample_weight block of shape {w.shape}: expected ({k},)")
        if not np.all(np.isfinite(w)):
            raise ValueError("sample_weight contains NaN or infinity")
        if np.any(w < 0):
            raise ValueError("sample_weight has negative weights; weights must be >= 0")
        return w


class FitStatistics:
    """One block's (or a sum of blocks') share of the fit: the statistics and the counts.

    Attributes
    ----------
    stats : _Statistics
        ``ΦᵀWΦ`` (no ρ yet) and ``ΦᵀWt``, in parts.
    n : int
        Rows.
    n_positive : int
        Targets > 0 (classifiers).
    n_weighted, n_weighted_positive : int
        Rows of positive weight, and those of them with targets > 0.
    all_ones : bool
        Whether every weight is 1 (or no weights were given).
    medians : list of (int, float, float)
        Per block: rows, median squared norm, median ``|t|·norm``.
    max_sq, max_b : float
        The largest squared norm and ``|t|·norm``.
    """

    def __init__(
        self,
        stats,
        n,
        n_positive,
        n_weighted,
        n_weighted_positive,
        all_ones,
        medians,
        max_sq,
        max_b,
    ):
        self.stats, self.n, self.n_positive = stats, n, n_positive
        self.n_weighted, self.n_weighted_positive = n_weighted, n_weighted_positive
        self.all_ones, self.medians, self.max_sq, self.max_b = all_ones, medians, max_sq, max_b


def _block_pieces(D, offset):
    """The digests ``D`` of a block whose first row is sample ``offset``, split into the
    segments of :class:`~.SortedDigests`: per segment ``(keys, checks, slots)``."""
    k1, k2 = digest_keys(D)
    n_seg = 2**SEGMENT_BITS
    slots = np.arange(offset, offset + k1.size, dtype=np.int64)
    g = (k1 >> np.uint64(64 - SEGMENT_BITS)).astype(np.intp)
    order = np.argsort(g, kind="stable")
    bounds = np.searchsorted(g[order], np.arange(n_seg + 1))
    return [
        (k1[order[a:b]], k2[order[a:b]], slots[order[a:b]]) for a, b in zip(bounds[:-1], bounds[1:])
    ]


def _segment(n, *pieces):
    """One segment of every block's pieces, sorted (slots as uint32 below 2³² samples)."""
    keys = np.concatenate([p[0] for p in pieces])
    checks = np.concatenate([p[1] for p in pieces])
    slots = np.concatenate([p[2] for p in pieces])
    return sorted_segment(keys, checks, slots.astype(np.uint32 if n < 2**32 else np.int64))


def _block_share(x, y, w, problem, limits, offset=0, fold=None, n_folds=0):
    """A block's :class:`FitStatistics` (with folds: a list of one per fold, the fold's rows
    of the block) and the digests of its samples split into segments (``_block_pieces``; an
    empty list without a key)."""
    x = problem.rows(x)
    t = problem.targets(y)
    k = x.shape[0]
    if t.shape[0] != k:
        raise ValueError(f"X has {k} rows but y has {t.shape[0]} labels in a block")
    w = problem.weights(w, k)
    Phi = np.asarray(problem.featurize(x), dtype=np.float64)
    check_scale(Phi, problem.C)
    if problem.key is not None:
        digests = _block_pieces(digest_array(x, t, problem.key, problem.scheme), offset)
    else:
        digests = []
    t = problem.codes(t)
    if fold is None:
        return _share(Phi, t, w, limits), digests
    fold = np.asarray(fold).reshape(-1)
    if fold.shape != (k,):
        raise ValueError(f"fold block of shape {fold.shape}: expected ({k},)")
    return [
        _share(Phi[fold == f], t[fold == f], None if w is None else w[fold == f], limits)
        for f in range(n_folds)
    ], digests


def _share(Phi, t, w, limits):
    """The :class:`FitStatistics` of rows ``Phi`` with targets ``t`` and weights ``w``."""
    k = Phi.shape[0]
    all_ones = w is None or bool(np.all(w == 1.0))
    V, c = (Phi, t) if w is None else _weighted_rows(Phi, t, w)
    if V is None or V.shape[0] == 0:  # every weight 0, or no row
        V, c = np.zeros((0, Phi.shape[1])), np.zeros((0,) + t.shape[1:])
    stats = _Statistics.of_rows(V, c, 0.0, limits)
    sq = _row_sq(V)
    bs = np.sqrt(sq) * _target_size(c)
    pos = t > 0 if t.ndim == 1 else np.zeros(k, dtype=bool)
    wpos = np.ones(k, dtype=bool) if w is None else w > 0
    return FitStatistics(
        stats,
        k,
        int(np.count_nonzero(pos)),
        int(np.count_nonzero(wpos)),
        int(np.count_nonzero(pos & wpos)),
        all_ones,
        [(int(sq.size), float(np.median(sq)), float(np.median(bs)))] if sq.size else [],
        float(sq.max(initial=0.0)),
        float(bs.max(initial=0.0)),
    )


def _merge(*shares):
    """The sum of blocks' shares (double-double parts through TwoSum)."""
    out = shares[0]
    st = out.stats.copy()
    meds = list(out.medians)
    n, n_pos, n_w, n_wp, ones = (
        out.n,
        out.n_positive,
        out.n_weighted,
        out.n_weighted_positive,
        out.all_ones,
    )
    max_sq, max_b = out.max_sq, out.max_b
    for sh in shares[1:]:
        o = sh.stats
        st.M = np.asfortranarray(st.M + o.M)
        if o.Mbig is not None:
            if st.Mbig is None:
                st.Mbig, st.Mlo = o.Mbig.copy(order="F"), o.Mlo.copy(order="F")
            else:
                big, e = _two_sum(st.Mbig, o.Mbig)
                st.Mbig, st.Mlo = np.asfortranarray(big), np.asfortranarray(st.Mlo + o.Mlo + e)
        (b1, big1, lo1), (b2, big2, lo2) = st.rhs, o.rhs
        big, e = _two_sum(big1, big2)
        st.rhs = (b1 + b2, big, lo1 + lo2 + e)
        meds.extend(sh.medians)
        n, n_pos, n_w, n_wp = (
            n + sh.n,
            n_pos + sh.n_positive,
            n_w + sh.n_weighted,
            n_wp + sh.n_weighted_positive,
        )
        ones = ones and sh.all_ones
        max_sq, max_b = max(max_sq, sh.max_sq), max(max_b, sh.max_b)
    st._trace = None
    return FitStatistics(st, n, n_pos, n_w, n_wp, ones, meds, max_sq, max_b)


def _merge_folds(*lists):
    """Per fold, the sum of blocks' shares."""
    return [_merge(*shares) for shares in zip(*lists)]


def _tree_sum(shares, folds=False):
    from dask import delayed

    merge = _merge_folds if folds else _merge
    level = list(shares)
    while len(level) > 1:
        level = [delayed(merge)(*level[i : i + FAN_IN]) for i in range(0, len(level), FAN_IN)]
    return level[0]


def with_limits(total, limits, rho):
    """``total.stats`` made ``M = ΦᵀWΦ + ρI`` with the large-row limits set (in place)."""
    st = total.stats
    st.big_sq, st.big_b = float(limits[0]), float(limits[1])
    st.M = np.asfortranarray(st.M)
    st.M.flat[:: st.p + 1] += rho
    st._trace = None
    return total


def _limits(medians, rho):
    """``(big_sq, big_b)``: ``_BIG_RATIO`` times the blocks' median squared norm (+ ρ) and
    median ``|t|·norm`` (the NumPy path takes the medians over all rows)."""
    if not medians:
        return _BIG_RATIO * rho, _BIG_RATIO * np.finfo(np.float64).tiny
    sizes = np.array([m[0] for m in medians], dtype=np.float64)
    order_sq = np.array([m[1] for m in medians])
    order_b = np.array([m[2] for m in medians])

    def weighted_median(v):
        i = np.argsort(v, kind="stable")
        cum = np.cumsum(sizes[i])
        return float(v[i][np.searchsorted(cum, 0.5 * cum[-1])])

    return (
        _BIG_RATIO * (weighted_median(order_sq) + rho),
        _BIG_RATIO * max(weighted_median(order_b), np.finfo(np.float64).tiny),
    )


def reduce_statistics(blocks, problem, rho, n_folds=0):
    """The statistics of the rows of ``blocks`` (:class:`~._dask_input.RowBlocks`) on the
    cluster: one pass (two when some row is large, see the module docstring).

    With ``n_folds`` (and ``blocks.fold``: each row's fold, 0..n_folds-1) the same pass sums
    each fold's statistics apart (``total.folds``: a list of :class:`FitStatistics` without
    ρ, with ``total.limits``), from which each fold's model is a batch removal
    (:func:`fold_statistics`).

    Returns
    -------
    total : FitStatistics
        ``total.stats`` is ``M = ΦᵀWΦ + ρI`` and ``b`` with the limits set.
    segments : list of (keys, checks, slots)
        The samples' keyed digests as the sorted segments of a
        :class:`~.SortedDigests` (samples numbered 0..n-1 in row order; empty
        without a key).
    n_passes : int
    """
    from dask import delayed

    infinite = (np.inf, np.inf)
    offsets = np.concatenate([[0], np.cumsum(blocks.X.chunks[0])]).astype(np.int64)
    folds = n_folds > 0
    tasks = [
        delayed(_block_share, nout=2)(x, y, w, problem, infinite, int(off), f, n_folds)
        for (x, y, w, f), off in zip(blocks.parts, offsets[:-1].tolist())
    ]
    segs = []
    if problem.key is not None:
        n = int(offsets[-1])
        segs = [delayed(_segment)(n, *[t[1][g] for t in tasks]) for g in range(2**SEGMENT_BITS)]
    total, *digests = compute_on_cluster(
        _tree_sum([t[0] for t in tasks], folds), *segs, what="the pass of the sufficient statistics"
    )
    parts = total if folds else None
    if folds:
        total = _merge(*parts)
    limits = _limits(total.medians, rho)
    passes = 1
    if total.max_sq > limits[0] or total.max_b > limits[1]:
        # some rows are large: sum the shares again with those rows kept apart, exactly
        nokey = BlockProblem(
            problem.featurize,
            problem.n_features,
            problem.labels,
            problem.n_outputs,
            problem.C,
            None,
            n_classes=problem.n_classes,
        )
        again = [
            delayed(_block_share, nout=2)(x, y, w, nokey, limits, 0, f, n_folds)[0]
            for x, y, w, f in blocks.parts
        ]
        (total,) = compute_on_cluster(
            _tree_sum(again, folds), what="the pass of the large rows' statistics"
        )
        if folds:
            parts, total = total, _merge(*total)
        passes = 2
    total.folds, total.limits = parts, limits
    return with_limits(total, limits, rho), digests, passes


def fold_statistics(total, f, rho):
    """The statistics of every fold but ``f`` (``total`` from :func:`reduce_statistics` with
    folds): summed from the other folds' shares, not subtracted from the total, so that no
    cancellation enters (a fold's model is the batch removal of its fold's samples)."""
    others = [s for g, s in enumerate(total.folds) if g != f]
    if not others:
        raise ValueError("cross-validation needs at least two folds")
    return with_limits(_merge(*others), total.limits, rho)
