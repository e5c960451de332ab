"""Leave-one-out cross-validation: exact (closed form, bound screening, refits) or ALO."""

from __future__ import annotations

from typing import Any

from deltafit._dask._input import any_dask
from deltafit._pipeline import freeze
from deltafit.model_selection._closed_form import dask_cross_validation
from deltafit.model_selection._engine import check_data, check_weights, evaluate, resolve_method
from deltafit.model_selection._result import CVResult
from deltafit.utils._validation import check_bool

__all__ = ["loo", "alo"]


def loo(
    estimator: Any,
    X: Any,
    y: Any,
    *,
    method: str = "auto",
    n_jobs: int | None = None,
    progress: bool = False,
    order: str = "natural",
    sample_weight: Any = None,
    region: str = "auto",
) -> CVResult:
    """Leave-one-out cross-validation, exact unless ``method="alo"``.

    Parameters
    ----------
    estimator : estimator
        A deltafit estimator (every method), or any scikit-learn estimator
        (``method="refit"``, which ``"auto"`` then picks).  It is cloned, never modified.
        A :class:`deltafit.UpdatablePipeline`'s transformers are fitted **once on all of X**
        and frozen, and its final estimator is cross-validated on the transformed rows (the
        left-out sample did shape the scaler: a small leak that scikit-learn's
        ``cross_val_score`` on a ``Pipeline``, which refits every step per fold, avoids).
    X : array-like of shape (n_samples, n_features)
    y : array-like of shape (n_samples,)
    method : {"auto", "closed_form", "bounds", "bounds_early", "alo", "refit"}
        * ``"closed_form"``: squared loss (ridge, kernel ridge, LS-SVM), every left-out
          prediction from one factorization, ``residual_t / (1 − H_tt)`` (primal) or
          ``α_t / (G⁻¹)_tt`` (dual, ``G = K + I/(2C)``); linear and kernel models.
        * ``"bounds"``: Okumura et al. (KDD'15) Algorithm 1 (op1): the leave-one-out ball
          (Okumura Corollary 5 = Sivan et al. §4.2, from the exact gradient of the stored
          solution) decides each label; undecided samples are refit exactly, warm-started
          from the full model.  Classifiers with a differentiable loss.
        * ``"bounds_early"``: op2: the refit stops as soon as the gradient ball of Okumura
          Theorem 6 around the iterate, intersected with the leave-one-out ball (a binary
          linear model's refits, which run side by side: with the interval the screening
          certified), certifies the sign.  The labels (hence the error count) are exact; the
          decision values of those samples are not computed (``decision`` NaN, ``lower``/``upper``
          certified).
        * ``"alo"``: approximate leave-one-out (one Newton step per sample for smooth losses;
          the smooth-set / singular-set formula of He et al. for the hinge loss).  An
          **approximation**: ``result.approximate`` is True and nothing is certified.
        * ``"refit"``: brute force, a fresh fit of a clone per sample: the reference.
        * ``"auto"``: the fastest exact method: ``closed_form`` for the squared loss,
          ``bounds_early`` for other differentiable classification losses, else ``refit``.
    n_jobs : int, optional
        Refits in parallel with joblib (``-1``: all cores).  The refits of a binary linear
        model with a smooth loss run side by side as one matrix iteration, in this process.
    progress : bool
        Show a progress bar over the refits (needs tqdm).
    order : {"natural", "margin"}
        Order of the refits (``"margin"``: smallest ``y·f(x)`` first, Okumura §5.2).
    sample_weight : array-like of shape (n_samples,), optional
        Weights ``w_i ≥ 0`` of the fit ``C Σ w_i ℓ_i + ½‖β‖²``: sample t's left-out model is
        the weighted fit on the other samples with their weights (the closed form uses the
        weighted leverage ``h_t = w_t Φ_tᵀ(ΦᵀWΦ + ρI)⁻¹Φ_t``, the balls the coefficients
        ``w_i ℓ'_i``).  The error rate / MSE counts every sample once, as scikit-learn's
        cross-validation does with ``sample_weight`` passed to ``fit`` only.
    region : {"auto", "sphere", "curvature"}
        The bound methods' screening region: ``"sphere"`` is the published leave-one-out ball
        (for reproducing the papers); ``"curvature"`` adds the loss's curvature for the
        logistic and squared-hinge losses (:func:`deltafit.sensitivity.loo_bounds`), which
        decides more labels without refitting; ``"auto"`` is ``"curvature"``, except for
        ``"bounds_early"`` on a binary linear model, whose undecided samples all take one
        Newton step at once and are then refit side by side (the step decides nearly all that
        the curvature region would, for less).  ``result.details["region"]`` is the region
        used.  Labels are exact either way.

    Returns
    -------
    CVResult
        ``error_rate`` / ``errors`` (classifiers), ``residuals`` / ``mse`` (regressors),
        per-sample ``y_pred``, ``decision`` and certified ``lower``/``upper``,
        ``decided_by_bound``, ``n_refits``, ``time_s``.  Classifiers' labels equal brute
        force exactly; regressors' left-out predictions to solver precision (1e-8).
        With dask X (a ``LinearClassifier`` / ``LinearRegressor``): the model is fitted on
        the Dask path; the squared loss's leverages come from one ``map_blocks`` pass
        (``"closed_form"``), the logistic and squared-hinge losses' left-out balls and
        curvature region from three passes, the undecided samples refit exactly by joint warm
        re-solves (``"bounds"``); the per-sample arrays are lazy dask arrays in row order
        (:func:`~deltafit.model_selection._closed_form.dask_cross_validation`).

    Examples
    --------
    >>> import deltafit
    >>> from deltafit.model_selection import loo
    >>> from sklearn.datasets import load_breast_cancer
    >>> from sklearn.preprocessing import StandardScaler
    >>> X, y = load_breast_cancer(return_X_y=True)
    >>> X = StandardScaler().fit_transform(X)
    >>> r = loo(deltafit.LinearClassifier(loss="logistic", C=0.1), X, y)
    >>> r.method, r.n_errors
    ('bounds_early', 10)
    """
    check_bool(progress, "progress")
    if any_dask(X, y, sample_weight):  # one more pass (and joint refits), lazy results
        return dask_cross_validation(
            estimator, X, y, method=method, sample_weight=sample_weight, region=region
        )
    frozen = freeze(estimator, X, y)
    if frozen is not None:
        estimator, X = frozen.final, frozen.X
    X, y = check_data(X, y)
    sample_weight = check_weights(sample_weight, X)
    method = resolve_method(method, estimator, loo=True)
    return evaluate(
        estimator,
        X,
        y,
        None,
        method,
        n_jobs=n_jobs,
        progress=progress,
        order=order,
        desc="leave-one-out",
        sample_weight=sample_weight,
        region=region,
    )


def alo(estimator: Any, X: Any, y: Any, *, sample_weight: Any = None) -> CVResult:
    """Approximate leave-one-out: ``loo(estimator, X, y, method="alo")``.

    An **approximation** of the leave-one-out predictions (``result.approximate`` is True;
    ``lower``/``upper`` are NaN: nothing is certified) at about the cost of one fit: a Newton
    step from the full solution for smooth losses, and for the hinge loss the formula of
    He et al. ("Approximate leave-one-out with kernel SVM") with its smooth set S and singular
    set V, in kernel form or through explicit (e.g. Nyström) features.

    Examples
    --------
    >>> import deltafit
    >>> from deltafit.model_selection import alo
    >>> from deltafit.datasets import load_breast_cancer
    >>> X, y = load_breast_cancer()
    >>> r = alo(deltafit.LinearClassifier(loss="logistic"), X, y)
    >>> r.method, r.approximate                 # an approximation, flagged as such
    ('alo', True)
    """
    return loo(estimator, X, y, method="alo", sample_weight=sample_weight)
