"""Model selection built on exact updates and certified bounds (ARCHITECTURE.md, "Floors").

* :func:`loo` — leave-one-out, exact: closed form (squared loss), bound screening with
  warm-started refits (Okumura et al. Algorithm 1, op1 and op2), or brute force; or
  approximate (:func:`alo`, labelled so).
* :func:`cross_validate` — the same over any scikit-learn splitter (a fold is a batch removal).
* :func:`treecv` — k-fold and leave-one-out CV of any incremental learner (``partial_fit``,
  river's ``learn_one``, deltafit's stream learners and exact estimators) by TreeCV (Joulani et
  al., "Fast cross-validation for incremental learning"), at about ``log2(2k)`` times the
  cost of one training pass.
* :class:`LOOSearchCV` — hyper-parameter search by leave-one-out (or k-fold) with Okumura
  §5.2's pruning and margin ordering; same choice and scores as an exhaustive
  ``GridSearchCV``.

Every result is a :class:`CVResult` saying how it was obtained (samples decided by bounds, refits,
time).

How it works
------------
One engine (`_engine.evaluate`) serves `loo`, `cross_validate` and `LOOSearchCV`: it fits the
full model once and reads it as a `TrainingProblem` (`_problem.py`: Φ or K, targets, weights,
the solution and its exact gradient).  Bound methods screen every split with a region
(`region=`: `"sphere"`, the published balls; `"curvature"`, intersected with
`sensitivity`'s curvature regions; `"auto"`: the balls for k folds and for op2's batched
leave-one-out, the curvature region otherwise; the result's `details["region"]` says which),
then refit the undecided splits warm from the full solution.  Leave-one-out of a binary
smooth model over explicit features refits side by side (`TrainingProblem.loo_refits`): one
Newton step for every undecided sample from one Cholesky factor of the full Hessian
(Sherman–Morrison per sample), then chord steps of all of them as the columns of one matrix
(scores computed afresh each step, the certified stop rule of `newton_primal` per column,
op2's early stop from the ball around the iterate and the screening interval, a column's own
Hessian when it contracts slowly, Armijo backtracking; a column that still stalls is refit
alone by `refit`, the chord solve of `solvers/_chord.py`).  Chunks of the margin order
double in size, with `LOOSearchCV`'s pruning rule checked between them.  `LOOSearchCV`
warm-starts each configuration's full model from the previous one when only C differs
(`warm_start` on a copy).  TreeCV's exact learners (`_treecv_learners.ExactLearner`) grow a
node by `add` / `remove` on its parent's model: the states' warm updates.
"""

from deltafit.model_selection._kfold import cross_validate
from deltafit.model_selection._loo import alo, loo
from deltafit.model_selection._result import CVResult
from deltafit.model_selection._search import LOOSearchCV
from deltafit.model_selection._treecv import TreeCVResult, treecv

__all__ = ["loo", "alo", "cross_validate", "treecv", "LOOSearchCV", "CVResult", "TreeCVResult"]
