"""Error-free transformations and compensated (double-double) dot products.

Dekker's split and TwoProduct and Knuth's TwoSum give the rounding error of a floating-point
sum or product exactly, as a second float: ``a + b = s + e`` and ``a·b = p + e``.  Ogita, Rump
& Oishi's Dot2 ("Accurate sum and dot product", SIAM J. Sci. Comput. 26(6), 2005) builds on
them a dot product as accurate as if computed in twice the working precision, returned as an
unevaluated sum ``hi + lo``.  The primal squared-loss state keeps the statistics of rows of
large norm this way (:class:`~deltafit._states._squared_stats._Statistics`), so that removing
such a row does not cancel the digits a plain sum would lose.

Everything here is elementwise NumPy on float64 arrays.
"""

from __future__ import annotations

import numpy as np

__all__ = ["_EPS", "_SPLIT", "_split", "_two_sum", "_two_prod", "_dot2"]

_EPS = np.finfo(np.float64).eps
# Dekker's splitting constant 2**27 + 1: the high part of a split double has at most 26
# significant bits, so the product of two high parts is exact.
_SPLIT = 134217729.0


def _split(a):
    """Dekker's split ``a = hi + lo`` (elementwise), ``hi`` with at most 26 significant bits."""
    c = _SPLIT * a
    hi = c - (c - a)
    return hi, a - hi


def _two_sum(a, b):
    """Knuth's TwoSum: ``s + e = a + b`` exactly, ``s = fl(a + b)`` (elementwise)."""
    s = a + b
    bb = s - a
    return s, (a - (s - bb)) + (b - bb)


def _two_prod(a, b):
    """Dekker's TwoProduct: ``p + e = a·b`` exactly, ``p = fl(a·b)`` (elementwise)."""
    p = a * b
    ah, al = _split(a)
    bh, bl = _split(b)
    return p, ((ah * bh - p) + ah * bl + al * bh) + al * bl


def _dot2(V, c):
    """``Vᵀc`` as ``hi + lo``, as accurate as if computed in twice the working precision.

    Ogita, Rump & Oishi's Dot2 ("Accurate sum and dot product") with the summation done as a
    pairwise cascade of TwoSums (vectorised over the columns of ``V`` and, for a matrix ``c``
    of shape (k, K), over its K columns: then ``hi`` and ``lo`` have shape (p, K)).
    """
    c = np.asarray(c, dtype=np.float64)
    if c.ndim == 1:
        P, E = _two_prod(V, c[:, None])
    else:
        P, E = _two_prod(V[:, :, None], c[:, None, :])
    lo = E.sum(axis=0)
    while P.shape[0] > 1:
        m = P.shape[0] // 2
        s, e = _two_sum(P[:m], P[m : 2 * m])
        lo += e.sum(axis=0)
        P = s if P.shape[0] == 2 * m else np.vstack([s, P[2 * m :]])
    return P[0], lo
