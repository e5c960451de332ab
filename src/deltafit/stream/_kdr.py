"""KDR, the Kernelized Drift detectoR of Sivan et al. §4.4."""

from __future__ import annotations

import numpy as np

from .._validation import check_real
from ..models import UpdatableMixin
from ..sensitivity._incremental import IncrementalSphere
from ._window import WindowLearner

__all__ = ["KDR"]


class KDR(WindowLearner):
    """Sliding-window learner that recomputes its model when the distance bound says the data
    moved (Sivan, Gabel & Schuster, §4.4).

    KDR predicts with β₁, the model computed on the window ``W₁`` of its last model
    computation, and keeps the incremental sphere (§3.3, :class:`~deltafit.sensitivity.
    IncrementalSphere`) between ``W₁`` and the current window ``W``: a new sample joins ``A``;
    the oldest sample of ``W`` joins ``R`` if it came from ``W₁``, else it leaves ``A``.  After
    each sample it adds ``‖r‖`` (half the bound on ``‖β₂ − β₁‖``, β₂ the model of ``W``) to a
    running mean over the samples since the last computation; when that mean exceeds
    ``threshold`` it recomputes β₁ from ``W`` and starts again with ``A = R = ∅``.

    Parameters
    ----------
    estimator : deltafit estimator
        The batch learner (e.g. ``KernelClassifier(loss="squared_hinge", kernel="rbf")``), with
        a squared, logistic or squared-hinge loss (the bounds need a differentiable loss).
    window : int, default=500
        Samples in the window (fixed, so ``C₁ = C₂``).
    threshold : float, default=0.05
        ``T``: the mean ``‖r‖`` since the last computation above which the model is recomputed.
    initial : int or None, default=None
        Samples before the first computation (None: ``window``).

    Attributes
    ----------
    model_ : deltafit estimator or None
        β₁, the model predictions come from.
    sphere_ : IncrementalSphere, MulticlassIncrementalSphere or None
        The ball around the model of the current window (one per class for K ≥ 3).
    n_model_computations_ : int
    n_samples_seen_ : int
    mean_r_norm_ : float
        The monitored mean ``‖r‖`` (K ≥ 3 classes: ``max_k ‖r_k‖``) since the last
        computation.

    Notes
    -----
    With K ≥ 3 classes (a one-vs-rest model) the sphere holds one ball per class
    (:class:`~deltafit.sensitivity.MulticlassIncrementalSphere`) and KDR monitors
    ``max_k ‖r_k‖``: half the bound on how far the class whose model may have moved most has
    moved, so the rule fires when any class's model may have drifted by the threshold (with
    two classes this is the binary ``‖r‖``, unchanged).  A sample whose label the model does
    not know (a class new to the stream) cannot enter the balls: it triggers a recomputation.
    So does a dict sample with a feature new to the learner (the balls live in the model's feature
    space; see ``stream/_features.py`` for the feature-space policy of dict samples).

    Per sample, KDR costs one prediction and two kernel rows over ``W₁ ∪ A`` (O(window · d));
    its memory is the window, β₁ and the sphere's ``2·window`` entries, whatever the length of
    the stream.  If the window holds a single class when a recomputation is due, the model is
    kept and the monitor goes on.

    Examples
    --------
    A window of 100 samples over a stream whose labels flip halfway: KDR recomputes its model
    when the incremental ball says the window has moved.

    >>> import numpy as np
    >>> import deltafit
    >>> from deltafit.stream import KDR, prequential
    >>> rng = np.random.default_rng(0)
    >>> X = rng.normal(size=(600, 2))
    >>> y = (X[:, 0] > 0).astype(int)
    >>> y[300:] = 1 - y[300:]                    # the concept drifts at sample 300
    >>> kdr = KDR(deltafit.LinearClassifier(loss="squared_hinge", C=0.01), window=100,
    ...           threshold=0.1)
    >>> report = prequential(kdr, (X, y))
    >>> first, second = report.computation_at[:2]
    >>> int(first), bool(300 < second < 350)     # no recomputation until the drift
    (99, True)
    >>> bool(kdr.n_model_computations_ < 20), bool(report.accuracy > 0.75)
    (True, True)
    """

    def __init__(self, estimator, window=500, threshold=0.05, initial=None):
        super().__init__(estimator, window=window, initial=initial)
        self.threshold = threshold

    def _check_params(self):
        if not isinstance(self.estimator, UpdatableMixin):
            raise ValueError(
                "KDR needs a deltafit estimator (KernelClassifier, LinearClassifier, "
                f"KernelRegressor, LinearRegressor) for its bounds, got "
                f"{type(self.estimator).__name__}"
            )
        if not getattr(self.estimator, "keep_data", True):
            raise ValueError(
                "KDR's bounds need the window's rows in the model: use keep_data=True"
            )
        check_real(self.threshold, "threshold", low=0.0, low_inclusive=True)
        return super()._check_params()

    def _setup(self):
        self._T = float(self.threshold)
        self.sphere_ = None
        self._key = np.full(self._window_, -1, dtype=np.int64)    # sphere key of an A entry
        self._w1id = np.full(self._window_, -1, dtype=np.int64)   # model id of a W₁ sample
        self._sum_r = 0.0
        self._n_since = 0
        self.mean_r_norm_ = 0.0

    def _compute(self):
        if not super()._compute():
            return False
        self.sphere_ = IncrementalSphere(self.model_, capacity=2 * self._window_ + 1)
        if self._classifier:
            self._classes = set(self.model_.classes_.tolist())
        self._key[:] = -1
        self._w1id[:] = -1
        self._w1id[self._ring()] = np.arange(self._count)  # fit gives ids 0..n-1 in row order
        self._sum_r = 0.0
        self._n_since = 0
        self.mean_r_norm_ = 0.0
        return True

    def _learn(self, row, y):
        if self.model_ is None:
            self._push(row, y)
            self._maybe_first_model()
            return
        sphere = self.sphere_
        new_class = (self._classifier and y not in self._classes) or \
            row.shape[1] != self._model_width               # or a feature new to the model
        if new_class:                                        # a new class: the balls cannot
            key = -1                                         # hold it, recompute below
        else:
            z = self._decision_of(row)                       # β₁'s score (cached by predict_one)
            prob = sphere.problem
            t = prob.encode_targets(np.array([y]), what="y")
            P = row if prob.kernel else prob.features(row)
            key = sphere._add_scored(P, t, np.array([z]))[0]  # the new sample joins A
        if self._count == self._window_:                     # the oldest sample leaves W
            old = self._start
            if self._w1id[old] >= 0:                         # from W₁: it joins R
                sphere.remove([self._w1id[old]])
            elif self._key[old] >= 0:                        # added since: it leaves A
                sphere.discard([self._key[old]])
        pos = self._push(row, y)
        self._key[pos] = key
        self._w1id[pos] = -1
        r = sphere.r_norm
        self._sum_r += r if np.ndim(r) == 0 else float(np.max(r))
        self._n_since += 1
        self.mean_r_norm_ = self._sum_r / self._n_since
        if new_class or self.mean_r_norm_ > self._T:
            self._compute()
