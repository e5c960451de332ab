"""Decision bounds for query rows held in a dask array: lazy, one task per row block.

The region of a pending change (:mod:`._data_change`) is p-sized or p × p (a ball, the exact
squared-loss model, a curvature ellipsoid); the query rows may be any number.  For a dask X
the bounds are a ``map_blocks`` of the region's own ``decision_bounds`` over the row blocks:
each block gives the same numbers as the NumPy call on its rows, and nothing is computed until
the caller asks.  The region travels with each task (threaded and synchronous schedulers, or
a cluster to which it pickles).  Dask is imported only when such rows arrive.
"""

from __future__ import annotations

import numpy as np

__all__ = ["is_dask", "lazy_decision_bounds"]


def is_dask(obj):
    """Whether ``obj`` is a dask collection, read from its type's module (dask not imported)."""
    mod = type(obj).__module__ or ""
    return mod == "dask" or mod.startswith("dask.")


def _both(x, bounds, check):
    lo, hi = bounds(check(np.asarray(x)))
    return np.column_stack([lo, hi])


def lazy_decision_bounds(bounds, X, check):
    """``(lo, hi)``: two lazy dask arrays of shape (n,), ``bounds(check(block))`` per row
    block of the dask array or DataFrame ``X``.

    Raises
    ------
    ValueError
        For a collection that is not 2-D.
    """
    if hasattr(X, "to_dask_array"):
        X = X.to_dask_array(lengths=True)
    if X.ndim != 2:
        raise ValueError(f"X must be 2-D, got {X.ndim} dimensions")
    X = X.rechunk({1: -1})
    both = X.map_blocks(_both, bounds, check, dtype=np.float64, chunks=(X.chunks[0], (2,)))
    return both[:, 0], both[:, 1]
