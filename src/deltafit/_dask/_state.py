"""What every model state whose rows live on a Dask cluster refuses: being saved to a file
and being loaded from one (the rows are not in the file, and a state cannot be rebuilt
without them).

:class:`DaskStateRefusals` is mixed in before :class:`~._state.ModelState` by the Dask states
(:class:`~._dask_newton.DaskNewtonState`, :class:`~._dask_hinge.DaskHingeState`), so that the
refusals and their messages are written once.  ``saved_shapes`` still names the one array a
saved fitted model would carry (``state_beta``, β of p entries), which is what
:mod:`~._persistence` validates before it asks the state to load, and is refused.
"""

from __future__ import annotations

__all__ = ["DaskStateRefusals", "NOT_SAVED", "NOT_LOADED"]

#: The refusal of :meth:`DaskStateRefusals.to_arrays`.
NOT_SAVED = (
    "a model whose rows live on a Dask cluster is not saved (its rows are not in the "
    "file): compute X and fit on NumPy arrays to save"
)

#: The refusal of :meth:`DaskStateRefusals.from_arrays`.
NOT_LOADED = "a Dask-backed model cannot be loaded from a file"


class DaskStateRefusals:
    """Save/load refusals of a model state whose rows live on a Dask cluster (a mixin: put
    it before ``ModelState`` in the bases)."""

    def to_arrays(self, keep):
        """Refused (ValueError): the rows are on the cluster, not in a file."""
        raise ValueError(NOT_SAVED)

    @classmethod
    def saved_shapes(cls, n, p):
        """``{"state_beta": (p,)}``: the one array a saved state would hold."""
        return {"state_beta": (p,)}

    @classmethod
    def from_arrays(cls, arrays, opts, *, y, capacity, max_rank=64, result=None):
        """Refused (ValueError): a Dask-backed model is not rebuilt from a file."""
        raise ValueError(NOT_LOADED)
