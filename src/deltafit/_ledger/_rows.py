"""The ledger's sparse row store: one canonical CSR row per slot (:class:`SparseRows`), and the
checks of the sparse rows a model file holds."""

from __future__ import annotations

import numpy as np
import scipy.sparse as sp

__all__ = ["SparseRows", "canonical_csr", "checked_csr"]


def canonical_csr(X):
    """``X`` as a float64 ``csr_matrix`` in canonical form (duplicates summed, stored zeros
    dropped, column indices sorted); a copy, never a view of the caller's arrays."""
    X = sp.csr_matrix(X, dtype=np.float64, copy=True)
    X.sum_duplicates()
    X.eliminate_zeros()
    X.sort_indices()
    return X


class SparseRows:
    """The ledger's row store for sparse rows: one CSR row (column indices and values) per
    slot, O(nnz) memory.

    It offers what the ledger and the states use of a dense row array: ``shape``, reads
    ``rows[slots]`` / ``rows[a:b]`` (a ``csr_matrix`` of those rows, in that order), writes
    ``rows[slots] = R`` (``R`` sparse or dense, one row per slot) and ``rows[slots] = 0.0``
    (the slots cleared).  A write replaces the per-slot arrays (never changes them in place), so
    that the rows read before a write, which the ledger's undo journal keeps, stay valid.
    """

    _NO_INDEX = np.zeros(0, dtype=np.int32)
    _NO_DATA = np.zeros(0)

    def __init__(self, capacity, n_features):
        self.n_features = int(n_features)
        self.indices = [self._NO_INDEX] * int(capacity)
        self.data = [self._NO_DATA] * int(capacity)

    @property
    def shape(self):
        return (len(self.indices), self.n_features)

    @property
    def nnz(self):
        return int(sum(d.size for d in self.data))

    @property
    def nbytes(self):
        return int(sum(d.nbytes + i.nbytes for d, i in zip(self.data, self.indices)))

    def _slots(self, key):
        if isinstance(key, slice):
            return list(range(*key.indices(len(self.indices))))
        key = np.asarray(key)
        if key.dtype == bool:
            key = np.flatnonzero(key)
        return np.atleast_1d(key).astype(np.intp).tolist()

    def __getitem__(self, key):
        slots = self._slots(key)
        ind = [self.indices[s] for s in slots]
        dat = [self.data[s] for s in slots]
        indptr = np.zeros(len(slots) + 1, dtype=np.int64)
        if slots:
            np.cumsum([a.size for a in dat], out=indptr[1:])
        indices = np.concatenate(ind) if slots else self._NO_INDEX
        data = np.concatenate(dat) if slots else self._NO_DATA
        if indptr[-1] < np.iinfo(np.int32).max:
            indptr = indptr.astype(np.int32)
        return sp.csr_matrix((data, indices, indptr), shape=(len(slots), self.n_features))

    def __setitem__(self, key, value):
        slots = self._slots(key)
        if np.isscalar(value):
            if value != 0:
                raise ValueError("a sparse row store can only be cleared with 0")
            for s in slots:
                self.indices[s], self.data[s] = self._NO_INDEX, self._NO_DATA
            return
        R = canonical_csr(value)
        if R.shape != (len(slots), self.n_features):
            raise ValueError(
                f"cannot write {R.shape[0]} rows of width {R.shape[1]} into "
                f"{len(slots)} slots of width {self.n_features}"
            )
        ind = R.indices.astype(np.int32)
        for k, s in enumerate(slots):
            a, b = R.indptr[k], R.indptr[k + 1]
            self.indices[s], self.data[s] = ind[a:b].copy(), R.data[a:b].copy()

    def grown(self, capacity):
        """A new store of ``capacity`` slots holding these rows (this one is left as it is)."""
        out = SparseRows(0, self.n_features)
        extra = int(capacity) - len(self.indices)
        out.indices = self.indices + [self._NO_INDEX] * extra
        out.data = self.data + [self._NO_DATA] * extra
        return out


def checked_csr(arrays, n, n_features):
    """The saved sparse rows as a ``csr_matrix``, after checking that the components are
    canonical CSR of ``n`` rows of width ``n_features``: ``indptr`` from 0 to nnz, not
    decreasing; column indices in range and increasing within each row; values finite and not
    zero."""
    indptr = np.asarray(arrays["ledger_X_indptr"], dtype=np.int64)
    indices = np.asarray(arrays["ledger_X_indices"], dtype=np.int64)
    data = np.asarray(arrays["ledger_X_data"], dtype=np.float64)
    nnz = data.size
    if (
        indices.size != nnz
        or indptr.size != n + 1
        or indptr[0] != 0
        or indptr[-1] != nnz
        or np.any(np.diff(indptr) < 0)
    ):
        raise ValueError(
            "corrupt model file: the sparse rows' index pointer does not run from "
            "0 to the number of stored values"
        )
    if nnz and (indices.min() < 0 or indices.max() >= n_features):
        raise ValueError("corrupt model file: a sparse row's column index is out of range")
    if nnz > 1:
        across = np.zeros(nnz - 1, dtype=bool)
        starts = indptr[1:-1]
        starts = starts[(starts > 0) & (starts < nnz)]
        across[starts - 1] = True
        if not np.all((np.diff(indices) > 0) | across):
            raise ValueError(
                "corrupt model file: a sparse row's column indices are not sorted and distinct"
            )
    if not np.all(np.isfinite(data)) or np.any(data == 0.0):
        raise ValueError("corrupt model file: the sparse rows hold NaN, inf or stored zeros")
    return sp.csr_matrix(
        (data, indices.astype(np.int32) if n_features < 2**31 else indices, indptr),
        shape=(n, n_features),
    )
