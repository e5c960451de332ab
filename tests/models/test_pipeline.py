"""deltafit.make_pipeline / UpdatablePipeline: frozen transformers, exact updates of the final step.

The reference for an updated pipeline is a fresh fit of the final estimator on the rows it holds,
transformed by the transformers the pipeline's first ``fit`` fitted (frozen) — computed two
ways: by hand, and as scikit-learn's ``make_pipeline(FrozenEstimator(fitted transformer), fresh
estimator)``.  Tolerances: relative 1e-8 for the squared loss (closed form), 1e-6 for the
logistic loss (Newton stops at ``tol``); the sensitivity / CV entry points on a pipeline must give
exactly what they give on the final estimator with the pre-transformed data (same computation).

All on scikit-learn's bundled breast cancer data (569 x 30) and diabetes (442 x 10).
"""

from __future__ import annotations

import numpy as np
import pytest
from sklearn.base import clone
from sklearn.datasets import load_breast_cancer, load_diabetes
from sklearn.exceptions import NotFittedError
from sklearn.frozen import FrozenEstimator
from sklearn.linear_model import LogisticRegression
from sklearn.model_selection import StratifiedKFold, cross_val_score
from sklearn.pipeline import Pipeline
from sklearn.pipeline import make_pipeline as sk_make_pipeline
from sklearn.preprocessing import MinMaxScaler, StandardScaler
from sklearn.utils.estimator_checks import parametrize_with_checks
from sklearn.utils.validation import check_is_fitted

import deltafit as df
from deltafit.model_selection import LOOSearchCV, cross_validate, loo, treecv
from deltafit.utils import estimator_checks as upd_checks


@pytest.fixture(scope="module")
def cancer():
    return load_breast_cancer(return_X_y=True)


@pytest.fixture(scope="module")
def diabetes():
    return load_diabetes(return_X_y=True)


def _rel(a, b):
    a, b = np.asarray(a, dtype=float), np.asarray(b, dtype=float)
    return float(np.max(np.abs(a - b)) / max(1.0, float(np.max(np.abs(b)))))


FINALS = {
    "lin-squared": (lambda: df.LinearClassifier(C=1.0), 1e-8, "clf"),
    "lin-logistic": (lambda: df.LinearClassifier(loss="logistic", C=0.5), 1e-6, "clf"),
    "lin-nodata": (lambda: df.LinearClassifier(C=1.0, keep_data=False), 1e-8, "clf"),
    "ker-squared": (lambda: df.KernelClassifier(C=1.0, gamma=0.05), 1e-8, "clf"),
    "ridge": (lambda: df.LinearRegressor(C=2.0), 1e-8, "reg"),
    "ridge-nodata": (lambda: df.LinearRegressor(C=2.0, keep_data=False), 1e-8, "reg"),
}


class _Data:
    """The samples a pipeline holds, by id: raw rows and labels."""

    def __init__(self, X, y):
        self.rows = {i: (X[i], y[i]) for i in range(X.shape[0])}

    def add(self, ids, X, y):
        self.rows.update({int(i): (x, t) for i, x, t in zip(ids, X, y)})

    def arrays(self, ids):
        return (
            np.array([self.rows[int(i)][0] for i in ids]),
            np.array([self.rows[int(i)][1] for i in ids]),
        )


# ---------------------------------------------------------------------------------------------
# construction and fit
# ---------------------------------------------------------------------------------------------
def test_make_pipeline_names_steps_as_scikit_learn():
    pipe = df.make_pipeline(StandardScaler(), df.LinearClassifier(), verbose=False)
    assert isinstance(pipe, df.UpdatablePipeline) and isinstance(pipe, Pipeline)
    assert [n for n, _ in pipe.steps] == ["standardscaler", "linearclassifier"]
    assert pipe.get_params()["linearclassifier__C"] == 1.0
    assert isinstance(clone(pipe), df.UpdatablePipeline)


def test_final_step_must_be_updatable(cancer):
    X, y = cancer
    with pytest.raises(ValueError, match="final step 'logisticregression'"):
        df.make_pipeline(StandardScaler(), LogisticRegression()).fit(X, y)
    with pytest.raises(ValueError, match="final step 'standardscaler'"):
        df.make_pipeline(MinMaxScaler(), StandardScaler()).fit(X, y)


def test_second_fit_refits_the_transformers(cancer):
    X, y = cancer
    pipe = df.make_pipeline(StandardScaler(), df.LinearClassifier()).fit(X[:300], y[:300])
    mean_first = pipe[0].mean_.copy()
    pipe.fit(X[300:], y[300:])
    np.testing.assert_allclose(pipe[0].mean_, X[300:].mean(axis=0), rtol=1e-12)
    assert not np.allclose(pipe[0].mean_, mean_first)
    assert np.array_equal(pipe.sample_ids_, np.arange(X.shape[0] - 300))


def test_updates_need_a_fitted_pipeline(cancer):
    X, y = cancer
    pipe = df.make_pipeline(StandardScaler(), df.LinearClassifier())
    for call in (
        lambda: pipe.add(X[:5], y[:5]),
        lambda: pipe.remove([0]),
        lambda: pipe.relabel([0], y[:1]),
        lambda: pipe.update(remove_ids=[0]),
    ):
        with pytest.raises(NotFittedError):
            call()


# ---------------------------------------------------------------------------------------------
# update == refit of the final estimator on the frozen-transformed data
# ---------------------------------------------------------------------------------------------
@pytest.mark.parametrize("final", list(FINALS))
def test_updates_equal_a_fresh_fit_on_the_frozen_features(final, cancer, diabetes):
    make, tol, kind = FINALS[final]
    X, y = cancer if kind == "clf" else diabetes
    nodata = not make().get_params().get("keep_data", True)
    n0 = 250
    pipe = df.make_pipeline(StandardScaler(), make()).fit(X[:n0], y[:n0])
    scaler = pipe[0]
    mean, scale = scaler.mean_.copy(), scaler.scale_.copy()
    data = _Data(X[:n0], y[:n0])

    # add
    ids = pipe.add(X[n0 : n0 + 100], y[n0 : n0 + 100])
    data.add(ids, X[n0 : n0 + 100], y[n0 : n0 + 100])
    # remove (by id; by value for keep_data=False)
    gone = [3, 17, int(ids[5]), int(ids[6])]
    Xg, yg = data.arrays(gone)
    if nodata:
        pipe.remove(gone, X=Xg, y=yg)
    else:
        pipe.remove(gone)
    for i in gone:
        del data.rows[i]
    # relabel
    rel = [5, 40, int(ids[10])]
    Xr, yr_old = data.arrays(rel)
    yr = (1 - yr_old) if kind == "clf" else yr_old + 10.0
    if nodata:
        pipe.relabel(rel, yr, X=Xr, y_old=yr_old)
    else:
        pipe.relabel(rel, yr)
    for i, t in zip(rel, yr):
        data.rows[i] = (data.rows[i][0], t)
    # one mixed update, rows given raw
    mix_rm, mix_rel = [7, int(ids[20])], [8]
    Xm, ym = data.arrays(mix_rm)
    Xl, yl_old = data.arrays(mix_rel)
    yl = (1 - yl_old) if kind == "clf" else yl_old - 5.0
    kw = dict(
        X_add=X[n0 + 100 : n0 + 140],
        y_add=y[n0 + 100 : n0 + 140],
        remove_ids=mix_rm,
        relabel_ids=mix_rel,
        y_relabel=yl,
    )
    if nodata:
        kw.update(X_remove=Xm, y_remove=ym, X_relabel=Xl, y_relabel_old=yl_old)
    new = pipe.update(**kw)
    data.add(new, X[n0 + 100 : n0 + 140], y[n0 + 100 : n0 + 140])
    for i in mix_rm:
        del data.rows[i]
    data.rows[8] = (data.rows[8][0], yl[0])
    # partial_fit on a fitted pipeline: an add
    pipe.partial_fit(X[n0 + 140 : n0 + 150], y[n0 + 140 : n0 + 150])
    data.add(pipe.sample_ids_[-10:], X[n0 + 140 : n0 + 150], y[n0 + 140 : n0 + 150])

    # the transformers are frozen: the same object, the same fitted arrays, bit for bit
    assert pipe[0] is scaler
    assert np.array_equal(scaler.mean_, mean) and np.array_equal(scaler.scale_, scale)
    ids_now = pipe.sample_ids_
    assert sorted(data.rows) == ids_now.tolist() and pipe.n_samples_ == len(data.rows)
    Xc, yc = data.arrays(ids_now)
    Xq = X[::4]
    # (1) a fresh fit of the final estimator on the frozen-transformed rows
    fresh = make().fit(scaler.transform(Xc), yc)
    assert (
        _rel(
            pipe.predict(Xq) if kind == "reg" else pipe.decision_function(Xq),
            fresh.predict(scaler.transform(Xq))
            if kind == "reg"
            else fresh.decision_function(scaler.transform(Xq)),
        )
        <= tol
    )
    if hasattr(fresh, "coef_"):
        assert _rel(pipe[-1].coef_, fresh.coef_) <= tol
        assert _rel(pipe[-1].intercept_, fresh.intercept_) <= tol
    # (2) scikit-learn's pipeline of the frozen transformer and a fresh final estimator
    ref = sk_make_pipeline(FrozenEstimator(scaler), make()).fit(Xc, yc)
    assert _rel(pipe.predict(Xq), ref.predict(Xq)) <= (0 if kind == "clf" else tol)
    # (3) deltafit's pipeline of the same
    ref2 = df.make_pipeline(FrozenEstimator(scaler), make()).fit(Xc, yc)
    assert _rel(pipe.predict(Xq), ref2.predict(Xq)) <= (0 if kind == "clf" else tol)
    # and not a refit of the whole pipeline (whose scaler would see the new data)
    whole = df.make_pipeline(StandardScaler(), make()).fit(Xc, yc)
    assert not np.allclose(whole[0].mean_, scaler.mean_)


def test_forwarded_attributes(cancer):
    X, y = cancer
    pipe = df.make_pipeline(StandardScaler(), df.LinearClassifier()).fit(X[:200], y[:200])
    ids = pipe.add(X[200:210], y[200:210])
    assert np.array_equal(ids, np.arange(200, 210))
    assert np.array_equal(pipe.sample_ids_, pipe[-1].sample_ids_)
    assert pipe.n_samples_ == 210 == pipe[-1].n_samples_
    assert pipe.problem_.n_samples == 210 and type(pipe.problem_) is type(pipe[-1].problem_)
    assert np.array_equal(pipe.problem_.live, pipe[-1].problem_.live)
    assert np.array_equal(pipe.classes_, [0, 1]) and pipe.n_features_in_ == 30
    assert not hasattr(pipe, "predict_proba")  # the squared loss has none: as the final step
    logistic = df.make_pipeline(StandardScaler(), df.LinearClassifier(loss="logistic"))
    P = logistic.fit(X, y).predict_proba(X[:3])
    assert np.array_equal(P, logistic[-1].predict_proba(logistic[0].transform(X[:3])))
    with pytest.raises(AttributeError):
        df.make_pipeline(StandardScaler(), df.LinearClassifier()).sample_ids_


def test_partial_fit_on_an_unfitted_pipeline_fits_the_transformers_on_the_first_batch(cancer):
    X, y = cancer
    pipe = df.make_pipeline(StandardScaler(), df.LinearClassifier())
    pipe.partial_fit(X[:200], y[:200], classes=[0, 1])
    ref = df.make_pipeline(StandardScaler(), df.LinearClassifier()).fit(X[:200], y[:200])
    assert np.array_equal(pipe[0].mean_, ref[0].mean_)
    assert _rel(pipe.decision_function(X), ref.decision_function(X)) <= 1e-12
    pipe.partial_fit(X[200:300], y[200:300])  # frozen from now on: an add
    assert np.array_equal(pipe[0].mean_, ref[0].mean_)
    ref.add(X[200:300], y[200:300])
    assert _rel(pipe.decision_function(X), ref.decision_function(X)) <= 1e-12
    with pytest.raises(ValueError, match="classes"):
        pipe.partial_fit(X[300:310], y[300:310], classes=[1, 2])


def test_failed_first_partial_fit_leaves_the_pipeline_unfitted(cancer):
    X, y = cancer
    scaler = StandardScaler()
    pipe = df.make_pipeline(scaler, df.LinearClassifier())
    one_class = y == 1
    with pytest.raises(ValueError):
        pipe.partial_fit(X[one_class][:50], y[one_class][:50])
    assert pipe[0] is scaler
    with pytest.raises(NotFittedError):
        check_is_fitted(scaler)
    with pytest.raises(NotFittedError):
        check_is_fitted(pipe)


def _snapshot(pipe, Xq):
    return (
        pipe.sample_ids_.copy(),
        pipe.decision_function(Xq).copy(),
        pipe[0].mean_.copy(),
        pipe[-1].coef_.copy(),
    )


@pytest.mark.parametrize(
    "bad", ["width", "nan", "unknown-id", "third-class", "all-removed", "mixed-bad-add"]
)
def test_a_failed_update_leaves_the_pipeline_unchanged(bad, cancer):
    X, y = cancer
    pipe = df.make_pipeline(StandardScaler(), df.LinearClassifier()).fit(X[:100], y[:100])
    before = _snapshot(pipe, X[::7])
    Xnan = X[100:105].copy()
    Xnan[2, 3] = np.nan
    calls = {
        "width": lambda: pipe.add(X[100:105, :-1], y[100:105]),
        "nan": lambda: pipe.add(Xnan, y[100:105]),
        "unknown-id": lambda: pipe.remove([0, 12345]),
        "third-class": lambda: pipe.relabel([0], [7]),
        "all-removed": lambda: pipe.remove(np.arange(100)),
        "mixed-bad-add": lambda: pipe.update(
            X_add=X[100:105, :-1], y_add=y[100:105], remove_ids=[0, 1]
        ),
    }
    with pytest.raises(ValueError):
        calls[bad]()
    after = _snapshot(pipe, X[::7])
    for a, b in zip(before, after):
        assert np.array_equal(a, b)


# ---------------------------------------------------------------------------------------------
# the update contract (deltafit.utils.estimator_checks) with frozen transformers
# ---------------------------------------------------------------------------------------------
_UPDATE_CHECKS = [
    c
    for c in upd_checks._CHECKS
    # reads the refit's coef_, which a pipeline does not expose (pipe[-1].coef_
    # lives in the transformed space); the sensitivity tests below cover it
    if c.__name__ != "check_sensitivity_ball_contains_refit"
]


@pytest.mark.parametrize("check", _UPDATE_CHECKS, ids=lambda c: c.__name__)
@pytest.mark.parametrize("final", ["lin", "ker-logistic", "ridge"])
def test_update_contract_with_frozen_transformers(final, check, cancer, diabetes):
    """With ``FrozenEstimator`` steps a fresh ``fit`` of the whole pipeline is the reference of
    the update contract, and every check of it holds."""
    X, y = diabetes if final == "ridge" else cancer
    est = {
        "lin": df.LinearClassifier(),
        "ker-logistic": df.KernelClassifier(loss="logistic", gamma=0.05),
        "ridge": df.LinearRegressor(),
    }[final]
    check(df.make_pipeline(FrozenEstimator(StandardScaler().fit(X)), est), X=X, y=y)


# scikit-learn's Pipeline fits its steps in place: ``steps`` (a parameter) holds fitted
# transformers after fit.  That is Pipeline's documented behaviour, inherited here.
_PIPELINE_FITS_STEPS_IN_PLACE = {
    "check_estimators_overwrite_params": "Pipeline.fit fits the step objects in place",
    "check_dont_overwrite_parameters": "Pipeline.fit fits the step objects in place",
}


@parametrize_with_checks(
    [
        df.make_pipeline(StandardScaler(), df.LinearClassifier()),
        df.make_pipeline(StandardScaler(), df.KernelClassifier(loss="logistic")),
        df.make_pipeline(MinMaxScaler(), df.LinearRegressor(keep_data=False)),
    ],
    expected_failed_checks=lambda est: _PIPELINE_FITS_STEPS_IN_PLACE,
)
def test_sklearn_estimator_checks(estimator, check):
    check(estimator)


# ---------------------------------------------------------------------------------------------
# parity on real data
# ---------------------------------------------------------------------------------------------
def test_cross_val_score_breast_cancer(cancer):
    X, y = cancer
    cv = StratifiedKFold(5, shuffle=True, random_state=0)
    kernel = cross_val_score(df.make_pipeline(StandardScaler(), df.KernelClassifier()), X, y, cv=cv)
    linear = cross_val_score(
        df.make_pipeline(StandardScaler(), df.LinearClassifier(loss="logistic")), X, y, cv=cv
    )
    assert kernel.mean() >= 0.95 and linear.mean() >= 0.95
    # the same as scikit-learn's Pipeline of the same steps (each fold refits the scaler)
    sk = cross_val_score(sk_make_pipeline(StandardScaler(), df.KernelClassifier()), X, y, cv=cv)
    assert np.array_equal(kernel, sk)


# ---------------------------------------------------------------------------------------------
# sensitivity on a pipeline == sensitivity of the final estimator on transformed rows
# ---------------------------------------------------------------------------------------------
@pytest.mark.parametrize("final", ["lin-logistic", "lin-nodata", "ker-squared"])
def test_sensitivity_of_a_pipeline(final, cancer):
    X, y = cancer
    make = FINALS[final][0]
    nodata = final == "lin-nodata"
    pipe = df.make_pipeline(StandardScaler(), make()).fit(X[:400], y[:400])
    T = pipe[0].transform
    s_pipe, s_final = df.sensitivity(pipe), df.sensitivity(pipe[-1])
    rm = [1, 2, 30]
    if nodata:
        s_pipe.remove(X=X[rm], y=y[rm])
        s_final.remove(X=T(X[rm]), y=y[rm])
        s_pipe.relabel([50], 1 - y[[50]], X=X[[50]])
        s_final.relabel([50], 1 - y[[50]], X=T(X[[50]]))
    else:
        s_pipe.remove(rm)
        s_final.remove(rm)
        s_pipe.relabel([50], 1 - y[[50]])
        s_final.relabel([50], 1 - y[[50]])
    hyp = s_pipe.add(X[400:420], y[400:420])
    assert np.array_equal(hyp, s_final.add(T(X[400:420]), y[400:420]))
    Xq = X[420:]
    for a, b in zip(s_pipe.decision_bounds(Xq), s_final.decision_bounds(T(Xq))):
        assert np.array_equal(a, b)
    for a, b in zip(s_pipe.predict_certain(Xq), s_final.predict_certain(T(Xq))):
        assert np.array_equal(a, b)
    assert np.array_equal(s_pipe.tightness(Xq), s_final.tightness(T(Xq)))
    assert s_pipe.distance_bound() == s_final.distance_bound()
    assert s_pipe.n_removed == 3 and s_pipe.n_added == 20
    # the ball holds the pipeline updated by the same change
    lo, hi = s_pipe.decision_bounds(Xq)
    if nodata:
        pipe.update(
            X_add=X[400:420],
            y_add=y[400:420],
            remove_ids=rm,
            X_remove=X[rm],
            y_remove=y[rm],
            relabel_ids=[50],
            y_relabel=1 - y[[50]],
            X_relabel=X[[50]],
        )
    else:
        pipe.update(
            X_add=X[400:420],
            y_add=y[400:420],
            remove_ids=rm,
            relabel_ids=[50],
            y_relabel=1 - y[[50]],
        )
    f = pipe.decision_function(Xq)
    slack = 1e-6 * max(1.0, float(np.max(np.abs(f))))
    assert np.all(lo <= f + slack) and np.all(f <= hi + slack)
    # after the update, the old what-if object refuses to answer
    with pytest.raises(ValueError, match="updated after"):
        s_pipe.decision_bounds(Xq)


def test_sensitivity_undo_reset_and_sphere(cancer):
    X, y = cancer
    pipe = df.make_pipeline(StandardScaler(), df.LinearClassifier(loss="logistic")).fit(X, y)
    s = df.sensitivity(pipe, method="sphere")
    s.remove([0, 1])
    r2 = s.distance_bound()
    assert s.add(X[:3], y[:3]) is not s and s.undo() is s and s.distance_bound() == r2
    assert s.reset() is s and s.n_removed == 0
    s.remove([0, 1])
    ball = s.sphere()  # in the transformed space
    for a, b in zip(ball.decision_bounds(s.transform(X[:5])), s.decision_bounds(X[:5])):
        np.testing.assert_allclose(a, b, rtol=1e-12, atol=1e-12)


def test_sensitivity_needs_a_fitted_pipeline(cancer):
    with pytest.raises(NotFittedError):
        df.sensitivity(df.make_pipeline(StandardScaler(), df.LinearClassifier()))


# ---------------------------------------------------------------------------------------------
# loo, cross_validate, LOOSearchCV, treecv: transformers fitted once on all the data, frozen
# ---------------------------------------------------------------------------------------------
def _scaled(X):
    return StandardScaler().fit(X).transform(X)


@pytest.mark.parametrize("method", ["closed_form", "bounds_early", "alo"])
def test_loo_of_a_pipeline_is_loo_of_the_final_estimator_on_scaled_data(method, cancer):
    X, y = cancer
    loss = "squared" if method == "closed_form" else "logistic"
    pipe = df.make_pipeline(StandardScaler(), df.LinearClassifier(loss=loss, C=0.1))
    a = loo(pipe, X, y, method=method)
    b = loo(df.LinearClassifier(loss=loss, C=0.1), _scaled(X), y, method=method)
    assert a.method == b.method and a.n_errors == b.n_errors
    assert np.array_equal(a.y_pred, b.y_pred)
    np.testing.assert_array_equal(a.decision, b.decision)
    with pytest.raises(NotFittedError):
        check_is_fitted(pipe)  # the estimator given is not modified


def test_cross_validate_of_a_pipeline_leaks_the_scaler_unlike_scikit_learn(cancer):
    """deltafit's CV of a pipeline fits the scaler once on all of X (the left-out fold shaped
    it); scikit-learn's ``cross_val_score`` of a Pipeline refits it per fold.  The decision
    values differ (a small leak); the fold accuracies are close."""
    X, y = cancer
    cv = StratifiedKFold(5, shuffle=True, random_state=1)
    pipe = df.make_pipeline(StandardScaler(), df.LinearClassifier(C=1.0))
    ours = cross_validate(pipe, X, y, cv=cv)
    same = cross_validate(df.LinearClassifier(C=1.0), _scaled(X), y, cv=cv)
    assert np.array_equal(ours.fold_scores, same.fold_scores)
    assert np.array_equal(ours.decision, same.decision)
    refit_per_fold = np.empty(X.shape[0])
    for tr, te in cv.split(X, y):
        m = sk_make_pipeline(StandardScaler(), df.LinearClassifier(C=1.0)).fit(X[tr], y[tr])
        refit_per_fold[te] = m.decision_function(X[te])
    assert _rel(ours.decision, refit_per_fold) > 1e-6  # the leak: not scikit-learn's folds
    sk = cross_val_score(
        sk_make_pipeline(StandardScaler(), df.LinearClassifier(C=1.0)), X, y, cv=cv
    )
    assert abs(ours.score - sk.mean()) <= 0.02


@pytest.mark.parametrize("key", ["linearclassifier__C", "estimator__C"])
def test_loo_search_of_a_pipeline(key, cancer):
    X, y = cancer
    grid = [0.01, 0.1, 1.0, 10.0]
    pipe = df.make_pipeline(StandardScaler(), df.LinearClassifier(loss="logistic"))
    a = LOOSearchCV(pipe, {key: grid}).fit(X, y)
    b = LOOSearchCV(df.LinearClassifier(loss="logistic"), {"C": grid}).fit(_scaled(X), y)
    np.testing.assert_array_equal(
        a.cv_results_["mean_test_score"], b.cv_results_["mean_test_score"]
    )
    np.testing.assert_array_equal(
        a.cv_results_["test_score_upper"], b.cv_results_["test_score_upper"]
    )
    assert a.best_params_ == {key: b.best_params_["C"]} and a.best_score_ == b.best_score_
    assert list(a.cv_results_["param_" + key]) == grid
    best = a.best_estimator_
    assert isinstance(best, df.UpdatablePipeline) and best[-1].C == b.best_params_["C"]
    np.testing.assert_array_equal(best[0].mean_, StandardScaler().fit(X).mean_)
    np.testing.assert_array_equal(best.decision_function(X), b.decision_function(_scaled(X)))
    assert a.n_features_in_ == 30
    assert np.array_equal(a.predict(X), best.predict(X))
    # usable as scikit-learn's: the same parameters set on the pipeline give the same model
    if key != "estimator__C":
        again = clone(pipe).set_params(**a.best_params_).fit(X, y)
        assert _rel(again.decision_function(X), best.decision_function(X)) <= 1e-8
    best.remove([0, 1])  # the best pipeline keeps updating
    assert best.n_samples_ == X.shape[0] - 2


def test_loo_search_kfold_on_a_pipeline(cancer):
    X, y = cancer
    cv = StratifiedKFold(5, shuffle=True, random_state=0)
    pipe = df.make_pipeline(MinMaxScaler(), df.KernelClassifier(gamma=0.5))
    a = LOOSearchCV(pipe, {"kernelclassifier__C": [0.1, 1.0]}, cv=cv).fit(X, y)
    Xs = MinMaxScaler().fit_transform(X)
    b = LOOSearchCV(df.KernelClassifier(gamma=0.5), {"C": [0.1, 1.0]}, cv=cv).fit(Xs, y)
    np.testing.assert_array_equal(
        a.cv_results_["mean_test_score"], b.cv_results_["mean_test_score"]
    )


@pytest.mark.parametrize(
    "grid, match",
    [
        ({"standardscaler__with_mean": [True, False]}, "standardscaler__with_mean"),
        ({"C": [1.0]}, "'C'"),
        ({"nosuchstep__C": [1.0]}, "nosuchstep__C"),
        ({"estimator__C": [1.0], "linearclassifier__C": [2.0]}, "given twice"),
    ],
)
def test_loo_search_of_a_pipeline_refuses_other_parameters(grid, match, cancer):
    X, y = cancer
    pipe = df.make_pipeline(StandardScaler(), df.LinearClassifier())
    with pytest.raises(ValueError, match=match):
        LOOSearchCV(pipe, grid).fit(X, y)


def test_a_step_named_estimator_is_not_the_alias(cancer):
    X, y = cancer
    pipe = df.UpdatablePipeline([("estimator", StandardScaler()), ("model", df.LinearClassifier())])
    with pytest.raises(ValueError, match="estimator__C"):
        LOOSearchCV(pipe, {"estimator__C": [1.0]}).fit(X, y)
    assert LOOSearchCV(pipe, {"model__C": [1.0]}).fit(X, y).best_params_ == {"model__C": 1.0}


@pytest.mark.parametrize("strategy", ["copy", "revert"])
def test_treecv_of_a_pipeline(strategy, cancer):
    X, y = cancer
    pipe = df.make_pipeline(StandardScaler(), df.LinearClassifier())
    a = treecv(pipe, X, y, cv=10, strategy=strategy)
    b = treecv(df.LinearClassifier(), _scaled(X), y, cv=10, strategy=strategy)
    np.testing.assert_array_equal(a.fold_scores, b.fold_scores)
    assert np.array_equal(a.y_pred, b.y_pred) and a.score >= 0.95


def test_pipeline_forwards_sample_weights():
    from sklearn.datasets import load_iris

    X, y = load_iris(return_X_y=True)
    w = np.random.default_rng(3).uniform(0.5, 2.0, len(y))
    pipe = df.make_pipeline(StandardScaler(), df.LinearClassifier(loss="logistic"))
    pipe.fit(X[:120], y[:120], linearclassifier__sample_weight=w[:120])
    pipe.add(X[120:], y[120:], sample_weight=w[120:])
    pipe.reweight([0, 5], [4.0, 0.0])
    pipe.update(remove_ids=[7], reweight_ids=[8], reweight_weight=[2.0])
    ww = w.copy()
    ww[[0, 5, 8]] = [4.0, 0.0, 2.0]
    keep = np.setdiff1d(np.arange(150), [7])
    scaler = pipe[0]
    fresh = df.LinearClassifier(loss="logistic").fit(
        scaler.transform(X[keep]), y[keep], sample_weight=ww[keep]
    )
    np.testing.assert_allclose(
        pipe.decision_function(X), fresh.decision_function(scaler.transform(X)), atol=1e-6
    )
    np.testing.assert_array_equal(pipe[-1].sample_weight_, ww[keep])
