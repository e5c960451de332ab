"""Multiclass models (K ≥ 3 classes, one-vs-rest over one ledger): parity with scikit-learn on
digits, every update equal to a fresh fit, labels, persistence, the per-class problem views.

Tolerances: the closed forms and the exact hinge QP agree with a refit to 1e-9 on the decision
values; the Newton losses (logistic, squared hinge) stop at ‖∇J‖ ≤ tol·‖∇J(0)‖, so warm and
cold solves agree to 1e-6; scikit-learn's solvers are compared at 1e-6 (Ridge: 1e-8).
"""

import numpy as np
import pytest
from sklearn.datasets import load_digits
from sklearn.linear_model import LogisticRegression, RidgeClassifier
from sklearn.multiclass import OneVsRestClassifier
from sklearn.preprocessing import StandardScaler

import deltafit
from deltafit import KernelClassifier, LinearClassifier
from deltafit._states._one_vs_rest import SharedGram

LOSSES = ["squared", "logistic", "squared_hinge", "hinge"]
TOL = {"squared": 1e-9, "hinge": 1e-7, "logistic": 1e-6, "squared_hinge": 1e-6}


@pytest.fixture(scope="module")
def digits10():
    X, y = load_digits(return_X_y=True)
    return StandardScaler().fit_transform(X), y


def _with_ones(X):
    return np.hstack([X, np.ones((X.shape[0], 1))])


def _model(kind, loss, C=0.5, **kw):
    if kind == "linear":
        return LinearClassifier(loss=loss, C=C, **kw)
    return KernelClassifier(loss=loss, C=C, gamma=0.02, **kw)


# ------------------------------------------------------------------ parity with scikit-learn
def test_squared_equals_ridge_classifier(digits10):
    X, y = digits10
    C = 0.1
    m = LinearClassifier(C=C).fit(X, y)
    ref = RidgeClassifier(alpha=1 / (2 * C), fit_intercept=False, solver="cholesky")
    ref.fit(_with_ones(X), y)
    np.testing.assert_allclose(
        m.decision_function(X), ref.decision_function(_with_ones(X)), rtol=1e-8, atol=1e-8
    )
    np.testing.assert_array_equal(m.predict(X), ref.predict(_with_ones(X)))
    assert m.coef_.shape == (10, 64) and m.intercept_.shape == (10,)
    np.testing.assert_allclose(m.coef_, ref.coef_[:, :-1], rtol=1e-8, atol=1e-10)
    np.testing.assert_allclose(m.intercept_, ref.coef_[:, -1], rtol=1e-8, atol=1e-10)


def test_logistic_equals_one_vs_rest_logistic_regression(digits10):
    X, y = digits10
    X, y = X[:600], y[:600]
    C = 0.5
    m = LinearClassifier(loss="logistic", C=C, tol=1e-12).fit(X, y)
    ref = OneVsRestClassifier(
        LogisticRegression(C=C, fit_intercept=False, tol=1e-12, solver="newton-cg", max_iter=1000)
    )
    ref.fit(_with_ones(X), y)
    np.testing.assert_allclose(
        m.decision_function(X), ref.decision_function(_with_ones(X)), atol=1e-6
    )
    np.testing.assert_allclose(m.predict_proba(X), ref.predict_proba(_with_ones(X)), atol=1e-6)
    np.testing.assert_allclose(np.exp(m.predict_log_proba(X)), m.predict_proba(X), rtol=1e-12)
    np.testing.assert_array_equal(m.predict(X), ref.predict(_with_ones(X)))


@pytest.mark.parametrize("loss", LOSSES)
def test_each_class_is_the_binary_model_of_that_class(digits10, loss):
    X, y = digits10
    X, y = X[:400], y[:400]
    m = LinearClassifier(loss=loss, C=0.3).fit(X, y)
    dec = m.decision_function(X)
    for k in (0, 4, 9):
        own = LinearClassifier(loss=loss, C=0.3).fit(X, np.where(y == k, 1, -1))
        np.testing.assert_allclose(dec[:, k], own.decision_function(X), atol=TOL[loss])


def test_kernel_each_class_is_the_binary_model(digits10):
    X, y = digits10
    X, y = X[:300], y[:300]
    m = KernelClassifier(loss="logistic", gamma=0.02).fit(X, y)
    for k in (1, 7):
        own = KernelClassifier(loss="logistic", gamma=0.02).fit(X, np.where(y == k, 1, -1))
        np.testing.assert_allclose(
            m.decision_function(X)[:, k], own.decision_function(X), atol=1e-6
        )
    assert m.dual_coef_.shape == (10, 300) and m.intercept_.shape == (10,)


# --------------------------------------------------------------------- update == refit
@pytest.mark.parametrize("kind", ["linear", "kernel"])
@pytest.mark.parametrize("loss", LOSSES)
def test_updates_equal_a_fresh_fit(digits10, kind, loss):
    X, y = digits10
    X, y = X[:360], y[:360].copy()
    m = _model(kind, loss).fit(X[:300], y[:300])
    new = m.add(X[300:330], y[300:330])
    np.testing.assert_array_equal(new, np.arange(300, 330))
    m.remove([0, 5, 301])
    m.relabel([7, 8], [(y[7] + 1) % 10, (y[8] + 3) % 10])
    m.update(
        X_add=X[330:360],
        y_add=y[330:360],
        remove_ids=[9, 302],
        relabel_ids=[10],
        y_relabel=[(y[10] + 5) % 10],
    )
    yy = y.copy()
    yy[7], yy[8], yy[10] = (y[7] + 1) % 10, (y[8] + 3) % 10, (y[10] + 5) % 10
    keep = np.setdiff1d(np.arange(360), [0, 5, 301, 9, 302])
    np.testing.assert_array_equal(m.sample_ids_, keep)
    fresh = _model(kind, loss).fit(X[keep], yy[keep])
    np.testing.assert_allclose(m.decision_function(X), fresh.decision_function(X), atol=TOL[loss])
    np.testing.assert_array_equal(m.predict(X), fresh.predict(X))


@pytest.mark.parametrize("kind", ["linear", "kernel"])
def test_string_labels_and_partial_fit_with_declared_classes(iris, kind):
    X, y = iris
    first = y != "virginica"
    m = _model(kind, "squared")
    m.partial_fit(X[first][:60], y[first][:60], classes=["setosa", "versicolor", "virginica"])
    np.testing.assert_array_equal(m.classes_, ["setosa", "versicolor", "virginica"])
    assert m.decision_function(X).shape == (150, 3)
    m.partial_fit(X[~first], y[~first])  # the declared third class arrives
    both = np.r_[np.flatnonzero(first)[:60], np.flatnonzero(~first)]
    fresh = _model(kind, "squared").fit(X[both], y[both])
    np.testing.assert_allclose(m.decision_function(X), fresh.decision_function(X), atol=1e-9)
    assert set(m.predict(X)) <= set(m.classes_)


def test_unseen_label_is_refused_and_explains_classes(iris):
    X, y = iris
    m = LinearClassifier().fit(X[:100], y[:100])  # setosa, versicolor: binary
    before = m.decision_function(X).copy()
    with pytest.raises(ValueError, match=r"classes=\["):
        m.add(X[100:], y[100:])
    np.testing.assert_array_equal(m.decision_function(X), before)
    three = LinearClassifier().fit(X[:140], np.r_[y[:140]])
    with pytest.raises(ValueError, match="not among the model's classes"):
        three.add(X[:2], ["setosa", "dahlia"])
    with pytest.raises(ValueError, match="not among the model's classes"):
        three.relabel([0], ["dahlia"])


@pytest.mark.parametrize("loss", ["squared", "logistic"])
def test_failed_update_leaves_the_model_unchanged(digits10, loss):
    X, y = digits10
    m = LinearClassifier(loss=loss).fit(X[:200], y[:200])
    snap = (m.decision_function(X).copy(), m.sample_ids_.copy(), m.grad_norm_)
    for bad in (
        lambda: m.remove([0, 0]),
        lambda: m.remove([10_000]),
        lambda: m.add(X[:2], [3, 42]),
        lambda: m.add(X[:2, :5], [1, 2]),
        lambda: m.update(remove_ids=[3], relabel_ids=[3], y_relabel=[1]),
    ):
        with pytest.raises(ValueError):
            bad()
        np.testing.assert_array_equal(m.decision_function(X), snap[0])
        np.testing.assert_array_equal(m.sample_ids_, snap[1])
        assert m.grad_norm_ == snap[2]


def test_update_that_leaves_one_class_is_refused(iris):
    X, y = iris
    m = LinearClassifier().fit(X[:105], y[:105])  # 50, 50, 5
    with pytest.raises(ValueError, match="single class"):
        m.remove(np.arange(50, 105))  # only setosa would remain
    m.remove(np.arange(100, 105))  # a class may lose all its samples: still 3 classes
    assert m.decision_function(X).shape == (150, 3)


def test_keep_data_false_multiclass_is_refused(digits10):
    X, y = digits10
    with pytest.raises(ValueError, match="keep_data=False supports two classes"):
        LinearClassifier(keep_data=False).fit(X[:100], y[:100])


def test_kernel_classes_share_one_kernel_matrix(digits10):
    X, y = digits10
    m = KernelClassifier(loss="hinge", gamma=0.02).fit(X[:200], y[:200])
    states = m._state.states
    assert not isinstance(states[0].gram, SharedGram)
    assert all(
        isinstance(st.gram, SharedGram) and st.gram._owner is states[0].gram for st in states[1:]
    )
    m.add(X[200:450], y[200:450])  # grows the matrix beyond its first capacity
    assert all(st.gram.K is states[0].gram.K for st in states[1:])
    fresh = KernelClassifier(loss="hinge", gamma=0.02).fit(X[:450], y[:450])
    np.testing.assert_allclose(m.decision_function(X), fresh.decision_function(X), atol=1e-7)


# ------------------------------------------------------------------------- persistence
@pytest.mark.parametrize("kind", ["linear", "kernel"])
@pytest.mark.parametrize("loss", LOSSES)
def test_save_load_round_trip(tmp_path, digits10, kind, loss):
    X, y = digits10
    m = _model(kind, loss).fit(X[:150], y[:150])
    m.remove([3])
    path = tmp_path / "m.npz"
    deltafit.save(m, path)
    back = deltafit.load(path)
    np.testing.assert_array_equal(back.decision_function(X), m.decision_function(X))
    np.testing.assert_array_equal(back.classes_, m.classes_)
    # iterative states keep their certificate; the closed form recomputes it from the
    # exact statistics (rounding level either way)
    np.testing.assert_allclose(back.grad_norm_, m.grad_norm_, rtol=0.5, atol=1e-12)
    # and it keeps updating exactly
    m.add(X[150:160], y[150:160])
    back.add(X[150:160], y[150:160])
    np.testing.assert_allclose(back.decision_function(X), m.decision_function(X), atol=1e-12)


def test_corrupt_multiclass_file_is_refused(tmp_path, digits10):
    X, y = digits10
    m = LinearClassifier(loss="logistic").fit(X[:150], y[:150])
    path = tmp_path / "m.npz"
    deltafit.save(m, path)
    with np.load(path) as z:
        arrays = dict(z)
    bad = dict(arrays, ledger_y=np.where(arrays["ledger_y"] == 9, 10.0, arrays["ledger_y"]))
    np.savez(tmp_path / "labels.npz", **bad)
    with pytest.raises(ValueError, match="class indices"):
        deltafit.load(tmp_path / "labels.npz")
    bad = dict(arrays, state_c3_beta=arrays["state_c3_beta"] * 1.01)
    np.savez(tmp_path / "beta.npz", **bad)
    with pytest.raises(ValueError, match="does not solve"):
        deltafit.load(tmp_path / "beta.npz")
    bad = dict(arrays)
    del bad["state_c9_beta"]
    np.savez(tmp_path / "missing.npz", **bad)
    with pytest.raises(ValueError, match="corrupt model file"):
        deltafit.load(tmp_path / "missing.npz")


# ------------------------------------------------------------------- the problem views
def test_class_views_are_the_binary_problems(digits10):
    X, y = digits10
    m = LinearClassifier(loss="logistic", C=0.3).fit(X[:300], y[:300])
    prob = m.problem_
    assert prob.n_classes == 10 and not prob.binary
    for k in (0, 5):
        view = prob.for_class(k)
        own = LinearClassifier(loss="logistic", C=0.3).fit(X[:300], np.where(y[:300] == k, 1, -1))
        ref = own.problem_
        np.testing.assert_allclose(view.coef, ref.coef, atol=1e-6)
        np.testing.assert_array_equal(view.targets[view.live], ref.targets[ref.live])
        np.testing.assert_allclose(view.decision(X), own.decision_function(X), atol=1e-6)
        assert view.certified_residual <= m.grad_norm_
        np.testing.assert_allclose(view.gradient(), 0.0, atol=10 * view.certified_residual + 1e-9)
    # multiclass sensitivity is per class (tests/test_multiclass_sensitivity.py), and so is
    # the incremental sphere of the stream learners (tests/test_incremental_multiclass.py)
    assert deltafit.sensitivity(m).n_classes == 10
    assert deltafit.sensitivity.IncrementalSphere(m).n_classes == 10
    with pytest.raises(ValueError, match="not in"):
        prob.for_class(10)


@pytest.mark.parametrize("kind", ["linear", "kernel"])
def test_classes_in_threads_give_the_same_model(digits10, kind):
    import joblib

    X, y = digits10
    X, y = X[:250], y[:250]
    seq = _model(kind, "logistic").fit(X[:200], y[:200])
    with joblib.parallel_config(n_jobs=2):
        par = _model(kind, "logistic").fit(X[:200], y[:200])
        par.add(X[200:], y[200:])
        par.remove([0, 3])
    seq.add(X[200:], y[200:])
    seq.remove([0, 3])
    # the same solves; BLAS may sum in another order inside a thread
    np.testing.assert_allclose(
        par.decision_function(X), seq.decision_function(X), rtol=1e-10, atol=1e-10
    )
