"""The ``deltafit loo`` and ``deltafit search`` commands (cross-validation on a data file)."""

from __future__ import annotations

import argparse
import re
import sys
from typing import TextIO

import numpy as np

from deltafit.cli._data import (
    GAMMA_HELP,
    add_target_argument,
    describe_classes,
    gamma_value,
    load_data,
    require_classes,
    require_numeric,
)

__all__ = ["add_cv_commands", "run_cv_command"]

_POW = re.compile(r"^\s*(-?\d+(?:\.\d+)?)\s*\^\s*(-?\d+)\s*$")


def _number(tok: str) -> float:
    m = _POW.match(tok)
    if m:
        return float(m.group(1)) ** int(m.group(2))
    return float(tok)


def parse_grid(text: str, what: str | None = None) -> list[float]:
    """Values from ``"0.1,1,10"``, ``"2^-5..2^5"`` (every integer power) or a mix of both.

    ``what`` (``"--C"``) starts the message of the ValueError raised for a malformed grid."""
    if what is not None:
        try:
            return parse_grid(text)
        except ValueError as exc:
            raise ValueError(
                f"{what}: {exc}; a grid looks like '0.1,1,10' or '2^-5..2^5'"
            ) from None
    out: list[float] = []
    for part in text.split(","):
        part = part.strip()
        if not part:
            continue
        if ".." in part:
            a, b = part.split("..", 1)
            ma, mb = _POW.match(a), _POW.match(b)
            if not (ma and mb and float(ma.group(1)) == float(mb.group(1))):
                raise ValueError(f"a range must look like 2^-5..2^5, got {part!r}")
            base = float(ma.group(1))
            lo, hi = int(ma.group(2)), int(mb.group(2))
            out.extend(base**k for k in range(lo, hi + 1))
        else:
            try:
                out.append(_number(part))
            except ValueError:
                raise ValueError(f"{part!r} is not a number") from None
    if not out:
        raise ValueError(f"no values in {text!r}")
    return out


def _common(p):
    p.add_argument(
        "data",
        help="a LIBSVM/svmlight or CSV file (target in the last column, or "
        "--target), or one of digits, breast_cancer, mnist",
    )
    add_target_argument(p)
    p.add_argument("--model", choices=("linear", "kernel"), default="linear")
    p.add_argument(
        "--loss",
        choices=("squared", "logistic", "squared_hinge", "hinge"),
        default="squared",
        help="the classifier's loss (default squared, as the library's: closed-form "
        "leave-one-out; the others are exact by certified bounds and refits)",
    )
    p.add_argument(
        "--regression",
        action="store_true",
        help="fit a regressor (squared loss) instead of a classifier (two "
        "classes, or more: one-vs-rest)",
    )
    p.add_argument("--kernel", default="rbf", help="kernel for --model kernel (default rbf)")
    p.add_argument("--no-intercept", action="store_true")
    p.add_argument(
        "--scale",
        choices=("none", "standard", "minmax"),
        default="standard",
        help="feature scaling before everything (minmax: to [-1, 1])",
    )
    p.add_argument(
        "--method", default="auto", help="auto, closed_form, bounds, bounds_early, alo or refit"
    )
    p.add_argument(
        "--cv",
        type=int,
        default=None,
        help="k-fold (stratified for classifiers) instead of leave-one-out",
    )
    p.add_argument("--n-jobs", type=int, default=None)
    p.add_argument("--progress", action="store_true", help="show a progress bar (needs tqdm)")


def add_cv_commands(sub: argparse._SubParsersAction) -> None:
    """Register ``loo`` and ``search`` on an argparse subparsers object."""
    p = sub.add_parser(
        "loo",
        help="leave-one-out (or k-fold) estimate of a model, exact, and how it was obtained",
        description="Exact leave-one-out (or --cv k-fold) cross-validation of one model: closed "
        "form, certified bounds with warm refits, or brute force; ALO on request.",
    )
    _common(p)
    p.add_argument("--C", type=float, default=1.0)
    p.add_argument("--gamma", type=gamma_value, default="scale", help=GAMMA_HELP)
    s = sub.add_parser(
        "search",
        help="choose C (and gamma) by exact leave-one-out with bound pruning",
        description="Grid search by exact leave-one-out (or --cv k-fold): configurations are "
        "pruned as soon as their certified error exceeds the best one's.",
    )
    _common(s)
    s.add_argument("--C", default="2^-5..2^5", help="grid, e.g. '0.1,1,10' or '2^-5..2^5'")
    s.add_argument(
        "--gamma",
        default=None,
        help="grid for --model kernel, e.g. '2^-5..2^5' (default: gamma='scale', "
        "as the library's, not searched)",
    )
    s.add_argument("--no-prune", action="store_true")


def _data(args):
    X, y, title = load_data(args.data, args.target)
    if args.regression:
        require_numeric(y, "--regression")
    else:
        require_classes(y, f"the {args.model} classifier")
    X = np.asarray(X, dtype=float)
    if args.scale == "standard":
        from sklearn.preprocessing import StandardScaler

        X = StandardScaler().fit_transform(X)
    elif args.scale == "minmax":
        from sklearn.preprocessing import MinMaxScaler

        X = MinMaxScaler((-1, 1)).fit_transform(X)
    return X, y, title


def _estimator(args, C, gamma):
    from deltafit.models import (
        KernelClassifier,
        KernelRegressor,
        LinearClassifier,
        LinearRegressor,
    )

    kw = dict(C=C, fit_intercept=not args.no_intercept)
    if args.regression:
        if args.model == "linear":
            return LinearRegressor(**kw)
        return KernelRegressor(kernel=args.kernel, gamma=gamma, **kw)
    if args.model == "linear":
        return LinearClassifier(loss=args.loss, **kw)
    return KernelClassifier(loss=args.loss, kernel=args.kernel, gamma=gamma, **kw)


#: What the model is fitted on, by ``--scale``.
_FEATURES = {
    "standard": "standardised features",
    "minmax": "features scaled to [-1, 1]",
    "none": "the features as read",
}


def _splitter(args):
    if args.cv is None:
        return None
    from sklearn.model_selection import KFold, StratifiedKFold

    cls = KFold if args.regression else StratifiedKFold
    return cls(args.cv, shuffle=True, random_state=0)


def run_cv_command(args: argparse.Namespace, out: TextIO | None = None) -> int:
    """Run ``deltafit loo`` / ``deltafit search``; returns the exit status."""
    out = sys.stdout if out is None else out
    from deltafit.model_selection import LOOSearchCV, cross_validate, loo

    X, y, title = _data(args)
    print(
        f"data: {title}, {X.shape[0]:,} samples x {X.shape[1]:,} features"
        + ("" if args.regression else f"; classes {describe_classes(y)}"),
        file=out,
    )
    cv = _splitter(args)
    if args.command == "loo":
        est = _estimator(args, args.C, args.gamma)
        if cv is None:
            r = loo(est, X, y, method=args.method, n_jobs=args.n_jobs, progress=args.progress)
        else:
            r = cross_validate(
                est, X, y, cv=cv, method=args.method, n_jobs=args.n_jobs, progress=args.progress
            )
        what = "leave-one-out" if cv is None else f"{args.cv}-fold"
        print(f"model: {est!r} on {_FEATURES[args.scale]} (--scale {args.scale})", file=out)
        print(f"{what}: {r.summary()}", file=out)
        if r.classifier and not r.approximate:
            nd = int(r.decided_by_bound.sum())
            print(
                f"  labels decided by certified bounds without a refit: {nd}/{r.n_samples}; "
                f"models (re)computed: {r.n_refits}",
                file=out,
            )
        elif r.approximate:
            print("  ALO is an approximation: these numbers are not certified", file=out)
        return 0
    grid = {"C": parse_grid(args.C, "--C")}
    if args.model == "kernel" and args.gamma is not None:
        grid["gamma"] = parse_grid(args.gamma, "--gamma")
    search = LOOSearchCV(
        _estimator(args, 1.0, "scale"),
        grid,
        cv=cv,
        method=args.method,
        prune=not args.no_prune,
        n_jobs=args.n_jobs,
        progress=args.progress,
    )
    search.fit(X, y)
    res = search.cv_results_
    n_conf = len(res["params"])
    print(
        f"searched {n_conf} configurations in {search.search_time_:.3g} s: "
        f"{int(res['pruned'].sum())} pruned by bounds, {search.n_refits_} refits in all",
        file=out,
    )
    print(
        f"best: {search.best_params_}  score {search.best_score_:.6g} "
        f"({search.scorer_}, {'leave-one-out' if cv is None else f'{args.cv}-fold'}"
        f"{', APPROXIMATE (ALO)' if res['approximate'].any() else ', exact'})",
        file=out,
    )
    order = np.argsort(res["rank_test_score"], kind="stable")[:5]
    for i in order:
        sc = res["mean_test_score"][i]
        shown = (
            f"{sc:.6g}"
            if np.isfinite(sc)
            else (
                f"pruned, in [{res['test_score_lower'][i]:.4g}, {res['test_score_upper'][i]:.4g}]"
            )
        )
        print(
            f"  rank {res['rank_test_score'][i]:>3}  {res['params'][i]}  {shown}  "
            f"refits {res['n_refits'][i]}",
            file=out,
        )
    return 0
