"""What-if objects: certified bounds on the model retrained after a hypothetical data change.

Let β₁ minimise ``P₁(β) = C₁ Σ_{D₁} w_i ℓ_i(β) + ½‖β‖²`` and β₂ minimise
``P₂(β) = C₂ Σ_{D₂} w'_i ℓ_i(β) + ½‖β‖²`` with ``D₂ = D₁ ∖ R ∪ A`` and sample weights
``w`` (``w'`` after a reweight; 1 unless given).  ``P₂`` is 1-strongly convex, so β₂ lies in
the ball of center ``β₁ − r`` and radius ``‖r‖``, ``r = ½ ∇P₂(β₁)``.  With the optimality of
β₁,

    r = ½ (1 − C₂/C₁) β₁ + (C₂/2) Δg,
    Δg = Σ_A w_i ∇ℓ_i(β₁) − Σ_R w_i ∇ℓ_i(β₁) + Σ_{reweighted} (w'_i − w_i) ∇ℓ_i(β₁)

(Sivan et al., "Incremental sensitivity analysis for kernelized models", Theorem 1 and eq. 5;
Okumura et al., "Quick sensitivity analysis for incremental data modification and its application
to leave-one-out CV in linear classification problems", Theorem 1 with C = 1/(λn)), which costs
only the gradients of the changed samples.  A relabel is a removal of (x, y_old) and an addition of
(x, y_new), both with the sample's weight; a reweight ``w → w'`` changes the data term by
``(w' − w) ℓ_i``, linear in the weights, so it is the same kind of change (a weight-2 sample is
two copies: removing it moves the ball exactly as removing both copies).  Since β₁ is computed
to a tolerance, the radius is widened by the model's certified solver residual.  The ball is
computed by :mod:`deltafit.sensitivity.regions._ball`; the changed samples and Δg are kept by
:class:`~deltafit.sensitivity._pending.PendingChange` (store: :mod:`deltafit.sensitivity._changes`).

The queries answer from a *region* of the pending change (``method=``; built on first use, kept
until the next change): a :class:`~deltafit.sensitivity.regions.Region` registered by name in
:data:`~deltafit.sensitivity.regions.REGIONS` — the ball above (``"sphere"``), the exact
retrained model of the squared loss (``"exact"``) or the curvature-aware region of the logistic
and squared-hinge losses (``"curvature"``); :meth:`Sensitivity.sphere` is always the ball.

A classifier with K ≥ 3 classes solves K binary problems over the same samples (class k = +1,
the rest = −1, the same C; :mod:`deltafit._states._one_vs_rest`).  A data change is a data
change of each of them, so each class's retrained solution lies in its own region, computed by
the binary :class:`Sensitivity` on the class's view ``model.problem_.for_class(k)``
(:class:`MulticlassSensitivity`).  The retrained model's decision values lie in the product of
the K intervals; its label, the argmax, is certain when the top class's lower bound exceeds
every other class's upper bound (:func:`~deltafit.sensitivity.certain_argmax`).  An addition or
a removal changes every class's problem; a relabel from class a to class b changes the targets
of classes a and b only — for every other class the sample's coded target, hence its
coefficient in Δg, is unchanged, and that class's ball keeps radius 0 plus the solver
allowance.  :func:`for_model` makes the binary or the multiclass object, as the model needs.
"""

from __future__ import annotations

import numbers
from collections.abc import Callable
from functools import partial
from typing import TYPE_CHECKING, Any, TypeVar

import numpy as np
from numpy.typing import ArrayLike

from deltafit._dask import _sensitivity_rows as _dask_rows
from deltafit.sensitivity._model_access import check_model, n_classes
from deltafit.sensitivity._model_access import problem as model_problem
from deltafit.sensitivity._pending import PendingChange
from deltafit.sensitivity._per_class import PerClass, certain_argmax
from deltafit.sensitivity.regions import _ball
from deltafit.sensitivity.regions._registry import (
    FALLBACK,
    METHODS,
    build_region,
    region_class,
    resolve_method,
)
from deltafit.utils._validation import check_feature_names

if TYPE_CHECKING:
    import scipy.sparse as sp

    from deltafit.sensitivity.regions._sphere import Sphere

_M = TypeVar("_M", bound="MulticlassSensitivity")

__all__ = ["METHODS", "MulticlassSensitivity", "Sensitivity", "for_model", "resolve_method"]


def for_model(
    model: Any, C_new: float | str | Callable[[int], float] | None = None, *, method: str = "auto"
) -> Sensitivity | MulticlassSensitivity:
    """The what-if object of a fitted deltafit estimator: a :class:`MulticlassSensitivity`
    for a classifier with K ≥ 3 classes (one binary what-if per one-vs-rest class), else a
    :class:`Sensitivity`.

    The factory behind ``deltafit.sensitivity(model)`` and ``Sensitivity(model)`` (see
    :meth:`Sensitivity.__new__`).

    Parameters
    ----------
    model : fitted deltafit estimator
    C_new : float, "mean", callable or None
    method : {"auto", "sphere", "exact", "curvature"}, default="auto"
        As for :class:`Sensitivity`.

    Returns
    -------
    Sensitivity or MulticlassSensitivity

    Examples
    --------
    >>> from sklearn.datasets import load_iris
    >>> import deltafit
    >>> from deltafit.sensitivity import for_model
    >>> X, y = load_iris(return_X_y=True)
    >>> type(for_model(deltafit.LinearClassifier().fit(X, y))).__name__
    'MulticlassSensitivity'
    >>> type(for_model(deltafit.LinearClassifier().fit(X[:100], y[:100]))).__name__
    'Sensitivity'
    """
    if n_classes(model):
        return MulticlassSensitivity(model, C_new=C_new, method=method)
    # the model's view, checked as Sensitivity(model) checks it, made once (not per step)
    return Sensitivity(model, C_new=C_new, problem=model_problem(model), method=method)


class Sensitivity(PendingChange):
    """What-if object: guaranteed bounds on the model retrained after a data change.

    Made by ``deltafit.sensitivity(model, C_new=None)``.  Changes (:meth:`add`,
    :meth:`remove`, :meth:`relabel`, :meth:`reweight`) are hypothetical: the model is not
    touched, nothing is retrained, and each change costs the gradients of the changed samples
    only — O(p) per sample for a linear model, ``O((n_old + |A|) d)`` for a kernel model (Sivan
    et al. §3.3).
    Queries (:meth:`decision_bounds`, :meth:`predict_certain`, :meth:`distance_bound`,
    :meth:`coef_bounds`, :meth:`norm_change_bound`, :meth:`tightness`) hold for the exact
    optimum of the canonical problem (ARCHITECTURE.md, "The problem") on the changed data.

    Parameters
    ----------
    model : fitted deltafit estimator
        Any of the four estimators with a squared, logistic or squared-hinge loss.
    C_new : float, "mean", callable or None
        ``C`` of the new problem (Theorem 1 of Sivan et al. (2020), ``C₂ ≠ C₁``).  None keeps the
        model's C; ``"mean"`` keeps ``C · n`` fixed (the mean-loss objective of Okumura et al.,
        ``C = 1/(λ n)``); a callable is called with the new number of samples.
    method : {"auto", "sphere", "exact", "curvature"}, default="auto"
        What the queries answer from.  ``"sphere"``: the ball of Theorem 1 of Okumura et al. (2015)
        / Theorem 1 of Sivan et al. (2020) (any covered loss; the published certificate).
        ``"exact"`` (squared loss only): the retrained model itself, computed from the stored
        factorisation without changing the model (:mod:`~deltafit.sensitivity.regions._exact`:
        Woodbury / Schur complement on the tracked inverse, O(k·p²) for k changed samples of a
        linear model, O(n·k + k³) plus O(n²) for the certificate of a kernel model); its intervals
        are ``center ± tol`` with ``tol`` a certified bound of the floating-point error (rounding
        level).  ``"curvature"`` (logistic, squared hinge): the curvature-aware region.
        ``"auto"``: ``"exact"`` for the squared loss, ``"curvature"`` for the others.
        :meth:`sphere` is the ball whatever the method.
    problem : deltafit.models.FittedProblem, optional
        The binary problem to bound: ``model.problem_.for_class(k)``, one class's one-vs-rest
        problem of a multiclass model (labels given to :meth:`add` and :meth:`relabel` are
        then the model's classes, coded ±1 for class k).  Default: the model's own problem.
        ``Sensitivity(model)`` of a model with three or more classes returns a
        :class:`~deltafit.sensitivity.MulticlassSensitivity`, which holds one such object per
        class.

    Attributes
    ----------
    n_added, n_removed, n_relabeled, n_new : int
        Samples added / removed / relabelled by the pending changes, and the new sample count.
    n_reweighted : int
        Samples of both D₁ and D₂ whose weight the pending changes make different.

    Notes on weights: a model fitted with ``sample_weight`` is bounded for its weighted problem
    ``C Σ w_i ℓ_i + ½‖β‖²``; every sample's coefficient in Δg is ``w_i ℓ'_i`` (its current
    weight for removals and relabels, the given ``sample_weight`` for additions).

    Notes
    -----
    Sample ids: model samples keep their ids; hypothetical additions get ids from the model's
    next free id upwards (the ids a real ``model.add`` would give them, if made in the same
    order) and can be removed or relabelled like any other sample.  If the model is fitted or
    updated after this object is made, every method raises ValueError.

    Examples
    --------
    >>> import copy
    >>> import numpy as np
    >>> from sklearn.datasets import load_breast_cancer
    >>> from sklearn.preprocessing import StandardScaler
    >>> import deltafit
    >>> X, y = load_breast_cancer(return_X_y=True)
    >>> X = StandardScaler().fit_transform(X)
    >>> model = deltafit.LinearClassifier(loss="logistic", C=0.1).fit(X, y)
    >>> s = deltafit.sensitivity(model)          # a Sensitivity; nothing is retrained
    >>> _ = s.remove([0, 1, 2])
    >>> lo, hi = s.decision_bounds(X)
    >>> labels, certain = s.predict_certain(X)
    >>> refit = copy.deepcopy(model)
    >>> _ = refit.remove([0, 1, 2])                # the exact update, for comparison
    >>> d = refit.decision_function(X)
    >>> slack = 1e-6   # the bounds hold for the exact optimum; the update is solved to a tolerance
    >>> bool(np.all((lo - slack <= d) & (d <= hi + slack)))
    True
    >>> bool(np.all(labels[certain] == refit.predict(X)[certain]))
    True
    """

    def __new__(cls, model=None, C_new=None, *, problem=None, method="auto"):
        """``Sensitivity(model)`` of a model with K ≥ 3 classes is :func:`for_model`'s
        :class:`MulticlassSensitivity` (its K one-vs-rest problems); every other call makes a
        binary what-if object (subclasses, and ``problem=`` a class's view, included)."""
        if cls is Sensitivity and problem is None and n_classes(model):
            return for_model(model, C_new, method=method)
        return super().__new__(cls)

    def __init__(
        self,
        model: Any,
        C_new: float | str | Callable[[int], float] | None = None,
        *,
        problem: Any = None,
        method: str = "auto",
    ) -> None:
        loss = check_model(model if problem is None else problem)
        kind = resolve_method(method, loss)
        super().__init__(model, C_new, problem=problem, loss=loss)
        self._method = kind
        self._shared = None  # parts shared with the other classes' objects (multiclass)
        if method == "auto" and not region_class(kind).auto_applies(self._prob):
            self._method = FALLBACK  # e.g. no rows: the curvature region needs them
        self._coef_shape = (1, -1) if self._prob.classifier else (-1,)

    # ---------------------------------------------------------------- the ball
    def _parts(self):
        """(C₂, ρ = C₂/C₁, c = ½(1 − ρ), ‖r‖, radius)."""
        self._check_model()
        if self._cache is not None:
            return self._cache
        C1, C2 = self._C1, self._C2(self.n_new)
        rho = C2 / C1
        r, rnorm = self._store.half_gradient(C1, C2)
        self._r = r
        parts = (
            C2,
            rho,
            0.5 * (1.0 - rho),
            rnorm,
            _ball.certified_radius(rnorm, C1=C1, C2=C2, residual=self._eps),
        )
        if not callable(self._c_new_spec) or isinstance(self._c_new_spec, str):
            self._cache = parts  # a user's callable is asked again at every query
        return parts

    @property
    def radius(self) -> float:
        """Radius of the ball that contains the new optimum (:meth:`sphere`, whatever the
        method)."""
        return self._parts()[4]

    @property
    def method(self) -> str:
        """The region the queries answer from: ``"sphere"``, ``"exact"`` or ``"curvature"``
        (``method="auto"`` resolved for the model's loss)."""
        return self._method

    def _region(self):
        """The region of the pending change (built on first use, kept until the next change;
        rebuilt at every query when ``C_new`` is a user's callable)."""
        self._check_model()
        reg = self._reg
        if reg is None:
            reg = build_region(self)
            if not callable(self._c_new_spec) or isinstance(self._c_new_spec, str):
                self._reg = reg
        return reg

    def distance_bound(self) -> float:
        """Upper bound of ``‖β_new − β_old‖`` (RKHS norm for kernel models).

        Sphere: Theorem 1 of Sivan et al. (2020), ``2‖r‖`` plus the old model's certified solver
        residual ``(C₂/C₁)·grad_norm_``; exact: the computed change plus its certified error."""
        return self._region().distance_bound()

    def sphere(self) -> Sphere:
        """The ball as a :class:`~deltafit.sensitivity.Sphere` (primal vector or kernel
        expansion over the training and changed points, Sivan et al. eq. 3)."""
        C2, _, _, _, R = self._parts()
        return self._store.sphere(self._C1, C2, R)

    def _center_bounds(self, X):
        """``(center, lo, hi)`` of the new decision values at validated rows."""
        reg = self._region()
        X = self._rows(X)
        both = getattr(reg, "center_and_bounds", None)
        if both is not None:
            return both(X)
        lo, hi = reg.decision_bounds(X)
        return reg.center_decision(X), lo, hi

    def decision_bounds(self, X: ArrayLike | sp.spmatrix) -> tuple[np.ndarray, np.ndarray]:
        """Guaranteed bounds of the new model's ``decision_function`` (regressors: ``predict``).

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)
            Query rows.

        Returns
        -------
        lo, hi : ndarray of shape (n_samples,)
            ``lo ≤ ⟨Φ(x), β_new⟩ ≤ hi``: Sivan et al. Lemma 1, eq. 7, Okumura et al. eq. 10
            (sphere); the retrained model's value ± its certified rounding error (exact).
        """
        reg = self._region()
        if _dask_rows.is_dask(X):  # lazy: one task per row block
            check_feature_names(self._model, X)  # a dask DataFrame's columns, once
            return _dask_rows.lazy_decision_bounds(
                reg.decision_bounds, X, partial(self._rows, names=False)
            )
        return reg.decision_bounds(self._rows(X))

    def tightness(self, X: ArrayLike | sp.spmatrix) -> np.ndarray:
        """``hi − lo`` of :meth:`decision_bounds` (sphere: ``2 ‖Φ(x)‖ R``, Okumura et al.
        eq. 11)."""
        reg = self._region()
        X = self._rows(X)
        own = getattr(reg, "tightness", None)
        if own is not None:
            return own(X)
        lo, hi = reg.decision_bounds(X)
        return hi - lo

    def predict_certain(self, X: ArrayLike | sp.spmatrix) -> tuple[np.ndarray, np.ndarray]:
        """Labels of the new model where the bounds decide them.

        Corollary 4 of Okumura et al. (2015).

        Returns
        -------
        labels : ndarray of shape (n_samples,)
            The new model's label where ``certain``; elsewhere the label of the region's
            center (a guess, not a guarantee).
        certain : ndarray of bool
            ``lo > 0`` (label ``classes_[1]``) or ``hi ≤ 0`` (``classes_[0]``, as ``predict``
            maps a zero score).
        """
        if not self._prob.classifier:
            raise ValueError("predict_certain needs a classifier; use decision_bounds")
        s, lo, hi = self._center_bounds(X)
        certain = (lo > 0) | (hi <= 0)
        return self._prob.decode_targets(s), certain

    # ------------------------------------------------------- linear models only
    def _linear(self, what):
        if self._kernel:
            raise ValueError(
                f"{what} needs a linear model (explicit coefficients); for kernel models use "
                "decision_bounds or sphere().score_bounds"
            )
        return self._region()

    def coef_bounds(self) -> tuple[np.ndarray, np.ndarray]:
        """Bounds of every coefficient of the new model (Corollary 2 of Okumura et al. (2015) for
        the sphere; the retrained coefficients ± their certified error for the exact method).

        Returns
        -------
        lo, hi : ndarray shaped like ``coef_``
        """
        lo, hi = self._linear("coef_bounds").coef_bounds()
        if self._store.const is not None:
            lo, hi = lo[:-1], hi[:-1]
        return lo.reshape(self._coef_shape), hi.reshape(self._coef_shape)

    def intercept_bounds(self) -> tuple[np.ndarray | float, np.ndarray | float]:
        """Bounds of the new model's ``intercept_`` (``intercept_scaling`` times the last
        coordinate; exactly 0 without an intercept)."""
        reg = self._linear("intercept_bounds")
        shape = (1,) if self._prob.classifier else ()
        s = self._store.const
        if s is None:
            z = np.zeros(shape) if shape else 0.0
            return z, z
        lo, hi = reg.coef_bounds()
        lo, hi = s * lo[-1], s * hi[-1]
        if shape:
            return np.full(shape, lo), np.full(shape, hi)
        return lo, hi

    def norm_change_bound(self, q: float = 2) -> float:
        """Upper bound of ``‖coef_new − coef_old‖_q`` (Corollary 3 of Okumura et al. (2015)).

        Corollary 3 sums ``max(β_old,j − L_j, U_j − β_old,j)^q`` over the coefficients (for the
        sphere ``(|r_j| + R)^q``) with ``[L_j, U_j]`` of :meth:`coef_bounds`; the result is
        also capped by the distance bound (``‖·‖_q ≤ ‖·‖₂`` for q ≥ 2,
        ``≤ d^{1/q − 1/2} ‖·‖₂`` below), whichever is smaller.

        Parameters
        ----------
        q : float > 0 or numpy.inf, default=2
        """
        reg = self._linear("norm_change_bound")
        if isinstance(q, bool) or not isinstance(q, numbers.Real) or np.isnan(q) or q <= 0:
            raise ValueError(f"q must be a positive number or numpy.inf, got {q!r}")
        if reg.kind == "sphere":
            v = np.abs(reg.r) + reg.radius
        else:
            lo, hi = reg.coef_bounds()
            b = self._store.beta
            v = np.maximum(b - lo, hi - b)
        if self._store.const is not None:
            v = v[:-1]
        d = v.size
        dist = reg.distance_bound()
        if np.isinf(q):
            return float(min(v.max(initial=0.0), dist))
        cor3 = float(np.sum(v**q) ** (1.0 / q))
        cap = dist if q >= 2 else dist * d ** (1.0 / q - 0.5)
        return min(cor3, cap)

    def __repr__(self):
        return (
            f"Sensitivity({type(self._model).__name__}, added={self.n_added}, "
            f"removed={self.n_removed}, relabeled={self.n_relabeled}, "
            f"reweighted={self.n_reweighted})"
        )


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

    def __init__(
        self,
        model: Any,
        C_new: float | str | Callable[[int], float] | None = None,
        *,
        method: str = "auto",
    ) -> None:
        whole = model.problem_
        if not whole.n_classes:
            raise ValueError(
                "MulticlassSensitivity needs a model with three or more classes; "
                "use deltafit.sensitivity(model)"
            )
        self._model = model
        self.n_classes = int(whole.n_classes)
        self.classes_ = model.classes_
        self._parts = [
            Sensitivity(model, C_new, problem=whole.for_class(k), method=method)
            for k in range(self.n_classes)
        ]
        shared: dict = {}  # what the classes' exact regions share: one factorisation, K right sides
        for part in self._parts:
            part._shared = shared

    @property
    def method(self) -> str:
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
    def n_relabeled(self) -> int:
        return self._parts[0].n_relabeled

    @property
    def n_reweighted(self) -> int:
        return self._parts[0].n_reweighted

    @property
    def n_new(self) -> int:
        return self._parts[0].n_new

    @property
    def C_new_(self) -> float:
        """``C₂`` of the new problems (the same for every class)."""
        return self._parts[0].C_new_

    # ------------------------------------------------------------------ change
    def add(
        self, X: ArrayLike | sp.spmatrix, y: ArrayLike, sample_weight: ArrayLike | None = None
    ) -> np.ndarray:
        """Hypothetically add samples (labels among ``classes_``, weights ``sample_weight``,
        default 1); returns their ids.

        See :meth:`Sensitivity.add`.  Every class's problem changes.
        """
        return self._each("add", X, y, sample_weight)

    def remove(
        self: _M,
        ids: ArrayLike | None = None,
        *,
        X: ArrayLike | None = None,
        y: ArrayLike | None = None,
    ) -> _M:
        """Hypothetically remove samples; see :meth:`Sensitivity.remove`.  Returns self."""
        self._each("remove", ids, X=X, y=y)
        return self

    def relabel(
        self: _M,
        ids: ArrayLike | None,
        y: ArrayLike,
        *,
        X: ArrayLike | None = None,
        y_old: ArrayLike | None = None,
    ) -> _M:
        """Hypothetically relabel samples; see :meth:`Sensitivity.relabel`.

        A relabel from class a to class b changes the problems of classes a and b only.
        Returns self.
        """
        self._each("relabel", ids, y, X=X, y_old=y_old)
        return self

    def reweight(
        self: _M,
        ids: ArrayLike | None,
        sample_weight: ArrayLike,
        *,
        X: ArrayLike | None = None,
        y: ArrayLike | None = None,
    ) -> _M:
        """Hypothetically give samples new weights; see :meth:`Sensitivity.reweight`.

        A sample's weight multiplies its term in every class's problem, so every class's ball
        changes.  Returns self.
        """
        self._each("reweight", ids, sample_weight, X=X, y=y)
        return self

    def undo(self: _M) -> _M:
        """Revert the last change (every class).  Returns self."""
        self._parts[0].undo()  # raises "nothing to undo" before any class changes
        for part in self._parts[1:]:
            part.undo()
        return self

    def reset(self: _M) -> _M:
        """Revert every pending change.  Returns self."""
        for part in self._parts:
            part.reset()
        return self

    # ----------------------------------------------------------------- queries
    def sphere(self) -> list[Sphere]:
        """The K balls (list of :class:`~deltafit.sensitivity.Sphere`, class order)."""
        return [p.sphere() for p in self._parts]

    def tightness(self, X: ArrayLike | sp.spmatrix) -> np.ndarray:
        """``hi − lo`` of :meth:`decision_bounds`, shape (n_samples, K)."""
        return self._stacked("tightness", X)

    def predict_certain(self, X: ArrayLike | sp.spmatrix) -> tuple[np.ndarray, np.ndarray]:
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
        _, certain = certain_argmax(
            np.column_stack([lo for _, lo, _ in parts]), np.column_stack([hi for _, _, hi in parts])
        )
        return self.classes_[np.argmax(s, axis=1)], certain

    def coef_bounds(self) -> tuple[np.ndarray, np.ndarray]:
        """Bounds of every coefficient of the new model, shaped like ``coef_`` (K, p)
        (linear models; Corollary 2 of Okumura et al. (2015) per class)."""
        b = [p.coef_bounds() for p in self._parts]
        return np.vstack([lo for lo, _ in b]), np.vstack([hi for _, hi in b])

    def intercept_bounds(self) -> tuple[np.ndarray, np.ndarray]:
        """Bounds of the new model's ``intercept_``, shape (K,) (linear models)."""
        b = [p.intercept_bounds() for p in self._parts]
        return np.concatenate([lo for lo, _ in b]), np.concatenate([hi for _, hi in b])

    def norm_change_bound(self, q: float = 2) -> np.ndarray:
        """Upper bound of ``‖coef_k,new − coef_k,old‖_q`` for every class k, shape (K,)
        (linear models; Corollary 3 of Okumura et al. (2015) per class)."""
        return np.array([p.norm_change_bound(q) for p in self._parts])

    def __repr__(self):
        return (
            f"MulticlassSensitivity({type(self._model).__name__}, "
            f"n_classes={self.n_classes}, added={self.n_added}, removed={self.n_removed}, "
            f"relabeled={self.n_relabeled})"
        )
