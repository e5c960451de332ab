"""Exact solvers for the canonical problem of ARCHITECTURE.md, "The problem".

    minimise_β  J(β) = C · Σ_i w_i ℓ(y_i, ⟨Φ(x_i), β⟩) + ½‖β‖²

with optional sample weights ``w_i ≥ 0`` (``sample_weight``; all 1 by default), i.e. a
per-sample ``C_i = C · w_i``, scikit-learn's convention for ``LogisticRegression`` and
``LinearSVC``.  A sample of weight 0 is absent: every solver drops it before solving.

* squared loss: closed form, ``(ΦᵀΦ + ρI) β = Φᵀy`` with ``ρ = 1/(2C)`` (primal) or
  ``(K + ρI) α = y`` (dual); the incremental machinery lives in :mod:`deltafit.models`.
* smooth losses (logistic, squared hinge): damped Newton with an Armijo line search, in the
  primal (:func:`newton_primal`) or in the kernel expansion ``β = Σ α_i Φ(x_i)``
  (:func:`newton_kernel`).  Both warm-start from any point and stop on the norm of the
  gradient of J in model space, ``‖∇J(β)‖₂ ≤ tol · ‖∇J(0)‖₂``.
* hinge loss (not smooth): the dual box QP, solved exactly by dual coordinate descent and
  active-set polishing (:func:`hinge_primal` over explicit features, :func:`hinge_kernel`
  over a kernel matrix); they stop on the KKT violation.

Because J is 1-strongly convex (for any weights w ≥ 0), the returned ``grad_norm`` certifies
``‖β − β*‖₂ ≤ grad_norm`` (Okumura et al., "Quick sensitivity analysis for incremental data
modification", KDD 2015, Theorem 6), which is what a caller needs to turn the solver's
tolerance into a bound.  For the hinge solvers ``grad_norm`` is the radius
that the duality gap certifies (see :class:`HingeResult`), not a gradient norm.

The modules (this package only re-exports their public names):

* ``_results``: :class:`SolverResult`, :class:`NewtonCurvature`, :class:`HingeResult`.
* ``_convergence``: :data:`MAX_CURVATURE`, :func:`check_curvature`, ``curvature_failure``,
  ``squared_norms``, ``solve_label`` and the ConvergenceWarnings (``warn_not_converged``,
  ``warn_kkt_not_converged``).
* ``_inputs``: the input checks (``check_sample_weight``) and the samples of weight 0.
* ``_newton``: :func:`newton_primal`, :func:`newton_kernel`, :func:`solve_spd`;
  ``_newton_rows``: ``NewtonRows``, dense rows prepared once for the Newton Hessians of
  several solves (syrk over the columns not zero everywhere; the first Hessian shared).
* ``_hinge``: :func:`hinge_primal`, :func:`hinge_kernel`, ``hinge_kernel_slots`` (cold and
  working-set solves, certification); ``_hinge_active_set``: their iterations
  (``hinge_loop``; ``active_face``, the exact face solves a small change's re-solve starts
  with); ``_hinge_qp``: the dual QP over each way of holding it; ``_kernel_values``: ``K c``
  kept by slot and moved by the columns of the changed coefficients (the kernel hinge
  state's updates).
* ``_chord`` and ``_kernel_chord``: warm re-solves of the smooth losses on the stored
  curvature (primal and kernel); ``_sgd``: the compiled loops of the stream learners.
"""

from __future__ import annotations

# The names with ``as``: public to deltafit's other packages (the model states, the Dask
# passes, the what-if and cross-validation engines), not in the documented API (``__all__``).
from deltafit.solvers._convergence import MAX_CURVATURE as MAX_CURVATURE
from deltafit.solvers._convergence import check_curvature
from deltafit.solvers._convergence import curvature_failure as curvature_failure
from deltafit.solvers._convergence import row_curvature as row_curvature
from deltafit.solvers._convergence import solve_label as solve_label
from deltafit.solvers._convergence import squared_norms as squared_norms
from deltafit.solvers._convergence import warn_kkt_not_converged as warn_kkt_not_converged
from deltafit.solvers._convergence import warn_not_converged as warn_not_converged
from deltafit.solvers._hinge import hinge_kernel, hinge_primal
from deltafit.solvers._hinge import hinge_kernel_slots as hinge_kernel_slots
from deltafit.solvers._hinge_active_set import hinge_loop as hinge_loop
from deltafit.solvers._hinge_qp import SubFeatureQP as SubFeatureQP
from deltafit.solvers._hinge_qp import box_violation as box_violation
from deltafit.solvers._inputs import check_sample_weight as check_sample_weight
from deltafit.solvers._newton import CHORD_FEATURES as CHORD_FEATURES
from deltafit.solvers._newton import HESSIAN_FREE_FEATURES as HESSIAN_FREE_FEATURES
from deltafit.solvers._newton import newton_kernel, newton_primal, solve_spd
from deltafit.solvers._newton_rows import NewtonRows as NewtonRows
from deltafit.solvers._results import HingeResult, NewtonCurvature, SolverResult

__all__ = [
    "SolverResult",
    "HingeResult",
    "NewtonCurvature",
    "newton_primal",
    "newton_kernel",
    "hinge_primal",
    "hinge_kernel",
    "solve_spd",
    "check_curvature",
]
