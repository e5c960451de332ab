"""Multi-output squared-loss states (issue 15): K right-hand sides share one factorisation.

``PrimalSquaredState`` and ``DualSquaredState`` fitted on targets of shape (n, K) keep
``beta`` (p, K) / ``alpha`` (capacity, K) and update every column with one tracked inverse.
After a sequence of additions, removals and relabels (one sample at a time, in batches, mixed
in one change, a relabel from one class's ±1 code to another's, batches larger than the
pending rank, a large row whose removal cancels digits), on real data (digits, 10 classes, ±1
one-vs-rest codes; diabetes, 3 regression outputs), the multi-output state equals

(a) a fresh multi-output fit on the resulting data (1e-9 relative),
(b) K single-output states given the same changes (1e-10 relative),
(c) ``Ridge(alpha=1/(2C), fit_intercept=False)`` with 2-D targets / ``solve(K + ρI, Y)``.

The changes are built as the estimators build them (a ``DataChange`` over a ledger whose ``y``
holds the (capacity, K) encoded targets); :class:`FakeLedger` is the part of
``deltafit._ledger.Ledger`` that ``DataChange`` and the states read.
"""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from sklearn.datasets import load_diabetes, load_digits
from sklearn.linear_model import Ridge
from sklearn.metrics.pairwise import rbf_kernel

from deltafit._states._protocol import DataChange, SolverOptions
from deltafit._states._squared_dual import DualSquaredState
from deltafit._states._squared_primal import PrimalSquaredState
from deltafit._states._squared_stats import Rows
from deltafit.losses import get_loss
from hypothesis_profiles import examples

C = 1.0
RHO = 1.0 / (2.0 * C)
GAMMA = 0.02


def _opts(c=C):
    return SolverOptions(get_loss("squared"), c, 1e-12, 100)


def _rel(a, b):
    """``max|a − b| / max(1, max|b|)``."""
    return float(np.max(np.abs(a - b)) / max(1.0, float(np.max(np.abs(b)))))


# --------------------------------------------------------------------------- data
@pytest.fixture(scope="module")
def digits():
    """Φ = [X/16, 1] (p = 65) and ±1 one-vs-rest codes of the 10 digits."""
    X, y = load_digits(return_X_y=True)
    Phi = np.hstack([X / 16.0, np.ones((X.shape[0], 1))])
    return Phi, _codes(y, 10), y


@pytest.fixture(scope="module")
def diabetes():
    """Eight features predicting three standardised outputs (disease progression, BMI, blood
    pressure), plus the constant column."""
    X, y = load_diabetes(return_X_y=True)
    Y = np.column_stack([y, X[:, 2], X[:, 3]])
    Y = (Y - Y.mean(0)) / Y.std(0)
    F = np.delete(X, [2, 3], axis=1)
    F = (F - F.mean(0)) / F.std(0)
    return np.hstack([F, np.ones((F.shape[0], 1))]), Y


def _codes(labels, k):
    """±1 one-vs-rest codes (n, k): +1 in the label's column, −1 elsewhere."""
    out = -np.ones((len(labels), k))
    out[np.arange(len(labels)), labels] = 1.0
    return out


def _kernel(A, B):
    return rbf_kernel(A, B, gamma=GAMMA) + 1.0  # the intercept: intercept_scaling² = 1


# --------------------------------------------------------------------------- the ledger
class FakeLedger:
    """What ``DataChange`` and the states read from a ledger: ``X`` (rows by slot), ``y``
    (targets by slot, (capacity,) or (capacity, K)), ``active``, ``capacity``, ``keep_rows``;
    plus the slot bookkeeping of the real one (allocate, reuse of released slots, compaction)."""

    def __init__(self, X, Y, keep_rows=True, headroom=8):
        n = X.shape[0]
        cap = n + headroom
        self.X = np.zeros((cap, X.shape[1]))
        self.X[:n] = X
        self.y = np.zeros((cap,) + Y.shape[1:])
        self.y[:n] = Y
        self.active = np.zeros(cap, dtype=bool)
        self.active[:n] = True
        self.keep_rows = keep_rows
        self.end = n
        self.free = []

    @property
    def capacity(self):
        return self.y.shape[0]

    def allocate(self, k):
        reuse = self.free[:k]
        fresh = k - len(reuse)
        if self.end + fresh > self.capacity:
            cap = max(self.end + fresh, int(1.5 * self.capacity))
            for name in ("X", "y", "active"):
                a = getattr(self, name)
                b = np.zeros((cap,) + a.shape[1:], dtype=a.dtype)
                b[: a.shape[0]] = a
                setattr(self, name, b)
        return np.concatenate(
            [np.asarray(reuse, dtype=np.intp), np.arange(self.end, self.end + fresh, dtype=np.intp)]
        )

    def commit(self, change, rows, reusable):
        """Write ``change`` (after the state applied it) and the added ``rows``; ``reusable``:
        the state's ``reusable_slots()``."""
        if change.remove_slots is not None:
            self.active[change.remove_slots] = False
            self.y[change.remove_slots] = 0.0
        if change.relabel_slots is not None:
            self.y[change.relabel_slots] = change.relabel_t
        if change.add_slots is not None:
            s = change.add_slots
            n_reused = int(np.count_nonzero(s < self.end))
            del self.free[:n_reused]
            self.X[s] = rows
            self.y[s] = change.t_add
            self.active[s] = True
            self.end = max(self.end, int(s.max()) + 1)
        if reusable is None:
            reusable = [] if change.remove_slots is None else change.remove_slots.tolist()
        self.free.extend(int(i) for i in reusable)

    def compact(self):
        """Move the live slots to the front (as ``Ledger.compact``); returns the kept slots."""
        keep = np.flatnonzero(self.active)
        n = keep.size
        for name in ("X", "y", "active"):
            a = getattr(self, name)
            b = np.zeros(a.shape, dtype=a.dtype)
            b[:n] = a[keep]
            setattr(self, name, b)
        self.end, self.free = n, []
        return keep


class Run:
    """A state and its ledger, changed by pool index (the same script drives every run)."""

    def __init__(self, cls, pool, targets, n_fit, keep_rows=True, max_rank=16):
        self.pool, self.targets = pool, targets
        X, Y = pool[:n_fit], targets[:n_fit]
        self.led = FakeLedger(X, Y, keep_rows=keep_rows)
        self.state = cls(_opts(), max_rank=max_rank)
        if cls.kernel:
            self.state.fit(_kernel(X, X), Y, self.led.capacity)
        else:
            self.state.fit(X, Y)
        self.slot = {i: i for i in range(n_fit)}  # pool index -> slot

    def change(self, add=None, remove=None, relabel=None, new_targets=None):
        led = self.led
        ch = DataChange(led)
        if remove is not None:
            ch.remove_slots = np.array([self.slot[i] for i in remove], dtype=np.intp)
            if not self.state.kernel:
                ch.rows_remove = (
                    Rows(led.X, ch.remove_slots) if led.keep_rows else self.pool[list(remove)]
                )
                if not led.keep_rows:
                    ch.remove_t = led.y[ch.remove_slots]
        if relabel is not None:
            ch.relabel_slots = np.array([self.slot[i] for i in relabel], dtype=np.intp)
            ch.relabel_t = np.asarray(new_targets, dtype=float)
            if not self.state.kernel:
                ch.rows_relabel = led.X[ch.relabel_slots]
        if add is not None:
            ch.add_slots = led.allocate(len(add))
            ch.t_add = self.targets[list(add)]
            Xa = self.pool[list(add)]
            if self.state.kernel:
                ch.K_cross = np.zeros((led.capacity, len(add)))
                A = np.flatnonzero(led.active)
                ch.K_cross[A] = _kernel(led.X[A], Xa)
                ch.K_new = _kernel(Xa, Xa)
            else:
                ch.rows_add = Xa
        self.state.apply_change(ch)
        led.commit(ch, None if add is None else self.pool[list(add)], self.state.reusable_slots())
        if remove is not None:
            for i in remove:
                del self.slot[i]
        if add is not None:
            self.slot.update(zip(add, ch.add_slots.tolist()))
        return ch

    def compact(self):
        keep = self.led.compact()
        self.state.take(keep, self.led.capacity)
        where = {int(s): j for j, s in enumerate(keep)}
        self.slot = {i: where[s] for i, s in self.slot.items()}

    def live(self):
        """Pool indices, rows and targets of the live samples, in pool order."""
        idx = np.array(sorted(self.slot))
        slots = np.array([self.slot[i] for i in idx], dtype=np.intp)
        return idx, slots, self.led.X[slots], self.led.y[slots]

    def solution(self):
        """β (p, K), or α of the live samples in pool order."""
        if not self.state.kernel:
            return self.state.beta
        return self.state.alpha[self.live()[1]]


def _fresh(run):
    """A fresh fit of the run's state class on its live data."""
    _, _, X, Y = run.live()
    st = type(run.state)(_opts())
    if st.kernel:
        st.fit(_kernel(X, X), Y, X.shape[0])
        return st.alpha[: X.shape[0]]
    return st.fit(X, Y).beta


def _reference(run):
    """scikit-learn's Ridge (primal) or ``solve(K + ρI, Y)`` (dual) on the live data."""
    _, _, X, Y = run.live()
    if run.state.kernel:
        return np.linalg.solve(_kernel(X, X) + RHO * np.eye(X.shape[0]), Y)
    return Ridge(alpha=RHO, fit_intercept=False, solver="cholesky").fit(X, Y).coef_.T


def _script(n_fit, n_pool, K, rng, moves=40):
    """A fixed sequence of changes over pool indices: single add / remove, a relabel of one
    row from one class's code to another's, a mixed batch in one change, many single moves
    (folds), a batch larger than the pending rank, and a relabel batch."""
    out = []
    live = list(range(n_fit))
    spare = list(range(n_fit, n_pool))

    def take(lst, k):
        pick = sorted(rng.choice(len(lst), size=k, replace=False).tolist(), reverse=True)
        return [lst.pop(j) for j in pick]

    def code(k_new):
        c = -np.ones(K)
        c[k_new] = 1.0
        return c

    out.append(dict(add=take(spare, 1)))
    out.append(dict(remove=take(live, 1)))
    i = live[3]
    out.append(dict(relabel=[i], new=lambda t, i=i: np.array([np.roll(t[i], 1)])))
    add, rem = take(spare, 20), take(live, 15)
    rel = [live[j] for j in rng.choice(len(live), size=5, replace=False)]
    out.append(
        dict(
            add=add,
            remove=rem,
            relabel=rel,
            new=lambda t, rel=rel: np.array([code(int(np.argmax(t[r])) - 1) for r in rel]),
        )
    )
    live.extend(add)
    for _ in range(moves):
        a, r = take(spare, 1), take(live, 1)
        out.append(dict(add=a, remove=r))
        live.extend(a)
    out.append(dict(remove=take(live, 80)))  # > max_rank: refactorised
    a = take(spare, 90)
    out.append(dict(add=a))
    live.extend(a)
    rel = [live[j] for j in rng.choice(len(live), size=10, replace=False)]
    out.append(dict(relabel=rel, new=lambda t, rel=rel: -t[rel]))
    return out


def _play(runs, script, current, column=None, check=None):
    """Apply ``script`` to every run; ``current``: the pool's current targets (relabels
    change it), ``column``: per run, the column of the targets it sees (None: all)."""
    for step in script:
        new = step["new"](current) if "new" in step else None
        for run, col in zip(runs, column or [None] * len(runs)):
            nt = None if new is None else (new if col is None else new[:, col])
            run.change(
                add=step.get("add"),
                remove=step.get("remove"),
                relabel=step.get("relabel"),
                new_targets=nt,
            )
        if new is not None:
            current[step["relabel"]] = new
        if check is not None:
            check()


# --------------------------------------------------------------------------- the three twins
@pytest.mark.parametrize("cls", [PrimalSquaredState, DualSquaredState])
def test_digits_ten_classes_updates_equal_fresh_fit_singles_and_sklearn(cls, digits):
    Phi, Y, _ = digits
    n_fit, n_pool = (600, 900) if cls is PrimalSquaredState else (300, 500)
    pool, targets = Phi[:n_pool], Y[:n_pool].copy()
    K = Y.shape[1]
    multi = Run(cls, pool, targets, n_fit)
    singles = [Run(cls, pool, targets[:, k], n_fit) for k in range(K)]
    assert multi.state.n_outputs == K and singles[0].state.n_outputs is None
    shape = (Phi.shape[1], K) if cls is PrimalSquaredState else (multi.led.capacity, K)
    assert multi.state.solution.shape == shape
    script = _script(n_fit, n_pool, K, np.random.default_rng(1))
    worst = {"fresh": 0.0, "singles": 0.0}

    def check():
        sol = multi.solution()
        worst["fresh"] = max(worst["fresh"], _rel(sol, _fresh(multi)))
        worst["singles"] = max(
            worst["singles"], max(_rel(sol[:, k], s.solution()) for k, s in enumerate(singles))
        )

    current = targets.copy()
    _play([multi] + singles, script, current, [None] + list(range(K)), check)
    if cls is PrimalSquaredState:
        assert multi.state.counters()["n_refactor"] >= 2  # the large batches refactorised
    assert multi.state.counters()["n_folds" if cls.kernel else "n_refactor"] >= 1
    assert worst["fresh"] <= 1e-9, worst
    assert worst["singles"] <= 1e-10, worst
    # every run saw the same data
    assert np.array_equal(multi.live()[3], current[multi.live()[0]])
    assert _rel(multi.solution(), _reference(multi)) <= 1e-8
    # the certified residual: per column, and its max
    g = multi.state.gradient_norms()
    assert g.shape == (K,) and multi.state.gradient_norm() == g.max() and g.max() < 1e-8
    assert singles[0].state.gradient_norms().shape == (1,)
    assert multi.state.warm_coef(multi.live()[1]).shape == (
        (Phi.shape[1], K) if cls is PrimalSquaredState else (len(multi.slot), K)
    )


@pytest.mark.parametrize(
    "cls, keep_rows",
    [(PrimalSquaredState, True), (PrimalSquaredState, False), (DualSquaredState, True)],
)  # kernel: rows kept
def test_diabetes_three_outputs(cls, keep_rows, diabetes):
    Phi, Y = diabetes
    pool, targets = Phi, Y.copy()
    multi = Run(cls, pool, targets, 250, keep_rows=keep_rows, max_rank=8)
    singles = [
        Run(cls, pool, targets[:, k], 250, keep_rows=keep_rows, max_rank=8) for k in range(3)
    ]
    script = _script(250, 442, 3, np.random.default_rng(2), moves=25)
    # regression relabels: new target values, not codes
    for step in script:
        if "relabel" in step:
            step["new"] = lambda t, rel=step["relabel"]: t[rel] * 0.5 + 0.25
    _play([multi] + singles, script, targets.copy(), [None, 0, 1, 2])
    sol = multi.solution()
    assert _rel(sol, _fresh(multi)) <= 1e-9
    assert max(_rel(sol[:, k], s.solution()) for k, s in enumerate(singles)) <= 1e-10
    assert _rel(sol, _reference(multi)) <= 1e-8


@pytest.mark.parametrize("keep_rows", [True, False])
def test_large_row_round_trip_per_column(keep_rows, diabetes):
    """A large row enters the double-double part of the statistics (every column of Φᵀy);
    removing it again gives the fresh fit on all columns (with rows: by recomputing the
    statistics from ``change.rows_after()``, whose targets are (m, K))."""
    Phi, Y = diabetes
    value = 1e5 if not keep_rows else 1e7
    pool = np.vstack([Phi[:300], np.full((1, Phi.shape[1]), value)])
    targets = np.vstack([Y[:300], [[3.0, -1.0, 0.5]]])
    multi = Run(PrimalSquaredState, pool, targets, 290, keep_rows=keep_rows)
    singles = [
        Run(PrimalSquaredState, pool, targets[:, k], 290, keep_rows=keep_rows) for k in range(3)
    ]
    for run in [multi] + singles:
        run.change(add=[300, 291])
        assert run.state.stats.Mbig is not None  # the large row is kept apart
        run.change(remove=[300], add=[292])
    sol = multi.solution()
    assert _rel(sol, _fresh(multi)) <= 1e-9
    assert max(_rel(sol[:, k], s.solution()) for k, s in enumerate(singles)) <= 1e-10
    if keep_rows:
        assert multi.state.n_rebuild >= 1  # recomputed from rows_after()


# --------------------------------------------------------------------------- refusals
def _snapshot(st):
    if st.kernel:
        return st.alpha.copy(), st.y.copy(), st.active.copy()
    return st.beta.copy(), st.b.copy(), st.exact_matrix()


def _same(a, b):
    return all(np.array_equal(x, y) for x, y in zip(a, b))


def test_refused_singular_addition_leaves_every_column_unchanged(digits):
    Phi, Y, _ = digits
    run = Run(PrimalSquaredState, Phi[:300], Y[:300], 250)
    run.change(add=[250], remove=[0])  # pending corrections to roll back to
    before = _snapshot(run.state)
    big = np.full((1, Phi.shape[1]), 1e10)
    ch = DataChange(run.led, add_slots=run.led.allocate(1), t_add=Y[:1], rows_add=big)
    with pytest.raises(ValueError, match="ill-conditioned"):
        run.state.apply_change(ch)
    assert _same(before, _snapshot(run.state))
    # and the state goes on updating exactly
    run.change(add=[251, 252], remove=[5])
    assert _rel(run.solution(), _fresh(run)) <= 1e-9


def test_refused_cancelling_removal_without_rows_leaves_every_column_unchanged(diabetes):
    Phi, Y = diabetes
    pool = np.vstack([Phi[:100], np.full((1, Phi.shape[1]), 1e8)])
    targets = np.vstack([Y[:100], [[1.0, 2.0, 3.0]]])
    run = Run(PrimalSquaredState, pool, targets, 90, keep_rows=False)
    run.change(add=[100])
    before = _snapshot(run.state)
    with pytest.raises(ValueError, match="keep_data=False"):
        run.change(remove=[100])
    assert _same(before, _snapshot(run.state))


@pytest.mark.parametrize("cls", [PrimalSquaredState, DualSquaredState])
def test_overflow_in_one_column_is_refused_for_all(cls, diabetes):
    Phi, Y = diabetes
    targets = Y[:60].copy()
    targets[55, 1] = 1e306 if cls is PrimalSquaredState else np.inf
    run = Run(cls, Phi[:60], targets, 50)
    run.change(add=[50], remove=[1])
    before = _snapshot(run.state)
    # (the estimators cap magnitudes before a state sees them; here the state's own check)
    with np.errstate(all="ignore"), pytest.raises(ValueError, match="overflow"):
        run.change(add=[55])
    after = _snapshot(run.state)
    if cls is DualSquaredState:  # α keeps its values, padded to the grown capacity
        n = before[0].shape[0]
        assert _same([a[:n] for a in after], before)
        assert not after[0][n:].any()
    else:
        assert _same(before, after)


# --------------------------------------------------------------------------- persistence
@pytest.mark.parametrize("cls", [PrimalSquaredState, DualSquaredState])
def test_to_arrays_from_arrays_round_trip(cls, digits):
    Phi, Y, _ = digits
    run = Run(cls, Phi[:260], Y[:260], 200)
    run.change(
        add=list(range(200, 210)),
        remove=[3, 7],
        relabel=[11],
        new_targets=np.roll(Y[11:12], 2, axis=1),
    )
    if cls is PrimalSquaredState:
        run.change(add=[210])  # a pending correction for to_arrays to fold
    idx, slots, X, T = run.live()
    st = run.state
    arrays = st.to_arrays(slots)
    n, p, K = slots.size, Phi.shape[1], Y.shape[1]
    shapes = cls.saved_shapes(n, p, n_outputs=K)
    assert {k: arrays[k].shape for k in shapes} == shapes
    for k, shape in cls.optional_shapes(n, p, n_outputs=K).items():
        if k in arrays:
            assert arrays[k].shape == shape
    # the default describes a single-output file, as before
    one = cls.saved_shapes(n, p)
    assert one[("state_beta" if cls is PrimalSquaredState else "state_alpha")] == (
        (p,) if cls is PrimalSquaredState else (n,)
    )
    back = cls.from_arrays(arrays, st.opts, y=T, capacity=n + 8, max_rank=st.max_rank)
    assert back.n_outputs == K
    sol = st.solution if cls is PrimalSquaredState else st.alpha[slots]
    sol2 = back.solution if cls is PrimalSquaredState else back.alpha[:n]
    assert np.array_equal(sol, sol2)
    # targets of another width do not fit the file
    with pytest.raises(ValueError, match="corrupt model file"):
        cls.from_arrays(arrays, st.opts, y=T[:, 0], capacity=n + 8)
    with pytest.raises(ValueError, match="corrupt model file"):
        cls.from_arrays(arrays, st.opts, y=T[:, :3], capacity=n + 8)


def test_primal_from_arrays_without_targets_reads_the_width(digits):
    Phi, Y, _ = digits
    st = PrimalSquaredState(_opts()).fit(Phi[:200], Y[:200])
    back = PrimalSquaredState.from_arrays(st.to_arrays(), st.opts)
    assert back.beta.shape == (Phi.shape[1], 10) and np.array_equal(back.beta, st.beta)


def test_dual_compaction_and_capacity_growth(digits):
    Phi, Y, _ = digits
    pool, targets = Phi[:400], Y[:400]
    run = Run(DualSquaredState, pool, targets, 150)
    run.change(remove=list(range(0, 40)))
    run.change(add=list(range(150, 260)))  # grows the capacity
    assert run.state.alpha.shape == (run.led.capacity, 10)
    run.compact()
    assert run.state.y.shape == (run.led.capacity, 10)
    run.change(add=[300, 301], remove=[45], relabel=[60], new_targets=-targets[60:61])
    assert _rel(run.solution(), _fresh(run)) <= 1e-9


def test_checkpoint_is_independent(digits):
    Phi, Y, _ = digits
    for cls in (PrimalSquaredState, DualSquaredState):
        run = Run(cls, Phi[:200], Y[:200], 150)
        copy = run.state.checkpoint()
        before = copy.solution.copy()
        run.change(add=[150, 151], remove=[0])
        assert np.array_equal(copy.solution, before)
        assert not np.array_equal(run.state.solution[: before.shape[0]], before)


def test_gradient_norms_certify_each_column(digits):
    """Each column's ‖β_k − β_k*‖ is at most its own gradient norm (J_k is 1-strongly
    convex); a perturbed column shows in its own norm only."""
    Phi, Y, _ = digits
    st = PrimalSquaredState(_opts()).fit(Phi[:300], Y[:300])
    exact = st.beta.copy()
    delta = 1e-4 * np.linspace(1.0, 2.0, Phi.shape[1])
    st.beta = st.beta.copy()
    st.beta[:, 3] += delta
    g = st.gradient_norms()
    assert g[3] >= np.linalg.norm(delta)
    assert np.all(np.delete(g, 3) < 1e-9)
    assert st.gradient_norm() == g[3]
    st.beta = exact
    ker = DualSquaredState(_opts()).fit(_kernel(Phi[:200], Phi[:200]), Y[:200], 210)
    ker.alpha = ker.alpha.copy()
    ker.alpha[:200, 7] += 1e-3
    g = ker.gradient_norms()
    assert g[7] > 1e-3 and np.all(np.delete(g, 7) < 1e-9) and ker.gradient_norm() == g[7]


def test_one_column_matrix_targets(diabetes):
    """Targets of shape (n, 1) keep their shape (a one-column model, not a vector one)."""
    Phi, Y = diabetes
    run = Run(PrimalSquaredState, Phi[:200], Y[:200, :1], 150)
    vec = Run(PrimalSquaredState, Phi[:200], Y[:200, 0], 150)
    for r in (run, vec):
        r.change(add=[150, 151], remove=[2])
    assert run.state.beta.shape == (Phi.shape[1], 1) and run.state.n_outputs == 1
    assert _rel(run.state.beta[:, 0], vec.state.beta) <= 1e-12


# --------------------------------------------------------------------------- property test
@settings(max_examples=examples(15), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    seed=st.integers(0, 2**31 - 1),
    n=st.integers(12, 40),
    p=st.integers(1, 6),
    K=st.integers(1, 4),
    kernel=st.booleans(),
    ops=st.lists(st.tuples(st.integers(0, 3), st.integers(1, 5)), min_size=1, max_size=8),
)
def test_random_problems_multi_equals_singles(seed, n, p, K, kernel, ops):
    rng = np.random.default_rng(seed)
    pool = rng.standard_normal((n + 30, p))
    targets = rng.standard_normal((n + 30, K))
    cls = DualSquaredState if kernel else PrimalSquaredState
    multi = Run(cls, pool, targets, n, max_rank=4)
    singles = [Run(cls, pool, targets[:, k], n, max_rank=4) for k in range(K)]
    live, spare = list(range(n)), list(range(n, n + 30))
    for kind, k in ops:
        step = {}
        if kind in (0, 3) and len(spare) >= k:
            step["add"] = [spare.pop() for _ in range(k)]
        if kind in (1, 3) and len(live) > k + 2:
            step["remove"] = [live.pop(0) for _ in range(k)]
        if kind == 2:
            step["relabel"] = live[:k]
            step["new"] = rng.standard_normal((len(live[:k]), K))
        if not step:
            continue
        for j, run in enumerate([multi] + singles):
            new = step.get("new")
            run.change(
                add=step.get("add"),
                remove=step.get("remove"),
                relabel=step.get("relabel"),
                new_targets=None if new is None else (new if j == 0 else new[:, j - 1]),
            )
        live.extend(step.get("add", []))
    sol = multi.solution()
    for k, s in enumerate(singles):
        assert _rel(sol[:, k], s.solution()) <= 1e-9
    assert _rel(sol, _fresh(multi)) <= 1e-8
