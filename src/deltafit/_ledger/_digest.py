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

from deltafit.utils._numba import HAVE_NUMBA, _numba

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


# ------------------------------------------------------------------- numba
if HAVE_NUMBA:  # pragma: no branch - depends on the environment
    _U = np.uint64

    @_numba.njit(cache=True, nogil=True, inline="always")
    def _rotl_nb(x, r):
        return (x << _U(r)) | (x >> _U(64 - r))

    @_numba.njit(cache=True, nogil=True, inline="always")
    def _sipround_nb(v0, v1, v2, v3):
        """One SipRound (compiled twin of :func:`_sipround`)."""
        v0 += v1
        v1 = _rotl_nb(v1, 13) ^ v0
        v0 = _rotl_nb(v0, 32)
        v2 += v3
        v3 = _rotl_nb(v3, 16) ^ v2
        v0 += v3
        v3 = _rotl_nb(v3, 21) ^ v0
        v2 += v1
        v1 = _rotl_nb(v1, 17) ^ v2
        v2 = _rotl_nb(v2, 32)
        return v0, v1, v2, v3

    @_numba.njit(cache=True, nogil=True)
    def _sip_nb(k0, k1, a, b, c):
        v0 = _U(0x736F6D6570736575) ^ k0
        v1 = _U(0x646F72616E646F6D) ^ k1
        v2 = _U(0x6C7967656E657261) ^ k0
        v3 = _U(0x7465646279746573) ^ k1
        for j in range(4):
            m = a if j == 0 else (b if j == 1 else (c if j == 2 else _U(24) << _U(56)))
            v3 ^= m
            for _ in range(2):
                v0, v1, v2, v3 = _sipround_nb(v0, v1, v2, v3)
            v0 ^= m
        v2 ^= _U(0xFF)
        for _ in range(4):
            v0, v1, v2, v3 = _sipround_nb(v0, v1, v2, v3)
        return v0 ^ v1 ^ v2 ^ v3

    @_numba.njit(cache=True, nogil=True)
    def _nh_pairs_nb(Q, Ke1, Ko1, Ke2, Ko2, h):
        """Add to ``h[r]`` the two NH sums of row r of ``Q`` (64-bit words, each the pair of
        32-bit words (low, high) of the record): a loop that compiles to SIMD 32x32->64-bit
        multiplies."""
        k, w = Q.shape
        m32 = _U(0xFFFFFFFF)
        for r in range(k):
            h1 = h[r, 0]
            h2 = h[r, 1]
            for i in range(w):
                x = Q[r, i]
                xh = x >> _U(32)
                h1 += ((x + Ke1[i]) & m32) * ((xh + Ko1[i]) & m32)
                h2 += ((x + Ke2[i]) & m32) * ((xh + Ko2[i]) & m32)
            h[r, 0] = h1
            h[r, 1] = h2

    @_numba.njit(cache=True, nogil=True)
    def _finish_nb(h, n_words, s1, s2, out):
        for r in range(h.shape[0]):
            out[r, 0] = _sip_nb(s1[0], s1[1], h[r, 0], h[r, 1], n_words)
            out[r, 1] = _sip_nb(s2[0], s2[1], h[r, 0], h[r, 1], n_words)

    def _digests_nb(Wx, Wy, K1, K2, s1, s2, out):
        k = Wx.shape[0]
        h = np.zeros((k, 2), dtype=np.uint64)
        wx = Wx.shape[1]
        for W, a, b in ((Wx, 0, wx), (Wy, wx, wx + Wy.shape[1])):
            Q = W.view("<u8")  # word pairs (low word first: little-endian)
            k1, k2 = K1[a:b].astype(np.uint64), K2[a:b].astype(np.uint64)
            _nh_pairs_nb(Q, k1[0::2].copy(), k1[1::2].copy(), k2[0::2].copy(), k2[1::2].copy(), h)
        _finish_nb(h, _U(wx + Wy.shape[1]), s1, s2, out)


def nh_sip_digests(X, y, key, use_numba=None):
    """The ``"nh-sip"`` digests (see the module docstring) of the records (X, y): a (k, 16)
    uint8 array.  ``use_numba`` None: numba when installed (the NumPy route gives the same
    bytes; the tests compare them)."""
    k = np.shape(X)[0]
    if k == 0:
        return np.zeros((0, 16), dtype=np.uint8)
    Wx, Wy = _words(X, k), _words(y, k)
    K1, K2, s1, s2 = derive_keys(key, Wx.shape[1] + Wy.shape[1])
    if use_numba is None:
        use_numba = HAVE_NUMBA
    if use_numba:
        out = np.empty((k, 2), dtype=np.uint64)
        _digests_nb(Wx, Wy, K1, K2, s1, s2, out)
        out = out.astype("<u8", copy=False)
    else:
        out = _digests_numpy(Wx, Wy, K1, K2, s1, s2)
    return np.ascontiguousarray(out).view(np.uint8).reshape(k, 16)
