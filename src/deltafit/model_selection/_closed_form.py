"""Exact leave-one-out and k-fold predictions for the squared loss from one factorization.

For ``C Σ (t_i − z_i)² + ½‖β‖²`` (ridge, kernel ridge, LS-SVM; ρ = 1/(2C)) the fit is linear in
the targets, ``z = H t``, and the model trained without a set R of samples predicts R with
residuals ``e_R = (I − H_RR)⁻¹ r_R``, r the full model's residuals.  In primal form
``H = Φ (ΦᵀΦ + ρI)⁻¹ Φᵀ``; in dual form ``I − H = ρ G⁻¹`` with ``G = K + ρI`` and ``α = G⁻¹t``,
so ``e_R = ((G⁻¹)_RR)⁻¹ α_R`` (the LS-SVM decremental formula of Lee et al., "Exact
incremental and decremental learning for LS-SVM", applied to a whole fold; for R = {t} the
classical ``r_t / (1 − H_tt)`` = ``α_t / (G⁻¹)_tt``).  scikit-learn's
``RidgeCV`` offers the leave-one-out case for linear ridge; this covers kernels, folds and
classifiers (LS-SVM labels are the signs).

**Sample weights** (``C Σ w_i (t_i − z_i)² + ½‖β‖²``, W = diag(w)).  The fit is
``z = Φ A⁻¹ Φᵀ W t`` with ``A = ΦᵀWΦ + ρI``; removing R gives ``β_{−R} = β − A⁻¹ Φ_Rᵀ W_R e_R``
with ``e_R = t_R − z_{−R}``, hence ``(I − H_RR W_R) e_R = r_R`` with ``H = Φ A⁻¹ Φᵀ``: for one
sample the weighted leverage ``h_t = w_t Φ_tᵀ A⁻¹ Φ_t`` and ``e_t = r_t / (1 − h_t)`` (a sample
of weight 0 has ``h_t = 0``: its left-out prediction is the model's).  In dual form, by the
push-through identity ``A⁻¹Φᵀ = Φᵀ(WK + ρI)⁻¹``, ``I − HW = ρ Ĝ⁻¹`` with the non-symmetric
``Ĝ = KW + ρI`` and ``r = ρ Ĝ⁻¹ t``, so ``e_R = ((Ĝ⁻¹)_RR)⁻¹ α̂_R`` with ``α̂ = Ĝ⁻¹ t``: the
unweighted formula with ``G`` replaced by ``Ĝ`` (an LU factorisation instead of Cholesky).
**Dask collections** (:func:`dask_cross_validation`): the same predictions for a squared-loss
linear model fitted on the Dask path, leave-one-out as one ``map_blocks`` pass of the leverages
and k folds as k batch removals of per-fold statistics summed in the fit's own pass
(:mod:`deltafit.model_selection._dask_cv`); the per-sample results stay lazy.  The logistic and
squared-hinge losses go to :mod:`._dask_smooth_cv` (bounds and joint warm re-solves).
"""

from __future__ import annotations

import time
from typing import Any

import numpy as np
from scipy.linalg import cho_factor, cho_solve, lu_factor, lu_solve, solve
from sklearn.base import is_classifier
from sklearn.model_selection import check_cv

from deltafit.model_selection._result import CVResult

__all__ = ["closed_form_predictions", "dask_cross_validation", "fold_vector"]


def closed_form_predictions(
    prob: Any, splits: Any, targets: np.ndarray | None = None
) -> list[np.ndarray]:
    """Exact scores of each split's model at its removed samples.

    Parameters
    ----------
    prob : TrainingProblem
        A squared-loss problem (explicit features or kernel).
    splits : None or list of (R, T)
        None: leave-one-out over every sample.  Otherwise removed indices R and evaluated
        indices T (T must be a subset of R: the left-out samples).
    targets : ndarray of shape (n, K), optional
        Several target columns over the same features (the K one-vs-rest problems of a
        multiclass model): the hat matrix does not depend on the targets, so one
        factorization gives every column's left-out scores.  Default: ``prob.t``.

    Returns
    -------
    list of ndarray
        Scores at T per split (one array of length n for leave-one-out), of shape (·, K)
        when ``targets`` is given.
    """
    t, n = (prob.t if targets is None else np.asarray(targets, dtype=np.float64)), prob.n
    rho = 1.0 / (2.0 * prob.C)
    use_dual = prob.kernel or prob.Phi.shape[1] > n
    w = getattr(prob, "w", None)
    if w is not None:
        return _weighted(prob, splits, t, n, rho, w, use_dual)
    if use_dual:
        K = prob.K if prob.kernel else prob.Phi @ prob.Phi.T
        G = K + rho * np.eye(n)
        Ginv = cho_solve(
            cho_factor(G, lower=True, check_finite=False), np.eye(n), check_finite=False
        )
        Ginv = 0.5 * (Ginv + Ginv.T)
        alpha = Ginv @ t
        if splits is None:
            d = np.diag(Ginv)
            return [t - alpha / (d if t.ndim == 1 else d[:, None])]
        out = []
        for R, T in splits:
            e = solve(Ginv[np.ix_(R, R)], alpha[R], assume_a="pos", check_finite=False)
            out.append(_at(t[R] - e, R, T))
        return out
    Phi = prob.Phi
    p = Phi.shape[1]
    A = Phi.T @ Phi + rho * np.eye(p)
    cf = cho_factor(A, lower=True, check_finite=False)
    beta = cho_solve(cf, Phi.T @ t, check_finite=False)
    r = t - Phi @ beta
    if splits is None:
        W = cho_solve(cf, Phi.T, check_finite=False)  # A⁻¹ Φᵀ
        h = np.einsum("ij,ji->i", Phi, W)
        return [t - r / ((1.0 - h) if t.ndim == 1 else (1.0 - h)[:, None])]
    out = []
    for R, T in splits:
        PR = Phi[R]
        H = PR @ cho_solve(cf, PR.T, check_finite=False)
        e = solve(np.eye(len(R)) - H, r[R], check_finite=False)
        out.append(_at(t[R] - e, R, T))
    return out


def _at(values_on_R, R, T):
    """Values indexed by R, read at T ⊆ R."""
    if len(T) == len(R) and np.array_equal(T, R):
        return values_on_R
    pos = {int(i): k for k, i in enumerate(R)}
    return values_on_R[[pos[int(i)] for i in T]]


def _weighted(prob, splits, t, n, rho, w, use_dual):
    """:func:`closed_form_predictions` with sample weights (see the module docstring)."""
    if use_dual:
        K = prob.K if prob.kernel else prob.Phi @ prob.Phi.T
        G = K * w[None, :]  # Ĝ = K W + ρI
        G.flat[:: n + 1] += rho
        Ginv = lu_solve(lu_factor(G, check_finite=False), np.eye(n), check_finite=False)
        alpha = Ginv @ t
        if splits is None:
            d = np.diag(Ginv)
            return [t - alpha / (d if t.ndim == 1 else d[:, None])]
        return [
            _at(t[R] - solve(Ginv[np.ix_(R, R)], alpha[R], check_finite=False), R, T)
            for R, T in splits
        ]
    Phi = prob.Phi
    p = Phi.shape[1]
    A = (Phi.T * w) @ Phi
    A.flat[:: p + 1] += rho
    cf = cho_factor(A, lower=True, check_finite=False)
    wt = w * t if t.ndim == 1 else w[:, None] * t
    beta = cho_solve(cf, Phi.T @ wt, check_finite=False)
    r = t - Phi @ beta
    if splits is None:
        W = cho_solve(cf, Phi.T, check_finite=False)  # A⁻¹ Φᵀ
        h = w * np.einsum("ij,ji->i", Phi, W)  # the weighted leverages
        return [t - r / ((1.0 - h) if t.ndim == 1 else (1.0 - h)[:, None])]
    out = []
    for R, T in splits:
        PR = Phi[R]
        H = (PR @ cho_solve(cf, PR.T, check_finite=False)) * w[R][None, :]
        e = solve(np.eye(len(R)) - H, r[R], check_finite=False)
        out.append(_at(t[R] - e, R, T))
    return out


# ------------------------------------------------------------------------------ Dask
def fold_vector(
    cv: Any, n: int, y: Any, estimator: Any, groups: Any = None
) -> tuple[np.ndarray, int]:
    """Each sample's fold under the splitter ``cv`` (an int, a scikit-learn splitter or an
    iterable of (train, test)), as an int array of length n, and the number of folds.

    Raises
    ------
    ValueError
        When the splits do not partition the samples into test folds whose training sets are
        their complements (the closed form removes each fold from the full statistics).
    """
    cv = check_cv(cv, y, classifier=is_classifier(estimator))
    fold = np.full(n, -1, dtype=np.int32)
    seen = np.zeros(n, dtype=bool)
    k = 0
    for k, (train, test) in enumerate(cv.split(np.zeros((n, 0)), y, groups), start=1):
        test = np.asarray(test, dtype=np.intp)
        seen[:] = False
        seen[np.asarray(train, dtype=np.intp)] = True
        if (
            np.any(fold[test] >= 0)
            or np.any(seen[test])
            or np.count_nonzero(seen) + test.size != n
            or np.unique(test).size != test.size
        ):
            raise ValueError(
                "dask input is cross-validated by batch removals of whole folds: each sample "
                "must be in exactly one test fold, and each training set the complement of its "
                "test fold (KFold, StratifiedKFold, GroupKFold; not ShuffleSplit)"
            )
        fold[test] = k - 1
    if k < 2 or np.any(fold < 0):
        raise ValueError(
            "the splitter must put every sample in a test fold, over at least two folds"
        )
    return fold, k


def dask_cross_validation(
    estimator: Any,
    X: Any,
    y: Any,
    *,
    cv: Any = None,
    groups: Any = None,
    method: str = "auto",
    sample_weight: Any = None,
    region: str = "auto",
) -> CVResult:
    """Leave-one-out (``cv`` None) or k-fold cross-validation of a linear model on dask
    collections.

    * squared loss (``LinearClassifier`` / ``LinearRegressor``): the closed form (see the
      module docstring), ``method="closed_form"`` (or ``"auto"``);
    * logistic / squared hinge (``LinearClassifier``, two classes or K ≥ 3): leave-one-out by
      the left-out bounds (three passes) and joint exact refits of the undecided samples
      (``method="bounds"``), k folds
      by joint warm re-solves of every fold (``method="refit"``); ``"auto"`` picks them
      (:mod:`._dask_smooth_cv`);
    * the hinge loss is refused: its Dask fit is a decomposition method on the dual
      (:mod:`deltafit._dask._hinge`), and the joint fold re-solves and left-out balls
      above are Newton solves and bounds of a differentiable loss.

    The result's per-sample arrays (``y_true``, ``y_pred``, ``decision``, ``fold``,
    ``test_index``: row order) are lazy dask arrays; ``fold_scores`` is computed for k folds
    (lazy, per sample, for leave-one-out).  ``details["n_passes"]`` counts the passes over
    the rows: for the squared loss two (the fit's, then the predictions').  ``region``
    (logistic / squared-hinge leave-one-out): ``"auto"`` / ``"curvature"``, the left-out balls
    and the curvature-aware region in two more passes, or ``"sphere"``, the balls only.
    """
    import dask.array as da

    from deltafit._dask._input import is_dask, row_blocks
    from deltafit.model_selection._dask_cv import dask_closed_form

    loss = estimator.get_params().get("loss") if hasattr(estimator, "get_params") else None
    from deltafit.models import LinearClassifier, LinearRegressor

    linear = isinstance(estimator, (LinearClassifier, LinearRegressor))
    smooth = isinstance(estimator, LinearClassifier) and loss in ("logistic", "squared_hinge")
    if linear and loss == "hinge":
        raise ValueError(
            "dask input cannot be cross-validated with loss='hinge' (the Dask fold re-solves "
            "are Newton solves of a differentiable loss; the hinge's Dask fit is a dual "
            "decomposition method); use loss='squared_hinge' or 'logistic' on the cluster, "
            "or compute X to a NumPy array for the hinge loss"
        )
    if not smooth and method not in ("auto", "closed_form"):
        raise ValueError(
            f"dask input with the squared loss is cross-validated by "
            f"method='closed_form' (or 'auto'), got method={method!r}"
        )
    if not linear or loss not in ("squared", "logistic", "squared_hinge"):
        raise ValueError(
            f"dask input is cross-validated for LinearClassifier / LinearRegressor: the "
            f"squared loss by its closed form, the logistic and squared-hinge losses "
            f"(LinearClassifier) by bounds and joint warm re-solves; got "
            f"{type(estimator).__name__}" + (f" with loss={loss!r}" if loss is not None else "")
        )
    if region not in ("auto", "sphere", "curvature"):
        raise ValueError(f"region must be 'auto', 'sphere' or 'curvature', got {region!r}")
    if region == "curvature" and not smooth:
        raise ValueError(
            "region='curvature' is a region of the logistic and squared-hinge "
            "losses; the squared loss is cross-validated in closed form"
        )
    t0 = time.perf_counter()
    fold, k = None, 0
    if cv is not None:
        blocks = row_blocks(X) if is_dask(X) else None
        if blocks is None:
            raise ValueError(
                f"y or sample_weight is a dask collection but X is a "
                f"{type(X).__name__}: give X as a dask array or DataFrame too"
            )
        X, n = blocks.X, blocks.n  # a DataFrame's partition lengths are computed once
        yy = None
        if is_classifier(estimator) and not isinstance(cv, (list, tuple)):
            yy = np.asarray(y.compute() if is_dask(y) else y).reshape(-1)  # the strata
        fold, k = fold_vector(cv, n, yy, estimator, groups)
    if smooth:
        from deltafit.model_selection._dask_smooth_cv import dask_smooth_cross_validation

        return dask_smooth_cross_validation(
            estimator,
            X,
            y,
            fold=fold,
            n_folds=k,
            method=method,
            sample_weight=sample_weight,
            region=region,
        )
    res = dask_closed_form(estimator, X, y, sample_weight, fold, k)
    z = res.decision
    n = int(z.shape[0])
    lazy_none = da.zeros(n, dtype=bool, chunks=z.chunks[0])
    return CVResult(
        method="closed_form",
        approximate=False,
        classifier=is_classifier(estimator),
        y_true=res.y_true,
        test_index=da.arange(n, chunks=z.chunks[0]),
        fold=res.fold,
        y_pred=res.y_pred,
        decision=z,
        lower=z,
        upper=z,
        decided_by_bound=lazy_none,
        refit=lazy_none,
        n_refits=0,
        n_splits=n if cv is None else k,
        fold_scores=res.fold_scores,
        time_s=time.perf_counter() - t0,
        details={"dask": True, "n_passes": res.n_passes},
    )
