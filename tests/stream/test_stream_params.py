"""The stream learners' parameters follow scikit-learn's validation: every parameter has a
constraint in ``_parameter_constraints``, and ``fit`` / ``partial_fit`` refuse a value of the
wrong type with scikit-learn's ``InvalidParameterError`` naming it (its
``check_param_validation``, which ``parametrize_with_checks`` does not run for third-party
estimators)."""

import numpy as np
import pytest
from sklearn.utils._param_validation import InvalidParameterError
from sklearn.utils.estimator_checks import check_param_validation

import deltafit as df
from deltafit.active import FGAL, UncertaintySampling
from deltafit.stream import (
    DDM,
    KDR,
    LSQSGD,
    NORMA,
    NORMARegressor,
    OneVsRest,
    Pegasos,
    SlidingWindow,
)

LEARNERS = [
    Pegasos(lam=1e-2),
    LSQSGD(alpha=0.01, radius=100.0),
    NORMA(gamma=0.5, eta=0.5),
    NORMARegressor(gamma=0.1, eta=0.3),
    SlidingWindow(df.KernelClassifier(gamma=0.5), window=30, period=5, initial=10),
    KDR(df.KernelClassifier(gamma=0.5), window=30, threshold=1.0, initial=10),
    DDM(Pegasos(lam=1e-2), window=30, initial=10),
    OneVsRest(Pegasos(lam=1e-2)),
]


@pytest.mark.filterwarnings("ignore")
@pytest.mark.parametrize("learner", LEARNERS, ids=lambda e: type(e).__name__)
def test_scikit_learn_parameter_validation(learner):
    check_param_validation(type(learner).__name__, learner)


@pytest.mark.parametrize(
    "learner, name",
    [
        (Pegasos(lam=True), "lam"),
        (LSQSGD(radius=-1.0), "radius"),
        (NORMA(budget=0), "budget"),
        (SlidingWindow(Pegasos(), period=0), "period"),
        (DDM(Pegasos(), drift_level=np.nan), "drift_level"),
    ],
)
def test_learn_one_refuses_a_bad_parameter_by_name(learner, name):
    with pytest.raises(InvalidParameterError, match=f"'{name}' parameter"):
        learner.learn_one(np.zeros(2), 0)


@pytest.mark.parametrize(
    "strategy, name",
    [
        (UncertaintySampling(df.LinearClassifier(), m=0), "m"),
        (FGAL(df.LinearClassifier(), p=2.5), "p"),
        (FGAL(df.LinearClassifier(), center="x"), "center"),
        (FGAL(df.LinearClassifier(), region="box"), "region"),
    ],
)
def test_active_learning_strategies_refuse_a_bad_parameter_by_name(strategy, name):
    owner = type(strategy).__name__
    with pytest.raises(InvalidParameterError, match=f"'{name}' parameter of {owner}"):
        strategy._check()
