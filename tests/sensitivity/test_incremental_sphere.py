"""IncrementalSphere (Sivan et al. §3.3) against the ball recomputed from scratch.

The reference here is written from the paper's formulas (eqs. 4, 9, 10) with scikit-learn's
kernels and the model's public decision_function; nothing of deltafit's sensitivity code."""

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import deltafit as df
from deltafit.sensitivity import IncrementalSphere
from hypothesis_profiles import examples
from stream_reference import kernel_of, scratch_ball

MODELS = [
    lambda: df.KernelClassifier(loss="squared_hinge", kernel="rbf", gamma=0.1, C=1.0),
    lambda: df.KernelClassifier(
        loss="logistic", kernel="rbf", gamma=0.05, C=3.0, fit_intercept=False
    ),
    lambda: df.LinearClassifier(loss="squared_hinge", C=0.5),
    lambda: df.KernelRegressor(kernel="rbf", gamma=0.1, C=2.0),
]


@pytest.mark.parametrize("make", MODELS)
def test_every_step_equals_the_ball_from_scratch(make, breast_cancer):
    """A random walk of add / remove / discard on breast_cancer: after every step ‖r‖ and
    the tracked centres equal the ones recomputed from A and R (1e-9 relative)."""
    X, y = breast_cancer
    model = make().fit(X[:200], y[:200])
    sp = IncrementalSphere(model, capacity=4)
    query = X[450:470]
    sp.track(query)
    rng = np.random.default_rng(1)
    A, R = {}, {}  # key -> stream row / model id
    fresh = list(range(200, 450))
    ids = list(range(200))
    for _step in range(60):
        move = rng.integers(3)
        if move == 0 and fresh:
            i = fresh.pop(rng.integers(len(fresh)))
            A[int(sp.add(X[i : i + 1], y[i : i + 1])[0])] = i
        elif move == 1 and ids:
            i = ids.pop(rng.integers(len(ids)))
            R[int(sp.remove([i])[0])] = i
        elif A or R:
            pool = list(A) + list(R)
            key = pool[rng.integers(len(pool))]
            sp.discard([key])
            if key in A:
                fresh.append(A.pop(key))
            else:
                ids.append(R.pop(key))
        a, r = list(A.values()), list(R.values())
        rn, center = scratch_ball(model, X[a], y[a], X[r], y[r], query)
        assert sp.r_norm == pytest.approx(rn, rel=1e-9, abs=1e-12)
        np.testing.assert_allclose(sp.tracked_center(), center, rtol=1e-9, atol=1e-10)
        np.testing.assert_allclose(sp.center_decision(query), center, rtol=1e-9, atol=1e-10)
        assert sp.n_added == len(A) and sp.n_removed == len(R)
    assert sp.recompute() == pytest.approx(rn, rel=1e-12, abs=1e-14)


def test_equals_the_sensitivity_what_if(digits):
    """The same change through deltafit.sensitivity gives the same ball (digits, RBF)."""
    X, y = digits
    model = df.KernelClassifier(loss="squared_hinge", kernel="rbf", gamma=0.05).fit(
        X[:300], y[:300]
    )
    sp = IncrementalSphere(model)
    ka = sp.add(X[300:340], y[300:340])
    sp.remove(np.arange(0, 30))
    sp.discard(ka[:10])
    s = df.sensitivity(model, method="sphere")
    s.add(X[310:340], y[310:340])
    s.remove(np.arange(0, 30))
    assert sp.distance_bound() == pytest.approx(s.distance_bound(), rel=1e-10)
    lo, hi = sp.decision_bounds(X[1000:1100])
    lo2, hi2 = s.decision_bounds(X[1000:1100])
    np.testing.assert_allclose(lo, lo2, rtol=1e-9, atol=1e-10)
    np.testing.assert_allclose(hi, hi2, rtol=1e-9, atol=1e-10)


def test_bounds_hold_for_the_retrained_model(breast_cancer):
    """Lemma 1: the decision of a fresh fit on D₁ ∖ R ∪ A lies in [L, U]."""
    X, y = breast_cancer
    model = df.KernelClassifier(loss="squared_hinge", kernel="rbf", gamma=0.1).fit(X[:250], y[:250])
    sp = IncrementalSphere(model)
    sp.add(X[250:300], y[250:300])
    sp.remove(np.arange(40))
    keep = np.r_[40:250, 250:300]
    new = df.KernelClassifier(loss="squared_hinge", kernel="rbf", gamma=0.1).fit(X[keep], y[keep])
    lo, hi = sp.decision_bounds(X[300:])
    z = new.decision_function(X[300:])
    assert np.all(lo <= z + 1e-9) and np.all(z <= hi + 1e-9)


@settings(max_examples=examples(25), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    seed=st.integers(0, 10_000),
    n=st.integers(12, 40),
    n_add=st.integers(0, 8),
    n_rem=st.integers(0, 8),
    C=st.floats(0.05, 20.0),
    gamma=st.floats(0.05, 3.0),
)
def test_property_bounds_contain_the_retrained_decision(seed, n, n_add, n_rem, C, gamma):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n + n_add + 10, 3))
    y = (X[:, 0] + 0.5 * rng.normal(size=len(X)) > 0).astype(int)
    y[:2] = [0, 1]
    make = lambda: df.KernelClassifier(loss="logistic", kernel="rbf", gamma=gamma, C=C)  # noqa
    model = make().fit(X[:n], y[:n])
    sp = IncrementalSphere(model)
    if n_add:
        sp.add(X[n : n + n_add], y[n : n + n_add])
    rem = np.arange(2, 2 + min(n_rem, n - 4))
    if rem.size:
        sp.remove(rem)
    keep = np.setdiff1d(np.arange(n + n_add), rem)
    new = make().fit(X[keep], y[keep])
    lo, hi = sp.decision_bounds(X[-10:])
    z = new.decision_function(X[-10:])
    assert np.all(lo <= z + 1e-7) and np.all(z <= hi + 1e-7)
    # Theorem 1: ‖β₂ − β₁‖ ≤ 2‖r‖, with the RKHS distance of the two kernel expansions
    k = kernel_of(model)
    P = np.vstack([model.X_fit_, new.X_fit_])
    a = np.concatenate([-model.dual_coef_, new.dual_coef_])
    dist_sq = a @ k(P, P) @ a  # squared: its rounding (~1e-13) is not amplified by a sqrt
    assert dist_sq <= sp.distance_bound() ** 2 * (1 + 1e-7) + 1e-10


def test_memory_is_bounded_by_the_live_entries(breast_cancer):
    """5,000 add/discard cycles with at most 20 live entries: the room never grows past 32."""
    X, y = breast_cancer
    model = df.KernelClassifier(kernel="rbf", gamma=0.1).fit(X[:100], y[:100])
    sp = IncrementalSphere(model, capacity=8)
    live = []
    rng = np.random.default_rng(0)
    for t in range(5000):
        i = 100 + t % 400
        live.append(sp.add(X[i : i + 1], y[i : i + 1])[0])
        if len(live) > 20:
            sp.discard([live.pop(rng.integers(len(live)))])
    assert sp.capacity <= 32 and sp.n_entries == 20
    assert sp.r_norm == pytest.approx(sp.recompute(), rel=1e-10)


def test_discarding_everything_returns_to_zero(breast_cancer):
    X, y = breast_cancer
    model = df.LinearClassifier(loss="logistic").fit(X[:100], y[:100])
    sp = IncrementalSphere(model)
    keys = np.concatenate([sp.add(X[100:150], y[100:150]), sp.remove(np.arange(10))])
    assert sp.r_norm > 0
    sp.discard(keys)
    assert sp.r_norm == 0.0 and sp.n_entries == 0
    lo, hi = sp.decision_bounds(X[:5])
    z = model.decision_function(X[:5])
    np.testing.assert_allclose(lo, hi - 2 * (hi - z), atol=1e-12)


def test_bad_input(breast_cancer):
    X, y = breast_cancer
    model = df.KernelClassifier(kernel="rbf", gamma=0.1).fit(X[:60], y[:60])
    sp = IncrementalSphere(model)
    with pytest.raises(ValueError, match="NaN"):
        sp.add(np.full((1, X.shape[1]), np.nan), [1])
    with pytest.raises(ValueError, match="features"):
        sp.add(X[:1, :5], [1])
    with pytest.raises(ValueError, match="labels"):
        sp.add(X[:2], [1])
    with pytest.raises(ValueError, match="not among"):
        sp.add(X[:1], [7])
    k = sp.remove([3])
    with pytest.raises(ValueError, match="already removed"):
        sp.remove([3])
    with pytest.raises(ValueError, match="ids"):
        sp.remove([10_000])
    with pytest.raises(ValueError, match="unknown"):
        sp.discard([999])
    sp.discard(k)
    with pytest.raises(ValueError, match="unknown"):
        sp.discard(k)
    with pytest.raises(ValueError, match="capacity"):
        IncrementalSphere(model, capacity=0)
    with pytest.raises(ValueError, match="track"):
        sp.tracked_center()
    with pytest.raises(ValueError, match="deltafit estimator"):
        IncrementalSphere(object())
    state = (sp.r_norm, sp.n_entries)
    model.add(X[100:101], y[100:101])
    with pytest.raises(ValueError, match="updated after"):
        sp.add(X[:1], y[:1])
    assert (sp.r_norm, sp.n_entries) == state
