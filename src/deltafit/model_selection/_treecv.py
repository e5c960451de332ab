"""TreeCV: k-fold and leave-one-out cross-validation of any incremental learner (Joulani et
al., "Fast cross-validation for incremental learning").

Joulani, György and Szepesvári, *Fast Cross-Validation for Incremental Learning* (IJCAI 2015).
Algorithm 1 trains the model shared by the folds ``s .. e`` once and branches: the left half of
the held-out chunks is evaluated by a model that additionally learned the right half, and vice
versa.  Every sample is learned once per level of the tree, so k-fold CV costs about
``(1 + c) log2(2k)`` single passes (Corollary 4) instead of ``k - 1``.
"""

from __future__ import annotations

import math
import time
import warnings
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np
import scipy.sparse as sp
from numpy.typing import ArrayLike
from sklearn.metrics import check_scoring, get_scorer
from sklearn.model_selection import KFold, LeaveOneOut, check_cv
from sklearn.utils import check_array, check_random_state

from deltafit._pipeline import freeze
from deltafit.model_selection._treecv_learners import (
    ReplayEstimator,
    learner_is_classifier,
    learner_is_regressor,
    make_learner,
)
from deltafit.utils._progress import progress_bar
from deltafit.utils._validation import check_bool

__all__ = ["treecv", "TreeCVResult"]


@dataclass(eq=False)
class TreeCVResult:
    """What :func:`treecv` returns.

    Attributes
    ----------
    score : float
        Mean of ``fold_scores`` (unweighted, as scikit-learn's ``cross_validate``).
    fold_scores : ndarray of shape (n_folds,)
        Score of the model trained without fold ``i`` on fold ``i``, folds in the order the
        splitter yields its test sets.
    fold_sizes : ndarray of shape (n_folds,)
    n_folds : int
    n_sample_updates : int
        Samples fed to the learner, all updates together (standard k-fold feeds ``(k - 1) n``;
        TreeCV about ``n log2 k``).
    n_updates : int
        Update calls (``partial_fit`` / ``add`` / compiled training phases).
    peak_models : int
        Most models (working ones, copies and snapshots) held at once; serially at most
        ``ceil(log2 k) + 2`` (§4.1).  With ``n_jobs`` it counts those of one worker plus the
        models waiting for the workers.
    strategy : str
    shuffle : bool
    n_jobs : int or None
    scoring : str
    time_s : float
        Wall-clock time of the whole run.
    decision : ndarray of shape (n_samples,) or None
        Out-of-fold decision values (the held-out model's), for deltafit's stream learners.
    y_pred : ndarray of shape (n_samples,) or None
        Out-of-fold predictions: always for deltafit's stream learners; for other learners when
        the score is computed from predictions (accuracy, r2, (root) mean squared or absolute
        error — the default), else None.

    Examples
    --------
    >>> import deltafit
    >>> from deltafit.model_selection import treecv
    >>> from deltafit.datasets import load_breast_cancer
    >>> X, y = load_breast_cancer()
    >>> r = treecv(deltafit.LinearClassifier(), X, y, cv=8)
    >>> r.n_folds, len(r.fold_scores), r.peak_models <= 3 + 2
    (8, 8, True)
    """

    score: float
    fold_scores: np.ndarray
    fold_sizes: np.ndarray
    n_folds: int
    n_sample_updates: int
    n_updates: int
    peak_models: int
    strategy: str
    shuffle: bool
    n_jobs: object
    scoring: str
    time_s: float
    decision: object = None
    y_pred: object = None

    def summary(self) -> str:
        """A few lines saying what was computed and how."""
        n = int(self.fold_sizes.sum())
        kind = "leave-one-out" if self.n_folds == n else f"{self.n_folds}-fold"
        order = "randomized" if self.shuffle else "fixed"
        std = float(np.nanstd(self.fold_scores))
        return (
            f"TreeCV {kind} CV of {n} samples ({order} order, strategy={self.strategy}): "
            f"{self.scoring} = {self.score:.6g} (fold std {std:.3g})\n"
            f"  {self.n_sample_updates} samples fed in {self.n_updates} updates "
            f"({self.n_sample_updates / max(n, 1):.2f} passes; standard CV: "
            f"{self.n_folds - 1 if self.n_folds < n else n - 1:.0f}), "
            f"at most {self.peak_models} models at once, {self.time_s:.3g} s"
        )


# ---------------------------------------------------------------------------
# folds
# ---------------------------------------------------------------------------
def _kfold_bounds(n, k):
    sizes = np.full(k, n // k, dtype=np.int64)
    sizes[: n % k] += 1
    return np.concatenate([[0], np.cumsum(sizes)])


def _folds(cv, X, y, groups, classifier):
    """``order`` (samples in fold order) and chunk ``bounds`` (k + 1 offsets into ``order``).

    Leave-one-out (``cv=n`` or ``LeaveOneOut()``) and unshuffled ``KFold`` are computed directly;
    other splitters are enumerated once and must partition the samples.
    """
    n = X.shape[0]
    if isinstance(cv, (int, np.integer)) and not isinstance(cv, bool):
        if cv < 2 or cv > n:
            raise ValueError(f"cv must be between 2 and n_samples={n}, got {cv}")
        if cv == n:
            cv = LeaveOneOut()
    if cv is None:
        cv = 5
    if isinstance(cv, LeaveOneOut):
        return np.arange(n), np.arange(n + 1), "leave-one-out"
    if type(cv) is KFold and not cv.shuffle:
        if cv.n_splits > n:
            raise ValueError(f"KFold(n_splits={cv.n_splits}) has more folds than samples ({n})")
        return np.arange(n), _kfold_bounds(n, cv.n_splits), f"{cv.n_splits}-fold"
    splitter = check_cv(cv, y, classifier=classifier)
    tests = [np.asarray(test, dtype=np.int64) for _, test in splitter.split(X, y, groups)]
    if len(tests) < 2:
        raise ValueError(f"TreeCV needs at least 2 folds, the splitter gave {len(tests)}")
    if any(t.size == 0 for t in tests):
        raise ValueError("a test fold of the splitter is empty")
    order = np.concatenate(tests)
    hits = np.bincount(order, minlength=n) if order.size and order.min() >= 0 else None
    if hits is None or order.size != n or hits.size != n or np.any(hits != 1):
        raise ValueError(
            f"the test folds of {type(splitter).__name__} do not partition the samples (each "
            "sample must be in exactly one test fold); TreeCV needs a partition such as KFold, "
            "StratifiedKFold, GroupKFold or LeaveOneOut"
        )
    bounds = np.concatenate([[0], np.cumsum([t.size for t in tests])]).astype(np.int64)
    return order, bounds, f"{len(tests)}-fold"


# ---------------------------------------------------------------------------
# scores
# ---------------------------------------------------------------------------
_FAST = {
    "accuracy",
    "neg_mean_squared_error",
    "neg_root_mean_squared_error",
    "neg_mean_absolute_error",
    "r2",
}


def _fast_fold_scores(name, y_true, y_pred, bounds):
    """Per-fold metrics from out-of-fold predictions (folds contiguous in ``bounds``)."""
    starts = bounds[:-1]
    sizes = np.diff(bounds).astype(np.float64)
    if name == "accuracy":
        return np.add.reduceat((y_true == y_pred).astype(np.float64), starts) / sizes
    r = y_true.astype(np.float64) - y_pred
    if name == "neg_mean_absolute_error":
        return -np.add.reduceat(np.abs(r), starts) / sizes
    mse = np.add.reduceat(r * r, starts) / sizes
    if name == "neg_mean_squared_error":
        return -mse
    if name == "neg_root_mean_squared_error":
        return -np.sqrt(mse)
    # r2 as sklearn.metrics.r2_score(force_finite=True); NaN for folds of one sample
    yt = y_true.astype(np.float64)
    mean = np.add.reduceat(yt, starts) / sizes
    tot = np.add.reduceat((yt - np.repeat(mean, np.diff(bounds))) ** 2, starts)
    res = mse * sizes
    with np.errstate(divide="ignore", invalid="ignore"):
        r2 = np.where(tot > 0, 1.0 - res / tot, np.where(res == 0, 1.0, 0.0))
    return np.where(sizes < 2, np.nan, r2)


def _resolve_scorer(probe, scoring):
    """scikit-learn's ``check_scoring``, also for learners with ``partial_fit`` but no ``fit``
    (which ``check_scoring`` refuses); ValueError naming the problem."""
    if callable(getattr(probe, "fit", None)):
        try:
            return check_scoring(probe, scoring=scoring)
        except TypeError as exc:  # no score method and no scoring, or an invalid scoring
            if scoring is None:
                raise ValueError(
                    f"scoring=None needs a learner with a score method: {exc}"
                ) from exc
            raise ValueError(f"invalid scoring {scoring!r}: {exc}") from exc
    if callable(scoring):
        return scoring
    if isinstance(scoring, str):
        try:
            return get_scorer(scoring)
        except ValueError as exc:
            raise ValueError(f"invalid scoring {scoring!r}: {exc}") from exc
    if scoring is None and callable(getattr(probe, "score", None)):
        return _own_score
    raise ValueError(
        f"scoring={scoring!r}: {type(probe).__name__} has no score method; "
        "pass a scorer name or callable"
    )


def _own_score(est, X, y=None):
    return est.score(X) if y is None else est.score(X, y)


def _check_replay_scorer(scorer, scoring, learner, X, y, classes):
    """Fail before the run if a scorer needs more than decision values and predictions."""
    if scoring is None or (isinstance(scoring, str) and scoring in _FAST):
        return
    m = min(X.shape[0], 8)
    zeros = np.zeros(m)
    view = ReplayEstimator(zeros, learner._tree_predict(zeros, classes), classes, slice(0, m))
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            scorer(view, X[:m], y[:m])
    except AttributeError as exc:
        raise ValueError(
            f"scoring={scoring!r} needs a prediction method that "
            f"{type(learner).__name__} does not have: {exc}"
        ) from exc
    except Exception:  # noqa: BLE001 - only the methods are checked here; values come later
        pass


def _scoring_name(scoring, learner, classifier):
    if scoring is None:
        if classifier:
            return "accuracy"
        return "r2" if learner_is_regressor(learner) else "score"
    if isinstance(scoring, str):
        return scoring
    return getattr(scoring, "__name__", type(scoring).__name__)


# ---------------------------------------------------------------------------
# the recursion (Algorithm 1)
# ---------------------------------------------------------------------------
class _Run:
    """One traversal of (part of) the tree: its results, counters and live models."""

    def __init__(
        self,
        learner: Any,
        bounds: np.ndarray,
        scorer: Any,
        y_ord: Any,
        shuffle: bool,
        seed: int,
        python_levels: int,
        bar: Any = None,
        predict: Any = None,
    ) -> None:
        self.L = learner
        self.predict = predict  # None, or the dtype of the out-of-fold predictions to keep
        self.bounds = bounds
        self.scorer = scorer
        self.y = y_ord
        self.shuffle = shuffle
        self.seed = seed
        self.python_levels = python_levels
        self.bar = bar if bar is not None else progress_bar(0, False)
        self.fold_scores: dict[int, float] = {}
        # out-of-fold decision values (compiled learners) or predictions (``predict``)
        self.out: Any  # None unless out-of-fold values are kept
        if learner.compiled:
            self.out = np.empty(int(bounds[-1]))
        elif predict is not None:
            self.out = np.empty(int(bounds[-1]), dtype=predict)
        else:
            self.out = None
        self.fed = 0
        self.calls = 0
        self.live = 1
        self.peak = 1

    def fork(self) -> _Run:
        """A fresh run over the same learner and data, for one parallel task."""
        return _Run(
            self.L,
            self.bounds,
            self.scorer,
            self.y,
            self.shuffle,
            self.seed,
            self.python_levels,
            predict=self.predict,
        )

    def rows(self, a: int, b: int) -> slice | np.ndarray:
        """Rows of chunks ``a .. b`` (contiguous), in a random order for a randomized run."""
        start, stop = int(self.bounds[a]), int(self.bounds[b + 1])
        if not self.shuffle:
            return slice(start, stop)
        from deltafit.model_selection._treecv_compiled import shuffled_positions

        buf = np.empty(stop - start, dtype=np.int64)
        shuffled_positions(start, stop, self.seed, a, b, buf)
        return buf

    def update(self, model: Any, a: int, b: int) -> Any:
        """The model trained further on chunks ``a .. b``."""
        self.fed += int(self.bounds[b + 1] - self.bounds[a])
        self.calls += 1
        return self.L.update(model, self.rows(a, b))

    def leaf(self, model: Any, s: int) -> None:
        start, stop = int(self.bounds[s]), int(self.bounds[s + 1])
        if self.L.compiled:
            self.L.decision(model, start, stop, self.out)
        else:
            est = self.L.scoring_estimator(model)
            if self.predict is not None:
                self.out[start:stop] = est.predict(self.L.X[start:stop])
            else:
                self.fold_scores[s] = float(
                    self.scorer(
                        est, self.L.X[start:stop], None if self.y is None else self.y[start:stop]
                    )
                )
        self.bar.update(1)

    def subtree(self, model: Any, s: int, e: int, level: int = 0) -> None:
        """TreeCV(s, e, model) of Algorithm 1: ``model`` has learned every chunk but ``s .. e``."""
        L = self.L
        while s < e:
            if L.compiled and level >= self.python_levels:
                counts = L.subtree(model, self.bounds, s, e, self.out)
                self.fed += int(counts[0])
                self.calls += int(counts[1])
                self.peak = max(self.peak, self.live - 1 + int(counts[2]))
                self.bar.update(e - s + 1)
                return
            m = (s + e) // 2
            self.live += 1
            self.peak = max(self.peak, self.live)
            if L.strategy == "copy":
                child = self.update(L.copy(model), m + 1, e)
                self.subtree(child, s, m, level + 1)
                del child
            else:
                token = L.snapshot(model)
                model = self.update(model, m + 1, e)
                self.subtree(model, s, m, level + 1)
                model = L.restore(model, token)
                del token
            self.live -= 1
            model = self.update(model, s, m)
            s = m + 1
            level += 1
        self.leaf(model, s)


def _grow(learner, model, rows):
    return learner.update(learner.copy(model), rows)


def _task(run, model, s, e, level):
    run.subtree(model, s, e, level)
    a, b = int(run.bounds[s]), int(run.bounds[e + 1])
    out = None if run.out is None else run.out[a:b].copy()
    return run.fold_scores, out, run.fed, run.calls, run.peak


def _parallel(run, n_jobs, k):
    """Expand the top levels, then run their subtrees through joblib (§4.1, "parallel").

    Each level's models are grown in parallel from their parents (a copy trained on the
    sibling's chunks), so the work done and the order of every update are the serial ones.
    """
    from joblib import Parallel, delayed, effective_n_jobs

    workers = max(1, effective_n_jobs(n_jobs))
    levels = min(math.ceil(math.log2(workers)) + 1, math.ceil(math.log2(k)))
    prefer = "threads" if run.L.compiled else None
    frontier = [(None, 0, k - 1)]
    with Parallel(n_jobs=n_jobs, prefer=prefer) as parallel:
        for _ in range(levels):
            jobs, nodes = [], []
            for model, s, e in frontier:
                if s == e:
                    nodes.append((model, s, e, None))
                    continue
                m = (s + e) // 2
                for a, b in ((m + 1, e), (s, m)):
                    run.fed += int(run.bounds[b + 1] - run.bounds[a])
                    run.calls += 1
                    jobs.append(delayed(_grow)(run.L, model, run.rows(a, b)))
                nodes.append((None, s, e, m))
            grown = iter(parallel(jobs))
            frontier = []
            for model, s, e, m in nodes:
                if m is None:
                    frontier.append((model, s, e))
                else:
                    frontier += [(next(grown), s, m), (next(grown), m + 1, e)]
        parts = parallel(
            delayed(_task)(run.fork(), model, s, e, levels) for model, s, e in frontier
        )
        peak = 0
        for (_, s, e), (scores, out, fed, calls, task_peak) in zip(frontier, parts):
            run.fold_scores.update(scores)
            if out is not None:
                run.out[int(run.bounds[s]) : int(run.bounds[e + 1])] = out
            run.fed += fed
            run.calls += calls
            peak = max(peak, task_peak)
            run.bar.update(e - s + 1)
    run.peak = len(frontier) - 1 + peak


# ---------------------------------------------------------------------------
# public entry point
# ---------------------------------------------------------------------------
def _check_data(X: Any, y: Any, compiled_learner: bool) -> tuple[Any, np.ndarray | None]:
    if compiled_learner:
        if sp.issparse(X):
            raise ValueError("deltafit.stream learners take dense X; convert it with .toarray()")
        X = check_array(X, dtype=np.float64, order="C", ensure_min_samples=2, input_name="X")
    else:
        X = check_array(
            X, accept_sparse="csr", dtype="numeric", ensure_min_samples=2, input_name="X"
        )
    if y is None:
        if compiled_learner:
            raise ValueError("y is required by deltafit.stream learners")
        return X, None
    y = np.asarray(y)
    if y.ndim == 2 and y.shape[1] == 1:
        y = y.ravel()
    if y.ndim != 1:
        raise ValueError(f"y must be 1-d, got shape {y.shape}")
    if y.shape[0] != X.shape[0]:
        raise ValueError(f"X has {X.shape[0]} samples but y has {y.shape[0]}")
    if y.dtype.kind in "fc" and not np.all(np.isfinite(y)):
        raise ValueError("y contains NaN or infinity")
    return X, y


def treecv(
    learner: Any,
    X: Any,
    y: Any = None,
    *,
    cv: Any = 5,
    scoring: str | Callable[..., float] | None = None,
    strategy: str = "copy",
    shuffle: bool = False,
    random_state: int | np.random.RandomState | None = None,
    n_jobs: int | None = None,
    groups: ArrayLike | None = None,
    progress: bool = False,
) -> TreeCVResult:
    """k-fold or leave-one-out cross-validation of an incremental learner by TreeCV.

    Joulani, György and Szepesvári (2015), Algorithm 1: the folds are the leaves of a binary
    tree; a node's model has learned every chunk outside its range, and each child adds the
    sibling's chunks, so every sample is learned once per level — ``O(n log k)`` updates instead
    of ``O(n k)`` (Theorem 3, Corollary 4).

    Parameters
    ----------
    learner : estimator
        Not modified.  A :class:`deltafit.UpdatablePipeline`'s transformers are fitted once on
        all of X and frozen; its final estimator is cross-validated on the transformed rows
        (a callable ``scoring`` receives the final estimator and transformed rows).  Either a
        ``deltafit.stream`` learner (``Pegasos``, ``LSQSGD``: the whole recursion runs compiled), a
        deltafit exact estimator (``LinearClassifier``, ...: trained
        by ``fit`` then ``add``; the result equals k refits exactly), anything with
        scikit-learn's ``partial_fit`` (classifiers get ``classes=np.unique(y)``), or a river
        learner (``learn_one``; samples as ``{j: x_j}`` dicts).
    X : array-like of shape (n_samples, n_features)
        Sparse CSR is passed on to ``partial_fit`` learners.
    y : array-like of shape (n_samples,)
    cv : int, cross-validation generator or iterable, default=5
        As scikit-learn's ``check_cv`` (an int means ``StratifiedKFold`` for classifiers,
        ``KFold`` otherwise), except that ``cv=n_samples`` means leave-one-out.  The test folds
        must partition the samples.  ``LeaveOneOut`` and unshuffled ``KFold`` are not enumerated.
        Fold ``i`` is the splitter's ``i``-th test set; chunks are fed in fold order, samples of a
        chunk in the splitter's order (the paper's fixed hierarchical order).
    scoring : str, callable or None
        A scikit-learn scorer (None: accuracy for classifiers, r2 for regressors, as
        ``cross_validate``).
    strategy : {"copy", "revert"}, default="copy"
        §4.1: ``"copy"`` copies a node's model for its left subtree (``__copy__`` where the
        learner has one, else a deep copy); ``"revert"`` trains one model in place and restores
        it through the learner's ``snapshot()`` / ``restore()`` (deltafit's exact estimators
        revert by removing what was added).  Both keep ``O(log k)`` models.
    shuffle : bool, default=False
        The randomized TreeCV of §5: each training phase (the samples added at one node) is fed
        in a random order.
    random_state : int, RandomState or None
        Seeds the randomized order; the result does not depend on ``n_jobs``.
    n_jobs : int or None
        None or 1: serial.  Otherwise the top levels of the tree are expanded and their
        subtrees run through joblib (§4.1, parallel and distributed), so that
        ``with joblib.parallel_backend("dask"):`` runs them on a Dask cluster.  The result is
        the serial one — bit for bit, except for deltafit's exact estimators with
        ``strategy="revert"``, whose expanded top levels are grown by copies (equal to
        rounding, ~1e-15).  Stream learners use threads (their compiled loops release the GIL).
    groups : array-like, optional
        Passed to the splitter (``GroupKFold``).
    progress : bool, default=False
        A progress bar over the folds (needs tqdm).

    Returns
    -------
    TreeCVResult

    Notes
    -----
    For learners whose model does not depend on the order of the data (deltafit's exact
    estimators, naive Bayes) the result is exactly that of k separate fits.  For SGD-type
    learners it differs by the learner's incremental stability (Theorem 1): the folds' models
    saw the same samples in another order.

    Examples
    --------
    >>> import numpy as np
    >>> import deltafit
    >>> from sklearn.model_selection import KFold, cross_val_score
    >>> from deltafit.model_selection import treecv
    >>> from deltafit.datasets import load_breast_cancer
    >>> X, y = load_breast_cancer()
    >>> cv = KFold(10, shuffle=True, random_state=0)
    >>> r = treecv(deltafit.LinearClassifier(), X, y, cv=cv)
    >>> ref = cross_val_score(deltafit.LinearClassifier(), X, y, cv=cv)
    >>> bool(np.allclose(r.fold_scores, ref))   # exact learners: TreeCV equals k refits
    True
    >>> r.n_sample_updates < 9 * len(y)         # fewer samples learned than by 10 refits
    True
    """
    t0 = time.perf_counter()
    if strategy not in ("copy", "revert"):
        raise ValueError(f"strategy must be 'copy' or 'revert', got {strategy!r}")
    shuffle = check_bool(shuffle, "shuffle")
    progress = check_bool(progress, "progress")
    if n_jobs is not None and (
        isinstance(n_jobs, bool) or not isinstance(n_jobs, (int, np.integer)) or n_jobs == 0
    ):
        raise ValueError(f"n_jobs must be None or a non-zero integer, got {n_jobs!r}")
    frozen = freeze(learner, X, y)
    if frozen is not None:
        learner, X = frozen.final, frozen.X
    compiled = all(
        callable(getattr(learner, a, None))
        for a in ("_tree_spec", "_tree_targets", "_tree_predict")
    )
    X, y = _check_data(X, y, compiled)
    classifier = learner_is_classifier(learner)
    if y is None and (classifier or learner_is_regressor(learner)):
        raise ValueError(f"y is required by {type(learner).__name__}")
    if classifier and np.unique(y).size < 2:
        raise ValueError("y has a single class; a classifier's CV needs at least two")
    order, bounds, _ = _folds(cv, X, y, groups, classifier)
    k = bounds.size - 1
    identity = bool(np.array_equal(order, np.arange(order.size)))
    X_ord = X if identity else X[order]
    y_ord = y if identity or y is None else y[order]
    seed = int(check_random_state(random_state).randint(0, 2**31 - 1)) if shuffle else 0

    classes = None
    if compiled:
        t_ord, classes = learner._tree_targets(y_ord)
        L = make_learner(learner, X_ord, t_ord, strategy, shuffle, seed)
        scorer = check_scoring(learner, scoring=scoring)
        _check_replay_scorer(scorer, scoring, learner, X_ord, y_ord, classes)
    else:
        L = make_learner(learner, X_ord, y_ord, strategy, shuffle, seed)
        probe = L.scoring_estimator(L.template) if hasattr(L, "rows_as_dicts") else learner
        scorer = _resolve_scorer(probe, scoring)
    name = _scoring_name(scoring, learner, classifier)

    serial = n_jobs is None or n_jobs == 1
    python_levels = 0
    if compiled and progress:
        python_levels = min(8, max(0, math.ceil(math.log2(k)) - 1))
    # scores known from predictions alone are computed from the out-of-fold predictions at the
    # end (one predict per fold, no scorer per fold; also gives y_pred)
    predict = None
    if not compiled and name in _FAST and (scoring is None or isinstance(scoring, str)):
        predict = y.dtype if classifier else np.float64
    with progress_bar(k, progress, desc="TreeCV folds") as bar:
        run = _Run(L, bounds, scorer, y_ord, shuffle, seed, python_levels, bar, predict)
        if serial or k < 4:
            run.subtree(None, 0, k - 1)
        else:
            _parallel(run, n_jobs, k)

    decision = y_pred = None
    fast = name in _FAST and (scoring is None or isinstance(scoring, str))
    if compiled:
        decision = np.empty(X.shape[0])
        decision[order] = run.out
        y_pred = learner._tree_predict(decision, classes)
        pred_ord = y_pred[order]
    elif predict is not None:
        pred_ord = run.out
        y_pred = np.empty_like(pred_ord)
        y_pred[order] = pred_ord
    if compiled and not fast:
        view = ReplayEstimator(run.out, pred_ord, classes)
        fold_scores = np.empty(k)
        for i in range(k):
            a, b = int(bounds[i]), int(bounds[i + 1])
            view.positions = slice(a, b)
            fold_scores[i] = float(scorer(view, X_ord[a:b], y_ord[a:b]))

    elif compiled or predict is not None:
        fold_scores = _fast_fold_scores(name, y_ord, pred_ord, bounds)
    else:
        fold_scores = np.array([run.fold_scores[i] for i in range(k)], dtype=np.float64)

    return TreeCVResult(
        score=float(np.mean(fold_scores)),
        fold_scores=fold_scores,
        fold_sizes=np.diff(bounds),
        n_folds=k,
        n_sample_updates=int(run.fed),
        n_updates=int(run.calls),
        peak_models=int(run.peak),
        strategy=strategy,
        shuffle=shuffle,
        n_jobs=n_jobs,
        scoring=name,
        time_s=time.perf_counter() - t0,
        decision=decision,
        y_pred=y_pred,
    )
