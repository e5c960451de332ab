"""Regressions found in review of TreeCV and the stream learners."""

import copy

import numpy as np
import pytest
import scipy.sparse as sp
from sklearn.linear_model import SGDClassifier

from deltafit.model_selection import treecv
from deltafit.stream import LSQSGD, Pegasos


def test_copy_does_not_share_pending_samples():
    m = Pegasos()
    m.learn_one([1.0, 0.0], 1)
    c = copy.copy(m)
    c.learn_one([0.0, 1.0], 0)  # c now has both labels and learns its two samples
    m.learn_one([2.0, 0.0], 1)  # m still waits for a second label
    assert c.t_ == 2 and not hasattr(m, "_state") and len(m._pending) == 2


def test_learn_one_sparse_dicts():
    m = Pegasos()
    m.learn_one({0: 1.0}, 1)
    m.learn_one({1: 2.0}, 0)  # the width is the largest key seen
    assert m.n_features_in_ == 2 and m.t_ == 2
    ref = Pegasos().partial_fit(np.array([[1.0, 0.0], [0.0, 2.0]]), [1, 0], classes=[0, 1])
    np.testing.assert_array_equal(m.coef_, ref.coef_)
    r = LSQSGD()
    r.learn_one({0: 1.0, 1: 0.0}, 1.0)
    with pytest.raises(ValueError, match="column indices"):
        r.learn_one({"x": 1.0}, 0.0)
    assert r.t_ == 1 and r.n_features_in_ == 2
    r.learn_one({0: 1.0, 2: 2.0}, 0.0)  # a larger key grows the learner (issue 19)
    assert r.n_features_in_ == 3 and r.t_ == 2


def test_scorer_needing_proba_fails_before_the_run():
    rng = np.random.default_rng(0)
    X = rng.standard_normal((60, 3))
    y = (X[:, 0] > 0).astype(int)
    with pytest.raises(ValueError, match="predict_proba"):
        treecv(Pegasos(lam=0.1), X, y, cv=5, scoring="neg_log_loss")
    with pytest.raises(ValueError, match="invalid scoring 'nope'"):
        treecv(SGDClassifier(), X, y, scoring="nope")
    assert 0.9 < treecv(Pegasos(lam=0.1), X, y, cv=5, scoring="roc_auc").score <= 1.0


def test_river_learner_sparse_rows():
    pytest.importorskip("river")
    from river.naive_bayes import GaussianNB

    rng = np.random.default_rng(1)
    X = rng.standard_normal((80, 4))
    y = (X[:, 0] > 0).astype(int)
    dense = treecv(GaussianNB(), X, y, cv=4)
    sparse = treecv(GaussianNB(), sp.csr_matrix(X), y, cv=4)
    np.testing.assert_array_equal(dense.fold_scores, sparse.fold_scores)
    assert dense.score > 0.8


def test_parameter_edges():
    with pytest.raises(ValueError, match="random_state"):
        Pegasos(shuffle=True, random_state=np.random.default_rng(0)).fit(np.eye(3), [0, 1, 1])
    with pytest.raises(ValueError, match="'lam' parameter.*1e-100"):
        Pegasos(lam=1e-310).fit(np.eye(3), [0, 1, 1])
    pd = pytest.importorskip("pandas")
    p = Pegasos()
    with pytest.raises(ValueError):
        p.partial_fit(pd.DataFrame({"a": [1.0], "b": [2.0]}), [1])
    assert not hasattr(p, "feature_names_in_") and not hasattr(p, "n_features_in_")
