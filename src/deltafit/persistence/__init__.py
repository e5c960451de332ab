"""Saving and loading fitted deltafit models without pickle (npz + JSON).

The implementation lives with the models (:mod:`deltafit.persistence._format`); this public
module re-exports it.  A model file is a NumPy ``.npz`` archive of uncompressed arrays,
written atomically (a synced temporary file renamed over the old one) and read without
unpickling: every member is checked against the declared sizes before it is read, and a corrupt,
truncated, contradictory or version-mismatched file raises ValueError.  What a file contains is
listed in :mod:`deltafit.persistence._format` and in the README.
"""

from deltafit.persistence._format import FORMAT_VERSION, load, save

__all__ = ["save", "load", "FORMAT_VERSION"]
