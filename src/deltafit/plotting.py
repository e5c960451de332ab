"""Figures as PNG files (matplotlib is an optional extra: ``pip install "deltafit[plot]"``)."""

from __future__ import annotations

import numpy as np

from ._plot_experiments import (_require_nonempty, _save_png, active_learning_curves,
                                tradeoff_curves)
from ._pyplot import pyplot as _pyplot

__all__ = ["tightness_cdf", "treecv_times", "tradeoff_curves", "active_learning_curves",
           "demo_figure"]


def tightness_cdf(ratios, path, *, title=None, xmax=None):
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


def treecv_times(results, path, *, title=None):
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
                if n.shape != t.shape or n.ndim != 1 or n.size == 0 or not (
                        np.all(np.isfinite(n)) and np.all(np.isfinite(t)) and np.all(t > 0)):
                    raise ValueError(f"curve {label!r} of {row!r}/{panel!r} needs equal-length "
                                     "finite n and positive times")
    plt = _pyplot()
    fig, axes = plt.subplots(len(rows), len(panels), figsize=(4.2 * len(panels), 3.4 * len(rows)),
                             dpi=110, squeeze=False)
    colours = {}
    for i, row in enumerate(rows):
        for j, panel in enumerate(panels):
            ax = axes[i][j]
            for label, (n, t) in results[row].get(panel, {}).items():
                k = label.split("k=")[-1] if "k=" in label else label
                colour = colours.setdefault(k, f"C{len(colours) % 10}")
                style = "--" if label.lower().startswith("standard") else "-"
                marker = "s" if "random" in label.lower() else "o"
                ax.plot(n, t, style, color=colour, marker=marker, markersize=3, label=label)
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


def demo_figure(steps, path, *, intervals=None, max_intervals=40, title=None):
    """Draw ``deltafit demo``'s figure to a PNG: update vs refit times, certified intervals.

    Left: the time of each operation, deltafit's update against a refit on the same data
    (log scale).  Right (with ``intervals``): the certified bounds on the change of each test
    row's decision value after a data change (Okumura et al., "Quick sensitivity analysis for
    incremental data modification and its application to leave-one-out CV in linear
    classification problems", Theorem 1), against the exact change of a retrained model.

    Parameters
    ----------
    steps : list of (str, float, float)
        ``(operation, seconds of the update, seconds of the refit)``, times > 0.
    path : str or path-like
        Where to write the PNG.
    intervals : dict, optional
        ``"lower"``, ``"upper"``, ``"exact"``: arrays of one length (the bounds and the exact
        value of the change, ``lower ≤ exact ≤ upper`` when the bounds hold); optionally
        ``"certified"``: the fraction of labels certified, for the title.
    max_intervals : int, default=40
        How many rows to draw (evenly spaced in the order of their exact change).
    title : str, optional

    Returns
    -------
    path : str

    Raises
    ------
    ValueError
        For empty ``steps``, a time that is not a positive finite number, or ``intervals``
        without its three arrays of one length.

    Examples
    --------
    >>> import os, tempfile
    >>> import numpy as np
    >>> from deltafit.plotting import demo_figure
    >>> steps = [("remove 5", 0.003, 0.05), ("add 100", 0.01, 0.06)]
    >>> exact = np.linspace(-1.0, 1.0, 20)
    >>> intervals = {"lower": exact - 0.1, "upper": exact + 0.1, "exact": exact}
    >>> path = os.path.join(tempfile.mkdtemp(), "demo.png")
    >>> demo_figure(steps, path, intervals=intervals) == path   # doctest: +SKIP
    True
    """
    _require_nonempty(steps, (list, tuple), "steps", "list of (label, t_update, t_refit)")
    labels, times = [], []
    for step in steps:
        if len(step) != 3:
            raise ValueError(f"each step must be (label, t_update, t_refit), got {step!r}")
        t = np.asarray(step[1:], dtype=np.float64)
        if not np.all(np.isfinite(t)) or np.any(t <= 0):
            raise ValueError(f"times must be positive finite numbers, got {step!r}")
        labels.append(str(step[0]))
        times.append(t)
    times = np.array(times)
    if intervals is not None:
        try:
            lo, hi, ex = (np.asarray(intervals[k], dtype=np.float64).ravel()
                          for k in ("lower", "upper", "exact"))
        except (KeyError, TypeError) as exc:
            raise ValueError("intervals must be a dict with arrays 'lower', 'upper' and "
                             "'exact'") from exc
        if not (lo.size == hi.size == ex.size) or lo.size == 0:
            raise ValueError(f"intervals' arrays must have one non-zero length, got "
                             f"{lo.size}, {hi.size}, {ex.size}")
    plt = _pyplot()
    ncols = 1 if intervals is None else 2
    fig, axes = plt.subplots(1, ncols, figsize=(5.5 * ncols, 4), dpi=120, squeeze=False)
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
        ax = axes[0, 1]
        order = np.argsort(ex, kind="stable")
        pick = order[np.unique(np.linspace(0, order.size - 1, min(max_intervals, order.size))
                               .round().astype(int))]
        xi = np.arange(pick.size)
        ax.vlines(xi, lo[pick], hi[pick], color="tab:blue", linewidth=2,
                  label="certified interval (no retraining)")
        ax.plot(xi, ex[pick], "o", color="tab:red", markersize=3,
                label="exact change (retrained model)")
        scale = float(np.max(np.abs(ex[pick]))) if np.any(ex[pick]) else 1.0
        ax.set_yscale("symlog", linthresh=scale)
        ax.set_xlabel(f"test rows, in the order of their exact change ({pick.size} of {ex.size})")
        ax.set_ylabel("change of the decision value")
        cert = intervals.get("certified")
        ax.set_title("certified bounds vs the exact answer"
                     + ("" if cert is None else f": {float(cert):.1%} of labels certified"),
                     fontsize=10)
        ax.grid(alpha=0.3)
        ax.legend(fontsize=7)
    if title:
        fig.suptitle(title, fontsize=10)
    return _save_png(plt, fig, path)
