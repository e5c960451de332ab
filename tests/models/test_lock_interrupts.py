"""The update lock survives any interrupt.

A ``KeyboardInterrupt`` is injected (through ``sys.settrace``, as in
``tests/test_reliability_transactions.py``) at an executed line of deltafit's code during an
update, a refit or a read; afterwards the interrupted thread must not hold the model's lock,
and an update from *another* thread must complete (it is joined with a generous timeout: a
lock left held makes it wait forever).  Every line executed in the lock handling
(``GuardedMixin._locked`` and ``_Guard`` of ``models/_guard.py``; ``_fit``, ``_update``,
``_transaction`` of ``models/_base.py``; the guarded reads of ``models/_predict.py``) is
interrupted, and a sample of the other lines (all of them with ``DELTAFIT_INTERRUPT_ALL=1``).
"""

from __future__ import annotations

import copy
import os
import threading
from pathlib import Path

import numpy as np
import pytest

import deltafit
from deltafit import KernelClassifier, LinearClassifier, LinearRegressor
from deltafit.datasets import load_breast_cancer
from interrupts import Interrupt

# the modules that take, hold or release the lock: the guard, the protocol, the reads
LOCK_FILES = {
    str(Path(deltafit.__file__).parent / "models" / name)
    for name in ("_guard.py", "_base.py", "_predict.py")
}
ALL_POSITIONS = os.environ.get("DELTAFIT_INTERRUPT_ALL") == "1"
SAMPLED = 16  # positions outside the lock handling per scenario in the sampled run
JOIN_S = 60.0  # a bound on a wait that is instantaneous unless the lock was left held
# the functions of LOCK_FILES that take, hold or release the lock: every line of theirs is hit
LOCK_CODE = {
    "_guard",
    "_lock",
    "_locked",
    "_read",
    "write",
    "read",
    "<lambda>",
    "_fit",
    "_update",
    "_transaction",
    "sample_ids_",
    "sample_weight_",
    "n_samples_",
    "_decision",
}


@pytest.fixture(scope="module")
def data():
    X, y = load_breast_cancer()
    return X[:160], y[:160]


def _positions(where):
    """Every position in the lock handling (``LOCK_FILES``), and a sample of the others."""
    lock = [i + 1 for i, (f, name, _) in enumerate(where) if f in LOCK_FILES and name in LOCK_CODE]
    rest = [i + 1 for i in range(len(where)) if i + 1 not in set(lock)]
    if not ALL_POSITIONS and len(rest) > SAMPLED:
        rng = np.random.default_rng(len(where))
        rest = rng.choice(rest, SAMPLED, replace=False).tolist()
    return sorted(set(lock) | set(rest)), lock


def _update_elsewhere(m, X, t):
    """Add two samples from another thread; True when it finished (the lock was free)."""
    out = []
    th = threading.Thread(
        target=lambda: out.append(m.add(X[150:152], t[150:152])), daemon=True
    )  # a thread left blocked must not hold pytest up
    th.start()
    th.join(JOIN_S)
    return not th.is_alive() and len(out) == 1


def _add(m, X, t):
    m.add(X[100:104], t[100:104])


def _remove(m, X, t):
    m.remove([3, 5])


def _refit(m, X, t):
    m.fit(X[:90], t[:90])


def _read(m, X, t):
    _ = m.sample_ids_, m.sample_weight_, m.n_samples_
    m.predict(X[:3])


CONFIGS = {
    "linear-squared": (LinearClassifier, {}),
    "linear-logistic": (LinearClassifier, {"loss": "logistic", "tol": 1e-10}),
    "linreg": (LinearRegressor, {}),
    "kernel-hinge": (KernelClassifier, {"loss": "hinge", "gamma": 0.05, "tol": 1e-10}),
}
CALLS = {"add": _add, "remove": _remove, "refit": _refit, "read": _read}


@pytest.mark.parametrize("call", list(CALLS))
@pytest.mark.parametrize("config", list(CONFIGS))
def test_an_interrupt_at_any_line_leaves_the_lock_free(config, call, data):
    cls, kw = CONFIGS[config]
    X, y = data
    t = y if cls._classifier else X[:, 0] + 0.5 * X[:, 1]
    fn = CALLS[call]
    m = cls(**kw).fit(X[:80], t[:80])
    counter = Interrupt()
    counter.run(fn, copy.deepcopy(m), X, t)
    positions, lock = _positions(counter.where)
    assert lock, "the call never reached the lock handling"  # the test covers it
    for at in positions:
        mm = copy.deepcopy(m)
        interrupted = Interrupt(at).run(fn, mm, X, t)
        assert interrupted, (config, call, at, counter.where[at - 1])
        assert not mm._lock()._is_owned(), (config, call, counter.where[at - 1])
        assert _update_elsewhere(mm, X, t), (config, call, counter.where[at - 1])
        # the model still updates in this thread, and reads agree with the ids it holds
        ids = mm.sample_ids_
        assert ids.size == mm.n_samples_ == mm.sample_weight_.size
        mm.remove(ids[-1:])
        assert mm.n_samples_ == ids.size - 1


def test_the_lock_is_not_taken_twice_by_nested_reads(data):
    """A read inside an update (a callback, in the updating thread) does not wait on the lock
    that update holds, and leaves it held exactly once."""
    X, y = data
    seen, model = [], []

    def callback(it, coef, grad_norm, objective, grad):
        if model:  # during the update (not the fit)
            m = model[0]
            seen.append((m.n_samples_, m.sample_ids_.size, m.coef_.shape))
        return False

    m = LinearClassifier(loss="logistic", callback=callback).fit(X[:80], y[:80])
    model.append(m)
    m.add(X[100:104], y[100:104])
    assert seen and all(a == b == 80 for a, b, _ in seen)
    assert not m._lock()._is_owned()
    assert _update_elsewhere(m, X, y)
