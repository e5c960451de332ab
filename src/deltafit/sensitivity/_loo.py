"""Leave-one-out bounds for every training sample at once: the ball of Theorem 1 with R = {t}
(Corollary 5 of Okumura et al. (2015); Sivan et al. §4.2), its curvature-aware refinement for the
logistic and squared-hinge losses (:mod:`deltafit.sensitivity.regions._curvature_loo`), and
Zhang's bound, the baseline of Sivan et al. §4.2."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
from numpy.typing import ArrayLike

from deltafit.sensitivity._model_access import check_model, n_classes, problem
from deltafit.sensitivity.regions import _ball
from deltafit.sensitivity.regions._curvature_loo import (
    KernelSpace,
    LinearSpace,
    curvature_loo_bounds,
)
from deltafit.sensitivity.regions._curvature_schedule import CURVATURE_LOSSES

__all__ = ["loo_bounds", "zhang_loo_bounds"]


def _left_out(model, ids):
    """``(problem, z_t, ‖Φ_t‖², w_t ℓ'(y_t, z_t))`` of the samples to leave out (``w_t`` the
    sample weight: leaving t out removes its weighted term)."""
    loss = check_model(model, "leave-one-out bounds")
    prob = problem(model)
    slots = prob.live if ids is None else prob.handles(ids, "ids")
    z, ktt = prob.scores(slots)
    d1 = loss.d1(prob.targets[slots], z)
    w = prob.sample_weights(slots)
    return prob, z, ktt, d1 if w is None else w * d1


def _per_class(bounds, model, ids, **kw):
    """``bounds`` of each one-vs-rest class of a multiclass model, stacked to (n_ids, K)."""
    whole = model.problem_
    got = [bounds(whole.for_class(k), ids, **kw) for k in range(whole.n_classes)]
    return np.column_stack([lo for lo, _ in got]), np.column_stack([hi for _, hi in got])


def loo_bounds(
    model: Any,
    ids: ArrayLike | None = None,
    *,
    C_new: float | str | Callable[[int], float] | None = None,
    method: str = "auto",
) -> tuple[np.ndarray, np.ndarray]:
    """Bounds of ``⟨Φ(x_t), β_{−t}⟩``, the score of sample t by the model trained without it.

    For each t the ball of Theorem 1 of Sivan et al. (2020) / Theorem 1 of Okumura et al. (2015)
    with ``R = {t}`` gives (with γ_t = −w_t ℓ'(y_t, z_t), w_t the sample's weight, ρ = C₂/C₁,
    c = ½(1 − ρ))

        center score  (1 − c) z_t − (C₂/2) γ_t k_tt
        ‖r_t‖²        c² ‖β‖² + c C₂ γ_t z_t + (C₂²/4) γ_t² k_tt

    and bounds ``center ∓ sqrt(k_tt) (‖r_t‖ + ρ · grad_norm_)`` (Corollary 5 of Okumura et al.
    (2015) in the mean-loss case ``C_new="mean"``): the balls of
    :func:`deltafit.sensitivity.regions.loo_balls` in their Theorem 1 form (cross-validation
    uses the same balls with the exact gradient).  All n bounds cost one pass over the training
    scores.

    Parameters
    ----------
    model : fitted deltafit estimator (training rows kept)
    ids : array-like of int, optional
        Samples to leave out (default: all, in ``sample_ids_`` order).
    C_new : float, "mean", callable or None
        As in :func:`deltafit.sensitivity`; evaluated at ``n − 1``.
    method : {"auto", "sphere", "curvature"}
        ``"sphere"``: the published balls above (Corollary 5 of Okumura et al. (2015), Sivan et al.
        §4.2), for reproducing the papers.  ``"curvature"`` (logistic and squared-hinge losses):
        the loss's curvature as well (:mod:`deltafit.sensitivity.regions._curvature_loo`),
        every interval intersected with the ball's; with ``C_new`` other than the model's C it
        falls back to the balls.  ``"auto"``: ``"curvature"`` for those losses, else ``"sphere"``.

    Returns
    -------
    lo, hi : ndarray of shape (n_ids,), or (n_ids, K) for a model with K ≥ 3 classes
        A multiclass model's bounds are those of each class's one-vs-rest problem
        (``model.problem_.for_class(k)``), column k; a sample's left-out label is certified
        where :func:`~deltafit.sensitivity.certain_argmax` says the argmax is decided.

    Examples
    --------
    >>> import numpy as np
    >>> from sklearn.datasets import load_breast_cancer
    >>> from sklearn.preprocessing import StandardScaler
    >>> import deltafit
    >>> from deltafit.sensitivity import loo_bounds
    >>> X, y = load_breast_cancer(return_X_y=True)
    >>> X = StandardScaler().fit_transform(X)
    >>> model = deltafit.LinearClassifier(loss="logistic", C=0.1).fit(X, y)
    >>> lo, hi = loo_bounds(model, ids=[0, 1, 2])
    >>> d = [deltafit.LinearClassifier(loss="logistic", C=0.1)
    ...      .fit(np.delete(X, t, 0), np.delete(y, t)).decision_function(X[t:t + 1])[0]
    ...      for t in range(3)]                  # the left-out scores, by refitting
    >>> bool(np.all((lo <= d) & (d <= hi)))
    True
    """
    if method not in ("auto", "sphere", "curvature"):
        raise ValueError(f"method must be 'auto', 'sphere' or 'curvature', got {method!r}")
    if n_classes(model):
        return _per_class(loo_bounds, model, ids, C_new=C_new, method=method)
    prob, z, ktt, d1 = _left_out(model, ids)
    n = prob.n_samples
    if n < 2:
        raise ValueError("leave-one-out needs at least two training samples")
    C1 = prob.C
    C2 = _ball.c_at(_ball.resolve_c_new(C_new, C1, n), n - 1)
    center, r_norm = _ball.loo_balls(
        z, d1, ktt, C1=C1, C2=C2, beta_sq=prob.solution_sq_norm() if C2 != C1 else None
    )
    R = _ball.certified_radius(r_norm, C1=C1, C2=C2, residual=prob.certified_residual)
    e = np.sqrt(np.maximum(ktt, 0.0))
    lo, hi = center - e * R, center + e * R
    curved = prob.loss.name in CURVATURE_LOSSES
    if method == "curvature" and not curved:
        raise ValueError(
            f"method='curvature' needs a logistic or squared-hinge loss; "
            f"loss={prob.loss.name!r} has no curvature to use"
        )
    if method == "sphere" or not curved or C2 != C1:
        return lo, hi
    clo, chi = _curvature_bounds(prob, ids)
    return np.fmax(lo, clo), np.fmin(hi, chi)


def _curvature_bounds(prob, ids):
    """:func:`curvature_loo_bounds` over every live sample, at ``ids`` (NaN: not certified)."""
    live = np.asarray(prob.live)
    z, _ = prob.scores(live)
    t = np.asarray(prob.targets[live], dtype=np.float64)
    w = prob.sample_weights(live)
    w = np.ones(live.size) if w is None else w
    gamma = -w * prob.loss.d1(t, z)
    space = KernelSpace(prob.gram(live)) if prob.kernel else LinearSpace(prob.rows[live])
    lo, hi = curvature_loo_bounds(space, z, t, w, gamma, prob.C, prob.certified_residual, prob.loss)
    if ids is None:
        return lo, hi
    pos = np.full(prob.capacity, -1, dtype=np.intp)
    pos[live] = np.arange(live.size)
    at = pos[prob.handles(ids, "ids")]
    return lo[at], hi[at]


def zhang_loo_bounds(model: Any, ids: ArrayLike | None = None) -> tuple[np.ndarray, np.ndarray]:
    """Zhang's (2003) leave-one-out bounds ``z_t ∓ |α_t| k(x_t, x_t)`` (Sivan et al. §4.2).

    The baseline against which Sivan et al. compare their bounds.  α_t is the sample's
    coefficient in the dual form β = Σ α_i Φ(x_i), taken as its value at the optimum,
    ``−C w_t ℓ'(y_t, z_t)`` (``w_t`` the sample weight) (the stored α of a kernel model is not
    unique when K is singular).  As in
    :func:`loo_bounds`, the interval is widened by the model's certified solver residual,
    ``grad_norm_ · sqrt(k_tt)``: Zhang's bound is about the exact optimum, and without the
    allowance it "decides" labels whose left-out score is zero up to rounding (a kernel matrix
    close to the identity), some of them wrongly.  Up to these allowances the interval of
    :func:`loo_bounds` (with C unchanged) is one half of this one; it is never wider.

    Parameters
    ----------
    model : fitted deltafit estimator (training rows kept)
    ids : array-like of int, optional

    Returns
    -------
    lo, hi : ndarray of shape (n_ids,), or (n_ids, K) for a model with K ≥ 3 classes (per
        one-vs-rest class, as :func:`loo_bounds`)

    Examples
    --------
    >>> import numpy as np
    >>> from sklearn.datasets import load_breast_cancer
    >>> from sklearn.preprocessing import StandardScaler
    >>> import deltafit
    >>> from deltafit.sensitivity import loo_bounds, zhang_loo_bounds
    >>> X, y = load_breast_cancer(return_X_y=True)
    >>> X = StandardScaler().fit_transform(X)
    >>> model = deltafit.LinearClassifier(loss="squared_hinge", C=0.1).fit(X, y)
    >>> lo, hi = zhang_loo_bounds(model)
    >>> lo_s, hi_s = loo_bounds(model, method="sphere")
    >>> bool(np.all(hi_s - lo_s <= hi - lo))     # Sivan et al.'s ball is never wider
    True
    >>> t = 0
    >>> d = (deltafit.LinearClassifier(loss="squared_hinge", C=0.1)
    ...      .fit(X[1:], y[1:]).decision_function(X[:1])[0])
    >>> bool(lo[t] <= d <= hi[t])
    True
    """
    if n_classes(model):
        return _per_class(zhang_loo_bounds, model, ids)
    prob, z, ktt, d1 = _left_out(model, ids)
    alpha = -prob.C * d1  # α_t at the optimum (see above; d1 carries the weight)
    w = np.abs(alpha) * ktt + prob.certified_residual * np.sqrt(np.maximum(ktt, 0.0))
    return z - w, z + w
