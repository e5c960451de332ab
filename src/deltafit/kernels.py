"""Kernel functions and explicit feature maps.

Kernels are evaluated by :func:`sklearn.metrics.pairwise.pairwise_kernels`; explicit feature
maps for linear models (Nyström, random Fourier features, …) are scikit-learn transformers from
:mod:`sklearn.kernel_approximation`.  This module only adapts them to the canonical problem of
ARCHITECTURE.md, "The problem": the intercept is a regularised constant feature of value
``intercept_scaling``, which for a kernel means adding ``intercept_scaling²`` to every kernel
value.
"""

from __future__ import annotations

import copy
from collections.abc import Callable, Mapping
from typing import Any, TypeAlias

import numpy as np
import scipy.sparse as sp
from numpy.typing import ArrayLike
from sklearn import config_context
from sklearn.base import clone
from sklearn.exceptions import NotFittedError
from sklearn.metrics.pairwise import PAIRWISE_KERNEL_FUNCTIONS, pairwise_kernels
from sklearn.utils.validation import check_is_fitted

__all__ = ["KERNELS", "kernel_matrix", "kernel_rows", "kernel_diagonal", "resolve_feature_map"]

#: A kernel: a name understood by :func:`sklearn.metrics.pairwise.pairwise_kernels`, or a
#: callable ``kernel(X, Y)`` returning the (n, m) kernel matrix.
KernelSpec: TypeAlias = str | Callable[..., ArrayLike]

#: Rows a kernel is evaluated on: a dense array or a scipy sparse matrix.
Rows: TypeAlias = np.ndarray | sp.spmatrix

_GAMMA_KERNELS = ("rbf", "laplacian", "poly", "sigmoid", "chi2")

KERNELS = ("linear", "rbf", "poly", "sigmoid", "laplacian", "cosine")


def _kernel_params(
    kernel: KernelSpec,
    gamma: float | str | None,
    degree: float,
    coef0: float,
    kernel_params: Mapping[str, Any] | None,
) -> dict[str, Any]:
    params = dict(kernel_params or {})
    if callable(kernel):
        return params
    if kernel in _GAMMA_KERNELS:
        params.setdefault("gamma", gamma)
    if kernel == "poly":
        params.setdefault("degree", degree)
    if kernel in ("poly", "sigmoid"):
        params.setdefault("coef0", coef0)
    return params


def validate_kernel(kernel: Any) -> KernelSpec:
    """Check that ``kernel`` is a known name or a callable; ValueError otherwise."""
    if callable(kernel):
        return kernel
    if (
        not isinstance(kernel, str)
        or kernel not in PAIRWISE_KERNEL_FUNCTIONS
        or kernel
        in (
            "precomputed",
            "additive_chi2",
            "chi2",
        )
    ):
        raise ValueError(
            f"unknown kernel {kernel!r}; expected a callable k(X, Y) -> array or one of "
            f"{list(KERNELS)}"
        )
    return kernel


def kernel_matrix(
    X: Rows,
    Y: Rows,
    *,
    kernel: KernelSpec = "rbf",
    gamma: float | str | None = None,
    degree: float = 3,
    coef0: float = 1.0,
    kernel_params: Mapping[str, Any] | None = None,
    intercept_scaling: float = 0.0,
) -> np.ndarray:
    """Kernel matrix k(X, Y) plus ``intercept_scaling²`` (the regularised intercept feature).

    Parameters
    ----------
    X, Y : ndarray of shape (n, d) and (m, d)
    kernel : str or callable
        A name understood by :func:`sklearn.metrics.pairwise.pairwise_kernels`, or a callable
        ``kernel(X, Y)`` returning the (n, m) kernel matrix (the convention of
        :class:`sklearn.svm.SVC`).
    gamma, degree, coef0, kernel_params
        Kernel parameters, passed through to scikit-learn. ``gamma=None`` means
        ``1 / n_features`` as in scikit-learn.
    intercept_scaling : float
        Value ``s`` of the constant feature; ``s²`` is added to every entry (0 for no intercept).

    Returns
    -------
    K : ndarray of shape (n, m), float64

    Examples
    --------
    >>> import numpy as np
    >>> from deltafit.kernels import kernel_matrix
    >>> X = np.array([[0.0, 0.0], [1.0, 0.0]])
    >>> kernel_matrix(X, X, kernel="rbf", gamma=1.0)
    array([[1.        , 0.36787944],
           [0.36787944, 1.        ]])
    >>> kernel_matrix(X, X, kernel="linear", intercept_scaling=1.0)   # + s² for the intercept
    array([[1., 1.],
           [1., 2.]])
    """
    if callable(kernel):
        K = np.asarray(kernel(X, Y), dtype=np.float64)
        if K.shape != (X.shape[0], Y.shape[0]):
            raise ValueError(
                f"the kernel callable returned shape {K.shape}, expected {(X.shape[0], Y.shape[0])}"
            )
    else:
        # inputs are validated (finite float64) by the estimators; skip scikit-learn's re-checks,
        # which dominate the cost of the one-row kernel evaluations of single-sample updates
        # overflow shows as inf in K, refused below with a ValueError rather than a warning
        with (
            config_context(assume_finite=True, skip_parameter_validation=True),
            np.errstate(over="ignore", invalid="ignore"),
        ):
            K = pairwise_kernels(
                X,
                Y,
                metric=kernel,
                filter_params=True,
                **_kernel_params(kernel, gamma, degree, coef0, kernel_params),
            )
        K = np.asarray(K, dtype=np.float64)
    return _finished(K, intercept_scaling)


def _finished(K: np.ndarray, intercept_scaling: float) -> np.ndarray:
    """``K`` with the intercept term ``s²`` added; ValueError if it holds NaN or inf."""
    if not np.all(np.isfinite(K)):
        raise ValueError(
            "the kernel produced NaN or inf values: the rows' values overflow, "
            "or check the kernel parameters"
        )
    if intercept_scaling:
        K += intercept_scaling * intercept_scaling
    return K


_FEW = 4096  # below this many kernel values, scikit-learn's dispatch dominates the cost


def kernel_rows(
    X: Rows,
    Y: Rows,
    *,
    kernel: KernelSpec = "rbf",
    gamma: float | str | None = None,
    degree: float = 3,
    coef0: float = 1.0,
    kernel_params: Mapping[str, Any] | None = None,
    intercept_scaling: float = 0.0,
) -> np.ndarray:
    """:func:`kernel_matrix` for a few rows: the same values, without scikit-learn's dispatch.

    The per-sample loops of the stream and active learners (:mod:`deltafit.stream`,
    :mod:`deltafit.active`) evaluate one or a few rows at a time, where
    :func:`sklearn.metrics.pairwise.pairwise_kernels` spends about 0.6 ms on dispatch and
    checks against 20 µs of arithmetic (1 x 1000 RBF row).  For the ``linear``, ``rbf``,
    ``poly`` and ``sigmoid`` kernels without ``kernel_params`` and at most a few thousand values
    this evaluates scikit-learn's formulas directly (equal to rounding; tested against
    scikit-learn); everything else goes to :func:`kernel_matrix`.  Inputs must already be
    validated finite float64 arrays.

    Examples
    --------
    >>> import numpy as np
    >>> from deltafit.kernels import kernel_rows
    >>> X = np.array([[0.0, 0.0], [1.0, 0.0], [0.0, 2.0]])
    >>> kernel_rows(X[:1], X, kernel="linear", intercept_scaling=1.0)
    array([[1., 1., 1.]])
    """
    if (
        callable(kernel)
        or kernel_params
        or kernel not in ("linear", "rbf", "poly", "sigmoid")
        or X.shape[0] * Y.shape[0] > _FEW
    ):
        return kernel_matrix(
            X,
            Y,
            kernel=kernel,
            gamma=gamma,
            degree=degree,
            coef0=coef0,
            kernel_params=kernel_params,
            intercept_scaling=intercept_scaling,
        )
    g = 1.0 / X.shape[1] if gamma is None else float(gamma)
    with np.errstate(over="ignore", invalid="ignore"):  # overflow is refused below
        if kernel == "rbf":
            xx = np.einsum("ij,ij->i", X, X)[:, None]
            yy = np.einsum("ij,ij->i", Y, Y)[None, :]
            d = xx - 2.0 * (X @ Y.T) + yy
            np.maximum(d, 0.0, out=d)
            K = np.exp(-g * d)
        else:
            K = X @ Y.T
            if kernel == "poly":
                K = (g * K + coef0) ** degree
            elif kernel == "sigmoid":
                K = np.tanh(g * K + coef0)
    return _finished(K, intercept_scaling)


def kernel_diagonal(X: Rows, **kw: Any) -> np.ndarray:
    """Diagonal k(x_i, x_i) (+ s²) of the kernel matrix, without forming it where possible.

    Examples
    --------
    >>> import numpy as np
    >>> from deltafit.kernels import kernel_diagonal
    >>> X = np.array([[1.0, 2.0], [3.0, 0.0]])
    >>> kernel_diagonal(X, kernel="linear")
    array([5., 9.])
    """
    kernel = kw.get("kernel", "rbf")
    s = kw.get("intercept_scaling", 0.0)
    if kernel in ("rbf", "laplacian"):
        d = np.ones(X.shape[0])
    elif kernel == "cosine":
        d = (np.einsum("ij,ij->i", X, X) > 0).astype(np.float64)
    elif kernel == "linear":
        d = np.einsum("ij,ij->i", X, X)
    else:
        return np.array(
            [kernel_matrix(X[i : i + 1], X[i : i + 1], **kw)[0, 0] for i in range(X.shape[0])]
        )
    return d + s * s


def resolve_feature_map(feature_map: Any, X: ArrayLike) -> Any:
    """Return a fitted copy of ``feature_map`` (a scikit-learn transformer), or None.

    A transformer that is already fitted is used as it is (so that updates and fresh fits can
    share one map); an unfitted one is cloned and fitted on ``X``.

    Examples
    --------
    >>> import numpy as np
    >>> from sklearn.kernel_approximation import RBFSampler
    >>> from deltafit.kernels import resolve_feature_map
    >>> X = np.random.default_rng(0).normal(size=(20, 3))
    >>> fmap = resolve_feature_map(RBFSampler(n_components=8, random_state=0), X)
    >>> fmap.transform(X).shape
    (20, 8)
    >>> resolve_feature_map(None, X) is None
    True
    """
    if feature_map is None:
        return None
    if not (hasattr(feature_map, "fit") and hasattr(feature_map, "transform")):
        raise ValueError(
            "feature_map must be a scikit-learn transformer such as "
            "sklearn.kernel_approximation.Nystroem or RBFSampler, got "
            f"{type(feature_map).__name__}"
        )
    try:
        check_is_fitted(feature_map)
        return copy.deepcopy(feature_map)
    except NotFittedError:
        return clone(feature_map).fit(X)


def _resolved_from_data(params: Mapping[str, Any]) -> list[str]:
    """The names of the parameters in ``params`` (an estimator's ``get_params()``) that a fit
    resolves from its training rows: ``gamma="scale"`` / ``"auto"`` / None of a kernel that
    uses gamma, and an unfitted ``feature_map``.  An exact update keeps what the first fit
    resolved, so it equals a fit on the new data only when this list is empty (a fit of a
    clone resolves them again on that data)."""
    from sklearn.exceptions import NotFittedError
    from sklearn.utils.validation import check_is_fitted

    out = []
    kernel = params.get("kernel")
    if (
        isinstance(kernel, str)
        and kernel in _GAMMA_KERNELS
        and (params.get("gamma", 0.0) is None or isinstance(params.get("gamma"), str))
    ):
        out.append("gamma")
    fmap = params.get("feature_map")
    if fmap is not None:
        try:
            check_is_fitted(fmap)
        except NotFittedError:
            out.append("feature_map")
    return out
