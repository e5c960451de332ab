"""The pending change of a what-if object: the hypothetical additions, removals, relabels and
reweights, and the coefficients of Δg they give, with undo.

A what-if object (:class:`~deltafit.sensitivity.Sensitivity`) keeps every sample a change
touches as an *entry* of its store (:mod:`deltafit.sensitivity._changes`): its point, its score
under β₁, its label and weight in D₁ and in D₂, and its coefficient in

    Δg = Σ_A w_i ∇ℓ_i(β₁) − Σ_R w_i ∇ℓ_i(β₁) + Σ_{reweighted} (w'_i − w_i) ∇ℓ_i(β₁),

the change term of Theorem 1 of Okumura et al., "Quick sensitivity analysis for incremental data
modification and its application to leave-one-out CV in linear classification problems" (=
Theorem 1 and eq. 5 of Sivan et al., "Incremental sensitivity analysis for kernelized
models").  :class:`PendingChange` is that bookkeeping: the changes cost the gradients of the
changed samples only, and each can be undone.  The queries live in
:mod:`deltafit.sensitivity._data_change`.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any, TypeVar

import numpy as np
import scipy.sparse as sp
from numpy.typing import ArrayLike

from deltafit.sensitivity._changes import changes_for
from deltafit.sensitivity._model_access import certified_residual, fitted_C
from deltafit.sensitivity.regions import _ball
from deltafit.solvers import check_sample_weight
from deltafit.utils._validation import check_feature_names, check_ids, check_rows

__all__ = ["PendingChange"]


def _rows_at(a, mask):
    """The rows of ``a`` (array-like or SciPy sparse matrix; None passes through) where
    ``mask`` holds; anything that is not 2-D (or 1-D for targets) is passed on unchanged for
    the model's own checks to name."""
    if a is None:
        return None
    if sp.issparse(a):
        return a[np.flatnonzero(mask)]
    if hasattr(a, "iloc") and getattr(a, "ndim", 0) == 2 and a.shape[0] == mask.size:
        return a.iloc[np.flatnonzero(mask)]  # a DataFrame keeps its names for the model's check
    arr = np.asarray(a)
    return arr[mask] if arr.ndim in (1, 2) and arr.shape[0] == mask.size else a


if TYPE_CHECKING:
    from deltafit.losses import Loss

_P = TypeVar("_P", bound="PendingChange")


class PendingChange:
    """The hypothetical changes of one binary problem (base of
    :class:`~deltafit.sensitivity.Sensitivity`): :meth:`add`, :meth:`remove`,
    :meth:`relabel`, :meth:`reweight`, :meth:`undo`, :meth:`reset` and the counts.

    Parameters
    ----------
    model : fitted deltafit estimator
    C_new : float, "mean", callable or None
        ``C`` of the new problem (see :class:`~deltafit.sensitivity.Sensitivity`).
    problem : deltafit.models.FittedProblem, optional
        The binary problem (default: the model's own).
    loss : deltafit.losses.Loss
        The problem's loss, checked by the caller.
    """

    def __init__(
        self,
        model: Any,
        C_new: float | str | Callable[[int], float] | None = None,
        *,
        problem: Any = None,
        loss: Loss,
    ) -> None:
        self._loss = loss
        self._model = model
        self._prob = prob = model.problem_ if problem is None else problem
        self._C1 = fitted_C(prob)
        self._n_old = prob.n_samples
        self._c_new = _ball.resolve_c_new(C_new, self._C1, self._n_old)
        self._c_new_spec = C_new
        self._eps = certified_residual(prob)
        self._kernel = prob.kernel
        self._first_hid = prob.next_id
        self._next_hid = self._first_hid
        # entries: every sample touched by a change, model samples and hypothetical additions,
        # in slots 0 … m − 1 of the store (points, scores under β₁, coefficients in Δg)
        self._store: Any = changes_for(prob)  # linear or kernel store
        self._index: dict[int, int] = {}  # id -> entry, built lazily from _pending (see _lookup)
        self._pending: list = []  # (ids, first entry) blocks not yet in _index
        self._ids = np.empty(0, dtype=np.int64)  # grown with the store
        self._y0 = np.empty(0)  # label in D₁ (NaN for additions)
        self._y = np.empty(0)  # label in D₂ (NaN when absent from D₂)
        self._w0 = np.empty(0)  # weight in D₁ (0 for additions)
        self._w = np.empty(0)  # weight in D₂
        self._n_rw = 0  # entries in D₁ and D₂ with a weight other than in D₁
        self._counts = [0, 0, 0]  # removed, added, relabelled
        # what the queries computed from the pending change: cleared at every change
        self._cache = None  # the parts of the ball
        self._r = None  # r of the ball (linear models), with the cache
        self._reg = None  # the region of the pending change
        self._history: list = []

    # ------------------------------------------------------------------ state
    def _check_model(self):
        if not self._prob.is_current():
            raise ValueError(
                "the model was fitted or updated after this sensitivity object was made; "
                "make a new one with deltafit.sensitivity(model)"
            )

    @property
    def n_removed(self) -> int:
        return self._counts[0]

    @property
    def n_added(self) -> int:
        return self._counts[1]

    @property
    def n_relabeled(self) -> int:
        return self._counts[2]

    @property
    def n_reweighted(self) -> int:
        return self._n_rw

    @property
    def n_new(self) -> int:
        return self._n_old - self._counts[0] + self._counts[1]

    def _recount(self, idx, y_before):
        """Update (removed, added, relabelled) for entries ``idx`` whose D₂ labels changed
        from ``y_before`` to ``self._y[idx]`` (NaN marks "not in D₁" / "not in D₂")."""
        c = self._counts
        if len(idx) <= 32:  # plain Python is cheaper than numpy on a few samples
            y0s = self._y0[idx].tolist()
            for y0, yb, ya in zip(y0s, y_before.tolist(), self._y[idx].tolist()):
                for y, sign in ((yb, -1), (ya, 1)):
                    if y0 == y0:
                        if y != y:
                            c[0] += sign
                        elif y != y0:
                            c[2] += sign
                    elif y == y:
                        c[1] += sign
            return
        y0 = self._y0[idx]
        model = y0 == y0
        for y, sign in ((y_before, -1), (self._y[idx], 1)):
            present = y == y
            c[0] += sign * int(np.count_nonzero(model & ~present))
            c[1] += sign * int(np.count_nonzero(~model & present))
            c[2] += sign * int(np.count_nonzero(model & present & (y != y0)))

    @property
    def C_new_(self) -> float:
        """``C₂`` of the new problem at the current number of samples."""
        return self._C2(self.n_new)

    def _C2(self, n_new):
        return _ball.c_at(self._c_new, n_new)

    @property
    def _m(self):
        """Number of entries (slots 0 … m − 1 of the store)."""
        return self._store.hi

    def _insert(self, ids, y0, y, points, z, c=None, src=None, w0=None, w=None):
        """New entries (labels ``y0`` in D₁, ``y`` in D₂, weights ``w0`` / ``w`` (default:
        1), coefficients ``c``, default 0)."""
        m = self._m
        slots = self._store.insert(points, z, c, src)
        cap = self._store.capacity
        if self._ids.shape[0] < cap:
            self._ids, self._y0, self._y, self._w0, self._w = (
                _grown(a, cap, m) for a in (self._ids, self._y0, self._y, self._w0, self._w)
            )
        self._ids[slots], self._y0[slots], self._y[slots] = ids, y0, y
        if w0 is None:
            w0 = 1.0
        self._w0[slots] = w0
        self._w[slots] = w0 if w is None else w
        self._pending.append((ids, m))
        return slots

    def _lookup(self):
        """id -> entry.  The dictionary is built on first use: most what-ifs never look an id
        up, and building it costs more than the bounds of a large change."""
        if self._pending:
            for ids, start in self._pending:
                self._index.update(zip(ids.tolist(), range(start, start + ids.size)))
            self._pending = []
        return self._index

    def _coef(self, idx, y, w):
        """Δg coefficient of each entry when its D₂ label is ``y`` (NaN: absent) and its D₂
        weight ``w``: ``w ℓ'(y, z) − w₀ ℓ'(y₀, z)`` over the terms present."""
        d1 = self._loss.d1
        z, y0, w0 = self._store.z[idx], self._y0[idx], self._w0[idx]
        model, present = y0 == y0, y == y  # NaN marks "not in D₁" / "not in D₂"
        c = np.where(present, w * d1(np.where(present, y, 0.0), z), 0.0)
        return c - np.where(model, w0 * d1(np.where(model, y0, 0.0), z), 0.0)

    def _set(self, idx, y, w=None):
        """Give entries ``idx`` the D₂ labels ``y`` (and weights ``w``; default: unchanged)
        and update Δg."""
        self._cache = self._reg = None
        w = self._w[idx] if w is None else w
        self._store.set(idx, self._coef(idx, y, w))
        before = self._y[idx]  # a copy (fancy indexing)
        self._rw_count(idx, -1)
        self._y[idx] = y
        self._w[idx] = w
        self._rw_count(idx, 1)
        self._recount(idx, before)

    def _rw_count(self, idx, sign):
        """Add ``sign`` × the entries of ``idx`` present in D₁ and D₂ with another weight."""
        y0, y = self._y0[idx], self._y[idx]
        self._n_rw += sign * int(
            np.count_nonzero((y0 == y0) & (y == y) & (self._w[idx] != self._w0[idx]))
        )

    def _commit(self, idx, y, first_new=None, w=None):
        before = (self._y[idx].copy(), self._w[idx].copy())
        self._set(idx, y, w)
        # an addition remembers where its entries and ids start, so that undo can give them back
        self._history.append((idx, before, first_new))

    # ------------------------------------------------------------- the change
    def _model_entries(self, ids, rows_X=None, rows_y=None, action="remove"):
        """Entries of model samples (created on first touch), validated by the ledger."""
        prob = self._prob
        ids = np.asarray(ids, dtype=np.int64)
        index = self._lookup()
        id_list = ids.tolist()
        if index:
            fresh = np.fromiter((i not in index for i in id_list), dtype=bool, count=ids.size)
        else:
            fresh = np.ones(ids.size, dtype=bool)
        rows = None
        if not prob.keeps_rows:
            # keep_data=False: the rows are needed, checked against the stored digests (a
            # model whose rows are persisted on a Dask cluster gathers them: locate)
            try:
                _, rows = prob.locate(ids, rows_X, rows_y)  # the model's own row checks
            except ValueError:
                if rows_X is None:
                    raise ValueError(
                        "this model keeps no training rows (keep_data=False): pass the "
                        f"samples' rows as X to {action} them"
                    ) from None
                raise
        all_fresh = bool(fresh.all())
        if not fresh.any():
            return np.fromiter((index[i] for i in id_list), dtype=np.intp, count=ids.size)
        new_ids = ids if all_fresh else ids[fresh]
        slots = prob.handles_unchecked(new_ids)
        if rows is not None and not all_fresh:
            rows = rows[fresh]
        points, z, src = self._store.model_points(slots, rows)
        y0 = prob.targets[slots]
        w0 = prob.weights[slots] if prob.weighted else None
        new = self._insert(new_ids, y0, y0, points, z, src=src, w0=w0)
        if all_fresh:
            return new
        out = np.fromiter((index.get(i, -1) for i in id_list), dtype=np.intp, count=ids.size)
        out[fresh] = new
        return out

    def _append(
        self,
        ids,
        y0,
        y,
        points,
        z,
        c,
        first_new=None,
        removed=0,
        added=0,
        src=None,
        w0=None,
        w=None,
    ):
        """Append entries already in their final state (coefficients ``c``), with one history
        record — the lean path of the common additions and removals."""
        slots = self._insert(ids, y0, y, points, z, c, src, w0, w)
        self._counts[0] += removed
        self._counts[1] += added
        self._cache = self._reg = None
        # undo sets the entries back to their state before: present with their D₁ label and
        # weight (model samples) or absent (additions, whose entries and ids are then dropped)
        self._history.append((slots, (y0.copy(), self._w0[slots]), first_new))

    def _remove_fresh(self, ids):
        """Rows kept, none of ``ids`` touched before: removal in a few steps."""
        prob = self._prob
        slots = prob.handles_unchecked(ids)
        if self.n_new - ids.size < 1:
            raise ValueError("the change would remove every sample; a model needs at least one")
        points, z, src = self._store.model_points(slots)
        y0 = np.array(prob.targets[slots])
        c = -self._loss.d1(y0, z)
        w0 = None
        if prob.weighted:  # a removed sample takes its weighted term out: −w ℓ'
            w0 = prob.weights[slots]
            c *= w0
        self._append(
            ids, y0, np.full(ids.size, np.nan), points, z, c, removed=ids.size, src=src, w0=w0
        )

    def _split_ids(self, ids: Any, what: str) -> tuple[np.ndarray, np.ndarray]:
        ids = check_ids(ids, what)
        hyp = ids >= self._first_hid
        index = self._lookup() if hyp.any() else None
        unknown = [] if index is None else [i for i in ids[hyp].tolist() if i not in index]
        if unknown:
            raise ValueError(f"unknown sample {what} (not in the model): {unknown[:10]}")
        return ids, hyp

    def add(
        self, X: ArrayLike | sp.spmatrix, y: ArrayLike, sample_weight: ArrayLike | None = None
    ) -> np.ndarray:
        """Hypothetically add samples.

        Parameters
        ----------
        X : array-like of shape (k, n_features)
            The new rows (finite for kernel models).
        y : array-like of shape (k,)
            Their labels (for classifiers, among ``classes_``).
        sample_weight : array-like of shape (k,), optional
            Their weights ``w ≥ 0`` (default 1): each adds ``w ℓ'(y, z) Φ(x)`` to Δg, as
            ``model.add(X, y, sample_weight=w)`` adds ``C w ℓ`` to the objective.

        Returns
        -------
        ids : ndarray of shape (k,)
            Ids of the hypothetical samples (usable in :meth:`remove` and :meth:`relabel`).
        """
        self._check_model()
        model = self._model
        name = type(model).__name__
        check_feature_names(model, X)  # the names as the model's predict checks them
        Xa = check_rows(X, model.n_features_in_, "X", name, finite=self._kernel, sparse="dense")
        ta = self._prob.encode_targets(y, what="y")
        if ta.shape[0] != Xa.shape[0]:
            raise ValueError(f"X has {Xa.shape[0]} rows but y has {ta.shape[0]} labels")
        wa = check_sample_weight(sample_weight, Xa.shape[0], self._C1)
        ids = np.arange(self._next_hid, self._next_hid + Xa.shape[0], dtype=np.int64)
        points, z = self._store.new_points(Xa)
        if not np.isfinite(z).all():  # NaN/inf in X (checked here, not in a pass of its own)
            check_rows(Xa, model.n_features_in_, "X", name)
        d1 = self._store.check_new(points, z, ta, self._loss)
        if wa is not None:
            d1 = wa * d1
        self._append(
            ids,
            np.full(ids.size, np.nan),
            ta,
            points,
            z,
            d1,
            (self._m, self._next_hid),
            added=ids.size,
            w0=0.0,
            w=1.0 if wa is None else wa,
        )
        self._next_hid += Xa.shape[0]
        return ids

    def _drop_entries(self, m0):
        index = self._lookup()
        for j in self._ids[m0 : self._m].tolist():
            index.pop(j, None)
        self._store.truncate(m0)

    def remove(
        self: _P,
        ids: ArrayLike | None = None,
        *,
        X: ArrayLike | None = None,
        y: ArrayLike | None = None,
    ) -> _P:
        """Hypothetically remove samples: model samples or earlier hypothetical additions.

        Parameters
        ----------
        ids : array-like of int, optional
        X, y : array-like, optional
            For ``keep_data=False`` models: the samples' rows (checked against the stored
            digests), aligned with ``ids``; with ``ids`` omitted the samples are found by value.

        Returns
        -------
        self
        """
        self._check_model()
        if ids is None:
            if X is None or y is None:
                raise ValueError("remove needs ids, or X and y for a keep_data=False model")
            # found by value, as the model would (its checks, its messages)
            ids = self._prob.ids_of(self._prob.find(X, y))
        elif X is not None and self._prob.keeps_rows:
            raise ValueError("this model keeps its training rows: remove samples by id")
        ids, hyp = self._split_ids(ids, "ids")
        any_hyp = hyp.any()
        if (
            not any_hyp
            and self._prob.keeps_rows
            and (self._m == 0 or not any(i in self._lookup() for i in ids.tolist()))
        ):
            self._remove_fresh(ids)
            return self
        idx = np.full(ids.size, -1, dtype=np.intp)
        if any_hyp:
            idx[hyp] = [self._lookup()[i] for i in ids[hyp].tolist()]
        m0 = self._m
        try:
            if not any_hyp:
                idx = self._model_entries(ids, X, y, "remove")
            elif not hyp.all():
                idx[~hyp] = self._model_entries(
                    ids[~hyp], _rows_at(X, ~hyp), _rows_at(y, ~hyp), "remove"
                )
            yi = self._y[idx]
            gone = yi != yi
            if gone.any():
                raise ValueError(f"samples already removed: {ids[gone][:10].tolist()}")
            if self.n_new - ids.size < 1:
                raise ValueError("the change would remove every sample; a model needs at least one")
            self._commit(idx, np.full(ids.size, np.nan))
        except BaseException:
            self._drop_entries(m0)
            raise
        return self

    def relabel(
        self: _P,
        ids: ArrayLike | None,
        y: ArrayLike,
        *,
        X: ArrayLike | None = None,
        y_old: ArrayLike | None = None,
    ) -> _P:
        """Hypothetically change the labels of samples (model samples or additions).

        Parameters
        ----------
        ids : array-like of int
        y : array-like
            New labels (for classifiers, among ``classes_``).
        X : array-like, optional
            The samples' rows, required for model samples of ``keep_data=False`` models.
        y_old : array-like, optional
            The samples' current labels, required for model samples of a ``keep_data=False``
            regressor (it keeps no targets), as in the model's own ``relabel``.

        Returns
        -------
        self
        """
        self._check_model()
        ids, hyp = self._split_ids(ids, "ids")
        t = self._prob.encode_targets(np.atleast_1d(np.asarray(y)), what="y")
        if t.shape[0] != ids.shape[0]:
            raise ValueError(f"{ids.shape[0]} ids but {t.shape[0]} labels to relabel")
        m0 = self._m
        try:
            idx = self._entries_of(ids, hyp, X, y_old, "relabel")
            gone = np.isnan(self._y[idx])
            if np.any(gone):
                raise ValueError(f"cannot relabel removed samples: {ids[gone][:10].tolist()}")
            self._commit(idx, t)
        except BaseException:
            self._drop_entries(m0)
            raise
        return self

    def _entries_of(self, ids, hyp, X, y, verb):
        """The store's entries of ``ids``: hypothetical additions (``hyp``) by their ids, model
        samples entered now (their rows ``X`` and labels ``y`` checked for a model that keeps
        none; given rows of a model that keeps them are not needed)."""
        if X is not None and self._prob.keeps_rows:
            self._rows(X)  # the rows are stored and not needed: checked as predict would
            X = None
        idx = np.full(ids.size, -1, dtype=np.intp)
        if np.any(hyp):
            idx[hyp] = [self._lookup()[i] for i in ids[hyp].tolist()]
        if np.any(~hyp):
            rows = _rows_at(X, ~hyp)
            old = None if y is None else np.atleast_1d(np.asarray(y))[~hyp]
            idx[~hyp] = self._model_entries(ids[~hyp], rows, old, verb)
        return idx

    def reweight(
        self: _P,
        ids: ArrayLike | None,
        sample_weight: ArrayLike,
        *,
        X: ArrayLike | None = None,
        y: ArrayLike | None = None,
    ) -> _P:
        """Hypothetically give samples (model samples or additions) new weights.

        A reweight ``w → w'`` changes the data term by ``C (w' − w) ℓ_i``, so Δg gains
        ``(w' − w) ℓ'(y_i, z_i) Φ(x_i)``: the change of Theorem 1 of Okumura et al. (2015) /
        Theorem 1 of Sivan et al. (2020) with a fractional sample (weight 0 is a removal that
        keeps the sample's id, an integer increase adds copies).  As ``model.reweight(ids, w)``.

        Parameters
        ----------
        ids : array-like of int
        sample_weight : array-like of shape (len(ids),)
            The new weights, ``≥ 0``.
        X, y : array-like, optional
            The samples' rows (and, for a regressor, targets), required for model samples of
            ``keep_data=False`` models.

        Returns
        -------
        self
        """
        self._check_model()
        ids, hyp = self._split_ids(ids, "ids")
        w = check_sample_weight(np.atleast_1d(np.asarray(sample_weight)), ids.size, self._C1)
        m0 = self._m
        try:
            idx = self._entries_of(ids, hyp, X, y, "reweight")
            yi = self._y[idx]
            gone = yi != yi
            if np.any(gone):
                raise ValueError(f"cannot reweight removed samples: {ids[gone][:10].tolist()}")
            self._commit(idx, yi, w=w)
        except BaseException:
            self._drop_entries(m0)
            raise
        return self

    def undo(self: _P) -> _P:
        """Revert the last :meth:`add`, :meth:`remove`, :meth:`relabel` or :meth:`reweight`.

        Returns
        -------
        self
        """
        self._check_model()
        if not self._history:
            raise ValueError("nothing to undo")
        idx, (y_before, w_before), first_new = self._history.pop()
        self._set(idx, y_before, w_before)
        if first_new is not None:
            # undoing the last change undid every later one: the entries from this addition on
            # all have coefficient 0 and no pending change refers to them; the ids are free again
            self._drop_entries(first_new[0])
            self._next_hid = first_new[1]
        return self

    def reset(self: _P) -> _P:
        """Revert every pending change."""
        while self._history:
            self.undo()
        return self

    def _rows(self, X, names=True):
        """Rows checked as the model's ``predict`` checks them: column names (unless
        ``names`` is False: the blocks of a dask X checked by name already), width, values."""
        model = self._model
        if names:
            check_feature_names(model, X)
        return check_rows(X, model.n_features_in_, "X", type(model).__name__, sparse="dense")


def _grown(a, cap, keep):
    """``a`` with room for ``cap`` entries, its first ``keep`` kept."""
    b = np.empty(cap, dtype=a.dtype)
    b[:keep] = a[:keep]
    return b
