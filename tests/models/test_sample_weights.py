"""Sample weights: ``C Σ w_i ℓ(y_i, z_i) + ½‖β‖²`` in fit, add and reweight.

Parity with scikit-learn given the same weights on breast cancer (standardised, the intercept
as a regularised constant column): ``Ridge`` to 1e-8, ``LogisticRegression`` (newton-cg) to
1e-6, ``LinearSVC`` (squared hinge, hinge; LIBLINEAR at tol 1e-8) to 1e-5.  Every weighted
update equals a fresh weighted fit: closed forms and the hinge QP to 1e-8, Newton to 1e-6.
"""

import numpy as np
import pytest
from sklearn.datasets import load_breast_cancer, load_iris
from sklearn.linear_model import LogisticRegression, Ridge
from sklearn.preprocessing import StandardScaler
from sklearn.svm import LinearSVC

import deltafit
from deltafit import KernelClassifier, KernelRegressor, LinearClassifier, LinearRegressor

LOSSES = ["squared", "logistic", "squared_hinge", "hinge"]
TOL = {"squared": 1e-8, "hinge": 1e-7, "logistic": 1e-6, "squared_hinge": 1e-6}


@pytest.fixture(scope="module")
def cancer():
    X, y = load_breast_cancer(return_X_y=True)
    X = StandardScaler().fit_transform(X)
    w = np.random.default_rng(0).uniform(0.2, 3.0, len(y))
    return X, y, w


def _ones(X):
    return np.hstack([X, np.ones((X.shape[0], 1))])


def _model(kind, loss, C=0.5):
    if kind == "linear":
        return LinearClassifier(loss=loss, C=C)
    return KernelClassifier(loss=loss, C=C, gamma=0.02)


def _rel(a, b):
    return float(np.abs(a - b).max() / max(1.0, np.abs(b).max()))


# --------------------------------------------------------------- parity with scikit-learn
def test_logistic_equals_logistic_regression(cancer):
    X, y, w = cancer
    m = LinearClassifier(loss="logistic", C=0.5, tol=1e-12).fit(X, y, sample_weight=w)
    ref = LogisticRegression(
        C=0.5, fit_intercept=False, tol=1e-12, solver="newton-cg", max_iter=1000
    ).fit(_ones(X), y, sample_weight=w)
    assert _rel(m.decision_function(X), ref.decision_function(_ones(X))) < 1e-6


@pytest.mark.parametrize("loss", ["squared_hinge", "hinge"])
def test_svm_losses_equal_linear_svc(cancer, loss):
    X, y, w = cancer
    C = 0.05
    m = LinearClassifier(loss=loss, C=C).fit(X, y, sample_weight=w)
    ref = LinearSVC(C=C, loss=loss, fit_intercept=False, dual=True, tol=1e-8, max_iter=200_000).fit(
        _ones(X), y, sample_weight=w
    )
    assert _rel(m.decision_function(X), ref.decision_function(_ones(X))) < 1e-5


def test_squared_equals_ridge(cancer):
    X, y, w = cancer
    t = X[:, 0] - 2 * X[:, 3] + np.sin(X[:, 5])
    m = LinearRegressor(C=0.5).fit(X, t, sample_weight=w)
    ref = Ridge(alpha=1.0, fit_intercept=False, solver="cholesky").fit(_ones(X), t, sample_weight=w)
    assert _rel(m.predict(X), ref.predict(_ones(X))) < 1e-8
    c = LinearClassifier(C=0.5).fit(X, y, sample_weight=w)
    ref = Ridge(alpha=1.0, fit_intercept=False, solver="cholesky").fit(
        _ones(X), np.where(y == 1, 1.0, -1.0), sample_weight=w
    )
    assert _rel(c.decision_function(X), ref.predict(_ones(X))) < 1e-8


@pytest.mark.parametrize("loss", LOSSES)
def test_kernel_with_the_linear_kernel_equals_the_linear_model(cancer, loss):
    X, y, w = cancer
    X, y, w = X[:200], y[:200], w[:200]
    lin = LinearClassifier(loss=loss, C=0.3).fit(X, y, sample_weight=w)
    ker = KernelClassifier(loss=loss, C=0.3, kernel="linear").fit(X, y, sample_weight=w)
    assert _rel(ker.decision_function(X), lin.decision_function(X)) < 1e-6


# ------------------------------------------------------------------- what a weight means
@pytest.mark.parametrize("kind", ["linear", "kernel"])
@pytest.mark.parametrize("loss", LOSSES)
def test_weight_two_is_a_duplicate_and_zero_is_absent(cancer, kind, loss):
    X, y, _ = cancer
    X, y = X[:150], y[:150]
    w = np.ones(150)
    w[:10], w[10:20] = 2.0, 0.0
    m = _model(kind, loss).fit(X, y, sample_weight=w)
    rows = np.r_[np.arange(10), np.arange(20, 150), np.arange(10)]
    dup = _model(kind, loss).fit(X[rows], y[rows])
    assert _rel(m.decision_function(X), dup.decision_function(X)) < TOL[loss]


def test_unit_weights_are_the_unweighted_model(cancer):
    X, y, _ = cancer
    a = LinearClassifier(loss="logistic").fit(X, y)
    b = LinearClassifier(loss="logistic").fit(X, y, sample_weight=np.ones(len(y)))
    np.testing.assert_array_equal(a.decision_function(X), b.decision_function(X))
    assert not b._ledger.weighted
    np.testing.assert_array_equal(b.sample_weight_, 1.0)


# ---------------------------------------------------------------------- update == refit
@pytest.mark.parametrize("kind", ["linear", "kernel"])
@pytest.mark.parametrize("loss", LOSSES)
def test_weighted_updates_equal_a_fresh_weighted_fit(cancer, kind, loss):
    X, y, w = cancer
    X, y, w = X[:260], y[:260].copy(), w[:260].copy()
    m = _model(kind, loss).fit(X[:200], y[:200], sample_weight=w[:200])
    m.add(X[200:230], y[200:230], sample_weight=w[200:230])
    m.reweight([0, 1, 2, 205], [4.0, 0.0, 0.5, 2.5])
    m.remove([3, 4])
    m.relabel([5], [1 - y[5]])
    m.update(
        X_add=X[230:260],
        y_add=y[230:260],
        sample_weight_add=w[230:260],
        remove_ids=[6],
        reweight_ids=[7],
        reweight_weight=[3.0],
    )
    m.add(X[:2], y[:2])  # unweighted additions weigh 1
    ww, yy = w.copy(), y.copy()
    ww[[0, 1, 2, 205, 7]] = [4.0, 0.0, 0.5, 2.5, 3.0]
    yy[5] = 1 - y[5]
    keep = np.setdiff1d(np.arange(260), [3, 4, 6])
    rows = np.r_[keep, [0, 1]]
    wts = np.r_[ww[keep], [1.0, 1.0]]
    fresh = _model(kind, loss).fit(X[rows], yy[rows], sample_weight=wts)
    assert _rel(m.decision_function(X), fresh.decision_function(X)) < TOL[loss]
    np.testing.assert_array_equal(m.sample_weight_, wts)


@pytest.mark.parametrize("kind", ["linear", "kernel"])
def test_weighted_regressors_update_exactly(cancer, kind):
    X, _, w = cancer
    X, w = X[:200], w[:200]
    t = X[:, 0] + 0.3 * X[:, 1]
    make = (
        (lambda: LinearRegressor(C=2.0))
        if kind == "linear"
        else (lambda: KernelRegressor(C=2.0, gamma=0.05))
    )
    m = make().fit(X[:150], t[:150], sample_weight=w[:150])
    m.add(X[150:], t[150:], sample_weight=w[150:])
    m.reweight([0, 160], [0.0, 7.0])
    m.remove([1])
    m.relabel([2], [5.0])
    ww, tt = w.copy(), t.copy()
    ww[[0, 160]] = [0.0, 7.0]
    tt[2] = 5.0
    keep = np.setdiff1d(np.arange(200), [1])
    fresh = make().fit(X[keep], tt[keep], sample_weight=ww[keep])
    assert _rel(m.predict(X), fresh.predict(X)) < 1e-8


def test_keep_data_false_weighted_updates(cancer):
    X, y, w = cancer
    m = LinearClassifier(keep_data=False).fit(X[:300], y[:300], sample_weight=w[:300])
    m.remove(X=X[:3], y=y[:3])
    with pytest.raises(ValueError, match="rows as X"):
        m.reweight([10], [0.25])
    m.reweight([10], [0.25], X=X[[10]])  # the classifier recognises the label from the row
    m.add(X[300:310], y[300:310], sample_weight=w[300:310])
    ww = w.copy()
    ww[10] = 0.25
    rows = np.r_[np.arange(3, 310)]
    fresh = LinearClassifier().fit(X[rows], y[rows], sample_weight=ww[rows])
    assert _rel(m.decision_function(X), fresh.decision_function(X)) < 1e-8


def test_multiclass_weighted_updates():
    X, y = load_iris(return_X_y=True)
    X = StandardScaler().fit_transform(X)
    w = np.random.default_rng(1).uniform(0.5, 2.0, len(y))
    for loss in ("squared", "logistic"):
        m = LinearClassifier(loss=loss).fit(X[:120], y[:120], sample_weight=w[:120])
        m.add(X[120:], y[120:], sample_weight=w[120:])
        m.reweight([0, 60], [3.0, 0.0])
        ww = w.copy()
        ww[[0, 60]] = [3.0, 0.0]
        fresh = LinearClassifier(loss=loss).fit(X, y, sample_weight=ww)
        assert _rel(m.decision_function(X), fresh.decision_function(X)) < TOL[loss]


# ------------------------------------------------------------------------ bad input
@pytest.mark.parametrize(
    "bad, match",
    [
        ([1.0, -1.0, 1.0], "negative"),
        ([1.0, np.nan, 1.0], "NaN"),
        ([1.0, np.inf, 1.0], "NaN"),
        ([1.0, 1.0], "shape"),
        ([[1.0, 1.0, 1.0]], "shape"),
        (["a", "b", "c"], "numeric"),
    ],
)
def test_bad_weights_are_refused_and_change_nothing(cancer, bad, match):
    X, y, _ = cancer
    m = LinearClassifier(loss="logistic").fit(X[:100], y[:100])
    before = m.decision_function(X).copy()
    with pytest.raises(ValueError, match=match):
        m.add(X[100:103], y[100:103], sample_weight=bad)
    with pytest.raises(ValueError, match=match):
        m.reweight([0, 1, 2], bad)
    with pytest.raises(ValueError, match=match):
        LinearClassifier().fit(X[:3], [0, 1, 0], sample_weight=bad)
    np.testing.assert_array_equal(m.decision_function(X), before)
    assert m.n_samples_ == 100
    with pytest.raises(ValueError, match="reweight ids"):
        m.reweight([10_000], [1.0])
    with pytest.raises(ValueError, match="both removed and reweighted"):
        m.update(remove_ids=[4], reweight_ids=[4], reweight_weight=[2.0])
    np.testing.assert_array_equal(m.decision_function(X), before)


# ------------------------------------------------------------------------ persistence
@pytest.mark.parametrize("kind", ["linear", "kernel"])
@pytest.mark.parametrize("loss", LOSSES)
def test_weights_survive_save_and_load(tmp_path, cancer, kind, loss):
    X, y, w = cancer
    m = _model(kind, loss).fit(X[:150], y[:150], sample_weight=w[:150])
    deltafit.save(m, tmp_path / "m.npz")
    back = deltafit.load(tmp_path / "m.npz")
    np.testing.assert_array_equal(back.sample_weight_, m.sample_weight_)
    np.testing.assert_array_equal(back.decision_function(X), m.decision_function(X))
    m.reweight([0], [5.0])
    back.reweight([0], [5.0])
    assert _rel(back.decision_function(X), m.decision_function(X)) < 1e-10


def test_corrupt_weights_are_refused(tmp_path, cancer):
    X, y, w = cancer
    m = LinearClassifier(loss="logistic").fit(X[:100], y[:100], sample_weight=w[:100])
    deltafit.save(m, tmp_path / "m.npz")
    with np.load(tmp_path / "m.npz") as z:
        arrays = dict(z)
    arrays["ledger_w"] = arrays["ledger_w"].copy()
    arrays["ledger_w"][3] = -1.0
    np.savez(tmp_path / "bad.npz", **arrays)
    with pytest.raises(ValueError, match="weights"):
        deltafit.load(tmp_path / "bad.npz")
    arrays["ledger_w"][3] = 9.0  # a valid weight, but not the one the solution was solved with
    np.savez(tmp_path / "other.npz", **arrays)
    with pytest.raises(ValueError, match="does not solve"):
        deltafit.load(tmp_path / "other.npz")
