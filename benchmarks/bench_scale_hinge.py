#!/usr/bin/env python
"""The hinge loss (L1-SVM) on rows persisted by Dask: fit and a 0.1% removal, passes counted,
against the NumPy path (issue 17; not run in CI).

Claims measured (benchmarks/README.md, "Scale-out on Dask", hinge rows):

* ``LinearClassifier(loss="hinge", C=C).fit`` on a dask X (keep_data=True: the rows stay
  persisted): Newton steps on a smoothed hinge for the start, then the distributed
  decomposition method of ``deltafit._dask._hinge``; its passes over the rows and its
  time against the NumPy path's dual QP fit on the same X as a NumPy array;
* ``remove(ids)`` of 0.1% of the samples by id: the warm re-solve (the removed rows leave the
  working set or the sums; then passes until no row is off its side), its passes (bar ≤ 2)
  and its time against the NumPy path's warm working-set re-solve;
* the deviation of β from the NumPy path's (bar: ≤ 1e-8 · max(1, ‖β‖), both stop at a KKT
  violation ≤ 1e-10 or their rounding floor), the KKT violation and duality gap of the Dask
  result (computed over every row in its last pass).

Both run in this process: the Dask path on the threaded scheduler (``--workers`` threads, the
rows in memory as persisted blocks), so the ratio is the method's cost, not transfers.
Timing: ``benchmarks/_timing.timed``, one run each; the JSON keeps the load average around
each step.  Run with ``OMP_NUM_THREADS=1`` on a shared machine.

With ``--classes K`` (K ≥ 3; default size 200,000 x 50): the one-vs-rest hinge of K classes
(``y`` the argmax of K noisy linear scores), whose K decomposition methods run jointly (one
pass serves every class still solving, ``deltafit._dask._ovr``): its fit's and 0.1%
removal's passes and times against the K binary Dask hinge fits of the same classes (one
after the other: the passes they add up to, and the slowest one's, which the joint count
must equal) and against the NumPy path's one-vs-rest fit and removal.

Usage::

    python benchmarks/bench_scale_hinge.py --quick         # 200,000 x 20
    python benchmarks/bench_scale_hinge.py                 # 1,000,000 x 50
    python benchmarks/bench_scale_hinge.py --classes 10    # 200,000 x 50, 10 classes

Prints one JSON document and then a markdown table.
"""

from __future__ import annotations

import argparse
import json
import os
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from _timing import log, timed  # noqa: E402
from bench_updates import machine_info, source_info  # noqa: E402

import deltafit as df  # noqa: E402

C = 1.0


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--n", type=int, default=0)
    ap.add_argument("--p", type=int, default=0)
    ap.add_argument("--chunk-rows", type=int, default=0)
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--classes", type=int, default=0)
    ap.add_argument("--out", default="")
    args = ap.parse_args()
    if args.classes:
        return main_classes(args)
    q = args.quick
    n = args.n or (200_000 if q else 1_000_000)
    p = args.p or (20 if q else 50)
    rows = args.chunk_rows or (50_000 if q else 125_000)

    import dask.array as da

    import dask

    rng = np.random.default_rng(0)
    X = rng.standard_normal((n, p))
    beta_star = rng.normal(size=p)
    # a noisy linear rule: a third of the rows inside the margin or on the wrong side
    y = (X @ beta_star + 0.5 * np.sqrt(p) * rng.standard_normal(n) > 0).astype(np.int64)
    ids = np.sort(rng.choice(n, max(1, n // 1000), replace=False))
    res = {
        "benchmark": "bench_scale_hinge",
        "quick": q,
        "n": n,
        "p": p,
        "C": C,
        "chunk_rows": rows,
        "workers": args.workers,
        "removed": int(ids.size),
        "scheduler": "threads",
        "machine": machine_info(),
        "source": source_info(),
    }
    with dask.config.set(scheduler="threads", num_workers=args.workers):
        Xd, yd = da.from_array(X, chunks=(rows, -1)), da.from_array(y, chunks=rows)
        small = min(n, 16_000)  # compiles the digest kernel (numba) once
        res["t_warmup"], _ = timed(
            lambda: df.LinearClassifier(loss="hinge").fit(
                da.from_array(X[:small], chunks=(small // 4, -1)),
                da.from_array(y[:small], chunks=small // 4),
            )
        )
        res["load_before"] = os.getloadavg()
        m = df.LinearClassifier(loss="hinge", C=C)
        res["t_fit_dask"], _ = timed(lambda: m.fit(Xd, yd))
        st = m._state
        res["passes_fit"] = int(m.problem_.dask_passes)
        res["passes_fit_start"] = int(st.start_passes)
        res["working_set_fit"] = int(st.work.ids.size)
        res["kkt_fit"] = float(st.result.kkt_violation)
        log(f"dask fit {res['t_fit_dask']:.2f} s, {res['passes_fit']} passes")
        beta_fit = np.r_[m.coef_.ravel(), m.intercept_]
        res["t_remove_dask"], _ = timed(lambda: m.remove(ids))
        res["passes_remove"] = int(m.problem_.dask_passes)
        r = m.problem_.solver_result
        res["kkt_remove"], res["gap_remove"] = float(r.kkt_violation), float(r.duality_gap)
        res["radius_remove"] = float(m.grad_norm_)
        beta = np.r_[m.coef_.ravel(), m.intercept_]
        log(f"dask remove {res['t_remove_dask']:.3f} s, {res['passes_remove']} passes")
    res["load_after_dask"] = os.getloadavg()
    a = df.LinearClassifier(loss="hinge", C=C)
    res["t_fit_numpy"], _ = timed(lambda: a.fit(X, y))
    log(f"numpy fit {res['t_fit_numpy']:.2f} s")
    ba_fit = np.r_[a.coef_.ravel(), a.intercept_]
    res["t_remove_numpy"], _ = timed(lambda: a.remove(ids))
    ba = np.r_[a.coef_.ravel(), a.intercept_]
    res["kkt_numpy_remove"] = float(a.problem_.solver_result.kkt_violation)
    res["deviation_fit"] = float(np.max(np.abs(ba_fit - beta_fit)))
    res["deviation_remove"] = float(np.max(np.abs(ba - beta)))
    scale = max(1.0, float(np.linalg.norm(ba)))
    res["fit_dask_over_numpy"] = res["t_fit_dask"] / res["t_fit_numpy"]
    res["remove_dask_over_numpy"] = res["t_remove_dask"] / res["t_remove_numpy"]
    res["load_at_end"] = os.getloadavg()
    res["bars"] = {
        "remove_le_2_passes": res["passes_remove"] <= 2,
        "same_model_as_numpy": max(res["deviation_fit"], res["deviation_remove"]) <= 1e-8 * scale,
    }
    print(json.dumps(res, indent=1, default=str))
    if args.out:
        with open(args.out, "w") as fh:
            json.dump(res, fh, indent=1, default=str)
    size = f"{n:,} x {p}"
    print(
        f"| hinge fit, {size}, Dask threads (keep_data=True) | {res['t_fit_dask']:.2f} s, "
        f"{res['passes_fit']} passes ({res['passes_fit_start']} smoothed-start Newton) | "
        f"NumPy path {res['t_fit_numpy']:.2f} s | {res['fit_dask_over_numpy']:.2f}x | — |"
    )
    print(
        f"| hinge remove 0.1% ({ids.size:,}) by id, Dask threads | "
        f"{res['t_remove_dask']:.3f} s, {res['passes_remove']} passes, KKT "
        f"{res['kkt_remove']:.1e} | NumPy path {res['t_remove_numpy']:.3f} s | "
        f"{res['remove_dask_over_numpy']:.2f}x | ≤ 2 passes |"
    )
    print(
        f"| the same data, deviation of β from the NumPy path (fit, remove) | "
        f"{res['deviation_fit']:.1e}, {res['deviation_remove']:.1e} | "
        f"1e-8 · max(1, ‖β‖) = {1e-8 * scale:.1e} | — | ≤ the bound |"
    )


def main_classes(args):
    """The ``--classes K`` run (see the module docstring)."""
    import dask.array as da

    import dask

    K = int(args.classes)
    if K < 3:
        raise SystemExit("--classes takes K >= 3")
    n = args.n or (50_000 if args.quick else 200_000)
    p = args.p or 50
    rows = args.chunk_rows or 50_000
    rng = np.random.default_rng(0)
    X = rng.standard_normal((n, p))
    B = rng.normal(size=(p, K))
    y = np.argmax(X @ B + 0.5 * np.sqrt(p) * rng.standard_normal((n, K)), axis=1)
    ids = np.sort(rng.choice(n, max(1, n // 1000), replace=False))
    res = {
        "benchmark": "bench_scale_hinge",
        "part": "classes",
        "classes": K,
        "n": n,
        "p": p,
        "C": C,
        "chunk_rows": rows,
        "workers": args.workers,
        "removed": int(ids.size),
        "scheduler": "threads",
        "machine": machine_info(),
        "source": source_info(),
    }
    with dask.config.set(scheduler="threads", num_workers=args.workers):
        Xd, yd = da.from_array(X, chunks=(rows, -1)), da.from_array(y, chunks=rows)
        small = min(n, 16_000)  # compiles the digest kernel (numba) once
        timed(
            lambda: df.LinearClassifier(loss="hinge").fit(
                da.from_array(X[:small], chunks=(small // 4, -1)),
                da.from_array(y[:small] % 2, chunks=small // 4),
            )
        )
        res["load_before"] = os.getloadavg()
        m = df.LinearClassifier(loss="hinge", C=C)
        res["t_fit_joint"], _ = timed(lambda: m.fit(Xd, yd))
        res["passes_fit_joint"] = int(m.problem_.dask_passes)
        res["passes_fit_per_class"] = [int(m.problem_.for_class(k).dask_passes) for k in range(K)]
        beta_fit = np.column_stack([m.coef_, m.intercept_])
        log(f"joint fit {res['t_fit_joint']:.2f} s, {res['passes_fit_joint']} passes")
        res["t_remove_joint"], _ = timed(lambda: m.remove(ids))
        res["passes_remove_joint"] = int(m.problem_.dask_passes)
        res["kkt_remove_joint"] = max(
            float(m.problem_.for_class(k).solver_result.kkt_violation) for k in range(K)
        )
        beta_rm = np.column_stack([m.coef_, m.intercept_])
        log(f"joint remove {res['t_remove_joint']:.3f} s, {res['passes_remove_joint']} passes")
        t_bin = t_bin_rm = 0.0
        passes_bin = 0
        per = []
        for k in range(K):
            b = df.LinearClassifier(loss="hinge", C=C)
            yk = da.from_array((y == k).astype(np.int64), chunks=rows)
            t, _ = timed(lambda b=b, yk=yk: b.fit(Xd, yk))
            pf = int(b.problem_.dask_passes)
            t2, _ = timed(lambda b=b: b.remove(ids))
            t_bin, t_bin_rm = t_bin + t, t_bin_rm + t2
            per.append((pf, int(b.problem_.dask_passes)))
            passes_bin += pf
        res["t_fit_binary_total"], res["t_remove_binary_total"] = t_bin, t_bin_rm
        res["passes_fit_binary"] = [f for f, _ in per]
        res["passes_remove_binary"] = [r for _, r in per]
        res["passes_fit_binary_total"] = int(passes_bin)
        log(f"{K} binary fits {t_bin:.2f} s, {passes_bin} passes")
    res["load_after_dask"] = os.getloadavg()
    a = df.LinearClassifier(loss="hinge", C=C)
    res["t_fit_numpy"], _ = timed(lambda: a.fit(X, y))
    ba_fit = np.column_stack([a.coef_, a.intercept_])
    res["t_remove_numpy"], _ = timed(lambda: a.remove(ids))
    ba = np.column_stack([a.coef_, a.intercept_])
    log(f"numpy fit {res['t_fit_numpy']:.2f} s")
    res["deviation_fit"] = float(np.max(np.abs(ba_fit - beta_fit)))
    res["deviation_remove"] = float(np.max(np.abs(ba - beta_rm)))
    scale = max(1.0, float(np.max(np.linalg.norm(ba, axis=1))))
    res["load_at_end"] = os.getloadavg()
    res["bars"] = {
        "joint_fit_passes_eq_slowest_class": res["passes_fit_joint"]
        == max(res["passes_fit_binary"]),
        "joint_remove_passes_eq_slowest_class": res["passes_remove_joint"]
        == max(res["passes_remove_binary"]),
        "same_model_as_numpy": max(res["deviation_fit"], res["deviation_remove"]) <= 1e-8 * scale,
    }
    print(json.dumps(res, indent=1, default=str))
    if args.out:
        with open(args.out, "w") as fh:
            json.dump(res, fh, indent=1, default=str)
    size = f"{n:,} x {p}, {K} classes"
    print(
        f"| hinge fit, {size}, Dask threads, joint one-vs-rest | {res['t_fit_joint']:.2f} s, "
        f"{res['passes_fit_joint']} passes | {K} binary Dask fits {t_bin:.2f} s, "
        f"{passes_bin} passes (slowest {max(res['passes_fit_binary'])}); NumPy path "
        f"{res['t_fit_numpy']:.2f} s | {t_bin / res['t_fit_joint']:.2f}x vs binary, "
        f"{res['t_fit_joint'] / res['t_fit_numpy']:.2f}x NumPy's time | passes = slowest |"
    )
    print(
        f"| hinge remove 0.1% ({ids.size:,}), {size}, joint | {res['t_remove_joint']:.3f} s, "
        f"{res['passes_remove_joint']} passes | binary {t_bin_rm:.3f} s, "
        f"{sum(res['passes_remove_binary'])} passes; NumPy path {res['t_remove_numpy']:.3f} s "
        f"| {t_bin_rm / res['t_remove_joint']:.2f}x vs binary | passes = slowest |"
    )
    print(
        f"| the same data, deviation of β from the NumPy path (fit, remove) | "
        f"{res['deviation_fit']:.1e}, {res['deviation_remove']:.1e} | "
        f"1e-8 · max(1, ‖β_k‖) = {1e-8 * scale:.1e} | — | ≤ the bound |"
    )


if __name__ == "__main__":
    main()
