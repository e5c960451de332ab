"""What-ifs that take rows: SciPy sparse rows on a model without stored rows, and weighted
hypothetical additions through an updatable pipeline.

* ``sensitivity(m).relabel(ids, y, X=csr_rows, y_old=...)`` and ``.reweight(ids, w, X=csr_rows,
  y=...)`` on ``LinearClassifier(keep_data=False).fit(csr, y)`` give the bounds of the same
  call with dense rows, and the refit on the changed data lies inside them (they raised
  IndexError: the rows were indexed through ``np.asarray`` of the sparse matrix);
* ``sensitivity(pipe).add(X, y, sample_weight=w)`` equals the final estimator's what-if on the
  transformed rows with the same weights, and contains the weighted refit (it raised
  TypeError); ``sensitivity(pipe).reweight(ids, w, X=raw)`` passes the raw rows through the
  frozen transformers.

Real data: scikit-learn's digits (even vs odd; the pixels, mostly zero, as CSR).
"""

from __future__ import annotations

import numpy as np
import pytest
import scipy.sparse as sp
from sklearn.datasets import load_digits
from sklearn.preprocessing import StandardScaler

import deltafit as df


@pytest.fixture(scope="module")
def digits():
    X, y = load_digits(return_X_y=True)
    X, y = X[:400] / 16.0, (y[:400] % 2).astype(int)
    return sp.csr_matrix(X), X, y


def _inside(lo, hi, f):
    bad = (f < lo) | (f > hi)
    assert not bad.any(), (
        f"refit outside at {np.flatnonzero(bad)[:5]}: {np.max(np.maximum(lo - f, f - hi)):.2e}"
    )


def test_sparse_relabel_without_stored_rows_equals_dense_and_contains_refit(digits):
    Xs, X, y = digits
    m = df.LinearClassifier(keep_data=False).fit(Xs, y)
    ids = np.array([3, 17, 250])
    new = 1 - y[ids]
    s_sp = df.sensitivity(m).relabel(ids, new, X=Xs[ids], y_old=y[ids])
    s_de = df.sensitivity(m).relabel(ids, new, X=X[ids], y_old=y[ids])
    lo, hi = s_sp.decision_bounds(X)
    lo_d, hi_d = s_de.decision_bounds(X)
    np.testing.assert_array_equal(lo, lo_d)
    np.testing.assert_array_equal(hi, hi_d)
    y2 = y.copy()
    y2[ids] = new
    f = df.LinearClassifier().fit(X, y2).decision_function(X)
    _inside(lo, hi, f)
    # the ball takes the same sparse rows
    s_ball = df.sensitivity(m, method="sphere").relabel(ids, new, X=Xs[ids], y_old=y[ids])
    _inside(*s_ball.decision_bounds(X), f)


def test_sparse_reweight_without_stored_rows_equals_dense_and_contains_refit(digits):
    Xs, X, y = digits
    m = df.LinearClassifier(keep_data=False).fit(Xs, y)
    ids = np.array([0, 5, 123, 399])
    w_new = np.array([3.0, 0.0, 0.5, 2.0])
    s_sp = df.sensitivity(m).reweight(ids, w_new, X=Xs[ids], y=y[ids])
    s_de = df.sensitivity(m).reweight(ids, w_new, X=X[ids], y=y[ids])
    lo, hi = s_sp.decision_bounds(X)
    np.testing.assert_array_equal(lo, s_de.decision_bounds(X)[0])
    np.testing.assert_array_equal(hi, s_de.decision_bounds(X)[1])
    w = np.ones(y.size)
    w[ids] = w_new
    f = df.LinearClassifier().fit(X, y, sample_weight=w).decision_function(X)
    _inside(lo, hi, f)


def test_sparse_remove_of_model_and_hypothetical_samples_without_stored_rows(digits):
    # ids mixing a hypothetical addition and model samples: the rows of the model samples are
    # picked out of the sparse X aligned with the ids
    Xs, X, y = digits
    m = df.LinearClassifier(keep_data=False).fit(Xs[:300], y[:300])
    s = df.sensitivity(m)
    hid = s.add(Xs[300:302], y[300:302])
    ids = np.array([hid[0], 4, 9])
    rows = sp.vstack([Xs[300], Xs[4], Xs[9]]).tocsr()
    s.remove(ids, X=rows, y=np.array([y[300], y[4], y[9]]))
    keep = np.setdiff1d(np.arange(302), [300, 4, 9])
    f = df.LinearClassifier().fit(X[keep], y[keep]).decision_function(X)
    _inside(*s.decision_bounds(X), f)


def test_pipeline_weighted_add_equals_the_plain_what_if(digits):
    _, X, y = digits
    Xr = X * 16.0  # raw pixel values, standardised by the pipeline
    pipe = df.make_pipeline(StandardScaler(), df.LinearClassifier()).fit(Xr[:300], y[:300])
    final, scaler = pipe[-1], pipe[0]
    Xa, ya = Xr[300:320], y[300:320]
    w = np.linspace(0.0, 3.0, 20)
    sp_ = df.sensitivity(pipe)
    ids = sp_.add(Xa, ya, sample_weight=w)
    assert ids.shape == (20,)
    plain = df.sensitivity(final)
    plain.add(scaler.transform(Xa), ya, sample_weight=w)
    lo, hi = sp_.decision_bounds(Xr)
    lo_p, hi_p = plain.decision_bounds(scaler.transform(Xr))
    np.testing.assert_array_equal(lo, lo_p)
    np.testing.assert_array_equal(hi, hi_p)
    # the weights count: the unweighted addition gives other bounds
    other = df.sensitivity(pipe)
    other.add(Xa, ya)
    assert not np.allclose(other.decision_bounds(Xr)[0], lo)
    # the weighted refit (the scaler frozen at its first fit) lies inside
    Z = scaler.transform(Xr[:320])
    wt = np.concatenate([np.ones(300), w])
    f = (
        df.LinearClassifier()
        .fit(Z, y[:320], sample_weight=wt)
        .decision_function(scaler.transform(Xr))
    )
    _inside(lo, hi, f)


def test_pipeline_reweight_takes_raw_rows_without_stored_rows(digits):
    _, X, y = digits
    Xr = X * 16.0
    pipe = df.make_pipeline(StandardScaler(), df.LinearClassifier(keep_data=False))
    pipe.fit(Xr[:300], y[:300])
    scaler = pipe[0]
    ids = np.array([2, 40])
    w_new = np.array([0.0, 4.0])
    s = df.sensitivity(pipe).reweight(ids, w_new, X=Xr[ids], y=y[ids])
    lo, hi = s.decision_bounds(Xr)
    wt = np.ones(300)
    wt[ids] = w_new
    Z = scaler.transform(Xr[:300])
    f = (
        df.LinearClassifier()
        .fit(Z, y[:300], sample_weight=wt)
        .decision_function(scaler.transform(Xr))
    )
    _inside(lo, hi, f)
