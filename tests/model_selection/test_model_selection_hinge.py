"""Leave-one-out and k-fold for the hinge loss: the support-vector shortcut vs brute force."""

import numpy as np
import pytest
from sklearn.model_selection import StratifiedKFold
from sklearn.preprocessing import StandardScaler
from sklearn.svm import LinearSVC

import deltafit as df
from deltafit.model_selection import cross_validate, loo


@pytest.fixture
def bc(breast_cancer):
    X, y = breast_cancer
    rng = np.random.default_rng(3)
    idx = rng.choice(len(y), 160, replace=False)
    return StandardScaler().fit_transform(X)[idx], y[idx]


@pytest.mark.parametrize(
    "est",
    [
        df.LinearClassifier(loss="hinge", C=0.5),
        df.LinearClassifier(loss="hinge", C=5.0, fit_intercept=False),
        df.KernelClassifier(loss="hinge", C=1.0, gamma=0.05),
        df.KernelClassifier(loss="hinge", C=10.0, kernel="poly", degree=2, gamma=0.1),
    ],
    ids=["linear", "linear-noint-C5", "rbf", "poly"],
)
def test_hinge_loo_equals_brute_force(bc, est):
    X, y = bc
    fast = loo(est, X, y)  # auto: non-support vectors exactly, warm QP refits for the rest
    assert fast.method == "bounds"
    brute = loo(est, X, y, method="refit")
    np.testing.assert_array_equal(fast.y_pred, brute.y_pred)
    np.testing.assert_allclose(fast.decision, brute.decision, rtol=0, atol=1e-7)
    # samples decided without a refit are exactly the certain non-support vectors
    assert fast.decided_by_bound.sum() + fast.n_refits == len(y)
    assert fast.n_refits < len(y)
    m = df.model_selection._engine.fit_full(est, X, y)
    z = m.decision_function(X)
    t = np.where(y == m.classes_[1], 1.0, -1.0)
    assert np.all(t[fast.decided_by_bound] * z[fast.decided_by_bound] > 1.0)


@pytest.mark.slow  # 569 liblinear refits; the bounds-vs-refit LOO/k-fold tests run daily
@pytest.mark.filterwarnings("ignore::sklearn.exceptions.ConvergenceWarning")
def test_hinge_loo_linear_matches_liblinear(bc):
    X, y = bc
    C = 0.05  # liblinear converges here
    Xs = np.hstack([X, np.ones((len(y), 1))])
    errs = 0
    mask = np.ones(len(y), dtype=bool)
    for i in range(len(y)):
        mask[i] = False
        svc = LinearSVC(
            loss="hinge",
            C=C,
            fit_intercept=False,
            dual=True,
            tol=1e-12,
            max_iter=200000,
            random_state=0,
        ).fit(Xs[mask], y[mask])
        errs += int(svc.predict(Xs[i : i + 1])[0] != y[i])
        mask[i] = True
    assert loo(df.LinearClassifier(loss="hinge", C=C), X, y).n_errors == errs


def test_hinge_kfold_bounds_equals_refit(bc):
    X, y = bc
    est = df.KernelClassifier(loss="hinge", C=1.0, gamma=0.05)
    cv = StratifiedKFold(4, shuffle=True, random_state=0)
    a = cross_validate(est, X, y, cv=cv, method="bounds")
    b = cross_validate(est, X, y, cv=cv, method="refit")
    np.testing.assert_array_equal(a.y_pred, b.y_pred)
    np.testing.assert_array_equal(a.fold_scores, b.fold_scores)


def test_hinge_rejects_bounds_early(bc):
    X, y = bc
    with pytest.raises(ValueError, match="method='bounds' skips the non-support vectors"):
        loo(df.LinearClassifier(loss="hinge"), X, y, method="bounds_early")


def test_hinge_alo_is_labelled_approximate(bc):
    X, y = bc
    r = loo(df.KernelClassifier(loss="hinge", C=1.0, gamma=0.05), X, y, method="alo")
    assert r.approximate and "APPROXIMATE" in r.summary()
    assert np.all(np.isnan(r.lower)) and np.all(np.isnan(r.upper))
    exact = loo(df.KernelClassifier(loss="hinge", C=1.0, gamma=0.05), X, y)
    assert (
        abs(r.error_rate - exact.error_rate) <= 0.03
    )  # ALO is close, not exact (He et al., "Approximate leave-one-out with kernel SVM")
