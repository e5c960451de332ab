"""The training problem of a fitted deltafit estimator, seen from cross-validation.

Every fast cross-validation method of this package works on the same object: the fitted model's
features Φ (or kernel matrix K), its encoded targets, its loss, C and solution, and answers three
questions about the model that a refit *without* a set R of samples would give:

* a certified ball around it (:meth:`removal_bounds`): the gradient ball of Okumura et al.
  Thm 6 of the reduced problem, taken at the current solution.  Its center is
  ``β − ∇P_{−R}(β)/2`` and its radius ``‖∇P_{−R}(β)‖/2``; with ``∇P(β) = 0`` this is the
  data-change ball of Okumura Thm 1 / Sivan Thm 1 with ``R`` removed.  The gradient is computed
  exactly from the stored solution, so the ball needs no allowance for the solver's residual.
  The ball is the one of :mod:`deltafit.sensitivity.regions._ball` (the same functions as
  :func:`deltafit.sensitivity.loo_bounds` and :func:`deltafit.sensitivity`, in their
  exact-gradient form);
* the exact refit, warm-started from the current solution (:meth:`refit`);
* the same refit stopped as soon as the ball of Thm 6 around the iterate, intersected with the
  removal ball, decides the signs asked for (Okumura et al. §4, "op2").

It reads the model through its public :class:`~deltafit.models.FittedProblem` view.
"""

from __future__ import annotations

from typing import Any, cast

import numpy as np
from scipy.linalg import cho_factor, cho_solve, lu_factor, lu_solve

from deltafit.sensitivity import two_ball_bounds
from deltafit.sensitivity.regions import (
    CURVATURE_LOSSES,
    KernelSpace,
    LinearSpace,
    center_scores,
    curvature_loo_bounds,
    half_gradient,
    loo_balls,
    removal_intervals,
    sq_radius,
)
from deltafit.solvers import hinge_kernel, hinge_primal, newton_kernel, newton_primal
from deltafit.solvers._chord import (
    REFRESH_RATIO,
    Curvature,
    RowBlock,
    chord_solve,
    fresh_point,
    point_by_slot,
)

__all__ = ["OneVsRestProblem", "TrainingProblem", "problem_of"]

# relative widening of every certified interval: rounding in the O(n) sums behind a bound is
# far below this, and a slightly wider interval only costs an occasional refit
_ROUND = 1e-10
# loo_refits: widest features for a column's own Hessian (O(n p²) to form, O(p³) per step);
# wider problems hand a slowly contracting column to the sequential refit
_OWN_HESSIAN_FEATURES = 128
# loo_refits: values in one (n, batch) array of scores or coefficients (128 MiB)
_BATCH_VALUES = 1 << 24
# hinge: margin beyond 1 above which a sample is certainly not a support vector
_HINGE_MARGIN = 1e-6


def problem_of(
    model: Any, _view: Any = None, _shared: Any = None
) -> TrainingProblem | OneVsRestProblem:
    """The :class:`TrainingProblem` of a deltafit estimator fitted on (X, y) (rows in order),
    read through its :class:`~deltafit.models.FittedProblem`; a :class:`OneVsRestProblem` for
    a model with three or more classes."""
    prob = model.problem_ if _view is None else _view
    if _view is None and prob.n_classes:
        return OneVsRestProblem(model)
    slots = prob.live
    t = np.array(prob.targets[slots])
    w = prob.sample_weights(slots)
    if prob.kernel:
        K = prob.gram(slots) if _shared is None else _shared.K
        out = TrainingProblem(
            None, K, t, prob.loss, prob.C, np.array(prob.alpha[slots]), prob.tol, prob.max_iter, w=w
        )
    else:
        if not prob.keeps_rows:
            raise ValueError(
                "cross-validation needs the model's training rows; fit with keep_data=True"
            )
        Phi = prob.rows[slots] if _shared is None else _shared.Phi
        out = TrainingProblem(
            Phi,
            None,
            t,
            prob.loss,
            prob.C,
            np.array(prob.coef, dtype=float),
            prob.tol,
            prob.max_iter,
            w=w,
        )
    if not prob.loss.smooth:  # hinge: the dual variables of the stored solution
        out.dual = np.array(prob.dual[slots])
    return out


class OneVsRestProblem:
    """The K one-vs-rest :class:`TrainingProblem` s of a model with K ≥ 3 classes, answering
    the questions of cross-validation for the argmax label.

    Class k's problem is the binary problem of ``model.problem_.for_class(k)`` (targets +1 for
    class k, −1 for the others); the features or the kernel matrix are shared.  The model
    trained without R is the K binary models trained without R, so each class's removal ball
    (Okumura et al. Thm 6 / Thm 1; Sivan et al. Thm 1) bounds that class's decision value, and
    the left-out label is decided when the top class's lower bound exceeds every other class's
    upper bound (:func:`deltafit.sensitivity.certain_argmax`).  A refit recomputes exactly only
    the *candidate* classes, those whose upper bound reaches the largest lower bound: every
    other class's value is below that class's, so the argmax of the candidates' exact values is
    the left-out model's label.

    Attributes
    ----------
    probs : list of TrainingProblem
    n_classes : int
    t : ndarray of int, shape (n,)
        Class index of each sample.
    z : ndarray of shape (n, K)
        Decision values of the full model.
    smooth : bool
    """

    def __init__(self, model: Any) -> None:
        whole = model.problem_
        self.n_classes = K = int(whole.n_classes)
        # each class's view is binary: a TrainingProblem
        first = cast(TrainingProblem, problem_of(model, whole.for_class(0)))
        self.probs = [first] + [
            cast(TrainingProblem, problem_of(model, whole.for_class(k), first)) for k in range(1, K)
        ]
        self.t = np.asarray(whole.targets[whole.live]).astype(np.intp)
        self.n = first.n
        self.kernel = first.kernel
        self.smooth = first.smooth
        self.z = np.column_stack([p.z for p in self.probs])

    def margins(self) -> np.ndarray:
        """``z_true − max_{j ≠ true} z_j`` of the full model (negative where it errs)."""
        rows = np.arange(self.n)
        other = self.z.copy()
        other[rows, self.t] = -np.inf
        return self.z[rows, self.t] - other.max(axis=1)

    def _stack(self, name, *args):
        got = [getattr(p, name)(*args) for p in self.probs]
        return np.column_stack([lo for lo, _ in got]), np.column_stack([hi for _, hi in got])

    def loo_bounds(self) -> tuple[np.ndarray, np.ndarray]:
        """Per-class bounds of every leave-one-out decision value, shape (n, K)."""
        return self._stack("loo_bounds")

    def removal_bounds(self, R: np.ndarray, T: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Per-class bounds at T of the model trained without R, shape (len(T), K)."""
        return self._stack("removal_bounds", R, T)

    def newton_step_bounds(self, ts: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Per-class one-Newton-step bounds (:meth:`TrainingProblem.newton_step_bounds`)."""
        return self._stack("newton_step_bounds", ts)

    def refit(
        self, R: np.ndarray, T: np.ndarray, *, early: bool = False
    ) -> tuple[np.ndarray, np.ndarray, int, bool]:
        """Exact decision values at T of the candidate classes of the model trained without R.

        Returns ``(lo, hi, n_iter, False)`` with lo, hi of shape (len(T), K): equal (exact) for
        the candidate classes, the removal ball's bounds for the others.  ``early`` is not used:
        op2's stopping rule certifies signs, and the argmax needs values.
        """
        # the candidates from the balls alone: a class refit (warm, a few Newton steps) costs
        # less than a curvature-aware region (a p-dimensional schedule over all n rows), which
        # on unscaled features took ~50x a class refit (raw digits: 145 vs 3 ms)
        lo, hi = self._stack("removal_bounds", R, T, False)
        cand = hi >= lo.max(axis=1, keepdims=True)
        n_iter = 0
        for k in np.flatnonzero(cand.any(axis=0)):
            z, _, it, _ = self.probs[k].refit(R, T, early=False)
            n_iter += it
            sel = cand[:, k]
            lo[sel, k] = hi[sel, k] = z[sel]
        return lo, hi, n_iter, False


class TrainingProblem:
    """``C Σ w_i ℓ(t_i, ⟨Φ_i, β⟩) + ½‖β‖²`` with its solution, explicit (``Phi``) or kernel (``K``).

    Parameters
    ----------
    Phi : ndarray of shape (n, p) or None
        Feature rows (intercept column included).
    K : ndarray of shape (n, n) or None
        Kernel matrix (intercept term included); exactly one of ``Phi`` and ``K`` is given.
    t : ndarray of shape (n,)
        Encoded targets (±1 for classification).
    loss : deltafit.losses.Loss
    C : float
    coef : ndarray
        β (shape (p,)) or α (shape (n,)).
    tol, max_iter :
        The refits' solver settings (the estimator's).
    w : ndarray of shape (n,) or None
        Sample weights (None: all 1).  Every per-sample coefficient ``C ℓ'`` / ``C ℓ''`` of
        the balls and of the Newton steps is ``C w_i ℓ'`` / ``C w_i ℓ''``; leaving sample t
        out removes its weighted term, and every refit keeps the other samples' weights.

    Attributes
    ----------
    wd1 : ndarray of shape (n,)
        ``w_i ℓ'(t_i, z_i)``: each sample's coefficient in the data term's gradient.
    """

    #: the screening region (``evaluate(..., region=...)`` sets it, "auto" resolved): "sphere",
    #: the published balls; "curvature", the curvature-aware regions of
    #: deltafit.sensitivity.regions._curvature for the logistic and squared-hinge losses,
    #: intersected
    #: with the balls; "auto" (a problem used on its own), curvature for leave-one-out (one
    #: factorisation pair for all n) and the balls for removals (the region of a fold costs a
    #: few O(n³) / O(n p²) factorisations and rarely decides a whole fold)
    region = "auto"

    def __init__(
        self,
        Phi: Any,
        K: Any,
        t: np.ndarray,
        loss: Any,
        C: float,
        coef: np.ndarray,
        tol: float,
        max_iter: int,
        w: np.ndarray | None = None,
    ) -> None:
        self.Phi, self.K, self.t, self.loss, self.C = Phi, K, t, loss, float(C)
        self.coef, self.tol, self.max_iter = coef, tol, max_iter
        self.kernel = K is not None
        self.smooth = bool(getattr(loss, "smooth", True))
        self.dual: np.ndarray | None = None  # hinge: the dual variables of the stored solution
        self.n = t.shape[0]
        if self.kernel:
            self.z = K @ coef
            self.sq = np.diag(K).copy()
        else:
            self.z = Phi @ coef
            self.sq = np.einsum("ij,ij->i", Phi, Phi)
        self.d1 = loss.d1(t, self.z)
        self.w = None if w is None else np.asarray(w, dtype=np.float64)
        self.wd1 = self.d1 if self.w is None else self.w * self.d1
        if not self.smooth:
            return  # no gradient ball for the hinge: see loo_bounds / removal_bounds
        # exact gradient of the full problem at the stored solution (its solver residual)
        if self.kernel:
            self.g = coef + self.C * self.wd1  # coefficients: ∇P = Σ g_i Φ_i
            self.Kg = K @ self.g
            self.gg = float(self.g @ self.Kg)
        else:
            self.g = coef + self.C * (Phi.T @ self.wd1)
            self.gg = float(self.g @ self.g)

    # ------------------------------------------------------------- screening
    def margins(self) -> np.ndarray:
        """``t_i z_i`` of the full model (classification)."""
        return self.t * self.z

    def loo_bounds(self) -> tuple[np.ndarray, np.ndarray]:
        """Certified bounds of every leave-one-out score ``⟨Φ_t, β_{−t}⟩`` at once.

        With ``g`` the exact gradient of the full problem at the stored solution and
        ``g_t = g − C w_t ℓ'_t Φ_t`` that of the problem without t (write ℓ'_t for w_t ℓ'_t
        below), the ball is
        ``(β − g_t/2, ‖g_t‖/2)``; its score at Φ_t needs only ``⟨Φ_t, g⟩``, ℓ'_t and ``‖Φ_t‖²``:

            center  z_t − ⟨Φ_t, g⟩/2 + C ℓ'_t ‖Φ_t‖²/2
            ‖g_t‖²  ‖g‖² − 2 C ℓ'_t ⟨Φ_t, g⟩ + C² ℓ'_t² ‖Φ_t‖²

        (Okumura et al. Cor. 5, Sivan et al. §4.2, with the exact residual instead of an
        allowance): :func:`deltafit.sensitivity.regions._ball.loo_balls` in its exact-gradient form.
        O(n) after one product with the gradient.
        """
        if not self.smooth:
            return self._hinge_bounds(np.arange(self.n), None)
        pg = self.Kg if self.kernel else self.Phi @ self.g
        center, r_norm = loo_balls(
            self.z, self.wd1, self.sq, C1=self.C, C2=self.C, phi_grad=pg, grad_sq=self.gg
        )
        lo, hi = _widen(center, np.sqrt(np.maximum(self.sq, 0.0)) * r_norm)
        if self._curved(lo, hi):
            space = KernelSpace(self.K) if self.kernel else LinearSpace(self.Phi)
            w = np.ones(self.n) if self.w is None else self.w
            clo, chi = curvature_loo_bounds(
                space,
                self.z,
                self.t,
                w,
                -self.wd1,
                self.C,
                float(np.sqrt(max(self.gg, 0.0))),
                self.loss,
            )
            lo, hi = np.fmax(lo, clo), np.fmin(hi, chi)
        return lo, hi

    def _curved(self, lo, hi, folds=False):
        """Whether the curvature-aware region is to be tried: its losses, the region setting,
        and some label the balls leave undecided."""
        wanted = self.region == "curvature" or (self.region == "auto" and not folds)
        return (
            wanted and self.loss.name in CURVATURE_LOSSES and not np.all((lo > 0.0) | (hi <= 0.0))
        )

    def _hinge_bounds(self, T, R):
        """Hinge loss: removing samples that are not support vectors changes nothing.

        A sample with margin ``t_i z_i > 1`` has dual variable 0 at the optimum, and the
        optimum stays optimal without it (Vapnik's observation behind the SVM LOO shortcut).
        The margin must exceed 1 by ``_HINGE_MARGIN`` (the solver stops at a KKT violation of
        ~1e-10 in margin units).  Such removals leave every score exact; any other removal is
        left undecided (infinite bounds) and refit.
        """
        safe = self.t * self.z > 1.0 + _HINGE_MARGIN
        if self.w is not None:  # a sample of weight 0 is not in the problem
            safe |= self.w == 0.0
        if R is None:  # leave-one-out: R = {t} for each t in T
            ok = safe[T]
        else:
            ok = np.full(len(T), bool(np.all(safe[R])))
        z = self.z[T]
        return np.where(ok, z, -np.inf), np.where(ok, z, np.inf)

    def _removal(self, R, T):
        """Center scores at T and radius of the ball around the model trained without R.

        Removing R gives ``Δg = Σ_R γ_i Φ_i`` with ``γ_i = −w_i ℓ'_i``; the ball of the reduced
        problem at the stored solution, with its exact gradient ``g + C Δg``, is
        :mod:`deltafit.sensitivity.regions._ball` in its exact-gradient form (Okumura et al. Thm 6).
        Costs O(|R|² + |T| |R|) kernel values or O((|R| + |T|) p).
        """
        gam = -self.wd1[R]
        if self.kernel:
            K = self.K
            phi_dg = K[np.ix_(T, R)] @ gam
            dg_sq = float(gam @ K[np.ix_(R, R)] @ gam)
            grad_dg = float(self.Kg[R] @ gam)
            phi_grad = self.Kg[T]
        else:
            dg = self.Phi[R].T @ gam
            PT = self.Phi[T]
            phi_dg, phi_grad = PT @ dg, PT @ self.g
            dg_sq, grad_dg = float(dg @ dg), float(self.g @ dg)
        C = self.C
        center = center_scores(self.z[T], phi_dg, C1=C, C2=C, phi_grad=phi_grad)
        r2 = sq_radius(dg_sq, C1=C, C2=C, grad_sq=self.gg, grad_dg=grad_dg)
        return center, float(np.sqrt(max(r2, 0.0)))

    def _removal_center(self, R):
        """``β − r``, the center of :meth:`_removal`'s ball as a vector (explicit features) or
        as coefficients over the n samples (kernel)."""
        gam = -self.wd1[R]
        if self.kernel:
            dg = np.zeros(self.n)
            dg[R] = gam
        else:
            dg = self.Phi[R].T @ gam
        return self.coef - half_gradient(self.coef, dg, C1=self.C, C2=self.C, grad=self.g)

    def removal_bounds(
        self, R: np.ndarray, T: np.ndarray, curvature: bool = True
    ) -> tuple[np.ndarray, np.ndarray]:
        """Certified bounds of the scores at samples T of the model trained without samples R.

        Parameters
        ----------
        R, T : ndarray of int
            Indices (into the training rows) removed, and evaluated.
        curvature : bool, default=True
            Whether the curvature-aware region may tighten the ball (as the region setting
            says); ``False``: the ball alone.

        Returns
        -------
        lo, hi : ndarray of shape (len(T),)
        """
        if not self.smooth:
            return self._hinge_bounds(T, R)
        s, r = self._removal(R, T)
        lo, hi = _widen(s, np.sqrt(np.maximum(self.sq[T], 0.0)) * r)
        if curvature and self._curved(lo, hi, folds=True):
            # the region of the problem without R, from its exact gradient g + C Δg
            u = np.ones(self.n) if self.w is None else self.w.copy()
            u[R] = 0.0
            gam = -self.wd1[R]
            if self.kernel:
                grad = self.g.copy()
                grad[R] += self.C * gam
            else:
                grad = self.g + self.C * (self.Phi[R].T @ gam)
            A, B = removal_intervals(
                self.z, self.t, u, self.coef, grad, self.C, self.loss, Phi=self.Phi, K=self.K
            )
            lo, hi = np.maximum(lo, A[T]), np.minimum(hi, B[T])
        return lo, hi

    def newton_step_bounds(self, ts: np.ndarray, batch: int = 256) -> tuple[np.ndarray, np.ndarray]:
        """Certified bounds of the leave-one-out scores at ``ts`` from one Newton step each.

        For each t, one Newton step of the problem without t is taken from the full solution,
        with the full model's Hessian downdated by t's term (Sherman–Morrison, so all steps
        share one factorization), and the **exact** gradient of the problem without t is
        evaluated at the new point β¹; the ball ``(β¹ − ∇/2, ‖∇‖/2)`` of Okumura et al. Thm 6
        then contains the left-out solution.  The step is only a good guess; the certificate
        comes from the gradient, whatever the step.  This is the first iterate of op2's refit
        (Okumura §4), at O(n p) (explicit features) or O(n²) (kernel) per sample.

        Parameters
        ----------
        ts : ndarray of int
        batch : int
            Samples per block of matrix products.

        Returns
        -------
        lo, hi : ndarray of shape (len(ts),)
        """
        ts = np.asarray(ts, dtype=np.intp)
        lo = np.empty(ts.shape[0])
        hi = np.empty_like(lo)
        if ts.size == 0:
            return lo, hi
        C, t, sw = self.C, self.t, self.w
        d2 = self.loss.d2(t, self.z)
        if sw is not None:
            d2 = sw * d2
        cd1 = C * self.wd1
        if self.kernel:
            K = self.K
            # (I + C D K): Δα = −M⁻¹ γ; only the columns of M⁻¹ at the samples are needed
            lu = lu_factor(np.eye(self.n) + (C * d2)[:, None] * K, check_finite=False)
            Mg = lu_solve(lu, self.g, check_finite=False)
        else:
            Phi = self.Phi
            cf = self._hessian_factor()[0]
            Hg = cho_solve(cf, self.g, check_finite=False)
            W = cho_solve(cf, Phi[ts].T, check_finite=False)  # H⁻¹ Φ_t, one column per t
        for a in range(0, ts.shape[0], batch):
            tb = ts[a : a + batch]
            cols = np.arange(tb.shape[0])
            w = C * d2[tb]
            if self.kernel:
                # γ_t = g − C ℓ'_t e_t; M_t = M − (C d2_t) e_t K_t·
                E = np.zeros((self.n, tb.shape[0]))
                E[tb, cols] = 1.0
                U = lu_solve(lu, E, check_finite=False)  # M⁻¹ e_t
                x0 = Mg[:, None] - U * cd1[tb]
                vx = np.einsum("ij,ji->i", K[tb], x0)
                vu = np.einsum("ij,ji->i", K[tb], U)
                X = x0 + U * (w * vx / np.maximum(1.0 - w * vu, 1e-300))
                A1 = self.coef[:, None] - X  # α¹, one column per t
                Z = K @ A1
                L = self.loss.d1(t[:, None], Z)
                G = A1 + C * (L if sw is None else sw[:, None] * L)
                G[tb, cols] = A1[tb, cols]  # t's loss is gone
                KG = K @ G
                gnorm = np.sqrt(np.maximum(np.einsum("ij,ij->j", G, KG), 0.0))
                center = Z[tb, cols] - 0.5 * KG[tb, cols]
            else:
                Wb = W[:, a : a + tb.shape[0]]
                Pt = Phi[tb]
                x0 = Hg[:, None] - Wb * cd1[tb]
                h = np.einsum("ij,ji->i", Pt, Wb)
                bx = np.einsum("ij,ji->i", Pt, x0)
                X = x0 + Wb * (w * bx / np.maximum(1.0 - w * h, 1e-300))
                B1 = self.coef[:, None] - X  # β¹, one column per t
                Z = Phi @ B1
                L = self.loss.d1(t[:, None], Z)
                if sw is not None:
                    L *= sw[:, None]
                L[tb, cols] = 0.0  # t's loss is gone
                G = B1 + C * (Phi.T @ L)
                gnorm = np.sqrt(np.einsum("ij,ij->j", G, G))
                center = Z[tb, cols] - 0.5 * np.einsum("ij,ji->i", Pt, G)
            half = 0.5 * gnorm * np.sqrt(np.maximum(self.sq[tb], 0.0))
            lo[a : a + tb.shape[0]], hi[a : a + tb.shape[0]] = _widen(center, half)
        return lo, hi

    def _hessian_factor(self):
        """Cholesky factor of the full problem's Hessian ``I + C Φᵀ diag(w ℓ'') Φ`` at the
        stored solution (explicit features), and the curvature weights ``C w ℓ''``; computed
        once, shared by :meth:`newton_step_bounds` and :meth:`loo_refits`."""
        if getattr(self, "_hess", None) is None:
            d2 = self.loss.d2(self.t, self.z)
            cd2 = self.C * (d2 if self.w is None else self.w * d2)
            Phi = self.Phi
            self._hess = (
                cho_factor(np.eye(Phi.shape[1]) + (Phi.T * cd2) @ Phi, check_finite=False),
                cd2,
            )
        return self._hess

    def loo_refits(
        self,
        ts: np.ndarray,
        *,
        early: bool = False,
        lo: np.ndarray | None = None,
        hi: np.ndarray | None = None,
        batch: int = 256,
    ) -> tuple[Any, ...]:
        """Exact leave-one-out refits of the samples ``ts``, all at once (explicit features,
        smooth losses).

        Sample t's refit minimises ``J_{−t}(β) = J(β) − C w_t ℓ(t_t, ⟨Φ_t, β⟩)`` from the stored
        solution by chord steps ``β ← β − H_t⁻¹ ∇J_{−t}(β)`` with ``H_t`` the exact Hessian of
        ``J_{−t}`` at the stored solution, the full Hessian downdated by t's term
        (Sherman–Morrison on one shared Cholesky factor: the first step is op2's Newton step,
        :meth:`newton_step_bounds`); the iterates of all samples are the columns of one
        matrix, so each step is two matrix products over the rows.  A column stops on the rule
        of :func:`~deltafit.solvers.newton_primal`, ``‖∇J_{−t}(β)‖ ≤ tol · ‖∇J_{−t}(0)‖``, with
        the gradient computed from scores ``Φ β`` computed afresh at every step (never
        accumulated); with ``early`` also as soon as the gradient ball of Okumura et al.
        Thm 6 around the iterate, intersected with the interval ``[lo, hi]`` already
        certified for the sample (the leave-one-out ball's, refined by the curvature region
        and the first Newton step), decides the sign (Okumura §4, op2).  A step is taken when
        it halves ‖∇J_{−t}‖ or passes
        Armijo's test; a column whose step does neither, or whose chord steps contract
        ‖∇J_{−t}‖ by less than :data:`~deltafit.solvers._chord.REFRESH_RATIO`, is
        handed back (``failed``) for a sequential refit (:meth:`refit`).

        Parameters
        ----------
        ts : ndarray of int
        early : bool
        lo, hi : ndarray of shape (len(ts),), optional
            Certified bounds already known (the screening's); needed with ``early``.
        batch : int
            Samples per block of matrix products (fewer when n × batch values would pass
            ``_BATCH_VALUES``).

        Returns
        -------
        lo, hi : ndarray of shape (len(ts),)
            Equal (the exact left-out scores) for the columns run to convergence.
        n_iter : ndarray of int, shape (len(ts),)
        stopped : ndarray of bool
            Stopped early (a certified sign, no exact value).
        failed : ndarray of bool
            Not solved here: refit them with :meth:`refit`.
        """
        ts = np.asarray(ts, dtype=np.intp)
        m = ts.shape[0]
        out_lo, out_hi = np.full(m, -np.inf), np.full(m, np.inf)
        n_iter = np.zeros(m, dtype=np.intp)
        stopped = np.zeros(m, dtype=bool)
        failed = np.zeros(m, dtype=bool)
        if m == 0:
            return out_lo, out_hi, n_iter, stopped, failed
        if self.kernel or not self.smooth:
            raise ValueError("loo_refits solves explicit-feature smooth problems")
        cf, cd2 = self._hessian_factor()
        Phi, t, C, loss = self.Phi, self.t, self.C, self.loss
        cw = C * (np.ones(self.n) if self.w is None else self.w)
        g_zero = Phi.T @ (cw * loss.d1(t, np.zeros(self.n)))  # ∇J(0), all samples
        c0 = cw * loss.d1(t, np.zeros(self.n))
        e_all = np.sqrt(np.maximum(self.sq, 0.0))
        tiny = np.finfo(float).tiny
        p = Phi.shape[1]
        refresh_ok = p <= _OWN_HESSIAN_FEATURES
        batch = max(1, min(int(batch), _BATCH_VALUES // max(self.n, 1)))  # n × batch arrays
        for a in range(0, m, batch):
            sl = slice(a, min(m, a + batch))
            tb = ts[sl]
            k = tb.shape[0]
            Pt = Phi[tb]  # (k, p)
            W = cho_solve(cf, Pt.T, check_finite=False)  # H⁻¹ Φ_t
            ct = cd2[tb]
            den = np.maximum(1.0 - ct * np.einsum("ij,ji->i", Pt, W), 1e-300)
            thr = self.tol * np.maximum(
                np.linalg.norm(g_zero[:, None] - Pt.T * c0[tb], axis=0), tiny
            )
            grad = self.g[:, None] - Pt.T * (C * self.wd1[tb])  # ∇J_{−t} at the solution
            B = np.repeat(self.coef[:, None], k, axis=1)
            Z = np.repeat(self.z[:, None], k, axis=1)
            et = e_all[tb]
            blo = np.full(k, -np.inf) if lo is None else np.asarray(lo[sl], dtype=float)
            bhi = np.full(k, np.inf) if hi is None else np.asarray(hi[sl], dtype=float)
            live = np.ones(k, dtype=bool)
            own = np.zeros(k, dtype=bool)
            Hown: Any = None  # the columns' own Hessians, once one needs it
            gnorm = np.linalg.norm(grad, axis=0)
            for it in range(max(int(self.max_iter), 1) + 1):
                done = live & (gnorm <= thr)
                if done.any():
                    j = np.flatnonzero(done)
                    zt = Z[tb[j], j]
                    out_lo[a + j] = zt
                    out_hi[a + j] = zt
                    live[j] = False
                if early and it > 0 and live.any():
                    j = np.flatnonzero(live)
                    s2 = Z[tb[j], j] - 0.5 * np.einsum("ij,ji->i", Pt[j], grad[:, j])
                    l2, h2 = _widen(s2, 0.5 * gnorm[j] * et[j])
                    l2, h2 = np.fmax(l2, blo[j]), np.fmin(h2, bhi[j])
                    dec = (l2 > 0.0) | (h2 <= 0.0)
                    if dec.any():
                        jd = j[dec]
                        out_lo[a + jd], out_hi[a + jd] = l2[dec], h2[dec]
                        stopped[a + jd] = True
                        live[jd] = False
                if not live.any():
                    break
                if it == self.max_iter:
                    failed[a + np.flatnonzero(live)] = True
                    break
                j = np.flatnonzero(live)
                # the chord step −H_t⁻¹ ∇J_{−t} (Sherman–Morrison on the shared factor), or
                # with the column's own Hessian once it has one
                Gj = grad[:, j]
                Y = cho_solve(cf, Gj, check_finite=False)
                Y += W[:, j] * (ct[j] * np.einsum("ij,ji->i", Pt[j], Y) / den[j])
                mine = own[j]
                if mine.any():
                    Y[:, mine] = np.linalg.solve(Hown[j[mine]], Gj[:, mine].T[..., None])[..., 0].T
                step = -Y
                slope = np.einsum("ij,ij->j", Gj, step)
                Bn = B[:, j] + step
                Zn = Phi @ Bn  # afresh
                L = cw[:, None] * loss.d1(t[:, None], Zn)
                L[tb[j], np.arange(j.size)] = 0.0  # t's loss is gone
                Gn = Bn + Phi.T @ L
                gn = np.linalg.norm(Gn, axis=0)
                ok = gn <= 0.5 * gnorm[j]
                if not ok.all():  # Armijo on J_{−t}, from the scores
                    q = np.flatnonzero(~ok)
                    fq = self._loo_objective(B[:, j[q]], Z[:, j[q]], tb[j[q]], cw)
                    fn = self._loo_objective(Bn[:, q], Zn[:, q], tb[j[q]], cw)
                    ok[q] = (fn <= fq + 1e-4 * slope[q]) | (-slope[q] <= 1e-12 * (np.abs(fq) + 1.0))
                    r = q[~ok[q]]
                    if r.size:  # backtrack (Armijo), then recompute at the point taken
                        self._backtrack(
                            r, j, B, Z, Bn, Zn, Gn, gn, step, slope, fq[~ok[q]], tb, cw, ok
                        )
                slow = ok & (gn > REFRESH_RATIO * gnorm[j]) & (gn > thr[j])
                bad = ~ok if refresh_ok else ~ok | slow
                if refresh_ok and slow.any():
                    # a slow contraction: the column's exact Hessian at the new point, as
                    # chord_solve refreshes M (O(n p²) per column)
                    q = np.flatnonzero(slow)
                    D = cw[:, None] * loss.d2(t[:, None], Zn[:, q])
                    D[tb[j[q]], np.arange(q.size)] = 0.0
                    H = np.matmul(Phi.T[None] * D.T[:, None, :], Phi)
                    H[:, np.arange(p), np.arange(p)] += 1.0
                    if Hown is None:
                        Hown = np.empty((k, p, p))
                    Hown[j[q]] = H
                    own[j[q]] = True
                if bad.any():
                    failed[a + j[bad]] = True
                    live[j[bad]] = False
                    n_iter[a + j[bad]] += 1
                keepj = ~bad
                jk = j[keepj]
                B[:, jk], Z[:, jk], grad[:, jk] = Bn[:, keepj], Zn[:, keepj], Gn[:, keepj]
                gnorm[jk] = gn[keepj]
                n_iter[a + jk] += 1
        return out_lo, out_hi, n_iter, stopped, failed

    def _backtrack(self, r, j, B, Z, Bn, Zn, Gn, gn, step, slope, f0, tb, cw, ok):
        """Armijo backtracking ``t ∈ {½, ¼, …}`` for the columns ``r`` (of the live columns
        ``j``) whose full step failed; the point taken gets scores and gradient computed
        afresh, written into ``Bn``, ``Zn``, ``Gn``, ``gn``, and ``ok`` set for it."""
        jr = j[r]
        S, Zs = step[:, r], Zn[:, r] - Z[:, jr]
        tt = np.ones(r.size)
        found = np.zeros(r.size, dtype=bool)
        for _ in range(40):
            tt[~found] *= 0.5
            ft = self._loo_objective(B[:, jr] + tt * S, Z[:, jr] + tt * Zs, tb[jr], cw)
            found |= ft <= f0 + 1e-4 * tt * slope[r]
            if found.all():
                break
        if not found.any():
            return
        rf = r[found]
        Bn[:, rf] = B[:, j[rf]] + tt[found] * S[:, found]
        Zn[:, rf] = self.Phi @ Bn[:, rf]  # afresh
        L = cw[:, None] * self.loss.d1(self.t[:, None], Zn[:, rf])
        L[tb[j[rf]], np.arange(rf.size)] = 0.0
        Gn[:, rf] = Bn[:, rf] + self.Phi.T @ L
        gn[rf] = np.linalg.norm(Gn[:, rf], axis=0)
        ok[rf] = True

    def _loo_objective(self, B, Z, ts, cw):
        """``J_{−t}`` of each column (β_j, its scores Z_j) without its sample ``ts[j]``."""
        V = cw[:, None] * self.loss.value(self.t[:, None], Z)
        V[ts, np.arange(ts.shape[0])] = 0.0
        return V.sum(axis=0) + 0.5 * np.einsum("ij,ij->j", B, B)

    # ---------------------------------------------------------------- refits
    def refit(
        self, R: np.ndarray, T: np.ndarray, *, early: bool = False
    ) -> tuple[np.ndarray, np.ndarray, int, bool]:
        """Scores at T of the model trained without R, warm-started from the full solution.

        Parameters
        ----------
        R, T : ndarray of int
        early : bool
            Stop the solver once the signs of all scores at T are certified by the intersection
            of the gradient ball around the iterate (Okumura Thm 6) with the removal ball.

        Returns
        -------
        lo, hi : ndarray of shape (len(T),)
            Equal (the exact scores, to the solver's tolerance) unless stopped early.
        n_iter : int
        stopped_early : bool
        """
        mask = np.ones(self.n, dtype=bool)
        mask[R] = False
        keep = np.flatnonzero(mask)
        cb = None
        box: dict[str, np.ndarray] = {}
        if not self.smooth:
            return self._hinge_refit(keep, T)
        if early:
            cb = self._early_callback(R, T, keep, box)
        sw = None if self.w is None else self.w[keep]
        res: Any
        if self.kernel:
            res = newton_kernel(
                self.K[np.ix_(keep, keep)],
                self.t[keep],
                self.loss,
                self.C,
                sample_weight=sw,
                coef0=self.coef[keep],
                tol=self.tol,
                max_iter=self.max_iter,
                callback=cb,
            )
            z = self.K[np.ix_(T, keep)] @ res.coef
        else:
            res = self._chord_refit(R, cb)
            if res is None:  # the chord steps stalled: Newton, as a fit
                res = newton_primal(
                    self.Phi[keep],
                    self.t[keep],
                    self.loss,
                    self.C,
                    sample_weight=sw,
                    coef0=self.coef,
                    tol=self.tol,
                    max_iter=self.max_iter,
                    callback=cb,
                )
            z = self.Phi[T] @ res.coef
        if res.stopped_by_callback:
            return box["lo"], box["hi"], res.n_iter, True
        return z, z.copy(), res.n_iter, False

    def _chord_refit(self, R, cb):
        """The refit without ``R`` by chord steps on the full problem's Hessian (downdated for
        R by Woodbury), warm-started from the stored solution, with the same certified stop
        rule as :func:`~deltafit.solvers.newton_primal` (``models/_chord_newton.py``); None
        when the steps stall."""
        if getattr(self, "_chord", None) is None:  # shared by every refit
            n = self.n
            cw = self.C * (np.ones(n) if self.w is None else self.w)
            block = RowBlock(self.Phi, self.t, cw, np.arange(n))
            Z, f, grad, g0 = fresh_point([block], self.coef, self.loss)
            self._chord = (
                cw,
                Curvature.at([block], Z, self.loss, n),
                point_by_slot([block], Z, f, grad, g0, n),
            )
        cw, curv, start = self._chord
        after = cw.copy()
        after[R] = 0.0
        changed = np.zeros(self.n, dtype=bool)
        changed[R] = True
        block = RowBlock(self.Phi, self.t, after, np.arange(self.n), self.t, cw)
        out = chord_solve(
            [block],
            self.coef,
            curv,
            self.loss,
            tol=self.tol,
            max_iter=self.max_iter,
            callback=cb,
            capacity=self.n,
            changed=[changed],
            start=start,
        )
        return None if out is None else out[0]

    def _hinge_refit(self, keep, T):
        """Exact hinge refit without the removed samples, warm-started from the dual."""
        a0 = self.dual[keep]
        sw = None if self.w is None else self.w[keep]  # α_i ∈ [0, C w_i]
        if self.kernel:
            res = hinge_kernel(
                self.K[np.ix_(keep, keep)],
                self.t[keep],
                self.C,
                sample_weight=sw,
                alpha0=a0,
                tol=self.tol,
                max_iter=max(self.max_iter, 1000),
            )
            z = self.K[np.ix_(T, keep)] @ res.coef
        else:
            res = hinge_primal(
                self.Phi[keep],
                self.t[keep],
                self.C,
                sample_weight=sw,
                alpha0=a0,
                tol=self.tol,
                max_iter=max(self.max_iter, 1000),
            )
            z = self.Phi[T] @ res.coef
        return z, z.copy(), res.n_iter, False

    def _early_callback(self, R, T, keep, box):
        """Callback deciding the signs at T from the intersection of two certified balls."""
        s1, r1 = self._removal(R, T)
        m1 = self._removal_center(R)  # over all n points (kernel)
        e = np.sqrt(np.maximum(self.sq[T], 0.0))
        if self.kernel:
            KT = self.K[T]

            def center_terms(coef, grad):
                c = np.zeros(self.n)
                c[keep] = coef - 0.5 * grad
                d = m1 - c
                return KT @ c, float(d @ (self.K @ d))
        else:
            PT = self.Phi[T]

            def center_terms(coef, grad):
                c = coef - 0.5 * grad
                d = m1 - c
                return PT @ c, float(d @ d)

        def callback(it, coef, grad_norm, objective, grad):
            s2, gap2 = center_terms(coef, grad)
            lo, hi = _widen(s2, 0.5 * grad_norm * e)  # the ball of Thm 6 alone
            if not np.all((lo > 0.0) | (hi <= 0.0)):  # then its intersection with the other
                lo, hi = two_ball_bounds(s1, s2, e, r1, 0.5 * grad_norm, np.sqrt(max(gap2, 0.0)))
                lo, hi = _widen(0.5 * (lo + hi), 0.5 * (hi - lo))
            if np.all((lo > 0.0) | (hi <= 0.0)):
                box["lo"], box["hi"] = lo, hi
                return True
            return False

        return callback


def _widen(center, half):
    """``center ∓ half``, widened by a relative rounding margin."""
    w = half + _ROUND * (np.abs(center) + half) + 1e-300
    return center - w, center + w
