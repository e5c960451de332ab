"""The ledger: stable integer ids for training samples, mapped to storage slots.

Samples live in *slots* (rows of preallocated arrays that grow by doubling).  Removing a sample
frees its slot without moving any other row, so that removing one sample costs O(1) here and the
exact-update states (which index their matrices by slot) never copy O(n²) data for it.  Ids are
handed out in increasing order and never reused: after ``fit`` the ids are 0..n-1 in row order.
"""

from __future__ import annotations

import hashlib

import numpy as np

from .._validation import check_ids

__all__ = ["Ledger"]


def row_digests(X, y):
    """16-byte BLAKE2b digest of each (row, label) pair, used to recognise a sample later."""
    X = np.ascontiguousarray(X, dtype=np.float64)
    y = np.ascontiguousarray(y, dtype=np.float64)
    return [
        hashlib.blake2b(X[i].tobytes() + y[i].tobytes(), digest_size=16).digest()
        for i in range(X.shape[0])
    ]


class Ledger:
    """Ids, labels, optional feature rows and optional digests of the training samples.

    Parameters
    ----------
    n_features : int
        Width of the stored rows (0 stores no rows).
    keep_rows : bool
        Whether feature rows are stored.
    keep_digests : bool
        Whether (row, label) digests are stored, so that samples can be recognised when the rows
        themselves are not kept.
    """

    def __init__(self, n_features, keep_rows=True, keep_digests=False, capacity=16, growth=2.0):
        capacity = max(int(capacity), 1)
        self.growth = float(growth)
        self.n_features = int(n_features)
        self.keep_rows = bool(keep_rows)
        self.keep_digests = bool(keep_digests)
        self.X = np.zeros((capacity, self.n_features if keep_rows else 0))
        self.y = np.zeros(capacity)
        self.ids = np.full(capacity, -1, dtype=np.int64)
        self.active = np.zeros(capacity, dtype=bool)
        self.digests = [None] * capacity if keep_digests else None
        self.next_id = 0
        self.end = 0  # slots [end, capacity) have never been used since the last compaction
        self._slot_of = np.full(16, -1, dtype=np.intp)  # id -> slot (-1: not in the model)
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
        return slots[np.argsort(self.ids[slots], kind="stable")]

    def sample_ids(self):
        return np.sort(self.ids[self.active])

    def slots_of(self, ids, what="ids"):
        """Slots of ``ids``; ValueError for unknown, repeated or non-integer ids."""
        ids = check_ids(ids, what)
        inside = (ids >= 0) & (ids < self.next_id)
        slots = np.full(ids.size, -1, dtype=np.intp)
        slots[inside] = self._slot_of[ids[inside]]
        if np.any(slots < 0):
            raise ValueError(
                f"unknown sample {what} (not in the model): {ids[slots < 0][:10].tolist()}"
            )
        return slots

    def find(self, X, y):
        """Slots of the active samples equal to the rows of (X, y), matched by digest."""
        if not self.keep_digests:
            raise ValueError("this model keeps no digests; remove samples by id")
        index = {}
        for s in np.flatnonzero(self.active):
            index.setdefault(self.digests[s], []).append(s)
        slots = []
        for i, d in enumerate(row_digests(X, y)):
            bucket = index.get(d)
            if not bucket:
                raise ValueError(
                    f"row {i} of X (with its label) is not a training sample of this model"
                )
            slots.append(bucket.pop())
        return np.asarray(slots, dtype=np.intp)

    def check_rows(self, slots, X, y):
        """ValueError unless (X, y) are the samples stored in ``slots`` (digest comparison)."""
        for k, (s, d) in enumerate(zip(slots, row_digests(X, y))):
            if self.digests[s] != d:
                raise ValueError(
                    f"row {k} of X (with its label) is not sample id {int(self.ids[s])} "
                    "of this model"
                )

    # ---------------------------------------------------------------- changes
    def _grow(self, needed):
        cap = self.capacity
        new_cap = max(needed, int(self.growth * cap) + 1)
        X = np.zeros((new_cap, self.X.shape[1]))
        X[:cap] = self.X
        self.X = X
        for name, fill in (("y", 0.0), ("ids", -1), ("active", False)):
            old = getattr(self, name)
            new = np.full(new_cap, fill, dtype=old.dtype)
            new[:cap] = old
            setattr(self, name, new)
        if self.keep_digests:
            self.digests.extend([None] * (new_cap - cap))

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

    def insert(self, slots, X, y, digests=None):
        """Write new samples into ``slots`` (from :meth:`allocate`); returns their ids."""
        k = len(slots)
        ids = np.arange(self.next_id, self.next_id + k, dtype=np.int64)
        self.next_id += k
        n_reused = int(np.count_nonzero(slots < self.end))
        del self._free[:n_reused]
        self.end = max(self.end, int(slots.max()) + 1) if k else self.end
        if self.keep_rows:
            if k and slots[-1] - slots[0] == k - 1 and np.all(np.diff(slots) == 1):
                self.X[slots[0]:slots[-1] + 1] = X  # a block copy, no scatter
            else:
                self.X[slots] = X
        self.y[slots] = y
        self.ids[slots] = ids
        self.active[slots] = True
        if self.keep_digests:
            for s, d in zip(slots, digests):
                self.digests[s] = d
        if self.next_id > self._slot_of.size:
            grown = np.full(max(self.next_id, 2 * self._slot_of.size), -1, dtype=np.intp)
            grown[: self._slot_of.size] = self._slot_of
            self._slot_of = grown
        self._slot_of[ids] = slots
        self._n += k
        return ids

    def delete(self, slots):
        """Deactivate ``slots``; they become reusable only after :meth:`release`."""
        self._slot_of[self.ids[slots]] = -1
        self._n -= len(slots)
        self._freed.extend(slots.tolist())
        self.active[slots] = False
        self.ids[slots] = -1
        self.y[slots] = 0.0
        if self.keep_rows:
            self.X[slots] = 0.0
        if self.keep_digests:
            for s in slots.tolist():
                self.digests[s] = None

    def release(self, slots=None):
        """Declare deleted slots reusable: all of them, or only ``slots`` (those whose rows the
        owner's matrices have cleaned)."""
        if slots is None:
            self._free.extend(self._freed)
            self._freed = []
        elif len(slots):
            ok = set(slots)
            self._free.extend(s for s in self._freed if s in ok)
            self._freed = [s for s in self._freed if s not in ok]

    def compact(self):
        """Move the active samples to slots 0..n-1 (in id order); returns the old slots kept."""
        keep = self.active_slots()
        n = keep.size
        cap = max(16, int(self.growth * n) + 1)
        X = np.zeros((cap, self.X.shape[1]))
        X[:n] = self.X[keep]
        y = np.zeros(cap)
        y[:n] = self.y[keep]
        ids = np.full(cap, -1, dtype=np.int64)
        ids[:n] = self.ids[keep]
        active = np.zeros(cap, dtype=bool)
        active[:n] = True
        if self.keep_digests:
            self.digests = [self.digests[s] for s in keep] + [None] * (cap - n)
        self.X, self.y, self.ids, self.active = X, y, ids, active
        self.end = n
        self._free = []
        self._freed = []
        self._slot_of[:] = -1
        self._slot_of[ids[:n]] = np.arange(n)
        return keep

    # ----------------------------------------------------------- persistence
    def to_arrays(self):
        keep = self.active_slots()
        out = {"ledger_ids": self.ids[keep], "ledger_y": self.y[keep],
               "ledger_next_id": np.array(self.next_id, dtype=np.int64)}
        if self.keep_rows:
            out["ledger_X"] = self.X[keep]
        if self.keep_digests:
            out["ledger_digests"] = np.frombuffer(
                b"".join(self.digests[s] for s in keep), dtype=np.uint8
            ).reshape(-1, 16)
        return out, keep

    @classmethod
    def from_arrays(cls, arrays, n_features, keep_rows, keep_digests):
        ids = np.asarray(arrays["ledger_ids"], dtype=np.int64)
        y = np.asarray(arrays["ledger_y"], dtype=np.float64)
        n = ids.size
        led = cls(n_features, keep_rows=keep_rows, keep_digests=keep_digests, capacity=max(16, n))
        digests = None
        if keep_digests:
            dg = np.asarray(arrays["ledger_digests"], dtype=np.uint8)
            if dg.shape != (n, 16):
                raise ValueError("corrupt model file: digests do not match the ledger")
            digests = [bytes(row) for row in dg]
        X = arrays["ledger_X"] if keep_rows else None
        slots = np.arange(n, dtype=np.intp)
        if keep_rows:
            led.X[:n] = X
        led.y[:n] = y
        led.ids[:n] = ids
        led.active[:n] = True
        if keep_digests:
            led.digests[:n] = digests
        led.end = n
        led.next_id = int(arrays["ledger_next_id"])
        if not 0 <= led.next_id <= 2**40:
            raise ValueError("corrupt model file: the ledger's next id is out of range")
        if n and (ids.min() < 0 or ids.max() >= led.next_id or np.unique(ids).size != n):
            raise ValueError("corrupt model file: the ledger's ids are inconsistent")
        led._slot_of = np.full(max(16, led.next_id), -1, dtype=np.intp)
        led._slot_of[ids] = slots
        led._n = n
        return led
