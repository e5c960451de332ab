"""The interrupt injector of the transaction and lock tests: a trace function that raises
``KeyboardInterrupt`` at the ``at``-th executed line of deltafit's own code."""

from __future__ import annotations

import sys
from pathlib import Path

import deltafit

SRC = str(Path(deltafit.__file__).parent)


class Interrupt:
    """Raise KeyboardInterrupt at the ``at``-th executed line of deltafit (``at=0``: count the
    lines only, recording them in ``where`` as ``(file, function, line)``).  Raising from a
    trace function ends the tracing."""

    def __init__(self, at=0):
        self.at, self.n, self.where = at, 0, []

    def scope(self, frame, event, arg):
        return self.line if frame.f_code.co_filename.startswith(SRC) else None

    def line(self, frame, event, arg):
        if event == "line":
            self.n += 1
            if not self.at:
                self.where.append((frame.f_code.co_filename, frame.f_code.co_name, frame.f_lineno))
            if self.n == self.at:
                raise KeyboardInterrupt("injected")
        return self.line

    def run(self, fn, *args):
        """``fn(*args)`` traced; True when the interrupt was raised."""
        sys.settrace(self.scope)
        try:
            fn(*args)
            return False
        except KeyboardInterrupt:
            return True
        finally:
            sys.settrace(None)
