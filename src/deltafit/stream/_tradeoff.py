"""The experiment of Sivan et al. Fig. 3: accuracy against model computations on a stream."""

from __future__ import annotations

import itertools
from collections.abc import Callable, Sequence
from typing import Any, cast

import numpy as np
from numpy.typing import ArrayLike
from sklearn.model_selection import StratifiedKFold, cross_val_score

from deltafit.models import KernelClassifier
from deltafit.stream._kdr import KDR
from deltafit.stream._prequential import prequential
from deltafit.stream._window import SlidingWindow
from deltafit.utils._validation import check_int, check_rows

__all__ = ["tune_stream", "tradeoff_experiment", "ALGORITHMS"]

ALGORITHMS = ("SW", "KDR", "DDM(SW)", "DDM(NORMA)", "NORMA")


def _kernel_classifier(gamma, C):
    return KernelClassifier(loss="squared_hinge", kernel="rbf", gamma=gamma, C=C)


def tune_stream(
    X: np.ndarray, y: np.ndarray, window: int, *, n_tune: int = 1000
) -> dict[str, float]:
    """The paper's tuning (§4.4): on the first ``n_tune`` samples, the RBF ``gamma`` and ``C``
    of ``KernelClassifier(loss="squared_hinge")`` by 3-fold CV over a small grid, NORMA's
    kernel width, learning rate and regularisation by prequential accuracy, and ``r0``: the
    ``‖r‖`` of the ball between two disjoint windows of those samples (the scale of KDR's
    threshold).

    Returns
    -------
    dict with gamma, C, cv_accuracy, norma_gamma, norma_eta, norma_lam, norma_accuracy, r0

    Examples
    --------
    >>> import numpy as np
    >>> from deltafit.stream import tune_stream
    >>> rng = np.random.default_rng(0)
    >>> X = rng.normal(size=(200, 2))
    >>> y = (X[:, 0] > 0).astype(int)
    >>> params = tune_stream(X, y, window=50, n_tune=200)
    >>> sorted(params)
    ['C', 'cv_accuracy', 'gamma', 'norma_accuracy', 'norma_eta', 'norma_gamma', 'norma_lam', 'r0']
    >>> bool(params["r0"] > 0)
    True
    """
    from deltafit.stream._norma import NORMA

    classes = np.unique(y)
    X, y = X[:n_tune], y[:n_tune]
    d = X.shape[1]
    best: Any = None  # (accuracy, gamma, C) once the grid has a point
    for g, C in itertools.product([0.5, 2.0, 8.0, 32.0], [1.0, 10.0, 100.0]):
        acc = cross_val_score(_kernel_classifier(g / d, C), X, y, cv=StratifiedKFold(3)).mean()
        if best is None or acc > best[0]:
            best = (float(acc), g / d, C)
    acc, gamma, C = best
    nbest: Any = None  # (accuracy, eta, lam, gamma)
    for gm, eta, lam in itertools.product([0.25, 1.0, 4.0], [0.25, 1.0], [1e-4, 1e-3, 1e-2]):
        r = prequential(
            _online(
                NORMA(kernel="rbf", gamma=gm * gamma, eta=eta, lam=lam, budget=window), classes
            ),
            (X, y),
        )
        if nbest is None or r.accuracy > nbest[0]:
            nbest = (r.accuracy, eta, lam, gm * gamma)
    w = min(window, X.shape[0] // 2)
    kdr = KDR(_kernel_classifier(gamma, C), window=w, threshold=1e300)
    kdr.partial_fit(X[: 2 * w], y[: 2 * w])
    return {
        "gamma": gamma,
        "C": C,
        "cv_accuracy": acc,
        "norma_gamma": nbest[3],
        "norma_eta": nbest[1],
        "norma_lam": nbest[2],
        "norma_accuracy": nbest[0],
        "r0": float(np.max(kdr.sphere_.r_norm)),
    }


def _online(learner, classes):
    """A binary online learner as is for two classes, one-vs-rest over ``classes`` for more."""
    from deltafit.stream._ovr import OneVsRest

    return learner if classes.size <= 2 else OneVsRest(learner, classes=classes)


def _learners(params, window, periods, thresholds, ddm_levels, algorithms, classes):
    from deltafit.stream._ddm import DDM
    from deltafit.stream._norma import NORMA

    est = _kernel_classifier(params["gamma"], params["C"])

    def norma():
        return _online(
            NORMA(
                kernel="rbf",
                gamma=params["norma_gamma"],
                eta=params["norma_eta"],
                lam=params["norma_lam"],
                budget=window,
            ),
            classes,
        )

    if "SW" in algorithms:
        for p in periods:
            yield "SW", f"period={p}", SlidingWindow(est, window=window, period=p)
    if "KDR" in algorithms:
        for q in thresholds:
            yield "KDR", f"T={q:g}r0", KDR(est, window=window, threshold=q * params["r0"])
    for lvl in ddm_levels:
        if "DDM(SW)" in algorithms:
            yield (
                "DDM(SW)",
                f"drift={lvl:g}",
                DDM(est, window=window, drift_level=lvl, warning_level=lvl - 1.0),
            )
        if "DDM(NORMA)" in algorithms:
            yield (
                "DDM(NORMA)",
                f"drift={lvl:g}",
                DDM(norma(), window=window, drift_level=lvl, warning_level=lvl - 1.0),
            )
    if "NORMA" in algorithms:
        yield "NORMA", "", norma()


def tradeoff_experiment(
    X: ArrayLike,
    y: ArrayLike,
    *,
    window: int = 500,
    periods: Sequence[int] = (25, 50, 100, 250, 500, 1000),
    thresholds: Sequence[float] = (0.2, 0.3, 0.5, 0.75, 1.0, 1.5),
    ddm_levels: Sequence[float] = (2.5, 3.0, 4.0),
    algorithms: Sequence[str] = ALGORITHMS,
    params: dict[str, float] | None = None,
    n_tune: int = 1000,
    log: Callable[[str], Any] | None = None,
    progress: bool = False,
) -> tuple[list[dict[str, Any]], dict[str, float]]:
    """Prequential accuracy and model computations of every configuration (Fig. 3).

    Parameters
    ----------
    X, y : arrays, the stream in arrival order
        Two or more classes: the batch models are one-vs-rest, KDR keeps one ball per class
        (``r0`` is the largest class's ``‖r‖``) and NORMA is wrapped in
        :class:`~deltafit.stream.OneVsRest` over the stream's classes.
    window : int
        Window of SW, KDR, DDM(SW) and NORMA's budget.
    periods : SW's recomputation periods.
    thresholds : KDR's thresholds, as multiples of ``params["r0"]``.
    ddm_levels : DDM's drift levels (its warning level is one less).
    algorithms : subset of :data:`ALGORITHMS`.
    params : dict, optional
        :func:`tune_stream`'s output; computed on the first ``n_tune`` samples if omitted.
    log : callable, optional
        Called with one line per configuration.

    Returns
    -------
    rows : list of dict
        algorithm, config, accuracy, n_model_computations, time_s, computation_at.
    params : dict

    Examples
    --------
    >>> import numpy as np
    >>> from deltafit.stream import tradeoff_experiment
    >>> rng = np.random.default_rng(0)
    >>> X = rng.normal(size=(300, 2))
    >>> y = (X[:, 0] > 0).astype(int)
    >>> params = {"gamma": 0.5, "C": 1.0, "norma_gamma": 0.5, "norma_eta": 0.1,
    ...           "norma_lam": 1e-3, "r0": 0.1}
    >>> rows, _ = tradeoff_experiment(X, y, window=50, periods=(50,), thresholds=(1.0,),
    ...                               algorithms=("SW", "KDR"), params=params)
    >>> [(r["algorithm"], r["config"]) for r in rows]
    [('SW', 'period=50'), ('KDR', 'T=1r0')]
    >>> all(0 < r["accuracy"] <= 1 and r["n_model_computations"] >= 1 for r in rows)
    True
    """
    X = cast(np.ndarray, check_rows(X, None, "X"))
    y = np.asarray(y)
    if y.shape != (X.shape[0],):
        raise ValueError(f"y must have one label per row of X ({X.shape[0]})")
    window = check_int(window, "window", low=2)
    unknown = set(algorithms) - set(ALGORITHMS)
    if unknown:
        raise ValueError(f"unknown algorithms {sorted(unknown)}; choose from {ALGORITHMS}")
    if params is None:
        params = tune_stream(X, y, window, n_tune=n_tune)
    rows = []
    for algo, cfg, learner in _learners(
        params, window, periods, thresholds, ddm_levels, algorithms, np.unique(y)
    ):
        rep = prequential(learner, (X, y), progress=progress)
        rows.append(
            {
                "algorithm": algo,
                "config": cfg,
                "accuracy": rep.accuracy,
                "n_model_computations": rep.n_model_computations,
                "time_s": rep.time_s,
                "computation_at": rep.computation_at.tolist(),
            }
        )
        if log is not None:
            log(
                f"{algo:10s} {cfg:12s} accuracy {rep.accuracy:.4f}  computations "
                f"{rep.n_model_computations:6d}  {rep.time_s:6.1f} s"
            )
    return rows, params
