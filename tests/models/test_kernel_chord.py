"""Chord steps for the kernel Newton state (``models/_kernel_chord.py``): every update of
``KernelClassifier(loss="logistic" | "squared_hinge")`` is the exact solution.

* The certificate: J is 1-strongly convex, so ``‖β − β*‖ ≤ grad_norm`` (RKHS norm) for the
  update and for a fresh fit; their distance, computed from the two expansions with an
  independent kernel (``reference.reference_kernel``), must be at most the sum of the two.
* The twins: the fresh deltafit fit (1e-8 relative on the decision function) and, for one
  sequence per loss, scikit-learn's ``LogisticRegression`` / the exact squared-hinge solver of
  ``reference`` on kernel features ``F`` with ``F Fᵀ = K`` (1e-6).
* The operator: ``KernelCurvature.apply`` with pending corrections against a dense solve of
  ``(I + D' K) x = g`` on the breast-cancer kernel matrix.
* Bookkeeping: few full factorisations (the state's counter), failed updates leave the model
  bitwise unchanged (also one-vs-rest), interrupted ones rebuild it, a stalled chord
  iteration falls back to Newton, a loaded model updates exactly, the factor's slots are not
  reused and a compaction keeps the state exact.
"""

import os
import zipfile

import numpy as np
import pytest
from scipy import linalg
from sklearn.datasets import load_digits

import deltafit as df
from deltafit._states import _newton_kernel as _warm_newton
from deltafit.solvers import _kernel_chord
from deltafit.solvers._kernel_chord import KernelCurvature
from reference import (
    kernel_features,
    logistic_reference,
    reference_kernel,
    rel_err,
    squared_hinge_reference,
)

LOSSES = ["logistic", "squared_hinge"]
GAMMA = 0.05
#: rounding slack of the certificate test, relative to ‖β‖ (the certificate itself is exact)
SLACK = 1e-10


def _model(loss, fit_intercept=True, C=1.0):
    return df.KernelClassifier(loss=loss, C=C, gamma=GAMMA, fit_intercept=fit_intercept)


def _expansion(m, k=None):
    p = m.problem_ if k is None else m.problem_.for_class(k)
    live = np.asarray(p.live)
    return np.asarray(p.rows[live]), np.asarray(p.alpha[live])


def _rkhs_distance(a, b, fit_intercept, ka=None, kb=None):
    """‖β_a − β_b‖ and ‖β_a‖ from the two expansions over the same samples in the same order
    (checked), with the reference kernel: ``sqrt((α_a − α_b)ᵀ K (α_a − α_b))``, free of the
    cancellation of expanding the square."""
    Xa, ca = _expansion(a, ka)
    Xb, cb = _expansion(b, kb)
    assert np.array_equal(Xa, Xb)
    K = reference_kernel("rbf", gamma=GAMMA, intercept_scaling=1.0 if fit_intercept else 0.0)(
        Xa, Xa
    )
    c = ca - cb
    return float(np.sqrt(max(c @ K @ c, 0.0))), float(np.sqrt(max(ca @ K @ ca, 0.0)))


def _check_exact(upd, X, y, w, fit_intercept, loss, Xt, C=1.0):
    fresh = _model(loss, fit_intercept, C).fit(X, y, sample_weight=w)
    dist, norm = _rkhs_distance(upd, fresh, fit_intercept)
    radius = upd.problem_.solver_result.grad_norm + fresh.problem_.solver_result.grad_norm
    assert upd.problem_.solver_result.converged
    assert dist <= radius + SLACK * max(1.0, norm), (dist, radius)
    assert rel_err(upd.decision_function(Xt), fresh.decision_function(Xt)) < 1e-8
    return fresh


def _sequence(m, X, y, w, rng, n0):
    """remove 1, remove 10, add 1, add 15, relabel 5, a mixed batch, reweight 4: after each,
    the (X, y, w) the model should equal."""
    ids = np.arange(n0)
    Xs, ys, ws = X[:n0].copy(), y[:n0].copy(), w[:n0].copy()
    pool = list(range(n0, X.shape[0]))
    state = {"ids": ids, "X": Xs, "y": ys, "w": ws, "next": n0}

    def rows():
        return state["X"], state["y"], state["w"]

    def remove(k):
        pick = rng.choice(state["ids"].size, k, replace=False)
        m.remove(state["ids"][pick])
        keep = np.setdiff1d(np.arange(state["ids"].size), pick)
        for key in ("ids", "X", "y", "w"):
            state[key] = state[key][keep]

    def add(k, remove_k=0, relabel_k=0):
        new = [pool.pop() for _ in range(k)]
        Xa, ya, wa = X[new], y[new], w[new]
        rem = (
            rng.choice(state["ids"].size, remove_k, replace=False)
            if remove_k
            else np.zeros(0, dtype=int)
        )
        rest = np.setdiff1d(np.arange(state["ids"].size), rem)
        rel = rng.choice(rest, relabel_k, replace=False) if relabel_k else np.zeros(0, int)
        m.update(
            X_add=Xa,
            y_add=ya,
            sample_weight_add=wa,
            remove_ids=state["ids"][rem] if remove_k else None,
            relabel_ids=state["ids"][rel] if relabel_k else None,
            y_relabel=1 - state["y"][rel] if relabel_k else None,
        )
        state["y"] = state["y"].copy()
        state["y"][rel] = 1 - state["y"][rel]
        new_ids = np.arange(state["next"], state["next"] + k)
        state["next"] += k
        for key, extra in (("ids", new_ids), ("X", Xa), ("y", ya), ("w", wa)):
            state[key] = np.concatenate([state[key][rest], extra])

    def relabel(k):
        pick = rng.choice(state["ids"].size, k, replace=False)
        m.relabel(state["ids"][pick], 1 - state["y"][pick])
        state["y"] = state["y"].copy()
        state["y"][pick] = 1 - state["y"][pick]

    def reweight(k):
        pick = rng.choice(state["ids"].size, k, replace=False)
        nw = rng.uniform(0.5, 2.0, k)
        m.reweight(state["ids"][pick], nw)
        state["w"] = state["w"].copy()
        state["w"][pick] = nw

    for op in (
        lambda: remove(1),
        lambda: remove(10),
        lambda: add(1),
        lambda: add(15),
        lambda: relabel(5),
        lambda: add(6, remove_k=6, relabel_k=3),
        lambda: reweight(4),
    ):
        op()
        yield rows()


@pytest.fixture(scope="module")
def cancer():
    X, y = df.datasets.load_breast_cancer()
    rng = np.random.default_rng(0)
    order = rng.permutation(X.shape[0])
    return X[order], y[order]


@pytest.fixture(scope="module")
def digits_binary():
    X, y = load_digits(return_X_y=True)
    sel = np.isin(y, (3, 8))
    X, y = X[sel] / 16.0, (y[sel] == 8).astype(int)
    order = np.random.default_rng(1).permutation(X.shape[0])
    return X[order], y[order]


@pytest.mark.parametrize("loss", LOSSES)
@pytest.mark.parametrize("fit_intercept", [True, False])
@pytest.mark.parametrize("weighted", [False, True])
def test_updates_equal_fresh_fit_breast_cancer(loss, fit_intercept, weighted, cancer):
    X, y = cancer
    X, y, Xt = X[:330], y[:330], X[330:]
    rng = np.random.default_rng(3)
    w = rng.uniform(0.3, 3.0, X.shape[0]) if weighted else np.ones(X.shape[0])
    n0 = 280
    m = _model(loss, fit_intercept).fit(X[:n0], y[:n0], sample_weight=w[:n0] if weighted else None)
    assert m._state.curv is not None and m._state.point is not None
    for Xs, ys, ws in _sequence(m, X, y, w, rng, n0):
        _check_exact(m, Xs, ys, ws, fit_intercept, loss, Xt)
    # the chord steps did the work: at most a couple of full factorisations in 7 updates
    assert 0 <= m.problem_.solver_counters()["n_refactor"] <= 2


@pytest.mark.parametrize("loss", LOSSES)
def test_updates_equal_fresh_fit_digits(loss, digits_binary):
    X, y = digits_binary
    X, y, Xt = X[:300], y[:300], X[300:]
    rng = np.random.default_rng(5)
    w = np.ones(X.shape[0])
    m = _model(loss).fit(X[:250], y[:250])
    for Xs, ys, ws in _sequence(m, X, y, w, rng, 250):
        _check_exact(m, Xs, ys, ws, True, loss, Xt)
    assert m.problem_.solver_counters()["n_refactor"] <= 2


@pytest.mark.parametrize("loss", LOSSES)
def test_update_matches_independent_twin(loss, cancer):
    """After a mixed batch, the update equals scikit-learn / the exact squared-hinge solver on
    kernel features of the data it represents."""
    X, y = cancer
    X, y = X[:170], y[:170]
    C = 0.5
    m = df.KernelClassifier(loss=loss, C=C, gamma=GAMMA).fit(X[:155], y[:155])
    m.update(
        X_add=X[155:],
        y_add=y[155:],
        remove_ids=np.arange(0, 20, 2),
        relabel_ids=[21, 33],
        y_relabel=1 - y[[21, 33]],
    )
    keep = np.setdiff1d(np.arange(170), np.arange(0, 20, 2))
    yk = y.copy()
    yk[[21, 33]] = 1 - yk[[21, 33]]
    Xk, tk = X[keep], np.where(yk[keep] == 1, 1.0, -1.0)
    k = reference_kernel("rbf", gamma=GAMMA, intercept_scaling=1.0)
    F = kernel_features(k(Xk, Xk))
    ref = logistic_reference(F, tk, C) if loss == "logistic" else squared_hinge_reference(F, tk, C)
    assert rel_err(m.decision_function(Xk), F @ ref) < 1e-6


@pytest.mark.parametrize("loss", LOSSES)
def test_one_vs_rest_updates(loss):
    X, y = load_digits(return_X_y=True)
    sel = np.flatnonzero(np.isin(y, (0, 1, 2)))[:260]
    X, y = X[sel] / 16.0, y[sel]
    m = _model(loss).fit(X[:230], y[:230])
    m.update(
        X_add=X[230:],
        y_add=y[230:],
        remove_ids=[1, 5, 9],
        relabel_ids=[12],
        y_relabel=[(y[12] + 1) % 3],
    )
    keep = np.setdiff1d(np.arange(260), [1, 5, 9])
    yk = y.copy()
    yk[12] = (y[12] + 1) % 3
    fresh = _model(loss).fit(X[keep], yk[keep])
    for k in range(3):
        dist, norm = _rkhs_distance(m, fresh, True, k, k)
        st, sf = m.problem_.for_class(k), fresh.problem_.for_class(k)
        assert dist <= st.certified_residual + sf.certified_residual + SLACK * max(1.0, norm)
    assert rel_err(m.decision_function(X), fresh.decision_function(X)) < 1e-8


def test_operator_matches_dense_solve(cancer):
    """(I + D' K)⁻¹ g through the stored factor and pending corrections (removals, additions,
    changed weights) equals a dense solve with D' itself."""
    X, _ = cancer
    X = X[:150]
    K = reference_kernel("rbf", gamma=GAMMA, intercept_scaling=1.0)(X, X)
    rng = np.random.default_rng(0)
    n = K.shape[0]
    d = rng.uniform(0.0, 2.0, n)
    d[rng.random(n) < 0.3] = 0.0  # outside the factor
    cap = n + 10
    dd = np.zeros(cap)
    dd[:n] = d
    Kc = np.asfortranarray(K)
    op = KernelCurvature.at(Kc, dd)
    assert np.array_equal(op.slots, np.flatnonzero(d > 0))
    # remove three factor samples, add weight to two outside it, change two inside
    inside, outside = np.flatnonzero(d > 0), np.flatnonzero(d == 0)
    fix = np.concatenate([inside[:3], outside[:2], inside[3:5]])
    new = np.concatenate([np.zeros(3), [0.7, 1.3], d[inside[3:5]] * 2.5])
    op2 = op.corrected(Kc, fix, new, max_rank=64)
    assert op2.rank == 7 and op.rank == 0  # op itself is unchanged
    d2 = d.copy()
    d2[fix] = new
    g = rng.standard_normal(n)
    Kg = K @ g
    want = np.linalg.solve(np.eye(n) + d2[:, None] * K, g)
    assert np.allclose(op2.apply(g, Kg), want, rtol=1e-10, atol=1e-10)
    # a second correction of a pending slot replaces its weight (one column per slot)
    op3 = op2.corrected(Kc, fix[3:4], [0.2], max_rank=64)
    d3 = d2.copy()
    d3[fix[3]] = 0.2
    assert op3.rank == 7
    want3 = np.linalg.solve(np.eye(n) + d3[:, None] * K, g)
    assert np.allclose(op3.apply(g, Kg), want3, rtol=1e-10, atol=1e-10)
    assert op2.corrected(Kc, outside[2:20], np.ones(18), max_rank=10) is None  # rank limit
    # a compaction that keeps every held slot, in another order: the same operator, permuted
    keep = rng.permutation(n)
    Kp = np.asfortranarray(K[np.ix_(keep, keep)])
    op4 = op2.taken(keep, n)
    assert np.allclose(op4.apply(g[keep], Kg[keep]), want[keep], rtol=1e-10, atol=1e-10)
    op5 = op4.corrected(Kp, [0], [0.9], max_rank=64)
    d5 = d2[keep].copy()
    d5[0] = 0.9
    want5 = np.linalg.solve(np.eye(n) + d5[:, None] * Kp, g[keep])
    assert np.allclose(op5.apply(g[keep], Kg[keep]), want5, rtol=1e-10, atol=1e-10)
    assert op2.taken(keep[1:], n) is None or keep[0] not in op2.held


def _snapshot(m):
    st = m._state
    states = getattr(st, "states", [st])
    out = [m.decision_function(np.zeros((1, 30))).copy(), m.sample_ids_.copy()]
    for s in states:
        out += [s.alpha.copy(), s.n_factorizations, s.result]
        out.append(None if s.curv is None else (s.curv, s.curv.rank))
        out.append(None if s.point is None else (s.point, s.point.z.copy()))
    return out


def _same(a, b):
    assert len(a) == len(b)
    for x, y in zip(a, b):
        if isinstance(x, np.ndarray):
            assert np.array_equal(x, y)
        elif isinstance(x, tuple):
            assert x[0] is y[0]
            for u, v in zip(x[1:], y[1:]):
                assert np.array_equal(u, v)
        else:
            assert x is y or x == y


@pytest.mark.parametrize("loss", LOSSES)
def test_failed_update_leaves_model_unchanged(loss, cancer, monkeypatch):
    X, y = cancer
    m = _model(loss).fit(X[:200], y[:200])
    m.remove([3])  # a model with pending corrections and a moved point
    before = _snapshot(m)
    K_before = m._state.gram.K.copy()
    calls = []

    def broken(*a, **k):
        calls.append(1)
        raise ValueError("injected failure")

    monkeypatch.setattr(KernelCurvature, "corrected", broken)
    with pytest.raises(ValueError, match="injected"):
        m.update(remove_ids=[5, 6], relabel_ids=[7], y_relabel=[1 - y[7]])
    assert calls
    _same(before, _snapshot(m))
    assert np.array_equal(K_before[:200, :200], m._state.gram.K[:200, :200])
    monkeypatch.undo()
    m.remove([5, 6])
    keep = np.setdiff1d(np.arange(200), [3, 5, 6])
    _check_exact(m, X[keep], y[keep], None, True, loss, X[200:])


@pytest.mark.parametrize("loss", LOSSES)
def test_failed_fresh_factorisation_leaves_loaded_model_unchanged(
    loss, cancer, tmp_path, monkeypatch
):
    """A loaded model has no factor: its first update factorises, and a failure there leaves
    it as it was (and able to update exactly afterwards)."""
    X, y = cancer
    path = tmp_path / "m.npz"
    df.save(_model(loss).fit(X[:150], y[:150]), path)
    _without_chord_members(path)
    m = df.load(path)
    assert m._state.curv is None
    before = _snapshot(m)

    def broken(M):
        raise ValueError("injected factorisation failure")

    monkeypatch.setattr(_kernel_chord, "_cholesky", broken)
    with pytest.raises(ValueError, match="injected"):
        m.update(X_add=X[150:155], y_add=y[150:155], remove_ids=[2])
    _same(before, _snapshot(m))
    monkeypatch.undo()
    m.update(X_add=X[150:155], y_add=y[150:155], remove_ids=[2])
    keep = np.concatenate([np.setdiff1d(np.arange(150), [2]), np.arange(150, 155)])
    _check_exact(m, X[keep], y[keep], None, True, loss, X[200:])


@pytest.mark.parametrize("loss", LOSSES)
def test_failed_one_vs_rest_update_restores_every_class(loss, monkeypatch):
    X, y = load_digits(return_X_y=True)
    sel = np.flatnonzero(np.isin(y, (0, 1, 2)))[:200]
    X, y = X[sel] / 16.0, y[sel]
    m = _model(loss).fit(X[:190], y[:190])
    before = [(s.alpha.copy(), s.curv, s.point) for s in m._state.states]
    real = _kernel_chord.kernel_chord_solve
    count = []

    def third_fails(*a, **k):
        count.append(1)
        if len(count) == 3:
            raise ValueError("class 2 fails")
        return real(*a, **k)

    monkeypatch.setattr(_warm_newton, "kernel_chord_solve", third_fails)
    with pytest.raises(ValueError, match="class 2"):
        m.add(X[190:], y[190:])
    for s, (a, c, p) in zip(m._state.states, before):
        assert np.array_equal(s.alpha[: a.size], a) and s.curv is c and s.point is p
    monkeypatch.undo()
    m.add(X[190:], y[190:])
    fresh = _model(loss).fit(X, y)
    assert rel_err(m.decision_function(X), fresh.decision_function(X)) < 1e-8


def test_interrupted_update_rebuilds_exact_state(cancer, monkeypatch):
    X, y = cancer

    def interrupted(*a, **k):
        raise KeyboardInterrupt

    m = _model("logistic").fit(X[:200], y[:200])
    monkeypatch.setattr(_warm_newton, "kernel_chord_solve", interrupted)
    with pytest.raises(KeyboardInterrupt):
        m.remove([1, 2])
    monkeypatch.undo()
    assert m.n_samples_ == 200
    m.remove([1, 2])
    keep = np.setdiff1d(np.arange(200), [1, 2])
    _check_exact(m, X[keep], y[keep], None, True, "logistic", X[200:])


@pytest.mark.parametrize("loss", LOSSES)
def test_stalled_chord_falls_back_to_newton(loss, cancer, monkeypatch):
    X, y = cancer
    m = _model(loss).fit(X[:200], y[:200])
    monkeypatch.setattr(_warm_newton, "kernel_chord_solve", lambda *a, **k: None)
    m.update(X_add=X[200:210], y_add=y[200:210], remove_ids=[0, 4])
    monkeypatch.undo()
    assert m.problem_.solver_counters()["n_refactor"] >= 1  # Newton's own factorisations
    keep = np.concatenate([np.setdiff1d(np.arange(200), [0, 4]), np.arange(200, 210)])
    _check_exact(m, X[keep], y[keep], None, True, loss, X[210:])
    m.remove([7])  # and the chord path works from the fallback's factor
    keep = keep[keep != 7]
    _check_exact(m, X[keep], y[keep], None, True, loss, X[210:])


def _without_chord_members(path):
    """Rewrite the model file at ``path`` without the optional factor members (a file of a
    version that did not store them)."""
    tmp = str(path) + ".tmp"
    with zipfile.ZipFile(path) as src, zipfile.ZipFile(tmp, "w") as dst:
        for item in src.infolist():
            if not item.filename.startswith(("state_factor", "state_chord")):
                dst.writestr(item, src.read(item.filename))
    os.replace(tmp, path)


@pytest.mark.parametrize("loss", LOSSES)
@pytest.mark.parametrize("stored", [True, False])
def test_save_load_then_update(loss, stored, cancer, tmp_path):
    X, y = cancer
    m = _model(loss).fit(X[:220], y[:220])
    m.update(X_add=X[220:224], y_add=y[220:224], remove_ids=[10, 11])  # pending terms
    path = tmp_path / "m.npz"
    df.save(m, path)
    if not stored:
        _without_chord_members(path)
    m2 = df.load(path)
    assert np.array_equal(m2.decision_function(X[300:]), m.decision_function(X[300:]))
    if stored:  # the same operator, over the live samples (removed ones dropped)
        assert m2._state.curv is not None and m2._state.point is not None
        assert m2._state.curv.rank == 4 or loss == "squared_hinge"
    else:  # computed at the next update
        assert m2._state.curv is None and m2._state.point is None
    for mm in (m, m2):
        mm.update(X_add=X[224:230], y_add=y[224:230], remove_ids=[12])
    keep = np.concatenate([np.setdiff1d(np.arange(224), [10, 11, 12]), np.arange(224, 230)])
    _check_exact(m2, X[keep], y[keep], None, True, loss, X[230:])
    assert m2.problem_.solver_counters()["n_refactor"] == (0 if stored else 1)
    if stored:  # the loaded model takes the original's steps: equal up to rounding
        assert rel_err(m2.decision_function(X[230:]), m.decision_function(X[230:])) < 1e-12


def test_corrupt_stored_factor_is_refused(cancer, tmp_path):
    import io

    X, y = cancer
    path, bad = tmp_path / "m.npz", tmp_path / "bad.npz"
    df.save(_model("logistic").fit(X[:100], y[:100]), path)
    with zipfile.ZipFile(path) as src, zipfile.ZipFile(bad, "w") as dst:
        for item in src.infolist():
            data = src.read(item.filename)
            if item.filename == "state_factor.npy":
                F = np.load(io.BytesIO(data))
                F[3, 2] += 0.5  # no longer the factor of the stored kernel matrix
                buf = io.BytesIO()
                np.lib.format.write_array(buf, F)
                data = buf.getvalue()
            dst.writestr(item, data)
    with pytest.raises(ValueError, match="kernel factor"):
        df.load(bad)


@pytest.mark.parametrize("loss", LOSSES)
def test_factor_slots_not_reused_and_compaction(loss, cancer):
    X, y = cancer
    m = _model(loss).fit(X[:300], y[:300])
    st = m._state
    held = st.curv.held
    m.remove(np.arange(0, 30, 3))  # removed slots inside the factor
    free = st.reusable_slots()
    assert not np.intersect1d(free, st.curv.held).size
    new = m.add(X[300:310], y[300:310])
    slots = np.asarray(m.problem_.locate(new)[0])
    assert not np.intersect1d(slots, held).size
    ids = np.concatenate([np.setdiff1d(np.arange(300), np.arange(0, 30, 3)), np.arange(300, 310)])
    _check_exact(m, X[ids], y[ids], None, True, loss, X[400:])
    # remove most samples: the ledger compacts (its capacity shrinks), the state follows
    cap = m._ledger.capacity
    m.remove(ids[:-40])
    assert m._ledger.capacity < cap
    m.add(X[310:330], y[310:330])
    rest = np.concatenate([ids[-40:], np.arange(310, 330)])
    _check_exact(m, X[rest], y[rest], None, True, loss, X[400:])


def test_hinge_subclass_unchanged(cancer):
    """The hinge state (a subclass) keeps its warm-started dual QP: no factor, no point."""
    X, y = cancer
    m = _model("hinge").fit(X[:150], y[:150])
    m.remove([1])
    st = m._state
    assert st.curv is None and st.point is None and st.reusable_slots() is None
    assert st.counters()["n_refactor"] == -1


def test_solver_keep_factor(cancer):
    """newton_kernel's kept factor is the Cholesky factor of its last system."""
    from deltafit.losses import get_loss
    from deltafit.solvers import newton_kernel

    X, y = cancer
    X, t = X[:100], np.where(y[:100] == 1, 1.0, -1.0)
    K = reference_kernel("rbf", gamma=GAMMA, intercept_scaling=1.0)(X, X)
    w = np.ones(100)
    w[5] = 0.0
    res, (act, s, L) = newton_kernel(
        K, t, get_loss("logistic"), 1.0, sample_weight=w, keep_factor=True
    )
    plain = newton_kernel(K, t, get_loss("logistic"), 1.0, sample_weight=w)
    assert np.array_equal(res.coef, plain.coef)
    assert 5 not in act
    M = np.eye(act.size) + np.outer(s, s) * K[np.ix_(act, act)]
    assert np.allclose(L @ L.T, M, rtol=1e-12, atol=1e-12)
    assert np.allclose(L, linalg.cholesky(M, lower=True))


@pytest.mark.parametrize("loss", LOSSES)
def test_reused_slots_then_compaction_out_of_slot_order(loss, cancer, monkeypatch):
    """After a fresh factor (here: a fallback) the removed slots are handed out again, so that
    ids and slots disagree in order; a compaction then keeps samples in id order and the
    stored factor follows them."""
    X, y = cancer
    m = _model(loss).fit(X[:300], y[:300])
    m.remove(np.arange(0, 100))
    monkeypatch.setattr(_warm_newton, "kernel_chord_solve", lambda *a, **k: None)
    m.remove([100])  # Newton: a factor over the live samples only, the slots are released
    monkeypatch.undo()
    new = m.add(X[300:360], y[300:360])
    slots = np.asarray(m.problem_.locate(new)[0])
    assert slots.min() < 100  # reused: new ids in old slots
    ids = np.concatenate([np.arange(101, 300), np.arange(300, 360)])
    m.remove(np.arange(101, 290))  # compacts (60 + 10 samples left of a larger capacity)
    rest = np.concatenate([np.arange(290, 300), np.arange(300, 360)])
    assert m.n_samples_ == rest.size and m._ledger.capacity < 300
    m.update(X_add=X[360:365], y_add=y[360:365], remove_ids=[305])
    rest = np.concatenate([rest[rest != 305], np.arange(360, 365)])
    _check_exact(m, X[rest], y[rest], None, True, loss, X[400:])
    del ids
