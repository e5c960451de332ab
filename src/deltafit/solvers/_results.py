"""What the solvers return.

* :class:`SolverResult`: the result of a Newton solve (:func:`~deltafit.solvers.newton_primal`,
  :func:`~deltafit.solvers.newton_kernel`) and of the chord solves, with the ``grad_norm`` that
  certifies ``‖β − β*‖ ≤ grad_norm`` (J is 1-strongly convex: Okumura et al., "Quick
  sensitivity analysis for incremental data modification", KDD 2015, Theorem 6).
* :class:`NewtonCurvature`: the Hessian of the last Newton step (what a warm re-solve reuses).
* :class:`HingeResult`: the result of the hinge dual QP (:func:`~deltafit.solvers.hinge_primal`,
  :func:`~deltafit.solvers.hinge_kernel`), its ``grad_norm`` the radius the duality gap
  certifies.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

__all__ = ["SolverResult", "NewtonCurvature", "HingeResult"]


@dataclass
class SolverResult:
    """What a solver returns.

    Attributes
    ----------
    coef : ndarray
        β (primal) or α (kernel expansion coefficients).
    grad_norm : float
        ‖∇J‖₂ in model space at ``coef``; certifies ‖coef − optimum‖ ≤ grad_norm.
    n_iter : int
        Newton iterations performed.
    converged : bool
        Whether ``grad_norm ≤ tol · grad_norm_at_zero`` was reached.
    stopped_by_callback : bool
        Whether the callback asked to stop.
    objective : float
        J at ``coef``.

    Examples
    --------
    >>> import numpy as np
    >>> from deltafit.losses import get_loss
    >>> from deltafit.solvers import newton_primal
    >>> X = np.array([[1.0, 0.0], [0.0, 1.0], [1.0, 1.0]])
    >>> r = newton_primal(X, np.array([1.0, -1.0, 1.0]), get_loss("logistic"), 1.0)
    >>> r.converged, bool(r.grad_norm < 1e-8)
    (True, True)
    """

    # a state's checkpoint shares it: no update changes a result in place
    _checkpoint_shares = True

    coef: np.ndarray
    grad_norm: float
    n_iter: int
    converged: bool
    stopped_by_callback: bool
    objective: float


@dataclass
class NewtonCurvature:
    """The Hessian of the last Newton step of :func:`newton_primal` (``keep_hessian=True``).

    Attributes
    ----------
    hessian : ndarray of shape (p, p)
        ``I + Xᵀ diag(d) X``, the (generalised) Hessian of J at the point of the last Newton
        step (not at the returned β, one step further: close to it once Newton converges);
        over dense rows, when chord steps followed the last Newton step, it is the Hessian at
        the returned β instead.
    d : ndarray of shape (n,)
        The curvature weights ``C w_i ℓ''(y_i, x_iᵀβ)`` of that Hessian, one per input row
        (0 for rows of weight 0).
    factor : ndarray of shape (p, p) or None
        The lower Cholesky factor of ``hessian`` the step used (zero above the diagonal;
        dense rows), so that a state need not factorise it again; None when not kept.

    Examples
    --------
    >>> import numpy as np
    >>> from deltafit.losses import get_loss
    >>> from deltafit.solvers import newton_primal
    >>> rng = np.random.default_rng(0)
    >>> X = rng.normal(size=(40, 3))
    >>> y = np.where(X[:, 0] + 0.5 * rng.normal(size=40) > 0, 1.0, -1.0)
    >>> res, curv = newton_primal(X, y, get_loss("logistic"), 1.0, keep_hessian=True)
    >>> curv.hessian.shape, curv.d.shape
    ((3, 3), (40,))
    >>> bool(np.allclose(curv.hessian, np.eye(3) + X.T @ (curv.d[:, None] * X)))
    True
    """

    # a state's checkpoint shares it: no update changes a result in place
    _checkpoint_shares = True

    hessian: np.ndarray
    d: np.ndarray
    factor: np.ndarray | None = None


@dataclass
class HingeResult(SolverResult):
    """What :func:`hinge_primal` and :func:`hinge_kernel` return.

    The fields of :class:`SolverResult` mean, for the hinge:

    * ``coef``: β (:func:`hinge_primal`) or the kernel expansion coefficients ``y_i α_i`` of
      ``β = Σ_i y_i α_i Φ(x_i)`` (:func:`hinge_kernel`; scikit-learn's ``SVC.dual_coef_``
      convention, and the ``α`` that :func:`newton_kernel` returns for the smooth losses).
    * ``grad_norm``: a certified radius, ``‖coef − β*‖ ≤ grad_norm`` (RKHS norm in kernel
      form), from the duality gap: J is 1-strongly convex, so
      ``½‖β − β*‖² ≤ J(β) − J(β*) ≤ J(β) − D(α) = gap``; the radius is
      ``sqrt(2 (gap + δ))`` with δ a worst-case bound on the rounding of the gap,
      ``δ = 2 γ Σ_i C_i s_i`` (``s_i ≥ Σ_j |q_ij| α_j`` the size of the terms summed into
      ``(Qα)_i``, γ the relative rounding of such a sum: ``m ε / (1 − m ε)`` with m = n + 2 in
      kernel form, n + p + 4 in primal form), plus, in the primal form, a bound on the rounding
      of β.  With sample weights every ``C`` here is the per-sample ``C_i = C · w_i`` (the box,
      the gap, δ, the KKT conditions).  It is not a gradient norm (J has none at the optimum)
      and is much larger than the actual error of an exact solve (≈ 1e-4 against ≈ 1e-12 on
      569 samples), but it never claims more than is true.
    * ``n_iter``: iterations (coordinate-descent sweeps and proximal steps); ``converged``:
      ``kkt_violation ≤ tol``, or, once the face of the solution has been solved exactly, at
      most the rounding level of the KKT residuals (``16 ε max_i Σ_j |q_ij| α_j``) when ``tol``
      lies below it.
    * ``objective``: the primal objective J at ``coef``, ``Σ_i C_i max(0, 1 − y_i z_i) + ½‖β‖²``.

    Attributes
    ----------
    alpha : ndarray of shape (n,)
        The dual variables, ``0 ≤ α_i ≤ C_i`` (``C_i = C · w_i``, C without sample weights): 0
        for samples outside the margin, C_i for margin violators (``y_i z_i < 1``), in between
        for free support vectors (``y_i z_i = 1``); 0 for samples of weight 0.
    kkt_violation : float
        ``max_i |P(∇D)_i|``, the largest violation of the KKT conditions in margin units, with
        ``∇_i = y_i z_i − 1`` the gradient of the (minimised) dual ``½αᵀQα − Σα`` and P the
        projection onto the box's tangent cone: ``min(∇_i, 0)`` at ``α_i = 0``, ``max(∇_i, 0)``
        at ``α_i = C_i`` and ``∇_i`` in between.
    duality_gap : float
        ``J(β) − D(α) = Σ_i [C_i max(0, 1 − y_i z_i) − α_i (1 − y_i z_i)]``, a sum of
        non-negative complementarity terms (computed that way, without cancellation).
    dual_objective : float
        ``D(α) = Σ α_i − ½ Σ_ij α_i α_j y_i y_j k_ij``.
    n_polish : int
        Linear systems solved over a free set (active-set Newton steps and polishing).
    n_touched : int
        Coordinate visits: variables examined by the coordinate-descent sweeps, the
        active-set predictions of the proximal steps and the face systems (the full gradient
        checks not counted).  A warm start from a solution (``working_set``) visits the
        samples a data change moved and the violators it creates, a cold solve every sample
        several times; 0 for a result loaded from a model file.

    Examples
    --------
    >>> import numpy as np
    >>> from deltafit.solvers import hinge_primal
    >>> X = np.array([[2.0, 0.0], [-2.0, 0.0], [1.0, 1.0], [-1.0, -1.0]])
    >>> r = hinge_primal(X, np.array([1.0, -1.0, 1.0, -1.0]), 1.0)
    >>> bool(np.all((r.alpha >= 0) & (r.alpha <= 1.0)))           # the dual box [0, C]
    True
    """

    alpha: np.ndarray | None = None
    kkt_violation: float = float("nan")
    duality_gap: float = float("nan")
    dual_objective: float = float("nan")
    n_polish: int = 0
    n_touched: int = 0
