"""scikit-learn compatibility of the deltafit estimators.

* the full ``parametrize_with_checks`` suite, run once, over every estimator in several
  configurations: the four exact estimators and the stream learners (Pegasos, LSQSGD, NORMA,
  the sliding-window learners and KDR);
* composition with scikit-learn's meta-estimators (Pipeline, GridSearchCV, cross_validate,
  clone, OneVsRestClassifier);
* ``partial_fit`` and ``predict_proba`` conventions.
"""

from __future__ import annotations

import numpy as np
import pytest
from sklearn.base import clone
from sklearn.datasets import load_diabetes, load_digits
from sklearn.exceptions import NotFittedError
from sklearn.kernel_approximation import Nystroem
from sklearn.linear_model import RidgeClassifier
from sklearn.model_selection import GridSearchCV, cross_validate
from sklearn.multiclass import OneVsRestClassifier
from sklearn.pipeline import Pipeline, make_pipeline
from sklearn.preprocessing import StandardScaler
from sklearn.utils.estimator_checks import parametrize_with_checks
from sklearn.utils.validation import check_is_fitted

from deltafit import KernelClassifier, KernelRegressor, LinearClassifier, LinearRegressor
from deltafit.datasets import load_breast_cancer
from deltafit.stream import KDR, LSQSGD, NORMA, NORMARegressor, Pegasos, SlidingWindow

# ---------------------------------------------------------------------------
# scikit-learn's estimator checks: every estimator of the package, in one list
# ---------------------------------------------------------------------------
CHECKED_ESTIMATORS = [
    # the exact estimators
    LinearClassifier(),
    LinearClassifier(loss="logistic"),
    LinearClassifier(loss="squared_hinge"),
    LinearClassifier(loss="hinge"),
    LinearRegressor(),
    LinearRegressor(keep_data=False),
    LinearClassifier(feature_map=Nystroem(n_components=20, random_state=0)),
    KernelClassifier(),
    KernelClassifier(loss="logistic"),
    KernelClassifier(loss="squared_hinge"),
    KernelClassifier(loss="hinge"),
    KernelRegressor(),
    KernelRegressor(kernel="poly", degree=2),
    # online learners
    Pegasos(lam=1e-2),
    LSQSGD(alpha=0.01, radius=100.0),
    NORMA(gamma=0.5, eta=0.5),
    NORMARegressor(gamma=0.1, eta=0.3),
    # sliding-window learners over the exact estimators
    SlidingWindow(KernelClassifier(gamma=0.5), window=30, period=5, initial=10),
    KDR(KernelClassifier(gamma=0.5), window=30, threshold=1.0, initial=10),
    SlidingWindow(KernelRegressor(gamma=0.5), window=30, period=5, initial=10),
]


# the daily run checks one configuration of each class; CI every configuration
DAILY = (0, 5, 8, 11, 13, 14, 15, 16, 17, 18)


def _checks():
    """``parametrize_with_checks(CHECKED_ESTIMATORS)``, the configurations outside ``DAILY``
    marked slow (same cases, same ids)."""
    mark = parametrize_with_checks(CHECKED_ESTIMATORS)
    argnames, cases = mark.args
    daily = [CHECKED_ESTIMATORS[i] for i in DAILY]
    params = []
    for case in cases:
        values, marks = (case.values, list(case.marks)) if hasattr(case, "marks") else (case, [])
        if not any(values[0] is est for est in daily):
            marks.append(pytest.mark.slow)
        params.append(pytest.param(*values, marks=marks))
    return pytest.mark.parametrize(argnames, params, **mark.kwargs)


@_checks()
def test_sklearn_estimator_checks(estimator, check):
    check(estimator)


# ---------------------------------------------------------------------------
# data
# ---------------------------------------------------------------------------
@pytest.fixture(scope="module")
def cancer():
    X, y = load_breast_cancer()
    return X[:200], y[:200]


@pytest.fixture(scope="module")
def diabetes():
    X, y = load_diabetes(return_X_y=True)
    X = StandardScaler().fit_transform(X[:200])
    y = (y[:200] - y[:200].mean()) / y[:200].std()
    return X, y


ALL_FOUR = [
    ("LinearClassifier", lambda: LinearClassifier(C=1.0), "clf"),
    ("LinearRegressor", lambda: LinearRegressor(C=1.0), "reg"),
    ("KernelClassifier", lambda: KernelClassifier(C=1.0, gamma=0.05), "clf"),
    ("KernelRegressor", lambda: KernelRegressor(C=1.0, gamma=0.05), "reg"),
]


def _data(kind, cancer, diabetes):
    return cancer if kind == "clf" else diabetes


# ---------------------------------------------------------------------------
# meta-estimators
# ---------------------------------------------------------------------------
@pytest.mark.parametrize("name,make,kind", ALL_FOUR, ids=[a[0] for a in ALL_FOUR])
def test_pipeline(name, make, kind, cancer, diabetes):
    X, y = _data(kind, cancer, diabetes)
    pipe = make_pipeline(StandardScaler(), make()).fit(X, y)
    Xs = StandardScaler().fit(X).transform(X)
    direct = make().fit(Xs, y)
    np.testing.assert_allclose(pipe.predict(X), direct.predict(Xs), rtol=1e-12, atol=1e-12)
    score = pipe.score(X, y)
    assert score > (0.9 if kind == "clf" else 0.3)
    assert isinstance(pipe, Pipeline)


@pytest.mark.parametrize("name,make,kind", ALL_FOUR, ids=[a[0] for a in ALL_FOUR])
def test_grid_search(name, make, kind, cancer, diabetes):
    X, y = _data(kind, cancer, diabetes)
    grid = {"C": [0.01, 1.0, 100.0]}
    if name.startswith("Kernel"):
        grid["gamma"] = [0.01, 0.1]
    gs = GridSearchCV(make(), grid, cv=3).fit(X, y)
    assert gs.best_params_["C"] in grid["C"]
    assert len(gs.cv_results_["params"]) == np.prod([len(v) for v in grid.values()])
    assert np.all(np.isfinite(gs.cv_results_["mean_test_score"]))
    # the refitted best estimator is an ordinary fit with the best parameters
    ref = clone(make()).set_params(**gs.best_params_).fit(X, y)
    np.testing.assert_allclose(
        gs.best_estimator_.predict(X), ref.predict(X), rtol=1e-10, atol=1e-12
    )


@pytest.mark.parametrize("name,make,kind", ALL_FOUR, ids=[a[0] for a in ALL_FOUR])
def test_cross_validate(name, make, kind, cancer, diabetes):
    X, y = _data(kind, cancer, diabetes)
    res = cross_validate(make(), X, y, cv=4, return_estimator=True)
    assert res["test_score"].shape == (4,)
    assert np.all(np.isfinite(res["test_score"]))
    assert res["test_score"].mean() > (0.85 if kind == "clf" else 0.2)
    for est in res["estimator"]:
        check_is_fitted(est)
        assert est.n_samples_ == 150


@pytest.mark.parametrize("name,make,kind", ALL_FOUR, ids=[a[0] for a in ALL_FOUR])
def test_clone(name, make, kind, cancer, diabetes):
    X, y = _data(kind, cancer, diabetes)
    m = make().set_params(C=3.0).fit(X, y)
    c = clone(m)
    assert c.get_params() == m.get_params()
    assert c is not m
    with pytest.raises(NotFittedError):
        check_is_fitted(c)
    with pytest.raises(NotFittedError):
        c.predict(X)
    with pytest.raises(AttributeError):
        c.sample_ids_
    # the original is untouched and the clone fits to the same model
    c.fit(X, y)
    np.testing.assert_array_equal(c.predict(X), m.predict(X))


def test_clone_keeps_feature_map_unfitted(cancer):
    X, y = cancer
    m = LinearClassifier(feature_map=Nystroem(n_components=20, random_state=0)).fit(X, y)
    c = clone(m)
    assert not hasattr(c, "feature_map_")
    assert c.get_params()["feature_map"].get_params() == m.get_params()["feature_map"].get_params()
    c.fit(X, y)
    np.testing.assert_allclose(c.decision_function(X), m.decision_function(X), rtol=1e-12)


# ---------------------------------------------------------------------------
# multi-class through OneVsRestClassifier
# ---------------------------------------------------------------------------
@pytest.fixture(scope="module")
def digits():
    X, y = load_digits(return_X_y=True)
    return X / 16.0, y


def test_one_vs_rest_digits(digits):
    X, y = digits
    C = 1.0
    ovr = OneVsRestClassifier(LinearClassifier(C=C)).fit(X, y)
    np.testing.assert_array_equal(ovr.classes_, np.arange(10))
    assert len(ovr.estimators_) == 10
    assert ovr.score(X, y) > 0.9
    dec = ovr.decision_function(X)
    assert dec.shape == (X.shape[0], 10)

    # each binary sub-estimator is a deltafit fit on the one-vs-rest labels
    for k, est in enumerate(ovr.estimators_):
        own = LinearClassifier(C=C).fit(X, (y == k).astype(int))
        np.testing.assert_allclose(
            est.decision_function(X), own.decision_function(X), rtol=1e-10, atol=1e-10
        )
        np.testing.assert_allclose(dec[:, k], own.decision_function(X), rtol=1e-10, atol=1e-10)

    # ... and the whole thing is OneVsRest(RidgeClassifier) with the regularised intercept
    # feature appended (ARCHITECTURE.md, "The problem": squared ↔ Ridge(alpha=1/(2C),
    # fit_intercept=False))
    Xs = np.hstack([X, np.ones((X.shape[0], 1))])
    ref = OneVsRestClassifier(
        RidgeClassifier(alpha=1.0 / (2.0 * C), fit_intercept=False, solver="cholesky")
    ).fit(Xs, y)
    np.testing.assert_allclose(dec, ref.decision_function(Xs), rtol=1e-8, atol=1e-8)
    np.testing.assert_array_equal(ovr.predict(X), ref.predict(Xs))


@pytest.mark.parametrize(
    "est",
    [LinearClassifier(), KernelClassifier(), LinearClassifier(loss="logistic")],
    ids=["linear", "kernel", "logistic"],
)
def test_three_classes_directly_equal_one_vs_rest(est, digits):
    # native multiclass (tests/test_multiclass.py) is scikit-learn's OneVsRestClassifier of the
    # binary model, with the same C for every class
    X, y = digits
    mask = y < 3
    X, y = X[mask][:90], y[mask][:90]
    own = clone(est).fit(X, y)
    ovr = OneVsRestClassifier(clone(est)).fit(X, y)
    np.testing.assert_allclose(own.decision_function(X), ovr.decision_function(X), atol=1e-6)
    np.testing.assert_array_equal(own.predict(X), ovr.predict(X))


# ---------------------------------------------------------------------------
# partial_fit
# ---------------------------------------------------------------------------
PARTIAL_FIT_MODELS = [
    LinearClassifier(),
    LinearClassifier(loss="logistic"),
    LinearClassifier(loss="squared_hinge"),
    LinearClassifier(loss="hinge"),
    KernelClassifier(gamma=0.05),
    KernelClassifier(loss="logistic", gamma=0.05),
    KernelClassifier(loss="hinge", gamma=0.05),
]


def _rel_close(a, b, rtol):
    scale = max(np.max(np.abs(b)), 1e-300)
    assert np.max(np.abs(a - b)) <= rtol * scale, np.max(np.abs(a - b)) / scale


@pytest.mark.parametrize(
    "est",
    PARTIAL_FIT_MODELS,
    ids=["lin-sq", "lin-log", "lin-sqh", "lin-h", "ker-sq", "ker-log", "ker-h"],
)
def test_partial_fit_classifier(est, cancer):
    X, y = cancer
    labels = np.where(y == 1, "benign", "malignant")
    m = clone(est)
    m.partial_fit(X[:60], labels[:60], classes=["benign", "malignant"])
    np.testing.assert_array_equal(m.classes_, ["benign", "malignant"])
    fresh = clone(est).fit(X[:60], labels[:60])
    _rel_close(m.decision_function(X), fresh.decision_function(X), 1e-8)
    m.partial_fit(X[60:120], labels[60:120])
    m.partial_fit(X[120:150], labels[120:150], classes=["malignant", "benign"])
    np.testing.assert_array_equal(m.sample_ids_, np.arange(150))
    fresh = clone(est).fit(X[:150], labels[:150])
    rtol = 1e-8 if est.loss == "squared" else 1e-6
    _rel_close(m.decision_function(X), fresh.decision_function(X), rtol)
    np.testing.assert_array_equal(m.predict(X), fresh.predict(X))

    before = m.decision_function(X)
    with pytest.raises(ValueError, match="classes"):
        m.partial_fit(X[150:160], labels[150:160], classes=["benign", "other"])
    with pytest.raises(ValueError, match="classes"):
        m.partial_fit(X[150:160], labels[150:160], classes=[0, 1])
    np.testing.assert_array_equal(m.decision_function(X), before)
    assert m.n_samples_ == 150


@pytest.mark.parametrize(
    "est",
    [LinearRegressor(), LinearRegressor(keep_data=False), KernelRegressor(gamma=0.05)],
    ids=["lin", "lin-nodata", "kernel"],
)
def test_partial_fit_regressor(est, diabetes):
    X, y = diabetes
    m = clone(est).partial_fit(X[:50], y[:50])
    m.partial_fit(X[50:120], y[50:120])
    m.partial_fit(X[120:], y[120:])
    fresh = clone(est).fit(X, y)
    _rel_close(m.predict(X), fresh.predict(X), 1e-8)
    np.testing.assert_array_equal(m.sample_ids_, np.arange(X.shape[0]))


@pytest.mark.parametrize(
    "est",
    [LinearClassifier(), KernelClassifier(gamma=0.05), LinearClassifier(loss="logistic")],
    ids=["lin-sq", "ker-sq", "lin-log"],
)
def test_partial_fit_first_batch_with_one_class(est, cancer):
    """scikit-learn's convention: with classes= the first batches may show a single class."""
    X, y = cancer
    pos, neg = np.flatnonzero(y == 1)[:30], np.flatnonzero(y == 0)[:30]
    with pytest.raises(ValueError, match="one class|two classes"):
        clone(est).fit(X[pos], y[pos])  # a plain fit still needs both classes
    m = clone(est).partial_fit(X[pos], y[pos], classes=[0, 1])
    np.testing.assert_array_equal(m.classes_, [0, 1])
    assert np.all(m.predict(X[pos]) == 1)
    m.partial_fit(X[neg], y[neg])
    both = np.concatenate([pos, neg])
    fresh = clone(est).fit(X[both], y[both])
    _rel_close(
        m.decision_function(X), fresh.decision_function(X), 1e-8 if est.loss == "squared" else 1e-6
    )


# ---------------------------------------------------------------------------
# predict_proba
# ---------------------------------------------------------------------------
@pytest.mark.parametrize("cls", [LinearClassifier, KernelClassifier])
@pytest.mark.parametrize("loss", ["squared", "logistic", "squared_hinge", "hinge"])
def test_predict_proba_only_for_logistic(cls, loss, cancer):
    X, y = cancer
    unfitted = cls(loss=loss)
    assert hasattr(unfitted, "predict_proba") == (loss == "logistic")
    m = cls(loss=loss).fit(X, y)
    assert hasattr(m, "predict_proba") == (loss == "logistic")
    if loss != "logistic":
        with pytest.raises(AttributeError):
            m.predict_proba(X)
        return
    P = m.predict_proba(X)
    assert P.shape == (X.shape[0], 2)
    assert np.all((P >= 0) & (P <= 1))
    np.testing.assert_allclose(P.sum(axis=1), 1.0, rtol=0, atol=1e-12)
    # columns follow classes_, and the larger probability is the predicted class
    np.testing.assert_array_equal(m.classes_[np.argmax(P, axis=1)], m.predict(X))
    if hasattr(m, "predict_log_proba"):
        np.testing.assert_allclose(np.exp(m.predict_log_proba(X)), P, rtol=1e-12)


def test_predict_proba_matches_logistic_regression(cancer):
    from sklearn.linear_model import LogisticRegression

    X, y = cancer
    m = LinearClassifier(loss="logistic", C=0.5).fit(X, y)
    Xs = np.hstack([X, np.ones((X.shape[0], 1))])
    ref = LogisticRegression(C=0.5, fit_intercept=False, tol=1e-12, max_iter=10000).fit(Xs, y)
    np.testing.assert_allclose(m.predict_proba(X), ref.predict_proba(Xs), atol=1e-6)


# ---------------------------------------------------------------------------
# the Newton solvers converge on the estimator checks' tiny data sets
# ---------------------------------------------------------------------------
def _tiny_data(case):
    """The 15 x 4 Gaussian data of ``check_n_features_in_after_fitting`` (labels 0,1,2 -> 0/1
    as scikit-learn enforces for binary-only classifiers) and two random tiny data sets on which
    Newton once stalled at the rounding floor of J."""
    if case == "sklearn-check":
        rng = np.random.RandomState(0)
        X = rng.normal(size=(15, 4))
        y = rng.permutation(np.repeat(np.arange(3), 5))
        return X, np.where(y == 2, 1, y)
    seed, n, d = case
    rng = np.random.RandomState(seed)
    for nn, dd in [(15, 4), (30, 2), (60, 5)]:
        X = rng.normal(size=(nn, dd))
        y = (rng.rand(nn) > 0.5).astype(int)
        y[:2] = [0, 1]
        if (nn, dd) == (n, d):
            return X, y
    raise AssertionError(case)


@pytest.mark.parametrize("case", ["sklearn-check", (5, 60, 5), (29, 15, 4)], ids=str)
@pytest.mark.parametrize(
    "est",
    [
        LinearClassifier(loss="logistic"),
        LinearClassifier(loss="squared_hinge"),
        LinearClassifier(loss="hinge"),
        KernelClassifier(loss="logistic"),
        KernelClassifier(loss="squared_hinge"),
        KernelClassifier(loss="hinge"),
    ],
    ids=["lin-log", "lin-sqh", "lin-h", "ker-log", "ker-sqh", "ker-h"],
)
def test_newton_converges_on_tiny_data(est, case):
    import warnings

    from sklearn.exceptions import ConvergenceWarning

    X, y = _tiny_data(case)
    with warnings.catch_warnings():
        warnings.simplefilter("error", ConvergenceWarning)
        m = clone(est).fit(X, y)
    assert m.n_iter_ < 30, m.n_iter_
