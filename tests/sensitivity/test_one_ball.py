"""One data-change ball and one store of changed samples, whoever asks.

The ball around the model retrained without samples R (or with samples added) is computed in
one place, :mod:`deltafit.sensitivity.regions._ball` (Okumura et al., "Quick sensitivity analysis
for
incremental data modification and its application to leave-one-out CV in linear classification
problems", Thm 1 / Thm 6; Sivan et al., "Sensitivity analysis for kernel models", Thm 1), and the
changed samples are kept by one store, :mod:`deltafit.sensitivity._changes`.  These tests fail
if two implementations drift apart:

* cross-validation's ball (``TrainingProblem``, exact gradient) and the sensitivity functions'
  ball (Thm 1 form, the solver residual as an allowance) differ by no more than the residual;
* :class:`~deltafit.sensitivity.Sensitivity` and :class:`~deltafit.sensitivity.IncrementalSphere`
  give bitwise the same ball after the same change;
* the vector, score and inner-product forms of the ball agree, for ``C₂ ≠ C₁`` and with a
  gradient.
"""

import numpy as np
import pytest
from sklearn.datasets import load_breast_cancer
from sklearn.preprocessing import StandardScaler

import deltafit as df
from deltafit.model_selection._problem import problem_of
from deltafit.sensitivity import IncrementalSphere, loo_bounds
from deltafit.sensitivity.regions._ball import center_scores, half_gradient, loo_balls, sq_radius

N = 200


@pytest.fixture(scope="module")
def cancer():
    X, y = load_breast_cancer(return_X_y=True)
    return StandardScaler().fit_transform(X), y


def make(kind, loss):
    if kind == "linear":
        return df.LinearClassifier(loss=loss, C=0.5)
    return df.KernelClassifier(loss=loss, kernel="rbf", gamma=0.02, C=2.0)


def gradient_norm(model):
    """‖∇J‖ at the stored solution (RKHS norm for kernel models)."""
    prob = model.problem_
    g = prob.gradient()
    if prob.kernel:
        return float(np.sqrt(max(g @ prob.gram(prob.live) @ g, 0.0)))
    return float(np.linalg.norm(g))


def assert_same_ball(lo1, hi1, lo2, hi2, e, slack):
    """Two intervals of one ball: apart by at most ``e · slack`` plus rounding."""
    tol = e * slack + 1e-9 * (1.0 + np.abs(lo2) + np.abs(hi2))
    assert np.all(np.abs(lo1 - lo2) <= tol), np.max(np.abs(lo1 - lo2) - tol)
    assert np.all(np.abs(hi1 - hi2) <= tol), np.max(np.abs(hi1 - hi2) - tol)


@pytest.mark.parametrize("kind", ["linear", "kernel"])
@pytest.mark.parametrize("loss", ["squared", "logistic"])
def test_cross_validation_and_sensitivity_share_the_leave_one_out_ball(cancer, kind, loss):
    X, y = cancer
    model = make(kind, loss).fit(X[:N], y[:N])
    lo1, hi1 = problem_of(model).loo_bounds()
    lo2, hi2 = loo_bounds(model)
    _, sq = model.problem_.scores(model.problem_.live)
    e = np.sqrt(sq)
    # the exact-gradient and Thm 1 forms differ by the gradient term (≤ ‖g‖ per unit ‖Φ_t‖)
    # and by the allowance (grad_norm_): both far below the width of the intervals
    slack = gradient_norm(model) + model.grad_norm_
    assert slack < 1e-3 * np.median(hi2 - lo2)
    assert_same_ball(lo1, hi1, lo2, hi2, e, slack)
    # the intervals are not trivially equal: the ball has a real radius
    assert np.median(hi1 - lo1) > 1e-4


@pytest.mark.parametrize("kind", ["linear", "kernel"])
@pytest.mark.parametrize("loss", ["squared", "logistic"])
def test_cross_validation_and_sensitivity_share_the_removal_ball(cancer, kind, loss):
    X, y = cancer
    model = make(kind, loss).fit(X[:N], y[:N])
    R = np.arange(10, 40)
    T = np.arange(100, 160)
    lo1, hi1 = problem_of(model).removal_bounds(R, T)
    lo2, hi2 = df.sensitivity(model, method="sphere").remove(R).decision_bounds(X[T])
    _, sq = model.problem_.scores(model.problem_.live[T])
    slack = gradient_norm(model) + model.grad_norm_
    assert slack < 1e-3 * np.median(hi2 - lo2)
    assert_same_ball(lo1, hi1, lo2, hi2, np.sqrt(sq), slack)


@pytest.mark.parametrize("kind", ["linear", "kernel"])
def test_sensitivity_and_incremental_sphere_share_the_store(cancer, kind):
    """The same change through both what-if objects: bitwise the same ball."""
    X, y = cancer
    model = make(kind, "logistic").fit(X[:N], y[:N])
    Xq = X[400:450]
    s = df.sensitivity(model, method="sphere")
    sp = IncrementalSphere(model)

    def same():
        assert s.radius == sp.radius
        assert s.distance_bound() == sp.distance_bound()
        for a, b in zip(s.decision_bounds(Xq), sp.decision_bounds(Xq)):
            np.testing.assert_array_equal(a, b)

    same()
    sp.remove(np.arange(5))
    s.remove(np.arange(5))
    same()
    keys = sp.add(X[N : N + 12], y[N : N + 12])
    ids = s.add(X[N : N + 12], y[N : N + 12])
    same()
    sp.remove(np.arange(20, 60))
    s.remove(np.arange(20, 60))
    same()
    sp.discard(keys[:7])  # an addition leaves A ...
    s.remove(ids[:7])  # ... is the removal of a hypothetical sample
    same()
    assert sp.radius > model.grad_norm_


@pytest.mark.parametrize("C2", [1.5, 0.7, 1.0])
@pytest.mark.parametrize("with_grad", [False, True])
def test_the_three_forms_of_the_ball_agree(C2, with_grad):
    rng = np.random.default_rng(0)
    n, p, C1 = 30, 6, 1.0
    Phi = rng.normal(size=(n, p))
    beta = rng.normal(size=p)
    g = 1e-2 * rng.normal(size=p) if with_grad else None
    c = rng.normal(size=8)
    dg = c @ Phi[:8]
    # vector form
    r = half_gradient(beta, dg, C1=C1, C2=C2, grad=g)
    # inner-product form
    kw = dict(grad_sq=g @ g, grad_dg=g @ dg, beta_grad=beta @ g) if with_grad else {}
    r2 = sq_radius(dg @ dg, beta @ dg, C1=C1, C2=C2, beta_sq=beta @ beta, **kw)
    assert r2 == pytest.approx(r @ r, rel=1e-12)
    # score form
    s = center_scores(Phi @ beta, Phi @ dg, C1=C1, C2=C2, phi_grad=None if g is None else Phi @ g)
    np.testing.assert_allclose(s, Phi @ (beta - r), rtol=1e-12, atol=1e-12)
    # leave-one-out: R = {t}, Δg = −ℓ'_t Φ_t, for every t at once
    d1 = rng.normal(size=n)
    center, rn = loo_balls(
        Phi @ beta,
        d1,
        np.einsum("ij,ij->i", Phi, Phi),
        C1=C1,
        C2=C2,
        beta_sq=beta @ beta,
        phi_grad=None if g is None else Phi @ g,
        grad_sq=None if g is None else g @ g,
        beta_grad=None if g is None else beta @ g,
    )
    for t in (0, 7, n - 1):
        rt = half_gradient(beta, -d1[t] * Phi[t], C1=C1, C2=C2, grad=g)
        assert rn[t] == pytest.approx(np.linalg.norm(rt), rel=1e-10)
        assert center[t] == pytest.approx(Phi[t] @ (beta - rt), rel=1e-10, abs=1e-12)
