"""Exact leave-one-out effects of every training sample on a model's decision values, and
their first-order (influence-function) estimate.

* Squared loss, linear: ``β₋ᵢ − β = −(ΦᵀWΦ + ρI)⁻¹ φᵢ wᵢ rᵢ / (1 − hᵢ)`` (Sherman–Morrison on the
  normal equations; Cook & Weisberg, "Residuals and influence in regression"), all n × m effects
  in O(n p² + n m p) from one Cholesky factorisation of the exact normal matrix.
* Squared loss, kernel: ``f₋ᵢ(x) − f(x) = −αᵢ (k(x, ·) G⁻¹)ᵢ / (G⁻¹)ᵢᵢ`` with
  ``G = K + ρW⁻¹`` (Cawley & Talbot, "Fast exact leave-one-out cross-validation of sparse
  least-squares support vector machines"), O(n³ + m n²).
* Logistic and squared-hinge losses, linear: every left-out problem re-solved, a chunk of them
  side by side, by chord-Newton steps from the full solution with the full Hessian downdated by
  the left-out sample (Sherman–Morrison), until the gradient norm of each left-out objective is
  below the model's tolerance: by 1-strong convexity that certifies ``‖β − β₋ᵢ*‖ ≤ tol``
  (Okumura et al., "Quick sensitivity analysis for incremental data modification and its
  application to leave-one-out CV in linear classification problems", Theorem 6).
* Label-based data values (:func:`deltafit.attribution.data_values`): the same re-solves,
  every class's problems of a sample stepped together and stopped as soon as the balls that
  hold their solutions (centre βₜ − gₜ/2, radius ‖gₜ‖/2, Okumura et al.'s GB ball) decide
  every label; the first logistic Newton step bounds the new gradient by the Taylor
  remainder of ℓ′ instead of computing it.
* Every other case (kernel models with another loss, the hinge loss, and any left-out problem
  the chord steps do not settle): the model's own exact update (``remove``) of a copy.

The influence function (Koh & Liang, "Understanding black-box predictions via influence
functions") is the first Newton step of the same re-solve without the downdate:
``Δf(x) ≈ C wᵢ ℓ'ᵢ ⟨Φ(x), H⁻¹ Φ(xᵢ)⟩``.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from numpy.typing import ArrayLike
from scipy import linalg

from deltafit import sensitivity
from deltafit.attribution._common import Fitted, check_chunk, check_ids

__all__ = ["loo_effects", "influence"]

_SMOOTH = ("logistic", "squared_hinge")
_METHODS = ("exact", "bounds")


def _check_tol(tol, view):
    if tol is None:
        return max(float(view.tol), 1e-12)
    if isinstance(tol, bool) or not np.isscalar(tol) or not np.isfinite(tol) or tol <= 0:
        raise ValueError(f"tol must be a positive number, got {tol!r}")
    return float(tol)


class _View:
    """One binary (or regression) problem of the model with its live rows and solution."""

    def __init__(self, fitted, view):
        self.f, self.v = fitted, view
        live = fitted.live
        self.t = np.asarray(view.targets[live], dtype=np.float64)
        self.w = fitted.weights()
        self.C = float(view.C)
        self.loss = view.loss
        self.kernel = fitted.kernel
        if self.kernel:
            self.alpha = np.asarray(view.alpha[live], dtype=np.float64)
            self.K = np.asarray(view.gram(live), dtype=np.float64)
            self.z = self.K @ self.alpha
        else:
            self.Phi = fitted.train_rows()
            self.beta = np.asarray(view.coef, dtype=np.float64)
            self.z = self.Phi @ self.beta

    def d1(self):
        return self.w * self.loss.d1(self.t, self.z)


# ----------------------------------------------------------------- the squared loss
def _squared_linear(pv, FX, pos):
    """Effects (len(pos), m) of the squared loss, linear model (closed form)."""
    cf = pv.f.cache.get("normal")
    if cf is None:  # the normal matrix is shared by every class of a multiclass model
        cf = pv.f.cache["normal"] = linalg.cho_factor(pv.v.normal_matrix(), lower=True)
    P = pv.Phi[pos]
    U = linalg.cho_solve(cf, P.T)  # (p, B)
    w = pv.w[pos]
    h = w * np.einsum("ij,ji->i", P, U)
    r = pv.t[pos] - pv.z[pos]
    return -(FX @ U).T * (w * r / (1.0 - h))[:, None]


def _squared_kernel(pv, KX, pos):
    """Effects (len(pos), m) of the squared loss, kernel model (closed form)."""
    Gi = pv.f.cache.get(("gram_inv", pv.v.klass))
    if Gi is None:
        rho = 1.0 / (2.0 * pv.C)
        keep = pv.w > 0
        G = pv.K[np.ix_(keep, keep)].copy()
        G.flat[:: G.shape[0] + 1] += rho / pv.w[keep]
        Gi = np.zeros_like(pv.K)
        Gi[np.ix_(keep, keep)] = linalg.cho_solve(
            linalg.cho_factor(G, lower=True), np.eye(G.shape[0])
        )
        pv.f.cache[("gram_inv", pv.v.klass)] = Gi
    cols = Gi[:, pos]
    d = np.diag(Gi)[pos]
    scale = np.divide(pv.alpha[pos], d, out=np.zeros(len(pos)), where=d > 0)
    return -(KX @ cols).T * scale[:, None]


# --------------------------------------------------------------- the smooth losses
class _Resolve:
    """The left-out problems of the samples ``pos`` of one logistic / squared-hinge linear
    problem, re-solved side by side by chord-Newton steps (preconditioned by the left-out
    Hessian at β) from the full solution, one :meth:`step` at a time; ``norms`` are the
    left-out objectives' gradient norms (each solution's certified distance to the exact one).
    A caller may close columns early (``closed``): they are not stepped again."""

    def __init__(self, pv, pos, tol):
        f = pv.f
        key = ("hess", pv.v.klass)
        if key not in f.cache:
            d1 = pv.d1()
            grad = pv.beta + pv.C * (pv.Phi.T @ d1)
            f.cache[key] = (
                linalg.cho_factor(pv.v.hessian(), lower=True),
                grad,
                d1,
                pv.w * pv.loss.d2(pv.t, pv.z),
            )
        cf, grad, d1, d2 = f.cache[key]
        self.pv, self.pos, self.tol, self.cf = pv, pos, tol, cf
        B = len(pos)
        P = pv.Phi[pos]
        self.U = linalg.cho_solve(cf, P.T, check_finite=False)  # H⁻¹ φᵢ
        self.c = pv.C * d2[pos]
        # > 0: H − c φφᵀ is positive definite
        self.den = 1.0 - self.c * np.einsum("ij,ji->i", P, self.U)
        self.G = grad[:, None] - P.T * (pv.C * d1[pos])  # ∇J₋ᵢ(β)
        self.Bt = np.repeat(pv.beta[:, None], B, axis=1)
        self.norms = np.linalg.norm(self.G, axis=0)
        self.active = np.arange(B)
        self.closed = np.zeros(B, dtype=bool)
        self.Z = self.prev = None  # decision values at the last iterates
        self.rate = np.zeros(B)  # last contraction of each column
        self.stale = np.zeros(B, dtype=bool)  # norms a bound, G not yet the new gradient
        self.it = 0

    def _precond(self, R, cols):
        # (H − c φφᵀ)⁻¹ R: the left-out Hessian at β (Sherman–Morrison)
        V = linalg.cho_solve(self.cf, R, check_finite=False)
        Uc = self.U[:, cols]
        return V + Uc * (self.c[cols] * np.einsum("ij,ij->j", Uc, R) / self.den[cols])

    def first_step(self):
        """The first (Newton) step of every open column, for the logistic loss without the new
        gradient: ``norms`` become a bound of its norm from the Taylor remainder of ℓ′ (returns
        False, stepping nothing, for another loss or after the first step)."""
        pv = self.pv
        if self.it or pv.loss.name != "logistic":
            return False
        Phi, t, w, C = pv.Phi, pv.t, pv.w, pv.C
        active = self.active = self.active[~self.closed[self.active]]
        self.it = 1
        if not active.size:
            return True
        V = self._precond(self.G[:, active], active)
        self.Bt[:, active] -= V
        # ∇J₋ᵢ(β − V) = ∇J₋ᵢ(β) − H₋ᵢ(β) V + C Σⱼ wⱼ rⱼ φⱼ: the first two cancel (Newton step),
        # |rⱼ| ≤ max|ℓ‴| δⱼ² / 2 with δ = Φ V and |ℓ‴| ≤ |t|³ / (6√3) (logistic); j = i only adds
        D = Phi @ V
        D *= D
        l3 = float(np.max(np.abs(t), initial=0.0)) ** 3 / (6.0 * np.sqrt(3.0))
        bound = (0.5 * C * l3) * (D.T @ (w * np.linalg.norm(Phi, axis=1)))
        # plus the rounding of the cancelling linear part, far below it
        self.norms[active] = bound + 1e-12 * self.norms[active]
        self.stale[active] = True
        return True

    def _refresh(self, cols):
        """The true gradients of the columns ``cols`` (after :meth:`first_step`)."""
        pv, pos = self.pv, self.pos
        Z = pv.Phi @ self.Bt[:, cols]
        D1 = _first_derivative(pv.loss, pv.t[:, None], Z)
        D1 *= pv.w[:, None]
        D1[pos[cols], np.arange(cols.size)] = 0.0
        self.G[:, cols] = self.Bt[:, cols] + pv.C * (pv.Phi.T @ D1)
        self.norms[cols] = np.linalg.norm(self.G[:, cols], axis=0)
        self.stale[cols] = False

    def step(self):
        """One step of every open column above the tolerance; False when none is left."""
        pv, pos, tol = self.pv, self.pos, self.tol
        Phi, t, w, C = pv.Phi, pv.t, pv.w, pv.C
        norms, rate = self.norms, self.rate
        open_ = self.active[~self.closed[self.active]]
        if self.stale[open_].any():
            self._refresh(open_[self.stale[open_]])
        active = self.active = open_[norms[open_] > tol]
        if not active.size:
            return False
        Ga = self.G[:, active]
        # at β the preconditioner is the exact left-out Hessian (a Newton step); later, a
        # chord step with it while it contracts fast, else an inexact Newton step
        # (preconditioned CG on the current Hessian)
        V = self._precond(Ga, active)
        it = self.it
        slow = np.flatnonzero(rate[active] > 0.05) if it else np.empty(0, dtype=np.intp)
        if slow.size:
            sl = active[slow]
            D2s = self._curvature(np.searchsorted(self.prev, sl), sl)
            V[:, slow] = _pcg(
                lambda S, D2s=D2s: S + C * (Phi.T @ (D2s * (Phi @ S))),
                lambda R, sl=sl: self._precond(R, sl),
                Ga[:, slow],
            )
        self.Bt[:, active] -= V
        Z = Phi @ self.Bt[:, active]
        D1 = _first_derivative(pv.loss, t[:, None], Z)
        D1 *= w[:, None]
        D1[pos[active], np.arange(active.size)] = 0.0  # sample i is left out of problem i
        Gn = self.Bt[:, active] + C * (Phi.T @ D1)
        self.Z, self.prev = Z, active  # the curvature there, if a later step needs it
        new = np.linalg.norm(Gn, axis=0)
        rate[active] = new / np.maximum(norms[active], 1e-300)
        # a step that does not contract is given up (the exact update takes over)
        stalled = new > 0.9 * norms[active]
        self.G[:, active] = Gn
        norms[active] = np.where(stalled & (new > tol), np.inf, new)
        self.it += 1
        return True

    def _curvature(self, cols, sl):
        """``w ℓ''`` at the last iterates of the columns ``cols`` of the last step (problems
        ``sl``), the left-out sample's zeroed."""
        pv = self.pv
        _, D2 = _derivatives(pv.loss, pv.t[:, None], self.Z[:, cols])
        D2 *= pv.w[:, None]
        D2[self.pos[sl], np.arange(sl.size)] = 0.0
        return D2

    def effects(self, FX, cols=slice(None)):
        """Effects (len(cols), m) of the current iterates on the mapped rows FX."""
        return (self.Bt[:, cols] - self.pv.beta[:, None]).T @ FX.T

    def centred(self, FX, cols):
        """Effects (len(cols), m) of the centres ``βₜ − gₜ / 2`` of the balls of radius
        ``‖gₜ‖ / 2`` that hold the left-out solutions (1-strong convexity: ⟨gₜ, βₜ − β*⟩ ≥
        ‖βₜ − β*‖², Okumura et al., the GB ball)."""
        D = self.Bt[:, cols] - self.pv.beta[:, None]
        D -= np.where(self.stale[cols], 0.0, 0.5) * self.G[:, cols]
        return D.T @ FX.T

    def radii(self, cols=slice(None)):
        """Radii of those balls (the bound itself, around βₜ, for a stale gradient)."""
        return np.where(self.stale[cols], 1.0, 0.5) * self.norms[cols]

    def left(self):
        """Positions (into ``pos``) above the tolerance."""
        return np.flatnonzero(~(self.norms <= self.tol))


def _smooth_linear(pv, FX, pos, tol, max_iter):
    """Effects (len(pos), m) of a logistic / squared-hinge linear model by side-by-side chord
    re-solves; returns the effects, the positions (into ``pos``) left unsettled and the
    gradient norms."""
    rs = _Resolve(pv, pos, tol)
    for _ in range(max_iter):
        if not rs.step():
            break
    return rs.effects(FX), rs.left(), rs.norms


def _smooth_decided(views, FX, part, tol, max_iter, decided, multiclass):
    """Effects, unsettled positions and radii of the left-out problems of every class at once,
    each sample's problems stepped together until ``decided(P, effects, R)`` says its effects
    are known well enough (checked before the first step and after each) or all reach ``tol``.
    P: (B',) positions of the open samples, R: (B', K) radii, ``effects(sub, rows)``: K arrays
    (len(sub), len(rows)) of each class's effects of the samples ``sub`` (indices into P;
    None: all) on the validation rows ``rows`` (None: all), which ``decided`` must have asked
    for on all rows for every sample it decides.  The effects are those of the centres of the
    balls that hold the left-out solutions (:meth:`_Resolve.centred`, :meth:`_Resolve.radii`)."""
    rss = [_Resolve(pv, part, _check_tol(tol, pv.v)) for pv in views]
    B, m, K = part.size, FX.shape[0], len(rss)
    E = np.zeros((B, m, K))
    open_ = np.arange(B)
    for it in range(max_iter + 1):
        # the first step of the logistic loss bounds the new gradients instead of computing them
        if it == 1 and all([rs.first_step() for rs in rss]):
            pass
        elif it and not any([rs.step() for rs in rss]):
            break
        full = []

        def effects(sub=None, rows=None, cols=open_, full=full):
            at = cols if sub is None else cols[sub]
            Es = [rs.centred(FX if rows is None else FX[rows], at) for rs in rss]
            if rows is None:
                full.append((at, Es))
            return Es

        Rc = np.stack([rs.radii(open_) for rs in rss], axis=1)
        ok = np.asarray(decided(part[open_], effects, Rc), dtype=bool)
        for at, Es in full:
            for k, Ek in enumerate(Es):
                E[at, :, k] = Ek
        for rs in rss:
            rs.closed[open_[ok]] = True
        open_ = open_[~ok]
        if not open_.size:
            break
    for k, Ek in enumerate([rs.centred(FX, open_) for rs in rss]):  # the undecided
        E[open_, :, k] = Ek
    R = np.stack([rs.radii() for rs in rss], axis=-1)
    settled = (
        np.stack([rs.norms[open_] for rs in rss], axis=-1) <= np.array([rs.tol for rs in rss])
    ).all(axis=1)
    left = open_[~settled]  # neither decided nor at the tolerance
    if not multiclass:
        return E[..., 0], left, R[:, 0]
    return E, left, R


def _first_derivative(loss, t, Z):
    """``ℓ'(t, Z)`` (a new array)."""
    if loss.name == "logistic":
        sig = t * Z  # −t σ(−tz) = −t / (1 + exp(tz)), in place
        with np.errstate(over="ignore"):
            np.exp(sig, out=sig)
        sig += 1.0
        np.reciprocal(sig, out=sig)
        sig *= -t
        return sig
    return loss.d1(t, Z)


def _derivatives(loss, t, Z):
    """``ℓ'(t, Z)`` and ``ℓ''(t, Z)`` (one logistic sigmoid for both)."""
    if loss.name == "logistic":
        sig = t * Z  # σ(−tz) = 1 / (1 + exp(tz)), in place
        with np.errstate(over="ignore"):
            np.exp(sig, out=sig)
        sig += 1.0
        np.reciprocal(sig, out=sig)
        d2 = sig * sig
        np.subtract(sig, d2, out=d2)
        sig *= -t
        return sig, d2
    return loss.d1(t, Z), loss.d2(t, Z)


def _pcg(hvp, precond, G, rtol=1e-3, max_iter=20):
    """Columns S of ``H S = G`` by preconditioned conjugate gradients, side by side, each
    column to a residual of ``rtol · ‖G‖`` (an inexact Newton step)."""
    S = np.zeros_like(G)
    R = G.copy()
    Zp = precond(R)
    P = Zp.copy()
    rz = np.einsum("ij,ij->j", R, Zp)
    goal = rtol * np.linalg.norm(G, axis=0)
    for _ in range(max_iter):
        todo = np.linalg.norm(R, axis=0) > goal
        if not todo.any():
            break
        HP = hvp(P)
        a = np.where(todo, rz / np.maximum(np.einsum("ij,ij->j", P, HP), 1e-300), 0.0)
        S += a * P
        R -= a * HP
        Zp = precond(R)
        rz_new = np.einsum("ij,ij->j", R, Zp)
        P = Zp + np.where(todo, rz_new / np.maximum(rz, 1e-300), 0.0) * P
        rz = rz_new
    return S


# ------------------------------------------------------------------------- the API
def view_effects(fitted, pv, mapped, part, tol, max_iter, m=None):
    """Effects (len(part), m) of one problem's left-out solutions on the mapped rows, the
    positions (into ``part``) that the caller must settle by an exact update, and each left-out
    solution's certified distance to the exact one (0 for the closed form)."""
    loss = fitted.loss
    if loss == "squared":
        e = (_squared_kernel if fitted.kernel else _squared_linear)(pv, mapped, part)
        return e, np.empty(0, dtype=np.intp), np.zeros(part.size)
    if loss in _SMOOTH and not fitted.kernel:
        return _smooth_linear(pv, mapped, part, _check_tol(tol, pv.v), max_iter)
    return np.zeros((part.size, m)), np.arange(part.size), np.zeros(part.size)


def _chunks(fitted, X, pos, chunk_size, tol, max_iter, decided=None):
    """``(positions, effects, radii)`` per chunk of ``pos``: effects (B, m) or (B, m, K), and
    the certified distance of each left-out solution to the exact one, (B,) or (B, K) (the
    effect on x is exact to ``radius · ‖Φ(x)‖``).  ``decided`` (smooth linear models, see
    :func:`_smooth_decided`): the samples whose effects are known well enough, whose left-out
    problems stop early."""
    Xv = fitted.rows_of(X)
    base = fitted.decision(X)
    views = [_View(fitted, v) for v in fitted.views]
    loss = fitted.loss
    mapped = (
        fitted.mapped(Xv)
        if (loss == "squared" or (loss in _SMOOTH and not fitted.kernel))
        else None
    )
    for s in range(0, pos.size, chunk_size):
        part = pos[s : s + chunk_size]
        if decided is not None and loss in _SMOOTH and not fitted.kernel:
            E, left, R = _smooth_decided(
                views, mapped, part, tol, max_iter, decided, fitted.multiclass
            )
            todo = set(left.tolist())
        else:
            cols, rads, todo = [], [], set()
            for pv in views:
                e, left, r = view_effects(fitted, pv, mapped, part, tol, max_iter, base.shape[0])
                todo.update(left.tolist())
                cols.append(e)
                rads.append(r)
            E = np.stack(cols, axis=-1) if fitted.multiclass else cols[0]
            R = np.stack(rads, axis=-1) if fitted.multiclass else rads[0]
        for j in sorted(todo):  # the model's own exact update of a copy
            mm = fitted.removed([part[j]])
            E[j] = fitted.decision_of(mm, X) - base
            R[j] = mm.grad_norm_
        yield part, E, R


def _bounds(fitted, X, pos):
    """Certified intervals of the effects from the sensitivity regions (no refits)."""
    base = fitted.decision(X)
    s = sensitivity(fitted.model)
    lo = np.empty((pos.size,) + base.shape)
    hi = np.empty_like(lo)
    for j, p in enumerate(pos):
        s.reset()
        s.remove([fitted.ids[p]])
        a, b = s.decision_bounds(X)
        lo[j], hi[j] = np.asarray(a) - base, np.asarray(b) - base
    return lo, hi


def loo_effects(
    model: Any,
    X: ArrayLike,
    *,
    ids: ArrayLike | None = None,
    method: str = "exact",
    chunk_size: int = 256,
    tol: float | None = None,
    max_iter: int = 50,
) -> Any:
    """Change of the model's decision values on ``X`` when each training sample is removed.

    Row i is ``f₋ᵢ(X) − f(X)``, ``f₋ᵢ`` the model retrained without sample ``ids[i]``
    (``decision_function`` of a classifier, ``predict`` of a regressor), computed without
    retraining and **exact**: equal to a refit up to the solver's certified tolerance.

    * Squared loss (ridge, kernel ridge, LS-SVM): closed form from one factorisation,
      O(n p² + n m p) for a linear model, O(n³ + m n²) for a kernel model.
    * Logistic and squared-hinge losses, linear models: the left-out problems are re-solved
      ``chunk_size`` at a time, side by side, by chord-Newton steps from the full solution,
      until each left-out objective's gradient norm is at most ``tol`` (which certifies the
      left-out solution to ``tol`` by 1-strong convexity, Okumura et al., "Quick sensitivity
      analysis for incremental data modification and its application to leave-one-out CV in
      linear classification problems", Theorem 6).
    * Other models (kernel models with a non-squared loss, the hinge loss): the model's own
      exact update (``remove``) of a copy, one sample at a time.

    Parameters
    ----------
    model : fitted LinearClassifier, LinearRegressor, KernelClassifier or KernelRegressor
        Fitted with ``keep_data=True`` (the default).  Never modified.
    X : array-like of shape (m, n_features)
        Points whose decision values are followed.
    ids : array-like of int, optional
        Sample ids (``model.sample_ids_``) to remove one at a time; default: all, in
        ``sample_ids_`` order.
    method : {"exact", "bounds"}
        ``"bounds"``: certified intervals of the effects from the sensitivity regions of
        :func:`deltafit.sensitivity` (Okumura et al., Theorem 1; exact for the squared loss),
        without re-solving anything; returns ``(lower, upper)``.
    chunk_size : int, default=256
        Left-out problems solved together; memory is O(chunk_size · (n + m)) besides the result.
    tol : float, optional
        Certified accuracy of each left-out solution (gradient norm); default the model's
        ``tol``.
    max_iter : int, default=50
        Chord steps before a left-out problem is handed to the exact update.

    Returns
    -------
    effects : ndarray of shape (n_ids, m) or (n_ids, m, K)
        K ≥ 3 classes: one column per class's decision value.  With ``method="bounds"``, a
        pair ``(lower, upper)`` of such arrays.

    Raises
    ------
    ValueError
        For a model that is not a fitted deltafit estimator or keeps no rows, unknown or
        repeated ids, rows of the wrong width, or a bad option.

    See Also
    --------
    influence : the first-order (influence-function) estimate of the same numbers.
    deltafit.model_selection.loo : leave-one-out predictions of each sample itself.

    Examples
    --------
    >>> import numpy as np
    >>> import deltafit
    >>> from deltafit.attribution import loo_effects
    >>> from deltafit.datasets import load_breast_cancer
    >>> X, y = load_breast_cancer()
    >>> m = deltafit.LinearClassifier(loss="logistic").fit(X[:100], y[:100])
    >>> E = loo_effects(m, X[100:110])
    >>> E.shape
    (100, 10)
    >>> refit = deltafit.LinearClassifier(loss="logistic").fit(X[1:100], y[1:100])
    >>> d = refit.decision_function(X[100:110]) - m.decision_function(X[100:110])
    >>> bool(np.allclose(E[0], d, atol=1e-7))
    True
    """
    if method not in _METHODS:
        raise ValueError(f"method must be one of {_METHODS}, got {method!r}")
    chunk_size = check_chunk(chunk_size)
    if isinstance(max_iter, bool) or not isinstance(max_iter, (int, np.integer)) or max_iter < 1:
        raise ValueError(f"max_iter must be a positive integer, got {max_iter!r}")
    fitted = Fitted(model, "loo_effects")
    fitted.cache = {}
    pos = check_ids(fitted.problem, ids)
    if method == "bounds":
        return _bounds(fitted, X, pos)
    if fitted.views:
        _check_tol(tol, fitted.views[0])
    base = fitted.decision(X)
    out = np.empty((pos.size,) + base.shape)
    at = 0
    for part, E, _ in _chunks(fitted, X, pos, chunk_size, tol, int(max_iter)):
        out[at : at + part.size] = E
        at += part.size
    return out


def iter_effects(
    model,
    X,
    *,
    ids=None,
    chunk_size=256,
    tol=None,
    max_iter=50,
    what="loo_effects",
    decided=None,
):
    """``(ids, effects, radii)`` chunk by chunk (the memory-bounded form of
    :func:`loo_effects`), the fitted model and its decision values on X first:
    ``fitted, base, chunks``.  ``decided``: see :func:`_chunks`."""
    chunk_size = check_chunk(chunk_size)
    fitted = Fitted(model, what)
    fitted.cache = {}
    pos = check_ids(fitted.problem, ids)
    base = fitted.decision(X)

    def gen():
        for part, E, R in _chunks(fitted, X, pos, chunk_size, tol, max_iter, decided):
            yield fitted.ids[part], E, R

    return fitted, base, gen()


def influence(
    model: Any, X: ArrayLike, *, ids: ArrayLike | None = None, chunk_size: int = 256
) -> np.ndarray:
    """First-order (influence-function) estimate of :func:`loo_effects`.

    Koh & Liang, "Understanding black-box predictions via influence functions" (ICML 2017):
    removing sample i changes the solution by about ``H⁻¹ ∇_β C wᵢ ℓ(tᵢ, ⟨Φᵢ, β⟩)``, so

        Δf(x) ≈ C wᵢ ℓ'(tᵢ, zᵢ) ⟨Φ(x), H⁻¹ Φ(xᵢ)⟩,     H = I + C Σⱼ wⱼ ℓ''ⱼ Φⱼ Φⱼᵀ,

    the first Newton step of the left-out re-solve with the full Hessian.  Kernel models use
    ``⟨Φ(x), H⁻¹ Φ(xᵢ)⟩ = (k(x, ·) (I + D K)⁻¹)ᵢ``, ``D = C diag(w ℓ'')`` (push-through
    identity).  For the squared loss the exact effect is this estimate divided by ``1 − hᵢ``
    (the leverage), so the gap is largest for high-leverage samples.

    Parameters
    ----------
    model : fitted deltafit estimator with a differentiable loss (not ``"hinge"``)
    X : array-like of shape (m, n_features)
    ids : array-like of int, optional
        Sample ids; default all, in ``sample_ids_`` order.
    chunk_size : int, default=256

    Returns
    -------
    ndarray of shape (n_ids, m) or (n_ids, m, K)

    Raises
    ------
    ValueError
        For the hinge loss (no gradient), or the input errors of :func:`loo_effects`.

    Examples
    --------
    >>> import numpy as np
    >>> import deltafit
    >>> from deltafit.attribution import influence, loo_effects
    >>> from deltafit.datasets import load_breast_cancer
    >>> X, y = load_breast_cancer()
    >>> m = deltafit.LinearClassifier(loss="logistic").fit(X[:200], y[:200])
    >>> I, E = influence(m, X[200:220]), loo_effects(m, X[200:220])
    >>> bool(np.corrcoef(I.ravel(), E.ravel())[0, 1] > 0.9)
    True
    """
    chunk_size = check_chunk(chunk_size)
    fitted = Fitted(model, "influence")
    if fitted.loss == "hinge":
        raise ValueError(
            "influence needs a differentiable loss; the hinge loss has no "
            "gradient (use loo_effects, which is exact for it)"
        )
    pos = check_ids(fitted.problem, ids)
    Xv = fitted.rows_of(X)
    fitted.decision(X)  # the model's own checks of X
    M = fitted.mapped(Xv)
    cols = []
    for v in fitted.views:
        pv = _View(fitted, v)
        d1 = pv.d1()
        d2 = pv.w * pv.loss.d2(pv.t, pv.z)
        if fitted.kernel:
            A = np.eye(fitted.n) + pv.C * d2[:, None] * pv.K  # I + D K
            lu = linalg.lu_factor(A.T)  # (K_X A⁻¹)ᵀ = A⁻ᵀ K_Xᵀ
            S = linalg.lu_solve(lu, M.T)  # (n, m)
            cols.append(S[pos] * (pv.C * d1[pos])[:, None])
        else:
            cf = linalg.cho_factor(v.hessian(), lower=True)
            parts = []
            for s in range(0, pos.size, chunk_size):
                part = pos[s : s + chunk_size]
                U = linalg.cho_solve(cf, pv.Phi[part].T)
                parts.append((M @ U).T * (pv.C * d1[part])[:, None])
            cols.append(np.concatenate(parts) if parts else np.empty((0, M.shape[0])))
    return np.stack(cols, axis=-1) if fitted.multiclass else cols[0]
