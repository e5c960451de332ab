"""Sensitivity bounds of models fitted with sample weights (issue 15, part 3).

Every model solves ``C Σ w_i ℓ(t_i, z_i) + ½‖β‖²``; the data-change ball of Okumura et al.
(Thm 1 / Thm 6) and Sivan et al. (Thm 1) then has ``Δg = Σ c_i Φ(x_i)`` with
``c_i = w_new ℓ'(t_new, z_i) − w_old ℓ'(t_old, z_i)`` over the changed samples.  Each bound is
checked against its brute-force twin, a fresh weighted fit on the changed data (breast cancer
standardised; iris / digits for K ≥ 3 classes; random positive weights with some zeros):
hypothetical removals, weighted additions, relabels and reweights, and the certified labels
equal the retrained labels.  Weight 2 is a duplicate in the bounds as in the fit; a reweight to
0 is a removal.  Tolerances cover the retrained model's own solver residual only.
"""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from sklearn.datasets import load_breast_cancer, load_digits, load_iris
from sklearn.preprocessing import StandardScaler

import deltafit as df
from deltafit import KernelClassifier, KernelRegressor, LinearClassifier, LinearRegressor
from deltafit.sensitivity import (
    IncrementalSphere,
    loo_bounds,
    model_gradient_sphere,
    zhang_loo_bounds,
)
from hypothesis_profiles import examples

SMOOTH = ["logistic", "squared_hinge", "squared"]


@pytest.fixture(scope="module")
def cancer():
    X, y = load_breast_cancer(return_X_y=True)
    X = StandardScaler().fit_transform(X)
    rng = np.random.default_rng(0)
    w = rng.uniform(0.2, 3.0, len(y))
    w[rng.choice(len(y), 20, replace=False)] = 0.0
    return X, y, w


def _make(kind, loss, C=0.5, reg=False):
    if reg:
        return (
            LinearRegressor(C=C, tol=1e-12)
            if kind == "linear"
            else KernelRegressor(C=C, gamma=0.03, tol=1e-12)
        )
    if kind == "linear":
        return LinearClassifier(loss=loss, C=C, tol=1e-12)
    return KernelClassifier(loss=loss, C=C, gamma=0.03, tol=1e-12)


def _norms(model, X):
    prob = model.problem_
    if prob.kernel:
        from deltafit.kernels import kernel_diagonal

        return np.sqrt(kernel_diagonal(X, **prob.kernel_params))
    P = prob.features(X)
    return np.sqrt(np.einsum("ij,ij->i", P, P))


def _check_inside(lo, hi, f, retrained, X):
    """``lo ≤ f ≤ hi`` up to the retrained model's certified residual and rounding."""
    e = _norms(retrained, X)
    slack = 1e-7 * (1 + np.abs(f)) + retrained.grad_norm_ * (e if f.ndim == 1 else e[:, None])
    assert np.all(lo <= f + slack), float(np.max(f - lo - slack))
    assert np.all(f <= hi + slack), float(np.max(hi - f - slack))


def _dec(model, X):
    return model.decision_function(X) if hasattr(model, "decision_function") else model.predict(X)


# ------------------------------------------------------------------ random mixed changes
@pytest.mark.parametrize("kind", ["linear", "kernel"])
@pytest.mark.parametrize("loss", SMOOTH)
def test_weighted_what_if_contains_the_weighted_retrain(cancer, kind, loss):
    X, y, w = cancer
    n = 250
    Xtr, ytr, wtr = X[:n], y[:n].copy(), w[:n].copy()
    Xnew, ynew = X[n : n + 6], y[n : n + 6]
    rng = np.random.default_rng(1)
    m = _make(kind, loss, C=0.05).fit(Xtr, ytr, sample_weight=wtr)
    s = df.sensitivity(m)
    rem = rng.choice(n, 3, replace=False)
    rest = np.setdiff1d(np.arange(n), rem)
    rel = rng.choice(rest, 2, replace=False)
    rw = rng.choice(np.setdiff1d(rest, rel), 5, replace=False)
    w_new = np.array([0.0, 2.0, 0.5, 1.5, 1.0])
    wa = rng.uniform(0.0, 3.0, Xnew.shape[0])
    wa[0] = 0.0
    s.remove(rem)
    ids = s.add(Xnew, ynew, sample_weight=wa)
    s.relabel(rel, 1 - ytr[rel])
    s.reweight(rw, w_new)
    s.reweight(ids[:2], [2.5, 0.0])  # hypothetical additions can be reweighted too
    s.relabel(rw[:1], 1 - ytr[rw[:1]])  # a relabel keeps the new weight
    assert (s.n_removed, s.n_added, s.n_relabeled) == (3, 6, 3)
    assert s.n_reweighted == int(np.count_nonzero(w_new != wtr[rw]))
    # the twin: the weighted fit on the changed data
    y2, w2 = ytr.copy(), wtr.copy()
    y2[rel] = 1 - ytr[rel]
    y2[rw[:1]] = 1 - ytr[rw[:1]]
    w2[rw] = w_new
    wa2 = wa.copy()
    wa2[:2] = [2.5, 0.0]
    Xr = np.vstack([Xtr[rest], Xnew])
    twin = _make(kind, loss, C=0.05).fit(
        Xr, np.r_[y2[rest], ynew], sample_weight=np.r_[w2[rest], wa2]
    )
    Xq = X[300:]
    lo, hi = s.decision_bounds(Xq)
    f = _dec(twin, Xq)
    _check_inside(lo, hi, f, twin, Xq)
    labels, certain = s.predict_certain(Xq)
    np.testing.assert_array_equal(labels[certain], twin.predict(Xq)[certain])
    # a small change (one sample's weight up by a half): most labels certified, all correctly
    i = int(rw[1])
    s1 = df.sensitivity(m).reweight([i], [wtr[i] + 0.5])
    w1 = wtr.copy()
    w1[i] = wtr[i] + 0.5
    twin1 = _make(kind, loss, C=0.05).fit(Xtr, ytr, sample_weight=w1)
    lo, hi = s1.decision_bounds(Xq)
    _check_inside(lo, hi, _dec(twin1, Xq), twin1, Xq)
    labels, certain = s1.predict_certain(Xq)
    assert certain.mean() > 0.5, certain.mean()
    np.testing.assert_array_equal(labels[certain], twin1.predict(Xq)[certain])
    if kind == "linear":
        clo, chi = s.coef_bounds()
        slack = 1e-7 + twin.grad_norm_
        assert np.all(clo - slack <= twin.coef_) and np.all(twin.coef_ <= chi + slack)
        assert np.linalg.norm(twin.coef_ - m.coef_) <= s.norm_change_bound() + slack
    assert s.sphere().contains(*_solution(twin), atol=1e-7 + twin.grad_norm_)


def _solution(model):
    prob = model.problem_
    if prob.kernel:
        return np.array(prob.alpha[prob.live]), prob.rows[prob.live]
    return (np.array(prob.coef),)


@pytest.mark.parametrize("kind", ["linear", "kernel"])
def test_weighted_regressor_bounds(cancer, kind):
    X, _, w = cancer
    t = X[:, 0] - 0.5 * X[:, 3] + 0.1 * np.sin(X[:, 5])
    n = 200
    m = _make(kind, None, reg=True).fit(X[:n], t[:n], sample_weight=w[:n])
    s = df.sensitivity(m).remove([0, 1, 2]).reweight([3, 4], [5.0, 0.0])
    s.relabel([5], [t[5] + 1.0])
    s.add(X[n : n + 5], t[n : n + 5], sample_weight=[1.0, 2.0, 0.0, 0.5, 3.0])
    w2, t2 = w[:n].copy(), t[:n].copy()
    w2[[3, 4]] = [5.0, 0.0]
    t2[5] += 1.0
    twin = _make(kind, None, reg=True).fit(
        np.vstack([X[3:n], X[n : n + 5]]),
        np.r_[t2[3:], t[n : n + 5]],
        sample_weight=np.r_[w2[3:], [1.0, 2.0, 0.0, 0.5, 3.0]],
    )
    lo, hi = s.decision_bounds(X[300:])
    _check_inside(lo, hi, twin.predict(X[300:]), twin, X[300:])


# ----------------------------------------------------------------- what a weight means
@pytest.mark.parametrize("kind", ["linear", "kernel"])
@pytest.mark.parametrize("loss", ["logistic", "squared_hinge"])
def test_weight_two_is_a_duplicate_in_the_bounds(cancer, kind, loss):
    X, y, _ = cancer
    n = 150
    Xtr, ytr = X[:n], y[:n]
    w = np.ones(n)
    w[:3] = 2.0
    a = _make(kind, loss).fit(Xtr, ytr, sample_weight=w)
    dup = np.r_[np.arange(n), np.arange(3)]  # ids n, n+1, n+2 are the second copies
    b = _make(kind, loss).fit(Xtr[dup], ytr[dup])
    Xq = X[n:]
    sa = df.sensitivity(a).remove([0, 1, 2])
    sb = df.sensitivity(b).remove([0, 1, 2, n, n + 1, n + 2])
    assert sa.n_removed == 3 and sb.n_removed == 6
    ra, rb = sa.radius - a.grad_norm_, sb.radius - b.grad_norm_
    assert ra == pytest.approx(rb, rel=1e-5, abs=1e-7)
    np.testing.assert_allclose(sa.decision_bounds(Xq), sb.decision_bounds(Xq), rtol=1e-5, atol=1e-6)
    # weight 2 -> 1 is removing one copy
    s1 = df.sensitivity(a).reweight([0], [1.0])
    s2 = df.sensitivity(b).remove([n])
    assert s1.radius - a.grad_norm_ == pytest.approx(s2.radius - b.grad_norm_, rel=1e-5, abs=1e-7)
    # and the bounds of the weighted model hold for the retrained twin
    twin = _make(kind, loss).fit(Xtr[3:], ytr[3:])
    lo, hi = sa.decision_bounds(Xq)
    _check_inside(lo, hi, _dec(twin, Xq), twin, Xq)


@pytest.mark.parametrize("kind", ["linear", "kernel"])
def test_reweight_to_zero_is_a_removal_and_undo_restores(cancer, kind):
    X, y, w = cancer
    m = _make(kind, "logistic").fit(X[:200], y[:200], sample_weight=w[:200])
    ids = [3, 17, 40]
    a = df.sensitivity(m).reweight(ids, [0.0, 0.0, 0.0])
    b = df.sensitivity(m).remove(ids)
    assert a.radius == pytest.approx(b.radius, rel=1e-12)
    np.testing.assert_allclose(
        a.decision_bounds(X[200:]), b.decision_bounds(X[200:]), rtol=1e-12, atol=1e-12
    )
    assert a.n_reweighted == int(np.count_nonzero(w[ids] != 0.0)) and a.n_removed == 0
    a.undo()
    assert a.n_reweighted == 0
    assert a.radius == pytest.approx(m.grad_norm_, abs=1e-15)  # no change: the allowance only
    # removing a zero-weight sample changes nothing
    zero = int(np.flatnonzero(w[:200] == 0.0)[0])
    c = df.sensitivity(m).remove([zero])
    assert c.radius == pytest.approx(m.grad_norm_, abs=1e-15)


def test_unit_weights_give_the_unweighted_bounds(cancer):
    X, y, _ = cancer
    a = LinearClassifier(loss="logistic").fit(X[:200], y[:200])
    b = LinearClassifier(loss="logistic").fit(X[:200], y[:200], sample_weight=np.ones(200))
    sa = df.sensitivity(a).remove([1, 2])
    sa.add(X[200:205], y[200:205])
    sb = df.sensitivity(b).remove([1, 2])
    sb.add(X[200:205], y[200:205], sample_weight=np.ones(5))
    np.testing.assert_array_equal(sa.decision_bounds(X), sb.decision_bounds(X))


@pytest.mark.parametrize(
    "bad, match", [([-1.0], "negative"), ([np.nan], "NaN"), ([1.0, 2.0], "shape")]
)
def test_bad_hypothetical_weights_are_refused(cancer, bad, match):
    X, y, w = cancer
    m = LinearClassifier(loss="logistic").fit(X[:100], y[:100], sample_weight=w[:100])
    s = df.sensitivity(m)
    with pytest.raises(ValueError, match=match):
        s.add(X[100:101], y[100:101], sample_weight=bad)
    with pytest.raises(ValueError, match=match):
        s.reweight([0], bad)
    s.remove([4])
    with pytest.raises(ValueError, match="removed"):
        s.reweight([4], [1.0])
    assert (s.n_added, s.n_removed, s.n_reweighted) == (0, 1, 0)


def test_keep_data_false_weighted_model(cancer):
    X, y, w = cancer
    m = LinearClassifier(keep_data=False).fit(X[:200], y[:200], sample_weight=w[:200])
    s = df.sensitivity(m).remove([0, 1], X=X[:2]).reweight([5], [3.0], X=X[5:6])
    w2 = w[:200].copy()
    w2[5] = 3.0
    twin = LinearClassifier().fit(X[2:200], y[2:200], sample_weight=w2[2:])
    lo, hi = s.decision_bounds(X[200:])
    _check_inside(lo, hi, twin.decision_function(X[200:]), twin, X[200:])


# ------------------------------------------------------------------- the other balls
@pytest.mark.parametrize("kind", ["linear", "kernel"])
def test_weighted_loo_bounds_contain_the_weighted_refits(cancer, kind):
    X, y, w = cancer
    n = 80
    Xtr, ytr, wtr = X[:n], y[:n], w[:n].copy()
    wtr[:3] = [0.0, 2.0, 5.0]
    m = _make(kind, "logistic").fit(Xtr, ytr, sample_weight=wtr)
    lo, hi = loo_bounds(m)
    zlo, zhi = zhang_loo_bounds(m)
    for i in range(0, n, 4):
        keep = np.delete(np.arange(n), i)
        r = _make(kind, "logistic").fit(Xtr[keep], ytr[keep], sample_weight=wtr[keep])
        f = _dec(r, Xtr[i : i + 1])
        _check_inside(lo[i : i + 1], hi[i : i + 1], f, r, Xtr[i : i + 1])
        _check_inside(zlo[i : i + 1], zhi[i : i + 1], f, r, Xtr[i : i + 1])
    # a zero-weight sample's left-out model is the model: its ball interval is the allowance
    # only (the curvature-aware interval of the default method is no wider)
    slo, shi = loo_bounds(m, method="sphere")
    assert shi[0] - slo[0] == pytest.approx(2 * m.grad_norm_ * _norms(m, Xtr[:1])[0], abs=1e-12)
    assert hi[0] - lo[0] <= shi[0] - slo[0] + 1e-15


@pytest.mark.parametrize("kind", ["linear", "kernel"])
def test_weighted_incremental_sphere(cancer, kind):
    X, y, w = cancer
    m = _make(kind, "logistic").fit(X[:150], y[:150], sample_weight=w[:150])
    sph = IncrementalSphere(m)
    sph.remove([0, 1, 2, 3])
    k = sph.add(X[150:160], y[150:160], sample_weight=w[150:160])
    sph.discard(k[:2])
    twin = _make(kind, "logistic").fit(
        np.vstack([X[4:150], X[152:160]]),
        np.r_[y[4:150], y[152:160]],
        sample_weight=np.r_[w[4:150], w[152:160]],
    )
    batch = df.sensitivity(m).remove([0, 1, 2, 3])
    batch.add(X[152:160], y[152:160], sample_weight=w[152:160])
    assert sph.radius == pytest.approx(batch.radius, rel=1e-9)
    lo, hi = sph.decision_bounds(X[200:])
    _check_inside(lo, hi, _dec(twin, X[200:]), twin, X[200:])


@pytest.mark.parametrize("kind", ["linear", "kernel"])
def test_weighted_gradient_ball_uses_the_weighted_gradient(cancer, kind):
    X, y, w = cancer
    rough = (
        _make(kind, "logistic")
        .set_params(tol=1e-2, max_iter=2)
        .fit(X[:200], y[:200], sample_weight=w[:200])
    )
    exact = _make(kind, "logistic").fit(X[:200], y[:200], sample_weight=w[:200])
    g = rough.problem_.gradient()
    assert np.sqrt(
        g @ rough.problem_.gram(rough.problem_.live) @ g if kind == "kernel" else g @ g
    ) == pytest.approx(rough.grad_norm_, rel=1e-6)
    ball = model_gradient_sphere(rough)
    lo, hi = ball.decision_bounds(X[200:])
    _check_inside(lo, hi, _dec(exact, X[200:]), exact, X[200:])


# --------------------------------------------------------------------------- multiclass
@pytest.mark.parametrize("kind", ["linear", "kernel"])
def test_weighted_multiclass_what_if(kind):
    X, y = load_iris(return_X_y=True)
    X = StandardScaler().fit_transform(X)
    rng = np.random.default_rng(2)
    w = rng.uniform(0.3, 2.5, len(y))
    w[::17] = 0.0
    idx = rng.permutation(len(y))
    tr, new = idx[:120], idx[120:130]
    make = (
        (lambda: LinearClassifier(loss="logistic", C=1.0, tol=1e-12))
        if kind == "linear"
        else (lambda: KernelClassifier(loss="logistic", C=1.0, gamma=0.2, tol=1e-12))
    )
    m = make().fit(X[tr], y[tr], sample_weight=w[tr])
    s = df.sensitivity(m)
    assert m.problem_.for_class(1).weighted
    s.remove([0, 5])
    s.add(X[new], y[new], sample_weight=w[new])
    s.reweight([7, 9], [3.0, 0.0])
    s.relabel([11], [(y[tr][11] + 1) % 3])
    assert s.n_reweighted == 2
    wt, yt = w[tr].copy(), y[tr].copy()
    wt[[7, 9]] = [3.0, 0.0]
    yt[11] = (yt[11] + 1) % 3
    keep = np.setdiff1d(np.arange(120), [0, 5])
    twin = make().fit(
        np.vstack([X[tr][keep], X[new]]),
        np.r_[yt[keep], y[new]],
        sample_weight=np.r_[wt[keep], w[new]],
    )
    Xq = X[idx[130:]]
    lo, hi = s.decision_bounds(Xq)
    f = twin.decision_function(Xq)
    _check_inside(lo, hi, f, twin, Xq)
    labels, certain = s.predict_certain(Xq)
    assert certain.any()
    np.testing.assert_array_equal(labels[certain], twin.predict(Xq)[certain])
    llo, lhi = loo_bounds(m)
    assert llo.shape == (120, 3)


def test_weighted_multiclass_loo_bounds_digits():
    X, y = load_digits(return_X_y=True)
    X = StandardScaler().fit_transform(X[:300])
    y = y[:300]
    w = np.random.default_rng(3).uniform(0.0, 2.0, 300)
    m = LinearClassifier(loss="squared_hinge", C=0.05, tol=1e-12).fit(X, y, sample_weight=w)
    lo, hi = loo_bounds(m)
    for i in (0, 10, 100, 250):
        keep = np.delete(np.arange(300), i)
        r = LinearClassifier(loss="squared_hinge", C=0.05, tol=1e-12).fit(
            X[keep], y[keep], sample_weight=w[keep]
        )
        f = r.decision_function(X[i : i + 1])
        slack = 1e-7 * (1 + np.abs(f)) + r.grad_norm_ * _norms(r, X[i : i + 1])[:, None]
        assert np.all(lo[i] <= f + slack) and np.all(f <= hi[i] + slack)


# ------------------------------------------------------------------------ property test
@settings(
    max_examples=examples(40),
    deadline=None,
    derandomize=True,
    database=None,
    suppress_health_check=list(HealthCheck),
)
@given(
    seed=st.integers(0, 2**31 - 1),
    n=st.integers(8, 30),
    d=st.integers(1, 4),
    kind=st.sampled_from(["linear", "kernel"]),
    loss=st.sampled_from(["logistic", "squared_hinge"]),
    C=st.sampled_from([0.1, 1.0, 10.0]),
)
def test_property_random_weighted_changes(seed, n, d, kind, loss, C):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n + 5, d))
    y = (X[:, 0] + 0.5 * rng.normal(size=n + 5) > 0).astype(int)
    y[:2] = [0, 1]
    w = rng.uniform(0.0, 3.0, n + 5) * (rng.random(n + 5) > 0.2)
    m = _make(kind, loss, C=C).fit(X[:n], y[:n], sample_weight=w[:n])
    s = df.sensitivity(m)
    w2, y2 = w[:n].copy(), y[:n].copy()
    alive = np.ones(n, dtype=bool)
    add_rows, add_y, add_w = [], [], []
    for _step in range(4):
        op = rng.integers(4)
        cand = np.flatnonzero(alive)
        if op == 0 and cand.size > 2:
            i = int(rng.choice(cand))
            s.remove([i])
            alive[i] = False
        elif op == 1:
            k = n + len(add_rows)
            s.add(X[k : k + 1], y[k : k + 1], sample_weight=w[k : k + 1])
            add_rows.append(k)
            add_y.append(y[k])
            add_w.append(w[k])
        elif op == 2:
            i = int(rng.choice(cand))
            s.relabel([i], [1 - y2[i]])
            y2[i] = 1 - y2[i]
        else:
            i = int(rng.choice(cand))
            v = float(rng.choice([0.0, 0.5, 2.0, 4.0]))
            s.reweight([i], [v])
            w2[i] = v
    keep = np.flatnonzero(alive)
    Xr = np.vstack([X[keep]] + [X[k : k + 1] for k in add_rows])
    yr = np.r_[y2[keep], np.array(add_y, dtype=int)]
    wr = np.r_[w2[keep], np.array(add_w)]
    if np.unique(yr[wr > 0]).size < 2 or np.unique(yr).size < 2:
        return  # the twin is not a two-class problem
    twin = _make(kind, loss, C=C).fit(Xr, yr, sample_weight=wr)
    Xq = rng.normal(size=(20, d))
    lo, hi = s.decision_bounds(Xq)
    _check_inside(lo, hi, twin.decision_function(Xq), twin, Xq)
    labels, certain = s.predict_certain(Xq)
    np.testing.assert_array_equal(labels[certain], twin.predict(Xq)[certain])
