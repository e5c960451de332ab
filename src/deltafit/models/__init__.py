"""Updatable estimators: exact add / remove / relabel of training samples, and the read-only
view of their fitted problem (:class:`FittedProblem`) through which every other layer reads them.

``state_class`` and ``state_for`` (the state registry, :mod:`deltafit.models._registry`) are
importable from here for the layers above (persistence, model selection), which import no
private module of this package; they are not part of the user's API (not in ``__all__``).
"""

from deltafit.models._base import UpdatableMixin
from deltafit.models._kernel import KernelClassifier, KernelRegressor
from deltafit.models._linear import LinearClassifier, LinearRegressor
from deltafit.models._problem import FittedProblem, ScoreFunction
from deltafit.models._registry import state_class as state_class
from deltafit.models._registry import state_for as state_for

# the states by name, for the other packages of deltafit (persistence names a model file's
# state by it); not part of the API, hence not in __all__

__all__ = [
    "LinearClassifier",
    "LinearRegressor",
    "KernelClassifier",
    "KernelRegressor",
    "FittedProblem",
    "ScoreFunction",
    "UpdatableMixin",
]
