"""The shared fixtures of ``conftest.py``: ``fitted_models`` fits once and hands out copies."""

import numpy as np
import pytest
from sklearn.kernel_approximation import Nystroem

from deltafit import LinearClassifier


def test_fitted_models_fits_once_and_hands_out_independent_copies(fitted_models, breast_cancer):
    X, y = breast_cancer
    before = fitted_models.n_fits
    a = fitted_models(LinearClassifier(loss="logistic", C=0.7), "breast_cancer", 60)
    b = fitted_models(LinearClassifier(loss="logistic", C=0.7), "breast_cancer", 60)
    assert fitted_models.n_fits == before + 1 and a is not b
    a.remove([0, 1])  # a test's update leaves the others' models as they were
    assert a.n_samples_ == 58 and b.n_samples_ == 60
    fresh = LinearClassifier(loss="logistic", C=0.7).fit(X[:60], y[:60])
    np.testing.assert_array_equal(b.decision_function(X), fresh.decision_function(X))
    # other parameters, rows or data: another fit
    fitted_models(LinearClassifier(loss="logistic", C=0.8), "breast_cancer", 60)
    fitted_models(LinearClassifier(loss="logistic", C=0.7), "breast_cancer", 61)
    fitted_models(LinearClassifier(loss="logistic", C=0.7), "digits", 60)
    assert fitted_models.n_fits == before + 4


def test_fitted_models_needs_parameters_that_identify_the_fit(fitted_models, breast_cancer):
    X, _ = breast_cancer
    fm = Nystroem(n_components=10, random_state=0)
    m = fitted_models(LinearClassifier(loss="hinge", feature_map=fm), "breast_cancer", 40)
    assert m.feature_map_ is not fm  # a clone was fitted; the given estimator is untouched
    with pytest.raises(TypeError, match="callback"):
        fitted_models(LinearClassifier(callback=print), "breast_cancer", 40)
    with pytest.raises(TypeError, match="feature_map"):
        fitted_models(LinearClassifier(feature_map=fm.fit(X)), "breast_cancer", 40)
