"""A symmetric inverse tracked under low-rank modifications.

``LowRankInverse`` holds ``H = H0 + U Cᵀ Uᵀ`` where ``H0`` is a dense symmetric ``p × p``
matrix and ``U`` (``p × r``), ``C`` (``r × r``, symmetric, block diagonal) collect the
Sherman–Morrison–Woodbury corrections of the updates since the last fold.  A single update
then costs one matrix–vector product with ``H0`` plus O(p r), instead of the O(p²) rank-one
rewrite of ``H0`` (or the O(p³) refactorisation); :meth:`fold` writes the corrections into
``H0`` with one BLAS-3 product.  The owner decides when to fold and when to re-invert from the
exact matrix.  Nothing here knows about data or models.
"""

from __future__ import annotations

import numpy as np
from numpy.typing import ArrayLike
from scipy.linalg import blas

__all__ = ["LowRankInverse"]


class LowRankInverse:
    """Tracked inverse ``H = H0 + U C Uᵀ`` of a symmetric positive definite matrix.

    Parameters
    ----------
    H0 : ndarray of shape (p, p)
        Symmetric base matrix (both triangles stored).
    max_rank : int
        Capacity for pending corrections; :attr:`full` tells the owner to fold.
    """

    def __init__(self, H0: ArrayLike, max_rank: int = 64) -> None:
        self.H0 = np.asfortranarray(H0, dtype=np.float64)
        self.max_rank = int(max_rank)
        p = self.H0.shape[0]
        self._U = np.zeros((p, self.max_rank), order="F")
        self._C = np.zeros((self.max_rank, self.max_rank))
        self.rank = 0

    @property
    def p(self) -> int:
        return self.H0.shape[0]

    @property
    def full(self) -> bool:
        return self.rank >= self.max_rank

    def room(self, k: int) -> bool:
        """Whether a block of rank ``k`` fits without folding."""
        return self.rank + k <= self.max_rank

    def matvec(self, x: np.ndarray) -> np.ndarray:
        """``H x`` for a vector (p,) or a matrix (p, k)."""
        if x.ndim == 1:
            out = blas.dsymv(1.0, self.H0, x, lower=1)
        else:
            out = self.H0 @ x
        if self.rank:
            r = self.rank
            U = self._U[:, :r]
            out += U @ (self._C[:r, :r] @ (U.T @ x))
        return out

    def columns(self, idx: np.ndarray) -> np.ndarray:
        """Columns ``H[:, idx]`` (shape (p, len(idx)))."""
        out = self.H0[:, idx]
        if self.rank:
            r = self.rank
            U = self._U[:, :r]
            out = out + U @ (self._C[:r, :r] @ U[idx].T)
        return out

    def add(self, U: np.ndarray, C: np.ndarray) -> None:
        """Append the correction ``U C Uᵀ`` (``U``: (p, k), ``C``: (k, k) symmetric)."""
        k = U.shape[1]
        if not self.room(k):
            raise RuntimeError("LowRankInverse is full; fold first")
        r = self.rank
        self._U[:, r : r + k] = U
        self._C[r : r + k, : r + k] = 0.0
        self._C[: r + k, r : r + k] = 0.0
        self._C[r : r + k, r : r + k] = C
        self.rank = r + k

    def add_one(self, w: np.ndarray, c: float) -> None:
        """Append the rank-one correction ``c·w wᵀ`` (``w``: (p,)): :meth:`add` for k = 1."""
        r = self.rank
        if r >= self.max_rank:
            raise RuntimeError("LowRankInverse is full; fold first")
        self._U[:, r] = w
        self._C[r, :r] = 0.0
        self._C[:r, r] = 0.0
        self._C[r, r] = c
        self.rank = r + 1

    def trace(self) -> float:
        """``trace(H)``: O(p), plus O(p r²) for the pending corrections."""
        t = float(np.trace(self.H0))
        if self.rank:
            r = self.rank
            U = self._U[:, :r]
            t += float(np.sum((U @ self._C[:r, :r]) * U))
        return t

    def mark(self) -> int:
        """A token for :meth:`rollback` (the current rank)."""
        return self.rank

    def rollback(self, mark: int) -> None:
        """Forget the corrections added after ``mark``."""
        self.rank = mark

    def fold(self) -> None:
        """Write the pending corrections into ``H0`` (one BLAS-3 product)."""
        if self.rank:
            r = self.rank
            U = self._U[:, :r]
            V = np.asfortranarray(U @ self._C[:r, :r])
            # U C Uᵀ is symmetric; the product's rounding asymmetry (~ε) is harmless
            self.H0 = blas.dgemm(1.0, V, U, beta=1.0, c=self.H0, trans_b=1, overwrite_c=1)
            self.rank = 0

    def apply_now(self, U: np.ndarray, C: np.ndarray) -> None:
        """``H0 += U C Uᵀ`` at once (one BLAS-3 product), for blocks too large to keep pending.

        Folds the pending corrections first.  Not undoable by :meth:`rollback`.
        """
        self.fold()
        V = np.asfortranarray(U @ C)
        self.H0 = blas.dgemm(
            1.0, V, np.asfortranarray(U), beta=1.0, c=self.H0, trans_b=1, overwrite_c=1
        )

    def reset(self, H0: ArrayLike) -> None:
        """Replace the base by a freshly computed inverse and drop all corrections."""
        self.H0 = np.asfortranarray(H0, dtype=np.float64)
        if self._U.shape[0] != self.H0.shape[0]:
            self._U = np.zeros((self.H0.shape[0], self.max_rank), order="F")
        self.rank = 0

    def resize(self, p_new: int) -> None:
        """Pad with zero rows/columns to size ``p_new`` (fold first)."""
        self.fold()
        p = self.p
        H0 = np.zeros((p_new, p_new), order="F")
        m = min(p, p_new)
        H0[:m, :m] = self.H0[:m, :m]
        self.H0 = H0
        self._U = np.zeros((p_new, self.max_rank), order="F")

    def take(self, keep: np.ndarray) -> None:
        """Restrict to the rows/columns ``keep`` (fold first)."""
        self.fold()
        self.H0 = np.asfortranarray(self.H0[np.ix_(keep, keep)])
        self._U = np.zeros((len(keep), self.max_rank), order="F")
