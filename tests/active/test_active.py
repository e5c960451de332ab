"""FGAL and uncertainty sampling (Sivan et al. §4.3) against brute-force re-evaluation."""

import numpy as np
import pytest
from sklearn.svm import SVC

import deltafit as df
from deltafit.active import FGAL, ActiveLearningResult, UncertaintySampling, run_active_learning
from stream_reference import scratch_ball


def make():
    return df.KernelClassifier(
        loss="squared_hinge", kernel="rbf", gamma=0.05, C=1.0, fit_intercept=False
    )


@pytest.fixture(scope="module")
def split(digits):
    X, y = digits
    rng = np.random.default_rng(0)
    perm = rng.permutation(len(y))
    te, po = perm[:200], perm[200:600]
    return X[po], y[po], X[te], y[te]


def brute_force_fgal(X, y, labeled0, m, p, budget):
    """FGAL re-derived: refit on the labeled set, then per sub-iteration the centre
    |(U + L)/2| of every unlabeled sample recomputed from scratch from A (eq. 7, 10)."""
    labeled = list(labeled0)
    groups = [np.array(labeled0)]
    while len(labeled) < budget:
        model = make().fit(X[labeled], y[labeled])
        open_ = np.setdiff1d(np.arange(len(y)), labeled)
        A = []
        k = min(m, budget - len(labeled), open_.size)
        while len(A) < k:
            cand = np.setdiff1d(open_, A)  # sorted pool order, like the strategy's candidates
            _, center = scratch_ball(model, X[A], y[A], X[:0], y[:0], X[cand])
            pick = cand[np.argsort(np.abs(center), kind="stable")[: min(p, k - len(A))]]
            A.extend(pick.tolist())
            groups.append(pick)
        labeled.extend(A)
    return groups


def test_fgal_chooses_what_the_bounds_recomputed_from_scratch_choose(split):
    X, y, Xt, yt = split
    res = run_active_learning(
        FGAL(make(), m=40, p=10), X, y, Xt, yt, initial=30, budget=150, random_state=0
    )
    ref = brute_force_fgal(X, y, res.groups[0], 40, 10, 150)
    assert len(res.groups) == len(ref)
    for g, r in zip(res.groups, ref):
        np.testing.assert_array_equal(g, r)
    np.testing.assert_array_equal(res.n_labeled, [30, 70, 110, 150])
    assert res.n_model_computations == 4
    assert res.labeled.size == 150 and np.unique(res.labeled).size == 150
    # the accuracies are those of fresh fits on the labeled prefixes
    for n, acc in zip(res.n_labeled, res.accuracy):
        model = make().fit(X[res.labeled[:n]], y[res.labeled[:n]])
        assert acc == pytest.approx(np.mean(model.predict(Xt) == yt))


def test_uncertainty_sampling_picks_the_smallest_margins(split):
    X, y, Xt, yt = split
    res = run_active_learning(
        UncertaintySampling(make(), m=25), X, y, Xt, yt, initial=20, budget=95, random_state=1
    )
    labeled = list(res.groups[0])
    for g in res.groups[1:]:
        model = make().fit(X[labeled], y[labeled])
        open_ = np.setdiff1d(np.arange(len(y)), labeled)
        z = np.abs(model.decision_function(X[open_]))
        np.testing.assert_array_equal(g, open_[np.argsort(z, kind="stable")[: len(g)]])
        labeled.extend(g.tolist())
    np.testing.assert_array_equal(res.n_labeled, [20, 45, 70, 95])


def test_fgal_with_p_equal_m_is_uncertainty_sampling(split):
    X, y, Xt, yt = split
    a = run_active_learning(FGAL(make(), m=30, p=30), X, y, Xt, yt, budget=140, random_state=2)
    b = run_active_learning(
        UncertaintySampling(make(), m=30), X, y, Xt, yt, budget=140, random_state=2
    )
    np.testing.assert_array_equal(a.labeled, b.labeled)
    np.testing.assert_array_equal(a.accuracy, b.accuracy)


def test_oracle_callable_budget_and_other_estimators(split):
    X, y, Xt, yt = split
    asked = []

    def oracle(idx):
        asked.append(np.asarray(idx).copy())
        return y[idx]

    a = run_active_learning(
        FGAL(make(), m=20, p=5), X, oracle, Xt, yt, initial=10, budget=55, random_state=3
    )
    b = run_active_learning(
        FGAL(make(), m=20, p=5), X, y, Xt, yt, initial=10, budget=55, random_state=3
    )
    np.testing.assert_array_equal(a.labeled, b.labeled)
    np.testing.assert_array_equal(np.concatenate(asked), a.labeled)  # each label asked once
    np.testing.assert_array_equal(a.n_labeled, [10, 30, 50, 55])
    assert isinstance(a, ActiveLearningResult) and a.time_s > 0
    # uncertainty sampling works with any binary scikit-learn classifier
    c = run_active_learning(
        UncertaintySampling(SVC(gamma=0.05), m=50), X, y, Xt, yt, budget=110, random_state=0
    )
    np.testing.assert_array_equal(c.n_labeled, [50, 100, 110])
    assert c.accuracy[-1] > 0.8
    # the whole pool by default
    d = run_active_learning(
        UncertaintySampling(make(), m=200), X[:120], y[:120], Xt, yt, initial=20, random_state=0
    )
    np.testing.assert_array_equal(d.n_labeled, [20, 120])


def test_bad_input(split):
    X, y, Xt, yt = split
    with pytest.raises(ValueError, match="deltafit classifier"):
        run_active_learning(FGAL(SVC(), m=10, p=5), X, y, Xt, yt)
    with pytest.raises(ValueError, match="p"):
        run_active_learning(FGAL(make(), m=10, p=20), X, y, Xt, yt)
    with pytest.raises(ValueError, match="classifier"):
        run_active_learning(UncertaintySampling(df.KernelRegressor()), X, y, Xt, yt)
    with pytest.raises(ValueError, match="oracle"):
        run_active_learning(FGAL(make()), X, y[:10], Xt, yt)
    with pytest.raises(ValueError, match="oracle returned"):
        run_active_learning(FGAL(make()), X, lambda idx: y[:3], Xt, yt)
    with pytest.raises(ValueError, match="single class"):
        run_active_learning(FGAL(make()), X, np.zeros(len(y), int), Xt, yt)
    with pytest.raises(ValueError, match="initial"):
        run_active_learning(FGAL(make()), X, y, Xt, yt, initial=50, budget=20)
    with pytest.raises(ValueError, match="NaN"):
        Xb = X.copy()
        Xb[3, 3] = np.nan
        run_active_learning(FGAL(make()), Xb, y, Xt, yt)
    with pytest.raises(ValueError, match="features"):
        run_active_learning(FGAL(make()), X, y, Xt[:, :5], yt)
    with pytest.raises(ValueError, match="y_test"):
        run_active_learning(FGAL(make()), X, y, Xt, yt[:5])
