"""The shared core of the curvature-aware regions: the valid curvature of a loss over a score
interval, the radius of the Newton ball, and the guess-verify-refine schedule of the
exact-interval regions (linear and kernel models).

The theorem these implement is stated in :mod:`deltafit.sensitivity.regions._curvature`
(Theorem 1 of Okumura et al., "Quick sensitivity analysis for incremental data modification and
its application to leave-one-out CV in linear classification problems", generalised to a
curvature matrix H; Sivan et al., "Incremental sensitivity analysis for kernelized models",
Theorem 1): :func:`curvature_range` and :func:`secant_range` give the curvature a score
interval allows, :func:`newton_radius` the second-order ball, and :class:`_ExactSchedule` the
iteration that shrinks the intervals.  Its subclasses are ``_LinearExact``
(:mod:`~deltafit.sensitivity.regions._curvature_linear`) and ``_KernelExact``
(:mod:`~deltafit.sensitivity.regions._curvature_kernel`); this module imports neither.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import numpy as np
from scipy import linalg
from scipy.special import expit

if TYPE_CHECKING:
    from deltafit.losses import Loss

__all__ = [
    "CURVATURE_LOSSES",
    "check_curvature_loss",
    "curvature_range",
    "newton_radius",
    "secant_range",
]

CURVATURE_LOSSES = ("logistic", "squared_hinge")
_GUESS_MARGINS = (0.25, 1.0, 3.0)
_BLOCK_EIG = 150  # largest block of curvature-free samples bounded by its eigenvalue
_RECENTER = 2  # re-centrings of the exact-interval regions at their Newton point
_MAX_REFINE = 8
_REFINE_GAIN = 0.02  # stop refining when the H-radius shrinks by less than this
_SAFE = 1e-10  # relative cushion on computed radii (rounding)


def check_curvature_loss(loss: Loss) -> None:
    """ValueError unless ``loss`` (a :class:`deltafit.losses.Loss`) has curvature to use."""
    if loss.name not in CURVATURE_LOSSES:
        raise ValueError(
            f"the curvature region needs a logistic or squared-hinge loss; loss={loss.name!r} "
            "has no curvature to use (use method='sphere', or 'exact' for the squared loss)"
        )


def _logistic_d2(z):
    return expit(z) * expit(-z)


def curvature_range(
    loss: Loss, t: np.ndarray, A: np.ndarray, B: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    """``(min, max)`` of ``ℓ''(t, ·)`` over the score interval ``[A, B]``.

    Logistic (``ℓ'' = σ(z)σ(−z)``, decreasing in ``|z|``): the minimum at the endpoint farther
    from 0, the maximum ¼ if the interval holds 0, else at the nearer endpoint.  Squared hinge
    (2 where ``t z < 1``, 0 beyond the margin; the kink is a single point): the minimum is 2 if
    the whole interval lies on the active side, the maximum 2 if any of it does.
    """
    if loss.name == "logistic":
        hA, hB = _logistic_d2(A), _logistic_d2(B)
        lo = np.minimum(hA, hB)
        hi = np.where((A <= 0.0) & (B >= 0.0), 0.25, np.maximum(hA, hB))
        return lo, hi
    mA, mB = t * A, t * B
    lo = np.where(np.maximum(mA, mB) <= 1.0, 2.0, 0.0)
    hi = np.where(np.minimum(mA, mB) < 1.0, 2.0, 0.0)
    return lo, hi


def secant_range(
    loss: Loss, t: np.ndarray, z1: np.ndarray, A: np.ndarray, B: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    """Bounds ``(lo, hi)`` of the secant slope ``(ℓ'(t, z₂) − ℓ'(t, z₁)) / (z₂ − z₁)`` over
    ``z₂ ∈ [A, B]`` (the derivative at ``z₁`` where ``z₂ = z₁``).

    Logistic: the slope is the mean of ``h = ℓ'' = σ(z)σ(−z)`` over ``[z₁, z₂]``, i.e.
    ``(σ(z₂) − σ(z₁)) / (z₂ − z₁)``.  As a function of ``z₂`` on either side of ``z₁`` it has
    no interior local minimum (at a critical point the mean equals ``h(z₂)``, and its second
    derivative has the sign of ``h'(z₂)(z₂ − z₁)``; a local minimum would need ``h`` to rise
    towards ``z₂`` on the whole of ``[z₁, z₂]`` — ``h`` is unimodal — and then ``h(z₂)``
    exceeds the mean), so its minimum over ``[A, B]`` is at ``A``, ``B`` or ``z₁``; the
    maximum is bounded by the maximum of ``h`` over the hull.  Squared hinge: in margin units
    ``m = t z`` the slope is ``2 (f(m₁) − f(m₂)) / (m₂ − m₁)`` with ``f(m) = max(0, 1 − m)``
    convex, so it does not increase with ``m₂``: its extremes are at the ends of the margin
    interval.  Rounding is allowed for (``4·10⁻¹⁶ / |z₂ − z₁|``), and near ``z₁`` the
    bounds fall back to the extremes of ``ℓ''`` over the hull.

    Parameters
    ----------
    loss : deltafit.losses.Loss
        Logistic or squared hinge.
    t : ndarray
        Encoded targets in {-1, +1}.
    z1 : ndarray
        The scores the slopes start from.
    A, B : ndarray
        The ends of the interval of ``z₂``.

    Returns
    -------
    lo, hi : ndarray, shaped like ``z1``

    Examples
    --------
    >>> import numpy as np
    >>> from deltafit.losses import Logistic
    >>> from deltafit.sensitivity.regions import secant_range
    >>> loss, t, z1 = Logistic(), np.ones(3), np.array([-1.0, 0.0, 2.0])
    >>> lo, hi = secant_range(loss, t, z1, z1 - 0.5, z1 + 0.5)
    >>> z2 = z1 + 0.3                                      # a point of [A, B]
    >>> slope = (loss.d1(t, z2) - loss.d1(t, z1)) / 0.3
    >>> bool(np.all((lo <= slope) & (slope <= hi)))
    True
    """
    z1 = np.asarray(z1, dtype=np.float64)
    if loss.name == "logistic":
        h1 = _logistic_d2(z1)
        s1 = expit(z1)
        ends = []
        for E in (A, B):
            gap = E - z1
            safe = np.minimum(h1, _logistic_d2(E))  # min of h over [z₁, E] ≤ the mean
            big = np.abs(gap) > 1e-6
            g = np.where(big, gap, 1.0)
            q = (expit(E) - s1) / g - 4e-16 / np.abs(g)
            ends.append(np.where(big, np.maximum(safe, q), safe))
        lo = np.minimum(ends[0], ends[1])
        lo = np.where((A <= z1) & (z1 <= B), np.minimum(lo, h1), lo)
        lo_h, hi_h = np.minimum(A, z1), np.maximum(B, z1)
        hi = np.where(
            (lo_h <= 0.0) & (hi_h >= 0.0), 0.25, np.maximum(_logistic_d2(lo_h), _logistic_d2(hi_h))
        )
        return np.clip(lo, 0.0, 0.25), hi
    m1 = t * z1
    mA, mB = np.minimum(t * A, t * B), np.maximum(t * A, t * B)
    f1 = np.maximum(0.0, 1.0 - m1)

    def slope(m2, lower):
        gap = m2 - m1
        near = np.abs(gap) <= 1e-9 * (1.0 + np.abs(m1))
        g = np.where(near, 1.0, gap)
        q = 2.0 * (f1 - np.maximum(0.0, 1.0 - m2)) / g
        tol = 1e-15 * (2.0 + np.abs(m1) + np.abs(m2)) / np.abs(g)
        q = q - tol if lower else q + tol
        # at (or very near) m₁: the one-sided derivatives, 2 on the active side, 0 beyond
        if lower:
            limit = np.where(m1 < 1.0 - 1e-9, 2.0, 0.0)
        else:
            limit = np.where(m1 <= 1.0 + 1e-9, 2.0, 0.0)
        return np.clip(np.where(near, limit, q), 0.0, 2.0)

    return slope(mB, True), slope(mA, False)


def newton_radius(
    err: np.ndarray,
    w_lo: np.ndarray,
    qh: np.ndarray,
    block_gram: Callable[[np.ndarray], np.ndarray],
) -> float:
    """``ρ₂ ≥ ‖Σ_i e_i s_i Φ_i‖_{H_lo⁻¹}`` for ``|e_i s_i| ≤ err_i`` (the Newton ball).

    A sample with curvature (``w_lo_i = C₂ w'_i c_lo,i > 0``) enters through
    ``Σ w_lo,i Φ_iΦ_iᵀ ⪯ H_lo``: ``‖H_lo^{-½} Σ_P Φ_i v_i‖ ≤ ‖v / sqrt(w_lo)‖``; one without
    (or with little) through the triangle inequality, ``Σ err_i ‖Φ_i‖_{H_lo⁻¹}``, or the
    largest eigenvalue of its block's Gram matrix ``block_gram(idx)`` of ``H_lo^{-½}Φ_i``.
    """
    pos = (err > 0) & (w_lo * qh**2 >= 1.0)
    part = float(np.sqrt(np.sum(err[pos] ** 2 / w_lo[pos])))
    unc = np.flatnonzero((err > 0) & ~pos)
    if unc.size:
        tri = float(err[unc] @ qh[unc])
        if unc.size <= _BLOCK_EIG:
            G = block_gram(unc)
            top = float(
                linalg.eigvalsh(G, subset_by_index=[unc.size - 1] * 2, check_finite=False)[0]
            )
            tri = min(tri, np.sqrt(max(top, 0.0) * (1.0 + 1e-9)) * float(np.linalg.norm(err[unc])))
        part += tri
    return part


class _ExactSchedule:
    """The schedule of the exact-interval regions (linear and kernel): guess and verify, then
    refine.  The constructor takes ``z, t, u`` (scores under β₁, D₂ labels and weights of the
    samples); a subclass gives ``build_ell``, ``ell_iv``, ``newton``, ``ball_iv`` and
    ``recentered``.  A region is held as the intervals ``(A, B)`` it gives for every
    ``z_i(β₂)``."""

    # given by the subclass
    build_ell: Callable[..., Any]
    ell_iv: Callable[..., tuple[np.ndarray, np.ndarray]]
    newton: Callable[..., Any]
    ball_iv: Callable[[], tuple[np.ndarray, np.ndarray]]
    recentered: Callable[..., Any]

    def __init__(
        self,
        *,
        loss: Loss,
        C1: float,
        C2: float,
        eps: float,
        z: np.ndarray,
        t: np.ndarray,
        u: np.ndarray,
        rnorm: float,
    ) -> None:
        """``loss``, ``C₁`` and ``C₂`` of the change, ``eps`` the residual allowance of the
        expansion point, ``z, t, u`` the scores there, D₂ labels and D₂ weights (0: absent
        from D₂) of the samples, ``rnorm = ‖r‖`` of the Theorem 1 ball (radius
        ``‖r‖ + ρ eps``)."""
        self.loss = loss
        self.C1, self.C2 = C1, C2
        self.rho = C2 / C1
        self.eps = eps
        self.z, self.t, self.u = z, t, u
        self.used = u > 0
        self.rnorm = rnorm
        self.R_ball = rnorm + self.rho * eps

    def _region(self, shift, width):
        """The intervals ``z_i + shift_i ± width_i`` (with a rounding cushion)."""
        w = width * (1.0 + _SAFE) + 1e-15 * (np.abs(self.z) + np.abs(shift))
        return self.z + shift - w, self.z + shift + w

    def _hull(self, iv):
        return np.minimum(iv[0], self.z), np.maximum(iv[1], self.z)

    def curvature(self, iv: tuple[np.ndarray, np.ndarray]) -> tuple[np.ndarray, np.ndarray]:
        return secant_range(self.loss, self.t, self.z, iv[0], iv[1])

    @staticmethod
    def _meet(u, v):
        return np.maximum(u[0], v[0]), np.minimum(u[1], v[1])

    def _trial(self, iv, margin):
        """The hull of ``z_i`` and ``iv``, widened by ``margin`` of its deviations."""
        A, B = self._hull(iv)
        top = max(float(np.max(self.z - A, initial=0.0)), float(np.max(B - self.z, initial=0.0)))
        f = 1e-9 * top + 1e-12 * (1.0 + np.abs(self.z))
        return (
            self.z - (1.0 + margin) * (self.z - A) - f,
            self.z + (1.0 + margin) * (B - self.z) + f,
        )

    def _inside(self, new, trial):
        A, B = self._hull(new)
        ok = (A > trial[0]) & (B < trial[1])
        return bool(np.all(ok[self.used]))

    def _size(self, iv):
        return float(np.sum((iv[1] - iv[0])[self.used]))

    def _guess(self, newton):
        """Guess and verify (module docstring): intervals around ``z_i(β₁)`` whose region
        (Newton ball: the homotopy argument; ellipsoid: the argument over K) lies strictly
        inside them.  The verified region's intervals, or None."""
        guess = (self.z, self.z)
        first = True
        for margin in (0.0,) + _GUESS_MARGINS:
            trial = guess if first else self._trial(guess, margin)
            ell = self.build_ell(trial)
            if ell is None:
                return None
            if newton:
                nb = self.newton(trial, ell)
                if nb is None:
                    return None
                new = nb[2]
            else:
                new = self.ell_iv(ell)
            if not first and self._inside(new, trial):
                return new
            guess, first = new, False
        return None

    def _refine(self, valid):
        """Regions from valid intervals (each contains β₂), until they stop shrinking:
        ``((ellipsoid, Newton ball), size, intervals)``."""
        best, best_size = (None, None), np.inf
        last = np.inf
        for _ in range(_MAX_REFINE):
            ell = self.build_ell(valid)
            if ell is None:
                break
            iv = self.ell_iv(ell)
            nb = self.newton(valid, ell)
            if nb is not None:
                iv = self._meet(iv, nb[2])
            iv = self._meet(iv, valid)
            size = self._size(iv)
            if size < best_size:
                best, best_size = (ell, None if nb is None else nb[:2]), size
            valid = iv
            if size > (1.0 - _REFINE_GAIN) * last:
                break
            last = size
        return best, best_size, valid

    def solve(self, recenter: bool = True) -> tuple[Any, tuple[Any, Any]]:
        """``(expansion point, (ellipsoid, Newton ball))`` of the last valid intervals (either
        region may be None); the expansion point is this object or a re-centred copy."""
        valid = self.ball_iv()
        for newton in (True, False):
            got = self._guess(newton)
            if got is not None:
                valid = self._meet(valid, got)
                break
        best, size, valid = self._refine(valid)
        here = self
        # re-centre at the Newton ball's center β̃ (Okumura et al. Thm 6 around β̃, with
        # the exact gradient ∇P₂(β̃)), while that shrinks the intervals
        for _ in range(_RECENTER if recenter else 0):
            if best[1] is None:
                break
            rc = here.recentered(best[1][0])
            start = here._meet(valid, rc.ball_iv())
            b2, s2, v2 = rc._refine(start)
            valid = here._meet(valid, v2)
            if b2[0] is None or s2 >= (1.0 - _REFINE_GAIN) * size:
                break
            here, best, size = rc, b2, s2
        self.final_iv = valid
        return here, best
