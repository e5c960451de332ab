"""Closed-form leave-one-out and k-fold predictions of the squared loss on Dask collections.

The model trained without a set R of samples predicts R exactly from the full model's
statistics (:mod:`deltafit.model_selection._closed_form`, after Lee et al., "Exact incremental
and decremental learning for LS-SVM", Thm 1 / Cor. 1–4, applied to a batch):

* **leave-one-out**: ``z_{−t} = t_t − r_t / (1 − h_t)`` with the residual ``r_t = t_t − ⟨φ_t,
  β⟩`` and the (weighted) leverage ``h_t = w_t φ_tᵀ M⁻¹ φ_t``, ``M = ΦᵀWΦ + ρI``: one
  ``map_blocks`` pass over the rows with β and the Cholesky factor ``L`` of M (p × p) shipped
  to each block (``h_t = ‖L⁻¹φ_t‖²``), after the fit's pass;
* **k folds**: fold f's model solves ``(ρI + Σ_{g≠f} S_g) β_f = Σ_{g≠f} s_g`` from the folds'
  statistics ``S_g = Φ_gᵀW_gΦ_g``, ``s_g = Φ_gᵀW_g t_g``, summed apart in the fit's own pass
  (:func:`~._dask_stats.reduce_statistics` with folds): k batch removals of p × p statistics,
  no pass per fold.  A second pass scores every row with its fold's β and sums the fold
  scores.

Nothing of size n reaches the client: the per-sample results are lazy dask arrays, the fold
scores (k numbers) are computed.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from scipy.linalg import cholesky, solve_triangular
from sklearn.base import clone

from deltafit._dask._input import row_blocks
from deltafit._dask._stats import BlockProblem, fold_statistics
from deltafit._states._squared_primal import PrimalSquaredState

__all__ = ["DaskFolds", "dask_closed_form"]


class DaskFolds:
    """What :func:`dask_closed_form` found: lazy per-sample arrays (row order) and the fold
    scores.

    Attributes
    ----------
    model : the estimator fitted on all the rows (by the Dask path)
    decision, y_pred, y_true, fold : dask arrays of length n
        Left-out decision values (shape (n, K) for K outputs), predictions, labels as given,
        each row's fold (leave-one-out: the row number).
    fold_scores : ndarray of shape (k,) or dask array of shape (n,)
        Accuracy (classifiers) or negative MSE (regressors) per fold; per sample for
        leave-one-out (lazy).
    n_passes : int
        Passes over the rows (the fit's included).
    """

    def __init__(self, **kw: Any) -> None:
        self.__dict__.update(kw)


def _problem(model):
    """The :class:`~._dask_stats.BlockProblem` of a Dask-fitted linear model (no digests)."""
    fitted = model.problem_
    opts = fitted.solver_options
    return BlockProblem(
        fitted.featurizer(),
        fitted.n_features_in,
        fitted.label_encoder(),
        fitted.n_outputs,
        opts.C,
        None,
        n_classes=fitted.n_classes,
    ), opts.rho


def _block_loo(x, y, w, problem, beta, L):
    """Left-out decisions of a block's rows (see the module docstring)."""
    x = problem.rows(np.asarray(x))
    t = problem.codes(problem.targets(y))  # K ≥ 3 classes: the K columns of ±1 codes
    w = problem.weights(w, x.shape[0])
    Phi = np.asarray(problem.featurize(x), dtype=np.float64)
    r = t - Phi @ beta
    V = solve_triangular(L, Phi.T, lower=True, check_finite=False)
    h = np.einsum("ij,ij->j", V, V)
    if w is not None:
        h = w * h
    return t - r / ((1.0 - h) if t.ndim == 1 else (1.0 - h)[:, None])


def _block_folds(x, fold, problem, betas):
    """Each row's decision under its fold's β (``betas``: (k, p) or (k, p, K))."""
    x = problem.rows(np.asarray(x))
    fold = np.asarray(fold).reshape(-1)
    Phi = np.asarray(problem.featurize(x), dtype=np.float64)
    z = np.zeros((x.shape[0],) + betas.shape[2:])
    for f in np.unique(fold).tolist():
        m = fold == f
        z[m] = Phi[m] @ betas[f]
    return z


def _fold_sums(z, y, fold, problem, n_folds, classes):
    """Per fold: rows, and correct predictions (classifiers) or squared errors (regressors)."""
    fold = np.asarray(fold).reshape(-1)
    if problem.labels is not None:
        y = np.asarray(y).reshape(-1)
        good = _labels_of(z, classes) == y
        val = good.astype(np.float64)
    else:
        t = problem.targets(y)
        err = (t - z) ** 2
        val = err if err.ndim == 1 else err.mean(axis=1)
    return np.stack(
        [
            np.bincount(fold, minlength=n_folds).astype(np.float64),
            np.bincount(fold, val, minlength=n_folds),
        ]
    )


def _labels_of(z, classes):
    """Labels of decisions: the sign's class (two classes), or the largest column's
    (one-vs-rest, K ≥ 3 columns)."""
    if z.ndim == 2:
        return classes[np.argmax(z, axis=1)]
    return np.where(z > 0, classes[1], classes[0])


def dask_closed_form(
    estimator: Any, X: Any, y: Any, sample_weight: Any = None, fold: Any = None, n_folds: int = 0
) -> Any:
    """Closed-form leave-one-out (``fold`` None) or k-fold predictions of ``estimator`` (a
    squared-loss :class:`~deltafit.LinearClassifier` / :class:`~deltafit.LinearRegressor`) on
    dask collections; see the module docstring.

    Parameters
    ----------
    estimator : LinearClassifier or LinearRegressor with ``loss="squared"``
        Cloned and fitted with ``keep_data=False`` on the Dask path.
    X, y, sample_weight : dask collections (y, sample_weight may be NumPy)
    fold : dask or NumPy array of shape (n,), optional
        Each row's fold, 0..n_folds-1 (every fold non-empty).
    n_folds : int

    Returns
    -------
    DaskFolds

    Raises
    ------
    ValueError
        For another estimator or loss, and for the refusals of the Dask fit.
    """
    from dask import compute, delayed
    from deltafit.models import LinearClassifier, LinearRegressor

    if not (
        isinstance(estimator, (LinearClassifier, LinearRegressor))
        and estimator.get_params().get("loss") == "squared"
    ):
        raise ValueError(
            f"dask input is cross-validated by the closed form of the squared loss: "
            f"LinearClassifier / LinearRegressor with loss='squared', got "
            f"{type(estimator).__name__}"
            + (
                f" with loss={estimator.get_params().get('loss')!r}"
                if hasattr(estimator, "get_params") and "loss" in estimator.get_params()
                else ""
            )
        )
    model = clone(estimator).set_params(keep_data=False)
    model._fit_dask(X, y, sample_weight, fold, n_folds)
    problem, rho = _problem(model)
    blocks = row_blocks(X, y, sample_weight, fold)
    classes: Any = getattr(model, "classes_", None)  # None for a regressor
    K = model.problem_.n_outputs or model.problem_.n_classes
    out_chunks = (blocks.X.chunks[0],) + ((K,) if K else ())
    K_y = model.problem_.n_outputs  # columns of y (regression outputs; labels are one)
    Xb = blocks.X
    if fold is None:  # leave-one-out: one more pass, lazily
        # (K ≥ 3 classes: the one K-output state inside the one-vs-rest one)
        M = model.problem_.normal_matrix()
        L = cholesky(M, lower=True, check_finite=False)
        beta = np.array(model.problem_.coef, copy=True)
        z = _map_loo(Xb, blocks, problem, beta, L, out_chunks, K, K_y)
        y_true = blocks.y.ravel() if blocks.y.ndim == 2 and not K_y else blocks.y
        if problem.labels is not None:
            y_pred = z.map_blocks(
                _labels_of, classes, dtype=classes.dtype, drop_axis=1 if K else None
            )
            scores = (y_pred == y_true).astype(np.float64)
        else:
            y_pred = z
            err = (y_true - z) ** 2
            scores = -(err if err.ndim == 1 else err.mean(axis=1))
        import dask.array as da

        return DaskFolds(
            model=model,
            decision=z,
            y_pred=y_pred,
            y_true=y_true,
            fold=da.arange(blocks.n, chunks=blocks.X.chunks[0]),
            fold_scores=scores,
            n_passes=model.problem_.dask_passes + 1,
        )
    total = model.__dict__.pop("_dask_folds")
    sizes = np.array([f.n for f in total.folds])
    if np.any(sizes == 0):
        raise ValueError(f"fold {int(np.flatnonzero(sizes == 0)[0])} has no sample")
    betas = np.stack(
        [
            PrimalSquaredState(model.problem_.solver_options, model.problem_.max_rank)
            .fit_statistics(fold_statistics(total, f, rho).stats)
            .beta
            for f in range(n_folds)
        ]
    )
    f_arr = blocks.fold
    z = Xb.map_blocks(
        _block_folds,
        f_arr if f_arr.ndim == 2 else f_arr[:, None],
        problem=problem,
        betas=betas,
        dtype=np.float64,
        chunks=out_chunks,
        drop_axis=None if K else 1,
    )
    parts = [
        delayed(_fold_sums)(zz, yy, ff, problem, n_folds, classes)
        for zz, yy, ff in zip(_blocks_of(z), _blocks_of(blocks.y), _blocks_of(f_arr))
    ]
    (s,) = compute(delayed(sum)(parts))
    with np.errstate(invalid="ignore", divide="ignore"):
        fold_scores = s[1] / s[0]
    if problem.labels is None:
        fold_scores = -fold_scores
    y_true = blocks.y.ravel() if blocks.y.ndim == 2 and not K_y else blocks.y
    y_pred = (
        z.map_blocks(
            _labels_of,
            classes,
            dtype=classes.dtype,
            drop_axis=1 if K and problem.labels is not None else None,
        )
        if problem.labels is not None
        else z
    )
    return DaskFolds(
        model=model,
        decision=z,
        y_pred=y_pred,
        y_true=y_true,
        fold=f_arr,
        fold_scores=fold_scores,
        n_passes=model.problem_.dask_passes + 1,
    )


def _blocks_of(a):
    """The row blocks of a dask array as delayed objects (columns in one chunk)."""
    return a.to_delayed().ravel().tolist()


def _map_loo(Xb, blocks, problem, beta, L, out_chunks, K, K_y):
    """The left-out decisions as a lazy dask array (see :func:`_block_loo`)."""
    y2 = blocks.y if blocks.y.ndim == 2 else blocks.y[:, None]
    args = [y2]
    if blocks.w is not None:
        args.append(blocks.w[:, None])

    def fn(x, yy, *ww):
        yy = yy if K_y else yy[:, 0]
        return _block_loo(x, yy, ww[0][:, 0] if ww else None, problem, beta, L)

    return Xb.map_blocks(fn, *args, dtype=np.float64, chunks=out_chunks, drop_axis=None if K else 1)
