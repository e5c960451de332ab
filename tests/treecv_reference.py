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
        rec(_feed(left, X, y, np.concatenate(folds[m + 1:e + 1]), classes), s, m)
        right = clone(learner) if model is None else model
        rec(_feed(right, X, y, np.concatenate(folds[s:m + 1]), classes), m + 1, e)

    rec(None, 0, len(folds) - 1)
    return out
