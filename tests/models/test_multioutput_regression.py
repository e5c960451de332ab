"""Regressors with a 2-D ``y``: K outputs solved with one factorisation (K right-hand sides).

Parity with scikit-learn's ``Ridge`` / ``KernelRidge`` on diabetes with three targets to 1e-8,
every update equal to a fresh fit to 1e-9, files round-trip exactly.
"""

import numpy as np
import pytest
from sklearn.datasets import load_diabetes
from sklearn.kernel_ridge import KernelRidge
from sklearn.linear_model import Ridge

import deltafit
from deltafit import KernelRegressor, LinearRegressor


@pytest.fixture(scope="module")
def diabetes3():
    X, y = load_diabetes(return_X_y=True)
    Y = np.c_[y / 100.0, 3 * X[:, 0] + X[:, 1], np.sin(y / 50.0)]
    return X, Y


def _ones(X):
    return np.hstack([X, np.ones((X.shape[0], 1))])


def _rel(a, b):
    return float(np.abs(a - b).max() / max(1.0, np.abs(b).max()))


def test_linear_equals_ridge_with_2d_targets(diabetes3):
    X, Y = diabetes3
    m = LinearRegressor(C=2.0).fit(X, Y)
    ref = Ridge(alpha=0.25, fit_intercept=False, solver="cholesky").fit(_ones(X), Y)
    assert m.predict(X).shape == Y.shape
    assert _rel(m.predict(X), ref.predict(_ones(X))) < 1e-8
    assert m.coef_.shape == (3, 10) and m.intercept_.shape == (3,)
    np.testing.assert_allclose(m.coef_, ref.coef_[:, :-1], rtol=1e-8, atol=1e-10)


def test_kernel_equals_kernel_ridge_with_2d_targets(diabetes3):
    X, Y = diabetes3
    m = KernelRegressor(C=2.0, gamma=1.0, fit_intercept=False).fit(X, Y)
    ref = KernelRidge(alpha=0.25, kernel="rbf", gamma=1.0).fit(X, Y)
    assert _rel(m.predict(X), ref.predict(X)) < 1e-8
    assert m.dual_coef_.shape == (442, 3)
    np.testing.assert_allclose(m.dual_coef_, ref.dual_coef_, rtol=1e-7, atol=1e-9)


@pytest.mark.parametrize(
    "make",
    [
        lambda: LinearRegressor(C=2.0),
        lambda: LinearRegressor(C=2.0, keep_data=False),
        lambda: KernelRegressor(C=2.0, gamma=1.0),
    ],
    ids=["linear", "linear-nodata", "kernel"],
)
def test_updates_equal_a_fresh_fit(diabetes3, make):
    X, Y = diabetes3
    m = make().fit(X[:300], Y[:300])
    nodata = not m.problem_.keeps_rows
    m.add(X[300:400], Y[300:400])
    m.remove([0, 1, 350], **({"X": X[[0, 1, 350]], "y": Y[[0, 1, 350]]} if nodata else {}))
    m.relabel([2], [[1.0, 2.0, 3.0]], **({"X": X[[2]], "y_old": Y[[2]]} if nodata else {}))
    m.update(
        X_add=X[400:],
        y_add=Y[400:],
        remove_ids=[5],
        **({"X_remove": X[[5]], "y_remove": Y[[5]]} if nodata else {}),
    )
    Y2 = Y.copy()
    Y2[2] = [1.0, 2.0, 3.0]
    keep = np.setdiff1d(np.arange(442), [0, 1, 350, 5])
    fresh = make().fit(X[keep], Y2[keep])
    assert _rel(m.predict(X), fresh.predict(X)) < 1e-9


def test_one_output_per_column_equals_single_output_models(diabetes3):
    X, Y = diabetes3
    m = LinearRegressor(C=0.7).fit(X, Y)
    for k in range(3):
        one = LinearRegressor(C=0.7).fit(X, Y[:, k])
        assert _rel(m.predict(X)[:, k], one.predict(X)) < 1e-10


def test_target_shape_is_checked_and_a_failed_update_changes_nothing(diabetes3):
    X, Y = diabetes3
    m = LinearRegressor().fit(X[:100], Y[:100])
    before = m.predict(X).copy()
    with pytest.raises(ValueError, match=r"shape \(n_samples, 3\)"):
        m.add(X[100:102], Y[100:102, :2])
    with pytest.raises(ValueError, match=r"shape \(n_samples, 3\)"):
        m.add(X[100:102], Y[100:102, 0])
    with pytest.raises(ValueError, match="NaN"):
        m.add(X[100:101], [[1.0, np.nan, 0.0]])
    np.testing.assert_array_equal(m.predict(X), before)
    m.add(X[100], Y[100])  # one sample, one row of targets
    assert m.n_samples_ == 101


@pytest.mark.parametrize(
    "make",
    [
        lambda: LinearRegressor(C=2.0),
        lambda: LinearRegressor(C=2.0, keep_data=False),
        lambda: KernelRegressor(C=2.0, gamma=1.0),
    ],
    ids=["linear", "linear-nodata", "kernel"],
)
def test_save_load_round_trip(tmp_path, diabetes3, make):
    X, Y = diabetes3
    m = make().fit(X, Y)
    deltafit.save(m, tmp_path / "m.npz")
    back = deltafit.load(tmp_path / "m.npz")
    np.testing.assert_array_equal(back.predict(X), m.predict(X))
    with np.load(tmp_path / "m.npz") as z:
        arrays = dict(z)
    arrays["state_beta" if "state_beta" in arrays else "state_alpha"] = (
        arrays["state_beta" if "state_beta" in arrays else "state_alpha"] * 1.001
    )
    np.savez(tmp_path / "bad.npz", **arrays)
    with pytest.raises(ValueError, match="corrupt model file"):
        deltafit.load(tmp_path / "bad.npz")


def test_bounds_refuse_multi_output_models(diabetes3):
    X, Y = diabetes3
    m = LinearRegressor().fit(X, Y)
    with pytest.raises(ValueError, match="3 outputs"):
        deltafit.sensitivity(m)
