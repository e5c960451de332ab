"""Leave-one-out data values: ``deltafit.attribution.data_values`` against brute force and
against pyDVL's ``LOOValuation`` on the same model and data (issue 33, second bar).

For each data set a deltafit ``LinearClassifier`` (logistic) is valued with the accuracy on a
held-out split.  Checked: the values equal those of n fresh fits without each sample (brute
force in this process) exactly, and equal pyDVL's; the bar is pyDVL's time / ours >= 100.

pyDVL 0.10 pins NumPy < 2, so its side runs in its own virtual environment, in a subprocess of
this script (the same data, the same deltafit estimator imported from this checkout)::

    python3 -m venv /path/to/pydvl-venv
    /path/to/pydvl-venv/bin/pip install "pydvl==0.10.*" "numpy<2" scikit-learn
    OMP_NUM_THREADS=1 python benchmarks/bench_attribution_values.py \\
        --pydvl-python /path/to/pydvl-venv/bin/python

Without ``--pydvl-python`` only the brute-force comparison runs.  One BLAS thread on both
sides.  Prints one JSON document and markdown rows (``--out`` also writes them).
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
import subprocess  # noqa: E402
import sys  # noqa: E402
import time  # noqa: E402

import numpy as np  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))
SRC = os.path.join(os.path.dirname(HERE), "src")
BAR = 100.0
SETS = {  # name: (C, n_train, n_test)
    "breast_cancer": (1.0, 455, 114),
    "digits": (0.1, 600, 300),
}


def data(name):
    from sklearn.datasets import load_breast_cancer, load_digits
    from sklearn.model_selection import train_test_split
    from sklearn.preprocessing import StandardScaler

    C, n_train, n_test = SETS[name]
    X, y = (load_breast_cancer if name == "breast_cancer" else load_digits)(return_X_y=True)
    X = StandardScaler().fit_transform(X) if name == "breast_cancer" else X / 16.0
    Xtr, Xte, ytr, yte = train_test_split(
        X, y, train_size=n_train, test_size=n_test, stratify=y, random_state=0
    )
    return C, Xtr, ytr, Xte, yte


def pydvl_side(name):
    """pyDVL's LOOValuation (run in pyDVL's environment); prints JSON."""
    from pydvl.valuation import Dataset, LOOValuation, ModelUtility, SupervisedScorer

    import deltafit

    C, Xtr, ytr, Xte, yte = data(name)
    train, test = Dataset(Xtr, ytr), Dataset(Xte, yte)
    scorer = SupervisedScorer("accuracy", test, default=0.0, range=(0.0, 1.0))
    utility = ModelUtility(
        deltafit.LinearClassifier(loss="logistic", C=C), scorer, catch_errors=False
    )
    t0 = time.perf_counter()
    val = LOOValuation(utility).fit(train)
    t = time.perf_counter() - t0
    res = val.values()
    order = np.argsort(res.indices)
    print(json.dumps({"time_s": t, "values": res.values[order].tolist(), "numpy": np.__version__}))


def ours(name, brute):
    sys.path.insert(0, HERE)
    from _timing import timed

    import deltafit
    from deltafit.attribution import data_values

    C, Xtr, ytr, Xte, yte = data(name)
    t_fit, m = timed(lambda: deltafit.LinearClassifier(loss="logistic", C=C).fit(Xtr, ytr))
    t_val, v = timed(lambda: data_values(m, Xte, yte))
    out = {
        "set": name,
        "n_train": len(Xtr),
        "n_test": len(Xte),
        "C": C,
        "fit_s": t_fit,
        "data_values_s": t_val,
        "values": v.values,
    }
    if brute:
        full = m.score(Xte, yte)
        t0 = time.perf_counter()
        bf = np.empty(len(Xtr))
        for i in range(len(Xtr)):
            keep = np.arange(len(Xtr)) != i
            mi = deltafit.LinearClassifier(loss="logistic", C=C).fit(Xtr[keep], ytr[keep])
            bf[i] = full - mi.score(Xte, yte)
        out["brute_s"] = time.perf_counter() - t0
        out["equal_brute"] = bool(
            np.array_equal(np.round(bf * len(Xte)), np.round(v.values * len(Xte)))
        )
        out["max_diff_brute"] = float(np.abs(bf - v.values).max())
    return out


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sets", default=",".join(SETS))
    ap.add_argument("--pydvl-python", default=None, help="python of pyDVL's environment")
    ap.add_argument("--no-brute", action="store_true")
    ap.add_argument("--side", default=None, help=argparse.SUPPRESS)
    ap.add_argument("--out", default=None)
    ap.add_argument(
        "--quick",
        action="store_true",
        help="breast cancer only, without pyDVL: a smoke test (no bar applied)",
    )
    a = ap.parse_args(argv)
    if a.quick:
        a.sets, a.pydvl_python = "breast_cancer", None
    if a.side:
        sys.path.insert(0, SRC)
        pydvl_side(a.side)
        return 0
    sys.path.insert(0, HERE)
    from _timing import log
    from bench_updates import machine_info, source_info

    results, rows, ok = [], [], True
    for name in a.sets.split(","):
        r = ours(name, not a.no_brute)
        log(
            f"{name}: data_values {r['data_values_s']:.2f} s, brute force "
            f"{r.get('brute_s', float('nan')):.1f} s, equal {r.get('equal_brute')}"
        )
        if a.pydvl_python:
            env = dict(os.environ, PYTHONPATH=SRC)
            p = subprocess.run(
                [a.pydvl_python, os.path.abspath(__file__), "--side", name],
                capture_output=True,
                text=True,
                env=env,
                check=False,
            )
            if p.returncode:
                raise RuntimeError(f"pyDVL side failed:\n{p.stderr[-3000:]}")
            d = json.loads(p.stdout.strip().splitlines()[-1])
            pv = np.asarray(d["values"])
            r["pydvl_s"], r["pydvl_numpy"] = d["time_s"], d["numpy"]
            r["equal_pydvl"] = bool(
                np.array_equal(np.round(pv * r["n_test"]), np.round(r["values"] * r["n_test"]))
            )
            r["ratio_pydvl"] = d["time_s"] / r["data_values_s"]
            ok &= r["equal_pydvl"] and r["ratio_pydvl"] >= BAR
            log(
                f"{name}: pyDVL LOOValuation {d['time_s']:.1f} s, equal {r['equal_pydvl']}, "
                f"ratio {r['ratio_pydvl']:.0f}"
            )
        ok &= r.get("equal_brute", True)
        r["values"] = None
        results.append(r)
        rows.append(
            f"| data_values, {name} logistic, {r['n_train']} train / {r['n_test']} test "
            f"(accuracy) | {r['data_values_s']:.2f} s | pyDVL LOOValuation "
            f"{r.get('pydvl_s', float('nan')):.1f} s (NumPy {r.get('pydvl_numpy', '?')}) | "
            f"**{r.get('ratio_pydvl', float('nan')):.0f}x** (bar {BAR:.0f}x) | equal to pyDVL: "
            f"{r.get('equal_pydvl')}; to {r['n_train']} fresh fits: {r.get('equal_brute')} |"
        )
    doc = {
        "bench": "attribution_values",
        "results": results,
        "bar_ratio": BAR,
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
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
