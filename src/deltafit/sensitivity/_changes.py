"""The samples a hypothetical data change touches, and ``Δg = Σ_i c_i Φ(x_i)`` over them.

Both what-if objects (:class:`~deltafit.sensitivity.Sensitivity` and
:class:`~deltafit.sensitivity.IncrementalSphere`) keep the changed samples here.  An *entry* is
a sample in ``A ∪ R`` (or about to be): its point, its score ``z_i = ⟨Φ(x_i), β₁⟩`` under the
stored solution, and its coefficient ``c_i`` in ``Δg`` (``ℓ'(y_i, z_i)`` for an addition,
``−ℓ'(y_i, z_i)`` for a removal; Sivan et al., "Incremental sensitivity analysis for kernelized
models", eq. 4).  Entries sit in *slots*; a slot given back is reused, the lowest first, so a store
that only grows and shrinks at its end keeps its entries in slots ``0 … n − 1``.

Two stores share one interface:

* :class:`LinearChanges` keeps ``Δg`` as a vector of the explicit feature space, updated by
  ``Σ dc_i Φ_i``; the rows of model samples stay in the model (referenced by handle), other
  rows are copied;
* :class:`KernelChanges` keeps the kernel matrix ``G`` of the entries and ``‖Δg‖² = cᵀ G c``,
  updated by ``2 dcᵀ G c + dcᵀ G dc`` per change (Sivan et al. §3.3).

Either running sum is recomputed exactly from the entries when an update cancels most of it
(a change that undoes a large one) and at least once per ``max(64, n)`` updated entries, so
its error stays at rounding level on arbitrarily long streams.  The ball itself is computed by
:mod:`deltafit.sensitivity.regions._ball`.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Any

import numpy as np
from numpy.typing import ArrayLike

from deltafit.kernels import kernel_diagonal, kernel_rows
from deltafit.sensitivity._model_access import ScoreFunction
from deltafit.sensitivity.regions import _ball
from deltafit.sensitivity.regions._sphere import KernelSphere, PrimalSphere, Sphere, _Features

if TYPE_CHECKING:
    from deltafit.losses import Loss

__all__ = ["ChangedSamples", "KernelChanges", "LinearChanges", "changes_for"]

_CANCEL = 1e-3  # a running sum this much smaller than its terms is recomputed exactly
_REFRESH = 64  # ... and it is recomputed at least once per max(_REFRESH, n) updated entries
# Largest ‖Φ(x)‖ and |ℓ'|·‖Φ(x)‖ of a new sample: squares and sums of a few million such terms
# stay finite in float64, so no ball computed from them overflows.
_MAX_NORM = 1e100


def changes_for(problem: Any, capacity: int = 0) -> ChangedSamples:
    """The store of changed samples for a :class:`~deltafit.models.FittedProblem`."""
    cls = KernelChanges if problem.kernel else LinearChanges
    return cls(problem, capacity)


class ChangedSamples:
    """Entries (point, score under β₁, coefficient in Δg) in reusable slots; see the module.

    Parameters
    ----------
    problem : deltafit.models.FittedProblem
        The fitted problem whose solution β₁ the scores and the ball refer to.
    capacity : int
        Initial room (grown when needed, never shrunk).

    Attributes
    ----------
    z, c : ndarray of shape (capacity,)
        Scores and coefficients by slot (0 in free slots).
    live : ndarray of bool
        Slots holding an entry.
    n : int
        Number of entries.
    hi : int
        One past the highest slot in use: every entry lies in ``[0, hi)``.
    """

    def __init__(self, problem: Any, capacity: int = 0) -> None:
        self.problem = problem
        self._score = ScoreFunction(problem)  # ⟨Φ(x), β₁⟩
        cap = int(capacity)
        self.z = np.zeros(cap)
        self.c = np.zeros(cap)
        self.live = np.zeros(cap, dtype=bool)
        self.n = 0
        self.hi = 0
        self._nnz = 0  # entries with a coefficient ≠ 0
        self._since = 0  # entries updated since the running sum was last exact

    # ---------------------------------------------------------------- room
    @property
    def capacity(self) -> int:
        return self.c.shape[0]

    def _room(self, need):
        """The capacity to grow to for ``need`` slots."""
        raise NotImplementedError

    def _grow(self, cap):
        hi = self.hi
        for name, fill in (("z", 0.0), ("c", 0.0), ("live", False)):
            a = getattr(self, name)
            b = np.full(cap, fill, dtype=a.dtype)
            b[:hi] = a[:hi]
            setattr(self, name, b)

    def _take(self, k):
        """``k`` free slots, the lowest first."""
        hi = self.hi
        holes = np.flatnonzero(~self.live[:hi])[:k] if self.n < hi else None
        rest = k if holes is None else k - holes.size
        need = hi + rest
        if need > self.capacity:
            self._grow(self._room(need))
        slots = np.arange(hi, need)
        if holes is not None and holes.size:
            slots = np.concatenate([holes, slots])
        self.hi = need
        self.live[slots] = True
        self.n += k
        return slots

    # ------------------------------------------------------------- entries
    def model_points(
        self, handles: np.ndarray, rows: np.ndarray | None = None
    ) -> tuple[Any, np.ndarray, Any]:
        """``(points, z, src)`` of stored training samples: what :meth:`insert` takes.

        ``rows``: the samples' validated raw rows, for a linear model that keeps none.
        """
        raise NotImplementedError

    def new_points(self, X: np.ndarray) -> tuple[Any, np.ndarray]:
        """``(points, z)`` of validated new rows ``X``: what :meth:`insert` takes."""
        raise NotImplementedError

    def check_new(
        self, points: Any, z: np.ndarray, t: np.ndarray, loss: Loss, what: str = "X"
    ) -> np.ndarray:
        """``ℓ'(t, z)`` of new samples with points ``points``, scores ``z`` and targets ``t``;
        ValueError unless every quantity of the ball stays finite: ``‖Φ(x)‖ ≤ 1e100`` and
        ``|ℓ'(t, z)| ‖Φ(x)‖ ≤ 1e100`` (checked before anything changes)."""
        with np.errstate(over="ignore", invalid="ignore"):
            norm = np.sqrt(self.sq_norms(points))
            ok = np.isfinite(z) & (norm <= _MAX_NORM)
            d1 = loss.d1(t, np.where(ok, z, 0.0))
            ok &= np.abs(d1) * norm <= _MAX_NORM
        if not ok.all():
            i = int(np.flatnonzero(~ok)[0])
            raise ValueError(
                f"row {i} of {what} is too large: ‖Φ(x)‖ = {norm[i]:.3g} with score {z[i]:.3g} "
                f"overflows the bounds' float64 arithmetic (at most {_MAX_NORM:.0e} is accepted)"
            )
        return d1

    def insert(
        self, points: Any, z: np.ndarray, c: np.ndarray | None = None, src: np.ndarray | None = None
    ) -> np.ndarray:
        """New entries with coefficients ``c`` (default 0); their slots.

        Parameters
        ----------
        points : ndarray of shape (k, width)
            From :meth:`model_points`, :meth:`new_points` or :meth:`map`.
        z : ndarray of shape (k,)
            Their scores under β₁.
        c : ndarray of shape (k,), optional
        src : ndarray of int, optional
            Handles of model samples whose stored rows ``points`` are (nothing is copied).
        """
        slots = self._take(len(z))
        self.z[slots] = z
        self._put(slots, points, src)
        if c is not None:
            self.set(slots, c, points)
        return slots

    def set(self, slots: np.ndarray, c: ArrayLike, points: Any = None) -> None:
        """Give entries ``slots`` the coefficients ``c`` and update the running sum."""
        c = np.asarray(c, dtype=np.float64)
        before = self.c[slots]
        dc = c - before
        if not dc.any():
            return
        fresh = self._nnz == 0
        self._update(slots, dc, c, points)
        self._nnz += int(np.count_nonzero(c)) - int(np.count_nonzero(before))
        if not self._nnz:  # back to no change: the running sum is exactly 0
            self._zero()
            self._since = 0
        elif fresh:  # the sum of one update of an empty store is as exact as a recomputation
            self._since = 0
        else:
            self._since += len(slots)
            if self._since >= max(_REFRESH, self.n):
                self.recompute()

    def release(self, slots: np.ndarray) -> None:
        """Take entries out (coefficient 0) and free their slots for reuse."""
        self.set(slots, np.zeros(len(slots)))
        self.live[slots] = False
        self.z[slots] = 0.0
        self.n -= len(slots)
        if self.hi and not self.live[self.hi - 1]:
            used = np.flatnonzero(self.live[: self.hi])
            self.hi = int(used[-1]) + 1 if used.size else 0

    def truncate(self, hi: int) -> None:
        """:meth:`release` every slot from ``hi`` on."""
        if hi < self.hi:
            slots = np.arange(hi, self.hi)
            self.release(slots[self.live[slots]])

    # ------------------------------------------------------------ queries
    def map(self, X: np.ndarray) -> Any:
        """Points of validated raw rows (Φ(X) for linear models, X for kernel models)."""
        raise NotImplementedError

    def sq_norms(self, P: Any) -> np.ndarray:
        """``‖Φ(p)‖²`` of points."""
        raise NotImplementedError

    def beta_scores(self, P: Any) -> np.ndarray:
        """``⟨Φ(p), β₁⟩`` of points."""
        return self._score.mapped(P)

    def scores(self, P: Any) -> np.ndarray:
        """``⟨Φ(p), Δg⟩`` of points."""
        raise NotImplementedError

    def kernel(self, P: Any, slots: np.ndarray) -> np.ndarray:
        """``⟨Φ(p), Φ(x_s)⟩`` between points and the entries in ``slots``."""
        raise NotImplementedError

    def beta_dot(self) -> float:
        """``⟨β₁, Δg⟩ = Σ c_i z_i``."""
        hi = self.hi
        return float(self.c[:hi] @ self.z[:hi])

    def center_scores(self, P: Any, C1: float, C2: float) -> np.ndarray:
        """Scores of the ball's center at points (Theorem 1 form, :func:`_ball.center_scores`)."""
        return _ball.center_scores(self.beta_scores(P), self.scores(P), C1=C1, C2=C2)

    def half_gradient(self, C1: float, C2: float) -> tuple[np.ndarray | None, float]:
        """``(r, ‖r‖)`` of the Theorem 1 ball (r None when it is not a vector)."""
        raise NotImplementedError

    def sphere(self, C1: float, C2: float, radius: float) -> Sphere:
        """The Theorem 1 ball as a :class:`~deltafit.sensitivity.Sphere`."""
        raise NotImplementedError

    def recompute(self) -> None:
        """Recompute the running sum exactly from the entries."""
        self._since = 0
        self._exact()

    # ------------------------------------------------------------ subclass
    def _put(self, slots, points, src):
        raise NotImplementedError

    def _update(self, slots, dc, c, points):
        raise NotImplementedError

    def _zero(self):
        raise NotImplementedError

    def _exact(self):
        raise NotImplementedError


class LinearChanges(ChangedSamples):
    """Changed samples of a linear model: ``Δg`` as a vector over Φ (see the module).

    Rows of model samples are referenced by handle (``src``), others are copied into a buffer
    allocated on first use.  A model with an intercept and no feature map stores raw rows
    ``X`` of new samples: ``Φ = [X, s]`` is formed only in the buffer.

    Attributes
    ----------
    beta : ndarray of shape (p,)
        β₁.
    dg : ndarray of shape (p,)
        The running ``Δg``.
    """

    def __init__(self, problem: Any, capacity: int = 0) -> None:
        super().__init__(problem, capacity)
        self.beta = self._score.beta
        self.width = self.beta.shape[0]
        self.const = problem.intercept_scaling if problem.fit_intercept else None
        self._raw = self.const is not None and problem.feature_map is None
        self.src = np.full(self.capacity, -1, dtype=np.intp)
        self.rows: Any = None  # allocated on the first entry without stored rows
        self.dg = np.zeros(self.width)

    def _room(self, need):
        # entries are small: leave room for the addition that usually follows a removal
        cap = self.capacity
        return max(need, 64, 2 * need if cap == 0 else 2 * cap)

    def _grow(self, cap):
        hi = self.hi
        super()._grow(cap)
        src = np.full(cap, -1, dtype=np.intp)
        src[:hi] = self.src[:hi]
        self.src = src
        if self.rows is not None:
            rows = np.empty((cap, self.width))
            rows[:hi] = self.rows[:hi]
            self.rows = rows

    def model_points(
        self, handles: np.ndarray, rows: np.ndarray | None = None
    ) -> tuple[Any, np.ndarray, Any]:
        prob = self.problem
        if rows is None:
            if not prob.keeps_rows:
                raise ValueError("this model keeps no training rows (keep_data=False)")
            P = prob.rows[handles]
            return P, P @ self.beta, handles
        P = prob.features(rows)
        if np.may_share_memory(P, rows):
            P = P.copy()  # kept for later changes: not the caller's buffer
        return P, P @ self.beta, None

    def new_points(self, X: np.ndarray) -> tuple[Any, np.ndarray]:
        if self._raw:  # Φ = [X, s] is never formed: the scores from X and the constant
            return X, X @ self.beta[:-1] + self.const * self.beta[-1]
        P = self.map(X)
        return P, P @ self.beta

    def _put(self, slots, points, src):
        if src is not None:
            self.src[slots] = src
            return
        self.src[slots] = -1
        if self.rows is None:
            self.rows = np.empty((self.capacity, self.width))
        if points.shape[1] == self.width:
            self.rows[slots] = points
        else:  # raw X of Φ = [X, s]
            self.rows[slots, :-1] = points
            self.rows[slots, -1] = self.const

    def rows_of(self, slots: np.ndarray) -> np.ndarray:
        """Feature rows Φ of the entries in ``slots``."""
        src = self.src[slots]
        stored = src >= 0
        if stored.all():
            return self.problem.rows[src]
        out = self.rows[slots]
        if stored.any():
            out[stored] = self.problem.rows[src[stored]]
        return out

    def _update(self, slots, dc, c, points):
        if points is None:
            inc = dc @ self.rows_of(slots)
        elif points.shape[1] == self.width:
            inc = dc @ points
        else:  # raw X of Φ = [X, s]
            inc = np.empty(self.width)
            inc[:-1] = dc @ points
            inc[-1] = self.const * dc.sum()
        self.c[slots] = c
        old = self.dg
        new = old + inc
        if new @ new <= _CANCEL * _CANCEL * (math.sqrt(old @ old) + math.sqrt(inc @ inc)) ** 2:
            self._exact()
        else:
            self.dg = new

    def _zero(self):
        self.dg = np.zeros(self.width)

    def _exact(self):
        idx = np.flatnonzero(self.c[: self.hi])
        self.dg = self.c[idx] @ self.rows_of(idx) if idx.size else np.zeros(self.width)

    def map(self, X: np.ndarray) -> Any:
        return self.problem.features(X)

    def sq_norms(self, P: Any) -> np.ndarray:
        return np.einsum("ij,ij->i", P, P)

    def scores(self, P: Any) -> np.ndarray:
        return P @ self.dg

    def kernel(self, P: Any, slots: np.ndarray) -> np.ndarray:
        return P @ self.rows_of(slots).T

    def half_gradient(self, C1: float, C2: float) -> tuple[np.ndarray | None, float]:
        r = _ball.half_gradient(self.beta, self.dg, C1=C1, C2=C2)
        return r, float(np.sqrt(r @ r))

    def sphere(self, C1: float, C2: float, radius: float) -> Sphere:
        r, _ = self.half_gradient(C1, C2)
        return PrimalSphere(self.beta - r, radius, features=_Features(self.problem))


class KernelChanges(ChangedSamples):
    """Changed samples of a kernel model: the kernel matrix ``G`` of the entries and the
    running ``Q = ‖Δg‖² = cᵀ G c`` (see the module).

    Attributes
    ----------
    pts : ndarray of shape (capacity, n_features)
        The entries' raw rows.
    G : ndarray of shape (capacity, capacity)
    Q : float
    """

    def __init__(self, problem: Any, capacity: int = 0) -> None:
        super().__init__(problem, capacity)
        self.kw = self._score.kw
        cap = self.capacity
        self.pts = np.zeros((cap, problem.n_features_in))
        self.G = np.zeros((cap, cap))
        self.Q = 0.0
        self._beta_sq = None

    def _room(self, need):
        # the state is O(capacity²): grow it by half
        cap = self.capacity
        return max(need, 64 if cap == 0 else 0, cap + cap // 2)

    def _grow(self, cap):
        hi = self.hi
        super()._grow(cap)
        pts = np.zeros((cap, self.pts.shape[1]))
        pts[:hi] = self.pts[:hi]
        G = np.zeros((cap, cap))
        G[:hi, :hi] = self.G[:hi, :hi]
        self.pts, self.G = pts, G

    def model_points(
        self, handles: np.ndarray, rows: np.ndarray | None = None
    ) -> tuple[Any, np.ndarray, Any]:
        prob = self.problem
        z, _ = prob.scores(handles)
        return prob.rows[handles], z, handles

    def new_points(self, X: np.ndarray) -> tuple[Any, np.ndarray]:
        return X, self.beta_scores(X)

    def _put(self, slots, points, src):
        hi = self.hi
        self.pts[slots] = points
        K = kernel_rows(points, self.pts[:hi], **self.kw)
        self.G[slots, :hi] = K
        self.G[:hi, slots] = K.T

    def _update(self, slots, dc, c, points):
        G, hi = self.G, self.hi
        if len(slots) == 1:  # the per-sample path of the stream learners: no index grids
            s, d = slots[0], dc[0]
            cross = 2.0 * d * (G[s, :hi] @ self.c[:hi])
            own = d * d * G[s, s]
        else:
            cross = 2.0 * dc @ (G[slots, :hi] @ self.c[:hi])  # with the coefficients before
            own = dc @ G[np.ix_(slots, slots)] @ dc
        self.c[slots] = c
        Q = self.Q + cross + own
        # the running ‖Δg‖² cancels when a change undoes a large one (add an outlier, undo):
        # then it is recomputed exactly, O(n²)
        if Q > _CANCEL * (self.Q + abs(cross) + own):
            self.Q = Q
        else:
            self._exact()

    def _zero(self):
        self.Q = 0.0

    def _exact(self):
        hi = self.hi
        c = self.c[:hi]
        self.Q = float(c @ self.G[:hi, :hi] @ c)

    def map(self, X: np.ndarray) -> Any:
        return X

    def sq_norms(self, P: Any) -> np.ndarray:
        return kernel_diagonal(P, **self.kw)

    def scores(self, P: Any) -> np.ndarray:
        hi = self.hi
        if not hi:
            return np.zeros(P.shape[0])
        return kernel_rows(P, self.pts[:hi], **self.kw) @ self.c[:hi]

    def kernel(self, P: Any, slots: np.ndarray) -> np.ndarray:
        return kernel_rows(P, self.pts[slots], **self.kw)

    def _beta_sq_norm(self):
        if self._beta_sq is None:
            self._beta_sq = self.problem.solution_sq_norm()
        return self._beta_sq

    def half_gradient(self, C1: float, C2: float) -> tuple[np.ndarray | None, float]:
        r2 = _ball.sq_radius(
            self.Q,
            self.beta_dot() if C1 != C2 else 0.0,
            C1=C1,
            C2=C2,
            beta_sq=self._beta_sq_norm() if C1 != C2 else None,
        )
        return None, float(np.sqrt(max(r2, 0.0)))

    def sphere(self, C1: float, C2: float, radius: float) -> Sphere:
        """The center ``β₁ − r`` as a kernel expansion over the training points and the
        entries (Sivan et al. eq. 3)."""
        prob, hi = self.problem, self.hi
        A = prob.live
        beta = np.concatenate([prob.alpha[A], np.zeros(hi)])
        dg = np.concatenate([np.zeros(A.size), self.c[:hi]])
        center = beta - _ball.half_gradient(beta, dg, C1=C1, C2=C2)
        kfun, kdiag = prob.kernel_functions()
        return KernelSphere(center, np.vstack([prob.rows[A], self.pts[:hi]]), radius, kfun, kdiag)
