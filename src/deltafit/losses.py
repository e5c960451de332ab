"""Losses of the canonical problem, as functions of the score ``z``.

Every deltafit model minimises (ARCHITECTURE.md, "The problem")

    C · Σ_i ℓ(y_i, z_i) + ½‖β‖²,    z_i = ⟨Φ(x_i), β⟩.

This module holds the loss values and their first and second derivatives in ``z``,
vectorised over samples, and nothing else.  Classification losses take ``y`` in {-1, +1}.

========================  ==========================  =================================
name                      ℓ(y, z)                     scikit-learn counterpart
========================  ==========================  =================================
``"squared"``             (y − z)²                    Ridge(alpha=1/(2C)), KernelRidge
``"logistic"``            log(1 + exp(−y z))          LogisticRegression(C=C)
``"squared_hinge"``       max(0, 1 − y z)²            LinearSVC(C=C, loss="squared_hinge")
``"hinge"``               max(0, 1 − y z)             LinearSVC(C=C, loss="hinge"), SVC
========================  ==========================  =================================

The second derivative of the squared hinge is the generalised one (2 on the margin-violating
set, 0 elsewhere), which is what Newton's method for L2-SVMs uses (Keerthi & DeCoste, 2005).

The hinge is not differentiable at ``y z = 1``: its :attr:`Loss.smooth` flag is False, ``d1``
returns one subgradient and ``d2`` is zero.  Code that needs derivatives (Newton, the
sensitivity bounds) checks ``smooth`` and refuses it; the hinge problem is solved exactly
through its dual box QP (:func:`deltafit.solvers.hinge_primal`,
:func:`~deltafit.solvers.hinge_kernel`).

:class:`SmoothedHinge` (the hinge smoothed over a band of width ε, Huber's rule) starts the
Dask hinge fit: Newton on it lands near the hinge's solution.  It takes its width, so it is
not one of the :data:`LOSSES` an estimator is fitted with.
"""

from __future__ import annotations

import numpy as np
from scipy.special import expit, log_expit

__all__ = ["Loss", "Squared", "Logistic", "SquaredHinge", "Hinge", "get_loss", "LOSSES"]


class Loss:
    """Base class: a loss ℓ(y, z) with vectorised value and derivatives in ``z``.

    Attributes
    ----------
    name : str
        The name under which :func:`get_loss` finds the loss.
    classification : bool
        Whether ``y`` is a label in {-1, +1}.
    smooth : bool
        Whether ℓ is differentiable in ``z`` with a Lipschitz derivative (so that ``d1`` is the
        derivative and ``d2`` a generalised second derivative): the condition of the Newton
        solvers and of the sensitivity bounds (Okumura et al. Theorem 1, Sivan et al. Theorem 1).
        False for the hinge, whose ``d1`` is only a subgradient.

    Examples
    --------
    >>> import numpy as np
    >>> from deltafit.losses import get_loss
    >>> loss = get_loss("logistic")
    >>> z = np.array([-1.0, 0.0, 2.0])
    >>> loss.value(np.ones(3), z).round(4)
    array([1.3133, 0.6931, 0.1269])
    >>> loss.smooth
    True
    """

    # a state's checkpoint shares it: a loss has no state
    _checkpoint_shares = True
    name = ""
    classification = True
    smooth = True

    def value(self, y: np.ndarray, z: np.ndarray) -> np.ndarray:
        """Per-sample loss ℓ(y_i, z_i).

        Parameters
        ----------
        y : ndarray of shape (n,)
            Targets (labels in {-1, +1} for a classification loss).
        z : ndarray of shape (n,)
            Scores ``⟨Φ(x_i), β⟩``.

        Returns
        -------
        ndarray of shape (n,)
        """
        raise NotImplementedError

    def d1(self, y: np.ndarray, z: np.ndarray) -> np.ndarray:
        """First derivative ∂ℓ/∂z per sample.

        Parameters
        ----------
        y : ndarray of shape (n,)
            Targets (labels in {-1, +1} for a classification loss).
        z : ndarray of shape (n,)
            Scores ``⟨Φ(x_i), β⟩``.

        Returns
        -------
        ndarray of shape (n,)
        """
        raise NotImplementedError

    def d2(self, y: np.ndarray, z: np.ndarray) -> np.ndarray:
        """(Generalised) second derivative ∂²ℓ/∂z² per sample.

        Parameters
        ----------
        y : ndarray of shape (n,)
            Targets (labels in {-1, +1} for a classification loss).
        z : ndarray of shape (n,)
            Scores ``⟨Φ(x_i), β⟩``.

        Returns
        -------
        ndarray of shape (n,)
        """
        raise NotImplementedError

    def __repr__(self) -> str:
        return f"{type(self).__name__}()"


class Squared(Loss):
    """ℓ(y, z) = (y − z)²: least squares (LS-SVM, ridge, kernel ridge).

    Examples
    --------
    >>> import numpy as np
    >>> from deltafit.losses import Squared
    >>> Squared().value(np.array([1.0]), np.array([0.5]))          # (y - z)²
    array([0.25])
    """

    name = "squared"
    classification = False

    def value(self, y: np.ndarray, z: np.ndarray) -> np.ndarray:
        r = z - y
        return r * r

    def d1(self, y: np.ndarray, z: np.ndarray) -> np.ndarray:
        return 2.0 * (z - y)

    def d2(self, y: np.ndarray, z: np.ndarray) -> np.ndarray:
        return np.full(np.shape(z), 2.0)


class Logistic(Loss):
    """ℓ(y, z) = log(1 + exp(−y z)), y in {-1, +1}.

    Examples
    --------
    >>> import numpy as np
    >>> from deltafit.losses import Logistic
    >>> Logistic().value(np.array([1.0]), np.array([0.0])).round(4)  # log(1 + exp(-y z))
    array([0.6931])
    """

    name = "logistic"

    def value(self, y: np.ndarray, z: np.ndarray) -> np.ndarray:
        return -log_expit(y * z)

    def d1(self, y: np.ndarray, z: np.ndarray) -> np.ndarray:
        return -y * expit(-y * z)

    def d2(self, y: np.ndarray, z: np.ndarray) -> np.ndarray:
        p = expit(y * z)
        return p * (1.0 - p)


class SquaredHinge(Loss):
    """ℓ(y, z) = max(0, 1 − y z)², y in {-1, +1} (L2-SVM).

    Examples
    --------
    >>> import numpy as np
    >>> from deltafit.losses import SquaredHinge
    >>> SquaredHinge().value(np.array([1.0, 1.0]), np.array([0.5, 2.0]))  # max(0, 1 - y z)²
    array([0.25, 0.  ])
    """

    name = "squared_hinge"

    def value(self, y: np.ndarray, z: np.ndarray) -> np.ndarray:
        m = np.maximum(0.0, 1.0 - y * z)
        return m * m

    def d1(self, y: np.ndarray, z: np.ndarray) -> np.ndarray:
        return -2.0 * y * np.maximum(0.0, 1.0 - y * z)

    def d2(self, y: np.ndarray, z: np.ndarray) -> np.ndarray:
        return 2.0 * (1.0 - y * z > 0.0)


class Hinge(Loss):
    """ℓ(y, z) = max(0, 1 − y z), y in {-1, +1} (L1-SVM); not smooth.

    ``d1`` is the subgradient ``−y · 1{y z < 1}`` (0 at the kink ``y z = 1``) and ``d2`` is 0;
    neither describes the loss near the kink, hence ``smooth = False``.

    Examples
    --------
    >>> import numpy as np
    >>> from deltafit.losses import Hinge
    >>> Hinge().value(np.array([1.0, 1.0]), np.array([0.5, 2.0]))        # max(0, 1 - y z)
    array([0.5, 0. ])
    >>> Hinge.smooth
    False
    """

    name = "hinge"
    smooth = False

    def value(self, y: np.ndarray, z: np.ndarray) -> np.ndarray:
        return np.maximum(0.0, 1.0 - y * z)

    def d1(self, y: np.ndarray, z: np.ndarray) -> np.ndarray:
        return np.where(y * z < 1.0, -y, 0.0) + np.zeros(np.shape(z))

    def d2(self, y: np.ndarray, z: np.ndarray) -> np.ndarray:
        return np.zeros(np.shape(z))


class SmoothedHinge(Loss):
    """The hinge smoothed over a band of width ε below the margin; smooth.

    Huber's rule (the "modified Huber" of Chapelle, "Training a support vector machine in the
    primal", Neural Computation 2007, §4.1): with ``u = 1 − y z``, ``ℓ = 0`` for ``u ≤ 0``,
    ``u² / (2ε)`` for ``0 < u < ε``, ``u − ε/2`` beyond.  Its minimiser tends to the hinge's as
    ε → 0 (its dual is the hinge's plus ``ε/(2C) Σ α_i²``): the margins under it put most rows
    on the side they take at the hinge's solution, the start of a Dask hinge fit.  Not in
    :data:`LOSSES` (it takes ``eps``): no estimator fits it.

    Parameters
    ----------
    eps : float
        The width of the quadratic band, ``ε > 0``.

    Examples
    --------
    >>> import numpy as np
    >>> from deltafit.losses import SmoothedHinge
    >>> SmoothedHinge(0.5).value(np.ones(3), np.array([2.0, 0.75, 0.0]))
    array([0.    , 0.0625, 0.75  ])
    """

    name = "smoothed_hinge"
    smooth = True

    def __init__(self, eps: float) -> None:
        self.eps = float(eps)

    def value(self, y: np.ndarray, z: np.ndarray) -> np.ndarray:
        u = 1.0 - y * z
        e = self.eps
        return np.where(u <= 0.0, 0.0, np.where(u < e, u * u / (2.0 * e), u - 0.5 * e))

    def d1(self, y: np.ndarray, z: np.ndarray) -> np.ndarray:
        u = 1.0 - y * z
        return -y * np.clip(u / self.eps, 0.0, 1.0)

    def d2(self, y: np.ndarray, z: np.ndarray) -> np.ndarray:
        u = 1.0 - y * z
        return np.where((u > 0.0) & (u < self.eps), 1.0 / self.eps, 0.0)


LOSSES = {cls.name: cls for cls in (Squared, Logistic, SquaredHinge, Hinge)}


def get_loss(name: str | Loss) -> Loss:
    """Return the loss object called ``name``; ValueError listing the known ones otherwise.

    Examples
    --------
    >>> from deltafit.losses import get_loss
    >>> get_loss("squared_hinge").name
    'squared_hinge'
    """
    if isinstance(name, Loss):
        return name
    try:
        return LOSSES[name]()
    except (KeyError, TypeError):
        raise ValueError(f"unknown loss {name!r}; expected one of {sorted(LOSSES)}") from None
