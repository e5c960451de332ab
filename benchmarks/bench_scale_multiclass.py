#!/usr/bin/env python
"""Multiclass (one-vs-rest) logistic regression on rows persisted by Dask: the K binary solves
made jointly, against K separate binary Dask fits, the NumPy path and K dask-ml fits (issue 17;
not run in CI).

Claims measured (benchmarks/README.md, "Scale-out on Dask", multiclass rows):

* ``LinearClassifier(loss="logistic", C=C).fit`` of K classes on a dask X (keep_data=True:
  the rows persisted once, with class indices): the passes over the rows equal those of the
  slowest class's binary Dask fit, not their sum over the K classes (the K binary Dask fits
  of the class-k-against-the-rest problems are run and their passes and times summed: what
  K separate binary models would cost);
* ``remove(ids)`` of 0.1% of the samples by id: the joint warm re-solve's passes and time,
  against the K binary models' removals;
* the same model on the NumPy path in this process (``fit``, ``remove``), and the deviation
  of the coefficients from it (bar: within the two models' certificates);
* dask-ml has no multiclass linear model (dask-ml#761): K fits of dask-ml 2025.1.0's
  ``LogisticRegression(penalty="l2", C=C, solver="lbfgs", solver_kwargs={"normalize":
  False})``, one per class on its ±1 targets, on the remaining rows after the removal (the
  one-vs-rest model a dask-ml user would assemble; dask-glm's objective is deltafit's divided
  by C, see ``bench_scale_logistic.py``).

Data: a digits-like synthetic set, K class centres ``μ_k ~ N(0, I/2)`` in p dimensions and
rows ``μ_{y_i} + N(0, I)``, classes uniform.  Every Dask computation runs on the threaded
scheduler in this process (``--workers`` threads); run with ``OMP_NUM_THREADS=1`` on a shared
machine.  Timing: ``benchmarks/_timing.timed``, one run each; the JSON keeps every time and
the load average.

Usage::

    python benchmarks/bench_scale_multiclass.py --quick       # 20,000 x 20, K = 10
    python benchmarks/bench_scale_multiclass.py               # 200,000 x 50, K = 10

Prints one JSON document and then a markdown table.
"""

from __future__ import annotations

import argparse
import os
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from _dask_setup import class_blobs, emit, header, threads, warm_up  # noqa: E402
from _timing import log, timed  # noqa: E402

import deltafit as df  # noqa: E402

C = 1.0


def full(m):
    return np.column_stack([np.atleast_2d(m.coef_), np.atleast_1d(m.intercept_)])


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--n", type=int, default=0)
    ap.add_argument("--p", type=int, default=0)
    ap.add_argument("--classes", type=int, default=10)
    ap.add_argument("--chunk-rows", type=int, default=0)
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--skip-dask-ml", action="store_true")
    ap.add_argument("--out", default="")
    args = ap.parse_args()
    q = args.quick
    n = args.n or (20_000 if q else 200_000)
    p = args.p or (20 if q else 50)
    K = args.classes
    rows = args.chunk_rows or (5_000 if q else 25_000)

    import dask.array as da

    import dask

    rng = np.random.default_rng(0)
    X, y = class_blobs(n, p, K, rng)
    ids = np.sort(rng.choice(n, max(1, n // 1000), replace=False))
    keep = np.ones(n, dtype=bool)
    keep[ids] = False
    res = header(
        "bench_scale_multiclass",
        q,
        args.workers,
        "threads",
        n=n,
        p=p,
        classes=K,
        C=C,
        chunk_rows=rows,
        removed=int(ids.size),
    )
    with threads(args.workers):
        Xd, yd = da.from_array(X, chunks=(rows, -1)), da.from_array(y, chunks=rows)
        # numba compiles the digest kernel once: a small fit first
        res["t_warmup"] = warm_up(X, y, 4 * rows, parts=4, loss="logistic")
        m = df.LinearClassifier(loss="logistic", C=C)
        res["t_fit_dask"], _ = timed(lambda: m.fit(Xd, yd))
        res["passes_fit"] = int(m.problem_.dask_passes)
        log(f"joint fit {res['t_fit_dask']:.2f} s, {res['passes_fit']} passes")
        res["t_remove_dask"], _ = timed(lambda: m.remove(ids))
        res["passes_remove"] = int(m.problem_.dask_passes)
        res["grad_norm_remove"] = float(m.grad_norm_)
        log(f"joint remove {res['t_remove_dask']:.3f} s, {res['passes_remove']} passes")
        res["load_after_joint"] = os.getloadavg()
        # K separate binary models (what the one-vs-rest costs without the joint passes)
        per = []
        for k in range(K):
            b = df.LinearClassifier(loss="logistic", C=C)
            yk = da.where(yd == k, 1, -1)
            tf, _ = timed(lambda b=b, yk=yk: b.fit(Xd, yk))
            pf = int(b.problem_.dask_passes)
            tr, _ = timed(lambda b=b: b.remove(ids))
            dev = float(np.max(np.abs(full(b)[0] - full(m)[k])))
            per.append(
                {
                    "t_fit": tf,
                    "passes_fit": pf,
                    "t_remove": tr,
                    "passes_remove": int(b.problem_.dask_passes),
                    "deviation_vs_joint": dev,
                    "certificates_sum": float(
                        b.grad_norm_ + m.problem_.for_class(k).solver_result.grad_norm
                    ),
                }
            )
        res["binary"] = per
        res["t_fit_binary_sum"] = sum(r["t_fit"] for r in per)
        res["passes_fit_binary_sum"] = sum(r["passes_fit"] for r in per)
        res["passes_fit_binary_max"] = max(r["passes_fit"] for r in per)
        res["t_remove_binary_sum"] = sum(r["t_remove"] for r in per)
        res["passes_remove_binary_sum"] = sum(r["passes_remove"] for r in per)
        res["passes_remove_binary_max"] = max(r["passes_remove"] for r in per)
        log(
            f"{K} binary fits {res['t_fit_binary_sum']:.2f} s, "
            f"{res['passes_fit_binary_sum']} passes"
        )
        if not args.skip_dask_ml:
            from dask_ml.linear_model import LogisticRegression

            Xk, yk_all = Xd[keep], yd[keep]
            Xk, yk_all = dask.persist(Xk, yk_all)
            t_total, devs = 0.0, []
            for k in range(K):
                dm = LogisticRegression(
                    penalty="l2",
                    C=C,
                    solver="lbfgs",
                    max_iter=1000,
                    solver_kwargs={"normalize": False},
                )
                tk = (yk_all == k).astype(np.int64)
                t, _ = timed(lambda dm=dm, tk=tk: dm.fit(Xk, tk))
                t_total += t
                bdm = np.r_[np.asarray(dm.coef_).ravel(), float(dm.intercept_)]
                devs.append(float(np.max(np.abs(bdm - full(m)[k]))))
            res["t_fit_dask_ml_K"] = t_total
            res["dask_ml_deviation_max"] = max(devs)
            res["remove_speedup_vs_dask_ml"] = t_total / res["t_remove_dask"]
            res["fit_speedup_vs_dask_ml"] = t_total / res["t_fit_dask"]
            log(f"{K} dask-ml fits {t_total:.2f} s")
    a = df.LinearClassifier(loss="logistic", C=C)
    res["t_fit_numpy"], _ = timed(lambda: a.fit(X, y))
    res["t_remove_numpy"], _ = timed(lambda: a.remove(ids))
    res["deviation_vs_numpy"] = float(np.max(np.abs(full(a) - full(m))))
    res["certificates_sum"] = float(a.grad_norm_ + m.grad_norm_)
    res["fit_dask_over_numpy"] = res["t_fit_dask"] / res["t_fit_numpy"]
    res["remove_dask_over_numpy"] = res["t_remove_dask"] / res["t_remove_numpy"]
    res["fit_speedup_vs_binary"] = res["t_fit_binary_sum"] / res["t_fit_dask"]
    res["remove_speedup_vs_binary"] = res["t_remove_binary_sum"] / res["t_remove_dask"]
    res["load_at_end"] = os.getloadavg()
    res["bars"] = {
        "fit_passes_of_the_slowest_class": res["passes_fit"] == res["passes_fit_binary_max"],
        "remove_passes_of_the_slowest_class": res["passes_remove"]
        == res["passes_remove_binary_max"],
        "remove_le_3_passes": res["passes_remove"] <= 3,
        "same_model_as_numpy": res["deviation_vs_numpy"] <= res["certificates_sum"] + 1e-10,
        "each_class_its_binary_model": all(
            r["deviation_vs_joint"] <= r["certificates_sum"] + 1e-10 for r in per
        ),
    }
    size = f"{n:,} x {p}, K = {K}"
    table = [
        f"| logistic OvR fit, {size}, Dask (joint) | {res['t_fit_dask']:.2f} s, "
        f"**{res['passes_fit']} passes** | {K} binary Dask fits {res['t_fit_binary_sum']:.2f} s, "
        f"{res['passes_fit_binary_sum']} passes (slowest {res['passes_fit_binary_max']}) | "
        f"{res['fit_speedup_vs_binary']:.2f}x | passes = the slowest class's |",
        f"| logistic OvR remove 0.1% ({ids.size:,}) by id, Dask | "
        f"{res['t_remove_dask']:.3f} s, **{res['passes_remove']} passes** | {K} binary "
        f"removals {res['t_remove_binary_sum']:.3f} s, {res['passes_remove_binary_sum']} "
        f"passes (slowest {res['passes_remove_binary_max']}) | "
        f"{res['remove_speedup_vs_binary']:.2f}x | ≤ 2–3 passes |",
        f"| the same model, NumPy path | fit {res['t_fit_dask']:.2f} s, remove "
        f"{res['t_remove_dask']:.3f} s | NumPy fit {res['t_fit_numpy']:.2f} s, remove "
        f"{res['t_remove_numpy']:.3f} s | {res['fit_dask_over_numpy']:.2f}x, "
        f"{res['remove_dask_over_numpy']:.2f}x | deviation {res['deviation_vs_numpy']:.1e} "
        f"≤ certificates {res['certificates_sum']:.1e} |",
    ]
    if "t_fit_dask_ml_K" in res:
        table.append(
            f"| OvR remove 0.1% vs {K} dask-ml fits of the remaining rows | "
            f"{res['t_remove_dask']:.3f} s | dask-ml lbfgs {res['t_fit_dask_ml_K']:.2f} s "
            f"(deviation {res['dask_ml_deviation_max']:.1e}) | "
            f"{res['remove_speedup_vs_dask_ml']:.1f}x | — |"
        )
    emit(res, args.out, table)


if __name__ == "__main__":
    main()
