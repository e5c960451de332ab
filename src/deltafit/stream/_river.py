"""river's view of a deltafit stream learner (river is an optional extra)."""

from __future__ import annotations

from sklearn.base import is_classifier

__all__ = ["as_river"]

_CLASSES = {}


def _adapter(kind):
    if kind in _CLASSES:
        return _CLASSES[kind]
    try:
        from river import base
    except ImportError as exc:  # pragma: no cover - depends on the environment
        raise ImportError(
            "as_river needs river: pip install \"deltafit[river]\" (or pip install river)"
        ) from exc
    parent = base.Classifier if kind == "classifier" else base.Regressor

    class RiverAdapter(parent):
        """A deltafit stream learner as a river estimator (``learn_one`` / ``predict_one``
        delegate to it), so that river's metrics and ``evaluate.progressive_val_score``
        accept it."""

        def __init__(self, learner):
            self.learner = learner

        def learn_one(self, x, y):
            self.learner.learn_one(x, y)

        def predict_one(self, x):
            try:
                return self.learner.predict_one(x)
            except ValueError:
                if getattr(self.learner, "n_samples_seen_", 0):
                    raise
                return None  # river's convention before the first sample

        @property
        def n_model_computations(self):
            return getattr(self.learner, "n_model_computations_", 0)

    RiverAdapter.__name__ = RiverAdapter.__qualname__ = f"River{kind.capitalize()}Adapter"
    _CLASSES[kind] = RiverAdapter
    return RiverAdapter


def as_river(learner):
    """Wrap a stream learner (:class:`KDR`, :class:`SlidingWindow`, :class:`DDM`,
    :class:`NORMA`, ...) as a river ``Classifier`` / ``Regressor``.

    river's evaluation checks ``isinstance(model, river.base.Classifier)``; the wrapper passes
    that check and forwards ``learn_one`` / ``predict_one`` (dict or array samples) to the
    learner, which it does not copy.

    Examples
    --------
    >>> from river import evaluate, metrics                       # doctest: +SKIP
    >>> evaluate.progressive_val_score(dataset, as_river(kdr), metrics.Accuracy())  # doctest: +SKIP
    """
    return _adapter("classifier" if is_classifier(learner) else "regressor")(learner)
