"""Dask-backed linear models (squared loss, keep_data=False) against the NumPy path and
scikit-learn, on breast cancer and digits.

Every Dask result is compared with the same model fitted on the NumPy arrays (coefficients to
1e-10, relative: the blocks' statistics are summed in another order, which moves them by
rounding only) and with ``Ridge(alpha=1/(2C), fit_intercept=False)`` on ``[X, 1]`` (1e-8), the
independent twin.  Most tests run on dask's threaded scheduler; a module-scoped LocalCluster of
two worker processes runs a few, the lost worker among them (last in the file).
"""

import os
import signal
import subprocess
import sys
import threading
import time

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from sklearn.kernel_approximation import RBFSampler
from sklearn.linear_model import Ridge

import deltafit as df
from dask_helpers import (
    _threads,  # noqa: F401  (autouse: the threaded scheduler)
    chunked,
)
from dask_helpers import class_coefs as full_coef
from hypothesis_profiles import examples

dask = pytest.importorskip("dask")
da = pytest.importorskip("dask.array")

RTOL = 1e-10


def rel(a, b):
    a, b = np.asarray(a, dtype=float), np.asarray(b, dtype=float)
    return float(np.max(np.abs(a - b)) / max(np.max(np.abs(b)), 1e-300))


def ridge_coef(X, y, C, w=None):
    """The squared-loss model by scikit-learn: Ridge on [X, 1] without its own intercept."""
    Z = np.column_stack([X, np.ones(X.shape[0])])
    return (
        Ridge(alpha=1.0 / (2.0 * C), fit_intercept=False, solver="cholesky", tol=1e-14)
        .fit(Z, y, sample_weight=w)
        .coef_
    )


# ----------------------------------------------------------------------------- fit
def test_classifier_fit_equals_numpy_and_ridge(breast_cancer):
    X, y = breast_cancer
    Xd, yd = chunked(X, y)
    a = df.LinearClassifier(C=0.7, keep_data=False).fit(X, y)
    b = df.LinearClassifier(C=0.7, keep_data=False).fit(Xd, yd)
    assert rel(b.coef_, a.coef_) < RTOL and rel(b.intercept_, a.intercept_) < RTOL
    assert rel(full_coef(b)[0], ridge_coef(X, np.where(y == 1, 1.0, -1.0), 0.7)) < 1e-8
    np.testing.assert_array_equal(b.classes_, a.classes_)
    np.testing.assert_array_equal(b.sample_ids_, np.arange(X.shape[0]))
    assert b.n_features_in_ == X.shape[1] and b._dask_passes == 1
    assert b.grad_norm_ < 1e-8


def test_regressor_fit_equals_numpy_and_ridge(breast_cancer):
    X, _ = breast_cancer
    t = X[:, 1:] @ np.linspace(-1, 1, X.shape[1] - 1) + 0.3
    Xd, td = chunked(X[:, :-1], t, rows=50)
    a = df.LinearRegressor(C=2.0, keep_data=False).fit(X[:, :-1], t)
    b = df.LinearRegressor(C=2.0, keep_data=False).fit(Xd, td)
    assert rel(b.coef_, a.coef_) < RTOL and abs(b.intercept_ - a.intercept_) < RTOL
    assert rel(full_coef(b)[0], ridge_coef(X[:, :-1], t, 2.0)) < 1e-8


def test_multi_output_regressor_on_digits(digits):
    X, y = digits
    Y = np.column_stack([y, X[:, 10], X[:, 20] - X[:, 30]])
    Xd, Yd = chunked(X, Y, rows=300)
    a = df.LinearRegressor(C=0.1, keep_data=False).fit(X, Y)
    b = df.LinearRegressor(C=0.1, keep_data=False).fit(Xd, Yd)
    assert b.coef_.shape == (3, X.shape[1])
    assert rel(b.coef_, a.coef_) < RTOL and rel(b.intercept_, a.intercept_) < RTOL
    assert rel(full_coef(b), ridge_coef(X, Y, 0.1)) < 1e-8
    z = b.predict(Xd)
    assert isinstance(z, da.Array) and z.shape == (X.shape[0], 3)
    assert rel(z.compute(), a.predict(X)) < RTOL


def test_weighted_fit_equals_numpy_and_ridge(digits):
    X, y = digits
    w = np.random.default_rng(3).uniform(0.0, 3.0, X.shape[0])
    w[:40] = 0.0
    Xd, yd = chunked(X, y, rows=256)
    a = df.LinearClassifier(C=0.2, keep_data=False).fit(X, y, sample_weight=w)
    b = df.LinearClassifier(C=0.2, keep_data=False).fit(
        Xd, yd, sample_weight=da.from_array(w, chunks=500)
    )  # other chunks: realigned
    assert rel(b.coef_, a.coef_) < RTOL
    np.testing.assert_array_equal(b.sample_weight_, w)
    assert rel(full_coef(b)[0], ridge_coef(X, np.where(y == 1, 1.0, -1.0), 0.2, w)) < 1e-8
    # weights of NumPy, given with a dask X, likewise
    c = df.LinearClassifier(C=0.2, keep_data=False).fit(Xd, yd, sample_weight=w)
    assert rel(c.coef_, a.coef_) < RTOL


@pytest.mark.filterwarnings("ignore:Dask currently has limited support")
def test_dataframe_input_and_string_labels(breast_cancer):
    dd = pytest.importorskip("dask.dataframe")
    pd = pytest.importorskip("pandas")
    X, y = breast_cancer
    labels = np.array(["benign", "malignant"])[1 - y]
    frame = pd.DataFrame(X, columns=[f"f{i}" for i in range(X.shape[1])])
    frame["label"] = labels
    ddf = dd.from_pandas(frame, npartitions=4)
    a = df.LinearClassifier(C=1.0, keep_data=False).fit(X, labels)
    b = df.LinearClassifier(C=1.0, keep_data=False).fit(ddf.drop(columns="label"), ddf["label"])
    assert rel(b.coef_, a.coef_) < RTOL
    np.testing.assert_array_equal(b.classes_, ["benign", "malignant"])
    pred = b.predict(da.from_array(X, chunks=100))
    np.testing.assert_array_equal(pred.compute(), a.predict(X))


def test_fitted_feature_map(breast_cancer):
    X, y = breast_cancer
    fm = RBFSampler(n_components=40, random_state=0).fit(X[:100])
    Xd, yd = chunked(X, y)
    a = df.LinearClassifier(C=1.0, keep_data=False, feature_map=fm).fit(X, y)
    b = df.LinearClassifier(C=1.0, keep_data=False, feature_map=fm).fit(Xd, yd)
    assert rel(b.coef_, a.coef_) < RTOL
    z = b.decision_function(Xd)
    assert rel(z.compute(), a.decision_function(X)) < RTOL


def test_outlying_rows_take_a_second_pass_and_leave_exactly(breast_cancer):
    """Rows of large norm are summed apart (double-double), as the NumPy path sums them: a
    second pass; their later removal then equals the fit without them."""
    X, y = breast_cancer
    X = X.copy()
    X[[5, 300]] *= 1e4
    Xd, yd = chunked(X, y)
    a = df.LinearClassifier(C=1.0, keep_data=False).fit(X, y)
    b = df.LinearClassifier(C=1.0, keep_data=False).fit(Xd, yd)
    assert b._dask_passes == 2 and b._state.stats.Mbig is not None
    assert rel(b.coef_, a.coef_) < RTOL
    b.remove([5, 300], X=X[[5, 300]])
    keep = np.setdiff1d(np.arange(X.shape[0]), [5, 300])
    ref = df.LinearClassifier(C=1.0, keep_data=False).fit(X[keep], y[keep])
    assert rel(b.coef_, ref.coef_) < 1e-9


# ----------------------------------------------------------------------------- updates
def test_updates_equal_numpy_and_fresh_fit(breast_cancer):
    X, y = breast_cancer
    n = 500
    Xd, yd = chunked(X[:n], y[:n])
    a = df.LinearClassifier(C=1.0, keep_data=False).fit(X[:n], y[:n])
    b = df.LinearClassifier(C=1.0, keep_data=False).fit(Xd, yd)
    # remove by id with the rows (NumPy rows, then dask rows), by value, relabel, add dask
    for m, rows in ((a, X[[3, 9]]), (b, X[[3, 9]])):
        m.remove([3, 9], X=rows)
    for m, rows in ((a, X[[11, 12, 13]]), (b, da.from_array(X[[11, 12, 13]]))):
        m.remove([11, 12, 13], X=rows)
    for m in (a, b):
        m.remove(X=X[[20, 21]], y=y[[20, 21]])
        m.relabel([30, 31], 1 - y[[30, 31]], X=X[[30, 31]])
    ids_a = a.add(X[n:], y[n:])
    ids_b = b.add(da.from_array(X[n:], chunks=30), da.from_array(y[n:], chunks=30))
    np.testing.assert_array_equal(ids_a, ids_b)
    b.update(remove_ids=[40], X_remove=da.from_array(X[[40]]), X_add=X[[40]] * 0.5, y_add=y[[40]])
    a.update(remove_ids=[40], X_remove=X[[40]], X_add=X[[40]] * 0.5, y_add=y[[40]])
    assert rel(b.coef_, a.coef_) < RTOL
    keep = np.setdiff1d(np.arange(X.shape[0]), [3, 9, 11, 12, 13, 20, 21, 40])
    yy = y.copy()
    yy[[30, 31]] = 1 - yy[[30, 31]]
    ref = ridge_coef(
        np.vstack([X[keep], X[[40]] * 0.5]),
        np.where(np.concatenate([yy[keep], y[[40]]]) == 1, 1.0, -1.0),
        1.0,
    )
    assert rel(full_coef(b)[0], ref) < 1e-8


def test_failed_update_leaves_the_dask_fitted_model(breast_cancer):
    X, y = breast_cancer
    Xd, yd = chunked(X, y)
    b = df.LinearClassifier(keep_data=False).fit(Xd, yd)
    before = full_coef(b).copy()
    with pytest.raises(ValueError, match="not sample id"):
        b.remove([3], X=X[[4]])
    with pytest.raises(ValueError, match="keeps no training rows"):
        b.remove([3])
    np.testing.assert_array_equal(full_coef(b), before)
    assert b.n_samples_ == X.shape[0]


def test_save_and_load_a_dask_fitted_model(breast_cancer, tmp_path):
    X, y = breast_cancer
    Xd, yd = chunked(X, y)
    b = df.LinearClassifier(keep_data=False).fit(Xd, yd)
    df.save(b, tmp_path / "m.npz")
    c = df.load(tmp_path / "m.npz")
    np.testing.assert_array_equal(c.coef_, b.coef_)
    c.remove([7], X=X[[7]])  # the digests came back from the workers: it recognises its rows
    b.remove([7], X=X[[7]])
    assert rel(c.coef_, b.coef_) < 1e-12


# ----------------------------------------------------------------------------- decisions
def test_decisions_are_lazy_for_any_linear_model(iris, breast_cancer):
    """A model fitted on NumPy predicts on a dask X lazily (any loss: β is all it needs)."""
    X, y = iris
    m = df.LinearClassifier(loss="logistic", C=1.0).fit(X, y)
    Xd = da.from_array(X, chunks=40)
    z = m.decision_function(Xd)
    assert isinstance(z, da.Array) and z.shape == (X.shape[0], 3)
    np.testing.assert_allclose(z.compute(), m.decision_function(X), rtol=0, atol=1e-12)
    p = m.predict(Xd)
    assert isinstance(p, da.Array)
    np.testing.assert_array_equal(p.compute(), m.predict(X))
    for proba in ("predict_proba", "predict_log_proba"):
        q = getattr(m, proba)(Xd)
        assert isinstance(q, da.Array)
        np.testing.assert_allclose(q.compute(), getattr(m, proba)(X), rtol=1e-12, atol=1e-12)
    with pytest.raises(ValueError, match="features"):
        m.predict(da.from_array(np.zeros((3, 5))))
    Xb, yb = breast_cancer
    b = df.LinearClassifier(loss="logistic", C=1.0).fit(Xb, yb)
    q = b.predict_proba(da.from_array(Xb, chunks=100))
    assert isinstance(q, da.Array) and q.shape == (Xb.shape[0], 2)
    np.testing.assert_allclose(q.compute(), b.predict_proba(Xb), rtol=1e-12, atol=1e-12)


# ----------------------------------------------------------------------------- refusals
def test_refusals_name_the_problem_and_change_nothing(breast_cancer, iris):
    X, y = breast_cancer
    Xd, yd = chunked(X, y)
    with pytest.raises(ValueError, match="callback"):
        df.LinearClassifier(loss="hinge", callback=print).fit(Xd, yd)  # cluster passes
    with pytest.raises(ValueError, match="loss='squared'"):
        df.LinearClassifier(loss="logistic", keep_data=False).fit(Xd, yd)
    with pytest.raises(ValueError, match="fitted feature_map"):
        df.LinearClassifier(keep_data=False, feature_map=RBFSampler()).fit(Xd, yd)
    with pytest.raises(ValueError, match="no dask input"):
        df.KernelClassifier().fit(Xd, yd)
    with pytest.raises(ValueError, match="give X as a dask array"):
        df.LinearClassifier(keep_data=False).fit(X, yd)
    Xi, yi = iris  # three classes: one-vs-rest (tests/test_dask_multiclass.py)
    assert df.LinearClassifier(keep_data=False).fit(
        da.from_array(Xi), da.from_array(yi)
    ).coef_.shape == (3, 4)
    m = df.LinearClassifier(keep_data=False).fit(Xd, yd)
    before = full_coef(m).copy()
    bad = X.copy()
    bad[400, 2] = np.nan
    with pytest.raises(ValueError, match="NaN"):
        m.fit(da.from_array(bad, chunks=100), yd)
    with pytest.raises(ValueError, match="rows"):
        m.fit(Xd, y[:-1])
    np.testing.assert_array_equal(full_coef(m), before)
    assert m.n_samples_ == X.shape[0]


def test_core_import_does_not_load_dask():
    code = (
        "import sys, numpy as np, deltafit as df\n"
        "m = df.LinearRegressor(keep_data=False).fit(np.eye(3), [1.0, 2.0, 3.0])\n"
        "m.predict(np.eye(3))\n"
        "print(any(k == 'dask' or k.startswith('dask.') for k in sys.modules))\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        env={**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)},
        check=True,
    )
    assert out.stdout.strip() == "False"


# ----------------------------------------------------------------------------- properties
@settings(max_examples=examples(15), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    n=st.integers(1, 120),
    p=st.integers(1, 6),
    rows=st.integers(1, 50),
    C=st.floats(1e-2, 1e2),
    seed=st.integers(0, 2**16),
    outliers=st.booleans(),
)
def test_any_chunking_gives_the_numpy_statistics(n, p, rows, C, seed, outliers):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, p))
    if outliers and n > 2:
        X[rng.integers(n)] *= 1e5
    t = rng.normal(size=n)
    a = df.LinearRegressor(C=C, keep_data=False).fit(X, t)
    b = df.LinearRegressor(C=C, keep_data=False).fit(
        da.from_array(X, chunks=(rows, p)), da.from_array(t, chunks=rows)
    )
    np.testing.assert_allclose(
        b._state.stats.full(),
        a._state.stats.full(),
        rtol=1e-12,
        atol=1e-12 * np.abs(a._state.stats.full()).max(),
    )
    assert rel(full_coef(b), full_coef(a)) < 1e-9


# ------------------------------------------------------------------ cross-validation
def _row_order(res):
    """A NumPy CVResult's decisions in row order."""
    z = np.empty_like(res.decision)
    z[res.test_index] = res.decision
    return z


def test_loo_closed_form_equals_numpy_and_refits(breast_cancer):
    from deltafit.model_selection import loo

    X, y = breast_cancer
    est = df.LinearClassifier(C=0.3)
    a = loo(est, X, y, method="closed_form")
    b = loo(est, *chunked(X, y), method="closed_form")
    assert b.details == {"dask": True, "n_passes": 2}
    assert all(
        is_lazy for is_lazy in (isinstance(b.decision, da.Array), isinstance(b.y_pred, da.Array))
    )
    zb = b.decision.compute()
    assert rel(zb, _row_order(a)) < RTOL
    np.testing.assert_array_equal(b.y_pred.compute(), a.y_pred)
    assert b.error_rate == a.error_rate and b.n_errors == a.n_errors
    # brute force twin: sample 7 left out, Ridge on the rest
    keep = np.delete(np.arange(X.shape[0]), 7)
    beta = ridge_coef(X[keep], np.where(y[keep] == 1, 1.0, -1.0), 0.3)
    assert abs(zb[7] - np.append(X[7], 1.0) @ beta) < 1e-8


def test_loo_weighted_and_multi_output_equal_numpy(digits):
    from deltafit.model_selection import loo

    X, y = digits
    X = X[:600]
    w = np.random.default_rng(4).uniform(0.0, 2.0, 600)
    est = df.LinearRegressor(C=0.5)
    a = loo(est, X, y[:600].astype(float), method="closed_form", sample_weight=w)
    b = loo(
        est,
        da.from_array(X, chunks=(150, -1)),
        y[:600].astype(float),
        sample_weight=da.from_array(w, chunks=150),
    )
    assert rel(b.decision.compute(), _row_order(a)) < RTOL
    assert abs(b.mse - a.mse) <= 1e-10 * a.mse
    Y = np.column_stack([X[:, 10], X[:, 20] - X[:, 30]])  # two outputs of the pixels
    Xr = np.delete(X, [10, 20, 30], axis=1)
    for k in range(2):  # K outputs share the leverages: each column is a one-output LOO
        ak = loo(df.LinearRegressor(C=2.0), Xr, Y[:, k], method="closed_form")
        bk = loo(
            df.LinearRegressor(C=2.0),
            da.from_array(Xr, chunks=(128, -1)),
            da.from_array(Y, chunks=(128, -1)),
        )
        assert bk.decision.shape == (600, 2)
        assert rel(bk.decision.compute()[:, k], _row_order(ak)) < RTOL


def test_kfold_is_k_batch_removals_equal_to_numpy_and_refits(breast_cancer):
    from sklearn.model_selection import GroupKFold, KFold

    from deltafit.model_selection import cross_validate

    X, y = breast_cancer
    Xd, yd = chunked(X, y)
    est = df.LinearClassifier(C=1.5)
    a = cross_validate(est, X, y, cv=5, method="closed_form")  # StratifiedKFold(5)
    b = cross_validate(est, Xd, yd, cv=5)
    assert b.details["n_passes"] == 2 and b.n_splits == 5
    np.testing.assert_allclose(b.fold_scores, a.fold_scores, rtol=0, atol=1e-15)
    zb = b.decision.compute()
    assert rel(zb, _row_order(a)) < RTOL
    # brute force twin of one fold: Ridge on the other folds
    fold = b.fold.compute()
    tr = fold != 2
    beta = ridge_coef(X[tr], np.where(y[tr] == 1, 1.0, -1.0), 1.5)
    assert rel(zb[~tr], np.column_stack([X[~tr], np.ones((~tr).sum())]) @ beta) < 1e-8
    # a regressor, shuffled folds and groups
    t = X[:, 1:] @ np.linspace(-1, 1, X.shape[1] - 1)
    reg = df.LinearRegressor(C=3.0)
    for cv, groups in (
        (KFold(4, shuffle=True, random_state=0), None),
        (GroupKFold(3), np.arange(X.shape[0]) % 7),
    ):
        a = cross_validate(reg, X[:, :-1], t, cv=cv, groups=groups, method="closed_form")
        b = cross_validate(reg, *chunked(X[:, :-1], t, rows=120), cv=cv, groups=groups)
        np.testing.assert_allclose(b.fold_scores, a.fold_scores, rtol=1e-10)
        assert rel(b.decision.compute(), _row_order(a)) < RTOL


def test_dask_cross_validation_refusals(breast_cancer):
    from sklearn.model_selection import ShuffleSplit

    from deltafit.model_selection import cross_validate, loo

    X, y = breast_cancer
    Xd, yd = chunked(X, y)
    with pytest.raises(ValueError, match="exactly one test fold"):
        cross_validate(df.LinearClassifier(), Xd, yd, cv=ShuffleSplit(3, random_state=0))
    with pytest.raises(ValueError, match="closed_form"):
        loo(df.LinearClassifier(), Xd, yd, method="bounds")
    with pytest.raises(ValueError, match="hinge"):  # logistic: tests/test_dask_cv_smooth.py
        loo(df.LinearClassifier(loss="hinge"), Xd, yd)
    with pytest.raises(ValueError, match="squared loss"):
        cross_validate(df.KernelClassifier(), Xd, yd, cv=3)


# ----------------------------------------------------------------------------- processes
def _slow_block(x):
    time.sleep(0.15)
    return x


def test_process_cluster_equals_numpy(process_client, breast_cancer):
    X, y = breast_cancer
    Xd, yd = chunked(X, y, rows=60)
    a = df.LinearClassifier(C=0.5, keep_data=False).fit(X, y)
    with dask.config.set(scheduler=process_client.get):
        b = df.LinearClassifier(C=0.5, keep_data=False).fit(Xd, yd)
        z = b.decision_function(Xd).compute()
    assert rel(b.coef_, a.coef_) < RTOL
    assert rel(z, a.decision_function(X)) < RTOL


def test_process_cluster_keeps_rows_and_resolves_logistic(process_client, breast_cancer):
    """keep_data=True on two worker processes: the rows persisted there (futures), the
    logistic fit and a removal by id equal the NumPy path within their certificates."""
    X, y = breast_cancer
    Xd, yd = chunked(X, y, rows=150)
    a = df.LinearClassifier(loss="logistic", C=0.5).fit(X, y)
    with process_client.as_current(), dask.config.set(scheduler=process_client.get):
        b = df.LinearClassifier(loss="logistic", C=0.5).fit(Xd, yd)
        graph = b._dask_rows.blocks[0][0].dask
        assert any(type(v).__name__ == "Future" for v in dict(graph).values())
        a.remove([4, 40])
        b.remove([4, 40])
        z = b.decision_function(Xd).compute()
    tol = a.grad_norm_ + b.grad_norm_ + 1e-10
    assert np.max(np.abs(b.coef_ - a.coef_)) <= tol
    assert np.max(np.abs(z - a.decision_function(X))) <= 1e-8


@pytest.mark.slow  # kills a worker; test_dask_reliability's lost-worker case runs daily
def test_lost_worker_mid_reduction(process_client, breast_cancer):
    """A worker process killed while the blocks are being reduced: Dask reruns its tasks on
    the other worker (the fit equals the NumPy one), or the fit raises and the model is left
    as it was."""
    X, y = breast_cancer
    Xd, yd = chunked(X, y, rows=20)  # 29 blocks, 0.15 s each: about 2 s on two workers
    Xd = Xd.map_blocks(_slow_block, dtype=Xd.dtype)
    a = df.LinearClassifier(C=0.5, keep_data=False).fit(X, y)
    m = df.LinearClassifier(C=0.5, keep_data=False).fit(X[:100], y[:100])
    before = full_coef(m).copy()
    pids = process_client.run(os.getpid)
    victim = sorted(pids.values())[0]
    outcome = {}

    def fit():
        outcome["start"] = time.perf_counter()
        try:
            with dask.config.set(scheduler=process_client.get):
                m.fit(Xd, yd)
            outcome["ok"] = True
        except Exception as exc:  # the cluster's error, whatever its type
            outcome["error"] = exc

    thread = threading.Thread(target=fit)
    thread.start()
    time.sleep(0.8)
    os.kill(victim, signal.SIGKILL)
    thread.join(120)
    assert not thread.is_alive()
    if "ok" in outcome:
        assert rel(m.coef_, a.coef_) < RTOL
        assert m.n_samples_ == X.shape[0]
    else:
        np.testing.assert_array_equal(full_coef(m), before)
        assert m.n_samples_ == 100
