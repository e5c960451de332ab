"""The hinge loss with K ≥ 3 classes on rows persisted on a Dask cluster
(``LinearClassifier(loss="hinge")``, keep_data=True): the K one-vs-rest decomposition methods
run jointly, one pass serving every class still solving.

* The fit and every update (remove by id, add, relabel, update with a reweight) equal the
  NumPy path's one-vs-rest hinge model: both stop every class at a KKT violation ≤ tol = 1e-10
  (or their rounding floor), so each class's β agrees to ``1e-8 · max(1, ‖β_k‖)`` and within
  the sum of the two certified radii; decision_function to 1e-8, predict exactly; each class's
  duality gap is ≥ 0 and ≤ 1e-9 J_k on both paths, and J_k is recomputed here from the rows
  (the reference, independent of the solvers).
* The joint solve makes exactly the passes of the slowest class: each class is its binary
  Dask hinge model (the same β), and the joint fit's / removal's passes are the largest of
  the K binary ones, on a synthetic 4-class problem too large for one working set (so the
  smoothed start and the decomposition steps run) and on digits 3/5/8 (546 rows: every row
  gathered by the first hinge pass, 3 passes).

Threaded scheduler, except one test on two worker processes.
"""

import threading
import time
from functools import partial

import numpy as np
import pytest

import deltafit as df
from dask_helpers import (
    _threads,  # noqa: F401  (autouse: the threaded scheduler)
    live,
)
from dask_helpers import chunked as _chunked
from dask_helpers import class_coefs as full_coef

dask = pytest.importorskip("dask")
da = pytest.importorskip("dask.array")
chunked = partial(_chunked, rows=150)


@pytest.fixture(scope="module")
def digits3():
    """The digits 3, 5 and 8 scaled to [0, 1] (546 rows, 64 features)."""
    from sklearn.datasets import load_digits

    X, y = load_digits(return_X_y=True)
    keep = np.isin(y, (3, 5, 8))
    return X[keep] / 16.0, y[keep]


@pytest.fixture(scope="module")
def blobs4():
    """Four overlapping Gaussian classes in 4 dimensions, 1600 rows: more than the working
    set's cap of 8p + 512 = 552 rows."""
    rng = np.random.default_rng(4)
    centers = rng.normal(scale=1.5, size=(4, 4))
    y = rng.integers(0, 4, 1600)
    return centers[y] + rng.standard_normal((1600, 4)), y


def class_objective(m, k, X, y, w=None):
    """J of class k's one-vs-rest problem at the model's β_k, from the rows."""
    beta = full_coef(m)[k]
    t = np.where(y == m.classes_[k], 1.0, -1.0)
    marg = t * (np.column_stack([X, np.ones(X.shape[0])]) @ beta)
    w = np.ones(X.shape[0]) if w is None else w
    return 0.5 * beta @ beta + m.C * w @ np.maximum(0.0, 1.0 - marg)


def assert_same(a, b, X, y, w=None):
    """The Dask model ``b`` equals the NumPy model ``a`` (see the module docstring)."""
    ra, rb = a._state.result.results, b._state.result.results
    assert len(rb) == len(a.classes_) >= 3
    for k in range(len(a.classes_)):
        ba, bb = full_coef(a)[k], full_coef(b)[k]
        diff = float(np.max(np.abs(ba - bb)))
        assert diff <= 1e-8 * max(1.0, float(np.linalg.norm(ba)))
        assert diff <= ra[k].grad_norm + rb[k].grad_norm
        J = class_objective(b, k, X, y, w)
        assert rb[k].converged and rb[k].kkt_violation <= 1e-9
        assert abs(rb[k].objective - J) <= 1e-12 * J
        for r in (ra[k], rb[k]):
            assert 0.0 <= r.duality_gap <= 1e-9 * J
        assert rb[k].grad_norm >= np.sqrt(2.0 * rb[k].duality_gap)
    np.testing.assert_array_equal(a.sample_ids_, b.sample_ids_)
    np.testing.assert_array_equal(a.classes_, b.classes_)


def test_fit_and_every_update_equal_numpy(digits3):
    X, y = digits3
    Xd, yd = chunked(X, y)
    a = df.LinearClassifier(loss="hinge", C=0.5).fit(X, y)
    b = df.LinearClassifier(loss="hinge", C=0.5).fit(Xd, yd)
    assert b._state.base.kind == "dask_hinge" and b._dask_passes == 3
    assert_same(a, b, X, y)
    z = b.decision_function(Xd)
    assert isinstance(z, da.Array)
    np.testing.assert_allclose(z.compute(), a.decision_function(X), rtol=0, atol=1e-8)
    np.testing.assert_array_equal(b.predict(Xd).compute(), a.predict(X))
    XX, yy = X.copy(), y.copy()
    a.remove([3, 40, 41])
    b.remove([3, 40, 41])
    assert 1 <= b._state.passes <= 2
    assert_same(a, b, *live(a, XX, yy))
    Xa, ya = X[:5] * 0.9 + 0.05, y[5:10]
    a.add(Xa, ya)
    b.add(*chunked(Xa, ya, rows=3))
    XX, yy = np.vstack([XX, Xa]), np.r_[yy, ya]
    assert_same(a, b, *live(a, XX, yy))
    rel, ynew = [10, 11, 500], [3, 8, 5]
    a.relabel(rel, ynew)
    b.relabel(rel, ynew)
    yy[rel] = ynew
    assert_same(a, b, *live(a, XX, yy))
    up = dict(
        remove_ids=[20], X_add=X[-2:] + 0.02, y_add=y[-2:], reweight_ids=[30], reweight_weight=[3.0]
    )
    a.update(**up)
    b.update(**up)
    XX, yy = np.vstack([XX, X[-2:] + 0.02]), np.r_[yy, y[-2:]]
    w = np.ones(XX.shape[0])
    w[30] = 3.0
    ids = a.sample_ids_
    assert_same(a, b, XX[ids], yy[ids], w[ids])
    np.testing.assert_array_equal(a.sample_weight_, b.sample_weight_)
    np.testing.assert_allclose(
        b.decision_function(Xd).compute(), a.decision_function(X), rtol=0, atol=1e-8
    )
    np.testing.assert_array_equal(b.predict(Xd).compute(), a.predict(X))


def test_joint_passes_are_those_of_the_slowest_class(blobs4):
    """Each class of the joint solve is its binary Dask hinge model, and the joint fit and
    removal make the passes of the slowest of them."""
    X, y = blobs4
    Xd, yd = chunked(X, y, rows=400)
    a = df.LinearClassifier(loss="hinge", C=1.0).fit(X, y)
    b = df.LinearClassifier(loss="hinge", C=1.0).fit(Xd, yd)
    assert_same(a, b, X, y)
    rm = [3, 40, 41, 900]
    binary = []
    for k, c in enumerate(b.classes_):
        m = df.LinearClassifier(loss="hinge", C=1.0).fit(Xd, da.where(yd == c, 1, -1))
        assert m._state.start_passes > 1  # the smoothed start ran: n > 8p + 512
        np.testing.assert_allclose(full_coef(m)[0], full_coef(b)[k], rtol=0, atol=1e-12)
        assert b._state.states[k].passes == m._dask_passes
        fit_passes = m._dask_passes
        m.remove(rm)
        binary.append((fit_passes, m._state.passes))
    assert len({f for f, _ in binary}) > 1  # the classes differ: the max is a real claim
    assert b._dask_passes == b._state.passes == max(f for f, _ in binary)
    a.remove(rm)
    b.remove(rm)
    assert b._state.passes == max(r for _, r in binary)
    assert_same(a, b, *live(a, X, y))


def test_refusals_and_failures_leave_the_model(digits3, monkeypatch):
    from deltafit._dask import _hinge as _dask_hinge

    X, y = digits3
    Xd, yd = chunked(X, y)
    b = df.LinearClassifier(loss="hinge", C=0.5).fit(Xd, yd)
    before, ids, state = full_coef(b).copy(), b.sample_ids_.copy(), b._state

    def unchanged(same_state=True):
        np.testing.assert_array_equal(full_coef(b), before)
        np.testing.assert_array_equal(b.sample_ids_, ids)
        assert b._dask_rows.n_blocks == 4
        if same_state:  # a ValueError: nothing replaced; else restored from a checkpoint
            assert b._state is state

    # the per-class counts refuse an update that leaves a single class
    with pytest.raises(ValueError, match="single class"):
        b.remove(np.flatnonzero(y != 3))
    unchanged()
    with pytest.raises(ValueError, match="single class"):
        b.relabel(np.flatnonzero(y != 3), np.full(int(np.sum(y != 3)), 3))
    unchanged()
    with pytest.raises(ValueError, match="callback"):
        df.LinearClassifier(loss="hinge", callback=print).fit(Xd, yd)
    # a pass that fails (a worker lost for good) in one class's re-solve: the update raises,
    # the model and its row store are as they were, every class thread has stopped
    calls = {"n": 0}
    real = _dask_hinge.hinge_shares

    def flaky(*args, **kw):
        calls["n"] += 1
        if calls["n"] == 2:
            raise OSError("worker lost")
        return real(*args, **kw)

    n_threads = threading.active_count()
    monkeypatch.setattr(_dask_hinge, "hinge_shares", flaky)
    with pytest.raises(OSError, match="worker lost"):
        b.remove([5, 6])
    monkeypatch.setattr(_dask_hinge, "hinge_shares", real)
    assert threading.active_count() == n_threads
    unchanged(same_state=False)
    a = df.LinearClassifier(loss="hinge", C=0.5).fit(X, y)
    a.remove([5, 6])
    b.remove([5, 6])
    assert_same(a, b, *live(a, X, y))


def test_smooth_callbacks_on_class_threads_are_not_concurrent(digits3):
    """The logistic classes' Newton solves run in threads; the user's callback is called by
    one at a time (each call sleeps, so calls without the lock would overlap)."""
    X, y = digits3
    active, seen, lock = [0], [], threading.Lock()

    def callback(it, beta, gnorm, f, grad):
        with lock:
            active[0] += 1
            seen.append(active[0])
        time.sleep(0.002)
        with lock:
            active[0] -= 1

    b = df.LinearClassifier(loss="logistic", C=0.5, callback=callback).fit(*chunked(X, y))
    b.remove([3, 4])
    assert len(seen) >= 2 * len(b.classes_) and max(seen) == 1


@pytest.mark.slow  # worker processes start and import deltafit; test_dask.py's run daily
def test_process_cluster_fits_and_updates(process_client, digits3):
    X, y = digits3
    Xd, yd = chunked(X, y, rows=200)
    a = df.LinearClassifier(loss="hinge", C=0.5).fit(X, y)
    with process_client.as_current(), dask.config.set(scheduler=process_client.get):
        b = df.LinearClassifier(loss="hinge", C=0.5).fit(Xd, yd)
        for m in (a, b):
            m.update(remove_ids=[4, 40], X_add=X[:3] * 0.9, y_add=y[:3])
        z = b.decision_function(Xd).compute()
    XX, yy = np.vstack([X, X[:3] * 0.9]), np.r_[y, y[:3]]
    assert_same(a, b, *live(a, XX, yy))
    np.testing.assert_allclose(z, a.decision_function(X), rtol=0, atol=1e-8)
