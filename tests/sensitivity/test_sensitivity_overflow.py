"""Hypothetical samples whose values overflow float64 arithmetic are refused (ValueError),
before the what-if object changes: no bound is ever NaN."""

from __future__ import annotations

import numpy as np
import pytest

import deltafit
from deltafit import KernelClassifier, LinearClassifier, LinearRegressor
from deltafit.datasets import load_breast_cancer
from deltafit.sensitivity import IncrementalSphere


@pytest.fixture(scope="module")
def data():
    X, y = load_breast_cancer()
    return X[:120], y[:120]


# a kernel that overflows is refused by the kernel evaluation itself
TOO_LARGE = "too large|the kernel produced NaN or inf"

MODELS = [
    lambda: LinearClassifier(),
    lambda: LinearClassifier(loss="logistic"),
    lambda: LinearRegressor(keep_data=False),
    lambda: KernelClassifier(kernel="linear"),
    lambda: KernelClassifier(kernel="poly", degree=2),
]


@pytest.mark.parametrize("value", [1e120, 1e200, 1e300])
@pytest.mark.parametrize("make", MODELS)
def test_overflowing_rows_are_refused(make, value, data):
    X, y = data
    t = y if make()._classifier else X[:, 0]
    m = make().fit(X[:100], t[:100])
    big = np.full((1, X.shape[1]), value)
    s = deltafit.sensitivity(m)
    s.add(X[100:103], t[100:103])
    before = s.decision_bounds(X)
    with pytest.raises(ValueError, match=TOO_LARGE):
        s.add(big, t[:1])
    after = s.decision_bounds(X)
    assert all(np.array_equal(a, b) for a, b in zip(before, after))
    assert all(np.isfinite(b).all() for b in after)
    sphere = IncrementalSphere(m) if m.problem_.keeps_rows else None
    if sphere is not None:
        sphere.add(X[100:103], t[100:103])
        r = sphere.radius
        with pytest.raises(ValueError, match=TOO_LARGE):
            sphere.add(big, t[:1])
        assert sphere.radius == r


def test_large_but_safe_rows_still_work(data):
    X, y = data
    m = LinearClassifier().fit(X[:100], y[:100])
    s = deltafit.sensitivity(m)
    s.add(X[100:101] * 1e6, y[100:101])
    lo, hi = s.decision_bounds(X)
    assert np.isfinite(lo).all() and np.isfinite(hi).all()
