"""The what-if regions by name: the :class:`~deltafit.sensitivity.regions.Region` interface and the
registry that ``method=`` reads (``deltafit.sensitivity.regions.REGIONS``).  A new region is one
class and one registry entry: ``resolve_method``, ``build_region`` and ``Sensitivity`` pick it up
without further edits."""

import numpy as np
import pytest

import deltafit
from deltafit.losses import get_loss
from deltafit.sensitivity import MulticlassSensitivity, Sensitivity, for_model
from deltafit.sensitivity.regions import (
    METHODS,
    REGIONS,
    Region,
    build_region,
    region_class,
    resolve_method,
)


def test_the_registry_lists_the_shipped_regions():
    assert METHODS == ("auto", "sphere", "exact", "curvature")
    assert tuple(REGIONS) == METHODS[1:]
    for name, cls in REGIONS.items():
        assert issubclass(cls, Region) and cls.kind == name
    assert region_class("exact") is REGIONS["exact"]
    with pytest.raises(ValueError, match="method must be one of"):
        region_class("nope")


@pytest.mark.parametrize(
    "loss, auto", [("squared", "exact"), ("logistic", "curvature"), ("squared_hinge", "curvature")]
)
def test_auto_and_the_refusals_come_from_the_registry(loss, auto):
    lo = get_loss(loss)
    assert resolve_method("auto", lo) == auto
    assert resolve_method("sphere", lo) == "sphere"
    for name, cls in REGIONS.items():
        if cls.covers(loss):
            assert resolve_method(name, lo) == name
        else:
            with pytest.raises(ValueError, match=f"method='{name}' needs"):
                resolve_method(name, lo)


class _CenterOnly(Region):
    """A made-up region: the ball's center, with zero width (to test the plumbing only)."""

    kind = "center"
    losses = ("logistic",)
    requirement = "loss='logistic'"

    def __init__(self, sens):
        self._ball = REGIONS["sphere"].build(sens)

    def decision_bounds(self, X):
        c = self._ball.center_decision(X)
        return c, c

    def center_decision(self, X):
        return self._ball.center_decision(X)

    def distance_bound(self):
        return self._ball.distance_bound()

    def coef_bounds(self):
        return self._ball.coef_bounds()


def test_a_new_region_is_one_class_and_one_entry(monkeypatch, breast_cancer):
    X, y = breast_cancer
    m = deltafit.LinearClassifier(loss="logistic", C=0.1).fit(X[:80], y[:80])
    monkeypatch.setitem(REGIONS, "center", _CenterOnly)
    s = deltafit.sensitivity(m, method="center").remove([0, 1])
    assert s.method == "center" and isinstance(build_region(s), _CenterOnly)
    lo, hi = s.decision_bounds(X[:5])
    np.testing.assert_array_equal(lo, hi)
    ball = deltafit.sensitivity(m, method="sphere").remove([0, 1])
    np.testing.assert_allclose(s.tightness(X[:5]), 0.0)
    np.testing.assert_allclose(lo, ball._center_bounds(X[:5])[0])
    with pytest.raises(ValueError, match="method='center' needs loss='logistic'"):
        deltafit.sensitivity(deltafit.LinearRegressor().fit(X[:80], y[:80]), method="center")


def test_for_model_is_the_factory_of_the_module_call(iris, breast_cancer):
    X, y = iris
    multi = deltafit.LinearClassifier().fit(X, y)
    for s in (for_model(multi), deltafit.sensitivity(multi), Sensitivity(multi)):
        assert type(s) is MulticlassSensitivity and s.n_classes == 3
    Xb, yb = breast_cancer
    binary = deltafit.LinearClassifier().fit(Xb[:60], yb[:60])
    for s in (for_model(binary), deltafit.sensitivity(binary), Sensitivity(binary)):
        assert type(s) is Sensitivity
