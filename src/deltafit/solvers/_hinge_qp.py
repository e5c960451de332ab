"""The hinge dual box QP ``min ½αᵀQα − Σα, 0 ≤ α_i ≤ C_i``, over each way of holding Q.

* :class:`_KernelQP` (a dense kernel matrix, ``Q = diag(y) K diag(y)``), its working-set
  restriction :class:`_SubKernelQP`, and :class:`_SlotKernelQP` (the live slots of a model's
  kernel matrix, read in place; with kept values ``K c``,
  :mod:`deltafit.solvers._kernel_values`, only the columns an update changes);
* :class:`_FeatureQP` (explicit features, LIBLINEAR's way: ``w = Σ α_i y_i Φ_i`` kept instead
  of Q), :class:`_SparseFeatureQP` (CSR rows) and their working-set restrictions
  :class:`SubFeatureQP`, :class:`_SubSparseFeatureQP`.

Each offers the gradient ``G = Qα − 1``, a coordinate-descent sweep (Hsieh et al., "A dual
coordinate descent method for large-scale linear SVM", ICML 2008, Alg. 1, one exact
coordinate minimisation :func:`_coordinate_min` per step), the face solves of the active-set
steps, and the magnitudes the rounding bounds need; :func:`box_violation` is the KKT
violation per coordinate.
"""

from __future__ import annotations

import numpy as np
import scipy.sparse as sp
from scipy import linalg

from deltafit.solvers._kernel_values import square

__all__ = ["box_violation", "SubFeatureQP"]

_EPS = np.finfo(np.float64).eps
_NO_SLOTS = np.zeros(0, dtype=np.intp)
_NO_FACTOR = np.zeros((0, 0))


def box_violation(alpha: np.ndarray, G: np.ndarray, C: float | np.ndarray) -> np.ndarray:
    """|projected gradient| of the minimised dual per coordinate (0 where KKT holds); ``C`` is
    the upper bound, a scalar or per coordinate."""
    v = np.abs(G)
    v[(alpha <= 0.0) & (G >= 0.0)] = 0.0
    v[(alpha >= C) & (G <= 0.0)] = 0.0
    return v


class _KernelQP:
    """The dual over a dense kernel matrix: ``Q = diag(y) K diag(y)``, gradient ``G = Qα − 1``
    kept up to date by the coordinate steps (an O(n) row update each)."""

    touched = 0  # coordinate visits (HingeResult.n_touched)

    def __init__(self, K, y):
        n = y.shape[0]
        Q = np.array(K, dtype=np.float64, order="C", copy=True)
        if Q.shape != (n, n):
            raise ValueError(f"K must have shape ({n}, {n}), got {Q.shape}")
        Q *= y[:, None]
        Q *= y[None, :]
        self.Q, self.y, self.n = Q, y, n
        self.diag = np.diag(Q).copy()
        self.G = None

    def refresh(self, alpha):
        """G = Qα − 1 from scratch (no accumulated rounding)."""
        nz = np.flatnonzero(alpha)
        self.G = (alpha[nz] @ self.Q[nz] if nz.size else np.zeros(self.n)) - 1.0

    def cd_pass(self, alpha, order, C):
        """One coordinate-descent sweep (Hsieh et al. 2008, Alg. 1) over ``order``; ``C`` holds
        the upper bound of each coordinate."""
        from scipy.linalg.blas import daxpy

        Q, G, diag = self.Q, self.G, self.diag
        ub = C.tolist()
        self.touched += order.size
        for i in order.tolist():
            a = alpha[i]
            na = _coordinate_min(a, G[i], diag[i], ub[i])
            if na != a:
                alpha[i] = na
                daxpy(Q[i], G, a=na - a)

    def face_step(self, F, G_F, mu=0.0):
        """``d`` solving ``(Q_FF + μI) d = −G_F`` (for μ = 0 the minimum-norm solution), the
        part of ``−G_F`` in the null space of ``Q_FF`` (zero when μ > 0 or Q_FF is numerically
        positive definite) and ``v ↦ Q_FF v``."""
        A = self.Q[F][:, F]
        r = -G_F
        if mu > 0.0:
            B = A.copy()
            B.flat[:: F.size + 1] += mu
            try:
                return (
                    linalg.cho_solve(
                        (linalg.cholesky(B, lower=True, check_finite=False), True),
                        r,
                        check_finite=False,
                    ),
                    np.zeros_like(r),
                    A.__matmul__,
                )
            except linalg.LinAlgError:
                pass
        top = float(np.max(np.abs(np.diag(A)))) if F.size else 0.0
        try:
            L = linalg.cholesky(A, lower=True, check_finite=False)
            piv = np.diag(L)
            if piv.min() ** 2 > 64.0 * F.size * _EPS * max(top, np.finfo(float).tiny):
                d = linalg.cho_solve((L, True), r, check_finite=False)
                return d, np.zeros_like(r), A.__matmul__
        except linalg.LinAlgError:
            pass
        lam, V = linalg.eigh(A, check_finite=False)
        keep = lam > max(lam[-1], 0.0) * 64.0 * F.size * _EPS
        Vk = V[:, keep]
        c = Vk.T @ r
        return Vk @ (c / lam[keep]), r - Vk @ c, A.__matmul__

    def move(self, F, d):
        from scipy.linalg.blas import daxpy

        if F.size == 1:
            daxpy(self.Q[F[0]], self.G, a=float(d[0]))
        else:
            self.G += d @ self.Q[F]

    def scale(self, alpha):
        """``(|Q| α)_i`` — the magnitude of the terms summed into G_i (for rounding bounds)."""
        nz = np.flatnonzero(alpha)
        return alpha[nz] @ np.abs(self.Q[nz]) if nz.size else np.zeros(self.n)

    def sq_norm(self, u):
        """‖Σ_i u_i y_i Φ(x_i)‖² (RKHS)."""
        return float(max(u @ (self.Q @ u), 0.0))

    def coef(self, alpha):
        return self.y * alpha + 0.0  # no negative zeros

    def coef_rounding(self, alpha):
        return 0.0  # y_i α_i is exact

    def gamma(self):
        return (self.n + 2) * _EPS / (1.0 - (self.n + 2) * _EPS)

    def restrict(self, S, alpha):
        """The QP over the variables ``S`` with the others fixed at ``alpha``
        (:func:`_hinge_warm`)."""
        rest = np.setdiff1d(np.flatnonzero(alpha), S, assume_unique=True)
        Qr = self.Q[np.ix_(rest, S)]
        return _SubKernelQP(
            self.Q[np.ix_(S, S)], self.y[S], alpha[rest] @ Qr, alpha[rest] @ np.abs(Qr)
        )

    def full(self):
        return self


class _SubKernelQP(_KernelQP):
    """:class:`_KernelQP` over a working set S: ``G_S = Q_SS α_S + o − 1`` with ``o`` the
    fixed variables' part of ``(Qα)_S`` and ``s0`` their part of :meth:`scale`."""

    def __init__(self, Q, y, offset, s0, nonneg=False, reuse=False):
        self.Q, self.y, self.n = np.ascontiguousarray(Q), y, y.shape[0]
        self.diag = np.diag(self.Q).copy()
        self.o, self.s0 = offset, s0
        self.G = None
        #: the kernel has no negative entry: ``|Q| α = y ∘ (Q (y ∘ α))`` (no |Q| formed)
        self.nonneg = bool(nonneg)
        #: solve a face near the last one factorised through that factor (:meth:`_near_step`)
        self.reuse = bool(reuse)
        #: (B, L, slots of B): the last face factorised, Q_BB = L Lᵀ (B: positions, −1 for a
        #: member outside this QP; slots: the model's, when known)
        self._base = None
        self.slots = None  # the model's slots of the variables (kept values)

    def face_step(self, F, G_F, mu=0.0):
        if not self.reuse or mu > 0.0:
            return super().face_step(F, G_F, mu)
        if self._base is not None:
            out = self._near_step(F, G_F)
            if out is not None:
                return out
        A = self.Q[F][:, F]
        top = float(np.max(np.abs(np.diag(A)))) if F.size else 0.0
        try:
            L = linalg.cholesky(A, lower=True, check_finite=False)
            piv = np.diag(L)
            if piv.min() ** 2 > 64.0 * F.size * _EPS * max(top, np.finfo(float).tiny):
                self._base = (F.copy(), L, None if self.slots is None else self.slots[F])
                d = linalg.cho_solve((L, True), -G_F, check_finite=False)
                return d, np.zeros_like(d), A.__matmul__
        except linalg.LinAlgError:
            pass
        self._base = None
        return super().face_step(F, G_F, mu)  # a singular face: the minimum-norm solution

    def _face_mul(self, F):
        """``v ↦ Q_FF v`` through the whole (small) matrix, without forming Q_FF."""

        def mul(v):
            full = np.zeros(self.n)
            full[F] = v
            return (full @ self.Q)[F]

        return mul

    def _near_step(self, F, G_F):
        """``Q_FF d = −G_F`` from the factor of the last face B, when F differs from it by a
        few variables (``F = (B \\ D) ∪ E``): the dropped ones held at 0 by multipliers, the
        new ones bordered on, a Schur complement of size ``|D| + |E|`` (bordering and
        deletion by the factor of B: Gill, Golub, Murray & Saunders 1974, the block form).
        B may hold members outside this QP (position −1: a factor kept from the last update,
        whose removed samples are dropped like the others; their rows of ``Q_BE`` only set
        their multipliers, and are taken as 0).  None when F is too far from B or the solve
        is not accurate (the caller factorises F afresh)."""
        B, L = self._base[0], self._base[1]
        real = B >= 0
        where = np.full(self.n, -1, dtype=np.intp)
        where[B[real]] = np.flatnonzero(real)
        posF = where[F]
        inB = posF >= 0
        E = F[~inB]
        inF = np.zeros(self.n, dtype=bool)
        inF[F] = True
        drop = np.flatnonzero(~real | ~inF[np.maximum(B, 0)])
        m = E.size + drop.size
        if m > min(64, B.size // 4):
            return None
        pos = posF[inB]
        r = -G_F
        rB = np.zeros(B.size)
        rB[pos] = r[inB]
        W = np.zeros((B.size, m))
        if E.size:
            W[real, : E.size] = self.Q[B[real]][:, E]
        W[drop, E.size + np.arange(drop.size)] = 1.0
        Y = linalg.solve_triangular(L, W, lower=True, check_finite=False)
        u = linalg.solve_triangular(L, rB, lower=True, check_finite=False)
        Sc = -(Y.T @ Y)
        if E.size:
            Sc[: E.size, : E.size] += self.Q[E][:, E]
        rhs = -(Y.T @ u)
        rhs[: E.size] += r[~inB]
        try:
            z = np.linalg.solve(Sc, rhs) if m else rhs
        except np.linalg.LinAlgError:
            return None
        xB = linalg.solve_triangular(L, u - Y @ z, lower=True, trans="T", check_finite=False)
        d = np.empty(F.size)
        d[inB] = xB[pos]
        d[~inB] = z[: E.size]
        mul = self._face_mul(F)
        res = mul(d) - r
        if not np.all(np.isfinite(d)) or np.linalg.norm(res) > 1e-10 * (
            np.linalg.norm(r) + float(np.max(np.abs(self.diag[F]))) * np.linalg.norm(d)
        ):
            return None
        return d, np.zeros_like(d), mul

    def refresh(self, alpha):
        # the whole (small) matrix times α: no copy of the rows of the nonzero α
        self.G = alpha @ self.Q - 1.0
        self.G += self.o

    def scale(self, alpha):
        if self.nonneg:
            return self.s0 + np.maximum(self.y * (self.Q @ (self.y * alpha)), 0.0)
        return self.s0 + super().scale(alpha)

    def move(self, F, d):
        if F.size > 1 and 4 * F.size > self.n:
            # a large face: one product with the whole (small) matrix, no copy of its rows
            full = np.zeros(self.n)
            full[F] = d
            self.G += full @ self.Q
        else:
            super().move(F, d)


class _SlotKernelQP:
    """The dual over the live slots ``A`` of a kernel matrix kept by slot (``K``:
    capacity × capacity, read in place, never copied whole): the full gradient
    ``G = y ∘ K_AA (y ∘ α) − 1`` is one matrix-vector product over the slots, or, with kept
    values (``values``), the kept ``K c`` moved by the columns of the coefficients that
    changed; the working sets read their rows (:meth:`restrict`; with kept values, only the
    columns not cached, and their faces are solved through the factor of the last one:
    :class:`_SubKernelQP` ``reuse``).  ``nonneg``: K has no negative entry (RBF,
    Laplacian, ...), so ``|K| α = K α``."""

    touched = 0

    def __init__(self, K, A, y, nonneg, values=None):
        self.K, self.A, self.y, self.n = K, np.asarray(A, dtype=np.intp), y, y.shape[0]
        if self.A.shape != (self.n,):
            raise ValueError(f"{self.A.size} slots for {self.n} labels")
        self.nonneg = bool(nonneg)
        self.diag = np.asarray(K[self.A, self.A], dtype=np.float64)  # y_i² = 1
        self.G = None
        self._scale = None  # (α, |Q|α) from the last refresh (nonneg: the same pass)
        #: the kept values K c by slot (:class:`~deltafit.solvers._kernel_values.KernelValues`),
        #: moved by the columns of the changed coefficients at each refresh; None: a fresh
        #: product over the live slots at each refresh
        self.values = values
        self._last = None  # (slots, Q_SS, y_S) of the last working set (kept values)
        self._sub = None  # the last working set's QP (kept values: its factor goes on)

    def _refresh_kept(self, alpha):
        """G and the magnitudes from the kept values, moved to ``alpha`` by the columns of the
        coefficients that changed since (O(capacity · #changed)); the magnitudes carry the
        bound of the rounding the kept sums accumulated (:meth:`scale` times :meth:`gamma`
        bounds the error of G, as for a fresh product)."""
        vals = self.values
        coef = np.zeros(vals.capacity)
        coef[self.A] = self.y * alpha
        vals.move_to(self.K, coef)
        self.G = self.y * vals.f[self.A] - 1.0
        g = self.gamma()
        self._scale = (alpha.copy(), vals.s[self.A] + vals.err[self.A] / g)

    def _mul(self, c):
        """``K_AA c`` (the inactive slots' columns multiplied by 0); ``c`` a vector, or rows
        of vectors (one pass over the matrix for all of them)."""
        c = np.atleast_2d(c)
        v = np.zeros((c.shape[0], self.K.shape[0]))
        v[:, self.A] = c
        return (v @ self.K)[:, self.A]  # K symmetric on the live slots

    def refresh(self, alpha):
        if self.values is not None:
            self._refresh_kept(alpha)
            return
        if self.nonneg:
            P = self._mul(np.stack([self.y * alpha, alpha]))
            self.G = self.y * P[0] - 1.0
            self._scale = (alpha.copy(), P[1])
        else:
            self.G = self.y * self._mul(self.y * alpha)[0] - 1.0

    def scale(self, alpha):
        if self._scale is not None and (self.nonneg or self.values is not None):
            if np.array_equal(self._scale[0], alpha):
                return self._scale[1]
        if self.values is not None:
            self._refresh_kept(alpha)
            return self._scale[1]
        if self.nonneg:
            return self._mul(alpha)[0]
        nz = np.flatnonzero(alpha)
        return np.abs(self.K[np.ix_(self.A, self.A[nz])]) @ alpha[nz]

    def sq_norm(self, u):
        return float(max(u @ (self.y * self._mul(self.y * u)[0]), 0.0))

    def coef(self, alpha):
        return self.y * alpha + 0.0

    def coef_rounding(self, alpha):
        return 0.0

    def gamma(self):
        return (self.n + 2) * _EPS / (1.0 - (self.n + 2) * _EPS)

    def restrict(self, S, alpha):
        AS, yS = self.A[S], self.y[S]
        if self.values is not None:
            # the kept values: G and |Q|α are current at alpha (every refresh moves them)
            if self._scale is None or not np.array_equal(self._scale[0], alpha):
                self._refresh_kept(alpha)
            aS = alpha[S]
            QS = self.values.cached_block(self.K, AS)
            own = np.abs(QS) @ aS if not self.nonneg else QS @ aS  # |Q_SS| α_S
            QS *= yS[:, None]
            QS *= yS[None, :]
            self._last = (AS, QS, yS)  # Q_SS (not changed in place): the next solve's cache
            sub = _SubKernelQP(
                QS,
                yS,
                self.G[S] + 1.0 - QS @ aS,
                np.maximum(self._scale[1][S] - own, 0.0),
                self.nonneg,
                reuse=True,
            )
            sub.slots = AS
            vals = self.values
            if self._sub is not None and self._sub._base is not None:
                base = self._sub._base  # the last working set's factor
            elif vals.face_L_slots.size:
                base = (None, vals.face_L, vals.face_L_slots)  # the last update's
            else:
                base = None
            if base is not None and base[2] is not None:
                where = np.full(self.K.shape[0], -1, dtype=np.intp)
                where[AS] = np.arange(AS.size)
                ok = base[2] >= 0  # −1: a member whose slot is gone (compaction)
                sub._base = (np.where(ok, where[np.maximum(base[2], 0)], -1), base[1], base[2])
            self._sub = sub
            return sub
        rest = np.setdiff1d(np.flatnonzero(alpha), S, assume_unique=True)
        QS = self.K[:, AS][AS] * yS[:, None] * yS[None, :]
        if self.nonneg and self._scale is not None and np.array_equal(self._scale[0], alpha):
            # the fixed variables' part of (Qα)_S and of (|Q|α)_S from the last refresh (no
            # pass over the matrix): G_S + 1 and |Q|α minus the working set's own part
            aS = alpha[S]
            return _SubKernelQP(
                QS,
                yS,
                self.G[S] + 1.0 - QS @ aS,
                np.maximum(self._scale[1][S] - np.abs(QS) @ aS, 0.0),
            )
        Kr = self.K[np.ix_(self.A[rest], AS)]
        return _SubKernelQP(
            QS, yS, yS * ((self.y[rest] * alpha[rest]) @ Kr), alpha[rest] @ np.abs(Kr)
        )

    def order(self, S):
        """``S`` reordered for :meth:`restrict` (kept values: the cached slots first)."""
        if self.values is None:
            return S
        return S[self.values.cached_first(self.A[S])]

    def keep_face(self, free):
        """Cache the kernel values of the free set ``free`` (positions) in the kept values,
        from the last working set's block (the next update's first face)."""
        if self.values is None:
            return
        free = np.sort(self.A[free])
        if self._last is not None:
            AS, QS, yS = self._last
            order = np.argsort(AS, kind="stable")
            pos = np.minimum(np.searchsorted(AS[order], free), max(AS.size - 1, 0))
            if AS.size and np.array_equal(AS[order[pos]], free):
                p = order[pos]
                KF = square(QS, p)  # y_i y_j k_ij: the signs undone exactly
                KF *= yS[p][:, None]
                KF *= yS[p][None, :]
                self.values.face_slots, self.values.face_K = free, KF
                self._keep_factor()
                return
        self.values.keep_face(np.zeros(0, dtype=np.intp))
        self._keep_factor()

    def _keep_factor(self):
        """Keep the last working set's face factor (and its members' slots) for the next
        update's first face solve."""
        base = None if self._sub is None else self._sub._base
        if base is None or base[2] is None:
            self.values.face_L_slots, self.values.face_L = _NO_SLOTS, _NO_FACTOR
        else:
            self.values.face_L_slots, self.values.face_L = base[2], base[1]

    def full(self):
        return _KernelQP(self.K[:, self.A][self.A], self.y)


class _FeatureQP:
    """The dual over explicit features, LIBLINEAR's way (Hsieh et al. 2008): the primal vector
    ``w = Σ α_i y_i Φ_i`` is kept instead of Q, so a coordinate step costs O(p) and memory is
    O(n p); ``G = y ∘ (Φ w) − 1`` is recomputed after each sweep."""

    touched = 0  # coordinate visits (HingeResult.n_touched)
    _abs = None

    def __init__(self, Phi, y):
        Z = np.array(Phi, dtype=np.float64, order="C", copy=True)
        if Z.ndim != 2 or Z.shape[0] != y.shape[0]:
            raise ValueError(f"Phi must have shape ({y.shape[0]}, p), got {Z.shape}")
        Z *= y[:, None]
        self.Z, self.y = Z, y
        self.n, self.p = Z.shape
        self.diag = np.einsum("ij,ij->i", Z, Z)
        self.w = np.zeros(self.p)
        self.G = None

    def refresh(self, alpha):
        nz = np.flatnonzero(alpha)
        self.w = alpha[nz] @ self.Z[nz] if nz.size else np.zeros(self.p)
        self.G = self.Z @ self.w - 1.0

    def cd_pass(self, alpha, order, C):
        from scipy.linalg.blas import daxpy

        Z, w, diag = self.Z, self.w, self.diag
        ub = C.tolist()
        self.touched += order.size
        for i in order.tolist():
            zi = Z[i]
            a = alpha[i]
            na = _coordinate_min(a, zi @ w - 1.0, diag[i], ub[i])
            if na != a:
                alpha[i] = na
                daxpy(zi, w, a=na - a)
        self.G = Z @ w - 1.0

    def face_step(self, F, G_F, mu=0.0):
        """As :meth:`_KernelQP.face_step`, from the SVD of the rows ``y_F ∘ Φ_F`` (Q_FF is
        never formed, so its conditioning is not squared)."""
        ZF = self._dense_rows(F)
        U, sv, _ = linalg.svd(ZF, full_matrices=False, check_finite=False)
        r = -G_F

        def Qmul(v):
            return ZF @ (v @ ZF)

        if mu > 0.0:
            c = U.T @ r
            return U @ (c / (sv**2 + mu)) + (r - U @ c) / mu, np.zeros_like(r), Qmul
        if sv.size == 0 or sv[0] == 0.0:
            return np.zeros_like(r), r, Qmul
        keep = sv > sv[0] * max(ZF.shape) * _EPS * 8.0
        Uk = U[:, keep]
        c = Uk.T @ r
        return Uk @ (c / sv[keep] ** 2), r - Uk @ c, Qmul

    def _dense_rows(self, F):
        return self.Z[F]

    def move(self, F, d):
        self.w += d @ self.Z[F]
        self.G = self.Z @ self.w - 1.0

    def abs_rows(self):
        """``|Z|`` (computed once)."""
        if self._abs is None:
            self._abs = np.abs(self.Z)
        return self._abs

    def scale(self, alpha):
        """An upper bound on ``Σ_j |q_ij| α_j`` through ``|Φ|``."""
        absZ = self.abs_rows()
        return absZ @ (alpha @ absZ)

    def restrict(self, S, alpha):
        """The QP over the variables ``S`` with the others fixed at ``alpha`` (``self.w``
        current): their part of w and of ``|Z|ᵀα`` enter as constants."""
        ZS, aS = self._rows(S), alpha[S]
        v0 = np.maximum(self.abs_rows().T @ alpha - abs(ZS).T @ aS, 0.0)
        return self._sub(ZS, self.y[S], self.w - ZS.T @ aS, v0)

    def _rows(self, S):
        return self.Z[S]

    @staticmethod
    def _sub(ZS, yS, w0, v0):
        return SubFeatureQP(ZS, yS, w0, v0)

    def full(self):
        return self

    def sq_norm(self, u):
        v = u @ self.Z
        return float(v @ v)

    def coef(self, alpha):
        nz = np.flatnonzero(alpha)
        return alpha[nz] @ self.Z[nz] if nz.size else np.zeros(self.p)

    def coef_rounding(self, alpha):
        g = (self.n + 2) * _EPS / (1.0 - (self.n + 2) * _EPS)
        return g * float(np.linalg.norm(alpha @ self.abs_rows()))

    def gamma(self):
        m = self.n + self.p + 4
        return m * _EPS / (1.0 - m * _EPS)


class SubFeatureQP(_FeatureQP):
    """:class:`_FeatureQP` over a working set S: ``w = w0 + Σ_{i∈S} α_i z_i`` with ``w0``
    the fixed variables' part, ``v0`` their part of ``|Z|ᵀα`` (for :meth:`scale`)."""

    def __init__(self, ZS: np.ndarray, yS: np.ndarray, w0: np.ndarray, v0: np.ndarray) -> None:
        self.Z, self.y = ZS, yS
        self.n, self.p = ZS.shape
        self.diag = np.einsum("ij,ij->i", ZS, ZS)
        self.w0, self.v0 = w0, v0
        self.w, self.G = w0.copy(), None

    def refresh(self, alpha: np.ndarray) -> None:
        nz = np.flatnonzero(alpha)
        self.w = self.w0 + alpha[nz] @ self.Z[nz] if nz.size else self.w0.copy()
        self.G = self.Z @ self.w - 1.0

    def scale(self, alpha: np.ndarray) -> np.ndarray:
        absZ = self.abs_rows()
        return absZ @ (self.v0 + alpha @ absZ)


class _SparseFeatureQP(_FeatureQP):
    """:class:`_FeatureQP` over sparse rows (CSR): the same dual coordinate descent and face
    solves, through sparse row products (a coordinate step costs O(nnz of its row)); the rows
    of a free set are densified for its SVD."""

    def __init__(self, Phi, y):
        Z = sp.csr_matrix(Phi, dtype=np.float64, copy=True)
        if Z.shape[0] != y.shape[0]:
            raise ValueError(f"Phi must have shape ({y.shape[0]}, p), got {Z.shape}")
        Z.sum_duplicates()
        Z.sort_indices()
        Z.data *= np.repeat(y, np.diff(Z.indptr))  # row i times y_i
        self.Z, self.y = Z, y
        self.n, self.p = Z.shape
        self.diag = np.asarray(Z.multiply(Z).sum(axis=1), dtype=np.float64).ravel()
        self.absZ = abs(Z)
        self.w = np.zeros(self.p)
        self.G = None

    def refresh(self, alpha):
        self.w = self.coef(alpha)
        self.G = self.Z @ self.w - 1.0

    def cd_pass(self, alpha, order, C):
        Z, w, diag = self.Z, self.w, self.diag
        ptr, ind, val = Z.indptr, Z.indices, Z.data
        ub = C.tolist()
        self.touched += order.size
        for i in order.tolist():
            lo, hi = ptr[i], ptr[i + 1]
            cols, zi = ind[lo:hi], val[lo:hi]
            a = alpha[i]
            na = _coordinate_min(a, float(zi @ w[cols]) - 1.0, diag[i], ub[i])
            if na != a:
                alpha[i] = na
                w[cols] += (na - a) * zi
        self.G = Z @ w - 1.0

    def _dense_rows(self, F):
        return self.Z[F].toarray()

    def move(self, F, d):
        self.w += self.Z[F].T @ d
        self.G = self.Z @ self.w - 1.0

    def scale(self, alpha):
        return self.absZ @ (self.absZ.T @ alpha)

    def abs_rows(self):
        return self.absZ

    def _rows(self, S):
        return self.Z[S]

    @staticmethod
    def _sub(ZS, yS, w0, v0):
        return _SubSparseFeatureQP(ZS, yS, w0, v0)

    def sq_norm(self, u):
        v = self.Z.T @ u
        return float(v @ v)

    def coef(self, alpha):
        nz = np.flatnonzero(alpha)
        return self.Z[nz].T @ alpha[nz] if nz.size else np.zeros(self.p)

    def coef_rounding(self, alpha):
        g = (self.n + 2) * _EPS / (1.0 - (self.n + 2) * _EPS)
        return g * float(np.linalg.norm(self.absZ.T @ alpha))


class _SubSparseFeatureQP(_SparseFeatureQP):
    """:class:`SubFeatureQP` over sparse rows."""

    def __init__(self, ZS, yS, w0, v0):
        self.Z, self.y = ZS, yS
        self.n, self.p = ZS.shape
        self.diag = np.asarray(ZS.multiply(ZS).sum(axis=1), dtype=np.float64).ravel()
        self.absZ = abs(ZS)
        self.w0, self.v0 = w0, v0
        self.w, self.G = w0.copy(), None

    def refresh(self, alpha):
        self.w = self.w0 + self.Z.T @ alpha
        self.G = self.Z @ self.w - 1.0

    def scale(self, alpha):
        return self.absZ @ (self.v0 + self.absZ.T @ alpha)


def _coordinate_min(a, g, q, C):
    """Exact minimiser over ``[0, C]`` of the dual in one coordinate (Hsieh et al. 2008):
    ``a`` unchanged when its KKT condition holds, else ``clip(a − g/q, 0, C)`` (a bound when the
    curvature ``q`` vanishes)."""
    if (a <= 0.0 and g >= 0.0) or (a >= C and g <= 0.0) or g == 0.0:
        return a
    if q <= 0.0:
        return C if g < 0.0 else 0.0
    return min(max(a - g / q, 0.0), C)
