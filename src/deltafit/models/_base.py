"""The update protocol of the updatable estimators: fit, the updates as transactions, save.

An estimator solves the canonical problem of ARCHITECTURE.md, "The problem" and keeps (i) a
:class:`~deltafit._ledger.Ledger` of its training samples under stable integer ids and
(ii) a *state* from which it is updated exactly (a
:class:`~deltafit._states._protocol.ModelState`, chosen by :mod:`deltafit.models._registry`).
The estimator turns each update into a :class:`~deltafit._states._protocol.DataChange` and the
state applies it.

Every update (:meth:`~UpdatableMixin.add`, :meth:`~UpdatableMixin.remove`,
:meth:`~UpdatableMixin.relabel`, :meth:`~UpdatableMixin.update`,
:meth:`~UpdatableMixin.partial_fit`) is a transaction: all input is validated first
(:mod:`~deltafit.models._plan`, :mod:`~deltafit.models._inputs`), the numerical work is done
next, and the ledger is changed last; a ValueError anywhere leaves the model exactly as it
was.  :class:`UpdatableMixin` gathers the mixins of the neighbouring modules: the lock and read
guard (:mod:`~deltafit.models._guard`), the inputs, the planning, the predictions
(:mod:`~deltafit.models._predict`) and the fitted problem's view
(:mod:`~deltafit.models._problem`).
"""

from __future__ import annotations

import os
import warnings
from collections.abc import Callable
from typing import Any, TypeVar

import numpy as np
import scipy.sparse as sp
from sklearn.utils.validation import check_is_fitted, validate_data

from deltafit._dask._input import any_dask, gathered
from deltafit._states._one_vs_rest import one_vs_rest_state
from deltafit._states._protocol import SolverOptions
from deltafit.losses import get_loss
from deltafit.models._guard import GuardedMixin
from deltafit.models._inputs import InputsMixin, checked_weights
from deltafit.models._params import constraints
from deltafit.models._plan import PlanningMixin
from deltafit.models._predict import PredictMixin
from deltafit.models._problem import ProblemMixin
from deltafit.models._registry import state_for
from deltafit.utils._transaction import atomic
from deltafit.utils._validation import check_magnitude, check_real

__all__ = ["UpdatableMixin"]

_M = TypeVar("_M", bound="UpdatableMixin")


class UpdatableMixin(GuardedMixin, InputsMixin, PlanningMixin, PredictMixin, ProblemMixin):
    """Fit / update protocol shared by the four deltafit estimators.

    Examples
    --------
    Every deltafit estimator follows it; an update equals a fit on the changed data:

    >>> import numpy as np
    >>> from sklearn.datasets import load_breast_cancer
    >>> from sklearn.preprocessing import StandardScaler
    >>> from deltafit import LinearClassifier
    >>> from deltafit.models import UpdatableMixin
    >>> X, y = load_breast_cancer(return_X_y=True)
    >>> X = StandardScaler().fit_transform(X)
    >>> model = LinearClassifier(loss="logistic", C=0.1).fit(X[:500], y[:500])
    >>> isinstance(model, UpdatableMixin)
    True
    >>> new_ids = model.add(X[500:], y[500:])    # ids 500..568
    >>> _ = model.remove([3, 7])
    >>> _ = model.relabel([10], [1 - y[10]])
    >>> y_new = y.copy()
    >>> y_new[10] = 1 - y[10]
    >>> keep = np.setdiff1d(np.arange(569), [3, 7])
    >>> refit = LinearClassifier(loss="logistic", C=0.1).fit(X[keep], y_new[keep])
    >>> float(np.max(np.abs(model.coef_ - refit.coef_))) < 1e-6
    True
    >>> model.sample_ids_.shape
    (567,)
    """

    _classifier = False
    _kernel = False
    _losses: tuple[str, ...] = ("squared",)
    _max_rank = 64
    _parameter_constraints: dict = constraints(_losses)
    # the parameters every estimator has (set by its __init__)
    loss: str
    C: float
    fit_intercept: bool
    intercept_scaling: float
    tol: float
    max_iter: int
    warm_start: bool
    callback: object
    classes_: np.ndarray  # set by a classifier's fit
    _ledger: Any  # set by fit: the samples' ids, weights (and rows, labels)
    _state: Any  # set by fit: the exact-update state
    # The writer of model files behind the deprecated ``save`` method: ``deltafit.persistence``
    # (a floor above the models, which reads their classes) puts its ``save`` here when it is
    # imported, so that the models never import persistence (no import circle).
    _save_file: Callable[..., None] | None = None

    # ------------------------------------------------------------ validation
    def _validate_params(self) -> None:
        """scikit-learn's check of ``_parameter_constraints`` (types, ranges, options), then
        the rules between parameters (:meth:`_check_param_rules`); ValueError
        (:class:`~sklearn.utils._param_validation.InvalidParameterError`) naming the
        parameter."""
        super()._validate_params()  # type: ignore[misc]
        self._check_param_rules()

    def _check_param_rules(self) -> None:
        """The rules between parameters, after their constraints (each estimator adds its
        own): ``intercept_scaling`` > 0 with ``fit_intercept``, its square within the
        magnitude cap."""
        if self.fit_intercept:
            s = check_real(self.intercept_scaling, "intercept_scaling", low=0.0)
            check_magnitude(
                s * s,
                self.C,
                f"intercept_scaling={s!r}: its square (a term of every sample's squared norm)",
                "use a smaller intercept_scaling",
            )

    # --------------------------------------------------- the fitted snapshot
    # Parameters take effect at the next fit, as in scikit-learn: what shapes the fitted model
    # (the intercept column, the kernel) is kept from the fit and used by every later update
    # and prediction, whatever set_params does in between.
    _SPEC_KERNEL: tuple[str, ...] = ()

    def _take_spec(self, X=None, w=None):
        """Snapshot the parameters the fitted model is made of (called by ``fit`` with the
        training rows ``X`` and their weights ``w``)."""
        spec = {
            "fit_intercept": bool(self.fit_intercept),
            "intercept_scaling": float(self.intercept_scaling) if self.fit_intercept else 0.0,
        }
        spec.update((k, getattr(self, k)) for k in self._SPEC_KERNEL)
        self._spec = spec

    def _fitted(self, name):
        """A parameter as the model was fitted with (the current value before any fit)."""
        spec = self.__dict__.get("_spec")
        if spec is None:
            return (
                (float(self.intercept_scaling) if self.fit_intercept else 0.0)
                if name == "intercept_scaling"
                else getattr(self, name)
            )
        return spec[name]

    @property
    def _s(self):
        """The constant feature's value as fitted (0 without an intercept)."""
        return self._fitted("intercept_scaling")

    # ----------------------------------------------------------------- state
    def _check_solution(self, st):
        """Refuse a state whose solution or residual is not finite (an overflow)."""
        res = st.result
        if not np.all(np.isfinite(st.solution)) or (
            res is not None and not np.isfinite(res.grad_norm)
        ):
            raise ValueError(
                "the solution overflowed (non-finite coefficients or residual): the data's "
                "magnitudes or C are too large for float64; rescale X (or use a smaller C)"
            )

    def _apply_change(self, change):
        """Hand a validated :class:`~deltafit._states._protocol.DataChange` to the state.

        The new data (Φ of the added rows, or their kernel blocks) are checked against the
        magnitude cap first; after a re-solve the new solution must be finite, otherwise the
        state is put back as it was and a ValueError raised.  (The closed-form states check
        their solution themselves: they update in place and roll back on their own.)
        """
        st = self._state
        if change.rows_add is not None:
            rows = change.rows_add
            self._check_scale(rows if sp.issparse(rows) else np.asarray(rows), st.C)
        if change.K_new is not None:
            self._check_scale(change.K_new, st.C)
            self._check_scale(change.K_cross, st.C)
        if st.result is None:
            st.apply_change(change)
            return
        with atomic(st):
            st.apply_change(change)
            self._check_solution(st)

    def _solver_options(self):
        return SolverOptions(
            get_loss(self.loss), float(self.C), float(self.tol), int(self.max_iter), self.callback
        )

    # ------------------------------------------------------------------- fit
    def fit(self: _M, X: Any, y: Any, sample_weight: Any = None) -> _M:
        """Fit on (X, y): the exact minimiser of the canonical objective (ARCHITECTURE.md,
        "The problem").

        After ``fit``, ``sample_ids_`` is ``0..n-1`` in row order.

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)
        y : array-like of shape (n_samples,)
        sample_weight : array-like of shape (n_samples,) or float, optional
            Non-negative weights: the data term becomes ``C Σ w_i ℓ(y_i, z_i)`` (C scaled per
            sample, as scikit-learn's ``sample_weight``); weight 2 is the sample twice, weight 0
            the sample absent.  Updates keep them (``add(..., sample_weight=)``,
            :meth:`reweight`).

        Returns
        -------
        self
        """
        if any_dask(X, y, sample_weight):
            return self._fit_dask(X, y, sample_weight)
        self._check_dense(X, y)
        return self._fit(X, y, sample_weight=sample_weight)

    def _fit_dask(self, X, y, sample_weight=None):
        """Fit on dask collections: the linear models' squared loss (``keep_data=False``)
        only; see :meth:`deltafit.LinearRegressor.fit`."""
        raise ValueError(
            f"{type(self).__name__} takes no dask input; LinearClassifier and "
            "LinearRegressor (loss='squared', keep_data=False) do"
        )

    def _fit(self, X, y, classes=None, sample_weight=None):
        # a failed (re)fit leaves a fitted model as it was: fitting only creates new objects,
        # so restoring the attribute dictionary is enough
        return self._locked(self._fit_locked, X, y, classes, sample_weight)

    def _fit_locked(self, X, y, classes, sample_weight=None):
        with atomic(self):
            self._validate_params()
            # partial_fit(classes=...) follows scikit-learn: the data may show one class at first
            self._classes_given = classes is not None
            sparse_ok = self._sparse_refusal(fitting=True) is None
            X, y = validate_data(
                self,
                X,
                y,
                dtype=np.float64,
                y_numeric=not self._classifier,
                multi_output=not self._classifier,
                ensure_min_samples=1,
                accept_sparse="csr" if sparse_ok else False,
            )
            if sp.issparse(X):
                X = sp.csr_matrix(X)  # the sparse arrays too: one format inside
            self._sparse_input = sp.issparse(X)
            t = self._encode_y(y, fitting=True, classes=classes)
            w = checked_weights(sample_weight, X.shape[0])
            if w is not None:
                self._check_fit_weights(t, w)
            previous = self._warm_coef() if self.warm_start else None
            self._take_spec(X, w)
            self._build(X, t, previous, w)
            self._bump_version()
        return self

    def _warm_coef(self):
        """The current solution to warm-start a refit from, when it solves the same loss over
        the same kind of problem (None otherwise)."""
        st = self._state if self._is_fitted() else None
        if st is None or st.loss.name != self.loss:
            return None  # unfitted, or set_params changed the loss since the fit
        return st.warm_coef(self._ledger.active_slots())

    def _new_state(self, data, t, capacity, previous, w=None):
        """A state for the current parameters, solved on Φ or K, targets ``t`` and weights
        ``w`` (None: 1 each), warm-started from ``previous`` when it has the shape the state
        starts from."""
        cls = state_for(self._kernel, self.loss)
        width = data.shape[0] if cls.warm_per_sample else data.shape[1]
        K = self._n_classes
        if previous is not None and previous.shape != ((width, K) if K else (width,)):
            previous = None
        opts = self._solver_options()
        self._check_scale(data, opts.C)
        st = one_vs_rest_state(opts, self._max_rank, cls, K) if K else cls(opts, self._max_rank)
        st = st.fit(data, t, capacity, previous, **({} if w is None else {"w": w}))
        self._check_solution(st)
        return st

    def partial_fit(self: _M, X: Any, y: Any, classes: Any = None, sample_weight: Any = None) -> _M:
        """scikit-learn's spelling of :meth:`add`; on an unfitted model it fits.

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)
        y : array-like of shape (n_samples,)
        classes : array-like of shape (2,), optional
            Classifiers only: every label the model will see, declared on the first call
            (scikit-learn's convention); ``y`` may then show fewer, and later batches may bring
            the others.
        sample_weight : array-like of shape (n_samples,) or float, optional
            The samples' weights (see :meth:`fit`).

        Returns
        -------
        self
        """
        if not self._is_fitted():
            if any_dask(X, y, sample_weight):
                if classes is not None:
                    raise ValueError(
                        "partial_fit(classes=...) takes no dask input; fit the "
                        "dask collections with fit"
                    )
                return self._fit_dask(X, y, sample_weight)
            self._check_dense(X, y)
            if self._classifier:
                return self._fit(X, y, classes=classes, sample_weight=sample_weight)
            return self._fit(X, y, sample_weight=sample_weight)
        if classes is not None and self._classifier:
            if not np.array_equal(np.unique(np.asarray(classes)), self.classes_):
                raise ValueError(
                    f"classes={list(classes)} differ from the model's {self.classes_.tolist()}"
                )
        self.add(X, y, sample_weight=sample_weight)
        return self

    # ------------------------------------------------------------ files
    # deltafit.persistence writes a model from these parts and restores one by ``_restore``:
    # the model's own state stays the model's; the file format, its checks and I/O are
    # persistence's (a floor above, which the models never import).
    def _saved_parts(self) -> dict[str, Any]:
        """What a model file holds of the fitted model besides its parameters: the ledger,
        the state, the fitted parameters (``spec``) and the facts of the fit."""
        d = self.__dict__
        return {
            "ledger": self._ledger,
            "state": self._state,
            "spec": dict(self._spec),
            "n_outputs": 0 if self._classifier else int(self._n_outputs_fitted),
            "n_positive": d.get("_n_positive"),
            "classes_given": bool(d.get("_classes_given", False)),
            "sparse_input": bool(d.get("_sparse_input", False)),
        }

    def _restore(
        self,
        *,
        spec: dict[str, Any],
        ledger: Any,
        make_state: Callable[[int], Any],
        n_outputs: int,
        n_positive: int | None,
        classes_given: bool,
        sparse_input: bool,
    ) -> Any:
        """Become the fitted model of these parts (a model file's, checked by persistence;
        the public fitted attributes are set by the caller); ``make_state(max_rank)`` builds
        the state with this estimator's budget of pending corrections.  Returns the state."""
        state = make_state(self._max_rank)
        self._spec = spec
        self._sparse_input = sparse_input
        ledger.growth = 1.25 if self._kernel else 1.5  # as in the estimators' _build
        if n_outputs:
            self._n_outputs = n_outputs
        self._classes_given = classes_given
        if n_positive is not None:
            self._n_positive = n_positive
        self._state = state
        self._ledger = ledger
        return state

    def _is_fitted(self):
        return hasattr(self, "_ledger")

    # --------------------------------------------------------------- updates
    def add(self, X: Any, y: Any, sample_weight: Any = None) -> np.ndarray:
        """Add samples; the model becomes exactly the fit on the enlarged data.

        Parameters
        ----------
        X : array-like of shape (k, n_features)
        y : array-like of shape (k,)
        sample_weight : array-like of shape (k,) or float, optional
            Their weights (default 1; see :meth:`fit`).

        Returns
        -------
        ids : ndarray of shape (k,)
            The stable ids given to the new samples.
        """
        return self.update(X_add=X, y_add=y, sample_weight_add=sample_weight)

    def reweight(self: _M, ids: Any, sample_weight: Any, *, X: Any = None, y: Any = None) -> _M:
        """Change the weights of existing samples, keeping their ids; the model becomes
        exactly the fit with the new weights (weight 0 silences a sample without removing
        it).

        Parameters
        ----------
        ids : array-like of int
        sample_weight : array-like of shape (len(ids),) or float
            The new non-negative weights.
        X, y : array-like, optional
            ``keep_data=False`` models only: the samples' rows (required) and current labels
            (required for a regressor; a classifier recognises them from the rows), checked
            against the stored digests, as for :meth:`relabel`.

        Returns
        -------
        self
        """
        self.update(reweight_ids=ids, reweight_weight=sample_weight, X_reweight=X, y_reweight=y)
        return self

    def remove(self, ids: Any = None, *, X: Any = None, y: Any = None) -> np.ndarray:
        """Remove samples by id (or, for ``keep_data=False`` models, by value).

        Parameters
        ----------
        ids : array-like of int, optional
            Ids of the samples to forget.
        X, y : array-like, optional
            The samples themselves.  Required with ``keep_data=False`` (the model stores neither
            rows nor labels; they are checked against the stored digests): ``remove(X=rows,
            y=labels)`` finds the samples by value, ``remove(ids, X=rows)`` checks that the
            rows are those samples (their labels, needed by the exact update, are then taken
            from ``y`` when given, else recognised from the rows; see ``keep_data``).

        Returns
        -------
        removed : ndarray of int
            The ids removed.
        """
        return self._update(remove_ids=ids, X_remove=X, y_remove=y)[1]

    def relabel(self: _M, ids: Any, y: Any, *, X: Any = None, y_old: Any = None) -> _M:
        """Change the labels (targets) of existing samples, keeping their ids.

        Parameters
        ----------
        ids : array-like of int
        y : array-like
            The corrected labels; for classifiers one of ``classes_``.
        X : array-like, optional
            The samples' rows, required with ``keep_data=False`` (the model keeps neither rows
            nor labels: the rows, with the current labels, are checked against the stored
            digests).
        y_old : array-like, optional
            The samples' current labels, which the exact update needs: required for a
            ``keep_data=False`` regressor (it keeps no target); a ``keep_data=False``
            classifier recognises them from the rows (given, they are checked).

        Returns
        -------
        self
        """
        self.update(relabel_ids=ids, y_relabel=y, X_relabel=X, y_relabel_old=y_old)
        return self

    def update(
        self,
        *,
        X_add: Any = None,
        y_add: Any = None,
        remove_ids: Any = None,
        X_remove: Any = None,
        y_remove: Any = None,
        relabel_ids: Any = None,
        y_relabel: Any = None,
        X_relabel: Any = None,
        y_relabel_old: Any = None,
        sample_weight_add: Any = None,
        reweight_ids: Any = None,
        reweight_weight: Any = None,
        X_reweight: Any = None,
        y_reweight: Any = None,
    ) -> np.ndarray:
        """Any mix of additions, removals, relabels and reweights as one exact update (one
        transaction).

        The arguments are those of :meth:`add` (``X_add``, ``y_add``, ``sample_weight_add``),
        :meth:`remove` (``remove_ids``, ``X_remove``, ``y_remove``), :meth:`relabel`
        (``relabel_ids``, ``y_relabel``, ``X_relabel``, ``y_relabel_old``) and
        :meth:`reweight` (``reweight_ids``, ``reweight_weight``, ``X_reweight``,
        ``y_reweight``).

        Returns
        -------
        ids : ndarray of int
            The ids of the added samples (empty when nothing is added).
        """
        return self._update(
            X_add=X_add,
            y_add=y_add,
            remove_ids=remove_ids,
            X_remove=X_remove,
            y_remove=y_remove,
            relabel_ids=relabel_ids,
            y_relabel=y_relabel,
            X_relabel=X_relabel,
            y_relabel_old=y_relabel_old,
            sample_weight_add=sample_weight_add,
            reweight_ids=reweight_ids,
            reweight_weight=reweight_weight,
            X_reweight=X_reweight,
            y_reweight=y_reweight,
        )[0]

    def _update(self, **change):
        """One update as a transaction: on any exception, an interruption included, the model is
        left as it was (see :meth:`_transaction`); updates of one model are serialised."""
        if "_ledger" not in self.__dict__:  # (scikit-learn's check reads the tags: slower)
            check_is_fitted(self, "_ledger")
        # dask rows, labels, ids or weights of an update are the size of the change: gathered
        change = {k: gathered(v) for k, v in change.items()}
        return self._locked(self._update_locked, **change)

    def _update_locked(self, **change):
        """Plan the update (:meth:`_plan_update`: every check, nothing changed), then carry
        it out (:meth:`_transaction`); under the model's lock."""
        plan, rem_slots = self._plan_update(**change)
        return self._transaction(plan, rem_slots)

    def _transaction(self, plan, rem_slots):
        """The numerical work, then the ledger; all of it or none of it.

        The ledger journals its changes (O(size of the change)) and rolls them back on any
        exception.  A state that raised ValueError has restored itself; after any other
        exception (an interruption, say) a state may be half-updated, and is restored from its
        checkpoint (taken only where it cannot be rebuilt: a closed-form model without stored
        rows) or rebuilt from the restored ledger by a fresh solve.
        """
        led, saved = self._ledger, dict(self.__dict__)
        checkpoint = None if led.keep_rows else self._state.checkpoint()
        in_state = False
        led.begin()
        try:
            in_state = True
            new_ids = self._apply(plan)
            in_state = False
            removed = led.ids[rem_slots].copy()
            if rem_slots.size:
                led.delete(rem_slots)
            if plan.relabels:
                digests = (
                    led.records(plan.relabel_rows, plan.relabel_t) if led.keep_digests else None
                )
                led.relabel(plan.relabel_slots, led.stored_labels(plan.relabel_t), digests)
            if plan.reweights:
                led.reweight(plan.reweight_slots, plan.reweight_w)
            new_ids = self._commit_add(plan, new_ids)
            if "_n_positive" in self.__dict__:
                self._n_positive = self._positives_after(plan)
            self._after_update()
            self._bump_version()
        except BaseException as exc:
            led.rollback()
            self.__dict__.clear()
            self.__dict__.update(saved)
            if not (in_state and isinstance(exc, ValueError)):
                self._restore_state(checkpoint)
                # the state object is a new one: views taken before (problem_, what-if
                # objects) must see that they are stale, though the model is the same
                self._bump_version()
            raise
        led.commit()
        return new_ids, removed

    def _restore_state(self, checkpoint):
        """Make the state exact for the (restored) ledger again: from ``checkpoint`` when one
        was taken, else by solving afresh on the stored rows (O(n p²) or O(n³), paid only
        after an interrupted update)."""
        if checkpoint is not None:
            self._state = checkpoint
            return
        led, st = self._ledger, self._state
        led.compact()
        n = led.n_samples
        rows = led.X[:n]
        data = self._k(rows, rows) if self._kernel else rows
        w = led.weights(np.arange(n))
        self._state = st.blank().fit(
            data, led.y[:n].copy(), led.capacity, **({} if w is None else {"w": w.copy()})
        )

    def _bump_version(self):
        """Count the changes of the fitted model, so that objects derived from it (the
        sensitivity what-if objects) can tell when they are stale."""
        self._version = getattr(self, "_version", 0) + 1

    def _commit_add(self, plan, slots):
        if not plan.adds:
            return np.zeros(0, dtype=np.int64)
        Xa, ta = plan.X_add, plan.t_add
        led = self._ledger
        digests = led.records(Xa, ta) if led.keep_digests else None
        return led.insert(slots, self._stored_rows(Xa), led.stored_labels(ta), digests, plan.w_add)

    def _after_update(self):
        led = self._ledger
        led.release(self._state.reusable_slots())
        if led.capacity > 256 and led.n_samples < led.capacity // 4:
            keep = led.compact()
            self._state.take(keep, led.capacity)

    def save(self, path: str | os.PathLike) -> None:
        """Write the fitted model to ``path``; deprecated, use ``deltafit.save(model, path)``.

        .. deprecated::
            ``model.save(path)`` warns (FutureWarning) and will be removed; the one way to save
            and load is ``deltafit.save(model, path)`` / ``deltafit.load(path)``, which also
            take an :class:`deltafit.UpdatablePipeline`.  It writes the same file (npz + JSON,
            no pickle), under the model's lock.
        """
        warnings.warn(
            "model.save(path) is deprecated and will be removed; use deltafit.save(model, path)",
            FutureWarning,
            stacklevel=2,
        )
        save = type(self)._save_file
        if save is None:  # deltafit.persistence not imported (import deltafit imports it)
            raise RuntimeError(
                "model.save needs deltafit.persistence: use deltafit.save(model, path)"
            )
        save(self, path)

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.input_tags.sparse = self._sparse_refusal(fitting=True) is None
        return tags
