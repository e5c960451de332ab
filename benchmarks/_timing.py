"""What the benchmark scripts share: a timestamped log line on stderr and one timed call."""

from __future__ import annotations

import gc
import sys
import time


def log(msg):
    """``msg`` on stderr, with the time of day."""
    print(f"[{time.strftime('%H:%M:%S')}] {msg}", file=sys.stderr, flush=True)


def timed(fn):
    """(seconds, result) of ``fn()``, with the garbage collector off during the call."""
    gc.collect()
    gc.disable()
    try:
        t0 = time.perf_counter()
        out = fn()
        t = time.perf_counter() - t0
    finally:
        gc.enable()
    return t, out
