"""Dask-backed LinearClassifier with K ≥ 3 classes (one-vs-rest) against the NumPy path, on
digits (10 classes) and a 3-class subset of it (digits 3, 5 and 8).

* Squared loss (``keep_data=False`` and ``True``): the K one-vs-rest problems are one state
  with K right-hand sides; fit and every update equal the NumPy model to 1e-10 (relative: the
  blocks' statistics are summed in another order) and the multi-output
  ``Ridge(alpha=1/(2C), fit_intercept=False)`` on ``[X, 1]`` with the ±1 code columns (1e-8),
  the independent twin.
* Logistic / squared hinge: K binary solves made jointly over one row store.  Two solves that
  each stop at a certified gradient norm g (``‖β_k − β_k*‖ ≤ g``, Okumura et al., Thm 6)
  differ by at most the sum of their certificates: each class's coefficients are compared with
  the NumPy ones to ``g_dask + g_numpy + 1e-10`` (and to 1e-8), and each class's certificate
  with the gradient computed here from the rows.  The joint solve makes as many passes as the
  slowest class's binary Dask solve, checked against the K binary models.

Most tests run on dask's threaded scheduler; one runs on a LocalCluster of two processes.
"""

import threading
from functools import partial

import numpy as np
import pytest
from sklearn.linear_model import Ridge

import deltafit as df
from dask_helpers import (
    _threads,  # noqa: F401  (autouse: the threaded scheduler)
    live,
)
from dask_helpers import (  # noqa: F401
    assert_classes_same as assert_smooth_same,
)
from dask_helpers import (
    chunked as _chunked,
)
from dask_helpers import (
    class_coefs as full_coef,
)

dask = pytest.importorskip("dask")
da = pytest.importorskip("dask.array")

RTOL = 1e-10
SMOOTH = ["logistic", "squared_hinge"]
chunked = partial(_chunked, rows=300)


@pytest.fixture(scope="module")
def digits10():
    """scikit-learn's digits, scaled to [0, 1]: 1797 rows, 64 features, 10 classes."""
    from sklearn.datasets import load_digits

    X, y = load_digits(return_X_y=True)
    return X / 16.0, y


@pytest.fixture(scope="module")
def digits3(digits10):
    """The digits 3, 5 and 8 (546 rows)."""
    X, y = digits10
    keep = np.isin(y, (3, 5, 8))
    return X[keep], y[keep]


def rel(a, b):
    a, b = np.asarray(a, dtype=float), np.asarray(b, dtype=float)
    return float(np.max(np.abs(a - b)) / max(np.max(np.abs(b)), 1e-300))


def codes(y, classes):
    return np.where(y[:, None] == classes[None, :], 1.0, -1.0)


def ridge_coef(X, y, classes, C):
    """The one-vs-rest squared loss by scikit-learn: multi-output Ridge on [X, 1], ±1 codes."""
    Z = np.column_stack([X, np.ones(X.shape[0])])
    return (
        Ridge(alpha=1.0 / (2.0 * C), fit_intercept=False, solver="cholesky", tol=1e-14)
        .fit(Z, codes(y, classes))
        .coef_
    )


# ----------------------------------------------------------------------------- squared
@pytest.mark.parametrize("keep_data", [False, True])
def test_squared_fit_and_updates_equal_numpy_and_ridge(digits10, keep_data):
    X, y = digits10
    Xd, yd = chunked(X, y)
    a = df.LinearClassifier(C=0.5).fit(X, y)  # NumPy multiclass keeps its rows
    b = df.LinearClassifier(C=0.5, keep_data=keep_data).fit(Xd, yd)
    assert b._dask_passes == 1
    np.testing.assert_array_equal(b.classes_, np.arange(10))
    assert rel(full_coef(b), full_coef(a)) < RTOL
    assert rel(full_coef(b), ridge_coef(X, y, b.classes_, 0.5)) < 1e-8
    XX, yy = X.copy(), y.copy()  # the rows by id (additions appended)

    def check():
        assert rel(full_coef(b), full_coef(a)) < RTOL
        np.testing.assert_array_equal(b.sample_ids_, a.sample_ids_)
        ids = a.sample_ids_
        assert rel(full_coef(b), ridge_coef(XX[ids], yy[ids], b.classes_, 0.5)) < 1e-8

    # remove by id (keep_data=False: the rows given as X, recognised by their digests)
    rm = [3, 50, 700]
    a.remove(rm)
    b.remove(rm) if keep_data else b.remove(rm, X=X[rm])
    check()
    if not keep_data:  # remove by value
        a.remove([9, 10])
        b.remove(X=X[[9, 10]], y=y[[9, 10]])
        check()
    ids_a = a.add(X[:5] * 0.9, y[:5])
    ids_b = b.add(da.from_array(X[:5] * 0.9), da.from_array(y[:5]))
    np.testing.assert_array_equal(ids_a, ids_b)
    XX, yy = np.vstack([XX, X[:5] * 0.9]), np.r_[yy, y[:5]]
    check()
    a.relabel([11, 12], [4, 7])
    b.relabel([11, 12], [4, 7]) if keep_data else b.relabel([11, 12], [4, 7], X=X[[11, 12]])
    yy[[11, 12]] = [4, 7]
    check()
    kw = {} if keep_data else {"X_remove": X[[20]], "X_relabel": X[[21]]}
    up = dict(X_add=X[30:33], y_add=y[30:33], remove_ids=[20], relabel_ids=[21], y_relabel=[0])
    a.update(**up)
    b.update(**up, **kw)
    XX, yy = np.vstack([XX, X[30:33]]), np.r_[yy, y[30:33]]
    yy[21] = 0
    check()
    z = b.decision_function(Xd)
    assert isinstance(z, da.Array) and z.shape == (X.shape[0], 10)
    assert rel(z.compute(), a.decision_function(X)) < RTOL
    labels = b.predict(Xd)
    assert isinstance(labels, da.Array)
    np.testing.assert_array_equal(labels.compute(), a.predict(X))


def test_weighted_and_dataframe_input_with_string_labels(digits3):
    X, y = digits3
    names = np.array(["three", "five", "eight"])[np.searchsorted([3, 5, 8], y)]
    w = np.random.default_rng(0).uniform(0.5, 2.0, y.size)
    dd = pytest.importorskip("dask.dataframe")
    import pandas as pd

    Xf = dd.from_pandas(pd.DataFrame(X), npartitions=3)
    yf = dd.from_pandas(pd.Series(names), npartitions=3)
    wf = dd.from_pandas(pd.Series(w), npartitions=3)
    a = df.LinearClassifier(C=0.5).fit(X, names, sample_weight=w)
    b = df.LinearClassifier(C=0.5, keep_data=False).fit(Xf, yf, sample_weight=wf)
    np.testing.assert_array_equal(b.classes_, a.classes_)
    assert rel(full_coef(b), full_coef(a)) < RTOL
    np.testing.assert_array_equal(b.sample_weight_, w)
    a.remove([4, 5])
    b.remove([4, 5], X=X[[4, 5]])
    assert rel(full_coef(b), full_coef(a)) < RTOL
    np.testing.assert_array_equal(b.predict(Xf).compute(), a.predict(X))


# ----------------------------------------------------------------------------- smooth losses
def test_logistic_on_ten_classes_equals_numpy(digits10):
    X, y = digits10
    Xd, yd = chunked(X, y)
    a = df.LinearClassifier(loss="logistic", C=0.5).fit(X, y)
    b = df.LinearClassifier(loss="logistic", C=0.5).fit(Xd, yd)
    assert_smooth_same(a, b, X, y)
    # a 0.1% removal (2 of 1797 samples): the joint re-solve makes 4 passes here (the
    # slowest class's binary re-solve needs 4, most classes 2 or 3)
    a.remove([3, 50])
    b.remove([3, 50])
    assert b._state.passes <= 4
    assert_smooth_same(a, b, *live(a, X, y))
    up = dict(X_add=X[:4] * 0.95, y_add=y[:4], relabel_ids=[10], y_relabel=[5], remove_ids=[60])
    a.update(**up)
    b.update(**up)
    XX, yy = np.vstack([X, X[:4] * 0.95]), np.r_[y, y[:4]]
    yy[10] = 5
    assert_smooth_same(a, b, *live(a, XX, yy))
    np.testing.assert_array_equal(b.predict(Xd).compute(), a.predict(X))
    p = b.predict_proba(Xd)
    assert isinstance(p, da.Array)
    assert np.max(np.abs(p.compute() - a.predict_proba(X))) <= 1e-8


@pytest.mark.parametrize("loss", SMOOTH)
def test_joint_passes_are_those_of_the_slowest_class(digits3, loss):
    """The joint fit and removal make the passes of the slowest of the K binary Dask solves
    (the pass that persists the rows evaluates every class's start), and each class is its
    binary model."""
    X, y = digits3
    Xd, yd = chunked(X, y, rows=150)
    a = df.LinearClassifier(loss=loss, C=0.5).fit(X, y)
    b = df.LinearClassifier(loss=loss, C=0.5).fit(Xd, yd)
    assert_smooth_same(a, b, X, y)
    rm = [3, 40, 41]
    binary = []
    for k, c in enumerate(b.classes_):
        m = df.LinearClassifier(loss=loss, C=0.5).fit(Xd, da.where(yd == c, 1, -1))
        fit_passes = m._dask_passes
        assert (
            np.max(np.abs(full_coef(m)[0] - full_coef(b)[k]))
            <= m.grad_norm_ + b._state.result.results[k].grad_norm + 1e-10
        )
        m.remove(rm)
        binary.append((fit_passes, m._state.passes))
    assert b._dask_passes == max(f for f, _ in binary)
    a.remove(rm)
    b.remove(rm)
    assert b._state.passes == max(r for _, r in binary)
    assert_smooth_same(a, b, *live(a, X, y))


def test_failed_class_solve_leaves_the_model_and_stops_every_thread(digits3, monkeypatch):
    from deltafit._dask import _ovr as _dask_ovr

    X, y = digits3
    Xd, yd = chunked(X, y, rows=150)
    b = df.LinearClassifier(loss="logistic", C=0.5).fit(Xd, yd)
    before, ids, state = full_coef(b).copy(), b.sample_ids_.copy(), b._state
    real = _dask_ovr.dask_chord
    calls = []

    def failing(passes, *args, **kw):
        calls.append(passes._k)
        if passes._k == 1:
            passes.run(args[0], g0=True)  # one joint pass first, then the failure
            raise ValueError("class 1 failed")
        return real(passes, *args, **kw)

    monkeypatch.setattr(_dask_ovr, "dask_chord", failing)
    n_threads = threading.active_count()
    with pytest.raises(ValueError, match="class 1 failed"):
        b.remove([5, 6])
    assert sorted(calls) == [0, 1, 2]
    assert threading.active_count() == n_threads
    np.testing.assert_array_equal(full_coef(b), before)
    np.testing.assert_array_equal(b.sample_ids_, ids)
    assert b._state is state
    monkeypatch.setattr(_dask_ovr, "dask_chord", real)
    a = df.LinearClassifier(loss="logistic", C=0.5).fit(X, y)
    a.remove([5, 6])
    b.remove([5, 6])  # the store was left as it was: the same removal now succeeds
    assert_smooth_same(a, b, *live(a, X, y))


# ----------------------------------------------------------------------------- sensitivity
@pytest.mark.parametrize(
    "loss,keep_data", [("squared", False), ("squared", True), ("logistic", True)]
)
def test_sensitivity_per_class_equals_numpy_and_holds(digits3, loss, keep_data):
    X, y = digits3
    Xd, yd = chunked(X, y, rows=150)
    a = df.LinearClassifier(loss=loss, C=0.5).fit(X, y)
    b = df.LinearClassifier(loss=loss, C=0.5, keep_data=keep_data).fit(Xd, yd)
    method = "sphere" if loss == "logistic" else "auto"  # the same region on both paths
    sa, sb = df.sensitivity(a, method=method), df.sensitivity(b, method=method)
    sc = df.sensitivity(b)  # the Dask model's own choice (logistic: curvature intervals)
    rm = [1, 2, 30]
    sa.remove(rm)
    sb.remove(rm) if keep_data else sb.remove(rm, X=X[rm])
    sc.remove(rm) if keep_data else sc.remove(rm, X=X[rm])
    lo_a, hi_a = sa.decision_bounds(X)
    lo, hi = sb.decision_bounds(X)
    assert lo.shape == (X.shape[0], 3)
    scale = 1.0 + np.max(np.abs(lo_a))
    tol = 1e-10 * scale if loss == "squared" else 1e-7 * scale  # two certified solves
    assert np.max(np.abs(lo - lo_a)) <= tol and np.max(np.abs(hi - hi_a)) <= tol
    labels, certain = sb.predict_certain(X)
    labels_a, certain_a = sa.predict_certain(X)
    np.testing.assert_array_equal(labels, labels_a)
    assert np.count_nonzero(certain != certain_a) <= (0 if loss == "squared" else 2)
    lo_c, hi_c = sc.decision_bounds(X)
    b.remove(rm) if keep_data else b.remove(rm, X=X[rm])
    z = b.decision_function(X)  # the retrained model lies inside, class by class
    assert np.all(lo - 1e-8 <= z) and np.all(z <= hi + 1e-8)
    np.testing.assert_array_equal(b.predict(X)[certain], labels[certain])
    assert np.all(lo_c - 1e-8 <= z) and np.all(z <= hi_c + 1e-8)


# ----------------------------------------------------------------------------- refusals
@pytest.mark.parametrize(
    "loss,keep_data", [("squared", False), ("squared", True), ("logistic", True)]
)
def test_bad_input_leaves_the_model(digits3, loss, keep_data, tmp_path):
    X, y = digits3
    Xd, yd = chunked(X, y, rows=150)
    b = df.LinearClassifier(loss=loss, C=0.5, keep_data=keep_data).fit(Xd, yd)
    before, ids = full_coef(b).copy(), b.sample_ids_.copy()

    def unchanged():
        np.testing.assert_array_equal(full_coef(b), before)
        np.testing.assert_array_equal(b.sample_ids_, ids)
        assert b.n_samples_ == X.shape[0]

    def remove(rm):
        return b.remove(rm) if keep_data else b.remove(rm, X=X[rm])

    with pytest.raises(ValueError, match="unknown"):
        b.remove([5, 10_000]) if keep_data else b.remove([5, 10_000], X=X[[5, 6]])
    unchanged()
    # removing two classes would leave one: refused (the ledger keeps no labels: counts)
    with pytest.raises(ValueError, match="single class"):
        remove(np.flatnonzero(y != 5))
    unchanged()
    with pytest.raises(ValueError, match="single class"):
        b.relabel(
            np.flatnonzero(y != 5), np.full(np.count_nonzero(y != 5), 5)
        ) if keep_data else b.relabel(
            np.flatnonzero(y != 5), np.full(np.count_nonzero(y != 5), 5), X=X[y != 5]
        )
    unchanged()
    with pytest.raises(ValueError, match="not one of|unknown|classes"):
        b.add(X[:2], [3, 4])
    unchanged()
    if not keep_data:
        with pytest.raises(ValueError):
            b.remove([5], X=X[[6]])  # not the sample's row: its digest differs
        unchanged()
        for save in (b.save, lambda path: df.save(b, path)):
            with pytest.raises(ValueError, match="not saved"):
                save(tmp_path / "m.npz")
        assert not (tmp_path / "m.npz").exists()
    # a class vanishing leaves two: accepted, as by the NumPy model (its problem keeps the
    # class, every target -1)
    a = df.LinearClassifier(loss=loss, C=0.5).fit(X, y)
    gone = np.flatnonzero(y == 8)
    a.remove(gone)
    remove(gone)
    np.testing.assert_array_equal(b.classes_, a.classes_)
    if loss == "squared":
        assert rel(full_coef(b), full_coef(a)) < RTOL
    else:
        assert_smooth_same(a, b, *live(a, X, y))
    with pytest.raises(ValueError, match="single class"):  # now 5 alone would be left
        remove(np.flatnonzero(y == 3))


def test_fit_refusals(digits3):
    X, y = digits3
    Xd, yd = chunked(X, y, rows=150)
    w = np.where(y == 3, 1.0, 0.0)  # positive weights on one class only
    for loss in ("squared", "logistic"):
        with pytest.raises(ValueError, match="single class"):
            df.LinearClassifier(loss=loss).fit(Xd, yd, sample_weight=da.from_array(w, 150))
    from deltafit.model_selection import cross_validate, loo

    # logistic CV of K classes runs on dask input (tests/test_dask_cv_smooth.py); its fit
    # refuses what the fit refuses
    wd = da.from_array(w, 150)
    for method in (loo, lambda *a, **k: cross_validate(*a, cv=3, **k)):
        with pytest.raises(ValueError, match="single class"):
            method(df.LinearClassifier(loss="logistic"), Xd, yd, sample_weight=wd)


@pytest.mark.parametrize("weighted", [False, True])
def test_closed_form_cv_of_k_classes_equals_numpy(digits3, weighted):
    """Squared loss, K = 3: leave-one-out and k folds in closed form on dask input equal the
    NumPy path's closed form (the K code columns' left-out decisions, argmax labels)."""
    from sklearn.model_selection import KFold

    from deltafit.model_selection import cross_validate, loo

    X, y = digits3
    Xd, yd = chunked(X, y, rows=150)
    w = np.random.default_rng(4).uniform(0.2, 2.0, X.shape[0]) if weighted else None
    kw = {"sample_weight": w} if weighted else {}
    kwd = {"sample_weight": da.from_array(w, chunks=150)} if weighted else {}
    est = df.LinearClassifier(C=0.5)
    a, b = loo(est, X, y, **kw), loo(est, Xd, yd, **kwd)
    assert b.decision.shape == (X.shape[0], 3)
    np.testing.assert_allclose(b.decision.compute(), a.decision, rtol=0, atol=1e-10)
    np.testing.assert_array_equal(b.y_pred.compute(), a.y_pred)
    cv = KFold(4, shuffle=True, random_state=0)
    a, b = cross_validate(est, X, y, cv=cv, **kw), cross_validate(est, Xd, yd, cv=cv, **kwd)
    order = np.argsort(a.test_index)
    np.testing.assert_allclose(b.decision.compute(), a.decision[order], rtol=0, atol=1e-10)
    np.testing.assert_array_equal(b.y_pred.compute(), a.y_pred[order])
    np.testing.assert_allclose(b.fold_scores, a.fold_scores, rtol=0, atol=1e-12)


# ----------------------------------------------------------------------------- processes
@pytest.mark.slow  # worker processes start and import deltafit; test_dask.py's run daily
def test_process_cluster_fits_and_updates_every_class(process_client, digits3):
    X, y = digits3
    Xd, yd = chunked(X, y, rows=150)
    a = df.LinearClassifier(loss="squared_hinge", C=0.5).fit(X, y)
    s = df.LinearClassifier(C=0.5).fit(X, y)
    with process_client.as_current(), dask.config.set(scheduler=process_client.get):
        b = df.LinearClassifier(loss="squared_hinge", C=0.5).fit(Xd, yd)
        c = df.LinearClassifier(C=0.5, keep_data=False).fit(Xd, yd)
        for m in (a, b):
            m.update(remove_ids=[4, 40], X_add=X[:3] * 0.9, y_add=y[:3])
        s.remove([4, 40])
        c.remove([4, 40], X=X[[4, 40]])
        z = b.decision_function(Xd).compute()
        labels = c.predict(Xd).compute()
    XX, yy = np.vstack([X, X[:3] * 0.9]), np.r_[y, y[:3]]
    assert_smooth_same(a, b, *live(a, XX, yy))
    assert np.max(np.abs(z - a.decision_function(X))) <= 1e-8
    assert rel(full_coef(c), full_coef(s)) < RTOL
    np.testing.assert_array_equal(labels, s.predict(X))
