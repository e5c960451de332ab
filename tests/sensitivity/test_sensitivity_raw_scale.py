"""Exact what-ifs stay tight on unscaled features (``method="exact"``, squared loss).

With features in raw units (sizes ~1e2–1e3) the diagonal of ``H₂ = I + 2C₂ ΦᵀWΦ`` spans
eight orders of magnitude, and a rounding term built from norm products (``‖M₂‖ ‖x‖``,
``cond(H₂) ‖β‖``) made the certified intervals 1e-2 of the decision scale wide, leaving labels
undecided that the exact centre decides.  The certificate now follows the problem solved: the
computed residual of the answer against the exact statistics with a componentwise bound on its
rounding, measured in the scaled norm ``‖diag(H₂)^{-1/2}·‖`` with a verified floor on the
scaled Hessian's spectrum.

Twins: a fresh fit on the changed data (``LinearClassifier`` / ``LinearRegressor``) and the
optimum of the changed problem solved in extended precision (``np.longdouble`` residuals,
iterative refinement).  Real data: digits restricted to 6 classes with the pixels scaled to
0–160, and wine (raw units, proline ~1e3).
"""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from sklearn.datasets import load_digits, load_wine

import deltafit as df
from hypothesis_profiles import examples
from reference import augment

WIDTH = 1e-6  # of the decision scale: the largest |decision| of the refit (as in
#              test_sensitivity_exact)
SETTINGS = dict(
    deadline=None,
    derandomize=True,
    database=None,
    max_examples=examples(60),
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)


def extended_reference(X, T, w, C, s):
    """Solution of ``min ½‖β‖² + C Σ w_i ‖t_i − φ_iᵀβ‖²`` over ``φ = [x, s]`` (each column of
    ``T`` a target), refined with residuals in ``np.longdouble``: ``(β, Φ)``."""
    F = augment(np.asarray(X, dtype=np.float64), s)
    T = np.asarray(T, dtype=np.float64)
    T = T[:, None] if T.ndim == 1 else T
    FL, TL, wL = F.astype(np.longdouble), T.astype(np.longdouble), w.astype(np.longdouble)
    ML = (FL * wL[:, None]).T @ FL
    ML[np.diag_indices_from(ML)] += np.longdouble(0.5) / np.longdouble(C)
    bL = (FL * wL[:, None]).T @ TL
    M = ML.astype(np.float64)
    beta = np.linalg.solve(M, bL.astype(np.float64)).astype(np.longdouble)
    for _ in range(8):
        r = bL - ML @ beta
        beta = beta + np.linalg.solve(M, r.astype(np.float64)).astype(np.longdouble)
    return beta, F


def targets(model, y):
    if not hasattr(model, "classes_"):
        return np.asarray(y, dtype=float)
    cls = model.classes_
    if cls.size == 2:
        return np.where(np.asarray(y) == cls[1], 1.0, -1.0)
    return np.where(np.asarray(y)[:, None] == cls[None, :], 1.0, -1.0)


def extended_decisions(model, X, y, w, C, Xq):
    s = model.intercept_scaling if model.fit_intercept else 0.0
    beta, _ = extended_reference(X, targets(model, y), w, C, s)
    out = (augment(Xq, s).astype(np.longdouble) @ beta).astype(np.float64)
    return out[:, 0] if out.shape[1] == 1 else out


def _inside(lo, hi, f, what):
    bad = (f < lo) | (f > hi)
    assert not bad.any(), (
        f"{what}: outside the interval at {np.argwhere(bad)[:5].tolist()}"
        f" by {np.max(np.maximum(lo - f, f - hi)):.2e} "
        f"(half-width {np.max(hi - lo) / 2:.2e})"
    )


# ------------------------------------------------------------------------ real data
@pytest.fixture(scope="module")
def digits6():
    X, y = load_digits(n_class=6, return_X_y=True)
    return X[:700] * 10.0, y[:700], X[700:] * 10.0  # pixels 0-160


@pytest.fixture(scope="module")
def wine():
    X, y = load_wine(return_X_y=True)
    perm = np.random.default_rng(0).permutation(y.size)
    return X[perm[:130]], y[perm[:130]], X[perm[130:]]


def _change(s, X, y, Xa, ya):
    """Remove 5 samples, add 4 (weighted), relabel one, reweight two; the changed data."""
    cls = np.unique(y)
    ids = s.add(Xa, ya, sample_weight=np.array([1.0, 2.0, 0.5, 1.5]))
    s.remove([1, 7, 30, 44, 61])
    new = cls[(np.searchsorted(cls, y[10]) + 1) % cls.size]
    s.relabel([10], [new])
    s.reweight([12, int(ids[0])], [3.0, 0.25])
    XX = np.vstack([X, Xa])
    yy = np.concatenate([y, ya])
    ww = np.concatenate([np.ones(y.size), [1.0, 2.0, 0.5, 1.5]])
    yy[10] = new
    ww[12], ww[y.size] = 3.0, 0.25
    keep = np.setdiff1d(np.arange(yy.size), [1, 7, 30, 44, 61])
    return XX[keep], yy[keep], ww[keep]


@pytest.mark.parametrize("data", ["digits6", "wine"])
@pytest.mark.parametrize("change", ["remove", "mixed"])
def test_raw_features_give_rounding_width_intervals_that_decide_every_label(request, data, change):
    X, y, Xt = request.getfixturevalue(data)
    m = df.LinearClassifier().fit(X[:-4], y[:-4])
    s = df.sensitivity(m)
    assert s.method == "exact"
    Xf, yf = X[:-4], y[:-4]
    if change == "remove":
        rem = np.random.default_rng(3).choice(yf.size, 6, replace=False)
        s.remove(rem)
        keep = np.setdiff1d(np.arange(yf.size), rem)
        X2, y2, w2 = Xf[keep], yf[keep], np.ones(keep.size)
    else:
        X2, y2, w2 = _change(s, Xf, yf, X[-4:], y[-4:])
    Q = np.vstack([Xt, X2])
    refit = df.LinearClassifier().fit(X2, y2, sample_weight=w2)
    f = refit.decision_function(Q)
    ext = extended_decisions(m, X2, y2, w2, m.C, Q)
    lo, hi = s.decision_bounds(Q)
    center = 0.5 * (lo + hi)
    scale = float(np.max(np.abs(f)))
    assert np.max(np.abs(center - f)) <= 1e-10 * scale
    _inside(lo, hi, f, "refit")
    _inside(lo, hi, ext, "extended-precision optimum")
    assert np.max(hi - lo) <= WIDTH * scale, f"width {np.max(hi - lo) / scale:.2e}"
    labels, certain = s.predict_certain(Q)
    assert certain.all(), f"{np.mean(certain):.4f} decided"
    np.testing.assert_array_equal(labels, refit.predict(Q))
    np.testing.assert_array_equal(labels, m.classes_[np.argmax(center, axis=1)])
    # coefficients: the refit's lie inside the (per-coordinate) bounds
    clo, chi = s.coef_bounds()
    assert np.all((clo <= refit.coef_) & (refit.coef_ <= chi))


def test_raw_regressor_interval_is_rounding_width():
    X, _ = load_wine(return_X_y=True)
    X, t = X[:, :-1], X[:, -1]  # proline (~1e3) from the other raw measurements
    m = df.LinearRegressor(C=0.5).fit(X[:150], t[:150])
    s = df.sensitivity(m)
    s.remove([0, 3, 9])
    ids = s.add(X[150:155], t[150:155])
    s.relabel([int(ids[0]), 20], [500.0, 800.0])
    keep = np.setdiff1d(np.arange(155), [0, 3, 9])
    t2 = t[:155].copy()
    t2[150], t2[20] = 500.0, 800.0
    X2, t2 = X[:155][keep], t2[keep]
    f = df.LinearRegressor(C=0.5).fit(X2, t2).predict(X)
    ext = extended_decisions(m, X2, t2, np.ones(t2.size), 0.5, X)
    lo, hi = s.decision_bounds(X)
    _inside(lo, hi, f, "refit")
    _inside(lo, hi, ext, "extended-precision optimum")
    assert np.max(hi - lo) <= WIDTH * float(np.max(np.abs(f)))


# ---------------------------------------------------- random badly scaled problems
@st.composite
def problems(draw):
    n = draw(st.integers(12, 50))
    p = draw(st.integers(1, 7))
    task = draw(st.sampled_from(["binary", "three", "regression"]))
    seed = draw(st.integers(0, 2**31 - 1))
    rng = np.random.default_rng(seed)
    scales = 10.0 ** rng.uniform(-2.0, 3.0, size=p)
    offsets = rng.normal(size=p) * scales * draw(st.sampled_from([0.0, 1.0, 5.0]))
    X = rng.normal(size=(n + 4, p)) * scales + offsets
    # features absent from every training row (present in the additions and the queries):
    # coordinates the changed problem may decouple
    dead = rng.random(p) < draw(st.sampled_from([0.0, 0.0, 0.3]))
    X[:n, dead] = 0.0
    if task == "regression":
        y = X @ (rng.normal(size=p) / scales) + rng.normal(size=n + 4)
    else:
        k = 2 if task == "binary" else 3
        y = np.arange(n + 4) % k
        rng.shuffle(y)
    C = float(10.0 ** rng.uniform(-2.0, 2.0))
    kinds = draw(
        st.lists(
            st.sampled_from(["remove", "add", "relabel", "reweight"]),
            min_size=1,
            max_size=3,
            unique=True,
        )
    )
    C_new = draw(st.sampled_from([None, None, 2.5]))
    fit_intercept = draw(st.booleans())
    Xq = np.vstack([X, rng.normal(size=(20, p)) * scales + offsets])
    return X, y, Xq, task, C, kinds, C_new, fit_intercept, rng


@settings(**SETTINGS)
@given(problems())
def test_badly_scaled_random_problems_contain_the_refit(prob):
    X, y, Xq, task, C, kinds, C_new, fit_intercept, rng = prob
    n = y.size - 4
    Est = df.LinearRegressor if task == "regression" else df.LinearClassifier
    m = Est(C=C, fit_intercept=fit_intercept).fit(X[:n], y[:n])
    s = df.sensitivity(m, C_new=C_new)
    XX, yy = X.copy(), y.astype(float if task == "regression" else y.dtype).copy()
    ww = np.concatenate([np.ones(n), np.zeros(4)])
    gone = []
    if "add" in kinds:
        wa = rng.uniform(0.2, 3.0, size=4)
        s.add(X[n:], y[n:], sample_weight=wa)
        ww[n:] = wa
    if "remove" in kinds:
        s.remove([0, 2])
        gone += [0, 2]
    if "relabel" in kinds:
        new = yy[3] + 2.0 if task == "regression" else (yy[3] + 1) % (2 if task == "binary" else 3)
        s.relabel([3], [new])
        yy[3] = new
    if "reweight" in kinds:
        s.reweight([4, 5], [0.0, 4.0])
        ww[4], ww[5] = 0.0, 4.0
    keep = np.setdiff1d(np.flatnonzero(ww > 0), gone)
    X2, y2, w2 = XX[keep], yy[keep], ww[keep]
    if task != "regression" and np.unique(y2).size < 2:
        return
    C2 = C if C_new is None else C_new
    lo, hi = s.decision_bounds(Xq)
    ext = extended_decisions(m, X2, y2, w2, C2, Xq)
    _inside(lo, hi, ext, "extended-precision optimum")
    refit = Est(C=C2, fit_intercept=fit_intercept)
    if task == "regression" or np.unique(y2).size == np.unique(y).size:
        refit.fit(X2, y2, sample_weight=w2)
        f = refit.predict(Xq) if task == "regression" else refit.decision_function(Xq)
        _inside(lo, hi, f, "refit")
        clo, chi = s.coef_bounds()
        assert np.all((clo <= refit.coef_) & (refit.coef_ <= chi))


@pytest.mark.parametrize("sparse", [False, True], ids=["dense", "csr"])
def test_raw_features_without_stored_rows(sparse):
    # keep_data=False: the stored solution's gradient comes from the exact statistics
    import scipy.sparse as sp

    X, y = load_wine(return_X_y=True)
    y = (y == 1).astype(int)
    Xf = sp.csr_matrix(X) if sparse else X
    m = df.LinearClassifier(keep_data=False).fit(Xf[:150], y[:150])
    s = df.sensitivity(m)
    rem = np.array([0, 4, 77])
    s.remove(rem, X=Xf[rem], y=y[rem])
    s.relabel([9], [1 - y[9]], X=Xf[[9]], y_old=y[[9]])
    keep = np.setdiff1d(np.arange(150), rem)
    y2 = y[:150].copy()
    y2[9] = 1 - y2[9]
    refit = df.LinearClassifier().fit(X[keep], y2[keep])
    f = refit.decision_function(X)
    ext = extended_decisions(m, X[keep], y2[keep], np.ones(keep.size), m.C, X)
    lo, hi = s.decision_bounds(X)
    _inside(lo, hi, f, "refit")
    _inside(lo, hi, ext, "extended-precision optimum")
    assert np.max(hi - lo) <= WIDTH * float(np.max(np.abs(f)))
    labels, certain = s.predict_certain(X)
    assert certain.all()
    np.testing.assert_array_equal(labels, refit.predict(X))
