"""Kernel models default to ``gamma="scale"`` as :class:`sklearn.svm.SVC` does, resolve it at
``fit`` and keep the resolved value (``gamma_``) through every update, save and load."""

from __future__ import annotations

import numpy as np
import pytest
from sklearn.datasets import load_breast_cancer
from sklearn.model_selection import cross_val_score
from sklearn.pipeline import make_pipeline
from sklearn.preprocessing import StandardScaler
from sklearn.svm import SVC

import deltafit
from deltafit import KernelClassifier, KernelRegressor


@pytest.fixture(scope="module")
def cancer():
    return load_breast_cancer(return_X_y=True)


def test_default_is_scale_and_matches_svc(cancer):
    X, y = cancer
    assert KernelClassifier().gamma == "scale" and KernelRegressor().gamma == "scale"
    m = KernelClassifier(loss="hinge").fit(X, y)
    svc = SVC().fit(X, y)
    assert m.gamma_ == pytest.approx(svc._gamma, rel=1e-15)
    assert KernelClassifier(gamma="auto").fit(X, y).gamma_ == 1.0 / X.shape[1]
    assert KernelClassifier(gamma=None).fit(X, y).gamma_ == 1.0 / X.shape[1]
    assert KernelClassifier(gamma=0.25).fit(X, y).gamma_ == 0.25


def test_defaults_score_like_svc_without_tuning(cancer):
    X, y = cancer
    plain = cross_val_score(KernelClassifier(), X, y, cv=5).mean()
    scaled = cross_val_score(make_pipeline(StandardScaler(), KernelClassifier()), X, y, cv=5).mean()
    assert plain >= 0.9 and scaled >= 0.95
    # the hinge loss is the SVM: the same cross-validated accuracy as SVC()
    hinge = cross_val_score(KernelClassifier(loss="hinge"), X, y, cv=5).mean()
    assert hinge == pytest.approx(cross_val_score(SVC(), X, y, cv=5).mean(), abs=1e-12)


def test_updates_keep_the_fitted_gamma(cancer, tmp_path):
    X, y = cancer
    X = X[:, :5]
    m = KernelClassifier().fit(X[:100], y[:100])
    g = m.gamma_
    m.add(X[100:200] * 3.0, y[100:200])  # the variance of the data changes a lot
    m.remove(np.arange(20))
    assert m.gamma_ == g
    keep = np.concatenate([np.arange(20, 100), np.arange(100, 200)])
    Xk = np.vstack([X[20:100], X[100:200] * 3.0])
    ref = KernelClassifier(gamma=g).fit(Xk, y[keep])
    assert np.abs(m.decision_function(X) - ref.decision_function(X)).max() <= 1e-8 * max(
        1.0, np.abs(ref.decision_function(X)).max()
    )
    deltafit.save(m, tmp_path / "m.npz")
    back = deltafit.load(tmp_path / "m.npz")
    assert back.gamma == "scale" and back.gamma_ == g
    assert np.array_equal(back.decision_function(X), m.decision_function(X))


@pytest.mark.parametrize("bad", ["scales", -1.0, 0.0, [1.0]])
def test_bad_gamma_is_refused(bad, cancer):
    X, y = cancer
    with pytest.raises(ValueError, match="gamma"):
        KernelClassifier(gamma=bad).fit(X, y)


def test_defaults_as_documented_against_scikit_learn():
    """The README's table of defaults: deltafit's values, and scikit-learn's it compares with."""
    from sklearn.kernel_ridge import KernelRidge
    from sklearn.linear_model import LogisticRegression
    from sklearn.svm import LinearSVC

    from deltafit import LinearClassifier

    lin, ker = LinearClassifier().get_params(), KernelClassifier().get_params()
    assert (
        lin["loss"],
        lin["C"],
        lin["fit_intercept"],
        lin["intercept_scaling"],
        lin["tol"],
        lin["max_iter"],
        lin["keep_data"],
    ) == ("squared", 1.0, True, 1.0, 1e-10, 100, True)
    assert (ker["kernel"], ker["gamma"], ker["degree"], ker["coef0"]) == ("rbf", "scale", 3, 1.0)
    svc, lsvc = SVC().get_params(), LinearSVC().get_params()
    assert (svc["kernel"], svc["gamma"], svc["degree"], svc["coef0"], svc["C"]) == (
        "rbf",
        "scale",
        3,
        0.0,
        1.0,
    )
    assert (
        lsvc["loss"],
        lsvc["C"],
        lsvc["fit_intercept"],
        lsvc["intercept_scaling"],
        lsvc["tol"],
    ) == ("squared_hinge", 1.0, True, 1, 1e-4)
    lr = LogisticRegression().get_params()
    assert (lr["C"], lr["tol"], lr["max_iter"]) == (1.0, 1e-4, 100)
    assert KernelRidge().get_params()["coef0"] == 1
