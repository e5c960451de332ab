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

dask = pytest.importorskip("dask")
da = pytest.importorskip("dask.array")
distributed = pytest.importorskip("distributed")


def full_coef(m):
    return np.r_[np.ravel(m.coef_), np.atleast_1d(m.intercept_)]


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
    import cloudpickle

    cfg = {} if allowed_failures is None else {
        "distributed.scheduler.allowed-failures": allowed_failures}
    cloudpickle.register_pickle_by_value(sys.modules[__name__])
    try:
        with dask.config.set(cfg):
            cluster = distributed.LocalCluster(n_workers=n_workers, threads_per_worker=1,
                                               processes=True, dashboard_address=None,
                                               silence_logs=50)
    except Exception as exc:  # pragma: no cover - the environment forbids processes
        cloudpickle.unregister_pickle_by_value(sys.modules[__name__])
        pytest.skip(f"no process cluster here: {exc}")
    client = distributed.Client(cluster, set_as_default=False)
    try:
        yield client
    finally:
        client.close()
        cluster.close()
        cloudpickle.unregister_pickle_by_value(sys.modules[__name__])


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
    return (full_coef(m).copy(), m.sample_ids_.copy(), st.beta_ref.copy(),
            st.curv.folded().H.copy(), tuple(np.copy(v) for v in st.point),
            m._dask_rows.n_blocks, [None if k is None else k.copy()
                                     for k in m._dask_rows.live])


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
    from deltafit.models import _dask_newton

    Xd, yd = da.from_array(X, chunks=(150, -1)), da.from_array(y, chunks=150)
    marker = str(tmp_path / "killed")
    open(marker, "w").close()  # disarmed
    monkeypatch.setattr(_dask_newton, "block_share",
                        _KillOnce(marker, _dask_newton.block_share))
    m = df.LinearClassifier(loss="logistic", C=0.5).fit(Xd, yd)
    outcome, before = _kill_during(m, tmp_path, what, (Xd, yd))
    return m, outcome, before


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


def test_lost_worker_not_recovered_leaves_the_model(strict_client, cancer3, tmp_path,
                                                    monkeypatch):
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


@pytest.fixture
def plain_client():
    yield from _cluster(n_workers=2)


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
