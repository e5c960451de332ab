"""Sensitivity bounds of multiclass (one-vs-rest) models: one ball per class, labels certified
by the argmax rule, every bound checked against the model retrained on the changed data."""

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from sklearn.base import clone
from sklearn.datasets import load_digits
from sklearn.preprocessing import StandardScaler

import deltafit
from deltafit import KernelClassifier, LinearClassifier
from deltafit.sensitivity import MulticlassSensitivity, Sensitivity, certain_argmax, loo_bounds
from hypothesis_profiles import examples

SLACK = 1e-7  # the retrained model is computed to its solver tolerance


@pytest.fixture(scope="module")
def digits():
    X, y = load_digits(return_X_y=True)
    X = StandardScaler().fit_transform(X)
    return X[:400], y[:400]


def _model(kind, loss, C=0.5):
    if kind == "linear":
        return LinearClassifier(loss=loss, C=C, tol=1e-10)
    return KernelClassifier(loss=loss, C=C, gamma=0.05, tol=1e-10)


def _retrained(model, X, y, removed=(), relabel=None, X_add=None, y_add=None):
    y2 = np.array(y, dtype=object if y.dtype.kind in "OU" else y.dtype)
    if relabel is not None:
        y2[relabel[0]] = relabel[1]
    keep = np.setdiff1d(np.arange(len(y)), removed)
    X2, y2 = X[keep], y2[keep]
    if X_add is not None:
        X2, y2 = np.vstack([X2, X_add]), np.concatenate([y2, y_add])
    return clone(model).fit(X2, y2.astype(y.dtype))


def _check(s, new, Xq):
    lo, hi = s.decision_bounds(Xq)
    d = new.decision_function(Xq)
    assert lo.shape == d.shape == (Xq.shape[0], s.n_classes)
    assert np.all(lo <= d + SLACK) and np.all(d <= hi + SLACK)
    labels, certain = s.predict_certain(Xq)
    np.testing.assert_array_equal(labels[certain], new.predict(Xq)[certain])
    return certain


@pytest.mark.parametrize("kind", ["linear", "kernel"])
@pytest.mark.parametrize("loss", ["squared", "logistic", "squared_hinge"])
def test_bounds_contain_the_retrained_model(iris, fitted_models, kind, loss):
    X, y = iris
    m = fitted_models(_model(kind, loss, C=0.05), "iris")
    s = deltafit.sensitivity(m)
    assert isinstance(s, MulticlassSensitivity) and s.n_classes == 3
    rng = np.random.default_rng(1)
    removed = rng.choice(150, 3, replace=False)
    s.remove(removed)
    i = int(np.setdiff1d(np.arange(150), removed)[0])
    new_label = "virginica" if y[i] != "virginica" else "setosa"
    s.relabel([i], [new_label])
    X_add = X[:2] + 0.05
    ids = s.add(X_add, ["versicolor", "setosa"])
    assert ids.tolist() == [150, 151] and (s.n_removed, s.n_relabeled, s.n_added) == (3, 1, 2)
    new = _retrained(m, X, y, removed, (i, new_label), X_add, np.array(["versicolor", "setosa"]))
    _check(s, new, X)
    # the distance bound holds class by class
    if kind == "linear":
        dist = np.linalg.norm(
            np.column_stack([new.coef_, new.intercept_]) - np.column_stack([m.coef_, m.intercept_]),
            axis=1,
        )
        assert np.all(dist <= s.distance_bound() + SLACK)
        lo, hi = s.coef_bounds()
        assert lo.shape == m.coef_.shape
        assert np.all(lo <= new.coef_ + SLACK) and np.all(new.coef_ <= hi + SLACK)
        ilo, ihi = s.intercept_bounds()
        assert np.all(ilo <= new.intercept_ + SLACK) and np.all(new.intercept_ <= ihi + SLACK)
        assert np.all(s.norm_change_bound(2) <= s.distance_bound() + 1e-12)


def test_single_removal_on_digits_certifies_most_labels(digits):
    X, y = digits
    m = LinearClassifier(loss="logistic", C=0.05, tol=1e-10).fit(X, y)
    s = deltafit.sensitivity(m).remove([7])
    new = _retrained(m, X, y, removed=[7])
    certain = _check(s, new, X)
    assert certain.mean() > 0.9


def test_a_relabel_changes_two_classes_only(iris, fitted_models):
    X, y = iris
    m = fitted_models(_model("linear", "logistic"), "iris")
    s = deltafit.sensitivity(m)
    i = int(np.flatnonzero(y == "setosa")[0])
    s.relabel([i], ["versicolor"])
    r = s.radius
    eps = [m.problem_.for_class(k).certified_residual for k in range(3)]
    assert r[2] == eps[2]  # virginica's problem is unchanged: only the solver allowance
    assert r[0] > eps[0] and r[1] > eps[1]
    new = _retrained(m, X, y, relabel=(i, "versicolor"))
    _check(s, new, X)


def test_undo_reset_and_parts(iris, fitted_models):
    X, y = iris
    m = fitted_models(_model("kernel", "squared"), "iris")
    s = deltafit.sensitivity(m)
    before = s.decision_bounds(X[:5])
    s.remove([0, 1])
    ids = s.add(X[:1], ["setosa"])
    s.relabel(ids, ["virginica"])
    assert s.for_class(2).n_added == 1
    s.undo()
    s.undo()
    assert (s.n_added, s.n_removed) == (0, 2)
    s.reset()
    after = s.decision_bounds(X[:5])
    np.testing.assert_allclose(after[0], before[0], atol=1e-12)
    np.testing.assert_allclose(after[1], before[1], atol=1e-12)
    with pytest.raises(ValueError, match="nothing to undo"):
        s.undo()
    with pytest.raises(ValueError, match="class index"):
        s.for_class(3)
    assert len(s.sphere()) == 3
    assert "n_classes=3" in repr(s)


def test_a_refused_change_changes_nothing(iris, fitted_models):
    X, y = iris
    m = fitted_models(_model("linear", "squared"), "iris")
    s = deltafit.sensitivity(m)
    with pytest.raises(ValueError, match="not among the model's classes"):
        s.add(X[:2], ["setosa", "rose"])
    with pytest.raises(ValueError, match="unknown"):
        s.remove([0, 10_000])
    assert (s.n_added, s.n_removed) == (0, 0)
    assert np.all(s.radius == [m.problem_.for_class(k).certified_residual for k in range(3)])


def test_sensitivity_of_a_binary_model_is_unchanged(iris):
    X, y = iris
    keep = y != "virginica"
    m = _model("linear", "logistic").fit(X[keep], y[keep])
    s = deltafit.sensitivity(m)
    assert type(s) is Sensitivity
    assert s.decision_bounds(X[:3])[0].shape == (3,)


def test_hinge_is_refused(iris):
    X, y = iris
    m = _model("linear", "hinge").fit(X, y)
    with pytest.raises(ValueError, match="not covered"):
        deltafit.sensitivity(m)


def test_certain_argmax():
    lo = np.array([[0.0, 2.0, -1.0], [0.0, 1.0, 0.5]])
    hi = np.array([[1.0, 3.0, 1.9], [0.4, 2.0, 1.5]])
    top, certain = certain_argmax(lo, hi)
    assert top.tolist() == [1, 1] and certain.tolist() == [True, False]
    with pytest.raises(ValueError, match="shape"):
        certain_argmax(lo[:, 0], hi[:, 0])


@pytest.mark.parametrize("kind", ["linear", "kernel"])
def test_loo_bounds_contain_the_left_out_models(iris, fitted_models, kind):
    X, y = iris
    m = fitted_models(_model(kind, "logistic"), "iris")
    ids = np.arange(0, 150, 15)
    lo, hi = loo_bounds(m, ids)
    assert lo.shape == (ids.size, 3)
    top, certain = certain_argmax(lo, hi)
    assert certain.any()
    for j, i in enumerate(ids):
        new = _retrained(m, X, y, removed=[i])
        d = new.decision_function(X[i : i + 1])[0]
        assert np.all(lo[j] <= d + SLACK) and np.all(d <= hi[j] + SLACK)
        if certain[j]:
            assert new.classes_[top[j]] == new.predict(X[i : i + 1])[0]
    zlo, zhi = deltafit.sensitivity.zhang_loo_bounds(m, ids)
    assert zlo.shape == (ids.size, 3) and np.all(zlo <= lo + 1e-9) and np.all(hi <= zhi + 1e-9)


@settings(max_examples=examples(25), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    seed=st.integers(0, 10_000),
    K=st.integers(3, 5),
    kind=st.sampled_from(["linear", "kernel"]),
    loss=st.sampled_from(["squared", "logistic", "squared_hinge"]),
    n_remove=st.integers(0, 3),
    n_relabel=st.integers(0, 2),
    n_add=st.integers(0, 3),
)
def test_random_changes_of_random_problems(seed, K, kind, loss, n_remove, n_relabel, n_add):
    rng = np.random.default_rng(seed)
    n = 6 * K
    centers = rng.normal(scale=2.0, size=(K, 3))
    y = np.repeat(np.arange(K), 6)
    X = centers[y] + rng.normal(size=(n, 3))
    m = _model(kind, loss, C=float(rng.uniform(0.1, 2.0))).fit(X, y)
    s = deltafit.sensitivity(m)
    removed = rng.choice(n, n_remove, replace=False)
    if n_remove:
        s.remove(removed)
    relabel = None
    rest = np.setdiff1d(np.arange(n), removed)
    for i in rng.choice(rest, n_relabel, replace=False):
        new_label = (y[i] + 1 + int(rng.integers(K - 1))) % K
        s.relabel([int(i)], [new_label])
        relabel = (i, new_label) if relabel is None else relabel
        y = y.copy()
        y[i] = new_label  # applied to the data the model is retrained on
    X_add = rng.normal(scale=2.0, size=(n_add, 3))
    y_add = rng.integers(0, K, n_add)
    if n_add:
        s.add(X_add, y_add)
    new = _retrained(m, X, y, removed, None, X_add if n_add else None, y_add)
    Xq = np.vstack([X, rng.normal(scale=2.0, size=(10, 3))])
    _check(s, new, Xq)
