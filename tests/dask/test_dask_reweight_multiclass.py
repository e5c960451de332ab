"""Reweighting a K-class (K = 3) LinearClassifier fitted on dask arrays equals the NumPy fit
with the resulting ``sample_weight``, on digits 3, 5 and 8 in blocks of 150 rows.

* Squared loss, rows on the cluster (``keep_data=True``) and digests only (``keep_data=False``,
  the rows given as X): one reweight, a second one (weights 0 among them), a reweight with a
  removal, a relabel with a reweight of the same sample.  Coefficients to 1e-8 relative against
  a fresh weighted NumPy fit and against the weighted multi-output ``Ridge`` on ``[X, 1]`` with
  the ±1 codes (the independent twin); decisions to 1e-8, predictions equal.
* Logistic, squared hinge and hinge (rows on the cluster): the same sequence, each class's
  coefficients within the two solves' certificates (smooth losses, Okumura et al., Thm 6:
  ``‖β_k − β_k*‖ ≤ g``) or to 1e-8 · max(1, ‖β_k‖) (hinge: both stop on the same KKT rule).
* One squared-loss case on a LocalCluster of two worker processes.

The squared loss's K-output state once received the reweighted samples' class indices as
targets instead of their ±1 codes, and every reweight failed with "operands could not be
broadcast together with shapes (65,3) (65,)".
"""

import numpy as np
import pytest
from sklearn.linear_model import Ridge

import deltafit as df
from dask_helpers import (
    _threads,  # noqa: F401  (autouse: the threaded scheduler)
    chunked,
    class_coefs,
)

dask = pytest.importorskip("dask")
da = pytest.importorskip("dask.array")

C = 0.5
RTOL = 1e-8
ROWS = 150  # 539 rows: four blocks


@pytest.fixture(scope="module")
def digits3():
    """scikit-learn's digits 3, 5 and 8, scaled to [0, 1] (539 rows, 64 features)."""
    from sklearn.datasets import load_digits

    X, y = load_digits(return_X_y=True)
    keep = np.isin(y, (3, 5, 8))
    return X[keep] / 16.0, y[keep]


def rel(a, b):
    a, b = np.asarray(a, dtype=float), np.asarray(b, dtype=float)
    return float(np.max(np.abs(a - b)) / max(np.max(np.abs(b)), 1e-300))


def ridge_coef(X, y, w, classes):
    """The weighted one-vs-rest squared loss by scikit-learn: multi-output Ridge on [X, 1]
    with the ±1 codes, (K, p + 1)."""
    Z = np.column_stack([X, np.ones(X.shape[0])])
    T = np.where(y[:, None] == classes[None, :], 1.0, -1.0)
    return (
        Ridge(alpha=1.0 / (2.0 * C), fit_intercept=False, solver="cholesky")
        .fit(Z, T, sample_weight=w)
        .coef_
    )


class Truth:
    """The data by id (rows, current labels, weights) and the NumPy fit on the live ones."""

    def __init__(self, X, y):
        self.X, self.y, self.w = X, y.copy(), np.ones(y.size)
        self.live = np.ones(y.size, dtype=bool)

    def fit(self, loss):
        ids = np.flatnonzero(self.live)
        m = df.LinearClassifier(loss=loss, C=C).fit(
            self.X[ids], self.y[ids], sample_weight=self.w[ids]
        )
        return m, ids


def check(b, truth, loss, Xd):
    """The Dask model ``b`` equals the NumPy fit on ``truth``'s live samples and weights."""
    a, ids = truth.fit(loss)
    np.testing.assert_array_equal(b.sample_ids_, ids)
    np.testing.assert_array_equal(b.sample_weight_, truth.w[ids])
    np.testing.assert_array_equal(b.classes_, [3, 5, 8])
    ca, cb = class_coefs(a), class_coefs(b)
    if loss == "squared":
        assert rel(cb, ca) < RTOL
        assert rel(cb, ridge_coef(truth.X[ids], truth.y[ids], truth.w[ids], a.classes_)) < RTOL
    else:
        ra, rb = a._state.result.results, b._state.result.results
        for k in range(3):
            diff = float(np.max(np.abs(ca[k] - cb[k])))
            if loss == "hinge":
                assert diff <= 1e-8 * max(1.0, float(np.linalg.norm(ca[k])))
            else:
                assert diff <= ra[k].grad_norm + rb[k].grad_norm + 1e-10
    z = b.decision_function(Xd)
    assert isinstance(z, da.Array)
    za = a.decision_function(truth.X)
    assert np.max(np.abs(z.compute() - za)) <= RTOL * max(1.0, float(np.max(np.abs(za))))
    np.testing.assert_array_equal(b.predict(Xd).compute(), a.predict(truth.X))


def updates(b, truth, loss, keep_data, Xd):
    """Reweight, reweight again (weights 0 and a weight back to 1), reweight with a removal,
    relabel and reweight a sample together; ``check`` after each."""
    X = truth.X

    def rows(ids):  # keep_data=False: the samples' rows, recognised by their digests
        return {} if keep_data else {"X": X[ids]}

    ids = np.array([0, 5, 17, 149, 150, 301, 400, 538])
    w1 = np.linspace(0.25, 4.0, ids.size)
    b.reweight(ids, w1, **rows(ids))
    truth.w[ids] = w1
    check(b, truth, loss, Xd)

    ids2 = np.array([5, 17, 33, 299, 450])
    w2 = np.array([0.0, 1.0, 2.5, 0.0, 0.5])
    b.reweight(ids2, w2, **rows(ids2))
    truth.w[ids2] = w2
    check(b, truth, loss, Xd)

    rm, ids3, w3 = [1, 151, 400], np.array([2, 300, 537]), np.array([3.0, 0.125, 1.5])
    kw = {} if keep_data else {"X_remove": X[rm], "X_reweight": X[ids3]}
    b.update(remove_ids=rm, reweight_ids=ids3, reweight_weight=w3, **kw)
    truth.live[rm] = False
    truth.w[ids3] = w3
    check(b, truth, loss, Xd)

    # relabel and reweight in one change, sample 7 in both (its new label at its new weight)
    lab = np.array([7, 200])
    ylab = np.array([{3: 5, 5: 8, 8: 3}[v] for v in truth.y[lab]])  # another class each
    ids4, w4 = np.array([7, 60]), np.array([2.0, 0.75])
    kw = {} if keep_data else {"X_relabel": X[lab], "X_reweight": X[ids4]}
    b.update(relabel_ids=lab, y_relabel=ylab, reweight_ids=ids4, reweight_weight=w4, **kw)
    truth.y[lab] = ylab
    truth.w[ids4] = w4
    check(b, truth, loss, Xd)


@pytest.mark.parametrize("keep_data", [True, False])
def test_squared_reweights_equal_the_weighted_numpy_fit(digits3, keep_data):
    X, y = digits3
    Xd, yd = chunked(X, y, rows=ROWS)
    b = df.LinearClassifier(C=C, keep_data=keep_data).fit(Xd, yd)
    truth = Truth(X, y)
    check(b, truth, "squared", Xd)
    updates(b, truth, "squared", keep_data, Xd)


@pytest.mark.parametrize("loss", ["logistic", "squared_hinge", "hinge"])
def test_iterative_losses_reweights_equal_the_weighted_numpy_fit(digits3, loss):
    X, y = digits3
    Xd, yd = chunked(X, y, rows=ROWS)
    b = df.LinearClassifier(loss=loss, C=C).fit(Xd, yd)
    truth = Truth(X, y)
    updates(b, truth, loss, True, Xd)


@pytest.mark.slow  # ~12 s: worker processes start and import deltafit
def test_squared_reweight_on_a_process_cluster(process_client, digits3):
    X, y = digits3
    Xd, yd = chunked(X, y, rows=ROWS)
    truth = Truth(X, y)
    with process_client.as_current(), dask.config.set(scheduler=process_client.get):
        b = df.LinearClassifier(C=C).fit(Xd, yd)
        ids, w = np.array([0, 5, 150, 301, 538]), np.array([2.0, 0.5, 0.0, 3.0, 1.25])
        b.reweight(ids, w)
        truth.w[ids] = w
        check(b, truth, "squared", Xd)
        b.update(remove_ids=[1, 300], reweight_ids=[2, 5], reweight_weight=[0.25, 4.0])
        truth.live[[1, 300]] = False
        truth.w[[2, 5]] = [0.25, 4.0]
        check(b, truth, "squared", Xd)
