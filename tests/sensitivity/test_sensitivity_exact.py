"""Exact what-ifs of the squared loss (``deltafit.sensitivity(model, method="exact")``, the
default for ``loss="squared"``) against independent refits.

The twins are scikit-learn's ``Ridge`` / ``RidgeClassifier`` (linear; ``alpha = 1/(2C)``,
``fit_intercept=False`` on ``[X, s]``) and ``KernelRidge`` on a kernel matrix computed by
scikit-learn (``tests/reference.py``), fitted on the changed data with its weights, and
``clone(model).fit`` for ``keep_data=False`` models.  Tolerances: the what-if's center equals
the twin to ``1e-8`` relative (``REL``) and the twin lies inside ``[lo, hi]`` with no slack
at all — the reported interval is ``center ± tol`` with ``tol`` a certified bound on the
floating-point error.  Real data: breast cancer (70/30 split, standardised) and digits
(10 classes).
"""

from __future__ import annotations

import pickle

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from sklearn.base import clone
from sklearn.datasets import load_breast_cancer, load_digits
from sklearn.kernel_ridge import KernelRidge
from sklearn.linear_model import Ridge
from sklearn.preprocessing import StandardScaler

import deltafit as df
from hypothesis_profiles import examples
from reference import augment, reference_kernel

REL = 1e-8
SETTINGS = dict(
    deadline=None,
    derandomize=True,
    database=None,
    max_examples=examples(60),
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)


# ------------------------------------------------------------------------------ helpers
@pytest.fixture(scope="module")
def cancer():
    """Breast cancer, standardised on the training part of a seeded 70/30 split."""
    X, y = load_breast_cancer(return_X_y=True)
    perm = np.random.default_rng(0).permutation(y.size)
    tr, te = perm[: int(0.7 * y.size)], perm[int(0.7 * y.size) :]
    sc = StandardScaler().fit(X[tr])
    return sc.transform(X[tr]), y[tr], sc.transform(X[te]), y[te]


@pytest.fixture(scope="module")
def digits10():
    X, y = load_digits(return_X_y=True)
    X = StandardScaler().fit_transform(X)
    return X[:600], y[:600], X[1500:1600]


def targets(model, y):
    """Encoded targets as the model solves for them (±1 per class, or the values)."""
    if not hasattr(model, "classes_"):
        return np.asarray(y, dtype=float)
    cls = model.classes_
    if cls.size == 2:
        return np.where(np.asarray(y) == cls[1], 1.0, -1.0)
    return np.where(np.asarray(y)[:, None] == cls[None, :], 1.0, -1.0)


def twin(model, X, y, w, C, X_test):
    """Decision values at ``X_test`` of scikit-learn's solution of the model's problem on
    ``(X, y, w)`` with ``C``."""
    t = targets(model, y)
    s = model.intercept_scaling if model.fit_intercept else 0.0
    if hasattr(model, "kernel"):
        k = reference_kernel(model.kernel, model.gamma_, model.degree, model.coef0, s)
        kr = KernelRidge(alpha=1.0 / (2.0 * C), kernel="precomputed")
        kr.fit(k(X, X), t, sample_weight=w)
        return kr.predict(k(X_test, X))
    r = Ridge(alpha=1.0 / (2.0 * C), fit_intercept=False, solver="cholesky")
    r.fit(augment(X, s), t, sample_weight=w)
    return augment(X_test, s) @ r.coef_.T


def assert_exact(lo, hi, f, what=""):
    """The center equals the twin ``f`` to REL relative, and ``f`` lies inside [lo, hi]."""
    center = 0.5 * (lo + hi)
    scale = np.max(np.abs(f))
    err = np.max(np.abs(center - f)) / scale
    assert err <= REL, f"{what}: relative error {err:.2e}"
    bad = (f < lo) | (f > hi)
    assert not bad.any(), (
        f"{what}: the refit leaves the interval at {np.flatnonzero(bad)[:5]}"
        f" (half-width {np.max(hi - lo) / 2:.2e}, "
        f"error {np.max(np.abs(center - f)):.2e})"
    )
    # rounding level: the interval is far narrower than the decision values
    assert np.max(hi - lo) <= 1e-5 * scale


LINEAR_AND_KERNEL = [df.LinearClassifier(C=1.0), df.KernelClassifier(C=1.0)]


# -------------------------------------------------------- the table: breast cancer
@pytest.mark.parametrize("est", LINEAR_AND_KERNEL, ids=["linear", "kernel"])
@pytest.mark.parametrize("k", [1, 10, 40])
def test_removals_on_breast_cancer_are_exact_and_decide_every_label(cancer, est, k):
    X, y, Xt, _ = cancer
    m = clone(est).fit(X, y)
    rem = np.random.default_rng(k).choice(y.size, k, replace=False)
    s = df.sensitivity(m)
    assert s.method == "exact"
    s.remove(rem)
    keep = np.setdiff1d(np.arange(y.size), rem)
    f = twin(m, X[keep], y[keep], None, 1.0, Xt)
    lo, hi = s.decision_bounds(Xt)
    assert_exact(lo, hi, f, f"remove {k}")
    labels, certain = s.predict_certain(Xt)
    assert certain.all()  # 100% of the labels decided
    np.testing.assert_array_equal(labels, m.classes_[(f > 0).astype(int)])
    # the ball decides fewer (for the linear model: almost none)
    _, ball = df.sensitivity(m, method="sphere").remove(rem).predict_certain(Xt)
    assert ball.mean() <= 1.0 if k == 1 else ball.mean() < 1.0
    if not hasattr(m, "kernel"):
        assert ball.mean() < 0.1


# ------------------------------------------------- every kind of change, weights, C_new
def _mixed_change(s, m, X, y, w, Xa, ya, wa):
    """Apply to what-if ``s`` a mix of additions (weighted), removals (of model samples and of
    an addition), relabels (model sample and addition) and reweights; return the changed
    data set (X, y, w)."""
    cls = getattr(m, "classes_", None)
    flip = (lambda v: cls[1] if v == cls[0] else cls[0]) if cls is not None else (lambda v: v + 1.5)
    ids = s.add(Xa, ya, sample_weight=wa)
    s.remove([3, 8, 21])
    s.remove(ids[:1])
    s.relabel([5, int(ids[1])], [flip(y[5]), flip(ya[1])])
    s.reweight([7, 11, int(ids[2])], [0.0, 2.5, 0.25])
    XX, yy, ww = np.vstack([X, Xa]), np.concatenate([y, ya]), np.concatenate([w, wa])
    yy = yy.astype(object) if cls is not None else yy.astype(float)
    yy[5], yy[y.size + 1] = flip(y[5]), flip(ya[1])
    ww[7], ww[11], ww[y.size + 2] = 0.0, 2.5, 0.25
    keep = np.setdiff1d(np.arange(yy.size), [3, 8, 21, y.size])
    yy = yy[keep].astype(y.dtype)
    return XX[keep], yy, ww[keep]


@pytest.mark.parametrize("kind", ["linear", "kernel"])
@pytest.mark.parametrize("task", ["classifier", "regressor"])
@pytest.mark.parametrize("fit_intercept", [True, False])
@pytest.mark.parametrize("C_new", [None, 3.0, "mean"])
def test_mixed_changes_with_weights_and_C_new_equal_the_refit(
    cancer, kind, task, fit_intercept, C_new
):
    X, y, Xt, _ = cancer
    X, Xa = X[:200], X[200:212]
    rng = np.random.default_rng(1)
    if task == "classifier":
        est = (df.LinearClassifier if kind == "linear" else df.KernelClassifier)(
            C=0.7, fit_intercept=fit_intercept
        )
        ya, y = y[200:212], y[:200]
    else:
        est = (df.LinearRegressor if kind == "linear" else df.KernelRegressor)(
            C=0.7, fit_intercept=fit_intercept
        )
        y = X @ rng.normal(size=X.shape[1]) + rng.normal(size=X.shape[0])
        ya = Xa @ rng.normal(size=X.shape[1])
    w = rng.uniform(0.5, 2.0, size=y.size)
    wa = rng.uniform(0.5, 2.0, size=ya.size)
    m = est.fit(X, y, sample_weight=w)
    s = df.sensitivity(m, C_new=C_new)
    X2, y2, w2 = _mixed_change(s, m, X, y, w, Xa, ya, wa)
    C2 = {None: 0.7, 3.0: 3.0, "mean": 0.7 * y.size / y2.size}[C_new]
    assert s.C_new_ == pytest.approx(C2)
    f = twin(m, X2, y2, w2, C2, Xt)
    lo, hi = s.decision_bounds(Xt)
    assert_exact(lo, hi, f, f"{kind} {task}")
    np.testing.assert_allclose(s.tightness(Xt), hi - lo, rtol=1e-12, atol=0)
    if kind == "linear":  # coefficients, intercept, distance and q-norm bounds
        r = clone(m).set_params(C=C2).fit(X2, y2, sample_weight=w2)
        clo, chi = s.coef_bounds()
        assert np.all((clo <= r.coef_ + 1e-12) & (r.coef_ - 1e-12 <= chi))
        np.testing.assert_allclose(
            0.5 * (clo + chi), r.coef_, rtol=REL, atol=REL * np.abs(r.coef_).max()
        )
        ilo, ihi = s.intercept_bounds()
        assert np.all(ilo - 1e-12 <= r.intercept_) and np.all(r.intercept_ <= ihi + 1e-12)
        b_old = np.append(np.ravel(m.coef_), np.ravel(m.intercept_) / m.intercept_scaling)
        b_new = np.append(np.ravel(r.coef_), np.ravel(r.intercept_) / m.intercept_scaling)
        d = np.linalg.norm(b_new - b_old)
        assert d <= s.distance_bound() <= d * (1 + 1e-6) + 1e-9
        for q in (1, 2, np.inf):
            dq = np.linalg.norm(np.ravel(r.coef_ - m.coef_), ord=q)
            assert dq <= s.norm_change_bound(q) * (1 + 1e-9) + 1e-12
    else:
        assert s.distance_bound() > 0


def test_hypothetical_additions_removed_again_are_no_change(cancer):
    X, y, Xt, _ = cancer
    m = df.KernelClassifier(C=2.0).fit(X[:150], y[:150])
    s = df.sensitivity(m)
    ids = s.add(X[150:160], y[150:160])
    s.remove(ids)
    lo, hi = s.decision_bounds(Xt)
    assert_exact(lo, hi, m.decision_function(Xt), "add then remove")


@pytest.mark.parametrize("est", LINEAR_AND_KERNEL, ids=["linear", "kernel"])
def test_samples_of_weight_zero_brought_back(cancer, est):
    """Model samples of weight 0 are outside the stored system (kernel: not in the tracked
    inverse); a what-if that gives them a weight borders the system with them."""
    X, y, Xt, _ = cancer
    X, y = X[:150], y[:150]
    w = np.ones(150)
    w[[3, 4, 5]] = 0.0
    m = clone(est).fit(X, y, sample_weight=w)
    s = df.sensitivity(m).reweight([3, 4], [1.5, 0.7]).remove([10]).relabel([5], [1 - y[5]])
    w2, y2 = w.copy(), y.copy()
    w2[3], w2[4], y2[5] = 1.5, 0.7, 1 - y[5]
    keep = np.setdiff1d(np.arange(150), [10])
    assert_exact(
        *s.decision_bounds(Xt),
        twin(m, X[keep], y2[keep], w2[keep], 1.0, Xt),
        "weight 0 -> positive",
    )


# ----------------------------------------------------------------------- keep_data=False
@pytest.mark.parametrize("task", ["classifier", "regressor"])
def test_keep_data_false_models_are_exact(cancer, task):
    X, y, Xt, _ = cancer
    X, Xa = X[:250], X[250:260]
    if task == "regressor":
        y = X[:, 0] - 2 * X[:, 3] + 0.1 * np.arange(250) / 250
        ya = Xa[:, 1]
        m = df.LinearRegressor(C=0.5, keep_data=False).fit(X, y)
    else:
        y, ya = y[:250], y[250:260]
        m = df.LinearClassifier(C=0.5, keep_data=False).fit(X, y)
    s = df.sensitivity(m)
    s.remove(X=X[[4, 9, 30]], y=y[[4, 9, 30]])
    new_t = y[12] + 1.0 if task == "regressor" else 1 - y[12]
    s.relabel([12], [new_t], X=X[[12]], y_old=y[[12]])
    s.add(Xa, ya)
    keep = np.setdiff1d(np.arange(250), [4, 9, 30])
    y2 = y.copy().astype(float if task == "regressor" else y.dtype)
    y2[12] = new_t
    X2, y2 = np.vstack([X[keep], Xa]), np.concatenate([y2[keep], ya])
    ref = df.LinearRegressor(C=0.5) if task == "regressor" else df.LinearClassifier(C=0.5)
    r = ref.fit(X2, y2)
    f = r.predict(Xt) if task == "regressor" else r.decision_function(Xt)
    assert_exact(*s.decision_bounds(Xt), f, "keep_data=False")


# ----------------------------------------------------------------- multiclass: digits
@pytest.mark.parametrize("kind", ["linear", "kernel"])
def test_multiclass_digits_share_one_factorisation(digits10, kind):
    X, y, Xt = digits10
    est = df.LinearClassifier(C=0.05) if kind == "linear" else df.KernelClassifier(C=0.5)
    m = est.fit(X[:500], y[:500])
    s = df.sensitivity(m)
    assert s.method == "exact"
    s.remove(np.arange(0, 40, 2))
    s.add(X[500:530], y[500:530])
    s.relabel([101, 202], [(y[101] + 1) % 10, (y[202] + 3) % 10])
    lo, hi = s.decision_bounds(Xt)
    assert lo.shape == (Xt.shape[0], 10)
    y2 = y[:500].copy()
    y2[101], y2[202] = (y[101] + 1) % 10, (y[202] + 3) % 10
    keep = np.setdiff1d(np.arange(500), np.arange(0, 40, 2))
    X2, y2 = np.vstack([X[keep], X[500:530]]), np.concatenate([y2[keep], y[500:530]])
    f = twin(m, X2, y2, None, m.C, Xt)
    assert_exact(lo, hi, f, "digits")
    labels, certain = s.predict_certain(Xt)
    assert certain.mean() >= 0.99
    np.testing.assert_array_equal(labels[certain], m.classes_[np.argmax(f, axis=1)][certain])
    # one factorisation for the ten classes
    factors = {id(s.for_class(k)._reg._factor) for k in range(10)}
    assert len(factors) == 1


# ---------------------------------------------------------------- undo, reset, untouched
@pytest.mark.parametrize("est", LINEAR_AND_KERNEL, ids=["linear", "kernel"])
def test_undo_and_reset_rebuild_the_region(cancer, est):
    X, y, Xt, _ = cancer
    m = clone(est).fit(X[:200], y[:200])
    s = df.sensitivity(m)
    s.remove([1, 2, 3])
    s.decision_bounds(Xt)  # a region for the first change
    s.relabel([10], [1 - y[10]])
    s.undo()  # back to the removal only
    keep = np.setdiff1d(np.arange(200), [1, 2, 3])
    assert_exact(*s.decision_bounds(Xt), twin(m, X[keep], y[keep], None, 1.0, Xt), "undo")
    s.reset()
    lo, hi = s.decision_bounds(Xt)
    assert_exact(lo, hi, m.decision_function(Xt), "reset")
    assert s.distance_bound() <= 1e-6


@pytest.mark.parametrize(
    "est",
    [
        df.LinearClassifier(C=1.0),
        df.KernelClassifier(C=1.0),
        df.LinearRegressor(C=1.0, keep_data=False),
    ],
    ids=["linear", "kernel", "keep_data=False"],
)
def test_the_model_is_untouched(cancer, est):
    """Every array of the model, its exact state included, byte-identical before and after a
    what-if (fresh fits, whose primal state holds only a Cholesky factor, and models with
    pending Woodbury corrections)."""
    X, y, Xt, _ = cancer
    for updated in (False, True):
        m = clone(est).fit(X[:200], y[:200])
        if updated:
            if m.problem_.keeps_rows:
                m.remove([0, 1])
            else:
                m.remove(X=X[[0, 1]], y=y[[0, 1]])
            m.add(X[200:203], y[200:203])
        m.problem_.certified_residual  # cached on first read, by any certificate
        before = pickle.dumps(m)
        s = df.sensitivity(m)
        if m.problem_.keeps_rows:
            s.remove([5, 6, 7])
        else:
            s.remove(X=X[[5, 6, 7]], y=y[[5, 6, 7]])
        s.add(X[210:215], y[210:215])
        s.decision_bounds(Xt)
        s.distance_bound()
        assert pickle.dumps(m) == before


# ------------------------------------------------------------- property test: random data
@settings(**SETTINGS)
@given(
    seed=st.integers(0, 2**16),
    kind=st.sampled_from(["linear", "kernel"]),
    task=st.sampled_from(["classifier", "regressor"]),
    fit_intercept=st.booleans(),
    logC=st.floats(-2.0, 2.0),
    weighted=st.booleans(),
    ops=st.lists(
        st.sampled_from(["add", "remove", "relabel", "reweight", "remove_added"]),
        min_size=1,
        max_size=5,
    ),
    c_new=st.sampled_from([None, "mean", 0.3]),
)
def test_refit_lies_inside_on_random_problems(
    seed, kind, task, fit_intercept, logC, weighted, ops, c_new
):
    rng = np.random.default_rng(seed)
    n, d = int(rng.integers(15, 50)), int(rng.integers(2, 7))
    X = rng.normal(size=(n + 10, d)) * rng.uniform(0.2, 3.0, size=d)
    if task == "classifier":
        y = np.where(X[:, 0] + rng.normal(size=n + 10) > 0, 1, 0)
        y[:2] = [0, 1]
        est = df.LinearClassifier if kind == "linear" else df.KernelClassifier
    else:
        y = X @ rng.normal(size=d) + rng.normal(size=n + 10)
        est = df.LinearRegressor if kind == "linear" else df.KernelRegressor
    C = float(10.0**logC)
    est = est(C=C, fit_intercept=fit_intercept)
    w = rng.uniform(0.3, 3.0, size=n + 10) if weighted else np.ones(n + 10)
    m = est.fit(X[:n], y[:n], sample_weight=w[:n] if weighted else None)
    s = df.sensitivity(m, C_new=c_new)
    present = {i: (X[i], y[i], w[i]) for i in range(n)}
    pool = list(range(n, n + 10))
    hyp = []
    flip = (lambda v: 1 - v) if task == "classifier" else (lambda v: v + 1.0)
    for op in ops:
        ids = sorted(present)
        if op == "add" and pool:
            j = pool.pop()
            (hid,) = s.add(X[[j]], y[[j]], sample_weight=[w[j]])
            present[int(hid)] = (X[j], y[j], w[j])
            hyp.append(int(hid))
        elif op == "remove_added" and hyp:
            hid = hyp.pop()
            s.remove([hid])
            del present[hid]
        elif op == "remove" and len(present) > 6:
            i = ids[int(rng.integers(len(ids)))]
            if i in hyp:
                hyp.remove(i)
            s.remove([i])
            del present[i]
        elif op == "relabel":
            i = ids[int(rng.integers(len(ids)))]
            x_i, y_i, w_i = present[i]
            s.relabel([i], [flip(y_i)])
            present[i] = (x_i, flip(y_i), w_i)
        elif op == "reweight":
            i = ids[int(rng.integers(len(ids)))]
            x_i, y_i, _ = present[i]
            nw = float(rng.choice([0.0, 0.5, 2.0]))
            s.reweight([i], [nw])
            present[i] = (x_i, y_i, nw)
    X2 = np.array([v[0] for v in present.values()])
    y2 = np.array([v[1] for v in present.values()])
    w2 = np.array([v[2] for v in present.values()])
    if task == "classifier" and (np.unique(y2[w2 > 0]).size < 2):
        return  # the refit needs both classes
    C2 = s.C_new_
    Xt = rng.normal(size=(20, d))
    f = twin(m, X2, y2, w2, C2, Xt)
    lo, hi = s.decision_bounds(Xt)
    bad = (f < lo) | (f > hi)
    assert not bad.any(), (lo[bad], f[bad], hi[bad])
    center = 0.5 * (lo + hi)
    assert np.max(np.abs(center - f)) <= 1e-7 * (1.0 + np.max(np.abs(f)))


# --------------------------------------------------------------------- methods, errors
def test_methods_and_errors(cancer):
    X, y, Xt, _ = cancer
    sq = df.LinearClassifier().fit(X[:100], y[:100])
    lg = df.LinearClassifier(loss="logistic").fit(X[:100], y[:100])
    with pytest.raises(ValueError, match="method='exact' needs loss='squared'"):
        df.sensitivity(lg, method="exact")
    with pytest.raises(ValueError, match="method must be one of"):
        df.sensitivity(sq, method="exactly")
    with pytest.raises(ValueError, match="method must be one of"):
        df.sensitivity(sq, method=None)
    with pytest.raises(ValueError, match="method='curvature' needs loss"):
        df.sensitivity(sq, method="curvature")
    assert df.sensitivity(lg).method in ("sphere", "curvature")
    assert df.sensitivity(sq, method="sphere").method == "sphere"
    # the sphere method is the ball, whatever the loss
    s = df.sensitivity(sq, method="sphere").remove([1, 2])
    lo, hi = s.decision_bounds(Xt)
    slo, shi = s.sphere().decision_bounds(Xt)
    np.testing.assert_allclose(lo, slo, rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(hi, shi, rtol=1e-12, atol=1e-12)
    with pytest.raises(ValueError, match="needs a linear model"):
        df.sensitivity(df.KernelClassifier().fit(X[:50], y[:50])).coef_bounds()


def test_pipeline_and_multiclass_take_the_method(cancer, digits10):
    X, y, Xt, _ = cancer
    pipe = df.make_pipeline(StandardScaler(), df.LinearClassifier()).fit(X[:120], y[:120])
    assert df.sensitivity(pipe).method == "exact"
    assert df.sensitivity(pipe, method="sphere").method == "sphere"
    Xd, yd, _ = digits10
    m = df.LinearClassifier(loss="logistic").fit(Xd[:200], yd[:200])
    with pytest.raises(ValueError, match="method='exact'"):
        df.sensitivity(m, method="exact")
