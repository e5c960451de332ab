"""numba for the per-sample loops, as an optional extra.

Only modules holding hot loops import this one, and they are themselves imported lazily (on the
first fit of a stream learner or the first TreeCV run), so ``import deltafit`` never loads numba.
Without numba the decorated functions stay plain Python (correct, orders of magnitude slower) and
one warning gives the install hint; numba's own ``NUMBA_DISABLE_JIT=1`` does the same on purpose.
"""

from __future__ import annotations

import warnings

__all__ = ["njit", "HAVE_NUMBA"]

try:
    import numba as _numba
except ImportError:  # pragma: no cover - depends on the environment
    _numba = None

HAVE_NUMBA = _numba is not None


def njit(fn):
    """``numba.njit(cache=True, nogil=True, fastmath=True, error_model="numpy")``, or ``fn``
    itself without numba.

    ``fastmath`` lets the dot products of the per-sample loops vectorize (sums reassociated);
    results differ from the interpreted ones by rounding only.
    """
    if _numba is None:  # pragma: no cover - depends on the environment
        if not getattr(njit, "_warned", False):
            warnings.warn(
                "numba is not installed: deltafit's per-sample loops (deltafit.stream, treecv) "
                "run as plain Python, orders of magnitude slower; "
                "pip install 'deltafit[fast]' (or pip install numba)",
                UserWarning, stacklevel=2,
            )
            njit._warned = True
        return fn
    return _numba.njit(cache=True, nogil=True, fastmath=True, error_model="numpy")(fn)
