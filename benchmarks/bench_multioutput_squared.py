#!/usr/bin/env python
"""One K-output squared-loss state vs K single-output states: time per single update (not run
in CI).

Claim measured (see benchmarks/README.md, issue 15: "one factorization shared by all classes"):
the squared-loss states fitted on targets of shape (n, K) (K = 10 ±1 one-vs-rest codes of the
digits) update all K columns for about the cost of one single-output update, not K times it:

* primal (``PrimalSquaredState``, Φ = [X/16, 1], p = 65, n = 1,200): remove 1, add 1;
* dual (``DualSquaredState``, RBF kernel, gamma = 0.02, n = 1,000): remove 1, add 1.

The baseline, in the same run on the same data, is K single-output states (one per column)
given the same change; its time is the sum over the K states.  ``ratio = t_K_singles /
t_one_K_output`` (K = 10 is the most it can be: the cost of one shared update over K).

Timing protocol
---------------
* The states are driven through ``apply_change(DataChange)`` as the estimators drive them,
  over one preallocated ledger (no slot is reused and no capacity grows during the timing).
  What a change needs beyond the state (the rows, the kernel column of an added sample) is
  prepared before the clock starts, once, and shared by the multi-output state and the K
  single-output ones: only ``apply_change`` is timed.
* ``--reps`` back-to-back single removals (random live samples), then as many single
  additions (the removed samples, back).  Each step times the K-output state's call and the K
  single-output calls, interleaved, so both see the same machine; the table reports the
  median per update and the mean (amortized: it includes the folds of the pending low-rank
  corrections every ``max_rank`` = 64 updates), the JSON every time.
* The garbage collector is off during each timed call (after one ``gc.collect()`` per
  scenario); no thread limit is set unless ``--threads`` is given.
* After each scenario the deviation ``max|sol_K − [sol_1 … sol_K]| / max(1, max|sol|)``
  between the K-output state and the K single-output states is recorded (bar: 1e-10).
* The CPU time other processes use during each scenario is recorded, and a scenario during
  which they used more than ``--max-contention`` of the CPUs is repeated (``--retries``),
  keeping the least disturbed attempt.

Usage::

    python benchmarks/bench_multioutput_squared.py            # ~30 s
    python benchmarks/bench_multioutput_squared.py --quick    # smaller, a smoke test (~5 s)
    python benchmarks/bench_multioutput_squared.py --out benchmarks/results/multiout.json

Prints one JSON document and then a markdown table (one row per scenario).
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import sys
import time

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from bench_updates import (  # noqa: E402  (shared helpers: machine, source, contention)
    contention_loop,
    log,
    machine_info,
    source_info,
    thread_limit,
)

from deltafit._states._protocol import DataChange, SolverOptions  # noqa: E402
from deltafit._states._squared_dual import DualSquaredState  # noqa: E402
from deltafit._states._squared_primal import PrimalSquaredState  # noqa: E402
from deltafit._states._squared_stats import Rows  # noqa: E402
from deltafit.losses import get_loss  # noqa: E402

C = 1.0
GAMMA = 0.02
DEVIATION_BAR = 1e-10


class Ledger:
    """The part of deltafit's ledger a ``DataChange`` reads (rows, targets by slot, active
    slots, capacity), preallocated and append-only."""

    def __init__(self, X, Y, capacity):
        n = X.shape[0]
        self.X = np.zeros((capacity, X.shape[1]))
        self.X[:n] = X
        self.y = np.zeros((capacity,) + Y.shape[1:])
        self.y[:n] = Y
        self.active = np.zeros(capacity, dtype=bool)
        self.active[:n] = True
        self.end = n
        self.keep_rows = True

    @property
    def capacity(self):
        return self.y.shape[0]


class Column:
    """Column ``k`` of a ledger's targets, for a single-output state (the rest shared)."""

    def __init__(self, led, k):
        self.led, self.k = led, k

    def __getattr__(self, name):
        return getattr(self.led, name)

    @property
    def y(self):
        return self.led.y[:, self.k]


def kernel(A, B):
    from sklearn.metrics.pairwise import rbf_kernel

    return rbf_kernel(A, B, gamma=GAMMA) + 1.0


def digits(n_pool):
    from sklearn.datasets import load_digits

    X, y = load_digits(return_X_y=True)
    Phi = np.hstack([X / 16.0, np.ones((X.shape[0], 1))])[:n_pool]
    Y = -np.ones((Phi.shape[0], 10))
    Y[np.arange(Phi.shape[0]), y[:n_pool]] = 1.0
    return np.ascontiguousarray(Phi), Y


def scenario(cls, n, reps, seed):
    """Remove ``reps`` samples one at a time, then add them back one at a time; returns the
    per-update times of the K-output state and of the K single-output states."""
    Phi, Y = digits(n + reps)
    Phi, Y = Phi[:n], Y[:n]
    K = Y.shape[1]
    led = Ledger(Phi, Y, n + reps)
    opts = SolverOptions(get_loss("squared"), C, 1e-12, 100)
    views = [Column(led, k) for k in range(K)]
    Kfull = kernel(Phi, Phi) if cls.kernel else None
    multi = cls(opts)
    singles = [cls(opts) for _ in range(K)]
    for st, col in zip([multi] + singles, [None] + list(range(K))):
        t = Y if col is None else Y[:, col]
        if cls.kernel:
            st.fit(Kfull, t, led.capacity)
        else:
            st.fit(Phi, t)
    rng = np.random.default_rng(seed)
    removed = rng.choice(n, size=reps, replace=False)
    times = {"remove": ([], []), "add": ([], [])}

    def run(what, change_for):
        gc.collect()
        for i in range(reps):
            changes = change_for(i)
            gc.disable()
            try:
                t0 = time.perf_counter()
                multi.apply_change(changes[0])
                t1 = time.perf_counter()
                for st, ch in zip(singles, changes[1:]):
                    st.apply_change(ch)
                t2 = time.perf_counter()
            finally:
                gc.enable()
            times[what][0].append(t1 - t0)
            times[what][1].append(t2 - t1)
            commit(changes[0])

    def commit(ch):
        if ch.remove_slots is not None:
            led.active[ch.remove_slots] = False
            led.y[ch.remove_slots] = 0.0
        if ch.add_slots is not None:
            s = ch.add_slots
            led.X[s], led.y[s], led.active[s] = ch.rows, ch.t_add, True
            led.end = int(s.max()) + 1

    def removal(i):
        slots = np.array([removed[i]], dtype=np.intp)
        out = []
        for lg in [led] + views:
            ch = DataChange(lg, remove_slots=slots)
            if not cls.kernel:
                ch.rows_remove = Rows(led.X, slots)
            out.append(ch)
        return out

    def addition(i):
        j = removed[i]
        slots = np.array([led.end], dtype=np.intp)
        rows = Phi[j : j + 1]
        extra = {}
        if cls.kernel:
            K_cross = np.zeros((led.capacity, 1))
            A = np.flatnonzero(led.active)
            K_cross[A] = kernel(led.X[A], rows)
            extra = {"K_cross": K_cross, "K_new": kernel(rows, rows)}
        else:
            extra = {"rows_add": rows}
        out = []
        for lg, t in zip([led] + views, [Y[j : j + 1]] + [Y[j : j + 1, k] for k in range(K)]):
            ch = DataChange(lg, add_slots=slots, t_add=t, **extra)
            ch.rows = rows
            out.append(ch)
        return out

    run("remove", removal)
    run("add", addition)
    sol = multi.solution
    both = np.column_stack([s.solution for s in singles])
    dev = float(np.max(np.abs(sol - both)) / max(1.0, float(np.max(np.abs(both)))))
    return times, dev, K


def summarise(problem, what, t_multi, t_singles, dev, K, contention):
    tm, ts = np.asarray(t_multi), np.asarray(t_singles)
    return {
        "problem": problem,
        "scenario": f"{what} 1",
        "K": K,
        "reps": int(tm.size),
        "multi_median_s": float(np.median(tm)),
        "singles_median_s": float(np.median(ts)),
        "multi_mean_s": float(tm.mean()),
        "singles_mean_s": float(ts.mean()),
        "ratio_median": float(np.median(ts) / np.median(tm)),
        "ratio_mean": float(ts.mean() / tm.mean()),
        "max_deviation": dev,
        "pass": bool(dev <= DEVIATION_BAR),
        "times_multi_s": tm.tolist(),
        "times_singles_s": ts.tolist(),
        "contention": contention,
    }


def markdown(rows):
    out = [
        "| problem | scenario | one K-output state (s, median / mean) | K single-output "
        "states (s, median / mean) | ratio (median / mean) | max deviation |",
        "|---|---|---:|---:|---:|---:|",
    ]
    for r in rows:
        out.append(
            f"| {r['problem']} | {r['scenario']} (K = {r['K']}) | "
            f"{r['multi_median_s']:.3g} / {r['multi_mean_s']:.3g} | "
            f"{r['singles_median_s']:.3g} / {r['singles_mean_s']:.3g} | "
            f"{r['ratio_median']:.2f}x / {r['ratio_mean']:.2f}x | "
            f"{r['max_deviation']:.1e} |"
        )
    return "\n".join(out)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--quick", action="store_true", help="smaller problems, fewer updates")
    ap.add_argument("--reps", type=int, default=None, help="single updates per scenario")
    ap.add_argument("--out", help="write the JSON document here as well (and a .md)")
    ap.add_argument("--threads", type=int, default=None, help="BLAS thread limit")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--max-contention", type=float, default=0.10)
    ap.add_argument("--retries", type=int, default=2)
    ap.add_argument("--quiet-wait", type=float, default=30.0)
    args = ap.parse_args(argv)
    reps = args.reps or (40 if args.quick else 200)
    problems = [
        (
            "primal (digits, p = 65, n = 1200)"
            if not args.quick
            else "primal (digits, p = 65, n = 400)",
            PrimalSquaredState,
            400 if args.quick else 1200,
        ),
        (
            "dual (digits, RBF, n = 1000)" if not args.quick else "dual (digits, RBF, n = 300)",
            DualSquaredState,
            300 if args.quick else 1000,
        ),
    ]
    rows = []
    with thread_limit(args.threads):
        for name, cls, n in problems:
            log(f"{name}: {reps} removals, {reps} additions")
            res = {}

            def once(cls=cls, n=n, res=res):
                times, dev, K = scenario(cls, n, reps, args.seed)
                res.update(times=times, dev=dev, K=K)
                return {}

            cont = contention_loop(once, args, name, args.retries)["contention"]
            for what in ("remove", "add"):
                rows.append(summarise(name, what, *res["times"][what], res["dev"], res["K"], cont))
    doc = {
        "benchmark": "multioutput_squared",
        "quick": args.quick,
        "C": C,
        "gamma": GAMMA,
        "deviation_bar": DEVIATION_BAR,
        "machine": machine_info(),
        "source": source_info(),
        "rows": rows,
    }
    table = markdown(rows)
    print(json.dumps(doc, indent=1))
    print()
    print(table)
    if args.out:
        os.makedirs(os.path.dirname(os.path.abspath(args.out)), exist_ok=True)
        with open(args.out, "w") as fh:
            json.dump(doc, fh, indent=1)
        with open(os.path.splitext(args.out)[0] + ".md", "w") as fh:
            fh.write(table + "\n")
    return 0 if all(r["pass"] for r in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
