"""KDR (Sivan et al. §4.4), SlidingWindow, prequential and the river adapter."""

import numpy as np
import pytest

import deltafit as df
from deltafit.stream import KDR, SlidingWindow, StreamReport, as_river, prequential
from stream_reference import kdr_twin, small_drift_stream


def make_kernel():
    return df.KernelClassifier(loss="squared_hinge", kernel="rbf", gamma=8.0, C=5.0)


@pytest.fixture(scope="module")
def stream():
    return small_drift_stream()


def test_kdr_equals_its_from_scratch_twin(stream):
    """Every step: KDR's incremental ‖r‖ equals the ball recomputed from A = W ∖ W₁ and
    R = W₁ ∖ W (1e-9), and the model computations happen at the same samples."""
    X, y = stream
    X, y = X[:500], y[:500]
    comps, rs, preds = kdr_twin(make_kernel, X, y, window=60, threshold=3.0, initial=40)
    kdr = KDR(make_kernel(), window=60, threshold=3.0, initial=40)
    mine, got = [], []
    for t in range(X.shape[0]):
        before = kdr.n_model_computations_ if t else 0
        pred = kdr.predict_one(X[t]) if t else None
        got.append(pred)
        kdr.learn_one(X[t], y[t])
        if kdr.n_model_computations_ != before:
            mine.append(t)
        elif kdr.sphere_ is not None:
            assert kdr.sphere_.r_norm == pytest.approx(rs[t], rel=1e-9, abs=1e-12), t
    assert mine == comps
    assert len(comps) > 5  # the threshold is crossed many times on this stream
    assert [p for p in got[40:]] == [p for p in preds[40:]]


def test_kdr_detections_are_pinned(stream):
    """Detections of KDR on the seeded drifting stream, at fixed sample indices: more of
    them right after the rotation at 450 than in the 200 samples before it."""
    X, y = stream
    rep = prequential(KDR(make_kernel(), window=100, threshold=20.0), (X, y))
    at = rep.computation_at.tolist()
    assert at == PINNED_KDR
    assert rep.n_model_computations == len(at)
    after = sum(450 <= t < 650 for t in at)
    before = sum(250 <= t < 450 for t in at)
    assert after > before


PINNED_KDR = [
    99,
    106,
    133,
    155,
    180,
    219,
    239,
    308,
    326,
    351,
    397,
    430,
    452,
    473,
    480,
    495,
    499,
    519,
    552,
    580,
    615,
    626,
    661,
    689,
    713,
    737,
    757,
    802,
    824,
    856,
]


def test_sliding_window_recomputes_every_period(stream):
    X, y = stream
    X, y = X[:400], y[:400]
    sw = SlidingWindow(make_kernel(), window=50, period=30, initial=20)
    rep = prequential(sw, (X, y))
    assert rep.computation_at.tolist() == list(range(19, 400, 30))
    # its model is a fresh fit of the last 50 samples at the last computation
    last = rep.computation_at[-1]
    ref = make_kernel().fit(X[last - 49 : last + 1], y[last - 49 : last + 1])
    np.testing.assert_allclose(sw.model_.decision_function(X), ref.decision_function(X), atol=1e-8)
    np.testing.assert_array_equal(sw.predict(X), ref.predict(X))


def test_prequential_is_test_then_train(stream):
    X, y = stream
    X, y = X[:300], y[:300]
    sw = SlidingWindow(make_kernel(), window=40, period=25, initial=20)
    rep = prequential(sw, (X, y))
    sw2 = SlidingWindow(make_kernel(), window=40, period=25, initial=20)
    correct = []
    for t in range(300):
        if t:
            correct.append(sw2.predict_one(X[t]) == y[t])
        else:
            correct.append(False)
        sw2.learn_one(X[t], y[t])
    np.testing.assert_array_equal(rep.correct, correct)
    assert rep.accuracy == pytest.approx(np.mean(correct))
    assert isinstance(rep, StreamReport) and rep.n_samples == 300
    acc = rep.accuracy_over_time(50)
    assert acc.shape == (300,) and acc[-1] == pytest.approx(np.mean(correct[-50:]))
    assert "accuracy" in rep.summary()


def test_partial_fit_equals_learn_one_and_dicts(stream):
    X, y = stream
    X, y = X[:250], y[:250]
    a = KDR(make_kernel(), window=50, threshold=3.0, initial=30).partial_fit(X[:100], y[:100])
    a.partial_fit(X[100:], y[100:])
    b = KDR(make_kernel(), window=50, threshold=3.0, initial=30)
    c = KDR(make_kernel(), window=50, threshold=3.0, initial=30)
    for t in range(250):
        b.learn_one(X[t], y[t])
        c.learn_one({"u": X[t, 0], "v": X[t, 1]}, y[t])
    assert a.n_model_computations_ == b.n_model_computations_ == c.n_model_computations_
    np.testing.assert_array_equal(a.predict(X), b.predict(X))
    np.testing.assert_array_equal(b.predict(X), c.predict(X))
    assert a.mean_r_norm_ == pytest.approx(b.mean_r_norm_, rel=1e-12)
    assert c.predict_one({"v": 0.2, "u": 0.7}) == b.predict_one(np.array([0.7, 0.2]))
    c.learn_one({"u": 0.1, "w": 0.3}, 1)  # a new feature grows the learner (issue 19)
    assert c.n_features_in_ == 3 and b.n_features_in_ == 2
    with pytest.raises(ValueError, match="features"):
        c.learn_one(X[0], y[0])  # arrays keep scikit-learn's rule: the width is fixed


def test_memory_stays_bounded_on_a_long_stream():
    """20,000 samples, window 40, T = ∞ (never recomputes after the first model): the window,
    the sphere and everything else keep their sizes."""
    rng = np.random.default_rng(3)
    X = rng.random((20_000, 2))
    y = (X[:, 0] > X[:, 1]).astype(int)
    kdr = KDR(
        df.KernelClassifier(loss="squared_hinge", kernel="rbf", gamma=2.0),
        window=40,
        threshold=1e300,
        initial=40,
    )
    kdr.partial_fit(X[:1000], y[:1000])
    cap = kdr.sphere_.capacity
    sizes = {k: getattr(v, "nbytes", None) for k, v in vars(kdr).items()}
    kdr.partial_fit(X[1000:], y[1000:])
    assert kdr.n_model_computations_ == 1
    assert kdr.sphere_.capacity == cap <= 81
    assert kdr.sphere_.n_entries == 80  # W₁ all in R, the window all in A
    assert {k: getattr(v, "nbytes", None) for k, v in vars(kdr).items()} == sizes
    assert kdr.sphere_.r_norm == pytest.approx(kdr.sphere_.recompute(), rel=1e-9)


def test_kdr_regression():
    rng = np.random.default_rng(0)
    X = rng.random((400, 1))
    y = np.where(np.arange(400) < 200, np.sin(6 * X[:, 0]), -np.sin(6 * X[:, 0]))
    kdr = KDR(
        df.KernelRegressor(kernel="rbf", gamma=10.0, C=10.0), window=50, threshold=0.5, initial=50
    )
    rep = prequential(kdr, (X, y))
    assert rep.accuracy is None and rep.mse is not None
    assert 1 < rep.n_model_computations < 100
    assert any(200 <= t < 260 for t in rep.computation_at)


def test_river_evaluation_accepts_the_adapter(stream):
    river = pytest.importorskip("river")
    from river import evaluate, metrics

    X, y = stream
    X, y = X[:300], y[:300]
    kdr = KDR(make_kernel(), window=50, threshold=3.0, initial=30)
    metric = evaluate.progressive_val_score(
        ((dict(enumerate(x)), int(t)) for x, t in zip(X, y)), as_river(kdr), metrics.Accuracy()
    )
    ref = prequential(KDR(make_kernel(), window=50, threshold=3.0, initial=30), (X, y))
    # river skips the first sample (no prediction yet); prequential counts it as an error
    assert metric.get() == pytest.approx(ref.correct[1:].mean(), abs=1 / 299)
    assert isinstance(as_river(kdr), river.base.Classifier)


@pytest.mark.parametrize(
    "bad, match",
    [
        (dict(window=1), "window"),
        (dict(threshold=-1.0), "threshold"),
        (dict(threshold=float("nan")), "threshold"),
        (dict(initial=0), "initial"),
        (dict(window=10, initial=20), "initial"),
    ],
)
def test_bad_parameters(bad, match):
    kw = dict(window=50, threshold=1.0) | bad
    with pytest.raises(ValueError, match=match):
        KDR(make_kernel(), **kw).learn_one(np.zeros(2), 0)


def test_bad_samples_leave_the_learner_unchanged(stream):
    X, y = stream
    kdr = KDR(make_kernel(), window=50, threshold=3.0, initial=30).partial_fit(X[:100], y[:100])
    state = (
        kdr.n_samples_seen_,
        kdr.n_model_computations_,
        kdr.mean_r_norm_,
        kdr._X.copy(),
        kdr.sphere_.n_entries,
    )
    for x, t, match in [
        (np.array([np.nan, 0.1]), 0, "NaN"),
        (np.zeros(3), 0, "features"),
        (np.zeros((2, 2)), 0, "1-d"),
    ]:
        with pytest.raises(ValueError, match=match):
            kdr.learn_one(x, t)
    assert (kdr.n_samples_seen_, kdr.n_model_computations_, kdr.mean_r_norm_) == state[:3]
    np.testing.assert_array_equal(kdr._X, state[3])
    assert kdr.sphere_.n_entries == state[4]
    with pytest.raises(ValueError, match="deltafit estimator"):
        KDR(SlidingWindow(make_kernel())).learn_one(np.zeros(2), 0)
    from sklearn.svm import SVC

    sw = SlidingWindow(SVC(), window=20, period=5, initial=10)
    sw.partial_fit(X[:60], y[:60])  # any scikit-learn estimator works for SlidingWindow
    assert sw.n_model_computations_ == 11
    with pytest.raises(ValueError, match="not seen any sample"):
        SlidingWindow(make_kernel()).predict_one(np.zeros(2))
