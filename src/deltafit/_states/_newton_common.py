"""What the two Newton states share: the curvature check of a change, and a padded array.

The states for the smooth non-quadratic losses (logistic, squared hinge) re-solve the canonical
problem warm-started after each change (:mod:`~deltafit._states._newton_primal` over explicit
features, :mod:`~deltafit._states._newton_kernel` over a kernel matrix; the kernel hinge state
builds on the latter).  Before anything changes, both refuse a change whose samples would bring
a Newton curvature beyond double precision (:func:`check_change_curvature`).
"""

from __future__ import annotations

import numpy as np

from deltafit.solvers import check_curvature, squared_norms

__all__ = ["check_change_curvature", "padded_at"]


def check_change_curvature(change, C, loss, sq_add=None, sq_reweight=None):
    """Refuse a change whose added or reweighted samples bring a Newton curvature beyond
    double precision (:data:`deltafit.solvers.MAX_CURVATURE`), before anything changes.

    ``sq_add`` / ``sq_reweight``: the samples' ``k(x, x)`` (kernel states); None: ``‖Φ(x)‖²``
    of the change's rows (linear states).
    """
    kernel = sq_add is not None or sq_reweight is not None
    what, norm = ("K", "k(x, x)") if kernel else ("X", "‖Φ(x)‖²")
    if change.add_slots is not None and len(change.add_slots):
        if sq_add is None:
            sq_add = squared_norms(change.rows_add)
        w = 1.0 if change.w_add is None else np.asarray(change.w_add, dtype=np.float64)
        check_curvature(sq_add, C * w, loss, what, norm)
    slots = change.reweight_slots
    if slots is not None and len(slots):
        if sq_reweight is None:
            rows = change.rows_reweight
            if rows is None:
                rows = change.ledger.X[np.asarray(slots, dtype=np.intp)]
            sq_reweight = squared_norms(rows)
        check_curvature(
            sq_reweight, C * np.asarray(change.reweight_w, dtype=np.float64), loss, what, norm
        )


def padded_at(slots, values, capacity):
    """A length-``capacity`` zero array holding ``values`` at ``slots``."""
    out = np.zeros(capacity)
    out[slots] = values
    return out
