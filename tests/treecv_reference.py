"""Brute-force twins of TreeCV, written independently of deltafit's engine.

* :func:`standard_kfold` — "standard CV": a fresh learner per fold, trained on every other fold
  (fed in the paper's fixed hierarchical order: folds 1..k skipping i, samples in splitter order)
  and scored on fold i.
* :func:`recursive_treecv` — Algorithm 1 of Joulani et al. written as the paper's recursion,
  with ``copy.deepcopy`` at every node, driving the learner's own ``partial_fit``.
"""

import copy

import numpy as np
from sklearn.base import clone


def split_folds(cv, X, y):
    return [np.asarray(test) for _, test in cv.split(X, y)]


def _feed(model, X, y, idx, classes):
    if classes is None:
        model.partial_fit(X[idx], y[idx])
    else:
        model.partial_fit(X[idx], y[idx], classes=classes)
    return model


def standard_kfold(learner, X, y, folds, scorer, classes=None, fit=False):
    """Fold scores of k separate models.  ``fit=True`` trains each with ``fit`` on the
    concatenated training rows (deltafit's exact estimators), else one ``partial_fit``."""
    scores = []
    for i, test in enumerate(folds):
        train = np.concatenate([f for j, f in enumerate(folds) if j != i])
        model = clone(learner)
        if fit:
            model.fit(X[train], y[train])
        else:
            _feed(model, X, y, train, classes)
        scores.append(scorer(model, X[test], y[test]))
    return np.array(scores)


def recursive_treecv(learner, X, y, folds, classes=None):
    """Out-of-fold decision values by the paper's recursion (copy strategy, deep copies)."""
    out = np.empty(X.shape[0])

    def rec(model, s, e):
        if s == e:
            f = getattr(model, "decision_function", None) or model.predict
            out[folds[s]] = f(X[folds[s]])
            return
        m = (s + e) // 2
        left = clone(learner) if model is None else copy.deepcopy(model)
        rec(_feed(left, X, y, np.concatenate(folds[m + 1 : e + 1]), classes), s, m)
        right = clone(learner) if model is None else model
        rec(_feed(right, X, y, np.concatenate(folds[s : m + 1]), classes), m + 1, e)

    rec(None, 0, len(folds) - 1)
    return out


# ===========================================================================
# Second, independent set of twins (used by the "independent suite" sections of test_treecv.py,
# test_treecv_parallel.py and test_stream_learners.py).  Written from the spec and the paper
# only: nothing here imports deltafit's engine.
# ===========================================================================
import math  # noqa: E402

from sklearn.base import is_classifier  # noqa: E402


def folds_of(cv, X, y=None, groups=None):
    """Test sets of a splitter, in the order it yields them (fold i = i-th test set)."""
    return [np.asarray(test, dtype=np.int64) for _, test in cv.split(X, y, groups)]


# ---------------------------------------------------------------------------
# the tree of Algorithm 1
# ---------------------------------------------------------------------------
def leaf_phases(k):
    """For every fold i, the training phases of fold i's TreeCV model, in order; a phase is the
    list of chunk numbers added at one node of the tree (Algorithm 1: at node (s, e) with
    m = floor((s + e) / 2) the left child (s..m) learns chunks m+1..e, the right child learns
    chunks s..m)."""
    out = [None] * k

    def rec(s, e, phases):
        if s == e:
            out[s] = phases
            return
        m = (s + e) // 2
        rec(s, m, phases + [list(range(m + 1, e + 1))])
        rec(m + 1, e, phases + [list(range(s, m + 1))])

    rec(0, k - 1, [])
    return out


def tree_update_counts(sizes):
    """(samples fed, update calls) of Algorithm 1 over chunks of the given sizes: every internal
    node (s, e) feeds the samples of chunks s..e (its two phases) in two calls."""
    sizes = list(sizes)
    fed = calls = 0

    def rec(s, e):
        nonlocal fed, calls
        if s == e:
            return
        m = (s + e) // 2
        fed += sum(sizes[s : e + 1])
        calls += 2
        rec(s, m)
        rec(m + 1, e)

    rec(0, len(sizes) - 1)
    return fed, calls


def algorithm1(new_model, update, leaf, k, copy_model=copy.deepcopy):
    """Algorithm 1 of Joulani et al. (2015), literally, strategy "copy".

    ``new_model()`` -> the model that has seen nothing; ``update(model, a, b)`` -> the model
    trained further on chunks a..b (inclusive, in chunk order); ``leaf(model, s)`` evaluates the
    model on chunk s."""

    def treecv(s, e, f):
        if s == e:
            leaf(f, s)
            return
        m = (s + e) // 2
        f2 = copy_model(f)
        f2 = update(f2, m + 1, e)
        treecv(s, m, f2)
        f = update(f, s, m)
        treecv(m + 1, e, f)

    treecv(0, k - 1, new_model())


def algorithm1_decisions(learner, X, y, folds, classes=None, method="decision_function"):
    """Out-of-fold ``method`` values of Algorithm 1 driving ``learner``'s own partial_fit (one
    call per phase, chunks in fold order, samples in splitter order), deep copies."""
    out = np.full(X.shape[0], np.nan)

    def update(model, a, b):
        idx = np.concatenate(folds[a : b + 1])
        if classes is None:
            model.partial_fit(X[idx], y[idx])
        else:
            model.partial_fit(X[idx], y[idx], classes=classes)
        return model

    def leaf(model, s):
        out[folds[s]] = getattr(model, method)(X[folds[s]])

    algorithm1(lambda: clone(learner), update, leaf, len(folds))
    return out


# ---------------------------------------------------------------------------
# standard ("naive") k-fold CV
# ---------------------------------------------------------------------------
def _is_deltafit_exact(learner):
    return type(learner).__module__.startswith("deltafit.models") and all(
        callable(getattr(learner, a, None)) for a in ("fit", "add", "remove")
    )


def naive_train(learner, X, y, chunks, classes=None):
    """A fresh model trained on ``chunks`` (index arrays) fed in the given order.

    deltafit exact estimators: ``fit`` on the first chunks (a classifier waits until both
    classes are there), then ``add`` chunk by chunk; river learners: ``learn_one`` per sample;
    anything else: one ``partial_fit`` per chunk (``classes=`` for classifiers)."""
    if _is_deltafit_exact(learner):
        model, pending = None, []
        for c in chunks:
            if model is None:
                pending.append(c)
                idx = np.concatenate(pending)
                if is_classifier(learner) and np.unique(y[idx]).size < 2:
                    continue
                model = clone(learner).fit(X[idx], y[idx])
            else:
                model.add(X[c], y[c])
        return model
    if callable(getattr(learner, "learn_one", None)) and not hasattr(learner, "partial_fit"):
        model = learner.clone()
        for c in chunks:
            for i in c:
                model.learn_one(dict(enumerate(X[i].tolist())), y[i].item())
        return model
    model = clone(learner)
    if classes is None and is_classifier(learner):
        classes = np.unique(y)
    for c in chunks:
        if y is None:
            model.partial_fit(X[c])
        elif classes is None:
            model.partial_fit(X[c], y[c])
        else:
            model.partial_fit(X[c], y[c], classes=classes)
    return model


def naive_kfold(
    learner, X, y, folds, scorer=None, classes=None, return_models=False, one_call=False
):
    """Standard k-fold CV in the paper's fixed order: fold i's model is a fresh learner trained
    on folds 1..k without i (in fold order, samples in splitter order), scored on fold i.

    ``scorer=None``: accuracy of ``predict`` (river learners: ``predict_one``).  ``one_call``:
    the training folds are fed in one update (for leave-one-out of order-insensitive learners,
    where one update per fold would cost k^2 calls)."""
    scores, models = [], []
    for i, test in enumerate(folds):
        chunks = [f for j, f in enumerate(folds) if j != i]
        if one_call:
            chunks = [np.concatenate(chunks)]
        model = naive_train(learner, X, y, chunks, classes)
        if scorer is not None:
            scores.append(float(scorer(model, X[test], y[test])))
        else:
            if hasattr(model, "predict_one") and not hasattr(model, "predict"):
                pred = np.array([model.predict_one(dict(enumerate(X[t].tolist()))) for t in test])
            else:
                pred = model.predict(X[test])
            scores.append(float(np.mean(pred == y[test])))
        models.append(model)
    return (np.array(scores), models) if return_models else np.array(scores)


# ---------------------------------------------------------------------------
# plain-Python stream learners, from the formulas of the spec (no numba, no tricks)
# ---------------------------------------------------------------------------
class _AppendConstant:
    """The constant feature ``s`` appended to every row (``s = None``: no intercept)."""

    s = None

    def _aug(self, X):
        X = np.asarray(X, dtype=np.float64)
        if self.s is None:
            return X
        return np.hstack([X, np.full((X.shape[0], 1), self.s)])


class PlainPegasos(_AppendConstant):
    """Pegasos (Shalev-Shwartz et al. 2011, Algorithm 1), one sample at a time.

    ``w`` over [x, s] (s = intercept_scaling, or no constant feature without intercept); step t
    (1-based), eta_t = 1/(lam t): w <- (1 - eta_t lam) w + eta_t y x if y<w, x> < 1 (w before
    the step), else w <- (1 - eta_t lam) w; projection: w <- w min(1, (1/sqrt(lam)) / ||w||).
    Labels: ``y_pm`` in {-1, +1}."""

    def __init__(self, lam, projection=False, fit_intercept=True, intercept_scaling=1.0):
        self.lam = float(lam)
        self.projection = projection
        self.s = float(intercept_scaling) if fit_intercept else None
        self.w = None
        self.t = 0

    def partial_fit(self, X, y_pm):
        Xa = self._aug(X)
        if self.w is None:
            self.w = [0.0] * Xa.shape[1]
        w = self.w
        for x, yi in zip(Xa.tolist(), np.asarray(y_pm, dtype=np.float64).tolist()):
            self.t += 1
            eta = 1.0 / (self.lam * self.t)
            margin = yi * math.fsum(wj * xj for wj, xj in zip(w, x))
            shrink = 1.0 - eta * self.lam
            if margin < 1.0:
                w = [shrink * wj + eta * yi * xj for wj, xj in zip(w, x)]
            else:
                w = [shrink * wj for wj in w]
            if self.projection:
                nrm = math.sqrt(math.fsum(wj * wj for wj in w))
                if nrm > 0.0:
                    f = min(1.0, (1.0 / math.sqrt(self.lam)) / nrm)
                    w = [f * wj for wj in w]
        self.w = w
        return self

    @property
    def coef(self):
        w = np.asarray(self.w)
        return w[:-1] if self.s is not None else w

    @property
    def intercept(self):
        return self.w[-1] * self.s if self.s is not None else 0.0

    def decision(self, X):
        return np.asarray(X, dtype=np.float64) @ self.coef + self.intercept


class PlainLSQSGD(_AppendConstant):
    """Robust stochastic approximation for 1/2 (<w, x> - y)^2 over ||w|| <= radius (Nemirovski et
    al. 2009, Euclidean setup), one sample at a time: gamma_t = alpha, or 1/sqrt(t) when alpha is
    None; the prediction uses w~ = sum_t gamma_t w_t / sum_t gamma_t over the points w_t at which
    the gradients were taken (w_1 = 0); w_{t+1} = Proj(w_t - gamma_t (<w_t, x_t> - y_t) x_t)."""

    def __init__(self, alpha=None, radius=1.0, fit_intercept=True, intercept_scaling=1.0):
        self.alpha = alpha
        self.radius = float(radius)
        self.s = float(intercept_scaling) if fit_intercept else None
        self.w = None
        self.S = None  # sum_t gamma_t w_t
        self.G = 0.0  # sum_t gamma_t
        self.t = 0

    def partial_fit(self, X, y):
        Xa = self._aug(X)
        if self.w is None:
            self.w = [0.0] * Xa.shape[1]
            self.S = [0.0] * Xa.shape[1]
        w, S = self.w, self.S
        for x, yi in zip(Xa.tolist(), np.asarray(y, dtype=np.float64).tolist()):
            self.t += 1
            g = float(self.alpha) if self.alpha is not None else 1.0 / math.sqrt(self.t)
            S = [sj + g * wj for sj, wj in zip(S, w)]
            self.G += g
            resid = math.fsum(wj * xj for wj, xj in zip(w, x)) - yi
            w = [wj - g * resid * xj for wj, xj in zip(w, x)]
            nrm = math.sqrt(math.fsum(wj * wj for wj in w))
            if nrm > self.radius:
                w = [wj * (self.radius / nrm) for wj in w]
        self.w, self.S = w, S
        return self

    @property
    def average(self):
        return np.asarray(self.S) / self.G

    @property
    def coef(self):
        a = self.average
        return a[:-1] if self.s is not None else a

    @property
    def intercept(self):
        return self.average[-1] * self.s if self.s is not None else 0.0

    def decision(self, X):
        return np.asarray(X, dtype=np.float64) @ self.coef + self.intercept


def plain_treecv_decisions(make_plain, X, t, folds):
    """Algorithm 1 over a Plain* learner (targets ``t``: ±1 for Pegasos); out-of-fold decisions."""
    out = np.full(X.shape[0], np.nan)

    def update(model, a, b):
        idx = np.concatenate(folds[a : b + 1])
        return model.partial_fit(X[idx], t[idx])

    def leaf(model, s):
        out[folds[s]] = model.decision(X[folds[s]])

    algorithm1(make_plain, update, leaf, len(folds))
    return out


def plain_naive_decisions(make_plain, X, t, folds):
    """Standard k-fold with a Plain* learner (fixed fold order); out-of-fold decisions."""
    out = np.full(X.shape[0], np.nan)
    for i, test in enumerate(folds):
        model = make_plain()
        for j, f in enumerate(folds):
            if j != i:
                model.partial_fit(X[f], t[f])
        out[test] = model.decision(X[test])
    return out


# ---------------------------------------------------------------------------
# order-exact fingerprints of training histories (for instrumented learners)
# ---------------------------------------------------------------------------
_P = 2_147_483_647  # 2**31 - 1: the digests are exact integers in a float64


def sequence_digest(ids):
    """A polynomial hash of a sequence of sample ids (order matters)."""
    h = 7
    for i in ids:
        h = (h * 48271 + int(i) + 1) % _P
    return float(h)


def phase_set_digest(ids, lengths):
    """The digest of ``ids`` cut into consecutive segments of ``lengths``, each segment sorted:
    equal for any order within the segments (the randomized TreeCV), or NaN when the lengths do
    not add up."""
    ids = list(ids)
    if sum(lengths) != len(ids):
        return float("nan")
    out, a = [], 0
    for n in lengths:
        out += sorted(ids[a : a + n]) + [-1]
        a += n
    return sequence_digest(out)


# ---------------------------------------------------------------------------
# an instrumented learner and scorer (module level: picklable for joblib / dask workers)
# ---------------------------------------------------------------------------
from sklearn.base import BaseEstimator  # noqa: E402


class HistoryRecorder(BaseEstimator):
    """A "learner" whose model is the sequence of sample ids it has learned (column 0 of X
    holds the id).  ``partial_fit`` appends (never in place: a shallow copy could not alias it),
    ``snapshot``/``restore`` save and put back the sequence."""

    def __init__(self):
        pass

    def partial_fit(self, X, y=None, classes=None):
        ids = np.asarray(X)[:, 0].astype(np.int64).tolist()
        self.history_ = list(getattr(self, "history_", [])) + ids
        self.calls_ = getattr(self, "calls_", 0) + 1
        return self

    def fit(self, X, y=None):
        self.__dict__.pop("history_", None)
        self.__dict__.pop("calls_", None)
        return self.partial_fit(X, y)

    def predict(self, X):
        return np.zeros(len(X))

    def snapshot(self):
        return (list(self.history_), self.calls_)

    def restore(self, state):
        self.history_, self.calls_ = list(state[0]), state[1]
        return self


class HistoryScorer:
    """Scores fold i's model by a digest of what it learned.

    ``mode="sequence"``: the exact order (fixed-order TreeCV); ``mode="phases"``: the order of
    the training phases but any order inside a phase (randomized TreeCV); ``mode="match"``: 1.0
    when the exact order is the one Algorithm 1 prescribes, else 0.0.  A fold whose rows do not
    come in the splitter's order scores -1."""

    def __init__(self, folds, mode="sequence"):
        self.folds = [np.asarray(f).tolist() for f in folds]
        self.mode = mode
        self.phases = leaf_phases(len(self.folds))

    def expected(self, i):
        return [s for ph in self.phases[i] for c in ph for s in self.folds[c]]

    def lengths(self, i):
        return [sum(len(self.folds[c]) for c in ph) for ph in self.phases[i]]

    def digest(self, i, history):
        if self.mode == "sequence":
            return sequence_digest(history)
        if self.mode == "phases":
            return phase_set_digest(history, self.lengths(i))
        return float(list(history) == self.expected(i))

    def expected_scores(self):
        return np.array([self.digest(i, self.expected(i)) for i in range(len(self.folds))])

    def __call__(self, est, X, y=None):
        ids = np.asarray(X)[:, 0].astype(np.int64).tolist()
        matches = [i for i, f in enumerate(self.folds) if f == ids]
        if len(matches) != 1:
            return -1.0
        return self.digest(matches[0], getattr(est, "history_", []))
