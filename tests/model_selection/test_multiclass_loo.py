"""Cross-validation of multiclass (one-vs-rest) models: every fast method against explicit
refits on real data (iris, digits), k-fold, the search, TreeCV and ALO.

Tolerances: the closed form equals the refits to 1e-9; bound-based methods decide labels,
which must all be the refits' labels (their exact refits agree to the solver tolerance)."""

import numpy as np
import pytest
from sklearn.base import clone
from sklearn.datasets import load_digits
from sklearn.model_selection import StratifiedKFold
from sklearn.preprocessing import StandardScaler

from deltafit import KernelClassifier, LinearClassifier
from deltafit.model_selection import LOOSearchCV, cross_validate, loo, treecv


@pytest.fixture(scope="module")
def digits():
    X, y = load_digits(return_X_y=True)
    rng = np.random.default_rng(0)
    idx = rng.choice(X.shape[0], 300, replace=False)
    return StandardScaler().fit_transform(X)[idx], y[idx]


def _model(kind, loss, C=0.5):
    if kind == "linear":
        return LinearClassifier(loss=loss, C=C, tol=1e-10)
    return KernelClassifier(loss=loss, C=C, gamma=0.1, tol=1e-10)


def _refits(est, X, y, splits=None):
    """Decision values and labels of explicit refits, split by split."""
    n = X.shape[0]
    splits = splits or [(np.delete(np.arange(n), i), np.array([i])) for i in range(n)]
    dec, lab = [], []
    for tr, te in splits:
        m = clone(est).fit(X[tr], y[tr])
        dec.append(m.decision_function(X[te]))
        lab.append(m.predict(X[te]))
    return np.vstack(dec), np.concatenate(lab)


def _check_bounded(r, dec, lab):
    assert r.decision.shape == dec.shape
    np.testing.assert_array_equal(r.y_pred, lab)
    assert np.all(r.lower <= dec + 1e-7) and np.all(dec <= r.upper + 1e-7)
    done = ~np.isnan(r.decision)
    np.testing.assert_allclose(r.decision[done], dec[done], atol=1e-6)


@pytest.mark.parametrize("kind", ["linear", "kernel"])
def test_closed_form_equals_refits(iris, kind):
    X, y = iris
    est = _model(kind, "squared")
    r = loo(est, X, y)
    assert r.method == "closed_form" and r.decision.shape == (150, 3)
    dec, lab = _refits(est, X, y)
    np.testing.assert_allclose(r.decision, dec, atol=1e-9, rtol=1e-9)
    np.testing.assert_array_equal(r.y_pred, lab)


@pytest.mark.parametrize("kind", ["linear", "kernel"])
@pytest.mark.parametrize(
    "loss,method",
    [
        ("logistic", "bounds"),
        ("logistic", "bounds_early"),
        ("squared_hinge", "bounds_early"),
        ("squared", "bounds"),
        ("hinge", "bounds"),
    ],
)
def test_bound_methods_equal_refits(iris, kind, loss, method):
    X, y = iris
    est = _model(kind, loss)
    r = loo(est, X, y, method=method)
    dec, lab = _refits(est, X, y)
    _check_bounded(r, dec, lab)
    assert r.error_rate == np.mean(lab != y)
    assert r.decided_by_bound.any()
    assert r.n_refits < 150


def test_digits_labels_decided_by_bounds_are_those_of_refits(digits):
    X, y = digits
    est = LinearClassifier(loss="logistic", C=0.02, tol=1e-10)
    r = loo(est, X, y, method="bounds")
    dec, lab = _refits(est, X, y)
    _check_bounded(r, dec, lab)
    assert r.decision.shape == (300, 10)
    assert r.decided_share > 0.5
    # a refit computes the candidate classes only: the others keep their bounds
    refit = r.refit & ~r.decided_by_bound
    assert np.isnan(r.decision[refit]).any()


def test_raw_digits_default_loo_equals_refits():
    """Unscaled pixels (0..16): many labels need refits, whose candidate classes come from the
    balls alone (issue 32 row 10); every label and refit decision equals a fresh fit's."""
    X, y = load_digits(return_X_y=True)
    idx = np.random.default_rng(1).choice(X.shape[0], 150, replace=False)
    X, y = X[idx].astype(float), y[idx]
    est = LinearClassifier(loss="logistic", C=0.1, tol=1e-10)
    r = loo(est, X, y)
    assert r.n_refits > 0
    dec, lab = _refits(est, X, y)
    _check_bounded(r, dec, lab)
    assert r.error_rate == np.mean(lab != y)


@pytest.mark.parametrize("method", ["closed_form", "bounds", "bounds_early", "refit"])
def test_k_fold_equals_refits(iris, method):
    X, y = iris
    loss = "squared" if method == "closed_form" else "logistic"
    est = _model("linear", loss)
    splits = list(StratifiedKFold(5, shuffle=True, random_state=0).split(X, y))
    r = cross_validate(est, X, y, cv=splits, method=method)
    dec, lab = _refits(est, X, y, splits)
    _check_bounded(r, dec, lab)
    expect = [np.mean(lab[r.fold == k] == y[r.test_index][r.fold == k]) for k in range(5)]
    np.testing.assert_allclose(r.fold_scores, expect, rtol=0, atol=0)


def test_refit_method_keeps_every_class_column(iris):
    X, y = iris
    est = _model("linear", "logistic")
    r = loo(est, X, y, method="refit")
    dec, lab = _refits(est, X, y)
    np.testing.assert_allclose(r.decision, dec, atol=1e-12)
    np.testing.assert_array_equal(r.y_pred, lab)


def test_search_equals_exhaustive_refits(iris):
    X, y = iris
    grid = {"C": [0.01, 0.1, 1.0]}
    est = _model("linear", "logistic")
    s = LOOSearchCV(est, grid, prune=False).fit(X, y)
    scores = [np.mean(_refits(clone(est).set_params(C=C), X, y)[1] == y) for C in grid["C"]]
    np.testing.assert_array_equal(s.cv_results_["mean_test_score"], scores)
    assert s.best_params_ == {"C": grid["C"][int(np.argmax(scores))]}
    pruned = LOOSearchCV(est, grid).fit(X, y)
    assert pruned.best_params_ == s.best_params_ and pruned.best_score_ == s.best_score_
    assert pruned.predict(X[:3]).tolist() == s.predict(X[:3]).tolist()


@pytest.mark.parametrize("kind", ["linear", "kernel"])
def test_treecv_equals_k_refits(iris, kind):
    X, y = iris
    est = _model(kind, "logistic" if kind == "linear" else "squared")
    cv = StratifiedKFold(5, shuffle=True, random_state=0)
    r = treecv(est, X, y, cv=cv)
    splits = list(cv.split(X, y))
    expect = [np.mean(clone(est).fit(X[tr], y[tr]).predict(X[te]) == y[te]) for tr, te in splits]
    np.testing.assert_allclose(r.fold_scores, expect, atol=0)
    assert r.score == np.mean(expect)


def test_alo_is_per_class_and_exact_for_the_squared_loss(iris):
    X, y = iris
    est = _model("kernel", "squared")
    a = loo(est, X, y, method="alo")
    e = loo(est, X, y, method="closed_form")
    assert a.approximate and a.decision.shape == (150, 3)
    np.testing.assert_allclose(a.decision, e.decision, atol=1e-8)
    np.testing.assert_array_equal(a.y_pred, e.y_pred)


def test_treecv_training_sets_missing_a_class_keep_it_declared(iris):
    X, y = iris  # sorted by class: unshuffled folds lack classes
    from sklearn.model_selection import KFold

    est = _model("linear", "squared")
    cv = KFold(3)
    r = treecv(est, X, y, cv=cv)
    expect = [
        np.mean(clone(est).partial_fit(X[tr], y[tr], classes=np.unique(y)).predict(X[te]) == y[te])
        for tr, te in cv.split(X, y)
    ]
    np.testing.assert_allclose(r.fold_scores, expect, atol=0)
