"""Bad input raises ValueError naming the problem, and leaves the model exactly as it was.

ARCHITECTURE.md, "Principles" ("no silent garbage") and the transaction contract of
:mod:`deltafit.models._base`: every update validates all of its input first, does the numerical
work next and changes the ledger last, so a ValueError anywhere leaves the model bitwise
unchanged, and the model keeps updating exactly afterwards.
"""

from __future__ import annotations

import numpy as np
import pytest
from sklearn.base import clone

from deltafit import KernelClassifier, KernelRegressor, LinearClassifier, LinearRegressor
from deltafit._states import _squared_dual, _squared_primal
from deltafit.solvers import _chord as _chord_newton
from deltafit.solvers import _kernel_chord

N_FIT = 120


# ---------------------------------------------------------------------------
# data and fitted models
# ---------------------------------------------------------------------------
@pytest.fixture(scope="module")
def cancer(breast_cancer):
    """Breast cancer scaled to [-1, 1] (``deltafit.datasets``); ``diabetes`` (standardised
    features and target) is the session's."""
    return breast_cancer


MODELS = {
    "LinearClassifier": lambda: LinearClassifier(C=1.0),
    "LinearRegressor": lambda: LinearRegressor(C=1.0),
    "KernelClassifier": lambda: KernelClassifier(C=1.0, gamma=0.05),
    "KernelRegressor": lambda: KernelRegressor(C=1.0, gamma=0.1),
}
CLASSIFIERS = ["LinearClassifier", "KernelClassifier"]
ALL = list(MODELS)


class Data:
    """Training part, a pool of new samples and a fixed query set."""

    def __init__(self, X, y):
        self.X, self.y = X[:N_FIT], y[:N_FIT]
        self.Xn, self.yn = X[N_FIT : N_FIT + 40], y[N_FIT : N_FIT + 40]
        self.Xq = X[::7]


def _data_for(name, cancer, diabetes):
    return Data(*(cancer if "Classifier" in name else diabetes))


def _data_name(name):
    """The data set (``conftest.DATASETS``) of model ``name``; it is fitted on the first N_FIT
    rows, ``Data.X``."""
    return "breast_cancer" if "Classifier" in name else "diabetes"


@pytest.fixture
def fitted(fitted_models):
    """``fitted(name)``: a model of its own, ``MODELS[name]`` fitted on ``Data.X`` (the fit is
    done once per session)."""
    return lambda name: fitted_models(MODELS[name](), _data_name(name), N_FIT)


# ---------------------------------------------------------------------------
# snapshots
# ---------------------------------------------------------------------------
def snapshot(m, Xq):
    s = {
        "predict": m.predict(Xq),
        "sample_ids": m.sample_ids_,
        "n_samples": np.array(m.n_samples_),
        "n_features_in": np.array(m.n_features_in_),
    }
    if hasattr(m, "decision_function"):
        s["decision"] = m.decision_function(Xq)
        s["classes"] = m.classes_
    if hasattr(m, "dual_coef_"):
        s["dual_coef"] = m.dual_coef_
        s["intercept"] = np.asarray(m.intercept_)
        s["X_fit"] = m.X_fit_
    else:
        s["coef"] = m.coef_
        s["intercept"] = np.asarray(m.intercept_)
    led = m._ledger
    s["next_id"] = np.array(led.next_id)
    slots = led.active_slots()
    s["ledger_y"] = led.y[slots]
    return s


def assert_unchanged(before, after):
    assert before.keys() == after.keys()
    for key in before:
        a, b = before[key], after[key]
        if np.array_equal(a, b):
            continue
        detail = ""
        if a.shape == b.shape and a.dtype.kind == "f":
            detail = f" (max abs change {np.max(np.abs(a - b)):.3e})"
        elif a.shape != b.shape:
            detail = f" (shape {a.shape} -> {b.shape})"
        raise AssertionError(f"{key} changed by a failed call{detail}")


def _rel_err(a, b):
    return np.max(np.abs(a - b)) / max(np.max(np.abs(b)), 1e-300)


# ---------------------------------------------------------------------------
# the bad calls
# ---------------------------------------------------------------------------
def _nan(A, value=np.nan):
    A = np.array(A, dtype=float, copy=True)
    A[1, 2] = value
    return A


def _other_class_ids(m, label):
    """Ids of the training samples whose label is ``label`` (classifiers)."""
    led = m._ledger
    slots = led.active_slots()
    t = np.where(np.asarray(label) == m.classes_[1], 1.0, -1.0)
    return led.ids[slots][led.y[slots] == t]


CASES = {
    # ----- fit
    "fit_nan": (ALL, lambda m, D: m.fit(_nan(D.X), D.y), "NaN"),
    "fit_inf": (ALL, lambda m, D: m.fit(_nan(D.X, np.inf), D.y), "infinity"),
    "fit_single_class": (
        CLASSIFIERS,
        lambda m, D: m.fit(D.X[:20], np.zeros(20, dtype=int)),
        "one class|two classes|single class",
    ),
    "fit_continuous_labels": (
        CLASSIFIERS,
        lambda m, D: m.fit(D.X, np.linspace(0, 1, D.X.shape[0])),
        "Unknown label type|continuous",
    ),
    # ----- add
    "add_nan": (ALL, lambda m, D: m.add(_nan(D.Xn), D.yn), "NaN"),
    "add_inf": (ALL, lambda m, D: m.add(_nan(D.Xn, -np.inf), D.yn), "infinity"),
    "add_wrong_features": (ALL, lambda m, D: m.add(D.Xn[:, :-1], D.yn), "features"),
    "add_empty": (ALL, lambda m, D: m.add(D.Xn[:0], D.yn[:0]), "empty|0 sample"),
    "add_length_mismatch": (
        ALL,
        lambda m, D: m.add(D.Xn[:5], D.yn[:4]),
        "rows|labels|inconsistent",
    ),
    "add_unknown_label": (
        CLASSIFIERS,
        lambda m, D: m.add(D.Xn[:3], [0, 1, 5]),
        "not among|classes",
    ),
    "add_y_without_X": (ALL, lambda m, D: m.update(y_add=D.yn[:3]), "both X and y"),
    "add_nan_target": (
        ["LinearRegressor", "KernelRegressor"],
        lambda m, D: m.add(D.Xn[:3], [0.0, np.nan, 1.0]),
        "NaN",
    ),
    "add_text_target": (
        ["LinearRegressor", "KernelRegressor"],
        lambda m, D: m.add(D.Xn[:3], ["a", "b", "c"]),
        "numeric",
    ),
    # ----- predict
    "predict_nan": (ALL, lambda m, D: m.predict(_nan(D.Xq)), "NaN"),
    "predict_inf": (ALL, lambda m, D: m.predict(_nan(D.Xq, np.inf)), "infinity"),
    "predict_wrong_features": (ALL, lambda m, D: m.predict(D.Xq[:, :-1]), "features"),
    # ----- remove
    "remove_unknown": (ALL, lambda m, D: m.remove([3, 10_000]), "unknown"),
    "remove_repeated": (ALL, lambda m, D: m.remove([3, 4, 3]), "repeated"),
    "remove_float_ids": (ALL, lambda m, D: m.remove([1.5, 2.0]), "integer"),
    "remove_text_ids": (ALL, lambda m, D: m.remove(["a", "b"]), "integer"),
    "remove_2d_ids": (ALL, lambda m, D: m.remove([[1, 2], [3, 4]]), "1-D"),
    "remove_empty_ids": (ALL, lambda m, D: m.remove([]), "empty"),
    "remove_everything": (ALL, lambda m, D: m.remove(m.sample_ids_), "every sample"),
    "remove_one_class": (
        CLASSIFIERS,
        lambda m, D: m.remove(_other_class_ids(m, m.classes_[0])),
        "single class|one class|two classes",
    ),
    # ----- relabel
    "relabel_unknown": (ALL, lambda m, D: m.relabel([10_000], D.y[:1]), "unknown"),
    "relabel_repeated": (ALL, lambda m, D: m.relabel([5, 5], D.y[:2]), "repeated"),
    "relabel_float_ids": (ALL, lambda m, D: m.relabel([0.5], D.y[:1]), "integer"),
    "relabel_third_class": (
        CLASSIFIERS,
        lambda m, D: m.relabel([0, 1], [2, 2]),
        "not among|classes",
    ),
    "relabel_count_mismatch": (ALL, lambda m, D: m.relabel([0, 1, 2], D.y[:2]), "labels|ids"),
    "relabel_one_class": (
        CLASSIFIERS,
        lambda m, D: m.relabel(
            _other_class_ids(m, m.classes_[0]),
            np.full(_other_class_ids(m, m.classes_[0]).size, m.classes_[1]),
        ),
        "single class|one class|two classes",
    ),
    # ----- mixed
    "update_removed_and_relabelled": (
        ALL,
        lambda m, D: m.update(remove_ids=[3, 4, 5], relabel_ids=[5, 6], y_relabel=D.y[5:7]),
        "both removed and relabelled",
    ),
    "update_nothing": (ALL, lambda m, D: m.update(), "nothing to update"),
    "update_bad_add_with_good_remove": (
        ALL,
        lambda m, D: m.update(X_add=_nan(D.Xn[:4]), y_add=D.yn[:4], remove_ids=[0, 1]),
        "NaN",
    ),
    "update_good_add_with_bad_relabel": (
        ALL,
        lambda m, D: m.update(
            X_add=D.Xn[:4], y_add=D.yn[:4], remove_ids=[0, 1], relabel_ids=[9999], y_relabel=D.y[:1]
        ),
        "unknown",
    ),
    "update_leaves_one_class_after_add": (
        CLASSIFIERS,
        lambda m, D: m.update(
            remove_ids=_other_class_ids(m, m.classes_[0]),
            X_add=D.Xn[:3],
            y_add=np.full(3, m.classes_[1]),
        ),
        "single class|one class|two classes",
    ),
}


def _case_params():
    out = []
    for case, (names, _, _) in CASES.items():
        for name in names:
            out.append(pytest.param(name, case, id=f"{name}-{case}"))
    return out


def _check_updates_still_exact(m, D, name):
    """After a failed call: valid updates (add, then remove, then relabel) each equal a fresh
    fit on the data they leave."""
    f = m.decision_function if hasattr(m, "decision_function") else m.predict
    tol = 1e-8 if m.loss == "squared" else 1e-6
    X_all = np.vstack([D.X, D.Xn[:6]])
    y_all = np.concatenate([D.y, D.yn[:6]])
    held = np.isin(np.arange(N_FIT), m.sample_ids_)  # ids the model holds now
    assert held.sum() == m.n_samples_

    def check(step):
        fresh = clone(m).fit(X_all[held], y_all[held])
        g = fresh.decision_function if hasattr(fresh, "decision_function") else fresh.predict
        err = _rel_err(f(D.Xq), g(D.Xq))
        assert err <= tol, f"after the failed call, {step} is not exact (rel. error {err:.2e})"

    start = m._ledger.next_id
    ids = m.add(D.Xn[:6], D.yn[:6])
    assert ids.tolist() == list(range(start, start + 6))
    held = np.concatenate([held, np.ones(6, dtype=bool)])
    all_ids = np.concatenate([np.arange(N_FIT), ids])
    check("add")
    m.remove([2, int(ids[0])])
    held[[2, N_FIT]] = False
    check("remove")
    if name in CLASSIFIERS:
        new_label = m.classes_[0] if D.y[8] == m.classes_[1] else m.classes_[1]
    else:
        new_label = D.y[8] + 0.5
    m.relabel([8], [new_label])
    y_all[8] = new_label
    check("relabel")
    assert np.array_equal(m.sample_ids_, all_ids[held])


@pytest.mark.parametrize("name,case", _case_params())
def test_bad_call_raises_and_leaves_model_unchanged(name, case, fitted, cancer, diabetes):
    _, action, match = CASES[case]
    D = _data_for(name, cancer, diabetes)
    m = fitted(name)
    before = snapshot(m, D.Xq)
    with pytest.raises(ValueError, match=match):
        action(m, D)
    assert_unchanged(before, snapshot(m, D.Xq))
    _check_updates_still_exact(m, D, name)


@pytest.mark.parametrize("name", ALL)
def test_bad_input_on_unfitted_model(name, cancer, diabetes):
    D = _data_for(name, cancer, diabetes)
    with pytest.raises(ValueError, match="NaN"):
        MODELS[name]().fit(_nan(D.X), D.y)
    with pytest.raises(ValueError, match="infinity"):
        MODELS[name]().fit(_nan(D.X, np.inf), D.y)
    with pytest.raises(ValueError, match="inconsistent|samples"):
        MODELS[name]().fit(D.X[:10], D.y[:9])
    from sklearn.exceptions import NotFittedError

    with pytest.raises(NotFittedError):
        MODELS[name]().add(D.Xn, D.yn)
    with pytest.raises(NotFittedError):
        MODELS[name]().remove([0])


@pytest.mark.parametrize("name", CLASSIFIERS)
def test_failed_refit_with_other_width_leaves_model_unchanged(name, fitted, cancer):
    """A refit that fails validation (one class) must not leave n_features_in_ half-reset."""
    D = _data_for(name, cancer, None)
    m = fitted(name)
    before = snapshot(m, D.Xq)
    with pytest.raises(ValueError, match="one class|two classes"):
        m.fit(D.X[:20, :5], np.zeros(20, dtype=int))
    assert_unchanged(before, snapshot(m, D.Xq))


@pytest.mark.parametrize("name", ALL)
def test_failed_refit_keeps_feature_names(name, cancer, diabetes):
    """A model fitted on a DataFrame keeps feature_names_in_ when a refit on bad data fails."""
    pd = pytest.importorskip("pandas")
    D = _data_for(name, cancer, diabetes)
    cols = [f"f{j}" for j in range(D.X.shape[1])]
    m = MODELS[name]().fit(pd.DataFrame(D.X, columns=cols), D.y)
    Xq = pd.DataFrame(D.Xq, columns=cols)
    before = m.predict(Xq)
    with pytest.raises(ValueError, match="NaN"):
        m.fit(_nan(D.X), D.y)
    assert list(getattr(m, "feature_names_in_", [])) == cols
    np.testing.assert_array_equal(m.predict(Xq), before)


# ---------------------------------------------------------------------------
# invalid parameters, checked at fit
# ---------------------------------------------------------------------------
BAD_PARAMS = [
    (ALL, {"C": 0.0}, "C"),
    (ALL, {"C": -1.0}, "C"),
    (ALL, {"C": np.nan}, "C"),
    (ALL, {"C": np.inf}, "C"),
    (ALL, {"C": "big"}, "C"),
    (ALL, {"C": True}, "C"),  # a boolean is not a number here
    (ALL, {"max_iter": True}, "max_iter"),
    (ALL, {"loss": "hinge_of_doom"}, "loss"),
    (ALL, {"tol": -1e-3}, "tol"),
    (ALL, {"max_iter": 0}, "max_iter"),
    (ALL, {"max_iter": 2.5}, "max_iter"),
    (ALL, {"fit_intercept": "yes"}, "fit_intercept"),
    (ALL, {"intercept_scaling": -1.0}, "intercept_scaling"),
    (ALL, {"callback": 3}, "callback"),
    (["LinearRegressor", "KernelRegressor"], {"loss": "logistic"}, "loss"),
    (["LinearClassifier"], {"keep_data": False, "loss": "logistic"}, "keep_data"),
    (["LinearClassifier"], {"keep_data": False, "loss": "squared_hinge"}, "keep_data"),
    (["LinearClassifier", "LinearRegressor"], {"keep_data": "no"}, "keep_data"),
    (["LinearClassifier", "LinearRegressor"], {"feature_map": "nystroem"}, "feature_map"),
    (["KernelClassifier", "KernelRegressor"], {"kernel": "gaussian-ish"}, "kernel"),
    (["KernelClassifier", "KernelRegressor"], {"kernel": "precomputed"}, "kernel"),
    (["KernelClassifier", "KernelRegressor"], {"gamma": -1.0}, "gamma"),
    (["KernelClassifier", "KernelRegressor"], {"degree": -1}, "degree"),
    (["KernelClassifier", "KernelRegressor"], {"kernel_params": [1, 2]}, "kernel_params"),
    (["KernelClassifier", "KernelRegressor"], {"coef0": np.inf}, "coef0"),
]


def _param_cases():
    out = []
    for names, params, match in BAD_PARAMS:
        for name in names:
            pid = ",".join(f"{k}={v!r}" for k, v in params.items())
            out.append(pytest.param(name, params, match, id=f"{name}-{pid}"))
    return out


@pytest.mark.parametrize("name,params,match", _param_cases())
def test_invalid_params_at_fit(name, params, match, fitted, cancer, diabetes):
    D = _data_for(name, cancer, diabetes)
    with pytest.raises(ValueError, match=match):
        MODELS[name]().set_params(**params).fit(D.X, D.y)
    # on a fitted model: the fit fails and the fitted model is left as it was
    m = fitted(name)
    before = snapshot(m, D.Xq)
    old = {k: m.get_params()[k] for k in params}
    m.set_params(**params)
    with pytest.raises(ValueError, match=match):
        m.fit(D.X, D.y)
    m.set_params(**old)
    assert_unchanged(before, snapshot(m, D.Xq))


@pytest.mark.parametrize("name", ALL)
def test_params_follow_scikit_learn_constraints(name, cancer, diabetes):
    """The parameters are checked by scikit-learn's ``_parameter_constraints``: its
    InvalidParameterError (a ValueError) names the parameter and what it must be."""
    from sklearn.utils._param_validation import InvalidParameterError

    D = _data_for(name, cancer, diabetes)
    assert "C" in type(MODELS[name]())._parameter_constraints
    with pytest.raises(InvalidParameterError, match="The 'C' parameter of .* must be a float"):
        MODELS[name]().set_params(C=-1.0).fit(D.X, D.y)
    # without an intercept the scaling is unused: any value is accepted, as it always was
    MODELS[name]().set_params(fit_intercept=False, intercept_scaling=-1.0).fit(D.X, D.y)


# ---------------------------------------------------------------------------
# keep_data=False: the model stores no rows
# ---------------------------------------------------------------------------
NODATA = {
    "LinearRegressor": lambda: LinearRegressor(C=1.0, keep_data=False),
    "LinearClassifier": lambda: LinearClassifier(C=1.0, keep_data=False),
}


@pytest.fixture
def nodata(fitted_models):
    """``nodata(name)``: a model of its own, ``NODATA[name]`` fitted on ``Data.X``."""
    return lambda name: fitted_models(NODATA[name](), _data_name(name), N_FIT)


@pytest.mark.parametrize("name", list(NODATA))
def test_keep_data_false_stores_no_rows(name, nodata):
    m = nodata(name)
    assert m._ledger.X.size == 0


@pytest.mark.parametrize("name", list(NODATA))
def test_keep_data_false_remove_needs_rows(name, nodata, cancer, diabetes):
    D = _data_for(name, cancer, diabetes)
    m = nodata(name)
    before = snapshot(m, D.Xq)
    with pytest.raises(ValueError, match="keep_data=False"):
        m.remove([3, 4])
    assert_unchanged(before, snapshot(m, D.Xq))
    # the wrong rows: digest mismatch
    with pytest.raises(ValueError, match="not sample id"):
        m.remove([3, 4], X=D.X[[4, 3]], y=D.y[[4, 3]])
    assert_unchanged(before, snapshot(m, D.Xq))
    if name == "LinearRegressor":  # it keeps no targets: they come with the rows
        with pytest.raises(ValueError, match="keeps no targets"):
            m.remove([3, 4], X=D.X[[3, 4]])
        assert_unchanged(before, snapshot(m, D.Xq))
    # the right rows with the wrong labels
    wrong_y = D.y[[3, 4]] + 1 if name == "LinearRegressor" else 1 - D.y[[3, 4]]
    with pytest.raises(ValueError, match="not sample id"):
        m.remove([3, 4], X=D.X[[3, 4]], y=wrong_y)
    assert_unchanged(before, snapshot(m, D.Xq))
    # row count does not match the ids
    with pytest.raises(ValueError, match="rows"):
        m.remove([3, 4], X=D.X[[3]])
    assert_unchanged(before, snapshot(m, D.Xq))
    # by value: rows that are not training samples
    with pytest.raises(ValueError, match="not a training sample"):
        m.remove(X=D.Xn[:2], y=D.yn[:2])
    assert_unchanged(before, snapshot(m, D.Xq))
    # by value without labels
    with pytest.raises(ValueError, match="X and y"):
        m.remove(X=D.X[[3, 4]])
    assert_unchanged(before, snapshot(m, D.Xq))
    # by value with NaN rows
    with pytest.raises(ValueError, match="NaN"):
        m.remove(X=_nan(D.X[:3]), y=D.y[:3])
    assert_unchanged(before, snapshot(m, D.Xq))


@pytest.mark.parametrize("name", list(NODATA))
def test_keep_data_false_remove_by_value_equals_remove_by_id(
    name, nodata, fitted, cancer, diabetes
):
    D = _data_for(name, cancer, diabetes)
    ids = [3, 10, 57]
    a = nodata(name)
    b = nodata(name)
    removed_a = a.remove(X=D.X[ids], y=D.y[ids])
    removed_b = b.remove(ids, X=D.X[ids], y=D.y[ids])
    np.testing.assert_array_equal(np.sort(removed_a), ids)
    np.testing.assert_array_equal(np.sort(removed_b), ids)
    np.testing.assert_array_equal(a.sample_ids_, b.sample_ids_)
    np.testing.assert_allclose(a.predict(D.Xq), b.predict(D.Xq), rtol=1e-12, atol=1e-12)
    # and both equal the keep_data=True model after remove(ids) and a fresh fit
    c = fitted(name)
    c.remove(ids)
    keep = np.setdiff1d(np.arange(N_FIT), ids)
    fresh = MODELS[name]().fit(D.X[keep], D.y[keep])
    f = "decision_function" if name == "LinearClassifier" else "predict"
    for other in (c, fresh):
        assert _rel_err(getattr(a, f)(D.Xq), getattr(other, f)(D.Xq)) <= 1e-8


@pytest.mark.parametrize("name", list(NODATA))
def test_keep_data_false_relabel_needs_rows(name, nodata, cancer, diabetes):
    D = _data_for(name, cancer, diabetes)
    m = nodata(name)
    before = snapshot(m, D.Xq)
    new = D.y[[5]] + 1.0 if name == "LinearRegressor" else 1 - D.y[[5]]
    with pytest.raises(ValueError, match="keep_data=False"):
        m.relabel([5], new)
    assert_unchanged(before, snapshot(m, D.Xq))
    with pytest.raises(ValueError, match="not sample id"):
        m.relabel([5], new, X=D.X[[6]], y_old=D.y[[6]])
    assert_unchanged(before, snapshot(m, D.Xq))
    if name == "LinearRegressor":  # it keeps no targets: the current one comes with the row
        with pytest.raises(ValueError, match="keeps no targets"):
            m.relabel([5], new, X=D.X[[5]])
        assert_unchanged(before, snapshot(m, D.Xq))
    # with the right row (and current target) it works, and equals a fresh fit
    m.relabel([5], new, X=D.X[[5]], y_old=D.y[[5]])
    y2 = D.y.copy().astype(float) if name == "LinearRegressor" else D.y.copy()
    y2[5] = new[0]
    fresh = MODELS[name]().fit(D.X, y2)
    f = "decision_function" if name == "LinearClassifier" else "predict"
    assert _rel_err(getattr(m, f)(D.Xq), getattr(fresh, f)(D.Xq)) <= 1e-8
    # a relabelled sample is later recognised by its new label
    m.remove([5], X=D.X[[5]], y=new)
    assert 5 not in m.sample_ids_


# ---------------------------------------------------------------------------
# numerical failures in the middle of an update (mocked)
# ---------------------------------------------------------------------------
class FailOnCall:
    """Wrap ``module.name``: pass through, except raise ValueError on call number ``n``."""

    def __init__(self, monkeypatch, module, name, n):
        self.orig = getattr(module, name)
        self.n = n
        self.calls = 0
        monkeypatch.setattr(module, name, self)

    def __call__(self, *args, **kwargs):
        self.calls += 1
        if self.calls == self.n:
            raise ValueError("mocked numerical failure")
        return self.orig(*args, **kwargs)


# (model factory, module, function, which call fails, update)
def _small_update(m, D):
    return m.update(
        X_add=D.Xn[:3],
        y_add=D.yn[:3],
        remove_ids=[0, 1],
        relabel_ids=[4],
        y_relabel=[
            D.y[9]
            if "Regressor" in type(m).__name__
            else (m.classes_[0] if D.y[4] == m.classes_[1] else m.classes_[1])
        ],
    )


def _large_add(m, D):  # more than max_rank rows: the refactorisation path
    return m.add(np.vstack([D.Xn] * 2), np.concatenate([D.yn] * 2))


def _remove_then_add(m, D):
    return m.update(X_add=D.Xn[:2], y_add=D.yn[:2], remove_ids=[0, 1, 2])


FAILURES = [
    # primal squared (closed-form Woodbury and refactorisation)
    ("LinearClassifier", _squared_primal, "_woodbury_core", 1, _small_update),
    ("LinearRegressor", _squared_primal, "_woodbury_core", 1, _small_update),
    ("LinearRegressor", _squared_primal, "_cholesky", 1, _large_add),
    # dual squared: removal succeeds, then the addition's Schur complement fails
    ("KernelRegressor", _squared_dual, "_spd_core", 1, _small_update),
    ("KernelRegressor", _squared_dual, "_spd_core", 2, _remove_then_add),
    ("KernelClassifier", _squared_dual, "_spd_core", 2, _remove_then_add),
    ("KernelRegressor", _squared_dual, "_spd_core", 1, _large_add),
    # warm re-solves: the linear ones fail in a factorisation of the chord matrix, the kernel
    # ones in the second chord step's solve with the stored factor or in a fresh factor
    ("LinearClassifier-logistic", _chord_newton, "_cholesky", 1, _small_update),
    ("LinearClassifier-squared_hinge", _chord_newton, "_cholesky", 1, _small_update),
    ("LinearClassifier-logistic", _chord_newton, "_cholesky", 1, _large_add),
    ("KernelClassifier-logistic", _kernel_chord, "_potrs", 2, _small_update),
    ("KernelClassifier-squared_hinge", _kernel_chord, "_potrs", 1, _large_add),
]


def _make(spec):
    name, _, loss = spec.partition("-")
    m = MODELS[name]()
    if loss:
        m.set_params(loss=loss)
    return name, m


@pytest.mark.parametrize(
    "spec,module,func,n,update",
    FAILURES,
    ids=[f"{s}-{f}#{n}-{u.__name__}" for s, _, f, n, u in FAILURES],
)
def test_numerical_failure_mid_update_leaves_model_unchanged(
    spec, module, func, n, update, monkeypatch, cancer, diabetes
):
    name, m = _make(spec)
    D = _data_for(name, cancer, diabetes)
    m.fit(D.X, D.y)
    before = snapshot(m, D.Xq)
    with monkeypatch.context() as mp:
        fail = FailOnCall(mp, module, func, n)
        with pytest.raises(ValueError, match="mocked numerical failure"):
            update(m, D)
        assert fail.calls == n
    assert_unchanged(before, snapshot(m, D.Xq))
    _check_updates_still_exact(m, D, name)


@pytest.mark.parametrize("name", ["LinearRegressor", "KernelRegressor", "LinearClassifier"])
def test_numerical_failure_when_corrections_are_pending(name, monkeypatch, cancer, diabetes):
    """A failure after many small exact updates (pending low-rank corrections, a fold due)."""
    D = _data_for(name, cancer, diabetes)
    m = MODELS[name]().fit(D.X, D.y)
    m.add(D.Xn[30:40], D.yn[30:40])
    for i in range(20):
        m.add(D.Xn[i : i + 1], D.yn[i : i + 1])
    # single removals add one pending correction each: stop one short of a fold
    for i in range(20, N_FIT):
        if m._state.inv.rank == m._max_rank - 1:
            break
        m.remove([i])
    assert m._state.inv.rank == m._max_rank - 1
    before = snapshot(m, D.Xq)
    with monkeypatch.context() as mp:
        # the dual state's cores are SPD (Cholesky); the primal's may be indefinite (eigh)
        if name.startswith("Kernel"):
            module, core = _squared_dual, "_spd_core"
        else:
            module, core = _squared_primal, "_woodbury_core"
        FailOnCall(mp, module, core, 1)
        with pytest.raises(ValueError, match="mocked numerical failure"):
            m.update(X_add=D.Xn[:2], y_add=D.yn[:2], remove_ids=[10, 11])
    assert_unchanged(before, snapshot(m, D.Xq))
