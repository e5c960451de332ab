"""The binary label encoder of the classifiers: two labels on one side, targets ±1 on the other.

The batch models (:mod:`deltafit.models`) and the stream learners
(:class:`~deltafit.stream.Pegasos`, :class:`~deltafit.stream.NORMA`) learn the same way which two
labels they classify and map labels to ±1 (``classes_[1]`` is +1) and back, following
scikit-learn's conventions: any two labels (strings included), ``classes=`` on the first
``partial_fit`` (then ``y`` may show a single label), and an error for a third label.  Each
learner keeps its own wording of the errors, a :class:`LabelMessages`.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any, TypeVar, cast

import numpy as np
from numpy.typing import ArrayLike
from sklearn.utils.multiclass import check_classification_targets, type_of_target

__all__ = ["BinaryLabels", "LabelMessages"]

_B = TypeVar("_B", bound="BinaryLabels")
_C = TypeVar("_C", bound="ClassLabels")


@dataclass(frozen=True)
class LabelMessages:
    """One learner's wording of the label errors, as ``str.format`` templates.

    Every template may use ``{name}``; the other fields are listed with each.

    Parameters
    ----------
    name : str, default="the learner"
        How the templates name the learner.
    label_type : str or None
        ``y`` does not hold class labels (``{what}``, ``{kind}``: the answer of
        ``sklearn.utils.multiclass.type_of_target``, not ``"binary"`` or ``"multiclass"``).
        None: scikit-learn's ``check_classification_targets`` decides, with its message.
    one_class : str
        ``y`` shows a single label and no ``classes`` were given (``{labels}``), or, when
        ``classes_size`` is None, ``classes`` holds a single label.
    many : str
        More than two labels (``{source}``: ``"y"`` or ``"classes"``, ``{n}``, ``{labels}``,
        ``{first10}``: the first ten labels).
    classes_size : str or None
        ``classes`` does not hold two labels (``{n}``: its distinct labels, ``{given}``: the
        argument as a list).  None: ``many`` or ``one_class`` say it, with
        ``source="classes"``.
    outside_classes : str
        At fit, ``y`` has labels that are not among the given ``classes`` (``{unseen}``,
        ``{classes}``).
    unknown : str
        After fit, labels that are not among ``classes_`` (``{what}``, ``{labels}``,
        ``{first10}``, ``{classes}``).
    """

    name: str = "the learner"
    label_type: str | None = "Unknown label type: {what} must hold class labels, got {kind} values"
    one_class: str = (
        "y has one class: {name} needs two (pass classes= to partial_fit when the "
        "first batch shows one)"
    )
    many: str = (
        "Only binary classification is supported: {source} has {n} classes ({name} is binary)"
    )
    classes_size: str | None = None
    outside_classes: str = "y has labels outside classes={classes}"
    unknown: str = (
        "{what} has labels {labels} that are not in classes_ {classes} ({name} is binary)"
    )

    def error(self, template: str, **fields: Any) -> ValueError:
        """A ValueError with ``template`` filled in (``name`` included)."""
        return ValueError(template.format(name=self.name, **fields))


def distinct_labels(values: ArrayLike) -> list[Any]:
    """The distinct labels among ``values`` as a list, for a message: sorted when they can be
    compared, else in order of first appearance (``None``, mixed types)."""
    listed = np.asarray(values, dtype=object).ravel().tolist()
    try:
        return sorted(set(listed))
    except TypeError:  # labels that cannot be ordered (None, or str next to int)
        seen: dict[str, Any] = {}
        for v in listed:
            seen.setdefault(repr(v), v)
        return list(seen.values())


def _as_list(classes: ArrayLike) -> list[Any]:
    """``list(classes)``, for a message (``classes``: a sequence or 1-D array of labels)."""
    return list(cast(Iterable[Any], classes))


def _check_within(y: ArrayLike, labels: np.ndarray, messages: LabelMessages) -> None:
    """ValueError (``messages.outside_classes``) when ``y`` has labels outside ``labels``."""
    unseen = np.setdiff1d(np.unique(y), labels)
    if unseen.size:
        raise messages.error(
            messages.outside_classes, unseen=unseen.tolist(), classes=labels.tolist()
        )


class BinaryLabels:
    """Two class labels and their encoding as targets ±1 (``classes_[1]`` is +1).

    Made afresh at each use from the owner's ``classes_`` (it holds no other state), so the
    owner's ``classes_`` stays the one record of the labels (copies, persistence and rollbacks
    need nothing else).

    Parameters
    ----------
    classes : ndarray of shape (2,) or None, default=None
        The labels, sorted (an owner's ``classes_``); None until :meth:`fit`.
    messages : LabelMessages, optional
        The wording of the errors.

    Attributes
    ----------
    classes_ : ndarray of shape (2,) or None
    """

    __slots__ = ("classes_", "messages")
    classes_: Any  # ndarray of the labels, None before fit

    def __init__(
        self, classes: np.ndarray | None = None, messages: LabelMessages = LabelMessages()
    ) -> None:
        self.classes_ = classes
        self.messages = messages

    def fit(
        self: _B, y: np.ndarray, classes: ArrayLike | None = None, *, check_type: bool = True
    ) -> _B:
        """Learn the two labels from ``y``, or take them from ``classes``.

        Parameters
        ----------
        y : ndarray of shape (n_samples,)
            The labels (already 1-D).
        classes : array-like, optional
            Both labels; ``y`` must then be among them and may show a single one.
        check_type : bool, default=True
            Check first that ``y`` holds class labels (see :attr:`LabelMessages.label_type`).

        Returns
        -------
        self

        Raises
        ------
        ValueError
            For labels that are not class labels, one label without ``classes``, more than two
            labels, ``classes`` that are not two labels or labels of ``y`` outside them.
        """
        m = self.messages
        if check_type:
            if m.label_type is None:
                check_classification_targets(y)
            else:
                kind = type_of_target(y)
                if kind not in ("binary", "multiclass"):
                    raise m.error(m.label_type, what="y", kind=kind)
        if classes is None:
            labels = np.unique(y)
            self._check_two(labels, "y")
        else:
            labels = np.unique(np.asarray(classes))
            if labels.size != 2:
                if m.classes_size is not None:
                    raise m.error(m.classes_size, n=labels.size, given=_as_list(classes))
                self._check_two(labels, "classes")
            _check_within(y, labels, m)
        self.classes_ = labels
        return self

    def _check_two(self, labels: np.ndarray, source: str) -> None:
        m = self.messages
        if labels.size < 2:
            raise m.error(m.one_class, labels=labels.tolist())
        if labels.size > 2:
            listed = labels.tolist()
            raise m.error(m.many, source=source, n=labels.size, labels=listed, first10=listed[:10])

    def partial_fit(
        self: _B, y: np.ndarray, classes: ArrayLike | None = None, *, check_type: bool = True
    ) -> _B:
        """scikit-learn's ``partial_fit`` convention: :meth:`fit` on the first call; later,
        ``classes`` (if given) must be the labels already known.

        Parameters
        ----------
        y : ndarray of shape (n_samples,)
        classes : array-like, optional
        check_type : bool, default=True
            As in :meth:`fit` (first call only).

        Returns
        -------
        self
        """
        if self.classes_ is None:
            return self.fit(y, classes, check_type=check_type)
        if classes is not None:
            self.check_classes(classes)
        return self

    def check_classes(self, classes: ArrayLike) -> None:
        """Raise a ValueError unless ``classes`` holds exactly the two known labels."""
        if not np.array_equal(np.unique(np.asarray(classes)), self.classes_):
            raise ValueError(
                f"classes={_as_list(classes)} differ from the model's {self.classes_.tolist()}"
            )

    def encode(self, y: ArrayLike, what: str = "y") -> np.ndarray:
        """Targets ±1 of the labels ``y``.

        Parameters
        ----------
        y : array-like
            Labels, each one of ``classes_``.
        what : str, default="y"
            The name of ``y`` in the error message.

        Returns
        -------
        ndarray of float, the shape of ``y``

        Raises
        ------
        ValueError
            If a label is not one of ``classes_``.
        """
        y = np.asarray(y)
        c0, c1 = self.classes_
        pos = y == c1
        bad = ~(pos | (y == c0))
        if bad.any():
            m = self.messages
            labels = distinct_labels(y[bad])
            raise m.error(
                m.unknown,
                what=what,
                labels=labels,
                first10=labels[:10],
                classes=self.classes_.tolist(),
            )
        return np.where(pos, 1.0, -1.0)

    def decode(self, t: ArrayLike) -> np.ndarray:
        """Labels of the targets or decision values ``t``: ``classes_[1]`` where ``t > 0``."""
        return self.classes_[(np.asarray(t) > 0).astype(np.intp)]


class ClassLabels:
    """Two or more class labels and their encoding as class indices ``0 … K−1`` (the
    multiclass models' targets; ``classes_`` sorted, as scikit-learn's).

    Parameters
    ----------
    classes : ndarray or None, default=None
        The labels, sorted; None until :meth:`fit`.
    messages : LabelMessages, optional
        The wording of the errors (``one_class``, ``outside_classes``, ``unknown``).

    Attributes
    ----------
    classes_ : ndarray of shape (n_classes,) or None
    """

    __slots__ = ("classes_", "messages")
    classes_: Any  # ndarray of the labels, None before fit

    def __init__(
        self, classes: np.ndarray | None = None, messages: LabelMessages = LabelMessages()
    ) -> None:
        self.classes_ = classes
        self.messages = messages

    def fit(self: _C, y: np.ndarray, classes: ArrayLike | None = None) -> _C:
        """Learn the labels from ``y`` (at least two), or take them from ``classes`` (then
        ``y`` must be among them and may show fewer).

        Parameters
        ----------
        y : ndarray of shape (n_samples,)
        classes : array-like, optional

        Returns
        -------
        self

        Raises
        ------
        ValueError
            For values that are not class labels, a single label without ``classes``,
            ``classes`` with fewer than two labels, or labels of ``y`` outside ``classes``.
        """
        m = self.messages
        check_classification_targets(y)
        if classes is None:
            labels = np.unique(y)
        else:
            labels = np.unique(np.asarray(classes))
            _check_within(y, labels, m)
        if labels.size < 2:
            raise m.error(m.one_class, labels=labels.tolist())
        self.classes_ = labels
        return self

    def encode(self, y: ArrayLike, what: str = "y") -> np.ndarray:
        """Class indices (floats) of the labels ``y``; ValueError for a label that is not one
        of ``classes_``."""
        y = np.asarray(y)
        classes = self.classes_
        try:
            idx = np.searchsorted(classes, y)
        except TypeError:  # labels that cannot be ordered with the classes (None, mixed types)
            index: dict[Any, int] = {}
            for i, c in enumerate(classes.tolist()):
                index.setdefault(c, i)
            found: list[int] = []
            for v in y.ravel().tolist():
                try:
                    found.append(index.get(v, -1))
                except TypeError:  # unhashable
                    found.append(-1)
            idx = np.asarray(found, dtype=np.intp).reshape(y.shape)
            bad = idx < 0
            idx = np.maximum(idx, 0)
        else:
            idx = np.minimum(idx, classes.size - 1)
            bad = classes[idx] != y
        if np.any(bad):
            m = self.messages
            labels = distinct_labels(y[bad])
            raise m.error(
                m.unknown, what=what, labels=labels, first10=labels[:10], classes=classes.tolist()
            )
        return idx.astype(np.float64)

    def decode(self, scores: ArrayLike) -> np.ndarray:
        """Labels of the decision values ``scores`` (n, K): the class of the largest score."""
        return self.classes_[np.argmax(np.asarray(scores), axis=1)]
