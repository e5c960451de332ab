"""TreeCV's parallel and distributed runs (§4.1) give the serial result."""

import numpy as np
import pytest
from sklearn.linear_model import SGDClassifier
from sklearn.model_selection import KFold
from sklearn.preprocessing import StandardScaler

import deltafit as df
from deltafit.model_selection import treecv
from deltafit.stream import LSQSGD, Pegasos


@pytest.fixture(scope="module")
def bc():
    from deltafit.datasets import load_breast_cancer

    X, y = load_breast_cancer()
    return StandardScaler().fit_transform(X), y


CASES = [
    (lambda: Pegasos(lam=1e-3), dict(cv=569), "decision"),
    (lambda: Pegasos(lam=1e-3), dict(cv=KFold(10), shuffle=True, random_state=4), "decision"),
    (lambda: LSQSGD(alpha=0.05), dict(cv=KFold(9), scoring="r2"), "decision"),
    (lambda: SGDClassifier(random_state=0), dict(cv=KFold(12), shuffle=True,
                                                  random_state=1), "fold_scores"),
    (lambda: df.LinearClassifier(loss="logistic"), dict(cv=KFold(6), strategy="revert"),
     "fold_scores"),
]


@pytest.mark.parametrize("make, kw, field", CASES)
def test_n_jobs_equals_serial(bc, make, kw, field):
    X, y = bc
    y = y.astype(float) if isinstance(make(), LSQSGD) else y
    a = treecv(make(), X, y, **kw)
    b = treecv(make(), X, y, n_jobs=2, **kw)
    np.testing.assert_array_equal(getattr(a, field), getattr(b, field))
    np.testing.assert_array_equal(a.fold_scores, b.fold_scores)
    assert a.n_sample_updates == b.n_sample_updates and a.n_updates == b.n_updates


def test_dask_local_cluster_equals_serial(bc):
    pytest.importorskip("dask")
    distributed = pytest.importorskip("distributed")
    import joblib

    X, y = bc
    a = treecv(SGDClassifier(random_state=0), X, y, cv=KFold(8), shuffle=True, random_state=2)
    b = treecv(Pegasos(lam=1e-3), X, y, cv=KFold(16))
    with distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=True,
                                  dashboard_address=None) as cluster, \
            distributed.Client(cluster) as client:
        with distributed.get_task_stream(client) as tasks, joblib.parallel_backend("dask"):
            a2 = treecv(SGDClassifier(random_state=0), X, y, cv=KFold(8), shuffle=True,
                        random_state=2, n_jobs=-1)
            b2 = treecv(Pegasos(lam=1e-3), X, y, cv=KFold(16), n_jobs=-1)
        # the expansions and subtrees really ran on the cluster's two workers
        workers = {t["worker"] for t in tasks.data}
        assert len(tasks.data) >= 8 and len(workers) == 2
    np.testing.assert_array_equal(a.fold_scores, a2.fold_scores)
    np.testing.assert_array_equal(b.decision, b2.decision)
