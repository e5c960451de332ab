"""deltafit's conformance suite (``deltafit.utils.estimator_checks``).

* every estimator configuration passes every update check;
* the suite can fail: deliberately broken estimators make the corresponding check raise
  AssertionError;
* ``parametrize_with_updatable_checks`` gives scikit-learn style ids and xfail marks.
"""

from __future__ import annotations

import copy

import numpy as np
import pytest
from sklearn.datasets import load_breast_cancer
from sklearn.kernel_approximation import Nystroem
from sklearn.preprocessing import StandardScaler

import deltafit
from deltafit import KernelClassifier, KernelRegressor, LinearClassifier, LinearRegressor
from deltafit.utils import estimator_checks as ec
from deltafit.utils.estimator_checks import (
    check_add_equals_refit,
    check_failed_update_leaves_model_unchanged,
    check_mixed_update_equals_refit,
    check_partial_fit_equals_fit,
    check_relabel_equals_refit,
    check_remove_equals_refit,
    check_sample_ids_stable,
    check_save_load_roundtrip,
    check_sensitivity_ball_contains_refit,
    check_updatable,
    parametrize_with_updatable_checks,
    yield_updatable_checks,
)

LOSSES = ["squared", "logistic", "squared_hinge", "hinge"]

UPDATABLE_ESTIMATORS = (
    [
        cls(loss=loss, fit_intercept=fi)
        for cls in (LinearClassifier, KernelClassifier)
        for loss in LOSSES
        for fi in (True, False)
    ]
    + [cls(fit_intercept=fi) for cls in (LinearRegressor, KernelRegressor) for fi in (True, False)]
    + [
        LinearRegressor(keep_data=False),
        LinearClassifier(loss="squared", keep_data=False),
        LinearClassifier(feature_map=Nystroem(n_components=30, random_state=0)),
        KernelClassifier(kernel="linear"),
        KernelClassifier(kernel="poly"),
    ]
)


@parametrize_with_updatable_checks(UPDATABLE_ESTIMATORS)
def test_updatable_estimator_checks(estimator, check):
    check(estimator)


# ---------------------------------------------------------------------------------------------
# the suite can fail: broken estimators
# ---------------------------------------------------------------------------------------------
class SilentRemove(LinearClassifier):
    """``remove`` returns the ids as if it had removed them, and does nothing."""

    def remove(self, ids=None, *, X=None, y=None):
        return np.asarray(ids, dtype=np.int64)


class SilentRelabel(LinearClassifier):
    """``relabel`` does nothing."""

    def relabel(self, ids, y, *, X=None):
        return self


class HalvesAddedTargets(LinearRegressor):
    """``add`` keeps the ids right but learns half of the targets."""

    def add(self, X, y):
        return super().add(X, 0.5 * np.asarray(y, dtype=float))


class IgnoresRelabelsInUpdate(KernelRegressor):
    """``update`` drops the relabels of a mixed transaction."""

    def update(self, *, relabel_ids=None, y_relabel=None, X_relabel=None, **kw):
        return super().update(**kw)


class PartialFitRefits(LinearClassifier):
    """``partial_fit`` with ``fit`` semantics: forgets the earlier batches."""

    def partial_fit(self, X, y, classes=None):
        return self.fit(X, y)


class RenumbersIds(LinearRegressor):
    """``sample_ids_`` renumbered 0..n-1 after every change (ids not stable)."""

    @property
    def sample_ids_(self):
        return np.arange(self.n_samples_)


class ForgivesUnknownIds(LinearRegressor):
    """``remove`` silently skips ids it does not know instead of raising ValueError."""

    def remove(self, ids=None, *, X=None, y=None):
        ids = np.asarray(ids)
        known = ids[np.isin(ids, self.sample_ids_)]
        return super().remove(known) if known.size else known


class MutatesBeforeRaising(LinearRegressor):
    """Every update first writes into a storage slot that no sample uses (predictions do not
    change), then validates: a failed update leaves the model changed."""

    def _update(self, *args, **kwargs):
        self._ledger.y[-1] += 1.0  # test code: a broken estimator may touch its internals
        return super()._update(*args, **kwargs)


class SavesAnotherC(LinearClassifier):
    """``save`` writes the model solved again with C halved: a consistent file (``deltafit.load``
    refuses a file whose solution does not solve its problem, such as one with the intercept
    zeroed), but of another model."""

    def save(self, path):
        m = copy.deepcopy(self)
        m.__class__ = LinearClassifier  # deltafit.save stores the four estimators by name
        led, st = m._ledger, m._state
        A = led.active_slots()
        st.opts.C = self.C / 2
        st.fit(led.X[A], led.y[A], led.capacity, st.beta)
        st.curv = st.point = None  # the optional arrays, consistent with the new solution
        deltafit.save(m, path)


BROKEN = [
    (SilentRemove(), check_remove_equals_refit, "sample_ids_"),
    (SilentRelabel(), check_relabel_equals_refit, "decision values"),
    (HalvesAddedTargets(), check_add_equals_refit, "decision values"),
    (IgnoresRelabelsInUpdate(), check_mixed_update_equals_refit, "decision values"),
    (PartialFitRefits(), check_partial_fit_equals_fit, "sample_ids_"),
    (RenumbersIds(), check_sample_ids_stable, "removing"),
    (
        ForgivesUnknownIds(),
        check_failed_update_leaves_model_unchanged,
        "remove an unknown id: no ValueError",
    ),
    (
        MutatesBeforeRaising(),
        check_failed_update_leaves_model_unchanged,
        r"raised ValueError but changed the model: \['MutatesBeforeRaising._ledger.y'\]",
    ),
    (SavesAnotherC(loss="logistic"), check_save_load_roundtrip, "of the loaded model differ"),
]


@pytest.mark.parametrize(
    "estimator, check, message",
    BROKEN,
    ids=[f"{type(e).__name__}-{c.__name__}" for e, c, _ in BROKEN],
)
def test_broken_estimator_fails_its_check(estimator, check, message):
    with pytest.raises(AssertionError, match=message) as info:
        check(estimator)
    assert str(info.value).startswith(check.__name__)


def test_check_updatable_names_the_failed_check():
    """The whole suite stops at the first check that fails, and names it."""
    with pytest.raises(AssertionError, match="^check_sample_ids_stable: "):
        check_updatable(SilentRemove())
    with pytest.raises(AssertionError, match="^check_save_load_roundtrip: "):
        check_updatable(SavesAnotherC(loss="logistic"))


def test_check_updatable_reports_other_exceptions_as_the_check():
    class AddRaisesTypeError(LinearRegressor):
        def add(self, X, y):
            raise TypeError("add is not implemented")

    with pytest.raises(AssertionError, match="^check_sample_ids_stable raised TypeError"):
        check_updatable(AddRaisesTypeError())


def test_sensitivity_bounds_too_tight_fail(monkeypatch):
    """Bounds that hold only for the ball's center do not contain the refit.  (The ball's:
    the curvature region of a small problem is the retrained model to rounding, so its own
    center would pass.)"""

    def center_only(self, X):
        lo, hi = self.sphere().decision_bounds(X)
        mid = 0.5 * (lo + hi)
        return mid, mid

    monkeypatch.setattr(deltafit.sensitivity.Sensitivity, "decision_bounds", center_only)
    with pytest.raises(AssertionError, match="leave the certified bounds"):
        check_sensitivity_ball_contains_refit(LinearClassifier(loss="logistic"))


def test_sensitivity_check_skips_what_the_bounds_refuse(monkeypatch):
    """Hinge models are skipped without asking; a model the bounds refuse with ValueError
    is skipped too."""
    calls = []

    def refuse(model, C_new=None):
        calls.append(model)
        raise ValueError("not covered")

    monkeypatch.setattr(deltafit, "sensitivity", refuse)
    check_sensitivity_ball_contains_refit(KernelClassifier(loss="hinge"))
    assert calls == []
    check_sensitivity_ball_contains_refit(LinearRegressor())
    assert len(calls) == 1


# ---------------------------------------------------------------------------------------------
# the runner
# ---------------------------------------------------------------------------------------------
def test_check_updatable_on_user_data_with_string_labels():
    X, y = load_breast_cancer(return_X_y=True)
    X = StandardScaler().fit_transform(X)
    labels = np.where(y == 1, "benign", "malignant")
    check_updatable(LinearClassifier(loss="logistic"), X=X, y=labels, random_state=3)
    check_updatable(LinearClassifier(keep_data=False), X=X[:80], y=labels[:80])


def test_check_updatable_leaves_the_estimator_unfitted():
    est = KernelRegressor(gamma=0.1)
    check_updatable(est)
    assert not hasattr(est, "sample_ids_")
    assert est.get_params()["gamma"] == 0.1


def test_yield_updatable_checks_lists_every_public_check():
    pairs = list(yield_updatable_checks(LinearRegressor()))
    names = {check.__name__ for _, check in pairs}
    assert names == {n for n in ec.__all__ if n.startswith("check_") and n != "check_updatable"}
    assert all(est.__class__ is LinearRegressor for est, _ in pairs)


def test_parametrize_ids_and_expected_failures():
    mark = parametrize_with_updatable_checks(
        [LinearClassifier(loss="hinge", C=2.0), KernelRegressor()],
        expected_failed_checks=lambda e: (
            {"check_add_equals_refit": "known"} if isinstance(e, KernelRegressor) else {}
        ),
    )
    assert mark.args[0] == "estimator, check"
    params = mark.args[1]
    ids = [p.id for p in params]
    assert "LinearClassifier(C=2.0,loss='hinge')-check_remove_equals_refit" in ids
    assert "KernelRegressor()-check_save_load_roundtrip" in ids
    assert len(ids) == len(set(ids)) == 2 * len(list(yield_updatable_checks(KernelRegressor())))
    xfails = {p.id: p.marks for p in params if p.marks}
    assert list(xfails) == ["KernelRegressor()-check_add_equals_refit"]
    (xf,) = xfails["KernelRegressor()-check_add_equals_refit"]
    assert xf.name == "xfail" and xf.kwargs == {"strict": True, "reason": "known"}
    with pytest.raises(TypeError):
        parametrize_with_updatable_checks([LinearClassifier])


def test_bad_data_is_refused():
    with pytest.raises(ValueError, match="at least 60"):
        check_add_equals_refit(LinearRegressor(), X=np.zeros((20, 3)), y=np.zeros(20))
    with pytest.raises(ValueError, match="both X and y"):
        check_add_equals_refit(LinearRegressor(), X=np.zeros((100, 3)))


# ---------------------------------------------------------------------------------------------
# the documentation: numpydoc sections of every public function
# ---------------------------------------------------------------------------------------------
@pytest.mark.parametrize("name", [n for n in ec.__all__ if callable(getattr(ec, n))])
def test_public_functions_have_complete_numpydoc(name):
    """The shared Parameters / Raises sections the checks get from a decorator parse as
    numpydoc, name every parameter of the signature, and keep numpydoc's section order."""
    import inspect

    docscrape = pytest.importorskip("sklearn.externals._numpydoc.docscrape")
    func = getattr(ec, name)
    if func.__doc__ is None:
        pytest.skip("docstrings stripped (python -OO)")
    doc = docscrape.FunctionDoc(func)
    assert doc["Summary"]
    documented = [n for p in doc["Parameters"] for n in p.name.split(", ")]
    assert documented == list(inspect.signature(func).parameters)
    assert all(p.desc for p in doc["Parameters"])
    if name.startswith("check_"):
        raised = {p.type: p.desc for p in doc["Raises"]}
        assert raised.get("AssertionError"), "every check says when it fails"
        assert ("ValueError" in raised) == (name != "check_updatable")
        text = func.__doc__
        assert text.index("Parameters\n---") < text.index("Raises\n---")
        if doc["Examples"]:
            assert text.index("Raises\n---") < text.index("Examples\n---")
