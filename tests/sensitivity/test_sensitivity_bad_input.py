"""Bad input to :mod:`deltafit.sensitivity` raises ValueError naming the problem.

ARCHITECTURE.md, "Principles" ("no silent garbage"): a what-if object
(``deltafit.sensitivity(model)``) that
refuses a change is left exactly as it was — its decision bounds, distance bound and change
counts are bitwise the same after the failed call, and it keeps working afterwards.  Also the
free functions (spheres, gradient balls, CertainSigns, leave-one-out bounds) and stale or
unsuitable models.
"""

from __future__ import annotations

import copy
import functools
from contextlib import contextmanager

import numpy as np
import pytest
from sklearn.exceptions import NotFittedError
from sklearn.linear_model import LogisticRegression
from sklearn.metrics.pairwise import rbf_kernel

import deltafit
from deltafit import KernelClassifier, KernelRegressor, LinearClassifier, LinearRegressor
from deltafit.datasets import load_breast_cancer
from deltafit.losses import get_loss
from deltafit.sensitivity import (
    BallIntersection,
    CertainSigns,
    KernelSphere,
    PrimalSphere,
    Sensitivity,
    gradient_sphere,
    loo_bounds,
    model_gradient_sphere,
    two_ball_bounds,
    zhang_loo_bounds,
)
from deltafit.solvers import newton_primal

N_FIT = 100
KINDS = ["linear_logistic", "kernel_squared_hinge", "linear_squared", "kernel_squared"]
CLASSIFIERS = KINDS[:2]
REGRESSORS = KINDS[2:]


# ---------------------------------------------------------------------------------------------
# data, models and a what-if object with pending changes
# ---------------------------------------------------------------------------------------------
@functools.cache
def _data(kind):
    X, y = load_breast_cancer()
    if kind in REGRESSORS:  # regress the first feature on the others
        X, y = X[:, 1:], X[:, 0].copy()
    return X, y


def _template(kind):
    return {
        "linear_logistic": LinearClassifier(loss="logistic", C=2.0),
        "kernel_squared_hinge": KernelClassifier(
            loss="squared_hinge", kernel="rbf", gamma=0.1, C=2.0
        ),
        "linear_squared": LinearRegressor(C=2.0),
        "kernel_squared": KernelRegressor(kernel="rbf", gamma=0.1, C=2.0),
    }[kind]


@functools.cache
def _fitted_cached(kind):
    X, y = _data(kind)
    return _template(kind).fit(X[:N_FIT], y[:N_FIT])


def fitted(kind):
    """A fitted model of its own (the cached one is never mutated)."""
    return copy.deepcopy(_fitted_cached(kind))


def _new_label(kind, old):
    if kind in CLASSIFIERS:
        return 1 - old
    return old + 0.5


def what_if(kind, model=None):
    """A what-if object with pending changes: two removals, two additions, one relabel."""
    X, y = _data(kind)
    model = _fitted_cached(kind) if model is None else model
    s = deltafit.sensitivity(model)
    s.remove([3, 10])
    s.add(X[N_FIT : N_FIT + 2], y[N_FIT : N_FIT + 2])
    s.relabel([5], [_new_label(kind, y[5])])
    return s


def queries(kind):
    return _data(kind)[0][200:206]


def snapshot(s, Xq):
    lo, hi = s.decision_bounds(Xq)
    return lo.copy(), hi.copy(), s.distance_bound(), s.n_added, s.n_removed, s.n_relabeled, s.n_new


def assert_same(a, b):
    assert len(a) == len(b)
    for u, v in zip(a, b):
        if isinstance(u, np.ndarray):
            assert u.dtype == v.dtype and np.array_equal(u, v)  # bitwise (no NaN here)
        else:
            assert u == v


@contextmanager
def unchanged(s, Xq):
    """The object is bitwise the same after the block, and keeps working: one more change
    gives the same bounds as on an object that never saw the failed call."""
    before = snapshot(s, Xq)
    yield
    assert_same(before, snapshot(s, Xq))


def assert_still_works(kind, s, replay=None):
    """After a refused call, a further change gives the same answer as a fresh object that
    saw the same accepted changes (``what_if``, then ``replay(fresh)``)."""
    Xq = queries(kind)
    fresh = what_if(kind, s._model)
    if replay is not None:
        replay(fresh)
    for obj in (s, fresh):
        obj.remove([20])
    np.testing.assert_array_equal(s.decision_bounds(Xq)[0], fresh.decision_bounds(Xq)[0])
    np.testing.assert_array_equal(s.decision_bounds(Xq)[1], fresh.decision_bounds(Xq)[1])
    assert s.distance_bound() == fresh.distance_bound()


# ---------------------------------------------------------------------------------------------
# ids
# ---------------------------------------------------------------------------------------------
@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("bad", [[10**6], [-1], [N_FIT + 7], [2, 10**6]])
def test_unknown_ids(kind, bad):
    s, Xq = what_if(kind), queries(kind)
    label = _data(kind)[1][: len(bad)]
    with unchanged(s, Xq):
        with pytest.raises(ValueError, match="unknown sample ids"):
            s.remove(bad)
        with pytest.raises(ValueError, match="unknown sample ids"):
            s.relabel(bad, label)
    assert_still_works(kind, s)


def test_ids_removed_from_the_model_are_unknown():
    model = fitted("linear_logistic")
    model.remove([7])
    s = deltafit.sensitivity(model)
    Xq = queries("linear_logistic")
    with unchanged(s, Xq), pytest.raises(ValueError, match="unknown sample ids.*7"):
        s.remove([7])
    with pytest.raises(ValueError, match="unknown"):
        loo_bounds(model, ids=[7])
    with pytest.raises(ValueError, match="unknown"):
        zhang_loo_bounds(model, ids=[7])


@pytest.mark.parametrize("kind", KINDS)
def test_repeated_ids(kind):
    s, Xq = what_if(kind), queries(kind)
    hyp = s._first_hid  # the first hypothetical addition
    y = _data(kind)[1]
    with unchanged(s, Xq):
        with pytest.raises(ValueError, match="repeated ids"):
            s.remove([4, 4])
        with pytest.raises(ValueError, match="repeated ids"):
            s.remove([hyp, 7, hyp])
        with pytest.raises(ValueError, match="repeated ids"):
            s.relabel([4, 4], y[[4, 4]])
    model = _fitted_cached(kind)
    with pytest.raises(ValueError, match="repeated"):
        loo_bounds(model, ids=[1, 1])
    assert_still_works(kind, s)


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize(
    "bad",
    [[1.5], ["a"], [np.nan], [True], [[1, 2]], [], np.array([])],
    ids=["float", "str", "nan", "bool", "2d", "empty-list", "empty-array"],
)
def test_non_integer_ids(kind, bad):
    s, Xq = what_if(kind), queries(kind)
    with unchanged(s, Xq):
        with pytest.raises(ValueError, match="ids"):
            s.remove(bad)
        with pytest.raises(ValueError, match="ids"):
            s.relabel(bad, _data(kind)[1][:1])
    assert_still_works(kind, s)


def test_integral_float_ids_are_accepted():
    s, t = what_if("linear_logistic"), what_if("linear_logistic")
    s.remove(np.array([7.0]))
    t.remove([7])
    Xq = queries("linear_logistic")
    assert_same(snapshot(s, Xq), snapshot(t, Xq))


# ---------------------------------------------------------------------------------------------
# removals and relabels that cannot happen
# ---------------------------------------------------------------------------------------------
@pytest.mark.parametrize("kind", KINDS)
def test_remove_already_removed(kind):
    s, Xq = what_if(kind), queries(kind)
    hyp = s._first_hid
    s.remove([hyp])  # a hypothetical addition, removed again
    with unchanged(s, Xq):
        for bad in ([3], [10, 3], [30, 3], [hyp], [hyp, 31]):
            with pytest.raises(ValueError, match="already removed"):
                s.remove(bad)
    assert_still_works(kind, s, replay=lambda t: t.remove([hyp]))


@pytest.mark.parametrize("kind", KINDS)
def test_relabel_removed(kind):
    s, Xq = what_if(kind), queries(kind)
    y = _data(kind)[1]
    with unchanged(s, Xq):
        for bad in ([3], [30, 10]):
            with pytest.raises(ValueError, match="removed"):
                s.relabel(bad, [_new_label(kind, y[i]) for i in bad])
    assert_still_works(kind, s)


@pytest.mark.parametrize("kind", KINDS)
def test_remove_everything(kind):
    s, Xq = what_if(kind), queries(kind)
    model = _fitted_cached(kind)
    everything = np.r_[np.setdiff1d(model.sample_ids_, [3, 10]), s._first_hid, s._first_hid + 1]
    with unchanged(s, Xq):
        with pytest.raises(ValueError, match="every sample"):
            s.remove(everything)
    # down to one sample is allowed, the last one is not
    s.remove(everything[:-1])
    assert s.n_new == 1
    lo, hi = s.decision_bounds(Xq)
    assert np.all(lo <= hi)
    with unchanged(s, Xq), pytest.raises(ValueError, match="every sample"):
        s.remove(everything[-1:])


# ---------------------------------------------------------------------------------------------
# rows and labels
# ---------------------------------------------------------------------------------------------
@pytest.mark.parametrize("kind", KINDS)
def test_add_wrong_number_of_features(kind):
    s, Xq = what_if(kind), queries(kind)
    X, y = _data(kind)
    with unchanged(s, Xq):
        with pytest.raises(ValueError, match="features"):
            s.add(X[300:302, :-1], y[300:302])
        with pytest.raises(ValueError, match="features"):
            s.add(np.hstack([X[300:302], X[300:302, :1]]), y[300:302])
        with pytest.raises(ValueError, match="2-D|features"):
            s.add(X[300:302, None, :], y[300:302])
        with pytest.raises(ValueError, match="empty"):
            s.add(X[:0], y[:0])
    for method in (s.decision_bounds, s.tightness):
        with pytest.raises(ValueError, match="features"):
            method(Xq[:, :-1])
    assert_still_works(kind, s)


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("value", [np.nan, np.inf, -np.inf])
def test_nan_inf_in_X(kind, value):
    s, Xq = what_if(kind), queries(kind)
    X, y = _data(kind)
    Xb = X[300:303].copy()
    Xb[1, 4] = value
    with unchanged(s, Xq):
        with pytest.raises(ValueError, match="NaN or infinity"):
            s.add(Xb, y[300:303])
    methods = [s.decision_bounds, s.tightness]
    if kind in CLASSIFIERS:
        methods.append(s.predict_certain)
    Xqb = Xq.copy()
    Xqb[0, 0] = value
    for method in methods:
        with pytest.raises(ValueError, match="NaN or infinity"):
            method(Xqb)
    assert_still_works(kind, s)


@pytest.mark.parametrize("kind", CLASSIFIERS)
def test_unknown_class_label(kind):
    s, Xq = what_if(kind), queries(kind)
    X, _ = _data(kind)
    with unchanged(s, Xq):
        with pytest.raises(ValueError, match="not among the model's classes"):
            s.add(X[300:302], [0, 7])
        with pytest.raises(ValueError, match="not among the model's classes"):
            s.add(X[300:302], ["a", "b"])
        with pytest.raises(ValueError, match="not among the model's classes"):
            s.relabel([4], [2])
    assert_still_works(kind, s)


@pytest.mark.parametrize("kind", REGRESSORS)
@pytest.mark.parametrize("value", [np.nan, np.inf])
def test_regression_targets_nan(kind, value):
    s, Xq = what_if(kind), queries(kind)
    X, y = _data(kind)
    with unchanged(s, Xq):
        with pytest.raises(ValueError, match="NaN or infinity"):
            s.add(X[300:302], [0.1, value])
        with pytest.raises(ValueError, match="NaN or infinity"):
            s.relabel([4], [value])
        with pytest.raises(ValueError, match="numeric"):
            s.add(X[300:302], ["a", "b"])
    assert_still_works(kind, s)


@pytest.mark.parametrize("kind", KINDS)
def test_mismatched_lengths(kind):
    s, Xq = what_if(kind), queries(kind)
    X, y = _data(kind)
    with unchanged(s, Xq):
        with pytest.raises(ValueError, match="3 rows but y has 2 labels"):
            s.add(X[300:303], y[300:302])
        with pytest.raises(ValueError, match="2 ids but 1 labels"):
            s.relabel([4, 6], y[[4]])
        with pytest.raises(ValueError, match="2 ids but 3 labels"):
            s.relabel([4, 6], y[[4, 6, 7]])
    assert_still_works(kind, s)


@pytest.mark.parametrize("kind", KINDS)
def test_undo_with_nothing_to_undo(kind):
    model = _fitted_cached(kind)
    s = deltafit.sensitivity(model)
    with pytest.raises(ValueError, match="nothing to undo"):
        s.undo()
    s2, Xq = what_if(kind), queries(kind)
    s2.reset()
    assert (s2.n_added, s2.n_removed, s2.n_relabeled) == (0, 0, 0)
    with unchanged(s2, Xq), pytest.raises(ValueError, match="nothing to undo"):
        s2.undo()
    # with no change, the ball is the model's own solution (up to its certified residual)
    lo, hi = s2.decision_bounds(Xq)
    f = model.decision_function(Xq) if kind in CLASSIFIERS else model.predict(Xq)
    assert np.all(lo <= f + 1e-12) and np.all(f <= hi + 1e-12)


# ---------------------------------------------------------------------------------------------
# models the bounds cannot be asked of
# ---------------------------------------------------------------------------------------------
BOUND_FUNCTIONS = [
    deltafit.sensitivity,
    Sensitivity,
    loo_bounds,
    zhang_loo_bounds,
    model_gradient_sphere,
]


@pytest.mark.parametrize("func", BOUND_FUNCTIONS)
@pytest.mark.parametrize("kind", KINDS)
def test_unfitted_model(func, kind):
    with pytest.raises(NotFittedError, match="not fitted"):
        func(_template(kind))
    assert issubclass(NotFittedError, ValueError)


@pytest.mark.parametrize("func", BOUND_FUNCTIONS)
def test_non_deltafit_estimator(func):
    X, y = _data("linear_logistic")
    lr = LogisticRegression().fit(X[:50], y[:50])
    with pytest.raises(ValueError, match="deltafit estimator.*LogisticRegression"):
        func(lr)
    with pytest.raises(ValueError, match="deltafit estimator"):
        func("model")


@pytest.mark.parametrize("func", BOUND_FUNCTIONS)
@pytest.mark.parametrize("kind", ["linear_logistic", "kernel_squared_hinge"])
def test_loss_not_covered(func, kind):
    """A solution of a loss the bounds do not cover (non-differentiable hinge): the bounds
    read the loss the stored solution was fitted with, so the stub goes into the state."""
    from deltafit.losses import Loss

    class _Hinge(Loss):
        name = "hinge"

    model = fitted(kind)
    model._state.opts.loss = _Hinge()
    with pytest.raises(ValueError, match="'hinge' is not covered"):
        func(model)


@pytest.mark.parametrize("kind", ["linear_logistic", "kernel_squared_hinge", "linear_squared"])
def test_gradient_sphere_with_a_non_kernel_model(kind):
    X = _data(kind)[0][:5]
    model = _fitted_cached(kind)
    a = np.ones(5)
    if kind.startswith("kernel"):
        sph = gradient_sphere(a, a, points=X, kernel=model)  # fine
        assert sph.radius > 0
        return
    with pytest.raises(ValueError, match="kernel"):
        gradient_sphere(a, a, points=X, kernel=model)
    with pytest.raises(ValueError, match="deltafit estimator"):
        gradient_sphere(a, a, points=X, kernel=LogisticRegression())


# ---------------------------------------------------------------------------------------------
# C_new
# ---------------------------------------------------------------------------------------------
@pytest.mark.parametrize("kind", ["linear_logistic", "kernel_squared"])
@pytest.mark.parametrize(
    "bad",
    [0, 0.0, -1.0, np.nan, np.inf, -np.inf, "median", "MEAN", True, [1.0]],
    ids=["0", "0.0", "neg", "nan", "inf", "-inf", "median", "MEAN", "bool", "list"],
)
def test_c_new_invalid_at_construction(kind, bad):
    model = _fitted_cached(kind)
    with pytest.raises(ValueError, match="C_new"):
        deltafit.sensitivity(model, C_new=bad)
    with pytest.raises(ValueError, match="C_new"):
        loo_bounds(model, C_new=bad)


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize(
    "value",
    [-1.0, 0.0, np.nan, np.inf, "2.0", None, np.array([1.0, 2.0])],
    ids=["neg", "zero", "nan", "inf", "str", "None", "array"],
)
def test_c_new_callable_bad_at_query_time(kind, value):
    X, y = _data(kind)
    model = _fitted_cached(kind)
    seen = []

    def c_new(n):
        seen.append(n)
        return value

    s = deltafit.sensitivity(model, C_new=c_new)  # not called yet
    s.remove([3])
    s.add(X[300:301], y[300:301])
    assert s.n_new == N_FIT
    queries_ = [
        s.distance_bound,
        lambda: s.radius,
        s.sphere,
        lambda: s.decision_bounds(queries(kind)),
        lambda: s.tightness(queries(kind)),
    ]
    if kind in CLASSIFIERS:
        queries_.append(lambda: s.predict_certain(queries(kind)))
    if kind.startswith("linear"):
        queries_ += [s.coef_bounds, s.norm_change_bound, s.intercept_bounds]
    for q in queries_:
        with pytest.raises(ValueError, match=r"C_new\(100\) must be a positive finite number"):
            q()
    assert seen and set(seen) == {N_FIT}
    # the pending changes are intact
    assert (s.n_added, s.n_removed) == (1, 1)


@pytest.mark.parametrize("value", [-1.0, 0.0, np.nan, np.inf], ids=["neg", "zero", "nan", "inf"])
def test_loo_bounds_c_new_callable_bad(value):
    with pytest.raises(ValueError, match="C_new"):
        loo_bounds(_fitted_cached("linear_logistic"), C_new=lambda n: value)


@pytest.mark.parametrize("value", [None, np.array([1.0, 2.0])], ids=["None", "array"])
def test_loo_bounds_c_new_callable_non_number(value):
    with pytest.raises(ValueError, match="C_new"):
        loo_bounds(_fitted_cached("linear_logistic"), C_new=lambda n: value)


# ---------------------------------------------------------------------------------------------
# queries that do not apply
# ---------------------------------------------------------------------------------------------
@pytest.mark.parametrize("kind", ["linear_logistic", "linear_squared"])
@pytest.mark.parametrize(
    "q",
    [0, -1, -0.5, np.nan, -np.inf, True, "2", None],
    ids=["0", "-1", "-0.5", "nan", "-inf", "bool", "str", "None"],
)
def test_norm_change_bound_bad_q(kind, q):
    s, Xq = what_if(kind), queries(kind)
    with unchanged(s, Xq), pytest.raises(ValueError, match="q must be a positive number"):
        s.norm_change_bound(q)
    d, dist = np.size(s._model.coef_), s.distance_bound()
    for good in (0.5, 1, 2, 3.5, np.inf, np.float32(2.0), 3):
        b = s.norm_change_bound(good)
        assert np.isfinite(b) and b > 0
        assert b <= dist * d ** max(1.0 / float(good) - 0.5, 0.0) * (1 + 1e-12)


@pytest.mark.parametrize("kind", ["kernel_squared_hinge", "kernel_squared"])
def test_coefficient_bounds_on_a_kernel_model(kind):
    s, Xq = what_if(kind), queries(kind)
    with unchanged(s, Xq):
        for method in (s.coef_bounds, s.intercept_bounds, s.norm_change_bound):
            with pytest.raises(ValueError, match="needs a linear model"):
                method()


@pytest.mark.parametrize("kind", REGRESSORS)
def test_predict_certain_on_a_regressor(kind):
    s, Xq = what_if(kind), queries(kind)
    with unchanged(s, Xq), pytest.raises(ValueError, match="needs a classifier"):
        s.predict_certain(Xq)


# ---------------------------------------------------------------------------------------------
# a stale object: the model changed after it was made
# ---------------------------------------------------------------------------------------------
def _update_add(model, X, y):
    model.add(X[400:402], y[400:402])


def _update_remove(model, X, y):
    model.remove([8])


def _update_relabel(model, X, y):
    model.relabel([8], [1 - y[8]] if hasattr(model, "classes_") else [y[8] + 1.0])


def _update_partial_fit(model, X, y):
    model.partial_fit(X[400:402], y[400:402])


def _update_refit(model, X, y):
    model.fit(X[:N_FIT], y[:N_FIT])


@pytest.mark.parametrize(
    "update",
    [_update_add, _update_remove, _update_relabel, _update_partial_fit, _update_refit],
    ids=["add", "remove", "relabel", "partial_fit", "refit"],
)
@pytest.mark.parametrize("kind", KINDS)
def test_model_changed_after_the_object_was_made(kind, update):
    X, y = _data(kind)
    model = fitted(kind)
    s = what_if(kind, model)
    counts = (s.n_added, s.n_removed, s.n_relabeled)
    update(model, X, y)
    Xq = queries(kind)
    calls = [
        lambda: s.decision_bounds(Xq),
        s.distance_bound,
        lambda: s.radius,
        s.sphere,
        lambda: s.tightness(Xq),
        lambda: s.remove([30]),
        lambda: s.add(X[300:301], y[300:301]),
        lambda: s.relabel([31], y[[31]]),
        s.undo,
        s.reset,
    ]
    if kind in CLASSIFIERS:
        calls.append(lambda: s.predict_certain(Xq))
    if kind.startswith("linear"):
        calls += [s.coef_bounds, s.norm_change_bound]
    for call in calls:
        with pytest.raises(ValueError, match="model was fitted or updated"):
            call()
    assert (s.n_added, s.n_removed, s.n_relabeled) == counts
    # a new object works
    s2 = deltafit.sensitivity(model)
    s2.remove([30])
    lo, hi = s2.decision_bounds(Xq)
    assert np.all(lo <= hi)


@pytest.mark.parametrize("which", ["sensitivity", "loo_bounds"])
def test_set_params_c_after_fit_is_not_silent_garbage(which):
    """After ``set_params(C=10)`` on a model fitted at C=1 (no refit; the model still predicts
    with its C=1 solution), a bound asked for C_new=10 must either raise ValueError or hold for
    the model retrained at C=10."""
    X, y = _data("linear_logistic")
    X, y = X[:60], y[:60]
    model = LinearClassifier(loss="logistic", C=1.0).fit(X, y)
    model.set_params(C=10.0)
    try:
        if which == "sensitivity":
            s = deltafit.sensitivity(model, C_new=10.0)
            s.remove([0])
            lo, hi = s.decision_bounds(X[:5])
        else:
            lo, hi = loo_bounds(model, ids=[0, 1, 2, 3, 4], C_new=10.0)
    except ValueError:
        return
    # the references are solved tightly: the curvature region of a small problem is the
    # retrained model to rounding, narrower than a default-tolerance refit's own error
    if which == "sensitivity":  # the model retrained at C=10 without sample 0
        f = (
            LinearClassifier(loss="logistic", C=10.0, tol=1e-13)
            .fit(X[1:], y[1:])
            .decision_function(X[:5])
        )
    else:  # the leave-one-out models at C=10
        f = np.array(
            [
                LinearClassifier(loss="logistic", C=10.0, tol=1e-13)
                .fit(np.delete(X, i, 0), np.delete(y, i))
                .decision_function(X[i : i + 1])[0]
                for i in range(5)
            ]
        )
    assert np.all(lo <= f + 1e-9) and np.all(f <= hi + 1e-9)


# ---------------------------------------------------------------------------------------------
# keep_data=False: the removed samples' rows must be given, and are checked
# ---------------------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def nodata_pair():
    X, y = _data("linear_squared")
    kept = LinearRegressor(C=2.0, keep_data=True).fit(X[:N_FIT], y[:N_FIT])
    lean = LinearRegressor(C=2.0, keep_data=False).fit(X[:N_FIT], y[:N_FIT])
    return kept, lean, X, y


def test_keep_data_false_remove_needs_rows(nodata_pair):
    kept, lean, X, y = nodata_pair
    Xq = queries("linear_squared")
    s = deltafit.sensitivity(lean)
    s.add(X[N_FIT : N_FIT + 2], y[N_FIT : N_FIT + 2])
    with unchanged(s, Xq):
        with pytest.raises(ValueError, match="keep_data=False"):
            s.remove([3])
        with pytest.raises(ValueError, match="keep_data=False"):
            s.relabel([3], [y[3] + 1.0])
        # wrong rows: another sample's row, a perturbed row, the right row with a wrong target
        with pytest.raises(ValueError, match="keeps no targets"):
            s.remove([3], X=X[3:4])  # a regressor's target comes with its row
        with pytest.raises(ValueError, match="keeps no targets"):
            s.relabel([3], [y[3] + 1.0], X=X[3:4])
        with pytest.raises(ValueError, match="not sample id 3"):
            s.remove([3], X=X[4:5], y=y[4:5])
        Xp = X[3:4].copy()
        Xp[0, 0] += 1e-9
        with pytest.raises(ValueError, match="not sample id 3"):
            s.remove([3], X=Xp, y=y[3:4])
        with pytest.raises(ValueError, match="not sample id 3"):
            s.remove([3], X=X[3:4], y=y[3:4] + 1.0)
        with pytest.raises(ValueError, match="1 ids but 2 rows"):
            s.remove([3], X=X[3:5], y=y[3:5])
        with pytest.raises(ValueError, match="features"):
            s.remove([3], X=X[3:4, :-1], y=y[3:4])
        with pytest.raises(ValueError, match="NaN or infinity"):
            s.remove([3], X=np.full_like(X[3:4], np.nan), y=y[3:4])
        with pytest.raises(ValueError, match="not a training sample"):
            s.remove(X=X[300:301], y=y[300:301])
        with pytest.raises(ValueError, match="remove needs ids"):
            s.remove(X=X[3:4])
    # the keep_data=True model refuses rows: it removes by id
    with pytest.raises(ValueError, match="by id"):
        deltafit.sensitivity(kept).remove([3], X=X[3:4])
    with pytest.raises(ValueError, match="by id"):
        deltafit.sensitivity(kept).remove(X=X[3:4], y=y[3:4])


def test_keep_data_false_matches_keep_data_true(nodata_pair):
    kept, lean, X, y = nodata_pair
    Xq = queries("linear_squared")
    a, b, c = deltafit.sensitivity(kept), deltafit.sensitivity(lean), deltafit.sensitivity(lean)
    a.remove([3, 17])
    b.remove([3, 17], X=X[[3, 17]], y=y[[3, 17]])
    c.remove(X=X[[17, 3]], y=y[[17, 3]])  # found by value
    for s in (a, b, c):
        s.add(X[N_FIT : N_FIT + 3], y[N_FIT : N_FIT + 3])
    a.relabel([5], [y[5] + 1.0])
    b.relabel([5], [y[5] + 1.0], X=X[5:6], y_old=y[5:6])
    c.relabel([5], [y[5] + 1.0], X=X[5:6], y_old=y[5:6])
    ref = snapshot(a, Xq)
    for s in (b, c):
        got = snapshot(s, Xq)
        assert got[3:] == ref[3:]
        np.testing.assert_allclose(got[0], ref[0], rtol=1e-9, atol=1e-9)
        np.testing.assert_allclose(got[1], ref[1], rtol=1e-9, atol=1e-9)
        assert got[2] == pytest.approx(ref[2], rel=1e-9, abs=1e-12)
    np.testing.assert_allclose(b.coef_bounds()[0], a.coef_bounds()[0], rtol=1e-9, atol=1e-9)
    # the bounds hold for the retrained model
    keep = np.setdiff1d(np.arange(N_FIT), [3, 17])
    y2 = y.copy()
    y2[5] += 1.0
    Xn = np.vstack([X[keep], X[N_FIT : N_FIT + 3]])
    yn = np.r_[y2[keep], y[N_FIT : N_FIT + 3]]
    f = LinearRegressor(C=2.0).fit(Xn, yn).predict(Xq)
    lo, hi = b.decision_bounds(Xq)
    assert np.all(lo <= f + 1e-9) and np.all(f <= hi + 1e-9)
    # loo bounds need the rows
    with pytest.raises(ValueError, match="keep_data=False"):
        loo_bounds(lean)
    with pytest.raises(ValueError, match="keep_data=False"):
        model_gradient_sphere(lean)


# ---------------------------------------------------------------------------------------------
# spheres, gradient balls, CertainSigns
# ---------------------------------------------------------------------------------------------
def _lin(A, B):
    return A @ B.T


def test_ball_intersection_of_different_spaces():
    p3, p4 = PrimalSphere(np.zeros(3), 1.0), PrimalSphere(np.zeros(4), 1.0)
    k3 = KernelSphere(np.ones(2), np.eye(2, 3), 1.0, _lin)
    k4 = KernelSphere(np.ones(2), np.eye(2, 4), 1.0, _lin)
    for a, b in ((p3, p4), (p4, p3), (k3, k4), (p3, k3), (k3, p3)):
        with pytest.raises(ValueError, match="same"):
            BallIntersection(a, b)
        with pytest.raises(ValueError, match="same"):
            a & b
    for a, b in ((p3, "ball"), (None, p3), (p3, np.zeros(3))):
        with pytest.raises(ValueError, match="two Sphere objects"):
            BallIntersection(a, b)
    # scores of the wrong width
    inter = p3 & PrimalSphere(np.ones(3) * 0.1, 1.0)
    with pytest.raises(ValueError, match="columns"):
        inter.score_bounds(np.ones((2, 4)))
    with pytest.raises(ValueError, match="NaN or infinity"):
        inter.score_bounds(np.array([[np.nan, 0.0, 0.0]]))
    with pytest.raises(ValueError, match="columns"):
        (k3 & KernelSphere(np.ones(1), np.eye(1, 3), 1.0, _lin)).decision_bounds(np.ones((2, 4)))


def test_two_ball_bounds_disjoint():
    with pytest.raises(ValueError, match="do not intersect"):
        two_ball_bounds(np.zeros(2), np.zeros(2), np.ones(2), 1.0, 1.0, 2.1)


def test_sphere_constructors():
    with pytest.raises(ValueError):
        PrimalSphere(np.zeros(3), -1.0)
    with pytest.raises(ValueError):
        PrimalSphere(np.zeros(3), np.nan)
    with pytest.raises(ValueError, match="NaN or infinity"):
        PrimalSphere(np.array([0.0, np.inf]), 1.0)
    with pytest.raises(ValueError, match="3 coefficients but 2 points"):
        KernelSphere(np.ones(3), np.eye(2, 3), 1.0, _lin)
    with pytest.raises(ValueError, match="callable"):
        KernelSphere(np.ones(2), np.eye(2, 3), 1.0, "linear")


def test_gradient_sphere_bad_input():
    a, g = np.ones(4), np.ones(4)
    X = np.eye(4, 3)
    with pytest.raises(ValueError, match="shape"):
        gradient_sphere(a, np.ones(5))
    with pytest.raises(ValueError, match="shape"):
        gradient_sphere(np.ones((2, 3)), np.ones(7))
    for bad in (np.nan, np.inf):
        b = g.copy()
        b[2] = bad
        with pytest.raises(ValueError, match="NaN or infinity"):
            gradient_sphere(a, b)
        with pytest.raises(ValueError, match="NaN or infinity"):
            gradient_sphere(b, a, points=X, kernel=_lin)
    with pytest.raises(ValueError, match="4 coefficients but 3 points"):
        gradient_sphere(a, g, points=X[:3], kernel=_lin)
    with pytest.raises(ValueError, match="needs the points"):
        gradient_sphere(a, g, kernel=_lin)
    with pytest.raises(ValueError, match="needs kernel"):
        gradient_sphere(a, g, points=X)
    Xb = X.copy()
    Xb[0, 0] = np.nan
    with pytest.raises(ValueError, match="NaN or infinity"):
        gradient_sphere(a, g, points=Xb, kernel=_lin)


def test_certain_signs_bad_input():
    E = np.ones((3, 4))
    with pytest.raises(ValueError, match="either eta"):
        CertainSigns()
    with pytest.raises(ValueError, match="either eta"):
        CertainSigns(E, cross_kernel=E, sq_norms=np.ones(3))
    with pytest.raises(ValueError, match="sq_norms"):
        CertainSigns(cross_kernel=E)
    with pytest.raises(ValueError, match="sq_norms"):
        CertainSigns(cross_kernel=E, sq_norms=np.ones(2))
    with pytest.raises(ValueError, match="sq_norms"):
        CertainSigns(cross_kernel=E, sq_norms=np.array([1.0, np.nan, 1.0]))
    Eb = E.copy()
    Eb[0, 0] = np.inf
    with pytest.raises(ValueError, match="NaN or infinity"):
        CertainSigns(Eb)
    # scores of the wrong width: the solver passes the error on
    rng = np.random.default_rng(0)
    F, t = rng.normal(size=(20, 5)), np.where(rng.normal(size=20) > 0, 1.0, -1.0)
    with pytest.raises(ValueError, match="4 columns but the solver has 5 coefficients"):
        newton_primal(F, t, get_loss("logistic"), 1.0, callback=CertainSigns(E))


def test_kernel_sphere_mismatched_query_width():
    kfun = lambda A, B: rbf_kernel(A, B, gamma=0.5)  # noqa: E731
    sph = KernelSphere(np.ones(3), np.eye(3), 0.1, kfun)
    with pytest.raises(ValueError, match="columns"):
        sph.decision_bounds(np.ones((2, 4)))
    with pytest.raises(ValueError, match="columns"):
        sph.center_distance(np.ones(2), np.ones((2, 4)))


# ---------------------------------------------------------------------------------------------
# parameters changed after the fit, ids given back by undo, kernels that differ
# ---------------------------------------------------------------------------------------------
def test_set_params_loss_after_fit_uses_the_fitted_loss():
    """The bounds describe the stored solution: after set_params(loss=...) without a refit
    they still use the loss that solution minimises (and hold for the retrain with it)."""
    X, y = _data("linear_logistic")
    X, y = X[:80], y[:80]
    model = LinearClassifier(loss="logistic", C=1.0).fit(X, y)
    reference = deltafit.sensitivity(copy.deepcopy(model)).remove([0])
    model.set_params(loss="squared_hinge")
    s = deltafit.sensitivity(model).remove([0])
    assert s.radius == reference.radius > 1e-6
    lo, hi = s.decision_bounds(X[:10])
    f = LinearClassifier(loss="logistic", C=1.0).fit(X[1:], y[1:]).decision_function(X[:10])
    assert np.all(lo <= f + 1e-9) and np.all(f <= hi + 1e-9)


@pytest.mark.parametrize("kind", ["linear_logistic", "kernel_squared"])
def test_undo_of_an_addition_gives_its_ids_back(kind):
    X, y = _data(kind)
    model = _fitted_cached(kind)
    s = deltafit.sensitivity(model)
    first = s.add(X[N_FIT : N_FIT + 3], y[N_FIT : N_FIT + 3])
    s.remove([1])
    s.undo()
    s.undo()
    assert s.n_added == 0 and s.n_removed == 0
    again = s.add(X[N_FIT + 3 : N_FIT + 5], y[N_FIT + 3 : N_FIT + 5])
    # the ids a real model.add would give
    assert (
        again.tolist()
        == first[:2].tolist()
        == copy.deepcopy(model).add(X[N_FIT + 3 : N_FIT + 5], y[N_FIT + 3 : N_FIT + 5]).tolist()
    )
    with pytest.raises(ValueError, match="unknown sample ids"):
        s.remove([int(first[2])])


def test_kernel_balls_with_different_kernels_do_not_intersect():
    X, y = _data("kernel_squared_hinge")
    m1 = KernelClassifier(loss="squared_hinge", gamma=0.1).fit(X[:60], y[:60])
    m2 = KernelClassifier(loss="squared_hinge", gamma=0.2).fit(X[:60], y[:60])
    a = deltafit.sensitivity(m1).remove([0]).sphere()
    b = deltafit.sensitivity(m2).remove([0]).sphere()
    with pytest.raises(ValueError, match="different kernels"):
        a & b
    same = deltafit.sensitivity(copy.deepcopy(m1)).remove([1]).sphere()
    assert (a & same).gap >= 0  # same kernel, same parameters: fine
