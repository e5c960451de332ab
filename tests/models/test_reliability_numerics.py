"""Numerical reliability (issue "Reliability"): magnitudes that overflow, cancellation when a
high-leverage sample is removed from a primal squared-loss model, complex and sparse input.

Every refusal is a ValueError (sparse input: scikit-learn's TypeError, which deltafit's
refusal also is a ValueError of) and leaves the model bitwise unchanged; every accepted update
keeps the model exact (1e-8, relative, against a fresh fit) and finite.
"""

from __future__ import annotations

import warnings

import numpy as np
import pytest
import scipy.sparse as sp
from sklearn.base import clone, is_classifier

import deltafit
from deltafit import KernelClassifier, KernelRegressor, LinearClassifier, LinearRegressor

LOSSES = ["squared", "logistic", "squared_hinge", "hinge"]


def _data(n=80, d=5, seed=0):
    rng = np.random.default_rng(seed)
    X = rng.standard_normal((n, d))
    w = rng.standard_normal(d)
    return X, (X @ w > 0).astype(int), X @ w + 0.1 * rng.standard_normal(n)


def _targets(m, yc, yr):
    return yc if is_classifier(m) else yr


def _score(m, X):
    return m.decision_function(X) if hasattr(m, "decision_function") else m.predict(X)


def snapshot(m, X):
    """What a failed call must leave bitwise unchanged."""
    s = {
        "score": _score(m, X),
        "ids": m.sample_ids_,
        "n": np.array(m.n_samples_),
        "grad_norm": np.array(m.grad_norm_),
        "intercept": np.asarray(m.intercept_),
    }
    s["coef"] = m.dual_coef_ if isinstance(m, (KernelClassifier, KernelRegressor)) else m.coef_
    return s


def assert_unchanged(before, after):
    for key in before:
        assert np.array_equal(before[key], after[key]), f"{key} changed by a refused call"


def _all_models():
    out = []
    for loss in LOSSES:
        out.append(pytest.param(lambda loss=loss: LinearClassifier(loss=loss), id=f"linear-{loss}"))
        out.append(
            pytest.param(
                lambda loss=loss: KernelClassifier(loss=loss, kernel="linear"),
                id=f"kernel-linear-{loss}",
            )
        )
    out += [
        pytest.param(lambda: LinearRegressor(), id="linear-regressor"),
        pytest.param(lambda: LinearRegressor(keep_data=False), id="linear-regressor-nodata"),
        pytest.param(
            lambda: KernelRegressor(kernel="poly", degree=2, gamma="auto"),
            id="kernel-poly-regressor",
        ),
        pytest.param(lambda: KernelClassifier(kernel="rbf", gamma="auto"), id="kernel-rbf"),
    ]
    return out


# ---------------------------------------------------------------------------------------------
# 1. magnitudes that overflow
# ---------------------------------------------------------------------------------------------
@pytest.mark.parametrize("make", _all_models())
@pytest.mark.parametrize("value", [1e60, 1e150, 1e155, 1e200, 1e300])
def test_an_overflowing_row_is_refused_and_changes_nothing(make, value):
    X, yc, yr = _data()
    m = make()
    y = _targets(m, yc, yr)
    m.fit(X, y)
    before = snapshot(m, X)
    row = np.full((1, X.shape[1]), value)
    if isinstance(m, KernelClassifier) and m.kernel == "rbf":
        # a bounded kernel: the row is harmless (k(x, x) = 1 + intercept) and accepted, unless
        # its squared distances overflow (from about 1e154), which the kernel refuses
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore", RuntimeWarning)
                m.add(row, y[:1])
        except ValueError as exc:
            assert value > 1e154 and "NaN or inf" in str(exc)
            assert_unchanged(before, snapshot(m, X))
        assert np.all(np.isfinite(m.dual_coef_)) and np.isfinite(m.grad_norm_)
        return
    nodata = not m.get_params().get("keep_data", True)
    with warnings.catch_warnings():
        # the kernels overflow inside scikit-learn / numpy, which may warn before the refusal
        warnings.simplefilter("ignore", RuntimeWarning)
        with pytest.raises(ValueError, match="overflow|limit|NaN or inf"):
            m.add(row, y[:1])
        with pytest.raises(ValueError, match="overflow|limit|NaN or inf"):
            m.update(
                X_add=np.vstack([X[:2], row]),
                y_add=y[:3],
                remove_ids=[5],
                X_remove=X[5:6] if nodata else None,
                y_remove=y[5:6] if nodata else None,
            )
        with pytest.raises(ValueError, match="overflow|limit|NaN or inf"):
            clone(m).fit(np.vstack([X, row]), np.concatenate([y, y[:1]]))
    assert_unchanged(before, snapshot(m, X))
    # and the model keeps updating exactly
    ids = m.add(X[:3] + 0.5, y[:3])
    m.remove(ids, X=X[:3] + 0.5, y=y[:3]) if nodata else m.remove(ids)
    ref = clone(m).fit(X, y)
    tol = 1e-8 if m.loss == "squared" else 1e-6
    assert np.max(np.abs(_score(m, X) - _score(ref, X))) <= tol * max(
        1, np.abs(_score(ref, X)).max()
    )


@pytest.mark.parametrize("loss", LOSSES)
@pytest.mark.parametrize("kind", ["linear", "kernel"])
def test_huge_intercept_scaling_is_refused_at_fit(loss, kind):
    X, yc, _ = _data()
    m = (
        LinearClassifier(loss=loss, intercept_scaling=1e200)
        if kind == "linear"
        else KernelClassifier(loss=loss, kernel="linear", intercept_scaling=1e200)
    )
    with pytest.raises(ValueError, match="intercept_scaling"):
        m.fit(X, yc)
    # a refit with the problem fixed works
    m.set_params(intercept_scaling=1.0).fit(X, yc)
    assert np.isfinite(m.grad_norm_)


@pytest.mark.parametrize("make", [LinearRegressor, KernelRegressor])
def test_overflowing_targets_are_refused(make):
    X, _, yr = _data()
    with pytest.raises(ValueError, match="squared target"):
        make().fit(X, np.where(np.arange(yr.size) == 3, 1e200, yr))
    m = make().fit(X, yr)
    before = snapshot(m, X)
    with pytest.raises(ValueError, match="squared target"):
        m.add(X[:1], [1e200])
    with pytest.raises(ValueError, match="squared target"):
        m.relabel([2], [-1e160])
    assert_unchanged(before, snapshot(m, X))


def test_the_cap_is_weighted_by_C():
    """``max(1, C)·‖Φ(x)‖²`` is capped: what is fine with C = 1 overflows with C = 1e90."""
    X, yc, _ = _data()
    Xb, yb = np.vstack([X, np.full((1, X.shape[1]), 1e6)]), np.append(yc, 1)  # ‖Φ‖² ≈ 5e12
    LinearClassifier(C=1.0).fit(Xb, yb)
    LinearClassifier(C=1e87).fit(X, yc)
    with pytest.raises(ValueError, match="limit"):
        LinearClassifier(C=1e90).fit(Xb, yb)
    m = LinearClassifier(C=1e90).fit(X, yc)
    with pytest.raises(ValueError, match="limit"):
        m.add(Xb[-1:], [1])
    from deltafit.utils._validation import MAX_SQUARED_NORM

    assert MAX_SQUARED_NORM == 1e100


@pytest.mark.parametrize("loss", ["logistic", "squared_hinge", "hinge"])
@pytest.mark.parametrize("kind", ["linear", "kernel"])
def test_a_non_finite_re_solve_is_refused_and_rolled_back(loss, kind, monkeypatch):
    """The last line of defence: a solver that returns a non-finite solution (whatever the
    cause) is refused and the state put back as it was."""
    from deltafit._states import _hinge as _warm_hinge
    from deltafit._states import _newton_kernel, _newton_primal

    X, yc, _ = _data()
    m = (LinearClassifier if kind == "linear" else KernelClassifier)(loss=loss).fit(X, yc)
    before = snapshot(m, X)
    _warm_newton = _newton_primal if kind == "linear" else _newton_kernel
    module = _warm_hinge if loss == "hinge" else _warm_newton
    name = ("hinge_" if loss == "hinge" else "newton_") + (
        "primal" if kind == "linear" else "kernel"
    )

    def breaking(orig):
        def broken(*args, **kwargs):
            out = orig(*args, **kwargs)
            res = out[0] if isinstance(out, tuple) else out  # (result, stored Hessian, ...)
            res.coef = res.coef * np.nan
            return out

        return broken

    monkeypatch.setattr(module, name, breaking(getattr(module, name)))
    if loss != "hinge":  # updates take chord steps on the stored Hessian / kernel factor
        chord = "chord_solve" if kind == "linear" else "kernel_chord_solve"
        monkeypatch.setattr(module, chord, breaking(getattr(module, chord)))
    elif kind == "kernel":  # kernel hinge updates solve working sets on the matrix in place
        monkeypatch.setattr(module, "hinge_kernel_slots", breaking(module.hinge_kernel_slots))
    with pytest.raises(ValueError, match="overflow"):
        m.add(X[:2] + 0.1, yc[:2])
    with pytest.raises(ValueError, match="overflow"):
        clone(m).fit(X, yc)
    monkeypatch.undo()
    assert_unchanged(before, snapshot(m, X))
    m.add(X[:2] + 0.1, yc[:2])
    assert np.all(np.isfinite(_score(m, X)))


@pytest.mark.parametrize(
    "make,core",
    [
        (LinearRegressor, "_woodbury_core"),
        (lambda: LinearRegressor(keep_data=False), "_woodbury_core"),
        (lambda: KernelRegressor(gamma="auto"), "_spd_core"),
    ],
)
def test_a_non_finite_closed_form_update_is_never_committed(make, core, monkeypatch):
    """The closed forms check their own new solution (they update in place and roll back
    themselves): with a Woodbury core gone non-finite the update is refused and the model left
    unchanged (primal), or redone exactly from the kernel matrix (dual); never committed."""
    from deltafit._states import _squared_dual, _squared_primal

    _exact_squared = _squared_dual if core == "_spd_core" else _squared_primal
    X, _, yr = _data()
    m = make().fit(X, yr)
    nodata = not m.get_params().get("keep_data", True)
    before = snapshot(m, X)
    orig = getattr(_exact_squared, core)
    monkeypatch.setattr(
        _exact_squared, core, lambda G: None if orig(G) is None else orig(G) * np.nan
    )
    keep = np.arange(X.shape[0]) != 4
    try:
        m.update(
            X_add=X[:1] + 0.3,
            y_add=yr[:1],
            remove_ids=[4],
            X_remove=X[4:5] if nodata else None,
            y_remove=yr[4:5] if nodata else None,
        )
    except ValueError as exc:
        assert "overflow" in str(exc)
        assert_unchanged(before, snapshot(m, X))
        keep[:] = True
    else:
        assert isinstance(m, KernelRegressor)
    monkeypatch.undo()
    assert np.all(np.isfinite(_score(m, X)))
    Xf = np.vstack([X[keep], X[:1] + 0.3]) if not keep.all() else X
    yf = np.concatenate([yr[keep], yr[:1]]) if not keep.all() else yr
    assert _exact_vs_fresh(m, clone(m).fit(Xf, yf), X) <= 1e-8


LARGE = [
    # (model, row value, what adding and removing the row does)
    *[(LinearRegressor, v, "exact") for v in (1e3, 1e5, 1e7)],
    *[(lambda: LinearRegressor(keep_data=False), v, "exact") for v in (1e3, 1e5)],
    # without rows to recompute the statistics from, a removal that would cancel more digits
    # than the double-double statistics carry is refused
    *[(lambda: LinearRegressor(keep_data=False), v, "refused") for v in (1e7, 1e8)],
    # ΦᵀΦ + ρI numerically singular: refused, as a fresh fit refuses it
    *[
        (make, v, "singular")
        for make in (LinearRegressor, lambda: LinearRegressor(keep_data=False), LinearClassifier)
        for v in (1e10, 1e30, 1e45)
    ],
    *[(lambda: LinearClassifier(loss="hinge"), v, "exact") for v in (1e10, 1e30, 1e45)],
    # a smooth loss's Newton curvature C·ℓ''·‖Φ(x)‖² beyond 1/ε: refused by fit and update alike
    # (before: the update accepted the rows a fresh fit failed on, or stopped far from the refit)
    *[
        (lambda loss=loss: LinearClassifier(loss=loss), v, "curvature")
        for loss in ("logistic", "squared_hinge")
        for v in (1e10, 1e30, 1e45)
    ],
]


@pytest.mark.parametrize("make,value,outcome", LARGE)
def test_a_large_but_allowed_row_is_finite_and_its_removal_exact(make, value, outcome):
    """Rows under the cap are accepted and the models stay finite; removing them again gives
    the fresh fit (or, for a model without rows, is refused and changes nothing).  A row that
    makes the closed form's system numerically singular is refused, as by a fresh fit."""
    X, yc, yr = _data()
    m = make()
    y = _targets(m, yc, yr)
    m.fit(X, y)
    ref = clone(m).fit(X, y)
    row = np.full((1, X.shape[1]), value)
    if outcome in ("singular", "curvature"):
        before = snapshot(m, X)
        why = "ill-conditioned" if outcome == "singular" else "Newton curvature"
        with pytest.raises(ValueError, match=why):
            clone(m).fit(np.vstack([X, row]), np.append(y, y[0]))
        with pytest.raises(ValueError, match=why):
            m.add(row, y[:1])
        assert_unchanged(before, snapshot(m, X))
        return
    ids = m.add(row, y[:1])
    assert np.all(np.isfinite(m.coef_)) and np.isfinite(m.grad_norm_)
    nodata = not m.get_params()["keep_data"]
    if outcome == "refused":
        before = snapshot(m, X)
        with pytest.raises(ValueError, match="keep_data=False"):
            m.remove(ids, X=row, y=y[:1])
        assert_unchanged(before, snapshot(m, X))
        return
    m.remove(ids, X=row, y=y[:1]) if nodata else m.remove(ids)
    err = np.max(np.abs(_score(m, X) - _score(ref, X)))
    tol = 1e-8 if m.loss == "squared" else 1e-6
    assert err <= tol * max(1.0, np.abs(_score(ref, X)).max()), (value, err)
    assert m.grad_norm_ <= max(1e-6, 10 * ref.grad_norm_)


# ---------------------------------------------------------------------------------------------
# 3. removing a sample of high leverage (primal squared loss)
# ---------------------------------------------------------------------------------------------
def _regression(n=300, d=5, seed=0):
    rng = np.random.default_rng(seed)
    X = rng.standard_normal((n, d))
    return X, X @ rng.standard_normal(d) + 0.1 * rng.standard_normal(n), rng


def _exact_vs_fresh(m, ref, X):
    f, g = _score(m, X), _score(ref, X)
    return np.max(np.abs(f - g)) / max(1.0, np.max(np.abs(g)))


@pytest.mark.parametrize("keep_data", [True, False])
@pytest.mark.parametrize(
    "value,cycles", [(1e3, 1), (1e3, 10), (3e4, 1), (1e5, 1), (1e5, 100), (1e5, 1000)]
)
def test_removing_a_high_leverage_row_is_exact(keep_data, value, cycles):
    """Add a row of norm ``value`` (each cycle a new random direction) and remove it again:
    the model stays the fresh fit (before: 1.8e-8 at 1e3, 5e-3 at 3e4, 0.67 after 100 cycles
    at 1e5, and grad_norm_ up to 7.6e2)."""
    X, y, rng = _regression()
    m = LinearRegressor(keep_data=keep_data).fit(X, y)
    ref = LinearRegressor().fit(X, y)
    for _ in range(cycles):
        row = value * rng.standard_normal((1, X.shape[1]))
        target = rng.standard_normal(1)
        ids = m.add(row, target)
        m.remove(ids) if keep_data else m.remove(ids, X=row, y=target)
    assert _exact_vs_fresh(m, ref, X) <= 1e-8
    assert m.grad_norm_ <= 1e-8
    assert m.sample_ids_.tolist() == list(range(X.shape[0]))


@pytest.mark.parametrize(
    "make",
    [
        lambda: LinearRegressor(),
        lambda: LinearRegressor(keep_data=False),
        lambda: LinearClassifier(),
    ],
)
@pytest.mark.parametrize("k,value", [(1, 3e4), (3, 3e4), (70, 1e5)])
def test_removing_a_block_of_high_leverage_rows_is_exact(make, k, value):
    """Blocks: a Woodbury block of nearly parallel large rows (before: 0.42 off), and a batch
    above the pending rank that mixes large and ordinary rows (the refactorisation path; the
    statistics cancelled, before: 7e-6 off)."""
    X, y, rng = _regression()
    m = make()
    t = (y > 0).astype(int) if is_classifier(m) else y
    m.fit(X, t)
    ref = clone(m).fit(X, t)
    rows = np.full((k, X.shape[1]), value) * (1.0 + 0.1 * np.arange(k))[:, None]
    rows[::2] = rng.standard_normal((rows[::2].shape[0], X.shape[1]))  # ordinary ones among them
    if k == 1:
        rows[0] = value
    ids = m.add(rows, t[:k])
    m.remove(ids) if m.keep_data else m.remove(ids, X=rows, y=t[:k])
    assert _exact_vs_fresh(m, ref, X) <= 1e-8


def test_the_drift_of_an_ill_conditioned_model_is_repaired():
    """Ordinary add / remove cycles on an ill-conditioned model (C = 1e4, nearly collinear
    columns) left 1.3e-4 behind after 20 cycles (grad_norm_ 1.9)."""
    rng = np.random.default_rng(0)
    X = 10 * rng.normal(size=(200, 3))
    X[:, 2] = X[:, 1] + 1e-3 * rng.normal(size=200)
    y = X[:, 0] + rng.normal(size=200)
    m = LinearRegressor(C=1e4).fit(X, y)
    for _ in range(20):
        m.remove(m.add(10 * rng.normal(size=(1, 3)), [0.0]))
    ref = LinearRegressor(C=1e4).fit(X, y)
    assert _exact_vs_fresh(m, ref, X) <= 1e-8
    assert m.grad_norm_ <= 100 * max(ref.grad_norm_, 1e-8)


def test_without_rows_an_inexact_removal_is_refused_and_a_model_with_rows_recomputes():
    """Beyond what the double-double statistics carry (here a row 1e7 times the others), a
    model without rows refuses the removal (it changes nothing, and keeps updating exactly);
    one with rows recomputes its statistics from them."""
    X, y, rng = _regression()
    row = np.full((1, X.shape[1]), 1e7)
    nodata = LinearRegressor(keep_data=False).fit(X, y)
    ids = nodata.add(row, [1.0])
    before = snapshot(nodata, X)
    with pytest.raises(ValueError, match="keep_data=False.*refit"):
        nodata.remove(ids, X=row, y=[1.0])
    assert_unchanged(before, snapshot(nodata, X))
    # it keeps updating (the model with the large row is too ill-conditioned, cond ≈ 1e12, to
    # compare with a fresh fit at 1e-8: adding and removing other rows gives it back)
    more = rng.standard_normal((2, X.shape[1]))
    ids2 = nodata.add(more, [0.5, -0.5])
    nodata.remove(ids2, X=more, y=[0.5, -0.5])
    assert _score(nodata, X) == pytest.approx(before["score"], rel=1e-8, abs=1e-8)

    kept = LinearRegressor().fit(X, y)
    kept.remove(kept.add(row, [1.0]))
    assert kept._state.n_rebuild == 1
    assert _exact_vs_fresh(kept, LinearRegressor().fit(X, y), X) <= 1e-8


def test_the_exact_statistics_survive_save_and_load(tmp_path):
    """The double-double parts are saved: a loaded model removes a large row exactly too."""
    X, y, rng = _regression()
    m = LinearRegressor(keep_data=False).fit(X, y)
    row = 1e5 * rng.standard_normal((1, X.shape[1]))
    ids = m.add(row, [2.0])
    deltafit.save(m, tmp_path / "m")
    loaded = deltafit.load(tmp_path / "m")
    loaded.remove(ids, X=row, y=[2.0])
    assert _exact_vs_fresh(loaded, LinearRegressor().fit(X, y), X) <= 1e-8


# ---------------------------------------------------------------------------------------------
# 8. complex and sparse input
# ---------------------------------------------------------------------------------------------
MODELS8 = [
    pytest.param(LinearClassifier, id="LinearClassifier"),
    pytest.param(LinearRegressor, id="LinearRegressor"),
    pytest.param(lambda: LinearRegressor(keep_data=False), id="LinearRegressor-nodata"),
    pytest.param(KernelClassifier, id="KernelClassifier"),
    pytest.param(KernelRegressor, id="KernelRegressor"),
]


def _calls(m, X, y, bad_X=None, bad_y=None):
    """Every entry point, with the bad X or the bad y in it (the rest good)."""
    nodata = not m.get_params().get("keep_data", True)
    Xa = X[:2] if bad_X is None else bad_X
    ya = y[:2] if bad_y is None else bad_y
    calls = {
        "add": lambda: m.add(Xa, ya),
        "partial_fit": lambda: m.partial_fit(Xa, ya),
        "update": lambda: (
            m.update(X_add=Xa, y_add=ya, remove_ids=[7])
            if not nodata
            else m.update(X_add=Xa, y_add=ya, remove_ids=[7], X_remove=X[7:8], y_remove=y[7:8])
        ),
        "fit": lambda: clone(m).fit(
            np.vstack([X, X[:2]]) if bad_X is None else bad_X,
            np.concatenate([y, y[:2]]) if bad_y is None else bad_y,
        ),
    }
    if bad_X is not None:
        calls["predict"] = lambda: m.predict(bad_X)
        if hasattr(m, "decision_function"):
            calls["decision_function"] = lambda: m.decision_function(bad_X)
        if nodata:
            calls["remove_X"] = lambda: m.remove([0, 1], X=bad_X, y=y[:2])
            calls["remove_by_value"] = lambda: m.remove(X=bad_X, y=y[:2])
            calls["relabel_X"] = lambda: m.relabel([0, 1], y[2:4], X=bad_X, y_old=y[:2])
    if bad_y is not None:
        calls["relabel"] = lambda: (
            m.relabel([0, 1], bad_y)
            if not nodata
            else m.relabel([0, 1], bad_y, X=X[:2], y_old=y[:2])
        )
        if nodata:
            calls["remove_by_value_y"] = lambda: m.remove(X=X[:2], y=bad_y)
    return calls


@pytest.mark.parametrize("make", MODELS8)
@pytest.mark.parametrize("imag", [0.0, 9.0])
def test_complex_input_is_refused_everywhere(make, imag):
    """Complex X or y is refused by every entry point (even with a zero imaginary part, as
    fit refuses it); before, add / remove / relabel dropped the imaginary part."""
    X, yc, yr = _data(n=40, d=3)
    m = make()
    y = _targets(m, yc, yr)
    m.fit(X, y)
    before = snapshot(m, X)
    Xc = X[:2] + 1j * imag
    for call in _calls(m, X, y, bad_X=Xc).values():
        with pytest.raises(ValueError, match="(?i)complex"):
            call()
    yc_bad = y[:2].astype(complex) + 1j * imag
    for name, call in _calls(m, X, y, bad_y=yc_bad).items():
        if name == "fit" and is_classifier(m) and imag:
            continue  # scikit-learn may name the labels rather than their type here
        with pytest.raises(ValueError, match="(?i)complex"):
            call()
    assert_unchanged(before, snapshot(m, X))


@pytest.mark.parametrize("make", MODELS8)
def test_sparse_y_is_refused_as_fit_refuses_it(make):
    """Sparse y: every entry point raises what fit raises (scikit-learn's TypeError, same
    message), which is also a ValueError.  (Sparse X: the linear models take it, see
    tests/test_sparse.py.)"""
    X, yc, yr = _data(n=40, d=3)
    m = make()
    y = _targets(m, yc, yr)
    m.fit(X, y)
    before = snapshot(m, X)
    ys = sp.csr_matrix(y[:2, None].astype(float))
    for name, call in _calls(m, X, y, bad_y=ys).items():
        with pytest.raises(
            TypeError, match="Sparse data was passed for y, but dense data is required"
        ) as info:
            call()
        assert isinstance(info.value, ValueError), name
    assert_unchanged(before, snapshot(m, X))


def _rbf(A, B):
    from sklearn.metrics.pairwise import rbf_kernel

    return rbf_kernel(A, B, gamma=0.5)


DENSE_ONLY = [
    pytest.param(lambda: KernelClassifier(kernel=_rbf), id="KernelClassifier-callable"),
    pytest.param(lambda: KernelRegressor(kernel=_rbf), id="KernelRegressor-callable"),
]


@pytest.mark.parametrize("make", DENSE_ONLY)
def test_sparse_input_is_refused_as_fit_refuses_it(make):
    """Sparse X given to a model that takes dense X only (a callable kernel): every entry
    point raises what fit raises (scikit-learn's TypeError and message,
    with the reason), which is also a ValueError; before, add accepted a sparse X.  (The
    other models take sparse X: tests/test_sparse.py.)"""
    X, yc, yr = _data(n=40, d=3)
    m = make()
    y = _targets(m, yc, yr)
    m.fit(X, y)
    before = snapshot(m, X)
    for name, call in _calls(m, X, y, bad_X=sp.csr_matrix(X[:2])).items():
        with pytest.raises(TypeError) as info:
            call()
        text = str(info.value)
        assert text.startswith("Sparse data was passed for X, but dense data is required ("), name
        assert text.endswith("). Use '.toarray()' to convert to a dense numpy array."), name
        assert isinstance(info.value, ValueError), name
    assert_unchanged(before, snapshot(m, X))


def test_the_sensitivity_module_refuses_complex_rows_and_takes_sparse_ones():
    X, _, yr = _data(n=40, d=3)
    m = LinearRegressor().fit(X, yr)
    s = deltafit.sensitivity(m)
    with pytest.raises(ValueError, match="complex"):
        s.add(X[:2] + 1j, yr[:2])
    with pytest.raises(ValueError, match="complex"):
        s.add(X[:2], yr[:2] + 9j)
    with pytest.raises(ValueError, match="complex"):
        s.decision_bounds(X[:2] + 0j)
    # sparse rows are taken (densified): the same bounds as the dense rows
    for got, want in zip(s.decision_bounds(sp.csr_matrix(X[:2])), s.decision_bounds(X[:2])):
        assert np.array_equal(got, want)
    bad = sp.csr_matrix(X[:2])
    bad.data[0] = np.nan
    with pytest.raises(ValueError, match="NaN"):
        s.add(bad, yr[:2])
