"""Curvature and convergence reporting, shared by the solvers, the model states and the Dask
passes.

* :data:`MAX_CURVATURE` and :func:`check_curvature`: the refusal of a sample whose Newton
  curvature ``C·w·ℓ''·‖Φ(x)‖²`` is beyond double precision; :func:`curvature_failure`: the
  ValueError for a curvature matrix that LAPACK found not positive definite;
  :func:`row_curvature` and :func:`squared_norms`, the per-row quantities these name.
* :func:`warn_not_converged` (Newton: ``‖∇J‖`` above ``tol · ‖∇J(0)‖``) and
  :func:`warn_kkt_not_converged` (hinge: a KKT violation above ``tol``): the
  ConvergenceWarnings, pointing at the user's call; :func:`solve_label` prefixes them (e.g. by
  a one-vs-rest class).
"""

from __future__ import annotations

import os
import sys
import threading
import warnings
from collections.abc import Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING

import numpy as np
import scipy.sparse as sp
from numpy.typing import ArrayLike
from sklearn.exceptions import ConvergenceWarning
from sklearn.utils.extmath import row_norms

if TYPE_CHECKING:
    from deltafit.losses import Loss

__all__ = [
    "MAX_CURVATURE",
    "check_curvature",
    "curvature_failure",
    "row_curvature",
    "squared_norms",
    "solve_label",
    "warn_not_converged",
    "warn_kkt_not_converged",
]


#: The largest curvature ``C·w_i·ℓ''_max·‖Φ(x_i)‖²`` (kernel models: ``C·w_i·ℓ''_max·k(x_i, x_i)``)
#: one sample may bring to the Newton system of a smooth loss (logistic, squared hinge): 1/ε =
#: 2⁵² ≈ 4.5e15.  The curvature matrix is ``I + C Σ w_i ℓ''_i Φ(x_i)Φ(x_i)ᵀ``; a sample beyond
#: this bound makes its own term's rounding (ε times its curvature) exceed the unit
#: regularisation, so the computed matrix is not certifiably positive definite (Cholesky fails,
#: or a correction that removes the term cancels to noise), and the rounding of that sample's
#: score, ``ε·‖Φ(x)‖·‖β‖``, moves ∇J by ``ε·C w ℓ''‖Φ(x)‖²·‖β‖ > ‖β‖``: no solution can be
#: certified to any tolerance.  Such a sample is refused (ValueError) by fits and updates alike;
#: ``ℓ''_max`` is ¼ for the logistic loss and 2 for the squared hinge.
MAX_CURVATURE = 2.0**52


def _max_d2(loss):
    """``max_z ℓ''(y, z)`` of a smooth classification loss: its value at ``z = 0`` (logistic:
    ``σ(1 − σ) ≤ ¼``, largest at 0; squared hinge: 2 on the whole margin side)."""
    return float(loss.d2(np.ones(1), np.zeros(1))[0])


def check_curvature(
    sq: ArrayLike, cw: ArrayLike, loss: Loss, what: str = "X", norm: str = "‖Φ(x)‖²"
) -> None:
    """Refuse samples whose Newton curvature is beyond double precision (:data:`MAX_CURVATURE`).

    Parameters
    ----------
    sq : array-like of float
        Per sample, ``‖Φ(x)‖²`` (linear models) or ``k(x, x)`` (kernel models).
    cw : float or array-like of float
        ``C·w`` per sample (0: the sample is not in the problem).
    loss : deltafit.losses.Loss
        A smooth loss (logistic, squared hinge).
    what : str
        What the samples are, for the message.
    norm : str
        How ``sq`` is written in the message.

    Raises
    ------
    ValueError
        Naming the largest curvature, the sample's norm and ``C·w``, and what to do.

    Examples
    --------
    >>> import numpy as np
    >>> from deltafit.losses import get_loss
    >>> from deltafit.solvers import check_curvature
    >>> check_curvature(np.array([1.0, 4.0]), 1.0, get_loss("logistic"))   # fine: silent
    >>> try:
    ...     check_curvature(np.array([1e24]), 1.0, get_loss("logistic"))
    ... except ValueError as exc:
    ...     print(str(exc).split(" (")[0])
    X: a sample's Newton curvature C·w·ℓ''·‖Φ(x)‖² is 2.5e+23
    """
    sq = np.asarray(sq, dtype=np.float64).ravel()
    if sq.size == 0:
        return
    cw = np.broadcast_to(np.asarray(cw, dtype=np.float64), sq.shape)
    with np.errstate(over="ignore", invalid="ignore"):  # an overflow is refused below
        kappa = cw * sq * _max_d2(loss)
    i = int(np.argmax(np.where(np.isnan(kappa), np.inf, kappa)))
    if kappa[i] <= MAX_CURVATURE:
        return
    cwi = float(cw[i])
    raise ValueError(
        f"{what}: a sample's Newton curvature C·w·ℓ''·{norm} is {kappa[i]:.3g} ({norm} = "
        f"{sq[i]:.3g}, C·w = {cwi:.3g}, ℓ'' up to {_max_d2(loss):g} for the {loss.name} loss), "
        f"above 1/ε = {MAX_CURVATURE:.3g}: the curvature matrix I + C·Σ w ℓ'' Φ(x)Φ(x)ᵀ loses "
        "positive definiteness in double precision (its unit regularisation falls below the "
        "rounding of that sample's term) and no solution can be certified; scale the features "
        "(e.g. StandardScaler), or lower C or the sample's weight"
    )


def curvature_failure(
    exc: Exception,
    kappa: float | tuple[float, float] | None = None,
    what: str = "the Newton curvature matrix",
) -> ValueError:
    """The ValueError (in deltafit's words) for a Cholesky factorisation of a curvature matrix
    ``I + C·Σ w ℓ'' φ φᵀ`` that LAPACK found not positive definite (``exc``); ``kappa``: the
    largest per-sample curvature ``C·w·ℓ''·‖φ‖²`` in it and their sum, when known."""
    worst = ""
    if kappa is not None:
        top, total = kappa if isinstance(kappa, tuple) else (kappa, None)
        worst = f" (its samples' curvatures C·w·ℓ''·‖Φ(x)‖²: largest {float(top):.3g}"
        if total is not None:
            worst += f", sum {float(total):.3g}"
        worst += f"; about 1/ε = {MAX_CURVATURE:.3g} is what float64 resolves)"
    return ValueError(
        f"ill-conditioned system: {what} lost positive definiteness in double precision"
        f"{worst}: the features' scale or C make it too ill-conditioned to factorise (LAPACK: "
        f"{exc}); scale the features (e.g. StandardScaler) or lower C"
    )


def row_curvature(X: np.ndarray | sp.spmatrix, D: ArrayLike) -> tuple[float, float]:
    """``(max_i D_i ‖x_i‖², Σ_i D_i ‖x_i‖²)`` (dense or sparse rows)."""
    if X.shape[0] == 0:
        return 0.0, 0.0
    kappa = np.asarray(D) * squared_norms(X)
    return float(np.max(kappa)), float(np.sum(kappa))


def squared_norms(X: ArrayLike | sp.spmatrix) -> np.ndarray:
    """``‖x_i‖²`` of every row (dense or sparse; scikit-learn's ``row_norms``)."""
    if not sp.issparse(X):
        X = np.asarray(X, dtype=np.float64)
    return row_norms(X, squared=True)


_LABEL = threading.local()


@contextmanager
def solve_label(label: str) -> Iterator[None]:
    """Prefix the ConvergenceWarnings of the solves run in this thread by ``label`` (e.g. a
    one-vs-rest class)."""
    old = getattr(_LABEL, "value", "")
    _LABEL.value = f"{old}{label}: "
    try:
        yield
    finally:
        _LABEL.value = old


#: The folder of the deltafit package (this module lives in ``deltafit/solvers/``): frames
#: under it are deltafit's own.
_PACKAGE = os.path.dirname(os.path.dirname(os.path.abspath(__file__))) + os.sep


def _outside_stacklevel():
    """The ``stacklevel`` (for the caller of this function) of the first frame outside
    deltafit: the warning points at the user's call (``fit``, ``add``, ...), not at a state."""
    f, level = sys._getframe(1), 1
    while f is not None and f.f_code.co_filename.startswith(_PACKAGE):
        f, level = f.f_back, level + 1
    return level


def warn_not_converged(
    what: str, grad_norm: float, threshold: float, tol: float, it: int, hint: str = ""
) -> None:
    """The ConvergenceWarning of a solve that stopped with ``grad_norm > threshold``."""
    label = getattr(_LABEL, "value", "")
    warnings.warn(
        f"{label}{what} did not converge: it stopped after {it} iterations with grad_norm_ = "
        f"{grad_norm:.3g} > tol·‖∇J(0)‖ = {threshold:.3g} (tol={tol:.3g}); the solution is "
        f"certified only to ‖β − β*‖ ≤ grad_norm_, not equal to a converged refit{hint}; "
        "increase max_iter, or scale the features (e.g. StandardScaler)",
        ConvergenceWarning,
        stacklevel=_outside_stacklevel(),
    )


def warn_kkt_not_converged(
    what: str, it: int, kkt: float, threshold: float, radius: float, hint: str = ""
) -> None:
    """The ConvergenceWarning of a hinge solve that stopped with a KKT violation ``kkt >
    threshold``, naming ``grad_norm_`` (its certified radius ``radius``)."""
    label = getattr(_LABEL, "value", "")
    warnings.warn(
        f"{label}{what} did not converge: it stopped after {it} iterations with a KKT "
        f"violation {kkt:.3g} > {threshold:.3g} (tol, or the rounding floor) and grad_norm_ = "
        f"{radius:.3g} (the certified radius ‖β − β*‖ ≤ grad_norm_){hint}; increase max_iter",
        ConvergenceWarning,
        stacklevel=_outside_stacklevel(),
    )
