"""Losses of the canonical problem, as functions of the score ``z``.

Every deltafit model minimises (DESIGN.md §1)

    C · Σ_i ℓ(y_i, z_i) + ½‖β‖²,    z_i = ⟨Φ(x_i), β⟩.

This module holds the loss values and their first and second derivatives in ``z``,
vectorised over samples, and nothing else.  Classification losses take ``y`` in {-1, +1}.

========================  ==========================  =================================
name                      ℓ(y, z)                     scikit-learn counterpart
========================  ==========================  =================================
``"squared"``             (y − z)²                    Ridge(alpha=1/(2C)), KernelRidge
``"logistic"``            log(1 + exp(−y z))          LogisticRegression(C=C)
``"squared_hinge"``       max(0, 1 − y z)²            LinearSVC(C=C, loss="squared_hinge")
========================  ==========================  =================================

The second derivative of the squared hinge is the generalised one (2 on the margin-violating
set, 0 elsewhere), which is what Newton's method for L2-SVMs uses (Keerthi & DeCoste, 2005).
"""

from __future__ import annotations

import numpy as np
from scipy.special import expit, log_expit

__all__ = ["Loss", "Squared", "Logistic", "SquaredHinge", "get_loss", "LOSSES"]


class Loss:
    """Base class: a loss ℓ(y, z) with vectorised value and derivatives in ``z``."""

    name = ""
    classification = True
    smooth = True  # twice differentiable almost everywhere; Newton applies

    def value(self, y, z):
        """Per-sample loss ℓ(y_i, z_i)."""
        raise NotImplementedError

    def d1(self, y, z):
        """First derivative ∂ℓ/∂z per sample."""
        raise NotImplementedError

    def d2(self, y, z):
        """(Generalised) second derivative ∂²ℓ/∂z² per sample."""
        raise NotImplementedError

    def __repr__(self):
        return f"{type(self).__name__}()"


class Squared(Loss):
    """ℓ(y, z) = (y − z)²: least squares (LS-SVM, ridge, kernel ridge)."""

    name = "squared"
    classification = False

    def value(self, y, z):
        r = z - y
        return r * r

    def d1(self, y, z):
        return 2.0 * (z - y)

    def d2(self, y, z):
        return np.full(np.shape(z), 2.0)


class Logistic(Loss):
    """ℓ(y, z) = log(1 + exp(−y z)), y in {-1, +1}."""

    name = "logistic"

    def value(self, y, z):
        return -log_expit(y * z)

    def d1(self, y, z):
        return -y * expit(-y * z)

    def d2(self, y, z):
        p = expit(y * z)
        return p * (1.0 - p)


class SquaredHinge(Loss):
    """ℓ(y, z) = max(0, 1 − y z)², y in {-1, +1} (L2-SVM)."""

    name = "squared_hinge"

    def value(self, y, z):
        m = np.maximum(0.0, 1.0 - y * z)
        return m * m

    def d1(self, y, z):
        return -2.0 * y * np.maximum(0.0, 1.0 - y * z)

    def d2(self, y, z):
        return 2.0 * (1.0 - y * z > 0.0)


LOSSES = {cls.name: cls for cls in (Squared, Logistic, SquaredHinge)}


def get_loss(name):
    """Return the loss object called ``name``; ValueError listing the known ones otherwise."""
    if isinstance(name, Loss):
        return name
    try:
        return LOSSES[name]()
    except (KeyError, TypeError):
        raise ValueError(
            f"unknown loss {name!r}; expected one of {sorted(LOSSES)}"
        ) from None
