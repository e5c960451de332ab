"""The figure of :mod:`deltafit.attribution`: which training samples move one prediction.

Left, the exact leave-one-out effects of every training sample on one decision value against
their influence-function estimates (Koh & Liang, "Understanding black-box predictions via
influence functions"): the gap between the estimate and the truth.  Right, the query point and
the training images whose removal moves its score most in each direction.
"""

from __future__ import annotations

import os
from typing import Any

import numpy as np
from numpy.typing import ArrayLike

from deltafit.plotting._experiments import _save_png
from deltafit.plotting._pyplot import pyplot as _pyplot

__all__ = ["attribution_figure"]


def attribution_figure(
    effects: ArrayLike,
    path: str | os.PathLike,
    *,
    estimate: ArrayLike | None = None,
    images: ArrayLike | None = None,
    query: ArrayLike | None = None,
    shape: tuple[int, int] | None = None,
    labels: ArrayLike | None = None,
    k: int = 5,
    title: str | None = None,
) -> str:
    """Draw the training samples that matter for one prediction to a PNG.

    Parameters
    ----------
    effects : array-like of shape (n,)
        Exact change of one decision value when each training sample is removed (a column of
        :func:`deltafit.attribution.loo_effects`).
    path : str or path-like
        Where to write the PNG.
    estimate : array-like of shape (n,), optional
        The influence-function estimate of the same numbers
        (:func:`deltafit.attribution.influence`): drawn against the exact effects.
    images : array-like of shape (n, h * w), optional
        The training samples as images: the ``k`` that lower the score most and the ``k``
        that raise it most are shown.
    query : array-like of shape (h * w,), optional
        The point whose prediction is explained, shown first.
    shape : tuple (h, w), optional
        Image shape (default: square).
    labels : array-like of shape (n,), optional
        Training labels, printed over the images.
    k : int, default=5
    title : str, optional

    Returns
    -------
    path : str

    Raises
    ------
    ValueError
        For empty or non-finite effects, or arrays whose lengths disagree.

    Examples
    --------
    >>> import os, tempfile
    >>> import numpy as np
    >>> from deltafit.plotting import attribution_figure
    >>> e = np.random.default_rng(0).normal(size=50)
    >>> p = attribution_figure(e, os.path.join(tempfile.mkdtemp(), "a.png"), estimate=0.9 * e)
    >>> os.path.getsize(p) > 0
    True
    """
    e = np.asarray(effects, dtype=np.float64)
    if e.ndim != 1 or e.size == 0 or not np.all(np.isfinite(e)):
        raise ValueError("effects must be a non-empty 1-D array of finite numbers")
    if estimate is not None:
        estimate = np.asarray(estimate, dtype=np.float64)
        if estimate.shape != e.shape:
            raise ValueError(
                f"estimate must have the shape of effects {e.shape}, got {estimate.shape}"
            )
    if images is not None:
        images = np.asarray(images, dtype=np.float64)
        if images.ndim != 2 or images.shape[0] != e.size:
            raise ValueError(
                f"images must have one row per effect ({e.size}), got shape {images.shape}"
            )
        if shape is None:
            side = int(round(np.sqrt(images.shape[1])))
            if side * side != images.shape[1]:
                raise ValueError("give shape=(h, w) for images that are not square")
            shape = (side, side)
    if isinstance(k, bool) or not isinstance(k, (int, np.integer)) or k < 1:
        raise ValueError(f"k must be a positive integer, got {k!r}")
    k = min(int(k), e.size)
    plt = _pyplot()
    n_img = 0 if images is None else 2 * k + (query is not None)
    ncols = (estimate is not None) + (1 if n_img else 0)
    if ncols == 0:
        ncols = 1
    fig = plt.figure(figsize=(5.2 * ncols + (1.5 if n_img else 0), 4.2), dpi=110)
    grid = fig.add_gridspec(
        1, ncols, width_ratios=[1] * (estimate is not None) + ([1.4] if n_img else []) or [1]
    )
    col = 0
    if estimate is not None or not n_img:
        ax = fig.add_subplot(grid[0, col])
        col += 1
        if estimate is not None:
            lim = float(max(np.abs(e).max(), np.abs(estimate).max())) * 1.05
            ax.plot([-lim, lim], [-lim, lim], color="0.6", lw=1, label="estimate = exact")
            ax.scatter(e, estimate, s=6, alpha=0.6, label="training samples")
            r = np.corrcoef(e, estimate)[0, 1] if e.size > 1 else 1.0
            ax.set_xlabel("exact leave-one-out effect")
            ax.set_ylabel("influence-function estimate")
            ax.set_title(f"estimate vs exact (r = {r:.3f})", fontsize=10)
            ax.legend(fontsize=7)
        else:
            ax.hist(e, bins=40)
            ax.set_xlabel("exact leave-one-out effect")
            ax.set_ylabel("training samples")
        ax.grid(alpha=0.3)
    if n_img:
        order = np.argsort(e, kind="stable")
        assert images is not None and shape is not None
        picks: list[Any] = [("query", None, np.asarray(query))] if query is not None else []
        picks += [("lowers", i, images[i]) for i in order[:k]]
        picks += [("raises", i, images[i]) for i in order[::-1][:k]]
        sub = grid[0, col].subgridspec(2, k + (query is not None))
        for j, (kind, i, img) in enumerate(picks):
            if kind == "query":
                ax = fig.add_subplot(sub[:, 0])
                ax.set_title("query", fontsize=8)
            else:
                row = 0 if kind == "lowers" else 1
                pos = (j - (query is not None)) % k + (query is not None)
                ax = fig.add_subplot(sub[row, pos])
                lab = "" if labels is None else f" y={np.asarray(labels)[i]}"
                ax.set_title(
                    f"{e[i]:+.2g}{lab}",
                    fontsize=7,
                    color="tab:red" if kind == "lowers" else "tab:blue",
                )
            ax.imshow(np.reshape(img, shape), cmap="gray_r")
            ax.set_xticks([])
            ax.set_yticks([])
    if title:
        fig.suptitle(title, fontsize=10)
    return _save_png(plt, fig, path)
