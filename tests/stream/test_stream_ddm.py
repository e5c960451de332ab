"""DDM (Gama et al. 2004): the detector against river's, and the stream classifier over
a batch learner (deltafit.KernelClassifier) and an online one (NORMA)."""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from sklearn.base import clone
from sklearn.linear_model import Ridge

import deltafit
from deltafit.stream._ddm import DDM, _DDMDetector
from deltafit.stream._norma import NORMA
from hypothesis_profiles import examples

river_binary = pytest.importorskip("river.drift.binary")


def _flags(errors, **kw):
    """(warning, drift) index lists of _DDMDetector and of river's DDM on the same errors."""
    ours = _DDMDetector(**kw)
    theirs = river_binary.DDM(
        warm_start=kw.get("min_num_instances", 30),
        warning_threshold=kw.get("warning_level", 2.0),
        drift_threshold=kw.get("drift_level", 3.0),
    )
    a, b = ([], []), ([], [])
    for i, e in enumerate(errors):
        w, d = ours.update(bool(e))
        theirs.update(bool(e))
        if w:
            a[0].append(i)
        if d:
            a[1].append(i)
        if theirs.warning_detected:
            b[0].append(i)
        if theirs.drift_detected:
            b[1].append(i)
    return a, b


@pytest.mark.parametrize("seed", range(5))
def test_detector_equals_river_on_jumping_error_rates(seed):
    rates = np.repeat([0.1, 0.4, 0.1, 0.4, 0.05, 0.3], 1000)
    errors = np.random.RandomState(seed).rand(rates.size) < rates
    ours, river = _flags(errors)
    assert ours == river
    assert len(ours[1]) >= 2  # the jumps are detected
    ours, river = _flags(errors, warning_level=1.5, drift_level=2.5, min_num_instances=50)
    assert ours == river


def test_detector_pinned_indices():
    rates = np.repeat([0.1, 0.4, 0.1, 0.4], 1000)
    errors = np.random.RandomState(0).rand(rates.size) < rates
    (warn, drift), _ = _flags(errors)
    assert drift == [1142, 3224]
    assert len(warn) == 214


@settings(max_examples=examples(50), deadline=None)
@given(
    rates=st.lists(st.floats(0.0, 1.0), min_size=1, max_size=5),
    length=st.integers(20, 400),
    seed=st.integers(0, 2**31 - 1),
    levels=st.sampled_from([(2.0, 3.0), (1.0, 1.5), (0.0, 0.5)]),
    warm=st.integers(0, 40),
)
def test_detector_equals_river_property(rates, length, seed, levels, warm):
    errors = np.random.RandomState(seed).rand(length * len(rates)) < np.repeat(rates, length)
    ours, river = _flags(
        errors, warning_level=levels[0], drift_level=levels[1], min_num_instances=warm
    )
    assert ours == river


@pytest.mark.parametrize(
    "kw, match",
    [
        (dict(warning_level=-1.0), "warning_level"),
        (dict(drift_level=np.nan), "drift_level"),
        (dict(warning_level=3.0, drift_level=2.0), "drift_level"),
        (dict(min_num_instances=-1), "min_num_instances"),
        (dict(min_num_instances=2.5), "min_num_instances"),
    ],
)
def test_detector_bad_parameters(kw, match):
    with pytest.raises(ValueError, match=match):
        _DDMDetector(**kw)


# ------------------------------------------------------------------------ the classifier
def blobs(n=4000, flip=3000, seed=0):
    """Two 2-d Gaussian blobs; the labels flip at sample ``flip`` (abrupt drift)."""
    rng = np.random.RandomState(seed)
    y = rng.randint(0, 2, n)
    X = rng.randn(n, 2) * 0.8 + np.where(y[:, None] == 1, 1.0, -1.0)
    return X, np.where(np.arange(n) >= flip, 1 - y, y)


def _run(model, X, y):
    """Prequential loop; returns the drift and warning-entry indices DDM reported and those of
    a test-side detector fed with the errors of DDM's own predictions."""
    det = _DDMDetector(model.warning_level, model.drift_level, model.min_num_instances)
    drifts, warns, side = [], [], []
    for i, (xi, yi) in enumerate(zip(X, y)):
        if i:
            if det.update(model.predict_one(xi) != yi)[1]:
                side.append(i)
        nd, nw = model.__dict__.get("n_drifts_", 0), model.__dict__.get("n_warnings_", 0)
        nc = model.__dict__.get("n_model_computations_", 0)
        model.learn_one(xi, yi)
        if not model._online and nc == 0 and model.n_model_computations_ == 1:
            # the first batch model: the errors so far were the majority label's; DDM restarts
            det = _DDMDetector(model.warning_level, model.drift_level, model.min_num_instances)
        if model.n_drifts_ > nd:
            drifts.append(i)
        if model.n_warnings_ > nw:
            warns.append(i)
    assert (det.n, det.p, det.warning, det.drift) == (
        model._detector.n,
        model._detector.p,
        model._detector.warning,
        model._detector.drift,
    )
    return drifts, warns, side


def _kc():
    return deltafit.KernelClassifier(loss="squared_hinge", kernel="rbf", gamma=1.0, C=10.0)


def test_ddm_over_a_batch_learner_detects_the_flip():
    X, y = blobs()
    m = DDM(_kc(), window=200)
    drifts, warns, side = _run(m, X, y)
    assert drifts == side == [3023]  # pinned (random_state=0); none before the flip
    # warnings: a few false alarms while the error rate of the first model settles, then the
    # flip (the detector restarts when the first model arrives at sample 199)
    assert warns == [642, 683, 728, 747, 3010]
    assert m.n_drifts_ == 1 and m.last_drift_ == 3023 and m.n_warnings_ == len(warns)
    assert m.n_model_computations_ == 2  # the first model at 200 samples + the drift
    assert m.n_samples_seen_ == 4000
    np.testing.assert_array_equal(m.classes_, [0, 1])
    # the recomputed model was fitted on the whole window (14 samples since the warning < 30)
    ref = _kc().fit(X[2824:3024], y[2824:3024])
    np.testing.assert_allclose(
        m.decision_function(X[:100]), ref.decision_function(X[:100]), rtol=1e-9, atol=1e-9
    )


def test_ddm_batch_initial_and_majority_before_the_first_model():
    X, y = blobs(n=300)
    m = DDM(_kc(), window=100, initial=50)
    for i in range(49):
        m.learn_one(X[i], y[i])
    assert m.model_ is None and m.n_model_computations_ == 0
    counts = np.bincount(y[:49])
    assert m.predict_one(X[60]) == np.argmax(counts)
    assert np.all(m.predict(X[:5]) == np.argmax(counts))
    m.learn_one(X[49], y[49])
    assert m.n_model_computations_ == 1 and m.model_ is not None
    ref = clone(_kc()).fit(X[:50], y[:50])
    np.testing.assert_array_equal(m.predict(X[50:]), ref.predict(X[50:]))
    np.testing.assert_allclose(m.decision_function(X[50:60]), ref.decision_function(X[50:60]))


def test_ddm_over_norma_detects_the_flip_and_retrains_on_the_warning_buffer():
    X, y = blobs()
    m = DDM(NORMA(gamma=1.0, eta=0.5, lam=1e-3, budget=200), window=200)
    drifts, warns, side = _run(m, X, y)
    assert drifts == side == [3023]  # pinned (random_state=0)
    assert warns == [2632, 2820, 2966, 3001]
    assert m.n_model_computations_ == m.n_drifts_ == 1
    # the live learner replaced at 3023 learned the 23 samples since the warning at 3001,
    # then every later sample
    assert m.model_.n_samples_seen_ == (3023 - 3001 + 1) + (4000 - 3024)


def test_partial_fit_equals_learn_one_and_fit_resets():
    X, y = blobs(n=1200, flip=800, seed=3)
    est = NORMA(gamma=1.0, eta=0.5, lam=1e-3, budget=100)
    a = DDM(est, window=100)
    for xi, yi in zip(X, y):
        a.learn_one(xi, yi)
    b = DDM(est, window=100).partial_fit(X[:500], y[:500]).partial_fit(X[500:], y[500:])
    c = DDM(est, window=100).fit(X[:300], y[:300]).fit(X, y)
    d = DDM(est, window=100)
    for xi, yi in zip(X, y):
        d.learn_one({"a": xi[0], "b": xi[1]}, yi)
    for m in (b, c, d):
        assert (m.n_drifts_, m.n_warnings_, m.last_drift_, m.n_model_computations_) == (
            a.n_drifts_,
            a.n_warnings_,
            a.last_drift_,
            a.n_model_computations_,
        )
        np.testing.assert_array_equal(m.predict(X), a.predict(X))
    assert a.n_drifts_ >= 1


def _state(m):
    import copy

    return copy.deepcopy({k: v for k, v in m.__dict__.items() if k not in ("estimator",)})


def _same(m, s):
    assert set(m.__dict__) - {"estimator"} == set(s)
    for k, v in s.items():
        w = m.__dict__[k]
        if isinstance(v, np.ndarray):
            np.testing.assert_array_equal(w, v)
        elif k in ("model_", "_detector", "_decision"):
            assert type(w) is type(v)
        else:
            assert w == v or w is v, k


@pytest.mark.parametrize("make", [lambda: NORMA(gamma=1.0, budget=50), _kc])
def test_bad_input_leaves_ddm_unchanged(make):
    X, y = blobs(n=120)
    m = DDM(make(), window=50).fit(X, y)
    s = _state(m)
    with pytest.raises(ValueError, match="NaN"):
        m.learn_one(np.array([np.nan, 0.0]), 1)
    with pytest.raises(ValueError, match="features"):
        m.learn_one(np.zeros(3), 1)
    if isinstance(m.estimator, NORMA):  # binary; the batch classifiers take more classes
        with pytest.raises(ValueError, match="binary"):
            m.learn_one(X[0], 2)
        with pytest.raises(ValueError, match="binary"):
            m.partial_fit(X[:3], [0, 1, 2])
    with pytest.raises(ValueError, match="NaN"):
        m.learn_one(X[0], np.nan)
    bad = X[:4].copy()
    bad[2, 1] = np.inf
    with pytest.raises(ValueError, match="infinity"):
        m.partial_fit(bad, y[:4])
    _same(m, s)
    with pytest.raises(ValueError, match="features"):
        m.predict(X[:2, :1])


@pytest.mark.parametrize(
    "kw, match",
    [
        (dict(window=1), "window"),
        (dict(drift_level=1.0), "drift_level"),
        (dict(warning_level=-1.0), "warning_level"),
        (dict(min_num_instances=-2), "min_num"),
        (dict(initial=1000), "initial"),
        (dict(estimator=Ridge()), "classifier"),
        (dict(estimator="svm"), "estimator"),
    ],
)
def test_bad_parameters(kw, match):
    X, y = blobs(n=20)
    kw = {"estimator": _kc(), "window": 100, **kw}
    m = DDM(**kw)
    with pytest.raises(ValueError, match=match):
        m.fit(X, y)
    with pytest.raises(ValueError, match=match):
        m.learn_one(X[0], y[0])
    assert not hasattr(m, "_X")


def test_clone_and_params():
    m = DDM(
        NORMA(gamma=0.5),
        window=300,
        warning_level=1.5,
        drift_level=2.5,
        min_num_instances=20,
        initial=100,
    )
    p = m.get_params()
    assert p["window"] == 300 and p["estimator__gamma"] == 0.5 and p["initial"] == 100
    c = clone(m)
    assert c.get_params()["drift_level"] == 2.5 and c.estimator is not m.estimator
    c.set_params(drift_level=4.0, estimator__gamma=2.0)
    assert c.drift_level == 4.0 and c.estimator.gamma == 2.0 and m.estimator.gamma == 0.5
    X, y = blobs(n=100)
    c.fit(X, y)
    assert not hasattr(clone(c), "_X")


def test_ddm_over_a_batch_learner_takes_a_class_that_arrives_later():
    # the batch learner is refitted on its window at a drift: a third label joins the model
    X, y = blobs(n=400)
    y = y.copy()
    y[300:] = 2
    X = X.copy()
    X[300:] += 6.0
    m = DDM(_kc(), window=100, initial=50)
    for i in range(400):
        m.learn_one(X[i], y[i])
    np.testing.assert_array_equal(m.classes_, [0, 1, 2])
    assert m.n_drifts_ >= 1
    np.testing.assert_array_equal(m.model_.classes_, [0, 1, 2])
    assert np.mean(m.predict(X[350:]) == 2) > 0.9
