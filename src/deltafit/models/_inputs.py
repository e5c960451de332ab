"""Validation and encoding of what the estimators are given: rows X, targets y, sample weights.

:class:`InputsMixin` checks X as ``predict`` checks it (sparse refusals, column names, width,
finite values, the magnitude cap), encodes targets (±1 or class indices for classifiers,
floats for regressors) and holds the one validity rule of weights (:meth:`_check_weight_rule`)
that fits and updates share.  :func:`as_1d` and :func:`checked_weights` are the plain checks
of labels and weights.
"""

from __future__ import annotations

import numpy as np
import scipy.sparse as sp
from sklearn.utils.validation import column_or_1d

from deltafit.utils._labels import BinaryLabels, ClassLabels, LabelMessages
from deltafit.utils._validation import (
    SparseDataError,
    check_dense,
    check_feature_names,
    check_magnitude,
    check_rows,
    check_scale,
)

__all__ = ["InputsMixin", "LABELS", "as_1d", "checked_weights"]

LABELS = LabelMessages(
    label_type=None,  # scikit-learn's check_classification_targets
    one_class=(
        "y has only one class ({labels}); a classifier needs two classes to train (pass "
        "classes= to partial_fit to declare the others)"
    ),
    outside_classes="y has labels {unseen} not in classes",
    unknown=(
        "{what} has labels {first10} that are not among the model's classes {classes}; an "
        "update cannot add a class: declare every class the data may bring at the first "
        "fit, with partial_fit(X, y, classes=[...]) (a class may have no samples)"
    ),
)


def as_1d(y, what):
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


def checked_weights(sample_weight, n, what="sample_weight"):
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
        raise ValueError(
            f"{what} has negative weights (at {np.flatnonzero(w < 0)[:10].tolist()}); "
            "weights must be >= 0"
        )
    return None if np.all(w == 1.0) else w


class InputsMixin:
    """Validation and encoding of X, y and weights for :class:`~deltafit.models.UpdatableMixin`
    (scikit-learn style mixin: no state of its own, it reads the estimator's)."""

    def _encode_y(self, y, *, fitting=False, classes=None, what="y"):
        """Validated internal targets: ±1 (two classes) or class indices for classifiers,
        floats for regressors (one column per output for a multi-output regressor)."""
        if not self._classifier:
            return self._regression_targets(y, fitting, what)
        y = column_or_1d(y, warn=True) if fitting else as_1d(y, what)
        if fitting:
            self.classes_ = ClassLabels(messages=LABELS).fit(y, classes).classes_
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
                    raise ValueError(
                        f"{what} must have shape (n_samples, {K}) (the model has "
                        f"{K} outputs), got {y.shape}"
                    )
            else:
                y = as_1d(y, what)
        try:
            y = np.asarray(y, dtype=np.float64)
        except (TypeError, ValueError) as exc:
            raise ValueError(f"{what} must be numeric for a regressor: {exc}") from exc
        if not np.all(np.isfinite(y)):
            raise ValueError(f"{what} contains NaN or infinity")
        top = float(np.max(np.abs(y))) if y.size else 0.0
        check_magnitude(
            top * top, self._fitted_C(fitting), f"{what}: the squared target", "rescale y"
        )
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
        check_magnitude(
            top,
            C,
            "the kernel value |k(x, x')| (intercept term included)",
            "rescale X or use a bounded kernel",
        )

    def _decode_y(self, t):
        return self._labels().decode(t)

    def _labels(self):
        """The label encoder of ``classes_``: targets ±1 for two classes, class indices for
        more (one-vs-rest, :mod:`~deltafit._states._one_vs_rest`)."""
        if self.classes_.size == 2:
            return BinaryLabels(self.classes_, LABELS)
        return ClassLabels(self.classes_, LABELS)

    @property
    def _n_classes(self):
        """K ≥ 3 for a multiclass classifier (one-vs-rest), else 0."""
        classes = self.__dict__.get("classes_")
        return 0 if classes is None or classes.size <= 2 else int(classes.size)

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
        rows = check_rows(
            X, self.n_features_in_, what, owner or type(self).__name__, sparse=sparse_ok
        )
        return self._model_format(rows)

    def _model_format(self, X):
        """Validated rows ``X`` in the format the model was fitted on: dense, or a float64
        ``csr_matrix`` for a model fitted on sparse X."""
        if self.__dict__.get("_sparse_input", False):
            return X if sp.issparse(X) else sp.csr_matrix(X)
        return X.toarray() if sp.issparse(X) else X

    def _check_fit_weights(self, t, w):
        """Refuse weights that leave no sample, or (a classifier without declared classes)
        one class, with a positive weight (scikit-learn's rules; :meth:`_check_weight_rule`,
        which the updates apply to the data they leave)."""
        shown = self._classifier and not self._classes_given
        self._check_weight_rule(
            int(np.count_nonzero(w > 0)), np.unique(t[w > 0]).size if shown else None
        )

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
                (
                    "the update would leave every sample with weight zero ("
                    if update
                    else "sample_weight: every weight is zero ("
                )
                + "the model would be beta = 0, "
                "fitted on nothing); at least one sample needs a positive weight"
            )
        if n_classes_weighted is not None and n_classes_weighted < 2:
            raise ValueError(
                (
                    "the update would leave a single class in the training data (among the "
                    "samples of positive weight: a class's samples removed, relabelled or "
                    "reweighted to 0)"
                    if update
                    else "the samples with a positive sample_weight show a single class"
                )
                + "; a classifier needs two classes"
            )
