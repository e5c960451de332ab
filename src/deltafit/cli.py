"""The ``deltafit`` command.

``deltafit demo`` fits a model on bundled real data, asks what a deletion and the whole change can
do to the test predictions (certified bounds, ``deltafit.sensitivity``), then corrects mislabeled
samples, deletes a user's sample and adds newly arrived samples *without retraining*, checks the
updated model against a fresh fit on the resulting data and the bounds against the updated model,
and prints what each step took.
"""

from __future__ import annotations

import argparse
import sys
import time

import numpy as np

from ._cli_data import add_target_argument, describe_classes, load_data, require_classes
from .datasets import NAMED_DATASETS as DATASETS

__all__ = ["main"]


def _timed(fn, *args, **kw):
    t = time.perf_counter()
    out = fn(*args, **kw)
    return out, time.perf_counter() - t


def _make_model(args, n_classes=2):
    from .models import KernelClassifier, LinearClassifier

    if args.model == "linear":  # keep_data=False (sufficient statistics) is binary only
        return LinearClassifier(loss=args.loss, C=args.C,
                                keep_data=args.loss != "squared" or n_classes > 2)
    return KernelClassifier(loss=args.loss, C=args.C, kernel="rbf", gamma=args.gamma)


def demo(args, out=None):
    """Run the demo scenario; returns the largest relative deviation from the fresh fit.

    Prints to ``out`` (default: ``sys.stdout`` at the call). Raises ValueError for data it
    cannot use (a file that does not load, not two classes).
    """
    out = sys.stdout if out is None else out
    X, y, title = load_data(args.dataset, args.target)
    require_classes(y, "the demo's classifier")
    classes = np.unique(y)
    rng = np.random.default_rng(args.seed)
    perm = rng.permutation(X.shape[0])
    n_test = max(1, int(0.2 * X.shape[0]))
    test, pool = perm[:n_test], perm[n_test:]
    n_new = max(1, int(args.add * pool.size))
    train, new = pool[: pool.size - n_new], pool[pool.size - n_new:]
    if args.model == "kernel" and train.size > 6000:
        train = train[:6000]
    X_tr, y_true = X[train], y[train]
    # the labels as delivered: a fraction of them wrong
    n_bad = int(args.mislabeled * train.size)
    bad = rng.choice(train.size, size=n_bad, replace=False)
    y_given = y_true.copy()
    # each mislabeled sample gets the next class (of two: the other one)
    nxt = (np.searchsorted(classes, y_true[bad]) + 1) % classes.size
    y_given[bad] = classes[nxt]

    def say(msg):
        print(msg, file=out)

    model = _make_model(args, classes.size)
    say(f"deltafit demo — {title}")
    say(f"model: {model!r}")
    say(f"classes: {describe_classes(y)}")
    say(f"train {train.size}, of which {n_bad} mislabeled; {new.size} arrive later; test {test.size}\n")
    _, t_fit = _timed(model.fit, X_tr, y_given)
    acc0 = model.score(X[test], y[test])
    say(f"{'fit':<44s} {t_fit:9.4f} s   test accuracy {acc0:.4f}")
    rows = []
    kd = getattr(model, "keep_data", True)
    gone = int(rng.integers(train.size))
    # 0. before changing anything: what can the change do? (certified bounds, no retraining)
    what_if, t_bounds = _timed(_what_if, model, bad, y_true[bad], gone, X[new], y[new],
                               None if kd else X_tr)
    lo, hi = what_if.decision_bounds(X[test])
    _, certain = what_if.predict_certain(X[test])
    one, t_one = _timed(_what_if, model, bad[:0], y_true[:0], gone, None, None,
                        None if kd else X_tr)
    lo1, hi1 = one.decision_bounds(X[test])
    _, certain1 = one.predict_certain(X[test])
    say(f"{'what-if bounds: remove 1 sample':<44s} {t_one:9.4f} s   "
        f"{certain1.mean():.1%} of test labels certified")
    say(f"{'what-if bounds: the whole change below':<44s} {t_bounds:9.4f} s   "
        f"{certain.mean():.1%} of test labels certified")
    if args.model == "kernel" or kd:  # check the one-removal certificate on an exact copy
        import copy

        twin = copy.deepcopy(model)
        twin.remove([gone])
        f1 = twin.decision_function(X[test])
        slack1 = (1e-8 if args.loss == "squared" else 1e-6) * (1.0 + np.abs(f1))
        if not (np.all(lo1 <= f1 + slack1) and np.all(f1 <= hi1 + slack1)):
            say("VIOLATED: the one-removal bounds do not hold")
            return float("inf")
    # 1. correct the mislabeled samples (their ids are their row positions after fit)
    if n_bad:
        kw = {} if kd else {"X": X_tr[bad]}
        _, t = _timed(model.relabel, bad, y_true[bad], **kw)
        rows.append((f"relabel {n_bad} mislabeled samples", t))
    # 2. one user asks to be forgotten
    kw = {} if kd else {"X": X_tr[gone:gone + 1]}
    _, t = _timed(model.remove, [gone], **kw)
    rows.append(("remove 1 sample (a deletion request)", t))
    # 3. new samples arrive
    _, t = _timed(model.add, X[new], y[new])
    rows.append((f"add {new.size} new samples", t))
    t_upd = sum(t for _, t in rows)
    for label, t in rows:
        say(f"{label:<44s} {t:9.4f} s")
    acc1 = model.score(X[test], y[test])
    say(f"{'all updates':<44s} {t_upd:9.4f} s   test accuracy {acc1:.4f}")
    # the brute-force twin
    keep = np.ones(train.size, dtype=bool)
    keep[gone] = False
    X_final = np.vstack([X_tr[keep], X[new]])
    y_final = np.concatenate([y_true[keep], y[new]])
    fresh = _make_model(args, classes.size)
    _, t_ref = _timed(fresh.fit, X_final, y_final)
    f_upd = model.decision_function(X[test])
    f_ref = fresh.decision_function(X[test])
    dev = float(np.max(np.abs(f_upd - f_ref)) / max(1.0, np.max(np.abs(f_ref))))
    same = np.array_equal(model.predict(X[test]), fresh.predict(X[test]))
    say(f"{'fresh fit on the resulting data':<44s} {t_ref:9.4f} s   test accuracy "
        f"{fresh.score(X[test], y[test]):.4f}")
    say("")
    say(f"updated model vs fresh fit: max relative deviation of decision_function {dev:.2e}; "
        f"identical test predictions: {same}")
    ratio = t_ref / max(t_upd, 1e-12)
    say(f"the updates took {t_upd / t_ref:.1%} of the fresh fit's time ("
        + (f"{ratio:.1f}x faster)" if ratio >= 1 else f"{1 / ratio:.1f}x slower)"))
    tol = 1e-8 if args.loss == "squared" else 1e-6
    say("OK: the updated model is the fresh fit" if dev < tol else
        f"MISMATCH: deviation {dev:.2e} exceeds {tol:g}")
    # the certificate, checked against the exact result (tolerance: the solvers' tol)
    slack = tol * (1.0 + np.abs(f_ref))
    held = bool(np.all(lo <= f_ref + slack) and np.all(f_ref <= hi + slack))
    say("what-if bounds vs the updated model: " + ("OK, every test decision value within its "
        f"bounds (mean width {np.mean(hi - lo):.3g})" if held else "VIOLATED"))
    return dev if held else float("inf")


def _what_if(model, bad, y_fixed, gone, X_new, y_new, X_rows):
    from . import sensitivity

    s = sensitivity(model)
    if bad.size:
        s.relabel(bad, y_fixed, X=None if X_rows is None else X_rows[bad])
    s.remove([gone], X=None if X_rows is None else X_rows[gone:gone + 1])
    if X_new is not None:
        s.add(X_new, y_new)
    return s


def build_parser():
    p = argparse.ArgumentParser(
        prog="deltafit",
        description="Exact and certified updates of trained models when the training data changes.",
    )
    from ._version import __version__

    p.add_argument("--version", action="version", version=f"deltafit {__version__}")
    sub = p.add_subparsers(dest="command", metavar="COMMAND")
    d = sub.add_parser(
        "demo",
        help="fit, correct labels, delete and add samples without retraining; check vs a fresh fit",
        description=(
            "Fit a classifier (binary, or one-vs-rest for three or more classes) on bundled real "
            "data whose labels are partly wrong, then "
            "relabel the wrong samples, remove one sample (a deletion request) and add newly "
            "arrived samples with exact updates; compare with a fresh fit and time every step."
        ),
    )
    d.add_argument("--dataset", default="digits",
                   help=f"one of {', '.join(DATASETS)}, or a LIBSVM/CSV file (default: digits)")
    add_target_argument(d)
    d.add_argument("--model", choices=("linear", "kernel"), default="linear")
    d.add_argument("--loss", choices=("squared", "logistic", "squared_hinge"), default="squared")
    d.add_argument("--C", type=float, default=1.0, help="regularisation weight (default 1.0)")
    d.add_argument("--gamma", type=float, default=None, help="RBF gamma for --model kernel")
    d.add_argument("--mislabeled", type=float, default=0.1,
                   help="fraction of training labels delivered wrong (default 0.1)")
    d.add_argument("--add", type=float, default=0.1,
                   help="fraction of the data that arrives after the fit (default 0.1)")
    d.add_argument("--seed", type=int, default=0)
    from ._cli_cv import add_cv_commands
    from ._cli_experiments import add_experiment_commands
    from ._cli_treecv import add_treecv_command

    add_cv_commands(sub)
    add_treecv_command(sub)
    add_experiment_commands(sub)
    return p


def main(argv=None):
    parser = build_parser()
    args = parser.parse_args(argv)
    if args.command is None:
        parser.print_help()
        return 0
    if args.command == "demo":
        try:
            dev = demo(args)
        except ValueError as exc:
            print(f"deltafit demo: error: {exc}", file=sys.stderr)
            return 2
        tol = 1e-8 if args.loss == "squared" else 1e-6
        return 0 if dev < tol else 1
    if args.command in ("loo", "search"):
        from ._cli_cv import run_cv_command

        try:
            return run_cv_command(args)
        except ValueError as exc:
            print(f"deltafit {args.command}: error: {exc}", file=sys.stderr)
            return 2
    if args.command == "treecv":
        from ._cli_treecv import run_treecv_command

        try:
            return run_treecv_command(args)
        except ValueError as exc:
            print(f"deltafit treecv: error: {exc}", file=sys.stderr)
            return 2
    if args.command in ("stream", "active"):
        from . import _cli_experiments

        run = getattr(_cli_experiments, f"run_{args.command}_command")
        try:
            return run(args)
        except ValueError as exc:
            print(f"deltafit {args.command}: error: {exc}", file=sys.stderr)
            return 2
    return 2  # pragma: no cover


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
