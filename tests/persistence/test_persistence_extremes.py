"""A file that saves must load, whatever valid updates came before (issue 30, items 4, 11d, 11e).

* every configuration (linear and kernel, the four losses, two and three classes, regressors,
  multi-output, dense and sparse, keep_data True and False, a pipeline) is saved after extreme
  but valid updates — every sample reweighted to 1e-6, 1e-12 or 1e-300, all but one sample per
  class at weight 0, a huge or tiny C — and loads with the same decisions and coefficients,
  bit for bit, then keeps updating to the fresh fit of its data (the rounding residue of
  earlier, larger matrices used to fail load's symmetry tests);
* an interrupted save (SIGINT during the write and again during its clean-up) leaves no
  temporary file and the previous file unchanged;
* a pipeline whose scaler was fitted on float32 X loads its fitted attributes with their types
  and dtypes, bit for bit.
"""

from __future__ import annotations

import os
import signal
import warnings
from unittest import mock

import numpy as np
import pytest
import scipy.sparse as sp
from sklearn.datasets import load_breast_cancer, load_diabetes, load_iris
from sklearn.preprocessing import MinMaxScaler, StandardScaler

import deltafit
from deltafit import KernelClassifier, KernelRegressor, LinearClassifier, LinearRegressor

N = 80


@pytest.fixture(scope="module")
def data():
    Xb, yb = load_breast_cancer(return_X_y=True)  # raw features: norms up to ~4e3
    Xi, yi = load_iris(return_X_y=True)
    Xd, yd = load_diabetes(return_X_y=True)
    take = np.random.default_rng(0).permutation(len(yi))[:N]
    Xs = (Xb - Xb.mean(0)) / Xb.std(0)
    return {
        "binary": (Xb[:N], yb[:N]),
        "three": (Xi[take], yi[take]),
        "regression": (Xd[:N], yd[:N]),
        "binary-std": (Xs[:N], yb[:N]),
        "outputs": (Xd[:N], np.column_stack([yd[:N], 100.0 * Xd[:N, 0]])),
    }


# (id, factory(C), data, sparse, keep_data)
CASES = []
for _loss in ("squared", "logistic", "squared_hinge", "hinge"):
    for _data in ("binary", "three"):
        for _sparse in (False, True):
            CASES.append(
                (
                    f"linear-{_loss}-{_data}{'-sparse' if _sparse else ''}",
                    lambda C, loss=_loss: LinearClassifier(loss=loss, C=C),
                    _data,
                    _sparse,
                    True,
                )
            )
        CASES.append(
            (
                f"kernel-{_loss}-{_data}",
                lambda C, loss=_loss: KernelClassifier(
                    loss=loss, C=C, kernel="poly", degree=2, gamma=1e-3
                ),
                _data,
                False,
                True,
            )
        )
CASES += [
    (
        "linear-squared-binary-nodata",
        lambda C: LinearClassifier(C=C, keep_data=False),
        "binary-std",
        False,
        False,
    ),
    (
        "linear-squared-binary-sparse-nodata",
        lambda C: LinearClassifier(C=C, keep_data=False),
        "binary-std",
        True,
        False,
    ),
    ("linear-regressor", lambda C: LinearRegressor(C=C), "regression", False, True),
    ("linear-regressor-sparse", lambda C: LinearRegressor(C=C), "regression", True, True),
    (
        "linear-regressor-nodata",
        lambda C: LinearRegressor(C=C, keep_data=False),
        "regression",
        False,
        False,
    ),
    ("linear-regressor-outputs", lambda C: LinearRegressor(C=C), "outputs", False, True),
    ("kernel-regressor", lambda C: KernelRegressor(C=C, gamma=0.5), "regression", False, True),
    (
        "kernel-squared-binary-small-C",
        lambda C: KernelClassifier(C=1e-3 * C, kernel="poly"),
        "binary",
        False,
        True,
    ),
    (
        "pipeline",
        lambda C: deltafit.make_pipeline(MinMaxScaler(), LinearClassifier(loss="logistic", C=C)),
        "binary",
        False,
        True,
    ),
]
EXTREMES = ["w=1e-6", "w=1e-12", "w=1e-300", "w=0-but-one-per-class", "C=1e8", "C=1e-8"]


def _model(pipe_or_model):
    return pipe_or_model.steps[-1][1] if hasattr(pipe_or_model, "steps") else pipe_or_model


def _outputs(m, X):
    out = [np.asarray(m.predict(X))]
    if hasattr(m, "decision_function"):
        out.append(np.asarray(m.decision_function(X)))
    est = _model(m)
    out.append(np.asarray(est.dual_coef_ if est._kernel else est.coef_))
    out.append(np.asarray(est.intercept_))
    return out


def _weights(y, extreme):
    if extreme == "w=0-but-one-per-class":
        w = np.zeros(len(y))
        if y.ndim == 1 and np.all(y == np.round(y)) and np.unique(y).size <= 3:
            for c in np.unique(y):
                w[np.flatnonzero(y == c)[0]] = 1.0
        else:
            w[:3] = 1.0
        return w
    return np.full(len(y), float(extreme[2:]))


def _reweighted(m, ids, w, X, y, keep):
    kw = {} if keep else {"X": X, "y": y}
    if hasattr(m, "steps"):
        m.reweight(ids, w, **kw)
    else:
        m.reweight(ids, w, **kw)


@pytest.mark.parametrize("extreme", EXTREMES)
@pytest.mark.parametrize("case", CASES, ids=[c[0] for c in CASES])
def test_a_model_saved_after_extreme_updates_loads_and_keeps_updating(
    case, extreme, data, tmp_path
):
    name, make, which, sparse, keep = case
    X, y = data[which]
    if sparse:
        X = sp.csr_matrix(X)
    C = float(extreme[2:]) if extreme.startswith("C=") else 1.0
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        try:
            m = make(C).fit(X, y)
        except ValueError as e:  # C = 1e8 on raw poly-kernel values: beyond double precision
            assert extreme == "C=1e8" and "Newton curvature" in str(e), e
            return  # refused by the fit: no file to write
        ids = np.asarray(_model(m).sample_ids_)
        if extreme.startswith("w="):
            _reweighted(m, ids, _weights(y, extreme), X, y, keep)
        deltafit.save(m, tmp_path / "m.npz")
        loaded = deltafit.load(tmp_path / "m.npz")
        for a, b in zip(_outputs(loaded, X), _outputs(m, X)):
            np.testing.assert_array_equal(a, b)
        # both go on updating: back to weight 1 (or, after a C extreme, three removals) ...
        if extreme.startswith("w="):
            for model in (m, loaded):
                _reweighted(model, ids, np.ones(len(ids)), X, y, keep)
            keep_rows = np.arange(len(ids))
        else:
            for model in (m, loaded):
                if keep:
                    model.remove(ids[:3])
                else:
                    model.remove(ids[:3], X=X[:3], y=y[:3])
            keep_rows = np.arange(3, len(ids))
        # a kernel model keeps the gamma its fit resolved ("scale"): the fresh fit takes it
        fitted = {"gamma": _model(m).gamma_} if hasattr(_model(m), "gamma_") else {}
        if hasattr(m, "steps"):  # the pipeline's transformers stay frozen: the final step's
            Z = m.steps[0][1].transform(X)  # fresh fit on their output
            fresh = _model(make(C)).set_params(**fitted).fit(Z[keep_rows], y[keep_rows])
            X_fresh = Z
        else:
            fresh = make(C).set_params(**fitted).fit(X[keep_rows], y[keep_rows])
            X_fresh = X
    # ... to the same model as the original, and to the fresh fit of the data
    for a, b in zip(_outputs(loaded, X), _outputs(m, X)):
        np.testing.assert_allclose(a, b, rtol=1e-12, atol=1e-12 * (np.max(np.abs(b)) + 1e-300))
    if extreme == "C=1e8":
        return  # ill-conditioned (separable data, ρ = 5e-9): fits within tol differ by ~10%
    got, want = _outputs(loaded, X), _outputs(fresh, X_fresh)
    if hasattr(fresh, "decision_function"):
        scale = np.max(np.abs(want[1])) + 1e-300
        np.testing.assert_allclose(got[1], want[1], rtol=0, atol=1e-6 * scale)
    else:
        scale = np.max(np.abs(want[0])) + 1e-300
        np.testing.assert_allclose(got[0], want[0], rtol=0, atol=1e-6 * scale)


# ---------------------------------------------------------------------------------- 11(d)
def test_an_interrupted_save_leaves_no_temporary_file(data, tmp_path):
    """Ctrl-C during the write, and again during the clean-up: the interrupt is raised, the
    old file is as it was and nothing else is left in the folder."""
    X, y = data["binary-std"]
    old = LinearClassifier().fit(X, y)
    new = LinearClassifier(C=5.0).fit(X, y)
    path = tmp_path / "m.npz"
    deltafit.save(old, path)
    before = path.read_bytes()
    real_fsync, real_unlink, real_replace = os.fsync, os.unlink, os.replace

    def interrupted(real):
        def call(*args):
            os.kill(os.getpid(), signal.SIGINT)
            return real(*args)

        return call

    for patches in (("os.fsync",), ("os.fsync", "os.unlink"), ("os.replace", "os.unlink")):
        reals = {"os.fsync": real_fsync, "os.unlink": real_unlink, "os.replace": real_replace}
        with pytest.raises(KeyboardInterrupt):
            with mock.patch.multiple(
                os, **{name[3:]: interrupted(reals[name]) for name in patches}
            ):
                deltafit.save(new, path)
        assert sorted(os.listdir(tmp_path)) == ["m.npz"], patches
        if "os.replace" not in patches:
            assert path.read_bytes() == before
    assert signal.getsignal(signal.SIGINT) is signal.default_int_handler
    # a KeyboardInterrupt raised by the write itself
    with mock.patch.object(os, "fsync", side_effect=KeyboardInterrupt):
        with pytest.raises(KeyboardInterrupt):
            deltafit.save(new, tmp_path / "n.npz")
    assert sorted(os.listdir(tmp_path)) == ["m.npz"]


# ---------------------------------------------------------------------------------- 11(e)
@pytest.mark.parametrize("sparse", [False, True])
@pytest.mark.parametrize("as_float32", [False, True])
def test_a_float32_scaler_loads_bit_for_bit(sparse, as_float32, data, tmp_path):
    X, y = data["binary"]
    X = X.astype(np.float32)
    if sparse:
        X = sp.csr_matrix(X)
    pipe = deltafit.make_pipeline(StandardScaler(with_mean=not sparse), LinearClassifier())
    pipe.fit(X, y)
    scaler = pipe.steps[0][1]
    if as_float32:  # a scaler whose statistics are float32 (older scikit-learn, partial_fit)
        for attr in ("mean_", "scale_", "var_", "n_samples_seen_"):
            val = getattr(scaler, attr)
            if val is not None:
                setattr(scaler, attr, np.asarray(val).astype(np.float32)[()])
    deltafit.save(pipe, tmp_path / "p.npz")
    loaded = deltafit.load(tmp_path / "p.npz")
    got = loaded.steps[0][1]
    for attr, val in vars(scaler).items():
        if not attr.endswith("_") or attr.startswith("_"):
            continue
        out = getattr(got, attr)
        assert type(out) is type(val), attr
        if isinstance(val, (np.ndarray, np.generic)):
            assert out.dtype == val.dtype, attr
        np.testing.assert_array_equal(out, val)
    np.testing.assert_array_equal(loaded.decision_function(X), pipe.decision_function(X))


@pytest.mark.parametrize(
    "scaler",
    [StandardScaler(with_std=False), StandardScaler(with_mean=False, with_std=False)],
    ids=["no-std", "identity"],
)
def test_a_scaler_with_unset_statistics_round_trips(scaler, data, tmp_path):
    """``var_`` / ``mean_`` are None without ``with_std`` / ``with_mean``: stored as null (the
    save used to refuse the pipeline)."""
    X, y = data["binary"]
    pipe = deltafit.make_pipeline(scaler, LinearClassifier()).fit(X, y)
    deltafit.save(pipe, tmp_path / "p.npz")
    loaded = deltafit.load(tmp_path / "p.npz")
    for attr, val in vars(pipe.steps[0][1]).items():
        if attr.endswith("_"):
            np.testing.assert_array_equal(getattr(loaded.steps[0][1], attr), val)
    np.testing.assert_array_equal(loaded.decision_function(X), pipe.decision_function(X))


def test_a_tracked_inverse_is_symmetric_to_the_scale_of_its_history(data, tmp_path):
    """Every inverse the primal state tracked had norm ≤ 1/ρ: a file (written before save
    symmetrised the inverse) whose asymmetry is rounding at that scale loads, damage beyond it
    is refused."""
    from test_reliability_files import _members, _write

    X, y = data["binary-std"]  # ‖H‖ ≈ 1/λ_min(ΦᵀΦ) ≪ 1/ρ = 2C = 2e4
    m = LinearClassifier(C=1e4).fit(X, y)
    deltafit.save(m, tmp_path / "m.npz")
    meta, arrays = _members(tmp_path / "m.npz")
    H = arrays["state_H"]
    rho = 0.5e-4
    assert np.max(np.abs(H)) < 1e-2 / rho
    A = np.zeros_like(H)
    A[0, 1], A[1, 0] = 1.0, -1.0
    for size, ok in ((1e-12 / rho, True), (1e-6 / rho, False)):
        bad = dict(arrays, state_H=H + size * A)
        path = _write(tmp_path / f"h{size:g}.npz", meta, bad)
        if ok:
            np.testing.assert_array_equal(
                deltafit.load(path).decision_function(X), m.decision_function(X)
            )
        else:
            with pytest.raises(ValueError, match="tracked inverse is not symmetric"):
                deltafit.load(path)
