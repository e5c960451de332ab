"""The feature space of dict samples: river's convention that features come and go.

A stream learner fed dicts (river's samples ``{name: value}``) keeps a :class:`DictFeatures`
in its ``_dict_keys`` attribute: the column of every feature it has learned from.  The policy,
the same for every stream learner (:class:`~deltafit.stream.KDR`,
:class:`~deltafit.stream.SlidingWindow`, :class:`~deltafit.stream.DDM`,
:class:`~deltafit.stream.NORMA`, :class:`~deltafit.stream.Pegasos`,
:class:`~deltafit.stream.LSQSGD`, :class:`~deltafit.stream.OneVsRest`):

* a **missing** feature reads as 0;
* a **new** feature in a learned sample gets the next column (the new names of one sample in
  sorted order, so the key order of a dict never matters) and the learner grows by one zero
  column: every sample learned before had it at 0.  For the online learners this is exactly the
  learner fed the zero-filled rows from the start (tested; equal to rounding, since the compiled
  loops sum in a width-dependent order); the window learners keep
  it in their window, and their next model computation learns from it (KDR recomputes at once:
  its balls live in the model's feature space, as for a class new to the stream);
* a new feature in a sample only **predicted** is ignored (the model has no weight for it).

Integer keys ``{j: x_j}`` (all keys of the first dict non-negative integers) are column indices
instead: the width grows to the largest key learned + 1.  NumPy rows keep scikit-learn's rule:
their width must equal ``n_features_in_``.
"""

from __future__ import annotations

import numbers

import numpy as np

__all__ = ["DictFeatures", "as_row", "pad"]


def _is_index(k):
    return (
        isinstance(k, (numbers.Integral, np.integer))
        and not isinstance(k, (bool, np.bool_))
        and k >= 0
    )


def _canonical(keys):
    """``keys`` in a fixed order (sorted; by type and repr where they do not compare)."""
    try:
        return sorted(keys)
    except TypeError:
        return sorted(keys, key=lambda k: (type(k).__qualname__, repr(k)))


class DictFeatures:
    """The columns of a learner's dict features (immutable: :meth:`extended` makes a new one).

    Parameters
    ----------
    names : dict or None
        ``{name: column}``; None: integer keys are the columns themselves.
    width : int
        Number of columns.
    """

    def __init__(self, names=None, width=0):
        self.names = names
        self.width = width

    @classmethod
    def start(cls, x):
        """The empty space of the kind ``x``'s keys ask for (integer columns or names)."""
        return cls(None if x and all(_is_index(k) for k in x) else {}, 0)

    def unknown(self, x):
        """Keys of ``x`` without a column (names), or the width they need (integer keys)."""
        if self.names is None:
            for k in x:
                if not _is_index(k):
                    raise ValueError(
                        f"feature keys must be column indices 0, 1, ... (the first "
                        f"dict had integer keys), got {k!r}"
                    )
            return max(x, default=-1) + 1 if x else 0
        return [k for k in x if k not in self.names]

    def extended(self, x):
        """The space that also holds the features of ``x`` (``self`` if it holds them all)."""
        new = self.unknown(x)
        if self.names is None:
            return self if new <= self.width else DictFeatures(None, int(new))
        if not new:
            return self
        names = dict(self.names)
        for k in _canonical(new):
            names[k] = len(names)
        return DictFeatures(names, len(names))

    def fill(self, row, x):
        """Write the values of ``x`` into ``row`` (features without a column are skipped)."""
        d = row.shape[0]
        for k, v in x.items():
            j = k if self.names is None else self.names.get(k)
            if j is None or j >= d:
                continue
            try:
                row[j] = v
            except (TypeError, ValueError) as exc:
                raise ValueError(f"feature {k!r} must be a number, got {v!r}") from exc
        return row


def as_row(learner, x, learn=True):
    """One sample as a (1, d) float array.

    ``x`` is a 1-d array (returned as it is) or a dict (see the module docstring).  For a dict,
    ``learn=True`` adds its new features to the learner's space (``learner._dict_keys`` is
    rebound, so ``_transaction.atomic(learner, attrs=("_dict_keys",))`` undoes it) and the row
    has the space's width, which may exceed ``n_features_in_`` (the caller grows the learner);
    ``learn=False`` leaves the space as it is and the row has the learner's width (new features
    ignored).
    """
    if isinstance(x, dict):
        space = learner.__dict__.get("_dict_keys")
        if space is None:
            space = DictFeatures.start(x)
        d = learner.__dict__.get("n_features_in_")
        if learn:
            space = space.extended(x)
            learner._dict_keys = space
            width = max(space.width, d or 0)
        else:
            if space.names is None:
                space.unknown(x)  # refuses keys that are not column indices
            width = d if d is not None else space.extended(x).width
            if d is None:
                space = space.extended(x)
        return space.fill(np.zeros(width), x)[None, :]
    row = (
        np.asarray(x, dtype=np.float64)
        if not isinstance(x, np.ndarray) or x.dtype != np.float64
        else x
    )
    if row.ndim != 1:
        raise ValueError(f"x must be a dict or a 1-d array, got shape {row.shape}")
    return row[None, :]


def pad(row, width):
    """``row`` (1, d) with zero columns up to ``width``."""
    if row.shape[1] >= width:
        return row
    return np.hstack([row, np.zeros((row.shape[0], width - row.shape[1]))])
