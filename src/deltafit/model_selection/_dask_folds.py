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

**K ≥ 3 classes** (one-vs-rest, :mod:`._dask_ovr`'s fit): a column is a pair (class, group),
its targets the class's ±1 codes of the stored class indices (``column_targets``), its start
the class's β̂ and Hessian; the K·k class-fold problems of a k-fold cross-validation, or the
candidate classes of the left-out samples, share every pass.

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

from collections.abc import Callable
from typing import Any

import numpy as np
from scipy import linalg
from sklearn.base import clone

from deltafit._dask._newton import _CHUNK_BYTES, _FLOOR, LADDER, _Chunk
from deltafit._dask._rows import tree_compute
from deltafit.solvers._chord import REFRESH_RATIO

__all__ = [
    "SmoothCVFit",
    "fit_smooth",
    "JointPasses",
    "joint_resolve",
    "fold_resolve",
    "sample_resolve",
    "score_folds",
    "row_quantities",
    "row_features",
    "column_targets",
    "map_store",
    "SMOOTH_LOSSES",
]

SMOOTH_LOSSES = ("logistic", "squared_hinge")
#: columns of one joint re-solve of left-out samples (memory: a chunk's rows × columns)
SAMPLE_BATCH = 256


class SmoothCVFit:
    """What cross-validation reads from a Dask-fitted logistic / squared-hinge model: the
    p-sized quantities of each of its K' binary problems (K' = 1 for two classes, K for K ≥ 3
    classes: the one-vs-rest problems, class k's targets +1 for class k and −1 for the rest).

    Attributes
    ----------
    model : the fitted estimator
    betas, grads, grads0 : ndarray of shape (p, K')
        β̂, the exact ``∇J(β̂)`` and ``∇J(0)`` of each binary problem (the last pass of the fit).
    values : ndarray of shape (K',)
        ``J(β̂)``.
    hessians : ndarray of shape (K', p, p)
        The Hessian of each J that the fit's state keeps (identity included): exact at the
        state's reference point, β̂ when the fit's last step was a Newton step; used as a
        preconditioner and to pick the curvature levels, never as a certificate.
    n_classes : int
        K for a one-vs-rest model, 0 for two classes.
    C : float
    loss : deltafit.losses.Loss
    tol, max_iter : the estimator's solver settings
    classes : ndarray
    store : DaskRowStore
        The persisted row blocks (targets ±1, or class indices for K ≥ 3 classes).
    spec : PassSpec
    n : int
    n_passes : int
        Passes over the rows the fit made.
    """

    def __init__(self, **kw: Any) -> None:
        self.__dict__.update(kw)

    @property
    def starts(self):
        """First row of each block, and n."""
        return self.store.starts

    @property
    def n_problems(self):
        """K': the binary problems (1 for two classes)."""
        return int(self.betas.shape[1])

    def column_classes(self, cls):
        """The class index of each column for the block tasks (None for two classes: the
        stored targets are the ±1 codes)."""
        return None if not self.n_classes else np.asarray(cls, dtype=np.intp)


def fit_smooth(estimator: Any, X: Any, y: Any, sample_weight: Any = None) -> Any:
    """A clone of ``estimator`` (a :class:`~deltafit.LinearClassifier` with a logistic or
    squared-hinge loss) fitted on the dask collections with its rows kept on the cluster;
    K ≥ 3 classes fit the K one-vs-rest problems jointly (:mod:`._dask_ovr`).

    Raises
    ------
    ValueError
        For another estimator or loss, and for the refusals of the Dask fit.
    """
    from deltafit._dask._newton import PassSpec
    from deltafit.models import LinearClassifier

    loss = estimator.get_params().get("loss") if hasattr(estimator, "get_params") else None
    if not isinstance(estimator, LinearClassifier) or loss not in SMOOTH_LOSSES:
        raise ValueError(
            f"joint warm re-solves need a LinearClassifier with loss in "
            f"{list(SMOOTH_LOSSES)}, got {type(estimator).__name__}"
            + (f" with loss={loss!r}" if loss is not None else "")
        )
    model = clone(estimator).set_params(keep_data=True, warm_start=False)
    if estimator.feature_map is not None:  # a fitted map is part of the model: kept as it is
        model.set_params(feature_map=estimator.feature_map)
    model.fit(X, y, sample_weight=sample_weight)
    fitted = model.problem_
    K = fitted.n_classes
    problems = [fitted.for_class(k) for k in range(K)] if K else [fitted]
    cols: list[list[Any]] = [[], [], [], [], []]
    for problem in problems:
        at = problem.newton_point()
        for acc, key in zip(
            cols, ("coef", "gradient", "gradient_at_zero", "objective", "curvature")
        ):
            acc.append(np.array(at[key], dtype=np.float64))
    opts = fitted.solver_options
    return SmoothCVFit(
        model=model,
        betas=np.column_stack(cols[0]),
        grads=np.column_stack(cols[1]),
        grads0=np.column_stack(cols[2]),
        values=np.array(cols[3], dtype=np.float64),
        hessians=np.stack(cols[4]),
        n_classes=K,
        C=opts.C,
        loss=opts.loss,
        tol=opts.tol,
        max_iter=opts.max_iter,
        classes=np.asarray(model.classes_),
        store=fitted.dask_rows,
        spec=PassSpec(fitted.featurizer(), opts.loss, opts.C),
        n=int(fitted.dask_rows.starts[-1]),
        n_passes=int(fitted.dask_passes),
    )


# ------------------------------------------------------------------------------ block tasks
def _rows_of(x, t, w, mods, spec):
    return mods.rows(x, t, w, spec.C)


def row_features(x, t, w, mods, spec):
    """A block's rows as explicit features (a Dask task's helper): ``Φ`` (rows × p, the
    constant column included), the stored targets (±1, or class indices), the weights ``w``
    (ones where none) and ``C w``."""
    x, t, cw = _rows_of(x, t, w, mods, spec)
    ch = _Chunk(x, spec)
    Phi = ch.x if ch.s is None else np.column_stack([ch.x, np.full(x.shape[0], ch.s)])
    wv = mods.weights(w, x.shape[0])
    return Phi, t, (np.ones(x.shape[0]) if wv is None else wv), cw


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

        return JointShare(
            self.val + o.val,
            self.G + o.G,
            add(self.G0, o.G0),
            add(self.GH, o.GH),
            add(self.HC, o.HC),
        )


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


def column_targets(t, colclass):
    """The ±1 targets of a chunk's rows for each column: ``t`` itself (k × 1, two classes:
    ``colclass`` None) or the one-vs-rest codes of each column's class (k × m, ``t`` the
    class indices)."""
    if colclass is None:
        return t[:, None]
    return np.where(t[:, None] == np.asarray(colclass)[None, :], 1.0, -1.0)


def joint_share(
    x,
    t,
    w,
    mods,
    spec,
    B,
    excl,
    colgroup,
    colclass=None,
    g0=False,
    group_hessian=False,
    hess_cols=(),
):
    """One block's share of a joint pass at the columns of B (a Dask task); see the module
    docstring.  Column c is the sub-problem without the rows of group ``colgroup[c]``, of
    class ``colclass[c]`` (None: the binary targets)."""
    loss = spec.loss
    x, t, cw = _rows_of(x, t, w, mods, spec)
    k = x.shape[0]
    p, m = B.shape
    grp = _groups(k, excl)
    colgroup = np.asarray(colgroup, dtype=np.intp)
    hess_cols = list(hess_cols)
    val = np.zeros(m)
    G = np.zeros((p, m))
    G0 = np.zeros((p, m)) if g0 else None
    GH = np.zeros((m, p, p)) if group_hessian else None
    HC = np.zeros((len(hess_cols), p, p)) if hess_cols else None
    step = max(64, _CHUNK_BYTES // (8 * max(p, m, 1)))
    for a in range(0, k, step):
        b = min(k, a + step)
        ch = _Chunk(x[a:b], spec)
        Z = ch.dot(B)
        wc, gc = cw[a:b], grp[a:b]
        T = column_targets(t[a:b], colclass)
        keep = (gc[:, None] != colgroup[None, :]).astype(np.float64)  # 0 at a row's own group
        W = wc[:, None] * keep
        val += np.einsum("ij,ij->j", W, loss.value(T, Z))
        G += ch.tdot(W * loss.d1(T, Z))
        if g0:
            G0 += ch.tdot(W * loss.d1(T, np.zeros((b - a, 1))))
        if group_hessian and np.any(gc >= 0):
            for c in range(m):
                r = np.flatnonzero(gc == colgroup[c])
                if r.size:
                    tr = T[r, 0] if T.shape[1] == 1 else T[r, c]
                    GH[c] += ch.weighted_gram(wc[r] * loss.d2(tr, Z[r, c]), r)
        for j, c in enumerate(hess_cols):
            tc = T[:, 0] if T.shape[1] == 1 else T[:, c]
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

    def run(self, B, colgroup, colclass=None, **want):
        from dask import delayed

        B = np.array(B, dtype=np.float64, copy=True)
        colgroup = np.array(colgroup, dtype=np.intp)
        colclass = None if colclass is None else np.array(colclass, dtype=np.intp)
        st = self.store
        out = tree_compute(
            [
                delayed(joint_share)(
                    x, t, w, st.mods(i), self.spec, B, self.excl[i], colgroup, colclass, **want
                )
                for i, (x, t, w) in enumerate(st.blocks)
            ],
            _sum,
            what="a joint pass of the folds",
        )
        self.count += 1
        return out


def _factor(M):
    return linalg.cho_factor(M, lower=True, check_finite=False)


def joint_resolve(
    passes, beta, start, *, tol, max_iter, first_hessian=False, colgroup=None, colclass=None
):
    """Solve every sub-problem from β (see the module docstring).

    Parameters
    ----------
    passes : JointPasses
    beta : ndarray of shape (p,) or (p, m)
        The full solution, every column's start (per column: its class's β̂).
    start : tuple
        ``(J, G, G0, M)`` of the m sub-problems at β: shapes (m,), (p, m), (p, m), (m, p, p);
        M the exact Hessians (identity included).
    tol, max_iter : the stopping rule and the most passes of steps
    first_hessian : bool
        Ask the first step's pass for every column's exact Hessian at its trial point (k
        folds: a fold's first step moves β far enough that chord steps on the start's M
        contract slowly; one Hessian pass makes the rest contract fast).
    colgroup : ndarray of int of shape (m,), optional
        The row group each column leaves out (default: column c leaves out group c).
    colclass : ndarray of int of shape (m,), optional
        Each column's one-vs-rest class (None: the stored binary targets).

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
    beta = np.asarray(beta, dtype=np.float64)
    B = np.array(np.broadcast_to(beta if beta.ndim == 2 else beta[:, None], (p, m)))
    colgroup = np.arange(m) if colgroup is None else np.asarray(colgroup, dtype=np.intp)
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
            raise ValueError(
                f"the joint re-solve did not converge in max_iter={max_iter} "
                f"passes ({int(np.count_nonzero(~done))} of {m} sub-problems "
                "left)"
            )
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
        sh = passes.run(
            trial[:, act],
            colgroup[act],
            None if colclass is None else np.asarray(colclass)[act],
            hess_cols=colmap[hc].tolist(),
        )
        fn = np.full(m, np.inf)
        Gn = np.zeros((p, m))
        fn[act] = 0.5 * np.einsum("ij,ij->j", trial[:, act], trial[:, act]) + sh.val
        Gn[:, act] = trial[:, act] + sh.G
        gnn = np.linalg.norm(Gn, axis=0)
        for c in act.tolist():
            s = scale[c]
            if not (
                gnn[c] <= 0.5 * gn[c]
                or fn[c] <= f[c] + 1e-4 * s * slope[c]
                or -s * slope[c] <= _FLOOR * (abs(f[c]) + 1.0)
            ):
                if s <= LADDER[-1]:
                    raise ValueError(
                        "the joint re-solve on the Dask rows did not descend "
                        "(the problem is too ill-conditioned for float64)"
                    )
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
    return [
        np.ascontiguousarray(fold[st[i] : st[i + 1]], dtype=np.int32) for i in range(len(st) - 1)
    ]


def _fold_columns(fit, k):
    """Column c of a k-fold re-solve: class ``c // k`` (0 for two classes), fold ``c % k``."""
    cls = np.repeat(np.arange(fit.n_problems), k)
    return cls, np.tile(np.arange(k), fit.n_problems)


def fold_resolve(fit: Any, fold: np.ndarray, k: int) -> tuple[np.ndarray, int, Any]:
    """The k fold models of a k-fold cross-validation (each of the K' binary problems: K'·k
    columns), jointly: one pass per round serves every class and fold still solving.

    Parameters
    ----------
    fit : SmoothCVFit
    fold : ndarray of int of shape (n,)
        Each row's fold, 0..k-1.
    k : int

    Returns
    -------
    betas : ndarray of shape (K'·k, p)
        Row ``c``: class ``c // k``'s model without fold ``c % k``.
    n_passes : int
        Passes over the rows (the start's included).
    n_iter : ndarray of int, shape (K'·k,)
    """
    passes = JointPasses(fit.store, fit.spec, _fold_groups(fit, fold))
    cls, grp = _fold_columns(fit, k)
    colclass = fit.column_classes(cls)
    B0 = fit.betas[:, cls]
    sh = passes.run(B0, grp, colclass, g0=True, group_hessian=True)
    f = 0.5 * np.einsum("ij,ij->j", B0, B0) + sh.val
    M = fit.hessians[cls] - sh.GH
    start = (f, B0 + sh.G, sh.G0, M)
    B, _, n_iter = joint_resolve(
        passes,
        B0,
        start,
        tol=fit.tol,
        max_iter=fit.max_iter,
        first_hessian=True,
        colgroup=grp,
        colclass=colclass,
    )
    return B.T.copy(), passes.count, n_iter


def sample_resolve(
    fit: Any, ids: np.ndarray, classes: np.ndarray | None = None, batch: int = SAMPLE_BATCH
) -> tuple[np.ndarray, int, np.ndarray]:
    """Exact left-out decisions of the samples ``ids`` (row numbers): each one's model without
    it (of class ``classes[j]``'s problem for K ≥ 3 classes), re-solved jointly in batches of
    ``batch`` columns; the start of every column comes from the sample's own row (gathered),
    with no pass.

    Returns
    -------
    decision : ndarray of shape (len(ids),)
        ``⟨φ_t, β_{−t}⟩``.
    n_passes : int
    n_iter : ndarray of int, shape (len(ids),)
    """
    ids = np.asarray(ids, dtype=np.int64).reshape(-1)
    cls = (
        np.zeros(ids.size, dtype=np.intp)
        if classes is None
        else np.asarray(classes, dtype=np.intp).reshape(-1)
    )
    out = np.empty(ids.size)
    iters = np.zeros(ids.size, dtype=np.intp)
    n_passes = 0
    if ids.size == 0:
        return out, 0, iters
    loss, C = fit.loss, fit.C
    starts = fit.starts
    for a in range(0, ids.size, batch):
        idb, cb = ids[a : a + batch], cls[a : a + batch]
        m = idb.size
        uniq, grp = np.unique(idb, return_inverse=True)  # a sample's classes: one group
        X, T, W = fit.store.gather(uniq)
        Phi = np.asarray(fit.spec.featurize(X), dtype=np.float64)[grp]
        T = np.asarray(T, dtype=np.float64).reshape(-1)[grp]
        if fit.n_classes:
            T = np.where(T == cb, 1.0, -1.0)
        cw = C * np.asarray(W, dtype=np.float64).reshape(-1)[grp]
        B0 = fit.betas[:, cb]
        z = np.einsum("ij,ji->i", Phi, B0)
        f = fit.values[cb] - cw * loss.value(T, z)
        G = fit.grads[:, cb] - Phi.T * (cw * loss.d1(T, z))
        G0 = fit.grads0[:, cb] - Phi.T * (cw * loss.d1(T, np.zeros(m)))
        d = cw * loss.d2(T, z)
        M = fit.hessians[cb] - d[:, None, None] * (Phi[:, :, None] * Phi[:, None, :])
        blk = np.searchsorted(starts, uniq, side="right") - 1
        excl: list[Any] = [None] * (len(starts) - 1)
        for b in np.unique(blk).tolist():
            j = np.flatnonzero(blk == b)
            excl[b] = (uniq[j] - starts[b], j)
        passes = JointPasses(fit.store, fit.spec, excl)
        B, _, it = joint_resolve(
            passes,
            B0,
            (f, G, G0, M),
            tol=fit.tol,
            max_iter=fit.max_iter,
            colgroup=grp,
            colclass=fit.column_classes(cb),
        )
        out[a : a + m] = np.einsum("ij,ji->i", Phi, B)
        iters[a : a + m] = it
        n_passes += passes.count
    return out, n_passes, iters


def _score_block(x, t, w, mods, spec, betas, fold, n_folds, n_classes):
    """Each row's decision under its fold's β (shape (rows,) or (rows, K)), and per fold:
    rows, correct labels (the sign, or the argmax of the K classes')."""
    fold = np.asarray(fold, dtype=np.intp).reshape(-1)
    Z, t, _, _ = row_quantities(x, t, w, mods, spec, betas.T)
    r = np.arange(Z.shape[0])
    if n_classes:
        z = np.column_stack([Z[r, c * n_folds + fold] for c in range(n_classes)])
        good = (np.argmax(z, axis=1) == t).astype(np.float64)
    else:
        z = Z[r, fold]
        good = ((z > 0.0) == (t > 0.0)).astype(np.float64)
    return z, np.stack(
        [
            np.bincount(fold, minlength=n_folds).astype(np.float64),
            np.bincount(fold, good, minlength=n_folds),
        ]
    )


def _first(o):
    return o[0]


def _second(o):
    return o[1]


def score_folds(fit: Any, fold: np.ndarray, betas: np.ndarray) -> tuple[Any, np.ndarray]:
    """One pass: every row's decision under its fold's β (a dask array of length n, or n × K
    for K ≥ 3 classes, persisted on the cluster) and, per fold, the rows and the correctly
    labelled rows (computed).  ``betas``: :func:`fold_resolve`'s.

    Returns
    -------
    z : dask array of shape (n,) or (n, K)
    sums : ndarray of shape (2, k)
    """
    import dask.array as da

    import dask
    from dask import delayed

    K = fit.n_classes
    k = betas.shape[0] // fit.n_problems
    groups = _fold_groups(fit, fold)
    st = fit.store
    parts = [
        delayed(_score_block)(x, t, w, st.mods(i), fit.spec, betas, groups[i], k, K)
        for i, (x, t, w) in enumerate(st.blocks)
    ]
    parts = dask.persist(*parts)
    sizes = st.sizes().tolist()
    z = da.concatenate(
        [
            da.from_delayed(
                delayed(_first)(p), shape=(int(s), K) if K else (int(s),), dtype=np.float64
            )
            for p, s in zip(parts, sizes)
        ]
    )
    sums = tree_compute(
        [delayed(_second)(p) for p in parts], _sum, what="a pass of the left-out scores"
    )
    return z, np.asarray(sums)


def map_store(fit: Any, fn: Callable[..., Any], *args: Any) -> list[Any]:
    """``fn(x, t, w, mods, *args)`` over the store's blocks, lazily: a list of delayed
    results, one per block (``fn`` a picklable function of NumPy arrays)."""
    from dask import delayed

    st = fit.store
    return [delayed(fn)(x, t, w, st.mods(i), *args) for i, (x, t, w) in enumerate(st.blocks)]
