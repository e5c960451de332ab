"""river estimators around deltafit's stream learners (imports river: load it through
:func:`deltafit.stream.as_river`, which needs the optional extra ``deltafit[river]``).

The classes live at module level so that river's checks (and users) can pickle and clone them:
``river.checks.yield_checks(RiverClassifier(learner))`` passes with 0 failures for every
deltafit stream learner (``tests/test_river_checks.py``).  Pickling here is river's own
protocol for its estimators; deltafit's persistence (``deltafit.save`` / ``load``) stays
npz + JSON.
"""

from __future__ import annotations

import numpy as np
from river import base
from sklearn.base import clone as sk_clone
from sklearn.exceptions import NotFittedError
from sklearn.utils import get_tags

__all__ = ["RiverClassifier", "RiverRegressor"]


class _RiverAdapter:
    """What both adapters share: ``learn_one`` / ``predict_one`` forwarded to the learner,
    river's ``clone`` as scikit-learn's (a fresh, unfitted learner) and the unit-test
    parameters river's checks instantiate."""

    def __init__(self, learner):
        self.learner = learner

    def learn_one(self, x, y):
        """Learn one sample: ``learner.learn_one(x, y)`` (dict or 1-d array ``x``; dict
        features may come and go, see ``stream/_features.py``)."""
        self.learner.learn_one(x, y)

    def predict_one(self, x, **kwargs):
        """The learner's prediction for ``x``; None (river's "no prediction yet") before it
        can predict."""
        try:
            return self.learner.predict_one(x)
        except NotFittedError:
            return None

    def clone(self, new_params=None, include_attributes=False):
        """A fresh adapter around ``sklearn.base.clone(learner)`` (the learner's parameters,
        none of its state), river's ``clone`` contract; ``new_params`` may give another
        ``learner`` (cloned too)."""
        params = {"learner": self.learner}
        params.update(new_params or {})
        unknown = set(params) - {"learner"}
        if unknown:
            raise ValueError(
                f"{type(self).__name__} has one parameter, learner; got {sorted(unknown)}"
            )
        return type(self)(learner=sk_clone(params["learner"]))

    @property
    def n_model_computations(self):
        """The learner's ``n_model_computations_`` (0 before any)."""
        return int(getattr(self.learner, "n_model_computations_", 0) or 0)


class RiverClassifier(_RiverAdapter, base.Classifier):
    """A deltafit stream classifier as a river ``Classifier``.

    Wraps :class:`~deltafit.stream.KDR`, :class:`~deltafit.stream.SlidingWindow`,
    :class:`~deltafit.stream.DDM`, :class:`~deltafit.stream.NORMA`,
    :class:`~deltafit.stream.Pegasos` or :class:`~deltafit.stream.OneVsRest` (the drift-aware
    learners of Sivan, Gabel and Schuster, "Incremental Sensitivity Analysis for Kernelized
    Models", §4.4, and their baselines), so that river's metrics, ``evaluate`` and checks
    accept it.  ``predict_proba_one`` is not offered (the learners predict labels).

    Parameters
    ----------
    learner : deltafit stream classifier
        Used as given (not copied); ``clone()`` starts from ``sklearn.base.clone(learner)``.
    """

    @property
    def _multiclass(self):
        classes = getattr(self.learner, "classes", None)  # OneVsRest's fixed label set
        if classes is not None:
            return bool(np.unique(np.asarray(classes)).size > 2)
        try:
            return bool(get_tags(self.learner).classifier_tags.multi_class)
        except AttributeError:
            return False

    @classmethod
    def _unit_test_params(cls):
        from deltafit.models import KernelClassifier
        from deltafit.stream._ddm import DDM
        from deltafit.stream._kdr import KDR
        from deltafit.stream._norma import NORMA
        from deltafit.stream._ovr import OneVsRest
        from deltafit.stream._pegasos import Pegasos
        from deltafit.stream._window import SlidingWindow

        kc = KernelClassifier(loss="squared_hinge")
        yield {"learner": KDR(kc, window=50, threshold=1.0)}  # the configurations of issue 19
        yield {"learner": SlidingWindow(kc, window=50, period=10)}
        yield {"learner": DDM(kc, window=30)}
        yield {"learner": DDM(NORMA(budget=30), window=30)}
        yield {"learner": NORMA(budget=30)}
        yield {"learner": Pegasos()}
        # river's binary checks stream the labels False / True (Phishing)
        yield {"learner": OneVsRest(Pegasos(), classes=(False, True))}


class RiverRegressor(_RiverAdapter, base.Regressor):
    """A deltafit stream regressor as a river ``Regressor``.

    Wraps :class:`~deltafit.stream.LSQSGD`, :class:`~deltafit.stream.NORMARegressor`,
    :class:`~deltafit.stream.KDR` or :class:`~deltafit.stream.SlidingWindow` over a deltafit
    regressor, so that river's metrics, ``evaluate`` and checks accept it.

    Parameters
    ----------
    learner : deltafit stream regressor
        Used as given (not copied); ``clone()`` starts from ``sklearn.base.clone(learner)``.
    """

    @classmethod
    def _unit_test_params(cls):
        from deltafit.models import KernelRegressor
        from deltafit.stream._kdr import KDR
        from deltafit.stream._lsqsgd import LSQSGD
        from deltafit.stream._norma import NORMARegressor
        from deltafit.stream._window import SlidingWindow

        yield {"learner": LSQSGD()}
        yield {"learner": NORMARegressor(budget=30)}
        yield {"learner": SlidingWindow(KernelRegressor(), window=30, period=10)}
        yield {"learner": KDR(KernelRegressor(), window=30, threshold=1.0)}
