"""Cross-validation of logistic / squared-hinge linear classifiers on dask collections
(``model_selection._dask_smooth_cv``, ``model_selection._dask_loo_bounds``,
``model_selection._dask_folds``) against the NumPy path and independent solvers, on breast cancer,
digits and a synthetic four-class problem.

* k folds: the joint warm re-solves give the decisions of k refits (NumPy
  ``cross_validate(method="refit")``: fresh fits on each training set) to 1e-8, identical labels
  and fold scores, in fewer passes than one cold fit per fold; K ≥ 3 classes: the K·k
  one-vs-rest fold problems solved as the columns of one joint re-solve, argmax labels;
* leave-one-out: the balls and the curvature-aware region (three passes) contain the exact
  left-out decisions (NumPy refits of every left-out problem; scikit-learn's
  ``LogisticRegression`` on ``[X, 1]`` for a few), leave undecided exactly the samples the
  NumPy path's ``loo(method="bounds")`` refits, the undecided samples' refits equal the exact
  decisions to 1e-8 and the labels equal NumPy's; K ≥ 3 classes decide by the argmax rule and
  refit the candidate classes.

Most tests run on dask's threaded scheduler; one on a LocalCluster of two worker processes.
"""

import numpy as np
import pytest
from sklearn.kernel_approximation import RBFSampler
from sklearn.linear_model import LogisticRegression
from sklearn.model_selection import KFold, StratifiedKFold

import deltafit as df
from dask_helpers import (
    _threads,  # noqa: F401  (autouse: the threaded scheduler)
    chunked,
)
from deltafit.model_selection import cross_validate, loo

dask = pytest.importorskip("dask")
da = pytest.importorskip("dask.array")

DEC_TOL = 1e-8


def row_order(res):
    """A NumPy CVResult's per-sample arrays in row order."""
    return np.argsort(res.test_index)


# ----------------------------------------------------------------------------- k folds
@pytest.mark.parametrize("loss", ["logistic", "squared_hinge"])
def test_kfold_joint_resolves_equal_numpy_refits(breast_cancer, loss):
    X, y = breast_cancer
    est = df.LinearClassifier(loss=loss, C=0.5)
    cv = KFold(5, shuffle=True, random_state=0)
    ref = cross_validate(est, X, y, cv=cv, method="refit")
    got = cross_validate(est, *chunked(X, y), cv=cv)
    o = row_order(ref)
    assert got.method == "refit" and not got.approximate
    assert isinstance(got.decision, da.Array) and isinstance(got.y_pred, da.Array)
    z = got.decision.compute()
    assert np.max(np.abs(z - ref.decision[o])) <= DEC_TOL
    np.testing.assert_array_equal(got.y_pred.compute(), ref.y_pred[o])
    np.testing.assert_array_equal(got.fold.compute(), ref.fold[o])
    np.testing.assert_allclose(got.fold_scores, ref.fold_scores, rtol=0, atol=0)
    assert got.n_errors == ref.n_errors
    # passes: the fit's, the joint re-solves' (the slowest fold's, not k cold fits'), scoring
    d = got.details
    assert d["n_passes"] == d["fit_passes"] + d["resolve_passes"] + 1
    assert d["resolve_passes"] < 5 * d["fit_passes"] / 2
    assert got.n_refits == 5 and bool(got.refit.all().compute())
    assert est.__dict__.get("coef_") is None  # the estimator was cloned


def test_kfold_weighted_on_digits_equals_numpy_refits(digits):
    X, y = digits
    w = np.random.default_rng(0).uniform(0.0, 2.0, X.shape[0])
    w[:20] = 0.0
    est = df.LinearClassifier(loss="logistic", C=0.05)
    cv = StratifiedKFold(4, shuffle=True, random_state=1)
    ref = cross_validate(est, X, y, cv=cv, method="refit", sample_weight=w)
    got = cross_validate(est, *chunked(X, y, rows=400, w=w)[:2], cv=cv, sample_weight=w)
    o = row_order(ref)
    assert np.max(np.abs(got.decision.compute() - ref.decision[o])) <= DEC_TOL
    np.testing.assert_array_equal(got.y_pred.compute(), ref.y_pred[o])
    np.testing.assert_allclose(got.fold_scores, ref.fold_scores, rtol=0, atol=0)


# ----------------------------------------------------------------------------- leave-one-out
@pytest.mark.parametrize("loss", ["logistic", "squared_hinge"])
def test_loo_bounds_contain_exact_decisions_and_labels_equal_numpy(breast_cancer, loss):
    X, y = breast_cancer
    est = df.LinearClassifier(loss=loss, C=0.5)
    exact = loo(est, X, y, method="refit").decision  # every left-out problem refit (NumPy)
    numpy_bounds = loo(est, X, y, method="bounds")
    got = loo(est, *chunked(X, y))
    assert got.method == "bounds" and got.details["region"] == "curvature"
    assert got.n_refits == numpy_bounds.n_refits  # the same screening as the NumPy path
    assert got.details["undecided_ball"] > 10 * got.n_refits  # the curvature region decides
    assert got.details["screen_passes"] == 3
    lo, hi = got.lower.compute(), got.upper.compute()
    dec, refit = got.decision.compute(), got.refit.compute()
    decided = got.decided_by_bound.compute()
    np.testing.assert_array_equal(decided, ~refit)
    assert got.n_refits == int(refit.sum()) == got.details["undecided"]
    assert got.n_refits < X.shape[0] // 50
    # the balls contain the exact left-out decisions; they decide by one sign
    assert np.all((lo[decided] <= exact[decided]) & (exact[decided] <= hi[decided]))
    assert np.all((lo[decided] > 0) | (hi[decided] <= 0))
    assert np.all(np.isnan(dec[decided]))
    # the undecided samples are refit exactly
    assert np.all(np.abs(dec[refit] - exact[refit]) <= DEC_TOL)
    np.testing.assert_array_equal(lo[refit], dec[refit])
    np.testing.assert_array_equal(got.y_pred.compute(), numpy_bounds.y_pred)
    assert got.n_errors == numpy_bounds.n_errors
    assert got.details["n_passes"] == (
        got.details["fit_passes"] + 3 + got.details["resolve_passes"]
    )
    # the balls alone (region="sphere"): more refits, the same labels, exact refits
    ball = loo(est, *chunked(X, y), region="sphere")
    assert ball.details["region"] == "sphere" and ball.details["screen_passes"] == 1
    assert (
        ball.n_refits
        == got.details["undecided_ball"]
        == loo(est, X, y, method="bounds", region="sphere").n_refits
    )
    bref = ball.refit.compute()
    assert np.max(np.abs(ball.decision.compute()[bref] - exact[bref])) <= DEC_TOL
    np.testing.assert_array_equal(ball.y_pred.compute(), numpy_bounds.y_pred)


def test_loo_logistic_against_scikit_learn(breast_cancer):
    """An independent twin: LogisticRegression(C) on [X, 1] without its own intercept, for a
    few decided and a few refit samples."""
    X, y = breast_cancer
    C = 0.5
    got = loo(df.LinearClassifier(loss="logistic", C=C), *chunked(X, y, rows=150))
    lo, hi = got.lower.compute(), got.upper.compute()
    dec, refit = got.decision.compute(), got.refit.compute()
    Z = np.column_stack([X, np.ones(X.shape[0])])
    picks = np.concatenate([np.flatnonzero(refit)[:4], np.flatnonzero(~refit)[:4]])
    for i in picks.tolist():
        keep = np.arange(X.shape[0]) != i
        m = LogisticRegression(
            C=C, fit_intercept=False, solver="newton-cholesky", tol=1e-12, max_iter=200
        ).fit(Z[keep], y[keep])
        z = float(Z[i] @ m.coef_.ravel())
        if refit[i]:
            assert abs(dec[i] - z) <= 1e-6
        else:
            assert lo[i] - 1e-6 <= z <= hi[i] + 1e-6


def test_loo_levels_from_thinned_blocks(breast_cancer, monkeypatch):
    """Blocks that thin their T₀ values (large blocks) give other levels, verified all the
    same: the labels stay exact."""
    from deltafit.model_selection import _dask_loo_bounds

    X, y = breast_cancer
    est = df.LinearClassifier(loss="squared_hinge", C=0.5)
    ref = loo(est, X, y, method="bounds")
    monkeypatch.setattr(_dask_loo_bounds, "SKETCH", 5)
    got = loo(est, *chunked(X, y, rows=200))
    np.testing.assert_array_equal(got.y_pred.compute(), ref.y_pred)
    assert got.n_refits < got.details["undecided_ball"]


# ----------------------------------------------------------------------------- K >= 3 classes
@pytest.fixture(scope="module")
def digits358():
    from sklearn.datasets import load_digits

    X, y = load_digits(return_X_y=True)
    keep = np.isin(y, [3, 5, 8])
    return X[keep] / 16.0, y[keep]


def four_classes(n=160, seed=0):
    """Four overlapping Gaussian classes in 4 dimensions (some left-out labels undecided)."""
    rng = np.random.default_rng(seed)
    y = rng.integers(0, 4, n)
    centers = rng.normal(scale=1.2, size=(4, 4))
    return centers[y] + rng.standard_normal((n, 4)), y


@pytest.mark.parametrize("loss", ["logistic", "squared_hinge"])
def test_kfold_multiclass_equals_numpy_refits(digits358, loss):
    X, y = digits358
    est = df.LinearClassifier(loss=loss, C=0.5)
    cv = KFold(4, shuffle=True, random_state=0)
    ref = cross_validate(est, X, y, cv=cv, method="refit")
    got = cross_validate(est, *chunked(X, y, rows=150), cv=cv)
    o = row_order(ref)
    z = got.decision.compute()
    assert z.shape == (X.shape[0], 3)
    assert np.max(np.abs(z - ref.decision[o])) <= DEC_TOL
    np.testing.assert_array_equal(got.y_pred.compute(), ref.y_pred[o])
    np.testing.assert_array_equal(got.y_pred.compute(), np.array([3, 5, 8])[z.argmax(1)])
    np.testing.assert_allclose(got.fold_scores, ref.fold_scores, rtol=0, atol=0)
    # one pass per round serves the 3 x 4 class-fold problems: the slowest one's passes
    d = got.details
    assert d["n_passes"] == d["fit_passes"] + d["resolve_passes"] + 1
    assert d["resolve_passes"] <= 2 * d["fit_passes"] < 3 * 4 * d["fit_passes"]


def test_loo_multiclass_digits_equals_numpy(digits358):
    X, y = digits358
    est = df.LinearClassifier(loss="logistic", C=0.5)
    ref = loo(est, X, y, method="bounds")
    got = loo(est, *chunked(X, y, rows=150))
    lo, hi = got.lower.compute(), got.upper.compute()
    assert lo.shape == (X.shape[0], 3) and got.details["region"] == "curvature"
    assert got.n_refits == ref.n_refits
    assert got.details["undecided_ball"] > 0
    np.testing.assert_array_equal(got.y_pred.compute(), ref.y_pred)
    # decided rows: the bounds certify the argmax
    decided = got.decided_by_bound.compute()
    top = lo[decided].argmax(1)
    others = hi[decided].copy()
    others[np.arange(top.size), top] = -np.inf
    assert np.all(lo[decided][np.arange(top.size), top] > others.max(1))


def test_weighted_multiclass_kfold_and_weighted_loo_equal_numpy(digits358, breast_cancer):
    """Sample weights (some 0) through the K-class joint fold re-solves and the binary
    leave-one-out: decisions, labels, fold scores and refits as the NumPy path's."""
    X, y = digits358
    w = np.random.default_rng(6).uniform(0.0, 2.0, X.shape[0])
    w[:10] = 0.0
    est = df.LinearClassifier(loss="logistic", C=0.5)
    cv = KFold(3, shuffle=True, random_state=2)
    ref = cross_validate(est, X, y, cv=cv, method="refit", sample_weight=w)
    got = cross_validate(
        est, *chunked(X, y, rows=150), cv=cv, sample_weight=da.from_array(w, chunks=150)
    )
    o = row_order(ref)
    assert np.max(np.abs(got.decision.compute() - ref.decision[o])) <= DEC_TOL
    np.testing.assert_array_equal(got.y_pred.compute(), ref.y_pred[o])
    np.testing.assert_allclose(got.fold_scores, ref.fold_scores, rtol=0, atol=0)

    Xb, yb = breast_cancer
    wb = np.random.default_rng(7).uniform(0.5, 2.0, Xb.shape[0])
    ref = loo(est, Xb, yb, method="bounds", sample_weight=wb)
    got = loo(est, *chunked(Xb, yb, rows=100), sample_weight=da.from_array(wb, chunks=100))
    np.testing.assert_array_equal(got.y_pred.compute(), ref.y_pred)
    assert got.n_refits == ref.n_refits
    lo, hi = got.lower.compute(), got.upper.compute()
    assert np.all(lo <= hi)


def test_loo_multiclass_four_classes_refits_exact():
    """K = 4, small n: left-out labels the bounds leave undecided are refit (candidate classes
    only); every exact left-out decision lies in the bounds; labels as the NumPy path's."""
    from sklearn.multiclass import OneVsRestClassifier

    X, y = four_classes()
    C = 1.0
    est = df.LinearClassifier(loss="logistic", C=C)
    exact = loo(est, X, y, method="refit").decision  # (n, 4), NumPy refits
    ref = loo(est, X, y, method="bounds")
    got = loo(est, *chunked(X, y, rows=50))
    ball = loo(est, *chunked(X, y, rows=50), region="sphere")
    lo, hi = got.lower.compute(), got.upper.compute()
    dec, refit = got.decision.compute(), got.refit.compute()
    assert got.n_refits == ref.n_refits > 0
    assert ball.n_refits == got.details["undecided_ball"] > got.n_refits
    assert got.details["refit_columns"] < 4 * got.n_refits  # candidate classes only
    tol = 1e-7
    assert np.all((lo - tol <= exact) & (exact <= hi + tol))
    known = ~np.isnan(dec)
    assert np.all(known.any(1) == refit)
    assert np.max(np.abs(dec[known] - exact[known])) <= DEC_TOL
    for r in (got, ball):
        np.testing.assert_array_equal(r.y_pred.compute(), ref.y_pred)
    np.testing.assert_array_equal(got.y_pred.compute(), exact.argmax(1))
    # k folds of the same four classes: the 4 x 3 class-fold problems jointly
    cv = KFold(3, shuffle=True, random_state=4)
    kref = cross_validate(est, X, y, cv=cv, method="refit")
    kgot = cross_validate(est, *chunked(X, y, rows=50), cv=cv)
    o = row_order(kref)
    # the two solves' certificates: ‖β − β*‖ ≤ tol ‖∇J(0)‖ ≤ tol C Σ |ℓ'(0)| ‖φ_i‖ each
    norms = np.linalg.norm(np.column_stack([X, np.ones(X.shape[0])]), axis=1)
    cert = 2 * 1e-10 * C * 0.5 * norms.sum() * norms
    assert np.all(np.abs(kgot.decision.compute() - kref.decision[o]) <= cert[:, None])
    np.testing.assert_array_equal(kgot.y_pred.compute(), kref.y_pred[o])
    # an independent twin for one refit sample: scikit-learn's one-vs-rest on [X, 1]
    i = int(np.flatnonzero(refit)[0])
    keep = np.arange(X.shape[0]) != i
    Z = np.column_stack([X, np.ones(X.shape[0])])
    m = OneVsRestClassifier(
        LogisticRegression(
            C=C, fit_intercept=False, tol=1e-12, solver="newton-cholesky", max_iter=200
        )
    )
    z = m.fit(Z[keep], y[keep]).decision_function(Z[i : i + 1]).ravel()
    assert np.max(np.abs(dec[i][known[i]] - z[known[i]])) <= 1e-6


# ----------------------------------------------------------------------------- refusals
def test_refusals_name_the_problem(breast_cancer):
    X, y = breast_cancer
    Xd, yd = chunked(X, y)
    with pytest.raises(ValueError, match="hinge"):
        loo(df.LinearClassifier(loss="hinge"), Xd, yd)
    with pytest.raises(ValueError, match="hinge"):
        cross_validate(df.LinearClassifier(loss="hinge"), Xd, yd, cv=3)
    with pytest.raises(ValueError, match="method='bounds'"):
        loo(df.LinearClassifier(loss="logistic"), Xd, yd, method="refit")
    with pytest.raises(ValueError, match="method='refit'"):
        cross_validate(df.LinearClassifier(loss="logistic"), Xd, yd, cv=3, method="bounds_early")
    with pytest.raises(ValueError, match="region='curvature'"):
        loo(df.LinearRegressor(), Xd, yd, region="curvature")
    with pytest.raises(ValueError, match="region must be"):
        loo(df.LinearClassifier(loss="logistic"), Xd, yd, region="ellipsoid")
    with pytest.raises(ValueError, match="fitted feature_map"):
        cross_validate(df.LinearClassifier(loss="logistic", feature_map=RBFSampler()), Xd, yd, cv=3)
    est = df.LinearClassifier(loss="logistic")
    with pytest.raises(ValueError, match="has no sample"):
        cross_validate(
            est,
            Xd,
            yd,
            cv=[
                (np.arange(100, 569), np.arange(100)),
                (np.arange(100), np.arange(100, 569)),
                (np.arange(569), np.arange(0)),
            ],
        )
    assert est.__dict__.get("coef_") is None


def test_fitted_feature_map_is_kept(breast_cancer):
    """A fitted feature map is part of the model: the clone keeps it (as the NumPy path)."""
    X, y = breast_cancer
    fm = RBFSampler(gamma=0.02, n_components=40, random_state=0).fit(X)
    est = df.LinearClassifier(loss="squared_hinge", C=0.2, feature_map=fm)
    cv = KFold(3, shuffle=True, random_state=2)
    ref = cross_validate(est, X, y, cv=cv, method="refit")
    got = cross_validate(est, *chunked(X, y, rows=200), cv=cv)
    assert np.max(np.abs(got.decision.compute() - ref.decision[row_order(ref)])) <= DEC_TOL


# ----------------------------------------------------------------------------- processes
@pytest.mark.slow  # worker processes start and import deltafit; test_dask.py's run daily
def test_process_cluster_kfold_and_loo_equal_numpy(process_client, breast_cancer):
    X, y = breast_cancer
    est = df.LinearClassifier(loss="logistic", C=0.5)
    cv = KFold(4, shuffle=True, random_state=3)
    ref = cross_validate(est, X, y, cv=cv, method="refit")
    ref_loo = loo(est, X, y, method="bounds")
    with process_client.as_current(), dask.config.set(scheduler=process_client.get):
        got = cross_validate(est, *chunked(X, y, rows=150), cv=cv)
        z = got.decision.compute()
        g = loo(est, *chunked(X, y, rows=150))
        labels = g.y_pred.compute()
    assert np.max(np.abs(z - ref.decision[row_order(ref)])) <= DEC_TOL
    np.testing.assert_array_equal(labels, ref_loo.y_pred)
