"""Conformance checks for updatable estimators: deltafit's update contract, as a test suite.

scikit-learn's :func:`~sklearn.utils.estimator_checks.parametrize_with_checks` checks that an
estimator follows scikit-learn's conventions; the checks here check what deltafit adds on top
of them, for deltafit's own estimators and for any estimator that offers the same interface:

* ``fit`` gives the samples the ids ``0..n-1`` (``sample_ids_``); ``add(X, y)`` returns fresh,
  increasing ids; ``remove(ids)``, ``relabel(ids, y)`` and ``update(...)`` change the training
  data; ids are never reused;
* after any such change the model **equals a refit**: a fresh ``clone(estimator).fit`` on the
  resulting data (rows in the order of ``sample_ids_``; every parameter ``p`` that ``fit``
  resolved from the data, such as ``gamma="scale"``, set to the fitted attribute ``p_``) gives
  the same decision values (``decision_function`` of a classifier, ``predict`` of a
  regressor) and the same ``coef_``, ``intercept_`` and ``dual_coef_``, within the tolerances
  below;
* ``partial_fit`` in batches equals ``fit``;
* a failed update (bad input, an update that would leave no sample or one class) raises
  ``ValueError`` and leaves the model **bitwise** unchanged;
* ``save`` / :func:`deltafit.load` round-trips bitwise, and the loaded model keeps updating;
* the certified ball of :func:`deltafit.sensitivity` after a hypothetical change contains the
  refit (differentiable losses only).

Usage::

    from deltafit.utils.estimator_checks import check_updatable
    check_updatable(MyEstimator())          # AssertionError naming the failed check

    from deltafit.utils.estimator_checks import parametrize_with_updatable_checks

    @parametrize_with_updatable_checks([MyEstimator(), MyEstimator(C=10.0)])
    def test_updatable(estimator, check):
        check(estimator)

Every check, and :func:`check_updatable`, has the signature
``check(estimator, *, X=None, y=None, random_state=0)``: the estimator is cloned, not changed;
``X`` and ``y`` replace the default data below; ``random_state`` seeds the shuffle and the
samples changed.  A check raises AssertionError, naming itself, when the estimator breaks the
contract, and returns None otherwise (also when it does not apply, e.g.
:func:`check_save_load_roundtrip` for an estimator without ``save``).

The checks use the public interface only.  Models with ``keep_data=False`` (they store no
training rows nor labels) remove samples by value, ``remove(X=rows, y=labels)``, and get the
rows and current labels with ``relabel(ids, y, X=rows, y_old=labels)``.  A model with a
data-dependent feature map fits it once, in ``fit``; its updates, and therefore the refits it
is compared with, reuse that fitted map (``feature_map_``).

Default data: scikit-learn's bundled breast cancer data (classifiers) and diabetes data
(regressors), standardised; 300 shuffled rows, of which 150 are fitted, 90 are a pool of
samples to add and 60 are only evaluated.
"""

from __future__ import annotations

import functools
import os
import re
import tempfile
import types
from collections.abc import Callable, Iterator, Sequence
from typing import Any

import numpy as np
from numpy.typing import ArrayLike
from sklearn.base import BaseEstimator, clone, is_classifier

from deltafit.utils._checks_support import (
    DEFAULT_TOLERANCE,
    DUAL_COEF_TOLERANCE,
    EQUALITY_TOLERANCE,
    ROUNDTRIP_TOLERANCE,
    _assert_same_model,
    _attr,
    _Change,
    _check_doc,
    _Data,
    _loss,
    _refit,
    _rel_err,
    _samples,
    _scores,
    _snapshot,
    _snapshot_diff,
    _Subject,
    _tolerance,
)

__all__ = [
    "EQUALITY_TOLERANCE",
    "DEFAULT_TOLERANCE",
    "DUAL_COEF_TOLERANCE",
    "ROUNDTRIP_TOLERANCE",
    "check_updatable",
    "yield_updatable_checks",
    "parametrize_with_updatable_checks",
    "check_add_equals_refit",
    "check_remove_equals_refit",
    "check_relabel_equals_refit",
    "check_mixed_update_equals_refit",
    "check_partial_fit_equals_fit",
    "check_failed_update_leaves_model_unchanged",
    "check_sensitivity_ball_contains_refit",
    "check_save_load_roundtrip",
    "check_sample_ids_stable",
]


# ---------------------------------------------------------------------------------------------
# the checks
# ---------------------------------------------------------------------------------------------
@_check_doc("""If ``add`` does not return one integer id per row, ``sample_ids_`` does not list
            the samples the model should hold, or the model differs from a refit by more than
            the tolerance of its loss (:data:`EQUALITY_TOLERANCE`).""")
def check_add_equals_refit(
    estimator: BaseEstimator,
    *,
    X: ArrayLike | None = None,
    y: ArrayLike | None = None,
    random_state: int = 0,
) -> None:
    """Adding samples (one, a batch of ten, then a large batch) gives the model of a refit.

    The large batch is the rest of the pool of samples not yet fitted (79 rows with the
    bundled data): larger than the rank of a typical low-rank update.

    Examples
    --------
    >>> import deltafit
    >>> from deltafit.utils.estimator_checks import check_add_equals_refit
    >>> check_add_equals_refit(deltafit.LinearRegressor())   # silent when the contract holds
    """
    model = _Subject.fitted("check_add_equals_refit", estimator, X, y, random_state)
    for start, stop in ((0, 1), (1, 11), (11, model.data.X_pool.shape[0])):
        model.add_pool(start, stop)
        model.assert_equals_refit(f"adding {_samples(stop - start)}")


@_check_doc("""If ``remove`` returns other ids than those removed, the removed ids stay in
            ``sample_ids_``, or the model differs from a refit.""")
def check_remove_equals_refit(
    estimator: BaseEstimator,
    *,
    X: ArrayLike | None = None,
    y: ArrayLike | None = None,
    random_state: int = 0,
) -> None:
    """Removing samples (one, a batch of ten, then a batch of up to 70 — half the remaining
    samples at most) gives the model of a refit.

    Models with ``keep_data=False`` remove the samples by value, ``remove(X=rows, y=labels)``.

    Examples
    --------
    >>> import deltafit
    >>> from deltafit.utils.estimator_checks import check_remove_equals_refit
    >>> check_remove_equals_refit(deltafit.LinearRegressor())   # silent when the contract holds
    """
    model = _Subject.fitted("check_remove_equals_refit", estimator, X, y, random_state)
    for k in (1, 10, None):
        k = k or min(70, model.tracker.ids().size // 2)
        model.remove(model.choice(k))
        model.assert_equals_refit(f"removing {_samples(k)}")


@_check_doc("If the ids change or the model differs from a refit on the relabelled data.")
def check_relabel_equals_refit(
    estimator: BaseEstimator,
    *,
    X: ArrayLike | None = None,
    y: ArrayLike | None = None,
    random_state: int = 0,
) -> None:
    """Relabelling samples (one, then a batch of eight) gives the model of a refit.

    Classifiers get the other class, regressors their target plus one.

    Examples
    --------
    >>> import deltafit
    >>> from deltafit.utils.estimator_checks import check_relabel_equals_refit
    >>> check_relabel_equals_refit(deltafit.LinearRegressor())   # silent when the contract holds
    """
    model = _Subject.fitted("check_relabel_equals_refit", estimator, X, y, random_state)
    for k in (1, 8):
        model.relabel(model.choice(k))
        model.assert_equals_refit(f"relabelling {_samples(k)}")


@_check_doc("""If ``update`` does not return the ids of the added samples, ``sample_ids_`` is
            wrong, or the model differs from a refit.""")
def check_mixed_update_equals_refit(
    estimator: BaseEstimator,
    *,
    X: ArrayLike | None = None,
    y: ArrayLike | None = None,
    random_state: int = 0,
) -> None:
    """One ``update()`` that adds six, removes five and relabels four samples gives the model
    of a refit.

    Examples
    --------
    >>> import deltafit
    >>> from deltafit.utils.estimator_checks import check_mixed_update_equals_refit
    >>> check_mixed_update_equals_refit(deltafit.LinearRegressor())  # silent if the contract holds
    """
    model = _Subject.fitted("check_mixed_update_equals_refit", estimator, X, y, random_state)
    change = _Change(model, n_add=6, n_remove=5, n_relabel=4)
    new_ids = np.asarray(model.est.update(**change.update_kwargs()))
    if new_ids.shape != (6,) or new_ids.dtype.kind not in "iu":
        model.fail(f"update(X_add=6 rows, ...) must return the 6 new ids, got {new_ids!r}")
    change.track(new_ids)
    model.assert_equals_refit("one update adding 6, removing 5 and relabelling 4 samples")


@_check_doc("""If the ids are not ``0..n-1`` in the order of the batches or the model differs
            from ``fit``.""")
def check_partial_fit_equals_fit(
    estimator: BaseEstimator,
    *,
    X: ArrayLike | None = None,
    y: ArrayLike | None = None,
    random_state: int = 0,
) -> None:
    """``partial_fit`` in three batches (the first with ``classes=`` for classifiers) equals
    ``fit`` on all of them; the ids are ``0..n-1``.  Skipped without ``partial_fit``.

    Examples
    --------
    >>> import deltafit
    >>> from deltafit.utils.estimator_checks import check_partial_fit_equals_fit
    >>> check_partial_fit_equals_fit(deltafit.LinearRegressor())   # silent when the contract holds
    """
    if not hasattr(estimator, "partial_fit"):
        return
    data = _Data(estimator, X, y, random_state)
    est = clone(estimator)
    for k, idx in enumerate(np.array_split(np.arange(data.X_fit.shape[0]), 3)):
        if k == 0 and is_classifier(est):
            est.partial_fit(data.X_fit[idx], data.y_fit[idx], classes=np.unique(data.y_fit))
        else:
            est.partial_fit(data.X_fit[idx], data.y_fit[idx])
    model = _Subject("check_partial_fit_equals_fit", est, data)  # the twin holds X_fit
    model.assert_equals_refit("partial_fit in three batches")


def _third_class(classes):
    """A label that is not among ``classes`` (None where none can be made)."""
    classes = np.asarray(classes)
    if classes.dtype.kind in "iuf":
        return classes.max() + 1
    if classes.dtype.kind in "USO":
        return "not a class of this model"
    return None


def _bad_updates(model, gone):
    """(description, call) pairs of updates of ``model.est`` that must fail with ValueError."""
    est, tracker, data, keep = model.est, model.tracker, model.data, model.keeps_data
    ids = tracker.ids()
    i = int(model.choice(1)[0])
    j = int(model.choice(1, exclude=[i])[0])
    xi, yi = tracker.X_of([i]), tracker.y_of([i])
    xj = tracker.X_of([j])
    unknown = int(max(ids.max(), gone[0]) + 1000)
    Xa, ya = data.X_pool[-2:], data.y_pool[-2:]  # valid rows, never added by this check
    label = model.new_labels([i])
    nan_row = Xa.copy()
    nan_row[0, 0] = np.nan
    inf_row = Xa.copy()
    inf_row[1, -1] = np.inf
    cases = [
        ("add with a NaN value in X", lambda: est.add(nan_row, ya)),
        ("add with an infinite value in X", lambda: est.add(inf_row, ya)),
        ("add with one feature too few", lambda: est.add(Xa[:, :-1], ya)),
        ("add with fewer labels than rows", lambda: est.add(Xa, ya[:1])),
        ("add without labels", lambda: est.update(X_add=Xa)),
    ]
    if keep:
        cases += [
            ("remove an unknown id", lambda: est.remove([unknown])),
            ("remove a non-integer id", lambda: est.remove([i + 0.5])),
            ("remove an id removed before", lambda: est.remove([gone[0]])),
            ("remove a repeated id", lambda: est.remove([i, i])),
            ("remove every sample", lambda: est.remove(ids)),
            ("relabel an unknown id", lambda: est.relabel([unknown], label)),
            ("relabel a repeated id", lambda: est.relabel([i, i], np.repeat(label, 2))),
            ("relabel with fewer labels than ids", lambda: est.relabel([i, j], label)),
            (
                "remove and relabel the same id in one update",
                lambda: est.update(remove_ids=[i], relabel_ids=[i], y_relabel=label),
            ),
            (
                "add valid samples and remove an unknown id in one update",
                lambda: est.update(X_add=Xa, y_add=ya, remove_ids=[unknown]),
            ),
        ]
    else:
        Xall, yall = tracker.X_of(ids), tracker.y_of(ids)
        cases += [
            (
                "remove a sample that is not in the training data (by value)",
                lambda: est.remove(X=Xa[:1], y=ya[:1]),
            ),
            ("remove an unknown id (with its row)", lambda: est.remove([unknown], X=xi)),
            ("remove a non-integer id (with its row)", lambda: est.remove([i + 0.5], X=xi)),
            ("remove a sample removed before (by value)", lambda: est.remove(X=gone[1], y=gone[2])),
            ("remove an id whose row does not match", lambda: est.remove([i], X=xj)),
            (
                "remove a repeated sample (by value)",
                lambda: est.remove(X=np.vstack([xi, xi]), y=np.concatenate([yi, yi])),
            ),
            ("remove every sample (by value)", lambda: est.remove(X=Xall, y=yall)),
            ("relabel an unknown id", lambda: est.relabel([unknown], label, X=xi)),
            (
                "relabel a repeated id",
                lambda: est.relabel([i, i], np.repeat(label, 2), X=np.vstack([xi, xi])),
            ),
            ("relabel without the sample's row", lambda: est.relabel([i], label)),
            (
                "remove and relabel the same sample in one update",
                lambda: est.update(
                    X_remove=xi, y_remove=yi, relabel_ids=[i], y_relabel=label, X_relabel=xi
                ),
            ),
            (
                "add valid samples and remove an unknown sample in one update",
                lambda: est.update(X_add=Xa, y_add=ya, X_remove=Xa[:1], y_remove=ya[:1]),
            ),
        ]
    if is_classifier(est):
        c0, c1 = est.classes_
        third = _third_class(est.classes_)
        neg = ids[tracker.y_of(ids) == c0]
        if third is not None:
            cases += [
                ("add a sample of a third class", lambda: est.add(Xa[:1], [third])),
                ("relabel a sample to a third class", lambda: model.relabel_in(est, [i], [third])),
            ]
            if hasattr(est, "partial_fit"):
                cases.append(
                    (
                        "partial_fit with classes= other than classes_",
                        lambda: est.partial_fit(Xa, ya, classes=[c0, third]),
                    )
                )
        cases += [
            (
                "remove every sample of one class" + ("" if keep else " (by value)"),
                lambda: model.remove_from(est, neg),
            ),
            (
                "relabel every sample of one class to the other",
                lambda: model.relabel_in(est, neg, np.full(neg.size, c1)),
            ),
        ]
    else:
        cases += [
            ("add a NaN target", lambda: est.add(Xa[:1], [np.nan])),
            ("relabel to an infinite target", lambda: model.relabel_in(est, [i], [np.inf])),
        ]
    return cases


@_check_doc("""Naming the first invalid update that did not raise ValueError or that changed
            the model, with the paths of the changed attributes.""")
def check_failed_update_leaves_model_unchanged(
    estimator: BaseEstimator,
    *,
    X: ArrayLike | None = None,
    y: ArrayLike | None = None,
    random_state: int = 0,
) -> None:
    """Every invalid update raises ``ValueError`` and leaves the model bitwise unchanged.

    The invalid updates: a NaN or infinite value in X, the wrong number of features, fewer
    labels than rows, no labels, an unknown, non-integer, repeated or already removed id,
    removing every sample, the same id removed and relabelled in one ``update``, a valid
    addition together with an invalid removal in one ``update`` (the transaction must not
    half-happen); for classifiers a third class (``add``, ``relabel``, ``partial_fit``'s
    ``classes=``) and updates that would leave a single class; for regressors a NaN or
    infinite target; for ``keep_data=False`` models rows that do not match the ids, samples
    not in the training data and relabels without the rows.

    "Unchanged" is checked on a deep snapshot of every array and scalar reachable from the
    estimator's ``__dict__`` (objects' attributes, lists, tuples, dicts; arrays by dtype,
    shape and bytes) and on the bytes of ``predict`` and the decision values.  The model
    is then updated once more and must still equal a refit.

    Examples
    --------
    >>> import deltafit
    >>> from deltafit.utils.estimator_checks import check_failed_update_leaves_model_unchanged
    >>> check_failed_update_leaves_model_unchanged(deltafit.LinearRegressor())  # silent: it holds
    """
    model = _Subject.fitted(
        "check_failed_update_leaves_model_unchanged", estimator, X, y, random_state
    )
    est, X_eval = model.est, model.data.X_eval
    # updates first, so that the state is not the one fit made (pending corrections, id gaps)
    model.add_pool(0, 3)
    victim = model.choice(1)
    gone = (int(victim[0]), model.tracker.X_of(victim), model.tracker.y_of(victim))
    model.remove(victim)
    before = _snapshot(est)
    scores = _scores(est, X_eval).tobytes()
    labels = np.asarray(est.predict(X_eval))
    for desc, call in _bad_updates(model, gone):
        try:
            call()
        except ValueError:
            pass
        except Exception as exc:  # noqa: BLE001 - any other kind is a failure of the check
            model.fail(f"{desc}: raised {type(exc).__name__} instead of ValueError ({exc})")
        else:
            model.fail(f"{desc}: no ValueError was raised")
        changed = _snapshot_diff(before, _snapshot(est))
        if changed:
            model.fail(f"{desc}: raised ValueError but changed the model: {changed}")
        now = np.asarray(est.predict(X_eval))
        if (
            _scores(est, X_eval).tobytes() != scores
            or now.dtype != labels.dtype
            or now.tobytes() != labels.tobytes()
        ):
            model.fail(f"{desc}: raised ValueError but changed the model's predictions")
    model.add_pool(3, 5)
    model.assert_equals_refit("the failed updates and one valid addition")


@_check_doc("With the largest violation of a bound.")
def check_sensitivity_ball_contains_refit(
    estimator: BaseEstimator,
    *,
    X: ArrayLike | None = None,
    y: ArrayLike | None = None,
    random_state: int = 0,
) -> None:
    """The certified bounds of :func:`deltafit.sensitivity` contain the refit.

    After a hypothetical change (remove five samples, add five, relabel three), the bounds of
    the :class:`deltafit.sensitivity.Sensitivity` object must contain the decision values of
    a refit on the changed data and of the model updated by the same change, and, for linear
    models, the refit's ``coef_`` (``coef_bounds``) and ``intercept_``
    (``intercept_bounds``), each within the tolerance of the loss times
    ``max(1, max |value|)``.  The ball is the one of Okumura et al., "Quick sensitivity
    analysis for incremental data modification and its application to leave-one-out CV in
    linear classification problems" (Thm 1), which needs a differentiable loss: the check
    returns without testing for ``loss="hinge"`` and for estimators that
    ``deltafit.sensitivity`` refuses with ValueError.

    Examples
    --------
    >>> import deltafit
    >>> from deltafit.utils.estimator_checks import check_sensitivity_ball_contains_refit
    >>> check_sensitivity_ball_contains_refit(deltafit.LinearRegressor())  # silent: it holds
    """
    from deltafit import sensitivity

    if _loss(estimator) == "hinge":
        return
    model = _Subject.fitted("check_sensitivity_ball_contains_refit", estimator, X, y, random_state)
    est, X_eval = model.est, model.data.X_eval
    try:
        s = sensitivity(est)  # type: ignore[operator]  # a callable module (its __init__)
    except ValueError:
        return  # not covered by the bounds
    change = _Change(model, n_add=5, n_remove=5, n_relabel=3)
    model.remove_from(s, change.remove_ids)
    hyp_ids = s.add(change.X_add, change.y_add)
    model.relabel_in(s, change.relabel_ids, change.y_relabel)
    lo, hi = s.decision_bounds(X_eval)
    try:
        coef_lo, coef_hi = s.coef_bounds()
        icpt_lo, icpt_hi = s.intercept_bounds()
    except ValueError:  # kernel models: no explicit coefficients
        coef_lo = None
    kw = change.update_kwargs()
    change.track(hyp_ids)
    Xn, yn, _ = model.tracker.data()
    ref = _refit(est, Xn, yn)
    est.update(**kw)
    tol = _tolerance(est)

    def inside(value, low, high, what):
        value, low, high = (np.asarray(a, dtype=np.float64) for a in (value, low, high))
        if value.shape != low.shape:
            model.fail(f"{what}: bounds of shape {low.shape} for values of shape {value.shape}")
        slack = tol * max(1.0, float(np.max(np.abs(value), initial=0.0)))
        below, above = low - value, value - high
        worst = float(np.max(np.maximum(below, above), initial=-np.inf))
        if not worst <= slack:
            k = int(np.argmax(np.maximum(below, above)))
            model.fail(
                f"{what} leave the certified bounds: value {value.ravel()[k]:.10g} "
                f"outside [{low.ravel()[k]:.10g}, {high.ravel()[k]:.10g}] by "
                f"{worst:.3g} > {slack:.1e}"
            )

    inside(_scores(ref, X_eval), lo, hi, "the refit's decision values")
    inside(_scores(est, X_eval), lo, hi, "the updated model's decision values")
    if coef_lo is not None:
        inside(ref.coef_, coef_lo, coef_hi, "the refit's coef_")
        inside(ref.intercept_, icpt_lo, icpt_hi, "the refit's intercept_")


@_check_doc("Naming the first difference.")
def check_save_load_roundtrip(
    estimator: BaseEstimator,
    *,
    X: ArrayLike | None = None,
    y: ArrayLike | None = None,
    random_state: int = 0,
) -> None:
    """``save`` then load gives the same model, which keeps updating exactly.

    The model is updated (so that its ids have gaps), saved to a temporary file and loaded
    with the class's own ``load`` where it has one, else :func:`deltafit.load`.  The loaded
    model must give bitwise the same ``predict``, decision values, ``sample_ids_``,
    ``coef_``, ``intercept_`` and ``dual_coef_``; after the same addition and removal on both,
    the two must agree to :data:`ROUNDTRIP_TOLERANCE`, give the same new ids and equal a
    refit.  Skipped for estimators without ``save``.

    Examples
    --------
    >>> import deltafit
    >>> from deltafit.utils.estimator_checks import check_save_load_roundtrip
    >>> check_save_load_roundtrip(deltafit.LinearRegressor())   # silent when the contract holds
    """
    from deltafit.models import UpdatableMixin
    from deltafit.persistence import load, save

    if not hasattr(estimator, "save"):
        return
    model = _Subject.fitted("check_save_load_roundtrip", estimator, X, y, random_state)
    est, X_eval = model.est, model.data.X_eval
    model.add_pool(0, 2)
    model.remove(model.choice(2))
    loader = getattr(type(est), "load", None)
    loader = loader if callable(loader) else load
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "model.npz")
        if getattr(type(est), "save", None) is UpdatableMixin.save:  # deprecated: the function
            save(est, path)
        else:
            est.save(path)
        loaded = loader(path)
    if not np.array_equal(np.asarray(loaded.sample_ids_), np.asarray(est.sample_ids_)):
        model.fail("the loaded model's sample_ids_ differ from the saved model's")
    for what, a, b in [
        ("predict", loaded.predict(X_eval), est.predict(X_eval)),
        ("the decision values", _scores(loaded, X_eval), _scores(est, X_eval)),
    ] + [(n, _attr(loaded, n), _attr(est, n)) for n in ("coef_", "intercept_", "dual_coef_")]:
        a, b = np.asarray(a), np.asarray(b)
        if a.dtype != b.dtype or a.shape != b.shape or a.tobytes() != b.tobytes():
            err = _rel_err(a, b) if a.dtype.kind in "iuf" and b.dtype.kind in "iuf" else None
            model.fail(
                f"{what} of the loaded model differ from the saved model's"
                + (f" (max|Δ| / max(1, max|saved|) = {err:.3g})" if err is not None else "")
            )
    # the same updates on both, each with its own copy of the tracked data
    original, reloaded = model.twin(est), model.twin(loaded)
    new_ids = []
    for m in (original, reloaded):
        new = m.add_pool(2, 6)
        m.remove([int(m.tracker.ids()[0]), int(new[1])])
        new_ids.append(new)
    if not np.array_equal(*new_ids):
        model.fail(
            f"add on the loaded model gave the ids {new_ids[1].tolist()}, on the "
            f"original {new_ids[0].tolist()}"
        )
    reloaded.assert_ids("the same updates on the loaded model")
    _assert_same_model(
        model.check,
        loaded,
        est,
        X_eval,
        ROUNDTRIP_TOLERANCE,
        "the same updates on the loaded and the original model",
    )
    original.assert_equals_refit("updating the original after saving")
    reloaded.assert_equals_refit("updating the loaded model")


@_check_doc("Naming the step at which an id went wrong.")
def check_sample_ids_stable(
    estimator: BaseEstimator,
    *,
    X: ArrayLike | None = None,
    y: ArrayLike | None = None,
    random_state: int = 0,
) -> None:
    """Ids are ``0..n-1`` after ``fit``; added ids are fresh and increasing; removed ids
    disappear and are never reused; relabelling keeps the ids; ``sample_ids_`` is increasing.

    Examples
    --------
    >>> import deltafit
    >>> from deltafit.utils.estimator_checks import check_sample_ids_stable
    >>> check_sample_ids_stable(deltafit.LinearRegressor())   # silent when the contract holds
    """
    model = _Subject.fitted("check_sample_ids_stable", estimator, X, y, random_state)
    est, data = model.est, model.data
    n = data.X_fit.shape[0]
    ids = np.asarray(est.sample_ids_)
    if ids.dtype.kind not in "iu" or not np.array_equal(ids, np.arange(n)):
        model.fail(
            f"after fit on {n} samples, sample_ids_ must be 0..{n - 1}, got "
            f"{ids[:10].tolist()}... ({ids.size} ids, dtype {ids.dtype})"
        )
    issued = {"max": n - 1, "all": set(range(n))}

    def fresh(new, context):
        new = np.asarray(new)
        if new.size and (
            np.any(np.diff(new) <= 0)
            or new.min() <= issued["max"]
            or issued["all"] & set(new.tolist())
        ):
            model.fail(
                f"{context}: the new ids {new.tolist()} are not fresh and increasing "
                f"(largest id given before: {issued['max']})"
            )
        issued["max"] = max(issued["max"], int(new.max(initial=-1)))
        issued["all"] |= set(new.tolist())

    fresh(model.add_pool(0, 3), "add")
    model.assert_ids("adding 3 samples")
    tracked = model.tracker.ids()
    gone = np.unique(np.concatenate([[0], tracked[-2:-1], model.choice(3)]))
    model.remove(gone)
    model.assert_ids(f"removing the ids {gone.tolist()}")
    model.relabel(model.choice(4))
    model.assert_ids("relabelling 4 samples")
    for cycle in range(5):  # removed slots get reused: their ids must not be
        new = model.add_pool(3 + cycle, 4 + cycle)
        fresh(new, f"add after removals (cycle {cycle})")
        model.remove(new)
        model.assert_ids(f"removing the id just added (cycle {cycle})")
    fresh(model.add_pool(8, 10), "add after removals")
    model.assert_ids("the last addition")
    try:
        if model.keeps_data:
            est.remove([0])
        else:
            est.remove([0], X=data.X_fit[:1])
    except ValueError:
        pass
    else:
        model.fail("removing the id 0 a second time did not raise ValueError")
    model.assert_equals_refit("adds, removals and relabels")


# ---------------------------------------------------------------------------------------------
# running the checks
# ---------------------------------------------------------------------------------------------
_CHECKS = (
    check_sample_ids_stable,
    check_add_equals_refit,
    check_remove_equals_refit,
    check_relabel_equals_refit,
    check_mixed_update_equals_refit,
    check_partial_fit_equals_fit,
    check_failed_update_leaves_model_unchanged,
    check_save_load_roundtrip,
    check_sensitivity_ball_contains_refit,
)


def yield_updatable_checks(
    estimator: BaseEstimator,
) -> Iterator[tuple[BaseEstimator, Callable[..., None]]]:
    """The checks of the update contract for ``estimator``, like scikit-learn's
    ``estimator_checks_generator``.

    Parameters
    ----------
    estimator : estimator instance
        Unfitted.

    Yields
    ------
    estimator : estimator instance
        The estimator given (each check clones it).
    check : callable
        ``check(estimator, *, X=None, y=None, random_state=0)``; raises AssertionError on
        failure.

    Examples
    --------
    >>> import deltafit
    >>> from deltafit.utils.estimator_checks import yield_updatable_checks
    >>> for estimator, check in yield_updatable_checks(deltafit.LinearRegressor()):
    ...     check(estimator)                    # each raises AssertionError on failure
    """
    for check in _CHECKS:
        yield estimator, check


def _check_id(obj):
    """pytest id: the estimator's repr without whitespace (changed parameters only, as in
    scikit-learn's ``parametrize_with_checks``), or the check's name."""
    if isinstance(obj, (types.FunctionType, functools.partial)):
        func = obj.func if isinstance(obj, functools.partial) else obj
        return func.__name__
    from sklearn import config_context

    with config_context(print_changed_only=True):
        return re.sub(r"\s", "", str(obj))


def parametrize_with_updatable_checks(
    estimators: Sequence[BaseEstimator],
    *,
    expected_failed_checks: Callable[[BaseEstimator], dict[str, str]] | None = None,
) -> Any:
    """A ``pytest.mark.parametrize`` decorator running every update check on every estimator.

    The test ids are ``ClassName(param=...)-check_name``, as with scikit-learn's
    :func:`~sklearn.utils.estimator_checks.parametrize_with_checks`.

    Parameters
    ----------
    estimators : list of estimator instances
        Unfitted.
    expected_failed_checks : callable or None, default=None
        ``expected_failed_checks(estimator)`` returns a dict ``{check_name: reason}``; those
        cases are marked ``pytest.mark.xfail(strict=True, reason=reason)``, so that they show
        up as known failures and a fix is noticed.

    Returns
    -------
    decorator : pytest.mark.parametrize
        Over ``"estimator, check"``.

    Examples
    --------
    >>> import deltafit
    >>> from deltafit.utils.estimator_checks import parametrize_with_updatable_checks
    >>> @parametrize_with_updatable_checks([deltafit.LinearRegressor()])
    ... def test_updatable(estimator, check):
    ...     check(estimator)
    """
    import pytest

    if any(isinstance(est, type) for est in estimators):
        raise TypeError("pass estimator instances, not classes")
    params = []
    for estimator in estimators:
        expected = expected_failed_checks(estimator) if callable(expected_failed_checks) else {}
        for est, check in yield_updatable_checks(estimator):
            name = _check_id(check)
            marks: tuple[Any, ...] = ()
            if name in (expected or {}):
                marks = (pytest.mark.xfail(strict=True, reason=expected[name]),)
            params.append(pytest.param(est, check, marks=marks, id=f"{_check_id(est)}-{name}"))
    return pytest.mark.parametrize("estimator, check", params)


@_check_doc(
    """At the first check that fails, naming it (any other exception a check raises is
            turned into an AssertionError naming the check, with the original as its cause).""",
    bad_data=False,
)
def check_updatable(
    estimator: BaseEstimator,
    *,
    X: ArrayLike | None = None,
    y: ArrayLike | None = None,
    random_state: int = 0,
) -> None:
    """Run every check of the update contract on ``estimator``.

    The checks are :func:`check_sample_ids_stable`, :func:`check_add_equals_refit`,
    :func:`check_remove_equals_refit`, :func:`check_relabel_equals_refit`,
    :func:`check_mixed_update_equals_refit`, :func:`check_partial_fit_equals_fit`,
    :func:`check_failed_update_leaves_model_unchanged`, :func:`check_save_load_roundtrip` and
    :func:`check_sensitivity_ball_contains_refit`; each is given ``X``, ``y`` and
    ``random_state``.

    Examples
    --------
    >>> import deltafit
    >>> from deltafit.utils.estimator_checks import check_updatable
    >>> check_updatable(deltafit.LinearClassifier(loss="logistic"))
    """
    for est, check in yield_updatable_checks(estimator):
        name = check.__name__
        try:
            check(est, X=X, y=y, random_state=random_state)
        except AssertionError as exc:
            msg = str(exc)
            raise AssertionError(msg if msg.startswith(name) else f"{name}: {msg}") from exc
        except Exception as exc:  # noqa: BLE001 - reported as the check's failure
            raise AssertionError(f"{name} raised {type(exc).__name__}: {exc}") from exc
