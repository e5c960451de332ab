"""Approximate leave-one-out (ALO) against exact leave-one-out by brute-force refits.

ALO is an APPROXIMATION (ARCHITECTURE.md, "Principles": named so everywhere); each test states how
close it must
be to the exact twin and why.  The exact leave-one-out scores ``⟨Φ(x_t), β_{−t}⟩`` come from n
refits by independent solvers (tests/reference.py): scikit-learn's Ridge / KernelRidge /
LogisticRegression on ``[X, s]`` and LinearSVC polished by an active-set step (squared hinge)
for linear models, and for the hinge an exact
active-set QP checked against LinearSVC(loss="hinge"); kernel refits of the smooth losses use
deltafit's Newton solver on the kernel matrix without the sample (acceptable: a kernel model is
checked against its own exact solution on less data, and that solver is tested against
scikit-learn elsewhere).  Data: subsamples of 150–200 rows of breast cancer and digits.

Tolerances
----------
* squared loss: ALO is exact leave-one-out (one Newton step solves a quadratic exactly), so
  1e-8 relative to ``max(1, |z|)`` — rounding of one Cholesky factorisation and of the refits.
* logistic / squared hinge: one Newton step from the full solution; its error is second order
  in the change ``β − β_{−t}`` (logistic, smooth Hessian) or comes from samples crossing the
  margin (squared hinge, piecewise-constant Hessian).  Measured and asserted: the largest
  ``|ALO − LOO|`` relative to the spread (standard deviation) of the exact LOO scores, with about
  a 3-5× margin over the measured value, and the LOO error rates within 1 point.
* hinge: first order in a non-smooth problem; removing a sample can move other samples
  between the margin sets, which ALO (He et al. §1) cannot see.  Asserted: error rates within 3
  points (measured on 24 problems — 4 subsamples × C in {0.1, 1, 10} × linear / rbf — at
  most 4 samples of 150–200; on all 569 breast-cancer rows at most 0.5 point), and
  the median ``|ALO − LOO|`` below 5 % of the spread (most samples keep their sets: ALO is
  exact for non-support vectors and first-order accurate elsewhere).
"""

from __future__ import annotations

import warnings

import numpy as np
import pytest
from sklearn.exceptions import ConvergenceWarning, NotFittedError
from sklearn.kernel_approximation import Nystroem
from sklearn.linear_model import LogisticRegression
from sklearn.svm import LinearSVC

import deltafit as df
from deltafit.losses import Loss, get_loss
from deltafit.model_selection._alo import (
    MARGIN_TOL,
    alo_decisions,
    alo_feature_map,
    alo_kernel,
    alo_primal,
)
from deltafit.solvers import newton_kernel, newton_primal
from reference import (
    augment,
    hinge_reference,
    kernel_features,
    kernel_ridge_reference,
    logistic_reference,
    reference_kernel,
    ridge_reference,
    squared_hinge_reference,
)

EXACT = 1e-8  # squared loss: ALO is exact LOO up to rounding
GAMMA = 0.02  # rbf width for the 64 digit pixels in [0, 1] (‖x − x'‖² ≈ 10–40)


# =============================================================================================
# data and exact leave-one-out references
# =============================================================================================
def _subsample(X, y, n, seed):
    idx = np.random.default_rng(seed).choice(X.shape[0], n, replace=False)
    return X[idx], np.where(y[idx] == 1, 1.0, -1.0)


@pytest.fixture(scope="module")
def bc(breast_cancer):
    """200 breast-cancer rows, labels ±1."""
    return _subsample(*breast_cancer, 200, 0)


@pytest.fixture(scope="module")
def dg(digits):
    """150 digits rows (odd vs even), labels ±1."""
    return _subsample(*digits, 150, 1)


def _loo(n, refit_score):
    return np.array([refit_score(np.arange(n) != i, i) for i in range(n)])


def loo_linear(F, t, fit):
    """Exact LOO scores ``F_i · β_{−i}`` with ``fit(F_keep, t_keep) -> β``."""
    return _loo(t.size, lambda keep, i: F[i] @ fit(F[keep], t[keep]))


def loo_kernel(K, t, fit):
    """Exact LOO scores ``K[i, keep] α_{−i}`` with ``fit(K_keep, t_keep, keep) -> α``."""
    return _loo(t.size, lambda keep, i: K[i, keep] @ fit(K[np.ix_(keep, keep)], t[keep], keep))


def newton_kernel_fit(loss, C, alpha0):
    def fit(Kk, tk, keep):
        return newton_kernel(
            Kk, tk, get_loss(loss), C, coef0=alpha0[keep], tol=1e-13, max_iter=200
        ).coef

    return fit


def hinge_loo(F, t, C, coef):
    """Exact hinge LOO scores: the reference QP on F without sample i, warm-started."""
    return _loo(
        t.size, lambda keep, i: F[i] @ hinge_reference(F[keep], t[keep], C, coef0=coef[keep])[0]
    )


def err(z, t):
    return float(np.mean(t * z <= 0))


def rel_to_spread(z_alo, z_loo):
    return float(np.max(np.abs(z_alo - z_loo)) / np.std(z_loo))


def assert_exact(z_alo, z_loo, tol=EXACT):
    scale = np.maximum(1.0, np.abs(z_loo))
    assert np.max(np.abs(z_alo - z_loo) / scale) <= tol


# =============================================================================================
# squared loss: exact leave-one-out
# =============================================================================================
def test_squared_linear_is_exact_loo(bc):
    X, t = bc
    model = df.LinearClassifier(loss="squared", C=1.0).fit(X, t)
    z_loo = loo_linear(augment(X, 1.0), t, lambda Fk, tk: ridge_reference(Fk[:, :-1], tk, 1.0, 1.0))
    assert_exact(alo_decisions(model), z_loo)
    assert_exact(alo_primal(augment(X, 1.0), t, "squared", 1.0, model.problem_.coef), z_loo)


@pytest.mark.parametrize("kernel", ["rbf", "linear"])
def test_squared_kernel_is_exact_loo(dg, kernel):
    # the linear kernel on 64 pixels + intercept has rank ≤ 65 < 150: K is singular, and ALO
    # never inverts it
    X, t = dg
    model = df.KernelClassifier(loss="squared", C=1.0, kernel=kernel, gamma=GAMMA).fit(X, t)
    K = reference_kernel(kernel, gamma=GAMMA, intercept_scaling=1.0)(X, X)
    z_loo = loo_kernel(K, t, lambda Kk, tk, keep: kernel_ridge_reference(Kk, tk, 1.0))
    assert_exact(alo_decisions(model), z_loo)
    assert_exact(alo_kernel(K, t, "squared", 1.0, model.dual_coef_), z_loo)


def test_squared_regressors_are_exact_loo(breast_cancer):
    # regression: predict the first breast-cancer feature from the other 29
    X, _ = breast_cancer
    X = X[np.random.default_rng(2).choice(X.shape[0], 150, replace=False)]
    X, target = X[:, 1:], X[:, 0]
    kr = df.KernelRegressor(C=10.0, kernel="rbf", gamma=0.1).fit(X, target)
    K = reference_kernel("rbf", gamma=0.1, intercept_scaling=1.0)(X, X)
    z_loo = loo_kernel(K, target, lambda Kk, tk, keep: kernel_ridge_reference(Kk, tk, 10.0))
    assert_exact(alo_decisions(kr), z_loo)
    # a linear model with an explicit (Nyström) feature map: ALO in the map's feature space
    fm = Nystroem(gamma=0.1, n_components=40, random_state=0).fit(X)
    lr = df.LinearRegressor(C=10.0, feature_map=fm).fit(X, target)
    F = augment(fm.transform(X), 1.0)
    z_loo = loo_linear(F, target, lambda Fk, tk: ridge_reference(Fk, tk, 10.0, 0.0))
    assert_exact(alo_decisions(lr), z_loo)


def test_squared_duplicates_and_tiny_n(bc):
    X, t = bc
    # duplicated rows (a singular kernel matrix and repeated samples): still exact
    Xd = np.vstack([X[:40], X[:10]])
    td = np.concatenate([t[:40], t[:10]])
    model = df.KernelClassifier(loss="squared", C=1.0, kernel="rbf", gamma=0.5).fit(Xd, td)
    K = reference_kernel("rbf", gamma=0.5, intercept_scaling=1.0)(Xd, Xd)
    z_loo = loo_kernel(K, td, lambda Kk, tk, keep: kernel_ridge_reference(Kk, tk, 1.0))
    assert_exact(alo_decisions(model), z_loo)
    # tiny n: two and three samples; one sample leaves the empty problem (β = 0, score 0)
    for n in (2, 3):
        lin = df.LinearClassifier(loss="squared", C=1.0).fit(X[:n], [-1, 1, 1][:n])
        zl = loo_linear(
            augment(X[:n], 1.0),
            lin.problem_.targets[:n],
            lambda Fk, tk: ridge_reference(Fk[:, :-1], tk, 1.0, 1.0),
        )
        assert_exact(alo_decisions(lin), zl)
    reg = df.KernelRegressor(C=1.0).fit(X[:1], [0.7])
    assert abs(alo_decisions(reg)[0]) <= 1e-12
    reg = df.LinearRegressor(C=1.0).fit(X[:1], [0.7])
    assert abs(alo_decisions(reg)[0]) <= 1e-12


# =============================================================================================
# logistic and squared hinge: one Newton step
# =============================================================================================
def test_logistic_linear_vs_sklearn_refits(bc):
    # measured: max |ALO − LOO| = 0.4 % of the spread, identical error rates
    X, t = bc
    model = df.LinearClassifier(loss="logistic", C=1.0).fit(X, t)
    F = augment(X, 1.0)
    z_loo = loo_linear(F, t, lambda Fk, tk: logistic_reference(Fk, tk, 1.0))
    z_alo = alo_decisions(model)
    assert rel_to_spread(z_alo, z_loo) <= 0.02
    assert abs(err(z_alo, t) - err(z_loo, t)) <= 0.01
    # ALO is much closer to LOO than the training scores are (it is not a no-op)
    z = F @ model.problem_.coef
    assert np.max(np.abs(z_alo - z_loo)) <= 0.1 * np.max(np.abs(z - z_loo))


def test_logistic_kernel_vs_refits(dg):
    # measured: 0.02 % of the spread (the kernel model's steps are small at C = 1)
    X, t = dg
    model = df.KernelClassifier(loss="logistic", C=1.0, gamma=GAMMA).fit(X, t)
    K = model.problem_.gram(model.problem_.live)
    z_loo = loo_kernel(K, t, newton_kernel_fit("logistic", 1.0, model.dual_coef_))
    z_alo = alo_decisions(model)
    assert rel_to_spread(z_alo, z_loo) <= 0.005
    assert err(z_alo, t) == err(z_loo, t)


def test_squared_hinge_linear_vs_sklearn_refits(bc):
    # measured: 1.1 % of the spread; 1 sample of 200 differs in its LOO label
    X, t = bc
    model = df.LinearClassifier(loss="squared_hinge", C=1.0).fit(X, t)
    z_loo = loo_linear(augment(X, 1.0), t, lambda Fk, tk: squared_hinge_reference(Fk, tk, 1.0))
    z_alo = alo_decisions(model)
    assert rel_to_spread(z_alo, z_loo) <= 0.05
    assert abs(err(z_alo, t) - err(z_loo, t)) <= 0.01


def test_squared_hinge_kernel_vs_refits(dg):
    # measured: 0.5 % of the spread, identical error rates
    X, t = dg
    model = df.KernelClassifier(loss="squared_hinge", C=1.0, gamma=GAMMA).fit(X, t)
    K = model.problem_.gram(model.problem_.live)
    z_loo = loo_kernel(K, t, newton_kernel_fit("squared_hinge", 1.0, model.dual_coef_))
    z_alo = alo_decisions(model)
    assert rel_to_spread(z_alo, z_loo) <= 0.03
    assert abs(err(z_alo, t) - err(z_loo, t)) <= 0.01


@pytest.mark.parametrize("loss", ["logistic", "squared_hinge"])
def test_smooth_kernel_form_equals_feature_form(dg, loss):
    # the kernel form (push-through identity, no K⁻¹) and the primal form on a factor F of K
    # (F Fᵀ = K) are the same formula: agreement to rounding
    X, t = dg
    model = df.KernelClassifier(loss=loss, C=3.0, gamma=GAMMA).fit(X, t)
    K = model.problem_.gram(model.problem_.live)
    F = kernel_features(K)
    beta = F.T @ model.dual_coef_
    a = alo_kernel(K, t, loss, 3.0, model.dual_coef_)
    b = alo_primal(F, t, loss, 3.0, beta)
    assert np.max(np.abs(a - b)) <= 1e-9 * max(1.0, np.max(np.abs(a)))
    # and through Nyström features with every sample a landmark (K = Φ̂Φ̂ᵀ)
    c = alo_decisions(model, n_components=t.size, random_state=0)
    assert np.max(np.abs(a - c)) <= 1e-6 * max(1.0, np.max(np.abs(a)))


# =============================================================================================
# hinge (He et al., "Approximate leave-one-out with kernel SVM")
# =============================================================================================
def test_hinge_reference_matches_liblinear(bc):
    # the exact reference QP agrees with LIBLINEAR's dual coordinate descent
    X, t = bc
    F = augment(X, 1.0)
    beta, coef = hinge_reference(F, t, 1.0)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        svc = LinearSVC(
            C=1.0,
            loss="hinge",
            fit_intercept=False,
            dual=True,
            tol=1e-10,
            max_iter=100000,
            random_state=0,
        ).fit(F, t)
    assert np.max(np.abs(svc.coef_.ravel() - beta)) <= 1e-6
    assert np.allclose(F.T @ coef, beta)
    assert np.all(t * coef >= 0) and np.all(t * coef <= 1.0)


def test_hinge_linear_vs_exact_loo(bc):
    X, t = bc
    F = augment(X, 1.0)
    beta, coef = hinge_reference(F, t, 1.0)
    z_lstsq = alo_primal(F, t, "hinge", 1.0, beta)  # g_V from the KKT least squares
    z_alo = alo_primal(F, t, "hinge", 1.0, beta, dual_coef=coef)  # g_V from the duals
    assert np.max(np.abs(z_lstsq - z_alo)) <= 1e-9
    z_loo = hinge_loo(F, t, 1.0, coef)
    z = F @ beta
    # measured: both error rates 2.5 %, median |ALO − LOO| at rounding level (|V| = 9)
    assert abs(err(z_alo, t) - err(z_loo, t)) <= 0.03
    assert np.median(np.abs(z_alo - z_loo)) <= 0.05 * np.std(z_loo)
    # non-support vectors (y z > 1) keep their score exactly, in ALO as in LOO
    out = t * z > 1.0 + MARGIN_TOL
    assert np.array_equal(z_alo[out], z[out])
    assert np.max(np.abs(z_loo[out] - z[out])) <= 1e-8
    # and ALO moves every other sample towards the wrong side, as leaving it out does
    assert np.all(t[~out] * (z_alo[~out] - z[~out]) <= 1e-12)


def test_hinge_rbf_vs_exact_loo(dg):
    X, t = dg
    K = reference_kernel("rbf", gamma=GAMMA, intercept_scaling=1.0)(X, X)
    F = kernel_features(K)
    beta, coef = hinge_reference(F, t, 1.0)
    z_alo = alo_kernel(K, t, "hinge", 1.0, coef)
    # kernel form and feature form (F Fᵀ = K) agree
    assert np.max(np.abs(z_alo - alo_primal(F, t, "hinge", 1.0, beta))) <= 1e-9
    z_loo = hinge_loo(F, t, 1.0, coef)
    # measured: both error rates 12.0 %, median |ALO − LOO| 0.8 % of the spread (|V| = 11)
    assert abs(err(z_alo, t) - err(z_loo, t)) <= 0.03
    assert np.median(np.abs(z_alo - z_loo)) <= 0.05 * np.std(z_loo)


def test_hinge_nystroem_features(dg):
    X, t = dg
    n = t.size
    # (a) a linear model over Nyström features: ALO in that feature space vs exact LOO there
    fm = Nystroem(gamma=GAMMA, n_components=60, random_state=0).fit(X)
    F = augment(fm.transform(X), 1.0)
    beta, coef = hinge_reference(F, t, 1.0)
    z_alo = alo_primal(F, t, "hinge", 1.0, beta)
    z_loo = hinge_loo(F, t, 1.0, coef)
    # measured: 14.0 % against 12.7 % (2 samples of 150)
    assert abs(err(z_alo, t) - err(z_loo, t)) <= 0.03
    # (b) He et al. §2: the exact kernel model's ALO with leverages from approximate features.
    K = reference_kernel("rbf", gamma=GAMMA, intercept_scaling=1.0)(X, X)
    Fk = kernel_features(K)
    _, ck = hinge_reference(Fk, t, 1.0)
    z = K @ ck
    exact_alo = alo_kernel(K, t, "hinge", 1.0, ck)
    z_loo = hinge_loo(Fk, t, 1.0, ck)

    def through(m):
        ny = Nystroem(gamma=GAMMA, n_components=m, random_state=0).fit(X)
        return alo_feature_map(augment(ny.transform(X), 1.0), t, "hinge", 1.0, z, dual_coef=ck)

    # every sample a landmark: Φ̂ Φ̂ᵀ = K, the same numbers as the kernel form
    assert np.max(np.abs(through(n) - exact_alo)) <= 1e-6
    # two thirds of the samples as landmarks (|V| = 11 ≪ 100): the error rate stays within
    # 3 points of exact LOO (measured: 11.3 % against 12.0 %, one sample)
    assert abs(err(through(100), t) - err(z_loo, t)) <= 0.03


def _smoothed_hinge(eps):
    class SmoothedHinge(Loss):
        """Hinge with a quadratic piece of width eps at the kink (Huber-style)."""

        name = "smoothed_hinge"

        def value(self, y, z):
            u = 1.0 - y * z
            return np.where(u <= 0, 0.0, np.where(u < eps, u * u / (2 * eps), u - eps / 2))

        def d1(self, y, z):
            return -y * np.clip((1.0 - y * z) / eps, 0.0, 1.0)

        def d2(self, y, z):
            u = 1.0 - y * z
            return ((u > 0) & (u < eps)) / eps

    return SmoothedHinge()


def test_hinge_alo_is_the_limit_of_smoothed_newton_alo(bc):
    # He et al.'s formulas are the limit of the smooth-loss formula when the hinge is smoothed
    # over a width eps → 0: the smoothed problem's ALO converges to the hinge ALO at rate eps
    # (measured: 0.039, 0.0039, 0.00039 for eps = 1e-2, 1e-3, 1e-4)
    X, t = bc
    F = augment(X, 1.0)
    beta, coef = hinge_reference(F, t, 1.0)
    z_hinge = alo_primal(F, t, "hinge", 1.0, beta)
    gaps = []
    for eps in (1e-2, 1e-3, 1e-4):
        loss = _smoothed_hinge(eps)
        res = newton_primal(F, t, loss, 1.0, coef0=beta, tol=1e-12, max_iter=500)
        gaps.append(np.max(np.abs(alo_primal(F, t, loss, 1.0, res.coef) - z_hinge)))
    assert gaps[2] <= 2e-3
    assert gaps[0] > 5 * gaps[1] > 25 * gaps[2]


def test_hinge_exact_special_cases(digits):
    X, y = digits
    t = np.where(y == 1, 1.0, -1.0)
    # empty V: with a small C every sample violates its margin (α = C everywhere) and stays a
    # violator without any one sample, so β_{−t} = β − C t_t Φ_t and ALO (P_V = I) is exact
    Xs, ts = X[:150], t[:150]
    K = reference_kernel("rbf", gamma=GAMMA, intercept_scaling=1.0)(Xs, Xs)
    F = kernel_features(K)
    beta, coef = hinge_reference(F, ts, 0.01)
    assert np.all(ts * (K @ coef) < 1.0 - MARGIN_TOL)
    assert_exact(alo_kernel(K, ts, "hinge", 0.01, coef), hinge_loo(F, ts, 0.01, coef), 1e-10)
    # all in V: 8 samples in 65 dimensions with a large C lie on the margin with 0 < α < C and
    # stay there without any one of them; ALO is then the block-inverse identity, exact
    F = augment(X[:8], 1.0)
    ts = t[:8]
    beta, coef = hinge_reference(F, ts, 100.0)
    assert np.all(np.abs(ts * (F @ beta) - 1.0) <= 1e-9)
    assert_exact(alo_primal(F, ts, "hinge", 100.0, beta), hinge_loo(F, ts, 100.0, coef), 1e-10)
    # the same for random Gaussian data, n = 20 in 200 dimensions (kernel form, linear kernel)
    rng = np.random.default_rng(0)
    F = rng.standard_normal((20, 200))
    ts = np.where(rng.random(20) < 0.5, 1.0, -1.0)
    beta, coef = hinge_reference(F, ts, 100.0)
    assert np.all(np.abs(ts * (F @ beta) - 1.0) <= 1e-9)
    assert_exact(
        alo_kernel(F @ F.T, ts, "hinge", 100.0, coef), hinge_loo(F, ts, 100.0, coef), 1e-10
    )


def test_hinge_duplicates_ties_and_tiny_n(bc):
    X, t = bc
    F = augment(X[:150], 1.0)
    t = t[:150]
    beta, coef = hinge_reference(F, t, 1.0)
    m = t * (F @ beta)
    V = np.flatnonzero(np.abs(m - 1.0) <= MARGIN_TOL)
    viol = np.flatnonzero(m < 1.0 - MARGIN_TOL)
    assert V.size >= 2 and viol.size >= 1
    # duplicating two free support vectors and a violator: the Gram matrix of V is singular
    # (each copy lies in the span of the other); ALO stays finite, gives both copies the same
    # value, and a free support vector's copy absorbs it (a_t = 0: ALO = z)
    dup = np.concatenate([np.arange(150), V[:2], viol[:1]])
    Fd, td = F[dup], t[dup]
    bd, cd = hinge_reference(Fd, td, 1.0)
    zd = Fd @ bd
    for kw in ({}, {"dual_coef": cd}):
        za = alo_primal(Fd, td, "hinge", 1.0, bd, **kw)
        assert np.all(np.isfinite(za))
        for i, j in zip(list(V[:2]) + [viol[0]], (150, 151, 152)):
            assert abs(za[i] - za[j]) <= 1e-6
        if abs(td[150] * zd[150] - 1.0) <= MARGIN_TOL:
            assert abs(za[150] - zd[150]) <= 1e-6
    K = Fd @ Fd.T
    assert np.max(np.abs(alo_kernel(K, td, "hinge", 1.0, cd) - za)) <= 1e-6
    # ties: a margin tolerance large enough to put every support vector in V still gives
    # finite values, and MARGIN_TOL = 0 (V only at exact margin 1) stays finite as well
    for tol in (0.0, 0.5):
        assert np.all(
            np.isfinite(alo_primal(F, t, "hinge", 1.0, beta, dual_coef=coef, margin_tol=tol))
        )
    # tiny n: without its only sample the model is β = 0 (score 0); two samples both lie on
    # the margin (all in V) and ALO is exact, as in test_hinge_exact_special_cases
    for n in (1, 2):
        Fn, tn = F[:n], np.array([1.0, -1.0])[:n]
        bn, cn = hinge_reference(Fn, tn, 1.0)
        zl = hinge_loo(Fn, tn, 1.0, cn) if n > 1 else np.zeros(1)
        assert_exact(alo_primal(Fn, tn, "hinge", 1.0, bn), zl, 1e-10)
        assert_exact(alo_kernel(Fn @ Fn.T, tn, "hinge", 1.0, cn), zl, 1e-10)


HINGE_MODELS = pytest.mark.skipif(
    not ("hinge" in df.LinearClassifier._losses and "hinge" in df.KernelClassifier._losses),
    reason="the estimators do not offer loss='hinge' yet",
)


@HINGE_MODELS
def test_hinge_linear_model(bc):
    # the estimator's exact QP solution gives the same ALO as the reference solution, and the
    # ALO error rate is within 3 points of exact LOO (the tolerance of the raw-array tests)
    X, t = bc
    F = augment(X, 1.0)
    beta, coef = hinge_reference(F, t, 1.0)
    model = df.LinearClassifier(loss="hinge", C=1.0).fit(X, t)
    z_alo = alo_decisions(model)
    assert np.max(np.abs(z_alo - alo_primal(F, t, "hinge", 1.0, beta, dual_coef=coef))) <= 1e-6
    z_loo = hinge_loo(F, t, 1.0, coef)
    assert abs(err(z_alo, t) - err(z_loo, t)) <= 0.03
    # the QP puts the free support vectors on the margin far inside MARGIN_TOL
    margin = t * model.decision_function(X)
    on = np.abs(margin - 1.0) <= MARGIN_TOL
    assert on.any() and np.max(np.abs(margin[on] - 1.0)) <= 1e-10
    # loo(method="alo") reports these values, labelled approximate
    from deltafit.model_selection import loo

    r = loo(df.LinearClassifier(loss="hinge", C=1.0), X, t, method="alo")
    assert r.approximate and np.allclose(r.decision, z_alo, atol=1e-8)
    # over Nyström features: the model's own feature space
    fm = Nystroem(gamma=0.2, n_components=50, random_state=0).fit(X)
    nm = df.LinearClassifier(loss="hinge", C=1.0, feature_map=fm).fit(X, t)
    Fn = augment(fm.transform(X), 1.0)
    bn, cn = hinge_reference(Fn, t, 1.0)
    assert np.max(np.abs(alo_decisions(nm) - alo_primal(Fn, t, "hinge", 1.0, bn))) <= 1e-6


@HINGE_MODELS
def test_hinge_kernel_model(dg):
    X, t = dg
    K = reference_kernel("rbf", gamma=GAMMA, intercept_scaling=1.0)(X, X)
    F = kernel_features(K)
    _, coef = hinge_reference(F, t, 1.0)
    model = df.KernelClassifier(loss="hinge", C=1.0, gamma=GAMMA).fit(X, t)
    z_alo = alo_decisions(model)
    assert np.max(np.abs(z_alo - alo_kernel(K, t, "hinge", 1.0, coef))) <= 1e-6
    z_loo = hinge_loo(F, t, 1.0, coef)
    assert abs(err(z_alo, t) - err(z_loo, t)) <= 0.03
    # He et al. §2 through the model: all samples as landmarks reproduce the kernel form, two
    # thirds stay within 3 points of exact LOO
    assert np.max(np.abs(alo_decisions(model, n_components=t.size, random_state=0) - z_alo)) <= 1e-6
    z_ny = alo_decisions(model, n_components=100, random_state=0)
    assert abs(err(z_ny, t) - err(z_loo, t)) <= 0.03


@HINGE_MODELS
def test_hinge_models_after_updates(bc):
    X, t = bc
    X, t = X[:120], t[:120]
    keep = np.setdiff1d(np.arange(120), [3, 50, 104])
    for make in (
        lambda: df.LinearClassifier(loss="hinge", C=1.0),
        lambda: df.KernelClassifier(loss="hinge", C=1.0, gamma=0.5),
    ):
        model = make().fit(X[:100], t[:100])
        model.add(X[100:], t[100:])
        model.remove([3, 50, 104])
        fresh = make().fit(X[keep], t[keep])
        assert np.max(np.abs(alo_decisions(model) - alo_decisions(fresh))) <= 1e-6


# =============================================================================================
# reading the model
# =============================================================================================
def test_model_after_updates_matches_fresh_fit(bc):
    X, t = bc
    X, t = X[:120], t[:120]
    for make in (
        lambda: df.LinearClassifier(loss="logistic", C=1.0),
        lambda: df.KernelClassifier(loss="squared_hinge", C=1.0, gamma=0.5),
        lambda: df.KernelClassifier(loss="squared", C=1.0, gamma=0.5),
    ):
        model = make().fit(X[:100], t[:100])
        model.add(X[100:], t[100:])
        model.remove([3, 50, 104])
        keep = np.setdiff1d(np.arange(120), [3, 50, 104])
        fresh = make().fit(X[keep], t[keep])
        assert np.array_equal(model.sample_ids_, keep)
        assert np.max(np.abs(alo_decisions(model) - alo_decisions(fresh))) <= 1e-6


def test_loo_method_alo_uses_it(bc):
    from deltafit.model_selection import loo

    X, t = bc
    model = df.LinearClassifier(loss="logistic", C=1.0)
    r = loo(model, X, t, method="alo")
    assert r.approximate
    fitted = df.LinearClassifier(loss="logistic", C=1.0).fit(X, t)
    assert np.allclose(r.decision, alo_decisions(fitted), atol=1e-8)


# =============================================================================================
# bad input
# =============================================================================================
def test_bad_models(bc):
    X, t = bc
    with pytest.raises(ValueError, match="deltafit estimator"):
        alo_decisions(LogisticRegression().fit(X, t))
    with pytest.raises(ValueError, match="not fitted"):
        alo_decisions(df.LinearClassifier())
    assert issubclass(NotFittedError, ValueError)
    lean = df.LinearClassifier(loss="squared", keep_data=False).fit(X, t)
    with pytest.raises(ValueError, match="keep_data"):
        alo_decisions(lean)
    lin = df.LinearClassifier(loss="logistic").fit(X, t)
    with pytest.raises(ValueError, match="kernel models"):
        alo_decisions(lin, n_components=10)
    ker = df.KernelClassifier(loss="logistic", kernel=lambda A, B: A @ B.T).fit(X[:30], t[:30])
    with pytest.raises(ValueError, match="callable kernel"):
        alo_decisions(ker, n_components=10)
    with pytest.raises(ValueError, match="not both"):
        alo_decisions(ker, n_components=10, feature_map=Nystroem())
    with pytest.raises(ValueError, match="transformer"):
        alo_decisions(ker, feature_map="nystroem")
    rbf = df.KernelClassifier(loss="logistic").fit(X[:30], t[:30])
    with pytest.raises(ValueError, match="n_components"):
        alo_decisions(rbf, n_components=0)
    with pytest.raises(ValueError, match="margin_tol"):
        alo_decisions(rbf, margin_tol=np.nan)


def test_bad_arrays(bc):
    X, t = bc
    F = augment(X[:20], 1.0)
    t = t[:20]
    b = np.zeros(F.shape[1])
    with pytest.raises(ValueError, match="unknown loss"):
        alo_primal(F, t, "huber", 1.0, b)
    with pytest.raises(ValueError, match="C must"):
        alo_primal(F, t, "logistic", 0.0, b)
    with pytest.raises(ValueError, match="coef"):
        alo_primal(F, t, "logistic", 1.0, b[:-1])
    with pytest.raises(ValueError, match="y has"):
        alo_primal(F, t[:-1], "logistic", 1.0, b)
    with pytest.raises(ValueError, match="NaN"):
        alo_primal(np.where(F > 0.9, np.nan, F), t, "logistic", 1.0, b)
    with pytest.raises(ValueError, match="-1, \\+1"):
        alo_primal(F, 2 * t, "hinge", 1.0, b)
    with pytest.raises(ValueError, match="square"):
        alo_kernel(F, t, "squared", 1.0, np.zeros(20))
    with pytest.raises(ValueError, match="dual_coef"):
        alo_feature_map(F, t, "hinge", 1.0, np.zeros(20))
    with pytest.raises(ValueError, match="margin_tol"):
        alo_primal(F, t, "hinge", 1.0, b, margin_tol=-1.0)
    with pytest.raises(ValueError, match="positive semi-definite"):
        alo_kernel(
            np.array([[1.0, 3.0], [3.0, 1.0]]),
            np.array([1.0, -1.0]),
            "logistic",
            10.0,
            np.array([0.1, 0.2]),
        )
