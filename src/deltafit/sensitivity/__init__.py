"""Sensitivity analysis: certified bounds on the retrained model, without retraining.

``deltafit.sensitivity(model)`` returns a what-if object (:class:`Sensitivity`): hypothetical
additions, removals and relabels, then guaranteed bounds on the model that a retrain would give
— its decision values, labels, coefficients and distance from the current model — at a cost
that grows with the change, not with the data::

    s = deltafit.sensitivity(model)          # any fitted deltafit estimator
    s.remove(ids); s.add(X_a, y_a)           # hypothetical; nothing is retrained
    lo, hi = s.decision_bounds(X_test)       # lo <= new decision_function <= hi
    labels, certain = s.predict_certain(X_test)
    s.distance_bound(); s.coef_bounds(); s.norm_change_bound(q=1)

Every bound is a ball in model space (:class:`Sphere`): after a data change (Theorem 1 of
Okumura et al. (2015) = Theorem 1 of Sivan et al. (2020)), around any approximate solution from
its gradient (:func:`gradient_sphere`, Theorem 6 of Okumura et al. (2015)), or the intersection
of two balls (:class:`BallIntersection`, exact extremes of a linear score).
:class:`IncrementalSphere` keeps the ball of a sliding window or an active learner up to date
one sample at a time (Sivan et al. §3.3), with bounded memory.  :func:`loo_bounds` and
:func:`zhang_loo_bounds` bound every leave-one-out score at once.

A model with K ≥ 3 classes (one-vs-rest) gets one ball per class:
``deltafit.sensitivity(model)`` is then a :class:`MulticlassSensitivity` whose bounds have
shape (n, K), and a label is certified when the top class's lower bound exceeds every other
class's upper bound (:func:`certain_argmax`); :func:`loo_bounds` gives (n, K) bounds too, and
``IncrementalSphere(model)`` is a :class:`MulticlassIncrementalSphere` (one ball per class).

The data-change ball is computed in one place, ``regions._ball`` (its Theorem 1 form here, its
exact-gradient form for :mod:`deltafit.model_selection`), and the samples of a pending change
are kept by one store, ``_changes`` (``LinearChanges`` / ``KernelChanges``), shared by
:class:`Sensitivity` and :class:`IncrementalSphere`.  The queries answer from a *region*
(:mod:`deltafit.sensitivity.regions`: the :class:`~deltafit.sensitivity.regions.Region`
interface and the registry of regions by ``method=`` name).

For the squared loss the answers are exact (``method="auto"`` resolves to ``"exact"``): the
retrained model's own decision values, computed from the stored factorisation without changing
the model (Woodbury / Schur complement, ``regions._exact``), in intervals of rounding width;
``method="sphere"`` gives the published ball for every loss.

This module is callable: ``deltafit.sensitivity(model, C_new=None, method="auto")`` is
:func:`for_model` (``Sensitivity(model, ...)`` for a binary model or a regressor,
``MulticlassSensitivity(model, ...)`` for K ≥ 3 classes), with a fitted
:class:`deltafit.UpdatablePipeline` passed through to its final estimator.
"""

from __future__ import annotations

import sys
import types

from deltafit._pipeline import PipelineSensitivity, unwrap
from deltafit.sensitivity._data_change import MulticlassSensitivity, Sensitivity, for_model
from deltafit.sensitivity._gradient import CertainSigns, gradient_sphere, model_gradient_sphere
from deltafit.sensitivity._incremental import IncrementalSphere, MulticlassIncrementalSphere
from deltafit.sensitivity._loo import loo_bounds, zhang_loo_bounds
from deltafit.sensitivity._per_class import certain_argmax
from deltafit.sensitivity.regions._sphere import (
    BallIntersection,
    KernelSphere,
    PrimalSphere,
    Sphere,
    two_ball_bounds,
)

__all__ = [
    "for_model",
    "Sensitivity",
    "MulticlassSensitivity",
    "certain_argmax",
    "IncrementalSphere",
    "MulticlassIncrementalSphere",
    "Sphere",
    "PrimalSphere",
    "KernelSphere",
    "BallIntersection",
    "two_ball_bounds",
    "gradient_sphere",
    "model_gradient_sphere",
    "CertainSigns",
    "loo_bounds",
    "zhang_loo_bounds",
]


def _call(model, C_new=None, *, method="auto"):
    """What-if object for ``model``: :func:`for_model` (``method``: ``"auto"``, ``"sphere"``,
    ``"exact"`` or ``"curvature"``).

    ``model`` may be a fitted :class:`deltafit.UpdatablePipeline`: the what-if object of
    its final estimator, whose methods taking rows pass them through the frozen
    transformers (:class:`deltafit._pipeline.PipelineSensitivity`).
    """
    final, transform = unwrap(model)
    s = for_model(final, C_new=C_new, method=method)
    return s if transform is None else PipelineSensitivity(s, transform)


# The one place that makes this module callable, ``deltafit.sensitivity(model, ...)``: Python
# calls a module only through its type, so the module's class is swapped for a ModuleType
# subclass whose ``__call__`` is :func:`_call`.  Nothing else depends on the swap.
class _CallableModule(types.ModuleType):
    """The module, callable as ``deltafit.sensitivity(model, C_new=None, method="auto")``."""

    def __call__(self, model, C_new=None, *, method="auto"):
        return _call(model, C_new, method=method)

    __call__.__doc__ = _call.__doc__


sys.modules[__name__].__class__ = _CallableModule
