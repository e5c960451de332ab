"""Pegasos: the primal estimated sub-gradient solver for linear SVMs, one pass, last iterate."""

from __future__ import annotations

import math
from numbers import Real
from typing import Any

import numpy as np
from numpy.typing import ArrayLike, NDArray
from sklearn.base import ClassifierMixin

from deltafit.solvers._sgd import PEGASOS
from deltafit.stream._base import StreamLinearModel
from deltafit.utils._labels import BinaryLabels, LabelMessages
from deltafit.utils._params import Number

__all__ = ["Pegasos"]

_WORDING = dict(
    name="Pegasos",
    many=(
        "Only binary classification is supported. The type of the target is multiclass: y "
        "has {n} classes (Pegasos is a binary classifier; wrap it in "
        "sklearn.multiclass.OneVsRestClassifier for more)"
    ),
    classes_size="classes must hold two labels, got {given}",
    unknown="{what} has labels {labels} that are not in classes_ {classes}",
)
_LABELS = LabelMessages(**_WORDING)
_TREE_LABELS = LabelMessages(**_WORDING, one_class="y has one class: Pegasos needs two")


class Pegasos(ClassifierMixin, StreamLinearModel):
    """Linear SVM by Pegasos (Shalev-Shwartz, Singer, Srebro and Cotter 2011, Algorithm 1).

    Minimises ``lam/2 ‖w‖² + mean_i max(0, 1 − y_i ⟨w, x_i⟩)`` by one stochastic sub-gradient
    step per sample, step size ``1 / (lam t)``, and predicts with the last iterate — the learner
    of Joulani et al. (2015) §5, for which :func:`deltafit.model_selection.treecv` runs the whole
    TreeCV recursion compiled.

    Parameters
    ----------
    lam : float, default=1e-4
        Regularisation λ > 0 (the paper uses 1e-6 on covertype).
    projection : bool, default=False
        Project each iterate onto the ball of radius ``1/sqrt(lam)`` (the optional step of
        Algorithm 1).
    fit_intercept : bool, default=True
        Add a constant feature of value ``intercept_scaling``; its weight is regularised like
        the others (ARCHITECTURE.md, "The problem").
    intercept_scaling : float, default=1.0
    shuffle : bool, default=False
        ``fit`` visits the rows in a random order (``partial_fit`` keeps the given order).
    random_state : int, RandomState or None
        Seeds ``shuffle``.

    Attributes
    ----------
    coef_ : ndarray of shape (n_features,)
    intercept_ : float
    t_ : int
        Samples learned.
    classes_ : ndarray of shape (2,)
        ``classes_[0]`` is the label −1, ``classes_[1]`` the label +1.
    n_features_in_ : int

    Notes
    -----
    Step ``t`` with ``η_t = 1/(λ t)``: ``w ← (1 − η_t λ) w + η_t y x`` if ``y ⟨w, x⟩ < 1``
    (``w`` before the step), else ``w ← (1 − η_t λ) w``.  The state keeps ``w = a · v`` so the
    shrinkage costs O(1) per sample; the loop is compiled with numba
    (``pip install "deltafit[fast]"``).

    Examples
    --------
    >>> from sklearn.datasets import load_breast_cancer
    >>> from sklearn.preprocessing import StandardScaler
    >>> from deltafit.stream import Pegasos
    >>> X, y = load_breast_cancer(return_X_y=True)
    >>> X = StandardScaler().fit_transform(X)
    >>> clf = Pegasos(lam=1e-2, shuffle=True, random_state=0).fit(X, y)
    >>> clf.t_, clf.coef_.shape
    (569, (30,))
    >>> bool(clf.score(X, y) > 0.9)
    True
    >>> clf.learn_one(X[0], y[0]).predict_one(X[0]) in (0, 1)   # river-style, one sample
    True
    """

    _kind = PEGASOS

    _parameter_constraints: dict = {
        **StreamLinearModel._parameter_constraints,
        # at least 1e-100: 1/(lam t) would overflow below
        "lam": [Number(Real, 1e-100, math.inf, closed="left")],
        "projection": ["boolean"],
    }

    def __init__(
        self,
        lam: float = 1e-4,
        projection: bool = False,
        fit_intercept: bool = True,
        intercept_scaling: float = 1.0,
        shuffle: bool = False,
        random_state: int | np.random.RandomState | None = None,
    ) -> None:
        super().__init__(
            fit_intercept=fit_intercept,
            intercept_scaling=intercept_scaling,
            shuffle=shuffle,
            random_state=random_state,
        )
        self.lam = lam
        self.projection = projection

    def _step_param(self):
        return float(self.lam)

    def _radius(self):
        return 1.0 / math.sqrt(float(self.lam)) if self.projection else math.inf

    def _t_index(self):
        return self.n_features_in_ + 2

    # --------------------------------------------------------------- labels
    def _encode(self, y, fitting=False, classes=None):
        # the label type is checked when the labels come from y, not when classes= gives them
        labels = BinaryLabels(None if fitting else self.classes_, _LABELS).partial_fit(
            y, classes, check_type=classes is None
        )
        self.classes_ = labels.classes_
        return labels.encode(y)

    def _tree_targets(self, y):
        """TreeCV: labels as ±1 floats and the two classes."""
        labels = BinaryLabels(messages=_TREE_LABELS).fit(y)
        return labels.encode(y), labels.classes_

    @staticmethod
    def _tree_predict(decision, classes):
        """TreeCV: labels from decision values."""
        return BinaryLabels(classes).decode(decision)

    # ----------------------------------------------------------- prediction
    def decision_function(self, X: ArrayLike) -> NDArray[np.float64]:
        """``⟨w, x⟩ + intercept_``; positive means ``classes_[1]``."""
        return self._decision(X)

    def predict(self, X: ArrayLike) -> NDArray[Any]:
        """``classes_[1]`` where the decision value is positive, else ``classes_[0]``."""
        return self._tree_predict(self.decision_function(X), self.classes_)

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.classifier_tags.multi_class = False
        return tags
