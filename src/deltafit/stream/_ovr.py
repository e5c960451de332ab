"""One-vs-rest over a binary online learner: K classes from K binary stream learners.

Pegasos (Shalev-Shwartz et al., "Pegasos: primal estimated sub-gradient solver for SVM") and
NORMA (Kivinen, Smola and Williamson, "Online learning with kernels") are binary as their papers
define them.  :class:`OneVsRest` learns K ≥ 3 classes the way scikit-learn's
``OneVsRestClassifier`` does, but online: learner k sees every sample with target +1 if its
label is ``classes_[k]`` and −1 otherwise, and the prediction is the class of the largest
decision value.  Each learner is exactly the binary learner trained alone on its coded
targets (the tests compare them bit for bit).
"""

from __future__ import annotations

import copy
from typing import Any, TypeVar

import numpy as np
from numpy.typing import ArrayLike, NDArray
from sklearn.base import BaseEstimator, ClassifierMixin, clone, is_classifier
from sklearn.exceptions import NotFittedError
from sklearn.utils import get_tags
from sklearn.utils._param_validation import HasMethods
from sklearn.utils.multiclass import check_classification_targets
from sklearn.utils.validation import check_is_fitted, column_or_1d

from deltafit.stream._base import validate_rows
from deltafit.stream._features import as_row
from deltafit.utils._transaction import atomic
from deltafit.utils._validation import check_rows

__all__ = ["OneVsRest"]

_T = TypeVar("_T", bound="OneVsRest")

_CODES = np.array([-1, 1])


def _copy(learner):
    """A copy owning its state: the learner's own ``__copy__`` if it has one (the stream
    learners copy their state vector), else a deep copy."""
    if any("__copy__" in c.__dict__ for c in type(learner).__mro__ if c is not object):
        return copy.copy(learner)
    return copy.deepcopy(learner)


class OneVsRest(ClassifierMixin, BaseEstimator):
    """K classes from K binary online learners, one per class (one-vs-rest, online).

    Learner k is ``clone(estimator)`` trained on every sample with target +1 if the label is
    ``classes_[k]``, else −1 (``partial_fit(X, t_k, classes=[-1, 1])``, so it starts at the
    first sample even if that one is negative); the prediction is ``classes_[argmax_k f_k(x)]``
    (scikit-learn's ``OneVsRestClassifier``).  With two classes there is a single learner
    trained on the labels themselves, so the wrapper predicts exactly as the binary learner.

    Parameters
    ----------
    estimator : binary classifier with ``partial_fit`` and ``decision_function``
        E.g. :class:`~deltafit.stream.Pegasos` or :class:`~deltafit.stream.NORMA`.
    classes : array-like or None, default=None
        All the labels of the stream.  Needed by :meth:`learn_one` before the first sample (a
        one-vs-rest learner cannot join a stream late: it would have missed its negatives);
        otherwise ``fit`` takes the labels of ``y`` and the first ``partial_fit`` its
        ``classes=`` argument or the labels of its ``y``.

    Attributes
    ----------
    classes_ : ndarray of shape (K,)
    estimators_ : list of estimators
        One per class (K ≥ 3), or the single binary learner (K = 2).
    n_features_in_ : int
    n_model_computations_ : int
        The learners' ``n_model_computations_`` summed (0 for purely online learners).

    Notes
    -----
    A sample costs K updates of the binary learner; ``decision_function`` has shape
    (n_samples, K) for K ≥ 3 and (n_samples,) for K = 2 (scikit-learn's convention).  Labels
    outside ``classes_`` raise ValueError before any learner changes.

    Examples
    --------
    >>> from sklearn.datasets import load_iris
    >>> from sklearn.preprocessing import StandardScaler
    >>> from deltafit.stream import OneVsRest, Pegasos
    >>> X, y = load_iris(return_X_y=True)
    >>> X = StandardScaler().fit_transform(X)
    >>> clf = OneVsRest(Pegasos(lam=1e-2, shuffle=True, random_state=0)).fit(X, y)
    >>> len(clf.estimators_), clf.decision_function(X).shape
    (3, (150, 3))
    >>> bool(clf.score(X, y) > 0.7)
    True
    """

    _parameter_constraints: dict = {
        "estimator": [HasMethods(["partial_fit", "decision_function", "get_params"])],
        "classes": [None, "array-like"],
    }

    def __init__(self, estimator: BaseEstimator, classes: ArrayLike | None = None) -> None:
        self.estimator = estimator
        self.classes = classes

    # ----------------------------------------------------------------- checks
    def _check_estimator(self):
        """Validate the parameters (scikit-learn's ``_validate_params``), then that the
        estimator is a classifier."""
        self._validate_params()
        est = self.estimator
        try:
            ok = is_classifier(est)
        except AttributeError:
            ok = False
        if not ok:
            raise ValueError(
                "OneVsRest needs a scikit-learn binary classifier with partial_fit and "
                f"decision_function (e.g. deltafit.stream.Pegasos or NORMA), got "
                f"{type(est).__name__}"
            )

    @staticmethod
    def _classes_of(classes, what):
        c = np.unique(np.asarray(classes))
        if c.ndim != 1 or c.size < 2:
            raise ValueError(
                f"{what} has one class ({c.tolist()}): OneVsRest needs at least two classes"
            )
        return c

    def _labels(self, y):
        y = column_or_1d(y, warn=True)
        check_classification_targets(y)
        return y

    def _check_within(self, y, classes, what):
        unseen = np.setdiff1d(np.unique(y), classes)
        if unseen.size:
            raise ValueError(
                f"y has labels {unseen.tolist()[:10]} that are not in {what} "
                f"{classes.tolist()[:10]}"
            )

    # --------------------------------------------------------------- learning
    def _start(self, classes):
        self.classes_ = classes
        k = 1 if classes.size == 2 else classes.size
        self.estimators_ = [clone(self.estimator) for _ in range(k)]

    def _feed(self, X, y):
        """Every learner learns the rows of ``X`` (labels ``y``, checked) in order."""
        if len(self.estimators_) == 1:
            self.estimators_[0].partial_fit(X, y, classes=self.classes_)
            return
        for c, est in zip(self.classes_, self.estimators_):
            est.partial_fit(X, np.where(y == c, 1, -1), classes=_CODES)

    def fit(self: _T, X: ArrayLike, y: ArrayLike) -> _T:
        """Start afresh and learn the rows of ``X`` in order (labels ``y``).

        Learner k is ``clone(estimator).fit(X, t_k)`` when ``t_k`` holds both codes, else its
        ``partial_fit(X, t_k, classes=[-1, 1])`` (a class of ``classes`` absent from ``y``).

        Returns
        -------
        self
        """
        self._check_estimator()
        X, y = validate_rows(self, X, y, reset=True)
        y = self._labels(y)
        if self.classes is None:
            classes = self._classes_of(y, "y")
        else:
            classes = self._classes_of(self.classes, "classes")
            self._check_within(y, classes, "classes")
        self._start(classes)
        if len(self.estimators_) == 1:
            if np.unique(y).size == 2:
                self.estimators_[0].fit(X, y)
            else:
                self.estimators_[0].partial_fit(X, y, classes=classes)
            return self
        for c, est in zip(classes, self.estimators_):
            t = np.where(y == c, 1, -1)
            if np.unique(t).size == 2:
                est.fit(X, t)
            else:
                est.partial_fit(X, t, classes=_CODES)
        return self

    def partial_fit(self: _T, X: ArrayLike, y: ArrayLike, classes: ArrayLike | None = None) -> _T:
        """Learn the rows of ``X`` in order; nothing changes when the input is refused.

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)
        y : array-like of shape (n_samples,)
        classes : array-like, optional
            Every label of the stream, on the first call (default: the ``classes``
            parameter, else the labels of this ``y``); later calls may repeat it.

        Returns
        -------
        self
        """
        self._check_estimator()
        first = not hasattr(self, "estimators_")
        if first:
            for a in ("classes_", "n_features_in_", "feature_names_in_"):
                self.__dict__.pop(a, None)
            try:
                X, y = validate_rows(self, X, y, reset=True)
                y = self._labels(y)
                given = classes if classes is not None else self.classes
                known = self._classes_of(
                    y if given is None else given, "y" if given is None else "classes"
                )
                self._check_within(y, known, "classes")
            except BaseException:
                for a in ("n_features_in_", "feature_names_in_"):
                    self.__dict__.pop(a, None)
                raise
            self._start(known)
        else:
            X, y = validate_rows(self, X, y, reset=False)
            y = self._labels(y)
            if classes is not None and not np.array_equal(
                np.unique(np.asarray(classes)), self.classes_
            ):
                raise ValueError(
                    f"classes={np.asarray(classes).tolist()} differs from the "
                    f"classes_ {self.classes_.tolist()} of the first call"
                )
            self._check_within(y, self.classes_, "classes_")
        self._feed(X, y)
        return self

    def _row(self, x):
        return as_row(self, x, learn=False)

    def _grow(self, d):
        """A dict sample brought new features: every learner grows (zero weights) to ``d``."""
        for est in self.estimators_:
            est._grow(d)
        self.n_features_in_ = d

    def learn_one(self: _T, x: dict | ArrayLike, y: Any) -> _T:
        """Learn one sample (river's spelling); ``x`` is a 1-d array or a dict.

        The learner must know every class first: ``OneVsRest(est, classes=...)`` or an
        earlier ``fit`` / ``partial_fit``.  A dict's new features grow every learner
        (``stream/_features.py``); learners without that ability (not deltafit's)
        ignore them.
        """
        if not hasattr(self, "estimators_") and self.classes is None:
            raise ValueError(
                "OneVsRest.learn_one needs every class before the first sample: "
                "give classes=[...] (a one-vs-rest learner cannot start late)"
            )
        if not isinstance(x, dict):
            return self.partial_fit(as_row(self, x), [y])
        with atomic(self):  # a refused sample adds no feature and grows nothing
            row = as_row(self, x)
            d = self.__dict__.get("n_features_in_")
            if d is not None and row.shape[1] > d:
                if all(callable(getattr(e, "_grow", None)) for e in self.estimators_):
                    check_rows(row, None, "x", "OneVsRest")  # all checked before
                    self._check_within(self._labels([y]), self.classes_, "classes_")
                    self.estimators_ = [_copy(e) for e in self.estimators_]
                    self._grow(row.shape[1])
                else:
                    row = row[:, :d]
            return self.partial_fit(row, [y])

    # ------------------------------------------------------------- prediction
    def decision_function(self, X: ArrayLike) -> NDArray[np.float64]:
        """Decision values: shape (n_samples, K), column k from learner k (K ≥ 3); the binary
        learner's (n_samples,) for K = 2 (positive means ``classes_[1]``)."""
        check_is_fitted(self, "estimators_")
        X = validate_rows(self, X, reset=False)
        if len(self.estimators_) == 1:
            return self.estimators_[0].decision_function(X)
        return np.column_stack([est.decision_function(X) for est in self.estimators_])

    def predict(self, X: ArrayLike) -> NDArray[Any]:
        """``classes_[argmax_k f_k(x)]`` (K ≥ 3; ties to the first class); the binary learner's
        prediction for K = 2."""
        check_is_fitted(self, "estimators_")
        if len(self.estimators_) == 1:
            X = validate_rows(self, X, reset=False)
            return self.estimators_[0].predict(X)
        return self.classes_[np.argmax(self.decision_function(X), axis=1)]

    def predict_one(self, x: dict | ArrayLike) -> Any:
        """The prediction for one sample (river's spelling)."""
        if not hasattr(self, "estimators_"):
            raise NotFittedError("this OneVsRest has not learned any sample yet")
        return self.predict(self._row(x))[0]

    @property
    def n_model_computations_(self) -> int:
        check_is_fitted(self, "estimators_")
        return int(sum(getattr(e, "n_model_computations_", 0) or 0 for e in self.estimators_))

    # ---------------------------------------------------------- copies, states
    def snapshot(self) -> list[Any]:
        """The learners' states (:meth:`restore`; TreeCV's save/revert)."""
        check_is_fitted(self, "estimators_")
        if not callable(getattr(self.estimators_[0], "snapshot", None)):
            raise ValueError(
                f"{type(self.estimator).__name__} has no snapshot(); use TreeCV's strategy='copy'"
            )
        return [e.snapshot() for e in self.estimators_]

    def restore(self: _T, snapshot: list[Any]) -> _T:
        """Put back the states returned by :meth:`snapshot`."""
        check_is_fitted(self, "estimators_")
        if not isinstance(snapshot, list) or len(snapshot) != len(self.estimators_):
            raise ValueError(
                f"a snapshot of this OneVsRest is a list of {len(self.estimators_)} learner states"
            )
        for e, s in zip(self.estimators_, snapshot):
            e.restore(s)
        return self

    def __copy__(self):
        new = type(self).__new__(type(self))
        new.__dict__.update(self.__dict__)
        if "estimators_" in self.__dict__:
            new.estimators_ = [_copy(e) for e in self.estimators_]
        return new

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        try:
            inner = get_tags(self.estimator)
            tags.input_tags = copy.copy(inner.input_tags)
            tags.non_deterministic = inner.non_deterministic
        except (AttributeError, TypeError):
            pass
        tags.classifier_tags.multi_class = True
        return tags
