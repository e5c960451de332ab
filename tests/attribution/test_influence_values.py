"""influence against finite differences of the model's own exact reweighting, and against the
exact effects; data_values against brute-force refits (breast cancer, digits)."""

import copy

import numpy as np
import pytest

import deltafit
from deltafit.attribution import DataValues, data_values, influence, loo_effects


def _decision(m, X):
    return m.decision_function(X) if hasattr(m, "decision_function") else m.predict(X)


@pytest.mark.parametrize(
    "make",
    [
        lambda: deltafit.LinearClassifier(loss="logistic", C=0.5),
        lambda: deltafit.LinearClassifier(loss="squared_hinge", C=0.5),
        lambda: deltafit.LinearRegressor(C=0.5),
        lambda: deltafit.KernelClassifier(loss="logistic", C=1.0, gamma=0.05),
        lambda: deltafit.KernelRegressor(C=1.0, gamma=0.05),
    ],
    ids=["logistic", "squared_hinge", "ridge", "kernel_logistic", "kernel_ridge"],
)
def test_influence_is_the_derivative_of_removal(make, cancer):
    """Removing a fraction ε of sample i (weight 1 − ε, the model's exact reweight) changes
    the decision values by ε · influence_i + O(ε²)."""
    X, y = cancer
    t = (
        y[:80]
        if hasattr(make(), "predict_proba") or "Classifier" in type(make()).__name__
        else X[:80, 2] + y[:80]
    )
    m = make().fit(X[:80], t)
    Xq = X[300:320]
    ids = [3, 50]
    inf = influence(m, Xq, ids=ids)
    eps = 1e-5
    for row, i in enumerate(ids):
        mm = copy.deepcopy(m)
        mm.reweight([i], [1.0 - eps])
        fd = (_decision(mm, Xq) - _decision(m, Xq)) / eps
        np.testing.assert_allclose(inf[row], fd, rtol=1e-3, atol=1e-6 * np.abs(fd).max())


def test_influence_close_to_exact_for_small_changes(cancer):
    """With a small C every removal is a small change: the estimate is close to exact; the
    squared loss's exact effect is the estimate divided by 1 − leverage."""
    X, y = cancer
    m = deltafit.LinearClassifier(loss="logistic", C=0.01).fit(X[:200], y[:200])
    E, inf = loo_effects(m, X[300:340]), influence(m, X[300:340])
    assert np.linalg.norm(E - inf) <= 0.15 * np.linalg.norm(E)
    assert np.corrcoef(E.ravel(), inf.ravel())[0, 1] > 0.99
    r = deltafit.LinearRegressor(C=0.2).fit(X[:60], X[:60, 0] + y[:60])
    E, inf = loo_effects(r, X[300:310]), influence(r, X[300:310])
    F = r.problem_.features(X[:60])
    h = np.einsum("ij,ji->i", F, np.linalg.solve(r.problem_.normal_matrix(), F.T))
    np.testing.assert_allclose(E, inf / (1 - h)[:, None], atol=1e-10)


def test_influence_multiclass_shape_and_hinge_refused(wine, cancer):
    X, y = wine
    m = deltafit.LinearClassifier(loss="logistic").fit(X, y)
    assert influence(m, X[:5]).shape == (len(X), 5, 3)
    Xc, yc = cancer
    with pytest.raises(ValueError, match="differentiable"):
        influence(deltafit.LinearClassifier(loss="hinge").fit(Xc[:50], yc[:50]), Xc[:3])


def test_data_values_equal_brute_force(cancer):
    X, y = cancer
    Xtr, ytr, Xv, yv = X[:100], y[:100], X[400:], y[400:]

    def make():
        return deltafit.LinearClassifier(loss="logistic", C=1.0)

    m = make().fit(Xtr, ytr)
    v = data_values(m, Xv, yv)
    full = m.score(Xv, yv)
    bf = np.array(
        [
            full - make().fit(np.delete(Xtr, i, 0), np.delete(ytr, i)).score(Xv, yv)
            for i in range(len(Xtr))
        ]
    )
    np.testing.assert_array_equal(np.round(v.values * len(yv)), np.round(bf * len(yv)))
    assert v.score == pytest.approx(full)
    np.testing.assert_array_equal(v.ids, m.sample_ids_)


def test_data_values_scorer_multiclass_and_regressor(cancer):
    from sklearn.datasets import load_digits
    from sklearn.metrics import get_scorer

    X, y = load_digits(return_X_y=True)
    X = X / 16

    def make():
        return deltafit.LinearClassifier(loss="logistic", C=0.1)

    m = make().fit(X[:200], y[:200])
    Xv, yv = X[1000:1100], y[1000:1100]
    ids = [0, 17, 150]
    v = data_values(m, Xv, yv, scoring="neg_log_loss", ids=ids, names=["a", "b", "c"])
    sc = get_scorer("neg_log_loss")
    full = sc(m, Xv, yv)
    bf = [
        full - sc(make().fit(np.delete(X[:200], i, 0), np.delete(y[:200], i)), Xv, yv) for i in ids
    ]
    np.testing.assert_allclose(v.values, bf, atol=1e-8)
    assert list(v.names) == ["a", "b", "c"] and v.score == pytest.approx(full)
    Xc, yc = cancer
    t = Xc[:50, 0] + yc[:50]
    r = deltafit.LinearRegressor(C=0.5).fit(Xc[:50], t)
    vr = data_values(r, Xc[200:260], Xc[200:260, 0] + yc[200:260])
    full = r.score(Xc[200:260], Xc[200:260, 0] + yc[200:260])
    bf = [
        full
        - deltafit.LinearRegressor(C=0.5)
        .fit(np.delete(Xc[:50], i, 0), np.delete(t, i))
        .score(Xc[200:260], Xc[200:260, 0] + yc[200:260])
        for i in range(50)
    ]
    np.testing.assert_allclose(vr.values, bf, atol=1e-9)


def test_result_object(cancer):
    pd = pytest.importorskip("pandas")
    X, y = cancer
    m = deltafit.LinearClassifier(loss="logistic").fit(X[:60], y[:60])
    v = data_values(m, X[300:], y[300:])
    assert isinstance(v, DataValues) and len(v) == 60
    df = v.to_frame()
    assert isinstance(df, pd.DataFrame) and list(df.columns) == ["name", "value"]
    assert df["value"].is_monotonic_decreasing and df.index.name == "id"
    assert v.most_valuable(1)[0] == df.index[0] and v.most_harmful(1)[0] == df.index[-1]
    assert "exact_loo" in repr(v)


def test_bad_input(cancer):
    from sklearn.linear_model import LogisticRegression

    X, y = cancer
    m = deltafit.LinearClassifier(loss="logistic").fit(X[:40], y[:40])
    with pytest.raises(ValueError, match="one value per row"):
        data_values(m, X[:10], y[:9])
    with pytest.raises(ValueError, match="names"):
        data_values(m, X[:10], y[:10], names=["a"])
    with pytest.raises(ValueError, match="deltafit estimator"):
        loo_effects(LogisticRegression().fit(X[:40], y[:40]), X[:3])
    with pytest.raises(ValueError, match="not fitted"):
        loo_effects(deltafit.LinearClassifier(), X[:3])
    with pytest.raises(ValueError, match="not training samples"):
        loo_effects(m, X[:3], ids=[1000])
    with pytest.raises(ValueError, match="distinct"):
        loo_effects(m, X[:3], ids=[1, 1])
    with pytest.raises(ValueError, match="method"):
        loo_effects(m, X[:3], method="approx")
    with pytest.raises(ValueError, match="chunk_size"):
        loo_effects(m, X[:3], chunk_size=0)
    with pytest.raises(ValueError, match="tol"):
        loo_effects(m, X[:3], tol=-1.0)
    with pytest.raises(ValueError, match="features"):
        loo_effects(m, X[:3, :5])
    with pytest.raises(ValueError, match="keep_data"):
        loo_effects(deltafit.LinearClassifier(keep_data=False).fit(X[:40], y[:40]), X[:3])


def test_accuracy_values_multiclass_equal_brute_force():
    """Label-based values solve loosely first and refine the undecided: still exact."""
    from sklearn.datasets import load_digits

    X, y = load_digits(return_X_y=True)
    X = X / 16.0
    Xtr, ytr, Xv, yv = X[:120], y[:120], X[1000:1300], y[1000:1300]

    def make():
        return deltafit.LinearClassifier(loss="logistic", C=2.0)

    m = make().fit(Xtr, ytr)
    v = data_values(m, Xv, yv)
    full = m.score(Xv, yv)
    bf = np.array(
        [
            full - make().fit(np.delete(Xtr, i, 0), np.delete(ytr, i)).score(Xv, yv)
            for i in range(len(Xtr))
        ]
    )
    np.testing.assert_array_equal(np.round(v.values * len(yv)), np.round(bf * len(yv)))
    assert np.any(bf != 0)


def test_undecided_labels_are_refined(cancer, monkeypatch):
    """With a loose first tolerance too wide to decide labels, the undecided samples are solved
    again to the model's tolerance: the values stay exact."""
    import deltafit.attribution._values as values_module

    X, y = cancer
    m = deltafit.LinearClassifier(loss="logistic", C=1.0).fit(X[:80], y[:80])
    exact = data_values(m, X[300:], y[300:]).values
    calls = []
    real = values_module.iter_effects

    def spy(*args, **kw):
        calls.append(kw.get("ids"))
        return real(*args, **kw)

    monkeypatch.setattr(values_module, "_LOOSE", 0.5)
    monkeypatch.setattr(values_module, "iter_effects", spy)
    np.testing.assert_array_equal(data_values(m, X[300:], y[300:]).values, exact)
    assert len(calls) == 2 and len(calls[1]) > 0
