"""The learners TreeCV drives, behind one small interface.

TreeCV (Joulani et al. 2015, Algorithm 1) needs four things of an incremental learner: train it
further on some rows, copy it (§4.1 "copy"), save and restore it (§4.1 "save/revert"), and score
it on a chunk.  Each class here gives those for one family:

* :class:`CompiledLearner` — deltafit's stream learners (``Pegasos``, ``LSQSGD``): the state is one
  float vector (:mod:`deltafit.solvers._sgd`) and whole subtrees run in the compiled loop
  :func:`deltafit.model_selection._treecv_compiled.tree_run`;
* :class:`ExactLearner` — deltafit's exact estimators: ``fit`` then ``add``, reverted by
  ``remove`` (Lee et al.: the result is exactly the fit on the union, so TreeCV equals k refits);
* :class:`PartialFitLearner` — anything with scikit-learn's ``partial_fit``;
* :class:`RiverLearner` — river's ``learn_one`` / ``predict_one``.

``None`` is the model that has seen nothing (∅ in the paper); every method accepts it.
"""

from __future__ import annotations

import copy
from typing import Any, NoReturn

import numpy as np
from numpy.typing import ArrayLike
from sklearn.base import BaseEstimator, clone, is_classifier, is_regressor

__all__ = [
    "make_learner",
    "learner_is_classifier",
    "learner_is_regressor",
    "CompiledLearner",
    "ExactLearner",
    "PartialFitLearner",
    "RiverLearner",
    "ReplayEstimator",
]


def _has(obj, *names):
    return all(callable(getattr(obj, n, None)) for n in names)


def learner_is_classifier(learner: Any) -> bool:
    """scikit-learn's ``is_classifier``; river classifiers are those with ``predict_proba_one``."""
    try:
        return bool(is_classifier(learner))
    except AttributeError:  # no scikit-learn tags (river, user classes)
        return _has(learner, "learn_one", "predict_proba_one")


def learner_is_regressor(learner: Any) -> bool:
    """scikit-learn's ``is_regressor``; river regressors predict without ``predict_proba_one``."""
    try:
        return bool(is_regressor(learner))
    except AttributeError:
        return _has(learner, "learn_one", "predict_one") and not _has(learner, "predict_proba_one")


def _copy_model(model):
    # a class's own __copy__ is trusted to be deep enough (the stream learners copy their state);
    # object's default shallow copy would share arrays that partial_fit changes in place
    if model is None:
        return None
    if "__copy__" in type(model).__dict__ or any(
        "__copy__" in c.__dict__ for c in type(model).__mro__[1:] if c is not object
    ):
        return copy.copy(model)
    return copy.deepcopy(model)


class _Learner:
    """Common part: the data in fold order and the bookkeeping of updates."""

    compiled = False

    def __init__(self, template: Any, X: Any, y: Any, strategy: str) -> None:
        self.template = template
        self.X = X
        self.y = y
        self.strategy = strategy

    def copy(self, model: Any) -> Any:
        return _copy_model(model)

    def snapshot(self, model: Any) -> Any:
        return None if model is None else model.snapshot()

    def restore(self, model: Any, token: Any) -> Any:
        if token is None:
            return None
        model.restore(token)
        return model


class PartialFitLearner(_Learner):
    """A scikit-learn-style learner with ``partial_fit`` (classifiers get ``classes=``)."""

    def __init__(
        self, template: Any, X: Any, y: Any, strategy: str, classes: np.ndarray | None
    ) -> None:
        super().__init__(template, X, y, strategy)
        self.classes = classes

    def update(self, model: Any, rows: slice | np.ndarray) -> Any:
        if model is None:
            model = clone(self.template)
        if self.y is None:  # unsupervised (e.g. MiniBatchKMeans, IncrementalPCA)
            model.partial_fit(self.X[rows])
        elif self.classes is not None:
            model.partial_fit(self.X[rows], self.y[rows], classes=self.classes)
        else:
            model.partial_fit(self.X[rows], self.y[rows])
        return model

    def scoring_estimator(self, model: Any) -> Any:
        return model


class RiverLearner(_Learner):
    """A river learner: ``learn_one`` on ``{j: x_j}`` dicts, scored through :class:`RiverView`."""

    def __init__(
        self, template: Any, X: Any, y: Any, strategy: str, classes: np.ndarray | None
    ) -> None:
        super().__init__(template, X, y, strategy)
        self.classes = classes
        dense = X.toarray() if hasattr(X, "toarray") else np.asarray(X)
        self.rows_as_dicts = [dict(enumerate(r)) for r in dense.tolist()]
        self.targets = np.asarray(y).tolist()

    def update(self, model: Any, rows: slice | np.ndarray) -> Any:
        if model is None:
            model = self.template.clone()
        idx = range(rows.start, rows.stop) if isinstance(rows, slice) else rows.tolist()
        for i in idx:
            model.learn_one(self.rows_as_dicts[i], self.targets[i])
        return model

    def scoring_estimator(self, model: Any) -> Any:
        return RiverView(model, self.classes)


class ExactLearner(_Learner):
    """deltafit's exact estimators: ``fit`` on the first rows, ``add`` after, revert by ``remove``.

    A classifier cannot be fitted on rows of one class; such rows wait (as a tuple of index
    arrays, the model being the fit on their union once both classes are there), which changes
    nothing in the result: the model is a function of its training set only.

    With three or more classes in y the model is fitted with every class declared
    (``partial_fit(X, y, classes=np.unique(y))``): a node whose rows lack a class still has
    that class's one-vs-rest problem (no positive sample), so that later rows of that class can
    be added.  Where every training set holds every class (stratified folds) this is ``fit``.
    """

    def __init__(self, template: Any, X: Any, y: Any, strategy: str) -> None:
        super().__init__(template, X, y, strategy)
        self._classifier = learner_is_classifier(template)
        labels = np.unique(y) if self._classifier else None
        self._classes = labels if labels is not None and labels.size > 2 else None

    def _rows(self, rows):
        return np.arange(rows.start, rows.stop) if isinstance(rows, slice) else np.asarray(rows)

    def update(self, model: Any, rows: slice | np.ndarray) -> Any:
        if model is None or isinstance(model, tuple):
            pending = (model or ()) + (self._rows(rows),)
            idx = np.concatenate(pending)
            if self._classifier and np.unique(self.y[idx]).size < 2:
                return pending
            est = clone(self.template)
            if self._classes is not None:
                est.partial_fit(self.X[idx], self.y[idx], classes=self._classes)
            else:
                est.fit(self.X[idx], self.y[idx])
            return est
        model.add(self.X[rows], self.y[rows])
        return model

    def copy(self, model: Any) -> Any:
        return model if isinstance(model, tuple) else _copy_model(model)

    def snapshot(self, model: Any) -> Any:
        if model is None or isinstance(model, tuple):
            return ("pending", model)
        return ("ids", model.sample_ids_.copy())

    def restore(self, model: Any, token: Any) -> Any:
        kind, value = token
        if kind == "pending":
            return value
        added = np.setdiff1d(model.sample_ids_, value, assume_unique=True)
        if added.size:
            model.remove(added)
        return model

    def scoring_estimator(self, model: Any) -> Any:
        if isinstance(model, tuple):
            raise ValueError(
                "a training set of TreeCV has a single class; "
                f"{type(self.template).__name__} needs both"
            )
        return model


class CompiledLearner(_Learner):
    """deltafit.stream learners: states are float vectors, subtrees run compiled."""

    compiled = True

    def __init__(
        self, template: Any, X: np.ndarray, y: np.ndarray, strategy: str, shuffle: bool, seed: int
    ) -> None:
        super().__init__(template, X, y, strategy)
        from deltafit.model_selection import _treecv_compiled
        from deltafit.solvers import _sgd as _sgd_kernels

        self.K = _sgd_kernels
        self.tree_run = _treecv_compiled.tree_run
        self.kind, self.params, self.state0 = template._tree_spec(X.shape[1])
        self.shuffle = shuffle
        self.seed = seed

    def update(self, model: Any, rows: slice | np.ndarray) -> Any:
        state = self.state0.copy() if model is None else model
        if isinstance(rows, slice):
            self.K.fit_range(self.kind, state, self.X, self.y, rows.start, rows.stop, self.params)
        else:
            self.K.fit_rows(self.kind, state, self.X, self.y, rows, self.params)
        return state

    def copy(self, model: Any) -> Any:
        return None if model is None else model.copy()

    def snapshot(self, model: Any) -> Any:
        return None if model is None else model.copy()

    def restore(self, model: Any, token: Any) -> Any:
        if token is None:
            return None
        model[:] = token
        return model

    def subtree(
        self, model: Any, bounds: np.ndarray, s: int, e: int, out: np.ndarray
    ) -> np.ndarray:
        """Run Algorithm 1 over chunks ``s .. e`` in compiled code.

        Returns ``[samples fed, update calls, peak models]``.
        """
        state = self.state0.copy() if model is None else model
        counts = np.zeros(3, dtype=np.int64)
        self.tree_run(
            self.kind,
            state,
            self.X,
            self.y,
            bounds,
            s,
            e,
            self.strategy == "revert",
            self.shuffle,
            self.seed,
            self.params,
            out,
            counts,
        )
        return counts

    def decision(self, model: Any, start: int, stop: int, out: np.ndarray) -> None:
        state = self.state0 if model is None else model
        self.K.decision_range(self.kind, state, self.X, start, stop, self.params[2], out)


def make_learner(learner: Any, X: Any, y: Any, strategy: str, shuffle: bool, seed: int) -> Any:
    """The :class:`_Learner` for ``learner`` (checked: ValueError if TreeCV cannot drive it)."""
    from deltafit.models import UpdatableMixin

    if _has(learner, "_tree_spec", "_tree_targets", "_tree_predict"):
        return CompiledLearner(learner, X, y, strategy, shuffle, seed)
    if isinstance(learner, UpdatableMixin):
        return ExactLearner(learner, X, y, strategy)
    if strategy == "revert" and not _has(learner, "snapshot", "restore"):
        raise ValueError(
            f"strategy='revert' needs a learner with snapshot() and restore(); "
            f"{type(learner).__name__} has none: use strategy='copy'"
        )
    if _has(learner, "partial_fit"):
        classes = np.unique(y) if learner_is_classifier(learner) else None
        return PartialFitLearner(learner, X, y, strategy, classes)
    if _has(learner, "learn_one", "predict_one"):
        classes = np.unique(y) if _has(learner, "predict_proba_one") else None
        return RiverLearner(learner, X, y, strategy, classes)
    raise ValueError(
        f"TreeCV needs an incremental learner: {type(learner).__name__} has no partial_fit, "
        "no learn_one and is not a deltafit estimator"
    )


# ---------------------------------------------------------------------------
# scikit-learn views for scorers
# ---------------------------------------------------------------------------
class _View(BaseEstimator):
    """Base of the read-only views handed to scikit-learn scorers (never fitted by anyone).

    ``classes`` (None for a regressor) decides the estimator type scorers see.
    """

    def __sklearn_is_fitted__(self):
        return True

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.estimator_type = "classifier" if self.classes is not None else "regressor"
        return tags

    @property
    def classes_(self) -> np.ndarray | None:
        return self.classes

    def fit(self, X: Any, y: Any = None) -> NoReturn:
        raise TypeError(f"{type(self).__name__} only replays a model for scoring; it is not fitted")

    def score(self, X: Any, y: ArrayLike) -> float:
        P = self.predict(X)
        if self.classes is not None:
            return float(np.mean(P == np.asarray(y)))
        from sklearn.metrics import r2_score

        return float(r2_score(y, P))


class RiverView(_View):
    """A river model seen as a scikit-learn estimator, for scorers (predict, predict_proba)."""

    def __init__(self, model: Any = None, classes: Any = None) -> None:
        self.model = model
        self.classes = classes

    def _dicts(self, X):
        dense = X.toarray() if hasattr(X, "toarray") else np.asarray(X)
        return [dict(enumerate(r)) for r in dense.tolist()]

    def predict(self, X: Any) -> np.ndarray:
        out = [self.model.predict_one(x) for x in self._dicts(X)]
        return np.asarray(out, dtype=None if self.classes is not None else np.float64)

    def predict_proba(self, X: Any) -> np.ndarray:
        P = np.zeros((len(X), len(self.classes)))
        for i, x in enumerate(self._dicts(X)):
            p = self.model.predict_proba_one(x)
            for j, c in enumerate(self.classes):
                P[i, j] = p.get(c.item() if hasattr(c, "item") else c, 0.0)
        return P


class ReplayEstimator(_View):
    """Replays out-of-fold predictions to a scikit-learn scorer, one fold at a time.

    Scorers call ``predict`` / ``decision_function`` on the fold's rows; the view returns the
    stored values of the rows of the current fold (``positions``, set before each call), which
    are what the fold's model predicted — so any scorer built on those two methods gives the
    live model's score without keeping k models.
    """

    def __init__(
        self,
        decision: np.ndarray | None = None,
        y_pred: np.ndarray | None = None,
        classes: np.ndarray | None = None,
        positions: Any = None,
    ) -> None:
        self.decision = decision
        self.y_pred = y_pred
        self.classes = classes
        self.positions = positions

    def _fold(self, values, X):
        v = values[self.positions]
        if len(v) != X.shape[0]:
            raise ValueError("the scorer asked for predictions on other rows than the fold's")
        return v

    def predict(self, X: Any) -> np.ndarray:
        return self._fold(self.y_pred, X)

    def decision_function(self, X: Any) -> np.ndarray:
        return self._fold(self.decision, X)
