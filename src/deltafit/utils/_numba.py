"""numba for the per-sample loops, as an optional extra.

Only modules holding hot loops import this one, and they are themselves imported lazily (on the
first fit of a stream learner or the first TreeCV run), so ``import deltafit`` never loads numba.
Without numba the decorated functions stay plain Python (correct, orders of magnitude slower) and
one warning gives the install hint; numba's own ``NUMBA_DISABLE_JIT=1`` does the same on purpose.

The first compilation of deltafit's loops takes seconds and happens once: numba caches the
result on disk (``cache=True``) and later runs load it.  That first time deltafit says so on
standard error ("compiling ..., once") instead of leaving an open progress bar to show a
wrong estimate of the time left (:func:`deltafit.utils._progress.paused_for` labels the bar and
takes the pause out of its rate).  A cache hit compiles nothing and prints nothing.
"""

from __future__ import annotations

import sys
import threading
import time
import warnings
from collections.abc import Callable
from typing import Any, TypeVar

from deltafit.utils._progress import open_bar, paused_for

__all__ = ["njit", "HAVE_NUMBA"]

_numba: Any  # the numba module (untyped), or None without it
try:
    import numba

    _numba = numba
except ImportError:  # pragma: no cover - depends on the environment
    _numba = None

_F = TypeVar("_F", bound=Callable[..., Any])

HAVE_NUMBA = _numba is not None

COMPILING = "compiling, once"


def _is_deltafit(dispatcher: Any) -> bool:
    module = getattr(getattr(dispatcher, "py_func", None), "__module__", "") or ""
    return module == "deltafit" or module.startswith("deltafit.")


class _CompileNotice:
    """numba event listener: one line on standard error around the first compilation of
    deltafit's loops in this process, and the open progress bar labelled while it lasts.

    Only the outermost compilation of a deltafit function counts (numba compiles the functions
    a compiled function calls inside its own compilation); compilations of other packages'
    functions are not deltafit's to announce.
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._depth = 0
        self._announced = False
        self._pause: Any = None
        self._t0 = 0.0
        self._printed = False

    def on_start(self, event: Any) -> None:
        if not _is_deltafit((event.data or {}).get("dispatcher")):
            return
        with self._lock:
            self._depth += 1
            if self._depth > 1:
                return
            self._t0 = time.perf_counter()
            self._printed = False
            if open_bar() is not None:
                self._pause = paused_for(COMPILING).__enter__()
            elif not self._announced:
                print(
                    "deltafit: compiling the per-sample loops with numba, once "
                    "(cached on disk; later runs start at once) ...",
                    file=sys.stderr,
                    flush=True,
                )
                self._printed = True
            self._announced = True

    def on_end(self, event: Any) -> None:
        if not _is_deltafit((event.data or {}).get("dispatcher")):
            return
        with self._lock:
            self._depth -= 1
            if self._depth > 0:
                return
            if self._pause is not None:
                self._pause.__exit__(None, None, None)
                self._pause = None
            if self._printed:
                print(
                    f"deltafit: compiled in {time.perf_counter() - self._t0:.1f} s",
                    file=sys.stderr,
                    flush=True,
                )
                self._printed = False


_notice: _CompileNotice | None = None
_warned = False  # the install hint was given


def _install_notice() -> None:
    global _notice
    if _numba is None or _notice is not None:
        return
    try:
        from numba.core import event
    except ImportError:  # pragma: no cover - numba without the event API
        return
    notice = _notice = _CompileNotice()

    class _Listener(event.Listener):
        def on_start(self, ev: Any) -> None:
            notice.on_start(ev)

        def on_end(self, ev: Any) -> None:
            notice.on_end(ev)

    event.register("numba:compile", _Listener())


def njit(fn: _F) -> _F:
    """``numba.njit(cache=True, nogil=True, fastmath=True, error_model="numpy")``, or ``fn``
    itself without numba.

    ``fastmath`` lets the dot products of the per-sample loops vectorize (sums reassociated);
    results differ from the interpreted ones by rounding only.  The first compilation in a
    process announces itself on standard error (see the module's docstring).

    Parameters
    ----------
    fn : function
        A function numba can compile in nopython mode.

    Returns
    -------
    numba dispatcher or function
    """
    global _warned
    if _numba is None:  # pragma: no cover - depends on the environment
        if not _warned:
            warnings.warn(
                "numba is not installed: deltafit's per-sample loops (deltafit.stream, treecv) "
                "run as plain Python, orders of magnitude slower; "
                "pip install 'deltafit[fast]' (or pip install numba)",
                UserWarning,
                stacklevel=2,
            )
            _warned = True
        return fn
    _install_notice()
    jitted: _F = _numba.njit(cache=True, nogil=True, fastmath=True, error_model="numpy")(fn)
    return jitted  # a dispatcher, called as ``fn`` is
