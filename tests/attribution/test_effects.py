"""loo_effects against brute force: fresh deltafit fits without each sample, and scikit-learn's
Ridge on the same features (real data: breast cancer, digits)."""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from sklearn.linear_model import Ridge

import deltafit
from deltafit.attribution import loo_effects
from hypothesis_profiles import examples

ATOL = 1e-7  # every model here is solved to a gradient norm of 1e-10 or the closed form


def _decision(m, X):
    return m.decision_function(X) if hasattr(m, "decision_function") else m.predict(X)


def brute(make, X, y, Xq, ids, sample_weight=None):
    full = make().fit(X, y, sample_weight=sample_weight)
    f = _decision(full, Xq)
    out = []
    for i in ids:
        keep = np.arange(len(X)) != i
        w = None if sample_weight is None else sample_weight[keep]
        out.append(_decision(make().fit(X[keep], y[keep], sample_weight=w), Xq) - f)
    return np.array(out)


MODELS = {
    "logistic": lambda: deltafit.LinearClassifier(loss="logistic", C=0.5),
    "squared_hinge": lambda: deltafit.LinearClassifier(loss="squared_hinge", C=0.5),
    "squared": lambda: deltafit.LinearClassifier(loss="squared", C=0.5),
    "hinge": lambda: deltafit.LinearClassifier(loss="hinge", C=0.5),
    "kernel_squared": lambda: deltafit.KernelClassifier(loss="squared", C=1.0, gamma=0.05),
    "kernel_logistic": lambda: deltafit.KernelClassifier(loss="logistic", C=1.0, gamma=0.05),
    "regressor": lambda: deltafit.LinearRegressor(C=0.5),
    "kernel_regressor": lambda: deltafit.KernelRegressor(C=1.0, gamma=0.05),
}


@pytest.mark.parametrize("name", sorted(MODELS))
def test_equal_to_fresh_fits_breast_cancer(name, cancer):
    X, y = cancer
    Xtr, Xq = X[:90], X[400:440]
    ytr = y[:90] if "regressor" not in name else X[:90, 1] * 2.0 + y[:90]
    make = MODELS[name]
    m = make().fit(Xtr, ytr)
    ids = [0, 7, 31, 89]
    E = loo_effects(m, Xq, ids=ids)
    assert E.shape == (4, 40)
    np.testing.assert_allclose(E, brute(make, Xtr, ytr, Xq, ids), atol=ATOL, rtol=0)


def test_multiclass_digits():
    from sklearn.datasets import load_digits

    X, y = load_digits(return_X_y=True)
    X = X / 16.0

    def make():
        return deltafit.LinearClassifier(loss="logistic", C=0.1)

    m = make().fit(X[:250], y[:250])
    ids = [3, 100, 249]
    E = loo_effects(m, X[1000:1030], ids=ids, chunk_size=2)
    assert E.shape == (3, 30, 10)
    np.testing.assert_allclose(E, brute(make, X[:250], y[:250], X[1000:1030], ids), atol=ATOL)


def test_all_effects_equal_sklearn_ridge(cancer):
    """Every n x m effect of the squared loss against scikit-learn's Ridge refits on Φ."""
    X, y = cancer
    X, t, Xq = X[:60], X[:60, 0] + y[:60], X[500:520]
    C = 0.3
    m = deltafit.LinearRegressor(C=C).fit(X, t)
    E = loo_effects(m, Xq)
    F, Fq = m.problem_.features(X), m.problem_.features(Xq)
    full = Ridge(alpha=1 / (2 * C), fit_intercept=False, solver="cholesky").fit(F, t)
    np.testing.assert_allclose(full.predict(Fq), m.predict(Xq), atol=1e-9)
    for i in range(60):
        keep = np.arange(60) != i
        r = Ridge(alpha=1 / (2 * C), fit_intercept=False, solver="cholesky").fit(F[keep], t[keep])
        np.testing.assert_allclose(E[i], r.predict(Fq) - full.predict(Fq), atol=1e-9)


@pytest.mark.parametrize("loss", ["logistic", "squared"])
def test_weighted(loss, cancer):
    X, y = cancer
    w = np.linspace(0.5, 2.0, 70)

    def make():
        return deltafit.LinearClassifier(loss=loss, C=0.5)

    m = make().fit(X[:70], y[:70], sample_weight=w)
    ids = [1, 40]
    np.testing.assert_allclose(
        loo_effects(m, X[300:320], ids=ids),
        brute(make, X[:70], y[:70], X[300:320], ids, w),
        atol=ATOL,
    )


def test_ids_and_chunks_restrict_the_same_numbers(cancer):
    X, y = cancer
    m = deltafit.LinearClassifier(loss="logistic").fit(X[:50], y[:50])
    full = loo_effects(m, X[200:210], chunk_size=7)
    np.testing.assert_allclose(full, loo_effects(m, X[200:210]), atol=1e-10)
    ids = m.sample_ids_[[9, 2, 30]]
    np.testing.assert_allclose(loo_effects(m, X[200:210], ids=ids), full[[9, 2, 30]], atol=1e-10)


def test_bounds_contain_exact(cancer):
    X, y = cancer
    m = deltafit.LinearClassifier(loss="logistic").fit(X[:80], y[:80])
    lo, hi = loo_effects(m, X[300:330], ids=np.arange(20), method="bounds")
    E = loo_effects(m, X[300:330], ids=np.arange(20))
    assert np.all(lo <= E + 1e-9) and np.all(E <= hi + 1e-9)


@settings(max_examples=examples(15), deadline=None)
@given(
    n=st.integers(5, 25),
    p=st.integers(1, 6),
    logC=st.floats(-2, 2),
    seed=st.integers(0, 2**16),
    kernel=st.booleans(),
)
def test_squared_closed_form_is_exact(n, p, logC, seed, kernel):
    rng = np.random.default_rng(seed)
    X, Xq = rng.normal(size=(n, p)), rng.normal(size=(4, p))
    t = rng.normal(size=n)

    def make():
        if kernel:
            return deltafit.KernelRegressor(C=10.0**logC, gamma=0.5)
        return deltafit.LinearRegressor(C=10.0**logC)

    m = make().fit(X, t)
    E = loo_effects(m, Xq)
    B = brute(make, X, t, Xq, range(n))
    np.testing.assert_allclose(E, B, atol=1e-8 * (1 + np.abs(B).max()))
