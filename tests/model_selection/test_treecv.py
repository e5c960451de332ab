"""TreeCV (Joulani et al. 2015, "Fast cross-validation for incremental learning") against its
brute-force twins on real data."""

import math
import weakref

import numpy as np
import pytest
from sklearn.base import BaseEstimator, ClassifierMixin
from sklearn.linear_model import SGDClassifier
from sklearn.metrics import get_scorer
from sklearn.model_selection import GroupKFold, KFold, LeaveOneOut, ShuffleSplit, StratifiedKFold
from sklearn.naive_bayes import GaussianNB, MultinomialNB
from sklearn.preprocessing import StandardScaler

import deltafit as df
from deltafit.model_selection import TreeCVResult, treecv
from deltafit.stream import LSQSGD, Pegasos
from hypothesis_profiles import examples
from treecv_reference import recursive_treecv, split_folds, standard_kfold


@pytest.fixture(scope="module")
def bc():
    from deltafit.datasets import load_breast_cancer

    X, y = load_breast_cancer()
    return StandardScaler().fit_transform(X), y


@pytest.fixture(scope="module")
def dg():
    from sklearn.datasets import load_digits

    X, y = load_digits(return_X_y=True)
    return X, y


# ---------------------------------------------------------------------------
# exact learners: TreeCV == k refits (Lee et al. + Joulani et al.)
# ---------------------------------------------------------------------------
EXACT = [
    (lambda: df.LinearRegressor(C=1.0), "neg_mean_squared_error", True),
    (lambda: df.LinearClassifier(loss="squared", C=0.5), "accuracy", False),
    (lambda: df.LinearClassifier(loss="logistic", C=1.0, tol=1e-12), "neg_log_loss", False),
    (
        lambda: df.KernelClassifier(loss="squared", kernel="rbf", gamma=0.02, C=1.0),
        "accuracy",
        False,
    ),
]


@pytest.mark.parametrize("make, scoring, regression", EXACT)
@pytest.mark.parametrize("strategy", ["copy", "revert"])
@pytest.mark.parametrize("k", [2, 5, 7])
def test_exact_learners_equal_k_refits(bc, make, scoring, regression, strategy, k):
    X, y = bc
    X, y = X[:240], y[:240]
    if regression:
        y = y.astype(float) + 0.1 * X[:, 0]
    cv = KFold(k, shuffle=True, random_state=k)
    r = treecv(make(), X, y, cv=cv, scoring=scoring, strategy=strategy)
    folds = split_folds(cv, X, y)
    ref = standard_kfold(make(), X, y, folds, get_scorer(scoring), fit=True)
    np.testing.assert_allclose(r.fold_scores, ref, rtol=1e-8, atol=1e-8)
    assert r.n_folds == k and r.fold_sizes.tolist() == [len(f) for f in folds]
    # out-of-fold predictions (kept for scorers computed from predictions) are the refits'
    assert (r.y_pred is None) == (scoring == "neg_log_loss")
    if r.y_pred is None:
        return
    for i, test in enumerate(folds):
        train = np.concatenate([f for j, f in enumerate(folds) if j != i])
        m = make().fit(X[train], y[train])
        if regression:
            np.testing.assert_allclose(r.y_pred[test], m.predict(X[test]), rtol=1e-8, atol=1e-8)
        else:
            assert np.array_equal(r.y_pred[test], m.predict(X[test]))


def test_exact_learner_leave_one_out_equals_closed_form(bc):
    X, y = bc
    X, y = X[:60], y[:60].astype(float)
    r = treecv(
        df.LinearRegressor(C=2.0), X, y, cv=60, scoring="neg_mean_squared_error", strategy="revert"
    )
    ref = [
        (
            df.LinearRegressor(C=2.0)
            .fit(np.delete(X, i, 0), np.delete(y, i))
            .predict(X[i : i + 1])[0]
            - y[i]
        )
        ** 2
        for i in range(60)
    ]
    np.testing.assert_allclose(-r.fold_scores, ref, rtol=1e-8, atol=1e-10)


def test_exact_classifier_waits_for_both_classes():
    # sorted labels: the first training phases see one class only
    rng = np.random.default_rng(0)
    X = rng.standard_normal((40, 3))
    y = np.r_[np.zeros(20, int), np.ones(20, int)]
    X[y == 1] += 1.0
    r = treecv(df.LinearClassifier(loss="squared"), X, y, cv=KFold(8))
    folds = split_folds(KFold(8), X, y)
    ref = standard_kfold(
        df.LinearClassifier(loss="squared"), X, y, folds, get_scorer("accuracy"), fit=True
    )
    np.testing.assert_allclose(r.fold_scores, ref)


# ---------------------------------------------------------------------------
# order-insensitive partial_fit learners: TreeCV == naive k-fold
# ---------------------------------------------------------------------------
@pytest.mark.parametrize("strategy", ["copy"])
def test_multinomial_nb_equals_naive_kfold(dg, strategy):
    X, y = dg
    cv = StratifiedKFold(10, shuffle=True, random_state=0)
    r = treecv(MultinomialNB(), X, y, cv=cv, strategy=strategy)
    folds = split_folds(cv, X, y)
    ref = standard_kfold(MultinomialNB(), X, y, folds, get_scorer("accuracy"), classes=np.unique(y))
    np.testing.assert_array_equal(r.fold_scores, ref)
    assert r.score == pytest.approx(ref.mean(), abs=0)


def test_gaussian_nb_equals_naive_kfold(bc):
    X, y = bc
    cv = KFold(7)
    r = treecv(GaussianNB(), X, y, cv=cv, scoring="neg_log_loss")
    ref = standard_kfold(
        GaussianNB(), X, y, split_folds(cv, X, y), get_scorer("neg_log_loss"), classes=np.unique(y)
    )
    # GaussianNB is order-insensitive up to rounding of its running variances and its
    # var_smoothing, which partial_fit takes from the first batch it sees (another one here)
    np.testing.assert_allclose(r.fold_scores, ref, rtol=1e-7)


def test_river_multinomial_nb_equals_naive_kfold(dg):
    river = pytest.importorskip("river")
    from river.naive_bayes import MultinomialNB as RiverMNB

    X, y = dg
    X, y = X[:300], y[:300]
    cv = KFold(5)
    r = treecv(RiverMNB(), X, y, cv=cv)
    accs = []
    for i, test in enumerate(split_folds(cv, X, y)):
        m = RiverMNB()
        train = np.concatenate([f for j, f in enumerate(split_folds(cv, X, y)) if j != i])
        for t in train:
            m.learn_one(dict(enumerate(X[t].tolist())), y[t].item())
        pred = [m.predict_one(dict(enumerate(X[t].tolist()))) for t in test]
        accs.append(np.mean(np.asarray(pred) == y[test]))
    np.testing.assert_allclose(r.fold_scores, accs)
    assert river is not None


# ---------------------------------------------------------------------------
# the built-in learners: the compiled recursion is Algorithm 1
# ---------------------------------------------------------------------------
@pytest.mark.parametrize("strategy", ["copy", "revert"])
@pytest.mark.parametrize("cv", [LeaveOneOut(), KFold(6, shuffle=True, random_state=1), 13])
def test_compiled_recursion_equals_paper_recursion(bc, strategy, cv):
    X, y = bc
    X, y = X[:150], y[:150]
    learner = Pegasos(lam=1e-2, projection=True)
    r = treecv(learner, X, y, cv=cv, strategy=strategy)
    if isinstance(cv, int):
        cv = StratifiedKFold(cv)
    folds = split_folds(cv, X, y)
    ref = recursive_treecv(learner, X, y, folds, classes=np.unique(y))
    np.testing.assert_allclose(r.decision, ref, rtol=1e-10, atol=1e-10)
    assert np.array_equal(r.y_pred, np.where(ref > 0, 1, 0))
    acc = [np.mean(r.y_pred[f] == y[f]) for f in folds]
    np.testing.assert_allclose(r.fold_scores, acc)


def test_lsqsgd_recursion_and_scores(bc):
    X, y = bc
    X, y = X[:128], y[:128].astype(float)
    learner = LSQSGD(alpha=0.05)
    folds = split_folds(KFold(16), X, y)
    r = treecv(learner, X, y, cv=KFold(16), scoring="neg_mean_squared_error")
    ref = recursive_treecv(learner, X, y, folds)
    np.testing.assert_allclose(r.decision, ref, rtol=1e-10, atol=1e-12)
    mse = [np.mean((ref[f] - y[f]) ** 2) for f in folds]
    np.testing.assert_allclose(-r.fold_scores, mse, rtol=1e-10)
    # 16 equal folds: every sample is learned once per level below the root, log2(16) = 4
    assert r.n_sample_updates == 128 * 4
    # scorer outside the fast path (replayed predictions) agrees with the fast path
    r2 = treecv(learner, X, y, cv=KFold(16), scoring="neg_max_error")
    assert np.all(r2.fold_scores <= 0)
    np.testing.assert_allclose(-r2.fold_scores, [np.max(np.abs(ref[f] - y[f])) for f in folds])


def test_shuffle_is_reproducible_and_random(bc):
    X, y = bc
    a = treecv(Pegasos(lam=1e-3), X, y, cv=20, shuffle=True, random_state=0)
    b = treecv(Pegasos(lam=1e-3), X, y, cv=20, shuffle=True, random_state=0)
    c = treecv(Pegasos(lam=1e-3), X, y, cv=20, shuffle=True, random_state=1)
    d = treecv(Pegasos(lam=1e-3), X, y, cv=20)
    assert np.array_equal(a.decision, b.decision)
    assert not np.array_equal(a.decision, c.decision)
    assert not np.array_equal(a.decision, d.decision)
    assert a.n_sample_updates == d.n_sample_updates


def test_generic_learners_shuffle_same_permutations_as_compiled(bc):
    # the generic engine and the compiled loop draw the same random order per training phase:
    # a partial_fit wrapper around Pegasos must give the compiled result
    X, y = bc
    X, y = X[:100], y[:100]

    class Wrapped(ClassifierMixin, BaseEstimator):
        def __init__(self, lam=1e-2):
            self.lam = lam

        def partial_fit(self, X, y, classes=None):
            if not hasattr(self, "p_"):
                self.p_ = Pegasos(lam=self.lam)
            self.p_.partial_fit(X, y, classes=classes)
            self.classes_ = self.p_.classes_
            return self

        def fit(self, X, y):
            return self.partial_fit(X, y)

        def predict(self, X):
            return self.p_.predict(X)

        def decision_function(self, X):
            return self.p_.decision_function(X)

    kw = dict(
        cv=KFold(10, shuffle=True, random_state=3), shuffle=True, random_state=5, scoring="roc_auc"
    )
    a = treecv(Pegasos(lam=1e-2), X, y, **kw)
    b = treecv(Wrapped(lam=1e-2), X, y, **kw)
    np.testing.assert_allclose(a.fold_scores, b.fold_scores, rtol=1e-12)


# ---------------------------------------------------------------------------
# SGD-type learners: close to naive k-fold (Theorem 1), statistically
# ---------------------------------------------------------------------------
@pytest.mark.parametrize(
    "make", [lambda: Pegasos(lam=1e-3), lambda: SGDClassifier(random_state=0, shuffle=False)]
)
def test_sgd_learners_close_to_standard_kfold(digits, make):
    X, y = digits
    X = StandardScaler().fit_transform(X)
    diffs, ests = [], []
    for rep in range(8):
        cv = KFold(10, shuffle=True, random_state=rep)
        r = treecv(make(), X, y, cv=cv)
        ref = standard_kfold(
            make(), X, y, split_folds(cv, X, y), get_scorer("accuracy"), classes=np.unique(y)
        )
        diffs.append(r.score - ref.mean())
        ests.append(ref.mean())
    diffs = np.asarray(diffs)
    # paired differences: no systematic bias beyond 4 standard errors (+ one misclassified
    # sample of slack, 1/1797, for the discreteness of accuracy)
    assert abs(diffs.mean()) <= 4 * diffs.std(ddof=1) / np.sqrt(len(diffs)) + 1 / 1797
    # and each TreeCV estimate is within 3 points of the standard one (g(n - b, b) of Thm 1)
    assert np.max(np.abs(diffs)) < 0.03
    assert 0.8 < np.mean(ests) < 1.0


@pytest.mark.parametrize("shuffle", [False, True])
def test_lsqsgd_close_to_standard_kfold(shuffle):
    from sklearn.datasets import load_digits

    X, y = load_digits(return_X_y=True)
    X, y = X / 64.0, y / 9.0  # rows of norm <= 2 and targets in [0, 1], as the paper's
    n = X.shape[0]
    diffs, ests = [], []
    for rep in range(8):
        cv = KFold(5, shuffle=True, random_state=rep)
        learner = LSQSGD(alpha=1 / np.sqrt(n))  # the paper's step size
        r = treecv(
            learner,
            X,
            y,
            cv=cv,
            scoring="neg_mean_squared_error",
            shuffle=shuffle,
            random_state=rep,
        )
        ref = standard_kfold(
            learner, X, y, split_folds(cv, X, y), get_scorer("neg_mean_squared_error")
        )
        diffs.append(r.score - ref.mean())
        ests.append(ref.mean())
    diffs = np.asarray(diffs)
    # measured: |mean| 5e-5 / 2e-4 at standard errors 6e-5 / 8e-5, max 5e-4 (0.6% of the MSE)
    assert abs(diffs.mean()) <= 4 * diffs.std(ddof=1) / np.sqrt(len(diffs)) + 1e-4
    assert np.max(np.abs(diffs)) < 0.02 * abs(np.mean(ests))


# ---------------------------------------------------------------------------
# memory: O(log k) live models (§4.1)
# ---------------------------------------------------------------------------
class Counting(ClassifierMixin, BaseEstimator):
    """A nearest-mean classifier that counts its live instances."""

    live = weakref.WeakSet()
    peak = 0

    def __init__(self):
        pass

    def _track(self):
        Counting.live.add(self)
        Counting.peak = max(Counting.peak, len(Counting.live))

    def partial_fit(self, X, y, classes=None):
        self._track()
        if not hasattr(self, "sums_"):
            self.classes_ = np.asarray(classes)
            self.sums_ = np.zeros((2, X.shape[1]))
            self.counts_ = np.zeros(2)
        for j, c in enumerate(self.classes_):
            self.sums_[j] += X[y == c].sum(0)
            self.counts_[j] += np.sum(y == c)
        return self

    def fit(self, X, y):
        return self.partial_fit(X, y, np.unique(y))

    def predict(self, X):
        self._track()
        means = self.sums_ / np.maximum(self.counts_, 1)[:, None]
        d = ((X[:, None, :] - means[None]) ** 2).sum(-1)
        return self.classes_[np.argmin(d, 1)]

    def snapshot(self):
        self._track()
        return self.sums_.copy(), self.counts_.copy()

    def restore(self, s):
        self.sums_[:], self.counts_[:] = s[0], s[1]


@pytest.mark.parametrize("strategy", ["copy", "revert"])
def test_serial_memory_is_logarithmic(bc, strategy):
    X, y = bc
    X, y = X[:200], y[:200]
    Counting.live = weakref.WeakSet()
    Counting.peak = 0
    r = treecv(Counting(), X, y, cv=LeaveOneOut(), strategy=strategy)
    bound = math.ceil(math.log2(200)) + 2
    assert Counting.peak <= bound + 1  # + the scoring view's reference
    assert r.peak_models <= bound
    if strategy == "revert":
        assert Counting.peak <= 3  # one working model (+ the template clone)
    # nearest means are order-insensitive: exactly the naive LOO
    ref = standard_kfold(
        Counting(),
        X,
        y,
        split_folds(LeaveOneOut(), X, y),
        get_scorer("accuracy"),
        classes=np.unique(y),
    )
    np.testing.assert_array_equal(r.fold_scores, ref)


def test_compiled_peak_models(bc):
    X, y = bc
    for k in (2, 7, 64, X.shape[0]):
        r = treecv(Pegasos(), X, y, cv=KFold(k) if k < X.shape[0] else k)
        assert r.peak_models <= math.ceil(math.log2(k)) + 2


# ---------------------------------------------------------------------------
# splitters
# ---------------------------------------------------------------------------
def test_leave_one_out_is_not_enumerated(bc, monkeypatch):
    X, y = bc

    def boom(*a, **k):
        raise AssertionError("enumerated")

    monkeypatch.setattr(LeaveOneOut, "split", boom)
    monkeypatch.setattr(LeaveOneOut, "_iter_test_masks", boom)
    monkeypatch.setattr(LeaveOneOut, "_iter_test_indices", boom)
    a = treecv(Pegasos(), X, y, cv=LeaveOneOut())
    b = treecv(Pegasos(), X, y, cv=X.shape[0])
    assert a.n_folds == X.shape[0] and np.array_equal(a.fold_scores, b.fold_scores)
    assert set(np.unique(a.fold_scores)) <= {0.0, 1.0}


def test_fold_order_and_groups(bc):
    X, y = bc
    groups = np.arange(X.shape[0]) % 9
    cv = GroupKFold(3)
    r = treecv(GaussianNB(), X, y, cv=cv, groups=groups)
    folds = [t for _, t in cv.split(X, y, groups)]
    assert r.fold_sizes.tolist() == [len(f) for f in folds]
    ref = standard_kfold(GaussianNB(), X, y, folds, get_scorer("accuracy"), classes=[0, 1])
    np.testing.assert_allclose(r.fold_scores, ref, rtol=1e-12)


def test_uneven_folds(bc):
    X, y = bc
    r = treecv(Pegasos(), X[:103], y[:103], cv=KFold(10))
    assert r.fold_sizes.tolist() == [11, 11, 11] + [10] * 7


@pytest.mark.parametrize(
    "cv, message",
    [
        (ShuffleSplit(3, random_state=0), "do not partition"),
        (1, "between 2"),
        (10_000, "between 2"),
    ],
)
def test_bad_splitters(bc, cv, message):
    X, y = bc
    with pytest.raises(ValueError, match=message):
        treecv(Pegasos(), X, y, cv=cv)


# ---------------------------------------------------------------------------
# bad input
# ---------------------------------------------------------------------------
def test_bad_input(bc):
    X, y = bc
    Xn = X.copy()
    Xn[3, 2] = np.nan
    with pytest.raises(ValueError, match="NaN"):
        treecv(Pegasos(), Xn, y)
    with pytest.raises(ValueError, match="NaN"):
        treecv(SGDClassifier(), Xn, y)
    with pytest.raises(ValueError, match="samples"):
        treecv(Pegasos(), X, y[:-1])
    with pytest.raises(ValueError, match="single class"):
        treecv(Pegasos(), X, np.zeros(X.shape[0]))
    with pytest.raises(ValueError, match="strategy"):
        treecv(Pegasos(), X, y, strategy="undo")
    with pytest.raises(ValueError, match="scoring"):
        treecv(SGDClassifier(), X, y, scoring="acuracy")
    with pytest.raises(ValueError, match="lam"):
        treecv(Pegasos(lam=-1.0), X, y)
    with pytest.raises(ValueError, match="snapshot"):
        treecv(SGDClassifier(), X, y, strategy="revert")
    with pytest.raises(ValueError, match="incremental"):
        treecv(object(), X, y)
    with pytest.raises(ValueError, match="dense"):
        import scipy.sparse as sp

        treecv(Pegasos(), sp.csr_matrix(X), y)
    with pytest.raises(ValueError, match="n_jobs"):
        treecv(Pegasos(), X, y, n_jobs=0)
    with pytest.raises(ValueError, match="binary"):
        treecv(Pegasos(), X, np.arange(X.shape[0]) % 3)


def test_template_not_modified_and_result(bc):
    X, y = bc
    p = Pegasos(lam=1e-3)
    r = treecv(p, X, y, cv=5)
    assert not hasattr(p, "_state")
    assert isinstance(r, TreeCVResult)
    assert "5-fold" in r.summary() and "accuracy" in r.summary()
    assert r.decision.shape == y.shape == r.y_pred.shape


def test_string_labels_and_regression_predictions(bc):
    X, y = bc
    labels = np.where(y == 1, "benign", "malignant")
    r = treecv(GaussianNB(), X, labels, cv=KFold(5))
    ref = standard_kfold(
        GaussianNB(),
        X,
        labels,
        split_folds(KFold(5), X, labels),
        get_scorer("accuracy"),
        classes=np.unique(labels),
    )
    np.testing.assert_allclose(r.fold_scores, ref)
    assert set(r.y_pred) <= {"benign", "malignant"}
    # integer regression targets: predictions stay real numbers
    from sklearn.linear_model import SGDRegressor

    r = treecv(
        SGDRegressor(random_state=0), X, 3 * y, cv=KFold(5), scoring="neg_mean_squared_error"
    )
    assert r.y_pred.dtype == np.float64 and not np.all(r.y_pred == np.round(r.y_pred))


# ===========================================================================
# Independent suite (written from the spec and the paper, against brute-force twins of
# treecv_reference.py: naive k-fold, a literal Algorithm 1, plain-Python Pegasos/LSQSGD, an
# id-recording learner).  Everything below can fail on its own.
# ===========================================================================
import copy as _copy  # noqa: E402

from sklearn.base import RegressorMixin, clone  # noqa: E402
from sklearn.model_selection import PredefinedSplit, RepeatedKFold, TimeSeriesSplit  # noqa: E402

from treecv_reference import (  # noqa: E402
    HistoryRecorder,
    HistoryScorer,
    PlainLSQSGD,  # noqa: E402
    PlainPegasos,
    algorithm1_decisions,
    folds_of,
    naive_kfold,
    plain_naive_decisions,
    plain_treecv_decisions,
    tree_update_counts,
)


def _with_ids(X):
    """X with a leading id column (0..n-1), for :class:`HistoryRecorder`."""
    return np.column_stack([np.arange(X.shape[0], dtype=np.float64), X])


@pytest.fixture(scope="module")
def bc_std(breast_cancer):
    X, y = breast_cancer
    return StandardScaler().fit_transform(X), y


@pytest.fixture(scope="module")
def digits_counts():
    from sklearn.datasets import load_digits

    return load_digits(return_X_y=True)  # integer pixel counts 0..16, ten classes


class DecisionRecorder:
    """A callable scorer that keeps what the live fold model outputs on the fold, by fold rows,
    and returns accuracy (classifiers) or the negative MSE (regressors)."""

    def __init__(self, method):
        self.method = method
        self.values = {}

    def __call__(self, est, X, y):
        v = np.asarray(getattr(est, self.method)(X), dtype=np.float64)
        self.values[np.ascontiguousarray(X).tobytes()] = v
        if self.method == "predict":
            return -float(np.mean((v - y) ** 2))
        return float(np.mean(est.predict(X) == y))

    def of(self, X_fold):
        return self.values[np.ascontiguousarray(X_fold).tobytes()]


# ---------------------------------------------------------------------------
# 1. exact estimators: TreeCV == k refits (fold scores and the fold models' outputs)
# ---------------------------------------------------------------------------
def _exact_cases():
    return {
        "ridge": (lambda: df.LinearRegressor(loss="squared", C=1.0), "predict", "r2"),
        "lin-squared": (
            lambda: df.LinearClassifier(loss="squared", C=0.5),
            "decision_function",
            "accuracy",
        ),
        "lin-logistic": (
            lambda: df.LinearClassifier(loss="logistic", C=1.0, tol=1e-12),
            "decision_function",
            "neg_log_loss",
        ),
        "kernel-rbf": (
            lambda: df.KernelClassifier(loss="squared", kernel="rbf", gamma=0.5, C=1.0),
            "decision_function",
            "accuracy",
        ),
    }


def _exact_data(name, breast_cancer, digits):
    if name == "kernel-rbf":
        X, y = digits
        return X[:160], y[:160]
    X, y = breast_cancer
    X, y = X[:140], y[:140]
    if name == "ridge":
        y = 2.0 * y + X[:, 0] - 0.5 * X[:, 3]
    return X, y


def _check_against_refits(make, method, scoring, X, y, cv, strategy):
    folds = folds_of(cv, X, y)
    rec = DecisionRecorder(method)
    r = treecv(make(), X, y, cv=cv, scoring=rec, strategy=strategy)
    # k refits from scratch: the fold models' outputs on their folds agree to 1e-8
    for i, test in enumerate(folds):
        train = np.concatenate([f for j, f in enumerate(folds) if j != i])
        ref = getattr(make().fit(X[train], y[train]), method)(X[test])
        scale = max(1.0, np.max(np.abs(ref)))
        np.testing.assert_allclose(rec.of(X[test]), ref, rtol=0, atol=1e-8 * scale)
    # the named scorer: fold scores of the naive k-fold (fit on the first folds, then add)
    r2 = treecv(make(), X, y, cv=cv, scoring=scoring, strategy=strategy)
    ref_scores = naive_kfold(make(), X, y, folds, get_scorer(scoring))
    np.testing.assert_allclose(r2.fold_scores, ref_scores, rtol=1e-8, atol=1e-8)
    assert r2.score == pytest.approx(np.mean(ref_scores), rel=1e-8, abs=1e-8)
    np.testing.assert_array_equal(r2.fold_sizes, [len(f) for f in folds])
    assert r.n_folds == r2.n_folds == len(folds)
    return r, r2


@pytest.mark.parametrize("name", list(_exact_cases()))
@pytest.mark.parametrize("strategy", ["copy", "revert"])
@pytest.mark.parametrize("k", [2, 3, 5, 7])
def test_ind_exact_estimators_equal_k_refits(breast_cancer, digits, name, strategy, k):
    make, method, scoring = _exact_cases()[name]
    X, y = _exact_data(name, breast_cancer, digits)
    # 7 folds of 140 / 160 rows are uneven (20 / 23, 22); shuffled, so classes are mixed
    cv = KFold(k, shuffle=True, random_state=10 + k)
    _check_against_refits(make, method, scoring, X, y, cv, strategy)


@pytest.mark.parametrize("strategy", ["copy", "revert"])
@pytest.mark.parametrize("name", ["ridge", "lin-squared"])
def test_ind_exact_estimators_leave_one_out_cv_equals_n(breast_cancer, digits, name, strategy):
    make, method, _ = _exact_cases()[name]
    X, y = _exact_data(name, breast_cancer, digits)
    X, y = X[:26], y[:26]
    rec = DecisionRecorder(method)
    # cv=n means leave-one-out, also for a classifier (StratifiedKFold(26) would be invalid)
    r = treecv(make(), X, y, cv=26, scoring=rec, strategy=strategy)
    assert r.n_folds == 26 and r.fold_sizes.tolist() == [1] * 26
    for i in range(26):
        keep = np.arange(26) != i
        ref = getattr(make().fit(X[keep], y[keep]), method)(X[i : i + 1])
        np.testing.assert_allclose(
            rec.of(X[i : i + 1]), ref, rtol=0, atol=1e-8 * max(1.0, abs(ref[0]))
        )


def test_ind_exact_classifier_default_cv_is_stratified(breast_cancer):
    # cv=int for a classifier: StratifiedKFold(k) without shuffling (check_cv's rule)
    X, y = breast_cancer
    X, y = X[:120], y[:120]
    make = lambda: df.LinearClassifier(loss="squared", C=0.5)  # noqa: E731
    r = treecv(make(), X, y, cv=4)
    folds = folds_of(StratifiedKFold(4), X, y)
    np.testing.assert_array_equal(r.fold_sizes, [len(f) for f in folds])
    np.testing.assert_allclose(
        r.fold_scores, naive_kfold(make(), X, y, folds, get_scorer("accuracy")), rtol=0, atol=1e-12
    )


def test_ind_exact_template_untouched(breast_cancer):
    X, y = breast_cancer
    est = df.LinearClassifier(loss="squared", C=0.5)
    params = est.get_params()
    treecv(est, X[:100], y[:100], cv=5, strategy="revert")
    assert est.get_params() == params
    assert not hasattr(est, "sample_ids_") or not hasattr(est, "coef_")
    with pytest.raises(Exception):
        est.predict(X[:2])


# ---------------------------------------------------------------------------
# 2. order-insensitive partial_fit learners: exactly the naive k-fold
# ---------------------------------------------------------------------------
@pytest.mark.parametrize("strategy", ["copy"])
@pytest.mark.parametrize("cv", [StratifiedKFold(7, shuffle=True, random_state=2), KFold(5), 3])
@pytest.mark.parametrize("shuffle", [False, True])
def test_ind_multinomial_nb_exactly_naive(digits_counts, strategy, cv, shuffle):
    X, y = digits_counts
    X, y = X[:700], y[:700]
    r = treecv(
        MultinomialNB(alpha=0.5), X, y, cv=cv, strategy=strategy, shuffle=shuffle, random_state=0
    )
    splitter = StratifiedKFold(cv) if isinstance(cv, int) else cv
    folds = folds_of(splitter, X, y)
    ref = naive_kfold(MultinomialNB(alpha=0.5), X, y, folds, get_scorer("accuracy"))
    np.testing.assert_array_equal(r.fold_scores, ref)
    # the default scoring is accuracy, and y_pred is the naive models' out-of-fold predictions
    assert r.scoring == "accuracy"
    _, models = naive_kfold(
        MultinomialNB(alpha=0.5), X, y, folds, get_scorer("accuracy"), return_models=True
    )
    for f, m in zip(folds, models):
        np.testing.assert_array_equal(r.y_pred[f], m.predict(X[f]))


def test_ind_multinomial_nb_log_loss_exact(digits_counts):
    X, y = digits_counts
    X, y = X[:500], y[:500]
    cv = StratifiedKFold(6, shuffle=True, random_state=1)
    r = treecv(MultinomialNB(), X, y, cv=cv, scoring="neg_log_loss")
    ref = naive_kfold(MultinomialNB(), X, y, folds_of(cv, X, y), get_scorer("neg_log_loss"))
    # counts are exact integers in float64: the same sums in any order
    np.testing.assert_array_equal(r.fold_scores, ref)
    assert r.y_pred is None and r.decision is None


def test_ind_gaussian_nb_close_to_naive(bc_std):
    X, y = bc_std
    cv = KFold(6, shuffle=True, random_state=5)
    folds = folds_of(cv, X, y)
    # var_smoothing=0: GaussianNB's only order dependence left is the rounding of its running
    # means and variances (var_smoothing is taken from the *first* batch, which differs between
    # TreeCV's and the naive order)
    for scoring in ("neg_log_loss", "accuracy"):
        r = treecv(GaussianNB(var_smoothing=0.0), X, y, cv=cv, scoring=scoring)
        ref = naive_kfold(GaussianNB(var_smoothing=0.0), X, y, folds, get_scorer(scoring))
        np.testing.assert_allclose(r.fold_scores, ref, rtol=1e-9, atol=1e-12)
    # default var_smoothing: only the epsilon of the first batch differs, a ~1e-9 relative effect
    r = treecv(GaussianNB(), X, y, cv=cv, scoring="neg_log_loss")
    ref = naive_kfold(GaussianNB(), X, y, folds, get_scorer("neg_log_loss"))
    np.testing.assert_allclose(r.fold_scores, ref, rtol=1e-6)


def test_ind_river_multinomial_nb_learn_one_exactly_naive(digits_counts):
    pytest.importorskip("river")
    from river.naive_bayes import MultinomialNB as RiverMNB
    from sklearn.metrics import log_loss

    X, y = digits_counts
    X, y = X[:160], y[:160]
    cv = StratifiedKFold(4, shuffle=True, random_state=3)
    folds = folds_of(cv, X, y)
    template = RiverMNB(alpha=1.0)
    r = treecv(template, X, y, cv=cv)
    r2 = treecv(RiverMNB(alpha=1.0), X, y, cv=cv, scoring="neg_log_loss")
    assert sum(template.class_counts.values()) == 0  # the template learned nothing
    # naive k-fold through river's own learn_one / predict_one / predict_proba_one
    accs, models = naive_kfold(template, X, y, folds, return_models=True)
    classes = np.unique(y)
    np.testing.assert_array_equal(r.fold_scores, accs)
    for i, (test, m) in enumerate(zip(folds, models)):
        P = np.array(
            [
                [
                    m.predict_proba_one(dict(enumerate(X[t].tolist()))).get(c.item(), 0.0)
                    for c in classes
                ]
                for t in test
            ]
        )
        assert r2.fold_scores[i] == pytest.approx(-log_loss(y[test], P, labels=classes), rel=1e-12)


def test_ind_river_learner_without_snapshot_cannot_revert(digits_counts):
    pytest.importorskip("river")
    from river.naive_bayes import MultinomialNB as RiverMNB

    X, y = digits_counts
    with pytest.raises(ValueError, match="snapshot"):
        treecv(RiverMNB(), X[:50], y[:50], cv=3, strategy="revert")


# ---------------------------------------------------------------------------
# 3. SGD-type learners: statistically close to the naive k-fold (Theorem 1)
# ---------------------------------------------------------------------------
def _paired(make, X, y, k, reps, scoring=None):
    """(TreeCV - naive) score differences and the naive scores over ``reps`` random fold
    assignments ``KFold(k, shuffle=True, random_state=r)``."""
    scorer = (get_scorer(scoring) if isinstance(scoring, str) else scoring) if scoring else None
    diffs, naive = [], []
    for rep in range(reps):
        cv = KFold(k, shuffle=True, random_state=rep)
        r = treecv(make(), X, y, cv=cv, scoring=scoring)
        ref = naive_kfold(make(), X, y, folds_of(cv, X, y), scorer)
        diffs.append(r.score - ref.mean())
        naive.append(ref.mean())
    return np.asarray(diffs), np.asarray(naive)


# Why the criterion below is sound: n is a multiple of k, so the folds of a random
# KFold(shuffle=True) assignment are exchangeable; fold i's naive model learns the other folds in
# one fixed block order, its TreeCV model in another block order — the same distribution of
# training sequences, so E[TreeCV - naive] = 0 exactly and the mean paired difference must be
# within 4 standard errors (two-sided t with R-1 df: p < 1e-3; the seeds are fixed, so the test
# is deterministic).  The slack of one sample's worth of accuracy (1/n) only guards against a
# degenerate standard deviation (many identical differences).  The per-repetition distance bound
# is Theorem 1's g(n - b, b) for these single-pass learners, measured: max |diff| was 0.013
# (breast cancer), 0.028 (digits), 0.030 (MNIST) with lam = 0.1 — the bound is about twice that;
# for the hinge loss (mean ~0.26 / 0.46) 0.022 (Pegasos) and 0.12 (SGDClassifier, alpha=0.01).
# With a continuous score the slack is 0.1% of the score instead.


def neg_hinge(est, X, y):
    """Mean hinge loss of the fold model's decision values, negated (a continuous score: much
    less discreteness noise than accuracy, so the paired test has far more power — a leak of the
    held-out fold into the training of a single-pass SGD shows as t ~ 9 here, as t ~ 3 with
    accuracy)."""
    return -float(
        np.mean(np.maximum(0.0, 1.0 - np.where(y == 1, 1.0, -1.0) * est.decision_function(X)))
    )


SGD_CASES = [
    ("pegasos-bc", lambda: Pegasos(lam=0.1), "bc", 10, 16, None, 0.03),
    ("pegasos-proj-bc", lambda: Pegasos(lam=0.01, projection=True), "bc", 8, 16, None, 0.04),
    ("pegasos-digits", lambda: Pegasos(lam=0.1), "digits", 8, 12, None, 0.05),
    (
        "sgd-digits",
        lambda: SGDClassifier(random_state=0, shuffle=False),
        "digits",
        8,
        12,
        None,
        0.06,
    ),
    ("pegasos-digits-hinge", lambda: Pegasos(lam=0.1), "digits", 8, 12, neg_hinge, 0.1),
    (
        "sgd-digits-hinge",
        lambda: SGDClassifier(alpha=0.01, random_state=0, shuffle=False),
        "digits",
        8,
        12,
        neg_hinge,
        0.3,
    ),
]


@pytest.mark.parametrize(
    "name, make, data, k, reps, scoring, dist", SGD_CASES, ids=[c[0] for c in SGD_CASES]
)
def test_ind_sgd_learners_statistically_close_to_naive(
    bc_std, digits, name, make, data, k, reps, scoring, dist
):
    if data == "bc":
        X, y = bc_std
        X, y = X[:560], y[:560]
    else:
        X, y = digits
        X, y = StandardScaler().fit_transform(X)[:1792], y[:1792]
    assert X.shape[0] % k == 0
    diffs, naive = _paired(make, X, y, k, reps, scoring)
    se = diffs.std(ddof=1) / np.sqrt(reps)
    # slack: one sample's worth of accuracy (1/n), or 0.1% of a continuous score
    slack = 1.0 / X.shape[0] if scoring is None else 1e-3 * abs(naive.mean())
    assert abs(diffs.mean()) <= 4 * se + slack, (diffs.mean(), se)
    assert np.max(np.abs(diffs)) <= dist, diffs
    if scoring is None:
        assert np.mean(naive) > 0.8  # the learners learn something: not a vacuous comparison


def test_ind_pegasos_mnist_statistically_close_to_naive(mnist_sample):
    X, y = mnist_sample
    X = StandardScaler().fit_transform(X)
    diffs, naive = _paired(lambda: Pegasos(lam=0.1), X, y, 10, 8)
    se = diffs.std(ddof=1) / np.sqrt(len(diffs))
    assert abs(diffs.mean()) <= 4 * se + 1.0 / X.shape[0], (diffs.mean(), se)
    assert np.max(np.abs(diffs)) <= 0.06
    assert np.mean(naive) > 0.75


@pytest.mark.parametrize("alpha", ["paper", None])
def test_ind_lsqsgd_statistically_close_to_naive(digits, alpha):
    X, y = digits
    X, y = X[:1792], y[:1792].astype(float)  # pixels in [0, 1], targets in {0, 1}
    a = 1 / np.sqrt(X.shape[0]) if alpha == "paper" else None
    diffs, naive = _paired(lambda: LSQSGD(alpha=a), X, y, 8, 12, "neg_mean_squared_error")
    se = diffs.std(ddof=1) / np.sqrt(len(diffs))
    # MSE is continuous: the slack is 0.1% of the MSE (measured |mean| 6e-5 / 5e-4 at standard
    # errors 1e-4 / 4e-4, MSE ~0.09)
    assert abs(diffs.mean()) <= 4 * se + 1e-3 * abs(naive.mean()), (diffs.mean(), se)
    # within 5% of the MSE (measured max 0.8% / 4.4%)
    assert np.max(np.abs(diffs)) <= 0.06 * abs(naive.mean())


def test_ind_plain_pegasos_treecv_differs_from_naive_only_by_order(bc_std):
    """Sanity of the statistical tests' premise: TreeCV and the naive CV of the *plain*
    reference learner differ (order matters), but each fold model saw the same samples."""
    X, y = bc_std
    X, y = X[:200], y[:200]
    t = np.where(y == 1, 1.0, -1.0)
    folds = folds_of(KFold(8), X, y)
    tree = plain_treecv_decisions(lambda: PlainPegasos(0.05), X, t, folds)
    naive = plain_naive_decisions(lambda: PlainPegasos(0.05), X, t, folds)
    r = treecv(Pegasos(lam=0.05), X, y, cv=KFold(8))
    np.testing.assert_allclose(r.decision, tree, rtol=1e-10, atol=1e-10)
    assert not np.allclose(r.decision, naive)


# ---------------------------------------------------------------------------
# 4. memory: O(log k) live models, counted independently of the engine
# ---------------------------------------------------------------------------
class LiveCounted(ClassifierMixin, BaseEstimator):
    """Nearest class means; counts its live instances (every way one can be born or die)."""

    live = 0
    max_live = 0

    @classmethod
    def _born(cls):
        cls.live += 1
        cls.max_live = max(cls.max_live, cls.live)

    def __init__(self, shrink=0.0):
        self.shrink = shrink
        LiveCounted._born()

    def __del__(self):
        LiveCounted.live -= 1

    def __copy__(self):
        new = type(self).__new__(type(self))
        LiveCounted._born()
        new.__dict__.update(
            {k: (v.copy() if isinstance(v, np.ndarray) else v) for k, v in self.__dict__.items()}
        )
        return new

    def __deepcopy__(self, memo):
        return self.__copy__()

    def __setstate__(self, state):  # unpickled copies are born too
        LiveCounted._born()
        self.__dict__.update(state)

    def partial_fit(self, X, y, classes=None):
        if not hasattr(self, "sums_"):
            self.classes_ = np.asarray(classes)
            self.sums_ = np.zeros((len(self.classes_), X.shape[1]))
            self.counts_ = np.zeros(len(self.classes_))
        for j, c in enumerate(self.classes_):
            self.sums_[j] += X[y == c].sum(0)
            self.counts_[j] += np.sum(y == c)
        return self

    def fit(self, X, y):
        return self.partial_fit(X, y, np.unique(y))

    def predict(self, X):
        means = self.sums_ / np.maximum(self.counts_, 1)[:, None]
        d = ((X[:, None, :] - means[None]) ** 2).sum(-1)
        return self.classes_[np.argmin(d, 1)]

    def snapshot(self):
        return self.sums_.copy(), self.counts_.copy()

    def restore(self, state):
        self.sums_ = state[0].copy()
        self.counts_ = state[1].copy()
        return self


class NoSnapshot(LiveCounted):
    snapshot = None
    restore = None


@pytest.mark.parametrize("strategy", ["copy", "revert"])
def test_ind_serial_memory_logarithmic_loo(breast_cancer, strategy):
    import gc

    X, y = breast_cancer
    X, y = X[:200], y[:200]
    gc.collect()
    LiveCounted.live = 0
    template = LiveCounted()
    LiveCounted.max_live = LiveCounted.live  # 1: the template
    r = treecv(template, X, y, cv=LeaveOneOut(), strategy=strategy)
    k = 200
    bound = math.ceil(math.log2(k)) + 3  # the engine's ceil(log2 k) + 2, plus the template
    assert LiveCounted.max_live <= bound, LiveCounted.max_live
    assert r.peak_models <= math.ceil(math.log2(k)) + 2
    # the engine's count is not below what was really alive (the template excluded)
    assert LiveCounted.max_live - 1 <= r.peak_models
    if strategy == "revert":
        assert LiveCounted.max_live <= 3
    # and the result is the naive LOO (nearest means are order-insensitive)
    folds = [np.array([i]) for i in range(k)]
    ref = naive_kfold(LiveCounted(), X, y, folds, get_scorer("accuracy"), one_call=True)
    np.testing.assert_array_equal(r.fold_scores, ref)
    # a naive k-fold would have k models if kept; TreeCV's tree is log2 k deep
    assert r.n_sample_updates == tree_update_counts([1] * k)[0]


def test_ind_revert_without_snapshot_is_value_error(breast_cancer):
    X, y = breast_cancer
    with pytest.raises(ValueError, match="snapshot"):
        treecv(NoSnapshot(), X[:40], y[:40], cv=4, strategy="revert")
    with pytest.raises(ValueError, match="snapshot"):
        treecv(SGDClassifier(), X[:40], y[:40], cv=4, strategy="revert")
    r = treecv(NoSnapshot(), X[:40], y[:40], cv=4, strategy="copy")
    assert r.n_folds == 4


@pytest.mark.parametrize("k", [2, 3, 5, 16, 33, 569])
@pytest.mark.parametrize("strategy", ["copy", "revert"])
def test_ind_compiled_peak_models(breast_cancer, k, strategy):
    X, y = breast_cancer
    r = treecv(Pegasos(), X, y, cv=KFold(k) if k < 569 else 569, strategy=strategy)
    assert 1 <= r.peak_models <= math.ceil(math.log2(k)) + 2


# ---------------------------------------------------------------------------
# 5. splitters
# ---------------------------------------------------------------------------
def _forbid_enumeration(monkeypatch):
    def boom(*a, **k):
        raise AssertionError("LeaveOneOut was enumerated")

    for name in ("split", "_iter_test_masks", "_iter_test_indices"):
        monkeypatch.setattr(LeaveOneOut, name, boom)


@pytest.mark.parametrize(
    "make",
    [
        lambda: MultinomialNB(),
        lambda: Pegasos(lam=1e-2),
        lambda: df.LinearClassifier(loss="squared"),
    ],
    ids=["partial_fit", "compiled", "exact"],
)
def test_ind_leave_one_out_never_enumerated(digits, monkeypatch, make):
    X, y = digits
    X, y = X[:64], y[:64]
    folds = [np.array([i]) for i in range(64)]
    ref = naive_kfold(make(), X, y, folds, get_scorer("accuracy"), one_call=True)
    _forbid_enumeration(monkeypatch)
    a = treecv(make(), X, y, cv=LeaveOneOut())
    b = treecv(make(), X, y, cv=64)
    np.testing.assert_array_equal(a.fold_scores, b.fold_scores)
    assert a.n_folds == 64 and a.fold_sizes.tolist() == [1] * 64
    if not isinstance(make(), Pegasos):  # order-insensitive: the naive LOO exactly
        np.testing.assert_array_equal(a.fold_scores, ref)


def test_ind_fold_order_is_the_splitters_and_samples_in_its_order(rng):
    X = _with_ids(rng.standard_normal((30, 2)))
    y = rng.standard_normal(30)
    perm = rng.permutation(30)
    # a custom partition: uneven folds, yielded in a scrambled order, rows listed unsorted
    tests = [perm[:4], perm[4:13], perm[13:15], perm[15:22], perm[22:]]
    splits = [(np.setdiff1d(np.arange(30), t), t) for t in tests]
    for strategy in ("copy", "revert"):
        scorer = HistoryScorer(tests, "sequence")
        r = treecv(HistoryRecorder(), X, y, cv=splits, scoring=scorer, strategy=strategy)
        np.testing.assert_array_equal(r.fold_sizes, [4, 9, 2, 7, 8])
        np.testing.assert_array_equal(r.fold_scores, scorer.expected_scores())
        match = HistoryScorer(tests, "match")
        r = treecv(HistoryRecorder(), X, y, cv=splits, scoring=match, strategy=strategy)
        np.testing.assert_array_equal(r.fold_scores, np.ones(5))


@pytest.mark.parametrize(
    "cv",
    [
        KFold(6, shuffle=True, random_state=0),
        StratifiedKFold(5, shuffle=True, random_state=1),
        StratifiedKFold(3),
        KFold(7),
    ],
    ids=["kfold-shuffle", "skf-shuffle", "skf", "kfold7-uneven"],
)
def test_ind_splitters_history_is_algorithm1(breast_cancer, cv):
    X, y = breast_cancer
    X, y = _with_ids(X[:101]), y[:101]
    folds = folds_of(cv, X, y)
    for strategy in ("copy", "revert"):
        scorer = HistoryScorer(folds, "sequence")
        r = treecv(HistoryRecorder(), X, y, cv=cv, scoring=scorer, strategy=strategy)
        np.testing.assert_array_equal(r.fold_scores, scorer.expected_scores())
        np.testing.assert_array_equal(r.fold_sizes, [len(f) for f in folds])
        fed, calls = tree_update_counts([len(f) for f in folds])
        assert (r.n_sample_updates, r.n_updates) == (fed, calls)


def test_ind_group_kfold(breast_cancer):
    X, y = breast_cancer
    X, y = X[:120], y[:120]
    groups = np.repeat(np.arange(24), 5)[np.random.default_rng(1).permutation(120)]
    cv = GroupKFold(4)
    folds = folds_of(cv, X, y, groups)
    r = treecv(MultinomialNB(), X - X.min(), y, cv=cv, groups=groups)
    ref = naive_kfold(MultinomialNB(), X - X.min(), y, folds, get_scorer("accuracy"))
    np.testing.assert_array_equal(r.fold_scores, ref)
    np.testing.assert_array_equal(r.fold_sizes, [len(f) for f in folds])
    for f in folds:  # a group is never split across folds
        others = np.setdiff1d(np.arange(120), f)
        assert not set(groups[f]) & set(groups[others])
    with pytest.raises(ValueError, match="groups"):
        treecv(MultinomialNB(), X - X.min(), y, cv=cv)


@pytest.mark.parametrize(
    "cv",
    [
        ShuffleSplit(4, test_size=0.25, random_state=0),
        RepeatedKFold(n_splits=3, n_repeats=2, random_state=0),
        TimeSeriesSplit(4),
        PredefinedSplit(np.r_[-np.ones(10), np.arange(50) % 5]),
    ],
    ids=["shufflesplit", "repeated", "timeseries", "predefined-holes"],
)
def test_ind_non_partition_splitters_rejected(breast_cancer, cv):
    X, y = breast_cancer
    X, y = X[:60], y[:60]
    with pytest.raises(ValueError, match="partition"):
        treecv(MultinomialNB(), X - X.min(), y, cv=cv)


def test_ind_predefined_partition_accepted(breast_cancer):
    X, y = breast_cancer
    X, y = X[:60] - X.min(), y[:60]
    cv = PredefinedSplit(np.arange(60) % 4)
    r = treecv(MultinomialNB(), X, y, cv=cv)
    ref = naive_kfold(MultinomialNB(), X, y, folds_of(cv, X, y), get_scorer("accuracy"))
    np.testing.assert_array_equal(r.fold_scores, ref)


@pytest.mark.parametrize(
    "cv",
    [
        1,
        0,
        -2,
        570,
        KFold(570),
        [(np.arange(1, 569), np.arange(1))],
        [(np.arange(300, 569), np.arange(300)), (np.arange(250), np.arange(250, 569))],
    ],
    ids=["1", "0", "neg", "n+1", "kfold-n+1", "one-fold", "overlap"],
)
def test_ind_bad_fold_counts(breast_cancer, cv):
    X, y = breast_cancer
    with pytest.raises(ValueError):
        treecv(Pegasos(), X, y, cv=cv)


@pytest.mark.parametrize("n, k", [(10, 3), (11, 4), (37, 7), (64, 64), (100, 9)])
def test_ind_uneven_fold_sizes_and_counts(rng, n, k):
    X = rng.standard_normal((n, 3))
    y = (X[:, 0] > 0).astype(int)
    y[:2] = [0, 1]
    r = treecv(Pegasos(lam=0.1), X, y, cv=KFold(k) if k < n else n)
    sizes = [len(f) for f in folds_of(KFold(k), X, y)]
    assert r.fold_sizes.tolist() == sizes and int(r.fold_sizes.sum()) == n
    fed, calls = tree_update_counts(sizes)
    assert (r.n_sample_updates, r.n_updates) == (fed, calls)


# ---------------------------------------------------------------------------
# 6. built-in learners: the compiled recursion is Algorithm 1
# ---------------------------------------------------------------------------
PEG_VARIANTS = [
    dict(lam=0.05),
    dict(lam=1e-3, projection=True),
    dict(lam=0.01, fit_intercept=False),
    dict(lam=0.02, intercept_scaling=3.0),
]


@pytest.mark.parametrize("params", PEG_VARIANTS, ids=lambda p: "-".join(map(str, p.values())))
@pytest.mark.parametrize("strategy", ["copy", "revert"])
@pytest.mark.parametrize(
    "cv",
    [KFold(5), StratifiedKFold(8, shuffle=True, random_state=0), "loo"],
    ids=["kfold5", "skf8", "loo"],
)
def test_ind_pegasos_treecv_equals_plain_algorithm1(bc_std, params, strategy, cv):
    X, y = bc_std
    X, y = X[:90], y[:90]
    if cv == "loo":
        cv = LeaveOneOut()
    folds = folds_of(cv, X, y)
    r = treecv(Pegasos(**params), X, y, cv=cv, strategy=strategy)
    t = np.where(y == 1, 1.0, -1.0)
    plain = plain_treecv_decisions(
        lambda: PlainPegasos(
            params["lam"],
            params.get("projection", False),
            params.get("fit_intercept", True),
            params.get("intercept_scaling", 1.0),
        ),
        X,
        t,
        folds,
    )
    scale = np.max(np.abs(plain))
    np.testing.assert_allclose(r.decision, plain, rtol=1e-10, atol=1e-10 * scale)
    own = algorithm1_decisions(Pegasos(**params), X, y, folds, classes=np.array([0, 1]))
    np.testing.assert_allclose(r.decision, own, rtol=1e-10, atol=1e-10 * scale)
    np.testing.assert_array_equal(r.y_pred, np.where(r.decision > 0, 1, 0))
    np.testing.assert_allclose(r.fold_scores, [np.mean(r.y_pred[f] == y[f]) for f in folds])
    assert r.decision.shape == r.y_pred.shape == (90,)


@pytest.mark.parametrize("alpha, radius", [(None, 1.0), (0.05, np.inf), (0.1, 0.5)])
@pytest.mark.parametrize("strategy", ["copy", "revert"])
def test_ind_lsqsgd_treecv_equals_plain_algorithm1(digits, alpha, radius, strategy):
    X, y = digits
    X, y = X[:120], y[:120].astype(float) + 0.5 * X[:120, 10]
    cv = KFold(7, shuffle=True, random_state=4)
    folds = folds_of(cv, X, y)
    r = treecv(
        LSQSGD(alpha=alpha, radius=radius, intercept_scaling=0.7),
        X,
        y,
        cv=cv,
        strategy=strategy,
        scoring="neg_mean_absolute_error",
    )
    plain = plain_treecv_decisions(lambda: PlainLSQSGD(alpha, radius, True, 0.7), X, y, folds)
    np.testing.assert_allclose(r.decision, plain, rtol=1e-10, atol=1e-12)
    np.testing.assert_array_equal(r.y_pred, r.decision)
    np.testing.assert_allclose(
        r.fold_scores, [-np.mean(np.abs(plain[f] - y[f])) for f in folds], rtol=1e-10
    )
    assert r.scoring == "neg_mean_absolute_error"
    # default scoring of a regressor: r2 per fold
    from sklearn.metrics import r2_score

    r2 = treecv(LSQSGD(alpha=alpha, radius=radius, intercept_scaling=0.7), X, y, cv=cv)
    assert r2.scoring == "r2"
    np.testing.assert_allclose(r2.fold_scores, [r2_score(y[f], plain[f]) for f in folds], rtol=1e-9)


def test_ind_pegasos_callable_and_roc_auc_scorers_use_fold_model(bc_std):
    from sklearn.metrics import roc_auc_score

    X, y = bc_std
    X, y = X[:200], y[:200]
    cv = StratifiedKFold(5, shuffle=True, random_state=0)
    folds = folds_of(cv, X, y)
    r = treecv(Pegasos(lam=0.01), X, y, cv=cv)
    r_auc = treecv(Pegasos(lam=0.01), X, y, cv=cv, scoring="roc_auc")
    np.testing.assert_allclose(
        r_auc.fold_scores, [roc_auc_score(y[f], r.decision[f]) for f in folds], rtol=1e-12
    )
    seen = []

    def margin(est, Xf, yf):
        d = est.decision_function(Xf)
        seen.append(len(Xf))
        return float(np.mean(np.where(yf == 1, 1, -1) * d))

    r_m = treecv(Pegasos(lam=0.01), X, y, cv=cv, scoring=margin)
    np.testing.assert_allclose(
        r_m.fold_scores,
        [np.mean(np.where(y[f] == 1, 1, -1) * r.decision[f]) for f in folds],
        rtol=1e-12,
    )
    # every fold was scored on its own rows (the engine may also probe the scorer beforehand)
    for size in {len(f) for f in folds}:
        assert seen.count(size) >= sum(len(f) == size for f in folds)


def test_ind_shuffle_reproducible_and_phase_sets_respected(bc_std):
    X, y = bc_std
    kw = dict(cv=KFold(9, shuffle=True, random_state=0))
    a = treecv(Pegasos(lam=0.01), X, y, shuffle=True, random_state=7, **kw)
    b = treecv(Pegasos(lam=0.01), X, y, shuffle=True, random_state=7, **kw)
    c = treecv(Pegasos(lam=0.01), X, y, shuffle=True, random_state=8, **kw)
    d = treecv(Pegasos(lam=0.01), X, y, shuffle=True, random_state=np.random.RandomState(7), **kw)
    fixed = treecv(Pegasos(lam=0.01), X, y, **kw)
    np.testing.assert_array_equal(a.decision, b.decision)
    assert not np.array_equal(a.decision, c.decision)
    assert not np.array_equal(a.decision, fixed.decision)
    assert a.shuffle is True and fixed.shuffle is False
    assert d.decision.shape == a.decision.shape
    assert a.n_sample_updates == fixed.n_sample_updates == c.n_sample_updates
    # the generic engine: every phase is a random order of exactly the phase's samples
    Xi = _with_ids(X[:120])
    folds = folds_of(KFold(9, shuffle=True, random_state=0), Xi, y[:120])
    for strategy in ("copy", "revert"):
        ph = HistoryScorer(folds, "phases")
        r = treecv(
            HistoryRecorder(),
            Xi,
            y[:120],
            scoring=ph,
            strategy=strategy,
            shuffle=True,
            random_state=3,
            **kw,
        )
        np.testing.assert_array_equal(r.fold_scores, ph.expected_scores())
        seq = HistoryScorer(folds, "match")
        r = treecv(
            HistoryRecorder(),
            Xi,
            y[:120],
            scoring=seq,
            strategy=strategy,
            shuffle=True,
            random_state=3,
            **kw,
        )
        assert np.all(r.fold_scores == 0.0)  # not the fixed order
        r2 = treecv(
            HistoryRecorder(),
            Xi,
            y[:120],
            scoring=HistoryScorer(folds, "sequence"),
            strategy=strategy,
            shuffle=True,
            random_state=3,
            **kw,
        )
        r3 = treecv(
            HistoryRecorder(),
            Xi,
            y[:120],
            scoring=HistoryScorer(folds, "sequence"),
            strategy=strategy,
            shuffle=True,
            random_state=3,
            **kw,
        )
        np.testing.assert_array_equal(r2.fold_scores, r3.fold_scores)


@pytest.mark.parametrize("shuffle", [False, True])
def test_ind_compiled_n_jobs_1_and_2_identical(bc_std, shuffle):
    X, y = bc_std
    kw = dict(cv=KFold(11), shuffle=shuffle, random_state=2)
    a = treecv(Pegasos(lam=0.01), X, y, n_jobs=1, **kw)
    b = treecv(Pegasos(lam=0.01), X, y, n_jobs=2, **kw)
    np.testing.assert_array_equal(a.decision, b.decision)
    np.testing.assert_array_equal(a.y_pred, b.y_pred)
    np.testing.assert_array_equal(a.fold_scores, b.fold_scores)
    assert (a.n_sample_updates, a.n_updates) == (b.n_sample_updates, b.n_updates)


@pytest.mark.parametrize("d", [1, 3, 5])
def test_ind_sample_updates_n_times_depth(bc_std, d):
    X, y = bc_std
    k = 2**d
    n = 17 * k
    X, y = X[:n], y[:n]
    for learner in (Pegasos(lam=0.01), LSQSGD(alpha=0.01)):
        yy = y if isinstance(learner, Pegasos) else y.astype(float)
        r = treecv(learner, X, yy, cv=KFold(k))
        assert r.n_sample_updates == n * d
        assert r.n_updates == 2 * (k - 1)
    r = treecv(
        HistoryRecorder(),
        _with_ids(X),
        y.astype(float),
        cv=KFold(k),
        scoring=HistoryScorer(folds_of(KFold(k), X), "match"),
    )
    assert r.n_sample_updates == n * d and np.all(r.fold_scores == 1.0)
    # standard CV would feed (k - 1) n
    assert r.n_sample_updates <= (k - 1) * n


@pytest.mark.parametrize("strategy", ["copy", "revert"])
@pytest.mark.parametrize("progress", [False, True])
def test_ind_progress_bar_does_not_change_results(bc_std, progress, strategy, capsys):
    pytest.importorskip("tqdm")
    X, y = bc_std
    kw = dict(cv=KFold(37), shuffle=True, random_state=1, strategy=strategy)
    a = treecv(Pegasos(lam=0.01), X, y, **kw)
    b = treecv(Pegasos(lam=0.01), X, y, progress=progress, **kw)
    np.testing.assert_array_equal(a.decision, b.decision)
    assert (a.n_sample_updates, a.n_updates) == (b.n_sample_updates, b.n_updates)
    assert b.peak_models <= math.ceil(math.log2(37)) + 2


def test_ind_result_fields(bc_std):
    X, y = bc_std
    r = treecv(Pegasos(lam=0.01), X, y, cv=KFold(4), strategy="revert", scoring="accuracy")
    assert isinstance(r, TreeCVResult)
    assert r.score == pytest.approx(np.mean(r.fold_scores))
    assert r.fold_scores.shape == r.fold_sizes.shape == (4,) and r.n_folds == 4
    assert r.strategy == "revert" and r.shuffle is False and r.scoring == "accuracy"
    assert r.time_s >= 0 and isinstance(r.summary(), str) and len(r.summary()) > 20
    assert r.decision.dtype == np.float64 and r.y_pred.shape == (X.shape[0],)
    labels = np.where(y == 1, "yes", "no")
    r2 = treecv(Pegasos(lam=0.01), X, labels, cv=KFold(4))
    assert set(r2.y_pred) <= {"yes", "no"}
    # "yes" sorts after "no": it is the +1 class, same decisions as with 0/1 labels
    np.testing.assert_allclose(r2.decision, treecv(Pegasos(lam=0.01), X, y, cv=KFold(4)).decision)
    r3 = treecv(SGDClassifier(random_state=0), X, y, cv=KFold(4))
    assert r3.decision is None and r3.y_pred.shape == (X.shape[0],)


def test_ind_generic_learner_update_counts_are_real(bc_std):
    """n_sample_updates / n_updates are what the learner really received."""

    class Tally(SGDClassifier):
        rows = 0
        calls = 0

        def partial_fit(self, X, y, classes=None, sample_weight=None):
            Tally.rows += X.shape[0]
            Tally.calls += 1
            return super().partial_fit(X, y, classes=classes, sample_weight=sample_weight)

    X, y = bc_std
    Tally.rows = Tally.calls = 0
    r = treecv(Tally(random_state=0), X, y, cv=KFold(13))
    assert (Tally.rows, Tally.calls) == (r.n_sample_updates, r.n_updates)
    assert (r.n_sample_updates, r.n_updates) == tree_update_counts(
        [len(f) for f in folds_of(KFold(13), X)]
    )


def test_ind_templates_not_modified(bc_std):
    X, y = bc_std
    for t in (
        SGDClassifier(random_state=0),
        Pegasos(lam=0.01),
        MultinomialNB(),
        LSQSGD(alpha=0.01),
    ):
        before = _copy.deepcopy(t.__dict__)
        yy = y.astype(float) if isinstance(t, LSQSGD) else y
        XX = X - X.min() if isinstance(t, MultinomialNB) else X
        treecv(t, XX, yy, cv=4)
        assert t.__dict__.keys() == before.keys()
        assert t.get_params() == clone(t).get_params()


def test_ind_partial_fit_user_class_without_fit_unsupervised():
    """A user class with partial_fit and no labels: a running mean, scored by a callable —
    order-insensitive, so exactly the naive k-fold."""

    class RunningMean(BaseEstimator):
        def fit(self, X, y=None):
            self.__dict__.pop("n_", None)
            self.__dict__.pop("sum_", None)
            return self.partial_fit(X)

        def partial_fit(self, X, y=None):
            n0 = getattr(self, "n_", 0)
            s0 = getattr(self, "sum_", 0.0)
            self.n_, self.sum_ = n0 + X.shape[0], s0 + X.sum(0)
            return self

    def scorer(est, X, y=None):
        return -float(np.mean((X - est.sum_ / est.n_) ** 2))

    X = np.random.default_rng(3).integers(0, 9, size=(40, 3)).astype(float)
    cv = KFold(5)
    folds = folds_of(cv, X)
    ref = [scorer(naive_kfold_model(RunningMean(), X, folds, i), X[f]) for i, f in enumerate(folds)]
    r = treecv(RunningMean(), X, cv=cv, scoring=scorer)
    np.testing.assert_array_equal(r.fold_scores, ref)


def naive_kfold_model(learner, X, folds, i):
    m = clone(learner)
    for j, f in enumerate(folds):
        if j != i:
            m.partial_fit(X[f])
    return m


# ---------------------------------------------------------------------------
# 8. bad input -> ValueError naming the problem
# ---------------------------------------------------------------------------
def _bad_cases(X, y):
    Xnan = X.copy()
    Xnan[5, 1] = np.nan
    Xinf = X.copy()
    Xinf[7, 0] = -np.inf
    return [
        ("nan-X", dict(X=Xnan), r"NaN"),
        ("inf-X", dict(X=Xinf), r"(?i)inf"),
        ("1d-X", dict(X=X[:, 0]), r"(?i)2d|2-d|reshape"),
        ("3d-X", dict(X=X[:, :, None]), r"(?i)dim|2d|2-d"),
        ("short-y", dict(y=y[:-3]), r"(?i)samples"),
        ("2d-y", dict(y=np.c_[y, y]), r"(?i)1-d|1d|shape"),
        ("one-class", dict(y=np.zeros_like(y)), r"(?i)class"),
        ("strategy", dict(strategy="undo"), r"strategy"),
        ("scoring-typo", dict(scoring="acuracy"), r"(?i)scor|acuracy"),
        ("n_jobs", dict(n_jobs=0), r"n_jobs"),
        ("shuffle", dict(shuffle="yes"), r"shuffle"),
        ("one-sample", dict(X=X[:1], y=y[:1]), r"(?i)sample"),
        ("no-features", dict(X=X[:, :0]), r"(?i)feature"),
    ]


@pytest.mark.parametrize(
    "make",
    [
        lambda: Pegasos(),
        lambda: SGDClassifier(),
        lambda: df.LinearClassifier(loss="squared"),
        lambda: MultinomialNB(),
    ],
    ids=["compiled", "partial_fit", "exact", "nb"],
)
@pytest.mark.parametrize("case", range(13))
def test_ind_bad_input(breast_cancer, make, case):
    X, y = breast_cancer
    X, y = X[:60] + 1.0, y[:60]  # nonnegative: MultinomialNB accepts it
    name, kw, msg = _bad_cases(X, y)[case]
    args = dict(X=X, y=y)
    args.update({k: kw.pop(k) for k in list(kw) if k in ("X", "y")})
    with pytest.raises(ValueError, match=msg):
        treecv(make(), args["X"], args["y"], cv=3, **kw)


def test_ind_bad_input_regressors(breast_cancer):
    X, y = breast_cancer
    X, y = X[:60], y[:60].astype(float)
    ynan = y.copy()
    ynan[3] = np.nan
    for make in (lambda: LSQSGD(), lambda: df.LinearRegressor()):
        with pytest.raises(ValueError, match="NaN"):
            treecv(make(), X, ynan, cv=3)
    with pytest.raises(ValueError, match="(?i)y"):
        treecv(LSQSGD(), X, None, cv=3)
    with pytest.raises(ValueError, match="binary"):
        treecv(Pegasos(), X, np.arange(60) % 3, cv=3)
    with pytest.raises(ValueError, match="(?i)incremental|partial_fit"):
        treecv(
            GaussianNB.__new__(type("Batch", (BaseEstimator,), {"fit": lambda s, X, y: s})),
            X,
            y,
            cv=3,
        )
    with pytest.raises(ValueError, match="progress"):
        treecv(LSQSGD(), X, y, cv=3, progress="yes")


def test_ind_partial_fit_only_learner_with_callable_scorer():
    class OnlyPartial(RegressorMixin, BaseEstimator):
        def partial_fit(self, X, y):
            self.n_ = getattr(self, "n_", 0) + len(y)
            self.s_ = getattr(self, "s_", 0.0) + float(np.sum(y))
            return self

        def predict(self, X):
            return np.full(len(X), self.s_ / self.n_)

    X = np.arange(40, dtype=float)[:, None]
    y = np.arange(40, dtype=float)
    r = treecv(
        OnlyPartial(),
        X,
        y,
        cv=KFold(4),
        scoring=lambda est, X, y: -float(np.mean((est.predict(X) - y) ** 2)),
    )
    assert r.n_folds == 4
    r2 = treecv(OnlyPartial(), X, y, cv=KFold(4), scoring="neg_mean_squared_error")
    np.testing.assert_allclose(r2.fold_scores, r.fold_scores)
    assert treecv(OnlyPartial(), X, y, cv=KFold(4)).scoring == "r2"  # RegressorMixin.score


# ---------------------------------------------------------------------------
# 6b. order-sensitive generic learners: treecv is the literal Algorithm 1 over their partial_fit
# ---------------------------------------------------------------------------
def _generic_cases():
    from sklearn.linear_model import PassiveAggressiveRegressor, Perceptron, SGDRegressor

    return {
        "sgdclf-shuffle": (lambda: SGDClassifier(random_state=1), "decision_function", True),
        "perceptron": (
            lambda: Perceptron(random_state=0, shuffle=False),
            "decision_function",
            True,
        ),
        "sgdreg": (
            lambda: SGDRegressor(random_state=2, shuffle=False, eta0=0.005),
            "predict",
            False,
        ),
        "pa-reg": (
            lambda: PassiveAggressiveRegressor(random_state=0, shuffle=False),
            "predict",
            False,
        ),
    }


@pytest.mark.filterwarnings("ignore::FutureWarning")
@pytest.mark.parametrize("name", list(_generic_cases()))
def test_ind_generic_order_sensitive_learner_is_algorithm1(bc_std, name):
    make, method, clf = _generic_cases()[name]
    X, y = bc_std
    X, y = X[:180], (y[:180] if clf else y[:180] + 0.2 * X[:180, 1])
    cv = (StratifiedKFold if clf else KFold)(6, shuffle=True, random_state=0)
    folds = folds_of(cv, X, y)
    ref = algorithm1_decisions(
        make(), X, y, folds, classes=np.unique(y) if clf else None, method=method
    )
    rec = DecisionRecorder(method)
    treecv(make(), X, y, cv=cv, scoring=rec)
    for f in folds:
        np.testing.assert_allclose(rec.of(X[f]), ref[f], rtol=1e-12, atol=1e-12)
    # the built-in scorers computed from out-of-fold predictions (the default, accuracy / r2, and
    # the error metrics) are those of the fold models' predictions
    if clf:
        pred = np.where(ref > 0, 1, 0)
        r = treecv(make(), X, y, cv=cv)
        np.testing.assert_array_equal(r.y_pred, pred)
        np.testing.assert_allclose(r.fold_scores, [np.mean(pred[f] == y[f]) for f in folds])
    else:
        from sklearn.metrics import r2_score

        expect = {
            None: [r2_score(y[f], ref[f]) for f in folds],
            "neg_root_mean_squared_error": [-np.sqrt(np.mean((ref[f] - y[f]) ** 2)) for f in folds],
            "neg_mean_absolute_error": [-np.mean(np.abs(ref[f] - y[f])) for f in folds],
            "neg_median_absolute_error": [-np.median(np.abs(ref[f] - y[f])) for f in folds],
        }
        for scoring, vals in expect.items():
            r = treecv(make(), X, y, cv=cv, scoring=scoring)
            np.testing.assert_allclose(r.fold_scores, vals, rtol=1e-10, atol=1e-12)
        np.testing.assert_allclose(treecv(make(), X, y, cv=cv).y_pred, ref, rtol=1e-12, atol=1e-12)


def test_ind_river_regressor_is_algorithm1(bc_std):
    pytest.importorskip("river")
    from river import linear_model, optim

    X, y = bc_std
    X, y = X[:120, :6], y[:120] + 0.3 * X[:120, 0]
    cv = KFold(5, shuffle=True, random_state=1)
    folds = folds_of(cv, X, y)
    make = lambda: linear_model.LinearRegression(optimizer=optim.SGD(0.01))  # noqa: E731
    out = np.empty(len(y))

    def update(model, a, b):
        for i in np.concatenate(folds[a : b + 1]):
            model.learn_one(dict(enumerate(X[i].tolist())), float(y[i]))
        return model

    def leaf(model, s):
        out[folds[s]] = [model.predict_one(dict(enumerate(X[i].tolist()))) for i in folds[s]]

    from treecv_reference import algorithm1

    algorithm1(make, update, leaf, len(folds))
    r = treecv(make(), X, y, cv=cv, scoring="neg_mean_squared_error")
    np.testing.assert_allclose(r.y_pred, out, rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(
        r.fold_scores, [-np.mean((out[f] - y[f]) ** 2) for f in folds], rtol=1e-10
    )


def test_ind_list_inputs_and_sparse(bc_std):
    import scipy.sparse as sp

    X, y = bc_std
    X, y = X[:100], y[:100]
    a = treecv(Pegasos(lam=0.01), X, y, cv=KFold(4))
    b = treecv(Pegasos(lam=0.01), X.tolist(), y.tolist(), cv=KFold(4))
    np.testing.assert_array_equal(a.decision, b.decision)
    Xp = np.round(X - X.min(), 1)
    Xp[Xp < 2] = 0.0
    dense = treecv(MultinomialNB(), Xp, y, cv=KFold(4), scoring="neg_log_loss")
    sparse = treecv(MultinomialNB(), sp.csr_matrix(Xp), y, cv=KFold(4), scoring="neg_log_loss")
    np.testing.assert_allclose(sparse.fold_scores, dense.fold_scores, rtol=1e-12)
    with pytest.raises((TypeError, ValueError), match="(?i)sparse|dense"):
        treecv(Pegasos(), sp.csr_matrix(X), y, cv=4)


def test_ind_regressor_int_cv_is_plain_kfold(bc_std):
    X, y = bc_std
    yf = y[:150].astype(float) + X[:150, 2]
    a = treecv(LSQSGD(alpha=0.01), X[:150], yf, cv=7)
    b = treecv(LSQSGD(alpha=0.01), X[:150], yf, cv=KFold(7))
    np.testing.assert_array_equal(a.decision, b.decision)
    np.testing.assert_array_equal(a.fold_sizes, b.fold_sizes)


def test_ind_progress_generic_learner(bc_std, capsys):
    pytest.importorskip("tqdm")
    X, y = bc_std
    a = treecv(SGDClassifier(random_state=0), X, y, cv=9)
    b = treecv(SGDClassifier(random_state=0), X, y, cv=9, progress=True)
    np.testing.assert_array_equal(a.fold_scores, b.fold_scores)


# ---------------------------------------------------------------------------
# 1b. exact estimators: classes arriving late, single-class training sets, other kinds
# ---------------------------------------------------------------------------
@pytest.mark.parametrize("strategy", ["copy", "revert"])
@pytest.mark.parametrize("k", [3, 8, 100])
def test_ind_exact_classifier_sorted_labels(breast_cancer, strategy, k):
    # labels sorted: the first training phases of the tree hold one class only
    X, y = breast_cancer
    o = np.argsort(y, kind="stable")
    X, y = X[o][150:250], y[o][150:250]
    make = lambda: df.LinearClassifier(loss="squared", C=0.5)  # noqa: E731
    cv = KFold(k) if k < 100 else 100
    rec = DecisionRecorder("decision_function")
    treecv(make(), X, y, cv=cv, strategy=strategy, scoring=rec)
    for _i, f in enumerate(folds_of(KFold(k), X, y)):
        keep = np.setdiff1d(np.arange(100), f)
        ref = make().fit(X[keep], y[keep]).decision_function(X[f])
        np.testing.assert_allclose(rec.of(X[f]), ref, rtol=0, atol=1e-8)


@pytest.mark.parametrize("strategy", ["copy", "revert"])
def test_ind_exact_classifier_single_class_training_set(breast_cancer, strategy):
    X, y = breast_cancer
    Xb = np.r_[X[y == 0][:10], X[y == 1][:10]]
    yb = np.r_[np.zeros(10, int), np.ones(10, int)]
    with pytest.raises(ValueError, match="(?i)single class|one class"):
        treecv(df.LinearClassifier(loss="squared"), Xb, yb, cv=KFold(2), strategy=strategy)


def test_ind_exact_other_kinds(breast_cancer):
    X, y = breast_cancer
    X, y = X[:120], y[:120]
    yr = y.astype(float) + X[:, 0]
    make = lambda: df.KernelRegressor(loss="squared", kernel="rbf", gamma=0.5)  # noqa: E731
    for strategy in ("copy", "revert"):
        r = treecv(make(), X, yr, cv=KFold(6), strategy=strategy)
        assert r.scoring == "r2"
        ref = naive_kfold(make(), X, yr, folds_of(KFold(6), X), get_scorer("r2"))
        np.testing.assert_allclose(r.fold_scores, ref, rtol=1e-8, atol=1e-10)
    # string labels, randomized order (order-insensitive: still the k refits)
    lab = np.where(y == 1, "benign", "malignant")
    mk = lambda: df.LinearClassifier(loss="squared")  # noqa: E731
    r = treecv(mk(), X, lab, cv=KFold(5), shuffle=True, random_state=0)
    _, models = naive_kfold(
        mk(), X, lab, folds_of(KFold(5), X), get_scorer("accuracy"), return_models=True
    )
    for f, m in zip(folds_of(KFold(5), X), models):
        np.testing.assert_array_equal(r.y_pred[f], m.predict(X[f]))


# ---------------------------------------------------------------------------
# scorers on the compiled learners
# ---------------------------------------------------------------------------
def test_ind_compiled_label_scorers_and_proba_scorers(bc_std):
    from sklearn.metrics import balanced_accuracy_score, f1_score

    X, y = bc_std
    cv = KFold(5)
    d = treecv(Pegasos(lam=0.01), X, y, cv=cv)
    folds = folds_of(cv, X)
    for scoring, fn in (("f1", f1_score), ("balanced_accuracy", balanced_accuracy_score)):
        r = treecv(Pegasos(lam=0.01), X, y, cv=cv, scoring=scoring)
        np.testing.assert_allclose(
            r.fold_scores, [fn(y[f], d.y_pred[f]) for f in folds], rtol=1e-12
        )
        assert r.scoring == scoring
    for scoring in ("neg_log_loss", "neg_brier_score"):
        with pytest.raises(ValueError, match="predict_proba"):
            treecv(Pegasos(lam=0.01), X, y, cv=cv, scoring=scoring)


# ---------------------------------------------------------------------------
# any partition (hypothesis): Algorithm 1's training sequences and counters
# ---------------------------------------------------------------------------
try:
    from hypothesis import given, settings
    from hypothesis import strategies as st
except ImportError:  # hypothesis is optional: only this test needs it
    given = None

if given is not None:

    @st.composite
    def _partitions(draw):
        n = draw(st.integers(2, 40))
        k = draw(st.integers(2, n))
        # every fold non-empty: a random surjection of the samples onto k folds, then a random
        # order of the folds and of the samples inside each fold
        labels = draw(st.lists(st.integers(0, k - 1), min_size=n, max_size=n))
        labels = np.asarray(labels)
        labels[draw(st.permutations(list(range(n))))[:k]] = np.arange(k)
        perm = np.asarray(draw(st.permutations(list(range(n)))), dtype=np.int64)
        folds = [perm[labels[perm] == c] for c in range(k)]
        return n, folds

    @settings(max_examples=examples(30), deadline=None)
    @given(_partitions(), st.sampled_from(["copy", "revert"]), st.booleans())
    def test_ind_any_partition_is_algorithm1(part, strategy, shuffle):
        n, folds = part
        X = np.column_stack([np.arange(n, dtype=np.float64), np.ones(n)])
        y = np.zeros(n)
        splits = [(np.setdiff1d(np.arange(n), f), f) for f in folds]
        scorer = HistoryScorer(folds, "phases" if shuffle else "match")
        r = treecv(
            HistoryRecorder(),
            X,
            y,
            cv=splits,
            scoring=scorer,
            strategy=strategy,
            shuffle=shuffle,
            random_state=0,
        )
        np.testing.assert_array_equal(r.fold_scores, scorer.expected_scores())
        assert r.fold_sizes.tolist() == [len(f) for f in folds]
        assert (r.n_sample_updates, r.n_updates) == tree_update_counts([len(f) for f in folds])
        assert r.peak_models <= math.ceil(math.log2(len(folds))) + 2
