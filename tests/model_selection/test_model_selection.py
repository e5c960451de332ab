"""Exact cross-validation (``deltafit.model_selection``) against brute force.

Every fast method -- the closed form (squared loss), bound screening with warm refits
(``"bounds"``, op1 of Okumura et al.), early-stopped refits (``"bounds_early"``, op2) -- and
``LOOSearchCV`` are checked against an independent brute force: the scikit-learn twin of the
estimator (ARCHITECTURE.md, "The problem") refit once per left-out sample / fold
(``cross_val_score``,
``GridSearchCV``), or deltafit's own ``method="refit"`` (fresh fits of clones, no shortcut).
Never against the fast path itself.

Twins (the intercept is a regularised constant column of value ``s = intercept_scaling``):

* logistic       ``LogisticRegression(C, fit_intercept=False, solver="newton-cholesky",
                 tol=1e-12)`` on ``[Φ(X), s]``;
* squared_hinge  ``LinearSVC(C, loss="squared_hinge", fit_intercept=False, dual=False,
                 tol=1e-12)``, then one exact solve on its margin-violating set, kept only when the
                 set does not change (then it is the exact minimiser; LIBLINEAR alone was
                 measured ~1e-7 off on the decisions);
* hinge          the exact active-set QP ``reference.hinge_reference`` (independent of deltafit's
                 solvers; LinearSVC(loss="hinge") stops at its tolerance);
* squared        ``RidgeClassifier`` (LS-SVM labels) / ``Ridge(alpha=1/(2C), fit_intercept=False)``
                 on ``[Φ(X), s]``;
* kernels        the same linear twins on F with ``F Fᵀ = K + s²`` over all rows (a linear model on
                 F has the kernel model's scores on those rows), and
                 ``KernelRidge(alpha=1/(2C), kernel="precomputed")`` on ``K + s²`` (regressors).

Tolerances
----------
* labels: exactly equal (so error counts and accuracies are equal floats); the reference's
  decision values are checked to be away from 0 (> 1e-6), so the reference label is unambiguous;
* decision values where computed: 1e-6 · max(1, |z|) (the twins' solver precision);
* regressors' left-out predictions: 1e-8 · max |y| (one factorisation vs n Cholesky refits);
* certified intervals ``[lower, upper]`` contain the brute-force decision up to
  1e-8 · max(1, |z|): a refit sample's interval is a point (its exact value), which differs from
  the twin's by the solvers' precision.

Data: subsamples (50-120 rows) of breast cancer ([-1, 1]), digits even/odd, the MNIST sample,
scikit-learn's diabetes and digits (digit value as a regression target); the hypothesis property
test draws small random problems and compares with ``method="refit"``.  The last tests are
regression tests of problems found while writing this file (fixed in src since).
"""

from __future__ import annotations

import warnings

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from sklearn import config_context
from sklearn.base import BaseEstimator, ClassifierMixin, clone
from sklearn.datasets import load_diabetes
from sklearn.datasets import load_digits as sk_load_digits
from sklearn.exceptions import ConvergenceWarning, NotFittedError
from sklearn.kernel_approximation import Nystroem
from sklearn.kernel_ridge import KernelRidge
from sklearn.linear_model import LogisticRegression, Ridge, RidgeClassifier
from sklearn.metrics.pairwise import pairwise_kernels
from sklearn.model_selection import (
    GridSearchCV,
    GroupKFold,
    KFold,
    LeaveOneOut,
    ShuffleSplit,
    StratifiedKFold,
    check_cv,
    cross_val_score,
)
from sklearn.svm import LinearSVC
from sklearn.utils.validation import check_is_fitted

import deltafit as df
from deltafit.model_selection import CVResult, LOOSearchCV, cross_validate, loo
from reference import hinge_reference, kernel_features

LABEL_GAP = 1e-6  # the reference decisions must be this far from 0 (unambiguous labels)
DEC_TOL = 1e-6  # decision values vs the twin, relative to max(1, |z|)
REG_TOL = 1e-8  # regressors, relative to the target scale
BOX_TOL = 1e-8  # certified intervals vs the twin's decision, relative to max(1, |z|)


# =============================================================================================
# scikit-learn twins
# =============================================================================================
class L2SVMTwin(ClassifierMixin, BaseEstimator):
    """``C Σ max(0, 1 − t_i f_iᵀβ)² + ½‖β‖²`` by LIBLINEAR's primal solver, polished.

    LinearSVC(dual=False) stops at ~1e-7; with its margin-violating set A fixed the problem is
    a least-squares problem, ``(I + 2C F_Aᵀ F_A) β = 2C F_Aᵀ t_A``.  Its solution is the exact
    minimiser when it has the same violating set (the gradient is then zero); otherwise
    LIBLINEAR's solution is kept.
    """

    def __init__(self, C=1.0):
        self.C = C

    def fit(self, F, y):
        self.classes_ = np.unique(y)
        t = np.where(y == self.classes_[1], 1.0, -1.0)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", ConvergenceWarning)
            svc = LinearSVC(
                C=self.C,
                loss="squared_hinge",
                fit_intercept=False,
                dual=False,
                tol=1e-12,
                max_iter=100000,
            ).fit(F, t)
        beta = svc.coef_.ravel()
        act = t * (F @ beta) < 1.0
        Fa = F[act]
        polished = np.linalg.solve(
            np.eye(F.shape[1]) + 2.0 * self.C * Fa.T @ Fa, 2.0 * self.C * Fa.T @ t[act]
        )
        self.polished_ = bool(np.array_equal(t * (F @ polished) < 1.0, act))
        self.coef_ = polished if self.polished_ else beta
        return self

    def decision_function(self, F):
        return F @ self.coef_

    def predict(self, F):
        return np.where(self.decision_function(F) > 0.0, self.classes_[1], self.classes_[0])


class HingeTwin(ClassifierMixin, BaseEstimator):
    """``C Σ max(0, 1 − t_i f_iᵀβ) + ½‖β‖²`` by the exact active-set QP of tests/reference.py
    (independent of deltafit's solvers; LinearSVC(loss="hinge") stops at its tolerance)."""

    def __init__(self, C=1.0):
        self.C = C

    def fit(self, F, y):
        self.classes_ = np.unique(y)
        t = np.where(y == self.classes_[1], 1.0, -1.0)
        self.coef_, _ = hinge_reference(F, t, self.C)
        return self

    def decision_function(self, F):
        return F @ self.coef_

    def predict(self, F):
        return np.where(self.decision_function(F) > 0.0, self.classes_[1], self.classes_[0])


def twin_of(est):
    """The scikit-learn estimator solving the same problem on :func:`twin_features`."""
    loss, C = est.get_params()["loss"], float(est.get_params()["C"])
    if loss == "hinge":
        return HingeTwin(C=C)
    if isinstance(est, df.KernelRegressor):
        return KernelRidge(alpha=1.0 / (2.0 * C), kernel="precomputed")
    if loss == "logistic":
        return LogisticRegression(
            C=C, fit_intercept=False, solver="newton-cholesky", tol=1e-12, max_iter=1000
        )
    if loss == "squared_hinge":
        return L2SVMTwin(C=C)
    if isinstance(est, df.LinearRegressor):
        return Ridge(alpha=1.0 / (2.0 * C), fit_intercept=False, solver="cholesky")
    return RidgeClassifier(alpha=1.0 / (2.0 * C), fit_intercept=False, solver="cholesky")


def _kernel(est, X, Y=None):
    p = est.get_params()
    s = p["intercept_scaling"] if p["fit_intercept"] else 0.0
    names = {"rbf": ["gamma"], "poly": ["gamma", "degree", "coef0"], "linear": []}[p["kernel"]]
    return pairwise_kernels(X, Y, metric=p["kernel"], **{k: p[k] for k in names}) + s * s


def twin_features(est, X):
    """The twin's input for the rows X: ``[Φ(X), s]``, F with ``F Fᵀ = K + s²`` (kernel
    classifiers) or ``K + s²`` itself (kernel regressors, precomputed kernel)."""
    p = est.get_params()
    if isinstance(est, df.KernelRegressor):
        return _kernel(est, X)
    if isinstance(est, df.KernelClassifier):
        return kernel_features(_kernel(est, X))
    Phi = X if p["feature_map"] is None else p["feature_map"].transform(X)
    if not p["fit_intercept"]:
        return np.asarray(Phi, dtype=float)
    return np.hstack([Phi, np.full((X.shape[0], 1), float(p["intercept_scaling"]))])


def _score(model, F):
    if hasattr(model, "decision_function"):
        return np.asarray(model.decision_function(F), dtype=float).ravel()
    return np.asarray(model.predict(F), dtype=float).ravel()


def _fast_sklearn():
    """scikit-learn without its input re-validation (the inputs here are finite float arrays):
    the per-fit overhead dominates the brute force of small problems."""
    return config_context(assume_finite=True, skip_parameter_validation=True)


def brute_splits(est, X, y, splits):
    """Twin decisions (classifiers) / predictions (regressors) of every split's test rows."""
    F = twin_features(est, X)
    pairwise = isinstance(est, df.KernelRegressor)
    out = []
    with warnings.catch_warnings(), _fast_sklearn():
        warnings.simplefilter("ignore", ConvergenceWarning)
        for tr, te in splits:
            Ftr = F[np.ix_(tr, tr)] if pairwise else F[tr]
            Fte = F[np.ix_(te, tr)] if pairwise else F[te]
            out.append(_score(clone(twin_of(est)).fit(Ftr, y[tr]), Fte))
    return out


def brute_loo(est, X, y):
    n = X.shape[0]
    return np.concatenate(
        brute_splits(est, X, y, [(np.delete(np.arange(n), i), np.array([i])) for i in range(n)])
    )


def labels_of(z, classes):
    return np.where(z > 0.0, classes[1], classes[0])


# =============================================================================================
# data
# =============================================================================================
def _sub(X, y, n, seed):
    idx = np.random.default_rng(seed).choice(X.shape[0], n, replace=False)
    return X[idx], y[idx]


@pytest.fixture(scope="module")
def bc(breast_cancer):
    """120 breast-cancer rows (features in [-1, 1]), labels 0/1."""
    return _sub(*breast_cancer, 120, 0)


@pytest.fixture(scope="module")
def bc80(bc):
    """The first 80 of those rows (kernel twins on F with F Fᵀ = K are n × n problems)."""
    return bc[0][:80], bc[1][:80]


@pytest.fixture(scope="module")
def bc_text(bc):
    """The same rows with string labels."""
    X, y = bc
    return X, np.where(y == 1, "benign", "malignant")


@pytest.fixture(scope="module")
def dg(digits):
    """100 digits rows, odd (1) vs even (0)."""
    return _sub(*digits, 100, 1)


@pytest.fixture(scope="module")
def mn(mnist_sample):
    """80 rows of the MNIST sample (784 features > 80 rows)."""
    return _sub(*mnist_sample, 80, 2)


@pytest.fixture(scope="module")
def diabetes():
    """100 diabetes rows, standardised features, raw target (25-346)."""
    X, y = load_diabetes(return_X_y=True)
    X = (X - X.mean(0)) / X.std(0)
    return _sub(X, y, 100, 3)


@pytest.fixture(scope="module")
def digit_values():
    """80 digits rows in [0, 1] with the digit (0-9) as a regression target."""
    X, y = sk_load_digits(return_X_y=True)
    return _sub(X / 16.0, y.astype(float), 80, 4)


def _nystroem(X):
    return Nystroem(gamma=0.02, n_components=30, random_state=0).fit(X)


# name -> (data fixture, estimator builder from the data's X)
LOO_CASES = {
    "bc-linear-logistic": ("bc", lambda X: df.LinearClassifier(loss="logistic", C=1.0, tol=1e-12)),
    "bc-linear-sqhinge-nointercept": (
        "bc",
        lambda X: df.LinearClassifier(loss="squared_hinge", C=0.5, fit_intercept=False, tol=1e-12),
    ),
    "dg-nystroem-logistic-s2": (
        "dg",
        lambda X: df.LinearClassifier(
            loss="logistic", C=2.0, intercept_scaling=2.0, feature_map=_nystroem(X), tol=1e-12
        ),
    ),
    "dg-rbf-sqhinge": (
        "dg",
        lambda X: df.KernelClassifier(loss="squared_hinge", C=1.0, gamma=0.02, tol=1e-12),
    ),
    "bc-poly-logistic-nointercept": (
        "bc80",
        lambda X: df.KernelClassifier(
            loss="logistic",
            C=1.0,
            kernel="poly",
            degree=2,
            gamma=0.1,
            coef0=1.0,
            fit_intercept=False,
            tol=1e-12,
        ),
    ),
    "mnist-rbf-logistic": (
        "mn",
        lambda X: df.KernelClassifier(loss="logistic", C=10.0, gamma=0.02, tol=1e-12),
    ),
    # the hinge: "bounds" skips the non-support vectors exactly and refits the others
    "bc-linear-hinge": ("bc80", lambda X: df.LinearClassifier(loss="hinge", C=1.0)),
    # squared loss: LS-SVM classifiers and ridge / kernel ridge regressors
    "bc-linear-lssvm-textlabels": (
        "bc_text",
        lambda X: df.LinearClassifier(loss="squared", C=0.5, intercept_scaling=3.0),
    ),
    "mnist-linear-lssvm": ("mn", lambda X: df.LinearClassifier(loss="squared", C=1.0)),
    "dg-rbf-lssvm": ("dg", lambda X: df.KernelClassifier(loss="squared", C=1.0, gamma=0.02)),
    "diabetes-linear-ridge": (
        "diabetes",
        lambda X: df.LinearRegressor(C=0.2, intercept_scaling=10.0),
    ),
    "diabetes-linear-ridge-nointercept": (
        "diabetes",
        lambda X: df.LinearRegressor(C=5.0, fit_intercept=False),
    ),
    "digits-rbf-kernelridge": ("digit_values", lambda X: df.KernelRegressor(C=2.0, gamma=0.02)),
    "digits-poly-kernelridge-nointercept": (
        "digit_values",
        lambda X: df.KernelRegressor(
            C=0.5, kernel="poly", degree=2, gamma=0.05, coef0=1.0, fit_intercept=False
        ),
    ),
}
SQUARED = [k for k in LOO_CASES if "lssvm" in k or "ridge" in k]
BOUNDED = [k for k in LOO_CASES if k not in SQUARED]
# brute force of deltafit itself (fresh fits of clones) on a few cases: it costs n fits each
REFIT_CASES = ["bc-linear-logistic", "dg-rbf-sqhinge", "diabetes-linear-ridge", "dg-rbf-lssvm"]

HINGE = [k for k in LOO_CASES if "hinge" in k.split("-")]
LOO_PARAMS = (
    [(c, m) for c in BOUNDED for m in ("bounds", "auto")]
    + [(c, "bounds_early") for c in BOUNDED if c not in HINGE]
    + [(c, m) for c in SQUARED for m in ("closed_form", "auto")]
    + [(c, "refit") for c in REFIT_CASES]
)


class Case:
    def __init__(self, name, X, y, est, ref):
        self.name, self.X, self.y, self.est, self.ref = name, X, y, est, ref
        self.classifier = isinstance(est, (df.LinearClassifier, df.KernelClassifier))


_LOO_CACHE = {}


@pytest.fixture
def loo_case(request):
    """A LOO case with its brute-force reference (the twin refit once per sample), cached."""
    name = request.param
    if name not in _LOO_CACHE:
        data, build = LOO_CASES[name]
        X, y = request.getfixturevalue(data)
        est = build(X)
        _LOO_CACHE[name] = Case(name, X, y, est, brute_loo(est, X, y))
    return _LOO_CACHE[name]


def check_against_brute_force(res, case, method, n_models=None):
    """Every claim of a LOO / k-fold result against the twin's decisions ``case.ref``
    (``n_models``: the number of splits, for brute force)."""
    ref, n = case.ref, case.ref.shape[0]
    assert isinstance(res, CVResult)
    assert res.n_samples == n and not res.approximate
    scale = np.maximum(1.0, np.abs(ref))
    if case.classifier:
        assert np.min(np.abs(ref)) > LABEL_GAP, "ambiguous reference label: change the data"
        classes = np.unique(case.y)
        np.testing.assert_array_equal(res.y_pred, labels_of(ref, classes))
        assert res.n_errors == int(np.sum(labels_of(ref, classes) != res.y_true))
        known = ~np.isnan(res.decision)
        assert np.all(np.abs(res.decision[known] - ref[known]) <= DEC_TOL * scale[known])
    else:
        tol = REG_TOL * np.max(np.abs(case.y))
        assert np.max(np.abs(res.y_pred - ref)) <= tol
        np.testing.assert_allclose(res.decision, res.y_pred, rtol=0, atol=0)
    # certified intervals contain the brute-force decision
    assert not np.any(np.isnan(res.lower)) and not np.any(np.isnan(res.upper))
    assert np.all(res.lower <= ref + BOX_TOL * scale)
    assert np.all(ref <= res.upper + BOX_TOL * scale)
    # bookkeeping
    assert not np.any(res.decided_by_bound & res.refit), "a sample decided by a bound was refit"
    if method in ("closed_form", "refit"):
        np.testing.assert_array_equal(res.lower, res.decision)
        np.testing.assert_array_equal(res.upper, res.decision)
        assert not res.decided_by_bound.any()
        assert res.refit.all() if method == "refit" else not res.refit.any()
        assert res.n_refits == ((n_models or n) if method == "refit" else 0)
    else:
        # every label is known either from a bound or from a (possibly early-stopped) refit
        assert np.all(res.decided_by_bound | res.refit)
        # a sample's label is certified by its interval unless its exact value was computed
        known = ~np.isnan(res.decision)
        unsure = ~known
        assert np.all((res.lower[unsure] > 0) | (res.upper[unsure] <= 0))
        np.testing.assert_array_equal(res.lower[known], res.decision[known])
        np.testing.assert_array_equal(res.upper[known], res.decision[known])
        if method == "bounds":  # op1: every refit is run to the end
            assert np.all(known[res.refit])
        # a value known without a refit is exact from the bound itself (the hinge: removing a
        # non-support vector changes nothing)
        assert np.all(res.decided_by_bound[known & ~res.refit])


@pytest.mark.parametrize("loo_case,method", LOO_PARAMS, indirect=["loo_case"])
def test_loo_equals_brute_force(loo_case, method):
    case = loo_case
    res = loo(case.est, case.X, case.y, method=method)
    resolved = method
    if method == "auto":
        resolved = {"squared": "closed_form", "hinge": "bounds"}.get(
            case.est.get_params()["loss"], "bounds_early"
        )
    assert res.method == resolved
    check_against_brute_force(res, case, resolved)
    # leave-one-out bookkeeping
    np.testing.assert_array_equal(res.test_index, np.arange(case.X.shape[0]))
    np.testing.assert_array_equal(res.fold, np.arange(case.X.shape[0]))
    assert res.n_splits == case.X.shape[0]
    assert res.n_refits == int(res.refit.sum())
    if case.classifier:
        assert res.error_rate == res.n_errors / res.n_samples
        np.testing.assert_array_equal(res.fold_scores, (res.y_pred == res.y_true).astype(float))
    else:
        assert res.mse == pytest.approx(np.mean((case.y - case.ref) ** 2), rel=1e-8)
    # the estimator passed in is untouched
    with pytest.raises(NotFittedError):
        check_is_fitted(case.est)


def test_bounds_decide_most_samples(bc):
    """Not a vacuous screening: on breast cancer most labels come from the bound of the full
    model, and op2 spends fewer solver iterations than op1 (on the same screening: "auto"
    gives op2's batched refits the balls, op1 the curvature region)."""
    X, y = bc
    est = df.LinearClassifier(loss="logistic", C=1.0, tol=1e-12)
    for region in ("sphere", "curvature"):
        op1 = loo(est, X, y, method="bounds", region=region)
        op2 = loo(est, X, y, method="bounds_early", region=region)
        assert op1.details["region"] == op2.details["region"] == region
        _same_screening(op1, op2)
    assert loo(est, X, y, method="bounds").details["region"] == "curvature"
    assert loo(est, X, y, method="bounds_early").details["region"] == "sphere"


def _same_screening(op1, op2):
    assert op1.decided_share > 0.5
    np.testing.assert_array_equal(op1.decided_by_bound, op2.decided_by_bound)
    assert op2.n_iter <= op1.n_iter
    np.testing.assert_array_equal(op1.y_pred, op2.y_pred)


# =============================================================================================
# 2. cross_validate over scikit-learn splitters against cross_val_score of the twin
# =============================================================================================
def _groups(n):
    return np.random.default_rng(5).integers(0, 9, size=n)


SPLITTERS = {
    "kfold": lambda: KFold(5),
    "stratified-shuffle": lambda: StratifiedKFold(4, shuffle=True, random_state=0),
    "int": lambda: 3,
    # train is not the complement of test: 30 % of the rows are in neither
    "shufflesplit": lambda: ShuffleSplit(n_splits=4, test_size=0.2, train_size=0.5, random_state=0),
    "groupkfold": lambda: GroupKFold(4),
    "leaveoneout": lambda: LeaveOneOut(),
}

CV_ESTIMATORS = {
    "linear-logistic": ("cv_bc", lambda X: df.LinearClassifier(loss="logistic", C=0.5, tol=1e-12)),
    "rbf-sqhinge": (
        "cv_dg",
        lambda X: df.KernelClassifier(loss="squared_hinge", C=1.0, gamma=0.02, tol=1e-12),
    ),
    "linear-lssvm": ("cv_bc", lambda X: df.LinearClassifier(loss="squared", C=0.5)),
    "linear-ridge": ("diabetes", lambda X: df.LinearRegressor(C=0.2, intercept_scaling=10.0)),
    "rbf-kernelridge": ("digit_values", lambda X: df.KernelRegressor(C=2.0, gamma=0.02)),
}
CV_METHODS = {
    "linear-logistic": ("bounds", "bounds_early", "refit", "auto"),
    "rbf-sqhinge": ("bounds", "bounds_early"),
    "linear-lssvm": ("closed_form", "refit"),
    "linear-ridge": ("closed_form", "refit"),
    "rbf-kernelridge": ("closed_form",),
}
CV_PARAMS = [
    (s, e, m)
    for s in SPLITTERS
    for e in CV_ESTIMATORS
    for m in CV_METHODS[e]
    if not (s == "leaveoneout" and e in ("rbf-sqhinge", "rbf-kernelridge"))
    and not (s == "stratified-shuffle" and "ridge" in e)
]  # stratified: classifiers


@pytest.fixture(scope="module")
def cv_bc(bc):
    return bc[0][:80], bc[1][:80]


@pytest.fixture(scope="module")
def cv_dg(dg):
    return dg[0][:80], dg[1][:80]


class CVCase:
    def __init__(self, X, y, est, cv, groups, splits, scores, decisions):
        self.X, self.y, self.est, self.cv, self.groups = X, y, est, cv, groups
        self.splits, self.scores, self.decisions = splits, scores, decisions
        self.classifier = isinstance(est, (df.LinearClassifier, df.KernelClassifier))


_CV_CACHE = {}


@pytest.fixture
def cv_case(request):
    """(splitter, estimator) with the twin's cross_val_score and per-split decisions, cached."""
    key = request.param
    if key not in _CV_CACHE:
        sname, ename = key
        data, build = CV_ESTIMATORS[ename]
        X, y = request.getfixturevalue(data)
        est = build(X)
        cv = SPLITTERS[sname]()
        groups = _groups(X.shape[0]) if sname == "groupkfold" else None
        twin, F = twin_of(est), twin_features(est, X)
        scoring = (
            "accuracy"
            if isinstance(est, (df.LinearClassifier, df.KernelClassifier))
            else "neg_mean_squared_error"
        )
        splits = list(check_cv(cv, y, classifier=scoring == "accuracy").split(X, y, groups))
        with warnings.catch_warnings(), _fast_sklearn():
            warnings.simplefilter("ignore", ConvergenceWarning)
            scores = cross_val_score(twin, F, y, cv=cv, groups=groups, scoring=scoring)
        decisions = None if sname == "leaveoneout" else brute_splits(est, X, y, splits)
        _CV_CACHE[key] = CVCase(X, y, est, cv, groups, splits, scores, decisions)
    return _CV_CACHE[key]


@pytest.mark.parametrize(
    "cv_case,method",
    [((s, e), m) for s, e, m in CV_PARAMS],
    indirect=["cv_case"],
    ids=[f"{s}-{e}-{m}" for s, e, m in CV_PARAMS],
)
def test_cross_validate_equals_cross_val_score(cv_case, method):
    c = cv_case
    res = cross_validate(c.est, c.X, c.y, cv=c.cv, groups=c.groups, method=method)
    assert res.n_splits == len(c.splits)
    if c.classifier:
        np.testing.assert_array_equal(res.fold_scores, c.scores)
        assert res.score == np.mean(c.scores)
    else:
        np.testing.assert_allclose(res.fold_scores, c.scores, rtol=REG_TOL, atol=0)
    # the evaluated rows are the test sets of the splitter, in order
    np.testing.assert_array_equal(res.test_index, np.concatenate([te for _, te in c.splits]))
    np.testing.assert_array_equal(
        res.fold, np.repeat(np.arange(len(c.splits)), [len(te) for _, te in c.splits])
    )
    if c.decisions is not None:
        check_against_brute_force(
            res, Case("cv", c.X, c.y, c.est, np.concatenate(c.decisions)), res.method, len(c.splits)
        )
    # n_refits counts models: one per fold refit
    assert res.n_refits == len(np.unique(res.fold[res.refit]))
    assert not np.any(res.decided_by_bound & res.refit)
    if res.method == "bounds":  # op1 refits a fold with any undecided sample, all of it
        for k in np.unique(res.fold[res.refit]):
            assert res.refit[res.fold == k].all()


def test_shufflesplit_removes_more_than_the_test_set(bc):
    """ShuffleSplit(train_size + test_size < 1): the split's model is trained on train only
    (the rows in neither set are removed too); bound methods and the closed form follow it."""
    X, y = bc[0][:80], bc[1][:80]
    cv = ShuffleSplit(n_splits=3, test_size=0.25, train_size=0.25, random_state=1)
    splits = list(cv.split(X, y))
    assert all(len(tr) + len(te) < len(y) for tr, te in splits)
    for est, methods in [
        (df.LinearClassifier(loss="logistic", C=5.0, tol=1e-12), ("bounds", "bounds_early")),
        (df.LinearClassifier(loss="squared", C=5.0), ("closed_form",)),
    ]:
        ref = cross_val_score(twin_of(est), twin_features(est, X), y, cv=cv, scoring="accuracy")
        for m in methods:
            res = cross_validate(est, X, y, cv=cv, method=m)
            np.testing.assert_array_equal(res.fold_scores, ref)


def test_test_rows_inside_the_training_set(bc):
    """An iterable of (train, test) where test rows are also trained on: bound methods and
    refits evaluate the model trained on train exactly; the closed form, which only predicts
    left-out rows, refuses."""
    X, y = bc[0][:80], bc[1][:80]
    n = len(y)
    rng = np.random.default_rng(7)
    splits = []
    for _k in range(3):
        test = rng.choice(n, 15, replace=False)
        train = np.setdiff1d(np.arange(n), test[:5])  # 10 of the 15 test rows are trained on
        splits.append((train, np.sort(test)))
    est = df.LinearClassifier(loss="logistic", C=2.0, tol=1e-12)
    ref = cross_val_score(twin_of(est), twin_features(est, X), y, cv=splits, scoring="accuracy")
    decisions = brute_splits(est, X, y, splits)
    for m in ("bounds", "bounds_early", "refit"):
        res = cross_validate(est, X, y, cv=splits, method=m)
        np.testing.assert_array_equal(res.fold_scores, ref)
        case = Case("overlap", X, y, est, np.concatenate(decisions))
        check_against_brute_force(res, case, m, len(splits))
    lssvm = df.LinearClassifier(loss="squared", C=2.0)
    with pytest.raises(ValueError, match="test sample is also in its split's training set"):
        cross_validate(lssvm, X, y, cv=splits, method="closed_form")
    # test ⊆ removed (the rows in neither set are removed too): the closed form is exact
    disjoint = [(np.setdiff1d(tr, te), te) for tr, te in splits]
    ref = cross_val_score(
        twin_of(lssvm), twin_features(lssvm, X), y, cv=disjoint, scoring="accuracy"
    )
    res = cross_validate(lssvm, X, y, cv=disjoint, method="closed_form")
    np.testing.assert_array_equal(res.fold_scores, ref)


def test_cross_validate_auto_methods(cv_bc, diabetes):
    X, y = cv_bc
    assert cross_validate(df.LinearClassifier(loss="logistic"), X, y).method == "bounds_early"
    assert (
        cross_validate(df.KernelClassifier(loss="squared_hinge", gamma=0.02), X, y).method
        == "bounds_early"
    )
    assert cross_validate(df.LinearClassifier(loss="squared"), X, y).method == "closed_form"
    assert cross_validate(df.KernelRegressor(gamma=0.1), *diabetes).method == "closed_form"
    assert cross_validate(LogisticRegression(), X, y).method == "refit"
    assert loo(df.LinearRegressor(), *diabetes).method == "closed_form"


# =============================================================================================
# 3. LOOSearchCV against GridSearchCV of the twin
# =============================================================================================
C_GRID = [0.01, 0.1, 1.0, 10.0, 100.0]


def _search_data(bc):
    return bc[0][:100], bc[1][:100]


def _logistic(C=1.0):
    return df.LinearClassifier(loss="logistic", C=C, tol=1e-12)


@pytest.fixture(scope="module")
def grid_loo(bc):
    """GridSearchCV(LogisticRegression on [X, 1], C grid, LeaveOneOut, accuracy)."""
    X, y = _search_data(bc)
    gs = GridSearchCV(twin_of(_logistic()), {"C": C_GRID}, cv=LeaveOneOut(), scoring="accuracy")
    with _fast_sklearn():
        gs.fit(twin_features(_logistic(), X), y)
    return gs


@pytest.fixture(scope="module")
def search_exact(bc):
    X, y = _search_data(bc)
    return LOOSearchCV(_logistic(), {"C": C_GRID}, prune=False).fit(X, y)


@pytest.fixture(scope="module")
def search_pruned(bc):
    X, y = _search_data(bc)
    return LOOSearchCV(_logistic(), {"C": C_GRID}, prune=True).fit(X, y)


def test_search_equals_grid_search(grid_loo, search_exact, search_pruned):
    for s in (search_exact, search_pruned):
        assert s.best_params_ == grid_loo.best_params_
        assert s.best_score_ == grid_loo.best_score_
        assert s.best_index_ == grid_loo.best_index_
        assert s.n_splits_ == grid_loo.n_splits_
        assert s.scorer_ == "accuracy"
    np.testing.assert_array_equal(
        search_exact.cv_results_["mean_test_score"], grid_loo.cv_results_["mean_test_score"]
    )
    np.testing.assert_array_equal(
        search_exact.cv_results_["rank_test_score"], grid_loo.cv_results_["rank_test_score"]
    )
    np.testing.assert_allclose(
        search_exact.cv_results_["std_test_score"],
        grid_loo.cv_results_["std_test_score"],
        rtol=1e-12,
        atol=1e-15,
    )
    assert not search_exact.cv_results_["pruned"].any()


def test_pruned_scores_are_certified(grid_loo, search_exact, search_pruned):
    r, truth = search_pruned.cv_results_, search_exact.cv_results_["mean_test_score"]
    pruned = r["pruned"]
    assert pruned.any(), "nothing was pruned: the test is vacuous"
    assert np.all(np.isnan(r["mean_test_score"][pruned]))
    assert np.all(np.isnan(r["std_test_score"][pruned]))
    np.testing.assert_array_equal(r["mean_test_score"][~pruned], truth[~pruned])
    assert np.all(r["test_score_lower"] <= truth) and np.all(truth <= r["test_score_upper"])
    # a pruned configuration cannot beat the best one
    assert np.all(r["test_score_upper"][pruned] <= search_pruned.best_score_)
    assert r["rank_test_score"][search_pruned.best_index_] == 1
    # pruning saved refits
    assert search_pruned.n_refits_ < search_exact.n_refits_


def test_search_cv_results_keys(search_pruned):
    r = search_pruned.cv_results_
    expected = {
        "params",
        "param_C",
        "mean_test_score",
        "std_test_score",
        "rank_test_score",
        "test_score_lower",
        "test_score_upper",
        "pruned",
        "n_refits",
        "n_decided_by_bound",
        "method",
        "approximate",
        "time_s",
    }
    assert expected <= set(r)
    assert not any(k.startswith("split") for k in r)  # leave-one-out: no per-split columns
    assert r["params"] == [{"C": c} for c in C_GRID]
    assert list(r["param_C"]) == C_GRID
    for k in expected - {"params"}:
        assert len(r[k]) == len(C_GRID), k
    assert set(r["method"]) == {"bounds_early"}
    assert not r["approximate"].any()


def test_best_estimator_predicts_like_a_fresh_fit(bc, search_pruned):
    X, y = _search_data(bc)
    fresh = _logistic().set_params(**search_pruned.best_params_).fit(X, y)
    Xq = bc[0][100:]
    np.testing.assert_array_equal(search_pruned.predict(Xq), fresh.predict(Xq))
    np.testing.assert_allclose(
        search_pruned.decision_function(Xq), fresh.decision_function(Xq), rtol=1e-8, atol=1e-8
    )
    np.testing.assert_allclose(
        search_pruned.predict_proba(Xq), fresh.predict_proba(Xq), rtol=1e-8, atol=1e-8
    )
    np.testing.assert_array_equal(search_pruned.classes_, fresh.classes_)
    assert search_pruned.score(X, y) == fresh.score(X, y)


def test_search_ties_go_to_the_earlier_configuration(bc, grid_loo):
    """A duplicated grid value ties exactly; both runs pick the first occurrence, as
    GridSearchCV (rank 'min', argmin) does."""
    X, y = _search_data(bc)
    scores = dict(zip(C_GRID, grid_loo.cv_results_["mean_test_score"]))
    best = grid_loo.best_params_["C"]
    other = [c for c in C_GRID if scores[c] < scores[best]]
    grid = [other[0], best, other[-1], best]
    expected = int(np.argmax([scores[c] for c in grid]))  # first maximum
    assert expected == 1
    for prune in (True, False):
        s = LOOSearchCV(_logistic(), {"C": grid}, prune=prune).fit(X, y)
        assert s.best_index_ == 1 and s.best_params_ == {"C": best}
        assert s.best_score_ == scores[best]
        assert s.cv_results_["rank_test_score"][1] == 1
    # without pruning the duplicate scores the same and shares rank 1
    np.testing.assert_array_equal(s.cv_results_["mean_test_score"], [scores[c] for c in grid])
    assert s.cv_results_["rank_test_score"][3] == 1


def test_search_order_and_n_jobs_give_the_same_result(bc, search_exact, search_pruned):
    X, y = _search_data(bc)
    nat = LOOSearchCV(_logistic(), {"C": C_GRID}, prune=True, order="natural").fit(X, y)
    assert nat.best_params_ == search_pruned.best_params_
    assert nat.best_score_ == search_pruned.best_score_
    truth = search_exact.cv_results_["mean_test_score"]
    # parallel refits (the last configurations: each is scored on its own without pruning)
    par = LOOSearchCV(_logistic(), {"C": C_GRID[2:]}, prune=False, n_jobs=2).fit(X, y)
    np.testing.assert_array_equal(par.cv_results_["mean_test_score"], truth[2:])
    np.testing.assert_array_equal(
        par.cv_results_["n_refits"], search_exact.cv_results_["n_refits"][2:]
    )
    par_pruned = LOOSearchCV(_logistic(), {"C": C_GRID}, n_jobs=2).fit(X, y)
    assert par_pruned.best_params_ == search_pruned.best_params_
    assert par_pruned.best_score_ == search_pruned.best_score_
    r = nat.cv_results_
    np.testing.assert_array_equal(r["mean_test_score"][~r["pruned"]], truth[~r["pruned"]])
    assert np.all(r["test_score_lower"] <= truth) and np.all(truth <= r["test_score_upper"])
    natural_exact = LOOSearchCV(_logistic(), {"C": C_GRID}, prune=False, order="natural").fit(X, y)
    np.testing.assert_array_equal(natural_exact.cv_results_["mean_test_score"], truth)


def test_kfold_search_equals_grid_search(dg):
    X, y = dg[0][:80], dg[1][:80]
    est = df.KernelClassifier(loss="squared_hinge", gamma=0.02, tol=1e-12)
    grid = {"C": [0.1, 1.0, 10.0]}
    cv = StratifiedKFold(5)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        gs = GridSearchCV(twin_of(est), grid, cv=cv, scoring="accuracy").fit(
            twin_features(est, X), y
        )
    for prune in (False, True):
        s = LOOSearchCV(est, grid, cv=cv, prune=prune).fit(X, y)
        assert s.best_params_ == gs.best_params_ and s.best_score_ == gs.best_score_
        assert s.n_splits_ == 5
        r = s.cv_results_
        keep = ~r["pruned"]
        np.testing.assert_array_equal(
            r["mean_test_score"][keep], gs.cv_results_["mean_test_score"][keep]
        )
        for k in range(5):
            np.testing.assert_array_equal(
                r[f"split{k}_test_score"][keep], gs.cv_results_[f"split{k}_test_score"][keep]
            )
        truth = gs.cv_results_["mean_test_score"]
        assert np.all(r["test_score_lower"] <= truth + 1e-12)
        assert np.all(truth <= r["test_score_upper"] + 1e-12)
        if not prune:
            assert not r["pruned"].any()


def test_regression_search_equals_grid_search(diabetes):
    X, y = diabetes
    grid = [0.01, 0.1, 1.0, 10.0]
    est = df.LinearRegressor(intercept_scaling=10.0)
    F = twin_features(est, X)
    with _fast_sklearn():
        gs = GridSearchCV(
            Ridge(fit_intercept=False, solver="cholesky"),
            {"alpha": [1.0 / (2.0 * C) for C in grid]},
            cv=LeaveOneOut(),
            scoring="neg_mean_squared_error",
        ).fit(F, y)
    s = LOOSearchCV(est, {"C": grid}).fit(X, y)
    assert set(s.cv_results_["method"]) == {"closed_form"}
    assert s.scorer_ == "neg_mean_squared_error"
    tol = REG_TOL * np.max(np.abs(y)) ** 2
    np.testing.assert_allclose(
        s.cv_results_["mean_test_score"], gs.cv_results_["mean_test_score"], rtol=REG_TOL, atol=tol
    )
    assert s.best_index_ == gs.best_index_
    assert s.best_params_ == {"C": grid[gs.best_index_]}
    assert s.best_score_ == pytest.approx(gs.best_score_, rel=REG_TOL)
    fresh = clone(est).set_params(**s.best_params_).fit(X, y)
    np.testing.assert_allclose(s.predict(X), fresh.predict(X), rtol=1e-10, atol=1e-8)
    # k-fold regression search
    gs5 = GridSearchCV(
        Ridge(fit_intercept=False, solver="cholesky"),
        {"alpha": [1.0 / (2.0 * C) for C in grid]},
        cv=KFold(4),
        scoring="neg_mean_squared_error",
    ).fit(F, y)
    s5 = LOOSearchCV(est, {"C": grid}, cv=KFold(4)).fit(X, y)
    np.testing.assert_allclose(
        s5.cv_results_["mean_test_score"],
        gs5.cv_results_["mean_test_score"],
        rtol=REG_TOL,
        atol=tol,
    )
    assert s5.best_index_ == gs5.best_index_


def test_search_over_mixed_losses_equals_brute_force_search(cv_bc):
    """A list of grids mixing losses (closed form for squared, bound screening for the others,
    pruning across methods) against the same search by fresh fits of clones."""
    X, y = cv_bc[0][:60], cv_bc[1][:60]
    grid = [{"C": [0.1, 1.0, 10.0]}, {"loss": ["squared", "squared_hinge"], "C": [0.5, 5.0]}]
    est = df.LinearClassifier(loss="logistic", tol=1e-12)
    brute = LOOSearchCV(est, grid, method="refit").fit(X, y)
    assert set(brute.cv_results_["method"]) == {"refit"}
    for prune in (True, False):
        s = LOOSearchCV(est, grid, prune=prune).fit(X, y)
        assert s.best_params_ == brute.best_params_ and s.best_score_ == brute.best_score_
        assert s.best_index_ == brute.best_index_
        r = s.cv_results_
        keep = ~r["pruned"]
        np.testing.assert_array_equal(
            r["mean_test_score"][keep], brute.cv_results_["mean_test_score"][keep]
        )
        truth = brute.cv_results_["mean_test_score"]
        assert np.all(r["test_score_lower"] <= truth) and np.all(truth <= r["test_score_upper"])
        expected = [
            "closed_form" if p.get("loss") == "squared" else "bounds_early" for p in r["params"]
        ]
        assert list(r["method"]) == expected
    assert brute.cv_results_["params"] == s.cv_results_["params"]


def test_search_with_a_scikit_learn_estimator_refits(cv_bc):
    """A non-deltafit estimator: method 'auto' is brute force, same choice as GridSearchCV."""
    X, y = cv_bc
    F = np.hstack([X, np.ones((len(y), 1))])
    twin = LogisticRegression(fit_intercept=False, solver="newton-cholesky", tol=1e-12)
    grid = {"C": [0.1, 1.0, 10.0]}
    s = LOOSearchCV(twin, grid, cv=KFold(4)).fit(F, y)
    gs = GridSearchCV(twin, grid, cv=KFold(4), scoring="accuracy").fit(F, y)
    assert set(s.cv_results_["method"]) == {"refit"}
    np.testing.assert_array_equal(
        s.cv_results_["mean_test_score"], gs.cv_results_["mean_test_score"]
    )
    assert s.best_params_ == gs.best_params_


# =============================================================================================
# 4. progress bars and parallel refits
# =============================================================================================
def _same(a, b):
    np.testing.assert_array_equal(a.y_pred, b.y_pred)
    np.testing.assert_array_equal(a.test_index, b.test_index)
    np.testing.assert_array_equal(a.decided_by_bound, b.decided_by_bound)
    np.testing.assert_array_equal(a.refit, b.refit)
    np.testing.assert_array_equal(np.isnan(a.decision), np.isnan(b.decision))
    for name in ("decision", "lower", "upper"):
        np.testing.assert_allclose(
            getattr(a, name), getattr(b, name), rtol=1e-12, atol=1e-14, equal_nan=True
        )
    np.testing.assert_array_equal(a.fold_scores, b.fold_scores)
    assert a.n_refits == b.n_refits and a.method == b.method


@pytest.mark.parametrize(
    "method", ["bounds", "bounds_early", pytest.param("refit", marks=pytest.mark.slow)]
)
def test_parallel_loo_equals_serial(cv_dg, method):
    X, y = cv_dg[0][:50], cv_dg[1][:50]
    est = df.KernelClassifier(loss="logistic", C=10.0, gamma=0.02)
    _same(loo(est, X, y, method=method, n_jobs=2), loo(est, X, y, method=method))


@pytest.mark.parametrize("method", ["bounds", "bounds_early", "closed_form", "refit"])
def test_parallel_cross_validate_equals_serial(cv_bc, method):
    X, y = cv_bc
    loss = "squared" if method == "closed_form" else "squared_hinge"
    est = df.LinearClassifier(loss=loss, C=10.0)
    cv = StratifiedKFold(8, shuffle=True, random_state=2)
    _same(
        cross_validate(est, X, y, cv=cv, method=method, n_jobs=2),
        cross_validate(est, X, y, cv=cv, method=method),
    )


def test_progress_bars(cv_bc, capsys):
    pytest.importorskip("tqdm")
    X, y = cv_bc
    est = df.LinearClassifier(loss="logistic", C=10.0)
    for method in ("bounds", "bounds_early", "refit"):
        _same(loo(est, X, y, method=method, progress=True), loo(est, X, y, method=method))
        _same(
            cross_validate(est, X, y, cv=4, method=method, progress=True),
            cross_validate(est, X, y, cv=4, method=method),
        )
    _same(
        loo(df.LinearClassifier(C=10.0), X, y, progress=True),
        loo(df.LinearClassifier(C=10.0), X, y),
    )
    a = LOOSearchCV(est, {"C": [1.0, 10.0]}, progress=True).fit(X, y)
    b = LOOSearchCV(est, {"C": [1.0, 10.0]}).fit(X, y)
    assert a.best_params_ == b.best_params_ and a.best_score_ == b.best_score_
    err = capsys.readouterr().err
    assert "leave-one-out" in err or "refits" in err or "configurations" in err


# =============================================================================================
# 5. property test: random small problems, bound methods against deltafit's brute force
# =============================================================================================
RUNS = {"examples": 0, "kinds": set(), "refits": 0, "decided": 0}


@settings(
    max_examples=20, deadline=None, derandomize=True, suppress_health_check=[HealthCheck.too_slow]
)
@given(
    seed=st.integers(0, 2**31 - 1),
    n=st.integers(20, 60),
    p=st.integers(2, 5),
    logC=st.floats(-2.0, 2.0),
    loss=st.sampled_from(["logistic", "squared_hinge"]),
    family=st.sampled_from(["linear", "rbf", "poly"]),
    fit_intercept=st.booleans(),
    flip=st.floats(0.0, 0.3),
)
def test_bounds_equal_refit_on_random_problems(seed, n, p, logC, loss, family, fit_intercept, flip):
    RUNS["examples"] += 1
    RUNS["kinds"].add((loss, family))
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, p)) * rng.choice([0.3, 1.0, 3.0])
    f = X @ rng.normal(size=p) + 0.5 * rng.normal()
    y = np.where((f > 0) ^ (rng.random(n) < flip), 1, -1)
    if min(np.sum(y == 1), np.sum(y == -1)) < 2:  # every left-out fit needs both classes
        y[:2], y[2:4] = 1, -1
    common = dict(
        loss=loss,
        C=float(10.0**logC),
        fit_intercept=fit_intercept,
        intercept_scaling=float(rng.choice([0.5, 1.0, 2.0])),
    )
    if family == "linear":
        est = df.LinearClassifier(**common)
    else:
        est = df.KernelClassifier(
            kernel=family, gamma=float(rng.choice([0.1, 0.5])), degree=2, coef0=1.0, **common
        )
    ref = loo(est, X, y, method="refit")
    z = ref.decision
    scale = np.maximum(1.0, np.abs(z))
    clear = np.abs(z) > 1e-8 * scale  # labels the solvers' precision cannot flip
    for method in ("bounds", "bounds_early"):
        res = loo(est, X, y, method=method)
        RUNS["refits"] += res.n_refits
        RUNS["decided"] += int(res.decided_by_bound.sum())
        np.testing.assert_array_equal(res.y_pred[clear], ref.y_pred[clear])
        assert np.all(res.lower <= z + BOX_TOL * scale), method
        assert np.all(z <= res.upper + BOX_TOL * scale), method
        assert not np.any(res.decided_by_bound & res.refit)
        assert res.n_refits == int(res.refit.sum())
        known = ~np.isnan(res.decision)
        assert np.all(np.abs(res.decision[known] - z[known]) <= 1e-6 * scale[known])
    # k-fold over the same problem
    cv = KFold(4, shuffle=True, random_state=seed % 1000)
    if all(len(np.unique(y[tr])) == 2 for tr, _ in cv.split(X)):
        ref_cv = cross_validate(est, X, y, cv=cv, method="refit")
        zc = ref_cv.decision
        sc = np.maximum(1.0, np.abs(zc))
        clear = np.abs(zc) > 1e-8 * sc
        for method in ("bounds", "bounds_early"):
            res = cross_validate(est, X, y, cv=cv, method=method)
            np.testing.assert_array_equal(res.y_pred[clear], ref_cv.y_pred[clear])
            assert np.all(res.lower <= zc + BOX_TOL * sc) and np.all(zc <= res.upper + BOX_TOL * sc)


def test_property_examples_ran():
    """Runs after the property test (file order): it ran, over every loss and model family,
    and both the bounds and the refits had work to do."""
    if RUNS["examples"] == 0:
        pytest.skip("run together with test_bounds_equal_refit_on_random_problems")
    assert RUNS["examples"] >= 20
    assert {loss for loss, _ in RUNS["kinds"]} == {"logistic", "squared_hinge"}
    assert {fam for _, fam in RUNS["kinds"]} == {"linear", "rbf", "poly"}
    assert RUNS["refits"] > 0 and RUNS["decided"] > 0


# =============================================================================================
# an unfitted feature map: fitted once on all of X and shared by every method
# =============================================================================================
@pytest.mark.parametrize(
    "loss,method", [("logistic", "auto"), ("logistic", "bounds"), ("squared", "closed_form")]
)
def test_unfitted_feature_map_is_shared_by_every_method(dg, loss, method):
    """Regression test.  An unfitted Nystroem map used to be fitted once on all rows by the
    fast methods but refit on each split's rows by method='refit' (3-4 of 60 labels differed).
    Every method now uses the map fitted once on all of X (``fitted_feature_map``): fast and
    brute force agree, and both equal the twin on that map's features."""
    X, y = dg[0][:60], dg[1][:60]
    nys = Nystroem(gamma=0.02, n_components=20, random_state=0)
    est = df.LinearClassifier(loss=loss, C=1.0, tol=1e-12, feature_map=nys)
    brute = loo(est, X, y, method="refit")
    fast = loo(est, X, y, method=method)
    np.testing.assert_array_equal(fast.y_pred, brute.y_pred)
    shared = clone(est).set_params(feature_map=clone(nys).fit(X))
    ref = brute_loo(shared, X, y)
    assert np.min(np.abs(ref)) > LABEL_GAP
    np.testing.assert_array_equal(brute.y_pred, labels_of(ref, np.unique(y)))
    with pytest.raises(NotFittedError):
        check_is_fitted(est.get_params()["feature_map"])
