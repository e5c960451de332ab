"""Hyper-parameter search by exact leave-one-out (or k-fold) cross-validation."""

from __future__ import annotations

import copy
import time
from collections.abc import Callable
from typing import Any, TypeVar

import numpy as np
from numpy.typing import ArrayLike
from scipy.stats import rankdata
from sklearn.base import BaseEstimator, MetaEstimatorMixin, clone, is_classifier
from sklearn.model_selection import ParameterGrid
from sklearn.utils._param_validation import StrOptions
from sklearn.utils.metaestimators import available_if
from sklearn.utils.validation import check_is_fitted

from deltafit._pipeline import freeze
from deltafit.model_selection._engine import (
    REGIONS,
    check_data,
    check_weights,
    evaluate,
    fit_full,
    fitted_feature_map,
    resolve_method,
)
from deltafit.model_selection._kfold import make_splits
from deltafit.models import UpdatableMixin
from deltafit.utils._progress import progress_bar

__all__ = ["LOOSearchCV"]


def _best_has(name: str) -> Callable[[Any], bool]:
    def check(self: Any) -> bool:
        check_is_fitted(self, "best_estimator_")
        return hasattr(self.best_estimator_, name)

    return check


_S = TypeVar("_S", bound="LOOSearchCV")


class LOOSearchCV(MetaEstimatorMixin, BaseEstimator):
    """Exhaustive search over a parameter grid, scored by exact leave-one-out (or k-fold) CV.

    Each configuration is scored with :func:`deltafit.model_selection.loo` (or
    :func:`cross_validate` when ``cv`` is given) and the two tricks of Okumura et al. (KDD'15)
    §5.2:

    1. **Pruning**: the bounds decide most labels before any refit, so the number of errors
       of a configuration is bracketed; as soon as its certified number of errors reaches the
       best configuration's so far (ties go to the earlier configuration, as in scikit-learn),
       it cannot be selected and its refits stop.  Its score is then unknown (NaN in
       ``cv_results_``, with certified ``test_score_lower``/``test_score_upper``).
    2. **Margin order**: undecided samples are refit in increasing order of ``y f(x)`` under
       the full model — those most likely misclassified first, which raises the lower bound
       fastest.

    The selected parameters and the best score are those of an exhaustive
    ``GridSearchCV(estimator, param_grid, cv=LeaveOneOut(), scoring="accuracy")`` (or
    ``scoring="neg_mean_squared_error"`` for regressors); set ``prune=False`` to have the
    exact score of every configuration.

    Parameters
    ----------
    estimator : deltafit estimator (or any scikit-learn estimator with ``method="refit"``)
        Or a :class:`deltafit.UpdatablePipeline`: its transformers are fitted once on all of
        X and frozen (see :func:`loo`), and the grid ranges over the final step's parameters,
        named as for ``GridSearchCV`` (``linearclassifier__C``: the step's name, which
        :func:`deltafit.make_pipeline` takes from the lower-cased class name) or through the
        alias ``estimator__C`` (unless a step is named ``estimator``); ``best_params_`` keeps
        the names given, and ``best_estimator_`` is the pipeline of the frozen transformers and
        the best final estimator.  A transformer's parameter raises ValueError.
    param_grid : dict or list of dicts
        As for ``GridSearchCV``.
    cv : None, int, splitter or iterable
        None: leave-one-out.  Otherwise k-fold search over the splits (pruning compares the
        upper bound of the mean fold accuracy with the best score).
    method : str
        As in :func:`loo` (``"auto"``: closed form for the squared loss, ``bounds_early`` for
        other differentiable classification losses).  ``"alo"`` makes the whole search an
        approximation (flagged in ``cv_results_["approximate"]``).
    prune : bool
        Trick 1 (bound-based methods, classifiers).
    order : {"margin", "natural"}
        Trick 2.
    refit : bool
        Keep the best configuration's model fitted on all the data as ``best_estimator_``
        (it is the full model the search computed anyway).
    n_jobs : int, optional
        Refits in parallel within a configuration (joblib).
    progress : bool
        A progress bar over the configurations (needs tqdm).
    region : {"auto", "sphere", "curvature"}
        The screening region of the bound methods, passed to every configuration's
        :func:`loo` / :func:`cross_validate` (Okumura et al. Cor. 5 / Thm 1, Sivan et al.
        Thm 1 for ``"sphere"``; :func:`deltafit.sensitivity.loo_bounds` for the others):
        ``"sphere"`` reproduces the published balls exactly; ``"curvature"`` intersects them
        with the curvature-aware regions of the logistic and squared-hinge losses, which
        decide more labels without a refit; ``"auto"`` is ``"curvature"`` for leave-one-out
        and ``"sphere"`` for k folds.  The selection, the scores and every label are the same
        for all three (the regions only decide how many refits are needed).

    Attributes
    ----------
    cv_results_ : dict of arrays
        scikit-learn's keys (``params``, ``param_<name>``, ``mean_test_score``,
        ``std_test_score``, ``rank_test_score``, ``split<k>_test_score`` for k-fold) and
        deltafit's: ``n_refits``, ``n_decided_by_bound``, ``pruned``, ``test_score_lower``,
        ``test_score_upper``, ``method``, ``approximate``, ``time_s``.
    best_index_, best_params_, best_score_, best_estimator_, n_splits_
    n_refits_ : int
        Refits over the whole search.
    refit_time_ : float
        Time of the final fit: ~0 when the best model is the full model the search computed,
        one fit when the estimator asked for ``keep_data=False`` (the search's full models keep
        their rows) or ``method="refit"`` fitted no full model.

    Examples
    --------
    >>> import deltafit
    >>> from deltafit.model_selection import LOOSearchCV
    >>> from deltafit.datasets import load_breast_cancer
    >>> X, y = load_breast_cancer()
    >>> search = LOOSearchCV(deltafit.LinearClassifier(loss="logistic"),
    ...                      {"C": [0.1, 1.0, 10.0]}).fit(X, y)
    >>> search.best_params_
    {'C': 10.0}
    """

    # estimator, param_grid, cv, method and n_jobs are checked where they are used (freeze,
    # ParameterGrid, make_splits, resolve_method, joblib), as by cross-validation's functions
    _parameter_constraints: dict = {
        "estimator": "no_validation",
        "param_grid": "no_validation",
        "cv": "no_validation",
        "method": "no_validation",
        "prune": ["boolean"],
        "order": [StrOptions({"margin", "natural"})],
        "refit": ["boolean"],
        "n_jobs": "no_validation",
        "progress": ["boolean"],
        "region": [StrOptions(set(REGIONS))],
    }

    def __init__(
        self,
        estimator: Any,
        param_grid: dict | list[dict],
        *,
        cv: Any = None,
        method: str = "auto",
        prune: bool = True,
        order: str = "margin",
        refit: bool = True,
        n_jobs: int | None = None,
        progress: bool = False,
        region: str = "auto",
    ) -> None:
        self.estimator = estimator
        self.param_grid = param_grid
        self.cv = cv
        self.method = method
        self.prune = prune
        self.order = order
        self.refit = refit
        self.n_jobs = n_jobs
        self.progress = progress
        self.region = region

    def fit(
        self: _S,
        X: Any,
        y: ArrayLike,
        groups: ArrayLike | None = None,
        sample_weight: ArrayLike | None = None,
    ) -> _S:
        """Score every configuration and keep the best.

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)
        y : array-like of shape (n_samples,)
        groups : array-like, optional
            For group splitters (``cv`` given).
        sample_weight : array-like of shape (n_samples,), optional
            Weights of every fit (as ``GridSearchCV.fit(X, y, sample_weight=w)`` passes them
            to the estimator, indexed by each split's training set): the split models, the
            full model and the refit best estimator.  The scores are unweighted (a
            leave-one-out fold holds one sample: with positive weights this is what
            scikit-learn's ``GridSearchCV``, which also weights its scorer, computes).

        Returns
        -------
        self
        """
        self._validate_params()
        grid = list(ParameterGrid(self.param_grid))
        if not grid:
            raise ValueError("param_grid is empty")
        frozen = freeze(self.estimator, X, y)  # a pipeline: transformers fitted once, frozen
        estimator, settings = self.estimator, grid
        if frozen is not None:
            estimator, X = frozen.final, frozen.X
            settings = [frozen.final_params(p) for p in grid]
        X, y = check_data(X, y)
        sample_weight = check_weights(sample_weight, X)
        loo = self.cv is None
        splits = None if loo else make_splits(self.cv, X, y, estimator, groups)
        n_splits = X.shape[0] if splits is None else len(splits)
        clf = is_classifier(estimator)
        rows, best, best_model, prev = [], None, None, None
        t0 = time.perf_counter()
        with progress_bar(len(grid), self.progress, "configurations") as bar:
            for i, params in enumerate(settings):
                est = clone(estimator).set_params(**params)
                method = resolve_method(self.method, est, loo=loo)
                bounded = method in ("bounds", "bounds_early") and clf
                stop = None
                if self.prune and bounded and best is not None:
                    stop = _stop_rule(rows[best]["score"], loo)
                fmap = fitted_feature_map(est, X)
                model = None
                if method != "refit" or self.refit:
                    model = _warm_fit(prev, est, X, y, fmap, sample_weight)
                    prev = model
                res = evaluate(
                    est if fmap is None else est.set_params(feature_map=fmap),
                    X,
                    y,
                    splits,
                    method,
                    n_jobs=self.n_jobs,
                    order=self.order if bounded else "natural",
                    stop=stop,
                    model=model if method != "refit" else None,
                    sample_weight=sample_weight,
                    region=self.region,
                )
                row = _row(res, clf, loo)
                rows.append(row)
                if not row["pruned"] and (best is None or row["score"] > rows[best]["score"]):
                    best, best_model = i, model
                bar.update(1)
        self.cv_results_ = _results(grid, rows, n_splits, loo)
        self.best_index_ = int(np.argmin(self.cv_results_["rank_test_score"]))
        self.best_params_ = grid[self.best_index_]
        self.best_score_ = float(self.cv_results_["mean_test_score"][self.best_index_])
        self.n_splits_ = n_splits
        self.n_refits_ = int(sum(r["n_refits"] for r in rows))
        self.search_time_ = time.perf_counter() - t0
        self.multimetric_ = False
        self.scorer_ = "accuracy" if clf else "neg_mean_squared_error"
        if self.refit:
            t1 = time.perf_counter()
            asked = clone(estimator).set_params(**settings[self.best_index_])
            keeps = asked.get_params().get("keep_data", True)
            if best_model is None or not keeps:
                # the search's full model keeps its rows; keep_data=False promises none
                fmap = fitted_feature_map(asked, X)
                if fmap is not None:
                    asked.set_params(feature_map=fmap)
                best_model = (
                    asked.fit(X, y)
                    if sample_weight is None
                    else asked.fit(X, y, sample_weight=sample_weight)
                )
            self.best_estimator_ = best_model if frozen is None else frozen.wrap(best_model)
            self.refit_time_ = time.perf_counter() - t1
        self.n_features_in_ = X.shape[1] if frozen is None else frozen.n_features_in
        return self

    # ------------------------------------------------------------- delegation
    @property
    def classes_(self) -> np.ndarray:
        """``best_estimator_.classes_``."""
        check_is_fitted(self, "best_estimator_")
        return self.best_estimator_.classes_

    @available_if(_best_has("predict"))
    def predict(self, X: Any) -> np.ndarray:
        """``best_estimator_.predict(X)``."""
        return self.best_estimator_.predict(X)

    @available_if(_best_has("decision_function"))
    def decision_function(self, X: Any) -> np.ndarray:
        """``best_estimator_.decision_function(X)``."""
        return self.best_estimator_.decision_function(X)

    @available_if(_best_has("predict_proba"))
    def predict_proba(self, X: Any) -> np.ndarray:
        """``best_estimator_.predict_proba(X)``."""
        return self.best_estimator_.predict_proba(X)

    def score(self, X: Any, y: ArrayLike) -> float:
        """``best_estimator_.score(X, y)``."""
        check_is_fitted(self, "best_estimator_")
        return self.best_estimator_.score(X, y)


def _warm_fit(prev, est, X, y, fmap, sample_weight):
    """The full model of the configuration ``est``: warm-started from the previous
    configuration's full model ``prev`` when the two differ in C only (Newton from the previous
    solution, through the estimators' ``warm_start``; the fit stops on the same certified
    gradient norm as a cold one), else :func:`fit_full`.

    ``prev`` is copied (``copy.copy``: a fit replaces a model's fitted attributes, it never
    changes them in place), so the previous model stays as it was.
    """
    if (
        prev is None
        or type(prev) is not type(est)
        or not isinstance(est, UpdatableMixin)
        or fmap is not None
    ):
        return fit_full(est, X, y, fmap, sample_weight)
    mine, theirs = est.get_params(deep=False), prev.get_params(deep=False)
    same = mine.keys() == theirs.keys() and all(
        k in ("C", "warm_start", "keep_data") or _same_value(mine[k], theirs[k]) for k in mine
    )
    if not same or mine.get("warm_start", False):
        return fit_full(est, X, y, fmap, sample_weight)
    model = copy.copy(prev)
    model.set_params(C=mine["C"], warm_start=True)
    if "keep_data" in mine:
        model.set_params(keep_data=True)
    model.fit(X, y) if sample_weight is None else model.fit(X, y, sample_weight=sample_weight)
    model.set_params(warm_start=False)
    return model


def _same_value(a, b):
    if a is b:
        return True
    try:
        return bool(a == b)
    except Exception:  # noqa: BLE001 - arrays, objects without a truth value
        return False


def _stop_rule(best_score, loo):
    """Stop a configuration once its score's upper bound cannot beat ``best_score``.

    Leave-one-out scores are error counts over n, compared exactly (a tie goes to the earlier
    configuration); the mean of fold accuracies is compared with a margin of 1e-12 so that
    rounding can never prune a configuration that would have won.
    """
    if loo:
        return lambda upper: upper <= best_score
    return lambda upper: upper < best_score - 1e-12


def _row(res, clf, loo):
    d = res.details
    pruned = bool(d.get("pruned", False))
    n = res.n_samples
    if pruned:
        if loo:
            lower = 1.0 - d["errors_upper"] / n
            upper = 1.0 - d["errors_lower"] / n
        else:
            lower, upper = d["score_lower"], d["score_upper"]
        score, std, fold_scores = np.nan, np.nan, np.full(res.n_splits, np.nan)
    else:
        score = res.score
        std = float(np.std(res.fold_scores))
        lower = upper = score
        fold_scores = res.fold_scores
    return dict(
        score=score,
        std=std,
        lower=lower,
        upper=upper,
        pruned=pruned,
        fold_scores=fold_scores,
        n_refits=res.n_refits,
        n_decided=int(res.decided_by_bound.sum()),
        method=res.method,
        approximate=res.approximate,
        time_s=res.time_s,
    )


def _results(grid, rows, n_splits, loo):
    scores = np.array([r["score"] for r in rows], dtype=float)
    filled = np.where(np.isnan(scores), -np.inf, scores)
    ranks = rankdata(-filled, method="min").astype(np.int32)
    out = {"params": grid}
    names = sorted({k for p in grid for k in p})
    for name in names:
        col = np.ma.MaskedArray(np.empty(len(grid), dtype=object), mask=True)
        for i, p in enumerate(grid):
            if name in p:
                col[i] = p[name]
        out[f"param_{name}"] = col
    if not loo:
        for k in range(n_splits):
            out[f"split{k}_test_score"] = np.array([r["fold_scores"][k] for r in rows])
    out["mean_test_score"] = scores
    out["std_test_score"] = np.array([r["std"] for r in rows], dtype=float)
    out["rank_test_score"] = ranks
    out["test_score_lower"] = np.array([r["lower"] for r in rows], dtype=float)
    out["test_score_upper"] = np.array([r["upper"] for r in rows], dtype=float)
    out["pruned"] = np.array([r["pruned"] for r in rows])
    out["n_refits"] = np.array([r["n_refits"] for r in rows])
    out["n_decided_by_bound"] = np.array([r["n_decided"] for r in rows])
    out["method"] = np.array([r["method"] for r in rows], dtype=object)
    out["approximate"] = np.array([r["approximate"] for r in rows])
    out["time_s"] = np.array([r["time_s"] for r in rows])
    return out
