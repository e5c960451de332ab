"""The keyed digest by which a ``keep_data=False`` model recognises a sample: 16 bytes of a
(row, label) record, computed vectorised (numba when installed, else NumPy).

Scheme ``"nh-sip"`` (files of format 3 on): the record (the float64 row, then the float64
label(s)) is read as ``2L`` little-endian 32-bit words ``m`` and compressed by two NH hashes
with independent keys ``K¹, K²`` (Black, Halevi, Krawczyk, Krovetz & Rogaway, "UMAC: Fast and
Secure Message Authentication", CRYPTO 1999, §4, eq. for NH):

    NH_K(m) = Σ_{i<L} ((m_{2i} + K_{2i}) mod 2³²) · ((m_{2i+1} + K_{2i+1}) mod 2³²)  mod 2⁶⁴,

whose collision probability for two distinct records of the same length is at most 2⁻³² per
key (ibid., Thm 4.2), so at most 2⁻⁶⁴ for the pair of keys.  The two 64-bit values and the
record's word count are then the 24-byte message of two SipHash-2-4 PRFs with independent
128-bit keys (Aumasson & Bernstein, "SipHash: a fast short-input PRF", INDOCRYPT 2012, §2),
whose outputs are the digest's two halves.  Two distinct records of a model (all records of
one model have the same length) thus share a digest with probability at most 2⁻⁶⁴ + 2⁻¹²⁸
over the key; as with the keyed BLAKE2b of scheme ``"blake2b"`` (format 2), the digest reveals
a record only to someone who holds the key and guesses the record.  The records are data, not
chosen against the key: the bound is what the ledger needs to refuse a row that is not a
training sample (a removal of a foreign row would corrupt the model silently).

All the key material comes from the ledger's 32-byte random key through SHAKE-256, so a model
file stores only that key.  Cost: L multiply-adds of 32-bit halves per key and record (no
per-row Python work; numba's loop over the 64-bit words vectorises: about 0.08 µs a 408-byte
record, against the keyed BLAKE2b's per-row call, about 1.6 µs).
"""

from __future__ import annotations

import hashlib

import numpy as np

__all__ = ["SCHEMES", "nh_sip_digests", "derive_keys"]

SCHEMES = ("blake2b", "nh-sip")
_M32 = np.uint64(0xFFFFFFFF)


def derive_keys(key, n_words):
    """``(K1, K2, s1, s2)``: the two NH keys (uint32 arrays of ``n_words`` words) and the two
    SipHash keys (uint64 pairs ``(k0, k1)``), all read from SHAKE-256 of the ledger's key."""
    raw = hashlib.shake_256(b"deltafit.nh-sip|" + bytes(key)).digest(8 * n_words + 32)
    words = np.frombuffer(raw[: 8 * n_words], dtype="<u4")
    sip = np.frombuffer(raw[8 * n_words :], dtype="<u8").astype(np.uint64)
    return (
        words[:n_words].astype(np.uint32),
        words[n_words:].astype(np.uint32),
        sip[:2].copy(),
        sip[2:].copy(),
    )


def _words(A, k):
    """A float64 array of k rows as a C-contiguous (k, 2·width) array of little-endian 32-bit
    words (no copy for a C-contiguous float64 array on a little-endian machine)."""
    A = np.ascontiguousarray(np.asarray(A, dtype=np.float64).reshape(k, -1), dtype="<f8")
    return A.view("<u4")


# ------------------------------------------------------------------- NumPy
def _rotl(x, r):
    return (x << np.uint64(r)) | (x >> np.uint64(64 - r))


def _sipround(v0, v1, v2, v3):
    v0 = v0 + v1
    v1 = _rotl(v1, 13) ^ v0
    v0 = _rotl(v0, 32)
    v2 = v2 + v3
    v3 = _rotl(v3, 16) ^ v2
    v0 = v0 + v3
    v3 = _rotl(v3, 21) ^ v0
    v2 = v2 + v1
    v1 = _rotl(v1, 17) ^ v2
    v2 = _rotl(v2, 32)
    return v0, v1, v2, v3


def _siphash_words(k0, k1, words, nbytes):
    """SipHash-2-4 (64-bit output) of messages of whole 64-bit words (``words``: a list of
    uint64 arrays, one per word, or scalars), ``nbytes`` their length, vectorised."""
    v0 = np.uint64(0x736F6D6570736575) ^ k0
    v1 = np.uint64(0x646F72616E646F6D) ^ k1
    v2 = np.uint64(0x6C7967656E657261) ^ k0
    v3 = np.uint64(0x7465646279746573) ^ k1
    with np.errstate(over="ignore"):
        for m in list(words) + [np.uint64(nbytes << 56)]:
            v3 = v3 ^ m
            v0, v1, v2, v3 = _sipround(*_sipround(v0, v1, v2, v3))
            v0 = v0 ^ m
        v2 = v2 ^ np.uint64(0xFF)
        for _ in range(4):
            v0, v1, v2, v3 = _sipround(v0, v1, v2, v3)
    return v0 ^ v1 ^ v2 ^ v3


def _nh_numpy(W, K):
    """NH of the rows of ``W`` (32-bit words) under key ``K``, on 64-bit word pairs."""
    Q = W.view("<u8").astype(np.uint64, copy=False)
    K = K.astype(np.uint64)
    m32 = np.uint64(0xFFFFFFFF)
    with np.errstate(over="ignore"):
        a = (Q + K[0::2]) & m32  # low word + key, mod 2^32
        b = ((Q >> np.uint64(32)) + K[1::2]) & m32  # high word + key, mod 2^32
        a *= b  # < 2^64: exact
        return a.sum(axis=1, dtype=np.uint64)  # mod 2^64


def _digests_numpy(Wx, Wy, K1, K2, s1, s2):
    # NH is a sum over word pairs: the record x‖y hashes as the x part plus the y part
    w = Wx.shape[1]
    n_words = np.uint64(w + Wy.shape[1])
    with np.errstate(over="ignore"):
        h1 = _nh_numpy(Wx, K1[:w]) + _nh_numpy(Wy, K1[w:])
        h2 = _nh_numpy(Wx, K2[:w]) + _nh_numpy(Wy, K2[w:])
    msg = [h1, h2, np.full(h1.shape, n_words, dtype=np.uint64)]
    out = np.empty((Wx.shape[0], 2), dtype="<u8")
    out[:, 0] = _siphash_words(s1[0], s1[1], msg, 24)
    out[:, 1] = _siphash_words(s2[0], s2[1], msg, 24)
    return out


def nh_sip_digests(X, y, key, use_numba=None):
    """The ``"nh-sip"`` digests (see the module docstring) of the records (X, y): a (k, 16)
    uint8 array.  ``use_numba`` None: numba when installed (the NumPy route gives the same
    bytes; the tests compare them)."""
    k = np.shape(X)[0]
    if k == 0:
        return np.zeros((0, 16), dtype=np.uint8)
    Wx, Wy = _words(X, k), _words(y, k)
    K1, K2, s1, s2 = derive_keys(key, Wx.shape[1] + Wy.shape[1])
    if use_numba is None:  # numba is imported here, on the first digest, not with deltafit
        from deltafit.utils._numba import HAVE_NUMBA

        use_numba = HAVE_NUMBA
    if use_numba:
        from deltafit._ledger._digest_compiled import digests_nb

        out = np.empty((k, 2), dtype=np.uint64)
        digests_nb(Wx, Wy, K1, K2, s1, s2, out)
        out = out.astype("<u8", copy=False)
    else:
        out = _digests_numpy(Wx, Wy, K1, K2, s1, s2)
    return np.ascontiguousarray(out).view(np.uint8).reshape(k, 16)
