"""The incremental sphere of a multiclass model (one ball per one-vs-rest class) against the
balls from their definitions and against exact refits: every class's decision values of the
retrained KernelClassifier lie in its bounds (0 violations), and a label the bounds certify
is the refit's label."""

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from sklearn.datasets import load_digits

import deltafit as df
from deltafit.sensitivity import IncrementalSphere, MulticlassIncrementalSphere
from hypothesis_profiles import examples
from stream_reference import scratch_ball

TOL = 1e-7  # bounds are compared with refits solved to the models' tolerance


@pytest.fixture(scope="module")
def digits10():
    X, y = load_digits(return_X_y=True)
    return X / 16.0, y


def make(**kw):
    return df.KernelClassifier(
        **{**dict(loss="squared_hinge", kernel="rbf", gamma=0.05, C=1.0, fit_intercept=False), **kw}
    )


def test_each_ball_is_the_class_ball_from_scratch(digits10):
    """A walk of add / remove / discard: every class's ‖r_k‖ and tracked centres equal the
    ball recomputed from A and R with that class's ±1 targets (1e-9 relative)."""
    X, y = digits10
    model = make(fit_intercept=True).fit(X[:200], y[:200])
    sp = IncrementalSphere(model, capacity=4)
    assert isinstance(sp, MulticlassIncrementalSphere) and sp.n_classes == 10
    query = X[900:930]
    sp.track(query)
    rng = np.random.default_rng(0)
    A, R = {}, {}
    fresh, ids = list(range(200, 400)), list(range(200))
    for _step in range(25):
        move = rng.integers(3)
        if move == 0:
            i = fresh.pop(rng.integers(len(fresh)))
            A[int(sp.add(X[i : i + 1], y[i : i + 1])[0])] = i
        elif move == 1:
            i = ids.pop(rng.integers(len(ids)))
            R[int(sp.remove([i])[0])] = i
        elif A or R:
            key = list(A) + list(R)
            key = key[rng.integers(len(key))]
            sp.discard([key])
            (fresh if key in A else ids).append((A if key in A else R).pop(key))
        a, r = list(A.values()), list(R.values())
        for k in range(10):
            rn, center = scratch_ball(model, X[a], y[a], X[r], y[r], query, klass=k)
            assert sp.r_norm[k] == pytest.approx(rn, rel=1e-9, abs=1e-12)
            np.testing.assert_allclose(sp.tracked_center()[:, k], center, rtol=1e-9, atol=1e-10)
        assert sp.n_added == len(A) and sp.n_removed == len(R)


def test_equals_the_multiclass_what_if(digits10):
    X, y = digits10
    model = make().fit(X[:300], y[:300])
    sp = IncrementalSphere(model)
    sp.add(X[300:340], y[300:340])
    sp.remove(np.arange(30))
    s = df.sensitivity(model, method="sphere")
    s.add(X[300:340], y[300:340])
    s.remove(np.arange(30))
    np.testing.assert_allclose(sp.distance_bound(), s.distance_bound(), rtol=1e-10)
    for a, b in zip(sp.decision_bounds(X[1000:1100]), s.decision_bounds(X[1000:1100])):
        np.testing.assert_allclose(a, b, rtol=1e-9, atol=1e-10)


def test_bounds_contain_the_refit(digits10):
    X, y = digits10
    model = make().fit(X[:300], y[:300])
    sp = IncrementalSphere(model)
    pool = X[400:800]
    sp.track(pool)
    keys = sp.add(X[300:306], y[300:306])
    sp.remove(np.arange(0, 4))
    sp.discard(keys[:1])
    refit = make().fit(np.vstack([X[4:300], X[301:306]]), np.r_[y[4:300], y[301:306]])
    d = refit.decision_function(pool)
    lo, hi = sp.tracked_bounds()
    assert np.all(d >= lo - TOL) and np.all(d <= hi + TOL)
    lo2, hi2 = sp.decision_bounds(pool)
    np.testing.assert_allclose(lo, lo2, rtol=1e-9, atol=1e-10)
    labels, certain = sp.predict_certain(pool)
    assert certain.any()
    np.testing.assert_array_equal(labels[certain], refit.predict(pool)[certain])


def test_a_refused_change_leaves_every_ball_unchanged(digits10):
    X, y = digits10
    keep = y < 5
    model = make().fit(X[keep][:200], y[keep][:200])
    sp = IncrementalSphere(model)
    sp.add(X[keep][200:210], y[keep][200:210])
    before = sp.r_norm.copy(), sp.n_entries
    with pytest.raises(ValueError, match="labels"):
        sp.add(X[:5], np.array([0, 1, 2, 3, 9]))
    sp.remove([3])
    before = sp.r_norm.copy(), sp.n_entries
    with pytest.raises(ValueError, match="already removed"):
        sp.remove([4, 3])
    with pytest.raises(ValueError, match="unknown"):
        sp.discard([999])
    np.testing.assert_array_equal(sp.r_norm, before[0])
    assert sp.n_entries == before[1]
    # a sample at 1e60 times a digit: class 0's ball takes it, class 1's coefficient overflows
    # (|ℓ'|·‖Φ‖ > 1e100); class 0 must not have taken it when class 1 refuses
    Xk, yk = X[keep], y[keep]
    lin = df.LinearClassifier(loss="squared_hinge").fit(Xk[:200], yk[:200])
    sl = IncrementalSphere(lin)
    big = Xk[2:3] * 1e60
    sl.for_class(0)._checked_add(big, yk[2:3], None)  # accepted on its own
    with pytest.raises(ValueError, match="too large"):
        sl.add(big, yk[2:3])
    assert all(sl.for_class(j).n_entries == 0 for j in range(5))
    np.testing.assert_array_equal(sl.r_norm, np.zeros(5))
    with pytest.raises(ValueError, match="class index"):
        sp.for_class(5)
    with pytest.raises(ValueError, match="convex differentiable"):
        IncrementalSphere(make(loss="hinge").fit(X[:100], y[:100]))


@settings(max_examples=examples(25), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    seed=st.integers(0, 10_000),
    k=st.integers(3, 5),
    n=st.integers(15, 40),
    n_add=st.integers(0, 8),
    n_rem=st.integers(0, 8),
    loss=st.sampled_from(["squared_hinge", "logistic", "squared"]),
    C=st.floats(0.1, 10.0),
)
def test_property_refit_inside_the_class_bounds(seed, k, n, n_add, n_rem, loss, C):
    """Random K-class problems and changes: each class's decision value of the exact refit
    lies in its ball's bounds, and certified labels are the refit's."""
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n + n_add + 20, 3))
    y = np.r_[np.arange(k), rng.integers(0, k, size=n + n_add + 20 - k)]
    model = df.KernelClassifier(loss=loss, kernel="rbf", gamma=0.5, C=C).fit(X[:n], y[:n])
    sp = IncrementalSphere(model)
    if n_add:
        sp.add(X[n : n + n_add], y[n : n + n_add])
    rem = rng.choice(n, size=min(n_rem, n - k), replace=False)
    kept = np.setdiff1d(np.arange(n), rem)
    if rem.size:
        sp.remove(rem)
    tr = np.r_[kept, np.arange(n, n + n_add)]
    if np.unique(y[tr]).size < k:
        return  # the refit would have fewer classes: not the same K problems
    refit = df.KernelClassifier(loss=loss, kernel="rbf", gamma=0.5, C=C).fit(X[tr], y[tr])
    Q = X[n + n_add :]
    lo, hi = sp.decision_bounds(Q)
    d = refit.decision_function(Q)
    scale = 1.0 + np.abs(d)
    assert np.all(d >= lo - TOL * scale) and np.all(d <= hi + TOL * scale)
    labels, certain = sp.predict_certain(Q)
    np.testing.assert_array_equal(labels[certain], refit.predict(Q)[certain])
