"""Each state checks the arrays it saved (``ModelState.check_saved_statistics``,
``check_saved_solution``, ``check_saved_rows``): a saved model passes, and a changed row, a
changed solution or changed statistics are refused with the load-time error."""

from __future__ import annotations

import json

import numpy as np
import pytest

from deltafit import KernelClassifier, LinearClassifier, LinearRegressor, save
from deltafit._states._protocol import ModelState
from deltafit.datasets import load_breast_cancer
from deltafit.models._registry import STATES

CONFIGS = [
    (LinearClassifier, "squared"),
    (LinearClassifier, "logistic"),
    (LinearClassifier, "hinge"),
    (KernelClassifier, "squared"),
    (KernelClassifier, "logistic"),
    (KernelClassifier, "hinge"),
]


@pytest.fixture(scope="module")
def cancer():
    X, y = load_breast_cancer()
    X = (X - X.mean(axis=0)) / X.std(axis=0)
    return X[:120], y[:120]


def _saved(model, tmp_path):
    """The arrays and metadata of ``model``'s file, as load reads them."""
    path = tmp_path / "m.deltafit"
    save(model, path)
    with np.load(path, allow_pickle=False) as z:
        arrays = {k: np.array(z[k]) for k in z.files}
    meta = json.loads(arrays.pop("__meta__").astype(np.uint8).tobytes().decode("utf-8"))
    return arrays, meta


def _checks(model, arrays, meta, first=True):
    st = model._state
    st.check_saved_statistics(
        arrays,
        n=meta["n_samples"],
        intercept_scaling=float(model._s),
        fit_intercept=bool(model._spec["fit_intercept"]),
        n_positive=meta["n_positive"],
    )
    st.check_saved_solution(arrays, solver=meta["solver"])
    st.check_saved_rows(
        arrays, first=first, hinge=meta["hinge"], kernel=model._k if model._kernel else None
    )


def test_every_state_has_the_checks_and_the_flags():
    for cls in STATES.values():
        for name in ("check_saved_statistics", "check_saved_solution", "check_saved_rows"):
            assert callable(getattr(cls, name))
        assert cls.closed_form == (cls.kind in ("primal_squared", "dual_squared"))
        assert cls.keeps_no_rows == (cls.kind == "primal_squared")
    assert not ModelState.closed_form and not ModelState.keeps_no_rows


@pytest.mark.parametrize("cls,loss", CONFIGS, ids=[f"{c.__name__}-{x}" for c, x in CONFIGS])
def test_saved_arrays_pass_and_a_changed_row_is_refused(cls, loss, cancer, tmp_path):
    X, y = cancer
    kw = {"gamma": 0.05} if cls is KernelClassifier else {}
    m = cls(loss=loss, **kw).fit(X, y)
    arrays, meta = _saved(m, tmp_path)
    _checks(m, arrays, meta)
    # a row that holds up the solution (a support vector for the hinge: a row of dual 0
    # outside the margin leaves the primal solution the exact fit, see check_saved_rows)
    i = int(np.argmax(arrays["state_dual"])) if "state_dual" in arrays else 3
    bad = dict(arrays, ledger_X=arrays["ledger_X"].copy())
    bad["ledger_X"][i, :3] += 1.0
    with pytest.raises(ValueError, match="stored rows do not give|kernel matrix is not"):
        m._state.check_saved_rows(
            bad, first=True, hinge=meta["hinge"], kernel=m._k if m._kernel else None
        )


@pytest.mark.parametrize("cls,loss", [c for c in CONFIGS if c[1] != "hinge"])
def test_a_changed_solution_is_refused(cls, loss, cancer, tmp_path):
    """(The hinge's dual solution is checked against the rows, by check_saved_rows.)"""
    X, y = cancer
    kw = {"gamma": 0.05} if cls is KernelClassifier else {}
    m = cls(loss=loss, **kw).fit(X, y)
    arrays, meta = _saved(m, tmp_path)
    key = "state_alpha" if "state_alpha" in arrays else "state_beta"
    bad = dict(arrays, **{key: arrays[key] * 1.5 + 0.1})
    with pytest.raises(ValueError, match="does not solve the stored problem"):
        m._state.check_saved_solution(bad, solver=meta["solver"])


def test_primal_squared_statistics_against_the_counts(cancer, tmp_path):
    X, y = cancer
    m = LinearRegressor().fit(X, X[:, 0] + 0.5 * X[:, 1])
    arrays, meta = _saved(m, tmp_path)
    _checks(m, arrays, meta)
    bad = dict(arrays, state_M=arrays["state_M"].copy())
    bad["state_M"][-1, -1] *= 2.0
    with pytest.raises(ValueError, match="does not count the samples"):
        m._state.check_saved_statistics(
            bad, n=meta["n_samples"], intercept_scaling=float(m._s), fit_intercept=True
        )
    bad = dict(arrays, state_b=arrays["state_b"].copy())
    bad["state_b"][-1] += 10.0
    with pytest.raises(ValueError, match="does not match the labels"):
        m._state.check_saved_statistics(
            bad, n=meta["n_samples"], intercept_scaling=float(m._s), fit_intercept=True
        )
