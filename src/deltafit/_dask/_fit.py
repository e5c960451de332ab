"""The fit of a Dask-backed ``keep_data=True`` model: one pass that validates, encodes and
persists the row blocks on the cluster (:class:`~._dask_rows.DaskRowStore`), computes the
samples' keyed digests (the range ledger's :class:`~.SortedDigests`) and the counts
the model checks, and, for the smooth losses, the first Newton pass at the start (J, ∇J,
∇J(0) and the Hessian: :func:`~._dask_newton.prepare_block`) and the largest sample
curvature ``C·w·‖Φ(x)‖²``: a logistic / squared-hinge fit with a sample beyond double
precision is refused by the NumPy path's rule (:func:`deltafit.solvers.check_curvature`)
before anything is kept."""

from __future__ import annotations

import numpy as np

from deltafit._dask._input import RowBlocks
from deltafit._dask._newton import _largest, prepare_block, refuse_curvature
from deltafit._dask._rows import DaskRowStore, compute_on_cluster
from deltafit._dask._stats import _segment
from deltafit._ledger import SEGMENT_BITS

__all__ = ["persist_rows"]


def _piece(out, g):
    return out[1][g]


def _row_part(out, i):
    return out[0][i]


def _counts(*outs):
    return sum(o[2] for o in outs)


def _shares(*outs):
    total = outs[0][3]
    for o in outs[1:]:
        total = total + o[3]
    return total


def persist_rows(blocks, problem, spec=None, beta0=None, digests=True, prepare=prepare_block):
    """Validate, encode and persist the rows of ``blocks`` (one pass).

    ``prepare`` is the block task (:func:`~._dask_newton.prepare_block`'s signature and
    outputs; the one-vs-rest fit's evaluates every class's start,
    :func:`~._dask_ovr.prepare_ovr_block`).

    Raises
    ------
    ValueError
        For a bad block (the block task's refusals), and, with ``spec`` of a logistic /
        squared-hinge loss, for a sample whose Newton curvature ``C·w·ℓ''·‖Φ(x)‖²`` exceeds
        :data:`deltafit.solvers.MAX_CURVATURE` (:func:`~._dask_newton.refuse_curvature`).

    Returns
    -------
    store : DaskRowStore
    kept : RowBlocks
        The same blocks read from the persisted rows (encoded targets, validated weights).
    counts : ndarray
        ``[n, positives, weighted, weighted positives, all weights one]``.
    share : Share or None
        The sum of the blocks' shares of a Newton pass at ``beta0`` (with ``spec``).
    segments : list
        The digests' sorted segments (empty without ``digests`` or a key).
    """
    import dask
    from dask import delayed

    offsets = np.concatenate([[0], np.cumsum(blocks.X.chunks[0])]).astype(np.int64)
    n = int(offsets[-1])
    full = dask.persist(
        *[
            delayed(prepare)(x, y, w, problem, int(off), spec, beta0)
            for (x, y, w, _), off in zip(blocks.parts, offsets[:-1].tolist())
        ]
    )
    want = [delayed(_counts)(*full)]
    if spec is not None:
        want += [delayed(_shares)(*full), delayed(_largest)(*full)]
    segs = []
    if digests and problem.key is not None:
        segs = [
            delayed(_segment)(n, *[delayed(_piece)(o, g) for o in full])
            for g in range(2**SEGMENT_BITS)
        ]
    got = compute_on_cluster(*want, *segs, what="the pass that persists the rows")
    counts, share = got[0], (got[1] if spec is not None else None)
    if spec is not None:
        refuse_curvature(got[2], spec)  # before anything is kept
    segments = list(got[1 + 2 * (spec is not None) :])
    parts = dask.persist(*[delayed(_row_part)(o, i) for o in full for i in range(3)])
    del full
    triples = [tuple(parts[3 * j : 3 * j + 3]) for j in range(len(blocks.parts))]
    store = DaskRowStore.of_blocks(triples, np.diff(offsets), blocks.n_features)
    folds = [f for (_, _, _, f) in blocks.parts]
    kept = RowBlocks(
        blocks.X,
        [(x, t, w, f) for (x, t, w), f in zip(triples, folds)],
        None,
        blocks.w,
        blocks.fold,
    )
    return store, kept, np.asarray(counts), share, segments
