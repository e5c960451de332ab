"""The one interface of the six exact-update states (``deltafit._states._protocol.ModelState``).

Estimators and persistence choose no code by a state's type or a loss's name: the estimator
builds a ``DataChange`` and the state applies it; persistence stores ``to_arrays`` under the
state's ``kind`` and rebuilds it with ``from_arrays``.  These tests hold every state to that
interface on real data, and keep the ladders from coming back.
"""

from __future__ import annotations

import ast
from pathlib import Path

import numpy as np
import pytest

import deltafit
from deltafit import KernelClassifier, KernelRegressor, LinearClassifier, LinearRegressor
from deltafit._states._protocol import ModelState
from deltafit.datasets import load_breast_cancer
from deltafit.models._registry import DASK_STATES, REGISTRY, STATES, state_class, state_for

SRC = Path(deltafit.__file__).parent

CONFIGS = [
    (LinearClassifier, "squared", "primal_squared"),
    (LinearClassifier, "logistic", "primal_newton"),
    (LinearClassifier, "squared_hinge", "primal_newton"),
    (LinearClassifier, "hinge", "primal_hinge"),
    (KernelClassifier, "squared", "dual_squared"),
    (KernelClassifier, "logistic", "kernel_newton"),
    (KernelClassifier, "squared_hinge", "kernel_newton"),
    (KernelClassifier, "hinge", "kernel_hinge"),
]


@pytest.fixture(scope="module")
def cancer():
    X, y = load_breast_cancer()
    return X[:160], y[:160]


def _make(cls, loss):
    if cls is KernelClassifier:
        return cls(loss=loss, C=2.0, gamma=0.02, tol=1e-12)
    return cls(loss=loss, C=2.0, tol=1e-12)


def test_six_states_one_per_problem():
    assert len(STATES) == 6
    assert all(issubclass(c, ModelState) and STATES[c.kind] is c for c in STATES.values())
    for kernel in (False, True):
        for loss in ("squared", "logistic", "squared_hinge", "hinge"):
            cls = state_for(kernel, loss)
            assert cls.kernel is kernel and loss in cls.loss_names
            others = [c for c in STATES.values() if c.kernel is kernel and loss in c.loss_names]
            assert others == [cls]
    with pytest.raises(ValueError, match="unknown state 'nope'"):
        state_class("nope")
    with pytest.raises(ValueError, match="no exact-update state"):
        state_for(False, "absolute")


def _arrays(obj, path="", depth=0):
    """``{path: array}`` of the arrays a state holds, through its deltafit-internal parts."""
    out = {}
    for k, v in vars(obj).items():
        if isinstance(v, np.ndarray):
            out[path + k] = v
        elif (
            depth < 3
            and hasattr(v, "__dict__")
            and not isinstance(v, type)
            and type(v).__module__.startswith("deltafit.")
            and not type(v).__module__.startswith(("deltafit.losses", "deltafit.solvers"))
        ):
            out.update(_arrays(v, f"{path}{k}.", depth + 1))
    return out


@pytest.mark.parametrize(
    "cls, loss, kind", CONFIGS, ids=[f"{c.__name__}-{l}" for c, l, _ in CONFIGS]
)
def test_checkpoint_shares_no_array_with_the_state(cls, loss, kind, cancer):
    """``checkpoint`` copies every array of the state, those of its parts too (the tracked
    inverse, the statistics): an interrupted update restores it, and an update that changed
    a shared part in place would leave the restored model wrong (the regression: after the
    layout moved the parts out of ``deltafit.models``, the tracked inverse was shared)."""
    X, y = cancer
    st = _make(cls, loss).fit(X[:120], y[:120]).problem_._st
    cp = st.checkpoint()
    mine, theirs = _arrays(st), _arrays(cp)
    assert set(mine) == set(theirs)
    if kind in ("primal_squared", "dual_squared"):  # the arrays of its parts are there
        assert any("." in k for k in mine)
    for k, a in mine.items():
        assert a.size == 0 or not np.shares_memory(a, theirs[k]), k


def test_registry_holds_the_dask_states():
    """One registry maps (backend, kernel, loss) to the state class, the Dask states
    included; a model file names only the NumPy states."""
    for loss in ("squared", "logistic", "squared_hinge", "hinge"):
        for kernel in (False, True):
            assert REGISTRY[("numpy", kernel, loss)] is state_for(kernel, loss)
        cls = state_for(False, loss, backend="dask")
        assert REGISTRY[("dask", False, loss)] is cls and loss in cls.loss_names
    assert state_for(False, "squared", backend="dask") is STATES["primal_squared"]
    assert state_for(False, "logistic", backend="dask") is DASK_STATES["dask_newton"]
    assert state_for(False, "hinge", backend="dask") is DASK_STATES["dask_hinge"]
    with pytest.raises(ValueError, match="no exact-update state.*dask"):
        state_for(True, "squared", backend="dask")
    with pytest.raises(ValueError, match="unknown state 'dask_newton'"):
        state_class("dask_newton")


@pytest.mark.parametrize(
    "cls, loss, kind", CONFIGS, ids=[f"{c.__name__}-{l}" for c, l, _ in CONFIGS]
)
def test_state_interface_on_real_data(cls, loss, kind, cancer):
    X, y = cancer
    m = _make(cls, loss).fit(X[:120], y[:120])
    st = m.problem_._st
    assert st.kind == kind and st.loss.name == loss and st.C == 2.0
    # the arrays restore the same solution exactly
    live = m.problem_.live
    again = type(st).from_arrays(
        st.to_arrays(live),
        st.opts,
        y=m.problem_.targets[live],
        capacity=m.problem_.capacity,
        max_rank=st.max_rank,
        result=None
        if st.result is None
        else type(st.result)(
            *[getattr(st.result, f) for f in type(st.result).__dataclass_fields__]
        ),
    )
    sol, sol2 = st.solution, again.solution
    if st.kernel:
        sol, sol2 = sol[live], sol2[: live.size]
    assert np.array_equal(sol, sol2)
    # a change through the interface equals a fresh fit on the changed data
    m.update(X_add=X[120:140], y_add=y[120:140], remove_ids=[3, 50, 77])
    keep = np.setdiff1d(np.arange(120), [3, 50, 77])
    ref = _make(cls, loss).fit(
        np.vstack([X[keep], X[120:140]]), np.concatenate([y[keep], y[120:140]])
    )
    scale = max(np.abs(ref.decision_function(X)).max(), 1.0)
    assert np.abs(m.decision_function(X) - ref.decision_function(X)).max() <= 1e-7 * scale
    # the warm start of a refit has the shape the state starts from
    width = m.problem_.n_samples if st.warm_per_sample else st.solution.shape[0]
    assert m.problem_._st.warm_coef(m.problem_.live).shape == (width,)


@pytest.mark.parametrize(
    "cls, loss",
    [
        (LinearRegressor, "squared"),
        (KernelRegressor, "squared"),
        (LinearClassifier, "logistic"),
        (KernelClassifier, "hinge"),
    ],
)
def test_saved_state_keeps_the_fitted_problem_after_set_params(cls, loss, cancer, tmp_path):
    """set_params after the fit changes the parameters, not the fitted problem: the file keeps
    the fitted C and loss, so the loaded model goes on updating like the original."""
    X, y = cancer
    if cls is LinearRegressor or cls is KernelRegressor:
        y = X[:, 0] + 0.1 * X[:, 1]
    kw = {"gamma": 0.02} if cls.__name__.startswith("Kernel") else {}
    m = cls(loss=loss, C=2.0, tol=1e-12, **kw).fit(X[:100], y[:100])
    m.set_params(C=50.0, loss="squared")
    path = tmp_path / "m.npz"
    deltafit.save(m, path)
    back = deltafit.load(path)
    assert back.C == 50.0 and back.loss == "squared"  # the parameters as set
    assert back.problem_.C == 2.0 and back.problem_.loss.name == loss  # the fitted problem
    for model in (m, back):
        model.update(X_add=X[100:110], y_add=y[100:110], remove_ids=[0, 1])
    assert np.allclose(back.predict(X), m.predict(X), rtol=0, atol=1e-9)


_LADDER_FILES = [
    "persistence/_archive.py",
    "persistence/_schema.py",
    "persistence/_write.py",
    "persistence/_read.py",
    "persistence/_checks.py",
    "persistence/_pipelines.py",
    "models/_linear.py",
    "models/_kernel.py",
    "models/_base.py",
    "models/_inputs.py",
    "models/_plan.py",
    "models/_predict.py",
    "models/_problem.py",
]


@pytest.mark.parametrize("name", _LADDER_FILES)
def test_no_state_ladders(name):
    """Estimators, persistence and the view name no concrete state class, and do not branch on
    the loss's name to choose how to update or store."""
    tree = ast.parse((SRC / name).read_text())
    names = {n.id for n in ast.walk(tree) if isinstance(n, ast.Name)}
    names |= {a.name for n in ast.walk(tree) if isinstance(n, ast.ImportFrom) for a in n.names}
    assert not names & {c.__name__ for c in STATES.values()}
    text = (SRC / name).read_text()
    assert "isinstance(st" not in text and 'hasattr(st, "opts")' not in text


@pytest.mark.parametrize(
    "cls, loss, kind", CONFIGS, ids=[f"{c.__name__}-{l}" for c, l, _ in CONFIGS]
)
def test_checkpoint_shares_no_object_an_update_changes(cls, loss, kind, cancer):
    """A checkpoint copies every deltafit object of the state that an update changes in place
    (ledger views, chord curvatures, Gram caches, ...): after the modules moved out of
    ``deltafit.models``, a prefix test of the old package copied none of them."""
    X, y = cancer
    model = _make(cls, loss).fit(X[:120], y[:120])
    for st in [model.problem_._st]:
        copy = st.checkpoint()
        for key, value in vars(st).items():
            module = type(value).__module__
            if (
                hasattr(value, "__dict__")
                and module.startswith("deltafit.")
                and (
                    not module.startswith(
                        ("deltafit.solvers", "deltafit.losses", "deltafit.kernels")
                    )
                    or module.startswith(
                        ("deltafit.solvers._chord", "deltafit.solvers._kernel_chord")
                    )
                )
            ):
                assert vars(copy)[key] is not value, f"{type(st).__name__}.{key} shared"
