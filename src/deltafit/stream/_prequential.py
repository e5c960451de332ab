"""Prequential (test-then-train) evaluation of a stream learner (Gama et al. 2013)."""

from __future__ import annotations

import itertools
import time
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from numpy.typing import ArrayLike, NDArray
from sklearn.base import is_classifier
from sklearn.exceptions import NotFittedError

from deltafit.utils._progress import progress_bar
from deltafit.utils._validation import check_bool, check_int

__all__ = ["prequential", "StreamReport"]


@dataclass
class StreamReport:
    """What :func:`prequential` measured.

    Attributes
    ----------
    n_samples : int
    accuracy : float or None
        Fraction of correct predictions (classifiers), every sample counted.
    correct : ndarray of bool or None
        Per sample: was the prediction made before learning it right (classifiers).
    errors : ndarray of float or None
        Per sample: prediction − target (regressors).
    mse, mae : float or None
        Mean squared / absolute prequential error (regressors).
    n_model_computations : int
        Batch model computations the learner made during the run (its
        ``n_model_computations_`` after minus before; 0 for purely online learners).
    computation_at : ndarray of int
        Indices of the samples after whose learning a computation happened (a drift detection
        for KDR and DDM).
    time_s : float
        Wall-clock time of the run.

    Examples
    --------
    >>> import numpy as np
    >>> from deltafit.stream import LSQSGD, prequential
    >>> rng = np.random.default_rng(0)
    >>> X = rng.normal(size=(300, 2)) / 2
    >>> y = X @ np.array([0.5, -0.5])
    >>> report = prequential(LSQSGD(), (X, y))   # a regressor: errors, mse and mae
    >>> report.errors.shape, report.accuracy is None, bool(report.mse < 0.1)
    ((300,), True, True)
    """

    n_samples: int
    n_model_computations: int
    computation_at: np.ndarray
    time_s: float
    correct: np.ndarray | None = None
    errors: np.ndarray | None = None
    accuracy: float | None = None
    mse: float | None = None
    mae: float | None = None
    learner: str = field(default="")

    def accuracy_over_time(self, window: int = 1000) -> NDArray[np.float64]:
        """Accuracy over the last ``window`` samples at every sample (a moving mean of
        ``correct``; shorter at the start)."""
        if self.correct is None:
            raise ValueError("accuracy_over_time needs a classifier's report")
        window = check_int(window, "window", low=1)
        c = np.concatenate([[0], np.cumsum(self.correct, dtype=np.float64)])
        i = np.arange(1, self.n_samples + 1)
        lo = np.maximum(i - window, 0)
        return (c[i] - c[lo]) / (i - lo)

    def summary(self) -> str:
        """A one-line description."""
        what = (
            f"accuracy {self.accuracy:.4f}"
            if self.accuracy is not None
            else f"MSE {self.mse:.4g}, MAE {self.mae:.4g}"
        )
        return (
            f"{self.learner}: {what} over {self.n_samples} samples, "
            f"{self.n_model_computations} model computations, {self.time_s:.2f} s"
        )


def _pairs(stream):
    """(x, y) pairs from (X, y) arrays, a Bunch with data/target, or an iterable of pairs."""
    if hasattr(stream, "data") and hasattr(stream, "target"):
        stream = (stream.data, stream.target)
    if isinstance(stream, tuple) and len(stream) == 2 and hasattr(stream[0], "shape"):
        X, y = stream
        X = np.asarray(X, dtype=np.float64) if not hasattr(X, "toarray") else X.toarray()
        y = np.asarray(y)
        if X.ndim != 2 or y.ndim != 1 or X.shape[0] != y.shape[0]:
            raise ValueError(
                f"stream arrays must be X of shape (n, d) and y of shape (n,), got {X.shape} "
                f"and {y.shape}"
            )
        labels = y.tolist()
        return zip(X, labels), X.shape[0]
    try:
        n = len(stream)
    except TypeError:
        n = None
    return iter(stream), n


def prequential(
    learner: Any,
    stream: tuple[ArrayLike, ArrayLike] | Iterable[tuple[Any, Any]],
    *,
    n_samples: int | None = None,
    progress: bool = False,
) -> StreamReport:
    """Test-then-train evaluation: predict each sample, score, then learn it (Gama et al. 2013).

    Parameters
    ----------
    learner : stream learner
        Anything with ``predict_one(x)`` and ``learn_one(x, y)``: :class:`KDR`,
        :class:`SlidingWindow`, :class:`DDM`, :class:`NORMA`, :class:`Pegasos`, a river model.
        It is used as it is (not cloned) and keeps learning from where it stands.
    stream : (X, y) arrays, a Bunch with ``data`` / ``target``, or an iterable of (x, y)
        x may be a 1-d array or a dict (river's datasets).
    n_samples : int, optional
        Stop after this many samples.
    progress : bool, default=False
        Show a progress bar (tqdm, optional extra ``deltafit[progress]``).

    Returns
    -------
    StreamReport
        Accuracy (classifiers) or MSE/MAE (regressors), per-sample results, the number of model
        computations and where they happened.

    Notes
    -----
    A sample that the learner cannot predict yet (``predict_one`` raising
    ``NotFittedError``, or any ValueError on the very first sample) counts as an error.

    Examples
    --------
    >>> import numpy as np
    >>> from deltafit.stream import Pegasos, prequential
    >>> rng = np.random.default_rng(0)
    >>> X = rng.normal(size=(500, 2))
    >>> y = (X[:, 0] + X[:, 1] > 0).astype(int)
    >>> report = prequential(Pegasos(lam=1e-2), (X, y))   # predict each sample, then learn it
    >>> report.n_samples, report.correct.shape, report.n_model_computations
    (500, (500,), 0)
    >>> bool(report.accuracy > 0.9)
    True
    """
    check_bool(progress, "progress")
    if not (hasattr(learner, "predict_one") and hasattr(learner, "learn_one")):
        raise ValueError(
            f"prequential needs a learner with predict_one and learn_one, got "
            f"{type(learner).__name__}"
        )
    pairs, n = _pairs(stream)
    if n_samples is not None:
        n_samples = check_int(n_samples, "n_samples", low=1)
        n = n_samples if n is None else min(n, n_samples)
    classifier = is_classifier(learner) or _river_classifier(learner)
    before = int(getattr(learner, "n_model_computations_", 0) or 0)
    last = before
    out, at = [], []
    t0 = time.perf_counter()
    bar = progress_bar(total=n, desc="prequential", enabled=progress)
    try:
        if n_samples is not None:
            pairs = itertools.islice(pairs, n_samples)  # a shared iterator loses nothing more
        for i, (x, y) in enumerate(pairs):
            try:
                pred = learner.predict_one(x)
            except NotFittedError:  # a learner that cannot predict yet: an error
                pred = None
            except ValueError:
                if i:  # only the very first sample may come before anything was learned
                    raise
                pred = None
            if classifier:
                out.append(pred is not None and pred == y)
            else:
                out.append(np.nan if pred is None else float(pred) - float(y))
            learner.learn_one(x, y)
            now = int(getattr(learner, "n_model_computations_", 0) or 0)
            if now != last:
                at.append(i)
                last = now
            bar.update(1)
    finally:
        bar.close()
    elapsed = time.perf_counter() - t0
    if not out:
        raise ValueError("the stream is empty")
    report = StreamReport(
        n_samples=len(out),
        n_model_computations=last - before,
        computation_at=np.asarray(at, dtype=np.int64),
        time_s=elapsed,
        learner=type(learner).__name__,
    )
    if classifier:
        report.correct = np.asarray(out, dtype=bool)
        report.accuracy = float(report.correct.mean())
    else:
        e = np.asarray(out, dtype=np.float64)
        report.errors = e
        ok = e[np.isfinite(e)]
        report.mse = float(np.mean(ok**2)) if ok.size else float("nan")
        report.mae = float(np.mean(np.abs(ok))) if ok.size else float("nan")
    return report


def _river_classifier(learner):
    try:
        from river import base
    except ImportError:
        return False
    return isinstance(learner, base.Classifier)
