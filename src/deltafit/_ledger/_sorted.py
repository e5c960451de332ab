"""The digests of a range ledger, kept sorted by value in segments (:class:`SortedDigests`):
20 bytes a sample instead of a per-slot array, looked up by binary search."""

from __future__ import annotations

import numpy as np

from deltafit._ledger._records import DIGEST_BYTES, DigestStore, as_digest_array, digest_keys

__all__ = ["SEGMENT_BITS", "SortedDigests", "sorted_segment"]

SEGMENT_BITS = 4  # the sorted digests of a range ledger: 16 segments by the top 4 key bits


def sorted_segment(keys, checks, slots):
    """One segment of :class:`SortedDigests`: the entries sorted by key (then slot)."""
    order = np.lexsort((slots, keys))
    return keys[order], checks[order], slots[order]


class _Snapshot:
    """The undo record of a :class:`SortedDigests` write: the overlay entries and tail rows of
    the slots it wrote, as they were."""

    def __init__(self, slots, overlay, tail):
        self.slots, self.overlay, self.tail = slots, overlay, tail


class SortedDigests:
    """The digests of a range ledger: those of the fit's slots ``[0, n0)`` kept sorted by value
    (no per-slot array), the later ones per slot.

    ``segments[g]`` holds the fit's samples whose key (the digest's first 8 bytes, uniform: the
    digest is a PRF output) has top bits ``g``: keys sorted, the digests' last 8 bytes, the
    slots (uint32 for fewer than 2³² samples): 20 bytes a sample.  A fit slot rewritten later
    (reused by an added sample, relabelled) gets an *overlay* entry that hides its sorted one;
    a deleted slot needs nothing (the ledger's ``active`` flag says it is gone).  Slots
    ``[n0, capacity)`` are a :class:`DigestStore` (``tail``).  Lookup by value is a binary
    search in one segment; by slot (``matches``: is the digest at slot s this one?) it is a
    lookup by value that must find s.
    """

    def __init__(self, n0, segments, tail_capacity, overlay=None):
        self.n0, self.segments = int(n0), segments
        self.tail = DigestStore(max(int(tail_capacity), 0))
        self.overlay = {} if overlay is None else overlay
        self.shift = np.uint64(64 - SEGMENT_BITS)

    @classmethod
    def of_digests(cls, D, tail_capacity):
        """The store of digests ``D`` ((n, 16) uint8) at slots 0..n-1 (the NumPy-side build)."""
        n = D.shape[0]
        k1, k2 = digest_keys(D)
        slots = np.arange(n, dtype=np.uint32 if n < 2**32 else np.int64)
        g = (k1 >> np.uint64(64 - SEGMENT_BITS)).astype(np.intp)
        order = np.argsort(g, kind="stable")
        bounds = np.searchsorted(g[order], np.arange(2**SEGMENT_BITS + 1))
        segs = []
        for a, b in zip(bounds[:-1], bounds[1:]):
            i = order[a:b]
            segs.append(sorted_segment(k1[i], k2[i], slots[i]))
        return cls(n, segs, tail_capacity)

    def __len__(self):
        return self.n0 + len(self.tail)

    @property
    def nbytes(self):
        return (
            sum(k.nbytes + c.nbytes + s.nbytes for k, c, s in self.segments)
            + self.tail.nbytes
            + 40 * len(self.overlay)
        )

    # ------------------------------------------------------------ by value
    def _head_candidates(self, k1, k2):
        """Per query (arrays of keys), the fit slots whose sorted digest equals it (lists)."""
        out = [[] for _ in range(k1.size)]
        g = (k1 >> self.shift).astype(np.intp)
        for seg in np.unique(g).tolist():
            q = np.flatnonzero(g == seg)
            keys, checks, slots = self.segments[seg]
            lo = np.searchsorted(keys, k1[q], "left")
            hi = np.searchsorted(keys, k1[q], "right")
            for j, a, b in zip(q.tolist(), lo.tolist(), hi.tolist()):
                for p in range(a, b):
                    if checks[p] == k2[j]:
                        out[j].append(int(slots[p]))
        return out

    def _unique_head(self, k1, k2):
        """The fit slot of each query when exactly one sorted entry has its key and its check
        matches (−1: none matches; −2: several entries share the key, resolved one by one by
        the caller): the vectorised common case.  The queries are sorted first, so that each
        segment is searched with sorted needles (cache friendly)."""
        res = np.full(k1.size, -1, dtype=np.intp)
        order = np.argsort(k1)
        ks = k1[order]
        g = (ks >> self.shift).astype(np.intp)
        bounds = np.searchsorted(g, np.arange(len(self.segments) + 1))
        for seg, (a, b) in enumerate(zip(bounds[:-1].tolist(), bounds[1:].tolist())):
            keys, checks, slots = self.segments[seg]
            if a == b or keys.size == 0:
                continue
            q = order[a:b]
            lo = np.searchsorted(keys, ks[a:b], "left")
            p = np.minimum(lo, keys.size - 1)
            hit = keys[p] == ks[a:b]
            nxt = np.minimum(p + 1, keys.size - 1)
            multi = hit & (nxt != p) & (keys[nxt] == ks[a:b])
            ok = hit & ~multi & (checks[p] == k2[q])
            res[q[ok]] = slots[p[ok]]
            res[q[multi]] = -2
        return res

    def matches(self, slots, D, active=None):
        """Whether the digest at ``slots[i]`` is ``D[i]`` (bool array)."""
        slots = np.asarray(slots, dtype=np.intp)
        D = np.ascontiguousarray(D, dtype=np.uint8).reshape(-1, DIGEST_BYTES)
        ok = np.zeros(slots.size, dtype=bool)
        tail = slots >= self.n0
        if tail.any():
            ok[tail] = self.tail.matches(slots[tail] - self.n0, D[tail])
        head = np.flatnonzero(~tail)
        if head.size:
            over = (
                np.array([int(s) in self.overlay for s in slots[head]], dtype=bool)
                if self.overlay
                else np.zeros(head.size, dtype=bool)
            )
            for i in head[over].tolist():
                v = self.overlay[int(slots[i])]
                ok[i] = v is not None and bool(np.all(v == D[i]))
            plain = head[~over]
            k1, k2 = digest_keys(D[plain])
            found = self._unique_head(k1, k2)
            ok[plain] = found == slots[plain]
            for j in np.flatnonzero(found == -2).tolist():
                ok[plain[j]] = (
                    int(slots[plain[j]]) in self._head_candidates(k1[j : j + 1], k2[j : j + 1])[0]
                )
        return ok

    def lookup(self, D, active):
        """Per digest of ``D``, the active slots holding it (a list of lists)."""
        D = np.ascontiguousarray(D, dtype=np.uint8).reshape(-1, DIGEST_BYTES)
        k1, k2 = digest_keys(D)
        found = self._unique_head(k1, k2)
        out = [[int(f)] if f >= 0 else [] for f in found.tolist()]
        for j in np.flatnonzero(found == -2).tolist():
            out[j] = self._head_candidates(k1[j : j + 1], k2[j : j + 1])[0]
        over = self.overlay
        for j, c in enumerate(out):  # fit slots since deleted or rewritten do not count
            if c and (len(c) > 1 or not active[c[0]] or c[0] in over):
                out[j] = [s for s in c if active[s] and s not in over]
        extra = {}
        for s, v in over.items():
            if v is not None and active[s]:
                extra.setdefault(v.tobytes(), []).append(s)
        live = np.flatnonzero(active[self.n0 : self.n0 + len(self.tail)])
        for s in live.tolist():
            extra.setdefault(self.tail.a[s].tobytes(), []).append(s + self.n0)
        if extra:
            for j in range(len(out)):
                out[j] = out[j] + extra.get(D[j].tobytes(), [])
        return out

    # ------------------------------------------------------------ by slot
    def dense(self, slots):
        """The digests at ``slots`` ((k, 16) uint8; fit slots are found by inverting the
        sorted segments, O(n0))."""
        slots = np.asarray(slots, dtype=np.intp)
        out = np.zeros((slots.size, DIGEST_BYTES), dtype=np.uint8)
        tail = slots >= self.n0
        if tail.any():
            out[tail] = self.tail.dense(slots[tail] - self.n0)
        head = np.flatnonzero(~tail)
        if head.size:
            want = np.full(self.n0, -1, dtype=np.intp)
            want[slots[head]] = head
            q = out.view("<u8")
            for keys, checks, sl in self.segments:
                i = want[sl.astype(np.intp)]
                hit = i >= 0
                q[i[hit], 0], q[i[hit], 1] = keys[hit], checks[hit]
            for i in head.tolist():
                v = self.overlay.get(int(slots[i]))
                if v is not None:
                    out[i] = v
        return out

    def __getitem__(self, key):
        if isinstance(key, (int, np.integer)):
            return self.dense([int(key)])[0].tobytes()
        slots = np.atleast_1d(np.asarray(key, dtype=np.intp))
        tail = slots[slots >= self.n0] - self.n0
        over = (
            {
                int(s): self.overlay[int(s)]
                for s in slots[slots < self.n0].tolist()
                if int(s) in self.overlay
            }
            if self.overlay
            else {}
        )
        return _Snapshot(slots, over, self.tail[tail])

    def __setitem__(self, key, value):
        slots = np.atleast_1d(np.asarray(key, dtype=np.intp))
        head, tail = slots[slots < self.n0], slots[slots >= self.n0]
        if isinstance(value, _Snapshot):  # an undo: back to the recorded state
            if self.overlay:
                for s in head.tolist():
                    self.overlay.pop(s, None)
            self.overlay.update(value.overlay)
            self.tail[tail - self.n0] = value.tail
            return
        if value is not None:
            self.write(slots, value)
            return
        if self.overlay:  # deleted: the ledger's active flag hides the sorted entry
            for s in head.tolist():
                self.overlay.pop(s, None)
        if tail.size:
            self.tail[tail - self.n0] = None

    def write(self, slots, digests):
        """Store ``digests`` at ``slots`` (a fit slot gets an overlay entry)."""
        slots = np.atleast_1d(np.asarray(slots, dtype=np.intp))
        D = as_digest_array(digests)
        tail = slots >= self.n0
        if tail.any():
            self.tail.write(slots[tail] - self.n0, D[tail])
        for s, d in zip(slots[~tail].tolist(), D[~tail]):
            self.overlay[s] = d.copy()

    def grown(self, capacity):
        out = SortedDigests(self.n0, self.segments, 0, dict(self.overlay))
        out.tail = self.tail.grown(int(capacity) - self.n0)
        return out

    def taken(self, keep, capacity):
        """A per-slot :class:`DigestStore` holding the digests of slots ``keep`` at
        0..len(keep)-1 (a compaction ends the range)."""
        out = DigestStore(capacity)
        out.a[: len(keep)] = self.dense(keep)
        return out
