#!/usr/bin/env python
"""A what-if against the exact update, first call after a fit and warm (issue 32, rows 1-3).

Problem: the 50,000 x 100 synthetic logistic problem of ``bench_bounds.py --part speed`` /
``--part curvature-speed`` (Gaussian features, AR(1) correlation 0.5, noisy linear teacher,
standardised; λ = 0.01, ``C = 1 / (λ n)``), 50 random samples removed.  A what-if is
``deltafit.sensitivity(m, method=...)``, ``remove``, ``distance_bound`` and ``coef_bounds``.

Timed in one run, one BLAS thread:

* **first**: the first what-if (default method) of a fresh fit, for each of ``--firsts`` fits
  of the same data (each the first query of its model version);
* **warm**: later default what-ifs of the same change (min over ``--repeats``);
* **sphere**: ``method="sphere"`` (the papers' ball), min over ``--repeats``;
* **warm_loop**, **sphere_loop**: the same what-ifs as a loop of calls with the collector off
  (the rows above collect before every call, which leaves a short call's data and code out
  of the CPU caches);
* **first_quick**: the first what-if of each fresh fit with the curvature region's
  ``mode="quick"`` (``q_i`` from the row norms: no ``O(n p²)`` pass, looser; its widths are
  reported next to the default's);
* **update**: the exact update (``m.update(remove_ids=...)`` on a deep copy), min over 5.

Ratios are ``t_update / t_whatif`` (bars: first >= 10x, warm >= 100x, sphere >= 1000x).  The
bounds of each what-if are checked against the exact update's coefficients.

    python benchmarks/bench_whatif_first_call.py [--quick] [--out benchmarks/results/first.json]
    python benchmarks/bench_whatif_first_call.py --profile first   # cProfile of one call
"""

from __future__ import annotations

import argparse
import copy
import cProfile
import gc
import os
import pstats
import sys
import time

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from bench_bounds import LAMBDA, synthetic_linear  # noqa: E402
from bench_updates import (  # noqa: E402
    _emit,
    loadavg,
    log,
    machine_info,
    source_info,
    thread_limit,
)

import deltafit  # noqa: E402
from deltafit.sensitivity.regions._curvature import curvature_region  # noqa: E402

BARS = {
    "first": 10.0,
    "warm": 100.0,
    "sphere": 1000.0,
    "warm_loop": 100.0,
    "sphere_loop": 1000.0,
    "first_quick": 10.0,
}


def whatif(m, rem, method="auto"):
    if method == "quick":  # the curvature region with q_i from the row norms (no O(n p²) pass)
        s = deltafit.sensitivity(m, method="sphere").remove(rem)
        try:
            r = curvature_region(s, mode="quick")
        except ValueError:  # a version of deltafit without the mode: no row
            return None
        lo, hi = r.coef_bounds()  # the constant feature last: the intercept, dropped
        return r.distance_bound(), lo[:-1], hi[:-1]
    s = deltafit.sensitivity(m, method=method)
    s.remove(rem)
    d = s.distance_bound()
    lo, hi = s.coef_bounds()
    return d, lo, hi


def _time(fn):
    gc.collect()
    gc.disable()
    try:
        t0 = time.perf_counter()
        out = fn()
        return time.perf_counter() - t0, out
    finally:
        gc.enable()


def run(args):
    n, p = (5000, 20) if args.quick else (50000, 100)
    X, y, _, _, _ = synthetic_linear(n, p, 10, 10, args.seed + 10)

    def fit():
        return deltafit.LinearClassifier(
            loss="logistic", C=1.0 / (LAMBDA * n), fit_intercept=True
        ).fit(X, y)

    rng = np.random.default_rng(args.seed + 5)
    m = fit()
    rem = np.sort(rng.choice(np.asarray(m.sample_ids_), args.k, replace=False))
    m2 = copy.deepcopy(m)
    m2.update(remove_ids=rem)
    b1, b2 = np.ravel(m.coef_), np.ravel(m2.coef_)
    b1 = np.concatenate([b1, np.ravel(m.intercept_)])
    moved = float(np.linalg.norm(b1 - np.concatenate([b2, np.ravel(m2.intercept_)])))

    def check(out):
        # coef_bounds covers the feature weights; distance_bound the whole β (intercept too)
        d, lo, hi = out
        inside = bool(np.all((lo <= b2 + 1e-8) & (b2 <= hi + 1e-8)))
        return inside and lo.size == b2.size and d >= moved * (1.0 - 1e-9)

    if args.profile:
        mm = fit() if args.profile == "first" else m
        if args.profile == "warm":
            whatif(mm, rem)
        pr = cProfile.Profile()
        pr.enable()
        whatif(mm, rem, "sphere" if args.profile == "sphere" else "auto")
        pr.disable()
        pstats.Stats(pr).sort_stats("cumulative").print_stats(30)
        return None, None

    t_first, t_quick, valid = [], [], True
    widths = {}
    for i in range(args.firsts):
        mf = fit()
        # each model version's first default and first quick what-if (independent caches),
        # in alternating order
        for name in ("auto", "quick") if i % 2 == 0 else ("quick", "auto"):
            t, out = _time(lambda mf=mf, name=name: whatif(mf, rem, name))
            if out is None:
                continue
            (t_first if name == "auto" else t_quick).append(t)
            valid &= check(out)
            widths[name] = (float(out[0]), float(np.mean(out[2] - out[1])))
    t_warm, t_sph, t_upd = [], [], []
    whatif(m, rem)
    for _ in range(args.repeats):
        t, out = _time(lambda: whatif(m, rem))
        t_warm.append(t)
        valid &= check(out)
        t, out = _time(lambda: whatif(m, rem, "sphere"))
        t_sph.append(t)
        valid &= check(out)
    # the same what-ifs in a loop of calls (one collection before it, the collector off
    # during it): _time's collection before every call leaves each call's data and code out
    # of the CPU caches, which costs a short call (the sphere) several times its work
    loops = {"warm_loop": [], "sphere_loop": []}
    gc.collect()
    gc.disable()
    try:
        for name, method in (("warm_loop", "auto"), ("sphere_loop", "sphere")):
            for _ in range(args.repeats):
                t0 = time.perf_counter()
                whatif(m, rem, method)
                loops[name].append(time.perf_counter() - t0)
    finally:
        gc.enable()
    for _ in range(5):
        mc = copy.deepcopy(m)
        t, _ = _time(lambda mc=mc: mc.update(remove_ids=rem))
        t_upd.append(t)
    tu = min(t_upd)
    rows = []
    for name, ts in (
        ("first", t_first),
        ("warm", t_warm),
        ("sphere", t_sph),
        ("warm_loop", loops["warm_loop"]),
        ("sphere_loop", loops["sphere_loop"]),
        ("first_quick", t_quick),
    ):
        if not ts:
            continue
        tw = float(np.median(ts)) if name.startswith("first") else min(ts)
        rows.append(
            {
                "what_if": name,
                "t_whatif_s": tw,
                "t_whatif_all_s": ts,
                "t_update_s": tu,
                "ratio": tu / tw,
                "bar": BARS[name],
                "pass": bool(tu / tw >= BARS[name]) and not args.quick,
            }
        )
    doc = {
        "benchmark": "whatif_first_call",
        "problem": {"n": n, "p": p + 1, "removed": args.k, "loss": "logistic", "lambda": LAMBDA},
        "rows": rows,
        "bounds_valid": bool(valid),
        # distance bound and mean coef_bounds width of the default and the quick region
        "bounds_width": widths,
        "t_update_all_s": t_upd,
    }
    md = [
        f"What-if vs exact update, logistic {n} x {p}, remove {args.k}, "
        f"{args.threads} BLAS thread(s)",
        "",
        "| what-if | what-if (ms) | exact update (ms) | update / what-if | bar |",
        "|---|---:|---:|---:|---:|",
    ]
    for r in rows:
        md.append(
            f"| {r['what_if']} | {r['t_whatif_s'] * 1e3:.3f} | {r['t_update_s'] * 1e3:.2f} | "
            f"{r['ratio']:.3g}x | >= {r['bar']:g}x |"
        )
    md.append("")
    md.append(f"bounds contain the exact update's coefficients: {valid}")
    if "quick" in widths:
        (da, wa), (dq, wq) = widths["auto"], widths["quick"]
        md.append(
            f"distance bound / mean coef width: default {da:.4g} / {wa:.4g}, "
            f"quick {dq:.4g} / {wq:.4g} ({wq / wa - 1:+.1%})"
        )
    return doc, "\n".join(md)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="5,000 x 20 smoke test (no bars)")
    ap.add_argument("--k", type=int, default=50, help="samples removed (default 50)")
    ap.add_argument("--firsts", type=int, default=3, help="fresh fits timed for 'first'")
    ap.add_argument("--repeats", type=int, default=30, help="timed warm / sphere what-ifs")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--threads", type=int, default=1, help="BLAS threads (default 1)")
    ap.add_argument("--profile", choices=["first", "warm", "sphere"], default=None)
    ap.add_argument("--out", default=None)
    args = ap.parse_args(argv)
    info = {"machine": machine_info(), "source": source_info(), "loadavg_start": loadavg()}
    t0 = time.perf_counter()
    with thread_limit(args.threads):
        doc, md = run(args)
    if doc is None:
        return
    info["loadavg_end"] = loadavg()
    doc.update(info)
    doc["wall_s"] = time.perf_counter() - t0
    for r in doc["rows"]:
        log(f"{r['what_if']}: {r['t_whatif_s'] * 1e3:.3f} ms, {r['ratio']:.1f}x")
    _emit(doc, md, args.out)


if __name__ == "__main__":
    main()
