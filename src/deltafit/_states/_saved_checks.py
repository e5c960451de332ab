"""What the states' load-time checks share: blocked row products, rounding bounds, refusals.

A model file is trusted in nothing (:mod:`deltafit.persistence`).  Each state checks the arrays
it saved against the ledger's (``ModelState.check_saved_statistics``, ``check_saved_solution``,
``check_saved_rows``): that its solution solves the stored problem, and that the stored rows
give what the state keeps of them, so that a file whose rows were changed is refused (its model
would predict from the old state while updates read the changed rows).

Each row test compares a product computed from the rows with the stored one, entry by entry,
against a rounding bound of that entry: ``4ε·(terms summed)`` times the sum of the products'
absolute values, the most rounding can move it whatever the scale of the problem (tiny
weights, huge or tiny C).  The products run over blocks of rows (:func:`row_blocks`): the extra
memory is a block, not a copy of Φ.
"""

from __future__ import annotations

import warnings
from collections.abc import Callable, Iterator, Mapping

import numpy as np
import scipy.sparse as sp

__all__ = ["EPS", "row_blocks", "abs_rows", "refuse_rows", "check_residual", "check_kernel_rows"]

EPS = float(np.finfo(np.float64).eps)
_ROW_BLOCK = 1 << 16  # rows per block of the load-time products (bounded extra memory)


def row_blocks(n: int) -> Iterator[slice]:
    """Slices of at most ``_ROW_BLOCK`` rows covering ``0..n-1`` (one empty slice for n = 0).

    Parameters
    ----------
    n : int
        The number of rows.

    Returns
    -------
    iterator of slice
    """
    return (slice(i, min(i + _ROW_BLOCK, n)) for i in range(0, max(n, 1), _ROW_BLOCK))


def abs_rows(B):
    """``|B|`` entrywise, for an array or a sparse matrix."""
    return abs(B) if sp.issparse(B) else np.abs(B)


def refuse_rows(what: str, where: str) -> None:
    """Raise the ValueError of stored rows that do not give the stored ``what``.

    Parameters
    ----------
    what : str
        The stored quantity (``"matrix ΦᵀWΦ + ρI"``, ``"kernel matrix"``, ...).
    where : str
        The rows or features found to differ.

    Raises
    ------
    ValueError
        Always.
    """
    raise ValueError(
        f"corrupt model file: the stored rows do not give the stored {what} "
        f"({where}): a stored row was changed, or the state was"
    )


def check_residual(residual: float, scale: float) -> None:
    """ValueError unless the stored solution's ``residual`` is within ``1e-6`` of ``scale``.

    Parameters
    ----------
    residual : float
        A norm of what the stored solution leaves of its optimality condition.
    scale : float
        The size of the terms that residual is the difference of.

    Raises
    ------
    ValueError
        When ``residual > 1e-6·scale`` (or either is not a number).
    """
    if not residual <= 1e-6 * scale + 1e-300:
        raise ValueError(
            f"corrupt model file: the stored solution does not solve the stored "
            f"problem (residual {residual:.3g} at scale {scale:.3g})"
        )


def _evaluated(kernel: Callable, X, Y) -> np.ndarray:
    """``kernel(X, Y)`` as float64; ValueError when the fitted kernel cannot be evaluated."""
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            return np.asarray(kernel(X, Y), dtype=np.float64)
    except Exception as exc:  # noqa: BLE001 - scikit-learn's kernels raise many kinds
        raise ValueError(
            f"corrupt model file: the fitted kernel cannot be evaluated "
            f"({type(exc).__name__}: {exc})"
        ) from None


def check_kernel_rows(
    arrays: Mapping[str, np.ndarray], kernel: Callable, first: bool = True
) -> None:
    """The stored rows of a kernel model against its stored kernel matrix ``state_K``.

    With ``first`` and more than 8 rows: every row's kernel values against 8 random stored
    rows (``1e-8`` of their largest value); then, always, the leading block of up to 8 × 8
    against the kernel of the first stored rows.

    Parameters
    ----------
    arrays : mapping of str to ndarray
        The file's arrays: ``ledger_X`` (the stored rows) and ``state_K``.
    kernel : callable
        The fitted kernel, ``kernel(X, Y) -> ndarray``.
    first : bool, default=True
        Whether this is the first of several checks of the same rows (one-vs-rest classes,
        outputs): the full row test runs once.

    Raises
    ------
    ValueError
        When the kernel cannot be evaluated or the stored matrix is not its value.
    """
    Phi, K = arrays["ledger_X"], arrays["state_K"]
    n = Phi.shape[0]
    if n > 8 and first:
        cols = np.sort(np.random.default_rng().choice(n, size=8, replace=False))
        Kx = _evaluated(kernel, Phi, Phi[cols])
        scale = float(np.max(np.abs(Kx), initial=0.0)) + 1e-300
        bad = np.flatnonzero(np.any(np.abs(Kx - K[:, cols]) > 1e-8 * scale, axis=1))
        if bad.size:
            refuse_rows("kernel matrix", f"rows {bad[:5].tolist()}")
    m = min(n, 8)
    Kx = _evaluated(kernel, Phi[:m], Phi[:m])
    K = K[:m, :m]
    scale = float(np.max(np.abs(Kx), initial=0.0)) + 1e-300
    if Kx.shape != K.shape or not np.all(np.abs(Kx - K) <= 1e-8 * scale):
        raise ValueError(
            "corrupt model file: the stored kernel matrix is not the fitted "
            "kernel of the stored rows"
        )
