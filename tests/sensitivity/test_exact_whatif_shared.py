"""The exact what-if's shortcuts (issue 32): the stored solution's extended-precision gradient
summed only where it can narrow a bound by more than ``_GAIN``, and the query rows' features and
norms shared by the K classes of a multiclass model.  Each is checked against the path without
it and against the retrained model."""

import numpy as np
import pytest

import deltafit
from deltafit.sensitivity import Sensitivity
from deltafit.sensitivity.regions import _exact

SLACK = 1e-9


def _data(seed=0, n=700, d=40, scale=3.0):
    rng = np.random.default_rng(seed)
    W = rng.standard_normal((8, d))
    X0 = rng.standard_normal((n, 8))
    Z = np.cos(X0 @ W + rng.uniform(0.0, 6.0, d)) * scale
    Z[:, : d // 4] *= 10.0  # features of different sizes: the scaled certificate is used
    y = np.argmax(X0[:, :3], axis=1)
    return Z[:600], y[:600], Z[600:]


def _bounds(monkeypatch, wants, X, y, Xq, gone):
    with monkeypatch.context() as mp:
        if wants is not None:
            mp.setattr(_exact, "_wants_stored_gradient", lambda *a: wants)
        m = deltafit.LinearClassifier(tol=1e-12).fit(X, y)
        s = deltafit.sensitivity(m)
        s.remove(gone)
        lo, hi = s.decision_bounds(Xq)
        cl, ch = s.coef_bounds()
        reg = s.for_class(0)._region()
        scale = reg._scale
        assert scale is not None  # the scaled certificate is in play
        excess = _exact._cheap_excess(reg._parts, scale[1], scale[3], scale[0][~scale[2]])
        return (lo, hi, cl, ch), excess


@pytest.mark.parametrize("seed", [0, 1])
def test_without_the_stored_gradient_bounds_stay_within_their_excess(monkeypatch, seed):
    X, y, Xq = _data(seed)
    gone = np.arange(7)
    (lo1, hi1, cl1, ch1), _ = _bounds(monkeypatch, True, X, y, Xq, gone)
    (lo0, hi0, cl0, ch0), excess = _bounds(monkeypatch, False, X, y, Xq, gone)
    keep = np.setdiff1d(np.arange(len(y)), gone)
    new = deltafit.LinearClassifier(tol=1e-12).fit(X[keep], y[keep])
    d = new.decision_function(Xq)
    for lo, hi in [(lo1, hi1), (lo0, hi0)]:
        assert np.all(lo <= d + SLACK * (1 + np.abs(d))) and np.all(
            d <= hi + SLACK * (1 + np.abs(d))
        )
    # the same centers; each half-width at most (1 + excess) times the one with the gradient
    np.testing.assert_allclose(lo0 + hi0, lo1 + hi1, rtol=1e-12, atol=0)
    grow = (1.0 + excess) * (1.0 + 1e-12)
    assert np.all(hi0 - lo0 <= grow * (hi1 - lo1))
    assert np.all(ch0 - cl0 <= grow * (ch1 - cl1))


def test_the_cheap_path_is_taken_where_the_gradient_cannot_help():
    parts = np.array([1e-12, 1e-9, 1e-7])
    tol_s = np.array([1e-9, 1e-8, 1e-6])
    none = np.empty((3, 0))
    assert _exact._cheap_excess(parts, tol_s, none, np.array([0.01, 0.5])) == pytest.approx(1e-4)
    assert not _exact._wants_stored_gradient(parts, tol_s, none, np.array([0.01, 0.5]))
    # a tiny scaling makes the other parts small: then the gradient is summed
    assert _exact._wants_stored_gradient(parts, tol_s, none, np.array([1e-6]))
    assert _exact._wants_stored_gradient(parts, np.zeros(3), none, np.array([0.5]))


def test_shared_query_rows_follow_the_rows_asked():
    X, y, Xq = _data(2)
    m = deltafit.LinearClassifier(tol=1e-12).fit(X, y)
    s = deltafit.sensitivity(m)
    s.remove(np.arange(5))
    Xq = Xq.copy()
    lo, hi = s.decision_bounds(Xq)
    Xq[:10] *= 2.0  # changed in place: not the rows of the last query
    lo2, hi2 = s.decision_bounds(Xq)
    fresh = deltafit.sensitivity(m)
    fresh.remove(np.arange(5))
    flo, fhi = fresh.decision_bounds(Xq)
    np.testing.assert_array_equal(lo2, flo)
    np.testing.assert_array_equal(hi2, fhi)
    assert not np.array_equal(lo2[:10], lo[:10])
    # each class alone (its own binary what-if, nothing shared) answers the same
    for k in range(s.n_classes):
        alone = Sensitivity(m, problem=m.problem_.for_class(k))
        alone.remove(np.arange(5))
        a_lo, a_hi = alone.decision_bounds(Xq)
        np.testing.assert_allclose(a_lo, flo[:, k], rtol=1e-13, atol=1e-15)
        np.testing.assert_allclose(a_hi, fhi[:, k], rtol=1e-13, atol=1e-15)
    # a second change: the new factor's scaled norms, not the old ones
    s.remove(np.arange(5, 9))
    lo3, hi3 = s.decision_bounds(Xq)
    fresh.remove(np.arange(5, 9))
    np.testing.assert_array_equal(lo3, fresh.decision_bounds(Xq)[0])
    np.testing.assert_array_equal(hi3, fresh.decision_bounds(Xq)[1])
