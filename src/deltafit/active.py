"""Pool-based active learning: uncertainty sampling and FGAL (Sivan et al. §4.3).

Uncertainty sampling (AL) labels, at each iteration, the ``m`` pool samples closest to the
decision boundary of the current model, then recomputes the model: a small ``m`` learns
faster per label but costs a model computation per ``m`` labels.  FGAL (Fine-Grained Active
Learner) splits an iteration into ``m/p`` sub-iterations; each labels the ``p`` samples whose
*bounds* on the next model's decision are centred closest to zero, ``|(U + L)/2|`` (Lemma 1,
eq. 7), adds them to ``A`` of an incremental sphere (§3.3) and goes on, so that the choice of
each group of ``p`` sees the labels of the ones before — with one model computation per ``m``
labels::

    from deltafit.active import FGAL, UncertaintySampling, run_active_learning
    curve = run_active_learning(FGAL(KernelClassifier(...), m=100, p=10), X_pool, y_pool,
                                X_test, y_test, initial=50, random_state=0)
    curve.n_labeled, curve.accuracy, curve.n_model_computations
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from numbers import Integral
from typing import Any, cast

import numpy as np
from numpy.typing import ArrayLike, NDArray
from scipy import linalg
from sklearn.base import BaseEstimator, clone, is_classifier
from sklearn.utils import check_random_state
from sklearn.utils._param_validation import StrOptions

from deltafit.kernels import _resolved_from_data
from deltafit.models import UpdatableMixin
from deltafit.sensitivity._incremental import (
    REGIONS,
    IncrementalSphere,
    MulticlassIncrementalSphere,
)
from deltafit.utils._params import Number, validate_params
from deltafit.utils._progress import progress_bar
from deltafit.utils._validation import check_bool, check_int, check_rows

__all__ = [
    "FGAL",
    "UncertaintySampling",
    "ActiveLearningResult",
    "run_active_learning",
    "compare_strategies",
]


def _top_two_margin(Z):
    """Per row, the largest value minus the second largest (K ≥ 2 columns)."""
    part = np.partition(Z, Z.shape[1] - 2, axis=1)
    return part[:, -1] - part[:, -2]


class _NewtonScores:
    """Decision values at pool points of one Newton step of the new problem from β₁, for one
    binary problem of a kernel model (FGAL's ``center="newton"``).

    With ``A`` the labelled samples not yet in the model, the new objective's gradient at β₁
    is ``g = Σ_{a∈A} c_a Φ(x_a)``, ``c_a = C w_a ℓ'(t_a, z_a)`` (the stored β₁ is the old
    optimum; its solver residual is left out), and its (generalised) Hessian
    ``H = I + Φ_N D Φ_Nᵀ`` over the samples ``N`` with ``D_i = C w_i ℓ''(t_i, z_i) > 0`` (old
    samples and A).  The point estimate ``β₁ − H⁻¹ g`` is, by Woodbury,
    ``β₁ − Φ_A c + Φ_N (D⁻¹ + K_NN)⁻¹ K_NA c``.  ``F = D_M⁻¹ + K_MM`` over the old samples
    is factorised once per model (Cholesky); each labelled sample borders it by one row, and
    the bordered system is solved through its Schur complement: a sub-iteration costs
    ``O(n_pool · |M| + |M|² · p + |A|³)`` and the kernel values between the pool and the p new
    samples, no refit.  For the squared loss one Newton step is the exact minimiser: the
    scores are those of the refit (up to the old solver residual).
    """

    def __init__(self, prob, K_pool):
        # K_pool: k(pool, x_h) for the model's live handles (shared by the classes)
        loss, C = prob.loss, prob.C
        L = np.asarray(prob.live)
        alpha = prob.alpha[L]
        G = prob.gram(L)
        z = G @ alpha
        w = prob.sample_weights(L)
        d2 = C * loss.d2(prob.targets[L], z)
        if w is not None:
            d2 = d2 * w
        M = np.flatnonzero(d2 > 0.0)
        self.loss, self.C = loss, C
        self.z = K_pool @ alpha  # β₁'s scores of the pool
        self.K_pM = np.ascontiguousarray(K_pool[:, M])
        F = G[np.ix_(M, M)]
        F.flat[:: M.size + 1] += 1.0 / d2[M]
        self.F = linalg.cho_factor(F, lower=True) if M.size else None
        self.A = np.zeros(0, dtype=np.intp)  # pool positions of A
        self.c = np.zeros(0)
        self.dA = np.zeros(0)
        self.W = np.zeros((M.size, 0))  # F⁻¹ K_MA
        self.K_pA = np.zeros((self.z.shape[0], 0))  # k(pool, x_A)

    def add(self, pos, t, K_new):
        """Samples at pool positions ``pos`` with coded targets ``t`` (±1) join A; ``K_new``
        is ``k(pool, x_pos)``."""
        za = self.z[pos]
        self.A = np.concatenate([self.A, pos])
        self.c = np.concatenate([self.c, self.C * self.loss.d1(t, za)])
        self.dA = np.concatenate([self.dA, self.C * self.loss.d2(t, za)])
        self.K_pA = np.hstack([self.K_pA, K_new])
        if self.F is not None:
            self.W = np.hstack([self.W, linalg.cho_solve(self.F, self.K_pM[pos].T)])
        else:  # no old sample has curvature (all beyond the margin)
            self.W = np.zeros((0, self.A.size))

    def scores(self, idx):
        """The Newton point's decision values at pool positions ``idx``."""
        if not self.A.size:
            return self.z[idx]
        c = self.c
        Wc = self.W @ c  # F⁻¹ K_MA c
        out = self.z[idx] - self.K_pA[idx] @ c
        act = np.flatnonzero(self.dA > 0.0)
        if act.size:
            Ka = self.K_pA[self.A[act]]  # K_{A', A}
            Kma = self.K_pM[self.A[act]]  # K_{A', M}
            S = Ka[:, act] - Kma @ self.W[:, act]  # Schur complement of F
            S.flat[:: act.size + 1] += 1.0 / self.dA[act]
            v2 = linalg.solve(S, Ka @ c - Kma @ Wc, assume_a="sym")
            v1 = Wc - self.W[:, act] @ v2
            out += self.K_pA[idx][:, act] @ v2
        else:
            v1 = Wc
        if v1.size:
            out += self.K_pM[idx] @ v1
        return out


class _NewtonCentre:
    """:class:`_NewtonScores` of a model's problems (one, or one per class)."""

    def __init__(self, model, P):
        prob = model.problem_
        if not prob.kernel:
            raise ValueError("FGAL(center='newton') needs a kernel model (KernelClassifier)")
        check = prob.for_class(0) if prob.n_classes else prob
        if check.loss.name not in ("squared", "logistic", "squared_hinge"):
            raise ValueError(
                f"FGAL(center='newton') needs a twice differentiable loss "
                f"(squared, logistic, squared_hinge), got {check.loss.name!r}"
            )
        self.P = P
        L = np.asarray(prob.live)
        kfun, _ = prob.kernel_functions()
        K_pool = kfun(P, prob.rows[L])
        self.multi = bool(prob.n_classes)
        self.parts = [
            _NewtonScores(prob.for_class(k) if self.multi else prob, K_pool)
            for k in range(prob.n_classes if self.multi else 1)
        ]
        self.kfun = kfun
        self.prob = prob

    def add(self, pos, labels):
        K_new = self.kfun(self.P, self.P[pos])
        t = self.prob.encode_targets(labels, what="y")
        if not self.multi:
            self.parts[0].add(pos, t, K_new)
            return
        for k, part in enumerate(self.parts):
            part.add(pos, np.where(t == k, 1.0, -1.0), K_new)

    def uncertainty(self, idx):
        if not self.multi:
            return np.abs(self.parts[0].scores(idx))
        return _top_two_margin(np.column_stack([p.scores(idx) for p in self.parts]))


def _lowest(values, k):
    """Positions of the ``k`` smallest values, ties broken by position (deterministic)."""
    return np.argsort(values, kind="stable")[:k]


class UncertaintySampling:
    """Uncertainty sampling, AL(m): label the ``m`` pool samples with the smallest
    ``|decision_function|`` of the current model (for ``predict_proba``-only classifiers:
    the smallest ``|P(class 1) − ½|``).

    With K ≥ 3 classes the uncertainty is the margin between the two largest decision values
    (or probabilities), which is ``|z|``'s role for two classes: a sample is uncertain when
    its top two classes are close (the "margin" criterion of Scheffer et al., "Active hidden
    Markov models for information extraction").

    Parameters
    ----------
    estimator : scikit-learn classifier
    m : int, default=10
        Samples labeled per model computation.

    Examples
    --------
    >>> import numpy as np
    >>> import deltafit
    >>> from deltafit.active import UncertaintySampling
    >>> rng = np.random.default_rng(0)
    >>> X = rng.normal(size=(100, 2))
    >>> y = (X[:, 0] > 0).astype(int)
    >>> model = deltafit.LinearClassifier(loss="logistic").fit(X[:20], y[:20])
    >>> al = UncertaintySampling(deltafit.LinearClassifier(loss="logistic"), m=5)
    >>> chosen, labels, groups = al.select(model, X, np.arange(20, 100), 5, lambda i: y[i])
    >>> z = np.abs(model.decision_function(X[20:]))
    >>> closest = 20 + np.argsort(z)[:5]            # nearest the decision boundary
    >>> sorted(chosen.tolist()) == sorted(closest.tolist())
    True
    """

    #: checked by :meth:`_check` (scikit-learn's parameter validation; the strategies are not
    #: estimators: they have no ``fit``)
    _parameter_constraints: dict = {
        "estimator": "no_validation",  # a classifier: checked by _check_estimator
        "m": [Number(Integral, 1, None, closed="left")],
    }

    def __init__(self, estimator: BaseEstimator, m: int = 10) -> None:
        self.estimator = estimator
        self.m = m

    def _check(self):
        """Validate the parameters (their ``_parameter_constraints``, then the rules between
        them and on the estimator); returns ``m``."""
        validate_params(self)
        self._check_estimator()
        return int(self.m)

    def _check_estimator(self):
        if not is_classifier(self.estimator):
            raise ValueError(
                f"active learning needs a classifier, got {type(self.estimator).__name__}"
            )

    @staticmethod
    def _margin(model, X):
        if hasattr(model, "decision_function"):
            z = np.asarray(model.decision_function(X), dtype=np.float64)
            if z.ndim == 1:
                return np.abs(z)
            return _top_two_margin(z)
        p = np.asarray(model.predict_proba(X))
        if p.shape[1] == 2:
            return np.abs(p[:, 1] - 0.5)
        return _top_two_margin(p)

    def select(
        self,
        model: BaseEstimator,
        X_pool: np.ndarray,
        candidates: NDArray[np.intp],
        k: int,
        label: Callable[[np.ndarray], np.ndarray],
    ) -> tuple[NDArray[np.intp], np.ndarray, list[np.ndarray]]:
        """Choose ``k`` of the pool rows ``candidates`` and label them.

        Returns
        -------
        chosen : ndarray of int (pool indices, in the order chosen)
        labels : ndarray
        groups : list of ndarray (the sub-iterations; one group here)
        """
        chosen = candidates[_lowest(self._margin(model, X_pool[candidates]), k)]
        return chosen, label(chosen), [chosen]

    def __repr__(self):
        return f"{type(self).__name__}(m={self.m})"


class FGAL(UncertaintySampling):
    """Fine-Grained Active Learner (Sivan, Gabel & Schuster §4.3).

    Each iteration labels ``m`` samples with one model computation, in ``ceil(m/p)``
    sub-iterations: sub-iteration i computes the prediction bounds ``L ≤ ⟨Φ(x), β_new⟩ ≤ U``
    (eq. 7) of every unlabeled sample for the model that the labels so far would give, picks
    the ``p`` samples with the lowest ``|(U + L)/2|``, labels them and adds them to ``A`` of
    an :class:`~deltafit.sensitivity.IncrementalSphere` (§3.3).  The first ``p`` are chosen by
    the current model (``U = L`` when ``A = ∅``), exactly like AL.

    Parameters
    ----------
    estimator : deltafit classifier
        ``KernelClassifier`` or ``LinearClassifier`` with a squared, logistic or squared-hinge
        loss (the paper: ``loss="squared_hinge"``, RBF kernel).
    m : int, default=100
        Samples labeled per model computation.
    p : int, default=10
        Samples labeled per sub-iteration.
    center : {"sphere", "newton"}, default="sphere"
        The point estimate of the next model that ranks the pool.  ``"sphere"``: the
        paper's centre ``(U + L)/2`` of the incremental sphere, ``β₁ − r`` with
        ``r = ½∇J_new(β₁)`` — half a gradient step.  ``"newton"``: ``β₁ − H⁻¹∇J_new(β₁)``,
        one Newton step of the new problem with the Hessian of the old samples extended by
        the labelled ones (a bordered solve over a Cholesky factorisation made once per
        model; kernel models with a squared, logistic or squared-hinge loss).
    region : {"sphere", "curvature"}, default="sphere"
        The certified region whose centre ranks the pool under ``center="sphere"`` (the
        region of the :class:`~deltafit.sensitivity.IncrementalSphere`).  ``"sphere"``: the
        paper's ball, centre ``β₁ − r``.  ``"curvature"``: the curvature-aware region of the
        labelled samples' change (logistic, squared hinge; the exact what-if for the squared
        loss) intersected with the ball; its centre is the region's Newton-ball centre,
        re-centred with exact gradients — in practice the model a refit would give — at the
        cost of rebuilding the region after every sub-iteration (O(n³) for a kernel model
        of n samples, none beyond 2,500 points).  ``center="newton"`` ranks by its own Newton
        step and takes no region: it needs ``region="sphere"``.

    Notes
    -----
    A sub-iteration costs ``O(n_pool · p · d)`` kernel evaluations (the tracked bounds of the
    pool move with each added sample), far less than a model computation.

    Which centre: a gradient step moves the decision near a labelled sample ``x_j`` by
    ``C·|ℓ'|·k(x, x_j)``, whatever the curvature.  In the paper's narrow-kernel regime (the
    nearest neighbours' kernel values ≈ 0.01–0.03, e.g. splice at γ = 0.1) that move is small
    and local, the Hessian is close to the identity, and the sphere's centre is a good point
    estimate: FGAL(100, 10) then beats AL(100).  With wide kernels (``gamma="scale"``: nearest
    neighbours at 0.66–1.0) the half step over-moves the decision several-fold, FGAL ranks
    worse than the old model and trails AL(100); the Newton step scales each move by the
    curvature of the labelled neighbourhood and tracks the refit.  Binary ``"sphere"`` is the
    paper's rule, unchanged.

    With K ≥ 3 classes (a one-vs-rest model) the sphere holds one ball per class
    (:class:`~deltafit.sensitivity.MulticlassIncrementalSphere`, K times the cost) and a
    sample's uncertainty is the margin between the two largest centre decision values
    ``(U_k + L_k)/2``: the multiclass form of ``|(U + L)/2|`` (a sample is uncertain when the
    next model's top two classes are close), as :class:`UncertaintySampling` uses the margin
    of the current model.  A labelled sample of a class the model has not seen yet cannot
    enter the balls; it waits for the next model computation.  Two classes: the paper's rule,
    unchanged.

    Examples
    --------
    >>> import numpy as np
    >>> import deltafit
    >>> from deltafit.active import FGAL
    >>> rng = np.random.default_rng(0)
    >>> X = rng.normal(size=(200, 2))
    >>> y = (X[:, 0] > 0).astype(int)
    >>> model = deltafit.LinearClassifier(loss="squared_hinge").fit(X[:20], y[:20])
    >>> fgal = FGAL(deltafit.LinearClassifier(loss="squared_hinge"), m=20, p=5)
    >>> chosen, labels, groups = fgal.select(model, X, np.arange(20, 200), 20, lambda i: y[i])
    >>> len(chosen), [len(g) for g in groups]
    (20, [5, 5, 5, 5])
    >>> bool(np.all(labels == y[chosen]))
    True
    """

    _parameter_constraints: dict = {
        **UncertaintySampling._parameter_constraints,
        "p": [Number(Integral, 1, None, closed="left")],
        "center": [StrOptions({"sphere", "newton"})],
        "region": [StrOptions(set(REGIONS))],
    }

    def __init__(
        self,
        estimator: BaseEstimator,
        m: int = 100,
        p: int = 10,
        center: str = "sphere",
        region: str = "sphere",
    ) -> None:
        super().__init__(estimator, m=m)
        self.p = p
        self.center = center
        self.region = region

    def _check_estimator(self):
        if not isinstance(self.estimator, UpdatableMixin) or not is_classifier(self.estimator):
            raise ValueError(
                "FGAL needs a deltafit classifier (KernelClassifier or LinearClassifier) for "
                f"its bounds, got {type(self.estimator).__name__}"
            )

    def _check(self):
        m = super()._check()
        p = int(self.p)
        if p > m:
            raise ValueError(f"p ({p}) cannot exceed m ({m})")
        if self.center == "newton" and self.region != "sphere":
            raise ValueError(
                "center='newton' ranks by its own Newton step, not by a region: "
                "use region='sphere' with it (or center='sphere' with "
                f"region={self.region!r})"
            )
        return m

    def select(
        self,
        model: BaseEstimator,
        X_pool: np.ndarray,
        candidates: NDArray[np.intp],
        k: int,
        label: Callable[[np.ndarray], np.ndarray],
    ) -> tuple[NDArray[np.intp], np.ndarray, list[np.ndarray]]:
        if self.center == "newton":
            return self._select_newton(model, X_pool, candidates, k, label)
        p = int(self.p)
        sphere = IncrementalSphere(model, capacity=k, region=self.region)
        sphere.track(X_pool[candidates])
        multi = isinstance(sphere, MulticlassIncrementalSphere)
        open_ = np.ones(candidates.size, dtype=bool)
        chosen: list[int] = []
        labels: list[Any] = []
        groups: list[np.ndarray] = []
        while len(chosen) < k:
            q = min(p, k - len(chosen))
            pos = np.flatnonzero(open_)
            if multi:
                score = _top_two_margin(sphere.tracked_center(pos))
            else:
                score = np.abs(sphere.tracked_center(pos))
            pick = pos[_lowest(score, q)]
            idx = candidates[pick]
            lab = label(idx)
            open_[pick] = False
            chosen.extend(idx.tolist())
            labels.extend(list(lab))
            groups.append(idx)
            if len(chosen) < k:
                known = np.isin(lab, model.classes_)
                if known.all():
                    sphere.add(X_pool[idx], lab)
                elif known.any():  # a class new to the model waits for the next model
                    sphere.add(X_pool[idx[known]], np.asarray(lab)[known])
        return np.asarray(chosen, dtype=np.intp), np.asarray(labels), groups

    def _select_newton(self, model, X_pool, candidates, k, label):
        p = int(self.p)
        newton = _NewtonCentre(model, X_pool[candidates])
        open_ = np.ones(candidates.size, dtype=bool)
        chosen, labels, groups = [], [], []
        while len(chosen) < k:
            q = min(p, k - len(chosen))
            pos = np.flatnonzero(open_)
            pick = pos[_lowest(newton.uncertainty(pos), q)]
            idx = candidates[pick]
            lab = label(idx)
            open_[pick] = False
            chosen.extend(idx.tolist())
            labels.extend(list(lab))
            groups.append(idx)
            if len(chosen) < k:
                known = np.isin(lab, model.classes_)
                if known.any():  # a class new to the model waits for the next model
                    newton.add(pick[known], np.asarray(lab)[known])
        return np.asarray(chosen, dtype=np.intp), np.asarray(labels), groups

    def __repr__(self):
        if self.center == "newton":
            return f"FGAL(m={self.m}, p={self.p}, center='newton')"
        if self.region != "sphere":
            return f"FGAL(m={self.m}, p={self.p}, region={self.region!r})"
        return f"FGAL(m={self.m}, p={self.p})"


@dataclass
class ActiveLearningResult:
    """One active-learning run (:func:`run_active_learning`).

    Attributes
    ----------
    n_labeled : ndarray of int
        Labeled samples behind each model computation.
    accuracy : ndarray of float
        Test accuracy of each computed model.
    n_model_computations : int
        Model computations (fits and warm updates together).
    n_warm_updates : int
        Those of them that were warm updates of the previous model.
    labeled : ndarray of int
        Pool indices in the order they were labeled (the initial ones first).
    groups : list of ndarray
        The pool indices labeled by each (sub-)iteration, in order.
    time_s : float
    strategy : str

    Examples
    --------
    >>> import numpy as np
    >>> import deltafit
    >>> from deltafit.active import FGAL, run_active_learning
    >>> rng = np.random.default_rng(0)
    >>> X = rng.normal(size=(300, 2))
    >>> y = (X[:, 0] + X[:, 1] > 0).astype(int)
    >>> fgal = FGAL(deltafit.LinearClassifier(loss="squared_hinge"), m=20, p=5)
    >>> result = run_active_learning(fgal, X[:200], y[:200], X[200:], y[200:], initial=10,
    ...                              budget=50, random_state=0)
    >>> result.strategy, result.n_model_computations, result.n_labeled.tolist()
    ('FGAL(m=20, p=5)', 3, [10, 30, 50])
    >>> [len(g) for g in result.groups]          # the initial draw, then sub-iterations of p
    [10, 5, 5, 5, 5, 5, 5, 5, 5]
    """

    n_labeled: np.ndarray
    accuracy: np.ndarray
    n_model_computations: int
    labeled: np.ndarray
    groups: list
    time_s: float
    strategy: str = ""
    n_warm_updates: int = 0


def _oracle(oracle, n_pool):
    if callable(oracle):

        def label(idx):
            lab = np.asarray(oracle(np.asarray(idx)))
            if lab.shape != (len(idx),):
                raise ValueError(
                    f"the oracle returned shape {lab.shape} for {len(idx)} pool indices"
                )
            return lab

        return label
    y = np.asarray(oracle)
    if y.ndim != 1 or y.shape[0] != n_pool:
        raise ValueError(
            f"oracle must be a callable or the pool's labels (shape ({n_pool},)), got shape "
            f"{y.shape}"
        )
    return lambda idx: y[np.asarray(idx)]


def _warm(model, X, y):
    """``model`` updated with the labelled samples (True), or False where an update cannot
    take them (not a deltafit model; a class new to it) — the model is then as it was."""
    if not isinstance(model, UpdatableMixin) or not np.all(np.isin(y, model.classes_)):
        return False
    if _resolved_from_data(model.get_params(deep=False)):
        return False  # gamma="scale" etc.: a fit on all the labels resolves it anew
    try:
        model.add(X, y)
    except ValueError:  # refused, model unchanged: the caller fits
        return False
    return True


def run_active_learning(
    strategy: UncertaintySampling,
    X_pool: ArrayLike,
    oracle: ArrayLike | Callable[[np.ndarray], ArrayLike],
    X_test: ArrayLike,
    y_test: ArrayLike,
    initial: int = 50,
    budget: int | None = None,
    random_state: int | np.random.RandomState | None = None,
    progress: bool = False,
    warm: bool = True,
) -> ActiveLearningResult:
    """Pool-based active learning: label, compute the model, score it, choose, repeat.

    Parameters
    ----------
    strategy : FGAL or UncertaintySampling
    X_pool : array-like of shape (n_pool, n_features)
        Unlabeled samples.
    oracle : array-like of shape (n_pool,) or callable
        The pool's labels, or a function from an array of pool indices to their labels (asked
        only for the samples chosen).
    X_test, y_test : array-like
        Where each computed model is scored (accuracy).
    initial : int, default=50
        Randomly chosen samples labeled before the first model (they must hold at least two
        classes; a class first labeled later joins the model at its next computation).
    budget : int, optional
        Total number of labels (initial included); default: the whole pool.
    random_state : int, RandomState or None
        Draw of the initial samples.
    progress : bool, default=False
        Show a progress bar (tqdm).
    warm : bool, default=True
        Each model after the first is the previous one updated with the newly labelled
        samples (``model.add``: an exact update, equal to the fit on all the labels to the
        solver's tolerance) instead of a fit from scratch; a class new to the model, an
        estimator without updates, or one whose fit resolves a parameter from its rows
        (``gamma="scale"`` / ``"auto"``, an unfitted ``feature_map``: an update keeps the first
        fit's value) is fitted.  False: fit every model (the papers' cost model).

    Returns
    -------
    ActiveLearningResult
        ``n_labeled`` and ``accuracy`` with one entry per model computation.

    Examples
    --------
    >>> from sklearn.datasets import load_breast_cancer
    >>> from sklearn.preprocessing import StandardScaler
    >>> import deltafit
    >>> from deltafit.active import UncertaintySampling, run_active_learning
    >>> X, y = load_breast_cancer(return_X_y=True)
    >>> X = StandardScaler().fit_transform(X)
    >>> strategy = UncertaintySampling(deltafit.LinearClassifier(loss="logistic"), m=20)
    >>> result = run_active_learning(strategy, X[:400], y[:400], X[400:], y[400:],
    ...                              initial=20, budget=100, random_state=0)
    >>> result.n_labeled.tolist()                # one model per 20 labels
    [20, 40, 60, 80, 100]
    >>> result.labeled.shape, bool(result.accuracy[-1] > 0.9)
    ((100,), True)
    """
    m = strategy._check()
    check_bool(progress, "progress")
    check_bool(warm, "warm")
    X_pool = cast(np.ndarray, check_rows(X_pool, None, "X_pool"))
    n_pool = X_pool.shape[0]
    X_test = cast(np.ndarray, check_rows(X_test, X_pool.shape[1], "X_test", "X_pool"))
    y_test = np.asarray(y_test)
    if y_test.shape != (X_test.shape[0],):
        raise ValueError(f"y_test must have one label per row of X_test ({X_test.shape[0]})")
    label = _oracle(oracle, n_pool)
    initial = check_int(initial, "initial", low=2)
    budget = n_pool if budget is None else check_int(budget, "budget", low=1)
    if initial > min(budget, n_pool):
        raise ValueError(
            f"initial ({initial}) exceeds the budget or the pool ({min(budget, n_pool)})"
        )
    budget = min(budget, n_pool)
    rng = check_random_state(random_state)
    labeled = rng.choice(n_pool, size=initial, replace=False)
    y_lab = label(labeled)
    if np.unique(y_lab).size < 2:
        raise ValueError(
            f"the {initial} initial samples hold a single class; use a larger initial or "
            "another random_state"
        )
    is_open = np.ones(n_pool, dtype=bool)
    is_open[labeled] = False
    order, labels, groups = [labeled], [y_lab], [labeled]
    n_lab, acc = [], []
    model, n_warm = None, 0
    t0 = time.perf_counter()
    bar = progress_bar(total=-(-(budget - initial) // m) + 1, desc=repr(strategy), enabled=progress)
    try:
        while True:
            idx = np.concatenate(order)
            if model is not None and warm and _warm(model, X_pool[order[-1]], labels[-1]):
                n_warm += 1
            else:
                model = clone(strategy.estimator).fit(X_pool[idx], np.concatenate(labels))
            n_lab.append(idx.size)
            acc.append(float(np.mean(model.predict(X_test) == y_test)))
            bar.update(1)
            k = min(m, budget - idx.size, int(is_open.sum()))
            if k <= 0:
                break
            chosen, lab, g = strategy.select(model, X_pool, np.flatnonzero(is_open), k, label)
            is_open[chosen] = False
            order.append(chosen)
            labels.append(np.asarray(lab))
            groups.extend(g)
    finally:
        bar.close()
    return ActiveLearningResult(
        n_labeled=np.asarray(n_lab, dtype=np.int64),
        accuracy=np.asarray(acc),
        n_model_computations=len(n_lab),
        labeled=np.concatenate(order),
        groups=groups,
        time_s=time.perf_counter() - t0,
        strategy=repr(strategy),
        n_warm_updates=n_warm,
    )


def compare_strategies(
    estimator: BaseEstimator,
    X: ArrayLike,
    y: ArrayLike,
    *,
    m: int = 100,
    p: int = 10,
    small_m: int | None = None,
    seeds: int = 5,
    n_test: int = 350,
    n_pool: int | None = None,
    initial: int = 50,
    log: Callable[[str], Any] | None = None,
    center: str = "sphere",
    region: str = "sphere",
    warm: bool = True,
) -> dict[str, dict[str, Any]]:
    """The experiment of Sivan et al. Fig. 2: FGAL(m, p), AL(m) and AL(small_m) over seeds.

    Each seed draws ``n_test`` test samples and a pool of ``n_pool`` others (default: the
    rest), and the three strategies label the whole pool from the same ``initial`` random
    labels.

    Parameters
    ----------
    estimator : deltafit classifier
    X, y : arrays
    m, p : int
        FGAL's cohort and sub-iteration sizes; AL(m) uses the same m.
    small_m : int, optional
        The cohort of the second AL baseline (default: p).
    seeds : int
    n_test, n_pool, initial : int
    log : callable, optional
    center : {"sphere", "newton"}, default="sphere"
        FGAL's point estimate (:class:`FGAL`); the FGAL curve is named
        ``"FGAL(m, p, newton)"`` for ``"newton"``.
    region : {"sphere", "curvature"}, default="sphere"
        FGAL's region (:class:`FGAL`); the curve is named ``"FGAL(m, p, curvature)"`` for
        ``"curvature"``.
    warm : bool, default=True
        Models after the first are warm updates (:func:`run_active_learning`).

    Returns
    -------
    curves : dict
        name -> {"n_labeled", "accuracy_mean", "accuracy_std", "accuracy" (seeds x points),
        "n_model_computations"}, ready for :func:`deltafit.plotting.active_learning_curves`.

    Examples
    --------
    >>> import numpy as np
    >>> import deltafit
    >>> from deltafit.active import compare_strategies
    >>> rng = np.random.default_rng(0)
    >>> X = rng.normal(size=(200, 2))
    >>> y = (X[:, 0] > 0).astype(int)
    >>> curves = compare_strategies(deltafit.LinearClassifier(loss="squared_hinge"), X, y, m=40,
    ...                             p=10, seeds=2, n_test=50, initial=20)
    >>> sorted(curves)
    ['AL(m=10)', 'AL(m=40)', 'FGAL(m=40, p=10)']
    >>> curves["FGAL(m=40, p=10)"]["accuracy"].shape   # seeds x models
    (2, 5)
    """
    X = cast(np.ndarray, check_rows(X, None, "X"))
    y = np.asarray(y)
    if y.shape != (X.shape[0],):
        raise ValueError(f"y must have one label per row of X ({X.shape[0]})")
    seeds = check_int(seeds, "seeds", low=1)
    n_test = check_int(n_test, "n_test", low=1)
    small_m = p if small_m is None else small_m
    if small_m == m:
        raise ValueError(
            f"the two uncertainty-sampling baselines would both be AL(m={m}); choose "
            "small_m != m (default: p, which must then differ from m)"
        )
    n_pool = X.shape[0] - n_test if n_pool is None else check_int(n_pool, "n_pool", low=2)
    if n_test + n_pool > X.shape[0]:
        raise ValueError(f"n_test + n_pool ({n_test + n_pool}) exceeds the {X.shape[0]} samples")
    name = f"FGAL(m={m}, p={p})" if center == "sphere" else f"FGAL(m={m}, p={p}, {center})"
    if region != "sphere":
        name = f"{name[:-1]}, {region})"
    strategies = {
        name: FGAL(estimator, m=m, p=p, center=center, region=region),
        f"AL(m={m})": UncertaintySampling(estimator, m=m),
        f"AL(m={small_m})": UncertaintySampling(estimator, m=small_m),
    }
    runs: dict[str, list[ActiveLearningResult]] = {k: [] for k in strategies}
    for seed in range(seeds):
        perm = np.random.default_rng(seed).permutation(X.shape[0])
        test, pool = perm[:n_test], perm[n_test : n_test + n_pool]
        for key, strategy in strategies.items():
            r = run_active_learning(
                strategy,
                X[pool],
                y[pool],
                X[test],
                y[test],
                initial=initial,
                random_state=seed,
                warm=warm,
            )
            runs[key].append(r)
            if log is not None:
                log(
                    f"seed {seed} {key}: {r.n_model_computations} computations, final "
                    f"accuracy {r.accuracy[-1]:.4f}, {r.time_s:.1f} s"
                )
    curves = {}
    for key, rs in runs.items():
        A = np.array([r.accuracy for r in rs])
        curves[key] = {
            "n_labeled": rs[0].n_labeled,
            "accuracy": A,
            "accuracy_mean": A.mean(axis=0),
            "accuracy_std": A.std(axis=0),
            "n_model_computations": rs[0].n_model_computations,
        }
    return curves
