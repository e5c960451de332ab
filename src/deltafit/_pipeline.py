"""Pipelines whose transformers are fitted once and then frozen, ending in an updatable model.

:func:`make_pipeline` / :class:`UpdatablePipeline` (a :class:`sklearn.pipeline.Pipeline`): the
first ``fit`` fits the transformers, later data changes (``add``, ``remove``, ``relabel``,
``update``, ``partial_fit``) transform their rows through the fitted ("frozen") transformers
and update the final estimator exactly; a second ``fit`` refits everything.

The other layers take a pipeline through two helpers: :func:`unwrap` (a fitted pipeline: its
final estimator and the frozen transform; ``deltafit.sensitivity``) and :func:`freeze` (an
unfitted pipeline and the data: transformers fitted once on all of it, the transformed rows and
the final estimator; ``loo``, ``cross_validate``, ``LOOSearchCV``, ``treecv``).  Persistence
(``deltafit.save`` / ``deltafit.load``) lives in :mod:`deltafit.persistence`.

This module is a private helper of the models' floor (ARCHITECTURE.md, "Floors"): it reads the
final estimator through its public update API only (any estimator with ``fit``, ``add``,
``remove``, ``relabel`` and ``update``), so that ``models`` can import it and not the reverse.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any, TypeAlias, TypeVar

import numpy as np
import scipy.sparse as sp
from numpy.typing import ArrayLike
from sklearn.base import clone
from sklearn.pipeline import Pipeline
from sklearn.pipeline import make_pipeline as _sk_make_pipeline
from sklearn.utils.validation import check_is_fitted

__all__ = [
    "UpdatablePipeline",
    "make_pipeline",
    "unwrap",
    "freeze",
    "PipelineSensitivity",
    "is_passthrough",
]

_UPDATE_API = ("fit", "add", "remove", "relabel", "update")
_FINAL_ALIAS = "estimator"

#: Rows: array-like (a DataFrame included) or a scipy sparse matrix.
Rows: TypeAlias = ArrayLike | sp.spmatrix
_P = TypeVar("_P", bound="UpdatablePipeline")


def is_passthrough(step: Any) -> bool:
    """Whether a pipeline step is ``None`` or ``"passthrough"`` (no transformer)."""
    return step is None or (isinstance(step, str) and step == "passthrough")


def _fit_transform(step: Any, X: Any, y: Any) -> tuple[Any, Any]:
    """A clone of ``step`` fitted on ``X`` and ``X`` transformed by it (as ``Pipeline.fit``
    does; a ``FrozenEstimator`` stays as it is)."""
    step = clone(step)
    if hasattr(step, "fit_transform"):
        return step, step.fit_transform(X, y)
    return step, step.fit(X, y).transform(X)


class UpdatablePipeline(Pipeline):
    """A scikit-learn ``Pipeline`` whose final step is updated exactly when the data change.

    The first :meth:`fit` fits the transformers (scikit-learn's ``Pipeline.fit``); from then
    on they are **frozen**: :meth:`add`, :meth:`remove`, :meth:`relabel`, :meth:`update` and
    :meth:`partial_fit` pass the rows they are given through the fitted transformers
    (``transform`` only) and forward the change to the final estimator, which updates
    exactly.  After any sequence of updates the pipeline equals
    ``make_pipeline(<the fitted transformers, frozen>, <a fresh fit of the final estimator on
    the transformed rows it holds>)`` — not a refit of the whole pipeline, whose scaler would
    see the new data.  A second :meth:`fit` refits everything, as in scikit-learn.

    Build it with :func:`deltafit.make_pipeline`, or from named steps as any ``Pipeline``.

    Parameters
    ----------
    steps : list of (str, estimator) tuples
        Transformers (or ``"passthrough"``) followed by the final estimator, which must be
        updatable: a deltafit estimator (``LinearClassifier``, ``KernelRegressor``, ...) or
        any estimator with ``fit``, ``add``, ``remove``, ``relabel`` and ``update``.
    transform_input, memory, verbose
        As in :class:`sklearn.pipeline.Pipeline` (``memory`` caches the transformers of
        ``fit`` only; updates never refit them).

    Attributes
    ----------
    sample_ids_ : ndarray of int
        The final estimator's sample ids (``fit`` gives ``0..n-1``).
    n_samples_ : int
        The number of samples the final estimator holds.
    problem_ : FittedProblem
        The final estimator's fitted problem, in the transformed feature space.
    classes_, n_features_in_, feature_names_in_, named_steps
        As in scikit-learn's ``Pipeline``.

    Notes
    -----
    Every update is one transaction of the final estimator: the rows are transformed first
    (a transformer that refuses them raises before anything changes), and a failed update
    leaves the pipeline as it was.  ``deltafit.sensitivity(pipe)``, ``loo``,
    ``cross_validate``, ``LOOSearchCV``, ``treecv`` and ``deltafit.save`` / ``deltafit.load``
    accept the pipeline; see their documentation for how they treat the transformers.

    Examples
    --------
    >>> import numpy as np
    >>> import deltafit
    >>> from sklearn.preprocessing import StandardScaler
    >>> from deltafit.datasets import load_breast_cancer
    >>> X, y = load_breast_cancer()
    >>> pipe = deltafit.make_pipeline(StandardScaler(), deltafit.LinearClassifier())
    >>> pipe = pipe.fit(X[:400], y[:400])             # the scaler is fitted here, then frozen
    >>> ids = pipe.add(X[400:], y[400:])              # raw rows: transformed, then added
    >>> _ = pipe.remove(ids[:3])
    >>> scaler = pipe.named_steps["standardscaler"]
    >>> keep = np.r_[0:400, 403:len(y)]
    >>> fresh = deltafit.LinearClassifier().fit(scaler.transform(X[keep]), y[keep])
    >>> bool(np.allclose(pipe.decision_function(X), fresh.decision_function(scaler.transform(X))))
    True
    """

    steps: list[tuple[str, Any]]  # scikit-learn's Pipeline sets it

    # ------------------------------------------------------------------ fitting
    def _check_final(self) -> Any:
        """ValueError unless the final step is an updatable estimator."""
        if not self.steps:
            raise ValueError("the pipeline has no steps")
        name, est = self.steps[-1]
        missing = [m for m in _UPDATE_API if not callable(getattr(est, m, None))]
        if is_passthrough(est) or missing:
            raise ValueError(
                f"the final step {name!r} of an UpdatablePipeline must be a deltafit estimator "
                f"(or another estimator with {', '.join(_UPDATE_API)}); got "
                f"{est!r}" + (f", which has no {', '.join(missing)}" if missing else "")
            )
        return est

    def fit(self: _P, X: Rows, y: ArrayLike | None = None, **params: Any) -> _P:
        """Fit the transformers and the final estimator (scikit-learn's ``Pipeline.fit``).

        The fitted transformers are then frozen: updates only transform.

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)
        y : array-like of shape (n_samples,)
        **params
            Routed as by ``Pipeline.fit`` (``stepname__param``).

        Returns
        -------
        self
        """
        self._check_final()
        return super().fit(X, y, **params)

    def _transform_frozen(self, X: Any) -> Any:
        """``X`` through the fitted transformers (``transform`` only); None stays None."""
        if X is None:
            return None
        for _, step in self.steps[:-1]:
            if not is_passthrough(step):
                X = step.transform(X)
        return X

    def _fitted_final(self) -> Any:
        est = self._check_final()
        check_is_fitted(self)
        return est

    # ------------------------------------------------------------------ updates
    def add(self, X: Rows, y: ArrayLike, sample_weight: ArrayLike | None = None) -> np.ndarray:
        """Add samples: their rows are transformed, the final estimator updates exactly.

        Parameters
        ----------
        X : array-like of shape (k, n_features)
            Raw rows, as for ``fit``.
        y : array-like of shape (k,)
        sample_weight : array-like of shape (k,), optional
            Their weights (the final estimator's ``add``).

        Returns
        -------
        ids : ndarray of shape (k,)
            The ids given to the new samples.
        """
        est = self._fitted_final()
        if sample_weight is None:
            return est.add(self._transform_frozen(X), y)
        return est.add(self._transform_frozen(X), y, sample_weight=sample_weight)

    def reweight(
        self: _P,
        ids: ArrayLike,
        sample_weight: ArrayLike | float,
        *,
        X: Rows | None = None,
        y: ArrayLike | None = None,
    ) -> _P:
        """Change the weights of existing samples (the final estimator's ``reweight``; rows,
        if given, are transformed).

        Parameters
        ----------
        ids : array-like of int
        sample_weight : array-like or float
        X : array-like, optional
            Raw rows, required by ``keep_data=False`` final estimators.
        y : array-like, optional

        Returns
        -------
        self
        """
        est = self._fitted_final()
        est.reweight(ids, sample_weight, X=self._transform_frozen(X), y=y)
        return self

    def remove(
        self, ids: ArrayLike | None = None, *, X: Rows | None = None, y: ArrayLike | None = None
    ) -> Any:
        """Remove samples by id, or by value (``keep_data=False`` final estimators).

        Parameters
        ----------
        ids : array-like of int, optional
        X : array-like of shape (k, n_features), optional
            Raw rows; transformed before the final estimator checks them against what it
            stores (its digests, for ``keep_data=False``).
        y : array-like, optional

        Returns
        -------
        The final estimator's ``remove`` result.
        """
        est = self._fitted_final()
        out = est.remove(ids, X=self._transform_frozen(X), y=y)
        return self if out is est else out

    def relabel(
        self, ids: ArrayLike, y: ArrayLike, *, X: Rows | None = None, y_old: ArrayLike | None = None
    ) -> Any:
        """Change the labels of existing samples (rows, if given, are transformed).

        Parameters
        ----------
        ids : array-like of int
        y : array-like
        X : array-like, optional
            Raw rows, required by ``keep_data=False`` final estimators.
        y_old : array-like, optional

        Returns
        -------
        The final estimator's ``relabel`` result.
        """
        est = self._fitted_final()
        out = est.relabel(ids, y, X=self._transform_frozen(X), y_old=y_old)
        return self if out is est else out

    def update(
        self,
        *,
        X_add: Rows | None = None,
        y_add: ArrayLike | None = None,
        remove_ids: ArrayLike | None = None,
        X_remove: Rows | None = None,
        y_remove: ArrayLike | None = None,
        relabel_ids: ArrayLike | None = None,
        y_relabel: ArrayLike | None = None,
        X_relabel: Rows | None = None,
        y_relabel_old: ArrayLike | None = None,
        **weights: Any,
    ) -> np.ndarray:
        """Any mix of additions, removals and relabels as one exact update of the final step.

        The arguments are those of the final estimator's ``update``; ``X_add``, ``X_remove``,
        ``X_relabel`` (and ``X_reweight``) are raw rows, transformed by the frozen transformers
        first.  ``**weights``: ``sample_weight_add``, ``reweight_ids``, ``reweight_weight``,
        ``X_reweight``, ``y_reweight``, forwarded.

        Returns
        -------
        ids : ndarray of int
            The ids of the added samples.
        """
        est = self._fitted_final()
        t = self._transform_frozen
        if "X_reweight" in weights:
            weights["X_reweight"] = t(weights["X_reweight"])
        return est.update(
            X_add=t(X_add),
            y_add=y_add,
            remove_ids=remove_ids,
            X_remove=t(X_remove),
            y_remove=y_remove,
            relabel_ids=relabel_ids,
            y_relabel=y_relabel,
            X_relabel=t(X_relabel),
            y_relabel_old=y_relabel_old,
            **weights,
        )

    def partial_fit(self: _P, X: Rows, y: ArrayLike, classes: ArrayLike | None = None) -> _P:
        """scikit-learn's incremental spelling: :meth:`add` on a fitted pipeline.

        On an unfitted pipeline the transformers are fitted on this first batch (clones; they
        replace the steps only if the final estimator's ``partial_fit`` succeeds) and frozen.

        Parameters
        ----------
        X : array-like of shape (k, n_features)
        y : array-like of shape (k,)
        classes : array-like, optional
            Passed to the final estimator's ``partial_fit`` on the first call.

        Returns
        -------
        self
        """
        est = self._check_final()
        fitted = self.__sklearn_is_fitted__()
        steps: list[tuple[str, Any]]
        if fitted:
            steps, Xt = self.steps[:-1], self._transform_frozen(X)
        else:
            steps, Xt = [], X
            for name, step in self.steps[:-1]:
                if not is_passthrough(step):
                    step, Xt = _fit_transform(step, Xt, y)
                steps.append((name, step))
        if not callable(getattr(est, "partial_fit", None)):
            if not fitted:
                raise ValueError(f"the final step {self.steps[-1][0]!r} has no partial_fit")
            est.add(Xt, y)
        elif classes is None:
            est.partial_fit(Xt, y)
        else:
            est.partial_fit(Xt, y, classes=classes)
        self.steps = steps + [self.steps[-1]]
        return self

    # ------------------------------------------------------------------ state
    @property
    def sample_ids_(self) -> np.ndarray:
        """The final estimator's sample ids."""
        return self._final_estimator.sample_ids_

    @property
    def n_samples_(self) -> int:
        """The number of samples the final estimator holds."""
        return self._final_estimator.n_samples_

    @property
    def problem_(self) -> Any:
        """The final estimator's ``FittedProblem`` (in the transformed feature space)."""
        return self._final_estimator.problem_


def make_pipeline(*steps: Any, memory: Any = None, verbose: bool = False) -> UpdatablePipeline:
    """An :class:`UpdatablePipeline` from estimators, named as scikit-learn's ``make_pipeline``
    names them (the lower-cased class name: ``standardscaler``, ``linearclassifier``).

    Parameters
    ----------
    *steps : estimators
        Transformers, then an updatable final estimator (checked at ``fit``).
    memory : str, joblib.Memory or None
        As in scikit-learn (caches the transformers' ``fit``).
    verbose : bool

    Returns
    -------
    UpdatablePipeline

    Examples
    --------
    >>> import deltafit
    >>> from sklearn.preprocessing import StandardScaler
    >>> pipe = deltafit.make_pipeline(StandardScaler(), deltafit.LinearClassifier())
    >>> [name for name, _ in pipe.steps]
    ['standardscaler', 'linearclassifier']
    """
    named = _sk_make_pipeline(*steps, memory=memory, verbose=verbose)
    return UpdatablePipeline(named.steps, memory=memory, verbose=verbose)


# =============================================================================================
# what the upper layers use
# =============================================================================================
def unwrap(model: Any) -> tuple[Any, Callable[[Any], Any] | None]:
    """``(final_estimator, transform)`` of a fitted :class:`UpdatablePipeline` (``transform``:
    raw rows through the frozen transformers); ``(model, None)`` for anything else."""
    if not isinstance(model, UpdatablePipeline):
        return model, None
    return model._fitted_final(), model._transform_frozen


class FrozenPipeline:
    """A pipeline's transformers fitted once on all the data, for cross-validation.

    Attributes
    ----------
    final : estimator
        An unfitted clone of the final estimator.
    X : array-like
        The rows through the fitted transformers.
    """

    def __init__(
        self,
        pipeline: UpdatablePipeline,
        steps: list[tuple[str, Any]],
        final_name: str,
        final: Any,
        X: Any,
    ) -> None:
        self._pipeline, self._steps, self._final_name = pipeline, steps, final_name
        self.final, self.X = final, X

    @property
    def n_features_in(self) -> int:
        """The number of raw features (the first transformer's ``n_features_in_``)."""
        for _, step in self._steps:
            if not is_passthrough(step):
                return step.n_features_in_
        return self.X.shape[1]

    def final_params(self, params: Mapping[str, Any]) -> dict[str, Any]:
        """A pipeline parameter setting (``<final step>__C`` or ``estimator__C``) as the final
        estimator's (``C``); ValueError for a transformer's or an unknown parameter."""
        out = {}
        for key, val in params.items():
            prefix, sep, param = key.partition("__")
            final = prefix == self._final_name or (
                prefix == _FINAL_ALIAS and _FINAL_ALIAS not in dict(self._steps)
            )
            if not sep or not final:
                raise ValueError(
                    f"cannot search {key!r} on an UpdatablePipeline: the transformers are fitted "
                    "once on all the data and frozen, so only the final step's parameters can "
                    f"be searched, as '{self._final_name}__<param>' (or "
                    f"'{_FINAL_ALIAS}__<param>')"
                )
            if param in out:
                raise ValueError(f"parameter {param!r} of the final step is given twice")
            out[param] = val
        return out

    def wrap(self, fitted_final: Any) -> UpdatablePipeline:
        """The pipeline of the frozen transformers and ``fitted_final``."""
        p = self._pipeline
        kwargs = {k: v for k, v in p.get_params(deep=False).items() if k != "steps"}
        return type(p)(list(self._steps) + [(self._final_name, fitted_final)], **kwargs)


def freeze(estimator: Any, X: Any, y: Any = None) -> FrozenPipeline | None:
    """For the cross-validation entry points: an unfitted :class:`UpdatablePipeline`'s
    transformers fitted (clones) on all of ``X`` and frozen, as a :class:`FrozenPipeline`;
    None for any other estimator."""
    if not isinstance(estimator, UpdatablePipeline):
        return None
    final = estimator._check_final()
    steps: list[tuple[str, Any]] = []
    Xt = X
    for name, step in estimator.steps[:-1]:
        if not is_passthrough(step):
            step, Xt = _fit_transform(step, Xt, y)
        steps.append((name, step))
    return FrozenPipeline(estimator, steps, estimator.steps[-1][0], clone(final), Xt)


class PipelineSensitivity:
    """``deltafit.sensitivity(pipe)``: the what-if object of the final estimator, taking raw rows.

    Every method that takes rows (:meth:`add`, :meth:`remove`, :meth:`relabel`,
    :meth:`reweight`, :meth:`decision_bounds`, :meth:`tightness`, :meth:`predict_certain`)
    passes them through the pipeline's frozen transformers first; everything else
    (``distance_bound``, ``coef_bounds`` — in the transformed feature space —, ``undo``,
    ``reset``, ``sphere``, the counts) is the final estimator's
    :class:`~deltafit.sensitivity.Sensitivity`'s.  The balls
    returned by ``sphere()`` live in the transformed space: give them transformed rows
    (``transform``).

    Attributes
    ----------
    sensitivity : Sensitivity
        The final estimator's what-if object.
    transform : callable
        Raw rows to the final estimator's features (the frozen transformers).
    """

    def __init__(self, sensitivity: Any, transform: Callable[[Any], Any]) -> None:
        self.sensitivity = sensitivity
        self.transform = transform

    def _same(self, out: Any) -> Any:
        return self if out is self.sensitivity else out

    def add(self, X: Rows, y: ArrayLike, sample_weight: ArrayLike | None = None) -> Any:
        """Hypothetically add samples (raw rows), optionally weighted as the final estimator's
        what-if takes them; returns their hypothetical ids."""
        return self._same(self.sensitivity.add(self.transform(X), y, sample_weight=sample_weight))

    def remove(
        self, ids: ArrayLike | None = None, *, X: Rows | None = None, y: ArrayLike | None = None
    ) -> Any:
        """Hypothetically remove samples by id, or by raw rows (``keep_data=False``)."""
        return self._same(self.sensitivity.remove(ids, X=self.transform(X), y=y))

    def relabel(
        self, ids: ArrayLike, y: ArrayLike, *, X: Rows | None = None, y_old: ArrayLike | None = None
    ) -> Any:
        """Hypothetically relabel samples (raw rows where the final estimator needs them)."""
        return self._same(self.sensitivity.relabel(ids, y, X=self.transform(X), y_old=y_old))

    def reweight(
        self,
        ids: ArrayLike,
        sample_weight: ArrayLike | float,
        *,
        X: Rows | None = None,
        y: ArrayLike | None = None,
    ) -> Any:
        """Hypothetically reweight samples (raw rows where the final estimator needs them)."""
        return self._same(self.sensitivity.reweight(ids, sample_weight, X=self.transform(X), y=y))

    def decision_bounds(self, X: Rows) -> Any:
        """Bounds on the retrained pipeline's ``decision_function`` at raw rows ``X``."""
        return self.sensitivity.decision_bounds(self.transform(X))

    def tightness(self, X: Rows) -> np.ndarray:
        """The bounds' widths at raw rows ``X``."""
        return self.sensitivity.tightness(self.transform(X))

    def predict_certain(self, X: Rows) -> Any:
        """Labels at raw rows ``X`` and which of them the retrained pipeline is certain to give."""
        return self.sensitivity.predict_certain(self.transform(X))

    def undo(self) -> Any:
        """Undo the last change."""
        return self._same(self.sensitivity.undo())

    def reset(self) -> Any:
        """Drop every pending change."""
        return self._same(self.sensitivity.reset())

    def __getattr__(self, name: str) -> Any:
        if name in ("sensitivity", "transform") or name.startswith("__"):
            raise AttributeError(name)
        return getattr(self.sensitivity, name)

    def __repr__(self) -> str:
        return f"PipelineSensitivity({self.sensitivity!r})"
