"""The factorisations behind the exact what-ifs of the squared loss: the changed Hessian of a
linear model and the changed dual system of a kernel model, on the stored factorisation.

For ``C₂ = C₁`` the Hessian changes only by the changed samples, ``H₂ = H₁ + Φ_Jᵀ E Φ_J``, which
the Woodbury identity (Lee et al., "Exact incremental and decremental learning for LS-SVM",
Theorem 1 / Corollaries 3–4) turns into a k × k system on the stored inverse; otherwise the new
system is factorised (Cholesky).  The parts here depend only on the changed samples and their
weights, not on the targets, so the K one-vs-rest classes of a multiclass model share them.
The regions that use them, and the certificates, are in
:mod:`deltafit.sensitivity.regions._exact` (Okumura et al., "Quick sensitivity analysis for
incremental data modification and its application to leave-one-out CV in linear
classification problems", Theorem 1; Sivan et al., "Incremental sensitivity analysis for
kernelized models", Theorem 1 and eq. 4).
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
from scipy import linalg

from deltafit.kernels import kernel_rows

__all__ = ["EPS", "REFINE_STEPS", "KernelFactor", "LinearFactor"]

EPS = np.finfo(np.float64).eps
_EPS = EPS
REFINE_STEPS = 5
# Above this spread of diag(H₂) the linear what-if also certifies its answer in the scaled norm
# ‖diag(H₂)^{-1/2}·‖ (see LinearExactRegion): features of very different sizes (raw units) ...
_SPREAD = 4.0
# ... when p is at most this (its verification factorises a p × p matrix, O(p³))
_SCALED_MAX_P = 2000


class LinearFactor:
    """``M₂ = M₁ + (ρ₂ − ρ₁) I + Φ_Jᵀ D Φ_J`` and a solver for it (Woodbury on the tracked
    ``M₁⁻¹``, or a Cholesky factorisation), plus the matrix-vector product from the exact
    statistics used to refine and certify."""

    def __init__(self, prob: Any, PJ: np.ndarray, dJ: np.ndarray, shift: float) -> None:
        self.prob, self.PJ, self.dJ, self.shift = prob, PJ, dJ, shift
        M1 = prob.normal_matrix()
        self.M1 = M1
        p = M1.shape[0]
        self.p = p
        # ‖M₂‖₂ ≤ ‖M₁‖_F + |shift| + Σ |d_j| ‖φ_j‖²
        self.norm = float(
            np.linalg.norm(M1) + abs(shift) + np.sum(np.abs(dJ) * np.einsum("ij,ij->i", PJ, PJ))
        )
        self.kind = None
        if shift == 0.0 and PJ.shape[0] <= p // 2:
            self._woodbury()
        if self.kind is None:
            self._cholesky()

    def _woodbury(self):
        prob, PJ, dJ = self.prob, self.PJ, self.dJ
        if PJ.shape[0] == 0:
            self.kind = "inverse"
            return
        Z = np.asarray(prob.apply_inverse(np.ascontiguousarray(PJ.T)))
        if Z.ndim == 1:
            Z = Z[:, None]
        cap = PJ @ Z
        cap = 0.5 * (cap + cap.T)
        cap.flat[:: cap.shape[0] + 1] += 1.0 / dJ
        if not np.all(np.isfinite(cap)):
            return
        try:
            self._lu = linalg.lu_factor(cap, check_finite=False)
        except (linalg.LinAlgError, ValueError):
            return
        d = np.abs(np.diagonal(self._lu[0]))
        if d.min(initial=np.inf) <= 1e-13 * max(d.max(initial=0.0), 1e-300):
            return  # a capacitance this close to singular: factorise M₂ instead
        self.Z = Z
        self.kind = "woodbury"

    def _cholesky(self):
        A = self.M1.copy()
        A.flat[:: self.p + 1] += self.shift
        if self.PJ.shape[0]:
            A += (self.PJ.T * self.dJ) @ self.PJ
        try:
            self._chol = linalg.cho_factor(A, lower=True, check_finite=False)
        except linalg.LinAlgError as exc:
            raise ValueError(
                "exact what-if: the changed problem's matrix ΦᵀWΦ + ρI is not numerically "
                f"positive definite ({exc}); use method='sphere'"
            ) from exc
        self.kind = "cholesky"

    def matvec(self, x: np.ndarray) -> np.ndarray:
        """``M₂ x`` from the exact statistics."""
        out = self.M1 @ x + self.shift * x
        if self.PJ.shape[0]:
            out += self.PJ.T @ (self.dJ * (self.PJ @ x))
        return out

    def residual(self, x: np.ndarray, f: np.ndarray, gamma: float) -> tuple[np.ndarray, np.ndarray]:
        """``(e, u)``: ``e = fl(M₂x − f)`` from the exact statistics and a componentwise bound
        ``|e − (M₂x − f)| ≤ u`` of its rounding, ``γ (|M₁||x| + |shift||x| + |Φ_J|ᵀ|D||Φ_J||x|
        + |f|)`` (each entry a dot product of at most ``p + k + 2`` terms)."""
        e = self.matvec(x) - f
        return e, gamma * (self.abs_matvec(x) + np.abs(f))

    def abs_matvec(self, x: np.ndarray) -> np.ndarray:
        """``(|M₁| + |shift| I + |Φ_J|ᵀ|D||Φ_J|) |x|``, entrywise absolute values (≥ |M₂||x|)."""
        ax = np.abs(x)
        if getattr(self, "_absM1", None) is None:
            self._absM1 = np.abs(self.M1)
        u = self._absM1 @ ax + abs(self.shift) * ax
        if self.PJ.shape[0]:
            aP = np.abs(self.PJ)
            u += aP.T @ (np.abs(self.dJ) * (aP @ ax))
        return u

    def scaled_floor(self, C2: float) -> tuple[np.ndarray, float, np.ndarray, np.ndarray] | None:
        """``(s, λ, dec, h)``: the diagonal scaling ``s = diag(H₂)^{-1/2}`` (each ``≤ 1``), a
        certified ``λ > 0`` with ``S H₂ S ⪰ λ I`` (``H₂ = 2C₂ M₂``, ``S = diag(s)``), the
        coordinates ``dec`` that H₂ decouples (no off-diagonal entry) and lower bounds ``h`` of
        ``diag(H₂)``; or None when the diagonal of H₂ is nearly uniform (the scaling gains
        nothing) or the verification fails.  Computed once per factor (shared by the classes of
        a model).

        ``λ`` is verified, not estimated: a Cholesky factorisation of ``fl(A) − (μ + c) I``,
        ``A = S H₂ S``, that runs to completion in floating point proves
        ``fl(A) ⪰ μ I`` when ``c`` covers its rounding (Rump, "Verification of positive
        definiteness", BIT 46 (2006), Theorem 2.3 / Corollary 2.4: ``c ≥ γ_{p+1}/(1 − γ_{p+1})
        tr(A)`` plus the rounding of the shifted diagonal); the rounding of forming ``fl(A)``
        from the statistics, bounded entrywise and taken in the Frobenius norm, is subtracted.
        ``μ`` is 0.9 times the Rayleigh quotient after a few steps of inverse iteration with
        :meth:`solve` (O(p²) each), halved (up to seven times) while the verification fails.
        Cost O(k·p² + p³/3) per factorisation tried."""
        box = getattr(self, "_floor", None)
        if box is not None and box[0] == C2:
            return box[1]
        out = None
        if self.p <= _SCALED_MAX_P:
            with np.errstate(all="ignore"):
                out = self._scaled_floor(C2)
        self._floor = (C2, out)
        return out

    def _scaled_floor(self, C2):
        p, PJ, dJ = self.p, self.PJ, self.dJ
        twoC = 2.0 * C2
        M2 = self.M1.copy()
        M2.flat[:: p + 1] += self.shift
        if PJ.shape[0]:
            M2 += (PJ.T * dJ) @ PJ
        h = twoC * np.diagonal(M2)
        if not np.all(np.isfinite(M2)) or not np.all(h > 0.0):
            return None
        if h.max() <= _SPREAD * max(h.min(), 1.0):
            return None
        s = 1.0 / np.sqrt(np.maximum(h, 1.0))  # H₂ ⪰ I: diag(H₂) ≥ 1, so s ≤ 1
        A = (twoC * s[:, None]) * M2 * s[None, :]
        A = 0.5 * (A + A.T)
        if not np.all(np.isfinite(A)):
            return None
        # rounding of fl(A) against S H₂ S from the statistics: the sums of M₂ (at most k + 2
        # terms per entry), then three products and the symmetrisation
        k = PJ.shape[0]
        absM = np.abs(self.M1)
        absM.flat[:: p + 1] += abs(self.shift)
        if k:
            aP = np.abs(PJ)
            absM += (aP.T * np.abs(dJ)) @ aP
        form = 2.0 * (k + 8) * _EPS * float(np.linalg.norm((twoC * s[:, None]) * absM * s[None, :]))
        if not math.isfinite(form):
            return None
        # a Rayleigh quotient of A near its smallest eigenvalue (inverse iteration)
        v = np.random.default_rng(0).standard_normal(p)
        mu = None
        for _ in range(6):
            # A⁻¹v = S⁻¹ M₂⁻¹ S⁻¹ v / (2C₂), normalised below
            w = np.asarray(self.solve(v / s), dtype=np.float64).reshape(-1) / s
            if not np.all(np.isfinite(w)) or not w.any():
                return None
            v = w / np.linalg.norm(w)
            mu = float(v @ (A @ v))
        if mu is None or not (mu > 0.0):
            return None
        n = p + 1
        g = n * _EPS / (1.0 - n * _EPS)
        amax = float(np.max(np.diagonal(A)))
        c = 2.0 * (
            g / (1.0 - g) * float(np.trace(A))
            + 4.0 * _EPS * amax
            + 4.0 * (2.0 * n + amax) * np.finfo(np.float64).tiny
        )
        mu = 0.9 * mu  # the Rayleigh quotient is ≥ λ_min(A): start just below it
        for _ in range(8):
            lam = mu - form
            if lam <= 0.0:
                return None
            B = A.copy()
            B.flat[:: p + 1] -= mu + c
            try:
                linalg.cholesky(B, lower=True, check_finite=False)
            except linalg.LinAlgError:
                mu *= 0.5
                continue
            # coordinates that H₂ decouples exactly: no off-diagonal entry in the stored M₁
            # and 0 in every changed row (so also none in M₂, in exact arithmetic) — a feature
            # that is 0 in every sample of the changed data; and lower bounds of diag(H₂)
            off = self.M1 != 0.0
            off.flat[:: p + 1] = False
            dec = ~off.any(axis=1)
            if PJ.shape[0]:
                dec &= ~(PJ != 0.0).any(axis=0)
            return s, lam, dec, np.maximum(h * (1.0 - 8.0 * _EPS), 1.0)
        return None

    def solve(self, v: np.ndarray) -> np.ndarray:
        if self.kind == "cholesky":
            return linalg.cho_solve(self._chol, v, check_finite=False)
        t = np.asarray(self.prob.apply_inverse(v), dtype=np.float64)
        if self.kind == "woodbury":
            t = t - self.Z @ linalg.lu_solve(self._lu, self.Z.T @ v, check_finite=False)
        return t

    def refined(self, f: np.ndarray, gamma: float) -> tuple[np.ndarray, float]:
        """``(x, ‖M₂x − f‖)`` with ``x`` refined against the exact statistics until the
        residual reaches its rounding floor ``gamma (‖M₂‖‖x‖ + ‖f‖)``; a Woodbury solve
        that does not get there is replaced by a Cholesky factorisation."""
        fn = float(np.linalg.norm(f))
        if fn == 0.0:
            return np.zeros_like(f), 0.0
        x = self.solve(f)
        best, prev = None, None
        for _ in range(REFINE_STEPS):
            if not np.all(np.isfinite(x)):
                break
            e = self.matvec(x) - f
            en = float(np.linalg.norm(e))
            if best is None or en < best[1]:
                best = (x, en)
            if en <= gamma * (self.norm * float(np.linalg.norm(x)) + fn):
                break
            if prev is not None and en >= 0.5 * prev:
                break  # refinement has stalled
            prev = en
            x = x - self.solve(e)
        if self.kind != "cholesky" and (
            best is None or best[1] > 1e-8 * (self.norm * float(np.linalg.norm(best[0])) + fn)
        ):
            self._cholesky()
            return self.refined(f, gamma)
        if best is None:
            raise ValueError("exact what-if: the solution overflowed; use method='sphere'")
        return best


class KernelFactor:
    """What a kernel what-if needs besides the targets: the points ``P`` (the stored samples
    of positive weight ``L``, then the changed samples outside ``L``), their kernel matrix,
    the new weights, ``U`` / ``S`` of the Woodbury step and a solver of the new system."""

    def __init__(
        self,
        prob: Any,
        store: Any,
        slots: np.ndarray,
        w0: np.ndarray,
        w: np.ndarray,
        ids: np.ndarray,
        model: Any,
        C1: float,
        C2: float,
    ) -> None:
        self.prob, self.C1, self.C2 = prob, C1, C2
        rho1, rho2 = 0.5 / C1, 0.5 / C2
        self.rho2 = rho2
        live = np.asarray(prob.live)
        wl = np.asarray(prob.weights)[live]
        L = live[wl > 0]
        self.L, nL = L, L.size
        cap = prob.capacity
        pos = np.full(cap, -1, dtype=np.intp)
        pos[L] = np.arange(nL)
        k = slots.size
        h = np.full(k, -1, dtype=np.intp)
        if model.any():
            h[model] = prob.handles_unchecked(ids[model])
        inL = np.zeros(k, dtype=bool)
        inL[model] = pos[h[model]] >= 0
        extra = ~inL
        nX = int(extra.sum())
        self.nP = nP = nL + nX
        posE = np.empty(k, dtype=np.intp)
        posE[inL] = pos[h[inL]]
        posE[extra] = nL + np.arange(nX)
        self.posE = posE
        kw = store.kw
        rowsL = np.asarray(prob.rows[L], dtype=np.float64)
        # kernel values between the points and the entries
        KLE = np.empty((nL, k))
        if model.any():
            KLE[:, model] = prob.gram(L, h[model])
        add = ~model
        if add.any():
            KLE[:, add] = kernel_rows(store.pts[slots[add]], rowsL, **kw).T
        KEE = store.G[np.ix_(slots, slots)]
        self.KPE = np.vstack([KLE, KEE[extra]])
        KPP = np.empty((nP, nP))
        KPP[:nL, :nL] = prob.gram(L)
        KPP[:nL, nL:] = KLE[:, extra]
        KPP[nL:, :nL] = KLE[:, extra].T
        KPP[nL:, nL:] = KEE[np.ix_(extra, extra)]
        self.KPP = KPP
        self.points = np.vstack([rowsL, store.pts[slots[extra]]]) if nX else rowsL
        self.kw = kw
        # the new weights over P (0: not in D₂) and which entries are in P where
        w2 = np.zeros(nP)
        w2[:nL] = wl[wl > 0]
        w2[posE] = w
        self.w2 = w2
        self.diag = np.maximum(np.diagonal(KPP).copy(), 0.0)
        self.sdiag = np.sqrt(self.diag)
        self.kappa = 1.0 + 2.0 * C2 * float(self.diag @ w2)
        self.kind = None
        if C1 == C2 and k <= max(nL // 2, 1):
            self._woodbury(pos, h, inL, extra, w0, w, KLE, rho1)
        if self.kind is None:
            self._dual()

    def _woodbury(self, pos, h, inL, extra, w0, w, KLE, rho1):
        prob, L, nL = self.prob, self.L, self.L.size
        k = h.size
        Y = np.empty((nL, k))
        if inL.any():  # G⁻¹K[:, j] = e_j − (ρ/w_j) G⁻¹ e_j for a stored sample j
            cols = np.asarray(prob.inverse_columns(h[inL]))[L]
            Y[:, inL] = -(rho1 / w0[inL]) * cols
            Y[pos[h[inL]], np.flatnonzero(inL)] += 1.0
        if extra.any():
            V = np.zeros((prob.capacity, int(extra.sum())))
            V[L] = KLE[:, extra]
            Y[:, extra] = np.asarray(prob.apply_inverse(V)).reshape(V.shape)[L]
        U = np.zeros((self.nP, k))
        U[:nL] = -Y
        U[self.posE, np.arange(k)] += 1.0
        S = self.KPE.T @ U
        S = 0.5 * (S + S.T)
        e = 2.0 * self.C1 * (w - w0)
        A = np.eye(k) + S * e
        try:
            self._lu = linalg.lu_factor(A, check_finite=False)
        except (linalg.LinAlgError, ValueError):
            return
        d = np.abs(np.diagonal(self._lu[0]))
        if k and d.min() <= 1e-13 * max(d.max(), 1e-300):
            return
        self.U, self.S, self.e = U, S, e
        self.kind = "woodbury"

    def _dual(self):
        on = self.w2 > 0
        G = self.KPP[np.ix_(on, on)]
        G.flat[:: G.shape[0] + 1] += self.rho2 / self.w2[on]
        try:
            self._chol = linalg.cho_factor(G, lower=True, check_finite=False)
        except linalg.LinAlgError as exc:
            raise ValueError(
                "exact what-if: the changed problem's kernel system is not numerically "
                f"positive definite ({exc}); use method='sphere'"
            ) from exc
        self._on = on
        self.kind = "dual"

    def first(self, alphaL: np.ndarray, t2: np.ndarray, c: np.ndarray) -> np.ndarray:
        """Coefficients over P of β̂₂ (before refinement)."""
        a = np.zeros(self.nP)
        if self.kind == "dual":
            a[self._on] = linalg.cho_solve(self._chol, t2[self._on], check_finite=False)
            return a
        a[: self.L.size] = alphaL
        v = self.C1 * c
        s = linalg.lu_solve(self._lu, self.S @ v, check_finite=False)
        return a - self.U @ (v - self.e * s)

    def newton(self, a: np.ndarray, g: np.ndarray, t2: np.ndarray) -> np.ndarray:
        """``a`` after one refinement step: minus ``H₂⁻¹ Σ g_i Φ_i`` (Woodbury) or the dual
        system's correction."""
        if self.kind == "dual":
            on = self._on
            r = t2[on] - (self.KPP[np.ix_(on, on)] @ a[on] + self.rho2 / self.w2[on] * a[on])
            out = a.copy()
            out[on] += linalg.cho_solve(self._chol, r, check_finite=False)
            out[~on] = 0.0
            return out
        prob, L, nL = self.prob, self.L, self.L.size
        V = np.zeros(prob.capacity)
        V[L] = self.KPP[:nL] @ g
        u1 = g.copy()
        u1[:nL] -= np.asarray(prob.apply_inverse(V))[L]
        q = self.KPE.T @ u1
        s = linalg.lu_solve(self._lu, q, check_finite=False)
        return a - (u1 - self.U @ (self.e * s))
