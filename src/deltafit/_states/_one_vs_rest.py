"""One-vs-rest: K binary problems over one ledger, one row store and (kernel models) one kernel
matrix.

A classifier with K ≥ 3 classes solves, for each class k, the binary canonical problem whose
targets are ``+1`` for the samples of class k and ``-1`` for the others (scikit-learn's
``OneVsRestClassifier``, with the same C for every class).  Its ledger stores each sample's class
*index* (0 … K−1) once; :class:`OneVsRestState` keeps one binary state per class and hands each
one the data change with the targets coded for its class (:class:`CodedLedger`).  The rows are
read from the one ledger; a kernel model's kernel matrix is evaluated once and shared by the K
states (:class:`SharedGram`), so an update evaluates each new kernel value once.

Each class's state is exactly the binary model of that class: its solution, certificate
(``result.grad_norm``) and updates are those of the binary problem, so every exactness
guarantee and every bound of a binary model holds class by class.
"""

from __future__ import annotations

import dataclasses

import numpy as np

from deltafit._states._protocol import ModelState
from deltafit.solvers import solve_label

__all__ = [
    "OneVsRestState",
    "SharedOneVsRestState",
    "one_vs_rest_class",
    "one_vs_rest_state",
    "column_arrays",
    "column_view",
    "CodedLedger",
    "class_codes",
    "one_hot_codes",
    "SharedGram",
]


def class_codes(t, k):
    """``+1`` where the class index ``t`` is ``k``, ``-1`` elsewhere (floats, shape of ``t``)."""
    t = np.asarray(t)
    return np.where(t == k, 1.0, -1.0)


def one_hot_codes(t, n_classes):
    """Every class's targets ±1 as columns: shape ``t.shape + (n_classes,)``."""
    t = np.asarray(t)
    return np.where(t[..., None] == np.arange(n_classes), 1.0, -1.0)


def one_vs_rest_class(base):
    """The K-class state over binary states ``base``: one multi-output state for the closed
    form (one factorisation serves every class), K states otherwise."""
    return SharedOneVsRestState if base.closed_form else OneVsRestState


def one_vs_rest_state(opts, max_rank, base, n_classes):
    """A new K-class state over binary states ``base`` (see :func:`one_vs_rest_class`)."""
    return one_vs_rest_class(base)(opts, max_rank, base=base, n_classes=n_classes)


class _CodedLabels:
    """``ledger.y`` as class ``k``'s targets ±1 (``k`` None: every class's, as columns of K),
    computed for the entries that are read."""

    __slots__ = ("_y", "_k", "_K")

    def __init__(self, y, k, K=None):
        self._y, self._k, self._K = y, k, K

    def __getitem__(self, index):
        if self._k is None:
            return one_hot_codes(self._y[index], self._K)
        return class_codes(self._y[index], self._k)

    @property
    def shape(self):
        return self._y.shape

    def __len__(self):
        return len(self._y)


class CodedLedger:
    """A read-only view of the ledger in which the labels are class ``k``'s targets ±1.

    Every other attribute is the ledger's own (rows, active flags, capacity), so a binary state
    that reads a :class:`~deltafit._states._protocol.DataChange`'s ledger sees its own problem and
    nothing is copied.
    """

    __slots__ = ("_ledger", "y")

    def __init__(self, ledger, k, n_classes=None):
        self._ledger = ledger
        self.y = _CodedLabels(ledger.y, k, n_classes)

    def __getattr__(self, name):
        if name == "_ledger":  # unpickling or copying: the slot is not set yet
            raise AttributeError(name)
        return getattr(self._ledger, name)


class SharedGram:
    """A kernel matrix cache shared with another state, which alone writes, grows and
    reindexes it.  The view reads it at its own capacity (the state that holds the view grows
    after the owner, within the same update), and its mutators only follow the capacity."""

    def __init__(self, owner):
        self._owner = owner
        self._capacity = owner.capacity

    @property
    def K(self):
        K, c = self._owner.K, self._capacity
        return K if K.shape[0] == c else K[:c, :c]

    @property
    def capacity(self):
        return self._capacity

    def sub(self, rows, cols=None):
        return self._owner.sub(rows, cols)

    def ensure_capacity(self, cap):
        """The owner has grown the matrix; read it at ``cap`` from now on."""
        self._capacity = max(self._capacity, int(cap))

    def write(self, new_slots, K_cross, K_new):
        """Done by the owner."""

    def take(self, keep, capacity):
        """Done by the owner; read it at ``capacity`` from now on."""
        self._capacity = int(capacity)


def _each_class(fn, classes):
    """``fn(k)`` for every class ``k``: in threads when joblib's active configuration asks
    for more than one job (the solves spend their time in BLAS, which releases the GIL),
    else one after the other.  The first exception is raised."""
    from joblib import Parallel, delayed, effective_n_jobs

    classes = list(classes)
    named = _for_class(fn)
    if effective_n_jobs() > 1 and len(classes) > 1:
        Parallel(prefer="threads")(delayed(named)(k) for k in classes)
    else:
        for k in classes:
            named(k)


def _for_class(fn):
    """``fn`` with the ConvergenceWarnings of its solves naming the class (thread-local)."""

    def named(k):
        with solve_label(_class_label(k)):
            return fn(k)

    return named


def _class_label(k):
    return f"one-vs-rest class classes_[{k}]"


def _coded(change, k, n_classes=None):
    """``change`` as seen by class ``k``'s binary state (``k`` None: by a K-output state):
    targets ±1 and the coded ledger."""

    def code(t):
        if t is None:
            return None
        return one_hot_codes(t, n_classes) if k is None else class_codes(t, k)

    return dataclasses.replace(
        change,
        ledger=CodedLedger(change.ledger, k, n_classes),
        t_add=code(change.t_add),
        relabel_t=code(change.relabel_t),
        remove_t=code(change.remove_t),
        relabel_t_old=code(change.relabel_t_old),
        reweight_t=code(change.reweight_t),
    )


@dataclasses.dataclass
class OneVsRestResult:
    """The solver diagnostics of the K binary solves, read like one solver result.

    Attributes
    ----------
    results : list of SolverResult
        Class by class.
    grad_norm : float
        The largest certified residual: it bounds ``‖β_k − β_k*‖`` for every class k.
    n_iter : int
        The most iterations any class needed in its last solve.
    """

    results: list

    @property
    def grad_norm(self):
        return max(float(r.grad_norm) for r in self.results)

    @property
    def n_iter(self):
        return max(int(r.n_iter) for r in self.results)


class OneVsRestState(ModelState):
    """K binary states, one per class, updated together by each data change.

    Parameters
    ----------
    opts : SolverOptions
        The fitted problem's settings (the same for every class).
    max_rank : int, default=64
    base : type
        The binary state class (one of the six of :mod:`~deltafit._states._protocol`).
    n_classes : int
        K ≥ 3.

    Attributes
    ----------
    states : list of ModelState
        Class k's binary state at position k.
    """

    kind = "one_vs_rest"

    def __init__(self, opts, max_rank=64, *, base, n_classes):
        super().__init__(opts, max_rank)
        self.base = base
        self.n_classes = int(n_classes)
        self.states = []

    # the per-class states all have the base's nature
    @property
    def kernel(self):
        return self.base.kernel

    @property
    def loss_names(self):
        return self.base.loss_names

    @property
    def warm_per_sample(self):
        return self.base.warm_per_sample

    def blank(self):
        """An unfitted state of the same kind and classes."""
        return type(self)(self.opts, self.max_rank, base=self.base, n_classes=self.n_classes)

    def _make(self):
        return self.base(self.opts, self.max_rank)

    def _share_gram(self):
        """Point every state but the first at the first one's kernel matrix."""
        first = self.states[0]
        if hasattr(first, "gram"):
            for st in self.states[1:]:
                st.gram = SharedGram(first.gram)

    # ---------------------------------------------------------------- solution
    @property
    def result(self):
        res = [st.result for st in self.states]
        return None if any(r is None for r in res) else OneVsRestResult(res)

    @property
    def beta(self):
        """β of every class, shape (p, K)."""
        return np.column_stack([st.beta for st in self.states])

    @property
    def alpha(self):
        """α of every class by slot, shape (capacity, K)."""
        return np.column_stack([st.alpha for st in self.states])

    @property
    def dual(self):
        """The hinge dual variables of every class by slot, shape (capacity, K)."""
        return np.column_stack([st.dual for st in self.states])

    def gradient_norm(self):
        """The largest certified residual of the K closed-form states."""
        return max(float(st.gradient_norm()) for st in self.states)

    def tracked_inverse(self):
        return self.states[0].tracked_inverse()

    def counters(self):
        return self.states[0].counters()

    def checkpoint(self):
        new = self.blank()
        new.states = [st.checkpoint() for st in self.states]
        new._share_gram()
        return new

    # --------------------------------------------------------------- lifecycle
    def fit(self, data, t, capacity, coef0=None, w=None):
        """Solve the K binary problems on Φ or K; ``t`` holds class indices, ``coef0`` the
        warm start of every class as columns (or None), ``w`` the samples' weights."""
        self.states = []
        share = getattr(self.base, "shared_rows", None)
        rows = None if share is None else share(data, w)
        if rows is not None:
            # the K solves share the rows prepared for their Hessians (and the first Hessian);
            # they are independent and run in threads when joblib is given more than one job
            states = [self._make() for _ in range(self.n_classes)]

            def fit_class(k):
                warm = None if coef0 is None else coef0[:, k]
                kw = {} if w is None else {"w": w}
                states[k].fit(data, class_codes(t, k), capacity, warm, rows=rows, **kw)

            _each_class(fit_class, range(self.n_classes))
            self.states = states
            return self
        for k in range(self.n_classes):
            st = self._make()
            warm = None if coef0 is None else coef0[:, k]
            kw = {} if w is None else {"w": w}
            with solve_label(_class_label(k)):
                self.states.append(st.fit(data, class_codes(t, k), capacity, warm, **kw))
            self._share_gram()  # one kernel matrix in memory at a time beyond the first
        return self

    def apply_change(self, change):
        """Apply ``change`` to every class (the first state writes the new kernel values);
        if any class refuses it, every class is put back as it was."""
        saved = [dict(vars(st)) for st in self.states]
        try:
            # the first class writes the new kernel values that the others read: it goes
            # first; the others are independent and run in threads when joblib is given
            # more than one job (``joblib.parallel_config(n_jobs=...)``)
            _for_class(lambda k: self.states[k].apply_change(_coded(change, k)))(0)
            _each_class(
                lambda k: self.states[k].apply_change(_coded(change, k)), range(1, self.n_classes)
            )
        except BaseException:
            for st, d in zip(self.states, saved):
                vars(st).clear()
                vars(st).update(d)
            raise

    def warm_coef(self, slots):
        return np.column_stack([st.warm_coef(slots) for st in self.states])

    def ensure_capacity(self, capacity):
        for st in self.states:
            st.ensure_capacity(capacity)

    def take(self, keep, capacity):
        for st in self.states:
            st.take(keep, capacity)

    def reusable_slots(self):
        common = None
        for st in self.states:
            slots = st.reusable_slots()
            if slots is None:
                continue
            common = slots if common is None else np.intersect1d(common, slots)
        return common

    # ------------------------------------------------------------- persistence
    def to_arrays(self, keep):
        out = {}
        for k, st in enumerate(self.states):
            for name, a in st.to_arrays(keep).items():
                if k and name in self._shared_names():
                    continue  # the kernel matrix is written once
                out[_member(k, name)] = a
        if len(out) > _MAX_STATE_MEMBERS:  # a file holds 64 members: drop the optional ones
            required = set(type(self.states[0]).saved_shapes(len(keep), 1))
            out = {
                key: a
                for key, a in out.items()
                if any(key == _member(k, name) for k in range(self.n_classes) for name in required)
            }
        return out

    def _shared_names(self):
        return ("state_K",) if hasattr(self.states[0], "gram") else ()

    def class_arrays(self, arrays, k):
        """The arrays of class ``k``'s binary state among a file's ``arrays`` (the names its
        own ``to_arrays`` gives them)."""
        out = {}
        for key, a in arrays.items():
            prefix = f"state_c{k}_"
            if key.startswith(prefix):
                out["state_" + key[len(prefix) :]] = a
            elif key == "state_c0_K":
                out.setdefault("state_K", a)
        return out

    @staticmethod
    def shapes(base, n_classes, n, p, optional=False):
        """``{member: shape}`` of a K-class state over binary states ``base``."""
        per = base.optional_shapes(n, p) if optional else base.saved_shapes(n, p)
        shared = ("state_K",) if base.kernel and "state_K" in per else ()
        return {
            _member(k, name): s
            for k in range(n_classes)
            for name, s in per.items()
            if not (k and name in shared)
        }

    @classmethod
    def from_arrays_of(
        cls, arrays, opts, *, base, n_classes, y, capacity, max_rank=64, results=None
    ):
        """The state written by :meth:`to_arrays`; ``y`` the live class indices, ``results``
        the per-class solver diagnostics (None for the closed form)."""
        st = cls(opts, max_rank, base=base, n_classes=n_classes)
        names = set(base.saved_shapes(y.shape[0], 1)) | set(base.optional_shapes(y.shape[0], 1))
        for k in range(n_classes):
            mine = {} if "ledger_w" not in arrays else {"ledger_w": arrays["ledger_w"]}
            for name in names:
                key = _member(k, name)
                if key not in arrays and name == "state_K":
                    key = _member(0, name)
                if key in arrays:
                    mine[name] = arrays[key]
            res = None if results is None else results[k]
            st.states.append(
                base.from_arrays(
                    mine,
                    opts,
                    y=class_codes(y, k),
                    capacity=capacity,
                    max_rank=max_rank,
                    result=res,
                )
            )
        st._share_gram()
        return st


#: Members a K-class state writes at most with its optional arrays (a stored Hessian, which
#: the next update otherwise rebuilds): the model file's other members need the rest of 64.
_MAX_STATE_MEMBERS = 32


def _member(k, name):
    """The archive member of class ``k``'s array ``name`` (``state_beta`` → ``state_c3_beta``)."""
    return f"state_c{k}_{name[len('state_') :]}"


class _Column:
    """Class ``k``'s view of a K-output closed-form state: its solution column, residual and
    right-hand side; the matrix, its tracked inverse and the kernel are the shared ones."""

    def __init__(self, inner, k):
        self._inner, self._k = inner, k

    def __getattr__(self, name):
        if name == "_inner":  # unpickling or copying: the attribute is not set yet
            raise AttributeError(name)
        return getattr(self._inner, name)

    result = None

    @property
    def beta(self):
        return self._inner.beta[:, self._k]

    @property
    def alpha(self):
        return self._inner.alpha[:, self._k]

    @property
    def b(self):
        return self._inner.b[:, self._k]

    @property
    def y(self):
        return self._inner.y[:, self._k]

    @property
    def solution(self):
        return self.alpha if self._inner.kernel else self.beta

    def gradient_norm(self):
        return float(self._inner.gradient_norms()[self._k])


class SharedOneVsRestState(OneVsRestState):
    """The K one-vs-rest problems of the squared loss as one K-output closed-form state: the
    targets are the K columns of ±1 codes, and one factorisation (one tracked inverse, one
    kernel matrix) serves every class, so an update costs about what a binary one does plus
    O(p·K) (Lee et al.'s updates with K right-hand sides).

    ``states`` are per-class views (:class:`_Column`) of the one state ``inner``.
    """

    def __init__(self, opts, max_rank=64, *, base, n_classes):
        super().__init__(opts, max_rank, base=base, n_classes=n_classes)
        self.inner = None

    @property
    def states(self):
        return [] if self.inner is None else [_Column(self.inner, k) for k in range(self.n_classes)]

    @states.setter
    def states(self, value):  # the base class resets the list; the views are made on demand
        pass

    def _share_gram(self):
        """One state: nothing to share."""

    @property
    def result(self):
        return None

    @property
    def beta(self):
        return self.inner.beta

    @property
    def alpha(self):
        return self.inner.alpha

    def gradient_norm(self):
        return float(self.inner.gradient_norm())

    def tracked_inverse(self):
        return self.inner.tracked_inverse()

    def counters(self):
        return self.inner.counters()

    def exact_matrix(self):
        return self.inner.exact_matrix()

    def checkpoint(self):
        new = self.blank()
        new.inner = self.inner.checkpoint()
        return new

    def fit(self, data, t, capacity, coef0=None, w=None):
        kw = {} if w is None else {"w": w}
        self.inner = self._make().fit(data, one_hot_codes(t, self.n_classes), capacity, None, **kw)
        return self

    def apply_change(self, change):
        self.inner.apply_change(_coded(change, None, self.n_classes))

    def warm_coef(self, slots):
        return self.inner.warm_coef(slots)

    def ensure_capacity(self, capacity):
        self.inner.ensure_capacity(capacity)

    def take(self, keep, capacity):
        self.inner.take(keep, capacity)

    def reusable_slots(self):
        return self.inner.reusable_slots()

    def to_arrays(self, keep):
        return self.inner.to_arrays(keep)

    def class_arrays(self, arrays, k):
        """Class ``k``'s binary arrays: the columns of the K-output ones."""
        return column_arrays(arrays, k)

    @staticmethod
    def shapes(base, n_classes, n, p, optional=False):
        if optional:
            return base.optional_shapes(n, p, n_outputs=n_classes)
        return base.saved_shapes(n, p, n_outputs=n_classes)

    @classmethod
    def from_arrays_of(
        cls, arrays, opts, *, base, n_classes, y, capacity, max_rank=64, results=None
    ):
        st = cls(opts, max_rank, base=base, n_classes=n_classes)
        st.inner = base.from_arrays(
            arrays,
            opts,
            y=one_hot_codes(y, n_classes),
            capacity=capacity,
            max_rank=max_rank,
            result=None,
        )
        return st


def column_arrays(arrays, k):
    """Column ``k`` of a K-output closed-form state's saved arrays, as a single-output state
    writes them (the matrix and the kernel are shared)."""
    out = {}
    for key, a in arrays.items():
        if key.startswith("state_"):
            two_d = key in ("state_beta", "state_b", "state_alpha")
            out[key] = a[:, k] if two_d else (a[:, :, k] if key == "state_b_parts" else a)
    return out


def column_view(state, k):
    """Output ``k`` of a K-output closed-form state, read as a single-output one."""
    return _Column(state, k)
