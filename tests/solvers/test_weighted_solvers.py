"""Sample weights in the solvers (issue 15, part 3): ``C Σ w_i ℓ(t_i, z_i) + ½‖β‖²``.

* parity with scikit-learn given the same weights, on breast cancer (standardized, a constant
  column appended as the penalised intercept feature): ``LogisticRegression`` (newton-cg,
  1e-6 on coefficients), ``LinearSVC`` squared hinge (dual and primal LIBLINEAR, 1e-6) and
  hinge (dual LIBLINEAR, 1e-5), ``Ridge`` for the squared loss (1e-8);
* the hinge solvers against an independent reference of the weighted dual (scipy's L-BFGS-B
  with per-sample bounds plus an exact solve on its sets, 1e-9);
* kernel solvers against the primal ones on a linear kernel (decisions to 1e-9);
* a zero weight is an absent sample (bitwise for the primal solvers), weight 2 is a
  duplicated row (1e-9), None is the unweighted solve (bitwise);
* the certificates stay true for the weighted objective (hypothesis): ``‖β − β*‖ ≤ grad_norm``
  for early-stopped Newton and hinge iterates;
* bad weights are refused with a ValueError that names the problem.
"""

from __future__ import annotations

import warnings

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from sklearn.exceptions import ConvergenceWarning
from sklearn.linear_model import LogisticRegression, Ridge
from sklearn.preprocessing import StandardScaler
from sklearn.svm import LinearSVC

from deltafit.losses import get_loss
from deltafit.solvers import hinge_kernel, hinge_primal, newton_kernel, newton_primal
from hypothesis_profiles import examples

CS = [0.01, 0.1, 1.0]


def _rel(a, b):
    """max |a − b| / max(1, max |b|)."""
    a, b = np.asarray(a, dtype=float), np.asarray(b, dtype=float)
    return float(np.max(np.abs(a - b)) / max(1.0, float(np.max(np.abs(b)))))


@pytest.fixture(scope="module")
def cancer():
    """(F, t, y, w): standardized breast cancer with a constant intercept column, labels ±1
    and {0, 1}, and random positive weights."""
    from sklearn.datasets import load_breast_cancer

    X, y = load_breast_cancer(return_X_y=True)
    F = np.hstack([StandardScaler().fit_transform(X), np.ones((X.shape[0], 1))])
    t = np.where(y == 1, 1.0, -1.0)
    w = np.random.default_rng(15).uniform(0.2, 3.0, y.shape[0])
    return F, t, y, w


def _quiet(fn, *args, **kwargs):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        return fn(*args, **kwargs)


# ---------------------------------------------------------------------------------------------
# parity with scikit-learn
# ---------------------------------------------------------------------------------------------
@pytest.mark.parametrize("C", CS + [10.0])
def test_weighted_logistic_matches_logistic_regression(cancer, C):
    F, t, y, w = cancer
    res = newton_primal(F, t, get_loss("logistic"), C, sample_weight=w)
    assert res.converged
    lr = _quiet(
        LogisticRegression(
            C=C, fit_intercept=False, solver="newton-cg", tol=1e-14, max_iter=10**5
        ).fit,
        F,
        y,
        sample_weight=w,
    )
    assert _rel(res.coef, lr.coef_.ravel()) <= 1e-6  # measured ≤ 1e-9
    # the weights matter: the unweighted fit is far from it
    assert _rel(newton_primal(F, t, get_loss("logistic"), C).coef, lr.coef_.ravel()) > 1e-3


@pytest.mark.parametrize("C", CS)
@pytest.mark.parametrize("dual,tol", [(True, 1e-8), (False, 1e-12)])
def test_weighted_squared_hinge_matches_linear_svc(cancer, C, dual, tol):
    """LIBLINEAR's precision: its dual coordinate descent at tol 1e-8 (measured ≤ 1e-9; at
    tol 1e-12 it does not converge) and its primal trust-region Newton (measured ≤ 5e-8)."""
    F, t, y, w = cancer
    res = newton_primal(F, t, get_loss("squared_hinge"), C, sample_weight=w)
    assert res.converged
    svc = _quiet(
        LinearSVC(
            C=C, loss="squared_hinge", fit_intercept=False, dual=dual, tol=tol, max_iter=10**6
        ).fit,
        F,
        y,
        sample_weight=w,
    )
    assert _rel(res.coef, svc.coef_.ravel()) <= 1e-6


@pytest.mark.parametrize("C", CS)
def test_weighted_hinge_matches_linear_svc(cancer, C):
    """LIBLINEAR's dual coordinate descent with per-instance C_i = C w_i, at tol 1e-8 (at
    1e-12 it stalls on this data for C ≥ 0.1): 1e-5 on the coefficients (measured ≤ 1e-8)."""
    F, t, y, w = cancer
    res = hinge_primal(F, t, C, sample_weight=w)
    assert res.converged
    svc = _quiet(
        LinearSVC(C=C, loss="hinge", fit_intercept=False, dual=True, tol=1e-8, max_iter=10**6).fit,
        F,
        y,
        sample_weight=w,
    )
    assert _rel(res.coef, svc.coef_.ravel()) <= 1e-5


@pytest.mark.parametrize("C", [0.1, 10.0])
def test_weighted_squared_loss_matches_ridge(cancer, C):
    F, _, _, w = cancer
    target = F[:, 0] - 0.5 * F[:, 3] + np.random.default_rng(1).normal(size=F.shape[0])
    X = F[:, 1:]
    res = newton_primal(X, target, get_loss("squared"), C, sample_weight=w)
    ref = Ridge(alpha=1.0 / (2.0 * C), fit_intercept=False, solver="cholesky").fit(
        X, target, sample_weight=w
    )
    assert _rel(res.coef, ref.coef_.ravel()) <= 1e-8


# ---------------------------------------------------------------------------------------------
# the hinge against an independent solver of the weighted dual
# ---------------------------------------------------------------------------------------------
def _weighted_hinge_reference(F, t, Cw, band=1e-5):
    """β* of ``Σ Cw_i max(0, 1 − t_i f_iᵀβ) + ½‖β‖²`` (written for this test, no deltafit code):
    the dual ``min ½αᵀQα − Σα, 0 ≤ α_i ≤ Cw_i`` by L-BFGS-B at its tightest tolerances, then
    the exact optimum from the sets it shows (margin < 1: α = Cw, margin > 1: α = 0, ≈ 1:
    free, with t_i z_i = 1 solved by least squares), checked against those sets."""
    from scipy.optimize import minimize

    Z = F * t[:, None]
    Q = Z @ Z.T

    def fun(a):
        Qa = Q @ a
        return 0.5 * a @ Qa - a.sum(), Qa - 1.0

    res = minimize(
        fun,
        np.zeros(t.size),
        jac=True,
        method="L-BFGS-B",
        bounds=list(zip(np.zeros(t.size), Cw)),
        options={"maxiter": 100000, "maxfun": 200000, "ftol": 1e-16, "gtol": 1e-13, "maxcor": 50},
    )
    alpha = np.clip(res.x, 0.0, Cw)
    margin = Z @ (alpha @ Z)
    U = margin < 1.0 - band
    free = np.abs(margin - 1.0) <= band
    a = np.zeros(t.size)
    a[U] = Cw[U]
    if free.any():
        a[free] = np.linalg.lstsq(
            Q[np.ix_(free, free)], 1.0 - Q[np.ix_(free, U)] @ a[U], rcond=None
        )[0]
    beta = a @ Z
    m = Z @ beta
    assert np.all(m[U] < 1.0 + 1e-8) and np.all(m[~(U | free)] > 1.0 - 1e-8)
    assert np.allclose(m[free], 1.0, rtol=0.0, atol=1e-8), "reference: inconsistent sets"
    return beta


@pytest.mark.parametrize("C", CS)
def test_weighted_hinge_matches_independent_reference(cancer, C):
    F, t, _, w = cancer
    res = hinge_primal(F, t, C, sample_weight=w)
    ref = _weighted_hinge_reference(F, t, C * w)
    assert _rel(res.coef, ref) <= 1e-9
    # the certificates of the weighted problem
    assert np.all(res.alpha >= 0.0) and np.all(res.alpha <= C * w)
    z = F @ res.coef
    hinge = np.maximum(0.0, 1.0 - t * z)
    primal = C * float(w @ hinge) + 0.5 * res.coef @ res.coef
    assert abs(res.objective - primal) <= 1e-10 * max(1.0, primal)
    assert abs(res.objective - res.dual_objective - res.duality_gap) <= 1e-9 * max(1.0, primal)
    assert 0.0 <= res.duality_gap <= 1e-8 * max(1.0, primal)
    assert np.linalg.norm(res.coef - ref) <= res.grad_norm


def test_weighted_hinge_warm_start_after_reweighting(cancer):
    """The reweight path: α of one weighting is a warm start for another (clipped to the new
    box), and lands on the cold solve."""
    F, t, _, w = cancer
    first = hinge_primal(F, t, 0.1, sample_weight=w)
    w2 = w.copy()
    w2[::7] *= 0.25  # shrinks some boxes below the old α
    cold = hinge_primal(F, t, 0.1, sample_weight=w2)
    warm = hinge_primal(F, t, 0.1, sample_weight=w2, alpha0=first.alpha)
    assert warm.converged and _rel(warm.coef, cold.coef) <= 1e-9
    assert np.all(warm.alpha <= 0.1 * w2)
    again = hinge_primal(F, t, 0.1, sample_weight=w2, alpha0=cold.alpha)
    assert again.n_iter <= 2 and _rel(again.coef, cold.coef) <= 1e-12


# ---------------------------------------------------------------------------------------------
# kernel solvers against the primal ones (linear kernel)
# ---------------------------------------------------------------------------------------------
@pytest.mark.parametrize("loss", ["logistic", "squared_hinge"])
@pytest.mark.parametrize("C", [0.1, 1.0])
def test_weighted_newton_kernel_matches_primal(cancer, loss, C):
    F, t, _, w = cancer
    K = F @ F.T
    p = newton_primal(F, t, get_loss(loss), C, sample_weight=w)
    k = newton_kernel(K, t, get_loss(loss), C, sample_weight=w)
    assert p.converged and k.converged
    assert _rel(K @ k.coef, F @ p.coef) <= 1e-9
    assert _rel(k.coef @ F, p.coef) <= 1e-9
    assert abs(k.objective - p.objective) <= 1e-9 * p.objective


@pytest.mark.parametrize("C", CS)
def test_weighted_hinge_kernel_matches_primal(cancer, C):
    F, t, _, w = cancer
    K = F @ F.T
    p = hinge_primal(F, t, C, sample_weight=w)
    k = hinge_kernel(K, t, C, sample_weight=w)
    assert p.converged and k.converged
    assert _rel(K @ k.coef, F @ p.coef) <= 1e-9
    assert np.all(k.alpha <= C * w) and np.allclose(k.coef, t * k.alpha, rtol=0, atol=0)
    assert abs(k.objective - p.objective) <= 1e-9 * max(1.0, p.objective)


# ---------------------------------------------------------------------------------------------
# None, zero weights, integer multiplicity
# ---------------------------------------------------------------------------------------------
def _solve(kind, F, t, C, **kw):
    if kind == "logistic" or kind == "squared_hinge":
        return newton_primal(F, t, get_loss(kind), C, **kw)
    if kind == "kernel-logistic":
        return newton_kernel(F @ F.T, t, get_loss("logistic"), C, **kw)
    if kind == "hinge":
        return hinge_primal(F, t, C, **kw)
    return hinge_kernel(F @ F.T, t, C, **kw)


KINDS = ["logistic", "squared_hinge", "kernel-logistic", "hinge", "kernel-hinge"]


@pytest.mark.parametrize("kind", KINDS)
def test_zero_weight_is_an_absent_sample(cancer, kind):
    F, t, _, w = cancer
    rng = np.random.default_rng(3)
    w0 = w.copy()
    gone = rng.choice(t.size, 80, replace=False)
    w0[gone] = 0.0
    keep = w0 > 0.0
    if kind.startswith("kernel"):
        K = F @ F.T
        solver = (
            (lambda *a, **k: newton_kernel(*a[:2], get_loss("logistic"), *a[2:], **k))
            if kind == "kernel-logistic"
            else hinge_kernel
        )
        a = solver(K, t, 1.0, sample_weight=w0)
        b = solver(K[np.ix_(keep, keep)], t[keep], 1.0, sample_weight=w0[keep])
    else:
        a = _solve(kind, F, t, 1.0, sample_weight=w0)
        b = _solve(kind, F[keep], t[keep], 1.0, sample_weight=w0[keep])
    if kind.startswith("kernel"):
        # the expansion over all n samples: 0 on the absent ones, the subproblem's elsewhere
        assert a.coef.shape == (t.size,) and np.all(a.coef[~keep] == 0.0)
        np.testing.assert_array_equal(a.coef[keep], b.coef)
    else:
        np.testing.assert_array_equal(a.coef, b.coef)
    if kind.endswith("hinge") and kind != "squared_hinge":
        assert a.alpha.shape == (t.size,) and np.all(a.alpha[~keep] == 0.0)
        np.testing.assert_array_equal(a.alpha[keep], b.alpha)
        assert a.duality_gap == b.duality_gap
    assert a.grad_norm == b.grad_norm and a.objective == b.objective


@pytest.mark.parametrize("kind", KINDS)
def test_all_zero_weights_give_zero(cancer, kind):
    F, t, _, _ = cancer
    res = _solve(kind, F, t, 1.0, sample_weight=np.zeros(t.size))
    assert res.converged and np.all(res.coef == 0.0) and res.objective == 0.0


@pytest.mark.parametrize("kind", ["kernel-logistic", "kernel-hinge"])
def test_kernel_callback_sees_all_samples_with_zero_weights(cancer, kind):
    F, t, _, w = cancer
    w0 = w.copy()
    w0[:50] = 0.0
    seen = []

    def cb(it, coef, grad_norm, objective, grad):
        seen.append(
            (
                coef.shape,
                grad.shape,
                float(np.max(np.abs(coef[:50]), initial=0.0)),
                float(np.max(np.abs(grad[:50]), initial=0.0)),
            )
        )
        return False

    _solve(kind, F, t, 1.0, sample_weight=w0, callback=cb)
    assert seen and all(
        s[:2] == ((t.size,), (t.size,)) and s[2] == 0.0 and s[3] == 0.0 for s in seen
    )


@pytest.mark.parametrize("kind", KINDS)
def test_none_weights_are_the_unweighted_solve(cancer, kind):
    """``sample_weight=None`` is the unweighted code path (bitwise); all-ones weights the same
    problem (to rounding)."""
    F, t, _, _ = cancer
    base = _solve(kind, F, t, 0.5)
    none = _solve(kind, F, t, 0.5, sample_weight=None)
    np.testing.assert_array_equal(base.coef, none.coef)
    assert base.grad_norm == none.grad_norm and base.n_iter == none.n_iter
    ones = _solve(kind, F, t, 0.5, sample_weight=np.ones(t.size))
    scores = (F @ F.T) if kind.startswith("kernel") else F
    assert _rel(scores @ ones.coef, scores @ base.coef) <= 1e-9


@pytest.mark.parametrize("kind", KINDS)
def test_weight_two_is_a_duplicated_row(cancer, kind):
    """Integer multiplicity: weight 2 on a row equals the row twice (decisions on the original
    rows to 1e-9; the kernel expansion splits a duplicated row's coefficient between its
    copies, so compare decisions)."""
    F, t, _, _ = cancer
    rng = np.random.default_rng(4)
    dup = rng.choice(t.size, 60, replace=False)
    w2 = np.ones(t.size)
    w2[dup] = 2.0
    a = _solve(kind, F, t, 0.3, sample_weight=w2)
    Fd, td = np.vstack([F, F[dup]]), np.concatenate([t, t[dup]])
    b = _solve(kind, Fd, td, 0.3)
    if kind.startswith("kernel"):
        za, zb = (F @ F.T) @ a.coef, (F @ Fd.T) @ b.coef
    else:
        za, zb = F @ a.coef, F @ b.coef
    assert _rel(za, zb) <= 1e-9
    assert abs(a.objective - b.objective) <= 1e-9 * max(1.0, b.objective)


# ---------------------------------------------------------------------------------------------
# the certificates hold for the weighted objective (property test)
# ---------------------------------------------------------------------------------------------
def _problem(seed, n, p, zero_frac):
    rng = np.random.default_rng(seed)
    F = np.hstack([rng.normal(size=(n, p)) * rng.uniform(0.2, 3.0, p), np.ones((n, 1))])
    t = np.where(F[:, 0] + rng.normal(scale=1.0, size=n) > 0, 1.0, -1.0)
    w = rng.exponential(size=n) * rng.choice([0.1, 1.0, 10.0], size=n)
    w[rng.random(n) < zero_frac] = 0.0
    return F, t, w


def _stop_at(k):
    return lambda it, *_: it >= k


PROPERTY = settings(
    max_examples=examples(40), deadline=None, suppress_health_check=[HealthCheck.too_slow]
)


@PROPERTY
@given(
    seed=st.integers(0, 2**32 - 1),
    n=st.integers(2, 40),
    p=st.integers(1, 6),
    C=st.floats(0.01, 100.0),
    zero_frac=st.sampled_from([0.0, 0.3]),
    loss=st.sampled_from(["logistic", "squared_hinge"]),
    stop=st.integers(0, 3),
)
def test_newton_certificate_holds_with_weights(seed, n, p, C, zero_frac, loss, stop):
    F, t, w = _problem(seed, n, p, zero_frac)
    lo = get_loss(loss)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)  # tol 1e-15 may be out of reach
        star = newton_primal(F, t, lo, C, sample_weight=w, tol=1e-15, max_iter=200)
        kstar = newton_kernel(F @ F.T, t, lo, C, sample_weight=w, tol=1e-15, max_iter=200)
    early = newton_primal(F, t, lo, C, sample_weight=w, callback=_stop_at(stop))
    slack = star.grad_norm + 1e-12 * (1.0 + np.linalg.norm(star.coef))
    assert np.linalg.norm(early.coef - star.coef) <= early.grad_norm + slack
    # the kernel form (RKHS norm of the error of β = Σ α_i f_i)
    K = F @ F.T
    kearly = newton_kernel(K, t, lo, C, sample_weight=w, callback=_stop_at(stop))
    d = kearly.coef - kstar.coef
    kslack = kstar.grad_norm + 1e-12 * (1.0 + np.linalg.norm(star.coef))
    assert np.sqrt(max(d @ K @ d, 0.0)) <= kearly.grad_norm + kslack


@PROPERTY
@given(
    seed=st.integers(0, 2**32 - 1),
    n=st.integers(2, 40),
    p=st.integers(1, 6),
    C=st.floats(0.01, 100.0),
    zero_frac=st.sampled_from([0.0, 0.3]),
    stop=st.integers(0, 3),
    kernel=st.booleans(),
)
def test_hinge_certificate_holds_with_weights(seed, n, p, C, zero_frac, stop, kernel):
    """The certified radius of an early-stopped hinge solve (primal or kernel form) covers the
    optimum; β* from the exact solve (its actual error is at the rounding level, ≈ 1e-12
    relative: far below the radius, which stays a worst-case bound)."""
    F, t, w = _problem(seed, n, p, zero_frac)
    Cw = C * w
    star = hinge_primal(F, t, C, sample_weight=w)
    assert star.converged and star.kkt_violation <= 1e-9
    assert np.all(star.alpha >= 0.0) and np.all(star.alpha <= Cw)
    if kernel:
        early = hinge_kernel(F @ F.T, t, C, sample_weight=w, callback=_stop_at(stop))
        beta = early.coef @ F
    else:
        early = hinge_primal(F, t, C, sample_weight=w, callback=_stop_at(stop))
        beta = early.coef
    assert np.all(early.alpha >= 0.0) and np.all(early.alpha <= Cw)
    assert early.duality_gap >= 0.0
    slack = 1e-10 * (1.0 + np.linalg.norm(star.coef))
    assert np.linalg.norm(beta - star.coef) <= early.grad_norm + slack


# ---------------------------------------------------------------------------------------------
# bad weights
# ---------------------------------------------------------------------------------------------
BAD = [
    (np.ones(5), r"shape \(10,\)"),
    (np.ones((10, 1)), r"shape \(10,\)"),
    (1.0, r"shape \(10,\)"),
    (np.r_[np.ones(9), -1.0], "non-negative"),
    (np.r_[np.ones(9), np.nan], "NaN"),
    (np.r_[np.ones(9), np.inf], "infinite"),
    (np.r_[np.ones(9), 1e308], "overflows"),
    (np.array(["a"] * 10), "array of numbers"),
    (np.ones(10) + 1j, "complex"),
]


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("bad,match", BAD, ids=[m for _, m in BAD])
def test_bad_weights_are_refused(kind, bad, match):
    rng = np.random.default_rng(0)
    F = np.hstack([rng.normal(size=(10, 3)), np.ones((10, 1))])
    t = np.where(rng.random(10) < 0.5, -1.0, 1.0)
    with pytest.raises(ValueError, match=match):
        _solve(kind, F, t, 10.0, sample_weight=bad)


def test_warm_start_of_wrong_length_is_refused_with_zero_weights(cancer):
    F, t, _, w = cancer
    w0 = w.copy()
    w0[0] = 0.0
    with pytest.raises(ValueError, match="alpha0"):
        hinge_primal(F, t, 1.0, sample_weight=w0, alpha0=np.zeros(3))
    with pytest.raises(ValueError, match="coef0"):
        newton_kernel(F @ F.T, t, get_loss("logistic"), 1.0, sample_weight=w0, coef0=np.zeros(3))
