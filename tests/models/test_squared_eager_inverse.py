"""The squared primal state's explicit inverse, formed by the fit when it is cheap (issue 32).

A fit of at least ``_EAGER_INVERSE_ROWS`` rows per feature forms the inverse ``(ΦᵀΦ + ρI)⁻¹``
that the one-sample Woodbury updates need (instead of the first update, which then cost O(p³)
instead of O(p²)); a smaller fit leaves it to the first update, as before.  Either way it is
the same matrix, bitwise, and every update equals a fresh fit on the data it leaves.
"""

from __future__ import annotations

import numpy as np
import pytest
from scipy import linalg
from sklearn.preprocessing import StandardScaler

import deltafit
from deltafit._linalg._spd import _inverse_from_cholesky, _mirror_lower
from deltafit._states._squared_primal import _EAGER_INVERSE_ROWS

SQ_TOL = 1e-8  # relative, of the decision scale (README, "Guarantees": Exact)


def rel_err(a, b):
    return float(np.max(np.abs(a - b)) / max(1.0, float(np.max(np.abs(b)))))


@pytest.mark.parametrize("n", [101, 257, 600])
def test_mirror_lower_copies_the_lower_triangle_exactly(n):
    A = np.random.default_rng(n).standard_normal((n, n))
    ref = np.asfortranarray(A)
    iu = np.triu_indices_from(ref, 1)
    ref[iu] = ref.T[iu]
    for H in (np.asfortranarray(A), np.ascontiguousarray(A)):
        _mirror_lower(H, step=64)
        assert np.array_equal(H, ref)


def test_fit_forms_the_inverse_when_cheap_and_the_same_one(digits):
    X, y = digits
    p = X.shape[1] + 1  # the intercept's column
    n_small = _EAGER_INVERSE_ROWS * p - 1
    big = deltafit.LinearClassifier(C=0.1).fit(X, y)
    small = deltafit.LinearClassifier(C=0.1).fit(X[:n_small], y[:n_small])
    st = big._state
    assert X.shape[0] >= _EAGER_INVERSE_ROWS * p and st._inv_ready
    lazy = _inverse_from_cholesky(st._chol, "M")
    assert np.array_equal(st.inv.H0, lazy)  # the very matrix the first update used to form
    sm = small._state
    assert not sm._inv_ready  # n < 4p: the fit would pay more for it than for its Gram matrix
    small.remove([0])
    assert sm._inv_ready


def test_first_updates_of_a_mnist_pipeline_equal_fresh_fits(mnist_sample):
    from deltafit.datasets import load_mnist_sample

    X, y = load_mnist_sample(even_odd=False)  # 10 classes: one state, 10 right-hand sides
    X, y = X[:3600], y[:3600]
    pipe = deltafit.make_pipeline(StandardScaler(), deltafit.LinearClassifier()).fit(X, y)
    assert pipe[-1]._state.inner._inv_ready  # 3,600 rows, 785 features: formed by the fit
    Xs = pipe.named_steps["standardscaler"].transform(X)
    left = np.ones(len(y), dtype=bool)
    for i in (17, 2024, 3333):
        pipe.remove([i])
        left[i] = False
        fresh = deltafit.LinearClassifier().fit(Xs[left], y[left])
        assert rel_err(pipe.decision_function(X), fresh.decision_function(Xs)) < SQ_TOL
    ids = pipe.add(X[:2], y[:2])
    Xf, yf = np.vstack([Xs[left], Xs[:2]]), np.concatenate([y[left], y[:2]])
    fresh = deltafit.LinearClassifier().fit(Xf, yf)
    assert len(ids) == 2
    assert rel_err(pipe.decision_function(X), fresh.decision_function(Xs)) < SQ_TOL
    np.testing.assert_array_equal(pipe.predict(X), fresh.predict(Xs))


def test_eager_inverse_is_potri_of_the_factor():
    """The inverse the fit forms is LAPACK potri of the held factor, symmetric bitwise."""
    rng = np.random.default_rng(0)
    X = rng.standard_normal((400, 20))
    st = deltafit.LinearRegressor(C=3.0).fit(X, X @ rng.standard_normal(20))._state
    H = st.inv.H0
    assert np.array_equal(H, H.T)
    M = st.stats.full()
    np.testing.assert_allclose(H @ M, np.eye(M.shape[0]), atol=1e-10)
    assert np.array_equal(np.tril(H), np.tril(linalg.lapack.dpotri(st._chol[0], lower=1)[0]))
