"""scikit-learn's estimator checks over the stream learners."""

from sklearn.utils.estimator_checks import parametrize_with_checks

from deltafit.stream import LSQSGD, Pegasos


@parametrize_with_checks([Pegasos(lam=1e-2), LSQSGD(alpha=0.01, radius=100.0)])
def test_sklearn_compatible(estimator, check):
    check(estimator)
