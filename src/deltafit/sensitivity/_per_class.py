"""What the one-ball-per-class objects share: K binary what-ifs, asked together.

A model with K ≥ 3 classes is K one-vs-rest problems; its what-if object
(:class:`~deltafit.sensitivity.MulticlassSensitivity`) and its incremental balls
(:class:`~deltafit.sensitivity.MulticlassIncrementalSphere`) each hold one binary object per
class in ``self._parts`` (class order, the order of ``classes_``).  :class:`PerClass` answers
the queries that only stack the K binary answers column by column; :func:`certain_argmax`
certifies the argmax of K bounded decision values (the label of a multiclass model).
"""

from __future__ import annotations

from typing import Any

import numpy as np
from numpy.typing import ArrayLike

__all__ = ["PerClass", "certain_argmax"]


def certain_argmax(lo: ArrayLike, hi: ArrayLike) -> tuple[np.ndarray, np.ndarray]:
    """The class each row's bounds certify as the argmax.

    Parameters
    ----------
    lo, hi : ndarray of shape (n, K)
        Certified bounds of K decision values per row.

    Returns
    -------
    top : ndarray of int, shape (n,)
        ``argmax(lo)`` per row: where ``certain``, the argmax of every decision vector within
        the bounds.
    certain : ndarray of bool, shape (n,)
        ``lo[top] > max_{j ≠ top} hi[j]``: then every vector with ``lo ≤ z ≤ hi`` has its
        unique maximum at ``top``.

    Examples
    --------
    >>> import numpy as np
    >>> from deltafit.sensitivity import certain_argmax
    >>> lo = np.array([[2.0, 0.0, -1.0], [1.0, 0.9, 0.0]])
    >>> hi = np.array([[3.0, 1.5, 0.0], [2.0, 1.2, 0.5]])
    >>> top, certain = certain_argmax(lo, hi)
    >>> top.tolist(), certain.tolist()          # row 2: class 1 may still beat class 0
    ([0, 0], [True, False])
    """
    lo = np.asarray(lo, dtype=np.float64)
    hi = np.asarray(hi, dtype=np.float64)
    if lo.ndim != 2 or lo.shape != hi.shape or lo.shape[1] < 2:
        raise ValueError(
            f"lo and hi must both have shape (n, K) with K >= 2, got {lo.shape} and {hi.shape}"
        )
    n = lo.shape[0]
    top = np.argmax(lo, axis=1)
    rows = np.arange(n)
    others = hi.copy()
    others[rows, top] = -np.inf
    with np.errstate(invalid="ignore"):
        certain = lo[rows, top] > others.max(axis=1)
    return top, certain


class PerClass:
    """Mixin over ``self._parts`` (K binary objects) and ``self.n_classes``."""

    _parts: list
    n_classes: int

    def for_class(self, k: int) -> Any:
        """The binary object of class ``k`` (index into ``classes_``): its changes are those
        of this object."""
        if (
            isinstance(k, bool)
            or not isinstance(k, (int, np.integer))
            or not 0 <= k < self.n_classes
        ):
            raise ValueError(f"class index must be an int in [0, {self.n_classes}), got {k!r}")
        return self._parts[int(k)]

    def _stacked(self, name, *args):
        """``part.name(*args)`` of every class, as the columns of one (n, K) array."""
        return np.column_stack([getattr(part, name)(*args) for part in self._parts])

    def _stacked_pairs(self, name, *args):
        """``(lo, hi)`` of every class's ``part.name(*args)``, each stacked to (n, K)."""
        b = [getattr(part, name)(*args) for part in self._parts]
        return np.column_stack([lo for lo, _ in b]), np.column_stack([hi for _, hi in b])

    @property
    def n_added(self) -> int:
        return self._parts[0].n_added

    @property
    def n_removed(self) -> int:
        return self._parts[0].n_removed

    @property
    def radius(self) -> np.ndarray:
        """Radius of each class's ball, shape (K,)."""
        return np.array([part.radius for part in self._parts])

    def distance_bound(self) -> np.ndarray:
        """Upper bound of ``‖β_k,new − β_k,old‖`` for every class k, shape (K,)."""
        return np.array([part.distance_bound() for part in self._parts])

    def decision_bounds(self, X: ArrayLike) -> tuple[np.ndarray, np.ndarray]:
        """Guaranteed ``lo ≤ decision_function_new(X) ≤ hi``, each of shape (n, K), column
        k from class k's binary object."""
        return self._stacked_pairs("decision_bounds", X)
