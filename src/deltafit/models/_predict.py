"""What a fitted estimator answers: predictions, decision scores, class probabilities and the
fitted attributes of its samples and solve.

:class:`PredictMixin` (every estimator: ``predict``, ``sample_ids_``, ``sample_weight_``,
``n_samples_``, ``n_iter_``, ``grad_norm_``), :class:`ClassifierOutputMixin` (the classifiers:
``decision_function``, ``predict_proba`` for the logistic loss) and :class:`RegressorTags`
(the regressors' tags).  Every read runs through the model's guard
(:func:`~deltafit.models._guard.guarded_read`): it sees the model between two updates.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
from scipy.special import expit, log_expit
from sklearn.utils.metaestimators import available_if
from sklearn.utils.validation import check_is_fitted, validate_data

from deltafit._dask._input import is_dask, map_labels
from deltafit.models._guard import guarded_read
from deltafit.utils._validation import check_feature_names

__all__ = ["ClassifierOutputMixin", "PredictMixin", "RegressorTags"]


class PredictMixin:
    """Predictions and fitted attributes of :class:`~deltafit.models.UpdatableMixin`
    (scikit-learn style mixin: no state of its own)."""

    # what it reads of the estimator (UpdatableMixin and InputsMixin)
    _classifier: bool
    classes_: np.ndarray
    _ledger: Any
    _state: Any
    _is_fitted: Callable[[], bool]

    @property
    @guarded_read
    def sample_ids_(self) -> np.ndarray:
        """Ids of the training samples the model currently represents, in increasing order."""
        if not self._is_fitted():
            raise AttributeError("sample_ids_ is set by fit")
        return self._ledger.sample_ids()

    @property
    @guarded_read
    def sample_weight_(self) -> np.ndarray:
        """Weights of the training samples, in the order of ``sample_ids_`` (1 unless given
        to :meth:`fit`, :meth:`add` or :meth:`reweight`)."""
        if not self._is_fitted():
            raise AttributeError("sample_weight_ is set by fit")
        led = self._ledger
        return led.w[led.active_slots()].copy()

    @property
    @guarded_read
    def n_samples_(self) -> int:
        """Number of training samples the model currently represents."""
        if not self._is_fitted():
            raise AttributeError("n_samples_ is set by fit")
        return self._ledger.n_samples

    def predict(self, X: Any) -> Any:
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
            return map_labels(
                z,
                self._labels().decode,  # type: ignore[attr-defined]
                self.classes_.dtype,
            )
        return self._decode_y(z)  # type: ignore[attr-defined]

    @property
    @guarded_read
    def n_iter_(self) -> int:
        """Newton iterations of the last (re-)solve (hinge: coordinate-descent sweeps plus
        proximal active-set steps, see :func:`deltafit.solvers.hinge_primal`); 1 for the closed
        form (one direct solve)."""
        check_is_fitted(self, "_state")
        res = getattr(self._state, "result", None)
        return 1 if res is None else res.n_iter

    @property
    @guarded_read
    def grad_norm_(self) -> float:
        """‖∇J‖₂ in model space (RKHS norm for kernel models) at the current solution; it
        certifies ``‖β − β*‖ ≤ grad_norm_`` by 1-strong convexity (Okumura et al.,
        "Quick sensitivity analysis for incremental data modification and its application
        to leave-one-out CV in linear classification problems", Theorem 6).  For the
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
        raise ValueError(
            f"{type(self).__name__} takes no dask input; LinearClassifier and LinearRegressor do"
        )


class ClassifierOutputMixin:
    """What the two classifiers share (put before ClassifierMixin in the bases): tags,
    ``decision_function`` and, for the logistic loss only, ``predict_proba``.

    Two classes make one binary problem (targets ±1, ``classes_[1]`` positive); K ≥ 3 classes
    make K one-vs-rest problems over one ledger (:mod:`~deltafit._states._one_vs_rest`), as
    scikit-learn's ``OneVsRestClassifier`` with the same C for every class.
    """

    _decision: Callable[[Any], Any]  # PredictMixin's
    loss: str

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.classifier_tags.multi_class = True
        return tags

    def decision_function(self, X: Any) -> Any:
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
    def predict_proba(self, X: Any) -> Any:
        """Class probabilities (logistic loss only), columns in the order of ``classes_``.

        With more than two classes each class's one-vs-rest probability ``σ(z_k)`` is
        normalised over the classes, as scikit-learn's ``OneVsRestClassifier`` does.  A dask
        X gives a lazy dask array."""
        return _per_block(self._decision(X), _probabilities)

    @available_if(_is_logistic)
    def predict_log_proba(self, X: Any) -> Any:
        """Logarithm of :meth:`predict_proba` (logistic loss only)."""
        return _per_block(self._decision(X), _log_probabilities)


def _per_block(z, fn):
    """``fn(z)`` (one column per class), block by block when ``z`` is a dask array."""
    if not is_dask(z):
        return fn(z)
    cols = 2 if z.ndim == 1 else z.shape[1]
    return z.map_blocks(
        fn,
        dtype=np.float64,
        chunks=(z.chunks[0], (cols,)),
        **({"new_axis": 1} if z.ndim == 1 else {}),
    )


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
