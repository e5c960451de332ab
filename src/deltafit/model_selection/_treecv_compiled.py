"""TreeCV's compiled recursion and the random order of its training phases (numba, optional).

Runs whole subtrees of TreeCV (Joulani, Gyorgy and Szepesvari 2015, "Fast Cross-Validation for
Incremental Learning", Algorithm 1) for the linear stream learners, whose per-sample loops and
float-vector states are those of :mod:`deltafit.solvers._sgd`.  :func:`tree_run` is an
explicit-stack loop with tail calls, so that it never returns to Python per node;
:func:`shuffled_positions` draws the order of a training phase of the randomized TreeCV (§5) and
is also used by the Python recursion, so both see the same order.
"""

from __future__ import annotations

import numpy as np

from deltafit.solvers._sgd import decision_range, fit_range, fit_rows
from deltafit.utils._numba import njit

__all__ = ["shuffled_positions", "tree_run"]

_MASK32 = 0xFFFFFFFF


# ---------------------------------------------------------------------------
# random order of a training phase (the randomized TreeCV of §5)
# ---------------------------------------------------------------------------
@njit
def _mix(seed, a, b):
    # integer hash kept below 2**32 at every step: no overflow in int64, numba or Python alike
    h = seed & _MASK32
    h = ((h ^ (a & _MASK32)) * 0x45D9F3B) & _MASK32
    h ^= h >> 16
    h = ((h ^ (b & _MASK32)) * 0x45D9F3B) & _MASK32
    h ^= h >> 16
    h = (h * 0x45D9F3B) & _MASK32
    h ^= h >> 16
    return h if h != 0 else 0x9E3779B9


@njit
def shuffled_positions(start, stop, seed, a, b, buf):
    """Fill ``buf[:stop-start]`` with a permutation of ``start .. stop-1`` drawn from the seed
    ``(seed, a, b)`` (xorshift32 + Fisher–Yates); the same numbers in numba and in Python."""
    n = stop - start
    for i in range(n):
        buf[i] = start + i
    x = _mix(seed, a, b)
    for i in range(n - 1, 0, -1):
        x ^= (x << 13) & _MASK32
        x ^= x >> 17
        x ^= (x << 5) & _MASK32
        j = (x * (i + 1)) >> 32
        tmp = buf[i]
        buf[i] = buf[j]
        buf[j] = tmp


@njit
def _feed(kind, state, X, y, start, stop, shuffle, seed, a, b, buf, params, counts):
    if stop <= start:
        return
    if shuffle:
        shuffled_positions(start, stop, seed, a, b, buf)
        fit_rows(kind, state, X, y, buf[: stop - start], params)
    else:
        fit_range(kind, state, X, y, start, stop, params)
    counts[0] += stop - start
    counts[1] += 1


@njit
def tree_run(kind, state0, X, y, bounds, s0, e0, revert, shuffle, seed, params, out, counts):
    """Algorithm 1 of Joulani et al. over chunks ``s0 .. e0`` from a model trained on the others.

    Chunk ``c`` is rows ``bounds[c] .. bounds[c+1]-1`` of ``X``.  Writes the held-out decision
    values of every row of the chunks into ``out`` and adds to ``counts``
    ``[samples fed, update calls, peak models]``.

    ``revert=False`` copies the node's model for its left subtree (§4.1 "copy"); ``revert=True``
    saves a snapshot, trains the one working model in place and restores it (§4.1
    "save/revert").  The right subtree reuses the node's own model (a tail call), so both keep at
    most ``ceil(log2 k) + 2`` models.
    """
    L = state0.shape[0]
    k = e0 - s0 + 1
    depth = 1
    while (1 << (depth - 1)) < k:
        depth += 1
    models = np.empty((depth + 2, L))
    fs = np.empty(depth + 1, np.int64)
    fe = np.empty(depth + 1, np.int64)
    phase = np.zeros(depth + 1, np.int64)
    if shuffle:
        buf = np.empty(bounds[e0 + 1] - bounds[s0], np.int64)
    else:
        buf = np.empty(0, np.int64)
    models[0, :] = state0
    top = 0
    fs[0] = s0
    fe[0] = e0
    icpt = params[2]
    peak = 1
    while top >= 0:
        s = fs[top]
        e = fe[top]
        if s == e:
            w = 0 if revert else top
            decision_range(kind, models[w], X, bounds[s], bounds[s + 1], icpt, out)
            top -= 1
            continue
        m = (s + e) // 2
        if phase[top] == 0:
            phase[top] = 1
            models[top + 1, :] = models[0] if revert else models[top]
            if top + 2 > peak:
                peak = top + 2
            w = 0 if revert else top + 1
            _feed(
                kind,
                models[w],
                X,
                y,
                bounds[m + 1],
                bounds[e + 1],
                shuffle,
                seed,
                m + 1,
                e,
                buf,
                params,
                counts,
            )
            top += 1
            fs[top] = s
            fe[top] = m
            phase[top] = 0
        else:
            if revert:
                models[0, :] = models[top + 1]
            w = 0 if revert else top
            _feed(
                kind,
                models[w],
                X,
                y,
                bounds[s],
                bounds[m + 1],
                shuffle,
                seed,
                s,
                m,
                buf,
                params,
                counts,
            )
            fs[top] = m + 1
            phase[top] = 0
    if peak > counts[2]:
        counts[2] = peak
