"""Compiled row kernels of the logistic passes over plain features (numba, GIL-free).

A Dask pass over plain features (Φ(x) = ``[x, s]``, :class:`~._newton.PassSpec`) reads each
row a few times: the scores ``x β``, the gradient ``xᵀ c`` and, in a Hessian pass, the scaled
rows ``V = diag(√d) x`` whose ``VᵀV`` (BLAS syrk) is ``xᵀ diag(d) x``, with ``xᵀ d`` for the
constant column's row.  In NumPy these are four calls per chunk, of which the broadcast
product ``x * √d[:, None]`` runs its inner loop once per row (50 elements at p = 50): about a
fifth of a Hessian task at p = 50.  The kernels here do the scores in one loop and the rest in
one more (the rows read once from the cache), without the GIL (``nogil``): on the threaded
scheduler the block tasks then overlap except for the few NumPy calls left per chunk (the
logistic function's exponentials stay NumPy's SIMD ufuncs, and ``VᵀV`` BLAS syrk).

Every kernel sums in a fixed order: the results equal NumPy's products to rounding
(``fastmath`` lets the dot products vectorise).  Without numba, or with its JIT disabled
(:func:`compiled` False), the passes keep their NumPy products; the kernels are compiled on
their first call in a process (numba caches them on disk).
"""

from __future__ import annotations

import math

from deltafit.utils._numba import HAVE_NUMBA, njit

__all__ = ["HAVE_NUMBA", "compiled", "scores", "gradient_rows", "hessian_rows"]


def compiled():
    """Whether the kernels run compiled: numba installed and its JIT not disabled
    (``NUMBA_DISABLE_JIT=1`` leaves them plain Python loops, which the passes then skip)."""
    if not HAVE_NUMBA:
        return False
    import numba

    return not numba.config.DISABLE_JIT


@njit
def scores(x, b, b0, out):  # pragma: no cover - compiled
    """``out[i] = b0 + Σ_j x[i, j] b[j]`` for the rows of ``x``."""
    m, q = x.shape
    for i in range(m):
        acc = 0.0
        for j in range(q):
            acc += x[i, j] * b[j]
        out[i] = acc + b0


@njit
def gradient_rows(x, w, l1, G):  # pragma: no cover - compiled
    """With ``c = w l1``: ``G[:q] += xᵀ c`` and ``G[q] += Σ c`` (q columns of x)."""
    m, q = x.shape
    for i in range(m):
        c = w[i] * l1[i]
        if c != 0.0:
            for j in range(q):
                G[j] += x[i, j] * c
            G[q] += c


@njit
def hessian_rows(x, w, l1, l2, V, G, Gd):  # pragma: no cover - compiled
    """In one read of the rows, with ``c = w l1`` and ``d = w l2 ≥ 0``: the scaled rows
    ``V[i] = √d_i x[i]``, ``G[:q] += xᵀ c``, ``G[q] += Σ c``, ``Gd[:q] += xᵀ d`` and
    ``Gd[q] += Σ d``."""
    m, q = x.shape
    for i in range(m):
        c = w[i] * l1[i]
        d = w[i] * l2[i]
        sd = math.sqrt(d)
        for j in range(q):
            v = x[i, j]
            V[i, j] = v * sd
            G[j] += v * c
            Gd[j] += v * d
        G[q] += c
        Gd[q] += d
