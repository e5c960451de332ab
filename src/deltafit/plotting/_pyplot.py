"""matplotlib's ``pyplot``, imported on first use (matplotlib is the optional extra ``plot``).

A ground-floor helper shared by :mod:`deltafit.plotting` and the figure modules it re-exports, so
that none of them imports another for it.
"""

from __future__ import annotations

from typing import Any

__all__ = ["pyplot"]


def pyplot() -> Any:
    """``matplotlib.pyplot`` with the non-interactive ``Agg`` backend (unless one is already set).

    Returns
    -------
    module
        ``matplotlib.pyplot``.

    Raises
    ------
    ImportError
        If matplotlib is not installed, with the install hint.
    """
    try:
        import matplotlib

        matplotlib.use("Agg", force=False)
        import matplotlib.pyplot as plt
    except ImportError as exc:  # pragma: no cover - depends on the environment
        raise ImportError(
            'deltafit.plotting needs matplotlib; install it with pip install "deltafit[plot]"'
        ) from exc
    return plt
