"""deltafit: what happens to a trained model when its training data changes.

Exact updates (add / remove / relabel samples without retraining) for linear and kernel models
with squared, logistic, squared-hinge and hinge losses; see DESIGN.md for the architecture.
"""

__version__ = "0.1.0"

from . import datasets, sensitivity
from .models import KernelClassifier, KernelRegressor, LinearClassifier, LinearRegressor
from .persistence import load, save

__all__ = [
    "LinearClassifier",
    "LinearRegressor",
    "KernelClassifier",
    "KernelRegressor",
    "load",
    "save",
    "datasets",
    "sensitivity",
    "__version__",
]
