"""Helpers shared by the Dask test modules (imported like ``reference``): dask collections of
NumPy rows, a model's coefficients and current rows, and the comparisons of a Dask model with
the NumPy one, each recomputing the optimality measure from the rows independently of the
solvers.

* Smooth losses (logistic, squared hinge): two exact solves that each stop at a certified
  gradient norm g (``‖β − β*‖ ≤ g``, Okumura et al., "Quick sensitivity analysis for
  incremental data modification and its application to leave-one-out CV in linear
  classification problems", Thm 6) differ by at most the sum of their certificates
  (:func:`assert_newton_same`, per class :func:`assert_classes_same`).
* Hinge loss: both paths stop on the same KKT rule (violations ≤ 1e-10 in margin units), so β
  agree to ``1e-8 · max(1, ‖β‖)``, and the Dask objective and duality gap are recomputed here
  (:func:`assert_hinge_same`).
"""

import numpy as np
import pytest
from scipy.special import expit

dask = pytest.importorskip("dask")
da = pytest.importorskip("dask.array")

TOL = 1e-10

__all__ = [
    "TOL",
    "_threads",
    "process_clients",
    "chunked",
    "full_coef",
    "class_coefs",
    "live",
    "gradient",
    "objective",
    "class_gradient",
    "assert_newton_same",
    "assert_hinge_same",
    "assert_classes_same",
]


@pytest.fixture(autouse=True)
def _threads():
    """Dask's threaded scheduler for every test of the importing module (autouse)."""
    with dask.config.set(scheduler="threads"):
        yield


def chunked(X, y, rows=97, w=None):
    """``(X, y)`` (and ``w`` when given) as dask arrays of ``rows`` rows per block; ``y`` may
    have several columns."""
    out = (da.from_array(X, chunks=(rows, -1)), da.from_array(y, chunks=(rows,) + np.shape(y)[1:]))
    return out if w is None else out + (da.from_array(w, chunks=rows),)


def full_coef(m):
    """β of a binary (or single-output) model with the intercept last: shape (p + 1,)."""
    return np.r_[np.ravel(m.coef_), np.atleast_1d(m.intercept_)]


def class_coefs(m):
    """β of every class (or output) with the intercept last: shape (K, p + 1), one row for a
    binary model."""
    return np.column_stack([np.atleast_2d(m.coef_), np.atleast_1d(m.intercept_)])


def live(m, X, y, extra=None):
    """The current training rows of a model whose samples are X[ids] then ``extra``."""
    ids = m.sample_ids_
    XX, yy = X, y
    if extra is not None:
        XX, yy = np.vstack([X, extra[0]]), np.r_[y, extra[1]]
    return XX[ids], yy[ids]


def _d1(loss, t, z):
    return -t * expit(-t * z) if loss == "logistic" else -2.0 * t * np.maximum(0.0, 1.0 - t * z)


def gradient(m, X, y, w=None):
    """∇J at a binary model's β, from the rows (the reference, independent of the solvers)."""
    beta = full_coef(m)
    Phi = np.column_stack([X, np.ones(X.shape[0])])
    t = np.where(y == m.classes_[1], 1.0, -1.0)
    w = np.ones(X.shape[0]) if w is None else w
    return beta + m.C * Phi.T @ (w * _d1(m.loss, t, Phi @ beta))


def class_gradient(m, k, X, y):
    """∇J of class k's one-vs-rest problem at the model's β_k, from the rows."""
    beta = class_coefs(m)[k]
    Phi = np.column_stack([X, np.ones(X.shape[0])])
    t = np.where(y == m.classes_[k], 1.0, -1.0)
    return beta + m.C * Phi.T @ _d1(m.loss, t, Phi @ beta)


def objective(m, X, y, w=None):
    """The hinge J(β) of the model's β over the rows (the reference)."""
    beta = full_coef(m)
    t = np.where(y == m.classes_[1], 1.0, -1.0)
    marg = t * (np.column_stack([X, np.ones(X.shape[0])]) @ beta)
    w = np.ones(X.shape[0]) if w is None else w
    return 0.5 * beta @ beta + m.C * w @ np.maximum(0.0, 1.0 - marg)


def assert_newton_same(a, b, X, y, w=None):
    """The Dask model ``b`` equals the NumPy model ``a`` within their certificates, and its
    certificate is the norm of its exact gradient."""
    gb, ga = b.grad_norm_, a.grad_norm_
    assert np.max(np.abs(full_coef(a) - full_coef(b))) <= ga + gb + TOL
    g = np.linalg.norm(gradient(b, X, y, w))
    assert abs(g - gb) <= TOL + 1e-9 * np.linalg.norm(full_coef(b))
    np.testing.assert_array_equal(a.sample_ids_, b.sample_ids_)


def assert_hinge_same(a, b, X, y, w=None):
    """The Dask hinge model ``b`` equals the NumPy model ``a``: β to 1e-8 · max(1, ‖β‖) and
    within both certificates; its objective and duality gap are those of its β over the rows,
    and its certificate covers the gap."""
    ba, bb = full_coef(a), full_coef(b)
    scale = max(1.0, float(np.linalg.norm(ba)))
    assert np.max(np.abs(ba - bb)) <= 1e-8 * scale
    assert np.max(np.abs(ba - bb)) <= a.grad_norm_ + b.grad_norm_
    r = b._state.result
    assert r.converged and r.kkt_violation <= 1e-9
    J = objective(b, X, y, w)
    assert abs(r.objective - J) <= 1e-12 * J
    assert 0.0 <= r.duality_gap <= 1e-9 * J
    assert b.grad_norm_ >= np.sqrt(2.0 * r.duality_gap)
    np.testing.assert_array_equal(a.sample_ids_, b.sample_ids_)


def assert_classes_same(a, b, X, y):
    """Dask model ``b`` equals NumPy model ``a`` class by class within their certificates,
    and each class's certificate is the norm of its exact gradient."""
    ra, rb = a._state.result.results, b._state.result.results
    for k in range(len(a.classes_)):
        ga, gb = ra[k].grad_norm, rb[k].grad_norm
        diff = np.max(np.abs(class_coefs(a)[k] - class_coefs(b)[k]))
        assert diff <= ga + gb + 1e-10 and diff <= 1e-8
        g = np.linalg.norm(class_gradient(b, k, X, y))
        assert abs(g - gb) <= 1e-10 + 1e-9 * np.linalg.norm(class_coefs(b)[k])
    np.testing.assert_array_equal(a.sample_ids_, b.sample_ids_)


def process_clients(module, n_workers=2, config=None, silence_logs=40):
    """Yield a client of a ``LocalCluster`` of ``n_workers`` worker processes of one thread
    (spawned workers: ``module``'s functions travel to them by value, registered here unless
    an enclosing cluster did), under the Dask ``config``; closed and unregistered after.
    Skips the test where the environment forbids processes."""
    distributed = pytest.importorskip("distributed")
    import cloudpickle

    ours = module.__name__ not in cloudpickle.list_registry_pickle_by_value()
    if ours:
        cloudpickle.register_pickle_by_value(module)
    try:
        with dask.config.set(config or {}):
            cluster = distributed.LocalCluster(
                n_workers=n_workers,
                threads_per_worker=1,
                processes=True,
                dashboard_address=None,
                silence_logs=silence_logs,
            )
    except Exception as exc:  # pragma: no cover - the environment forbids processes
        if ours:
            cloudpickle.unregister_pickle_by_value(module)
        pytest.skip(f"no process cluster here: {exc}")
    client = distributed.Client(cluster, set_as_default=False)
    try:
        yield client
    finally:
        client.close()
        cluster.close()
        if ours:
            cloudpickle.unregister_pickle_by_value(module)
