"""The curvature-aware region of a linear model's what-if: the pending change in the eigenbasis
of the stored Hessian, and the two schedules that bound the retrained model with it.

The theorem (Theorem 1 of Okumura et al., "Quick sensitivity analysis for incremental data
modification and its application to leave-one-out CV in linear classification problems",
generalised to a curvature matrix H; Sivan et al., "Incremental sensitivity analysis for
kernelized models", Theorem 1), the Newton ball and the guess-verify-refine iteration are
stated in :mod:`deltafit.sensitivity.regions._curvature`.  Here: ``_LinearExact``, every
sample's exact score interval (small problems, and the array form of cross-validation), and
``_LinearCheap``, the cheap intervals of the H₀-ball (large problems, rows on a Dask cluster).
Both read the pending change through ``_LinearChange``; what every region of one model version
reuses (the eigendecomposition of H₀, the training scores, ``q_i = ‖Φ_i‖_{H₀⁻¹}``) is cached
with the model (:meth:`deltafit.models.FittedProblem.cached`).
"""

from __future__ import annotations

import copy
from typing import Any

import numpy as np
from scipy import linalg
from scipy.linalg import lapack

from deltafit.sensitivity.regions import _ball
from deltafit.sensitivity.regions._curvature_schedule import (
    _GUESS_MARGINS,
    _MAX_REFINE,
    _REFINE_GAIN,
    _SAFE,
    _ExactSchedule,
    curvature_range,
    newton_radius,
)

__all__ = ["small_problem"]

_EXACT_WORK = 4e6  # n p² up to which every training sample's interval is exact ...
_EXACT_N = 1500  # ... and n up to which (beyond, the cached-Hessian intervals)


def small_problem(prob: Any) -> bool:
    """Whether a linear problem takes the small-problem regions (exact intervals, solve)."""
    n, p = prob.n_samples, prob.coef.shape[0]
    return n <= _EXACT_N and n * p * p <= _EXACT_WORK


class _ClusterKey:
    """The order key of the samples the cheap intervals correct one by one, for rows on a
    Dask cluster (picklable: it travels to the workers): logistic ``−q_i`` (the largest
    ``q_i = ‖Φ_i‖_{H₀⁻¹}`` first), squared hinge ``(1 − t_i z_i) / q_i`` over the active
    samples (inf elsewhere); ``q_i`` kept with it."""

    def __init__(self, V, lam, loss):
        self.V, self.lam, self.loss = V, lam, loss

    def __call__(self, Phi, t, w, z):
        psi = Phi @ self.V
        q = np.sqrt(np.einsum("ij,ij->i", psi, psi / self.lam))
        if self.loss.name == "logistic":
            key = -q
        else:
            act = self.loss.d2(t, z) > 0
            key = np.full(q.size, np.inf)
            key[act] = (1.0 - t[act] * z[act]) / np.maximum(q[act], 1e-300)
        return np.column_stack([key, q])


def _cluster_cache(prob, loss, k=None):
    """:func:`_linear_cache` of a model whose rows live on a Dask cluster, over the samples
    the cheap intervals read: the stored Hessian (M, or one pass), then one pass that brings
    back, per row block, the ``k`` samples first in the order of :class:`_ClusterKey` — the
    ``p + 1`` largest ``q_i`` (logistic: κ and the ``p`` corrected samples are those of the
    whole model), or the active squared-hinge samples of smallest ratio, with ``cut`` the
    smallest ratio left on the cluster (:meth:`_LinearCheap._extra` asks for more past it)."""
    H = prob.hessian()
    lam, V = linalg.eigh(H)
    lam = np.maximum(lam, 1.0)
    p = lam.size
    if k is None:
        k = max(p + 1, 16) if loss.name == "logistic" else max(4 * p, 64)
    got = prob.select_rows(_ClusterKey(V, lam, loss), k)
    live, rows = np.asarray(got["handles"], dtype=np.intp), got["rows"]
    t, z, q = got["targets"], got["z"], got["key"][:, 1]
    order = np.argsort(live, kind="stable")
    c = {
        "live": live,
        "z": z,
        "t": t,
        "w": got["weights"],
        "h": loss.d2(t, z),
        "lam": lam,
        "V": V,
        "q": q,
        "sorted": (live[order], order),
        "k": k,
    }
    if loss.name == "logistic":
        c["order"] = np.argsort(-q, kind="stable")
        c["order_psi"] = rows[c["order"]] @ V
    else:
        act = np.flatnonzero(c["h"] > 0)
        ratio = got["key"][act, 0]
        o = np.argsort(ratio, kind="stable")
        c["act"], c["act_ratio"] = act[o], ratio[o]
        c["act_psi"] = rows[act[o]] @ V
        c["act_cut"] = got["cut"]
    return c


def _positions(cache, handles):
    """Positions in the cache's samples of ``handles`` (−1: not among them)."""
    handles = np.asarray(handles, dtype=np.intp)
    if "pos" in cache:
        return cache["pos"][handles]
    srt, order = cache["sorted"]
    at = np.minimum(np.searchsorted(srt, handles), max(srt.size - 1, 0))
    hit = (srt.size > 0) & (srt[at] == handles) if srt.size else np.zeros(handles.size, bool)
    return np.where(hit, order[at] if srt.size else -1, -1)


def _live_rows(rows, live):
    """``rows[live]``: a view of the store (no copy of the n × p rows) when the live handles
    are consecutive, as after a fit."""
    if (
        isinstance(rows, np.ndarray)
        and live.size > 1
        and int(live[-1]) - int(live[0]) == live.size - 1
        and bool(np.all(np.diff(live) == 1))
    ):
        return rows[int(live[0]) : int(live[-1]) + 1]
    return rows[live]


_CHUNK = 1 << 20  # bytes of rows a pass over them takes at a time (fits a core's L2 cache)
_CHORD_WORK = 2e7  # n p² from which the cache bounds H₀ by the chord matrix, q_i in single
_U32 = float(np.finfo(np.float32).eps) / 2  # unit roundoffs
_U64 = float(np.finfo(np.float64).eps) / 2


def _row_norms(rows, B=None, single=True):
    """``‖Φ_i‖²`` of every row and, with ``B``, upper bounds of ``‖Bᵀ Φ_i‖``, in one pass over
    the rows (a cache-sized block at a time: the product reads the rows from the cache).

    ``BᵀΦ_i`` is formed in single precision (half the time of the double product, which is
    most of a first what-if) and bounded rigorously: each entry of the single-precision
    product ``P̂`` is within ``γ Σ_k |Φ_ik||B_kj|`` of the exact one (``γ = m u / (1 − m u)``,
    ``m = p + 2`` counting the roundings of Φ and B to single, ``u = 2⁻²⁴``, whatever the
    order of the sums), so ``‖BᵀΦ_i‖ ≤ ‖P̂_i‖ + γ ‖B‖_F ‖Φ_i‖`` (relative ``~10⁻⁵`` here); the
    squares are summed in single too (``s ≥ (1 − γ) Σ P̂²``: positive terms), and ``10⁻³⁸``
    is added for underflow.  Rows outside single precision's range are formed in double, and
    every row with ``single=False``."""
    n, p = rows.shape
    sq = np.empty(n)
    qn = None if B is None else np.empty(n)
    step = max(64, _CHUNK // (8 * max(p, 1)))
    slack = 0.0
    if B is not None:
        Bs = B.astype(np.float32) if single else B
        m = B.shape[0] + 2
        if single:
            slack = m * _U32 / (1.0 - m * _U32) * float(np.linalg.norm(B))
    for a in range(0, n, step):
        R = rows[a : a + step]
        sq[a : a + step] = np.einsum("ij,ij->i", R, R)
        if B is not None:
            with np.errstate(over="ignore", invalid="ignore", under="ignore"):
                P = R.astype(np.float32) @ Bs if single else R @ Bs
                qn[a : a + step] = np.einsum("ij,ij->i", P, P)
    if B is None:
        return sq, None
    m = B.shape[1] + 2
    if single:  # the sum of squares in single: Σ P̂² ≤ s / (1 − γ), underflow below 1e-40
        qn = np.sqrt(qn / (1.0 - m * _U32 / (1.0 - m * _U32)) + 1e-40)
        qn = qn * (1.0 + 4.0 * _U32) + slack * np.sqrt(sq) * (1.0 + _U32) + 1e-38
    else:
        qn = np.sqrt(qn) * (1.0 + 4.0 * m * _U64)
    big = ~(np.isfinite(qn) & (np.abs(sq) < 1e30))
    if big.any():  # beyond single precision's range: in double
        P = rows[big] @ B
        qn[big] = np.sqrt(np.einsum("ij,ij->i", P, P)) * (1.0 + 4.0 * (p + 2) * _U64)
    return sq, qn


def _top_order(q, k):
    """The positions of the ``k`` largest ``q``, largest first (ties by position)."""
    n = q.size
    if k >= n:
        return np.argsort(-q, kind="stable")
    top = np.argpartition(-q, k - 1)[:k]
    return top[np.lexsort((top, -q[top]))]


def _chord_bound(prob, loss, live, rows):
    """The Newton state's chord matrix as a lower bound of the Hessian at β₁, without an
    ``O(n p²)`` pass: ``(z, λ, V, e)`` or None where it does not apply.

    The Newton state keeps ``M = I + Σ_s d_s φ_s φ_sᵀ`` (its last Newton step's Hessian, later
    chord corrections folded in) and the scores ``z_s = ⟨φ_s, β₁⟩`` of its last solve
    (:meth:`deltafit.models.FittedProblem.chord_matrix`).  With ``h_s = C w_s ℓ''(t_s, z_s)``
    the Hessian's weights at β₁, ``κ₀ ≤ 1`` and ``B`` the samples with ``h_s < κ₀ d_s``,
    ``∇²J(β₁) − I = Σ h_s φ_sφ_sᵀ ⪰ κ₀ Σ d_s φ_sφ_sᵀ + Σ_B (h_s − κ₀ d_s) φ_sφ_sᵀ``
    (termwise: ``h_s ≥ κ₀ d_s`` outside B where ``d_s > 0``, ``h_s ≥ 0 ≥ κ₀ d_s`` where
    ``d_s ≤ 0``), so ``H₀ = I + κ₀(M − I) + Σ_B (h_s − κ₀ d_s) φ_sφ_sᵀ − e I ⪯ ∇²J(β₁)``.
    κ₀ is the smallest ratio ``h_s / d_s``; when that is below 0.99 (after an update the
    weights of M are those of older iterates) the ``p`` smallest ratios are B, corrected
    exactly, and κ₀ the next one.  ``e`` bounds the rounding of M (sums and folds of ``n``
    terms: ``8 u (n + p + 8)`` of ``tr M + Σ |d_s| ‖φ_s‖²``), of the corrections and of the
    eigendecomposition (``8 u p λ_max``).  That is all
    the cheap intervals need of H₀ (``H₀ − I ⪯ C₁ Σ w_i ℓ''_i(β₁) Φ_iΦ_iᵀ``:
    :class:`_LinearCheap` subtracts the changed samples' exact terms from that sum, and any
    symmetric positive definite H₀ defines its set ``K_τ``).  Logistic loss (ℓ'' > 0) only; a
    κ₀ below ½ (the curvature moved since M was formed) gives None.  ``e`` is returned for
    :func:`_linear_cache`'s check of M against its weights (``tr M − p = Σ d_s ‖φ_s‖²``).
    """
    if loss.name != "logistic" or not isinstance(prob.rows, np.ndarray):
        return None
    cm = prob.chord_matrix()
    n = live.size
    if cm is None or n < 2 or rows.dtype != np.float64:
        return None
    M = cm["matrix"]
    p = M.shape[0]
    d = np.asarray(cm["weights"][live], dtype=np.float64)
    z = np.array(cm["scores"][live], dtype=np.float64)
    coef = np.asarray(prob.coef, dtype=np.float64)
    # the scores are the stored solution's: a few rows, spread over the set, recomputed
    probe = np.unique(np.linspace(0, n - 1, min(n, 9)).astype(np.intp))
    Pr = rows[probe]
    scale = np.abs(Pr) @ np.abs(coef) + 1e-300
    if not bool(np.all(np.abs(Pr @ coef - z[probe]) <= 1e-10 * scale)):
        return None
    t = np.asarray(prob.targets[live], dtype=np.float64)
    w = prob.sample_weights(live)
    h = prob.C * loss.d2(t, z) * (1.0 if w is None else w)
    at = np.flatnonzero(d > 0.0)
    ratio = h[at] / d[at]
    kappa0, bad = (min(1.0, float(np.min(ratio))) if at.size else 1.0), at[:0]
    k = min(p, at.size - 1)
    if kappa0 < 0.99 and k > 0:  # the few samples whose curvature fell most: exact terms
        part = np.argpartition(ratio, k)
        kappa0 = min(1.0, float(ratio[part[k]]))
        bad = at[part[:k]]
    kappa0 *= 1.0 - 1e-12
    bad = bad[h[bad] < kappa0 * d[bad]]
    if not kappa0 > 0.5:
        return None
    u = np.finfo(np.float64).eps
    H0 = kappa0 * M
    H0[np.diag_indices_from(H0)] += 1.0 - kappa0
    e = 8.0 * u * (n + p + 8) * abs(float(np.trace(M)))
    if bad.size:
        R = rows[bad]
        c = h[bad] - kappa0 * d[bad]
        H0 += (R.T * c) @ R
        e += 8.0 * u * (bad.size + p + 8) * float(np.abs(c) @ np.einsum("ij,ij->i", R, R))
    lam, V = linalg.eigh(H0)
    e += 8.0 * u * p * float(np.max(np.abs(lam)))
    return z, lam, V, e, d, M


def _check_chord(bound, sq):
    """The rounding bound ``e`` of :func:`_chord_bound` completed with ``Σ |d_s| ‖φ_s‖²``, or
    None when ``M`` does not match its weights (``|tr M − p − Σ d_s ‖φ_s‖²|`` beyond it)."""
    z, lam, V, e, d, M = bound
    u = np.finfo(np.float64).eps
    p = M.shape[0]
    e += 8.0 * u * (d.size + p + 8) * float(np.abs(d) @ sq)
    if not abs(float(np.trace(M)) - p - float(d @ sq)) <= e:
        return None
    lam = lam - e
    if not float(lam[0]) > 0.5:
        return None
    return lam


def _linear_cache(prob, loss):
    """What every curvature region of this model version reuses: the stored Hessian's
    eigendecomposition, the training scores and curvatures, ``q_i = ‖Φ_i‖_{H₀⁻¹}``.

    A large problem (``n p² ≥ 2·10⁷``) of a logistic Newton state takes H₀ from the state's
    chord matrix (:func:`_chord_bound`: a lower bound of ∇²J(β₁) within a factor ``κ₀`` of
    one, no Hessian pass) and its scores, and bounds ``q_i`` through a single-precision
    product (:func:`_row_norms`); smaller ones form the exact Hessian (a pass of a few
    milliseconds at most; the region is then that of the exact H₀).  ``q_i`` takes one pass
    over the rows either way."""
    if getattr(prob, "rows_on_cluster", False):
        return _cluster_cache(prob, loss)
    live = np.asarray(prob.live)
    store = prob.rows
    rows = _live_rows(store, live)
    t = np.asarray(prob.targets[live], dtype=np.float64)
    w = prob.sample_weights(live)
    large = live.size * prob.coef.shape[0] ** 2 >= _CHORD_WORK
    bound = _chord_bound(prob, loss, live, rows) if large else None
    lam = None
    if bound is not None:
        z, lam0, V = bound[:3]
        sq, qn = _row_norms(rows, V / np.sqrt(np.maximum(lam0, 0.5)))
        lam = _check_chord(bound, sq)
        if lam is not None:  # q with the rounding allowance e in λ (e ≤ 1e-6 λ_min)
            q = qn * np.sqrt(float(np.max(lam0 / lam)) * (1.0 + 1e-12))
    if lam is None:
        # dense rows: the scores as FittedProblem.scores forms them (the same product, rows)
        z = rows @ prob.coef if isinstance(store, np.ndarray) else prob.scores(live)[0]
        lam, V = linalg.eigh(prob.hessian())
        lam = np.maximum(lam, 1.0)  # H₀ ⪰ I exactly; rounding only
        if large:
            q = _row_norms(rows, V / np.sqrt(lam))[1]
        else:
            psi = rows @ V
            q = np.sqrt(np.einsum("ij,ij->i", psi, psi / lam))
    h = loss.d2(t, z)
    pos = np.full(prob.capacity, -1, dtype=np.intp)
    pos[live] = np.arange(live.size)
    c = {
        "live": live,
        "z": z,
        "t": t,
        "w": np.ones(live.size) if w is None else w,
        "h": h,
        "lam": lam,
        "V": V,
        "q": q,
        "pos": pos,
    }
    if loss.name == "logistic":
        # the cheap intervals read the first p + 1 (and their rows' psi, up to 2(p + 1))
        c["order"] = _top_order(q, 2 * lam.size + 16)
    else:
        act = np.flatnonzero(h > 0)
        ratio = (1.0 - t[act] * z[act]) / np.maximum(q[act], 1e-300)
        o = np.argsort(ratio, kind="stable")
        c["act"], c["act_ratio"] = act[o], ratio[o]
    return c


def _norm_cache(prob, loss):
    """:func:`_linear_cache` with ``q_i ≤ ‖Φ_i‖ / sqrt(λ_min(H₀)) (≥ ‖Φ_i‖_{H₀⁻¹})`` from the
    row norms (``mode="quick"``): one ``O(n p)`` pass and no ``ΦV``; H₀ from the Newton
    state's chord matrix (:func:`_chord_bound`).  Upper bounds of ``q_i`` are valid wherever
    ``q_i`` is used (they only lower κ and widen the corrected samples' intervals), but
    looser: on correlated features ``λ_min`` is far below the typical eigenvalue.  None where
    the chord matrix does not apply (the exact cache is used)."""
    if getattr(prob, "rows_on_cluster", False) or loss.name != "logistic":
        return None
    live = np.asarray(prob.live)
    rows = _live_rows(prob.rows, live)
    bound = _chord_bound(prob, loss, live, rows)
    if bound is None:
        return None
    sq, _ = _row_norms(rows)
    lam = _check_chord(bound, sq)
    if lam is None:
        return None
    z, V = bound[0], bound[2]
    t = np.asarray(prob.targets[live], dtype=np.float64)
    w = prob.sample_weights(live)
    q = np.sqrt(sq / float(lam[0])) * (1.0 + 1e-12)
    pos = np.full(prob.capacity, -1, dtype=np.intp)
    pos[live] = np.arange(live.size)
    return {
        "live": live,
        "z": z,
        "t": t,
        "w": np.ones(live.size) if w is None else w,
        "h": loss.d2(t, z),
        "lam": lam,
        "V": V,
        "q": q,
        "pos": pos,
        "order": _top_order(q, 2 * lam.size + 16),
    }


def _hnorms(L, psi):
    """``‖ψ_i‖_{H⁻¹}`` of the rows of ``psi`` for ``H = L Lᵀ``."""
    if not psi.shape[0]:
        return np.zeros(0)
    W = linalg.solve_triangular(L, psi.T, lower=True, check_finite=False)
    return np.sqrt(np.einsum("ij,ij->j", W, W))


class _LinearChange:
    """The pending change of a linear what-if in the eigenbasis ``V`` of the stored Hessian
    ``H₀ = VΛVᵀ``: what both schedules start from."""

    def __init__(self, sens, quick=False):
        prob, loss = sens._prob, sens._loss
        self.loss, self.prob = loss, prob
        cache = None
        if quick:  # q_i from the row norms (no O(n p²) pass)
            cache = prob.cached(("curvature-quick", loss.name), lambda: _norm_cache(prob, loss))
        if cache is None:
            cache = prob.cached(("curvature", loss.name), lambda: _linear_cache(prob, loss))
        self.cache = cache
        store = sens._store
        self.C1, self.C2 = sens._C1, sens._C2(sens.n_new)
        self.rho = self.C2 / self.C1
        self.eps = sens._eps
        self.beta = store.beta
        self.V, self.lam = cache["V"], cache["lam"]
        r, rnorm = store.half_gradient(self.C1, self.C2)
        self.r, self.rnorm = r, rnorm
        self.R_ball = _ball.certified_radius(rnorm, C1=self.C1, C2=self.C2, residual=self.eps)
        self.g = self.V.T @ (2.0 * r)  # g₀ in the eigenbasis
        # the entries: every sample the change touches (model samples and additions)
        idx = np.flatnonzero(store.live[: sens._m])
        src = store.src[idx]
        y0, y = sens._y0[idx], sens._y[idx]
        self.e_z = store.z[idx]
        self.e_t = np.where(y == y, y, 0.0)  # label in D₂
        self.e_u = np.where(y == y, sens._w[idx], 0.0)  # weight in D₂ (0: absent)
        model = y0 == y0
        self.e_h0w = np.where(
            model, sens._w0[idx] * loss.d2(np.where(model, y0, 0.0), self.e_z), 0.0
        )
        self.e_w0 = np.where(model, sens._w0[idx], 0.0)
        self._store, self._idx = store, idx
        in_entries = np.zeros(cache["z"].size, dtype=bool)
        self._src = src[src >= 0]
        if getattr(prob, "rows_on_cluster", False):  # rows copied, not referenced: by id
            mine = sens._y0[idx] == sens._y0[idx]
            self._src = np.asarray(prob.handles_unchecked(sens._ids[idx][mine]), dtype=np.intp)
        ep = _positions(cache, self._src)
        in_entries[ep[ep >= 0]] = True
        self.in_entries = in_entries

    def entry_psi(self, sel):
        """``VᵀΦ_i`` of the entries ``sel``."""
        if not sel.size:
            return np.zeros((0, self.lam.size))
        return self._store.rows_of(self._idx[sel]) @ self.V


class _Ellipsoid:
    """The ellipsoid of a curvature matrix in the eigenbasis (needs ``g``, ``rho``, ``eps``)."""

    def ellipsoid(self, a, psi, d):
        """The ellipsoid of ``H̃ = diag(a) + Ψᵀ diag(d) Ψ`` (see :meth:`factor`)."""
        Ht = (psi.T * d) @ psi if d.size else np.zeros((a.size, a.size))
        Ht[np.diag_indices_from(Ht)] += a
        return self.factor(Ht)

    def factor(self, Ht):
        """``(L, x, R_H, H̃)`` of ``H̃ = VᵀHV``: its Cholesky factor, ``x = H̃⁻¹ g̃`` (center
        ``β₁ − ½Vx``) and the H-radius ``½‖g₀‖_{H⁻¹} + ρε``; None if H̃ is not numerically
        positive definite."""
        L, info = lapack.dpotrf(Ht, lower=1, clean=1)  # linalg.cholesky, without its checks
        if info:
            return None
        x, info = lapack.dpotrs(L, self.g, lower=1)
        if info:
            return None
        RH = 0.5 * np.sqrt(max(float(self.g @ x), 0.0)) + self.rho * self.eps
        return L, x, RH * (1.0 + _SAFE) + 1e-300, Ht


class _LinearExact(_ExactSchedule, _Ellipsoid):
    """Every sample's exact score interval (small problems): a region is represented by the
    intervals ``[A_i, B_i]`` it gives for ``z_i(β₂)``, and the curvature by the secant slopes
    of ``ℓ'`` between ``z_i(β₁)`` and those intervals (:func:`secant_range`).

    Parameters
    ----------
    loss, C1, C2, eps, z, t, u, rnorm
        As for :class:`~deltafit.sensitivity.regions._curvature_schedule._ExactSchedule`.
    V, lam : ndarray
        The eigenbasis of the stored Hessian and its eigenvalues (identity and ones: no basis).
    psi : ndarray of shape (n, p)
        ``VᵀΦ_i`` of every sample (rows in the order of ``z``).
    beta, g, r : ndarray
        β₁, ``g₀ = ∇P₂(β₁)`` without the residual (in the eigenbasis) and ``r`` of the
        Theorem 1 ball (in the original basis).
    """

    exact = True

    def __init__(self, *, loss, C1, C2, eps, z, t, u, rnorm, V, lam, psi, beta, g, r):
        super().__init__(loss=loss, C1=C1, C2=C2, eps=eps, z=z, t=t, u=u, rnorm=rnorm)
        self.V, self.lam, self.psi = V, lam, psi
        self.beta, self.g, self.r = beta, g, r

    @classmethod
    def from_sensitivity(cls, sens):
        """The exact intervals of a what-if's pending change (every D₂ sample: the changed
        samples, then the untouched training samples)."""
        ch = _LinearChange(sens)
        c = ch.cache
        rest = np.flatnonzero(~ch.in_entries)
        live = c["live"]
        psi = np.vstack([ch.entry_psi(np.arange(ch.e_z.size)), ch.prob.rows[live[rest]] @ ch.V])
        return cls(
            loss=ch.loss,
            C1=ch.C1,
            C2=ch.C2,
            eps=ch.eps,
            z=np.concatenate([ch.e_z, c["z"][rest]]),
            t=np.concatenate([ch.e_t, c["t"][rest]]),
            u=np.concatenate([ch.e_u, c["w"][rest]]),
            rnorm=ch.rnorm,
            V=ch.V,
            lam=ch.lam,
            psi=psi,
            beta=ch.beta,
            g=ch.g,
            r=ch.r,
        )

    @classmethod
    def from_arrays(cls, z, t, u, coef, grad, C, loss, Phi):
        """The exact intervals of a change given by arrays (:func:`removal_intervals`): the
        samples' scores ``z``, targets ``t``, changed weights ``u``, feature rows ``Phi``, β₁
        = ``coef`` and the exact ``∇P₂(β₁)`` = ``grad`` (no residual, ``C₁ = C₂ = C``)."""
        p = Phi.shape[1]
        g = np.asarray(grad, dtype=np.float64)
        r = 0.5 * g
        return cls(
            loss=loss,
            C1=float(C),
            C2=float(C),
            eps=0.0,
            z=np.asarray(z, dtype=np.float64),
            t=np.asarray(t, dtype=np.float64),
            u=np.asarray(u, dtype=np.float64),
            rnorm=float(np.linalg.norm(r)),
            V=np.eye(p),
            lam=np.ones(p),
            psi=np.asarray(Phi, dtype=np.float64),
            beta=np.asarray(coef, dtype=np.float64),
            g=g,
            r=r,
        )

    def build(self, iv):
        lo, _ = self.curvature(iv)
        return np.ones(self.lam.size), self.psi, self.C2 * self.u * lo

    def ell_iv(self, ell):
        L, x, RH, _ = ell
        return self._region(-0.5 * (self.psi @ x), RH * _hnorms(L, self.psi))

    def ball_iv(self):
        norms = np.sqrt(np.einsum("ij,ij->i", self.psi, self.psi))
        return self._region(-(self.psi @ (self.V.T @ self.r)), self.R_ball * norms)

    def newton(self, iv, ell):
        """The Newton ball ``‖β − (β₁ − V M⁻¹g̃)‖_{H_lo} ≤ ρ₂ + ρε`` (module docstring) for
        the secant bounds of the intervals ``iv``, ``H_lo = LLᵀ`` their lower bounds:
        ``(d₀, radius, intervals)``."""
        L = ell[0]
        C2, u, psi = self.C2, self.u, self.psi
        lo, hi = self.curvature(iv)
        mid, half = 0.5 * (lo + hi), 0.5 * (hi - lo)
        M = (psi.T * (C2 * u * mid)) @ psi
        M[np.diag_indices_from(M)] += 1.0
        try:
            d0 = linalg.cho_solve(
                linalg.cho_factor(M, lower=True, check_finite=False), self.g, check_finite=False
            )
        except linalg.LinAlgError:
            return None
        s = psi @ d0  # z_i(β₁ − d₀) = z_i − s_i
        err = C2 * u * half * np.abs(s)  # |(m_i − c̄_i) s_i| ≤ err_i
        W = linalg.solve_triangular(L, psi.T, lower=True, check_finite=False)
        qh = np.sqrt(np.einsum("ij,ij->j", W, W))  # ‖Φ_i‖_{H_lo⁻¹}
        part = newton_radius(err, C2 * u * lo, qh, lambda idx: W[:, idx].T @ W[:, idx])
        rad = (part + self.rho * self.eps) * (1.0 + _SAFE) + 1e-300
        return d0, rad, self._region(-s, rad * qh)

    def build_ell(self, iv):
        return self.ellipsoid(*self.build(iv))

    def recentered(self, d0):
        """This problem expanded at ``β̃ = β₁ − V d₀`` with its exact gradient
        ``∇P₂(β̃) = β̃ + C₂ Σ w'_i ℓ'(t_i, z̃_i) Φ_i`` (every D₂ sample is held here), the
        rounding of that sum as the residual allowance."""
        rc = copy.copy(self)
        rc.z = self.z - self.psi @ d0
        b = self.V.T @ self.beta - d0
        d1 = self.C2 * self.u * self.loss.d1(self.t, rc.z)
        rc.g = b + self.psi.T @ d1
        norms = np.sqrt(np.einsum("ij,ij->i", self.psi, self.psi))
        delta = 1e-13 * (float(np.linalg.norm(b)) + float(np.abs(d1) @ norms)) + 1e-300
        rc.beta = self.V @ b
        rc.r = self.V @ (0.5 * rc.g)
        rc.rnorm = 0.5 * float(np.linalg.norm(rc.g))
        rc.eps, rc.rho = delta, 1.0
        rc.R_ball = rc.rnorm + delta
        return rc


class _LinearCheap(_LinearChange, _Ellipsoid):
    """The cheap intervals of the H₀-ball ``K_τ = {‖β − β₁‖_{H₀} ≤ τ}`` (large problems).

    On ``K_τ`` every score moves by at most ``q_i τ``, ``q_i = ‖Φ_i‖_{H₀⁻¹}`` (cached), so
    ``c_i ≥ κ ℓ''_i(β₁)`` for all samples but a few (logistic: ``κ = e^{−q τ}`` over the
    samples outside the ``p`` largest ``q_i``, which are corrected one by one; squared hinge:
    ``κ = 1`` and the active samples with ``1 − t_i z_i < q_i τ`` corrected).  Hence

        H = (1 − κρ) I + κρ H₀ − κ C₂ Σ_{changed model samples} w_i ℓ''_i Φ_iΦ_iᵀ
            + Σ_{staying changed samples} C₂ w'_i c_i Φ_iΦ_iᵀ
            + Σ_{corrected} C₂ w_i (c_i − κℓ''_i) Φ_iΦ_iᵀ

    (hypothetical additions are dropped), diagonal up to ``O(p)`` rank-one terms in the
    eigenbasis of H₀ once the changed samples' part is formed: ``O(k p² + p³)`` per region.
    """

    exact = False

    def __init__(self, sens, quick=False):
        super().__init__(sens, quick)
        model = self.e_w0 > 0  # changed model samples (additions are dropped from H)
        sel = np.flatnonzero(model)
        p = self.lam.size
        psi = self.entry_psi(sel)
        self.m_q = np.sqrt(np.einsum("ij,ij->i", psi, psi / self.lam))
        h0w = self.e_h0w[sel]
        self.S_minus = self.C2 * ((psi.T * h0w) @ psi) if sel.size else np.zeros((p, p))
        self.neg_trace = self.C2 * float(h0w @ self.m_q**2)  # Σ of its q-weighted terms
        stay = self.e_u[sel] > 0  # reweighted / relabelled: their D₂ term is added back
        self.s_psi, self.s_q = psi[stay], self.m_q[stay]
        st = sel[stay]
        self.s_z, self.s_t, self.s_u = self.e_z[st], self.e_t[st], self.e_u[st]

    def _prefix_psi(self, name, ordering, k):
        """``VᵀΦ_i`` of the first ``k`` samples of a fixed ordering (kept with the model's
        cache: the same samples serve every region)."""
        c = self.cache
        have = c.get(name)
        if have is None or have.shape[0] < k:
            live = c["live"]
            k2 = min(ordering.size, max(k, 2 * (0 if have is None else have.shape[0]), 16))
            have = self.prob.rows[live[ordering[:k2]]] @ self.V
            c[name] = have
        return have[:k]

    def _more(self, lim):
        """Rows on a Dask cluster: the cache regathered (``k`` doubled, one pass each) until
        every active squared-hinge sample of ratio up to ``lim`` is in it; the cached entries
        are replaced by the larger ones (same samples first: the order is a total one)."""
        c = self.cache
        k = c["k"]
        while c.get("act_cut", np.inf) <= lim:
            k *= 2
            c.update(_cluster_cache(self.prob, self.loss, k))
        self.in_entries = np.zeros(c["z"].size, dtype=bool)
        ep = _positions(c, self._src)
        self.in_entries[ep[ep >= 0]] = True
        return c

    def _extra(self, tau):
        """(κ, positions of the samples corrected one by one, their VᵀΦ) for τ."""
        c = self.cache
        if self.loss.name == "logistic":
            ordering, name = c["order"], "order_psi"
            k = min(ordering.size, self.lam.size)
            kappa = 0.0
            if k < ordering.size:
                # of the p largest q_i, only those above (1 + 1/64) q_(p+1) are corrected: κ
                # (from the largest q_i left) loses at most a factor e^{−q_(p+1) τ / 64}, and
                # each region's correction costs O(k p²) for k ≤ p
                k = c.get("n_corrected")
                if k is None:
                    k0 = min(ordering.size - 1, self.lam.size)
                    qo = c["q"][ordering[: k0 + 1]]
                    k = c["n_corrected"] = int(np.count_nonzero(qo[:k0] > qo[k0] * (1 + 1 / 64)))
                kappa = float(np.exp(-c["q"][ordering[k]] * tau))
        else:
            lim = tau * (1.0 + 1e-9) + 1e-300
            if c.get("act_cut", np.inf) <= lim:  # rows on a cluster: bring back more
                c = self._more(lim)
            ordering, name = c["act"], "act_psi"
            k = int(np.searchsorted(c["act_ratio"], lim, side="right"))
            kappa = 1.0
        keep = ~self.in_entries[ordering[:k]]
        return kappa, ordering[:k][keep], self._prefix_psi(name, ordering, k)[keep]

    def build(self, tau):
        """``(H̃, κ, Weyl's lower bound of λ_min(Λ^{-½}H̃Λ^{-½}))`` valid on ``K_τ``."""
        C2, loss, c = self.C2, self.loss, self.cache
        kappa, extra, x_psi = self._extra(tau)
        a = 1.0 + kappa * self.rho * (self.lam - 1.0)
        Ht = -kappa * self.S_minus
        Ht[np.diag_indices_from(Ht)] += a
        neg = kappa * self.neg_trace
        parts_psi, parts_d = [], []
        if self.s_z.size:
            dq = self.s_q * tau
            lo, _ = curvature_range(loss, self.s_t, self.s_z - dq, self.s_z + dq)
            parts_psi.append(self.s_psi)
            parts_d.append(C2 * self.s_u * lo)
        if extra.size:
            dx = c["q"][extra] * tau
            zx = c["z"][extra]
            lx, _ = curvature_range(loss, c["t"][extra], zx - dx, zx + dx)
            d = C2 * c["w"][extra] * (lx - kappa * c["h"][extra])
            parts_psi.append(x_psi)
            parts_d.append(d)
            neg += float(np.sum(np.minimum(d, 0.0) * -(c["q"][extra] ** 2)))
        if parts_psi:
            P, d = np.vstack(parts_psi), np.concatenate(parts_d)
            Ht += (P.T * d) @ P
        return Ht, float(np.min(a / self.lam)) - neg

    def ell_dev(self, ell, low):
        """``sup_E ‖β − β₁‖_{H₀} ≤ ‖c − β₁‖_{H₀} + R_H / sqrt(λ_min(Λ^{-½}H̃Λ^{-½}))``
        (Weyl's bound, or the eigenvalue when that bound is poor)."""
        L, x, RH, Ht = ell
        lam = self.lam
        off = 0.5 * float(np.sqrt(np.sum(lam * x * x)))
        if low < 0.25 * float(np.min(np.diag(Ht) / lam)):
            s = 1.0 / np.sqrt(lam)
            low = float(
                linalg.eigvalsh(
                    Ht * s[:, None] * s[None, :], subset_by_index=[0, 0], check_finite=False
                )[0]
            ) * (1.0 - 1e-9)
        if low <= 0.0:
            return np.inf
        return (off + RH / np.sqrt(low)) * (1.0 + _SAFE)

    def ball_dev(self):
        rv = self.V.T @ self.r
        return (
            float(np.sqrt(np.sum(self.lam * rv * rv))) + self.R_ball * float(np.sqrt(self.lam[-1]))
        ) * (1.0 + _SAFE)

    def _region(self, tau):
        Ht, low = self.build(tau)
        ell = self.factor(Ht)
        return ell, (None if ell is None else self.ell_dev(ell, low))

    def solve(self, recenter=True):
        valid = self.ball_dev()
        # guess and verify with the ellipsoid of the curvature at β₁
        ell, guess = self._region(0.0)
        best, last = None, np.inf
        if ell is not None:
            for margin in _GUESS_MARGINS:
                trial = (1.0 + margin) * guess + 1e-300
                ell, dev = self._region(trial)
                if ell is None:
                    break
                if dev < trial:  # verified: the trial's ellipsoid holds β₂ (and starts the
                    valid = min(valid, dev)  # refinement, which stops once it gains < 2%)
                    best, last = ell, ell[2]
                    break
                guess = dev
        for _ in range(_MAX_REFINE):
            ell, dev = self._region(valid)
            if ell is None:
                break
            if best is None or ell[2] < best[2]:
                best = ell
            valid = min(valid, dev)
            if ell[2] > (1.0 - _REFINE_GAIN) * last:
                break
            last = ell[2]
        return self, (best, None)
