"""Exact hinge updates by working sets (warm active-set start of the dual QP).

Every update (remove / add / relabel / reweight; intercept on and off; dense and sparse rows;
linear and RBF kernel) is compared with a fresh fit on the data after the change, on
breast_cancer and digits even/odd:

* decision values within 1e-8 (relative to max(1, max |fresh|)) and the dual objectives within
  1e-9 (relative), the update certified like a cold solve (converged, its radius covering the
  distance to the fresh solution);
* the update visits fewer coordinates than the cold solve of the same problem
  (``HingeResult.n_touched``: a count, not a clock);
* the public solvers' ``working_set`` / ``margin0`` against their cold solves;
* a failed update leaves the model bit-identical; a saved model updates like the original.
"""

from __future__ import annotations

import numpy as np
import pytest
import scipy.sparse as sp
from sklearn.datasets import load_breast_cancer, load_digits
from sklearn.metrics.pairwise import rbf_kernel
from sklearn.preprocessing import StandardScaler

import deltafit as df
from deltafit.solvers import _hinge as hinge_solvers
from deltafit.solvers import hinge_kernel, hinge_primal

DECISION_TOL = 1e-8
DUAL_TOL = 1e-9


@pytest.fixture(scope="module")
def data():
    Xc, yc = load_breast_cancer(return_X_y=True)
    Xd, yd = load_digits(return_X_y=True)
    return {"cancer": (StandardScaler().fit_transform(Xc), yc), "digits": (Xd / 16.0, yd % 2)}


def _close(a, b, tol):
    a, b = np.asarray(a, dtype=float), np.asarray(b, dtype=float)
    err = float(np.max(np.abs(a - b)) / max(1.0, float(np.max(np.abs(b)))))
    assert err <= tol, err


def _change(op, n, rng):
    """(base rows, change arguments, the rows and weights after the change)."""
    perm = rng.permutation(n)
    k = max(3, n // 50)
    w = np.ones(n)
    if op == "add":
        return np.sort(perm[k:]), np.sort(perm[:k]), w
    if op == "remove":
        return np.arange(n), np.sort(perm[:k]), w
    if op == "reweight":
        w[np.sort(perm[:k])] = rng.uniform(0.2, 3.0, k)
    return np.arange(n), np.sort(perm[:k]), w


def _apply(m, op, X, y, idx, w):
    if op == "add":
        m.add(X[idx], y[idx])
    elif op == "remove":
        m.remove(idx)
    elif op == "relabel":
        m.relabel(idx, 1 - y[idx])
    else:
        m.reweight(idx, w[idx])


def _after(op, X, y, base, idx, w):
    """X, y and weights after the change (the fresh fit's data)."""
    if op == "add":
        rows = np.concatenate([base, idx])
        return X[rows], y[rows], None
    if op == "remove":
        keep = np.setdiff1d(base, idx)
        return X[keep], y[keep], None
    if op == "relabel":
        y2 = y.copy()
        y2[idx] = 1 - y[idx]
        return X, y2, None
    return X, y, w


def _check(upd, fresh, X_eval):
    _close(upd.decision_function(X_eval), fresh.decision_function(X_eval), DECISION_TOL)
    ru, rf = upd.problem_.solver_result, fresh.problem_.solver_result
    assert ru.converged
    _close(ru.dual_objective, rf.dual_objective, DUAL_TOL)
    if not upd.problem_.kernel:
        dist = float(np.linalg.norm(upd.problem_.coef - fresh.problem_.coef))
        assert dist <= (ru.grad_norm + rf.grad_norm) * (1 + 1e-9)
    # the update visits fewer coordinates than the cold solve of the same problem
    assert 0 < ru.n_touched < rf.n_touched or (ru.n_touched == 0 and ru.n_iter == 0)
    return ru, rf


LINEAR_CASES = [
    ("cancer", "remove", True, False),
    ("cancer", "add", True, True),
    ("cancer", "relabel", False, False),
    ("cancer", "reweight", True, False),
    ("digits", "remove", True, True),
    ("digits", "add", False, False),
    ("digits", "relabel", True, False),
    ("digits", "reweight", False, True),
]


@pytest.mark.parametrize("name, op, intercept, sparse", LINEAR_CASES)
def test_linear_update_equals_fresh_fit(data, name, op, intercept, sparse):
    X, y = data[name]
    Xs = sp.csr_matrix(X) if sparse else X
    rng = np.random.default_rng(len(name) + len(op))
    base, idx, w = _change(op, X.shape[0], rng)

    def make():
        return df.LinearClassifier(loss="hinge", C=1.0, fit_intercept=intercept, max_iter=300)

    m = make().fit(Xs[base], y[base])
    _apply(m, op, Xs, y, idx, w)
    X2, y2, w2 = _after(op, Xs, y, base, idx, w)
    fresh = make().fit(X2, y2, sample_weight=w2)
    _check(m, fresh, X)


KERNEL_CASES = [
    ("cancer", "remove", True),
    ("cancer", "add", False),
    ("cancer", "relabel", True),
    ("cancer", "reweight", False),
    ("digits", "remove", False),
    ("digits", "relabel", True),
]


@pytest.mark.parametrize("name, op, intercept", KERNEL_CASES)
def test_kernel_update_equals_fresh_fit(data, name, op, intercept):
    X, y = data[name]
    rng = np.random.default_rng(7 + len(op))
    base, idx, w = _change(op, X.shape[0], rng)
    gamma = 1.0 / X.shape[1]

    def make():
        return df.KernelClassifier(
            loss="hinge", C=1.0, kernel="rbf", gamma=gamma, fit_intercept=intercept, max_iter=300
        )

    m = make().fit(X[base], y[base])
    _apply(m, op, X, y, idx, w)
    X2, y2, w2 = _after(op, X, y, base, idx, w)
    fresh = make().fit(X2, y2, sample_weight=w2)
    _check(m, fresh, X)


def test_single_removals_in_a_row_stay_exact(data):
    """Remove one sample at a time (support vectors and not): each update equals a fresh fit,
    and one that removes a sample with α = 0 visits no coordinate at all."""
    X, y = data["cancer"]
    m = df.KernelClassifier(loss="hinge", C=1.0, kernel="rbf", gamma=1.0 / 30).fit(X, y)
    dual = m.problem_.dual
    ids = np.asarray(m.sample_ids_)
    gone = [int(ids[np.flatnonzero(dual == 0.0)[0]]), int(ids[np.flatnonzero(dual > 0.0)[0]])]
    for i in gone:
        m.remove([i])
        keep = np.setdiff1d(np.arange(X.shape[0]), gone[: gone.index(i) + 1])
        fresh = df.KernelClassifier(loss="hinge", C=1.0, kernel="rbf", gamma=1.0 / 30).fit(
            X[keep], y[keep]
        )
        _close(m.decision_function(X), fresh.decision_function(X), DECISION_TOL)
        if i == gone[0]:
            assert m.problem_.solver_result.n_touched == 0


@pytest.mark.parametrize("kind", ["primal", "primal-sparse", "kernel"])
def test_public_solvers_working_set(data, kind):
    """``working_set`` and ``margin0`` give the cold solve's solution, visiting fewer
    coordinates; the same with weights (a weight 0 drops its sample)."""
    X, y = data["cancer"]
    t = np.where(y == 1, 1.0, -1.0)
    F = np.hstack([X, np.ones((X.shape[0], 1))])
    K = rbf_kernel(X, gamma=1.0 / 30) + 1.0
    n = F.shape[0]
    keep = np.arange(12, n)
    w = np.ones(keep.size)
    w[:5] = 0.0
    w[5:10] = 2.5

    if kind == "kernel":
        full = hinge_kernel(K, t, 1.0)
        margin0 = t * (K @ full.coef)

        def solve(**kw):
            return hinge_kernel(K[np.ix_(keep, keep)], t[keep], 1.0, sample_weight=w, **kw)
    else:
        A = sp.csr_matrix(F) if kind == "primal-sparse" else F
        full = hinge_primal(A, t, 1.0)
        margin0 = t * (F @ full.coef)

        def solve(**kw):
            return hinge_primal(A[keep], t[keep], 1.0, sample_weight=w, **kw)

    cold = solve()
    warm = solve(alpha0=full.alpha[keep], working_set=np.arange(10), margin0=margin0[keep])
    assert warm.converged and warm.n_touched < cold.n_touched
    _close(warm.coef, cold.coef, 1e-8)
    _close(warm.dual_objective, cold.dual_objective, DUAL_TOL)
    assert np.all(warm.alpha[:5] == 0.0)
    # without margins: the dual start alone, still exact
    plain = solve(alpha0=full.alpha[keep], working_set=[])
    _close(plain.coef, cold.coef, 1e-8)
    with pytest.raises(ValueError, match="working_set"):
        solve(alpha0=full.alpha[keep], working_set=[keep.size])
    with pytest.raises(ValueError, match="margin0"):
        solve(alpha0=full.alpha[keep], working_set=[], margin0=np.ones(3))


@pytest.mark.parametrize("kernel", [False, True])
def test_failed_update_leaves_model_bit_identical(data, kernel, monkeypatch):
    X, y = data["cancer"]
    m = (
        df.KernelClassifier(loss="hinge", C=1.0, kernel="rbf", gamma=1.0 / 30)
        if kernel
        else df.LinearClassifier(loss="hinge", C=1.0)
    ).fit(X[:400], y[:400])
    before = (
        m.decision_function(X).copy(),
        np.array(m.problem_.dual, copy=True),
        np.array(m.problem_.alpha if kernel else m.problem_.coef, copy=True),
        list(m.sample_ids_),
    )

    def broken(*args, **kwargs):
        raise ValueError("solver failed half-way")

    monkeypatch.setattr(hinge_solvers, "_hinge_warm", broken)
    for update in (
        lambda: m.remove([3, 5]),
        lambda: m.add(X[400:410], y[400:410]),
        lambda: m.relabel([7], [1 - y[7]]),
    ):
        with pytest.raises(ValueError, match="half-way"):
            update()
        assert np.array_equal(m.decision_function(X), before[0])
        assert np.array_equal(m.problem_.dual, before[1])
        assert np.array_equal(m.problem_.alpha if kernel else m.problem_.coef, before[2])
        assert list(m.sample_ids_) == before[3]
    monkeypatch.undo()
    m.remove([3, 5])  # and the model still updates exactly
    keep = np.setdiff1d(np.arange(400), [3, 5])
    fresh = type(m)(**m.get_params()).fit(X[keep], y[keep])
    _close(m.decision_function(X), fresh.decision_function(X), DECISION_TOL)


@pytest.mark.parametrize("kernel", [False, True])
def test_saved_model_updates_like_the_original(data, kernel, tmp_path):
    X, y = data["cancer"]
    m = (
        df.KernelClassifier(loss="hinge", C=1.0, kernel="rbf", gamma=1.0 / 30)
        if kernel
        else df.LinearClassifier(loss="hinge", C=1.0)
    ).fit(X, y)
    df.save(m, tmp_path / "m.npz")
    loaded = df.load(tmp_path / "m.npz")
    for model in (m, loaded):
        model.remove(np.arange(0, 40, 3))
        model.add(X[:5], 1 - y[:5])
    assert loaded.problem_.solver_result.converged
    _close(loaded.decision_function(X), m.decision_function(X), DECISION_TOL)


def test_old_path_switch_gives_the_same_model(data, monkeypatch):
    """``active_set = False`` (the full warm-started solve, what the benchmark times as
    today's update) and the working sets agree."""
    import copy

    from deltafit._states import _hinge as _warm_hinge

    X, y = data["digits"]
    base = df.LinearClassifier(loss="hinge", C=1.0).fit(X, y)
    ms = []
    for flag in (True, False):
        monkeypatch.setattr(_warm_hinge.PrimalHingeState, "active_set", flag)
        m = copy.deepcopy(base)
        m.remove(np.arange(0, 60, 2))
        ms.append(m)
    _close(ms[0].decision_function(X), ms[1].decision_function(X), DECISION_TOL)
    assert ms[0].problem_.solver_result.n_touched < ms[1].problem_.solver_result.n_touched
