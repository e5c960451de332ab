"""The primal squared state's fast paths (issue 32, rows 6 and 7) against fresh fits on real data.

* one sample added or removed takes the scalar Woodbury step (``_apply_one``), refined only when
  the core's certified noise can move β by more than 1e-11 of its norm: after a stream of
  single updates (past several folds) the model equals scikit-learn's ``Ridge`` on the data
  left, 1e-8 relative on the decision function (digits, the MNIST sample, standardised breast
  cancer; one output and ten);
* a large removal reads its rows once (the cancellation it leaves in the statistics measured
  as they stream through syrk): the same tolerance, and the same bound as a separate pass;
* the ledger journals no copy of deleted or fresh rows: a rollback leaves the stored rows
  bitwise as before, a commit zeroes the deleted ones.
"""

import numpy as np
import pytest
from sklearn.linear_model import Ridge

import deltafit as df
from deltafit._ledger import Ledger
from deltafit._states._squared_primal import PrimalSquaredState
from reference import rel_err

SQ_TOL = 1e-8
C = 1.0


def _ridge(X, T):
    return Ridge(alpha=1.0 / (2.0 * C), fit_intercept=False, solver="cholesky").fit(X, T)


def _count_fast(monkeypatch):
    """Count the single-sample steps that ``_apply_one`` carried out."""
    hits = []
    original = PrimalSquaredState._apply_one

    def counting(self, B, yy, sg):
        done = original(self, B, yy, sg)
        hits.append(done)
        return done

    monkeypatch.setattr(PrimalSquaredState, "_apply_one", counting)
    return hits


def _stream(X, T, n0, removals, additions):
    """A model on rows [0, n0), then ``removals`` (ids) one at a time and rows ``additions``
    added one at a time; returns it and the indices of the rows it should hold."""
    m = df.LinearRegressor(C=C, fit_intercept=False).fit(X[:n0], T[:n0])
    held = list(range(n0))
    for i in removals:
        m.remove([int(i)])
        held.remove(int(i))
    for j in additions:
        m.add(X[j : j + 1], T[j : j + 1])
        held.append(int(j))
    return m, np.array(held)


@pytest.mark.parametrize("name", ["digits", "breast_cancer", "mnist_sample"])
def test_single_updates_equal_ridge(name, request, monkeypatch):
    X, y = request.getfixturevalue(name)
    X = np.asarray(X, dtype=np.float64)
    n = min(X.shape[0], 1200)
    X = X[:n]
    t = np.where(np.asarray(y)[:n] == np.asarray(y)[0], 1.0, -1.0)
    n0 = n - 60
    rng = np.random.default_rng(0)
    removals = rng.choice(n0, size=150, replace=False)  # past two folds (max_rank 64)
    hits = _count_fast(monkeypatch)
    m, held = _stream(X, t, n0, removals, range(n0, n))
    assert sum(hits) >= 0.9 * len(hits) > 0  # the scalar step, not the general one
    sk = _ridge(X[held], t[held])
    assert rel_err(m.predict(X), sk.predict(X)) < SQ_TOL
    assert m.problem_.certified_residual < 1e-8


def test_single_updates_equal_ridge_ten_outputs(digits, monkeypatch):
    X, y = digits
    X = np.asarray(X, dtype=np.float64)[:900]
    T = np.where(np.asarray(y)[:900, None] == np.arange(10)[None, :], 1.0, -1.0)
    rng = np.random.default_rng(1)
    removals = rng.choice(850, size=100, replace=False)
    hits = _count_fast(monkeypatch)
    m, held = _stream(X, T, 850, removals, range(850, 900))
    assert sum(hits) >= 0.9 * len(hits) > 0
    sk = _ridge(X[held], T[held])
    assert rel_err(m.predict(X), sk.predict(X)) < SQ_TOL


def test_single_updates_ill_conditioned_equal_fresh_fit(monkeypatch):
    """Breast cancer unscaled (feature scales 1e-3 .. 4e3: cond(ΦᵀΦ + ρI) ~ 1e12): the scalar
    step's refinement gate and its hand-offs to the general step keep the model a fresh fit's
    to 1e-8 of its scores."""
    from sklearn.datasets import load_breast_cancer as sk_breast_cancer

    X, y = sk_breast_cancer(return_X_y=True)
    t = np.where(y == 1, 1.0, -1.0)
    rng = np.random.default_rng(2)
    removals = rng.choice(500, size=120, replace=False)
    m, held = _stream(X, t, 500, removals, range(500, 569))
    fresh = df.LinearRegressor(C=C, fit_intercept=False).fit(X[held], t[held])
    assert rel_err(m.predict(X), fresh.predict(X)) < SQ_TOL


@pytest.mark.parametrize("name", ["digits", "mnist_sample"])
def test_large_removal_reads_rows_once(name, request):
    X, y = request.getfixturevalue(name)
    X = np.asarray(X, dtype=np.float64)
    t = np.where(np.asarray(y) % 2 == 0, 1.0, -1.0)
    m = df.LinearRegressor(C=C, fit_intercept=False).fit(X, t)
    st = m._state
    gone = np.sort(np.random.default_rng(3).choice(X.shape[0], X.shape[0] // 10, replace=False))
    lost_before = st.stats.lost
    expected = st.stats.cancellation_of(np.einsum("ij,ij->i", X[gone], X[gone]))
    m.remove(gone)
    assert st.stats.lost - lost_before == pytest.approx(expected, rel=1e-12)
    keep = np.setdiff1d(np.arange(X.shape[0]), gone)
    assert rel_err(m.predict(X), _ridge(X[keep], t[keep]).predict(X)) < SQ_TOL
    # the deleted rows are zero once the update committed
    assert not np.any(m._ledger.X[gone])


def _ledger(n=20, p=5):
    rng = np.random.default_rng(4)
    led = Ledger(p, keep_rows=True, capacity=n + 4)
    led.begin()
    led.insert(led.allocate(n), rng.standard_normal((n, p)), rng.standard_normal(n))
    led.commit()
    return led


def _snapshot(led):
    return [np.array(getattr(led, a), copy=True) for a in ("X", "y", "w", "ids", "active")]


def test_ledger_rollback_puts_rows_back_without_copies():
    led = _ledger()
    before = _snapshot(led)
    led.begin()  # in a model's order: allocate (grow), delete, insert
    fresh = led.allocate(6)  # grows past the capacity: fresh slots in new arrays
    led.delete(np.array([3, 7, 11]))
    led.insert(fresh, np.ones((6, 5)), np.ones(6))
    led.rollback()
    after = _snapshot(led)
    for a, b in zip(before, after):
        np.testing.assert_array_equal(a, b[: a.shape[0]])
    assert not np.any(led.X[before[0].shape[0] :])  # the fresh rows are zero again
    assert led.n_samples == 20


def test_ledger_commit_zeroes_deleted_rows():
    led = _ledger()
    X = led.X.copy()
    led.begin()
    led.delete(np.array([2, 5]))
    np.testing.assert_array_equal(led.X, X)  # kept in place until the commit
    led.commit()
    assert not np.any(led.X[[2, 5]])
    np.testing.assert_array_equal(np.delete(led.X, [2, 5], axis=0), np.delete(X, [2, 5], axis=0))
    # outside a transaction a deletion zeroes at once; a compaction drops pending zeroes
    led.delete(np.array([0]))
    assert not np.any(led.X[0])
    led.begin()
    led.delete(np.array([1]))
    keep = led.compact()
    led.commit()
    np.testing.assert_array_equal(led.X[: keep.size], X[keep])
