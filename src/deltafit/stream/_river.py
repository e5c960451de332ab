"""river's view of a deltafit stream learner (river is an optional extra)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from sklearn.base import is_classifier

if TYPE_CHECKING:  # river is an optional extra
    from deltafit.stream._river_adapters import RiverClassifier, RiverRegressor

__all__ = ["as_river"]


def _adapters():
    try:
        from deltafit.stream import _river_adapters
    except ImportError as exc:  # pragma: no cover - depends on the environment
        raise ImportError(
            'as_river needs river: pip install "deltafit[river]" (or pip install river)'
        ) from exc
    return _river_adapters


def as_river(learner: Any) -> RiverClassifier | RiverRegressor:
    """Wrap a stream learner (:class:`KDR`, :class:`SlidingWindow`, :class:`DDM`,
    :class:`NORMA`, :class:`Pegasos`, :class:`LSQSGD`, :class:`OneVsRest`, ...) as a river
    ``Classifier`` / ``Regressor``.

    Returns a :class:`~deltafit.stream._river_adapters.RiverClassifier` or
    :class:`~deltafit.stream._river_adapters.RiverRegressor` (module-level classes: they pickle
    and clone as river expects, and pass river's ``checks.yield_checks``).  The wrapper
    forwards ``learn_one`` / ``predict_one`` (dict or array samples; dict features may come and
    go, see ``stream/_features.py``) to the learner, which it does not copy;
    ``predict_one`` returns None before the learner can predict (river's convention).

    Examples
    --------
    >>> from river import evaluate, metrics                       # doctest: +SKIP
    >>> evaluate.progressive_val_score(dataset, as_river(kdr), metrics.Accuracy())  # doctest: +SKIP
    """
    mod = _adapters()
    cls = mod.RiverClassifier if is_classifier(learner) else mod.RiverRegressor
    return cls(learner)


def __getattr__(name: str) -> Any:
    # RiverClassifier / RiverRegressor by their old home, without importing river eagerly
    if name in ("RiverClassifier", "RiverRegressor"):
        return getattr(_adapters(), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
