"""Dask-backed models that keep their rows on the cluster (keep_data=True): the logistic and
squared-hinge losses fitted and updated by cluster reductions, the squared loss removing by id,
and the sensitivity of such models, against the NumPy path on breast cancer.

Two exact solves that each stop at a certified gradient norm g (``‖β − β*‖ ≤ g``, Okumura et
al., Thm 6) differ by at most the sum of their certificates: the Dask coefficients are compared
with the NumPy ones to ``g_dask + g_numpy + 1e-10``, and each certificate is checked against
the gradient computed here independently from the rows (1e-10 absolute plus rounding).
"""

import os

import numpy as np
import pytest
from scipy.special import expit

import deltafit as df
from dask_helpers import (  # noqa: F401
    TOL,
    _threads,  # noqa: F401  (autouse: the threaded scheduler)
    chunked,
    full_coef,
    gradient,
    live,
)
from dask_helpers import (
    assert_newton_same as assert_same,
)

dask = pytest.importorskip("dask")
da = pytest.importorskip("dask.array")

SMOOTH = ["logistic", "squared_hinge"]


@pytest.fixture(scope="module")
def cancer8():
    """Breast cancer, standardised, eight noisy copies (4552 rows, 30 features)."""
    from sklearn.datasets import load_breast_cancer
    from sklearn.preprocessing import StandardScaler

    X, y = load_breast_cancer(return_X_y=True)
    X = StandardScaler().fit_transform(X)
    rng = np.random.default_rng(0)
    return np.vstack([X + 0.3 * rng.normal(size=X.shape) for _ in range(8)]), np.tile(y, 8)


@pytest.mark.parametrize("loss", SMOOTH)
def test_fit_and_updates_equal_numpy(cancer8, loss):
    X, y = cancer8
    Xd, yd = chunked(X, y, rows=500)
    a = df.LinearClassifier(loss=loss, C=0.5).fit(X, y)
    b = df.LinearClassifier(loss=loss, C=0.5).fit(Xd, yd)
    assert b._dask_passes <= 12
    assert_same(a, b, X, y)
    z = b.decision_function(Xd)
    assert isinstance(z, da.Array)
    assert np.max(np.abs(z.compute() - a.decision_function(X))) <= 1e-8
    rng = np.random.default_rng(1)
    # a 0.1% removal from the fitted model: at most two passes over the rows
    ids = rng.choice(b.sample_ids_, 5, replace=False)
    a.remove(ids)
    b.remove(ids)
    assert b._state.passes <= 2
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


def test_weighted_fit_and_dataframe_input(cancer8):
    dd = pytest.importorskip("dask.dataframe")
    pd = pytest.importorskip("pandas")
    X, y = cancer8
    X, y = X[:1500], y[:1500]
    w = np.random.default_rng(2).uniform(0.0, 2.0, X.shape[0])
    a = df.LinearClassifier(loss="logistic", C=2.0).fit(X, y, sample_weight=w)
    frame = dd.from_pandas(pd.DataFrame(X), npartitions=4)
    b = df.LinearClassifier(loss="logistic", C=2.0).fit(
        frame,
        dd.from_pandas(pd.Series(y), npartitions=4),
        sample_weight=da.from_array(w, chunks=300),
    )
    assert_same(a, b, X, y, w)
    a.remove([3, 4])
    b.remove([3, 4])
    keep = np.r_[0:3, 5 : X.shape[0]]
    assert_same(a, b, X[keep], y[keep], w[keep])


def test_remove_by_value_uses_the_digests(cancer8):
    X, y = cancer8
    Xd, yd = chunked(X[:800], y[:800], rows=200)
    a = df.LinearClassifier(loss="logistic").fit(X[:800], y[:800])
    b = df.LinearClassifier(loss="logistic").fit(Xd, yd)
    a.remove([10, 20])
    b.remove(X=X[[10, 20]], y=y[[10, 20]])
    keep = np.setdiff1d(np.arange(800), [10, 20])
    assert_same(a, b, X[keep], y[keep])


@pytest.mark.parametrize("regressor", [False, True])
def test_squared_loss_keeps_rows_and_removes_by_id(breast_cancer, regressor):
    X, y = breast_cancer
    yy = X[:, 0] * 0.5 + y if regressor else y
    make = (
        (lambda: df.LinearRegressor(C=0.5)) if regressor else (lambda: df.LinearClassifier(C=0.5))
    )
    a = make().fit(X, yy)
    b = make().fit(*chunked(X, yy))
    assert b._dask_rows is not None
    for upd in (
        dict(remove_ids=[3, 50, 400]),
        dict(relabel_ids=[7, 9], y_relabel=(yy[[7, 9]] + 1 if regressor else 1 - yy[[7, 9]])),
        dict(reweight_ids=[11], reweight_weight=[0.5]),
        dict(X_add=X[:4] * 1.1, y_add=yy[:4]),
    ):
        a.update(**upd)
        b.update(**upd)
        scale = np.max(np.abs(full_coef(a)))
        assert np.max(np.abs(full_coef(a) - full_coef(b))) <= 1e-10 * scale
    np.testing.assert_array_equal(a.sample_ids_, b.sample_ids_)
    # its rows are on the cluster, not in a file: saving is refused (a file without them would
    # load as keep_data=True unable to remove by id); keep_data=False saves its p x p state
    with pytest.raises(ValueError, match="Dask cluster"):
        df.save(b, "never-written.npz")
    assert not os.path.exists("never-written.npz")


def test_bad_input_and_failures_leave_the_model(cancer8, monkeypatch):
    from deltafit._dask import _newton as _dask_newton

    X, y = cancer8
    X, y = X[:1000], y[:1000]
    Xd, yd = chunked(X, y, rows=250)
    m = df.LinearClassifier(loss="logistic").fit(Xd, yd)
    before, n = full_coef(m).copy(), m.n_samples_

    def unchanged():
        np.testing.assert_array_equal(full_coef(m), before)
        assert m.n_samples_ == n
        assert m._dask_rows.n_blocks == 4

    bad = X.copy()
    bad[600, 3] = np.nan
    with pytest.raises(ValueError, match="NaN"):
        m.fit(da.from_array(bad, chunks=(250, -1)), yd)
    unchanged()
    with pytest.raises(ValueError, match="NaN"):
        m.add(da.from_array(bad[598:602], chunks=2), y[:4])
    unchanged()
    with pytest.raises(ValueError, match="unknown sample ids"):
        m.remove([5, 100000])
    unchanged()
    with pytest.raises(ValueError, match="callback"):
        df.LinearClassifier(loss="hinge", callback=print).fit(Xd, yd)
    y3 = da.from_array(y % 2 + (X[:, 0] > 1), chunks=250)
    # three classes: one-vs-rest (tests/test_dask_multiclass.py; the hinge:
    # tests/test_dask_hinge_multiclass.py)
    three = df.LinearClassifier(loss="logistic").fit(Xd, y3)
    assert three.coef_.shape == (3, X.shape[1])
    with pytest.raises(ValueError, match="Dask cluster"):
        m.problem_.gradient()  # formed from rows on the client: refused, named
    with pytest.raises(ValueError, match="Dask cluster"):
        df.save(m, "never-written.npz")
    unchanged()
    # a failure inside a pass (a lost worker that Dask could not recover, say): the update
    # raises and the model, its row store included, is as it was
    calls = {"n": 0}
    real = _dask_newton.block_share

    def flaky(*args, **kw):
        calls["n"] += 1
        if calls["n"] == 3:
            raise OSError("worker lost")
        return real(*args, **kw)

    monkeypatch.setattr(_dask_newton, "block_share", flaky)
    with pytest.raises(OSError):
        m.remove([1, 2])
    monkeypatch.setattr(_dask_newton, "block_share", real)
    unchanged()
    assert 1 in m.sample_ids_
    a = df.LinearClassifier(loss="logistic").fit(X, y)
    a.remove([1, 2])
    m.remove([1, 2])  # the model works on: its store still holds rows 1 and 2
    keep = np.r_[0, 3:1000]
    assert_same(a, m, X[keep], y[keep])


@pytest.mark.parametrize("loss", ["logistic", "squared"])
def test_sensitivity_of_a_dask_model_equals_numpy(cancer8, loss):
    X, y = cancer8
    X, y = X[:1200], y[:1200]
    a = df.LinearClassifier(loss=loss, C=0.5).fit(X, y)
    b = df.LinearClassifier(loss=loss, C=0.5).fit(*chunked(X, y, rows=300))
    method = "sphere" if loss == "logistic" else "auto"  # auto: the sphere without rows
    sa, sb = df.sensitivity(a, method=method), df.sensitivity(b)
    for s in (sa, sb):
        s.remove([1, 2, 30])
        s.add(X[:2] * 0.9, 1 - y[:2])
    lo, hi = sb.decision_bounds(da.from_array(X, chunks=(250, -1)))
    assert isinstance(lo, da.Array)
    lo2, hi2 = sa.decision_bounds(X)
    scale = 1.0 + np.max(np.abs(lo2))
    assert np.max(np.abs(lo.compute() - lo2)) <= 1e-10 * scale
    assert np.max(np.abs(hi.compute() - hi2)) <= 1e-10 * scale
    lo3, hi3 = sb.decision_bounds(X[:5])  # NumPy rows: NumPy bounds
    np.testing.assert_allclose(lo3, lo2[:5], rtol=0, atol=1e-10 * scale)
    # and the bounds hold: the retrained model lies inside
    b.remove([1, 2, 30])
    b.add(X[:2] * 0.9, 1 - y[:2])
    z = b.decision_function(X)
    slack = 1e-8
    assert np.all(lo2 - slack <= z) and np.all(z <= hi2 + slack)


@pytest.mark.parametrize("loss", SMOOTH)
def test_curvature_region_of_a_dask_model_equals_numpy(cancer8, loss, monkeypatch):
    """method='auto' answers with the curvature region (as on NumPy) from the stored
    Hessian (p × p) and the few samples one pass brings back: its bounds equal the NumPy
    model's region (both the cheap intervals at n = 4552) and contain the exact refit."""
    from deltafit.sensitivity.regions import _curvature, _curvature_linear

    X, y = cancer8
    Xd, yd = chunked(X, y, rows=2000)  # 3 blocks: the squared hinge's first pass brings back
    a = df.LinearClassifier(loss=loss, C=0.5).fit(X, y)  # 3 x 124 of its ~700 active samples
    b = df.LinearClassifier(loss=loss, C=0.5).fit(Xd, yd)
    assert b.problem_.rows_on_cluster and b.problem_.rows is None
    calls = []
    real = _curvature_linear._cluster_cache
    monkeypatch.setattr(
        _curvature_linear,
        "_cluster_cache",
        lambda prob, loss, k=None: calls.append(k) or real(prob, loss, k),
    )
    np.testing.assert_allclose(b.problem_.hessian(), a.problem_.hessian(), rtol=1e-9, atol=1e-9)
    rng = np.random.default_rng(3)
    changes = [
        dict(remove=[1, 2, 30]),
        dict(remove=rng.choice(X.shape[0], 40, False)),
        dict(relabel=[5, 6, 700]),
        dict(remove=[8], add=(X[:3] * 0.9, 1 - y[:3])),
    ]
    for ch in changes:
        sa, sb = df.sensitivity(a), df.sensitivity(b)
        assert sa.method == sb.method == "curvature"
        for s in (sa, sb):
            if "remove" in ch:
                s.remove(ch["remove"])
            if "relabel" in ch:
                s.relabel(ch["relabel"], 1 - y[ch["relabel"]])
            if "add" in ch:
                s.add(*ch["add"])
        lo, hi = sb.decision_bounds(X)
        lo_a, hi_a = sa.decision_bounds(X)
        scale = 1.0 + np.max(np.abs(lo_a))
        assert np.max(np.abs(lo - lo_a)) <= 1e-8 * scale
        assert np.max(np.abs(hi - hi_a)) <= 1e-8 * scale
        sphere = df.sensitivity(b, method="sphere")
        if "remove" in ch:
            sphere.remove(ch["remove"])
        # the exact refit of the changed problem (NumPy, from the rows) lies inside
        c = df.LinearClassifier(loss=loss, C=0.5).fit(X, y)
        if "remove" in ch:
            c.remove(ch["remove"])
        if "relabel" in ch:
            c.relabel(ch["relabel"], 1 - y[ch["relabel"]])
        if "add" in ch:
            c.add(*ch["add"])
        z = c.decision_function(X)
        slack = 1e-8 + c.grad_norm_ * np.sqrt(np.sum(X * X, axis=1) + 1.0)
        assert np.all(lo - slack <= z) and np.all(z <= hi + slack)
    if loss == "squared_hinge":  # a region asked for more samples than the first pass gave
        assert any(k is not None for k in calls), calls
    with pytest.raises(ValueError, match="Dask cluster"):
        s = df.sensitivity(b)
        s.remove([1])
        _curvature.curvature_region(s, mode="exact")


@pytest.mark.parametrize("loss", SMOOTH)
def test_consecutive_small_updates_take_at_most_two_passes(cancer8, loss):
    """Five consecutive 0.1% removals: at most two passes each (before the Hessian was
    summed in the pass predicted to be the last, M aged and the logistic loss took
    [2, 2, 3, 2, 3] passes here), each result equal to the NumPy model within the
    certificates, and M exact at β (the curvature regions read it as the Hessian there)."""
    X, y = cancer8
    a = df.LinearClassifier(loss=loss, C=0.5).fit(X, y)
    b = df.LinearClassifier(loss=loss, C=0.5).fit(*chunked(X, y, rows=500))
    rng = np.random.default_rng(1)
    passes = []
    for _ in range(5):
        ids = rng.choice(b.sample_ids_, 5, replace=False)  # 0.1% of 4552
        a.remove(ids)
        b.remove(ids)
        passes.append(b._state.passes)
        assert_same(a, b, *live(b, X, y))
    assert max(passes) <= 2, passes
    if loss == "logistic":
        np.testing.assert_array_equal(b._state.beta_ref, b._state.beta)
        Xl, _ = live(b, X, y)
        Phi = np.column_stack([Xl, np.ones(Xl.shape[0])])
        s = expit(Phi @ full_coef(b))
        H = np.eye(Phi.shape[1]) + b.C * (Phi.T * (s * (1.0 - s))) @ Phi
        np.testing.assert_allclose(b.problem_.hessian(), H, rtol=0, atol=1e-9 * np.max(H))


@pytest.mark.parametrize("loss", SMOOTH)
def test_block_share_equals_the_rows_sums_whatever_the_chunking(cancer8, loss, monkeypatch):
    """A block task's J, ∇J, ∇J(0) and Hessian shares equal the sums over its live rows
    computed here directly (expit, one product), whether the task takes the block at once or
    in chunks of 64 rows (gradient-only and Hessian tasks chunk differently)."""
    from functools import partial

    from deltafit._dask import _newton as dn
    from deltafit._dask._rows import BlockMods
    from deltafit.losses import get_loss
    from deltafit.models._linear import features

    X, y = cancer8
    x, t = X[:1000], np.where(y[:1000] > 0, 1.0, -1.0)
    rng = np.random.default_rng(3)
    w = rng.uniform(0.5, 2.0, size=1000)
    live = rng.random(1000) > 0.1
    beta = rng.normal(scale=0.3, size=31)
    C = 0.7
    spec = dn.PassSpec(partial(features, feature_map=None, s=1.0), get_loss(loss), C)
    Phi = np.column_stack([x, np.ones(1000)])
    z, cw = Phi @ beta, C * w * live
    if loss == "logistic":
        val, d1 = np.logaddexp(0.0, -t * z), -t * expit(-t * z)
        d2, d10 = expit(t * z) * expit(-t * z), -t * 0.5
    else:
        h = np.maximum(0.0, 1.0 - t * z)
        val, d1, d2, d10 = h * h, -2.0 * t * h, 2.0 * (h > 0), -2.0 * t
    ref_val, ref_G = float(cw @ val), Phi.T @ (cw * d1)
    ref_G0, ref_H = Phi.T @ (cw * d10), (Phi.T * (cw * d2)) @ Phi
    for nbytes in (None, 1):
        if nbytes is not None:  # 64 rows a chunk (the floor)
            monkeypatch.setattr(dn, "_CHUNK_BYTES", nbytes)
            monkeypatch.setattr(dn, "_GRAD_CHUNK_BYTES", nbytes)
        mods = BlockMods(live)
        g = dn.block_share(x, t, w, mods, spec, beta, g0=True)
        hs = dn.block_share(x, t, w, mods, spec, beta, hessian=True)
        scale = np.max(np.abs(ref_H))
        assert abs(g.val - ref_val) <= 1e-10 * abs(ref_val)
        np.testing.assert_allclose(g.G[:, 0], ref_G, rtol=0, atol=1e-10 * scale)
        np.testing.assert_allclose(g.G[:, 1], ref_G0, rtol=0, atol=1e-10 * scale)
        np.testing.assert_allclose(hs.G[:, 0], ref_G, rtol=0, atol=1e-10 * scale)
        np.testing.assert_allclose(hs.H, ref_H, rtol=0, atol=1e-12 * scale)
        np.testing.assert_array_equal(hs.H, hs.H.T)


def test_block_share_of_an_unaligned_block(cancer8):
    """A block that a worker deserialised at an address that is no multiple of 8 (as blocks
    sent inside a graph can be) gives the aligned block's shares exactly, its chunks
    computed from aligned copies (NumPy's unaligned loops were several times slower)."""
    from functools import partial

    from deltafit._dask import _newton as dn
    from deltafit._dask._rows import BlockMods
    from deltafit.losses import get_loss
    from deltafit.models._linear import features

    X, y = cancer8
    x, t = np.ascontiguousarray(X[:500]), np.where(y[:500] > 0, 1.0, -1.0)
    buf = np.zeros(x.nbytes + 1, dtype=np.uint8)
    xu = np.ndarray(x.shape, dtype=np.float64, buffer=buf, offset=1)
    xu[...] = x
    assert not xu.flags.aligned
    spec = dn.PassSpec(partial(features, feature_map=None, s=1.0), get_loss("logistic"), 0.7)
    assert dn._Chunk(xu[:64], spec).x.flags.aligned
    beta = np.random.default_rng(5).normal(scale=0.3, size=31)
    for kw in ({"g0": True}, {"hessian": True}):
        a = dn.block_share(x, t, None, BlockMods(), spec, beta, **kw)
        b = dn.block_share(xu, t, None, BlockMods(), spec, beta, **kw)
        assert a.val == b.val
        np.testing.assert_array_equal(a.G, b.G)
        if a.H is not None:
            np.testing.assert_array_equal(a.H, b.H)


def test_one_update_relabels_and_reweights_the_same_sample(cancer8, monkeypatch):
    """On a weighted fit, a sample relabelled and reweighted in one update, another removed
    and one reweighted alone: the changed rows' labels and weights before and after (read
    from the ledger in one vectorised step) give the NumPy model within the certificates."""
    X, y = cancer8
    w = np.random.default_rng(4).uniform(0.5, 2.0, size=X.shape[0])
    a = df.LinearClassifier(loss="logistic", C=0.5).fit(X, y, sample_weight=w)
    b = df.LinearClassifier(loss="logistic", C=0.5).fit(
        *chunked(X, y, rows=500), sample_weight=da.from_array(w, chunks=500)
    )
    ids = b.sample_ids_
    i, j, k = int(ids[10]), int(ids[3000]), int(ids[77])
    both = dict(
        relabel_ids=[i],
        y_relabel=[1 - y[i]],
        reweight_ids=[i, k],
        reweight_weight=[3.0, 0.25],
        remove_ids=[j],
    )
    from deltafit._dask._newton import DaskNewtonState

    seen = []
    apply = DaskNewtonState.apply_change
    monkeypatch.setattr(
        DaskNewtonState,
        "apply_change",
        lambda self, change: (seen.append(change.dask_changed), apply(self, change))[1],
    )
    a.update(**both)
    b.update(**both)
    # the changed rows in id order: Φ, t and C w before, t and C w after
    Phi, tb, cb, ta, ca = seen[0]
    order = sorted([i, j, k])
    t = np.where(y > 0, 1.0, -1.0)
    np.testing.assert_array_equal(Phi[:, :-1], X[order])
    np.testing.assert_array_equal(tb, t[order])
    np.testing.assert_allclose(cb, 0.5 * w[order], rtol=1e-15)
    after = {i: (-t[i], 3.0), j: (t[j], 0.0), k: (t[k], 0.25)}
    np.testing.assert_array_equal(ta, [after[s][0] for s in order])
    np.testing.assert_allclose(ca, [0.5 * after[s][1] for s in order], rtol=1e-15)
    y2 = y.copy()
    y2[i] = 1 - y[i]
    w = w.copy()
    w[i], w[k] = 3.0, 0.25
    keep = b.sample_ids_
    assert j not in set(keep.tolist())
    assert_same(a, b, X[keep], y2[keep], w[keep])
    np.testing.assert_array_equal(a.sample_weight_, b.sample_weight_)
