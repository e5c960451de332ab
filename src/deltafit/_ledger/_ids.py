"""Sample id -> slot: the ledger's id index (:class:`IdIndex`), and that of a range ledger
(:class:`RangeIdIndex`)."""

from __future__ import annotations

import numpy as np

__all__ = ["IdIndex", "RangeIdIndex"]


class IdIndex:
    """Sample id -> slot, in memory proportional to the live samples.

    Ids are issued in increasing order, so the index is a sorted array of (id, slot) pairs that
    grows at its end; a deleted id leaves a tombstone (slot −1) until tombstones outnumber the
    live entries, when the array is rebuilt.  Lookups are one vectorised binary search.  (A
    table indexed by id would grow with every id ever issued: a model used as a sliding window
    would hold one entry per sample it ever saw.)
    """

    def __init__(self):
        self.reset(np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.intp))

    def reset(self, ids, slots):
        """Hold exactly the pairs ``(ids[i], slots[i])``; ``ids`` increasing."""
        cap = max(16, 2 * ids.size)
        self.keys = np.zeros(cap, dtype=np.int64)
        self.vals = np.full(cap, -1, dtype=np.intp)
        self.keys[: ids.size] = ids
        self.vals[: ids.size] = slots
        self.m, self.dead = int(ids.size), 0

    @property
    def nbytes(self):
        return self.keys.nbytes + self.vals.nbytes

    def lookup(self, ids):
        """Slots of ``ids`` (int64 array), −1 for an id not in the index."""
        if self.m == 0:
            return np.full(np.shape(ids), -1, dtype=np.intp)
        keys = self.keys[: self.m]
        # (array methods rather than np.* functions: an update of one sample makes a few
        # dozen NumPy calls, and their Python wrappers show)
        pos = keys.searchsorted(ids)
        np.minimum(pos, self.m - 1, out=pos)
        return np.where(keys[pos] == ids, self.vals[pos], -1).astype(np.intp, copy=False)

    def append(self, ids, slots):
        """Add new ids, all larger than any held (written past the end: an undo only needs the
        old length back)."""
        k = ids.size
        if self.m + k > self.keys.size:
            self._rebuild(self.m - self.dead + k)
        m = self.m
        self.keys[m : m + k] = ids
        self.vals[m : m + k] = slots
        self.m = m + k

    def remove(self, ids, journal=None):
        """Tombstone ``ids`` (all present); ``journal`` receives the undo record."""
        pos = self.keys[: self.m].searchsorted(ids)
        if journal is not None:
            journal.append((self.vals, pos, self.vals[pos].copy()))
        self.vals[pos] = -1
        self.dead += ids.size
        if self.dead > max(16, self.m - self.dead):
            self._rebuild(self.m - self.dead)

    def _rebuild(self, need):
        """New arrays (never in place, so that an undo restores the old ones) without the
        tombstones, with room for ``need`` entries."""
        live = self.vals[: self.m] >= 0
        ids, slots = self.keys[: self.m][live], self.vals[: self.m][live]
        cap = max(16, 2 * need)
        keys = np.zeros(cap, dtype=np.int64)
        vals = np.full(cap, -1, dtype=np.intp)
        keys[: ids.size] = ids
        vals[: ids.size] = slots
        self.keys, self.vals, self.m, self.dead = keys, vals, int(ids.size), 0

    def mark(self):
        return self.keys, self.vals, self.m, self.dead

    def restore(self, mark):
        self.keys, self.vals, self.m, self.dead = mark


class RangeIdIndex:
    """Id -> slot of a range ledger: the fit's ids ``[0, n0)`` live at the slot of the same
    number (while that slot is active and holds that id); the ids handed out later are in an
    :class:`IdIndex`."""

    def __init__(self, ledger, n0):
        self._led, self.n0 = ledger, int(n0)
        self.inner = IdIndex()

    @property
    def nbytes(self):
        return self.inner.nbytes

    def lookup(self, ids):
        ids = np.asarray(ids, dtype=np.int64)
        out = self.inner.lookup(ids)
        fit = (ids >= 0) & (ids < self.n0)
        if fit.any():
            s = ids[fit].astype(np.intp)
            ok = self._led.active[s] & (self._led.ids[s] == ids[fit])
            out = np.array(out, dtype=np.intp, copy=True)
            out[fit] = np.where(ok, s, -1)
        return out

    def append(self, ids, slots):
        self.inner.append(ids, slots)

    def remove(self, ids, journal=None):
        ids = np.asarray(ids, dtype=np.int64)
        later = ids[ids >= self.n0]
        if later.size:
            self.inner.remove(later, journal)

    def reset(self, ids, slots):
        self.inner.reset(ids, slots)

    def mark(self):
        return self.inner.mark()

    def restore(self, mark):
        self.inner.restore(mark)
