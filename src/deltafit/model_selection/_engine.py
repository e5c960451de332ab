"""One engine behind :func:`loo`, :func:`cross_validate` and the searches.

A split removes the samples R (everything not in its training set) from the full data and
evaluates the samples T.  The methods:

``closed_form``   squared loss: every split from one factorization (:mod:`._closed_form`).
``bounds``        Okumura et al. Algorithm 1 (op1): a certified ball decides the label of each
                  evaluated sample; splits with undecided samples are refit exactly, warm-started
                  from the full model.
``bounds_early``  op2: the same, but a refit stops as soon as the ball of Thm 6 around the
                  iterate, intersected with the removal ball, certifies the undecided signs.
``alo``           approximate leave-one-out (an approximation, labelled so everywhere).
``refit``         brute force: a fresh fit of a clone per split (any scikit-learn estimator).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from joblib import Parallel, delayed
from sklearn.base import clone, is_classifier
from sklearn.utils import check_consistent_length, column_or_1d
from sklearn.utils.validation import check_array

from deltafit.model_selection._closed_form import closed_form_predictions
from deltafit.model_selection._problem import OneVsRestProblem, problem_of
from deltafit.model_selection._result import CVResult
from deltafit.models import UpdatableMixin
from deltafit.sensitivity import certain_argmax
from deltafit.sensitivity._model_access import COVERED_LOSSES
from deltafit.sensitivity.regions import CURVATURE_LOSSES
from deltafit.utils._progress import progress_bar

__all__ = [
    "METHODS",
    "REGIONS",
    "evaluate",
    "check_data",
    "check_weights",
    "resolve_method",
    "fit_full",
]

METHODS = ("auto", "closed_form", "bounds", "bounds_early", "alo", "refit")
#: the screening regions of the bound methods (``region=``)
REGIONS = ("auto", "sphere", "curvature")


@dataclass
class _Outcome:
    """What one evaluation found about its m evaluated samples, filled in by the methods.

    Parameters
    ----------
    decision : ndarray of shape (m,)
        Decision values (NaN where none was computed).
    lower, upper : ndarray of shape (m,)
        Certified bounds of the decision values (equal to them where computed exactly).
    decided : ndarray of bool, shape (m,)
        Labels decided by a bound of the full model.
    refit : ndarray of bool, shape (m,)
        Samples whose split was refit.
    n_refits : int
        Refits done.
    n_iter : int
        Solver iterations of the refits.
    details : dict
        Method-specific details of the result.
    """

    decision: np.ndarray
    lower: np.ndarray
    upper: np.ndarray
    decided: np.ndarray
    refit: np.ndarray
    n_refits: int = 0
    n_iter: int = 0
    details: dict = field(default_factory=dict)

    @classmethod
    def empty(cls, m: int, n_classes: int = 0) -> _Outcome:
        """Nothing known yet about m samples (decision values of ``n_classes`` columns for a
        multiclass model)."""
        shape = (m, n_classes) if n_classes else m
        return cls(
            decision=np.full(shape, np.nan),
            lower=np.full(shape, np.nan),
            upper=np.full(shape, np.nan),
            decided=np.zeros(m, dtype=bool),
            refit=np.zeros(m, dtype=bool),
        )

    def positive(self) -> np.ndarray:
        """Where the label is positive: the decision value's sign, or the lower bound's where no
        value was computed."""
        return np.where(np.isnan(self.decision), self.lower > 0.0, self.decision > 0.0)

    def label_index(self) -> np.ndarray:
        """Multiclass: the class index of each sample's left-out label.

        Where decision values were computed (a refit: exact for the candidate classes), the
        argmax of the exact values and, for the other classes, their upper bounds (each below a
        candidate's exact value); where none was (a label decided by the bounds), the argmax of
        the lower bounds, which :func:`~deltafit.sensitivity.certain_argmax` certified."""
        known = ~np.all(np.isnan(self.decision), axis=1)
        v = np.where(
            known[:, None], np.where(np.isnan(self.decision), self.upper, self.decision), self.lower
        )
        return np.argmax(v, axis=1)


def check_data(X: Any, y: Any) -> tuple[Any, np.ndarray]:
    """Validated X (float, finite; sparse X as CSR, for the estimators that take it) and 1-d
    y of the same length."""
    if not _plain(X):  # a finite float64 ndarray of two rows or more passes as it is
        X = check_array(
            X, dtype=np.float64, ensure_min_samples=2, input_name="X", accept_sparse="csr"
        )
    if y is None:
        raise ValueError("y is required")
    y = column_or_1d(y)
    check_consistent_length(X, y)
    if y.dtype.kind in "fc" and not np.all(np.isfinite(y)):
        raise ValueError("Input y contains NaN or infinity")
    return X, y


def _plain(X):
    """Whether X is what :func:`check_array` would return unchanged: a 2-d float64 ndarray of
    two rows or more and one column or more, all finite."""
    return (
        type(X) is np.ndarray
        and X.dtype == np.float64
        and X.ndim == 2
        and X.shape[0] >= 2
        and X.shape[1] >= 1
        and bool(np.isfinite(X).all())
    )


def check_weights(sample_weight: Any, X: Any) -> np.ndarray | None:
    """Validated sample weights for the rows of X (None stays None): finite, ``≥ 0``."""
    from deltafit.solvers import check_sample_weight

    return check_sample_weight(sample_weight, X.shape[0])


def _loss_param(estimator):
    # a deltafit estimator keeps its parameters as attributes (scikit-learn's convention);
    # get_params would inspect the signature on every call
    return getattr(estimator, "loss", None) if isinstance(estimator, UpdatableMixin) else None


def resolve_method(method: str, estimator: Any, *, loo: bool) -> str:
    """Check ``method`` against the estimator; ``"auto"`` picks the fastest exact method."""
    if method not in METHODS:
        raise ValueError(f"method must be one of {list(METHODS)}, got {method!r}")
    ours = isinstance(estimator, UpdatableMixin)
    loss = _loss_param(estimator)
    clf = is_classifier(estimator)
    if method == "auto":
        if not ours:
            return "refit"
        if loss == "squared":
            return "closed_form"
        if clf and loss in COVERED_LOSSES:
            return "bounds_early"
        if clf and loss == "hinge":
            return "bounds"  # non-support vectors exactly, warm QP refits for the others
        return "refit"
    if method == "refit":
        return method
    if not ours:
        raise ValueError(
            f"method={method!r} needs a deltafit estimator (LinearClassifier, LinearRegressor, "
            f"KernelClassifier, KernelRegressor); {type(estimator).__name__} supports "
            "method='refit' only"
        )
    if method == "closed_form" and loss != "squared":
        raise ValueError(f"method='closed_form' needs loss='squared', got loss={loss!r}")
    if method in ("bounds", "bounds_early"):
        if not clf:
            raise ValueError(
                f"method={method!r} decides labels and needs a classifier; for regression use "
                "method='closed_form' (exact) or 'refit'"
            )
        if loss == "hinge" and method == "bounds":
            return method  # removing a non-support vector changes nothing; others are refit
        if loss not in COVERED_LOSSES:
            raise ValueError(
                f"method={method!r} needs a convex differentiable loss {list(COVERED_LOSSES)}; "
                f"loss={loss!r} is not covered (use method='refit' or 'alo'; for the hinge "
                "loss, method='bounds' skips the non-support vectors exactly)"
            )
    if method == "alo" and not loo:
        raise ValueError("method='alo' approximates leave-one-out only; use loo() / alo()")
    return method


def fitted_feature_map(estimator: Any, X: Any) -> Any:
    """The estimator's ``feature_map`` fitted once on all of X (None without one).

    Every method — the brute force included — uses this one map: the feature map is part of the
    model's definition (Okumura et al. draw their RBF centers once from all the data), and
    deltafit's updates keep it fixed, so a left-out model is the model without the sample in the
    same features.  An already fitted map is used as it is.
    """
    if not isinstance(estimator, UpdatableMixin):
        return None
    fm = getattr(estimator, "feature_map", None)
    if fm is None:
        return None
    from deltafit.kernels import resolve_feature_map

    return resolve_feature_map(fm, X)


def _fresh(estimator, feature_map):
    """An unfitted clone carrying the shared fitted feature map (``clone`` would unfit it)."""
    est = clone(estimator)
    if feature_map is not None:
        est.set_params(feature_map=feature_map)
    return est


def fit_full(
    estimator: Any,
    X: Any,
    y: np.ndarray,
    feature_map: Any = None,
    sample_weight: np.ndarray | None = None,
) -> Any:
    """A clone of ``estimator`` fitted on all of (X, y) (weighted by ``sample_weight``),
    keeping its training rows."""
    model = _fresh(estimator, feature_map)
    if isinstance(model, UpdatableMixin) and getattr(model, "keep_data", True) is not True:
        model.set_params(keep_data=True)  # type: ignore[attr-defined]  # a BaseEstimator too
    if sample_weight is None:
        return model.fit(X, y)
    return model.fit(X, y, sample_weight=sample_weight)


def evaluate(
    estimator: Any,
    X: Any,
    y: np.ndarray,
    splits: Any,
    method: str,
    *,
    n_jobs: int | None = None,
    progress: bool = False,
    order: str = "natural",
    stop: Callable[..., bool] | None = None,
    model: Any = None,
    desc: str | None = None,
    sample_weight: np.ndarray | None = None,
    region: str = "auto",
) -> CVResult:
    """Run one cross-validation; see the module docstring.

    Parameters
    ----------
    estimator : estimator
    X, y : validated arrays (:func:`check_data`)
    splits : None (leave-one-out) or list of (train, test) index arrays
    method : str, already resolved (:func:`resolve_method`)
    n_jobs : int or None
        Refits in parallel (joblib).
    progress : bool
    order : {"natural", "margin"}
        Order of the refits: ``"margin"`` refits the samples with the smallest ``y z`` under the
        full model first (Okumura et al. §5.2, second trick).
    stop : callable, optional
        ``stop(score_upper) -> bool``: bound-based methods stop refitting as soon as it says so
        of the certified upper bound of the score (mean fold accuracy); the result then has
        ``details["pruned"] = True`` and the score's certified bounds in ``details``.
    model : fitted estimator, optional
        The full model, when the caller already has it.
    sample_weight : ndarray of shape (n,), optional
        Validated weights (:func:`check_weights`): every model — the full one, each split's
        brute-force refit and the warm refits of the bound methods — solves the weighted
        problem over its training samples; the scores are unweighted (scikit-learn's
        ``cross_validate`` with ``params={"sample_weight": w}``).
    region : {"auto", "sphere", "curvature"}
        The screening region of the bound methods: ``"sphere"``, the published balls
        (Okumura et al. Thm 1 / Cor. 5, Sivan et al. Thm 1); ``"curvature"``, the
        curvature-aware regions for the logistic and squared-hinge losses, intersected with
        the balls (:mod:`deltafit.sensitivity.regions._curvature`); ``"auto"``, curvature for
        leave-one-out and the balls for other splits and for op2's batched leave-one-out
        refits (:func:`_resolve_region`).

    Returns
    -------
    CVResult
    """
    t0 = time.perf_counter()
    if order not in ("natural", "margin"):
        raise ValueError(f"order must be 'natural' or 'margin', got {order!r}")
    if not isinstance(region, str) or region not in REGIONS:
        raise ValueError(f"region must be 'auto', 'sphere' or 'curvature', got {region!r}")
    n = X.shape[0]
    clf = is_classifier(estimator)
    fmap = fitted_feature_map(estimator, X) if model is None else None
    loo = splits is None
    if loo:
        tests: Any = None
        test_index = np.arange(n)
        fold = np.arange(n)
        n_splits = n
    else:
        tests = [np.asarray(te) for _, te in splits]
        test_index = np.concatenate(tests) if tests else np.zeros(0, dtype=int)
        fold = np.repeat(np.arange(len(tests)), [len(te) for te in tests])
        n_splits = len(tests)
    m = test_index.shape[0]
    classes = np.unique(y) if clf else None
    n_classes = classes.size if classes is not None and classes.size > 2 else 0
    out = _Outcome.empty(m, n_classes)
    if method == "refit":
        if model is not None:
            fmap = getattr(model, "feature_map_", None)
        y_pred = _brute_force(
            estimator,
            X,
            y,
            splits,
            out,
            n_jobs,
            progress,
            desc,
            fmap,
            classes if n_classes else None,
            sample_weight,
        )
    else:
        if model is None:
            model = fit_full(estimator, X, y, fmap, sample_weight)
        prob = problem_of(model)
        resolved = _resolve_region(region, prob, loo, method)
        for p in getattr(prob, "probs", [prob]):
            p.region = resolved
        if n_classes and not isinstance(prob, OneVsRestProblem):
            raise ValueError(f"y has {n_classes} classes but the model has {model.classes_.size}")
        removed: Any = None if loo else [_complement(tr, n) for tr, _ in splits]
        pairs = None if loo else list(zip(removed, tests))
        if method == "closed_form":
            _check_left_out(pairs)
            if isinstance(prob, OneVsRestProblem):  # K target columns, one factorization
                codes = np.where(prob.t[:, None] == np.arange(prob.n_classes), 1.0, -1.0)
                z = np.concatenate(closed_form_predictions(prob.probs[0], pairs, codes))
            else:
                z = np.concatenate(closed_form_predictions(prob, pairs))
            out.decision[:] = z
            out.lower[:] = z
            out.upper[:] = z
        elif method == "alo":
            from deltafit.model_selection._alo import alo_decisions

            z = np.asarray(alo_decisions(model), dtype=float)
            out.decision[:] = z
        else:
            out.details["region"] = resolved
            _bounds(
                prob,
                pairs,
                test_index,
                fold,
                out,
                method == "bounds_early",
                order,
                stop,
                n_jobs,
                progress,
                desc,
            )
        y_pred = _labels(model, out) if clf else out.decision.copy()
    y_true = y[test_index]
    fold_scores = _fold_scores(clf, y_true, y_pred, fold, n_splits)
    return CVResult(
        method=method,
        approximate=method == "alo",
        classifier=clf,
        y_true=y_true,
        test_index=test_index,
        fold=fold,
        y_pred=y_pred,
        decision=out.decision,
        lower=out.lower,
        upper=out.upper,
        decided_by_bound=out.decided,
        refit=out.refit,
        n_refits=int(out.n_refits),
        n_splits=n_splits,
        fold_scores=fold_scores,
        time_s=time.perf_counter() - t0,
        n_iter=int(out.n_iter),
        details=out.details,
    )


# ---------------------------------------------------------------------------------- helpers
def _batched(prob, loo):
    """Whether the refits of ``prob`` run side by side (:meth:`TrainingProblem.loo_refits`):
    leave-one-out of a binary smooth problem over explicit features."""
    return loo and not isinstance(prob, OneVsRestProblem) and prob.smooth and not prob.kernel


def _resolve_region(region, prob, loo, method):
    """The screening region ``"auto"`` stands for: the balls for k folds (a fold's region costs
    a few factorisations and rarely decides a whole fold) and for op2's batched
    leave-one-out refits (:func:`_batched`: the first Newton step of every undecided sample,
    one matrix product, decides nearly all that the curvature region's factorisations would,
    and the few left are refit side by side for less) and for the losses it does not cover;
    the curvature region otherwise."""
    if region != "auto":
        return region
    loss = getattr(prob, "probs", [prob])[0].loss
    if (
        not loo
        or loss.name not in CURVATURE_LOSSES
        or (method == "bounds_early" and _batched(prob, loo))
    ):
        return "sphere"
    return "curvature"


def _complement(train, n):
    mask = np.ones(n, dtype=bool)
    mask[np.asarray(train, dtype=np.intp)] = False
    return np.flatnonzero(mask)


def _check_left_out(pairs):
    if pairs is None:
        return
    for R, T in pairs:
        if not np.all(np.isin(T, R)):
            raise ValueError(
                "method='closed_form' evaluates left-out samples only: a test sample is also "
                "in its split's training set; use method='refit'"
            )


def _labels(model, out):
    """Labels from decision values, or from certified intervals where no value was computed."""
    if out.decision.ndim == 2:
        return model.classes_[out.label_index()]
    return np.where(out.positive(), model.classes_[1], model.classes_[0])


def _per_fold_mean(fold, values, n_splits):
    """Mean of ``values`` per fold (NaN for empty folds).

    For 0/1 values this is the number of ones over the fold's size: the same float as
    scikit-learn's ``accuracy_score``, so ties between configurations compare exactly."""
    size = np.bincount(fold, minlength=n_splits).astype(float)
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.bincount(fold, values, n_splits) / size


def _fold_scores(clf, y_true, y_pred, fold, n_splits):
    """Accuracy (classifiers) or negative MSE (regressors) per fold; NaN for empty folds."""
    if clf:
        return _per_fold_mean(fold, y_pred == y_true, n_splits)
    return -_per_fold_mean(fold, (y_true - y_pred) ** 2, n_splits)


# ------------------------------------------------------------------------ brute force
def _split_range(splits, n, a, b):
    """(train, test) of splits a..b-1; leave-one-out splits are made here, not kept."""
    if splits is None:
        return [(np.delete(np.arange(n), i), np.array([i])) for i in range(a, b)]
    return [(np.asarray(tr), np.asarray(te)) for tr, te in splits[a:b]]


def _fit_predict(estimator, X, y, work, fmap=None, classes=None, sample_weight=None):
    res = []
    for tr, te in work:
        est = _fresh(estimator, fmap)
        if sample_weight is None:
            est.fit(X[tr], y[tr])
        else:
            est.fit(X[tr], y[tr], sample_weight=sample_weight[tr])
        pred = est.predict(X[te])
        dec = np.full(len(te), np.nan)
        seen = getattr(est, "classes_", np.zeros(2))
        if classes is not None:  # multiclass: a column per class of the full data
            dec = np.full((len(te), classes.size), np.nan)
            if hasattr(est, "decision_function") and seen.size > 2:
                dec[:, np.searchsorted(classes, seen)] = est.decision_function(X[te])
        elif hasattr(est, "decision_function") and seen.size == 2:
            dec = np.asarray(est.decision_function(X[te]), dtype=float).reshape(-1)
        elif not is_classifier(est):
            dec = np.asarray(pred, dtype=float)
        res.append((pred, dec))
    return res


def _brute_force(
    estimator, X, y, splits, out, n_jobs, progress, desc, fmap, classes=None, sample_weight=None
):
    n = X.shape[0]
    m = n if splits is None else len(splits)
    chunks = _chunks(m, n_jobs)
    preds, decs = [], []
    with progress_bar(m, progress, desc or "refits") as bar:
        if _effective_jobs(n_jobs) == 1:
            results = (
                _fit_predict(
                    estimator, X, y, _split_range(splits, n, a, b), fmap, classes, sample_weight
                )
                for a, b in chunks
            )
        else:
            results = Parallel(n_jobs=n_jobs, return_as="generator")(
                delayed(_fit_predict)(
                    estimator, X, y, _split_range(splits, n, a, b), fmap, classes, sample_weight
                )
                for a, b in chunks
            )
        for (a, b), res in zip(chunks, results):
            for p, d in res:
                preds.append(p)
                decs.append(d)
            bar.update(b - a)
    y_pred = np.concatenate(preds) if preds else np.zeros(0, dtype=y.dtype)
    dec = np.concatenate(decs) if decs else out.decision[:0].copy()
    out.decision[:] = dec
    out.lower[:] = dec
    out.upper[:] = dec
    out.refit[:] = True
    out.n_refits = m
    return y_pred


def _effective_jobs(n_jobs):
    from joblib import effective_n_jobs

    return 1 if n_jobs is None else effective_n_jobs(n_jobs)


def _chunks(m, n_jobs, per_job=4):
    """Contiguous [a, b) ranges: one for serial runs, a few per worker for parallel ones."""
    jobs = _effective_jobs(n_jobs)
    if m == 0:
        return []
    k = 1 if jobs == 1 else min(m, jobs * per_job)
    if jobs == 1:
        step = max(1, min(m, 64))
        return [(a, min(m, a + step)) for a in range(0, m, step)]
    edges = np.linspace(0, m, k + 1).astype(int)
    return [(int(a), int(b)) for a, b in zip(edges[:-1], edges[1:]) if b > a]


# ----------------------------------------------------------------------- bound screening
def _refit_many(prob, work, early):
    """Refit each (R, T) of ``work``; returns (lo, hi, n_iter, stopped) per item."""
    return [prob.refit(R, T, early=early) for R, T in work]


def _decides(lo, hi):
    """Where certified bounds decide the label: one sign (binary), or the argmax (multiclass,
    bounds of shape (m, K); :func:`deltafit.sensitivity.certain_argmax`)."""
    if lo.ndim == 2:
        return certain_argmax(lo, hi)[1]
    return (lo > 0.0) | (hi <= 0.0)


def _bounds(prob, pairs, test_index, fold, out, early, order, stop, n_jobs, progress, desc):
    """Bound screening, then refits of the undecided splits.

    A multiclass problem (:class:`OneVsRestProblem`) has bounds of shape (m, K): a label is
    decided when the argmax is; its refits compute the candidate classes exactly and do not
    stop early (op2's rule certifies signs)."""
    t = prob.t
    multi = isinstance(prob, OneVsRestProblem)
    if pairs is None:
        lo, hi = prob.loo_bounds()
    else:
        lo = np.empty(out.lower.shape)
        hi = np.empty_like(lo)
        for k, (R, T) in enumerate(pairs):
            sel = fold == k
            lo[sel], hi[sel] = prob.removal_bounds(R, T)
    decided = _decides(lo, hi)
    if early and pairs is None and prob.smooth and not np.all(decided):
        # op2's first iterate for every undecided sample at once: one Newton step each
        und = np.flatnonzero(~decided)
        lo2, hi2 = prob.newton_step_bounds(und)
        lo[und] = np.maximum(lo[und], lo2)
        hi[und] = np.minimum(hi[und], hi2)
        now = und[_decides(lo[und], hi[und]) if multi else (lo2 > 0.0) | (hi2 <= 0.0)]
        # a Newton step is the first iterate of op2's refit: those samples count as refit
        # (stopped after one step), not as decided by the bound of the full model
        out.details["newton_step_refits"] = int(now.size)
        out.refit[now] = True
        out.n_refits += int(now.size)
        out.n_iter += int(now.size)
        out.decided[:] = decided
        decided[now] = True
    else:
        out.decided[:] = decided
    out.lower[:] = lo
    out.upper[:] = hi
    # hinge: a removal that changes nothing
    exact = (decided[:, None] if multi else decided) & (lo == hi)
    out.decision[exact] = lo[exact]
    truth = t[test_index] if multi else t[test_index] > 0.0
    # splits holding undecided samples, each refit once
    todo = np.unique(fold[~decided])
    if order == "margin":
        marg = (prob.margins() if multi else t * prob.z)[test_index]
        key = np.full(len(pairs) if pairs is not None else test_index.shape[0], np.inf)
        np.minimum.at(key, fold[~decided], marg[~decided])
        todo = todo[np.argsort(key[todo], kind="stable")]
    elif order != "natural":
        raise ValueError(f"order must be 'natural' or 'margin', got {order!r}")

    n_folds = int(fold.max()) + 1 if fold.size else 0

    def known_errors():
        known = out.decided | out.refit
        guess = out.label_index() if multi else out.positive()
        return known & (guess != truth), ~known

    def score_upper():
        wrong, _ = known_errors()
        return float(np.mean(_per_fold_mean(fold, ~wrong, n_folds)))

    def split(k):
        if pairs is None:
            return np.array([k]), np.array([k])
        R, T = pairs[k]
        if early and not multi:  # certify the undecided samples only
            sel = np.flatnonzero(fold == k)
            return R, T[~decided[sel]]
        return R, T

    pruned = False
    if stop is not None and len(todo) and stop(score_upper()):
        pruned = True
        todo = todo[:0]
    jobs = _effective_jobs(n_jobs)
    step = 1 if jobs == 1 else jobs * 2
    if _batched(prob, pairs is None) and len(todo):
        # leave-one-out over explicit features: the refits of a chunk run side by side as
        # the columns of one matrix (TrainingProblem.loo_refits); chunks double in size, in
        # the refit order, with the pruning rule checked between them
        a, size = 0, 8
        with progress_bar(len(todo), progress, desc or "refits") as bar:
            while a < len(todo):
                ks = todo[a : a + size]
                rlo, rhi, its, stopped, failed = prob.loo_refits(
                    ks, early=early, lo=out.lower[ks], hi=out.upper[ks]
                )
                for j in np.flatnonzero(failed):  # a stalled column: a sequential refit
                    k = np.array([ks[j]])
                    flo, fhi, fit_, fst = prob.refit(k, k, early=early)
                    rlo[j], rhi[j], stopped[j] = flo[0], fhi[0], fst
                    its[j] += fit_
                out.refit[ks] = True
                out.n_refits += int(ks.size)
                out.n_iter += int(its.sum())
                out.lower[ks], out.upper[ks] = rlo, rhi
                done = ~stopped
                out.decision[ks[done]] = rlo[done]
                out.decided[ks[done]] = False
                bar.update(len(ks))
                a += ks.size
                size *= 2
                if stop is not None and a < len(todo) and stop(score_upper()):
                    pruned = True
                    break
        todo = todo[:0]
    with progress_bar(len(todo), progress, desc or "refits") as bar:
        for a in range(0, len(todo), step):
            batch = todo[a : a + step]
            work = [split(int(k)) for k in batch]
            if jobs == 1 or len(work) == 1:
                results = _refit_many(prob, work, early)
            else:
                parts = np.array_split(np.arange(len(work)), min(jobs, len(work)))
                got = Parallel(n_jobs=n_jobs)(
                    delayed(_refit_many)(prob, [work[i] for i in part], early) for part in parts
                )
                results = [r for g in got for r in g]
            for k, (_R, T), (rlo, rhi, it, stopped) in zip(batch, work, results):
                rows = _rows_of(k, T, fold, test_index, pairs)
                out.refit[rows] = True
                out.n_refits += 1
                out.n_iter += it
                out.lower[rows] = rlo
                out.upper[rows] = rhi
                if not stopped:
                    # multiclass: exact for the candidate classes only (lo == hi there)
                    out.decision[rows] = np.where(rlo == rhi, rlo, np.nan) if multi else rlo
                    out.decided[rows] = False
            bar.update(len(batch))
            if stop is not None and a + step < len(todo) and stop(score_upper()):
                pruned = True
                break
    wrong, unknown = known_errors()
    lo_acc = _per_fold_mean(fold, ~(wrong | unknown), n_folds)
    hi_acc = _per_fold_mean(fold, ~wrong, n_folds)
    out.details.update(
        pruned=pruned,
        errors_lower=int(wrong.sum()),
        errors_upper=int((wrong | unknown).sum()),
        score_lower=float(np.mean(lo_acc)),
        score_upper=float(np.mean(hi_acc)),
        undecided=unknown,
    )


def _rows_of(k, T, fold, test_index, pairs):
    """Positions in the result arrays of split k's samples T."""
    if pairs is None:
        return np.array([k])
    sel = np.flatnonzero(fold == k)
    if len(T) == len(sel):
        return sel
    pos = {int(i): j for i, j in zip(test_index[sel], sel)}
    return np.array([pos[int(i)] for i in T], dtype=np.intp)
