"""A distributed row store: the training rows of a Dask-fitted ``keep_data=True`` model stay
persisted on the cluster, block by block, and the client keeps only what locates them.

Each block holds the validated rows ``x`` (float64), the encoded targets ``t`` and the weights
``w`` (None: all 1) of a contiguous range of sample ids, persisted by ``dask.persist`` (futures
on a distributed cluster, in-memory arrays on the local schedulers).  The client keeps, per
block, its first id (ids → (block, offset) by one ``searchsorted``: ranges, not an n-sized
index), a live mask (one byte a row) and the few targets and weights that updates changed
(patches, applied by the block tasks).  Removal masks rows; addition appends a block (the ids
an addition receives are consecutive); relabel and reweight patch.  The store is never changed
in place: every update returns a new one that shares the untouched blocks and masks, so that
an update that fails leaves the model's store as it was.
"""

from __future__ import annotations

import numpy as np

__all__ = ["DaskRowStore", "BlockMods", "compute_on_cluster", "tree_compute"]

#: Fan-in of the tree sums of blocks' shares: ``⌈log₈ b⌉`` levels over b blocks, no task
#: holding more than 8 shares.
FAN_IN = 8

#: The errors by which a distributed cluster reports a computation it could not finish after
#: losing workers (dask.distributed's ``KilledWorker`` once a task killed ``allowed-failures``
#: workers, cancelled futures of keys whose data and recipe were both lost), by class name:
#: deltafit does not import distributed.
_LOST = frozenset(
    {
        "KilledWorker",
        "FutureCancelledError",
        "FuturesCancelledError",
        "CancelledError",
        "CommClosedError",
    }
)


def compute_on_cluster(*collections, what="a pass over the rows"):
    """``dask.compute(*collections)``, with a lost worker that Dask could not recover from
    reported as a ValueError that names it (the caller's transaction then leaves the model
    as it was).  Dask first reruns the lost tasks elsewhere and recomputes lost persisted
    blocks from their graph (the row store keeps that lineage); only what it gives up on is
    raised here."""
    import dask

    try:
        return dask.compute(*collections)
    except Exception as exc:
        if type(exc).__name__ not in _LOST:
            raise
        raise ValueError(
            f"a Dask worker was lost during {what} and Dask could not recompute its part "
            f"({type(exc).__name__}: {exc}); the model is unchanged — retry once the "
            "cluster is whole, or refit"
        ) from exc


def _add(*shares):
    """The sum of shares (their ``+``)."""
    out = shares[0]
    for s in shares[1:]:
        out = out + s
    return out


def tree_compute(shares, merge=None, what="a pass over the rows"):
    """Sum delayed per-block ``shares`` in a tree of fan-in :data:`FAN_IN` on the cluster
    (``merge(*children)``, default their ``+``) and compute the root through
    :func:`compute_on_cluster`: one pass, one p-sized (or p × p) result on the client."""
    from dask import delayed

    merge = _add if merge is None else merge
    level = list(shares)
    while len(level) > 1:
        level = [delayed(merge)(*level[i : i + FAN_IN]) for i in range(0, len(level), FAN_IN)]
    (out,) = compute_on_cluster(level[0], what=what)
    return out


class BlockMods:
    """What a block task applies to its persisted rows (picklable, small): the live mask
    (None: every row live) and the patched targets and weights (offsets and values)."""

    __slots__ = ("live", "t_at", "t_val", "w_at", "w_val")

    def __init__(self, live=None, t_at=None, t_val=None, w_at=None, w_val=None):
        self.live, self.t_at, self.t_val, self.w_at, self.w_val = live, t_at, t_val, w_at, w_val

    def __getstate__(self):
        """Pickled (sent to a worker process with every task of a pass) with the live mask
        as bits: an eighth of its bytes (a byte a row before, 5 MB a pass at 5M rows)."""
        live = self.live
        bits = None if live is None else (np.packbits(live), int(live.size))
        return bits, self.t_at, self.t_val, self.w_at, self.w_val

    def __setstate__(self, state):
        bits, self.t_at, self.t_val, self.w_at, self.w_val = state
        self.live = None if bits is None else np.unpackbits(bits[0], count=bits[1]).view(bool)

    def targets(self, t):
        """The block's current targets."""
        if self.t_at is None:
            return t
        t = np.array(t, dtype=np.float64, copy=True)
        t[self.t_at] = self.t_val
        return t

    def rows(self, x, t, w, C):
        """A block task's rows: ``x`` as float64, the current targets and ``C w`` (0 at the
        removed rows)."""
        x = np.asarray(x, dtype=np.float64)
        k = x.shape[0]
        wv = self.weights(w, k)
        return (
            x,
            self.targets(np.asarray(t, dtype=np.float64)),
            np.full(k, float(C)) if wv is None else C * wv,
        )

    def weights(self, w, k):
        """The block's current weights, 0 at removed rows (None: every row live, weight 1)."""
        if w is None and self.w_at is None and self.live is None:
            return None
        out = np.ones(k) if w is None else np.array(w, dtype=np.float64, copy=True)
        if self.w_at is not None:
            out[self.w_at] = self.w_val
        if self.live is not None:
            out[~self.live] = 0.0
        return out


def _take(x, t, w, at):
    """Rows ``at`` of a persisted block, their targets and weights (one Dask task)."""
    return (
        np.asarray(x)[at],
        np.asarray(t)[at],
        None if w is None else np.asarray(w, dtype=np.float64)[at],
    )


class DaskRowStore:
    """The persisted blocks of a Dask-backed model's rows (see the module docstring).

    Parameters
    ----------
    blocks : list of tuple
        ``(x, t, w)`` per block: dask delayed objects of persisted arrays (``w`` may be None).
    starts : ndarray of int64 of shape (n_blocks + 1,)
        The id of each block's first row, and one past the last id.
    live : list of (ndarray of bool or None)
        Per block, which rows are training samples (None: all of them).
    patches : dict
        ``{block: ({offset: t}, {offset: w})}``: targets and weights that updates changed.
    n_features : int
        Columns of the raw rows.
    """

    def __init__(self, blocks, starts, live, patches, n_features):
        self.blocks, self.starts = list(blocks), np.asarray(starts, dtype=np.int64)
        self.live, self.patches, self.n_features = list(live), dict(patches), int(n_features)

    @classmethod
    def of_blocks(cls, blocks, sizes, n_features):
        starts = np.concatenate([[0], np.cumsum(np.asarray(sizes, dtype=np.int64))])
        return cls(blocks, starts, [None] * len(blocks), {}, n_features)

    @property
    def n_blocks(self):
        return len(self.blocks)

    def sizes(self):
        return np.diff(self.starts)

    def nbytes(self):
        """Client-side bytes: the block starts, the live masks and the patches."""
        masks = sum(m.nbytes for m in self.live if m is not None)
        return int(
            self.starts.nbytes + masks + 48 * sum(len(a) + len(b) for a, b in self.patches.values())
        )

    # ------------------------------------------------------------------ queries
    def locate(self, ids):
        """``(block, offset)`` arrays of the samples ``ids`` (ValueError for an id outside the
        store or of a removed row)."""
        ids = np.asarray(ids, dtype=np.int64).reshape(-1)
        b = np.searchsorted(self.starts, ids, side="right") - 1
        bad = (ids < 0) | (ids >= self.starts[-1])
        if np.any(bad):
            raise ValueError(f"unknown sample ids (not in the row store): {ids[bad][:10].tolist()}")
        off = ids - self.starts[b]
        for blk in np.unique(b).tolist():
            m = self.live[blk]
            if m is not None and not np.all(m[off[b == blk]]):
                raise ValueError("a removed sample was asked for from the row store")
        return b.astype(np.intp), off.astype(np.intp)

    def mods(self, blk):
        """The :class:`BlockMods` of block ``blk``."""
        m = self.live[blk]
        p = self.patches.get(blk)
        if p is None:
            return BlockMods(m)
        tp, wp = p
        ta = np.fromiter(tp.keys(), np.intp, len(tp)) if tp else None
        tv = np.array(list(tp.values()), dtype=np.float64) if tp else None
        wa = np.fromiter(wp.keys(), np.intp, len(wp)) if wp else None
        wv = np.array(list(wp.values()), dtype=np.float64) if wp else None
        return BlockMods(m, ta, tv, wa, wv)

    def gather(self, ids):
        """The raw rows, current targets and weights of the samples ``ids`` (a few): one
        small task per block they lie in, computed together."""
        import dask

        ids = np.asarray(ids, dtype=np.int64).reshape(-1)
        b, off = self.locate(ids)
        order = np.argsort(b, kind="stable")  # the ids grouped by block
        touched, first = np.unique(b[order], return_index=True)
        groups = np.split(order, first[1:])
        tasks = [
            dask.delayed(_take)(*self.blocks[blk], off[j])
            for blk, j in zip(touched.tolist(), groups)
        ]
        got = compute_on_cluster(tasks, what="a gather of stored rows")[0]
        X = np.empty((ids.size, self.n_features))
        T, W = None, np.ones(X.shape[0])
        for blk, j, (xr, tr, wr) in zip(touched.tolist(), groups, got):
            X[j] = xr
            tr = np.asarray(tr, dtype=np.float64)
            if T is None:
                T = np.empty((X.shape[0],) + tr.shape[1:])
            T[j] = tr
            if wr is not None:
                W[j] = wr
            p = self.patches.get(blk)
            if p is not None:
                for jj, o in zip(j.tolist(), off[j].tolist()):
                    if o in p[0]:
                        T[jj] = p[0][o]
                    if o in p[1]:
                        W[jj] = p[1][o]
        return X, T, W

    # ------------------------------------------------------------------ changes
    def changed(
        self,
        remove_ids=None,
        relabel_ids=None,
        relabel_t=None,
        reweight_ids=None,
        reweight_w=None,
        add=None,
    ):
        """A new store after a change (this one is left as it is).

        ``add`` is ``(first_id, x, t, w)``: rows (NumPy) given ids ``first_id, first_id+1,
        …``, appended as one persisted block.
        """
        new = DaskRowStore(self.blocks, self.starts, self.live, self.patches, self.n_features)
        if remove_ids is not None and len(remove_ids):
            b, off = self.locate(remove_ids)
            for blk in np.unique(b).tolist():
                m = new.live[blk]
                m = np.ones(int(self.sizes()[blk]), dtype=bool) if m is None else m.copy()
                m[off[b == blk]] = False
                new.live[blk] = m
        for ids, vals, k in ((relabel_ids, relabel_t, 0), (reweight_ids, reweight_w, 1)):
            if ids is None or not len(ids):
                continue
            b, off = self.locate(ids)
            vals = np.asarray(vals, dtype=np.float64)
            for blk in np.unique(b).tolist():
                tp, wp = new.patches.get(blk, ({}, {}))
                tp, wp = dict(tp), dict(wp)
                d = (tp, wp)[k]
                for j in np.flatnonzero(b == blk).tolist():
                    d[int(off[j])] = (
                        np.array(vals[j], copy=True) if vals.ndim > 1 else float(vals[j])
                    )
                new.patches[blk] = (tp, wp)
        if add is not None:
            import dask

            first, x, t, w = add
            if first != int(new.starts[-1]):
                raise ValueError(
                    f"added ids start at {first}, the store ends at {int(new.starts[-1])}"
                )
            x = np.ascontiguousarray(x, dtype=np.float64)
            parts = dask.persist(
                dask.delayed(x),
                dask.delayed(np.asarray(t, dtype=np.float64)),
                None if w is None else dask.delayed(np.asarray(w, float)),
            )
            new.blocks.append(tuple(parts))
            new.starts = np.append(new.starts, new.starts[-1] + x.shape[0])
            new.live.append(None)
        return new
