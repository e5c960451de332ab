"""The public view of the fitted problem (``model.problem_``) against quantities computed here,
independently, from the estimators' public attributes and scikit-learn's kernels.

Tolerances: values that are the same arithmetic in another order (scores, targets, Gram entries)
to 1e-10 relative; gradients and Hessians, which subtract O(1) terms, to 1e-8 absolute after
scaling by the largest term; the view's solve against numpy's dense solve to 1e-8.
"""

from __future__ import annotations

import numpy as np
import pytest
from scipy.special import expit
from sklearn.datasets import load_breast_cancer, load_diabetes
from sklearn.exceptions import NotFittedError
from sklearn.metrics.pairwise import rbf_kernel
from sklearn.preprocessing import StandardScaler

import deltafit as df
from deltafit.models import FittedProblem, ScoreFunction


@pytest.fixture(scope="module")
def cancer():
    X, y = load_breast_cancer(return_X_y=True)
    X = StandardScaler().fit_transform(X)[:160]
    return X, y[:160]


@pytest.fixture(scope="module")
def diabetes():
    X, y = load_diabetes(return_X_y=True)
    X = StandardScaler().fit_transform(X)[:150]
    return X, (y[:150] - y.mean()) / y.std()


def _d1(loss, t, z):
    """ℓ'(t, z), written out here (not deltafit.losses)."""
    if loss == "squared":
        return 2.0 * (z - t)
    if loss == "logistic":
        return -t * expit(-t * z)
    if loss == "squared_hinge":
        return -2.0 * t * np.maximum(0.0, 1.0 - t * z)
    raise AssertionError(loss)


def _d2(loss, t, z):
    if loss == "squared":
        return np.full_like(z, 2.0)
    if loss == "logistic":
        p = expit(t * z)
        return p * (1.0 - p)
    if loss == "squared_hinge":
        return 2.0 * (1.0 - t * z > 0.0)
    raise AssertionError(loss)


def _targets(model, y):
    return np.where(y == model.classes_[1], 1.0, -1.0) if hasattr(model, "classes_") else y


LINEAR = [
    ("squared", df.LinearClassifier),
    ("logistic", df.LinearClassifier),
    ("squared_hinge", df.LinearClassifier),
    ("squared", df.LinearRegressor),
]


@pytest.mark.parametrize("loss,Est", LINEAR)
@pytest.mark.parametrize("s", [1.0, 0.0])
def test_linear_view_matches_public_attributes(loss, Est, s, cancer, diabetes):
    X, y = cancer if Est is df.LinearClassifier else diabetes
    m = Est(loss=loss, C=0.7, fit_intercept=bool(s), intercept_scaling=s or 1.0).fit(X, y)
    m.remove([3, 5, 8])
    m.add(X[:4] * 0.9, y[:4])
    p = m.problem_
    assert isinstance(p, FittedProblem) and not p.kernel and p.loss.name == loss
    assert p.C == 0.7 and p.n_samples == m.n_samples_ and p.keeps_rows
    ids = m.sample_ids_
    np.testing.assert_array_equal(p.sample_ids, ids)
    np.testing.assert_array_equal(p.ids_of(p.live), ids)
    Xall = np.vstack([X, X[:4] * 0.9])
    yall = np.concatenate([y, y[:4]])
    Xl, tl = Xall[ids], _targets(m, yall[ids])
    Phi = np.hstack([Xl, np.full((len(ids), 1), s)]) if s else Xl
    np.testing.assert_array_equal(p.targets[p.live], tl)
    np.testing.assert_allclose(p.rows[p.live], Phi, rtol=0, atol=0)
    beta = (
        np.concatenate([m.coef_.ravel(), np.atleast_1d(m.intercept_) / s]) if s else m.coef_.ravel()
    )
    np.testing.assert_allclose(p.coef, beta, rtol=1e-12, atol=1e-14)
    z = Phi @ beta
    zs, sq = p.scores(p.live)
    np.testing.assert_allclose(zs, z, rtol=1e-10, atol=1e-12)
    np.testing.assert_allclose(sq, np.einsum("ij,ij->i", Phi, Phi), rtol=1e-12)
    np.testing.assert_allclose(
        p.decision(X[:7]),
        m.decision_function(X[:7]) if hasattr(m, "decision_function") else m.predict(X[:7]),
        rtol=1e-12,
        atol=1e-12,
    )
    # the exact gradient and Hessian of J(β) = C Σ ℓ(t, Φβ) + ½‖β‖²
    g = beta + 0.7 * Phi.T @ _d1(loss, tl, z)
    scale = 1.0 + 0.7 * np.abs(Phi).T @ np.abs(_d1(loss, tl, z))
    np.testing.assert_allclose(p.gradient(), g, rtol=0, atol=1e-8 * scale.max())
    assert np.linalg.norm(g) <= p.certified_residual * (1 + 1e-6) + 1e-10
    H = np.eye(Phi.shape[1]) + 0.7 * (Phi.T * _d2(loss, tl, z)) @ Phi
    np.testing.assert_allclose(p.hessian(), H, rtol=1e-10, atol=1e-9)
    v = np.linspace(-1, 1, Phi.shape[1])
    np.testing.assert_allclose(p.solve_hessian(v), np.linalg.solve(H, v), rtol=1e-8, atol=1e-10)
    np.testing.assert_allclose(p.solution_sq_norm(), beta @ beta, rtol=1e-12)


def test_keep_data_false_view_uses_the_statistics(diabetes):
    X, y = diabetes
    m = df.LinearRegressor(C=2.0, keep_data=False).fit(X, y)
    m.remove(X=X[:5], y=y[:5])
    p = m.problem_
    assert not p.keeps_rows and p.rows is None
    Phi = np.hstack([X[5:], np.ones((len(X) - 5, 1))])
    beta = p.coef
    H = np.eye(Phi.shape[1]) + 2.0 * 2.0 * Phi.T @ Phi
    np.testing.assert_allclose(p.hessian(), H, rtol=1e-10)
    g = beta + 2.0 * Phi.T @ (2.0 * (Phi @ beta - y[5:]))
    np.testing.assert_allclose(p.gradient(), g, atol=1e-8 * np.abs(H).max())
    with pytest.raises(ValueError, match="keeps no training rows"):
        p.scores(np.arange(2))
    # found by value, as remove(X=, y=) would
    h = p.find(X[7:9], y[7:9])
    np.testing.assert_array_equal(p.ids_of(h), [7, 8])
    with pytest.raises(ValueError, match="not a training sample"):
        p.find(X[:1], y[:1])
    tracked = p.tracked_inverse()
    M = Phi.T @ Phi + np.eye(Phi.shape[1]) / (2 * 2.0)
    np.testing.assert_allclose(
        tracked(np.ones(Phi.shape[1])), np.linalg.solve(M, np.ones(Phi.shape[1])), rtol=1e-7
    )


@pytest.mark.parametrize("loss", ["squared", "logistic", "squared_hinge", "hinge"])
def test_kernel_view_matches_public_attributes(loss, cancer):
    X, y = cancer
    m = df.KernelClassifier(loss=loss, C=0.5, gamma=0.05).fit(X[:120], y[:120])
    m.remove([0, 7])
    m.add(X[120:130], y[120:130])
    p = m.problem_
    assert p.kernel and p.loss.name == loss and p.C == 0.5
    A = p.live
    np.testing.assert_array_equal(p.ids_of(A), m.sample_ids_)
    Xl = m.X_fit_
    np.testing.assert_array_equal(p.rows[A], Xl)
    K = rbf_kernel(Xl, Xl, gamma=0.05) + 1.0  # intercept_scaling² = 1
    np.testing.assert_allclose(p.gram(A), K, rtol=1e-12, atol=1e-14)
    np.testing.assert_allclose(p.gram_entries(A[:5]), np.diag(K)[:5], rtol=1e-12)
    np.testing.assert_allclose(p.alpha[A], m.dual_coef_, rtol=0, atol=0)
    kfun, kdiag = p.kernel_functions()
    np.testing.assert_allclose(
        kfun(X[:3], Xl[:4]), rbf_kernel(X[:3], Xl[:4], gamma=0.05) + 1.0, rtol=1e-12
    )
    np.testing.assert_allclose(kdiag(X[:3]), 2.0, rtol=1e-12)
    z = K @ m.dual_coef_
    np.testing.assert_allclose(p.scores(A)[0], z, rtol=1e-10, atol=1e-12)
    np.testing.assert_allclose(
        p.decision(X[150:155]), m.decision_function(X[150:155]), rtol=1e-12, atol=1e-12
    )
    np.testing.assert_allclose(p.solution_sq_norm(), m.dual_coef_ @ K @ m.dual_coef_, rtol=1e-10)
    if loss == "hinge":
        assert p.dual is not None
        np.testing.assert_allclose(p.targets[A] * p.dual[A], m.dual_coef_, atol=0)
        return
    assert p.dual is None
    tl = p.targets[A]
    g = m.dual_coef_ + 0.5 * _d1(loss, tl, z)
    np.testing.assert_allclose(p.gradient(), g, atol=1e-8 * (1 + np.abs(z).max()))
    assert np.sqrt(max(g @ K @ g, 0)) <= p.certified_residual * (1 + 1e-6) + 1e-9


def test_kernel_solve_hessian_push_through(cancer):
    """(I + 2C ΦᵀΦ)⁻¹ Σ v_i Φ_i has coefficients ρ (K + ρI)⁻¹ v in the span of the samples."""
    X, y = cancer
    m = df.KernelRegressor(C=1.5, gamma=0.05, fit_intercept=False).fit(X[:80], y[:80] * 1.0)
    p = m.problem_
    K = rbf_kernel(X[:80], X[:80], gamma=0.05)
    rho = 1 / 3.0
    v = np.cos(np.arange(80))
    np.testing.assert_allclose(
        p.solve_hessian(v), rho * np.linalg.solve(K + rho * np.eye(80), v), rtol=1e-8, atol=1e-10
    )
    # the same through explicit features F (F Fᵀ = K): w = (I + 2C FᵀF)⁻¹ Fᵀ v
    lam, Q = np.linalg.eigh(K)
    F = Q * np.sqrt(np.maximum(lam, 0))
    w = np.linalg.solve(np.eye(80) + 3.0 * F.T @ F, F.T @ v)
    np.testing.assert_allclose(F.T @ p.solve_hessian(v), w, atol=1e-8)


def test_view_is_read_only_and_tracks_versions(cancer):
    X, y = cancer
    m = df.LinearClassifier(loss="logistic").fit(X, y)
    p = m.problem_
    for arr in (p.live, p.targets, p.rows, p.coef):
        with pytest.raises(ValueError, match="read-only"):
            arr[0] = 1.0
    assert p.is_current()
    m.remove([1])
    assert not p.is_current() and m.problem_.is_current()
    assert m.problem_.version == p.version + 1
    with pytest.raises(ValueError, match="unknown sample ids"):
        m.problem_.handles([1])
    with pytest.raises(ValueError, match="unknown sample ids"):
        m.problem_.handles_unchecked(np.array([1]))
    with pytest.raises(AttributeError):
        p.alpha
    with pytest.raises(AttributeError):
        p.kernel_params
    assert "LinearClassifier" in repr(p)


def test_view_of_unfitted_and_foreign_models(cancer):
    with pytest.raises(AttributeError, match="set by fit"):
        df.LinearClassifier().problem_
    with pytest.raises(NotFittedError):
        FittedProblem.of(df.KernelRegressor(), "a test")
    from sklearn.linear_model import Ridge

    with pytest.raises(ValueError, match="a test need a fitted deltafit estimator"):
        FittedProblem.of(Ridge(), "a test")


def test_fitted_loss_and_C_survive_set_params(cancer):
    X, y = cancer
    m = df.LinearClassifier(loss="logistic", C=0.3).fit(X, y)
    m.set_params(loss="squared", C=9.0)
    p = m.problem_
    assert p.loss.name == "logistic" and p.C == 0.3
    k = df.KernelClassifier(C=0.2).fit(X[:60], y[:60]).set_params(C=5.0)
    assert k.problem_.C == pytest.approx(0.2, rel=1e-15)


@pytest.mark.parametrize("Est", [df.LinearClassifier, df.KernelClassifier])
def test_score_function_is_a_snapshot(Est, cancer):
    X, y = cancer
    m = Est().fit(X[:100], y[:100])
    f = m.problem_.score_function()
    assert isinstance(f, ScoreFunction)
    before = m.decision_function(X[100:110])
    np.testing.assert_allclose(f(X[100:110]), before, rtol=1e-12, atol=1e-12)
    m.add(X[100:140], y[100:140])
    np.testing.assert_allclose(f(X[100:110]), before, rtol=1e-12, atol=1e-12)


def test_encode_decode_targets(cancer):
    X, y = cancer
    labels = np.where(y == 1, "benign", "malignant")
    m = df.LinearClassifier().fit(X, labels)
    p = m.problem_
    t = p.encode_targets(["benign", "malignant"])
    np.testing.assert_array_equal(t, [-1.0, 1.0])
    np.testing.assert_array_equal(p.decode_targets(np.array([-0.2, 0.3])), ["benign", "malignant"])
    with pytest.raises(ValueError, match="not among the model's classes"):
        p.encode_targets(["other"])


@pytest.mark.parametrize("removed", [0, 7])
def test_hessian_and_scores_on_consecutive_and_scattered_rows(cancer, removed):
    """``hessian()`` (one symmetric rank-k update of ``diag(√w) Φ``) and ``scores`` against
    the plain products, on a fitted model (consecutive rows: read as a view of the store) and
    after removals (scattered rows: copied), with sample weights."""
    X, y = cancer
    w = np.linspace(0.0, 2.0, len(y))  # a weight of 0 too
    m = df.LinearClassifier(loss="logistic", C=0.7).fit(X, y, sample_weight=w)
    if removed:
        m.update(remove_ids=np.arange(3, 3 + 5 * removed, 5))
    p = m.problem_
    live = p.live
    Phi = np.array(p.rows[live])
    z, _ = p.scores(live)
    np.testing.assert_array_equal(z, Phi @ p.coef)
    tl = np.asarray(p.targets[live], dtype=np.float64)
    sw = p.sample_weights(live)
    np.testing.assert_array_equal(sw, w[p.sample_ids])
    H = np.eye(Phi.shape[1]) + (Phi.T * (0.7 * sw * _d2("logistic", tl, z))) @ Phi
    Hp = p.hessian()
    np.testing.assert_array_equal(Hp, Hp.T)
    np.testing.assert_allclose(Hp, H, rtol=1e-12, atol=1e-12 * np.abs(H).max())


def test_the_seam_serves_what_the_dask_cross_validation_reads(breast_cancer):
    """The fitted settings, the feature map, the label encoder and the Dask bookkeeping come
    through ``problem_`` (model_selection's Dask CV reads nothing else of the model)."""
    X, y = breast_cancer
    m = df.LinearClassifier(loss="logistic", C=0.5).fit(X[:120], y[:120])
    p = m.problem_
    assert p.solver_options.C == 0.5 and p.solver_options.loss.name == "logistic"
    m.set_params(C=3.0)  # the fitted problem's settings, not the parameters
    assert m.problem_.solver_options.C == 0.5
    np.testing.assert_array_equal(p.featurizer()(X[:5]), p.features(X[:5]))
    enc = p.label_encoder()
    np.testing.assert_array_equal(enc.decode(p.encode_targets(y[:7])), y[:7])
    assert p.dask_rows is None and p.dask_passes is None
    assert df.LinearRegressor().fit(X[:50], y[:50] * 1.0).problem_.label_encoder() is None
