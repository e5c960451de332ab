"""Figures of Sivan et al. §4.3–4.4 (re-exported by :mod:`deltafit.plotting`)."""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from deltafit.plotting._pyplot import pyplot as _pyplot

__all__ = ["tradeoff_curves", "active_learning_curves"]


# helpers of every figure (:mod:`deltafit.plotting` uses them too) --------------------------
def _require_nonempty(value: Any, types: type | tuple[type, ...], name: str, what: str) -> None:
    """ValueError ``"{name} must be a non-empty {what}"`` unless ``value`` is a non-empty
    instance of ``types``."""
    if not isinstance(value, types) or not value:
        raise ValueError(f"{name} must be a non-empty {what}")


def _save_png(plt: Any, fig: Any, path: str | os.PathLike[str]) -> str:
    """Lay out ``fig``, write it to ``path`` as a PNG and close it; returns ``str(path)``."""
    fig.tight_layout()
    fig.savefig(path, format="png")
    plt.close(fig)
    return str(path)


def _finish(
    plt: Any, fig: Any, ax: Any, xlabel: str, ylabel: str, title: str, path: str | os.PathLike[str]
) -> str:
    """Label, grid and legend of a one-panel figure, then :func:`_save_png`."""
    ax.set_xlabel(xlabel)
    ax.set_ylabel(ylabel)
    ax.set_title(title, fontsize=10)
    ax.grid(alpha=0.3)
    ax.legend(fontsize=7)
    return _save_png(plt, fig, path)


def tradeoff_curves(
    results: Sequence[Mapping[str, Any]],
    path: str | os.PathLike[str],
    *,
    title: str | None = None,
    logx: bool = True,
) -> str:
    """Accuracy against model computations, one curve per algorithm (Sivan et al. Fig. 3).

    Parameters
    ----------
    results : list of dict
        One per configuration: ``algorithm`` (str), ``n_model_computations`` (number),
        ``accuracy`` (in [0, 1]), optionally ``accuracy_std`` and ``label`` (the configuration,
        e.g. ``"T=0.5r0"``) — the rows of :func:`deltafit.stream.tradeoff_experiment`.  An
        algorithm that never computes a batch model (NORMA) is drawn as a dashed horizontal line.
    path : str or path-like
        Where to write the PNG.
    title : str, optional
    logx : bool, default=True
        Log-scale the computations axis (when every point is positive).

    Returns
    -------
    path : str

    Examples
    --------
    >>> import os, tempfile
    >>> from deltafit.plotting import tradeoff_curves
    >>> rows = [{"algorithm": "KDR", "n_model_computations": 10, "accuracy": 0.80},
    ...         {"algorithm": "KDR", "n_model_computations": 40, "accuracy": 0.83},
    ...         {"algorithm": "SW", "n_model_computations": 20, "accuracy": 0.78},
    ...         {"algorithm": "SW", "n_model_computations": 80, "accuracy": 0.82}]
    >>> path = tradeoff_curves(rows, os.path.join(tempfile.mkdtemp(), "tradeoff.png"))
    >>> os.path.getsize(path) > 0
    True
    """
    _require_nonempty(results, (list, tuple), "results", "list of dicts")
    groups: dict[str, list[Mapping[str, Any]]] = {}
    for r in results:
        if not isinstance(r, dict) or not {"algorithm", "n_model_computations", "accuracy"} <= set(
            r
        ):
            raise ValueError("each result needs algorithm, n_model_computations and accuracy")
        c, a = float(r["n_model_computations"]), float(r["accuracy"])
        if not (np.isfinite(c) and c >= 0 and np.isfinite(a) and 0 <= a <= 1):
            raise ValueError(f"bad point {r!r}: computations must be >= 0, accuracy in [0, 1]")
        sd = r.get("accuracy_std")
        if sd is not None and not (np.isfinite(float(sd)) and float(sd) >= 0):
            raise ValueError(f"bad point {r!r}: accuracy_std must be a finite number >= 0")
        groups.setdefault(str(r["algorithm"]), []).append(r)
    plt = _pyplot()
    fig, ax = plt.subplots(figsize=(6.4, 4.4), dpi=110)
    positive = all(
        float(r["n_model_computations"]) > 0
        for rs in groups.values()
        for r in rs
        if any(float(q["n_model_computations"]) > 0 for q in rs)
    )
    for i, (algo, rs) in enumerate(groups.items()):
        colour = f"C{i % 10}"
        if all(float(r["n_model_computations"]) == 0 for r in rs):
            acc = np.mean([float(r["accuracy"]) for r in rs])
            ax.axhline(acc, color=colour, linestyle="--", label=f"{algo} (no batch computation)")
            continue
        rs = sorted(rs, key=lambda r: float(r["n_model_computations"]))
        x = np.array([float(r["n_model_computations"]) for r in rs])
        y = np.array([float(r["accuracy"]) for r in rs])
        err = np.array([float(r.get("accuracy_std") or 0.0) for r in rs])
        ax.errorbar(
            x,
            y,
            yerr=err if err.any() else None,
            color=colour,
            marker="o",
            markersize=4,
            capsize=2,
            label=algo,
        )
        for xi, yi, r in zip(x, y, rs):
            if r.get("label"):
                ax.annotate(
                    str(r["label"]),
                    (xi, yi),
                    fontsize=5,
                    xytext=(2, 2),
                    textcoords="offset points",
                    color=colour,
                )
    if logx and positive:
        ax.set_xscale("log")
    return _finish(
        plt,
        fig,
        ax,
        "model computations",
        "prequential accuracy",
        title or "Accuracy vs model computations (Sivan et al. Fig. 3)",
        path,
    )


def active_learning_curves(
    curves: Mapping[str, Mapping[str, Any]],
    path: str | os.PathLike[str],
    *,
    title: str | None = None,
) -> str:
    """Test accuracy against labeled samples per strategy, mean ± std (Sivan et al. Fig. 2).

    Parameters
    ----------
    curves : dict
        name -> dict with ``n_labeled``, ``accuracy_mean``, optionally ``accuracy_std`` and
        ``n_model_computations`` (shown in the legend) — the output of
        :func:`deltafit.active.compare_strategies`.
    path : str or path-like
    title : str, optional

    Returns
    -------
    path : str

    Examples
    --------
    >>> import os, tempfile
    >>> from deltafit.plotting import active_learning_curves
    >>> curves = {"FGAL": {"n_labeled": [50, 150, 250], "accuracy_mean": [0.85, 0.90, 0.92]},
    ...           "AL(100)": {"n_labeled": [50, 150, 250], "accuracy_mean": [0.85, 0.91, 0.93]}}
    >>> path = active_learning_curves(curves, os.path.join(tempfile.mkdtemp(), "al.png"))
    >>> os.path.getsize(path) > 0
    True
    """
    _require_nonempty(curves, dict, "curves", "dict name -> curve")
    for name, c in curves.items():
        if not isinstance(c, dict) or not {"n_labeled", "accuracy_mean"} <= set(c):
            raise ValueError(f"curve {name!r} needs n_labeled and accuracy_mean")
        n = np.asarray(c["n_labeled"], dtype=np.float64)
        m = np.asarray(c["accuracy_mean"], dtype=np.float64)
        s = np.asarray(c.get("accuracy_std", np.zeros_like(m)), dtype=np.float64)
        if (
            n.ndim != 1
            or n.size == 0
            or n.shape != m.shape
            or s.shape != m.shape
            or not (np.isfinite(n).all() and np.isfinite(m).all() and np.isfinite(s).all())
        ):
            raise ValueError(f"curve {name!r} needs equal-length finite 1-d arrays")
    plt = _pyplot()
    fig, ax = plt.subplots(figsize=(6.4, 4.4), dpi=110)
    for i, (name, c) in enumerate(curves.items()):
        label = name
        if c.get("n_model_computations") is not None:
            label += f" ({int(c['n_model_computations'])} computations)"
        std = c.get("accuracy_std")
        ax.errorbar(
            np.asarray(c["n_labeled"]),
            np.asarray(c["accuracy_mean"]),
            yerr=None if std is None else np.asarray(std),
            color=f"C{i % 10}",
            marker="o" if len(c["n_labeled"]) <= 30 else None,
            markersize=3,
            capsize=2,
            label=label,
        )
    return _finish(
        plt,
        fig,
        ax,
        "labeled samples",
        "test accuracy",
        title or "Active learning (Sivan et al. Fig. 2)",
        path,
    )
