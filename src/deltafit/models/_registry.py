"""The exact-update states by problem and by name: the one place that maps a problem
``(backend, kernel, loss)`` to the state class that solves and updates it, and a model file's
state name to its class.

``backend`` is ``"numpy"`` (the rows in memory: the six states of :mod:`deltafit._states`) or
``"dask"`` (the rows persisted on a Dask cluster: the states of :mod:`deltafit._dask`; the
squared loss is solved there by the NumPy closed form from statistics reduced on the cluster,
and no kernel model takes Dask input).  A K ≥ 3 class model wraps the state class in its
one-vs-rest state.

This module lives in :mod:`deltafit.models`, above both :mod:`deltafit._states` and
:mod:`deltafit._dask`, so that it imports both without an import circle (neither imports it);
the estimators (``_base``, ``_linear``, ``_kernel``), persistence and the cross-validation
read it.  See :class:`~deltafit._states._protocol.ModelState` for what a state is.
"""

from __future__ import annotations

from deltafit._dask._hinge import DaskHingeState
from deltafit._dask._newton import DaskNewtonState
from deltafit._states._hinge import KernelHingeState, PrimalHingeState
from deltafit._states._newton_kernel import KernelNewtonState
from deltafit._states._newton_primal import PrimalNewtonState
from deltafit._states._protocol import ModelState
from deltafit._states._squared_dual import DualSquaredState
from deltafit._states._squared_primal import PrimalSquaredState

__all__ = ["BACKENDS", "DASK_STATES", "REGISTRY", "STATES", "state_class", "state_for"]

#: the backends a state may run on
BACKENDS = ("numpy", "dask")

#: the six NumPy states by ``kind``: the names a model file may give (``state_class``)
STATES: dict[str, type[ModelState]] = {
    cls.kind: cls
    for cls in (
        PrimalSquaredState,
        PrimalNewtonState,
        PrimalHingeState,
        DualSquaredState,
        KernelNewtonState,
        KernelHingeState,
    )
}

#: the states whose rows live on a Dask cluster, by ``kind`` (never saved in a model file)
DASK_STATES: dict[str, type[ModelState]] = {
    cls.kind: cls for cls in (DaskNewtonState, DaskHingeState)
}


def _problems(backend: str, classes) -> dict[tuple[str, bool, str], type[ModelState]]:
    return {(backend, bool(cls.kernel), loss): cls for cls in classes for loss in cls.loss_names}


#: ``(backend, kernel, loss name) -> state class``: every problem an estimator can fit
REGISTRY: dict[tuple[str, bool, str], type[ModelState]] = {
    **_problems("numpy", STATES.values()),
    ("dask", False, "squared"): PrimalSquaredState,  # from the cluster's statistics
    **_problems("dask", DASK_STATES.values()),
}


def state_class(kind: str) -> type[ModelState]:
    """The state class a model file stores under ``kind`` (one of :data:`STATES`).

    Raises
    ------
    ValueError
        For an unknown name (a corrupt file).
    """
    try:
        return STATES[kind]
    except (KeyError, TypeError):
        raise ValueError(f"corrupt model file: unknown state {kind!r}") from None


def state_for(kernel: bool, loss_name: str, backend: str = "numpy") -> type[ModelState]:
    """The state class that solves ``loss_name`` for a linear (``kernel=False``) or kernel
    model whose rows are in memory (``backend="numpy"``) or on a Dask cluster
    (``backend="dask"``).

    Raises
    ------
    ValueError
        When no state solves that problem.
    """
    try:
        return REGISTRY[(backend, bool(kernel), loss_name)]
    except (KeyError, TypeError):
        where = "" if backend == "numpy" else f" on backend={backend!r}"
        raise ValueError(
            f"no exact-update state for loss={loss_name!r}{where}"
            + (" (kernel model)" if kernel else "")
        ) from None
