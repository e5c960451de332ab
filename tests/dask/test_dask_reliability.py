"""Dask-backed smooth-loss models (rows persisted on a cluster) under failure, on a process
LocalCluster: a worker process killed while a pass runs, and lazy sensitivity bounds computed
on the worker processes, against the NumPy model on breast cancer.

The lost worker is killed deterministically: a wrapper of the pass task, shipped by value,
kills its own worker process (``SIGKILL``) the first time it runs after the test arms it (an
``O_EXCL`` marker file makes "first" exact across processes).  The outcome is then either the
recovered result (Dask recomputes the lost persisted blocks from their graph and reruns the
pass's tasks) equal to the NumPy model within the two solves' certificates, or a ValueError
naming the lost worker with the model exactly as before.
"""

import os
import signal
import sys

import numpy as np
import pytest

import deltafit as df
from dask_helpers import full_coef, process_clients

dask = pytest.importorskip("dask")
da = pytest.importorskip("dask.array")
distributed = pytest.importorskip("distributed")


@pytest.fixture(scope="module")
def cancer3():
    """Breast cancer, standardised, three noisy copies (1707 rows, 30 features)."""
    from sklearn.datasets import load_breast_cancer
    from sklearn.preprocessing import StandardScaler

    X, y = load_breast_cancer(return_X_y=True)
    X = StandardScaler().fit_transform(X)
    rng = np.random.default_rng(0)
    return np.vstack([X + 0.3 * rng.normal(size=X.shape) for _ in range(3)]), np.tile(y, 3)


def _cluster(allowed_failures=None, n_workers=3):
    """Worker processes of one thread (the test module travels by value); a fresh cluster
    per test, since a killed worker's nanny does not always restart it: each kill costs one
    worker.
    ``allowed_failures=0``: the scheduler gives up on a task the first time its worker dies
    (dask.distributed's ``KilledWorker``), the path where Dask does not recover."""
    cfg = (
        {}
        if allowed_failures is None
        else {"distributed.scheduler.allowed-failures": allowed_failures}
    )
    yield from process_clients(sys.modules[__name__], n_workers, cfg, silence_logs=50)


@pytest.fixture
def cluster_client():
    yield from _cluster()


@pytest.fixture
def strict_client():
    yield from _cluster(allowed_failures=0, n_workers=2)


class _KillOnce:
    """A pass task that kills its worker process the first time it runs once armed."""

    def __init__(self, marker, real):
        self.marker, self.real = marker, real

    def __call__(self, *args, **kw):
        try:
            fd = os.open(self.marker, os.O_CREAT | os.O_EXCL | os.O_WRONLY)
        except FileExistsError:
            return self.real(*args, **kw)
        os.close(fd)
        os.kill(os.getpid(), signal.SIGKILL)


def _state(m):
    st = m._state
    return (
        full_coef(m).copy(),
        m.sample_ids_.copy(),
        st.beta_ref.copy(),
        st.curv.folded().H.copy(),
        tuple(np.copy(v) for v in st.point),
        m._dask_rows.n_blocks,
        [None if k is None else k.copy() for k in m._dask_rows.live],
    )


def _assert_state(m, before):
    now = _state(m)
    for a, b in zip(now[:4], before[:4]):
        np.testing.assert_array_equal(a, b)
    for a, b in zip(now[4], before[4]):
        np.testing.assert_array_equal(a, b)
    assert now[5] == before[5]
    for a, b in zip(now[6], before[6]):
        assert (a is None and b is None) or np.array_equal(a, b)


def _same(a, b):
    tol = a.grad_norm_ + b.grad_norm_ + 1e-10
    assert np.max(np.abs(full_coef(a) - full_coef(b))) <= tol
    np.testing.assert_array_equal(a.sample_ids_, b.sample_ids_)


def _kill_during(m, tmp_path, what, rows=None):
    """Arm the kill, then ``what`` (refit on ``rows``, or remove ids 4 and 40); returns
    ``(outcome, state before)``."""
    marker = str(tmp_path / "killed")
    before = _state(m)
    os.remove(marker)  # armed: the next pass task kills its worker
    try:
        if what == "fit":
            m.fit(*rows)
        else:
            m.remove([4, 40])
        outcome = "recovered"
    except ValueError as exc:
        assert "Dask worker was lost" in str(exc)
        outcome = "refused"
    assert os.path.exists(marker)  # a worker was killed during the pass
    return outcome, before


def _run_with_a_kill(tmp_path, monkeypatch, what, X, y):
    """Fit on the cluster with the pass tasks wrapped by :class:`_KillOnce` (disarmed), then
    :func:`_kill_during` ``what``; returns ``(model, outcome, state before)``."""
    from deltafit._dask import _newton as _dask_newton

    Xd, yd = da.from_array(X, chunks=(150, -1)), da.from_array(y, chunks=150)
    marker = str(tmp_path / "killed")
    open(marker, "w").close()  # disarmed
    monkeypatch.setattr(_dask_newton, "block_share", _KillOnce(marker, _dask_newton.block_share))
    m = df.LinearClassifier(loss="logistic", C=0.5).fit(Xd, yd)
    outcome, before = _kill_during(m, tmp_path, what, (Xd, yd))
    return m, outcome, before


@pytest.mark.slow  # its own cluster of 3 workers; test_lost_worker_in_every_pass runs daily
def test_lost_worker_is_recovered_by_dask(cluster_client, cancer3, tmp_path, monkeypatch):
    """Dask's retry: the killed worker's persisted blocks are recomputed from their graph
    (``persist_rows`` keeps the lineage), the pass reruns, the result is the NumPy one — for
    a worker lost during a refit's Newton pass, then during a removal's chord pass."""
    X, y = cancer3
    a = df.LinearClassifier(loss="logistic", C=0.5).fit(X, y)
    Xd = da.from_array(X, chunks=(150, -1))
    with cluster_client.as_current(), dask.config.set(scheduler=cluster_client.get):
        m, outcome, _ = _run_with_a_kill(tmp_path, monkeypatch, "fit", X, y)
        assert outcome == "recovered"
        _same(a, m)
        a.remove([4, 40])
        outcome, _ = _kill_during(m, tmp_path, "remove")
        assert outcome == "recovered"
        _same(a, m)
        z = m.decision_function(Xd).compute()
    assert np.max(np.abs(z - a.decision_function(X))) <= 1e-8


@pytest.mark.slow  # its own cluster; test_lost_worker_in_every_pass (allowed-failures=0) daily
def test_lost_worker_not_recovered_leaves_the_model(strict_client, cancer3, tmp_path, monkeypatch):
    """Dask gives up (``KilledWorker``): a ValueError naming the lost worker, and the model —
    coefficients, ids, β_ref, M, (J, ∇J, ∇J(0)), the row store — exactly as before.  With no
    retries the lost blocks' recomputation may have been poisoned too: a later update either
    works (equal to NumPy) or refuses the same way, the model again unchanged."""
    X, y = cancer3
    a = df.LinearClassifier(loss="logistic", C=0.5).fit(X, y)
    a.remove([4, 40])
    with strict_client.as_current(), dask.config.set(scheduler=strict_client.get):
        m, outcome, before = _run_with_a_kill(tmp_path, monkeypatch, "remove", X, y)
        assert outcome == "refused"
        _assert_state(m, before)
        try:
            m.remove([4, 40])
        except ValueError as exc:
            assert "Dask worker was lost" in str(exc)
            _assert_state(m, before)
        else:
            _same(a, m)


# ------------------------------------------------------------- every other pass, one cluster
@pytest.fixture(scope="module")
def strict_many():
    """Four worker processes, ``allowed-failures=0``, shared by the four parametrized cases
    below: each case kills exactly one worker, so one is left for the last case (a fresh
    cluster per case would cost ~3 s each).  The workers import deltafit once, together."""
    for client in _cluster(allowed_failures=0, n_workers=4):
        client.run(__import__, "deltafit.models")
        yield client


def _arrays(obj, depth=0, seen=None):
    """Every NumPy array and scalar reachable from ``obj`` (attributes, lists, tuples, dicts;
    depth ≤ 6), in a fixed order: a fingerprint of a model's whole state."""
    seen = set() if seen is None else seen
    if isinstance(obj, np.ndarray):
        return [obj.copy()]
    if isinstance(obj, (bool, int, float, str, np.number)) or obj is None:
        return [obj]
    if depth > 6 or id(obj) in seen or callable(obj) and not hasattr(obj, "__dict__"):
        return []
    seen.add(id(obj))
    if isinstance(obj, dict):
        items = [v for _, v in sorted(obj.items(), key=lambda kv: str(kv[0]))]
    elif isinstance(obj, (list, tuple)):
        items = list(obj)
    elif hasattr(obj, "__dict__") and type(obj).__module__.startswith("deltafit"):
        items = [v for _, v in sorted(vars(obj).items())]
    else:
        return []
    return [a for v in items for a in _arrays(v, depth + 1, seen)]


def _fitted(m, X):
    """Every public fitted attribute, the state's fingerprint and the decisions on ``X``."""
    out = {}
    for name in dir(type(m)) + list(vars(m)):
        if name.endswith("_") and not name.startswith("_"):
            try:
                out[name] = _arrays(getattr(m, name))
            except (AttributeError, ValueError, NotImplementedError):
                pass
    out["<state>"] = _arrays(m._state)
    out["<decision>"] = [np.asarray(m.decision_function(X)).copy()]
    return out


def _assert_unchanged(m, X, before):
    now = _fitted(m, X)
    assert now.keys() == before.keys()
    for name in before:
        assert len(now[name]) == len(before[name]), name
        for a, b in zip(now[name], before[name]):
            if isinstance(b, np.ndarray):
                np.testing.assert_array_equal(a, b, err_msg=name)
            else:
                assert a == b or (a != a and b != b), name


def _digits3():
    from sklearn.datasets import load_digits

    X, y = load_digits(return_X_y=True)
    keep = np.isin(y, (3, 5, 8))
    return X[keep] / 16.0, y[keep]


def _cancer():
    from sklearn.datasets import load_breast_cancer
    from sklearn.preprocessing import StandardScaler

    X, y = load_breast_cancer(return_X_y=True)
    return StandardScaler().fit_transform(X), y


#: case: (module of the pass task, its name, data, estimator, what is killed)
_CASES = {
    "multiclass-logistic-remove": (
        "deltafit._dask._ovr",
        "ovr_block_share",
        _digits3,
        dict(loss="logistic", C=0.5),
        "remove",
    ),
    "hinge-remove": (
        "deltafit._dask._hinge",
        "hinge_share",
        _cancer,
        dict(loss="hinge", C=0.5),
        "remove",
    ),
    "squared-fit": (
        "deltafit._dask._stats",
        "_block_share",
        _cancer,
        dict(loss="squared", C=0.5),
        "fit",
    ),
    "smooth-cv-3-folds": (
        "deltafit.model_selection._dask_folds",
        "joint_share",
        _cancer,
        dict(loss="logistic", C=0.5),
        "cv",
    ),
}


@pytest.mark.parametrize(
    "case", [c if c == "hinge-remove" else pytest.param(c, marks=pytest.mark.slow) for c in _CASES]
)
def test_lost_worker_in_every_pass(strict_many, case, tmp_path, monkeypatch):
    """A worker killed during the pass of a K = 3 one-vs-rest logistic removal, a hinge
    removal, a squared-loss (re)fit's statistics, a 3-fold smooth CV's joint re-solves: the
    result equals the NumPy path (Dask recovered), or a ValueError names the lost worker and
    every fitted attribute, the state and the decisions are exactly as before (for CV: the
    estimator is left unfitted)."""
    from importlib import import_module

    from deltafit.model_selection import cross_validate

    mod, fn, data, params, what = _CASES[case]
    X, y = data()
    Xd, yd = da.from_array(X, chunks=(150, -1)), da.from_array(y, chunks=150)
    marker = str(tmp_path / "killed")
    open(marker, "w").close()  # disarmed
    module = import_module(mod)
    monkeypatch.setattr(module, fn, _KillOnce(marker, getattr(module, fn)))
    a = df.LinearClassifier(**params).fit(X, y)
    with dask.config.set(scheduler="threads"):  # the fit's passes need no worker processes
        m = df.LinearClassifier(**params).fit(Xd, yd)
    with strict_many.as_current(), dask.config.set(scheduler=strict_many.get):
        if what == "cv":
            from sklearn.model_selection import KFold

            cv = KFold(3, shuffle=True, random_state=0)
            est = df.LinearClassifier(**params)
            os.remove(marker)  # armed
            try:
                res = cross_validate(est, Xd, yd, cv=cv)
                z = np.asarray(res.decision.compute())
                outcome = "recovered"
            except ValueError as exc:
                assert "Dask worker was lost" in str(exc)
                outcome = "refused"
            assert os.path.exists(marker)
            assert (
                est.__dict__.get("coef_") is None
                and est.get_params() == df.LinearClassifier(**params).get_params()
            )
            if outcome == "recovered":  # the refits' decisions (NumPy), in row order
                ref = cross_validate(df.LinearClassifier(**params), X, y, cv=cv, method="refit")
                assert np.max(np.abs(z - ref.decision[np.argsort(ref.test_index)])) <= 1e-8
            return
        before = _fitted(m, X)
        os.remove(marker)  # armed: the next pass task kills its worker
        try:
            if what == "fit":
                m.fit(Xd, yd)
            else:
                m.remove([4, 40])
            outcome = "recovered"
        except ValueError as exc:
            assert "Dask worker was lost" in str(exc)
            outcome = "refused"
        assert os.path.exists(marker)  # a worker was killed during the pass
        if outcome == "refused":
            _assert_unchanged(m, X, before)
        else:
            if what == "remove":
                a.remove([4, 40])
            np.testing.assert_array_equal(a.sample_ids_, m.sample_ids_)
            tol = 1e-8 * max(1.0, float(np.max(np.abs(a.coef_))))
            if params["loss"] != "squared":
                tol += float(np.max(a.grad_norm_)) + float(np.max(m.grad_norm_))
            assert np.max(np.abs(a.coef_ - m.coef_)) <= tol
            assert np.max(np.abs(a.intercept_ - m.intercept_)) <= tol


@pytest.fixture
def plain_client():
    yield from _cluster(n_workers=2)


@pytest.mark.slow  # its own cluster; bounds over dask rows run daily (test_dask_newton.py)
def test_lazy_bounds_on_worker_processes(plain_client, cancer3):
    """Bounds over dask query rows computed by the worker processes (the regions pickle):
    the ball and the curvature region (``method="auto"``) equal the same what-if's bounds on
    NumPy rows to 1e-12, and they hold."""
    X, y = cancer3
    Xd, yd = da.from_array(X, chunks=(400, -1)), da.from_array(y, chunks=400)
    a = df.LinearClassifier(loss="logistic", C=0.5).fit(X, y)
    a.remove([1, 2, 30])
    a.add(X[:2] * 0.9, 1 - y[:2])
    z = a.decision_function(X)
    gap = 1e-8 + a.grad_norm_ * np.sqrt(np.sum(X * X, axis=1) + 1.0)
    with plain_client.as_current(), dask.config.set(scheduler=plain_client.get):
        b = df.LinearClassifier(loss="logistic", C=0.5).fit(Xd, yd)
        for method, kind in (("sphere", "sphere"), ("auto", "curvature")):
            sb = df.sensitivity(b, method=method)
            assert sb.method == kind
            sb.remove([1, 2, 30])
            sb.add(X[:2] * 0.9, 1 - y[:2])
            lo, hi = sb.decision_bounds(Xd)
            assert isinstance(lo, da.Array)
            lo, hi = dask.compute(lo, hi)
            lo_np, hi_np = sb.decision_bounds(X)
            scale = 1e-12 * (1 + np.max(np.abs(lo_np)))
            np.testing.assert_allclose(lo, lo_np, rtol=0, atol=scale)
            np.testing.assert_allclose(hi, hi_np, rtol=0, atol=scale)
            # the retrained model (NumPy: within its certificate of the exact refit) inside
            assert np.all(lo - gap <= z) and np.all(z <= hi + gap)


# ------------------------------------------------------------- save/load refusals, written once
def test_dask_state_refusals_are_those_of_every_dask_state(breast_cancer, tmp_path):
    """The mixin's refusals (ValueError naming the cluster / the file) and saved shapes are
    exactly those of the logistic and hinge Dask states, and ``save`` of a Dask-fitted model
    on breast cancer is refused with the model (coefficients, decisions) unchanged."""
    from deltafit._dask._hinge import DaskHingeState
    from deltafit._dask._newton import DaskNewtonState
    from deltafit._dask._state import DaskStateRefusals
    from deltafit._states._protocol import ModelState

    class Probe(DaskStateRefusals, ModelState):
        pass

    def refusal(fn, *args, **kw):
        with pytest.raises(ValueError) as err:
            fn(*args, **kw)
        return str(err.value)

    probe = Probe.__new__(Probe)
    mine = (
        refusal(probe.to_arrays, keep=True),
        refusal(Probe.from_arrays, {}, {}, y=None, capacity=1),
        Probe.saved_shapes(5, 7),
    )
    assert "Dask cluster is not saved" in mine[0] and "cannot be loaded" in mine[1]
    assert mine[2] == {"state_beta": (7,)}
    for cls in (DaskNewtonState, DaskHingeState):
        st = cls.__new__(cls)
        assert (
            refusal(st.to_arrays, keep=True),
            refusal(cls.from_arrays, {}, {}, y=None, capacity=1),
            cls.saved_shapes(5, 7),
        ) == mine, cls.__name__
    X, y = breast_cancer
    with dask.config.set(scheduler="threads"):
        for loss in ("logistic", "hinge"):
            m = df.LinearClassifier(loss=loss, C=0.5).fit(
                *(da.from_array(X, chunks=(150, -1)), da.from_array(y, chunks=150))
            )
            coef, z = full_coef(m).copy(), m.decision_function(X).copy()
            with pytest.raises(ValueError, match="Dask"):
                df.save(m, tmp_path / f"{loss}.npz")
            np.testing.assert_array_equal(full_coef(m), coef)
            np.testing.assert_array_equal(m.decision_function(X), z)
