"""Updatable estimators: exact add / remove / relabel of training samples, and the read-only
view of their fitted problem (:class:`FittedProblem`) through which every other layer reads them."""

from ._base import UpdatableMixin
from ._kernel import KernelClassifier, KernelRegressor
from ._linear import LinearClassifier, LinearRegressor
from ._problem import FittedProblem, ScoreFunction

__all__ = ["LinearClassifier", "LinearRegressor", "KernelClassifier", "KernelRegressor",
           "FittedProblem", "ScoreFunction", "UpdatableMixin"]
