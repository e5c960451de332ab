"""DDM: Gama et al.'s (2004) drift detection method over a base learner (Sivan et al. §4.4)."""

from __future__ import annotations

import math
from numbers import Integral, Real
from typing import Any, cast

import numpy as np
from numpy.typing import ArrayLike, NDArray
from sklearn.base import BaseEstimator, clone, is_classifier
from sklearn.exceptions import NotFittedError
from sklearn.utils import check_array, get_tags

from deltafit.stream._window import WindowLearner, _Decision
from deltafit.utils._params import Number, validate_params
from deltafit.utils._validation import check_rows

__all__ = ["DDM"]


class _DDMDetector:
    """The DDM drift detector on a stream of prediction errors (Gama et al. 2004, §3).

    Parameters
    ----------
    warning_level : float, default=2.0
        Multiple of ``s_min`` above ``p_min`` that enters the warning zone.
    drift_level : float, default=3.0
        Multiple of ``s_min`` above ``p_min`` that signals a drift.
    min_num_instances : int, default=30
        Errors seen before the minimum is tracked and anything is signalled.

    Notes
    -----
    After ``i`` errors ``e_1 .. e_i`` since the last reset, ``p_i`` is their mean and
    ``s_i = sqrt(p_i (1 − p_i) / i)``.  Once ``i > min_num_instances``, ``(p_min, s_min)`` is
    set to ``(p_i, s_i)`` whenever ``p_i + s_i <= p_min + s_min``, and

        warning  iff  p_i + s_i > p_min + warning_level · s_min   (and no drift),
        drift    iff  p_i + s_i > p_min + drift_level · s_min;

    the detector resets at the update after a drift.  These are exactly the conventions of
    ``river.drift.binary.DDM`` (river 0.26: ``warm_start``, ``warning_threshold``,
    ``drift_threshold``), including its running mean ``p += (e − p) / i``.
    """

    _parameter_constraints: dict = {
        "warning_level": [Number(Real, 0, np.inf, closed="left")],
        "drift_level": [Number(Real, 0, np.inf, closed="left")],
        "min_num_instances": [Number(Integral, 0, None, closed="left")],
    }

    def __init__(self, warning_level=2.0, drift_level=3.0, min_num_instances=30):
        self.warning_level = warning_level
        self.drift_level = drift_level
        self.min_num_instances = min_num_instances
        validate_params(self)
        if drift_level < warning_level:
            raise ValueError(
                f"drift_level ({drift_level!r}) must be >= warning_level ({warning_level!r})"
            )
        self.warning_level, self.drift_level = float(warning_level), float(drift_level)
        self.min_num_instances = int(min_num_instances)
        self.reset()

    def reset(self):
        """Forget everything (a new concept)."""
        self.n = 0.0
        self.p = 0.0
        self.p_min = None
        self.s_min = None
        self.ps_min = math.inf
        self.warning = False
        self.drift = False

    def update(self, error):
        """Add one error indicator; returns ``(warning, drift)`` after it."""
        if self.drift:
            self.reset()
        self.n += 1.0
        self.p += (1.0 / self.n) * (float(bool(error)) - self.p)
        p, n = self.p, self.n
        s = math.sqrt(p * (1.0 - p) / n)
        if n > self.min_num_instances:
            if p + s <= self.ps_min:
                self.p_min, self.s_min = p, s
                self.ps_min = p + s
            self.warning = p + s > self.p_min + self.warning_level * self.s_min
            self.drift = p + s > self.p_min + self.drift_level * self.s_min
            if self.drift:
                self.warning = False
        return self.warning, self.drift


class DDM(WindowLearner):
    """Drift Detection Method over a base learner (Gama, Medas, Castillo and Rodrigues 2004).

    The DDM baseline of Sivan, Gabel and Schuster, "Incremental Sensitivity Analysis for
    Kernelized Models", §4.4, over an online learner (ISGD: :class:`~deltafit.stream.NORMA`)
    or a batch learner on a sliding window (SW).  The detector watches the learner's own
    prequential errors: for each sample, the prediction is made *before* the sample is learned.

    Parameters
    ----------
    estimator : classifier
        With ``learn_one`` (an online learner): every sample is learned by the live learner;
        at a drift a fresh ``clone(estimator)`` replaces it and learns the samples since the
        warning zone was entered (at most ``window``).  Otherwise a batch scikit-learn
        classifier: the first model is ``clone(estimator).fit`` on the last ``window`` samples
        once ``initial`` samples have been seen (and two classes), and at a drift it is refitted
        on the samples since the warning (at most ``window``; the whole window when those are
        fewer than ``min_num_instances`` or of one class).
    window : int, default=500
        Samples kept (the buffer of both modes).
    warning_level, drift_level : float, default=2.0, 3.0
        The detector's thresholds (in standard deviations, see :class:`_DDMDetector`).
    min_num_instances : int, default=30
        Errors seen before the detector signals anything.
    initial : int or None, default=None
        Batch mode: samples before the first model computation (None: ``window``); until then
        the prediction is the most frequent label so far.

    Attributes
    ----------
    model_ : estimator or None
        The model predictions come from (the live online learner, or the last batch model).
    n_model_computations_ : int
        Batch fits plus online retrainings (one per drift in online mode).
    n_samples_seen_ : int
    n_drifts_, n_warnings_ : int
        Drifts signalled, and entries into the warning zone.
    last_drift_ : int or None
        Index (0-based, since ``fit``/the first sample) of the last sample that signalled a
        drift.
    classes_ : ndarray
        Labels seen so far, sorted.

    Notes
    -----
    Gama et al. (2004), §3: with ``p_i`` the error rate and ``s_i = sqrt(p_i (1 − p_i) / i)``,
    the warning level is reached when ``p_i + s_i >= p_min + 2 s_min`` and the drift level when
    ``p_i + s_i >= p_min + 3 s_min``; at the drift level a new model is learned from the
    examples stored since the warning level.  The comparisons follow river's ``DDM`` (strict
    ``>``, minimum tracked after ``min_num_instances`` errors), tested equal to it.  Over a
    batch estimator the detector restarts when the first model is computed (the errors before
    it are the most frequent label's).

    A known limit of DDM: when a drift is caught fewer than ``min_num_instances`` samples after
    the warning, the model is refitted on the whole window, mostly the old concept; the
    restarted detector then sees a steadily high error rate, which it cannot tell from a
    stationary one, and may not fire again for a long time.

    Examples
    --------
    DDM over an online learner: a fresh learner when the error rate jumps.

    >>> import numpy as np
    >>> from deltafit.stream import DDM, Pegasos, prequential
    >>> rng = np.random.default_rng(0)
    >>> X = rng.normal(size=(1000, 2))
    >>> y = (X[:, 0] > 0).astype(int)
    >>> y[500:] = 1 - y[500:]                    # the concept drifts at sample 500
    >>> ddm = DDM(Pegasos(lam=1e-2))
    >>> report = prequential(ddm, (X, y))
    >>> ddm.n_drifts_ >= 1, bool(ddm.last_drift_ > 500)
    (True, True)
    """

    _parameter_constraints: dict = {
        **WindowLearner._parameter_constraints,
        **_DDMDetector._parameter_constraints,
    }

    def __init__(
        self,
        estimator: BaseEstimator,
        window: int = 500,
        warning_level: float = 2.0,
        drift_level: float = 3.0,
        min_num_instances: int = 30,
        initial: int | None = None,
    ) -> None:
        super().__init__(estimator, window=window, initial=initial)
        self.warning_level = warning_level
        self.drift_level = drift_level
        self.min_num_instances = min_num_instances

    # ---------------------------------------------------------------- setup
    def _new_detector(self):
        return _DDMDetector(self.warning_level, self.drift_level, self.min_num_instances)

    def _validate(self):
        self._check_params()
        self._new_detector()  # drift_level >= warning_level

    def _check_estimator(self):
        if not is_classifier(self.estimator):
            raise ValueError(
                f"DDM needs a classifier (it monitors prediction errors), got "
                f"{type(self.estimator).__name__}"
            )

    def _reset(self, d):
        self._validate()  # everything checked before any change
        super()._reset(d)

    def _setup(self):
        self._detector = self._new_detector()
        self._online = hasattr(self.estimator, "learn_one")
        if self._online:
            self.model_ = clone(self.estimator)
        self._counts = {}  # label -> samples seen
        self._warn_start = None  # index of the sample that entered the warning
        self._version = 0  # bumped at every learned sample
        self._pred = None  # (row bytes, version, prediction)
        self.n_drifts_ = 0
        self.n_warnings_ = 0
        self.last_drift_ = None

    def _binary(self):
        try:
            return get_tags(self.estimator).classifier_tags.multi_class is False
        except AttributeError:
            return False

    def _check_y(self, y):
        if isinstance(y, (float, np.floating)) and not np.isfinite(y):
            raise ValueError("y is NaN or infinite")
        seen = self.__dict__.get("_counts", {})
        if self._binary() and len(seen) >= 2 and y not in seen:
            raise ValueError(
                f"y={y!r} is not among the labels {sorted(seen, key=str)} seen so "
                f"far; {type(self.estimator).__name__} is binary"
            )
        return y

    # ------------------------------------------------------------ prediction
    def _majority(self):
        return max(self._counts, key=self._counts.get)

    def _predict_row(self, row):
        key = row.tobytes()
        if self._pred is not None and self._pred[0] == key and self._pred[1] == self._version:
            return self._pred[2]
        row = self._model_rows(row)
        if self._online:
            try:
                pred = self.model_.predict_one(row[0])
            except NotFittedError:
                pred = self._majority()
        elif self.model_ is None:
            pred = self._majority()
        elif self._decision.fast:
            pred = self.model_._decode_y(self._decision(row))[0]
        else:
            pred = self.model_.predict(row)[0]
        self._pred = (key, self._version, pred)
        return pred

    def predict(self, X: ArrayLike) -> NDArray[Any]:
        """The current model's predictions for the rows of ``X``."""
        if not hasattr(self, "_X") or not self._online:
            return super().predict(X)
        X = cast(np.ndarray, check_rows(X, self.n_features_in_, "X", type(self).__name__))
        try:
            return self.model_.predict(self._model_rows(X))
        except NotFittedError:
            m = self._majority()
            return np.full(X.shape[0], m, dtype=object if isinstance(m, str) else None)

    def decision_function(self, X: ArrayLike) -> NDArray[np.float64]:
        """The current model's decision values (once it has a model that has them)."""
        model = getattr(self, "model_", None)
        if model is None:
            raise NotFittedError(f"this {type(self).__name__} has no model yet")
        X = check_rows(X, self.n_features_in_, "X", type(self).__name__)
        return model.decision_function(self._model_rows(X))

    @property
    def classes_(self) -> NDArray[Any]:
        """Labels seen so far, sorted."""
        if not hasattr(self, "_X"):
            raise AttributeError("classes_ is defined once the learner has seen samples")
        return np.array(sorted(self._counts))

    # --------------------------------------------------------------- learning
    def _partial_fit(self, X, y, reset):
        fresh = reset or not hasattr(self, "_X")
        if fresh:
            self._validate()
        if self._binary():
            seen = set() if fresh else set(self._counts)
            labels = seen | set(np.unique(np.asarray(y)).tolist())
            if len(labels) > 2:
                raise ValueError(
                    f"Only binary classification is supported: y has labels "
                    f"{sorted(labels, key=str)[:10]} and {type(self.estimator).__name__} is "
                    "binary"
                )
        X = check_array(X, dtype=np.float64)  # NaN/inf caught before anything changes
        return super()._partial_fit(X, y, reset)

    def _learn(self, row, y):
        i = self.n_samples_seen_
        if self._counts:
            warning, drift = self._detector.update(bool(self._predict_row(row) != y))
        else:  # nothing to predict the first sample with
            warning, drift = False, False
        self._push(row, y)
        self._counts[y] = self._counts.get(y, 0) + 1
        self._version += 1
        if warning:
            if self._warn_start is None:
                self._warn_start = i
                self.n_warnings_ += 1
        elif not drift:
            self._warn_start = None
        if self._online:
            self.model_.learn_one(self._model_rows(row)[0], y)
        if drift:
            self.n_drifts_ += 1
            self.last_drift_ = i
            since = i - (i if self._warn_start is None else self._warn_start) + 1
            self._warn_start = None
            self._retrain(min(since, self._count))
        elif not self._online and self._maybe_first_model():
            # the errors so far were the most frequent label's, not a model's: start afresh
            self._detector = self._new_detector()
            self._warn_start = None

    def _retrain(self, k):
        """A new model from the newest ``k`` samples of the window (see the class docstring)."""
        X, y = self._window_data()
        X, y = X[-k:], y[-k:]
        if self._online:
            model = clone(self.estimator)
            for xi, yi in zip(X, y):
                model.learn_one(xi, yi.item() if isinstance(yi, np.generic) else yi)
            self.model_ = model
            self._model_width = X.shape[1]
            self.n_model_computations_ += 1
            return
        if self.model_ is None:  # the first model comes at `initial`
            return
        if k < self.min_num_instances or np.unique(y).size < 2:
            X, y = self._window_data()
            if np.unique(y).size < 2:
                return
        model = clone(self.estimator).fit(X, y)
        self.model_ = model
        self._model_width = X.shape[1]
        self._decision = _Decision(model)
        self._cached = None
        self.n_model_computations_ += 1
