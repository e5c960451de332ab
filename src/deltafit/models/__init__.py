"""Updatable estimators: exact add / remove / relabel of training samples, and the read-only
view of their fitted problem (:class:`FittedProblem`) through which every other layer reads them."""

from deltafit.models._base import UpdatableMixin
from deltafit.models._kernel import KernelClassifier, KernelRegressor
from deltafit.models._linear import LinearClassifier, LinearRegressor
from deltafit.models._problem import FittedProblem, ScoreFunction

# the states by name, for the other packages of deltafit (persistence names a model file's
# state by it); not part of the API, hence not in __all__
from deltafit.models._registry import state_class, state_for  # noqa: F401

__all__ = ["LinearClassifier", "LinearRegressor", "KernelClassifier", "KernelRegressor",
           "FittedProblem", "ScoreFunction", "UpdatableMixin"]
