"""Compiled per-sample loops of the stream learners and of TreeCV (numba, optional).

A learner's whole state is one float64 vector, so that a copy, a snapshot and a restore are one
``memcpy`` and TreeCV can keep its O(log k) saved models in one 2-d array.  ``d1 = d + 1``: the
last coordinate belongs to the intercept, a regularized constant feature of value ``icpt``
(``0.0`` without an intercept; DESIGN.md §1).

* Pegasos (Shalev-Shwartz et al. 2011, Alg. 1) — ``[v (d1), scale, t, ‖v‖²]``, with the weight
  vector ``w = scale · v`` so that the shrinkage ``w ← (1 − 1/t) w`` costs O(1).
* LSQSGD (Nemirovski et al. 2009, robust stochastic approximation, Euclidean setup) —
  ``[w (d1), w̄ (d1), t, Σγ]``; ``w̄`` is the γ-weighted average of the points at which the
  gradients were taken, the model used for predictions.

``params`` is ``[lam or alpha, radius, icpt]``.  TreeCV's recursion (Joulani et al. Algorithm 1)
is :func:`tree_run`, an explicit-stack loop with tail calls, so that it never returns to Python
per node.
"""

from __future__ import annotations

import math

import numpy as np

from .._numba import njit

PEGASOS = 0
LSQSGD = 1

_MASK32 = 0xFFFFFFFF


def state_size(kind, d1):
    """Length of the state vector of a learner with ``d1`` coefficients."""
    return d1 + 3 if kind == PEGASOS else 2 * d1 + 2


def new_state(kind, d1):
    """The state of a learner that has seen nothing (w = 0)."""
    s = np.zeros(state_size(kind, d1))
    if kind == PEGASOS:
        s[d1] = 1.0
    return s


@njit
def _pegasos_step(state, X, i, yi, lam, radius, icpt):
    d = X.shape[1]
    d1 = d + 1
    t = state[d1 + 1] + 1.0
    state[d1 + 1] = t
    dot = icpt * state[d]
    for j in range(d):
        dot += X[i, j] * state[j]
    margin = yi * state[d1] * dot
    if t == 1.0:
        # 1 - eta * lam = 0: the first step forgets w_0 (= 0 anyway)
        for j in range(d1):
            state[j] = 0.0
        state[d1] = 1.0
        state[d1 + 2] = 0.0
        dot = 0.0
    else:
        state[d1] *= 1.0 - 1.0 / t
    if margin < 1.0:
        c = yi / (lam * t * state[d1])
        xsq = icpt * icpt
        for j in range(d):
            xj = X[i, j]
            state[j] += c * xj
            xsq += xj * xj
        state[d] += c * icpt
        state[d1 + 2] += 2.0 * c * dot + c * c * xsq
    if radius < math.inf:
        nrm = state[d1] * math.sqrt(max(state[d1 + 2], 0.0))
        if nrm > radius:
            state[d1] *= radius / nrm
    if state[d1] < 1e-9:
        sc = state[d1]
        for j in range(d1):
            state[j] *= sc
        state[d1 + 2] *= sc * sc
        state[d1] = 1.0


@njit
def _lsqsgd_step(state, X, i, yi, alpha, radius, icpt):
    d = X.shape[1]
    d1 = d + 1
    t = state[2 * d1] + 1.0
    state[2 * d1] = t
    gamma = alpha if alpha > 0.0 else 1.0 / math.sqrt(t)
    gsum = state[2 * d1 + 1] + gamma
    state[2 * d1 + 1] = gsum
    f = gamma / gsum
    dot = icpt * state[d]
    for j in range(d):
        dot += X[i, j] * state[j]
    g = gamma * (dot - yi)
    nrm2 = 0.0
    for j in range(d):
        a = state[j]
        state[d1 + j] += f * (a - state[d1 + j])
        a -= g * X[i, j]
        state[j] = a
        nrm2 += a * a
    a = state[d]
    state[d1 + d] += f * (a - state[d1 + d])
    a -= g * icpt
    state[d] = a
    nrm2 += a * a
    if nrm2 > radius * radius:
        sc = radius / math.sqrt(nrm2)
        for j in range(d1):
            state[j] *= sc


@njit
def fit_rows(kind, state, X, y, rows, params):
    """Feed the rows ``rows`` (in that order) to the learner in ``state``, in place."""
    p, radius, icpt = params[0], params[1], params[2]
    if kind == PEGASOS:
        for r in range(rows.shape[0]):
            _pegasos_step(state, X, rows[r], y[rows[r]], p, radius, icpt)
    else:
        for r in range(rows.shape[0]):
            _lsqsgd_step(state, X, rows[r], y[rows[r]], p, radius, icpt)


@njit
def fit_range(kind, state, X, y, start, stop, params):
    """Feed rows ``start .. stop-1`` in order, in place."""
    p, radius, icpt = params[0], params[1], params[2]
    if kind == PEGASOS:
        for i in range(start, stop):
            _pegasos_step(state, X, i, y[i], p, radius, icpt)
    else:
        for i in range(start, stop):
            _lsqsgd_step(state, X, i, y[i], p, radius, icpt)


@njit
def coef_of(kind, state, d1):
    """The coefficients (length ``d1``, intercept coordinate last) the learner predicts with."""
    out = np.empty(d1)
    if kind == PEGASOS:
        sc = state[d1]
        for j in range(d1):
            out[j] = sc * state[j]
    else:
        for j in range(d1):
            out[j] = state[d1 + j]
    return out


@njit
def decision_range(kind, state, X, start, stop, icpt, out):
    """``out[i] = ⟨coef, [x_i, icpt]⟩`` for rows ``start .. stop-1``."""
    d = X.shape[1]
    d1 = d + 1
    if kind == PEGASOS:
        off = 0
        sc = state[d1]
    else:
        off = d1
        sc = 1.0
    for i in range(start, stop):
        z = icpt * state[off + d]
        for j in range(d):
            z += X[i, j] * state[off + j]
        out[i] = sc * z


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
            _feed(kind, models[w], X, y, bounds[m + 1], bounds[e + 1], shuffle, seed, m + 1, e,
                  buf, params, counts)
            top += 1
            fs[top] = s
            fe[top] = m
            phase[top] = 0
        else:
            if revert:
                models[0, :] = models[top + 1]
            w = 0 if revert else top
            _feed(kind, models[w], X, y, bounds[s], bounds[m + 1], shuffle, seed, s, m,
                  buf, params, counts)
            fs[top] = m + 1
            phase[top] = 0
    if peak > counts[2]:
        counts[2] = peak
