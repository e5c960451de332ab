"""Load-time checks of a model file's arrays and of the invariants that tie them together.

:func:`check_arrays` checks the members' values (finite floats, labels, classes);
:func:`check_statistics` checks, state by state (class by class for a one-vs-rest state, output
by output for a multi-output one), that the stored state is the state of the stored rows and
labels: the intercept column, ``ΦᵀΦ + ρI`` against the counts, the kernel matrix against the
kernel of the stored rows, the stored solution against the stored problem
(:func:`_check_solution`) and every stored row against what the state keeps of it
(:func:`_check_rows`).  Tolerances are rounding bounds of the quantities compared, so they
follow the stored problem's scale; the matrices ``save`` writes are exactly symmetric (the
rounding residue of earlier updates is projected away, see ``_states._squared``).

The branches on a state's ``kind`` (``"primal_squared"``, ``"primal_newton"``, ...) in
:func:`_check_rows` and :func:`_check_solution` are per-state knowledge that belongs to the
state classes (``deltafit._states``); they are kept together here, behind
:func:`check_statistics`, so that they can be replaced by the states' own checks of their
saved arrays in one place.
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Mapping
from typing import Any

import numpy as np
import scipy.sparse as sp

from deltafit._states._one_vs_rest import class_codes, column_arrays, column_view
from deltafit.persistence._schema import class_records

__all__ = ["check_arrays", "check_statistics"]


def check_arrays(meta: Mapping[str, Any], arrays: Mapping[str, np.ndarray],
                 classifier: bool) -> None:
    """The values of the members: finite floats, labels ±1 with both classes, the classes."""
    for key, val in arrays.items():
        if val.dtype.kind == "f" and not np.all(np.isfinite(val)):
            raise ValueError(f"corrupt model file: array {key} holds NaN or inf")
    if "classes" in arrays:
        c = arrays["classes"]
        ok = True
        try:
            ok = bool(np.all(c[:-1] < c[1:]))
        except TypeError:
            ok = False
        if not ok:
            raise ValueError(f"corrupt model file: classes {c.tolist()!r} are not distinct "
                             "labels in increasing order")
    if "ledger_y" in arrays:
        y = arrays["ledger_y"]
        if classifier and meta["one_vs_rest"] is not None:
            K = meta["one_vs_rest"]["n_classes"]
            if not np.all((y >= 0) & (y < K) & (y == np.round(y))):
                raise ValueError(f"corrupt model file: a classifier's labels are not class "
                                 f"indices 0..{K - 1}")
            if not meta["classes_given"] and np.all(y == y[0]):
                raise ValueError("corrupt model file: a classifier's labels hold one class")
        elif classifier:
            if not np.all(np.abs(y) == 1.0):
                raise ValueError("corrupt model file: a classifier's labels are not ±1")
            if not meta["classes_given"] and (np.all(y > 0) or np.all(y < 0)):
                raise ValueError("corrupt model file: a classifier's labels hold one class")


def check_statistics(model: Any, meta: Mapping[str, Any], arrays: Mapping[str, np.ndarray],
                     st: Any) -> None:
    """:func:`_check_binary_statistics` for the state, class by class for a one-vs-rest one."""
    if meta["n_outputs"]:  # one column of the K-output state at a time
        y = arrays.get("ledger_y")
        for k in range(meta["n_outputs"]):
            mine = {key: a for key, a in arrays.items() if key != "ledger_y"}
            if y is not None:
                mine["ledger_y"] = y[:, k]
            mine.update(column_arrays(arrays, k))
            _check_binary_statistics(model, meta, mine, column_view(st, k), first=k == 0)
        return
    if not st.n_classes:
        _check_binary_statistics(model, meta, arrays, st)
        return
    y = arrays["ledger_y"]
    for k, (sub, (solver, hinge)) in enumerate(zip(st.states,
                                                   class_records(meta, st.n_classes))):
        mine = {key: a for key, a in arrays.items() if not key.startswith("state_")}
        mine["ledger_y"] = class_codes(y, k)
        mine.update(st.class_arrays(arrays, k))
        _check_binary_statistics(model, dict(meta, solver=solver, hinge=hinge), mine, sub,
                                 first=k == 0)


def _check_binary_statistics(model, meta, arrays, st, first=True):
    """What ties the state to the ledger and to the fitted parameters: the intercept column of
    the stored rows, ``ΦᵀΦ + ρI`` and ``Φᵀt`` on the constant feature, the stored kernel matrix
    against the kernel of the stored rows."""
    n = meta["n_samples"]
    s = float(model._s)
    intercept = bool(model._spec["fit_intercept"])
    if not model._kernel and meta["keep_rows"] and intercept:
        col = arrays["ledger_X"][:, -1]
        if not np.all((col.toarray().ravel() if sp.issparse(col) else col) == s):
            raise ValueError("corrupt model file: the stored rows' intercept column is not "
                             f"intercept_scaling = {s}")
    if st.kind == "primal_squared" and intercept:
        # with sample weights the statistics are ΦᵀWΦ + ρI and ΦᵀWy: the constant feature
        # counts the total weight, s²·Σw + ρ, and sums s·Σ w_i y_i
        M, b = arrays["state_M"], arrays["state_b"]
        w = arrays.get("ledger_w")
        expected = (n if w is None else float(np.sum(w))) * s * s + st.rho
        if abs(M[-1, -1] - expected) > 1e-6 * expected:
            raise ValueError("corrupt model file: ΦᵀΦ + ρI does not count the samples "
                             f"(constant feature: {M[-1, -1]:.6g}, expected {expected:.6g})")
        total = None
        if "ledger_y" in arrays:
            y = arrays["ledger_y"]
            wy = y if w is None else w * y
            total, scale = float(wy.sum()), float(np.abs(wy).sum()) + 1.0
        elif meta["n_positive"] is not None and w is None:
            # (weighted and without labels: which weights are the positives' is unknown)
            total, scale = float(2 * meta["n_positive"] - n), float(n)
        if total is not None and abs(b[-1] - s * total) > 1e-6 * s * scale:
            raise ValueError("corrupt model file: Φᵀy does not match the labels on the "
                             "constant feature")
    _check_solution(meta, arrays, st)
    if meta["keep_rows"]:
        _check_rows(model, meta, arrays, st, first)
    if model._kernel:
        m = min(n, 8)
        X = arrays["ledger_X"][:m]
        K = arrays["state_K"][:m, :m]
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                Kx = np.asarray(model._k(X, X), dtype=np.float64)
        except Exception as exc:  # noqa: BLE001 - scikit-learn's kernels raise many kinds
            raise ValueError(f"corrupt model file: the fitted kernel cannot be evaluated "
                             f"({type(exc).__name__}: {exc})") from None
        scale = float(np.max(np.abs(Kx), initial=0.0)) + 1e-300
        if Kx.shape != K.shape or not np.all(np.abs(Kx - K) <= 1e-8 * scale):
            raise ValueError("corrupt model file: the stored kernel matrix is not the fitted "
                             "kernel of the stored rows")


_EPS = float(np.finfo(np.float64).eps)


_ROW_BLOCK = 1 << 16  # rows per block of the load-time products (bounded extra memory)


def _blocks(n):
    return (slice(i, min(i + _ROW_BLOCK, n)) for i in range(0, max(n, 1), _ROW_BLOCK))


def _abs_rows(B):
    return abs(B) if sp.issparse(B) else np.abs(B)


def _refuse_rows(what, where):
    raise ValueError(f"corrupt model file: the stored rows do not give the stored {what} "
                     f"({where}): a stored row was changed, or the state was")


def _check_rows(model, meta, arrays, st, first=True):
    """The stored rows (``ledger_X``) against what the state keeps of them, so that a file
    whose rows were changed is refused (its model would predict from the old state while
    updates read the changed rows).

    Each test compares a product computed from the rows with the stored one, entry by entry,
    against a rounding bound of that entry: ``4ε·(terms summed)`` times the sum of the
    products' absolute values — the most rounding can move it, whatever the scale of the
    problem (tiny weights, huge or tiny C).

    * squared loss (linear): ``(ΦᵀWΦ + ρI)v`` for a random ``v`` against ``M v`` (once for a
      matrix shared by K outputs or classes: ``first``), plus the error ``lost`` that the
      state itself bounds for the digits removals and reweights cancelled in ``M`` since it
      was last computed from the rows (a 2-norm bound, so ``lost·‖v‖`` per entry); ``ΦᵀWt``
      against ``b`` while no cancellation has happened (``lost`` = 0: afterwards ``b``
      carries the residue of the cancelled samples, which the state does not bound);
    * logistic / squared hinge (linear): the stored scores ``z_i`` against ``φ_iᵀβ``;
    * hinge (linear): ``β`` against ``Φᵀ(α∘t)`` (the dual's primal point), and the KKT
      conditions at the margins ``t_i φ_iᵀβ`` against the saved certificate
      ``kkt_violation`` (which already includes the solve's rounding bound): a changed row
      whose dual variable is 0 and which stays outside the margin leaves β the exact fit of
      the changed rows, and is not told apart;
    * kernel models: every row's kernel values against 8 random stored rows, against the
      stored kernel matrix (``1e-8`` of its largest value, as for its leading block).

    The products run over blocks of rows: the extra memory is a block, not a copy of Φ.
    """
    Phi = arrays.get("ledger_X")
    if Phi is None:
        return
    n, p = Phi.shape
    rng = np.random.default_rng()
    kind = st.kind
    w = arrays.get("ledger_w")
    w = np.ones(n) if w is None else np.asarray(w, dtype=np.float64)
    t = arrays.get("ledger_y")
    if kind == "primal_squared":
        M = arrays["state_M"]
        limits = arrays.get("state_limits")
        lost = float(limits[2]) if limits is not None else 0.0
        check_b = t is not None and lost == 0.0 and limits is not None
        if not (first or check_b):
            return
        rho = float(st.rho)
        v = rng.standard_normal(p)
        av = np.abs(v)
        Mv, S = rho * v, rho * av + np.abs(M) @ av
        if check_b:
            t = np.asarray(t, dtype=np.float64)
            b = arrays["state_b"]
            bt, Sb = np.zeros(p), np.abs(b)
        for rows in _blocks(n):  # two passes over a block and its |·|, both sums at once
            B, wb = Phi[rows], w[rows]
            A = _abs_rows(B)
            u, au = wb * np.asarray(B @ v).ravel(), wb * np.asarray(A @ av).ravel()
            if check_b:
                u = np.column_stack([u, wb * t[rows]])
                au = np.column_stack([au, wb * np.abs(t[rows])])
            Bu, Au = np.asarray(B.T @ u), np.asarray(A.T @ au)
            if check_b:
                Mv, S = Mv + Bu[:, 0], S + Au[:, 0]
                bt, Sb = bt + Bu[:, 1], Sb + Au[:, 1]
            else:
                Mv, S = Mv + Bu.ravel(), S + Au.ravel()
        if first:
            err = np.abs(M @ v - Mv)
            bad = np.flatnonzero(err > 4.0 * _EPS * (n + p + 4) * S +
                                 lost * np.linalg.norm(v))
            if bad.size:
                _refuse_rows("matrix ΦᵀWΦ + ρI", f"features {bad[:5].tolist()}")
        if check_b:
            bad = np.flatnonzero(np.abs(b - bt) > 4.0 * _EPS * (n + 4) * Sb)
            if bad.size:
                _refuse_rows("targets' statistics ΦᵀWt", f"features {bad[:5].tolist()}")
    elif kind == "primal_newton":
        zd = arrays.get("state_scores")
        if zd is None:
            return
        beta = arrays["state_beta"]
        ab = np.abs(beta)
        for rows in _blocks(n):
            B, z = Phi[rows], zd[rows, 0]
            S = np.asarray(_abs_rows(B) @ ab).ravel() + np.abs(z)
            bad = np.flatnonzero(np.abs(z - np.asarray(B @ beta).ravel()) >
                                 4.0 * _EPS * (p + 4) * S)
            if bad.size:
                _refuse_rows("scores Φβ", f"rows {(bad[:5] + rows.start).tolist()}")
    elif kind == "primal_hinge":
        beta, dual = arrays["state_beta"], arrays["state_dual"]
        hinge = meta.get("hinge")
        kkt = None if hinge is None else float(hinge["kkt_violation"]) * (1.0 + 1e-9)
        bt, S, ab, box = np.zeros(p), np.abs(beta), np.abs(beta), float(st.C) * w
        for rows in _blocks(n):
            B, a, tb = Phi[rows], dual[rows], t[rows]
            A = _abs_rows(B)
            bt = bt + np.asarray(B.T @ (a * tb)).ravel()
            S = S + np.asarray(A.T @ a).ravel()
            if kkt is None:
                continue
            g = tb * np.asarray(B @ beta).ravel() - 1.0  # the dual gradient ∇_i, projected
            P = np.where(a <= 0.0, np.minimum(g, 0.0),  # as the certificate projects it
                         np.where(a >= box[rows], np.maximum(g, 0.0), g))
            P[w[rows] <= 0.0] = 0.0  # samples of weight 0 are out of the problem
            slack = 4.0 * _EPS * (p + 4) * (np.asarray(A @ ab).ravel() + 1.0)
            bad = np.flatnonzero(np.abs(P) > kkt + slack)
            if bad.size:
                _refuse_rows("margins of the dual solution (KKT conditions beyond the saved "
                             "kkt_violation)", f"rows {(bad[:5] + rows.start).tolist()}")
        bad = np.flatnonzero(np.abs(beta - bt) > 4.0 * _EPS * (n + 4) * S)
        if bad.size:
            _refuse_rows("coefficients Φᵀ(α∘t) of the dual solution",
                         f"features {bad[:5].tolist()}")
    elif model._kernel and n > 8 and first:
        K = arrays["state_K"]
        cols = np.sort(rng.choice(n, size=8, replace=False))
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                Kx = np.asarray(model._k(Phi, Phi[cols]), dtype=np.float64)
        except Exception as exc:  # noqa: BLE001 - scikit-learn's kernels raise many kinds
            raise ValueError(f"corrupt model file: the fitted kernel cannot be evaluated "
                             f"({type(exc).__name__}: {exc})") from None
        scale = float(np.max(np.abs(Kx), initial=0.0)) + 1e-300
        bad = np.flatnonzero(np.any(np.abs(Kx - K[:, cols]) > 1e-8 * scale, axis=1))
        if bad.size:
            _refuse_rows("kernel matrix", f"rows {bad[:5].tolist()}")


def _check_solution(meta, arrays, st):
    """The stored solution solves the stored problem: the closed form's normal equations hold
    to rounding, and Newton's gradient is the one its saved certificate ``grad_norm`` states
    (the sensitivity bounds rely on it).  The hinge's dual solution is checked by its state."""
    norm = np.linalg.norm
    kind = st.kind
    if kind == "primal_squared":
        M, b, beta = arrays["state_M"], arrays["state_b"], arrays["state_beta"]
        residual, scale = norm(M @ beta - b), norm(M) * norm(beta) + norm(b)
    elif kind == "dual_squared":
        K, alpha, y = arrays["state_K"], arrays["state_alpha"], arrays["ledger_y"]
        w = arrays.get("ledger_w")
        if w is None:
            residual = norm(K @ alpha + st.rho * alpha - y)
            scale = (norm(K) + st.rho) * norm(alpha) + norm(y)
        else:
            # (K + ρW⁻¹)α = y over the samples of positive weight and α_i = 0 where w_i = 0:
            # W(Kα − y) + ρα = 0 states both
            w = np.asarray(w, dtype=np.float64)
            wmax = float(np.max(w, initial=0.0))
            if np.ndim(alpha) == 2:
                w = w[:, None]
            residual = norm(w * (K @ alpha - y) + st.rho * alpha)
            scale = (wmax * norm(K) + st.rho) * norm(alpha) + wmax * norm(y)
    elif kind in ("primal_newton", "kernel_newton"):
        y, C, saved = arrays["ledger_y"], st.C, float(meta["solver"]["grad_norm"])
        w = arrays.get("ledger_w", 1.0)  # C·w_i per sample
        if kind == "primal_newton":
            Phi, beta = arrays["ledger_X"], arrays["state_beta"]
            g = beta + C * (Phi.T @ (w * st.loss.d1(y, Phi @ beta)))
            size, gnorm = norm(beta), norm(g)
        else:
            K, alpha = arrays["state_K"], arrays["state_alpha"]
            g = alpha + C * w * st.loss.d1(y, K @ alpha)
            size = math.sqrt(max(float(alpha @ K @ alpha), 0.0))
            gnorm = math.sqrt(max(float(g @ K @ g), 0.0))
        residual, scale = max(gnorm - saved, 0.0), size + saved
    else:
        return
    if not residual <= 1e-6 * scale + 1e-300:
        raise ValueError(f"corrupt model file: the stored solution does not solve the stored "
                         f"problem (residual {residual:.3g} at scale {scale:.3g})")
