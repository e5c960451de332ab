#!/usr/bin/env python
"""Logistic regression on rows persisted on a Dask cluster: passes over the data for a 0.1%
removal, against dask-ml's fit of the same model and against the NumPy path (issue 17; not run
in CI).

Claims measured (benchmarks/README.md, "Scale-out on Dask", logistic rows):

* ``LinearClassifier(loss="logistic", C=C).fit`` on a dask X persisted on a ``LocalCluster``
  (keep_data=True: the rows stay there): Newton with gradient and Hessian as cluster
  reductions; the passes over the rows it takes (a cold fit);
* ``remove(ids)`` of 0.1% of the samples by id: the exact warm re-solve (chord steps on the
  stored Hessian corrected for the removed rows), its passes (bar ≤ 2) and its time against
  dask-ml 2025.1.0's ``LogisticRegression(penalty="l2", C=C, solver="lbfgs",
  solver_kwargs={"normalize": False})`` fitted on the remaining rows (bar ≥ 3x faster).
  dask-glm's objective ``Σ log(1 + e^{−t z}) + (1/C) ½‖β‖²`` with the intercept a penalised
  column of ones is deltafit's ``C Σ ℓ + ½‖β‖²`` divided by C (``normalize=False``: its
  default standardises X and penalises the standardised coefficients, another problem;
  dask-ml#240: ``newton`` and ``gradient_descent`` drop the penalty, so lbfgs is the solver
  that honours it);
* the certified ``grad_norm_`` of the re-solve (relative to ‖∇J(0)‖), the deviation of the
  coefficients from the NumPy path's and from dask-ml's, and ‖∇J‖ at dask-ml's answer
  (computed here from the rows);
* the Dask path against the NumPy path (``fit`` and ``remove`` on the same X as a NumPy array
  in this process): bar ≤ 1.3x, on the cluster and on the threaded scheduler in this process
  (the Dask path's own overhead, without worker processes competing for the cores);
* five consecutive 0.1% removals on the threaded scheduler: the passes of each (bar ≤ 2:
  the pass predicted to be a solve's last sums the Hessian, so M never ages) and their time
  against the NumPy path's same removals;
* the steps of the threaded removals (``Steps``): the gather of the removed rows and each
  pass, with its time and whether it summed the Hessian.

A small fit first compiles the workers' digest kernel (numba, once per process; timed
apart as ``t_warmup``), and another one this process's before the threaded timings
(``t_warmup_threads``).  Timing: ``benchmarks/_timing.timed``, one run each (the fits are long);
the JSON keeps every
time and the load average around each step, and ``compiled_kernels``: whether the logistic
passes ran through the compiled GIL-free kernels of ``_dask/_kernels.py`` (numba installed).
Run with ``OMP_NUM_THREADS=1`` on a shared machine.

Usage::

    python benchmarks/bench_scale_logistic.py --quick        # 200,000 x 20
    python benchmarks/bench_scale_logistic.py --n 5000000    # the issue's 5M x 50

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


def compiled_kernels():
    """Whether the Dask logistic passes use the compiled kernels (``_dask/_kernels.py``)."""
    try:
        from deltafit._dask import _newton as dn
    except ImportError:
        return False
    kernels = getattr(dn, "_kernels", None)
    return bool(kernels is not None and kernels() is not None)


def gradient_norm(X, y, beta, C):
    """‖∇J(β)‖ for ``C Σ log(1 + e^{−t z}) + ½‖β‖²`` over ``[X, 1]`` (chunks of rows)."""
    from scipy.special import expit

    g = beta.copy()
    for a in range(0, X.shape[0], 200_000):
        Xa = X[a : a + 200_000]
        t = np.where(y[a : a + 200_000] > 0, 1.0, -1.0)
        z = Xa @ beta[:-1] + beta[-1]
        c = C * (-t * expit(-t * z))
        g[:-1] += Xa.T @ c
        g[-1] += c.sum()
    return float(np.linalg.norm(g))


class Steps:
    """Records the steps of an update on the Dask path while active: the gather of the changed
    rows from the store and each pass over the rows (whether it summed the Hessian), with their
    wall-clock times (``time.perf_counter``)."""

    def __init__(self):
        self.log = []

    def __enter__(self):
        import time

        from deltafit._dask import _newton as _dask_newton
        from deltafit._dask import _rows as _dask_rows

        run, gather = _dask_newton.DaskPasses.run, _dask_rows.DaskRowStore.gather
        log = self.log

        def timed_run(passes, beta, **want):
            t = time.perf_counter()
            out = run(passes, beta, **want)
            log.append(
                ["pass (Hessian)" if want.get("hessian") else "pass", time.perf_counter() - t]
            )
            return out

        def timed_gather(store, ids):
            t = time.perf_counter()
            out = gather(store, ids)
            log.append(["gather", time.perf_counter() - t])
            return out

        self._saved = (run, gather)
        _dask_newton.DaskPasses.run, _dask_rows.DaskRowStore.gather = timed_run, timed_gather
        return self

    def __exit__(self, *exc):
        from deltafit._dask import _newton as _dask_newton
        from deltafit._dask import _rows as _dask_rows

        _dask_newton.DaskPasses.run, _dask_rows.DaskRowStore.gather = self._saved


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--n", type=int, default=0)
    ap.add_argument("--p", type=int, default=0)
    ap.add_argument("--chunk-rows", type=int, default=0)
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--skip-dask-ml", action="store_true")
    ap.add_argument("--out", default="")
    args = ap.parse_args()
    q = args.quick
    n = args.n or (200_000 if q else 1_000_000)
    p = args.p or (20 if q else 50)
    rows = args.chunk_rows or (50_000 if q else 125_000)

    import dask.array as da
    import distributed

    import dask

    rng = np.random.default_rng(0)
    X = rng.standard_normal((n, p))
    beta_star = rng.normal(scale=1.0 / np.sqrt(p), size=p)
    y = (X @ beta_star + 0.5 + rng.logistic(size=n) > 0).astype(np.int64)
    ids = np.sort(rng.choice(n, max(1, n // 1000), replace=False))
    keep = np.ones(n, dtype=bool)
    keep[ids] = False
    res = {
        "benchmark": "bench_scale_logistic",
        "quick": q,
        "n": n,
        "p": p,
        "C": C,
        "chunk_rows": rows,
        "workers": args.workers,
        "removed": int(ids.size),
        "machine": machine_info(),
        "source": source_info(),
        # whether the logistic passes ran through the compiled kernels (numba installed)
        "compiled_kernels": compiled_kernels(),
    }
    with (
        distributed.LocalCluster(
            n_workers=args.workers,
            threads_per_worker=1,
            processes=True,
            dashboard_address=None,
            silence_logs=40,
        ) as cluster,
        distributed.Client(cluster, set_as_default=True) as client,
    ):
        Xd = client.persist(da.from_array(X, chunks=(rows, -1)))
        yd = client.persist(da.from_array(y, chunks=rows))
        distributed.wait([Xd, yd])
        # the workers compile deltafit's digest kernel (numba) once: a small fit first
        small = min(n, 16_000)
        res["t_warmup"], _ = timed(
            lambda: df.LinearClassifier(loss="logistic").fit(
                da.from_array(X[:small], chunks=(small // 8, -1)),
                da.from_array(y[:small], chunks=small // 8),
            )
        )
        res["load_before"] = os.getloadavg()
        m = df.LinearClassifier(loss="logistic", C=C)
        res["t_fit_dask"], _ = timed(lambda: m.fit(Xd, yd))
        res["passes_fit"] = int(m.problem_.dask_passes)
        res["newton_iterations_fit"] = int(m.n_iter_)
        log(f"dask fit {res['t_fit_dask']:.2f} s, {res['passes_fit']} passes")
        g0 = float(np.linalg.norm(m.problem_.newton_point()["gradient_at_zero"]))
        res["t_remove_dask"], _ = timed(lambda: m.remove(ids))
        res["passes_remove"] = int(m.problem_.dask_passes)
        res["grad_norm_remove"] = float(m.grad_norm_)
        res["grad_norm_remove_relative"] = float(m.grad_norm_) / g0
        beta = np.r_[m.coef_.ravel(), m.intercept_]
        res["grad_norm_recomputed"] = gradient_norm(X[keep], y[keep], beta, C)
        log(f"dask remove {res['t_remove_dask']:.3f} s, {res['passes_remove']} passes")
        res["load_after_dask"] = os.getloadavg()
        if not args.skip_dask_ml:
            from dask_ml.linear_model import LogisticRegression

            Xk = client.persist(Xd[keep])
            yk = client.persist(yd[keep])
            distributed.wait([Xk, yk])
            # its default tol (1e-4 on the largest gradient entry); a smaller one changes
            # nothing: L-BFGS-B's factr (1e7, not exposed by dask-ml) stops it first
            for tag, tol in (("", 1e-4),):
                dm = LogisticRegression(
                    penalty="l2",
                    C=C,
                    solver="lbfgs",
                    max_iter=1000,
                    tol=tol,
                    solver_kwargs={"normalize": False},
                )
                with dask.config.set(scheduler=client.get):
                    res["t_fit_dask_ml" + tag], _ = timed(lambda dm=dm: dm.fit(Xk, yk))
                bdm = np.r_[np.asarray(dm.coef_).ravel(), float(dm.intercept_)]
                res["dask_ml_tol" + tag] = tol
                res["dask_ml_deviation" + tag] = float(np.max(np.abs(bdm - beta)))
                res["dask_ml_grad_norm" + tag] = gradient_norm(X[keep], y[keep], bdm, C)
                res["remove_speedup_vs_dask_ml" + tag] = (
                    res["t_fit_dask_ml" + tag] / res["t_remove_dask"]
                )
                log(f"dask-ml fit (tol {tol}) {res['t_fit_dask_ml' + tag]:.2f} s")
            res["fit_speedup_vs_dask_ml"] = res["t_fit_dask_ml"] / res["t_fit_dask"]
    # the Dask path on the threaded scheduler in this process (the same in-memory X): its
    # own overhead over the NumPy path, without worker processes competing for the cores
    # (this process compiles its own digest kernel first, as the workers did: a small fit,
    # else the first timed fit here pays numba's compilation)
    with dask.config.set(scheduler="threads", num_workers=args.workers):
        small = min(n, 16_000)
        res["t_warmup_threads"], _ = timed(
            lambda: df.LinearClassifier(loss="logistic").fit(
                da.from_array(X[:small], chunks=(small // 8, -1)),
                da.from_array(y[:small], chunks=small // 8),
            )
        )
        Xt, yt = da.from_array(X, chunks=(rows, -1)), da.from_array(y, chunks=rows)
        mt = df.LinearClassifier(loss="logistic", C=C)
        res["t_fit_dask_threads"], _ = timed(lambda mt=mt, Xt=Xt, yt=yt: mt.fit(Xt, yt))
        with Steps() as steps:
            res["t_remove_dask_threads"], _ = timed(lambda mt=mt: mt.remove(ids))
        res["steps_remove_threads"] = steps.log
        res["passes_remove_threads"] = int(mt.problem_.dask_passes)
        # consecutive 0.1% removals (M kept exact at each solution: ≤ 2 passes each)
        later = [np.sort(rng.choice(np.setdiff1d(np.arange(n), ids), ids.size, replace=False))]
        for _ in range(4):
            left = np.setdiff1d(mt.sample_ids_, np.concatenate(later))
            later.append(np.sort(rng.choice(left, ids.size, replace=False)))
        res["t_consecutive_dask_threads"], res["passes_consecutive"] = [], []
        res["steps_consecutive_threads"] = []
        for batch in later:
            with Steps() as steps:
                t, _ = timed(lambda mt=mt, batch=batch: mt.remove(batch))
            res["steps_consecutive_threads"].append(steps.log)
            res["t_consecutive_dask_threads"].append(t)
            res["passes_consecutive"].append(int(mt.problem_.dask_passes))
        log(f"consecutive removals: passes {res['passes_consecutive']}")
        del mt, Xt, yt
    a = df.LinearClassifier(loss="logistic", C=C)
    res["t_fit_numpy"], _ = timed(lambda: a.fit(X, y))
    res["t_remove_numpy"], _ = timed(lambda: a.remove(ids))
    ba = np.r_[a.coef_.ravel(), a.intercept_]
    res["t_consecutive_numpy"] = [timed(lambda batch=batch: a.remove(batch))[0] for batch in later]
    res["deviation_vs_numpy"] = float(np.max(np.abs(ba - beta)))
    res["certificates_sum"] = float(a.grad_norm_ + m.grad_norm_)
    res["fit_dask_over_numpy"] = res["t_fit_dask"] / res["t_fit_numpy"]
    res["remove_dask_over_numpy"] = res["t_remove_dask"] / res["t_remove_numpy"]
    res["fit_threads_over_numpy"] = res["t_fit_dask_threads"] / res["t_fit_numpy"]
    res["remove_threads_over_numpy"] = res["t_remove_dask_threads"] / res["t_remove_numpy"]
    res["consecutive_threads_over_numpy"] = sum(res["t_consecutive_dask_threads"]) / sum(
        res["t_consecutive_numpy"]
    )
    res["load_at_end"] = os.getloadavg()
    res["bars"] = {
        "remove_le_2_passes": res["passes_remove"] <= 2,
        "consecutive_le_2_passes": max(res["passes_consecutive"]) <= 2,
        "remove_ge_3x_dask_ml": res.get("remove_speedup_vs_dask_ml", 0) >= 3,
        "dask_le_1.3x_numpy_fit": res["fit_dask_over_numpy"] <= 1.3,
        "dask_le_1.3x_numpy_remove": res["remove_dask_over_numpy"] <= 1.3,
        "threads_le_1.3x_numpy_fit": res["fit_threads_over_numpy"] <= 1.3,
        "threads_le_1.3x_numpy_remove": res["remove_threads_over_numpy"] <= 1.3,
        "same_model_as_numpy": res["deviation_vs_numpy"] <= res["certificates_sum"] + 1e-10,
    }
    print(json.dumps(res, indent=1, default=str))
    if args.out:
        with open(args.out, "w") as fh:
            json.dump(res, fh, indent=1, default=str)
    size = f"{n:,} x {p}"
    print(
        f"| logistic fit, {size}, Dask (keep_data=True) | {res['t_fit_dask']:.2f} s, "
        f"{res['passes_fit']} passes | NumPy path {res['t_fit_numpy']:.2f} s | "
        f"{res['fit_dask_over_numpy']:.2f}x | ≤ 1.3x |"
    )
    print(
        f"| logistic remove 0.1% ({ids.size:,}) by id, Dask | {res['t_remove_dask']:.3f} s, "
        f"{res['passes_remove']} passes, grad_norm_ {res['grad_norm_remove']:.1e} | "
        f"NumPy path {res['t_remove_numpy']:.3f} s | {res['remove_dask_over_numpy']:.2f}x | "
        "≤ 2 passes; ≤ 1.3x |"
    )
    print(
        f"| the same, Dask threaded scheduler ({args.workers} threads, this process) | fit "
        f"{res['t_fit_dask_threads']:.2f} s, remove {res['t_remove_dask_threads']:.3f} s | "
        f"NumPy path | {res['fit_threads_over_numpy']:.2f}x, "
        f"{res['remove_threads_over_numpy']:.2f}x | ≤ 1.3x |"
    )
    print(
        f"| 5 consecutive removals of 0.1%, threaded | passes "
        f"{res['passes_consecutive']}, {sum(res['t_consecutive_dask_threads']):.3f} s | "
        f"NumPy path {sum(res['t_consecutive_numpy']):.3f} s | "
        f"{res['consecutive_threads_over_numpy']:.2f}x | ≤ 2 passes each |"
    )

    def steps(log):
        return ", ".join(f"{k} {1000 * v:.0f} ms" for k, v in log)

    print(
        f"| the threaded removal's steps | {steps(res['steps_remove_threads'])}; "
        f"the last consecutive one: {steps(res['steps_consecutive_threads'][-1])} | — | — | — |"
    )
    for tag in ("",):
        if "t_fit_dask_ml" + tag in res:
            print(
                f"| logistic remove 0.1% vs dask-ml fit (tol {res['dask_ml_tol' + tag]:g}) | "
                f"{res['t_remove_dask']:.3f} s | dask-ml lbfgs "
                f"{res['t_fit_dask_ml' + tag]:.2f} s (‖∇J‖ "
                f"{res['dask_ml_grad_norm' + tag]:.1e}) | "
                f"{res['remove_speedup_vs_dask_ml' + tag]:.1f}x | ≥ 3x |"
            )


if __name__ == "__main__":
    main()
