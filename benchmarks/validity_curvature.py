#!/usr/bin/env python
"""Validity of the curvature-aware regions: 10⁴ random what-ifs against exact refits.

Each case (``tests/curvature_cases.py``, the generator the unit tests run 200 of) draws a small
binary problem — logistic or squared hinge; linear (interval modes auto / exact / cheap) or RBF
kernel; re-centred at the Newton point or not; intercept on or off; sample weights or not — fits it
to ``‖∇J‖ ≤ 1e-13`` relative,
applies a random mix of hypothetical removals, additions, relabels and reweights (``C_new ≠ C``
in a quarter of the cases), builds ``curvature_region`` and refits the changed data from
scratch.  A violation is a refit decision value (training, added and random rows), coefficient
or distance outside the region by more than 1e-7 (relative), or a region bound outside the
published ball.  The claim: 0 violations.

Usage::

    python benchmarks/validity_curvature.py [--cases 10000] [--seed N]

Prints one JSON document and a markdown row.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from collections import Counter

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests"))

from _timing import log, timed  # noqa: E402

from curvature_cases import TOL, draw_case, run_case  # noqa: E402


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--cases", type=int, default=10000)
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args(argv)
    kinds, bad = Counter(), []
    worst, worst_out, n = -np.inf, -np.inf, 0
    gains = []

    def run():
        nonlocal worst, worst_out, n
        for i in range(args.cases):
            case = draw_case(args.seed * 1_000_003 + i)
            r = run_case(case)
            if r is None:
                continue
            n += 1
            kinds[
                (
                    case["loss"],
                    "kernel" if case["kernel"] else "linear",
                    case["mode"],
                    "re-centred" if case["recenter"] else "around beta1",
                )
            ] += 1
            worst, worst_out = max(worst, r["violation"]), max(worst_out, r["outside_ball"])
            if r["ball_width"] > 0:
                gains.append(r["width"] / r["ball_width"])
            if r["violation"] > TOL or r["outside_ball"] > TOL:
                bad.append({"case": case, "result": r})
            if (i + 1) % 1000 == 0:
                log(f"{i + 1} cases, {len(bad)} violations")

    sec, _ = timed(run)
    out = {
        "cases": n,
        "violations": len(bad),
        "tolerance": TOL,
        "max_violation": float(worst),
        "max_outside_ball": float(worst_out),
        "median_width_over_ball": float(np.median(gains)) if gains else None,
        "by_kind": {" / ".join(k): v for k, v in sorted(kinds.items())},
        "bad": bad[:20],
        "seconds": sec,
    }
    print(json.dumps(out, indent=2))
    print(
        "\n| cases | violations | max violation (relative) | region outside ball "
        "| median width / ball width |"
    )
    print("|---:|---:|---:|---:|---:|")
    print(
        f"| {n} | {len(bad)} | {worst:.2g} | {worst_out:.2g} | "
        f"{out['median_width_over_ball']:.3g} |"
    )
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
