"""The per-slot columns of a range ledger (ids, weights, labels), not stored for the fit's
samples: a rule, the writes that depart from it (patches), and a plain array for later slots."""

from __future__ import annotations

import numpy as np

__all__ = ["LazyColumn"]


class LazyColumn:
    """A per-slot column of a range ledger, not stored for the fit's slots ``[0, n0)``: there
    its value is the *rule* (the slot itself for ids, a constant for weights and labels) at an
    active slot and ``dead`` at a free one, unless a write departed from that (a *patch*).
    Slots ``[n0, capacity)`` are a plain array (``tail``).

    It offers what the ledger and the states use of an array: ``shape``, ``dtype``, reads
    ``col[slots]`` / ``col[a:b]`` / ``col[mask]`` (new arrays), writes ``col[slots] = v``,
    ``copy()`` and ``np.asarray(col)`` (the whole column, materialised).  A write of the rule's
    value, or of ``dead`` at a free slot, drops the patch: deletions, the inserts that follow
    them and their undos leave no patch but where a value really departs from the rule.
    """

    def __init__(self, ledger, n0, capacity, rule, dead, dtype, width=0):
        self._led, self.n0 = ledger, int(n0)
        self.rule, self.dead = rule, dead
        self.dtype = np.dtype(dtype)
        self.width = int(width)
        self.tail = np.full(
            (max(int(capacity) - self.n0, 0),) + self._row_shape, dead, dtype=self.dtype
        )
        self.patches = {}

    @property
    def _row_shape(self):
        return (self.width,) if self.width else ()

    @property
    def shape(self):
        return (self.n0 + self.tail.shape[0],) + self._row_shape

    @property
    def ndim(self):
        return len(self.shape)

    def __len__(self):
        return self.shape[0]

    @property
    def nbytes(self):
        return self.tail.nbytes + 60 * len(self.patches)

    def _slots(self, key):
        if isinstance(key, slice):
            return np.arange(*key.indices(len(self)), dtype=np.intp)
        key = np.asarray(key)
        if key.dtype == bool:
            return np.flatnonzero(key)
        return key.astype(np.intp, copy=False)

    def _rule(self, s):
        v = (
            s.astype(self.dtype)
            if self.rule == "slot"
            else np.full(s.shape, self.rule, dtype=self.dtype)
        )
        return v[:, None] * np.ones(self.width, dtype=self.dtype) if self.width else v

    def __getitem__(self, key):
        scalar = isinstance(key, (int, np.integer))
        s = np.atleast_1d(self._slots(key))
        out = np.empty(s.shape + self._row_shape, dtype=self.dtype)
        head = s < self.n0
        hs = s[head]
        if hs.size:
            act = self._led.active[hs]
            v = self._rule(hs)
            act = act[:, None] if self.width else act
            out[head] = np.where(act, v, np.asarray(self.dead, dtype=self.dtype))
            if self.patches:
                for j in np.flatnonzero(head).tolist():
                    p = self.patches.get(int(s[j]))
                    if p is not None:
                        out[j] = p
        if not head.all():
            out[~head] = self.tail[s[~head] - self.n0]
        return out[0] if scalar else out

    def __setitem__(self, key, value):
        s = np.atleast_1d(self._slots(key))
        v = np.broadcast_to(np.asarray(value, dtype=self.dtype), s.shape + self._row_shape)
        head = s < self.n0
        if not head.all():
            self.tail[s[~head] - self.n0] = v[~head]
        hs, hv = s[head], v[head]
        if not hs.size:
            return
        act = self._led.active[hs]
        same = (hv == self._rule(hs)) | (~(act[:, None] if self.width else act) & (hv == self.dead))
        if self.width:
            same = same.all(axis=1)
        if self.patches:
            for x in hs[same].tolist():
                self.patches.pop(x, None)
        for j in np.flatnonzero(~same).tolist():
            self.patches[int(hs[j])] = np.array(hv[j], copy=True)

    def copy(self):
        return self[:]

    def view(self):
        """The whole column, materialised (read-only views of it are snapshots)."""
        return self[:]

    def __array__(self, dtype=None, copy=None):
        out = self[:]
        return out if dtype is None else out.astype(dtype)

    def grown(self, capacity):
        out = LazyColumn(self._led, self.n0, capacity, self.rule, self.dead, self.dtype, self.width)
        out.tail[: self.tail.shape[0]] = self.tail
        out.patches = dict(self.patches)
        return out
