"""The hinge loss (L1-SVM) on rows persisted on a Dask cluster: a distributed decomposition
method on the dual box QP.

The problem is the NumPy path's (:func:`deltafit.solvers.hinge_primal`):
``J(β) = ½‖β‖² + Σ C_i max(0, 1 − t_i φ_iᵀβ)``, ``C_i = C · w_i``, the intercept a penalised
constant column of Φ, so the dual ``min ½‖Σ α_i t_i φ_i‖² − Σ α_i, 0 ≤ α_i ≤ C_i`` has a box
and no equality constraint.

**What the client holds** (p-sized and a few rows, never n-sized): a reference point β_ref
that *defines* the dual variables of all but a working set W of rows,
``α_i = C_i`` if ``t_i φ_iᵀβ_ref < 1`` else 0 (the bound a row takes on its side of the
margin), the rows of W (their features, targets, ``C_i`` and free α_i: at most a few times p
of them), and the sums over the rows outside W of ``α_i t_i φ_i`` (``g``), ``α_i |φ_i|`` and
``α_i``.  Then ``β = g + Σ_W α_i t_i φ_i`` and the dual objective ``½‖β‖² − Σα`` are known
on the client.

**A pass** (:func:`hinge_share`, one task per persisted block, tree-summed) at (β_ref, β)
returns, over the rows outside W: the KKT violation of their α at β (``max(m_i − 1, 0)`` for
α_i = C_i, ``max(1 − m_i, 0)`` for α_i = 0, m_i the margin ``t_i φ_iᵀβ``), the rows whose
side of the margin differs between β_ref and β (*switchers*: exactly the violators), the
duality gap's and the hinge's shares, the rounding scales, and the sums ``g``, ``Σα|φ|``,
``Σα`` under the rule of β itself (the next reference).  It also returns a few rows with
their raw features, targets and weights: the worst switchers, then the non-switching rows
nearest the margin (``|m_i − 1|`` smallest) — at most ``max(8p, 128)`` rows of p numbers of
each kind a pass (of which the worst ``max(8p, 128)`` join W), the only rows that reach the
client; every row when the whole problem fits in W (``n ≤ 8p + 512``, below).

**A step** after a pass (the decomposition methods of Osuna, Freund & Girosi, "An improved
training algorithm for support vector machines", 1997, and Joachims, "Making large-scale SVM
learning practical", 1999, with the re-basing of the primal-dual active-set method of
Hintermüller, Ito & Kunisch, SIAM J. Optim. 2003):

* *re-base*: β_ref ← β (every row outside W takes the bound of its side under β), the
  gathered rows join W, W rows at the bound of their side and farther from the margin than
  the gathered band leave it, and the QP over W (the rest fixed, entering as the offset g) is
  solved exactly on the client by the NumPy path's own dual solver (coordinate descent,
  proximal active-set steps and exact face solves: ``solvers.hinge_loop``).  Accepted when
  the dual objective decreases.  When every switcher was gathered this step keeps α outside W
  as it was, so it always decreases the objective: near the solution (updates, the end of a
  fit) a pass and a step suffice.
* otherwise (many switchers, the re-based objective not lower) the *conservative* step:
  β_ref kept, the worst ``4p`` violators join W, the QP over W solved again — a
  decomposition step with violators in its working set, which strictly decreases the dual
  objective (Osuna et al.; Lin, "On the convergence of the decomposition method for support
  vector machines", IEEE TNN 2001).

After the first step (below) the dual objective decreases at every step but at most ten
re-based ones taken when W is full, and the partitions are finite, so the method ends; it
stops when a pass finds every KKT violation at most ``tol`` (or, once the face over
W was solved exactly, the rounding floor of the whole problem): the NumPy path's rule.  The
final pass also gives the duality gap and the certified radius of
:class:`deltafit.solvers.HingeResult` (``‖β − β*‖ ≤ sqrt(2(gap + δ))`` plus β's rounding),
from sums over every row: the model's ``grad_norm_`` certifies the solution as on NumPy.

**Start.** A fit of a problem that fits in W (``n ≤ 8p + 512``: breast cancer, a digits
subset) needs no start: its first hinge pass, at β = 0, gathers every row, the QP over all
of them is solved on the client, and the next pass certifies it (three passes with the one
that persisted the rows; the smoothed start took 20–25 Newton passes there: unscaled,
ill-conditioned features, a few backtracking line searches).  A larger fit starts from the
minimiser of a smoothed hinge (:class:`SmoothedHinge`,
ε = 0.1: Newton on the cluster, :func:`~._dask_newton.dask_newton`, at most 8 steps; the
pass that persists the rows makes its first), whose margins put most rows on the side they
take at the hinge's solution; the first step re-bases on it whatever the objective (any α in
the box is a start), the descent steps follow.  Should the working set fill up with rows off
their side before the method settles, a finer smoothing (ε ten times smaller, up to three
times) gives a new start.  ``warm_start=True`` starts from the previous β's rule instead.  An
update keeps β_ref and W: the changed rows (gathered from the store by the update; added
rows) join W with their α (0 for added rows, clipped to the new box for reweighted ones),
removed rows leave W or the sums, so α is the previous solution's and typically one or two
passes end the re-solve.  ``passes`` counts the passes of the last solve (a fit's include
the smoothed start's, ``start_passes``).

K ≥ 3 classes: the K one-vs-rest problems, each this method, run jointly by
:mod:`._dask_ovr` (:meth:`DaskHingeState.fit_with` and :meth:`DaskHingeState.re_solved` over
the pass objects it hands each class; :func:`hinge_shares` computes every class's share
from one Φ per chunk).  W is capped at
``8 p + 512`` rows (the free support vectors number at most p for data in general
position): a solve whose working set cannot be kept under it raises ValueError.  One that has
not converged after ``max(max_iter, 50)`` passes (or stalls: no violator left to take into
W) keeps the result of its last pass, whose radius ``grad_norm`` that pass certifies, and
warns the NumPy hinge's ConvergenceWarning naming ``grad_norm_`` and the KKT violation
(:func:`deltafit.solvers.warn_kkt_not_converged`).
"""

from __future__ import annotations

import numpy as np

from deltafit._dask._newton import _CHUNK_BYTES, PassSpec, _Chunk
from deltafit._dask._state import DaskStateRefusals
from deltafit._states._protocol import ModelState
from deltafit.losses import SmoothedHinge
from deltafit.solvers import (
    HingeResult,
    SubFeatureQP,
    box_violation,
    hinge_loop,
    warn_kkt_not_converged,
)

__all__ = [
    "DaskHingeState",
    "HingePasses",
    "hinge_share",
    "hinge_shares",
    "SmoothedHinge",
    "START_STAGES",
    "start_loss",
    "fit_rows",
]

#: The smoothed hinges whose minimisers start a fit: ``(ε, tol)``, Newton on each stopping
#: at ``‖∇J‖ ≤ tol ‖∇J(0)‖``, warm-started from the previous one.
START_STAGES = ((0.1, 1e-3),)
#: Double precision's unit roundoff (the rounding bounds of the hinge passes).
_EPS = np.finfo(np.float64).eps


#: Newton steps at most per smoothed start.
_START_ITER = 8
#: Further smoothed starts (ε ten times smaller each) a fit may take when its hinge passes
#: find many rows off their side.
_MORE_STAGES = 3
#: Re-based steps a solve may take without descent when its working set is full.
_MAX_FORCED = 10


def start_loss():
    """The loss of the first pass of a Dask hinge fit (the one that persists the rows)."""
    return SmoothedHinge(START_STAGES[0][0])


def _k_gather(p):
    """Half the rows of each kind (switchers, the band) a pass gathers: ``max(4p, 64)``."""
    return max(4 * p, 64)


def _max_working(p):
    return 8 * p + 512


def fit_rows(p, n):
    """Rows of each kind a fit's hinge pass gathers: every row when the whole problem fits
    in the working set (``n ≤ 8p + 512``: the first pass brings the rows to the client, the
    QP over all of them is solved there, the next pass certifies it), else ``max(4p, 64)``."""
    return int(n) if n <= _max_working(p) else 2 * _k_gather(p)


class _Rows:
    """Candidate rows of a pass: ids, raw features, targets, ``C_i`` and margins at β_ref and
    β, ordered by ``key`` (larger first), at most ``k`` of them."""

    __slots__ = ("key", "ids", "x", "t", "cw", "m", "mref")

    def __init__(self, key, ids, x, t, cw, m, mref):
        self.key, self.ids, self.x, self.t, self.cw = key, ids, x, t, cw
        self.m, self.mref = m, mref

    @classmethod
    def empty(cls, q):
        z = np.zeros(0)
        return cls(z, np.zeros(0, dtype=np.int64), np.zeros((0, q)), z, z, z, z)

    def top(self, k):
        if self.key.size <= k:
            return self
        keep = np.sort(np.argpartition(-self.key, k - 1)[:k])
        return _Rows(*(getattr(self, s)[keep] for s in self.__slots__))

    def merged(self, o, k):
        return _Rows(
            *(np.concatenate([getattr(self, s), getattr(o, s)]) for s in self.__slots__)
        ).top(k)


class HingeShare:
    """A block's (or a sum of blocks') share of a hinge pass; ``cap`` rows kept of each kind
    (switchers, the band) when two shares are summed."""

    def __init__(self, val, gap, kkt, n_sw, suma, G, V, maxscale, rnd, n, sw, band, cap):
        self.val, self.gap, self.kkt, self.n_sw, self.suma = val, gap, kkt, n_sw, suma
        self.G, self.V, self.maxscale, self.rnd, self.n = G, V, maxscale, rnd, n
        self.sw, self.band, self.cap = sw, band, int(cap)

    def merged(self, o, k=None):
        k = self.cap if k is None else k
        return HingeShare(
            self.val + o.val,
            self.gap + o.gap,
            max(self.kkt, o.kkt),
            self.n_sw + o.n_sw,
            self.suma + o.suma,
            self.G + o.G,
            self.V + o.V,
            max(self.maxscale, o.maxscale),
            self.rnd + o.rnd,
            self.n + o.n,
            self.sw.merged(o.sw, k),
            self.band.merged(o.band, k),
            k,
        )

    __add__ = merged


def _sum(k, *shares):
    out = shares[0]
    for s in shares[1:]:
        out = out.merged(s, k)
    return out


def _abs_chunk(ch):
    """``|Φ|`` of a :class:`_Chunk` (its products with |x| and |s|)."""
    a = object.__new__(_Chunk)
    a.plain, a.x = ch.plain, np.abs(ch.x)
    a.s = None if ch.s is None else abs(ch.s)
    return a


def hinge_share(x, t, w, mods, spec, first, ref, beta, wids, v, k):
    """One block's share of a hinge pass (a Dask task): see the module docstring.

    ``first``: the block's first sample id; ``ref``: β_ref (None: α = 0 outside W); ``wids``:
    the sorted ids of W (excluded); ``v``: ``Σ α_i |φ_i|`` over every row (the rounding
    scales); ``k``: rows returned at most of each kind (switchers, the band)."""
    return hinge_shares(x, t, w, mods, spec, first, [(None, ref, beta, wids, v)], k)[0]


def hinge_shares(x, t, w, mods, spec, first, requests, k):
    """The shares of several hinge problems over one block (a Dask task): one
    :class:`HingeShare` per request ``(code, ref, β, wids, v)`` (the arguments of
    :func:`hinge_share`; ``code``: None when ``t`` holds the targets ±1, else the class
    index whose one-vs-rest targets the problem has, ``t`` holding class indices).  Φ of each
    chunk of rows is formed once and multiplied by every problem's β and β_ref at once."""
    C = spec.C
    x, t, cw0 = mods.rows(x, t, w, C)
    n = x.shape[0]
    q = x.shape[1]
    cols, acc = [], []
    for code, ref, beta, wids, _v in requests:
        cw = cw0
        lo, hi = np.searchsorted(wids, [first, first + n])
        if hi > lo:
            cw = cw.copy()
            cw[wids[lo:hi] - first] = 0.0
        p = beta.shape[0]
        cols.extend([beta, np.zeros(p) if ref is None else ref])
        acc.append(
            {
                "code": code,
                "ref": ref,
                "cw": cw,
                "G": np.zeros(p),
                "V": np.zeros(p),
                "val": 0.0,
                "gap": 0.0,
                "kkt": 0.0,
                "suma": 0.0,
                "maxscale": 0.0,
                "rnd": 0.0,
                "n_sw": 0,
                "sw": _Rows.empty(q),
                "band": _Rows.empty(q),
            }
        )
    B = np.column_stack(cols)
    Vs = np.column_stack([r[4] for r in requests])
    p = B.shape[0]
    step = max(64, _CHUNK_BYTES // (8 * max(p, 1)))
    for a in range(0, n, step):
        b = min(n, a + step)
        ch = _Chunk(x[a:b], spec)
        ach = _abs_chunk(ch)
        ZZ = ch.dot(B)
        scales = ach.dot(Vs)
        for j, o in enumerate(acc):
            tc = t[a:b] if o["code"] is None else np.where(t[a:b] == o["code"], 1.0, -1.0)
            wc = o["cw"][a:b]
            live = wc > 0.0
            m = tc * ZZ[:, 2 * j]
            mref = tc * ZZ[:, 2 * j + 1] if o["ref"] is not None else np.full(b - a, np.inf)
            a_ref = np.where(live & (mref < 1.0), wc, 0.0)
            a_new = np.where(live & (m < 1.0), wc, 0.0)
            h = np.maximum(0.0, 1.0 - m)
            viol = np.where(a_ref > 0.0, np.maximum(m - 1.0, 0.0), h) * live
            o["val"] += float(wc @ h)
            o["gap"] += float(wc @ h - a_ref @ (1.0 - m))
            o["kkt"] = max(o["kkt"], float(np.max(viol, initial=0.0)))
            o["suma"] += float(a_new.sum())
            o["G"] += ch.tdot((a_new * tc)[:, None])[:, 0]
            o["V"] += ach.tdot(a_new[:, None])[:, 0]
            scale = scales[:, j]
            o["maxscale"] = max(o["maxscale"], float(np.max(scale * live, initial=0.0)))
            o["rnd"] += float(wc @ scale)
            s_mask = live & (a_new != a_ref)
            o["n_sw"] += int(np.count_nonzero(s_mask))
            for kind, mask, key in (
                ("sw", s_mask, viol),
                ("band", live & ~s_mask, -np.abs(m - 1.0)),
            ):
                idx = np.flatnonzero(mask)
                if not idx.size:
                    continue
                if idx.size > k:
                    idx = np.sort(idx[np.argpartition(-key[idx], k - 1)[:k]])
                new = _Rows(
                    key[idx],
                    first + a + idx.astype(np.int64),
                    x[a:b][idx],
                    tc[idx],
                    wc[idx],
                    m[idx],
                    mref[idx],
                )
                o[kind] = o[kind].merged(new, k)
    return [
        HingeShare(
            o["val"],
            o["gap"],
            o["kkt"],
            o["n_sw"],
            o["suma"],
            o["G"],
            o["V"],
            o["maxscale"],
            o["rnd"],
            int(np.count_nonzero(o["cw"] > 0.0)),
            o["sw"],
            o["band"],
            k,
        )
        for o in acc
    ]


class HingePasses:
    """Hinge passes over a :class:`~._dask_rows.DaskRowStore`; ``count`` passes so far."""

    def __init__(self, store, spec, k):
        self.store, self.spec, self.k, self.count = store, spec, int(k), 0

    def run(self, ref, beta, wids, v):
        from functools import partial

        from dask import delayed
        from deltafit._dask._rows import tree_compute

        st = self.store
        beta = np.array(beta, dtype=np.float64, copy=True)
        ref = None if ref is None else np.array(ref, dtype=np.float64, copy=True)
        wids = np.array(wids, dtype=np.int64, copy=True)
        v = np.array(v, dtype=np.float64, copy=True)
        out = tree_compute(
            [
                delayed(hinge_share)(
                    x, t, w, st.mods(i), self.spec, int(st.starts[i]), ref, beta, wids, v, self.k
                )
                for i, (x, t, w) in enumerate(st.blocks)
            ],
            partial(_sum, self.k),
            what="a hinge pass over the rows",
        )
        self.count += 1
        return out


class _Working:
    """β_ref, the working set W (sorted ids, Φ, t, ``C_i``, α) and the sums over the rows
    outside it (``g = Σ α t φ``, ``u = Σ α |φ|``, ``s = Σ α``) under β_ref's rule."""

    def __init__(self, ref, ids, Phi, t, cw, alpha, g, u, s):
        self.ref, self.ids, self.Phi, self.t, self.cw = ref, ids, Phi, t, cw
        self.alpha, self.g, self.u, self.s = alpha, g, u, s

    @classmethod
    def empty(cls, p):
        z = np.zeros(0)
        return cls(
            None,
            np.zeros(0, dtype=np.int64),
            np.zeros((0, p)),
            z,
            z,
            z,
            np.zeros(p),
            np.zeros(p),
            0.0,
        )

    def copy(self):
        return _Working(
            *(
                None if a is None else (a.copy() if isinstance(a, np.ndarray) else a)
                for a in (
                    self.ref,
                    self.ids,
                    self.Phi,
                    self.t,
                    self.cw,
                    self.alpha,
                    self.g,
                    self.u,
                    self.s,
                )
            )
        )

    def v(self):
        """``Σ α_i |φ_i|`` over every row."""
        return self.u + self.alpha @ np.abs(self.Phi)

    def rule(self, margins):
        """The bound the rule of a reference point gives each W row (margins under it)."""
        return np.where(margins < 1.0, self.cw, 0.0)

    def add(self, ids, Phi, t, cw, alpha, a_out):
        """Rows into W with dual variables ``alpha``; ``a_out`` their α in the sums (taken
        out of them)."""
        self.g = self.g - Phi.T @ (a_out * t)
        self.u = self.u - np.abs(Phi).T @ a_out
        self.s = self.s - float(a_out.sum())
        ids = np.concatenate([self.ids, ids])
        order = np.argsort(ids, kind="stable")
        self.ids = ids[order]
        self.Phi = np.vstack([self.Phi, Phi])[order]
        self.t = np.concatenate([self.t, t])[order]
        self.cw = np.concatenate([self.cw, cw])[order]
        self.alpha = np.concatenate([self.alpha, alpha])[order]

    def drop(self, mask, into_sums=True):
        """Rows ``mask`` out of W (their α into the sums, or gone with ``into_sums=False``)."""
        if not np.any(mask):
            return
        if into_sums:
            a, P = self.alpha[mask], self.Phi[mask]
            self.g = self.g + P.T @ (a * self.t[mask])
            self.u = self.u + np.abs(P).T @ a
            self.s = self.s + float(a.sum())
        keep = ~mask
        self.ids, self.Phi, self.t = self.ids[keep], self.Phi[keep], self.t[keep]
        self.cw, self.alpha = self.cw[keep], self.alpha[keep]

    def solve(self, tol, max_iter):
        """The QP over W (the rest fixed) solved exactly: ``(β, polished, iterations)``."""
        Z = self.Phi * self.t[:, None]
        alpha = np.clip(self.alpha, 0.0, self.cw)
        if not Z.shape[0]:
            self.alpha = alpha
            return self.g.copy(), True, 0, 0
        sub = SubFeatureQP(Z, self.t, self.g.copy(), np.maximum(self.u, 0.0))
        sub.refresh(alpha)
        alpha, it, n_pol, _, _, _, polished = hinge_loop(
            sub, alpha, self.cw, True, tol, max_iter, None
        )
        self.alpha = alpha
        return self.coef(), polished, it, n_pol

    def coef(self):
        return self.g + (self.alpha * self.t) @ self.Phi

    def dual(self, beta):
        """The minimised dual objective ``½‖β‖² − Σα``."""
        return 0.5 * float(beta @ beta) - (self.s + float(self.alpha.sum()))


def _gathered(rows, featurize):
    return np.asarray(featurize(rows.x), dtype=np.float64)


def solve_passes(
    passes, work, featurize, *, tol, max_iter, start=None, n_samples, refine=None, info=None
):
    """The decomposition method of the module docstring from ``work`` (a :class:`_Working`
    whose β is its own, or with ``start`` a point whose rule is tried first).  Returns
    ``(HingeResult, work)``; ValueError when the working set outgrows its cap.  When the
    passes run out (``max(max_iter, 50)``) or no violator is left to take into W (a stall)
    the result at the last pass's β is kept, not converged, its ``grad_norm`` the radius
    certified by that pass, and ``info["unconverged"]`` (``info`` a dict) receives
    ``(kkt, threshold, passes, hint)`` for the caller's ConvergenceWarning
    (:meth:`DaskHingeState.warn_unconverged`).  ``refine()``: a new start (or None) when the
    working set is full of rows off their side and no step descends."""
    p = work.g.shape[0]
    k = passes.k  # rows a pass gathers: the switchers first, the band after them
    cap = _max_working(p)
    it = n_polish = 0
    if start is None:
        beta, polished, i, j = work.solve(tol, max_iter)
        it, n_polish = it + i, n_polish + j
    else:
        beta, polished = np.array(start, dtype=np.float64, copy=True), False
    first = start is not None
    forced = 0
    max_passes = max(int(max_iter), 50)
    hint = ""
    while True:
        v = work.v()
        S = passes.run(work.ref, beta, work.ids, v)
        Z = work.Phi * work.t[:, None]
        mW = Z @ beta
        violW = box_violation(work.alpha, mW - 1.0, work.cw)
        kkt = max(S.kkt, float(np.max(violW, initial=0.0)))
        scaleW = np.abs(work.Phi) @ v
        floor = 16.0 * _EPS * (1.0 + max(S.maxscale, float(np.max(scaleW, initial=0.0))))
        thr = max(tol, floor) if polished and kkt > tol else max(tol, 0.0)
        if not first and kkt <= thr:
            break
        if not first and passes.count >= max_passes:  # the result kept, certified
            hint = f" after {passes.count} passes over the rows (max(max_iter, 50))"
            break
        d_cur = None if first else work.dual(beta)

        # the re-based step: β_ref <- β, the gathered rows into W
        A = work.copy()
        A.ref, A.g, A.u, A.s = beta.copy(), S.G.copy(), S.V.copy(), float(S.suma)
        rows = S.sw.merged(S.band, k) if S.band.key.size else S.sw
        if rows.ids.size:
            Phi_r = _gathered(rows, featurize)
            a_new = np.where(rows.m < 1.0, rows.cw, 0.0)
            a_ref = np.where(rows.mref < 1.0, rows.cw, 0.0)
            A.add(rows.ids, Phi_r, rows.t, rows.cw, a_ref, a_new)
        # W rows at the bound of their side under β, farther from the margin than the band
        mA = A.t * (A.Phi @ beta)
        d_band = float(np.max(np.abs(S.band.m - 1.0))) if S.band.key.size == k else np.inf
        at_rule = A.alpha == A.rule(mA)
        release = at_rule & (np.abs(mA - 1.0) > d_band) & ~np.isin(A.ids, rows.ids)
        A.drop(release)
        if A.ids.size > cap:  # the farthest consistent rows out, down to the cap
            far = np.abs(A.t * (A.Phi @ beta) - 1.0)
            far[A.alpha != A.rule(A.t * (A.Phi @ beta))] = -np.inf
            out = np.zeros(A.ids.size, dtype=bool)
            out[np.argsort(-far)[: A.ids.size - cap]] = True
            A.drop(out & np.isfinite(far))
        bA, polA, i, j = A.solve(tol, max_iter)
        it, n_polish = it + i, n_polish + j
        # the start's rule: any α in the box will do; later, descent within the cap
        if first or (A.ids.size <= cap and A.dual(bA) < d_cur):
            work, beta, polished = A, bA, polA
            first = False
            continue
        # the conservative step: β_ref kept, the worst violators into W
        B = work.copy()
        sw = S.sw
        keep = np.zeros(sw.key.size, dtype=bool)
        keep[np.argsort(-sw.key, kind="stable")[: k // 2]] = True  # the worst 2p
        keep &= sw.key > thr
        if not np.any(keep):
            hint = (
                "; it stalled: no violator above the threshold is left to take into the working set"
            )
            break
        ids = sw.ids[keep]
        Phi_r = _gathered(
            _Rows(
                sw.key[keep], ids, sw.x[keep], sw.t[keep], sw.cw[keep], sw.m[keep], sw.mref[keep]
            ),
            featurize,
        )
        a_ref = np.where(sw.mref[keep] < 1.0, sw.cw[keep], 0.0)
        B.add(ids, Phi_r, sw.t[keep], sw.cw[keep], a_ref, a_ref)
        if B.ids.size > cap:
            if B.ref is None:
                rule = np.zeros(B.ids.size)
            else:
                rule = B.rule(B.t * (B.Phi @ B.ref))
            mB = B.t * (B.Phi @ beta)
            cons = (B.alpha == rule) & ~np.isin(B.ids, ids)
            far = np.where(cons, np.abs(mB - 1.0), -np.inf)
            out = np.zeros(B.ids.size, dtype=bool)
            out[np.argsort(-far)[: B.ids.size - cap]] = True
            B.drop(out & np.isfinite(far))
            if B.ids.size > cap:
                # W is full of rows off their side under β_ref: a finer smoothed start
                # (a fit), else re-base without descent (a bounded number of times; the
                # descent steps then resume)
                nxt = None if refine is None else refine()
                if nxt is not None:
                    beta, polished, first = nxt, False, True
                    continue
                if forced >= _MAX_FORCED:
                    raise ValueError(
                        f"the hinge solve on the Dask rows needs a working set "
                        f"of more than {cap} rows (8p + 512): too many samples "
                        "lie on the margin; fit on a NumPy X"
                    )
                forced += 1
                work, beta, polished = A, bA, polA
                continue
        bB, polished, i, j = B.solve(tol, max_iter)
        it, n_polish = it + i, n_polish + j
        work, beta = B, bB
    # the certificate, from the last pass at β (every row) and W
    hW = np.maximum(0.0, 1.0 - mW)
    gap = S.gap + float(work.cw @ hW - work.alpha @ (1.0 - mW))
    sq = float(beta @ beta)
    primal = 0.5 * sq + S.val + float(work.cw @ hW)
    m_ = n_samples + p + 4
    gamma = m_ * _EPS / (1.0 - m_ * _EPS)
    rounding = 2.0 * gamma * (S.rnd + float(work.cw @ scaleW))
    g2 = (n_samples + 2) * _EPS / (1.0 - (n_samples + 2) * _EPS)
    radius = np.sqrt(2.0 * (max(gap, 0.0) + rounding)) + g2 * float(np.linalg.norm(v))
    converged = kkt <= thr
    if not converged and info is not None:
        info["unconverged"] = (kkt, thr, passes.count, hint)
    res = HingeResult(
        beta,
        float(radius),
        it,
        bool(converged),
        False,
        float(primal),
        alpha=None,
        kkt_violation=kkt,
        duality_gap=float(gap),
        dual_objective=-work.dual(beta),
        n_polish=n_polish,
        n_touched=int(work.ids.size),
    )
    return res, work


class DaskHingeState(DaskStateRefusals, ModelState):
    """β of a hinge model whose rows live on a Dask cluster (see the module docstring).

    Attributes
    ----------
    work : _Working
        β_ref, the working set W and the sums over the other rows.
    passes : int
        Passes over the rows the last solve made.
    """

    kind, kernel, loss_names = "dask_hinge", False, ("hinge",)
    warm_per_sample = False
    work = None
    passes = 0

    def spec(self, featurize):
        return PassSpec(featurize, self.loss, self.C)

    def fit_passes(self, store, featurize, p, n, start_share=None, beta0=None):
        """Fit: Newton on the smoothed hinges of :data:`START_STAGES` over the rows from
        ``beta0`` (the first one's first pass ``start_share`` already made), then the
        decomposition method re-based on the last one's solution."""
        from deltafit._dask._newton import DaskPasses

        C = self.opts.C
        self.fit_with(
            lambda eps: DaskPasses(store, PassSpec(featurize, SmoothedHinge(eps), C)),
            HingePasses(store, self.spec(featurize), fit_rows(p, n)),
            featurize,
            p,
            n,
            start_share,
            beta0,
        )
        self.warn_unconverged()
        return self

    def warn_unconverged(self):
        """The ConvergenceWarning (the NumPy hinge's words, naming ``grad_norm_`` and the KKT
        violation) of the last solve when it stopped before the threshold; called from the
        caller's thread (one-vs-rest: under the class's label), once."""
        got = self.__dict__.pop("unconverged", None)
        if got is not None:
            kkt, thr, n_passes, hint = got
            warn_kkt_not_converged(
                "the hinge solve on the Dask rows", n_passes, kkt, thr, self.result.grad_norm, hint
            )

    def fit_with(self, smooth_passes, passes, featurize, p, n, start_share=None, beta0=None):
        """:meth:`fit_passes` over given pass objects: ``smooth_passes(ε)`` a new object
        whose ``run(β, **want)`` is a pass of the smoothed hinge of width ε
        (:func:`~._dask_newton.dask_newton`'s), ``passes`` the hinge passes
        (:class:`HingePasses`' ``run``, ``count``, ``k``).  A one-vs-rest class hands both to
        the joint driver of :mod:`._dask_ovr`."""
        from deltafit._dask._newton import dask_newton

        o = self.opts
        start = np.zeros(p) if beta0 is None else np.array(beta0, dtype=np.float64)
        n_start = 0
        stages = list(START_STAGES) + [
            (START_STAGES[-1][0] * 0.1**j, START_STAGES[-1][1]) for j in range(1, _MORE_STAGES + 1)
        ]

        def smoothed():
            nonlocal start, n_start, first
            if not stages:
                return None
            eps, tol = stages.pop(0)
            sm = smooth_passes(eps)
            sm.count = int(first is not None)
            last = [start]

            def cap(it, beta, *_):  # a start needs no more than a few Newton steps
                last[0] = beta
                return it >= _START_ITER

            out = dask_newton(sm, start, tol=tol, max_iter=o.max_iter, first=first, callback=cap)
            first = None
            n_start += sm.count
            start = np.array(last[0] if out is None else out[0].coef, dtype=np.float64)
            # the rule of β / (1 − ε/2): α_i = C_i below the middle of the smoothed band,
            # the nearest bound to the smoothed dual C_i clip((1 − m_i)/ε, 0, 1)
            return start / (1.0 - 0.5 * eps)

        first = start_share
        rule = start
        if np.any(start) or passes.k >= n:
            # warm_start: the previous solution's rule first; a small problem: every row
            # gathered by the first pass, no smoothed start needed
            n_start, first = int(first is not None), None
        else:
            for _ in START_STAGES:
                rule = smoothed()
        info = {}
        res, work = solve_passes(
            passes,
            _Working.empty(p),
            featurize,
            tol=o.tol,
            max_iter=o.max_iter,
            start=rule,
            n_samples=n,
            refine=smoothed,
            info=info,
        )
        self.work, self.beta, self.result = work, res.coef, res
        self.__dict__.pop("unconverged", None)
        if "unconverged" in info:
            self.unconverged = info["unconverged"]
        self.passes, self.start_passes = n_start + passes.count, n_start
        self.n_samples = n
        return self

    def apply_change(self, change):
        """The changed rows into W with their α (see the module docstring), then passes."""
        featurize = change.dask_featurize
        passes = HingePasses(
            change.dask_rows, self.spec(featurize), 2 * _k_gather(self.beta.shape[0])
        )
        new = self.re_solved(passes, featurize, change.dask_changed, change.dask_changed_ids)
        self.work, self.beta, self.result = new.work, new.beta, new.result
        self.passes, self.n_samples = new.passes, new.n_samples
        new.warn_unconverged()

    def re_solved(self, passes, featurize, changed, ids):
        """A new state: this one's solution re-solved after a change whose rows are
        ``changed = (Φ, t before, C w before, t after, C w after)`` (targets ±1) under the
        sample ids ``ids``, by ``passes`` (:class:`HingePasses`' interface).  This state is
        not changed."""
        o = self.opts
        Phi, tb, cb, ta, ca = changed
        work = self.work.copy()
        inW = np.isin(ids, work.ids)
        # α before the change: W's own, or the rule of β_ref for the others
        alpha_b = np.zeros(ids.size)
        pos = np.searchsorted(work.ids, ids[inW])
        alpha_b[inW] = work.alpha[pos]
        out = ~inW & (cb > 0.0)
        if np.any(out) and work.ref is not None:
            mref = tb[out] * (Phi[out] @ work.ref)
            alpha_b[out] = np.where(mref < 1.0, cb[out], 0.0)
        # drop the changed rows of W (α gone), take the others' α out of the sums
        work.drop(np.isin(work.ids, ids), into_sums=False)
        sel = ~inW
        work.g = work.g - Phi[sel].T @ (alpha_b[sel] * tb[sel])
        work.u = work.u - np.abs(Phi[sel]).T @ alpha_b[sel]
        work.s = work.s - float(alpha_b[sel].sum())
        # the live ones back into W with α clipped to the new box
        liv = ca > 0.0
        if np.any(liv):
            a0 = np.minimum(alpha_b[liv], ca[liv])
            work.add(ids[liv], Phi[liv], ta[liv], ca[liv], a0, np.zeros(int(liv.sum())))
        n = (
            self.n_samples
            + int(np.count_nonzero(liv & (cb <= 0.0)))
            - int(np.count_nonzero(~liv & (cb > 0.0)))
        )
        info = {}
        res, work = solve_passes(
            passes, work, featurize, tol=o.tol, max_iter=o.max_iter, n_samples=n, info=info
        )
        new = type(self)(self.opts, self.max_rank)
        new.work, new.beta, new.result = work, res.coef, res
        if "unconverged" in info:
            new.unconverged = info["unconverged"]
        new.passes, new.n_samples = passes.count, n
        new.start_passes = 0
        return new

    def warm_coef(self, slots):
        return self.beta.copy()

    def exact_matrix(self):
        """Refused, as for :class:`~._dask_newton.DaskNewtonState`."""
        raise ValueError(
            "this model's rows live on a Dask cluster: the exact gradient and "
            "Hessian are not formed on the client (grad_norm_ certifies the "
            "solution; use the sensitivity sphere)"
        )
