"""The ball around the retrained model, kept up to date one change at a time (Sivan et al. §3.3).

For a fixed ``C = C₁ = C₂`` the ball of Theorem 1 has center ``m = β₁ − r`` and radius ``‖r‖``
with ``r = (C/2) Σ_{A∪R} γ_i Φ(x_i)``, ``γ_i = w_i ℓ'(y_i, z_i)`` for an added sample and
``−w_i ℓ'(y_i, z_i)`` for a removed one (``w_i`` its sample weight, 1 unless given),
``z_i = ⟨Φ(x_i), β₁⟩`` (eqs. 4, 9, 10).  Adding an entry i
to ``A ∪ R`` changes ``‖r‖²`` by ``K_i = (C²/4)(2 γ_i Σ_{j≠i} γ_j k(x_i, x_j) + γ_i² k(x_i, x_i))``
and taking it out subtracts the same amount, so each change costs one kernel row over the
entries, ``O((n₁ + |A| + |R|) d)`` (linear models keep ``Σ γ_i Φ(x_i)`` as a vector: O(p)).
The entries live in the store of :mod:`deltafit.sensitivity._changes` and the ball is
:mod:`deltafit.sensitivity.regions._ball`'s, both shared with
:class:`~deltafit.sensitivity.Sensitivity`.
Unlike :class:`~deltafit.sensitivity.Sensitivity` (any
change, C₂ ≠ C₁, undo), this object also lets entries *leave* ``A ∪ R`` and reuses their room:
its memory is bounded by the largest ``|A| + |R|`` it ever held, which is what a sliding window
(KDR, :class:`deltafit.stream.KDR`) and an active learner (:class:`deltafit.active.FGAL`) need.

A model with K ≥ 3 classes (one-vs-rest) gets one ball per class over the same entries
(:class:`MulticlassIncrementalSphere`, returned by ``IncrementalSphere(model)``): class k's ball
is the one above for the binary problem ``model.problem_.for_class(k)`` (targets +1 for class
k, −1 for the rest), as :class:`~deltafit.sensitivity.MulticlassSensitivity` does for
:class:`~deltafit.sensitivity.Sensitivity`; a label is certain when the top class's lower
bound exceeds every other class's upper bound
(:func:`~deltafit.sensitivity.certain_argmax`).

``region="curvature"`` answers the bound queries (:meth:`IncrementalSphere.decision_bounds`,
the tracked points' bounds, certain labels, :meth:`IncrementalSphere.distance_bound`) from the
tighter region of the current ``A ∪ R`` change that
:class:`~deltafit.sensitivity.Sensitivity` builds with ``method="auto"`` — the curvature-aware
ellipsoid and Newton ball of the logistic and squared-hinge losses
(:mod:`deltafit.sensitivity.regions._curvature`; a generalisation of Sivan et al. Theorem 1 with the
loss's secant slopes), the exact what-if of the squared loss — intersected with the ball, so it
is never wider.  That region is rebuilt lazily, at the first query after a change (a what-if
over the ``|A| + |R|`` entries plus the region's own cost, O(n p²) / O(n²)); the changes
themselves, ``‖r‖`` and :attr:`IncrementalSphere.r_norm` keep their O(changed) cost and stay
the ball's (KDR's threshold is defined on the ball's ``‖r‖``).
"""

from __future__ import annotations

from typing import Any, TypeVar

import numpy as np
import scipy.sparse as sp
from numpy.typing import ArrayLike

from deltafit.sensitivity._changes import changes_for
from deltafit.sensitivity._data_change import Sensitivity
from deltafit.sensitivity._model_access import certified_residual, check_model, fitted_C, n_classes
from deltafit.sensitivity._per_class import PerClass, certain_argmax
from deltafit.sensitivity.regions import _ball
from deltafit.sensitivity.regions._registry import resolve_method
from deltafit.solvers import check_sample_weight
from deltafit.utils._validation import check_ids, check_rows

_I = TypeVar("_I", bound="IncrementalSphere")
_MI = TypeVar("_MI", bound="MulticlassIncrementalSphere")

__all__ = ["IncrementalSphere", "MulticlassIncrementalSphere", "REGIONS"]

#: what the bound queries answer from (``region=``)
REGIONS = ("sphere", "curvature")


def _check_region(region):
    if not isinstance(region, str) or region not in REGIONS:
        raise ValueError(f"region must be one of {list(REGIONS)}, got {region!r}")
    return region


class IncrementalSphere:
    """Sivan et al.'s incremental ball (§3.3): bounds on the model after a growing and
    shrinking set of additions ``A`` and removals ``R``, updated per change.

    Parameters
    ----------
    model : fitted deltafit estimator
        Its solution is β₁; any of the four estimators with a squared, logistic or
        squared-hinge loss (linear models with ``keep_data=True`` to remove samples).
    capacity : int, default=64
        Initial room for entries (grown when needed, never shrunk).
    problem : deltafit.models.FittedProblem, optional
        The binary problem the ball is about (default ``model.problem_``); a multiclass
        model's class view ``model.problem_.for_class(k)``.  Without it, a model with three or
        more classes gets a :class:`MulticlassIncrementalSphere`.
    region : {"sphere", "curvature"}, default="sphere"
        What the bound queries answer from.  ``"sphere"``: the ball of Sivan et al. Theorem 1
        (§3.3), every query O(n_X) — the paper's object, unchanged.  ``"curvature"``: the
        tighter region of the current ``A ∪ R`` change (the curvature-aware region of the
        logistic and squared-hinge losses, the exact what-if of the squared loss; see
        :class:`~deltafit.sensitivity.Sensitivity`, ``method="auto"``), intersected with the
        ball; built at the first query after a change.  Either way :attr:`r_norm` and
        :attr:`radius` are the ball's and a change costs O(changed) (the entries' raw rows
        and labels are kept besides, to rebuild the region).  The default is the ball
        because its queries are cheap and tracked bounds move with every change; ask for
        ``"curvature"`` when the bounds (certain labels, a ranking by the centre) matter more
        than the cost of a query.

    Attributes
    ----------
    C : float
        The model's C, kept for the new problem (``C₁ = C₂``, the case of §3.3).
    n_added, n_removed : int
        Current sizes of ``A`` and ``R``.
    region : str
        ``"sphere"`` or ``"curvature"``, as given.

    Notes
    -----
    Every change returns integer *keys* naming its entries; :meth:`discard` takes entries out of
    ``A ∪ R`` again (an added sample leaves ``A``, a removed model sample goes back into the
    training set).  The running ``‖r‖²`` (kernel models; the running ``Σ γ_i Φ(x_i)`` of linear
    models) is recomputed exactly from the entries when an update cancels most of it and at
    least once per ``max(64, n_entries)`` changed entries, so its error stays at rounding level
    on arbitrarily long streams.  Points given to
    :meth:`track` have their bounds kept up to date with every change (FGAL's pool).

    The radius is widened by the model's certified solver residual (``grad_norm_``) like
    :class:`~deltafit.sensitivity.Sensitivity`, so the bounds hold for the stored β₁ as it is.

    Examples
    --------
    >>> import copy
    >>> import numpy as np
    >>> from sklearn.datasets import load_breast_cancer
    >>> from sklearn.preprocessing import StandardScaler
    >>> import deltafit
    >>> from deltafit.sensitivity import IncrementalSphere
    >>> X, y = load_breast_cancer(return_X_y=True)
    >>> X = StandardScaler().fit_transform(X)
    >>> model = deltafit.LinearClassifier(loss="squared_hinge", C=0.1).fit(X[:500], y[:500])
    >>> ball = IncrementalSphere(model)
    >>> keys = ball.add(X[500:520], y[500:520])  # a window slides: 20 samples in ...
    >>> keys = ball.remove(np.arange(20))        # ... the 20 oldest out
    >>> ball.n_added, ball.n_removed
    (20, 20)
    >>> lo, hi = ball.decision_bounds(X)
    >>> refit = copy.deepcopy(model)
    >>> _ = refit.add(X[500:520], y[500:520])
    >>> _ = refit.remove(np.arange(20))
    >>> d = refit.decision_function(X)
    >>> bool(np.all((lo <= d) & (d <= hi)))
    True

    The curvature region of the same change is never wider than the ball, and much narrower:

    >>> tight = IncrementalSphere(model, region="curvature")
    >>> keys = tight.add(X[500:520], y[500:520])
    >>> keys = tight.remove(np.arange(20))
    >>> lo_c, hi_c = tight.decision_bounds(X)
    >>> slack = refit.grad_norm_ * np.linalg.norm(
    ...     refit.problem_.features(X), axis=1)      # the refit is solved to a tolerance
    >>> bool(np.all((lo_c - slack <= d) & (d <= hi_c + slack)))
    True
    >>> bool(np.all(hi_c - lo_c <= hi - lo)), bool(np.median((hi_c - lo_c) / (hi - lo)) < 0.5)
    (True, True)
    """

    def __new__(cls, model=None, *, capacity=64, problem=None, region="sphere"):
        # a model with K ≥ 3 classes gets one ball per one-vs-rest class
        if cls is IncrementalSphere and problem is None and n_classes(model):
            return MulticlassIncrementalSphere(model, capacity=capacity, region=region)
        return super().__new__(cls)

    def __init__(
        self, model: Any, *, capacity: int = 64, problem: Any = None, region: str = "sphere"
    ) -> None:
        self._loss = check_model(model if problem is None else problem, "an incremental sphere")
        _check_capacity(capacity)
        self.region = _check_region(region)
        self._model = model
        self._prob = prob = model.problem_ if problem is None else problem
        self.C = fitted_C(prob)
        self._eps = certified_residual(prob)
        # the entries of A ∪ R: points, scores under β₁, coefficients γ (Sivan et al. eq. 4)
        self._store = changes_for(prob, int(capacity))
        self._keys: dict[int, int] = {}  # key -> slot
        self._model_id = np.full(int(capacity), -1, dtype=np.int64)  # the model sample of R
        self._in_R: dict[int, int] = {}  # model id -> key
        self._next_key = 0
        self.n_added = 0
        self.n_removed = 0
        self._T: list | None = None  # tracked points: (pts, z, ⟨Φ, Δg⟩, ‖Φ‖)
        if self.region == "curvature":
            # what the region is rebuilt from: the added samples as given (raw rows, labels,
            # weights; by slot), the tracked points' raw rows, the last region and its version
            self._method = resolve_method("auto", self._loss)
            self._raw = [None] * int(capacity)
            self._T_raw: Any = None
            self._version = 0
            self._cache = None  # (version, what-if, tracked (center, lo, hi))

    # -------------------------------------------------------------- helpers
    @property
    def problem(self) -> Any:
        """The :class:`~deltafit.models.FittedProblem` of the model the sphere is about."""
        return self._prob

    def _check_model(self):
        if not self._prob.is_current():
            raise ValueError(
                "the model was fitted or updated after this sphere was made; make a new one"
            )

    def _points(self, X):
        model = self._model
        return self._store.map(
            check_rows(X, model.n_features_in_, "X", type(model).__name__, sparse="dense")
        )

    def _insert(self, P, z, gamma, src=None, model_ids=None):
        """Entries with points ``P``, scores ``z`` and coefficients ``gamma`` join ``A ∪ R``;
        their keys."""
        store = self._store
        slots = store.insert(P, z, gamma, src)
        cap = store.capacity
        if self._model_id.shape[0] < cap:
            self._model_id = _grown(self._model_id, cap)
        k = slots.size
        keys = np.arange(self._next_key, self._next_key + k, dtype=np.int64)
        self._next_key += k
        self._keys.update(zip(keys.tolist(), slots.tolist()))
        if model_ids is not None:
            self._model_id[slots] = model_ids
            self._in_R.update(zip(model_ids.tolist(), keys.tolist()))
        if self._T is not None:
            self._T[2] += store.kernel(self._T[0], slots) @ gamma
        if self.region == "curvature":
            self._version += 1
        return keys

    # ---------------------------------------------------------------- changes
    def add(
        self, X: ArrayLike | sp.spmatrix, y: ArrayLike, sample_weight: ArrayLike | None = None
    ) -> np.ndarray:
        """Add samples to ``A`` (hypothetically: nothing is retrained).

        Parameters
        ----------
        X : array-like of shape (k, n_features)
            Finite rows.
        y : array-like of shape (k,)
            Their labels (for classifiers, among ``classes_``).
        sample_weight : array-like of shape (k,), optional
            Their weights (default 1): ``γ_i = w_i ℓ'(y_i, z_i)``.

        Returns
        -------
        keys : ndarray of int64, shape (k,)
        """
        P, t, z, w = self._checked_add(X, y, sample_weight)
        if self.region == "curvature":
            Xa = check_rows(
                X, self._model.n_features_in_, "X", type(self._model).__name__, sparse="dense"
            )
            return self._add_scored(P, t, z, w, raw=(Xa, np.asarray(y)))
        return self._add_scored(P, t, z, w)

    def _checked_add(self, X, y, sample_weight):
        """The arguments of :meth:`_add_scored` for :meth:`add`, every check done (nothing
        changes)."""
        self._check_model()
        model = self._model
        Xa = check_rows(X, model.n_features_in_, "X", type(model).__name__, sparse="dense")
        t = self._prob.encode_targets(y, what="y")
        if t.shape[0] != Xa.shape[0]:
            raise ValueError(f"X has {Xa.shape[0]} rows but y has {t.shape[0]} labels")
        w = check_sample_weight(sample_weight, Xa.shape[0], self.C)
        P, z = self._store.new_points(Xa)
        self._store.check_new(P, z, t, self._loss)
        return P, t, z, w

    def _add_scored(self, P, t, z, w=None, raw=None):
        """:meth:`add` of mapped, validated points whose scores ``z`` under β₁ are known
        (a stream learner has just predicted them), with weights ``w`` (None: 1).
        ``raw``: the samples as given, ``(X, y)`` (validated rows, labels), which
        ``region="curvature"`` needs to rebuild its region."""
        if self.region == "curvature" and raw is None:
            raise ValueError("region='curvature' needs the added samples' rows and labels")
        gamma = self._loss.d1(t, z)
        keys = self._insert(P, z, gamma if w is None else w * gamma)
        self.n_added += P.shape[0]
        if self.region == "curvature":
            Xr, yr = raw
            if len(self._raw) < self._store.capacity:
                self._raw.extend([None] * (self._store.capacity - len(self._raw)))
            for i, k in enumerate(keys.tolist()):
                self._raw[self._keys[k]] = (Xr[i], yr[i], 1.0 if w is None else float(w[i]))
        return keys

    def remove(self, ids: ArrayLike) -> np.ndarray:
        """Remove model samples (by id) into ``R``.

        Returns
        -------
        keys : ndarray of int64
        """
        self._check_model()
        ids = check_ids(ids, "ids")
        twice = [i for i in ids.tolist() if i in self._in_R]
        if twice:
            raise ValueError(f"samples already removed: {twice[:10]}")
        prob = self._prob
        if not prob.keeps_rows:
            raise ValueError(
                "this model keeps no training rows (keep_data=False); an incremental sphere "
                "needs them to remove samples"
            )
        slots = prob.handles(ids, "ids")
        if prob.n_samples - self.n_removed + self.n_added - ids.size < 1:
            raise ValueError("the change would remove every sample; a model needs at least one")
        P, z, src = self._store.model_points(slots)
        gamma = -self._loss.d1(prob.targets[slots], z)
        w = prob.sample_weights(slots)
        if w is not None:  # a removed sample takes its weighted term out
            gamma *= w
        keys = self._insert(P, z, gamma, src, ids)
        self.n_removed += ids.size
        return keys

    def discard(self, keys: ArrayLike) -> None:
        """Take entries out of ``A ∪ R``: an added sample leaves ``A``, a removed model sample
        returns to the training set.  ``‖r‖²`` loses ``K_i`` (Sivan et al. §3.3)."""
        self._check_model()
        keys = check_ids(keys, "keys")
        unknown = [k for k in keys.tolist() if k not in self._keys]
        if unknown:
            raise ValueError(f"unknown or already discarded keys: {unknown[:10]}")
        slots = np.array([self._keys[k] for k in keys.tolist()], dtype=np.intp)
        store = self._store
        if self._T is not None:
            self._T[2] -= store.kernel(self._T[0], slots) @ store.c[slots]
        mids = self._model_id[slots]
        for k, m in zip(keys.tolist(), mids.tolist()):
            del self._keys[k]
            if m >= 0:
                del self._in_R[m]
        self.n_removed -= int(np.count_nonzero(mids >= 0))
        self.n_added -= int(np.count_nonzero(mids < 0))
        self._model_id[slots] = -1
        store.release(slots)
        if self.region == "curvature":
            for s in slots.tolist():
                self._raw[s] = None
            self._version += 1

    def clear(self) -> None:
        """Empty ``A`` and ``R`` (keeps the tracked points and the room)."""
        self.discard(np.array(list(self._keys), dtype=np.int64))

    # ---------------------------------------------------------------- queries
    @property
    def n_entries(self) -> int:
        """``|A| + |R|``."""
        return self.n_added + self.n_removed

    @property
    def capacity(self) -> int:
        """Room for entries (the memory held is O(capacity²) for kernel models)."""
        return self._store.capacity

    @property
    def r_norm(self) -> float:
        """``‖r‖ = (C/2) sqrt(γᵀ K γ)`` (eq. 9); half the distance bound of Theorem 1."""
        return self._store.half_gradient(self.C, self.C)[1]

    @property
    def radius(self) -> float:
        """Radius of the ball holding the new optimum: ``‖r‖`` plus the model's certified
        solver residual."""
        return _ball.certified_radius(self.r_norm, C1=self.C, C2=self.C, residual=self._eps)

    def distance_bound(self) -> float:
        """Upper bound of ``‖β₂ − β₁‖`` (Theorem 1: ``2‖r‖``, plus the solver residual;
        ``region="curvature"``: the smaller of that and the curvature region's bound)."""
        out = self.r_norm + self.radius
        if self.region == "curvature":
            wi = self._whatif()
            if wi is not None:
                out = min(out, float(wi.distance_bound()))
        return out

    def recompute(self) -> float:
        """``‖r‖`` recomputed from the stored entries (``O(|A∪R|²)``); also resets the running
        sum to it."""
        self._store.recompute()
        return self.r_norm

    def _center(self, z, phi_dg):
        return _ball.center_scores(z, phi_dg, C1=self.C, C2=self.C)

    def center_decision(self, X: ArrayLike | sp.spmatrix) -> np.ndarray:
        """``(U + L)/2 = ⟨Φ(x), β₁⟩ − ⟨Φ(x), r⟩`` (eqs. 7, 10): the new model's decision value
        at the ball's center.  ``region="curvature"``: the curvature region's centre (its
        Newton ball's, else its ellipsoid's; the exact what-if of the squared loss), kept
        inside :meth:`decision_bounds`."""
        return self._center_bounds(X)[0]

    def decision_bounds(self, X: ArrayLike | sp.spmatrix) -> tuple[np.ndarray, np.ndarray]:
        """Guaranteed ``lo ≤ ⟨Φ(x), β₂⟩ ≤ hi`` (Sivan et al. Lemma 1, eq. 7; with
        ``region="curvature"`` intersected with the curvature region's bounds)."""
        _, lo, hi = self._center_bounds(X)
        return lo, hi

    def _center_bounds(self, X):
        self._check_model()
        P = self._points(X)
        s = self._store.center_scores(P, self.C, self.C)
        e = np.sqrt(np.maximum(self._store.sq_norms(P), 0.0)) * self.radius
        if self.region == "curvature":
            return self._tighter(X, s, s - e, s + e)
        return s, s - e, s + e

    # ------------------------------------------------------- the curvature region
    def _whatif(self):
        """The :class:`~deltafit.sensitivity.Sensitivity` of the current ``A ∪ R`` (method
        ``"auto"``: curvature, or exact for the squared loss), rebuilt after each change; None
        while ``A ∪ R`` is empty."""
        self._check_model()
        c = self._cache
        if c is not None and c[0] == self._version:
            return c[1]
        wi = None
        if self._keys:
            wi = Sensitivity(self._model, problem=self._prob, method=self._method)
            slots = np.array(sorted(self._keys.values()), dtype=np.intp)
            mids = self._model_id[slots]
            added = [self._raw[i] for i in slots[mids < 0].tolist()]
            if added:  # first: removing every old sample is allowed once A is in
                w = np.array([a[2] for a in added])
                wi.add(
                    np.stack([a[0] for a in added]),
                    np.array([a[1] for a in added]),
                    sample_weight=None if np.all(w == 1.0) else w,
                )
            if np.any(mids >= 0):
                wi.remove(mids[mids >= 0])
        self._cache = [self._version, wi, None]
        return wi

    def _tighter(self, X, s, lo, hi):
        """The ball's ``(centre, lo, hi)`` at rows X intersected with the what-if's region."""
        wi = self._whatif()
        if wi is None:
            return s, lo, hi
        c, lo2, hi2 = wi._center_bounds(X)
        lo, hi = np.maximum(lo, lo2), np.minimum(hi, hi2)
        return np.minimum(np.maximum(c, lo), hi), lo, hi

    def track(self: _I, X: ArrayLike | sp.spmatrix) -> _I:
        """Keep the bounds of the points ``X`` up to date with every change (O(n_X) kernel
        values per changed sample); read them with :meth:`tracked_center` and
        :meth:`tracked_bounds`.  Replaces earlier tracked points."""
        self._check_model()
        P: Any = self._points(X)
        if P is X:
            P = P.copy()  # type: ignore[union-attr]  # ``is`` narrows P to X's input type
        store = self._store
        self._T = [
            P,
            store.beta_scores(P),
            store.scores(P),
            np.sqrt(np.maximum(store.sq_norms(P), 0.0)),
        ]
        if self.region == "curvature":
            self._T_raw = check_rows(
                X, self._model.n_features_in_, "X", type(self._model).__name__, sparse="dense"
            ).copy()
            if self._cache is not None:
                self._cache[2] = None
        return self

    def _tracked(self, idx):
        if self._T is None:
            raise ValueError("no tracked points; call track(X) first")
        self._check_model()
        P, z, phi_dg, e = self._T
        if idx is None:
            return self._center(z, phi_dg), e
        idx = np.asarray(idx)
        return self._center(z[idx], phi_dg[idx]), e[idx]

    def _tracked_tight(self, idx):
        """``(centre, lo, hi)`` of the tracked points under ``region="curvature"``: every
        tracked point's, computed once per change, then indexed."""
        s, e = self._tracked(None)
        self._whatif()
        c = self._cache
        if c[2] is None:
            e = e * self.radius
            c[2] = self._tighter(self._T_raw, s, s - e, s + e)
        if idx is None:
            return c[2]
        idx = np.asarray(idx)
        return tuple(a[idx] for a in c[2])

    def tracked_center(self, idx: ArrayLike | None = None) -> np.ndarray:
        """:meth:`center_decision` of the tracked points (or those at positions ``idx``)."""
        if self.region == "curvature":
            return self._tracked_tight(idx)[0]
        return self._tracked(idx)[0]

    def tracked_bounds(self, idx: ArrayLike | None = None) -> tuple[np.ndarray, np.ndarray]:
        """:meth:`decision_bounds` of the tracked points (or those at positions ``idx``)."""
        if self.region == "curvature":
            return self._tracked_tight(idx)[1:]
        s, e = self._tracked(idx)
        e = e * self.radius
        return s - e, s + e

    def __repr__(self):
        extra = "" if self.region == "sphere" else f", region={self.region!r}"
        return (
            f"IncrementalSphere({type(self._model).__name__}, added={self.n_added}, "
            f"removed={self.n_removed}, r_norm={self.r_norm:.4g}{extra})"
        )


def _check_capacity(capacity):
    if isinstance(capacity, bool) or not isinstance(capacity, (int, np.integer)) or capacity < 1:
        raise ValueError(f"capacity must be a positive integer, got {capacity!r}")


class MulticlassIncrementalSphere(PerClass):
    """Incremental balls of a model with K ≥ 3 classes: one :class:`IncrementalSphere` per
    one-vs-rest class, changed together (Sivan et al. §3.3 per class).

    ``IncrementalSphere(model)`` returns this object for a multiclass model.  Every change
    (:meth:`add`, :meth:`remove`, :meth:`discard`, :meth:`clear`) goes to each class's ball
    (:meth:`for_class`), whose entries are the same samples with that class's coded targets
    (+1 for class k, −1 for the rest), so their keys agree; queries stack the K answers
    column by column.  Class k's ball is Sivan et al. Theorem 1 for its binary problem
    ``model.problem_.for_class(k)``, widened by that class's certified solver residual.

    Parameters
    ----------
    model : fitted deltafit classifier with three or more classes
        Squared, logistic or squared-hinge loss.
    capacity : int, default=64
    region : {"sphere", "curvature"}, default="sphere"
        Each class's :class:`IncrementalSphere` region (``"curvature"``: the curvature region
        of class k's one-vs-rest problem, intersected with its ball).

    Attributes
    ----------
    C : float
    n_classes : int
    classes_ : ndarray of shape (K,)
        The column order of every (n, K) result.
    n_added, n_removed : int

    Notes
    -----
    Each change and query costs K times the binary one (each class keeps its own store of the
    entries).  A label is certain when the top class's lower bound beats every other class's
    upper bound (:meth:`predict_certain`, :func:`~deltafit.sensitivity.certain_argmax`).

    Examples
    --------
    >>> import copy
    >>> import numpy as np
    >>> from sklearn.datasets import load_iris
    >>> from sklearn.preprocessing import StandardScaler
    >>> import deltafit
    >>> from deltafit.sensitivity import IncrementalSphere
    >>> X, y = load_iris(return_X_y=True)
    >>> X = StandardScaler().fit_transform(X)
    >>> model = deltafit.LinearClassifier(loss="logistic", C=1.0).fit(X[::2], y[::2])
    >>> ball = IncrementalSphere(model)          # K = 3 classes: one ball per class
    >>> type(ball).__name__
    'MulticlassIncrementalSphere'
    >>> keys = ball.add(X[1:20:2], y[1:20:2])
    >>> lo, hi = ball.decision_bounds(X)
    >>> lo.shape
    (150, 3)
    >>> refit = copy.deepcopy(model)
    >>> _ = refit.add(X[1:20:2], y[1:20:2])
    >>> d = refit.decision_function(X)
    >>> bool(np.all((lo <= d) & (d <= hi)))
    True
    >>> labels, certain = ball.predict_certain(X)
    >>> bool(np.all(labels[certain] == refit.predict(X)[certain]))
    True
    """

    def __init__(self, model: Any, *, capacity: int = 64, region: str = "sphere") -> None:
        whole = model.problem_
        if not n_classes(model):
            raise ValueError(
                "MulticlassIncrementalSphere needs a model with three or more "
                "classes; use IncrementalSphere(model)"
            )
        check_model(whole.for_class(0), "an incremental sphere")
        _check_capacity(capacity)
        self.region = _check_region(region)
        self._model = model
        self._prob = whole
        self.n_classes = int(whole.n_classes)
        self.classes_ = model.classes_
        self._parts = [
            IncrementalSphere(model, capacity=capacity, problem=whole.for_class(k), region=region)
            for k in range(self.n_classes)
        ]
        self.C = self._parts[0].C

    @property
    def problem(self) -> Any:
        """The whole model's :class:`~deltafit.models.FittedProblem` (targets: class indices)."""
        return self._prob

    # ---------------------------------------------------------------- changes
    def add(
        self, X: ArrayLike | sp.spmatrix, y: ArrayLike, sample_weight: ArrayLike | None = None
    ) -> np.ndarray:
        """Add samples to ``A`` of every class's ball; see :meth:`IncrementalSphere.add`.

        Returns
        -------
        keys : ndarray of int64, shape (k,)
        """
        checked = [part._checked_add(X, y, sample_weight) for part in self._parts]
        raw = None
        if self.region == "curvature":
            model = self._model
            raw = (
                check_rows(X, model.n_features_in_, "X", type(model).__name__, sparse="dense"),
                np.asarray(y),
            )
        keys: Any = None  # every class has accepted the samples: nothing below refuses them
        for part, args in zip(self._parts, checked):
            keys = part._add_scored(*args, raw=raw)
        return keys

    def _add_scored(self, P, t, Z, w=None, raw=None):
        """:meth:`add` of mapped, validated points with class indices ``t`` and scores
        ``Z`` (k, K) under the K solutions (``raw``: see
        :meth:`IncrementalSphere._add_scored`)."""
        t = np.asarray(t)
        keys = None
        for k, part in enumerate(self._parts):
            keys = part._add_scored(P, np.where(t == k, 1.0, -1.0), Z[:, k], w, raw=raw)
        return keys

    def remove(self, ids: ArrayLike) -> np.ndarray:
        """Remove model samples (by id) into ``R`` of every class's ball."""
        keys = self._parts[0].remove(ids)  # its checks are every class's: they fail here
        for part in self._parts[1:]:
            part.remove(ids)
        return keys

    def discard(self, keys: ArrayLike) -> None:
        """Take entries out of ``A ∪ R`` of every class's ball."""
        self._parts[0].discard(keys)  # unknown keys fail here, before any other class changes
        for part in self._parts[1:]:
            part.discard(keys)

    def clear(self) -> None:
        """Empty ``A`` and ``R`` (keeps the tracked points and the room)."""
        for part in self._parts:
            part.clear()

    # ---------------------------------------------------------------- queries
    @property
    def n_entries(self) -> int:
        return self._parts[0].n_entries

    @property
    def capacity(self) -> int:
        return self._parts[0].capacity

    @property
    def r_norm(self) -> np.ndarray:
        """``‖r_k‖`` of every class, shape (K,)."""
        return np.array([p.r_norm for p in self._parts])

    def recompute(self) -> np.ndarray:
        """:meth:`IncrementalSphere.recompute` of every class; ``‖r_k‖``, shape (K,)."""
        return np.array([p.recompute() for p in self._parts])

    def center_decision(self, X: ArrayLike | sp.spmatrix) -> np.ndarray:
        """The K balls' centre decision values, shape (n, K)."""
        return self._stacked("center_decision", X)

    def predict_certain(self, X: ArrayLike | sp.spmatrix) -> tuple[np.ndarray, np.ndarray]:
        """Labels of the new model where the balls decide its argmax.

        Returns
        -------
        labels : ndarray
            The argmax of the centres (certain where ``certain``).
        certain : ndarray of bool
        """
        lo, hi = self.decision_bounds(X)
        _, certain = certain_argmax(lo, hi)
        return self.classes_[np.argmax(self.center_decision(X), axis=1)], certain

    def track(self: _MI, X: ArrayLike | sp.spmatrix) -> _MI:
        """Keep the bounds of the points ``X`` up to date in every class's ball."""
        for part in self._parts:
            part.track(X)
        return self

    def tracked_center(self, idx: ArrayLike | None = None) -> np.ndarray:
        """Centre decision values of the tracked points, shape (n, K)."""
        return self._stacked("tracked_center", idx)

    def tracked_bounds(self, idx: ArrayLike | None = None) -> tuple[np.ndarray, np.ndarray]:
        """Bounds of the tracked points, each of shape (n, K)."""
        return self._stacked_pairs("tracked_bounds", idx)

    def __repr__(self):
        extra = "" if self.region == "sphere" else f", region={self.region!r}"
        return (
            f"MulticlassIncrementalSphere({type(self._model).__name__}, "
            f"n_classes={self.n_classes}, added={self.n_added}, removed={self.n_removed}"
            f"{extra})"
        )


def _grown(a, cap):
    """``a`` with room for ``cap`` slots, the new ones -1."""
    b = np.full(cap, -1, dtype=a.dtype)
    b[: a.shape[0]] = a
    return b
