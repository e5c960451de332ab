"""Cross-validation of a logistic / squared-hinge linear classifier on dask collections.

The model is fitted once on the cluster (Newton over the persisted row blocks,
:mod:`deltafit._dask._newton`); then

* **k folds** (``method="refit"``, which ``"auto"`` picks): the k fold models are exact warm
  re-solves from the full β̂, **jointly** — every pass computes the gradient of every fold's
  problem (all rows but the fold's) at its own β_f, the fold Hessians are the full Hessian
  minus the fold's share, summed apart in one pass — so the k re-solves cost the passes of the
  slowest fold (:func:`deltafit.model_selection._dask_folds.fold_resolve`).  One more pass
  scores every row with its fold's β.  The decisions are those of k refits (to the solver's
  certified
  tolerance), every label exact.  K ≥ 3 classes: the K one-vs-rest problems' k fold models are
  K·k columns of the same joint re-solve (one pass per round for every class and fold still
  solving), the label the argmax of the K left-out decisions;
* **leave-one-out** (``method="bounds"``, which ``"auto"`` picks): Okumura et al.'s op1
  (KDD'15, Algorithm 1): one ``map_blocks`` pass over all n rows with β̂ and the exact
  gradient g of the full problem shipped gives every left-out ball (Okumura et al. Cor. 5 /
  Thm 6 in the exact-gradient form, Sivan et al. §4.2; :func:`deltafit.sensitivity.regions._ball.
  loo_balls`), intersected (``region="auto"`` / ``"curvature"``, as the NumPy path's
  leave-one-out) with the curvature-aware region in two more passes
  (:mod:`._dask_loo_bounds`); the samples whose label the bounds leave undecided (the sign,
  or for K ≥ 3 classes the argmax: :func:`deltafit.sensitivity.certain_argmax`) are refit
  exactly, as joint warm re-solves in batches (:func:`deltafit.model_selection._dask_folds.
  sample_resolve`; K ≥ 3 classes: the candidate classes of each, those whose upper bound
  reaches the largest lower bound).  As NumPy's ``loo(method="bounds")``: ``decision`` is
  NaN where a bound decided the label, exact where the sample was refit.

The per-sample arrays are lazy dask arrays in row order; ``details["n_passes"]`` counts the
passes over the rows (the fit's included).
"""

from __future__ import annotations

import time
from typing import Any

import numpy as np

from deltafit.model_selection._result import CVResult

__all__ = ["dask_smooth_cross_validation"]


def _patched(bounds, at, values, cand):
    """A block's ``[decision | lower | upper | refit]`` columns, shape (rows, 3K' + 1): NaN /
    the bounds where decided, the exact values of the refit (candidate) classes at the refit
    offsets ``at`` (``values``, ``cand``: (len(at), K'))."""
    lo, hi = bounds
    k, K = lo.shape
    out = np.empty((k, 3 * K + 1))
    dec = np.full((k, K), np.nan)
    lo, hi = lo.copy(), hi.copy()
    sub = np.where(cand, values, np.nan)
    dec[at] = sub
    lo[at] = np.where(cand, values, lo[at])
    hi[at] = np.where(cand, values, hi[at])
    out[:, :K], out[:, K : 2 * K], out[:, 2 * K : 3 * K] = dec, lo, hi
    out[:, 3 * K] = 0.0
    out[at, 3 * K] = 1.0
    return out


def _concat(*parts):
    return [np.concatenate([p[i] for p in parts]) for i in range(len(parts[0]))] if parts else []


def _undecided(bounds, start, multi):
    """Row numbers, lower and upper bounds of a block's samples the bounds leave undecided."""
    from deltafit.model_selection._dask_loo_bounds import decided_rows

    lo, hi = bounds
    j = np.flatnonzero(~decided_rows(lo, hi, multi))
    return start + j, lo[j], hi[j]


def _signs(z, classes):
    return np.where(z > 0.0, classes[1], classes[0])


def _argmax_labels(z, classes):
    return classes[np.argmax(z, axis=1)]


def _loo_labels(allv, classes, K):
    """Labels from ``[decision | lower | upper | refit]``: the sign of the decision, or of the
    lower bound where none was computed; K ≥ 3 classes the NumPy path's argmax rule
    (:meth:`deltafit.model_selection._engine._Outcome.label_index`)."""
    dec, lo, hi = allv[:, :K], allv[:, K : 2 * K], allv[:, 2 * K : 3 * K]
    if classes.size <= 2:
        pos = np.where(np.isnan(dec[:, 0]), lo[:, 0] > 0.0, dec[:, 0] > 0.0)
        return np.where(pos, classes[1], classes[0])
    known = ~np.all(np.isnan(dec), axis=1)
    v = np.where(known[:, None], np.where(np.isnan(dec), hi, dec), lo)
    return classes[np.argmax(v, axis=1)]


def _y_true(X, y, sample_weight, chunks):
    from deltafit._dask._input import row_blocks

    blocks = row_blocks(X, y, sample_weight)
    yt = blocks.y.ravel() if blocks.y.ndim == 2 else blocks.y
    return yt if yt.chunks[0] == chunks else yt.rechunk((chunks,))


def dask_smooth_cross_validation(
    estimator: Any,
    X: Any,
    y: Any,
    *,
    fold: Any = None,
    n_folds: int = 0,
    method: str = "auto",
    sample_weight: Any = None,
    region: str = "auto",
) -> CVResult:
    """Leave-one-out (``fold`` None) or k-fold cross-validation of a logistic / squared-hinge
    :class:`~deltafit.LinearClassifier` on dask collections (see the module docstring).

    Parameters
    ----------
    estimator : LinearClassifier with ``loss="logistic"`` or ``"squared_hinge"``
        Cloned and fitted with ``keep_data=True`` on the Dask path; two classes or K ≥ 3
        (one-vs-rest).
    X, y, sample_weight : dask collections (y, sample_weight may be NumPy)
    fold : ndarray of int of shape (n,), optional
        Each row's fold, 0..n_folds-1.
    n_folds : int
    method : {"auto", "bounds", "refit"}
        Leave-one-out: ``"bounds"`` (``"auto"``); k folds: ``"refit"`` (``"auto"``).
    region : {"auto", "curvature", "sphere"}
        Leave-one-out's screening: the balls, intersected with the curvature region unless
        ``"sphere"``.

    Returns
    -------
    CVResult

    Raises
    ------
    ValueError
        For a method this path does not run, and for the refusals of the Dask fit.
    """
    from deltafit.model_selection._dask_folds import fit_smooth, fold_resolve, score_folds

    loo = fold is None
    allowed = ("auto", "bounds") if loo else ("auto", "refit")
    if method not in allowed:
        raise ValueError(
            f"dask input with loss={estimator.get_params().get('loss')!r} is cross-validated "
            + (
                "by bounds and joint refits of the undecided samples: method='bounds' (or "
                "'auto') for leave-one-out"
                if loo
                else "by joint warm re-solves of every fold: method='refit' (or 'auto') for k folds"
            )
            + f", got method={method!r}"
        )
    if region not in ("auto", "curvature", "sphere"):
        raise ValueError(f"region must be 'auto', 'sphere' or 'curvature', got {region!r}")
    if not loo:
        counts = np.bincount(fold, minlength=n_folds)
        if np.any(counts == 0):
            raise ValueError(f"fold {int(np.flatnonzero(counts == 0)[0])} has no sample")
    t0 = time.perf_counter()
    fit = fit_smooth(estimator, X, y, sample_weight)
    if loo:
        return _loo(fit, X, y, sample_weight, region, t0)
    import dask.array as da

    classes = fit.classes
    sizes = tuple(int(s) for s in fit.store.sizes())
    betas, n_solve, n_iter = fold_resolve(fit, fold, n_folds)
    z, sums = score_folds(fit, fold, betas)
    with np.errstate(invalid="ignore", divide="ignore"):
        fold_scores = sums[1] / sums[0]
    if fit.n_classes:
        y_pred = z.map_blocks(_argmax_labels, classes=classes, dtype=classes.dtype, drop_axis=1)
    else:
        y_pred = z.map_blocks(_signs, classes=classes, dtype=classes.dtype)
    nope = da.zeros(fit.n, dtype=bool, chunks=(sizes,))
    return CVResult(
        method="refit",
        approximate=False,
        classifier=True,
        y_true=_y_true(X, y, sample_weight, sizes),
        test_index=da.arange(fit.n, chunks=(sizes,)),
        fold=da.from_array(fold, chunks=(sizes,)),
        y_pred=y_pred,
        decision=z,
        lower=z,
        upper=z,
        decided_by_bound=nope,
        refit=~nope,
        n_refits=n_folds,
        n_splits=n_folds,
        fold_scores=fold_scores,
        time_s=time.perf_counter() - t0,
        n_iter=int(n_iter.sum()),
        details={
            "dask": True,
            "n_passes": fit.n_passes + n_solve + 1,
            "fit_passes": fit.n_passes,
            "resolve_passes": n_solve,
            "warm": True,
        },
    )


def _second(o):
    return o[1]


def _screen(fit, region):
    """The leave-one-out bounds of every row, on the cluster (:mod:`._dask_loo_bounds`):
    persisted per-block ``(2, rows, K')`` bounds, the passes made, the undecided count after
    the balls."""
    from scipy import linalg

    import dask
    from dask import delayed
    from deltafit._dask._rows import compute_on_cluster, tree_compute
    from deltafit.model_selection import _dask_loo_bounds as lb
    from deltafit.model_selection._dask_folds import map_store  # noqa: F401 (the block tasks' layout)

    multi = bool(fit.n_classes)
    gg = np.einsum("ij,ij->j", fit.grads, fit.grads)
    curved = region != "sphere"
    factors = None
    if curved:
        factors = [linalg.cholesky(H, lower=True, check_finite=False) for H in fit.hessians]
    parts = dask.persist(
        *map_store(fit, lb.ball_block, fit.spec, fit.betas, fit.grads, gg, fit.C, factors, multi)
    )
    starts = fit.starts[:-1].tolist()
    n_passes = 1
    summaries = compute_on_cluster(
        *[delayed(lb.level_summary)(p, multi) for p in parts],
        what="the pass of the left-out bounds",
    )
    n_ball = None
    taus = lb.curvature_levels(list(summaries)) if curved else None
    got = [None] * len(parts)
    if curved and any(t is not None for t in taus):
        grams = tree_compute(
            [
                delayed(lb.gram_block)(
                    x, t, w, fit.store.mods(i), fit.spec, parts[i], taus, fit.C, multi
                )
                for i, (x, t, w) in enumerate(fit.store.blocks)
            ],
            lb.add_grams,
            what="a pass of the curvature sums",
        )
        n_passes += 1
        fac = lb.factor_levels(grams)
        if fac:
            got = dask.persist(
                *[
                    delayed(lb.bound_block)(
                        x,
                        t,
                        w,
                        fit.store.mods(i),
                        fit.spec,
                        parts[i],
                        taus,
                        fac,
                        gg,
                        fit.C,
                        multi,
                        starts[i],
                    )
                    for i, (x, t, w) in enumerate(fit.store.blocks)
                ]
            )
            all_mins = compute_on_cluster(
                *[delayed(_second)(g) for g in got], what="a pass of the curvature bounds"
            )
            n_passes += 1
            limits = lb.global_limits(all_mins)
            got = list(got)
        else:
            got, limits = [None] * len(parts), None
    else:
        limits = None
    bounds = dask.persist(
        *[delayed(lb.finish_block)(p, g, limits, s) for p, g, s in zip(parts, got, starts)]
    )
    if curved:
        n_ball = int(
            sum(
                compute_on_cluster(
                    *[delayed(_n_open)(p, multi) for p in parts],
                    what="the count of the balls' undecided samples",
                )
            )
        )
    return bounds, n_passes, n_ball


def _n_open(part, multi):
    from deltafit.model_selection._dask_loo_bounds import decided_rows

    return int(np.count_nonzero(~decided_rows(part["lo"], part["hi"], multi)))


def _loo(fit, X, y, sample_weight, region, t0):
    """Leave-one-out: the bounds of :func:`_screen`, then exact joint refits of the undecided
    samples (K ≥ 3 classes: of their candidate classes, those whose upper bound reaches the
    largest lower bound, as :class:`~deltafit.model_selection._problem.OneVsRestProblem`)."""
    import dask.array as da

    from dask import delayed
    from deltafit._dask._rows import compute_on_cluster
    from deltafit.model_selection._dask_folds import sample_resolve

    multi = bool(fit.n_classes)
    K = fit.n_problems
    classes = fit.classes
    sizes = tuple(int(s) for s in fit.store.sizes())
    starts = fit.starts
    bounds, n_screen, n_ball = _screen(fit, region)
    ((und, ulo, uhi),) = compute_on_cluster(
        delayed(_concat)(
            *[delayed(_undecided)(b, int(s), multi) for b, s in zip(bounds, starts[:-1].tolist())]
        ),
        what="the undecided samples",
    )
    und = np.asarray(und, dtype=np.int64)
    if multi:
        cand = uhi >= ulo.max(axis=1, keepdims=True)
    else:
        cand = np.ones((und.size, 1), dtype=bool)
    r, c = np.nonzero(cand)
    vals, n_solve, n_iter = sample_resolve(fit, und[r], c if multi else None)
    values = np.full(cand.shape, np.nan)
    values[r, c] = vals
    blk = np.searchsorted(starts, und, side="right") - 1
    cols = []
    for i, (b, s) in enumerate(zip(bounds, sizes)):
        j = np.flatnonzero(blk == i)
        arr = delayed(_patched)(b, und[j] - starts[i], values[j], cand[j])
        cols.append(da.from_delayed(arr, shape=(s, 3 * K + 1), dtype=np.float64))
    allv = da.concatenate(cols, axis=0)
    if multi:
        decision, lower, upper = allv[:, :K], allv[:, K : 2 * K], allv[:, 2 * K : 3 * K]
    else:
        decision, lower, upper = allv[:, 0], allv[:, 1], allv[:, 2]
    refit = allv[:, 3 * K] > 0.5
    y_pred = allv.map_blocks(_loo_labels, classes=classes, K=K, dtype=classes.dtype, drop_axis=1)
    y_true = _y_true(X, y, sample_weight, sizes)
    region_used = "sphere" if region == "sphere" else "curvature"
    details = {
        "dask": True,
        "n_passes": fit.n_passes + n_screen + n_solve,
        "fit_passes": fit.n_passes,
        "screen_passes": n_screen,
        "resolve_passes": n_solve,
        "region": region_used,
        "undecided": int(und.size),
        "refit_columns": int(r.size),
    }
    if n_ball is not None:
        details["undecided_ball"] = n_ball
    return CVResult(
        method="bounds",
        approximate=False,
        classifier=True,
        y_true=y_true,
        test_index=da.arange(fit.n, chunks=(sizes,)),
        fold=da.arange(fit.n, chunks=(sizes,)),
        y_pred=y_pred,
        decision=decision,
        lower=lower,
        upper=upper,
        decided_by_bound=~refit,
        refit=refit,
        n_refits=int(und.size),
        n_splits=fit.n,
        fold_scores=(y_pred == y_true).astype(np.float64),
        time_s=time.perf_counter() - t0,
        n_iter=int(n_iter.sum()),
        details=details,
    )
