"""Leave-one-out data values (pyDVL's ``LOOValuation``: ``v(i) = U(N) − U(N∖{i})``) of every
training sample, from the exact leave-one-out effects of :mod:`deltafit.attribution._effects`
instead of n refits (Koh & Liang, "Understanding black-box predictions via influence
functions", §1, and Ghorbani & Zou, "Data Shapley: equitable valuation of data for machine
learning", for the leave-one-out value as the baseline of data valuation)."""

from __future__ import annotations

from typing import Any

import numpy as np
from numpy.typing import ArrayLike
from scipy.special import expit
from sklearn.base import BaseEstimator, ClassifierMixin, RegressorMixin
from sklearn.metrics import check_scoring

from deltafit.attribution._common import labels_of
from deltafit.attribution._effects import iter_effects

__all__ = ["data_values", "DataValues"]


class DataValues:
    """Leave-one-out data values of a model's training samples.

    Attributes
    ----------
    values : ndarray of shape (n,)
        ``score(all) − score(all but i)``: positive for samples that help the score, negative
        for harmful ones.
    ids : ndarray of shape (n,)
        The samples' ids (``model.sample_ids_``).
    names : ndarray of shape (n,)
        Names of the samples (``names=`` of :func:`data_values`; default the ids).
    score : float
        The score of the model trained on all samples.
    scoring : str
        What was scored.
    algorithm : str
        ``"exact_loo"``.

    Notes
    -----
    Laid out as pyDVL's ``ValuationResult`` (``values``, ``indices`` -> ``ids``, ``names``),
    so that the two can be compared row by row.

    Examples
    --------
    >>> import deltafit
    >>> from deltafit.attribution import data_values
    >>> from deltafit.datasets import load_breast_cancer
    >>> X, y = load_breast_cancer()
    >>> m = deltafit.LinearClassifier(loss="logistic").fit(X[:100], y[:100])
    >>> v = data_values(m, X[100:], y[100:], scoring="neg_log_loss")
    >>> v.to_frame().columns.tolist()
    ['name', 'value']
    >>> len(v.most_harmful(3))
    3
    """

    algorithm = "exact_loo"

    def __init__(
        self, values: ArrayLike, ids: ArrayLike, names: ArrayLike | None, score: float, scoring: str
    ) -> None:
        self.values = np.asarray(values, dtype=np.float64)
        self.ids = np.asarray(ids)
        self.names = self.ids.copy() if names is None else np.asarray(names)
        self.score, self.scoring = float(score), str(scoring)

    def __len__(self):
        return self.values.size

    def __repr__(self):
        return (
            f"DataValues(n={len(self)}, scoring={self.scoring!r}, score={self.score:.6g}, "
            f"algorithm={self.algorithm!r})"
        )

    def to_frame(self) -> Any:
        """The values as a pandas DataFrame indexed by id (columns ``name``, ``value``), most
        valuable first."""
        import pandas as pd

        order = np.argsort(-self.values, kind="stable")
        return pd.DataFrame(
            {"name": self.names[order], "value": self.values[order]},
            index=pd.Index(self.ids[order], name="id"),
        )

    def most_valuable(self, k: int = 10) -> np.ndarray:
        """Ids of the ``k`` samples of largest value."""
        return self.ids[np.argsort(-self.values, kind="stable")[:k]]

    def most_harmful(self, k: int = 10) -> np.ndarray:
        """Ids of the ``k`` samples of smallest (most negative) value."""
        return self.ids[np.argsort(self.values, kind="stable")[:k]]


class _Frozen(BaseEstimator):
    """Given decision values in the guise of a fitted estimator, for scikit-learn scorers."""

    def __init__(self, model, z, m):
        self.model, self.z, self.m = model, z, m

    def _check(self, X):
        if len(X) != self.m:  # pragma: no cover - the scorer passes the scored rows
            raise ValueError("a frozen estimator scores only the rows it was made for")

    def predict(self, X):
        self._check(X)
        if hasattr(self, "classes_"):
            return labels_of(self.classes_, self.z)
        return self.z

    def decision_function(self, X):
        self._check(X)
        return self.z


class _FrozenClassifier(ClassifierMixin, _Frozen):
    def __init__(self, model, z, m):
        super().__init__(model, z, m)
        self.classes_ = model.classes_
        if hasattr(model, "predict_proba"):
            self.predict_proba = self._proba

    def _proba(self, X):
        self._check(X)
        p = expit(self.z)
        if p.ndim == 1:
            return np.column_stack([1.0 - p, p])
        return p / p.sum(axis=1, keepdims=True)


class _FrozenRegressor(RegressorMixin, _Frozen):
    pass


def _default_scores(model, classifier, Z, y):
    """``model.score`` of every row of Z (decision values): accuracy or R²."""
    if classifier:
        return (labels_of(model.classes_, Z) == y[None, :]).mean(axis=1)
    y = y.astype(np.float64)
    tot = ((y - y.mean()) ** 2).sum()
    res = ((Z - y[None, :]) ** 2).sum(axis=1)
    if tot == 0:
        return np.where(res == 0, 1.0, 0.0)
    return 1.0 - res / tot


def data_values(
    model: Any,
    X: ArrayLike,
    y: ArrayLike,
    *,
    scoring: Any = None,
    ids: ArrayLike | None = None,
    names: ArrayLike | None = None,
    chunk_size: int = 256,
    tol: float | None = None,
) -> DataValues:
    """Leave-one-out data value of every training sample: ``score(all) − score(all but i)``.

    The models without each sample are not refit: their decision values on ``X`` are the
    model's plus the exact effects of :func:`~deltafit.attribution.loo_effects`, computed a
    chunk at a time (memory O(chunk_size · m)).  The values equal those of n brute-force
    refits (pyDVL's ``LOOValuation``) up to the solver's certified tolerance.  With the default
    score of a logistic or squared-hinge linear classifier (accuracy: labels only), the
    left-out problems of a sample (every class's at once) stop as soon as their certified
    intervals (effect ± radius · ‖Φ(x)‖, the ball of each left-out solution) decide every
    label, and at the latest at a loose tolerance; a sample whose intervals still leave a
    label undecided is solved again to the model's tolerance, so every value is still exact.

    Parameters
    ----------
    model : fitted deltafit estimator (``keep_data=True``)
    X : array-like of shape (m, n_features)
        Validation rows the utility is scored on.
    y : array-like of shape (m,)
        Their labels / targets.
    scoring : str, callable or None
        A scikit-learn scorer (``"accuracy"``, ``"neg_log_loss"``, ``"roc_auc"``, ...,
        or ``scorer(estimator, X, y)``); default ``model.score`` (accuracy or R²).
    ids : array-like of int, optional
        Samples to value (default all, in ``sample_ids_`` order).
    names : array-like, optional
        Names of the valued samples, kept in the result.
    chunk_size : int, default=256
    tol : float, optional
        As in :func:`~deltafit.attribution.loo_effects`.

    Returns
    -------
    DataValues

    Raises
    ------
    ValueError
        For X and y of different lengths, names of the wrong length, an unknown scorer, or
        the errors of :func:`~deltafit.attribution.loo_effects`.

    References
    ----------
    Ghorbani & Zou, "Data Shapley: equitable valuation of data for machine learning" (ICML
    2019), for leave-one-out as the baseline value; pyDVL's ``LOOValuation``.

    Examples
    --------
    >>> import deltafit
    >>> from deltafit.attribution import data_values
    >>> from deltafit.datasets import load_breast_cancer
    >>> X, y = load_breast_cancer()
    >>> m = deltafit.LinearClassifier(loss="logistic").fit(X[:200], y[:200])
    >>> v = data_values(m, X[200:], y[200:])
    >>> len(v), v.values.shape
    (200, (200,))
    """
    # label-based values (the default accuracy) need only certain labels: the left-out
    # problems are first solved to a loose tolerance, and those whose certified intervals leave
    # a label undecided are solved again to the model's
    labels_only = (
        scoring is None
        and tol is None
        and hasattr(model, "classes_")
        and getattr(model, "loss", None) in ("logistic", "squared_hinge")
        and hasattr(model, "coef_")
    )
    # each left-out problem stops as soon as its certified intervals decide every label
    known: dict = {}

    def decided(P, effects, R):  # the hardest validation rows are checked first
        bt, hard = known["base_t"], known["hard"]
        ok = _certain([Ek + bt[k, hard] for k, Ek in enumerate(effects(rows=hard))], R, known["mh"])
        sub = np.flatnonzero(ok)
        if sub.size:
            Es = effects(sub)
            ok[sub] = _certain([Ek + bt[k] for k, Ek in enumerate(Es)], R[sub], known["mnorm"])
        known["certified"][P[ok]] = True
        return ok

    fitted, base, chunks = iter_effects(
        model,
        X,
        ids=ids,
        chunk_size=chunk_size,
        tol=_LOOSE if labels_only else tol,
        what="data_values",
        decided=decided if labels_only else None,
    )
    if labels_only:  # the generator runs only when iterated
        bt = known["base_t"] = np.ascontiguousarray(base.T if base.ndim == 2 else base[None])
        mnorm = known["mnorm"] = np.linalg.norm(fitted.mapped(fitted.rows_of(X)), axis=1)
        srt = np.sort(bt, axis=0)
        gap = (srt[-1] - srt[-2] if bt.shape[0] > 1 else np.abs(srt[0])) / np.maximum(mnorm, 1e-300)
        order = np.argsort(gap, kind="stable")
        known["hard"] = order[:_HARD]
        known["mh"] = mnorm[known["hard"]]
        known["certified"] = np.zeros(fitted.n, dtype=bool)
    y = np.asarray(y)
    if y.ndim != 1 or y.shape[0] != base.shape[0]:
        raise ValueError(
            f"y must have one value per row of X ({base.shape[0]}), got shape {y.shape}"
        )
    n_ids = fitted.n if ids is None else len(np.asarray(ids))
    if names is not None and np.asarray(names).shape[:1] != (n_ids,):
        raise ValueError(
            f"names must have one entry per valued sample ({n_ids}), got "
            f"{np.asarray(names).shape[:1]}"
        )
    classifier = fitted.classifier
    if scoring is None:
        full = float(_default_scores(model, classifier, base[None], y)[0])
        what = "accuracy" if classifier else "r2"

        def scores(Z):
            return _default_scores(model, classifier, Z, y)
    else:
        scorer = check_scoring(model, scoring=scoring)
        kind = _FrozenClassifier if classifier else _FrozenRegressor
        m = base.shape[0]

        def one(z):
            return float(scorer(kind(model, z, m), X, y))

        full = one(base)
        what = scoring if isinstance(scoring, str) else getattr(scoring, "__name__", "scorer")

        def scores(Z):
            return np.array([one(z) for z in Z])

    values, all_ids, redo = [], [], []
    mnorm = known.get("mnorm")
    for part_ids, E, R in chunks:
        Z = base[None] + E
        values.append(full - scores(Z))
        all_ids.append(part_ids)
        if labels_only:  # those not certified during the solve: checked once more
            rows = np.flatnonzero(~known["certified"][np.searchsorted(fitted.ids, part_ids)])
            redo.append(part_ids[rows[~_labels_certain(Z[rows], R[rows], mnorm)]])
    out = np.concatenate(values) if values else np.empty(0)
    ids_out = np.concatenate(all_ids) if all_ids else np.empty(0, dtype=np.int64)
    again = np.concatenate(redo) if redo else np.empty(0, dtype=np.int64)
    if again.size:  # to the model's tolerance (the exact update where that does not settle)
        at = {int(i): j for j, i in enumerate(ids_out)}
        _, _, more = iter_effects(
            model,
            X,
            ids=again,
            chunk_size=chunk_size,
            what="data_values",
            decided=decided,
        )
        for part_ids, E, _ in more:
            out[[at[int(i)] for i in part_ids]] = full - scores(base[None] + E)
    return DataValues(out, ids_out, names, full, what)


#: the gradient norm to which label-based values first solve the left-out problems
_LOOSE = 1e-4
#: validation rows (those of smallest certified margin) checked before the others
_HARD = 32


def _labels_certain(Z, R, mnorm):
    """Rows of Z (B, m) or (B, m, K) whose every label is decided by the certified intervals
    ``Z ± R · ‖Φ(x)‖`` (R: (B,) or (B, K))."""
    if Z.ndim == 2:
        return _certain([Z], R[:, None], mnorm)
    return _certain([Z[..., k] for k in range(Z.shape[2])], R, mnorm)


def _certain(Zs, R, mnorm):
    """Rows whose every label is decided by the intervals ``Zs[k] ± R[:, k] · ‖Φ(x)‖``: Zs, K
    arrays (B, m) of one class's decision values each (one: two classes, the sign), R (B, K).

    With K classes a row first passes the cheaper sufficient test with every class's radius
    the row's largest (the two largest values more than two half-widths apart); the rows it
    does not settle take the exact test: a label is decided when the largest lower end ``L``
    is above every other class's upper end, i.e. when exactly one upper end reaches ``L``."""
    scale = mnorm[None, :] * (1 + 1e-9)
    if len(Zs) == 1:
        return (np.abs(Zs[0]) > R[:, :1] * scale).all(axis=1)
    first = np.maximum(Zs[0], Zs[1])
    second = np.minimum(Zs[0], Zs[1])
    for Zk in Zs[2:]:
        np.maximum(second, np.minimum(first, Zk), out=second)
        np.maximum(first, Zk, out=first)
    first -= second
    ok = (first > 2.0 * R.max(axis=1)[:, None] * scale).all(axis=1)
    rows = np.flatnonzero(~ok)
    if rows.size:
        ok[rows] = _certain_exact([Zk[rows] for Zk in Zs], R[rows], scale)
    return ok


def _certain_exact(Zs, R, scale):
    halves = [R[:, k : k + 1] * scale for k in range(len(Zs))]
    low = Zs[0] - halves[0]
    for Zk, hk in zip(Zs[1:], halves[1:]):
        np.maximum(low, Zk - hk, out=low)
    count = np.zeros(low.shape, dtype=np.int8)
    for Zk, hk in zip(Zs, halves):
        count += Zk + hk >= low
    return (count == 1).all(axis=1)
