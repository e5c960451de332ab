"""Updates refuse what fit refuses, with one validity rule for both.

``fit`` refuses sample weights that are all zero (the model would be β = 0, fitted on
nothing) and, for a classifier without declared classes, weights that leave a single class
among the samples of positive weight.  Before this was fixed, ``reweight(all ids, 0)`` and
reweighting every sample of one class to 0 were accepted.  Every update (reweight, remove,
relabel, add with weights, a mix) now applies the rule to the data it leaves, for binary and
K-class models, ``keep_data`` True and False, NumPy and Dask fits; a refusal leaves the model
exactly as it was, and an accepted update equals the weighted fit.

Also: labels that cannot be compared with the classes (``None``) are refused with a ValueError
naming them (was a TypeError from sorting them for the message).
"""

from __future__ import annotations

import numpy as np
import pytest
from sklearn.datasets import load_breast_cancer, load_diabetes, load_wine
from sklearn.preprocessing import StandardScaler

from deltafit import (
    KernelClassifier,
    KernelRegressor,
    LinearClassifier,
    LinearRegressor,
    sensitivity,
)

ZERO_ALL = "every sample with weight zero"
ONE_CLASS = "single class"


def _scaled(loader, n, seed=0):
    X, y = loader(return_X_y=True)
    idx = np.random.RandomState(seed).permutation(len(y))[:n]
    return StandardScaler().fit_transform(X[idx]), y[idx]


@pytest.fixture(scope="module")
def cancer():
    return _scaled(load_breast_cancer, 120)


@pytest.fixture(scope="module")
def wine():
    return _scaled(load_wine, 120)


@pytest.fixture(scope="module")
def diabetes():
    X, y = _scaled(load_diabetes, 100)
    return X, (y - y.mean()) / y.std()


CLASSIFIERS = [
    ("linear-logistic-keep", lambda: LinearClassifier(loss="logistic", C=0.5)),
    ("linear-squared-nokeep", lambda: LinearClassifier(loss="squared", C=0.5, keep_data=False)),
    ("linear-hinge-keep", lambda: LinearClassifier(loss="squared_hinge", C=0.5)),
    ("kernel-logistic", lambda: KernelClassifier(loss="logistic", C=0.5)),
]
REGRESSORS = [
    ("linear-keep", lambda: LinearRegressor(C=0.5)),
    ("linear-nokeep", lambda: LinearRegressor(C=0.5, keep_data=False)),
    ("kernel", lambda: KernelRegressor(C=0.5)),
]


def _keeps(model):
    return getattr(model, "keep_data", True)


def _rows(model, X, y, ids):
    """The X= (and y=) a keep_data=False model needs to reweight / relabel / remove ids."""
    if _keeps(model):
        return {}
    return {"X": X[ids]} if model._classifier else {"X": X[ids], "y": y[ids]}


def _snapshot(model, X):
    out = [
        model.sample_ids_.copy(),
        model.sample_weight_.copy(),
        model.predict(X).copy(),
        np.array(model._state.solution, copy=True),
        np.array(model.__dict__.get("_n_positive", -1)),
        np.array(model.__dict__.get("_class_counts", -1), copy=True),
    ]
    if hasattr(model, "decision_function"):
        out.append(model.decision_function(X).copy())
    return out


def _assert_unchanged(before, model, X):
    for a, b in zip(before, _snapshot(model, X)):
        np.testing.assert_array_equal(a, b)


def _refused(model, X, match, call):
    before = _snapshot(model, X)
    with pytest.raises(ValueError, match=match):
        call()
    _assert_unchanged(before, model, X)


def _same_fit(model, make, X, y, w):
    """The model equals a fresh fit with the weights it holds."""
    ids = model.sample_ids_
    ref = make()
    if hasattr(model, "gamma_"):  # the kernel as fitted ("scale" reads the fit's rows)
        ref.set_params(gamma=model.gamma_)
    ref.fit(X[ids], y[ids], sample_weight=w[ids])
    np.testing.assert_allclose(model.sample_weight_, w[ids])
    np.testing.assert_allclose(model.predict(X), ref.predict(X), atol=1e-6)
    if hasattr(model, "decision_function"):
        np.testing.assert_allclose(model.decision_function(X), ref.decision_function(X), atol=1e-6)


# ------------------------------------------------------------------------------ binary
@pytest.mark.parametrize("name,make", CLASSIFIERS, ids=[c[0] for c in CLASSIFIERS])
def test_binary_reweights_fit_refuses_are_refused(cancer, name, make):
    X, y = cancer
    model = make().fit(X, y)
    ids = model.sample_ids_
    pos = np.flatnonzero(y == 1)
    # fit refuses both weightings ...
    with pytest.raises(ValueError, match="every weight is zero"):
        make().fit(X, y, sample_weight=np.zeros(len(y)))
    with pytest.raises(ValueError, match=ONE_CLASS):
        make().fit(X, y, sample_weight=(y == 0).astype(float))
    # ... and so does the update
    _refused(model, X, ZERO_ALL, lambda: model.reweight(ids, 0.0, **_rows(model, X, y, ids)))
    _refused(model, X, ONE_CLASS, lambda: model.reweight(pos, 0.0, **_rows(model, X, y, pos)))
    # every positive but one silenced: accepted, and equal to the weighted fit
    w = np.ones(len(y))
    w[pos[:-1]] = 0.0
    model.reweight(pos[:-1], 0.0, **_rows(model, X, y, pos[:-1]))
    _same_fit(model, make, X, y, w)
    last = pos[-1:]
    # the last positive of positive weight may not go, however it goes
    _refused(model, X, ONE_CLASS, lambda: model.reweight(last, 0.0, **_rows(model, X, y, last)))
    _refused(model, X, ONE_CLASS, lambda: model.remove(last, **_rows(model, X, y, last)))
    _refused(model, X, ONE_CLASS, lambda: model.relabel(last, [0], **_rows(model, X, y, last)))
    _refused(
        model,
        X,
        ONE_CLASS,
        lambda: model.update(
            remove_ids=last,
            X_add=X[:2],
            y_add=[1, 1],
            sample_weight_add=0.0,
            **({} if _keeps(model) else {"X_remove": X[last]}),
        ),
    )
    # a positive of positive weight added with it: accepted
    model.update(
        remove_ids=last,
        X_add=X[:2],
        y_add=[1, 1],
        sample_weight_add=[0.0, 2.0],
        **({} if _keeps(model) else {"X_remove": X[last]}),
    )
    Xn, yn = np.vstack([X, X[:2]]), np.r_[y, 1, 1]
    wn = np.r_[w, 0.0, 2.0]
    _same_fit(model, make, Xn, yn, wn)
    # weights given back: a relabel may then empty the class of positive weight no more
    back = pos[:3]
    model.reweight(back, 1.0, **_rows(model, Xn, yn, back))
    wn[back] = 1.0
    _same_fit(model, make, Xn, yn, wn)


def test_declared_classes_allow_one_class_not_zero_weights(cancer):
    """partial_fit(classes=...) lets the data show one class (fit and updates alike); every
    weight zero stays refused."""
    X, y = cancer
    model = LinearClassifier(loss="squared", C=0.5, keep_data=False)
    model.partial_fit(X, y, classes=[0, 1])
    neg = np.flatnonzero(y == 0)
    model.reweight(neg, 0.0, X=X[neg])
    assert np.count_nonzero(model.sample_weight_) == np.count_nonzero(y == 1)
    ids = model.sample_ids_
    _refused(model, X, ZERO_ALL, lambda: model.reweight(ids, 0.0, X=X[ids]))


# ---------------------------------------------------------------------------- regressors
@pytest.mark.parametrize("name,make", REGRESSORS, ids=[c[0] for c in REGRESSORS])
def test_regressor_all_zero_weights_refused(diabetes, name, make):
    X, y = diabetes
    model = make().fit(X, y)
    ids = model.sample_ids_
    with pytest.raises(ValueError, match="every weight is zero"):
        make().fit(X, y, sample_weight=0.0)
    _refused(model, X, ZERO_ALL, lambda: model.reweight(ids, 0.0, **_rows(model, X, y, ids)))
    w = np.ones(len(y))
    w[10:] = 0.0
    model.reweight(ids[10:], 0.0, **_rows(model, X, y, ids[10:]))
    _same_fit(model, make, X, y, w)
    keep = ids[:10]
    # removing the last samples of positive weight leaves β = 0: refused
    _refused(model, X, ZERO_ALL, lambda: model.remove(keep, **_rows(model, X, y, keep)))
    _refused(
        model,
        X,
        ZERO_ALL,
        lambda: model.update(
            remove_ids=keep,
            X_add=X[:1],
            y_add=y[:1],
            sample_weight_add=0.0,
            **({} if _keeps(model) else {"X_remove": X[keep], "y_remove": y[keep]}),
        ),
    )
    model.remove(keep[:9], **_rows(model, X, y, keep[:9]))
    assert np.count_nonzero(model.sample_weight_) == 1


# ------------------------------------------------------------------------------ K classes
K_CLASS = [
    ("linear-logistic", lambda: LinearClassifier(loss="logistic", C=0.5)),
    ("linear-squared", lambda: LinearClassifier(loss="squared", C=0.5)),
    ("kernel-squared", lambda: KernelClassifier(loss="squared", C=0.5)),
]


@pytest.mark.parametrize("name,make", K_CLASS, ids=[c[0] for c in K_CLASS])
def test_k_class_rule_is_fits(wine, name, make):
    """Three classes: fit accepts a class of zero total weight while two keep positive
    weight, and refuses one class of positive weight; so do the updates."""
    X, y = wine
    model = make().fit(X, y)
    c0, c1 = np.flatnonzero(y == 0), np.flatnonzero(y == 1)
    w = np.ones(len(y))
    w[np.r_[c0, c1]] = 0.0
    with pytest.raises(ValueError, match=ONE_CLASS):
        make().fit(X, y, sample_weight=w)
    _refused(model, X, ONE_CLASS, lambda: model.reweight(np.r_[c0, c1], 0.0))
    _refused(model, X, ZERO_ALL, lambda: model.reweight(model.sample_ids_, 0.0))
    # one class silenced: fit takes it, the update too, and they agree
    w = np.ones(len(y))
    w[c0] = 0.0
    model.reweight(c0, 0.0)
    _same_fit(model, make, X, y, w)
    # then the second class may not go, by weight, removal or relabel
    _refused(model, X, ONE_CLASS, lambda: model.reweight(c1, 0.0))
    _refused(model, X, ONE_CLASS, lambda: model.remove(c1))
    _refused(model, X, ONE_CLASS, lambda: model.relabel(c1, np.full(c1.size, 2)))
    # relabelled into the silenced class, they keep their weights: two classes remain
    model.relabel(c1, np.zeros(c1.size, dtype=int))
    y2 = y.copy()
    y2[c1] = 0  # class 1 now has no sample: the fit with it declared
    ref = make().set_params(**({"gamma": model.gamma_} if hasattr(model, "gamma_") else {}))
    ref.partial_fit(X, y2, classes=[0, 1, 2], sample_weight=w)
    np.testing.assert_allclose(model.decision_function(X), ref.decision_function(X), atol=1e-6)


# ----------------------------------------------------------------------------------- dask
@pytest.fixture
def threads():
    dask = pytest.importorskip("dask")
    pytest.importorskip("dask.array")
    with dask.config.set(scheduler="threads"):
        yield


@pytest.mark.parametrize("k_class", [False, True], ids=["binary", "3-class"])
def test_dask_fitted_models_follow_the_rule(threads, cancer, wine, k_class):
    """A Dask-fitted classifier keeps no labels (it counts the samples of positive weight of
    each class): its updates follow the same rule."""
    import dask.array as da

    X, y = wine if k_class else cancer
    w = np.ones(len(y))
    w[:5] = 0.0  # some silenced at the fit: the counts are of positive weight
    make = lambda: LinearClassifier(loss="squared", C=0.5, keep_data=False)  # noqa: E731
    model = make().fit(
        da.from_array(X, chunks=40),
        da.from_array(y, chunks=40),
        sample_weight=da.from_array(w, chunks=40),
    )
    # the NumPy twin (keep_data=True: a NumPy fit of K classes keeps the labels)
    twin = lambda: LinearClassifier(loss="squared", C=0.5)  # noqa: E731
    ref = twin().fit(X, y, sample_weight=w)
    np.testing.assert_allclose(model.decision_function(X), ref.decision_function(X), atol=1e-8)
    classes = np.unique(y)
    silenced = np.flatnonzero(np.isin(y, classes[:-1]) & (w > 0))  # all but the last class
    _refused(model, X, ONE_CLASS, lambda: model.reweight(silenced, 0.0, X=X[silenced]))
    ids = model.sample_ids_
    _refused(model, X, ZERO_ALL, lambda: model.reweight(ids, 0.0, X=X[ids]))
    first = np.flatnonzero((y == classes[0]) & (w > 0))
    model.reweight(first[:-1], 0.0, X=X[first[:-1]])
    w[first[:-1]] = 0.0
    np.testing.assert_allclose(
        model.decision_function(X),
        twin().fit(X, y, sample_weight=w).decision_function(X),
        atol=1e-8,
    )
    last = first[-1:]
    if not k_class:  # two classes: the first class's last sample of positive weight stays
        _refused(model, X, ONE_CLASS, lambda: model.remove(last, X=X[last]))
        _refused(model, X, ONE_CLASS, lambda: model.reweight(last, 0.0, X=X[last]))
        _refused(model, X, ONE_CLASS, lambda: model.relabel(last, [1], X=X[last]))
    else:  # three: it may go (two classes keep positive weight), then the second may not
        model.remove(last, X=X[last])
        second = np.flatnonzero((y == classes[1]) & (w > 0))
        _refused(model, X, ONE_CLASS, lambda: model.reweight(second, 0.0, X=X[second]))


# ------------------------------------------------------------------- unorderable labels
@pytest.mark.parametrize(
    "labels", [[0, 1], [0, 1, 2], ["a", "b"]], ids=["binary", "3-class", "strings"]
)
def test_none_labels_are_a_value_error_naming_them(cancer, labels):
    X, _ = cancer
    y = np.asarray(labels)[np.arange(len(X)) % len(labels)]
    model = LinearClassifier(loss="logistic", C=0.5).fit(X, y)
    before = _snapshot(model, X)
    for call in (
        lambda: model.add(X[:2], [None, None]),
        lambda: model.partial_fit(X[:2], [None, labels[0]]),
        lambda: model.relabel([0, 1], [None, None]),
        lambda: sensitivity(model).add(X[:2], [None, None]),
    ):
        with pytest.raises(ValueError, match=r"labels \[None\]"):
            call()
    with pytest.raises(ValueError, match=r"labels \[None, 'x'\]|labels \['x', None\]"):
        model.add(X[:3], [None, "x", None])
    _assert_unchanged(before, model, X)
