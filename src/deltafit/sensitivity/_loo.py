"""Leave-one-out bounds for every training sample at once: the ball of Thm 1 with R = {t}
(Okumura et al. Cor. 5; Sivan et al. §4.2) and Zhang's bound, the baseline of Sivan §4.2."""

from __future__ import annotations

import numpy as np

from ._data_change import _c_at, _resolve_c_new
from ._model_access import check_model

__all__ = ["loo_bounds", "zhang_loo_bounds"]


def _slots(prob, ids):
    if ids is None:
        return prob.live
    return prob.handles(ids, "ids")


def loo_bounds(model, ids=None, *, C_new=None):
    """Bounds of ``⟨Φ(x_t), β_{−t}⟩``, the score of sample t by the model trained without it.

    For each t the ball of Sivan et al. Thm 1 / Okumura et al. Thm 1 with ``R = {t}`` gives
    (with γ_t = −ℓ'(y_t, z_t), ρ = C₂/C₁, c = ½(1 − ρ))

        center score  (1 − c) z_t − (C₂/2) γ_t k_tt
        ‖r_t‖²        c² ‖β‖² + c C₂ γ_t z_t + (C₂²/4) γ_t² k_tt

    and bounds ``center ∓ sqrt(k_tt) (‖r_t‖ + ρ · grad_norm_)`` (Okumura et al. Cor. 5 in the
    mean-loss case ``C_new="mean"``).  All n bounds cost one pass over the training scores.

    Parameters
    ----------
    model : fitted deltafit estimator (training rows kept)
    ids : array-like of int, optional
        Samples to leave out (default: all, in ``sample_ids_`` order).
    C_new : float, "mean", callable or None
        As in :func:`deltafit.sensitivity`; evaluated at ``n − 1``.

    Returns
    -------
    lo, hi : ndarray of shape (n_ids,)
    """
    loss = check_model(model, "leave-one-out bounds")
    prob = model.problem_
    slots = _slots(prob, ids)
    n = prob.n_samples
    if n < 2:
        raise ValueError("leave-one-out needs at least two training samples")
    C1 = prob.C
    C2 = _c_at(_resolve_c_new(C_new, C1, n), n - 1)
    rho = C2 / C1
    cr = 0.5 * (1.0 - rho)
    z, ktt = prob.scores(slots)
    gamma = -loss.d1(prob.targets[slots], z)
    center = (1.0 - cr) * z - 0.5 * C2 * gamma * ktt
    r2 = 0.25 * C2 * C2 * gamma * gamma * ktt
    if cr != 0.0:
        r2 = r2 + cr * cr * prob.solution_sq_norm() + cr * C2 * gamma * z
    R = np.sqrt(np.maximum(r2, 0.0)) + rho * prob.certified_residual
    e = np.sqrt(np.maximum(ktt, 0.0))
    return center - e * R, center + e * R


def zhang_loo_bounds(model, ids=None):
    """Zhang's (2003) leave-one-out bounds ``z_t ∓ |α_t| k(x_t, x_t)`` (Sivan et al. §4.2).

    The baseline against which Sivan et al. compare their bounds.  α_t is the sample's
    coefficient in the dual form β = Σ α_i Φ(x_i), taken as its value at the optimum,
    ``−C ℓ'(y_t, z_t)`` (the stored α of a kernel model is not unique when K is singular).  As in
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
    lo, hi : ndarray of shape (n_ids,)
    """
    loss = check_model(model, "leave-one-out bounds")
    prob = model.problem_
    slots = _slots(prob, ids)
    z, ktt = prob.scores(slots)
    # α_t at the optimum is −C ℓ'(y_t, z_t); the stored α of a kernel model is not unique when
    # K is singular (duplicated rows), so it is not used
    alpha = -prob.C * loss.d1(prob.targets[slots], z)
    w = np.abs(alpha) * ktt + prob.certified_residual * np.sqrt(np.maximum(ktt, 0.0))
    return z - w, z + w
