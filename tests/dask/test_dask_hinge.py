"""The hinge loss on rows persisted on a Dask cluster (``LinearClassifier(loss="hinge")``,
keep_data=True): the fit and every update equal the NumPy path's dual QP solution, on breast
cancer and a digits binary subset.

Both paths stop on the same rule (every KKT violation at most ``tol`` = 1e-10 in margin units,
or the rounding floor once the face has been solved exactly), so their β agree to that
accuracy: compared to ``1e-8 · max(1, ‖β‖)``.  Independently of the solvers, each Dask
result's objective and duality gap are recomputed here from the rows, and its certified
radius (``grad_norm_``) must cover the distance to the NumPy solution and to the reference
active-set solver of ``tests/reference.py``.
"""

import numpy as np
import pytest

import deltafit as df
from dask_helpers import (
    _threads,  # noqa: F401  (autouse: the threaded scheduler)
    chunked,
    full_coef,
    live,
)
from dask_helpers import (  # noqa: F401
    assert_hinge_same as assert_same,
)
from reference import hinge_reference

dask = pytest.importorskip("dask")
da = pytest.importorskip("dask.array")


@pytest.fixture(scope="module")
def digits4(digits):
    """Digits 0–3, even against odd (720 rows, 64 features): fits one working set."""
    from sklearn.datasets import load_digits

    X, y = load_digits(return_X_y=True)
    keep = y < 4
    return X[keep] / 16.0, y[keep] % 2


@pytest.fixture(scope="module")
def digits_eo():
    """All digits, even against odd (1797 rows, 64 features): more rows than the working
    set's cap (8p + 512 = 1032), so the smoothed start and the decomposition steps run."""
    from sklearn.datasets import load_digits

    X, y = load_digits(return_X_y=True)
    return X / 16.0, y % 2


@pytest.mark.parametrize("data,C", [("cancer", 0.5), ("cancer", 20.0), ("digits", 1.0)])
def test_fit_and_every_update_equal_numpy(breast_cancer, digits_eo, data, C):
    X, y = breast_cancer if data == "cancer" else digits_eo
    Xd, yd = chunked(X, y, rows=97 if data == "cancer" else 300)
    a = df.LinearClassifier(loss="hinge", C=C).fit(X, y)
    b = df.LinearClassifier(loss="hinge", C=C).fit(Xd, yd)
    assert b._dask_rows is not None and b._dask_passes == b._state.passes
    if data == "cancer":  # n <= 8p + 512: the rows persisted, gathered, certified
        assert b._dask_passes == 3 and b._state.start_passes == 1
    else:  # the smoothed start, then the decomposition method
        assert b._state.start_passes > 1 and b._dask_passes > b._state.start_passes + 1
    assert_same(a, b, X, y)
    z = b.decision_function(Xd)
    assert isinstance(z, da.Array)
    np.testing.assert_allclose(z.compute(), a.decision_function(X), rtol=0, atol=1e-8)
    rng = np.random.default_rng(1)
    # a small removal: the previous partition plus the removed rows, one or two passes
    ids = rng.choice(b.sample_ids_, 3, replace=False)
    a.remove(ids)
    b.remove(ids)
    assert 1 <= b._state.passes <= 2
    assert_same(a, b, *live(b, X, y))
    Xa, ya = X[:7] * 0.8 + 0.1, 1 - y[:7]
    a.add(Xa, ya)
    b.add(da.from_array(Xa, chunks=4), da.from_array(ya, chunks=4))
    assert_same(a, b, *live(b, X, y, (Xa, ya)))
    rel = rng.choice(b.sample_ids_[: X.shape[0] - 10], 3, replace=False)
    ynew = 1 - y[rel]
    a.relabel(rel, ynew)
    b.relabel(rel, ynew)
    y2 = y.copy()
    y2[rel] = ynew
    assert_same(a, b, *live(b, X, y2, (Xa, ya)))
    both = dict(
        remove_ids=[int(b.sample_ids_[0])],
        X_add=X[-3:] + 0.05,
        y_add=y[-3:],
        reweight_ids=[int(b.sample_ids_[5])],
        reweight_weight=[2.5],
    )
    a.update(**both)
    b.update(**both)
    XX, yy = np.vstack([X, Xa, X[-3:] + 0.05]), np.r_[y2, ya, y[-3:]]
    w = np.ones(XX.shape[0])
    w[int(a.sample_ids_[4])] = 2.5  # id 5 before the removal of the first one
    ids = b.sample_ids_
    assert_same(a, b, XX[ids], yy[ids], w[ids])
    np.testing.assert_array_equal(a.sample_weight_, b.sample_weight_)


def test_fit_equals_the_reference_solver(breast_cancer):
    """Against the independent active-set solver of tests/reference.py."""
    X, y = breast_cancer
    X, y = X[:300], y[:300]
    b = df.LinearClassifier(loss="hinge", C=2.0).fit(*chunked(X, y, rows=64))
    F = np.column_stack([X, np.ones(X.shape[0])])
    beta, _ = hinge_reference(F, np.where(y == 1, 1.0, -1.0), 2.0)
    assert np.max(np.abs(full_coef(b) - beta)) <= 1e-8 * max(1.0, np.linalg.norm(beta))
    assert np.linalg.norm(full_coef(b) - beta) <= b.grad_norm_


def test_weighted_fit_and_dataframe_input(breast_cancer):
    dd = pytest.importorskip("dask.dataframe")
    pd = pytest.importorskip("pandas")
    X, y = breast_cancer
    w = np.random.default_rng(2).uniform(0.0, 2.0, X.shape[0])
    w[:20] = 0.0
    a = df.LinearClassifier(loss="hinge", C=2.0).fit(X, y, sample_weight=w)
    frame = dd.from_pandas(pd.DataFrame(X), npartitions=4)
    b = df.LinearClassifier(loss="hinge", C=2.0).fit(
        frame,
        dd.from_pandas(pd.Series(y), npartitions=4),
        sample_weight=da.from_array(w, chunks=150),
    )
    assert_same(a, b, X, y, w)
    a.remove([3, 4, 30])
    b.remove([3, 4, 30])
    keep = np.setdiff1d(np.arange(X.shape[0]), [3, 4, 30])
    assert_same(a, b, X[keep], y[keep], w[keep])


def test_bad_input_and_failures_leave_the_model(breast_cancer, monkeypatch):
    from deltafit._dask import _hinge as _dask_hinge

    X, y = breast_cancer
    Xd, yd = chunked(X, y, rows=150)
    m = df.LinearClassifier(loss="hinge").fit(Xd, yd)
    before, n = full_coef(m).copy(), m.n_samples_

    def unchanged():
        np.testing.assert_array_equal(full_coef(m), before)
        assert m.n_samples_ == n
        assert m._dask_rows.n_blocks == 4

    bad = X.copy()
    bad[300, 3] = np.nan
    with pytest.raises(ValueError, match="NaN"):
        m.fit(da.from_array(bad, chunks=(150, -1)), yd)
    unchanged()
    with pytest.raises(ValueError, match="NaN"):
        m.add(da.from_array(bad[298:302], chunks=2), y[:4])
    unchanged()
    with pytest.raises(ValueError, match="unknown sample ids"):
        m.remove([5, 100000])
    unchanged()
    with pytest.raises(ValueError, match="callback"):
        df.LinearClassifier(loss="hinge", callback=print).fit(Xd, yd)
    with pytest.raises(ValueError, match="two classes"):
        df.LinearClassifier(loss="hinge").fit(
            Xd, yd, sample_weight=da.from_array((y == 1).astype(float), chunks=150)
        )
    with pytest.raises(ValueError, match="Dask cluster"):
        df.save(m, "never-written.npz")
    with pytest.raises(AttributeError, match="Dask cluster"):
        m.dual_coef_
    unchanged()
    # a failure inside a pass (a worker lost for good): the update raises, the model and its
    # row store are as they were, and it works on
    calls = {"n": 0}
    real = _dask_hinge.hinge_share

    def flaky(*args, **kw):
        calls["n"] += 1
        if calls["n"] == 2:
            raise OSError("worker lost")
        return real(*args, **kw)

    monkeypatch.setattr(_dask_hinge, "hinge_share", flaky)
    with pytest.raises(OSError):
        m.remove([1, 2])
    monkeypatch.setattr(_dask_hinge, "hinge_share", real)
    unchanged()
    assert 1 in m.sample_ids_
    a = df.LinearClassifier(loss="hinge").fit(X, y)
    a.remove([1, 2])
    m.remove([1, 2])
    keep = np.r_[0, 3 : X.shape[0]]
    assert_same(a, m, X[keep], y[keep])


@pytest.mark.slow  # worker processes start and import deltafit; test_dask.py's run daily
def test_process_cluster_fits_and_removes(process_client, digits4):
    """On two worker processes: the rows persisted there (futures), the hinge fit (warm
    started from a NumPy fit on half the rows: a few passes) and a removal by id equal the
    NumPy path."""
    X, y = digits4
    Xd, yd = chunked(X, y, rows=360)
    a = df.LinearClassifier(loss="hinge", C=1.0).fit(X, y)
    b = df.LinearClassifier(loss="hinge", C=1.0, warm_start=True).fit(X[::2], y[::2])
    with process_client.as_current(), dask.config.set(scheduler=process_client.get):
        b.fit(Xd, yd)
        graph = b._dask_rows.blocks[0][0].dask
        assert any(type(v).__name__ == "Future" for v in dict(graph).values())
        assert_same(a, b, X, y)
        a.remove([4, 40, 400])
        b.remove([4, 40, 400])
        z = b.decision_function(Xd).compute()
    keep = np.setdiff1d(np.arange(X.shape[0]), [4, 40, 400])
    assert_same(a, b, X[keep], y[keep])
    np.testing.assert_allclose(z, a.decision_function(X), rtol=0, atol=1e-8)
