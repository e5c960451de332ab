"""Which training samples matter: exact leave-one-out effects, data values, certified
robustness audits and influence-function estimates of a fitted deltafit model.

* :func:`loo_effects` — the change of the decision values on any points when each training
  sample is removed, exact (closed form for the squared loss, side-by-side certified
  re-solves for the logistic and squared-hinge losses, the model's exact update otherwise),
  or certified intervals without re-solving (``method="bounds"``).
* :func:`data_values` — leave-one-out data values ``score(all) − score(all but i)`` with any
  scikit-learn scorer (the ``LOOValuation`` of pyDVL, without its n refits), as a
  :class:`DataValues` result.
* :func:`robustness` — per test point (or for the sign of a coefficient): a certified lower
  bound on how many training samples must be removed to change the prediction, and an upper
  bound with a witness set verified by an exact update (Broderick, Giordano & Meager, "An
  automatic finite-sample robustness metric: when can dropping a little data make a big
  difference?").
* :func:`influence` — the first-order estimate of the same effects (Koh & Liang,
  "Understanding black-box predictions via influence functions"), to see how far it is from
  the exact answer.

The functions read a model only through ``model.problem_`` and its public methods.
"""

from deltafit.attribution._effects import influence, loo_effects
from deltafit.attribution._robustness import Robustness, robustness
from deltafit.attribution._values import DataValues, data_values

__all__ = ["loo_effects", "influence", "data_values", "DataValues", "robustness", "Robustness"]
