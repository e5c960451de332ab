"""The hinge loss (L1-SVM): the loss, the exact dual QP solvers and the hinge estimators.

* linear hinge against scikit-learn's ``LinearSVC(loss="hinge", fit_intercept=False)`` on
  ``[X, intercept_scaling]`` (breast cancer standardized, digits even/odd);
* kernel hinge (rbf, linear, poly; intercept on/off) against an independent reference solver
  of the dual (``reference.hinge_dual_reference``: L-BFGS-B plus an exact least-squares solve
  on its sets);
* the optimality certificates (duality gap, KKT conditions, the certified radius);
* add / remove / relabel / partial_fit equal to fresh fits (1e-8 on decisions), persistence,
  bad input, and the sensitivity layer refusing hinge models.
"""

from __future__ import annotations

import warnings

import numpy as np
import pytest
from sklearn.exceptions import ConvergenceWarning
from sklearn.kernel_approximation import Nystroem
from sklearn.metrics.pairwise import linear_kernel, polynomial_kernel, rbf_kernel
from sklearn.preprocessing import StandardScaler
from sklearn.svm import LinearSVC

import deltafit as df
from deltafit.losses import LOSSES, Hinge, get_loss
from deltafit.solvers import HingeResult, hinge_kernel, hinge_primal, newton_kernel, newton_primal
from reference import augment, hinge_dual_objective, hinge_dual_reference, hinge_kkt_violation, pm1

UPDATE_TOL = 1e-8


def _close(a, b, tol=UPDATE_TOL):
    """max |a − b| ≤ tol · max(1, max |b|)."""
    a, b = np.asarray(a, dtype=float), np.asarray(b, dtype=float)
    err = float(np.max(np.abs(a - b)) / max(1.0, float(np.max(np.abs(b)))))
    assert err <= tol, err


def _primal(F, t, C, beta):
    return C * float(np.maximum(0.0, 1.0 - t * (F @ beta)).sum()) + 0.5 * float(beta @ beta)


@pytest.fixture(scope="module")
def cancer_std():
    from sklearn.datasets import load_breast_cancer

    X, y = load_breast_cancer(return_X_y=True)
    return StandardScaler().fit_transform(X), y


# ---------------------------------------------------------------------------------------------
# the loss
# ---------------------------------------------------------------------------------------------
def test_hinge_loss_values_and_smooth_flag():
    loss = get_loss("hinge")
    assert isinstance(loss, Hinge) and loss.name == "hinge" and LOSSES["hinge"] is Hinge
    y = np.array([1.0, 1.0, 1.0, -1.0, -1.0])
    z = np.array([-2.0, 0.5, 1.0, 0.5, -3.0])
    np.testing.assert_array_equal(loss.value(y, z), [3.0, 0.5, 0.0, 1.5, 0.0])
    np.testing.assert_array_equal(loss.d1(y, z), [-1.0, -1.0, 0.0, 1.0, 0.0])  # a subgradient
    np.testing.assert_array_equal(loss.d2(y, z), np.zeros(5))
    assert loss.smooth is False
    assert all(get_loss(n).smooth for n in ("squared", "logistic", "squared_hinge"))


def test_newton_refuses_the_hinge(breast_cancer):
    X, y = breast_cancer
    F, t = augment(X[:50], 1.0), pm1(y[:50], 1)
    with pytest.raises(ValueError, match="hinge"):
        newton_primal(F, t, get_loss("hinge"), 1.0)
    with pytest.raises(ValueError, match="hinge"):
        newton_kernel(F @ F.T, t, get_loss("hinge"), 1.0)


# ---------------------------------------------------------------------------------------------
# linear hinge vs LinearSVC
# ---------------------------------------------------------------------------------------------
def _linear_svc(F, t, C):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        svc = LinearSVC(
            loss="hinge",
            C=C,
            fit_intercept=False,
            dual=True,
            tol=1e-12,
            max_iter=10**6,
            random_state=0,
        ).fit(F, t)
    return svc.coef_.ravel()


# (data, C, intercept_scaling) where liblinear's coordinate descent converges: there the two
# solutions must agree
AGREE = [
    ("cancer", 0.01, 1.0),
    ("cancer", 0.1, 1.0),
    ("cancer", 0.1, 3.0),
    ("digits", 0.01, 1.0),
    ("digits", 0.03, 1.0),
    ("digits", 0.003, 3.0),
]


@pytest.mark.parametrize("data,C,s", AGREE, ids=[f"{d}-C{c}-s{s}" for d, c, s in AGREE])
def test_linear_hinge_matches_linear_svc(data, C, s, cancer_std, digits):
    X, y = cancer_std if data == "cancer" else digits
    m = df.LinearClassifier(loss="hinge", C=C, intercept_scaling=s).fit(X, y)
    F, t = augment(X, s), pm1(y, m.classes_[1])
    beta = np.append(m.coef_.ravel(), m.intercept_[0] / s)
    ref = _linear_svc(F, t, C)
    J, J_ref = _primal(F, t, C, beta), _primal(F, t, C, ref)
    assert abs(J - J_ref) <= 1e-8 * J_ref, (J, J_ref)
    np.testing.assert_allclose(beta, ref, rtol=0, atol=1e-6 * max(1.0, np.abs(ref).max()))
    np.testing.assert_allclose(m.decision_function(X), F @ ref, rtol=0, atol=1e-6)


@pytest.mark.parametrize(
    "data,C",
    [
        ("cancer", 0.3),
        ("cancer", 10.0),
        ("digits", 0.1),
        pytest.param("digits", 1.0, marks=pytest.mark.slow),
    ],
)
def test_linear_hinge_never_worse_than_linear_svc(data, C, cancer_std, digits):
    """Where liblinear stops at max_iter short of the optimum (it does at these C), deltafit's
    objective is lower, and its duality gap proves it optimal to rounding."""
    X, y = cancer_std if data == "cancer" else digits
    m = df.LinearClassifier(loss="hinge", C=C).fit(X, y)
    F, t = augment(X, 1.0), pm1(y, 1)
    beta = np.append(m.coef_.ravel(), m.intercept_[0])
    J, J_ref = _primal(F, t, C, beta), _primal(F, t, C, _linear_svc(F, t, C))
    assert J <= J_ref * (1.0 + 1e-12)
    alpha = np.abs(m.dual_coef_)
    D, P = hinge_dual_objective(F @ F.T, t, C, alpha)
    assert P - D <= 1e-10 * P
    assert abs(P - J) <= 1e-12 * J


# ---------------------------------------------------------------------------------------------
# kernel hinge vs an independent dual solver
# ---------------------------------------------------------------------------------------------
KERNELS = [
    ("rbf", dict(kernel="rbf", gamma=0.05), lambda A, B: rbf_kernel(A, B, gamma=0.05)),
    ("linear", dict(kernel="linear"), linear_kernel),
    (
        "poly",
        dict(kernel="poly", degree=2, gamma=1 / 30, coef0=1.0),
        lambda A, B: polynomial_kernel(A, B, degree=2, gamma=1 / 30, coef0=1.0),
    ),
]


@pytest.mark.parametrize("fit_intercept", [True, False], ids=["intercept", "no-intercept"])
@pytest.mark.parametrize("C", [0.1, 10.0])
@pytest.mark.parametrize("name,params,kfun", KERNELS, ids=[k[0] for k in KERNELS])
def test_kernel_hinge_matches_reference(name, params, kfun, C, fit_intercept, breast_cancer):
    X, y = breast_cancer
    Xtr, ytr, Xte = X[:300], y[:300], X[300:]
    s2 = 1.0 if fit_intercept else 0.0
    m = df.KernelClassifier(loss="hinge", C=C, fit_intercept=fit_intercept, **params)
    m.fit(Xtr, ytr)
    t = pm1(ytr, 1)
    K = kfun(Xtr, Xtr) + s2
    _, D_ref, u_ref, z_ref = hinge_dual_reference(K, t, C)
    alpha = t * m.dual_coef_  # the SVM dual variables, y_i α_i = dual_coef_
    assert alpha.min() >= 0.0 and alpha.max() <= C
    D, P = hinge_dual_objective(K, t, C, alpha)
    # the reference's D is a feasible (L-BFGS-B) value: ours is at least as high, and equal
    assert D >= D_ref - 1e-12 * abs(D_ref)
    assert D - D_ref <= 1e-9 * abs(D_ref), (D, D_ref)
    assert P - D <= 1e-10 * max(1.0, P)  # duality gap ≈ 0
    _close(m.decision_function(Xtr), z_ref, 1e-8)
    _close(m.decision_function(Xte), (kfun(Xte, Xtr) + s2) @ u_ref, 1e-8)
    np.testing.assert_array_equal(m.predict(Xte), np.where((kfun(Xte, Xtr) + s2) @ u_ref > 0, 1, 0))


@pytest.mark.parametrize("C", [0.05, 1.0, 50.0])
def test_kkt_conditions_and_certificates(C, digits):
    X, y = digits
    X, y = X[:600], y[:600]
    m = df.KernelClassifier(loss="hinge", C=C, gamma=0.02).fit(X, y)
    t = pm1(y, 1)
    K = rbf_kernel(X, X, gamma=0.02) + 1.0
    alpha = t * m.dual_coef_
    margin = t * m.decision_function(X)
    assert hinge_kkt_violation(K, t, C, alpha) <= 1e-9 * max(1.0, C)
    free = (alpha > 0) & (alpha < C)
    assert np.all(np.abs(margin[free] - 1.0) <= 1e-9 * max(1.0, C))  # on the margin
    assert np.all(margin[alpha == 0] >= 1.0 - 1e-9 * max(1.0, C))
    assert np.all(margin[alpha == C] <= 1.0 + 1e-9 * max(1.0, C))
    res = m.problem_.solver_result
    assert isinstance(res, HingeResult) and res.converged
    D, P = hinge_dual_objective(K, t, C, alpha)
    assert abs(res.objective - P) <= 1e-10 * P and abs(res.dual_objective - D) <= 1e-10 * P
    assert 0.0 <= res.duality_gap <= 1e-10 * P
    assert res.kkt_violation <= 1e-9 * max(1.0, C)
    # grad_norm_ is the radius the duality gap certifies, never less than it
    assert m.grad_norm_ == res.grad_norm >= np.sqrt(2.0 * max(res.duality_gap, 0.0))


def test_linear_and_kernel_forms_agree(breast_cancer):
    """hinge_primal (explicit features, coordinate descent on w) and hinge_kernel (the Gram
    matrix) solve the same QP: same α, same decisions."""
    X, y = breast_cancer
    F, t = augment(X, 1.0), pm1(y, 1)
    a = hinge_primal(F, t, 2.0)
    b = hinge_kernel(F @ F.T, t, 2.0)
    _close(F @ a.coef, (F @ F.T) @ b.coef, 1e-10)
    np.testing.assert_allclose(a.objective, b.objective, rtol=1e-12)
    np.testing.assert_allclose(a.coef, F.T @ (t * a.alpha), rtol=0, atol=1e-12)
    np.testing.assert_allclose(b.coef, t * b.alpha, rtol=0, atol=0)


# ---------------------------------------------------------------------------------------------
# the solver: warm start, callback, certified radius, max_iter
# ---------------------------------------------------------------------------------------------
def test_warm_start_from_the_optimum_needs_no_iteration(digits):
    X, y = digits
    F, t = augment(X, 1.0), pm1(y, 1)
    res = hinge_primal(F, t, 1.0)
    again = hinge_primal(F, t, 1.0, alpha0=res.alpha)
    assert again.n_iter == 0 and again.converged
    m = df.LinearClassifier(loss="hinge", warm_start=True).fit(X, y)
    m.fit(X, y)
    assert m.n_iter_ == 0


def test_callback_radius_and_subgradient_ball_are_valid(breast_cancer):
    X, y = breast_cancer
    K = rbf_kernel(X, X, gamma=0.1) + 1.0
    t = pm1(y, 1)
    exact = hinge_kernel(K, t, 5.0)
    seen = []

    def cb(it, coef, g, f, grad):
        seen.append((it, coef.copy(), g, f, grad.copy()))
        return it == 3

    rough = hinge_kernel(K, t, 5.0, callback=cb)
    assert rough.stopped_by_callback and not rough.converged and rough.n_iter == 3
    assert [s[0] for s in seen] == [0, 1, 2, 3]

    def rkhs(u):
        return np.sqrt(max(u @ K @ u, 0.0))

    # the result's radius certifies the distance to the optimum (duality gap) ...
    assert rkhs(rough.coef - exact.coef) <= rough.grad_norm
    # ... and every callback's (coef, subgradient) pair gives a valid Okumura Thm 6 ball
    for _it, coef, g, f, grad in seen:
        assert rkhs(coef - 0.5 * grad - exact.coef) <= 0.5 * g + 1e-9
        np.testing.assert_allclose(f, hinge_dual_objective(K, t, 5.0, t * coef)[1], rtol=1e-10)


def test_max_iter_warns(digits):
    X, y = digits
    with pytest.warns(ConvergenceWarning, match="KKT"):
        df.LinearClassifier(loss="hinge", C=10.0, max_iter=1).fit(X, y)


def test_loose_tol_stops_early(breast_cancer):
    X, y = breast_cancer
    F, t = augment(X, 1.0), pm1(y, 1)
    loose = hinge_primal(F, t, 1.0, tol=1e-2)
    tight = hinge_primal(F, t, 1.0)
    assert loose.converged and loose.kkt_violation <= 1e-2
    assert loose.n_iter <= tight.n_iter and tight.kkt_violation <= 1e-10


# ---------------------------------------------------------------------------------------------
# exact updates
# ---------------------------------------------------------------------------------------------
MODELS = {
    "linear": lambda: df.LinearClassifier(loss="hinge", C=1.0),
    "linear-nystroem": lambda: df.LinearClassifier(
        loss="hinge", C=2.0, feature_map=Nystroem(gamma=0.1, n_components=60, random_state=0)
    ),
    "rbf": lambda: df.KernelClassifier(loss="hinge", C=1.0, gamma=0.1),
    "poly-no-intercept": lambda: df.KernelClassifier(
        loss="hinge", C=0.5, kernel="poly", degree=2, gamma=0.05, fit_intercept=False
    ),
}


def _fresh(model, X, y):
    """A fresh fit on (X, y) with the model's parameters (and its fitted feature map, which
    updates keep)."""
    params = model.get_params(deep=False)
    if getattr(model, "feature_map_", None) is not None:
        params["feature_map"] = model.feature_map_
    return type(model)(**params).fit(X, y)


@pytest.mark.parametrize("name", sorted(MODELS))
def test_updates_equal_fresh_fits(name, breast_cancer):
    X, y = breast_cancer
    rng = np.random.default_rng(3)
    m = MODELS[name]().fit(X[:400], y[:400])
    rows = {i: (X[i], y[i]) for i in range(400)}

    def check():
        ids = sorted(rows)
        np.testing.assert_array_equal(m.sample_ids_, ids)
        Xc = np.array([rows[i][0] for i in ids])
        yc = np.array([rows[i][1] for i in ids])
        fresh = _fresh(m, Xc, yc)
        _close(m.decision_function(X), fresh.decision_function(X))
        _close(m.dual_coef_, fresh.dual_coef_, 1e-6)  # α is unique here up to rounding
        assert m.problem_.solver_result.converged

    nxt = 400
    # single additions, removals (support vectors and others) and relabels
    for step in range(12):
        kind = step % 3
        if kind == 0:
            new = m.add(X[nxt : nxt + 1], y[nxt : nxt + 1])
            rows[int(new[0])] = (X[nxt], y[nxt])
            nxt += 1
        elif kind == 1:
            sv = m.sample_ids_[np.abs(m.dual_coef_) > 0]
            i = int(rng.choice(sv))
            m.remove([i])
            del rows[i]
        else:
            i = int(rng.choice(list(rows)))
            m.relabel([i], [1 - rows[i][1]])
            rows[i] = (rows[i][0], 1 - rows[i][1])
        check()
    # batches and one mixed transaction
    new = m.add(X[nxt : nxt + 40], y[nxt : nxt + 40])
    rows.update({int(k): (X[nxt + j], y[nxt + j]) for j, k in enumerate(new)})
    nxt += 40
    check()
    gone = rng.choice(list(rows), size=30, replace=False)
    m.remove(gone)
    for i in gone:
        del rows[int(i)]
    check()
    flip = rng.choice(list(rows), size=10, replace=False)
    rem = [i for i in rows if i not in set(flip.tolist())][:5]
    new = m.update(
        X_add=X[nxt : nxt + 20],
        y_add=y[nxt : nxt + 20],
        remove_ids=rem,
        relabel_ids=flip,
        y_relabel=[1 - rows[int(i)][1] for i in flip],
    )
    for i in rem:
        del rows[i]
    for i in flip:
        rows[int(i)] = (rows[int(i)][0], 1 - rows[int(i)][1])
    rows.update({int(k): (X[nxt + j], y[nxt + j]) for j, k in enumerate(new)})
    check()


@pytest.mark.parametrize("name", ["linear", "rbf"])
def test_mass_removal_compacts_and_stays_exact(name, breast_cancer):
    """Removing most samples compacts the ledger (slots renumbered): α must follow."""
    X, y = breast_cancer
    m = MODELS[name]().fit(X, y)
    keep = np.arange(0, X.shape[0], 5)
    m.remove(np.setdiff1d(np.arange(X.shape[0]), keep))
    assert m.problem_.capacity < 200  # compacted
    fresh = _fresh(m, X[keep], y[keep])
    _close(m.decision_function(X), fresh.decision_function(X))
    _close(m.dual_coef_, fresh.dual_coef_, 1e-6)
    ids = m.add(X[1:40:5], y[1:40:5])
    fresh = _fresh(m, np.vstack([X[keep], X[1:40:5]]), np.concatenate([y[keep], y[1:40:5]]))
    _close(m.decision_function(X), fresh.decision_function(X))
    assert ids.tolist() == list(range(X.shape[0], X.shape[0] + 8))


@pytest.mark.parametrize("name", ["linear", "rbf"])
def test_partial_fit_equals_fit(name, digits):
    X, y = digits
    X, y = X[:500], y[:500]
    m = MODELS[name]()
    for lo in range(0, 500, 100):
        m.partial_fit(X[lo : lo + 100], y[lo : lo + 100], classes=[0, 1])
    _close(m.decision_function(X), _fresh(m, X, y).decision_function(X))


def test_dual_coef_reconstructs_the_model(breast_cancer, fitted_models):
    X, y = breast_cancer
    lin = fitted_models(MODELS["linear"](), "breast_cancer", 300)
    lin.remove([0, 5, 7])
    lin.add(X[300:320], y[300:320])
    Phi = np.hstack([X, np.ones((X.shape[0], 1))])
    rows = np.concatenate([np.setdiff1d(np.arange(300), [0, 5, 7]), np.arange(300, 320)])
    beta = Phi[rows].T @ lin.dual_coef_
    np.testing.assert_allclose(beta[:-1], lin.coef_.ravel(), rtol=0, atol=1e-12)
    np.testing.assert_allclose(beta[-1], lin.intercept_[0], rtol=0, atol=1e-12)
    t = pm1(y[rows], 1)
    a = t * lin.dual_coef_
    assert a.min() >= 0.0 and a.max() <= lin.C
    ker = fitted_models(MODELS["rbf"](), "breast_cancer", 300)
    Kx = rbf_kernel(X, ker.X_fit_, gamma=0.1) + 1.0
    np.testing.assert_allclose(Kx @ ker.dual_coef_, ker.decision_function(X), atol=1e-12)
    with pytest.raises(AttributeError, match="hinge"):
        df.LinearClassifier(loss="logistic").fit(X, y).dual_coef_


# ---------------------------------------------------------------------------------------------
# persistence
# ---------------------------------------------------------------------------------------------
@pytest.mark.parametrize("name", sorted(MODELS))
def test_save_load_round_trip(name, breast_cancer, fitted_models, tmp_path):
    X, y = breast_cancer
    m = fitted_models(MODELS[name](), "breast_cancer", 300)
    m.remove([3, 4])
    m.relabel([10], [1 - y[10]])
    path = tmp_path / "hinge.npz"
    df.save(m, path)
    m2 = df.load(path)
    assert type(m2) is type(m) and m2.loss == "hinge"
    np.testing.assert_array_equal(m2.decision_function(X), m.decision_function(X))
    np.testing.assert_array_equal(m2.dual_coef_, m.dual_coef_)
    np.testing.assert_array_equal(m2.sample_ids_, m.sample_ids_)
    assert m2.grad_norm_ == m.grad_norm_ and m2.n_iter_ == m.n_iter_
    assert m2.problem_.solver_result.kkt_violation == m.problem_.solver_result.kkt_violation
    # the loaded model goes on updating exactly, from its dual variables
    m.add(X[300:340], y[300:340])
    m2.add(X[300:340], y[300:340])
    _close(m2.decision_function(X), m.decision_function(X), 1e-12)
    assert not hasattr(m2, "predict_proba")


def test_load_rejects_negative_dual_variables(breast_cancer, tmp_path):
    X, y = breast_cancer
    path = tmp_path / "m.npz"
    df.save(df.LinearClassifier(loss="hinge").fit(X[:100], y[:100]), path)
    with np.load(path, allow_pickle=False) as z:
        arrays = {k: z[k] for k in z.files}
    arrays["state_dual"] = -arrays["state_dual"] - 1.0
    np.savez(path, **arrays)
    with pytest.raises(ValueError, match="dual"):
        df.load(path)


# ---------------------------------------------------------------------------------------------
# bad input and the sensitivity layer
# ---------------------------------------------------------------------------------------------
@pytest.mark.parametrize("cls", [df.LinearRegressor, df.KernelRegressor])
def test_regressors_reject_the_hinge(cls, breast_cancer):
    X, y = breast_cancer
    with pytest.raises(ValueError, match="hinge"):
        cls(loss="hinge").fit(X, y.astype(float))


def test_hinge_needs_the_rows():
    X = np.random.default_rng(0).normal(size=(20, 3))
    with pytest.raises(ValueError, match="keep_data"):
        df.LinearClassifier(loss="hinge", keep_data=False).fit(X, X[:, 0] > 0)


@pytest.mark.parametrize("name", ["linear", "rbf"])
def test_nan_input_raises_and_leaves_the_model(name, breast_cancer, fitted_models):
    X, y = breast_cancer
    bad = X[:50].copy()
    bad[3, 2] = np.nan
    with pytest.raises(ValueError, match="NaN|infinity"):
        MODELS[name]().fit(bad, y[:50])
    m = fitted_models(MODELS[name](), "breast_cancer", 100)
    before = m.decision_function(X)
    with pytest.raises(ValueError, match="NaN|infinity"):
        m.add(bad[:5], y[:5])
    with pytest.raises(ValueError, match="classes"):
        m.add(X[100:102], [0, 7])
    with pytest.raises(ValueError, match="unknown"):
        m.remove([10**6])
    np.testing.assert_array_equal(m.decision_function(X), before)
    assert m.n_samples_ == 100


def test_solver_bad_input():
    F = np.random.default_rng(0).normal(size=(10, 3))
    with pytest.raises(ValueError, match="-1, \\+1"):
        hinge_primal(F, np.arange(10.0), 1.0)
    t = np.where(F[:, 0] > 0, 1.0, -1.0)
    with pytest.raises(ValueError, match="C must"):
        hinge_kernel(F @ F.T, t, 0.0)
    with pytest.raises(ValueError, match="alpha0"):
        hinge_primal(F, t, 1.0, alpha0=np.full(10, np.nan))
    with pytest.raises(ValueError, match="shape"):
        hinge_kernel(F @ F.T[:, :5], t, 1.0)


@pytest.mark.parametrize("name", ["linear", "rbf"])
def test_sensitivity_refuses_hinge_models(name, fitted_models):
    from deltafit.sensitivity import loo_bounds, model_gradient_sphere, zhang_loo_bounds
    from deltafit.sensitivity._model_access import COVERED_LOSSES

    assert "hinge" not in COVERED_LOSSES
    m = fitted_models(MODELS[name](), "breast_cancer", 100)
    for call in (
        lambda: df.sensitivity(m),
        lambda: loo_bounds(m),
        lambda: zhang_loo_bounds(m),
        lambda: model_gradient_sphere(m),
    ):
        with pytest.raises(ValueError, match="loss='hinge'"):
            call()
    # also when the parameter was changed after the fit: the fitted loss decides
    m.set_params(loss="logistic")
    with pytest.raises(ValueError, match="loss='hinge'"):
        df.sensitivity(m)
