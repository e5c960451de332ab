"""Saving and loading models (``model.save`` / ``deltafit.load``): npz + JSON, no pickle.

A loaded model predicts bitwise like the saved one, keeps its ids and parameters, and keeps
updating exactly (equal to the original given the same updates, and to a fresh fit).  Bad files
raise ValueError with a clear message.
"""

from __future__ import annotations

import json
import warnings
import zipfile
from pathlib import Path

import numpy as np
import pytest
from sklearn.base import BaseEstimator, clone
from sklearn.datasets import load_diabetes
from sklearn.kernel_approximation import Nystroem, RBFSampler
from sklearn.preprocessing import StandardScaler

import deltafit
from deltafit import KernelClassifier, KernelRegressor, LinearClassifier, LinearRegressor
from deltafit.datasets import load_breast_cancer

N_FIT = 100


# ---------------------------------------------------------------------------
# data
# ---------------------------------------------------------------------------
@pytest.fixture(scope="module")
def cancer():
    return load_breast_cancer()


@pytest.fixture(scope="module")
def diabetes():
    X, y = load_diabetes(return_X_y=True)
    X = StandardScaler().fit_transform(X)
    return X, (y - y.mean()) / y.std()


# id, factory, data ("clf" / "reg"), labels ("int" / "str"), input ("array" / "frame")
COMBOS = [
    ("linear-squared", lambda: LinearClassifier(C=1.0), "clf", "int", "array"),
    (
        "linear-squared-nodata",
        lambda: LinearClassifier(C=1.0, keep_data=False),
        "clf",
        "int",
        "array",
    ),
    ("linreg-squared", lambda: LinearRegressor(C=2.0), "reg", "float", "array"),
    (
        "linreg-squared-nodata",
        lambda: LinearRegressor(C=2.0, keep_data=False),
        "reg",
        "float",
        "array",
    ),
    ("linear-logistic", lambda: LinearClassifier(loss="logistic", C=1.0), "clf", "int", "array"),
    (
        "linear-squared_hinge",
        lambda: LinearClassifier(loss="squared_hinge", C=0.5),
        "clf",
        "int",
        "array",
    ),
    (
        "linear-nystroem",
        lambda: LinearClassifier(
            C=1.0, feature_map=Nystroem(n_components=30, gamma=0.05, random_state=0)
        ),
        "clf",
        "int",
        "array",
    ),
    (
        "linear-rbfsampler-logistic",
        lambda: LinearClassifier(
            loss="logistic",
            C=1.0,
            feature_map=RBFSampler(n_components=40, gamma=0.05, random_state=0),
        ),
        "clf",
        "int",
        "array",
    ),
    ("kernel-squared", lambda: KernelClassifier(C=1.0, gamma=0.05), "clf", "int", "array"),
    (
        "kernel-logistic",
        lambda: KernelClassifier(loss="logistic", C=1.0, gamma=0.05),
        "clf",
        "int",
        "array",
    ),
    (
        "kernel-squared_hinge",
        lambda: KernelClassifier(loss="squared_hinge", C=1.0, kernel="poly", degree=2),
        "clf",
        "int",
        "array",
    ),
    ("kernreg-squared", lambda: KernelRegressor(C=1.0, gamma=0.1), "reg", "float", "array"),
    ("linear-strings", lambda: LinearClassifier(C=1.0), "clf", "str", "array"),
    (
        "kernel-logistic-strings",
        lambda: KernelClassifier(loss="logistic", gamma=0.05),
        "clf",
        "str",
        "array",
    ),
    ("linreg-dataframe", lambda: LinearRegressor(C=1.0), "reg", "float", "frame"),
    (
        "kernel-dataframe-strings",
        lambda: KernelClassifier(C=1.0, gamma=0.05),
        "clf",
        "str",
        "frame",
    ),
]


class Case:
    """A model, its data, and a record of the samples it holds by id (to refit from)."""

    def __init__(self, combo, cancer, diabetes):
        self.name, make, kind, labels, inp = combo
        X, y = cancer if kind == "clf" else diabetes
        if labels == "str":
            y = np.where(y == 1, "dog", "cat").astype(object)
        self.classifier = kind == "clf"
        self.frame = inp == "frame"
        self.columns = [f"feat_{j}" for j in range(X.shape[1])]
        self.X, self.y = X[:N_FIT], y[:N_FIT]
        self.Xn, self.yn = X[N_FIT : N_FIT + 30], y[N_FIT : N_FIT + 30]
        self.Xq = X[::9]
        self.make = make
        self.rows = {i: (X[i], y[i]) for i in range(N_FIT)}

    def wrap(self, A):
        if not self.frame:
            return A
        import pandas as pd

        return pd.DataFrame(A, columns=self.columns)

    def wrap_y(self, y):
        if not self.frame:
            return y
        import pandas as pd

        return pd.Series(y, name="target")

    def fit(self):
        return self.make().fit(self.wrap(self.X), self.wrap_y(self.y))

    def score(self, m, X=None):
        X = self.wrap(self.Xq if X is None else X)
        return m.decision_function(X) if self.classifier else m.predict(X)

    # ------------------------------------------------------------- updates
    def needs_rows(self, m):
        return not m._ledger.keep_rows

    def flip(self, m, ids, rows):
        if not self.classifier:
            return np.array([rows[i][1] + 1.0 for i in ids])
        c = m.classes_
        return np.array([c[0] if rows[i][1] == c[1] else c[1] for i in ids], dtype=self.y.dtype)

    def updates(self, m, rows):
        """A fixed sequence of add / remove / relabel / mixed updates, applied to ``m``;
        ``rows`` (id -> (x, y)) is updated alongside."""
        ids = m.add(self.wrap(self.Xn[:5]), self.yn[:5])
        for i, k in zip(ids.tolist(), range(5)):
            rows[i] = (self.Xn[k], self.yn[k])
        rem = [3, 17, int(ids[1])]
        if self.needs_rows(m):
            m.remove(
                rem, X=np.array([rows[i][0] for i in rem]), y=np.array([rows[i][1] for i in rem])
            )
        else:
            m.remove(rem)
        for i in rem:
            del rows[i]
        rel = [5, int(ids[3])]
        new = self.flip(m, rel, rows)
        kw = (
            {"X": np.array([rows[i][0] for i in rel]), "y_old": np.array([rows[i][1] for i in rel])}
            if self.needs_rows(m)
            else {}
        )
        m.relabel(rel, new, **kw)
        for i, t in zip(rel, new):
            rows[i] = (rows[i][0], t)
        # one mixed transaction
        rel2, rem2 = [8], [9]
        new2 = self.flip(m, rel2, rows)
        kw = {}
        if self.needs_rows(m):
            kw = {
                "X_remove": np.array([rows[i][0] for i in rem2]),
                "y_remove": np.array([rows[i][1] for i in rem2]),
                "X_relabel": np.array([rows[i][0] for i in rel2]),
                "y_relabel_old": np.array([rows[i][1] for i in rel2]),
            }
        ids2 = m.update(
            X_add=self.Xn[5:8],
            y_add=self.yn[5:8],
            remove_ids=rem2,
            relabel_ids=rel2,
            y_relabel=new2,
            **kw,
        )
        for i, k in zip(ids2.tolist(), range(5, 8)):
            rows[i] = (self.Xn[k], self.yn[k])
        del rows[rem2[0]]
        rows[rel2[0]] = (rows[rel2[0]][0], new2[0])
        return rows

    def fresh_fit(self, m, rows):
        ids = sorted(rows)
        X = np.array([rows[i][0] for i in ids])
        y = np.array([rows[i][1] for i in ids], dtype=self.y.dtype)
        fresh = clone(m)
        if getattr(m, "feature_map_", None) is not None:
            fresh.set_params(feature_map=m.feature_map_)  # the same fitted map
        if hasattr(m, "gamma_"):
            fresh.set_params(gamma=m.gamma_)  # the gamma the model was fitted with
        return fresh.fit(self.wrap(X), self.wrap_y(y)), np.asarray(ids)


def _rel_err(a, b):
    return float(np.max(np.abs(a - b)) / max(np.max(np.abs(b)), 1e-300))


def _params_equal(p, q):
    assert sorted(p) == sorted(q), f"parameters differ: {sorted(set(p) ^ set(q))}"
    for k in p:
        if k == "callback" or k.startswith("callback"):
            continue
        a, b = p[k], q[k]
        if isinstance(a, BaseEstimator) or isinstance(b, BaseEstimator):
            assert type(a) is type(b), f"parameter {k}: {a!r} != {b!r}"
            assert a.get_params() == b.get_params(), f"parameter {k}"
        elif isinstance(a, float) and np.isnan(a):
            assert isinstance(b, float) and np.isnan(b), k
        else:
            assert a == b and type(a) is type(b), f"parameter {k}: {a!r} != {b!r}"


@pytest.fixture(params=COMBOS, ids=[c[0] for c in COMBOS])
def case(request, cancer, diabetes):
    if request.param[4] == "frame":
        pytest.importorskip("pandas")
    return Case(request.param, cancer, diabetes)


# ---------------------------------------------------------------------------
# round trip
# ---------------------------------------------------------------------------
def test_roundtrip_and_updates(case, tmp_path):
    m = case.fit()
    # a few updates first, so that ids have gaps and the state has pending corrections
    ids = m.add(case.wrap(case.Xn[20:24]), case.yn[20:24])
    for i, k in zip(ids.tolist(), range(20, 24)):
        case.rows[i] = (case.Xn[k], case.yn[k])
    rem = [0, int(ids[0])]
    if case.needs_rows(m):
        m.remove(
            rem,
            X=np.array([case.rows[i][0] for i in rem]),
            y=np.array([case.rows[i][1] for i in rem]),
        )
    else:
        m.remove(rem)
    for i in rem:
        del case.rows[i]

    path = tmp_path / "model.npz"
    deltafit.save(m, path)
    loaded = deltafit.load(path)
    assert type(loaded) is type(m)

    # bitwise equal queries, ids, parameters
    with warnings.catch_warnings():
        warnings.simplefilter("error", UserWarning)  # e.g. feature names lost
        np.testing.assert_array_equal(case.score(loaded), case.score(m))
        np.testing.assert_array_equal(
            loaded.predict(case.wrap(case.Xq)), m.predict(case.wrap(case.Xq))
        )
    np.testing.assert_array_equal(loaded.sample_ids_, m.sample_ids_)
    assert loaded.n_samples_ == m.n_samples_
    assert loaded.n_features_in_ == m.n_features_in_
    if case.classifier:
        np.testing.assert_array_equal(loaded.classes_, m.classes_)
        assert (
            loaded.predict(case.wrap(case.Xq)).dtype.kind
            == m.predict(case.wrap(case.Xq)).dtype.kind
            or case.y.dtype == object
        )
    if case.frame:
        np.testing.assert_array_equal(loaded.feature_names_in_, m.feature_names_in_)
    if hasattr(m, "coef_"):
        np.testing.assert_array_equal(loaded.coef_, m.coef_)
        np.testing.assert_array_equal(loaded.intercept_, m.intercept_)
    else:
        np.testing.assert_array_equal(loaded.dual_coef_, m.dual_coef_)
        np.testing.assert_array_equal(loaded.X_fit_, m.X_fit_)
    if hasattr(m, "predict_proba"):
        np.testing.assert_array_equal(loaded.predict_proba(case.Xq), m.predict_proba(case.Xq))

    # the loaded model keeps updating, like the original
    rows = dict(case.rows)
    rows_loaded = dict(case.rows)
    case.updates(m, rows)
    case.updates(loaded, rows_loaded)
    assert sorted(rows) == sorted(rows_loaded)
    np.testing.assert_array_equal(loaded.sample_ids_, m.sample_ids_)
    np.testing.assert_array_equal(loaded.sample_ids_, sorted(rows))
    err = _rel_err(case.score(loaded), case.score(m))
    assert err <= 1e-10, f"loaded and original differ after the same updates: {err:.2e}"
    fresh, ids = case.fresh_fit(m, rows)
    tol = 1e-8 if m.loss == "squared" else 1e-6
    for model in (m, loaded):
        err = _rel_err(case.score(model), case.score(fresh))
        assert err <= tol, f"updated model differs from a fresh fit: {err:.2e}"
        if case.classifier:
            np.testing.assert_array_equal(
                model.predict(case.wrap(case.Xq)), fresh.predict(case.wrap(case.Xq))
            )

    # and saves again: a second round trip is still bitwise
    deltafit.save(loaded, tmp_path / "again.npz")
    again = deltafit.load(tmp_path / "again.npz")
    np.testing.assert_array_equal(case.score(again), case.score(loaded))


def test_loaded_params_equal(case, tmp_path):
    """get_params() of the loaded model equals the original's (the callback aside), so that
    clone(loaded) / loaded.fit(...) behave like the original."""
    m = case.fit()
    deltafit.save(m, tmp_path / "m.npz")
    loaded = deltafit.load(tmp_path / "m.npz")
    _params_equal(loaded.get_params(deep=False), m.get_params(deep=False))
    _params_equal(loaded.get_params(), m.get_params())
    # refitting the loaded model on the same data gives the same model
    again = loaded.fit(case.wrap(case.X), case.wrap_y(case.y))
    ref = case.fit()
    np.testing.assert_allclose(case.score(again), case.score(ref), rtol=1e-12, atol=1e-12)


def test_save_does_not_change_the_model(case, tmp_path):
    """``save`` folds pending corrections "as a no-op on the model": predictions stay bitwise."""
    m = case.fit()
    for k in range(6):  # single additions leave pending low-rank corrections
        m.add(case.wrap(case.Xn[k : k + 1]), case.yn[k : k + 1])
    if case.needs_rows(m):
        m.remove([1, 2], X=case.X[[1, 2]], y=case.y[[1, 2]])
    else:
        m.remove([1, 2])
    before = case.score(m)
    deltafit.save(m, tmp_path / "m.npz")
    np.testing.assert_array_equal(case.score(m), before)
    np.testing.assert_array_equal(case.score(deltafit.load(tmp_path / "m.npz")), before)


def test_file_holds_no_pickle(case, tmp_path):
    m = case.fit()
    path = tmp_path / "m.npz"
    deltafit.save(m, path)
    with np.load(path, allow_pickle=False) as z:
        assert "__meta__" in z.files
        for key in z.files:
            arr = z[key]  # raises ValueError if an array would need pickle
            assert arr.dtype != object, key
        meta = json.loads(z["__meta__"].tobytes().decode("utf-8"))
    assert meta["estimator"] == type(m).__name__
    assert meta["format_version"] == deltafit.persistence.FORMAT_VERSION
    # no rows stored for keep_data=False: only digests
    if not m._ledger.keep_rows:
        with np.load(path, allow_pickle=False) as z:
            assert "ledger_X" not in z.files
            shapes = {k: z[k].shape for k in z.files}
        assert (m.n_samples_, m.n_features_in_) not in shapes.values()


def test_save_path_as_given(tmp_path, cancer):
    X, y = cancer
    m = LinearClassifier().fit(X[:50], y[:50])
    deltafit.save(m, str(tmp_path / "model.bin"))
    assert (tmp_path / "model.bin").is_file()
    assert not (tmp_path / "model.bin.npz").exists()
    loaded = deltafit.load(str(tmp_path / "model.bin"))
    np.testing.assert_array_equal(loaded.decision_function(X), m.decision_function(X))
    deltafit.save(m, tmp_path / "other.npz")  # the function form
    np.testing.assert_array_equal(
        deltafit.load(tmp_path / "other.npz").decision_function(X), m.decision_function(X)
    )


@pytest.mark.parametrize(
    "make", [LinearClassifier, LinearRegressor, KernelClassifier, KernelRegressor]
)
def test_the_save_method_still_works_and_warns(make, tmp_path, cancer):
    """``model.save(path)`` is deprecated (FutureWarning naming ``deltafit.save(model, path)``)
    and writes the file ``deltafit.save`` writes."""
    X, y = cancer
    m = make().fit(X[:60], y[:60])
    with pytest.warns(FutureWarning, match=r"use deltafit\.save\(model, path\)") as record:
        m.save(tmp_path / "method.npz")
    assert [w.filename for w in record] == [__file__]  # the warning points at the caller
    deltafit.save(m, tmp_path / "function.npz")
    a, b = (np.load(tmp_path / name) for name in ("method.npz", "function.npz"))
    assert sorted(a.files) == sorted(b.files)
    for key in a.files:
        np.testing.assert_array_equal(a[key], b[key])
    np.testing.assert_array_equal(deltafit.load(tmp_path / "method.npz").predict(X), m.predict(X))


def test_callback_is_not_saved(tmp_path, cancer):
    X, y = cancer
    m = LinearClassifier(loss="logistic", callback=lambda *a: False).fit(X[:80], y[:80])
    deltafit.save(m, tmp_path / "m.npz")
    loaded = deltafit.load(tmp_path / "m.npz")
    assert loaded.callback is None
    np.testing.assert_array_equal(loaded.decision_function(X), m.decision_function(X))


# ---------------------------------------------------------------------------
# what cannot be saved
# ---------------------------------------------------------------------------
def test_save_callable_kernel_raises(tmp_path, cancer):
    X, y = cancer

    def my_kernel(A, B):
        return A @ B.T

    m = KernelClassifier(kernel=my_kernel).fit(X[:60], y[:60])
    with pytest.raises(ValueError, match="callable kernel"):
        deltafit.save(m, tmp_path / "m.npz")
    assert not (tmp_path / "m.npz").exists()


@pytest.mark.parametrize(
    "make", [LinearClassifier, LinearRegressor, KernelClassifier, KernelRegressor]
)
def test_save_unfitted_raises(make, tmp_path):
    with (
        pytest.raises(ValueError, match="fitted"),
        pytest.warns(FutureWarning, match=r"deltafit\.save\(model, path\)"),
    ):
        make().save(tmp_path / "m.npz")  # the deprecated method form
    with pytest.raises(ValueError, match="fitted"):
        deltafit.save(make(), tmp_path / "m.npz")
    assert not (tmp_path / "m.npz").exists()


def test_save_other_object_raises(tmp_path):
    with pytest.raises(ValueError, match="deltafit estimator"):
        deltafit.save(StandardScaler(), tmp_path / "m.npz")


# ---------------------------------------------------------------------------
# bad files
# ---------------------------------------------------------------------------
@pytest.fixture(scope="module")
def saved(tmp_path_factory, cancer):
    X, y = cancer
    m = LinearClassifier().fit(X[:60], y[:60])
    path = tmp_path_factory.mktemp("saved") / "model.npz"
    deltafit.save(m, path)
    return path, path.read_bytes()


def _write(tmp_path, data, name="bad.npz"):
    p = tmp_path / name
    p.write_bytes(data)
    return p


def _resave(tmp_path, saved, change_meta=None, change_arrays=None):
    """The saved model's arrays re-written with a modified __meta__ / array dict."""
    path, _ = saved
    with np.load(path, allow_pickle=False) as z:
        arrays = {k: z[k] for k in z.files}
    meta = json.loads(arrays["__meta__"].tobytes().decode("utf-8"))
    if change_meta:
        change_meta(meta)
    arrays["__meta__"] = np.frombuffer(json.dumps(meta).encode("utf-8"), dtype=np.uint8)
    if change_arrays:
        change_arrays(arrays)
    out = tmp_path / "resaved.npz"
    np.savez(out, **arrays)
    return out


def test_resave_unmodified_loads(tmp_path, saved, cancer):
    X, _ = cancer
    p = _resave(tmp_path, saved)
    ref = deltafit.load(saved[0])
    np.testing.assert_array_equal(deltafit.load(p).decision_function(X), ref.decision_function(X))


def test_missing_file(tmp_path):
    with pytest.raises(ValueError, match="no model file"):
        deltafit.load(tmp_path / "nothing_here.npz")
    with pytest.raises(ValueError, match="no model file"):
        deltafit.load(tmp_path)  # a directory


def test_text_file(tmp_path):
    p = tmp_path / "model.npz"
    p.write_text("this is not a model\n1,2,3\n")
    with pytest.raises(ValueError, match="not a (readable )?deltafit model file"):
        deltafit.load(p)


def test_empty_file(tmp_path):
    with pytest.raises(ValueError, match="deltafit model file"):
        deltafit.load(_write(tmp_path, b""))


@pytest.mark.parametrize("fraction", [0.5, 0.9, 0.99])
def test_truncated_file(tmp_path, saved, fraction):
    data = saved[1]
    with pytest.raises(ValueError, match="deltafit model file|corrupt"):
        deltafit.load(_write(tmp_path, data[: int(len(data) * fraction)]))


@pytest.mark.parametrize("where", [0.25, 0.5, 0.75])
def test_flipped_bytes(tmp_path, saved, where):
    data = bytearray(saved[1])
    mid = int(len(data) * where)
    for i in range(mid, mid + 16):
        data[i] ^= 0xFF
    with pytest.raises(ValueError, match="deltafit model file|corrupt"):
        deltafit.load(_write(tmp_path, bytes(data)))


def test_flipped_byte_in_array_header(tmp_path, saved):
    """A corrupt .npy header inside the archive (read before any CRC check)."""
    data = bytearray(saved[1])
    pos = data.index(b"{'descr'", len(data) // 4)
    data[pos] ^= 0x5A  # '{' becomes '!'
    with pytest.raises(ValueError, match="deltafit model file|corrupt"):
        deltafit.load(_write(tmp_path, bytes(data)))


def test_flipped_byte_in_zip_directory(tmp_path, saved):
    """A corrupt compression-method field in the zip central directory."""
    data = bytearray(saved[1])
    pos = data.index(b"PK\x01\x02")  # first central directory entry
    data[pos + 10] ^= 0x5A
    with pytest.raises(ValueError, match="deltafit model file|corrupt"):
        deltafit.load(_write(tmp_path, bytes(data)))


def test_npz_without_meta(tmp_path):
    p = tmp_path / "plain.npz"
    np.savez(p, a=np.arange(3), b=np.eye(2))
    with pytest.raises(ValueError, match="__meta__"):
        deltafit.load(p)


def test_other_format(tmp_path, saved):
    p = _resave(tmp_path, saved, change_meta=lambda m: m.update(format="something-else"))
    with pytest.raises(ValueError, match="not a deltafit model file"):
        deltafit.load(p)


def test_meta_not_json(tmp_path, saved):
    def bad(arrays):
        arrays["__meta__"] = np.frombuffer(b"{not json", dtype=np.uint8)

    with pytest.raises(ValueError, match="metadata"):
        deltafit.load(_resave(tmp_path, saved, change_arrays=bad))


@pytest.mark.parametrize("version", [0, 1, 4, 999, "2", "3", None, True])
def test_wrong_format_version(tmp_path, saved, version):
    p = _resave(tmp_path, saved, change_meta=lambda m: m.update(format_version=version))
    with pytest.raises(ValueError, match="format version"):
        deltafit.load(p)


def test_unknown_estimator(tmp_path, saved):
    p = _resave(tmp_path, saved, change_meta=lambda m: m.update(estimator="os.system"))
    with pytest.raises(ValueError, match="unknown estimator"):
        deltafit.load(p)


def test_unknown_state(tmp_path, saved):
    p = _resave(tmp_path, saved, change_meta=lambda m: m.update(state="pickled"))
    with pytest.raises(ValueError, match="unknown state"):
        deltafit.load(p)


def test_bad_params_in_meta(tmp_path, saved):
    p = _resave(tmp_path, saved, change_meta=lambda m: m["params"].update(C=-1.0))
    with pytest.raises(ValueError, match="C"):
        deltafit.load(p)
    p = _resave(tmp_path, saved, change_meta=lambda m: m["params"].update(no_such_param=1))
    with pytest.raises(ValueError, match="corrupt"):
        deltafit.load(p)


def test_missing_array(tmp_path, saved):
    p = _resave(tmp_path, saved, change_arrays=lambda a: a.pop("state_beta"))
    with pytest.raises(ValueError, match="corrupt"):
        deltafit.load(p)


def test_inconsistent_arrays(tmp_path, saved):
    p = _resave(tmp_path, saved, change_arrays=lambda a: a.update(state_beta=a["state_beta"][:-1]))
    with pytest.raises(ValueError, match="corrupt"):
        deltafit.load(p)
    p = _resave(
        tmp_path, saved, change_arrays=lambda a: a.update(ledger_ids=np.zeros_like(a["ledger_ids"]))
    )
    with pytest.raises(ValueError, match="corrupt"):
        deltafit.load(p)

    def nan_state(a):
        b = a["state_beta"].copy()
        b[0] = np.nan
        a["state_beta"] = b

    with pytest.raises(ValueError, match="NaN"):
        deltafit.load(_resave(tmp_path, saved, change_arrays=nan_state))  # NaN in the state


def test_error_messages_name_the_file(tmp_path, saved):
    data = saved[1]
    p = _write(tmp_path, data[: len(data) // 2], name="half_model.npz")
    with pytest.raises(ValueError, match="half_model.npz"):
        deltafit.load(p)


def test_zip_is_really_a_zip(saved):
    """The format is documented as npz: a plain zip of .npy members."""
    path, _ = saved
    with zipfile.ZipFile(path) as z:
        names = z.namelist()
    assert "__meta__.npy" in names
    assert all(n.endswith(".npy") for n in names)
    assert Path(path).stat().st_size > 0


def test_loaded_kernel_model_refits_with_warm_start(tmp_path):
    from deltafit.datasets import load_breast_cancer

    X, y = load_breast_cancer()
    m = deltafit.KernelClassifier(loss="logistic", gamma=0.1, warm_start=True).fit(X[:100], y[:100])
    path = tmp_path / "m.npz"
    deltafit.save(m, path)
    loaded = deltafit.load(path)
    assert loaded.n_samples_fit_ == 100 and not hasattr(loaded, "feature_map_")
    loaded.fit(X[:100], y[:100])  # warm start from the loaded α
    assert loaded.n_iter_ == 0
