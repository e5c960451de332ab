"""The ``deltafit attribute`` command: which training samples of a data file matter
(:mod:`deltafit.attribution`): the most valuable and most harmful samples by exact
leave-one-out data value on a held-out split, and the least robust held-out predictions
(how few removed samples change them, certified below and verified above)."""

from __future__ import annotations

import sys

import numpy as np

from deltafit.cli._cv import _FEATURES, _data, _estimator
from deltafit.cli._data import GAMMA_HELP, add_target_argument, describe_classes, gamma_value

__all__ = ["add_attribute_command", "run_attribute_command"]


def add_attribute_command(sub):
    """Register ``attribute`` on an argparse subparsers object."""
    p = sub.add_parser(
        "attribute",
        help="which training samples matter: exact data values and robustness",
        description="Fit a model on a training split, then value every training sample by the "
        "exact leave-one-out change of the held-out score (no refits), and audit "
        "the least robust held-out predictions: a certified lower bound and a "
        "verified witness set of removals that change them.",
    )
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
        default="logistic",
        help="the classifier's loss (default logistic)",
    )
    p.add_argument(
        "--regression", action="store_true", help="fit a regressor (squared loss); values use R²"
    )
    p.add_argument("--kernel", default="rbf", help="kernel for --model kernel (default rbf)")
    p.add_argument("--no-intercept", action="store_true")
    p.add_argument("--scale", choices=("none", "standard", "minmax"), default="standard")
    p.add_argument("--C", type=float, default=1.0)
    p.add_argument("--gamma", type=gamma_value, default="scale", help=GAMMA_HELP)
    p.add_argument(
        "--test-size",
        type=float,
        default=0.2,
        help="held-out fraction the values are scored on (default 0.2)",
    )
    p.add_argument(
        "--scoring",
        default=None,
        help="scikit-learn scorer of the held-out split (e.g. neg_log_loss, which "
        "ranks more finely than accuracy's steps); default the model's score",
    )
    p.add_argument("--top", type=int, default=5, help="samples listed each way (default 5)")
    p.add_argument(
        "--audit",
        type=int,
        default=5,
        help="held-out points audited for robustness, smallest margin first (default 5; 0: none)",
    )
    p.add_argument(
        "--max-removals", type=int, default=5, help="largest witness set searched for (default 5)"
    )


def _positive(v, name, zero=False):
    if v < (0 if zero else 1):
        raise ValueError(
            f"{name} must be a {'non-negative' if zero else 'positive'} integer, got {v}"
        )


def run_attribute_command(args, out=None):
    """Run ``deltafit attribute``; returns the exit status."""
    out = sys.stdout if out is None else out
    from sklearn.model_selection import train_test_split

    from deltafit.attribution import data_values, robustness

    _positive(args.top, "--top")
    _positive(args.audit, "--audit", zero=True)
    _positive(args.max_removals, "--max-removals")
    if not 0.0 < args.test_size < 1.0:
        raise ValueError(f"--test-size must be in (0, 1), got {args.test_size}")
    X, y, title = _data(args)
    rows = np.arange(X.shape[0])
    strat = None if args.regression else y
    try:
        Xtr, Xte, ytr, yte, rtr, rte = train_test_split(
            X, y, rows, test_size=args.test_size, random_state=0, stratify=strat
        )
    except ValueError:  # a class too small to stratify
        Xtr, Xte, ytr, yte, rtr, rte = train_test_split(
            X, y, rows, test_size=args.test_size, random_state=0
        )
    print(
        f"data: {title}, {X.shape[0]:,} samples x {X.shape[1]:,} features"
        + ("" if args.regression else f"; classes {describe_classes(y)}"),
        file=out,
    )
    est = _estimator(args, args.C, args.gamma).fit(Xtr, ytr)
    v = data_values(est, Xte, yte, scoring=args.scoring)
    what = v.scoring
    print(
        f"model: {est!r} on {_FEATURES[args.scale]}, fitted on {len(Xtr):,} rows; held-out "
        f"{what} {v.score:.4f} on {len(Xte):,} rows",
        file=out,
    )
    print(
        f"data values (exact leave-one-out change of the held-out {what}; row = line of "
        "the data, from 0):",
        file=out,
    )
    order = np.argsort(-v.values, kind="stable")
    k = min(args.top, len(order))
    for head, idx in (("most valuable", order[:k]), ("most harmful", order[::-1][:k])):
        print(f"  {head}:", file=out)
        for i in idx:
            lab = "" if args.regression else f"  label {ytr[i]}"
            print(f"    row {rtr[i]:>6}{lab}  value {v.values[i]:+.5f}", file=out)
    if args.regression or args.audit == 0 or args.loss == "hinge":
        if args.loss == "hinge" and not args.regression and args.audit:
            print(
                "robustness: not available for the hinge loss (no gradient to certify "
                "removals with)",
                file=out,
            )
        return 0
    z = est.decision_function(Xte)
    margin = np.abs(z) if z.ndim == 1 else -np.diff(np.sort(z, axis=1)[:, -2:], axis=1)[:, 0]
    pick = np.argsort(np.abs(margin), kind="stable")[: args.audit]
    r = robustness(est, Xte[pick], max_removals=args.max_removals)
    print(
        f"least robust held-out predictions (fewest removed training rows that change "
        f"them; lower certified, upper verified by an exact update, up to "
        f"{args.max_removals}):",
        file=out,
    )
    for j, q in enumerate(pick):
        up = "none found" if not np.isfinite(r.upper[j]) else int(r.upper[j])
        lo = "inf" if not np.isfinite(r.lower[j]) else int(r.lower[j])
        wit = (
            ""
            if r.witness[j] is None
            else "  remove rows " + ", ".join(str(rtr[i]) for i in r.witness[j])
        )
        print(
            f"  row {rte[q]:>6}  predicted {r.prediction[j]}  lower {lo}  upper {up}{wit}", file=out
        )
    return 0
