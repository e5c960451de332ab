"""NORMA (Kivinen, Smola & Williamson 2004) against a literal twin of its update equations."""

import math

import numpy as np
import pytest

from deltafit.datasets import load_breast_cancer, load_digits_even_odd
from deltafit.stream._norma import NORMA, NORMARegressor


def _k(kernel, gamma, x, S):
    """k(s, x) for every row s of S, written out (no deltafit code)."""
    if kernel == "rbf":
        return np.exp(-gamma * ((S - x) ** 2).sum(axis=1))
    return (gamma * (S @ x) + 1.0) ** 3  # poly, degree 3, coef0 1


def twin(
    X,
    y,
    *,
    kernel="rbf",
    gamma,
    lam,
    eta,
    learning_rate,
    budget,
    fit_intercept,
    loss="hinge",
    margin=1.0,
):
    """Kivinen et al. (2004) eqs. (7)-(8), plain lists, truncation by dropping the oldest term.

    Classification: y in {-1, +1}, sigma_t = [y_t f_t(x_t) < margin], alpha_t = eta_t sigma_t y_t.
    Regression: alpha_t = eta_t (y_t - f_t(x_t)).  Only nonzero terms enter the expansion.
    """
    alphas, svs, b = [], [], 0.0
    for t, (x, yt) in enumerate(zip(X, y), start=1):
        eta_t = eta if learning_rate == "constant" else eta / math.sqrt(t)
        f = b
        if svs:
            f += float(np.dot(alphas, _k(kernel, gamma, x, np.array(svs))))
        if loss == "hinge":
            g = yt if yt * f < margin else 0.0
        else:
            g = yt - f
        alphas = [(1.0 - eta_t * lam) * a for a in alphas]
        if g != 0.0:
            if fit_intercept:
                b += eta_t * g
            alphas.append(eta_t * g)
            svs.append(x)
            if len(alphas) > budget:
                alphas.pop(0)
                svs.pop(0)

    def decision(Xt):
        if not svs:
            return np.full(len(Xt), b)
        return np.array(
            [float(np.dot(alphas, _k(kernel, gamma, x, np.array(svs)))) + b for x in Xt]
        )

    return decision, len(svs)


def _cancer(n=250):
    X, y = load_breast_cancer()
    p = np.random.RandomState(0).permutation(len(y))[:n]
    return X[p], y[p]


def _digits(n=300):
    X, y = load_digits_even_odd()
    return X[:n], y[:n]


@pytest.mark.parametrize("data", ["cancer", "digits"])
@pytest.mark.parametrize("learning_rate", ["constant", "invscaling"])
@pytest.mark.parametrize("fit_intercept", [True, False])
@pytest.mark.parametrize("budget", [40, 10_000])
def test_classifier_equals_twin(data, learning_rate, fit_intercept, budget):
    X, y = _cancer() if data == "cancer" else _digits()
    gamma = 0.1 if data == "cancer" else 0.05
    params = dict(
        gamma=gamma,
        lam=1e-3,
        eta=0.5,
        learning_rate=learning_rate,
        budget=budget,
        fit_intercept=fit_intercept,
    )
    m = NORMA(**params).fit(X, y)
    dec, n_sv = twin(X, np.where(y == 1, 1.0, -1.0), **params)
    np.testing.assert_allclose(m.decision_function(X), dec(X), rtol=0, atol=1e-10)
    assert m.n_support_ == n_sv == min(n_sv, budget)
    if budget == 40:
        assert m.n_support_ == 40  # truncation happened
    assert m.n_model_computations_ == 0 and m.n_samples_seen_ == len(y)
    np.testing.assert_array_equal(m.classes_, [0, 1])


def test_classifier_poly_margin_and_renormalisation():
    # decay 1 - eta*lam = 0.5 per step: the global scale crosses 1e-100 after ~330 steps
    X, y = _digits(700)
    params = dict(
        kernel="poly",
        gamma=0.02,
        lam=1.0,
        eta=0.5,
        learning_rate="constant",
        budget=30,
        fit_intercept=True,
        margin=0.5,
    )
    m = NORMA(degree=3, coef0=1.0, **params).fit(X, y)
    dec, _ = twin(X, np.where(y == 1, 1.0, -1.0), **params)
    np.testing.assert_allclose(m.decision_function(X), dec(X), rtol=0, atol=1e-10)
    assert m._scale >= 1e-100


@pytest.mark.parametrize("learning_rate", ["constant", "invscaling"])
@pytest.mark.parametrize("budget", [25, 10_000])
def test_regressor_equals_twin(learning_rate, budget):
    X, y = _cancer(200)
    target = X[:, 0] + 0.5 * np.sin(3 * X[:, 1])  # a real-valued target on real features
    params = dict(
        gamma=0.1, lam=1e-2, eta=0.3, learning_rate=learning_rate, budget=budget, fit_intercept=True
    )
    m = NORMARegressor(**params).fit(X, target)
    dec, n_sv = twin(X, target, loss="squared", **params)
    np.testing.assert_allclose(m.predict(X), dec(X), rtol=0, atol=1e-10)
    assert m.n_support_ == min(n_sv, budget)


def test_pieces_learn_one_fit_and_dicts_agree():
    X, y = _cancer(150)
    a = NORMA(gamma=0.1, budget=30).fit(X, y)
    b = NORMA(gamma=0.1, budget=30)
    for lo, hi in [(0, 7), (7, 60), (60, 150)]:
        b.partial_fit(X[lo:hi], y[lo:hi], classes=[0, 1])
    c, d, e = NORMA(gamma=0.1, budget=30), NORMA(gamma=0.1, budget=30), NORMA(gamma=0.1, budget=30)
    for xi, yi in zip(X, y):
        c.learn_one(xi, yi)
        d.learn_one({j: v for j, v in enumerate(xi)}, yi)
        e.learn_one({f"f{j:02d}": v for j, v in enumerate(xi)}, yi)  # names sort as columns
    ref = a.decision_function(X)
    for m in (b, c, d, e):
        np.testing.assert_allclose(m.decision_function(X), ref, rtol=0, atol=1e-12)
    assert e.predict_one({f"f{j:02d}": v for j, v in enumerate(X[3])}) == a.predict(X[3:4])[0]
    assert c.predict_one(X[5]) == a.predict(X[5:6])[0]
    e.learn_one({"g0": 1.0}, 1)  # a new feature grows the learner (issue 19)
    assert e.n_features_in_ == X.shape[1] + 1
    # refitting starts afresh
    np.testing.assert_allclose(a.fit(X, y).decision_function(X), ref, rtol=0, atol=1e-12)


def test_string_labels_and_regressor_pieces():
    X, y = _cancer(120)
    labels = np.where(y == 1, "benign", "malignant")
    m = NORMA(gamma=0.1).fit(X, labels)
    np.testing.assert_array_equal(m.classes_, ["benign", "malignant"])
    # "malignant" (label 0) is +1 here: decisions are the negated 0/1 model's
    np.testing.assert_allclose(
        m.decision_function(X), -NORMA(gamma=0.1).fit(X, y).decision_function(X), atol=1e-12
    )
    r1 = NORMARegressor(gamma=0.1).fit(X, X[:, 0])
    r2 = NORMARegressor(gamma=0.1).partial_fit(X[:50], X[:50, 0]).partial_fit(X[50:], X[50:, 0])
    r3 = NORMARegressor(gamma=0.1)
    for xi in X:
        r3.learn_one(xi, xi[0])
    np.testing.assert_allclose(r2.predict(X), r1.predict(X), atol=1e-12)
    np.testing.assert_allclose(r3.predict(X), r1.predict(X), atol=1e-12)
    assert r3.predict_one(X[0]) == pytest.approx(r1.predict(X[:1])[0], abs=1e-12)


def test_bounded_memory_on_a_long_stream():
    rng = np.random.RandomState(1)
    X = rng.randn(20_000, 3)
    y = (X[:, 0] * X[:, 1] > 0).astype(int)
    m = NORMA(gamma=0.5, eta=0.2, lam=1e-3, budget=50).partial_fit(X, y)
    assert m.n_support_ == 50
    assert m.support_vectors_.shape == (50, 3) and m.dual_coef_.shape == (50,)
    assert m._sv.shape[0] <= 50 and m._a.shape[0] <= 50
    assert m.n_samples_seen_ == 20_000
    # the newest support point is one of the last samples
    assert any(np.array_equal(m.support_vectors_[-1], x) for x in X[-200:])


def test_prequential_accuracy_breast_cancer():
    X, y = load_breast_cancer()
    p = np.random.RandomState(0).permutation(len(y))
    X, y = X[p], y[p]
    m = NORMA(gamma=0.1, eta=0.5, lam=1e-3, budget=200)
    right = 0
    for xi, yi in zip(X, y):
        if hasattr(m, "classes_"):
            right += m.predict_one(xi) == yi
        m.learn_one(xi, yi)
    assert right / len(y) > 0.9


def _state(m):
    out = {}
    for k, v in m.__dict__.items():
        out[k] = v.copy() if isinstance(v, np.ndarray) else v
    return out


def _same(m, s):
    assert set(m.__dict__) == set(s)
    for k, v in s.items():
        if isinstance(v, np.ndarray):
            np.testing.assert_array_equal(m.__dict__[k], v)
        else:
            assert m.__dict__[k] == v or (v is m.__dict__[k])


def test_bad_input_leaves_the_model_unchanged():
    X, y = _cancer(60)
    m = NORMA(gamma=0.1, budget=20).fit(X, y)
    s = _state(m)
    bad = X[:3].copy()
    bad[1, 2] = np.nan
    with pytest.raises(ValueError, match="NaN"):
        m.partial_fit(bad, y[:3])
    _same(m, s)
    with pytest.raises(ValueError, match="NaN"):
        m.learn_one(bad[1], 1)
    _same(m, s)
    with pytest.raises(ValueError, match="infinity"):
        m.learn_one(np.r_[np.inf, X[0, 1:]], 1)
    _same(m, s)
    with pytest.raises(ValueError, match="features"):
        m.learn_one(X[0, :5], 1)
    _same(m, s)
    with pytest.raises(ValueError, match="features"):
        m.partial_fit(X[:4, :5], y[:4])
    _same(m, s)
    with pytest.raises(ValueError, match="not in classes_"):
        m.learn_one(X[0], 2)
    _same(m, s)
    with pytest.raises(ValueError, match="not in classes_"):
        m.partial_fit(X[:3], [0, 1, 2])
    _same(m, s)
    with pytest.raises(ValueError, match="features"):
        m.decision_function(X[:2, :4])
    with pytest.raises(ValueError, match="binary"):
        NORMA().fit(X[:3], [0, 1, 2])
    with pytest.raises(ValueError, match="one class"):
        NORMA().partial_fit(X[:3], [1, 1, 1])
    r = NORMARegressor().fit(X, X[:, 0])
    s = _state(r)
    with pytest.raises(ValueError, match="NaN"):
        r.learn_one(X[0], np.nan)
    _same(r, s)
    with pytest.raises(ValueError, match="infinity"):
        r.partial_fit(X[:2], [0.0, np.inf])
    _same(r, s)


@pytest.mark.parametrize(
    "params, match",
    [
        (dict(eta=0.0), "eta"),
        (dict(eta=-1), "eta"),
        (dict(lam=-1e-3), "lam"),
        (dict(eta=1.0, lam=1.0), "eta \\* lam"),
        (dict(budget=0), "budget"),
        (dict(budget=2.5), "budget"),
        (dict(learning_rate="optimal"), "learning_rate"),
        (dict(kernel="nope"), "kernel"),
        (dict(gamma=-1.0), "gamma"),
        (dict(fit_intercept="yes"), "fit_intercept"),
        (dict(loss="squared"), "loss"),
        (dict(margin=-1.0), "margin"),
        (dict(eta=np.nan), "eta"),
    ],
)
def test_bad_parameters(params, match):
    X, y = _cancer(20)
    m = NORMA(**params)
    with pytest.raises(ValueError, match=match):
        m.fit(X, y)
    with pytest.raises(ValueError, match=match):
        m.learn_one(X[0], y[0])
    assert not hasattr(m, "_sv") and not hasattr(m, "_pending")


def test_learn_one_waits_for_both_labels():
    X, y = _cancer(40)
    order = np.argsort(y, kind="stable")  # all 0s first, then 1s
    X, y = X[order], y[order]
    m = NORMA(gamma=0.1)
    for xi, yi in zip(X, y):
        m.learn_one(xi, yi)
    ref = NORMA(gamma=0.1).fit(X, y)
    np.testing.assert_allclose(m.decision_function(X), ref.decision_function(X), atol=1e-12)
    n = NORMA()
    n.learn_one(X[0], 0.0)
    with pytest.raises(ValueError, match="NaN"):
        n.learn_one(X[1], np.nan)
    assert len(n._pending) == 1
    with pytest.raises(ValueError, match="NaN"):
        n.learn_one(np.full(X.shape[1], np.nan), 1.0)
    assert len(n._pending) == 1
