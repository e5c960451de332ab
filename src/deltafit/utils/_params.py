"""scikit-learn's parameter validation for deltafit's learners outside :mod:`deltafit.models`.

The stream learners (:mod:`deltafit.stream`) declare ``_parameter_constraints``
(:mod:`sklearn.utils._param_validation`) and call ``self._validate_params()`` in ``fit``,
``partial_fit`` and ``learn_one``; the active-learning strategies (:mod:`deltafit.active`),
which are not scikit-learn estimators, declare them too and check them with
:func:`validate_params`.  :class:`Number` is scikit-learn's ``Interval`` refusing booleans.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from sklearn.base import BaseEstimator, clone
from sklearn.utils._param_validation import Interval, validate_parameter_constraints

__all__ = ["Number", "validate_estimator_params", "validate_params"]


class Number(Interval):
    """scikit-learn's :class:`~sklearn.utils._param_validation.Interval`, refusing booleans
    (``window=True`` is a mistake, not the number 1).  Like ``Interval`` it refuses NaN, and
    infinity unless the range is closed at ``np.inf`` (``closed="right"``)."""

    def is_satisfied_by(self, val: Any) -> bool:
        return not isinstance(val, (bool, np.bool_)) and super().is_satisfied_by(val)


def validate_params(obj: Any) -> None:
    """Check the parameters of ``obj`` (any object that stores its parameters as attributes
    of the same names) against its ``_parameter_constraints``.

    Raises
    ------
    sklearn.utils._param_validation.InvalidParameterError
        A ``ValueError`` naming the parameter and what it must be.
    """
    constraints = obj._parameter_constraints
    validate_parameter_constraints(
        constraints, {k: getattr(obj, k) for k in constraints}, caller_name=type(obj).__name__
    )


def validate_estimator_params(estimator: Any) -> None:
    """Check the parameters of a (wrapped) scikit-learn estimator now, on a clone: through
    scikit-learn's ``_validate_params`` when the estimator declares ``_parameter_constraints``
    or defines its own ``_validate_params``; an estimator without either is not checked (its
    ``fit`` will do it).

    Raises
    ------
    ValueError
        For a parameter the estimator refuses.
    """
    own = getattr(type(estimator), "_validate_params", None)
    if hasattr(type(estimator), "_parameter_constraints") or (
        own is not None and own is not BaseEstimator._validate_params
    ):
        clone(estimator)._validate_params()
