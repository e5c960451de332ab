"""Kernel hinge updates on kept values ``K alpha`` (no pass over the kernel matrix).

The kernel hinge state keeps ``K alpha`` by slot and moves it by the columns of the
coefficients an update changes (``deltafit.solvers._kernel_values.KernelValues``); the warm
re-solve starts from the face of the free set (``active_face``).  Checked here, with RBF
kernels on breast_cancer and digits even/odd:

* a run of removals (a free support vector, a bound one, a non-support vector, 1% of the
  rows), then an add, a relabel and a reweight, each equal to a fresh fit: decisions within
  1e-8 (relative to max(1, max |fresh|)), dual objectives within 1e-9, converged;
* on breast_cancer also against the independent reference solver of the kernel dual
  (``tests/reference.hinge_dual_reference``, L-BFGS-B and the exact face solve of its sets):
  decisions within 1e-7;
* the kept values against a fresh product after every update, within their certified
  bound ``γ_N |K| |alpha| + err``, and the cached kernel values of the free set equal to
  the matrix's, also after the ledger compacts its slots;
* a failed update leaves them bit-identical; a saved and loaded model (no kept values: the
  first update computes them) updates like the original; stale values are recomputed;
* the pieces: the block copies (``square``, ``cached_block``) against plain indexing, and
  the face solves through the last factor (``_SubKernelQP`` ``reuse``) against direct ones.
"""

from __future__ import annotations

import numpy as np
import pytest
from sklearn.datasets import load_breast_cancer, load_digits
from sklearn.metrics.pairwise import rbf_kernel
from sklearn.preprocessing import StandardScaler

import deltafit as df
from deltafit.solvers import _hinge as hinge_solvers
from reference import hinge_dual_reference

DECISION_TOL = 1e-8
DUAL_TOL = 1e-9
REFERENCE_TOL = 1e-7


@pytest.fixture(scope="module")
def data():
    Xc, yc = load_breast_cancer(return_X_y=True)
    Xd, yd = load_digits(return_X_y=True)
    return {"cancer": (StandardScaler().fit_transform(Xc), yc), "digits": (Xd / 16.0, yd % 2)}


def _close(a, b, tol):
    a, b = np.asarray(a, dtype=float), np.asarray(b, dtype=float)
    err = float(np.max(np.abs(a - b)) / max(1.0, float(np.max(np.abs(b)))))
    assert err <= tol, err


def _make(gamma):
    return df.KernelClassifier(loss="hinge", C=1.0, kernel="rbf", gamma=gamma)


def _check_values(m):
    """The kept values against a fresh product over the live slots, within their bound."""
    st = m._state
    vals = st.values
    assert vals is not None
    K = st.gram.K
    assert np.array_equal(vals.coef, st.alpha)
    live = np.flatnonzero(m._ledger.active)
    exact = K[np.ix_(live, live)] @ st.alpha[live]
    bound = vals.gamma() * vals.s[live] + vals.err[live]
    assert np.all(np.abs(vals.f[live] - exact) <= bound)
    scale = np.abs(K[np.ix_(live, live)]) @ np.abs(st.alpha[live])
    np.testing.assert_allclose(vals.s[live], scale, rtol=1e-9, atol=1e-12)
    # the cached kernel values of the last free set: live slots, entries of K bit for bit
    # (k(x_i, x_j) or k(x_j, x_i): a kernel matrix may be symmetric only to rounding)
    fs = vals.face_slots
    assert np.all(np.diff(fs) > 0) and np.all(m._ledger.active[fs])
    Kff = K[np.ix_(fs, fs)]
    assert np.all((vals.face_K == Kff) | (vals.face_K == Kff.T))
    # the kept face factor: L Lᵀ = (y_i y_j k_ij) over its members still in the model
    fl, L = vals.face_L_slots, vals.face_L
    if fl.size:
        on = np.flatnonzero(fl >= 0)
        on = on[m._ledger.active[fl[on]]]
        t = np.where(m._ledger.y[fl[on]] == m.classes_[1], 1.0, -1.0)
        LL = (L @ L.T)[np.ix_(on, on)]
        Q = K[np.ix_(fl[on], fl[on])] * np.outer(t, t)
        np.testing.assert_allclose(LL, Q, rtol=0, atol=1e-10 * np.max(np.abs(Q)))


def _steps(X, y, m, rng):
    """The changes of a run: (name, apply(model), rows kept, labels, weights)."""
    dual = np.asarray(m.problem_.dual)[m.problem_.live]
    ids = np.asarray(m.sample_ids_)
    free = ids[(dual > 0.0) & (dual < 1.0)]
    bound = ids[dual >= 1.0]
    zero = ids[dual == 0.0]
    gone = [int(free[0]), int(bound[0]), int(zero[0])]
    pct = rng.choice(np.setdiff1d(ids, gone), max(3, X.shape[0] // 100), replace=False)
    return [
        ("remove free SV", [gone[0]]),
        ("remove bound SV", [gone[1]]),
        ("remove non-SV", [gone[2]]),
        ("remove 1%", np.sort(pct).tolist()),
    ]


@pytest.mark.parametrize("name", ["cancer", "digits"])
def test_removals_then_changes_equal_fresh_fits(data, name):
    X, y = data[name]
    gamma = 1.0 / X.shape[1]
    rng = np.random.default_rng(3)
    held = np.sort(rng.choice(X.shape[0], 12, replace=False))
    base = np.setdiff1d(np.arange(X.shape[0]), held)
    m = _make(gamma).fit(X[base], y[base])
    assert m._state.values.face_L_slots.size > 0  # the fit's face factor is kept
    _check_values(m)
    ids = list(range(base.size))  # sample ids of the fit: 0 .. n-1, rows base
    rows = dict(zip(ids, base.tolist()))
    labels = y.copy()
    weights = np.ones(X.shape[0])
    for _, gone in _steps(X, y, m, rng):
        m.remove(gone)
        for i in gone:
            del rows[i]
        keep = np.array(sorted(rows.values()))
        fresh = _make(gamma).fit(X[keep], labels[keep])
        _close(m.decision_function(X), fresh.decision_function(X), DECISION_TOL)
        ru, rf = m.problem_.solver_result, fresh.problem_.solver_result
        assert ru.converged
        _close(ru.dual_objective, rf.dual_objective, DUAL_TOL)
        _check_values(m)
    # an add, a relabel and a reweight on the kept values
    new_ids = m.add(X[held], y[held])
    rows.update(zip(np.asarray(new_ids).tolist(), held.tolist()))
    some = np.asarray(m.sample_ids_)[:5]
    m.relabel(some, 1 - labels[[rows[int(i)] for i in some]])
    labels[[rows[int(i)] for i in some]] = 1 - labels[[rows[int(i)] for i in some]]
    other = np.asarray(m.sample_ids_)[5:10]
    w = np.linspace(0.3, 2.5, 5)
    m.reweight(other, w)
    weights[[rows[int(i)] for i in other]] = w
    keep = np.array([rows[int(i)] for i in m.sample_ids_])
    fresh = _make(gamma).fit(X[keep], labels[keep], sample_weight=weights[keep])
    _close(m.decision_function(X), fresh.decision_function(X), DECISION_TOL)
    assert m.problem_.solver_result.converged
    _check_values(m)


def test_removal_equals_the_reference_solver(data):
    """Remove a free support vector and 1% of the rows: the decisions of the update against
    the independent reference solver of the dual on the same kernel matrix (intercept term
    included)."""
    X, y = data["cancer"]
    gamma = 1.0 / X.shape[1]
    m = _make(gamma).fit(X, y)
    dual = np.asarray(m.problem_.dual)[m.problem_.live]
    free = np.flatnonzero((dual > 0.0) & (dual < 1.0))
    rng = np.random.default_rng(5)
    gone = np.union1d(free[:1], rng.choice(X.shape[0], 6, replace=False))
    m.remove(gone)
    keep = np.setdiff1d(np.arange(X.shape[0]), gone)
    K = rbf_kernel(X[keep], gamma=gamma) + 1.0
    t = np.where(y[keep] == m.classes_[1], 1.0, -1.0)
    _, _, _, z = hinge_dual_reference(K, t, 1.0)
    _close(m.decision_function(X[keep]), z, REFERENCE_TOL)


def test_failed_update_leaves_kept_values_bit_identical(data, monkeypatch):
    X, y = data["cancer"]
    m = _make(1.0 / X.shape[1]).fit(X, y)
    vals = m._state.values
    before = [a.copy() for a in (vals.coef, vals.f, vals.s, vals.err)]

    def broken(*args, **kwargs):
        raise ValueError("solver broke")

    monkeypatch.setattr(hinge_solvers, "active_face", broken)
    dual = np.asarray(m.problem_.dual)[m.problem_.live]
    with pytest.raises(ValueError, match="solver broke"):
        m.remove([int(np.flatnonzero((dual > 0) & (dual < 1))[0])])
    assert m._state.values is vals
    for a, b in zip((vals.coef, vals.f, vals.s, vals.err), before):
        assert np.array_equal(a, b)


def test_loaded_model_computes_the_values_and_updates_alike(data, tmp_path):
    X, y = data["digits"]
    m = _make(1.0 / X.shape[1]).fit(X[:600], y[:600])
    path = tmp_path / "m.npz"
    df.save(m, path)
    loaded = df.load(path)
    # the file holds the kept values and face: the loaded state holds what the saved one did
    a, b = m._state.values, loaded._state.values
    for name in ("f", "s", "err", "coef", "face_slots", "face_L_slots", "face_L"):
        np.testing.assert_array_equal(getattr(b, name), getattr(a, name))
    m.remove([3, 10])
    loaded.remove([3, 10])
    # ... and goes on updating along the same path, to the same numbers
    np.testing.assert_allclose(
        loaded.decision_function(X), m.decision_function(X), rtol=1e-12, atol=1e-12
    )
    _check_values(loaded)


def test_a_corrupt_kept_value_is_refused(data, tmp_path):
    X, y = data["digits"]
    m = _make(1.0 / X.shape[1]).fit(X[:300], y[:300])
    m.remove([3])  # kept values moved by an update
    path = tmp_path / "m.npz"
    df.save(m, path)
    with np.load(path) as z:
        arrays = dict(z)
    arrays["state_values"][5, 0] += 1e-3
    np.savez(tmp_path / "bad.npz", **arrays)
    with pytest.raises(ValueError, match="state_values"):
        df.load(tmp_path / "bad.npz")


def test_stale_values_are_recomputed(data, monkeypatch):
    """Kept values whose rounding bound has grown are replaced by a fresh product."""
    X, y = data["cancer"]
    m = _make(1.0 / X.shape[1]).fit(X, y)
    old = m._state.values
    old.err = old.err + 1.0  # far beyond the fresh product's bound
    assert old.stale()
    m.remove([0])
    assert m._state.values is not old
    assert np.max(m._state.values.err) < 1e-6
    _check_values(m)


def test_compaction_keeps_values_and_cache(data):
    """Removals that shrink the model below a quarter of its capacity (the ledger compacts
    its slots): the kept values and the cache follow the slots, the model stays exact."""
    X, y = data["cancer"]
    gamma = 1.0 / X.shape[1]
    m = _make(gamma).fit(X, y)
    cap = m._state.capacity
    rng = np.random.default_rng(11)
    order = rng.permutation(X.shape[0])
    gone = []
    for chunk in np.array_split(order[:470], 4):
        m.remove(np.sort(chunk))
        gone += chunk.tolist()
        _check_values(m)
    assert m._state.capacity < cap  # compacted
    keep = np.setdiff1d(np.arange(X.shape[0]), gone)
    fresh = _make(gamma).fit(X[keep], y[keep])
    _close(m.decision_function(X), fresh.decision_function(X), DECISION_TOL)


def test_square_and_cached_block_equal_plain_indexing():
    from deltafit.solvers._kernel_values import KernelValues, square

    rng = np.random.default_rng(0)
    M = rng.normal(size=(40, 40))
    M = np.asfortranarray(M + M.T)
    for idx in (np.arange(40), np.delete(np.arange(40), [3, 17]), np.sort(rng.choice(40, 25))):
        idx = np.unique(idx)
        assert np.array_equal(square(M, idx), M[np.ix_(idx, idx)])
    vals = KernelValues(M, rng.normal(size=40), nonneg=False)
    vals.cache_face(M, np.arange(5, 30))
    S = np.array([7, 8, 9, 12, 2, 33, 29])
    assert np.array_equal(vals.cached_block(M, S), M[np.ix_(S, S)])
    S = S[vals.cached_first(S)]
    assert np.array_equal(vals.cached_block(M, S), M[np.ix_(S, S)])


def test_near_face_solves_equal_direct_solves():
    """Faces near the last one factorised (a few variables dropped and added) solved through
    its factor equal the direct solve."""
    from deltafit.solvers._hinge_qp import _SubKernelQP

    rng = np.random.default_rng(1)
    X = rng.normal(size=(60, 4))
    K = rbf_kernel(X, gamma=0.5) + 1.0
    y = np.where(rng.random(60) < 0.5, -1.0, 1.0)
    Q = K * np.outer(y, y)
    qp = _SubKernelQP(Q, y, np.zeros(60), np.zeros(60), nonneg=True, reuse=True)
    F0 = np.arange(0, 40)
    G = rng.normal(size=60)
    qp.face_step(F0, G[F0])  # factorised
    for F in (np.delete(F0, [5, 6]), np.union1d(np.delete(F0, [1]), [45, 50])):
        d, null, mul = qp.face_step(F, G[F])
        assert np.allclose(d, np.linalg.solve(Q[np.ix_(F, F)], -G[F]), rtol=1e-8, atol=1e-10)
        assert not null.any()
        assert np.allclose(mul(d), Q[np.ix_(F, F)] @ d)
        assert np.array_equal(qp._base[0], F0)  # through the factor of F0, not a new one


@pytest.mark.parametrize(
    "kernel, params",
    [("linear", {}), ("poly", {"degree": 3, "gamma": 0.05}), ("sigmoid", {"gamma": 0.01})],
)
def test_other_kernels_update_exactly_without_warnings(data, kernel, params):
    """Kernels with negative entries (linear, poly: ``|K|`` kept apart) and an indefinite
    one (sigmoid: a face that is not positive definite hands the round to hinge_loop from
    its start): single removals, an add and a relabel equal a fresh fit, each converged."""
    import warnings

    X, y = data["cancer"]

    def make():
        return df.KernelClassifier(loss="hinge", C=1.0, kernel=kernel, **params)

    m = make().fit(X[:500], y[:500])
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        for i in (3, 10, 77, 150):
            m.remove([i])
            assert m.problem_.solver_result.converged
        m.add(X[500:520], y[500:520])
        m.relabel(np.asarray(m.sample_ids_)[:3], 1 - y[:3])
    keep = np.setdiff1d(np.arange(520), [3, 10, 77, 150])
    y2 = y[keep].copy()
    y2[:3] = 1 - y2[:3]
    fresh = make().fit(X[keep], y2)
    _close(m.decision_function(X), fresh.decision_function(X), DECISION_TOL)
