"""The regions a what-if object answers from, and the balls they are made of.

:class:`Region` is what every region provides (decision, coefficient and distance bounds, the
losses and models it covers, how it is built from a pending change); :data:`REGIONS` lists the
regions by the ``method=`` name that asks for them (``"sphere"``, ``"exact"``, ``"curvature"``),
read by :func:`resolve_method` and :func:`build_region`.  The modules: ``_protocol`` (the
interface), ``_registry`` (the names), ``_ball`` (the ball of Theorem 1 of Okumura et al. (2015) /
Sivan et al. (2020), its formulas), ``_sphere`` (balls as objects), ``_sphere_region``
(``"sphere"``), ``_exact`` and ``_exact_factor`` (``"exact"``), ``_curvature`` and its helpers
``_curvature_schedule``, ``_curvature_linear``, ``_curvature_kernel``, ``_curvature_solve``
(``"curvature"``), and ``_curvature_loo`` (curvature-aware leave-one-out bounds).

The one ball, the one store and the regions
-------------------------------------------
The ball that certifies a model retrained after a data change (Okumura et al., "Quick
sensitivity analysis for incremental data modification and its application to leave-one-out CV
in linear classification problems", Thm 1 / Thm 6; Sivan et al., "Sensitivity analysis for
kernel models", Thm 1) is computed only in `regions/_ball.py`: center `β − r`, radius `‖r‖`,
`r = ½∇P₂(β) = ½(1 − ρ)β + ½ρ g + ½C₂ Δg`, as a vector (`half_gradient`), as scores
(`center_scores`), from inner products (`sq_radius`), or for every leave-one-out at once
(`loo_balls`).  `C₂ ≠ C₁` and the exact gradient `g` are parameters: the sensitivity layer
drops `g` and widens the radius by `ρ·grad_norm_` (`certified_radius`); `model_selection`'s
`TrainingProblem` keeps the exact `g`.  The samples of a pending change (their points, scores
under β and coefficients in Δg, the running ‖Δg‖ with its cancellation rule) are kept by one
store, `sensitivity/_changes.py` (`LinearChanges`: Δg as a vector, model rows by handle;
`KernelChanges`: the entries' kernel matrix), used by both `Sensitivity` and
`IncrementalSphere`.  A new certificate about a data change goes through these two modules.
Regions. `Sensitivity` answers its queries (`decision_bounds`, `predict_certain`,
`distance_bound`, `coef_bounds`, …) from a *region* built lazily from the pending change and
kept until the next one (`undo` / `reset` drop it): a `Region`
(`sensitivity/regions/_protocol.py`: `kind`, `decision_bounds(X)`, `center_decision(X)`,
`distance_bound()`, `coef_bounds()`, the losses and models it covers, `build(sens)`), picked by
`method=` from the registry `REGIONS` (`sensitivity/regions/_registry.py`: name -> class;
`resolve_method` and `build_region` read it; a new region is one module and one entry there).
The bookkeeping of the pending change is `sensitivity/_pending.py` (`PendingChange`, the base
of `Sensitivity`).  `"sphere"` wraps the ball above (`regions/_sphere_region.py`); `"exact"`
(squared loss, `sensitivity/regions/_exact.py`, its factorisations in `_exact_factor.py`) is
the retrained model itself, one Newton step
`β₁ − H₂⁻¹∇J₂(β₁)` through a Woodbury / Schur step on the stored inverse
(`FittedProblem.apply_inverse`, `inverse_columns`, `normal_matrix`: read-only), refined and
certified against the exact statistics, with intervals of rounding width (the computed
residual with a componentwise rounding bound and, on badly scaled features, the norm scaled
by diag(H₂)^-½ with a verified floor of the scaled Hessian's spectrum from a shifted
Cholesky factorisation: independent of cond(H₂)); `"curvature"`
(logistic, squared hinge) lives in `sensitivity/regions/_curvature.py` (its shared core in
`_curvature_schedule.py`, the linear schedules in `_curvature_linear.py`).  `s.sphere()` is always
the ball.
A multiclass model's certificates are the binary ones per one-vs-rest class, on the class
views `problem_.for_class(k)` (`MulticlassSensitivity` beside `Sensitivity` in
`sensitivity/_data_change.py`, made by the factory `for_model` that `deltafit.sensitivity(model)`
calls; `model_selection`'s
`OneVsRestProblem`, the incremental balls' `MulticlassIncrementalSphere` in
`sensitivity/_incremental.py`; the queries both stack per class live in
`sensitivity/_per_class.py`); a label is decided by the argmax rule `certain_argmax`.
The binary online learners (Pegasos, NORMA) get K classes from `stream/_ovr.py`
(`OneVsRest`: K binary learners on ±1 targets, argmax).
Dict samples (river's): every stream learner reads them through `stream/_features.py`
(`as_row`; the learner's `_dict_keys` maps names to columns): missing features are 0, a new
feature in a learned sample grows the learner by a zero column (`_grow`), one only predicted is
ignored.  river sees the learners through the module-level adapters of
`stream/_river_adapters.py` (imported by `as_river` only: river stays optional).

Curvature-aware regions (logistic, squared hinge) refine the ball with the loss's
curvature: `regions/_curvature.py` and `regions/_curvature_schedule.py` hold the theorem (the
ellipsoid `‖β − (β₁ − ½H⁻¹g)‖_H ≤
½‖g‖_{H⁻¹}` for any H below the secant Hessian on [β₁, β₂]), the secant-slope curvature bounds,
the Newton ball (second-order certificate), the guess-and-verify (homotopy) argument and the
linear regions (`curvature_region(sens)`: intervals from the cached eigendecomposition of the
stored Hessian for large n; exact per-sample intervals for small n with `recenter=False` or
`mode="exact"`).  Small linear what-ifs (n ≤ 1500, n·p² ≤ 4·10⁶) are answered by
`regions/_curvature_solve.py`: a damped Newton solve of the changed problem on scratch arrays (the
model
is only read through `problem_`), certified by the ball `B(β̂ − ½∇P₂(β̂), ½‖∇P₂(β̂)‖)` (P₂ is
1-strongly convex) widened by a rounding bound of the computed gradient — cheaper than the
model's exact warm update; the exact intervals answer if it does not converge.
`regions/_curvature_kernel.py` is the kernel form in expansion coefficients,
`regions/_curvature_loo.py` all
leave-one-out bounds at once (Sherman–Morrison per sample).  Every region is intersected with
the ball.  Derived data of a model version (the Hessian's eigendecomposition; the rows and the
stored Hessian's data part that the solve reuses) are kept by `FittedProblem.cached`.
`loo_bounds(method=...)` and `model_selection`'s `region=` switch (`"sphere"` reproduces the
papers) select them.  `IncrementalSphere(region="curvature")` (with KDR's and FGAL's
`region=`) keeps its ball per change and answers bound queries from a `Sensitivity`
(`method="auto"`) of its current A ∪ R, rebuilt lazily after a change, intersected with the
ball; KDR and `run_active_learning` recompute by warm updates of the previous model
(`warm=True`).
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

__all__ = [
    "Region",
    "REGIONS",
    "METHODS",
    "FALLBACK",
    "region_class",
    "resolve_method",
    "build_region",
    "CURVATURE_LOSSES",
    "removal_intervals",
    "secant_range",
    "curvature_loo_bounds",
    "LinearSpace",
    "KernelSpace",
    "loo_balls",
    "center_scores",
    "half_gradient",
    "sq_radius",
]
