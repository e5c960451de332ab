"""Reference solvers and data for the tests, independent of the code under test.

* ``ridge_reference`` / ``kernel_ridge_reference`` / ``logistic_reference``: scikit-learn's
  Ridge, KernelRidge and LogisticRegression(solver="newton-cholesky") on the mapping of
  ARCHITECTURE.md, "The problem" (intercept = a regularised constant column of value s).
* ``squared_hinge_reference``: an exact active-set solver for the L2-SVM primal
  ``C Σ max(0, 1 − y_i x_iᵀβ)² + ½‖β‖²`` (a different algorithm from deltafit's damped Newton):
  starting from LinearSVC's solution, solve the linear system of the current margin-violating set
  in closed form, move to the exact minimiser along the segment (a 1-D piecewise quadratic), and
  repeat until the set is stable; the result satisfies the optimality conditions to rounding.
* ``kernel_features``: an explicit factor F with F Fᵀ = K, so that any kernel model can be
  checked on its training points against a linear reference on F.
* ``hinge_dual_reference``: the L1-SVM dual box QP by scipy's L-BFGS-B plus an exact
  least-squares solve on the sets it shows (see the section at the end).
"""

from __future__ import annotations

import warnings

import numpy as np
from sklearn.exceptions import ConvergenceWarning
from sklearn.kernel_ridge import KernelRidge
from sklearn.linear_model import LogisticRegression, Ridge
from sklearn.svm import LinearSVC


def augment(X, s):
    """[X, s] (the regularised intercept column), or X when s == 0."""
    return X if not s else np.hstack([X, np.full((X.shape[0], 1), float(s))])


def pm1(y, positive):
    return np.where(np.asarray(y) == positive, 1.0, -1.0)


def ridge_reference(X, t, C, s):
    """β of C Σ (t − xβ)² + ½‖β‖² on [X, s] via sklearn Ridge(alpha=1/(2C))."""
    r = Ridge(alpha=1.0 / (2.0 * C), fit_intercept=False, solver="cholesky")
    return r.fit(augment(X, s), t).coef_.ravel()


def kernel_ridge_reference(K_train, t, C):
    """α of (K + ρI) α = t via sklearn KernelRidge(alpha=ρ, kernel="precomputed")."""
    return (
        KernelRidge(alpha=1.0 / (2.0 * C), kernel="precomputed").fit(K_train, t).dual_coef_.ravel()
    )


def logistic_reference(F, t, C):
    """β of C Σ log(1 + exp(−t Fβ)) + ½‖β‖² via LogisticRegression(newton-cholesky)."""
    lr = LogisticRegression(
        C=C, fit_intercept=False, solver="newton-cholesky", tol=1e-14, max_iter=1000
    )
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        lr.fit(F, t)
    return lr.coef_.ravel()


def _sqhinge_objective(F, t, C, b):
    m = np.maximum(0.0, 1.0 - t * (F @ b))
    return C * (m @ m) + 0.5 * b @ b


def squared_hinge_reference(F, t, C, max_rounds=100):
    """Exact minimiser of C Σ max(0, 1 − t_i f_iᵀβ)² + ½‖β‖² (active-set, see module doc)."""
    p = F.shape[1]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        svc = LinearSVC(
            C=C, loss="squared_hinge", fit_intercept=False, dual=True, tol=1e-8, max_iter=100000
        ).fit(F, t)
    beta = svc.coef_.ravel().copy()
    for _ in range(max_rounds):
        act = t * (F @ beta) < 1.0
        Fa, ta = F[act], t[act]
        # closed form on the current active set: (I + 2C FaᵀFa) β = 2C Faᵀ ta
        A = np.eye(p) + 2.0 * C * Fa.T @ Fa
        target = np.linalg.solve(A, 2.0 * C * Fa.T @ ta)
        d = target - beta
        # exact line minimisation of the convex piecewise quadratic along d
        lo, hi = 0.0, 1.0
        for _ in range(200):
            mid = 0.5 * (lo + hi)
            m = np.maximum(0.0, 1.0 - t * (F @ (beta + mid * d)))
            deriv = -2.0 * C * (m * t) @ (F @ d) + (beta + mid * d) @ d
            if deriv < 0:
                lo = mid
            else:
                hi = mid
        step = (
            1.0
            if _sqhinge_objective(F, t, C, target) <= _sqhinge_objective(F, t, C, beta + lo * d)
            else lo
        )
        beta = beta + step * d
        if np.array_equal(t * (F @ beta) < 1.0, act) and step == 1.0:
            break
    m = np.maximum(0.0, 1.0 - t * (F @ beta))
    grad = -2.0 * C * F.T @ (m * t) + beta
    assert np.linalg.norm(grad) <= 1e-8 * max(1.0, np.linalg.norm(2 * C * F.T @ t)), (
        "reference squared-hinge solver did not converge"
    )
    return beta


def kernel_features(K):
    """F with F Fᵀ = K (symmetric square root through an eigendecomposition)."""
    lam, V = np.linalg.eigh(0.5 * (K + K.T))
    lam = np.clip(lam, 0.0, None)
    return V * np.sqrt(lam)


def rel_err(a, b):
    """max |a − b| / max(1, max |b|)."""
    a, b = np.asarray(a, dtype=float), np.asarray(b, dtype=float)
    return float(np.max(np.abs(a - b)) / max(1.0, float(np.max(np.abs(b)))))


# ---------------------------------------------------------------------------------------------
# the exact extremes of a linear score over the intersection of two balls (sensitivity tests)
# ---------------------------------------------------------------------------------------------
def _two_ball_min_one(eta, m1, r1, m2, r2, n_grid):
    """min ⟨η, β⟩ over ‖β − m1‖ ≤ r1, ‖β − m2‖ ≤ r2 for one η, by the Lagrange dual.

    With multipliers μ1, μ2 ≥ 0 and μ = μ1 + μ2 the inner minimiser of the Lagrangian
    ``⟨η, β⟩ + μ1/2 (‖β − m1‖² − r1²) + μ2/2 (‖β − m2‖² − r2²)`` is
    ``β = (μ1 m1 + μ2 m2 − η)/μ``; writing θ = μ1/μ and maximising over μ in closed form leaves
    the one-dimensional dual

        φ(θ) = ⟨η, θ m1 + (1 − θ) m2⟩ − ‖η‖ sqrt(b(θ)),
        b(θ) = θ r1² + (1 − θ) r2² − θ (1 − θ) ‖m1 − m2‖²,          θ ∈ [0, 1],

    maximised here by a grid search followed by a bounded Brent refinement (no case analysis).
    The primal point ``c(θ) − sqrt(b(θ)) η/‖η‖`` at the maximiser is returned as a certificate.
    """
    from scipy.optimize import minimize_scalar

    eta, m1, m2 = (np.asarray(a, dtype=float) for a in (eta, m1, m2))
    e = float(np.linalg.norm(eta))
    if e == 0.0:  # any point of the intersection: on the segment m1 → m2
        D = float(np.linalg.norm(m2 - m1))
        return 0.0, m1 if D <= r2 else m1 + (D - r2) / D * (m2 - m1)
    s1, s2 = float(eta @ m1), float(eta @ m2)
    D2 = float((m1 - m2) @ (m1 - m2))

    def b(th):
        return np.maximum(th * r1 * r1 + (1.0 - th) * r2 * r2 - th * (1.0 - th) * D2, 0.0)

    def phi(th):
        return th * s1 + (1.0 - th) * s2 - e * np.sqrt(b(th))

    grid = np.linspace(0.0, 1.0, n_grid)
    vals = phi(grid)
    k = int(np.argmax(vals))
    best_th, best = float(grid[k]), float(vals[k])
    lo_b, hi_b = grid[max(k - 1, 0)], grid[min(k + 1, n_grid - 1)]
    if hi_b > lo_b:
        res = minimize_scalar(
            lambda th: -phi(th),
            bounds=(lo_b, hi_b),
            method="bounded",
            options={"xatol": 1e-14, "maxiter": 500},
        )
        if -res.fun > best:
            best_th, best = float(res.x), float(-res.fun)
    best = float(best)
    point = best_th * m1 + (1.0 - best_th) * m2 - np.sqrt(b(best_th)) * eta / e
    return best, point


def two_ball_reference(eta, m1, r1, m2, r2, n_grid=2001):
    """Exact ``min`` and ``max`` of ``⟨η_i, β⟩`` over the intersection of the balls (m1, r1) and
    (m2, r2), for each row η_i, by the Lagrange dual (see ``_two_ball_min_one``); independent of
    deltafit's closed form.

    Returns
    -------
    lo, hi : ndarray of shape (k,)
    argmin, argmax : ndarray of shape (k, p)
        Primal points (feasible up to the dual's precision) attaining lo and hi.
    """
    eta = np.atleast_2d(np.asarray(eta, dtype=float))
    lo, hi, pmin, pmax = [], [], [], []
    for row in eta:
        v, p = _two_ball_min_one(row, m1, r1, m2, r2, n_grid)
        w, q = _two_ball_min_one(-row, m1, r1, m2, r2, n_grid)
        lo.append(v)
        hi.append(-w)
        pmin.append(p)
        pmax.append(q)
    return np.array(lo), np.array(hi), np.array(pmin), np.array(pmax)


# ---------------------------------------------------------------------------------------------
# data-change spheres (tests/test_sensitivity_validity.py): loss derivatives, kernels and the
# vector r of Sivan et al. Thm 1 written out from the papers, independent of deltafit
# ---------------------------------------------------------------------------------------------
def loss_d1_reference(loss, y, z):
    """∂ℓ/∂z of the losses of ARCHITECTURE.md, "The problem", written out from their definitions.

    squared (y − z)² → 2(z − y); logistic log(1 + e^{−yz}) → −y / (1 + e^{yz});
    squared_hinge max(0, 1 − yz)² → −2y max(0, 1 − yz).
    """
    y, z = np.asarray(y, dtype=float), np.asarray(z, dtype=float)
    if loss == "squared":
        return 2.0 * (z - y)
    if loss == "logistic":
        with np.errstate(over="ignore"):
            return -y / (1.0 + np.exp(y * z))
    if loss == "squared_hinge":
        return -2.0 * y * np.maximum(0.0, 1.0 - y * z)
    raise ValueError(loss)


def reference_kernel(kernel="rbf", gamma=None, degree=3, coef0=1.0, intercept_scaling=0.0):
    """k(A, B) + s² from scikit-learn's pairwise functions (the regularised intercept feature)."""
    from sklearn.metrics.pairwise import linear_kernel, polynomial_kernel, rbf_kernel

    s2 = float(intercept_scaling) ** 2

    def k(A, B):
        if kernel == "rbf":
            K = rbf_kernel(A, B, gamma=gamma)
        elif kernel == "poly":
            K = polynomial_kernel(A, B, degree=degree, gamma=gamma, coef0=coef0)
        elif kernel == "linear":
            K = linear_kernel(A, B)
        else:
            raise ValueError(kernel)
        return K + s2

    return k


def sivan_tau(
    kfun,
    loss,
    alpha,
    P1,
    t1,
    C1,
    C2,
    *,
    removed=(),
    relabel_idx=(),
    relabel_t=(),
    X_add=None,
    t_add=None,
):
    """Expansion τ over D1 ∪ D2 of r = ½∇P₂(β₁) (Sivan et al. eq. 3 and 6) and its norm.

    β₁ = Σ α_i Φ(p_i) over the model's points P1 with encoded labels t1.  With ρ = C₂/C₁,

        r = ½(1 − ρ) β₁ + (C₂/2) Σ_{i ∈ A ∪ R} (−1)^{[i ∈ R]} ℓ'(y_i, z_i) Φ(x_i),

    z_i = ⟨Φ(x_i), β₁⟩; a relabel is the removal of (x, y_old) plus the addition of (x, y_new).

    Parameters
    ----------
    removed : indices into P1 of removed samples
    relabel_idx, relabel_t : indices into P1 and their new encoded labels
    X_add, t_add : added samples

    Returns
    -------
    tau : ndarray, points : ndarray, r_norm : float
    """
    alpha = np.asarray(alpha, dtype=float)
    rho = C2 / C1
    K11 = kfun(P1, P1)
    z1 = K11 @ alpha
    tau = [0.5 * (1.0 - rho) * alpha]
    pts = [P1]
    removed = np.asarray(removed, dtype=int)
    if removed.size:
        tau.append(-0.5 * C2 * loss_d1_reference(loss, t1[removed], z1[removed]))
        pts.append(P1[removed])
    relabel_idx = np.asarray(relabel_idx, dtype=int)
    if relabel_idx.size:
        zl = z1[relabel_idx]
        tau.append(-0.5 * C2 * loss_d1_reference(loss, t1[relabel_idx], zl))
        tau.append(0.5 * C2 * loss_d1_reference(loss, np.asarray(relabel_t, float), zl))
        pts += [P1[relabel_idx], P1[relabel_idx]]
    if X_add is not None and len(X_add):
        za = kfun(X_add, P1) @ alpha
        tau.append(0.5 * C2 * loss_d1_reference(loss, np.asarray(t_add, float), za))
        pts.append(X_add)
    tau, pts = np.concatenate(tau), np.vstack(pts)
    r2 = float(tau @ kfun(pts, pts) @ tau)
    return tau, pts, float(np.sqrt(max(r2, 0.0)))


# ---------------------------------------------------------------------------------------------
# the hinge loss (approximate leave-one-out tests): an exact solver independent of deltafit's
# ---------------------------------------------------------------------------------------------
def hinge_reference(F, t, C, coef0=None, max_iter=10000):
    """Exact minimiser of ``C Σ max(0, 1 − t_i f_iᵀβ) + ½‖β‖²`` (no free offset).

    The dual ``min ½ αᵀQα − 1ᵀα`` over ``0 ≤ α ≤ C`` with ``Q = (t tᵀ) ∘ (F Fᵀ)`` is solved by the
    textbook primal active-set method for convex QPs (Nocedal & Wright, Alg. 16.3) specialised
    to bounds: the working set holds variables fixed at a bound; each step minimises over the
    free variables (least squares, so a singular Q — duplicate rows, p < n — is fine; a
    direction of the null space is followed to the nearest bound), a ratio test adds the
    blocking bound, and a bound whose multiplier is negative is released.  It ends when the
    KKT conditions hold to 1e-10 relative, which makes the result the exact optimum (a
    convex problem).  Independent of deltafit's solvers; ``LinearSVC(loss="hinge",
    fit_intercept=False)`` agrees to its tolerance (tests/test_alo.py checks that).

    Parameters
    ----------
    coef0 : ndarray of shape (n,), optional
        Expansion coefficients of a nearby solution (e.g. the full model's, for a leave-one-out
        refit): a warm start, clipped to the box.

    Returns
    -------
    beta : ndarray of shape (p,)
    coef : ndarray of shape (n,)
        Expansion coefficients ``β = Fᵀ coef``, ``coef_i = α_i t_i`` with ``0 ≤ α_i ≤ C``.
    """
    F = np.asarray(F, dtype=float)
    n = t.size
    Q = (F @ F.T) * np.outer(t, t)
    a = np.zeros(n) if coef0 is None else np.clip(t * np.asarray(coef0, dtype=float), 0.0, C)
    a[a <= 1e-12 * C] = 0.0
    a[a >= C * (1 - 1e-12)] = C
    fixed = (a == 0.0) | (a == C)
    g = Q @ a - 1.0
    scale = max(1.0, float(np.max(np.abs(np.diagonal(Q)))) * C)
    tol = 1e-10 * scale
    for _ in range(max_iter):
        free = np.flatnonzero(~fixed)
        d = np.zeros(n)
        unbounded = False
        if free.size and np.max(np.abs(g[free])) > tol:
            Qff = Q[np.ix_(free, free)]
            df = -np.linalg.lstsq(Qff, g[free], rcond=1e-12)[0]
            r = g[free] + Qff @ df
            if np.linalg.norm(r) > tol:  # g_F not in the range of Q_FF: a null direction
                df, unbounded = -r, True
            d[free] = df
        if not np.any(d):
            mult = np.where(a == 0.0, g, -g)  # multipliers of the bounds in the working set
            mult[~fixed] = np.inf
            j = int(np.argmin(mult))
            if mult[j] >= -tol:
                coef = t * a
                return F.T @ coef, coef
            fixed[j] = False
            continue
        # ratio test: the largest step ≤ 1 (unbounded: any length) keeping 0 ≤ α ≤ C
        with np.errstate(divide="ignore", invalid="ignore"):
            room = np.where(d < 0, -a / d, np.where(d > 0, (C - a) / d, np.inf))
        j = int(np.argmin(room))
        step = room[j] if unbounded else min(1.0, room[j])
        if not np.isfinite(step):
            raise AssertionError("reference hinge solver: unbounded direction")
        a = np.clip(a + step * d, 0.0, C)
        g = Q @ a - 1.0
        if step < 1.0 or unbounded:
            a[j] = 0.0 if d[j] < 0 else C
            fixed[j] = True
            g = Q @ a - 1.0
    raise AssertionError("reference hinge solver: no convergence")


# ---------------------------------------------------------------------------------------------
# hinge loss (L1-SVM): an independent solver of the dual box QP (tests/test_hinge.py)
#
#     maximise_α  D(α) = Σ α_i − ½ Σ_ij α_i α_j t_i t_j k_ij,   0 ≤ α_i ≤ C,   β = Σ α_i t_i Φ_i
#
# A different algorithm from deltafit's (coordinate descent + proximal active-set Newton):
# scipy's L-BFGS-B with bounds, run to its tightest tolerances, then the decisions of the exact
# optimum from the sets that the L-BFGS-B solution shows (margin < 1: α = C, margin > 1: α = 0,
# margin ≈ 1: free), by a least-squares solve of the free set's equations t_i z_i = 1, checked
# against those sets.
# ---------------------------------------------------------------------------------------------
def hinge_dual_objective(K, t, C, alpha):
    """D(α) = Σα − ½ (α∘t)ᵀ K (α∘t) and the primal J(β) = C Σ max(0, 1 − t z) + ½‖β‖² of
    β = Σ α_i t_i Φ_i, computed directly (no shared code with deltafit)."""
    u = alpha * t
    z = K @ u
    sq = float(u @ z)
    primal = C * float(np.maximum(0.0, 1.0 - t * z).sum()) + 0.5 * sq
    return float(alpha.sum()) - 0.5 * sq, primal


def hinge_kkt_violation(K, t, C, alpha):
    """max_i of the violation of the KKT conditions of the dual (margin units)."""
    g = t * (K @ (alpha * t)) - 1.0  # gradient of the minimised dual
    v = np.abs(g)
    v[(alpha <= 0.0) & (g >= 0.0)] = 0.0
    v[(alpha >= C) & (g <= 0.0)] = 0.0
    return float(v.max())


def hinge_dual_reference(K, t, C, band=1e-5):
    """(α from L-BFGS-B, its dual objective, the expansion coefficients ``u`` of the exact
    optimum β* = Σ u_i Φ_i, and its decisions z = K u on the training points).

    The exact decisions come from the sets of the L-BFGS-B solution: with U = {margin < 1 −
    band}, F = {|margin − 1| ≤ band}, the optimum's β = C Σ_U t_i Φ_i + Σ_F a_i t_i Φ_i with
    t_i z_i = 1 on F, so ``(t_F t_Fᵀ ∘ K_FF) a = 1 − C (t_F t_Uᵀ ∘ K_FU) 1`` (least squares:
    any solution gives the same z).  The sets are asserted to be consistent with the result.
    """
    from scipy.optimize import minimize

    n = t.shape[0]
    Q = K * np.outer(t, t)

    def fun(a):
        Qa = Q @ a
        return 0.5 * a @ Qa - a.sum(), Qa - 1.0

    res = minimize(
        fun,
        np.zeros(n),
        jac=True,
        method="L-BFGS-B",
        bounds=[(0.0, C)] * n,
        options={"maxiter": 100000, "maxfun": 200000, "ftol": 1e-16, "gtol": 1e-13, "maxcor": 50},
    )
    alpha = np.clip(res.x, 0.0, C)
    margin = t * (K @ (alpha * t))
    U = margin < 1.0 - band
    F = np.abs(margin - 1.0) <= band
    a = np.zeros(n)
    a[U] = C
    if F.any():
        rhs = 1.0 - Q[np.ix_(F, U)] @ a[U]
        a[F] = np.linalg.lstsq(Q[np.ix_(F, F)], rhs, rcond=None)[0]
    z = K @ (a * t)
    m = t * z
    assert (
        np.all(m[U] < 1.0 + 1e-8)
        and np.all(m[~(U | F)] > 1.0 - 1e-8)
        and np.allclose(m[F], 1.0, rtol=0, atol=1e-8)
    ), "reference hinge solver: inconsistent sets"
    return alpha, hinge_dual_objective(K, t, C, alpha)[0], a * t, z


# ---------------------------------------------------------------------------
# stream learners (plain Python loops, written from the papers; no numba)
# ---------------------------------------------------------------------------
def pegasos_reference(X, y_pm, lam, radius=np.inf, icpt=1.0, w=None, t=0):
    """Pegasos (Shalev-Shwartz et al. 2011, Alg. 1) on rows in order; returns (w, t).

    ``w`` has the constant feature ``icpt`` last (0 = no intercept)."""
    Xa = np.column_stack([X, np.full(X.shape[0], icpt)])
    w = np.zeros(Xa.shape[1]) if w is None else w.copy()
    for x, yi in zip(Xa, y_pm):
        t += 1
        eta = 1.0 / (lam * t)
        violated = yi * float(w @ x) < 1.0
        w = (1.0 - eta * lam) * w
        if violated:
            w = w + eta * yi * x
        nrm = np.linalg.norm(w)
        if nrm > radius:
            w = w * (radius / nrm)
    return w, t


def lsqsgd_reference(X, y, alpha=None, radius=1.0, icpt=1.0, state=None):
    """Nemirovski et al. (2009) robust SA for 1/2 (<w,x> - y)^2 in a ball, gamma-weighted average
    of the points where the gradients were taken.  ``state`` = (w, avg, t, gamma_sum)."""
    Xa = np.column_stack([X, np.full(X.shape[0], icpt)])
    if state is None:
        state = (np.zeros(Xa.shape[1]), np.zeros(Xa.shape[1]), 0, 0.0)
    w, avg, t, gsum = state
    w, avg = w.copy(), avg.copy()
    for x, yi in zip(Xa, y):
        t += 1
        g = alpha if alpha is not None else 1.0 / np.sqrt(t)
        gsum += g
        avg = avg + (g / gsum) * (w - avg)
        w = w - g * (float(w @ x) - yi) * x
        nrm = np.linalg.norm(w)
        if nrm > radius:
            w = w * (radius / nrm)
    return w, avg, t, gsum
