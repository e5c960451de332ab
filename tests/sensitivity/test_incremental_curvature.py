"""IncrementalSphere(region="curvature") and the warm recomputations of KDR and FGAL.

Validity: after random add / remove / discard sequences the curvature bounds contain the
decision of the model retrained on the changed data (the reference: a copy of the model
updated with the same change, exact to its certified solver residual, so the check allows
``‖Φ(x)‖ · grad_norm_`` of slack) and are never wider than the ball's.  The ball
(``region="sphere"``) is the object of before: KDR's and FGAL's outputs with the old cold
fits (``warm=False``) are those the package gave before this option existed (recorded below),
and the warm updates give the same model as a fit on the same samples.
"""

import copy
import json

import numpy as np
import pytest
from sklearn.base import clone

import deltafit as df
from deltafit.active import FGAL, UncertaintySampling, run_active_learning
from deltafit.sensitivity import IncrementalSphere, MulticlassIncrementalSphere
from deltafit.stream import KDR, prequential

CASES = [
    ("linear", "logistic", True),
    ("linear", "squared_hinge", False),
    ("kernel", "logistic", False),
    ("kernel", "squared_hinge", True),
]


def _make(kind, loss, intercept):
    if kind == "linear":
        return df.LinearClassifier(loss=loss, C=0.5, fit_intercept=intercept)
    return df.KernelClassifier(loss=loss, kernel="rbf", gamma=0.03, C=1.0, fit_intercept=intercept)


def _phi_norms(model, X):
    """‖Φ(x)‖ of the model's feature space (the kernel's diagonal for kernel models)."""
    prob = model.problem_
    if prob.kernel:
        return np.sqrt(prob.kernel_functions()[1](X))
    return np.linalg.norm(prob.features(X), axis=1)


def _walk(sp, X, y, n_model, rng, steps):
    """A random walk of add / remove / discard on ``sp``; the current A (rows) and R (ids)."""
    A, R = {}, {}
    fresh = list(range(n_model, X.shape[0]))
    ids = list(range(n_model))
    for _ in range(steps):
        move = rng.integers(3)
        if move == 0 and fresh:
            i = fresh.pop(rng.integers(len(fresh)))
            A[int(sp.add(X[i : i + 1], y[i : i + 1])[0])] = i
        elif move == 1 and len(ids) > 5:
            i = ids.pop(rng.integers(len(ids)))
            R[int(sp.remove([i])[0])] = i
        elif A or R:
            pool = list(A) + list(R)
            key = pool[rng.integers(len(pool))]
            sp.discard([key])
            if key in A:
                fresh.append(A.pop(key))
            else:
                ids.append(R.pop(key))
    return sorted(A.values()), sorted(R.values())


def _retrained(model, X, y, a, r):
    refit = copy.deepcopy(model)
    refit.update(X_add=X[a] if a else None, y_add=y[a] if a else None, remove_ids=r if r else None)
    return refit


@pytest.mark.parametrize("kind,loss,intercept", CASES)
def test_curvature_bounds_hold_and_are_never_wider(
    kind, loss, intercept, breast_cancer, fitted_models
):
    X, y = breast_cancer
    X, y = X[:140], y[:140]
    model = fitted_models(_make(kind, loss, intercept), "breast_cancer", 90)  # X[:90]
    query = X[90:]
    for seed in range(3):
        rng = np.random.default_rng(seed)
        ball = IncrementalSphere(model, capacity=4)
        tight = IncrementalSphere(model, capacity=4, region="curvature")
        tight.track(query)
        state = rng.bit_generator.state
        a, r = _walk(ball, X, y, 90, rng, 12)
        rng.bit_generator.state = state
        assert _walk(tight, X, y, 90, rng, 12) == (a, r)
        assert tight.r_norm == ball.r_norm and tight.radius == ball.radius
        lo_b, hi_b = ball.decision_bounds(query)
        lo, hi = tight.decision_bounds(query)
        assert np.all(lo >= lo_b) and np.all(hi <= hi_b)
        refit = _retrained(model, X, y, a, r)
        d = refit.decision_function(query)
        slack = _phi_norms(model, query) * refit.grad_norm_ + 1e-10
        assert np.all(lo - slack <= d) and np.all(d <= hi + slack), (seed, a, r)
        c = tight.center_decision(query)
        assert np.all((lo <= c) & (c <= hi))
        # the tracked points answer the same
        tl, th = tight.tracked_bounds()
        np.testing.assert_allclose(tl, lo, rtol=0, atol=1e-12)  # batch vs subset products
        np.testing.assert_allclose(th, hi, rtol=0, atol=1e-12)
        np.testing.assert_array_equal(tight.tracked_center(np.arange(5)), c[:5])
        assert tight.distance_bound() <= ball.distance_bound()
        wide = hi_b - lo_b > 1e-6  # a change the ball sees (not only samples with ℓ' = 0)
        if (a or r) and wide.any():
            # the region is much tighter than the ball on a real change
            assert np.median((hi - lo)[wide] / (hi_b - lo_b)[wide]) < 0.9
            assert np.linalg.norm(d - c) <= np.linalg.norm(d - ball.center_decision(query)) + 1e-9


def test_empty_change_and_discard_back_to_the_ball(breast_cancer, fitted_models):
    X, y = breast_cancer
    model = fitted_models(_make("linear", "logistic", True), "breast_cancer", 100)
    ball = IncrementalSphere(model)
    tight = IncrementalSphere(model, region="curvature")
    for sp in (ball, tight):
        keys = sp.add(X[100:110], y[100:110])
        sp.discard(keys)
    for got, want in zip(tight.decision_bounds(X[200:220]), ball.decision_bounds(X[200:220])):
        np.testing.assert_array_equal(got, want)


def test_a_refused_change_leaves_the_region_as_it_was(breast_cancer, fitted_models):
    X, y = breast_cancer
    model = fitted_models(_make("kernel", "squared_hinge", False), "breast_cancer", 80)
    sp = IncrementalSphere(model, region="curvature")
    sp.add(X[80:90], y[80:90])
    sp.remove([1, 2])
    before = sp.decision_bounds(X[100:120])
    with pytest.raises(ValueError, match="samples already removed"):
        sp.remove([2])
    with pytest.raises(ValueError):
        sp.add(X[90:92], np.array([0, 7]))
    with pytest.raises(ValueError, match="unknown or already discarded"):
        sp.discard([999])
    for got, want in zip(sp.decision_bounds(X[100:120]), before):
        np.testing.assert_array_equal(got, want)
    with pytest.raises(ValueError, match="region must be one of"):
        IncrementalSphere(model, region="ellipsoid")


def test_multiclass_curvature_per_class(iris):
    X, y = iris
    model = df.KernelClassifier(loss="logistic", kernel="rbf", gamma=0.2, C=2.0).fit(X[::2], y[::2])
    ball = IncrementalSphere(model)
    tight = IncrementalSphere(model, region="curvature")
    assert isinstance(tight, MulticlassIncrementalSphere) and tight.region == "curvature"
    for sp in (ball, tight):
        sp.add(X[1:40:2], y[1:40:2])
        sp.remove([0, 3, 7])
    refit = _retrained(model, X, y, list(range(1, 40, 2)), [0, 3, 7])
    d = refit.decision_function(X)
    slack = (
        1e-9
        + np.array([refit.problem_.for_class(k).certified_residual for k in range(3)])
        * _phi_norms(model, X)[:, None]
    )
    lo, hi = tight.decision_bounds(X)
    lo_b, hi_b = ball.decision_bounds(X)
    assert lo.shape == (150, 3)
    assert np.all(lo >= lo_b) and np.all(hi <= hi_b)
    assert np.all(lo - slack <= d) and np.all(d <= hi + slack)
    labels, certain = tight.predict_certain(X)
    _, certain_b = ball.predict_certain(X)
    assert np.all(labels[certain] == refit.predict(X)[certain])
    assert certain.sum() >= certain_b.sum()


def test_squared_loss_region_is_the_exact_change(breast_cancer):
    X, y = breast_cancer
    model = df.LinearRegressor(C=0.5).fit(X[:100], y[:100].astype(float))
    sp = IncrementalSphere(model, region="curvature")
    sp.add(X[100:110], y[100:110].astype(float))
    sp.remove([4, 5])
    refit = _retrained(model, X, y.astype(float), list(range(100, 110)), [4, 5])
    lo, hi = sp.decision_bounds(X[200:230])
    d = refit.predict(X[200:230])
    assert np.all(hi - lo < 1e-6)
    np.testing.assert_allclose((lo + hi) / 2, d, atol=1e-6)


# ---------------------------------------------------------------- KDR and FGAL
# Outputs of KDR and FGAL with the ball and cold fits, recorded with the package as it was
# before region= and warm= existed (prequential computation times, labelling order).
_KDR_LIN = [79, 89, 96, 116, 127, 266, 289, 305, 307, 310, 313, 315]
_KDR_LIN_N = 24
_KDR_LIN_ACC = 0.820738137082601
_FGAL_KER = [
    189,
    123,
    185,
    213,
    106,
    127,
    176,
    73,
    275,
    242,
    266,
    147,
    299,
    58,
    122,
    78,
    11,
    167,
    220,
    29,
    1,
    93,
    124,
    77,
    100,
    280,
    204,
    296,
    267,
    228,
    193,
    133,
    143,
    219,
    175,
    71,
    226,
    91,
    217,
    89,
    40,
    253,
    86,
    237,
    214,
    155,
    132,
    38,
    249,
    134,
    192,
    163,
    135,
    201,
    32,
    98,
    153,
    117,
    15,
    83,
    87,
    292,
    157,
    216,
    264,
    240,
    191,
    258,
    22,
    274,
    190,
    236,
    137,
    44,
    273,
    211,
    118,
    81,
    94,
    173,
    197,
    188,
    196,
    212,
    82,
    136,
    67,
    26,
    234,
    282,
    166,
    160,
    148,
    184,
    183,
    294,
    64,
    209,
    34,
    223,
    70,
    254,
    291,
    287,
    92,
    128,
    18,
    37,
    285,
    295,
    104,
    95,
    195,
    198,
    164,
    238,
    156,
    241,
    65,
    171,
    225,
    257,
    99,
    298,
    4,
    239,
    66,
    6,
    194,
    88,
    297,
    14,
    262,
    247,
    272,
    290,
    16,
    54,
    30,
    75,
    207,
    200,
    121,
    12,
    110,
    215,
    289,
    129,
    235,
    68,
    149,
    45,
    90,
    13,
    263,
    62,
    56,
    60,
    221,
    27,
    248,
    8,
    28,
    25,
    144,
    53,
    168,
    51,
    250,
    230,
    80,
    42,
    23,
    47,
    231,
    63,
    279,
    186,
    139,
    43,
]
_FGAL_KER_ACC = [0.84, 0.885, 0.86, 0.91, 0.915]


def _stream(breast_cancer):
    X, y = breast_cancer
    y = y.copy()
    y[300:] = 1 - y[300:]
    return X, y


@pytest.mark.parametrize("warm", [False, True])
def test_kdr_sphere_outputs_as_before(warm, breast_cancer):
    X, y = _stream(breast_cancer)
    kdr = KDR(df.LinearClassifier(loss="logistic", C=0.1), window=80, threshold=0.3, warm=warm)
    rep = prequential(kdr, (X, y))
    assert np.asarray(rep.computation_at)[:12].tolist() == _KDR_LIN
    assert len(rep.computation_at) == _KDR_LIN_N
    # warm: every recomputation after the first is an update, except those after which more
    # than 40% of the window had changed (fitted: such an update costs what a fit costs)
    assert (0 < kdr.n_warm_updates_ <= _KDR_LIN_N - 1) if warm else kdr.n_warm_updates_ == 0
    if warm:
        assert rep.accuracy == pytest.approx(_KDR_LIN_ACC, abs=1e-12)
    else:
        assert rep.accuracy == _KDR_LIN_ACC


def _count_calls(monkeypatch, cls, name):
    calls = []
    orig = getattr(cls, name)

    def counted(self, *args, **kwargs):
        calls.append(name)
        return orig(self, *args, **kwargs)

    monkeypatch.setattr(cls, name, counted)
    return calls


def test_kdr_recomputes_by_warm_updates(monkeypatch, breast_cancer):
    """One fit (the first model), every later computation an update unless more than 40% of
    the window changed since the last one (then a fit), and the updated model is the fit on
    the window."""
    X, y = _stream(breast_cancer)
    fits = _count_calls(monkeypatch, df.KernelClassifier, "fit")
    updates = _count_calls(monkeypatch, df.KernelClassifier, "update")
    est = df.KernelClassifier(loss="squared_hinge", kernel="rbf", gamma=0.02, C=0.5)
    kdr = KDR(est, window=80, threshold=0.5)
    prequential(kdr, (X[:330], y[:330]))
    assert kdr.n_model_computations_ > 5
    assert len(fits) + len(updates) == kdr.n_model_computations_
    assert kdr.n_warm_updates_ == len(updates) > 0
    # T = 0: a computation after every sample, so the model is the last window's
    del fits[:], updates[:]
    kdr = KDR(est, window=80, threshold=0.0)
    prequential(kdr, (X[200:330], y[200:330]))
    assert len(fits) == 1 and len(updates) == 130 - 80 == kdr.n_warm_updates_
    ref = clone(est).fit(X[250:330], y[250:330])
    q = X[400:450]
    tol = (kdr.model_.grad_norm_ + ref.grad_norm_) * np.sqrt(2.0) + 1e-9  # ‖Φ(x)‖² ≤ 2
    np.testing.assert_allclose(
        kdr.model_.decision_function(q), ref.decision_function(q), rtol=0, atol=tol
    )
    assert kdr.model_.sample_ids_.size == 80


def test_kdr_curvature_monitor(breast_cancer):
    X, y = _stream(breast_cancer)
    X, y = X[:130], y[:130]
    est = df.LinearClassifier(loss="logistic", C=0.1)
    ball = KDR(est, window=60, threshold=0.3)
    tight = KDR(est, window=60, threshold=0.3, region="curvature")
    prequential(ball, (X, y))
    prequential(tight, (X, y))
    assert tight.sphere_.region == "curvature"
    assert tight.n_model_computations_ <= ball.n_model_computations_
    with pytest.raises(ValueError, match="'region' parameter"):
        KDR(est, region="box").learn_one(X[0], y[0])
    with pytest.raises(ValueError, match="warm"):
        KDR(est, warm="yes").learn_one(X[0], y[0])


def _digits_small(digits):
    X, y = digits
    return X[:500], y[:500]


@pytest.mark.parametrize("warm", [False, True])
def test_fgal_sphere_outputs_as_before(warm, digits):
    X, y = _digits_small(digits)
    est = df.KernelClassifier(loss="squared_hinge", C=1.0, gamma=0.05, fit_intercept=False)
    r = run_active_learning(
        FGAL(est, m=40, p=10),
        X[:300] / X.max(),
        y[:300],
        X[300:] / X.max(),
        y[300:],
        initial=20,
        budget=180,
        random_state=1,
        warm=warm,
    )
    assert r.labeled.tolist() == _FGAL_KER
    if warm:
        np.testing.assert_allclose(r.accuracy, _FGAL_KER_ACC, atol=1e-12)
    else:
        assert r.accuracy.tolist() == _FGAL_KER_ACC
    assert r.n_warm_updates == (r.n_model_computations - 1 if warm else 0)


def test_active_learning_updates_instead_of_fitting(monkeypatch, breast_cancer):
    X, y = breast_cancer
    fits = _count_calls(monkeypatch, df.LinearClassifier, "fit")
    adds = _count_calls(monkeypatch, df.LinearClassifier, "add")
    est = df.LinearClassifier(loss="logistic", C=0.1)
    warm = run_active_learning(
        UncertaintySampling(est, m=20),
        X[:400],
        y[:400],
        X[400:],
        y[400:],
        initial=20,
        budget=140,
        random_state=0,
    )
    assert len(fits) == 1 and len(adds) == warm.n_model_computations - 1 == 6
    del fits[:], adds[:]
    cold = run_active_learning(
        UncertaintySampling(est, m=20),
        X[:400],
        y[:400],
        X[400:],
        y[400:],
        initial=20,
        budget=140,
        random_state=0,
        warm=False,
    )
    assert len(fits) == 7 and not adds
    np.testing.assert_array_equal(warm.labeled, cold.labeled)
    np.testing.assert_allclose(warm.accuracy, cold.accuracy, atol=1e-12)


def test_fgal_curvature_ranking(breast_cancer):
    """With region="curvature" FGAL ranks by the curvature region's centre: the first group is
    AL's, every later pick has the smallest |centre| of the region of the labels so far."""
    X, y = breast_cancer
    model = df.LinearClassifier(loss="logistic", C=0.1).fit(X[:30], y[:30])
    cand = np.arange(30, 300)
    fgal = FGAL(df.LinearClassifier(loss="logistic", C=0.1), m=30, p=10, region="curvature")
    chosen, labels, groups = fgal.select(model, X, cand, 30, lambda i: y[i])
    assert repr(fgal) == "FGAL(m=30, p=10, region='curvature')"
    first = cand[np.argsort(np.abs(model.decision_function(X[cand])), kind="stable")[:10]]
    assert groups[0].tolist() == first.tolist()
    sp = IncrementalSphere(model, region="curvature")
    sp.add(X[groups[0]], y[groups[0]])
    rest = np.setdiff1d(cand, groups[0])
    c = np.abs(sp.center_decision(X[rest]))
    assert sorted(groups[1].tolist()) == sorted(rest[np.argsort(c, kind="stable")[:10]].tolist())
    with pytest.raises(ValueError, match="center='newton'"):
        FGAL(fgal.estimator, center="newton", region="curvature")._check()


def test_active_command_region_and_cold(tmp_path, capsys):
    from deltafit.cli import main

    argv = [
        "active",
        "breast_cancer",
        "--seeds",
        "1",
        "--n-test",
        "100",
        "--n-pool",
        "100",
        "--m",
        "40",
        "--p",
        "20",
        "--initial",
        "20",
        "--out",
        str(tmp_path),
        "--json",
    ]
    assert main(argv + ["--region", "curvature"]) == 0
    curv = json.loads(capsys.readouterr().out)["curves"]
    assert "FGAL(m=40, p=20, curvature)" in curv
    assert main(argv + ["--cold"]) == 0
    cold = json.loads(capsys.readouterr().out)["curves"]
    assert main(argv) == 0
    warm = json.loads(capsys.readouterr().out)["curves"]
    for k in warm:
        np.testing.assert_allclose(warm[k]["accuracy_mean"], cold[k]["accuracy_mean"], atol=1e-12)


def test_kdr_fits_when_most_of_the_window_changed(monkeypatch, breast_cancer):
    """A recomputation after more than 40% of the window changed is a fit, one after fewer
    changes an update (the share is counted as |A| + |R| over the window)."""
    X, y = _stream(breast_cancer)
    est = df.LinearClassifier(loss="logistic", C=0.1)
    for n_new, fitted in ((10, False), (40, True)):
        fits = _count_calls(monkeypatch, df.LinearClassifier, "fit")
        kdr = KDR(est, window=100, threshold=1e9)  # never recomputes by itself
        prequential(kdr, (X[: 100 + n_new], y[: 100 + n_new]))
        del fits[:]
        kdr._compute()  # |A| = |R| = n_new: 20% or 80% of the window
        assert (len(fits) == 1) == fitted
        assert kdr.n_warm_updates_ == (0 if fitted else 1)
        ref = clone(est).fit(X[n_new : 100 + n_new], y[n_new : 100 + n_new])
        np.testing.assert_allclose(
            kdr.model_.decision_function(X[400:]), ref.decision_function(X[400:]), rtol=0, atol=1e-6
        )
        monkeypatch.undo()


def test_warm_recomputations_fit_when_the_fit_resolves_gamma(breast_cancer):
    """gamma="scale" is resolved from the rows a fit sees; an update keeps the first fit's
    value, so KDR and active learning fit instead (their models stay those of a fit)."""
    X, y = _stream(breast_cancer)
    X = X * 3.0 + 1.0  # a variance away from 1, so the resolved gamma moves with the window
    est = df.KernelClassifier(loss="squared_hinge", kernel="rbf", C=0.5)  # gamma="scale"
    kdr = KDR(est, window=80, threshold=0.0)
    prequential(kdr, (X[200:300], y[200:300]))
    assert kdr.n_model_computations_ > 1 and kdr.n_warm_updates_ == 0
    # the last computation came after sample 299 was predicted: its window is X[219:299]
    ref = clone(est).fit(X[219:299], y[219:299])
    assert kdr.model_.gamma_ == ref.gamma_
    np.testing.assert_allclose(
        kdr.model_.decision_function(X[400:420]),
        ref.decision_function(X[400:420]),
        rtol=0,
        atol=1e-8,
    )
    r = run_active_learning(
        UncertaintySampling(est, m=20),
        X[:300],
        y[:300],
        X[400:],
        y[400:],
        initial=40,
        budget=100,
        random_state=0,
        warm=True,
    )
    assert r.n_warm_updates == 0
    fixed = df.KernelClassifier(loss="squared_hinge", kernel="rbf", C=0.5, gamma=0.01)
    r = run_active_learning(
        UncertaintySampling(fixed, m=20),
        X[:300],
        y[:300],
        X[400:],
        y[400:],
        initial=40,
        budget=100,
        random_state=0,
        warm=True,
    )
    assert r.n_warm_updates > 0
