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

import hashlib
import secrets

import numpy as np
import scipy.sparse as sp

from deltafit.utils._validation import check_ids
from deltafit._ledger._digest import SCHEMES, nh_sip_digests

__all__ = ["Ledger", "IdIndex", "SparseRows", "DigestStore", "SortedDigests", "LazyColumn",
           "RangeIdIndex", "DIGEST_BYTES", "KEY_BYTES", "digest_array", "DEFAULT_SCHEME"]

DIGEST_BYTES = 16  # the keyed digest of a (row, label) pair
KEY_BYTES = 32  # the ledger's random digest key
DEFAULT_SCHEME = "nh-sip"  # new ledgers (format 3); files of format 2 hold "blake2b"


def digest_array(X, y, key, scheme):
    """The digests of the (row, label) records as a (k, 16) uint8 array: scheme ``"nh-sip"``
    (:mod:`._digest`) for dense rows, the keyed BLAKE2b of :func:`row_digests` for scheme
    ``"blake2b"`` and for sparse rows (their canonical CSR form) under either scheme."""
    if scheme not in SCHEMES:
        raise ValueError(f"unknown digest scheme {scheme!r}")
    if scheme == "nh-sip" and not sp.issparse(X):
        return nh_sip_digests(X, y, key)
    return as_digest_array(row_digests(X, y, key))


def row_digests(X, y, key=b""):
    """16-byte BLAKE2b digest of each (row, label) pair, keyed with ``key``: digest scheme
    ``"blake2b"`` (model files of format 2), and the digest of sparse rows under every scheme.

    A sparse ``X`` is digested in its canonical CSR form (sorted column indices as int64, no
    stored zeros, then the values): a sparse model recognises a row whichever format it comes
    in, as long as the caller converts it to the model's format first.  A dense ``X`` is
    digested as the bytes of its float64 row followed by those of its label(s); the keyed
    hash state is made once and copied per row (the same digests, a third of the time)."""
    y = np.ascontiguousarray(y, dtype=np.float64)
    if sp.issparse(X):
        X = canonical_csr(X)
        parts = [X.indices[a:b].astype(np.int64).tobytes() + b"|" + X.data[a:b].tobytes()
                 for a, b in zip(X.indptr[:-1].tolist(), X.indptr[1:].tolist())]
        return [
            hashlib.blake2b(parts[i] + y[i].tobytes(), digest_size=DIGEST_BYTES, key=key,
                            person=b"deltafit.sparse").digest()
            for i in range(len(parts))
        ]
    X = np.ascontiguousarray(X, dtype=np.float64)
    n = X.shape[0]
    if n == 0:
        return []
    record = np.concatenate([X.reshape(n, -1).view(np.uint8),
                             y.reshape(n, -1).view(np.uint8)], axis=1)
    width = record.shape[1]
    flat = memoryview(record.reshape(-1))
    keyed = hashlib.blake2b(digest_size=DIGEST_BYTES, key=key, person=b"deltafit.sample")
    out = []
    for i in range(n):
        h = keyed.copy()
        h.update(flat[i * width:(i + 1) * width])
        out.append(h.digest())
    return out


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
            raise ValueError(f"cannot write {R.shape[0]} rows of width {R.shape[1]} into "
                             f"{len(slots)} slots of width {self.n_features}")
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


_COMPACTED = object()  # journal marker: the slots were renumbered


def as_digest_array(digests):
    """Digests (a sequence of 16-byte strings, or an array of shape (k, 16)) as a uint8 array
    of shape (k, 16)."""
    if isinstance(digests, np.ndarray):
        return np.ascontiguousarray(digests, dtype=np.uint8).reshape(-1, DIGEST_BYTES)
    digests = list(digests)
    return np.frombuffer(b"".join(digests), dtype=np.uint8).reshape(len(digests),
                                                                   DIGEST_BYTES).copy()


class DigestStore:
    """The ledger's per-slot digests: one uint8 array of shape (capacity, 16), 16 bytes a
    sample (a free slot holds zeros).

    ``store[slot]`` reads one digest as ``bytes``; ``store[slots]`` (an index array) and
    ``store[slots] = values`` read and write rows of the array, as the undo journal does;
    :meth:`write` takes digests as ``bytes`` or as an array.  Arrays are replaced, never
    resized in place (:meth:`grown`, :meth:`taken`), like the ledger's other arrays.
    """

    def __init__(self, capacity):
        self.a = np.zeros((int(capacity), DIGEST_BYTES), dtype=np.uint8)

    def __len__(self):
        return self.a.shape[0]

    @property
    def nbytes(self):
        return self.a.nbytes

    def __getitem__(self, key):
        if isinstance(key, (int, np.integer)):
            return self.a[int(key)].tobytes()
        return self.a[key].copy()

    def __setitem__(self, key, value):
        self.a[key] = 0 if value is None else value

    def write(self, slots, digests):
        """Store ``digests`` (bytes or an array of shape (k, 16)) at ``slots``."""
        self.a[np.asarray(slots, dtype=np.intp)] = as_digest_array(digests)

    def grown(self, capacity):
        out = DigestStore(capacity)
        out.a[:len(self)] = self.a
        return out

    def taken(self, keep, capacity):
        """A new store holding the digests of slots ``keep`` at 0..len(keep)-1."""
        out = DigestStore(capacity)
        out.a[:len(keep)] = self.a[keep]
        return out

    def dense(self, slots):
        """The digests at ``slots`` as a (k, 16) uint8 array."""
        return self.a[np.asarray(slots, dtype=np.intp)].copy()

    def matches(self, slots, D):
        """Whether the digest stored at ``slots[i]`` is ``D[i]`` (a bool array)."""
        return np.all(self.a[np.asarray(slots, dtype=np.intp)] == D, axis=1)

    def lookup(self, D, active):
        """Per digest of ``D``, the active slots holding it (a list of lists)."""
        index = {}
        live = np.flatnonzero(active[:len(self)])
        raw = self.a[live].tobytes()
        for j, s in enumerate(live.tolist()):
            index.setdefault(raw[j * DIGEST_BYTES:(j + 1) * DIGEST_BYTES], []).append(s)
        return [list(index.get(d.tobytes(), ())) for d in D]


def digest_keys(D):
    """The two 64-bit halves of (k, 16) uint8 digests: the sort key and its check."""
    q = np.ascontiguousarray(D, dtype=np.uint8).reshape(-1, DIGEST_BYTES).view("<u8")
    return q[:, 0].astype(np.uint64), q[:, 1].astype(np.uint64)


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
        return sum(k.nbytes + c.nbytes + s.nbytes for k, c, s in self.segments) + \
            self.tail.nbytes + 40 * len(self.overlay)

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
            over = np.array([int(s) in self.overlay for s in slots[head]], dtype=bool) \
                if self.overlay else np.zeros(head.size, dtype=bool)
            for i in head[over].tolist():
                v = self.overlay[int(slots[i])]
                ok[i] = v is not None and bool(np.all(v == D[i]))
            plain = head[~over]
            k1, k2 = digest_keys(D[plain])
            found = self._unique_head(k1, k2)
            ok[plain] = found == slots[plain]
            for j in np.flatnonzero(found == -2).tolist():
                ok[plain[j]] = int(slots[plain[j]]) in self._head_candidates(
                    k1[j:j + 1], k2[j:j + 1])[0]
        return ok

    def lookup(self, D, active):
        """Per digest of ``D``, the active slots holding it (a list of lists)."""
        D = np.ascontiguousarray(D, dtype=np.uint8).reshape(-1, DIGEST_BYTES)
        k1, k2 = digest_keys(D)
        found = self._unique_head(k1, k2)
        out = [[int(f)] if f >= 0 else [] for f in found.tolist()]
        for j in np.flatnonzero(found == -2).tolist():
            out[j] = self._head_candidates(k1[j:j + 1], k2[j:j + 1])[0]
        over = self.overlay
        for j, c in enumerate(out):  # fit slots since deleted or rewritten do not count
            if c and (len(c) > 1 or not active[c[0]] or c[0] in over):
                out[j] = [s for s in c if active[s] and s not in over]
        extra = {}
        for s, v in over.items():
            if v is not None and active[s]:
                extra.setdefault(v.tobytes(), []).append(s)
        live = np.flatnonzero(active[self.n0:self.n0 + len(self.tail)])
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
        over = {int(s): self.overlay[int(s)] for s in slots[slots < self.n0].tolist()
                if int(s) in self.overlay} if self.overlay else {}
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
        out.a[:len(keep)] = self.dense(keep)
        return out


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
        self.tail = np.full((max(int(capacity) - self.n0, 0),) + self._row_shape, dead,
                            dtype=self.dtype)
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
        v = s.astype(self.dtype) if self.rule == "slot" else np.full(s.shape, self.rule,
                                                                      dtype=self.dtype)
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
        same = (hv == self._rule(hs)) | (~(act[:, None] if self.width else act) &
                                         (hv == self.dead))
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
        out = LazyColumn(self._led, self.n0, capacity, self.rule, self.dead, self.dtype,
                         self.width)
        out.tail[:self.tail.shape[0]] = self.tail
        out.patches = dict(self.patches)
        return out


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
        pos = np.minimum(np.searchsorted(keys, ids), self.m - 1)
        return np.where(keys[pos] == ids, self.vals[pos], -1).astype(np.intp, copy=False)

    def append(self, ids, slots):
        """Add new ids, all larger than any held (written past the end: an undo only needs the
        old length back)."""
        k = ids.size
        if self.m + k > self.keys.size:
            self._rebuild(self.m - self.dead + k)
        m = self.m
        self.keys[m: m + k] = ids
        self.vals[m: m + k] = slots
        self.m = m + k

    def remove(self, ids, journal=None):
        """Tombstone ``ids`` (all present); ``journal`` receives the undo record."""
        pos = np.searchsorted(self.keys[: self.m], ids)
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


class Ledger:
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

    def __init__(self, n_features, keep_rows=True, keep_digests=False, capacity=16, growth=2.0,
                 n_outputs=0, sparse_rows=False, digest_scheme=None):
        capacity = max(int(capacity), 1)
        self.sparse_rows = bool(sparse_rows) and bool(keep_rows)
        self.growth = float(growth)
        self.n_features = int(n_features)
        self.keep_rows = bool(keep_rows)
        self.keep_digests = bool(keep_digests)
        self.digest_key = secrets.token_bytes(KEY_BYTES) if keep_digests else None
        self.digest_scheme = (digest_scheme or DEFAULT_SCHEME) if keep_digests else None
        self.X = (SparseRows(capacity, self.n_features) if self.sparse_rows
                  else np.zeros((capacity, self.n_features if keep_rows else 0)))
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
        if np.any(slots < 0):
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
            raise ValueError("this model keeps no labels (keep_data=False): give the samples' "
                             "current targets")
        y = np.full(slots.size, np.nan)
        for c in np.asarray(candidates, dtype=np.float64):
            hit = self.digests.matches(slots, self.records(X, np.full(slots.size, c)))
            y[hit] = c
        bad = np.flatnonzero(np.isnan(y))
        if bad.size:
            k = int(bad[0])
            raise ValueError(f"row {k} of X is not sample id {int(self.ids[slots[k]])} of this "
                             "model")
        return y

    # ------------------------------------------------------------ transactions
    # An update changes the ledger through the methods below.  Between ``begin`` and
    # ``commit`` each of them records how to undo itself, at a cost proportional to the slots
    # it touches; ``rollback`` puts the ledger back exactly as it was at ``begin``, whatever
    # raised in between (an interruption included).  Growth and compaction replace the arrays
    # rather than resize them in place, so that the arrays of before survive both.
    _ARRAYS = ("X", "y", "w", "ids", "active", "digests")

    def begin(self):
        """Start recording undo information for the changes that follow."""
        refs = {a: getattr(self, a) for a in self._ARRAYS}
        scalars = (self.next_id, self.end, self._n, list(self._free), list(self._freed),
                   self.weighted)
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
            if entry is _COMPACTED:
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
        for a in ("X", "y", "w", "ids", "active") if self.keep_rows else ("y", "w", "ids",
                                                                           "active"):
            arr = getattr(self, a)
            j.append((arr, slots, arr[slots].copy()))
        if self.keep_digests:
            j.append((self.digests, slots, self.digests[slots]))

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
        self.X, self.y, self.w, self.ids, self.active = grown["X"], grown["y"], grown["w"], \
            grown["ids"], grown["active"]
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
        self._record(slots)
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
                self.X[slots[0]:slots[-1] + 1] = X  # a block copy, no scatter
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
        """Deactivate ``slots``; they become reusable only after :meth:`release`."""
        self._record(slots)
        self._index.remove(self.ids[slots], self._journal)
        self._n -= len(slots)
        self._freed.extend(slots.tolist())
        self.active[slots] = False
        self.ids[slots] = -1
        self.y[slots] = 0.0
        self.w[slots] = 0.0
        if self.keep_rows:
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
            self._free, self._freed = self._free + [s for s in self._freed if s in ok], \
                [s for s in self._freed if s not in ok]

    def compact(self):
        """Move the active samples to slots 0..n-1 (in id order); returns the old slots kept."""
        if self._journal is not None:
            self._journal.append(_COMPACTED)
        keep = self.active_slots()
        n = keep.size
        cap = max(16, int(self.growth * n) + 1)
        X = (SparseRows(cap, self.n_features) if self.sparse_rows
             else np.zeros((cap, self.X.shape[1])))
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
        self.X, self.y, self.w, self.ids, self.active, self.digests = X, y, w, ids, active, \
            digests
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
        out = {"ledger_ids": self.ids[keep],
               "ledger_next_id": np.array(self.next_id, dtype=np.int64)}
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
    def saved_shapes(cls, n, n_features, keep_rows, keep_digests, n_outputs=0,
                     sparse_rows=False):
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
    def from_range(cls, n_features, n, digests, capacity, n_outputs=0, growth=1.5,
                   key=None, digest_scheme=DEFAULT_SCHEME):
        """A range ledger (see the module docstring) of ``n`` samples fitted without rows,
        labels or weights: ids 0..n-1 at slots 0..n-1, every weight 1, and ``digests`` a
        :class:`SortedDigests` of those samples (made with ``key``)."""
        capacity = max(int(capacity), n + 1)
        led = cls(n_features, keep_rows=False, keep_digests=True, capacity=1,
                  growth=growth, n_outputs=n_outputs, digest_scheme=digest_scheme)
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

    @classmethod
    def from_arrays(cls, arrays, n_features, keep_rows, keep_digests, n_outputs=0,
                    sparse_rows=False, digest_scheme=DEFAULT_SCHEME):
        """The ledger written by :meth:`to_arrays`; ValueError naming the problem when the
        arrays are inconsistent (shapes, ids, next id; sparse rows: index ranges, sorted
        column indices, finite non-zero values)."""
        shapes = cls.saved_shapes(np.shape(arrays["ledger_ids"])[0] if
                                  np.ndim(arrays["ledger_ids"]) == 1 else -1,
                                  n_features, keep_rows, keep_digests, n_outputs, sparse_rows)
        for name, (shape, dtype) in shapes.items():
            a = arrays.get(name)
            if a is None or not (shape(a.shape) if callable(shape) else a.shape == shape) or \
                    a.dtype.kind != dtype[0] or a.dtype.itemsize != int(dtype[1:]):
                raise ValueError(f"corrupt model file: the ledger's {name} is missing or has "
                                 f"the wrong shape or type")
        ids = np.asarray(arrays["ledger_ids"], dtype=np.int64)
        n = ids.size
        next_id = int(arrays["ledger_next_id"])
        if not 0 < next_id <= cls.MAX_ID:
            raise ValueError("corrupt model file: the ledger's next id is out of range")
        if n == 0:
            raise ValueError("corrupt model file: the ledger holds no sample")
        if ids[0] < 0 or ids[-1] >= next_id or (n > 1 and not np.all(np.diff(ids) > 0)):
            raise ValueError("corrupt model file: the ledger's ids are not increasing ids below "
                             "its next id")
        led = cls(n_features, keep_rows=keep_rows, keep_digests=keep_digests,
                  capacity=max(16, n), n_outputs=n_outputs, sparse_rows=sparse_rows,
                  digest_scheme=digest_scheme)
        if keep_rows and sparse_rows:
            led.X[:n] = _checked_csr(arrays, n, n_features)
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
                raise ValueError("corrupt model file: the sample weights are not n finite "
                                 "non-negative numbers")
            led.w[:n] = w
            led.weighted = True
        led.end = n
        led.next_id = next_id
        led._index.reset(ids, np.arange(n, dtype=np.intp))
        led._n = n
        return led


def _checked_csr(arrays, n, n_features):
    """The saved sparse rows as a ``csr_matrix``, after checking that the components are
    canonical CSR of ``n`` rows of width ``n_features``: ``indptr`` from 0 to nnz, not
    decreasing; column indices in range and increasing within each row; values finite and not
    zero."""
    indptr = np.asarray(arrays["ledger_X_indptr"], dtype=np.int64)
    indices = np.asarray(arrays["ledger_X_indices"], dtype=np.int64)
    data = np.asarray(arrays["ledger_X_data"], dtype=np.float64)
    nnz = data.size
    if indices.size != nnz or indptr.size != n + 1 or indptr[0] != 0 or indptr[-1] != nnz or \
            np.any(np.diff(indptr) < 0):
        raise ValueError("corrupt model file: the sparse rows' index pointer does not run from "
                         "0 to the number of stored values")
    if nnz and (indices.min() < 0 or indices.max() >= n_features):
        raise ValueError("corrupt model file: a sparse row's column index is out of range")
    if nnz > 1:
        across = np.zeros(nnz - 1, dtype=bool)
        starts = indptr[1:-1]
        starts = starts[(starts > 0) & (starts < nnz)]
        across[starts - 1] = True
        if not np.all((np.diff(indices) > 0) | across):
            raise ValueError("corrupt model file: a sparse row's column indices are not sorted "
                             "and distinct")
    if not np.all(np.isfinite(data)) or np.any(data == 0.0):
        raise ValueError("corrupt model file: the sparse rows hold NaN, inf or stored zeros")
    return sp.csr_matrix((data, indices.astype(np.int32) if n_features < 2**31 else indices,
                          indptr), shape=(n, n_features))
