"""The compiled row kernels of the logistic Dask passes (``_dask/_kernels.py``, numba) against
NumPy's products on breast cancer, and the live masks a pass sends to worker processes.

* A block task's shares (J, ∇J, ∇J(0), the Hessian) through the kernels equal the NumPy
  path's (``USE_KERNELS`` off) to 1e-12 of their scale, with weights and removed rows, with
  and without the constant column, whatever the chunking; the Hessian stays exactly
  symmetric.
* A Dask model fitted and updated through the kernels equals the NumPy model within the
  certificates (``‖β − β*‖ ≤ grad_norm``, Okumura et al., KDD'15, Thm 6), and the model of
  the same data fitted without the kernels.
* A :class:`~deltafit._dask._rows.BlockMods` pickles its live mask as bits and comes back
  equal.
"""

import pickle
from functools import partial

import numpy as np
import pytest

import deltafit as df
from dask_helpers import (  # noqa: F401
    _threads,  # noqa: F401  (autouse: the threaded scheduler)
    assert_newton_same,
    chunked,
    live,
)

pytest.importorskip("numba")
dask = pytest.importorskip("dask")


@pytest.fixture(scope="module")
def cancer():
    """Breast cancer, standardised (569 rows, 30 features), labels ±1."""
    from sklearn.datasets import load_breast_cancer
    from sklearn.preprocessing import StandardScaler

    X, y = load_breast_cancer(return_X_y=True)
    return StandardScaler().fit_transform(X), y


def _spec(s):
    from deltafit._dask import _newton as dn
    from deltafit._linalg._features import features
    from deltafit.losses import get_loss

    return dn.PassSpec(partial(features, feature_map=None, s=s), get_loss("logistic"), 0.7)


@pytest.mark.parametrize("chunk_bytes", [None, 1])
@pytest.mark.parametrize("s", [1.0, 2.5, None])
def test_kernel_shares_equal_numpy(cancer, monkeypatch, chunk_bytes, s):
    from deltafit._dask import _newton as dn
    from deltafit._dask._rows import BlockMods

    X, y = cancer
    t = np.where(y > 0, 1.0, -1.0)
    rng = np.random.default_rng(0)
    w = rng.uniform(0.5, 2.0, size=X.shape[0])
    mask = rng.random(X.shape[0]) > 0.1
    x = X
    spec = _spec(s)
    assert spec.plain
    beta = rng.normal(scale=0.3, size=30 + (s is not None))
    if chunk_bytes is not None:  # 64 rows a chunk (the floor)
        monkeypatch.setattr(dn, "_CHUNK_BYTES", chunk_bytes)
        monkeypatch.setattr(dn, "_GRAD_CHUNK_BYTES", chunk_bytes)
    for kw in ({}, {"g0": True}, {"hessian": True}, {"g0": True, "hessian": True}):
        monkeypatch.setattr(dn, "USE_KERNELS", False)
        a = dn.block_share(x, t, w, BlockMods(mask), spec, beta, **kw)
        monkeypatch.setattr(dn, "USE_KERNELS", True)
        assert dn._kernels() is not None
        b = dn.block_share(x, t, w, BlockMods(mask), spec, beta, **kw)
        assert b.n == a.n and b.G.shape == a.G.shape
        assert abs(b.val - a.val) <= 1e-12 * abs(a.val)
        scale = np.max(np.abs(a.G)) + 1.0
        np.testing.assert_allclose(b.G, a.G, rtol=0, atol=1e-12 * scale)
        if kw.get("hessian"):
            np.testing.assert_allclose(b.H, a.H, rtol=0, atol=1e-12 * np.max(np.abs(a.H)))
            np.testing.assert_array_equal(b.H, b.H.T)
        else:
            assert b.H is None


def test_models_through_the_kernels_equal_numpy(cancer, monkeypatch):
    """Fit, a removal and an addition on the Dask rows through the kernels, against the NumPy
    model and the Dask model without the kernels."""
    from deltafit._dask import _newton as dn

    X, y = cancer
    rng = np.random.default_rng(1)
    ids = rng.choice(X.shape[0], 6, replace=False)
    Xa, ya = X[:5] * 0.9 + 0.05, 1 - y[:5]
    models = {}
    for on in (True, False):
        monkeypatch.setattr(dn, "USE_KERNELS", on)
        b = df.LinearClassifier(loss="logistic", C=0.5).fit(*chunked(X, y, rows=100))
        b.remove(ids)
        b.add(*chunked(Xa, ya, rows=4))
        models[on] = b
    a = df.LinearClassifier(loss="logistic", C=0.5).fit(X, y)
    a.remove(ids)
    a.add(Xa, ya)
    rows = live(models[True], X, y, (Xa, ya))
    assert_newton_same(a, models[True], *rows)
    assert_newton_same(models[False], models[True], *rows)


def test_block_mods_pickle_their_live_mask_as_bits():
    from deltafit._dask._rows import BlockMods

    rng = np.random.default_rng(2)
    mask = rng.random(10_001) > 0.01
    m = BlockMods(mask, np.array([3, 7]), np.array([1.0, -1.0]), None, None)
    raw = pickle.dumps(mask)
    got = pickle.loads(pickle.dumps(m))
    assert len(pickle.dumps(m)) < len(raw) / 4
    assert got.live.dtype == bool and got.live.flags.writeable
    np.testing.assert_array_equal(got.live, mask)
    np.testing.assert_array_equal(got.t_at, [3, 7])
    np.testing.assert_array_equal(got.t_val, [1.0, -1.0])
    assert got.w_at is None and got.w_val is None
    assert pickle.loads(pickle.dumps(BlockMods())).live is None


def test_no_kernels_with_numba_jit_disabled(monkeypatch):
    """``NUMBA_DISABLE_JIT=1`` would leave the kernels plain Python loops over every row: the
    passes then keep NumPy's products."""
    import numba

    from deltafit._dask import _newton as dn

    assert dn._kernels() is not None
    monkeypatch.setattr(numba.config, "DISABLE_JIT", True)
    assert dn._kernels() is None
    monkeypatch.setattr(dn, "USE_KERNELS", False)
    monkeypatch.setattr(numba.config, "DISABLE_JIT", False)
    assert dn._kernels() is None
