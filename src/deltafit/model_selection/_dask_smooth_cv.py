"""Cross-validation of a logistic / squared-hinge linear classifier on dask collections.

The model is fitted once on the cluster (Newton over the persisted row blocks,
:mod:`deltafit.models._dask_newton`); then

* **k folds** (``method="refit"``, which ``"auto"`` picks): the k fold models are exact warm
  re-solves from the full β̂, **jointly** — every pass computes the gradient of every fold's
  problem (all rows but the fold's) at its own β_f, the fold Hessians are the full Hessian
  minus the fold's share, summed apart in one pass — so the k re-solves cost the passes of the
  slowest fold (:func:`deltafit.models._dask_folds.fold_resolve`).  One more pass scores every
  row with its fold's β.  The decisions are those of k refits (to the solver's certified
  tolerance), every label exact;
* **leave-one-out** (``method="bounds"``, which ``"auto"`` picks): Okumura et al.'s op1
  (KDD'15, Algorithm 1): one ``map_blocks`` pass over all n rows with β̂ and the exact
  gradient g of the full problem shipped gives every left-out ball (Okumura et al. Cor. 5 /
  Thm 6 in the exact-gradient form, Sivan et al. §4.2; :func:`deltafit.sensitivity._ball.
  loo_balls`), hence certified lower / upper bounds of every left-out decision; the samples
  whose sign they leave undecided are refit exactly, as joint warm re-solves in batches
  (:func:`deltafit.models._dask_folds.sample_resolve`).  As NumPy's ``loo(method="bounds")``:
  ``decision`` is NaN where a bound decided the label, exact where the sample was refit.
  The region is the ball (``details["region"] = "sphere"``): the curvature-aware
  leave-one-out region needs several factorisations of p × p sums and a minimum over all
  rows per level, that is several more passes.

The per-sample arrays are lazy dask arrays in row order; ``details["n_passes"]`` counts the
passes over the rows (the fit's included).
"""

from __future__ import annotations

import time

import numpy as np

from ..sensitivity._ball import loo_balls
from ._problem import _widen
from ._result import CVResult

__all__ = ["dask_smooth_cross_validation"]


def _loo_block(x, t, w, mods, spec, beta, grad, grad_sq, C):
    """The left-out balls' bounds of a block's rows, shape (2, k) (a Dask task)."""
    from ..models._dask_folds import row_quantities

    Z, t, cw, sq = row_quantities(x, t, w, mods, spec, np.column_stack([beta, grad]))
    z, pg = Z[:, 0], Z[:, 1]
    wd1 = (cw / C) * spec.loss.d1(t, z)
    center, r = loo_balls(z, wd1, sq, C1=C, C2=C, phi_grad=pg, grad_sq=grad_sq)
    lo, hi = _widen(center, np.sqrt(np.maximum(sq, 0.0)) * r)
    return np.stack([lo, hi])


def _undecided(bounds, start):
    """Row numbers of a block's samples whose sign the bounds leave undecided."""
    lo, hi = bounds
    return start + np.flatnonzero(~((lo > 0.0) | (hi <= 0.0)))


def _patched(bounds, at, values):
    """``[decision, lower, upper, refit]`` of a block: NaN / the bounds where decided, the
    exact values at the refit offsets ``at``."""
    k = bounds.shape[1]
    out = np.empty((4, k))
    out[0] = np.nan
    out[1:3] = bounds
    out[3] = 0.0
    out[0:3, at] = values
    out[3, at] = 1.0
    return out


def _concat_ids(*parts):
    return np.concatenate(parts) if parts else np.zeros(0, dtype=np.int64)


def _signs(z, classes):
    return np.where(z > 0.0, classes[1], classes[0])


def _labels(decision, lower, classes):
    pos = np.where(np.isnan(decision), lower > 0.0, decision > 0.0)
    return np.where(pos, classes[1], classes[0])


def _y_true(X, y, sample_weight, chunks):
    from ..models._dask_input import row_blocks

    blocks = row_blocks(X, y, sample_weight)
    yt = blocks.y.ravel() if blocks.y.ndim == 2 else blocks.y
    return yt if yt.chunks[0] == chunks else yt.rechunk((chunks,))


def dask_smooth_cross_validation(estimator, X, y, *, fold=None, n_folds=0, method="auto",
                                 sample_weight=None):
    """Leave-one-out (``fold`` None) or k-fold cross-validation of a logistic / squared-hinge
    :class:`~deltafit.LinearClassifier` on dask collections (see the module docstring).

    Parameters
    ----------
    estimator : LinearClassifier with ``loss="logistic"`` or ``"squared_hinge"``
        Cloned and fitted with ``keep_data=True`` on the Dask path.
    X, y, sample_weight : dask collections (y, sample_weight may be NumPy)
    fold : ndarray of int of shape (n,), optional
        Each row's fold, 0..n_folds-1.
    n_folds : int
    method : {"auto", "bounds", "refit"}
        Leave-one-out: ``"bounds"`` (``"auto"``); k folds: ``"refit"`` (``"auto"``).

    Returns
    -------
    CVResult

    Raises
    ------
    ValueError
        For a method this path does not run, and for the refusals of the Dask fit.
    """
    import dask
    import dask.array as da

    from ..models._dask_folds import (fit_smooth, fold_resolve, map_store, sample_resolve,
                                      score_folds)

    loo = fold is None
    allowed = ("auto", "bounds") if loo else ("auto", "refit")
    if method not in allowed:
        raise ValueError(
            f"dask input with loss={estimator.get_params().get('loss')!r} is cross-validated "
            + ("by bounds and joint refits of the undecided samples: method='bounds' (or "
               "'auto') for leave-one-out" if loo else
               "by joint warm re-solves of every fold: method='refit' (or 'auto') for k folds")
            + f", got method={method!r}")
    if not loo:
        counts = np.bincount(fold, minlength=n_folds)
        if np.any(counts == 0):
            raise ValueError(f"fold {int(np.flatnonzero(counts == 0)[0])} has no sample")
    t0 = time.perf_counter()
    fit = fit_smooth(estimator, X, y, sample_weight)
    classes = fit.classes
    sizes = tuple(int(s) for s in fit.store.sizes())
    if not loo:
        betas, n_solve, n_iter = fold_resolve(fit, fold, n_folds)
        z, sums = score_folds(fit, fold, betas)
        with np.errstate(invalid="ignore", divide="ignore"):
            fold_scores = sums[1] / sums[0]
        y_pred = z.map_blocks(_signs, classes=classes, dtype=classes.dtype)
        nope = da.zeros(fit.n, dtype=bool, chunks=(sizes,))
        return CVResult(method="refit", approximate=False, classifier=True,
                        y_true=_y_true(X, y, sample_weight, sizes),
                        test_index=da.arange(fit.n, chunks=(sizes,)),
                        fold=da.from_array(fold, chunks=(sizes,)), y_pred=y_pred,
                        decision=z, lower=z, upper=z, decided_by_bound=nope,
                        refit=~nope, n_refits=n_folds, n_splits=n_folds,
                        fold_scores=fold_scores, time_s=time.perf_counter() - t0,
                        n_iter=int(n_iter.sum()),
                        details={"dask": True, "n_passes": fit.n_passes + n_solve + 1,
                                 "fit_passes": fit.n_passes, "resolve_passes": n_solve,
                                 "warm": True})
    # leave-one-out: one pass of bounds, then the undecided samples refit jointly
    gg = float(fit.grad @ fit.grad)
    parts = map_store(fit, _loo_block, fit.spec, fit.beta, fit.grad, gg, fit.C)
    parts = dask.persist(*parts)
    starts = fit.starts
    from dask import delayed

    from ..models._dask_rows import compute_on_cluster

    (und,) = compute_on_cluster(delayed(_concat_ids)(
        *[delayed(_undecided)(p, int(s)) for p, s in zip(parts, starts[:-1].tolist())]),
        what="the pass of the left-out bounds")
    und = np.asarray(und, dtype=np.int64)
    values, n_solve, n_iter = sample_resolve(fit, und)
    blk = np.searchsorted(starts, und, side="right") - 1
    cols = []
    for i, (p, s) in enumerate(zip(parts, sizes)):
        j = np.flatnonzero(blk == i)
        arr = delayed(_patched)(p, und[j] - starts[i], values[j])
        cols.append(da.from_delayed(arr, shape=(4, s), dtype=np.float64))
    allv = da.concatenate(cols, axis=1)
    decision, lower, upper = allv[0], allv[1], allv[2]
    refit = allv[3] > 0.5
    y_pred = da.map_blocks(_labels, decision, lower, classes=classes, dtype=classes.dtype)
    y_true = _y_true(X, y, sample_weight, sizes)
    return CVResult(method="bounds", approximate=False, classifier=True, y_true=y_true,
                    test_index=da.arange(fit.n, chunks=(sizes,)),
                    fold=da.arange(fit.n, chunks=(sizes,)), y_pred=y_pred,
                    decision=decision, lower=lower, upper=upper, decided_by_bound=~refit,
                    refit=refit, n_refits=int(und.size), n_splits=fit.n,
                    fold_scores=(y_pred == y_true).astype(np.float64),
                    time_s=time.perf_counter() - t0, n_iter=int(n_iter.sum()),
                    details={"dask": True, "n_passes": fit.n_passes + 1 + n_solve,
                             "fit_passes": fit.n_passes, "resolve_passes": n_solve,
                             "region": "sphere", "undecided": int(und.size)})
