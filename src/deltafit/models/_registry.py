"""The six exact-update states by name: how an estimator picks its state and how a model file
names it (see :class:`~deltafit._states._protocol.ModelState`)."""

from __future__ import annotations

from deltafit._states._hinge import KernelHingeState, PrimalHingeState
from deltafit._states._newton_kernel import KernelNewtonState
from deltafit._states._newton_primal import PrimalNewtonState
from deltafit._states._squared_dual import DualSquaredState
from deltafit._states._squared_primal import PrimalSquaredState

__all__ = ["STATES", "state_class", "state_for"]

STATES = {cls.kind: cls for cls in (PrimalSquaredState, PrimalNewtonState, PrimalHingeState,
                                    DualSquaredState, KernelNewtonState, KernelHingeState)}


def state_class(kind):
    """The state class a model file stores under ``kind``; ValueError for an unknown name."""
    try:
        return STATES[kind]
    except (KeyError, TypeError):
        raise ValueError(f"corrupt model file: unknown state {kind!r}") from None


def state_for(kernel, loss_name):
    """The state class that solves ``loss_name`` for a linear (``kernel=False``) or kernel
    model."""
    for cls in STATES.values():
        if cls.kernel == bool(kernel) and loss_name in cls.loss_names:
            return cls
    raise ValueError(f"no exact-update state for loss={loss_name!r}")
