"""The ledger's undo journal: between ``begin`` and ``commit`` every change records how to
undo itself, and ``rollback`` puts the ledger back exactly as it was at ``begin``."""

from __future__ import annotations

import numpy as np

__all__ = ["COMPACTED", "Journal"]

COMPACTED = object()  # journal marker: the slots were renumbered


class Journal:
    """The transactions of a :class:`~._ledger.Ledger` (a mixin: it reads and
    restores the ledger's arrays, counters, free lists and id index).

    An update changes the ledger through the methods below.  Between ``begin`` and
    ``commit`` each of them records how to undo itself, at a cost proportional to the slots
    it touches; ``rollback`` puts the ledger back exactly as it was at ``begin``, whatever
    raised in between (an interruption included).  Growth and compaction replace the arrays
    rather than resize them in place, so that the arrays of before survive both.
    """

    _ARRAYS = ("X", "y", "w", "ids", "active", "digests")

    def begin(self):
        """Start recording undo information for the changes that follow."""
        refs = {a: getattr(self, a) for a in self._ARRAYS}
        scalars = (
            self.next_id,
            self.end,
            self._n,
            list(self._free),
            list(self._freed),
            self.weighted,
        )
        self._journal = [(refs, scalars, self._index.mark())]

    def commit(self):
        """Forget the undo information: the changes since :meth:`begin` stand."""
        self._journal = None

    def rollback(self):
        """Undo every change since :meth:`begin` (no-op when nothing was begun)."""
        journal, self._journal = self._journal, None
        if journal is None:
            return
        compacted = False
        for entry in reversed(journal[1:]):
            if entry is COMPACTED:
                compacted = True
                continue
            array, index, old = entry
            if isinstance(array, list):
                for i, v in zip(index, old):
                    array[i] = v
            else:
                array[index] = old
        refs, scalars, index_mark = journal[0]
        if compacted:  # slots moved: back to the arrays of before
            for a, ref in refs.items():
                setattr(self, a, ref)
        # else the arrays are those of before, or grown copies of them with every write since
        # undone: kept, so that the capacity stays what the owner's state has grown to
        self.next_id, self.end, self._n = scalars[:3]
        self._free, self._freed = list(scalars[3]), list(scalars[4])
        self.weighted = scalars[5]
        self._index.restore(index_mark)

    def _record(self, slots):
        """Save the per-slot values at ``slots`` so that :meth:`rollback` can put them back."""
        j = self._journal
        if j is None:
            return
        slots = np.array(slots, dtype=np.intp)
        for a in (
            ("X", "y", "w", "ids", "active") if self.keep_rows else ("y", "w", "ids", "active")
        ):
            arr = getattr(self, a)
            j.append((arr, slots, arr[slots].copy()))
        if self.keep_digests:
            j.append((self.digests, slots, self.digests[slots]))
