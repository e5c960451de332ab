"""Spheres of :mod:`deltafit.sensitivity` against independent references.

* ``two_ball_bounds`` / ``BallIntersection``: exact extremes of a linear score over the
  intersection of two balls, against a Lagrange-dual reference (``two_ball_reference`` in
  tests/reference.py, no case analysis), never looser than either ball, containing every point
  of the intersection; kernel-form balls against explicit features.
* ``gradient_sphere`` (Okumura et al. Thm 6): every ball built from a Newton iterate and its
  gradient contains the optimum; ``model_gradient_sphere`` of an early-stopped model contains the
  converged one.
* ``CertainSigns``: a solver callback that stops once signs are certified; they equal the signs
  of the fully converged solution.
* ``loo_bounds`` / ``zhang_loo_bounds``: against brute-force leave-one-out refits.
"""

from __future__ import annotations

import warnings

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from sklearn.base import clone
from sklearn.exceptions import ConvergenceWarning
from sklearn.metrics.pairwise import rbf_kernel

import deltafit
from deltafit import KernelClassifier, KernelRegressor, LinearClassifier, LinearRegressor
from deltafit.losses import get_loss
from deltafit.sensitivity import (
    BallIntersection,
    CertainSigns,
    KernelSphere,
    PrimalSphere,
    gradient_sphere,
    loo_bounds,
    model_gradient_sphere,
    two_ball_bounds,
    zhang_loo_bounds,
)
from deltafit.solvers import newton_kernel, newton_primal
from hypothesis_profiles import examples
from reference import kernel_features, two_ball_reference

SETTINGS = dict(
    derandomize=True,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)


# =============================================================================================
# 1. the intersection of two balls
# =============================================================================================
CASES = ("lens", "inside", "tangent_out", "tangent_in", "concentric", "equal", "parallel")


@st.composite
def ball_pairs(draw, case):
    """Two intersecting balls in R^d (2 ≤ d ≤ 8) and score vectors η (rows).

    The cases cover a proper lens, one ball strictly inside the other, externally and
    internally (nearly) tangent balls, concentric and equal balls, and η parallel to m2 − m1.
    """
    d = draw(st.integers(2, 8))
    seed = draw(st.integers(0, 2**32 - 1))
    scale = draw(st.sampled_from([1e-2, 1.0, 30.0]))
    r1 = scale * draw(st.floats(0.05, 3.0))
    r2 = scale * draw(st.floats(0.05, 3.0))
    f = draw(st.floats(0.0, 1.0))
    delta = draw(st.sampled_from([0.0, 1e-12, 1e-8, 1e-4, 1e-2]))
    rng = np.random.default_rng(seed)
    m1 = scale * rng.normal(size=d)
    u = rng.normal(size=d)
    u /= np.linalg.norm(u)
    if case == "lens" or case == "parallel":
        lo_gap, hi_gap = abs(r1 - r2), r1 + r2
        gap = lo_gap + (0.02 + 0.96 * f) * (hi_gap - lo_gap)
    elif case == "inside":
        gap = f * 0.99 * abs(r1 - r2)
    elif case == "tangent_out":
        gap = (r1 + r2) * (1.0 - delta)
    elif case == "tangent_in":
        gap = abs(r1 - r2) * (1.0 + delta)
    elif case == "concentric":
        gap = 0.0
    else:  # equal
        gap, r2 = 0.0, r1
    m2 = m1 + gap * u
    k = draw(st.integers(1, 4))
    eta = rng.normal(size=(k, d)) * draw(st.sampled_from([1e-3, 1.0, 1e3]))
    # always: η along ±(m2 − m1) (the degenerate direction of the closed form), η orthogonal
    # to it, and a zero score vector
    w = rng.normal(size=d)
    w -= (w @ u) * u
    special = np.vstack([u, -u, 2.5 * u, w, np.zeros(d)])
    if case == "parallel":
        eta = np.vstack([eta * 0 + u * rng.normal(size=(k, 1)), special])
    else:
        eta = np.vstack([eta, special])
    return dict(case=case, m1=m1, r1=r1, m2=m2, r2=r2, eta=eta)


def _closed_form(p):
    eta, m1, m2 = p["eta"], p["m1"], p["m2"]
    return two_ball_bounds(
        eta @ m1,
        eta @ m2,
        np.linalg.norm(eta, axis=1),
        p["r1"],
        p["r2"],
        float(np.linalg.norm(m1 - m2)),
    )


def _score_scale(p):
    """Size of the scores of the problem: ‖η‖ (‖m1‖ + ‖m2‖ + r1 + r2)."""
    e = np.linalg.norm(p["eta"], axis=1)
    return e * (np.linalg.norm(p["m1"]) + np.linalg.norm(p["m2"]) + p["r1"] + p["r2"])


def test_two_ball_reference_sanity():
    """The reference on a lens with a known answer: unit discs at (0, 0) and (1.5, 0)."""
    lo, hi, pmin, pmax = two_ball_reference(
        np.array([[1.0, 0.0], [0.0, 1.0]]), np.zeros(2), 1.0, np.array([1.5, 0.0]), 1.0
    )
    h = np.sqrt(1.0 - 0.75**2)
    np.testing.assert_allclose(lo, [0.5, -h], atol=1e-12)
    np.testing.assert_allclose(hi, [1.0, h], atol=1e-12)
    np.testing.assert_allclose(pmin[1], [0.75, -h], atol=1e-9)


@pytest.mark.parametrize("case", CASES)
@settings(max_examples=examples(40), **SETTINGS)
@given(data=st.data())
def test_two_ball_bounds_match_dual_reference(case, data):
    p = data.draw(ball_pairs(case))
    lo, hi = _closed_form(p)
    rlo, rhi, pmin, pmax = two_ball_reference(p["eta"], p["m1"], p["r1"], p["m2"], p["r2"])
    tol = 1e-6 * (_score_scale(p) + 1e-300)
    # the reference is self-certifying: its primal points are feasible and attain its value
    for pts, val in ((pmin, rlo), (pmax, rhi)):
        for q, v, row, t in zip(pts, val, p["eta"], tol):
            assert np.linalg.norm(q - p["m1"]) <= p["r1"] * (1 + 1e-6) + 1e-12
            assert np.linalg.norm(q - p["m2"]) <= p["r2"] * (1 + 1e-6) + 1e-12
            assert abs(row @ q - v) <= t
    assert np.all(np.abs(lo - rlo) <= tol), (p["case"], lo, rlo)
    assert np.all(np.abs(hi - rhi) <= tol), (p["case"], hi, rhi)
    assert np.all(lo <= hi)


@pytest.mark.parametrize("case", CASES)
@settings(max_examples=examples(40), **SETTINGS)
@given(data=st.data())
def test_two_ball_bounds_never_looser_than_one_ball(case, data):
    p = data.draw(ball_pairs(case))
    lo, hi = _closed_form(p)
    eta = p["eta"]
    e = np.linalg.norm(eta, axis=1)
    lo1, hi1 = eta @ p["m1"] - e * p["r1"], eta @ p["m1"] + e * p["r1"]
    lo2, hi2 = eta @ p["m2"] - e * p["r2"], eta @ p["m2"] + e * p["r2"]
    slack = 1e-12 * (_score_scale(p) + 1e-300)
    assert np.all(lo >= np.maximum(lo1, lo2) - slack)
    assert np.all(hi <= np.minimum(hi1, hi2) + slack)


def _points_in_both(p, rng, n=400):
    """Points of the intersection: random points of the smaller ball that fall in the other,
    and convex combinations of the reference's extreme points (the set is convex); only points
    that pass both membership tests as computed are kept."""
    m1, r1, m2, r2 = p["m1"], p["r1"], p["m2"], p["r2"]
    d = m1.shape[0]
    small_m, small_r = (m1, r1) if r1 <= r2 else (m2, r2)
    v = rng.normal(size=(n, d))
    v /= np.linalg.norm(v, axis=1, keepdims=True)
    rad = small_r * rng.uniform(size=(n, 1)) ** (1.0 / d)
    cand = [small_m + rad * v]
    _, _, pmin, pmax = two_ball_reference(p["eta"], m1, r1, m2, r2, n_grid=401)
    ext = np.vstack([pmin, pmax])
    w = rng.dirichlet(np.ones(len(ext)), size=n)
    cand += [ext, w @ ext, 0.5 * (ext[:1] + ext)]
    cand = np.vstack(cand)
    keep = (np.linalg.norm(cand - m1, axis=1) <= r1) & (np.linalg.norm(cand - m2, axis=1) <= r2)
    return cand[keep]


@pytest.mark.parametrize("case", CASES)
@settings(max_examples=examples(20), **SETTINGS)
@given(data=st.data(), seed=st.integers(0, 2**32 - 1))
def test_points_of_the_intersection_score_within_bounds(case, data, seed):
    p = data.draw(ball_pairs(case))
    lo, hi = _closed_form(p)
    pts = _points_in_both(p, np.random.default_rng(seed))
    if case != "tangent_out":  # a single-point intersection may lose its point to rounding
        assert len(pts) > 0
    scores = pts @ p["eta"].T  # (n_points, k)
    slack = 1e-9 * (_score_scale(p) + 1e-300)
    assert np.all(scores >= lo - slack)
    assert np.all(scores <= hi + slack)


@settings(max_examples=examples(100), **SETTINGS)
@given(
    st.integers(2, 8),
    st.integers(0, 2**32 - 1),
    st.floats(0.05, 3.0),
    st.floats(0.05, 3.0),
    st.sampled_from([1e-6, 1e-3, 0.5, 10.0]),
)
def test_disjoint_balls_raise(d, seed, r1, r2, excess):
    rng = np.random.default_rng(seed)
    m1 = rng.normal(size=d)
    u = rng.normal(size=d)
    u /= np.linalg.norm(u)
    m2 = m1 + (r1 + r2) * (1.0 + excess) * u
    eta = rng.normal(size=(3, d))
    gap = float(np.linalg.norm(m1 - m2))
    with pytest.raises(ValueError, match="do not intersect"):
        two_ball_bounds(eta @ m1, eta @ m2, np.linalg.norm(eta, axis=1), r1, r2, gap)
    with pytest.raises(ValueError, match="do not intersect"):
        BallIntersection(PrimalSphere(m1, r1), PrimalSphere(m2, r2))
    with pytest.raises(ValueError, match="do not intersect"):
        PrimalSphere(m1, r1) & PrimalSphere(m2, r2)


@pytest.mark.parametrize("case", CASES)
@settings(max_examples=examples(10), **SETTINGS)
@given(data=st.data())
def test_primal_ball_intersection_matches_two_ball_bounds(case, data):
    p = data.draw(ball_pairs(case))
    """BallIntersection of PrimalSpheres is two_ball_bounds on its scores (both orders)."""
    a, b = PrimalSphere(p["m1"], p["r1"]), PrimalSphere(p["m2"], p["r2"])
    lo, hi = _closed_form(p)
    for inter in (BallIntersection(a, b), a.intersect(b), a & b):
        ilo, ihi = inter.score_bounds(p["eta"])
        np.testing.assert_array_equal(ilo, lo)
        np.testing.assert_array_equal(ihi, hi)
    slo, shi = (b & a).score_bounds(p["eta"])
    # 1e-7: nearly tangent balls lose half the digits (sqrt(r² − t²)) in either order
    tol = 1e-7 * (_score_scale(p) + 1e-300)
    assert np.all(np.abs(slo - lo) <= tol) and np.all(np.abs(shi - hi) <= tol)
    np.testing.assert_array_equal((a & b).tightness(p["eta"]), hi - lo)


def _kernel_ball_pair(rng, kernel, d=4, n1=7, n2=5):
    P1, P2 = rng.normal(size=(n1, d)), rng.normal(size=(n2, d))
    c1, c2 = rng.normal(size=n1), rng.normal(size=n2)
    X = rng.normal(size=(9, d))
    # explicit features of every point involved: F Fᵀ = k on [P1; P2; X]
    allp = np.vstack([P1, P2, X])
    F = kernel_features(kernel(allp, allp))
    F1, F2, FX = F[:n1], F[n1 : n1 + n2], F[n1 + n2 :]
    m1, m2 = F1.T @ c1, F2.T @ c2
    gap = float(np.linalg.norm(m1 - m2))
    return P1, c1, P2, c2, X, m1, m2, FX, gap


@pytest.mark.parametrize("seed", range(6))
@pytest.mark.parametrize("shape", ["lens", "inside", "tangent"])
def test_kernel_ball_intersection_rbf_vs_explicit_features(seed, shape):
    rng = np.random.default_rng(seed)
    kernel = lambda A, B: rbf_kernel(A, B, gamma=0.3) + 1.0  # noqa: E731 (intercept term)
    P1, c1, P2, c2, X, m1, m2, FX, gap = _kernel_ball_pair(rng, kernel)
    if shape == "lens":
        r1, r2 = 0.7 * gap, 0.6 * gap
    elif shape == "inside":
        r1, r2 = 3.0 * gap, 0.5 * gap
    else:
        r1, r2 = 0.3 * gap, 0.7 * gap * (1 + 1e-12)
    k1 = KernelSphere(c1, P1, r1, kernel)
    k2 = KernelSphere(c2, P2, r2, kernel)
    inter = k1 & k2
    assert abs(inter.gap - gap) <= 1e-9 * (1 + gap)
    lo, hi = inter.decision_bounds(X)
    rlo, rhi, _, _ = two_ball_reference(FX, m1, r1, m2, r2)
    scale = np.linalg.norm(FX, axis=1) * (np.linalg.norm(m1) + np.linalg.norm(m2) + r1 + r2)
    assert np.all(np.abs(lo - rlo) <= 1e-7 * scale)
    assert np.all(np.abs(hi - rhi) <= 1e-7 * scale)
    # and against the primal intersection on the explicit features
    plo, phi = (PrimalSphere(m1, r1) & PrimalSphere(m2, r2)).score_bounds(FX)
    assert np.all(np.abs(lo - plo) <= 1e-9 * scale)
    assert np.all(np.abs(hi - phi) <= 1e-9 * scale)
    # single kernel balls against their primal twins
    for ks, m, r in ((k1, m1, r1), (k2, m2, r2)):
        a, b = ks.decision_bounds(X)
        pa, pb = PrimalSphere(m, r).score_bounds(FX)
        assert np.all(np.abs(a - pa) <= 1e-9 * scale) and np.all(np.abs(b - pb) <= 1e-9 * scale)


@pytest.mark.parametrize("seed", range(8))
def test_kernel_ball_intersection_linear_kernel_equals_primal(seed):
    """With k(A, B) = A Bᵀ the kernel form and the primal form are the same computation."""
    rng = np.random.default_rng(seed)
    kernel = lambda A, B: A @ B.T  # noqa: E731
    d = 5
    P1, P2 = rng.normal(size=(6, d)), rng.normal(size=(3, d))
    c1, c2 = rng.normal(size=6), rng.normal(size=3)
    m1, m2 = P1.T @ c1, P2.T @ c2
    gap = float(np.linalg.norm(m1 - m2))
    r1, r2 = rng.uniform(0.4, 1.2) * gap, rng.uniform(0.4, 1.2) * gap
    r2 = max(r2, 1.01 * gap - r1)
    X = rng.normal(size=(10, d))
    k1, k2 = KernelSphere(c1, P1, r1, kernel), KernelSphere(c2, P2, r2, kernel)
    p1, p2 = PrimalSphere(m1, r1), PrimalSphere(m2, r2)
    lo, hi = (k1 & k2).decision_bounds(X)
    plo, phi = (p1 & p2).decision_bounds(X)
    np.testing.assert_allclose(lo, plo, rtol=1e-9, atol=1e-9)
    np.testing.assert_allclose(hi, phi, rtol=1e-9, atol=1e-9)
    rlo, rhi, _, _ = two_ball_reference(X, m1, r1, m2, r2)
    np.testing.assert_allclose(lo, rlo, rtol=1e-7, atol=1e-7)
    np.testing.assert_allclose(hi, rhi, rtol=1e-7, atol=1e-7)
    # scores given as expansions over points (η_i = Σ_j W_ij Φ(q_j)) agree with the primal form
    Q = rng.normal(size=(4, d))
    W = rng.normal(size=(3, 4))
    a, b = (k1 & k2).score_bounds(W, Q)
    pa, pb = (p1 & p2).score_bounds(W @ Q)
    np.testing.assert_allclose(a, pa, rtol=1e-9, atol=1e-9)
    np.testing.assert_allclose(b, pb, rtol=1e-9, atol=1e-9)
    # centre distances in both forms
    beta_c, beta_p = rng.normal(size=4), Q
    assert abs(
        k1.center_distance(beta_c, beta_p) - p1.center_distance(beta_p.T @ beta_c)
    ) <= 1e-9 * (1 + gap)


# =============================================================================================
# 2. the gradient ball (Okumura et al. Thm 6)
# =============================================================================================
def _pm1(y):
    return np.where(np.asarray(y) == 1, 1.0, -1.0)


def _subsample(X, y, n, seed):
    idx = np.random.default_rng(seed).choice(len(X), n, replace=False)
    return X[idx], y[idx]


def _record():
    """A solver callback that keeps a copy of every iterate and its gradient."""
    seen = []

    def callback(iteration, coef, grad_norm, objective, grad):
        seen.append((coef.copy(), grad.copy(), float(grad_norm)))
        return False

    return seen, callback


def _kernel_distance_slack(sphere, coef, points):
    """Rounding of ``center_distance``: it is sqrt(‖β‖² − 2⟨β, m⟩ + ‖m‖²), whose cancellation
    costs sqrt(ε (‖β‖² + ‖m‖²)) when β is close to m."""
    bb = float(coef @ sphere.kernel(points, points) @ coef)
    return 1e-9 + np.sqrt(1e-14 * (bb + sphere.center_sq_norm))


@pytest.mark.parametrize("loss_name", ["logistic", "squared_hinge", "squared"])
def test_gradient_sphere_primal_contains_optimum_at_every_newton_iterate(breast_cancer, loss_name):
    X, y = _subsample(*breast_cancer, 150, seed=1)
    F = np.hstack([X, np.ones((len(X), 1))])
    t = _pm1(y)
    loss = get_loss(loss_name)
    seen, cb = _record()
    res = newton_primal(F, t, loss, 10.0, callback=cb)
    assert res.converged and len(seen) == res.n_iter + 1 >= 2
    opt = res.coef
    radii = []
    for coef, grad, gn in seen:
        sph = gradient_sphere(coef, grad)
        assert isinstance(sph, PrimalSphere)
        np.testing.assert_array_equal(sph.center, coef - 0.5 * grad)
        assert sph.radius == pytest.approx(0.5 * np.linalg.norm(grad), rel=1e-15)
        assert sph.radius == pytest.approx(0.5 * gn, rel=1e-12)
        given = gradient_sphere(coef, grad, grad_norm=gn)
        assert given.radius == 0.5 * gn
        # contains the optimum (the final iterate is within res.grad_norm of it)
        assert sph.center_distance(opt) <= sph.radius + res.grad_norm + 1e-12
        lo, hi = sph.score_bounds(F[:20])
        z = F[:20] @ opt
        slack = np.linalg.norm(F[:20], axis=1) * (res.grad_norm + 1e-12)
        assert np.all(lo <= z + slack) and np.all(z <= hi + slack)
        radii.append(sph.radius)
    assert radii[-1] <= 1e-9 * radii[0]
    assert radii[-1] == pytest.approx(0.5 * res.grad_norm, rel=1e-12)


def _rbf(gamma, s=1.0):
    return (
        lambda A, B: rbf_kernel(A, B, gamma=gamma) + s * s,
        lambda A: np.full(len(A), 1.0 + s * s),
    )


@pytest.mark.parametrize("loss_name", ["logistic", "squared_hinge", "squared"])
def test_gradient_sphere_kernel_contains_optimum_at_every_newton_iterate(digits, loss_name):
    X, y = _subsample(*digits, 120, seed=2)
    t = _pm1(y)
    kfun, kdiag = _rbf(0.02)
    K = kfun(X, X)
    loss = get_loss(loss_name)
    seen, cb = _record()
    res = newton_kernel(K, t, loss, 5.0, callback=cb)
    assert res.converged and len(seen) == res.n_iter + 1 >= 2
    opt = res.coef
    radii = []
    for coef, grad, gn in seen:
        sph = gradient_sphere(coef, grad, points=X, kernel=kfun, grad_norm=gn)
        assert isinstance(sph, KernelSphere)
        np.testing.assert_array_equal(sph.coef, coef - 0.5 * grad)
        assert sph.radius == 0.5 * gn
        computed = gradient_sphere(coef, grad, points=X, kernel=kfun, diagonal=kdiag)
        assert computed.radius == pytest.approx(sph.radius, rel=1e-9, abs=1e-12)
        slack = _kernel_distance_slack(sph, opt, X)
        assert sph.center_distance(opt, X) <= sph.radius + res.grad_norm + slack
        # decision bounds at training points contain the optimum's decision values
        lo, hi = sph.decision_bounds(X[:15])
        z = K[:15] @ opt
        assert np.all(lo <= z + 1e-9) and np.all(z <= hi + 1e-9)
        radii.append(sph.radius)
    assert radii[-1] <= 1e-9 * radii[0]


def test_gradient_sphere_kernel_from_fitted_model(digits):
    """kernel= a fitted kernel model: its kernel (intercept term included) is used."""
    X, y = _subsample(*digits, 80, seed=3)
    model = KernelClassifier(loss="logistic", kernel="rbf", gamma=0.02, C=5.0).fit(X, y)
    kfun, kdiag = _rbf(0.02)
    rng = np.random.default_rng(0)
    a, g = rng.normal(size=80), rng.normal(size=80)
    s_model = gradient_sphere(a, g, points=X, kernel=model)
    s_call = gradient_sphere(a, g, points=X, kernel=kfun, diagonal=kdiag)
    assert s_model.radius == pytest.approx(s_call.radius, rel=1e-12)
    Xq = X[:10] + 0.1
    for u, v in zip(s_model.decision_bounds(Xq), s_call.decision_bounds(Xq)):
        np.testing.assert_allclose(u, v, rtol=1e-12, atol=1e-12)


def _quiet_fit(model, X, y):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        return model.fit(X, y)


@pytest.mark.parametrize("loss_name", ["logistic", "squared_hinge"])
def test_model_gradient_sphere_linear_early_stopped(breast_cancer, loss_name):
    X, y = _subsample(*breast_cancer, 200, seed=4)
    Xte = breast_cancer[0][:40]
    early = _quiet_fit(LinearClassifier(loss=loss_name, C=10.0, max_iter=1), X, y)
    full = LinearClassifier(loss=loss_name, C=10.0).fit(X, y)
    sph = model_gradient_sphere(early)
    assert isinstance(sph, PrimalSphere)
    assert sph.radius > 1e-3  # one Newton step is far from converged
    assert sph.radius == pytest.approx(0.5 * early.grad_norm_, rel=1e-9)
    beta_full = np.r_[full.coef_.ravel(), full.intercept_ / full.intercept_scaling]
    assert sph.contains(beta_full, atol=full.grad_norm_ + 1e-12)
    lo, hi = sph.decision_bounds(Xte)
    f = full.decision_function(Xte)
    slack = np.sqrt(np.sum(Xte**2, axis=1) + 1.0) * (full.grad_norm_ + 1e-12)
    assert np.all(lo <= f + slack) and np.all(f <= hi + slack)
    # the converged model's own ball is (nearly) a point
    assert model_gradient_sphere(full).radius <= 1e-8


@pytest.mark.parametrize("loss_name", ["logistic", "squared_hinge"])
def test_model_gradient_sphere_kernel_early_stopped(digits, loss_name):
    X, y = _subsample(*digits, 120, seed=5)
    Xte = digits[0][-30:]
    kw = dict(loss=loss_name, kernel="rbf", gamma=0.02, C=5.0)
    early = _quiet_fit(KernelClassifier(max_iter=1, **kw), X, y)
    full = KernelClassifier(**kw).fit(X, y)
    sph = model_gradient_sphere(early)
    assert isinstance(sph, KernelSphere)
    assert sph.radius > 1e-3
    assert sph.radius == pytest.approx(0.5 * early.grad_norm_, rel=1e-9)
    a, P = full.dual_coef_, full.X_fit_
    assert sph.center_distance(a, P) <= sph.radius + full.grad_norm_ + _kernel_distance_slack(
        sph, a, P
    )
    lo, hi = sph.decision_bounds(Xte)
    f = full.decision_function(Xte)
    slack = np.sqrt(2.0) * (full.grad_norm_ + 1e-12)
    assert np.all(lo <= f + slack) and np.all(f <= hi + slack)


def test_model_gradient_sphere_closed_form_is_a_point(breast_cancer):
    X, y = _subsample(*breast_cancer, 100, seed=6)
    for m in (
        LinearRegressor(C=3.0).fit(X[:, 1:], X[:, 0]),
        KernelRegressor(kernel="rbf", gamma=0.1, C=3.0).fit(X, X[:, 0]),
    ):
        assert model_gradient_sphere(m).radius <= 1e-8


# =============================================================================================
# 3. CertainSigns: stop the solver once the signs are certified
# =============================================================================================
def _split(X, y, n_train, n_test, seed):
    idx = np.random.default_rng(seed).permutation(len(X))
    tr, te = idx[:n_train], idx[n_train : n_train + n_test]
    return X[tr], y[tr], X[te]


def _confident(scores, norms, k=8):
    """The k rows of largest normalised |score|: the squared hinge's finite Newton method
    (Keerthi & DeCoste) jumps from a gradient of order 1 to the exact optimum in one step, so
    only scores with a wide margin can be certified before the last iteration."""
    return np.argsort(-np.abs(scores) / norms)[:k]


@pytest.mark.parametrize("loss_name", ["logistic", "squared_hinge"])
def test_certain_signs_newton_primal(breast_cancer, loss_name):
    Xtr, ytr, Xte = _split(*breast_cancer, 200, 300, seed=7)
    F = np.hstack([Xtr, np.ones((len(Xtr), 1))])
    eta = np.hstack([Xte, np.ones((len(Xte), 1))])
    t, loss = _pm1(ytr), get_loss(loss_name)
    C = 10.0
    full = newton_primal(F, t, loss, C)
    if loss_name == "squared_hinge":
        eta = eta[_confident(eta @ full.coef, np.linalg.norm(eta, axis=1))]
    else:
        eta = eta[:25]
    cs = CertainSigns(eta)
    res = newton_primal(F, t, loss, C, callback=cs)
    assert res.stopped_by_callback and not res.converged
    assert res.n_iter < full.n_iter
    assert cs.n_calls_ == res.n_iter + 1
    assert cs.certain_.all()
    z = eta @ full.coef
    np.testing.assert_array_equal(cs.lo_ > 0, z > 0)
    assert np.all(cs.lo_ <= z + 1e-9) and np.all(z <= cs.hi_ + 1e-9)


@pytest.mark.parametrize("loss_name", ["logistic", "squared_hinge"])
def test_certain_signs_newton_kernel(digits, loss_name):
    Xtr, ytr, Xte = _split(*digits, 150, 300, seed=8)
    kfun, kdiag = _rbf(0.02)
    K = kfun(Xtr, Xtr)
    t, loss = _pm1(ytr), get_loss(loss_name)
    C = 5.0 if loss_name == "logistic" else 1.0
    full = newton_kernel(K, t, loss, C)
    if loss_name == "squared_hinge":
        Xte = Xte[_confident(kfun(Xte, Xtr) @ full.coef, np.sqrt(kdiag(Xte)))]
    else:
        Xte = Xte[:25]
    cross = kfun(Xte, Xtr)
    cs = CertainSigns(cross_kernel=cross, sq_norms=kdiag(Xte))
    res = newton_kernel(K, t, loss, C, callback=cs)
    assert res.stopped_by_callback and not res.converged
    assert res.n_iter < full.n_iter
    assert cs.certain_.all()
    z = cross @ full.coef
    np.testing.assert_array_equal(cs.lo_ > 0, z > 0)
    assert np.all(cs.lo_ <= z + 1e-9) and np.all(z <= cs.hi_ + 1e-9)


def test_certain_signs_as_estimator_callback(breast_cancer):
    X, y = breast_cancer
    idx = np.random.default_rng(9).permutation(len(X))
    tr, te = idx[:450], idx[450:]
    eta = np.hstack([X[te], np.ones((len(te), 1))])  # intercept_scaling = 1
    cs = CertainSigns(eta)
    early = LinearClassifier(loss="logistic", C=1.0, callback=cs)
    with warnings.catch_warnings():
        warnings.simplefilter("error", ConvergenceWarning)  # a callback stop is not a failure
        early.fit(X[tr], y[tr])
    full = LinearClassifier(loss="logistic", C=1.0).fit(X[tr], y[tr])
    assert early.n_iter_ < full.n_iter_
    assert cs.certain_.all()
    certified = np.where(cs.lo_ > 0, full.classes_[1], full.classes_[0])
    np.testing.assert_array_equal(certified, full.predict(X[te]))
    f = full.decision_function(X[te])
    assert np.all(cs.lo_ <= f + 1e-9) and np.all(f <= cs.hi_ + 1e-9)


def test_certain_signs_as_kernel_estimator_callback(digits):
    Xtr, ytr, Xte = _split(*digits, 200, 30, seed=10)
    kfun, kdiag = _rbf(0.02)
    cs = CertainSigns(cross_kernel=kfun(Xte, Xtr), sq_norms=kdiag(Xte))
    kw = dict(loss="logistic", kernel="rbf", gamma=0.02, C=5.0)
    early = KernelClassifier(callback=cs, **kw).fit(Xtr, ytr)
    full = KernelClassifier(**kw).fit(Xtr, ytr)
    assert early.n_iter_ < full.n_iter_ and cs.certain_.all()
    certified = np.where(cs.lo_ > 0, full.classes_[1], full.classes_[0])
    np.testing.assert_array_equal(certified, full.predict(Xte))


# =============================================================================================
# 4. leave-one-out bounds against brute-force refits
# =============================================================================================
def _loo_case(name, breast_cancer, digits):
    if name == "linear_logistic":
        X, y = _subsample(*breast_cancer, 80, seed=11)
        return LinearClassifier(loss="logistic", C=2.0), X, y
    if name == "linear_squared_hinge":
        X, y = _subsample(*breast_cancer, 70, seed=12)
        return LinearClassifier(loss="squared_hinge", C=0.5), X, y
    if name == "kernel_squared_hinge":
        X, y = _subsample(*digits, 90, seed=13)
        return KernelClassifier(loss="squared_hinge", kernel="rbf", gamma=0.02, C=2.0), X, y
    if name == "kernel_logistic":
        X, y = _subsample(*digits, 60, seed=14)
        return KernelClassifier(loss="logistic", kernel="rbf", gamma=0.02, C=4.0), X, y
    if name == "kernel_squared":
        X, y = _subsample(*digits, 100, seed=15)
        return KernelRegressor(kernel="rbf", gamma=0.02, C=3.0), X, y.astype(float) * 3 - 1
    if name == "linear_squared":
        X, _ = _subsample(*breast_cancer, 110, seed=16)
        return LinearRegressor(C=3.0), X[:, 1:], X[:, 0]
    raise AssertionError(name)


LOO_CASES = [
    "linear_logistic",
    "linear_squared_hinge",
    "kernel_squared_hinge",
    "kernel_logistic",
    "kernel_squared",
    "linear_squared",
]


def _score(model, X):
    return model.decision_function(X) if hasattr(model, "classes_") else model.predict(X)


def _brute_loo(model, X, y, C):
    out = np.empty(len(X))
    for i in range(len(X)):
        keep = np.arange(len(X)) != i
        m = clone(model).set_params(C=C).fit(X[keep], y[keep])
        out[i] = _score(m, X[i : i + 1])[0]
    return out


@pytest.mark.parametrize("c_new", [None, "mean"])
@pytest.mark.parametrize("case", LOO_CASES)
def test_loo_bounds_contain_brute_force_refits(breast_cancer, digits, case, c_new):
    template, X, y = _loo_case(case, breast_cancer, digits)
    model = clone(template).fit(X, y)
    n, C = len(X), float(model.C)
    C_loo = C if c_new is None else C * n / (n - 1)
    f = _brute_loo(model, X, y, C_loo)
    tol = 1e-7 * (1.0 + np.abs(f))
    lo, hi = loo_bounds(model, C_new=c_new)
    assert lo.shape == hi.shape == (n,)
    assert np.all(lo <= f + tol), case
    assert np.all(f <= hi + tol), case
    if c_new is None:
        zlo, zhi = zhang_loo_bounds(model)
        assert np.all(zlo <= f + tol) and np.all(f <= zhi + tol)
        # Thm 1 with R = {t} is never wider than Zhang's interval
        assert np.all(zlo <= lo + 1e-10) and np.all(hi <= zhi + 1e-10)
    # the bounds are informative: the left-out score is not merely bounded by ±∞
    assert np.all(np.isfinite(lo)) and np.all(np.isfinite(hi))
    # ids= subsets (in any order) agree with the full call
    sel = np.array([n - 1, 3, 0, n // 2])
    ids = model.sample_ids_[sel]
    slo, shi = loo_bounds(model, ids=ids, C_new=c_new)
    np.testing.assert_allclose(slo, lo[sel], rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(shi, hi[sel], rtol=1e-12, atol=1e-12)
    if c_new is None:
        a, b = zhang_loo_bounds(model, ids=ids)
        np.testing.assert_allclose(a, zlo[sel], rtol=1e-12, atol=1e-12)
        np.testing.assert_allclose(b, zhi[sel], rtol=1e-12, atol=1e-12)


def test_loo_bounds_after_model_updates(breast_cancer):
    """Ids after real updates (removed and added samples) still address the right samples."""
    X, y = _subsample(*breast_cancer, 90, seed=17)
    model = LinearClassifier(loss="logistic", C=2.0).fit(X[:70], y[:70])
    model.remove([0, 5, 9])
    model.add(X[70:], y[70:])
    ids = model.sample_ids_
    lo, hi = loo_bounds(model)
    Xa, ya = (
        np.vstack([np.delete(X[:70], [0, 5, 9], 0), X[70:]]),
        np.r_[np.delete(y[:70], [0, 5, 9]), y[70:]],
    )
    # sample_ids_ order is the order of Xa (kept samples, then the added ones)
    ref = LinearClassifier(loss="logistic", C=2.0).fit(Xa, ya)
    np.testing.assert_allclose(model.decision_function(Xa), ref.decision_function(Xa), atol=1e-8)
    f = _brute_loo(ref, Xa, ya, 2.0)
    tol = 1e-7 * (1.0 + np.abs(f))
    assert np.all(lo <= f + tol) and np.all(f <= hi + tol)
    a, b = loo_bounds(model, ids=ids[[4, 80]])
    np.testing.assert_allclose([a, b], [lo[[4, 80]], hi[[4, 80]]], rtol=1e-12, atol=1e-12)


# =============================================================================================
# 5. the module is callable
# =============================================================================================
def test_sensitivity_module_is_callable(breast_cancer):
    import deltafit.sensitivity as sens
    from deltafit.sensitivity import gradient_sphere as gs  # noqa: F401

    X, y = _subsample(*breast_cancer, 60, seed=18)
    model = LinearClassifier(loss="logistic").fit(X, y)
    s = deltafit.sensitivity(model)
    assert isinstance(s, deltafit.sensitivity.Sensitivity)
    assert isinstance(sens(model, C_new="mean"), sens.Sensitivity)
    assert gs is gradient_sphere
    for name in sens.__all__:
        assert hasattr(sens, name)
