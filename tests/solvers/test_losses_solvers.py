"""Losses (derivatives vs finite differences) and the Newton solvers (stopping rule, warm start,
callback, the gradient-norm certificate)."""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from sklearn.exceptions import ConvergenceWarning
from sklearn.metrics.pairwise import rbf_kernel

import deltafit as df
from deltafit.losses import LOSSES, get_loss
from deltafit.solvers import newton_kernel, newton_primal
from hypothesis_profiles import examples
from reference import augment, logistic_reference, pm1, squared_hinge_reference


@settings(max_examples=examples(200), deadline=None)
@given(
    name=st.sampled_from(sorted(LOSSES)),
    y=st.sampled_from([-1.0, 1.0]),
    z=st.floats(-20, 20, allow_nan=False),
)
def test_loss_derivatives_match_finite_differences(name, y, z):
    loss = get_loss(name)
    h = 1e-6
    y_, z_ = np.array([y]), np.array([z])
    if name in ("squared_hinge", "hinge") and abs(1 - y * z) < 1e-4:
        return  # the kink
    d1 = (loss.value(y_, z_ + h) - loss.value(y_, z_ - h)) / (2 * h)
    d2 = (loss.d1(y_, z_ + h) - loss.d1(y_, z_ - h)) / (2 * h)
    assert abs(d1[0] - loss.d1(y_, z_)[0]) <= 1e-5 * max(1, abs(d1[0]))
    assert abs(d2[0] - loss.d2(y_, z_)[0]) <= 1e-4 * max(1, abs(d2[0]))
    assert loss.value(y_, z_)[0] >= 0


def test_unknown_loss():
    with pytest.raises(ValueError, match="unknown loss"):
        get_loss("hinge2")


@pytest.mark.parametrize("loss", ["logistic", "squared_hinge"])
def test_primal_newton_reaches_tol_and_certifies_distance(loss, breast_cancer):
    X, y = breast_cancer
    F, t, C = augment(X, 1.0), pm1(y, 1), 1.0
    lo = get_loss(loss)
    for tol in (1e-3, 1e-6, 1e-12):
        res = newton_primal(F, t, lo, C, tol=tol)
        g0 = np.linalg.norm(C * F.T @ lo.d1(t, np.zeros(len(t))))
        assert res.converged and res.grad_norm <= tol * g0
        exact = (
            logistic_reference(F, t, C) if loss == "logistic" else squared_hinge_reference(F, t, C)
        )
        # 1-strong convexity: ‖β − β*‖ ≤ ‖∇J(β)‖ (Okumura Thm 6)
        assert np.linalg.norm(res.coef - exact) <= res.grad_norm + 1e-9


def test_kernel_newton_certificate(breast_cancer):
    X, y = breast_cancer
    K = rbf_kernel(X, gamma=0.1) + 1.0
    t = pm1(y, 1)
    lo = get_loss("logistic")
    exact = newton_kernel(K, t, lo, 1.0, tol=1e-14).coef
    rough = newton_kernel(K, t, lo, 1.0, tol=1e-2)
    d = rough.coef - exact
    assert np.sqrt(d @ K @ d) <= rough.grad_norm + 1e-9  # RKHS distance ≤ RKHS gradient norm


def test_warm_start_from_the_optimum_needs_no_iteration(digits):
    X, y = digits
    F, t = augment(X, 1.0), pm1(y, 1)
    lo = get_loss("logistic")
    res = newton_primal(F, t, lo, 1.0, tol=1e-10)
    again = newton_primal(F, t, lo, 1.0, coef0=res.coef, tol=1e-10)
    assert again.n_iter == 0 and again.converged


def test_callback_sees_every_iteration_and_can_stop(digits):
    X, y = digits
    seen = []
    m = df.LinearClassifier(
        loss="logistic", tol=1e-12, callback=lambda it, coef, g, f, grad: seen.append((it, g, f))
    ).fit(X, y)
    its = [s[0] for s in seen]
    assert its == list(range(m.n_iter_ + 1))
    assert all(b[2] <= a[2] + 1e-9 for a, b in zip(seen, seen[1:]))  # monotone objective
    # stop as soon as the gradient norm is below 1: the solver obeys
    res = newton_primal(
        augment(X, 1.0),
        pm1(y, 1),
        get_loss("logistic"),
        1.0,
        tol=1e-14,
        callback=lambda it, coef, g, f, grad: g < 1.0,
    )
    assert res.stopped_by_callback and res.grad_norm < 1.0 and not res.converged


def test_max_iter_warns(digits):
    X, y = digits
    with pytest.warns(ConvergenceWarning):
        df.LinearClassifier(loss="logistic", max_iter=1).fit(X, y)


def test_estimator_warm_start(digits):
    X, y = digits
    m = df.LinearClassifier(loss="squared_hinge", warm_start=True).fit(X, y)
    first = m.n_iter_
    m.fit(X, y)
    assert m.n_iter_ == 0 and first > 0
    k = df.KernelClassifier(loss="logistic", gamma=0.05, warm_start=True).fit(X[:300], y[:300])
    k.fit(X[:300], y[:300])
    assert k.n_iter_ == 0
