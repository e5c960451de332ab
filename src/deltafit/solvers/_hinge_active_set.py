"""The iterations of the hinge dual solve (:func:`hinge_loop`), over any QP of
:mod:`deltafit.solvers._hinge_qp`.

A few coordinate-descent sweeps over the KKT violators (Hsieh et al., ICML 2008), then
proximal-point steps (Rockafellar 1976) each solved by the primal-dual active-set method
(:func:`_prox_step`; Hintermüller, Ito & Kunisch, SIAM J. Optim. 2003), and, once the active
sets repeat, the exact solve of the face (:func:`_polish`).  The solve stops on the KKT
violation: ``tol``, or the rounding floor of the residuals (:func:`_floor`) once the face has
been solved exactly.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from deltafit.solvers._hinge_qp import _EPS, box_violation

__all__ = ["hinge_loop", "active_face"]


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
                # called at once, in this iteration: G_F and Qmul are current
                return float(G_F @ delta + 0.5 * delta @ Qmul(delta))  # noqa: B023

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


def _floor(qp, alpha):
    """The rounding level of the KKT residuals ``G_i = (Qα)_i − 1``: below it tol cannot be
    met."""
    return 16.0 * _EPS * (1.0 + float(np.max(qp.scale(alpha), initial=0.0)))


def _sets(alpha, ub):
    return np.packbits(alpha > 0.0).tobytes() + np.packbits(alpha >= ub).tobytes()


def hinge_loop(
    qp: Any,
    alpha: np.ndarray,
    ub: np.ndarray,
    warm: bool,
    tol: float,
    max_iter: int,
    report: Callable[[int, np.ndarray], bool] | None,
) -> tuple[np.ndarray, int, int, bool, bool, float, bool]:
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
        viol = box_violation(alpha, qp.G, ub)
        vmax = float(np.max(viol, initial=0.0))
        if vmax <= tol or polished:
            # below tol, or at the rounding floor once the face has been solved exactly
            thr = max(tol, _floor(qp, alpha)) if polished else tol
            if vmax <= thr:
                qp.refresh(alpha)  # decide on an exact gradient, not an accumulated one
                viol = box_violation(alpha, qp.G, ub)
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


def active_face(qp, alpha, C, thr, max_steps=12):
    """The primal active-set method on the face of ``alpha`` (a warm start near the solution:
    a small data change's): each step solves the face of the free variables and the KKT
    violators at a bound exactly (``Q_FF d = −G_F``), takes the step as far as the box
    allows (the variables that reach a bound leave the face); the violators enter once the
    face of the free variables has been solved (before, a change's shift of every margin
    through the constant term makes many look violated).

    The dual objective never increases (it is convex along each step, minimal at its end).
    A violator whose step points out of the box at once is held at its bound for that step.
    Gives up (returns ``converged`` False, ``alpha`` at a feasible point no worse than the
    start) on a singular face, a step that moves nothing, a face that comes back (a cycle)
    or after ``max_steps`` face solves;
    the caller then goes on with :func:`hinge_loop`.

    Returns ``(alpha, converged, polished, face_solves)``: ``polished`` whether the last step
    solved the face exactly (the rounding floor then applies to the KKT violation).
    """
    polished = False
    held = np.zeros(alpha.shape[0], dtype=bool)
    seen = set()  # the faces solved: one that comes back is a cycle (hinge_loop takes over)
    steps = 0
    while steps < max_steps:
        viol = box_violation(alpha, qp.G, C)
        vmax = float(np.max(viol, initial=0.0))
        if vmax <= thr or (polished and vmax <= max(thr, _floor(qp, alpha))):
            return alpha, True, polished, steps
        free = (alpha > 0.0) & (alpha < C)
        # the violators enter once the face of the free variables is solved
        F = np.flatnonzero(free | ((viol > thr) & ~held)) if polished else np.flatnonzero(free)
        if F.size == 0:
            if polished:
                break
            polished = True  # no free variable: the violators enter
            continue
        key = F.tobytes()
        if key in seen:
            break
        seen.add(key)
        steps += 1
        qp.touched += F.size
        G_F = qp.G[F]
        d, d_null, Qmul = qp.face_step(F, G_F)
        if np.max(np.abs(d_null), initial=0.0) > 0.5 * thr:
            break  # a singular face: hinge_loop's null-space steps
        aF, CF = alpha[F], C[F]
        with np.errstate(divide="ignore", invalid="ignore"):
            room = np.where(d > 0.0, (CF - aF) / d, np.where(d < 0.0, -aF / d, np.inf))
        t = float(np.min(room, initial=np.inf))
        if t >= 1.0:
            new = np.clip(aF + d, 0.0, CF)
            polished = True
        elif t > 0.0:
            # the better of the step as far as the box allows and the projection of the full
            # step (which drops many variables to their bounds at once), as _polish does
            new = np.clip(aF + t * d, 0.0, CF)
            hit = room <= t
            new[hit] = np.where(d[hit] > 0.0, CF[hit], 0.0)
            proj = np.clip(aF + d, 0.0, CF)
            dn, dp = new - aF, proj - aF
            if G_F @ dp + 0.5 * dp @ Qmul(dp) < G_F @ dn + 0.5 * dn @ Qmul(dn):
                new = proj
            polished = False
        else:
            # a variable at its bound whose step points out of the box: hold the entering ones
            # at their bounds for the next solve (a free one cannot block at once)
            block = F[(room <= 0.0) & ~free[F]]
            if not block.size or np.all(held[block]):
                break
            held[block] = True
            polished = False
            continue
        held[:] = False
        qp.move(F, new - aF)
        alpha[F] = new
    qp.refresh(alpha)
    return alpha, False, polished, steps
