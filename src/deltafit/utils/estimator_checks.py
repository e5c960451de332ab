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
rows and current labels with ``relabel(ids, y, X=rows, y_old=labels)``.  A model with a data-dependent feature map fits it once, in
``fit``; its updates, and therefore the refits it is compared with, reuse that fitted map
(``feature_map_``).

Default data: scikit-learn's bundled breast cancer data (classifiers) and diabetes data
(regressors), standardised; 300 shuffled rows, of which 150 are fitted, 90 are a pool of
samples to add and 60 are only evaluated.
"""

from __future__ import annotations

import functools
import inspect
import os
import re
import struct
import tempfile
import textwrap
import types

import numpy as np
from sklearn.base import clone, is_classifier

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
# tolerances
# ---------------------------------------------------------------------------------------------
# Every comparison is relative to the scale of the reference values:
#     max |a − b| / max(1, max |b|) ≤ tol.
# Per loss (the ``loss`` parameter), the tolerances of deltafit's own exact-update tests
# (tests/test_exact_updates.py, tests/test_hinge.py): the closed form (squared loss) is exact to
# rounding, 1e-8; logistic and squared-hinge models re-solve with Newton to ``tol`` (1e-10 of
# the initial gradient norm by default), 1e-7; the hinge's dual box QP is exact to rounding in
# its decision values, 1e-8, but its dual variables are determined only up to the conditioning
# of the support vectors' kernel matrix, hence the looser ``DUAL_COEF_TOLERANCE``.  On the
# bundled data the largest errors of deltafit's estimators are below 1/50 of these.
EQUALITY_TOLERANCE = {
    "squared": 1e-8,
    "logistic": 1e-7,
    "squared_hinge": 1e-7,
    "hinge": 1e-8,
}
# Estimators without a ``loss`` parameter, or with a loss not listed above.
DEFAULT_TOLERANCE = 1e-6
# ``dual_coef_`` of hinge models (the SVM's dual variables ``y_i α_i``, α_i ∈ [0, C]).
DUAL_COEF_TOLERANCE = 1e-6
# A loaded model and the original after the same updates (only rounding may differ: the loaded
# model's storage is compacted, so sums may run in another order).
ROUNDTRIP_TOLERANCE = 1e-10

_MAX_ROWS = 300  # rows of the data a check uses (after shuffling)


# ---------------------------------------------------------------------------------------------
# data
# ---------------------------------------------------------------------------------------------
@functools.lru_cache(maxsize=2)
def _bundled(classifier):
    """scikit-learn's breast cancer (classifiers) or diabetes (regressors) data, standardised;
    read-only arrays (they are cached)."""
    from sklearn.datasets import load_breast_cancer, load_diabetes
    from sklearn.preprocessing import StandardScaler

    if classifier:
        X, y = load_breast_cancer(return_X_y=True)
    else:
        X, y = load_diabetes(return_X_y=True)
        y = (y - y.mean()) / y.std()
    X = StandardScaler().fit_transform(X)
    X.setflags(write=False)
    y.setflags(write=False)
    return X, y


class _Data:
    """The rows a check works on: ``fit`` (fitted first), ``pool`` (to add), ``test``
    (evaluated only), and ``eval`` = all of them, where decision values are compared."""

    def __init__(self, estimator, X, y, random_state):
        if (X is None) != (y is None):
            raise ValueError("give both X and y, or neither (the bundled data is used)")
        if X is None:
            X, y = _bundled(bool(is_classifier(estimator)))
        X = np.asarray(X, dtype=np.float64)
        y = np.asarray(y)
        if X.ndim != 2 or y.ndim != 1 or X.shape[0] != y.shape[0]:
            raise ValueError(f"X must be 2-D and y 1-D with as many rows, got shapes {X.shape} "
                             f"and {y.shape}")
        if X.shape[1] < 2:
            raise ValueError("the checks need at least two features (one is dropped to make "
                             "an input of the wrong width)")
        self.rng = np.random.RandomState(random_state)
        order = self.rng.permutation(X.shape[0])[:_MAX_ROWS]
        X, y = X[order], y[order]
        n = X.shape[0]
        n_pool, n_test = max(15, 3 * n // 10), max(5, n // 5)
        n_fit = n - n_pool - n_test
        if n_fit < 20:
            raise ValueError(f"the checks need at least 60 samples, got {n}")
        self.X_fit, self.y_fit = X[:n_fit], y[:n_fit]
        self.X_pool, self.y_pool = X[n_fit:n_fit + n_pool], y[n_fit:n_fit + n_pool]
        self.X_eval = X  # fitted rows, pool and test rows

    def choice(self, ids, k):
        """``k`` distinct ids drawn from ``ids``, in increasing order."""
        return np.sort(self.rng.choice(np.asarray(ids), size=k, replace=False))


class _Tracker:
    """The training data a model should represent, by id: the brute-force twin of the model."""

    def __init__(self, X, y):
        self.rows = {i: (X[i], y[i]) for i in range(X.shape[0])}

    def copy(self):
        twin = _Tracker(np.zeros((0, 0)), np.zeros(0))
        twin.rows = dict(self.rows)
        return twin

    def ids(self):
        return np.array(sorted(self.rows), dtype=np.int64)

    def X_of(self, ids):
        return np.array([self.rows[int(i)][0] for i in ids])

    def y_of(self, ids):
        return np.array([self.rows[int(i)][1] for i in ids])

    def add(self, ids, X, y):
        for i, x, t in zip(np.asarray(ids).tolist(), X, y):
            self.rows[int(i)] = (x, t)

    def remove(self, ids):
        for i in np.asarray(ids).tolist():
            del self.rows[int(i)]

    def relabel(self, ids, y):
        for i, t in zip(np.asarray(ids).tolist(), y):
            self.rows[int(i)] = (self.rows[int(i)][0], t)

    def data(self):
        ids = self.ids()
        return self.X_of(ids), self.y_of(ids), ids


# ---------------------------------------------------------------------------------------------
# the public interface, as the checks use it
# ---------------------------------------------------------------------------------------------
def _keeps_data(est):
    """False for models that store no training rows (``keep_data=False``)."""
    return bool(est.get_params(deep=False).get("keep_data", True))


def _loss(est):
    return est.get_params(deep=False).get("loss")


def _tolerance(est):
    return EQUALITY_TOLERANCE.get(_loss(est), DEFAULT_TOLERANCE)


def _scores(est, X):
    """Decision values: ``decision_function`` for classifiers, ``predict`` for regressors."""
    if is_classifier(est) and hasattr(est, "decision_function"):
        return np.asarray(est.decision_function(X), dtype=np.float64)
    return np.asarray(est.predict(X), dtype=np.float64)


def _attr(est, name):
    """A fitted attribute, or None where the model has none (e.g. ``dual_coef_`` of a
    non-hinge linear model)."""
    try:
        return getattr(est, name)
    except AttributeError:
        return None


def _refit(est, X, y):
    """A fresh fit on (X, y) with the parameters ``est`` was fitted with: a parameter ``p``
    resolved from the training data at fit (``gamma="scale"``, an unfitted ``feature_map``)
    is read back from the fitted attribute ``p_`` (``gamma_``, ``feature_map_``)."""
    ref = clone(est)
    resolved = {}
    for name in ref.get_params(deep=False):
        value = _attr(est, name + "_")
        if value is not None:
            resolved[name] = value  # a fitted feature map is used as it is
    return ref.set_params(**resolved).fit(X, y)


def _fail(check, msg):
    raise AssertionError(f"{check}: {msg}")


def _rel_err(a, b):
    """``max |a − b| / max(1, max |b|)``; inf for different shapes, NaN propagates."""
    a = np.asarray(a, dtype=np.float64)
    b = np.asarray(b, dtype=np.float64)
    if a.shape != b.shape:
        return np.inf
    if a.size == 0:
        return 0.0
    return float(np.max(np.abs(a - b)) / max(1.0, float(np.max(np.abs(b)))))


def _assert_close(check, actual, desired, tol, what):
    err = _rel_err(actual, desired)
    if not err <= tol:
        shapes = "" if np.shape(actual) == np.shape(desired) else \
            f" (shapes {np.shape(actual)} and {np.shape(desired)})"
        _fail(check, f"{what}: max|Δ| / max(1, max|reference|) = {err:.3g} > {tol:.0e}{shapes}")


def _assert_same_model(check, est, ref, X_eval, tol, context, dual_tol=None):
    """``est`` and ``ref`` agree in decision values, coef_, intercept_ and dual_coef_."""
    _assert_close(check, _scores(est, X_eval), _scores(ref, X_eval), tol,
                  f"after {context}, the decision values differ from the reference")
    for name in ("coef_", "intercept_", "dual_coef_"):
        a, b = _attr(est, name), _attr(ref, name)
        if a is None and b is None:
            continue
        if (a is None) != (b is None):
            _fail(check, f"after {context}, {name} exists on only one of the model and the "
                         "reference")
        t = tol if name != "dual_coef_" else (dual_tol or tol)
        _assert_close(check, a, b, t, f"after {context}, {name} differs from the reference")


def _samples(k):
    """``"one sample"`` or ``"a batch of k samples"``, for the messages."""
    return "one sample" if k == 1 else f"a batch of {k} samples"


class _Subject:
    """The model under test in one check, with its brute-force twin.

    Every change goes through the model's public interface and the same change is made on the
    twin (a :class:`_Tracker` of the data the model should represent); an answer of the model
    that breaks the contract fails the check, by name.  Models with ``keep_data=False`` are
    given the rows of the samples they forget or relabel (from the twin).
    """

    def __init__(self, check, est, data, tracker=None):
        self.check, self.est, self.data = check, est, data
        self.tracker = _Tracker(data.X_fit, data.y_fit) if tracker is None else tracker
        self.keeps_data = _keeps_data(est)

    @classmethod
    def fitted(cls, check, estimator, X, y, random_state):
        """A clone of ``estimator`` fitted on the check's data (:class:`_Data`)."""
        data = _Data(estimator, X, y, random_state)
        return cls(check, clone(estimator).fit(data.X_fit, data.y_fit), data)

    def twin(self, est):
        """Another model ``est`` that holds the same data, with a copy of the tracker."""
        return _Subject(self.check, est, self.data, self.tracker.copy())

    def fail(self, msg):
        _fail(self.check, msg)

    def choice(self, k, exclude=()):
        """``k`` distinct ids of the tracked samples, not in ``exclude``, in increasing order."""
        return self.data.choice(np.setdiff1d(self.tracker.ids(), exclude), k)

    def new_labels(self, ids):
        """Flipped labels (classifiers) or shifted targets (regressors) for ``ids``."""
        old = self.tracker.y_of(ids)
        if is_classifier(self.est):
            c0, c1 = self.est.classes_
            return np.where(old == c1, c0, c1)
        return old.astype(np.float64) + 1.0

    # the calls, by id or, for a model that stores no rows, by value --------------------------
    def remove_from(self, target, ids):
        """``target.remove`` of the tracked samples ``ids`` (the model or a sensitivity)."""
        if self.keeps_data:
            return target.remove(ids)
        return target.remove(X=self.tracker.X_of(ids), y=self.tracker.y_of(ids))

    def relabel_in(self, target, ids, y):
        """``target.relabel`` of the tracked samples ``ids`` to ``y``."""
        if self.keeps_data:
            return target.relabel(ids, y)
        return target.relabel(ids, y, X=self.tracker.X_of(ids), y_old=self.tracker.y_of(ids))

    # changes of the model and its twin --------------------------------------------------------
    def add(self, X, y):
        ids = np.asarray(self.est.add(X, y))
        if ids.shape != (X.shape[0],) or ids.dtype.kind not in "iu":
            self.fail(f"add(X, y) with {X.shape[0]} rows must return {X.shape[0]} integer ids, "
                      f"got {ids!r}")
        self.tracker.add(ids, X, y)
        return ids

    def add_pool(self, start, stop):
        """Add the rows ``start:stop`` of the pool of samples not fitted."""
        return self.add(self.data.X_pool[start:stop], self.data.y_pool[start:stop])

    def remove(self, ids):
        ids = np.asarray(ids, dtype=np.int64)
        removed = self.remove_from(self.est, ids)
        if isinstance(removed, np.ndarray) and sorted(removed.tolist()) != sorted(ids.tolist()):
            self.fail(f"remove returned the ids {sorted(removed.tolist())}, expected "
                      f"{sorted(ids.tolist())}")
        self.tracker.remove(ids)

    def relabel(self, ids):
        """Give ``ids`` new labels (:meth:`new_labels`)."""
        y = self.new_labels(ids)
        self.relabel_in(self.est, ids, y)
        self.tracker.relabel(ids, y)

    # assertions -----------------------------------------------------------------------------
    def assert_ids(self, context):
        """``sample_ids_`` lists the tracked ids, in increasing order."""
        got, expected = np.asarray(self.est.sample_ids_), self.tracker.ids()
        if not np.array_equal(got, expected):
            extra = np.setdiff1d(got, expected)[:10].tolist()
            missing = np.setdiff1d(expected, got)[:10].tolist()
            self.fail(f"after {context}, sample_ids_ holds {got.size} ids, expected "
                      f"{len(expected)} (unexpected: {extra}, missing: {missing}, or not in "
                      "increasing order)")

    def assert_equals_refit(self, context):
        """The model represents the tracked data and equals a fresh fit on it."""
        self.assert_ids(context)
        X, y, _ = self.tracker.data()
        ref = _refit(self.est, X, y)
        dual_tol = DUAL_COEF_TOLERANCE if _loss(self.est) == "hinge" else None
        _assert_same_model(self.check, self.est, ref, self.data.X_eval, _tolerance(self.est),
                           f"{context} (compared with a refit)", dual_tol)


class _Change:
    """A mixed change of ``model``'s data: remove ``n_remove`` tracked samples, relabel
    ``n_relabel`` others and add the first ``n_add`` rows of the pool."""

    def __init__(self, model, n_add, n_remove, n_relabel):
        self.model = model
        self.remove_ids = model.choice(n_remove)
        self.relabel_ids = model.choice(n_relabel, exclude=self.remove_ids)
        self.y_relabel = model.new_labels(self.relabel_ids)
        self.X_add, self.y_add = model.data.X_pool[:n_add], model.data.y_pool[:n_add]

    def update_kwargs(self):
        """The arguments of ``update`` that make the change in one transaction."""
        kw = dict(X_add=self.X_add, y_add=self.y_add, relabel_ids=self.relabel_ids,
                  y_relabel=self.y_relabel)
        if self.model.keeps_data:
            kw["remove_ids"] = self.remove_ids
        else:
            rows = self.model.tracker
            kw.update(X_remove=rows.X_of(self.remove_ids), y_remove=rows.y_of(self.remove_ids),
                      X_relabel=rows.X_of(self.relabel_ids),
                      y_relabel_old=rows.y_of(self.relabel_ids))
        return kw

    def track(self, new_ids):
        """Make the change on the twin; the added samples got the ids ``new_ids``."""
        tracker = self.model.tracker
        tracker.remove(self.remove_ids)
        tracker.relabel(self.relabel_ids, self.y_relabel)
        tracker.add(new_ids, self.X_add, self.y_add)



# ---------------------------------------------------------------------------------------------
# the bitwise snapshot of a model
# ---------------------------------------------------------------------------------------------
_OPAQUE = (type, types.ModuleType, types.FunctionType, types.BuiltinFunctionType,
           types.MethodType, functools.partial)


def _snapshot(est):
    """Every array and scalar reachable from ``est.__dict__`` (objects' ``__dict__`` and
    ``__slots__``, lists, tuples, dicts, sets), by path, as bytes."""
    out, root = {}, type(est).__name__
    seen = {id(est): root}
    for key, value in vars(est).items():
        if key != _NOT_STATE:
            _walk(value, f"{root}.{key}", out, seen)
    return out


# an estimator's thread guard (its lock and write counter; nested estimators have one too): not
# model state
_NOT_STATE = "_update_lock"


def _walk(value, path, out, seen):
    if isinstance(value, np.ndarray):
        if value.dtype.hasobject:
            out[path] = ("object array", value.shape)
            for k, item in enumerate(value.ravel(order="C").tolist()):
                _walk(item, f"{path}.flat[{k}]", out, seen)
        else:
            out[path] = ("array", value.dtype.str, value.shape, value.tobytes(order="C"))
        return
    if isinstance(value, np.generic):
        out[path] = ("scalar", value.dtype.str, value.tobytes())
        return
    if isinstance(value, float):  # by bytes: NaN equals NaN, -0.0 differs from 0.0
        out[path] = ("float", struct.pack("<d", value))
        return
    if value is None or isinstance(value, (bool, int, complex, str, bytes)):
        out[path] = (type(value).__name__, repr(value))
        return
    if isinstance(value, _OPAQUE):
        out[path] = ("callable", getattr(value, "__qualname__", type(value).__qualname__))
        return
    key = id(value)
    if key in seen:  # shared or cyclic reference: compare where it points
        out[path] = ("reference", seen[key])
        return
    seen[key] = path
    if isinstance(value, (list, tuple)):
        out[path] = (type(value).__name__, len(value))
        for k, item in enumerate(value):
            _walk(item, f"{path}[{k}]", out, seen)
    elif isinstance(value, dict):
        out[path] = ("dict", [repr(k) for k in value])
        for k, item in value.items():
            _walk(item, f"{path}[{k!r}]", out, seen)
    elif isinstance(value, (set, frozenset)):
        out[path] = (type(value).__name__, sorted(repr(v) for v in value))
    else:
        out[path] = ("object", type(value).__module__, type(value).__qualname__)
        if hasattr(value, "__dict__"):
            for k, item in vars(value).items():
                if k != _NOT_STATE:
                    _walk(item, f"{path}.{k}", out, seen)
        for cls in type(value).__mro__:
            slots = cls.__dict__.get("__slots__", ())
            for k in (slots,) if isinstance(slots, str) else slots:
                if k not in ("__dict__", "__weakref__") and hasattr(value, k):
                    _walk(getattr(value, k), f"{path}.{k}", out, seen)


def _snapshot_diff(before, after, limit=5):
    """Paths whose value changed, appeared or disappeared (at most ``limit``)."""
    changed = [p for p in before if p not in after or before[p] != after[p]]
    changed += [p for p in after if p not in before]
    return changed[:limit]


# ---------------------------------------------------------------------------------------------
# the documentation every check shares
# ---------------------------------------------------------------------------------------------
_PARAMETERS_DOC = """\
Parameters
----------
estimator : estimator instance
    Unfitted; it is cloned, not changed.
X : array-like of shape (n_samples, n_features), optional
    Data to use instead of the bundled data set (scikit-learn's breast cancer data for
    classifiers, diabetes for regressors, standardised); at least 60 rows, of which 300
    shuffled ones are used.
y : array-like of shape (n_samples,), optional
    The targets of ``X``: give both or neither.
random_state : int, default=0
    Seeds the shuffle of the data and the choice of the samples changed.

Raises
------
AssertionError
"""

_BAD_DATA_DOC = """\
ValueError
    If only one of ``X`` and ``y`` is given, or the data has fewer than 60 rows or fewer
    than two features.
"""

_LATER_SECTIONS = ("See Also", "Notes", "References", "Examples")


def _check_doc(raises, *, bad_data=True):
    """Decorator: complete a check's docstring with the sections all checks share.

    Every check has the signature ``check(estimator, *, X=None, y=None, random_state=0)``.  The
    decorated function's own docstring says what it checks; appended are the numpydoc
    ``Parameters`` of that signature and a ``Raises`` section: ``AssertionError`` with the text
    ``raises`` and, with ``bad_data``, the ``ValueError`` for unusable data.
    """
    shared = (_PARAMETERS_DOC + textwrap.indent(inspect.cleandoc(raises), "    ") + "\n"
              + (_BAD_DATA_DOC if bad_data else ""))

    def document(check):
        if check.__doc__ is None:  # python -OO
            return check
        lines = inspect.cleandoc(check.__doc__).splitlines()
        # numpydoc's order: the shared sections go before Notes, Examples and the like
        at = next((k for k, line in enumerate(lines[:-1]) if line in _LATER_SECTIONS
                   and set(lines[k + 1]) == {"-"}), len(lines))
        check.__doc__ = "\n".join(lines[:at]).rstrip() + "\n\n" + shared + (
            "\n" + "\n".join(lines[at:]) + "\n" if at < len(lines) else "")
        return check
    return document


# ---------------------------------------------------------------------------------------------
# the checks
# ---------------------------------------------------------------------------------------------
@_check_doc("""If ``add`` does not return one integer id per row, ``sample_ids_`` does not list
            the samples the model should hold, or the model differs from a refit by more than
            the tolerance of its loss (:data:`EQUALITY_TOLERANCE`).""")
def check_add_equals_refit(estimator, *, X=None, y=None, random_state=0):
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
def check_remove_equals_refit(estimator, *, X=None, y=None, random_state=0):
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
def check_relabel_equals_refit(estimator, *, X=None, y=None, random_state=0):
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
def check_mixed_update_equals_refit(estimator, *, X=None, y=None, random_state=0):
    """One ``update()`` that adds six, removes five and relabels four samples gives the model
    of a refit.

    Examples
    --------
    >>> import deltafit
    >>> from deltafit.utils.estimator_checks import check_mixed_update_equals_refit
    >>> check_mixed_update_equals_refit(deltafit.LinearRegressor())   # silent when the contract holds
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
def check_partial_fit_equals_fit(estimator, *, X=None, y=None, random_state=0):
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
            ("remove and relabel the same id in one update",
             lambda: est.update(remove_ids=[i], relabel_ids=[i], y_relabel=label)),
            ("add valid samples and remove an unknown id in one update",
             lambda: est.update(X_add=Xa, y_add=ya, remove_ids=[unknown])),
        ]
    else:
        Xall, yall = tracker.X_of(ids), tracker.y_of(ids)
        cases += [
            ("remove a sample that is not in the training data (by value)",
             lambda: est.remove(X=Xa[:1], y=ya[:1])),
            ("remove an unknown id (with its row)", lambda: est.remove([unknown], X=xi)),
            ("remove a non-integer id (with its row)", lambda: est.remove([i + 0.5], X=xi)),
            ("remove a sample removed before (by value)",
             lambda: est.remove(X=gone[1], y=gone[2])),
            ("remove an id whose row does not match", lambda: est.remove([i], X=xj)),
            ("remove a repeated sample (by value)",
             lambda: est.remove(X=np.vstack([xi, xi]), y=np.concatenate([yi, yi]))),
            ("remove every sample (by value)", lambda: est.remove(X=Xall, y=yall)),
            ("relabel an unknown id", lambda: est.relabel([unknown], label, X=xi)),
            ("relabel a repeated id",
             lambda: est.relabel([i, i], np.repeat(label, 2), X=np.vstack([xi, xi]))),
            ("relabel without the sample's row", lambda: est.relabel([i], label)),
            ("remove and relabel the same sample in one update",
             lambda: est.update(X_remove=xi, y_remove=yi, relabel_ids=[i], y_relabel=label,
                                X_relabel=xi)),
            ("add valid samples and remove an unknown sample in one update",
             lambda: est.update(X_add=Xa, y_add=ya, X_remove=Xa[:1], y_remove=ya[:1])),
        ]
    if is_classifier(est):
        c0, c1 = est.classes_
        third = _third_class(est.classes_)
        neg = ids[tracker.y_of(ids) == c0]
        if third is not None:
            cases += [
                ("add a sample of a third class", lambda: est.add(Xa[:1], [third])),
                ("relabel a sample to a third class",
                 lambda: model.relabel_in(est, [i], [third])),
            ]
            if hasattr(est, "partial_fit"):
                cases.append(("partial_fit with classes= other than classes_",
                              lambda: est.partial_fit(Xa, ya, classes=[c0, third])))
        cases += [
            ("remove every sample of one class" + ("" if keep else " (by value)"),
             lambda: model.remove_from(est, neg)),
            ("relabel every sample of one class to the other",
             lambda: model.relabel_in(est, neg, np.full(neg.size, c1))),
        ]
    else:
        cases += [
            ("add a NaN target", lambda: est.add(Xa[:1], [np.nan])),
            ("relabel to an infinite target", lambda: model.relabel_in(est, [i], [np.inf])),
        ]
    return cases


@_check_doc("""Naming the first invalid update that did not raise ValueError or that changed
            the model, with the paths of the changed attributes.""")
def check_failed_update_leaves_model_unchanged(estimator, *, X=None, y=None, random_state=0):
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
    >>> check_failed_update_leaves_model_unchanged(deltafit.LinearRegressor())   # silent when the contract holds
    """
    model = _Subject.fitted("check_failed_update_leaves_model_unchanged", estimator, X, y,
                            random_state)
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
        if _scores(est, X_eval).tobytes() != scores or now.dtype != labels.dtype or \
                now.tobytes() != labels.tobytes():
            model.fail(f"{desc}: raised ValueError but changed the model's predictions")
    model.add_pool(3, 5)
    model.assert_equals_refit("the failed updates and one valid addition")


@_check_doc("With the largest violation of a bound.")
def check_sensitivity_ball_contains_refit(estimator, *, X=None, y=None, random_state=0):
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
    >>> check_sensitivity_ball_contains_refit(deltafit.LinearRegressor())   # silent when the contract holds
    """
    from deltafit import sensitivity

    if _loss(estimator) == "hinge":
        return
    model = _Subject.fitted("check_sensitivity_ball_contains_refit", estimator, X, y,
                            random_state)
    est, X_eval = model.est, model.data.X_eval
    try:
        s = sensitivity(est)
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
            model.fail(f"{what}: bounds of shape {low.shape} for values of shape "
                       f"{value.shape}")
        slack = tol * max(1.0, float(np.max(np.abs(value), initial=0.0)))
        below, above = low - value, value - high
        worst = float(np.max(np.maximum(below, above), initial=-np.inf))
        if not worst <= slack:
            k = int(np.argmax(np.maximum(below, above)))
            model.fail(f"{what} leave the certified bounds: value {value.ravel()[k]:.10g} "
                       f"outside [{low.ravel()[k]:.10g}, {high.ravel()[k]:.10g}] by "
                       f"{worst:.3g} > {slack:.1e}")

    inside(_scores(ref, X_eval), lo, hi, "the refit's decision values")
    inside(_scores(est, X_eval), lo, hi, "the updated model's decision values")
    if coef_lo is not None:
        inside(ref.coef_, coef_lo, coef_hi, "the refit's coef_")
        inside(ref.intercept_, icpt_lo, icpt_hi, "the refit's intercept_")


@_check_doc("Naming the first difference.")
def check_save_load_roundtrip(estimator, *, X=None, y=None, random_state=0):
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
    for what, a, b in [("predict", loaded.predict(X_eval), est.predict(X_eval)),
                       ("the decision values", _scores(loaded, X_eval), _scores(est, X_eval))] + \
            [(n, _attr(loaded, n), _attr(est, n)) for n in ("coef_", "intercept_", "dual_coef_")]:
        a, b = np.asarray(a), np.asarray(b)
        if a.dtype != b.dtype or a.shape != b.shape or a.tobytes() != b.tobytes():
            err = _rel_err(a, b) if a.dtype.kind in "iuf" and b.dtype.kind in "iuf" else None
            model.fail(f"{what} of the loaded model differ from the saved model's"
                       + (f" (max|Δ| / max(1, max|saved|) = {err:.3g})" if err is not None
                          else ""))
    # the same updates on both, each with its own copy of the tracked data
    original, reloaded = model.twin(est), model.twin(loaded)
    new_ids = []
    for m in (original, reloaded):
        new = m.add_pool(2, 6)
        m.remove([int(m.tracker.ids()[0]), int(new[1])])
        new_ids.append(new)
    if not np.array_equal(*new_ids):
        model.fail(f"add on the loaded model gave the ids {new_ids[1].tolist()}, on the "
                   f"original {new_ids[0].tolist()}")
    reloaded.assert_ids("the same updates on the loaded model")
    _assert_same_model(model.check, loaded, est, X_eval, ROUNDTRIP_TOLERANCE,
                       "the same updates on the loaded and the original model")
    original.assert_equals_refit("updating the original after saving")
    reloaded.assert_equals_refit("updating the loaded model")


@_check_doc("Naming the step at which an id went wrong.")
def check_sample_ids_stable(estimator, *, X=None, y=None, random_state=0):
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
        model.fail(f"after fit on {n} samples, sample_ids_ must be 0..{n - 1}, got "
                   f"{ids[:10].tolist()}... ({ids.size} ids, dtype {ids.dtype})")
    issued = {"max": n - 1, "all": set(range(n))}

    def fresh(new, context):
        new = np.asarray(new)
        if new.size and (np.any(np.diff(new) <= 0) or new.min() <= issued["max"] or
                         issued["all"] & set(new.tolist())):
            model.fail(f"{context}: the new ids {new.tolist()} are not fresh and increasing "
                       f"(largest id given before: {issued['max']})")
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


def yield_updatable_checks(estimator):
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


def parametrize_with_updatable_checks(estimators, *, expected_failed_checks=None):
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
            marks = ()
            if name in (expected or {}):
                marks = (pytest.mark.xfail(strict=True, reason=expected[name]),)
            params.append(pytest.param(est, check, marks=marks,
                                       id=f"{_check_id(est)}-{name}"))
    return pytest.mark.parametrize("estimator, check", params)


@_check_doc("""At the first check that fails, naming it (any other exception a check raises is
            turned into an AssertionError naming the check, with the original as its cause).""",
            bad_data=False)
def check_updatable(estimator, *, X=None, y=None, random_state=0):
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
