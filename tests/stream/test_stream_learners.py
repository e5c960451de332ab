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
    p = Pegasos(
        lam=lam, projection=projection, fit_intercept=fit_intercept, intercept_scaling=scaling
    ).fit(X, y)
    w, t = pegasos_reference(
        X,
        np.where(y == 1, 1.0, -1.0),
        lam,
        1 / np.sqrt(lam) if projection else np.inf,
        scaling if fit_intercept else 0.0,
    )
    scale = np.max(np.abs(w))
    np.testing.assert_allclose(p.coef_, w[:-1], rtol=1e-10, atol=1e-10 * scale)
    assert p.intercept_ == pytest.approx(
        w[-1] * (scaling if fit_intercept else 0.0), rel=1e-10, abs=1e-10 * scale
    )
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
    np.testing.assert_allclose(m.predict(X), X @ avg[:-1] + 0.5 * avg[-1], rtol=1e-10, atol=1e-12)


@pytest.mark.parametrize("make", [lambda: Pegasos(lam=1e-3), lambda: LSQSGD(alpha=0.02)])
def test_partial_fit_in_pieces_and_learn_one_equal_fit(bc, make):
    X, y = bc
    full = make().fit(X, y)
    pieces = make()
    for a in range(0, X.shape[0], 100):
        pieces.partial_fit(X[a : a + 100], y[a : a + 100], classes=[0, 1])
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
    for bad, msg in [
        (dict(lam=0.0), "lam"),
        (dict(lam=np.nan), "lam"),
        (dict(intercept_scaling=-1.0), "intercept_scaling"),
        (dict(projection="yes"), "projection"),
    ]:
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
        subprocess.run(
            [sys.executable, "-c", code, str(data), str(out)], check=True, env=env, timeout=300
        )
        outs.append(np.load(out))
    np.testing.assert_allclose(outs[0]["dec"], outs[1]["dec"], rtol=1e-10, atol=1e-12)
    np.testing.assert_allclose(outs[0]["w"], outs[1]["w"], rtol=1e-10, atol=1e-14)


# ===========================================================================
# Independent suite: Pegasos / LSQSGD against the plain-Python learners of treecv_reference.py
# (written from the spec's formulas: full weight vector, no scaling trick, fsum dot products).
# ===========================================================================
import pickle  # noqa: E402

from sklearn.exceptions import NotFittedError  # noqa: E402

from treecv_reference import PlainLSQSGD, PlainPegasos  # noqa: E402


def _close(a, b, rel=1e-10):
    a, b = np.asarray(a, dtype=np.float64), np.asarray(b, dtype=np.float64)
    scale = max(1.0, float(np.max(np.abs(b)))) if b.size else 1.0
    np.testing.assert_allclose(a, b, rtol=rel, atol=rel * scale)


def _pm(y, positive=1):
    return np.where(np.asarray(y) == positive, 1.0, -1.0)


@pytest.fixture(scope="module")
def dig(digits):
    X, y = digits
    return X[:400], y[:400]


PEG_GRID = [
    dict(lam=1.0),
    dict(lam=1e-2),
    dict(lam=1e-5),
    dict(lam=1e-2, projection=True),
    dict(lam=1.0, projection=True),
    dict(lam=1e-3, fit_intercept=False),
    dict(lam=1e-2, intercept_scaling=0.2),
    dict(lam=1e-2, intercept_scaling=5.0, projection=True),
]


@pytest.mark.parametrize(
    "params", PEG_GRID, ids=lambda p: "-".join(f"{k}={v}" for k, v in p.items())
)
@pytest.mark.parametrize("data", ["bc", "digits"])
def test_ind_pegasos_fit_equals_plain(bc, dig, params, data):
    X, y = bc if data == "bc" else dig
    X, y = X[:300], y[:300]
    p = Pegasos(**params).fit(X, y)
    q = PlainPegasos(
        params["lam"],
        params.get("projection", False),
        params.get("fit_intercept", True),
        params.get("intercept_scaling", 1.0),
    ).partial_fit(X, _pm(y))
    _close(p.coef_, q.coef)
    _close(p.intercept_, q.intercept)
    _close(p.decision_function(X), q.decision(X))
    assert p.t_ == 300 and p.coef_.shape == (X.shape[1],) and isinstance(p.intercept_, float)
    np.testing.assert_array_equal(p.predict(X), np.where(p.decision_function(X) > 0, 1, 0))
    assert p.score(X, y) == pytest.approx(np.mean(p.predict(X) == y))
    if not params.get("fit_intercept", True):
        assert p.intercept_ == 0.0


@pytest.mark.parametrize("alpha", [None, 1e-3, 0.05])
@pytest.mark.parametrize("radius", [0.3, 1.0, 10.0, np.inf])
@pytest.mark.parametrize("fit_intercept, scaling", [(True, 1.0), (True, 2.5), (False, 1.0)])
def test_ind_lsqsgd_fit_equals_plain(dig, alpha, radius, fit_intercept, scaling):
    X, y = dig
    X, y = X[:250], y[:250] + 0.3 * X[:250, 20]
    m = LSQSGD(
        alpha=alpha, radius=radius, fit_intercept=fit_intercept, intercept_scaling=scaling
    ).fit(X, y)
    q = PlainLSQSGD(alpha, radius, fit_intercept, scaling).partial_fit(X, y)
    _close(m.coef_, q.coef)
    _close(m.intercept_, q.intercept)
    _close(m.predict(X), q.decision(X))
    assert m.t_ == 250
    if not fit_intercept:
        assert m.intercept_ == 0.0
    # the averaged iterate of points in the ball is in the ball
    assert np.linalg.norm(
        np.r_[m.coef_, m.intercept_ / scaling if fit_intercept else 0.0]
    ) <= radius * (1 + 1e-12)


def test_ind_intercept_is_a_constant_feature(bc):
    """fit_intercept with scaling s == no intercept on [X, s] (ARCHITECTURE.md's convention)."""
    X, y = bc
    Xs = np.column_stack([X, np.full(len(X), 2.0)])
    a = Pegasos(lam=1e-2, intercept_scaling=2.0).fit(X, y)
    b = Pegasos(lam=1e-2, fit_intercept=False).fit(Xs, y)
    _close(a.coef_, b.coef_[:-1], 1e-12)
    _close(a.intercept_, 2.0 * b.coef_[-1], 1e-12)
    c = LSQSGD(alpha=0.01, intercept_scaling=2.0).fit(X, y.astype(float))
    d = LSQSGD(alpha=0.01, fit_intercept=False).fit(Xs, y.astype(float))
    _close(c.coef_, d.coef_[:-1], 1e-12)
    _close(c.intercept_, 2.0 * d.coef_[-1], 1e-12)


def test_ind_projection_keeps_every_iterate_in_the_ball(bc):
    X, y = bc
    lam = 0.5
    p = Pegasos(lam=lam, projection=True)
    q = PlainPegasos(lam, projection=True)
    for i in range(60):
        p.partial_fit(X[i : i + 1], y[i : i + 1], classes=[0, 1])
        q.partial_fit(X[i : i + 1], _pm(y[i : i + 1]))
        w = np.r_[p.coef_, p.intercept_]
        assert np.linalg.norm(w) <= (1 / np.sqrt(lam)) * (1 + 1e-12)
        _close(w, q.w)
    # without projection the same run leaves the ball at some point
    free = Pegasos(lam=lam).fit(X[:60], y[:60])
    assert not np.allclose(free.coef_, p.coef_)


@pytest.mark.parametrize(
    "make, plain, t",
    [
        (lambda: Pegasos(lam=1e-3), lambda: PlainPegasos(1e-3), "pm"),
        (lambda: LSQSGD(), lambda: PlainLSQSGD(None, 1.0), "real"),
        (lambda: LSQSGD(alpha=0.02, radius=np.inf), lambda: PlainLSQSGD(0.02, np.inf), "real"),
    ],
)
def test_ind_partial_fit_pieces_learn_one_equal_fit(bc, make, plain, t):
    X, y = bc
    yt = y if t == "pm" else y.astype(float) * 2 - 0.5
    full = make().fit(X, yt)
    cuts = [0, 1, 2, 7, 50, 51, 300, 569]
    pieces, ref = make(), plain()
    for a, b in zip(cuts[:-1], cuts[1:]):
        pieces.partial_fit(X[a:b], yt[a:b], **({"classes": [0, 1]} if t == "pm" else {}))
        ref.partial_fit(X[a:b], _pm(yt[a:b]) if t == "pm" else yt[a:b])
        assert pieces.t_ == b
    np.testing.assert_allclose(pieces.coef_, full.coef_, rtol=1e-13, atol=1e-15)
    _close(pieces.coef_, ref.coef)
    one_d, one_a = make(), make()
    for i in range(len(X)):
        one_d.learn_one({j: v for j, v in enumerate(X[i]) if v != 0.0}, yt[i])
        one_a.learn_one(X[i], yt[i])
    for m in (one_d, one_a):
        np.testing.assert_allclose(m.coef_, full.coef_, rtol=1e-13, atol=1e-15)
        assert m.t_ == len(X)
    for i in (0, 10, 400):
        assert one_d.predict_one(dict(enumerate(X[i]))) == full.predict(X[i : i + 1])[0]
        assert one_a.predict_one(X[i]) == full.predict(X[i : i + 1])[0]


def test_ind_learn_one_waits_for_both_labels(bc):
    # the first samples all of one class: Pegasos cannot know its -1/+1 mapping yet
    X, y = bc
    order = np.r_[np.flatnonzero(y == 1)[:5], np.flatnonzero(y == 0)[:5], np.arange(100, 200)]
    p = Pegasos(lam=1e-2)
    for i in order:
        p.learn_one(X[i], y[i])
    ref = PlainPegasos(1e-2).partial_fit(X[order], _pm(y[order]))
    _close(p.decision_function(X), ref.decision(X))
    assert p.t_ == len(order)


def test_ind_snapshot_restore(bc):
    X, y = bc
    for make, yy in (
        (lambda: Pegasos(lam=1e-3, projection=True), y),
        (lambda: LSQSGD(alpha=0.01), y.astype(float)),
    ):
        m = make().fit(X[:250], yy[:250])
        snap = m.snapshot()
        dec = m.predict(X) if isinstance(m, LSQSGD) else m.decision_function(X)
        snap_copy = np.array(snap, copy=True)
        m.partial_fit(X[250:400], yy[250:400])
        np.testing.assert_array_equal(snap, snap_copy)  # the snapshot is not a view of the state
        assert m.t_ == 400
        m.restore(snap)
        assert m.t_ == 250
        dec2 = m.predict(X) if isinstance(m, LSQSGD) else m.decision_function(X)
        np.testing.assert_array_equal(dec, dec2)
        # continuing after the restore is the uninterrupted run
        m.partial_fit(X[250:], yy[250:])
        np.testing.assert_array_equal(m.coef_, make().fit(X, yy).coef_)
        # restore twice from the same snapshot
        m.restore(snap)
        m.restore(snap)
        assert m.t_ == 250
        with pytest.raises(ValueError, match="snapshot"):
            m.restore(np.r_[snap, 0.0])
        bad = np.array(snap, copy=True)
        bad[0] = np.nan
        with pytest.raises(ValueError, match="snapshot"):
            m.restore(bad)
        assert m.t_ == 250


def test_ind_copies_are_independent(bc):
    X, y = bc
    for make, yy in ((lambda: Pegasos(lam=1e-3), y), (lambda: LSQSGD(), y.astype(float))):
        m = make().fit(X[:200], yy[:200])
        shallow, deep = copy.copy(m), copy.deepcopy(m)
        restored = pickle.loads(pickle.dumps(m))
        before = m.coef_.copy()
        m.partial_fit(X[200:], yy[200:])
        for c in (shallow, deep, restored):
            np.testing.assert_array_equal(c.coef_, before)
            assert c.t_ == 200
        shallow.partial_fit(X[200:300], yy[200:300])
        np.testing.assert_array_equal(m.coef_, make().fit(X, yy).coef_)  # m unaffected
        for c in (deep, restored):
            c.partial_fit(X[200:], yy[200:])
            np.testing.assert_array_equal(c.coef_, m.coef_)
        # a copy of an unfitted learner is unfitted; a copy made mid-learn_one keeps its own
        # waiting samples
        fresh = copy.copy(make())
        with pytest.raises(NotFittedError):
            fresh.snapshot()


def test_ind_copy_during_learn_one_wait_is_independent(bc):
    X, y = bc
    i1 = np.flatnonzero(y == 1)[:3]
    i0 = np.flatnonzero(y == 0)[:3]
    p = Pegasos(lam=1e-2)
    for i in i1:
        p.learn_one(X[i], y[i])
    c = copy.copy(p)
    p.learn_one(X[i0[0]], y[i0[0]])  # p now fits on 4 samples
    c.learn_one(X[i0[1]], y[i0[1]])  # c on 3 others + i0[1]
    a = PlainPegasos(1e-2).partial_fit(X[np.r_[i1, i0[0]]], _pm(y[np.r_[i1, i0[0]]]))
    b = PlainPegasos(1e-2).partial_fit(X[np.r_[i1, i0[1]]], _pm(y[np.r_[i1, i0[1]]]))
    _close(p.decision_function(X), a.decision(X))
    _close(c.decision_function(X), b.decision(X))


def test_ind_shuffle(bc):
    X, y = bc
    a = Pegasos(lam=1e-2, shuffle=True, random_state=3).fit(X, y)
    b = Pegasos(lam=1e-2, shuffle=True, random_state=3).fit(X, y)
    c = Pegasos(lam=1e-2, shuffle=True, random_state=4).fit(X, y)
    fixed = Pegasos(lam=1e-2).fit(X, y)
    np.testing.assert_array_equal(a.coef_, b.coef_)
    assert not np.allclose(a.coef_, c.coef_) and not np.allclose(a.coef_, fixed.coef_)
    assert a.t_ == len(X)
    # refitting the same estimator is reproducible too (random_state is not consumed)
    np.testing.assert_array_equal(a.fit(X, y).coef_, b.coef_)
    # partial_fit keeps the given order whatever shuffle says
    pf = Pegasos(lam=1e-2, shuffle=True, random_state=3).partial_fit(X, y)
    np.testing.assert_array_equal(pf.coef_, fixed.coef_)
    la = LSQSGD(alpha=0.05, shuffle=True, random_state=0).fit(X, y.astype(float))
    lb = LSQSGD(alpha=0.05, shuffle=True, random_state=0).fit(X, y.astype(float))
    lc = LSQSGD(alpha=0.05).fit(X, y.astype(float))
    np.testing.assert_array_equal(la.coef_, lb.coef_)
    assert not np.allclose(la.coef_, lc.coef_)


@pytest.mark.parametrize(
    "labels",
    [(-3, 7), (7, -3), ("cat", "dog"), (1.0, 2.0), (False, True), (np.int8(1), np.int8(2))],
    ids=str,
)
def test_ind_any_two_labels(bc, labels):
    X, y = bc
    lab = np.array(labels, dtype=object if isinstance(labels[0], str) else None)
    yl = np.where(y == 1, lab[1], lab[0])
    p = Pegasos(lam=1e-2).fit(X, yl)
    np.testing.assert_array_equal(p.classes_, np.unique(yl))
    # classes_[0] is -1, classes_[1] is +1
    ref = PlainPegasos(1e-2).partial_fit(X, _pm(yl, p.classes_[1]))
    _close(p.decision_function(X), ref.decision(X))
    pred = p.predict(X)
    assert set(pred.tolist()) <= set(np.unique(yl).tolist())
    np.testing.assert_array_equal(pred, np.where(ref.decision(X) > 0, p.classes_[1], p.classes_[0]))
    # partial_fit with the classes given in any order maps them the same way
    q = Pegasos(lam=1e-2).partial_fit(X[:5], yl[:5], classes=list(labels)[::-1])
    q.partial_fit(X[5:], yl[5:])
    np.testing.assert_allclose(
        q.decision_function(X), p.decision_function(X), rtol=1e-13, atol=1e-13
    )


def _bad_pegasos():
    return [
        (dict(lam=0.0), "lam"),
        (dict(lam=-1.0), "lam"),
        (dict(lam=np.nan), "lam"),
        (dict(lam="big"), "lam"),
        (dict(intercept_scaling=-1.0), "intercept_scaling"),
        (dict(projection="yes"), "projection"),
        (dict(fit_intercept=2), "fit_intercept"),
        (dict(shuffle="no"), "shuffle"),
        (dict(shuffle=True, random_state="x"), "random_state"),
    ]


@pytest.mark.parametrize("params, msg", _bad_pegasos(), ids=lambda v: str(v))
def test_ind_pegasos_bad_params(bc, params, msg):
    X, y = bc
    for call in (lambda m: m.fit(X, y), lambda m: m.partial_fit(X, y, classes=[0, 1])):
        m = Pegasos(**params)
        with pytest.raises(ValueError, match=msg):
            call(m)
        assert not hasattr(m, "classes_") and not hasattr(m, "n_features_in_")


@pytest.mark.parametrize(
    "params, msg",
    [
        (dict(alpha=0.0), "alpha"),
        (dict(alpha=-1.0), "alpha"),
        (dict(alpha=np.inf), "alpha"),
        (dict(radius=0.0), "radius"),
        (dict(radius=-2.0), "radius"),
        (dict(radius=np.nan), "radius"),
        (dict(intercept_scaling=np.nan), "intercept_scaling"),
    ],
    ids=str,
)
def test_ind_lsqsgd_bad_params(bc, params, msg):
    X, y = bc
    with pytest.raises(ValueError, match=msg):
        LSQSGD(**params).fit(X, y.astype(float))


def test_ind_bad_data(bc):
    X, y = bc
    Xn = X[:50].copy()
    Xn[10, 3] = np.nan
    Xi = X[:50].copy()
    Xi[49, 0] = np.inf
    yf = y.astype(float)
    for make, yy in ((Pegasos, y), (LSQSGD, yf)):
        with pytest.raises(ValueError, match="NaN"):
            make().fit(Xn, yy[:50])
        with pytest.raises(ValueError, match="(?i)infinity"):
            make().fit(Xi, yy[:50])
        with pytest.raises(ValueError, match="(?i)inconsistent|samples"):
            make().fit(X[:50], yy[:49])
        with pytest.raises(ValueError, match="(?i)2d|reshape"):
            make().fit(X[:, 0], yy)
        with pytest.raises((TypeError, ValueError), match="(?i)sparse"):
            import scipy.sparse as sp

            make().fit(sp.csr_matrix(X), yy)
        with pytest.raises(NotFittedError):
            make().predict(X)
    with pytest.raises(ValueError, match="binary"):
        Pegasos().fit(X, np.arange(len(X)) % 3)
    with pytest.raises(ValueError, match="(?i)one class|two"):
        Pegasos().fit(X, np.ones(len(X)))
    with pytest.raises(ValueError, match="(?i)label|continuous"):
        Pegasos().fit(X, np.linspace(0, 1, len(X)))
    with pytest.raises(ValueError, match="classes"):
        Pegasos().partial_fit(X, y, classes=[0, 1, 2])
    with pytest.raises(ValueError, match="NaN|infinity"):
        LSQSGD().fit(X, np.r_[yf[:-1], np.inf])
    with pytest.raises(ValueError):
        LSQSGD().fit(X, np.where(y == 1, "a", "b"))


def _failed_updates(X, y):
    Xnan = X[:20].copy()
    Xnan[-1, -1] = np.nan  # the bad value is in the last row: nothing may be learned before it
    return [
        (Xnan, y[:20], {}, "NaN"),
        (X[:20, :-1], y[:20], {}, "features"),
        (X[:20], y[:19], {}, "(?i)inconsistent|samples"),
        (X[:20], np.r_[y[:19], 5], {}, "not in classes_|5"),
        (X[:20], y[:20], {"classes": [0, 2]}, "classes"),
    ]


@pytest.mark.parametrize("case", range(5))
def test_ind_failed_partial_fit_leaves_state_unchanged(bc, case):
    X, y = bc
    Xb, yb, kw, msg = _failed_updates(X, y)[case]
    p = Pegasos(lam=1e-3).fit(X[:100], y[:100])
    before = (p.snapshot(), p.t_, p.classes_.copy(), p.n_features_in_, p.coef_.copy())
    with pytest.raises(ValueError, match=msg):
        p.partial_fit(Xb, yb, **kw)
    after = (p.snapshot(), p.t_, p.classes_.copy(), p.n_features_in_, p.coef_.copy())
    for a, b in zip(before, after):
        np.testing.assert_array_equal(a, b)
    # and it carries on exactly as if the failed call had not happened
    p.partial_fit(X[100:], y[100:])
    ref = PlainPegasos(1e-3).partial_fit(X, _pm(y))
    _close(p.coef_, ref.coef)
    if case < 3:  # the same for LSQSGD (no labels)
        m = LSQSGD(alpha=0.01).fit(X[:100], y[:100].astype(float))
        snap = m.snapshot()
        with pytest.raises(ValueError, match=msg):
            m.partial_fit(Xb, yb.astype(float))
        np.testing.assert_array_equal(m.snapshot(), snap)


def test_ind_failed_first_partial_fit_leaves_unfitted(bc):
    X, y = bc
    Xn = X[:10].copy()
    Xn[9, 0] = np.nan
    p = Pegasos(lam=1e-2)
    with pytest.raises(ValueError):
        p.partial_fit(Xn, y[:10], classes=[0, 1])
    with pytest.raises(ValueError):
        p.partial_fit(X[:10, :4], y[:10])  # one class, no classes=
    with pytest.raises(NotFittedError):
        p.decision_function(X)
    p.partial_fit(X, y)  # a later good call starts from scratch (and any feature count)
    _close(p.coef_, PlainPegasos(1e-2).partial_fit(X, _pm(y)).coef)
