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
    (
        lambda: SGDClassifier(random_state=0),
        dict(cv=KFold(12), shuffle=True, random_state=1),
        "fold_scores",
    ),
    (
        lambda: df.LinearClassifier(loss="logistic"),
        dict(cv=KFold(6), strategy="revert"),
        "fold_scores",
    ),
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


@pytest.mark.slow  # a process LocalCluster; test_ind_dask_threads_cluster_equals_serial daily
def test_dask_local_cluster_equals_serial(bc):
    pytest.importorskip("dask")
    distributed = pytest.importorskip("distributed")
    import joblib

    X, y = bc
    a = treecv(SGDClassifier(random_state=0), X, y, cv=KFold(8), shuffle=True, random_state=2)
    b = treecv(Pegasos(lam=1e-3), X, y, cv=KFold(16))
    with (
        distributed.LocalCluster(
            n_workers=2, threads_per_worker=1, processes=True, dashboard_address=None
        ) as cluster,
        distributed.Client(cluster) as client,
    ):
        with distributed.get_task_stream(client) as tasks, joblib.parallel_backend("dask"):
            a2 = treecv(
                SGDClassifier(random_state=0),
                X,
                y,
                cv=KFold(8),
                shuffle=True,
                random_state=2,
                n_jobs=-1,
            )
            b2 = treecv(Pegasos(lam=1e-3), X, y, cv=KFold(16), n_jobs=-1)
        # the expansions and subtrees really ran on the cluster's two workers
        workers = {t["worker"] for t in tasks.data}
        assert len(tasks.data) >= 8 and len(workers) == 2
    np.testing.assert_array_equal(a.fold_scores, a2.fold_scores)
    np.testing.assert_array_equal(b.decision, b2.decision)


# ===========================================================================
# Independent suite: n_jobs / joblib backends give exactly the serial result, checked on the
# built-in learners, scikit-learn and deltafit learners and on an id-recording learner whose
# fold "scores" are digests of the exact training sequence each fold model saw.
# ===========================================================================
from sklearn.model_selection import StratifiedKFold  # noqa: E402
from sklearn.naive_bayes import MultinomialNB  # noqa: E402

from treecv_reference import HistoryRecorder, HistoryScorer, folds_of  # noqa: E402


def _ids(X):
    return np.column_stack([np.arange(X.shape[0], dtype=np.float64), X])


def _same(a, b):
    np.testing.assert_array_equal(a.fold_scores, b.fold_scores)
    np.testing.assert_array_equal(a.fold_sizes, b.fold_sizes)
    for field in ("decision", "y_pred"):
        va, vb = getattr(a, field), getattr(b, field)
        assert (va is None) == (vb is None)
        if va is not None:
            np.testing.assert_array_equal(va, vb)
    assert (a.n_sample_updates, a.n_updates, a.n_folds) == (
        b.n_sample_updates,
        b.n_updates,
        b.n_folds,
    )
    assert a.score == b.score or (np.isnan(a.score) and np.isnan(b.score))


IND_CASES = [
    ("pegasos-loo", lambda: Pegasos(lam=1e-2, projection=True), dict(cv=200), "bc200"),
    (
        "pegasos-13-shuffle-revert",
        lambda: Pegasos(lam=1e-3),
        dict(
            cv=KFold(13, shuffle=True, random_state=0),
            shuffle=True,
            random_state=9,
            strategy="revert",
        ),
        "bc",
    ),
    ("pegasos-5", lambda: Pegasos(lam=1e-2), dict(cv=5, n_jobs=3), "bc"),
    (
        "lsqsgd-7-shuffle",
        lambda: LSQSGD(),
        dict(cv=KFold(7), shuffle=True, random_state=1, scoring="neg_mean_squared_error"),
        "bcf",
    ),
    ("sgd-10", lambda: SGDClassifier(random_state=3, shuffle=False), dict(cv=10), "bc"),
    (
        "sgd-6-shuffle",
        lambda: SGDClassifier(random_state=3),
        dict(
            cv=StratifiedKFold(6, shuffle=True, random_state=2),
            shuffle=True,
            random_state=4,
            scoring="roc_auc",
        ),
        "bc",
    ),
    (
        "linear-squared-9-copy",
        lambda: df.LinearClassifier(loss="squared", C=0.3),
        dict(cv=KFold(9)),
        "bc",
    ),
    (
        "linear-logistic-5-copy",
        lambda: df.LinearClassifier(loss="logistic", tol=1e-12),
        dict(cv=KFold(5, shuffle=True, random_state=1), scoring="neg_log_loss"),
        "bc",
    ),
    ("mnb-8", lambda: MultinomialNB(), dict(cv=8, n_jobs=-1), "bcpos"),
    ("mnb-loo", lambda: MultinomialNB(), dict(cv=120, n_jobs=-1), "bcpos120"),
    (
        "kernel-7",
        lambda: df.KernelClassifier(loss="squared", gamma=0.05),
        dict(cv=KFold(7)),
        "bc200",
    ),
    ("sgd-3-small-k", lambda: SGDClassifier(random_state=0), dict(cv=3), "bc"),
    ("river-mnb-6", "river", dict(cv=6), "bcpos120"),
]


@pytest.mark.parametrize("name, make, kw, data", IND_CASES, ids=[c[0] for c in IND_CASES])
def test_ind_n_jobs_equals_serial(bc, name, make, kw, data):
    X, y = bc
    if make == "river":
        pytest.importorskip("river")
        from river.naive_bayes import MultinomialNB as RiverMNB

        make = RiverMNB
    if data == "bc200":
        X, y = X[:200], y[:200]
    elif data == "bcpos120":
        X, y = X[:120] - X.min(), y[:120]
    elif data == "bcf":
        y = y.astype(float)
    elif data == "bcpos":
        X = X - X.min()
    kw = dict(kw)
    n_jobs = kw.pop("n_jobs", 2)
    serial = treecv(make(), X, y, **kw)
    par = treecv(make(), X, y, n_jobs=n_jobs, **kw)
    _same(serial, par)
    assert par.n_jobs == n_jobs


@pytest.mark.parametrize("k", [2, 3, 4, 6, 11])
@pytest.mark.parametrize("shuffle", [False, True])
def test_ind_n_jobs_exact_training_sequences(bc, k, shuffle):
    """Every fold model of a parallel run learned exactly the serial sequence of samples (the
    recorder's fold scores are order-exact digests of it), also in a randomized run."""
    X, y = bc
    X, y = _ids(X[:97]), y[:97].astype(float)
    cv = KFold(k, shuffle=True, random_state=k)
    folds = folds_of(cv, X)
    for strategy in ("copy", "revert"):
        kw = dict(
            cv=cv,
            strategy=strategy,
            shuffle=shuffle,
            random_state=5,
            scoring=HistoryScorer(folds, "sequence"),
        )
        serial = treecv(HistoryRecorder(), X, y, **kw)
        par = treecv(HistoryRecorder(), X, y, n_jobs=2, **kw)
        _same(serial, par)
        if not shuffle:
            np.testing.assert_array_equal(
                par.fold_scores, HistoryScorer(folds, "sequence").expected_scores()
            )


def test_ind_dask_threads_cluster_equals_serial(bc):
    pytest.importorskip("dask")
    distributed = pytest.importorskip("distributed")
    import joblib

    X, y = bc
    Xi, yf = _ids(X[:150]), y[:150].astype(float)
    cv = KFold(10, shuffle=True, random_state=0)
    rec_kw = dict(
        cv=cv, shuffle=True, random_state=2, scoring=HistoryScorer(folds_of(cv, Xi), "sequence")
    )
    runs = [
        (lambda: Pegasos(lam=1e-3), X, y, dict(cv=KFold(16), shuffle=True, random_state=3)),
        (lambda: SGDClassifier(random_state=0), X, y, dict(cv=7)),
        (lambda: df.LinearClassifier(loss="squared"), X, y, dict(cv=6, strategy="revert")),
        (lambda: HistoryRecorder(), Xi, yf, rec_kw),
    ]
    serial = [treecv(make(), A, b, **kw) for make, A, b, kw in runs]
    with (
        distributed.LocalCluster(
            n_workers=2, threads_per_worker=1, processes=False, dashboard_address=None
        ) as cluster,
        distributed.Client(cluster) as client,
    ):
        with distributed.get_task_stream(client) as tasks, joblib.parallel_backend("dask"):
            dist = [treecv(make(), A, b, n_jobs=-1, **kw) for make, A, b, kw in runs]
        assert len(tasks.data) > 0  # the work went through the cluster
    for a, b in zip(serial, dist):
        _same(a, b)


def _exact_revert_runs(bc):
    X, y = bc
    kw = dict(
        cv=KFold(5, shuffle=True, random_state=1),
        strategy="revert",
        scoring=lambda est, Xf, yf: float(np.mean(est.decision_function(Xf))),
    )
    make = lambda: df.LinearClassifier(loss="squared", tol=1e-12)  # noqa: E731
    return treecv(make(), X, y, **kw), treecv(make(), X, y, n_jobs=2, **kw)


def test_ind_n_jobs_exact_estimator_revert_equals_serial_to_rounding(bc):
    serial, par = _exact_revert_runs(bc)
    np.testing.assert_allclose(par.fold_scores, serial.fold_scores, rtol=0, atol=1e-12)
