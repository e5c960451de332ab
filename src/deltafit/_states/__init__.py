"""Exact-update states (NumPy backend): the ``ModelState`` protocol and ``DataChange``
(:mod:`._protocol`) and one module per state.  The estimators pick a state through the registry in
:mod:`deltafit.models` (by backend, kernel and loss) and talk to it only through the protocol;
persistence stores it under its ``kind``.

Warm re-solves of the smooth losses and the hinge
-------------------------------------------------
A linear logistic / squared-hinge state (`_states/_newton_primal.PrimalNewtonState`) keeps, besides
β, the matrix `M = I + Σ_s d_s φ_s φ_sᵀ` that the last Newton step factorised (`Curvature` in
`solvers/_chord.py`: Cholesky factor, curvature weight `d` by ledger slot, pending
Woodbury rows) and the scores, J, ∇J and ∇J(0) at β (`Point`, by slot).  An update corrects M
for the rows whose weight in it changes (changed samples; squared-hinge margin flips) and takes
chord steps with it (L-BFGS pairs on top), each one fused pass over the rows (`RowBlock`: the
ledger's rows in place, removed / free slots at weight 0, plus the added rows); it stops on
`newton_primal`'s certified rule, from scores computed afresh.  A stall returns None and the
state re-solves with `newton_primal`.  Per-slot arrays follow `ensure_capacity` / `take`;
model files keep M and the scores as optional members (else rebuilt at the next update).
The kernel state (`KernelNewtonState`, also each class of a one-vs-rest model) keeps the Cholesky
factor of `I + S K S` that its last Newton step built (`KernelCurvature` in
`solvers/_kernel_chord.py`) and `K α`, `K h`, `K h₀` by slot (`KernelPoint`); a change becomes
rank-one corrections of the curvature weights (removed, added, relabelled, reweighted samples,
squared-hinge margin flips) applied by the Woodbury identity, so a chord step costs two products
with K and a triangular solve pair; removed samples keep their coefficient at the start (the
first step zeroes it).  The factor is refreshed (O(m³)) only past a pending rank of
`max(max_rank, n/8)` or after a slow step; the slots it refers to are not handed out again
(`reusable_slots`) while it is kept.  Model files do not store it: the first update after a
load factorises once.

The hinge loss (`_states/_hinge`: `PrimalHingeState`, `KernelHingeState`) keeps the
dual variables α by slot and re-solves the dual box QP after a change by working sets
(`the solvers' warm hinge loop`, the solvers' `working_set` / `margin0`): the moved samples, the
free
set and a band of the samples nearest to the margin under the old solution are solved as a
small QP (the rest fixed at their bounds, entering as an offset: `restrict`), widened by the
violators of full gradient checks, and certified by the cold solve's rule and radius
(`_hinge_result`).  The kernel state reads its matrix by slot in place (`_SlotKernelQP`) and
keeps `K alpha` by slot (`solvers/_kernel_values.KernelValues`, with a certified bound of its
rounding, the kernel values of the last free set and the factor of the last face): an update
reads only the columns of the coefficients it changes, never the whole matrix, and its
working set starts from the face of the free set (`active_face`); `HingeResult.n_touched`
counts coordinate visits.
"""
