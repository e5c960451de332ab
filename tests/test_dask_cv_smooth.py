"""Cross-validation of logistic / squared-hinge linear classifiers on dask collections
(``model_selection._dask_smooth_cv``, ``models._dask_folds``) against the NumPy path and
independent solvers, on breast cancer and digits.

* k folds: the joint warm re-solves give the decisions of k refits (NumPy
  ``cross_validate(method="refit")``: fresh fits on each training set) to 1e-8, identical labels
  and fold scores, in fewer passes than one cold fit per fold;
* leave-one-out: the left-out balls of one pass contain the exact left-out decisions (NumPy
  refits of every left-out problem; scikit-learn's ``LogisticRegression`` on ``[X, 1]`` for a
  few), the undecided samples' refits equal them to 1e-8, the labels equal NumPy's
  ``loo(method="bounds")``.

Most tests run on dask's threaded scheduler; one on a LocalCluster of two worker processes.
"""


import numpy as np
import pytest
from sklearn.kernel_approximation import RBFSampler
from sklearn.linear_model import LogisticRegression
from sklearn.model_selection import KFold, StratifiedKFold

import deltafit as df
from deltafit.model_selection import cross_validate, loo
from dask_helpers import _threads  # noqa: F401  (autouse: the threaded scheduler)
from dask_helpers import chunked

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
    assert got.method == "bounds" and got.details["region"] == "sphere"
    lo, hi = got.lower.compute(), got.upper.compute()
    dec, refit = got.decision.compute(), got.refit.compute()
    decided = got.decided_by_bound.compute()
    np.testing.assert_array_equal(decided, ~refit)
    assert got.n_refits == int(refit.sum()) == got.details["undecided"]
    assert 0 < got.n_refits < X.shape[0] // 4  # the balls decide most labels
    # the balls contain the exact left-out decisions; they decide by one sign
    assert np.all((lo[decided] <= exact[decided]) & (exact[decided] <= hi[decided]))
    assert np.all((lo[decided] > 0) | (hi[decided] <= 0))
    assert np.all(np.isnan(dec[decided]))
    # the undecided samples are refit exactly
    assert np.max(np.abs(dec[refit] - exact[refit])) <= DEC_TOL
    np.testing.assert_array_equal(lo[refit], dec[refit])
    np.testing.assert_array_equal(got.y_pred.compute(), numpy_bounds.y_pred)
    assert got.n_errors == numpy_bounds.n_errors
    assert got.details["n_passes"] == (got.details["fit_passes"] + 1
                                       + got.details["resolve_passes"])


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
        m = LogisticRegression(C=C, fit_intercept=False, solver="newton-cholesky", tol=1e-12,
                               max_iter=200).fit(Z[keep], y[keep])
        z = float(Z[i] @ m.coef_.ravel())
        if refit[i]:
            assert abs(dec[i] - z) <= 1e-6
        else:
            assert lo[i] - 1e-6 <= z <= hi[i] + 1e-6


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
        cross_validate(df.LinearClassifier(loss="logistic"), Xd, yd, cv=3,
                       method="bounds_early")
    with pytest.raises(ValueError, match="region='curvature'"):
        loo(df.LinearClassifier(loss="logistic"), Xd, yd, region="curvature")
    with pytest.raises(ValueError, match="fitted feature_map"):
        cross_validate(df.LinearClassifier(loss="logistic", feature_map=RBFSampler()), Xd, yd,
                       cv=3)
    est = df.LinearClassifier(loss="logistic")
    with pytest.raises(ValueError, match="has no sample"):
        cross_validate(est, Xd, yd, cv=[(np.arange(100, 569), np.arange(100)),
                                        (np.arange(100), np.arange(100, 569)),
                                        (np.arange(569), np.arange(0))])
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
