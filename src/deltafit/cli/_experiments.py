"""The ``deltafit stream`` and ``deltafit active`` commands (Sivan et al. §4.4 Fig. 3, §4.3
Fig. 2): run the experiment on a file or bundled data, print a table, save the figure."""

from __future__ import annotations

import argparse
import json
import os
import sys
from typing import TextIO

import numpy as np

from deltafit.cli._data import add_target_argument, describe_classes, load_data, require_classes

__all__ = ["add_experiment_commands", "run_stream_command", "run_active_command"]


def _floats(text, what):
    try:
        vals = [float(v) for v in text.split(",") if v.strip()]
    except ValueError:
        raise ValueError(f"{what} must be comma-separated numbers, got {text!r}") from None
    if not vals:
        raise ValueError(f"{what} is empty")
    return vals


def add_experiment_commands(sub: argparse._SubParsersAction) -> None:
    """Register ``stream`` and ``active`` on an argparse subparsers object."""
    s = sub.add_parser(
        "stream",
        help="KDR vs sliding window, DDM and NORMA on a drifting stream (accuracy vs model "
        "computations)",
        description="Prequential accuracy against batch model computations (Sivan et al. "
        "Fig. 3) of KDR (drift detection by the distance bound), SW (recompute "
        "every period samples), DDM over SW and over NORMA, and NORMA. Kernel "
        "parameters are tuned on the first 1000 samples, as in the paper. Three or "
        "more classes: one-vs-rest models, one KDR ball per class (KDR watches the "
        "largest), NORMA one-vs-rest.",
    )
    s.add_argument(
        "data",
        nargs="?",
        default="checkerboard",
        help="checkerboard (Elwell & Polikar's rotating checkerboard, seeded by "
        "--seed), weather (NOAA weather stream, needs deltafit[drift]), or a "
        "LIBSVM/CSV file whose rows are in arrival order (default checkerboard)",
    )
    add_target_argument(s)
    s.add_argument(
        "--window",
        type=int,
        default=None,
        help="window size (default 500 for checkerboard, 200 otherwise)",
    )
    s.add_argument("--algorithms", default="SW,KDR,DDM(SW),DDM(NORMA),NORMA")
    s.add_argument("--periods", default="25,50,100,250,500,1000", help="SW periods")
    s.add_argument(
        "--thresholds",
        default="0.2,0.3,0.5,0.75,1.0,1.5",
        help="KDR thresholds, as multiples of r0 (the ball between two disjoint "
        "windows of the tuning samples)",
    )
    s.add_argument("--ddm-levels", default="2.5,3,4", help="DDM drift levels")
    s.add_argument("--n", type=int, default=None, help="use the first N samples only")
    s.add_argument("--seed", type=int, default=0, help="checkerboard seed")
    s.add_argument("--out", default=".", help="folder for the figure (stream_fig3_<data>.png)")
    s.add_argument("--json", action="store_true", help="print the results as JSON")
    s.add_argument("--progress", action="store_true", help="progress bars (tqdm)")

    a = sub.add_parser(
        "active",
        help="FGAL vs uncertainty sampling: test accuracy per labeled sample (Fig. 2)",
        description="Pool-based active learning (Sivan et al. §4.3): FGAL(m, p), which labels "
        "p samples per sub-iteration by the bounds of an incremental sphere and "
        "computes one model per m labels, against uncertainty sampling AL(m) and "
        "AL(p), over several seeds. Three or more classes: one-vs-rest models, one "
        "ball per class, uncertainty = the margin between the top two (centre) "
        "decision values.",
    )
    a.add_argument(
        "data",
        help="one of digits, breast_cancer, mnist, or a LIBSVM/CSV file (two or more classes)",
    )
    add_target_argument(a)
    a.add_argument("--m", type=int, default=100)
    a.add_argument("--p", type=int, default=10)
    a.add_argument("--seeds", type=int, default=5)
    a.add_argument("--n-test", type=int, default=350)
    a.add_argument("--n-pool", type=int, default=None, help="pool size (default: the rest)")
    a.add_argument("--initial", type=int, default=50)
    a.add_argument(
        "--gamma", type=float, default=None, help="RBF gamma (default 1 / (n_features * X.var()))"
    )
    a.add_argument("--C", type=float, default=1.0)
    a.add_argument(
        "--center",
        choices=("sphere", "newton"),
        default="sphere",
        help="FGAL's point estimate of the next model: the sphere's centre (the "
        "paper's, suited to narrow kernels) or one Newton step (any kernel "
        "width)",
    )
    a.add_argument(
        "--region",
        choices=("sphere", "curvature"),
        default="sphere",
        help="with --center sphere: the certified region whose centre ranks the "
        "pool, the paper's ball or the curvature-aware region (tighter, a "
        "region rebuild per sub-iteration)",
    )
    a.add_argument(
        "--cold",
        action="store_true",
        help="fit every model from scratch (default: each model after the first "
        "is an exact warm update of the previous one with the new labels)",
    )
    a.add_argument(
        "--intercept",
        action="store_true",
        help="fit deltafit's regularised intercept (off, as in the paper: its "
        "constant kernel term shifts every bound by each labeled sample)",
    )
    a.add_argument("--out", default=".", help="folder for the figure (active_fig2_<data>.png)")
    a.add_argument("--json", action="store_true")


def _stream_data(args):
    from deltafit import datasets

    if args.data in ("checkerboard", "weather") and args.target is not None:
        raise ValueError(
            f"a target column applies to CSV/TSV files only; {args.data} is a bundled stream"
        )
    if args.data == "checkerboard":
        b = datasets.rotating_checkerboard(random_state=args.seed)
        return b.data, b.target, "rotating checkerboard", 500
    if args.data == "weather":
        X, y = datasets.load_weather()
        return X, y, "NOAA weather (Elwell & Polikar)", 200
    X, y, title = load_data(args.data, args.target)
    return np.asarray(X, dtype=np.float64), np.asarray(y), title, 200


def _figure(kind, rows_or_curves, out, name, title):
    try:
        from deltafit import plotting
    except ImportError:  # pragma: no cover
        return None
    os.makedirs(out, exist_ok=True)
    stem = os.path.splitext(os.path.basename(name))[0]
    path = os.path.join(out, f"{kind}_{stem}.png")
    try:
        if kind == "stream_fig3":
            return plotting.tradeoff_curves(rows_or_curves, path, title=title)
        return plotting.active_learning_curves(rows_or_curves, path, title=title)
    except ImportError as exc:
        print(f"no figure: {exc}", file=sys.stderr)
        return None


def run_stream_command(args: argparse.Namespace, out: TextIO | None = None) -> int:
    out = sys.stdout if out is None else out
    from deltafit.stream import tradeoff_experiment

    X, y, title, window = _stream_data(args)
    if args.n is not None:
        if args.n < 2:
            raise ValueError("--n must be at least 2")
        X, y = X[: args.n], y[: args.n]
    require_classes(y, "the stream experiment's classifier")
    window = window if args.window is None else args.window
    algos = [a.strip() for a in args.algorithms.split(",") if a.strip()]
    log = None if args.json else (lambda line: print("  " + line, file=out, flush=True))
    if not args.json:
        print(
            f"{title}: {X.shape[0]} samples x {X.shape[1]} features, window {window}; "
            f"classes {describe_classes(y)}",
            file=out,
        )
    rows, params = tradeoff_experiment(
        X,
        y,
        window=window,
        periods=[int(p) for p in _floats(args.periods, "--periods")],
        thresholds=_floats(args.thresholds, "--thresholds"),
        ddm_levels=_floats(args.ddm_levels, "--ddm-levels"),
        algorithms=algos,
        log=log,
        progress=args.progress,
    )
    fig = _figure(
        "stream_fig3",
        [dict(r, label=r["config"]) for r in rows],
        args.out,
        args.data,
        f"{title}: accuracy vs model computations",
    )
    if args.json:
        print(
            json.dumps(
                {
                    "data": title,
                    "classes": describe_classes(y),
                    "window": window,
                    "params": params,
                    "rows": rows,
                    "figure": fig,
                },
                indent=1,
            ),
            file=out,
        )
        return 0
    print(
        f"tuned on the first 1000 samples: gamma={params['gamma']:.4g}, C={params['C']:g}, "
        f"NORMA gamma={params['norma_gamma']:.4g} eta={params['norma_eta']:g} "
        f"lam={params['norma_lam']:g}, "
        f"r0={params['r0']:.4g}",
        file=out,
    )
    print("\n| algorithm | configuration | prequential accuracy | model computations |", file=out)
    print("|---|---|---|---|", file=out)
    for r in rows:
        print(
            f"| {r['algorithm']} | {r['config']} | {100 * r['accuracy']:.2f}% | "
            f"{r['n_model_computations']} |",
            file=out,
        )
    if fig:
        print(f"\nfigure: {fig}", file=out)
        print(
            "   (prequential accuracy against the number of model computations, one point "
            "per configuration: up and to the left is better)",
            file=out,
        )
    return 0


def run_active_command(args: argparse.Namespace, out: TextIO | None = None) -> int:
    out = sys.stdout if out is None else out
    from deltafit.active import compare_strategies
    from deltafit.models import KernelClassifier

    X, y, title = load_data(args.data, args.target)
    require_classes(y, "the active-learning classifier")
    X = np.asarray(X, dtype=np.float64)
    gamma = args.gamma if args.gamma is not None else 1.0 / (X.shape[1] * X.var())
    est = KernelClassifier(
        loss="squared_hinge", kernel="rbf", gamma=gamma, C=args.C, fit_intercept=args.intercept
    )
    if not args.json:
        why = (
            "from --gamma"
            if args.gamma is not None
            else "'scale', the library's default: 1 / (n_features * X.var())"
        )
        print(
            f"model: {est!r}: the squared hinge loss of Sivan et al.'s experiments (their "
            f"certified spheres); gamma {why}",
            file=out,
        )
    log = None if args.json else (lambda line: print("  " + line, file=out, flush=True))
    curves = compare_strategies(
        est,
        X,
        y,
        m=args.m,
        p=args.p,
        seeds=args.seeds,
        n_test=args.n_test,
        n_pool=args.n_pool,
        initial=args.initial,
        log=log,
        center=args.center,
        region=args.region,
        warm=not args.cold,
    )
    fig = _figure(
        "active_fig2", curves, args.out, args.data, f"{title}: active learning ({args.seeds} seeds)"
    )
    if args.json:
        print(
            json.dumps(
                {
                    "data": title,
                    "classes": describe_classes(y),
                    "gamma": gamma,
                    "C": args.C,
                    "figure": fig,
                    "curves": {
                        k: {
                            "n_labeled": v["n_labeled"].tolist(),
                            "accuracy_mean": v["accuracy_mean"].tolist(),
                            "accuracy_std": v["accuracy_std"].tolist(),
                            "n_model_computations": v["n_model_computations"],
                        }
                        for k, v in curves.items()
                    },
                },
                indent=1,
            ),
            file=out,
        )
        return 0
    names = list(curves)
    print(
        f"\n{title} (classes {describe_classes(y)}): mean test accuracy (%) ± std over "
        f"{args.seeds} seeds",
        file=out,
    )
    print("| labeled | " + " | ".join(names) + " |", file=out)
    print("|---" * (len(names) + 1) + "|", file=out)
    grid = curves[names[0]]["n_labeled"]
    for n in grid:
        cells = []
        for k in names:
            c = curves[k]
            j = np.searchsorted(c["n_labeled"], n)
            if j < c["n_labeled"].size and c["n_labeled"][j] == n:
                mean, std = 100 * c["accuracy_mean"][j], 100 * c["accuracy_std"][j]
                cells.append(f"{mean:.1f} ± {std:.1f}")
            else:
                cells.append("")
        print(f"| {n} | " + " | ".join(cells) + " |", file=out)
    print(
        "model computations: "
        + ", ".join(f"{k} {curves[k]['n_model_computations']}" for k in names),
        file=out,
    )
    if fig:
        print(f"figure: {fig}", file=out)
        print(
            "   (mean test accuracy against the number of labelled samples, one curve per "
            "strategy, error bars ± one standard deviation over the seeds)",
            file=out,
        )
    return 0
