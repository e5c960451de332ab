"""river citizenship of the stream learners (issue 19), next to scikit-learn's
``parametrize_with_checks`` run in ``test_sklearn_compat.py``.

* river's own conformance suite, ``river.checks.yield_checks``, each check on ``model.clone()``
  (as ``river.checks.check_estimator`` runs it), over every learner river's unit-test
  parameters of the adapters name (KDR, SlidingWindow, DDM over a batch and an online learner,
  NORMA, Pegasos, OneVsRest, LSQSGD, NORMARegressor; KDR and SlidingWindow as issue 19 has them);
  a check is skipped only where the model's ``_unit_test_skips`` (river's mechanism) lists it;
* the dict feature-space policy (``deltafit.stream._features``) against brute-force twins on
  real data: an online learner fed dicts whose features appear late equals the learner fed
  the zero-filled rows from the start (to 1e-12: rounding of the compiled loops), with
  the columns computed independently; a window learner's model after a new feature equals a
  fit on the zero-padded window; key order never matters (hypothesis);
* NumPy rows still refuse a changed width, and a refused dict leaves the learner unchanged.
"""

from __future__ import annotations

import pickle

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from sklearn.base import clone
from sklearn.datasets import load_breast_cancer, load_digits
from sklearn.preprocessing import StandardScaler

import deltafit as df
from deltafit.stream import (
    DDM,
    KDR,
    LSQSGD,
    NORMA,
    NORMARegressor,
    OneVsRest,
    Pegasos,
    SlidingWindow,
    as_river,
)
from hypothesis_profiles import examples

river = pytest.importorskip("river")
from river.checks import yield_checks  # noqa: E402

from deltafit.stream._river_adapters import RiverClassifier, RiverRegressor  # noqa: E402


def _models():
    """(id, river model) for every learner the adapters' unit-test parameters name (KDR and
    SlidingWindow in the configurations of issue 19)."""
    out = []
    for cls in (RiverClassifier, RiverRegressor):
        for params in cls._unit_test_params():
            learner = params["learner"]
            name = type(learner).__name__
            inner = getattr(learner, "estimator", None)
            if inner is not None:
                name += f"[{type(inner).__name__}]"
            out.append((f"{cls.__name__}-{name}", cls(**params)))
    return out


def _cases():
    """Every (model, check); the daily run takes each check on its first data set only, and
    the window learners' memory-growth check (tens of seconds) in CI."""
    cases = []
    for name, model in _models():
        seen = set()
        for i, check in enumerate(yield_checks(model)):
            slow = check.__name__ in seen or (
                check.__name__ == "check_bounded_memory_growth"
                and ("KDR" in name or "SlidingWindow" in name)
            )
            seen.add(check.__name__)
            cases.append(
                pytest.param(
                    model,
                    check,
                    id=f"{name}-{check.__name__}-{i}",
                    marks=[pytest.mark.slow] if slow else [],
                )
            )
    return cases


@pytest.mark.parametrize("model, check", _cases())
def test_river_checks(model, check):
    if check.__name__ in model._unit_test_skips():
        pytest.skip(f"{type(model).__name__}._unit_test_skips lists {check.__name__}")
    check(model.clone())


def test_every_stream_learner_is_covered():
    """The checks above reach every river-facing learner of deltafit.stream."""
    names = {type(m.learner).__name__ for _, m in _models()}
    assert names >= {
        "KDR",
        "SlidingWindow",
        "DDM",
        "NORMA",
        "Pegasos",
        "OneVsRest",
        "LSQSGD",
        "NORMARegressor",
    }
    kinds = {(type(m).__name__, type(m.learner).__name__) for _, m in _models()}
    assert ("RiverRegressor", "KDR") in kinds and ("RiverClassifier", "KDR") in kinds
    kdr = next(m.learner for _, m in _models() if type(m.learner).__name__ == "KDR")
    assert (kdr.window, kdr.threshold) == (50, 1.0)  # issue 19's configuration


# ------------------------------------------------------------ adapters: clone, pickle, types
def _cancer_stream(n=300):
    X, y = load_breast_cancer(return_X_y=True)
    X = StandardScaler().fit_transform(X)[:n, :6]
    return X, y[:n]


def test_adapter_clone_is_unfitted_and_pickle_roundtrips():
    X, y = _cancer_stream()
    model = as_river(
        SlidingWindow(df.KernelClassifier(loss="squared_hinge", gamma=0.5), window=40, period=10)
    )
    for i in range(120):
        model.learn_one({f"f{j}": X[i, j] for j in range(6)}, y[i])
    fresh = model.clone()
    assert type(fresh) is RiverClassifier and fresh.learner is not model.learner
    assert not hasattr(fresh.learner, "n_samples_seen_")
    assert fresh.predict_one({"f0": 1.0}) is None  # river: no prediction yet
    assert repr(fresh) == repr(model)
    back = pickle.loads(pickle.dumps(model))
    xs = [{f"f{j}": X[i, j] for j in range(6)} for i in range(120, 200)]
    assert [back.predict_one(x) for x in xs] == [model.predict_one(x) for x in xs]
    assert back.n_model_computations == model.n_model_computations > 0
    with pytest.raises(ValueError, match="learner"):
        model.clone({"window": 3})


def test_adapter_kinds():
    assert isinstance(as_river(Pegasos()), river.base.Classifier)
    assert isinstance(as_river(LSQSGD()), river.base.Regressor)
    assert not as_river(Pegasos())._multiclass
    assert as_river(KDR(df.KernelClassifier()))._multiclass
    assert as_river(OneVsRest(NORMA(), classes=[0, 1, 2]))._multiclass
    assert not as_river(OneVsRest(NORMA(), classes=[0, 1]))._multiclass


# ------------------------------------------------------------- the dict feature space
def _emerging(X, rng, late=3):
    """Dict samples of X whose features ``f{j}`` are absent (not 0: absent) before their
    first appearance, which is staggered over the stream; zeros left out now and then."""
    d = X.shape[1]
    first = np.zeros(d, dtype=int)
    first[rng.choice(d, late, replace=False)] = rng.integers(5, X.shape[0] // 2, late)
    dicts = []
    for i in range(X.shape[0]):
        x = {f"f{j}": X[i, j] for j in rng.permutation(d) if i >= first[j]}
        dicts.append(x)
    return dicts, first


def _columns(dicts):
    """The columns the policy promises, computed directly: names by first appearance, the new
    names of one sample sorted."""
    cols = {}
    for x in dicts:
        for k in sorted(set(x) - set(cols)):
            cols[k] = len(cols)
    return cols


def _zero_filled(dicts, cols):
    Z = np.zeros((len(dicts), len(cols)))
    for i, x in enumerate(dicts):
        for k, v in x.items():
            Z[i, cols[k]] = v
    return Z


@pytest.mark.parametrize(
    "make", [lambda: Pegasos(lam=1e-3), lambda: LSQSGD(), lambda: LSQSGD(alpha=0.05, radius=2.0)]
)
def test_online_linear_learner_with_emerging_features_equals_zero_filled(make):
    X, y = _cancer_stream()
    t = y if isinstance(make(), Pegasos) else X[:, 0] * 0.3 + 0.1 * y
    dicts, _ = _emerging(X, np.random.default_rng(0))
    grown = make()
    for x, target in zip(dicts, t):
        grown.learn_one(x, target)
    cols = _columns(dicts)
    Z = _zero_filled(dicts, cols)
    twin = make().partial_fit(Z, t, **({"classes": [0, 1]} if isinstance(grown, Pegasos) else {}))
    assert grown.n_features_in_ == len(cols) == X.shape[1]
    # equal to rounding: the compiled loops (fastmath) sum the dot products in an order that
    # depends on the width
    np.testing.assert_allclose(grown.coef_, twin.coef_, rtol=1e-12, atol=1e-15)
    assert grown.intercept_ == pytest.approx(twin.intercept_, rel=1e-12, abs=1e-15)
    assert grown.t_ == twin.t_
    # predictions read the columns by name; a feature never learned is ignored
    for i in range(0, 300, 37):
        x = dict(dicts[i]) | {"never_seen": 5.0}
        assert grown.predict_one(x) == pytest.approx(twin.predict(Z[i : i + 1])[0], rel=1e-9)


@pytest.mark.parametrize("cls", [NORMA, NORMARegressor])
def test_norma_with_emerging_features_equals_zero_filled(cls):
    X, y = _cancer_stream()
    t = y if cls is NORMA else X[:, 1] * 0.5
    dicts, _ = _emerging(X, np.random.default_rng(1))
    grown = cls(budget=80, eta=0.3, lam=1e-3)
    for x, target in zip(dicts, t):
        grown.learn_one(x, target)
    cols = _columns(dicts)
    Z = _zero_filled(dicts, cols)
    # gamma=None resolves at the first sample's width and stays (learned at that width)
    twin = cls(budget=80, eta=0.3, lam=1e-3, gamma=1.0 / len(dicts[0]))
    twin.partial_fit(Z, t, **({"classes": [0, 1]} if cls is NORMA else {}))
    np.testing.assert_allclose(grown.support_vectors_, twin.support_vectors_, rtol=0, atol=0)
    np.testing.assert_allclose(grown.dual_coef_, twin.dual_coef_, rtol=1e-12, atol=1e-14)
    zg = grown.decision_function(Z) if cls is NORMA else grown.predict(Z)
    zt = twin.decision_function(Z) if cls is NORMA else twin.predict(Z)
    np.testing.assert_allclose(zg, zt, rtol=1e-12, atol=1e-12)


def test_one_vs_rest_grows_every_learner():
    X, y = load_digits(return_X_y=True)
    X, y = X[:200, :12] / 16.0, y[:200] % 3
    dicts, _ = _emerging(X, np.random.default_rng(2), late=4)
    grown = OneVsRest(Pegasos(lam=1e-2), classes=[0, 1, 2])
    for x, label in zip(dicts, y):
        grown.learn_one(x, label)
    cols = _columns(dicts)
    twin = OneVsRest(Pegasos(lam=1e-2), classes=[0, 1, 2]).partial_fit(_zero_filled(dicts, cols), y)
    for a, b in zip(grown.estimators_, twin.estimators_):
        np.testing.assert_allclose(a.coef_, b.coef_, rtol=1e-12, atol=1e-15)


def test_window_learner_learns_a_new_feature_at_its_next_computation():
    X, y = _cancer_stream()
    est = df.KernelClassifier(loss="squared_hinge", gamma=0.3)
    sw = SlidingWindow(est, window=40, period=10)
    names = [f"f{j}" for j in range(5)]
    for i in range(100):  # f5 absent so far
        sw.learn_one({k: X[i, j] for j, k in enumerate(names)}, y[i])
    model_before = sw.model_
    x_new = {k: X[100, j] for j, k in enumerate(names)} | {"f5": X[100, 5]}
    # before it is learned, a new feature is ignored: the model reads its five columns
    assert sw.predict_one(x_new) == model_before.predict(X[100:101, :5])[0]
    for i in range(100, 115):
        sw.learn_one({k: X[i, j] for j, k in enumerate(names + ["f5"])}, y[i])
    assert sw.n_features_in_ == 6
    Xw = np.zeros((40, 6))  # the window, zero-padded
    Xw[:, :5] = X[75:115, :5]
    Xw[25:, 5] = X[100:115, 5]
    ref = clone(est).fit(Xw[-40:], y[75:115])  # the computation at sample 110
    win_X, win_y = sw._window_data()
    np.testing.assert_array_equal(win_X, Xw)
    assert sw.model_.n_features_in_ == 6
    last = sw.model_
    ref_last = clone(est).fit(
        np.vstack([np.c_[X[70:100, :5], np.zeros(30)], X[100:110, :6]]), y[70:110]
    )
    np.testing.assert_allclose(
        last.decision_function(Xw), ref_last.decision_function(Xw), rtol=1e-10, atol=1e-10
    )
    assert ref.n_features_in_ == 6


def test_kdr_recomputes_at_a_new_feature():
    X, y = _cancer_stream()
    kdr = KDR(df.KernelClassifier(loss="squared_hinge", gamma=0.3), window=40, threshold=1e9)
    for i in range(60):
        kdr.learn_one({"a": X[i, 0], "b": X[i, 1]}, y[i])
    n = kdr.n_model_computations_
    kdr.learn_one({"a": X[60, 0], "b": X[60, 1]}, y[60])
    assert kdr.n_model_computations_ == n  # threshold never reached
    kdr.learn_one({"a": X[61, 0], "c": X[61, 2]}, y[61])  # "b" missing (0), "c" new
    assert kdr.n_model_computations_ == n + 1
    Xw = np.c_[X[22:62, :2], np.zeros(40)]
    Xw[-1] = [X[61, 0], 0.0, X[61, 2]]
    ref = clone(kdr.estimator).fit(Xw, y[22:62])
    np.testing.assert_allclose(
        kdr.model_.decision_function(Xw), ref.decision_function(Xw), rtol=1e-10, atol=1e-10
    )


@pytest.mark.parametrize(
    "make",
    [
        lambda: Pegasos(),
        lambda: LSQSGD(),
        lambda: NORMA(budget=20),
        lambda: SlidingWindow(df.KernelClassifier(), window=10, period=5),
        lambda: DDM(df.KernelClassifier(), window=10),
        lambda: OneVsRest(Pegasos(), classes=[0, 1]),
    ],
)
def test_numpy_rows_keep_refusing_a_changed_width(make):
    X, y = _cancer_stream(60)
    m = make()
    target = X[:, 0] if isinstance(m, LSQSGD) else y
    for i in range(30):
        m.learn_one({"a": X[i, 0], "b": X[i, 1]}, target[i])
    m.learn_one({"a": 0.1, "b": 0.2, "c": 0.3}, target[30])
    assert m.n_features_in_ == 3
    m.learn_one(X[31, :3], target[31])  # the grown width is accepted
    with pytest.raises(ValueError, match="features"):
        m.learn_one(X[32, :4], target[32])
    with pytest.raises(ValueError, match="features"):
        m.predict(X[:2, :2])


@pytest.mark.parametrize(
    "make",
    [
        lambda: Pegasos(),
        lambda: NORMA(budget=20),
        lambda: KDR(df.KernelClassifier(loss="squared_hinge"), window=10),
        lambda: OneVsRest(Pegasos(), classes=[0, 1, 2]),
    ],
)
def test_a_refused_dict_adds_no_feature(make):
    X, y = _cancer_stream(40)
    m = make()
    for i in range(30):
        m.learn_one({"a": X[i, 0], "b": X[i, 1]}, y[i])
    before = pickle.dumps(m)
    with pytest.raises(ValueError, match="NaN|infinity"):
        m.learn_one({"a": 0.1, "new": np.nan}, 1)
    with pytest.raises(ValueError, match="number"):
        m.learn_one({"a": 0.1, "new": "text"}, 1)
    if not isinstance(m, KDR):
        with pytest.raises(ValueError, match="label|classes|binary"):
            m.learn_one({"a": 0.1, "new": 1.0}, 7)
    assert pickle.dumps(m) == before


@settings(max_examples=examples(25), deadline=None)
@given(seed=st.integers(0, 2**16), d=st.integers(2, 6))
def test_key_order_never_matters(seed, d):
    """Two learners fed the same dicts with their keys in different orders end in the same
    state (the new names of one sample take their columns in sorted order)."""
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(40, d))
    y = (X[:, 0] + 0.3 * rng.normal(size=40) > 0).astype(int)
    y[:2] = [0, 1]
    a, b = Pegasos(lam=1e-2), Pegasos(lam=1e-2)
    na, nb = NORMA(budget=15), NORMA(budget=15)
    for i in range(40):
        keep = [j for j in range(d) if rng.random() < 0.7] or [0]
        x = {f"k{j}": X[i, j] for j in keep}
        shuffled = {k: x[k] for k in rng.permutation(list(x))}
        a.learn_one(x, y[i])
        b.learn_one(shuffled, y[i])
        na.learn_one(x, y[i])
        nb.learn_one(shuffled, y[i])
    np.testing.assert_array_equal(a.coef_, b.coef_)
    np.testing.assert_array_equal(na.support_vectors_, nb.support_vectors_)
    np.testing.assert_array_equal(na.dual_coef_, nb.dual_coef_)
