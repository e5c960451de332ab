"""Dask collections as input: recognise them, split them into aligned row blocks, gather the
small ones an update brings, and map decisions over the blocks lazily.

Nothing here imports dask at module level: :func:`is_dask` reads the type's module name, so
``import deltafit`` never loads dask, and the functions that build graphs import it when they
are first called with a dask collection.
"""

from __future__ import annotations

import numpy as np

__all__ = [
    "is_dask",
    "any_dask",
    "gathered",
    "RowBlocks",
    "row_blocks",
    "map_decision",
    "map_labels",
]


def is_dask(obj):
    """Whether ``obj`` is a dask collection (array, DataFrame, Series), without importing dask."""
    mod = type(obj).__module__ or ""
    return mod == "dask" or mod.startswith("dask.")


def any_dask(*objs):
    """Whether any of ``objs`` is a dask collection."""
    return any(is_dask(o) for o in objs)


def gathered(obj):
    """``obj`` computed to NumPy / pandas when it is a dask collection, else ``obj`` itself.

    The rows, labels, ids or weights of an *update* are the size of the change: an update
    gathers them and goes through the NumPy path (the model's state is p × p)."""
    return obj.compute() if is_dask(obj) else obj


def _as_array(obj, what):
    """A dask array from a dask array, DataFrame or Series (columns as they are)."""
    import dask.array as da

    if isinstance(obj, da.Array):
        return obj
    if hasattr(obj, "to_dask_array"):  # dask DataFrame / Series: partition lengths computed
        # from the array's own blocks: ``to_dask_array(lengths=True)`` counts the partitions of
        # the frame before its graph is optimised, and a Parquet read whose small files are
        # merged then has fewer blocks than lengths ("2 != 4")
        return obj.to_dask_array().compute_chunk_sizes()
    raise ValueError(
        f"{what}: unsupported dask collection {type(obj).__name__}; give a "
        "dask array, DataFrame or Series"
    )


class RowBlocks:
    """Aligned row blocks of X (and of y, the sample weights and the cross-validation folds):
    ``X`` as a dask array chunked along rows only, ``parts`` the (x, y, w, fold) delayed blocks
    in row order, ``n`` the rows.

    Parameters
    ----------
    X : dask array of shape (n, d)
    parts : list of tuple
        ``(x_block, y_block, w_block, fold_block)`` per block, dask delayed objects (y, w,
        fold: None when absent).
    y, w, fold : dask array or None
        The labels, weights and fold numbers, aligned to the rows of X.
    """

    def __init__(self, X, parts, y=None, w=None, fold=None):
        self.X, self.parts, self.y, self.w, self.fold = X, parts, y, w, fold

    @property
    def n(self):
        return int(self.X.shape[0])

    @property
    def n_features(self):
        return int(self.X.shape[1])


def _aligned(v, chunks, n, what):
    """``v`` (dask or NumPy, 1-D or 2-D) as a dask array with the row ``chunks`` of X."""
    import dask.array as da

    if v is None:
        return None
    if is_dask(v):
        v = _as_array(v, what)
    else:
        v = np.asarray(v)
        if v.ndim == 0:  # a scalar weight
            v = np.full(n, v.item())
        if v.ndim in (1, 2) and v.shape[0] != n:
            raise ValueError(f"{what} has {v.shape[0]} rows, X has {n}")
        v = da.from_array(v, chunks=(chunks,) + v.shape[1:])
    if v.ndim not in (1, 2):
        raise ValueError(f"{what} must be 1-D or 2-D, got {v.ndim} dimensions")
    if v.shape[0] != n or np.isnan(v.shape[0]):
        raise ValueError(f"{what} has {v.shape[0]} rows, X has {n}")
    if any(np.isnan(c) for c in v.chunks[0]):
        v = v.compute_chunk_sizes()
    v = v.rechunk({0: chunks} if v.ndim == 1 else {0: chunks, 1: -1})
    return v


def row_blocks(X, y=None, w=None, fold=None):
    """``RowBlocks`` of ``X`` (a dask array or DataFrame; ``y``, ``w`` and ``fold`` dask or
    NumPy), validated: X 2-D with known chunk sizes, columns in one chunk, y, w and fold
    aligned to its rows.

    Raises
    ------
    ValueError
        On a collection of the wrong dimension or length.
    """
    X = _as_array(X, "X") if is_dask(X) else None
    if X is None:
        raise ValueError(
            f"y or sample_weight is a dask collection but X is a "
            f"{type(X).__name__}: give X as a dask array or DataFrame too, or "
            "compute y and the weights"
        )
    if X.ndim != 2:
        raise ValueError(
            f"X must be 2-D, got {X.ndim} dimensions (reshape a single feature "
            "with X.reshape(-1, 1))"
        )
    if any(np.isnan(c) for c in X.chunks[0]):
        X = X.compute_chunk_sizes()
    if X.shape[0] < 1 or X.shape[1] < 1:
        raise ValueError(f"X has shape {X.shape}: at least one sample and one feature needed")
    X = X.rechunk({1: -1})
    n, chunks = int(X.shape[0]), X.chunks[0]
    yy = _aligned(y, chunks, n, "y")
    ww = _aligned(w, chunks, n, "sample_weight")
    ff = _aligned(fold, chunks, n, "fold")
    xs = X.to_delayed().ravel().tolist()
    ys = yy.to_delayed().ravel().tolist() if yy is not None else [None] * len(xs)
    ws = ww.to_delayed().ravel().tolist() if ww is not None else [None] * len(xs)
    fs = ff.to_delayed().ravel().tolist() if ff is not None else [None] * len(xs)
    return RowBlocks(X, list(zip(xs, ys, ws, fs)), yy, ww, ff)


def _block_decision(x, score):
    return score(np.asarray(x, dtype=np.float64))


def map_decision(X, score, n_outputs, n_features):
    """``score`` (a picklable function of a NumPy block of rows) over the row blocks of the
    dask X, lazily: a dask array of shape (n,) (``n_outputs`` 0) or (n, n_outputs)."""
    X = _as_array(X, "X")
    if X.ndim != 2:
        raise ValueError(f"X must be 2-D, got {X.ndim} dimensions")
    if X.shape[1] != n_features:
        raise ValueError(
            f"X has {X.shape[1]} features, but the model is expecting "
            f"{n_features} features as input"
        )
    X = X.rechunk({1: -1})
    if n_outputs:
        return X.map_blocks(
            _block_decision, score, dtype=np.float64, chunks=(X.chunks[0], (int(n_outputs),))
        )
    return X.map_blocks(_block_decision, score, dtype=np.float64, drop_axis=1)


def map_labels(z, decode, dtype):
    """Labels ``decode(z_block)`` of the lazy decisions ``z`` (1-D or (n, K)): a 1-D dask
    array."""
    if z.ndim == 1:
        return z.map_blocks(decode, dtype=dtype)
    return z.map_blocks(decode, dtype=dtype, drop_axis=1)
