"""The data-change ball: the one formula behind every certificate of a retrained model.

Let β₁ (the stored solution) minimise, up to a solver tolerance,
``P₁(β) = C₁ Σ_{D₁} ℓ_i(β) + ½‖β‖²`` and β₂ minimise ``P₂(β) = C₂ Σ_{D₂} ℓ_i(β) + ½‖β‖²``
with ``D₂ = D₁ ∖ R ∪ A``.  ``P₂`` is 1-strongly convex, so for any β,
``⟨∇P₂(β), β − β₂⟩ ≥ ‖β − β₂‖²``: β₂ lies in the ball of center ``β − r`` and radius ``‖r‖``,
``r = ½ ∇P₂(β)`` (Okumura et al., "Quick sensitivity analysis for incremental data
modification and its application to leave-one-out CV in linear classification problems",
Theorem 6).  At β = β₁, with ``g = ∇P₁(β₁)`` and the gradients of the changed samples

    Δg = Σ_A ∇ℓ_i(β₁) − Σ_R ∇ℓ_i(β₁) = Σ_i c_i Φ(x_i),      c_i = ±ℓ'(y_i, z_i),

the gradient of the new problem is

    ∇P₂(β₁) = (1 − ρ) β₁ + ρ g + C₂ Δg,      ρ = C₂ / C₁,

so that ``r = c β₁ + (ρ/2) g + (C₂/2) Δg`` with ``c = ½(1 − ρ)``.  Two forms of one ball:

* the **exact-gradient form** keeps ``g`` (computed from the stored solution): the ball of
  Theorem 6 for the changed problem, used by cross-validation
  (:class:`deltafit.model_selection._problem.TrainingProblem`);
* the **Theorem 1 form** (Theorem 1 of Okumura et al. (2015); Sivan et al., "Incremental
  sensitivity analysis for kernelized models", Theorem 1 and eq. 5) uses ``g = 0`` at the optimum
  and widens the radius by ``ρ ‖g‖ ≤ ρ ε``, ε the model's certified solver residual
  (:func:`certified_radius`), so the ball holds for the stored β₁ as it is.  Its cost is that of
  the changed samples only.

The functions below take ``grad`` / ``phi_grad`` / ``grad_sq`` for the first form and leave
them out for the second; ``C₁ ≠ C₂`` (Theorem 1 of Sivan et al. (2020)) is one more parameter, not
another copy.  Each computes the same ``r`` from what the caller has: a vector (or coefficients
over shared points, :func:`half_gradient`), its scores (:func:`center_scores`) or its inner
products (:func:`sq_radius`); :func:`loo_balls` is the case ``R = {t}`` for every t at once
(Corollary 5 of Okumura et al. (2015); Sivan et al. §4.2).
"""

from __future__ import annotations

import numbers
from collections.abc import Callable
from typing import overload

import numpy as np

__all__ = [
    "center_scores",
    "certified_radius",
    "half_gradient",
    "loo_balls",
    "resolve_c_new",
    "c_at",
    "sq_radius",
]


def _c(C1, C2):
    """``(ρ, c) = (C₂/C₁, ½(1 − ρ))``."""
    rho = C2 / C1
    return rho, 0.5 * (1.0 - rho)


def half_gradient(
    beta: np.ndarray, dg: np.ndarray, *, C1: float, C2: float, grad: np.ndarray | None = None
) -> np.ndarray:
    """``r = ½ ∇P₂(β₁) = c β₁ + (ρ/2) g + (C₂/2) Δg``: the ball is ``(β₁ − r, ‖r‖)``.

    Parameters
    ----------
    beta : ndarray
        β₁, as a vector over explicit features or as coefficients over a set of points.
    dg : ndarray, shaped like ``beta``
        Δg in the same representation.
    C1, C2 : float
        C of the fitted and of the changed problem.
    grad : ndarray, optional
        The exact ``g = ∇P₁(β₁)`` (exact-gradient form); omitted in the Theorem 1 form.

    Returns
    -------
    r : ndarray, shaped like ``beta``

    Examples
    --------
    The ball of the model retrained without samples 0, 1, 2 (Δg = −Σ_R ℓ'_i Φ_i) holds the
    retrained coefficients (its radius widened by the stored model's certified residual):

    >>> import copy
    >>> from deltafit.sensitivity.regions import half_gradient
    >>> import numpy as np
    >>> from sklearn.datasets import load_breast_cancer
    >>> from sklearn.preprocessing import StandardScaler
    >>> import deltafit
    >>> from deltafit.losses import Logistic
    >>> X, y = load_breast_cancer(return_X_y=True)
    >>> X = StandardScaler().fit_transform(X)
    >>> model = deltafit.LinearClassifier(loss="logistic", C=0.1).fit(X, y)
    >>> Phi = np.hstack([X, np.ones((len(X), 1))])         # the constant feature last
    >>> beta = np.append(model.coef_, model.intercept_)
    >>> t = np.where(y == 1, 1.0, -1.0)                    # targets in {-1, +1}
    >>> z = Phi @ beta                                     # the training scores
    >>> d1 = Logistic().d1(t, z)
    >>> dg = -Phi[:3].T @ d1[:3]
    >>> r = half_gradient(beta, dg, C1=0.1, C2=0.1)
    >>> refit = copy.deepcopy(model)
    >>> _ = refit.remove([0, 1, 2])
    >>> beta2 = np.append(refit.coef_, refit.intercept_)
    >>> bool(np.linalg.norm(beta2 - (beta - r)) <= np.linalg.norm(r) + model.grad_norm_)
    True
    """
    rho, c = _c(C1, C2)
    r = 0.5 * C2 * dg if c == 0.0 else c * beta + 0.5 * C2 * dg
    if grad is not None:
        r = r + 0.5 * rho * grad
    return r


def center_scores(
    z: np.ndarray, phi_dg: np.ndarray, *, C1: float, C2: float, phi_grad: np.ndarray | None = None
) -> np.ndarray:
    """Scores ``⟨Φ(x), β₁ − r⟩ = (1 − c) z − (C₂/2) ⟨Φ(x), Δg⟩ − (ρ/2) ⟨Φ(x), g⟩`` of the
    ball's center (Sivan et al. eq. 10; Okumura et al. eq. 10).

    Parameters
    ----------
    z : ndarray
        ``⟨Φ(x), β₁⟩``.
    phi_dg : ndarray
        ``⟨Φ(x), Δg⟩``.
    C1, C2 : float
    phi_grad : ndarray, optional
        ``⟨Φ(x), g⟩`` (exact-gradient form).

    Returns
    -------
    ndarray, shaped like ``z``

    Examples
    --------
    The scores of the center ``β₁ − r`` from the scores of β₁ and Δg alone:

    >>> from deltafit.sensitivity.regions import center_scores, half_gradient
    >>> import numpy as np
    >>> from sklearn.datasets import load_breast_cancer
    >>> from sklearn.preprocessing import StandardScaler
    >>> import deltafit
    >>> from deltafit.losses import Logistic
    >>> X, y = load_breast_cancer(return_X_y=True)
    >>> X = StandardScaler().fit_transform(X)
    >>> model = deltafit.LinearClassifier(loss="logistic", C=0.1).fit(X, y)
    >>> Phi = np.hstack([X, np.ones((len(X), 1))])         # the constant feature last
    >>> beta = np.append(model.coef_, model.intercept_)
    >>> t = np.where(y == 1, 1.0, -1.0)                    # targets in {-1, +1}
    >>> z = Phi @ beta                                     # the training scores
    >>> d1 = Logistic().d1(t, z)
    >>> dg = -Phi[:3].T @ d1[:3]                           # samples 0, 1, 2 removed
    >>> s = center_scores(z, Phi @ dg, C1=0.1, C2=0.1)
    >>> r = half_gradient(beta, dg, C1=0.1, C2=0.1)
    >>> bool(np.allclose(s, Phi @ (beta - r)))
    True
    """
    rho, c = _c(C1, C2)
    s = (1.0 - c) * z - 0.5 * C2 * phi_dg
    if phi_grad is not None:
        s = s - 0.5 * rho * phi_grad
    return s


def sq_radius(
    dg_sq: float | np.ndarray,
    beta_dg: float | np.ndarray = 0.0,
    *,
    C1: float,
    C2: float,
    beta_sq: float | None = None,
    grad_sq: float | np.ndarray | None = None,
    grad_dg: float | np.ndarray | None = None,
    beta_grad: float | np.ndarray | None = None,
) -> float | np.ndarray:
    """``‖r‖²`` from inner products (the form for kernel expansions and many balls at once).

        ‖r‖² = c² ‖β₁‖² + c C₂ ⟨β₁, Δg⟩ + (C₂²/4) ‖Δg‖²
               + c ρ ⟨β₁, g⟩ + (ρ²/4) ‖g‖² + (ρ C₂/2) ⟨g, Δg⟩

    (Sivan et al. eq. 9 for ``C₁ = C₂`` and ``g = 0``).  Terms in ``c`` are skipped when
    ``C₁ = C₂``, terms in ``g`` in the Theorem 1 form; their inputs are then not needed.

    Parameters
    ----------
    dg_sq : float or ndarray
        ``‖Δg‖²``.
    beta_dg : float or ndarray
        ``⟨β₁, Δg⟩ = Σ c_i z_i`` (used when ``C₁ ≠ C₂``).
    C1, C2 : float
    beta_sq : float, optional
        ``‖β₁‖²`` (used when ``C₁ ≠ C₂``).
    grad_sq, grad_dg, beta_grad : float or ndarray, optional
        ``‖g‖²``, ``⟨g, Δg⟩`` and ``⟨β₁, g⟩`` (exact-gradient form; ``beta_grad`` only when
        ``C₁ ≠ C₂``).

    Returns
    -------
    float or ndarray
        Not clipped at 0: the caller takes ``sqrt(max(·, 0))``.

    Examples
    --------
    ``‖r‖²`` from inner products equals the squared norm of :func:`half_gradient`'s vector,
    here with C halved by the change (so the terms in β₁ count):

    >>> from deltafit.sensitivity.regions import half_gradient, sq_radius
    >>> import numpy as np
    >>> from sklearn.datasets import load_breast_cancer
    >>> from sklearn.preprocessing import StandardScaler
    >>> import deltafit
    >>> from deltafit.losses import Logistic
    >>> X, y = load_breast_cancer(return_X_y=True)
    >>> X = StandardScaler().fit_transform(X)
    >>> model = deltafit.LinearClassifier(loss="logistic", C=0.1).fit(X, y)
    >>> Phi = np.hstack([X, np.ones((len(X), 1))])         # the constant feature last
    >>> beta = np.append(model.coef_, model.intercept_)
    >>> t = np.where(y == 1, 1.0, -1.0)                    # targets in {-1, +1}
    >>> z = Phi @ beta                                     # the training scores
    >>> d1 = Logistic().d1(t, z)
    >>> dg = -Phi[:3].T @ d1[:3]                           # samples 0, 1, 2 removed
    >>> r2 = sq_radius(dg @ dg, beta @ dg, C1=0.1, C2=0.05, beta_sq=beta @ beta)
    >>> r = half_gradient(beta, dg, C1=0.1, C2=0.05)
    >>> bool(np.isclose(r2, r @ r))
    True
    """
    rho, c = _c(C1, C2)
    r2 = 0.25 * C2 * C2 * dg_sq
    if c != 0.0:
        r2 = r2 + (c * c * beta_sq + c * C2 * beta_dg)
    if grad_sq is not None:
        r2 = r2 + (0.25 * rho * rho * grad_sq + 0.5 * rho * C2 * grad_dg)
        if c != 0.0:
            r2 = r2 + c * rho * beta_grad
    return r2


@overload
def certified_radius(r_norm: float, *, C1: float, C2: float, residual: float) -> float: ...


@overload
def certified_radius(
    r_norm: np.ndarray, *, C1: float, C2: float, residual: float
) -> np.ndarray: ...


def certified_radius(
    r_norm: float | np.ndarray, *, C1: float, C2: float, residual: float
) -> float | np.ndarray:
    """Radius of the Theorem 1 ball for the stored β₁: ``‖r‖ + ρ ε``.

    ∇P₂(β₁) carries the term ``ρ ∇P₁(β₁)`` that the Theorem 1 form drops; its norm is at most
    ``ρ ε``, ε the model's certified solver residual (``grad_norm_``; 0 for the closed form).
    """
    return r_norm + (C2 / C1) * residual


def loo_balls(
    z: np.ndarray,
    d1: np.ndarray,
    sq: np.ndarray,
    *,
    C1: float,
    C2: float,
    beta_sq: float | None = None,
    phi_grad: np.ndarray | None = None,
    grad_sq: float | None = None,
    beta_grad: float | None = None,
) -> tuple[np.ndarray, np.ndarray]:
    """The balls of the models trained without one sample t, for every t at once.

    Removing t gives ``Δg = −ℓ'_t Φ_t``, so every inner product of the ball is one of
    ``z_t``, ``ℓ'_t``, ``‖Φ_t‖²`` and ``⟨Φ_t, g⟩``: with γ_t = −ℓ'_t::

        center score at Φ_t   (1 − c) z_t − (C₂/2) γ_t ‖Φ_t‖² − (ρ/2) ⟨Φ_t, g⟩
        ‖r_t‖²                :func:`sq_radius` with ‖Δg‖² = γ_t² ‖Φ_t‖², ⟨β₁, Δg⟩ = γ_t z_t,
                              ⟨g, Δg⟩ = γ_t ⟨Φ_t, g⟩

    (Corollary 5 of Okumura et al. (2015); Sivan et al. §4.2).  O(n) once ``⟨Φ_t, g⟩`` is known.

    Parameters
    ----------
    z, d1, sq : ndarray of shape (n,)
        ``z_t = ⟨Φ_t, β₁⟩``, ``ℓ'(y_t, z_t)`` and ``‖Φ_t‖²``.
    C1, C2 : float
        C of the fitted problem and of the problem without t.
    beta_sq : float, optional
        ``‖β₁‖²`` (used when ``C₁ ≠ C₂``).
    phi_grad : ndarray of shape (n,), optional
        ``⟨Φ_t, g⟩`` (exact-gradient form), with ``grad_sq = ‖g‖²`` and, when ``C₁ ≠ C₂``,
        ``beta_grad = ⟨β₁, g⟩``.

    Returns
    -------
    center : ndarray of shape (n,)
        ``⟨Φ_t, β₁ − r_t⟩``.
    r_norm : ndarray of shape (n,)
        ``‖r_t‖``; the score bounds are ``center ∓ ‖Φ_t‖ ‖r_t‖`` (plus any allowance).

    Examples
    --------
    Every leave-one-out ball at once; with the radius widened by the certified residual these
    are the bounds of :func:`deltafit.sensitivity.loo_bounds` with ``method="sphere"``, and they
    hold the score of a model refitted without sample 0:

    >>> from deltafit.sensitivity import loo_bounds
    >>> from deltafit.sensitivity.regions import loo_balls
    >>> import numpy as np
    >>> from sklearn.datasets import load_breast_cancer
    >>> from sklearn.preprocessing import StandardScaler
    >>> import deltafit
    >>> from deltafit.losses import Logistic
    >>> X, y = load_breast_cancer(return_X_y=True)
    >>> X = StandardScaler().fit_transform(X)
    >>> model = deltafit.LinearClassifier(loss="logistic", C=0.1).fit(X, y)
    >>> Phi = np.hstack([X, np.ones((len(X), 1))])         # the constant feature last
    >>> beta = np.append(model.coef_, model.intercept_)
    >>> t = np.where(y == 1, 1.0, -1.0)                    # targets in {-1, +1}
    >>> z = Phi @ beta                                     # the training scores
    >>> d1 = Logistic().d1(t, z)
    >>> sq = np.einsum("ij,ij->i", Phi, Phi)               # ‖Φ_t‖²
    >>> center, r_norm = loo_balls(z, d1, sq, C1=0.1, C2=0.1)
    >>> lo = center - np.sqrt(sq) * (r_norm + model.grad_norm_)
    >>> hi = center + np.sqrt(sq) * (r_norm + model.grad_norm_)
    >>> lo_s, hi_s = loo_bounds(model, method="sphere")
    >>> bool(np.allclose(lo, lo_s) and np.allclose(hi, hi_s))
    True
    >>> d0 = (deltafit.LinearClassifier(loss="logistic", C=0.1)
    ...       .fit(X[1:], y[1:]).decision_function(X[:1])[0])
    >>> bool(lo[0] <= d0 <= hi[0])
    True
    """
    gamma = -d1
    center = center_scores(z, gamma * sq, C1=C1, C2=C2, phi_grad=phi_grad)
    r2 = sq_radius(
        gamma * gamma * sq,
        gamma * z,
        C1=C1,
        C2=C2,
        beta_sq=beta_sq,
        grad_sq=grad_sq,
        grad_dg=None if phi_grad is None else gamma * phi_grad,
        beta_grad=beta_grad,
    )
    return center, np.sqrt(np.maximum(r2, 0.0))


# ---------------------------------------------------------------------------------------------
# C₂ of the new problem
# ---------------------------------------------------------------------------------------------
def resolve_c_new(
    C_new: float | str | Callable[[int], float] | None, C_old: float, n_old: int
) -> Callable[[int], float]:
    """A function ``n_new -> C₂`` for ``C_new`` (None: C₁; ``"mean"``: ``C₁ n_old / n_new``,
    the mean-loss objective ``C = 1/(λ n)`` of Okumura et al.; a number; a callable)."""
    if C_new is None:
        return lambda n: C_old
    if isinstance(C_new, str):
        if C_new != "mean":
            raise ValueError(
                f"C_new must be a positive number, 'mean' or a callable n_new -> C, got {C_new!r}"
            )
        return lambda n: C_old * n_old / n
    if callable(C_new):
        return C_new
    if (
        isinstance(C_new, bool)
        or not isinstance(C_new, numbers.Real)
        or not np.isfinite(C_new)
        or C_new <= 0
    ):
        raise ValueError(f"C_new must be a positive finite number, got {C_new!r}")
    value = float(C_new)
    return lambda n: value


def c_at(c_new: Callable[[int], float], n_new: int) -> float:
    """``C₂`` for ``n_new`` samples, validated (a callable may return anything)."""
    if n_new < 1:
        raise ValueError("the change would remove every sample; a model needs at least one")
    C2 = c_new(n_new)
    if type(C2) is float and 0.0 < C2 < np.inf:
        return C2
    if (
        isinstance(C2, (bool, np.bool_))
        or not isinstance(C2, numbers.Real)
        or not np.isfinite(C2)
        or C2 <= 0
    ):
        raise ValueError(f"C_new({n_new}) must be a positive finite number, got {C2!r}")
    return float(C2)
