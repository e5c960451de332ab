"""Bad input to ``loo``, ``cross_validate`` and ``LOOSearchCV`` raises ValueError naming the
problem, and the estimator passed in is never modified (ARCHITECTURE.md, "Principles", "no silent
garbage").

Every case runs through each entry point that accepts it; after the error the estimator has
the same parameters (the same objects) and is still unfitted.
"""

from __future__ import annotations

import numpy as np
import pytest
from sklearn.base import clone
from sklearn.exceptions import NotFittedError
from sklearn.kernel_approximation import Nystroem
from sklearn.linear_model import LogisticRegression
from sklearn.utils.validation import check_is_fitted

import deltafit as df
from deltafit.model_selection import LOOSearchCV, alo, cross_validate, loo


@pytest.fixture(scope="module")
def data(breast_cancer):
    X, y = breast_cancer
    idx = np.random.default_rng(0).choice(X.shape[0], 40, replace=False)
    X, y = X[idx], y[idx]
    return X, y, 2.0 * X[:, 0] - X[:, 1]  # features, labels 0/1, a regression target


def _loo(est, X, y, **kw):
    return loo(est, X, y, **kw)


def _cv(est, X, y, **kw):
    return cross_validate(est, X, y, cv=kw.pop("cv", 3), **kw)


def _search(est, X, y, **kw):
    return LOOSearchCV(est, kw.pop("param_grid", {"C": [0.5, 1.0]}), **kw).fit(X, y)


def _search_kfold(est, X, y, **kw):
    kw.setdefault("cv", 3)
    return _search(est, X, y, **kw)


ENTRY = {"loo": _loo, "cross_validate": _cv, "search": _search, "search-kfold": _search_kfold}


def _logistic():
    return df.LinearClassifier(loss="logistic", C=1.0)


def _with(X, i, j, v):
    X = np.array(X, dtype=float)
    X[i, j] = v
    return X


# (name, estimator builder, data transform (X, y, t) -> (X, y), keyword arguments, message)
CASES = [
    ("X-nan", _logistic, lambda X, y, t: (_with(X, 3, 2, np.nan), y), {}, "NaN"),
    ("X-inf", _logistic, lambda X, y, t: (_with(X, 3, 2, np.inf), y), {}, "infinity"),
    (
        "X-neginf-regressor",
        df.LinearRegressor,
        lambda X, y, t: (_with(X, 0, 0, -np.inf), t),
        {},
        "infinity",
    ),
    (
        "y-nan-regressor",
        df.LinearRegressor,
        lambda X, y, t: (X, _with(t[:, None], 4, 0, np.nan).ravel()),
        {},
        "NaN",
    ),
    (
        "y-inf-regressor",
        df.KernelRegressor,
        lambda X, y, t: (X, _with(t[:, None], 4, 0, np.inf).ravel()),
        {},
        "infinity",
    ),
    (
        "y-nan-classifier",
        _logistic,
        lambda X, y, t: (X, _with(y[:, None], 4, 0, np.nan).ravel()),
        {},
        "NaN",
    ),
    ("X-1d", _logistic, lambda X, y, t: (X[:, 0], y), {}, "Expected 2D array"),
    ("y-2d", _logistic, lambda X, y, t: (X, np.c_[y, y]), {}, "1d array"),
    ("lengths", _logistic, lambda X, y, t: (X, y[:-1]), {}, "inconsistent numbers of samples"),
    ("one-sample", _logistic, lambda X, y, t: (X[:1], y[:1]), {}, "minimum of 2"),
    ("single-class", _logistic, lambda X, y, t: (X, np.zeros_like(y)), {}, "only one class"),
    (
        "single-class-lssvm",
        df.LinearClassifier,
        lambda X, y, t: (X, np.ones_like(y)),
        {},
        "only one class",
    ),
    (
        "single-class-refit",
        _logistic,
        lambda X, y, t: (X, np.zeros_like(y)),
        {"method": "refit"},
        "only one class",
    ),
    # three classes are supported (tests/test_multiclass_loo.py); ALO is for leave-one-out only
    (
        "three-classes-closed-form-logistic",
        _logistic,
        lambda X, y, t: (X, np.arange(len(y)) % 3),
        {"method": "closed_form"},
        "needs loss='squared'",
    ),
    ("unknown-method", _logistic, None, {"method": "fast"}, "method must be one of"),
    (
        "closed-form-logistic",
        _logistic,
        None,
        {"method": "closed_form"},
        "closed_form' needs loss='squared'",
    ),
    (
        "closed-form-squared-hinge-kernel",
        lambda: df.KernelClassifier(loss="squared_hinge", gamma=0.1),
        None,
        {"method": "closed_form"},
        "needs loss='squared'",
    ),
    (
        "bounds-regressor",
        df.LinearRegressor,
        lambda X, y, t: (X, t),
        {"method": "bounds"},
        "needs a classifier",
    ),
    (
        "bounds-early-kernel-regressor",
        lambda: df.KernelRegressor(gamma=0.1),
        lambda X, y, t: (X, t),
        {"method": "bounds_early"},
        "needs a classifier",
    ),
    (
        "bounds-early-hinge",
        lambda: df.LinearClassifier(loss="hinge"),
        None,
        {"method": "bounds_early"},
        "not covered",
    ),
    (
        "closed-form-hinge",
        lambda: df.KernelClassifier(loss="hinge"),
        None,
        {"method": "closed_form"},
        "needs loss='squared'",
    ),
    ("bounds-sklearn", LogisticRegression, None, {"method": "bounds"}, "method='refit'"),
    (
        "bounds-early-sklearn",
        LogisticRegression,
        None,
        {"method": "bounds_early"},
        "method='refit'",
    ),
    ("closed-form-sklearn", LogisticRegression, None, {"method": "closed_form"}, "method='refit'"),
    ("bad-C", lambda: df.LinearClassifier(loss="logistic", C=-1.0), None, {}, "The 'C' parameter"),
]
# (entry points where the case does not apply)
NOT_FOR = {"bad-C": {"search", "search-kfold"}}  # the grid overrides C


def _params():
    out = []
    for name, build, transform, kw, match in CASES:
        for entry in ENTRY:
            if entry in NOT_FOR.get(name, ()):
                continue
            out.append(pytest.param(entry, build, transform, kw, match, id=f"{name}-{entry}"))
    return out


def assert_untouched(est, params_before):
    after = est.get_params(deep=False)
    assert after.keys() == params_before.keys()
    for k, v in params_before.items():
        assert after[k] is v or after[k] == v, k
    with pytest.raises(NotFittedError):
        check_is_fitted(est)


@pytest.mark.parametrize("entry,build,transform,kw,match", _params())
def test_bad_input_raises_value_error(entry, build, transform, kw, match, data):
    X, y, t = data
    if transform is not None:
        X, y = transform(X, y, t)
    est = build()
    before = est.get_params(deep=False)
    with pytest.raises(ValueError, match=match):
        ENTRY[entry](est, X, y, **dict(kw))
    assert_untouched(est, before)


# ------------------------------------------------------------------ entry-specific arguments
@pytest.mark.parametrize("entry", ["cross_validate", "search-kfold"])
def test_alo_is_leave_one_out_only(entry, data):
    X, y, _ = data
    est = _logistic()
    before = est.get_params(deep=False)
    with pytest.raises(ValueError, match="approximates leave-one-out only"):
        ENTRY[entry](est, X, y, method="alo")
    assert_untouched(est, before)


@pytest.mark.parametrize("entry", ["loo", "cross_validate"])
@pytest.mark.parametrize("method", ["bounds", "bounds_early", "auto"])
def test_bad_order(entry, method, data):
    X, y, _ = data
    est = _logistic()
    before = est.get_params(deep=False)
    with pytest.raises(ValueError, match="order must be"):
        ENTRY[entry](est, X, y, method=method, order="largest")
    assert_untouched(est, before)


@pytest.mark.parametrize("entry", ["loo", "cross_validate"])
@pytest.mark.parametrize(
    "loss,method", [("squared", "closed_form"), ("logistic", "refit"), ("squared", "auto")]
)
def test_bad_order_other_methods(entry, loss, method, data):
    """Regression test: order used to be checked only inside the bound screening, so the
    closed form and brute force accepted any value silently."""
    X, y, _ = data
    with pytest.raises(ValueError, match="order must be"):
        ENTRY[entry](df.LinearClassifier(loss=loss), X, y, method=method, order="largest")


@pytest.mark.parametrize("entry", ["search", "search-kfold"])
def test_search_bad_order(entry, data):
    X, y, _ = data
    with pytest.raises(ValueError, match="'order' parameter"):
        ENTRY[entry](_logistic(), X, y, order="largest")


@pytest.mark.parametrize("entry", ["search", "search-kfold"])
@pytest.mark.parametrize(
    "grid,match",
    [
        ([], "param_grid is empty"),
        ({"C": []}, "non-empty"),
        ({"gamma_typo": [1.0]}, "Invalid parameter"),
        ({"C": [1.0, -2.0]}, "The 'C' parameter"),
    ],
)
def test_search_bad_grid(entry, grid, match, data):
    X, y, _ = data
    est = _logistic()
    before = est.get_params(deep=False)
    with pytest.raises(ValueError, match=match):
        ENTRY[entry](est, X, y, param_grid=grid)
    assert_untouched(est, before)


@pytest.mark.parametrize("name,value", [("prune", "yes"), ("refit", 1.5), ("progress", None)])
def test_search_flags_must_be_bool(name, value, data):
    X, y, _ = data
    with pytest.raises(ValueError, match=name):
        LOOSearchCV(_logistic(), {"C": [1.0]}, **{name: value}).fit(X, y)


@pytest.mark.parametrize("method", ["auto", "bounds", "refit"])
def test_splitter_without_splits(method, data):
    X, y, _ = data
    est = _logistic()
    before = est.get_params(deep=False)
    with pytest.raises(ValueError, match="no splits"):
        cross_validate(est, X, y, cv=[], method=method)
    assert_untouched(est, before)


@pytest.mark.parametrize("loss", ["logistic", "squared"])
def test_search_splitter_without_splits(loss, data):
    """Regression test: LOOSearchCV(cv=[]) used to give NaN scores without an error (bound
    methods, refit) or numpy's 'need at least one array to concatenate' (closed form)."""
    X, y, _ = data
    with pytest.raises(ValueError, match="no splits"):
        LOOSearchCV(df.LinearClassifier(loss=loss), {"C": [1.0]}, cv=[]).fit(X, y)


def test_bad_splitter_arguments(data):
    X, y, _ = data
    with pytest.raises(ValueError, match="n_splits"):
        cross_validate(_logistic(), X, y, cv=1)
    with pytest.raises(ValueError, match="greater than the number of samples"):
        cross_validate(_logistic(), X, y, cv=len(y) + 1)
    from sklearn.model_selection import GroupKFold

    with pytest.raises(ValueError, match="groups"):
        cross_validate(_logistic(), X, y, cv=GroupKFold(3))


def test_closed_form_refuses_test_rows_in_training_set(data):
    X, y, _ = data
    n = len(y)
    splits = [(np.arange(n), np.arange(5))]  # test rows 0-4 are also trained on
    with pytest.raises(ValueError, match="also in its split's training set"):
        cross_validate(df.LinearClassifier(), X, y, cv=splits, method="closed_form")


# --------------------------------------------------------------- the estimator is not modified
@pytest.mark.parametrize("entry", list(ENTRY))
def test_estimator_is_never_modified(entry, data):
    """Valid runs clone the estimator: an unfitted one stays unfitted with the same params, a
    fitted one keeps its model (keep_data=False stays False: the run uses its own copy)."""
    X, y, t = data
    for est, target in [
        (df.LinearRegressor(C=2.0, keep_data=False), t),
        (
            df.LinearClassifier(
                loss="logistic", feature_map=Nystroem(n_components=10, random_state=0).fit(X)
            ),
            y,
        ),
        (df.KernelClassifier(loss="squared_hinge", gamma=0.1), y),
    ]:
        before = est.get_params(deep=False)
        ENTRY[entry](est, X, target)
        assert_untouched(est, before)
    fitted = _logistic().fit(X[:30], y[:30])
    dec = fitted.decision_function(X)
    before = fitted.get_params(deep=False)
    ENTRY[entry](fitted, X, y)
    np.testing.assert_array_equal(fitted.decision_function(X), dec)
    assert fitted.get_params(deep=False) == before
    assert fitted.n_samples_ == 30


def test_alo_function_leaves_estimator_unfitted(data):
    X, y, _ = data
    est = _logistic()
    before = est.get_params(deep=False)
    r = alo(est, X, y)
    assert r.approximate
    assert_untouched(est, before)


def test_search_best_estimator_keeps_the_params_asked_for(data):
    """Regression test: best_estimator_ used to be the search's full model, fitted with
    keep_data=True, whatever the estimator asked for (keep_data=False promises that no
    training row is stored)."""
    X, _, t = data
    est = df.LinearRegressor(keep_data=False)
    s = LOOSearchCV(est, {"C": [0.5, 2.0]}).fit(X, t)
    expected = clone(est).set_params(**s.best_params_).get_params()
    assert s.best_estimator_.get_params() == expected
    assert not s.best_estimator_.problem_.keeps_rows
    fresh = clone(est).set_params(**s.best_params_).fit(X, t)
    np.testing.assert_allclose(s.predict(X), fresh.predict(X), rtol=1e-12, atol=1e-12)


def test_result_attributes_of_the_other_task(data):
    X, y, t = data
    reg = loo(df.LinearRegressor(), X, t)
    clf = loo(_logistic(), X, y)
    for name in ("n_errors", "error_rate"):
        with pytest.raises(AttributeError, match="classifiers"):
            getattr(reg, name)
    for name in ("residuals", "mse"):
        with pytest.raises(AttributeError, match="regressors"):
            getattr(clf, name)
    assert "exact" in clf.summary() and "MSE" in reg.summary()
    assert "APPROXIMATE" in alo(_logistic(), X, y).summary()
