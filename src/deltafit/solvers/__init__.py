"""Exact solvers for the canonical problem of ARCHITECTURE.md, "The problem".

    minimise_β  J(β) = C · Σ_i w_i ℓ(y_i, ⟨Φ(x_i), β⟩) + ½‖β‖²

with optional sample weights ``w_i ≥ 0`` (``sample_weight``; all 1 by default), i.e. a
per-sample ``C_i = C · w_i``, scikit-learn's convention for ``LogisticRegression`` and
``LinearSVC``.  A sample of weight 0 is absent: every solver drops it before solving.

* squared loss: closed form, ``(ΦᵀΦ + ρI) β = Φᵀy`` with ``ρ = 1/(2C)`` (primal) or
  ``(K + ρI) α = y`` (dual); the incremental machinery lives in :mod:`deltafit.models`.
* smooth losses (logistic, squared hinge): damped Newton with an Armijo line search, in the
  primal (:func:`newton_primal`) or in the kernel expansion ``β = Σ α_i Φ(x_i)``
  (:func:`newton_kernel`).  Both warm-start from any point and stop on the norm of the
  gradient of J in model space, ``‖∇J(β)‖₂ ≤ tol · ‖∇J(0)‖₂``.
* hinge loss (not smooth): the dual box QP, solved exactly by dual coordinate descent and
  active-set polishing (:func:`hinge_primal` over explicit features, :func:`hinge_kernel`
  over a kernel matrix); they stop on the KKT violation.

Because J is 1-strongly convex (for any weights w ≥ 0), the returned ``grad_norm`` certifies
``‖β − β*‖₂ ≤ grad_norm`` (Okumura et al., "Quick sensitivity analysis for incremental data
modification", KDD 2015, Theorem 6), which is what a caller needs to turn the solver's
tolerance into a bound.  For the hinge solvers ``grad_norm`` is the radius
that the duality gap certifies (see :class:`HingeResult`), not a gradient norm.
"""

from __future__ import annotations

import os
import sys
import threading
import warnings
from contextlib import contextmanager
from dataclasses import dataclass

import numpy as np
import scipy.sparse as sp
from scipy import linalg
from sklearn.exceptions import ConvergenceWarning
from sklearn.utils.extmath import row_norms

__all__ = ["SolverResult", "HingeResult", "NewtonCurvature", "newton_primal", "newton_kernel",
           "hinge_primal", "hinge_kernel", "solve_spd", "check_curvature"]

# Below this decrease J cannot be resolved in floating point; a Newton step is then taken whole.
_FLOOR = 1e-12
#: Sparse X with more features than this: Newton solves its steps by conjugate gradients on
#: Hessian-vector products (``Xᵀ D X v`` through sparse products) instead of forming the dense
#: p × p Hessian.
HESSIAN_FREE_FEATURES = 500
#: The largest curvature ``C·w_i·ℓ''_max·‖Φ(x_i)‖²`` (kernel models: ``C·w_i·ℓ''_max·k(x_i, x_i)``)
#: one sample may bring to the Newton system of a smooth loss (logistic, squared hinge): 1/ε =
#: 2⁵² ≈ 4.5e15.  The curvature matrix is ``I + C Σ w_i ℓ''_i Φ(x_i)Φ(x_i)ᵀ``; a sample beyond
#: this bound makes its own term's rounding (ε times its curvature) exceed the unit
#: regularisation, so the computed matrix is not certifiably positive definite (Cholesky fails,
#: or a correction that removes the term cancels to noise), and the rounding of that sample's
#: score, ``ε·‖Φ(x)‖·‖β‖``, moves ∇J by ``ε·C w ℓ''‖Φ(x)‖²·‖β‖ > ‖β‖``: no solution can be
#: certified to any tolerance.  Such a sample is refused (ValueError) by fits and updates alike;
#: ``ℓ''_max`` is ¼ for the logistic loss and 2 for the squared hinge.
MAX_CURVATURE = 2.0 ** 52


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
        step (not at the returned β, one step further: close to it once Newton converges).
    d : ndarray of shape (n,)
        The curvature weights ``C w_i ℓ''(y_i, x_iᵀβ)`` of that Hessian, one per input row
        (0 for rows of weight 0).

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

    hessian: np.ndarray
    d: np.ndarray


def solve_spd(A, b):
    """Solve ``A x = b`` for a symmetric positive definite ``A`` by Cholesky.

    Raises ValueError (not LinAlgError) when ``A`` is not numerically positive definite.

    Examples
    --------
    >>> import numpy as np
    >>> from deltafit.solvers import solve_spd
    >>> solve_spd(np.array([[2.0, 0.0], [0.0, 4.0]]), np.array([2.0, 2.0]))
    array([1. , 0.5])
    """
    try:
        c = linalg.cho_factor(A, lower=True, check_finite=False)
    except linalg.LinAlgError as exc:
        raise ValueError(f"ill-conditioned system: Cholesky factorization failed ({exc})") from exc
    return linalg.cho_solve(c, b, check_finite=False)


def _max_d2(loss):
    """``max_z ℓ''(y, z)`` of a smooth classification loss: its value at ``z = 0`` (logistic:
    ``σ(1 − σ) ≤ ¼``, largest at 0; squared hinge: 2 on the whole margin side)."""
    return float(loss.d2(np.ones(1), np.zeros(1))[0])


def check_curvature(sq, cw, loss, what="X", norm="‖Φ(x)‖²"):
    """Refuse samples whose Newton curvature is beyond double precision (:data:`MAX_CURVATURE`).

    Parameters
    ----------
    sq : array-like of float
        Per sample, ``‖Φ(x)‖²`` (linear models) or ``k(x, x)`` (kernel models).
    cw : float or array-like of float
        ``C·w`` per sample (0: the sample is not in the problem).
    loss : deltafit.losses.Loss
        A smooth loss (logistic, squared hinge).
    what : str
        What the samples are, for the message.
    norm : str
        How ``sq`` is written in the message.

    Raises
    ------
    ValueError
        Naming the largest curvature, the sample's norm and ``C·w``, and what to do.

    Examples
    --------
    >>> import numpy as np
    >>> from deltafit.losses import get_loss
    >>> from deltafit.solvers import check_curvature
    >>> check_curvature(np.array([1.0, 4.0]), 1.0, get_loss("logistic"))   # fine: silent
    >>> try:
    ...     check_curvature(np.array([1e24]), 1.0, get_loss("logistic"))
    ... except ValueError as exc:
    ...     print(str(exc).split(" (")[0])
    X: a sample's Newton curvature C·w·ℓ''·‖Φ(x)‖² is 2.5e+23
    """
    sq = np.asarray(sq, dtype=np.float64).ravel()
    if sq.size == 0:
        return
    cw = np.broadcast_to(np.asarray(cw, dtype=np.float64), sq.shape)
    with np.errstate(over="ignore", invalid="ignore"):  # an overflow is refused below
        kappa = cw * sq * _max_d2(loss)
    i = int(np.argmax(np.where(np.isnan(kappa), np.inf, kappa)))
    if kappa[i] <= MAX_CURVATURE:
        return
    cwi = float(cw[i])
    raise ValueError(
        f"{what}: a sample's Newton curvature C·w·ℓ''·{norm} is {kappa[i]:.3g} ({norm} = "
        f"{sq[i]:.3g}, C·w = {cwi:.3g}, ℓ'' up to {_max_d2(loss):g} for the {loss.name} loss), "
        f"above 1/ε = {MAX_CURVATURE:.3g}: the curvature matrix I + C·Σ w ℓ'' Φ(x)Φ(x)ᵀ loses "
        "positive definiteness in double precision (its unit regularisation falls below the "
        "rounding of that sample's term) and no solution can be certified; scale the features "
        "(e.g. StandardScaler), or lower C or the sample's weight"
    )


def curvature_failure(exc, kappa=None, what="the Newton curvature matrix"):
    """The ValueError (in deltafit's words) for a Cholesky factorisation of a curvature matrix
    ``I + C·Σ w ℓ'' φ φᵀ`` that LAPACK found not positive definite (``exc``); ``kappa``: the
    largest per-sample curvature ``C·w·ℓ''·‖φ‖²`` in it and their sum, when known."""
    worst = ""
    if kappa is not None:
        top, total = kappa if isinstance(kappa, tuple) else (kappa, None)
        worst = f" (its samples' curvatures C·w·ℓ''·‖Φ(x)‖²: largest {float(top):.3g}"
        if total is not None:
            worst += f", sum {float(total):.3g}"
        worst += f"; about 1/ε = {MAX_CURVATURE:.3g} is what float64 resolves)"
    return ValueError(
        f"ill-conditioned system: {what} lost positive definiteness in double precision"
        f"{worst}: the features' scale or C make it too ill-conditioned to factorise (LAPACK: "
        f"{exc}); scale the features (e.g. StandardScaler) or lower C"
    )


def _row_curvature(X, D):
    """``(max_i D_i ‖x_i‖², Σ_i D_i ‖x_i‖²)`` (dense or sparse rows)."""
    if X.shape[0] == 0:
        return 0.0, 0.0
    kappa = np.asarray(D) * _squared_norms(X)
    return float(np.max(kappa)), float(np.sum(kappa))


def _squared_norms(X):
    """``‖x_i‖²`` of every row (dense or sparse; scikit-learn's ``row_norms``)."""
    if not sp.issparse(X):
        X = np.asarray(X, dtype=np.float64)
    return row_norms(X, squared=True)


_LABEL = threading.local()


@contextmanager
def solve_label(label):
    """Prefix the ConvergenceWarnings of the solves run in this thread by ``label`` (e.g. a
    one-vs-rest class)."""
    old = getattr(_LABEL, "value", "")
    _LABEL.value = f"{old}{label}: "
    try:
        yield
    finally:
        _LABEL.value = old


_PACKAGE = os.path.dirname(os.path.abspath(__file__)) + os.sep


def _outside_stacklevel():
    """The ``stacklevel`` (for the caller of this function) of the first frame outside
    deltafit: the warning points at the user's call (``fit``, ``add``, ...), not at a state."""
    f, level = sys._getframe(1), 1
    while f is not None and f.f_code.co_filename.startswith(_PACKAGE):
        f, level = f.f_back, level + 1
    return level


def warn_not_converged(what, grad_norm, threshold, tol, it, hint=""):
    """The ConvergenceWarning of a solve that stopped with ``grad_norm > threshold``."""
    label = getattr(_LABEL, "value", "")
    warnings.warn(
        f"{label}{what} did not converge: it stopped after {it} iterations with grad_norm_ = "
        f"{grad_norm:.3g} > tol·‖∇J(0)‖ = {threshold:.3g} (tol={tol:.3g}); the solution is "
        f"certified only to ‖β − β*‖ ≤ grad_norm_, not equal to a converged refit{hint}; "
        "increase max_iter, or scale the features (e.g. StandardScaler)",
        ConvergenceWarning,
        stacklevel=_outside_stacklevel(),
    )


def warn_kkt_not_converged(what, it, kkt, threshold, radius, hint=""):
    """The ConvergenceWarning of a hinge solve that stopped with a KKT violation ``kkt >
    threshold``, naming ``grad_norm_`` (its certified radius ``radius``)."""
    label = getattr(_LABEL, "value", "")
    warnings.warn(
        f"{label}{what} did not converge: it stopped after {it} iterations with a KKT "
        f"violation {kkt:.3g} > {threshold:.3g} (tol, or the rounding floor) and grad_norm_ = "
        f"{radius:.3g} (the certified radius ‖β − β*‖ ≤ grad_norm_){hint}; increase max_iter",
        ConvergenceWarning,
        stacklevel=_outside_stacklevel(),
    )


def _check_callback(callback, it, coef, grad_norm, objective, grad):
    if callback is None:
        return False
    return bool(callback(it, coef, grad_norm, objective, grad))


def _check_smooth(loss, solver):
    if not getattr(loss, "smooth", True):
        raise ValueError(
            f"{solver} needs a smooth loss; loss={loss.name!r} is not differentiable "
            "(solve the hinge loss with hinge_primal / hinge_kernel)"
        )


def _check_sample_weight(sample_weight, n, C=1.0):
    """``None``, or the sample weights as a new float64 array of shape ``(n,)``.

    Raises ValueError, naming the problem, for a wrong shape, a NaN, an infinite or a negative
    weight, or weights whose product with ``C`` overflows.
    """
    if sample_weight is None:
        return None
    if np.iscomplexobj(sample_weight):
        raise ValueError("sample_weight must be real, got complex values")
    try:
        w = np.array(sample_weight, dtype=np.float64, copy=True)
    except (TypeError, ValueError) as exc:
        raise ValueError(f"sample_weight must be an array of numbers ({exc})") from exc
    if w.shape != (n,):
        raise ValueError(f"sample_weight must have shape ({n},) (one weight per sample), "
                         f"got shape {w.shape}")
    if np.isnan(w).any():
        raise ValueError("sample_weight contains NaN "
                         f"(at index {int(np.flatnonzero(np.isnan(w))[0])})")
    if np.isinf(w).any():
        raise ValueError("sample_weight contains an infinite value "
                         f"(at index {int(np.flatnonzero(np.isinf(w))[0])})")
    if (w < 0.0).any():
        i = int(np.flatnonzero(w < 0.0)[0])
        raise ValueError(f"sample_weight must be non-negative, got {w[i]!r} at index {i}")
    with np.errstate(over="ignore"):
        if not np.all(np.isfinite(float(C) * w)):
            raise ValueError(f"C * sample_weight overflows (C={C!r}, max weight {w.max()!r})")
    return w


def _kept(w):
    """Indices of the samples of positive weight, or None when there is nothing to drop."""
    if w is None:
        return None
    keep = np.flatnonzero(w > 0.0)
    return None if keep.size == w.size else keep


def _embed(v, keep, n):
    """The length-``n`` vector that holds ``v`` at ``keep`` and 0 elsewhere."""
    out = np.zeros(n)
    out[keep] = v
    return out


def _take_start(start, keep, n, what):
    """The warm start restricted to ``keep`` (after checking that it has ``n`` entries)."""
    if start is None:
        return None
    start = np.array(start, dtype=np.float64, copy=True).ravel()
    if start.shape != (n,):
        raise ValueError(f"{what} must hold {n} values, got {start.size}")
    return start[keep]


def _armijo(obj_at, f0, slope, max_halvings=60):
    """Backtracking line search: largest t in {1, ½, ¼, …} with f(t) ≤ f0 + 1e-4 t slope."""
    t = 1.0
    for _ in range(max_halvings):
        f = obj_at(t)
        if f <= f0 + 1e-4 * t * slope:
            return t, f
        t *= 0.5
    return 0.0, f0


def _damped_newton(coef, features, objective, gradient, newton_step, grad_norm0, *, tol,
                   max_iter, callback, what):
    """The damped Newton iteration of :func:`newton_primal` and :func:`newton_kernel`.

    Parameters
    ----------
    coef : ndarray
        The start point (β, or α of the kernel expansion); updated in place and returned.
    features : ndarray
        ``X`` or ``K``: the scores are ``z = features @ coef``.
    objective : callable
        ``objective(coef, z)``, the value of J.
    gradient : callable
        ``gradient(coef, z) -> (grad, dJ, grad_norm)``: ``grad`` is what the callback
        receives, ``dJ @ step`` the derivative of J along ``step``, ``grad_norm`` ‖∇J‖ in
        model space.
    newton_step : callable
        ``newton_step(z, grad, dJ)``, the Newton direction.
    grad_norm0 : float
        ‖∇J(0)‖: the solver stops once ``grad_norm <= tol * grad_norm0``.
    tol : float
    max_iter : int
    callback : callable or None
        As in :func:`newton_primal`.
    what : str
        The solver's name in the ConvergenceWarning.

    Returns
    -------
    SolverResult
    """
    threshold = tol * max(grad_norm0, np.finfo(float).tiny)
    z = features @ coef
    f = objective(coef, z)
    grad, dJ, gnorm = gradient(coef, z)
    it = 0
    stopped = _check_callback(callback, it, coef, gnorm, f, grad)
    failed = False
    while gnorm > threshold and not stopped and it < max_iter:
        it += 1
        step = newton_step(z, grad, dJ)
        z_step = features @ step
        slope = dJ @ step
        if -slope <= _FLOOR * (abs(f) + 1.0):
            t = 1.0  # the decrease is below the rounding of J: take the Newton step whole
        else:
            t, _ = _armijo(lambda t: objective(coef + t * step, z + t * z_step), f, slope)
            if t == 0.0:
                failed = True
                break  # a genuine failure to decrease
        coef += t * step
        z = features @ coef  # recomputed, not accumulated: keeps z and J consistent with coef
        f = objective(coef, z)
        grad, dJ, gnorm = gradient(coef, z)
        stopped = _check_callback(callback, it, coef, gnorm, f, grad)
    converged = gnorm <= threshold
    if not converged and not stopped:
        why = (" (the line search found no decrease of J: the rounding level of J and ∇J "
               "was reached)" if failed else f" (max_iter={max_iter} reached)")
        warn_not_converged(what, gnorm, threshold, tol, it, why)
    return SolverResult(coef, float(gnorm), it, bool(converged), bool(stopped), float(f))


def newton_primal(X, y, loss, C, *, sample_weight=None, coef0=None, tol=1e-10, max_iter=100,
                  callback=None, keep_hessian=False):
    """Damped Newton for ``C Σ w_i ℓ(y_i, x_iᵀβ) + ½‖β‖²`` over explicit features.

    Parameters
    ----------
    X : ndarray or scipy.sparse matrix of shape (n, p)
        Features, the intercept column included when the model has one.  A sparse X is used
        through sparse products (gradient ``Xᵀ(...)``, Hessian ``Xᵀ D X``); beyond
        :data:`HESSIAN_FREE_FEATURES` features its Newton steps are solved Hessian-free by
        conjugate gradients (the stopping rule on ‖∇J‖ is the same: the solution is as exact).
    y : ndarray of shape (n,)
        Targets (±1 for classification losses).
    loss : :class:`deltafit.losses.Loss`
    C : float
    sample_weight : array-like of shape (n,), optional
        Non-negative finite weights ``w_i``; they scale C per sample, ``C_i = C · w_i``, as
        ``sample_weight`` does in scikit-learn's ``LogisticRegression`` and ``LinearSVC``.
        ``None`` (the default) means all 1, and gives exactly the unweighted solve.  Samples of
        weight 0 are dropped before solving: they are absent from the problem.
    coef0 : ndarray of shape (p,), optional
        Warm start (zeros by default).
    tol : float
        Stop when ``‖∇J(β)‖ ≤ tol · ‖∇J(0)‖``.
    max_iter : int
    callback : callable, optional
        ``callback(iteration, coef, grad_norm, objective, grad)`` after every iteration (and
        once at the start), with ``grad`` the full gradient ∇J(coef); returning True stops the
        solver (``stopped_by_callback``).  ``coef`` and ``grad`` are the solver's own arrays:
        copy them to keep them.  :class:`deltafit.sensitivity.CertainSigns` is such a callback
        (stop once the signs of given scores are certified, Okumura et al. Theorem 6).
    keep_hessian : bool, default=False
        Also return the Hessian of the last Newton step (what a later warm re-solve reuses,
        :mod:`deltafit.solvers._chord`).

    Returns
    -------
    SolverResult
        With ``keep_hessian``, a pair ``(SolverResult, NewtonCurvature or None)``: None when no
        dense Hessian was formed (no Newton step taken, or Hessian-free CG steps).

    Raises
    ------
    ValueError
        When a sample's curvature ``C·w·ℓ''_max·‖x‖²`` exceeds :data:`MAX_CURVATURE` (see
        :func:`check_curvature`), or when a Newton matrix loses positive definiteness in
        float64 (said in those words, with the samples' curvatures and the remedy).

    Warns
    -----
    ConvergenceWarning
        When the solve stops short of ``tol`` (``max_iter`` reached, or no decrease left in
        float64): the message names ``grad_norm_`` (the certified ‖∇J‖ at the returned β) and
        ``tol``.  A callback's stop is not a failure: no warning.

    Notes
    -----
    Newton direction from ``(Xᵀ diag(C w_i ℓ''_i) X + I) Δ = −∇J`` with ℓ'' the (generalised)
    second derivative of the loss, then an Armijo backtracking line search.  For the squared
    hinge the generalised Hessian makes this the finite Newton method of Keerthi & DeCoste
    (2005).  With weights, ``∇J = C Xᵀ (w ∘ ℓ') + β``; J stays 1-strongly convex, so
    ``grad_norm`` certifies ``‖β − β*‖ ≤ grad_norm`` for the weighted problem too.

    Examples
    --------
    >>> import numpy as np
    >>> from sklearn.linear_model import LogisticRegression
    >>> from deltafit.losses import get_loss
    >>> from deltafit.solvers import newton_primal
    >>> rng = np.random.default_rng(0)
    >>> X = rng.normal(size=(50, 3))
    >>> y = np.where(X[:, 0] + 0.5 * rng.normal(size=50) > 0, 1.0, -1.0)
    >>> r = newton_primal(X, y, get_loss("logistic"), 1.0)
    >>> ref = LogisticRegression(C=1.0, fit_intercept=False, tol=1e-12).fit(X, y)
    >>> bool(np.allclose(r.coef, ref.coef_.ravel(), atol=1e-6))
    True
    """
    _check_smooth(loss, "newton_primal")
    n_all = n = X.shape[0]
    p = X.shape[1]
    w = _check_sample_weight(sample_weight, n, C)
    keep = None
    if w is not None:
        y = np.asarray(y)
        keep = _kept(w)
        if keep is not None:  # weight 0: the sample is absent
            X, y, w = (X[keep] if sp.issparse(X) else np.asarray(X)[keep]), y[keep], w[keep]
            n = keep.size
        cw = C * w  # C_i
    check_curvature(_squared_norms(X), C if w is None else cw, loss)
    beta = np.zeros(p) if coef0 is None else np.array(coef0, dtype=np.float64, copy=True)
    if w is None:
        g0 = np.linalg.norm(C * (X.T @ loss.d1(y, np.zeros(n))))
    else:
        g0 = np.linalg.norm(X.T @ (cw * loss.d1(y, np.zeros(n))))

    def objective(b, z):
        if w is None:
            return C * loss.value(y, z).sum() + 0.5 * b @ b
        return C * (w @ loss.value(y, z)) + 0.5 * b @ b

    def gradient(b, z):
        if w is None:
            grad = C * (X.T @ loss.d1(y, z)) + b
        else:
            grad = X.T @ (cw * loss.d1(y, z)) + b
        return grad, grad, np.linalg.norm(grad)

    sparse = sp.issparse(X)
    if sparse:
        X = sp.csr_matrix(X, dtype=np.float64)
    last = []  # (H, d) of the last Newton step, when asked for

    def newton_step(z, grad, _):
        d2 = loss.d2(y, z)
        act = d2 > 0
        Xa = X[act] if not act.all() else X
        D = (C if w is None else cw[act]) * d2[act]
        if sparse and p > HESSIAN_FREE_FEATURES:
            return _cg_step(Xa, D, grad)
        if sparse:
            H = (Xa.T @ sp.diags(D) @ Xa).toarray()
        else:
            H = (Xa.T * D) @ Xa
        H.flat[:: p + 1] += 1.0
        if keep_hessian:
            d = np.zeros(n)
            d[act] = D
            last[:] = [(H, d)]
        try:
            c = linalg.cho_factor(H, lower=True, check_finite=False)
        except linalg.LinAlgError as exc:
            raise curvature_failure(exc, _row_curvature(Xa, D)) from exc
        return -linalg.cho_solve(c, grad, check_finite=False)

    res = _damped_newton(beta, X, objective, gradient, newton_step, g0, tol=tol,
                         max_iter=max_iter, callback=callback, what="Newton")
    if not keep_hessian:
        return res
    if not last:
        return res, None
    H, d = last[0]
    return res, NewtonCurvature(H, d if keep is None else _embed(d, keep, n_all))


def _cg_step(Xa, D, grad, max_iter=None):
    """The Newton step ``−(I + Xaᵀ diag(D) Xa)⁻¹ grad`` by conjugate gradients on
    Hessian-vector products (a truncated Newton step: stopped at a residual of
    ``min(0.1, √‖grad‖)·‖grad‖``, which keeps Newton's local superlinear convergence; the
    iterates are descent directions, so the line search and the gradient test that ends the
    solve are those of the exact step)."""
    XaT = Xa.T  # a CSC view: no copy

    def H(v):
        return v + XaT @ (D * (Xa @ v))

    g = np.asarray(grad, dtype=np.float64)
    gnorm = float(np.linalg.norm(g))
    target = min(0.1, np.sqrt(gnorm)) * gnorm
    x = np.zeros_like(g)
    r = -g
    d = r.copy()
    rr = float(r @ r)
    for _ in range(max_iter or 10 * g.size + 10):
        if np.sqrt(rr) <= target:
            break
        Hd = H(d)
        dHd = float(d @ Hd)
        if dHd <= 0.0:
            break
        a = rr / dHd
        x += a * d
        r -= a * Hd
        rr_new = float(r @ r)
        d = r + (rr_new / rr) * d
        rr = rr_new
    return x if x.any() else -g


def newton_kernel(K, y, loss, C, *, sample_weight=None, coef0=None, tol=1e-10, max_iter=100,
                  callback=None, keep_factor=False):
    """Damped Newton in the kernel expansion β = Σ α_i Φ(x_i).

    Parameters
    ----------
    K : ndarray of shape (n, n)
        Kernel matrix (intercept term included).
    y, loss, C, tol, max_iter, callback
        As in :func:`newton_primal`; ``callback`` receives α and, as ``grad``, the expansion
        coefficients ``g = C w ∘ ℓ'(z) + α`` of ∇J = Σ g_i Φ(x_i) (``grad_norm = sqrt(gᵀKg)``).
    sample_weight : array-like of shape (n,), optional
        Non-negative finite weights ``w_i``, scaling C per sample: ``C_i = C · w_i``, as in
        :func:`newton_primal`.  ``None`` means all 1 (exactly the unweighted solve).  Samples of
        weight 0 are dropped before solving: their α is 0 (also in the warm start and in what
        the callback receives).
    coef0 : ndarray of shape (n,), optional
        Warm start for α.
    keep_factor : bool, default=False
        Also return the factorisation of the last Newton step's system (what
        :mod:`deltafit.solvers._kernel_chord` keeps for chord steps after a data change).

    Returns
    -------
    SolverResult
        ``coef`` is α; ``grad_norm`` is the RKHS norm of ∇J, ``sqrt(gᵀ K g)`` with
        ``g = C w ∘ ℓ'(z) + α``.
    factor : tuple or None
        Only with ``keep_factor``: ``(act, s, L)`` of the last Newton step, ``act`` the
        samples (indices into the n given) with ℓ'' > 0 there, ``s = sqrt(C w ℓ'')`` on them
        and ``L`` the lower Cholesky factor of ``I + S K[act, act] S``; None when no step was
        taken or no sample had curvature.

    Raises
    ------
    ValueError
        When a sample's ``C·w·ℓ''_max·k(x, x)`` exceeds :data:`MAX_CURVATURE`, or the Newton
        system loses positive definiteness in float64 (as :func:`newton_primal`).

    Warns
    -----
    ConvergenceWarning
        As :func:`newton_primal`.

    Notes
    -----
    With ``W = diag(C w_i ℓ''_i)`` the Newton step in function space solves ``(I + W K) Δ = −g``.
    Writing ``S = W^{1/2}``, ``(I + WK)^{-1} = I − S (I + S K S)^{-1} S K``, so the step costs one
    Cholesky factorisation of the SPD matrix ``I + SKS`` restricted to the samples with ℓ'' > 0.
    At the optimum ``α = −C w ∘ ℓ'(z)``, the representer coefficients, unique even when K is
    singular.

    Examples
    --------
    >>> import numpy as np
    >>> from deltafit.losses import get_loss
    >>> from deltafit.solvers import newton_kernel
    >>> rng = np.random.default_rng(0)
    >>> X = rng.normal(size=(30, 2))
    >>> y = np.where(X[:, 0] > 0, 1.0, -1.0)
    >>> r = newton_kernel(X @ X.T, y, get_loss("logistic"), 1.0)   # linear kernel: β = Xᵀα
    >>> r.converged
    True
    """
    _check_smooth(loss, "newton_kernel")
    n_all = n = K.shape[0]
    w = _check_sample_weight(sample_weight, n, C)
    keep = _kept(w)
    if w is not None:
        y = np.asarray(y)
        if keep is not None:  # weight 0: the sample is absent
            K, y, w = np.asarray(K)[np.ix_(keep, keep)], y[keep], w[keep]
            coef0 = _take_start(coef0, keep, n, "coef0")
            n = keep.size
            if callback is not None:
                full_callback = callback

                def callback(it, a, gnorm, f, g):
                    return full_callback(it, _embed(a, keep, n_all), gnorm, f,
                                         _embed(g, keep, n_all))
    cw = C if w is None else C * w  # C_i (elementwise: the unweighted case is unchanged)
    check_curvature(np.diagonal(K), cw, loss, "K", "k(x, x)")
    alpha = np.zeros(n) if coef0 is None else np.array(coef0, dtype=np.float64, copy=True)
    g_zero = cw * loss.d1(y, np.zeros(n))
    g0 = np.sqrt(max(g_zero @ (K @ g_zero), 0.0))

    def objective(a, z):
        if w is None:
            return C * loss.value(y, z).sum() + 0.5 * a @ z
        return C * (w @ loss.value(y, z)) + 0.5 * a @ z

    def gradient(a, z):
        g = cw * loss.d1(y, z) + a
        Kg = K @ g
        return g, Kg, np.sqrt(max(g @ Kg, 0.0))

    last = []  # the last step's factorisation (keep_factor)

    def newton_step(z, g, Kg):
        W = cw * loss.d2(y, z)
        act = np.flatnonzero(W > 0)
        step = -g
        if act.size:
            s = np.sqrt(W[act])
            A = K[np.ix_(act, act)] * np.outer(s, s)
            A.flat[:: act.size + 1] += 1.0
            try:
                L = linalg.cholesky(A, lower=True, overwrite_a=True, check_finite=False)
            except linalg.LinAlgError as exc:
                kd = W[act] * np.diagonal(K)[act]
                kappa = (float(np.max(kd)), float(np.sum(kd)))
                raise curvature_failure(exc, kappa, "the kernel Newton system I + S K S") \
                    from exc
            step[act] += s * linalg.cho_solve((L, True), s * Kg[act], check_finite=False)
            if keep_factor:
                last[:] = [(act, s, L)]
        return step

    res = _damped_newton(alpha, K, objective, gradient, newton_step, g0, tol=tol,
                         max_iter=max_iter, callback=callback, what="kernel Newton")
    if keep is not None:
        res.coef = _embed(res.coef, keep, n_all)
    if not keep_factor:
        return res
    factor = None
    if last:
        act, s, L = last[0]
        factor = (act if keep is None else keep[act], s, L)
    return res, factor


# ---------------------------------------------------------------------------------------------
# hinge loss: the dual box QP
# ---------------------------------------------------------------------------------------------
_EPS = np.finfo(np.float64).eps


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

    alpha: np.ndarray = None
    kkt_violation: float = float("nan")
    duality_gap: float = float("nan")
    dual_objective: float = float("nan")
    n_polish: int = 0
    n_touched: int = 0


def _box_violation(alpha, G, C):
    """|projected gradient| of the minimised dual per coordinate (0 where KKT holds); ``C`` is
    the upper bound, a scalar or per coordinate."""
    v = np.abs(G)
    v[(alpha <= 0.0) & (G >= 0.0)] = 0.0
    v[(alpha >= C) & (G <= 0.0)] = 0.0
    return v


class _KernelQP:
    """The dual over a dense kernel matrix: ``Q = diag(y) K diag(y)``, gradient ``G = Qα − 1``
    kept up to date by the coordinate steps (an O(n) row update each)."""

    touched = 0  # coordinate visits (HingeResult.n_touched)

    def __init__(self, K, y):
        n = y.shape[0]
        Q = np.array(K, dtype=np.float64, order="C", copy=True)
        if Q.shape != (n, n):
            raise ValueError(f"K must have shape ({n}, {n}), got {Q.shape}")
        Q *= y[:, None]
        Q *= y[None, :]
        self.Q, self.y, self.n = Q, y, n
        self.diag = np.diag(Q).copy()
        self.G = None

    def refresh(self, alpha):
        """G = Qα − 1 from scratch (no accumulated rounding)."""
        nz = np.flatnonzero(alpha)
        self.G = (alpha[nz] @ self.Q[nz] if nz.size else np.zeros(self.n)) - 1.0

    def cd_pass(self, alpha, order, C):
        """One coordinate-descent sweep (Hsieh et al. 2008, Alg. 1) over ``order``; ``C`` holds
        the upper bound of each coordinate."""
        from scipy.linalg.blas import daxpy

        Q, G, diag = self.Q, self.G, self.diag
        ub = C.tolist()
        self.touched += order.size
        for i in order.tolist():
            a = alpha[i]
            na = _coordinate_min(a, G[i], diag[i], ub[i])
            if na != a:
                alpha[i] = na
                daxpy(Q[i], G, a=na - a)

    def face_step(self, F, G_F, mu=0.0):
        """``d`` solving ``(Q_FF + μI) d = −G_F`` (for μ = 0 the minimum-norm solution), the
        part of ``−G_F`` in the null space of ``Q_FF`` (zero when μ > 0 or Q_FF is numerically
        positive definite) and ``v ↦ Q_FF v``."""
        A = self.Q[np.ix_(F, F)]
        r = -G_F
        if mu > 0.0:
            B = A.copy()
            B.flat[:: F.size + 1] += mu
            try:
                return (linalg.cho_solve((linalg.cholesky(B, lower=True, check_finite=False),
                                          True), r, check_finite=False),
                        np.zeros_like(r), A.__matmul__)
            except linalg.LinAlgError:
                pass
        top = float(np.max(np.abs(np.diag(A)))) if F.size else 0.0
        try:
            L = linalg.cholesky(A, lower=True, check_finite=False)
            piv = np.diag(L)
            if piv.min() ** 2 > 64.0 * F.size * _EPS * max(top, np.finfo(float).tiny):
                d = linalg.cho_solve((L, True), r, check_finite=False)
                return d, np.zeros_like(r), A.__matmul__
        except linalg.LinAlgError:
            pass
        lam, V = linalg.eigh(A, check_finite=False)
        keep = lam > max(lam[-1], 0.0) * 64.0 * F.size * _EPS
        Vk = V[:, keep]
        c = Vk.T @ r
        return Vk @ (c / lam[keep]), r - Vk @ c, A.__matmul__

    def move(self, F, d):
        from scipy.linalg.blas import daxpy

        if F.size == 1:
            daxpy(self.Q[F[0]], self.G, a=float(d[0]))
        else:
            self.G += d @ self.Q[F]

    def scale(self, alpha):
        """``(|Q| α)_i`` — the magnitude of the terms summed into G_i (for rounding bounds)."""
        nz = np.flatnonzero(alpha)
        return alpha[nz] @ np.abs(self.Q[nz]) if nz.size else np.zeros(self.n)

    def sq_norm(self, u):
        """‖Σ_i u_i y_i Φ(x_i)‖² (RKHS)."""
        return float(max(u @ (self.Q @ u), 0.0))

    def coef(self, alpha):
        return self.y * alpha + 0.0  # no negative zeros

    def coef_rounding(self, alpha):
        return 0.0  # y_i α_i is exact

    def gamma(self):
        return (self.n + 2) * _EPS / (1.0 - (self.n + 2) * _EPS)

    def restrict(self, S, alpha):
        """The QP over the variables ``S`` with the others fixed at ``alpha``
        (:func:`_hinge_warm`)."""
        rest = np.setdiff1d(np.flatnonzero(alpha), S, assume_unique=True)
        Qr = self.Q[np.ix_(rest, S)]
        return _SubKernelQP(self.Q[np.ix_(S, S)], self.y[S], alpha[rest] @ Qr,
                            alpha[rest] @ np.abs(Qr))

    def full(self):
        return self


class _SubKernelQP(_KernelQP):
    """:class:`_KernelQP` over a working set S: ``G_S = Q_SS α_S + o − 1`` with ``o`` the
    fixed variables' part of ``(Qα)_S`` and ``s0`` their part of :meth:`scale`."""

    def __init__(self, Q, y, offset, s0):
        self.Q, self.y, self.n = np.ascontiguousarray(Q), y, y.shape[0]
        self.diag = np.diag(self.Q).copy()
        self.o, self.s0 = offset, s0
        self.G = None

    def refresh(self, alpha):
        super().refresh(alpha)
        self.G += self.o

    def scale(self, alpha):
        return self.s0 + super().scale(alpha)


class _SlotKernelQP:
    """The dual over the live slots ``A`` of a kernel matrix kept by slot (``K``:
    capacity × capacity, read in place, never copied whole): the full gradient
    ``G = y ∘ K_AA (y ∘ α) − 1`` is one matrix-vector product over the slots, the working
    sets read their rows (:meth:`restrict`).  ``nonneg``: K has no negative entry (RBF,
    Laplacian, ...), so ``|K| α = K α``."""

    touched = 0

    def __init__(self, K, A, y, nonneg):
        self.K, self.A, self.y, self.n = K, np.asarray(A, dtype=np.intp), y, y.shape[0]
        if self.A.shape != (self.n,):
            raise ValueError(f"{self.A.size} slots for {self.n} labels")
        self.nonneg = bool(nonneg)
        self.diag = np.asarray(K[self.A, self.A], dtype=np.float64)  # y_i² = 1
        self.G = None
        self._scale = None  # (α, |Q|α) from the last refresh (nonneg: the same pass)

    def _mul(self, c):
        """``K_AA c`` (the inactive slots' columns multiplied by 0); ``c`` a vector, or rows
        of vectors (one pass over the matrix for all of them)."""
        c = np.atleast_2d(c)
        v = np.zeros((c.shape[0], self.K.shape[0]))
        v[:, self.A] = c
        return (v @ self.K)[:, self.A]  # K symmetric on the live slots

    def refresh(self, alpha):
        if self.nonneg:
            P = self._mul(np.stack([self.y * alpha, alpha]))
            self.G = self.y * P[0] - 1.0
            self._scale = (alpha.copy(), P[1])
        else:
            self.G = self.y * self._mul(self.y * alpha)[0] - 1.0

    def scale(self, alpha):
        if self.nonneg:
            if self._scale is not None and np.array_equal(self._scale[0], alpha):
                return self._scale[1]
            return self._mul(alpha)[0]
        nz = np.flatnonzero(alpha)
        return np.abs(self.K[np.ix_(self.A, self.A[nz])]) @ alpha[nz]

    def sq_norm(self, u):
        return float(max(u @ (self.y * self._mul(self.y * u)[0]), 0.0))

    def coef(self, alpha):
        return self.y * alpha + 0.0

    def coef_rounding(self, alpha):
        return 0.0

    def gamma(self):
        return (self.n + 2) * _EPS / (1.0 - (self.n + 2) * _EPS)

    def restrict(self, S, alpha):
        AS, yS = self.A[S], self.y[S]
        rest = np.setdiff1d(np.flatnonzero(alpha), S, assume_unique=True)
        QS = self.K[:, AS][AS] * yS[:, None] * yS[None, :]
        if self.nonneg and self._scale is not None and np.array_equal(self._scale[0], alpha):
            # the fixed variables' part of (Qα)_S and of (|Q|α)_S from the last refresh (no
            # pass over the matrix): G_S + 1 and |Q|α minus the working set's own part
            aS = alpha[S]
            return _SubKernelQP(QS, yS, self.G[S] + 1.0 - QS @ aS,
                                np.maximum(self._scale[1][S] - np.abs(QS) @ aS, 0.0))
        Kr = self.K[np.ix_(self.A[rest], AS)]
        return _SubKernelQP(QS, yS, yS * ((self.y[rest] * alpha[rest]) @ Kr),
                            alpha[rest] @ np.abs(Kr))

    def full(self):
        return _KernelQP(self.K[:, self.A][self.A], self.y)


class _FeatureQP:
    """The dual over explicit features, LIBLINEAR's way (Hsieh et al. 2008): the primal vector
    ``w = Σ α_i y_i Φ_i`` is kept instead of Q, so a coordinate step costs O(p) and memory is
    O(n p); ``G = y ∘ (Φ w) − 1`` is recomputed after each sweep."""

    touched = 0  # coordinate visits (HingeResult.n_touched)
    _abs = None

    def __init__(self, Phi, y):
        Z = np.array(Phi, dtype=np.float64, order="C", copy=True)
        if Z.ndim != 2 or Z.shape[0] != y.shape[0]:
            raise ValueError(f"Phi must have shape ({y.shape[0]}, p), got {Z.shape}")
        Z *= y[:, None]
        self.Z, self.y = Z, y
        self.n, self.p = Z.shape
        self.diag = np.einsum("ij,ij->i", Z, Z)
        self.w = np.zeros(self.p)
        self.G = None

    def refresh(self, alpha):
        nz = np.flatnonzero(alpha)
        self.w = alpha[nz] @ self.Z[nz] if nz.size else np.zeros(self.p)
        self.G = self.Z @ self.w - 1.0

    def cd_pass(self, alpha, order, C):
        from scipy.linalg.blas import daxpy

        Z, w, diag = self.Z, self.w, self.diag
        ub = C.tolist()
        self.touched += order.size
        for i in order.tolist():
            zi = Z[i]
            a = alpha[i]
            na = _coordinate_min(a, zi @ w - 1.0, diag[i], ub[i])
            if na != a:
                alpha[i] = na
                daxpy(zi, w, a=na - a)
        self.G = Z @ w - 1.0

    def face_step(self, F, G_F, mu=0.0):
        """As :meth:`_KernelQP.face_step`, from the SVD of the rows ``y_F ∘ Φ_F`` (Q_FF is
        never formed, so its conditioning is not squared)."""
        ZF = self._dense_rows(F)
        U, sv, _ = linalg.svd(ZF, full_matrices=False, check_finite=False)
        r = -G_F

        def Qmul(v):
            return ZF @ (v @ ZF)

        if mu > 0.0:
            c = U.T @ r
            return U @ (c / (sv ** 2 + mu)) + (r - U @ c) / mu, np.zeros_like(r), Qmul
        if sv.size == 0 or sv[0] == 0.0:
            return np.zeros_like(r), r, Qmul
        keep = sv > sv[0] * max(ZF.shape) * _EPS * 8.0
        Uk = U[:, keep]
        c = Uk.T @ r
        return Uk @ (c / sv[keep] ** 2), r - Uk @ c, Qmul

    def _dense_rows(self, F):
        return self.Z[F]

    def move(self, F, d):
        self.w += d @ self.Z[F]
        self.G = self.Z @ self.w - 1.0

    def abs_rows(self):
        """``|Z|`` (computed once)."""
        if self._abs is None:
            self._abs = np.abs(self.Z)
        return self._abs

    def scale(self, alpha):
        """An upper bound on ``Σ_j |q_ij| α_j`` through ``|Φ|``."""
        absZ = self.abs_rows()
        return absZ @ (alpha @ absZ)

    def restrict(self, S, alpha):
        """The QP over the variables ``S`` with the others fixed at ``alpha`` (``self.w``
        current): their part of w and of ``|Z|ᵀα`` enter as constants."""
        ZS, aS = self._rows(S), alpha[S]
        v0 = np.maximum(self.abs_rows().T @ alpha - abs(ZS).T @ aS, 0.0)
        return self._sub(ZS, self.y[S], self.w - ZS.T @ aS, v0)

    def _rows(self, S):
        return self.Z[S]

    @staticmethod
    def _sub(ZS, yS, w0, v0):
        return _SubFeatureQP(ZS, yS, w0, v0)

    def full(self):
        return self

    def sq_norm(self, u):
        v = u @ self.Z
        return float(v @ v)

    def coef(self, alpha):
        nz = np.flatnonzero(alpha)
        return alpha[nz] @ self.Z[nz] if nz.size else np.zeros(self.p)

    def coef_rounding(self, alpha):
        g = (self.n + 2) * _EPS / (1.0 - (self.n + 2) * _EPS)
        return g * float(np.linalg.norm(alpha @ self.abs_rows()))

    def gamma(self):
        m = self.n + self.p + 4
        return m * _EPS / (1.0 - m * _EPS)


class _SubFeatureQP(_FeatureQP):
    """:class:`_FeatureQP` over a working set S: ``w = w0 + Σ_{i∈S} α_i z_i`` with ``w0``
    the fixed variables' part, ``v0`` their part of ``|Z|ᵀα`` (for :meth:`scale`)."""

    def __init__(self, ZS, yS, w0, v0):
        self.Z, self.y = ZS, yS
        self.n, self.p = ZS.shape
        self.diag = np.einsum("ij,ij->i", ZS, ZS)
        self.w0, self.v0 = w0, v0
        self.w, self.G = w0.copy(), None

    def refresh(self, alpha):
        nz = np.flatnonzero(alpha)
        self.w = self.w0 + alpha[nz] @ self.Z[nz] if nz.size else self.w0.copy()
        self.G = self.Z @ self.w - 1.0

    def scale(self, alpha):
        absZ = self.abs_rows()
        return absZ @ (self.v0 + alpha @ absZ)


class _SparseFeatureQP(_FeatureQP):
    """:class:`_FeatureQP` over sparse rows (CSR): the same dual coordinate descent and face
    solves, through sparse row products (a coordinate step costs O(nnz of its row)); the rows
    of a free set are densified for its SVD."""

    def __init__(self, Phi, y):
        Z = sp.csr_matrix(Phi, dtype=np.float64, copy=True)
        if Z.shape[0] != y.shape[0]:
            raise ValueError(f"Phi must have shape ({y.shape[0]}, p), got {Z.shape}")
        Z.sum_duplicates()
        Z.sort_indices()
        Z.data *= np.repeat(y, np.diff(Z.indptr))  # row i times y_i
        self.Z, self.y = Z, y
        self.n, self.p = Z.shape
        self.diag = np.asarray(Z.multiply(Z).sum(axis=1), dtype=np.float64).ravel()
        self.absZ = abs(Z)
        self.w = np.zeros(self.p)
        self.G = None

    def refresh(self, alpha):
        self.w = self.coef(alpha)
        self.G = self.Z @ self.w - 1.0

    def cd_pass(self, alpha, order, C):
        Z, w, diag = self.Z, self.w, self.diag
        ptr, ind, val = Z.indptr, Z.indices, Z.data
        ub = C.tolist()
        self.touched += order.size
        for i in order.tolist():
            lo, hi = ptr[i], ptr[i + 1]
            cols, zi = ind[lo:hi], val[lo:hi]
            a = alpha[i]
            na = _coordinate_min(a, float(zi @ w[cols]) - 1.0, diag[i], ub[i])
            if na != a:
                alpha[i] = na
                w[cols] += (na - a) * zi
        self.G = Z @ w - 1.0

    def _dense_rows(self, F):
        return self.Z[F].toarray()

    def move(self, F, d):
        self.w += self.Z[F].T @ d
        self.G = self.Z @ self.w - 1.0

    def scale(self, alpha):
        return self.absZ @ (self.absZ.T @ alpha)

    def abs_rows(self):
        return self.absZ

    def _rows(self, S):
        return self.Z[S]

    @staticmethod
    def _sub(ZS, yS, w0, v0):
        return _SubSparseFeatureQP(ZS, yS, w0, v0)

    def sq_norm(self, u):
        v = self.Z.T @ u
        return float(v @ v)

    def coef(self, alpha):
        nz = np.flatnonzero(alpha)
        return self.Z[nz].T @ alpha[nz] if nz.size else np.zeros(self.p)

    def coef_rounding(self, alpha):
        g = (self.n + 2) * _EPS / (1.0 - (self.n + 2) * _EPS)
        return g * float(np.linalg.norm(self.absZ.T @ alpha))


class _SubSparseFeatureQP(_SparseFeatureQP):
    """:class:`_SubFeatureQP` over sparse rows."""

    def __init__(self, ZS, yS, w0, v0):
        self.Z, self.y = ZS, yS
        self.n, self.p = ZS.shape
        self.diag = np.asarray(ZS.multiply(ZS).sum(axis=1), dtype=np.float64).ravel()
        self.absZ = abs(ZS)
        self.w0, self.v0 = w0, v0
        self.w, self.G = w0.copy(), None

    def refresh(self, alpha):
        self.w = self.w0 + self.Z.T @ alpha
        self.G = self.Z @ self.w - 1.0

    def scale(self, alpha):
        return self.absZ @ (self.v0 + self.absZ.T @ alpha)


def _polish(qp, alpha, C, thr, max_steps):
    """Active-set polishing: minimise the dual exactly over the face that fixes the variables at
    their bounds, ``Q_FF α_F = 1 − Q_FB α_B`` on the free set F = {0 < α < C} (``C`` holds the
    upper bound of each coordinate).

    When the face minimiser lies in the box it is taken and polishing ends.  Otherwise the
    better (lower dual objective) of two feasible points is taken: the step towards it as far as
    the box allows, or its projection onto the box; the variables that reach a bound leave F
    and the face is solved again.  The dual objective never increases (the first point already
    decreases it: the objective is convex along the step and minimal at its end).  When Q_FF is
    singular and the face has no minimiser, the step follows the null-space part of the
    gradient (along which no score changes) to a bound.  Returns the number of face solves.
    """
    steps = 0
    while steps < max_steps:
        F = np.flatnonzero((alpha > 0.0) & (alpha < C))
        if F.size == 0:
            break
        steps += 1
        qp.touched += F.size
        G_F = qp.G[F]
        d, d_null, Qmul = qp.face_step(F, G_F)
        unbounded = np.max(np.abs(d_null)) > 0.5 * thr
        if unbounded:
            d = d_null
        aF, CF = alpha[F], C[F]
        with np.errstate(divide="ignore", invalid="ignore"):
            room = np.where(d > 0.0, (CF - aF) / d, np.where(d < 0.0, -aF / d, np.inf))
        t = float(np.min(room))
        if not unbounded and t >= 1.0:
            new = np.clip(aF + d, 0.0, CF)
            qp.move(F, new - aF)
            alpha[F] = new
            break
        if not np.isfinite(t):
            break  # no direction at all
        new = np.clip(aF + t * d, 0.0, CF)
        hit = room <= t
        new[hit] = np.where(d[hit] > 0.0, CF[hit], 0.0)
        if not unbounded:
            proj = np.clip(aF + d, 0.0, CF)

            def change(delta):
                return float(G_F @ delta + 0.5 * delta @ Qmul(delta))

            if change(proj - aF) < change(new - aF):
                new = proj
        qp.move(F, new - aF)
        alpha[F] = new
    return steps


def _prox_step(qp, alpha, C, mu, max_steps=8):
    """One proximal-point step ``argmin_{0≤a≤C} ½aᵀQa − Σa + μ/2 ‖a − α‖²`` (``C`` the upper
    bound of each coordinate, all positive) by the primal-dual
    active-set method (Hintermüller, Ito & Kunisch, SIAM J. Optim. 2003), a semismooth Newton
    method: predict the sets ``{a = 0}``, ``{a = C}`` from ``a − ∇/diag``, solve
    ``(Q_FF + μI) a_F = …`` on the rest, repeat until the sets repeat with a feasible ``a``.

    The proximal term makes every face system positive definite and well conditioned, which is
    what the active-set prediction needs on the (often singular or nearly singular) SVM dual.
    Returns ``(a, converged, face_solves)``; ``qp.G`` is left at ``a``.
    """
    center = alpha
    q = np.maximum(qp.diag, 0.0) + mu
    a = alpha.copy()
    prev = None
    slack = 64.0 * _EPS * C
    for k in range(max_steps):
        H = qp.G + mu * (a - center)
        x = a - H / q
        lo, hi = x <= 0.0, x >= C
        sets = np.packbits(lo).tobytes() + np.packbits(hi).tobytes()
        if sets == prev and np.all(a >= -slack) and np.all(a <= C + slack):
            np.clip(a, 0.0, C, out=a)
            qp.refresh(a)
            return a, True, k
        prev = sets
        new = a.copy()
        new[lo], new[hi] = 0.0, C[hi]
        qp.refresh(new)
        F = np.flatnonzero(~(lo | hi))
        qp.touched += qp.n + F.size
        if F.size:
            d, _, _ = qp.face_step(F, qp.G[F] + mu * (new[F] - center[F]), mu)
            new[F] += d
            qp.move(F, d)
        a = new
    qp.refresh(alpha)
    return alpha, False, max_steps


def _coordinate_min(a, g, q, C):
    """Exact minimiser over ``[0, C]`` of the dual in one coordinate (Hsieh et al. 2008):
    ``a`` unchanged when its KKT condition holds, else ``clip(a − g/q, 0, C)`` (a bound when the
    curvature ``q`` vanishes)."""
    if (a <= 0.0 and g >= 0.0) or (a >= C and g <= 0.0) or g == 0.0:
        return a
    if q <= 0.0:
        return C if g < 0.0 else 0.0
    return min(max(a - g / q, 0.0), C)


def _hinge_box(n, C, w):
    """``(C, ub)``: C checked, and the upper bound of each coordinate, ``C_i = C · w_i``."""
    C = float(C)
    if not (np.isfinite(C) and C > 0.0):
        raise ValueError(f"C must be a positive finite number, got {C!r}")
    # the upper bounds, per coordinate: elementwise operations on np.full(n, C) give bitwise
    # what the scalar C gave; sums over samples keep their unweighted form when w is None
    return C, (np.full(n, C) if w is None else C * w)


def _hinge_start(alpha0, n, ub):
    """The starting dual variables: zeros, or ``alpha0`` checked and clipped to the box."""
    if alpha0 is None:
        return np.zeros(n)
    alpha = np.array(alpha0, dtype=np.float64, copy=True).ravel()
    if alpha.shape != (n,) or not np.all(np.isfinite(alpha)):
        raise ValueError(f"alpha0 must hold {n} finite values")
    np.clip(alpha, 0.0, ub, out=alpha)
    return alpha


def _floor(qp, alpha):
    """The rounding level of the KKT residuals ``G_i = (Qα)_i − 1``: below it tol cannot be
    met."""
    return 16.0 * _EPS * (1.0 + float(np.max(qp.scale(alpha), initial=0.0)))


def _sets(alpha, ub):
    return np.packbits(alpha > 0.0).tobytes() + np.packbits(alpha >= ub).tobytes()


def _hinge_loop(qp, alpha, ub, warm, tol, max_iter, report):
    """The iterations of the dual solve over ``qp`` from ``alpha`` (``qp.G`` fresh at it):
    coordinate-descent sweeps over the violators, proximal active-set steps, exact face
    solves.  ``warm``: ``alpha`` is a warm start (its sets count as already seen);
    ``report(it, alpha)`` returns True to stop (None: never).

    Returns ``(alpha, it, n_polish, converged, stopped, thr, polished)``: ``thr`` the threshold
    the KKT violation was last held to, ``polished`` whether the last step solved the face
    exactly (the rounding floor then applies).
    """
    rng = np.random.default_rng(0)  # a fixed sweep order: fits are reproducible
    it = n_polish = 0
    stopped = report is not None and report(0, alpha)
    mu_scale = float(np.max(qp.diag, initial=0.0)) or 1.0
    mu = 1e-3 * mu_scale
    thr = max(tol, 0.0)
    converged = False
    warm_up, polished = 5, False
    last_sets = _sets(alpha, ub) if warm else None
    while not stopped:
        viol = _box_violation(alpha, qp.G, ub)
        vmax = float(np.max(viol, initial=0.0))
        if vmax <= tol or polished:
            # below tol, or at the rounding floor once the face has been solved exactly
            thr = max(tol, _floor(qp, alpha)) if polished else tol
            if vmax <= thr:
                qp.refresh(alpha)  # decide on an exact gradient, not an accumulated one
                viol = _box_violation(alpha, qp.G, ub)
                vmax = float(np.max(viol, initial=0.0))
                if vmax <= thr:
                    converged = True
                    break
        if it >= max_iter:
            break
        it += 1
        polished = False
        if warm_up:
            # a few coordinate-descent sweeps over the KKT violators: cheap, and they settle
            # most of the variables that end at a bound
            warm_up -= 1
            order = np.flatnonzero(viol > 0.0)
            rng.shuffle(order)
            qp.cd_pass(alpha, order, ub)
            sets = _sets(alpha, ub)
            if sets == last_sets:
                # settled already (typical after a small data change): solve the face exactly
                warm_up = 0
                qp.refresh(alpha)
                n_polish += _polish(qp, alpha, ub, thr, 5)
                qp.refresh(alpha)
                polished = True
            last_sets = sets
            stopped = report is not None and report(it, alpha)
            continue
        a, ok, k = _prox_step(qp, alpha, ub, mu)
        n_polish += k
        if not ok:
            mu *= 10.0  # the active-set prediction cycled: a stronger proximal term
            stopped = report is not None and report(it, alpha)
            continue
        alpha = a
        if k <= 2:
            mu = max(0.1 * mu, 1e-12 * mu_scale)
        sets = _sets(alpha, ub)
        if sets == last_sets:
            # the sets have settled: solve the face exactly (μ = 0)
            n_polish += _polish(qp, alpha, ub, thr, 5)
            qp.refresh(alpha)
            polished = True
        last_sets = sets
        stopped = report is not None and report(it, alpha)
    return alpha, it, n_polish, converged, stopped, thr, polished


def _hinge_result(qp, alpha, ub, C, w, loop, name, touched, fresh=False):
    """The :class:`HingeResult` of ``alpha``: the KKT violation, the duality gap and the
    certified radius, all from a gradient computed afresh (``fresh``: ``qp.G`` already is)."""
    it, n_polish, converged, stopped, thr = loop
    if not fresh:
        qp.refresh(alpha)
    G = qp.G
    viol = _box_violation(alpha, G, ub)
    kkt = float(np.max(viol, initial=0.0))
    hinge = np.maximum(0.0, -G)  # max(0, 1 − y z)
    gap = float(np.sum(ub * hinge + alpha * G))  # Σ C_i hinge_i + α_i G_i, each term ≥ 0
    sq = float(alpha @ (G + 1.0))  # ‖β‖² = Σ α_i y_i z_i
    dual = float(alpha.sum()) - 0.5 * sq
    gamma = qp.gamma()
    # term i of the gap is off by at most (C_i + α_i) γ (|Q| α)_i ≤ 2 C_i γ (|Q| α)_i
    if w is None:
        primal = C * float(hinge.sum()) + 0.5 * sq
        rounding = C * gamma * float(np.sum(qp.scale(alpha))) * 2.0
    else:
        primal = float(ub @ hinge) + 0.5 * sq
        rounding = gamma * float(ub @ qp.scale(alpha)) * 2.0
    radius = np.sqrt(2.0 * (max(gap, 0.0) + rounding)) + qp.coef_rounding(alpha)
    if not converged and not stopped:
        warn_kkt_not_converged(name, it, kkt, thr, radius)
    return HingeResult(qp.coef(alpha), float(radius), it, bool(converged), bool(stopped),
                       primal, alpha=alpha, kkt_violation=kkt, duality_gap=gap,
                       dual_objective=dual, n_polish=n_polish, n_touched=int(touched))


def _hinge_solve(qp, C, alpha0, tol, max_iter, callback, name, w=None):
    """The hinge dual over ``qp`` with the box ``0 ≤ α_i ≤ C_i``, ``C_i = C · w_i`` (``w`` all
    positive; None for C on every sample)."""
    C, ub = _hinge_box(qp.n, C, w)
    alpha = _hinge_start(alpha0, qp.n, ub)
    qp.refresh(alpha)
    report = None
    if callback is not None:
        def report(it, alpha):
            # a subgradient of J at coef: C_i on the margin violators, α on the exact margin
            G = qp.G
            c = np.where(G < 0.0, ub, np.where(G == 0.0, alpha, 0.0))
            u = alpha - c
            if w is None:
                obj = C * np.maximum(0.0, -G).sum() + 0.5 * alpha @ (G + 1.0)
            else:
                obj = ub @ np.maximum(0.0, -G) + 0.5 * alpha @ (G + 1.0)
            return _check_callback(callback, it, qp.coef(alpha), np.sqrt(qp.sq_norm(u)),
                                   float(obj), qp.coef(u))

    alpha, it, n_polish, converged, stopped, thr, _ = _hinge_loop(
        qp, alpha, ub, alpha0 is not None, tol, max_iter, report)
    return _hinge_result(qp, alpha, ub, C, w, (it, n_polish, converged, stopped, thr), name,
                         qp.touched)


#: the first band of :func:`_hinge_warm`: ``_BAND[0] · |S| + _BAND[1]`` samples nearest to the
#: margin (S: the moved samples and the free set)
_BAND = (2, 256)


def _hinge_warm(qp, C, alpha0, working_set, tol, max_iter, name, w=None, margin0=None,
                max_rounds=20):
    """The hinge dual over ``qp`` warm-started from ``alpha0`` by working sets (shrinking, as
    LIBLINEAR and LIBSVM do: Hsieh et al. 2008, §3.5; Chang & Lin, "LIBSVM: a library for
    support vector machines", §5.1).

    The working set S starts as the samples the change moved (``working_set``), the free set
    of ``alpha0`` and, given the margins ``margin0`` under the solution before the change, a
    band of the samples nearest to the margin (those whose variable a small move of β flips;
    the dual alone is a poor guide: removing a bound variable moves ``w = Σ α_i z_i`` by
    ``C_i z_i`` and makes every near-margin sample look violated).  The variables outside S
    stay at their bounds.  The QP over S (the rest entering as a constant offset of the
    gradient) is solved by :func:`_hinge_loop` on a restricted QP (``qp.restrict``); then the
    full gradient is computed afresh and the KKT conditions of every variable checked against
    the threshold a cold solve uses (``tol``, or the rounding floor of the whole problem once
    the face has been solved exactly).  The violators outside S join it (or, when they are
    many, a four times wider band) and the round repeats; a round that finds none outside S
    (S itself not settled) hands the rest to the full solve.  The result is certified by
    :func:`_hinge_result` like a cold solve's.
    """
    n = qp.n
    C, ub = _hinge_box(n, C, w)
    alpha = _hinge_start(alpha0, n, ub)
    work = np.unique(np.asarray(working_set, dtype=np.intp).ravel())
    if work.size and (work[0] < 0 or work[-1] >= n):
        raise ValueError(f"working_set must hold indices in [0, {n}), got {work[[0, -1]]}")
    S = np.union1d(work, np.flatnonzero((alpha > 0.0) & (alpha < ub)))
    order, m = None, 0
    if margin0 is not None:
        dist = np.abs(np.asarray(margin0, dtype=np.float64).ravel() - 1.0)
        if dist.shape != (n,):
            raise ValueError(f"margin0 must hold {n} values, got {dist.size}")
        order = np.argsort(np.where(np.isnan(dist), np.inf, dist), kind="stable")
        m = min(n, _BAND[0] * S.size + _BAND[1])
        S = np.union1d(S, order[:m])
    qp.refresh(alpha)
    viol = _box_violation(alpha, qp.G, ub)
    it = n_polish = touched = 0
    converged = polished = False
    thr = max(tol, 0.0)
    for rnd in range(max_rounds):
        vmax = float(np.max(viol, initial=0.0))
        thr = max(tol, _floor(qp, alpha)) if polished and vmax > tol else max(tol, 0.0)
        if vmax <= thr:
            converged = True
            break
        if it >= max_iter:
            break
        if rnd or not S.size:
            outside = np.setdiff1d(np.flatnonzero(viol > thr), S, assume_unique=True)
            if not outside.size:
                break
            if order is not None and m < n and outside.size > max(256, S.size // 4):
                m = min(n, 4 * m)  # w is still far off: a wider band, not the violators
                S = np.union1d(S, order[:m])
            else:
                S = np.union1d(S, outside)
        sub = qp.restrict(S, alpha)
        sub.refresh(alpha[S])
        aS, k, p, _, _, _, polished = _hinge_loop(sub, alpha[S], ub[S], True, tol,
                                                  max_iter - it, None)
        touched += sub.touched
        it, n_polish = it + k, n_polish + p
        alpha[S] = aS
        qp.refresh(alpha)
        viol = _box_violation(alpha, qp.G, ub)
    else:
        vmax = float(np.max(viol, initial=0.0))
        thr = max(tol, _floor(qp, alpha)) if polished and vmax > tol else max(tol, 0.0)
        converged = vmax <= thr
    if converged or it >= max_iter:
        return _hinge_result(qp, alpha, ub, C, w, (it, n_polish, converged, False, thr), name,
                             touched, fresh=True)
    # the working sets did not settle: the full solve from where they left off
    full = qp.full()
    if full is not qp:
        full.refresh(alpha)
    alpha, k, p, converged, _, thr, _ = _hinge_loop(full, alpha, ub, True, tol, max_iter - it,
                                                    None)
    return _hinge_result(full, alpha, ub, C, w, (it + k, n_polish + p, converged, False, thr),
                         name, touched + full.touched)


def _kept_indices(idx, keep, n):
    """Indices into ``n`` samples mapped to their positions among the kept ones ``keep``
    (dropped samples left out); None stays None."""
    if idx is None:
        return None
    idx = np.asarray(idx, dtype=np.intp).ravel()
    if idx.size and (idx.min() < 0 or idx.max() >= n):
        raise ValueError(f"working_set must hold indices in [0, {n})")
    pos = np.searchsorted(keep, idx)
    pos = np.minimum(pos, keep.size - 1)
    return pos[keep[pos] == idx] if keep.size else pos[:0]


def _hinge_kernel_slots(K, slots, y, C, *, sample_weight=None, alpha0=None, working_set=(),
                        margin0=None, nonneg=False, tol=1e-10, max_iter=1000):
    """:func:`hinge_kernel` warm-started by working sets (``working_set``) over the rows and
    columns ``slots`` of a larger kernel matrix ``K``, read in place (a model's matrix by
    ledger slot: no n × n copy; ``nonneg``: K has no negative entry).  Samples of weight 0
    are dropped, as there."""
    y = _check_labels(y)
    slots = np.asarray(slots, dtype=np.intp)
    n = y.shape[0]
    w = _check_sample_weight(sample_weight, n, C)
    keep = _kept(w)
    if keep is not None:
        slots, y, w = slots[keep], y[keep], w[keep]
        alpha0 = _take_start(alpha0, keep, n, "alpha0")
        working_set = _kept_indices(working_set, keep, n)
        margin0 = _take_start(margin0, keep, n, "margin0")
    qp = _SlotKernelQP(K, slots, y, nonneg)
    res = _hinge_warm(qp, C, alpha0, working_set, tol, max_iter, "hinge_kernel", w, margin0)
    if keep is not None:
        res.coef = _embed(res.coef, keep, n)
        res.alpha = _embed(res.alpha, keep, n)
    return res


def _check_labels(y, n=None):
    y = np.asarray(y, dtype=np.float64).ravel()
    if not np.all(np.abs(y) == 1.0):
        raise ValueError("the hinge solvers need labels y in {-1, +1}")
    if n is not None and y.shape[0] != n:
        raise ValueError(f"y has {y.shape[0]} labels for {n} samples")
    return y


def hinge_primal(X, y, C, *, sample_weight=None, alpha0=None, tol=1e-10, max_iter=1000,
                 callback=None, working_set=None, margin0=None):
    """Exact L1-SVM over explicit features: ``min_β C Σ w_i max(0, 1 − y_i x_iᵀβ) + ½‖β‖²``.

    Solved through the dual box QP ``max_α Σα_i − ½‖Σ α_i y_i x_i‖², 0 ≤ α_i ≤ C_i`` with
    ``β = Σ α_i y_i x_i`` and ``C_i = C · w_i`` (``C_i = C`` without sample weights).

    Parameters
    ----------
    X : ndarray of shape (n, p)
        Features, the intercept column included when the model has one.
    y : ndarray of shape (n,)
        Labels in {-1, +1}.
    C : float
    sample_weight : array-like of shape (n,), optional
        Non-negative finite weights ``w_i``; they scale C per sample, ``C_i = C · w_i`` (the
        upper bound of ``α_i``), as ``LinearSVC(...).fit(X, y, sample_weight=w)`` does
        (LIBLINEAR's per-instance C).  ``None`` (the default) means all 1, and gives exactly the
        unweighted solve.  Samples of weight 0 are dropped before solving (``α_i = 0``): they
        are absent from the problem.
    alpha0 : ndarray of shape (n,), optional
        Warm start for the dual variables (clipped to the box; zeros by default).
    tol : float
        Stop when the KKT violation (:attr:`HingeResult.kkt_violation`, in margin units) is at
        most ``tol``; a ``tol`` below the rounding level of the residuals is raised to it.
    max_iter : int
        Maximum iterations (coordinate-descent sweeps plus proximal steps).
    callback : callable, optional
        ``callback(iteration, coef, grad_norm, objective, grad)`` once at the start and after
        every iteration, as for :func:`newton_primal`: ``coef`` is β, ``objective`` J(β) (not
        monotone: the solver descends on the dual) and
        ``grad`` a *subgradient* of J at β (``β − Σ c_i y_i x_i`` with ``c_i = C_i`` on the margin
        violators and ``c_i = α_i`` on the exact margin), ``grad_norm = ‖grad‖``.  Okumura et
        al.'s Theorem 6 holds for any subgradient of a 1-strongly convex J, so the ball it gives
        (e.g. :class:`deltafit.sensitivity.CertainSigns`) is valid; but it is loose: at the
        optimum the free support vectors lie on the margin only up to rounding, and the
        subgradient does not vanish.  Returning True stops the solver.
    working_set : array-like of int, optional
        With ``alpha0`` the solution of a neighbouring problem (a data change): the indices
        of the samples the change moved (added, relabelled, reweighted ones).  The solve then
        starts on them, the free set of ``alpha0`` and its KKT violators only, keeping the
        other variables at their bounds (shrinking, as LIBLINEAR and LIBSVM do), and widens
        the set through full gradient checks; it stops on the same rule as a cold solve (every
        KKT violation at most ``tol``, or the rounding floor of the whole problem once the face
        is solved exactly) and certifies ``grad_norm`` the same way.  Ignored with a
        ``callback`` (which sees every iteration of the full problem).
    margin0 : ndarray of shape (n,), optional
        With ``working_set``: the margins ``y_i x_iᵀβ₀`` under the solution β₀ before the
        change (any value for the moved samples).  The solve then also starts on the samples
        nearest to the margin, the ones a small move of β flips, and widens that band when
        needed.  After a removal the dual start alone is a poor guide (``Σ α_i y_i x_i`` loses
        the removed samples' share, far more than β moves, and every sample near the margin
        looks violated); the margins are not.

    Returns
    -------
    HingeResult
        ``coef`` is β; ``alpha`` the dual variables.

    Notes
    -----
    Three ingredients, all working on the dual ``min ½αᵀQα − Σα`` over the box, ``Q = ZZᵀ``
    with ``Z = y ∘ Φ``:

    1. A few sweeps of dual coordinate descent (Hsieh et al., ICML 2008, Alg. 1, LIBLINEAR's
       method) over the KKT violators: ``α_i ← clip(α_i − ∇_i / ‖z_i‖², 0, C)``, keeping
       ``w = Σ α_i z_i`` (O(p) per step; Q is never formed, memory is O(np)).  Cheap, and it
       settles most variables that end at a bound.
    2. Proximal-point steps ``α ← argmin_box ½αᵀQα − Σα + μ/2 ‖α − α_k‖²`` (Rockafellar 1976),
       each solved by the primal-dual active-set method (Hintermüller, Ito & Kunisch 2003; a
       semismooth Newton method that moves many variables between the sets at once).  The
       proximal term makes the systems ``Q_FF + μI`` positive definite and well conditioned,
       which the active-set prediction needs on the SVM dual (Q is singular for linear
       features with n > p and nearly singular for smooth kernels); μ adapts (×10 when the
       prediction cycles, ÷10 when it settles at once, down to 1e-12 of max diag Q).
    3. When the sets {α = 0}, {α = C} repeat, the KKT system of the free set F is solved
       exactly (μ = 0; SVD of ``Z_F``, minimum-norm solution and null-space steps when Q_FF is
       singular), then re-checked.  With the right sets this lands on the optimum to rounding,
       which is what makes warm starts (data changes) cheap.

    The dual objective decreases at every step.  The solution reached is exact up to rounding:
    on breast_cancer and digits even/odd (C from 0.01 to 100) the KKT violation ends between
    1e-16 and 3e-12 in 2 to 32 iterations.

    Examples
    --------
    >>> import numpy as np
    >>> from sklearn.svm import LinearSVC
    >>> from deltafit.solvers import hinge_primal
    >>> rng = np.random.default_rng(0)
    >>> X = rng.normal(size=(40, 2))
    >>> y = np.where(X[:, 0] - X[:, 1] > 0, 1.0, -1.0)
    >>> r = hinge_primal(X, y, 1.0)
    >>> ref = LinearSVC(C=1.0, loss="hinge", fit_intercept=False, tol=1e-10,
    ...                 max_iter=100000).fit(X, y)
    >>> bool(np.allclose(r.coef, ref.coef_.ravel(), atol=1e-3))
    True
    """
    y = _check_labels(y, np.shape(X)[0])
    n = y.shape[0]
    w = _check_sample_weight(sample_weight, n, C)
    keep = _kept(w)
    if keep is not None:  # weight 0: the sample is absent
        X, y, w = (X[keep] if sp.issparse(X) else np.asarray(X)[keep]), y[keep], w[keep]
        alpha0 = _take_start(alpha0, keep, n, "alpha0")
        working_set = _kept_indices(working_set, keep, n)
        margin0 = _take_start(margin0, keep, n, "margin0")
    qp = _SparseFeatureQP(X, y) if sp.issparse(X) else _FeatureQP(X, y)
    if working_set is not None and callback is None:
        res = _hinge_warm(qp, C, alpha0, working_set, tol, max_iter, "hinge_primal", w,
                          margin0)
    else:
        res = _hinge_solve(qp, C, alpha0, tol, max_iter, callback, "hinge_primal", w)
    if keep is not None:
        res.alpha = _embed(res.alpha, keep, n)
    return res


def hinge_kernel(K, y, C, *, sample_weight=None, alpha0=None, tol=1e-10, max_iter=1000,
                 callback=None, working_set=None, margin0=None):
    """Exact kernel L1-SVM: ``min_β C Σ w_i max(0, 1 − y_i ⟨Φ(x_i), β⟩) + ½‖β‖²`` through the
    dual box QP ``max_α Σα_i − ½ Σ_ij α_i α_j y_i y_j k_ij, 0 ≤ α_i ≤ C_i = C · w_i``.

    Parameters
    ----------
    K : ndarray of shape (n, n)
        Kernel matrix (intercept term included).
    y : ndarray of shape (n,)
        Labels in {-1, +1}.
    C : float
    sample_weight : array-like of shape (n,), optional
        Non-negative finite weights; they scale C per sample, ``C_i = C · w_i``, as in
        :func:`hinge_primal` (and ``SVC.fit(..., sample_weight=w)``).  ``None`` means all 1
        (exactly the unweighted solve).  Samples of weight 0 are dropped before solving: their
        ``α_i`` and ``coef_i`` are 0 (also in what the callback receives).
    alpha0 : ndarray of shape (n,), optional
        Warm start for the dual variables (clipped to the box).
    tol, max_iter
        As in :func:`hinge_primal`.
    callback : callable, optional
        As in :func:`hinge_primal`, in the kernel expansion: ``coef`` holds ``y_i α_i``, ``grad``
        the expansion coefficients of the subgradient and ``grad_norm`` its RKHS norm.
    working_set : array-like of int, optional
        As in :func:`hinge_primal`: with ``alpha0``, a warm start that works on the samples a
        data change moved, the free set and the violators first.
    margin0 : ndarray of shape (n,), optional
        As in :func:`hinge_primal` (``y_i Σ_j coef0_j k_ij`` under the solution before the
        change).

    Returns
    -------
    HingeResult
        ``coef`` holds the expansion coefficients ``y_i α_i`` (``β = Σ coef_i Φ(x_i)``, the
        convention of :func:`newton_kernel` and of scikit-learn's ``SVC.dual_coef_``);
        ``alpha`` the dual variables themselves.

    Notes
    -----
    As :func:`hinge_primal`, with ``Q = diag(y) K diag(y)`` held densely (O(n²) memory): a
    coordinate step updates the gradient by one row of Q (O(n)), a face system is solved by a
    Cholesky factorisation of ``Q_FF + μI`` (an eigendecomposition with a minimum-norm solution
    when μ = 0 and ``K_FF`` is singular, e.g. for a linear kernel or repeated points; the
    decisions are unique even when α is not).  The regularised intercept (a constant added to
    k) removes the equality constraint ``Σ y_i α_i = 0`` of the usual SVM dual, which is what
    makes single-coordinate steps and the box-only active-set method possible.

    Examples
    --------
    >>> import numpy as np
    >>> from deltafit.solvers import hinge_kernel
    >>> X = np.array([[2.0, 0.0], [-2.0, 0.0], [1.0, 1.0], [-1.0, -1.0]])
    >>> y = np.array([1.0, -1.0, 1.0, -1.0])
    >>> r = hinge_kernel(X @ X.T, y, 1.0)
    >>> bool(np.all((r.alpha >= 0) & (r.alpha <= 1.0)))
    True
    """
    y = _check_labels(y, np.shape(K)[0])
    n = y.shape[0]
    w = _check_sample_weight(sample_weight, n, C)
    keep = _kept(w)
    if keep is not None:  # weight 0: the sample is absent
        K = np.asarray(K)
        if K.shape != (n, n):
            raise ValueError(f"K must have shape ({n}, {n}), got {K.shape}")
        K, y, w = K[np.ix_(keep, keep)], y[keep], w[keep]
        alpha0 = _take_start(alpha0, keep, n, "alpha0")
        working_set = _kept_indices(working_set, keep, n)
        margin0 = _take_start(margin0, keep, n, "margin0")
        if callback is not None:
            full_callback = callback

            def callback(it, coef, gnorm, f, grad):
                return full_callback(it, _embed(coef, keep, n), gnorm, f, _embed(grad, keep, n))
    qp = _KernelQP(K, y)
    if working_set is not None and callback is None:
        res = _hinge_warm(qp, C, alpha0, working_set, tol, max_iter, "hinge_kernel", w,
                          margin0)
    else:
        res = _hinge_solve(qp, C, alpha0, tol, max_iter, callback, "hinge_kernel", w)
    if keep is not None:
        res.coef = _embed(res.coef, keep, n)
        res.alpha = _embed(res.alpha, keep, n)
    return res
