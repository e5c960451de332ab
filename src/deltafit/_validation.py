"""Input checks shared by the estimators: every failure is a ValueError naming the problem."""

from __future__ import annotations

import numbers

import numpy as np
import scipy.sparse as sp

__all__ = ["check_rows", "check_real", "check_int", "check_bool"]


def check_real(value, name, *, low=None, low_inclusive=False):
    if isinstance(value, bool) or not isinstance(value, numbers.Real) or not np.isfinite(value):
        raise ValueError(f"{name} must be a finite real number, got {value!r}")
    if low is not None and (value < low or (value == low and not low_inclusive)):
        op = ">=" if low_inclusive else ">"
        raise ValueError(f"{name} must be {op} {low}, got {value!r}")
    return float(value)


def check_int(value, name, *, low=1):
    if isinstance(value, bool) or not isinstance(value, numbers.Integral) or value < low:
        raise ValueError(f"{name} must be an integer >= {low}, got {value!r}")
    return int(value)


def check_bool(value, name):
    if not isinstance(value, (bool, np.bool_)):
        raise ValueError(f"{name} must be True or False, got {value!r}")
    return bool(value)


def check_rows(X, n_features, what="X", owner="the model"):
    """A 2-D finite float64 array with ``n_features`` columns and at least one row."""
    if sp.issparse(X):
        X = X.toarray()
    try:
        X = np.asarray(X, dtype=np.float64)
    except (TypeError, ValueError) as exc:
        raise ValueError(f"{what} must be numeric: {exc}") from exc
    if X.ndim == 1 and n_features is not None and X.size == n_features:
        X = X.reshape(1, -1)
    if X.ndim != 2:
        raise ValueError(f"{what} must be a 2-D array, got {X.ndim} dimension(s)")
    if X.shape[0] == 0:
        raise ValueError(f"{what} is empty (0 samples)")
    if n_features is not None and X.shape[1] != n_features:
        raise ValueError(
            f"{what} has {X.shape[1]} features, but {owner} is expecting {n_features} features "
            "as input"
        )
    # the sum is finite iff every entry is (barring overflow, which the full check settles)
    if not np.isfinite(X.sum()) and not np.all(np.isfinite(X)):
        raise ValueError(f"{what} contains NaN or infinity")
    return np.ascontiguousarray(X)
