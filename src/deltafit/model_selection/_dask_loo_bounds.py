"""Leave-one-out bounds of a Dask-fitted logistic / squared-hinge model: the left-out balls,
then the curvature-aware leave-one-out region, each a few passes over the persisted rows.

For each binary problem (one, or the K one-vs-rest problems of K ≥ 3 classes):

1. **Balls** (one pass, β̂ and the exact gradient g shipped): Okumura et al., "Quick
   sensitivity analysis for incremental data modification and its application to
   leave-one-out CV in linear classification problems" (KDD'15), Cor. 5 / Thm 6 in the
   exact-gradient form (Sivan et al. §4.2): :func:`deltafit.sensitivity.regions.loo_balls`.  The
   same pass computes ``q₀,t = Φ_tᵀ H⁻¹ Φ_t`` with the Cholesky factor of the fit's Hessian
   shipped, hence the first guess ``T₀,t`` of how far the left-out scores move.
2. **Curvature sums** (one pass, only where some label is left undecided): for each level τ
   (quantiles of ``T₀`` over the samples that move, as
   :func:`deltafit.sensitivity.regions._curvature_loo.curvature_loo_bounds` picks them), the secant
   slopes' ranges over ``z_i ± τ ‖Φ_i‖_{H⁻¹}`` and the two p × p sums
   ``B_lo,hi = I + C Σ w_i c_lo,hi,i Φ_iΦ_iᵀ``.
3. **Curvature bounds** (one pass, the factors of ``B_lo``, ``B_hi`` shipped): per row
   ``q_lo``, ``q_hi``, the Sherman–Morrison downdate of its own term, the score interval
   ``z_t − C γ_t [s_lo, s_hi] ∓ ε √s_hi`` (``γ_t = −w_t ℓ'_t``) and the homotopy verification
   of :mod:`deltafit.sensitivity.regions._curvature_loo`, which needs the two smallest ratios
   ``dev_i / √q_lo,i`` over all rows — the only reduction of this pass.

Every step is that of :func:`~deltafit.sensitivity.regions._curvature_loo.curvature_loo_bounds`
(the NumPy path's leave-one-out region), evaluated block by block: the intervals are certified
bounds, not estimates; where a level does not certify a row, the ball's interval stays.  It is
the exact left-out model's one Newton step ``z_t − C γ_t Φ_tᵀH̄⁻¹Φ_t`` with the secant Hessian
H̄ bracketed, so it decides nearly every label the ball leaves undecided at large n.
"""

from __future__ import annotations

import numpy as np
from scipy import linalg

from deltafit.model_selection._problem import _widen
from deltafit.sensitivity import certain_argmax
from deltafit.sensitivity.regions import loo_balls, secant_range
from deltafit.sensitivity.regions._curvature_loo import _LEVELS, _MARGIN, _SAFE, _without_own

__all__ = [
    "ball_block",
    "decided_rows",
    "level_summary",
    "curvature_levels",
    "gram_block",
    "add_grams",
    "factor_levels",
    "bound_block",
    "global_limits",
    "finish_block",
    "SKETCH",
]

#: order statistics a block returns of its T₀ values beyond which they are thinned (the
#: levels are then quantiles of the pooled order statistics: a heuristic choice, every level
#: is verified)
SKETCH = 4096


def _features(x, t, w, mods, spec):
    from deltafit.model_selection._dask_folds import row_features

    return row_features(x, t, w, mods, spec)


def _targets(t, c, multi):
    return np.where(t == c, 1.0, -1.0) if multi else t


def ball_block(x, t, w, mods, spec, betas, grads, grad_sq, C, factors, multi):
    """Pass 1 over a block (a Dask task): per problem c, the left-out balls' bounds and what
    the curvature region reads again (z, ``q₀``, ``T₀``, whether the sample moves).

    Returns a dict of arrays of shape (rows, K'): ``lo``, ``hi``, ``z``, ``q0``, ``T0``,
    ``moving`` (bool), and ``used`` (rows,) (weight > 0)."""
    Phi, t, w, cw = _features(x, t, w, mods, spec)
    k, K = Phi.shape[0], betas.shape[1]
    Z = Phi @ np.column_stack([betas, grads])
    sq = np.einsum("ij,ij->i", Phi, Phi)
    out = {key: np.empty((k, K)) for key in ("lo", "hi", "z", "q0", "T0")}
    out["moving"] = np.zeros((k, K), dtype=bool)
    out["used"] = w > 0
    for c in range(K):
        tc, z, pg = _targets(t, c, multi), Z[:, c], Z[:, K + c]
        d1 = spec.loss.d1(tc, z)
        wd1 = w * d1
        center, r = loo_balls(z, wd1, sq, C1=C, C2=C, phi_grad=pg, grad_sq=grad_sq[c])
        out["lo"][:, c], out["hi"][:, c] = _widen(center, np.sqrt(np.maximum(sq, 0.0)) * r)
        out["z"][:, c] = z
        if factors is None:
            continue
        W = linalg.solve_triangular(factors[c], Phi.T, lower=True, check_finite=False)
        q0 = np.einsum("ij,ij->j", W, W)
        h0 = spec.loss.d2(tc, z)
        gamma = -wd1
        s0, den0 = _without_own(q0, C * w * h0)
        eps = float(np.sqrt(max(grad_sq[c], 0.0)))
        with np.errstate(invalid="ignore"):
            T0 = (C * np.abs(gamma) * np.sqrt(s0) + eps) / np.sqrt(den0)
        out["q0"][:, c], out["T0"][:, c] = q0, T0
        out["moving"][:, c] = (gamma != 0.0) & np.isfinite(T0)
    return out


def decided_rows(lo, hi, multi):
    """Where the bounds decide the label: one sign, or the argmax (K ≥ 3 classes,
    :func:`deltafit.sensitivity.certain_argmax`) — the NumPy path's rule."""
    if multi:
        return certain_argmax(lo, hi)[1]
    return (lo[:, 0] > 0.0) | (hi[:, 0] <= 0.0)


def level_summary(part, multi):
    """A block's summary for the levels (a Dask task): per problem, whether some sign is
    undecided (the NumPy path tries the curvature region of such a problem only), the number of
    moving samples and their ``T₀`` (sorted; thinned to :data:`SKETCH` order statistics)."""
    lo, hi = part["lo"], part["hi"]
    sign_open = ~np.all((lo > 0.0) | (hi <= 0.0), axis=0)
    vals = []
    for c in range(lo.shape[1]):
        v = np.sort(part["T0"][part["moving"][:, c], c])
        if v.size > SKETCH:
            v = v[np.linspace(0, v.size - 1, SKETCH).round().astype(np.intp)]
        vals.append((int(np.count_nonzero(part["moving"][:, c])), v))
    return sign_open, vals


def curvature_levels(summaries):
    """The levels τ of each problem from the blocks' :func:`level_summary`: the quantiles
    ``_LEVELS`` of ``T₀`` over the moving samples (exact when no block thinned its values),
    as :func:`~deltafit.sensitivity.regions._curvature_loo.curvature_loo_bounds`; ``None`` for a
    problem whose signs the balls decide."""
    K = len(summaries[0][1])
    sign_open = np.any([s for s, _ in summaries], axis=0)
    out = []
    for c in range(K):
        if not sign_open[c]:
            out.append(None)
            continue
        pieces = [v[c] for _, v in summaries]
        total = sum(n for n, _ in pieces)
        if total == 0:
            levels = np.array([0.0])
        elif all(n == v.size for n, v in pieces):
            levels = np.quantile(np.concatenate([v for _, v in pieces]), _LEVELS)
        else:  # weighted order statistics of the thinned blocks
            v = np.concatenate([v for _, v in pieces])
            wt = np.concatenate([np.full(v_.size, n / max(v_.size, 1)) for n, v_ in pieces])
            o = np.argsort(v, kind="stable")
            cum = np.cumsum(wt[o]) / wt.sum()
            levels = v[o][np.minimum(np.searchsorted(cum, _LEVELS), v.size - 1)]
        out.append(np.unique((1.0 + _MARGIN) * levels + 1e-12 * (1.0 + levels)))
    return out


def _dev(part, c, tau):
    z = part["z"][:, c]
    return np.sqrt(part["q0"][:, c]) * tau * (1.0 + _SAFE) + 1e-15 * (1.0 + np.abs(z))


def gram_block(x, t, w, mods, spec, part, taus, C, multi):
    """Pass 2 over a block (a Dask task): for every problem and level, the sums
    ``Σ C w_i c_lo,i Φ_iΦ_iᵀ`` and ``Σ C w_i c_hi,i Φ_iΦ_iᵀ`` (a dict ``(c, j) → (2, p, p)``)."""
    Phi, t, w, cw = _features(x, t, w, mods, spec)
    out = {}
    for c, levels in enumerate(taus):
        if levels is None:
            continue
        tc, z = _targets(t, c, multi), part["z"][:, c]
        for j, tau in enumerate(levels):
            dev = _dev(part, c, tau)
            c_lo, c_hi = secant_range(spec.loss, tc, z, z - dev, z + dev)
            out[c, j] = np.stack([(Phi.T * (C * w * c_lo)) @ Phi, (Phi.T * (C * w * c_hi)) @ Phi])
    return out


def add_grams(*parts):
    """The sum of blocks' :func:`gram_block` dicts."""
    out = dict(parts[0])
    for p in parts[1:]:
        for key, v in p.items():
            out[key] = out[key] + v
    return out


def factor_levels(grams):
    """The Cholesky factors of ``I + sum`` for each (problem, level); a level whose matrix is
    not positive definite in float64 is dropped (as on NumPy)."""
    out = {}
    for key, S in grams.items():
        try:
            fac = [
                linalg.cholesky(S[i] + np.eye(S.shape[1]), lower=True, check_finite=False)
                for i in (0, 1)
            ]
        except linalg.LinAlgError:
            continue
        out[key] = fac
    return out


def bound_block(x, t, w, mods, spec, part, taus, factors, grad_sq, C, multi, start):
    """Pass 3 over a block (a Dask task): per (problem, level) with factors, each row's
    verification number T, its score interval (``lo_t``, ``hi_t``), and the block's two
    smallest ratios ``dev_i / √q_lo,i`` over used rows with the row of the smallest.

    Returns ``(rows, mins)``: ``rows[c, j] = (T, lo_t, hi_t)``; ``mins[c, j] = (r1, i1, r2)``."""
    Phi, t, w, cw = _features(x, t, w, mods, spec)
    rows, mins = {}, {}
    used = w > 0
    for (c, j), (L_lo, L_hi) in factors.items():
        tau = taus[c][j]
        tc, z = _targets(t, c, multi), part["z"][:, c]
        dev = _dev(part, c, tau)
        c_lo, c_hi = secant_range(spec.loss, tc, z, z - dev, z + dev)
        W = linalg.solve_triangular(L_lo, Phi.T, lower=True, check_finite=False)
        q_lo = np.einsum("ij,ij->j", W, W)
        W = linalg.solve_triangular(L_hi, Phi.T, lower=True, check_finite=False)
        q_hi = np.einsum("ij,ij->j", W, W)
        gamma = -(w * spec.loss.d1(tc, z))
        eps = float(np.sqrt(max(grad_sq[c], 0.0)))
        s_hi, den = _without_own(q_lo * (1.0 + _SAFE), C * w * c_lo)
        s_lo, _ = _without_own(q_hi * (1.0 - _SAFE), C * w * c_hi)
        s_lo = np.where(np.isfinite(s_lo), s_lo, q_hi * (1.0 - _SAFE))
        with np.errstate(invalid="ignore"):
            T = (C * np.abs(gamma) * np.sqrt(s_hi) + eps) / np.sqrt(den) * (1.0 + _SAFE)
        ratio = np.where(used, dev / np.sqrt(np.maximum(q_lo, 1e-300)), np.inf)
        if ratio.size:
            o = np.argsort(ratio)[:2]
            r2 = ratio[o[1]] if o.size > 1 else np.inf
            mins[c, j] = (float(ratio[o[0]]), int(start + o[0]), float(r2))
        a = z - C * gamma * s_hi
        b = z - C * gamma * s_lo
        e = eps * np.sqrt(s_hi) * (1.0 + _SAFE) + 1e-15 * (1.0 + np.abs(z))
        rows[c, j] = np.stack([T, np.minimum(a, b) - e, np.maximum(a, b) + e])
    return rows, mins


def global_limits(all_mins):
    """The two smallest ratios over every row, per (problem, level): ``(r1, i1, r2)``."""
    out = {}
    for mins in all_mins:
        for key, (r1, i1, r2) in mins.items():
            cands = [(r1, i1), (r2, -1)]
            if key in out:
                cands += [(out[key][0], out[key][1]), (out[key][2], -1)]
            cands.sort(key=lambda v: v[0])
            out[key] = (cands[0][0], cands[0][1], cands[1][0])
    return out


def finish_block(part, got, limits, start):
    """Each row's final bounds (rows, K'): the ball's, intersected with every certified
    curvature interval (``got`` the block's :func:`bound_block` rows; None: balls only)."""
    lo, hi = part["lo"].copy(), part["hi"].copy()
    if got is None:
        return np.stack([lo, hi])
    rows = got[0]
    k = lo.shape[0]
    idx = start + np.arange(k)
    curved = {}
    for (c, j), (T, lo_t, hi_t) in rows.items():
        r1, i1, r2 = limits[c, j]
        limit = np.where(idx == i1, r2, r1)
        ok = np.isfinite(T) & (T < limit)
        clo, chi = curved.get(c, (np.full(k, np.nan), np.full(k, np.nan)))
        curved[c] = (np.where(ok, np.fmax(clo, lo_t), clo), np.where(ok, np.fmin(chi, hi_t), chi))
    for c, (clo, chi) in curved.items():
        lo[:, c] = np.fmax(lo[:, c], clo)
        hi[:, c] = np.fmin(hi[:, c], chi)
    return np.stack([lo, hi])
