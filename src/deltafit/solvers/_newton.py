"""Damped Newton for the smooth losses (logistic, squared hinge).

:func:`newton_primal` over explicit features (dense, sparse, and beyond
:data:`HESSIAN_FREE_FEATURES` sparse features Hessian-free steps by conjugate gradients on
Hessian-vector products), :func:`newton_kernel` in the kernel expansion ``β = Σ α_i Φ(x_i)``;
both share the Armijo-damped iteration :func:`_damped_newton`, which stops on
``‖∇J(β)‖₂ ≤ tol · ‖∇J(0)‖₂``; over dense rows of :data:`CHORD_FEATURES` features or more
:func:`newton_primal` runs :func:`_chord_newton` instead, whose steps after a Newton step
reuse its Cholesky factor with L-BFGS pairs on top (a chord step costs one pass over the rows,
a Hessian ``n p²``) and which stops on the same rule.  For the squared hinge the generalised
Hessian makes this the finite Newton method of Keerthi & DeCoste (JMLR 2005); the stopping
rule certifies ``‖β − β*‖ ≤ grad_norm`` (Okumura et al., KDD 2015, Theorem 6).
:func:`solve_spd`: a Cholesky solve that fails in deltafit's words.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np
import scipy.sparse as sp
from numpy.typing import ArrayLike
from scipy import linalg
from scipy.linalg import lapack

from deltafit.solvers._chord import Secants
from deltafit.solvers._convergence import (
    check_curvature,
    curvature_failure,
    row_curvature,
    squared_norms,
    warn_not_converged,
)
from deltafit.solvers._inputs import (
    _check_callback,
    _check_smooth,
    _embed,
    _kept,
    _take_start,
    check_sample_weight,
)
from deltafit.solvers._newton_rows import NewtonRows
from deltafit.solvers._results import NewtonCurvature, SolverResult

if TYPE_CHECKING:
    from deltafit.losses import Loss
    from deltafit.solvers._inputs import SolverCallback

__all__ = [
    "HESSIAN_FREE_FEATURES",
    "CHORD_FEATURES",
    "newton_primal",
    "newton_kernel",
    "solve_spd",
]


# Below this decrease J cannot be resolved in floating point; a Newton step is then taken whole.
_FLOOR = 1e-12
#: Dense rows: the steps after a Newton step reuse its factor (chord steps with L-BFGS pairs)
#: while each cuts ‖∇J‖ by at least this factor (:func:`_chord_newton`).
CHORD_RATIO = 0.7
#: Dense rows with at least this many features are solved by :func:`_chord_newton` over
#: :class:`NewtonRows`; below, a Hessian costs a few passes over the rows, and the plain damped
#: Newton iteration (:func:`_damped_newton`) is faster.
CHORD_FEATURES = 100
#: Dense rows: a solve that converged with ``‖∇J‖ > POLISH · tol · ‖∇J(0)‖`` takes one Newton
#: step more (a plain Newton solve's last step lands far below its threshold; so does this).
POLISH = 1e-2
#: Sparse X with more features than this: Newton solves its steps by conjugate gradients on
#: Hessian-vector products (``Xᵀ D X v`` through sparse products) instead of forming the dense
#: p × p Hessian.
HESSIAN_FREE_FEATURES = 500


def solve_spd(A: ArrayLike, b: ArrayLike) -> np.ndarray:
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


def _armijo(obj_at, f0, slope, max_halvings=60):
    """Backtracking line search: largest t in {1, ½, ¼, …} with f(t) ≤ f0 + 1e-4 t slope."""
    t = 1.0
    for _ in range(max_halvings):
        f = obj_at(t)
        if f <= f0 + 1e-4 * t * slope:
            return t, f
        t *= 0.5
    return 0.0, f0


def _damped_newton(
    coef, features, objective, gradient, newton_step, grad_norm0, *, tol, max_iter, callback, what
):
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
            # the line search runs at once, in this iteration: the loop variables are current
            t, _ = _armijo(
                lambda t: objective(coef + t * step, z + t * z_step),  # noqa: B023
                f,
                slope,
            )
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
        why = (
            " (the line search found no decrease of J: the rounding level of J and ∇J was reached)"
            if failed
            else f" (max_iter={max_iter} reached)"
        )
        warn_not_converged(what, gnorm, threshold, tol, it, why)
    return SolverResult(coef, float(gnorm), it, bool(converged), bool(stopped), float(f))


class _Factor:
    """``M⁻¹ g`` by a lower Cholesky factor (what :class:`~deltafit.solvers._chord.Secants`
    builds its L-BFGS directions on)."""

    def __init__(self, factor):
        self.factor = factor

    def solve(self, g):
        y, info = lapack.dpotrs(self.factor, g, lower=1)
        if info:
            raise ValueError(f"dpotrs failed (info={info})")
        return y


def _chord_newton(
    coef, scores, objective, gradient, hessian, grad_norm0, *, tol, max_iter, callback, keep
):
    """Newton steps and chord steps on the last Hessian (dense rows of :func:`newton_primal`).

    A Newton step forms and factorises the Hessian (O(n p²)); the steps after it reuse that
    factor, with limited-memory BFGS pairs on top (:class:`~deltafit.solvers._chord.Secants`:
    the chord's linear rate made superlinear), at one pass over the rows each (O(n p + p²)),
    while each cuts ‖∇J‖ by at least :data:`CHORD_RATIO`; a step that does not is followed by a
    fresh Hessian, and beyond ``max_iter // 2`` steps every step is a Newton step.  A solve
    that converged with ``‖∇J‖ > POLISH · tol · ‖∇J(0)‖`` takes one Newton step more from
    there, on the Hessian at that point (accepted when it lowers J and ‖∇J‖): like a plain
    Newton solve's last step, it lands far below the threshold.  Every step passes
    Armijo's test on J (a chord step that finds no decrease is replaced by a Newton step).
    Between steps the scores are moved with β (``z + t X Δ``, the line search's own); wherever
    a value is read — the stopping test once it passes, the callback, the result — they are
    computed afresh, ``X β``, so the solve stops on the rule of :func:`_damped_newton` and
    ``grad_norm`` certifies ``‖β − β*‖ ≤ grad_norm`` as there.

    Parameters
    ----------
    coef, objective, gradient, grad_norm0, tol, max_iter, callback
        As in :func:`_damped_newton`.
    scores : callable
        ``scores(v)``: ``X v`` for the rows X.
    hessian : callable
        ``hessian(z) -> (H, factor, d, shared)``: the Hessian at the point of scores ``z``,
        its lower Cholesky factor, the rows' curvature weights (or None) and whether H is
        shared with other solves.
    keep : bool
        Whether the caller keeps the Hessian: when chord steps followed the last Newton step,
        one is formed at the returned β.

    Returns
    -------
    result : SolverResult
    kept : tuple or None
        ``hessian``'s answer for the matrix the last steps used (None: no step taken).
    """

    def fresh(b):
        zb = scores(b)
        gb, _, gbn = gradient(b, zb)
        return zb, objective(b, zb), gb, gbn

    threshold = tol * max(grad_norm0, np.finfo(float).tiny)
    z, f, grad, gnorm = fresh(coef)
    it = 0
    stopped = _check_callback(callback, it, coef, gnorm, f, grad)
    failed = False
    kept = None  # the last Hessian formed
    newton = False  # whether the last step taken was a Newton step
    secants = Secants()
    chord = False
    while gnorm > threshold and not stopped and it < max_iter:
        it += 1
        newton = not chord or kept is None or it > max_iter // 2
        if newton:
            kept = hessian(z)
            secants.clear()
            step = -_Factor(kept[1]).solve(grad)
            slope = float(grad @ step)
        else:
            step, slope = secants.descent(_Factor(kept[1]), grad)
        z_step = scores(step)
        if -slope <= _FLOOR * (abs(f) + 1.0):
            t = 1.0  # the decrease is below the rounding of J: take the step whole
        else:
            t, _ = _armijo(
                lambda t: objective(coef + t * step, z + t * z_step),  # noqa: B023
                f,
                slope,
            )
            if t == 0.0:
                if not newton:  # the chord step found no decrease: a Newton step instead
                    it -= 1
                    chord = False
                    continue
                failed = True
                break  # a genuine failure to decrease
        old_grad, old_norm = grad, gnorm
        coef += t * step
        z += t * z_step  # moved with β; computed afresh below wherever a result is read
        f = objective(coef, z)
        grad, _, gnorm = gradient(coef, z)
        if callback is not None or gnorm <= threshold or it == max_iter:
            z, f, grad, gnorm = fresh(coef)  # the certified values: from the scores X β
        secants.add(t * step, grad - old_grad)
        chord = gnorm <= CHORD_RATIO * old_norm
        stopped = _check_callback(callback, it, coef, gnorm, f, grad)
    if failed:
        z, f, grad, gnorm = fresh(coef)
    converged = gnorm <= threshold
    polish = converged and not stopped and kept is not None and it < max_iter
    if polish and gnorm > POLISH * threshold:
        # just below the threshold: one Newton step more, as a plain Newton solve's last step
        # (its quadratic convergence takes ‖∇J‖ far below it), on the Hessian at β, which
        # the caller keeps
        kept, newton = hessian(z), True  # kept whether the step is taken or not: at β
        step = -_Factor(kept[1]).solve(grad)
        b = coef + step
        zb, fb, gb, gbn = fresh(b)
        if gbn <= gnorm and fb <= f + _FLOOR * (abs(f) + 1.0):
            it += 1
            coef[:], z, f, grad, gnorm = b, zb, fb, gb, gbn
            stopped = _check_callback(callback, it, coef, gnorm, f, grad)
    if not converged and not stopped:
        why = (
            " (the line search found no decrease of J: the rounding level of J and ∇J was reached)"
            if failed
            else f" (max_iter={max_iter} reached)"
        )
        warn_not_converged("Newton", gnorm, threshold, tol, it, why)
    if keep and kept is not None and not newton:
        kept = hessian(z)  # chord steps came last: the matrix kept is the Hessian at β
    return SolverResult(coef, float(gnorm), it, bool(converged), bool(stopped), float(f)), kept


def newton_primal(
    X: np.ndarray | sp.spmatrix,
    y: ArrayLike,
    loss: Loss,
    C: float,
    *,
    sample_weight: ArrayLike | None = None,
    coef0: ArrayLike | None = None,
    tol: float = 1e-10,
    max_iter: int = 100,
    callback: SolverCallback | None = None,
    keep_hessian: bool = False,
    rows: NewtonRows | None = None,
) -> SolverResult | tuple[SolverResult, NewtonCurvature | None]:
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
    rows : NewtonRows, optional
        ``X`` prepared once for several solves over the same dense rows and weights (the
        one-vs-rest classes: :meth:`NewtonRows.of`): they share the columns that are zero in
        every row and the first Hessian when its curvature weights are the same.  ``X`` and
        ``sample_weight`` must be those it was made from.

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
    second derivative of the loss, then an Armijo backtracking line search.  Over dense rows
    of at least :data:`CHORD_FEATURES` features (or with ``rows``) the Hessian is formed by
    one symmetric rank-k update over the columns that are not zero in every row
    (:class:`NewtonRows`), and the steps after a Newton step reuse its factor (chord steps
    with L-BFGS pairs, one pass over the rows each) while they cut ‖∇J‖ by at least
    :data:`CHORD_RATIO` (:func:`_chord_newton`); the stopping rule and the certificate are
    the same.  For the squared hinge the generalised Hessian makes this the finite Newton
    method of Keerthi & DeCoste (2005).  With weights, ``∇J = C Xᵀ (w ∘ ℓ') + β``; J stays
    1-strongly convex, so ``grad_norm`` certifies ``‖β − β*‖ ≤ grad_norm`` for the weighted
    problem too.

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
    n_all = X.shape[0]
    p = X.shape[1]
    w = check_sample_weight(sample_weight, n_all, C)
    keep = _kept(w)
    if rows is None and not sp.issparse(X) and p >= CHORD_FEATURES:
        rows = NewtonRows.of(X, keep)
    elif rows is not None and rows.X.shape[0] != (n_all if keep is None else keep.size):
        raise ValueError("rows: not prepared from these rows and sample weights")
    yv: np.ndarray = np.asarray(y)
    if w is not None and keep is not None:  # weight 0: the sample is absent
        if rows is not None:
            X = rows.X
        else:
            X = X[keep] if sp.issparse(X) else np.asarray(X)[keep]
        w, yv = w[keep], yv[keep]
    elif rows is not None:
        X = rows.X
    n = X.shape[0]
    cw = None if w is None else C * w  # C_i
    check_curvature(squared_norms(X) if rows is None else rows.sq, C if cw is None else cw, loss)
    beta = np.zeros(p) if coef0 is None else np.array(coef0, dtype=np.float64, copy=True)

    def tdot(r):  # Xᵀ r (X read when called: sparse rows are made CSR below)
        return X.T @ r if rows is None else rows.tdot(r)

    if w is None:
        g0 = np.linalg.norm(C * tdot(loss.d1(yv, np.zeros(n))))
    else:
        g0 = np.linalg.norm(tdot(cw * loss.d1(yv, np.zeros(n))))

    def objective(b, z):
        if w is None:
            return C * loss.value(yv, z).sum() + 0.5 * b @ b
        return C * (w @ loss.value(yv, z)) + 0.5 * b @ b

    def gradient(b, z):
        if w is None:
            grad = C * tdot(loss.d1(yv, z)) + b
        else:
            grad = tdot(cw * loss.d1(yv, z)) + b
        return grad, grad, np.linalg.norm(grad)

    sparse = sp.issparse(X)
    if sparse:
        X = sp.csr_matrix(X, dtype=np.float64)
    if rows is not None:  # dense rows: chord steps on the last Hessian, Newton where needed

        def hessian(z):
            d2 = loss.d2(yv, z)
            act = d2 > 0
            every = bool(act.all())
            D = (C if w is None else cw[act]) * d2[act]
            try:
                H, factor, shared = rows.hessian(D, None if every else act)
            except linalg.LinAlgError as exc:
                raise curvature_failure(exc, row_curvature(X if every else X[act], D)) from exc
            d = None
            if keep_hessian:
                d = np.zeros(n)
                d[act] = D
            return H, factor, d, shared

        res, kept = _chord_newton(
            beta,
            rows.dot,
            objective,
            gradient,
            hessian,
            g0,
            tol=tol,
            max_iter=max_iter,
            callback=callback,
            keep=keep_hessian,
        )
        if not keep_hessian:
            return res
        if kept is None:
            return res, None
        H, factor, d, shared = kept
        if shared:  # the first Hessian shared by several solves: the caller gets its own
            H, factor = H.copy(), factor.copy()
        return res, NewtonCurvature(H, d if keep is None else _embed(d, keep, n_all), factor)

    last: list[tuple[np.ndarray, np.ndarray]] = []  # (H, d) of the last Newton step, if asked

    def newton_step(z, grad, _):
        d2 = loss.d2(yv, z)
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
            raise curvature_failure(exc, row_curvature(Xa, D)) from exc
        return -linalg.cho_solve(c, grad, check_finite=False)

    res = _damped_newton(
        beta,
        X,
        objective,
        gradient,
        newton_step,
        g0,
        tol=tol,
        max_iter=max_iter,
        callback=callback,
        what="Newton",
    )
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


def newton_kernel(
    K: np.ndarray,
    y: ArrayLike,
    loss: Loss,
    C: float,
    *,
    sample_weight: ArrayLike | None = None,
    coef0: ArrayLike | None = None,
    tol: float = 1e-10,
    max_iter: int = 100,
    callback: SolverCallback | None = None,
    keep_factor: bool = False,
) -> SolverResult | tuple[SolverResult, tuple[np.ndarray, np.ndarray, np.ndarray] | None]:
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
    w = check_sample_weight(sample_weight, n, C)
    keep = _kept(w)
    yv: np.ndarray = np.asarray(y)
    if w is not None:
        if keep is not None:  # weight 0: the sample is absent
            K, w = np.asarray(K)[np.ix_(keep, keep)], w[keep]
            yv = yv[keep]
            coef0 = _take_start(coef0, keep, n, "coef0")
            n = keep.size
            if callback is not None:
                full_callback = callback

                def callback(it, a, gnorm, f, g):
                    return full_callback(
                        it, _embed(a, keep, n_all), gnorm, f, _embed(g, keep, n_all)
                    )

    cw = C if w is None else C * w  # C_i (elementwise: the unweighted case is unchanged)
    check_curvature(np.diagonal(K), cw, loss, "K", "k(x, x)")
    alpha = np.zeros(n) if coef0 is None else np.array(coef0, dtype=np.float64, copy=True)
    g_zero = cw * loss.d1(yv, np.zeros(n))
    g0 = np.sqrt(max(float(g_zero @ (K @ g_zero)), 0.0))

    def objective(a, z):
        if w is None:
            return C * loss.value(yv, z).sum() + 0.5 * a @ z
        return C * (w @ loss.value(yv, z)) + 0.5 * a @ z

    def gradient(a, z):
        g = cw * loss.d1(yv, z) + a
        Kg = K @ g
        return g, Kg, np.sqrt(max(g @ Kg, 0.0))

    last: list[tuple[np.ndarray, np.ndarray, np.ndarray]] = []  # the last step's factor

    def newton_step(z, g, Kg):
        W = cw * loss.d2(yv, z)
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
                raise curvature_failure(exc, kappa, "the kernel Newton system I + S K S") from exc
            step[act] += s * linalg.cho_solve((L, True), s * Kg[act], check_finite=False)
            if keep_factor:
                last[:] = [(act, s, L)]
        return step

    res = _damped_newton(
        alpha,
        K,
        objective,
        gradient,
        newton_step,
        g0,
        tol=tol,
        max_iter=max_iter,
        callback=callback,
        what="kernel Newton",
    )
    if keep is not None:
        res.coef = _embed(res.coef, keep, n_all)
    if not keep_factor:
        return res
    factor = None
    if last:
        act, s, L = last[0]
        factor = (act if keep is None else keep[act], s, L)
    return res, factor
