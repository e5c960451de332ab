"""Rollback for the updating objects: a failed update leaves the object exactly as it was."""

from __future__ import annotations

from collections.abc import Collection
from types import TracebackType
from typing import Any, Literal

__all__ = ["atomic"]


class atomic:  # noqa: N801 - used like a function: ``with atomic(obj): ...``
    """Context manager: if its block raises, ``obj``'s attributes are put back as they were.

    On entry it saves ``obj.__dict__`` (a shallow copy, or only the ``attrs`` named); on any
    exception (``BaseException``: interruptions too) it restores it and lets the exception
    through.  Saving is shallow: the block may rebind attributes and create new objects freely,
    but an object that it mutates in place is not restored unless it is named in ``copies``.

    Parameters
    ----------
    obj : object
        The object updated by the block (it has a ``__dict__``).
    attrs : tuple of str or None, default=None
        Save and restore only these attributes (one absent at entry is removed again); None:
        the whole attribute dictionary (attributes added by the block are removed).
    copies : tuple of str, default=()
        Attributes holding arrays that the block changes in place: saved as ``.copy()`` at
        entry and, on failure, rebound to those copies.

    Examples
    --------
    >>> class Box:
    ...     pass
    >>> box = Box()
    >>> box.a = 1
    >>> try:
    ...     with atomic(box):
    ...         box.a, box.b = 2, 3
    ...         raise ValueError("bad input")
    ... except ValueError:
    ...     pass
    >>> vars(box)
    {'a': 1}
    """

    __slots__ = ("_dict", "_attrs", "_copies", "_saved", "_copied")

    def __init__(
        self, obj: Any, *, attrs: Collection[str] | None = None, copies: Collection[str] = ()
    ) -> None:
        self._dict = obj.__dict__
        self._attrs = attrs
        self._copies = copies

    def __enter__(self) -> atomic:
        d = self._dict
        if self._attrs is None:
            self._saved = d.copy()
        else:
            saved: dict[str, Any] = {}
            self._saved = saved
            for a in self._attrs:
                if a in d:
                    saved[a] = d[a]
        if self._copies:
            copied: dict[str, Any] = {}
            self._copied = copied
            for a in self._copies:
                if a in d:
                    copied[a] = d[a].copy()
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> Literal[False]:
        if exc_type is None:
            return False
        d, saved = self._dict, self._saved
        if self._attrs is None:
            d.clear()
            d.update(saved)
        else:
            for a in self._attrs:
                if a in saved:
                    d[a] = saved[a]
                else:
                    d.pop(a, None)
        if self._copies:
            d.update(self._copied)
        return False
