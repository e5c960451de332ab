"""deltafit: what happens to a trained model when its training data changes.

Exact updates (add / remove / relabel samples without retraining) for linear and kernel models
with squared, logistic, squared-hinge and hinge losses; see ARCHITECTURE.md for the architecture.
"""

from deltafit import datasets, sensitivity
from deltafit._pipeline import UpdatablePipeline, make_pipeline
from deltafit._version import __version__
from deltafit.models import KernelClassifier, KernelRegressor, LinearClassifier, LinearRegressor
from deltafit.persistence import load, save

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
