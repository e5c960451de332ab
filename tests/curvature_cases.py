"""Random what-if problems for the curvature-aware regions, checked against exact refits.

Shared by ``tests/test_sensitivity_curvature.py`` (a few hundred cases under hypothesis) and
``benchmarks/validity_curvature.py`` (the 10⁴-case run).  Each case draws a small binary
problem (logistic or squared hinge; linear or RBF kernel; intercept on or off; weights or
not; linear interval modes auto / exact / cheap / solve / quick), fits it, applies a random mix of
hypothetical removals, additions, relabels and
reweights (with ``C_new ≠ C`` now and then) to a :class:`deltafit.sensitivity.Sensitivity`,
builds the curvature region (re-centred at its Newton point or not), and refits the changed data
from scratch: the reference.
"""

from __future__ import annotations

import numpy as np
from sklearn.base import clone

import deltafit
from deltafit.sensitivity.regions._curvature import curvature_region

TOL = 1e-7  # the refits and the fitted model are solved to ‖∇‖ ≤ 1e-12 relative


def draw_case(seed):
    """The parameters of one case (a dict), from an integer seed."""
    rng = np.random.default_rng(seed)
    kernel = bool(rng.random() < 0.35)
    n = int(rng.integers(10, 26 if kernel else 45))
    return {
        "seed": int(seed),
        "loss": str(rng.choice(["logistic", "squared_hinge"])),
        "kernel": kernel,
        "n": n,
        "p": int(rng.integers(1, 6)),
        "C": float(10 ** rng.uniform(-1.0, 1.5)),
        "fit_intercept": bool(rng.random() < 0.5),
        "weighted": bool(rng.random() < 0.3),
        "C_new": bool(rng.random() < 0.25),
        "mode": (
            str(rng.choice(["auto", "exact", "cheap", "solve", "quick"])) if not kernel else "auto"
        ),
        "recenter": bool(rng.random() < 0.5),
    }


def run_case(case):
    """Fit, change, bound and refit one case; returns a dict with the worst violation of the
    curvature region by the refit (``violation`` ≤ 0: contained), of the region outside the
    ball (``outside_ball``), and the widths of both."""
    rng = np.random.default_rng(case["seed"] + 7919)
    n, p = case["n"], case["p"]
    X = rng.standard_normal((n, p)) * rng.uniform(0.5, 2.0, size=p)
    teacher = rng.standard_normal(p)
    y = np.where(X @ teacher + 0.7 * rng.standard_normal(n) > 0, 1, -1)
    y[0], y[1] = 1, -1
    w = rng.uniform(0.2, 3.0, size=n) if case["weighted"] else None
    if case["kernel"]:
        model = deltafit.KernelClassifier(
            loss=case["loss"],
            C=case["C"],
            gamma=float(10 ** rng.uniform(-1.5, 0.5)),
            fit_intercept=case["fit_intercept"],
            tol=1e-13,
            max_iter=500,
        )
    else:
        model = deltafit.LinearClassifier(
            loss=case["loss"],
            C=case["C"],
            fit_intercept=case["fit_intercept"],
            tol=1e-13,
            max_iter=500,
        )
    model.fit(X, y, sample_weight=w)
    C2 = case["C"] * float(rng.uniform(0.5, 2.0)) if case["C_new"] else None
    s = deltafit.sensitivity(model, C_new=C2, method="sphere")
    perm = rng.permutation(n)
    k_rem = int(rng.integers(0, max(1, n // 3)))
    k_rel = int(rng.integers(0, 4))
    k_rw = int(rng.integers(0, 4))
    rem, rel, rw = (
        perm[:k_rem],
        perm[k_rem : k_rem + k_rel],
        perm[k_rem + k_rel : k_rem + k_rel + k_rw],
    )
    keep = np.ones(n, dtype=bool)
    keep[rem] = False
    y2, w2 = y.copy(), (np.ones(n) if w is None else w.copy())
    if rem.size and keep.sum() >= 2:
        s.remove(rem)
    else:
        keep[:] = True
    if rel.size:
        y2[rel] = -y2[rel]
        s.relabel(rel, y2[rel])
    if rw.size:
        w2[rw] = rng.uniform(0.0, 3.0, size=rw.size)
        s.reweight(rw, w2[rw])
    k_add = int(rng.integers(0, 5))
    Xa = rng.standard_normal((k_add, p)) * 1.5
    ya = rng.choice([-1, 1], size=k_add)
    wa = rng.uniform(0.2, 3.0, size=k_add) if case["weighted"] else np.ones(k_add)
    if k_add:
        s.add(Xa, ya, sample_weight=wa if case["weighted"] else None)
    X2 = np.vstack([X[keep], Xa])
    y2 = np.concatenate([y2[keep], ya])
    w2 = np.concatenate([w2[keep], wa])
    region = curvature_region(s, mode=case["mode"], recenter=case.get("recenter", True))
    ref = clone(model)
    if C2 is not None:
        ref.set_params(C=C2)
    if np.unique(y2[w2 > 0]).size < 2:
        return None  # one class left: no classifier to compare with
    ref.fit(X2, y2, sample_weight=w2)
    Xq = np.vstack([X, Xa, rng.standard_normal((5, p)) * 2.0])
    lo, hi = region.decision_bounds(Xq)
    blo, bhi = s.decision_bounds(Xq)
    d = ref.decision_function(Xq)
    scale = 1.0 + np.abs(d)
    viol = float(np.max(np.maximum(lo - d, d - hi) / scale))
    outside = float(np.max(np.maximum(blo - lo, hi - bhi) / scale))
    out = {
        "violation": viol,
        "outside_ball": outside,
        "width": float(np.median(hi - lo)),
        "ball_width": float(np.median(bhi - blo)),
    }
    if not case["kernel"]:
        b1 = np.asarray(model.problem_.coef)
        b2 = np.asarray(ref.problem_.coef)
        clo, chi = region.coef_bounds()
        out["violation"] = max(viol, float(np.max(np.maximum(clo - b2, b2 - chi))))
        out["violation"] = max(
            out["violation"], float(np.linalg.norm(b2 - b1) - region.distance_bound())
        )
    return out
