"""The what-if regions by name: what ``method=`` of :class:`~deltafit.sensitivity.Sensitivity`
may ask for, and how ``"auto"`` chooses.

:data:`REGIONS` maps a method name to the :class:`~deltafit.sensitivity.regions.Region` class
registered under it; that class says which losses and models it covers and builds the region of
a pending change (:meth:`Region.build`).  ``"sphere"`` — the ball of Theorem 1 of Okumura et
al., "Quick sensitivity analysis for incremental data modification and its application to
leave-one-out CV in linear classification problems" (= Theorem 1 of Sivan et al.,
"Incremental sensitivity analysis for kernelized models") — covers every loss and is the
fallback of ``"auto"``.  Adding a region: a module with a :class:`Region` subclass and its
entry in :data:`REGIONS`.
"""

from __future__ import annotations

from typing import Any

from deltafit.sensitivity.regions._curvature import CurvatureRegion
from deltafit.sensitivity.regions._exact import ExactRegion
from deltafit.sensitivity.regions._protocol import Region
from deltafit.sensitivity.regions._sphere_region import SphereRegion

__all__ = ["FALLBACK", "METHODS", "REGIONS", "build_region", "region_class", "resolve_method"]

#: method name -> the :class:`Region` class that answers it (``"auto"`` picks the first that
#: lists the model's loss in its ``auto_losses``); a registered class may be abstract (a family
#: such as ``ExactRegion``) when its ``build`` makes a concrete one
REGIONS: dict[str, type[Region]] = {
    "sphere": SphereRegion,
    "exact": ExactRegion,  # type: ignore[type-abstract]
    "curvature": CurvatureRegion,
}
#: the region of every covered loss: ``"auto"``'s answer when no other applies
FALLBACK = "sphere"
#: the answers a what-if object can give (``method=``) with the regions shipped; see
#: :func:`resolve_method` (which reads :data:`REGIONS` itself)
METHODS = ("auto", *REGIONS)


def _unknown(name: Any) -> ValueError:
    return ValueError(f"method must be one of {['auto', *REGIONS]}, got {name!r}")


def region_class(name: str) -> type[Region]:
    """The :class:`Region` class registered as ``name`` (ValueError for an unknown name).

    Examples
    --------
    >>> from deltafit.sensitivity.regions import region_class
    >>> cls = region_class("curvature")
    >>> cls.kind, cls.losses
    ('curvature', ('logistic', 'squared_hinge'))
    >>> region_class("sphere").covers("hinge")
    True
    >>> region_class("ellipse")
    Traceback (most recent call last):
    ...
    ValueError: method must be one of ['auto', 'sphere', 'exact', 'curvature'], got 'ellipse'
    """
    try:
        return REGIONS[name]
    except (KeyError, TypeError):
        raise _unknown(name) from None


def resolve_method(method: str, loss: Any) -> str:
    """The region kind ``method`` names for a model with ``loss``.

    ``"sphere"``: the ball of Theorem 1 of Okumura et al. (2015) / Theorem 1 of Sivan et al.
    (2020) (any covered loss); ``"exact"``: the retrained model itself, squared loss only
    (:mod:`deltafit.sensitivity.regions._exact`); ``"curvature"``: the curvature-aware region,
    logistic and squared-hinge losses; ``"auto"``: the first registered region whose
    ``auto_losses`` list the loss — ``"exact"`` for the squared loss, ``"curvature"`` for the
    others — else the sphere.

    Raises
    ------
    ValueError
        For an unknown method, or one that does not cover ``loss``.

    Examples
    --------
    >>> from deltafit.losses import Hinge, Logistic, Squared
    >>> from deltafit.sensitivity.regions import resolve_method
    >>> [resolve_method("auto", loss) for loss in (Squared(), Logistic(), Hinge())]
    ['exact', 'curvature', 'sphere']
    >>> resolve_method("sphere", Logistic())
    'sphere'
    >>> resolve_method("exact", Logistic())
    Traceback (most recent call last):
    ...
    ValueError: method='exact' needs loss='squared' ...
    """
    if not isinstance(method, str) or (method != "auto" and method not in REGIONS):
        raise _unknown(method)
    name = loss.name
    if method == "auto":
        for kind, cls in REGIONS.items():
            if name in cls.auto_losses:
                return kind
        return FALLBACK
    REGIONS[method].check_loss(name)
    return method


def build_region(sens: Any) -> Region:
    """The region of ``sens``'s pending change for its method (see :func:`resolve_method`).

    Parameters
    ----------
    sens : Sensitivity
        A binary what-if object (:func:`deltafit.sensitivity`).

    Returns
    -------
    Region

    Examples
    --------
    The region a what-if object answers from:

    >>> import numpy as np
    >>> from sklearn.datasets import load_breast_cancer
    >>> from sklearn.preprocessing import StandardScaler
    >>> import deltafit
    >>> from deltafit.sensitivity.regions import Region, build_region
    >>> X, y = load_breast_cancer(return_X_y=True)
    >>> X = StandardScaler().fit_transform(X)
    >>> model = deltafit.LinearClassifier(loss="logistic", C=0.1).fit(X, y)
    >>> s = deltafit.sensitivity(model, method="sphere")
    >>> _ = s.remove([0, 1, 2])
    >>> region = build_region(s)
    >>> isinstance(region, Region), region.kind
    (True, 'sphere')
    >>> lo, hi = region.decision_bounds(X)
    >>> lo_s, hi_s = s.decision_bounds(X)
    >>> bool(np.array_equal(lo, lo_s) and np.array_equal(hi, hi_s))
    True
    """
    cls = region_class(sens._method)
    if sens._prob.kernel and not cls.kernels:
        raise ValueError(f"method={sens._method!r} needs a linear model; use method='sphere'")
    return cls.build(sens)
