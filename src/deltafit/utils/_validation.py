"""Input checks shared by the estimators: every failure is a ValueError naming the problem."""

from __future__ import annotations

import numbers
from typing import Any, Literal

import numpy as np
import scipy.sparse as sp
from numpy.typing import ArrayLike

__all__ = [
    "check_feature_names",
    "feature_names_of",
    "check_rows",
    "check_real",
    "check_int",
    "check_bool",
    "check_ids",
    "check_dense",
    "check_magnitude",
    "check_scale",
    "check_sparse_rows",
    "MAX_SQUARED_NORM",
    "SparseDataError",
]

#: The largest weighted squared norm a training sample may have.  Every sample must satisfy
#: ``max(1, C)·‖Φ(x)‖² ≤ MAX_SQUARED_NORM`` (``Φ(x)``: the features after the feature map, the
#: intercept column included; kernel models: ``max(1, C)·k(x, x)`` and ``max(1, C)·|k(x, x')|``,
#: the intercept term included), and a regression target ``max(1, C)·y² ≤ MAX_SQUARED_NORM``.
#: With it the Gram entries are at most ``n·1e100``, the products an exact update forms (the
#: Woodbury cores ``vᵀ(ΦᵀΦ + ρI)⁻¹v ≤ 2C‖v‖²``, the Hessians ``I + C ΦᵀDΦ``, the scores
#: ``|⟨Φ(x), β⟩| ≤ ‖Φ(x)‖·sqrt(2 J(0))``) at most about ``n·1e200``: far inside the float64
#: range (≈ 1.8e308).  Larger values overflow, and are refused rather than fitted.
MAX_SQUARED_NORM = 1e100


class SparseDataError(TypeError, ValueError):
    """Sparse input where dense data is required.

    A TypeError, like scikit-learn's refusal of sparse input in ``fit`` (same message), and a
    ValueError, like every other refusal of bad input in deltafit.
    """


def check_dense(A: Any, what: str = "X") -> None:
    """Refuse sparse matrices and complex values in ``A`` (an array-like of rows or labels).

    Raises
    ------
    SparseDataError
        For a scipy.sparse matrix or array (the TypeError scikit-learn's ``fit`` raises).
    ValueError
        For complex values, even with a zero imaginary part (``fit`` refuses them too).
    """
    kind = "sparse" if sp.issparse(A) else getattr(getattr(A, "dtype", None), "kind", None)
    if kind is None or kind == "O":
        try:
            kind = np.asarray(A).dtype.kind
        except (TypeError, ValueError):
            return  # not an array: the caller's conversion names the problem
        if kind == "O":  # a sparse matrix or complex numbers wrapped in an object array
            values = np.asarray(A).ravel()
            if any(sp.issparse(v) for v in values):
                kind = "sparse"
            elif any(isinstance(v, (complex, np.complexfloating)) for v in values):
                kind = "c"
    if kind == "sparse":
        raise SparseDataError(
            f"Sparse data was passed for {what}, but dense data is required. Use '.toarray()' "
            "to convert to a dense numpy array."
        )
    if kind == "c":
        raise ValueError(
            f"Complex data not supported: {what} has complex values (the imaginary part would "
            "be dropped)"
        )


def _names_carrier(X: Any) -> Any:
    """What scikit-learn reads the column names of ``X`` from: ``X`` itself, or for a dask
    DataFrame an empty pandas frame with its columns (dask is recognised by its type's module,
    so that dask is never imported here)."""
    mod = type(X).__module__ or ""
    if (
        (mod == "dask" or mod.startswith("dask."))
        and hasattr(X, "columns")
        and getattr(X, "ndim", 2) == 2
    ):
        import pandas as pd

        return pd.DataFrame(columns=X.columns)
    return X


def feature_names_of(X: Any) -> np.ndarray | None:
    """The column names of ``X`` as ``fit`` records them (``feature_names_in_``): an object
    array of strings for a DataFrame (pandas, polars, ..., or a dask DataFrame) whose columns
    are all strings, else None (scikit-learn's ``_get_feature_names``)."""
    from sklearn.utils.validation import _get_feature_names

    return _get_feature_names(_names_carrier(X))


def check_feature_names(estimator: Any, X: Any) -> None:
    """Check the column names of ``X`` against those ``estimator`` was fitted on, exactly as
    its ``predict`` does (scikit-learn's ``validate_data(reset=False)``): a ValueError when
    they differ (other names, or the same names in another order), a UserWarning when only
    one side has names.  A dask DataFrame is checked by its columns.

    Every entry that takes rows of a fitted model (an update as well as a prediction) calls
    this before anything else, so that a frame with permuted columns is refused, never
    silently trained on.

    Raises
    ------
    ValueError
        scikit-learn's message: "The feature names should match those that were passed
        during fit." with the unseen / missing names, or the order.
    """
    from sklearn.utils.validation import _check_feature_names

    _check_feature_names(estimator, _names_carrier(X), reset=False)


def check_magnitude(sq: ArrayLike, C: float, what: str, remedy: str = "rescale the data") -> None:
    """Refuse samples beyond :data:`MAX_SQUARED_NORM`.

    Parameters
    ----------
    sq : array-like of float
        Non-negative squared magnitudes (squared feature norms, kernel values, squared
        targets); NaN or inf (an overflow while computing them) is refused too.
    C : float
        The data-term weight of the problem they enter; they are checked as ``max(1, C)·sq``.
    what : str
        What they are, for the message (e.g. ``"X: the squared feature norm ‖Φ(x)‖²"``).
    remedy : str
        What to do instead, for the message.

    Raises
    ------
    ValueError
        Naming the largest value and the limit.
    """
    sq = np.asarray(sq, dtype=np.float64)
    if sq.size == 0:
        return
    top = float(np.max(sq))
    w = max(1.0, float(C))
    if not np.isfinite(top) or w * top > MAX_SQUARED_NORM:
        shown = "overflows (not finite)" if not np.isfinite(top) else f"is {top:.3g}"
        raise ValueError(
            f"{what} {shown}, above the limit max(1, C)·value <= {MAX_SQUARED_NORM:.0e} "
            f"(C={C:.3g}) beyond which an exact update overflows; {remedy}"
        )


def check_scale(Phi: Any, C: float) -> None:
    """Refuse feature rows ``Phi`` (dense or sparse, the intercept column included) with a
    squared norm ``‖Φ(x)‖²`` beyond :data:`MAX_SQUARED_NORM` (see :func:`check_magnitude`);
    the norms are computed only when ``p·max|Φ|²`` could pass the cap."""
    if sp.issparse(Phi):
        if Phi.nnz == 0:
            return
        top = max(float(np.max(Phi.data)), -float(np.min(Phi.data)))
    elif Phi.size == 0:
        return
    else:
        top = max(float(np.max(Phi)), -float(np.min(Phi)))  # NaN stays NaN: refused
    if not top * top * Phi.shape[1] * max(1.0, C) <= MAX_SQUARED_NORM:
        with np.errstate(over="ignore", invalid="ignore"):
            sq = (
                np.asarray(Phi.multiply(Phi).sum(axis=1)).ravel()
                if sp.issparse(Phi)
                else np.einsum("ij,ij->i", Phi, Phi)
            )
        check_magnitude(
            sq, C, "X: the squared feature norm ‖Φ(x)‖² (intercept column included)", "rescale X"
        )


def check_real(
    value: Any, name: str, *, low: float | None = None, low_inclusive: bool = False
) -> float:
    if isinstance(value, bool) or not isinstance(value, numbers.Real) or not np.isfinite(value):  # type: ignore[call-overload]  # any Real, as numpy takes it
        raise ValueError(f"{name} must be a finite real number, got {value!r}")
    if low is not None and (value < low or (value == low and not low_inclusive)):
        op = ">=" if low_inclusive else ">"
        raise ValueError(f"{name} must be {op} {low}, got {value!r}")
    return float(value)


def check_int(value: Any, name: str, *, low: int = 1) -> int:
    if isinstance(value, bool) or not isinstance(value, numbers.Integral) or value < low:
        raise ValueError(f"{name} must be an integer >= {low}, got {value!r}")
    return int(value)


def check_bool(value: Any, name: str) -> bool:
    if not isinstance(value, (bool, np.bool_)):
        raise ValueError(f"{name} must be True or False, got {value!r}")
    return bool(value)


def check_sparse_rows(
    X: Any, n_features: int | None, what: str = "X", owner: str = "the model"
) -> Any:
    """A scipy.sparse matrix or array as a float64 ``csr_matrix`` with ``n_features`` columns
    and at least one row, its stored values finite and real.

    Raises
    ------
    ValueError
        For complex or non-numeric values, NaN or infinity, a wrong width or no row.
    """
    kind = X.dtype.kind
    if kind == "c":
        raise ValueError(
            f"Complex data not supported: {what} has complex values (the "
            "imaginary part would be dropped)"
        )
    if kind not in "biuf":
        raise ValueError(f"{what} must be numeric, got a sparse matrix of dtype {X.dtype}")
    if len(X.shape) != 2:
        raise ValueError(f"{what} must be a 2-D array, got {len(X.shape)} dimension(s)")
    X = sp.csr_matrix(X, dtype=np.float64)
    if X.shape[0] == 0:
        raise ValueError(f"{what} is empty (0 samples)")
    if n_features is not None and X.shape[1] != n_features:
        raise ValueError(
            f"{what} has {X.shape[1]} features, but {owner} is expecting {n_features} features "
            "as input."
        )
    if not np.all(np.isfinite(X.data)):
        raise ValueError(f"{what} contains NaN or infinity")
    return X


def check_rows(
    X: Any,
    n_features: int | None,
    what: str = "X",
    owner: str = "the model",
    finite: bool = True,
    sparse: bool | Literal["dense"] = False,
) -> Any:
    """A 2-D finite float64 array with ``n_features`` columns and at least one row.

    Sparse matrices are refused with scikit-learn's TypeError (:class:`SparseDataError`, also
    a ValueError) and complex values with a ValueError, as the estimators' ``fit`` does;
    with ``sparse=True`` a sparse matrix or array is accepted and returned as a float64
    ``csr_matrix`` (:func:`check_sparse_rows`), with ``sparse="dense"`` accepted and returned
    densified (the few query rows of a bound).  ``finite=False`` leaves the NaN/inf check to
    a caller whose next computation reveals non-finite input anyway (and which then calls
    again with ``finite=True`` for the message).
    """
    if sparse and sp.issparse(X):
        X = check_sparse_rows(X, n_features, what, owner)
        return X.toarray() if sparse == "dense" else X
    check_dense(X, what)
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
            "as input."
        )
    # the sum is finite iff every entry is (barring overflow, which the full check settles)
    if finite and not np.isfinite(X.sum()) and not np.all(np.isfinite(X)):
        raise ValueError(f"{what} contains NaN or infinity")
    return np.ascontiguousarray(X)


def check_ids(ids: ArrayLike, what: str = "ids") -> np.ndarray:
    """A non-empty 1-D int64 array of distinct sample ids (integral floats are accepted)."""
    ids = np.asarray(ids)
    if ids.ndim == 0:
        ids = ids.reshape(1)
    if ids.ndim != 1:
        raise ValueError(f"{what} must be a 1-D array of integers, got shape {ids.shape}")
    if ids.size == 0:
        raise ValueError(f"{what} is empty")
    if ids.dtype.kind not in "iu":
        if ids.dtype.kind == "f" and np.all(np.isfinite(ids)) and np.all(ids == np.round(ids)):
            ids = ids.astype(np.int64)
        else:
            raise ValueError(f"{what} must be integers, got dtype {ids.dtype}")
    ids = ids.astype(np.int64, copy=False)
    if ids.size > 1 and not (np.diff(ids) > 0).all() and len(set(ids.tolist())) != ids.size:
        uniq, counts = np.unique(ids, return_counts=True)
        raise ValueError(f"repeated {what}: {uniq[counts > 1][:10].tolist()}")
    return ids
