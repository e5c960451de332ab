"""What the attribution functions share: checks of the model and the rows, the per-class
problems of a fitted model (``model.problem_``), its decision values, and exact updates of a
copy of the model (the reference every shortcut is verified against)."""

from __future__ import annotations

import copy
import numbers

import numpy as np
import scipy.sparse as sp
from sklearn.exceptions import NotFittedError
from sklearn.utils.validation import check_array

from deltafit.kernels import kernel_rows
from deltafit.models import FittedProblem

__all__ = ["Fitted", "check_chunk", "check_ids", "labels_of"]


def check_chunk(chunk_size):
    """``chunk_size`` as a positive int (ValueError otherwise)."""
    if (
        isinstance(chunk_size, bool)
        or not isinstance(chunk_size, numbers.Integral)
        or chunk_size < 1
    ):
        raise ValueError(f"chunk_size must be a positive integer, got {chunk_size!r}")
    return int(chunk_size)


def check_ids(problem, ids):
    """Positions (in ``sample_ids_`` order) of the samples ``ids`` (None: all)."""
    all_ids = np.asarray(problem.sample_ids)
    if ids is None:
        return np.arange(all_ids.size)
    ids = np.asarray(ids)
    if ids.ndim != 1:
        raise ValueError(f"ids must be a 1-D list of sample ids, got shape {ids.shape}")
    if ids.size and not np.issubdtype(ids.dtype, np.integer):
        raise ValueError(
            f"ids must be integer sample ids (model.sample_ids_), got dtype {ids.dtype}"
        )
    pos = np.searchsorted(all_ids, ids)
    pos = np.minimum(pos, max(all_ids.size - 1, 0))
    bad = ids[(all_ids.size == 0) | (all_ids[pos] != ids)] if ids.size else ids[:0]
    if bad.size:
        raise ValueError(
            f"ids {bad[:5].tolist()} are not training samples of the model (model.sample_ids_)"
        )
    if np.unique(ids).size != ids.size:
        raise ValueError("ids must be distinct")
    return pos


def labels_of(classes, z):
    """Labels of decision values as a deltafit classifier decodes them: ``classes[1]`` where
    ``z > 0`` (two classes), else the class of the largest score."""
    if classes.size == 2:
        return classes[(np.asarray(z) > 0).astype(np.intp)]
    return classes[np.argmax(z, axis=-1)]


class Fitted:
    """A fitted deltafit estimator as the attribution functions read it: its problem view(s)
    (one per one-vs-rest class), its decision values and its live training rows.

    Parameters
    ----------
    model : fitted LinearClassifier, LinearRegressor, KernelClassifier or KernelRegressor
    what : str
        The operation, named in the error messages.

    Raises
    ------
    ValueError
        If ``model`` is not a deltafit estimator, has several regression outputs, or keeps no
        training rows.
    sklearn.exceptions.NotFittedError
        If it is not fitted.
    """

    def __init__(self, model, what):
        if not hasattr(type(model), "problem_"):
            raise ValueError(
                f"{what} needs a fitted deltafit estimator (LinearClassifier, LinearRegressor, "
                f"KernelClassifier, KernelRegressor), got {type(model).__name__}"
            )
        try:
            problem = model.problem_
        except AttributeError:
            raise NotFittedError(
                f"this {type(model).__name__} is not fitted yet; call fit before asking for {what}"
            ) from None
        if not isinstance(problem, FittedProblem):  # pragma: no cover - defensive
            raise ValueError(f"{what} needs a deltafit estimator's problem_ view")
        if problem.n_outputs:
            raise ValueError(
                f"{what} of a regressor with {problem.n_outputs} outputs is not "
                "available; fit one regressor per output"
            )
        if not problem.keeps_rows or problem.rows_on_cluster:
            raise ValueError(
                f"{what} needs the training rows on this machine "
                "(fit with keep_data=True and NumPy/SciPy input)"
            )
        self.model, self.problem, self.what = model, problem, what
        self.classifier = problem.classifier
        self.views = (
            [problem.for_class(k) for k in range(problem.n_classes)]
            if problem.n_classes
            else [problem]
        )
        self.multiclass = bool(problem.n_classes)
        self.kernel = problem.kernel
        self.loss = problem.loss.name
        self.live = np.asarray(problem.live)
        self.ids = np.asarray(problem.sample_ids)
        self.cache: dict = {}  # per-call factorisations

    @property
    def n(self):
        return self.live.size

    def decision(self, X):
        """The model's decision values on ``X`` (``decision_function`` of a classifier,
        ``predict`` of a regressor), checked by the model."""
        return self.decision_of(self.model, X)

    def decision_of(self, model, X):
        """Decision values of ``model`` (the model or an updated copy) on ``X``."""
        if self.classifier:
            return np.asarray(model.decision_function(X), dtype=np.float64)
        return np.asarray(model.predict(X), dtype=np.float64)

    def rows_of(self, X):
        """``X`` as validated float rows (dense) of the model's width."""
        X = check_array(X, dtype=np.float64, accept_sparse="csr")
        if X.shape[1] != self.problem.n_features_in:
            raise ValueError(
                f"X has {X.shape[1]} features, the model takes {self.problem.n_features_in}"
            )
        return X

    def mapped(self, Xv):
        """Φ(X) (linear models, dense) or ``k(X, x_live)`` (kernel models, m × n)."""
        p = self.problem
        if self.kernel:
            Xd = Xv.toarray() if sp.issparse(Xv) else Xv
            return kernel_rows(Xd, self.train_rows(), **p.kernel_params)
        F = p.features(Xv)
        return F.toarray() if sp.issparse(F) else np.asarray(F)

    def train_rows(self):
        """Stored rows of the live samples (Φ rows of a linear model, raw x of a kernel
        model), dense."""
        R = self.problem.rows[self.live]
        return R.toarray() if sp.issparse(R) else np.asarray(R)

    def weights(self):
        w = self.problem.sample_weights(self.live)
        return np.ones(self.n) if w is None else np.asarray(w, dtype=np.float64)

    def removed(self, positions):
        """A copy of the model with the samples at ``positions`` (``sample_ids_`` order)
        removed by the model's exact update; the model itself is unchanged."""
        m = copy.deepcopy(self.model)
        m.remove(self.ids[np.asarray(positions, dtype=np.intp)])
        return m
