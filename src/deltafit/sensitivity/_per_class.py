"""What the one-ball-per-class objects share: K binary what-ifs, asked together.

A model with K ≥ 3 classes is K one-vs-rest problems; its what-if object
(:class:`~deltafit.sensitivity.MulticlassSensitivity`) and its incremental balls
(:class:`~deltafit.sensitivity.MulticlassIncrementalSphere`) each hold one binary object per
class in ``self._parts`` (class order, the order of ``classes_``).  :class:`PerClass` answers
the queries that only stack the K binary answers column by column.
"""

from __future__ import annotations

import numpy as np

__all__ = ["PerClass"]


class PerClass:
    """Mixin over ``self._parts`` (K binary objects) and ``self.n_classes``."""

    _parts: list
    n_classes: int

    def for_class(self, k):
        """The binary object of class ``k`` (index into ``classes_``): its changes are those
        of this object."""
        if isinstance(k, bool) or not isinstance(k, (int, np.integer)) or \
                not 0 <= k < self.n_classes:
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
    def n_added(self):
        return self._parts[0].n_added

    @property
    def n_removed(self):
        return self._parts[0].n_removed

    @property
    def radius(self):
        """Radius of each class's ball, shape (K,)."""
        return np.array([part.radius for part in self._parts])

    def distance_bound(self):
        """Upper bound of ``‖β_k,new − β_k,old‖`` for every class k, shape (K,)."""
        return np.array([part.distance_bound() for part in self._parts])

    def decision_bounds(self, X):
        """Guaranteed ``lo ≤ decision_function_new(X) ≤ hi``, each of shape (n, K), column
        k from class k's binary object."""
        return self._stacked_pairs("decision_bounds", X)
