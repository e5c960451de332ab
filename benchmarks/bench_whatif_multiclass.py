#!/usr/bin/env python
"""The exact what-if of a 10-class squared-loss model: its first and its warm queries against a
refit of the data the change leaves (not run in CI).

Claim measured (see benchmarks/README.md): a what-if ("remove these samples: bounds on every
test decision, certified labels") of a multiclass ``LinearClassifier`` answers faster than the
refit it replaces: the K classes share one factorisation, the query rows' features and norms,
and the stored solution's extended-precision gradient is computed only when the cheap certified
bound is too wide to answer without it.  Data: the demo's — scikit-learn's digits, each image also
shifted by up to one pixel (9 rows an image), as 500 random Fourier features
(``deltafit.cli._demo.load_shifted_digits``); the rows of images 0–1,258 train (11,331 rows), the
others are test rows (4,842); the what-if removes the 45 rows of 5 images.

Timing protocol: one BLAS thread; ``time.perf_counter`` around the what-if (``sensitivity(m)``,
``remove``, ``decision_bounds`` and ``predict_certain`` of the test rows) or the refit only,
garbage collector off; "first" is the first query of a freshly fitted model (the median over
``--repeats`` fresh models), "warm" the median of ``--repeats`` later queries, the refit the
minimum of ``--repeats`` fits.  Every query's bounds are checked to contain the refit's
decisions.

Usage::

    python benchmarks/bench_whatif_multiclass.py [--repeats 5] [--out results/whatif.json]

Prints one JSON document and then a markdown row.
"""

from __future__ import annotations

import argparse
import json
import platform
import subprocess

import numpy as np
from _timing import log, timed
from threadpoolctl import threadpool_limits

import deltafit
from deltafit.cli._demo import load_shifted_digits


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--out")
    args = ap.parse_args()
    Z, y, image = load_shifted_digits()
    train = image < 1259
    Xtr, ytr, Xte = Z[train], y[train], Z[~train]
    gone = np.flatnonzero(np.isin(image[train], [3, 250, 500, 750, 1000]))
    keep = np.setdiff1d(np.arange(Xtr.shape[0]), gone)

    def ask(m):
        s = deltafit.sensitivity(m)
        s.remove(gone)
        lo, hi = s.decision_bounds(Xte)
        _, certain = s.predict_certain(Xte)
        return lo, hi, certain

    with threadpool_limits(limits=1, user_api="blas"):
        refit_t, ref = min(
            (
                timed(lambda: deltafit.LinearClassifier().fit(Xtr[keep], ytr[keep]))
                for _ in range(args.repeats)
            ),
            key=lambda r: r[0],
        )
        z = ref.decision_function(Xte)
        first, warm, violated, certified, width = [], [], 0, 1.0, 0.0
        for _ in range(args.repeats):
            m = deltafit.LinearClassifier().fit(Xtr, ytr)
            for k in range(1 + args.repeats):
                t, (lo, hi, certain) = timed(lambda m=m: ask(m))
                (first if k == 0 else warm).append(t)
                slack = 1e-9 * (1.0 + np.abs(z))
                violated += int(np.sum((lo > z + slack) | (z > hi + slack)))
                certified = min(certified, float(certain.mean()))
                width = max(width, float(np.max(hi - lo) / np.max(np.abs(z))))
    log(f"first {np.median(first):.3f} s, warm {np.median(warm):.3f} s, refit {refit_t:.3f} s")
    commit = subprocess.run(
        ["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True
    ).stdout.strip()
    out = {
        "claim": "10-class exact what-if (first and warm query) vs refit",
        "data": (
            "shifted digits, 500 random Fourier features, 11,331 train / 4,842 test, remove 45 rows"
        ),
        "first_s": float(np.median(first)),
        "warm_s": float(np.median(warm)),
        "refit_s": float(refit_t),
        "refit_over_first": float(refit_t / np.median(first)),
        "refit_over_warm": float(refit_t / np.median(warm)),
        "bounds_violated": violated,
        "labels_certified_min": certified,
        "max_width_over_decision_scale": width,
        "machine": {
            "python": platform.python_version(),
            "numpy": np.__version__,
            "blas_threads": 1,
        },
        "commit": commit,
    }
    print(json.dumps(out, indent=2))
    row = (
        "| 10-class exact what-if, shifted digits RFF 500 (11,331 x 500), remove 45 rows | "
        f"{out['first_s'] * 1e3:.0f} ms | {out['warm_s'] * 1e3:.0f} ms | "
        f"{out['refit_s'] * 1e3:.0f} ms | {out['refit_over_first']:.2f}x | "
        f"{out['refit_over_warm']:.2f}x | {violated} | {certified:.1%} |"
    )
    print(
        "\n| scenario | first query | warm query | refit | refit / first | refit / warm | "
        "bounds violated | labels certified |\n|---|---|---|---|---|---|---|---|\n" + row
    )
    if args.out:
        with open(args.out, "w") as f:
            json.dump(out, f, indent=2)
        with open(args.out.rsplit(".", 1)[0] + ".md", "w") as f:
            f.write(row + "\n")


if __name__ == "__main__":
    main()
