"""Shared machinery of the updatable estimators: validation, the ledger and the update protocol.

An estimator solves the canonical problem of ARCHITECTURE.md, "The problem" and keeps (i) a :class:`Ledger` of its
training samples under stable integer ids and (ii) a *state* from which it is updated exactly
(a :class:`~deltafit._states._protocol.ModelState`: six of them, linear / kernel × squared /
smooth / hinge, see ``_state.py``).  The estimator turns each update into a
:class:`~deltafit._states._protocol.DataChange` and the state applies it.

Every update (:meth:`add`, :meth:`remove`, :meth:`relabel`, :meth:`update`,
:meth:`partial_fit`) is a transaction: all input is validated first, the numerical work is done
next, and the ledger is changed last; a ValueError anywhere leaves the model exactly as it was.
"""

from __future__ import annotations

import functools
import threading
import warnings
from collections.abc import Callable
from dataclasses import dataclass, replace

import numpy as np
import scipy.sparse as sp
from scipy.special import expit, log_expit
from sklearn.utils.metaestimators import available_if
from sklearn.utils.validation import check_is_fitted, column_or_1d, validate_data

from deltafit.utils._labels import BinaryLabels, ClassLabels, LabelMessages
from deltafit.utils._transaction import atomic
from deltafit.utils._validation import (
    SparseDataError,
    check_bool,
    check_dense,
    check_feature_names,
    check_int,
    check_magnitude,
    check_real,
    check_rows,
    check_scale,
)
from deltafit.losses import get_loss
from deltafit._dask._input import any_dask, gathered, is_dask, map_labels
from deltafit._ledger import Ledger
from deltafit._states._one_vs_rest import one_vs_rest_state
from deltafit.models._registry import state_for
from deltafit._states._protocol import SolverOptions

__all__ = ["UpdatableMixin"]

_LABELS = LabelMessages(
    label_type=None,  # scikit-learn's check_classification_targets
    one_class=("y has only one class ({labels}); a classifier needs two classes to train (pass "
               "classes= to partial_fit to declare the others)"),
    outside_classes="y has labels {unseen} not in classes",
    unknown=("{what} has labels {first10} that are not among the model's classes {classes}; an "
             "update cannot add a class: declare every class the data may bring at the first "
             "fit, with partial_fit(X, y, classes=[...]) (a class may have no samples)"),
)


def _as_1d(y, what):
    """A 1-D label array from a scalar, a list, a 1-D array or an (n, 1) column (sparse and
    complex labels are refused, as ``fit`` refuses them)."""
    check_dense(y, what)
    y = np.asarray(y)
    if y.ndim == 0:
        return y.reshape(1)
    if y.ndim == 2 and y.shape[1] == 1:
        return y.ravel()
    if y.ndim != 1:
        raise ValueError(f"{what} must be 1-D, got shape {y.shape}")
    return y


def _weights(sample_weight, n, what="sample_weight"):
    """Validated sample weights for ``n`` samples: finite, non-negative floats (a scalar is
    broadcast); None when ``sample_weight`` is None or every weight is 1 (the unweighted
    problem, solved exactly as without weights)."""
    if sample_weight is None:
        return None
    check_dense(sample_weight, what)
    try:
        w = np.asarray(sample_weight, dtype=np.float64)
    except (TypeError, ValueError) as exc:
        raise ValueError(f"{what} must be numeric: {exc}") from exc
    if w.ndim == 0:
        w = np.full(n, float(w))
    if w.shape != (n,):
        raise ValueError(f"{what} must have shape ({n},), got {w.shape}")
    if not np.all(np.isfinite(w)):
        raise ValueError(f"{what} contains NaN or infinity")
    if np.any(w < 0):
        raise ValueError(f"{what} has negative weights (at {np.flatnonzero(w < 0)[:10].tolist()}); "
                         "weights must be >= 0")
    return None if np.all(w == 1.0) else w


@dataclass(frozen=True)
class UpdatePlan:
    """One validated update, before any change: what :meth:`UpdatableMixin._update` hands to
    the numerical work (``_apply``) and then to the ledger.

    Parameters
    ----------
    X_add : ndarray of shape (k, n_features) or None
        Rows to add (None: no additions).
    t_add : ndarray of shape (k,) or None
        Their encoded targets.
    remove_slots : ndarray of int or None
        Ledger slots of the samples to remove (None: no removals).
    remove_rows : ndarray or None
        Their rows as given (``keep_data=False`` models), else None.
    relabel_slots : ndarray of int or None
        Ledger slots of the samples to relabel (None: no relabels).
    relabel_t : ndarray or None
        Their new encoded targets.
    relabel_rows : ndarray or None
        Their rows as given (``keep_data=False`` models), else None.
    remove_t : ndarray or None
        The removed samples' current targets, from the caller and checked against the digests
        (``keep_data=False`` models, which keep no labels), else None.
    relabel_t_old : ndarray or None
        The relabelled samples' current targets, likewise.
    w_add : ndarray or None
        The added samples' weights (None: 1 each).
    reweight_slots, reweight_w : ndarray or None
        Ledger slots of the samples whose weight changes, and the new weights.
    reweight_rows, reweight_t : ndarray or None
        ``keep_data=False`` models: the reweighted samples' rows as given and their targets
        after the update's relabels; else None.
    changed : tuple or None
        A model that keeps no labels: ``(before, after)`` of the samples the update touches,
        lists of ``(targets, weights)`` (see :meth:`UpdatableMixin._samples_changed`), taken
        while the ledger is as before the update; else None.
    """

    X_add: np.ndarray | None = None
    t_add: np.ndarray | None = None
    remove_slots: np.ndarray | None = None
    remove_rows: np.ndarray | None = None
    relabel_slots: np.ndarray | None = None
    relabel_t: np.ndarray | None = None
    relabel_rows: np.ndarray | None = None
    remove_t: np.ndarray | None = None
    relabel_t_old: np.ndarray | None = None
    w_add: np.ndarray | None = None
    reweight_slots: np.ndarray | None = None
    reweight_w: np.ndarray | None = None
    reweight_rows: np.ndarray | None = None
    reweight_t: np.ndarray | None = None
    changed: tuple | None = None

    @property
    def reweights(self):
        """Whether the update changes sample weights."""
        return self.reweight_slots is not None

    @property
    def adds(self):
        """Whether the update adds samples."""
        return self.X_add is not None

    @property
    def removes(self):
        """Whether the update removes samples."""
        return self.remove_slots is not None

    @property
    def relabels(self):
        """Whether the update relabels samples."""
        return self.relabel_slots is not None


class _Guard:
    """A model's lock and write counter: what makes its reads safe during its updates.

    Writes (:meth:`write`, under ``lock``) make ``seq`` odd before changing the model and even
    (larger) after.  :meth:`read` runs a read without the lock and keeps its result when
    ``seq`` was even before it and the same after it: no write overlapped it, so it saw the
    model between two updates.  Otherwise (or when the lock-free attempt raised) the read runs
    again under the lock, after the update in progress.  Reads of one model therefore run
    concurrently with each other and wait only for an update that overlaps them.

    Interrupts: an interrupt landing anywhere in :meth:`write` may leave ``seq`` odd (never
    even while a write is under way); an odd ``seq`` only sends reads to the lock, and the
    next write makes it even again.  The lock itself is taken and released by a one-line
    ``with`` (:meth:`UpdatableMixin._locked`, and the locked read here).
    """

    __slots__ = ("lock", "seq", "owner")

    def __init__(self):
        self.lock = threading.RLock()
        self.seq = 0  # odd while a write may be under way
        self.owner = None  # the thread of the write under way (its nested writes pass)

    def write(self, fn, args, kwargs):
        """``fn(*args, **kwargs)`` with ``seq`` odd meanwhile (the caller holds ``lock``)."""
        me = threading.get_ident()
        if self.owner == me:  # nested in this thread's own write: the outer one counts
            return fn(*args, **kwargs)
        self.seq |= 1
        self.owner = me
        try:
            return fn(*args, **kwargs)
        finally:
            self.owner = None
            self.seq = (self.seq | 1) + 1

    def read(self, fn):
        """``fn()``, as it reads the model between two writes (see the class docstring)."""
        seq = self.seq
        if not seq & 1:
            try:
                out = fn()
            except Exception:  # noqa: BLE001 - perhaps a torn read: again under the lock
                pass
            else:
                if self.seq == seq:
                    return out
        with self.lock: return fn()  # noqa: E701 - one line: see UpdatableMixin._locked


def guarded_read(prop):
    """Decorator of a model's read-only property: it reads the model as it is between two
    updates, never half updated (:meth:`_Guard.read`); an unfitted model reads without it."""

    @functools.wraps(prop)
    def read(self):
        if not self._is_fitted():
            return prop(self)  # raises AttributeError, or reads what needs no fit
        return self._read(lambda: prop(self))

    return read


class UpdatableMixin:
    """Fit / update protocol shared by the four deltafit estimators.

    Examples
    --------
    Every deltafit estimator follows it; an update equals a fit on the changed data:

    >>> import numpy as np
    >>> from sklearn.datasets import load_breast_cancer
    >>> from sklearn.preprocessing import StandardScaler
    >>> from deltafit import LinearClassifier
    >>> from deltafit.models import UpdatableMixin
    >>> X, y = load_breast_cancer(return_X_y=True)
    >>> X = StandardScaler().fit_transform(X)
    >>> model = LinearClassifier(loss="logistic", C=0.1).fit(X[:500], y[:500])
    >>> isinstance(model, UpdatableMixin)
    True
    >>> new_ids = model.add(X[500:], y[500:])    # ids 500..568
    >>> _ = model.remove([3, 7])
    >>> _ = model.relabel([10], [1 - y[10]])
    >>> y_new = y.copy()
    >>> y_new[10] = 1 - y[10]
    >>> keep = np.setdiff1d(np.arange(569), [3, 7])
    >>> refit = LinearClassifier(loss="logistic", C=0.1).fit(X[keep], y_new[keep])
    >>> float(np.max(np.abs(model.coef_ - refit.coef_))) < 1e-6
    True
    >>> model.sample_ids_.shape
    (567,)
    """

    _classifier = False
    _kernel = False
    _losses = ("squared",)
    _max_rank = 64
    # The writer of model files behind the deprecated ``save`` method: ``deltafit.persistence``
    # (a floor above the models, which reads their classes) puts its ``save`` here when it is
    # imported, so that the models never import persistence (no import circle).
    _save_file: Callable[..., None] | None = None

    # ------------------------------------------------------------ validation
    def _validate_params(self):
        if self.loss not in self._losses:
            raise ValueError(
                f"loss={self.loss!r} is not supported by {type(self).__name__}; "
                f"expected one of {list(self._losses)}"
            )
        check_real(self.C, "C", low=0.0)
        check_real(self.tol, "tol", low=0.0)
        check_int(self.max_iter, "max_iter")
        check_bool(self.fit_intercept, "fit_intercept")
        check_bool(self.warm_start, "warm_start")
        if self.fit_intercept:
            s = check_real(self.intercept_scaling, "intercept_scaling", low=0.0)
            check_magnitude(s * s, self.C, f"intercept_scaling={s!r}: its square (a term of "
                            "every sample's squared norm)", "use a smaller intercept_scaling")
        if self.callback is not None and not callable(self.callback):
            raise ValueError("callback must be callable or None")
        self._check_model_params()

    def _check_model_params(self):
        """Hook for the linear / kernel specific parameters."""

    # --------------------------------------------------- the fitted snapshot
    # Parameters take effect at the next fit, as in scikit-learn: what shapes the fitted model
    # (the intercept column, the kernel) is kept from the fit and used by every later update
    # and prediction, whatever set_params does in between.
    _SPEC_KERNEL = ()

    def _take_spec(self, X=None, w=None):
        """Snapshot the parameters the fitted model is made of (called by ``fit`` with the
        training rows ``X`` and their weights ``w``)."""
        spec = {"fit_intercept": bool(self.fit_intercept),
                "intercept_scaling": float(self.intercept_scaling) if self.fit_intercept
                else 0.0}
        spec.update((k, getattr(self, k)) for k in self._SPEC_KERNEL)
        self._spec = spec

    def _fitted(self, name):
        """A parameter as the model was fitted with (the current value before any fit)."""
        spec = self.__dict__.get("_spec")
        if spec is None:
            return (float(self.intercept_scaling) if self.fit_intercept else 0.0) \
                if name == "intercept_scaling" else getattr(self, name)
        return spec[name]

    @property
    def _s(self):
        """The constant feature's value as fitted (0 without an intercept)."""
        return self._fitted("intercept_scaling")

    # ------------------------------------------------------------ thread safety
    # Writers (fits, updates) hold the model's lock (an RLock) for the whole transaction and
    # bump ``_Guard.seq`` to odd before changing anything, to even after.  Readers run without
    # the lock and keep their result when ``seq`` was even and unchanged across the read (no
    # write overlapped it); otherwise they read again under the lock.  The lock is taken and
    # released only by a one-line ``with lock: return ...`` statement (see ``_locked``).
    def _guard(self):
        """The model's :class:`_Guard` (its lock and write counter), made on first use."""
        guard = self.__dict__.get("_update_lock")
        if guard is None:  # dict.setdefault is atomic: racing threads all get the first one
            guard = self.__dict__.setdefault("_update_lock", _Guard())
        return guard

    def _lock(self):
        """The lock that serialises this model's fits and updates (made on first use)."""
        return self._guard().lock

    def _locked(self, fn, /, *args, **kwargs):
        """``fn(*args, **kwargs)`` as a write: under the model's lock, with the write counter
        odd meanwhile (reads that overlap it read again under the lock)."""
        guard = self._guard()
        # One line, on purpose: ``with`` acquires in C (BEFORE_WITH) and the instruction after
        # it is inside the block's exception range, so no interrupt can land between acquiring
        # and being protected; its release (``__exit__``, C) runs on the same line as the
        # body's return, so no line event (where a tracing interrupt lands) separates them
        # either.  A ``with`` over two lines has one: the exit is traced on the ``with`` line,
        # outside the protected range, and an interrupt there would leave the lock held.
        with guard.lock: return guard.write(fn, args, kwargs)  # noqa: E701

    def _read(self, fn):
        """``fn()`` as a read: the model before or after any concurrent update, never half
        updated (see :meth:`_Guard.read`)."""
        return self._guard().read(fn)

    def __getstate__(self):
        state = super().__getstate__()
        state.pop("_update_lock", None)  # a lock cannot be copied or pickled; one is made anew
        return state

    def _encode_y(self, y, *, fitting=False, classes=None, what="y"):
        """Validated internal targets: ±1 (two classes) or class indices for classifiers,
        floats for regressors (one column per output for a multi-output regressor)."""
        if not self._classifier:
            return self._regression_targets(y, fitting, what)
        y = column_or_1d(y, warn=True) if fitting else _as_1d(y, what)
        if fitting:
            self.classes_ = ClassLabels(messages=_LABELS).fit(y, classes).classes_
        return self._labels().encode(y, what)

    def _regression_targets(self, y, fitting, what):
        """Float targets: 1-D, or (n, K) for a model fitted on K ≥ 2 outputs."""
        check_dense(y, what)
        if fitting:
            arr = np.asarray(y)
            multi = arr.ndim == 2 and arr.shape[1] >= 2
            self._n_outputs = int(arr.shape[1]) if multi else 0
            y = arr if multi else column_or_1d(y, warn=True)
        else:
            K = self._n_outputs_fitted
            if K:
                y = np.asarray(y)
                if y.ndim == 1 and y.shape[0] == K:
                    y = y[None, :]
                if y.ndim != 2 or y.shape[1] != K:
                    raise ValueError(f"{what} must have shape (n_samples, {K}) (the model has "
                                     f"{K} outputs), got {y.shape}")
            else:
                y = _as_1d(y, what)
        try:
            y = np.asarray(y, dtype=np.float64)
        except (TypeError, ValueError) as exc:
            raise ValueError(f"{what} must be numeric for a regressor: {exc}") from exc
        if not np.all(np.isfinite(y)):
            raise ValueError(f"{what} contains NaN or infinity")
        top = float(np.max(np.abs(y))) if y.size else 0.0
        check_magnitude(top * top, self._fitted_C(fitting), f"{what}: the squared target",
                        "rescale y")
        return y

    @property
    def _n_outputs_fitted(self):
        """K ≥ 2 outputs of a multi-output regressor, else 0."""
        return int(self.__dict__.get("_n_outputs", 0))

    def _fitted_C(self, fitting=False):
        """C of the problem the data enter: the parameter when fitting, else the fitted one
        (``set_params`` may have changed the parameter since)."""
        return float(self.C) if fitting or not self._is_fitted() else self._state.C

    def _check_scale(self, data, C):
        """Refuse Φ (linear) or a kernel block (kernel models) beyond the magnitude cap
        :data:`deltafit.utils._validation.MAX_SQUARED_NORM`: squared row norms ``‖Φ(x)‖²`` (the
        intercept column included), or kernel values ``|k(x, x')|`` (intercept term
        included)."""
        if not self._kernel:
            check_scale(data, C)
            return
        if sp.issparse(data):
            if data.nnz == 0:
                return
            top = max(float(np.max(data.data)), -float(np.min(data.data)))
        elif data.size == 0:
            return
        else:
            top = max(float(np.max(data)), -float(np.min(data)))  # NaN stays NaN: refused
        check_magnitude(top, C, "the kernel value |k(x, x')| (intercept term included)",
                        "rescale X or use a bounded kernel")

    def _check_solution(self, st):
        """Refuse a state whose solution or residual is not finite (an overflow)."""
        res = st.result
        if not np.all(np.isfinite(st.solution)) or (res is not None
                                                   and not np.isfinite(res.grad_norm)):
            raise ValueError(
                "the solution overflowed (non-finite coefficients or residual): the data's "
                "magnitudes or C are too large for float64; rescale X (or use a smaller C)"
            )

    def _apply_change(self, change):
        """Hand a validated :class:`~deltafit._states._protocol.DataChange` to the state.

        The new data (Φ of the added rows, or their kernel blocks) are checked against the
        magnitude cap first; after a re-solve the new solution must be finite, otherwise the
        state is put back as it was and a ValueError raised.  (The closed-form states check
        their solution themselves: they update in place and roll back on their own.)
        """
        st = self._state
        if change.rows_add is not None:
            rows = change.rows_add
            self._check_scale(rows if sp.issparse(rows) else np.asarray(rows), st.C)
        if change.K_new is not None:
            self._check_scale(change.K_new, st.C)
            self._check_scale(change.K_cross, st.C)
        if st.result is None:
            st.apply_change(change)
            return
        with atomic(st):
            st.apply_change(change)
            self._check_solution(st)

    def _decode_y(self, t):
        return self._labels().decode(t)

    def _labels(self):
        """The label encoder of ``classes_``: targets ±1 for two classes, class indices for
        more (one-vs-rest, :mod:`~deltafit._states._one_vs_rest`)."""
        if self.classes_.size == 2:
            return BinaryLabels(self.classes_, _LABELS)
        return ClassLabels(self.classes_, _LABELS)

    @property
    def _n_classes(self):
        """K ≥ 3 for a multiclass classifier (one-vs-rest), else 0."""
        classes = self.__dict__.get("classes_")
        return 0 if classes is None or classes.size <= 2 else int(classes.size)

    def _solver_options(self):
        return SolverOptions(get_loss(self.loss), float(self.C), float(self.tol),
                             int(self.max_iter), self.callback)

    # ------------------------------------------------------------------- fit
    def fit(self, X, y, sample_weight=None):
        """Fit on (X, y): the exact minimiser of the canonical objective (ARCHITECTURE.md, "The problem").

        After ``fit``, ``sample_ids_`` is ``0..n-1`` in row order.

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)
        y : array-like of shape (n_samples,)
        sample_weight : array-like of shape (n_samples,) or float, optional
            Non-negative weights: the data term becomes ``C Σ w_i ℓ(y_i, z_i)`` (C scaled per
            sample, as scikit-learn's ``sample_weight``); weight 2 is the sample twice, weight 0
            the sample absent.  Updates keep them (``add(..., sample_weight=)``,
            :meth:`reweight`).

        Returns
        -------
        self
        """
        if any_dask(X, y, sample_weight):
            return self._fit_dask(X, y, sample_weight)
        self._check_dense(X, y)
        return self._fit(X, y, sample_weight=sample_weight)

    def _fit_dask(self, X, y, sample_weight=None):
        """Fit on dask collections: the linear models' squared loss (``keep_data=False``)
        only; see :meth:`deltafit.LinearRegressor.fit`."""
        raise ValueError(f"{type(self).__name__} takes no dask input; LinearClassifier and "
                         "LinearRegressor (loss='squared', keep_data=False) do")

    def _check_dense(self, X, y=None, fitting=True):
        """The refusals every entry point shares: sparse X (unless the model takes it, see
        :meth:`_sparse_refusal`) or sparse y (scikit-learn's TypeError,
        :class:`deltafit.utils._validation.SparseDataError`, also a ValueError) and complex values
        (ValueError)."""
        if sp.issparse(X):
            why = self._sparse_refusal(fitting)
            if why is not None:
                raise SparseDataError(
                    "Sparse data was passed for X, but dense data is required"
                    + (f" ({why})" if why else "")
                    + ". Use '.toarray()' to convert to a dense numpy array."
                )
            if X.dtype.kind == "c":
                check_dense(np.zeros(1, dtype=complex), "X")
        else:
            check_dense(X, "X")
        if y is not None:
            check_dense(y, "y")

    def _sparse_refusal(self, fitting=True):
        """Why this model takes no sparse X (a phrase for the message; "" for scikit-learn's
        plain refusal), or None when it takes it."""
        return ""

    def _rows(self, X, what="X", owner=None):
        """Validated rows of an update or query, checked as ``predict`` checks them: the column
        names of a DataFrame against ``feature_names_in_`` first (scikit-learn's
        ``validate_data(reset=False)``: other or reordered names are refused, a frame given to
        a model fitted without names or an array to one fitted with them warns), then
        ``check_rows`` (the width, finite values); sparse X accepted where the fitted model
        takes it, converted to the format the model was fitted on."""
        check_feature_names(self, X)
        sparse_ok = self._sparse_refusal(fitting=False) is None
        if sp.issparse(X) and not sparse_ok:
            self._check_dense(X, fitting=False)
        rows = check_rows(X, self.n_features_in_, what, owner or type(self).__name__,
                          sparse=sparse_ok)
        return self._model_format(rows)

    def _model_format(self, X):
        """Validated rows ``X`` in the format the model was fitted on: dense, or a float64
        ``csr_matrix`` for a model fitted on sparse X."""
        if self.__dict__.get("_sparse_input", False):
            return X if sp.issparse(X) else sp.csr_matrix(X)
        return X.toarray() if sp.issparse(X) else X

    def _fit(self, X, y, classes=None, sample_weight=None):
        # a failed (re)fit leaves a fitted model as it was: fitting only creates new objects,
        # so restoring the attribute dictionary is enough
        return self._locked(self._fit_locked, X, y, classes, sample_weight)

    def _fit_locked(self, X, y, classes, sample_weight=None):
        with atomic(self):
            self._validate_params()
            # partial_fit(classes=...) follows scikit-learn: the data may show one class at first
            self._classes_given = classes is not None
            sparse_ok = self._sparse_refusal(fitting=True) is None
            X, y = validate_data(self, X, y, dtype=np.float64, y_numeric=not self._classifier,
                                 multi_output=not self._classifier, ensure_min_samples=1,
                                 accept_sparse="csr" if sparse_ok else False)
            if sp.issparse(X):
                X = sp.csr_matrix(X)  # the sparse arrays too: one format inside
            self._sparse_input = sp.issparse(X)
            t = self._encode_y(y, fitting=True, classes=classes)
            w = _weights(sample_weight, X.shape[0])
            if w is not None:
                self._check_fit_weights(t, w)
            previous = self._warm_coef() if self.warm_start else None
            self._take_spec(X, w)
            self._build(X, t, previous, w)
            self._bump_version()
        return self

    def _check_fit_weights(self, t, w):
        """Refuse weights that leave no sample, or (a classifier without declared classes)
        one class, with a positive weight (scikit-learn's rules; :meth:`_check_weight_rule`,
        which the updates apply to the data they leave)."""
        shown = self._classifier and not self._classes_given
        self._check_weight_rule(int(np.count_nonzero(w > 0)),
                                np.unique(t[w > 0]).size if shown else None)

    def _check_weight_rule(self, n_weighted, n_classes_weighted, update=False):
        """The one validity rule of weights, for fits and updates alike: at least one sample
        of positive weight and, for a classifier without declared classes, two classes among
        the samples of positive weight (``n_classes_weighted``; None: not checked).

        Raises
        ------
        ValueError
            Naming the rule broken; ``update``: as the result of the update (weights 0 set
            by :meth:`reweight`, or samples of positive weight removed or relabelled).
        """
        if n_weighted < 1:
            raise ValueError(
                ("the update would leave every sample with weight zero (" if update else
                 "sample_weight: every weight is zero (") + "the model would be beta = 0, "
                "fitted on nothing); at least one sample needs a positive weight")
        if n_classes_weighted is not None and n_classes_weighted < 2:
            raise ValueError(
                ("the update would leave a single class in the training data (among the "
                 "samples of positive weight: a class's samples removed, relabelled or "
                 "reweighted to 0)" if update else
                 "the samples with a positive sample_weight show a single class")
                + "; a classifier needs two classes")

    def _warm_coef(self):
        """The current solution to warm-start a refit from, when it solves the same loss over
        the same kind of problem (None otherwise)."""
        st = self._state if self._is_fitted() else None
        if st is None or st.loss.name != self.loss:
            return None  # unfitted, or set_params changed the loss since the fit
        return st.warm_coef(self._ledger.active_slots())

    def _new_state(self, data, t, capacity, previous, w=None):
        """A state for the current parameters, solved on Φ or K, targets ``t`` and weights
        ``w`` (None: 1 each), warm-started from ``previous`` when it has the shape the state
        starts from."""
        cls = state_for(self._kernel, self.loss)
        width = data.shape[0] if cls.warm_per_sample else data.shape[1]
        K = self._n_classes
        if previous is not None and previous.shape != ((width, K) if K else (width,)):
            previous = None
        opts = self._solver_options()
        self._check_scale(data, opts.C)
        st = (one_vs_rest_state(opts, self._max_rank, cls, K) if K
              else cls(opts, self._max_rank))
        st = st.fit(data, t, capacity, previous, **({} if w is None else {"w": w}))
        self._check_solution(st)
        return st

    def partial_fit(self, X, y, classes=None, sample_weight=None):
        """scikit-learn's spelling of :meth:`add`; on an unfitted model it fits.

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)
        y : array-like of shape (n_samples,)
        classes : array-like of shape (2,), optional
            Classifiers only: every label the model will see, declared on the first call
            (scikit-learn's convention); ``y`` may then show fewer, and later batches may bring
            the others.
        sample_weight : array-like of shape (n_samples,) or float, optional
            The samples' weights (see :meth:`fit`).

        Returns
        -------
        self
        """
        if not self._is_fitted():
            if any_dask(X, y, sample_weight):
                if classes is not None:
                    raise ValueError("partial_fit(classes=...) takes no dask input; fit the "
                                     "dask collections with fit")
                return self._fit_dask(X, y, sample_weight)
            self._check_dense(X, y)
            if self._classifier:
                return self._fit(X, y, classes=classes, sample_weight=sample_weight)
            return self._fit(X, y, sample_weight=sample_weight)
        if classes is not None and self._classifier:
            if not np.array_equal(np.unique(np.asarray(classes)), self.classes_):
                raise ValueError(
                    f"classes={list(classes)} differ from the model's {self.classes_.tolist()}"
                )
        self.add(X, y, sample_weight=sample_weight)
        return self

    def _is_fitted(self):
        return hasattr(self, "_ledger")

    # --------------------------------------------------------------- updates
    def add(self, X, y, sample_weight=None):
        """Add samples; the model becomes exactly the fit on the enlarged data.

        Parameters
        ----------
        X : array-like of shape (k, n_features)
        y : array-like of shape (k,)
        sample_weight : array-like of shape (k,) or float, optional
            Their weights (default 1; see :meth:`fit`).

        Returns
        -------
        ids : ndarray of shape (k,)
            The stable ids given to the new samples.
        """
        return self.update(X_add=X, y_add=y, sample_weight_add=sample_weight)

    def reweight(self, ids, sample_weight, *, X=None, y=None):
        """Change the weights of existing samples, keeping their ids; the model becomes
        exactly the fit with the new weights (weight 0 silences a sample without removing
        it).

        Parameters
        ----------
        ids : array-like of int
        sample_weight : array-like of shape (len(ids),) or float
            The new non-negative weights.
        X, y : array-like, optional
            ``keep_data=False`` models only: the samples' rows (required) and current labels
            (required for a regressor; a classifier recognises them from the rows), checked
            against the stored digests, as for :meth:`relabel`.

        Returns
        -------
        self
        """
        self.update(reweight_ids=ids, reweight_weight=sample_weight, X_reweight=X,
                    y_reweight=y)
        return self

    def remove(self, ids=None, *, X=None, y=None):
        """Remove samples by id (or, for ``keep_data=False`` models, by value).

        Parameters
        ----------
        ids : array-like of int, optional
            Ids of the samples to forget.
        X, y : array-like, optional
            The samples themselves.  Required with ``keep_data=False`` (the model stores neither
            rows nor labels; they are checked against the stored digests): ``remove(X=rows,
            y=labels)`` finds the samples by value, ``remove(ids, X=rows)`` checks that the
            rows are those samples (their labels, needed by the exact update, are then taken
            from ``y`` when given, else recognised from the rows; see ``keep_data``).

        Returns
        -------
        removed : ndarray of int
            The ids removed.
        """
        return self._update(remove_ids=ids, X_remove=X, y_remove=y)[1]

    def relabel(self, ids, y, *, X=None, y_old=None):
        """Change the labels (targets) of existing samples, keeping their ids.

        Parameters
        ----------
        ids : array-like of int
        y : array-like
            The corrected labels; for classifiers one of ``classes_``.
        X : array-like, optional
            The samples' rows, required with ``keep_data=False`` (the model keeps neither rows
            nor labels: the rows, with the current labels, are checked against the stored
            digests).
        y_old : array-like, optional
            The samples' current labels, which the exact update needs: required for a
            ``keep_data=False`` regressor (it keeps no target); a ``keep_data=False``
            classifier recognises them from the rows (given, they are checked).

        Returns
        -------
        self
        """
        self.update(relabel_ids=ids, y_relabel=y, X_relabel=X, y_relabel_old=y_old)
        return self

    def update(self, *, X_add=None, y_add=None, remove_ids=None, X_remove=None, y_remove=None,
               relabel_ids=None, y_relabel=None, X_relabel=None, y_relabel_old=None,
               sample_weight_add=None, reweight_ids=None, reweight_weight=None,
               X_reweight=None, y_reweight=None):
        """Any mix of additions, removals, relabels and reweights as one exact update (one
        transaction).

        The arguments are those of :meth:`add` (``X_add``, ``y_add``, ``sample_weight_add``),
        :meth:`remove` (``remove_ids``, ``X_remove``, ``y_remove``), :meth:`relabel`
        (``relabel_ids``, ``y_relabel``, ``X_relabel``, ``y_relabel_old``) and
        :meth:`reweight` (``reweight_ids``, ``reweight_weight``, ``X_reweight``,
        ``y_reweight``).

        Returns
        -------
        ids : ndarray of int
            The ids of the added samples (empty when nothing is added).
        """
        return self._update(X_add=X_add, y_add=y_add, remove_ids=remove_ids,
                            X_remove=X_remove, y_remove=y_remove, relabel_ids=relabel_ids,
                            y_relabel=y_relabel, X_relabel=X_relabel,
                            y_relabel_old=y_relabel_old, sample_weight_add=sample_weight_add,
                            reweight_ids=reweight_ids, reweight_weight=reweight_weight,
                            X_reweight=X_reweight, y_reweight=y_reweight)[0]

    def _update(self, **change):
        """One update as a transaction: on any exception, an interruption included, the model is
        left as it was (see :meth:`_transaction`); updates of one model are serialised."""
        check_is_fitted(self, "_ledger")
        # dask rows, labels, ids or weights of an update are the size of the change: gathered
        change = {k: gathered(v) for k, v in change.items()}
        return self._locked(self._update_locked, **change)

    def _update_locked(self, X_add=None, y_add=None, remove_ids=None, X_remove=None,
                       y_remove=None, relabel_ids=None, y_relabel=None, X_relabel=None,
                       y_relabel_old=None, sample_weight_add=None, reweight_ids=None,
                       reweight_weight=None, X_reweight=None, y_reweight=None):
        led = self._ledger
        # ---- validation: nothing is changed before this block has passed
        Xa = ta = None
        if X_add is not None or y_add is not None:
            if X_add is None or y_add is None:
                raise ValueError("adding samples needs both X and y")
            Xa = self._rows(X_add)
            ta = self._encode_y(y_add, what="y")
            if ta.shape[0] != Xa.shape[0]:
                raise ValueError(f"X has {Xa.shape[0]} rows but y has {ta.shape[0]} labels")
            wa = _weights(sample_weight_add, Xa.shape[0])
        elif sample_weight_add is not None:
            raise ValueError("sample_weight of added samples needs samples to add")
        else:
            wa = None
        rw_slots = rw = None
        if reweight_ids is not None or reweight_weight is not None:
            if reweight_ids is None or reweight_weight is None:
                raise ValueError("reweighting needs both the sample ids and their weights")
            rw_slots = led.slots_of(reweight_ids, "reweight ids")
            rw = _weights(reweight_weight, rw_slots.shape[0])
            rw = np.ones(rw_slots.shape[0]) if rw is None else rw
        rem_slots = rem_rows = rem_t = None
        if remove_ids is not None or X_remove is not None:
            rem_slots, rem_rows, rem_t = self._plan_remove(remove_ids, X_remove, y_remove)
        rel_slots = tl = rel_rows = rel_old = None
        if relabel_ids is not None:
            if y_relabel is None:
                raise ValueError("relabel needs the new labels y")
            rel_slots = led.slots_of(relabel_ids, "relabel ids")
            tl = self._encode_y(np.atleast_1d(np.asarray(y_relabel)), what="y")
            if tl.shape[0] != rel_slots.shape[0]:
                raise ValueError(f"{rel_slots.shape[0]} ids but {tl.shape[0]} labels to relabel")
            if not self._keeps_rows():
                rel_rows, rel_old = self._given_samples(rel_slots, X_relabel, y_relabel_old,
                                                        "relabel")
            elif X_relabel is not None:  # not needed (the rows are kept), checked as predict
                self._rows(X_relabel)     # would check them
        rw_rows = rw_t = None
        if rw_slots is not None and self._keeps_rows() and X_reweight is not None:
            self._rows(X_reweight)  # not needed (the rows are kept), checked as predict would
        if rw_slots is not None and not self._keeps_rows():
            rw_rows, rw_t = self._given_samples(rw_slots, X_reweight, y_reweight, "reweight")
            if rel_slots is not None:  # the targets after this update's relabels
                rw_t = rw_t.copy()
                for j, slot in enumerate(rw_slots.tolist()):
                    hit = np.flatnonzero(rel_slots == slot)
                    if hit.size:
                        rw_t[j] = tl[hit[0]]
        plan = UpdatePlan(Xa, ta, rem_slots, rem_rows, rel_slots, tl, rel_rows, rem_t, rel_old,
                          wa, rw_slots, rw, rw_rows, rw_t)
        if not (plan.adds or plan.removes or plan.relabels or plan.reweights):
            raise ValueError("nothing to update: give samples to add, remove, relabel or "
                             "reweight")
        if self._classifier and not led.keeps_labels:  # the touched samples' labels and
            plan = replace(plan, changed=self._samples_changed(plan))  # weights, as they are
        if not plan.removes:
            rem_slots = np.zeros(0, dtype=np.intp)
        if plan.relabels and np.intersect1d(rem_slots, plan.relabel_slots).size:
            raise ValueError("the same sample ids are both removed and relabelled")
        if plan.reweights and np.intersect1d(rem_slots, plan.reweight_slots).size:
            raise ValueError("the same sample ids are both removed and reweighted")
        self._check_outcome(plan, rem_slots)
        return self._transaction(plan, rem_slots)

    def _transaction(self, plan, rem_slots):
        """The numerical work, then the ledger; all of it or none of it.

        The ledger journals its changes (O(size of the change)) and rolls them back on any
        exception.  A state that raised ValueError has restored itself; after any other
        exception (an interruption, say) a state may be half-updated, and is restored from its
        checkpoint (taken only where it cannot be rebuilt: a closed-form model without stored
        rows) or rebuilt from the restored ledger by a fresh solve.
        """
        led, saved = self._ledger, dict(self.__dict__)
        checkpoint = None if led.keep_rows else self._state.checkpoint()
        in_state = False
        led.begin()
        try:
            in_state = True
            new_ids = self._apply(plan)
            in_state = False
            removed = led.ids[rem_slots].copy()
            if rem_slots.size:
                led.delete(rem_slots)
            if plan.relabels:
                digests = (led.records(plan.relabel_rows, plan.relabel_t) if led.keep_digests
                           else None)
                led.relabel(plan.relabel_slots, led.stored_labels(plan.relabel_t), digests)
            if plan.reweights:
                led.reweight(plan.reweight_slots, plan.reweight_w)
            new_ids = self._commit_add(plan, new_ids)
            if "_n_positive" in self.__dict__:
                self._n_positive = self._positives_after(plan)
            self._after_update()
            self._bump_version()
        except BaseException as exc:
            led.rollback()
            self.__dict__.clear()
            self.__dict__.update(saved)
            if not (in_state and isinstance(exc, ValueError)):
                self._restore_state(checkpoint)
                # the state object is a new one: views taken before (problem_, what-if
                # objects) must see that they are stale, though the model is the same
                self._bump_version()
            raise
        led.commit()
        return new_ids, removed

    def _restore_state(self, checkpoint):
        """Make the state exact for the (restored) ledger again: from ``checkpoint`` when one
        was taken, else by solving afresh on the stored rows (O(n p²) or O(n³), paid only
        after an interrupted update)."""
        if checkpoint is not None:
            self._state = checkpoint
            return
        led, st = self._ledger, self._state
        led.compact()
        n = led.n_samples
        rows = led.X[:n]
        data = self._k(rows, rows) if self._kernel else rows
        w = led.weights(np.arange(n))
        self._state = st.blank().fit(data, led.y[:n].copy(), led.capacity,
                                     **({} if w is None else {"w": w.copy()}))

    def _bump_version(self):
        """Count the changes of the fitted model, so that objects derived from it (the
        sensitivity what-if objects) can tell when they are stale."""
        self._version = getattr(self, "_version", 0) + 1

    def _keeps_rows(self):
        return self._ledger.keep_rows

    def _stored_samples(self, slots):
        """``(rows, targets)`` of the samples at ``slots`` from a store outside the ledger
        (the linear models' Dask row store), or None when the model has none."""
        return None

    def _given_samples(self, slots, X, y, verb):
        """The rows and current targets of the samples at ``slots`` of a model that keeps
        no rows (``keep_data=False``), as the caller gives them to ``verb`` them: the rows are
        required, the targets taken from ``y`` or recognised (both checked against the
        digests)."""
        if X is None:
            got = self._stored_samples(slots)  # rows kept elsewhere (a Dask row store)
            if got is not None:
                return got
            raise ValueError("this model keeps no training rows (keep_data=False): pass the "
                             f"samples' rows as X to {verb} them")
        rows = self._rows(X)
        if rows.shape[0] != slots.shape[0]:
            raise ValueError(f"{slots.shape[0]} ids but {rows.shape[0]} rows in X")
        return rows, self._current_targets(slots, rows, y)

    def _current_targets(self, slots, rows, y):
        """The current encoded targets of the samples at ``slots`` of a model that keeps no
        labels, given their rows: ``y`` as given (checked against the digests), or recognised
        from the digests (classifiers)."""
        led = self._ledger
        if y is None:
            if not self._classifier:
                raise ValueError(
                    "this model keeps no targets (keep_data=False): pass the samples' current "
                    "targets (y of remove, y_old of relabel) with their rows"
                )
            return led.labels_of(slots, rows, self._label_candidates())
        t = self._encode_y(y, what="y")
        if t.shape[0] != slots.shape[0]:
            raise ValueError(f"{slots.shape[0]} ids but {t.shape[0]} labels in y")
        led.check_rows(slots, rows, t)
        return t

    def _label_candidates(self):
        """The encoded labels a sample may have: what recognises a classifier's label from its
        row and digest when the model keeps no labels (None for a regressor)."""
        if not self._classifier:
            return None
        K = self._n_classes
        return tuple(float(k) for k in range(K)) if K else (-1.0, 1.0)

    def _plan_remove(self, ids, X, y):
        """Slots, rows (as given, ``keep_data=False``) and current targets (``keep_data=False``:
        from the caller, checked against the digests; else None) of the samples to remove."""
        led = self._ledger
        rows = t = None
        if X is not None:
            rows = self._rows(X)
        if ids is not None:
            slots = led.slots_of(ids, "ids")
            if not self._keeps_rows():
                got = self._stored_samples(slots) if rows is None else None
                if got is not None:
                    rows, t = got
                elif rows is None:
                    raise ValueError(
                        "this model keeps no training rows (keep_data=False): pass the samples "
                        "to forget as remove(ids, X=...) or remove(X=..., y=...)"
                    )
                else:
                    if rows.shape[0] != slots.shape[0]:
                        raise ValueError(f"{slots.shape[0]} ids but {rows.shape[0]} rows in X")
                    t = self._current_targets(slots, rows, y)
        else:
            if self._keeps_rows():
                raise ValueError("this model keeps its training rows: remove samples by id")
            if y is None:
                raise ValueError("removing samples by value needs both X and y")
            t = self._encode_y(y, what="y")
            if t.shape[0] != rows.shape[0]:
                raise ValueError(f"X has {rows.shape[0]} rows but y has {t.shape[0]} labels")
            slots = led.find(rows, t)
        if led.keeps_labels:
            t = None
        return slots, rows, t

    def _samples_changed(self, plan):
        """``(before, after)`` of the samples ``plan`` touches, for a model that keeps no
        labels (their targets come with the plan): each a list of ``(targets, weights)``
        parts -- before: the removed, relabelled and reweighted samples as they are; after:
        the relabelled and reweighted ones as they will be, and the added ones.  Taken while
        validating (``plan.changed``), before the ledger changes."""
        if plan.changed is not None:
            return plan.changed
        led = self._ledger
        before, after = [], []
        if plan.removes:
            before.append((plan.remove_t, led.w[plan.remove_slots]))
        slots = [a for a in (plan.relabel_slots, plan.reweight_slots) if a is not None]
        if slots:
            S = np.unique(np.concatenate(slots))
            w0 = np.asarray(led.w[S], dtype=np.float64)
            t0, w1 = np.zeros(S.size), w0.copy()
            if plan.reweights:  # the targets after the relabels: those before, patched below
                j = np.searchsorted(S, plan.reweight_slots)
                t0[j], w1[j] = plan.reweight_t, plan.reweight_w
            t1 = t0.copy()
            if plan.relabels:
                j = np.searchsorted(S, plan.relabel_slots)
                t0[j], t1[j] = plan.relabel_t_old, plan.relabel_t
            before.append((t0, w0))
            after.append((t1, w1))
        if plan.adds:
            after.append((plan.t_add, np.ones(plan.t_add.shape[0]) if plan.w_add is None
                          else plan.w_add))
        return before, after

    def _positives_after(self, plan):
        """Positive samples of positive weight after ``plan``, for a binary classifier that
        keeps no labels (it counts them instead, to refuse an update that would leave one
        class among the samples of positive weight, as fit refuses such weights)."""
        before, after = self._samples_changed(plan)

        def count(parts):
            return sum(int(np.count_nonzero((np.asarray(t) > 0) & (np.asarray(w) > 0)))
                       for t, w in parts)

        return self._n_positive - count(before) + count(after)

    def _weights_change(self, plan):
        """Whether the weight rule must be checked on the weights: a weight other than 1 is in
        the model or comes with ``plan``, and ``plan`` may take positive weight away (a
        removal, a relabel, a reweight to 0).  Otherwise the rule holds after the update as
        before it, or every weight is 1 and the sample count settles it."""
        weighted = self._ledger.weighted or plan.reweights or plan.w_add is not None
        takes = plan.removes or plan.relabels or (plan.reweights and
                                                  bool(np.any(plan.reweight_w == 0)))
        return bool(weighted and takes)

    def _weighted_after(self, plan, rem_slots):
        """``(live, w)``: the samples left by ``plan`` (a mask over the ledger's slots) and the
        weights they will have; the added samples' weights are in ``plan.w_add``."""
        led = self._ledger
        live = np.array(led.active, dtype=bool, copy=True)
        live[rem_slots] = False
        w = np.array(led.w.copy(), dtype=np.float64)
        if plan.reweights:
            w[plan.reweight_slots] = plan.reweight_w
        return live, w

    def _n_weighted_after(self, plan, rem_slots):
        """Samples of positive weight after ``plan``."""
        live, w = self._weighted_after(plan, rem_slots)
        n = int(np.count_nonzero(w[live] > 0))
        if plan.adds:
            n += (plan.X_add.shape[0] if plan.w_add is None
                  else int(np.count_nonzero(plan.w_add > 0)))
        return n

    def _check_outcome(self, plan, rem_slots):
        """Refuse an update whose result ``fit`` would refuse: no sample left, or the weight
        rule of :meth:`_check_weight_rule` broken (no sample of positive weight; a classifier
        without declared classes left with one class among them)."""
        led = self._ledger
        n_after = led.n_samples - rem_slots.size + (plan.X_add.shape[0] if plan.adds else 0)
        if n_after < 1:
            raise ValueError("the update would remove every sample; a model needs at least one")
        shown = self._classifier and not self._classes_given
        if self._weights_change(plan):
            if not led.keeps_labels:
                n_w = self._n_weighted_after(plan, rem_slots)
                n_pos = self._positives_after(plan) if shown else None
                self._check_weight_rule(n_w, None if n_pos is None else
                                        int(n_pos > 0) + int(n_pos < n_w), update=True)
                return
            live, w = self._weighted_after(plan, rem_slots)
            live &= w > 0
            t = led.y.copy()
            if plan.relabels:
                t[plan.relabel_slots] = plan.relabel_t
            labels = [t[live]]
            if plan.adds:
                labels.append(plan.t_add if plan.w_add is None else plan.t_add[plan.w_add > 0])
            labels = np.concatenate(labels)
            self._check_weight_rule(labels.shape[0], np.unique(labels).size if shown else None,
                                    update=True)
            return
        if shown:
            if not led.keeps_labels:
                n_pos = self._positives_after(plan)
                one_class = n_pos == 0 or n_pos == n_after
            else:
                keep = led.active.copy()
                keep[rem_slots] = False
                t = led.y.copy()
                if plan.relabels:
                    t[plan.relabel_slots] = plan.relabel_t
                labels = [t[keep]]
                if plan.adds:
                    labels.append(plan.t_add)
                labels = np.concatenate(labels)
                one_class = labels.size == 0 or np.all(labels == labels[0])
            if one_class:
                raise ValueError(
                    "the update would leave a single class in the training data; a classifier "
                    "needs two classes"
                )

    def _commit_add(self, plan, slots):
        if not plan.adds:
            return np.zeros(0, dtype=np.int64)
        Xa, ta = plan.X_add, plan.t_add
        led = self._ledger
        digests = led.records(Xa, ta) if led.keep_digests else None
        return led.insert(slots, self._stored_rows(Xa), led.stored_labels(ta), digests,
                          plan.w_add)

    def _after_update(self):
        led = self._ledger
        led.release(self._state.reusable_slots())
        if led.capacity > 256 and led.n_samples < led.capacity // 4:
            keep = led.compact()
            self._state.take(keep, led.capacity)

    def save(self, path):
        """Write the fitted model to ``path``; deprecated, use ``deltafit.save(model, path)``.

        .. deprecated::
            ``model.save(path)`` warns (FutureWarning) and will be removed; the one way to save
            and load is ``deltafit.save(model, path)`` / ``deltafit.load(path)``, which also
            take an :class:`deltafit.UpdatablePipeline`.  It writes the same file (npz + JSON,
            no pickle), under the model's lock.
        """
        warnings.warn("model.save(path) is deprecated and will be removed; use "
                      "deltafit.save(model, path)", FutureWarning, stacklevel=2)
        save = type(self)._save_file
        if save is None:  # deltafit.persistence not imported (import deltafit imports it)
            raise RuntimeError("model.save needs deltafit.persistence: use "
                               "deltafit.save(model, path)")
        save(self, path)

    # -------------------------------------------------------------- queries
    @property
    @guarded_read
    def sample_ids_(self):
        """Ids of the training samples the model currently represents, in increasing order."""
        if not self._is_fitted():
            raise AttributeError("sample_ids_ is set by fit")
        return self._ledger.sample_ids()

    @property
    @guarded_read
    def sample_weight_(self):
        """Weights of the training samples, in the order of ``sample_ids_`` (1 unless given
        to :meth:`fit`, :meth:`add` or :meth:`reweight`)."""
        if not self._is_fitted():
            raise AttributeError("sample_weight_ is set by fit")
        led = self._ledger
        return led.w[led.active_slots()].copy()

    @property
    @guarded_read
    def problem_(self):
        """:class:`~deltafit.models.FittedProblem`: read-only view of the fitted problem
        (features or kernel, targets, loss, C, solution, gradient, Hessian) for code that
        builds on the model; made anew at each access, it copies nothing."""
        if not self._is_fitted():
            raise AttributeError("problem_ is set by fit")
        from deltafit.models._problem import FittedProblem

        return FittedProblem(self)

    @property
    @guarded_read
    def n_samples_(self):
        """Number of training samples the model currently represents."""
        if not self._is_fitted():
            raise AttributeError("n_samples_ is set by fit")
        return self._ledger.n_samples

    def predict(self, X):
        """Predicted labels (classifiers) or values (regressors).

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)

        Returns
        -------
        ndarray of shape (n_samples,)
        """
        z = self._decision(X)
        if not self._classifier:
            return z
        if is_dask(z):
            return map_labels(z, self._labels().decode, self.classes_.dtype)
        return self._decode_y(z)

    @property
    @guarded_read
    def n_iter_(self):
        """Newton iterations of the last (re-)solve (hinge: coordinate-descent sweeps plus
        proximal active-set steps, see :func:`deltafit.solvers.hinge_primal`); 1 for the closed
        form (one direct solve)."""
        check_is_fitted(self, "_state")
        res = getattr(self._state, "result", None)
        return 1 if res is None else res.n_iter

    @property
    @guarded_read
    def grad_norm_(self):
        """‖∇J‖₂ in model space (RKHS norm for kernel models) at the current solution; it
        certifies ``‖β − β*‖ ≤ grad_norm_`` by 1-strong convexity (Okumura et al., "Quick sensitivity analysis for incremental data modification and its
        application to leave-one-out CV in linear classification problems", Theorem 6).  For the
        closed form it is computed from the exact statistics (O(p²), kernel O(n²)), so that it
        also covers rounding and the drift between refinements of the tracked inverse.

        For ``loss="hinge"`` J has no gradient at the optimum; ``grad_norm_`` is then the
        radius that the duality gap certifies, ``sqrt(2 (gap + rounding bound))`` (see
        :class:`deltafit.solvers.HingeResult`): still a true bound on ‖β − β*‖, but a
        conservative one (≈ 1e-4 where the actual error is ≈ 1e-12).  The optimality measures
        proper are in ``_state.result.kkt_violation`` and ``.duality_gap``.  The sensitivity
        bounds do not accept hinge models (their theorems need a differentiable loss)."""
        check_is_fitted(self, "_state")
        return self._certified_residual()

    def _certified_residual(self):
        st = self._state
        res = getattr(st, "result", None)
        if res is not None:
            return float(res.grad_norm)
        version = getattr(self, "_version", 0)
        cached = getattr(st, "_residual_cache", None)
        if cached is None or cached[0] != version:
            cached = (version, st.gradient_norm())
            st._residual_cache = cached
        return cached[1]

    def _decision(self, X):
        check_is_fitted(self, "_ledger")
        if is_dask(X):
            check_feature_names(self, X)  # a dask DataFrame's columns, as a pandas frame's
            return self._read(lambda: self._decision_dask(X))
        self._check_dense(X, fitting=False)
        X = validate_data(self, X, dtype=np.float64, reset=False, accept_sparse="csr")
        X = self._model_format(X)
        return self._read(lambda: self._decision_checked(X))

    def _decision_dask(self, X):
        """Lazy decisions on a dask X (the linear models; see their ``decision_function``)."""
        raise ValueError(f"{type(self).__name__} takes no dask input; LinearClassifier and "
                         "LinearRegressor do")

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.input_tags.sparse = self._sparse_refusal(fitting=True) is None
        return tags


class ClassifierOutputMixin:
    """What the two classifiers share (put before ClassifierMixin in the bases): tags,
    ``decision_function`` and, for the logistic loss only, ``predict_proba``.

    Two classes make one binary problem (targets ±1, ``classes_[1]`` positive); K ≥ 3 classes
    make K one-vs-rest problems over one ledger (:mod:`~deltafit._states._one_vs_rest`), as
    scikit-learn's ``OneVsRestClassifier`` with the same C for every class.
    """

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.classifier_tags.multi_class = True
        return tags

    def decision_function(self, X):
        """Signed scores ``⟨Φ(x), β⟩`` (kernel models: ``Σ α_i k(x_i, x)``).

        Returns
        -------
        ndarray of shape (n_samples,) or (n_samples, n_classes)
            Two classes: one score, positive means ``classes_[1]``.  More: one score per
            class (its one-vs-rest problem), columns in the order of ``classes_``; the
            prediction is the class of the largest.
        """
        return self._decision(X)

    def _is_logistic(self):
        return self.loss == "logistic"

    @available_if(_is_logistic)
    def predict_proba(self, X):
        """Class probabilities (logistic loss only), columns in the order of ``classes_``.

        With more than two classes each class's one-vs-rest probability ``σ(z_k)`` is
        normalised over the classes, as scikit-learn's ``OneVsRestClassifier`` does.  A dask
        X gives a lazy dask array."""
        return _per_block(self._decision(X), _probabilities)

    @available_if(_is_logistic)
    def predict_log_proba(self, X):
        """Logarithm of :meth:`predict_proba` (logistic loss only)."""
        return _per_block(self._decision(X), _log_probabilities)


def _per_block(z, fn):
    """``fn(z)`` (one column per class), block by block when ``z`` is a dask array."""
    if not is_dask(z):
        return fn(z)
    cols = 2 if z.ndim == 1 else z.shape[1]
    return z.map_blocks(fn, dtype=np.float64, chunks=(z.chunks[0], (cols,)),
                        **({"new_axis": 1} if z.ndim == 1 else {}))


def _probabilities(z):
    p = expit(z)
    if z.ndim == 1:
        return np.column_stack([1.0 - p, p])
    return p / p.sum(axis=1, keepdims=True)


def _log_probabilities(z):
    if z.ndim == 1:
        return np.column_stack([log_expit(-z), log_expit(z)])
    lp = log_expit(z)
    top = lp.max(axis=1, keepdims=True)
    return lp - (top + np.log(np.exp(lp - top).sum(axis=1, keepdims=True)))


class RegressorTags:
    """Tags of the regressors (put before RegressorMixin in the bases): one output or several
    (a 2-D ``y``: one closed-form state with one column per output)."""

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.target_tags.multi_output = True
        tags.target_tags.single_output = True
        return tags


__all__ += ["Ledger", "ClassifierOutputMixin", "RegressorTags"]
