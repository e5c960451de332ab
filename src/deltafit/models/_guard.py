"""A model's lock and read guard: what makes its reads safe during its updates.

:class:`_Guard` is the lock (an RLock) and the write counter (a seqlock) of one model;
:func:`guarded_read` makes a read-only property read the model between two updates;
:class:`GuardedMixin` gives an estimator its guard and the two ways through it,
``_locked`` (a write) and ``_read`` (a read).  Every fit and update of a deltafit estimator is
a write (see :class:`~deltafit.models.UpdatableMixin`).
"""

from __future__ import annotations

import functools
import threading
from collections.abc import Callable
from typing import Any, TypeVar

__all__ = ["GuardedMixin", "guarded_read"]

T = TypeVar("T")


class _Guard:
    """A model's lock and write counter: what makes its reads safe during its updates.

    Writes (:meth:`write`, under ``lock``) make ``seq`` odd before changing the model and even
    (larger) after.  :meth:`read` runs a read without the lock and keeps its result when
    ``seq`` was even before it and the same after it: no write overlapped it, so it saw the
    model between two updates.  Otherwise (or when the lock-free attempt raised) the read runs
    again under the lock, after the update in progress.  Reads of one model therefore run
    concurrently with each other and wait only for an update that overlaps them.

    Interrupts: an interrupt landing anywhere in :meth:`write` may leave ``seq`` odd (never
    even while a write is under way); an odd ``seq`` only sends reads to the lock, and the
    next write makes it even again.  The lock itself is taken and released by a one-line
    ``with`` (:meth:`GuardedMixin._locked`, and the locked read here).
    """

    __slots__ = ("lock", "seq", "owner")

    def __init__(self):
        self.lock = threading.RLock()
        self.seq = 0  # odd while a write may be under way
        self.owner = None  # the thread of the write under way (its nested writes pass)

    def write(self, fn, args, kwargs):
        """``fn(*args, **kwargs)`` with ``seq`` odd meanwhile (the caller holds ``lock``)."""
        me = threading.get_ident()
        if self.owner == me:  # nested in this thread's own write: the outer one counts
            return fn(*args, **kwargs)
        self.seq |= 1
        self.owner = me
        try:
            return fn(*args, **kwargs)
        finally:
            self.owner = None
            self.seq = (self.seq | 1) + 1

    def read(self, fn):
        """``fn()``, as it reads the model between two writes (see the class docstring)."""
        seq = self.seq
        if not seq & 1:
            try:
                out = fn()
            except Exception:  # noqa: BLE001 - perhaps a torn read: again under the lock
                pass
            else:
                if self.seq == seq:
                    return out
        # one line (see GuardedMixin._locked)
        with self.lock: return fn()  # noqa: E701  # fmt: skip


def guarded_read(prop: Callable[[Any], T]) -> Callable[[Any], T]:
    """Decorator of a model's read-only property: it reads the model as it is between two
    updates, never half updated (:meth:`_Guard.read`); an unfitted model reads without it."""

    @functools.wraps(prop)
    def read(self):
        if not self._is_fitted():
            return prop(self)  # raises AttributeError, or reads what needs no fit
        return self._read(lambda: prop(self))

    return read


class GuardedMixin:
    """The model's guard (made on first use, never copied or pickled) and the two ways
    through it: :meth:`_locked` for writes, :meth:`_read` for reads.

    Writers (fits, updates) hold the model's lock (an RLock) for the whole transaction and
    bump ``_Guard.seq`` to odd before changing anything, to even after.  Readers run without
    the lock and keep their result when ``seq`` was even and unchanged across the read (no
    write overlapped it); otherwise they read again under the lock.  The lock is taken and
    released only by a one-line ``with lock: return ...`` statement (see :meth:`_locked`).
    """

    def _guard(self) -> _Guard:
        """The model's :class:`_Guard` (its lock and write counter), made on first use."""
        guard = self.__dict__.get("_update_lock")
        if guard is None:  # dict.setdefault is atomic: racing threads all get the first one
            guard = self.__dict__.setdefault("_update_lock", _Guard())
        return guard

    def _lock(self):
        """The lock that serialises this model's fits and updates (made on first use)."""
        return self._guard().lock

    def _locked(self, fn, /, *args, **kwargs):
        """``fn(*args, **kwargs)`` as a write: under the model's lock, with the write counter
        odd meanwhile (reads that overlap it read again under the lock)."""
        guard = self._guard()
        # One line, on purpose: ``with`` acquires in C (BEFORE_WITH) and the instruction after
        # it is inside the block's exception range, so no interrupt can land between acquiring
        # and being protected; its release (``__exit__``, C) runs on the same line as the
        # body's return, so no line event (where a tracing interrupt lands) separates them
        # either.  A ``with`` over two lines has one: the exit is traced on the ``with`` line,
        # outside the protected range, and an interrupt there would leave the lock held.
        with guard.lock: return guard.write(fn, args, kwargs)  # noqa: E701  # fmt: skip

    def _read(self, fn):
        """``fn()`` as a read: the model before or after any concurrent update, never half
        updated (see :meth:`_Guard.read`)."""
        return self._guard().read(fn)

    def __getstate__(self):
        state = super().__getstate__()
        state.pop("_update_lock", None)  # a lock cannot be copied or pickled; one is made anew
        return state
