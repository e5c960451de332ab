"""deltafit: what happens to a trained model when its training data changes.

Exact updates (add / remove / relabel samples without retraining) for linear and kernel models
with squared, logistic, squared-hinge and hinge losses; see ARCHITECTURE.md for the architecture.
"""

from . import datasets, sensitivity
from ._pipeline import UpdatablePipeline, make_pipeline
from ._version import __version__
from .models import KernelClassifier, KernelRegressor, LinearClassifier, LinearRegressor
from .persistence import load, save

__all__ = [
    "LinearClassifier",
    "LinearRegressor",
    "KernelClassifier",
    "KernelRegressor",
    "UpdatablePipeline",
    "make_pipeline",
    "load",
    "save",
    "datasets",
    "sensitivity",
    "__version__",
]
