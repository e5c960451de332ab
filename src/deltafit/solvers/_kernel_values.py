"""The values ``K c`` of a kernel expansion by ledger slot, kept current by the columns of the
coefficients that change (:class:`KernelValues`).

A warm re-solve of the kernel hinge dual after a data change (:func:`~deltafit.solvers.
hinge_kernel_slots`) needs the gradient ``G = y ∘ (K c) − 1`` of every live sample, where
``c = y ∘ α`` are the expansion coefficients.  A fresh product costs a pass over the whole
``capacity × capacity`` matrix; after a change that moves few coefficients, ``K c`` moves by
``K[:, changed] Δc``: O(capacity · #changed) instead of O(capacity²) (the way LIBSVM keeps its
gradient, Chang & Lin, "LIBSVM: a library for support vector machines", §4.1).  The rounding
such sums accumulate is bounded per slot (``err``) and handed to the certificates through the
magnitudes ``|K| |c|`` (``scale``), so that a re-solve on kept values is certified as one on a
fresh product; :meth:`KernelValues.stale` says when a fresh pass is due.  The kernel values
of the last solve's free set are cached with them (``face_slots``, ``face_K``): the next
working set reads from K only the columns it does not hold.
"""

from __future__ import annotations

import contextlib

import numpy as np

__all__ = ["KernelValues", "columns_times", "block", "square", "one_blas_thread"]

_EPS = np.finfo(np.float64).eps
_U = _EPS / 2.0  # unit roundoff


def _gamma(k: int) -> float:
    """Higham's ``γ_k = k u / (1 − k u)``: the relative error bound of a k-term sum."""
    return k * _U / (1.0 - k * _U)


_CONTROLLER: list = []  # the threadpoolctl controller, made once (a few ms)


def one_blas_thread() -> contextlib.AbstractContextManager:
    """A context in which BLAS runs on one thread (threadpoolctl, a dependency of
    scikit-learn; a no-op without it).  An update's products are small or memory-bound
    (a few hundred columns, faces of a few hundred): threads gain nothing there, and on a
    loaded machine each threaded call waits for its threads to be scheduled.  The limit is
    process-wide while the context lasts, as scikit-learn's own limits are."""
    try:
        return _controller().limit(limits=1, user_api="blas")
    except Exception:  # noqa: BLE001 - any failure of the optional limit: run as is
        return contextlib.nullcontext()


def _controller():
    """threadpoolctl's controller of the loaded BLAS libraries, made once (a few ms: a
    state's first :class:`KernelValues`, at its fit, makes it)."""
    if not _CONTROLLER:
        from threadpoolctl import ThreadpoolController

        _CONTROLLER.append(ThreadpoolController())
    return _CONTROLLER[0]


#: columns read at a time: a chunk (capacity × 64) stays in cache between its gather and its
#: product (≈ 3× faster than gathering all the columns first at capacity 5,000)
_CHUNK = 64


def columns_times(
    K: np.ndarray, cols: np.ndarray, V: np.ndarray, V_abs: np.ndarray | None = None
) -> np.ndarray:
    """``K[:, cols] @ V`` (and ``|K[:, cols]| @ V_abs`` as further columns), reading the
    columns a chunk at a time into one buffer (K column-major: its columns are the rows of
    ``K.T``)."""
    KT = K.T
    k = V.shape[1]
    m = k + (0 if V_abs is None else V_abs.shape[1])
    out = np.zeros((m, K.shape[0]))
    buf = np.empty((min(_CHUNK, cols.size), K.shape[0]))
    for i in range(0, cols.size, _CHUNK):
        idx = cols[i : i + _CHUNK]
        rows = buf[: idx.size]
        np.take(KT, idx, axis=0, out=rows, mode="clip")  # the indices are valid slots
        out[:k] += V[i : i + _CHUNK].T @ rows
        if V_abs is not None:
            out[k:] += V_abs[i : i + _CHUNK].T @ np.abs(rows)
    return out.T


def block(K: np.ndarray, rows: np.ndarray, cols: np.ndarray) -> np.ndarray:
    """``K[rows][:, cols]`` of a column-major K, reading the columns a chunk at a time into
    one buffer."""
    KT = K.T
    out = np.empty((rows.size, cols.size))
    buf = np.empty((min(_CHUNK, cols.size), K.shape[0]))
    for i in range(0, cols.size, _CHUNK):
        idx = cols[i : i + _CHUNK]
        chunk = buf[: idx.size]
        np.take(KT, idx, axis=0, out=chunk, mode="clip")
        out[:, i : i + idx.size] = chunk[:, rows].T
    return out


def square(M: np.ndarray, idx: np.ndarray, out: np.ndarray | None = None) -> np.ndarray:
    """``M[idx][:, idx]`` (into ``out`` when given); when ``idx`` is a few runs of
    consecutive indices (a cached face less a few samples), copied block by block in one
    pass instead of two gathers."""
    idx = np.asarray(idx, dtype=np.intp)
    if out is None:
        out = np.empty((idx.size, idx.size))
    if not idx.size:
        return out
    cut = np.flatnonzero(np.diff(idx) != 1) + 1
    if cut.size > 8:
        out[...] = M[idx][:, idx]
        return out
    starts = np.concatenate([[0], cut])
    ends = np.concatenate([cut, [idx.size]])
    for a, b in zip(starts.tolist(), ends.tolist()):
        for c, d in zip(starts.tolist(), ends.tolist()):
            out[a:b, c:d] = M[idx[a] : idx[a] + b - a, idx[c] : idx[c] + d - c]
    return out


class KernelValues:
    """``f = K c`` and ``s = |K| |c|`` by slot for the coefficients ``c`` by slot, with ``err``
    a bound on ``|f − K c|`` (exact arithmetic on the stored K and c) beyond ``γ_N s``
    (``N`` the capacity: the bound of a fresh product), per slot.

    Parameters
    ----------
    K : ndarray of shape (capacity, capacity)
        The kernel matrix by slot (read, never written).
    coef : ndarray of shape (capacity,)
        The coefficients (0 on the slots not in the expansion).
    nonneg : bool
        K has no negative entry (then ``|K| = K``: one pass gives f and s).
    """

    #: a cache of kernel values: ``face_K = K[face_slots][:, face_slots]`` (sorted slots) for
    #: the free set of the last solve, where the next one starts (entries of K, no rounding;
    #: the arrays are replaced, never changed in place)
    face_slots = np.zeros(0, dtype=np.intp)
    face_K = np.zeros((0, 0))
    #: the Cholesky factor ``face_L`` of ``Q_BB`` (``y_i y_j k_ij``) of the last face solved
    #: from scratch, B the slots ``face_L_slots`` in its order (−1: a slot gone): the next
    #: update's faces near it are solved through it (a relabel drops it: Q's signs change)
    face_L_slots = np.zeros(0, dtype=np.intp)
    face_L = np.zeros((0, 0))

    def __init__(self, K: np.ndarray, coef: np.ndarray, nonneg: bool) -> None:
        self.nonneg = bool(nonneg)
        self.coef = np.array(coef, dtype=np.float64, copy=True)
        a = np.abs(self.coef)
        if self.nonneg:
            P = K @ np.stack([self.coef, a], axis=1)
            self.f, self.s = P[:, 0].copy(), P[:, 1].copy()
        else:
            self.f, self.s = K @ self.coef, np.abs(K) @ a
        self.err = np.zeros(self.coef.shape[0])
        self.n_columns = 0  # columns read since the fresh product
        with contextlib.suppress(Exception):
            _controller()  # made now rather than inside an update's clock

    @property
    def capacity(self) -> int:
        return self.coef.shape[0]

    def copy(self) -> KernelValues:
        """An independent copy (what an update works on, so that a failed one leaves the
        stored values as they were)."""
        new = object.__new__(KernelValues)
        new.nonneg, new.n_columns = self.nonneg, self.n_columns
        new.face_slots, new.face_K = self.face_slots, self.face_K  # never changed in place
        new.face_L_slots, new.face_L = self.face_L_slots, self.face_L
        new.coef, new.f, new.s, new.err = (
            self.coef.copy(),
            self.f.copy(),
            self.s.copy(),
            self.err.copy(),
        )
        return new

    def gamma(self) -> float:
        """The relative bound of a fresh product's sums (``γ_{N+2}``)."""
        return _gamma(self.capacity + 2)

    def move_to(self, K: np.ndarray, coef: np.ndarray) -> None:
        """Make the values those of ``coef`` (by slot) through the columns of the slots whose
        coefficient changed; ``err`` grows by the bound of what was summed."""
        d = coef - self.coef
        ch = np.flatnonzero(d)
        if not ch.size:
            return
        dc = d[ch]
        da = np.abs(coef[ch]) - np.abs(self.coef[ch])
        if self.nonneg:
            P = columns_times(K, ch, np.stack([dc, da, np.abs(dc)], axis=1))
        else:
            P = columns_times(K, ch, dc[:, None], np.stack([da, np.abs(dc)], axis=1))
        df, ds, dabs = P[:, 0], P[:, 1], P[:, 2]
        self.f = self.f + df
        self.s = np.maximum(self.s + ds, 0.0)
        # the product's terms and the sums of its chunks (γ_{2k}), the magnitudes it may have
        # removed from s (γ_N: the fresh product's bound is taken on today's s) and the sum
        # into f (u |f|)
        self.err = (
            self.err
            + (self.gamma() + _gamma(2 * ch.size + 2)) * dabs
            + _U * (np.abs(self.f) + np.abs(df))
        )
        self.coef = np.array(coef, dtype=np.float64, copy=True)
        self.n_columns += ch.size

    def stale(self) -> bool:
        """Whether the accumulated bound has reached the fresh product's (then the next
        update starts from a fresh pass: the certificates stay within twice a fresh one's)."""
        g = self.gamma()
        return bool(
            np.max(self.err, initial=0.0) > g * max(float(np.max(self.s, initial=0.0)), 1.0)
        )

    def grown(self, capacity: int) -> KernelValues:
        """The values padded to a larger capacity (new slots: no coefficient, values 0; they
        are written by :meth:`set_rows` once their kernel values are known)."""
        if capacity <= self.capacity:
            return self
        new = self.copy()
        for name in ("coef", "f", "s", "err"):
            a = np.zeros(capacity)
            a[: self.capacity] = getattr(self, name)
            setattr(new, name, a)
        return new

    def set_rows(self, slots: np.ndarray, K_rows_T: np.ndarray) -> None:
        """The values at ``slots`` (new samples) from their kernel values against every slot
        (``K_rows_T``: capacity × k, column j the kernel values of ``slots[j]``)."""
        if not len(slots):
            return
        c, a = self.coef, np.abs(self.coef)
        Kt = np.asarray(K_rows_T)
        self.f[slots] = c @ Kt
        self.s[slots] = a @ (Kt if self.nonneg else np.abs(Kt))
        self.err[slots] = 0.0  # a fresh product's sums, bounded by γ_N s
        self.keep_face(np.setdiff1d(self.face_slots, slots))  # their kernel values changed
        hit = np.isin(self.face_L_slots, slots)  # new samples in the factor's gone slots
        if hit.any():
            self.face_L_slots = np.where(hit, -1, self.face_L_slots)

    def taken(self, keep: np.ndarray, capacity: int) -> KernelValues:
        """The values of the slots ``keep`` moved to the front (the ledger's compaction)."""
        new = self.copy()
        for name in ("coef", "f", "s", "err"):
            a = np.zeros(capacity)
            a[: len(keep)] = getattr(self, name)[keep]
            setattr(new, name, a)
        to = np.full(self.capacity, -1, dtype=np.intp)
        to[np.asarray(keep, dtype=np.intp)] = np.arange(len(keep))
        new.keep_face(self.face_slots[to[self.face_slots] >= 0])
        if new.face_slots.size:
            new.face_slots = to[new.face_slots]
        fl = self.face_L_slots
        new.face_L_slots = np.where(fl >= 0, to[np.maximum(fl, 0)], -1)
        return new

    def drop_factor(self) -> None:
        """Forget the face factor (the labels of its samples changed)."""
        self.face_L_slots, self.face_L = np.zeros(0, dtype=np.intp), np.zeros((0, 0))

    def keep_face(self, slots: np.ndarray) -> None:
        """Keep only the cached kernel values among ``slots`` (a subset of the cached ones)."""
        slots = np.asarray(slots, dtype=np.intp)
        if slots.size == self.face_slots.size:
            return
        pos = np.searchsorted(self.face_slots, slots)
        self.face_slots, self.face_K = slots, self.face_K[pos][:, pos]

    def cached_first(self, slots: np.ndarray) -> np.ndarray:
        """A permutation of ``slots`` (positions into it) that puts the cached ones first, in
        the cache's order (then :meth:`cached_block` copies the cached part as one block)."""
        fs = self.face_slots
        if not fs.size:
            return np.arange(slots.size)
        pos = np.minimum(np.searchsorted(fs, slots), fs.size - 1)
        hit = fs[pos] == slots
        P = np.flatnonzero(hit)
        return np.concatenate([P[np.argsort(pos[P], kind="stable")], np.flatnonzero(~hit)])

    def cached_block(self, K: np.ndarray, slots: np.ndarray) -> np.ndarray:
        """``K[slots][:, slots]``: the pairs of cached slots from the cache, the others'
        columns read from K (a chunk at a time).  Fastest with the cached slots first, in the
        cache's order (:meth:`cached_first`)."""
        out = np.empty((slots.size, slots.size))
        fs = self.face_slots
        pos = np.minimum(np.searchsorted(fs, slots), max(fs.size - 1, 0))
        hit = fs[pos] == slots if fs.size else np.zeros(slots.size, dtype=bool)
        p = int(np.argmin(hit)) if not hit.all() else slots.size  # the leading run of hits
        if p and np.all(np.diff(pos[:p]) > 0):
            square(self.face_K, pos[:p], out[:p, :p])
        else:
            p = 0
        if p < slots.size:
            cols = block(K, slots, slots[p:])
            out[:, p:] = cols
            out[p:, :p] = cols[:p].T
        return out

    def cache_face(self, K: np.ndarray, free: np.ndarray, y: np.ndarray | None = None) -> None:
        """Cache ``K[free][:, free]`` read from K (after a fit: its free set) and, given the
        labels ``y`` by slot, the Cholesky factor of ``Q_FF`` when it is numerically positive
        definite."""
        from scipy import linalg

        free = np.sort(np.asarray(free, dtype=np.intp))
        self.face_slots, self.face_K = free, block(K, free, free)
        self.drop_factor()
        if y is None or not free.size:
            return
        yF = np.asarray(y, dtype=np.float64)[free]
        Q = self.face_K * yF[:, None] * yF[None, :]
        top = float(np.max(np.abs(np.diag(Q))))
        try:
            L = linalg.cholesky(Q, lower=True, check_finite=False)
        except linalg.LinAlgError:
            return
        if np.min(np.diag(L)) ** 2 > 64.0 * free.size * _EPS * max(top, np.finfo(float).tiny):
            self.face_L_slots, self.face_L = free, L
