"""What a cross-validation run returns: the estimate and how it was obtained."""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

__all__ = ["CVResult"]


@dataclass(eq=False)
class CVResult:
    """Result of :func:`loo`, :func:`alo` or :func:`cross_validate`.

    Attributes
    ----------
    method : str
        The method that produced it (``"closed_form"``, ``"bounds"``, ``"bounds_early"``,
        ``"alo"``, ``"refit"``).
    approximate : bool
        True only for ALO (``method="alo"``): its predictions are an **approximation** of the
        left-out models', not certified.  Every other method is exact.
    classifier : bool
    y_true : ndarray of shape (n_test,)
        The targets of the evaluated samples, in evaluation order.
    test_index : ndarray of shape (n_test,)
        Row of each evaluated sample in ``X``.
    fold : ndarray of shape (n_test,)
        Fold of each evaluated sample (its own index for leave-one-out).
    y_pred : ndarray of shape (n_test,)
        Prediction of the model that did not see the sample: always known for classifiers
        (a certified interval of one sign decides the label), the exact value for regressors.
    decision : ndarray of shape (n_test,)
        Decision value of the left-out model; NaN where it was never computed (the sample was
        decided by a bound, or its refit stopped once the sign was certified).
    lower, upper : ndarray of shape (n_test,)
        Certified interval of the left-out decision value (equal to ``decision`` where it was
        computed; NaN for ALO, which certifies nothing).
    decided_by_bound : ndarray of bool, shape (n_test,)
        Samples whose label the bounds decided without any refit.
    refit : ndarray of bool, shape (n_test,)
        Samples whose left-out model was (re)computed, fully or until its sign was certified.
    n_refits : int
        Number of models (re)computed: one per refit sample for leave-one-out, one per fold for
        k-fold methods that refit a fold.
    n_splits : int
    fold_scores : ndarray of shape (n_splits,)
        Per-fold accuracy (classifiers) or negative mean squared error (regressors), as
        scikit-learn's ``cross_val_score`` with ``scoring="accuracy"`` /
        ``"neg_mean_squared_error"`` reports them.
    time_s : float
        Wall-clock time of the whole run, the fit(s) of the full model included.
    n_iter : int
        Solver iterations spent in refits.

    Examples
    --------
    >>> import deltafit
    >>> from deltafit.model_selection import loo
    >>> from deltafit.datasets import load_breast_cancer
    >>> X, y = load_breast_cancer()
    >>> r = loo(deltafit.LinearClassifier(), X, y)     # squared loss: closed form
    >>> r.method, r.n_refits, r.approximate
    ('closed_form', 0, False)
    >>> r.y_pred.shape
    (569,)
    """

    method: str
    approximate: bool
    classifier: bool
    y_true: np.ndarray
    test_index: np.ndarray
    fold: np.ndarray
    y_pred: np.ndarray
    decision: np.ndarray
    lower: np.ndarray
    upper: np.ndarray
    decided_by_bound: np.ndarray
    refit: np.ndarray
    n_refits: int
    n_splits: int
    fold_scores: np.ndarray
    time_s: float = 0.0
    n_iter: int = 0
    details: dict = field(default_factory=dict)

    @property
    def n_samples(self) -> int:
        """Number of evaluated samples."""
        return int(self.y_true.shape[0])

    @property
    def errors(self) -> np.ndarray:
        """Classifiers: bool mask of misclassified samples; regressors: squared errors."""
        if self.classifier:
            return self.y_pred != self.y_true
        return (self.y_true - self.y_pred) ** 2

    @property
    def n_errors(self) -> int:
        """Number of misclassified samples (classifiers)."""
        self._need_classifier("n_errors")
        return int(np.count_nonzero(self.errors))

    @property
    def error_rate(self) -> float:
        """Share of misclassified samples (classifiers)."""
        self._need_classifier("error_rate")
        return float(np.mean(self.errors)) if self.n_samples else float("nan")

    @property
    def residuals(self) -> np.ndarray:
        """``y − prediction`` of the left-out models (regressors)."""
        if self.classifier:
            raise AttributeError("residuals are defined for regressors; use errors / error_rate")
        return self.y_true - self.y_pred

    @property
    def mse(self) -> float:
        """Mean squared error of the left-out predictions (regressors)."""
        if self.classifier:
            raise AttributeError("mse is defined for regressors; use error_rate")
        return float(np.mean(self.errors))

    @property
    def score(self) -> float:
        """Mean of ``fold_scores`` (what ``GridSearchCV`` ranks by)."""
        return float(np.mean(self.fold_scores))

    @property
    def decided_share(self) -> float:
        """Share of samples decided by a bound, without refitting."""
        return float(np.mean(self.decided_by_bound)) if self.n_samples else 0.0

    def _need_classifier(self, name: str) -> None:
        if not self.classifier:
            raise AttributeError(f"{name} is defined for classifiers; use mse / residuals")

    def summary(self) -> str:
        """One line: the estimate and how it was obtained."""
        how = "APPROXIMATE (ALO, not certified)" if self.approximate else "exact"
        if self.classifier:
            est = f"error rate {self.error_rate:.4%} ({self.n_errors}/{self.n_samples})"
        else:
            est = f"MSE {self.mse:.6g}"
        parts = [f"{self.method}: {est}, {how}"]
        if not self.approximate:
            parts.append(f"{int(self.decided_by_bound.sum())} decided by bounds")
            parts.append(f"{self.n_refits} refit{'s' if self.n_refits != 1 else ''}")
            k = self.details.get("newton_step_refits", 0)
            if k:
                parts[-1] += f" ({k} certified after one Newton step)"
        parts.append(f"{self.n_splits} splits")
        parts.append(f"{self.time_s:.3g} s")
        return ", ".join(parts)

    def __repr__(self):
        return f"CVResult({self.summary()})"
