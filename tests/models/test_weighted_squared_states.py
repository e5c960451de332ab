"""Sample weights in the squared-loss closed-form states (``PrimalSquaredState``,
``DualSquaredState``): the minimiser of ``C Σ w_i (t_i − z_i)² + ½‖β‖²``.

Primal: ``(ΦᵀWΦ + ρI) β = ΦᵀWt``; dual: ``(K + ρW⁻¹) α = t`` over the samples of positive
weight, ``α_i = 0`` at weight 0 (ρ = 1/(2C); Lee et al., "Exact incremental and decremental
learning for LS-SVM", Thm 1 and Cor. 1–4 with the weights on the diagonal).  After every step
of update scripts (single and batched additions with weights, removals of weighted and
zero-weight samples, reweights up, down, to 0 and back, a relabel and a reweight of the same
sample in one change, batches larger than the pending rank, folds, refactorisations,
compaction; one and three outputs) the state equals ``np.linalg.solve`` of the weighted
system and a fresh weighted state to 1e-9 (relative).  Refused updates leave the state as it
was; the certified residual bounds the distance to the exact solution under random weights.

The changes are built as the estimators build them: a ``DataChange`` over :class:`WLedger`,
the part of ``deltafit._ledger.Ledger`` (with its weights) the states read.
"""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from sklearn.datasets import load_diabetes
from sklearn.metrics.pairwise import rbf_kernel

from deltafit._states._protocol import DataChange, SolverOptions
from deltafit._states._squared_dual import DualSquaredState
from deltafit._states._squared_primal import PrimalSquaredState
from deltafit.losses import get_loss
from hypothesis_profiles import examples

C = 0.7
RHO = 1.0 / (2.0 * C)
GAMMA = 0.05


def _opts():
    return SolverOptions(get_loss("squared"), C, 1e-12, 100)


def _rel(a, b):
    return float(np.max(np.abs(a - b), initial=0.0) / max(1.0, float(np.max(np.abs(b)))))


def _kernel(A, B):
    return rbf_kernel(A, B, gamma=GAMMA) + 1.0


@pytest.fixture(scope="module")
def data():
    """Diabetes: Φ = [standardised X, 1] (p = 11) and three standardised outputs."""
    X, y = load_diabetes(return_X_y=True)
    X = (X - X.mean(0)) / X.std(0)
    Y = np.column_stack([y, X[:, 2] + 0.1 * X[:, 0], np.sin(X[:, 3])])
    Y = (Y - Y.mean(0)) / Y.std(0)
    return np.hstack([X, np.ones((X.shape[0], 1))]), Y


class WLedger:
    """Rows, targets and weights by slot, as ``Ledger`` keeps them (``w``: 1 by default, 0 at
    free slots; ``weighted`` once a weight other than 1 was stored)."""

    def __init__(self, X, Y, w, keep_rows=True, headroom=6):
        n = X.shape[0]
        cap = n + headroom
        self.X = np.zeros((cap, X.shape[1]))
        self.X[:n] = X
        self.y = np.zeros((cap,) + Y.shape[1:])
        self.y[:n] = Y
        self.w = np.zeros(cap)
        self.w[:n] = w
        self.active = np.zeros(cap, dtype=bool)
        self.active[:n] = True
        self.keep_rows = keep_rows
        self.keeps_labels = keep_rows
        self.weighted = bool(np.any(self.w[:n] != 1.0))
        self.end, self.free = n, []

    @property
    def capacity(self):
        return self.y.shape[0]

    def allocate(self, k):
        reuse = self.free[:k]
        fresh = k - len(reuse)
        if self.end + fresh > self.capacity:
            cap = max(self.end + fresh, int(1.5 * self.capacity))
            for name in ("X", "y", "w", "active"):
                a = getattr(self, name)
                b = np.zeros((cap,) + a.shape[1:], dtype=a.dtype)
                b[: a.shape[0]] = a
                setattr(self, name, b)
        return np.concatenate(
            [np.asarray(reuse, dtype=np.intp), np.arange(self.end, self.end + fresh, dtype=np.intp)]
        )

    def commit(self, ch, rows, reusable):
        if ch.remove_slots is not None:
            self.active[ch.remove_slots] = False
            self.y[ch.remove_slots] = 0.0
            self.w[ch.remove_slots] = 0.0
        if ch.relabel_slots is not None:
            self.y[ch.relabel_slots] = ch.relabel_t
        if ch.reweight_slots is not None:
            self.w[ch.reweight_slots] = ch.reweight_w
        if ch.add_slots is not None:
            s = ch.add_slots
            del self.free[: int(np.count_nonzero(s < self.end))]
            self.X[s] = rows
            self.y[s] = ch.t_add
            self.w[s] = 1.0 if ch.w_add is None else ch.w_add
            self.active[s] = True
            self.end = max(self.end, int(s.max()) + 1)
        self.weighted = self.weighted or ch.w_add is not None or ch.reweight_slots is not None
        if reusable is None:
            reusable = [] if ch.remove_slots is None else ch.remove_slots.tolist()
        self.free.extend(int(i) for i in reusable)

    def compact(self):
        keep = np.flatnonzero(self.active)
        for name in ("X", "y", "w", "active"):
            a = getattr(self, name)
            b = np.zeros(a.shape, dtype=a.dtype)
            b[: keep.size] = a[keep]
            setattr(self, name, b)
        self.end, self.free = keep.size, []
        return keep


class Run:
    """A state and its weighted ledger, changed by pool index."""

    def __init__(self, cls, pool, targets, w, n_fit, keep_rows=True, max_rank=8):
        self.pool, self.targets = pool, targets
        X, Y = pool[:n_fit], targets[:n_fit]
        self.led = WLedger(X, Y, w[:n_fit], keep_rows=keep_rows)
        self.state = cls(_opts(), max_rank=max_rank)
        data = _kernel(X, X) if cls.kernel else X
        self.state.fit(data, Y, self.led.capacity, w=w[:n_fit].copy())
        self.slot = {i: i for i in range(n_fit)}

    def change(
        self,
        add=None,
        w_add=None,
        remove=None,
        relabel=None,
        new_t=None,
        reweight=None,
        new_w=None,
        **extra,
    ):
        led, kernel = self.led, self.state.kernel
        ch = DataChange(led)
        if remove is not None:
            ch.remove_slots = np.array([self.slot[i] for i in remove], dtype=np.intp)
            if not kernel:
                ch.rows_remove = self.pool[list(remove)]
                if not led.keep_rows:
                    ch.remove_t = led.y[ch.remove_slots]
        if relabel is not None:
            ch.relabel_slots = np.array([self.slot[i] for i in relabel], dtype=np.intp)
            ch.relabel_t = np.asarray(new_t, dtype=float)
            if not kernel:
                ch.rows_relabel = self.pool[list(relabel)]
                if not led.keep_rows:
                    ch.relabel_t_old = led.y[ch.relabel_slots]
        if reweight is not None:
            ch.reweight_slots = np.array([self.slot[i] for i in reweight], dtype=np.intp)
            ch.reweight_w = np.asarray(new_w, dtype=float)
            if not kernel and not led.keep_rows and "rows_reweight" not in extra:
                # what an estimator keeping no rows would have to hand over (see
                # _squared_stats._reweight_data): the rows and the targets after the relabels
                t = led.y[ch.reweight_slots].copy()
                for j, i in enumerate(reweight):
                    if relabel is not None and i in relabel:
                        t[j] = np.asarray(new_t)[list(relabel).index(i)]
                extra = dict(extra, rows_reweight=self.pool[list(reweight)], reweight_t=t)
        if add is not None:
            ch.add_slots = led.allocate(len(add))
            ch.t_add = self.targets[list(add)]
            ch.w_add = None if w_add is None else np.asarray(w_add, dtype=float)
            Xa = self.pool[list(add)]
            if kernel:
                ch.K_cross = np.zeros((led.capacity, len(add)))
                A = np.flatnonzero(led.active)
                ch.K_cross[A] = _kernel(led.X[A], Xa)
                ch.K_new = _kernel(Xa, Xa)
            else:
                ch.rows_add = Xa
        for name, value in extra.items():  # e.g. rows_reweight for a ledger without rows
            setattr(ch, name, value)
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
        """Slots, rows, targets and weights of the live samples, in pool order."""
        idx = np.array(sorted(self.slot))
        slots = np.array([self.slot[i] for i in idx], dtype=np.intp)
        return slots, self.pool[idx], self.led.y[slots], self.led.w[slots]

    def solution(self):
        if not self.state.kernel:
            return self.state.beta
        return self.state.alpha[self.live()[0]]


def _solve(run):
    """The weighted system solved directly: β (primal) or α of the live samples (dual)."""
    _, X, Y, w = run.live()
    if not run.state.kernel:
        M = X.T @ (w[:, None] * X) + RHO * np.eye(X.shape[1])
        return np.linalg.solve(M, X.T @ (w[:, None] * Y if Y.ndim == 2 else w * Y))
    pos = w > 0
    alpha = np.zeros(Y.shape)
    K = _kernel(X[pos], X[pos])
    alpha[pos] = np.linalg.solve(K + np.diag(RHO / w[pos]), Y[pos])
    return alpha


def _fresh(run):
    """A fresh weighted state on the run's live data."""
    _, X, Y, w = run.live()
    st = type(run.state)(_opts())
    if st.kernel:
        return st.fit(_kernel(X, X), Y, X.shape[0], w=w.copy()).alpha[: X.shape[0]]
    return st.fit(X, Y, w=w.copy()).beta


def _check(run, tol=1e-9, gtol=1e-8):
    sol = run.solution()
    assert _rel(sol, _solve(run)) <= tol
    assert _rel(sol, _fresh(run)) <= tol
    assert run.state.gradient_norm() <= gtol


# ------------------------------------------------------------------------ update scripts
@pytest.mark.parametrize("outputs", [1, 3])
@pytest.mark.parametrize(
    "cls, keep_rows",
    [(PrimalSquaredState, True), (PrimalSquaredState, False), (DualSquaredState, True)],
)
def test_weighted_update_script_equals_solve_and_fresh_fit(cls, keep_rows, outputs, data):
    Phi, Y = data
    Y = Y[:, 0] if outputs == 1 else Y
    rng = np.random.default_rng(3)
    w = rng.uniform(0.2, 4.0, Phi.shape[0])
    w[[3, 7, 11]] = 0.0  # zero weights at the fit
    run = Run(cls, Phi, Y, w, 120, keep_rows=keep_rows)
    _check(run)
    run.change(add=[120], w_add=[2.5])
    _check(run)
    run.change(add=[121, 122, 123], w_add=[0.0, 0.3, 9.0])  # a zero-weight addition
    _check(run)
    run.change(reweight=[0], new_w=[10.0])  # up
    _check(run)
    run.change(reweight=[1, 2], new_w=[0.05, 0.0])  # down, and to zero
    _check(run)
    run.change(reweight=[3, 121], new_w=[1.5, 2.0])  # zero weights made positive
    _check(run)
    run.change(remove=[7, 4])  # a zero-weight sample and a weighted one
    _check(run)
    new_t = Y[5] + 1.0
    run.change(
        relabel=[5, 11], new_t=[new_t, new_t], reweight=[5, 11], new_w=[0.4, 3.0]
    )  # relabel and reweight the same samples in one change
    _check(run)
    run.change(
        add=[124, 125],
        w_add=[1.0, 0.7],
        remove=[6],
        reweight=[8, 9],
        new_w=[0.0, 6.0],
        relabel=[10],
        new_t=[new_t],
    )
    _check(run)
    big = list(range(126, 140))  # more than the pending rank: a block or a refactorisation
    run.change(
        add=big,
        w_add=rng.uniform(0.0, 3.0, len(big)),
        remove=[12, 13],
        reweight=list(range(20, 30)),
        new_w=rng.uniform(0.0, 2.0, 10),
    )
    _check(run)
    run.state.fold()
    _check(run)
    run.state._refactor()
    _check(run)
    if cls.kernel:
        run.compact()
        _check(run)
        run.change(reweight=[2, 1], new_w=[1.0, 1.0], add=[140], w_add=[0.0])
        _check(run)
    for i in range(30, 45):  # one at a time, past several folds
        run.change(reweight=[i], new_w=[float(i % 4)])
    _check(run)


@pytest.mark.parametrize("cls", [PrimalSquaredState, DualSquaredState])
def test_unit_weights_give_the_unweighted_state_bitwise(cls, data):
    Phi, Y = data
    X, t = Phi[:80], Y[:80, 0]
    data_ = _kernel(X, X) if cls.kernel else X
    a = cls(_opts()).fit(data_, t, 90)
    b = cls(_opts()).fit(data_, t, 90, w=np.ones(80))
    np.testing.assert_array_equal(a.solution, b.solution)


@pytest.mark.parametrize("cls", [PrimalSquaredState, DualSquaredState])
def test_weight_two_is_a_duplicate(cls, data):
    Phi, Y = data
    X, t = Phi[:60], Y[:60, 1]
    w = np.ones(60)
    w[:5] = 2.0
    Xd, td = np.vstack([X, X[:5]]), np.concatenate([t, t[:5]])
    if cls.kernel:
        a = cls(_opts()).fit(_kernel(X, X), t, 60, w=w)
        b = cls(_opts()).fit(_kernel(Xd, Xd), td, 65)
        # β = Σ α_i Φ(x_i): the duplicates' coefficients add up
        za, zb = _kernel(X, X) @ a.alpha[:60], _kernel(X, Xd) @ b.alpha[:65]
        assert _rel(za, zb) <= 1e-9
    else:
        a = cls(_opts()).fit(X, t, w=w)
        b = cls(_opts()).fit(Xd, td)
        assert _rel(a.beta, b.beta) <= 1e-9


def test_dual_weight_zero_is_inactive_and_its_slot_is_not_released(data):
    Phi, Y = data
    w = np.ones(200)
    run = Run(DualSquaredState, Phi, Y[:, 0], w, 50, max_rank=4)
    run.change(reweight=[10], new_w=[0.0])
    s = run.slot[10]
    assert not run.state.active[s] and run.state.alpha[s] == 0.0
    for i in range(50, 60):  # folds zero its row and column of H; the slot stays the sample's
        run.change(add=[i])
        assert s not in run.led.free
    assert not run.state.inv.H0[s].any()
    run.change(reweight=[10], new_w=[2.0])
    _check(run)
    run.change(reweight=[10], new_w=[0.0])
    run.change(remove=[10])  # removed while silent: then reusable
    run.state.fold()
    run.change(add=[60, 61, 62, 63])
    _check(run)


def test_weighted_dual_round_trip_through_arrays(data):
    Phi, Y = data
    w = np.random.default_rng(5).uniform(0.5, 2.0, 200)
    w[[2, 9]] = 0.0
    run = Run(DualSquaredState, Phi, Y, w, 70)
    run.change(add=[70, 71], w_add=[3.0, 0.0], reweight=[4], new_w=[0.0])
    keep = np.flatnonzero(run.led.active)
    arrays = run.state.to_arrays(keep)
    arrays["ledger_w"] = run.led.w[keep]
    back = DualSquaredState.from_arrays(
        arrays, _opts(), y=run.led.y[keep], capacity=run.led.capacity
    )
    np.testing.assert_array_equal(back.alpha[: keep.size], run.state.alpha[keep])
    assert back.gradient_norm() <= 1e-8
    run.compact()
    run.state = back
    run.change(reweight=[2, 71], new_w=[1.0, 0.5], remove=[3])
    _check(run)


# ------------------------------------------------------------------------ refusals
def _snapshot(st):
    if st.kernel:
        return [
            st.alpha.copy(),
            st.y.copy(),
            st.active.copy(),
            st.w.copy(),
            st.inv.H0.copy(),
            st.inv.rank,
        ]
    return [st.beta.copy(), st.b.copy(), st.exact_matrix()]


def _effective(st):
    """The tracked inverse of a dual state as a matrix (base plus pending corrections)."""
    return st.inv.matvec(np.eye(st.capacity))


def _same(a, b):
    return all(np.array_equal(x, y) for x, y in zip(a, b))


def test_primal_ill_conditioned_reweight_is_refused_and_changes_nothing(data):
    Phi, Y = data
    w = np.random.default_rng(1).uniform(0.5, 2.0, 200)
    run = Run(PrimalSquaredState, 1e5 * Phi, Y, w, 100)
    run.change(add=[100], w_add=[2.0], remove=[0])  # pending corrections to roll back to
    before = _snapshot(run.state)
    with pytest.raises(ValueError, match="ill-conditioned"):
        run.change(reweight=[5], new_w=[1e30])
    assert _same(before, _snapshot(run.state))
    run.change(reweight=[5], new_w=[3.0])
    _check(run, gtol=1e-7)  # ‖M‖ ≈ 1e12 here: rounding of Mβ − b


def test_primal_cancelling_weight_decrease_without_rows_is_refused(data):
    Phi, Y = data
    pool = np.vstack([Phi[:100], np.full((1, Phi.shape[1]), 1e8)])
    targets = np.vstack([Y[:100], [[1.0, 2.0, 3.0]]])
    run = Run(PrimalSquaredState, pool, targets, np.ones(101), 90, keep_rows=False)
    run.change(add=[100], w_add=[2.0])
    before = _snapshot(run.state)
    slot = np.array([run.slot[100]])
    # a ledger without rows: the change carries the row and target (rows_reweight, reweight_t).
    # Weight 0, or nearly: the large row's share of ΦᵀΦ cancels, as in its removal
    for w_new in (0.0, 1e-12):
        with pytest.raises(ValueError, match="keep_data=False"):
            run.change(
                reweight=[100],
                new_w=[w_new],
                rows_reweight=pool[100:101],
                reweight_t=run.led.y[slot],
            )
        assert _same(before, _snapshot(run.state))
    # halving its weight keeps the row: a fresh fit rounds at its scale too, no refusal
    run.change(reweight=[100], new_w=[1.0], rows_reweight=pool[100:101], reweight_t=run.led.y[slot])
    # (the row of norm² ≈ 1e17 makes cond(M) ≈ 1e17: compared with a fresh state, which keeps
    # the same exact statistics, not with a plain solve)
    assert _rel(run.solution(), _fresh(run)) <= 1e-9
    before = _snapshot(run.state)
    with pytest.raises(ValueError, match="needs their rows"):
        run.change(reweight=[3], new_w=[2.0], rows_reweight=None)  # without them: refused
    assert _same(before, _snapshot(run.state))
    run.change(
        reweight=[3], new_w=[2.0], rows_reweight=pool[3:4], reweight_t=run.led.y[[run.slot[3]]]
    )
    assert _rel(run.solution(), _fresh(run)) <= 1e-9


def test_dual_refused_update_changes_nothing(data):
    Phi, Y = data
    targets = Y[:60, 0].copy()
    run = Run(DualSquaredState, Phi, targets, np.full(200, 0.5), 50)
    run.change(add=[50], w_add=[2.0], reweight=[1], new_w=[0.0])  # pending corrections
    before = _snapshot(run.state)
    before_state = run.state.checkpoint()
    run.targets = targets.copy()
    run.targets[55] = np.inf
    with np.errstate(all="ignore"), pytest.raises(ValueError, match="overflow"):
        run.change(add=[55], w_add=[3.0], reweight=[1, 2], new_w=[4.0, 0.1])
    after = _snapshot(run.state)
    n = before[0].shape[0]
    assert _same(
        [a[:n] if isinstance(a, np.ndarray) and a.ndim == 1 else a for a in after[:4]], before[:4]
    )
    # the tracked inverse: the same matrix (a fold on the way may have changed how it is
    # held: base plus pending corrections)
    assert _rel(_effective(run.state)[:n, :n], _effective(before_state)) <= 1e-12


# ------------------------------------------------------------------------ certificate
@settings(
    max_examples=examples(40),
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
)
@given(
    seed=st.integers(0, 2**31 - 1),
    kernel=st.booleans(),
    outputs=st.sampled_from([1, 2]),
    scale=st.sampled_from([1e-3, 1e-1]),
    level=st.sampled_from([0.05, 1.0, 40.0]),
    flat=st.booleans(),
)
def test_gradient_norm_bounds_the_distance_to_the_solution(
    data, seed, kernel, outputs, scale, level, flat
):
    """‖β − β*‖ ≤ gradient_norm() for a perturbed solution, under random weights (zeros
    included) and a random update; the RKHS distance for the dual, (α−α*)ᵀK(α−α*).

    ``flat``: the perturbation lies along the kernel block's (or M's) flattest directions,
    where the bound is nearly tight (∇J ≈ β − β* when the data hardly weigh): there a
    certificate that ignored the weights (``rᵀKr`` for ``(w∘r)ᵀK(w∘r)``) would fall short
    of the distance by the factor of the weights."""
    Phi, Y = data
    rng = np.random.default_rng(seed)
    Yk = Y[:, 0] if outputs == 1 else Y[:, :outputs]
    w = (
        level
        * rng.choice([0.0, 1.0, 1.0, 1.0], size=Phi.shape[0])
        * rng.uniform(0.5, 1.5, Phi.shape[0])
    )
    cls = DualSquaredState if kernel else PrimalSquaredState
    run = Run(cls, Phi, Yk, w, 40)
    run.change(
        add=[40, 41], w_add=rng.uniform(0, 3, 2), reweight=[0, 1], new_w=rng.uniform(0, 3, 2)
    )
    star = _solve(run)
    slots = run.live()[0]
    if kernel:
        pert = np.zeros(run.state.alpha.shape)
        on = slots[run.state.active[slots]]
        z = rng.standard_normal((on.size,) + pert.shape[1:])
        if flat:  # along the eigenvectors of the 5 smallest eigenvalues of K over them
            lam, V = np.linalg.eigh(run.state.gram.sub(on))
            z = V[:, :5] @ rng.standard_normal((5,) + pert.shape[1:]) / np.sqrt(lam[0])
        pert[on] = scale * z
        run.state.alpha = run.state.alpha + pert
        d = run.state.alpha[slots] - star
        Kl = _kernel(run.live()[1], run.live()[1])
        dist = np.sqrt(np.maximum(np.einsum("i...,i...->...", d, Kl @ d), 0.0))
    else:
        z = rng.standard_normal(run.state.beta.shape)
        if flat:
            V = np.linalg.eigh(run.state.exact_matrix())[1]
            z = V[:, :2] @ rng.standard_normal((2,) + run.state.beta.shape[1:])
        run.state.beta = run.state.beta + scale * z
        dist = np.linalg.norm(run.state.beta - star, axis=0)
    bound = run.state.gradient_norms()
    assert np.all(dist <= bound * (1 + 1e-9) + 1e-10)
    assert np.max(dist) <= run.state.gradient_norm() * (1 + 1e-9) + 1e-10


def test_dual_reweight_by_many_orders_refactorises_exactly(data):
    """``w → w'`` with ``w'/w = 1e16``: the core ``I + ΔH_SS`` (determinant ``w/w'``) is at
    its rounding noise, so the update is redone from the kernel matrix, and stays exact."""
    Phi, Y = data
    w = np.ones(200)
    w[4] = 1e-8
    run = Run(DualSquaredState, Phi, Y[:, 0], w, 60)
    run.change(add=[60], w_add=[0.5])  # pending corrections
    n_refactor = run.state.n_refactor
    run.change(reweight=[4], new_w=[1e8])
    assert run.state.n_refactor == n_refactor + 1
    # weight 1e8 scales the certificate's w∘r: compare it with a fresh state's rounding
    _, X, t, wl = run.live()
    fresh = DualSquaredState(_opts()).fit(_kernel(X, X), t, X.shape[0], w=wl.copy())
    _check(run, gtol=10 * fresh.gradient_norm() + 1e-10)
    run.change(reweight=[4, 5], new_w=[2.0, 3.0])  # back to ordinary weights, by Woodbury
    assert run.state.n_refactor == n_refactor + 1
    _check(run)


@pytest.mark.parametrize("kernel", [False, True])
def test_saved_weights_are_checked_against_the_squared_state(tmp_path, data, kernel):
    """A file whose weights are not those the statistics (primal: ``s²·Σw + ρ`` on the
    constant feature) or the solution (dual: ``W(Kα − y) + ρα = 0``) were computed with is
    refused; the true weights, zeros included, load and keep updating exactly."""
    import deltafit
    from deltafit import KernelRegressor, LinearRegressor

    Phi, Y = data
    X, t = Phi[:120, :-1], Y[:120, 0]
    w = np.random.default_rng(2).uniform(0.5, 2.0, 120)
    w[7] = 0.0
    make = (lambda: KernelRegressor(C=C, gamma=GAMMA)) if kernel else (lambda: LinearRegressor(C=C))
    m = make().fit(X, t, sample_weight=w)
    deltafit.save(m, tmp_path / "m.npz")
    back = deltafit.load(tmp_path / "m.npz")
    back.reweight([7, 8], [1.5, 0.0])
    w2 = w.copy()
    w2[[7, 8]] = [1.5, 0.0]
    assert _rel(back.predict(X), make().fit(X, t, sample_weight=w2).predict(X)) <= 1e-9
    with np.load(tmp_path / "m.npz") as z:
        arrays = dict(z)
    for bad in (9.0, 0.0):  # a heavier sample; a sample silenced that the solution counts
        arrays["ledger_w"] = w.copy()
        arrays["ledger_w"][3] = bad
        np.savez(tmp_path / "bad.npz", **arrays)
        with pytest.raises(ValueError, match="does not count|does not solve"):
            deltafit.load(tmp_path / "bad.npz")
