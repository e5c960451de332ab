"""Everything that runs on a Dask cluster: the input, the passes over the row blocks and the Dask
states (the registry in :mod:`deltafit.models` picks them by backend, kernel and loss).

A dask X reaches a linear model's `fit` through
`_dask/_input.py` (recognises dask collections by their type's module, so `import
deltafit` never imports dask; splits X, y, weights into aligned row blocks; lazy decisions by
`map_blocks`) and `_dask/_stats.py` (per block: validation, label encoding,
`_Statistics.of_rows` and the ledger's digests; a tree of `_merge`s, TwoSum for the
double-double parts); `PrimalSquaredState.fit_statistics` solves from the summed statistics.
Updates compute their dask arguments first (`UpdatableMixin._update`) and take the NumPy path.
The fit leaves a range ledger (`Ledger.from_range`): ids = slots for the fit's n samples,
weights and labels implicit (`LazyColumn`: a rule plus patches where a write departs from
it), an id index of the later ids only (`RangeIdIndex`), and the digests sorted by value in
16 segments built by one task each on the cluster (`SortedDigests`; later writes per slot or
as an overlay): ~21 bytes a sample on the client, nothing n-sized written until a compaction.
Digests (`_ledger/_digest.py`, scheme `"nh-sip"`: NH then SipHash, numba or NumPy; files
of format 2 hold scheme `"blake2b"`, which their ledger keeps).  Cross-validation of a
Dask-fitted squared loss (`model_selection/_dask_cv.py`, reached from `loo` / `cross_validate`
through
`model_selection/_closed_form.dask_cross_validation`): leave-one-out from the leverages of one
`map_blocks` pass; k folds as k batch removals of fold statistics summed in the fit's pass.
Of a Dask-fitted logistic / squared hinge (`model_selection/_dask_smooth_cv.py` over
`model_selection/_dask_folds.py`, two classes or K ≥ 3): k folds as joint warm re-solves from β̂
(each
pass one task per block computing Φ B, B = p × K'k — every one-vs-rest class's fold problems
as columns, coded per column —, with each row's own fold masked: every column's J and gradient
at its own β; fold Hessians = the fit's Hessian minus the fold shares of one pass; chord
steps, a column's exact Hessian on request), then one scoring pass (argmax labels for K ≥ 3);
leave-one-out as op1: the left-out balls (`sensitivity/regions/_ball.loo_balls`) and, unless
`region="sphere"`, the curvature-aware leave-one-out region
(`model_selection/_dask_loo_bounds.py`: `sensitivity/regions/_curvature_loo`'s levels, p × p sums
and
verification evaluated block by block, two more passes), the samples whose sign / argmax
(`certain_argmax`) they leave undecided refit by the same joint re-solves (columns = samples,
or a sample's candidate classes; starts from their gathered rows, batches of 256).
Rows on the cluster (`keep_data=True`, `_dask/_rows.py`, `_dask/_fit.py`): one
pass validates, encodes, digests and persists the row blocks (`DaskRowStore`: persisted
(x, t, w) blocks; on the client only each block's first id — ids → (block, offset) by
`searchsorted` —, a per-block live mask and the few patched targets / weights; never changed
in place, so a failed update keeps the old one).  Removal masks, addition appends a block
under the ids the ledger will hand out, relabel / reweight patch; the ledger is the range
ledger above, and `_base._stored_samples` gathers a change's rows from the store (remove /
relabel by id, and the sensitivity layer's `locate`).  The squared loss then reduces its
statistics from the persisted blocks.  Logistic / squared hinge (`_dask/_newton.py`,
binary; the hinge in `_dask/_hinge.py`, below): every pass is one `block_share` task per block
(J, Φᵀ(cwℓ'), Φᵀ(cwℓ'(t,0)), on request ΦᵀDΦ, the squared hinge's switched-row correction, or
J along a ladder of step lengths) tree-summed to p / p × p; the fit is Newton (Hessian in each
pass, the persisting pass evaluates the start); `DaskNewtonState` keeps β, M = the exact
Hessian of the current problem at a reference β_ref, and (J, ∇J, ∇J(0)) at β, so an update
corrects M and moves the gradient by the changed rows alone, then takes chord / L-BFGS steps
(one pass each, `solvers/_chord`'s rules) and ends on a fresh pass: `grad_norm_` is
certified as on NumPy.  A logistic pass also sums the Hessian at its point unless one chord
step after it is predicted to finish (the last rate, or Newton's `c‖∇J‖²` with c kept from
the previous solve): a solve ends with M exact at β, so consecutive 0.1% updates take 2
passes each.  Tasks keep the GIL free for the threaded scheduler: ΦᵀDΦ by NumPy's `V.T @ V`
(BLAS syrk), gradient-only tasks on 8 MiB of rows at a time, the logistic scores, gradient
and scaled rows over plain features in compiled `nogil` kernels (`_dask/_kernels.py`, numba;
NumPy without it); a task's live mask travels to a worker process as bits; an update reads
its changed samples' labels and weights from the ledger in one vectorised step.  Every pass — the
statistics, Newton, one-vs-rest, fold and hinge passes — sums its per-block shares in one tree
(`_dask/_rows.tree_compute`, fan-in 8) and computes through
`_dask/_rows.compute_on_cluster`: Dask retries a lost
worker's tasks and recomputes its persisted blocks from their graph; what it gives up on is a
ValueError naming the lost worker (the transaction leaves the model as it was); the tests kill
a worker during a logistic fit and removal, a K = 3 one-vs-rest removal, a hinge removal, the
squared loss's statistics pass and a 3-fold CV's joint pass.  Such a model is not saved (its
rows are not in the file): the refusals are written once, `_dask/_state.py`'s
`DaskStateRefusals` mixin.  The sensitivity layer gathers the changed
samples through `locate` and maps its bounds over dask query rows lazily
(`_dask/_sensitivity_rows.py`; the regions pickle to worker processes); `"auto"` gives the
curvature region's cheap intervals (`FittedProblem.rows_on_cluster`: `hessian()` is M when
exact at β, else one pass; `select_rows(key, k)` brings back per block the k samples the
intervals correct, one pass), the modes reading every row are refused.
K ≥ 3 classes: the squared loss sums ΦᵀWT (p × K, the ±1 code
columns: `BlockProblem(n_classes=K)`; digests and the row store keep class indices) into the
NumPy `SharedOneVsRestState`; logistic / squared hinge / hinge (`_dask/_ovr.py`) persist the rows
once with their class indices and run the K binary `dask_newton` / `dask_chord` solves
jointly, each in a thread whose pass object hands its request to a driver
(`solve_jointly`), which makes one pass (`ovr_block_share`: every waiting class's J, ∇J as
one Φᵀ D product, Hessians on request) when every unfinished class waits, so a fit or update
costs its slowest class's passes; `DaskOneVsRestState` keeps K `DaskNewtonState`s (hinge:
`DaskHingeState`s, below); a user callback runs on the class threads under a lock.  The
ledger keeps no labels: per-class counts (`_class_counts`) refuse an update that leaves one
class.
Hinge (`_dask/_hinge.py`, `DaskHingeState`): a decomposition method on the
dual — a reference β_ref whose margins put every row outside a working set W (≤ 8p + 512
rows, on the client with their α) at its bound, p-sized sums over the others; each pass
(`hinge_shares` per block: every problem's share from one Φ per chunk) returns the KKT
violations, the sums under β's rule and ≤ max(8p, 128) rows of each kind (worst violators,
nearest the margin); the client solves the QP over W with `the solvers' hinge loop` and
re-bases (or adds violators) while the dual decreases; a problem that fits W (n ≤ 8p + 512)
has every row gathered by its first pass (3 passes in all), a larger fit starts from a
smoothed hinge's Newton solution (`_dask/_newton.dask_newton`), an update puts the changed
rows into W with their α (1–2 passes); the last pass's duality gap certifies.  K ≥ 3
classes: `_dask/_ovr` runs the K classes' `fit_with` / `re_solved` in its joint driver
(`ovr_pass_share`: smoothed-start and hinge requests in one pass), the passes of the
slowest class.
"""
