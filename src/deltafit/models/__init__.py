"""Updatable estimators: exact add / remove / relabel of training samples (DESIGN.md §2, layer 4)."""

from ._kernel import KernelClassifier, KernelRegressor
from ._linear import LinearClassifier, LinearRegressor

__all__ = ["LinearClassifier", "LinearRegressor", "KernelClassifier", "KernelRegressor"]
