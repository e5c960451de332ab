"""``deltafit demo``: a model in service while its training data changes, each change checked.

The story (Lee et al., "Exact incremental and decremental learning for LS-SVM", Thm 1 / Cor. 1–4,
for the exact updates; Okumura et al., "Quick sensitivity analysis for incremental data
modification and its application to leave-one-out CV in linear classification problems",
Thm 1, for the what-if bounds):

0. the model in service is fitted on labels of which a few are wrong;
1. a deletion request: one user's samples are forgotten (exact), the model saved and reloaded;
2. a review corrects the wrong labels (one batch);
3. new data arrives;
4. a what-if, answered before retraining: would a second user's deletion change the test
   predictions? (``deltafit.sensitivity``: certified labels and bounds.)

Every update is compared with a refit of the same estimator on exactly the data it produces:
both timed warm (one untimed call first — for the refits, the first fit's — then the median of
``--repeat`` calls), printed side
by side with their ratio, and the updated decision values checked against the refit's.  The
what-if bounds are checked against the exact result of the change.  :func:`demo` returns the
largest deviation found (``inf`` for a violated bound): the command exits 1 unless it is within
the solver's tolerance.

The default data are scikit-learn's handwritten digits (bundled with scikit-learn, so no
download) with every image also shifted by up to ``--shift`` pixels — a standard augmentation —
so that the problem has tens of thousands of rows, as random Fourier features
(:func:`load_shifted_digits`); ``--dataset`` picks any other data set.
"""

from __future__ import annotations

import argparse
import copy
import gc
import os
import tempfile
import time
from typing import TextIO

import numpy as np

from deltafit.cli._data import (
    GAMMA_HELP,
    add_target_argument,
    describe_classes,
    gamma_value,
    load_data,
    require_classes,
)
from deltafit.datasets import NAMED_DATASETS

__all__ = ["add_demo_command", "demo", "DEFAULT_DATASET", "load_shifted_digits"]

#: The demo's default data set (:func:`load_shifted_digits`).
DEFAULT_DATASET = "digits-shifted"

#: A certified label, in one line.
CERTIFIED_MEANS = (
    "a certified label is the one the retrained model is guaranteed to predict; "
    "no retraining needed"
)


#: Random Fourier features of the default data set, and their RBF kernel's gamma.
DIGIT_FEATURES, DIGIT_GAMMA = 500, 0.05


def load_shifted_digits(
    max_shift: int = 1, n_features: int = DIGIT_FEATURES, gamma: float = DIGIT_GAMMA
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """scikit-learn's handwritten digits, each image also shifted, as random Fourier features.

    The 1,797 8x8 images of :func:`sklearn.datasets.load_digits` (the test part of the UCI
    "Optical Recognition of Handwritten Digits" data, bundled with scikit-learn), pixels scaled
    to [0, 1], each copied at every shift ``(dy, dx)`` with ``|dy|, |dx| ≤ max_shift`` (the
    pixels shifted in from outside are 0), then mapped to ``n_features`` random Fourier
    features of the RBF kernel ``exp(-gamma ‖x − x'‖²)`` (Rahimi & Recht, "Random features for
    large-scale kernel machines"; :class:`sklearn.kernel_approximation.RBFSampler`,
    random_state=0): a linear model on them approximates a kernel machine, which a linear model
    on the shifted pixels cannot be.

    Parameters
    ----------
    max_shift : int, default=1
        0 gives the 1,797 images; 1 gives 9 copies of each (16,173 rows), 2 gives 25 (44,925).
    n_features : int, default=500
        Random Fourier features; 0 keeps the 64 pixels.
    gamma : float, default=0.05

    Returns
    -------
    X : ndarray of shape (1797 * (2 * max_shift + 1) ** 2, n_features)
    y : ndarray of shape (n_rows,)
        The digit, 0–9.
    image : ndarray of shape (n_rows,)
        The index of the original image of each row (the rows of one image belong together).

    Raises
    ------
    ValueError
        If ``max_shift`` is not an integer in 0..3.
    """
    if (
        isinstance(max_shift, bool)
        or not isinstance(max_shift, (int, np.integer))
        or not 0 <= max_shift <= 3
    ):
        raise ValueError(f"--shift must be an integer in 0..3, got {max_shift!r}")
    from sklearn.datasets import load_digits
    from sklearn.kernel_approximation import RBFSampler

    d = load_digits()
    img = d.images / 16.0
    n = img.shape[0]
    blocks = []
    for dy in range(-max_shift, max_shift + 1):
        for dx in range(-max_shift, max_shift + 1):
            s = np.zeros_like(img)
            s[:, max(dy, 0) : 8 + min(dy, 0), max(dx, 0) : 8 + min(dx, 0)] = img[
                :, max(-dy, 0) : 8 + min(-dy, 0), max(-dx, 0) : 8 + min(-dx, 0)
            ]
            blocks.append(s.reshape(n, 64))
    copies = len(blocks)
    X = np.concatenate(blocks)
    if n_features:
        X = RBFSampler(gamma=gamma, n_components=n_features, random_state=0).fit(X[:1]).transform(X)
    X = np.ascontiguousarray(X, dtype=np.float64)
    return X, np.tile(d.target.astype(np.int64), copies), np.tile(np.arange(n), copies)


def add_demo_command(sub: argparse._SubParsersAction) -> None:
    """Add the ``demo`` subcommand to the ``deltafit`` command's subparsers."""
    d = sub.add_parser(
        "demo",
        help="a model in service: delete a user's samples, fix labels, add data, ask a what-if; "
        "each exact update timed and checked against a refit",
        description=(
            "A classifier in service (binary, or one-vs-rest for three or more classes) while "
            "its data changes: forget one user's samples (a deletion request; the model is "
            "saved and reloaded), correct a batch of wrong labels, add newly arrived data, and "
            "ask what a second deletion would do before retraining (certified bounds).  Each "
            "update is timed warm against a refit on exactly the data it produces and checked "
            "against it; exit status 1 if any update differs from its refit or any bound fails."
        ),
    )
    d.add_argument(
        "--dataset",
        default=DEFAULT_DATASET,
        help=f"{DEFAULT_DATASET} (default: scikit-learn's digits, each image also "
        f"shifted by up to --shift pixels), one of {', '.join(NAMED_DATASETS)}, "
        "or a LIBSVM/CSV file",
    )
    d.add_argument(
        "--shift",
        type=int,
        default=1,
        help=f"for {DEFAULT_DATASET}: the largest shift in pixels; 1 gives 16,173 "
        "rows, 2 44,925, 0 the 1,797 images (default 1)",
    )
    add_target_argument(d)
    d.add_argument("--model", choices=("linear", "kernel"), default="linear")
    d.add_argument(
        "--loss",
        choices=("squared", "logistic", "squared_hinge"),
        default="squared",
        help="squared (default: closed-form exact updates); the others re-solve with "
        "Newton, minutes on the default data: add --shift 0 or --repeat 1",
    )
    d.add_argument("--C", type=float, default=1.0, help="regularisation weight (default 1.0)")
    d.add_argument("--gamma", type=gamma_value, default="scale", help=GAMMA_HELP)
    d.add_argument(
        "--mislabeled",
        type=float,
        default=0.02,
        help="fraction of training labels delivered wrong (default 0.02)",
    )
    d.add_argument(
        "--add",
        type=float,
        default=0.1,
        help="fraction of the data that arrives after the fit (default 0.1)",
    )
    d.add_argument(
        "--forget",
        type=int,
        default=5,
        help="samples (images, with their shifted copies) of the user who asks to "
        "be forgotten (default 5)",
    )
    d.add_argument(
        "--repeat",
        type=int,
        default=3,
        help="timed calls per operation after an untimed one; the median is shown (default 3)",
    )
    d.add_argument(
        "--threads",
        type=int,
        default=1,
        help="BLAS threads while the demo runs (default 1: steady timings on a "
        "shared machine; 0: the library's default)",
    )
    d.add_argument(
        "--save",
        metavar="PATH",
        default=None,
        help="where to save the model after the deletion (default: a temporary file)",
    )
    d.add_argument(
        "--plot",
        metavar="PNG",
        default=None,
        help="write a figure: time per operation, deltafit vs refit; the certified "
        "intervals against the exact answer (needs matplotlib)",
    )
    d.add_argument("--seed", type=int, default=0)
    return d


# ---------------------------------------------------------------------------
# timing and checks
# ---------------------------------------------------------------------------
def _warm_time(run, prepare, repeat, warmup=True):
    """Median seconds of ``run(prepare())`` over ``repeat`` calls, after one untimed call.

    ``prepare`` (untimed) gives each call its own object — a copy of the model, a fresh
    estimator — so every call does the same work; the garbage collector is off during each
    call.  ``warmup=False`` skips the untimed call (for a refit: the first fit was warmed).
    Returns ``(seconds, result of the last call)``.
    """
    times = []
    for i in range(repeat + 1 - (not warmup)):
        arg = prepare()
        gc.collect()
        gc.disable()
        try:
            t0 = time.perf_counter()
            out = run(arg)
            t = time.perf_counter() - t0
        finally:
            gc.enable()
        if i or not warmup:
            times.append(t)
    return float(np.median(times)), out


def _deviation(f, f_ref):
    """``max|f − f_ref| / max(1, max|f_ref|)``."""
    return float(np.max(np.abs(f - f_ref)) / max(1.0, float(np.max(np.abs(f_ref)))))


def _ms(t):
    return f"{t * 1e3:.3g} ms" if t < 1 else f"{t:.3g} s"


def _ratio(t, t_ref):
    r = t_ref / max(t, 1e-12)
    return f"{r:.3g}x faster" if r >= 1 else f"{1 / r:.3g}x SLOWER"


def _make_model(args, n_classes):
    from deltafit.models import KernelClassifier, LinearClassifier

    if args.model == "linear":  # keep_data=False (sufficient statistics) is binary only
        return LinearClassifier(
            loss=args.loss, C=args.C, keep_data=args.loss != "squared" or n_classes > 2
        )
    return KernelClassifier(loss=args.loss, C=args.C, kernel="rbf", gamma=args.gamma)


def _check_args(args):
    for name, lo, hi in (("mislabeled", 0.0, 0.5), ("add", 0.0, 0.5)):
        v = getattr(args, name)
        if not lo <= v <= hi:
            raise ValueError(f"--{name} must be in [{lo}, {hi}], got {v}")
    if args.forget < 1:
        raise ValueError(f"--forget must be at least 1, got {args.forget}")
    if args.repeat < 1:
        raise ValueError(f"--repeat must be at least 1, got {args.repeat}")
    if args.threads < 0:
        raise ValueError(f"--threads must be 0 (the default) or more, got {args.threads}")


def _load(args):
    """``(X, y, group, title)``: rows, labels, the sample each row belongs to, a description."""
    if args.dataset == DEFAULT_DATASET:
        if args.target is not None:
            raise ValueError(f"{DEFAULT_DATASET}: a target column applies to CSV/TSV files only")
        X, y, group = load_shifted_digits(args.shift)
        copies = (2 * args.shift + 1) ** 2
        title = (
            f"scikit-learn's handwritten digits (1,797 8x8 images, bundled with "
            f"scikit-learn), each also shifted by up to {args.shift} pixel(s) ({copies} "
            f"rows per image), as {DIGIT_FEATURES} random Fourier features of an RBF kernel "
            f"(RBFSampler, gamma {DIGIT_GAMMA}): {X.shape[0]:,} x {X.shape[1]}"
        )
        return X, y, group, title
    X, y, title = load_data(args.dataset, args.target)
    return X, y, np.arange(X.shape[0]), f"{title}, {X.shape[0]:,} x {X.shape[1]}"


class _Story:
    """The live data of the model: rows and current labels by id, which ids are live."""

    def __init__(self, X, y):
        self.X, self.y = X, y.copy()
        self.alive = np.ones(y.shape[0], dtype=bool)

    def data(self):
        return self.X[self.alive], self.y[self.alive]


# ---------------------------------------------------------------------------
# the demo
# ---------------------------------------------------------------------------
def demo(args: argparse.Namespace, out: TextIO | None = None) -> float:
    """Run the demo story; returns the largest relative deviation of an update from its refit.

    Parameters
    ----------
    args : argparse.Namespace
        The ``demo`` subcommand's arguments (:func:`add_demo_command`).
    out : file-like, optional
        Where the report goes (default: ``sys.stdout`` at the call).

    Returns
    -------
    float
        ``max |f_update − f_refit| / max(1, max |f_refit|)`` over the test rows and every update
        (``f``: ``decision_function``), and over the saved-and-reloaded model; ``inf`` if a
        what-if bound is violated by the exact result.

    Raises
    ------
    ValueError
        For data it cannot use (a file that does not load, fewer than two classes, too few
        samples for the story) or an option out of range.
    """
    import sys

    from threadpoolctl import threadpool_limits

    out = sys.stdout if out is None else out
    _check_args(args)
    if args.threads:
        with threadpool_limits(limits=args.threads, user_api="blas"):
            return _story(args, out)
    return _story(args, out)


def _story(args, out):
    args = copy.copy(args)  # a resolved gamma is set on the copy
    X, y, group, title = _load(args)
    require_classes(y, "the demo's classifier")
    classes = np.unique(y)
    tol = 1e-8 if args.loss == "squared" else 1e-6
    rng = np.random.default_rng(args.seed)

    # split by sample (an image and its shifted copies go together)
    samples = rng.permutation(np.unique(group))
    n_test = max(1, int(0.2 * samples.size))
    n_new = max(1, int(args.add * samples.size))
    test_s, new_s = samples[:n_test], samples[n_test : n_test + n_new]
    train_s = samples[n_test + n_new :]
    per_sample = max(1, X.shape[0] // samples.size)
    kernel_cap = ""
    if args.model == "kernel":  # the kernel matrix grows as n²: keep the demo short
        keep = max(2, 2000 // per_sample)
        if train_s.size > keep:
            kernel_cap = f" (kernel model: the first {keep} of {train_s.size} samples)"
            train_s = train_s[:keep]
    if train_s.size < 2 * args.forget + 2:
        raise ValueError(
            f"the data has too few samples for the story: {train_s.size} to train "
            f"on, --forget {args.forget} needs at least {2 * args.forget + 2}"
        )

    def rows_of(s):
        return np.flatnonzero(np.isin(group, s))

    test, new, train = rows_of(test_s), rows_of(new_s), rows_of(train_s)
    X_test, y_test = X[test], y[test]
    story = _Story(X[train], y[train])  # id i = training row i
    g_train = group[train]
    # the labels as delivered: a fraction of the training samples wrong (the next class)
    n_bad = int(round(args.mislabeled * train_s.size))
    bad_s = rng.choice(train_s, size=n_bad, replace=False)
    bad = np.flatnonzero(np.isin(g_train, bad_s))
    y_fixed = story.y[bad].copy()
    story.y[bad] = classes[(np.searchsorted(classes, y_fixed) + 1) % classes.size]
    # the users: the one who asks to be forgotten, and the one of the what-if
    good_s = np.setdiff1d(train_s, bad_s)
    users = rng.choice(
        good_s if good_s.size >= 2 * args.forget else train_s, size=2 * args.forget, replace=False
    )
    gone = np.flatnonzero(np.isin(g_train, users[: args.forget]))
    asked = np.flatnonzero(np.isin(g_train, users[args.forget :]))

    def say(msg=""):
        print(msg, file=out)

    def rows(n, what):
        return f"{n:,} {what}" if per_sample == 1 else f"{n // per_sample:,} {what} ({n:,} rows)"

    model = _make_model(args, classes.size)
    kd = getattr(model, "keep_data", True)
    say("deltafit demo — a classifier in service while its training data changes")
    say(f"data: {title}")
    say(f"classes: {describe_classes(y)}")
    say(f"model: {model!r}")
    say(
        f"split: {rows(train.size, 'samples')} to train{kernel_cap}, "
        f"{rows(new.size, 'samples')} arriving later, {rows(test.size, 'test samples')}"
    )
    threads = f"{args.threads} BLAS thread(s)" if args.threads else "default BLAS threads"
    say(
        f"timing: median of {args.repeat} warm calls (one untimed call first), {threads}; "
        "'refit': the same estimator fitted from scratch on exactly the data the update produced"
    )
    say()

    steps = []  # (label, t_update, t_refit) for the figure
    worst = 0.0

    def refit():
        Xr, yr = story.data()
        t, m = _warm_time(
            lambda e: e.fit(Xr, yr),
            lambda: _make_model(args, classes.size),
            args.repeat,
            warmup=False,
        )
        return t, m

    def update(op):
        return _warm_time(lambda c: (op(c), c)[1], lambda: copy.deepcopy(model), args.repeat)

    def check(label, t, updated):
        nonlocal worst
        t_ref, fresh = refit()
        dev = _deviation(updated.decision_function(X_test), fresh.decision_function(X_test))
        worst = max(worst, dev)
        steps.append((label, t, t_ref))
        verdict = (
            f"equals the refit (max deviation {dev:.1e})"
            if dev < tol
            else f"DIFFERS from the refit: deviation {dev:.1e} > {tol:g}"
        )
        return t_ref, verdict

    # 0. the model in service
    t_fit, model = _warm_time(
        lambda e: e.fit(*story.data()), lambda: _make_model(args, classes.size), args.repeat
    )
    say(
        f"0. in service: fitted on {rows(train.size, 'samples')}, {n_bad} of them mislabeled, "
        f"in {_ms(t_fit)}; test accuracy {model.score(X_test, y_test):.4f}"
    )
    if args.model == "kernel" and isinstance(args.gamma, str):
        # an update keeps the fit's gamma; a refit with gamma='scale' would resolve it anew
        # on other rows: the refits that check the updates take the fit's number
        args.gamma = float(model.gamma_)
        say(
            f"   gamma={model.gamma!r} resolved on these rows: gamma_ = {args.gamma:.4g}, kept by "
            "every update; the refits below take this number"
        )

    # 1. a deletion request
    kw = {} if kd else {"X": story.X[gone]}
    t, model = update(lambda c: c.remove(gone, **kw))
    story.alive[gone] = False
    t_ref, verdict = check("delete a user", t, model)
    say(
        f"1. deletion request: forgot one user's {rows(gone.size, 'samples')} in {_ms(t)} vs "
        f"refit {_ms(t_ref)}, {_ratio(t, t_ref)}; {verdict}"
    )
    worst = max(worst, _save_and_reload(model, args.save, X_test, say))

    # 2. a batch of corrected labels
    if n_bad:
        live_bad = bad[story.alive[bad]]
        kw = {} if kd else {"X": story.X[live_bad]}
        fixed = y_fixed[story.alive[bad]]
        t, model = update(lambda c: c.relabel(live_bad, fixed, **kw))
        story.y[live_bad] = fixed
        t_ref, verdict = check("correct labels", t, model)
        say(
            f"2. corrected labels: relabelled {rows(live_bad.size, 'samples')} in {_ms(t)} vs "
            f"refit {_ms(t_ref)}, {_ratio(t, t_ref)}; {verdict}"
        )
    else:
        say("2. corrected labels: none was wrong (--mislabeled 0)")

    # 3. new data arrives
    X_new, y_new = X[new], y[new]
    t, model = update(lambda c: c.add(X_new, y_new))
    story.X = np.concatenate([story.X, X_new])
    story.y = np.concatenate([story.y, y_new])
    story.alive = np.concatenate([story.alive, np.ones(new.size, dtype=bool)])
    t_ref, verdict = check("add new data", t, model)
    say(
        f"3. new data: added {rows(new.size, 'samples')} in {_ms(t)} vs refit {_ms(t_ref)}, "
        f"{_ratio(t, t_ref)}; {verdict}; test accuracy {model.score(X_test, y_test):.4f}"
    )

    # 4. a what-if, answered before retraining
    intervals, violated = _what_if(
        model,
        asked,
        None if kd else story.X[asked],
        X_test,
        args,
        steps,
        story,
        classes,
        tol,
        say,
        rows,
    )
    if violated:
        worst = float("inf")

    say()
    say(
        "ratio: the refit's time over the update's, both on the same data; max deviation: "
        "max |update − refit| of the test decision values over max(1, max |refit|)"
    )
    say(
        f"check: every update within {tol:g} of its refit and every bound held"
        if worst < tol
        else "CHECK FAILED: "
        + (
            "a what-if bound was violated"
            if violated
            else f"an update deviates from its refit by {worst:.1e} > {tol:g}"
        )
    )
    if args.plot:
        from deltafit.plotting import demo_figure

        say(f"figure: {demo_figure(steps, args.plot, intervals=intervals)}")
        say(
            "   (left: each update's time beside the refit of the same data, log scale: the "
            "gap is the speed-up; right: per test row, the width of the what-if's certified "
            "interval (blue) and of the papers' ball (grey) against the true change of the "
            "decision value after retraining, log-log: below the dashed line an interval is "
            "narrower than the change it brackets)"
        )
    return worst


def _save_and_reload(model, path, X_test, say):
    """Save ``model`` (to ``path``, or a temporary file), load it back; the reloaded model's
    largest relative deviation from ``model`` on ``X_test``."""
    from deltafit.persistence import load, save

    with tempfile.TemporaryDirectory() as tmp:
        target = path or os.path.join(tmp, "model.npz")
        t0 = time.perf_counter()
        save(model, target)
        back = load(target)
        t = time.perf_counter() - t0
        size = os.path.getsize(target)
        dev = _deviation(back.decision_function(X_test), model.decision_function(X_test))
    where = path or "a temporary file"
    say(
        f"   saved the model without the user's data to {where} ({size / 1e6:.2g} MB, npz + "
        f"JSON) and loaded it back in {_ms(t)}: "
        + ("the same decision values" if dev == 0 else f"deviation {dev:.1e}")
    )
    return dev


def _what_if(model, asked, X_rows, X_test, args, steps, story, classes, tol, say, rows):
    """Step 4: bounds for a second deletion before retraining, checked against the exact one.

    Returns ``(intervals for the figure, whether a bound was violated)``.
    """
    from deltafit import sensitivity

    def ask(m):
        s = sensitivity(m)
        s.remove(asked, X=X_rows)
        lo, hi = s.decision_bounds(X_test)
        _, certain = s.predict_certain(X_test)
        return lo, hi, certain

    t, (lo, hi, certain) = _warm_time(ask, lambda: model, args.repeat)
    # the exact answer: the removal applied to a copy, and a refit of the same data
    exact = copy.deepcopy(model)
    exact.remove(asked, **({} if X_rows is None else {"X": X_rows}))
    alive = story.alive.copy()
    story.alive[asked] = False
    t_ref, _ = _warm_time(
        lambda e: e.fit(*story.data()),
        lambda: _make_model(args, classes.size),
        args.repeat,
        warmup=False,
    )
    story.alive = alive
    steps.append(("what-if", t, t_ref))
    f_old, f_new = model.decision_function(X_test), exact.decision_function(X_test)
    slack = tol * (1.0 + np.abs(f_new))
    bad = (lo > f_new + slack) | (f_new > hi + slack)
    labels_new = exact.predict(X_test)
    changed = int(np.sum(model.predict(X_test) != labels_new))
    say(
        f"4. what-if, before retraining: would deleting a second user's "
        f"{rows(asked.size, 'samples')} change the test predictions? answered in {_ms(t)} vs "
        f"refit {_ms(t_ref)}, {_ratio(t, t_ref)}: {certain.mean():.1%} of "
        f"{certain.size:,} test labels certified"
    )
    say(f"   ({CERTIFIED_MEANS})")
    change = np.abs(f_new - f_old)
    width = hi - lo
    rel = float(np.mean(width)) / max(float(np.mean(change)), np.finfo(float).tiny)
    say(
        f"   bounds on the new decision values: mean width {np.mean(width):.2g}, "
        f"{rel:.2g} times the mean true change {np.mean(change):.2g}; the exact deletion "
        f"changes {changed} test label(s); {int(bad.sum())} of {bad.size:,} bounds violated"
    )
    # the papers' ball on the same question, for contrast (untimed; method="sphere")
    ball = sensitivity(model, method="sphere")
    ball.remove(asked, X=X_rows)
    b_lo, b_hi = ball.decision_bounds(X_test)
    _, b_certain = ball.predict_certain(X_test)
    b_bad = (b_lo > f_new + slack) | (f_new > b_hi + slack)
    say(
        f"   the papers' ball (Okumura et al. Thm 1, method='sphere') on the same question: "
        f"mean width {np.mean(b_hi - b_lo):.2g}, {b_certain.mean():.1%} of the test labels "
        f"certified" + (f"; {int(b_bad.sum())} of its bounds VIOLATED" if b_bad.any() else "")
    )
    bad = bad | b_bad
    # the figure: each test row's decision value of the class the retrained model predicts
    if f_new.ndim == 2:
        col = np.searchsorted(classes, labels_new)
        pick = (np.arange(col.size), col)
        lo, hi, f_old, f_new = lo[pick], hi[pick], f_old[pick], f_new[pick]
        b_lo, b_hi = b_lo[pick], b_hi[pick]
    intervals = {
        "lower": lo - f_old,
        "upper": hi - f_old,
        "exact": f_new - f_old,
        "certified": float(certain.mean()),
        "ball_lower": b_lo - f_old,
        "ball_upper": b_hi - f_old,
        "ball_certified": float(b_certain.mean()),
    }
    return intervals, bool(bad.any())
