"""Figures as PNG files (matplotlib is an optional extra: ``pip install "deltafit[plot]"``)."""

from __future__ import annotations

import numpy as np

from ._plot_experiments import (_require_nonempty, _save_png, active_learning_curves,
                                tradeoff_curves)
from ._pyplot import pyplot as _pyplot

__all__ = ["tightness_cdf", "treecv_times", "tradeoff_curves", "active_learning_curves"]


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
