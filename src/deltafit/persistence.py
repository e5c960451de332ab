"""Saving and loading fitted deltafit models without pickle (npz + JSON).

The implementation lives with the models (:mod:`deltafit.models._persistence`); this public
module re-exports it.  A model file is a NumPy ``.npz`` archive read with
``allow_pickle=False``: loading never executes code, and a corrupt, truncated or
version-mismatched file raises ValueError.
"""

from .models._persistence import FORMAT_VERSION, load, save

__all__ = ["save", "load", "FORMAT_VERSION"]
