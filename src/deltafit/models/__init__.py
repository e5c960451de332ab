"""Updatable estimators: exact add / remove / relabel of training samples, and the read-only
view of their fitted problem (:class:`FittedProblem`) through which every other layer reads them."""

from deltafit.models._base import UpdatableMixin
from deltafit.models._kernel import KernelClassifier, KernelRegressor
from deltafit.models._linear import LinearClassifier, LinearRegressor
from deltafit.models._problem import FittedProblem, ScoreFunction

__all__ = ["LinearClassifier", "LinearRegressor", "KernelClassifier", "KernelRegressor",
           "FittedProblem", "ScoreFunction", "UpdatableMixin"]
