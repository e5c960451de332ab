"""Figures as PNG files (matplotlib is an optional extra: ``pip install "deltafit[plot]"``)."""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
from numpy.typing import ArrayLike

from deltafit.plotting._attribution import attribution_figure
from deltafit.plotting._experiments import (
    _require_nonempty,
    _save_png,
    active_learning_curves,
    tradeoff_curves,
)
from deltafit.plotting._pyplot import pyplot as _pyplot

__all__ = [
    "tightness_cdf",
    "treecv_times",
    "tradeoff_curves",
    "active_learning_curves",
    "demo_figure",
    "attribution_figure",
]


def tightness_cdf(
    ratios: dict[str, ArrayLike],
    path: str | os.PathLike[str],
    *,
    title: str | None = None,
    xmax: float | None = None,
) -> str:
    """Draw the CDF of bound / true distance ratios (Sivan et al. Fig. 1) to a PNG.

    Parameters
    ----------
    ratios : dict of str -> array-like
        One curve per label, e.g. ``{"breast_cancer, k=n": T}`` with
        ``T(i) = distance_bound_i / ‖β₁ − β₂(i)‖`` (≥ 1 when the bound is valid).
    path : str or path-like
        Where to write the PNG.
    title : str, optional
    xmax : float, optional
        Right end of the x axis (default: the 99th percentile of all ratios, at least 1.5).

    Returns
    -------
    path : str

    Examples
    --------
    >>> import os, tempfile
    >>> import numpy as np
    >>> from deltafit.plotting import tightness_cdf
    >>> ratios = {"example": 1 + np.random.default_rng(0).exponential(0.3, size=100)}
    >>> path = tightness_cdf(ratios, os.path.join(tempfile.mkdtemp(), "cdf.png"))
    >>> os.path.getsize(path) > 0
    True
    """
    _require_nonempty(ratios, dict, "ratios", "dict label -> array of ratios")
    curves = {}
    for label, r in ratios.items():
        r = np.sort(np.asarray(r, dtype=np.float64).ravel())
        r = r[np.isfinite(r)]
        if r.size == 0:
            raise ValueError(f"no finite ratio for {label!r}")
        curves[label] = r
    if xmax is None:
        xmax = max(1.5, float(np.percentile(np.concatenate(list(curves.values())), 99)) * 1.05)
    plt = _pyplot()
    fig, ax = plt.subplots(figsize=(6, 4), dpi=120)
    for label, r in curves.items():
        ax.step(r, np.arange(1, r.size + 1) / r.size, where="post", label=label)
    ax.axvline(1.2, color="grey", linestyle=":", linewidth=1)
    ax.axhline(0.95, color="grey", linestyle=":", linewidth=1)
    ax.set_xlim(1.0, xmax)
    ax.set_ylim(0.0, 1.01)
    ax.set_xlabel("bound / true distance  ‖β₁ − β₂‖")
    ax.set_ylabel("fraction of iterations")
    ax.set_title(title or "Tightness of the distance bound (Sivan et al. Fig. 1)")
    ax.legend(fontsize=8, loc="lower right")
    return _save_png(plt, fig, path)


def treecv_times(
    results: dict[str, dict[str, dict[str, tuple[ArrayLike, ArrayLike]]]],
    path: str | os.PathLike[str],
    *,
    title: str | None = None,
) -> str:
    """Draw TreeCV vs standard k-fold running times against n (Joulani et al. Fig. 2) to a PNG.

    Parameters
    ----------
    results : dict
        ``{row: {panel: {curve: (n_values, seconds)}}}`` — rows are learners (e.g.
        ``"Pegasos"``), panels columns (e.g. ``"k-CV, fixed order"``, ``"k-CV, randomized"``,
        ``"LOOCV"``; a panel whose name contains ``"LOO"`` gets log axes), curves are labelled
        ``"TreeCV k=5"`` / ``"standard k=5"``: one colour per k, TreeCV solid, standard dashed,
        a label containing ``"random"`` drawn with square markers.
    path : str or path-like
        Where to write the PNG.
    title : str, optional

    Returns
    -------
    path : str

    Examples
    --------
    >>> import os, tempfile
    >>> from deltafit.plotting import treecv_times
    >>> results = {"Pegasos": {"k-CV": {"TreeCV k=10": ([1000, 2000], [0.1, 0.2]),
    ...                                 "standard k=10": ([1000, 2000], [0.5, 1.0])}}}
    >>> path = treecv_times(results, os.path.join(tempfile.mkdtemp(), "treecv.png"))
    >>> os.path.getsize(path) > 0
    True
    """
    _require_nonempty(results, dict, "results", "dict row -> panel -> curve -> (n, t)")
    rows = list(results)
    panels = []
    for row in rows:
        if not isinstance(results[row], dict) or not results[row]:
            raise ValueError(f"row {row!r} has no panels")
        for panel, curves in results[row].items():
            if panel not in panels:
                panels.append(panel)
            if not isinstance(curves, dict) or not curves:
                raise ValueError(f"panel {panel!r} of {row!r} has no curves")
            for label, pair in curves.items():
                n, t = (np.asarray(v, dtype=np.float64) for v in pair)
                if (
                    n.shape != t.shape
                    or n.ndim != 1
                    or n.size == 0
                    or not (np.all(np.isfinite(n)) and np.all(np.isfinite(t)) and np.all(t > 0))
                ):
                    raise ValueError(
                        f"curve {label!r} of {row!r}/{panel!r} needs equal-length "
                        "finite n and positive times"
                    )
    plt = _pyplot()
    fig, axes = plt.subplots(
        len(rows), len(panels), figsize=(4.2 * len(panels), 3.4 * len(rows)), dpi=110, squeeze=False
    )
    colours: dict[str, str] = {}
    for i, row in enumerate(rows):
        for j, panel in enumerate(panels):
            ax = axes[i][j]
            for label, (n_t, t_t) in results[row].get(panel, {}).items():
                k = label.split("k=")[-1] if "k=" in label else label
                colour = colours.setdefault(k, f"C{len(colours) % 10}")
                style = "--" if label.lower().startswith("standard") else "-"
                marker = "s" if "random" in label.lower() else "o"
                ax.plot(n_t, t_t, style, color=colour, marker=marker, markersize=3, label=label)
            if "LOO" in panel:
                ax.set_xscale("log")
                ax.set_yscale("log")
            ax.set_title(f"{row}: {panel}", fontsize=9)
            ax.set_xlabel("n")
            ax.set_ylabel("time (s)")
            if results[row].get(panel):
                ax.legend(fontsize=6)
            else:  # this learner has no such panel
                ax.set_axis_off()
    fig.suptitle(title or "TreeCV vs standard k-fold CV (Joulani et al. Fig. 2)", fontsize=10)
    return _save_png(plt, fig, path)


def demo_figure(
    steps: Sequence[tuple[str, float, float]],
    path: str | os.PathLike[str],
    *,
    intervals: Mapping[str, Any] | None = None,
    max_intervals: int = 500,
    title: str | None = None,
) -> str:
    """Draw ``deltafit demo``'s figure to a PNG: update vs refit times, certified intervals.

    Left: the time of each operation, deltafit's update against a refit on the same data
    (log scale).  Right (with ``intervals``): for each test row, the width of the certified
    interval for the new decision value after a data change, against the true change of that
    value (a retrained model's), both on log axes with the line ``width = change``: a point
    below it is an interval narrower than the change it brackets, so the bound resolves the
    change, at any width.  With ``"ball_lower"`` / ``"ball_upper"``, the intervals of the
    papers' ball (Okumura et al., "Quick sensitivity analysis for incremental data
    modification and its application to leave-one-out CV in linear classification problems",
    Theorem 1; ``deltafit.sensitivity(model, method="sphere")``) are drawn beside them for
    contrast.

    Parameters
    ----------
    steps : list of (str, float, float)
        ``(operation, seconds of the update, seconds of the refit)``, times > 0.
    path : str or path-like
        Where to write the PNG.
    intervals : dict, optional
        ``"lower"``, ``"upper"``, ``"exact"``: arrays of one length (the bounds and the exact
        value of the change, ``lower ≤ exact ≤ upper`` when the bounds hold); optionally
        ``"ball_lower"`` and ``"ball_upper"`` (the papers' ball's bounds on the same change),
        ``"certified"`` and ``"ball_certified"`` (the fractions of labels each certifies, for
        the legend).
    max_intervals : int, default=500
        How many test rows to draw at most (evenly spaced in the order of their true change).
    title : str, optional

    Returns
    -------
    path : str

    Raises
    ------
    ValueError
        For empty ``steps``, a time that is not a positive finite number, or ``intervals``
        without its three arrays of one length (and the ball's, if given, of that length too).

    Examples
    --------
    >>> import os, tempfile
    >>> import numpy as np
    >>> from deltafit.plotting import demo_figure
    >>> steps = [("remove 5", 0.003, 0.05), ("add 100", 0.01, 0.06)]
    >>> exact = np.linspace(-1.0, 1.0, 20)
    >>> intervals = {"lower": exact - 1e-6, "upper": exact + 1e-6, "exact": exact,
    ...              "ball_lower": exact - 0.5, "ball_upper": exact + 0.5}
    >>> path = os.path.join(tempfile.mkdtemp(), "demo.png")
    >>> demo_figure(steps, path, intervals=intervals) == path   # doctest: +SKIP
    True
    """
    _require_nonempty(steps, (list, tuple), "steps", "list of (label, t_update, t_refit)")
    labels: list[str] = []
    rows: list[np.ndarray] = []
    for step in steps:
        if len(step) != 3:
            raise ValueError(f"each step must be (label, t_update, t_refit), got {step!r}")
        t = np.asarray(step[1:], dtype=np.float64)
        if not np.all(np.isfinite(t)) or np.any(t <= 0):
            raise ValueError(f"times must be positive finite numbers, got {step!r}")
        labels.append(str(step[0]))
        rows.append(t)
    times = np.array(rows)
    ball = None
    if intervals is not None:
        try:
            lo, hi, ex = (
                np.asarray(intervals[k], dtype=np.float64).ravel()
                for k in ("lower", "upper", "exact")
            )
            if "ball_lower" in intervals or "ball_upper" in intervals:
                ball = tuple(
                    np.asarray(intervals[k], dtype=np.float64).ravel()
                    for k in ("ball_lower", "ball_upper")
                )
        except (KeyError, TypeError) as exc:
            raise ValueError(
                "intervals must be a dict with arrays 'lower', 'upper' and "
                "'exact' (and both 'ball_lower' and 'ball_upper', or "
                "neither)"
            ) from exc
        if not (lo.size == hi.size == ex.size) or lo.size == 0:
            raise ValueError(
                f"intervals' arrays must have one non-zero length, got "
                f"{lo.size}, {hi.size}, {ex.size}"
            )
        if ball is not None and not (ball[0].size == ball[1].size == ex.size):
            raise ValueError(
                f"the ball's arrays must have the length of 'exact' ({ex.size}), "
                f"got {ball[0].size}, {ball[1].size}"
            )
    plt = _pyplot()
    ncols = 1 if intervals is None else 2
    fig, axes = plt.subplots(1, ncols, figsize=(5.5 * ncols, 4.2), dpi=120, squeeze=False)
    ax = axes[0, 0]
    x = np.arange(len(labels))
    ax.bar(x - 0.2, times[:, 0], 0.4, label="deltafit update")
    ax.bar(x + 0.2, times[:, 1], 0.4, label="refit on the same data")
    for i, (tu, tr) in enumerate(times):
        ax.annotate(f"{tr / tu:.3g}x", (i, max(tu, tr)), ha="center", va="bottom", fontsize=7)
    ax.set_yscale("log")
    ax.set_xticks(x)
    ax.set_xticklabels(labels, rotation=20, ha="right", fontsize=8)
    ax.set_ylabel("seconds (log scale)")
    ax.set_title("time per operation", fontsize=10)
    ax.grid(alpha=0.3, axis="y")
    ax.legend(fontsize=7)
    if intervals is not None:
        _width_against_change(axes[0, 1], lo, hi, ex, ball, intervals, max_intervals)
    if title:
        fig.suptitle(title, fontsize=10)
    return _save_png(plt, fig, path)


def _width_against_change(
    ax: Any,
    lo: np.ndarray,
    hi: np.ndarray,
    ex: np.ndarray,
    ball: tuple[np.ndarray, ...] | None,
    intervals: Mapping[str, Any],
    max_intervals: int,
) -> None:
    """The right panel of :func:`demo_figure`: interval widths against the true changes."""
    from matplotlib.ticker import LogFormatterSciNotation, LogLocator, NullFormatter

    order = np.argsort(np.abs(ex), kind="stable")
    pick = order[
        np.unique(
            np.linspace(0, order.size - 1, min(max_intervals, order.size)).round().astype(int)
        )
    ]
    change = np.abs(ex[pick])
    series = [
        (
            "deltafit's certified interval",
            hi[pick] - lo[pick],
            "tab:blue",
            "o",
            intervals.get("certified"),
        )
    ]
    if ball is not None:
        series.append(
            (
                "the papers' ball (Okumura et al., Thm 1)",
                ball[1][pick] - ball[0][pick],
                "tab:gray",
                "s",
                intervals.get("ball_certified"),
            )
        )
    values = np.concatenate([change] + [w for _, w, *_ in series])
    positive = values[np.isfinite(values) & (values > 0)]
    if positive.size == 0:
        positive = np.array([1.0])
    # whole decades around every value, at least four of them: readable ticks at any width
    top = int(np.ceil(np.log10(positive.max())))
    bottom = int(np.floor(np.log10(positive.min())))
    if top - bottom < 4:
        pad = 4 - (top - bottom)
        bottom, top = bottom - pad // 2 - pad % 2, top + pad // 2
    floor = 10.0**bottom  # a zero (no change, a zero-width interval) is drawn on the floor
    change = np.maximum(change, floor)
    for label, width, colour, marker, cert in series:
        shown = label + ("" if cert is None else f": {float(cert):.1%} of labels certified")
        ax.scatter(
            change,
            np.clip(width, floor, None),
            s=10,
            color=colour,
            marker=marker,
            alpha=0.7,
            label=shown,
            linewidths=0,
        )
    ax.plot(
        [floor, 10.0 ** (top + 2)],
        [floor, 10.0 ** (top + 2)],
        color="tab:red",
        linewidth=1,
        linestyle="--",
        label="width = true change (below: narrower than the change)",
    )
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlim(floor, 10.0**top)
    ax.set_ylim(floor, 10.0 ** (top + 2))  # two decades of room for the legend
    span = top - bottom
    for axis in (ax.xaxis, ax.yaxis):
        axis.set_major_locator(LogLocator(base=10.0, numticks=min(span + 3, 9)))
        axis.set_major_formatter(LogFormatterSciNotation(base=10.0))
        axis.set_minor_formatter(NullFormatter())
    ax.tick_params(labelsize=8)
    ax.set_xlabel("true change of the decision value, |retrained − current|", fontsize=8)
    ax.set_ylabel("width of the interval for the new value", fontsize=8)
    ax.set_title(
        f"what-if intervals against the true change ({pick.size:,} of {ex.size:,} test rows)",
        fontsize=10,
    )
    ax.grid(alpha=0.3, which="major")
    ax.legend(fontsize=7, loc="upper left")
