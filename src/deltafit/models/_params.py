"""The estimators' parameters: scikit-learn's constraints and the rules between parameters.

Each estimator declares ``_parameter_constraints`` (scikit-learn's
:mod:`sklearn.utils._param_validation`), built here from :data:`COMMON` (every estimator),
:data:`LINEAR` and :data:`KERNEL`, with the loss options of the estimator
(:func:`constraints`); ``fit`` checks them through ``_validate_params``, which
:class:`~deltafit.models.UpdatableMixin` extends with the rules no single constraint states
(``intercept_scaling`` with ``fit_intercept``, ``keep_data`` with the loss).
"""

from __future__ import annotations

from numbers import Integral, Real
from typing import Any

from sklearn.metrics.pairwise import PAIRWISE_KERNEL_FUNCTIONS
from sklearn.utils._param_validation import HasMethods, StrOptions

from deltafit.utils._params import Number

__all__ = ["COMMON", "KERNEL", "LINEAR", "NumberInterval", "constraints"]


#: scikit-learn's ``Interval`` refusing booleans (``C=True`` is a mistake, not the number 1)
NumberInterval = Number


#: a finite real number > 0 (C, tol, a numeric gamma)
POSITIVE = NumberInterval(Real, 0, None, closed="neither")

#: the parameters every estimator has (the loss's options are the estimator's own)
COMMON: dict[str, Any] = {
    "C": [POSITIVE],
    "fit_intercept": ["boolean"],
    # checked with fit_intercept=True only (UpdatableMixin._check_param_rules): without an
    # intercept the scaling is unused, and any value is accepted, as it always was
    "intercept_scaling": "no_validation",
    "tol": [POSITIVE],
    "max_iter": [NumberInterval(Integral, 1, None, closed="left")],
    "warm_start": ["boolean"],
    "callback": [callable, None],
}

#: the linear models' own parameters
LINEAR: dict[str, Any] = {
    "feature_map": [HasMethods(["fit", "transform"]), None],
    "keep_data": ["boolean"],
}

#: the kernels :func:`sklearn.metrics.pairwise.pairwise_kernels` evaluates from two row sets
KERNEL_NAMES = set(PAIRWISE_KERNEL_FUNCTIONS) - {"precomputed", "additive_chi2", "chi2"}

#: the kernel models' own parameters
KERNEL: dict[str, Any] = {
    "kernel": [StrOptions(KERNEL_NAMES), callable],
    "gamma": [StrOptions({"scale", "auto"}), POSITIVE, None],
    "degree": [NumberInterval(Integral, 0, None, closed="left")],
    "coef0": [NumberInterval(Real, None, None, closed="neither")],
    "kernel_params": [dict, None],
}


def constraints(losses: tuple[str, ...], *parts: dict[str, Any]) -> dict[str, Any]:
    """The ``_parameter_constraints`` of an estimator solving ``losses``: :data:`COMMON`,
    then ``parts`` (:data:`LINEAR` or :data:`KERNEL`)."""
    out: dict[str, Any] = {"loss": [StrOptions(set(losses))], **COMMON}
    for part in parts:
        out.update(part)
    return out
