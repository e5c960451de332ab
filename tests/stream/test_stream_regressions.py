"""Regressions from the review of the stream and active-learning code (issue 6)."""

import numpy as np
import pytest

import deltafit as df
from deltafit.active import compare_strategies
from deltafit.stream import KDR, SlidingWindow, prequential
from stream_reference import kdr_twin, small_drift_stream


def kc():
    return df.KernelClassifier(loss="squared_hinge", kernel="rbf", gamma=8.0, C=5.0)


def test_a_rejected_first_sample_leaves_nothing_behind():
    sw = SlidingWindow(kc(), window=20, period=5, initial=10)
    with pytest.raises(ValueError, match="NaN"):
        sw.learn_one(np.array([np.nan, 0.1, 0.2]), 0)
    with pytest.raises(ValueError, match="NaN"):
        sw.learn_one({"a": np.nan, "b": 1.0}, 0)
    assert not hasattr(sw, "n_features_in_") and "_dict_keys" not in vars(sw)
    sw.learn_one({"u": 0.1, "v": 0.2}, 0)  # a valid first sample sets width and names
    assert sw.n_features_in_ == 2


def test_a_failed_partial_fit_learns_nothing():
    rng = np.random.default_rng(0)
    X = rng.random((40, 2))
    for learner, y_bad in [
        (
            SlidingWindow(df.KernelRegressor(gamma=1.0), window=10, period=2, initial=5),
            np.r_[np.ones(20), np.inf, np.ones(19)],
        ),
        (
            KDR(df.KernelRegressor(gamma=1.0), window=10, threshold=0.01, initial=5),
            np.r_[np.ones(20), np.nan, np.ones(19)],
        ),
        (
            SlidingWindow(kc(), window=10, period=2, initial=5),
            np.r_[[0, 1] * 10, np.nan, [0, 1] * 9, 0],
        ),
    ]:
        y0 = np.arange(12) % 2 * 1.0
        learner.partial_fit(X[:12], y0)
        state = (learner.n_samples_seen_, learner.n_model_computations_, learner._X.copy())
        with pytest.raises(ValueError, match="NaN"):
            learner.partial_fit(X, y_bad)
        assert (learner.n_samples_seen_, learner.n_model_computations_) == state[:2]
        np.testing.assert_array_equal(learner._X, state[2])


@pytest.mark.parametrize(
    "make",
    [
        lambda: df.LinearClassifier(loss="logistic", C=1.0),
        lambda: df.LinearClassifier(loss="squared_hinge", C=1.0, fit_intercept=False),
    ],
)
def test_kdr_with_linear_models_equals_its_twin(make):
    """Linear estimators (with and without intercept) go through the feature map."""
    X, y = small_drift_stream(n=300, change=150)
    comps, rs, _ = kdr_twin(make, X, y, window=40, threshold=0.4, initial=30)
    kdr = KDR(make(), window=40, threshold=0.4, initial=30)
    mine = []
    for t in range(300):
        before = kdr.__dict__.get("n_model_computations_", 0)
        kdr.learn_one(X[t], y[t])
        if kdr.n_model_computations_ != before:
            mine.append(t)
        elif kdr.sphere_ is not None:
            assert kdr.sphere_.r_norm == pytest.approx(rs[t], rel=1e-9, abs=1e-12)
    assert mine == comps and len(comps) > 2


def test_kdr_refuses_models_without_their_rows():
    with pytest.raises(ValueError, match="keep_data"):
        KDR(df.LinearRegressor(keep_data=False), window=10).learn_one(np.zeros(2), 1.0)


def test_bad_estimator_parameters_fail_before_the_first_sample():
    sw = SlidingWindow(df.KernelClassifier(C=-1.0), window=10, period=2, initial=3)
    with pytest.raises(ValueError, match="C"):
        sw.learn_one(np.zeros(2), 0)
    assert not hasattr(sw, "n_samples_seen_")


def test_prequential_consumes_exactly_n_samples_of_a_generator():
    X, y = small_drift_stream(n=100)
    gen = iter(zip(X, y.tolist()))
    rep = prequential(SlidingWindow(kc(), window=20, period=5, initial=10), gen, n_samples=30)
    assert rep.n_samples == 30
    x_next, _ = next(gen)
    np.testing.assert_array_equal(x_next, X[30])


def test_compare_strategies_refuses_two_identical_baselines(breast_cancer):
    X, y = breast_cancer
    with pytest.raises(ValueError, match="small_m"):
        compare_strategies(kc(), X, y, m=10, p=10)
