"""Updates are transactions under any exception, serialised across threads, and use the
parameters the model was fitted with.

* **Interruptions.**  A ``KeyboardInterrupt`` is injected at executed lines of deltafit's own
  code during an update (through ``sys.settrace``).  Afterwards the model must be either the
  model of before (same ids, same decisions) or, when the interrupt came after the commit, the
  updated one, and every later update must still equal a fresh fit.  CI runs a sample of the
  positions in each scenario; ``DELTAFIT_INTERRUPT_ALL=1`` runs every one of them.
* **Threads.**  Several threads add and remove samples of one model at once; the ids issued
  are distinct, no sample is lost and the model equals a fresh fit on what it holds.
* **set_params after fit** changes nothing about the fitted model until the next ``fit``.
* **Memory**: the id index holds the live samples only, however many ids were issued.
"""

from __future__ import annotations

import copy
import os
import sys
import threading

import numpy as np
import pytest

import deltafit
from deltafit import KernelClassifier, KernelRegressor, LinearClassifier, LinearRegressor
from deltafit.datasets import load_breast_cancer
from interrupts import Interrupt

ALL_POSITIONS = os.environ.get("DELTAFIT_INTERRUPT_ALL") == "1"
SAMPLED = 14  # positions per scenario in the sampled run
TOL = 1e-8


@pytest.fixture(scope="module")
def data():
    X, y = load_breast_cancer()
    return X[:200], y[:200]


def _target(cls, X, y, config=""):
    if config.endswith("-3class"):  # three classes: one-vs-rest over one ledger
        return np.digitize(X[:, 0], np.quantile(X[:, 0], [1 / 3, 2 / 3]))
    return y if cls._classifier else X[:, 0] + 0.5 * X[:, 1]


def _score(m, X):
    return m.decision_function(X) if hasattr(m, "decision_function") else m.predict(X)


def _err(a, b):
    return float(np.abs(a - b).max() / max(1.0, np.abs(b).max()))


CONFIGS = {
    "linear-squared": (LinearClassifier, {}),
    "linear-squared-nodata": (LinearClassifier, {"keep_data": False}),
    "linreg-squared": (LinearRegressor, {}),
    "linear-logistic": (LinearClassifier, {"loss": "logistic", "tol": 1e-12}),
    "linear-hinge": (LinearClassifier, {"loss": "hinge", "tol": 1e-12}),
    "kernel-squared": (KernelRegressor, {"gamma": 0.05}),
    "kernel-logistic": (KernelClassifier, {"loss": "logistic", "gamma": 0.05, "tol": 1e-12}),
    "kernel-hinge": (KernelClassifier, {"loss": "hinge", "gamma": 0.05, "tol": 1e-12}),
    "linear-squared-3class": (LinearClassifier, {}),
    "linear-logistic-3class": (LinearClassifier, {"loss": "logistic", "tol": 1e-12}),
    "kernel-hinge-3class": (KernelClassifier, {"loss": "hinge", "gamma": 0.05, "tol": 1e-12}),
}


def _mixed(m, X, t):  # add 5, remove 2
    kw = {} if m.problem_.keeps_rows else {"X_remove": X[[3, 4]]}
    m.update(X_add=X[80:85], y_add=t[80:85], remove_ids=[3, 4], **kw)


def _grow(m, X, t):  # more rows than the headroom: the ledger and state grow
    m.add(X[85:120], t[85:120])


def _relabel(m, X, t):
    cls = type(m)
    new = (
        m.classes_[(t[[7, 9]] == m.classes_[0]).astype(int)] if cls._classifier else t[[7, 9]] + 1.0
    )
    kw = {} if m.problem_.keeps_rows else {"X_relabel": X[[7, 9]]}
    m.update(relabel_ids=[7, 9], y_relabel=new, **kw)


def _reweight(m, X, t):  # weights of two samples change, one is silenced; and one added
    kw = {} if m.problem_.keeps_rows else {"X_reweight": X[[11, 12]]}
    if not m.problem_.keeps_rows and not type(m)._classifier:
        kw["y_reweight"] = t[[11, 12]]
    m.update(
        reweight_ids=[11, 12],
        reweight_weight=[3.0, 0.0],
        X_add=X[80:81],
        y_add=t[80:81],
        sample_weight_add=[2.0],
        **kw,
    )


UPDATES = {"mixed": _mixed, "grow": _grow, "relabel": _relabel, "reweight": _reweight}


def _positions(n):
    if ALL_POSITIONS:
        return list(range(1, n + 1))
    rng = np.random.default_rng(n)
    return sorted(
        set(np.linspace(1, n, SAMPLED // 2, dtype=int).tolist())
        | set(rng.integers(1, n + 1, SAMPLED - SAMPLED // 2).tolist())
    )


@pytest.mark.parametrize("update", list(UPDATES))
@pytest.mark.parametrize("config", list(CONFIGS))
def test_interrupted_update_leaves_a_consistent_exact_model(config, update, data):
    cls, kw = CONFIGS[config]
    X, y = data
    t = _target(cls, X, y, config)
    upd = UPDATES[update]
    m = cls(**kw).fit(X[:80], t[:80])
    ids0, score0 = m.sample_ids_.copy(), _score(m, X)
    done = copy.deepcopy(m)
    upd(done, X, t)
    ids1, score1 = done.sample_ids_.copy(), _score(done, X)
    counter = Interrupt()
    counter.run(upd, copy.deepcopy(m), X, t)
    assert counter.n > 50  # the update runs through deltafit's code
    for at in _positions(counter.n):
        mm = copy.deepcopy(m)
        assert Interrupt(at).run(upd, mm, X, t)
        score = _score(mm, X)
        if np.array_equal(mm.sample_ids_, ids0) and _err(score, score0) <= TOL:
            upd(mm, X, t)  # rolled back: the model of before, which updates as usual
        else:  # interrupted after the commit: the updated model
            assert np.array_equal(mm.sample_ids_, ids1), (config, update, at)
        assert _err(_score(mm, X), score1) <= TOL, (config, update, at)
        # and it keeps updating exactly
        mm.add(X[150:170], t[150:170])
        keep = np.isin(np.arange(200), mm.sample_ids_[mm.sample_ids_ < 80])
        ref_rows = np.vstack([X[:80][keep[:80]], _new_rows(update, X), X[150:170]])
        ref_t = np.concatenate(
            [_relabelled(mm, update, t)[:80][keep[:80]], _new_targets(update, t), t[150:170]]
        )
        ref = cls(**kw).fit(ref_rows, ref_t, sample_weight=_weights(update, ref_t.shape[0]))
        assert _err(_score(mm, X), _score(ref, X)) <= TOL, (config, update, at)


def _new_rows(update, X):
    return {"mixed": X[80:85], "grow": X[85:120], "relabel": X[:0], "reweight": X[80:81]}[update]


def _new_targets(update, t):
    return {"mixed": t[80:85], "grow": t[85:120], "relabel": t[:0], "reweight": t[80:81]}[update]


def _weights(update, n):
    """The weights of the reference fit's rows (the first 80, the update's, 20 more)."""
    if update != "reweight":
        return None
    w = np.ones(n)
    w[[11, 12]] = [3.0, 0.0]
    w[80] = 2.0  # the one added row follows the 80 kept ones
    return w


def _relabelled(m, update, t):
    if update != "relabel":
        return t
    t = t.copy()
    if type(m)._classifier:
        t[[7, 9]] = m.classes_[(t[[7, 9]] == m.classes_[0]).astype(int)]
    else:
        t[[7, 9]] = t[[7, 9]] + 1.0
    return t


def test_interrupted_fit_keeps_the_fitted_model(data):
    X, y = data
    m = LinearClassifier(loss="logistic").fit(X[:80], y[:80])
    before = _score(m, X)
    counter = Interrupt()
    counter.run(copy.deepcopy(m).fit, X[:120], y[:120])
    for at in _positions(counter.n):
        mm = copy.deepcopy(m)
        if Interrupt(at).run(mm.fit, X[:120], y[:120]):
            assert mm.problem_.n_samples in (80, 120)
            if mm.problem_.n_samples == 80:
                assert _err(_score(mm, X), before) == 0.0


# --------------------------------------------------------------------------- threads
@pytest.mark.parametrize(
    "config", ["linear-squared", "linear-logistic", "kernel-squared", "kernel-hinge"]
)
def test_concurrent_updates_are_serialised_and_exact(config, data):
    cls, kw = CONFIGS[config]
    X, y = data
    t = _target(cls, X, y)
    m = cls(**kw).fit(X[:60], t[:60])
    held = {i: i for i in range(60)}  # id -> row of X
    issued, guard, errors = [], threading.Lock(), []

    def worker(k):
        try:
            rng = np.random.default_rng(k)
            mine = []
            for _ in range(12):
                rows = rng.choice(np.arange(60, 200), size=3, replace=False)
                ids = m.add(X[rows], t[rows])
                with guard:
                    issued.extend(ids.tolist())
                    held.update(zip(ids.tolist(), rows.tolist()))
                mine.extend(ids.tolist())
                if len(mine) > 4:
                    gone = [mine.pop(0), mine.pop(0)]
                    m.remove(gone)
                    with guard:
                        for i in gone:
                            del held[i]
        except BaseException as exc:  # noqa: BLE001 - reported below
            errors.append(exc)

    interval = sys.getswitchinterval()
    sys.setswitchinterval(1e-6)  # switch threads as often as possible
    try:
        threads = [threading.Thread(target=worker, args=(k,)) for k in range(6)]
        for th in threads:
            th.start()
        for th in threads:
            th.join()
    finally:
        sys.setswitchinterval(interval)
    assert not errors, errors
    assert len(issued) == len(set(issued)) == 6 * 12 * 3
    ids = m.sample_ids_
    assert ids.tolist() == sorted(held)
    rows = np.array([held[i] for i in ids])
    ref = cls(**kw).fit(X[rows], t[rows])
    assert _err(_score(m, X), _score(ref, X)) <= TOL


def test_models_with_locks_copy_and_pickle(data):
    import pickle

    X, y = data
    m = LinearClassifier().fit(X[:50], y[:50])
    m.add(X[50:52], y[50:52])  # the lock exists now
    for other in (copy.deepcopy(m), pickle.loads(pickle.dumps(m))):
        other.add(X[52:54], y[52:54])
        assert other._lock() is not m._lock()
    assert np.array_equal(m.sample_ids_, np.arange(52))


# ---------------------------------------------------------------------- set_params
@pytest.mark.parametrize(
    "change",
    [
        {"gamma": 5.0},
        {"intercept_scaling": 7.0},
        {"fit_intercept": False},
        {"kernel": "linear"},
        {"degree": 5, "kernel": "poly"},
    ],
)
def test_set_params_after_fit_changes_nothing_until_the_next_fit(change, data):
    X, y = data
    m = KernelClassifier(gamma=0.05).fit(X[:80], y[:80])
    before = m.decision_function(X)
    m.set_params(**change)
    assert np.array_equal(m.decision_function(X), before)
    m.add(X[80:100], y[80:100])
    ref = KernelClassifier(gamma=0.05).fit(X[:100], y[:100])
    assert _err(m.decision_function(X), ref.decision_function(X)) <= TOL
    assert m.problem_.kernel_params["gamma"] == 0.05
    refit = m.fit(X[:100], y[:100])  # the next fit takes the new parameters
    assert (
        _err(
            refit.decision_function(X),
            KernelClassifier(**{"gamma": 0.05, **change})
            .fit(X[:100], y[:100])
            .decision_function(X),
        )
        == 0.0
    )


@pytest.mark.parametrize("change", [{"intercept_scaling": 7.0}, {"fit_intercept": False}])
def test_set_params_after_fit_linear(change, data):
    X, y = data
    m = LinearClassifier().fit(X[:80], y[:80])
    before = m.decision_function(X)
    coef, intercept = m.coef_.copy(), m.intercept_
    m.set_params(**change)
    assert np.array_equal(m.decision_function(X), before)
    assert np.array_equal(m.coef_, coef) and m.intercept_ == intercept
    m.add(X[80:100], y[80:100])
    ref = LinearClassifier().fit(X[:100], y[:100])
    assert _err(m.decision_function(X), ref.decision_function(X)) <= TOL


def test_set_params_survives_save_and_load(data, tmp_path):
    X, y = data
    m = KernelRegressor(gamma=0.05).fit(X[:80], X[:80, 0])
    m.set_params(gamma=3.0, intercept_scaling=4.0)
    deltafit.save(m, tmp_path / "m.npz")
    back = deltafit.load(tmp_path / "m.npz")
    assert back.gamma == 3.0
    assert np.array_equal(back.predict(X), m.predict(X))
    for z in (m, back):
        z.add(X[80:90], X[80:90, 0])
    assert (
        _err(back.predict(X), KernelRegressor(gamma=0.05).fit(X[:90], X[:90, 0]).predict(X)) <= TOL
    )


# -------------------------------------------------------------------------- memory
def test_id_index_memory_is_bounded_by_the_live_samples(data):
    X, y = data
    m = LinearClassifier().fit(X[:20], y[:20])
    oldest = m.sample_ids_.min()
    for i in range(3000):  # a window of ~20 live samples over 3000 issued ids
        ids = m.add(X[[20 + i % 150]], y[[20 + i % 150]])
        m.remove([oldest] if i % 2 else [int(m.sample_ids_[1])])
        oldest = int(m.sample_ids_.min())
        assert ids[0] == 20 + i
    index = m._ledger._index
    assert m.problem_.next_id == 3020
    assert index.nbytes <= 16 * 4 * max(16, m.problem_.n_samples) + 1024


def test_views_taken_before_a_rebuilt_state_know_they_are_stale(data):
    """An interrupt that makes the model rebuild its state leaves the same model, but a view
    taken before it held the old state object: it must report itself stale."""
    X, y = data
    m = KernelClassifier(loss="logistic", gamma=0.05, tol=1e-12).fit(X[:80], y[:80])
    counter = Interrupt()
    counter.run(_mixed, copy.deepcopy(m), X, y)
    seen_stale = False
    for at in _positions(counter.n):
        mm = copy.deepcopy(m)
        view = mm.problem_
        Interrupt(at).run(_mixed, mm, X, y)
        if mm.problem_._st is not view._st:  # the state was replaced (rebuilt or updated)
            assert not view.is_current()
            seen_stale = True
    assert seen_stale
