"""Leave-one-out and cross-validation of models fitted with sample weights (issue 15, part 3).

Sample t's left-out model is the weighted fit on the other samples with their weights.  Every
method is checked against explicit weighted refits (breast cancer standardised, iris for three
classes; random positive weights with some zeros): the closed form (weighted leverage
``h_t = w_t Φ_tᵀ(ΦᵀWΦ + ρI)⁻¹Φ_t``) and the refits to solver precision, the labels decided by
the bounds all correct, ``LOOSearchCV.fit(X, y, sample_weight=w)`` picks the configuration of
scikit-learn's ``GridSearchCV(..., cv=LeaveOneOut()).fit(X, y, sample_weight=w)``.
"""

from __future__ import annotations

import numpy as np
import pytest
from sklearn.datasets import load_breast_cancer, load_iris
from sklearn.model_selection import GridSearchCV, KFold, LeaveOneOut
from sklearn.preprocessing import StandardScaler

from deltafit import KernelClassifier, KernelRegressor, LinearClassifier, LinearRegressor
from deltafit.losses import get_loss
from deltafit.model_selection import LOOSearchCV, cross_validate, loo
from deltafit.model_selection._closed_form import closed_form_predictions
from deltafit.model_selection._problem import TrainingProblem


@pytest.fixture(scope="module")
def data():
    X, y = load_breast_cancer(return_X_y=True)
    X = StandardScaler().fit_transform(X)
    idx = np.random.default_rng(0).permutation(len(y))[:100]
    X, y = X[idx], y[idx]
    rng = np.random.default_rng(1)
    w = rng.uniform(0.2, 3.0, len(y))
    w[rng.choice(len(y), 8, replace=False)] = 0.0
    return X, y, w


def _make(kind, loss, C=0.3):
    if kind == "linear":
        return LinearClassifier(loss=loss, C=C, tol=1e-12)
    return KernelClassifier(loss=loss, C=C, gamma=0.03, tol=1e-12)


def _brute(make, X, y, w):
    """Explicit weighted refits without each sample: decisions (or predictions) and labels."""
    dec, lab = [], []
    for i in range(len(y)):
        keep = np.delete(np.arange(len(y)), i)
        m = make().fit(X[keep], y[keep], sample_weight=w[keep])
        f = (
            m.decision_function(X[i : i + 1])
            if hasattr(m, "decision_function")
            else m.predict(X[i : i + 1])
        )
        dec.append(f[0])
        lab.append(m.predict(X[i : i + 1])[0])
    return np.array(dec), np.array(lab)


@pytest.mark.parametrize("kind", ["linear", "kernel"])
@pytest.mark.parametrize("loss", ["logistic", "squared_hinge", "hinge"])
def test_weighted_loo_every_method_equals_weighted_refits(data, kind, loss):
    X, y, w = data
    dec, lab = _brute(lambda: _make(kind, loss), X, y, w)
    methods = ["bounds", "refit"] if loss == "hinge" else ["bounds", "bounds_early", "refit"]
    for method in methods:
        r = loo(_make(kind, loss), X, y, method=method, sample_weight=w)
        np.testing.assert_array_equal(r.y_pred, lab, err_msg=method)
        ex = ~np.isnan(r.decision) & (r.refit | (method == "refit"))
        tol = 1e-6 if loss == "hinge" else 1e-8
        np.testing.assert_allclose(r.decision[ex], dec[ex], rtol=tol, atol=tol, err_msg=method)
        slack = 1e-7 * (1 + np.abs(dec))
        assert np.all(r.lower <= dec + slack) and np.all(dec <= r.upper + slack), method
        if method != "refit":
            assert r.decided_by_bound.any()
            assert r.n_refits < len(y)


def test_weighted_loo_zero_weight_samples_are_decided_by_the_model(data):
    X, y, w = data
    r = loo(_make("linear", "logistic"), X, y, method="bounds", sample_weight=w)
    zero = w == 0.0
    full = _make("linear", "logistic").fit(X, y, sample_weight=w)
    # removing a weight-0 sample leaves the model: its ball is a point (up to rounding)
    assert np.all(r.decided_by_bound[zero] | r.refit[zero])
    np.testing.assert_allclose(
        0.5 * (r.lower + r.upper)[zero], full.decision_function(X[zero]), atol=1e-8
    )


def test_unit_weights_are_the_unweighted_loo(data):
    X, y, _ = data
    a = loo(_make("linear", "logistic"), X, y, method="bounds_early")
    b = loo(_make("linear", "logistic"), X, y, method="bounds_early", sample_weight=np.ones(len(y)))
    np.testing.assert_array_equal(a.y_pred, b.y_pred)
    np.testing.assert_array_equal(a.lower, b.lower)


# ----------------------------------------------------------------------- the closed form
@pytest.mark.parametrize("form", ["primal", "kernel", "wide"])
def test_weighted_closed_form_equals_weighted_ridge_refits(form):
    """The weighted leverage formula on raw arrays (no weighted squared model needed)."""
    rng = np.random.default_rng(4)
    n, p = (40, 6) if form != "wide" else (15, 40)
    Phi = rng.normal(size=(n, p))
    t = Phi[:, 0] - Phi[:, 1] + 0.3 * rng.normal(size=n)
    w = rng.uniform(0.1, 3.0, n)
    w[[2, 9]] = 0.0
    C = 0.8
    rho = 1 / (2 * C)

    def ridge(keep):
        A = (Phi[keep].T * w[keep]) @ Phi[keep] + rho * np.eye(p)
        return np.linalg.solve(A, Phi[keep].T @ (w[keep] * t[keep]))

    beta = ridge(np.arange(n))
    if form == "kernel":
        alpha = np.linalg.lstsq(Phi.T, beta, rcond=None)[0]
        prob = TrainingProblem(None, Phi @ Phi.T, t, get_loss("squared"), C, alpha, 1e-12, 100, w=w)
    else:
        prob = TrainingProblem(Phi, None, t, get_loss("squared"), C, beta, 1e-12, 100, w=w)
    z = closed_form_predictions(prob, None)[0]
    ref = np.array([Phi[i] @ ridge(np.delete(np.arange(n), i)) for i in range(n)])
    np.testing.assert_allclose(z, ref, rtol=1e-9, atol=1e-9)
    assert z[2] == pytest.approx(Phi[2] @ beta, abs=1e-9)  # weight 0: the model's prediction
    folds = [np.arange(0, n, 3), np.arange(1, n, 3)]
    got = closed_form_predictions(prob, [(R, R) for R in folds])
    for R, zR in zip(folds, got):
        np.testing.assert_allclose(
            zR, Phi[R] @ ridge(np.setdiff1d(np.arange(n), R)), rtol=1e-9, atol=1e-9
        )
    # several target columns share the hat matrix
    T2 = np.column_stack([t, -2 * t])
    z2 = closed_form_predictions(prob, None, T2)[0]
    np.testing.assert_allclose(z2[:, 1], -2 * z, rtol=1e-9, atol=1e-9)


@pytest.mark.parametrize("kind", ["linear", "kernel"])
def test_weighted_closed_form_loo_of_models(data, kind):
    X, y, w = data
    t = X[:, 0] - 0.5 * X[:, 3]
    make = (
        (lambda: LinearRegressor(C=0.5))
        if kind == "linear"
        else (lambda: KernelRegressor(C=0.5, gamma=0.03))
    )
    dec, _ = _brute(make, X, t, w)
    for method in ("closed_form", "alo"):
        r = loo(make(), X, t, method=method, sample_weight=w)
        np.testing.assert_allclose(r.decision, dec, rtol=1e-8, atol=1e-8)
    clf = (
        (lambda: LinearClassifier(C=0.5))
        if kind == "linear"
        else (lambda: KernelClassifier(C=0.5, gamma=0.03))
    )
    _, lab = _brute(clf, X, y, w)
    np.testing.assert_array_equal(loo(clf(), X, y, sample_weight=w).y_pred, lab)


# ----------------------------------------------------------------------------- multiclass
@pytest.mark.parametrize("loss", ["logistic", "squared_hinge"])
def test_weighted_multiclass_loo(loss):
    X, y = load_iris(return_X_y=True)
    X = StandardScaler().fit_transform(X)
    rng = np.random.default_rng(5)
    idx = rng.permutation(len(y))[:90]
    X, y = X[idx], y[idx]
    w = rng.uniform(0.2, 3.0, len(y))
    w[::11] = 0.0
    make = lambda: LinearClassifier(loss=loss, C=0.5, tol=1e-12)  # noqa: E731
    _, lab = _brute(make, X, y, w)
    for method in ("bounds", "bounds_early"):
        r = loo(make(), X, y, method=method, sample_weight=w)
        np.testing.assert_array_equal(r.y_pred, lab, err_msg=method)
        assert r.decided_by_bound.any()


# ------------------------------------------------------------------- k-fold and the search
def test_weighted_cross_validate_equals_weighted_refits(data):
    X, y, w = data
    splits = list(KFold(5, shuffle=True, random_state=0).split(X))
    ref = np.empty(len(y), dtype=y.dtype)
    for tr, te in splits:
        ref[te] = _make("linear", "logistic").fit(X[tr], y[tr], sample_weight=w[tr]).predict(X[te])
    for method in ("bounds", "bounds_early", "refit"):
        r = cross_validate(
            _make("linear", "logistic"), X, y, cv=splits, method=method, sample_weight=w
        )
        np.testing.assert_array_equal(r.y_pred, ref[r.test_index], err_msg=method)


def test_weighted_search_picks_the_grid_search_choice(data):
    """scikit-learn (≥ 1.9) also passes the weights to the scorer; a leave-one-out fold holds
    one sample, so with positive weights its weighted accuracy is the plain one."""
    X, y, w = data
    w = np.where(w > 0, w, 0.5)
    grid = {"C": [0.003, 0.03, 0.3, 3.0]}
    est = LinearClassifier(loss="logistic", tol=1e-12)
    ours = LOOSearchCV(est, grid, prune=False).fit(X, y, sample_weight=w)
    ref = GridSearchCV(est, grid, cv=LeaveOneOut()).fit(X, y, sample_weight=w)
    assert ours.best_params_ == ref.best_params_
    assert LOOSearchCV(est, grid).fit(X, y, sample_weight=w).best_params_ == ref.best_params_
    np.testing.assert_allclose(
        ours.cv_results_["mean_test_score"], ref.cv_results_["mean_test_score"], atol=1e-12
    )
    np.testing.assert_allclose(
        ours.best_estimator_.decision_function(X),
        ref.best_estimator_.decision_function(X),
        rtol=1e-8,
        atol=1e-8,
    )
    # the weights matter: the unweighted search scores differ somewhere
    plain = LOOSearchCV(est, grid, prune=False).fit(X, y)
    assert not np.array_equal(
        plain.cv_results_["mean_test_score"], ours.cv_results_["mean_test_score"]
    )


def test_bad_weights_are_refused(data):
    X, y, _ = data
    with pytest.raises(ValueError, match="shape"):
        loo(_make("linear", "logistic"), X, y, sample_weight=np.ones(3))
    with pytest.raises(ValueError, match="negative"):
        cross_validate(_make("linear", "logistic"), X, y, sample_weight=-np.ones(len(y)))


# ---------------------------------------------------------------------------------- ALO
def test_weighted_alo(data):
    X, y, w = data
    lin = loo(_make("linear", "logistic"), X, y, method="alo", sample_weight=w)
    ker = loo(
        KernelClassifier(loss="logistic", C=0.3, kernel="linear", tol=1e-12),
        X,
        y,
        method="alo",
        sample_weight=w,
    )
    np.testing.assert_allclose(ker.decision, lin.decision, rtol=1e-6, atol=1e-6)
    dec, _ = _brute(lambda: _make("linear", "logistic"), X, y, w)
    full = _make("linear", "logistic").fit(X, y, sample_weight=w)
    z = full.decision_function(X)
    # one Newton step from the full model: far closer to the left-out values than the model
    assert np.abs(lin.decision - dec).max() < 0.1 * np.abs(z - dec).max()
    zero = w == 0.0
    np.testing.assert_allclose(lin.decision[zero], z[zero], atol=1e-10)


def test_weighted_hinge_alo_is_refused(data):
    X, y, w = data
    with pytest.raises(ValueError, match="sample weights"):
        loo(_make("linear", "hinge"), X, y, method="alo", sample_weight=w)
