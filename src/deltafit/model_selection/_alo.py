"""Approximate leave-one-out (ALO): an APPROXIMATION of every leave-one-out score from one fit.

For a fitted model of the canonical problem (ARCHITECTURE.md, "The problem")

    minimise_β  J(β) = C · Σ_i ℓ(y_i, z_i) + ½‖β‖²,     z_i = ⟨Φ(x_i), β⟩,

ALO estimates the leave-one-out decision values ``z_t^{loo} = ⟨Φ(x_t), β_{−t}⟩`` (β_{−t}: the
minimiser without sample t) of all n samples at the cost of about one fit (one factorisation),
instead of n refits.  **The values are an approximation, not exact leave-one-out and not a
bound**: they are exact only for the squared loss (and in the special cases listed in
:func:`alo_kernel`); certified leave-one-out answers live in :func:`deltafit.sensitivity.loo_bounds`
and :func:`deltafit.model_selection.loo`.

Smooth losses (squared, logistic, squared hinge with its generalised Hessian)
    One Newton step on the leave-t-out objective ``J_{−t} = J − C ℓ(y_t, ·)`` from β̂.  Its
    gradient at β̂ is ``−C ℓ'_t Φ_t`` and its Hessian ``H − C ℓ''_t Φ_t Φ_tᵀ`` with
    ``H = I + C Φᵀ D Φ``, ``D = diag ℓ''(z)``; by Sherman–Morrison

        z_t^{alo} = z_t + C ℓ'_t h_t / (1 − C ℓ''_t h_t),    h_t = Φ_tᵀ H⁻¹ Φ_t.      (N)

    ``1 − C ℓ''_t h_t = 1 / (1 + C ℓ''_t h_t^{(−t)}) > 0`` always.  J_{−t} is quadratic for the
    squared loss, so (N) is then the exact leave-one-out score (the classical
    ``r_t / (1 − H_tt)``).  Kernel form: with ``W = C D`` and ``S = W^{1/2}``, the push-through
    identity ``Φ H⁻¹ Φᵀ = K (I + W K)⁻¹ = K − K S (I + S K S)⁻¹ S K`` gives h from one Cholesky
    factorisation of the SPD matrix ``I + SKS`` over the samples with ℓ'' > 0 — K itself is
    never inverted, so a singular K (linear kernel with p < n, duplicate rows) is fine; and
    ``1 − W_tt h_t = [(I + SKS)⁻¹]_tt``, computed directly.

Hinge ``ℓ = max(0, 1 − y z)`` (He et al. §1, after Wang et al.'s ALO for non-smooth losses)
    Derived as the limit of (N) for a smoothed hinge whose curvature vanishes on the smooth set
    ``S = {t : y_t z_t ≠ 1}`` and grows without bound on the singular set
    ``V = {t : y_t z_t = 1}`` (the free support vectors, ``0 < α_t < C``).  ``H⁻¹`` then tends to
    the projection ``P_V`` onto the orthogonal complement of ``span{Φ_v : v ∈ V}``, and

        z_t^{alo} = z_t + a_t g_t,
        a_t = C · Φ_tᵀ P_V Φ_t = C (k_tt − K_{tV} K_VV⁺ K_{Vt})          t ∈ S,
        a_t = C / [K_VV⁻¹]_tt   (C × squared distance of Φ_t to span{Φ_v : v ∈ V∖t})   t ∈ V,
        g_t = −y_t 1{y_t z_t < 1}                                              t ∈ S,
        g_t = −y_t α_t / C      (KKT: β = −C Σ_i g_i Φ_i = Σ_i α_i y_i Φ_i)     t ∈ V.

    These are He et al.'s formulas for a_i and g_ℓ with λ = 1/C: its
    ``(1/λ) K_{·,i}ᵀ[K⁻¹ − K⁻¹K_{·,V}(K_{·,V}ᵀK⁻¹K_{·,V})⁻¹K_{·,V}ᵀK⁻¹]K_{·,i}`` reduces to
    ``C (k_ii − K_{iV} K_VV⁻¹ K_{Vi})`` because ``K_{·,i}ᵀ K⁻¹ K_{·,j} = k_ij`` — so neither K⁻¹ nor
    an invertible K is needed — and its ``[λ (K_{·,V}ᵀK⁻¹K_{·,V})⁻¹_ii]⁻¹`` is ``C / [K_VV⁻¹]_ii``.
    Its g_{ℓ,V} (the least-squares solution of the KKT system) carries the opposite sign: the
    stationarity condition ``Σ_v g_v K_{·,v} = −(λKα + Σ_{j∈S} g_j K_{·,j})`` gives
    ``g_V = −(K_{·,V}ᵀK_{·,V})⁻¹ K_{·,V}ᵀ [λKα − Σ_{j: y_j z_j<1} y_j K_{·,j}]``, i.e.
    ``g_v = −y_v α_v / C``, which lies in the subdifferential ``−y_v [0, 1]``.
    :func:`alo_primal` uses the dual coefficients when given and that least-squares solution
    otherwise; g_V is clipped to the subdifferential.

Explicit approximate features (He et al. §2)
    With ``K ≈ Φ̂ Φ̂ᵀ`` (scikit-learn's :class:`~sklearn.kernel_approximation.Nystroem`: SVD of
    the landmark block, singular values clamped at 1e-12), the leverages ``h`` / ``a`` are
    computed from Φ̂ by the formulas above in feature form (O(n m²) instead of O(n³)), while
    the scores and the loss derivatives come from the exact kernel model
    (:func:`alo_feature_map`).

Tolerances
    ``margin_tol`` (default :data:`MARGIN_TOL` = 1e-6): t ∈ V iff ``|1 − y_t z_t| ≤ margin_tol``.
    A free support vector has margin exactly 1 at the optimum, and deltafit's hinge QP
    (:func:`deltafit.solvers.hinge_primal`, active-set polished) returns such margins to about
    1e-14 (on breast cancer, linear and rbf, C = 1, the next margin is 4e-3 and 1.7e-2 away),
    so the tolerance only has to absorb rounding.  A looser solver (LIBLINEAR at its default
    tolerance) needs a larger ``margin_tol``.  ALO is discontinuous where a sample crosses the
    margin (its a_t switches formula), so the side a near-tie is put on is a convention; a
    sample at a bound (α = 0 or C) lying on the margin goes to V, where its
    ``g_v = −y_v α_v / C`` equals the g it would have on its side of S (0 or −y_v).
    ``rank_tol`` (default :data:`RANK_TOL` = 1e-10): eigenvalues of K_VV below
    ``rank_tol · max eig`` count as zero (Φ_V is then treated as rank deficient: duplicate
    support vectors, more free support vectors than features).  A sample of V lying in the span
    of the other samples of V then gets a_t ≈ 0 (its leave-one-out change is absorbed by them),
    which is the limit of the smoothing argument; numerically ``[K_VV⁻¹]_tt`` is evaluated with
    those eigenvalues raised to the cut-off.  The cut-off keeps the rounding of the
    projection ``K_{tV} K_VV⁺ K_{Vt}`` below about ``1e-6 k_tt`` (eigenvalue errors are
    ``O(ε_mach · max eig)``).
"""

from __future__ import annotations

import numbers
from typing import TYPE_CHECKING, Any

import numpy as np
from scipy import linalg
from sklearn.base import clone
from sklearn.exceptions import NotFittedError
from sklearn.utils.validation import check_is_fitted

from deltafit.losses import get_loss
from deltafit.models import FittedProblem
from deltafit.sensitivity._model_access import n_classes

if TYPE_CHECKING:
    from deltafit.losses import Loss

__all__ = ["alo_decisions", "alo_primal", "alo_kernel", "alo_feature_map", "MARGIN_TOL", "RANK_TOL"]

#: Samples with ``|1 − y z| ≤ MARGIN_TOL`` form the singular set V of the hinge loss.
MARGIN_TOL = 1e-6
#: Eigenvalues of the Gram matrix of V below ``RANK_TOL × largest`` count as zero.
RANK_TOL = 1e-10
# Denominators 1 − C ℓ''_t h_t are positive in exact arithmetic; this floor only keeps rounding
# from dividing by zero (a sample of leverage one with C ℓ'' = 1/h exactly).
_TINY = np.finfo(float).tiny


# --------------------------------------------------------------------------- input checks
def _loss_name(loss):
    """``(name, Loss object)``; the hinge is handled by its own formulas (object None)."""
    try:
        obj = get_loss(loss)
    except ValueError:
        raise ValueError(
            f"unknown loss {loss!r} for ALO; expected 'squared', 'logistic', 'squared_hinge' "
            "or 'hinge'"
        ) from None
    if obj.name == "hinge":
        return "hinge", None
    if not getattr(obj, "smooth", True):
        raise ValueError(
            f"ALO's Newton-step formula needs a smooth loss; loss={obj.name!r} is not smooth "
            "(only the hinge has a non-smooth formula here)"
        )
    return obj.name, obj


def _finite(a, what, ndim):
    try:
        a = np.asarray(a, dtype=np.float64)
    except (TypeError, ValueError) as exc:
        raise ValueError(f"{what} must be numeric: {exc}") from exc
    if a.ndim != ndim:
        raise ValueError(f"{what} must be {ndim}-D, got shape {a.shape}")
    if not np.all(np.isfinite(a)):
        raise ValueError(f"{what} contains NaN or infinity")
    return a


def _check_common(y, loss, C, n, margin_tol, rank_tol):
    y = _finite(y, "y", 1)
    if y.shape[0] != n:
        raise ValueError(f"y has {y.shape[0]} entries but there are {n} samples")
    if n == 0:
        raise ValueError("ALO needs at least one training sample")
    if isinstance(C, bool) or not isinstance(C, numbers.Real) or not np.isfinite(C) or C <= 0:
        raise ValueError(f"C must be a finite real number > 0, got {C!r}")
    name, obj = _loss_name(loss)
    if name != "squared" and not np.all(np.abs(y) == 1.0):
        raise ValueError(f"loss={name!r} needs labels y in {{-1, +1}}")
    for value, what in ((margin_tol, "margin_tol"), (rank_tol, "rank_tol")):
        if (
            isinstance(value, bool)
            or not isinstance(value, numbers.Real)
            or not np.isfinite(value)
            or value < 0
        ):
            raise ValueError(f"{what} must be a finite real number >= 0, got {value!r}")
    return y, float(C), name, obj


def _check_vector(a, n, what):
    a = _finite(a, what, 1)
    if a.shape[0] != n:
        raise ValueError(f"{what} has {a.shape[0]} entries, expected {n}")
    return a


# ------------------------------------------------------------------------ leverages
def _smooth_leverage_features(Phi, w):
    """``h_t = Φ_tᵀ (I + Φᵀ W Φ)⁻¹ Φ_t`` and ``m_t = 1 − w_t h_t`` over explicit features."""
    n, p = Phi.shape
    if p > n:
        return _smooth_leverage_kernel(Phi @ Phi.T, w)
    act = w > 0
    Pa = Phi[act]
    H = (Pa.T * w[act]) @ Pa
    H.flat[:: p + 1] += 1.0
    L = linalg.cholesky(H, lower=True, check_finite=False)
    B = linalg.solve_triangular(L, Phi.T, lower=True, check_finite=False)
    h = np.einsum("ij,ij->j", B, B)
    return h, 1.0 - w * h


def _smooth_leverage_kernel(K, w):
    """``h = diag(K − K S (I + SKS)⁻¹ S K)`` and ``m = 1 − w h`` with ``S = W^{1/2}``.

    For samples with ``w_t > 0``, ``m_t = [(I + SKS)⁻¹]_tt`` is computed directly (no
    cancellation); ``m_t = 1`` elsewhere.
    """
    n = K.shape[0]
    kdiag = np.diagonal(K).copy()
    act = np.flatnonzero(w > 0)
    m = np.ones(n)
    if act.size == 0:
        return kdiag, m
    s = np.sqrt(w[act])
    A = K[np.ix_(act, act)] * np.outer(s, s)
    A.flat[:: act.size + 1] += 1.0
    try:
        L = linalg.cholesky(A, lower=True, check_finite=False)
    except linalg.LinAlgError:
        raise ValueError(
            "I + S K S is not positive definite: the kernel matrix is not positive "
            "semi-definite (an indefinite kernel such as 'sigmoid'?)"
        ) from None
    B = linalg.solve_triangular(L, K[act] * s[:, None], lower=True, check_finite=False)
    h = np.maximum(kdiag - np.einsum("ij,ij->j", B, B), 0.0)
    Linv = linalg.solve_triangular(L, np.eye(act.size), lower=True, check_finite=False)
    m[act] = np.einsum("ij,ij->j", Linv, Linv)
    return h, m


def _hinge_leverage(kdiag, K_nV, V, rank_tol):
    """``h_t = Φ_tᵀ P_V Φ_t`` (t ∉ V) and the squared distance of Φ_t to the span of the other
    samples of V (t ∈ V), from ``diag K`` and the columns ``K[:, V]``.

    Also returns the eigendecomposition pieces used for the least-squares g_V.
    """
    h = kdiag.copy()
    if V.size == 0:
        return np.maximum(h, 0.0), None
    G = K_nV[V]
    G = 0.5 * (G + G.T)
    lam, U = linalg.eigh(G, check_finite=False)
    top = max(float(lam[-1]), 0.0)
    cut = rank_tol * top
    keep = lam > cut
    if top <= 0.0 or not keep.any():
        # every Φ_v is (numerically) zero: P_V = I, and each v lies in the span of the others
        h = np.maximum(h, 0.0)
        h[V] = 0.0
        return h, (lam, U, keep)
    R = (U[:, keep] / np.sqrt(lam[keep])).T @ K_nV.T  # r × n: coordinates in span(Φ_V)
    h = np.maximum(h - np.einsum("ij,ij->j", R, R), 0.0)
    # [K_VV⁻¹]_tt with eigenvalues below the cut raised to it: a sample of V in the span of the
    # others has a weight ≥ O(1) on a discarded eigenvector and gets h_t = O(cut) ≈ 0
    M_diag = (U * U) @ (1.0 / np.maximum(lam, max(cut, _TINY)))
    hv = 1.0 / M_diag
    hv[hv <= cut] = 0.0
    h[V] = np.minimum(hv, np.maximum(kdiag[V], 0.0))
    return h, (lam, U, keep)


# --------------------------------------------------------------------------- the formulas
def _alo_smooth(z, y, loss, C, leverage):
    """Formula (N) with ``h, 1 − C ℓ'' h = leverage(C ℓ'')``."""
    h, m = leverage(C * loss.d2(y, z))
    return z + C * loss.d1(y, z) * h / np.maximum(m, _TINY)


def _hinge_sets(z, y, margin_tol):
    margin = y * z
    V = np.flatnonzero(np.abs(1.0 - margin) <= margin_tol)
    viol = margin < 1.0 - margin_tol
    return V, viol


def _clip_g(gV, yV):
    """g_v restricted to the hinge's subdifferential ``−y_v [0, 1]``."""
    return -yV * np.clip(-yV * gV, 0.0, 1.0)


# ------------------------------------------------------------------------ public, raw arrays
def alo_primal(
    Phi: np.ndarray,
    y: np.ndarray,
    loss: str | Loss,
    C: float,
    coef: np.ndarray,
    *,
    dual_coef: np.ndarray | None = None,
    margin_tol: float = MARGIN_TOL,
    rank_tol: float = RANK_TOL,
) -> np.ndarray:
    """Approximate leave-one-out scores of a model over explicit features (an APPROXIMATION).

    For ``min_β C Σ ℓ(y_i, Φ_iᵀβ) + ½‖β‖²`` returns ``z_t^{alo} ≈ Φ_tᵀ β_{−t}`` for every t, β_{−t}
    the solution without sample t.  Exact (to rounding) for the squared loss; an approximation
    for the other losses (see the module docstring for the formulas and their accuracy).

    Parameters
    ----------
    Phi : ndarray of shape (n, p)
        Features of the training samples, the intercept column included when the model has
        one (linear models: X; with a feature map such as Nyström: its output).
    y : ndarray of shape (n,)
        Targets; ±1 for the classification losses.
    loss : {"squared", "logistic", "squared_hinge", "hinge"} or Loss
    C : float
        Weight of the data term.
    coef : ndarray of shape (p,)
        The minimiser β̂ (as exact as possible: ALO is a statement about the optimum).
    dual_coef : ndarray of shape (n,), optional
        Hinge only: expansion coefficients ``c`` of ``β = Σ_i c_i Φ_i`` (``c_i = α_i y_i`` with
        the dual variables ``0 ≤ α_i ≤ C``), used for ``g_V = −c_V / C``.  Without them g_V is
        the least-squares solution of the stationarity condition
        ``Φ_Vᵀ g_V = −β/C − Φ_Sᵀ g_S`` (He et al. §1, sign corrected).
    margin_tol : float, default=MARGIN_TOL
        Hinge only: ``|1 − y_t z_t| ≤ margin_tol`` puts t in the singular set V.
    rank_tol : float, default=RANK_TOL
        Hinge only: relative eigenvalue cut-off on the Gram matrix of V.

    Returns
    -------
    z_alo : ndarray of shape (n,)
        Approximate leave-one-out decision values.

    Notes
    -----
    Smooth losses: ``z_t + C ℓ'_t h_t / (1 − C ℓ''_t h_t)``, ``h_t = Φ_tᵀ(I + C ΦᵀDΦ)⁻¹Φ_t``
    (one Newton step on the leave-t-out problem; one p × p Cholesky factorisation, or the
    kernel form when p > n).  Hinge: He et al. §1's ``z_t + a_t g_t`` in feature form, with
    ``K_{:,V} = Φ Φ_Vᵀ`` (the projection onto the complement of the span of Φ_V).
    """
    Phi = _finite(Phi, "Phi", 2)
    n, p = Phi.shape
    y, C, name, obj = _check_common(y, loss, C, n, margin_tol, rank_tol)
    coef = _check_vector(coef, p, "coef")
    z = Phi @ coef
    if name != "hinge":
        return _alo_smooth(z, y, obj, C, lambda w: _smooth_leverage_features(Phi, w))
    if dual_coef is not None:
        dual_coef = _check_vector(dual_coef, n, "dual_coef")
    return _alo_hinge_features(Phi, y, C, z, dual_coef, coef, margin_tol, rank_tol)


def _alo_hinge_features(Phi, y, C, z, dual_coef, coef, margin_tol, rank_tol):
    V, viol = _hinge_sets(z, y, margin_tol)
    kdiag = np.einsum("ij,ij->i", Phi, Phi)
    K_nV = Phi @ Phi[V].T
    h, eig = _hinge_leverage(kdiag, K_nV, V, rank_tol)
    g = np.where(viol, -y, 0.0)
    if V.size:
        if dual_coef is not None:
            gV = -dual_coef[V] / C
        else:
            # least squares Φ_Vᵀ g_V = r, r = −β/C − Φ_Sᵀ g_S:  g_V = (Φ_V Φ_Vᵀ)⁺ Φ_V r
            r = -coef / C - Phi.T @ g
            lam, U, keep = eig
            Uk = U[:, keep]
            gV = Uk @ ((Uk.T @ (Phi[V] @ r)) / lam[keep])
        g[V] = _clip_g(gV, y[V])
    return z + C * g * h


def alo_kernel(
    K: np.ndarray,
    y: np.ndarray,
    loss: str | Loss,
    C: float,
    alpha: np.ndarray,
    *,
    margin_tol: float = MARGIN_TOL,
    rank_tol: float = RANK_TOL,
) -> np.ndarray:
    """Approximate leave-one-out scores of a kernel model (an APPROXIMATION).

    For ``β = Σ_i α_i Φ(x_i)`` minimising ``C Σ ℓ(y_i, z_i) + ½‖β‖²``, ``z = K α``, returns
    ``z_t^{alo} ≈ ⟨Φ(x_t), β_{−t}⟩`` for every t.

    Parameters
    ----------
    K : ndarray of shape (n, n)
        Kernel matrix of the training samples (the intercept term ``s²`` included).  It may be
        singular: it is never inverted.
    y : ndarray of shape (n,)
    loss : {"squared", "logistic", "squared_hinge", "hinge"} or Loss
    C : float
    alpha : ndarray of shape (n,)
        Expansion coefficients of the solution (deltafit's ``dual_coef_``; for the hinge
        ``α_i y_i`` with the dual variables ``0 ≤ α_i ≤ C``).
    margin_tol, rank_tol : float
        Hinge only, see :func:`alo_primal`.

    Returns
    -------
    z_alo : ndarray of shape (n,)
        Approximate leave-one-out decision values (not bounds; exact for the squared loss).

    Notes
    -----
    Smooth losses: formula (N) of the module docstring with
    ``h = diag(K − K S (I + SKS)⁻¹ S K)``, ``1 − C ℓ''_t h_t = [(I + SKS)⁻¹]_tt``,
    ``S = (C D)^{1/2}`` — one Cholesky factorisation over the samples with ℓ'' > 0.  Exact for
    the squared loss.

    Hinge (He et al. §1): ``z_t + a_t g_t`` with ``a_t = C (k_tt − K_{tV} K_VV⁺ K_{Vt})`` on S,
    ``a_t = C / [K_VV⁻¹]_tt`` on V, ``g_t = −y_t 1{y_t z_t < 1}`` on S and ``g_v = −α_v / C`` on V.
    Two special cases are exact: V empty and every sample violating its margin with the
    violations kept after the removal (``z_t − C y_t k_tt``, small C), and every sample in V
    with all ``0 < α < C`` kept after the removal (hard-margin interpolation: the block-inverse
    identity ``z_t − z_t^{loo} = [K_VV⁻¹ y]_t / [K_VV⁻¹]_tt``).
    """
    K = _finite(K, "K", 2)
    n = K.shape[0]
    if K.shape != (n, n):
        raise ValueError(f"K must be square, got shape {K.shape}")
    y, C, name, obj = _check_common(y, loss, C, n, margin_tol, rank_tol)
    alpha = _check_vector(alpha, n, "alpha")
    z = K @ alpha
    if name != "hinge":
        return _alo_smooth(z, y, obj, C, lambda w: _smooth_leverage_kernel(K, w))
    return _alo_hinge_kernel(
        np.diagonal(K).copy(), lambda V: K[:, V], y, C, z, alpha, margin_tol, rank_tol
    )


def _alo_hinge_kernel(kdiag, columns, y, C, z, alpha, margin_tol, rank_tol):
    V, viol = _hinge_sets(z, y, margin_tol)
    h, _ = _hinge_leverage(kdiag, columns(V), V, rank_tol)
    g = np.where(viol, -y, 0.0)
    if V.size:
        g[V] = _clip_g(-alpha[V] / C, y[V])
    return z + C * g * h


def alo_feature_map(
    Phi: np.ndarray,
    y: np.ndarray,
    loss: str | Loss,
    C: float,
    decision: np.ndarray,
    *,
    dual_coef: np.ndarray | None = None,
    margin_tol: float = MARGIN_TOL,
    rank_tol: float = RANK_TOL,
) -> np.ndarray:
    """ALO of a kernel model through approximate explicit features (He et al. §2; an
    APPROXIMATION of an approximation).

    The leverages are computed from features ``Φ̂`` with ``Φ̂ Φ̂ᵀ ≈ K`` (e.g. the output of a
    :class:`~sklearn.kernel_approximation.Nystroem` map, plus the column ``s`` for the
    intercept), at O(n m²) for m features instead of the O(n³) of :func:`alo_kernel`; the scores
    ``z`` (and, for the hinge, the dual coefficients) are those of the exact kernel model.  With
    ``Φ̂ Φ̂ᵀ = K`` the result equals :func:`alo_kernel`'s.

    Parameters
    ----------
    Phi : ndarray of shape (n, m)
        Approximate features of the training samples.
    y : ndarray of shape (n,)
    loss : {"squared", "logistic", "squared_hinge", "hinge"} or Loss
    C : float
    decision : ndarray of shape (n,)
        The exact model's training scores ``z = K α``.
    dual_coef : ndarray of shape (n,), optional
        Expansion coefficients α of the kernel model; required for the hinge (g_V = −α_V / C).
    margin_tol, rank_tol : float
        Hinge only, see :func:`alo_primal`.

    Returns
    -------
    z_alo : ndarray of shape (n,)

    Notes
    -----
    With too few features the hinge's projection degenerates: once the samples of V span the
    m feature dimensions, ``P_V = 0`` and every sample of S keeps its score (He et al. §2 does
    not address this; use m well above |V|).
    """
    Phi = _finite(Phi, "Phi", 2)
    n = Phi.shape[0]
    y, C, name, obj = _check_common(y, loss, C, n, margin_tol, rank_tol)
    z = _check_vector(decision, n, "decision")
    if name != "hinge":
        return _alo_smooth(z, y, obj, C, lambda w: _smooth_leverage_features(Phi, w))
    if dual_coef is None:
        raise ValueError("the hinge loss needs the kernel model's dual_coef for g_V")
    dual_coef = _check_vector(dual_coef, n, "dual_coef")
    kdiag = np.einsum("ij,ij->i", Phi, Phi)
    return _alo_hinge_kernel(
        kdiag, lambda V: Phi @ Phi[V].T, y, C, z, dual_coef, margin_tol, rank_tol
    )


# ----------------------------------------------------------------------------- the models
def _check_alo_model(model):
    prob = model if isinstance(model, FittedProblem) else FittedProblem.of(model, "ALO")
    if not prob.kernel and not prob.keeps_rows:
        raise ValueError(
            "this model keeps no training rows (keep_data=False); ALO needs them: refit with "
            "keep_data=True"
        )
    return prob


def _nystroem_for(prob, n_components, random_state):
    """A Nystroem map of the fitted model's kernel (its fitted gamma, degree, coef0)."""
    from sklearn.kernel_approximation import Nystroem

    kw = prob.kernel_params
    if callable(kw["kernel"]):
        raise ValueError(
            "n_components builds a Nystroem map from a named kernel; for a callable kernel pass "
            "feature_map=Nystroem(kernel=..., ...) with scikit-learn's per-pair convention"
        )
    params = dict(kw["kernel_params"] or {})
    return Nystroem(
        kernel=kw["kernel"],
        gamma=kw["gamma"],
        degree=kw["degree"],
        coef0=kw["coef0"],
        kernel_params=params or None,
        n_components=int(n_components),
        random_state=random_state,
    )


def _model_dual_coef(prob, slots):
    """Expansion coefficients ``y_i α_i`` (β = Σ_i y_i α_i Φ_i) of a linear hinge model, from the
    dual variables α_i ∈ [0, C] it keeps (``problem_.dual``); None if it keeps none (g_V then
    comes from the least-squares KKT solution)."""
    dual = prob.dual
    if dual is None:
        return None
    return prob.targets[slots] * dual[slots]


def alo_decisions(
    model: Any,
    *,
    feature_map: Any = None,
    n_components: int | None = None,
    random_state: int | np.random.RandomState | None = None,
    margin_tol: float = MARGIN_TOL,
    rank_tol: float = RANK_TOL,
) -> np.ndarray:
    """Approximate leave-one-out decision values of a fitted deltafit estimator (an
    APPROXIMATION, not exact leave-one-out and not a certified bound).

    Parameters
    ----------
    model : LinearClassifier, LinearRegressor, KernelClassifier or KernelRegressor
        Fitted, with its training rows (``keep_data=True`` for linear models).  Its losses:
        squared (exact leave-one-out), logistic, squared hinge (one Newton step) and hinge
        (He et al. §1).
    feature_map : scikit-learn transformer, optional
        Kernel models only: compute the leverages through this approximate explicit feature
        map (He et al. §2), e.g. ``Nystroem(kernel="rbf", gamma=..., n_components=200)`` with the
        model's kernel.  An unfitted map is cloned and fitted on the training rows; the column
        ``intercept_scaling`` is appended when the model fits an intercept.
    n_components : int, optional
        Kernel models with a named kernel: shorthand for a Nystroem map of the model's kernel
        with this many components.
    random_state : int, RandomState or None
        Landmark selection of the ``n_components`` Nystroem map.
    margin_tol, rank_tol : float
        Hinge only, see :func:`alo_primal`.

    Returns
    -------
    z_alo : ndarray of shape (n_samples_,), or (n_samples_, K) for K ≥ 3 classes
        ``≈ ⟨Φ(x_t), β_{−t}⟩`` for every training sample, in the order of ``model.sample_ids_``;
        for binary classifiers positive means ``classes_[1]``.  A multiclass (one-vs-rest)
        model gets the ALO of each class's binary problem (``model.problem_.for_class(k)``),
        column k; its ALO label is the argmax.

    Raises
    ------
    ValueError
        Not a deltafit estimator, not fitted (:class:`~sklearn.exceptions.NotFittedError`, a
        ValueError), no stored rows (``keep_data=False``), or an unsupported option.

    See Also
    --------
    alo_primal, alo_kernel, alo_feature_map : the formulas on raw arrays.
    deltafit.model_selection.loo : exact leave-one-out (``method="alo"`` calls this function).

    Notes
    -----
    The model's stored solution is used as the optimum: a model fitted with a loose ``tol``
    (or stopped early by a callback) gives ALO values about that point.  A linear model with a
    ``feature_map`` is left out in the feature space of its fitted map (``feature_map_``,
    fitted on all rows); brute-force refits of a clone with an *unfitted* map would refit the
    map without the sample, a slightly different leave-one-out.

    What is read: the ledger's active slots (``sample_ids_`` order), labels and stored rows;
    β (linear) or the kernel matrix and expansion coefficients over the slots (kernel); for a
    linear hinge model the dual variables ``_state.dual`` (g_V = −y_v α_v / C).
    """
    if feature_map is not None and n_components is not None:
        raise ValueError("give feature_map or n_components, not both")
    if n_classes(model):
        # one-vs-rest: ALO of each class's binary problem, over one fitted feature map
        whole = model.problem_
        if not whole.kernel and not whole.keeps_rows:
            _check_alo_model(whole.for_class(0))
        if whole.kernel and (feature_map is not None or n_components is not None):
            feature_map = _fitted_map(whole, feature_map, n_components, random_state)
            n_components = None
        return np.column_stack(
            [
                _alo_of(
                    whole.for_class(k),
                    feature_map,
                    n_components,
                    random_state,
                    margin_tol,
                    rank_tol,
                )
                for k in range(whole.n_classes)
            ]
        )
    return _alo_of(
        _check_alo_model(model), feature_map, n_components, random_state, margin_tol, rank_tol
    )


def _fitted_map(prob, feature_map, n_components, random_state):
    """The approximate feature map of a kernel model's leverages, fitted on its rows."""
    if n_components is not None:
        if (
            isinstance(n_components, bool)
            or not isinstance(n_components, numbers.Integral)
            or n_components < 1
        ):
            raise ValueError(f"n_components must be an integer >= 1, got {n_components!r}")
        feature_map = _nystroem_for(prob, n_components, random_state)
    if not (hasattr(feature_map, "fit") and hasattr(feature_map, "transform")):
        raise ValueError(
            f"feature_map must be a scikit-learn transformer, got {type(feature_map).__name__}"
        )
    try:
        check_is_fitted(feature_map)
    except NotFittedError:
        feature_map = clone(feature_map).fit(prob.rows[prob.live])
    return feature_map


def _alo_of(prob, feature_map, n_components, random_state, margin_tol, rank_tol):
    """:func:`alo_decisions` of one binary (or regression) problem view."""
    slots = prob.live
    y = prob.targets[slots]
    C = prob.C
    loss_obj = prob.loss
    if prob.weighted:
        return _alo_weighted(prob, slots, y, feature_map, n_components, random_state)
    if not prob.kernel:
        if feature_map is not None or n_components is not None:
            raise ValueError(
                "feature_map / n_components apply to kernel models; a linear model's features "
                "are its own (set its feature_map when fitting)"
            )
        dual_coef = _model_dual_coef(prob, slots) if loss_obj.name == "hinge" else None
        return alo_primal(
            prob.rows[slots],
            y,
            loss_obj,
            C,
            np.array(prob.coef),
            dual_coef=dual_coef,
            margin_tol=margin_tol,
            rank_tol=rank_tol,
        )
    K = prob.gram(slots)
    alpha = prob.alpha[slots]
    if feature_map is None and n_components is None:
        return alo_kernel(K, y, loss_obj, C, alpha, margin_tol=margin_tol, rank_tol=rank_tol)
    feature_map = _fitted_map(prob, feature_map, n_components, random_state)
    X = prob.rows[slots]
    Phi = np.asarray(feature_map.transform(X), dtype=np.float64)
    s = prob.intercept_scaling
    if s:
        Phi = np.column_stack([Phi, np.full(Phi.shape[0], s)])
    return alo_feature_map(
        Phi, y, loss_obj, C, K @ alpha, dual_coef=alpha, margin_tol=margin_tol, rank_tol=rank_tol
    )


def _alo_weighted(prob, slots, y, feature_map, n_components, random_state):
    """ALO of a model fitted with sample weights (smooth losses only).

    The Newton-step formula (N) has one per-sample coefficient ``C`` in front of ``ℓ'_t`` and
    ``ℓ''_t``; with weights it is ``C w_t`` (the weighted objective is the unweighted one with
    a per-sample C), so ``z_t + C w_t ℓ'_t h_t / (1 − C w_t ℓ''_t h_t)`` with the leverages of
    ``I + Φᵀ diag(C w ℓ'') Φ``; exact leave-one-out for the squared loss.  The hinge formula of
    He et al. rests on the dual box ``[0, C]`` shared by every sample (its singular-set
    gradients ``g_V = −α_V / C``); it is not extended to per-sample boxes here.
    """
    loss_obj = prob.loss
    if loss_obj.name == "hinge":
        raise ValueError(
            "ALO of a hinge model with sample weights is not available: He et al.'s formula "
            "assumes one dual box [0, C] for every sample; use loo(..., method='bounds') "
            "(exact) or refit without sample_weight"
        )
    _, obj = _loss_name(loss_obj)
    cw = prob.C * prob.weights[slots]
    if not prob.kernel:
        if feature_map is not None or n_components is not None:
            raise ValueError(
                "feature_map / n_components apply to kernel models; a linear model's features "
                "are its own (set its feature_map when fitting)"
            )
        Phi = np.asarray(prob.rows[slots])
        z = Phi @ np.asarray(prob.coef)
        return _alo_smooth(z, y, obj, cw, lambda d: _smooth_leverage_features(Phi, d))
    K = prob.gram(slots)
    z = K @ prob.alpha[slots]
    if feature_map is None and n_components is None:
        return _alo_smooth(z, y, obj, cw, lambda d: _smooth_leverage_kernel(K, d))
    feature_map = _fitted_map(prob, feature_map, n_components, random_state)
    Phi = np.asarray(feature_map.transform(prob.rows[slots]), dtype=np.float64)
    s = prob.intercept_scaling
    if s:
        Phi = np.column_stack([Phi, np.full(Phi.shape[0], s)])
    return _alo_smooth(z, y, obj, cw, lambda d: _smooth_leverage_features(Phi, d))
