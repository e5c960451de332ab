"""Sensitivity of a multiclass (one-vs-rest) model: one ball per class, labels by the argmax.

A classifier with K ≥ 3 classes solves K binary problems over the same samples (class k = +1,
the rest = −1, the same C; :mod:`deltafit._states._one_vs_rest`).  A data change is a data
change of each of them, so each class's retrained solution lies in its own ball of Okumura
et al., "Quick sensitivity analysis for incremental data modification and its application to
leave-one-out CV in linear classification problems", Theorem 1 (= Sivan et al., "Incremental
sensitivity analysis for kernelized models", Theorem 1), computed by the binary
:class:`Sensitivity` on the class's view ``model.problem_.for_class(k)``.  The retrained model's
decision values lie in the product of the K intervals; its label, the argmax, is certain when the
top class's lower bound exceeds every other class's upper bound (:func:`certain_argmax`).

What a change costs per class: an addition or a removal changes every class's problem (its
sample is +1 for one class and −1 for the others); a relabel from class a to class b changes
the targets of classes a and b only — for every other class the sample's coded target, hence
its coefficient in Δg, is unchanged, and that class's ball keeps radius 0 plus the solver
allowance.
"""

from __future__ import annotations

import numpy as np

from deltafit.sensitivity._data_change import Sensitivity
from deltafit.sensitivity._per_class import PerClass

__all__ = ["MulticlassSensitivity", "certain_argmax"]


def certain_argmax(lo, hi):
    """The class each row's bounds certify as the argmax.

    Parameters
    ----------
    lo, hi : ndarray of shape (n, K)
        Certified bounds of K decision values per row.

    Returns
    -------
    top : ndarray of int, shape (n,)
        ``argmax(lo)`` per row: where ``certain``, the argmax of every decision vector within
        the bounds.
    certain : ndarray of bool, shape (n,)
        ``lo[top] > max_{j ≠ top} hi[j]``: then every vector with ``lo ≤ z ≤ hi`` has its
        unique maximum at ``top``.

    Examples
    --------
    >>> import numpy as np
    >>> from deltafit.sensitivity import certain_argmax
    >>> lo = np.array([[2.0, 0.0, -1.0], [1.0, 0.9, 0.0]])
    >>> hi = np.array([[3.0, 1.5, 0.0], [2.0, 1.2, 0.5]])
    >>> top, certain = certain_argmax(lo, hi)
    >>> top.tolist(), certain.tolist()          # row 2: class 1 may still beat class 0
    ([0, 0], [True, False])
    """
    lo = np.asarray(lo, dtype=np.float64)
    hi = np.asarray(hi, dtype=np.float64)
    if lo.ndim != 2 or lo.shape != hi.shape or lo.shape[1] < 2:
        raise ValueError(f"lo and hi must both have shape (n, K) with K >= 2, got {lo.shape} "
                         f"and {hi.shape}")
    n = lo.shape[0]
    top = np.argmax(lo, axis=1)
    rows = np.arange(n)
    others = hi.copy()
    others[rows, top] = -np.inf
    with np.errstate(invalid="ignore"):
        certain = lo[rows, top] > others.max(axis=1)
    return top, certain


class MulticlassSensitivity(PerClass):
    """What-if object of a model with K ≥ 3 classes: one certified ball per one-vs-rest class.

    ``deltafit.sensitivity(model)`` (or ``Sensitivity(model)``) returns it for a multiclass
    model.  Changes (:meth:`add`, :meth:`remove`, :meth:`relabel`, :meth:`reweight`, :meth:`undo`,
    :meth:`reset`) are applied to each class's binary :class:`Sensitivity` (:meth:`for_class`);
    queries stack the K answers.  Every bound is the binary one of Theorem 1 of Okumura et al.
    (2015) / Theorem 1 of Sivan et al. (2020) for that class's problem, widened by that class's
    certified solver residual; labels are certified by the argmax rule of :func:`certain_argmax`.

    Parameters
    ----------
    model : fitted deltafit classifier with three or more classes
        Its loss must be squared, logistic or squared hinge.
    C_new : float, "mean", callable or None
        As for :class:`Sensitivity` (the same for every class).
    method : {"auto", "sphere", "exact", "curvature"}, default="auto"
        As for :class:`Sensitivity`.  With ``"exact"`` (squared loss) the K classes share one
        factorisation of the changed problem (their Hessians are the same): one solve with K
        right-hand sides.

    Attributes
    ----------
    n_classes : int
    classes_ : ndarray
        The model's classes (column order of every (n, K) result).
    n_added, n_removed, n_relabeled, n_reweighted, n_new : int
        As for :class:`Sensitivity`.

    Notes
    -----
    Hypothetical samples get the same ids in every class (the model's next free ids), so ids
    returned by :meth:`add` work for :meth:`remove` and :meth:`relabel`.  A kernel model's
    queries evaluate the kernel once per class (K times the cost of a binary query).

    Examples
    --------
    >>> import copy
    >>> import numpy as np
    >>> from sklearn.datasets import load_iris
    >>> from sklearn.preprocessing import StandardScaler
    >>> import deltafit
    >>> X, y = load_iris(return_X_y=True)
    >>> X = StandardScaler().fit_transform(X)
    >>> model = deltafit.LinearClassifier(loss="logistic", C=1.0).fit(X, y)
    >>> s = deltafit.sensitivity(model)
    >>> type(s).__name__, s.n_classes
    ('MulticlassSensitivity', 3)
    >>> _ = s.remove([0, 50, 100])
    >>> lo, hi = s.decision_bounds(X)            # one column per class
    >>> lo.shape
    (150, 3)
    >>> refit = copy.deepcopy(model)
    >>> _ = refit.remove([0, 50, 100])
    >>> d = refit.decision_function(X)
    >>> slack = 1e-6   # the bounds hold for the exact optimum; the update is solved to a tolerance
    >>> bool(np.all((lo - slack <= d) & (d <= hi + slack)))
    True
    """

    def __init__(self, model, C_new=None, *, method="auto"):
        whole = model.problem_
        if not whole.n_classes:
            raise ValueError("MulticlassSensitivity needs a model with three or more classes; "
                             "use deltafit.sensitivity(model)")
        self._model = model
        self.n_classes = int(whole.n_classes)
        self.classes_ = model.classes_
        self._parts = [Sensitivity(model, C_new, problem=whole.for_class(k), method=method)
                       for k in range(self.n_classes)]
        shared = {}  # what the classes' exact regions share: one factorisation, K right sides
        for part in self._parts:
            part._shared = shared

    @property
    def method(self):
        """The region every class answers from (see :attr:`Sensitivity.method`)."""
        return self._parts[0].method

    # ------------------------------------------------------------------- parts
    def _each(self, method, *args, **kwargs):
        """Apply a change to every class; if one class refuses it, the classes that took it
        give it back, so the object is unchanged."""
        done, out = [], None
        try:
            for part in self._parts:
                out = getattr(part, method)(*args, **kwargs)
                done.append(part)
        except BaseException:
            for part in done:
                part.undo()
            raise
        return out

    @property
    def n_relabeled(self):
        return self._parts[0].n_relabeled

    @property
    def n_reweighted(self):
        return self._parts[0].n_reweighted

    @property
    def n_new(self):
        return self._parts[0].n_new

    @property
    def C_new_(self):
        """``C₂`` of the new problems (the same for every class)."""
        return self._parts[0].C_new_

    # ------------------------------------------------------------------ change
    def add(self, X, y, sample_weight=None):
        """Hypothetically add samples (labels among ``classes_``, weights ``sample_weight``,
        default 1); returns their ids.

        See :meth:`Sensitivity.add`.  Every class's problem changes.
        """
        return self._each("add", X, y, sample_weight)

    def remove(self, ids=None, *, X=None, y=None):
        """Hypothetically remove samples; see :meth:`Sensitivity.remove`.  Returns self."""
        self._each("remove", ids, X=X, y=y)
        return self

    def relabel(self, ids, y, *, X=None, y_old=None):
        """Hypothetically relabel samples; see :meth:`Sensitivity.relabel`.

        A relabel from class a to class b changes the problems of classes a and b only.
        Returns self.
        """
        self._each("relabel", ids, y, X=X, y_old=y_old)
        return self

    def reweight(self, ids, sample_weight, *, X=None, y=None):
        """Hypothetically give samples new weights; see :meth:`Sensitivity.reweight`.

        A sample's weight multiplies its term in every class's problem, so every class's ball
        changes.  Returns self.
        """
        self._each("reweight", ids, sample_weight, X=X, y=y)
        return self

    def undo(self):
        """Revert the last change (every class).  Returns self."""
        self._parts[0].undo()  # raises "nothing to undo" before any class changes
        for part in self._parts[1:]:
            part.undo()
        return self

    def reset(self):
        """Revert every pending change.  Returns self."""
        for part in self._parts:
            part.reset()
        return self

    # ----------------------------------------------------------------- queries
    def sphere(self):
        """The K balls (list of :class:`~deltafit.sensitivity.Sphere`, class order)."""
        return [p.sphere() for p in self._parts]

    def tightness(self, X):
        """``hi − lo`` of :meth:`decision_bounds`, shape (n_samples, K)."""
        return self._stacked("tightness", X)

    def predict_certain(self, X):
        """Labels of the new model where the bounds decide its argmax.

        Returns
        -------
        labels : ndarray of shape (n_samples,)
            The new model's label where ``certain``; elsewhere the argmax of the balls'
            centers (a guess, not a guarantee).
        certain : ndarray of bool
            The top class's lower bound exceeds every other class's upper bound
            (:func:`certain_argmax`).
        """
        parts = [p._center_bounds(X) for p in self._parts]
        s = np.column_stack([c for c, _, _ in parts])
        _, certain = certain_argmax(np.column_stack([lo for _, lo, _ in parts]),
                                    np.column_stack([hi for _, _, hi in parts]))
        return self.classes_[np.argmax(s, axis=1)], certain

    def coef_bounds(self):
        """Bounds of every coefficient of the new model, shaped like ``coef_`` (K, p)
        (linear models; Corollary 2 of Okumura et al. (2015) per class)."""
        b = [p.coef_bounds() for p in self._parts]
        return np.vstack([lo for lo, _ in b]), np.vstack([hi for _, hi in b])

    def intercept_bounds(self):
        """Bounds of the new model's ``intercept_``, shape (K,) (linear models)."""
        b = [p.intercept_bounds() for p in self._parts]
        return np.concatenate([lo for lo, _ in b]), np.concatenate([hi for _, hi in b])

    def norm_change_bound(self, q=2):
        """Upper bound of ``‖coef_k,new − coef_k,old‖_q`` for every class k, shape (K,)
        (linear models; Corollary 3 of Okumura et al. (2015) per class)."""
        return np.array([p.norm_change_bound(q) for p in self._parts])

    def __repr__(self):
        return (f"MulticlassSensitivity({type(self._model).__name__}, "
                f"n_classes={self.n_classes}, added={self.n_added}, removed={self.n_removed}, "
                f"relabeled={self.n_relabeled})")
