"""deltafit.stream.Pegasos and LSQSGD against plain-Python loops written from the papers."""

import copy
import os
import subprocess
import sys

import numpy as np
import pytest
from sklearn.preprocessing import StandardScaler

from deltafit.stream import LSQSGD, Pegasos
from reference import lsqsgd_reference, pegasos_reference


@pytest.fixture(scope="module")
def bc():
    from deltafit.datasets import load_breast_cancer

    X, y = load_breast_cancer()
    return StandardScaler().fit_transform(X), y


@pytest.mark.parametrize("lam", [1e-1, 1e-3, 1e-6])
@pytest.mark.parametrize("projection", [False, True])
@pytest.mark.parametrize("fit_intercept, scaling", [(True, 1.0), (True, 3.0), (False, 1.0)])
def test_pegasos_equals_reference(bc, lam, projection, fit_intercept, scaling):
    X, y = bc
    p = Pegasos(lam=lam, projection=projection, fit_intercept=fit_intercept,
                intercept_scaling=scaling).fit(X, y)
    w, t = pegasos_reference(X, np.where(y == 1, 1.0, -1.0), lam,
                             1 / np.sqrt(lam) if projection else np.inf,
                             scaling if fit_intercept else 0.0)
    scale = np.max(np.abs(w))
    np.testing.assert_allclose(p.coef_, w[:-1], rtol=1e-10, atol=1e-10 * scale)
    assert p.intercept_ == pytest.approx(w[-1] * (scaling if fit_intercept else 0.0),
                                         rel=1e-10, abs=1e-10 * scale)
    assert p.t_ == t == X.shape[0]
    if projection:
        assert np.linalg.norm(np.r_[p.coef_, w[-1]]) <= 1 / np.sqrt(lam) * (1 + 1e-12)


@pytest.mark.parametrize("alpha", [None, 0.01, 1 / np.sqrt(569)])
@pytest.mark.parametrize("radius", [1.0, 0.1, np.inf])
def test_lsqsgd_equals_reference(bc, alpha, radius):
    X, y = bc
    y = y.astype(float)
    m = LSQSGD(alpha=alpha, radius=radius, intercept_scaling=0.5).fit(X, y)
    w, avg, t, _ = lsqsgd_reference(X, y, alpha, radius, 0.5)
    np.testing.assert_allclose(m.coef_, avg[:-1], rtol=1e-10, atol=1e-12)
    assert m.intercept_ == pytest.approx(avg[-1] * 0.5, rel=1e-10, abs=1e-12)
    assert m.t_ == t
    np.testing.assert_allclose(m.predict(X), X @ avg[:-1] + 0.5 * avg[-1], rtol=1e-10,
                               atol=1e-12)


@pytest.mark.parametrize("make", [lambda: Pegasos(lam=1e-3), lambda: LSQSGD(alpha=0.02)])
def test_partial_fit_in_pieces_and_learn_one_equal_fit(bc, make):
    X, y = bc
    full = make().fit(X, y)
    pieces = make()
    for a in range(0, X.shape[0], 100):
        pieces.partial_fit(X[a:a + 100], y[a:a + 100], classes=[0, 1])
    one = make()
    for x, yi in zip(X, y):
        one.learn_one(dict(enumerate(x)), yi)  # the classifier waits for both labels
    for m in (pieces, one):
        np.testing.assert_allclose(m.coef_, full.coef_, rtol=1e-12, atol=1e-14)
        assert m.t_ == full.t_
    assert one.predict_one(X[5]) == full.predict(X[5:6])[0]


def test_labels_any_two_values(bc):
    X, y = bc
    labels = np.where(y == 1, "benign", "malignant")
    p = Pegasos(lam=1e-3).fit(X, labels)
    q = Pegasos(lam=1e-3).fit(X, np.where(y == 1, 1, -1))
    assert p.classes_.tolist() == ["benign", "malignant"]
    # "benign" sorts first: it is the -1 class, the sign flips relative to q
    np.testing.assert_allclose(p.decision_function(X), -q.decision_function(X), rtol=1e-12)
    assert set(p.predict(X)) <= {"benign", "malignant"}


def test_snapshot_restore_and_copy(bc):
    X, y = bc
    p = Pegasos(lam=1e-3).partial_fit(X[:200], y[:200], classes=[0, 1])
    snap = p.snapshot()
    c = copy.copy(p)
    coef = p.coef_.copy()
    p.partial_fit(X[200:], y[200:])
    assert not np.allclose(p.coef_, coef)
    np.testing.assert_array_equal(c.coef_, coef)  # the copy did not move
    p.restore(snap)
    np.testing.assert_array_equal(p.coef_, coef)
    assert p.t_ == 200
    with pytest.raises(ValueError, match="snapshot"):
        p.restore(snap[:-1])
    c.partial_fit(X[200:], y[200:])
    np.testing.assert_allclose(c.coef_, Pegasos(lam=1e-3).fit(X, y).coef_, rtol=1e-12)


def test_shuffle_fit_is_reproducible(bc):
    X, y = bc
    a = Pegasos(lam=1e-3, shuffle=True, random_state=0).fit(X, y)
    b = Pegasos(lam=1e-3, shuffle=True, random_state=0).fit(X, y)
    c = Pegasos(lam=1e-3, shuffle=True, random_state=1).fit(X, y)
    np.testing.assert_array_equal(a.coef_, b.coef_)
    assert not np.allclose(a.coef_, c.coef_)
    perm = np.random.RandomState(0).permutation(X.shape[0])
    np.testing.assert_allclose(a.coef_, Pegasos(lam=1e-3).fit(X[perm], y[perm]).coef_)


def test_bad_input_and_failed_update_leaves_model(bc):
    X, y = bc
    for bad, msg in [(dict(lam=0.0), "lam"), (dict(lam=np.nan), "lam"),
                     (dict(intercept_scaling=-1.0), "intercept_scaling"),
                     (dict(projection="yes"), "projection")]:
        with pytest.raises(ValueError, match=msg):
            Pegasos(**bad).fit(X, y)
    for bad, msg in [(dict(alpha=-1.0), "alpha"), (dict(radius=0.0), "radius")]:
        with pytest.raises(ValueError, match=msg):
            LSQSGD(**bad).fit(X, y.astype(float))
    with pytest.raises(ValueError, match="binary"):
        Pegasos().fit(X, np.arange(X.shape[0]) % 3)
    with pytest.raises(ValueError, match="one class"):
        Pegasos().partial_fit(X[:5], np.zeros(5))
    p = Pegasos(lam=1e-3).fit(X, y)
    before = p.snapshot()
    Xn = X[:10].copy()
    Xn[2, 3] = np.inf
    with pytest.raises(ValueError, match="infinity"):
        p.partial_fit(Xn, y[:10])
    with pytest.raises(ValueError, match="not in classes_"):
        p.partial_fit(X[:10], np.full(10, 7))
    with pytest.raises(ValueError, match="features"):
        p.partial_fit(X[:10, :5], y[:10])
    np.testing.assert_array_equal(p.snapshot(), before)
    with pytest.raises(ValueError, match="NaN"):
        LSQSGD().fit(X, np.full(X.shape[0], np.nan))


def test_interpreted_loops_equal_compiled(bc, tmp_path):
    """numba's NUMBA_DISABLE_JIT runs the very same loops as Python: same numbers."""
    X, y = bc
    code = (
        "import numpy as np, sys; from deltafit.stream import Pegasos, LSQSGD;"
        "from deltafit.model_selection import treecv; from sklearn.model_selection import KFold;"
        "d = np.load(sys.argv[1]); X, y = d['X'], d['y'];"
        "r = treecv(Pegasos(lam=1e-2), X, y, cv=KFold(6, shuffle=True, random_state=0),"
        " shuffle=True, random_state=3);"
        "w = LSQSGD(alpha=0.05).fit(X, y.astype(float)).coef_;"
        "np.savez(sys.argv[2], dec=r.decision, w=w)"
    )
    data = tmp_path / "d.npz"
    np.savez(data, X=X[:120], y=y[:120])
    outs = []
    for flag in ("0", "1"):
        out = tmp_path / f"o{flag}.npz"
        env = dict(os.environ, NUMBA_DISABLE_JIT=flag)
        subprocess.run([sys.executable, "-c", code, str(data), str(out)], check=True, env=env,
                       timeout=300)
        outs.append(np.load(out))
    np.testing.assert_allclose(outs[0]["dec"], outs[1]["dec"], rtol=1e-10, atol=1e-12)
    np.testing.assert_allclose(outs[0]["w"], outs[1]["w"], rtol=1e-10, atol=1e-14)
