"""Leave-one-out, LOOSearchCV and TreeCV on the fast update path (issues 16 and 20).

* The batched leave-one-out refits (``TrainingProblem.loo_refits``: every undecided sample's
  chord steps as the columns of one matrix) give the labels of n independent refits
  (scikit-learn's ``LogisticRegression`` / the exact squared-hinge solver of
  ``tests/reference.py``), and the exact scores of the sequential warm refits they replace.
* ``LOOSearchCV(region=...)``: the same scores and selection for every region; the curvature
  region decides at least as many labels as the balls; a bad value is refused.
* TreeCV's exact learners grow a node by a warm update of its parent's model (chord steps on
  the stored Hessian), counted, not timed.
"""

from __future__ import annotations

import numpy as np
import pytest
from sklearn.metrics.pairwise import rbf_kernel
from sklearn.model_selection import StratifiedKFold

import deltafit as df
from deltafit.model_selection import LOOSearchCV, loo, treecv
from deltafit.model_selection._problem import problem_of
from reference import kernel_features, logistic_reference, squared_hinge_reference

N_LINEAR, N_KERNEL = 150, 80
GAMMA = 0.5
DEC_TOL = 1e-6  # left-out decision values vs the reference solvers, relative to the scale


@pytest.fixture(scope="module")
def cancer(breast_cancer):
    X, y = breast_cancer
    idx = np.random.default_rng(1).choice(X.shape[0], N_LINEAR, replace=False)
    return X[idx], y[idx]


def _reference_loo(F, t, C, loss):
    """Left-out decision values of n independent reference fits on the rows F."""
    solve = logistic_reference if loss == "logistic" else squared_hinge_reference
    out = np.empty(len(t))
    keep = np.ones(len(t), dtype=bool)
    for i in range(len(t)):
        keep[i] = False
        out[i] = F[i] @ solve(F[keep], t[keep], C)
        keep[i] = True
    return out


def _features(kind, X):
    if kind == "linear":
        return np.hstack([X, np.ones((X.shape[0], 1))])
    return kernel_features(rbf_kernel(X, gamma=GAMMA) + 1.0)  # F Fᵀ = K + s², s = 1


def _estimator(kind, loss, C):
    if kind == "linear":
        return df.LinearClassifier(loss=loss, C=C)
    return df.KernelClassifier(loss=loss, C=C, kernel="rbf", gamma=GAMMA)


CASES = [
    ("linear", "logistic", 30.0),
    ("linear", "logistic", 1000.0),
    ("linear", "squared_hinge", 10.0),
    ("kernel", "logistic", 30.0),
    ("kernel", "squared_hinge", 10.0),
]


@pytest.mark.parametrize("kind,loss,C", CASES)
def test_loo_labels_equal_independent_refits(cancer, kind, loss, C):
    X, y = cancer
    if kind == "kernel":
        X, y = X[:N_KERNEL], y[:N_KERNEL]
    t = np.where(y == 1, 1.0, -1.0)
    ref = _reference_loo(_features(kind, X), t, C, loss)
    assert np.min(np.abs(ref)) > 1e-6, "a left-out decision on the boundary: labels ambiguous"
    est = _estimator(kind, loss, C)
    for method in ("bounds_early", "bounds"):
        res = loo(est, X, y, method=method)
        np.testing.assert_array_equal(res.y_pred, np.where(ref > 0, 1, 0))
        assert res.n_errors == int(np.sum((ref > 0) != (t > 0)))
        # certified intervals hold the reference; computed values equal it
        scale = 1.0 + np.abs(ref)
        assert np.all(res.lower <= ref + DEC_TOL * scale)
        assert np.all(ref <= res.upper + DEC_TOL * scale)
        known = ~np.isnan(res.decision)
        assert np.all(np.abs(res.decision[known] - ref[known]) <= DEC_TOL * scale[known])
        if method == "bounds":
            assert np.all(known[res.refit])
    if kind == "linear":  # not vacuous: batched refits went beyond the first Newton step
        op2 = loo(est, X, y, method="bounds_early")
        assert op2.details["region"] == "sphere"
        assert op2.n_refits > op2.details.get("newton_step_refits", 0)


@pytest.mark.parametrize(
    "loss,C", [("logistic", 30.0), ("logistic", 1000.0), ("squared_hinge", 10.0)]
)
def test_batched_refits_equal_sequential_refits(cancer, loss, C):
    """Every column of the batch run to convergence is the sequential warm refit (the chord
    solve of ``refit``), both certified to the solver's tolerance; weights included."""
    X, y = cancer
    w = np.random.default_rng(3).uniform(0.5, 2.0, size=len(y))
    for sw in (None, w):
        model = _estimator("linear", loss, C).fit(X, y, sample_weight=sw)
        prob = problem_of(model)
        prob.region = "sphere"
        lo, hi = prob.loo_bounds()
        ts = np.flatnonzero(~((lo > 0.0) | (hi <= 0.0)))
        assert ts.size >= 5
        blo, bhi, its, stopped, failed = prob.loo_refits(ts, early=False)
        assert not stopped.any()
        ok = ~failed
        assert ok.sum() >= ts.size // 2 and np.all(its[ok] >= 1)
        np.testing.assert_array_equal(blo[ok], bhi[ok])
        seq = np.array([prob.refit(np.array([i]), np.array([i]))[0][0] for i in ts])
        np.testing.assert_allclose(blo[ok], seq[ok], rtol=0, atol=1e-7 * (1 + np.abs(seq).max()))
        # op2: a stopped column's interval is certified and holds the exact value
        elo, ehi, _, est, efail = prob.loo_refits(ts, early=True, lo=lo[ts], hi=hi[ts])
        s = est & ~efail
        if loss == "logistic":  # (squared hinge: a step on the right margin set is exact)
            assert s.any()
        assert np.all((elo[s] <= seq[s] + 1e-9) & (seq[s] <= ehi[s] + 1e-9))
        assert np.all((elo[s] > 0) | (ehi[s] <= 0))


# ------------------------------------------------------------------------------ region switch
GRID = {"C": [0.3, 3.0, 30.0, 300.0]}


@pytest.fixture(scope="module")
def searches(cancer):
    X, y = cancer
    est = df.LinearClassifier(loss="logistic")
    return {
        r: LOOSearchCV(est, GRID, region=r, prune=False).fit(X, y)
        for r in ("auto", "sphere", "curvature")
    }


def test_search_regions_give_identical_results(searches):
    base = searches["sphere"]
    for r in ("auto", "curvature"):
        s = searches[r]
        np.testing.assert_array_equal(
            s.cv_results_["mean_test_score"], base.cv_results_["mean_test_score"]
        )
        assert s.best_index_ == base.best_index_ and s.best_params_ == base.best_params_
    # the curvature region screens out at least as many refits, and strictly more somewhere
    cur, sph = searches["curvature"].cv_results_, base.cv_results_
    assert np.all(cur["n_decided_by_bound"] >= sph["n_decided_by_bound"])
    assert np.any(cur["n_decided_by_bound"] > sph["n_decided_by_bound"])


def test_search_passes_its_region_down(cancer, searches):
    """Each configuration's screening is that of loo(..., region=r): "sphere" is the published
    leave-one-out ball alone."""
    X, y = cancer
    for r in ("sphere", "curvature"):
        got = searches[r].cv_results_["n_decided_by_bound"]
        want = [
            int(
                loo(
                    df.LinearClassifier(loss="logistic", C=C), X, y, region=r
                ).decided_by_bound.sum()
            )
            for C in GRID["C"]
        ]
        np.testing.assert_array_equal(got, want)
    model = df.LinearClassifier(loss="logistic", C=30.0).fit(X, y)
    lo, hi = df.sensitivity.loo_bounds(model, method="sphere")
    ball = int(np.sum((lo > 0) | (hi <= 0)))
    got = int(searches["sphere"].cv_results_["n_decided_by_bound"][2])
    assert abs(got - ball) <= 2  # the exact-gradient ball vs the one with the allowance


@pytest.mark.parametrize("bad", ["ball", "Sphere", None, 1])
def test_search_region_refused(cancer, bad):
    X, y = cancer
    with pytest.raises(ValueError, match="region"):
        LOOSearchCV(df.LinearClassifier(loss="logistic"), GRID, region=bad).fit(X, y)


# ------------------------------------------------------------------------------ TreeCV counters
class _Counts:
    """Counts the full Newton solves (and their iterations), the warm chord solves (and their
    steps) and the Hessians formed from all rows, through the module attributes the linear
    Newton state calls."""

    def __init__(self, monkeypatch):
        from deltafit._states import _newton_primal as WN
        from deltafit.solvers import _chord as CN

        self.c = dict(newton=0, newton_iter=0, chord=0, chord_iter=0, hessian=0)
        newton, chord, at = WN.newton_primal, WN.chord_solve, CN.Curvature.at.__func__

        def counted_newton(*a, **k):
            r = newton(*a, **k)
            self.c["newton"] += 1
            self.c["newton_iter"] += (r[0] if isinstance(r, tuple) else r).n_iter
            return r

        def counted_chord(*a, **k):
            r = chord(*a, **k)
            self.c["chord"] += 1
            self.c["chord_iter"] += 0 if r is None else r[0].n_iter
            return r

        def counted_at(cls, *a, **k):
            self.c["hessian"] += 1
            return at(cls, *a, **k)

        monkeypatch.setattr(WN, "newton_primal", counted_newton)
        monkeypatch.setattr(WN, "chord_solve", counted_chord)
        monkeypatch.setattr(CN.Curvature, "at", classmethod(counted_at))


@pytest.mark.parametrize("strategy", ["copy", "revert"])
def test_treecv_grows_nodes_by_warm_updates(breast_cancer, monkeypatch, strategy):
    X, y = breast_cancer
    k = 8
    counts = _Counts(monkeypatch)
    res = treecv(df.LinearClassifier(loss="logistic", C=1.0), X, y, cv=k, strategy=strategy)
    tree = dict(counts.c)
    for key in counts.c:
        counts.c[key] = 0
    scores = []
    for tr, te in StratifiedKFold(k).split(X, y):
        m = df.LinearClassifier(loss="logistic", C=1.0).fit(X[tr], y[tr])
        scores.append(m.score(X[te], y[te]))
    refits = dict(counts.c)
    np.testing.assert_allclose(res.fold_scores, scores, rtol=0, atol=1e-12)
    # two models are fitted from nothing (the root's two halves); every other node is a warm
    # update of its parent's model, which never falls back to a cold Newton solve
    assert tree["newton"] == 2
    assert tree["chord"] >= k - 2
    # Hessians formed from all rows: the two fits' Newton steps and the chord solves'
    # refreshes, fewer than the k refits' Newton steps
    assert refits["newton"] == k and refits["chord"] == 0
    assert tree["newton_iter"] + tree["hessian"] < refits["newton_iter"]
