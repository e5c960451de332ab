"""The ledger: stable integer ids for training samples, mapped to storage slots.

Samples live in *slots* (rows of preallocated arrays that grow by doubling).  Removing a sample
frees its slot without moving any other row, so that removing one sample costs O(1) here and the
exact-update states (which index their matrices by slot) never copy O(n²) data for it.  Ids are
handed out in increasing order and never reused: after ``fit`` the ids are 0..n-1 in row order.

A *range ledger* (:meth:`Ledger.from_range`, the Dask fit of a model without rows or labels)
keeps the fit's n samples in O(n) bits plus their digests: their ids are the range of the
slots (``LazyColumn``), their weights are implicit 1, their labels implicit 0 (none kept), the
id index holds only the ids added later (``RangeIdIndex``) and the digests are kept sorted, in
segments, for lookup by value (``SortedDigests``: 20 bytes a sample).  Later writes that depart
from those rules are kept as patches; nothing of size n is written until a compaction.
"""

from __future__ import annotations

import secrets

import numpy as np
import scipy.sparse as sp

from deltafit._ledger._columns import LazyColumn
from deltafit._ledger._ids import IdIndex, RangeIdIndex
from deltafit._ledger._journal import COMPACTED, Journal
from deltafit._ledger._records import (
    DEFAULT_SCHEME,
    DIGEST_BYTES,
    KEY_BYTES,
    DigestStore,
    digest_array,
)
from deltafit._ledger._rows import SparseRows, checked_csr
from deltafit.utils._validation import check_ids

__all__ = ["Ledger"]


class Ledger(Journal):
    """Ids, labels, optional feature rows and optional digests of the training samples.

    Parameters
    ----------
    n_features : int
        Width of the stored rows (0 stores no rows).
    keep_rows : bool
        Whether feature rows are stored.
    keep_digests : bool
        Keep no labels, only a *record* per sample that recognises it given its row and label:
        a keyed 16-byte digest of (row, label) (``digest_scheme``: ``"nh-sip"``, see
        :mod:`._digest`; ``"blake2b"`` in files of format 2).  The key is random, one per
        ledger.
        ``y`` then holds 0 for every sample: the labels come from the caller, or are found among
        ``candidates`` (the two classes of a classifier; :meth:`labels_of`).

    Attributes
    ----------
    w : ndarray of shape (capacity,)
        The samples' weights (1.0 unless given; 0.0 at free slots).
    weighted : bool
        Whether a weight other than 1 was ever stored (until then the weights are all ones and
        the solvers are called without them).
    """

    def __init__(
        self,
        n_features,
        keep_rows=True,
        keep_digests=False,
        capacity=16,
        growth=2.0,
        n_outputs=0,
        sparse_rows=False,
        digest_scheme=None,
    ):
        capacity = max(int(capacity), 1)
        self.sparse_rows = bool(sparse_rows) and bool(keep_rows)
        self.growth = float(growth)
        self.n_features = int(n_features)
        self.keep_rows = bool(keep_rows)
        self.keep_digests = bool(keep_digests)
        self.digest_key = secrets.token_bytes(KEY_BYTES) if keep_digests else None
        self.digest_scheme = (digest_scheme or DEFAULT_SCHEME) if keep_digests else None
        self.X = (
            SparseRows(capacity, self.n_features)
            if self.sparse_rows
            else np.zeros((capacity, self.n_features if keep_rows else 0))
        )
        # one label per sample, or a row of ``n_outputs`` targets (multi-output regression)
        self.y = np.zeros((capacity, n_outputs) if n_outputs else capacity)
        self.w = np.zeros(capacity)
        self.weighted = False
        self.ids = np.full(capacity, -1, dtype=np.int64)
        self.active = np.zeros(capacity, dtype=bool)
        self.digests = DigestStore(capacity) if keep_digests else None
        self.next_id = 0
        self.end = 0  # slots [end, capacity) have never been used since the last compaction
        self._index = IdIndex()  # id -> slot
        self._journal = None  # undo records while a change is in progress (see begin)
        self._unzeroed = []  # slots deleted in the change whose rows commit zeroes
        self._n = 0
        self._free = []  # freed slots that the owner has declared reusable
        self._freed = []  # deleted slots not yet declared reusable

    # ----------------------------------------------------------------- queries
    @property
    def capacity(self):
        return self.y.shape[0]

    @property
    def n_samples(self):
        return self._n

    def active_slots(self):
        """Slots of the active samples, ordered by id."""
        slots = np.flatnonzero(self.active)
        ids = self.ids[slots]
        if ids.size < 2 or np.all(ids[1:] > ids[:-1]):  # already in id order (no reuse)
            return slots
        return slots[np.argsort(ids, kind="stable")]

    def sample_ids(self):
        """The live ids, increasing (a new array).

        Never ``ids[active]``: NumPy's boolean indexing counts the mask's true entries, sizes
        its result, then fills it with the GIL released, so that a mask that another thread
        changes in between writes past the result (heap corruption: reads of ``sample_ids_``
        during an update aborted the interpreter).  ``np.flatnonzero`` checks its count (a
        RuntimeError at worst), and indexing by that new index array is bounds-checked.
        """
        return np.sort(self.ids[np.flatnonzero(self.active)])

    def slots_of(self, ids, what="ids"):
        """Slots of ``ids``; ValueError for unknown, repeated or non-integer ids."""
        ids = check_ids(ids, what)
        slots = self._index.lookup(ids)
        if (slots < 0).any():
            raise ValueError(
                f"unknown sample {what} (not in the model): {ids[slots < 0][:10].tolist()}"
            )
        return slots

    def lookup(self, ids):
        """Slots of checked int64 ``ids``, −1 for unknown ones (no validation)."""
        return self._index.lookup(ids)

    # ------------------------------------------------------------ digests
    @property
    def keeps_labels(self):
        """Whether ``y`` holds the labels (False: the ledger keeps digests instead)."""
        return not self.keep_digests

    def stored_labels(self, y):
        """What ``y`` stores for new labels ``y``: the labels, or 0 when none are kept."""
        y = np.asarray(y, dtype=np.float64)
        return y if self.keeps_labels else np.zeros(y.shape)

    def records(self, X, y):
        """The records that recognise the samples (X, y): their keyed digests ((k, 16) uint8,
        the ledger's scheme)."""
        return digest_array(X, y, self.digest_key, self.digest_scheme)

    def find(self, X, y):
        """Slots of the active samples equal to the rows of (X, y), matched by digest (a row
        given twice matches two samples)."""
        if not self.keep_digests:
            raise ValueError("this model keeps no digests; remove samples by id")
        found = self.digests.lookup(self.records(X, y), self.active)
        slots, taken = [], set()
        for i, bucket in enumerate(found):
            free = [s for s in bucket if s not in taken] if taken else bucket
            if not free:
                raise ValueError(
                    f"row {i} of X (with its label) is not a training sample of this model"
                )
            slots.append(free[-1])
            taken.add(free[-1])
        return np.asarray(slots, dtype=np.intp)

    def check_rows(self, slots, X, y):
        """ValueError unless (X, y) are the samples stored in ``slots`` (digest comparison)."""
        ok = self.digests.matches(slots, self.records(X, y))
        if not ok.all():
            k = int(np.flatnonzero(~ok)[0])
            raise ValueError(
                f"row {k} of X (with its label) is not sample id "
                f"{int(self.ids[int(slots[k])])} of this model"
            )

    def labels_of(self, slots, X, candidates=None):
        """The labels of the samples at ``slots``, given their rows ``X`` (a ledger that keeps
        digests): the one among ``candidates`` whose digest matches.

        Raises
        ------
        ValueError
            If a row is not that of the sample in its slot, or when there are no candidates (a
            regression target cannot be guessed: the caller must give it).
        """
        slots = np.asarray(slots, dtype=np.intp)
        if candidates is None:
            raise ValueError(
                "this model keeps no labels (keep_data=False): give the samples' current targets"
            )
        y = np.full(slots.size, np.nan)
        for c in np.asarray(candidates, dtype=np.float64):
            hit = self.digests.matches(slots, self.records(X, np.full(slots.size, c)))
            y[hit] = c
        bad = np.flatnonzero(np.isnan(y))
        if bad.size:
            k = int(bad[0])
            raise ValueError(
                f"row {k} of X is not sample id {int(self.ids[slots[k]])} of this model"
            )
        return y

    # ---------------------------------------------------------------- changes
    def _grow(self, needed):
        cap = self.capacity
        new_cap = max(needed, int(self.growth * cap) + 1)
        grown = {}
        for a in ("X", "y", "w", "ids", "active"):
            old = getattr(self, a)
            if isinstance(old, (SparseRows, LazyColumn)):
                grown[a] = old.grown(new_cap)
                continue
            new = np.full((new_cap,) + old.shape[1:], -1 if a == "ids" else 0, dtype=old.dtype)
            new[:cap] = old
            grown[a] = new
        digests = self.digests.grown(new_cap) if self.keep_digests else None
        self.X, self.y, self.w, self.ids, self.active = (
            grown["X"],
            grown["y"],
            grown["w"],
            grown["ids"],
            grown["active"],
        )
        self.digests = digests

    def allocate(self, k):
        """Choose ``k`` slots for new samples (reusing released slots first); grows if needed."""
        reuse = self._free[:k]
        fresh = k - len(reuse)
        if self.end + fresh > self.capacity:
            self._grow(self.end + fresh)
        slots = np.concatenate(
            [np.asarray(reuse, dtype=np.intp), np.arange(self.end, self.end + fresh)]
        ).astype(np.intp)
        return slots

    def insert(self, slots, X, y, digests=None, w=None):
        """Write new samples into ``slots`` (from :meth:`allocate`), with weights ``w`` (None:
        1.0); returns their ids."""
        k = len(slots)
        self._record(slots, "fresh" if k and int(np.min(slots)) >= self.end else "copy")
        ids = np.arange(self.next_id, self.next_id + k, dtype=np.int64)
        self.next_id += k
        n_reused = int(np.count_nonzero(slots < self.end))
        del self._free[:n_reused]
        self.end = max(self.end, int(slots.max()) + 1) if k else self.end
        if self.sparse_rows:
            self.X[slots] = X
        elif self.keep_rows:
            if sp.issparse(X):
                X = X.toarray()
            if k and slots[-1] - slots[0] == k - 1 and np.all(np.diff(slots) == 1):
                self.X[slots[0] : slots[-1] + 1] = X  # a block copy, no scatter
            else:
                self.X[slots] = X
        self.y[slots] = y
        self.w[slots] = 1.0 if w is None else w
        if w is not None and np.any(np.asarray(w) != 1.0):
            self.weighted = True
        self.ids[slots] = ids
        self.active[slots] = True
        if self.keep_digests:
            self.digests.write(slots, digests)
        self._index.append(ids, np.asarray(slots, dtype=np.intp))
        self._n += k
        return ids

    def delete(self, slots):
        """Deactivate ``slots``; they become reusable only after :meth:`release`.  Inside a
        transaction their dense rows are zeroed at :meth:`commit` (no copy to undo)."""
        defer = self._journal is not None and self.keep_rows and not self.sparse_rows
        self._record(slots, "kept" if defer else "copy")
        self._index.remove(self.ids[slots], self._journal)
        self._n -= len(slots)
        self._freed.extend(slots.tolist())
        self.active[slots] = False
        self.ids[slots] = -1
        self.y[slots] = 0.0
        self.w[slots] = 0.0
        if defer:
            self._unzeroed.append(np.array(slots, dtype=np.intp))
        elif self.keep_rows:
            self.X[slots] = 0.0
        if self.keep_digests:
            self.digests[slots] = None

    def relabel(self, slots, y, digests=None):
        """Give the samples at ``slots`` new labels (and, when digests are kept, new digests)."""
        self._record(slots)
        self.y[slots] = y
        if self.keep_digests:
            self.digests.write(slots, digests)

    def reweight(self, slots, w):
        """Give the samples at ``slots`` new weights ``w``."""
        self._record(slots)
        self.w[slots] = w
        if np.any(np.asarray(w) != 1.0):
            self.weighted = True

    def weights(self, slots):
        """The weights of the samples at ``slots`` (None while every weight is 1)."""
        return self.w[slots] if self.weighted else None

    def release(self, slots=None):
        """Declare deleted slots reusable: all of them, or only ``slots`` (those whose rows the
        owner's matrices have cleaned)."""
        if slots is None:
            self._free, self._freed = self._free + self._freed, []
        elif len(slots):
            ok = set(slots)
            self._free, self._freed = (
                self._free + [s for s in self._freed if s in ok],
                [s for s in self._freed if s not in ok],
            )

    def compact(self):
        """Move the active samples to slots 0..n-1 (in id order); returns the old slots kept."""
        if self._journal is not None:
            self._journal.append(COMPACTED)
        self._unzeroed = []  # the new arrays hold the active rows only
        keep = self.active_slots()
        n = keep.size
        cap = max(16, int(self.growth * n) + 1)
        X = (
            SparseRows(cap, self.n_features)
            if self.sparse_rows
            else np.zeros((cap, self.X.shape[1]))
        )
        X[:n] = self.X[keep]
        y = np.zeros((cap,) + self.y.shape[1:])
        y[:n] = self.y[keep]
        w = np.zeros(cap)
        w[:n] = self.w[keep]
        ids = np.full(cap, -1, dtype=np.int64)
        ids[:n] = self.ids[keep]
        active = np.zeros(cap, dtype=bool)
        active[:n] = True
        digests = self.digests.taken(keep, cap) if self.keep_digests else None
        self.X, self.y, self.w, self.ids, self.active, self.digests = X, y, w, ids, active, digests
        self.end = n
        self._free = []
        self._freed = []
        index = IdIndex()
        index.reset(ids[:n], np.arange(n, dtype=np.intp))
        self._index = index
        return keep

    # ----------------------------------------------------------- persistence
    # The largest next id a file may hold (ids are int64; 2**40 samples is far beyond any use).
    MAX_ID = 2**40

    def to_arrays(self):
        """The arrays that restore the ledger, and the live slots in ledger (id) order.

        ``ledger_ids`` (increasing) and ``ledger_next_id`` always; ``ledger_y`` (the labels)
        only when the ledger keeps them; ``ledger_X`` with the rows (sparse rows: their
        canonical CSR components ``ledger_X_indptr``, ``ledger_X_indices`` (int64) and
        ``ledger_X_data``); ``ledger_digests`` (one
        16-byte keyed digest per sample, of the ledger's ``digest_scheme``) and
        ``ledger_key`` (the digest key) when it keeps digests instead.
        """
        keep = self.active_slots()
        out = {
            "ledger_ids": self.ids[keep],
            "ledger_next_id": np.array(self.next_id, dtype=np.int64),
        }
        if self.keeps_labels:
            out["ledger_y"] = self.y[keep]
        if self.weighted:
            out["ledger_w"] = self.w[keep]
        if self.sparse_rows:  # the CSR components of the rows, in ledger order
            R = self.X[keep]
            out["ledger_X_indptr"] = R.indptr.astype(np.int64)
            out["ledger_X_indices"] = R.indices.astype(np.int64)
            out["ledger_X_data"] = R.data
        elif self.keep_rows:
            out["ledger_X"] = self.X[keep]
        if self.keep_digests:
            out["ledger_digests"] = self.digests.dense(keep)
            out["ledger_key"] = np.frombuffer(self.digest_key, dtype=np.uint8)
        return out, keep

    @property
    def record_bytes(self):
        """Bytes of one sample's record (its digest)."""
        return DIGEST_BYTES

    @classmethod
    def saved_shapes(cls, n, n_features, keep_rows, keep_digests, n_outputs=0, sparse_rows=False):
        """``{member: (shape, dtype)}`` that :meth:`to_arrays` writes for ``n`` samples (dtype as
        kind and size: ``"f8"``, ``"i8"``, ``"u1"``; the shape of a sparse row store's
        components as a test: a vector of at most ``n · n_features`` entries)."""
        out = {"ledger_ids": ((n,), "i8"), "ledger_next_id": ((), "i8")}
        if not keep_digests:
            out["ledger_y"] = ((n, n_outputs) if n_outputs else (n,), "f8")
        if keep_rows and sparse_rows:
            bound = max(n, 0) * n_features

            def vector(shape):
                return len(shape) == 1 and shape[0] <= bound

            out["ledger_X_indptr"] = ((n + 1,), "i8")
            out["ledger_X_indices"] = (vector, "i8")
            out["ledger_X_data"] = (vector, "f8")
        elif keep_rows:
            out["ledger_X"] = ((n, n_features), "f8")
        if keep_digests:
            out["ledger_digests"] = ((n, DIGEST_BYTES), "u1")
            out["ledger_key"] = ((KEY_BYTES,), "u1")
        return out

    @classmethod
    def optional_shapes(cls, n):
        """``{member: (shape, dtype)}`` that :meth:`to_arrays` may write: the weights, when
        some weight is not 1."""
        return {"ledger_w": ((n,), "f8")}

    @classmethod
    def from_range(
        cls,
        n_features,
        n,
        digests,
        capacity,
        n_outputs=0,
        growth=1.5,
        key=None,
        digest_scheme=DEFAULT_SCHEME,
    ):
        """A range ledger (see the module docstring) of ``n`` samples fitted without rows,
        labels or weights: ids 0..n-1 at slots 0..n-1, every weight 1, and ``digests`` a
        :class:`SortedDigests` of those samples (made with ``key``)."""
        capacity = max(int(capacity), n + 1)
        led = cls(
            n_features,
            keep_rows=False,
            keep_digests=True,
            capacity=1,
            growth=growth,
            n_outputs=n_outputs,
            digest_scheme=digest_scheme,
        )
        if key is not None:
            led.digest_key = bytes(key)
        led.active = np.zeros(capacity, dtype=bool)
        led.active[:n] = True
        led.ids = LazyColumn(led, n, capacity, "slot", -1, np.int64)
        led.w = LazyColumn(led, n, capacity, 1.0, 0.0, np.float64)
        led.y = LazyColumn(led, n, capacity, 0.0, 0.0, np.float64, n_outputs)
        led.X = np.zeros((capacity, 0))
        digests.tail = DigestStore(capacity - n)
        led.digests = digests
        led._index = RangeIdIndex(led, n)
        led.next_id = led.end = led._n = int(n)
        return led

    @staticmethod
    def fit_capacity(n):
        """The slots a ledger of ``n`` samples starts with: the fit's headroom for added
        samples (a loaded ledger takes the same, so a loaded model grows as the fitted one)."""
        return n + max(16, n // 8)

    @classmethod
    def from_arrays(
        cls,
        arrays,
        n_features,
        keep_rows,
        keep_digests,
        n_outputs=0,
        sparse_rows=False,
        digest_scheme=DEFAULT_SCHEME,
    ):
        """The ledger written by :meth:`to_arrays`; ValueError naming the problem when the
        arrays are inconsistent (shapes, ids, next id; sparse rows: index ranges, sorted
        column indices, finite non-zero values)."""
        shapes = cls.saved_shapes(
            np.shape(arrays["ledger_ids"])[0] if np.ndim(arrays["ledger_ids"]) == 1 else -1,
            n_features,
            keep_rows,
            keep_digests,
            n_outputs,
            sparse_rows,
        )
        for name, (shape, dtype) in shapes.items():
            a = arrays.get(name)
            if (
                a is None
                or not (shape(a.shape) if callable(shape) else a.shape == shape)
                or a.dtype.kind != dtype[0]
                or a.dtype.itemsize != int(dtype[1:])
            ):
                raise ValueError(
                    f"corrupt model file: the ledger's {name} is missing or has "
                    f"the wrong shape or type"
                )
        ids = np.asarray(arrays["ledger_ids"], dtype=np.int64)
        n = ids.size
        next_id = int(arrays["ledger_next_id"])
        if not 0 < next_id <= cls.MAX_ID:
            raise ValueError("corrupt model file: the ledger's next id is out of range")
        if n == 0:
            raise ValueError("corrupt model file: the ledger holds no sample")
        if ids[0] < 0 or ids[-1] >= next_id or (n > 1 and not np.all(np.diff(ids) > 0)):
            raise ValueError(
                "corrupt model file: the ledger's ids are not increasing ids below its next id"
            )
        led = cls(
            n_features,
            keep_rows=keep_rows,
            keep_digests=keep_digests,
            capacity=cls.fit_capacity(n),
            n_outputs=n_outputs,
            sparse_rows=sparse_rows,
            digest_scheme=digest_scheme,
        )
        if keep_rows and sparse_rows:
            led.X[:n] = checked_csr(arrays, n, n_features)
        elif keep_rows:
            led.X[:n] = arrays["ledger_X"]
        if keep_digests:
            dg = np.ascontiguousarray(arrays["ledger_digests"], dtype=np.uint8)
            led.digests.a[:n] = dg
            led.digest_key = bytes(np.ascontiguousarray(arrays["ledger_key"], dtype=np.uint8))
        else:
            led.y[:n] = arrays["ledger_y"]
        led.ids[:n] = ids
        led.active[:n] = True
        led.w[:n] = 1.0
        if "ledger_w" in arrays:
            w = np.asarray(arrays["ledger_w"], dtype=np.float64)
            if w.shape != (n,) or not np.all(np.isfinite(w)) or np.any(w < 0):
                raise ValueError(
                    "corrupt model file: the sample weights are not n finite non-negative numbers"
                )
            led.w[:n] = w
            led.weighted = True
        led.end = n
        led.next_id = next_id
        led._index.reset(ids, np.arange(n, dtype=np.intp))
        led._n = n
        return led
