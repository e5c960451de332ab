"""Every entry that takes rows checks their column names and width as ``predict`` does.

A model fitted on a DataFrame refuses, in ``predict``, a frame whose columns are renamed or
reordered (scikit-learn's ``validate_data(reset=False)``).  The updates (``add``,
``partial_fit``, ``update``, ``remove`` / ``relabel`` / ``reweight`` with ``X=``) and the
sensitivity what-ifs must refuse the same frames with the same message -- before this was
fixed they accepted them and trained on permuted features -- and a refusal must leave the
model exactly as it was.  An array given to a frame-fitted model (or a frame to an
array-fitted one) warns as ``predict`` warns, and is taken.
"""

from __future__ import annotations

import warnings

import numpy as np
import pytest
from sklearn.datasets import load_breast_cancer, load_diabetes, load_wine
from sklearn.preprocessing import StandardScaler

import deltafit
from deltafit import (
    KernelClassifier,
    KernelRegressor,
    LinearClassifier,
    LinearRegressor,
    make_pipeline,
    sensitivity,
)

pd = pytest.importorskip("pandas")

# predict's own warning for an array given to a frame-fitted model (the narrow-array cases and
# the references): expected; the tests that are about it catch it with pytest.warns
pytestmark = pytest.mark.filterwarnings("ignore:X does not have valid feature names:UserWarning")


def _frame(loader, n):
    X, y = loader(return_X_y=True, as_frame=True)
    X = X.iloc[:n].copy()
    X[:] = StandardScaler().fit_transform(X)
    return X.reset_index(drop=True), y.iloc[:n].to_numpy()


@pytest.fixture(scope="module")
def cancer():
    return _frame(load_breast_cancer, 120)


@pytest.fixture(scope="module")
def wine():
    return _frame(load_wine, 178)


@pytest.fixture(scope="module")
def diabetes():
    X, y = _frame(load_diabetes, 120)
    return X, (y - y.mean()) / y.std()


# (name, factory, data fixture, keep_data): the four estimators, keep_data True and False
CASES = [
    ("linear-clf-keep", lambda: LinearClassifier(loss="logistic", C=0.5), "cancer", True),
    (
        "linear-clf-nokeep",
        lambda: LinearClassifier(loss="squared", C=0.5, keep_data=False),
        "cancer",
        False,
    ),
    ("linear-clf-3class", lambda: LinearClassifier(loss="logistic", C=0.5), "wine", True),
    ("linear-reg-keep", lambda: LinearRegressor(C=0.5), "diabetes", True),
    ("linear-reg-nokeep", lambda: LinearRegressor(C=0.5, keep_data=False), "diabetes", False),
    ("kernel-clf", lambda: KernelClassifier(loss="logistic", C=0.5), "cancer", True),
    ("kernel-reg", lambda: KernelRegressor(C=0.5), "diabetes", True),
]


@pytest.fixture(params=CASES, ids=[c[0] for c in CASES])
def fitted(request):
    """(model, X, y, keep): the model fitted on the first 100 rows of a frame."""
    _, make, data, keep = request.param
    X, y = request.getfixturevalue(data)
    model = make().fit(X.iloc[:100], y[:100])
    return model, X, y, keep


def _bad_frames(X):
    """Frames that predict refuses: reordered, one column renamed, one column dropped."""
    reordered = X[X.columns[::-1]]
    renamed = X.rename(columns={X.columns[1]: "not_a_feature"})
    narrow = X[X.columns[:-1]]
    return {
        "reordered": reordered,
        "renamed": renamed,
        "narrow": narrow,
        "narrow-array": narrow.to_numpy(),
    }


BAD = ["reordered", "renamed", "narrow", "narrow-array"]


def _snapshot(model, X):
    """Everything a refused update must leave as it was."""
    return (
        model.sample_ids_.copy(),
        model.n_samples_,
        model.sample_weight_.copy(),
        np.asarray(model.predict(X)).copy(),
        np.asarray(
            model.decision_function(X) if hasattr(model, "decision_function") else model.predict(X)
        ).copy(),
        model._state.solution.copy(),
    )


def _assert_same(a, b):
    for u, v in zip(a, b):
        np.testing.assert_array_equal(u, v)


def _predict_error(model, Xbad):
    with pytest.raises(ValueError) as exc:
        model.predict(Xbad)
    return str(exc.value)


def _rows_of(Xbad, idx):
    return Xbad.iloc[idx] if hasattr(Xbad, "iloc") else Xbad[idx]


def _entries(model, keep):
    """(name, call(Xbad, y, ids)) for every update entry that takes X."""
    out = [
        ("add", lambda Xb, y, ids: model.add(_rows_of(Xb, ids), y[ids])),
        ("partial_fit", lambda Xb, y, ids: model.partial_fit(_rows_of(Xb, ids), y[ids])),
        ("update-add", lambda Xb, y, ids: model.update(X_add=_rows_of(Xb, ids), y_add=y[ids])),
        ("remove-ids-X", lambda Xb, y, ids: model.remove(ids, X=_rows_of(Xb, ids), y=y[ids])),
        (
            "relabel-X",
            lambda Xb, y, ids: model.relabel(ids, y[ids[::-1]], X=_rows_of(Xb, ids), y_old=y[ids]),
        ),
        ("reweight-X", lambda Xb, y, ids: model.reweight(ids, 2.0, X=_rows_of(Xb, ids), y=y[ids])),
        (
            "update-remove",
            lambda Xb, y, ids: model.update(
                remove_ids=ids, X_remove=_rows_of(Xb, ids), y_remove=y[ids]
            ),
        ),
    ]
    if not keep:
        out.append(
            ("remove-by-value", lambda Xb, y, ids: model.remove(X=_rows_of(Xb, ids), y=y[ids]))
        )
    return out


ENTRY_NAMES = [
    "add",
    "partial_fit",
    "update-add",
    "remove-ids-X",
    "relabel-X",
    "reweight-X",
    "update-remove",
    "remove-by-value",
]


@pytest.mark.parametrize("bad", BAD)
@pytest.mark.parametrize("entry", ENTRY_NAMES)
def test_update_refuses_what_predict_refuses(fitted, entry, bad):
    model, X, y, keep = fitted
    entries = dict(_entries(model, keep))
    if entry not in entries:
        pytest.skip("remove by value is for keep_data=False models")
    Xbad = _bad_frames(X)[bad]
    message = _predict_error(model, Xbad)
    # model samples for remove / relabel / reweight, new rows for add
    ids = (
        np.array([3, 8, 20])
        if "add" not in entry and entry != "partial_fit"
        else np.array([101, 105, 110])
    )
    before = _snapshot(model, X)
    with pytest.raises(ValueError) as exc:
        entries[entry](Xbad, y, ids)
    assert str(exc.value) == message
    _assert_same(before, _snapshot(model, X))


@pytest.mark.parametrize(
    "entry", ["add", "partial_fit", "update-add", "remove-ids-X", "relabel-X", "reweight-X"]
)
def test_array_given_to_frame_model_warns_as_predict_and_is_taken(fitted, entry):
    """predict warns for an array given to a frame-fitted model and takes it: so do updates
    (the array's columns are taken in the fit's order), and the result is the update made
    with the frame."""
    model, X, y, keep = fitted
    reference = type(model)(**model.get_params()).fit(X.iloc[:100], y[:100])
    with pytest.warns(UserWarning, match="X does not have valid feature names"):
        model.predict(X.to_numpy()[:3])
    ids = (
        np.array([3, 8, 20])
        if "add" not in entry and entry != "partial_fit"
        else np.array([101, 105, 110])
    )
    with pytest.warns(UserWarning, match="X does not have valid feature names"):
        dict(_entries(model, keep))[entry](X.to_numpy(), y, ids)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # the frame itself is taken silently
        dict(_entries(reference, keep))[entry](X, y, ids)
    np.testing.assert_array_equal(model.sample_ids_, reference.sample_ids_)
    np.testing.assert_allclose(model.predict(X), reference.predict(X), rtol=1e-9, atol=1e-9)


def test_frame_given_to_array_model_warns_as_predict(cancer):
    X, y = cancer
    model = LinearClassifier(loss="logistic", C=0.5).fit(X.to_numpy()[:100], y[:100])
    with pytest.warns(UserWarning, match="X has feature names"):
        model.predict(X.iloc[:3])
    with pytest.warns(UserWarning, match="X has feature names"):
        model.add(X.iloc[100:103], y[100:103])
    assert model.n_samples_ == 103


def test_renamed_but_same_names_in_order_is_taken(cancer):
    """The check compares names, not objects: an equal frame rebuilt is taken silently."""
    X, y = cancer
    model = LinearClassifier(loss="logistic", C=0.5).fit(X.iloc[:100], y[:100])
    rebuilt = pd.DataFrame(X.to_numpy()[100:110], columns=list(X.columns))
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        ids = model.add(rebuilt, y[100:110])
    assert ids.tolist() == list(range(100, 110))


def test_permuted_frame_would_train_on_permuted_features(wine):
    """The harm refused: on wine, adding the last 28 rows with the columns reversed trains on
    permuted features -- the model it would give is off from the refit by more than 1 in the
    decisions.  The update refuses the frame (as predict does); in the right order it equals
    the refit."""
    X, y = wine
    model = LinearClassifier(loss="logistic", C=0.1).fit(X.iloc[:150], y[:150])
    reversed_cols = X[X.columns[::-1]]
    refit = LinearClassifier(loss="logistic", C=0.1).fit(X, y)
    # what the accepted update trained on: the reversed values under the fit's column order
    permuted = pd.concat(
        [X.iloc[:150], pd.DataFrame(reversed_cols.to_numpy()[150:], columns=X.columns)]
    )
    wrong = LinearClassifier(loss="logistic", C=0.1).fit(permuted, y)
    assert np.max(np.abs(wrong.decision_function(X) - refit.decision_function(X))) > 1.0
    with pytest.raises(ValueError, match="Feature names must be in the same order"):
        model.add(reversed_cols.iloc[150:], y[150:])
    assert model.n_samples_ == 150
    model.add(X.iloc[150:], y[150:])
    np.testing.assert_allclose(model.decision_function(X), refit.decision_function(X), atol=1e-6)


# ------------------------------------------------------------------------- sensitivity
SENS_CASES = [
    c
    for c in CASES
    if c[0]
    in (
        "linear-clf-keep",
        "linear-clf-nokeep",
        "linear-clf-3class",
        "linear-reg-nokeep",
        "kernel-reg",
    )
]


@pytest.mark.parametrize("case", SENS_CASES, ids=[c[0] for c in SENS_CASES])
@pytest.mark.parametrize("bad", BAD)
@pytest.mark.parametrize("what", ["add", "remove", "relabel", "reweight", "decision_bounds"])
def test_sensitivity_what_ifs_check_names_as_predict(request, case, bad, what):
    _, make, data, keep = case
    X, y = request.getfixturevalue(data)
    model = make().fit(X.iloc[:100], y[:100])
    s = sensitivity(model)
    Xbad = _bad_frames(X)[bad]
    message = _predict_error(model, Xbad)
    ids = np.array([3, 8, 20])
    calls = {
        "add": lambda: s.add(_rows_of(Xbad, np.array([101, 102])), y[[101, 102]]),
        "remove": lambda: (
            s.remove(ids, X=_rows_of(Xbad, ids))
            if not keep
            else s.remove(X=_rows_of(Xbad, ids), y=y[ids])
        ),
        "relabel": lambda: s.relabel(ids, y[ids[::-1]], X=_rows_of(Xbad, ids), y_old=y[ids]),
        "reweight": lambda: s.reweight(ids, [2.0, 0.5, 1.5], X=_rows_of(Xbad, ids), y=y[ids]),
        "decision_bounds": lambda: s.decision_bounds(Xbad),
    }
    lo0, hi0 = s.decision_bounds(X)
    with pytest.raises(ValueError) as exc:
        calls[what]()
    assert str(exc.value) == message
    assert (s.n_removed, s.n_added, s.n_relabeled, s.n_reweighted) == (0, 0, 0, 0)
    lo1, hi1 = s.decision_bounds(X)
    np.testing.assert_array_equal(lo0, lo1)
    np.testing.assert_array_equal(hi0, hi1)


def test_sensitivity_frame_rows_of_model_samples_are_taken_silently(cancer):
    """A keep_data=False model's what-ifs take the samples' rows as a frame (names kept on
    their way to the model's digest check): no warning, the bounds of a fresh object fed
    arrays."""
    X, y = cancer
    model = LinearClassifier(loss="squared", C=0.5, keep_data=False).fit(X.iloc[:100], y[:100])
    ids = np.array([3, 8, 20])
    s = sensitivity(model)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        hyp = s.add(X.iloc[100:102], y[100:102])
        s.relabel(np.r_[ids, hyp], 1 - y[np.r_[ids, 100, 101]], X=X.iloc[np.r_[ids, 100, 101]])
        lo, hi = s.decision_bounds(X)
    t = sensitivity(model)
    with pytest.warns(UserWarning, match="valid feature names"):
        hyp = t.add(X.to_numpy()[100:102], y[100:102])
    with pytest.warns(UserWarning, match="valid feature names"):
        t.relabel(
            np.r_[ids, hyp], 1 - y[np.r_[ids, 100, 101]], X=X.to_numpy()[np.r_[ids, 100, 101]]
        )
    lo2, hi2 = t.decision_bounds(X)
    np.testing.assert_array_equal(lo, lo2)
    np.testing.assert_array_equal(hi, hi2)


# ---------------------------------------------------------------------------- pipeline
@pytest.mark.parametrize("first", ["scaler", "passthrough"])
@pytest.mark.parametrize("bad", BAD)
def test_pipeline_updates_check_raw_names(cancer, first, bad):
    X, y = cancer
    final = LinearClassifier(loss="logistic", C=0.5, keep_data=True)
    pipe = (
        make_pipeline(StandardScaler(), final)
        if first == "scaler"
        else deltafit.UpdatablePipeline([("raw", "passthrough"), ("model", final)])
    )
    pipe.fit(X.iloc[:100], y[:100])
    Xbad = _bad_frames(X)[bad]
    with pytest.raises(ValueError) as exc:
        pipe.predict(Xbad)
    message = str(exc.value)
    ids = np.array([3, 8, 20])
    before = (pipe.sample_ids_.copy(), pipe.decision_function(X).copy())
    s = sensitivity(pipe)
    for call in (
        lambda: pipe.add(_rows_of(Xbad, [101, 102]), y[[101, 102]]),
        lambda: pipe.partial_fit(_rows_of(Xbad, [101, 102]), y[[101, 102]]),
        lambda: pipe.update(X_add=_rows_of(Xbad, [101, 102]), y_add=y[[101, 102]]),
        lambda: pipe.relabel(ids, 1 - y[ids], X=_rows_of(Xbad, ids)),
        lambda: pipe.reweight(ids, 2.0, X=_rows_of(Xbad, ids)),
        lambda: s.add(_rows_of(Xbad, [101, 102]), y[[101, 102]]),
        lambda: s.relabel(ids, 1 - y[ids], X=_rows_of(Xbad, ids)),
        lambda: s.reweight(ids, [2.0, 0.5, 1.5], X=_rows_of(Xbad, ids)),
        lambda: s.decision_bounds(Xbad),
    ):
        with pytest.raises(ValueError) as exc:
            call()
        assert str(exc.value) == message
    np.testing.assert_array_equal(before[0], pipe.sample_ids_)
    np.testing.assert_array_equal(before[1], pipe.decision_function(X))
    assert (s.n_added, s.n_relabeled, s.n_reweighted) == (0, 0, 0)


# -------------------------------------------------------------------------------- dask
@pytest.fixture
def threads():
    dask = pytest.importorskip("dask")
    pytest.importorskip("dask.dataframe")
    with dask.config.set(scheduler="threads"):
        yield


def test_dask_frames_are_checked_by_name(threads, diabetes):
    """A dask DataFrame's columns are its names: a model fitted on one records them
    (``feature_names_in_``, as a pandas fit does) and refuses, in predict and in updates, a
    pandas or dask frame with its columns reordered; a model fitted on pandas refuses a
    reordered dask frame in an update."""
    import dask.dataframe as dd

    X, y = diabetes
    good = dd.from_pandas(X.iloc[:100], npartitions=2)
    rev = X[X.columns[::-1]]
    model = LinearRegressor(C=0.5, keep_data=False).fit(good, dd.from_array(y[:100], chunksize=50))
    np.testing.assert_array_equal(model.feature_names_in_, X.columns.to_numpy(dtype=object))
    ref = LinearRegressor(C=0.5, keep_data=False).fit(X.iloc[:100], y[:100])
    np.testing.assert_allclose(model.predict(X), ref.predict(X), atol=1e-9)
    message = _predict_error(ref, rev)
    assert _predict_error(model, rev) == message
    with pytest.raises(ValueError) as exc:  # lazy decisions of a reordered dask frame
        model.predict(dd.from_pandas(rev, npartitions=2))
    assert str(exc.value) == message
    for m in (model, ref):
        before = (m.sample_ids_.copy(), m.predict(X).copy())
        with pytest.raises(ValueError) as exc:
            m.add(dd.from_pandas(rev.iloc[100:110], npartitions=2), y[100:110])
        assert str(exc.value) == message
        with pytest.raises(ValueError) as exc:
            m.remove([1, 2], X=dd.from_pandas(rev.iloc[[1, 2]], npartitions=1))
        assert str(exc.value) == message
        np.testing.assert_array_equal(before[0], m.sample_ids_)
        np.testing.assert_array_equal(before[1], m.predict(X))
    # the what-ifs check a dask frame's columns as the model does
    s = sensitivity(ref)
    with pytest.raises(ValueError) as exc:
        s.decision_bounds(dd.from_pandas(rev, npartitions=2))
    assert str(exc.value) == message
    lo, hi = (np.asarray(a) for a in s.decision_bounds(dd.from_pandas(X, npartitions=2)))
    lo0, hi0 = s.decision_bounds(X)
    np.testing.assert_array_equal(lo, lo0)
    np.testing.assert_array_equal(hi, hi0)
    # the right order is taken from a dask frame, and equals the pandas update
    model.add(dd.from_pandas(X.iloc[100:110], npartitions=2), y[100:110])
    ref.add(X.iloc[100:110], y[100:110])
    np.testing.assert_allclose(model.predict(X), ref.predict(X), atol=1e-9)
