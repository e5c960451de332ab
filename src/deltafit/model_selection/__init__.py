"""Model selection built on exact updates and certified bounds (ARCHITECTURE.md, "Floors").

* :func:`loo` — leave-one-out, exact: closed form (squared loss), bound screening with
  warm-started refits (Okumura et al. Algorithm 1, op1 and op2), or brute force; or
  approximate (:func:`alo`, labelled so).
* :func:`cross_validate` — the same over any scikit-learn splitter (a fold is a batch removal).
* :func:`treecv` — k-fold and leave-one-out CV of any incremental learner (``partial_fit``,
  river's ``learn_one``, deltafit's stream learners and exact estimators) by TreeCV (Joulani et
  al., "Fast cross-validation for incremental learning"), at about ``log2(2k)`` times the cost of one training pass.
* :class:`LOOSearchCV` — hyper-parameter search by leave-one-out (or k-fold) with Okumura
  §5.2's pruning and margin ordering; same choice and scores as an exhaustive
  ``GridSearchCV``.

Every result is a :class:`CVResult` saying how it was obtained (samples decided by bounds,
refits, time).
"""

from deltafit.model_selection._kfold import cross_validate
from deltafit.model_selection._loo import alo, loo
from deltafit.model_selection._result import CVResult
from deltafit.model_selection._search import LOOSearchCV
from deltafit.model_selection._treecv import TreeCVResult, treecv

__all__ = ["loo", "alo", "cross_validate", "treecv", "LOOSearchCV", "CVResult", "TreeCVResult"]
