"""The curvature-aware certified regions (issue 16, parts 2 and 3) against exact refits.

Twins: every region is compared with the model refit from scratch on the changed data
(``clone(model).fit``, and scikit-learn's ``LogisticRegression`` once), on real data
(breast cancer, digits even/odd) and on random problems under hypothesis (all mixes of
removals, additions, relabels and reweights; linear and kernel; intercept on and off;
weights; ``C_new ≠ C``).  Tolerance: 1e-7 relative on decision values (the models are solved
to ``‖∇J‖ ≤ 1e-13`` relative).  Every region must also lie inside the published ball
(Okumura et al. Thm 1 = Sivan et al. Thm 1).  The 10⁴-case validity run is
``benchmarks/validity_curvature.py``.
"""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from sklearn.base import clone
from sklearn.linear_model import LogisticRegression

import deltafit
from curvature_cases import TOL, draw_case, run_case
from deltafit.losses import get_loss
from deltafit.model_selection import cross_validate, loo
from deltafit.sensitivity import loo_bounds
from deltafit.sensitivity.regions._curvature import (
    curvature_region,
    removal_intervals,
    secant_range,
)
from hypothesis_profiles import examples


def _split(X, y, seed=0, frac=0.7):
    rng = np.random.default_rng(seed)
    idx = rng.permutation(len(y))
    k = int(frac * len(y))
    return X[idx[:k]], y[idx[:k]], X[idx[k:]], y[idx[k:]]


def _standardised(data):
    X, y = data
    mu, sd = X.mean(axis=0), X.std(axis=0)
    return (X - mu) / np.where(sd > 0, sd, 1.0), y


def _contains(lo, hi, d):
    scale = 1.0 + np.abs(d)
    return float(np.max(np.maximum(lo - d, d - hi) / scale))


# ------------------------------------------------------------------------ the curvature
@pytest.mark.parametrize("loss", ["logistic", "squared_hinge"])
def test_secant_range_brackets_every_secant(loss, rng):
    """The secant slopes of ℓ' between z₁ and a dense grid of z₂ in [A, B] lie in the bounds."""
    L = get_loss(loss)
    for _ in range(200):
        t = rng.choice([-1.0, 1.0])
        z1 = rng.normal(0.0, 3.0)
        A = z1 + rng.normal(0.0, 2.0)
        B = A + abs(rng.normal(0.0, 2.0))
        lo, hi = secant_range(L, np.array([t]), np.array([z1]), np.array([A]), np.array([B]))
        z2 = np.linspace(A, B, 401)
        z2 = z2[np.abs(z2 - z1) > 1e-6]
        sec = (L.d1(t, z2) - L.d1(t, z1)) / (z2 - z1)
        assert np.all(sec >= lo[0] - 1e-9) and np.all(sec <= hi[0] + 1e-9)


# ------------------------------------------------------------------------ real data
@pytest.mark.parametrize("loss", ["logistic", "squared_hinge"])
def test_breast_cancer_removals_linear(loss, breast_cancer):
    """Remove k random training samples (the table of issue 16): every bound holds against
    the exact refit, lies inside the ball, and certifies at least as many test labels."""
    X, y = _standardised(breast_cancer)
    Xtr, ytr, Xte, _ = _split(X, y)
    m = deltafit.LinearClassifier(loss=loss, C=1.0, tol=1e-13).fit(Xtr, ytr)
    rng = np.random.default_rng(1)
    shares = {}
    for k in (1, 10, 40):
        cur, ball = [], []
        for _ in range(3):
            ids = rng.choice(m.sample_ids_, k, replace=False)
            s = deltafit.sensitivity(m, method="sphere").remove(ids)
            reg = curvature_region(s)
            keep = np.ones(len(ytr), dtype=bool)
            keep[ids] = False
            m2 = clone(m).fit(Xtr[keep], ytr[keep])
            lo, hi = reg.decision_bounds(Xte)
            blo, bhi = s.decision_bounds(Xte)
            assert _contains(lo, hi, m2.decision_function(Xte)) <= TOL
            assert np.all(lo >= blo - 1e-12) and np.all(hi <= bhi + 1e-12)
            clo, chi = reg.coef_bounds()
            assert _contains(clo, chi, np.asarray(m2.problem_.coef)) <= TOL
            dist = np.linalg.norm(np.asarray(m2.problem_.coef) - np.asarray(m.problem_.coef))
            assert dist <= reg.distance_bound() + TOL
            assert reg.distance_bound() <= s.distance_bound() + 1e-12
            cur.append(np.mean((lo > 0) | (hi <= 0)))
            ball.append(np.mean((blo > 0) | (bhi <= 0)))
        assert np.mean(cur) >= np.mean(ball)
        shares[k] = (float(np.mean(ball)), float(np.mean(cur)))
    print(f"\n{loss}: test labels certified (ball, curvature) by k: {shares}")
    # the curvature region is a real gain where the ball is loose (k = 10, 40)
    assert shares[40][1] > shares[40][0]


def test_matches_sklearn_logistic_regression(breast_cancer):
    """The refit twin is scikit-learn's LogisticRegression (C matched, intercept as a
    penalised constant column, ARCHITECTURE.md "The problem")."""
    X, y = _standardised(breast_cancer)
    Xtr, ytr, Xte, _ = _split(X, y, seed=3)
    m = deltafit.LinearClassifier(loss="logistic", C=0.5, tol=1e-13).fit(Xtr, ytr)
    ids = np.arange(0, 60, 3)
    s = deltafit.sensitivity(m, method="sphere").remove(ids)
    reg = curvature_region(s)
    keep = np.ones(len(ytr), dtype=bool)
    keep[ids] = False
    Z = np.hstack([Xtr[keep], np.ones((keep.sum(), 1))])
    sk = LogisticRegression(C=0.5, fit_intercept=False, tol=1e-12, max_iter=10000).fit(Z, ytr[keep])
    d = np.hstack([Xte, np.ones((len(Xte), 1))]) @ sk.coef_.ravel()
    lo, hi = reg.decision_bounds(Xte)
    assert _contains(lo, hi, d) <= 1e-5  # lbfgs' own accuracy


def test_exact_and_cheap_intervals_agree_in_validity(breast_cancer):
    """Both interval schedules of a linear model (every sample's exact interval, and the
    cached-Hessian intervals used for large n) hold; the exact one is the tighter."""
    X, y = _standardised(breast_cancer)
    Xtr, ytr, Xte, _ = _split(X, y, seed=5)
    m = deltafit.LinearClassifier(loss="logistic", C=1.0, tol=1e-13).fit(Xtr, ytr)
    ids = np.arange(5)
    s = deltafit.sensitivity(m, method="sphere").remove(ids)
    s.add(Xte[:4], np.array([0, 1, 1, 0]))
    keep = np.ones(len(ytr), dtype=bool)
    keep[ids] = False
    m2 = clone(m).fit(np.vstack([Xtr[keep], Xte[:4]]), np.r_[ytr[keep], 0, 1, 1, 0])
    d = m2.decision_function(Xte)
    widths = {}
    for mode in ("exact", "cheap"):
        lo, hi = curvature_region(s, mode=mode).decision_bounds(Xte)
        assert _contains(lo, hi, d) <= TOL
        widths[mode] = float(np.median(hi - lo))
    assert widths["exact"] <= widths["cheap"]


def test_digits_kernel_squared_hinge_mixed_change(digits):
    """Kernel form (expansion coefficients): remove, add, relabel and reweight on digits
    even/odd with an RBF kernel; the refit stays inside and the region inside the ball."""
    X, y = digits
    rng = np.random.default_rng(2)
    idx = rng.choice(len(y), 260, replace=False)
    Xtr, ytr = X[idx[:200]], y[idx[:200]]
    Xnew, ynew = X[idx[200:]], y[idx[200:]]
    m = deltafit.KernelClassifier(loss="squared_hinge", C=1.0, gamma=0.02, tol=1e-13).fit(Xtr, ytr)
    s = deltafit.sensitivity(m, method="sphere")
    s.remove(np.arange(10))
    s.add(Xnew[:6], ynew[:6])
    s.relabel([20, 21], 1 - ytr[[20, 21]])
    s.reweight([30, 31], [0.5, 2.0])
    reg = curvature_region(s)
    y2, w2 = ytr.copy(), np.ones(200)
    y2[[20, 21]] = 1 - y2[[20, 21]]
    w2[[30, 31]] = [0.5, 2.0]
    X2 = np.vstack([Xtr[10:], Xnew[:6]])
    m2 = clone(m).fit(X2, np.r_[y2[10:], ynew[:6]], sample_weight=np.r_[w2[10:], np.ones(6)])
    lo, hi = reg.decision_bounds(Xnew)
    blo, bhi = s.decision_bounds(Xnew)
    assert _contains(lo, hi, m2.decision_function(Xnew)) <= TOL
    assert np.all(lo >= blo - 1e-12) and np.all(hi <= bhi + 1e-12)
    assert np.median(hi - lo) < np.median(bhi - blo)
    assert reg.distance_bound() <= s.distance_bound() + 1e-12
    with pytest.raises(ValueError, match="linear model"):
        reg.coef_bounds()


# ------------------------------------------------------------------------ random problems
@settings(
    max_examples=examples(200),
    deadline=None,
    derandomize=True,
    suppress_health_check=[HealthCheck.too_slow],
)
@given(st.integers(0, 2**31 - 1))
def test_random_changes_never_violated(seed):
    """Hypothesis over random problems and changes (tests/curvature_cases.py): the refit lies
    in the region, the region in the ball."""
    r = run_case(draw_case(seed))
    if r is None:
        return
    assert r["violation"] <= TOL, r
    assert r["outside_ball"] <= TOL, r


# ------------------------------------------------------------------------ leave-one-out
@pytest.mark.parametrize(
    "kind", ["linear-logistic", "kernel-squared_hinge", "kernel-logistic-weighted"]
)
def test_loo_bounds_against_every_refit(kind, breast_cancer):
    """Curvature leave-one-out bounds hold for every sample (brute-force refits) and decide
    at least the labels the balls decide."""
    X, y = breast_cancer
    X, y = X[:90], y[:90]
    w = None
    if kind == "linear-logistic":
        m = deltafit.LinearClassifier(loss="logistic", C=2.0, tol=1e-13)
    elif kind == "kernel-squared_hinge":
        m = deltafit.KernelClassifier(
            loss="squared_hinge", C=1.0, gamma=1.0, fit_intercept=False, tol=1e-13
        )
    else:
        m = deltafit.KernelClassifier(loss="logistic", C=3.0, gamma=0.3, tol=1e-13)
        w = np.random.default_rng(0).uniform(0.3, 2.0, len(y))
    m.fit(X, y, sample_weight=w)
    lo, hi = loo_bounds(m)
    blo, bhi = loo_bounds(m, method="sphere")
    assert np.all(lo >= blo - 1e-12) and np.all(hi <= bhi + 1e-12)
    d = np.empty(len(y))
    for i in range(len(y)):
        keep = np.arange(len(y)) != i
        ref = clone(m).fit(X[keep], y[keep], sample_weight=None if w is None else w[keep])
        d[i] = ref.decision_function(X[i : i + 1])[0]
    assert _contains(lo, hi, d) <= TOL
    dec, bdec = (lo > 0) | (hi <= 0), (blo > 0) | (bhi <= 0)
    assert np.all(dec >= bdec)
    print(
        f"\n{kind}: leave-one-out labels decided: ball {bdec.mean():.1%}, "
        f"curvature {dec.mean():.1%}"
    )


def test_loo_and_kfold_screening_switch(breast_cancer):
    """loo / cross_validate with method='bounds': the labels equal brute force for every
    region; the curvature region refits fewer samples than the ball."""
    X, y = breast_cancer
    X, y = X[:150], y[:150]
    est = deltafit.KernelClassifier(loss="squared_hinge", C=1.0, gamma=1.0, fit_intercept=False)
    brute = loo(est, X, y, method="refit")
    res = {r: loo(est, X, y, method="bounds", region=r) for r in ("sphere", "auto")}
    for r in res.values():
        np.testing.assert_array_equal(r.y_pred, brute.y_pred)
    assert res["auto"].n_refits < res["sphere"].n_refits
    for e in (est, deltafit.LinearClassifier(loss="logistic", C=1.0)):
        kb = cross_validate(e, X, y, cv=5, method="refit")
        for region in ("sphere", "curvature"):
            kr = cross_validate(e, X, y, cv=5, method="bounds", region=region)
            np.testing.assert_array_equal(kr.y_pred, kb.y_pred)


def test_removal_intervals_linear_against_refit(breast_cancer):
    """The array form used by k-fold screening (exact gradient, no residual allowance)."""
    X, y = _standardised(breast_cancer)
    X, y = X[:200], y[:200]
    m = deltafit.LinearClassifier(loss="squared_hinge", C=0.7, tol=1e-13).fit(X, y)
    prob = m.problem_
    Phi = np.asarray(prob.rows[prob.live])
    t = np.asarray(prob.targets[prob.live], dtype=float)
    beta = np.asarray(prob.coef)
    z = Phi @ beta
    R = np.arange(0, 200, 9)
    u = np.ones(200)
    u[R] = 0.0
    grad = beta + 0.7 * Phi.T @ (u * prob.loss.d1(t, z))
    A, B = removal_intervals(z, t, u, beta, grad, 0.7, prob.loss, Phi=Phi)
    keep = u > 0
    m2 = clone(m).fit(X[keep], y[keep])
    assert _contains(A, B, Phi @ np.asarray(m2.problem_.coef)) <= TOL


# ------------------------------------------------------------------------ contract, input
def test_bad_input_and_cache(breast_cancer):
    X, y = breast_cancer
    sq = deltafit.LinearClassifier(loss="squared", C=1.0).fit(X[:50], y[:50])
    with pytest.raises(ValueError, match="logistic or squared-hinge"):
        curvature_region(deltafit.sensitivity(sq))
    with pytest.raises(ValueError, match="method='curvature'"):
        loo_bounds(sq, method="curvature")
    with pytest.raises(ValueError, match="method must be"):
        loo_bounds(sq, method="ellipse")
    m = deltafit.LinearClassifier(loss="logistic", C=1.0).fit(X[:60], y[:60])
    s = deltafit.sensitivity(m, method="sphere").remove([0])
    with pytest.raises(ValueError, match="mode must be"):
        curvature_region(s, mode="fast")
    with pytest.raises(ValueError, match="region must be"):
        loo(m, X[:60], y[:60], method="bounds", region="ball")
    reg = curvature_region(s)
    assert reg.kind == "curvature"
    # the cached Hessian belongs to one model version: after an update a new what-if uses
    # the new model's (and the old what-if refuses to answer)
    m.remove([5])
    with pytest.raises(ValueError, match="fitted or updated"):
        curvature_region(s)
    s2 = deltafit.sensitivity(m, method="sphere").remove([0])
    ref = clone(m).fit(np.delete(X[:60], [0, 5], axis=0), np.delete(y[:60], [0, 5]))
    lo, hi = curvature_region(s2).decision_bounds(X[60:90])
    assert _contains(lo, hi, ref.decision_function(X[60:90])) <= TOL


def test_large_kernel_what_if_falls_back_to_the_ball(monkeypatch, breast_cancer):
    """Beyond the kernel form's size limit the region is the ball itself (same bounds)."""
    from deltafit.sensitivity.regions import _curvature_kernel

    X, y = breast_cancer
    m = deltafit.KernelClassifier(loss="logistic", C=1.0, gamma=0.5).fit(X[:80], y[:80])
    s = deltafit.sensitivity(m, method="sphere").remove([0, 1])
    monkeypatch.setattr(_curvature_kernel, "_MAX_POINTS", 50)
    reg = curvature_region(s)
    lo, hi = reg.decision_bounds(X[80:120])
    blo, bhi = s.decision_bounds(X[80:120])
    np.testing.assert_allclose(lo, blo, rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(hi, bhi, rtol=1e-12, atol=1e-12)
    assert reg.distance_bound() == pytest.approx(s.distance_bound(), rel=1e-12)
