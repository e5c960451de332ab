"""Regression tests for certificate bugs found in review: cancellation in the running sums,
drift of the closed-form states, aliasing of the caller's buffers, Zhang's α on a singular K,
balls of different feature maps."""

import copy

import numpy as np
import pytest

import deltafit as df
from deltafit.sensitivity import zhang_loo_bounds


def _inside(s, f, Xt, retrained, tol=1e-7):
    lo, hi = s.decision_bounds(Xt)
    slack = tol * (1 + np.abs(f)) + retrained.grad_norm_ * 10.0
    return np.all(lo <= f + slack) and np.all(f <= hi + slack)


@pytest.mark.parametrize("kind", ["kernel", "linear"])
@pytest.mark.parametrize("loops", [1, 10])
def test_undoing_a_huge_addition_keeps_the_radius_exact(kind, loops):
    """add(outlier) + undo must not leave a cancelled ‖Δg‖² behind (it made the radius 0)."""
    rng = np.random.default_rng(1)
    X = rng.normal(size=(30, 2))
    y = 1e3 * (np.sin(X[:, 0]) + 0.1 * rng.normal(size=30))
    make = (
        (lambda: df.KernelRegressor(C=1.0, gamma=0.5))
        if kind == "kernel"
        else (lambda: df.LinearRegressor(C=1.0))
    )
    m = make().fit(X, y)
    ref = df.sensitivity(m).relabel([1], [y[1] + 1e-2])
    s = df.sensitivity(m).relabel([1], [y[1] + 1e-2])
    for _ in range(loops):
        s.add(3 * np.ones((1, 2)), [1e7])
        s.undo()
    assert s.radius == pytest.approx(ref.radius, rel=1e-9)
    y2 = y.copy()
    y2[1] += 1e-2
    r = make().fit(X, y2)
    Xt = rng.normal(size=(50, 2))
    assert _inside(s, r.predict(Xt), Xt, r)


def test_closed_form_drift_is_certified():
    """An ill-conditioned squared-loss model updated many times drifts between refinements:
    grad_norm_ reports the true residual and the bounds still hold."""
    rng = np.random.default_rng(0)
    X = 10 * rng.normal(size=(200, 3))
    X[:, 2] = X[:, 1] + 1e-3 * rng.normal(size=200)
    y = X[:, 0] + rng.normal(size=200)
    m = df.LinearRegressor(C=1e4).fit(X, y)
    for _ in range(20):
        m.remove(m.add(10 * rng.normal(size=(1, 3)), [0.0]))
    from deltafit.sensitivity import model_gradient_sphere

    # two computations of one gradient (exact statistics vs the rows), equal up to rounding:
    # the rounding of each is what they show for a fresh fit (the removals no longer leave
    # drift behind: the model is the fresh fit to 1e-8)
    fresh = df.LinearRegressor(C=1e4).fit(X, y)
    assert np.max(np.abs(m.predict(X) - fresh.predict(X))) <= 1e-8 * np.max(np.abs(y))
    floor = 10 * (fresh.grad_norm_ + 2 * model_gradient_sphere(fresh).radius)
    assert m.grad_norm_ == pytest.approx(2 * model_gradient_sphere(m).radius, rel=1e-4, abs=floor)
    s = df.sensitivity(m).relabel([0], [y[0] + 1e-7])
    y2 = y.copy()
    y2[0] += 1e-7
    r = df.LinearRegressor(C=1e4).fit(X, y2)
    Xt = 10 * rng.normal(size=(5, 3))
    lo, hi = s.decision_bounds(Xt)
    f = r.predict(Xt)
    assert np.all(lo <= f + 1e-6 * (1 + np.abs(f))) and np.all(f <= hi + 1e-6 * (1 + np.abs(f)))


@pytest.mark.parametrize("fit_intercept", [False, True])
def test_the_callers_buffer_is_not_kept(fit_intercept):
    rng = np.random.default_rng(0)
    X = rng.normal(size=(30, 3))
    y = X @ [1.0, 2, 3] + 0.1 * rng.normal(size=30)
    m = df.LinearRegressor(C=1.0, fit_intercept=fit_intercept).fit(X, y)
    buf = np.array([[1.0, 2, 3], [-4, 5, 6]])
    clean = df.sensitivity(m)
    ids = clean.add(buf.copy(), [50.0, -50.0])
    clean.remove(ids[:1])
    s = df.sensitivity(m)
    ids = s.add(buf, [50.0, -50.0])
    buf[0] = -3 * buf[0]  # the caller reuses its buffer
    s.remove(ids[:1])
    assert s.radius == pytest.approx(clean.radius, rel=1e-12)


def test_zhang_on_a_singular_kernel_matrix():
    """Duplicated rows with opposite labels: the stored α may be 0 while the optimum's
    −Cℓ'(z) is not; Zhang's interval must still hold."""
    rng = np.random.default_rng(0)
    Xh = rng.normal(size=(6, 2))
    X, y = np.vstack([Xh, Xh]), np.r_[np.ones(6), np.zeros(6)]
    m = df.KernelClassifier(loss="logistic", gamma=0.5, C=1.0).fit(X, y)
    lo, hi = zhang_loo_bounds(m)
    for t in range(12):
        keep = np.arange(12) != t
        f = copy.deepcopy(m).fit(X[keep], y[keep]).decision_function(X[t : t + 1])[0]
        assert lo[t] - 1e-9 <= f <= hi[t] + 1e-9


def test_primal_balls_of_different_feature_maps_do_not_intersect():
    from sklearn.kernel_approximation import RBFSampler

    rng = np.random.default_rng(0)
    X, y = rng.normal(size=(40, 3)), rng.integers(0, 2, 40)
    a = df.LinearClassifier(feature_map=RBFSampler(n_components=8, random_state=0)).fit(X, y)
    b = df.LinearClassifier(feature_map=RBFSampler(n_components=8, random_state=1)).fit(X, y)
    sa = df.sensitivity(a).remove([0]).sphere()
    sb = df.sensitivity(b).remove([0]).sphere()
    with pytest.raises(ValueError, match="different feature maps"):
        sa & sb
    assert (sa & df.sensitivity(a).remove([1]).sphere()).gap >= 0
