"""k-fold (any splitter) cross-validation: exact, by closed form, bound screening or refits."""

from __future__ import annotations

from typing import Any

import numpy as np
from numpy.typing import ArrayLike
from sklearn.base import is_classifier
from sklearn.model_selection import check_cv

from deltafit._dask._input import any_dask
from deltafit._pipeline import freeze
from deltafit.model_selection._closed_form import dask_cross_validation
from deltafit.model_selection._engine import check_data, check_weights, evaluate, resolve_method
from deltafit.model_selection._result import CVResult
from deltafit.utils._validation import check_bool

__all__ = ["cross_validate", "make_splits"]


def make_splits(
    cv: Any, X: Any, y: Any, estimator: Any, groups: ArrayLike | None = None
) -> list[tuple[np.ndarray, np.ndarray]]:
    """The (train, test) index arrays of a scikit-learn splitter (or an int, or an iterable)."""
    cv = check_cv(cv, y, classifier=is_classifier(estimator))
    splits = [(np.asarray(tr), np.asarray(te)) for tr, te in cv.split(X, y, groups)]
    if not splits:
        raise ValueError("the splitter produced no splits")
    return splits


def cross_validate(
    estimator: Any,
    X: Any,
    y: Any,
    *,
    cv: Any = 5,
    groups: ArrayLike | None = None,
    method: str = "auto",
    n_jobs: int | None = None,
    progress: bool = False,
    order: str = "natural",
    sample_weight: Any = None,
    region: str = "auto",
) -> CVResult:
    """Cross-validation over any scikit-learn splitter, with exact fast methods.

    Each split removes the samples outside its training set from the model fitted on all of
    (X, y) — a batch removal, which the bounds of Okumura et al. (Theorem 1) and Sivan et al.
    (Theorem 1) cover (Sivan et al. leave k-fold as future work) — and evaluates its test
    samples.

    Parameters
    ----------
    estimator : estimator
        A deltafit estimator, or any scikit-learn estimator with ``method="refit"``.  A
        :class:`deltafit.UpdatablePipeline`'s transformers are fitted once on all of X and
        frozen (see :func:`loo`).
    X : array-like of shape (n_samples, n_features)
    y : array-like of shape (n_samples,)
    cv : int, splitter or iterable of (train, test)
        As in scikit-learn (an int means (Stratified)KFold without shuffling).
    groups : array-like, optional
        For group splitters.
    method : {"auto", "closed_form", "bounds", "bounds_early", "refit"}
        * ``"closed_form"``: squared loss, each fold's predictions
          ``t_F − (I − H_FF)⁻¹ r_F`` from one factorization (test samples must be left out).
        * ``"bounds"``: the ball of the fold's removal decides each test label; a fold with
          undecided samples is refit exactly, warm-started from the full model.
        * ``"bounds_early"``: such a refit stops once the undecided signs are certified
          (Okumura Theorem 6 ball around the iterate ∩ removal ball).
        * ``"refit"``: a fresh fit per split (brute force, the reference).
        * ``"auto"``: closed form for the squared loss, ``bounds_early`` for other
          differentiable classification losses, else ``refit``.
    n_jobs : int, optional
        Refits in parallel (joblib).
    progress : bool
        Progress bar over the refits (needs tqdm).
    order : {"natural", "margin"}
    sample_weight : array-like of shape (n_samples,), optional
        Weights of the fit: each split's model is the weighted fit on its training samples
        (see :func:`~deltafit.model_selection.loo`); the scores are unweighted.
    region : {"auto", "sphere", "curvature"}
        The bound methods' screening region: the published removal ball (``"sphere"``, and
        ``"auto"``) or, for the logistic and squared-hinge losses, the curvature-aware region
        of each fold intersected with it (``"curvature"``;
        :mod:`deltafit.sensitivity.regions._curvature`; a few O(n³) kernel / O(n p²) linear
        factorisations per fold).

    Returns
    -------
    CVResult
        ``fold_scores`` (accuracy per fold for classifiers, negative MSE for regressors, as
        scikit-learn's ``cross_val_score``), ``score`` (their mean), ``error_rate``,
        per-sample predictions and certified intervals, ``n_refits`` (folds refit).
        With dask X: for the squared loss the folds' statistics are summed in the fit's pass
        and each fold's model is their batch removal; for the logistic and squared-hinge
        losses the k fold models are warm re-solves from the full model, all k in each pass
        (``method="refit"``); the per-sample arrays are lazy, in row order
        (:func:`~deltafit.model_selection._closed_form.dask_cross_validation`).

    Examples
    --------
    >>> import numpy as np
    >>> import deltafit
    >>> from sklearn.model_selection import KFold, cross_val_score
    >>> from deltafit.model_selection import cross_validate
    >>> from deltafit.datasets import load_breast_cancer
    >>> X, y = load_breast_cancer()
    >>> cv = KFold(5, shuffle=True, random_state=0)
    >>> r = cross_validate(deltafit.LinearClassifier(loss="logistic"), X, y, cv=cv)
    >>> ref = cross_val_score(deltafit.LinearClassifier(loss="logistic"), X, y, cv=cv)
    >>> bool(np.allclose(r.fold_scores, ref))   # the same scores as 5 refits
    True
    """
    check_bool(progress, "progress")
    if any_dask(X, y, sample_weight):  # batch removals / joint warm re-solves of the folds
        return dask_cross_validation(
            estimator,
            X,
            y,
            cv=cv,
            groups=groups,
            method=method,
            sample_weight=sample_weight,
            region=region,
        )
    frozen = freeze(estimator, X, y)
    if frozen is not None:
        estimator, X = frozen.final, frozen.X
    X, y = check_data(X, y)
    sample_weight = check_weights(sample_weight, X)
    method = resolve_method(method, estimator, loo=False)
    splits = make_splits(cv, X, y, estimator, groups)
    return evaluate(
        estimator,
        X,
        y,
        splits,
        method,
        n_jobs=n_jobs,
        progress=progress,
        order=order,
        desc="folds",
        sample_weight=sample_weight,
        region=region,
    )
