"""Saving and loading fitted deltafit models without pickle (npz + JSON).

:func:`save` writes a fitted estimator (or an :class:`deltafit.UpdatablePipeline` ending in one)
to a NumPy ``.npz`` archive of uncompressed arrays, written atomically (a synced temporary file
renamed over the old one); :func:`load` reads it back without unpickling: every member is
checked against the declared sizes before it is read, and a corrupt, truncated, contradictory
or version-mismatched file raises ValueError.  Both are exported at the top as
``deltafit.save(model, path)`` and ``deltafit.load(path)``, the one way to save and load.

The modules:

* :mod:`~deltafit.persistence._archive`: atomic writing (SIGINT held), reading members with
  their sizes checked;
* :mod:`~deltafit.persistence._schema`: what a file holds (format versions 2 and 3), the
  metadata and its checks, the members it calls for;
* :mod:`~deltafit.persistence._write` / :mod:`~deltafit.persistence._read`: a model to arrays
  and back;
* :mod:`~deltafit.persistence._checks`: the arrays' values and the invariants that tie the
  state to the stored rows and labels;
* :mod:`~deltafit.persistence._pipelines`, :mod:`~deltafit.persistence._transformers`: an
  UpdatablePipeline's frozen transformers.

The deprecated method ``model.save(path)`` (:meth:`deltafit.models.UpdatableMixin.save`) calls
:func:`save` through a hook slot that the models define, ``UpdatableMixin._save_file``, and that
this package fills when it is imported (``import deltafit`` always imports it).  The models sit
on a floor below persistence, which reads their classes: were the method to import this package,
even inside the function, the two would import each other.  With the slot the arrow runs one
way only, persistence -> models.
"""

from deltafit.models import UpdatableMixin
from deltafit.persistence._read import load
from deltafit.persistence._schema import FORMAT_VERSION
from deltafit.persistence._write import save

__all__ = ["save", "load", "FORMAT_VERSION"]

UpdatableMixin._save_file = staticmethod(save)
