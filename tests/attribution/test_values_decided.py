"""data_values' early stop: each sample's left-out problems (every class at once) stop as soon
as their certified intervals decide every validation label; the values still equal brute-force
refits, and the label certificate equals the plain argmax test."""

import numpy as np
import pytest

import deltafit
import deltafit.attribution._effects as effects_module
import deltafit.attribution._values as values_module
from deltafit.attribution import data_values


def _brute(make, Xtr, ytr, Xv, yv):
    full = make().fit(Xtr, ytr).score(Xv, yv)
    return np.array(
        [
            full - make().fit(np.delete(Xtr, i, 0), np.delete(ytr, i)).score(Xv, yv)
            for i in range(len(Xtr))
        ]
    )


def _digits(k):
    from sklearn.datasets import load_digits

    X, y = load_digits(n_class=k, return_X_y=True)
    return X / 16.0, y


@pytest.mark.parametrize("loss", ["logistic", "squared_hinge"])
@pytest.mark.parametrize("case", ["binary", "multiclass"])
def test_problems_stopped_when_labels_decided_equal_brute_force(case, loss, cancer, monkeypatch):
    """With the loose tolerance made as tight as the model's, only the certificate can stop a
    left-out problem early: some do stop far above it, and every value equals a refit's."""
    if case == "binary":
        X, y = cancer
        Xtr, ytr, Xv, yv = X[:70], y[:70], X[300:420], y[300:420]
        C = 1.0
    else:
        X, y = _digits(4)
        Xtr, ytr, Xv, yv = X[:70], y[:70], X[400:600], y[400:600]
        C = 0.5

    def make():
        return deltafit.LinearClassifier(loss=loss, C=C)

    m = make().fit(Xtr, ytr)
    stopped = []
    real = effects_module._Resolve.step

    def step(self):
        closed = self.closed & (self.norms > 1e-6)
        stopped.extend(self.norms[closed].tolist())
        return real(self)

    refreshed = []
    real_refresh = effects_module._Resolve._refresh

    def refresh(self, cols):
        refreshed.append(cols.size)
        return real_refresh(self, cols)

    monkeypatch.setattr(values_module, "_LOOSE", 1e-10)
    monkeypatch.setattr(effects_module._Resolve, "step", step)
    monkeypatch.setattr(effects_module._Resolve, "_refresh", refresh)
    v = data_values(m, Xv, yv, chunk_size=32)
    if loss == "logistic":  # (a squared-hinge Newton step often lands on the optimum)
        assert stopped  # some left-out problems were left far from their optimum
    # the first logistic step's bounded gradients were computed for the samples it left open
    assert (sum(refreshed) > 0) == (loss == "logistic")
    bf = _brute(make, Xtr, ytr, Xv, yv)
    np.testing.assert_array_equal(np.round(v.values * len(yv)), np.round(bf * len(yv)))
    assert np.any(bf != 0)


def _reference(Z, R, mnorm):
    """The label certificate as plain argmax arithmetic."""
    half = R[:, None, :] * mnorm[None, :, None] * (1 + 1e-9)
    top = np.argmax(Z, axis=2)
    lo_top = np.take_along_axis(Z - half, top[..., None], axis=2)[..., 0]
    hi = Z + half
    np.put_along_axis(hi, top[..., None], -np.inf, axis=2)
    return (lo_top > hi.max(axis=2)).all(axis=1)


@pytest.mark.parametrize("seed", range(6))
def test_label_certificate_equals_the_argmax_test(seed):
    rng = np.random.default_rng(seed)
    B, m, K = 200, 7, 4
    Z = rng.normal(size=(B, m, K)).round(1)  # ties between classes included
    R = rng.choice([0.0, 1e-3, 1e-2, 0.1, 0.5], size=(B, K))
    R[rng.random(B) < 0.3] = 0.0
    mnorm = rng.uniform(0.5, 2.0, size=m)
    got = values_module._labels_certain(Z, R, mnorm)
    np.testing.assert_array_equal(got, _reference(Z, R, mnorm))
    assert got.any() and not got.all()


@pytest.mark.parametrize("C", [0.1, 1.0, 10.0])
def test_first_step_bound_holds(C):
    """After the first Newton step, the bound that replaces each left-out gradient norm is at
    least the true norm (computed afterwards)."""
    from deltafit.attribution._common import Fitted

    X, y = _digits(3)
    m = deltafit.LinearClassifier(loss="logistic", C=C).fit(X[:90], y[:90])
    fitted = Fitted(m, "test")
    fitted.cache = {}
    for view in fitted.views:
        rs = effects_module._Resolve(effects_module._View(fitted, view), np.arange(90), 1e-10)
        assert rs.first_step()
        bound = rs.norms.copy()
        rs._refresh(np.arange(90))
        assert np.all(rs.norms <= bound)
        assert np.all(rs.norms > 0)
