"""The ``deltafit treecv`` command: TreeCV (Joulani et al., "Fast cross-validation for
incremental learning") of an incremental learner on a data file."""

from __future__ import annotations

import argparse
import json
import sys
from typing import TextIO

import numpy as np

from deltafit.cli._data import (
    add_target_argument,
    describe_classes,
    format_label,
    load_data,
    require_classes,
    require_numeric,
)

__all__ = ["add_treecv_command", "run_treecv_command"]

LEARNERS = {
    "pegasos": "deltafit.stream.Pegasos (linear SVM, last iterate; --lam; three or more "
    "classes: deltafit.stream.OneVsRest over Pegasos)",
    "lsqsgd": "deltafit.stream.LSQSGD (least squares, averaged SGD in the unit ball; --alpha)",
    "sgd": "sklearn SGDClassifier (hinge)",
    "sgd-regressor": "sklearn SGDRegressor",
    "perceptron": "sklearn Perceptron",
    "multinomial-nb": "sklearn MultinomialNB (non-negative features; use --scale minmax01)",
    "gaussian-nb": "sklearn GaussianNB",
    "linear": "deltafit LinearClassifier (exact updates; --loss, --C): equals k refits",
    "ridge": "deltafit LinearRegressor (exact updates; --C): equals k refits",
}
_REGRESSORS = ("lsqsgd", "sgd-regressor", "ridge")
# every classifier takes any number of classes (pegasos and linear: one-vs-rest)


def add_treecv_command(sub: argparse._SubParsersAction) -> None:
    """Register ``treecv`` on an argparse subparsers object."""
    p = sub.add_parser(
        "treecv",
        help="k-fold / leave-one-out CV of an incremental learner in ~log2(2k) training passes",
        description="TreeCV (Joulani et al. 2015, Algorithm 1): k-fold or leave-one-out "
        "cross-validation of an incremental learner, every sample learned once per "
        "level of a binary tree over the folds instead of k-1 times. Learners: "
        + "; ".join(f"{k}: {v}" for k, v in LEARNERS.items()),
    )
    p.add_argument(
        "data",
        help="a LIBSVM/svmlight or CSV file (target in the last column, or "
        "--target), or one of digits, breast_cancer, mnist",
    )
    add_target_argument(p)
    p.add_argument("--learner", choices=tuple(LEARNERS), default="pegasos")
    p.add_argument(
        "--cv", default="10", help="number of folds, or 'loo' for leave-one-out (default 10)"
    )
    p.add_argument(
        "--permute",
        action="store_true",
        help="assign samples to folds at random (KFold(shuffle=True, --seed)); "
        "default: contiguous folds in file order",
    )
    p.add_argument(
        "--shuffle",
        action="store_true",
        help="randomized TreeCV: each training phase in a random order (--seed)",
    )
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--strategy", choices=("copy", "revert"), default="copy")
    p.add_argument(
        "--scoring", default=None, help="a scikit-learn scorer name (default: accuracy / r2)"
    )
    p.add_argument(
        "--positive-class",
        default=None,
        help="binary task: this label against all others (e.g. 1 for covertype); "
        "without it, three or more classes are learned as they are",
    )
    p.add_argument(
        "--scale",
        choices=("standard", "minmax", "minmax01", "none"),
        default="standard",
        help="feature scaling (minmax: to [-1, 1])",
    )
    p.add_argument(
        "--scale-target",
        action="store_true",
        help="regression: scale the target to [0, 1] (as the paper for LSQSGD)",
    )
    p.add_argument("--lam", type=float, default=1e-4, help="Pegasos lambda (default 1e-4)")
    p.add_argument(
        "--alpha",
        default="sqrt-n",
        help="LSQSGD step size: a number, 'sqrt-n' (n^-1/2, the paper's; default) or "
        "'sqrt-t' (1/sqrt(t))",
    )
    p.add_argument("--C", type=float, default=1.0, help="C of --learner linear / ridge")
    p.add_argument(
        "--loss",
        choices=("squared", "logistic", "squared_hinge", "hinge"),
        default="squared",
        help="loss of --learner linear (default squared, as the library's)",
    )
    p.add_argument("--n-jobs", type=int, default=None)
    p.add_argument("--progress", action="store_true", help="show a progress bar (needs tqdm)")
    p.add_argument("--json", action="store_true", help="print the result as JSON")
    return p


def _labels(value, y):
    """``--positive-class`` as a value of ``y``'s type."""
    for cast in (lambda v: v, float, int):
        try:
            c = cast(value)
        except ValueError:
            continue
        if np.any(y == c):
            return c
    raise ValueError(
        f"--positive-class {value!r} is not a label of the data "
        f"(labels: {', '.join(format_label(v) for v in np.unique(y)[:10])})"
    )


def _data(args):
    """``(X, y, title, classes)``: ``classes`` describes the labels (None for a regressor)."""
    X, y, title = load_data(args.data, args.target)
    X = np.asarray(X.toarray() if hasattr(X, "toarray") else X, dtype=np.float64)
    y = np.asarray(y)
    regression = args.learner in _REGRESSORS
    if regression:
        require_numeric(y, f"--learner {args.learner} (a regressor)")
    if args.scale_target:
        require_numeric(y, "--scale-target")
    classes = None if regression else describe_classes(y)
    if args.positive_class is not None:
        c = _labels(args.positive_class, y)
        y = np.where(y == c, 1, -1)
        title += f", class {args.positive_class} vs rest"
    if not regression:
        require_classes(y, f"--learner {args.learner}")
    if args.scale == "standard":
        from sklearn.preprocessing import StandardScaler

        X = StandardScaler().fit_transform(X)
    elif args.scale in ("minmax", "minmax01"):
        from sklearn.preprocessing import MinMaxScaler

        X = MinMaxScaler((-1, 1) if args.scale == "minmax" else (0, 1)).fit_transform(X)
    if args.scale_target:
        y = y.astype(np.float64)
        lo, hi = float(y.min()), float(y.max())
        y = (y - lo) / (hi - lo) if hi > lo else np.zeros_like(y)
    return np.ascontiguousarray(X), y, title, classes


def _learner(args, n, y):
    from deltafit import stream
    from deltafit.models import LinearClassifier, LinearRegressor

    name = args.learner
    if name == "pegasos":
        if np.unique(y).size > 2:  # binary by its paper: one learner per class
            return stream.OneVsRest(stream.Pegasos(lam=args.lam))
        return stream.Pegasos(lam=args.lam)
    if name == "lsqsgd":
        if args.alpha == "sqrt-n":
            alpha = 1.0 / np.sqrt(n)
        elif args.alpha == "sqrt-t":
            alpha = None
        else:
            try:
                alpha = float(args.alpha)
            except ValueError:
                raise ValueError(
                    f"--alpha must be a number, sqrt-n or sqrt-t, got {args.alpha!r}"
                ) from None
        return stream.LSQSGD(alpha=alpha)
    from sklearn import linear_model, naive_bayes

    if name == "sgd":
        return linear_model.SGDClassifier(random_state=args.seed)
    if name == "sgd-regressor":
        return linear_model.SGDRegressor(random_state=args.seed)
    if name == "perceptron":
        return linear_model.Perceptron(random_state=args.seed)
    if name == "multinomial-nb":
        return naive_bayes.MultinomialNB()
    if name == "gaussian-nb":
        return naive_bayes.GaussianNB()
    if name == "linear":
        return LinearClassifier(loss=args.loss, C=args.C)
    return LinearRegressor(C=args.C)


def _cv(args, n):
    from sklearn.model_selection import KFold, LeaveOneOut

    text = str(args.cv).strip().lower()
    if text in ("loo", "n"):
        return LeaveOneOut(), "leave-one-out"
    try:
        k = int(text)
    except ValueError:
        raise ValueError(f"--cv must be a number of folds or 'loo', got {args.cv!r}") from None
    if k == n:
        return LeaveOneOut(), "leave-one-out"
    if not 2 <= k <= n:
        raise ValueError(f"--cv must be between 2 and the number of samples ({n}), got {k}")
    return KFold(
        k, shuffle=args.permute, random_state=args.seed if args.permute else None
    ), f"{k}-fold"


def run_treecv_command(args: argparse.Namespace, out: TextIO | None = None) -> int:
    """Run ``deltafit treecv``; returns the exit status."""
    out = sys.stdout if out is None else out
    from deltafit.model_selection import treecv

    X, y, title, classes = _data(args)
    n = X.shape[0]
    learner = _learner(args, n, y)
    cv, what = _cv(args, n)
    r = treecv(
        learner,
        X,
        y,
        cv=cv,
        scoring=args.scoring,
        strategy=args.strategy,
        shuffle=args.shuffle,
        random_state=args.seed if args.shuffle else None,
        n_jobs=args.n_jobs,
        progress=args.progress,
    )
    if args.json:
        print(
            json.dumps(
                {
                    "data": title,
                    "n_samples": n,
                    "n_features": X.shape[1],
                    "classes": classes,
                    "learner": repr(learner),
                    "cv": what,
                    "scoring": r.scoring,
                    "score": r.score,
                    "fold_score_std": float(np.nanstd(r.fold_scores)),
                    "n_folds": r.n_folds,
                    "n_sample_updates": r.n_sample_updates,
                    "passes": r.n_sample_updates / n,
                    "peak_models": r.peak_models,
                    "strategy": r.strategy,
                    "shuffle": r.shuffle,
                    "time_s": r.time_s,
                }
            ),
            file=out,
        )
        return 0
    print(
        f"data: {title}, {n:,} samples x {X.shape[1]:,} features"
        + ("" if classes is None else f"; classes {classes}"),
        file=out,
    )
    print(f"learner: {learner!r}", file=out)
    print(r.summary(), file=out)
    return 0
