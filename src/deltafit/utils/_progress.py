"""Opt-in progress bars (tqdm, imported lazily), with deltafit's terminal manners.

* Bars go to standard error, never to standard output (a script's output stays its own).
* One bar per long task: while a deltafit bar is open, a bar asked for by the work inside it
  (a search's configurations, then each configuration's refits) is a silent one.
* A pause that is not part of the work — numba compiling the loops the first time
  (:mod:`deltafit.utils._numba`) — is labelled on the open bar and taken out of its rate, so that
  the bar does not show an estimate of the time left that the compilation made wrong.
"""

from __future__ import annotations

import sys
import threading
import time
import weakref
from typing import Any, Literal

__all__ = ["progress_bar", "open_bar", "paused_for"]

_lock = threading.Lock()
_current: weakref.ref[Any] | None = None  # weak reference to the open tqdm bar, or None


class _Silent:
    """A bar that shows nothing (progress disabled, or another bar is already open)."""

    def update(self, n: int = 1) -> None:
        pass

    def set_postfix_str(self, s: str) -> None:
        pass

    def close(self) -> None:
        pass

    def __enter__(self) -> _Silent:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def open_bar() -> Any:
    """The tqdm bar deltafit has open, or None."""
    with _lock:
        bar = _current() if _current is not None else None
    if bar is None or getattr(bar, "disable", True):
        return None
    return bar


def progress_bar(total: int, enabled: bool, desc: str | None = None) -> Any:
    """A tqdm bar on standard error when ``enabled`` (ImportError with an install hint
    without tqdm), else a bar that does nothing.

    A bar asked for while another deltafit bar is open is silent: one bar per long task.

    Parameters
    ----------
    total : int
        Steps of the task.
    enabled : bool
        Show a bar.
    desc : str, optional
        Its label.

    Returns
    -------
    bar
        An object with ``update(n)``, ``set_postfix_str(s)``, ``close()``, usable in ``with``.

    Examples
    --------
    >>> from deltafit.utils._progress import progress_bar
    >>> with progress_bar(3, enabled=False) as bar:
    ...     for _ in range(3):
    ...         bar.update(1)
    """
    global _current
    if not enabled or open_bar() is not None:
        return _Silent()
    try:
        from tqdm.auto import tqdm
    except ImportError as exc:  # pragma: no cover - depends on the environment
        raise ImportError(
            "progress=True needs tqdm: pip install 'deltafit[progress]' (or pip install tqdm)"
        ) from exc
    bar = tqdm(total=total, desc=desc, leave=False, file=sys.stderr, dynamic_ncols=True)
    with _lock:
        _current = weakref.ref(bar)
    return bar


class paused_for:
    """Context manager: label the open bar with ``label`` for the duration of a pause that is
    not the task's work, and take the pause out of the bar's rate and time estimate.

    Does nothing without an open bar.

    Examples
    --------
    >>> from deltafit.utils._progress import paused_for
    >>> with paused_for("compiling, once"):
    ...     pass
    """

    def __init__(self, label: str) -> None:
        self.label = label
        self.bar: Any = None
        self.t0 = 0.0

    def __enter__(self) -> paused_for:
        self.bar = open_bar()
        self.t0 = time.time()
        if self.bar is not None:
            self.bar.set_postfix_str(self.label)
        return self

    def __exit__(self, *exc: object) -> Literal[False]:
        bar = self.bar
        if bar is not None and not getattr(bar, "disable", True):
            pause = time.time() - self.t0
            bar.start_t += pause  # the rate (and so the ETA) counts the work only
            bar.last_print_t += pause
            bar.set_postfix_str("")
        return False
