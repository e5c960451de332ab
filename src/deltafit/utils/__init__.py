"""Utilities for people who build on deltafit.

:mod:`deltafit.utils.estimator_checks` holds the conformance suite of the update contract
(exact ``add`` / ``remove`` / ``relabel`` / ``update``, transactional failures, stable ids,
persistence, certified sensitivity bounds), in the style of scikit-learn's
:mod:`sklearn.utils.estimator_checks`.
"""

__all__ = ["estimator_checks"]
