"""Dense rows prepared for the Newton Hessians of :func:`~deltafit.solvers.newton_primal`, once
for every solve over the same rows (the K one-vs-rest classes of a fit).

A Newton step over dense rows forms ``H = I + Xᵀ diag(D) X`` (O(n p²), the cost of a fit) and
factorises it.  :class:`NewtonRows` forms it with half the flops of a general product and
without the columns that are zero in every row:

* one symmetric rank-k update (BLAS ``syrk``) of ``diag(√D) X`` (``D ≥ 0``): the matrix comes
  back exactly symmetric;
* a column that is zero in every row (the blank border pixels of images) contributes nothing
  to ``XᵀDX``: its row and column of H are those of the identity, and so are those of the
  Cholesky factor, so both are formed over the ``p'`` other columns only (``n p'²`` and
  ``p'³/3`` flops) and the factor is embedded;
* the first Newton step from β = 0 has the same weights ``D = C w ℓ''(t, 0)`` for every
  class (ℓ''(±1, 0) is ¼ for the logistic loss, 2 for the squared hinge): the first Hessian
  formed over all rows is kept with its factor and handed to every later solve whose weights
  are bitwise the same, so K classes form K − 1 fewer Hessians.  For the logistic loss it is
  also Böhning's bound ``¼ C XᵀWX + I ⪰ ∇²J(β)`` (Böhning & Lindsay, "Monotonicity of
  quadratic-approximation algorithms", Ann. Inst. Stat. Math. 1988), on which the chord
  steps of :func:`~deltafit.solvers._newton._chord_newton` that follow descend from any β;
* the passes ``X v`` and ``Xᵀ r`` of the steps (:meth:`NewtonRows.dot`, :meth:`~NewtonRows.tdot`)
  read the used columns only.

Nothing here changes what a step computes beyond the rounding of the sums: the Hessian is the
exact one at the step's point.
"""

from __future__ import annotations

import threading

import numpy as np
from scipy.linalg import blas, lapack

from deltafit.solvers._convergence import squared_norms

__all__ = ["NewtonRows"]

#: Rows per chunk when looking for the columns that are zero in every row.
_CHUNK = 4096


class NewtonRows:
    """Dense rows ``X`` (after dropping the samples of weight 0) with what every Newton solve
    over them shares.

    Parameters
    ----------
    X : ndarray of shape (n, p)
        The rows the solves use (float64).

    Attributes
    ----------
    X : ndarray of shape (n, p)
    cols : ndarray of int or None
        The columns that are not zero in every row (None: all of them).
    shared_hessians : int
        How many Newton steps took the kept first Hessian instead of forming their own.
    """

    def __init__(self, X: np.ndarray) -> None:
        X = np.asarray(X, dtype=np.float64)
        n, p = X.shape
        used = np.zeros(p, dtype=bool)
        for a in range(0, n, _CHUNK):
            used |= np.any(X[a : a + _CHUNK] != 0.0, axis=0)
        nz = np.flatnonzero(used)
        self.X = X
        self.cols = None if nz.size == p else nz
        # the used columns in Fortran order, from which diag(√D) X is formed in the order
        # syrk reads fastest (``Bᵀ B``, BLAS "T"); all columns used: X itself, no copy
        self._Xs = X if self.cols is None else np.asfortranarray(X[:, nz])
        self._first: tuple[np.ndarray, np.ndarray, np.ndarray] | None = None
        self._lock = threading.Lock()
        self.shared_hessians = 0
        self._sq: np.ndarray | None = None

    @classmethod
    def of(cls, X: np.ndarray, keep: np.ndarray | None = None) -> NewtonRows:
        """The rows ``X`` (``X[keep]``: the samples of positive weight) prepared."""
        X = np.asarray(X, dtype=np.float64)
        return cls(X if keep is None else X[keep])

    @property
    def p(self) -> int:
        return self.X.shape[1]

    def dot(self, v: np.ndarray) -> np.ndarray:
        """``X v`` (over the used columns only: the others add exact zeros)."""
        return self._Xs @ (v if self.cols is None else v[self.cols])

    def tdot(self, r: np.ndarray) -> np.ndarray:
        """``Xᵀ r`` (the entries of the unused columns are exact zeros)."""
        if self.cols is None:
            return self.X.T @ r
        out = np.zeros(self.p)
        out[self.cols] = self._Xs.T @ r
        return out

    @property
    def sq(self) -> np.ndarray:
        """``‖x_i‖²`` of every row (computed once)."""
        if self._sq is None:
            self._sq = squared_norms(self.X)
        return self._sq

    def hessian(
        self, D: np.ndarray, act: np.ndarray | None = None
    ) -> tuple[np.ndarray, np.ndarray, bool]:
        """``H = I + X_actᵀ diag(D) X_act`` and its lower Cholesky factor.

        Parameters
        ----------
        D : ndarray
            The curvature weights (≥ 0) of the rows ``act``.
        act : ndarray of bool or None
            The rows in H (None: all).

        Returns
        -------
        H : ndarray of shape (p, p)
            Exactly symmetric.  Never to be changed in place (it may be shared).
        factor : ndarray of shape (p, p)
            Lower triangular (zero above the diagonal).
        shared : bool
            Whether H is the kept first Hessian (shared with other solves).

        Raises
        ------
        numpy.linalg.LinAlgError
            When H is not numerically positive definite.
        """
        if act is not None:
            return (*self._form(D, act), False)
        with self._lock:
            first = self._first
            if first is None:  # the first Hessian over all rows: kept for the other solves
                H, L = self._form(D, None)
                self._first = (np.array(D, copy=True), H, L)
                return H, L, True
        if np.array_equal(first[0], D):
            self.shared_hessians += 1
            return first[1], first[2], True
        return (*self._form(D, None), False)

    def _form(self, D, act):
        Xs = self._Xs if act is None else self._Xs[act]
        p, q = self.p, Xs.shape[1]
        B = np.multiply(Xs, np.sqrt(D)[:, None], order="F")  # diag(√D) Xs
        Hs = blas.dsyrk(1.0, B, trans=1, lower=1)  # lower triangle of Bᵀ B (upper: zeros)
        Hs.flat[:: q + 1] += 1.0
        Ls, info = lapack.dpotrf(Hs, lower=1, clean=1)
        Hs += np.tril(Hs, -1).T  # mirrored: exactly symmetric
        if info != 0:
            raise np.linalg.LinAlgError(
                f"{info}-th leading minor not positive definite"
                if info > 0
                else f"illegal value in argument {-info} of dpotrf"
            )
        if self.cols is None:
            return Hs, Ls
        at = np.ix_(self.cols, self.cols)
        H, L = np.eye(p), np.eye(p, order="F")
        H[at] = Hs
        L[at] = Ls
        return H, L
