"""The data argument shared by the ``deltafit`` subcommands: ``--target``, and checks of the
labels (at least two classes, numeric targets) with messages that name the labels as the file
writes them."""

from __future__ import annotations

import argparse
import re
from typing import Any

import numpy as np
from numpy.typing import ArrayLike

__all__ = [
    "add_target_argument",
    "gamma_value",
    "load_data",
    "format_label",
    "describe_classes",
    "require_classes",
    "require_numeric",
]

TARGET_HELP = (
    "the target column of a CSV/TSV file: its name in the header line or its index "
    "(0-based, negative from the end; default: the last column); numbers, or text "
    "labels such as spam/ham"
)


def add_target_argument(parser: argparse.ArgumentParser) -> None:
    """Add ``--target COLUMN`` to an argparse parser."""
    parser.add_argument("--target", metavar="COLUMN", default=None, help=TARGET_HELP)


def gamma_value(text: str) -> str | float:
    """``--gamma``: a positive number, or ``scale`` / ``auto`` as the kernel models take them
    (``scale``, the library's default: ``1 / (n_features * X.var())``; ``auto``:
    ``1 / n_features``)."""
    if text in ("scale", "auto"):
        return text
    try:
        value = float(text)
    except ValueError:
        value = None
    if value is None or not np.isfinite(value) or value <= 0:
        raise argparse.ArgumentTypeError(f"must be a positive number, scale or auto, got {text!r}")
    return value


GAMMA_HELP = (
    "RBF gamma of --model kernel: a positive number, or scale (default, as the "
    "library's: 1 / (n_features * X.var())) or auto (1 / n_features)"
)


def load_data(data: str, target: str | None = None) -> tuple[Any, np.ndarray, str]:
    """``(X, y, title)`` of a bundled data set or a data file, ``target`` (``--target``) passed on.

    Parameters
    ----------
    data : str
        A name of :data:`deltafit.datasets.NAMED_DATASETS` or a file path.
    target : str, optional
        The target column of a CSV/TSV file, by header name or index; None: the last column.

    Returns
    -------
    X : ndarray of shape (n_samples, n_features)
    y : ndarray of shape (n_samples,)
        Numbers, or ``str`` labels from a CSV/TSV target column holding text.
    title : str
        What the data are (a bundled set's source and task, a file's path), without their shape:
        each command prints the shape once, beside it.

    Raises
    ------
    ValueError
        As :func:`deltafit.datasets.load_named` raises.
    """
    from deltafit.datasets import load_named

    X, y, title = load_named(data, target=target, return_title=True)
    return X, y, _SHAPE.sub("", title)


#: The shape at the end of a bundled data set's title, ``" (60,000 x 784)"``.
_SHAPE = re.compile(r"\s*\([\d,]+ x [\d,]+\)$")


def format_label(value: Any) -> str:
    """A label as the file writes it: text as is, whole numbers without ``.0``."""
    if isinstance(value, (float, np.floating)) and float(value).is_integer():
        return str(int(value))
    return str(value)


def _listed(labels: np.ndarray, limit: int = 10) -> str:
    shown = ", ".join(format_label(v) for v in labels[:limit])
    return shown + (f", ... ({labels.size} in all)" if labels.size > limit else "")


def describe_classes(y: ArrayLike) -> str:
    """``"benign (357), malignant (212)"``: each class of ``y`` with its number of samples."""
    labels, counts = np.unique(np.asarray(y), return_counts=True)
    return ", ".join(f"{format_label(v)} ({c})" for v, c in zip(labels[:10], counts[:10])) + (
        f", ... ({labels.size} classes)" if labels.size > 10 else ""
    )


def require_classes(y: ArrayLike, what: str) -> None:
    """Raise a ValueError unless ``y`` holds at least two classes (the classifiers of every
    command take any number: three or more are fitted one-vs-rest).

    Raises
    ------
    ValueError
        Naming the one class found.
    """
    labels = np.unique(np.asarray(y))
    if labels.size < 2:
        raise ValueError(
            f"{what} needs at least two classes, but the target holds only {_listed(labels)}"
        )


def require_numeric(y: ArrayLike, what: str) -> None:
    """Raise a ValueError if ``y`` holds text labels (a regressor needs numbers).

    Parameters
    ----------
    y : ndarray of shape (n_samples,)
    what : str
        What needs the numbers (``"--regression"``), for the message.

    Raises
    ------
    ValueError
        Naming the labels found.
    """
    y = np.asarray(y)
    if y.dtype.kind not in "fiub":
        raise ValueError(
            f"{what} needs a numeric target, but the target column holds text "
            f"labels ({_listed(np.unique(y))}); fit a classifier instead, or choose "
            f"a numeric column with --target"
        )
