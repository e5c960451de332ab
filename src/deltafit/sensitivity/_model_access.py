"""What the bounds need from a fitted deltafit estimator, read through its public view.

The sensitivity layer reads a model only through :class:`deltafit.models.FittedProblem`
(``model.problem_``): the solution, the feature map or kernel, the stored rows and targets.
The helpers below name the few questions the bound code asks.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from deltafit.models import FittedProblem, ScoreFunction

if TYPE_CHECKING:
    from deltafit.losses import Loss

__all__ = [
    "COVERED_LOSSES",
    "ScoreFunction",
    "certified_residual",
    "check_model",
    "fitted_C",
    "kernel_functions",
    "n_classes",
    "problem",
]

COVERED_LOSSES = ("squared", "logistic", "squared_hinge")


def problem(model: Any, what: str = "sensitivity bounds") -> FittedProblem:
    """The model's :class:`~deltafit.models.FittedProblem` (ValueError / NotFittedError naming
    ``what`` for anything but a fitted deltafit estimator)."""
    if isinstance(model, FittedProblem):
        return model
    return FittedProblem.of(model, what)


def n_classes(model: Any) -> int:
    """K ≥ 3 for a fitted deltafit classifier with K classes (one-vs-rest), 0 for anything
    else (binary models, regressors, unfitted or foreign estimators, class views)."""
    if isinstance(model, FittedProblem):
        return 0 if model.binary else model.n_classes
    from deltafit.models import UpdatableMixin

    if not isinstance(model, UpdatableMixin):
        return 0
    try:  # an unfitted model has no problem_ (AttributeError): cheaper than check_is_fitted
        prob = model.problem_
    except AttributeError:
        return 0
    return int(prob.n_classes)


def check_model(model: Any, what: str = "sensitivity bounds") -> Loss:
    """The fitted loss of ``model``; ValueError/NotFittedError unless it is a fitted deltafit
    estimator whose loss is convex and differentiable (the condition of Theorem 1 of Okumura et
    al. (2015) and of Theorem 1 of Sivan et al. (2020))."""
    loss = problem(model, what).loss
    if loss.name not in COVERED_LOSSES:
        raise ValueError(
            f"{what} need a convex differentiable loss {list(COVERED_LOSSES)}; "
            f"loss={loss.name!r} is not covered"
        )
    return loss


def certified_residual(model: Any) -> float:
    """The certified ‖β − β*‖ of the stored solution (``grad_norm_`` without scikit-learn's
    fitted check; cached per model version)."""
    return problem(model).certified_residual


def fitted_C(model: Any) -> float:
    """The C the stored solution was computed with."""
    return problem(model).C


def kernel_functions(model: Any) -> tuple[Callable[..., Any], Callable[..., Any]]:
    """``(k(A, B), diag(A))`` of a kernel model, frozen at its current parameters (the
    regularised intercept term ``intercept_scaling²`` included)."""
    return problem(model).kernel_functions()
