"""The explicit features ``Φ(X)`` of a linear model: its fitted feature map (or X itself) with the
constant column of the intercept appended.

Shared by the linear estimators (:mod:`deltafit.models`) and the balls of the sensitivity layer
(:mod:`deltafit.sensitivity`), which evaluate a frozen copy of the same map.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import scipy.sparse as sp

__all__ = ["features"]


def features(X: Any, feature_map: Any, s: float | None) -> Any:
    """Φ(X): the fitted ``feature_map`` (or X itself), with a constant column of value ``s``
    appended unless ``s`` is None.

    Sparse features (a sparse X without a map, or a map whose output is sparse) stay sparse:
    a float64 ``csr_matrix``; a map's dense output (``Nystroem``, ``RBFSampler``) is dense."""
    if feature_map is None:
        Phi = X
    else:
        Phi = feature_map.transform(X)
        Phi = (
            sp.csr_matrix(Phi, dtype=np.float64)
            if sp.issparse(Phi)
            else np.asarray(Phi, dtype=np.float64)
        )
    if sp.issparse(Phi):
        Phi = sp.csr_matrix(Phi, dtype=np.float64)
        if s is None:
            return Phi
        col = sp.csr_matrix(np.full((Phi.shape[0], 1), float(s)))
        return sp.hstack([Phi, col], format="csr", dtype=np.float64)
    if s is not None:
        out = np.empty((Phi.shape[0], Phi.shape[1] + 1))
        out[:, :-1] = Phi
        out[:, -1] = s
        return out
    return np.ascontiguousarray(Phi)
