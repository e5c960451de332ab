"""Figures as PNG files (matplotlib is an optional extra: ``pip install "deltafit[plot]"``)."""

from __future__ import annotations

import numpy as np

__all__ = ["tightness_cdf"]


def _pyplot():
    try:
        import matplotlib

        matplotlib.use("Agg", force=False)
        import matplotlib.pyplot as plt
    except ImportError as exc:  # pragma: no cover - depends on the environment
        raise ImportError(
            "deltafit.plotting needs matplotlib; install it with pip install \"deltafit[plot]\""
        ) from exc
    return plt


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
    """
    if not isinstance(ratios, dict) or not ratios:
        raise ValueError("ratios must be a non-empty dict label -> array of ratios")
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
    fig.tight_layout()
    fig.savefig(path, format="png")
    plt.close(fig)
    return str(path)
