"""No silent inexact solves on a Dask cluster (issue 30, item 6): the Dask fits of the smooth
losses (logistic, squared hinge; two classes and K ≥ 3 one-vs-rest) keep the NumPy path's
contract.

* A sample whose Newton curvature ``C·w·ℓ''·‖Φ(x)‖²`` is beyond double precision (1/ε) is
  refused by the fit with :func:`deltafit.solvers.check_curvature`'s ValueError, checked in the
  pass that validates and persists the rows; a refused refit keeps the fitted model.  Before:
  the logistic fit took a row of one feature 1e12 silently (grad_norm_ ≈ 31 reported as
  converged) and the squared hinge refused it as "Newton's method did not descend".
* A solve that stops at ``max_iter`` keeps its result and warns scikit-learn's
  ConvergenceWarning naming ``grad_norm_`` and ``tol`` (and the one-vs-rest class), its
  ``grad_norm_`` the norm of ∇J at the returned β (recomputed here from the rows).  Before: a
  ValueError "did not descend ... too ill-conditioned".
* A converged solve is silent and equals the NumPy fit within both certificates.

Small data (breast cancer, wine), a few row blocks, dask's threaded scheduler.
"""

from __future__ import annotations

import re
import warnings

import numpy as np
import pytest
from sklearn.datasets import load_digits
from sklearn.exceptions import ConvergenceWarning
from sklearn.preprocessing import StandardScaler

from dask_helpers import (
    _threads,  # noqa: F401  (autouse: the threaded scheduler)
    assert_classes_same,
    assert_newton_same,
    chunked,
    class_coefs,
    class_gradient,
    full_coef,
    gradient,
)
from deltafit import LinearClassifier
from deltafit.losses import get_loss
from deltafit.solvers import check_curvature

dask = pytest.importorskip("dask")
da = pytest.importorskip("dask.array")

SMOOTH = ["logistic", "squared_hinge"]


def _data(request, name):
    X, y = request.getfixturevalue(name)
    return X, y, (200 if name == "cancer" else 60)


def _big_row(p, value=1e12):
    row = np.zeros((1, p))
    row[0, 0] = value
    return row


def _snapshot(m, X):
    return {
        "decision": m.decision_function(X),
        "ids": m.sample_ids_.copy(),
        "coef": np.array(m.coef_, copy=True),
        "intercept": np.array(m.intercept_),
        "grad_norm": m.grad_norm_,
        "n": m.n_samples_,
    }


def _curvature_message(sq, cw, loss):
    """What the NumPy path's rule says of one sample (``check_curvature``)."""
    with pytest.raises(ValueError) as exc:
        check_curvature(np.array([sq]), cw, get_loss(loss))
    return str(exc.value)


def _warned(rec):
    return [w for w in rec if issubclass(w.category, ConvergenceWarning)]


def _reported(msg):
    return float(re.search(r"grad_norm_ = ([0-9.e+-]+)", msg).group(1))


# ---------------------------------------------------------------------------------------------
# a row beyond double precision: refused by the fit's validating pass
# ---------------------------------------------------------------------------------------------
@pytest.mark.parametrize("loss", SMOOTH)
@pytest.mark.parametrize("data", ["cancer", "wine"])
def test_a_dask_fit_refuses_a_row_beyond_double_precision(request, loss, data):
    X, y, rows = _data(request, data)
    row = _big_row(X.shape[1])
    at = rows + 10  # in the second block
    Xb, yb = np.vstack([X[:at], row, X[at:]]), np.insert(y, at, y[0])
    m = LinearClassifier(loss=loss)
    with pytest.raises(ValueError, match="Newton curvature") as exc:
        m.fit(*chunked(Xb, yb, rows))
    # the NumPy path's words for that sample: ‖Φ(x)‖² = 1e24 + 1 (the constant column), C·w = 1
    assert str(exc.value) == _curvature_message(1e24 + 1.0, 1.0, loss)
    assert "leading minor" not in str(exc.value) and "did not descend" not in str(exc.value)
    assert not hasattr(m, "coef_")
    # a refused refit keeps the fitted model, which keeps updating
    m.fit(*chunked(X, y, rows))
    before = _snapshot(m, X)
    with pytest.raises(ValueError, match="Newton curvature"):
        m.fit(*chunked(Xb, yb, rows))
    after = _snapshot(m, X)
    for key, value in before.items():
        assert np.array_equal(value, after[key]), f"{key} changed by a refused refit"
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # converged: silent
        m.remove([3, 7])
    assert m.n_samples_ == X.shape[0] - 2


@pytest.mark.parametrize("loss", SMOOTH)
def test_a_large_weight_is_refused_and_a_zero_weight_row_is_absent(cancer, loss):
    X, y = cancer
    # C·w·ℓ''·‖Φ‖² beyond 1/ε by the weight alone (ℓ'' ≥ ¼, ‖Φ(x_3)‖² ≥ 1)
    w = np.ones(X.shape[0])
    w[3] = 2.0**56 / float(X[3] @ X[3] + 1.0)
    with pytest.raises(ValueError, match="Newton curvature") as exc:
        LinearClassifier(loss=loss).fit(*chunked(X, y, 200, w))
    assert str(exc.value) == _curvature_message(float(X[3] @ X[3] + 1.0), w[3], loss)
    # weight 0: the row is not in the problem, nothing to refuse (the NumPy rule)
    Xb, yb = np.vstack([X, _big_row(X.shape[1])]), np.append(y, 1)
    wb = np.append(np.ones(X.shape[0]), 0.0)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        m = LinearClassifier(loss=loss).fit(*chunked(Xb, yb, 200, wb))
        ref = LinearClassifier(loss=loss).fit(Xb, yb, sample_weight=wb)
    assert_newton_same(ref, m, Xb, yb, wb)


# ---------------------------------------------------------------------------------------------
# max_iter reached: ConvergenceWarning naming grad_norm_ and tol, the result kept
# ---------------------------------------------------------------------------------------------
@pytest.mark.parametrize("loss", SMOOTH)
def test_a_dask_fit_and_update_that_reach_max_iter_warn(cancer, loss):
    X, y = cancer
    with warnings.catch_warnings(record=True) as rec:
        warnings.simplefilter("always")
        m = LinearClassifier(loss=loss, max_iter=2).fit(*chunked(X, y, 200))
    (w,) = _warned(rec)
    msg = str(w.message)
    assert "grad_norm_ =" in msg and "tol=1e-10" in msg and "max_iter=2" in msg, msg
    assert w.filename == __file__  # points at the caller's fit, not inside deltafit
    assert m.problem_.solver_result.converged is False
    assert m.grad_norm_ > 1e-10 * 1e3  # far from tol: hence the warning
    # grad_norm_ is ‖∇J‖ at the returned β, recomputed from the rows, and certifies it
    assert m.grad_norm_ == pytest.approx(np.linalg.norm(gradient(m, X, y)), rel=1e-6)
    ref = LinearClassifier(loss=loss).fit(X, y)
    assert np.linalg.norm(full_coef(m) - full_coef(ref)) <= m.grad_norm_ + ref.grad_norm_
    assert _reported(msg) == pytest.approx(m.grad_norm_, rel=1e-2)
    # an update that reaches max_iter warns too (relabelling a third of the samples)
    y2 = y.copy()
    y2[::3] = 1 - y[::3]
    with warnings.catch_warnings(record=True) as rec:
        warnings.simplefilter("always")
        m.relabel(list(range(0, X.shape[0], 3)), y2[::3])
    (w,) = _warned(rec)
    msg = str(w.message)
    assert "grad_norm_ =" in msg and "tol=1e-10" in msg, msg
    assert w.filename == __file__
    assert m.grad_norm_ == pytest.approx(np.linalg.norm(gradient(m, X, y2)), rel=1e-6)
    assert _reported(msg) == pytest.approx(m.grad_norm_, rel=1e-2)
    # the kept result is what its certificate says: within grad_norm_ of the optimum
    ref = LinearClassifier(loss=loss).fit(X, y2)
    dist = np.linalg.norm(full_coef(m) - full_coef(ref))
    assert dist <= m.grad_norm_ + ref.grad_norm_ + 1e-10


@pytest.mark.parametrize("loss", SMOOTH)
def test_a_one_vs_rest_dask_fit_that_reaches_max_iter_names_the_class(wine, loss):
    X, y = wine
    with warnings.catch_warnings(record=True) as rec:
        warnings.simplefilter("always")
        m = LinearClassifier(loss=loss, max_iter=1).fit(*chunked(X, y, 60))
    ws = _warned(rec)
    assert len(ws) == 3, [str(w.message) for w in ws]
    for k, w in enumerate(ws):
        msg = str(w.message)
        assert msg.startswith(f"one-vs-rest class classes_[{k}]: "), msg
        assert "grad_norm_ =" in msg and "tol=1e-10" in msg and "max_iter=1" in msg, msg
        assert w.filename == __file__
        gk = np.linalg.norm(class_gradient(m, k, X, y))
        assert m._state.result.results[k].grad_norm == pytest.approx(gk, rel=1e-6)
        assert _reported(msg) == pytest.approx(gk, rel=1e-2)
    assert np.all(np.isfinite(class_coefs(m)))


# ---------------------------------------------------------------------------------------------
# the hinge's decomposition method: its passes run out -> the NumPy hinge's ConvergenceWarning
# ---------------------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def digits():
    """Digits (1797 rows, 64 features), standardised: more rows than the hinge's working
    set holds (8p + 512), so the Dask hinge fit starts from a smoothed hinge."""
    X, y = load_digits(return_X_y=True)
    return StandardScaler().fit_transform(X), y


def _kkt_warning(w):
    msg = str(w.message)
    assert "KKT violation" in msg and "grad_norm_ =" in msg and "max(max_iter, 50)" in msg, msg
    assert w.filename == __file__
    return msg


def test_a_dask_hinge_fit_and_update_that_run_out_of_passes_warn(digits):
    """Before: ValueError "did not converge in 50 passes"; the NumPy hinge warns."""
    X, y = digits
    y = y % 2
    with warnings.catch_warnings(record=True) as rec:
        warnings.simplefilter("always")
        m = LinearClassifier(loss="hinge", max_iter=2).fit(*chunked(X, y, 600))
    (w,) = _warned(rec)
    assert _reported(_kkt_warning(w)) == pytest.approx(m.grad_norm_, rel=1e-2)
    assert m._state.result.converged is False
    # the kept result is within its certified radius of the optimum
    ref = LinearClassifier(loss="hinge").fit(X, y)
    assert np.linalg.norm(full_coef(m) - full_coef(ref)) <= m.grad_norm_ + ref.grad_norm_
    y2 = y.copy()
    y2[:15:3] = 1 - y[:15:3]
    with warnings.catch_warnings(record=True) as rec:
        warnings.simplefilter("always")
        m.relabel([0, 3, 6, 9, 12], y2[:15:3])
    (w,) = _warned(rec)
    assert _reported(_kkt_warning(w)) == pytest.approx(m.grad_norm_, rel=1e-2)
    ref = LinearClassifier(loss="hinge").fit(X, y2)
    assert np.linalg.norm(full_coef(m) - full_coef(ref)) <= m.grad_norm_ + ref.grad_norm_


def test_a_one_vs_rest_dask_hinge_fit_that_runs_out_of_passes_names_the_class(digits):
    X, y = digits
    y = y % 3
    with warnings.catch_warnings(record=True) as rec:
        warnings.simplefilter("always")
        m = LinearClassifier(loss="hinge", max_iter=2).fit(*chunked(X, y, 600))
    ws = _warned(rec)
    assert len(ws) == 3, [str(w.message) for w in ws]
    for k, w in enumerate(ws):
        msg = _kkt_warning(w)
        assert msg.startswith(f"one-vs-rest class classes_[{k}]: "), msg
        assert _reported(msg) == pytest.approx(m._state.result.results[k].grad_norm, rel=1e-2)


# ---------------------------------------------------------------------------------------------
# converged: silent, and equal to the NumPy fit
# ---------------------------------------------------------------------------------------------
@pytest.mark.parametrize("loss", SMOOTH + ["hinge"])
@pytest.mark.parametrize("data", ["cancer", "wine"])
def test_converged_dask_fits_and_updates_are_silent(request, loss, data):
    X, y, rows = _data(request, data)
    keep = np.ones(X.shape[0], dtype=bool)
    keep[[4, 9]] = False
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        m = LinearClassifier(loss=loss).fit(*chunked(X, y, rows))
        m.remove([4, 9])
        ref = LinearClassifier(loss=loss).fit(X, y)
        ref.remove([4, 9])
    if loss == "hinge":  # within both certified radii, class by class
        ra, rb = ref._state.result, m._state.result
        ga = [r.grad_norm for r in getattr(ra, "results", [ra])]
        gb = [r.grad_norm for r in getattr(rb, "results", [rb])]
        diff = np.linalg.norm(class_coefs(ref) - class_coefs(m), axis=1)
        assert np.all(diff <= np.add(ga, gb)), (diff, ga, gb)
        np.testing.assert_array_equal(ref.sample_ids_, m.sample_ids_)
    elif data == "cancer":
        assert_newton_same(ref, m, X[keep], y[keep])
    else:
        assert_classes_same(ref, m, X[keep], y[keep])
