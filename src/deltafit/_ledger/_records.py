"""Sample records: the keyed 16-byte digests that recognise a (row, label) pair, and their
per-slot store.

A ledger that keeps no labels (``keep_data=False``) keeps one digest per sample instead: scheme
``"nh-sip"`` (:mod:`._digest`) for dense rows, a keyed BLAKE2b for scheme
``"blake2b"`` (model files of format 2) and for sparse rows.  :class:`DigestStore` holds them
per slot; a range ledger keeps them sorted instead (:mod:`._sorted`).
"""

from __future__ import annotations

import hashlib

import numpy as np
import scipy.sparse as sp

from deltafit._ledger._digest import SCHEMES, nh_sip_digests
from deltafit._ledger._rows import canonical_csr

__all__ = [
    "DIGEST_BYTES",
    "KEY_BYTES",
    "DEFAULT_SCHEME",
    "digest_array",
    "row_digests",
    "as_digest_array",
    "DigestStore",
    "digest_keys",
]

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
        parts = [
            X.indices[a:b].astype(np.int64).tobytes() + b"|" + X.data[a:b].tobytes()
            for a, b in zip(X.indptr[:-1].tolist(), X.indptr[1:].tolist())
        ]
        return [
            hashlib.blake2b(
                parts[i] + y[i].tobytes(),
                digest_size=DIGEST_BYTES,
                key=key,
                person=b"deltafit.sparse",
            ).digest()
            for i in range(len(parts))
        ]
    X = np.ascontiguousarray(X, dtype=np.float64)
    n = X.shape[0]
    if n == 0:
        return []
    record = np.concatenate(
        [X.reshape(n, -1).view(np.uint8), y.reshape(n, -1).view(np.uint8)], axis=1
    )
    width = record.shape[1]
    flat = memoryview(record.reshape(-1))
    keyed = hashlib.blake2b(digest_size=DIGEST_BYTES, key=key, person=b"deltafit.sample")
    out = []
    for i in range(n):
        h = keyed.copy()
        h.update(flat[i * width : (i + 1) * width])
        out.append(h.digest())
    return out


def as_digest_array(digests):
    """Digests (a sequence of 16-byte strings, or an array of shape (k, 16)) as a uint8 array
    of shape (k, 16)."""
    if isinstance(digests, np.ndarray):
        return np.ascontiguousarray(digests, dtype=np.uint8).reshape(-1, DIGEST_BYTES)
    digests = list(digests)
    return (
        np.frombuffer(b"".join(digests), dtype=np.uint8).reshape(len(digests), DIGEST_BYTES).copy()
    )


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
        out.a[: len(self)] = self.a
        return out

    def taken(self, keep, capacity):
        """A new store holding the digests of slots ``keep`` at 0..len(keep)-1."""
        out = DigestStore(capacity)
        out.a[: len(keep)] = self.a[keep]
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
        live = np.flatnonzero(active[: len(self)])
        raw = self.a[live].tobytes()
        for j, s in enumerate(live.tolist()):
            index.setdefault(raw[j * DIGEST_BYTES : (j + 1) * DIGEST_BYTES], []).append(s)
        return [list(index.get(d.tobytes(), ())) for d in D]


def digest_keys(D):
    """The two 64-bit halves of (k, 16) uint8 digests: the sort key and its check."""
    q = np.ascontiguousarray(D, dtype=np.uint8).reshape(-1, DIGEST_BYTES).view("<u8")
    return q[:, 0].astype(np.uint64), q[:, 1].astype(np.uint64)
