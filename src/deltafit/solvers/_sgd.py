"""Compiled per-sample loops of the linear stream learners (numba, optional).

Used by :class:`deltafit.stream.Pegasos`, :class:`deltafit.stream.LSQSGD` and by TreeCV's compiled
recursion (:mod:`deltafit.model_selection._treecv_compiled`); a ground-floor module, so that both
packages import it and neither imports the other.

A learner's whole state is one float64 vector, so that a copy, a snapshot and a restore are one
``memcpy`` and TreeCV can keep its O(log k) saved models in one 2-d array.  ``d1 = d + 1``: the
last coordinate belongs to the intercept, a regularized constant feature of value ``icpt``
(``0.0`` without an intercept).

* Pegasos (Shalev-Shwartz et al. 2011, Alg. 1) — ``[v (d1), scale, t, ‖v‖²]``, with the weight
  vector ``w = scale · v`` so that the shrinkage ``w ← (1 − 1/t) w`` costs O(1).
* LSQSGD (Nemirovski et al. 2009, robust stochastic approximation, Euclidean setup) —
  ``[w (d1), w̄ (d1), t, Σγ]``; ``w̄`` is the γ-weighted average of the points at which the
  gradients were taken, the model used for predictions.

``params`` is ``[lam or alpha, radius, icpt]``.
"""

from __future__ import annotations

import math

import numpy as np

from deltafit.utils._numba import njit

__all__ = [
    "PEGASOS",
    "LSQSGD",
    "state_size",
    "new_state",
    "fit_rows",
    "fit_range",
    "coef_of",
    "decision_range",
]

PEGASOS = 0
LSQSGD = 1


def state_size(kind: int, d1: int) -> int:
    """Length of the state vector of a learner with ``d1`` coefficients."""
    return d1 + 3 if kind == PEGASOS else 2 * d1 + 2


def new_state(kind: int, d1: int) -> np.ndarray:
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
def fit_rows(
    kind: int, state: np.ndarray, X: np.ndarray, y: np.ndarray, rows: np.ndarray, params: np.ndarray
) -> None:
    """Feed the rows ``rows`` (in that order) to the learner in ``state``, in place."""
    p, radius, icpt = params[0], params[1], params[2]
    if kind == PEGASOS:
        for r in range(rows.shape[0]):
            _pegasos_step(state, X, rows[r], y[rows[r]], p, radius, icpt)
    else:
        for r in range(rows.shape[0]):
            _lsqsgd_step(state, X, rows[r], y[rows[r]], p, radius, icpt)


@njit
def fit_range(
    kind: int,
    state: np.ndarray,
    X: np.ndarray,
    y: np.ndarray,
    start: int,
    stop: int,
    params: np.ndarray,
) -> None:
    """Feed rows ``start .. stop-1`` in order, in place."""
    p, radius, icpt = params[0], params[1], params[2]
    if kind == PEGASOS:
        for i in range(start, stop):
            _pegasos_step(state, X, i, y[i], p, radius, icpt)
    else:
        for i in range(start, stop):
            _lsqsgd_step(state, X, i, y[i], p, radius, icpt)


@njit
def coef_of(kind: int, state: np.ndarray, d1: int) -> np.ndarray:
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
def decision_range(
    kind: int, state: np.ndarray, X: np.ndarray, start: int, stop: int, icpt: float, out: np.ndarray
) -> None:
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
