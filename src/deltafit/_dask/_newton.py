"""The smooth losses (logistic, squared hinge) on rows persisted on a Dask cluster.

The rows stay in a :class:`~._dask_rows.DaskRowStore`; the client holds β, the stored matrix
``M`` (p × p) and p-sized vectors.  Every *pass* maps one task over the persisted blocks that
returns p-sized and p × p shares — ``Σ cw ℓ``, ``Φᵀ(cw ℓ')``, ``Φᵀ(cw ℓ'(t, 0))`` and, when
asked, ``Φᵀ diag(cw ℓ'') Φ`` — summed in a tree on the cluster (fan-in 8): nothing n-sized
reaches the client.  Each task walks its block a chunk at a time — a cache-sized one when it
sums a p × p matrix (BLAS syrk through NumPy's ``V.T @ V``, which releases the GIL), 8 MiB
for the gradient alone (few NumPy calls: the threaded scheduler's tasks then rarely wait on
the GIL) — Φ formed per chunk (the fitted feature map and the constant column).  The logistic
passes over plain features (no feature map) take the scores, the gradient and the Hessian's
scaled rows from the compiled GIL-free kernels of :mod:`._kernels` when numba is installed
(a Hessian task's own work is then its syrk, about two thirds of it at p = 50).

* **Fit**: damped Newton (the stopping rule of :func:`deltafit.solvers.newton_primal`,
  ``‖∇J(β)‖ ≤ tol · ‖∇J(0)‖``), each iteration one pass that returns J, ∇J and the Hessian at
  the new point; the validating pass that persists the rows also evaluates the start.
* **Updates**: the chord iteration of :mod:`._chord_newton` (Ortega & Rheinboldt 1970, §7.1;
  Kelley 1995, §5.4), with L-BFGS pairs on top of M (Nocedal 1980).  M is the exact Hessian
  of the current problem at a reference point β_ref (kept with it), so the change's rows —
  gathered from the store, a few — correct it exactly by a Woodbury term (Hager 1989), and J,
  ∇J and ∇J(0) at β move by those rows alone: the first step costs no pass.  Each chord step
  is then one pass at the new point; for the logistic loss that pass also sums the Hessian
  there (M exact at the new point: the next step is Newton's) unless a single chord step
  after it is predicted to reach the threshold (the last step's contraction rate, or
  Newton's ``‖∇J₁‖ ≈ c‖∇J₀‖²`` with c seen by the previous solve).  The pass predicted to be
  the last thus leaves M exact at the solution: the next update starts from Newton's step
  and a 0.1% change takes two passes however many came before (M does not age), and the
  curvature regions read M as the Hessian at β.  A step that reduces ‖∇J‖ by less than
  :data:`~._chord_newton.REFRESH_RATIO` asks for one Hessian pass.  For the squared hinge the
  same gradient pass also sums ``Σ (d_now − d_ref) φ φᵀ`` over the rows whose margin state
  switched since β_ref (its curvature is piecewise constant: M then becomes the exact
  generalised Hessian at the new point, the finite Newton step of Keerthi & DeCoste, JMLR
  2005).  The solve ends on ∇J computed afresh by a pass, so ``grad_norm`` certifies
  ``‖β − β*‖ ≤ grad_norm`` (Okumura et al., KDD'15, Thm 6) as the NumPy path's does.
* **Hinge** (not differentiable) is not solved here: :mod:`._dask_hinge` solves its dual by a
  decomposition method over the same row store, starting from a smoothed hinge solved here.
"""

from __future__ import annotations

import numpy as np
from scipy import linalg

from deltafit._dask._state import DaskStateRefusals
from deltafit._states._protocol import ModelState
from deltafit.solvers import (
    SolverResult,
    check_curvature,
    curvature_failure,
    squared_norms,
    warn_not_converged,
)
from deltafit.solvers._chord import REFRESH_RATIO, Curvature, Secants, curvature_switches

__all__ = [
    "PassSpec",
    "DaskPasses",
    "dask_newton",
    "dask_chord",
    "DaskNewtonState",
    "prepare_block",
    "LADDER",
    "block_select",
    "block_curvature",
    "refuse_curvature",
    "warn_unconverged",
    "no_descent",
]

#: A pass skips the Hessian only when one chord step after it is predicted to reach this
#: fraction of the threshold (a predicted rate is a guess: chord steps contract a little
#: slower than the step that measured it).
_MARGIN = 0.3
_FLOOR = 1e-12
#: Step lengths a backtracking pass evaluates J at, all in one pass.
LADDER = 0.5 ** np.arange(1, 41)
#: Bytes of rows a task takes at a time when it sums a p × p matrix (its syrk's operand stays
#: in a core's L2 cache).
_CHUNK_BYTES = 1 << 20
#: Bytes of rows a gradient-only task takes at a time: a few NumPy calls per chunk instead of
#: ~25 per MiB, so that the threaded scheduler's tasks do not queue on the GIL between them
#: (a 125,000 × 50 block: the same time alone, 2 threads over 8 blocks ~25% faster).
_GRAD_CHUNK_BYTES = 1 << 23


class PassSpec:
    """What every block task needs (picklable): Φ of a NumPy block of rows, the loss, C.

    ``plain``: Φ(x) is x with the constant column ``s`` appended (or x itself, ``s`` None)
    when ``featurize`` is the linear models' ``features`` without a feature map: the tasks
    then compute on x and the constant apart, without forming Φ."""

    def __init__(self, featurize, loss, C):
        self.featurize, self.loss, self.C = featurize, loss, float(C)
        kw = getattr(featurize, "keywords", None) or {}
        self.plain = (
            getattr(featurize, "func", None) is not None
            and getattr(featurize.func, "__name__", "") == "features"
            and kw.get("feature_map", 0) is None
        )
        self.s = kw.get("s") if self.plain else None


def _syrk_add(H, V):
    """``H += VᵀV``: NumPy's matmul takes ``V.T @ V`` (one buffer, transposed) to BLAS syrk
    and mirrors the triangle (exactly symmetric), releasing the GIL — SciPy's ``dsyrk``
    wrapper holds it, so the threaded scheduler's tasks ran one at a time."""
    if not V.shape[0]:
        return
    H += V.T @ V


class _Chunk:
    """Products with Φ of a chunk of rows x: Φ B, Φᵀ C and Φᵀ diag(d) Φ, with Φ = [x, s]
    never formed for plain features."""

    def __init__(self, x, spec):
        self.s = spec.s if spec.plain else None
        self.plain = spec.plain
        if spec.plain:
            # a block deserialised on a worker from a graph may sit at an address that is no
            # multiple of 8: NumPy then takes its unaligned loops and matmul bypasses BLAS
            # (a gradient task 3-7x slower); a chunk's aligned copy costs less than a pass
            self.x = x if x.flags.aligned else np.array(x, dtype=np.float64)
        else:
            self.x = np.asarray(spec.featurize(x), dtype=np.float64)

    def dot(self, B):
        if self.s is None:
            return self.x @ B
        return self.x @ B[:-1] + self.s * B[-1]

    def tdot(self, Cm):
        if self.s is None:
            return self.x.T @ Cm
        return np.concatenate([self.x.T @ Cm, self.s * Cm.sum(axis=0, keepdims=True)])

    def weighted_gram(self, d, rows=None):
        """``Φᵀ diag(d) Φ`` over ``rows`` (all: None); ``d ≥ 0`` through syrk, else gemm."""
        x = self.x if rows is None else self.x[rows]
        q = x.shape[1]
        out = np.zeros((q + (self.s is not None),) * 2)
        if np.all(d >= 0.0):
            _syrk_add(out[:q, :q], x * np.sqrt(d)[:, None])
        else:
            out[:q, :q] = (x.T * d) @ x
        if self.s is not None:  # the constant column's row and corner
            xd = self.s * (x.T @ d)
            out[:q, q] = xd
            out[q, :q] = xd
            out[q, q] = self.s * self.s * float(d.sum())
        return out


def _logistic_parts(t, z, value, d2):
    """``(Σ-ready ℓ, ℓ', ℓ'')`` of the logistic loss from one exponential: with ``m = t z``
    and ``e = exp(−|m|)``, ``ℓ = max(−m, 0) + log1p(e)``, ``σ(−m) = e / (1 + e)`` (m ≥ 0) or
    ``1 / (1 + e)``, ``ℓ' = −t σ(−m)``, ``ℓ'' = σ(−m)(1 − σ(−m))`` — the values of
    :class:`deltafit.losses.Logistic` to rounding, for half its transcendental calls (the
    pass's dominant cost).  ``value`` / ``d2`` False: None in their place."""
    m = t * z
    e = np.exp(-np.abs(m))
    inv = 1.0 / (1.0 + e)
    sig = np.where(m >= 0.0, e * inv, inv)
    val = (np.maximum(-m, 0.0) + np.log1p(e)) if value else None
    return val, -t * sig, (sig * (1.0 - sig) if d2 else None)


class Share:
    """A block's (or a sum of blocks') share of a pass."""

    def __init__(self, val, G, H, dH, n_switch, ladder, n):
        self.val, self.G, self.H, self.dH = val, G, H, dH
        self.n_switch, self.ladder, self.n = n_switch, ladder, n

    def __add__(self, o):
        def add(a, b):
            return None if a is None else a + b

        return Share(
            self.val + o.val,
            self.G + o.G,
            add(self.H, o.H),
            add(self.dH, o.dH),
            self.n_switch + o.n_switch,
            add(self.ladder, o.ladder),
            self.n + o.n,
        )


def _sum(*shares):
    out = shares[0]
    for s in shares[1:]:
        out = out + s
    return out


def block_share(
    x, t, w, mods, spec, beta, g0=False, value=True, hessian=False, ref=None, line=None
):
    """One block's share of a pass at β (a Dask task).

    ``g0``: also ``Φᵀ(cw ℓ'(t, 0))``; ``hessian``: ``Φᵀ diag(cw ℓ'') Φ``; ``ref``: β_ref, the
    Hessian correction of the rows whose curvature differs between β_ref and β; ``line``:
    ``(base, step)``, J's data term at ``base + s · step`` for ``s`` in :data:`LADDER`
    (β unused)."""
    loss, C = spec.loss, spec.C
    x, t, cw = mods.rows(x, t, w, C)
    k = x.shape[0]
    p = beta.shape[0]
    G = np.zeros((p, 2 if g0 else 1))
    H = np.zeros((p, p)) if hessian else None
    dH = np.zeros((p, p)) if ref is not None else None
    lad = np.zeros(LADDER.size) if line is not None else None
    val, n_sw = 0.0, 0
    cols = [line[0], line[1]] if line is not None else [beta] + ([ref] if ref is not None else [])
    B = np.column_stack(cols)
    step = max(
        64, (_CHUNK_BYTES if hessian or ref is not None else _GRAD_CHUNK_BYTES) // (8 * max(p, 1))
    )
    fused = loss.name == "logistic" and ref is None
    if fused and spec.plain and line is None and _kernels() is not None and not np.any(cw < 0.0):
        return _compiled_share(x, t, cw, spec, beta, g0, value, hessian)
    for a in range(0, k, step):
        b = min(k, a + step)
        Phi = _Chunk(x[a:b], spec)
        Z = Phi.dot(B)
        tc, wc = t[a:b], cw[a:b]
        if line is not None:
            for j, s in enumerate(LADDER):
                lad[j] += float(wc @ loss.value(tc, Z[:, 0] + s * Z[:, 1]))
            continue
        z = Z[:, 0]
        if fused:
            lv, l1, l2 = _logistic_parts(tc, z, value, hessian)
        else:
            lv = loss.value(tc, z) if value else None
            l1 = loss.d1(tc, z)
            l2 = loss.d2(tc, z) if hessian or ref is not None else None
        if value:
            val += float(wc @ lv)
        if g0:
            Cm = np.empty((b - a, 2))
            Cm[:, 0] = wc * l1
            Cm[:, 1] = wc * loss.d1(tc, np.zeros(b - a))
            G += Phi.tdot(Cm)
        else:
            G += Phi.tdot((wc * l1)[:, None])
        if hessian:
            H += Phi.weighted_gram(wc * l2)
        if ref is not None:
            dn = wc * l2
            dr = wc * loss.d2(tc, Z[:, 1])
            sw = np.flatnonzero(dn != dr)
            if sw.size:
                n_sw += sw.size
                dH += Phi.weighted_gram((dn - dr)[sw], sw)
    return Share(val, G, H, dH, n_sw, lad, k)


#: Whether the logistic passes use the compiled kernels of :mod:`._kernels` (when numba is
#: installed); False: NumPy's products (the tests compare the two).
USE_KERNELS = True


def _kernels():
    """The module of compiled kernels, or None (numba missing or its JIT disabled, or
    :data:`USE_KERNELS` off)."""
    if not USE_KERNELS:
        return None
    from deltafit._dask import _kernels as kern

    return kern if kern.compiled() else None


def _compiled_share(x, t, cw, spec, beta, g0, value, hessian):
    """:func:`block_share` of the logistic loss at β (no ``ref``, no ``line``) over plain
    features (``spec.plain``: Φ = [x, s] never formed) through the compiled kernels, ``cw ≥
    0``.  Per chunk of :data:`_GRAD_CHUNK_BYTES`: the scores in one GIL-free call, the
    logistic parts by NumPy's ufuncs (a few calls per chunk), then the gradient in one more
    call — or, with ``hessian``, per cache-sized piece of :data:`_CHUNK_BYTES` (syrk's operand
    stays in the core's L2 cache), the gradient, the scaled rows and ``xᵀd`` in one read of
    the rows and their ``VᵀV`` by BLAS syrk: three calls a piece, all without the GIL."""
    kern = _kernels()
    k = x.shape[0]
    p = beta.shape[0]
    s = spec.s
    q = p - (s is not None)
    b = np.ascontiguousarray(beta[:q])
    b0 = 0.0 if s is None else float(s * beta[q])
    G = np.zeros((2 if g0 else 1, q + 1))  # rows: ∇J's and ∇J(0)'s shares (+ Σ c last)
    H = np.zeros((p, p)) if hessian else None
    Gd = np.zeros(q + 1)
    step = max(64, _GRAD_CHUNK_BYTES // (8 * max(q, 1)))
    piece = max(64, _CHUNK_BYTES // (8 * max(q, 1)))
    z = np.empty(min(k, step))
    V = np.empty((min(k, piece), q)) if hessian else None
    val = 0.0
    for a in range(0, k, step):
        e = min(k, a + step)
        xc = _Chunk(x[a:e], spec).x
        m = e - a
        tc, wc = t[a:e], cw[a:e]
        kern.scores(xc, b, b0, z[:m])
        lv, l1, l2 = _logistic_parts(tc, z[:m], value, hessian)
        if value:
            val += float(wc @ lv)
        if hessian:
            for c in range(0, m, piece):
                f = min(m, c + piece)
                Vc = V[: f - c]
                kern.hessian_rows(xc[c:f], wc[c:f], l1[c:f], l2[c:f], Vc, G[0], Gd)
                _syrk_add(H[:q, :q], Vc)
        else:
            kern.gradient_rows(xc, wc, l1, G[0])
        if g0:
            kern.gradient_rows(xc, wc, spec.loss.d1(tc, np.zeros(m)), G[1])
    out = G[:, :q].T.copy()
    if s is not None:
        out = np.vstack([out, s * G[:, q]])
        if hessian:
            H[:q, q] = s * Gd[:q]
            H[q, :q] = s * Gd[:q]
            H[q, q] = s * s * Gd[q]
    return Share(val, out, H, None, 0, None, k)


def block_select(x, t, w, mods, spec, beta, key, k):
    """A block's ``k`` live rows of smallest ``key`` (a Dask task): ``key(Φ, t, w, z)``
    returns ``(n, 2)``: the order key and a value kept with it.

    Returns ``(offsets, Φ rows, t, w, z, [key, value] rows, cut)`` of the chosen rows, with
    ``cut`` the smallest key of the block's rows not chosen (inf when none is left)."""
    x = np.asarray(x, dtype=np.float64)
    nb = x.shape[0]
    t = mods.targets(np.asarray(t, dtype=np.float64))
    wv = mods.weights(w, nb)
    wv = np.ones(nb) if wv is None else wv
    live = np.ones(nb, dtype=bool) if mods.live is None else mods.live
    p = beta.shape[0]
    step = max(64, _CHUNK_BYTES // (8 * max(p, 1)))
    keep_off, keep_phi, keep_kv = [], [], []
    cut = np.inf
    for a in range(0, nb, step):
        b = min(nb, a + step)
        at = np.flatnonzero(live[a:b])
        if not at.size:
            continue
        xc = x[a:b][at]
        Phi = np.asarray(spec.featurize(xc), dtype=np.float64)
        kv = np.asarray(key(Phi, t[a:b][at], wv[a:b][at], Phi @ beta), dtype=np.float64)
        keep_off.append(a + at)
        keep_phi.append(Phi)
        keep_kv.append(kv)
        off, P, KV = (np.concatenate(keep_off), np.vstack(keep_phi), np.vstack(keep_kv))
        if off.size > k:  # keep the k smallest so far
            o = np.argsort(KV[:, 0], kind="stable")
            cut = min(cut, float(KV[o[k], 0]))
            o = o[:k]
            off, P, KV = off[o], P[o], KV[o]
        keep_off, keep_phi, keep_kv = [off], [P], [KV]
    if not keep_off:
        return (
            np.zeros(0, dtype=np.intp),
            np.zeros((0, p)),
            np.zeros(0),
            np.zeros(0),
            np.zeros(0),
            np.zeros((0, 2)),
            cut,
        )
    off, P, KV = keep_off[0], keep_phi[0], keep_kv[0]
    return off, P, t[off], wv[off], P @ beta, KV, cut


class DaskPasses:
    """Passes over the store's blocks: ``run(β, ...)`` is one tree-summed :class:`Share`;
    ``count`` passes so far."""

    def __init__(self, store, spec):
        self.store, self.spec, self.count = store, spec, 0

    def run(self, beta, **want):
        from dask import delayed
        from deltafit._dask._rows import tree_compute

        beta = np.array(beta, dtype=np.float64, copy=True)
        want = {
            k: (
                None
                if v is None
                else (tuple(np.array(a, copy=True) for a in v) if isinstance(v, tuple) else v)
            )
            for k, v in want.items()
        }
        st = self.store
        out = tree_compute(
            [
                delayed(block_share)(x, t, w, st.mods(i), self.spec, beta, **want)
                for i, (x, t, w) in enumerate(st.blocks)
            ],
            _sum,
        )
        self.count += 1
        return out

    def select(self, beta, key, k):
        """One pass: per block, the ``k`` live rows of smallest ``key`` (:func:`block_select`),
        with their sample ids; returns ``(ids, Φ, t, w, z, [key, value], cut)`` over the
        union (at most ``k`` a block) and the smallest key left out of it."""
        from dask import delayed
        from deltafit._dask._rows import compute_on_cluster

        beta = np.array(beta, dtype=np.float64, copy=True)
        st = self.store
        got = compute_on_cluster(
            *[
                delayed(block_select)(x, t, w, st.mods(i), self.spec, beta, key, int(k))
                for i, (x, t, w) in enumerate(st.blocks)
            ],
            what="a selection of stored rows",
        )
        self.count += 1
        ids = np.concatenate([st.starts[i] + g[0] for i, g in enumerate(got)]).astype(np.int64)
        parts = [np.concatenate([g[j] for g in got]) for j in range(1, 6)]
        cut = min([float(g[6]) for g in got] + [np.inf])
        return (ids, *parts, cut)


def _cholesky(H):
    try:
        return linalg.cholesky(H, lower=True, check_finite=False)
    except linalg.LinAlgError as exc:  # said in deltafit's words (and a ValueError)
        raise curvature_failure(exc) from exc


def _at(beta, share):
    """J, ∇J (and ∇J(0) when the share holds it) at β from a pass's share."""
    f = 0.5 * float(beta @ beta) + share.val
    grad = beta + share.G[:, 0]
    g0 = share.G[:, 1].copy() if share.G.shape[1] > 1 else None
    return f, grad, g0


def _armijo_ladder(passes, beta, step, f, slope):
    """The longest step of :data:`LADDER` along ``step`` that passes Armijo's test (one
    pass), or None."""
    sh = passes.run(beta, line=(beta, step))
    for s, v in zip(LADDER, sh.ladder):
        x = beta + s * step
        if v + 0.5 * float(x @ x) <= f + 1e-4 * s * slope:
            return s
    return None


def dask_newton(passes, beta, *, tol, max_iter, callback=None, first=None, info=None):
    """Damped Newton over the store's rows from β: ``(result, H, β_ref, (f, ∇J, ∇J(0)))``
    with H the exact Hessian (identity included) at the final β = β_ref; None when a line
    search failed (no step of :data:`LADDER` decreases J: ``info["stall"]`` then holds the
    iteration and ‖∇J‖ where it stalled).  A solve that reaches ``max_iter`` keeps its result
    (``converged`` False, ``grad_norm`` the norm of ∇J from the pass at the returned β: it
    certifies ``‖β − β*‖ ≤ grad_norm``); the caller warns (:func:`warn_unconverged`).
    ``first``: the share of a pass at β (g0 and Hessian included) already made; ``info``: a
    dict that receives ``"newton_c"``, the smaller ``‖∇J_{k+1}‖ / ‖∇J_k‖²`` of the last two
    full steps (None without one; the earlier steps are not yet in Newton's quadratic
    regime), which :func:`dask_chord` predicts with."""
    beta = np.array(beta, dtype=np.float64, copy=True)
    p = beta.shape[0]
    sh = first if first is not None else passes.run(beta, g0=True, hessian=True)
    f, grad, g0 = _at(beta, sh)
    H = sh.H + np.eye(p)
    thr = tol * max(float(np.linalg.norm(g0)), np.finfo(float).tiny)
    gnorm = float(np.linalg.norm(grad))
    it = 0
    cs = []
    stopped = bool(callback(it, beta, gnorm, f, grad)) if callback is not None else False
    while not stopped and gnorm > thr and it < max_iter:
        step = -linalg.cho_solve((_cholesky(H), True), grad, check_finite=False)
        slope = float(grad @ step)
        new = beta + step
        sh = passes.run(new, hessian=True)
        fn, gn, _ = _at(new, sh)
        full = True
        if not (
            float(np.linalg.norm(gn)) <= 0.5 * gnorm
            or fn <= f + 1e-4 * slope
            or -slope <= _FLOOR * (abs(f) + 1.0)
        ):
            s = _armijo_ladder(passes, beta, step, f, slope)
            if s is None:
                if info is not None:
                    info["stall"] = (it, gnorm)
                return None
            new = beta + s * step
            sh = passes.run(new, hessian=True)
            fn, gn, _ = _at(new, sh)
            full = False
        beta, f, grad, H = new, fn, gn, sh.H + np.eye(p)
        gprev, gnorm = gnorm, float(np.linalg.norm(grad))
        cs.append(gnorm / (gprev * gprev) if full and gprev > 0 else None)
        it += 1
        if callback is not None:
            stopped = bool(callback(it, beta, gnorm, f, grad))
    converged = gnorm <= thr  # else max_iter was reached (or the callback stopped it)
    if info is not None:
        seen = [c for c in cs[-2:] if c is not None]
        info["newton_c"] = min(seen) if seen else None
    res = SolverResult(beta, gnorm, it, bool(converged), bool(stopped), float(f))
    return res, H, beta.copy(), (float(f), grad, g0)


def warn_unconverged(out, tol, max_iter):
    """The NumPy path's ConvergenceWarning (:func:`deltafit.solvers.warn_not_converged`,
    naming ``grad_norm_`` and ``tol``) for a :func:`dask_newton` result ``out`` that reached
    ``max_iter`` without converging; silent for a converged or callback-stopped one.  Called
    on the caller's thread (one-vs-rest: in class order, under the class's label)."""
    res, g0 = out[0], out[3][2]
    if res.converged or res.stopped_by_callback:
        return
    thr = tol * max(float(np.linalg.norm(g0)), np.finfo(float).tiny)
    warn_not_converged(
        "Newton on the Dask rows",
        res.grad_norm,
        thr,
        tol,
        res.n_iter,
        f" (max_iter={max_iter} reached)",
    )


def no_descent(what, info=None, label=""):
    """The ValueError of a :func:`dask_newton` whose line search found no decrease of J
    (``what``: "fit" or "re-solve"; ``info`` the solve's, naming where it stalled; ``label``
    a one-vs-rest class's prefix)."""
    where = ""
    stall = (info or {}).get("stall")
    if stall is not None:
        where = f" at iteration {stall[0]} (‖∇J‖ = {stall[1]:.3g})"
    return ValueError(
        f"{label}Newton's method did not descend on the Dask rows in the {what}{where}: no "
        "step along "
        "Newton's direction decreases J in float64 (the rounding level of J and ∇J was "
        "reached before tol: the problem is too ill-conditioned for float64); scale the "
        "features (e.g. StandardScaler) or lower C"
    )


def dask_chord(
    passes,
    beta,
    curv,
    beta_ref,
    loss,
    start,
    *,
    tol,
    max_iter,
    callback=None,
    refresh_ratio=REFRESH_RATIO,
    newton_c=None,
    info=None,
):
    """Chord steps on M (a :class:`~._chord_newton.Curvature`, the exact Hessian of the
    current problem at ``beta_ref``) from β, where ``start = (J, ∇J, ∇J(0))`` at β were moved
    by the change's rows (not fresh).  Returns ``(result, curv, β_ref, (f, ∇J, ∇J(0)))`` or
    None when the iteration stalled (the caller then runs :func:`dask_newton`).

    ``newton_c``: the constant of Newton's ``‖∇J₁‖ ≈ c‖∇J₀‖²`` seen by a previous solve (None:
    unknown), which decides whether the first pass also sums the Hessian; ``info``: a dict
    that receives the constant this solve saw (``"newton_c"``)."""
    beta = np.array(beta, dtype=np.float64, copy=True)
    f, grad, g0 = start
    is_fresh = False
    thr = tol * max(float(np.linalg.norm(g0)), np.finfo(float).tiny)
    gnorm = float(np.linalg.norm(grad))
    it = 0
    stopped = bool(callback(it, beta, gnorm, f, grad)) if callback is not None else False
    switches = curvature_switches(loss)
    secants = Secants()
    refresh = exact_m = False
    rate = None  # the last step's contraction ‖∇J_new‖ / ‖∇J_old‖
    exact_start = bool(np.array_equal(beta, beta_ref))
    c_seen = newton_c if exact_start else None
    p = beta.shape[0]
    while not stopped:
        if gnorm <= thr:
            if is_fresh:
                break
            f, grad, g0 = _at(beta, passes.run(beta, g0=True))
            thr = tol * max(float(np.linalg.norm(g0)), np.finfo(float).tiny)
            gnorm, is_fresh = float(np.linalg.norm(grad)), True
            continue
        if it >= max_iter:
            break
        exact_m = refresh
        if refresh:  # the exact Hessian at β (its pass gives a fresh ∇J too)
            sh = passes.run(beta, hessian=True)
            f, grad, _ = _at(beta, sh)
            gnorm, is_fresh = float(np.linalg.norm(grad)), True
            curv, beta_ref = Curvature(sh.H + np.eye(p), np.zeros(1)), beta.copy()
            secants.clear()
            refresh = False
            if gnorm <= thr:
                continue
        it += 1
        step, slope = secants.descent(curv, grad)
        new = beta + step
        ref = beta_ref if switches else None
        # which passes sum the Hessian at their point (logistic; the squared hinge's M is
        # kept exact by the switched rows): all but the one after which a single chord step
        # is predicted to reach the threshold — the prediction is the last step's rate, or
        # for the first step Newton's ‖∇J₁‖ ≈ c‖∇J₀‖² with c of the previous solve.  The
        # solve then ends with M exact at its β, and a large change contracts quadratically
        at_ref = bool(np.array_equal(beta, beta_ref))
        rate_now = c_seen * gnorm if at_ref and c_seen is not None else (rate if it > 1 else None)
        with_h = not switches and (
            rate_now is None
            or gnorm * rate_now <= thr
            or gnorm * rate_now * rate_now > _MARGIN * thr
        )
        if it == 1:
            g_start = gnorm
        sh = passes.run(new, ref=ref, hessian=with_h)
        fn, gn, _ = _at(new, sh)
        if not (
            float(np.linalg.norm(gn)) <= 0.5 * gnorm
            or fn <= f + 1e-4 * slope
            or -slope <= _FLOOR * (abs(f) + 1.0)
        ):
            s = _armijo_ladder(passes, beta, step, f, slope)
            if s is None:
                if exact_m:
                    return None
                refresh = True
                continue
            new = beta + s * step
            sh = passes.run(new, ref=ref, hessian=with_h)
            fn, gn, _ = _at(new, sh)
        if with_h:  # M made the exact Hessian at the new β
            curv, beta_ref = Curvature(sh.H + np.eye(p), np.zeros(1)), new.copy()
            secants.clear()
        elif switches and sh.n_switch:  # M made the exact generalised Hessian at the new β
            curv, beta_ref = Curvature(curv.folded().H + sh.dH, np.zeros(1)), new.copy()
            secants.clear()
        else:
            secants.add(new - beta, gn - grad)
        beta, f, grad, is_fresh = new, fn, gn, True
        gprev, gnorm = gnorm, float(np.linalg.norm(grad))
        rate = gnorm / gprev if gprev > 0 else None
        if it == 1 and exact_start and g_start > 0:
            c_seen = rate / g_start
        refresh = gnorm > refresh_ratio * gprev
        if callback is not None:
            stopped = bool(callback(it, beta, gnorm, f, grad))
    converged = gnorm <= thr and is_fresh
    if info is not None:
        info["newton_c"] = c_seen
    if not converged and not stopped:
        return None
    res = SolverResult(beta, gnorm, it, bool(converged), bool(stopped), float(f))
    return res, curv.folded(), beta_ref, (float(f), grad, g0)


# --------------------------------------------------------------------------- fit pass
#: The losses whose Newton curvature a Dask fit checks (:func:`refuse_curvature`): those of
#: :class:`DaskNewtonState` (the hinge's smoothed start only starts its dual method).
CURVATURE_LOSSES = ("logistic", "squared_hinge")


def block_curvature(x, w, spec):
    """The sample of a block whose curvature ``C·w·‖Φ(x)‖²`` is the largest, as
    ``(C·w·‖Φ(x)‖², ‖Φ(x)‖², C·w)`` (zeros for an empty block, or a loss not in
    :data:`CURVATURE_LOSSES`); a NaN product (an overflowed norm of weight 0) counts as
    infinite, as in :func:`deltafit.solvers.check_curvature`.  ``x`` validated rows, ``w``
    validated weights (None: 1)."""
    k = x.shape[0]
    if not k or spec is None or spec.loss.name not in CURVATURE_LOSSES:
        return 0.0, 0.0, 0.0
    sq = np.empty(k)
    step = max(64, _GRAD_CHUNK_BYTES // (8 * max(x.shape[1], 1)))
    for a in range(0, k, step):
        b = min(k, a + step)
        sq[a:b] = squared_norms(_Chunk(x[a:b], spec).x)
        if spec.plain and spec.s is not None:  # the constant column, not formed
            sq[a:b] += spec.s * spec.s
    cw = spec.C * (np.ones(k) if w is None else np.asarray(w, dtype=np.float64))
    with np.errstate(over="ignore", invalid="ignore"):
        kappa = cw * sq
    kappa = np.where(np.isnan(kappa), np.inf, kappa)
    i = int(np.argmax(kappa))
    return float(kappa[i]), float(sq[i]), float(cw[i])


def _largest(*outs):
    """The largest of the blocks' :func:`block_curvature` (the last item of each output)."""
    return max((o[-1] for o in outs), key=lambda c: c[0])


def refuse_curvature(worst, spec):
    """Refuse a fit whose largest sample curvature ``worst`` (:func:`block_curvature`) is
    beyond double precision, in the NumPy path's words (:func:`~deltafit.solvers.
    check_curvature`, its rule and message)."""
    if spec is None or spec.loss.name not in CURVATURE_LOSSES:
        return
    _, sq, cw = worst
    check_curvature(np.array([sq]), cw, spec.loss)


def prepare_block(x, y, w, problem, offset, spec, beta0):
    """The fit's one pass over a block (a Dask task): validated rows, encoded targets and
    weights (to persist), the samples' digests split into segments, the counts, the
    block's share of a Newton pass at ``beta0`` (None without ``spec``) and its largest
    sample curvature (:func:`block_curvature`: zeros without ``spec``)."""
    from deltafit._dask._stats import _block_pieces
    from deltafit._ledger import digest_array

    x = problem.rows(x)
    t = problem.targets(y)
    k = x.shape[0]
    if t.shape[0] != k:
        raise ValueError(f"X has {k} rows but y has {t.shape[0]} labels in a block")
    w = problem.weights(w, k)
    from deltafit.utils._validation import check_scale

    check_scale(np.asarray(problem.featurize(x[:1]) if k else np.zeros((0, 1))), problem.C)
    pieces = (
        _block_pieces(digest_array(x, t, problem.key, problem.scheme), offset)
        if problem.key is not None
        else []
    )
    wpos = np.ones(k, dtype=bool) if w is None else w > 0
    pos = t > 0 if t.ndim == 1 else np.zeros(k, dtype=bool)
    counts = np.array(
        [
            k,
            np.count_nonzero(pos),
            np.count_nonzero(wpos),
            np.count_nonzero(pos & wpos),
            int(w is None or np.all(w == 1.0)),
        ]
    )
    share = None
    if spec is not None:
        from deltafit._dask._rows import BlockMods

        share = block_share(x, t, w, BlockMods(), spec, beta0, g0=True, hessian=True)
    return (x, t, w), pieces, counts, share, block_curvature(x, w, spec)


def _part(out, i):
    return out[i]


def _part_w(out):
    return out[0][2]


# --------------------------------------------------------------------------- the state
class DaskNewtonState(DaskStateRefusals, ModelState):
    """β of a logistic / squared-hinge model whose rows live on a Dask cluster, re-solved
    after each change by :func:`dask_chord` (see the module docstring).

    Attributes
    ----------
    curv : Curvature
        M, the exact Hessian of the current problem at ``beta_ref``.
    beta_ref : ndarray of shape (p,)
    point : tuple
        ``(J, ∇J, ∇J(0))`` at β, computed afresh by the last solve.
    passes : int
        Passes over the rows the last solve made.
    """

    kind, kernel, loss_names = "dask_newton", False, ("logistic", "squared_hinge")
    warm_per_sample = False
    curv = beta_ref = point = None
    passes = 0
    #: Newton's ``‖∇J₁‖ ≈ c‖∇J₀‖²`` constant seen by the last solve (None: not seen)
    newton_c = None

    def spec(self, featurize):
        return PassSpec(featurize, self.loss, self.C)

    def fit_passes(self, passes, beta0, first):
        o = self.opts
        info = {}
        out = dask_newton(
            passes,
            beta0,
            tol=o.tol,
            max_iter=o.max_iter,
            callback=o.callback,
            first=first,
            info=info,
        )
        if out is None:
            raise no_descent("fit", info)
        self._take(out)
        warn_unconverged(out, o.tol, o.max_iter)
        self.passes = passes.count
        self.newton_c = info.get("newton_c")
        return self

    def _take(self, out):
        res, H, self.beta_ref, self.point = out
        self.curv = H if isinstance(H, Curvature) else Curvature(H, np.zeros(1))
        self.beta, self.result = res.coef, res

    def apply_change(self, change):
        """Correct M and (J, ∇J, ∇J(0)) for the change's rows, then chord steps over the
        store after the change (``change.dask_rows``); Newton from β if they stall."""
        o = self.opts
        passes = DaskPasses(change.dask_rows, self.spec(change.dask_featurize))
        Phi, t_b, cw_b, t_a, cw_a = change.dask_changed
        loss, beta = self.loss, self.beta
        f, grad, g0 = self.point
        curv = self.curv
        if Phi.shape[0]:
            check_curvature(squared_norms(Phi), cw_a, loss)  # before anything changes
            z, zr, zero = Phi @ beta, Phi @ self.beta_ref, np.zeros(Phi.shape[0])
            f = f + float(cw_a @ loss.value(t_a, z) - cw_b @ loss.value(t_b, z))
            G = Phi.T @ np.column_stack(
                [
                    cw_a * loss.d1(t_a, z) - cw_b * loss.d1(t_b, z),
                    cw_a * loss.d1(t_a, zero) - cw_b * loss.d1(t_b, zero),
                ]
            )
            grad, g0 = grad + G[:, 0], g0 + G[:, 1]
            delta = cw_a * loss.d2(t_a, zr) - cw_b * loss.d2(t_b, zr)
            curv = curv.corrected(Phi, delta, np.zeros(Phi.shape[0], dtype=np.intp))
        info = {}
        out = dask_chord(
            passes,
            beta,
            curv,
            self.beta_ref,
            loss,
            (f, grad, g0),
            tol=o.tol,
            max_iter=o.max_iter,
            callback=o.callback,
            newton_c=self.newton_c,
            info=info,
        )
        if out is None:
            out = dask_newton(
                passes, beta, tol=o.tol, max_iter=o.max_iter, callback=o.callback, info=info
            )
            if out is None:
                raise no_descent("re-solve", info)
        self._take(out)
        warn_unconverged(out, o.tol, o.max_iter)
        self.passes = passes.count
        if info.get("newton_c") is not None:
            self.newton_c = info["newton_c"]

    def warm_coef(self, slots):
        return self.beta.copy()

    def hessian_at_solution(self, store, featurize):
        """``∇²J(β)`` (p × p): M itself when β_ref is β (M is then the exact Hessian of the
        current problem at β), else one Hessian pass over the store (kept until the next
        change)."""
        if self.beta_ref is not None and np.array_equal(self.beta_ref, self.beta):
            return self.curv.folded().H.copy()
        memo = self.__dict__.get("_hessian_memo")
        if memo is None or memo[0] is not self.beta:
            sh = DaskPasses(store, self.spec(featurize)).run(self.beta, value=False, hessian=True)
            H = sh.H
            H.flat[:: H.shape[0] + 1] += 1.0
            memo = (self.beta, H)
            self.__dict__["_hessian_memo"] = memo
        return memo[1].copy()

    def select_rows(self, store, featurize, key, k):
        """The ``k`` stored samples of smallest ``key`` per row block (see
        :meth:`DaskPasses.select`), scores under β."""
        return DaskPasses(store, self.spec(featurize)).select(self.beta, key, k)

    def exact_matrix(self):
        """Refused: what reads every row on the client (the exact gradient from the rows)
        does not apply to rows on a cluster."""
        raise ValueError(
            "this model's rows live on a Dask cluster: the exact gradient is "
            "not formed on the client (grad_norm_ certifies the solution; "
            "problem_.hessian() comes back p x p from the cluster)"
        )

    def ensure_capacity(self, capacity):
        pass

    def take(self, keep, capacity):
        pass
