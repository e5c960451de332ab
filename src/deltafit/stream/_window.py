"""Sliding-window learners over a batch estimator: the window, the model, the predictions.

:class:`SlidingWindow` (the paper's SW baseline) and :class:`~deltafit.stream.KDR` share
:class:`WindowLearner`: the last ``window`` samples in a ring buffer, a batch model computed on
them from time to time (``clone(estimator).fit``), river-style ``learn_one`` / ``predict_one`` and
scikit-learn-style ``partial_fit`` / ``predict``.  They differ only in *when* they recompute.
A classifier takes as many classes as its batch learner (deltafit's: any number, one-vs-rest;
a model's decision values are then K per sample).  Dict samples follow the feature-space
policy of ``stream/_features.py``: the window grows a zero column for a new feature, and the
current model reads the columns it was fitted on until the next model computation.
"""

from __future__ import annotations

from numbers import Integral
from typing import Any, TypeVar, cast

import numpy as np
from numpy.typing import ArrayLike, NDArray
from sklearn.base import BaseEstimator, clone, is_classifier
from sklearn.exceptions import NotFittedError
from sklearn.utils import check_array, get_tags
from sklearn.utils._param_validation import HasMethods
from sklearn.utils.multiclass import check_classification_targets
from sklearn.utils.validation import column_or_1d

from deltafit.models import UpdatableMixin
from deltafit.stream._features import as_row
from deltafit.utils._params import Number, validate_estimator_params
from deltafit.utils._transaction import atomic
from deltafit.utils._validation import check_rows

__all__ = ["WindowLearner", "SlidingWindow", "as_row"]

_T = TypeVar("_T", bound="WindowLearner")


def _binary(estimator):
    """Whether a classifier takes two classes only (its scikit-learn tags say so)."""
    try:
        return get_tags(estimator).classifier_tags.multi_class is False
    except AttributeError:
        return False


class _Decision:
    """A fast ``X -> decision values`` for a fitted model: its
    :class:`~deltafit.models.ScoreFunction` for a deltafit estimator with its
    rows (the per-sample loops call it once a sample); other estimators go through
    ``predict``."""

    def __init__(self, model):
        self.model = model
        self.problem = model.problem_ if isinstance(model, UpdatableMixin) else None
        self.fast = self.problem is not None and self.problem.keeps_rows
        if self.fast:
            self.score = self.problem.score_function()

    def __call__(self, X):
        return self.score(X)

    def predict(self, X):
        if not self.fast:
            return self.model.predict(X)
        z = self(X)
        if not np.all(np.isfinite(z)):
            raise ValueError("X contains NaN or infinity")
        return self.problem.decode_targets(z)


class WindowLearner(BaseEstimator):
    """Base of the sliding-window learners (not used directly).

    Parameters
    ----------
    estimator : scikit-learn estimator
        The batch learner, cloned and fitted on the window at every model computation; a deltafit
        estimator for :class:`KDR` (its bounds need one).
    window : int
        Number of most recent samples kept and trained on.
    initial : int or None
        Samples seen before the first model computation (None: ``window``); until then the
        prediction is the most frequent label so far (the mean for regressors).
    """

    _parameter_constraints: dict = {
        "estimator": [HasMethods(["fit", "predict", "get_params"])],
        "window": [Number(Integral, 2, None, closed="left")],
        "initial": [None, Number(Integral, 1, None, closed="left")],
    }

    def __init__(
        self, estimator: BaseEstimator, window: int = 500, initial: int | None = None
    ) -> None:
        self.estimator = estimator
        self.window = window
        self.initial = initial

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        inner = get_tags(self.estimator)
        tags.estimator_type = inner.estimator_type
        # as many classes as the batch learner takes (deltafit's: any, one-vs-rest)
        tags.classifier_tags = inner.classifier_tags
        tags.regressor_tags = inner.regressor_tags
        if tags.regressor_tags is not None:
            # a window learner fits only its last `window` samples, by design
            tags.regressor_tags.poor_score = True
        return tags

    # ---------------------------------------------------------------- setup
    def _check_params(self):
        """Validate the parameters (scikit-learn's ``_validate_params``, the subclass's rules on
        the estimator, the estimator's own parameters, ``initial <= window``) and return
        ``(window, initial)``."""
        self._validate_params()
        self._check_estimator()
        # a bad parameter of the estimator fails here, not in the first model computation
        # mid-stream
        validate_estimator_params(self.estimator)
        window = int(self.window)
        initial = window if self.initial is None else int(self.initial)
        if initial > window:
            raise ValueError(f"initial ({initial}) cannot exceed window ({window})")
        return window, initial

    def _check_estimator(self):
        """Subclass hook: what the learner needs of its estimator beyond its methods."""

    def _reset(self, d):
        window, initial = self._check_params()
        self._window_, self._initial_ = window, initial
        self.n_features_in_ = d
        self._X = np.zeros((window, d))
        self._y = None  # allocated with the first label's dtype
        self._start = 0  # ring position of the oldest sample
        self._count = 0  # samples in the window
        self.n_samples_seen_ = 0
        self.n_model_computations_ = 0
        self.model_ = None
        self._model_width = d  # the columns the current model reads
        self._decision = None
        self._labels = {}  # label -> count before the first model
        self._seen_labels = set()
        self._mean = 0.0
        self._classifier = is_classifier(self.estimator)
        self._cached = None  # (row bytes, decision value) of the last prediction
        self._cached_pred = None  # (row bytes, label) for estimators without a fast path
        self._setup()

    def _setup(self):
        """Subclass hook: state reset with the learner."""

    def _ensure(self, row):
        if not hasattr(self, "_X"):
            self._reset(row.shape[1])

    def _check_x(self, row):
        row = check_rows(row, self.n_features_in_, "x", type(self).__name__)
        return row

    def _check_y(self, y):
        if self._classifier:
            if isinstance(y, float) and not np.isfinite(y):
                raise ValueError("y is NaN or infinite")
            if _binary(self.estimator):
                seen = list(self._labels) if self.model_ is None else list(self.model_.classes_)
                if len(seen) >= 2 and y not in seen:
                    raise ValueError(
                        f"y={y!r} is not among the labels {seen} seen so far; "
                        f"{type(self.estimator).__name__} is binary"
                    )
            return y
        try:
            v = float(y)
        except (TypeError, ValueError) as exc:
            raise ValueError(f"y must be a number for a regressor, got {y!r}") from exc
        if not np.isfinite(v):
            raise ValueError("y is NaN or infinite")
        return v

    # ---------------------------------------------------------------- window
    def _ring(self):
        """Ring positions from the oldest sample to the newest."""
        return (self._start + np.arange(self._count)) % self._window_

    def _window_data(self):
        pos = self._ring()
        return self._X[pos], self._y[pos]

    def _push(self, row, y):
        """Append a sample; the position it took and whether the oldest one was dropped."""
        if self._y is None:
            probe = np.asarray([y])
            dtype = probe.dtype if probe.dtype.kind in "biuf" else object
            self._y = np.zeros(self._window_, dtype=dtype)
        if self._count < self._window_:
            pos = (self._start + self._count) % self._window_
            self._count += 1
        else:
            pos = self._start
            self._start = (self._start + 1) % self._window_
        self._X[pos] = row[0]
        self._y[pos] = y
        self.n_samples_seen_ += 1
        if self.model_ is None:
            if self._classifier:
                self._seen_labels.add(y)
                self._labels[y] = self._labels.get(y, 0) + 1
            else:
                self._mean += (y - self._mean) / self.n_samples_seen_
        return pos

    def _compute(self, last=None):
        """A model computation on the current window (or its ``last`` samples); False (model
        kept) when those samples hold a single class."""
        X, y = self._window_data()
        if last is not None:
            X, y = X[-last:], y[-last:]
        if self._classifier and np.unique(y).size < 2:
            return False
        model = clone(self.estimator).fit(X, y)
        self.model_ = model
        self._model_width = X.shape[1]
        self._decision = _Decision(model)
        self._cached = self._cached_pred = None
        self.n_model_computations_ += 1
        self._labels = {}
        return True

    def _grow(self, d):
        """A dict sample brought new features: the window gets zero columns up to ``d``
        (the model keeps reading its own columns until the next computation)."""
        X = self._X
        self._X = np.hstack([X, np.zeros((X.shape[0], d - X.shape[1]))])
        self.n_features_in_ = d
        self._cached = self._cached_pred = None

    def _model_rows(self, X):
        """``X`` restricted to the columns of the current model (features it has not learned
        from are ignored)."""
        d = self._model_width
        return X if X.shape[1] == d else X[:, :d]

    # ------------------------------------------------------------ prediction
    def _decision_of(self, row):
        """Decision value of β₁ (the current model) for one row, cached for ``learn_one``."""
        key = row.tobytes()
        if self._cached is not None and self._cached[0] == key:
            return self._cached[1]
        z = self._decision(row)[0]  # a float, or K values of a multiclass model
        z = float(z) if np.ndim(z) == 0 else z
        self._cached = (key, z)
        return z

    def predict_one(self, x: dict | ArrayLike) -> Any:
        """The current model's prediction for one sample (river's spelling)."""
        if not hasattr(self, "_X"):
            raise NotFittedError(f"this {type(self).__name__} has not seen any sample yet")
        return self._predict_row(self._check_x(as_row(self, x, learn=False)))

    def _predict_row(self, row):
        """Prediction for one validated row (the last one is cached for ``learn_one``)."""
        if self.model_ is None:
            if self._classifier:
                return max(self._labels, key=self._labels.get)
            return self._mean
        row = self._model_rows(row)
        if self._decision.fast:
            z = self._decision_of(row)
            return self.model_._decode_y(np.array([z]))[0] if self._classifier else z
        key = row.tobytes()
        if self._cached_pred is not None and self._cached_pred[0] == key:
            return self._cached_pred[1]
        pred = self.model_.predict(row)[0]
        self._cached_pred = (key, pred)
        return pred

    def predict(self, X: ArrayLike) -> NDArray[Any]:
        """The current model's predictions for the rows of X."""
        if not hasattr(self, "_X"):
            raise NotFittedError(f"this {type(self).__name__} has not seen any sample yet")
        X = cast(np.ndarray, check_array(X, dtype=np.float64))  # sklearn is untyped
        if X.shape[1] != self.n_features_in_:
            raise ValueError(
                f"X has {X.shape[1]} features, but {type(self).__name__} is "
                f"expecting {self.n_features_in_} features as input"
            )
        if self.model_ is None:
            one = self.predict_one(X[0])
            return np.full(X.shape[0], one, dtype=object if isinstance(one, str) else None)
        return self._decision.predict(self._model_rows(X))

    def score(self, X: ArrayLike, y: ArrayLike, sample_weight: ArrayLike | None = None) -> float:
        """Accuracy (classifiers) or R² (regressors) of the current model on (X, y)."""
        from sklearn.metrics import accuracy_score, r2_score

        metric = accuracy_score if is_classifier(self.estimator) else r2_score
        return float(metric(y, self.predict(X), sample_weight=sample_weight))

    # --------------------------------------------------------------- learning
    def learn_one(self: _T, x: dict | ArrayLike, y: Any) -> _T:
        """Learn one sample (river's spelling): it enters the window, the oldest sample leaves
        once the window is full, and the learner decides whether to recompute its model."""
        if hasattr(self, "_X") and not isinstance(x, dict):
            row, y = self._check_sample(x, y, False)
        elif hasattr(self, "_X"):
            with atomic(self, attrs=("_dict_keys",)):  # a rejected dict adds no feature
                row, y = self._check_sample(x, y, False)
        else:
            with atomic(self):  # a rejected first sample leaves nothing behind (width, dict keys)
                row, y = self._check_sample(x, y, True)
        self._learn(row, y)
        return self

    def _check_sample(self, x, y, fresh):
        """The validated (1, d) row and label of one sample; the first sets up the state, a
        dict with new features grows it (after every check)."""
        row = as_row(self, x)
        if fresh:  # checked before the first sample sets the width
            row = check_rows(row, None, "x", type(self).__name__)
        self._ensure(row)
        if row.shape[1] > self.n_features_in_ and isinstance(x, dict):
            row = check_rows(row, row.shape[1], "x", type(self).__name__)
            y = self._check_y(y)
            self._grow(row.shape[1])
            return row, y
        return self._check_x(row), self._check_y(y)

    def _learn(self, row, y):
        raise NotImplementedError

    @property
    def classes_(self) -> NDArray[Any]:
        """Labels seen so far, sorted (classifiers)."""
        if not hasattr(self, "_X"):
            raise AttributeError("classes_ is defined once the learner has seen samples")
        if self.model_ is not None and hasattr(self.model_, "classes_"):
            return self.model_.classes_
        return np.array(sorted(self._seen_labels))

    def _maybe_first_model(self):
        if self.model_ is None and self.n_samples_seen_ >= self._initial_:
            return self._compute()
        return False

    def partial_fit(self: _T, X: ArrayLike, y: ArrayLike, classes: ArrayLike | None = None) -> _T:
        """Learn the rows of ``X`` in order (``learn_one`` for each)."""
        return self._partial_fit(X, y, reset=False)

    def fit(self: _T, X: ArrayLike, y: ArrayLike) -> _T:
        """Start afresh and learn the rows of ``X`` in order."""
        return self._partial_fit(X, y, reset=True)

    def _partial_fit(self, X, y, reset):
        fresh = reset or not hasattr(self, "_X")
        if fresh:  # the parameters first (checked in full by _reset, before any change)
            self._validate_params()
        X = check_array(X, dtype=np.float64)
        d = None if fresh else self.n_features_in_
        if d is not None and X.shape[1] != d:
            raise ValueError(
                f"X has {X.shape[1]} features, but {type(self).__name__} is "
                f"expecting {d} features as input"
            )
        y = column_or_1d(y, warn=True)
        if y.shape[0] != X.shape[0]:
            raise ValueError(f"y has {y.shape[0]} labels for {X.shape[0]} rows of X")
        if not is_classifier(self.estimator):
            try:
                y = np.asarray(y, dtype=np.float64)
            except (TypeError, ValueError) as exc:
                raise ValueError(f"y must be numeric for a regressor: {exc}") from exc
            if not np.isfinite(y).all():
                raise ValueError("y contains NaN or infinity")
        else:
            check_classification_targets(y)
            if y.dtype.kind == "f" and not np.isfinite(y).all():
                raise ValueError("y contains NaN or infinity")
            if _binary(self.estimator):  # check before learning
                seen = set() if fresh else set(self.classes_.tolist())
                labels = seen | set(np.unique(y).tolist())
                if len(labels) > 2:
                    raise ValueError(
                        f"Only binary classification is supported: y has labels "
                        f"{sorted(labels, key=str)[:10]} and {type(self.estimator).__name__} "
                        "is binary (wrap the learner in OneVsRestClassifier for more classes)"
                    )
        if fresh:
            self.__dict__.pop("_dict_keys", None)
            self._reset(X.shape[1])
        for i in range(X.shape[0]):
            self._learn(X[i : i + 1], self._check_y(y[i].item() if y.dtype != object else y[i]))
        return self


class SlidingWindow(WindowLearner):
    """Sliding window with periodic recomputation (SW, the baseline of Sivan et al. §4.4).

    The model is computed from the last ``window`` samples every ``period`` samples (after the
    first computation), whatever the stream does.

    Parameters
    ----------
    estimator : scikit-learn estimator
        Batch learner (e.g. ``deltafit.KernelClassifier(loss="squared_hinge", kernel="rbf")``).
    window : int, default=500
    period : int, default=100
        Samples between two model computations.
    initial : int or None, default=None
        Samples before the first computation (None: ``window``).

    Attributes
    ----------
    model_ : estimator or None
        The model predictions come from (None before the first computation).
    n_model_computations_ : int
    n_samples_seen_ : int

    Examples
    --------
    >>> import numpy as np
    >>> import deltafit
    >>> from deltafit.stream import SlidingWindow, prequential
    >>> rng = np.random.default_rng(0)
    >>> X = rng.normal(size=(400, 2))
    >>> y = (X[:, 0] > 0).astype(int)
    >>> sw = SlidingWindow(deltafit.LinearClassifier(loss="squared_hinge"), window=100, period=50)
    >>> report = prequential(sw, (X, y))
    >>> sw.n_model_computations_                 # after 100 samples, then every 50
    7
    >>> bool(report.accuracy > 0.8)
    True
    """

    _parameter_constraints: dict = {
        **WindowLearner._parameter_constraints,
        "period": [Number(Integral, 1, None, closed="left")],
    }

    def __init__(
        self,
        estimator: BaseEstimator,
        window: int = 500,
        period: int = 100,
        initial: int | None = None,
    ) -> None:
        super().__init__(estimator, window=window, initial=initial)
        self.period = period

    def _setup(self):
        self._period_ = int(self.period)
        self._since = 0

    def _learn(self, row, y):
        self._push(row, y)
        if self.model_ is None:
            self._maybe_first_model()
            return
        self._since += 1
        if self._since >= self._period_ and self._compute():
            self._since = 0
