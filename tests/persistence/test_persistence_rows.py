"""A model file whose stored rows contradict its state is refused (issue 30, item 5).

A ``keep_data=True`` model stores its rows beside the state computed from them.  Editing one
stored row used to load silently: predictions came from the old state while later updates read
the edited rows (a squared-loss model was 0.56 off a refit of the stored rows after one
removal).  ``load`` now recomputes what the state keeps of the rows (``ΦᵀWΦ v`` for a random
``v``, the scores ``Φβ``, ``Φᵀ(α∘t)``, the kernel values of every row) and refuses a mismatch;
an unedited file loads bit for bit.
"""

from __future__ import annotations

import warnings

import numpy as np
import pytest
import scipy.sparse as sp
from sklearn.datasets import load_breast_cancer, load_diabetes, load_iris
from test_reliability_files import _members, _write

import deltafit
from deltafit import KernelClassifier, KernelRegressor, LinearClassifier, LinearRegressor

N = 90


@pytest.fixture(scope="module")
def data():
    Xb, yb = load_breast_cancer(return_X_y=True)
    Xb = (Xb - Xb.mean(0)) / Xb.std(0)
    Xi, yi = load_iris(return_X_y=True)
    Xi = (Xi - Xi.mean(0)) / Xi.std(0)
    Xd, yd = load_diabetes(return_X_y=True)
    Xd = Xd / Xd.std(0)
    rng = np.random.default_rng(0)
    take = rng.permutation(len(yi))[:N]
    return {
        "binary": (Xb[:N], yb[:N]),
        "three": (Xi[take], yi[take]),
        "regression": (Xd[:N], yd[:N]),
        "outputs": (Xd[:N], np.column_stack([yd[:N], Xd[:N, 0] * 3.0])),
    }


CASES = []
for _loss in ("squared", "logistic", "squared_hinge", "hinge"):
    for _data in ("binary", "three"):
        for _sparse in (False, True):
            CASES.append(
                (
                    f"linear-{_loss}-{_data}{'-sparse' if _sparse else ''}",
                    lambda loss=_loss: LinearClassifier(loss=loss, C=1.0),
                    _data,
                    _sparse,
                )
            )
        CASES.append(
            (
                f"kernel-{_loss}-{_data}",
                lambda loss=_loss: KernelClassifier(loss=loss, C=1.0, gamma=0.1),
                _data,
                False,
            )
        )
CASES += [
    ("linear-regressor", lambda: LinearRegressor(C=1.0), "regression", False),
    ("linear-regressor-sparse", lambda: LinearRegressor(C=1.0), "regression", True),
    ("linear-regressor-outputs", lambda: LinearRegressor(C=1.0), "outputs", False),
    ("kernel-regressor", lambda: KernelRegressor(C=1.0, gamma=0.1), "regression", False),
]


def _fitted(case, data):
    _, make, which, sparse = case
    X, y = data[which]
    if sparse:
        X = sp.csr_matrix(X)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        m = make().fit(X, y)
        m.remove(m.sample_ids_[[3]])  # one removal, as in the report
    return m, X


def _edited(arrays, row, feature, delta, hinge_support=None):
    out = dict(arrays)
    if "ledger_X" in arrays:
        X = arrays["ledger_X"].copy()
        X[row, feature] += delta
        out["ledger_X"] = X
    else:  # sparse rows: the first stored value of the row
        data, indptr = arrays["ledger_X_data"].copy(), arrays["ledger_X_indptr"]
        data[indptr[row]] += delta
        out["ledger_X_data"] = data
    return out


def _rows_to_edit(meta, arrays):
    """Three rows (first, middle, last); for the hinge, support vectors (a row the dual
    solution does not touch and whose edit leaves it outside the margin is the exact fit of
    the edited rows: the file is then consistent, see the module's notes)."""
    n = meta["n_samples"]
    rows = np.array([0, n // 2, n - 1])
    if meta["fitted"]["loss"] == "hinge":
        dual = arrays.get("state_dual", arrays.get("state_0_dual"))
        if dual is None:
            dual = next(a for k, a in arrays.items() if k.endswith("dual"))
        sv = np.flatnonzero(dual > 0)
        rows = sv[[0, sv.size // 2, -1]]
    return rows


@pytest.mark.parametrize("case", CASES, ids=[c[0] for c in CASES])
def test_an_unedited_file_loads_exactly(case, data, tmp_path):
    m, X = _fitted(case, data)
    deltafit.save(m, tmp_path / "m.npz")
    loaded = deltafit.load(tmp_path / "m.npz")
    np.testing.assert_array_equal(loaded.predict(X), m.predict(X))
    if hasattr(m, "decision_function"):
        np.testing.assert_array_equal(loaded.decision_function(X), m.decision_function(X))


@pytest.mark.parametrize("delta", [0.5, 5.0, 100.0])
@pytest.mark.parametrize("case", CASES, ids=[c[0] for c in CASES])
def test_an_edited_stored_row_is_refused(case, delta, data, tmp_path):
    m, _ = _fitted(case, data)
    deltafit.save(m, tmp_path / "m.npz")
    meta, arrays = _members(tmp_path / "m.npz")
    for row in _rows_to_edit(meta, arrays):
        bad = _write(tmp_path / f"bad{row}.npz", meta, _edited(arrays, row, 0, delta))
        with pytest.raises(ValueError, match="corrupt model file"):
            deltafit.load(bad)


def test_hinge_a_row_moved_into_the_margin_is_refused(data, tmp_path):
    """The hinge keeps nothing of a row whose dual variable is 0 but its place outside the
    margin: a changed row moved inside it breaks the saved KKT certificate and is refused; a
    change that leaves it outside leaves β the exact fit of the changed rows, and loads."""
    X, y = data["binary"]
    m = LinearClassifier(loss="hinge", C=1.0).fit(X, y)
    deltafit.save(m, tmp_path / "m.npz")
    meta, arrays = _members(tmp_path / "m.npz")
    dual, t, beta, Phi = (arrays[k] for k in ("state_dual", "ledger_y", "state_beta", "ledger_X"))
    z = Phi @ beta
    row = np.flatnonzero((dual == 0) & (t * z > 1.5))[0]
    j = int(np.argmax(np.abs(beta[:-1])))

    def edited(delta):
        out = dict(arrays)
        out["ledger_X"] = Phi.copy()
        out["ledger_X"][row, j] += delta
        return out

    # across the margin along the largest coefficient: t·z drops to -0.2
    inside = edited(-1.2 * z[row] / beta[j])
    with pytest.raises(ValueError, match="margins of the dual solution"):
        deltafit.load(_write(tmp_path / "bad.npz", meta, inside))
    outside = edited(0.5 * t[row] / beta[j])  # further out: still the exact fit
    loaded = deltafit.load(_write(tmp_path / "fine.npz", meta, outside))
    Xf = outside["ledger_X"][:, :-1]
    refit = LinearClassifier(loss="hinge", C=1.0).fit(Xf, y)
    want = refit.decision_function(Xf)
    np.testing.assert_allclose(loaded.decision_function(Xf), want, atol=1e-6 * np.max(np.abs(want)))


@pytest.mark.parametrize(
    "case",
    [c for c in CASES if c[0].startswith("linear-") and "three" not in c[0]],
    ids=lambda c: c[0],
)
def test_the_checks_run_over_blocks_of_rows(case, data, tmp_path, monkeypatch):
    """The load-time products run over blocks of rows: blocks of 7 rows give the same
    verdicts (an unedited file loads, an edited row in a later block is refused)."""
    from deltafit._states import _saved_checks as _checks

    monkeypatch.setattr(_checks, "_ROW_BLOCK", 7)
    m, X = _fitted(case, data)
    deltafit.save(m, tmp_path / "m.npz")
    np.testing.assert_array_equal(deltafit.load(tmp_path / "m.npz").predict(X), m.predict(X))
    meta, arrays = _members(tmp_path / "m.npz")
    row = _rows_to_edit(meta, arrays)[-1]
    bad = _write(tmp_path / "bad.npz", meta, _edited(arrays, row, 0, 0.5))
    with pytest.raises(ValueError, match="corrupt model file"):
        deltafit.load(bad)
