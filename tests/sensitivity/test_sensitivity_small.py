"""Small linear what-ifs answered by solving the changed problem (``_curvature_solve``).

Twins: the region (a certified ball around a Newton point of the changed problem) is compared
with the model refit from scratch on the changed data (``clone(model).fit``, solved to
``‖∇J‖ ≤ 1e-13`` relative), on breast cancer and digits even/odd; tolerance 1e-7 relative on
decision values and coefficients.  The region lies inside the published ball (Okumura et al.
Thm 1 = Sivan et al. Thm 1) and inside the exact-interval region's reach; its rounding
allowance is checked against the gradient recomputed in extended precision; the model is
bit-identical after any number of what-ifs.
"""

from __future__ import annotations

import copy

import numpy as np
import pytest
from sklearn.base import clone

import deltafit
from deltafit.sensitivity.regions import _curvature_solve
from deltafit.sensitivity.regions._curvature import CurvatureRegion, curvature_region
from deltafit.sensitivity.regions._curvature_solve import SolvedRegion

TOL = 1e-7


def _standardised(data, n=None, seed=0):
    X, y = data
    if n is not None:
        idx = np.random.default_rng(seed).choice(len(y), n, replace=False)
        X, y = X[idx], y[idx]
    mu, sd = X.mean(axis=0), X.std(axis=0)
    return (X - mu) / np.where(sd > 0, sd, 1.0), np.asarray(y)


def _violation(lo, hi, d):
    scale = 1.0 + np.abs(d)
    return float(np.max(np.maximum(lo - d, d - hi) / scale))


def _check_against_refit(m, s, reg, X2, y2, w2, Xq):
    """The refit on the changed data lies in every bound of ``reg``; ``reg`` lies in the ball."""
    ref = clone(m).fit(X2, y2, sample_weight=w2)
    lo, hi = reg.decision_bounds(Xq)
    blo, bhi = s.decision_bounds(Xq)
    assert _violation(lo, hi, ref.decision_function(Xq)) <= TOL
    assert np.all(lo >= blo - 1e-12) and np.all(hi <= bhi + 1e-12)
    b2 = np.asarray(ref.problem_.coef)
    clo, chi = reg.coef_bounds()
    assert _violation(clo, chi, b2) <= TOL
    dist = float(np.linalg.norm(b2 - np.asarray(m.problem_.coef)))
    assert dist <= reg.distance_bound() + TOL
    assert reg.distance_bound() <= s.distance_bound() + 1e-12
    return lo, hi, blo, bhi


@pytest.mark.parametrize("loss", ["logistic", "squared_hinge"])
def test_breast_cancer_removals_inside_the_refit_and_ball(loss, breast_cancer):
    """Remove k ∈ {1, 10, 40} random samples of breast cancer (the issue's table): the region
    is the auto choice, holds the refit, is tiny, and decides every test label the ball does."""
    X, y = _standardised(breast_cancer)
    rng = np.random.default_rng(4)
    idx = rng.permutation(len(y))
    tr, te = idx[:398], idx[398:]
    m = deltafit.LinearClassifier(loss=loss, C=1.0, tol=1e-13).fit(X[tr], y[tr])
    for k in (1, 10, 40):
        ids = rng.choice(m.sample_ids_, k, replace=False)
        s = deltafit.sensitivity(m, method="sphere").remove(ids)
        reg = curvature_region(s)
        assert isinstance(reg, SolvedRegion) and reg.kind == "curvature"
        keep = np.ones(len(tr), dtype=bool)
        keep[ids] = False
        lo, hi, blo, bhi = _check_against_refit(m, s, reg, X[tr][keep], y[tr][keep], None, X[te])
        assert np.median(hi - lo) < 1e-6  # essentially the retrained model
        dec, bdec = (lo > 0) | (hi <= 0), (blo > 0) | (bhi <= 0)
        assert np.all(dec >= bdec)
        # the public entry answers from the same region
        s2 = deltafit.sensitivity(m, method="curvature").remove(ids)
        lo2, hi2 = s2.decision_bounds(X[te])
        np.testing.assert_array_equal(lo2, lo)
        np.testing.assert_array_equal(hi2, hi)


@pytest.mark.parametrize("loss", ["logistic", "squared_hinge"])
def test_digits_mixed_change_weights_and_C_new(loss, digits):
    """Digits even/odd (600 × 64): removals, additions, relabels, reweights and C_new ≠ C on
    a weighted model; the solve region and the exact-interval region both hold, and the solve
    region is never wider than the ball."""
    X, y = _standardised(digits, n=660, seed=1)
    Xtr, ytr, Xnew, ynew = X[:600], y[:600], X[600:], y[600:]
    w = np.random.default_rng(2).uniform(0.5, 2.0, 600)
    m = deltafit.LinearClassifier(loss=loss, C=0.3, tol=1e-13).fit(Xtr, ytr, sample_weight=w)
    s = deltafit.sensitivity(m, C_new=0.4, method="sphere")
    s.remove(np.arange(12))
    s.add(Xnew[:8], ynew[:8], sample_weight=np.full(8, 1.5))
    s.relabel([20, 21, 22], 1 - ytr[[20, 21, 22]])
    s.reweight([30, 31], [0.0, 3.0])
    y2, w2 = ytr.copy(), w.copy()
    y2[[20, 21, 22]] = 1 - y2[[20, 21, 22]]
    w2[[30, 31]] = [0.0, 3.0]
    X2 = np.vstack([Xtr[12:], Xnew[:8]])
    y2 = np.r_[y2[12:], ynew[:8]]
    w2 = np.r_[w2[12:], np.full(8, 1.5)]
    ref = clone(m).set_params(C=0.4)
    reg = curvature_region(s, mode="solve")
    assert isinstance(reg, SolvedRegion)
    Xq = np.vstack([Xtr[:40], Xnew])
    ref_d = ref.fit(X2, y2, sample_weight=w2).decision_function(Xq)
    for region in (reg, curvature_region(s, mode="exact")):
        lo, hi = region.decision_bounds(Xq)
        assert _violation(lo, hi, ref_d) <= TOL
        clo, chi = region.coef_bounds()
        assert _violation(clo, chi, np.asarray(ref.problem_.coef)) <= TOL
    lo, hi = reg.decision_bounds(Xq)
    blo, bhi = s.decision_bounds(Xq)
    assert np.all(hi - lo <= bhi - blo + 1e-12)
    assert np.median(hi - lo) < 1e-6


def test_rounding_allowance_covers_the_gradient_error(breast_cancer):
    """``δ`` bounds the floating-point error of the computed gradient: the gradient at β̂
    recomputed in extended precision (np.longdouble) is within δ of ĝ."""
    X, y = _standardised(breast_cancer)
    m = deltafit.LinearClassifier(loss="logistic", C=5.0, tol=1e-13).fit(X, y)
    s = deltafit.sensitivity(m, method="sphere").remove(np.arange(0, 60, 4))
    prob = m.problem_
    cache = prob.cached(
        ("curvature-solve", "logistic"), lambda: _curvature_solve._solve_cache(prob, prob.loss)
    )
    pb = _curvature_solve._Problem(s, cache)
    beta, g, delta = pb.solve(np.asarray(prob.coef, dtype=np.float64))
    Xl = pb.X.astype(np.longdouble)
    bl = beta.astype(np.longdouble)
    z = Xl @ bl
    t = pb.t.astype(np.longdouble)
    d1 = -t / (np.longdouble(1) + np.exp(t * z))  # ℓ'(t, z) = −t σ(−t z)
    g_ext = bl + Xl.T @ (pb.u.astype(np.longdouble) * d1)
    err = float(np.sqrt(np.sum((g_ext - g.astype(np.longdouble)) ** 2)))
    assert err <= delta
    assert float(np.linalg.norm(g)) <= _curvature_solve._CONVERGED * delta
    # an interval that ignored δ would still be of rounding size: δ is small
    assert delta < 1e-8 * (1.0 + float(np.linalg.norm(beta)))


def test_model_is_bit_identical_after_what_ifs(breast_cancer, tmp_path):
    """Queries never touch the model: coefficients, state (as saved) and the next update are
    bit-identical to an untouched copy's."""
    X, y = _standardised(breast_cancer)
    m = deltafit.LinearClassifier(loss="logistic", C=1.0, tol=1e-12).fit(X[:400], y[:400])
    snap = copy.deepcopy(m)
    for k in (1, 10, 40):
        s = deltafit.sensitivity(m).remove(np.arange(k))
        s.add(X[400:405], y[400:405])
        s.decision_bounds(X[400:])
        s.coef_bounds()
        s.distance_bound()
    np.testing.assert_array_equal(m.coef_, snap.coef_)
    np.testing.assert_array_equal(m.intercept_, snap.intercept_)
    np.testing.assert_array_equal(m.decision_function(X[400:]), snap.decision_function(X[400:]))
    deltafit.save(m, tmp_path / "a.npz")
    deltafit.save(snap, tmp_path / "b.npz")
    with np.load(tmp_path / "a.npz") as a, np.load(tmp_path / "b.npz") as b:
        assert sorted(a.files) == sorted(b.files)
        for name in a.files:
            np.testing.assert_array_equal(a[name], b[name], err_msg=name)
    m.remove([3, 7, 11])
    snap.remove([3, 7, 11])
    np.testing.assert_array_equal(m.coef_, snap.coef_)
    np.testing.assert_array_equal(m.intercept_, snap.intercept_)


def test_no_convergence_falls_back_to_exact_intervals(monkeypatch, breast_cancer):
    """If the iteration cannot reach its rounding floor the exact-interval region answers
    (still valid); ``recenter=False`` keeps the regions around β₁."""
    X, y = _standardised(breast_cancer)
    m = deltafit.LinearClassifier(loss="squared_hinge", C=1.0, tol=1e-13).fit(X[:300], y[:300])
    ids = np.arange(0, 90, 3)
    s = deltafit.sensitivity(m, method="sphere").remove(ids)
    assert isinstance(curvature_region(s, recenter=False), CurvatureRegion)
    monkeypatch.setattr(_curvature_solve, "_MAX_STEPS", 0)
    assert _curvature_solve.solved_region(s) is None
    reg = curvature_region(s)
    assert isinstance(reg, CurvatureRegion)
    keep = np.ones(300, dtype=bool)
    keep[ids] = False
    _check_against_refit(m, s, reg, X[:300][keep], y[:300][keep], None, X[300:])
