"""The solvers' input checks, and the samples of weight 0.

Sample weights (:func:`check_sample_weight`, used by every solver and by the callers that
take ``sample_weight``), hinge labels, smoothness of the loss, the callback; a sample of weight
0 is absent from the problem: its rows are dropped before a solve (:func:`_kept`), the warm
start restricted to the kept samples (:func:`_take_start`, :func:`_kept_indices`) and the
result embedded back with zeros (:func:`_embed`).
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
from numpy.typing import ArrayLike

__all__ = ["check_sample_weight"]

#: ``callback(iteration, coef, grad_norm, objective, grad)``: returning True stops a solve.
SolverCallback = Callable[[int, np.ndarray, float, float, np.ndarray], object]


def _check_callback(callback, it, coef, grad_norm, objective, grad):
    if callback is None:
        return False
    return bool(callback(it, coef, grad_norm, objective, grad))


def _check_smooth(loss, solver):
    if not getattr(loss, "smooth", True):
        raise ValueError(
            f"{solver} needs a smooth loss; loss={loss.name!r} is not differentiable "
            "(solve the hinge loss with hinge_primal / hinge_kernel)"
        )


def check_sample_weight(
    sample_weight: ArrayLike | None, n: int, C: float = 1.0
) -> np.ndarray | None:
    """``None``, or the sample weights as a new float64 array of shape ``(n,)``.

    Raises ValueError, naming the problem, for a wrong shape, a NaN, an infinite or a negative
    weight, or weights whose product with ``C`` overflows.
    """
    if sample_weight is None:
        return None
    if np.iscomplexobj(sample_weight):
        raise ValueError("sample_weight must be real, got complex values")
    try:
        w = np.array(sample_weight, dtype=np.float64, copy=True)
    except (TypeError, ValueError) as exc:
        raise ValueError(f"sample_weight must be an array of numbers ({exc})") from exc
    if w.shape != (n,):
        raise ValueError(
            f"sample_weight must have shape ({n},) (one weight per sample), got shape {w.shape}"
        )
    if np.isnan(w).any():
        raise ValueError(
            f"sample_weight contains NaN (at index {int(np.flatnonzero(np.isnan(w))[0])})"
        )
    if np.isinf(w).any():
        raise ValueError(
            "sample_weight contains an infinite value "
            f"(at index {int(np.flatnonzero(np.isinf(w))[0])})"
        )
    if (w < 0.0).any():
        i = int(np.flatnonzero(w < 0.0)[0])
        raise ValueError(f"sample_weight must be non-negative, got {w[i]!r} at index {i}")
    with np.errstate(over="ignore"):
        if not np.all(np.isfinite(float(C) * w)):
            raise ValueError(f"C * sample_weight overflows (C={C!r}, max weight {w.max()!r})")
    return w


def _kept(w):
    """Indices of the samples of positive weight, or None when there is nothing to drop."""
    if w is None:
        return None
    keep = np.flatnonzero(w > 0.0)
    return None if keep.size == w.size else keep


def _embed(v, keep, n):
    """The length-``n`` vector that holds ``v`` at ``keep`` and 0 elsewhere."""
    out = np.zeros(n)
    out[keep] = v
    return out


def _take_start(start, keep, n, what):
    """The warm start restricted to ``keep`` (after checking that it has ``n`` entries)."""
    if start is None:
        return None
    start = np.array(start, dtype=np.float64, copy=True).ravel()
    if start.shape != (n,):
        raise ValueError(f"{what} must hold {n} values, got {start.size}")
    return start[keep]


def _kept_indices(idx, keep, n):
    """Indices into ``n`` samples mapped to their positions among the kept ones ``keep``
    (dropped samples left out); None stays None."""
    if idx is None:
        return None
    idx = np.asarray(idx, dtype=np.intp).ravel()
    if idx.size and (idx.min() < 0 or idx.max() >= n):
        raise ValueError(f"working_set must hold indices in [0, {n})")
    pos = np.searchsorted(keep, idx)
    pos = np.minimum(pos, keep.size - 1)
    return pos[keep[pos] == idx] if keep.size else pos[:0]


def _check_labels(y, n=None):
    y = np.asarray(y, dtype=np.float64).ravel()
    if not np.all(np.abs(y) == 1.0):
        raise ValueError("the hinge solvers need labels y in {-1, +1}")
    if n is not None and y.shape[0] != n:
        raise ValueError(f"y has {y.shape[0]} labels for {n} samples")
    return y
