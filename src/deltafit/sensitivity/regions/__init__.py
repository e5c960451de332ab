"""The regions a what-if object answers from, and the balls they are made of.

:class:`Region` is what every region provides (decision, coefficient and distance bounds, the
losses and models it covers, how it is built from a pending change); :data:`REGIONS` lists the
regions by the ``method=`` name that asks for them (``"sphere"``, ``"exact"``,
``"curvature"``), read by :func:`resolve_method` and :func:`build_region`.  The modules:
``_protocol`` (the interface), ``_registry`` (the names), ``_ball`` (the ball of Theorem 1 of
Okumura et al. (2015) / Sivan et al. (2020), its formulas), ``_sphere`` (balls as objects),
``_sphere_region`` (``"sphere"``), ``_exact`` and ``_exact_factor`` (``"exact"``),
``_curvature`` and its helpers ``_curvature_schedule``, ``_curvature_linear``,
``_curvature_kernel``, ``_curvature_solve`` (``"curvature"``), and ``_curvature_loo``
(curvature-aware leave-one-out bounds).
"""

from deltafit.sensitivity.regions._ball import center_scores, half_gradient, loo_balls, sq_radius
from deltafit.sensitivity.regions._curvature import removal_intervals
from deltafit.sensitivity.regions._curvature_loo import (
    KernelSpace,
    LinearSpace,
    curvature_loo_bounds,
)
from deltafit.sensitivity.regions._curvature_schedule import CURVATURE_LOSSES, secant_range
from deltafit.sensitivity.regions._protocol import Region
from deltafit.sensitivity.regions._registry import (
    FALLBACK,
    METHODS,
    REGIONS,
    build_region,
    region_class,
    resolve_method,
)

__all__ = ["Region", "REGIONS", "METHODS", "FALLBACK", "region_class", "resolve_method",
           "build_region", "CURVATURE_LOSSES", "removal_intervals", "secant_range",
           "curvature_loo_bounds", "LinearSpace", "KernelSpace", "loo_balls", "center_scores",
           "half_gradient", "sq_radius"]
