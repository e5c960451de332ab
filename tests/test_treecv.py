"""TreeCV (Joulani et al. 2015, seed 002) against its brute-force twins on real data."""

import math
import weakref

import numpy as np
import pytest
from sklearn.base import BaseEstimator, ClassifierMixin
from sklearn.linear_model import SGDClassifier
from sklearn.metrics import get_scorer
from sklearn.model_selection import (GroupKFold, KFold, LeaveOneOut, ShuffleSplit,
                                     StratifiedKFold)
from sklearn.naive_bayes import GaussianNB, MultinomialNB
from sklearn.preprocessing import StandardScaler

import deltafit as df
from deltafit.model_selection import TreeCVResult, treecv
from deltafit.stream import LSQSGD, Pegasos
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
# exact learners: TreeCV == k refits (seed 001 + seed 002)
# ---------------------------------------------------------------------------
EXACT = [
    (lambda: df.LinearRegressor(C=1.0), "neg_mean_squared_error", True),
    (lambda: df.LinearClassifier(loss="squared", C=0.5), "accuracy", False),
    (lambda: df.LinearClassifier(loss="logistic", C=1.0, tol=1e-12), "neg_log_loss", False),
    (lambda: df.KernelClassifier(loss="squared", kernel="rbf", gamma=0.02, C=1.0),
     "accuracy", False),
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
    r = treecv(df.LinearRegressor(C=2.0), X, y, cv=60, scoring="neg_mean_squared_error",
               strategy="revert")
    ref = [(df.LinearRegressor(C=2.0).fit(np.delete(X, i, 0), np.delete(y, i)).predict(X[i:i + 1])
            [0] - y[i]) ** 2 for i in range(60)]
    np.testing.assert_allclose(-r.fold_scores, ref, rtol=1e-8, atol=1e-10)


def test_exact_classifier_waits_for_both_classes():
    # sorted labels: the first training phases see one class only
    rng = np.random.default_rng(0)
    X = rng.standard_normal((40, 3))
    y = np.r_[np.zeros(20, int), np.ones(20, int)]
    X[y == 1] += 1.0
    r = treecv(df.LinearClassifier(loss="squared"), X, y, cv=KFold(8))
    folds = split_folds(KFold(8), X, y)
    ref = standard_kfold(df.LinearClassifier(loss="squared"), X, y, folds,
                         get_scorer("accuracy"), fit=True)
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
    ref = standard_kfold(MultinomialNB(), X, y, folds, get_scorer("accuracy"),
                         classes=np.unique(y))
    np.testing.assert_array_equal(r.fold_scores, ref)
    assert r.score == pytest.approx(ref.mean(), abs=0)


def test_gaussian_nb_equals_naive_kfold(bc):
    X, y = bc
    cv = KFold(7)
    r = treecv(GaussianNB(), X, y, cv=cv, scoring="neg_log_loss")
    ref = standard_kfold(GaussianNB(), X, y, split_folds(cv, X, y), get_scorer("neg_log_loss"),
                         classes=np.unique(y))
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

    kw = dict(cv=KFold(10, shuffle=True, random_state=3), shuffle=True, random_state=5,
              scoring="roc_auc")
    a = treecv(Pegasos(lam=1e-2), X, y, **kw)
    b = treecv(Wrapped(lam=1e-2), X, y, **kw)
    np.testing.assert_allclose(a.fold_scores, b.fold_scores, rtol=1e-12)


# ---------------------------------------------------------------------------
# SGD-type learners: close to naive k-fold (Theorem 1), statistically
# ---------------------------------------------------------------------------
@pytest.mark.parametrize("make", [lambda: Pegasos(lam=1e-3),
                                  lambda: SGDClassifier(random_state=0, shuffle=False)])
def test_sgd_learners_close_to_standard_kfold(digits, make):
    X, y = digits
    X = StandardScaler().fit_transform(X)
    diffs, ests = [], []
    for rep in range(8):
        cv = KFold(10, shuffle=True, random_state=rep)
        r = treecv(make(), X, y, cv=cv)
        ref = standard_kfold(make(), X, y, split_folds(cv, X, y), get_scorer("accuracy"),
                             classes=np.unique(y))
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
        r = treecv(learner, X, y, cv=cv, scoring="neg_mean_squared_error", shuffle=shuffle,
                   random_state=rep)
        ref = standard_kfold(learner, X, y, split_folds(cv, X, y),
                             get_scorer("neg_mean_squared_error"))
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
    ref = standard_kfold(Counting(), X, y, split_folds(LeaveOneOut(), X, y),
                         get_scorer("accuracy"), classes=np.unique(y))
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


@pytest.mark.parametrize("cv, message", [
    (ShuffleSplit(3, random_state=0), "do not partition"),
    (1, "between 2"),
    (10_000, "between 2"),
])
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
    ref = standard_kfold(GaussianNB(), X, labels,
                         split_folds(KFold(5), X, labels), get_scorer("accuracy"),
                         classes=np.unique(labels))
    np.testing.assert_allclose(r.fold_scores, ref)
    assert set(r.y_pred) <= {"benign", "malignant"}
    # integer regression targets: predictions stay real numbers
    from sklearn.linear_model import SGDRegressor

    r = treecv(SGDRegressor(random_state=0), X, 3 * y, cv=KFold(5),
               scoring="neg_mean_squared_error")
    assert r.y_pred.dtype == np.float64 and not np.all(r.y_pred == np.round(r.y_pred))
