"""FGAL(center="newton"): the pool's scores under one Newton step of the new problem, against
an independent dense Newton step (the push-through form over every sample) and, for the
squared loss — whose Newton step is the minimiser — against exact refits."""

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from sklearn.datasets import load_digits
from sklearn.metrics.pairwise import rbf_kernel

import deltafit as df
from deltafit.active import FGAL, _NewtonCentre, run_active_learning
from hypothesis_profiles import examples


def make(loss="squared_hinge", **kw):
    return df.KernelClassifier(
        **{**dict(loss=loss, kernel="rbf", gamma=0.05, C=1.0, fit_intercept=False), **kw}
    )


def dense_newton(model, X_old, X_add, t_add, X_query, klass=None):
    """``β₁ − H⁻¹ g`` from the definitions: points Z = old ∪ A, coefficients of β₁ (old α,
    A 0) and of g (0, C ℓ'(t_a, z_a)), ``H⁻¹ Φ_Z = Φ_Z (I + D K_ZZ)⁻¹`` (push-through), D the
    curvature ``C ℓ''`` of every sample at β₁ (squared hinge / squared loss)."""
    g = model.gamma

    def dec(X):
        d = model.decision_function(X)
        return d if klass is None else d[:, klass]

    Z = np.vstack([X_old, X_add])
    K = rbf_kernel(Z, Z, gamma=g)
    z = dec(Z)
    t = np.r_[t_old_of(model, X_old, klass), t_add]
    if model.loss == "squared":
        d1, d2 = 2.0 * (z - t), np.full(z.shape, 2.0)
    else:
        d1 = -2.0 * t * np.maximum(0.0, 1.0 - t * z)
        d2 = 2.0 * (1.0 - t * z > 0)
    C = model.C
    n = X_old.shape[0]
    a1 = np.r_[alpha_of(model, klass), np.zeros(len(X_add))]
    gc = np.r_[np.zeros(n), C * d1[n:]]
    coef = a1 - np.linalg.solve(np.eye(len(Z)) + (C * d2)[:, None] * K, gc)
    return rbf_kernel(X_query, Z, gamma=g) @ coef


_TRAIN = {}


def t_old_of(model, X_old, klass):
    y = _TRAIN[id(model)]
    c = model.classes_[1] if klass is None else model.classes_[klass]
    return np.where(y == c, 1.0, -1.0)


def alpha_of(model, klass):
    """β₁'s expansion coefficients over the training rows, from the public decision values:
    solve K α = z (the rows are distinct, K is positive definite)."""
    X = _TRAIN[("X", id(model))]
    z = model.decision_function(X)
    z = z if klass is None else z[:, klass]
    return np.linalg.solve(rbf_kernel(X, X, gamma=model.gamma), z)


def fitted(est, X, y):
    m = est.fit(X, y)
    _TRAIN[id(m)] = np.asarray(y)
    _TRAIN[("X", id(m))] = np.asarray(X)
    return m


@pytest.fixture(scope="module")
def digits10():
    X, y = load_digits(return_X_y=True)
    return X / 16.0, y


@pytest.mark.parametrize("loss", ["squared", "squared_hinge"])
def test_scores_are_the_dense_newton_step(loss, digits):
    X, y = digits
    model = fitted(make(loss), X[:150], y[:150])
    P = X[150:400]
    nc = _NewtonCentre(model, P)
    nc.add(np.arange(0, 7), y[150:157])
    nc.add(np.arange(7, 15), y[157:165])
    ref = dense_newton(model, X[:150], P[:15], np.where(y[150:165] == 1, 1.0, -1.0), P)
    np.testing.assert_allclose(nc.uncertainty(np.arange(250)), np.abs(ref), rtol=1e-6, atol=1e-7)
    if loss == "squared":  # one Newton step is the minimiser: the refit
        refit = make(loss).fit(X[:165], y[:165])
        np.testing.assert_allclose(
            nc.parts[0].scores(np.arange(250)), refit.decision_function(P), rtol=1e-7, atol=1e-8
        )


def test_multiclass_scores_are_each_class_dense_newton_step(digits10):
    X, y = digits10
    model = fitted(make(), X[:120], y[:120])
    P = X[120:300]
    nc = _NewtonCentre(model, P)
    nc.add(np.arange(12), y[120:132])
    for k in (0, 4, 9):
        ref = dense_newton(model, X[:120], P[:12], np.where(y[120:132] == k, 1.0, -1.0), P, klass=k)
        np.testing.assert_allclose(nc.parts[k].scores(np.arange(180)), ref, rtol=1e-6, atol=1e-7)
    refit = make("squared").fit(X[:132], y[:132])
    sq = _NewtonCentre(make("squared").fit(X[:120], y[:120]), P)
    sq.add(np.arange(12), y[120:132])
    np.testing.assert_allclose(
        np.column_stack([p.scores(np.arange(180)) for p in sq.parts]),
        refit.decision_function(P),
        rtol=1e-7,
        atol=1e-8,
    )


@settings(max_examples=examples(20), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    seed=st.integers(0, 10_000),
    n=st.integers(8, 30),
    k=st.integers(1, 8),
    C=st.floats(0.05, 20.0),
    gamma=st.floats(0.05, 2.0),
)
def test_property_squared_newton_point_is_the_refit(seed, n, k, C, gamma):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n + k + 10, 3))
    y = np.r_[0, 1, rng.integers(0, 2, size=n + k + 8)]
    est = df.KernelClassifier(loss="squared", kernel="rbf", gamma=gamma, C=C, fit_intercept=False)
    model = est.fit(X[:n], y[:n])
    P = X[n:]
    nc = _NewtonCentre(model, P)
    nc.add(np.arange(k), y[n : n + k])
    refit = df.KernelClassifier(
        loss="squared", kernel="rbf", gamma=gamma, C=C, fit_intercept=False
    ).fit(X[: n + k], y[: n + k])
    d = refit.decision_function(P)
    np.testing.assert_allclose(
        nc.parts[0].scores(np.arange(len(P))), d, rtol=1e-6, atol=1e-6 * (1 + np.abs(d).max())
    )


def test_fgal_newton_chooses_by_the_dense_newton_step(digits):
    X, y = digits
    Xp, yp = X[:200], y[:200]
    r = run_active_learning(
        FGAL(make(), m=20, p=5, center="newton"),
        Xp,
        yp,
        X[1500:1600],
        y[1500:1600],
        initial=30,
        budget=70,
        random_state=1,
    )
    labeled = list(r.groups[0])
    g = 1
    while len(labeled) < 70:
        model = fitted(make(), Xp[labeled], yp[labeled])
        A = []
        while len(A) < 20:
            rest = np.setdiff1d(np.setdiff1d(np.arange(200), labeled), A)
            s = dense_newton(model, Xp[labeled], Xp[A], np.where(yp[A] == 1, 1.0, -1.0), Xp[rest])
            pick = rest[np.argsort(np.abs(s), kind="stable")[:5]]
            np.testing.assert_array_equal(r.groups[g], pick)
            A.extend(pick.tolist())
            g += 1
        labeled.extend(A)
    assert (
        r.n_model_computations == 3
        and repr(FGAL(make(), center="newton")) == "FGAL(m=100, p=10, center='newton')"
    )


def test_refuses_what_it_cannot_do(digits):
    X, y = digits
    with pytest.raises(ValueError, match="center"):
        run_active_learning(
            FGAL(make(), m=20, p=5, center="gradient"),
            X[:100],
            y[:100],
            X[200:250],
            y[200:250],
            initial=20,
        )
    for est, msg in [
        (df.LinearClassifier(loss="squared_hinge"), "kernel model"),
        (make("hinge"), "twice differentiable"),
    ]:
        with pytest.raises(ValueError, match=msg):
            run_active_learning(
                FGAL(est, m=20, p=5, center="newton"),
                X[:100],
                y[:100],
                X[200:250],
                y[200:250],
                initial=20,
            )
    assert repr(FGAL(make())) == "FGAL(m=100, p=10)"
