"""Exact leave-one-out and k-fold predictions for the squared loss from one factorization.

For ``C Σ (t_i − z_i)² + ½‖β‖²`` (ridge, kernel ridge, LS-SVM; ρ = 1/(2C)) the fit is linear in
the targets, ``z = H t``, and the model trained without a set R of samples predicts R with
residuals ``e_R = (I − H_RR)⁻¹ r_R``, r the full model's residuals.  In primal form
``H = Φ (ΦᵀΦ + ρI)⁻¹ Φᵀ``; in dual form ``I − H = ρ G⁻¹`` with ``G = K + ρI`` and ``α = G⁻¹t``,
so ``e_R = ((G⁻¹)_RR)⁻¹ α_R`` (the LS-SVM decremental formula of Lee et al., "Exact incremental and decremental learning for LS-SVM", applied to a
whole fold; for R = {t} the classical ``r_t / (1 − H_tt)`` = ``α_t / (G⁻¹)_tt``).  scikit-learn's
``RidgeCV`` offers the leave-one-out case for linear ridge; this covers kernels, folds and
classifiers (LS-SVM labels are the signs).

**Sample weights** (``C Σ w_i (t_i − z_i)² + ½‖β‖²``, W = diag(w)).  The fit is
``z = Φ A⁻¹ Φᵀ W t`` with ``A = ΦᵀWΦ + ρI``; removing R gives ``β_{−R} = β − A⁻¹ Φ_Rᵀ W_R e_R``
with ``e_R = t_R − z_{−R}``, hence ``(I − H_RR W_R) e_R = r_R`` with ``H = Φ A⁻¹ Φᵀ``: for one
sample the weighted leverage ``h_t = w_t Φ_tᵀ A⁻¹ Φ_t`` and ``e_t = r_t / (1 − h_t)`` (a sample
of weight 0 has ``h_t = 0``: its left-out prediction is the model's).  In dual form, by the
push-through identity ``A⁻¹Φᵀ = Φᵀ(WK + ρI)⁻¹``, ``I − HW = ρ Ĝ⁻¹`` with the non-symmetric
``Ĝ = KW + ρI`` and ``r = ρ Ĝ⁻¹ t``, so ``e_R = ((Ĝ⁻¹)_RR)⁻¹ α̂_R`` with ``α̂ = Ĝ⁻¹ t``: the
unweighted formula with ``G`` replaced by ``Ĝ`` (an LU factorisation instead of Cholesky).
"""

from __future__ import annotations

import numpy as np
from scipy.linalg import cho_factor, cho_solve, lu_factor, lu_solve, solve

__all__ = ["closed_form_predictions"]


def closed_form_predictions(prob, splits, targets=None):
    """Exact scores of each split's model at its removed samples.

    Parameters
    ----------
    prob : TrainingProblem
        A squared-loss problem (explicit features or kernel).
    splits : None or list of (R, T)
        None: leave-one-out over every sample.  Otherwise removed indices R and evaluated
        indices T (T must be a subset of R: the left-out samples).
    targets : ndarray of shape (n, K), optional
        Several target columns over the same features (the K one-vs-rest problems of a
        multiclass model): the hat matrix does not depend on the targets, so one
        factorization gives every column's left-out scores.  Default: ``prob.t``.

    Returns
    -------
    list of ndarray
        Scores at T per split (one array of length n for leave-one-out), of shape (·, K)
        when ``targets`` is given.
    """
    t, n = (prob.t if targets is None else np.asarray(targets, dtype=np.float64)), prob.n
    rho = 1.0 / (2.0 * prob.C)
    use_dual = prob.kernel or prob.Phi.shape[1] > n
    w = getattr(prob, "w", None)
    if w is not None:
        return _weighted(prob, splits, t, n, rho, w, use_dual)
    if use_dual:
        K = prob.K if prob.kernel else prob.Phi @ prob.Phi.T
        G = K + rho * np.eye(n)
        Ginv = cho_solve(cho_factor(G, lower=True, check_finite=False), np.eye(n),
                         check_finite=False)
        Ginv = 0.5 * (Ginv + Ginv.T)
        alpha = Ginv @ t
        if splits is None:
            d = np.diag(Ginv)
            return [t - alpha / (d if t.ndim == 1 else d[:, None])]
        out = []
        for R, T in splits:
            e = solve(Ginv[np.ix_(R, R)], alpha[R], assume_a="pos", check_finite=False)
            out.append(_at(t[R] - e, R, T))
        return out
    Phi = prob.Phi
    p = Phi.shape[1]
    A = Phi.T @ Phi + rho * np.eye(p)
    cf = cho_factor(A, lower=True, check_finite=False)
    beta = cho_solve(cf, Phi.T @ t, check_finite=False)
    r = t - Phi @ beta
    if splits is None:
        W = cho_solve(cf, Phi.T, check_finite=False)  # A⁻¹ Φᵀ
        h = np.einsum("ij,ji->i", Phi, W)
        return [t - r / ((1.0 - h) if t.ndim == 1 else (1.0 - h)[:, None])]
    out = []
    for R, T in splits:
        PR = Phi[R]
        H = PR @ cho_solve(cf, PR.T, check_finite=False)
        e = solve(np.eye(len(R)) - H, r[R], check_finite=False)
        out.append(_at(t[R] - e, R, T))
    return out


def _at(values_on_R, R, T):
    """Values indexed by R, read at T ⊆ R."""
    if len(T) == len(R) and np.array_equal(T, R):
        return values_on_R
    pos = {int(i): k for k, i in enumerate(R)}
    return values_on_R[[pos[int(i)] for i in T]]


def _weighted(prob, splits, t, n, rho, w, use_dual):
    """:func:`closed_form_predictions` with sample weights (see the module docstring)."""
    if use_dual:
        K = prob.K if prob.kernel else prob.Phi @ prob.Phi.T
        G = K * w[None, :]  # Ĝ = K W + ρI
        G.flat[:: n + 1] += rho
        Ginv = lu_solve(lu_factor(G, check_finite=False), np.eye(n), check_finite=False)
        alpha = Ginv @ t
        if splits is None:
            d = np.diag(Ginv)
            return [t - alpha / (d if t.ndim == 1 else d[:, None])]
        return [_at(t[R] - solve(Ginv[np.ix_(R, R)], alpha[R], check_finite=False), R, T)
                for R, T in splits]
    Phi = prob.Phi
    p = Phi.shape[1]
    A = (Phi.T * w) @ Phi
    A.flat[:: p + 1] += rho
    cf = cho_factor(A, lower=True, check_finite=False)
    wt = w * t if t.ndim == 1 else w[:, None] * t
    beta = cho_solve(cf, Phi.T @ wt, check_finite=False)
    r = t - Phi @ beta
    if splits is None:
        W = cho_solve(cf, Phi.T, check_finite=False)  # A⁻¹ Φᵀ
        h = w * np.einsum("ij,ji->i", Phi, W)  # the weighted leverages
        return [t - r / ((1.0 - h) if t.ndim == 1 else (1.0 - h)[:, None])]
    out = []
    for R, T in splits:
        PR = Phi[R]
        H = (PR @ cho_solve(cf, PR.T, check_finite=False)) * w[R][None, :]
        e = solve(np.eye(len(R)) - H, r[R], check_finite=False)
        out.append(_at(t[R] - e, R, T))
    return out
