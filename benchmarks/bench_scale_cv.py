#!/usr/bin/env python
"""Cross-validation of a logistic model on dask input: the joint warm re-solves of the k fold
models against k cold Dask fits and against the NumPy path's cross-validation, and
leave-one-out at scale against the NumPy path (issue 17; not run in CI).

Claims measured (benchmarks/README.md, "Scale-out on Dask", cross-validation rows):

* ``cross_validate(LinearClassifier(loss="logistic", C=C), Xd, yd, cv=KFold(k))`` on a dask X:
  one Dask fit, the k fold models re-solved jointly warm from it (every pass computes every
  fold's gradient), one scoring pass.  Its passes over the rows (``details["n_passes"]``) and
  its time;
* the baseline of the same run: k cold Dask fits, one per training set (``Xd[train]``), each
  scoring its test rows — the passes they take (the fits' plus one scoring pass each) and the
  time.  Bars: fewer passes than the baseline, and faster;
* the NumPy path on the same in-memory X: ``cross_validate(..., method="refit")`` (k fresh
  fits) and the default ``method="auto"`` (op2's bounds, warm refits of the undecided folds);
* the decisions of the joint re-solves against the k cold fits' (max |Δ|; each is within its
  certified solver tolerance) and identical labels;
* leave-one-out (``--parts loo``, at each n of ``--loo-n``): ``loo(LinearClassifier(
  loss="logistic"), Xd, yd)`` — the left-out balls in one pass, the curvature-aware region in
  two more, joint exact refits of what they leave undecided.  The undecided count after the
  balls and after the curvature region, passes and time, against the NumPy path's
  ``loo(method="bounds")`` on the in-memory X (the same screening): labels and the number of
  refits must be equal.

Timing: ``benchmarks/_timing.timed``, one run each; the JSON keeps every time and the load
average around each step.  Threaded scheduler in this process (``--workers`` threads) on
in-memory blocks; run with ``OMP_NUM_THREADS=1`` on a shared machine.

Usage::

    python benchmarks/bench_scale_cv.py --quick        # 50,000 x 10; LOO at 50k, 100k
    python benchmarks/bench_scale_cv.py                # 500,000 x 30, 5 folds; LOO 100k, 500k

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
from deltafit.model_selection import cross_validate  # noqa: E402

C = 1.0


def cold_folds(est, Xd, yd, folds, n):
    """k cold Dask fits (one per training set), each scoring its test rows: decisions in row
    order and the passes over the rows (each fit's, plus one scoring pass per fold)."""
    z = np.empty(n)
    passes = 0
    for train, test in folds:
        m = df.LinearClassifier(**est.get_params()).fit(Xd[train], yd[train])
        passes += int(m.problem_.dask_passes) + 1
        z[test] = np.asarray(m.decision_function(Xd[test]).compute())
    return z, passes


def data(n, p):
    """The synthetic problem: X standard normal, labels of a logistic model."""
    rng = np.random.default_rng(0)
    X = rng.standard_normal((n, p))
    beta_star = rng.normal(scale=1.0 / np.sqrt(p), size=p)
    y = (X @ beta_star + 0.5 + rng.logistic(size=n) > 0).astype(np.int64)
    return X, y


def loo_part(est, X, y, rows, workers, res):
    """Leave-one-out (``loo(method="bounds")``) on dask input: the balls' undecided count, the
    count after the curvature region, passes and time; the NumPy path's ``loo(method=
    "bounds")`` (the same screening, in memory) on the same X; labels compared."""
    import dask.array as da

    import dask
    from deltafit.model_selection import loo

    out = {}
    with dask.config.set(scheduler="threads", num_workers=workers):
        Xd, yd = da.from_array(X, chunks=(rows, -1)), da.from_array(y, chunks=rows)
        out["load_before_dask"] = os.getloadavg()
        out["t_dask"], r = timed(lambda: loo(est, Xd, yd))
        labels = np.asarray(r.y_pred.compute())
        d = r.details
        out.update(
            {
                "undecided_ball": int(d.get("undecided_ball", -1)),
                "undecided_after_screening": int(d["undecided"]),
                "passes": int(d["n_passes"]),
                "fit_passes": int(d["fit_passes"]),
                "screen_passes": int(d["screen_passes"]),
                "resolve_passes": int(d["resolve_passes"]),
                "n_refits": int(r.n_refits),
            }
        )
        log(
            f"loo dask: {out['t_dask']:.2f} s, ball undecided {out['undecided_ball']}, "
            f"after screening {out['undecided_after_screening']}, {out['passes']} passes"
        )
    out["load_before_numpy"] = os.getloadavg()
    out["t_numpy_bounds"], b = timed(lambda: loo(est, X, y, method="bounds"))
    out["numpy_n_refits"] = int(b.n_refits)
    out["numpy_region"] = b.details.get("region")
    out["labels_equal_numpy"] = bool(np.array_equal(labels, b.y_pred))
    out["n_refits_equal_numpy"] = out["n_refits"] == out["numpy_n_refits"]
    out["dask_over_numpy"] = out["t_dask"] / out["t_numpy_bounds"]
    log(f"loo numpy: {out['t_numpy_bounds']:.2f} s, {out['numpy_n_refits']} refits")
    res.setdefault("loo", {})[str(X.shape[0])] = out
    return out


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--n", type=int, default=0)
    ap.add_argument("--p", type=int, default=0)
    ap.add_argument("--k", type=int, default=5)
    ap.add_argument("--chunk-rows", type=int, default=0)
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--out", default="")
    ap.add_argument("--parts", default="kfold,loo", help="kfold, loo or both")
    ap.add_argument(
        "--loo-n",
        default="",
        help="comma-separated n for the leave-one-out part "
        "(default: 50000,100000 quick, 100000,500000 full)",
    )
    args = ap.parse_args()
    parts = set(args.parts.split(","))
    q = args.quick
    n = args.n or (50_000 if q else 500_000)
    p = args.p or (10 if q else 30)
    rows = args.chunk_rows or (10_000 if q else 62_500)
    k = args.k

    import dask.array as da
    from sklearn.model_selection import KFold

    import dask

    res = {
        "benchmark": "bench_scale_cv",
        "quick": q,
        "n": n,
        "p": p,
        "k": k,
        "C": C,
        "chunk_rows": rows,
        "workers": args.workers,
        "scheduler": "threads",
        "omp_num_threads": os.environ.get("OMP_NUM_THREADS"),
        "machine": machine_info(),
        "source": source_info(),
    }
    est = df.LinearClassifier(loss="logistic", C=C)
    md = ["| scenario | deltafit | baseline | ratio | bar |", "|---|---|---|---|---|"]
    if "loo" in parts:
        with dask.config.set(scheduler="threads", num_workers=args.workers):
            # warm-up: the digest kernel (numba) compiles once, on a small fit
            Xs, ys = data(16_000, p)
            timed(
                lambda: df.LinearClassifier(loss="logistic").fit(
                    da.from_array(Xs, chunks=(4_000, -1)), da.from_array(ys, chunks=4_000)
                )
            )
        ns = [int(v) for v in (args.loo_n or ("50000,100000" if q else "100000,500000")).split(",")]
        for nn in ns:
            Xn, yn = data(nn, p)
            o = loo_part(est, Xn, yn, rows, args.workers, res)
            md.append(
                f"| leave-one-out, logistic, {nn:,} x {p}, Dask (threads) | "
                f"{o['t_dask']:.2f} s, {o['passes']} passes ({o['fit_passes']} fit + "
                f"{o['screen_passes']} bounds + {o['resolve_passes']} refit); undecided "
                f"{o['undecided_ball']:,} by the balls, {o['undecided_after_screening']:,} "
                f"after the curvature region | NumPy `loo(method='bounds')` "
                f"{o['t_numpy_bounds']:.2f} s, {o['numpy_n_refits']:,} refits | "
                f"{o['dask_over_numpy']:.2f}x of NumPy; labels "
                f"{'equal' if o['labels_equal_numpy'] else 'DIFFER'}, refits "
                f"{'equal' if o['n_refits_equal_numpy'] else 'DIFFER'} | finishes, labels "
                "equal |"
            )
    if "kfold" in parts:
        X, y = data(n, p)
        cv = KFold(k, shuffle=True, random_state=0)
        folds = list(cv.split(X))
        with dask.config.set(scheduler="threads", num_workers=args.workers):
            Xd, yd = da.from_array(X, chunks=(rows, -1)), da.from_array(y, chunks=rows)
            # warm-up: the digest kernel (numba) compiles once, on a small fit
            small = min(n, 16_000)
            res["t_warmup"], _ = timed(
                lambda: df.LinearClassifier(loss="logistic").fit(
                    da.from_array(X[:small], chunks=(small // 4, -1)),
                    da.from_array(y[:small], chunks=small // 4),
                )
            )
            res["load_before_joint"] = os.getloadavg()
            res["t_joint"], r = timed(lambda: cross_validate(est, Xd, yd, cv=cv))
            z_joint = np.asarray(r.decision.compute())
            labels_joint = np.asarray(r.y_pred.compute())
            res["passes_joint"] = int(r.details["n_passes"])
            res["passes_joint_fit"] = int(r.details["fit_passes"])
            res["passes_joint_resolve"] = int(r.details["resolve_passes"])
            res["newton_chord_steps_joint"] = int(r.n_iter)
            res["fold_scores_joint"] = np.asarray(r.fold_scores).tolist()
            log(f"joint: {res['t_joint']:.2f} s, {res['passes_joint']} passes")
            res["load_before_cold"] = os.getloadavg()
            res["t_cold"], (z_cold, passes_cold) = timed(lambda: cold_folds(est, Xd, yd, folds, n))
            res["passes_cold"] = passes_cold
            log(f"cold: {res['t_cold']:.2f} s, {passes_cold} passes")
        res["load_before_numpy"] = os.getloadavg()
        res["t_numpy_refit"], a = timed(lambda: cross_validate(est, X, y, cv=cv, method="refit"))
        res["t_numpy_auto"], b = timed(lambda: cross_validate(est, X, y, cv=cv))
        res["numpy_auto_method"] = b.method
        res["numpy_auto_refits"] = int(b.n_refits)
        log(f"numpy: refit {res['t_numpy_refit']:.2f} s, auto {res['t_numpy_auto']:.2f} s")
        o = np.argsort(a.test_index)
        res["max_abs_dev_vs_cold"] = float(np.max(np.abs(z_joint - z_cold)))
        res["max_abs_dev_vs_numpy_refit"] = float(np.max(np.abs(z_joint - a.decision[o])))
        res["labels_equal_numpy_refit"] = bool(np.array_equal(labels_joint, a.y_pred[o]))
        res["fold_scores_equal_numpy"] = bool(
            np.array_equal(np.asarray(r.fold_scores), np.asarray(a.fold_scores))
        )
        res["speedup_vs_cold"] = res["t_cold"] / res["t_joint"]
        res["passes_ratio_vs_cold"] = res["passes_cold"] / res["passes_joint"]
        res["joint_over_numpy_refit"] = res["t_joint"] / res["t_numpy_refit"]
        res["joint_over_numpy_auto"] = res["t_joint"] / res["t_numpy_auto"]
        res["bars"] = {
            "fewer_passes_than_cold": res["passes_joint"] < res["passes_cold"],
            "faster_than_cold": res["speedup_vs_cold"] > 1.0,
            "decisions_1e-8_of_numpy_refit": res["max_abs_dev_vs_numpy_refit"] <= 1e-8,
            "labels_equal": res["labels_equal_numpy_refit"],
        }
        md += [
            f"| {k}-fold CV, logistic, {n:,} x {p}, Dask (threads) | joint warm re-solves "
            f"{res['t_joint']:.2f} s, {res['passes_joint']} passes ({res['passes_joint_fit']} "
            f"fit + {res['passes_joint_resolve']} re-solve + 1 scoring) | {k} cold Dask fits "
            f"{res['t_cold']:.2f} s, {res['passes_cold']} passes | "
            f"{res['speedup_vs_cold']:.2f}x time, {res['passes_ratio_vs_cold']:.2f}x passes | "
            "fewer passes, faster |",
            f"| the same, NumPy path on the in-memory X | joint (Dask) {res['t_joint']:.2f} s | "
            f"`method='refit'` {res['t_numpy_refit']:.2f} s; `'auto'` ({b.method}, "
            f"{res['numpy_auto_refits']} folds refit) {res['t_numpy_auto']:.2f} s | "
            f"{res['joint_over_numpy_refit']:.2f}x, {res['joint_over_numpy_auto']:.2f}x of "
            "NumPy | — |",
            f"| decisions vs NumPy `refit` / vs the cold Dask fits | max abs "
            f"{res['max_abs_dev_vs_numpy_refit']:.1e} / {res['max_abs_dev_vs_cold']:.1e}, "
            f"labels {'equal' if res['labels_equal_numpy_refit'] else 'DIFFER'} | | | "
            "≤ 1e-8 |",
        ]
    res["load_at_end"] = os.getloadavg()
    print(json.dumps(res, indent=1, default=str))
    print("\n".join(md))
    if args.out:
        with open(args.out, "w") as fh:
            json.dump(res, fh, indent=1, default=str)
        with open(os.path.splitext(args.out)[0] + ".md", "w") as fh:
            fh.write("\n".join(md) + "\n")


if __name__ == "__main__":
    main()
