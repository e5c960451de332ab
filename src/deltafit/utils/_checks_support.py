"""The machinery of :mod:`deltafit.utils.estimator_checks`: the tolerances, the data a check
works on, the brute-force twin of the model under test, the comparisons, the snapshot of a
model's state (for the bitwise checks) and the docstring sections every check shares."""

from __future__ import annotations

import functools
import inspect
import struct
import textwrap
import types
from collections.abc import Callable
from typing import Any, NoReturn, TypeVar

import numpy as np
from numpy.typing import ArrayLike, NDArray
from sklearn.base import BaseEstimator, clone, is_classifier

_F = TypeVar("_F", bound=Callable[..., Any])

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
            raise ValueError(
                f"X must be 2-D and y 1-D with as many rows, got shapes {X.shape} and {y.shape}"
            )
        if X.shape[1] < 2:
            raise ValueError(
                "the checks need at least two features (one is dropped to make "
                "an input of the wrong width)"
            )
        self.rng = np.random.RandomState(random_state)
        order = self.rng.permutation(X.shape[0])[:_MAX_ROWS]
        X, y = X[order], y[order]
        n = X.shape[0]
        n_pool, n_test = max(15, 3 * n // 10), max(5, n // 5)
        n_fit = n - n_pool - n_test
        if n_fit < 20:
            raise ValueError(f"the checks need at least 60 samples, got {n}")
        self.X_fit, self.y_fit = X[:n_fit], y[:n_fit]
        self.X_pool, self.y_pool = X[n_fit : n_fit + n_pool], y[n_fit : n_fit + n_pool]
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
def _keeps_data(est: BaseEstimator) -> bool:
    """False for models that store no training rows (``keep_data=False``)."""
    return bool(est.get_params(deep=False).get("keep_data", True))


def _loss(est: BaseEstimator) -> Any:
    return est.get_params(deep=False).get("loss")


def _tolerance(est: BaseEstimator) -> float:
    return EQUALITY_TOLERANCE.get(_loss(est), DEFAULT_TOLERANCE)


def _scores(est: BaseEstimator, X: ArrayLike) -> NDArray[np.float64]:
    """Decision values: ``decision_function`` for classifiers, ``predict`` for regressors."""
    if is_classifier(est) and hasattr(est, "decision_function"):
        return np.asarray(est.decision_function(X), dtype=np.float64)
    return np.asarray(est.predict(X), dtype=np.float64)


def _attr(est: BaseEstimator, name: str) -> Any:
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


def _fail(check: str, msg: str) -> NoReturn:
    raise AssertionError(f"{check}: {msg}")


def _rel_err(a: ArrayLike, b: ArrayLike) -> float:
    """``max |a − b| / max(1, max |b|)``; inf for different shapes, NaN propagates."""
    a = np.asarray(a, dtype=np.float64)
    b = np.asarray(b, dtype=np.float64)
    if a.shape != b.shape:
        return np.inf
    if a.size == 0:
        return 0.0
    return float(np.max(np.abs(a - b)) / max(1.0, float(np.max(np.abs(b)))))


def _assert_close(check: str, actual: ArrayLike, desired: ArrayLike, tol: float, what: str) -> None:
    err = _rel_err(actual, desired)
    if not err <= tol:
        shapes = (
            ""
            if np.shape(actual) == np.shape(desired)
            else f" (shapes {np.shape(actual)} and {np.shape(desired)})"
        )
        _fail(check, f"{what}: max|Δ| / max(1, max|reference|) = {err:.3g} > {tol:.0e}{shapes}")


def _assert_same_model(check, est, ref, X_eval, tol, context, dual_tol=None):
    """``est`` and ``ref`` agree in decision values, coef_, intercept_ and dual_coef_."""
    _assert_close(
        check,
        _scores(est, X_eval),
        _scores(ref, X_eval),
        tol,
        f"after {context}, the decision values differ from the reference",
    )
    for name in ("coef_", "intercept_", "dual_coef_"):
        a, b = _attr(est, name), _attr(ref, name)
        if a is None and b is None:
            continue
        if (a is None) != (b is None):
            _fail(
                check, f"after {context}, {name} exists on only one of the model and the reference"
            )
        t = tol if name != "dual_coef_" else (dual_tol or tol)
        _assert_close(check, a, b, t, f"after {context}, {name} differs from the reference")


def _samples(k: int) -> str:
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
            self.fail(
                f"add(X, y) with {X.shape[0]} rows must return {X.shape[0]} integer ids, "
                f"got {ids!r}"
            )
        self.tracker.add(ids, X, y)
        return ids

    def add_pool(self, start, stop):
        """Add the rows ``start:stop`` of the pool of samples not fitted."""
        return self.add(self.data.X_pool[start:stop], self.data.y_pool[start:stop])

    def remove(self, ids):
        ids = np.asarray(ids, dtype=np.int64)
        removed = self.remove_from(self.est, ids)
        if isinstance(removed, np.ndarray) and sorted(removed.tolist()) != sorted(ids.tolist()):
            self.fail(
                f"remove returned the ids {sorted(removed.tolist())}, expected "
                f"{sorted(ids.tolist())}"
            )
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
            self.fail(
                f"after {context}, sample_ids_ holds {got.size} ids, expected "
                f"{len(expected)} (unexpected: {extra}, missing: {missing}, or not in "
                "increasing order)"
            )

    def assert_equals_refit(self, context):
        """The model represents the tracked data and equals a fresh fit on it."""
        self.assert_ids(context)
        X, y, _ = self.tracker.data()
        ref = _refit(self.est, X, y)
        dual_tol = DUAL_COEF_TOLERANCE if _loss(self.est) == "hinge" else None
        _assert_same_model(
            self.check,
            self.est,
            ref,
            self.data.X_eval,
            _tolerance(self.est),
            f"{context} (compared with a refit)",
            dual_tol,
        )


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
        kw = dict(
            X_add=self.X_add,
            y_add=self.y_add,
            relabel_ids=self.relabel_ids,
            y_relabel=self.y_relabel,
        )
        if self.model.keeps_data:
            kw["remove_ids"] = self.remove_ids
        else:
            rows = self.model.tracker
            kw.update(
                X_remove=rows.X_of(self.remove_ids),
                y_remove=rows.y_of(self.remove_ids),
                X_relabel=rows.X_of(self.relabel_ids),
                y_relabel_old=rows.y_of(self.relabel_ids),
            )
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
_OPAQUE = (
    type,
    types.ModuleType,
    types.FunctionType,
    types.BuiltinFunctionType,
    types.MethodType,
    functools.partial,
)


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


def _check_doc(raises: str, *, bad_data: bool = True) -> Callable[[_F], _F]:
    """Decorator: complete a check's docstring with the sections all checks share.

    Every check has the signature ``check(estimator, *, X=None, y=None, random_state=0)``.  The
    decorated function's own docstring says what it checks; appended are the numpydoc
    ``Parameters`` of that signature and a ``Raises`` section: ``AssertionError`` with the text
    ``raises`` and, with ``bad_data``, the ``ValueError`` for unusable data.
    """
    shared = (
        _PARAMETERS_DOC
        + textwrap.indent(inspect.cleandoc(raises), "    ")
        + "\n"
        + (_BAD_DATA_DOC if bad_data else "")
    )

    def document(check: _F) -> _F:
        if check.__doc__ is None:  # python -OO
            return check
        lines = inspect.cleandoc(check.__doc__).splitlines()
        # numpydoc's order: the shared sections go before Notes, Examples and the like
        at = next(
            (
                k
                for k, line in enumerate(lines[:-1])
                if line in _LATER_SECTIONS and set(lines[k + 1]) == {"-"}
            ),
            len(lines),
        )
        check.__doc__ = (
            "\n".join(lines[:at]).rstrip()
            + "\n\n"
            + shared
            + ("\n" + "\n".join(lines[at:]) + "\n" if at < len(lines) else "")
        )
        return check

    return document
