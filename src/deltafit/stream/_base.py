"""What the linear stream learners share: one state vector, passes, snapshots, copies."""

from __future__ import annotations

from numbers import Integral, Real
from typing import Any, TypeVar, overload

import numpy as np
from numpy.typing import ArrayLike, NDArray
from sklearn.base import BaseEstimator, is_classifier
from sklearn.utils import check_random_state
from sklearn.utils.validation import check_is_fitted, validate_data

from deltafit.stream._features import as_row, pad
from deltafit.utils._params import Number
from deltafit.utils._transaction import atomic

__all__ = ["StreamLinearModel"]

_T = TypeVar("_T", bound="StreamLinearModel")


_ROWS_ONLY = object()


@overload
def validate_rows(est: BaseEstimator, X: ArrayLike, *, reset: bool) -> NDArray[np.float64]: ...


@overload
def validate_rows(
    est: BaseEstimator, X: ArrayLike, y: ArrayLike | None, *, reset: bool
) -> tuple[NDArray[np.float64], NDArray[Any]]: ...


def validate_rows(est: BaseEstimator, X: ArrayLike, y: Any = _ROWS_ONLY, *, reset: bool) -> Any:
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
    :mod:`deltafit.solvers._sgd` (so a copy, a snapshot and a restore are one array copy);
    ``fit`` is one pass over the rows, ``partial_fit`` continues it, ``learn_one`` feeds one
    sample (river's spelling).
    """

    _kind: int  # set by subclasses (solvers._sgd.PEGASOS, ...)

    #: the parameters both learners share; each subclass adds its own two
    _parameter_constraints: dict = {
        "fit_intercept": ["boolean"],
        "intercept_scaling": [Number(Real, 0, np.inf, closed="neither")],
        "shuffle": ["boolean"],
        "random_state": [
            None,
            Number(Integral, None, None, closed="neither"),
            np.random.RandomState,
        ],
    }

    # ----------------------------------------------------------- hyper-parameters
    def __init__(
        self,
        fit_intercept: bool = True,
        intercept_scaling: float = 1.0,
        shuffle: bool = False,
        random_state: int | np.random.RandomState | None = None,
    ) -> None:
        # the parameters both learners share (_parameter_constraints); each subclass's
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
        """Validate the parameters (scikit-learn's ``_validate_params``) and return the
        solver's parameter vector ``[step parameter, radius, intercept scaling]``."""
        self._validate_params()
        icpt = float(self.intercept_scaling) if self.fit_intercept else 0.0
        return np.array([self._step_param(), self._radius(), icpt], dtype=np.float64)

    def _tree_spec(self, n_features):
        """``(kind, params, state0)`` for TreeCV's compiled recursion (validates parameters)."""
        from deltafit.solvers import _sgd as _kernels

        params = self._check_params()
        return self._kind, params, _kernels.new_state(self._kind, int(n_features) + 1)

    # ------------------------------------------------------------------ fitting
    def _pass(self, X, t, order=None):
        from deltafit.solvers import _sgd as _kernels

        if order is None:
            _kernels.fit_range(self._kind, self._state, X, t, 0, X.shape[0], self._params)
        else:
            _kernels.fit_rows(self._kind, self._state, X, t, order, self._params)

    def fit(self: _T, X: ArrayLike, y: ArrayLike) -> _T:
        """One pass over the rows of ``X`` (in order, or at random with ``shuffle=True``).

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)
        y : array-like of shape (n_samples,)

        Returns
        -------
        self
        """
        from deltafit.solvers import _sgd as _kernels

        params = self._check_params()
        X, y = validate_rows(self, X, y, reset=True)
        t = self._encode(y, fitting=True)
        for a in ("_dict_keys", "_pending"):  # a fit starts afresh: no dict features, no wait
            self.__dict__.pop(a, None)
        self._params = params
        self._state = _kernels.new_state(self._kind, X.shape[1] + 1)
        order = None
        if self.shuffle:
            order = check_random_state(self.random_state).permutation(X.shape[0]).astype(np.int64)
        self._pass(X, t, order)
        return self

    def partial_fit(self: _T, X: ArrayLike, y: ArrayLike, classes: ArrayLike | None = None) -> _T:
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
        from deltafit.solvers import _sgd as _kernels

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

    def _grow(self, d):
        """A dict sample brought new features: zero weights for them, in both of the state's
        weight vectors (layouts in :mod:`deltafit.solvers._sgd`), which is exactly the state
        of the learner fed those features at 0 from the start."""
        from deltafit.solvers import _sgd as _kernels

        d0 = self.n_features_in_
        s, z = self._state, np.zeros(d - d0)
        if self._kind == _kernels.PEGASOS:  # [v (d0), v_icpt, scale, t, |v|^2]
            parts = [s[:d0], z, s[d0:]]
        else:  # [w (d0), w_icpt, wbar (d0), wbar_icpt, t, sum]
            parts = [s[:d0], z, s[d0 : 2 * d0 + 1], z, s[2 * d0 + 1 :]]
        self._state = np.concatenate(parts)
        self.n_features_in_ = d

    def learn_one(self: _T, x: dict | ArrayLike, y: Any) -> _T:
        """river's spelling: learn one sample ``x`` (a dict or a 1-d array).

        A dict has integer column keys ``{j: x_j}`` or feature names; missing features read as
        0 and new ones grow the model with zero weights (``stream/_features.py``;
        the learner fed zero-filled rows from the start, to rounding).  A classifier's first
        samples wait until both labels have been seen, then are learned in their order (exactly
        what learning them one by one from w = 0 gives).  Nothing changes when the sample is
        refused.
        """
        if not hasattr(self, "_state"):  # a bad parameter fails at the first sample
            self._validate_params()
        if not isinstance(x, dict):
            return self._learn_row(as_row(self, x), y, False)
        with atomic(self):  # a rejected dict leaves no feature, width or pending sample
            return self._learn_row(as_row(self, x), y, True)

    def _learn_row(self, row, y, grows):
        if is_classifier(self) and not hasattr(self, "_state"):
            pending = list(self.__dict__.get("_pending", []))
            if pending and pending[0][0].shape[1] != row.shape[1]:
                if not grows:
                    raise ValueError(
                        f"x has {row.shape[1]} features, but the earlier samples "
                        f"have {pending[0][0].shape[1]}"
                    )
                pending = [(pad(r, row.shape[1]), label) for r, label in pending]
            self._pending = pending + [(np.array(row, dtype=np.float64), y)]
            labels = np.unique(np.asarray([p[1] for p in self._pending]))
            if labels.size < 2:
                return self
            rows = np.vstack([p[0] for p in self._pending])
            ys = [p[1] for p in self._pending]
            del self._pending
            return self.partial_fit(rows, ys, classes=labels)
        if grows and hasattr(self, "_state") and row.shape[1] > self.n_features_in_:
            self._grow(row.shape[1])  # undone by learn_one's atomic if partial_fit refuses
        return self.partial_fit(row, [y])

    def predict_one(self, x: dict | ArrayLike) -> Any:
        """river's spelling: the prediction for one sample (features it has not learned from
        are ignored)."""
        check_is_fitted(self, "_state")
        return self.predict(as_row(self, x, learn=False))[0]

    # ------------------------------------------------------------- prediction
    def _coef_full(self):
        from deltafit.solvers import _sgd as _kernels

        check_is_fitted(self, "_state")
        return _kernels.coef_of(self._kind, self._state, self.n_features_in_ + 1)

    @property
    def coef_(self) -> NDArray[np.float64]:
        """The weights the model predicts with, shape (n_features,)."""
        return self._coef_full()[:-1]

    @property
    def intercept_(self) -> float:
        """The intercept: the constant feature's weight times ``intercept_scaling``."""
        return float(self._coef_full()[-1] * self._params[2])

    @property
    def t_(self) -> int:
        """Number of samples learned so far."""
        check_is_fitted(self, "_state")
        return int(self._state[self._t_index()])

    def _decision(self, X):
        check_is_fitted(self, "_state")
        X = validate_rows(self, X, reset=False)
        return X @ self.coef_ + self.intercept_

    # ------------------------------------------------------ snapshots, copies
    def snapshot(self) -> NDArray[np.float64]:
        """The learner's state (a copy), for :meth:`restore` (TreeCV's save/revert, §4.1)."""
        check_is_fitted(self, "_state")
        return self._state.copy()

    def restore(self: _T, snapshot: ArrayLike) -> _T:
        """Put back a state returned by :meth:`snapshot`."""
        check_is_fitted(self, "_state")
        s = np.asarray(snapshot, dtype=np.float64)
        if s.shape != self._state.shape or not np.all(np.isfinite(s)):
            raise ValueError(
                f"a snapshot of this learner is a finite vector of shape "
                f"{self._state.shape}, got {s.shape}"
            )
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
