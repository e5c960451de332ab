"""What a what-if *region* is: the set, certified to contain the retrained model, that the
queries of :class:`~deltafit.sensitivity.Sensitivity` answer from.

A region is built from a what-if object's pending change (the stored model β₁ and the changed
samples, read through the what-if object) and bounds the minimiser β₂ of the changed problem
``P₂(β) = C₂ Σ_{D₂} w'_i ℓ_i(β) + ½‖β‖²``: the ball of Theorem 1 of Okumura et al., "Quick
sensitivity analysis for incremental data modification and its application to leave-one-out CV
in linear classification problems" (= Theorem 1 of Sivan et al., "Incremental sensitivity
analysis for kernelized models"), the exact retrained model of the squared loss, or the
curvature-aware region of the logistic and squared-hinge losses.

:class:`Region` is the interface every region implements.  The regions a user can ask for by
``method=`` are listed by name in :data:`deltafit.sensitivity.regions.REGIONS`
(:mod:`deltafit.sensitivity.regions._registry`); adding one is a new module with a
:class:`Region` subclass and one entry there.
"""

from __future__ import annotations

import abc
from typing import Any, ClassVar

import numpy as np

__all__ = ["Region"]


class Region(abc.ABC):
    """A certified region of the retrained model of a what-if's pending change.

    A subclass provides the four queries (:meth:`decision_bounds`, :meth:`center_decision`,
    :meth:`distance_bound`, :meth:`coef_bounds`), may provide faster :meth:`center_and_bounds`
    and :meth:`tightness`, and says, as class attributes, what it covers.  The class registered
    under a name (:data:`~deltafit.sensitivity.regions.REGIONS`) is the one whose :meth:`build`
    answers ``method=name``; it may return another :class:`Region` of the same ``kind`` (the
    form for a kernel model, or a fallback), which need not be registered.

    Attributes
    ----------
    kind : str
        The method the region answers for (``Sensitivity.method``): ``"sphere"``,
        ``"exact"``, ``"curvature"``, ...
    losses : tuple of str or None
        The losses it covers; None: every loss the what-if objects cover.
    kernels : bool
        Whether it covers kernel models too (False: linear models only).
    auto_losses : tuple of str
        The losses for which ``method="auto"`` picks it (the first registered region that
        lists the loss; the ball otherwise).
    requirement, alternatives : str
        The refusal of an uncovered loss: ``"method=kind needs {requirement}; loss=...:
        {alternatives}"``.

    Examples
    --------
    The registered regions and what they cover:

    >>> from deltafit.sensitivity.regions import REGIONS, Region
    >>> all(issubclass(cls, Region) for cls in REGIONS.values())
    True
    >>> for name, cls in REGIONS.items():
    ...     print(name, cls.losses, cls.kernels)
    sphere None True
    exact ('squared',) True
    curvature ('logistic', 'squared_hinge') True
    >>> REGIONS["exact"].check_loss("hinge")
    Traceback (most recent call last):
    ...
    ValueError: method='exact' needs loss='squared' ...
    """

    kind: ClassVar[str]
    losses: ClassVar[tuple[str, ...] | None] = None
    kernels: ClassVar[bool] = True
    auto_losses: ClassVar[tuple[str, ...]] = ()
    requirement: ClassVar[str] = ""
    alternatives: ClassVar[str] = "use method='sphere'"

    # ----------------------------------------------------------------- building
    @classmethod
    def build(cls, sens: Any) -> Region:
        """The region of ``sens``'s pending change (``sens``: a binary
        :class:`~deltafit.sensitivity.Sensitivity`).  Default: ``cls(sens)``."""
        return cls(sens)  # type: ignore[call-arg]

    @classmethod
    def covers(cls, loss_name: str) -> bool:
        """Whether the region covers a model with loss ``loss_name``."""
        return cls.losses is None or loss_name in cls.losses

    @classmethod
    def check_loss(cls, loss_name: str) -> None:
        """ValueError naming the requirement unless the region covers ``loss_name``."""
        if not cls.covers(loss_name):
            raise ValueError(
                f"method={cls.kind!r} needs {cls.requirement}; "
                f"loss={loss_name!r}: {cls.alternatives}"
            )

    @classmethod
    def auto_applies(cls, problem: Any) -> bool:
        """Whether ``method="auto"`` may answer with this region for the model's
        :class:`~deltafit.models.FittedProblem` (False: the ball answers).  Default: True."""
        return True

    # ------------------------------------------------------------------ queries
    @abc.abstractmethod
    def decision_bounds(self, X: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """``(lo, hi)``: ``lo ≤ ⟨Φ(x), β₂⟩ ≤ hi`` for every validated row x of X."""

    @abc.abstractmethod
    def center_decision(self, X: np.ndarray) -> np.ndarray:
        """The decision values of the region's best point estimate of β₂."""

    @abc.abstractmethod
    def distance_bound(self) -> float:
        """An upper bound of ``‖β₂ − β₁‖`` (RKHS norm for kernel models)."""

    @abc.abstractmethod
    def coef_bounds(self) -> tuple[np.ndarray, np.ndarray]:
        """``(lo, hi)`` of every coordinate of β₂ (linear models: the full β, the constant
        feature last); ValueError for a kernel model."""

    def center_and_bounds(self, X: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """``(center, lo, hi)`` of :meth:`center_decision` and :meth:`decision_bounds`."""
        lo, hi = self.decision_bounds(X)
        return self.center_decision(X), lo, hi

    def tightness(self, X: np.ndarray) -> np.ndarray:
        """``hi − lo`` of :meth:`decision_bounds`."""
        lo, hi = self.decision_bounds(X)
        return hi - lo
