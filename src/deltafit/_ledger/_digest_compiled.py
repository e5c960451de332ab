"""The compiled (numba) loops of the ``"nh-sip"`` record digests: the twins of the NumPy route
in :mod:`deltafit._ledger._digest`, which gives the same bytes (the tests compare them).

Imported by :func:`deltafit._ledger._digest.nh_sip_digests` on its first compiled call, so that
``import deltafit`` never loads numba (``utils/_numba``'s rule).
"""

from __future__ import annotations

import numpy as np

from deltafit.utils._numba import _numba

__all__ = ["digests_nb"]

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


def digests_nb(Wx, Wy, K1, K2, s1, s2, out):
    k = Wx.shape[0]
    h = np.zeros((k, 2), dtype=np.uint64)
    wx = Wx.shape[1]
    for W, a, b in ((Wx, 0, wx), (Wy, wx, wx + Wy.shape[1])):
        Q = W.view("<u8")  # word pairs (low word first: little-endian)
        k1, k2 = K1[a:b].astype(np.uint64), K2[a:b].astype(np.uint64)
        _nh_pairs_nb(Q, k1[0::2].copy(), k1[1::2].copy(), k2[0::2].copy(), k2[1::2].copy(), h)
    _finish_nb(h, _U(wx + Wy.shape[1]), s1, s2, out)
