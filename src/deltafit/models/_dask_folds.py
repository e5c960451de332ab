"""Many sub-problems of a Dask-fitted logistic / squared-hinge model re-solved jointly: the k
fold models of a cross-validation, or the left-out models of the samples a bound leaves
undecided.

Sub-problem c is the full problem without the rows of group c (a fold, or one sample):
``J_c(β) = C Σ_{i ∉ c} w_i ℓ(t_i, ⟨φ_i, β⟩) + ½‖β‖²``.  Every column of a p × m matrix
``B = [β_1 … β_m]`` is solved by damped Newton / chord steps (Ortega & Rheinboldt 1970, §7.1;
Kelley 1995, §5.4) warm from the full solution β̂, and **one pass serves every column**: a
block task computes ``Z = Φ B`` (rows × m), zeroes the entries of each row's own group and
returns ``Φᵀ(cw ℓ'(t, Z) ⊙ mask)`` (p × m) with the m values of J; the tree sum reaches the
client as p × m numbers.  The m re-solves thus cost the passes of the slowest column, not m
times as many.

* **Start** (at ``B = β̂ 1ᵀ``): the group shares of the data term, of its gradient, of
  ``∇J(0)`` and of the Hessian are summed apart (k folds: one pass; a few samples: gathered
  from the row store, no pass) and subtracted from the full model's (J, ∇J, ∇J(0)) and from
  its exact Hessian at β̂ that the Dask fit keeps: ``M_c = H(β̂) − H_c(β̂)`` is the exact
  Hessian of sub-problem c at its start, so the first step of every column is a Newton step.
* **Steps**: ``β_c ← β_c − s M_c⁻¹ ∇J_c(β_c)``, accepted on the rule of
  :func:`~._dask_newton.dask_newton` (the gradient halves, or Armijo's decrease), else s is
  halved for that column in the next pass.  A column whose gradient shrinks by less than
  :data:`~._chord_newton.REFRESH_RATIO` asks the next pass for its exact Hessian at the trial
  point (Σ over its rows of ``cw ℓ''`` outer products), which becomes its M when the step is
  accepted: slow columns turn into Newton iterations, the others stay chord steps.
* **Stop**: every column on the certified rule of :func:`deltafit.solvers.newton_primal`,
  ``‖∇J_c(β_c)‖ ≤ tol · ‖∇J_c(0)‖`` with the gradient of the last pass (computed afresh), so
  ``‖β_c − β_c*‖ ≤ ‖∇J_c(β_c)‖`` (Okumura et al., KDD'15, Thm 6).

Upper layers (:mod:`deltafit.model_selection._dask_smooth_cv`) see a :class:`SmoothCVFit`
(the full model's p-sized quantities and the row store) and the functions below.
"""

from __future__ import annotations

import numpy as np
from scipy import linalg
from sklearn.base import clone

from ._chord_newton import REFRESH_RATIO
from ._dask_newton import _CHUNK_BYTES, _FLOOR, LADDER, _Chunk
from ._dask_rows import tree_compute

__all__ = ["SmoothCVFit", "fit_smooth", "JointPasses", "joint_resolve", "fold_resolve",
           "sample_resolve", "score_folds", "row_quantities", "map_store", "SMOOTH_LOSSES"]

SMOOTH_LOSSES = ("logistic", "squared_hinge")
#: columns of one joint re-solve of left-out samples (memory: a chunk's rows × columns)
SAMPLE_BATCH = 256


class SmoothCVFit:
    """What cross-validation reads from a Dask-fitted logistic / squared-hinge model.

    Attributes
    ----------
    model : the fitted estimator
    beta, grad, grad0 : ndarray of shape (p,)
        β̂, the exact ``∇J(β̂)`` and ``∇J(0)`` of the last pass of the fit.
    value : float
        ``J(β̂)``.
    hessian : ndarray of shape (p, p)
        The exact Hessian of J at β̂ (identity included).
    C : float
    loss : deltafit.losses.Loss
    tol, max_iter : the estimator's solver settings
    classes : ndarray of shape (2,)
    store : DaskRowStore
        The persisted row blocks.
    spec : PassSpec
    n : int
    n_passes : int
        Passes over the rows the fit made.
    """

    def __init__(self, **kw):
        self.__dict__.update(kw)

    @property
    def starts(self):
        """First row of each block, and n."""
        return self.store.starts


def fit_smooth(estimator, X, y, sample_weight=None):
    """A clone of ``estimator`` (a :class:`~deltafit.LinearClassifier` with a logistic or
    squared-hinge loss) fitted on the dask collections with its rows kept on the cluster.

    Raises
    ------
    ValueError
        For another estimator or loss, and for the refusals of the Dask fit.
    """
    from ._dask_newton import PassSpec
    from ._linear import LinearClassifier

    loss = estimator.get_params().get("loss") if hasattr(estimator, "get_params") else None
    if not isinstance(estimator, LinearClassifier) or loss not in SMOOTH_LOSSES:
        raise ValueError(f"joint warm re-solves need a LinearClassifier with loss in "
                         f"{list(SMOOTH_LOSSES)}, got {type(estimator).__name__}"
                         + (f" with loss={loss!r}" if loss is not None else ""))
    model = clone(estimator).set_params(keep_data=True, warm_start=False)
    if estimator.feature_map is not None:  # a fitted map is part of the model: kept as it is
        model.set_params(feature_map=estimator.feature_map)
    model.fit(X, y, sample_weight=sample_weight)
    if model._n_classes:
        raise ValueError(
            f"the cross-validation of a logistic / squared-hinge model on dask input takes two "
            f"classes; y has {model._n_classes} (loss='squared' cross-validates K classes on "
            "dask input in closed form; or compute X and y to NumPy arrays)")
    st = model._state
    f, grad, g0 = st.point
    opts = model._solver_options()
    return SmoothCVFit(model=model, beta=np.array(st.beta, dtype=np.float64),
                       grad=np.array(grad, dtype=np.float64),
                       grad0=np.array(g0, dtype=np.float64), value=float(f),
                       hessian=np.array(st.curv.folded().H, dtype=np.float64),
                       C=opts.C, loss=opts.loss, tol=opts.tol, max_iter=opts.max_iter,
                       classes=np.asarray(model.classes_), store=model._dask_rows,
                       spec=PassSpec(model._featurizer(), opts.loss, opts.C),
                       n=int(model._dask_rows.starts[-1]), n_passes=int(model._dask_passes))


# ------------------------------------------------------------------------------ block tasks
def _rows_of(x, t, w, mods, spec):
    x = np.asarray(x, dtype=np.float64)
    k = x.shape[0]
    t = mods.targets(np.asarray(t, dtype=np.float64))
    wv = mods.weights(w, k)
    cw = np.full(k, spec.C) if wv is None else spec.C * wv
    return x, t, cw


def row_quantities(x, t, w, mods, spec, B):
    """Per row of a block (a Dask task's helper): ``Φ B`` (rows × m), the encoded targets,
    ``C w`` and ``‖φ_i‖²``."""
    x, t, cw = _rows_of(x, t, w, mods, spec)
    k = x.shape[0]
    Z = np.empty((k, B.shape[1]))
    sq = np.empty(k)
    step = max(64, _CHUNK_BYTES // (8 * max(B.shape[0], 1)))
    for a in range(0, k, step):
        b = min(k, a + step)
        ch = _Chunk(x[a:b], spec)
        Z[a:b] = ch.dot(B)
        if ch.s is None:
            sq[a:b] = np.einsum("ij,ij->i", ch.x, ch.x)
        else:
            sq[a:b] = np.einsum("ij,ij->i", ch.x, ch.x) + ch.s * ch.s
    return Z, t, cw, sq


class JointShare:
    """A block's (or a sum of blocks') share of a joint pass: the m data terms ``val``, the
    gradients ``G`` (p × m), and on request ``G0`` (p × m, at 0), the group Hessians ``GH``
    (m × p × p, each group's rows at its column) and the Hessians ``HC`` of the columns
    asked for (len × p × p, all rows but the column's group)."""

    def __init__(self, val, G, G0, GH, HC):
        self.val, self.G, self.G0, self.GH, self.HC = val, G, G0, GH, HC

    def __add__(self, o):
        def add(a, b):
            return None if a is None else a + b

        return JointShare(self.val + o.val, self.G + o.G, add(self.G0, o.G0),
                          add(self.GH, o.GH), add(self.HC, o.HC))


def _sum(*shares):
    out = shares[0]
    for s in shares[1:]:
        out = out + s
    return out


def _groups(k, excl):
    """The group (column) of each of a block's k rows, −1 for none; ``excl`` is
    ``(rows, cols)`` or a dense array of length k."""
    if excl is None:
        return np.full(k, -1, dtype=np.intp)
    if isinstance(excl, tuple):
        g = np.full(k, -1, dtype=np.intp)
        g[np.asarray(excl[0], dtype=np.intp)] = excl[1]
        return g
    return np.asarray(excl, dtype=np.intp).reshape(-1)


def joint_share(x, t, w, mods, spec, B, excl, g0=False, group_hessian=False, hess_cols=(),
                colmap=None):
    """One block's share of a joint pass at the columns of B (a Dask task); see the module
    docstring.  ``colmap``: B holds some of the sub-problems only, ``colmap[c]`` the column of
    sub-problem c in B (−1: absent)."""
    loss = spec.loss
    x, t, cw = _rows_of(x, t, w, mods, spec)
    k = x.shape[0]
    p, m = B.shape
    grp = _groups(k, excl)
    if colmap is not None:
        grp = np.where(grp >= 0, np.asarray(colmap)[np.maximum(grp, 0)], -1)
    hess_cols = list(hess_cols)
    val = np.zeros(m)
    G = np.zeros((p, m))
    G0 = np.zeros((p, m)) if g0 else None
    GH = np.zeros((m, p, p)) if group_hessian else None
    HC = np.zeros((len(hess_cols), p, p)) if hess_cols else None
    cols = np.arange(m)
    step = max(64, _CHUNK_BYTES // (8 * max(p, m, 1)))
    for a in range(0, k, step):
        b = min(k, a + step)
        ch = _Chunk(x[a:b], spec)
        Z = ch.dot(B)
        tc, wc, gc = t[a:b], cw[a:b], grp[a:b]
        keep = (gc[:, None] != cols[None, :]).astype(np.float64)  # 0 at a row's own group
        W = wc[:, None] * keep
        T = tc[:, None]
        val += np.einsum("ij,ij->j", W, loss.value(T, Z))
        G += ch.tdot(W * loss.d1(T, Z))
        if g0:
            G0 += ch.tdot(W * loss.d1(tc, np.zeros(b - a))[:, None])
        if group_hessian:
            for c in np.unique(gc[gc >= 0]).tolist():
                r = np.flatnonzero(gc == c)
                GH[c] += ch.weighted_gram(wc[r] * loss.d2(tc[r], Z[r, c]), r)
        for j, c in enumerate(hess_cols):
            HC[j] += ch.weighted_gram(W[:, c] * loss.d2(tc, Z[:, c]))
    return JointShare(val, G, G0, GH, HC)


def _ident(a):
    return a


class JointPasses:
    """Joint passes over the store's blocks with each block's row groups (persisted once):
    ``run(B, ...)`` is one tree-summed :class:`JointShare`; ``count`` passes so far."""

    def __init__(self, store, spec, excl):
        import dask
        from dask import delayed

        self.store, self.spec, self.count = store, spec, 0
        big = [i for i, e in enumerate(excl) if e is not None and not isinstance(e, tuple)]
        self.excl = list(excl)
        if big:  # dense group arrays (folds): on the cluster once, not shipped every pass
            got = dask.persist(*[delayed(_ident)(excl[i]) for i in big])
            for i, d in zip(big, got):
                self.excl[i] = d

    def run(self, B, **want):
        from dask import delayed

        B = np.array(B, dtype=np.float64, copy=True)
        st = self.store
        out = tree_compute([delayed(joint_share)(x, t, w, st.mods(i), self.spec, B,
                                                 self.excl[i], **want)
                            for i, (x, t, w) in enumerate(st.blocks)], _sum,
                           what="a joint pass of the folds")
        self.count += 1
        return out


def _factor(M):
    return linalg.cho_factor(M, lower=True, check_finite=False)


def joint_resolve(passes, beta, start, *, tol, max_iter, first_hessian=False):
    """Solve every sub-problem from β (see the module docstring).

    Parameters
    ----------
    passes : JointPasses
    beta : ndarray of shape (p,)
        The full solution, every column's start.
    start : tuple
        ``(J, G, G0, M)`` of the m sub-problems at β: shapes (m,), (p, m), (p, m), (m, p, p);
        M the exact Hessians (identity included).
    tol, max_iter : the stopping rule and the most passes of steps
    first_hessian : bool
        Ask the first step's pass for every column's exact Hessian at its trial point (k
        folds: a fold's first step moves β far enough that chord steps on the start's M
        contract slowly; one Hessian pass makes the rest contract fast).

    Returns
    -------
    B : ndarray of shape (p, m)
    grad_norm : ndarray of shape (m,)
    n_iter : ndarray of int, shape (m,)
        Accepted steps per column.

    Raises
    ------
    ValueError
        When a column does not descend, or the passes run out.
    """
    f, G, G0, M = (np.array(a, dtype=np.float64, copy=True) for a in start)
    p, m = G.shape
    B = np.repeat(np.asarray(beta, dtype=np.float64)[:, None], m, axis=1)
    thr = tol * np.maximum(np.linalg.norm(G0, axis=0), np.finfo(float).tiny)
    gn = np.linalg.norm(G, axis=0)
    fac = [_factor(M[c]) for c in range(m)]
    n_iter = np.zeros(m, dtype=np.intp)
    scale = np.ones(m)
    want_h = np.full(m, bool(first_hessian))
    done = gn <= thr
    eye = np.eye(p)
    rounds = 0
    while not np.all(done):
        if rounds >= max_iter:
            raise ValueError(f"the joint re-solve did not converge in max_iter={max_iter} "
                             f"passes ({int(np.count_nonzero(~done))} of {m} sub-problems "
                             "left)")
        rounds += 1
        act = np.flatnonzero(~done)
        steps = np.zeros((p, m))
        for c in act.tolist():
            steps[:, c] = -linalg.cho_solve(fac[c], G[:, c], check_finite=False)
        slope = np.einsum("ij,ij->j", G, steps)
        trial = B + scale * steps
        hc = [c for c in act.tolist() if want_h[c]]
        # the pass evaluates the unconverged columns only (a converged one keeps its β)
        colmap = np.full(m, -1, dtype=np.intp)
        colmap[act] = np.arange(act.size)
        sh = passes.run(trial[:, act], hess_cols=colmap[hc].tolist(),
                        colmap=None if act.size == m else colmap)
        fn = np.full(m, np.inf)
        Gn = np.zeros((p, m))
        fn[act] = 0.5 * np.einsum("ij,ij->j", trial[:, act], trial[:, act]) + sh.val
        Gn[:, act] = trial[:, act] + sh.G
        gnn = np.linalg.norm(Gn, axis=0)
        for c in act.tolist():
            s = scale[c]
            if not (gnn[c] <= 0.5 * gn[c] or fn[c] <= f[c] + 1e-4 * s * slope[c]
                    or -s * slope[c] <= _FLOOR * (abs(f[c]) + 1.0)):
                if s <= LADDER[-1]:
                    raise ValueError("the joint re-solve on the Dask rows did not descend "
                                     "(the problem is too ill-conditioned for float64)")
                scale[c] = 0.5 * s
                want_h[c] = True  # retry with the exact Hessian at the next trial
                continue
            B[:, c], f[c], G[:, c] = trial[:, c], fn[c], Gn[:, c]
            n_iter[c] += 1
            if c in hc:  # the exact Hessian at the accepted point: a Newton step next
                fac[c] = _factor(eye + sh.HC[hc.index(c)])
                want_h[c] = False
            else:
                want_h[c] = gnn[c] > REFRESH_RATIO * gn[c]
            gn[c], scale[c] = gnn[c], 1.0
            done[c] = gn[c] <= thr[c]
    return B, gn, n_iter


# ------------------------------------------------------------------------------ the uses
def _fold_groups(fit, fold):
    """Each block's slice of the fold vector (its dense row groups)."""
    st = fit.starts
    return [np.ascontiguousarray(fold[st[i]:st[i + 1]], dtype=np.int32)
            for i in range(len(st) - 1)]


def fold_resolve(fit, fold, k):
    """The k fold models of a k-fold cross-validation, jointly.

    Parameters
    ----------
    fit : SmoothCVFit
    fold : ndarray of int of shape (n,)
        Each row's fold, 0..k-1.
    k : int

    Returns
    -------
    betas : ndarray of shape (k, p)
    n_passes : int
        Passes over the rows (the start's included).
    n_iter : ndarray of int, shape (k,)
    """
    passes = JointPasses(fit.store, fit.spec, _fold_groups(fit, fold))
    B0 = np.repeat(fit.beta[:, None], k, axis=1)
    sh = passes.run(B0, g0=True, group_hessian=True)
    f = 0.5 * float(fit.beta @ fit.beta) + sh.val
    M = fit.hessian[None, :, :] - sh.GH
    start = (f, B0 + sh.G, sh.G0, M)
    B, _, n_iter = joint_resolve(passes, fit.beta, start, tol=fit.tol, max_iter=fit.max_iter,
                                 first_hessian=True)
    return B.T.copy(), passes.count, n_iter


def sample_resolve(fit, ids, batch=SAMPLE_BATCH):
    """Exact left-out decisions of the samples ``ids`` (row numbers): each one's model without
    it, re-solved jointly in batches of ``batch`` columns; the start of every column comes from
    the sample's own row (gathered), with no pass.

    Returns
    -------
    decision : ndarray of shape (len(ids),)
        ``⟨φ_t, β_{−t}⟩``.
    n_passes : int
    n_iter : ndarray of int, shape (len(ids),)
    """
    ids = np.asarray(ids, dtype=np.int64).reshape(-1)
    out = np.empty(ids.size)
    iters = np.zeros(ids.size, dtype=np.intp)
    n_passes = 0
    if ids.size == 0:
        return out, 0, iters
    loss, C, beta = fit.loss, fit.C, fit.beta
    starts = fit.starts
    for a in range(0, ids.size, batch):
        idb = ids[a:a + batch]
        m = idb.size
        X, T, W = fit.store.gather(idb)
        Phi = np.asarray(fit.spec.featurize(X), dtype=np.float64)
        T = np.asarray(T, dtype=np.float64).reshape(-1)
        cw = C * W
        z = Phi @ beta
        f = fit.value - cw * loss.value(T, z)
        G = fit.grad[:, None] - Phi.T * (cw * loss.d1(T, z))
        G0 = fit.grad0[:, None] - Phi.T * (cw * loss.d1(T, np.zeros(m)))
        d = cw * loss.d2(T, z)
        M = fit.hessian[None, :, :] - d[:, None, None] * (Phi[:, :, None] * Phi[:, None, :])
        blk = np.searchsorted(starts, idb, side="right") - 1
        excl = [None] * (len(starts) - 1)
        for b in np.unique(blk).tolist():
            j = np.flatnonzero(blk == b)
            excl[b] = (idb[j] - starts[b], j)
        passes = JointPasses(fit.store, fit.spec, excl)
        B, _, it = joint_resolve(passes, beta, (f, G, G0, M), tol=fit.tol,
                                 max_iter=fit.max_iter)
        out[a:a + m] = np.einsum("ij,ji->i", Phi, B)
        iters[a:a + m] = it
        n_passes += passes.count
    return out, n_passes, iters


def _score_block(x, t, w, mods, spec, betas, fold, n_folds):
    """Each row's decision under its fold's β, and per fold: rows, correct signs."""
    fold = np.asarray(fold, dtype=np.intp).reshape(-1)
    Z, t, _, _ = row_quantities(x, t, w, mods, spec, betas.T)
    z = Z[np.arange(Z.shape[0]), fold]
    good = ((z > 0.0) == (t > 0.0)).astype(np.float64)
    return z, np.stack([np.bincount(fold, minlength=n_folds).astype(np.float64),
                        np.bincount(fold, good, minlength=n_folds)])


def _first(o):
    return o[0]


def _second(o):
    return o[1]


def score_folds(fit, fold, betas):
    """One pass: every row's decision under its fold's β (a dask array of length n, persisted
    on the cluster) and, per fold, the rows and the correctly signed rows (computed).

    Returns
    -------
    z : dask array of shape (n,)
    sums : ndarray of shape (2, k)
    """
    import dask
    import dask.array as da
    from dask import delayed

    k = betas.shape[0]
    groups = _fold_groups(fit, fold)
    st = fit.store
    parts = [delayed(_score_block)(x, t, w, st.mods(i), fit.spec, betas, groups[i], k)
             for i, (x, t, w) in enumerate(st.blocks)]
    parts = dask.persist(*parts)
    sizes = st.sizes().tolist()
    z = da.concatenate([da.from_delayed(delayed(_first)(p), shape=(int(s),),
                                        dtype=np.float64) for p, s in zip(parts, sizes)])
    sums = tree_compute([delayed(_second)(p) for p in parts], _sum,
                        what="a pass of the left-out scores")
    return z, np.asarray(sums)


def map_store(fit, fn, *args):
    """``fn(x, t, w, mods, *args)`` over the store's blocks, lazily: a list of delayed
    results, one per block (``fn`` a picklable function of NumPy arrays)."""
    from dask import delayed

    st = fit.store
    return [delayed(fn)(x, t, w, st.mods(i), *args) for i, (x, t, w) in enumerate(st.blocks)]
