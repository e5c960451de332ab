"""K ≥ 3 classes in the window learners (SlidingWindow, DDM, KDR) and the active learners
(FGAL, uncertainty sampling), against brute force: refits of the window, the KDR monitor and
FGAL's choices re-derived from the class balls' definitions, the refit inside the bounds."""

import numpy as np
import pytest
from sklearn.datasets import load_digits

import deltafit as df
from deltafit.active import FGAL, UncertaintySampling, run_active_learning
from deltafit.stream import DDM, KDR, NORMA, OneVsRest, SlidingWindow, prequential
from stream_reference import scratch_ball

TOL = 1e-7


@pytest.fixture(scope="module")
def digits10():
    X, y = load_digits(return_X_y=True)
    return X / 16.0, y


def make(**kw):
    return df.KernelClassifier(
        **{**dict(loss="squared_hinge", kernel="rbf", gamma=0.05, C=1.0), **kw}
    )


def test_sliding_window_model_is_the_refit_of_its_window(digits10):
    X, y = digits10
    sw = SlidingWindow(make(), window=60, period=25, initial=40).partial_fit(X[:300], y[:300])
    # computations at samples 40, 65, ..., 290: the last one on samples 230..289
    assert sw.n_model_computations_ == 11
    ref = make().fit(X[230:290], y[230:290])
    np.testing.assert_allclose(
        sw.model_.decision_function(X[300:400]),
        ref.decision_function(X[300:400]),
        rtol=1e-10,
        atol=1e-12,
    )
    np.testing.assert_array_equal(sw.predict(X[300:400]), ref.predict(X[300:400]))
    assert [sw.predict_one(x) for x in X[300:310]] == list(ref.predict(X[300:310]))


def test_ddm_over_a_multiclass_batch_model_and_one_vs_rest_norma(digits10):
    X, y = digits10
    ddm = DDM(make(), window=80, initial=40)
    rep = prequential(ddm, (X[:400], y[:400]))
    assert set(ddm.classes_.tolist()) == set(range(10)) and rep.accuracy > 0.7
    assert set(ddm.model_.classes_.tolist()) == set(range(10))
    np.testing.assert_array_equal(ddm.predict(X[400:450]), ddm.model_.predict(X[400:450]))
    online = DDM(OneVsRest(NORMA(gamma=0.5, eta=0.5, budget=80), classes=np.arange(10)), window=80)
    rep2 = prequential(online, (X[:300], y[:300]))
    assert rep2.accuracy > 0.6 and online.decision_function(X[:5]).shape == (5, 10)
    with pytest.raises(ValueError, match="binary"):
        DDM(NORMA(), window=80).partial_fit(X[:50], y[:50])


def test_kdr_monitor_is_the_largest_class_ball(digits10):
    """KDR's mean ‖r‖ is the mean over samples of max_k ‖r_k‖, each recomputed from the
    window's A and R with class k's targets; the balls contain the refit of the window."""
    X, y = digits10
    w = 50
    kdr = KDR(make(), window=w, threshold=1e300, initial=w).partial_fit(X[:w], y[:w])
    assert kdr.n_model_computations_ == 1
    model = kdr.model_
    total = 0.0
    for i in range(w, w + 30):
        kdr.learn_one(X[i], y[i])
        lo_win = i + 1 - w  # the window is samples lo_win .. i
        A = np.arange(w, i + 1)
        R = np.arange(0, lo_win)
        r = [scratch_ball(model, X[A], y[A], X[R], y[R], X[:1], klass=k)[0] for k in range(10)]
        total += max(r)
        assert kdr.mean_r_norm_ == pytest.approx(total / (i + 1 - w), rel=1e-9)
    np.testing.assert_allclose(kdr.sphere_.r_norm, r, rtol=1e-9)
    refit = make().fit(X[30:80], y[30:80])
    lo, hi = kdr.sphere_.decision_bounds(X[500:700])
    d = refit.decision_function(X[500:700])
    assert np.all(d >= lo - TOL) and np.all(d <= hi + TOL)
    assert kdr.n_model_computations_ == 1


def test_kdr_recomputes_at_its_threshold_and_at_a_new_class(digits10):
    X, y = digits10
    kdr = KDR(make(), window=60, threshold=0.5, initial=60)
    rep = prequential(kdr, (X[:400], y[:400]))
    assert 1 < rep.n_model_computations < 340 and rep.accuracy > 0.8
    # a class the model has not seen cannot enter its balls: it triggers a recomputation
    first = y < 3
    Xs, ys = np.vstack([X[first][:60], X[y == 7][:1]]), np.r_[y[first][:60], 7]
    k2 = KDR(make(), window=60, threshold=1e300).partial_fit(Xs[:60], ys[:60])
    assert k2.model_.classes_.tolist() == [0, 1, 2] and k2.n_model_computations_ == 1
    k2.learn_one(Xs[60], 7)
    assert k2.n_model_computations_ == 2 and k2.model_.classes_.tolist() == [0, 1, 2, 7]
    assert k2.sphere_.n_entries == 0


def brute_force_multiclass_fgal(X, y, labeled0, m, p, budget):
    """FGAL for K classes re-derived: refit, then per sub-iteration every class's centre of
    every unlabeled sample from A (Sivan et al. eq. 10, class k's ±1 targets), the p samples
    with the smallest top-two margin."""
    labeled = list(labeled0)
    groups = [np.array(labeled0)]
    while len(labeled) < budget:
        model = make(fit_intercept=False).fit(X[labeled], y[labeled])
        open_ = np.setdiff1d(np.arange(len(y)), labeled)
        A = []
        k = min(m, budget - len(labeled), open_.size)
        while len(A) < k:
            cand = np.setdiff1d(open_, A)
            C = np.column_stack(
                [
                    scratch_ball(model, X[A], y[A], X[:0], y[:0], X[cand], klass=j)[1]
                    for j in range(len(model.classes_))
                ]
            )
            S = np.sort(C, axis=1)
            pick = cand[np.argsort(S[:, -1] - S[:, -2], kind="stable")[: min(p, k - len(A))]]
            A.extend(pick.tolist())
            groups.append(pick)
        labeled.extend(A)
    return groups


def test_fgal_chooses_what_the_class_balls_say(digits10):
    X, y = digits10
    Xp, yp, Xt, yt = X[:160], y[:160], X[1500:1600], y[1500:1600]
    r = run_active_learning(
        FGAL(make(fit_intercept=False), m=20, p=5),
        Xp,
        yp,
        Xt,
        yt,
        initial=30,
        budget=70,
        random_state=0,
    )
    ref = brute_force_multiclass_fgal(Xp, yp, r.groups[0], 20, 5, 70)
    assert len(r.groups) == len(ref)
    for a, b in zip(r.groups, ref):
        np.testing.assert_array_equal(np.sort(a), np.sort(b))
    assert r.n_model_computations == 3 and r.accuracy[-1] > 0.6


def test_uncertainty_sampling_uses_the_top_two_margin(digits10):
    X, y = digits10
    model = make().fit(X[:100], y[:100])
    pool = np.arange(100, 400)
    chosen, labels, _ = UncertaintySampling(make(), m=15).select(model, X, pool, 15, lambda i: y[i])
    S = np.sort(model.decision_function(X[pool]), axis=1)
    np.testing.assert_array_equal(chosen, pool[np.argsort(S[:, -1] - S[:, -2], kind="stable")[:15]])
    np.testing.assert_array_equal(labels, y[chosen])


def test_a_class_new_to_the_model_stays_out_of_the_balls(digits10):
    """The model knows three of the ten classes: FGAL's balls take the labels of known
    classes only (the others wait for the next model); its choices are the brute-force ones
    with A restricted to those labels."""
    X, y = digits10
    known = np.flatnonzero(y < 3)[:40]
    model = make(fit_intercept=False).fit(X[known], y[known])
    cand = np.arange(200, 330)
    chosen, labels, groups = FGAL(make(fit_intercept=False), m=20, p=5).select(
        model, X, cand, 20, lambda i: y[i]
    )
    A, ref = [], []
    while len(ref) < 20:
        rest = np.setdiff1d(cand, ref)
        a = [i for i in A if y[i] < 3]
        C = np.column_stack(
            [scratch_ball(model, X[a], y[a], X[:0], y[:0], X[rest], klass=j)[1] for j in range(3)]
        )
        S = np.sort(C, axis=1)
        pick = rest[np.argsort(S[:, -1] - S[:, -2], kind="stable")[:5]]
        ref.extend(pick.tolist())
        A.extend(pick.tolist())
    np.testing.assert_array_equal(chosen, ref)
    assert len(groups) == 4 and (y[chosen] >= 3).any() and (y[chosen] < 3).any()
    np.testing.assert_array_equal(labels, y[chosen])
