"""OneVsRest over the binary online learners (Pegasos, NORMA) against K binary learners
trained one by one on their coded targets — the brute-force twin, compared exactly (the same
floating-point operations in the same order) on scikit-learn's digits (10 classes)."""

import copy

import numpy as np
import pytest
from sklearn.base import clone
from sklearn.datasets import load_digits
from sklearn.exceptions import NotFittedError
from sklearn.model_selection import KFold
from sklearn.utils.estimator_checks import parametrize_with_checks

from deltafit.model_selection import treecv
from deltafit.stream import NORMA, OneVsRest, Pegasos


@parametrize_with_checks([OneVsRest(Pegasos(lam=1e-2)), OneVsRest(NORMA(gamma=0.5, eta=0.5))])
def test_sklearn_estimator_checks(estimator, check):
    check(estimator)


@pytest.fixture(scope="module")
def digits10():
    X, y = load_digits(return_X_y=True)
    return X[:600] / 16.0, y[:600]


def binary_twins(base, X, y, classes, how="fit"):
    """K binary learners, each trained alone on +1 (its class) / -1 (the rest)."""
    out = []
    for c in classes:
        t = np.where(y == c, 1, -1)
        est = clone(base)
        if how == "fit":
            est.fit(X, t)
        else:  # one sample at a time, from the first one on
            est.partial_fit(X[:1], t[:1], classes=[-1, 1])
            for i in range(1, len(t)):
                est.partial_fit(X[i : i + 1], t[i : i + 1])
        out.append(est)
    return out


BASES = [
    Pegasos(lam=1e-3),
    Pegasos(lam=1e-2, projection=True, shuffle=True, random_state=3),
    NORMA(gamma=0.5, eta=0.3, lam=1e-3, budget=80),
]


@pytest.mark.parametrize("base", BASES, ids=repr)
def test_fit_equals_k_binary_learners(base, digits10):
    X, y = digits10
    n = 300 if isinstance(base, NORMA) else 600
    X, y = X[:n], y[:n]
    ovr = OneVsRest(base).fit(X, y)
    twins = binary_twins(base, X, y, np.unique(y))
    assert len(ovr.estimators_) == 10
    D = np.column_stack([t.decision_function(X) for t in twins])
    np.testing.assert_array_equal(ovr.decision_function(X), D)  # exact: the same arithmetic
    np.testing.assert_array_equal(ovr.predict(X), np.unique(y)[np.argmax(D, axis=1)])
    assert ovr.score(X, y) > 0.8


@pytest.mark.parametrize(
    "base", [Pegasos(lam=1e-3), NORMA(gamma=0.5, eta=0.3, budget=50)], ids=repr
)
def test_streaming_equals_k_binary_learners(base, digits10):
    """partial_fit in chunks and learn_one (with classes= up front) give the learners that
    one-sample-at-a-time binary training gives."""
    X, y = digits10
    X, y = X[:200], y[:200]
    classes = np.arange(10)
    twins = binary_twins(base, X, y, classes, how="stream")
    D = np.column_stack([t.decision_function(X) for t in twins])
    chunks = OneVsRest(base)
    for s in range(0, 200, 37):
        chunks.partial_fit(X[s : s + 37], y[s : s + 37], classes=classes if s == 0 else None)
    ones = OneVsRest(base, classes=classes)
    for xi, yi in zip(X, y):
        ones.learn_one(xi, int(yi))
    for m in (chunks, ones):
        np.testing.assert_allclose(m.decision_function(X), D, rtol=1e-12, atol=1e-12)
        np.testing.assert_array_equal(m.predict(X), classes[np.argmax(D, axis=1)])
    assert ones.predict_one(X[5]) == ones.predict(X[5:6])[0]
    assert ones.n_model_computations_ == 0


def test_a_class_missing_from_the_first_batch(digits10):
    """classes= declares a class before its first sample: its learner starts at sample 0
    with only negatives, as a binary learner given classes=[-1, 1] does."""
    X, y = digits10
    keep = y != 9
    X1, y1 = X[keep][:100], y[keep][:100]
    ovr = OneVsRest(Pegasos(lam=1e-3)).partial_fit(X1, y1, classes=np.arange(10))
    twin = Pegasos(lam=1e-3).partial_fit(X1, np.full(100, -1), classes=[-1, 1])
    np.testing.assert_array_equal(
        ovr.decision_function(X[:20])[:, 9], twin.decision_function(X[:20])
    )
    fitted = OneVsRest(Pegasos(lam=1e-3), classes=np.arange(10)).fit(X1, y1)
    np.testing.assert_array_equal(fitted.decision_function(X[:20]), ovr.decision_function(X[:20]))


def test_two_classes_are_the_binary_learner(breast_cancer):
    X, y = breast_cancer
    for base in (Pegasos(lam=1e-3), NORMA(gamma=0.1, eta=0.5, budget=100)):
        ovr = OneVsRest(base).fit(X, y)
        ref = clone(base).fit(X, y)
        assert len(ovr.estimators_) == 1
        np.testing.assert_array_equal(ovr.decision_function(X), ref.decision_function(X))
        np.testing.assert_array_equal(ovr.predict(X), ref.predict(X))


def test_bad_input_leaves_the_learner_unchanged(digits10):
    X, y = digits10
    with pytest.raises(ValueError, match="classes="):
        OneVsRest(Pegasos()).learn_one(X[0], 0)
    with pytest.raises(ValueError, match="partial_fit"):
        OneVsRest(object()).fit(X, y)
    with pytest.raises(ValueError, match="one class"):
        OneVsRest(Pegasos()).fit(X[:5], np.zeros(5))
    with pytest.raises(ValueError, match="not in classes"):
        OneVsRest(Pegasos(), classes=[0, 1, 2]).fit(X, y)
    ovr = OneVsRest(Pegasos(lam=1e-3)).partial_fit(X[:100], y[:100], classes=np.arange(10))
    before = ovr.snapshot()
    Xn = X[100:110].copy()
    Xn[3, 2] = np.nan
    for args, msg in [
        ((Xn, y[100:110]), "NaN"),
        ((X[100:110], np.full(10, 11)), "not in"),
        ((X[100:110, :5], y[100:110]), "features"),
    ]:
        with pytest.raises(ValueError, match=msg):
            ovr.partial_fit(*args)
    with pytest.raises(ValueError, match="differs"):
        ovr.partial_fit(X[100:110], y[100:110], classes=[0, 1, 2])
    for a, b in zip(ovr.snapshot(), before):
        np.testing.assert_array_equal(a, b)
    with pytest.raises(NotFittedError):
        OneVsRest(Pegasos()).predict(X)


def test_copy_snapshot_restore(digits10):
    X, y = digits10
    ovr = OneVsRest(Pegasos(lam=1e-3)).fit(X[:300], y[:300])
    cp = copy.copy(ovr)
    snap = ovr.snapshot()
    d0 = ovr.decision_function(X[300:])
    ovr.partial_fit(X[300:400], y[300:400])
    np.testing.assert_array_equal(cp.decision_function(X[300:]), d0)  # the copy is its own
    ovr.restore(snap)
    np.testing.assert_array_equal(ovr.decision_function(X[300:]), d0)
    with pytest.raises(ValueError, match="snapshot"):
        OneVsRest(NORMA()).fit(X[:50], y[:50]).snapshot()


def test_treecv_over_one_vs_rest_equals_its_folds(digits10):
    """TreeCV's 2-fold CV of OneVsRest(Pegasos): each fold's model is the learner trained on
    the other fold (Joulani et al., Algorithm 1 with k = 2)."""
    X, y = digits10
    r = treecv(OneVsRest(Pegasos(lam=1e-3)), X, y, cv=KFold(2))
    h = X.shape[0] // 2
    a = OneVsRest(Pegasos(lam=1e-3)).partial_fit(X[h:], y[h:], classes=np.arange(10))
    b = OneVsRest(Pegasos(lam=1e-3)).partial_fit(X[:h], y[:h], classes=np.arange(10))
    np.testing.assert_array_equal(r.y_pred, np.concatenate([a.predict(X[:h]), b.predict(X[h:])]))
