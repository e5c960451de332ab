"""The interface every exact-update state implements, the data change it applies, and the
registry of states (how an estimator picks one, and how a model file names it).

A *state* holds the solution of the canonical problem (ARCHITECTURE.md, "The problem") and
whatever makes it cheap to update exactly: the sufficient statistics and tracked inverse of the
squared loss (Lee et al., "Exact incremental and decremental learning for LS-SVM"), or the stored
rows / kernel matrix a warm-started re-solve needs for the other losses.  Six states implement
:class:`ModelState`, one per (linear / kernel) × (squared / smooth / hinge):

===============  ==========================  ==========================  ========================
model            squared loss                logistic / squared hinge    hinge
===============  ==========================  ==========================  ========================
linear (primal)  ``PrimalSquaredState``      ``PrimalNewtonState``       ``PrimalHingeState``
kernel (dual)    ``DualSquaredState``        ``KernelNewtonState``       ``KernelHingeState``
===============  ==========================  ==========================  ========================

The estimators build a :class:`DataChange` and hand it to :meth:`ModelState.apply_change`;
persistence writes :meth:`ModelState.to_arrays` under :attr:`ModelState.kind` and reads it back
with ``_registry.state_class`` and :meth:`ModelState.from_arrays`.  Neither chooses code by the
state's type or the loss's name.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import ClassVar

import numpy as np
import scipy.sparse as sp

__all__ = [
    "SolverOptions",
    "DataChange",
    "ModelState",
    "grown",
    "taken",
    "padded",
    "checked",
    "saved_coef",
    "check_symmetric",
    "needs_result",
]


@dataclass
class SolverOptions:
    """The fitted problem's settings a state keeps: they survive ``set_params`` on the model.

    Parameters
    ----------
    loss : deltafit.losses.Loss
    C : float
    tol : float
    max_iter : int
    callback : callable or None
        Called by the iterative solvers after each iteration.
    """

    loss: object
    C: float
    tol: float
    max_iter: int
    callback: object = None

    @property
    def rho(self):
        """``ρ = 1/(2C)``, Lee et al.'s regularisation constant in the canonical objective."""
        return 1.0 / (2.0 * self.C)


@dataclass
class DataChange:
    """One validated data change in the state's terms, built by the estimator before anything
    changes (the ledger still describes the model before the change; the additions' slots are
    allocated but not written).

    Parameters
    ----------
    ledger : Ledger
        The model's ledger (read only).
    add_slots, t_add : ndarray or None
        Slots chosen for the added samples and their encoded targets.
    remove_slots : ndarray of int or None
        Slots of the removed samples.
    relabel_slots, relabel_t : ndarray or None
        Slots of the relabelled samples and their new encoded targets.
    rows_add, rows_remove, rows_relabel : ndarray, Rows or None
        Linear models: Φ of the added, removed and relabelled samples.
    K_cross, K_new : ndarray or None
        Kernel models: ``k(stored, added)`` by slot (capacity × k, zero at free slots) and
        ``k(added, added)``.
    remove_t, relabel_t_old : ndarray or None
        The removed samples' targets and the relabelled samples' current targets, as the
        caller gave them (checked against the ledger's digests), for a ledger that keeps no
        labels; None: read from the ledger.
    w_add : ndarray or None
        The added samples' weights (None: 1 each).
    reweight_slots, reweight_w : ndarray or None
        Slots of the samples whose weight changes, and their new weights.
    rows_reweight, reweight_t : ndarray or None
        For a ledger that keeps no rows or labels: Φ of the reweighted samples and their
        targets after the change's relabels (given by the caller, checked against the
        digests); None otherwise.
    """

    ledger: object
    add_slots: np.ndarray | None = None
    t_add: np.ndarray | None = None
    remove_slots: np.ndarray | None = None
    relabel_slots: np.ndarray | None = None
    relabel_t: np.ndarray | None = None
    rows_add: object = None
    rows_remove: object = None
    rows_relabel: object = None
    K_cross: np.ndarray | None = None
    K_new: np.ndarray | None = None
    remove_t: np.ndarray | None = None
    relabel_t_old: np.ndarray | None = None
    w_add: np.ndarray | None = None
    reweight_slots: np.ndarray | None = None
    reweight_w: np.ndarray | None = None
    rows_reweight: object = None
    reweight_t: np.ndarray | None = None

    @property
    def weighted(self):
        """Whether some sample has (or will have) a weight other than 1."""
        return bool(
            self.ledger.weighted or self.w_add is not None or self.reweight_slots is not None
        )

    def weights_at(self, slots):
        """The weights after the change of the samples at ``slots`` (kept or added ones);
        None while every weight is 1 (the solvers then run unweighted)."""
        if not self.weighted:
            return None
        W = self.ledger.w.copy()
        if self.reweight_slots is not None:
            W[self.reweight_slots] = self.reweight_w
        if self.add_slots is not None:
            W[self.add_slots] = 1.0 if self.w_add is None else self.w_add
        return W[np.asarray(slots, dtype=np.intp)]

    @property
    def removed_targets(self):
        """The removed samples' current targets."""
        if self.remove_slots is None:
            return None
        if self.remove_t is not None:
            return self.remove_t
        return self.ledger.y[self.remove_slots]

    @property
    def target_shift(self):
        """New minus current target of each relabelled sample."""
        if self.relabel_slots is None:
            return None
        old = (
            self.relabel_t_old
            if self.relabel_t_old is not None
            else self.ledger.y[self.relabel_slots]
        )
        return self.relabel_t - old

    def kept(self):
        """The slots that stay (active, not removed), in slot order, and their targets after
        the relabels."""
        led = self.ledger
        keep = led.active.copy()
        if self.remove_slots is not None:
            keep[self.remove_slots] = False
        A = np.flatnonzero(keep)
        t = led.y[A].copy()
        if self.relabel_slots is not None:
            t[np.searchsorted(A, self.relabel_slots)] = self.relabel_t
        return A, t

    def rows_after(self):
        """Linear models: ``(slots, Φ, t)`` of the problem after the change, the kept samples
        in slot order followed by the added ones."""
        A, t = self.kept()
        Phi = self.ledger.X[A]
        if self.add_slots is None:
            return A, Phi, t
        if sp.issparse(Phi) or sp.issparse(self.rows_add):
            rows = sp.vstack([sp.csr_matrix(Phi), sp.csr_matrix(self.rows_add)], format="csr")
        else:
            rows = np.vstack([Phi, self.rows_add])
        return np.concatenate([A, self.add_slots]), rows, np.concatenate([t, self.t_add])

    def slots_after(self):
        """Kernel models: ``(slots, t)`` of the problem after the change, in slot order."""
        A, t = self.kept()
        if self.add_slots is None:
            return A, t
        slots = np.concatenate([A, self.add_slots])
        order = np.argsort(slots, kind="stable")
        return slots[order], np.concatenate([t, self.t_add])[order]


class ModelState:
    """What every exact-update state offers (see the module docstring for the six of them).

    Class attributes
    ----------------
    kind : str
        The name a model file stores the state under.
    kernel : bool
        Whether the solution is α over the samples (kernel) or β over the features (linear).
    loss_names : tuple of str
        The losses it solves.
    warm_per_sample : bool
        Whether :meth:`warm_coef` (and ``fit``'s ``coef0``) holds one value per sample (dual
        or expansion coefficients) rather than one per feature.
    closed_form : bool
        Whether the state updates in closed form (the squared loss: no solver diagnostics, and
        one factorisation may serve several outputs or one-vs-rest classes).
    keeps_no_rows : bool
        Whether a linear model with this state may keep digests of its rows instead of the
        rows (``keep_data=False``: only the closed form, whose statistics suffice).

    Attributes
    ----------
    opts : SolverOptions
        The fitted problem's loss, C and solver settings.
    result : SolverResult or None
        The last solve's result; None for the closed form (its residual is computed from the
        exact statistics instead).
    """

    kind: ClassVar[str]
    kernel: ClassVar[bool]
    loss_names: ClassVar[tuple]
    warm_per_sample: ClassVar[bool]
    closed_form: ClassVar[bool] = False
    keeps_no_rows: ClassVar[bool] = False
    result = None
    #: K ≥ 3: a one-vs-rest state of K binary ones (``_multiclass.OneVsRestState``); 0: one
    #: problem
    n_classes = 0

    def __init__(self, opts, max_rank=64):
        self.opts = opts
        self.max_rank = int(max_rank)

    # ---------------------------------------------------------------- problem
    @property
    def loss(self):
        """The fitted loss."""
        return self.opts.loss

    @property
    def C(self):
        """The fitted C."""
        return float(self.opts.C)

    @property
    def solution(self):
        """β over the features (linear) or α by slot (kernel)."""
        return self.alpha if self.kernel else self.beta

    def tracked_inverse(self):
        """``v -> H v`` for the inverse the closed form tracks; None for a state without one."""
        return None

    def counters(self):
        """Diagnostics of the closed form: ``n_refactor``, ``n_folds``, ``pending_rank``; -1
        where a state keeps no such count."""
        return {"n_refactor": -1, "n_folds": -1, "pending_rank": -1}

    def blank(self):
        """An unfitted state of the same kind and settings (what a refit starts from)."""
        return type(self)(self.opts, self.max_rank)

    def checkpoint(self):
        """An independent copy of the state (its arrays copied), to go back to if an update
        is interrupted half-way: O(size of the state)."""
        return _copied(self)

    # --------------------------------------------------------------- lifecycle
    def fit(self, data, t, capacity, coef0=None, w=None):
        """Solve from scratch on Φ (linear) or K (kernel) and targets ``t``; ``capacity`` is
        the ledger's, ``coef0`` a warm start in :meth:`warm_coef`'s terms, ``w`` the samples'
        weights (None: 1 each; the data term is ``C Σ w_i ℓ_i``).  Returns self."""
        raise NotImplementedError

    def apply_change(self, change):
        """Make the state the exact solution after ``change`` (a :class:`DataChange`); on
        ValueError the solution is exactly as before."""
        raise NotImplementedError

    def warm_coef(self, slots):
        """The coefficients a refit on the samples at ``slots`` warm-starts from (β, α or the
        hinge's dual variables)."""
        raise NotImplementedError

    def ensure_capacity(self, capacity):
        """Grow per-slot storage to the ledger's ``capacity`` (no-op for a per-feature state)."""

    def take(self, keep, capacity):
        """Reindex per-slot storage after a ledger compaction kept slots ``keep``."""

    def reusable_slots(self):
        """Removed slots the ledger may hand out again: None for all of them; the tracked
        kernel inverse frees a slot only once its row and column are exactly zero."""
        return None

    # ------------------------------------------------------------- persistence
    def to_arrays(self, keep):
        """The arrays that restore the state, over the live slots ``keep`` in ledger order."""
        raise NotImplementedError

    @classmethod
    def saved_shapes(cls, n, p):
        """``{name: shape}`` of the float64 arrays :meth:`to_arrays` writes for ``n`` live
        samples and ``p`` features (the width of Φ; kernel states do not use it): what a model
        file is checked against before any of its arrays is read."""
        raise NotImplementedError

    @classmethod
    def optional_shapes(cls, n, p):
        """``{name: shape}`` of further float64 arrays :meth:`to_arrays` may write (a file
        without them still loads)."""
        return {}

    @classmethod
    def from_arrays(cls, arrays, opts, *, y, capacity, max_rank=64, result=None):
        """The state written by :meth:`to_arrays`: ``y`` the live targets in ledger order,
        ``capacity`` the restored ledger's, ``result`` the saved solver diagnostics (None for
        the closed form).  Raises ValueError on inconsistent arrays."""
        raise NotImplementedError

    # ------------------------------------------------------- load-time checks
    # Called by persistence on a state loaded by :meth:`from_arrays`, with the file's arrays
    # (the state's and the ledger's: ``ledger_X``, ``ledger_y``, ``ledger_w`` where stored).
    # They read only the fitted problem (ρ, C, the loss) from the state and everything else
    # from ``arrays``, so that a one-vs-rest class or a K-output column can pass its own view
    # of them.  Each raises ValueError("corrupt model file: ...") on a violation; the default
    # checks nothing.
    def check_saved_statistics(
        self,
        arrays: dict,
        *,
        n: int,
        intercept_scaling: float,
        fit_intercept: bool,
        n_positive: int | None = None,
    ) -> None:
        """The saved statistics against the counts and labels (what ties the state to the
        ledger without reading the rows).

        Parameters
        ----------
        arrays : mapping of str to ndarray
            The file's arrays.
        n : int
            The live samples.
        intercept_scaling : float
            The constant feature's value (the model's ``_s``).
        fit_intercept : bool
            Whether the rows carry the constant feature.
        n_positive : int or None, default=None
            A classifier's count of positive samples, kept when it keeps no labels.
        """

    def check_saved_solution(self, arrays: dict, solver: dict | None = None) -> None:
        """The saved solution solves the saved problem (to rounding, or to the gradient norm
        its saved certificate states).

        Parameters
        ----------
        arrays : mapping of str to ndarray
            The file's arrays.
        solver : dict or None, default=None
            The saved solver diagnostics (``grad_norm``, ...); None for the closed form.
        """

    def check_saved_rows(
        self,
        arrays: dict,
        *,
        first: bool = True,
        hinge: dict | None = None,
        kernel: Callable | None = None,
    ) -> None:
        """The stored rows (``ledger_X``, when kept) against what the state keeps of them.

        Parameters
        ----------
        arrays : mapping of str to ndarray
            The file's arrays.
        first : bool, default=True
            Whether this is the first of several checks of the same rows (one-vs-rest
            classes, outputs): a test of what they share runs once.
        hinge : dict or None, default=None
            The saved hinge diagnostics (``kkt_violation``, ...) of a hinge-loss state.
        kernel : callable or None, default=None
            A kernel model's fitted kernel, ``kernel(X, Y) -> ndarray``.
        """


def _copied(obj):
    """A copy of ``obj`` whose arrays, lists and deltafit objects are copied too, except the
    objects no update changes in place, which share by saying so (``_checkpoint_shares``: the
    losses and the solver's results)."""
    new = object.__new__(type(obj))
    for k, v in vars(obj).items():
        if isinstance(v, np.ndarray):
            v = v.copy()
        elif isinstance(v, list):
            v = list(v)
        elif (
            hasattr(v, "__dict__")
            and type(v).__module__.startswith("deltafit.")
            and not getattr(v, "_checkpoint_shares", False)
        ):
            v = _copied(v)
        new.__dict__[k] = v
    return new


def grown(a, cap):
    """``a`` zero-padded to length ``cap`` (unchanged when long enough)."""
    if cap <= a.shape[0]:
        return a
    out = np.zeros(cap)
    out[: a.shape[0]] = a
    return out


def taken(a, keep, capacity):
    """``a[keep]`` moved to the front of a zero array of length ``capacity``."""
    out = np.zeros(capacity)
    out[: len(keep)] = a[keep]
    return out


def padded(a, capacity):
    """A length-``capacity`` zero array with ``a`` at the front."""
    out = np.zeros(capacity)
    out[: a.shape[0]] = a
    return out


def checked(arrays, shapes, what):
    """The float arrays ``arrays[name]`` for each ``name, shape`` in ``shapes``; ValueError
    naming ``what`` when any shape differs."""
    out = [np.asarray(arrays[name], dtype=np.float64) for name in shapes]
    if any(a.shape != s for a, s in zip(out, shapes.values())):
        raise ValueError(f"corrupt model file: the {what} has inconsistent shapes")
    return out


def check_symmetric(a, what, rtol=1e-10, scale=0.0):
    """ValueError naming ``what`` unless the square matrix ``a`` is symmetric up to ``rtol``
    times its largest entry, or times ``scale`` when larger (a bound on the matrices it was
    computed from: a saved kernel matrix is symmetric up to rounding)."""
    scale = max(float(np.max(np.abs(a), initial=0.0)), float(scale))
    if a.size and float(np.max(np.abs(a - a.T))) > rtol * scale:
        raise ValueError(f"corrupt model file: the {what} is not symmetric")


def needs_result(result, kind):
    """ValueError unless the solver diagnostics an iterative state keeps were saved."""
    if result is None:
        raise ValueError(f"corrupt model file: the {kind} state's solver diagnostics are missing")


def saved_coef(arrays):
    """The saved β of a linear state; ValueError unless it is a vector."""
    beta = np.asarray(arrays["state_beta"], dtype=np.float64)
    if beta.ndim != 1:
        raise ValueError("corrupt model file: the coefficients are not a vector")
    return beta
