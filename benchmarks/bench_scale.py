#!/usr/bin/env python
"""Data beyond one machine: the squared loss fitted on Dask, out of core from zarr and in
memory, against the disk-read rate, the NumPy path and dask-ml (issue 17; not run in CI).

Claims measured (benchmarks/README.md, "Scale-out on Dask"):

* **out of core** (zarr on disk, X of n × p float64, uncompressed chunks of ``--chunk-rows``
  rows): ``LinearRegressor(loss="squared", keep_data=False).fit`` on ``da.from_zarr`` reads
  the data once; bar: its rate (bytes / fit time) ≥ 50% of the disk-read rate measured in the
  same run (a pass that only reads and sums the same arrays).  The page cache is emptied of the
  files (``posix_fadvise(DONTNEED)``) before each pass, so both read the disk.  The client's
  peak RSS during the fit is sampled (bar ≤ 2 GB), with the bytes the model's ledger holds
  (the range ledger: sorted digests, active flags) and the load average around the fit.  Then one
  removal by id with its row
  (``remove([i], X=row, y=t)``; median of 20; bar ≤ 10 ms) and a 1% removal (bar ≤ 1 s), the
  model after them compared with a full refit on the remaining rows (bar: relative deviation
  of the coefficients ≤ 1e-8);
* **in memory** (X persisted on the cluster; the same X as a NumPy array on the client):
  the Dask fit against the NumPy path's fit of the same model (bar: ≤ 1.3x its time), and
  dask-ml's ``LinearRegression(penalty="l2", C=C)`` (the same objective: dask-glm's
  ``Σ (y − Xβ)² + (1/C) ½‖β‖²`` with the intercept as a penalised column of ones) timed
  side by side, with the deviation of its coefficients from deltafit's.

The cluster is a ``LocalCluster`` of ``--workers`` worker processes of one thread each; the
client (this process) holds only the model.  Timing: ``benchmarks/_timing.timed`` (garbage
collector off during the call), one run each (the fits are long), the JSON keeps every time.

Usage::

    python benchmarks/bench_scale.py --quick          # 400,000 x 20, about a minute
    python benchmarks/bench_scale.py --n 10000000     # 10M x 50 (4 GB) on disk
    python benchmarks/bench_scale.py --n 60000000     # 24 GB: 1.5x a 16 GB machine's memory

Prints one JSON document and then a markdown table (one row per scenario).
"""

from __future__ import annotations

import argparse
import os
import shutil
import sys
import threading

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from _dask_setup import emit, header, linear_rows, process_cluster  # noqa: E402
from _timing import log, timed  # noqa: E402

import deltafit as df  # noqa: E402

C = 1.0


class PeakRSS:
    """The largest resident set size of this process while the block runs (sampled every
    ``every`` seconds)."""

    def __init__(self, every=0.02):
        import psutil

        self.proc, self.every, self.peak = psutil.Process(), every, 0
        self._stop = threading.Event()

    def _run(self):
        while not self._stop.is_set():
            self.peak = max(self.peak, self.proc.memory_info().rss)
            self._stop.wait(self.every)

    def __enter__(self):
        self.start = self.proc.memory_info().rss
        self.peak = self.start
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()
        return self

    def __exit__(self, *exc):
        self._stop.set()
        self._thread.join()
        self.peak = max(self.peak, self.proc.memory_info().rss)


def drop_cache(path):
    """Ask the kernel to drop the page cache of every file under ``path`` (no root needed)."""
    for root, _, files in os.walk(path):
        for f in files:
            fd = os.open(os.path.join(root, f), os.O_RDONLY)
            try:
                os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
            finally:
                os.close(fd)


def write_zarr(path, n, p, rows, client, seed=0):
    """X (n × p, standard normal) and y = X β* + 0.5 + noise, uncompressed, written by the
    workers."""
    import dask.array as da
    import zarr

    if os.path.exists(path):
        shutil.rmtree(path)
    X, y = linear_rows(n, p, rows, seed=seed)
    zX = zarr.create_array(
        store=os.path.join(path, "X"), shape=(n, p), chunks=(rows, p), dtype="f8", compressors=None
    )
    zy = zarr.create_array(
        store=os.path.join(path, "y"), shape=(n,), chunks=(rows,), dtype="f8", compressors=None
    )
    da.store([X, y], [zX, zy], lock=False, scheduler=client.get)


def open_zarr(path):
    import dask.array as da

    return da.from_zarr(os.path.join(path, "X")), da.from_zarr(os.path.join(path, "y"))


def rel(a, b):
    a, b = np.asarray(a, dtype=float), np.asarray(b, dtype=float)
    return float(np.max(np.abs(a - b)) / max(np.max(np.abs(b)), 1e-300))


def full_coef(m):
    return np.append(np.ravel(m.coef_), m.intercept_)


def out_of_core(args, client):
    """The zarr scenarios (see the module docstring)."""
    import dask

    path = args.path
    n, p = args.n, args.p
    Xz = yz = None
    if args.reuse and os.path.exists(path):
        Xz, yz = open_zarr(path)
        if Xz.shape != (n, p) or Xz.chunks[0][0] != args.chunk_rows:
            Xz = yz = None  # another problem's data: written afresh
    if Xz is None:
        log(f"writing {n} x {p} to {path}")
        t_write, _ = timed(lambda: write_zarr(path, n, p, args.chunk_rows, client))
        Xz, yz = open_zarr(path)
    else:
        log(f"reusing {n} x {p} at {path}")
        t_write = None
    nbytes = n * (p + 1) * 8
    drop_cache(path)
    log("read pass")
    with dask.config.set(scheduler=client.get):
        t_read, _ = timed(lambda: dask.compute(Xz.sum(axis=0), yz.sum()))
    drop_cache(path)
    log("fit")
    m = df.LinearRegressor(C=C, keep_data=False)
    load_fit = [os.getloadavg()[0]]
    with dask.config.set(scheduler=client.get), PeakRSS() as rss:
        t_fit, _ = timed(lambda: m.fit(Xz, yz))
    load_fit.append(os.getloadavg()[0])
    led = m._ledger
    ledger_bytes = int(
        led.digests.nbytes
        + led.active.nbytes
        + led.ids.nbytes
        + led.w.nbytes
        + led.y.nbytes
        + led._index.nbytes
    )
    rng = np.random.default_rng(1)
    pick = rng.choice(n, size=20 + max(1, n // 100), replace=False)
    singles, batch = np.sort(pick[:20]), np.sort(pick[20:])
    with dask.config.set(scheduler=client.get):
        rows_1, t_1 = dask.compute(Xz[singles], yz[singles])
        rows_b, t_b = dask.compute(Xz[batch], yz[batch])
    log("removals")
    try:  # the client's first digest loads the compiled kernel: a refused removal, untimed
        m.remove(singles[:1], X=rows_1[:1] + 1.0, y=t_1[:1])
    except ValueError:
        pass
    t_one = []
    for k, i in enumerate(singles.tolist()):
        t, _ = timed(lambda i=i, k=k: m.remove([i], X=rows_1[k : k + 1], y=t_1[k : k + 1]))
        t_one.append(t)
    t_batch, _ = timed(lambda: m.remove(batch, X=rows_b, y=t_b))
    keep = np.ones(n, dtype=bool)
    keep[pick] = False
    log("full refit on the remaining rows")
    ref = df.LinearRegressor(C=C, keep_data=False)
    drop_cache(path)
    with dask.config.set(scheduler=client.get):
        t_refit, _ = timed(lambda: ref.fit(Xz[keep], yz[keep]))
    dev = rel(full_coef(m), full_coef(ref))
    if not args.keep:
        shutil.rmtree(path)
    return {
        "n": n,
        "p": p,
        "bytes": nbytes,
        "chunk_rows": args.chunk_rows,
        "t_write_s": t_write,
        "t_read_s": t_read,
        "read_rate_MBps": nbytes / t_read / 1e6,
        "t_fit_s": t_fit,
        "fit_rate_MBps": nbytes / t_fit / 1e6,
        "load_average_1min_before_after_fit": load_fit,
        "ledger_bytes": ledger_bytes,
        "ledger_bytes_per_sample": ledger_bytes / n,
        "fit_rate_over_read_rate": t_read / t_fit,
        "fit_passes": m.problem_.dask_passes,
        "client_rss_before_fit_MB": rss.start / 1e6,
        "client_peak_rss_fit_MB": rss.peak / 1e6,
        "t_remove_one_s": t_one,
        "t_remove_one_median_s": float(np.median(t_one)),
        "remove_batch_size": int(batch.size),
        "t_remove_batch_s": t_batch,
        "t_refit_s": t_refit,
        "deviation_vs_refit": dev,
    }


def in_memory(args, client):
    """The in-memory scenarios: Dask fit vs the NumPy path vs dask-ml."""
    import dask

    n, p = args.mem_n, args.p
    X, y = linear_rows(n, p, args.chunk_rows, seed=2)
    X, y = client.persist([X, y])
    Xn, yn = dask.compute(X, y, scheduler=client.get)
    out = {"n": n, "p": p}
    log("in memory: NumPy path")
    t_np, a = timed(lambda: df.LinearRegressor(C=C, keep_data=False).fit(Xn, yn))
    log("in memory: Dask path")
    with dask.config.set(scheduler=client.get):
        t_dask, b = timed(lambda: df.LinearRegressor(C=C, keep_data=False).fit(X, y))
    out.update(
        t_numpy_fit_s=t_np,
        t_dask_fit_s=t_dask,
        dask_over_numpy=t_dask / t_np,
        deviation_dask_vs_numpy=rel(full_coef(b), full_coef(a)),
    )
    try:
        from dask_ml.linear_model import LinearRegression
    except ImportError:
        out["dask_ml"] = "not installed"
        return out
    log("in memory: dask-ml LinearRegression")
    with dask.config.set(scheduler=client.get):
        t_dml, dml = timed(
            lambda: LinearRegression(penalty="l2", C=C, solver="lbfgs", fit_intercept=True).fit(
                X, y
            )
        )
    coef = np.append(np.ravel(dml.coef_), dml.intercept_)
    out.update(
        dask_ml="LinearRegression(penalty='l2', C=C, solver='lbfgs')",
        t_dask_ml_fit_s=t_dml,
        dask_ml_over_deltafit=t_dml / t_dask,
        deviation_dask_ml_vs_deltafit=rel(coef, full_coef(b)),
    )
    return out


def markdown(res):
    oc, mem = res["out_of_core"], res["in_memory"]
    rows = [
        "| scenario | deltafit | baseline | ratio | bar |",
        "|---|---|---|---|---|",
        f"| fit from zarr, {oc['n']:,} x {oc['p']} ({oc['bytes'] / 1e9:.1f} GB) | "
        f"{oc['t_fit_s']:.1f} s ({oc['fit_rate_MBps']:.0f} MB/s) | read pass "
        f"{oc['t_read_s']:.1f} s ({oc['read_rate_MBps']:.0f} MB/s) | "
        f"{oc['fit_rate_over_read_rate']:.2f} of the read rate | ≥ 0.5 |",
        f"| client peak RSS during that fit | {oc['client_peak_rss_fit_MB']:.0f} MB (ledger "
        f"{oc['ledger_bytes_per_sample']:.1f} B/sample) | before the fit "
        f"{oc['client_rss_before_fit_MB']:.0f} MB | — | ≤ 2,000 MB |",
        f"| remove 1 by id with its row (median of 20) | "
        f"{oc['t_remove_one_median_s'] * 1e3:.2f} ms | full refit {oc['t_refit_s']:.1f} s | "
        f"{oc['t_refit_s'] / oc['t_remove_one_median_s']:.0f}x | ≤ 10 ms |",
        f"| remove 1% ({oc['remove_batch_size']:,}) by id with the rows | "
        f"{oc['t_remove_batch_s']:.3f} s | full refit {oc['t_refit_s']:.1f} s | "
        f"{oc['t_refit_s'] / oc['t_remove_batch_s']:.0f}x | ≤ 1 s; deviation "
        f"{oc['deviation_vs_refit']:.1e} ≤ 1e-8 |",
        f"| fit in memory, {mem['n']:,} x {mem['p']}: Dask path | {mem['t_dask_fit_s']:.2f} s "
        f"| NumPy path {mem['t_numpy_fit_s']:.2f} s | {mem['dask_over_numpy']:.2f}x the NumPy "
        f"time | ≤ 1.3x; deviation {mem['deviation_dask_vs_numpy']:.1e} |",
    ]
    if "t_dask_ml_fit_s" in mem:
        rows.append(
            f"| same data: dask-ml LinearRegression (l2, same C) | {mem['t_dask_fit_s']:.2f} s "
            f"| dask-ml {mem['t_dask_ml_fit_s']:.2f} s | {mem['dask_ml_over_deltafit']:.1f}x "
            f"| — (dask-ml's deviation {mem['deviation_dask_ml_vs_deltafit']:.1e}) |"
        )
    return "\n".join(rows)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--n", type=int, default=None, help="rows on disk (default 10M; quick 400k)")
    ap.add_argument("--p", type=int, default=None, help="features (default 50; quick 20)")
    ap.add_argument(
        "--mem-n",
        type=int,
        default=None,
        help="rows of the in-memory problem (default 2M; quick 200k)",
    )
    ap.add_argument(
        "--chunk-rows", type=int, default=None, help="rows per chunk (default 250k; quick 50k)"
    )
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument(
        "--path",
        default=os.path.join(os.environ.get("TMPDIR", "/tmp"), "deltafit_bench_scale.zarr"),
    )
    ap.add_argument("--keep", action="store_true", help="keep the zarr data afterwards")
    ap.add_argument(
        "--reuse",
        action="store_true",
        help="read the zarr data left by an earlier run with --keep (same n, p and "
        "chunks) instead of writing it again",
    )
    ap.add_argument("--out", default=None)
    args = ap.parse_args(argv)
    q = args.quick
    args.n = args.n or (400_000 if q else 10_000_000)
    args.p = args.p or (20 if q else 50)
    args.mem_n = args.mem_n or (200_000 if q else 2_000_000)
    args.chunk_rows = args.chunk_rows or (50_000 if q else 250_000)

    with process_cluster(args.workers) as client:
        res = header("bench_scale", q, args.workers, "LocalCluster (processes)", C=C)
        res["out_of_core"] = out_of_core(args, client)
        res["in_memory"] = in_memory(args, client)
    oc, mem = res["out_of_core"], res["in_memory"]
    res["bars"] = {
        "fit_rate_ge_half_read_rate": oc["fit_rate_over_read_rate"] >= 0.5,
        "client_peak_le_2GB": oc["client_peak_rss_fit_MB"] <= 2000,
        "remove_one_le_10ms": oc["t_remove_one_median_s"] <= 0.010,
        "remove_1pct_le_1s": oc["t_remove_batch_s"] <= 1.0,
        "deviation_le_1e-8": oc["deviation_vs_refit"] <= 1e-8,
        "dask_le_1.3x_numpy": mem["dask_over_numpy"] <= 1.3,
    }
    res["load_average_at_end"] = os.getloadavg()
    emit(res, args.out, markdown(res).split("\n"))


if __name__ == "__main__":
    main()
