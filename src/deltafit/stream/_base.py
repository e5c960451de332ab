"""What the linear stream learners share: one state vector, passes, snapshots, copies."""

from __future__ import annotations

import numbers

import numpy as np
from sklearn.base import BaseEstimator, is_classifier
from sklearn.utils import check_random_state
from sklearn.utils.validation import check_is_fitted, validate_data

from .._transaction import atomic
from .._validation import check_bool, check_real

__all__ = ["StreamLinearModel"]


_ROWS_ONLY = object()


def validate_rows(est, X, y=_ROWS_ONLY, *, reset):
    """``validate_data`` as the stream learners call it: dense float64 rows in C order and,
    when ``y`` is given (None too: it is refused), numeric targets unless ``est`` is a
    classifier."""
    kw = dict(reset=reset, dtype=np.float64, order="C", accept_sparse=False)
    if y is _ROWS_ONLY:
        return validate_data(est, X, **kw)
    return validate_data(est, X, y, y_numeric=not is_classifier(est), **kw)


class StreamLinearModel(BaseEstimator):
    """Base of :class:`Pegasos` and :class:`LSQSGD`.

    The learner's whole state is the float vector ``_state`` of
    :mod:`deltafit._sgd_kernels` (so a copy, a snapshot and a restore are one array copy);
    ``fit`` is one pass over the rows, ``partial_fit`` continues it, ``learn_one`` feeds one
    sample (river's spelling).
    """

    _kind = None  # set by subclasses

    # ----------------------------------------------------------- hyper-parameters
    def __init__(self, fit_intercept=True, intercept_scaling=1.0, shuffle=False,
                 random_state=None):
        # the parameters both learners share (checked by _check_params); each subclass's
        # __init__ lists them after its own two and passes them on
        self.fit_intercept = fit_intercept
        self.intercept_scaling = intercept_scaling
        self.shuffle = shuffle
        self.random_state = random_state

    def _step_param(self):  # params[0]
        raise NotImplementedError

    def _radius(self):  # params[1]
        raise NotImplementedError

    def _check_params(self):
        check_bool(self.fit_intercept, "fit_intercept")
        check_bool(self.shuffle, "shuffle")
        check_real(self.intercept_scaling, "intercept_scaling", low=0.0)
        rs = self.random_state
        if not (rs is None or isinstance(rs, (numbers.Integral, np.random.RandomState))) \
                or isinstance(rs, bool):
            raise ValueError(f"random_state must be None, an int or a RandomState, got {rs!r}")
        icpt = float(self.intercept_scaling) if self.fit_intercept else 0.0
        return np.array([self._step_param(), self._radius(), icpt], dtype=np.float64)

    def _tree_spec(self, n_features):
        """``(kind, params, state0)`` for TreeCV's compiled recursion (validates parameters)."""
        from .. import _sgd_kernels as _kernels

        params = self._check_params()
        return self._kind, params, _kernels.new_state(self._kind, int(n_features) + 1)

    # ------------------------------------------------------------------ fitting
    def _pass(self, X, t, order=None):
        from .. import _sgd_kernels as _kernels

        if order is None:
            _kernels.fit_range(self._kind, self._state, X, t, 0, X.shape[0], self._params)
        else:
            _kernels.fit_rows(self._kind, self._state, X, t, order, self._params)

    def fit(self, X, y):
        """One pass over the rows of ``X`` (in order, or at random with ``shuffle=True``).

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)
        y : array-like of shape (n_samples,)

        Returns
        -------
        self
        """
        from .. import _sgd_kernels as _kernels

        params = self._check_params()
        X, y = validate_rows(self, X, y, reset=True)
        t = self._encode(y, fitting=True)
        self._params = params
        self._state = _kernels.new_state(self._kind, X.shape[1] + 1)
        order = None
        if self.shuffle:
            order = check_random_state(self.random_state).permutation(X.shape[0]).astype(np.int64)
        self._pass(X, t, order)
        return self

    def partial_fit(self, X, y, classes=None):
        """Continue the pass with the rows of ``X``, in order (an unfitted model starts at 0).

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)
        y : array-like of shape (n_samples,)
        classes : array-like of shape (2,), optional
            Classifiers: both labels, required on the first call unless ``y`` shows both.

        Returns
        -------
        self
        """
        from .. import _sgd_kernels as _kernels

        first = not hasattr(self, "_state")
        params = self._check_params()
        if first:  # a first call starts clean: a failed one leaves no width, names or labels
            for a in ("_state", "_params", "classes_", "n_features_in_", "feature_names_in_"):
                self.__dict__.pop(a, None)
        with atomic(self, copies=("_state", "_params")):  # the pass changes _state in place
            X, y = validate_rows(self, X, y, reset=first)
            t = self._encode(y, fitting=first, classes=classes)
            if first:
                self._state = _kernels.new_state(self._kind, X.shape[1] + 1)
            self._params = params
            self._pass(X, t)
        return self

    @staticmethod
    def _keys(x):
        keys = []
        for k in x:
            if isinstance(k, bool) or not isinstance(k, (numbers.Integral, np.integer)) or k < 0:
                raise ValueError(f"feature keys must be column indices 0, 1, ..., got {k!r}")
            keys.append(int(k))
        return keys

    def _row(self, x, d=None):
        """One sample as a (1, d) array; a dict ``{j: x_j}`` may leave out zeros."""
        d = getattr(self, "n_features_in_", None) if d is None else d
        if isinstance(x, dict):
            keys = self._keys(x)
            if d is None:
                d = max(keys) + 1 if keys else 0
            row = np.zeros(d)
            for j, v in zip(keys, x.values()):
                if j >= d:
                    raise ValueError(f"feature key {j} outside 0..{d - 1}: the model has {d} "
                                     "features")
                row[j] = float(v)
            return row[None, :]
        row = np.asarray(x, dtype=np.float64)
        if row.ndim != 1:
            raise ValueError(f"x must be a dict or a 1-d array, got shape {row.shape}")
        return row[None, :]

    def learn_one(self, x, y):
        """river's spelling: learn one sample ``x`` (a dict ``{j: x_j}`` or a 1-d array).

        A classifier's first samples wait until both labels have been seen, then are learned in
        their order (exactly what learning them one by one from w = 0 gives); the number of
        features is then the largest key seen + 1 (or the arrays' length).
        """
        if is_classifier(self) and not hasattr(self, "_state"):
            if isinstance(x, dict):
                self._keys(x)
            pending = self.__dict__.setdefault("_pending", [])
            pending.append((x, y))
            labels = np.unique(np.asarray([p[1] for p in pending]))
            if labels.size < 2:
                return self
            widths = [max(self._keys(p[0]), default=-1) + 1 if isinstance(p[0], dict)
                      else np.asarray(p[0]).shape[-1] for p in pending]
            rows = np.vstack([self._row(p[0], max(widths)) for p in pending])
            ys = [p[1] for p in pending]
            del self._pending
            return self.partial_fit(rows, ys, classes=labels)
        return self.partial_fit(self._row(x), [y])

    def predict_one(self, x):
        """river's spelling: the prediction for one sample."""
        return self.predict(self._row(x))[0]

    # ------------------------------------------------------------- prediction
    def _coef_full(self):
        from .. import _sgd_kernels as _kernels

        check_is_fitted(self, "_state")
        return _kernels.coef_of(self._kind, self._state, self.n_features_in_ + 1)

    @property
    def coef_(self):
        """The weights the model predicts with, shape (n_features,)."""
        return self._coef_full()[:-1]

    @property
    def intercept_(self):
        """The intercept: the constant feature's weight times ``intercept_scaling``."""
        return float(self._coef_full()[-1] * self._params[2])

    @property
    def t_(self):
        """Number of samples learned so far."""
        check_is_fitted(self, "_state")
        return int(self._state[self._t_index()])

    def _decision(self, X):
        check_is_fitted(self, "_state")
        X = validate_rows(self, X, reset=False)
        return X @ self.coef_ + self.intercept_

    # ------------------------------------------------------ snapshots, copies
    def snapshot(self):
        """The learner's state (a copy), for :meth:`restore` (TreeCV's save/revert, §4.1)."""
        check_is_fitted(self, "_state")
        return self._state.copy()

    def restore(self, snapshot):
        """Put back a state returned by :meth:`snapshot`."""
        check_is_fitted(self, "_state")
        s = np.asarray(snapshot, dtype=np.float64)
        if s.shape != self._state.shape or not np.all(np.isfinite(s)):
            raise ValueError(f"a snapshot of this learner is a finite vector of shape "
                             f"{self._state.shape}, got {s.shape}")
        self._state[:] = s
        return self

    def __copy__(self):
        new = type(self).__new__(type(self))
        new.__dict__.update(self.__dict__)
        if "_pending" in self.__dict__:
            new._pending = list(self._pending)
        if hasattr(self, "_state"):
            # the learner's own state (not a model's): the copy owns its arrays
            new.__dict__.update(_state=self._state.copy(), _params=self._params.copy())
        return new

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.input_tags.sparse = False
        return tags
